/* engine_avx2_16.c: AVX2 + F16C kernels for the 16-bit types (binary16, bfloat16), exact and
 * ordered, chosen at run time.
 *
 * A bfloat16 widens to binary32 by a shift, a binary16 by vcvtph2ps; both are exact. The exact
 * kernel sums in binary64 like engine_avx2.c (inexact flag, else the span check and the
 * binary32 tiers for bfloat16, the scalar element path for binary16) and rounds to nearest
 * through a round-to-odd float (round_nearest8). The ordered kernel adds in
 * binary32 and rounds each sum to the 16-bit type: binary32 holds every 16-bit value and more
 * than 2p + 2 bits (p = 8, 11), so that double rounding equals one rounding of the exact sum.
 */
#include "engine/engine_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>
#include <string.h>

#define AVX2_FUNCTION __attribute__((target("avx2,f16c")))
#define SMALL_CHUNK   256 /* elements per inexact-flag window (see engine_avx2.c) */

static inline void inexact_clear(void)
{
    unsigned int csr = 0x1f80; /* the default environment, flags clear */
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
}

static inline int inexact_raised(const double *sums)
{
    unsigned int csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr) : "r"(sums) : "memory");
    return (csr & 0x20) != 0;
}

/* Eight 16-bit values at p as binary32, exactly. */
AVX2_FUNCTION static inline __m256 load8(reprod_type type, const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (type == REPROD_FLOAT16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Round eight finite binary64 values (x0, then x1: exact sums of 16-bit values, so zero or at
 * least the format's smallest subnormal) to nearest-even in the 16-bit type: their 16-bit
 * patterns. First to odd at binary32 (24 >= p + 2 bits: no rounding boundary of the 16-bit
 * type lies between the sum and that float): the nearest float f, moved one step toward the
 * sum where it is inexact and even; x - f is exact (Sterbenz) and keeps its sign and its
 * nonzeroness as a float (both are multiples of 2^-149). Then binary16 by the hardware's
 * nearest conversion, bfloat16 by ties-to-even on the top half (overflow to infinity). */
AVX2_FUNCTION static inline __m128i round_nearest8(reprod_type type, __m256d x0, __m256d x1)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m128 f0 = _mm256_cvtpd_ps(x0), f1 = _mm256_cvtpd_ps(x1);
    __m128 d0 = _mm256_cvtpd_ps(_mm256_sub_pd(x0, _mm256_cvtps_pd(f0)));
    __m128 d1 = _mm256_cvtpd_ps(_mm256_sub_pd(x1, _mm256_cvtps_pd(f1)));
    __m256i bits = _mm256_castps_si256(_mm256_set_m128(f1, f0));
    __m256i difference = _mm256_castps_si256(_mm256_set_m128(d1, d0));
    __m256i exact = _mm256_cmpeq_epi32(_mm256_slli_epi32(difference, 1), _mm256_setzero_si256());
    __m256i odd = _mm256_and_si256(bits, one);
    __m256i step = _mm256_or_si256(_mm256_srai_epi32(_mm256_xor_si256(difference, bits), 31), one);
    bits = _mm256_add_epi32(
        bits, _mm256_andnot_si256(
                  _mm256_or_si256(exact, _mm256_sub_epi32(_mm256_setzero_si256(), odd)), step));
    if (type == REPROD_FLOAT16)
        return _mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_NEAREST_INT);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i top = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(top), _mm256_extracti128_si256(top, 1));
}

/* Bit l set: lane l of the 16 bfloat16 elements at offset j spans more binades than the
 * binary64 sums' window, or holds an infinity or NaN (the span check of engine_avx2.c on the
 * 16-bit magnitudes, 16 lanes per vector); each lane's largest magnitude and smallest nonzero
 * one minus one, as binary32 bits, into largest[l], smallest[l] (as
 * engine_beyond_window_chunk_fn takes them). */
AVX2_FUNCTION static uint32_t bfloat16_span_check(const void *const *contributions, int count,
                                                  size_t j, uint32_t *largest, uint32_t *smallest)
{
    const __m256i one = _mm256_set1_epi16(1);
    __m256i max = _mm256_setzero_si256(), min = _mm256_set1_epi16(-1);
    for (int k = 0; k < count; k++) {
        __m256i b = _mm256_loadu_si256((const __m256i *)((const uint16_t *)contributions[k] + j));
        b = _mm256_add_epi16(b, b); /* the magnitude, doubled: the sign shifted out */
        max = _mm256_max_epu16(max, b);
        min = _mm256_min_epu16(min, _mm256_sub_epi16(b, one)); /* zeros: all ones */
    }
    /* As binary32 bits: max is 2m, so m << 16 is max << 15; min is 2m - 1 (all ones for
     * zeros), so (m << 16) - 1 is (min << 15) | 0xffff (0x7fffffff for zeros). */
    const __m256i low_ones = _mm256_set1_epi32(0xffff);
    __m256i max0 = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(max));
    __m256i max1 = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(max, 1));
    __m256i min0 = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(min));
    __m256i min1 = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(min, 1));
    _mm256_storeu_si256((__m256i *)largest, _mm256_slli_epi32(max0, 15));
    _mm256_storeu_si256((__m256i *)(largest + 8), _mm256_slli_epi32(max1, 15));
    _mm256_storeu_si256((__m256i *)smallest,
                        _mm256_or_si256(_mm256_slli_epi32(min0, 15), low_ones));
    _mm256_storeu_si256((__m256i *)(smallest + 8),
                        _mm256_or_si256(_mm256_slli_epi32(min1, 15), low_ones));
    __m256i e_max = _mm256_srli_epi16(max, 8);
    __m256i e_min = _mm256_max_epi16(_mm256_srli_epi16(_mm256_add_epi16(min, one), 8), one);
    __m256i bad =
        _mm256_or_si256(_mm256_cmpgt_epi16(e_max, _mm256_set1_epi16(254)),
                        _mm256_cmpgt_epi16(_mm256_sub_epi16(e_max, e_min),
                                           _mm256_set1_epi16((short)engine_fast_window(8, count))));
    /* one byte a lane, in order within each 128-bit half */
    uint32_t bytes = (uint32_t)_mm256_movemask_epi8(_mm256_packs_epi16(bad, bad));
    return (bytes & 0xff) | ((bytes >> 8) & 0xff00);
}

/* Exact binary16 or bfloat16 in chunks of SMALL_CHUNK, blocks of 16: pass 1 sums in binary64
 * (exact when the flag stays clear; binary16 sums always are for N <= 8192). A binary16 chunk
 * with the flag raised is done element by element; a bfloat16 one runs the span check, and
 * its blocks with lanes beyond the window go to the binary32 tiers on vectors (wide_chunk: a
 * bfloat16 is a binary32), which decide the block's other lanes alike. While most blocks are
 * beyond the window, the next chunk goes to the tiers whole, without the binary64 sums.
 * Infinities and NaNs: the element path. Nearest sums round with round_nearest8, the rest
 * with engine_fast_finish. */
AVX2_FUNCTION size_t engine_exact_small_avx2(reprod_type type, reprod_op op, reprod_rounding dir,
                                             const void *const *contributions, int count,
                                             size_t element_count, uint16_t *result,
                                             engine_beyond_window_chunk_fn *wide_chunk,
                                             struct engine_accumulator *a, size_t *general)
{
    const struct engine_format f = engine_format_of(type);
    const int vector_round = op == REPROD_SUM && dir == REPROD_ROUND_NEAREST;
    const __m256i magnitude = _mm256_set1_epi64x(0x7fffffffffffffffll);
    const __m256i infinity = _mm256_set1_epi64x(0x7ff0000000000000ll);
    double sums[SMALL_CHUNK];
    uint32_t largest[SMALL_CHUNK], smallest[SMALL_CHUNK]; /* the span check's, bfloat16 */
    size_t j = 0;
    int wide = 0; /* bfloat16: the last chunk was mostly beyond the window */
    while (j + 16 <= element_count) {
        size_t length = element_count - j < SMALL_CHUNK ? element_count - j : SMALL_CHUNK;
        length &= ~(size_t)15;
        if (wide) {              /* the tiers decide in-window lanes too: skip the binary64 sums */
            int wide_groups = 0; /* the span check says whether the next chunk stays here */
            for (size_t b = 0; b < length; b += 16)
                wide_groups += bfloat16_span_check(contributions, count, j + b, largest + b,
                                                   smallest + b) != 0;
            wide = 2 * (size_t)wide_groups > length / 16;
            wide_chunk(op, dir, contributions, count, j, length, largest, smallest, result, a,
                       general);
            j += length;
            continue;
        }
        inexact_clear();
        for (size_t b = 0; b < length; b += 16) {
            __m256d s0 = _mm256_set1_pd(-0.0), s1 = s0, s2 = s0, s3 = s0;
            for (int k = 0; k < count; k++) {
                const uint16_t *p = (const uint16_t *)contributions[k] + j + b;
                __m256 x0 = load8(type, p), x1 = load8(type, p + 8);
                s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(x0)));
                s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(x0, 1)));
                s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(x1)));
                s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(x1, 1)));
            }
            _mm256_storeu_pd(sums + b, s0);
            _mm256_storeu_pd(sums + b + 4, s1);
            _mm256_storeu_pd(sums + b + 8, s2);
            _mm256_storeu_pd(sums + b + 12, s3);
        }
        int inexact = inexact_raised(sums);
        if (inexact && type != REPROD_BFLOAT16) {
            for (size_t i = j; i < j + length; i++)
                result[i] = (uint16_t)engine_exact_element(type, op, dir, contributions, count, i,
                                                           0, a, general);
            j += length;
            continue;
        }
        int wide_groups = 0;
        for (size_t b = 0; b < length; b += 16) {
            if (inexact && bfloat16_span_check(contributions, count, j + b, largest, smallest)) {
                wide_groups++;
                wide_chunk(op, dir, contributions, count, j + b, 16, largest, smallest, result, a,
                           general);
                continue;
            }
            const double *sum = sums + b;
            uint16_t rounded[16];
            int bad_mask = 0;
            for (int q = 0; q < 4; q++) {
                __m256d x = _mm256_loadu_pd(sum + 4 * q);
                __m256i nonfinite =
                    _mm256_cmpgt_epi64(_mm256_and_si256(_mm256_castpd_si256(x), magnitude),
                                       _mm256_sub_epi64(infinity, _mm256_set1_epi64x(1)));
                bad_mask |= _mm256_movemask_pd(_mm256_castsi256_pd(nonfinite)) << (4 * q);
            }
            if (vector_round) {
                __m128i low = round_nearest8(type, _mm256_loadu_pd(sum), _mm256_loadu_pd(sum + 4));
                __m128i high =
                    round_nearest8(type, _mm256_loadu_pd(sum + 8), _mm256_loadu_pd(sum + 12));
                if (bad_mask == 0) {
                    _mm_storeu_si128((__m128i *)(result + j + b), low);
                    _mm_storeu_si128((__m128i *)(result + j + b + 8), high);
                    continue;
                }
                _mm_storeu_si128((__m128i *)rounded, low);
                _mm_storeu_si128((__m128i *)(rounded + 8), high);
            }
            uint16_t out[16];
            for (int lane = 0; lane < 16; lane++) {
                size_t index = j + b + (size_t)lane;
                if ((bad_mask >> lane) & 1)
                    out[lane] = (uint16_t)engine_exact_element(type, op, dir, contributions, count,
                                                               index, 1, a, general);
                else if (vector_round)
                    out[lane] = rounded[lane];
                else
                    out[lane] = (uint16_t)engine_fast_finish(&f, type, op, dir, sum[lane], -1,
                                                             contributions, count, index);
            }
            memcpy(result + j + b, out, sizeof out);
        }
        wide = 2 * (size_t)wide_groups > length / 16;
        j += length;
    }
    return j;
}

/* Round eight binary32 values to nearest in the 16-bit type and back to binary32. NaN stays
 * NaN (its payload is not kept: the store makes every NaN canonical). */
AVX2_FUNCTION static inline __m256 round8(reprod_type type, __m256 x)
{
    if (type == REPROD_FLOAT16)
        return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    __m256i bits = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i up = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb);
    __m256 rounded = _mm256_castsi256_ps(_mm256_and_si256(up, _mm256_set1_epi32(-65536)));
    return _mm256_blendv_ps(rounded, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); /* NaN: as is */
}

/* Store eight binary32 values that are 16-bit values of `type` (NaN: canonical). */
AVX2_FUNCTION static inline void store8(reprod_type type, uint16_t *p, __m256 x)
{
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m128i h;
    if (type == REPROD_FLOAT16) {
        h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); /* exact: x is a binary16 value */
    } else {
        __m256i top = _mm256_srli_epi32(_mm256_castps_si256(x), 16);
        h = _mm_packus_epi32(_mm256_castsi256_si128(top), _mm256_extracti128_si256(top, 1));
    }
    __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(nan)),
                                    _mm256_extracti128_si256(_mm256_castps_si256(nan), 1));
    __m128i canonical = _mm_set1_epi16(type == REPROD_FLOAT16 ? 0x7e00 : 0x7fc0);
    _mm_storeu_si128((__m128i *)p, _mm_blendv_epi8(h, canonical, nan16));
}

/* The ordered fold of binary16 or bfloat16, 32 elements per block (four independent chains),
 * each step a binary32 addition rounded to the type. AVG divides at the end, element by element
 * (engine_round_quotient, to nearest). Returns how many elements it did. */
AVX2_FUNCTION size_t engine_ordered_small_avx2(reprod_type type, int average,
                                               const uint16_t *const *c, int count,
                                               size_t element_count, uint16_t *result)
{
    const struct engine_format f = engine_format_of(type);
    size_t j = 0;
    for (; j + 32 <= element_count; j += 32) {
        __m256 a0 = load8(type, c[0] + j), a1 = load8(type, c[0] + j + 8);
        __m256 a2 = load8(type, c[0] + j + 16), a3 = load8(type, c[0] + j + 24);
        for (int k = 1; k < count; k++) {
            const uint16_t *p = c[k] + j;
            a0 = round8(type, _mm256_add_ps(a0, load8(type, p)));
            a1 = round8(type, _mm256_add_ps(a1, load8(type, p + 8)));
            a2 = round8(type, _mm256_add_ps(a2, load8(type, p + 16)));
            a3 = round8(type, _mm256_add_ps(a3, load8(type, p + 24)));
        }
        if (!average) {
            store8(type, result + j, a0);
            store8(type, result + j + 8, a1);
            store8(type, result + j + 16, a2);
            store8(type, result + j + 24, a3);
            continue;
        }
        float acc[32];
        _mm256_storeu_ps(acc, a0);
        _mm256_storeu_ps(acc + 8, a1);
        _mm256_storeu_ps(acc + 16, a2);
        _mm256_storeu_ps(acc + 24, a3);
        for (int lane = 0; lane < 32; lane++) {
            double sum = acc[lane];
            uint64_t bits = engine_round_double_nearest_any(&f, sum);
            if (sum != 0 && engine_is_finite(sum))
                bits = engine_round_quotient(&f, sum, count, REPROD_ROUND_NEAREST);
            result[j + (size_t)lane] = (uint16_t)bits;
        }
    }
    return j;
}

#else /* not x86-64 */

size_t engine_exact_small_avx2(reprod_type type, reprod_op op, reprod_rounding dir,
                               const void *const *contributions, int count, size_t element_count,
                               uint16_t *result, engine_beyond_window_chunk_fn *wide_chunk,
                               struct engine_accumulator *a, size_t *general)
{
    (void)type, (void)op, (void)dir, (void)contributions, (void)count, (void)element_count;
    (void)result, (void)wide_chunk, (void)a, (void)general;
    return 0;
}

size_t engine_ordered_small_avx2(reprod_type type, int average, const uint16_t *const *c, int count,
                                 size_t element_count, uint16_t *result)
{
    (void)type, (void)average, (void)c, (void)count, (void)element_count, (void)result;
    return 0;
}

#endif
