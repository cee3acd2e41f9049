/* engine_distill.c: the engine's later tiers on vectors of refused lanes (engine_inner.h).
 *
 * A binary64 kernel's first pass refuses an element when neither (c') nor (d) decides it:
 * heavy cancellation, or t too coarse. Done one element at a time (the general path) that
 * costs tens to hundreds of nanoseconds an element: the cliff. Here the refused lanes of a
 * kernel's block (8 or 16 elements) are distilled together on vectors (e): the N terms of each
 * lane are loaded once (or taken from the errors the kernel kept), the cascade runs over them
 * in place pass after pass, and after each pass (d), (c') and the midpoint rule (f) decide the
 * lanes they can; what is left after ENGINE_DISTILL_PASSES takes the general path. Binary32
 * lanes beyond their window run (i), (h), then (g), the same way. Every lane does the same work (no
 * branch between elements), and it computes exactly what the per-element functions of
 * engine_inner.h do (which the GPU kernels run), so which tier decides a lane it is given
 * never depends on the kernel level (tests/unit/test_engine.c and the fuzzer check it). One
 * exception upstream of these tiers: the 16- and 32-bit kernels accept any chunk whose
 * binary64 sums the inexact flag shows exact, which the per-element path may have sent to the
 * general path (2^127 - 2^127 + 2^-126 in bfloat16): the same bits, another count.
 *
 * One body in GCC vector code, compiled for each kernel level: the wrappers below carry the
 * target, and the always-inline body takes it on (a vector of 8 doubles is one AVX-512
 * register, two AVX2 ones, four SSE2 ones).
 */
#include "engine/engine_kernels.h"

#include <string.h>

typedef double distill_vector __attribute__((vector_size(64)));
typedef int64_t distill_mask __attribute__((vector_size(64)));
typedef uint64_t distill_unsigned __attribute__((vector_size(64)));

#define DISTILL_WIDTH  8 /* lanes per vector */
#define DISTILL_GROUPS 2 /* vectors per block at most: 16 lanes */
#define MAGNITUDE      0x7fffffffffffffffll
#define EXPONENT       0x7ff0000000000000ll
#define FRACTION       0x000fffffffffffffll

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define DISTILL_X86    1
#define DISTILL_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define DISTILL_AVX2   __attribute__((target("avx2,fma")))
#else
#define DISTILL_X86 0
#define DISTILL_AVX512
#define DISTILL_AVX2
#endif

/* Levels, as the bodies' `level` argument (a literal in each wrapper): what little GCC's vector
 * code does badly goes through per-level helpers, inlined into the wrappers of their level. */
enum { LEVEL_GENERIC, LEVEL_AVX2, LEVEL_AVX512 };

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* The 8 binary32 values at p as doubles, into *x. GCC converts a whole vector through
 * extracts and inserts (four instructions); the AVX-512 conversion is one, AVX2's two. The
 * level helpers are not always_inline: they inline into the wrapper of their level only. */
#if DISTILL_X86
DISTILL_AVX512 static inline void distill_floats_avx512(const float *p, distill_vector *x)
{
    __m512d d = _mm512_cvtps_pd(_mm256_loadu_ps(p));
    memcpy(x, &d, sizeof d);
}

DISTILL_AVX2 static inline void distill_floats_avx2(const float *p, distill_vector *x)
{
    __m256d low = _mm256_cvtps_pd(_mm_loadu_ps(p)), high = _mm256_cvtps_pd(_mm_loadu_ps(p + 4));
    memcpy(x, &low, sizeof low);
    memcpy((char *)x + sizeof low, &high, sizeof high);
}

/* The same for 8 bfloat16 values (the top halves of binary32 values). */
DISTILL_AVX512 static inline void distill_bfloat16s_avx512(const uint16_t *p, distill_vector *x)
{
    __m256i bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p)), 16);
    __m512d d = _mm512_cvtps_pd(_mm256_castsi256_ps(bits));
    memcpy(x, &d, sizeof d);
}

DISTILL_AVX2 static inline void distill_bfloat16s_avx2(const uint16_t *p, distill_vector *x)
{
    __m256i bits = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p)), 16);
    __m256 f = _mm256_castsi256_ps(bits);
    __m256d low = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
    __m256d high = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
    memcpy(x, &low, sizeof low);
    memcpy((char *)x + sizeof low, &high, sizeof high);
}
#endif

/* *sum = a + b rounded once, as an FMA a * 1 + b where the level has one: AMD's Zen 4 runs
 * FMAs on its multiply units, beside the two that add (engine_avx512.c), so that a loop of
 * additions issues from both; the same bits either way. */
#if DISTILL_X86
DISTILL_AVX512 static inline void
distill_add_fma_avx512(const distill_vector *a, const distill_vector *b, distill_vector *sum)
{
    __m512d unit = _mm512_set1_pd(1.0), x, y;
    __asm__("" : "+v"(unit)); /* opaque: the compiler may not fold x * 1 + y into an add */
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    __m512d r = _mm512_fmadd_pd(x, unit, y);
    memcpy(sum, &r, sizeof r);
}

DISTILL_AVX2 static inline void distill_add_fma_avx2(const distill_vector *a,
                                                     const distill_vector *b, distill_vector *sum)
{
    __m256d unit = _mm256_set1_pd(1.0), x[2], y[2];
    __asm__("" : "+x"(unit));
    memcpy(x, a, sizeof x);
    memcpy(y, b, sizeof y);
    x[0] = _mm256_fmadd_pd(x[0], unit, y[0]);
    x[1] = _mm256_fmadd_pd(x[1], unit, y[1]);
    memcpy(sum, x, sizeof x);
}
#endif

ALWAYS_INLINE void distill_add_fma(const int level, const distill_vector *a,
                                   const distill_vector *b, distill_vector *sum)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return distill_add_fma_avx512(a, b, sum);
    if (level == LEVEL_AVX2) return distill_add_fma_avx2(a, b, sum);
#endif
    *sum = *a + *b;
}

ALWAYS_INLINE void distill_floats(const int level, const float *p, distill_vector *x)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return distill_floats_avx512(p, x);
    if (level == LEVEL_AVX2) return distill_floats_avx2(p, x);
#endif
    typedef float float_vector __attribute__((vector_size(32)));
    float_vector f;
    memcpy(&f, p, sizeof f);
    *x = __builtin_convertvector(f, distill_vector);
}

/* Binary32 vectors of 8 lanes for the tiers beyond the window. */
typedef float wide32_floats __attribute__((vector_size(32)));
typedef float wide32_floats_half __attribute__((vector_size(16)));
typedef int32_t wide32_int __attribute__((vector_size(32)));
typedef uint32_t wide32_bits __attribute__((vector_size(32)));

/* Conversions between 8 lanes of 32 and of 64 bits, which GCC's vector code does through
 * halves and inserts: one instruction at AVX-512, two or three at AVX2. */
#if DISTILL_X86
DISTILL_AVX512 static inline void distill_widen_avx512(const wide32_int *x, distill_mask *wide)
{
    __m256i narrow;
    memcpy(&narrow, x, sizeof narrow);
    __m512i r = _mm512_cvtepi32_epi64(narrow);
    memcpy(wide, &r, sizeof r);
}

DISTILL_AVX2 static inline void distill_widen_avx2(const wide32_int *x, distill_mask *wide)
{
    __m256i narrow, r[2];
    memcpy(&narrow, x, sizeof narrow);
    r[0] = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(narrow));
    r[1] = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(narrow, 1));
    memcpy(wide, r, sizeof r);
}

DISTILL_AVX512 static inline void distill_narrow_avx512(const distill_mask *x, wide32_int *narrow)
{
    __m512i wide;
    memcpy(&wide, x, sizeof wide);
    __m256i r = _mm512_cvtepi64_epi32(wide);
    memcpy(narrow, &r, sizeof r);
}

DISTILL_AVX2 static inline void distill_narrow_avx2(const distill_mask *x, wide32_int *narrow)
{
    __m256i wide[2];
    memcpy(wide, x, sizeof wide);
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    __m256i low = _mm256_permutevar8x32_epi32(wide[0], even);
    __m256i high = _mm256_permutevar8x32_epi32(wide[1], even);
    __m256i r = _mm256_permute2x128_si256(low, high, 0x20);
    memcpy(narrow, &r, sizeof r);
}

DISTILL_AVX512 static inline void distill_to_floats_avx512(const distill_vector *x,
                                                           wide32_floats *f)
{
    __m512d d;
    memcpy(&d, x, sizeof d);
    __m256 r = _mm512_cvtpd_ps(d);
    memcpy(f, &r, sizeof r);
}

DISTILL_AVX2 static inline void distill_to_floats_avx2(const distill_vector *x, wide32_floats *f)
{
    __m256d d[2];
    memcpy(d, x, sizeof d);
    __m256 r = _mm256_set_m128(_mm256_cvtpd_ps(d[1]), _mm256_cvtpd_ps(d[0]));
    memcpy(f, &r, sizeof r);
}
#endif

/* Lane-wise int32 -> int64 (sign-extended), int64 -> int32 (truncated), double -> float (the
 * current rounding). */
ALWAYS_INLINE void distill_widen(const int level, const wide32_int *x, distill_mask *wide)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return distill_widen_avx512(x, wide);
    if (level == LEVEL_AVX2) return distill_widen_avx2(x, wide);
#endif
    *wide = __builtin_convertvector(*x, distill_mask);
}

ALWAYS_INLINE void distill_narrow(const int level, const distill_mask *x, wide32_int *narrow)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return distill_narrow_avx512(x, narrow);
    if (level == LEVEL_AVX2) return distill_narrow_avx2(x, narrow);
#endif
    *narrow = __builtin_convertvector(*x, wide32_int);
}

ALWAYS_INLINE void distill_to_floats(const int level, const distill_vector *x, wide32_floats *f)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return distill_to_floats_avx512(x, f);
    if (level == LEVEL_AVX2) return distill_to_floats_avx2(x, f);
#endif
    wide32_floats_half low =
        __builtin_convertvector(__builtin_shufflevector(*x, *x, 0, 1, 2, 3), wide32_floats_half);
    wide32_floats_half high =
        __builtin_convertvector(__builtin_shufflevector(*x, *x, 4, 5, 6, 7), wide32_floats_half);
    *f = __builtin_shufflevector(low, high, 0, 1, 2, 3, 4, 5, 6, 7);
}

/* Terms k..k+7 from element j of a binary32 (type REPROD_FLOAT32) or bfloat16 contribution:
 * their binary32 bits, or their values as doubles. */
ALWAYS_INLINE void wide32_load_bits(const reprod_type type, const void *contribution, size_t j,
                                    wide32_bits *bits)
{
    if (type == REPROD_BFLOAT16) {
        typedef uint16_t halves __attribute__((vector_size(16)));
        halves h;
        memcpy(&h, (const uint16_t *)contribution + j, sizeof h);
        *bits = __builtin_convertvector(h, wide32_bits) << 16;
        return;
    }
    memcpy(bits, (const float *)contribution + j, sizeof *bits);
}

ALWAYS_INLINE void wide32_load_terms(const int level, const reprod_type type,
                                     const void *contribution, size_t j, distill_vector *x)
{
    if (type != REPROD_BFLOAT16) return distill_floats(level, (const float *)contribution + j, x);
#if DISTILL_X86
    if (level == LEVEL_AVX512)
        return distill_bfloat16s_avx512((const uint16_t *)contribution + j, x);
    if (level == LEVEL_AVX2) return distill_bfloat16s_avx2((const uint16_t *)contribution + j, x);
#endif
    wide32_bits bits;
    wide32_floats f;
    wide32_load_bits(type, contribution, j, &bits);
    memcpy(&f, &bits, sizeof f);
    *x = __builtin_convertvector(f, distill_vector);
}

/* Lane-wise tests written without comparisons, which GCC lowers to scalar code for vectors
 * wider than the target's (and for AVX-512's mask registers): shifts and subtractions only.
 * Each gives all ones where it holds, zeros elsewhere. */
#define MASK_NEGATIVE(x) ((x) >> 63)     /* x < 0 */
#define MASK_ZERO(x)     (((x)-1) >> 63) /* x == 0, for x >= 0 */
/* x > y, for y >= 0 (x, y the bits of doubles: for y >= 0 and x not a NaN, their order as
 * doubles is their order as signed integers); the subtraction runs unsigned (no overflow) and
 * only counts when x >= 0. */
#define MASK_GREATER(x, y)                                                                         \
    (MASK_NEGATIVE((distill_mask)((distill_unsigned)(y) - (distill_unsigned)(x))) &                \
     ~MASK_NEGATIVE(x))

/* All-ones lanes where s + t is finite and certified by (d): the vector form of
 * engine_is_finite(s + t) && engine_rounding_certified(s, t, error_sum, N, dir), operation for
 * operation (two_n = 2N; nearest: dir is to nearest). Vectors pass by address: always
 * inlined, nothing is passed. */
ALWAYS_INLINE void distill_certified(const distill_vector *s_in, const distill_vector *t_in,
                                     const distill_vector *error_sum_in, double two_n, int nearest,
                                     distill_mask *certified)
{
    const distill_mask all = {-1, -1, -1, -1, -1, -1, -1, -1};
    distill_vector s = *s_in, t = *t_in, error_sum = *error_sum_in;
    distill_vector S = s + t, v = S - s;
    distill_vector T = (s - (S - v)) + (t - v);
    distill_mask S_bits = (distill_mask)S, T_bits = (distill_mask)T;
    distill_vector G = (distill_vector)(S_bits & EXPONENT);
    distill_mask halved =
        MASK_ZERO(S_bits & FRACTION) & (nearest ? all : MASK_NEGATIVE(S_bits ^ T_bits));
    distill_vector half = G * 0.5;
    G = (distill_vector)(((distill_mask)half & halved) | ((distill_mask)G & ~halved));
    distill_vector tail = (distill_vector)(T_bits & MAGNITUDE) * 0x1p53;
    distill_vector Z = error_sum * two_n * 2.0;
    distill_mask Z_bits = (distill_mask)Z; /* >= 0, or a NaN: never below (G - tail) or tail */
    distill_mask inside = (nearest ? all : MASK_GREATER((distill_mask)tail, Z_bits)) &
                          MASK_GREATER((distill_mask)(G - tail), Z_bits);
    distill_mask finite = MASK_NEGATIVE((S_bits & MAGNITUDE) - EXPONENT);
    *certified = (MASK_ZERO((distill_mask)error_sum) | inside) & finite;
}

/* All-ones lanes where t is exact by (c'): engine_errors_exact lane-wise, from `low`, the
 * min of the terms' magnitude bits minus one (below 2^63: signed arithmetic is safe). */
ALWAYS_INLINE void distill_errors_exact(const distill_vector *error_sum, const distill_mask *low,
                                        distill_mask *exact)
{
    distill_mask field = (distill_mask)(((distill_unsigned)*low + 1) & MAGNITUDE) >> 52;
    field |= MASK_ZERO(field) & 1;
    *exact = ~MASK_GREATER((distill_mask)*error_sum, field << 52);
}

/* engine_midpoint lane-wise (engine_inner.h (f)) for the distilled v[0..n-1][g], n >= 3:
 * all-ones lanes in *tie where it applies, with their pair in *s_out, *t_out. */
ALWAYS_INLINE void distill_tie(distill_vector (*v)[DISTILL_GROUPS], int n, int g, double two_n,
                               distill_mask *tie, distill_vector *s_out, distill_vector *t_out)
{
    distill_vector s = v[n - 1][g], c = v[n - 2][g];
    distill_vector S = s + c, w = S - s;
    distill_vector T = (s - (S - w)) + (c - w);
    distill_mask S_bits = (distill_mask)S, T_bits = (distill_mask)T;
    distill_mask power = S_bits & EXPONENT;
    distill_mask in_range = ~MASK_NEGATIVE(power - (23ll << 52)) & MASK_NEGATIVE(power - EXPONENT);
    distill_mask halved = MASK_ZERO(S_bits & FRACTION) & MASK_NEGATIVE(S_bits ^ T_bits);
    distill_vector h = (distill_vector)power * 0x1p-53, half = h * 0.5;
    h = (distill_vector)(((distill_mask)half & halved) | ((distill_mask)h & ~halved));
    distill_mask on_midpoint = MASK_ZERO((T_bits & MAGNITUDE) ^ (distill_mask)h);
    distill_vector rest = {0}, rest_abs = {0};
    for (int k = 0; k < n - 2; k++) {
        rest += v[k][g];
        rest_abs += (distill_vector)((distill_mask)v[k][g] & MAGNITUDE);
    }
    distill_vector Z = rest_abs * two_n * 2.0;
    distill_vector tail = (distill_vector)((distill_mask)rest & MAGNITUDE) * 0x1p53;
    distill_mask Z_bits = (distill_mask)Z;
    distill_mask side_known = MASK_GREATER((distill_mask)tail, Z_bits) &
                              MASK_GREATER((distill_mask)(h * 0x1p53 - tail), Z_bits);
    distill_vector next = S + 2.0 * T;
    distill_mask next_finite = MASK_NEGATIVE(((distill_mask)next & MAGNITUDE) - EXPONENT);
    distill_mask short_of_midpoint = MASK_NEGATIVE((distill_mask)rest ^ T_bits);
    *tie = in_range & on_midpoint & side_known & next_finite;
    *s_out = (distill_vector)(((distill_mask)S & short_of_midpoint) |
                              ((distill_mask)next & ~short_of_midpoint));
    distill_vector forward = 0.5 * T, back = -0.5 * T;
    *t_out = (distill_vector)(((distill_mask)forward & short_of_midpoint) |
                              ((distill_mask)back & ~short_of_midpoint));
}

/* Lanes of `mask` (all ones or zeros) as bits: a movemask in shuffles, which every level
 * has (a loop over the lanes costs four times as much). */
ALWAYS_INLINE uint32_t distill_bits(const distill_mask *mask)
{
    const distill_mask lane_bit = {1, 2, 4, 8, 16, 32, 64, 128};
    distill_mask m = *mask & lane_bit;
    m |= __builtin_shufflevector(m, m, 4, 5, 6, 7, 0, 1, 2, 3);
    m |= __builtin_shufflevector(m, m, 2, 3, 0, 1, 6, 7, 4, 5);
    m |= __builtin_shufflevector(m, m, 1, 0, 3, 2, 5, 4, 7, 6);
    return (uint32_t)m[0];
}

/* The same in one or two instructions, for the bodies that know their level. */
#if DISTILL_X86
DISTILL_AVX512 static inline uint32_t distill_bits_avx512(const distill_mask *mask)
{
    __m512i m;
    memcpy(&m, mask, sizeof m);
    return (uint32_t)_mm512_movepi64_mask(m);
}

DISTILL_AVX2 static inline uint32_t distill_bits_avx2(const distill_mask *mask)
{
    __m256d m[2];
    memcpy(m, mask, sizeof m);
    return (uint32_t)(_mm256_movemask_pd(m[0]) | (_mm256_movemask_pd(m[1]) << 4));
}
#endif

ALWAYS_INLINE uint32_t distill_bits_at(const int level, const distill_mask *mask)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return distill_bits_avx512(mask);
    if (level == LEVEL_AVX2) return distill_bits_avx2(mask);
#endif
    return distill_bits(mask);
}

/* Bits of `bits` (bit l for lane l) as a mask, into *mask. */
ALWAYS_INLINE void distill_lanes(uint32_t bits, distill_mask *mask)
{
    const distill_mask lane_bit = {1, 2, 4, 8, 16, 32, 64, 128};
    *mask = MASK_NEGATIVE(0 - (((distill_mask){0} + (int64_t)bits) & lane_bit));
}

/* x's magnitude bits minus one into the min `low`, lane-wise (zeros: all ones, never the
 * min); values below 2^63, so signed arithmetic is safe. */
#define DISTILL_LOW(low, x)                                                                        \
    do {                                                                                           \
        distill_mask less_one_ = (distill_mask)(((distill_unsigned)(x)-1) & MAGNITUDE);            \
        distill_mask d_ = less_one_ - (low);                                                       \
        (low) += d_ & MASK_NEGATIVE(d_);                                                           \
    } while (0)

/* One TwoSum of the cascade on a vector of lanes: s += x exactly as (s, e), e stored in `slot`
 * and added to t, |e| to error_sum (engine_distill_pass, lane-wise). */
#define DISTILL_STEP(s, t, error_sum, x_in, slot)                                                  \
    do {                                                                                           \
        distill_vector x_ = (x_in), n_ = (s) + x_, b_ = n_ - (s);                                  \
        distill_vector e_ = ((s) - (n_ - b_)) + (x_ - b_);                                         \
        (slot) = e_;                                                                               \
        (t) += e_;                                                                                 \
        (error_sum) += (distill_vector)((distill_mask)e_ & MAGNITUDE);                             \
        (s) = n_;                                                                                  \
    } while (0)

/* dst = src in the lanes of mask, unchanged elsewhere. */
#define DISTILL_SELECT(dst, src, mask)                                                             \
    ((dst) = (distill_vector)(((distill_mask)(src) & (mask)) | ((distill_mask)(dst) & ~(mask))))

/* One pass of the cascade (engine_distill_pass) over v[0..count-1][g] for every group, in
 * place; its (s, t, error_sum) per group. Two chains interleaved when groups is 2. */
ALWAYS_INLINE void distill_pass(distill_vector (*v)[DISTILL_GROUPS], int count, const int groups,
                                distill_vector *s, distill_vector *t, distill_vector *error_sum)
{
    distill_vector s0 = v[0][0], t0 = {0}, error_sum0 = {0};
    distill_vector s1 = v[0][groups - 1], t1 = {0}, error_sum1 = {0};
    for (int k = 1; k < count; k++) {
        DISTILL_STEP(s0, t0, error_sum0, v[k][0], v[k - 1][0]);
        if (groups > 1) DISTILL_STEP(s1, t1, error_sum1, v[k][1], v[k - 1][1]);
    }
    v[count - 1][0] = s0;
    v[count - 1][groups - 1] = groups > 1 ? s1 : s0;
    s[0] = s0, t[0] = t0, error_sum[0] = error_sum0;
    s[1] = s1, t[1] = t1, error_sum[1] = error_sum1;
}

/* The tier for `groups` vectors of lanes (a literal at each use, so the loops over them
 * unroll into independent chains that hide the adders' latency). Each pass is judged by (d),
 * then, for lanes (d) refuses, by (c') on the errors it left (engine_distill_element). */
ALWAYS_INLINE void distill_body(reprod_op op, reprod_rounding dir, const void *const *contributions,
                                int count, size_t j, const int groups, uint32_t refused,
                                double *prepared, uint64_t *out, struct engine_accumulator *a,
                                size_t *general)
{
    uint32_t undecided = refused;
    distill_vector s_done[DISTILL_GROUPS], t_done[DISTILL_GROUPS];
    if (count <= ENGINE_DISTILL_TERMS && engine_fast_double_serves(op, count)) {
        distill_vector local[ENGINE_DISTILL_TERMS][DISTILL_GROUPS];
        distill_vector(*v)[DISTILL_GROUPS] =
            prepared ? (distill_vector(*)[DISTILL_GROUPS])prepared : local;
        distill_mask open[DISTILL_GROUPS];
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            s_done[g] = t_done[g] = (distill_vector){0};
            distill_lanes(refused >> (DISTILL_WIDTH * g), &open[g]);
        }
        for (int k = 0; k < count && !prepared; k++)
            _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++) memcpy(
                &v[k][g], (const double *)contributions[k] + j + DISTILL_WIDTH * g, sizeof v[k][g]);
        const int nearest = dir == REPROD_ROUND_NEAREST;
        const double two_n = 2.0 * count;
        for (int pass = prepared ? 1 : 0; pass <= ENGINE_DISTILL_PASSES && undecided; pass++) {
            distill_vector s[DISTILL_GROUPS], t[DISTILL_GROUPS], error_sum[DISTILL_GROUPS];
            distill_pass(v, count, groups, s, t, error_sum);
            if (pass == 0) continue; /* the kernel's own first pass was refused already */
            undecided = 0;
            _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
            {
                distill_mask certified;
                distill_certified(&s[g], &t[g], &error_sum[g], two_n, nearest, &certified);
                certified &= open[g];
                distill_vector s_use = s[g], t_use = t[g];
                if (distill_bits(&open[g]) != distill_bits(&certified)) {
                    distill_mask low = (distill_mask){0} + MAGNITUDE, exact;
                    for (int k = 0; k < count - 1; k++)
                        DISTILL_LOW(low, v[k][g]);
                    distill_errors_exact(&error_sum[g], &low, &exact);
                    distill_vector sum = s[g] + t[g];
                    distill_mask finite = MASK_NEGATIVE(((distill_mask)sum & MAGNITUDE) - EXPONENT);
                    certified |= exact & finite & open[g];
                    if (distill_bits(&open[g]) != distill_bits(&certified) && count >= 3) {
                        distill_mask tie;
                        distill_vector s_tie, t_tie;
                        distill_tie(v, count, g, two_n, &tie, &s_tie, &t_tie);
                        tie &= finite & open[g] & ~certified;
                        DISTILL_SELECT(s_use, s_tie, tie);
                        DISTILL_SELECT(t_use, t_tie, tie);
                        certified |= tie;
                    }
                }
                DISTILL_SELECT(s_done[g], s_use, certified);
                DISTILL_SELECT(t_done[g], t_use, certified);
                open[g] &= ~certified;
                undecided |= distill_bits(&open[g]) << (DISTILL_WIDTH * g);
            }
        }
    }
    uint32_t decided = refused & ~undecided, plain = 0;
    if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && decided) {
        /* s + t is the result of a decided lane with a nonzero sum; the other lanes of `out`
         * are written below or by the caller. */
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            distill_vector sum = s_done[g] + t_done[g];
            distill_mask nonzero = ~MASK_ZERO((distill_mask)sum & MAGNITUDE);
            memcpy(out + DISTILL_WIDTH * g, &sum, sizeof sum);
            plain |= distill_bits(&nonzero) << (DISTILL_WIDTH * g);
        }
        plain &= decided;
    }
    for (uint32_t rest = refused & ~plain; rest; rest &= rest - 1) {
        int lane = __builtin_ctz(rest);
        size_t index = j + (size_t)lane;
        if ((decided >> lane) & 1) /* a refused element holds a nonzero term */
            out[lane] = engine_float64_lane(op, dir, contributions, count, index, 1,
                                            s_done[lane / DISTILL_WIDTH][lane % DISTILL_WIDTH],
                                            t_done[lane / DISTILL_WIDTH][lane % DISTILL_WIDTH], 1,
                                            a, general);
        else
            out[lane] = engine_exact_element(REPROD_FLOAT64, op, dir, contributions, count, index,
                                             1, a, general);
    }
}

/* Whether any lane of the all-ones-or-zeros lanes of *mask is all ones: one instruction at
 * AVX2 and AVX-512, a reduction in shuffles otherwise. */
#if DISTILL_X86
DISTILL_AVX512 static inline int wide32_any_avx512(const wide32_int *mask)
{
    __m256i m;
    memcpy(&m, mask, sizeof m);
    return _mm256_movepi32_mask(m) != 0;
}

DISTILL_AVX2 static inline int wide32_any_avx2(const wide32_int *mask)
{
    __m256 m;
    memcpy(&m, mask, sizeof m);
    return _mm256_movemask_ps(m) != 0;
}
#endif

ALWAYS_INLINE int wide32_any(const int level, const wide32_int *mask)
{
#if DISTILL_X86
    if (level == LEVEL_AVX512) return wide32_any_avx512(mask);
    if (level == LEVEL_AVX2) return wide32_any_avx2(mask);
#endif
    wide32_int m = *mask;
    m |= __builtin_shufflevector(m, m, 4, 5, 6, 7, 0, 1, 2, 3);
    m |= __builtin_shufflevector(m, m, 2, 3, 0, 1, 6, 7, 4, 5);
    m |= __builtin_shufflevector(m, m, 1, 0, 3, 2, 5, 4, 7, 6);
    return m[0] != 0;
}

/* All ones where the doubles x and y are equal as values (+0 == -0). */
#define DISTILL_EQUAL(x, y)                                                                        \
    (~MASK_NEGATIVE(((distill_mask)(x) ^ (distill_mask)(y)) |                                      \
                    (distill_mask)(0 - ((distill_unsigned)(x) ^ (distill_unsigned)(y)))) |         \
     (MASK_ZERO((distill_mask)(x)&MAGNITUDE) & MASK_ZERO((distill_mask)(y)&MAGNITUDE)))

/* (h)'s chain over `levels` accumulators hi[0..levels-1][g] and lo (engine_split_chain,
 * lane-wise): S, T, and all ones in *fits where the chain tells. */
ALWAYS_INLINE void wide32_chain(distill_vector (*hi)[DISTILL_GROUPS], int levels, int g,
                                const distill_vector *lo, distill_vector *S, distill_vector *T,
                                distill_mask *fits)
{
    distill_vector s = *lo, w = {0}, D = {0}, e = {0};
    _Pragma("GCC unroll 5") for (int i = levels - 1; i >= 0; i--)
    {
        distill_vector a = hi[i][g], sum = a + s, v = sum - a;
        e = (a - (sum - v)) + (s - v);
        s = sum;
        if (i > 0 && i == levels - 1) {
            w = e; /* the first error: w + e exact */
        } else if (i > 0) {
            distill_vector w_sum = w + e, w_v = w_sum - w;
            distill_vector delta = (w - (w_sum - w_v)) + (e - w_v);
            w = w_sum;
            D += (distill_vector)((distill_mask)delta & MAGNITUDE);
        }
    }
    distill_vector t = w + e, once = s + t;
    *fits = DISTILL_EQUAL(once, s);
    if (levels > 2) { /* D = 0 below three levels */
        distill_mask D_bits = (distill_mask)D, t_magnitude = (distill_mask)t & MAGNITUDE;
        distill_mask large = ~MASK_GREATER((distill_mask)(4.0 * D), t_magnitude); /* |t| >= 4D */
        distill_vector up = s + 4.0 * D, down = s - 4.0 * D;
        *fits &= MASK_ZERO(D_bits) | (large & DISTILL_EQUAL(up, s) & DISTILL_EQUAL(down, s));
    }
    *S = s;
    *T = t;
}

/* (h) with `levels` levels (a literal at each use, so that the accumulators stay in
 * registers) for `groups` vectors of 8 lanes from element j, given each lane's own levels
 * and first sigma: the accumulators (engine_split_sums, lane-wise: sigma 0 at the levels
 * beyond a lane's own), then the chain, which clears fits[g] where it cannot tell. */
ALWAYS_INLINE void wide32_deep(const int level, const reprod_type type, const int groups,
                               const void *const *contributions, int count, size_t j,
                               const int levels, const distill_vector *sigma,
                               const wide32_int *span, const int32_t *limits, distill_mask *fits,
                               distill_vector *S, distill_vector *T)
{
    const double step =
        engine_double_from_bits((uint64_t)(engine_ceil_log2(count) - 53 + 1023) << 52);
    distill_vector sigmas[ENGINE_SPLIT_LEVELS][DISTILL_GROUPS];
    distill_vector hi[ENGINE_SPLIT_LEVELS][DISTILL_GROUPS], lo[DISTILL_GROUPS];
    _Pragma("GCC unroll 5") for (int i = 0; i < levels; i++)
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        distill_vector scaled = i == 0 ? sigma[g] : sigmas[i - 1][g] * step;
        distill_mask taken = {0};
        wide32_int beyond = (limits[i > 0 ? i : 1] - span[g]) >> 31; /* level i's limit */
        distill_widen(level, &beyond, &taken);
        taken |= (distill_mask){0} - (i == 0);
        sigmas[i][g] = (distill_vector)((distill_mask)scaled & taken);
        hi[i][g] = (distill_vector){0};
    }
    lo[0] = lo[1] = (distill_vector){0};
    for (int k = 0; k < count; k++)
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            distill_vector r;
            wide32_load_terms(level, type, contributions[k], j + DISTILL_WIDTH * g, &r);
            _Pragma("GCC unroll 5") for (int i = 0; i < levels; i++)
            {
                distill_vector q;
                distill_add_fma(level, &r, &sigmas[i][g], &q);
                q -= sigmas[i][g];
                r -= q;
                distill_add_fma(level, &q, &hi[i][g], &hi[i][g]);
            }
            distill_add_fma(level, &r, &lo[g], &lo[g]);
        }
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        distill_mask told;
        wide32_chain(hi, levels, g, &lo[g], &S[g], &T[g], &told);
        fits[g] &= told;
    }
}

/* (h) with several levels for a block whose lanes reach beyond one (wide32_split's second
 * half, given each group's first sigma, spans, finite lanes and open lanes): all ones in
 * fits[g] where it applies and its chain tells, its S + T there; those lanes as bits. */
ALWAYS_INLINE uint32_t wide32_several_body(const int level, const reprod_type type,
                                           const int groups, const void *const *contributions,
                                           int count, size_t j, const distill_vector *sigma,
                                           const wide32_int *span, const wide32_int *finite,
                                           const distill_mask *open, distill_mask *fits,
                                           distill_vector *S, distill_vector *T)
{
    uint32_t split = 0;
    /* several levels: each lane takes the fewest whose limit its span fits (level i + 1 where
     * the span exceeds level i's limit), the block the most any open lane takes; the loop is
     * compiled for two, three and five levels (four run as five), so that its accumulators
     * stay in registers */
    int32_t limits[ENGINE_SPLIT_LEVELS + 1];
    for (int k = 1; k <= ENGINE_SPLIT_LEVELS; k++)
        limits[k] = engine_split_limit(type, count, k);
    wide32_int reach[DISTILL_GROUPS];
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        wide32_int open32;
        reach[g] = ~((limits[ENGINE_SPLIT_LEVELS] - span[g]) >> 31) & finite[g];
        distill_narrow(level, &open[g], &open32);
        reach[g] &= open32;
        distill_widen(level, &reach[g], &fits[g]);
    }
    int levels = 2; /* one more for each limit some lane in reach exceeds (independent tests) */
    _Pragma("GCC unroll 4") for (int k = 2; k < ENGINE_SPLIT_LEVELS; k++)
    {
        wide32_int beyond = ((limits[k] - span[0]) >> 31) & reach[0];
        if (groups > 1) beyond |= ((limits[k] - span[1]) >> 31) & reach[1];
        levels += wide32_any(level, &beyond);
    }
#define WIDE32_DEEP(n) /* n levels, at most ENGINE_SPLIT_LEVELS */                                 \
    wide32_deep(level, type, groups, contributions, count, j,                                      \
                (n) < ENGINE_SPLIT_LEVELS ? (n) : ENGINE_SPLIT_LEVELS, sigma, span, limits, fits,  \
                S, T)
    if (levels == 2)
        WIDE32_DEEP(2);
    else if (levels == 3)
        WIDE32_DEEP(3);
    else /* four run as five (sigma 0 at the fifth): one loop less to compile */
        WIDE32_DEEP(5);
#undef WIDE32_DEEP
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++) split |=
        distill_bits_at(level, &fits[g]) << (DISTILL_WIDTH * g);
    return split;
}

/* Inline in every tier and chunk body: out of line, the one-level path around the call ran
 * 6-7% slower. Under the sanitizers out of line, one copy per level, type and group count:
 * their instrumentation of the many inlined copies made this file compile six times as long
 * (107 s under ASan and UBSan, against 37 s). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WIDE32_SEVERAL(name, target, level, type, groups)                                          \
    target __attribute__((noinline)) static uint32_t name(                                         \
        const void *const *contributions, int count, size_t j, const distill_vector *sigma,        \
        const wide32_int *span, const wide32_int *finite, const distill_mask *open,                \
        distill_mask *fits, distill_vector *S, distill_vector *T)                                  \
    {                                                                                              \
        return wide32_several_body(level, type, groups, contributions, count, j, sigma, span,      \
                                   finite, open, fits, S, T);                                      \
    }
WIDE32_SEVERAL(wide32_several_avx512_2, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32, 2)
WIDE32_SEVERAL(wide32_several_avx512_1, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32, 1)
WIDE32_SEVERAL(wide32_several_avx2_2, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32, 2)
WIDE32_SEVERAL(wide32_several_avx2_1, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32, 1)
WIDE32_SEVERAL(wide32_several_generic_2, , LEVEL_GENERIC, REPROD_FLOAT32, 2)
WIDE32_SEVERAL(wide32_several_generic_1, , LEVEL_GENERIC, REPROD_FLOAT32, 1)
WIDE32_SEVERAL(wide32_several_bfloat16_avx512_2, DISTILL_AVX512, LEVEL_AVX512, REPROD_BFLOAT16, 2)
WIDE32_SEVERAL(wide32_several_bfloat16_avx2_2, DISTILL_AVX2, LEVEL_AVX2, REPROD_BFLOAT16, 2)
#undef WIDE32_SEVERAL
#define WIDE32_SEVERAL_OUT_OF_LINE 1
#else
#define WIDE32_SEVERAL_OUT_OF_LINE 0
#endif

/* The copy for the caller's level, type and group count (literals at each use). */
ALWAYS_INLINE uint32_t wide32_several(const int level, const reprod_type type, const int groups,
                                      const void *const *contributions, int count, size_t j,
                                      const distill_vector *sigma, const wide32_int *span,
                                      const wide32_int *finite, const distill_mask *open,
                                      distill_mask *fits, distill_vector *S, distill_vector *T)
{
#if WIDE32_SEVERAL_OUT_OF_LINE
#define WIDE32_CALL(name) name(contributions, count, j, sigma, span, finite, open, fits, S, T)
    if (type == REPROD_BFLOAT16)
        return level == LEVEL_AVX512 ? WIDE32_CALL(wide32_several_bfloat16_avx512_2)
                                     : WIDE32_CALL(wide32_several_bfloat16_avx2_2);
    if (level == LEVEL_AVX512)
        return groups > 1 ? WIDE32_CALL(wide32_several_avx512_2)
                          : WIDE32_CALL(wide32_several_avx512_1);
    if (level == LEVEL_AVX2)
        return groups > 1 ? WIDE32_CALL(wide32_several_avx2_2) : WIDE32_CALL(wide32_several_avx2_1);
    return groups > 1 ? WIDE32_CALL(wide32_several_generic_2)
                      : WIDE32_CALL(wide32_several_generic_1);
#undef WIDE32_CALL
#else
    return wide32_several_body(level, type, groups, contributions, count, j, sigma, span, finite,
                               open, fits, S, T);
#endif
}

/* (h) lane-wise (engine_float32_exact_sum) for `groups` vectors of 8 lanes from element j, given
 * per lane the terms' largest magnitude bits `high` and smallest nonzero ones minus one `low`: all
 * ones in fits[g] where it applies (and `open` holds) and its chain tells, its S + T there. Returns
 * those lanes as bits. A block runs the most levels any of its lanes takes, lanes that take fewer
 * with sigma 0 at the rest. */
ALWAYS_INLINE uint32_t wide32_split(const int level, const reprod_type type, const int groups,
                                    const void *const *contributions, int count, size_t j,
                                    const wide32_bits *high, const wide32_bits *low,
                                    const distill_mask *open, distill_mask *fits, distill_vector *S,
                                    distill_vector *T)
{
    const int32_t log2_n = engine_ceil_log2(count), limit = engine_split_limit(type, count, 1);
    distill_vector sigma[DISTILL_GROUPS];
    wide32_int span[DISTILL_GROUPS], finite[DISTILL_GROUPS];
    uint32_t split = 0, deeper = 0;
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        wide32_int field_max = (wide32_int)(high[g] >> 23);
        wide32_int field_min = (wide32_int)(((low[g] + 1) & 0x7fffffff) >> 23);
        field_min |= ((field_min - 1) >> 31) & 1; /* at least 1 */
        span[g] = field_max - field_min;
        finite[g] = ~((254 - field_max) >> 31); /* infinities and NaNs: no level */
        wide32_int within = ~((limit - span[g]) >> 31) & finite[g];
        wide32_int outside = ~within & finite[g];
        distill_mask beyond, exponent;
        distill_widen(level, &within, &fits[g]);
        distill_widen(level, &outside, &beyond);
        fits[g] &= open[g];
        beyond &= open[g];
        field_max |= ((field_max - 1) >> 31) & 1;
        field_max += log2_n - 126 + 1023;
        distill_widen(level, &field_max, &exponent);
        sigma[g] = (distill_vector)(exponent << 52);
        split |= distill_bits_at(level, &fits[g]) << (DISTILL_WIDTH * g);
        deeper |= distill_bits_at(level, &beyond);
    }
    if (!split && !deeper) return 0;
    if (!deeper) { /* one level: five operations a term, the chain one TwoSum */
        distill_vector hi[DISTILL_GROUPS] = {{0}}, lo[DISTILL_GROUPS] = {{0}};
        for (int k = 0; k < count; k++)
            _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
            {
                distill_vector x, q, r;
                wide32_load_terms(level, type, contributions[k], j + DISTILL_WIDTH * g, &x);
                /* 5 additions, 3 of them as FMAs: both kinds of unit busy (Zen 4) */
                distill_add_fma(level, &x, &sigma[g], &q);
                q -= sigma[g];
                r = x - q;
                distill_add_fma(level, &q, &hi[g], &hi[g]);
                distill_add_fma(level, &r, &lo[g], &lo[g]);
            }
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            distill_vector sum = hi[g] + lo[g], w = sum - hi[g];
            S[g] = sum;
            T[g] = (hi[g] - (sum - w)) + (lo[g] - w);
        }
        return split;
    }
    return wide32_several(level, type, groups, contributions, count, j, sigma, span, finite, open,
                          fits, S, T);
}

/* (i)'s plain sums (engine_bracket_plain_sum) of `groups` vectors of 8 lanes from element j
 * into s[g]: the even and odd terms of each group in two chains, as the per-element order has
 * them (and the binary32 kernels' binary64 sums); four chains hide the adders' latency. */
ALWAYS_INLINE void wide32_plain_sums(const int level, const reprod_type type, const int groups,
                                     const void *const *contributions, int count, size_t j,
                                     distill_vector *s)
{
    const distill_vector negative_zero = {-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0};
    distill_vector even[DISTILL_GROUPS] = {negative_zero, negative_zero};
    distill_vector odd[DISTILL_GROUPS] = {negative_zero, negative_zero};
    int k = 0;
    for (; k + 2 <= count; k += 2)
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            distill_vector x, y;
            wide32_load_terms(level, type, contributions[k], j + DISTILL_WIDTH * g, &x);
            wide32_load_terms(level, type, contributions[k + 1], j + DISTILL_WIDTH * g, &y);
            even[g] += x;
            odd[g] += y;
        }
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        if (k < count) {
            distill_vector x;
            wide32_load_terms(level, type, contributions[k], j + DISTILL_WIDTH * g, &x);
            even[g] += x;
        }
        s[g] = even[g] + odd[g];
    }
}

/* (i)'s test (engine_bracket_decides) lane-wise on the plain sums s[g] of N = count >= 1 terms,
 * given per lane the terms' largest binary32 magnitude bits `high`: all ones in bounded[g]
 * where it decides and `open` holds. Returns those lanes as bits. */
ALWAYS_INLINE uint32_t wide32_bounded(const int level, const reprod_type type, reprod_op op,
                                      reprod_rounding dir, const int groups, int count,
                                      const distill_vector *s, const wide32_bits *high,
                                      const distill_mask *open, distill_mask *bounded)
{
    const int cut = type == REPROD_BFLOAT16 ? 45 : 29;           /* 53 - p fraction bits go */
    const int32_t bias = 2 * engine_ceil_log2(count) + 846;      /* B's field is F + bias */
    const int64_t smallest = 897ll << 52, beyond = 1151ll << 52; /* 2^-126, 2^128 */
    uint32_t decided = 0;
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        wide32_int field = (wide32_int)(high[g] >> 23);
        field |= ((field - 1) >> 31) & 1; /* at least 1 */
        field += bias;
        distill_mask exponent;
        distill_widen(level, &field, &exponent);
        distill_vector bound = (distill_vector)(exponent << 52);
        distill_vector lo = s[g] - bound, hi = s[g] + bound;
        if (op == REPROD_AVG) {
            lo = lo / (double)count;
            hi = hi / (double)count;
        }
        distill_mask lo_bits = (distill_mask)lo, hi_bits = (distill_mask)hi;
        distill_mask lo_magnitude = lo_bits & MAGNITUDE, hi_magnitude = hi_bits & MAGNITUDE;
        distill_mask fit = ~MASK_NEGATIVE(lo_bits ^ hi_bits) & open[g];
        fit &= ~MASK_NEGATIVE(lo_magnitude - smallest) & ~MASK_NEGATIVE(hi_magnitude - smallest);
        fit &= MASK_NEGATIVE(lo_magnitude - beyond) & MASK_NEGATIVE(hi_magnitude - beyond);
        distill_mask lo_add, hi_add; /* what rounding at bit `cut` adds before truncating */
        if (dir == REPROD_ROUND_NEAREST) {
            lo_add = (1ll << (cut - 1)) - 1 + ((lo_magnitude >> cut) & 1);
            hi_add = (1ll << (cut - 1)) - 1 + ((hi_magnitude >> cut) & 1);
        } else { /* away from zero: up for positive sums, down for negative ones */
            distill_mask negative = MASK_NEGATIVE(lo_bits), away = negative & 0;
            if (dir == REPROD_ROUND_UP) away = ~negative;
            if (dir == REPROD_ROUND_DOWN) away = negative;
            lo_add = hi_add = away & ((1ll << cut) - 1);
        }
        /* unsigned: a NaN's magnitude plus the addend passes 2^63 (that lane is not `fit`) */
        distill_unsigned lo_rounded =
            ((distill_unsigned)lo_magnitude + (distill_unsigned)lo_add) >> cut;
        distill_unsigned hi_rounded =
            ((distill_unsigned)hi_magnitude + (distill_unsigned)hi_add) >> cut;
        fit &= MASK_ZERO((distill_mask)(lo_rounded ^ hi_rounded)); /* below 2^35: >= 0 */
        bounded[g] = fit;
        decided |= distill_bits_at(level, &bounded[g]) << (DISTILL_WIDTH * g);
    }
    return decided;
}

/* The binary32 nearest rounding of the exact sum S + T (|T| at most half an ulp of S): round
 * to odd, then the hardware's conversion (engine_float32_finish); all ones in *nonzero where S
 * is not zero (a zero sum's sign needs the terms). */
ALWAYS_INLINE void wide32_nearest(const int level, const distill_vector *S, const distill_vector *T,
                                  wide32_floats *rounded, distill_mask *nonzero)
{
    distill_mask S_bits = (distill_mask)*S, T_bits = (distill_mask)*T;
    distill_mask move = ~MASK_ZERO(T_bits & MAGNITUDE) & MASK_ZERO(S_bits & 1);
    distill_mask step = (MASK_NEGATIVE(S_bits ^ T_bits) | 1) & move; /* -1, +1 or 0 */
    distill_vector odd = (distill_vector)((distill_unsigned)S_bits + (distill_unsigned)step);
    distill_to_floats(level, &odd, rounded);
    *nonzero = ~MASK_ZERO(S_bits & MAGNITUDE);
}

/* The bfloat16 nearest rounding of the exact sum S + T (|T| at most half an ulp of S): round
 * to odd, then to nearest bfloat16 in the integers (53 >= 8 + 2 bits: one rounding of the exact
 * sum): a carry into bit 45 at or past the half (ties to even), the exponent rebiased, overflow
 * to infinity. All ones in *normal where the result is in bfloat16's normal range (zero sums
 * and results below it are left to engine_float32_finish). */
ALWAYS_INLINE void wide32_nearest_bfloat16(const int level, const distill_vector *S,
                                           const distill_vector *T, wide32_int *rounded,
                                           distill_mask *normal)
{
    distill_mask S_bits = (distill_mask)*S, T_bits = (distill_mask)*T;
    distill_mask move = ~MASK_ZERO(T_bits & MAGNITUDE) & MASK_ZERO(S_bits & 1);
    distill_mask step = (MASK_NEGATIVE(S_bits ^ T_bits) | 1) & move; /* -1, +1 or 0 */
    distill_unsigned odd = (distill_unsigned)S_bits + (distill_unsigned)step;
    distill_unsigned magnitude = odd & MAGNITUDE;
    distill_unsigned top = (magnitude + ((1ull << 44) - 1) + ((magnitude >> 45) & 1)) >> 45;
    distill_mask bf = (distill_mask)top - ((1023 - 127) << 7);
    bf -= (bf - 0x7f80) & ~MASK_NEGATIVE(bf - 0x7f80); /* at most infinity */
    bf |= (distill_mask)((odd >> 48) & 0x8000);
    *normal = ~MASK_NEGATIVE((distill_mask)magnitude - (897ll << 52));
    distill_narrow(level, &bf, rounded);
}

/* (i) for the `open` lanes of `groups` vectors from element j, from the plain sums at `sums`
 * (NULL: sum the terms here): the lanes it decides get S_done = s (T_done stays 0) and leave
 * `open`. Returns them as bits. */
ALWAYS_INLINE uint32_t wide32_bounded_lanes(const int level, const reprod_type type, reprod_op op,
                                            reprod_rounding dir, const int groups,
                                            const void *const *contributions, int count, size_t j,
                                            const double *sums, const wide32_bits *high,
                                            distill_mask *open, distill_vector *S_done)
{
    distill_vector s[DISTILL_GROUPS];
    distill_mask bounded[DISTILL_GROUPS];
    if (sums)
        memcpy(s, sums, (size_t)groups * sizeof s[0]);
    else
        wide32_plain_sums(level, type, groups, contributions, count, j, s);
    uint32_t done = wide32_bounded(level, type, op, dir, groups, count, s, high, open, bounded);
    _Pragma("GCC unroll 2") for (int g = 0; g < groups && done; g++)
    {
        DISTILL_SELECT(S_done[g], s[g], bounded[g]);
        open[g] &= ~bounded[g];
    }
    return done;
}

/* Binary32 lanes beyond the fast path's window, `groups` vectors of 8: (i) where the plain
 * sum's bound decides, (h) where the spread allows, else (g): the binary64 cascade over the
 * terms, judged by (c') (u: the smallest term's float ulp), then up to ENGINE_DISTILL_PASSES
 * passes of (e) judged by (c') on their errors. Decided lanes round S + T to binary32 through
 * the odd neighbour (engine_float32_finish), the hardware conversion when rounding a nonzero sum
 * to nearest: engine_exact_beyond_window lane-wise. `largest`, `smallest`: as
 * engine_beyond_window_fn's, or NULL; `sums`: NULL, or the lanes' plain sums for (i). (i) runs
 * before (h) when bounded_first, else after it for the lanes (h) leaves: for a sum the lanes
 * decided are the same ((i), (h) or (g)), only the work differs (not for an average: (h)'s inexact
 * S + T leaves a lane to the general path that (i) would decide, so averages take (i) first).
 * Returns the lanes (i) decided when it ran first. */
ALWAYS_INLINE uint32_t wide32_body(reprod_op op, reprod_rounding dir,
                                   const void *const *contributions, int count, size_t j,
                                   const int level, const reprod_type type, const int groups,
                                   uint32_t refused, const uint32_t *largest,
                                   const uint32_t *smallest, const double *sums, int bounded_first,
                                   uint32_t *out, struct engine_accumulator *a, size_t *general)
{
    uint32_t undecided = refused;
    distill_vector S_done[DISTILL_GROUPS], T_done[DISTILL_GROUPS];
    distill_mask open[DISTILL_GROUPS];
    _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
    {
        S_done[g] = T_done[g] = (distill_vector){0};
        distill_lanes(refused >> (DISTILL_WIDTH * g), &open[g]);
    }
    /* per lane the terms' largest magnitude bits, and their smallest nonzero ones minus one */
    wide32_bits high[DISTILL_GROUPS], smallest32[DISTILL_GROUPS];
    high[0] = high[1] = (wide32_bits){0};
    smallest32[0] = smallest32[1] = (wide32_bits){0} + 0x7fffffff;
    _Pragma("GCC unroll 2") for (int g = 0; g < groups && largest; g++)
    {
        memcpy(&high[g], largest + DISTILL_WIDTH * g, sizeof high[g]);
        memcpy(&smallest32[g], smallest + DISTILL_WIDTH * g, sizeof smallest32[g]);
    }
    for (int k = 0; k < count && !largest; k++)
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            wide32_bits bits;
            wide32_load_bits(type, contributions[k], j + DISTILL_WIDTH * g, &bits);
            /* below 2^31 both: differences are exact as int32 */
            wide32_bits magnitude = bits & 0x7fffffff, less_one = (bits - 1) & 0x7fffffff;
            wide32_bits up = magnitude - high[g], down = less_one - smallest32[g];
            high[g] += up & ~(wide32_bits)((wide32_int)up >> 31);
            smallest32[g] += down & (wide32_bits)((wide32_int)down >> 31);
        }
    uint32_t first = 0; /* (i): the plain sum, where its bound decides */
    if (count >= 1 && bounded_first)
        undecided &= ~(first = wide32_bounded_lanes(level, type, op, dir, groups, contributions,
                                                    count, j, sums, high, open, S_done));
    if (count >= 1 && undecided) { /* (h): the split sums, for lanes whose spread allows them */
        distill_mask fits[DISTILL_GROUPS];
        distill_vector S[DISTILL_GROUPS], T[DISTILL_GROUPS];
        uint32_t split = wide32_split(level, type, groups, contributions, count, j, high,
                                      smallest32, open, fits, S, T);
        _Pragma("GCC unroll 2") for (int g = 0; g < groups && split; g++)
        {
            DISTILL_SELECT(S_done[g], S[g], fits[g]);
            DISTILL_SELECT(T_done[g], T[g], fits[g]);
            open[g] &= ~fits[g];
        }
        undecided &= ~split;
    }
    if (count >= 1 && undecided && !bounded_first)
        undecided &= ~wide32_bounded_lanes(level, type, op, dir, groups, contributions, count, j,
                                           sums, high, open, S_done);
    if (undecided && count <= ENGINE_DISTILL_TERMS) {
        distill_vector v[ENGINE_DISTILL_TERMS][DISTILL_GROUPS];
        distill_mask low[DISTILL_GROUPS];
        /* The first pass straight from the terms (converted as they are loaded). */
        distill_vector s[DISTILL_GROUPS], t[DISTILL_GROUPS], error_sum[DISTILL_GROUPS];
        distill_vector s0 = {0}, t0 = {0}, error_sum0 = {0}, s1 = {0}, t1 = {0}, error_sum1 = {0};
        for (int k = 0; k < count; k++) {
            distill_vector term0, term1;
            wide32_load_terms(level, type, contributions[k], j, &term0);
            term1 = term0;
            if (groups > 1)
                wide32_load_terms(level, type, contributions[k], j + DISTILL_WIDTH, &term1);
            if (k == 0) {
                s0 = term0;
                s1 = term1;
                continue;
            }
            DISTILL_STEP(s0, t0, error_sum0, term0, v[k - 1][0]);
            if (groups > 1) DISTILL_STEP(s1, t1, error_sum1, term1, v[k - 1][1]);
        }
        v[count - 1][0] = s0;
        v[count - 1][groups - 1] = groups > 1 ? s1 : s0;
        s[0] = s0, t[0] = t0, error_sum[0] = error_sum0;
        s[1] = s1, t[1] = t1, error_sum[1] = error_sum1;
        const double two_n = 2.0 * count;
        for (int pass = 0; pass <= ENGINE_DISTILL_PASSES && undecided; pass++) {
            if (pass > 0) distill_pass(v, count, groups, s, t, error_sum);
            undecided = 0;
            _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
            {
                distill_mask field;
                if (pass == 0) { /* (c') on the terms: their binary32 field + 925 */
                    field = __builtin_convertvector(((smallest32[g] + 1) & 0x7fffffff) >> 23,
                                                    distill_mask);
                    field = (field | (MASK_ZERO(field) & 1)) + 925;
                } else { /* (c') on the errors the pass left */
                    low[g] = (distill_mask){0} + MAGNITUDE;
                    for (int k = 0; k < count - 1; k++)
                        DISTILL_LOW(low[g], v[k][g]);
                    field = (distill_mask)(((distill_unsigned)low[g] + 1) & MAGNITUDE) >> 52;
                    field |= MASK_ZERO(field) & 1;
                }
                distill_mask exact = ~MASK_GREATER((distill_mask)error_sum[g], field << 52), side;
                distill_certified(&s[g], &t[g], &error_sum[g], two_n, 0, &side); /* (d), directed */
                exact |= side;
                distill_vector sum = s[g] + t[g];
                exact &= MASK_NEGATIVE(((distill_mask)sum & MAGNITUDE) - EXPONENT) & open[g];
                distill_vector S = sum, w = S - s[g];
                distill_vector T = (s[g] - (S - w)) + (t[g] - w);
                DISTILL_SELECT(S_done[g], S, exact);
                DISTILL_SELECT(T_done[g], T, exact);
                open[g] &= ~exact;
                undecided |= distill_bits(&open[g]) << (DISTILL_WIDTH * g);
            }
        }
    }
    uint32_t decided = refused & ~undecided, plain = 0;
    if (type == REPROD_FLOAT32 && op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && decided) {
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            wide32_floats rounded;
            distill_mask nonzero;
            wide32_nearest(level, &S_done[g], &T_done[g], &rounded, &nonzero);
            uint32_t lanes = distill_bits(&nonzero) & (decided >> (DISTILL_WIDTH * g));
            /* only those lanes: the caller may have written the others already */
            const wide32_int lane_bit = {1, 2, 4, 8, 16, 32, 64, 128};
            wide32_int keep = (0 - (((wide32_int){0} + (int32_t)lanes) & lane_bit)) >> 31;
            wide32_int previous;
            memcpy(&previous, out + DISTILL_WIDTH * g, sizeof previous);
            previous = ((wide32_int)rounded & keep) | (previous & ~keep);
            memcpy(out + DISTILL_WIDTH * g, &previous, sizeof previous);
            plain |= lanes << (DISTILL_WIDTH * g);
        }
    }
    if (type == REPROD_BFLOAT16 && op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && decided) {
        _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
        {
            wide32_int rounded, previous;
            distill_mask normal;
            wide32_nearest_bfloat16(level, &S_done[g], &T_done[g], &rounded, &normal);
            uint32_t lanes = distill_bits(&normal) & (decided >> (DISTILL_WIDTH * g));
            const wide32_int lane_bit = {1, 2, 4, 8, 16, 32, 64, 128};
            wide32_int keep = (0 - (((wide32_int){0} + (int32_t)lanes) & lane_bit)) >> 31;
            memcpy(&previous, out + DISTILL_WIDTH * g, sizeof previous);
            previous = (rounded & keep) | (previous & ~keep);
            memcpy(out + DISTILL_WIDTH * g, &previous, sizeof previous);
            plain |= lanes << (DISTILL_WIDTH * g);
        }
    }
    for (uint32_t rest = refused & ~plain; rest; rest &= rest - 1) {
        int lane = __builtin_ctz(rest);
        size_t index = j + (size_t)lane;
        uint64_t bits;
        if (((decided >> lane) & 1) &&
            engine_float32_finish(type, op, dir, S_done[lane / DISTILL_WIDTH][lane % DISTILL_WIDTH],
                                  T_done[lane / DISTILL_WIDTH][lane % DISTILL_WIDTH], contributions,
                                  count, index, &bits))
            out[lane] = (uint32_t)bits;
        else
            out[lane] = (uint32_t)engine_exact_element(type, op, dir, contributions, count, index,
                                                       1, a, general);
    }
    return first;
}

/* Blocks of a chunk that skip running (i) first after one where it decided fewer than half
 * the lanes (cancelling data: (h) decides them, and (i) first would cost 40% more there); (i)
 * still runs for what (h) leaves. */
#define WIDE32_SKIP 8

/* Round a block of 16 exact sums S + T (|T| at most half an ulp of S) to nearest and store
 * them at element j of `result` (binary32, or bfloat16: type): 1, or 0 with nothing stored
 * when a lane needs engine_float32_finish (a zero sum; bfloat16: one outside its normal
 * range). One store per half: a 64-byte copy of the pair went through the stack, and its load
 * stalled on the two 32-byte stores (store forwarding). */
ALWAYS_INLINE int wide32_store_nearest(const int level, const reprod_type type,
                                       const distill_vector *S, const distill_vector *T,
                                       void *result, size_t j)
{
    if (type == REPROD_BFLOAT16) {
        typedef uint16_t halves __attribute__((vector_size(16)));
        wide32_int rounded[DISTILL_GROUPS];
        distill_mask normal[DISTILL_GROUPS];
        wide32_nearest_bfloat16(level, &S[0], &T[0], &rounded[0], &normal[0]);
        wide32_nearest_bfloat16(level, &S[1], &T[1], &rounded[1], &normal[1]);
        normal[0] &= normal[1];
        if (distill_bits_at(level, &normal[0]) != 0xff) return 0;
        halves h0 = __builtin_convertvector(rounded[0], halves);
        halves h1 = __builtin_convertvector(rounded[1], halves);
        memcpy((uint16_t *)result + j, &h0, sizeof h0);
        memcpy((uint16_t *)result + j + DISTILL_WIDTH, &h1, sizeof h1);
        return 1;
    }
    wide32_floats rounded[DISTILL_GROUPS];
    distill_mask nonzero[DISTILL_GROUPS];
    wide32_nearest(level, &S[0], &T[0], &rounded[0], &nonzero[0]);
    wide32_nearest(level, &S[1], &T[1], &rounded[1], &nonzero[1]);
    nonzero[0] &= nonzero[1];
    if (distill_bits_at(level, &nonzero[0]) != 0xff) return 0;
    memcpy((float *)result + j, &rounded[0], sizeof rounded[0]);
    memcpy((float *)result + j + DISTILL_WIDTH, &rounded[1], sizeof rounded[1]);
    return 1;
}

/* (i), (h) and (g) for every lane of elements [j, j + length) (a multiple of 16) of binary32
 * or bfloat16 (type), given each lane's largest and smallest (indexed from j): a chunk the
 * kernel expects mostly beyond its window. Results go to `result` (of the type) 16 at a time
 * once their inputs are read; a block that (i) alone, or (i) and (h) together, decide whole,
 * rounding a nonzero sum (bfloat16: a normal one) to nearest, skips the rest of the tier
 * (wide32_body, which runs (i) and (h) again there). After a block where (i) decided fewer
 * than half the lanes, the next WIDE32_SKIP run (h) first (sums only). */
ALWAYS_INLINE void wide32_chunk(reprod_op op, reprod_rounding dir, const void *const *contributions,
                                int count, size_t j, size_t length, const int level,
                                const reprod_type type, const uint32_t *largest,
                                const uint32_t *smallest, void *result,
                                struct engine_accumulator *a, size_t *general)
{
    const int nearest_sum = op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && count >= 1;
    int skip = 0; /* blocks to go before (i) runs first again (it decided too few lanes) */
    for (size_t b = 0; b < length; b += 2 * DISTILL_WIDTH) {
        /* An average takes (i) first always: (h)'s inexact S + T does not serve it
         * (engine_float32_finish), and (i) after (h) sees only the lanes (h) left. */
        const int bounded_first = skip == 0 || op == REPROD_AVG;
        skip -= skip > 0;
        distill_vector plain[DISTILL_GROUPS] = {{0}};
        const double *sums = NULL;
        uint32_t first = 0, stored = 0;
        if (nearest_sum) {
            wide32_bits high[DISTILL_GROUPS], low[DISTILL_GROUPS];
            memcpy(high, largest + b, sizeof high);
            memcpy(low, smallest + b, sizeof low);
            distill_mask open[DISTILL_GROUPS], bounded[DISTILL_GROUPS] = {{0}},
                                               fits[DISTILL_GROUPS];
            distill_vector S[DISTILL_GROUPS] = {{0}}, T[DISTILL_GROUPS] = {{0}};
            const distill_vector zero[DISTILL_GROUPS] = {{0}};
            open[0] = open[1] = (distill_mask){0} - 1;
            if (bounded_first) {
                wide32_plain_sums(level, type, 2, contributions, count, j + b, plain);
                sums = (const double *)plain;
                first = wide32_bounded(level, type, op, dir, 2, count, plain, high, open, bounded);
                stored = first == 0xffff && /* (i) alone, the common case: no selection */
                         wide32_store_nearest(level, type, plain, zero, result, j + b);
                open[0] = ~bounded[0]; /* (h) for the rest: fewer lanes, maybe fewer levels */
                open[1] = ~bounded[1];
            }
            /* (i) and (h) together may decide the block whole */
            if (!stored && (first | wide32_split(level, type, 2, contributions, count, j + b, high,
                                                 low, open, fits, S, T)) == 0xffff) {
                _Pragma("GCC unroll 2") for (int g = 0; g < DISTILL_GROUPS; g++)
                {
                    DISTILL_SELECT(S[g], plain[g], bounded[g]);
                    DISTILL_SELECT(T[g], zero[g], bounded[g]);
                }
                stored = wide32_store_nearest(level, type, S, T, result, j + b);
            }
        }
        if (!stored) {
            uint32_t out[2 * DISTILL_WIDTH] = {0}; /* every lane written: the tier keeps others */
            /* with the same sums, the body's (i) decides what the one above did */
            first = wide32_body(op, dir, contributions, count, j + b, level, type, 2, 0xffff,
                                largest + b, smallest + b, sums, bounded_first, out, a, general);
            if (type == REPROD_BFLOAT16)
                for (int lane = 0; lane < 2 * DISTILL_WIDTH; lane++)
                    ((uint16_t *)result)[j + (size_t)b + (size_t)lane] = (uint16_t)out[lane];
            else
                memcpy((float *)result + j + b, out, sizeof out);
        }
        if (bounded_first && __builtin_popcount(first) < DISTILL_WIDTH) skip = WIDE32_SKIP;
    }
}

#define DISTILL_LEVEL(name, target)                                                                \
    target void name(reprod_op op, reprod_rounding dir, const void *const *contributions,          \
                     int count, size_t j, int lanes, uint32_t refused, double *prepared,           \
                     uint64_t *out, struct engine_accumulator *a, size_t *general)                 \
    {                                                                                              \
        if (lanes == 16 && (refused & 0xff) && (refused >> 8))                                     \
            distill_body(op, dir, contributions, count, j, 2, refused, prepared, out, a, general); \
        else if (lanes == 8 || (refused & 0xff)) /* one vector's lanes: one group */               \
            distill_body(op, dir, contributions, count, j, 1, refused & 0xff, prepared, out, a,    \
                         general);                                                                 \
        else                                                                                       \
            distill_body(op, dir, contributions, count, j + 8, 1, refused >> 8,                    \
                         prepared ? prepared + 8 : NULL, out + 8, a, general);                     \
    }

DISTILL_LEVEL(engine_distill_float64_avx512, DISTILL_AVX512)
DISTILL_LEVEL(engine_distill_float64_avx2, DISTILL_AVX2)
DISTILL_LEVEL(engine_distill_float64_generic, )

#define WIDE32_LEVEL(name, target, level, type)                                                    \
    target void name(reprod_op op, reprod_rounding dir, const void *const *contributions,          \
                     int count, size_t j, int lanes, uint32_t refused, const uint32_t *largest,    \
                     const uint32_t *smallest, const double *sums, uint32_t *out,                  \
                     struct engine_accumulator *a, size_t *general)                                \
    {                                                                                              \
        if (lanes == 16)                                                                           \
            wide32_body(op, dir, contributions, count, j, level, type, 2, refused, largest,        \
                        smallest, sums, 1, out, a, general);                                       \
        else                                                                                       \
            wide32_body(op, dir, contributions, count, j, level, type, 1, refused, largest,        \
                        smallest, sums, 1, out, a, general);                                       \
    }

#define WIDE32_CHUNK(name, target, level, type)                                                    \
    target void name(reprod_op op, reprod_rounding dir, const void *const *contributions,          \
                     int count, size_t j, size_t length, const uint32_t *largest,                  \
                     const uint32_t *smallest, void *result, struct engine_accumulator *a,         \
                     size_t *general)                                                              \
    {                                                                                              \
        wide32_chunk(op, dir, contributions, count, j, length, level, type, largest, smallest,     \
                     result, a, general);                                                          \
    }

WIDE32_LEVEL(engine_beyond_window_avx512, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32)
WIDE32_LEVEL(engine_beyond_window_avx2, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32)
WIDE32_LEVEL(engine_beyond_window_generic, , LEVEL_GENERIC, REPROD_FLOAT32)
WIDE32_CHUNK(engine_beyond_window_chunk_avx512, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32)
WIDE32_CHUNK(engine_beyond_window_chunk_avx2, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32)
WIDE32_CHUNK(engine_beyond_window_chunk_generic, , LEVEL_GENERIC, REPROD_FLOAT32)
WIDE32_CHUNK(engine_beyond_window_chunk_bfloat16_avx512, DISTILL_AVX512, LEVEL_AVX512,
             REPROD_BFLOAT16)
WIDE32_CHUNK(engine_beyond_window_chunk_bfloat16_avx2, DISTILL_AVX2, LEVEL_AVX2, REPROD_BFLOAT16)
