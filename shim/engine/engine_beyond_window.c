/* engine_beyond_window.c: binary32 and bfloat16 elements beyond the fast path's window, on
 * vectors (engine_inner.h: BRACKET, SPLIT, CASCADE): the lanes a kernel's span check refused,
 * or whole chunks that a kernel expects mostly beyond its window.
 *
 * A block of 8 or 16 lanes goes through the tiers in engine_exact_beyond_window's order: the
 * bracket around the plain sums, the split sums, the cascade with distillation; each decides
 * the lanes it can, every decision made by engine_inner.h's own function, run lane by lane
 * (engine_lanes.h); what is left takes the general path. A decided lane's exact sum S + T is
 * rounded through its odd neighbour: by the hardware's conversion (binary32) or in the integers
 * (bfloat16) when rounding a nonzero sum to nearest, by engine_float32_finish otherwise. Every
 * lane does the same work, so which tier decides a lane never depends on the kernel level
 * (tests/unit/test_engine.c and the fuzzer check it). One exception upstream of these tiers:
 * the 16- and 32-bit kernels accept any chunk whose binary64 sums the inexact flag shows exact,
 * which the per-element path may have sent to the general path (2^127 - 2^127 + 2^-126 in
 * bfloat16): the same bits, another count.
 */
#include "engine/engine_lanes.h"

/* What a tier body is compiled for: literals at each use, so that every copy is specialised. */
struct lanes_shape {
    int level;        /* LEVEL_GENERIC, LEVEL_AVX2 or LEVEL_AVX512 */
    reprod_type type; /* REPROD_FLOAT32 or REPROD_BFLOAT16 */
    int groups;       /* vectors of 8 lanes: 1 or 2 */
};

/* A block of lanes on its way through the tiers. */
struct beyond_block {
    reprod_op op;
    reprod_rounding dir;
    const void *const *contributions;
    int count;                            /* N >= 1 */
    size_t j;                             /* the block's first element */
    wide32_bits largest[DISTILL_GROUPS];  /* per lane: its terms' largest binary32 magnitude bits */
    wide32_bits smallest[DISTILL_GROUPS]; /* ... smallest nonzero ones minus one (zeros: all 1s) */
    distill_mask open[DISTILL_GROUPS];    /* the lanes no tier has decided yet */
    uint32_t undecided;                   /* `open` as bits (bit l: element j + l) */
    distill_vector S[DISTILL_GROUPS];     /* a decided lane's exact sum S + T */
    distill_vector T[DISTILL_GROUPS];
    struct engine_accumulator *a;       /* for the general path */
    size_t *general;                    /* elements the general path took */
    struct engine_bracket_rule bracket; /* the call's parameters of the tests (once a call) */
    struct engine_split_rule split;
};

/* ---- BRACKET (i) -------------------------------------------------------------------------- */

/* The plain sums (engine_bracket_plain_sum) of `groups` vectors from element j into s[g]: the
 * even and the odd terms of each group in two chains, as the per-element order has them (and
 * the binary32 kernels' binary64 sums); four chains hide the adders' latency. */
ALWAYS_INLINE void bracket_plain_sums(const struct lanes_shape *shape,
                                      const void *const *contributions, int count, size_t j,
                                      distill_vector *s)
{
    const distill_vector negative_zero = {-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0};
    distill_vector even[DISTILL_GROUPS] = {negative_zero, negative_zero};
    distill_vector odd[DISTILL_GROUPS] = {negative_zero, negative_zero};
    int k = 0;
    for (; k + 2 <= count; k += 2)
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            distill_vector x, y;
            wide32_load_terms(shape->level, shape->type, contributions[k], j + DISTILL_WIDTH * g,
                              &x);
            wide32_load_terms(shape->level, shape->type, contributions[k + 1],
                              j + DISTILL_WIDTH * g, &y);
            even[g] += x;
            odd[g] += y;
        }
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
    {
        if (k < count) {
            distill_vector x;
            wide32_load_terms(shape->level, shape->type, contributions[k], j + DISTILL_WIDTH * g,
                              &x);
            even[g] += x;
        }
        s[g] = even[g] + odd[g];
    }
}

/* The bracket's verdict (engine_bracket_decides, lane by lane) on the plain sums s[g] of lanes
 * whose terms' largest magnitude bits are largest[g]: all ones in bracketed[g] where it
 * decides an `open` lane; those lanes as bits. */
ALWAYS_INLINE uint32_t bracket_lanes(const struct lanes_shape *shape,
                                     const struct engine_bracket_rule *rule, reprod_op op,
                                     int count, const distill_vector *s, const wide32_bits *largest,
                                     const distill_mask *open, distill_mask *bracketed)
{
    uint32_t decided = 0;
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
    {
        distill_mask high = lanes_widen_bits(shape->level, largest[g]);
        bracketed[g] = op == REPROD_AVG
                           ? lanes_bracket_decides(shape->level, rule, 1, count, s[g], high)
                           : lanes_bracket_decides(shape->level, rule, 0, count, s[g], high);
        bracketed[g] &= open[g];
        decided |= distill_bits_at(shape->level, &bracketed[g]) << (DISTILL_WIDTH * g);
    }
    return decided;
}

/* The bracket for the block's open lanes, from their plain sums at `sums` (NULL: summed here):
 * the lanes it decides get S = the plain sum (T stays 0) and leave `open`. Returns them. */
ALWAYS_INLINE uint32_t beyond_try_bracket(const struct lanes_shape *shape, struct beyond_block *b,
                                          const double *sums)
{
    if (!b->undecided || b->count < 1) return 0;
    distill_vector s[DISTILL_GROUPS];
    distill_mask bracketed[DISTILL_GROUPS];
    if (sums)
        memcpy(s, sums, (size_t)shape->groups * sizeof s[0]);
    else
        bracket_plain_sums(shape, b->contributions, b->count, b->j, s);
    uint32_t decided;
    if (b->dir == REPROD_ROUND_NEAREST) { /* the direction a constant: the compiler folds it */
        const struct engine_bracket_rule nearest =
            engine_bracket_rule_of(shape->type, REPROD_ROUND_NEAREST, b->count);
        decided =
            bracket_lanes(shape, &nearest, b->op, b->count, s, b->largest, b->open, bracketed);
    } else {
        decided =
            bracket_lanes(shape, &b->bracket, b->op, b->count, s, b->largest, b->open, bracketed);
    }
    if (decided) _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            lanes_select(&b->S[g], s[g], bracketed[g]);
            b->open[g] &= ~bracketed[g];
        }
    b->undecided &= ~decided;
    return decided;
}

/* ---- SPLIT (h) ---------------------------------------------------------------------------- */

/* The split when every lane takes one level: five operations a term, and the chain is the one
 * TwoSum of the two accumulators (it never fails). */
ALWAYS_INLINE void split_one_level(const struct lanes_shape *shape,
                                   const void *const *contributions, int count, size_t j,
                                   const distill_vector *sigma, distill_vector *S,
                                   distill_vector *T)
{
    distill_vector hi[DISTILL_GROUPS] = {{0}}, lo[DISTILL_GROUPS] = {{0}};
    for (int k = 0; k < count; k++)
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            distill_vector x, q, r;
            wide32_load_terms(shape->level, shape->type, contributions[k], j + DISTILL_WIDTH * g,
                              &x);
            /* 5 additions, 3 of them as FMAs: both kinds of unit busy (Zen 4) */
            distill_add_fma(shape->level, &x, &sigma[g], &q);
            q -= sigma[g];
            r = x - q;
            distill_add_fma(shape->level, &q, &hi[g], &hi[g]);
            distill_add_fma(shape->level, &r, &lo[g], &lo[g]);
        }
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
    {
        distill_vector sum = hi[g] + lo[g], w = sum - hi[g];
        S[g] = sum;
        T[g] = (hi[g] - (sum - w)) + (lo[g] - w);
    }
}

/* The split with `levels` levels for every lane (a literal at each use, so that the accumulators
 * stay in registers): the accumulators (engine_split_sums lane-wise; a lane that takes fewer levels
 * has sigma 0 at the rest, engine_split_next_sigma), then the chain, which clears fits[g]
 * where it cannot tell. */
ALWAYS_INLINE void split_levels(const struct lanes_shape *shape, const void *const *contributions,
                                int count, size_t j, const int levels,
                                const struct engine_split_rule *rule, const distill_vector *sigma,
                                const distill_mask *span, distill_mask *fits, distill_vector *S,
                                distill_vector *T)
{
    distill_vector sigmas[ENGINE_SPLIT_LEVELS][DISTILL_GROUPS];
    distill_vector hi[ENGINE_SPLIT_LEVELS][DISTILL_GROUPS], lo[DISTILL_GROUPS];
    _Pragma("GCC unroll 5") for (int i = 0; i < levels; i++)
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
    {
        sigmas[i][g] =
            i == 0 ? sigma[g] : lanes_split_next_sigma(rule, sigmas[i - 1][g], span[g], i);
        hi[i][g] = (distill_vector){0};
    }
    lo[0] = lo[1] = (distill_vector){0};
    for (int k = 0; k < count; k++)
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            distill_vector r;
            wide32_load_terms(shape->level, shape->type, contributions[k], j + DISTILL_WIDTH * g,
                              &r);
            _Pragma("GCC unroll 5") for (int i = 0; i < levels; i++)
            {
                distill_vector q;
                distill_add_fma(shape->level, &r, &sigmas[i][g], &q);
                q -= sigmas[i][g];
                r -= q;
                distill_add_fma(shape->level, &q, &hi[i][g], &hi[i][g]);
            }
            distill_add_fma(shape->level, &r, &lo[g], &lo[g]);
        }
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++) fits[g] &=
        lanes_split_chain(hi, levels, g, lo[g], &S[g], &T[g]);
}

/* The largest of the lanes of x (values >= 0), without comparisons. */
ALWAYS_INLINE int64_t lanes_max(distill_mask x)
{
    distill_mask y = __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3), step = y - x;
    x += step & ~(step >> 63);
    y = __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5), step = y - x;
    x += step & ~(step >> 63);
    y = __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6), step = y - x;
    x += step & ~(step >> 63);
    return x[0];
}

/* The split for a block where some lane takes several levels: each open lane in reach takes the
 * fewest whose limit its span fits (engine_split_levels_for), the block the most
 * any of them takes, compiled for two, three and five levels (four run as five, sigma 0 at the
 * fifth: one loop less to compile). All ones in fits[g] where it applies and the chain tells,
 * S + T there; those lanes as bits. */
ALWAYS_INLINE uint32_t split_deep_body(const struct lanes_shape *shape,
                                       const void *const *contributions, int count, size_t j,
                                       const struct engine_split_rule *rule,
                                       const distill_vector *sigma, const distill_mask *span,
                                       const distill_mask *open, distill_mask *fits,
                                       distill_vector *S, distill_vector *T)
{
    int64_t levels = 2;
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
    {
        wide32_int span32, levels32;
        distill_narrow(shape->level, &span[g], &span32);
        levels32 = lanes_split_levels(rule, span32);
        distill_mask lane_levels;
        distill_widen(shape->level, &levels32, &lane_levels);
        fits[g] = ~((lane_levels - 1) >> 63) & open[g]; /* in reach: some level fits */
        int64_t most = lanes_max(lane_levels & fits[g]);
        levels = most > levels ? most : levels;
    }
    if (levels == 2)
        split_levels(shape, contributions, count, j, 2, rule, sigma, span, fits, S, T);
    else if (levels == 3)
        split_levels(shape, contributions, count, j, 3, rule, sigma, span, fits, S, T);
    else
        split_levels(shape, contributions, count, j, ENGINE_SPLIT_LEVELS, rule, sigma, span, fits,
                     S, T);
    uint32_t split = 0;
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++) split |=
        distill_bits_at(shape->level, &fits[g]) << (DISTILL_WIDTH * g);
    return split;
}

/* Inline in every tier and chunk body: out of line, the one-level path around the call ran
 * 6-7% slower. Under the sanitizers out of line, one copy per level, type and group count:
 * their instrumentation of the many inlined copies made the file compile six times as long
 * (107 s under ASan and UBSan, against 37 s). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPLIT_DEEP_APART(name, target, level, type, groups)                                        \
    target __attribute__((noinline)) static uint32_t name(                                         \
        const void *const *contributions, int count, size_t j,                                     \
        const struct engine_split_rule *rule, const distill_vector *sigma,                         \
        const distill_mask *span, const distill_mask *open, distill_mask *fits, distill_vector *S, \
        distill_vector *T)                                                                         \
    {                                                                                              \
        static const struct lanes_shape shape = {level, type, groups};                             \
        return split_deep_body(&shape, contributions, count, j, rule, sigma, span, open, fits, S,  \
                               T);                                                                 \
    }
SPLIT_DEEP_APART(split_deep_avx512_2, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32, 2)
SPLIT_DEEP_APART(split_deep_avx512_1, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32, 1)
SPLIT_DEEP_APART(split_deep_avx2_2, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32, 2)
SPLIT_DEEP_APART(split_deep_avx2_1, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32, 1)
SPLIT_DEEP_APART(split_deep_generic_2, , LEVEL_GENERIC, REPROD_FLOAT32, 2)
SPLIT_DEEP_APART(split_deep_generic_1, , LEVEL_GENERIC, REPROD_FLOAT32, 1)
SPLIT_DEEP_APART(split_deep_bfloat16_avx512_2, DISTILL_AVX512, LEVEL_AVX512, REPROD_BFLOAT16, 2)
SPLIT_DEEP_APART(split_deep_bfloat16_avx2_2, DISTILL_AVX2, LEVEL_AVX2, REPROD_BFLOAT16, 2)
#undef SPLIT_DEEP_APART
#define SPLIT_DEEP_OUT_OF_LINE 1
#else
#define SPLIT_DEEP_OUT_OF_LINE 0
#endif

/* split_deep_body, or its copy for the caller's level, type and group count. */
ALWAYS_INLINE uint32_t split_deep(const struct lanes_shape *shape, const void *const *contributions,
                                  int count, size_t j, const struct engine_split_rule *rule,
                                  const distill_vector *sigma, const distill_mask *span,
                                  const distill_mask *open, distill_mask *fits, distill_vector *S,
                                  distill_vector *T)
{
#if SPLIT_DEEP_OUT_OF_LINE
#define SPLIT_DEEP_CALL(name) name(contributions, count, j, rule, sigma, span, open, fits, S, T)
    if (shape->type == REPROD_BFLOAT16)
        return shape->level == LEVEL_AVX512 ? SPLIT_DEEP_CALL(split_deep_bfloat16_avx512_2)
                                            : SPLIT_DEEP_CALL(split_deep_bfloat16_avx2_2);
    if (shape->level == LEVEL_AVX512)
        return shape->groups > 1 ? SPLIT_DEEP_CALL(split_deep_avx512_2)
                                 : SPLIT_DEEP_CALL(split_deep_avx512_1);
    if (shape->level == LEVEL_AVX2)
        return shape->groups > 1 ? SPLIT_DEEP_CALL(split_deep_avx2_2)
                                 : SPLIT_DEEP_CALL(split_deep_avx2_1);
    return shape->groups > 1 ? SPLIT_DEEP_CALL(split_deep_generic_2)
                             : SPLIT_DEEP_CALL(split_deep_generic_1);
#undef SPLIT_DEEP_CALL
#else
    return split_deep_body(shape, contributions, count, j, rule, sigma, span, open, fits, S, T);
#endif
}

/* The split lane by lane (engine_float32_exact_sum's first half) for the `open` lanes of `groups`
 * vectors from element j, given per lane its terms' largest magnitude bits and smallest nonzero
 * ones minus one: all ones in fits[g] where the split applies and its chain tells, S + T there;
 * those lanes as bits. A block runs the most levels any of its lanes takes
 * (engine_split_levels_for). */
ALWAYS_INLINE uint32_t split_lanes(const struct lanes_shape *shape,
                                   const struct engine_split_rule *rule,
                                   const void *const *contributions, int count, size_t j,
                                   const wide32_bits *largest, const wide32_bits *smallest,
                                   const distill_mask *open, distill_mask *fits, distill_vector *S,
                                   distill_vector *T)
{
    distill_vector sigma[DISTILL_GROUPS];
    distill_mask span[DISTILL_GROUPS];
    uint32_t split = 0, deeper = 0;
    _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
    {
        wide32_int span32, field32;
        wide32_int one32 =
            lanes_split_plan(shape->level, rule, largest[g], smallest[g], &span32, &field32);
        wide32_int several32 = ~one32 & ((span32 - 4096) >> 31); /* finite terms, not one */
        distill_mask one, several, field;
        distill_widen(shape->level, &one32, &one);
        distill_widen(shape->level, &several32, &several);
        distill_widen(shape->level, &span32, &span[g]);
        distill_widen(shape->level, &field32, &field);
        sigma[g] = (distill_vector)(field << 52); /* engine_split_sigma */
        fits[g] = one & open[g];
        several &= open[g];
        split |= distill_bits_at(shape->level, &fits[g]) << (DISTILL_WIDTH * g);
        deeper |= distill_bits_at(shape->level, &several);
    }
    if (!split && !deeper) return 0;
    if (!deeper) {
        split_one_level(shape, contributions, count, j, sigma, S, T);
        return split;
    }
    return split_deep(shape, contributions, count, j, rule, sigma, span, open, fits, S, T);
}

/* The split for the block's open lanes: the lanes it decides get its S + T and leave `open`. */
ALWAYS_INLINE void beyond_try_split(const struct lanes_shape *shape, struct beyond_block *b)
{
    if (!b->undecided || b->count < 1) return;
    distill_mask fits[DISTILL_GROUPS];
    distill_vector S[DISTILL_GROUPS], T[DISTILL_GROUPS];
    uint32_t split = split_lanes(shape, &b->split, b->contributions, b->count, b->j, b->largest,
                                 b->smallest, b->open, fits, S, T);
    if (split) _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            lanes_select(&b->S[g], S[g], fits[g]);
            lanes_select(&b->T[g], T[g], fits[g]);
            b->open[g] &= ~fits[g];
        }
    b->undecided &= ~split;
}

/* ---- CASCADE (g) -------------------------------------------------------------------------- */

/* The binary64 cascade over the terms of the block's open lanes (engine_float32_exact_sum's
 * second half): its first pass straight from the terms, judged by the exact-errors test on the
 * terms' smallest binary32 ulp, then up to ENGINE_DISTILL_PASSES distilling passes judged on
 * the errors they leave; engine_cascade_decided says where a pass decides. */
ALWAYS_INLINE void beyond_try_cascade(const struct lanes_shape *shape, struct beyond_block *b)
{
    const int count = b->count;
    if (!b->undecided || count < 1 || count > ENGINE_DISTILL_TERMS) return;
    distill_vector v[ENGINE_DISTILL_TERMS][DISTILL_GROUPS];
    distill_vector s[DISTILL_GROUPS], t[DISTILL_GROUPS], error_sum[DISTILL_GROUPS];
    distill_vector s0 = {0}, t0 = {0}, error_sum0 = {0}, s1 = {0}, t1 = {0}, error_sum1 = {0};
    for (int k = 0; k < count; k++) { /* the first pass, converting the terms as they come */
        distill_vector term0, term1;
        wide32_load_terms(shape->level, shape->type, b->contributions[k], b->j, &term0);
        term1 = term0;
        if (shape->groups > 1)
            wide32_load_terms(shape->level, shape->type, b->contributions[k], b->j + DISTILL_WIDTH,
                              &term1);
        if (k == 0) {
            s0 = term0;
            s1 = term1;
            continue;
        }
        lanes_cascade_step(&s0, &t0, &error_sum0, term0, &v[k - 1][0]);
        if (shape->groups > 1) lanes_cascade_step(&s1, &t1, &error_sum1, term1, &v[k - 1][1]);
    }
    v[count - 1][0] = s0;
    v[count - 1][shape->groups - 1] = shape->groups > 1 ? s1 : s0;
    s[0] = s0, t[0] = t0, error_sum[0] = error_sum0;
    s[1] = s1, t[1] = t1, error_sum[1] = error_sum1;
    for (int pass = 0; pass <= ENGINE_DISTILL_PASSES && b->undecided; pass++) {
        if (pass > 0) lanes_cascade_pass(v, count, shape->groups, s, t, error_sum);
        b->undecided = 0;
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            distill_mask exact =
                pass == 0
                    ? lanes_errors_exact_float32(shape->level, error_sum[g],
                                                 lanes_widen_bits(shape->level, b->smallest[g]))
                    : lanes_errors_exact(shape->level, error_sum[g], lanes_errors_low(v, count, g));
            distill_vector S, T;
            distill_mask decided =
                lanes_cascade_decided(s[g], t[g], error_sum[g], count, exact, &S, &T) & b->open[g];
            lanes_select(&b->S[g], S, decided);
            lanes_select(&b->T[g], T, decided);
            b->open[g] &= ~decided;
            b->undecided |= distill_bits(&b->open[g]) << (DISTILL_WIDTH * g);
        }
    }
}

/* ---- Rounding ----------------------------------------------------------------------------- */

/* The binary32 nearest rounding of exact sums S + T (|T| at most half an ulp of S): round to
 * odd (engine_round_to_odd), then the hardware's conversion; all ones in *nonzero where S is
 * not zero (a zero sum's sign needs the terms: engine_float32_finish). */
ALWAYS_INLINE void round_nearest_float32(const int level, distill_vector S, const distill_vector *T,
                                         wide32_floats *rounded, distill_mask *nonzero)
{
    distill_vector odd = T ? lanes_round_to_odd(level, S, *T) : S;
    distill_to_floats(level, &odd, rounded);
    *nonzero = ~((((distill_mask)S & ENGINE_MAGNITUDE) - 1) >> 63);
}

/* The bfloat16 nearest rounding of exact sums S + T: round to odd, then
 * engine_bfloat16_nearest; all ones in *normal where the result is normal (zero sums and
 * results below the normal range are left to engine_float32_finish). */
ALWAYS_INLINE void round_nearest_bfloat16(const int level, distill_vector S,
                                          const distill_vector *T, wide32_int *rounded,
                                          distill_mask *normal)
{
    distill_vector odd = T ? lanes_round_to_odd(level, S, *T) : S;
    distill_mask bits = lanes_bfloat16_nearest(level, odd, normal);
    distill_narrow(level, &bits, rounded);
}

/* The results of the block's lanes in `refused` into out[lane]: a decided lane rounds its
 * S + T (by vector for a nonzero sum to nearest, engine_float32_finish otherwise), an undecided
 * one takes the general path. Only those lanes of `out` are written. */
ALWAYS_INLINE void beyond_round(const struct lanes_shape *shape, struct beyond_block *b,
                                uint32_t refused, uint32_t *out)
{
    uint32_t decided = refused & ~b->undecided, plain = 0;
    const int nearest_sum = b->op == REPROD_SUM && b->dir == REPROD_ROUND_NEAREST;
    const wide32_int lane_bit = {1, 2, 4, 8, 16, 32, 64, 128};
    if (nearest_sum && decided) {
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            wide32_int rounded, previous;
            distill_mask done;
            if (shape->type == REPROD_BFLOAT16) {
                round_nearest_bfloat16(shape->level, b->S[g], &b->T[g], &rounded, &done);
            } else {
                wide32_floats floats;
                round_nearest_float32(shape->level, b->S[g], &b->T[g], &floats, &done);
                memcpy(&rounded, &floats, sizeof rounded);
            }
            uint32_t lanes = distill_bits(&done) & (decided >> (DISTILL_WIDTH * g));
            /* only those lanes: the caller may have written the others already */
            wide32_int keep = (0 - (((wide32_int){0} + (int32_t)lanes) & lane_bit)) >> 31;
            memcpy(&previous, out + DISTILL_WIDTH * g, sizeof previous);
            previous = (rounded & keep) | (previous & ~keep);
            memcpy(out + DISTILL_WIDTH * g, &previous, sizeof previous);
            plain |= lanes << (DISTILL_WIDTH * g);
        }
    }
    for (uint32_t rest = refused & ~plain; rest; rest &= rest - 1) {
        int lane = __builtin_ctz(rest);
        size_t index = b->j + (size_t)lane;
        uint64_t bits;
        if (((decided >> lane) & 1) &&
            engine_float32_finish(shape->type, b->op, b->dir,
                                  b->S[lane / DISTILL_WIDTH][lane % DISTILL_WIDTH],
                                  b->T[lane / DISTILL_WIDTH][lane % DISTILL_WIDTH],
                                  b->contributions, b->count, index, &bits))
            out[lane] = (uint32_t)bits;
        else
            out[lane] = (uint32_t)engine_exact_element(shape->type, b->op, b->dir, b->contributions,
                                                       b->count, index, 1, b->a, b->general);
    }
}

/* ---- A block through every tier ----------------------------------------------------------- */

/* The block's call (fields one by one: an initialiser would clear the whole block, through a
 * call to memset). */
ALWAYS_INLINE void beyond_call(const struct lanes_shape *shape, struct beyond_block *b,
                               reprod_op op, reprod_rounding dir, const void *const *contributions,
                               int count, size_t j, struct engine_accumulator *a, size_t *general)
{
    b->bracket = engine_bracket_rule_of(shape->type, dir, count);
    b->split = engine_split_rule_of(shape->type, count);
    b->op = op;
    b->dir = dir;
    b->contributions = contributions;
    b->count = count;
    b->j = j;
    b->a = a;
    b->general = general;
}

/* The block's lanes in `refused` open, nothing decided; per lane its terms' largest magnitude
 * bits and smallest nonzero ones minus one, from `largest` and `smallest` (indexed from the
 * block's first element) or, when NULL, from the terms. */
ALWAYS_INLINE void beyond_start(const struct lanes_shape *shape, struct beyond_block *b,
                                uint32_t refused, const uint32_t *largest, const uint32_t *smallest)
{
    b->undecided = refused;
    b->largest[0] = b->largest[1] = (wide32_bits){0};
    b->smallest[0] = b->smallest[1] = (wide32_bits){0} + 0x7fffffff;
    _Pragma("GCC unroll 2") for (int g = 0; g < DISTILL_GROUPS; g++)
    {
        b->S[g] = b->T[g] = (distill_vector){0};
        distill_lanes(refused >> (DISTILL_WIDTH * g), &b->open[g]);
    }
    if (largest) _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            memcpy(&b->largest[g], largest + DISTILL_WIDTH * g, sizeof b->largest[g]);
            memcpy(&b->smallest[g], smallest + DISTILL_WIDTH * g, sizeof b->smallest[g]);
        }
    for (int k = 0; k < b->count && !largest; k++)
        _Pragma("GCC unroll 2") for (int g = 0; g < shape->groups; g++)
        {
            wide32_bits bits;
            wide32_load_bits(shape->type, b->contributions[k], b->j + DISTILL_WIDTH * g, &bits);
            /* engine_max_magnitude32 and engine_min_less_one32, lane-wise; below 2^31 both:
             * differences are exact as int32 */
            wide32_bits magnitude = bits & 0x7fffffff, less_one = (bits - 1) & 0x7fffffff;
            wide32_bits up = magnitude - b->largest[g], down = less_one - b->smallest[g];
            b->largest[g] += up & ~(wide32_bits)((wide32_int)up >> 31);
            b->smallest[g] += down & (wide32_bits)((wide32_int)down >> 31);
        }
}

/* Binary32 (or bfloat16) lanes beyond the fast path's window, the block `b` (beyond_start):
 * the bracket, the split and the cascade, then the rounding (engine_exact_beyond_window, lane
 * by lane); the lanes in `refused` get their results in out[lane]. `sums`: NULL, or the lanes'
 * plain sums for the bracket. The bracket runs before the split when bracket_first, else after
 * it for the lanes the split leaves: for a sum the lanes decided are the same, only the work
 * differs (not for an average: the split's inexact S + T leaves a lane to the general path
 * that the bracket would decide, so averages take the bracket first). Returns the lanes the
 * bracket decided when it ran first. */
ALWAYS_INLINE uint32_t beyond_window_block(const struct lanes_shape *shape, struct beyond_block *b,
                                           uint32_t refused, const double *sums, int bracket_first,
                                           uint32_t *out)
{
    uint32_t bracketed = 0;
    if (bracket_first) bracketed = beyond_try_bracket(shape, b, sums);
    beyond_try_split(shape, b);
    if (!bracket_first) beyond_try_bracket(shape, b, sums);
    beyond_try_cascade(shape, b);
    beyond_round(shape, b, refused, out);
    return bracketed;
}

/* engine_beyond_window_fn for the shape's level and type (lanes: 8 or 16). */
ALWAYS_INLINE void beyond_window_lanes(const struct lanes_shape *shape, reprod_op op,
                                       reprod_rounding dir, const void *const *contributions,
                                       int count, size_t j, uint32_t refused,
                                       const uint32_t *largest, const uint32_t *smallest,
                                       const double *sums, uint32_t *out,
                                       struct engine_accumulator *a, size_t *general)
{
    struct beyond_block b;
    beyond_call(shape, &b, op, dir, contributions, count, j, a, general);
    beyond_start(shape, &b, refused, largest, smallest);
    beyond_window_block(shape, &b, refused, sums, 1, out);
}

/* ---- Whole chunks ------------------------------------------------------------------------- */

/* Blocks of a chunk that skip running the bracket first after one where it decided fewer than
 * half the lanes (cancelling data: the split decides them, and the bracket first would cost 40%
 * more there); the bracket still runs for what the split leaves. */
#define BEYOND_BRACKET_SKIP 8

/* Round a block of 16 exact sums S + T (|T| at most half an ulp of S; T NULL: zero, S rounds
 * as it is) to nearest and store
 * them at element j of `result` (of the shape's type): 1, or 0 with nothing stored when a lane
 * needs engine_float32_finish (a zero sum; bfloat16: one outside its normal range). One store
 * per half: a 64-byte copy of the pair went through the stack, and its load stalled on the two
 * 32-byte stores (store forwarding). */
ALWAYS_INLINE int store_nearest(const struct lanes_shape *shape, const distill_vector *S,
                                const distill_vector *T, void *result, size_t j)
{
    if (shape->type == REPROD_BFLOAT16) {
        typedef uint16_t halves __attribute__((vector_size(16)));
        wide32_int rounded[DISTILL_GROUPS];
        distill_mask normal[DISTILL_GROUPS];
        round_nearest_bfloat16(shape->level, S[0], T ? &T[0] : NULL, &rounded[0], &normal[0]);
        round_nearest_bfloat16(shape->level, S[1], T ? &T[1] : NULL, &rounded[1], &normal[1]);
        normal[0] &= normal[1];
        if (distill_bits_at(shape->level, &normal[0]) != 0xff) return 0;
        halves h0 = __builtin_convertvector(rounded[0], halves);
        halves h1 = __builtin_convertvector(rounded[1], halves);
        memcpy((uint16_t *)result + j, &h0, sizeof h0);
        memcpy((uint16_t *)result + j + DISTILL_WIDTH, &h1, sizeof h1);
        return 1;
    }
    wide32_floats rounded[DISTILL_GROUPS];
    distill_mask nonzero[DISTILL_GROUPS];
    round_nearest_float32(shape->level, S[0], T ? &T[0] : NULL, &rounded[0], &nonzero[0]);
    round_nearest_float32(shape->level, S[1], T ? &T[1] : NULL, &rounded[1], &nonzero[1]);
    nonzero[0] &= nonzero[1];
    if (distill_bits_at(shape->level, &nonzero[0]) != 0xff) return 0;
    memcpy((float *)result + j, &rounded[0], sizeof rounded[0]);
    memcpy((float *)result + j + DISTILL_WIDTH, &rounded[1], sizeof rounded[1]);
    return 1;
}

/* Every lane of elements [j, j + length) (a multiple of 16) of the shape's type (two groups),
 * given each lane's largest and smallest (indexed from j): a chunk the kernel expects mostly
 * beyond its window. Results go to `result` 16 at a time once their inputs are read; a block
 * that the bracket alone, or the bracket and the split together, decide whole, rounding a
 * nonzero sum (bfloat16: a normal one) to nearest, skips the rest (beyond_window_block, which
 * runs them again there). After a block where the bracket decided fewer than half the lanes,
 * the next BEYOND_BRACKET_SKIP run the split first (sums only). */
ALWAYS_INLINE void beyond_window_chunk(const struct lanes_shape *shape, reprod_op op,
                                       reprod_rounding dir, const void *const *contributions,
                                       int count, size_t j, size_t length, const uint32_t *largest,
                                       const uint32_t *smallest, void *result,
                                       struct engine_accumulator *a, size_t *general)
{
    const int nearest_sum = op == REPROD_SUM && dir == REPROD_ROUND_NEAREST && count >= 1;
    int skip = 0; /* blocks to go before the bracket runs first again (it decided too few) */
    /* the sums to nearest below: that rule with the direction a constant, which the compiler folds
     * into the bracket's test (engine_bracket_rounds_alike for another direction costs a select
     * and an and a lane more) */
    const struct engine_bracket_rule bracket =
        engine_bracket_rule_of(shape->type, REPROD_ROUND_NEAREST, count);
    const struct engine_split_rule split = engine_split_rule_of(shape->type, count);
    for (size_t at = 0; at < length; at += 2 * DISTILL_WIDTH) {
        /* An average takes the bracket first always: the split's inexact S + T does not serve
         * it (engine_float32_finish), and the bracket after the split sees only what it left. */
        const int bracket_first = skip == 0 || op == REPROD_AVG;
        skip -= skip > 0;
        distill_vector plain[DISTILL_GROUPS] = {{0}};
        const double *sums = NULL;
        uint32_t first = 0, stored = 0;
        if (nearest_sum) {
            wide32_bits high[DISTILL_GROUPS], low[DISTILL_GROUPS];
            memcpy(high, largest + at, sizeof high);
            memcpy(low, smallest + at, sizeof low);
            distill_mask open[DISTILL_GROUPS], bracketed[DISTILL_GROUPS] = {{0}},
                                               fits[DISTILL_GROUPS];
            distill_vector S[DISTILL_GROUPS] = {{0}}, T[DISTILL_GROUPS] = {{0}};
            const distill_vector zero[DISTILL_GROUPS] = {{0}};
            open[0] = open[1] = (distill_mask){0} - 1;
            if (bracket_first) {
                bracket_plain_sums(shape, contributions, count, j + at, plain);
                sums = (const double *)plain;
                first = bracket_lanes(shape, &bracket, op, count, plain, high, open, bracketed);
                stored = first == 0xffff && /* the bracket alone, the common case */
                         store_nearest(shape, plain, NULL, result, j + at);
                open[0] = ~bracketed[0]; /* the split for the rest: fewer lanes, levels */
                open[1] = ~bracketed[1];
            }
            /* the bracket and the split together may decide the block whole */
            if (!stored && (first | split_lanes(shape, &split, contributions, count, j + at, high,
                                                low, open, fits, S, T)) == 0xffff) {
                _Pragma("GCC unroll 2") for (int g = 0; g < DISTILL_GROUPS; g++)
                {
                    lanes_select(&S[g], plain[g], bracketed[g]);
                    lanes_select(&T[g], zero[g], bracketed[g]);
                }
                stored = store_nearest(shape, S, T, result, j + at);
            }
        }
        if (!stored) {
            uint32_t out[2 * DISTILL_WIDTH] = {0}; /* every lane written: the tier keeps others */
            struct beyond_block b;
            beyond_call(shape, &b, op, dir, contributions, count, j + at, a, general);
            /* with the same sums, the block's bracket decides what the one above did */
            beyond_start(shape, &b, 0xffff, largest + at, smallest + at);
            first = beyond_window_block(shape, &b, 0xffff, sums, bracket_first, out);
            if (shape->type == REPROD_BFLOAT16)
                for (int lane = 0; lane < 2 * DISTILL_WIDTH; lane++)
                    ((uint16_t *)result)[j + at + (size_t)lane] = (uint16_t)out[lane];
            else
                memcpy((float *)result + j + at, out, sizeof out);
        }
        if (bracket_first && __builtin_popcount(first) < DISTILL_WIDTH) skip = BEYOND_BRACKET_SKIP;
    }
}

/* ---- The entry points, one per level (engine_kernels.h) ----------------------------------- */

DISTILL_AVX512 void engine_beyond_window_avx512(reprod_op op, reprod_rounding dir,
                                                const void *const *contributions, int count,
                                                size_t j, int lanes, uint32_t refused,
                                                const uint32_t *largest, const uint32_t *smallest,
                                                const double *sums, uint32_t *out,
                                                struct engine_accumulator *a, size_t *general)
{
    static const struct lanes_shape two = {LEVEL_AVX512, REPROD_FLOAT32, 2};
    static const struct lanes_shape one = {LEVEL_AVX512, REPROD_FLOAT32, 1};
    if (lanes == 16)
        beyond_window_lanes(&two, op, dir, contributions, count, j, refused, largest, smallest,
                            sums, out, a, general);
    else
        beyond_window_lanes(&one, op, dir, contributions, count, j, refused, largest, smallest,
                            sums, out, a, general);
}

DISTILL_AVX2 void engine_beyond_window_avx2(reprod_op op, reprod_rounding dir,
                                            const void *const *contributions, int count, size_t j,
                                            int lanes, uint32_t refused, const uint32_t *largest,
                                            const uint32_t *smallest, const double *sums,
                                            uint32_t *out, struct engine_accumulator *a,
                                            size_t *general)
{
    static const struct lanes_shape two = {LEVEL_AVX2, REPROD_FLOAT32, 2};
    static const struct lanes_shape one = {LEVEL_AVX2, REPROD_FLOAT32, 1};
    if (lanes == 16)
        beyond_window_lanes(&two, op, dir, contributions, count, j, refused, largest, smallest,
                            sums, out, a, general);
    else
        beyond_window_lanes(&one, op, dir, contributions, count, j, refused, largest, smallest,
                            sums, out, a, general);
}

void engine_beyond_window_generic(reprod_op op, reprod_rounding dir,
                                  const void *const *contributions, int count, size_t j, int lanes,
                                  uint32_t refused, const uint32_t *largest,
                                  const uint32_t *smallest, const double *sums, uint32_t *out,
                                  struct engine_accumulator *a, size_t *general)
{
    static const struct lanes_shape two = {LEVEL_GENERIC, REPROD_FLOAT32, 2};
    static const struct lanes_shape one = {LEVEL_GENERIC, REPROD_FLOAT32, 1};
    if (lanes == 16)
        beyond_window_lanes(&two, op, dir, contributions, count, j, refused, largest, smallest,
                            sums, out, a, general);
    else
        beyond_window_lanes(&one, op, dir, contributions, count, j, refused, largest, smallest,
                            sums, out, a, general);
}

#define BEYOND_WINDOW_CHUNK(name, target, level, type)                                             \
    target void name(reprod_op op, reprod_rounding dir, const void *const *contributions,          \
                     int count, size_t j, size_t length, const uint32_t *largest,                  \
                     const uint32_t *smallest, void *result, struct engine_accumulator *a,         \
                     size_t *general)                                                              \
    {                                                                                              \
        static const struct lanes_shape shape = {level, type, 2};                                  \
        beyond_window_chunk(&shape, op, dir, contributions, count, j, length, largest, smallest,   \
                            result, a, general);                                                   \
    }
BEYOND_WINDOW_CHUNK(engine_beyond_window_chunk_avx512, DISTILL_AVX512, LEVEL_AVX512, REPROD_FLOAT32)
BEYOND_WINDOW_CHUNK(engine_beyond_window_chunk_avx2, DISTILL_AVX2, LEVEL_AVX2, REPROD_FLOAT32)
BEYOND_WINDOW_CHUNK(engine_beyond_window_chunk_generic, , LEVEL_GENERIC, REPROD_FLOAT32)
BEYOND_WINDOW_CHUNK(engine_beyond_window_chunk_bfloat16_avx512, DISTILL_AVX512, LEVEL_AVX512,
                    REPROD_BFLOAT16)
BEYOND_WINDOW_CHUNK(engine_beyond_window_chunk_bfloat16_avx2, DISTILL_AVX2, LEVEL_AVX2,
                    REPROD_BFLOAT16)
