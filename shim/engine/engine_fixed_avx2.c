/* engine_fixed_avx2.c: AVX2 blocks of the fixed-point route's host arrays (engine_fixed.c),
 * chosen at run time (engine_kernels_in_use).
 *
 * Each block gives the bits of engine_fixed.c's scalar form of the same block (the fuzzer
 * compares the codes, offsets, words and results of every kernel level): the codes of
 * binary32 and binary64 terms (binary64's from their high and low 32 bits); the layout of a
 * block of binary32 elements that all take one word, of binary64 elements that all take two;
 * the split of such blocks (m 2^shift, negated for a negative term); the rounding of a binary32
 * block, whose word sums S convert to binary64 exactly (|S| < 2^51: the integer added to the
 * bits of 1.5 2^52, that value then subtracted), are scaled by 2^B (a power of two: exact) and
 * rounded once to binary32 by the hardware in the direction MXCSR holds (the caller sets it).
 * Built where ENGINE_FIXED_VECTORS is 1 (x86-64, 64-bit size_t).
 */
#include "engine/engine_kernels.h"

#include "engine/engine_fixed.h" /* the codes' values */

#if ENGINE_FIXED_VECTORS

#include <immintrin.h>
#include <string.h>

#define AVX2_FUNCTION __attribute__((target("avx2")))

/* Codes [hi, lo] of 8 elements -> the 8 lo (odd) bytes, then the 8 hi (even) bytes. */
static const char odd_then_even[16] = {1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14};

/* The lo and hi codes of elements j .. j + 7 as int32 lanes. */
AVX2_FUNCTION static inline void codes_of_8(const uint8_t *codes, __m256i *lo, __m256i *hi)
{
    __m128i both = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)codes),
                                    _mm_loadu_si128((const __m128i *)(const void *)odd_then_even));
    *lo = _mm256_cvtepu8_epi32(both);
    *hi = _mm256_cvtepu8_epi32(_mm_srli_si128(both, 8));
}

/* The lowest effective field of the bucket a lo code names (engine_fixed.c's low_field):
 * bucket 254 - lo, << 3 for binary64 (shift 3), the first bucket's lowest field 1; int32
 * lanes, and int64 lanes (of 4 elements' codes) below. */
AVX2_FUNCTION static inline __m256i low_field_8(__m256i lo, int shift)
{
    __m256i bucket = _mm256_sub_epi32(_mm256_set1_epi32(ENGINE_FIXED_LAST_BUCKET), lo);
    __m256i first = _mm256_cmpeq_epi32(bucket, _mm256_set1_epi32(ENGINE_FIXED_FIRST_BUCKET));
    return _mm256_blendv_epi8(_mm256_slli_epi32(bucket, shift), _mm256_set1_epi32(1), first);
}

/* All ones in the lanes whose hi code is not a bucket (zeros only, an infinity or NaN). */
AVX2_FUNCTION static inline __m256i not_finite_8(__m256i hi)
{
    return _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(ENGINE_FIXED_FIRST_BUCKET), hi),
                           _mm256_cmpeq_epi32(hi, _mm256_set1_epi32(ENGINE_FIXED_HI_SPECIAL)));
}

/* ---- Codes ------------------------------------------------------------------------------- */

/* engine_fixed_codes as int32 lanes hi | lo << 8, from each term's bucket (if finite and
 * nonzero), whether it is zero or an infinity or NaN, and its sign bit (1 or 0). */
AVX2_FUNCTION static inline __m256i codes_from(__m256i bucket, __m256i zero, __m256i special,
                                               __m256i negative)
{
    __m256i hi = _mm256_blendv_epi8(bucket, _mm256_sub_epi32(_mm256_set1_epi32(1), negative), zero);
    __m256i lo = _mm256_sub_epi32(_mm256_set1_epi32(ENGINE_FIXED_LAST_BUCKET), bucket);
    lo = _mm256_blendv_epi8(lo, negative, zero);
    hi = _mm256_blendv_epi8(hi, _mm256_set1_epi32(ENGINE_FIXED_HI_SPECIAL), special);
    lo = _mm256_andnot_si256(special, lo);
    return _mm256_or_si256(hi, _mm256_slli_epi32(lo, 8));
}

/* The bucket of each lane's effective field max(field, 1) >> shift, clamped to the buckets. */
AVX2_FUNCTION static inline __m256i bucket_of(__m256i field, int shift)
{
    __m256i bucket = _mm256_srli_epi32(_mm256_max_epi32(field, _mm256_set1_epi32(1)), shift);
    return _mm256_min_epi32(_mm256_max_epi32(bucket, _mm256_set1_epi32(ENGINE_FIXED_FIRST_BUCKET)),
                            _mm256_set1_epi32(ENGINE_FIXED_LAST_BUCKET));
}

/* The codes of 8 binary32 terms. */
AVX2_FUNCTION static inline __m256i float32_codes_8(const char *terms)
{
    __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)terms);
    __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i special = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f7fffff));
    __m256i zero = _mm256_cmpeq_epi32(magnitude, _mm256_setzero_si256());
    return codes_from(bucket_of(_mm256_srli_epi32(magnitude, 23), 0), zero, special,
                      _mm256_srli_epi32(u, 31));
}

/* The codes of 8 binary64 terms, from their high and low 32 bits (buckets of 8 binades). */
AVX2_FUNCTION static inline __m256i float64_codes_8(const char *terms)
{
    const __m256i odd_then_even_32 = _mm256_setr_epi32(1, 3, 5, 7, 0, 2, 4, 6);
    __m256i a = _mm256_permutevar8x32_epi32(
        _mm256_loadu_si256((const __m256i *)(const void *)terms), odd_then_even_32);
    __m256i b = _mm256_permutevar8x32_epi32(
        _mm256_loadu_si256((const __m256i *)(const void *)(terms + 32)), odd_then_even_32);
    __m256i high = _mm256_permute2x128_si256(a, b, 0x20),
            low = _mm256_permute2x128_si256(a, b, 0x31);
    __m256i magnitude = _mm256_and_si256(high, _mm256_set1_epi32(0x7fffffff));
    __m256i special = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7fefffff));
    __m256i zero = _mm256_cmpeq_epi32(_mm256_or_si256(magnitude, low), _mm256_setzero_si256());
    return codes_from(bucket_of(_mm256_srli_epi32(magnitude, 20), 3), zero, special,
                      _mm256_srli_epi32(high, 31));
}

/* 16 elements' codes, two int32 lanes of 8 (hi | lo << 8), stored as bytes hi, lo, ... */
AVX2_FUNCTION static inline void store_codes_16(__m256i a, __m256i b, uint8_t *codes)
{
    /* packus interleaves the 128-bit halves: a0-3 b0-3 a4-7 b4-7; put them in order */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256((__m256i *)(void *)codes, packed);
}

AVX2_FUNCTION size_t engine_fixed_codes_float32_avx2(const void *terms, size_t count,
                                                     uint8_t *codes)
{
    size_t i = 0;
    for (; i + 16 <= count; i += 16)
        store_codes_16(float32_codes_8((const char *)terms + 4 * i),
                       float32_codes_8((const char *)terms + 4 * i + 32), codes + 2 * i);
    return i;
}

AVX2_FUNCTION size_t engine_fixed_codes_float64_avx2(const void *terms, size_t count,
                                                     uint8_t *codes)
{
    size_t i = 0;
    for (; i + 16 <= count; i += 16)
        store_codes_16(float64_codes_8((const char *)terms + 8 * i),
                       float64_codes_8((const char *)terms + 8 * i + 64), codes + 2 * i);
    return i;
}

/* ---- Layout ------------------------------------------------------------------------------ */

/* Unless a lane of `refused` is set: offsets[j] = first + words j for the block's elements,
 * and 1; else 0, nothing written. */
AVX2_FUNCTION static inline int store_offsets(__m256i refused, size_t first, int words,
                                              size_t *offsets)
{
    if (!_mm256_testz_si256(refused, refused)) return 0;
    __m256i at = _mm256_add_epi64(_mm256_set1_epi64x((long long)first),
                                  _mm256_set_epi64x(3 * words, 2 * words, words, 0));
    __m256i step = _mm256_set1_epi64x(4 * words);
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 4) {
        _mm256_storeu_si256((__m256i *)(void *)(offsets + j), at);
        at = _mm256_add_epi64(at, step);
    }
    return 1;
}

AVX2_FUNCTION int engine_fixed_layout_float32_avx2(int word_bits, const uint8_t *codes,
                                                   size_t first, size_t *offsets)
{
    __m256i refused = _mm256_setzero_si256();
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 8) {
        __m256i lo, hi;
        codes_of_8(codes + 2 * j, &lo, &hi);
        /* finite: hi a bucket; one word: top - B = hi - low + 24 bits <= W */
        __m256i bits =
            _mm256_add_epi32(_mm256_sub_epi32(hi, low_field_8(lo, 0)), _mm256_set1_epi32(24));
        __m256i wide = _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(word_bits));
        refused = _mm256_or_si256(refused, _mm256_or_si256(not_finite_8(hi), wide));
    }
    return store_offsets(refused, first, 1, offsets);
}

AVX2_FUNCTION int engine_fixed_layout_float64_avx2(int word_bits, const uint8_t *codes,
                                                   size_t first, size_t *offsets)
{
    __m256i refused = _mm256_setzero_si256();
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 8) {
        __m256i lo, hi;
        codes_of_8(codes + 2 * j, &lo, &hi);
        /* the bucket's highest field: (hi << 3) + 7, the last bucket's 2046 */
        __m256i high =
            _mm256_min_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 3), _mm256_set1_epi32(7)),
                             _mm256_set1_epi32(2046));
        high =
            _mm256_blendv_epi8(high, _mm256_set1_epi32(2046),
                               _mm256_cmpeq_epi32(hi, _mm256_set1_epi32(ENGINE_FIXED_LAST_BUCKET)));
        /* two words: W < top - B = high - low + 53 bits <= 2 W */
        __m256i bits =
            _mm256_add_epi32(_mm256_sub_epi32(high, low_field_8(lo, 3)), _mm256_set1_epi32(53));
        __m256i not_two =
            _mm256_or_si256(_mm256_cmpgt_epi32(bits, _mm256_set1_epi32(2 * word_bits)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32(word_bits + 1), bits));
        refused = _mm256_or_si256(refused, _mm256_or_si256(not_finite_8(hi), not_two));
    }
    return store_offsets(refused, first, 2, offsets);
}

/* ---- Which blocks take the fast forms ----------------------------------------------------- */

AVX2_FUNCTION int engine_fixed_block_finite_avx2(const uint8_t *codes)
{
    /* each hi code (the even bytes) in [2, 254]: the odd bytes set to 2 first */
    const __m256i even = _mm256_set1_epi16(0x00ff), two_odd = _mm256_set1_epi16(0x0200);
    const __m256i first = _mm256_set1_epi8(ENGINE_FIXED_FIRST_BUCKET);
    const __m256i special = _mm256_set1_epi8((char)ENGINE_FIXED_HI_SPECIAL);
    __m256i bad = _mm256_setzero_si256();
    for (size_t j = 0; j < 2 * ENGINE_FIXED_BLOCK; j += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + j));
        __m256i hi = _mm256_or_si256(_mm256_and_si256(v, even), two_odd);
        __m256i below = _mm256_xor_si256(_mm256_cmpeq_epi8(_mm256_max_epu8(hi, first), hi),
                                         _mm256_set1_epi8(-1));
        bad = _mm256_or_si256(bad, _mm256_or_si256(below, _mm256_cmpeq_epi8(hi, special)));
    }
    return _mm256_testz_si256(bad, bad);
}

AVX2_FUNCTION int engine_fixed_block_two_words_avx2(const uint8_t *codes, const size_t *offsets)
{
    /* offsets[j] = offsets[0] + 2 j for j <= 64, and no hi code special */
    __m256i at =
        _mm256_add_epi64(_mm256_set1_epi64x((long long)offsets[0]), _mm256_set_epi64x(6, 4, 2, 0));
    __m256i bad = _mm256_setzero_si256();
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 4) {
        __m256i o = _mm256_loadu_si256((const __m256i *)(const void *)(offsets + j));
        bad = _mm256_or_si256(bad, _mm256_xor_si256(o, at));
        at = _mm256_add_epi64(at, _mm256_set1_epi64x(8));
    }
    if (!_mm256_testz_si256(bad, bad) ||
        offsets[ENGINE_FIXED_BLOCK] != offsets[0] + 2 * ENGINE_FIXED_BLOCK)
        return 0;
    /* (implied, as in the scalar form: an infinity or NaN takes one word of counts) */
    const __m256i even = _mm256_set1_epi16(0x00ff);
    const __m256i special = _mm256_set1_epi16(ENGINE_FIXED_HI_SPECIAL);
    for (size_t j = 0; j < 2 * ENGINE_FIXED_BLOCK; j += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(codes + j));
        bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(_mm256_and_si256(v, even), special));
    }
    return _mm256_testz_si256(bad, bad);
}

/* ---- Split ------------------------------------------------------------------------------- */

/* 4 int64 words from 4 lanes (int32) of m, shift and the terms' sign masks. */
AVX2_FUNCTION static inline void store_words_4(__m128i m, __m128i shift, __m128i sign, int64_t *out)
{
    __m256i word = _mm256_sllv_epi64(_mm256_cvtepu32_epi64(m), _mm256_cvtepu32_epi64(shift));
    __m256i s = _mm256_cvtepi32_epi64(sign);
    _mm256_storeu_si256((__m256i *)(void *)out, _mm256_sub_epi64(_mm256_xor_si256(word, s), s));
}

AVX2_FUNCTION void engine_fixed_split_float32_avx2(const char *terms, const uint8_t *codes,
                                                   int64_t *words)
{
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 8) {
        __m256i lo, hi;
        codes_of_8(codes + 2 * j, &lo, &hi);
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(terms + 4 * j));
        __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
        __m256i field = _mm256_srli_epi32(magnitude, 23);
        __m256i normal = _mm256_cmpgt_epi32(field, _mm256_setzero_si256());
        __m256i m = _mm256_or_si256(_mm256_and_si256(magnitude, _mm256_set1_epi32(0x7fffff)),
                                    _mm256_and_si256(normal, _mm256_set1_epi32(0x800000)));
        __m256i effective = _mm256_max_epi32(field, _mm256_set1_epi32(1));
        __m256i shift = _mm256_max_epi32(_mm256_sub_epi32(effective, low_field_8(lo, 0)),
                                         _mm256_setzero_si256()); /* a zero term: m = 0 */
        __m256i sign = _mm256_srai_epi32(u, 31);
        store_words_4(_mm256_castsi256_si128(m), _mm256_castsi256_si128(shift),
                      _mm256_castsi256_si128(sign), words + j);
        store_words_4(_mm256_extracti128_si256(m, 1), _mm256_extracti128_si256(shift, 1),
                      _mm256_extracti128_si256(sign, 1), words + j + 4);
    }
}

/* low_field_8 for the lo codes of 4 elements, in int64 lanes. */
AVX2_FUNCTION static inline __m256i low_field_4(const uint8_t *codes, int shift)
{
    __m128i lo = _mm_shuffle_epi8(_mm_loadl_epi64((const __m128i *)(const void *)codes),
                                  _mm_loadu_si128((const __m128i *)(const void *)odd_then_even));
    __m256i bucket =
        _mm256_sub_epi64(_mm256_set1_epi64x(ENGINE_FIXED_LAST_BUCKET), _mm256_cvtepu8_epi64(lo));
    __m256i first = _mm256_cmpeq_epi64(bucket, _mm256_set1_epi64x(ENGINE_FIXED_FIRST_BUCKET));
    return _mm256_blendv_epi8(_mm256_slli_epi64(bucket, shift), _mm256_set1_epi64x(1), first);
}

AVX2_FUNCTION void engine_fixed_split_float64_avx2(const char *terms, const uint8_t *codes,
                                                   int word_bits, int64_t *words)
{
    const __m256i one = _mm256_set1_epi64x(1), w = _mm256_set1_epi64x(word_bits);
    const __m256i mask = _mm256_set1_epi64x((long long)((1ull << word_bits) - 1));
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 4) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(terms + 8 * j));
        __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi64x(0x7fffffffffffffffll));
        __m256i field = _mm256_srli_epi64(magnitude, 52);
        __m256i subnormal = _mm256_cmpeq_epi64(field, _mm256_setzero_si256());
        __m256i m =
            _mm256_or_si256(_mm256_and_si256(magnitude, _mm256_set1_epi64x(0xfffffffffffffll)),
                            _mm256_andnot_si256(subnormal, _mm256_set1_epi64x(1ll << 52)));
        __m256i effective = _mm256_blendv_epi8(field, one, subnormal);
        __m256i shift = _mm256_sub_epi64(effective, low_field_4(codes + 2 * j, 3));
        shift = _mm256_and_si256(shift, _mm256_cmpgt_epi64(shift, _mm256_setzero_si256()));
        /* m 2^shift's low W bits and the rest; a count of 64 or more (a negative one too, as
         * unsigned) shifts everything out */
        __m256i low_word = _mm256_and_si256(_mm256_sllv_epi64(m, shift), mask);
        __m256i high_word = _mm256_or_si256(_mm256_sllv_epi64(m, _mm256_sub_epi64(shift, w)),
                                            _mm256_srlv_epi64(m, _mm256_sub_epi64(w, shift)));
        __m256i s = _mm256_cmpgt_epi64(_mm256_setzero_si256(), u);
        low_word = _mm256_sub_epi64(_mm256_xor_si256(low_word, s), s);
        high_word = _mm256_sub_epi64(_mm256_xor_si256(high_word, s), s);
        /* element-major: low, high of element j, then of j + 1 ... */
        __m256i a = _mm256_unpacklo_epi64(low_word, high_word); /* j, j + 2 */
        __m256i b = _mm256_unpackhi_epi64(low_word, high_word); /* j + 1, j + 3 */
        _mm256_storeu_si256((__m256i *)(void *)(words + 2 * j),
                            _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256((__m256i *)(void *)(words + 2 * j + 4),
                            _mm256_permute2x128_si256(a, b, 0x31));
    }
}

/* ---- Rounding ---------------------------------------------------------------------------- */

AVX2_FUNCTION int engine_fixed_round_float32_avx2(const uint8_t *codes, const int64_t *sums,
                                                  reprod_rounding dir, char *result)
{
    /* |S| < 2^51 for every sum (S ^ its sign mask: |S| - 1 for a negative S) */
    __m256i any = _mm256_setzero_si256();
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 4) {
        __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(sums + j));
        any = _mm256_or_si256(any,
                              _mm256_xor_si256(s, _mm256_cmpgt_epi64(_mm256_setzero_si256(), s)));
    }
    if (!_mm256_testz_si256(any, _mm256_set1_epi64x(~((1ll << 51) - 1)))) return 0;
    const __m256i magic = _mm256_set1_epi64x(0x4338000000000000ll); /* 1.5 2^52 */
    const __m256d zero = _mm256_set1_pd(dir == REPROD_ROUND_DOWN ? -0.0 : 0.0);
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 4) {
        __m256i s = _mm256_loadu_si256((const __m256i *)(const void *)(sums + j));
        __m256d exact = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(s, magic)),
                                      _mm256_castsi256_pd(magic));
        /* 2^B, B = low field - 127 - 23 >= -149: the exponent field low field + 873 */
        __m256i low = low_field_4(codes + 2 * j, 0);
        __m256d scale = _mm256_castsi256_pd(
            _mm256_slli_epi64(_mm256_add_epi64(low, _mm256_set1_epi64x(1023 - 127 - 23)), 52));
        __m256d scaled = _mm256_mul_pd(exact, scale);
        /* an exactly zero sum: -0 rounding down, else +0 */
        scaled = _mm256_blendv_pd(
            scaled, zero, _mm256_castsi256_pd(_mm256_cmpeq_epi64(s, _mm256_setzero_si256())));
        _mm_storeu_ps((float *)(void *)(result + 4 * j), _mm256_cvtpd_ps(scaled));
    }
    return 1;
}

#else /* never called: engine_fixed.c takes these only where ENGINE_FIXED_VECTORS is 1 */

size_t engine_fixed_codes_float32_avx2(const void *terms, size_t count, uint8_t *codes)
{
    (void)terms, (void)count, (void)codes;
    return 0;
}

size_t engine_fixed_codes_float64_avx2(const void *terms, size_t count, uint8_t *codes)
{
    (void)terms, (void)count, (void)codes;
    return 0;
}

int engine_fixed_block_finite_avx2(const uint8_t *codes)
{
    (void)codes;
    return 0;
}

int engine_fixed_block_two_words_avx2(const uint8_t *codes, const size_t *offsets)
{
    (void)codes, (void)offsets;
    return 0;
}

int engine_fixed_layout_float32_avx2(int word_bits, const uint8_t *codes, size_t first,
                                     size_t *offsets)
{
    (void)word_bits, (void)codes, (void)first, (void)offsets;
    return 0;
}

int engine_fixed_layout_float64_avx2(int word_bits, const uint8_t *codes, size_t first,
                                     size_t *offsets)
{
    (void)word_bits, (void)codes, (void)first, (void)offsets;
    return 0;
}

void engine_fixed_split_float32_avx2(const char *terms, const uint8_t *codes, int64_t *words)
{
    (void)terms, (void)codes, (void)words;
}

void engine_fixed_split_float64_avx2(const char *terms, const uint8_t *codes, int word_bits,
                                     int64_t *words)
{
    (void)terms, (void)codes, (void)word_bits, (void)words;
}

int engine_fixed_round_float32_avx2(const uint8_t *codes, const int64_t *sums, reprod_rounding dir,
                                    char *result)
{
    (void)codes, (void)sums, (void)dir, (void)result;
    return 0;
}

#endif
