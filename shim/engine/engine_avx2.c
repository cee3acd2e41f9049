/* engine_avx2.c: AVX2 versions of the exact fast-path kernels, chosen at run time.
 *
 * The same arithmetic as the generic kernels in engine.c and engine_exact_element (sums in
 * binary64 from -0, the TwoSum cascade, the span check of engine_inner.h), written with
 * intrinsics because the generic vector code has no unsigned 32-bit max/min and splits the
 * float-to-double conversions. Built on x86-64 only; -ffp-contract=off keeps FMAs out.
 */
#include "engine/engine_float64_driver.h"
#include "engine/engine_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#define AVX2_FUNCTION __attribute__((target("avx2,fma")))

int engine_cpu_has_avx2(void)
{
    /* Every thread computes the same value: a relaxed atomic makes the race a defined one. */
    static _Atomic int cached = -1;
    int has = atomic_load_explicit(&cached, memory_order_relaxed);
    if (has < 0) {
        __builtin_cpu_init();
        /* F16C from CPUID leaf 1 (ECX bit 29) itself: clang 14's __builtin_cpu_supports does
         * not know "f16c". The AVX2 check covers the OS's saving of the YMM state. */
        unsigned eax, ebx, ecx = 0, edx;
        int f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
        has = __builtin_cpu_supports("avx2") && f16c && __builtin_cpu_supports("fma");
        atomic_store_explicit(&cached, has, memory_order_relaxed);
    }
    return has;
}

/* Elements per inexact-flag window: at N = 8 the chunk's 8 KiB of inputs stay in L1 for the
 * second pass. */
#define FLOAT32_CHUNK  256
#define FLOAT64_DIRECT 16  /* up to this many contributions, no blocking (binary64) */
#define FLOAT64_BLOCK  256 /* elements whose states stay in L1 (10 KiB) while ... */
#define FLOAT64_GROUP  8   /* ... this many contributions at a time stream through them */

/* Clear the inexact flag (we run in the default environment, MXCSR = 0x1f80). The memory
 * clobber keeps the loads of the inputs, hence the additions, after it. */
static inline void inexact_clear(void)
{
    unsigned int csr = 0x1f80;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
}

/* Whether an inexact operation happened since inexact_clear. `sums` (where the results were
 * stored) is handed to the asm so that every addition and store precedes the read. */
static inline int inexact_raised(const double *sums)
{
    unsigned int csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr) : "r"(sums) : "memory");
    return (csr & 0x20) != 0;
}

/* Bit l set: lane l of the 16 elements at p (binary32, N contributions at offset j) is outside
 * the fast window or holds an infinity or NaN. The doubled magnitude (sign shifted out) feeds an
 * unsigned max, and it minus one an unsigned min, so that zeros (all ones) never win. */
AVX2_FUNCTION static int float32_span_check(const void *const *contributions, int count, size_t j,
                                            uint32_t *largest, uint32_t *smallest, int far)
{
    const __m256i one = _mm256_set1_epi32(1);
    __m256i max0 = _mm256_setzero_si256(), max1 = max0;
    __m256i min0 = _mm256_set1_epi32(-1), min1 = min0;
    for (int k = 0; k < count; k++) {
        const float *p = (const float *)contributions[k] + j;
        if (far) engine_prefetch_ahead(p, FLOAT32_CHUNK * sizeof(float));
        __m256i b0 = _mm256_loadu_si256((const __m256i *)p);
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(p + 8));
        b0 = _mm256_add_epi32(b0, b0);
        b1 = _mm256_add_epi32(b1, b1);
        max0 = _mm256_max_epu32(max0, b0);
        max1 = _mm256_max_epu32(max1, b1);
        min0 = _mm256_min_epu32(min0, _mm256_sub_epi32(b0, one));
        min1 = _mm256_min_epu32(min1, _mm256_sub_epi32(b1, one));
    }
    /* for the tiers beyond the window: undoubled (zeros: 0x7fffffff in smallest) */
    _mm256_storeu_si256((__m256i *)largest, _mm256_srli_epi32(max0, 1));
    _mm256_storeu_si256((__m256i *)(largest + 8), _mm256_srli_epi32(max1, 1));
    _mm256_storeu_si256((__m256i *)smallest, _mm256_srli_epi32(min0, 1));
    _mm256_storeu_si256((__m256i *)(smallest + 8), _mm256_srli_epi32(min1, 1));
    /* Exponent fields (bits 24..31 of the doubled magnitude); a subnormal's counts as 1, and
     * all zeros give e_min = 1 > e_max = 0. */
    const __m256i window = _mm256_set1_epi32(engine_fast_window(24, count));
    const __m256i max_finite_field = _mm256_set1_epi32(254);
    __m256i e_max0 = _mm256_srli_epi32(max0, 24), e_max1 = _mm256_srli_epi32(max1, 24);
    __m256i e_min0 = _mm256_max_epi32(_mm256_srli_epi32(_mm256_add_epi32(min0, one), 24), one);
    __m256i e_min1 = _mm256_max_epi32(_mm256_srli_epi32(_mm256_add_epi32(min1, one), 24), one);
    __m256i bad0 = _mm256_or_si256(_mm256_cmpgt_epi32(e_max0, max_finite_field),
                                   _mm256_cmpgt_epi32(_mm256_sub_epi32(e_max0, e_min0), window));
    __m256i bad1 = _mm256_or_si256(_mm256_cmpgt_epi32(e_max1, max_finite_field),
                                   _mm256_cmpgt_epi32(_mm256_sub_epi32(e_max1, e_min1), window));
    return _mm256_movemask_ps(_mm256_castsi256_ps(bad0)) |
           (_mm256_movemask_ps(_mm256_castsi256_ps(bad1)) << 8);
}

/* Bit l set: sums[l] (l < 16) is infinite or NaN. */
AVX2_FUNCTION static int float32_nonfinite(const double *sums)
{
    const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    const __m256d infinity = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7ff0000000000000ll));
    int finite = 0;
    for (int q = 0; q < 4; q++) {
        __m256d x = _mm256_and_pd(_mm256_loadu_pd(sums + 4 * q), magnitude);
        finite |= _mm256_movemask_pd(_mm256_cmp_pd(x, infinity, _CMP_LT_OQ)) << (4 * q);
    }
    return ~finite & 0xffff;
}

/* Exact binary32 in chunks of up to FLOAT32_CHUNK elements, blocks of 16.
 * Pass 1 sums every element of the chunk in binary64 from -0 (four vectors of 4 per block)
 * with the inexact flag cleared before. Binary64 sums of binary32 values can neither overflow
 * nor underflow, so a clear flag afterwards proves every sum of the chunk exact (the span
 * check is then not needed; infinities and NaNs show as non-finite sums). Otherwise pass 2
 * runs the span check of engine_inner.h per block: lanes inside the window have exact sums
 * (that proof does not need the flag), the others take the general path. */
AVX2_FUNCTION size_t engine_exact_float32_avx2(reprod_op op, reprod_rounding dir,
                                               const void *const *contributions, int count,
                                               size_t element_count, float *result,
                                               struct engine_accumulator *a, size_t *general)
{
    const struct engine_format f = engine_format_of(REPROD_FLOAT32);
    const int vector_store = op == REPROD_SUM && dir == REPROD_ROUND_NEAREST;
    double sums[FLOAT32_CHUNK];
    size_t j = 0;
    int wide = 0; /* the last chunk was mostly beyond the window, as in engine_avx512.c */
    const int far = engine_prefetch_wanted(count, element_count, sizeof(float));
    while (j + 16 <= element_count) {
        size_t length = element_count - j < FLOAT32_CHUNK ? element_count - j : FLOAT32_CHUNK;
        length &= ~(size_t)15;
        uint32_t largest[FLOAT32_CHUNK], smallest[FLOAT32_CHUNK]; /* the span check's */
        if (wide) { /* as long as most groups of 16 lanes reach beyond the window */
            int wide_groups = 0;
            for (size_t b = 0; b < length; b += 16)
                wide_groups += float32_span_check(contributions, count, j + b, largest + b,
                                                  smallest + b, far) != 0;
            wide = 2 * (size_t)wide_groups > length / 16;
            engine_beyond_window_chunk_avx2(op, dir, contributions, count, j, length, largest,
                                            smallest, result, a, general);
            j += length;
            continue;
        }
        int wide_groups = 0;
        inexact_clear();
        for (size_t b = 0; b < length; b += 16) {
            /* Two partial sums per lane (even and odd contributions) halve the chain of
             * dependent additions; a partial sum is a sum of a subset, exact by either proof.
             * Beyond the window the bracket (engine_inner.h) takes these sums:
             * their order is its order. */
            __m256d s0 = _mm256_set1_pd(-0.0), s1 = s0, s2 = s0, s3 = s0;
            __m256d u0 = s0, u1 = s0, u2 = s0, u3 = s0;
            int k = 0;
            for (; k + 2 <= count; k += 2) {
                const float *p = (const float *)contributions[k] + j + b;
                const float *q = (const float *)contributions[k + 1] + j + b;
                if (far) { /* the same lines a chunk ahead, into L2 */
                    engine_prefetch_ahead(p, FLOAT32_CHUNK * sizeof(float));
                    engine_prefetch_ahead(q, FLOAT32_CHUNK * sizeof(float));
                }
                s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm_loadu_ps(p)));
                s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm_loadu_ps(p + 4)));
                s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm_loadu_ps(p + 8)));
                s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm_loadu_ps(p + 12)));
                u0 = _mm256_add_pd(u0, _mm256_cvtps_pd(_mm_loadu_ps(q)));
                u1 = _mm256_add_pd(u1, _mm256_cvtps_pd(_mm_loadu_ps(q + 4)));
                u2 = _mm256_add_pd(u2, _mm256_cvtps_pd(_mm_loadu_ps(q + 8)));
                u3 = _mm256_add_pd(u3, _mm256_cvtps_pd(_mm_loadu_ps(q + 12)));
            }
            if (k < count) {
                const float *p = (const float *)contributions[k] + j + b;
                if (far) engine_prefetch_ahead(p, FLOAT32_CHUNK * sizeof(float));
                s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm_loadu_ps(p)));
                s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm_loadu_ps(p + 4)));
                s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm_loadu_ps(p + 8)));
                s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm_loadu_ps(p + 12)));
            }
            s0 = _mm256_add_pd(s0, u0); /* -0 + -0 = -0: the sign of zero survives */
            s1 = _mm256_add_pd(s1, u1);
            s2 = _mm256_add_pd(s2, u2);
            s3 = _mm256_add_pd(s3, u3);
            _mm256_storeu_pd(sums + b, s0);
            _mm256_storeu_pd(sums + b + 4, s1);
            _mm256_storeu_pd(sums + b + 8, s2);
            _mm256_storeu_pd(sums + b + 12, s3);
        }
        int all_exact = !inexact_raised(sums);
        for (size_t b = 0; b < length; b += 16) {
            const double *sum = sums + b;
            int bad_mask = all_exact ? float32_nonfinite(sum)
                                     : float32_span_check(contributions, count, j + b, largest + b,
                                                          smallest + b, 0);
            wide_groups += bad_mask != 0;
            uint32_t out[16];
            if (vector_store) {
                /* Round to nearest is the hardware conversion, and the sums from -0 already
                 * carry the right sign of zero; the tiers beyond the window overwrite the bad
                 * lanes. Inputs are all read before the block's results are written. */
                __m128 r0 = _mm256_cvtpd_ps(_mm256_loadu_pd(sum));
                __m128 r1 = _mm256_cvtpd_ps(_mm256_loadu_pd(sum + 4));
                __m128 r2 = _mm256_cvtpd_ps(_mm256_loadu_pd(sum + 8));
                __m128 r3 = _mm256_cvtpd_ps(_mm256_loadu_pd(sum + 12));
                _mm256_storeu_ps((float *)out, _mm256_set_m128(r1, r0));
                _mm256_storeu_ps((float *)out + 8, _mm256_set_m128(r3, r2));
            }
            if (bad_mask)
                engine_beyond_window_avx2(op, dir, contributions, count, j + b, 16,
                                          (uint32_t)bad_mask, all_exact ? NULL : largest + b,
                                          smallest + b, sum, out, a, general);
            for (int lane = 0; lane < 16 && !vector_store; lane++) {
                size_t index = j + b + (size_t)lane;
                if (!((bad_mask >> lane) & 1)) /* any_nonzero unknown (-1): a zero sum looks */
                    out[lane] = (uint32_t)engine_fast_finish(&f, REPROD_FLOAT32, op, dir, sum[lane],
                                                             -1, contributions, count, index);
            }
            memcpy(result + j + b, out, sizeof out);
        }
        wide = 2 * (size_t)wide_groups > length / 16;
        j += length;
    }
    return j;
}

/* Lanes where the sum s + t, beyond the window, still rounds as the exact sum (all ones): the
 * certified rounding, the vector form of engine_rounding_certified (engine_inner.h);
 * a = fl(sum |e_k|), two_n = 2N; nearest for rounding to nearest (only S = RN(exact sum) is
 * needed there). */
AVX2_FUNCTION static inline __attribute__((always_inline)) __m256d
float64_certified(__m256d s, __m256d t, __m256d a, __m256d two_n, int nearest)
{
    const __m256i exponent = _mm256_set1_epi64x(0x7ff0000000000000ll);
    const __m256i fraction = _mm256_set1_epi64x(0xfffffffffffffll);
    const __m256d magnitude_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    __m256d S = _mm256_add_pd(s, t), v = _mm256_sub_pd(S, s);
    __m256d T = _mm256_add_pd(_mm256_sub_pd(s, _mm256_sub_pd(S, v)), _mm256_sub_pd(t, v));
    __m256i S_bits = _mm256_castpd_si256(S);
    __m256d G = _mm256_castsi256_pd(_mm256_and_si256(S_bits, exponent));
    __m256i power_of_two =
        _mm256_cmpeq_epi64(_mm256_and_si256(S_bits, fraction), _mm256_setzero_si256());
    __m256i to_zero = _mm256_cmpgt_epi64(_mm256_setzero_si256(),
                                         _mm256_xor_si256(S_bits, _mm256_castpd_si256(T)));
    __m256d halved =
        _mm256_castsi256_pd(nearest ? power_of_two : _mm256_and_si256(power_of_two, to_zero));
    G = _mm256_blendv_pd(G, _mm256_mul_pd(G, _mm256_set1_pd(0.5)), halved);
    __m256d tail = _mm256_mul_pd(_mm256_and_pd(T, magnitude_mask), _mm256_set1_pd(0x1p53));
    __m256d Z = _mm256_mul_pd(_mm256_mul_pd(a, two_n), _mm256_set1_pd(2.0));
    __m256d inside = _mm256_cmp_pd(_mm256_sub_pd(G, tail), Z, _CMP_GT_OQ);
    if (!nearest) inside = _mm256_and_pd(inside, _mm256_cmp_pd(tail, Z, _CMP_GT_OQ));
    __m256d exact = _mm256_cmp_pd(a, _mm256_setzero_pd(), _CMP_EQ_OQ);
    return _mm256_or_pd(exact, inside);
}

/* The binary64 kernel's running state of 4 elements: the TwoSum cascade (s, t), the sum a of
 * |e_k| for the exact-errors test and the certified rounding (engine_inner.h), and for the
 * exact-errors test the min of the bit pattern of |x| minus one, in the floating-point domain: for
 * a zero that is a NaN, which vminpd ignores (it returns its second operand when the first is a
 * NaN). */
struct float64_quad {
    __m256d s, t, a, min;
};

/* track 0: no minimum (min 0 gives u = 2^-1074 in the exact-errors test: a true bound, if a
 * useless one). */
AVX2_FUNCTION static inline void float64_start(struct float64_quad *x, int track)
{
    x->s = _mm256_set1_pd(-0.0);
    x->t = x->a = _mm256_setzero_pd();
    x->min = _mm256_castsi256_pd(_mm256_set1_epi64x(track ? 0x7ff0000000000000ll : 0)); /* inf */
}

/* The minimum for the exact-errors test: the magnitude bits minus one of the 4 terms at p into
 * x->min (see float64_quad). */
AVX2_FUNCTION static inline __attribute__((always_inline)) void
float64_track(struct float64_quad *x, const double *p)
{
    const __m256d magnitude_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    __m256d m = _mm256_and_pd(_mm256_loadu_pd(p), magnitude_mask);
    m = _mm256_castsi256_pd(_mm256_sub_epi64(_mm256_castpd_si256(m), _mm256_set1_epi64x(1)));
    x->min = _mm256_min_pd(m, x->min);
}

/* Add the 4 terms at p to the state, and store their errors at error_slot unless it is NULL;
 * half the additions as FMAs with an opaque 1.0, as in engine_avx512.c. */
AVX2_FUNCTION static inline __attribute__((always_inline)) __m256d
float64_add(struct float64_quad *x, const double *p, double *error_slot, const int track)
{
    const __m256d magnitude_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    __m256d unit = _mm256_set1_pd(1.0);
    __asm__("" : "+x"(unit)); /* opaque: the compiler may not fold x * 1 + y into an add */
    __m256d v = _mm256_loadu_pd(p);
    if (track) float64_track(x, p);
    __m256d n = _mm256_add_pd(x->s, v), w = _mm256_fmsub_pd(n, unit, x->s);
    __m256d e =
        _mm256_add_pd(_mm256_sub_pd(x->s, _mm256_sub_pd(n, w)), _mm256_fmsub_pd(v, unit, w));
    x->t = _mm256_fmadd_pd(e, unit, x->t);
    x->a = _mm256_fmadd_pd(_mm256_and_pd(e, magnitude_mask), unit, x->a);
    x->s = n;
    if (error_slot) _mm256_store_pd(error_slot, e);
    return e;
}

/* The distillation tier's second pass run alongside the first, as in engine_avx512.c. */
struct float64_second {
    __m256d s, t, a;
};

/* An empty second pass: s = -0 (adding e_1 to it gives e_1 and no error, as starting from
 * e_1 would). */
AVX2_FUNCTION static inline void float64_second_start(struct float64_second *y)
{
    y->s = _mm256_set1_pd(-0.0);
    y->t = y->a = _mm256_setzero_pd();
}

/* Add the next term of the second pass: an error e_k, or at the end the first pass's s. */
AVX2_FUNCTION static inline __attribute__((always_inline)) void
float64_second_add(struct float64_second *y, __m256d v)
{
    const __m256d magnitude_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    __m256d n = _mm256_add_pd(y->s, v), w = _mm256_sub_pd(n, y->s);
    __m256d e = _mm256_add_pd(_mm256_sub_pd(y->s, _mm256_sub_pd(n, w)), _mm256_sub_pd(v, w));
    y->t = _mm256_add_pd(y->t, e);
    y->a = _mm256_add_pd(y->a, _mm256_and_pd(e, magnitude_mask));
    y->s = n;
}

/* Lanes (bits) of the second pass's state that the certified rounding accepts, with a finite s + t.
 */
AVX2_FUNCTION static inline __attribute__((always_inline)) int
float64_second_certified(const struct float64_second *y, int count, reprod_rounding dir)
{
    const __m256d magnitude_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    const __m256d infinity = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7ff0000000000000ll));
    __m256d sum = _mm256_add_pd(y->s, y->t);
    __m256d finite = _mm256_cmp_pd(_mm256_and_pd(sum, magnitude_mask), infinity, _CMP_LT_OQ);
    __m256d certified = float64_certified(y->s, y->t, y->a, _mm256_set1_pd(2.0 * count),
                                          dir == REPROD_ROUND_NEAREST);
    return _mm256_movemask_pd(_mm256_and_pd(certified, finite));
}

/* Bit l set: lane l of a finished state is not the fast path's result (t not proved exact by
 * the exact-errors test and s + t not certified, or a non-finite s + t: infinities, NaNs,
 * overflow). */
AVX2_FUNCTION static inline __attribute__((always_inline)) int
float64_refused(const struct float64_quad *x, int count, reprod_rounding dir, int *proved)
{
    const __m256d magnitude_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    const __m256d infinity = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7ff0000000000000ll));
    const __m256i one = _mm256_set1_epi64x(1);
    __m256d sum = _mm256_add_pd(x->s, x->t);
    /* t is exact when a <= 2^(field - 1023), field that of the smallest nonzero term (at
     * least 1); a and that power of two compare as integers (a >= 0, bits below 2^63). */
    __m256i field = _mm256_srli_epi64(_mm256_add_epi64(_mm256_castpd_si256(x->min), one), 52);
    field = _mm256_sub_epi64(field, _mm256_cmpeq_epi64(field, _mm256_setzero_si256()));
    __m256d wide = _mm256_castsi256_pd(
        _mm256_cmpgt_epi64(_mm256_castpd_si256(x->a), _mm256_slli_epi64(field, 52)));
    *proved = ~_mm256_movemask_pd(wide) & 0xf;
    if (_mm256_movemask_pd(wide))
        wide = _mm256_andnot_pd(float64_certified(x->s, x->t, x->a, _mm256_set1_pd(2.0 * count),
                                                  dir == REPROD_ROUND_NEAREST),
                                wide);
    __m256d finite = _mm256_cmp_pd(_mm256_and_pd(sum, magnitude_mask), infinity, _CMP_LT_OQ);
    return (~_mm256_movemask_pd(finite) & 0xf) | _mm256_movemask_pd(wide);
}

/* Write the results of the 8 elements at j from their finished states x[0], x[1]; prepared:
 * NULL, or their first pass's output for the distillation tier, and then y[0], y[1] its
 * second pass, which decides lanes the certified rounding accepts there. Returns the lanes the
 * first pass refused. */
AVX2_FUNCTION static inline __attribute__((always_inline)) uint32_t
float64_finish(reprod_op op, reprod_rounding dir, const void *const *contributions, int count,
               size_t j, const struct float64_quad *x, double *result, struct engine_accumulator *a,
               size_t *general, double *prepared, const struct float64_second *y, int tracked,
               uint32_t *proved)
{
    /* lanes[m]: all ones in the lanes of the 4-bit mask m */
    static const int64_t lanes[16][4] = {
        {0, 0, 0, 0},   {-1, 0, 0, 0},   {0, -1, 0, 0},   {-1, -1, 0, 0},
        {0, 0, -1, 0},  {-1, 0, -1, 0},  {0, -1, -1, 0},  {-1, -1, -1, 0},
        {0, 0, 0, -1},  {-1, 0, 0, -1},  {0, -1, 0, -1},  {-1, -1, 0, -1},
        {0, 0, -1, -1}, {-1, 0, -1, -1}, {0, -1, -1, -1}, {-1, -1, -1, -1}};
    __m256d sum0 = _mm256_add_pd(x[0].s, x[0].t), sum1 = _mm256_add_pd(x[1].s, x[1].t);
    int proved0, proved1;
    int bad0 = float64_refused(&x[0], count, dir, &proved0);
    int bad1 = float64_refused(&x[1], count, dir, &proved1);
    if (!tracked && (bad0 | bad1)) return FLOAT64_TRACK_FIRST;
    *proved = (uint32_t)(proved0 | (proved1 << 4));
    int bad_mask = bad0 | (bad1 << 4), second = 0;
    if (bad_mask && prepared) { /* the second pass's verdict on the refused lanes */
        int second0 = bad0 & float64_second_certified(&y[0], count, dir);
        int second1 = bad1 & float64_second_certified(&y[1], count, dir);
        second = second0 | (second1 << 4);
        sum0 = _mm256_blendv_pd(sum0, _mm256_add_pd(y[0].s, y[0].t),
                                _mm256_loadu_pd((const double *)lanes[second0]));
        sum1 = _mm256_blendv_pd(sum1, _mm256_add_pd(y[1].s, y[1].t),
                                _mm256_loadu_pd((const double *)lanes[second1]));
    }
    int zero_mask = _mm256_movemask_pd(_mm256_cmp_pd(sum0, _mm256_setzero_pd(), _CMP_EQ_OQ)) |
                    (_mm256_movemask_pd(_mm256_cmp_pd(sum1, _mm256_setzero_pd(), _CMP_EQ_OQ)) << 4);
    if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST &&
        ((bad_mask & ~second) | zero_mask) == 0) {
        _mm256_storeu_pd(result + j, sum0); /* RN(s + t) is the nearest rounding */
        _mm256_storeu_pd(result + j + 4, sum1);
        return (uint32_t)bad_mask;
    }
    double s[8], t[8];
    uint64_t min[8];
    _mm256_storeu_pd(s, x[0].s);
    _mm256_storeu_pd(s + 4, x[1].s);
    _mm256_storeu_pd(t, x[0].t);
    _mm256_storeu_pd(t + 4, x[1].t);
    _mm256_storeu_si256((__m256i *)min, _mm256_castpd_si256(x[0].min));
    _mm256_storeu_si256((__m256i *)(min + 4), _mm256_castpd_si256(x[1].min));
    uint64_t out[8];
    if (bad_mask & ~second)
        engine_distill_float64_avx2(op, dir, contributions, count, j, 8,
                                    (uint32_t)(bad_mask & ~second), prepared, out, a, general);
    /* Lanes stored by vector: RN(s + t) rounds a nonzero sum to nearest (after the tier,
     * which may write whole vectors of `out`). */
    int done = 0;
    if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST) {
        done = ~((bad_mask & ~second) | zero_mask) & 0xff;
        _mm256_maskstore_pd((double *)out, _mm256_loadu_si256((const __m256i *)lanes[done & 15]),
                            sum0);
        _mm256_maskstore_pd((double *)out + 4,
                            _mm256_loadu_si256((const __m256i *)lanes[done >> 4]), sum1);
    }
    if (second & ~done) { /* a refused element holds a nonzero term */
        double s2[8], t2[8];
        _mm256_storeu_pd(s2, y[0].s);
        _mm256_storeu_pd(s2 + 4, y[1].s);
        _mm256_storeu_pd(t2, y[0].t);
        _mm256_storeu_pd(t2 + 4, y[1].t);
        for (uint32_t rest = (uint32_t)(second & ~done); rest; rest &= rest - 1) {
            int lane = __builtin_ctz(rest);
            out[lane] = engine_float64_lane(op, dir, contributions, count, j + (size_t)lane, 1,
                                            s2[lane], t2[lane], 1, a, general);
        }
    }
    for (int lane = 0; lane < 8; lane++)
        if (!(((bad_mask | done) >> lane) & 1)) /* min still infinity: every term is zero */
            out[lane] = engine_float64_lane(
                op, dir, contributions, count, j + (size_t)lane, 1, s[lane], t[lane],
                tracked ? min[lane] != 0x7ff0000000000000ull : -1, a, general);
    memcpy(result + j, out, sizeof out);
    return (uint32_t)bad_mask;
}

/* The block of 8 elements at j, tracking the minimum (struct float64_kernel's `tracked`). */
AVX2_FUNCTION static inline __attribute__((always_inline)) uint32_t
float64_block_tracked(const struct float64_call *call, size_t j, double *errors, uint32_t *proved)
{
    const void *const *contributions = call->contributions;
    struct float64_quad x0, x1; /* not an array: they stay in registers */
    float64_start(&x0, 1);
    float64_start(&x1, 1);
    float64_add(&x0, (const double *)contributions[0] + j, NULL, 1);
    float64_add(&x1, (const double *)contributions[0] + j + 4, NULL, 1);
    struct float64_second y0, y1;
    float64_second_start(&y0);
    float64_second_start(&y1);
    if (errors) { /* the first pass's output kept, the second pass run alongside */
        for (int k = 1; k < call->count; k++) {
            const double *p = (const double *)contributions[k] + j;
            double *slot = errors + (size_t)(k - 1) * ENGINE_DISTILL_PREPARED_LANES;
            float64_second_add(&y0, float64_add(&x0, p, slot, 1));
            float64_second_add(&y1, float64_add(&x1, p + 4, slot + 4, 1));
        }
        float64_second_add(&y0, x0.s); /* the first pass's s comes last */
        float64_second_add(&y1, x1.s);
        double *top = errors + (size_t)(call->count - 1) * ENGINE_DISTILL_PREPARED_LANES;
        memcpy(top, &x0.s, sizeof x0.s);
        memcpy(top + 4, &x1.s, sizeof x1.s);
    } else {
        for (int k = 1; k < call->count; k++) {
            const double *p = (const double *)contributions[k] + j;
            float64_add(&x0, p, NULL, 1);
            float64_add(&x1, p + 4, NULL, 1);
        }
    }
    const struct float64_quad x[2] = {x0, x1};
    const struct float64_second y[2] = {y0, y1};
    return float64_finish(call->op, call->dir, contributions, call->count, j, x, call->result,
                          call->a, call->general, errors, y, 1, proved);
}

/* The block of 8 elements at j without the minimum (struct float64_kernel's `untracked`): when
 * some lane is refused, the minimum is found after all and the block finished again, so that
 * the exact-errors test decides as in a tracked block. */
AVX2_FUNCTION static inline __attribute__((always_inline)) uint32_t
float64_block_untracked(const struct float64_call *call, size_t j, int *tracked_after_all,
                        uint32_t *proved)
{
    const void *const *contributions = call->contributions;
    struct float64_quad x0, x1;
    float64_start(&x0, 0);
    float64_start(&x1, 0);
    for (int k = 0; k < call->count; k++) {
        const double *p = (const double *)contributions[k] + j;
        float64_add(&x0, p, NULL, 0);
        float64_add(&x1, p + 4, NULL, 0);
    }
    const struct float64_quad x[2] = {x0, x1};
    uint32_t refused = float64_finish(call->op, call->dir, contributions, call->count, j, x,
                                      call->result, call->a, call->general, NULL, NULL, 0, proved);
    if (refused != FLOAT64_TRACK_FIRST) return refused;
    *tracked_after_all = 1;
    struct float64_quad fresh;
    float64_start(&fresh, 1);
    x0.min = x1.min = fresh.min;
    for (int k = 0; k < call->count; k++) {
        const double *p = (const double *)contributions[k] + j;
        float64_track(&x0, p);
        float64_track(&x1, p + 4);
    }
    const struct float64_quad tracked_x[2] = {x0, x1};
    return float64_finish(call->op, call->dir, contributions, call->count, j, tracked_x,
                          call->result, call->a, call->general, NULL, NULL, 1, proved);
}

/* Elements [j, j + length) with many contributions (struct float64_kernel's `streamed`): the
 * states of their vectors stay in L1 while FLOAT64_GROUP contributions at a time stream
 * through them. */
AVX2_FUNCTION static void float64_streamed(const struct float64_call *call, size_t j, size_t length,
                                           int far)
{
    struct float64_quad x[FLOAT64_BLOCK / 4];
    const int vectors = (int)(length / 4), count = call->count;
    for (int v = 0; v < vectors; v++)
        float64_start(&x[v], 1);
    for (int k = 0; k < count; k += FLOAT64_GROUP) {
        int group = count - k < FLOAT64_GROUP ? count - k : FLOAT64_GROUP;
        for (int v = 0; v < vectors; v++) {
            struct float64_quad y = x[v];
            for (int g = 0; g < group; g++) {
                const double *p = (const double *)call->contributions[k + g] + j + 4 * (size_t)v;
                if (far && (v & 1) == 0) engine_prefetch_ahead(p, FLOAT64_BLOCK * sizeof(double));
                float64_add(&y, p, NULL, 1);
            }
            x[v] = y;
        }
    }
    for (int v = 0; v < vectors; v += 2) {
        uint32_t proved;
        float64_finish(call->op, call->dir, call->contributions, count, j + 4 * (size_t)v, &x[v],
                       call->result, call->a, call->general, NULL, NULL, 1, &proved);
    }
}

static const struct float64_kernel float64_kernel = {
    .block = 8,
    .direct = FLOAT64_DIRECT,
    .stream_block = FLOAT64_BLOCK,
    .tracked = float64_block_tracked,
    .untracked = float64_block_untracked,
    .streamed = float64_streamed,
};

/* Exact binary64: the cascade over blocks of 8 elements (engine_float64_driver.h). */
AVX2_FUNCTION size_t engine_exact_float64_avx2(reprod_op op, reprod_rounding dir,
                                               const void *const *contributions, int count,
                                               size_t element_count, double *result,
                                               struct engine_accumulator *a, size_t *general)
{
    const struct float64_call call = {op,     dir, contributions, count, element_count,
                                      result, a,   general};
    return engine_float64_drive(&float64_kernel, &call);
}

#else /* not x86-64: no AVX2 kernels */

int engine_cpu_has_avx2(void)
{
    return 0;
}

size_t engine_exact_float32_avx2(reprod_op op, reprod_rounding dir,
                                 const void *const *contributions, int count, size_t element_count,
                                 float *result, struct engine_accumulator *a, size_t *general)
{
    (void)op, (void)dir, (void)contributions, (void)count, (void)element_count, (void)result;
    (void)a, (void)general;
    return 0;
}

size_t engine_exact_float64_avx2(reprod_op op, reprod_rounding dir,
                                 const void *const *contributions, int count, size_t element_count,
                                 double *result, struct engine_accumulator *a, size_t *general)
{
    (void)dir, (void)contributions, (void)count, (void)element_count, (void)result, (void)a;
    (void)general;
    return 0;
}

#endif
