/* engine.c: exact and ordered reduction of N contributions on host buffers.
 *
 * The arithmetic of one element lives in engine_inner.h and engine_round.h; this file runs it
 * over arrays: argument checks, the caller's floating-point environment, blocking (every input
 * of an element is read before its result is written, so result may be a contribution), the
 * choice of kernel (AVX-512 in engine_avx512.c, AVX2 in engine_avx2.c and engine_avx2_16.c,
 * or the generic vector code here for any other CPU), and the ordered fold.
 */
#include "engine/engine.h"

#include "common.h"
#include "engine/engine_kernels.h"
#include "engine/engine_ordered.h"

#include <fenv.h>
#include <stdint.h>
#include <string.h>

/* ---- Implementation assumptions ------------------------------------------------------------
 * Those of engine_round.h (IEEE binary32/binary64, two's complement, arithmetic >> on int64),
 * plus: GCC vector extensions; the default floating-point environment (fesetenv(FE_DFL_ENV))
 * rounds to nearest without flushing subnormals (glibc also clears MXCSR FTZ/DAZ there); the
 * compiler forms no FMA (-ffp-contract=off). */

/* ---- Configuration ---------------------------------------------------------------------- */

#define ORDERED_BLOCK 512 /* elements per block of the ordered fold (acc stays in L1) */
#define ORDERED_GROUP 8   /* contributions folded per pass over a block */

/* The ordered fold is compiled once per kernel level and chosen by kernel_level(), not by
 * target_clones: a clone's IFUNC resolver runs while the loader relocates the shim, before a
 * sanitizer's runtime is initialised, and an instrumented resolver crashes there. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ORDERED_AVX512 __attribute__((target("avx512f")))
#define ORDERED_AVX2   __attribute__((target("avx2")))
#else
#define ORDERED_AVX512
#define ORDERED_AVX2
#endif

typedef float v16f __attribute__((vector_size(64))); /* the ordered fold's vectors: one */
typedef double v8d __attribute__((vector_size(64))); /* AVX-512 register, two AVX2 ones */
typedef float v4f __attribute__((vector_size(16)));  /* the generic exact kernels': SSE2 */
typedef float v2f __attribute__((vector_size(8)));
typedef double v2d __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef int64_t v2l __attribute__((vector_size(16)));

/* The low and high two lanes of a v4f as binary64 (exact). GCC splits the portable form into
 * scalar conversions on x86-64, so there SSE2's cvtps2pd (always present) does it. */
#if defined(__SSE2__)
#include <emmintrin.h>
#define LOW_TO_DOUBLE(x)  ((v2d)_mm_cvtps_pd((__m128)(x)))
#define HIGH_TO_DOUBLE(x) ((v2d)_mm_cvtps_pd(_mm_movehl_ps((__m128)(x), (__m128)(x))))
#else
#define LOW_TO_DOUBLE(x)  __builtin_convertvector(__builtin_shufflevector(x, x, 0, 1), v2d)
#define HIGH_TO_DOUBLE(x) __builtin_convertvector(__builtin_shufflevector(x, x, 2, 3), v2d)
#endif

/* Unaligned vector load and store (memcpy compiles to one move). */
#define VLOAD(v, p)  memcpy(&(v), (p), sizeof(v))
#define VSTORE(p, v) memcpy((p), &(v), sizeof(v))
/* Lane-wise max and min through comparison masks: b unless a compares greater (less), so a
 * NaN in a is ignored. For floating-point vectors the masks select the bit patterns. */
#define VSELECT(mask, a, b) (__typeof__(a))(((v2l)(a) & (v2l)(mask)) | ((v2l)(b) & ~(v2l)(mask)))
#define VMAX(a, b)          VSELECT((a) > (b), a, b)
#define VMIN(a, b)          VSELECT((a) < (b), a, b)

/* ---- Arguments and environment ---------------------------------------------------------- */

REPROD_EXPORT size_t reprod_type_size(reprod_type type)
{
    switch (type) {
    case REPROD_FLOAT16:
    case REPROD_BFLOAT16:
        return 2;
    case REPROD_FLOAT32:
        return 4;
    case REPROD_FLOAT64:
        return 8;
    }
    return 0;
}

/* Whether the arguments common to both reductions are in range (REPROD_PROD: ordered only). */
static int arguments_valid(reprod_type type, reprod_op op, const void *const contributions[],
                           int contribution_count, size_t element_count, const void *result,
                           int ordered)
{
    int op_valid = op == REPROD_SUM || op == REPROD_AVG || (ordered && op == REPROD_PROD);
    if (reprod_type_size(type) == 0 || !op_valid) return 0;
    if (contribution_count < 1) return 0;
    if (element_count == 0) return 1;
    if (contributions == NULL || result == NULL) return 0;
    for (int k = 0; k < contribution_count; k++)
        if (contributions[k] == NULL) return 0;
    return 1;
}

/* The engine computes in the default environment whatever the caller set (rounding mode,
 * FTZ/DAZ, trapping), and gives the caller's environment, flags included, back.
 *
 * On x86-64 the engine's arithmetic is all SSE/AVX (no long double), so the environment that
 * matters is MXCSR: saving and loading it costs a few cycles, where fegetenv/fesetenv also
 * save and load the x87 state and cost more than a small reduction's arithmetic. */
#if defined(__x86_64__)
typedef unsigned int engine_environment;
#define ENGINE_DEFAULT_MXCSR 0x1f80u /* all exceptions masked, to nearest, no FTZ/DAZ */

static void environment_enter(engine_environment *saved)
{
    unsigned int wanted = ENGINE_DEFAULT_MXCSR;
    __asm__ volatile("stmxcsr %0" : "=m"(*saved) : : "memory");
    __asm__ volatile("ldmxcsr %0" : : "m"(wanted) : "memory");
}

static void environment_leave(const engine_environment *saved)
{
    __asm__ volatile("ldmxcsr %0" : : "m"(*saved) : "memory");
}
#else
typedef fenv_t engine_environment;

static void environment_enter(engine_environment *saved)
{
    fegetenv(saved);
    fesetenv(FE_DFL_ENV);
}

static void environment_leave(const engine_environment *saved)
{
    fesetenv(saved);
}
#endif

/* ---- Exact: generic kernels -------------------------------------------------------------
 * For CPUs without AVX2 (and any other architecture): GCC vector code in 16-byte vectors,
 * which every x86-64 (SSE2) has natively; wider ones would be split into scalar code there.
 * Lane-wise max/min go through comparison masks; binary64's through floating-point compares,
 * as SSE2 has no 64-bit integer compare. */

/* Exact binary32, 8 elements per block: sum in binary64 from -0 and track the exponent span
 * with max/min on the magnitude bits (below 2^31: signed compares order them; a zero's
 * (0 - 1) & 0x7fffffff never wins the min). */
static size_t exact_float32_generic(reprod_op op, reprod_rounding dir,
                                    const void *const *contributions, int count,
                                    size_t element_count, float *result,
                                    struct engine_accumulator *a, size_t *general)
{
    const struct engine_format f = engine_format_of(REPROD_FLOAT32);
    const int window = engine_fast_window(24, count);
    size_t j = 0;
    for (; j + 8 <= element_count; j += 8) {
        v2d s0 = {-0.0, -0.0}, s1 = s0, s2 = s0, s3 = s0;
        v4i max0 = {0}, max1 = max0, min0 = max0 + 0x7fffffff, min1 = min0;
        for (int k = 0; k < count; k++) {
            const float *p = (const float *)contributions[k] + j;
            v4i b0, b1;
            v4f x0, x1;
            VLOAD(b0, p);
            VLOAD(b1, p + 4);
            VLOAD(x0, p);
            VLOAD(x1, p + 4);
            v2d d0 = LOW_TO_DOUBLE(x0), d1 = HIGH_TO_DOUBLE(x0);
            v2d d2 = LOW_TO_DOUBLE(x1), d3 = HIGH_TO_DOUBLE(x1);
            b0 &= 0x7fffffff;
            b1 &= 0x7fffffff;
            max0 = VMAX(max0, b0);
            max1 = VMAX(max1, b1);
            b0 = (b0 - 1) & 0x7fffffff;
            b1 = (b1 - 1) & 0x7fffffff;
            min0 = VMIN(min0, b0);
            min1 = VMIN(min1, b1);
            s0 += d0;
            s1 += d1;
            s2 += d2;
            s3 += d3;
        }
        /* Exponent fields; a subnormal's counts as 1, all zeros give e_min = 256 > e_max. */
        v4i e_max0 = max0 >> 23, e_max1 = max1 >> 23;
        v4i e_min0 = (v4i)(((v4u)min0 + 1) >> 23), e_min1 = (v4i)(((v4u)min1 + 1) >> 23);
        e_min0 = VMAX(e_min0, e_min0 * 0 + 1);
        e_min1 = VMAX(e_min1, e_min1 * 0 + 1);
        v4i bad0 = (e_max0 > 254) | (e_max0 - e_min0 > window);
        v4i bad1 = (e_max1 > 254) | (e_max1 - e_min1 > window);
        v4i any = bad0 | bad1;
        uint64_t any_bad[2];
        VSTORE(any_bad, any);
        double sums[8];
        VSTORE(sums, s0);
        VSTORE(sums + 2, s1);
        VSTORE(sums + 4, s2);
        VSTORE(sums + 6, s3);
        if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && (any_bad[0] | any_bad[1]) == 0) {
            /* The common case: the hardware conversion is the nearest-even rounding, and the
             * sum from -0 already carries the right sign of zero. */
            for (int lane = 0; lane < 8; lane++)
                result[j + (size_t)lane] = (float)sums[lane];
            continue;
        }
        int32_t bad_lane[8], max_lane[8], min_lane[8];
        VSTORE(bad_lane, bad0);
        VSTORE(bad_lane + 4, bad1);
        VSTORE(max_lane, max0);
        VSTORE(max_lane + 4, max1);
        VSTORE(min_lane, min0);
        VSTORE(min_lane + 4, min1);
        uint32_t out[8], refused = 0;
        for (int lane = 0; lane < 8; lane++)
            refused |= (uint32_t)(bad_lane[lane] != 0) << lane;
        if (refused)
            engine_beyond_window_generic(op, dir, contributions, count, j, 8, refused,
                                         (const uint32_t *)max_lane, (const uint32_t *)min_lane,
                                         NULL, out, a, general);
        for (int lane = 0; lane < 8; lane++) {
            size_t index = j + (size_t)lane;
            if (!bad_lane[lane])
                out[lane] =
                    (uint32_t)engine_fast_finish(&f, REPROD_FLOAT32, op, dir, sums[lane],
                                                 max_lane[lane] != 0, contributions, count, index);
        }
        memcpy(result + j, out, sizeof out);
    }
    return j;
}

/* Exact binary64 sums (and averages engine_fast_double_serves), 8 elements per block in four
 * vectors of 2: the TwoSum cascade lane-wise, judged by the exact-errors test and the certified
 * rounding (engine_inner.h). For the exact-errors test the min of (the bits of |x|) - 1, compared
 * as doubles: for a zero that is a NaN, which the compare mask ignores. Infinities, NaNs and
 * overflow show as a non-finite s + t. */
static size_t exact_float64_generic(reprod_op op, reprod_rounding dir,
                                    const void *const *contributions, int count,
                                    size_t element_count, double *result,
                                    struct engine_accumulator *a, size_t *general)
{
    const v2l magnitude_mask = {0x7fffffffffffffffll, 0x7fffffffffffffffll};
    size_t j = 0;
    for (; j + 8 <= element_count; j += 8) {
        v2d s[4], t[4], error_sum[4], min[4];
        for (int v = 0; v < 4; v++) {
            s[v] = (v2d){-0.0, -0.0};
            t[v] = (v2d){0.0, 0.0};
            error_sum[v] = t[v];
            min[v] = (v2d){INFINITY, INFINITY};
        }
        for (int k = 0; k < count; k++) {
            const double *p = (const double *)contributions[k] + j;
            for (int v = 0; v < 4; v++) { /* unrolled: four independent TwoSum chains */
                v2d x, m, less_one;
                VLOAD(x, p + 2 * v);
                m = (v2d)((v2l)x & magnitude_mask);
                less_one = (v2d)((v2l)m - 1);
                min[v] = VMIN(less_one, min[v]);
                v2d n = s[v] + x, bb = n - s[v];
                v2d e = (s[v] - (n - bb)) + (x - bb);
                t[v] += e;
                error_sum[v] += (v2d)((v2l)e & magnitude_mask);
                s[v] = n;
            }
        }
        double s_lane[8], t_lane[8], error_sum_lane[8];
        uint64_t min_lane[8];
        for (int v = 0; v < 4; v++) {
            VSTORE(s_lane + 2 * v, s[v]);
            VSTORE(t_lane + 2 * v, t[v]);
            VSTORE(error_sum_lane + 2 * v, error_sum[v]);
            VSTORE(min_lane + 2 * v, min[v]);
        }
        engine_mask fast[8], proved = -1, plain = -1;
        double sum[8];
        for (int lane = 0; lane < 8; lane++) { /* branch-free loops: vector code */
            fast[lane] = engine_errors_exact(error_sum_lane[lane], min_lane[lane]);
            proved &= fast[lane];
        }
        if (!proved) /* the certificate only where it can help (like the AVX kernels) */
            for (int lane = 0; lane < 8; lane++)
                fast[lane] |= engine_rounding_certified(s_lane[lane], t_lane[lane],
                                                        error_sum_lane[lane], count, dir);
        for (int lane = 0; lane < 8; lane++) {
            sum[lane] = s_lane[lane] + t_lane[lane];
            fast[lane] &= engine_mask_finite(sum[lane]);
            plain &=
                fast[lane] & ~engine_mask_zero(engine_signed_bits(sum[lane]) & ENGINE_MAGNITUDE);
        }
        int all_plain = plain != 0;
        if (op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && all_plain) {
            memcpy(result + j, sum, sizeof sum); /* RN(s + t) is the nearest rounding */
            continue;
        }
        uint64_t out[8];
        uint32_t refused = 0;
        for (int lane = 0; lane < 8; lane++)
            refused |= (uint32_t)!fast[lane] << lane;
        if (refused)
            engine_distill_float64_generic(op, dir, contributions, count, j, 8, refused, NULL, out,
                                           a, general);
        for (int lane = 0; lane < 8; lane++)
            if (fast[lane])
                out[lane] = engine_float64_lane(
                    op, dir, contributions, count, j + (size_t)lane, 1, s_lane[lane], t_lane[lane],
                    min_lane[lane] != 0x7ff0000000000000ull, a, general);
        memcpy(result + j, out, sizeof out);
    }
    return j;
}

/* ---- Kernel choice ------------------------------------------------------------------------ */

static enum engine_kernel_level kernel_limit = ENGINE_KERNELS_AUTO; /* engine_limit_kernels */

int engine_limit_kernels(enum engine_kernel_level level)
{
    if ((level == ENGINE_KERNELS_AVX512 && !engine_cpu_has_avx512()) ||
        (level == ENGINE_KERNELS_AVX2 && !engine_cpu_has_avx2()))
        return -1;
    kernel_limit = level;
    return 0;
}

/* The widest kernel level allowed that this CPU runs. */
static enum engine_kernel_level kernel_level(void)
{
    enum engine_kernel_level limit = kernel_limit;
    if (limit != ENGINE_KERNELS_AUTO) return limit;
    if (engine_cpu_has_avx512()) return ENGINE_KERNELS_AVX512;
    if (engine_cpu_has_avx2()) return ENGINE_KERNELS_AVX2;
    return ENGINE_KERNELS_GENERIC;
}

enum engine_kernel_level engine_kernels_in_use(void)
{
    return kernel_level();
}

/* The exact kernels of that level. Every kernel computes the same exact values, so the choice
 * never changes a bit. */
static engine_exact_float32_kernel *float32_kernel(void)
{
    switch (kernel_level()) {
    case ENGINE_KERNELS_AVX512:
        return engine_exact_float32_avx512;
    case ENGINE_KERNELS_AVX2:
        return engine_exact_float32_avx2;
    default:
        return exact_float32_generic;
    }
}

static engine_exact_float64_kernel *float64_kernel(void)
{
    switch (kernel_level()) {
    case ENGINE_KERNELS_AVX512:
        return engine_exact_float64_avx512;
    case ENGINE_KERNELS_AVX2:
        return engine_exact_float64_avx2;
    default:
        return exact_float64_generic;
    }
}

/* ---- Exact: two contributions -------------------------------------------------------------
 * IEEE 754 addition is correctly rounded in the current direction, so with two contributions
 * one addition IS the exact sum rounded once, with mpfr_sum's zero signs (x + (-x) is +0, or
 * -0 rounding down; -0 + -0 is -0), and overflow and subnormals as IEEE says. Only NaNs need
 * the canonical bits. Two ranks are the most common all-reduce there is: this makes it as
 * cheap as the ordered fold. x86-64 only: the direction goes into MXCSR. */
#if defined(__x86_64__)
typedef float pair_f32 __attribute__((vector_size(16)));
typedef double pair_f64 __attribute__((vector_size(16)));
typedef int32_t pair_i32 __attribute__((vector_size(16)));
typedef int64_t pair_i64 __attribute__((vector_size(16)));

/* MXCSR's rounding control for each direction (bits 13-14). */
static unsigned int pair_mxcsr(reprod_rounding rounding)
{
    static const unsigned int control[] = {[REPROD_ROUND_NEAREST] = 0,
                                           [REPROD_ROUND_DOWN] = 1,
                                           [REPROD_ROUND_UP] = 2,
                                           [REPROD_ROUND_ZERO] = 3};
    return ENGINE_DEFAULT_MXCSR | control[rounding] << 13;
}

/* out[i] = a[i] + b[i] rounded in `rounding`, NaNs canonical; out may be a or b. */
static void exact_pair_float32(reprod_rounding rounding, const float *a, const float *b, float *out,
                               size_t count)
{
    unsigned int csr = pair_mxcsr(rounding), restore = ENGINE_DEFAULT_MXCSR;
    const pair_i32 nan = {0x7fc00000, 0x7fc00000, 0x7fc00000, 0x7fc00000};
    size_t i = 0;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
    for (; i + 4 <= count; i += 4) {
        pair_f32 x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        pair_f32 sum = x + y;
        pair_i32 is_nan = sum != sum;
        pair_i32 bits = ((pair_i32)sum & ~is_nan) | (nan & is_nan);
        memcpy(out + i, &bits, sizeof bits);
    }
    for (; i < count; i++) {
        float sum = a[i] + b[i];
        uint32_t bits = 0x7fc00000u;
        if (sum == sum) memcpy(&bits, &sum, sizeof bits);
        memcpy(out + i, &bits, sizeof bits);
    }
    __asm__ volatile("ldmxcsr %0" : : "m"(restore) : "memory");
}

static void exact_pair_float64(reprod_rounding rounding, const double *a, const double *b,
                               double *out, size_t count)
{
    unsigned int csr = pair_mxcsr(rounding), restore = ENGINE_DEFAULT_MXCSR;
    const pair_i64 nan = {0x7ff8000000000000ll, 0x7ff8000000000000ll};
    size_t i = 0;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr) : "memory");
    for (; i + 2 <= count; i += 2) {
        pair_f64 x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        pair_f64 sum = x + y;
        pair_i64 is_nan = sum != sum;
        pair_i64 bits = ((pair_i64)sum & ~is_nan) | (nan & is_nan);
        memcpy(out + i, &bits, sizeof bits);
    }
    for (; i < count; i++) {
        double sum = a[i] + b[i];
        uint64_t bits = 0x7ff8000000000000ull;
        if (sum == sum) memcpy(&bits, &sum, sizeof bits);
        memcpy(out + i, &bits, sizeof bits);
    }
    __asm__ volatile("ldmxcsr %0" : : "m"(restore) : "memory");
}

/* 1 when the pair kernels computed the result. */
static int exact_pair(reprod_type type, reprod_op op, reprod_rounding rounding,
                      const void *const contributions[], int contribution_count,
                      size_t element_count, void *result)
{
    if (op != REPROD_SUM || contribution_count != 2) return 0;
    if (type == REPROD_FLOAT32)
        exact_pair_float32(rounding, contributions[0], contributions[1], result, element_count);
    else if (type == REPROD_FLOAT64)
        exact_pair_float64(rounding, contributions[0], contributions[1], result, element_count);
    else
        return 0;
    return 1;
}
#else
static int exact_pair(reprod_type type, reprod_op op, reprod_rounding rounding,
                      const void *const contributions[], int contribution_count,
                      size_t element_count, void *result)
{
    (void)type, (void)op, (void)rounding, (void)contributions, (void)contribution_count;
    (void)element_count, (void)result;
    return 0;
}
#endif

/* ---- Exact: entry point ------------------------------------------------------------------- */

/* The exact sum by the kernels and the general path (the MXCSR environment set): returns how
 * many elements took the general path. The accumulator lives here, not in the caller: clearing
 * its half KiB costs a small reduction more than its arithmetic, and two contributions (the
 * pair kernels) need none. */
static size_t exact_by_kernels(reprod_type type, reprod_op op, reprod_rounding rounding,
                               const void *const contributions[], int contribution_count,
                               size_t element_count, void *result, int force_general)
{
    struct engine_accumulator a;
    size_t done = 0, general = 0;
    int small = type == REPROD_FLOAT16 || type == REPROD_BFLOAT16;
    engine_accumulator_clear(&a);
    if (!force_general && small && kernel_level() >= ENGINE_KERNELS_AVX2)
        done = engine_exact_small_avx2(type, op, rounding, contributions, contribution_count,
                                       element_count, (uint16_t *)result,
                                       kernel_level() >= ENGINE_KERNELS_AVX512
                                           ? engine_beyond_window_chunk_bfloat16_avx512
                                           : engine_beyond_window_chunk_bfloat16_avx2,
                                       &a, &general);
    else if (!force_general && type == REPROD_FLOAT32)
        done = float32_kernel()(op, rounding, contributions, contribution_count, element_count,
                                (float *)result, &a, &general);
    else if (!force_general && type == REPROD_FLOAT64 &&
             engine_fast_double_serves(op, contribution_count))
        done = float64_kernel()(op, rounding, contributions, contribution_count, element_count,
                                (double *)result, &a, &general);
    for (size_t i = done; i < element_count; i++) {
        uint64_t bits = engine_exact_element(type, op, rounding, contributions, contribution_count,
                                             i, force_general, &a, &general);
        engine_store_bits(type, result, i, bits);
    }
    return general;
}

int reprod_engine_exact(reprod_type type, reprod_op op, reprod_rounding rounding,
                        const void *const contributions[], int contribution_count,
                        size_t element_count, void *result,
                        const struct reprod_engine_options *options,
                        struct reprod_engine_stats *stats)
{
    if (!arguments_valid(type, op, contributions, contribution_count, element_count, result, 0))
        return REPROD_EINVAL;
    if (rounding != REPROD_ROUND_NEAREST && rounding != REPROD_ROUND_ZERO &&
        rounding != REPROD_ROUND_UP && rounding != REPROD_ROUND_DOWN)
        return REPROD_EINVAL;
    int force_general = options != NULL && options->force_general;
    size_t general = 0;
    if (element_count > 0) {
        engine_environment saved;
        environment_enter(&saved);
        if (force_general || !exact_pair(type, op, rounding, contributions, contribution_count,
                                         element_count, result))
            general = exact_by_kernels(type, op, rounding, contributions, contribution_count,
                                       element_count, result, force_general);
        environment_leave(&saved);
    }
    if (stats != NULL) stats->general_elements = general;
    return REPROD_OK;
}

REPROD_EXPORT int reprod_reduce_exact(reprod_type type, reprod_op op, reprod_rounding rounding,
                                      const void *const contributions[], int contribution_count,
                                      size_t element_count, void *result)
{
    return reprod_engine_exact(type, op, rounding, contributions, contribution_count, element_count,
                               result, NULL, NULL);
}

/* ---- Ordered ------------------------------------------------------------------------------ */

/* One pass of the ordered fold over a block of `length` elements: dst[j] = ((src[j] + p[0][j])
 * + p[1][j]) + ... + p[g-1][j], or (p[0][j] + p[1][j]) + ... when src is NULL (the first
 * pass). G is a literal at each use, so the streams unroll into straight-line adds. */
#define ORDERED_PASS(name, T, V)                                                                   \
    static inline __attribute__((always_inline)) void name(                                        \
        T *dst, const T *src, const T *const *p, int g, size_t length)                             \
    {                                                                                              \
        const size_t width = sizeof(V) / sizeof(T);                                                \
        const int first = src == NULL;                                                             \
        size_t j = 0;                                                                              \
        for (; j + width <= length; j += width) {                                                  \
            V acc, x;                                                                              \
            VLOAD(acc, first ? p[0] + j : src + j);                                                \
            _Pragma("GCC unroll 8") for (int s = first; s < g; s++)                                \
            {                                                                                      \
                VLOAD(x, p[s] + j);                                                                \
                acc += x;                                                                          \
            }                                                                                      \
            VSTORE(dst + j, acc);                                                                  \
        }                                                                                          \
        for (; j < length; j++) {                                                                  \
            T acc = first ? p[0][j] : src[j];                                                      \
            for (int s = first; s < g; s++)                                                        \
                acc += p[s][j];                                                                    \
            dst[j] = acc;                                                                          \
        }                                                                                          \
    }

ORDERED_PASS(ordered_pass_float, float, v16f)
ORDERED_PASS(ordered_pass_double, double, v8d)

/* pass(dst, src, p, g, length) with g a literal (8, 4, 2 or 1), so that it unrolls. */
#define ORDERED_DISPATCH(pass, dst, src, p, g, length)                                             \
    do {                                                                                           \
        switch (g) {                                                                               \
        case 8:                                                                                    \
            pass(dst, src, p, 8, length);                                                          \
            break;                                                                                 \
        case 4:                                                                                    \
            pass(dst, src, p, 4, length);                                                          \
            break;                                                                                 \
        case 2:                                                                                    \
            pass(dst, src, p, 2, length);                                                          \
            break;                                                                                 \
        default:                                                                                   \
            pass(dst, src, p, 1, length);                                                          \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* The ordered fold of a binary32 or binary64 block (T, pass as above) into dst, for the
 * instruction set `target`; ordered_average divides for AVG. */
#define ORDERED_FOLD(name, target, T, pass, ordered_average, canonical)                            \
    target static void name(const T *const *c, int count, size_t element_count, T *result,         \
                            int average)                                                           \
    {                                                                                              \
        T acc[ORDERED_BLOCK];                                                                      \
        for (size_t base = 0; base < element_count; base += ORDERED_BLOCK) {                       \
            size_t length = element_count - base;                                                  \
            if (length > ORDERED_BLOCK) length = ORDERED_BLOCK;                                    \
            const T *p[ORDERED_GROUP];                                                             \
            const T *src = NULL;                                                                   \
            for (int k = 0; k < count;) {                                                          \
                int g = count - k >= 8 ? 8 : count - k >= 4 ? 4 : count - k >= 2 ? 2 : 1;          \
                for (int s = 0; s < g; s++)                                                        \
                    p[s] = c[k + s] + base;                                                        \
                k += g;                                                                            \
                T *dst = (k == count && !average) ? result + base : acc;                           \
                if (src == NULL)                                                                   \
                    ORDERED_DISPATCH(pass, dst, NULL, p, g, length);                               \
                else                                                                               \
                    ORDERED_DISPATCH(pass, dst, acc, p, g, length);                                \
                src = acc;                                                                         \
            }                                                                                      \
            if (average) ordered_average(acc, count, length, result + base);                       \
            canonical(result + base, length);                                                      \
        }                                                                                          \
    }

/* AVG of the ordered fold: the folded sum divided by N, rounded to nearest once. */
static void ordered_average_float(const float *acc, int count, size_t length, float *out)
{
    const struct engine_format f = engine_format_of(REPROD_FLOAT32);
    for (size_t j = 0; j < length; j++) {
        double sum = acc[j];
        if (sum == 0 || !engine_is_finite(sum)) /* +-0, inf, NaN: the dividend itself */
            out[j] = acc[j] / (float)count;
        else
            out[j] = engine_float_from_bits(
                (uint32_t)engine_round_quotient(&f, sum, count, REPROD_ROUND_NEAREST));
    }
}

static void ordered_average_double(const double *acc, int count, size_t length, double *out)
{
    for (size_t j = 0; j < length; j++)
        out[j] = acc[j] / (double)count; /* N < 2^31 is exact: one rounding */
}

/* Every NaN of a finished block becomes the canonical one: the hardware's NaN depends on the
 * operand order the compiler chose and differs between CPU and GPU (engine_ordered.h). A
 * branch-free pass over the block while it is in L1. */
static inline __attribute__((always_inline)) void canonical_nan_float(float *block, size_t length)
{
    for (size_t j = 0; j < length; j++) {
        uint32_t bits;
        memcpy(&bits, block + j, sizeof bits);
        bits = (bits & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : bits;
        memcpy(block + j, &bits, sizeof bits);
    }
}

static inline __attribute__((always_inline)) void canonical_nan_double(double *block, size_t length)
{
    for (size_t j = 0; j < length; j++) {
        uint64_t bits;
        memcpy(&bits, block + j, sizeof bits);
        bits =
            (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull ? 0x7ff8000000000000ull : bits;
        memcpy(block + j, &bits, sizeof bits);
    }
}

/* name: the ordered fold of the widest kernel level allowed (every level adds the same). */
#define ORDERED_FOLDS(name, T, pass, ordered_average, canonical)                                   \
    ORDERED_FOLD(name##_avx512, ORDERED_AVX512, T, pass, ordered_average, canonical)               \
    ORDERED_FOLD(name##_avx2, ORDERED_AVX2, T, pass, ordered_average, canonical)                   \
    ORDERED_FOLD(name##_generic, , T, pass, ordered_average, canonical)                            \
    static void name(const T *const *c, int count, size_t element_count, T *result, int average)   \
    {                                                                                              \
        enum engine_kernel_level level = kernel_level();                                           \
        if (level == ENGINE_KERNELS_AVX512)                                                        \
            name##_avx512(c, count, element_count, result, average);                               \
        else if (level == ENGINE_KERNELS_AVX2)                                                     \
            name##_avx2(c, count, element_count, result, average);                                 \
        else                                                                                       \
            name##_generic(c, count, element_count, result, average);                              \
    }

ORDERED_FOLDS(ordered_fold_float, float, ordered_pass_float, ordered_average_float,
              canonical_nan_float)
ORDERED_FOLDS(ordered_fold_double, double, ordered_pass_double, ordered_average_double,
              canonical_nan_double)

/* The ordered fold of binary16 or bfloat16: each addition is exact in binary64 (binary16) or
 * rounded twice harmlessly (bfloat16: 53 >= 2 * 8 + 2), then rounded to nearest in the type. */
static void ordered_small(reprod_type type, int average, const uint16_t *const *c, int count,
                          size_t element_count, uint16_t *result)
{
    const struct engine_format f = engine_format_of(type);
    size_t done = 0;
    if (kernel_level() >= ENGINE_KERNELS_AVX2)
        done = engine_ordered_small_avx2(type, average, c, count, element_count, result);
    for (size_t j = done; j < element_count; j++) {
        double acc = engine_small_to_double(&f, c[0][j]);
        for (int k = 1; k < count; k++) {
            double sum = acc + engine_small_to_double(&f, c[k][j]);
            acc = engine_small_to_double(&f, engine_round_double_nearest_any(&f, sum));
        }
        uint64_t bits = engine_round_double_nearest_any(&f, acc);
        if (average && acc != 0 && engine_is_finite(acc))
            bits = engine_round_quotient(&f, acc, count, REPROD_ROUND_NEAREST);
        result[j] = (uint16_t)bits;
    }
}

/* The ordered product, element by element with the GPU kernels' arithmetic. */
static void ordered_product(reprod_type type, const void *const *contributions, int count,
                            size_t element_count, void *result)
{
    for (size_t j = 0; j < element_count; j++)
        engine_store_bits(type, result, j,
                          engine_ordered_element(type, REPROD_PROD, contributions, count, j));
}

REPROD_EXPORT int reprod_reduce_ordered(reprod_type type, reprod_op op,
                                        const void *const contributions[], int contribution_count,
                                        size_t element_count, void *result)
{
    if (!arguments_valid(type, op, contributions, contribution_count, element_count, result, 1))
        return REPROD_EINVAL;
    if (element_count == 0) return REPROD_OK;
    engine_environment saved;
    environment_enter(&saved);
    int average = op == REPROD_AVG;
    if (op == REPROD_PROD) /* element by element (products are rare): engine_ordered.h */
        ordered_product(type, contributions, contribution_count, element_count, result);
    else if (type == REPROD_FLOAT32)
        ordered_fold_float((const float *const *)contributions, contribution_count, element_count,
                           (float *)result, average);
    else if (type == REPROD_FLOAT64)
        ordered_fold_double((const double *const *)contributions, contribution_count, element_count,
                            (double *)result, average);
    else
        ordered_small(type, average, (const uint16_t *const *)contributions, contribution_count,
                      element_count, (uint16_t *)result);
    environment_leave(&saved);
    return REPROD_OK;
}
