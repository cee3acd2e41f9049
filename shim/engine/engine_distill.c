/* engine_distill.c: the distillation tier (engine_inner.h: DISTILLED, MIDPOINT) on vectors of
 * the lanes a binary64 kernel's first pass refused.
 *
 * A binary64 kernel's first pass refuses an element when neither the exact-errors test nor the
 * certified rounding decides it: heavy cancellation, or t too coarse. Done one element at a time
 * (the general path) that costs tens to hundreds of nanoseconds an element: the cliff. Here the
 * refused lanes of a kernel's block (8 or 16 elements) are distilled together on vectors: the N
 * terms of each lane are loaded once (or taken from the errors the kernel kept), the cascade
 * runs over them in place pass after pass, and after each pass the certified rounding, the
 * exact-errors test and the midpoint rule decide the lanes they can, each by engine_inner.h's
 * own function run lane by lane (engine_lanes.h); what is left after ENGINE_DISTILL_PASSES
 * takes the general path. Every lane does the same work (no branch between elements), so which
 * tier decides a lane never depends on the kernel level (tests/unit/test_engine.c and the
 * fuzzer check it). The binary32 tiers beyond the window are engine_beyond_window.c's.
 */
#include "engine/engine_lanes.h"

/* The midpoint rule on the distilled v[0..count-1][g], count >= 3 (engine_midpoint_of,
 * lane-wise): where it applies, the lanes' (s, t). */
ALWAYS_INLINE distill_mask distill_midpoint(distill_vector (*v)[DISTILL_GROUPS], int count, int g,
                                            distill_vector *s, distill_vector *t)
{
    distill_vector rest = {0}, rest_abs = {0};
    for (int k = 0; k < count - 2; k++) {
        rest += v[k][g];
        rest_abs += lanes_abs(v[k][g]);
    }
    return lanes_midpoint(v[count - 1][g], v[count - 2][g], rest, rest_abs, count, s, t);
}

/* One pass's verdict on the `open` lanes of group g, whose cascade left (s, t, error_sum) and
 * the distilled terms v: the lanes it decides, in engine_distill_element's order (the certified
 * rounding; the exact-errors test on the errors the pass left; the midpoint rule), with their
 * (s, t) into *s_done, *t_done. The later tests run only when a lane is still open. */
ALWAYS_INLINE distill_mask distill_judge(const int level, distill_vector (*v)[DISTILL_GROUPS],
                                         int count, int g, reprod_rounding dir, distill_vector s,
                                         distill_vector t, distill_vector error_sum,
                                         distill_mask open, distill_vector *s_done,
                                         distill_vector *t_done)
{
    const distill_mask finite = lanes_finite(level, s + t);
    distill_mask decided =
        lanes_rounding_certified(level, s, t, error_sum, count, dir) & finite & open;
    if (distill_bits(&open) != distill_bits(&decided)) {
        decided |=
            lanes_errors_exact(level, error_sum, lanes_errors_low(v, count, g)) & finite & open;
        if (distill_bits(&open) != distill_bits(&decided) && count >= 3) {
            distill_vector s_tie, t_tie;
            distill_mask tie = distill_midpoint(v, count, g, &s_tie, &t_tie) & finite & open;
            tie &= ~decided;
            lanes_select(&s, s_tie, tie);
            lanes_select(&t, t_tie, tie);
            decided |= tie;
        }
    }
    lanes_select(s_done, s, decided);
    lanes_select(t_done, t, decided);
    return decided;
}

/* The tier for `groups` vectors of lanes from element j (a literal at each use, so the loops
 * over them unroll into independent chains that hide the adders' latency): the lanes in
 * `refused` get their bits in out[lane], by the tier or the general path. */
ALWAYS_INLINE void distill_body(const int level, reprod_op op, reprod_rounding dir,
                                const void *const *contributions, int count, size_t j,
                                const int groups, uint32_t refused, double *prepared, uint64_t *out,
                                struct engine_accumulator *a, size_t *general)
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
        for (int pass = prepared ? 1 : 0; pass <= ENGINE_DISTILL_PASSES && undecided; pass++) {
            distill_vector s[DISTILL_GROUPS], t[DISTILL_GROUPS], error_sum[DISTILL_GROUPS];
            lanes_cascade_pass(v, count, groups, s, t, error_sum);
            if (pass == 0) continue; /* the kernel's own first pass was refused already */
            undecided = 0;
            _Pragma("GCC unroll 2") for (int g = 0; g < groups; g++)
            {
                open[g] &= ~distill_judge(level, v, count, g, dir, s[g], t[g], error_sum[g],
                                          open[g], &s_done[g], &t_done[g]);
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
            distill_mask nonzero = ~((((distill_mask)sum & ENGINE_MAGNITUDE) - 1) >> 63);
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

/* engine_distill_float64_fn for any level: two groups when both halves of 16 lanes have refused
 * lanes, else the one group that has. */
ALWAYS_INLINE void distill_float64(const int level, reprod_op op, reprod_rounding dir,
                                   const void *const *contributions, int count, size_t j, int lanes,
                                   uint32_t refused, double *prepared, uint64_t *out,
                                   struct engine_accumulator *a, size_t *general)
{
    if (lanes == 16 && (refused & 0xff) && (refused >> 8))
        distill_body(level, op, dir, contributions, count, j, 2, refused, prepared, out, a,
                     general);
    else if (lanes == 8 || (refused & 0xff)) /* one vector's lanes: one group */
        distill_body(level, op, dir, contributions, count, j, 1, refused & 0xff, prepared, out, a,
                     general);
    else
        distill_body(level, op, dir, contributions, count, j + 8, 1, refused >> 8,
                     prepared ? prepared + 8 : NULL, out + 8, a, general);
}

DISTILL_AVX512 void engine_distill_float64_avx512(reprod_op op, reprod_rounding dir,
                                                  const void *const *contributions, int count,
                                                  size_t j, int lanes, uint32_t refused,
                                                  double *prepared, uint64_t *out,
                                                  struct engine_accumulator *a, size_t *general)
{
    distill_float64(LEVEL_AVX512, op, dir, contributions, count, j, lanes, refused, prepared, out,
                    a, general);
}

DISTILL_AVX2 void engine_distill_float64_avx2(reprod_op op, reprod_rounding dir,
                                              const void *const *contributions, int count, size_t j,
                                              int lanes, uint32_t refused, double *prepared,
                                              uint64_t *out, struct engine_accumulator *a,
                                              size_t *general)
{
    distill_float64(LEVEL_AVX2, op, dir, contributions, count, j, lanes, refused, prepared, out, a,
                    general);
}

void engine_distill_float64_generic(reprod_op op, reprod_rounding dir,
                                    const void *const *contributions, int count, size_t j,
                                    int lanes, uint32_t refused, double *prepared, uint64_t *out,
                                    struct engine_accumulator *a, size_t *general)
{
    distill_float64(LEVEL_GENERIC, op, dir, contributions, count, j, lanes, refused, prepared, out,
                    a, general);
}
