/* engine_avx512.c: AVX-512 (F) versions of the exact fast-path kernels, chosen at run time.
 *
 * The same arithmetic as engine_avx2.c with twice the lanes per instruction: binary32 sums in
 * binary64 certified by the inexact flag or by the span check, and the binary64 TwoSum cascade.
 * Built on x86-64 only; -ffp-contract=off keeps FMAs out.
 */
#include "engine/engine_float64_driver.h"
#include "engine/engine_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#define AVX512_FUNCTION __attribute__((target("avx512f")))
#define FLOAT32_CHUNK   256 /* elements per inexact-flag window (see engine_avx2.c) */
#define FLOAT64_DIRECT  16  /* up to this many contributions, no blocking (binary64) */
#define FLOAT64_BLOCK   256 /* elements whose states stay in L1 (10 KiB) while ... */
#define FLOAT64_GROUP   8   /* ... this many contributions at a time stream through them */

int engine_cpu_has_avx512(void)
{
    /* Every thread computes the same value: a relaxed atomic makes the race a defined one. */
    static _Atomic int cached = -1;
    int has = atomic_load_explicit(&cached, memory_order_relaxed);
    if (has < 0) {
        __builtin_cpu_init();
        /* The later tiers' AVX-512 builds (engine_distill.c, engine_beyond_window.c) use DQ,
         * VL and BW too: every AVX-512 CPU since Skylake-SP has them; one without them runs the
         * AVX2 level. */
        has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
        atomic_store_explicit(&cached, has, memory_order_relaxed);
    }
    return has;
}

/* Clear the inexact flag; the memory clobber keeps the input loads after it. */
static inline void inexact_clear(void)
{
    unsigned int csr = 0x1f80;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
}

/* Whether an inexact operation happened since inexact_clear; every store to `sums` precedes. */
static inline int inexact_raised(const double *sums)
{
    unsigned int csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr) : "r"(sums) : "memory");
    return (csr & 0x20) != 0;
}

/* The lines of the next chunk that the 32 elements at p will need there, into L2 (for inputs
 * engine_prefetch_wanted says: N=64, 1 Mi elements read 0.29 of the fold without, 0.54 with). */
static inline void float32_prefetch(const float *p)
{
    engine_prefetch_ahead(p, FLOAT32_CHUNK * sizeof(float));
    engine_prefetch_ahead(p, (FLOAT32_CHUNK + 16) * sizeof(float));
}

/* Bit l set: lane l of the 32 binary32 elements at offset j is outside the fast window or holds
 * an infinity or NaN (the span check of engine_avx2.c, 16 lanes per vector); each lane's
 * largest magnitude bits and smallest nonzero ones minus one into largest[l], smallest[l], for
 * the tiers beyond the window (engine_beyond_window_fn). */
AVX512_FUNCTION static uint32_t float32_span_check(const void *const *contributions, int count,
                                                   size_t j, uint32_t *largest, uint32_t *smallest,
                                                   int far)
{
    const __m512i one = _mm512_set1_epi32(1);
    __m512i max0 = _mm512_setzero_si512(), max1 = max0;
    __m512i min0 = _mm512_set1_epi32(-1), min1 = min0;
    for (int k = 0; k < count; k++) {
        const float *p = (const float *)contributions[k] + j;
        if (far) float32_prefetch(p);
        __m512i b0 = _mm512_loadu_si512(p), b1 = _mm512_loadu_si512(p + 16);
        b0 = _mm512_add_epi32(b0, b0); /* the magnitude, doubled: the sign shifted out */
        b1 = _mm512_add_epi32(b1, b1);
        max0 = _mm512_max_epu32(max0, b0);
        max1 = _mm512_max_epu32(max1, b1);
        min0 = _mm512_min_epu32(min0, _mm512_sub_epi32(b0, one)); /* zeros: all ones */
        min1 = _mm512_min_epu32(min1, _mm512_sub_epi32(b1, one));
    }
    _mm512_storeu_si512(largest, _mm512_srli_epi32(max0, 1)); /* undoubled: the sign bit 0 */
    _mm512_storeu_si512(largest + 16, _mm512_srli_epi32(max1, 1));
    _mm512_storeu_si512(smallest, _mm512_srli_epi32(min0, 1)); /* zeros: 0x7fffffff */
    _mm512_storeu_si512(smallest + 16, _mm512_srli_epi32(min1, 1));
    const __m512i window = _mm512_set1_epi32(engine_fast_window(24, count));
    const __m512i max_finite_field = _mm512_set1_epi32(254);
    __m512i e_max0 = _mm512_srli_epi32(max0, 24), e_max1 = _mm512_srli_epi32(max1, 24);
    __m512i e_min0 = _mm512_max_epi32(_mm512_srli_epi32(_mm512_add_epi32(min0, one), 24), one);
    __m512i e_min1 = _mm512_max_epi32(_mm512_srli_epi32(_mm512_add_epi32(min1, one), 24), one);
    __mmask16 bad0 = _mm512_cmpgt_epi32_mask(e_max0, max_finite_field) |
                     _mm512_cmpgt_epi32_mask(_mm512_sub_epi32(e_max0, e_min0), window);
    __mmask16 bad1 = _mm512_cmpgt_epi32_mask(e_max1, max_finite_field) |
                     _mm512_cmpgt_epi32_mask(_mm512_sub_epi32(e_max1, e_min1), window);
    return (uint32_t)bad0 | ((uint32_t)bad1 << 16);
}

/* Bit l set: sums[l] (l < 32) is infinite or NaN. */
AVX512_FUNCTION static uint32_t float32_nonfinite(const double *sums)
{
    const __m512i magnitude = _mm512_set1_epi64(0x7fffffffffffffffll);
    const __m512i infinity = _mm512_set1_epi64(0x7ff0000000000000ll);
    uint32_t bad = 0;
    for (int q = 0; q < 4; q++) {
        __m512i x = _mm512_and_si512(_mm512_loadu_si512(sums + 8 * q), magnitude);
        bad |= (uint32_t)_mm512_cmpge_epu64_mask(x, infinity) << (8 * q);
    }
    return bad;
}

/* How many of the two groups of 16 lanes in a span check's mask reach beyond the window: a
 * group with any such lane costs the tier's call, so when most do, the kernel sends the next
 * chunk whole to the tier. */
static inline int float32_wide_groups(uint32_t bad_mask)
{
    return ((bad_mask & 0xffff) != 0) + ((bad_mask >> 16) != 0);
}

/* Exact binary32: the two-pass scheme of engine_avx2.c with blocks of 32 elements. */
AVX512_FUNCTION size_t engine_exact_float32_avx512(reprod_op op, reprod_rounding dir,
                                                   const void *const *contributions, int count,
                                                   size_t element_count, float *result,
                                                   struct engine_accumulator *a, size_t *general)
{
    const struct engine_format f = engine_format_of(REPROD_FLOAT32);
    const int vector_store = op == REPROD_SUM && dir == REPROD_ROUND_NEAREST;
    double sums[FLOAT32_CHUNK];
    size_t j = 0;
    int wide = 0; /* the last chunk was mostly beyond the window: this one whole to the split */
    const int far = engine_prefetch_wanted(count, element_count, sizeof(float));
    while (j + 32 <= element_count) {
        size_t length = element_count - j < FLOAT32_CHUNK ? element_count - j : FLOAT32_CHUNK;
        length &= ~(size_t)31;
        uint32_t largest[FLOAT32_CHUNK], smallest[FLOAT32_CHUNK]; /* the span check's */
        if (wide) {              /* the split decides in-window lanes too: skip the binary64 sums */
            int wide_groups = 0; /* the span check says whether the next chunk stays here */
            for (size_t b = 0; b < length; b += 32)
                wide_groups += float32_wide_groups(float32_span_check(
                    contributions, count, j + b, largest + b, smallest + b, far));
            wide = 2 * (size_t)wide_groups > length / 16;
            engine_beyond_window_chunk_avx512(op, dir, contributions, count, j, length, largest,
                                              smallest, result, a, general);
            j += length;
            continue;
        }
        int wide_groups = 0;
        inexact_clear();
        for (size_t b = 0; b < length; b += 32) {
            /* Even and odd contributions in separate partial sums (subsets: still exact): the
             * order of the bracket (engine_inner.h), which takes these sums beyond the window. */
            __m512d s0 = _mm512_set1_pd(-0.0), s1 = s0, s2 = s0, s3 = s0;
            __m512d u0 = s0, u1 = s0, u2 = s0, u3 = s0;
            int k = 0;
            for (; k + 2 <= count; k += 2) {
                const float *p = (const float *)contributions[k] + j + b;
                const float *q = (const float *)contributions[k + 1] + j + b;
                if (far) {
                    float32_prefetch(p);
                    float32_prefetch(q);
                }
                s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm256_loadu_ps(p)));
                s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_loadu_ps(p + 8)));
                s2 = _mm512_add_pd(s2, _mm512_cvtps_pd(_mm256_loadu_ps(p + 16)));
                s3 = _mm512_add_pd(s3, _mm512_cvtps_pd(_mm256_loadu_ps(p + 24)));
                u0 = _mm512_add_pd(u0, _mm512_cvtps_pd(_mm256_loadu_ps(q)));
                u1 = _mm512_add_pd(u1, _mm512_cvtps_pd(_mm256_loadu_ps(q + 8)));
                u2 = _mm512_add_pd(u2, _mm512_cvtps_pd(_mm256_loadu_ps(q + 16)));
                u3 = _mm512_add_pd(u3, _mm512_cvtps_pd(_mm256_loadu_ps(q + 24)));
            }
            if (k < count) {
                const float *p = (const float *)contributions[k] + j + b;
                if (far) float32_prefetch(p);
                s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm256_loadu_ps(p)));
                s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_loadu_ps(p + 8)));
                s2 = _mm512_add_pd(s2, _mm512_cvtps_pd(_mm256_loadu_ps(p + 16)));
                s3 = _mm512_add_pd(s3, _mm512_cvtps_pd(_mm256_loadu_ps(p + 24)));
            }
            _mm512_storeu_pd(sums + b, _mm512_add_pd(s0, u0));
            _mm512_storeu_pd(sums + b + 8, _mm512_add_pd(s1, u1));
            _mm512_storeu_pd(sums + b + 16, _mm512_add_pd(s2, u2));
            _mm512_storeu_pd(sums + b + 24, _mm512_add_pd(s3, u3));
        }
        int all_exact = !inexact_raised(sums);
        for (size_t b = 0; b < length; b += 32) {
            const double *sum = sums + b;
            uint32_t bad_mask = all_exact ? float32_nonfinite(sum)
                                          : float32_span_check(contributions, count, j + b,
                                                               largest + b, smallest + b, 0);
            const uint32_t *known = all_exact ? NULL : largest + b; /* if the check ran */
            wide_groups += float32_wide_groups(bad_mask);
            uint32_t out[32];
            if (vector_store) { /* nearest: the hardware conversion (sums from -0 carry the right
                                 * sign of zero); then the tiers beyond the window overwrite the bad
                                 * lanes. Inputs are all read before the block's results are
                                 * written. */
                for (int q = 0; q < 4; q++)
                    _mm256_storeu_ps((float *)out + 8 * q,
                                     _mm512_cvtpd_ps(_mm512_loadu_pd(sum + 8 * q)));
            }
            if (bad_mask & 0xffff)
                engine_beyond_window_avx512(op, dir, contributions, count, j + b, 16,
                                            bad_mask & 0xffff, known, smallest + b, sum, out, a,
                                            general);
            if (bad_mask >> 16)
                engine_beyond_window_avx512(op, dir, contributions, count, j + b + 16, 16,
                                            bad_mask >> 16, known ? known + 16 : NULL,
                                            smallest + b + 16, sum + 16, out + 16, a, general);
            for (int lane = 0; lane < 32 && !vector_store; lane++) {
                size_t index = j + b + (size_t)lane;
                if (!((bad_mask >> lane) & 1))
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

/* Lanes where the sum s + t, beyond the window, still rounds as the exact sum: the vector
 * form of engine_rounding_certified (engine_inner.h: the certified rounding); a = fl(sum |e_k|),
 * two_n = 2N; nearest for rounding to nearest (only S = RN(exact sum) is needed there). */
AVX512_FUNCTION static inline __attribute__((always_inline)) __mmask8
float64_certified(__m512d s, __m512d t, __m512d a, __m512d two_n, int nearest)
{
    const __m512i exponent = _mm512_set1_epi64(0x7ff0000000000000ll);
    const __m512i fraction = _mm512_set1_epi64(0xfffffffffffffll);
    __m512d S = _mm512_add_pd(s, t), v = _mm512_sub_pd(S, s);
    __m512d T = _mm512_add_pd(_mm512_sub_pd(s, _mm512_sub_pd(S, v)), _mm512_sub_pd(t, v));
    __m512i S_bits = _mm512_castpd_si512(S);
    __m512d G = _mm512_castsi512_pd(_mm512_and_si512(S_bits, exponent));
    __mmask8 to_zero = _mm512_cmplt_epi64_mask(_mm512_xor_si512(S_bits, _mm512_castpd_si512(T)),
                                               _mm512_setzero_si512()); /* T points to zero */
    __mmask8 halved = _mm512_testn_epi64_mask(S_bits, fraction) & (nearest ? 0xff : to_zero);
    G = _mm512_mask_mul_pd(G, halved, G, _mm512_set1_pd(0.5));
    __m512d tail = _mm512_mul_pd(_mm512_abs_pd(T), _mm512_set1_pd(0x1p53));
    __m512d Z = _mm512_mul_pd(_mm512_mul_pd(a, two_n), _mm512_set1_pd(2.0));
    __mmask8 above = nearest ? 0xff : _mm512_cmp_pd_mask(tail, Z, _CMP_GT_OQ);
    __mmask8 inside = _mm512_cmp_pd_mask(_mm512_sub_pd(G, tail), Z, _CMP_GT_OQ);
    __mmask8 exact = _mm512_cmp_pd_mask(a, _mm512_setzero_pd(), _CMP_EQ_OQ);
    return exact | (above & inside);
}

/* The binary64 kernel's running state of 8 elements: the TwoSum cascade (s, t), the sum a of
 * |e_k| for the exact-errors test and the certified rounding (engine_inner.h), and the min of the
 * doubled magnitude bits minus one (zeros never win it: all ones) for the exact-errors test. Both
 * are needed: data with few bits beyond the type's often sum to exact ties, which only the
 * exact-errors test proves; wide spreads and cancellation only the certified rounding. */
struct float64_lanes {
    __m512d s, t, a;
    __m512i min;
};

/* track 0: no minimum (min 0 gives u = 2^-1074 in the exact-errors test: a true bound, if a
 * useless one). */
AVX512_FUNCTION static inline void float64_start(struct float64_lanes *x, int track)
{
    x->s = _mm512_set1_pd(-0.0);
    x->t = x->a = _mm512_setzero_pd();
    x->min = _mm512_set1_epi64(track ? -1 : 0);
}

/* The minimum for the exact-errors test: the doubled magnitude bits minus one (zeros: all ones) of
 * the 8 terms at p into x->min. */
AVX512_FUNCTION static inline __attribute__((always_inline)) void
float64_track(struct float64_lanes *x, const double *p)
{
    __m512i b = _mm512_loadu_si512(p);
    b = _mm512_add_epi64(b, b);
    x->min = _mm512_min_epu64(x->min, _mm512_sub_epi64(b, _mm512_set1_epi64(1)));
}

/* Add the 8 terms at p to the state, and store their errors at error_slot unless it is NULL
 * (the distillation tier's first pass, done here). Half the additions run as FMAs with an
 * opaque 1.0 (x * 1 + y is x + y rounded once: the same bits): where adds and FMAs have their own
 * units (AMD Zen 4) both are busy, elsewhere it changes nothing. */
AVX512_FUNCTION static inline __attribute__((always_inline)) __m512d
float64_add(struct float64_lanes *x, const double *p, double *error_slot, const int track)
{
    __m512d unit = _mm512_set1_pd(1.0);
    __asm__("" : "+v"(unit)); /* opaque: the compiler may not fold x * 1 + y into an add */
    __m512d v = _mm512_loadu_pd(p);
    if (track) float64_track(x, p);
    __m512d n = _mm512_add_pd(x->s, v), w = _mm512_fmsub_pd(n, unit, x->s);
    __m512d e =
        _mm512_add_pd(_mm512_sub_pd(x->s, _mm512_sub_pd(n, w)), _mm512_fmsub_pd(v, unit, w));
    x->t = _mm512_fmadd_pd(e, unit, x->t);
    x->a = _mm512_fmadd_pd(_mm512_abs_pd(e), unit, x->a);
    x->s = n;
    if (error_slot) _mm512_store_pd(error_slot, e);
    return e;
}

/* The distillation tier's second pass (engine_inner.h: DISTILLED) run alongside the first: the
 * cascade over [e_1, ..., e_{N-1}, s] as the first pass makes them, (s, t, a) as there. */
struct float64_second {
    __m512d s, t, a;
};

/* An empty second pass: s = -0 (adding e_1 to it gives e_1 and no error, as starting from
 * e_1 would). */
AVX512_FUNCTION static inline void float64_second_start(struct float64_second *y)
{
    y->s = _mm512_set1_pd(-0.0);
    y->t = y->a = _mm512_setzero_pd();
}

/* Add the next term of the second pass: an error e_k, or at the end the first pass's s. */
AVX512_FUNCTION static inline __attribute__((always_inline)) void
float64_second_add(struct float64_second *y, __m512d v)
{
    __m512d n = _mm512_add_pd(y->s, v), w = _mm512_sub_pd(n, y->s);
    __m512d e = _mm512_add_pd(_mm512_sub_pd(y->s, _mm512_sub_pd(n, w)), _mm512_sub_pd(v, w));
    y->t = _mm512_add_pd(y->t, e);
    y->a = _mm512_add_pd(y->a, _mm512_abs_pd(e));
    y->s = n;
}

/* Lanes of a finished state whose s + t is not the fast path's result: t not proved exact by
 * the exact-errors test and s + t not certified, or a non-finite s + t (infinities, NaNs,
 * overflow). */
AVX512_FUNCTION static inline __attribute__((always_inline)) __mmask8
float64_refused(const struct float64_lanes *x, int count, reprod_rounding dir, __mmask8 *proved)
{
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i magnitude = _mm512_set1_epi64(0x7fffffffffffffffll);
    const __m512i infinity = _mm512_set1_epi64(0x7ff0000000000000ll);
    __m512d sum = _mm512_add_pd(x->s, x->t);
    /* The smallest nonzero term's exponent field from bits 53..63 of its doubled magnitude
     * (subnormals and no nonzero term: 1); t is exact when a <= 2^(field - 1023). */
    __m512i field = _mm512_max_epu64(_mm512_srli_epi64(_mm512_add_epi64(x->min, one), 53), one);
    __mmask8 wide =
        _mm512_cmpgt_epu64_mask(_mm512_castpd_si512(x->a), _mm512_slli_epi64(field, 52));
    *proved = (__mmask8)~wide;
    if (wide)
        wide &= ~float64_certified(x->s, x->t, x->a, _mm512_set1_pd(2.0 * count),
                                   dir == REPROD_ROUND_NEAREST);
    return wide |
           _mm512_cmpge_epu64_mask(_mm512_and_si512(_mm512_castpd_si512(sum), magnitude), infinity);
}

/* Write the results of the 16 elements at j from their finished states x[0], x[1]; prepared:
 * NULL, or their first pass's output for the distillation tier, and then y[0], y[1] its
 * second pass, which decides lanes the certified rounding accepts there; tracked: whether
 * x holds the exact-errors test's minimum; *proved: the lanes that test proved. Returns the lanes
 * the first pass refused, or FLOAT64_TRACK_FIRST, having written nothing, when x lacks the minimum
 * and some lane is refused (the exact-errors test might decide it). */
AVX512_FUNCTION static inline __attribute__((always_inline)) uint32_t
float64_finish(reprod_op op, reprod_rounding dir, const void *const *contributions, int count,
               size_t j, const struct float64_lanes *x, double *result,
               struct engine_accumulator *a, size_t *general, double *prepared,
               const struct float64_second *y, int tracked, uint32_t *proved)
{
    const __m512i magnitude = _mm512_set1_epi64(0x7fffffffffffffffll);
    const __m512i infinity = _mm512_set1_epi64(0x7ff0000000000000ll);
    __m512d sum0 = _mm512_add_pd(x[0].s, x[0].t), sum1 = _mm512_add_pd(x[1].s, x[1].t);
    __mmask8 proved0, proved1;
    __mmask8 bad0 = float64_refused(&x[0], count, dir, &proved0);
    __mmask8 bad1 = float64_refused(&x[1], count, dir, &proved1);
    if (!tracked && (bad0 | bad1)) return FLOAT64_TRACK_FIRST;
    *proved = (uint32_t)proved0 | ((uint32_t)proved1 << 8);
    uint32_t bad_mask = (uint32_t)bad0 | ((uint32_t)bad1 << 8), second = 0;
    if (bad_mask && prepared) { /* the second pass's verdict on the refused lanes */
        __m512d two_n = _mm512_set1_pd(2.0 * count);
        __m512d sum2_0 = _mm512_add_pd(y[0].s, y[0].t), sum2_1 = _mm512_add_pd(y[1].s, y[1].t);
        __mmask8 second0 =
            bad0 & float64_certified(y[0].s, y[0].t, y[0].a, two_n, dir == REPROD_ROUND_NEAREST) &
            _mm512_cmplt_epu64_mask(_mm512_and_si512(_mm512_castpd_si512(sum2_0), magnitude),
                                    infinity);
        __mmask8 second1 =
            bad1 & float64_certified(y[1].s, y[1].t, y[1].a, two_n, dir == REPROD_ROUND_NEAREST) &
            _mm512_cmplt_epu64_mask(_mm512_and_si512(_mm512_castpd_si512(sum2_1), magnitude),
                                    infinity);
        second = (uint32_t)second0 | ((uint32_t)second1 << 8);
        sum0 = _mm512_mask_blend_pd(second0, sum0, sum2_0);
        sum1 = _mm512_mask_blend_pd(second1, sum1, sum2_1);
    }
    __mmask8 zero0 = _mm512_cmp_pd_mask(sum0, _mm512_setzero_pd(), _CMP_EQ_OQ);
    __mmask8 zero1 = _mm512_cmp_pd_mask(sum1, _mm512_setzero_pd(), _CMP_EQ_OQ);
    if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST &&
        ((bad_mask & ~second) | zero0 | zero1) == 0) {
        _mm512_storeu_pd(result + j, sum0); /* RN(s + t) is the nearest rounding */
        _mm512_storeu_pd(result + j + 8, sum1);
        return bad_mask;
    }
    double s[16], t[16];
    uint64_t min[16];
    _mm512_storeu_pd(s, x[0].s);
    _mm512_storeu_pd(s + 8, x[1].s);
    _mm512_storeu_pd(t, x[0].t);
    _mm512_storeu_pd(t + 8, x[1].t);
    _mm512_storeu_si512(min, x[0].min);
    _mm512_storeu_si512(min + 8, x[1].min);
    uint64_t out[16];
    if (bad_mask & ~second)
        engine_distill_float64_avx512(op, dir, contributions, count, j, 16, bad_mask & ~second,
                                      prepared, out, a, general);
    /* Lanes stored by vector: RN(s + t) rounds a nonzero sum to nearest (after the tier,
     * which may write whole vectors of `out`). */
    __mmask8 vector0 = 0, vector1 = 0;
    if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST) {
        vector0 = (__mmask8) ~((bad0 & ~second) | zero0);
        vector1 = (__mmask8) ~((bad1 & ~(second >> 8)) | zero1);
        _mm512_mask_storeu_pd(out, vector0, sum0);
        _mm512_mask_storeu_pd(out + 8, vector1, sum1);
    }
    uint32_t done = (uint32_t)vector0 | ((uint32_t)vector1 << 8);
    if (second & ~done) { /* a refused element holds a nonzero term */
        double s2[16], t2[16];
        _mm512_storeu_pd(s2, y[0].s);
        _mm512_storeu_pd(s2 + 8, y[1].s);
        _mm512_storeu_pd(t2, y[0].t);
        _mm512_storeu_pd(t2 + 8, y[1].t);
        for (uint32_t rest = second & ~done; rest; rest &= rest - 1) {
            int lane = __builtin_ctz(rest);
            out[lane] = engine_float64_lane(op, dir, contributions, count, j + (size_t)lane, 1,
                                            s2[lane], t2[lane], 1, a, general);
        }
    }
    for (int lane = 0; lane < 16; lane++)
        if (!(((bad_mask | done) >> lane) & 1)) /* min all ones: every term is zero */
            out[lane] =
                engine_float64_lane(op, dir, contributions, count, j + (size_t)lane, 1, s[lane],
                                    t[lane], tracked ? min[lane] != UINT64_MAX : -1, a, general);
    memcpy(result + j, out, sizeof out);
    return bad_mask;
}

/* The block of 16 elements at j, tracking the minimum (struct float64_kernel's `tracked`). */
AVX512_FUNCTION static inline __attribute__((always_inline)) uint32_t
float64_block_tracked(const struct float64_call *call, size_t j, double *errors, uint32_t *proved)
{
    const void *const *contributions = call->contributions;
    struct float64_lanes x0, x1; /* not an array: they stay in registers */
    float64_start(&x0, 1);
    float64_start(&x1, 1);
    float64_add(&x0, (const double *)contributions[0] + j, NULL, 1);
    float64_add(&x1, (const double *)contributions[0] + j + 8, NULL, 1);
    struct float64_second y0, y1;
    float64_second_start(&y0);
    float64_second_start(&y1);
    if (errors) { /* the first pass's output kept, the second pass run alongside */
        for (int k = 1; k < call->count; k++) {
            const double *p = (const double *)contributions[k] + j;
            double *slot = errors + (size_t)(k - 1) * ENGINE_DISTILL_PREPARED_LANES;
            float64_second_add(&y0, float64_add(&x0, p, slot, 1));
            float64_second_add(&y1, float64_add(&x1, p + 8, slot + 8, 1));
        }
        float64_second_add(&y0, x0.s); /* the first pass's s comes last */
        float64_second_add(&y1, x1.s);
        double *top = errors + (size_t)(call->count - 1) * ENGINE_DISTILL_PREPARED_LANES;
        memcpy(top, &x0.s, sizeof x0.s);
        memcpy(top + 8, &x1.s, sizeof x1.s);
    } else {
        for (int k = 1; k < call->count; k++) {
            const double *p = (const double *)contributions[k] + j;
            float64_add(&x0, p, NULL, 1);
            float64_add(&x1, p + 8, NULL, 1);
        }
    }
    const struct float64_lanes x[2] = {x0, x1};
    const struct float64_second y[2] = {y0, y1};
    return float64_finish(call->op, call->dir, contributions, call->count, j, x, call->result,
                          call->a, call->general, errors, y, 1, proved);
}

/* The block of 16 elements at j without the minimum (struct float64_kernel's `untracked`): when
 * some lane is refused, the minimum is found after all and the block finished again, so that
 * the exact-errors test decides as in a tracked block. */
AVX512_FUNCTION static inline __attribute__((always_inline)) uint32_t
float64_block_untracked(const struct float64_call *call, size_t j, int *tracked_after_all,
                        uint32_t *proved)
{
    const void *const *contributions = call->contributions;
    struct float64_lanes x0, x1;
    float64_start(&x0, 0);
    float64_start(&x1, 0);
    for (int k = 0; k < call->count; k++) {
        const double *p = (const double *)contributions[k] + j;
        float64_add(&x0, p, NULL, 0);
        float64_add(&x1, p + 8, NULL, 0);
    }
    const struct float64_lanes x[2] = {x0, x1};
    uint32_t refused = float64_finish(call->op, call->dir, contributions, call->count, j, x,
                                      call->result, call->a, call->general, NULL, NULL, 0, proved);
    if (refused != FLOAT64_TRACK_FIRST) return refused;
    *tracked_after_all = 1;
    struct float64_lanes fresh;
    float64_start(&fresh, 1);
    x0.min = x1.min = fresh.min;
    for (int k = 0; k < call->count; k++) {
        const double *p = (const double *)contributions[k] + j;
        float64_track(&x0, p);
        float64_track(&x1, p + 8);
    }
    const struct float64_lanes tracked_x[2] = {x0, x1};
    return float64_finish(call->op, call->dir, contributions, call->count, j, tracked_x,
                          call->result, call->a, call->general, NULL, NULL, 1, proved);
}

/* Elements [j, j + length) with many contributions (struct float64_kernel's `streamed`): the
 * states of their vectors stay in L1 while FLOAT64_GROUP contributions at a time stream
 * through them. */
AVX512_FUNCTION static void float64_streamed(const struct float64_call *call, size_t j,
                                             size_t length, int far)
{
    struct float64_lanes x[FLOAT64_BLOCK / 8];
    const int vectors = (int)(length / 8), count = call->count;
    for (int v = 0; v < vectors; v++)
        float64_start(&x[v], 1);
    for (int k = 0; k < count; k += FLOAT64_GROUP) {
        int group = count - k < FLOAT64_GROUP ? count - k : FLOAT64_GROUP;
        for (int v = 0; v < vectors; v++) {
            struct float64_lanes y = x[v];
            for (int g = 0; g < group; g++) {
                const double *p = (const double *)call->contributions[k + g] + j + 8 * (size_t)v;
                if (far) engine_prefetch_ahead(p, FLOAT64_BLOCK * sizeof(double));
                float64_add(&y, p, NULL, 1);
            }
            x[v] = y;
        }
    }
    for (int v = 0; v < vectors; v += 2) {
        uint32_t proved;
        float64_finish(call->op, call->dir, call->contributions, count, j + 8 * (size_t)v, &x[v],
                       call->result, call->a, call->general, NULL, NULL, 1, &proved);
    }
}

static const struct float64_kernel float64_kernel = {
    .block = 16,
    .direct = FLOAT64_DIRECT,
    .stream_block = FLOAT64_BLOCK,
    .tracked = float64_block_tracked,
    .untracked = float64_block_untracked,
    .streamed = float64_streamed,
};

/* Exact binary64: the cascade over blocks of 16 elements (engine_float64_driver.h). */
AVX512_FUNCTION size_t engine_exact_float64_avx512(reprod_op op, reprod_rounding dir,
                                                   const void *const *contributions, int count,
                                                   size_t element_count, double *result,
                                                   struct engine_accumulator *a, size_t *general)
{
    const struct float64_call call = {op,     dir, contributions, count, element_count,
                                      result, a,   general};
    return engine_float64_drive(&float64_kernel, &call);
}

#else /* not x86-64: no AVX-512 kernels */

int engine_cpu_has_avx512(void)
{
    return 0;
}

size_t engine_exact_float32_avx512(reprod_op op, reprod_rounding dir,
                                   const void *const *contributions, int count,
                                   size_t element_count, float *result,
                                   struct engine_accumulator *a, size_t *general)
{
    (void)op, (void)dir, (void)contributions, (void)count, (void)element_count, (void)result;
    (void)a, (void)general;
    return 0;
}

size_t engine_exact_float64_avx512(reprod_op op, reprod_rounding dir,
                                   const void *const *contributions, int count,
                                   size_t element_count, double *result,
                                   struct engine_accumulator *a, size_t *general)
{
    (void)dir, (void)contributions, (void)count, (void)element_count, (void)result, (void)a;
    (void)general;
    return 0;
}

#endif
