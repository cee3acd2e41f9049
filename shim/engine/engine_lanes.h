/* engine_lanes.h: vectors of elements for the tiers past the kernels' first pass
 * (engine_distill.c, engine_beyond_window.c): GCC vector types of 8 lanes, the few operations
 * that GCC's vector code does badly written per kernel level, and each tier's decision run lane
 * by lane through the one function engine_inner.h defines for it, the GPU kernel's.
 *
 * One body of GCC vector code serves every kernel level: the callers' wrappers carry a target
 * attribute and a literal level, and the always-inline bodies take them on (a vector of 8
 * doubles is one AVX-512 register, two AVX2 ones, four SSE2 ones).
 *
 * Decisions (the lanes_* functions below): the lanes of the vectors are copied into arrays,
 * the engine_inner.h function runs on each lane in a plain loop, and the masks are copied back.
 * Those functions are branch-free ("Lane masks" in engine_inner.h), so the compiler turns each
 * loop into vector code, about as many instructions as the vector forms they replace. The
 * arithmetic per term (the cascade's TwoSum, the split, running minima and maxima) stays vector
 * code here: the formulas of engine_inner.h's loops, in the same order, which
 * tests/unit/test_engine.c and the fuzzer check against the per-element path at every level.
 */
#ifndef REPROD_ENGINE_LANES_H
#define REPROD_ENGINE_LANES_H

#include "engine/engine_kernels.h"

#include <string.h>

/* Vectors pass by value between the functions below, all of them inlined (the Makefile builds
 * the engine with -Wno-psabi: no call, so no ABI to note). */

typedef double distill_vector __attribute__((vector_size(64)));
typedef int64_t distill_mask __attribute__((vector_size(64)));
typedef uint64_t distill_unsigned __attribute__((vector_size(64)));

#define DISTILL_WIDTH  8 /* lanes per vector */
#define DISTILL_GROUPS 2 /* vectors per block at most: 16 lanes */

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
    *mask = (0 - (((distill_mask){0} + (int64_t)bits) & lane_bit)) >> 63;
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

/* ---- Vector arithmetic ------------------------------------------------------------------ */

/* *dst = src in the lanes of mask, unchanged elsewhere. */
ALWAYS_INLINE void lanes_select(distill_vector *dst, distill_vector src, distill_mask mask)
{
    *dst = (distill_vector)(((distill_mask)src & mask) | ((distill_mask)*dst & ~mask));
}

/* |x| lane-wise. */
ALWAYS_INLINE distill_vector lanes_abs(distill_vector x)
{
    return (distill_vector)((distill_mask)x & ENGINE_MAGNITUDE);
}

/* x's magnitude bits minus one into the running minimum *low, lane-wise
 * (engine_min_less_one). */
ALWAYS_INLINE void lanes_min_less_one(distill_mask *low, distill_vector x)
{
    distill_mask less_one = (distill_mask)(((distill_unsigned)x - 1) & ENGINE_MAGNITUDE);
    distill_mask step = less_one - *low;
    *low += step & (step >> 63);
}

/* One TwoSum of the cascade on a vector of lanes: *s += x exactly as (*s, e), e stored in
 * *slot and added to *t, |e| to *error_sum (engine_distill_pass, lane-wise). */
ALWAYS_INLINE void lanes_cascade_step(distill_vector *s, distill_vector *t,
                                      distill_vector *error_sum, distill_vector x,
                                      distill_vector *slot)
{
    distill_vector n = *s + x, b = n - *s;
    distill_vector e = (*s - (n - b)) + (x - b);
    *slot = e;
    *t += e;
    *error_sum += lanes_abs(e);
    *s = n;
}

/* One pass of the cascade (engine_distill_pass) over v[0..count-1][g] for every group, in
 * place; its (s, t, error_sum) per group. Two chains interleaved when groups is 2. */
ALWAYS_INLINE void lanes_cascade_pass(distill_vector (*v)[DISTILL_GROUPS], int count,
                                      const int groups, distill_vector *s, distill_vector *t,
                                      distill_vector *error_sum)
{
    distill_vector s0 = v[0][0], t0 = {0}, error_sum0 = {0};
    distill_vector s1 = v[0][groups - 1], t1 = {0}, error_sum1 = {0};
    for (int k = 1; k < count; k++) {
        lanes_cascade_step(&s0, &t0, &error_sum0, v[k][0], &v[k - 1][0]);
        if (groups > 1) lanes_cascade_step(&s1, &t1, &error_sum1, v[k][1], &v[k - 1][1]);
    }
    v[count - 1][0] = s0;
    v[count - 1][groups - 1] = groups > 1 ? s1 : s0;
    s[0] = s0, t[0] = t0, error_sum[0] = error_sum0;
    s[1] = s1, t[1] = t1, error_sum[1] = error_sum1;
}

/* The running minimum of the magnitude bits minus one of the errors v[0..count-2][g] that a
 * pass left (engine_distill_errors_low, lane-wise): the exact-errors test's smallest term. */
ALWAYS_INLINE distill_mask lanes_errors_low(distill_vector (*v)[DISTILL_GROUPS], int count, int g)
{
    distill_mask low = (distill_mask){0} + ENGINE_MAGNITUDE;
    for (int k = 0; k < count - 1; k++)
        lanes_min_less_one(&low, v[k][g]);
    return low;
}

/* ---- Decisions, lane by lane -------------------------------------------------------------
 * Each runs one engine_inner.h function on every lane (see the top of this file); `count` is
 * N, `dir` the rounding direction, the same for every lane. */

/* Binary32 magnitude bits (below 2^31) as 64-bit lanes, for the decisions that take them: every
 * lane loop then runs on 64-bit lanes (a loop that mixes widths vectorises at the narrower
 * one's width, and its halves' stores stall the wider loads of the loop after it). */
ALWAYS_INLINE distill_mask lanes_widen_bits(const int level, wide32_bits bits)
{
    wide32_int narrow = (wide32_int)bits;
    distill_mask wide;
    distill_widen(level, &narrow, &wide);
    return wide;
}

/* A helper with one result a lane has two forms of one loop: at the AVX2 and AVX-512 levels over
 * the lanes of the vectors themselves, unrolled, which the compiler packs back into vector
 * instructions without leaving registers; at the generic level (SSE2, which lacks 64-bit
 * compares) over arrays, which its loop vectoriser handles. A helper with several results a
 * lane runs over arrays at every level (packed from the lanes, its results left the registers
 * at AVX-512 and cost more). */

/* engine_rounding_certified: (d). */
ALWAYS_INLINE distill_mask lanes_rounding_certified(const int level, distill_vector s,
                                                    distill_vector t, distill_vector error_sum,
                                                    int count, reprod_rounding dir)
{
    distill_mask certified;
    if (level != LEVEL_GENERIC) {
        _Pragma("GCC unroll 8") for (int lane = 0; lane < DISTILL_WIDTH; lane++) certified[lane] =
            engine_rounding_certified(s[lane], t[lane], error_sum[lane], count, dir);
        return certified;
    }
    double s_[DISTILL_WIDTH], t_[DISTILL_WIDTH], error_sum_[DISTILL_WIDTH];
    int64_t certified_[DISTILL_WIDTH];
    memcpy(s_, &s, sizeof s_);
    memcpy(t_, &t, sizeof t_);
    memcpy(error_sum_, &error_sum, sizeof error_sum_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        certified_[lane] =
            engine_rounding_certified(s_[lane], t_[lane], error_sum_[lane], count, dir);
    memcpy(&certified, certified_, sizeof certified);
    return certified;
}

/* engine_mask_finite. */
ALWAYS_INLINE distill_mask lanes_finite(const int level, distill_vector x)
{
    distill_mask finite;
    if (level != LEVEL_GENERIC) {
        _Pragma("GCC unroll 8") for (int lane = 0; lane < DISTILL_WIDTH; lane++) finite[lane] =
            engine_mask_finite(x[lane]);
        return finite;
    }
    double x_[DISTILL_WIDTH];
    int64_t finite_[DISTILL_WIDTH];
    memcpy(x_, &x, sizeof x_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        finite_[lane] = engine_mask_finite(x_[lane]);
    memcpy(&finite, finite_, sizeof finite);
    return finite;
}

/* engine_errors_exact: (c') from the running minimum `low` of binary64 terms or errors. */
ALWAYS_INLINE distill_mask lanes_errors_exact(const int level, distill_vector error_sum,
                                              distill_mask low)
{
    distill_mask exact;
    if (level != LEVEL_GENERIC) {
        _Pragma("GCC unroll 8") for (int lane = 0; lane < DISTILL_WIDTH; lane++) exact[lane] =
            engine_errors_exact(error_sum[lane], (uint64_t)low[lane]);
        return exact;
    }
    double error_sum_[DISTILL_WIDTH];
    uint64_t low_[DISTILL_WIDTH];
    int64_t exact_[DISTILL_WIDTH];
    memcpy(error_sum_, &error_sum, sizeof error_sum_);
    memcpy(low_, &low, sizeof low_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        exact_[lane] = engine_errors_exact(error_sum_[lane], low_[lane]);
    memcpy(&exact, exact_, sizeof exact);
    return exact;
}

/* engine_errors_exact_float32: (c') from binary32 terms' smallest nonzero magnitude bits minus
 * one (lanes_widen_bits). */
ALWAYS_INLINE distill_mask lanes_errors_exact_float32(const int level, distill_vector error_sum,
                                                      distill_mask smallest)
{
    distill_mask exact;
    if (level != LEVEL_GENERIC) {
        _Pragma("GCC unroll 8") for (int lane = 0; lane < DISTILL_WIDTH; lane++) exact[lane] =
            engine_errors_exact_float32(error_sum[lane], smallest[lane]);
        return exact;
    }
    double error_sum_[DISTILL_WIDTH];
    int64_t smallest_[DISTILL_WIDTH], exact_[DISTILL_WIDTH];
    memcpy(error_sum_, &error_sum, sizeof error_sum_);
    memcpy(smallest_, &smallest, sizeof smallest_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        exact_[lane] = engine_errors_exact_float32(error_sum_[lane], smallest_[lane]);
    memcpy(&exact, exact_, sizeof exact);
    return exact;
}

/* engine_midpoint: (f), from the distilled expansion's top two terms and the sums of the rest;
 * (s, t) where it applies. Through arrays at every level (two results a lane). */
ALWAYS_INLINE distill_mask lanes_midpoint(distill_vector top, distill_vector c, distill_vector rest,
                                          distill_vector rest_abs, int count, distill_vector *s,
                                          distill_vector *t)
{
    double top_[DISTILL_WIDTH], c_[DISTILL_WIDTH], rest_[DISTILL_WIDTH];
    double rest_abs_[DISTILL_WIDTH], s_[DISTILL_WIDTH], t_[DISTILL_WIDTH];
    int64_t tie[DISTILL_WIDTH];
    memcpy(top_, &top, sizeof top_);
    memcpy(c_, &c, sizeof c_);
    memcpy(rest_, &rest, sizeof rest_);
    memcpy(rest_abs_, &rest_abs, sizeof rest_abs_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        tie[lane] = engine_midpoint(top_[lane], c_[lane], rest_[lane], rest_abs_[lane], count,
                                    &s_[lane], &t_[lane]);
    memcpy(s, s_, sizeof *s);
    memcpy(t, t_, sizeof *t);
    distill_mask mask;
    memcpy(&mask, tie, sizeof mask);
    return mask;
}

/* engine_cascade_decided: (g)'s verdict on a pass; *S, *T its exact sum. Through arrays at
 * every level (three results a lane). */
ALWAYS_INLINE distill_mask lanes_cascade_decided(distill_vector s, distill_vector t,
                                                 distill_vector error_sum, int count,
                                                 distill_mask exact, distill_vector *S,
                                                 distill_vector *T)
{
    double s_[DISTILL_WIDTH], t_[DISTILL_WIDTH], error_sum_[DISTILL_WIDTH];
    double S_[DISTILL_WIDTH], T_[DISTILL_WIDTH];
    int64_t exact_[DISTILL_WIDTH], decided[DISTILL_WIDTH];
    memcpy(s_, &s, sizeof s_);
    memcpy(t_, &t, sizeof t_);
    memcpy(error_sum_, &error_sum, sizeof error_sum_);
    memcpy(exact_, &exact, sizeof exact_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        decided[lane] = engine_cascade_decided(s_[lane], t_[lane], error_sum_[lane], count,
                                               exact_[lane], &S_[lane], &T_[lane]);
    memcpy(S, S_, sizeof *S);
    memcpy(T, T_, sizeof *T);
    distill_mask mask;
    memcpy(&mask, decided, sizeof mask);
    return mask;
}

/* engine_bracket_decides on plain sums s whose terms' largest magnitude bits are `largest`
 * (lanes_widen_bits): the bracket's ends, divided by N = count when `average` (a literal at
 * each use), and whether they round alike. */
ALWAYS_INLINE distill_mask lanes_bracket_decides(const int level,
                                                 const struct engine_bracket_rule *rule,
                                                 const int average, int count, distill_vector s,
                                                 distill_mask largest)
{
    distill_mask alike;
    if (level != LEVEL_GENERIC) {
        _Pragma("GCC unroll 8") for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        {
            double lo, hi;
            engine_bracket_ends(rule, s[lane], largest[lane], &lo, &hi);
            if (average) {
                lo /= count;
                hi /= count;
            }
            alike[lane] = engine_bracket_rounds_alike(rule, lo, hi);
        }
        return alike;
    }
    double s_[DISTILL_WIDTH];
    int64_t largest_[DISTILL_WIDTH], alike_[DISTILL_WIDTH];
    memcpy(s_, &s, sizeof s_);
    memcpy(largest_, &largest, sizeof largest_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++) {
        double lo, hi;
        engine_bracket_ends(rule, s_[lane], largest_[lane], &lo, &hi);
        if (average) {
            lo /= count;
            hi /= count;
        }
        alike_[lane] = engine_bracket_rounds_alike(rule, lo, hi);
    }
    memcpy(&alike, alike_, sizeof alike);
    return alike;
}

/* (h)'s plan per lane, from the terms' largest magnitude bits and smallest nonzero ones minus
 * one, in 32-bit lanes (as wide as the values): the span of its terms (engine_split_span), the
 * exponent field of its first sigma (engine_split_sigma_field), and whether one level takes it
 * (engine_split_fits). */
ALWAYS_INLINE wide32_int lanes_split_plan(const int level, const struct engine_split_rule *rule,
                                          wide32_bits largest, wide32_bits smallest,
                                          wide32_int *span, wide32_int *sigma_field)
{
    (void)level; /* through arrays at every level: faster there at AVX-512 */
    int32_t largest_[DISTILL_WIDTH], smallest_[DISTILL_WIDTH];
    int32_t span_[DISTILL_WIDTH], one_[DISTILL_WIDTH], field_[DISTILL_WIDTH];
    memcpy(largest_, &largest, sizeof largest_);
    memcpy(smallest_, &smallest, sizeof smallest_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++) {
        span_[lane] = engine_split_span(largest_[lane], smallest_[lane]);
        one_[lane] = engine_split_fits(rule, span_[lane], 1);
        field_[lane] = engine_split_sigma_field(rule, largest_[lane]);
    }
    memcpy(span, span_, sizeof *span);
    memcpy(sigma_field, field_, sizeof *sigma_field);
    wide32_int one;
    memcpy(&one, one_, sizeof one);
    return one;
}

/* engine_split_levels_for: the levels each lane takes for its span (0: none fits). */
ALWAYS_INLINE wide32_int lanes_split_levels(const struct engine_split_rule *rule, wide32_int span)
{
    int32_t span_[DISTILL_WIDTH], levels_[DISTILL_WIDTH];
    memcpy(span_, &span, sizeof span_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        levels_[lane] = engine_split_levels_for(rule, span_[lane]);
    wide32_int levels;
    memcpy(&levels, levels_, sizeof levels);
    return levels;
}

/* engine_split_next_sigma: level `level`'s sigma from the one before (0 in lanes that take
 * fewer levels). */
ALWAYS_INLINE distill_vector lanes_split_next_sigma(const struct engine_split_rule *rule,
                                                    distill_vector previous, distill_mask span,
                                                    int level)
{
    double previous_[DISTILL_WIDTH], sigma_[DISTILL_WIDTH];
    int64_t span_[DISTILL_WIDTH];
    memcpy(previous_, &previous, sizeof previous_);
    memcpy(span_, &span, sizeof span_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        sigma_[lane] = engine_split_next_sigma(rule, previous_[lane], span_[lane], level);
    distill_vector sigma;
    memcpy(&sigma, sigma_, sizeof sigma);
    return sigma;
}

/* engine_split_chain over `levels` accumulators hi[0..levels-1][g] and lo: S + T, and where
 * the chain tells (through arrays at every level: three results a lane). */
ALWAYS_INLINE distill_mask lanes_split_chain(distill_vector (*hi)[DISTILL_GROUPS], const int levels,
                                             int g, distill_vector lo, distill_vector *S,
                                             distill_vector *T)
{
    double hi_[ENGINE_SPLIT_LEVELS][DISTILL_WIDTH], lo_[DISTILL_WIDTH];
    double S_[DISTILL_WIDTH], T_[DISTILL_WIDTH];
    int64_t fits[DISTILL_WIDTH];
    _Pragma("GCC unroll 5") for (int i = 0; i < levels; i++)
        memcpy(hi_[i], &hi[i][g], sizeof hi_[i]);
    memcpy(lo_, &lo, sizeof lo_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++) {
        double lane_hi[ENGINE_SPLIT_LEVELS];
        _Pragma("GCC unroll 5") for (int i = 0; i < levels; i++) lane_hi[i] = hi_[i][lane];
        fits[lane] = engine_split_chain(lane_hi, levels, lo_[lane], &S_[lane], &T_[lane]);
    }
    memcpy(S, S_, sizeof *S);
    memcpy(T, T_, sizeof *T);
    distill_mask mask;
    memcpy(&mask, fits, sizeof mask);
    return mask;
}

/* engine_round_to_odd. */
ALWAYS_INLINE distill_vector lanes_round_to_odd(const int level, distill_vector S, distill_vector T)
{
    distill_vector odd;
    if (level != LEVEL_GENERIC) {
        _Pragma("GCC unroll 8") for (int lane = 0; lane < DISTILL_WIDTH; lane++) odd[lane] =
            engine_round_to_odd(S[lane], T[lane]);
        return odd;
    }
    double S_[DISTILL_WIDTH], T_[DISTILL_WIDTH], odd_[DISTILL_WIDTH];
    memcpy(S_, &S, sizeof S_);
    memcpy(T_, &T, sizeof T_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        odd_[lane] = engine_round_to_odd(S_[lane], T_[lane]);
    memcpy(&odd, odd_, sizeof odd);
    return odd;
}

/* engine_bfloat16_nearest: the bfloat16 bits of doubles rounded to odd; *normal where they are
 * normal. */
ALWAYS_INLINE distill_mask lanes_bfloat16_nearest(const int level, distill_vector odd,
                                                  distill_mask *normal)
{
    distill_mask bits;
    (void)level;
    double odd_[DISTILL_WIDTH];
    int64_t bits_[DISTILL_WIDTH], normal_[DISTILL_WIDTH];
    memcpy(odd_, &odd, sizeof odd_);
    for (int lane = 0; lane < DISTILL_WIDTH; lane++)
        bits_[lane] = engine_bfloat16_nearest(odd_[lane], &normal_[lane]);
    memcpy(normal, normal_, sizeof *normal);
    memcpy(&bits, bits_, sizeof bits);
    return bits;
}

#endif /* REPROD_ENGINE_LANES_H */
