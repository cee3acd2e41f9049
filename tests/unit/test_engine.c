/* test_engine.c: the exact and ordered engine against MPFR (engine_oracle.h).
 *
 * Every exact case (engine_cases.h) runs for each type, rounding direction and op in every way
 * the engine can run it: the default paths, force_general, each kernel level this CPU has, in
 * place (result == contributions[0]) and with the contributions permuted; all must give the
 * oracle's bits, and a mismatch prints every input. White-box tests pin the fast path's windows
 * (engine_inner.h) and which elements each kernel sends to the general path.
 */
#include <criterion/criterion.h>

#include "engine_cases.h"
#include "engine/engine_fixed.h" /* the wire's element functions, as the kernels run them */
#include "engine/engine_ordered.h"

#include <fenv.h>
#include <stdlib.h>
#include <xmmintrin.h>

/* ---- Tests ------------------------------------------------------------------------------ */

static const int some_n[] = {1, 2, 3, 5, 8, 9, 16, 33};

static void run_all_types(const char *label, generator *gen, size_t count, uint64_t seed)
{
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof some_n / sizeof some_n[0]; s++)
            run_generated(label, (reprod_type)t, some_n[s], count, gen, seed);
}

/* Any of the generators above, chosen per element. */
static void gen_mixed(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    static generator *const all[] = {gen_similar,       gen_wide,       gen_cancel,
                                     gen_zeros,         gen_ties,       gen_subnormal,
                                     gen_overflow,      gen_specials,   gen_big_cancel,
                                     gen_quotient_ties, gen_window_edge};
    all[rng_range(r, 0, (int)(sizeof all / sizeof all[0]) - 1)](f, r, n, terms);
}

Test(engine, exact_matches_mpfr_on_many_mixed_random_elements)
{
    for (int t = 0; t < ALL_TYPES; t++)
        for (int trial = 0; trial < 12; trial++) {
            struct rng r = {1000 + (uint64_t)trial};
            int n = rng_range(&r, 1, 40);
            run_generated("mixed", (reprod_type)t, n, 401, gen_mixed, 16 + (uint64_t)trial);
        }
}

Test(engine, exact_sum_matches_mpfr_in_all_directions_for_similar_magnitudes)
{
    fast_elements_seen = general_elements_seen = 0;
    run_all_types("similar", gen_similar, 67, 1);
    cr_assert_gt(fast_elements_seen, 0, "the fast path never ran");
}

Test(engine, exact_matches_mpfr_over_the_whole_exponent_range)
{
    fast_elements_seen = general_elements_seen = 0;
    run_all_types("wide", gen_wide, 67, 2);
    cr_assert_gt(general_elements_seen, 0, "the general path never ran");
}

Test(engine, exact_zero_sums_follow_the_mpfr_sum_sign_rule)
{
    run_all_types("cancel", gen_cancel, 33, 3);
    run_all_types("zeros", gen_zeros, 33, 4);
}

Test(engine, exact_rounds_ties_and_near_ties_correctly)
{
    run_all_types("ties", gen_ties, 67, 5);
}

Test(engine, exact_average_rounds_quotient_ties_and_near_ties_correctly)
{
    static const int ns[] = {3, 5, 6, 7, 10, 12, 24};
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++)
            run_generated("quotient-ties", (reprod_type)t, ns[s], 67, gen_quotient_ties, 14);
}

/* White box: the invariant the proofs in engine_inner.h claim, checked with MPFR right at
 * the window's edge: the binary64 sum (16- and 32-bit types) or s + t (binary64, with t the
 * sum of the TwoSum errors) is the exact sum, and the engine accepts these elements. */
Test(engine, fast_path_windows_keep_the_binary64_sums_exact)
{
    static const int ns[] = {2, 3, 4, 5, 8, 9, 16, 17, 33, 64};
    struct rng r = {700};
    mpfr_t exact, check, term;
    mpfr_inits2(ORACLE_EXACT_BITS, exact, check, term, (mpfr_ptr)0);
    uint64_t terms[ORACLE_MAX_TERMS];
    for (int t = 0; t < ALL_TYPES; t++) {
        const struct tfmt *f = &test_formats[t];
        struct engine_format ef = engine_format_of((reprod_type)t);
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
            int n = ns[s], window = engine_fast_window(f->p, n);
            if (window < 0) continue;
            for (int trial = 0; trial < 400; trial++) {
                gen_window_edge(f, &r, n, terms);
                uint64_t max_magnitude = 0, min_less_one = tf_sign(f) - 1;
                double sum = -0.0, errors = 0.0;
                mpfr_set_zero(exact, 1);
                for (int k = 0; k < n; k++) {
                    uint64_t magnitude = terms[k] & (tf_sign(f) - 1);
                    uint64_t less_one = (magnitude - 1) & (tf_sign(f) - 1);
                    max_magnitude = magnitude > max_magnitude ? magnitude : max_magnitude;
                    min_less_one = less_one < min_less_one ? less_one : min_less_one;
                    double x = tf_to_double((reprod_type)t, terms[k]);
                    mpfr_set_d(term, x, MPFR_RNDN);
                    mpfr_add(exact, exact, term, MPFR_RNDN);
                    if (t == REPROD_FLOAT64) {
                        double e;
                        engine_two_sum(sum, x, &sum, &e);
                        errors += e;
                    } else {
                        sum += x;
                    }
                }
                cr_assert(engine_fast_span_ok(&ef, max_magnitude, min_less_one, window),
                          "%s N=%d: an element at the window's edge was refused", f->name, n);
                mpfr_set_d(check, sum, MPFR_RNDN);
                mpfr_set_d(term, errors, MPFR_RNDN);
                mpfr_add(check, check, term, MPFR_RNDN);
                if (mpfr_cmp(check, exact) != 0) {
                    fprintf(stderr, "window %d for %s N=%d is not exact:", window, f->name, n);
                    for (int k = 0; k < n; k++)
                        fprintf(stderr, " %#llx", (unsigned long long)terms[k]);
                    fprintf(stderr, "\n");
                    cr_assert_fail("binary64 fast-path sum inexact");
                }
            }
        }
    }
    mpfr_clears(exact, check, term, (mpfr_ptr)0);
}

/* engine_inner.h (c'): whenever engine_errors_exact says t is exact, s + t is the exact
 * sum (MPFR), over elements near and beyond the window, ties, cancellation and wide spreads;
 * and it accepts the window's elements but for few. */
Test(engine, errors_test_proves_t_exact_only_when_it_is)
{
    static const int ns[] = {2, 3, 5, 8, 16, 17, 33, 64};
    static generator *const gens[] = {gen_window_edge,    gen_ties,          gen_wide,
                                      gen_cancel_residue, gen_wide_boundary, gen_similar};
    const struct tfmt *f = &test_formats[REPROD_FLOAT64];
    struct rng r = {710};
    mpfr_t exact, check, term;
    mpfr_inits2(ORACLE_EXACT_BITS, exact, check, term, (mpfr_ptr)0);
    uint64_t terms[ORACLE_MAX_TERMS];
    int accepted = 0, trials = 0, window_refused = 0;
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++)
        for (size_t g = 0; g < sizeof gens / sizeof gens[0]; g++)
            for (int trial = 0; trial < 300; trial++) {
                int n = ns[s];
                gens[g](f, &r, n, terms);
                uint64_t low = 0x7fffffffffffffffull;
                double sum = -0.0, errors = 0.0, error_sum = 0.0;
                mpfr_set_zero(exact, 1);
                for (int k = 0; k < n; k++) {
                    uint64_t less_one = (terms[k] - 1) & 0x7fffffffffffffffull;
                    low = less_one < low ? less_one : low;
                    double x = tf_to_double(REPROD_FLOAT64, terms[k]), e;
                    mpfr_set_d(term, x, MPFR_RNDN);
                    mpfr_add(exact, exact, term, MPFR_RNDN);
                    engine_two_sum(sum, x, &sum, &e);
                    errors += e;
                    error_sum += fabs(e);
                }
                if (!isfinite(sum + errors)) continue;
                trials++;
                if (!engine_errors_exact(error_sum, low)) {
                    window_refused += gens[g] == gen_window_edge;
                    continue;
                }
                accepted++;
                mpfr_set_d(check, sum, MPFR_RNDN);
                mpfr_set_d(term, errors, MPFR_RNDN);
                mpfr_add(check, check, term, MPFR_RNDN);
                if (mpfr_cmp(check, exact) != 0) {
                    fprintf(stderr, "(c') accepted an inexact t, N=%d:", n);
                    for (int k = 0; k < n; k++)
                        fprintf(stderr, " %#llx", (unsigned long long)terms[k]);
                    fprintf(stderr, "\n");
                    cr_assert_fail("binary64 errors test accepted an inexact t");
                }
            }
    mpfr_clears(exact, check, term, (mpfr_ptr)0);
    cr_expect_gt(accepted, trials / 3, "(c') accepted %d of %d elements", accepted, trials);
    cr_expect_lt(window_refused, 8 * 300 / 4, "(c') refused %d window-edge elements",
                 window_refused);
}

/* How many of the elements engine_exact_fast and engine_exact_distilled (the per-element tiers
 * the GPU kernels run) both refuse: every host kernel level must send exactly these to the
 * general path. *distilled: how many the distillation tier decided. */
static int general_by_element_in(reprod_type type, reprod_op op, reprod_rounding dir,
                                 void **buffers, int n, size_t count, int *distilled)
{
    int refused = 0, tier2 = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t bits;
        const void *const *c = (const void *const *)buffers;
        if (engine_exact_fast(type, op, dir, c, n, i, &bits)) continue;
        if (engine_exact_distilled(type, op, dir, c, n, i, &bits) ||
            engine_exact_beyond_window(type, op, dir, c, n, i, &bits))
            tier2++;
        else
            refused++;
    }
    if (distilled) *distilled = tier2;
    return refused;
}

static int general_by_element(reprod_type type, reprod_op op, void **buffers, int n, size_t count,
                              int *distilled)
{
    return general_by_element_in(type, op, REPROD_ROUND_NEAREST, buffers, n, count, distilled);
}

/* Every kernel level draws the fast path's border where engine_fast_window says: in a block of
 * 64 elements, element 0 is 1 + 2^-100 (general, and an inexact binary64 sum, so the flag-first
 * binary32 kernels must fall back to their span check), even elements span exactly the window
 * (fast), odd ones one exponent more (general). Binary16 never leaves the window. */
Test(engine, every_kernel_draws_the_fast_window_border_exactly)
{
    static const int ns[] = {2, 3, 8, 16};
    enum { COUNT = 64 };
    for (int t = REPROD_BFLOAT16; t < ALL_TYPES; t++) {
        const struct tfmt *f = &test_formats[t];
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
            int n = ns[s], window = engine_fast_window(f->p, n);
            struct rng r = {900 + (uint64_t)n};
            struct tcase c = case_new("window-border", (reprod_type)t, n, COUNT);
            int top = f->p == 53 ? 1500 : window + 20;
            for (size_t i = 0; i < COUNT; i++) {
                for (int k = 0; k < n; k++) {
                    int field = rng_range(&r, top - window, top);
                    if (k == 0) field = top;
                    if (k == n - 1) field = top - window - (int)(i % 2);
                    c.terms[(size_t)k * COUNT + i] =
                        tf_make(f, (int)(rng_next(&r) & 1), field, random_frac(f, &r) | 1);
                }
                if (i == 0) { /* the poison element */
                    for (int k = 0; k < n; k++)
                        c.terms[(size_t)k * COUNT] = 0;
                    c.terms[0] = tf_make(f, 0, f->bias, 0);
                    c.terms[(size_t)(n - 1) * COUNT] = tf_make(f, 0, f->bias - 100, 0);
                }
            }
            int order[16];
            for (int k = 0; k < n; k++)
                order[k] = k;
            void **buffers = case_buffers(&c, order);
            void *out = malloc((COUNT + 1) * 8);
            for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
                if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
                struct reprod_engine_stats stats = {0};
                reprod_engine_exact((reprod_type)t, REPROD_SUM, REPROD_ROUND_NEAREST,
                                    (const void *const *)buffers, n, COUNT, out, NULL, &stats);
                engine_limit_kernels(ENGINE_KERNELS_AUTO);
                /* Two binary32 or binary64 contributions take one correctly rounded addition
                 * (x86-64): no window, no general path; the bits are checked elsewhere. */
                int pair = n == 2 && (t == REPROD_FLOAT32 || t == REPROD_FLOAT64);
#if !defined(__x86_64__)
                pair = 0;
#endif
                int expected = pair ? 0 : COUNT / 2 + 1;
                /* beyond the window: binary64's certificate (d) and tiers (e), (f); binary32
                 * and bfloat16 in binary64, (h) and (g) */
                if (t != REPROD_FLOAT16 && !pair)
                    expected =
                        general_by_element((reprod_type)t, REPROD_SUM, buffers, n, COUNT, NULL);
                cr_expect_eq(stats.general_elements, (size_t)expected,
                             "%s N=%d kernel level %d: %zu general elements, expected %d", f->name,
                             n, level, stats.general_elements, expected);
            }
            free(out);
            buffers_free(buffers, n);
            check_exact(&c, &r);
            free(c.terms);
        }
    }
}

Test(engine, exact_matches_mpfr_at_the_edge_of_the_fast_path_window)
{
    static const int ns[] = {2, 3, 5, 8, 16, 33};
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++)
            run_generated("window-edge", (reprod_type)t, ns[s], 67, gen_window_edge, 15);
}

/* Thousands of contributions: the accumulator's top limb takes more than 2^32 before its
 * carries are split: N copies of x whose significand sits at bit offset 31 of a 32-bit limb
 * (exponents near 2 for every type: binary16's field 16, 128 for the 8-bit exponents, 1024),
 * and of its negation, besides random values. */
Test(engine, exact_many_contributions_use_the_carry_headroom)
{
    enum { N = 20011, COUNT = 11 };
    static const int offset31_field[ALL_TYPES] = {16, 128, 128, 1024};
    struct rng r = {800};
    mpfr_t exact, x;
    mpfr_inits2(ORACLE_EXACT_BITS, exact, x, (mpfr_ptr)0);
    for (int t = 0; t < ALL_TYPES; t++) {
        const struct tfmt *f = &test_formats[t];
        size_t size = tf_size((reprod_type)t);
        uint64_t values[COUNT];
        char *column = calloc(COUNT, size);
        for (int i = 0; i < COUNT; i++) {
            int field = i < 4 ? offset31_field[t] : rng_range(&r, 1, tf_max_field(f) - 16);
            values[i] = tf_make(f, i % 2, field, tf_frac_mask(f) - (uint64_t)i);
            memcpy(column + (size_t)i * size, &values[i], size);
        }
        const void **in = calloc(N, sizeof(void *));
        for (int k = 0; k < N; k++)
            in[k] = column;
        char *out = calloc(COUNT, size);
        struct reprod_engine_options general = {.force_general = 1};
        for (int op = 0; op < 2; op++)
            for (int dir = 0; dir < 4; dir++)
                for (int path = 0; path < 2; path++) {
                    cr_assert_eq(reprod_engine_exact((reprod_type)t, op, dir, in, N, COUNT, out,
                                                     path ? &general : NULL, NULL),
                                 REPROD_OK);
                    for (int i = 0; i < COUNT; i++) {
                        mpfr_set_d(x, tf_to_double((reprod_type)t, values[i]), MPFR_RNDN);
                        mpfr_mul_ui(exact, x, N, MPFR_RNDN);
                        uint64_t expected = oracle_round_exact((reprod_type)t, op, dir, exact, N);
                        uint64_t got = load_result((reprod_type)t, out, (size_t)i);
                        cr_assert_eq(got, expected,
                                     "%s %s %s N=%d x=%#llx path=%d: expected %#llx got %#llx",
                                     f->name, test_op_names[op], test_rounding_names[dir], N,
                                     (unsigned long long)values[i], path,
                                     (unsigned long long)expected, (unsigned long long)got);
                    }
                }
        free(in);
        free(out);
        free(column);
    }
    mpfr_clears(exact, x, (mpfr_ptr)0);
}

Test(engine, exact_subnormal_results_are_exact)
{
    run_all_types("subnormal", gen_subnormal, 67, 6);
}

Test(engine, exact_overflow_gives_infinity_or_the_largest_value_by_direction)
{
    run_all_types("overflow", gen_overflow, 33, 7);
    run_all_types("overflow-edge", gen_overflow_edge, 67, 17);
}

Test(engine, exact_infinities_and_nans_give_canonical_results)
{
    run_all_types("specials", gen_specials, 33, 8);
}

Test(engine, exact_big_cancellation_keeps_the_tiny_terms)
{
    run_all_types("big-cancel", gen_big_cancel, 33, 9);
}

Test(engine, exact_every_contribution_count_from_1_to_64)
{
    for (int t = 0; t < ALL_TYPES; t++)
        for (int n = 1; n <= 64; n++) {
            run_generated("n-similar", (reprod_type)t, n, 9, gen_similar, 10);
            run_generated("n-wide", (reprod_type)t, n, 9, gen_wide, 11);
        }
}

Test(engine, exact_wide_spreads_near_rounding_boundaries_at_every_contribution_count)
{
    /* The certificate's edge (engine_inner.h (d)): ties, near-ties by 2^-1..2^-400 half ulps,
     * exact zeros, overflow and subnormal thresholds, with terms spread over 200 binades. */
    for (int t = 0; t < ALL_TYPES; t++)
        for (int n = 1; n <= 64; n++)
            run_generated("n-wide-boundary", (reprod_type)t, n, 17, gen_wide_boundary, 14);
    for (int n = 2; n <= 70; n += 17) /* many elements: every kernel's blocks, for binary64 */
        run_generated("wide-boundary", REPROD_FLOAT64, n, 300, gen_wide_boundary, 15);
    /* Both sides of the certificate are reached: binary64 elements beyond the window that it
     * accepts, and ones it refuses. */
    struct rng r = {16};
    int accepted = 0, refused = 0;
    for (int i = 0; i < 2000; i++) {
        uint64_t terms[8], bits;
        const void *pointers[8];
        gen_wide_boundary(&test_formats[REPROD_FLOAT64], &r, 8, terms);
        uint64_t max = 0, min_less_one = ~0ull >> 1;
        for (int k = 0; k < 8; k++) {
            uint64_t magnitude = terms[k] << 1 >> 1;
            max = magnitude > max ? magnitude : max;
            if (magnitude != 0 && magnitude - 1 < min_less_one) min_less_one = magnitude - 1;
            pointers[k] = &terms[k];
        }
        struct engine_format f = engine_format_of(REPROD_FLOAT64);
        if (engine_fast_span_ok(&f, max, min_less_one, engine_fast_window(53, 8))) continue;
        if (engine_exact_fast(REPROD_FLOAT64, REPROD_SUM, REPROD_ROUND_UP, pointers, 8, 0, &bits))
            accepted++;
        else
            refused++;
    }
    cr_expect_gt(accepted, 100, "certificate accepted %d wide elements", accepted);
    cr_expect_gt(refused, 100, "certificate refused %d wide elements", refused);
}

Test(engine, exact_cancellation_residues_at_every_contribution_count)
{
    /* Sums that cancel far below their largest term (the general path for binary64 beyond the
     * window, certificate refused), every N, all types. */
    for (int t = 0; t < ALL_TYPES; t++)
        for (int n = 2; n <= 64; n++)
            run_generated("n-cancel-residue", (reprod_type)t, n, 17, gen_cancel_residue, 20);
    run_generated("cancel-residue", REPROD_FLOAT64, 8, 300, gen_cancel_residue, 21);
    run_generated("cancel-residue", REPROD_FLOAT64, 40, 300, gen_cancel_residue, 22);
}

/* Cancellation of a given depth: n - 1 terms of exponents within 60 of 2^(depth + 60) and a
 * last term that cancels their double-rounded sum, plus a residue 2^-depth times smaller: the
 * exact sum lies about depth + 50 binades below the terms. */
static int cancel_depth; /* binades, for gen_cancel_depth */

static void gen_cancel_depth(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int centre = rng_range(r, 1023 - 300, 1023 + 300);
    double sum = 0;
    for (int k = 0; k < n - 2; k++) {
        terms[k] = tf_make(f, (int)(rng_next(r) & 1), rng_range(r, centre - 60, centre + 60),
                           random_frac(f, r));
        sum += tf_to_double(REPROD_FLOAT64, terms[k]);
    }
    terms[n - 2] =
        tf_make(f, (int)(rng_next(r) & 1), centre - 60 - cancel_depth, random_frac(f, r));
    mpfr_t value;
    mpfr_init2(value, f->p);
    int inex = mpfr_set_d(value, -sum, MPFR_RNDN);
    terms[n - 1] = oracle_fit(REPROD_FLOAT64, value, inex, MPFR_RNDN);
    mpfr_clear(value);
    rng_shuffle(r, terms, n);
}

/* Sums on a midpoint decided far below it (engine_inner.h (f)): a, with an odd significand,
 * plus half its ulp, plus small terms of either sign at least 60 binades lower (or none: a
 * true tie), shuffled. */
static void gen_tie_rest(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int field = rng_range(r, 400, 1600), sign = (int)(rng_next(r) & 1);
    terms[0] = tf_make(f, sign, field, random_frac(f, r) | 1);
    terms[1] = tf_make(f, rng_range(r, 0, 3) == 0 ? !sign : sign, field - 53, 0);
    int small = rng_range(r, 0, 5) == 0 ? 0 : n - 2;
    for (int k = 2; k < n; k++)
        terms[k] = k - 2 < small ? tf_make(f, (int)(rng_next(r) & 1),
                                           field - 60 - rng_range(r, 0, 300), random_frac(f, r))
                                 : 0;
    rng_shuffle(r, terms, n);
}

Test(engine, distillation_settles_midpoints_by_what_lies_below)
{
    static const int ns[] = {3, 4, 8, 16, 33};
    int settled = 0;
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        int n = ns[s];
        enum { COUNT = 64 };
        struct rng r = {7300 + (uint64_t)n};
        struct tcase c = case_generated("tie-rest", REPROD_FLOAT64, n, COUNT, gen_tie_rest, &r);
        void **buffers = case_buffers(&c, NULL);
        for (int dir = REPROD_ROUND_NEAREST; dir <= REPROD_ROUND_DOWN; dir++)
            for (size_t i = 0; i < COUNT; i++) {
                uint64_t bits;
                const void *const *in = (const void *const *)buffers;
                if (!engine_exact_fast(REPROD_FLOAT64, REPROD_SUM, (reprod_rounding)dir, in, n, i,
                                       &bits) &&
                    engine_exact_distilled(REPROD_FLOAT64, REPROD_SUM, (reprod_rounding)dir, in, n,
                                           i, &bits))
                    settled++;
            }
        buffers_free(buffers, n);
        check_exact(&c, &r);
        free(c.terms);
    }
    cr_expect_gt(settled, 200, "the distillation tier settled %d midpoint elements", settled);
}

/* The distillation tier (engine_inner.h (e)): sums that cancel far below their terms, which
 * the certificate refuses, are decided by it after one or more passes; deeper ones take the
 * general path; every kernel level agrees with the per-element tiers on which, and every
 * result is MPFR's (check_exact, all ops and directions). */
Test(engine, distillation_decides_cancelling_sums_and_hands_on_the_deepest)
{
    static const int ns[] = {3, 5, 8, 16, 17, 40, 64};
    static const int depths[] = {0, 40, 100, 200, 600};
    enum { COUNT = 83 };
    int distilled_total = 0, general_total = 0;
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++)
        for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
            int n = ns[s];
            cancel_depth = depths[d];
            struct rng r = {7000 + (uint64_t)(n * 10) + d};
            struct tcase c =
                case_generated("cancel-depth", REPROD_FLOAT64, n, COUNT, gen_cancel_depth, &r);
            void **buffers = case_buffers(&c, NULL);
            void *out = malloc(COUNT * 8);
            for (int op = REPROD_SUM; op <= REPROD_AVG; op++) {
                int distilled;
                int expected = general_by_element(REPROD_FLOAT64, (reprod_op)op, buffers, n, COUNT,
                                                  &distilled);
                distilled_total += distilled;
                general_total += expected;
                for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
                    if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
                    struct reprod_engine_stats stats = {0};
                    reprod_engine_exact(REPROD_FLOAT64, (reprod_op)op, REPROD_ROUND_NEAREST,
                                        (const void *const *)buffers, n, COUNT, out, NULL, &stats);
                    engine_limit_kernels(ENGINE_KERNELS_AUTO);
                    cr_expect_eq(stats.general_elements, (size_t)expected,
                                 "N=%d depth %d op %d level %d: %zu general elements, expected %d",
                                 n, cancel_depth, op, level, stats.general_elements, expected);
                }
            }
            free(out);
            buffers_free(buffers, n);
            check_exact(&c, &r);
            free(c.terms);
        }
    cr_expect_gt(distilled_total, 1000, "the distillation tier decided %d elements",
                 distilled_total);
    cr_expect_gt(general_total, 100, "the general path took %d elements", general_total);
}

/* Elements that only (c') proves, among elements of any spread: x and half an ulp of x (the
 * sum lies on a midpoint: (d) cannot tell its side, (c') sees that t is exact), zeros beside;
 * or terms of all-ones fractions with one at the edge of the window (the sum beside a rounding
 * boundary: (d) refuses, in the directed roundings often the distillation too). Elsewhere
 * spreads of +-200 binades, where (c') proves little: the kernels leave its minimum out. */
static void gen_wide_with_ties(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    if (rng_range(r, 0, 39) != 0 || n < 2) { /* +-200 binades: (d) decides, (c') rarely */
        int centre = tf_max_field(f) / 2;
        for (int k = 0; k < n; k++)
            terms[k] = tf_make(f, (int)(rng_next(r) & 1), centre + rng_range(r, -200, 200),
                               random_frac(f, r));
        return;
    }
    int field = rng_range(r, 60, tf_max_field(f) - 60), negative = (int)(rng_next(r) & 1);
    if (rng_next(r) & 1) { /* n - 1 terms of all-ones fractions and one odd term at the
                            * window's edge: t exact, the sum next to a rounding boundary */
        int bottom = field - engine_fast_window(f->p, n) + rng_range(r, -1, 0);
        for (int k = 0; k < n - 1; k++)
            terms[k] = tf_make(f, negative, field, tf_frac_mask(f) - (rng_next(r) & 0xf));
        terms[n - 1] = tf_make(f, negative, bottom, random_frac(f, r) | 1);
    } else {
        terms[0] = tf_make(f, negative, field, random_frac(f, r) | 1);
        terms[1] = tf_make(f, negative ^ (int)(rng_next(r) & 1), field - 53, 0);
        for (int k = 2; k < n; k++)
            terms[k] = tf_make(f, (int)(rng_next(r) & 1), 0, 0);
    }
    rng_shuffle(r, terms, n);
}

/* The binary64 kernels leave the minimum of (c') out after blocks where it proved little
 * (wide spreads); a block with refused lanes then finds it after all. Exact ties among wide
 * elements: every level sends exactly the elements the per-element tiers refuse to the
 * general path (none of the ties), and every result is MPFR's. */
Test(engine, kernels_without_the_minimum_still_prove_ties)
{
    static const int ns[] = {2, 3, 8, 16};
    enum { COUNT = 1500 };
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        int n = ns[s];
        struct rng r = {9100 + (uint64_t)n};
        struct tcase c =
            case_generated("wide-ties", REPROD_FLOAT64, n, COUNT, gen_wide_with_ties, &r);
        void **buffers = case_buffers(&c, NULL);
        int ties = 0;
        for (size_t i = 0; i < COUNT; i++) { /* elements (c') proves and (d) does not */
            const void *const *b = (const void *const *)buffers;
            double s_sum = -0.0, t = 0.0, error_sum = 0.0;
            uint64_t low = 0x7fffffffffffffffull;
            for (int k = 0; k < n; k++) {
                double x = ((const double *)b[k])[i], e;
                uint64_t less_one = (engine_double_bits(x) - 1) & 0x7fffffffffffffffull;
                low = less_one < low ? less_one : low;
                engine_two_sum(s_sum, x, &s_sum, &e);
                t += e;
                error_sum += fabs(e);
            }
            ties += engine_errors_exact(error_sum, low) &&
                    !engine_rounding_certified(s_sum, t, error_sum, n, REPROD_ROUND_NEAREST);
        }
        cr_assert_gt(ties, 5, "N=%d: %d elements only (c') proves", n, ties);
        void *out = malloc(COUNT * 8);
        for (int dir = REPROD_ROUND_NEAREST; dir <= REPROD_ROUND_DOWN; dir++) {
            int expected = general_by_element_in(REPROD_FLOAT64, REPROD_SUM, (reprod_rounding)dir,
                                                 buffers, n, COUNT, NULL);
            for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
                if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
                struct reprod_engine_stats stats = {0};
                reprod_engine_exact(REPROD_FLOAT64, REPROD_SUM, (reprod_rounding)dir,
                                    (const void *const *)buffers, n, COUNT, out, NULL, &stats);
                engine_limit_kernels(ENGINE_KERNELS_AUTO);
                cr_expect_eq(stats.general_elements, (size_t)expected,
                             "N=%d rounding %d level %d: %zu general elements, expected %d", n, dir,
                             level, stats.general_elements, expected);
            }
        }
        free(out);
        buffers_free(buffers, n);
        check_exact(&c, &r);
        free(c.terms);
    }
}

/* A case's sums to nearest take no element to the general path. */
static void expect_no_general(const struct tcase *c, void **buffers)
{
    void *out = malloc(c->count * 8);
    struct reprod_engine_stats stats = {0};
    reprod_engine_exact(c->type, REPROD_SUM, REPROD_ROUND_NEAREST, (const void *const *)buffers,
                        c->n, c->count, out, NULL, &stats);
    cr_expect_eq(stats.general_elements, 0, "%s: %zu elements on the general path", c->label,
                 stats.general_elements);
    free(out);
}

/* Binary32 beyond its window (engine_inner.h (g)): gradients of 1e-2 and 1e-12 in one
 * element, cancelling sums and near-ties, in runs long enough that the kernels send whole
 * chunks to the tier, then mixed with in-window elements; every direction, op, kernel level,
 * in place, against MPFR. */
static void gen_float32_wide(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int centre = rng_range(r, 60, 190);
    for (int k = 0; k < n; k++)
        terms[k] =
            tf_make(f, (int)(rng_next(r) & 1), centre + rng_range(r, -45, 45), random_frac(f, r));
    if (rng_range(r, 0, 2) == 0 && n >= 2) { /* the last term cancels the others' sum */
        double sum = 0;
        for (int k = 0; k < n - 1; k++)
            sum += tf_to_double(REPROD_FLOAT32, terms[k]);
        mpfr_t value;
        mpfr_init2(value, f->p);
        int inex = mpfr_set_d(value, -sum, MPFR_RNDN);
        terms[n - 1] = oracle_fit(REPROD_FLOAT32, value, inex, MPFR_RNDN);
        mpfr_clear(value);
    }
}

static void gen_float32_wide_or_similar(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    (rng_range(r, 0, 3) == 0 ? gen_similar : gen_float32_wide)(f, r, n, terms);
}

Test(engine, binary32_beyond_the_window_sums_in_binary64)
{
    static const int ns[] = {3, 8, 17, 64};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        run_generated("f32-wide", REPROD_FLOAT32, ns[s], 1100, gen_float32_wide, 31);
        run_generated("f32-wide-mixed", REPROD_FLOAT32, ns[s], 700, gen_float32_wide_or_similar,
                      32);
    }
    /* the tier decides them: none on the general path */
    struct rng r = {33};
    struct tcase c =
        case_generated("f32-wide-general", REPROD_FLOAT32, 8, 600, gen_float32_wide, &r);
    void **buffers = case_buffers(&c, NULL);
    expect_no_general(&c, buffers);
    buffers_free(buffers, 8);
    free(c.terms);
}

/* Binary32 or bfloat16 elements at the border of the split sums with `levels` levels
 * (engine_inner.h (h)): N - 2 terms whose low parts at the last level are all nearly its
 * largest, uσ = 2^(e + levels (L - 53)) (the levels above leave them whole), a tiny last term
 * with an odd significand at the smallest field, and the largest term that fixes sigma; the
 * fields span `span` binades. The low parts then need 53 bits exactly at the limit (for
 * N - 2 >= 2^(L - 1)) and one more beyond it. */
static void make_split_edge(reprod_type type, struct rng *r, int n, int levels, int span,
                            uint64_t *terms)
{
    const struct tfmt *f = &test_formats[type];
    int log2_n = engine_ceil_log2(n);
    int field_max = rng_range(r, span + 1, 254), field_min = field_max - span;
    /* a middle term is 2 uσ (1.5 - (1 + d) 2^(1 - p)) with small d: its split at the last
     * level leaves r = uσ (1 - (1 + d) 2^(2 - p)) */
    int middle_field = field_max + log2_n - 51 - (levels - 1) * (53 - log2_n);
    uint64_t middle_fraction = (1ull << (f->p - 2)) - 1;
    terms[0] = tf_make(f, 0, field_max, random_frac(f, r));
    for (int k = 1; k < n - 1; k++)
        terms[k] = tf_make(f, 0, middle_field, middle_fraction - (uint64_t)rng_range(r, 0, 15));
    terms[n - 1] = tf_make(f, 0, field_min, random_frac(f, r) | 1);
}

static int split_edge_levels = 1; /* gen_split_edge's */

static void gen_split_edge(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    reprod_type type = f == &test_formats[REPROD_BFLOAT16] ? REPROD_BFLOAT16 : REPROD_FLOAT32;
    int limit = engine_split_limit(type, n, split_edge_levels);
    make_split_edge(type, r, n, split_edge_levels, limit + rng_range(r, -1, 1), terms);
    if (rng_next(r) & 1)
        for (int k = 0; k < n; k++)
            terms[k] ^= tf_sign(f);
}

/* The value of binary32 or bfloat16 bits as a double. */
static double split_term(reprod_type type, uint64_t bits)
{
    uint32_t word = type == REPROD_BFLOAT16 ? (uint32_t)bits << 16 : (uint32_t)bits;
    float x;
    memcpy(&x, &word, sizeof x);
    return x;
}

/* Whether S and T tell the exact sum as round to odd needs (engine_inner.h (g), (h)): equal
 * to S when T is zero, else strictly between S and its neighbour toward T. */
static int brackets(mpfr_t exact, double S, double T)
{
    if (T == 0) return mpfr_cmp_d(exact, S) == 0;
    double next = nextafter(S, T > 0 ? INFINITY : -INFINITY);
    return T > 0 ? mpfr_cmp_d(exact, S) > 0 && mpfr_cmp_d(exact, next) < 0
                 : mpfr_cmp_d(exact, S) < 0 && mpfr_cmp_d(exact, next) > 0;
}

Test(engine, split_sums_are_exact_up_to_their_span_limits)
{
    static const int ns[] = {8, 16, 64}; /* N - 2 >= 2^(L - 1): the limit is tight */
    static const reprod_type types[] = {REPROD_FLOAT32, REPROD_BFLOAT16};
    enum { TRIALS = 100, LEVELS = 4 }; /* the fifth level's limit passes every span */
    struct rng r = {8211};
    mpfr_t exact, check, term;
    mpfr_inits2(ORACLE_EXACT_BITS, exact, check, term, (mpfr_ptr)0);
    uint64_t terms[ORACLE_MAX_TERMS];
    int inexact_beyond = 0, cases_beyond = 0;
    for (size_t t = 0; t < 2; t++)
        for (int levels = 1; levels <= LEVELS; levels++)
            for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
                reprod_type type = types[t];
                int n = ns[s], limit = engine_split_limit(type, n, levels);
                for (int span = limit - 1; span <= limit + 1; span++)
                    for (int trial = 0; trial < TRIALS; trial++) {
                        make_split_edge(type, &r, n, levels, span, terms);
                        uint16_t halves[ORACLE_MAX_TERMS];
                        uint32_t words[ORACLE_MAX_TERMS];
                        const void *c[ORACLE_MAX_TERMS];
                        uint32_t largest = 0, smallest = 0x7fffffff;
                        mpfr_set_zero(exact, 1);
                        for (int k = 0; k < n; k++) {
                            halves[k] = (uint16_t)terms[k];
                            words[k] = (uint32_t)terms[k];
                            c[k] = type == REPROD_BFLOAT16 ? (const void *)&halves[k]
                                                           : (const void *)&words[k];
                            uint32_t bits = type == REPROD_BFLOAT16 ? words[k] << 16 : words[k];
                            largest = (bits & 0x7fffffff) > largest ? bits & 0x7fffffff : largest;
                            smallest = ((bits - 1) & 0x7fffffff) < smallest
                                           ? (bits - 1) & 0x7fffffff
                                           : smallest;
                            mpfr_set_d(term, split_term(type, terms[k]), MPFR_RNDN);
                            mpfr_add(exact, exact, term, MPFR_RNDN);
                        }
                        cr_assert_eq(engine_split_levels(type, largest, smallest, n),
                                     span <= limit ? levels : levels + 1,
                                     "N=%d span %d: %d levels take up to %d binades", n, span,
                                     levels, limit);
                        if (span > limit) { /* what `levels` levels would give: lo rounds */
                            double sigma =
                                ldexp(1.0, (int)(largest >> 23) - 126 + engine_ceil_log2(n));
                            double hi[LEVELS] = {0}, lo = 0.0;
                            for (int k = 0; k < n; k++) {
                                double x = split_term(type, terms[k]), level_sigma = sigma;
                                for (int i = 0; i < levels; i++) {
                                    double q = (level_sigma + x) - level_sigma;
                                    hi[i] += q;
                                    x -= q;
                                    level_sigma = ldexp(level_sigma, engine_ceil_log2(n) - 53);
                                }
                                lo += x;
                            }
                            mpfr_set_d(check, lo, MPFR_RNDN);
                            for (int i = 0; i < levels; i++) {
                                mpfr_set_d(term, hi[i], MPFR_RNDN);
                                mpfr_add(check, check, term, MPFR_RNDN);
                            }
                            inexact_beyond += mpfr_cmp(check, exact) != 0;
                            cases_beyond++;
                        }
                        if (span <= limit) { /* the accumulators hold the exact sum */
                            double hi[ENGINE_SPLIT_LEVELS], lo;
                            engine_split_sums(type, c, n, 0, levels, largest, hi, &lo);
                            mpfr_set_d(check, lo, MPFR_RNDN);
                            for (int i = 0; i < levels; i++) {
                                mpfr_set_d(term, hi[i], MPFR_RNDN);
                                mpfr_add(check, check, term, MPFR_RNDN);
                            }
                            cr_assert(mpfr_cmp(check, exact) == 0,
                                      "%s N=%d span %d: %d levels' accumulators inexact",
                                      test_formats[type].name, n, span, levels);
                        }
                        double S, T; /* one sign, no cancellation: the chain tells */
                        cr_assert(engine_float32_exact_sum(type, c, n, 0, &S, &T),
                                  "N=%d span %d: (h) did not decide", n, span);
                        if (!brackets(exact, S, T)) {
                            fprintf(stderr, "%s N=%d span %d: S + T is not the exact sum:",
                                    test_formats[type].name, n, span);
                            for (int k = 0; k < n; k++)
                                fprintf(stderr, " %#x", (unsigned)terms[k]);
                            fprintf(stderr, "\n");
                            cr_assert_fail("split sum inexact");
                        }
                    }
            }
    mpfr_clears(exact, check, term, (mpfr_ptr)0);
    /* the elements are hard enough: one binade more and that many levels would be wrong */
    cr_expect_eq(inexact_beyond, cases_beyond, "split sums beyond the limit inexact: %d of %d",
                 inexact_beyond, cases_beyond);
    /* the same elements through every kernel level, direction and op, against MPFR */
    for (split_edge_levels = 1; split_edge_levels <= LEVELS; split_edge_levels++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
            run_generated("f32-split-edge", REPROD_FLOAT32, ns[s], 300, gen_split_edge, 41);
            run_generated("bf16-split-edge", REPROD_BFLOAT16, ns[s], 300, gen_split_edge, 42);
        }
    split_edge_levels = 1;
}

/* Bfloat16 beyond its window (42 - L binades): every bfloat16 is a binary32, so (h) and (g)
 * serve it, rounding once to bfloat16. Spreads of +-45 binades, and +-120 (beyond (h): the
 * cascade); every direction, op, kernel level, in place, against MPFR; none on the general
 * path within (h)'s reach. */
static int bfloat16_spread = 45;

static void gen_bfloat16_wide(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int centre = 127 + rng_range(r, -10, 10);
    for (int k = 0; k < n; k++)
        terms[k] =
            tf_make(f, (int)(rng_next(r) & 1),
                    centre + rng_range(r, -bfloat16_spread, bfloat16_spread), random_frac(f, r));
}

/* Where the tier's vector rounding to bfloat16 can go wrong, among wide elements (which send
 * whole chunks to the tier): sums past the largest bfloat16, on and beside its midpoints
 * (half an ulp of x, plus or minus a far smaller term), below its normal range, negative. */
static void gen_bfloat16_edges(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int kind = rng_range(r, 0, 4), negative = (int)(rng_next(r) & 1);
    if (kind == 0 || n < 3) {
        gen_bfloat16_wide(f, r, n, terms);
        return;
    }
    for (int k = 0; k < n; k++)
        terms[k] = tf_make(f, 0, 0, 0);
    int field = kind == 1 ? 254 : kind == 4 ? rng_range(r, 1, 3) : rng_range(r, 20, 230);
    terms[0] = tf_make(f, negative, field, random_frac(f, r) | 1);
    if (kind == 1) /* past the largest value */
        terms[1] = tf_make(f, negative, 254 - rng_range(r, 0, 8), random_frac(f, r));
    else if (kind == 4) /* below the normal range: a difference of small terms */
        terms[1] = tf_make(f, !negative, rng_range(r, 0, 2), random_frac(f, r));
    else /* half an ulp of terms[0]: a tie, then something far smaller on either side */
        terms[1] = tf_make(f, negative, field - 8, 0);
    if (kind == 3)
        terms[2] = tf_make(f, (int)(rng_next(r) & 1), field - 8 - rng_range(r, 2, 60), 0);
    rng_shuffle(r, terms, n);
}

/* Bfloat16 whose chunks of 256 elements switch the AVX2 kernel between its modes: a chunk of
 * wide elements (the next goes to the tier whole, without the binary64 sums), one within the
 * window (sent whole to the tier all the same, then back), one of blocks of 16 with a single
 * wide lane, an infinity or a NaN (each block to the tier alone), one mostly wide with
 * specials among it. The element's index is counted here: reset region_element per case. */
static size_t region_element;

static void gen_bfloat16_regions(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    size_t i = region_element++, block = i / 16 % 16, lane = i % 16;
    switch (i / 256 % 4) {
    case 0:
        gen_bfloat16_wide(f, r, n, terms);
        break;
    case 1:
        gen_similar(f, r, n, terms);
        break;
    case 2:
        if (lane != block)
            gen_similar(f, r, n, terms);
        else if (block % 3 == 0)
            gen_specials(f, r, n, terms);
        else
            gen_bfloat16_wide(f, r, n, terms);
        break;
    default:
        if (block > 11)
            gen_similar(f, r, n, terms);
        else if (lane == block)
            gen_specials(f, r, n, terms);
        else
            gen_bfloat16_wide(f, r, n, terms);
        break;
    }
}

Test(engine, bfloat16_beyond_the_window_sums_as_binary32)
{
    static const int ns[] = {3, 8, 17, 64};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        bfloat16_spread = 45;
        run_generated("bf16-wide", REPROD_BFLOAT16, ns[s], 600, gen_bfloat16_wide, 51);
        run_generated("bf16-edges", REPROD_BFLOAT16, ns[s], 600, gen_bfloat16_edges, 54);
        bfloat16_spread = 120;
        run_generated("bf16-wider", REPROD_BFLOAT16, ns[s], 300, gen_bfloat16_wide, 52);
        bfloat16_spread = 45;
        region_element = 0; /* 8 chunks and a tail */
        run_generated("bf16-regions", REPROD_BFLOAT16, ns[s], 8 * 256 + 100, gen_bfloat16_regions,
                      55);
    }
    bfloat16_spread = 45;
    struct rng r = {53};
    struct tcase c =
        case_generated("bf16-wide-general", REPROD_BFLOAT16, 8, 600, gen_bfloat16_wide, &r);
    void **buffers = case_buffers(&c, NULL);
    int beyond = 0; /* elements the fast path refuses: the tiers' share */
    for (size_t i = 0; i < c.count; i++) {
        uint64_t bits;
        beyond += !engine_exact_fast(REPROD_BFLOAT16, REPROD_SUM, REPROD_ROUND_NEAREST,
                                     (const void *const *)buffers, 8, i, &bits);
    }
    cr_assert_gt(beyond, 300, "%d of 600 bfloat16 elements beyond the window", beyond);
    expect_no_general(&c, buffers);
    buffers_free(buffers, 8);
    free(c.terms);
}

/* Binary32 and bfloat16 elements beyond the window decided by the plain binary64 sum and its
 * bound (engine_inner.h (i)): sums a few binary64 ulps from a rounding boundary
 * (oracle_gen_plain_edge) through every path against MPFR; then (i) itself: whatever it
 * accepts, in any direction and op, rounds as MPFR says (with the bound 2^10 times too small
 * this fails), it accepts and refuses such elements both, and it decides nearly every element
 * of terms spread over +-60 binades to nearest (the common case it is for). */
Test(engine, plain_sums_decide_wide_elements_away_from_rounding_boundaries)
{
    static const int ns[] = {2, 3, 5, 8, 17, 64};
    const reprod_type types[] = {REPROD_FLOAT32, REPROD_BFLOAT16};
    for (int t = 0; t < 2; t++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++)
            run_generated("plain-edge", types[t], ns[s], 160, oracle_gen_plain_edge, 41);
    for (int t = 0; t < 2; t++) {
        const struct tfmt *f = &test_formats[types[t]];
        struct rng r = {42};
        int accepted = 0, refused = 0, spread_accepted = 0;
        for (int i = 0; i < 3000; i++) {
            int n = ns[i % (sizeof ns / sizeof ns[0])];
            uint64_t terms[64];
            const void *pointers[64];
            oracle_gen_plain_edge(f, &r, n, terms);
            for (int k = 0; k < n; k++)
                pointers[k] = &terms[k];
            uint32_t largest;
            double s = engine_bracket_plain_sum(types[t], pointers, n, 0, &largest);
            for (int op = REPROD_SUM; op <= REPROD_AVG; op++)
                for (int dir = 0; dir < 4; dir++) {
                    uint64_t bits = 0;
                    if (!engine_bracket_decides(types[t], (reprod_op)op, (reprod_rounding)dir, s,
                                                largest, n)) {
                        refused++;
                        continue;
                    }
                    accepted++;
                    cr_assert(engine_float32_finish(types[t], (reprod_op)op, (reprod_rounding)dir,
                                                    s, 0.0, pointers, n, 0, &bits));
                    uint64_t expected =
                        oracle_exact(types[t], (reprod_op)op, (reprod_rounding)dir, terms, n);
                    if (bits != expected) {
                        for (int k = 0; k < n; k++)
                            fprintf(stderr, " %#llx", (unsigned long long)terms[k]);
                        cr_assert_fail("(i) %s %s %s N=%d: %#llx, MPFR %#llx (s = %a)", f->name,
                                       test_op_names[op], test_rounding_names[dir], n,
                                       (unsigned long long)bits, (unsigned long long)expected, s);
                    }
                }
            /* spread over +-60 binades around 2^0, any signs, N = 8 */
            for (int k = 0; k < 8; k++) {
                terms[k] = tf_make(f, (int)(rng_next(&r) & 1), f->bias + rng_range(&r, -60, 60),
                                   rng_next(&r));
                pointers[k] = &terms[k];
            }
            s = engine_bracket_plain_sum(types[t], pointers, 8, 0, &largest);
            spread_accepted += engine_bracket_decides(types[t], REPROD_SUM, REPROD_ROUND_NEAREST, s,
                                                      largest, 8) != 0; /* a mask: -1 */
        }
        cr_expect_gt(accepted, 3000, "%s: (i) accepted %d edge cases", f->name, accepted);
        cr_expect_gt(refused, 3000, "%s: (i) refused %d edge cases", f->name, refused);
        cr_expect_geq(spread_accepted, 2990, "%s: (i) decided %d of 3000 spread elements", f->name,
                      spread_accepted);
    }
}

/* Binary32 and bfloat16 chunks beyond the window where cancelling blocks interrupt spread ones:
 * the tier then runs the split sums before the bracket for a while (engine_beyond_window.c,
 * BEYOND_BRACKET_SKIP), and every kernel level must still send to the general path exactly what
 * the per-element tiers refuse, for sums and averages in every direction (averages once took 128
 * of these 576 elements there to nearest, where the tiers refuse none, and 144 for 17
 * directed), with MPFR's bits. */
static void gen_spread_or_cancelling_block(const struct tfmt *f, struct rng *r, int n,
                                           uint64_t *terms)
{
    static size_t element;
    int cancelling = (element++ / 16) % 9 == 4; /* one block of 16 in nine */
    for (int k = 0; k < n; k++)
        terms[k] =
            tf_make(f, (int)(rng_next(r) & 1), f->bias + rng_range(r, -60, 60), random_frac(f, r));
    if (!cancelling || n < 4) return;
    for (int k = 0; k + 1 < n - 2; k += 2) /* +-x pairs, then two tiny terms */
        terms[k + 1] = terms[k] ^ tf_sign(f);
    terms[n - 2] = tf_make(f, (int)(rng_next(r) & 1), f->bias - 90, random_frac(f, r));
    terms[n - 1] = tf_make(f, (int)(rng_next(r) & 1), f->bias - 100, random_frac(f, r));
}

Test(engine, every_kernel_sends_the_same_wide_binary32_elements_to_the_general_path)
{
    enum { COUNT = 16 * 9 * 4 };
    const reprod_type types[] = {REPROD_FLOAT32, REPROD_BFLOAT16};
    for (int t = 0; t < 2; t++) {
        struct rng r = {77};
        struct tcase c = case_generated("spread-cancel-blocks", types[t], 8, COUNT,
                                        gen_spread_or_cancelling_block, &r);
        int order[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        void **buffers = case_buffers(&c, order);
        void *out = malloc(COUNT * 4);
        for (int op = REPROD_SUM; op <= REPROD_AVG; op++)
            for (int dir = 0; dir < 4; dir++) {
                int expected = general_by_element_in(types[t], (reprod_op)op, (reprod_rounding)dir,
                                                     buffers, 8, COUNT, NULL);
                for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
                    if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
                    struct reprod_engine_stats stats = {0};
                    reprod_engine_exact(types[t], (reprod_op)op, (reprod_rounding)dir,
                                        (const void *const *)buffers, 8, COUNT, out, NULL, &stats);
                    engine_limit_kernels(ENGINE_KERNELS_AUTO);
                    cr_expect_eq(stats.general_elements, (size_t)expected,
                                 "%s %s %s kernel level %d: %zu general elements, expected %d",
                                 test_formats[types[t]].name, test_op_names[op],
                                 test_rounding_names[dir], level, stats.general_elements, expected);
                }
            }
        free(out);
        buffers_free(buffers, 8);
        check_exact(&c, &r);
        free(c.terms);
    }
}

Test(engine, exact_many_contributions_across_blocks_of_elements)
{
    /* Above 16 binary64 contributions the AVX-512 kernel keeps a block of 256 elements' states
     * while groups of 8 contributions stream through: counts that end mid-block and mid-group,
     * with fast, certified and general elements mixed, in place too (check_exact). */
    static const int ns[] = {17, 23, 40, 64};
    static const size_t counts[] = {16, 255, 529};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            run_generated("blocks-mixed", REPROD_FLOAT64, ns[i], counts[c], gen_mixed, 18);
            run_generated("blocks-wide", REPROD_FLOAT64, ns[i], counts[c], gen_wide_boundary, 19);
        }
}

Test(engine, exact_element_counts_that_are_not_multiples_of_the_block)
{
    static const size_t counts[] = {1, 7, 8, 9, 63, 257, 1000};
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            run_generated("count-similar", (reprod_type)t, 4, counts[c], gen_similar, 12);
            run_generated("count-wide", (reprod_type)t, 3, counts[c], gen_wide, 13);
        }
}

Test(engine, exact_fast_and_general_paths_agree_and_both_run)
{
    /* Blocks mixing fast and general elements: every fourth element is spread widely (binary16
     * sums are always exact in binary64, so there an infinity sends it to the general path; a
     * wide binary64 element is mostly certified (engine_inner.h (d)), so every eighth one holds
     * an infinity too). */
    for (int t = 0; t < ALL_TYPES; t++) {
        struct rng r = {100 + (uint64_t)t};
        struct tcase c = case_new("mixed", (reprod_type)t, 8, 203);
        uint64_t terms[8];
        for (size_t i = 0; i < c.count; i++) {
            int special = t == REPROD_FLOAT16 || (t == REPROD_FLOAT64 && i % 8 == 0);
            generator *odd = special ? gen_specials : gen_wide;
            (i % 4 == 0 ? odd : gen_similar)(&test_formats[t], &r, 8, terms);
            for (int k = 0; k < 8; k++)
                c.terms[(size_t)k * c.count + i] = terms[k];
        }
        fast_elements_seen = general_elements_seen = 0;
        check_exact(&c, &r);
        cr_assert_gt(fast_elements_seen, 0);
        cr_assert_gt(general_elements_seen, 0);
        free(c.terms);
    }
}

/* Hand-picked cases with known answers, as a cross-check of the oracle itself. */
Test(engine, exact_known_answers)
{
    float a[4] = {1.0f, 0x1p-24f, 0x1p-24f, -0.0f}; /* 1 + 2^-23 exactly */
    float b[4] = {0x1p-24f, 0.0f, -0x1p-24f, -0.0f};
    float c3[4] = {0x1p-24f, -0.0f, 0x1p-149f, -0.0f};
    const void *in[3] = {a, b, c3};
    float out[4];
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, in, 3, 4, out),
        REPROD_OK);
    cr_assert_eq(out[0], 1.0f + 0x1p-23f);
    cr_assert_eq(out[1], 0x1p-24f);
    cr_assert_eq(out[2], 0x1p-149f);
    cr_assert(out[3] == 0 && signbit(out[3]), "all -0 must give -0");
    double big[1] = {1e308}, nbig[1] = {-1e308}, tiny[1] = {0x1p-1074};
    const void *in2[3] = {big, tiny, nbig};
    double r;
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT64, REPROD_SUM, REPROD_ROUND_NEAREST, in2, 3, 1, &r),
        REPROD_OK);
    cr_assert_eq(r, 0x1p-1074);
    double third = 1.0 / 3.0, one[1] = {1.0}, zero[1] = {0.0}, zero2[1] = {0.0};
    const void *in3[3] = {one, zero, zero2};
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT64, REPROD_AVG, REPROD_ROUND_NEAREST, in3, 3, 1, &r),
        REPROD_OK);
    cr_assert_eq(r, third);
    /* A sum just above the largest double, inside the fast window: it rounds up to infinity,
     * but its mean (N = 2) is finite and rounds up to 2^1023. */
    double a15[1] = {0x1.8p1023}, b_below[1] = {0x1p1022 - 0x1p969};
    const void *in4[2] = {a15, b_below};
    cr_assert_eq(reprod_reduce_exact(REPROD_FLOAT64, REPROD_SUM, REPROD_ROUND_UP, in4, 2, 1, &r),
                 REPROD_OK);
    cr_assert(isinf(r) && r > 0);
    cr_assert_eq(reprod_reduce_exact(REPROD_FLOAT64, REPROD_AVG, REPROD_ROUND_UP, in4, 2, 1, &r),
                 REPROD_OK);
    cr_assert_eq(r, 0x1p1023);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT64, REPROD_AVG, REPROD_ROUND_NEAREST, in4, 2, 1, &r),
        REPROD_OK);
    cr_assert_eq(r, 0x1p1023); /* the mean is 2^1023 - 2^968: a quarter ulp below */
    cr_assert_eq(reprod_reduce_exact(REPROD_FLOAT64, REPROD_AVG, REPROD_ROUND_ZERO, in4, 2, 1, &r),
                 REPROD_OK);
    cr_assert_eq(r, 0x1p1023 - 0x1p970);
}

Test(engine, exact_ignores_and_restores_the_caller_fp_environment)
{
    for (int t = 0; t < ALL_TYPES; t++) {
        struct rng r = {200 + (uint64_t)t};
        size_t count = 100, bytes = (count + 1) * tf_size((reprod_type)t);
        struct tcase c = case_new("env", (reprod_type)t, 5, count);
        uint64_t terms[5];
        for (size_t i = 0; i < count; i++) {
            (i % 2 ? gen_subnormal : gen_similar)(&test_formats[t], &r, 5, terms);
            for (int k = 0; k < 5; k++)
                c.terms[(size_t)k * count + i] = terms[k];
        }
        int order[5] = {0, 1, 2, 3, 4};
        void **buffers = case_buffers(&c, order);
        const void *const *in = (const void *const *)buffers;
        void *reference = malloc(bytes), *under_env = malloc(bytes);
        for (int op = 0; op < 2; op++) {
            for (int dir = 0; dir < 4; dir++) {
                reprod_reduce_exact((reprod_type)t, op, dir, in, 5, count, reference);
                fesetround(FE_UPWARD);
                unsigned int csr = _mm_getcsr() | 0x8040; /* FTZ and DAZ */
                _mm_setcsr(csr);
                feclearexcept(FE_ALL_EXCEPT);
                reprod_reduce_exact((reprod_type)t, op, dir, in, 5, count, under_env);
                cr_assert_eq(fegetround(), FE_UPWARD, "rounding mode not restored");
                cr_assert_eq(_mm_getcsr(), csr, "MXCSR not restored");
                cr_assert_eq(fetestexcept(FE_ALL_EXCEPT), 0, "exception flags leaked");
                reprod_reduce_ordered((reprod_type)t, op, in, 5, count, under_env);
                cr_assert_eq(_mm_getcsr(), csr, "MXCSR not restored by ordered");
                fesetenv(FE_DFL_ENV); /* the default environment, flags clear */
                reprod_reduce_exact((reprod_type)t, op, dir, in, 5, count, under_env);
                cr_assert_eq(memcmp(reference, under_env, count * tf_size((reprod_type)t)), 0);
                cr_assert_eq(fetestexcept(FE_ALL_EXCEPT), 0, "exception flags leaked (default)");
                feraiseexcept(FE_INEXACT); /* a flag the caller had stays, alone */
                reprod_reduce_exact((reprod_type)t, op, dir, in, 5, count, under_env);
                cr_assert_eq(fetestexcept(FE_ALL_EXCEPT), FE_INEXACT, "exception flags changed");
                feclearexcept(FE_ALL_EXCEPT);
                fesetround(FE_DOWNWARD);
                _mm_setcsr(_mm_getcsr() | 0x8040);
                reprod_reduce_exact((reprod_type)t, op, dir, in, 5, count, under_env);
                fesetenv(FE_DFL_ENV);
                cr_assert_eq(memcmp(reference, under_env, count * tf_size((reprod_type)t)), 0,
                             "result depends on the caller's environment (%s)",
                             test_formats[t].name);
            }
        }
        free(reference);
        free(under_env);
        buffers_free(buffers, 5);
        free(c.terms);
    }
}

/* The ordered fold (sum, average, product) against MPFR rounding each operation (and, for binary32
 * and binary64, a plain fold in the type). Finite inputs; overflow to infinity included. */
static void check_ordered(reprod_type t, int n, size_t count, generator *gen, uint64_t seed)
{
    struct rng r = {seed};
    struct tcase c = case_new("ordered", t, n, count);
    uint64_t terms[ORACLE_MAX_TERMS];
    for (size_t i = 0; i < count; i++) {
        gen(&test_formats[t], &r, n, terms);
        for (int k = 0; k < n; k++)
            c.terms[(size_t)k * count + i] = terms[k];
    }
    int order[ORACLE_MAX_TERMS];
    for (int k = 0; k < n; k++)
        order[k] = k;
    void **buffers = case_buffers(&c, order);
    void *out = malloc((count + 1) * tf_size(t));
    size_t mismatches = 0;
    for (int run = 0; run < 3 * (ENGINE_KERNELS_AVX512 + 1); run++) {
        int op = run % 3, level = run / 3; /* every op, every kernel level this CPU runs */
        if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
        int rc = reprod_reduce_ordered(t, op, (const void *const *)buffers, n, count, out);
        engine_limit_kernels(ENGINE_KERNELS_AUTO);
        cr_assert_eq(rc, REPROD_OK);
        for (size_t i = 0; i < count; i++) {
            for (int k = 0; k < n; k++)
                terms[k] = c.terms[(size_t)k * count + i];
            uint64_t expected = oracle_ordered(t, op, terms, n);
            uint64_t got = load_result(t, out, i);
            if (t == REPROD_FLOAT32 && op == REPROD_SUM) {
                float acc = (float)tf_to_double(t, terms[0]);
                for (int k = 1; k < n; k++)
                    acc += (float)tf_to_double(t, terms[k]);
                uint32_t plain;
                memcpy(&plain, &acc, 4);
                cr_assert_eq(plain, expected, "MPFR and the plain fold disagree");
            }
            if (t == REPROD_FLOAT64 && op == REPROD_SUM) {
                double acc = tf_to_double(t, terms[0]);
                for (int k = 1; k < n; k++)
                    acc += tf_to_double(t, terms[k]);
                cr_assert_eq(tf_from_double(t, acc), expected, "MPFR and the plain fold disagree");
            }
            const struct tfmt *f = &test_formats[t];
            int both_nan = tf_is_nan(f, expected) && tf_is_nan(f, got);
            if (got != expected && !both_nan) {
                if (mismatches < MAX_REPORTS)
                    report(&c, "ordered", op, REPROD_ROUND_NEAREST, i, expected, got);
                mismatches++;
            }
        }
    }
    /* In place gives the same bits. */
    void *copy = malloc((count + 1) * tf_size(t));
    for (int op = 0; op < 3; op++) {
        reprod_reduce_ordered(t, op, (const void *const *)buffers, n, count, out);
        void *saved0 = buffers[0];
        memcpy(copy, saved0, count * tf_size(t));
        buffers[0] = copy;
        reprod_reduce_ordered(t, op, (const void *const *)buffers, n, count, copy);
        buffers[0] = saved0;
        cr_assert_eq(memcmp(copy, out, count * tf_size(t)), 0, "ordered in place differs");
    }
    free(copy);
    cr_expect_eq(mismatches, 0, "ordered %s N=%d: %zu mismatches", test_formats[t].name, n,
                 mismatches);
    free(out);
    buffers_free(buffers, n);
    free(c.terms);
}

Test(engine, ordered_equals_the_reference_fold)
{
    static const int ns[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 40};
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
            check_ordered((reprod_type)t, ns[s], 1031, gen_similar, 300 + s);
            check_ordered((reprod_type)t, ns[s], 77, gen_wide, 400 + s);
            check_ordered((reprod_type)t, ns[s], 77, gen_subnormal, 500 + s);
            check_ordered((reprod_type)t, ns[s], 77, gen_overflow, 600 + s);
        }
}

Test(engine, invalid_arguments_return_einval)
{
    float x[2] = {1, 2}, y[2] = {3, 4}, out[2];
    const void *in[2] = {x, y};
    const void *with_null[2] = {x, NULL};
    cr_assert_eq(reprod_type_size(REPROD_FLOAT16), 2);
    cr_assert_eq(reprod_type_size(REPROD_BFLOAT16), 2);
    cr_assert_eq(reprod_type_size(REPROD_FLOAT32), 4);
    cr_assert_eq(reprod_type_size(REPROD_FLOAT64), 8);
    cr_assert_eq(reprod_type_size((reprod_type)7), 0);
    cr_assert_eq(
        reprod_reduce_exact((reprod_type)9, REPROD_SUM, REPROD_ROUND_NEAREST, in, 2, 2, out),
        REPROD_EINVAL);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, (reprod_op)5, REPROD_ROUND_NEAREST, in, 2, 2, out),
        REPROD_EINVAL);
    cr_assert_eq(reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, (reprod_rounding)4, in, 2, 2, out),
                 REPROD_EINVAL);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, in, 0, 2, out),
        REPROD_EINVAL);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, NULL, 2, 2, out),
        REPROD_EINVAL);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, with_null, 2, 2, out),
        REPROD_EINVAL);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, in, 2, 2, NULL),
        REPROD_EINVAL);
    cr_assert_eq(reprod_reduce_ordered((reprod_type)9, REPROD_SUM, in, 2, 2, out), REPROD_EINVAL);
    cr_assert_eq(reprod_reduce_ordered(REPROD_FLOAT32, (reprod_op)3, in, 2, 2, out), REPROD_EINVAL);
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_PROD, REPROD_ROUND_NEAREST, in, 2, 2, out),
        REPROD_EINVAL, "a product has no exact mode");
    cr_assert_eq(reprod_reduce_ordered(REPROD_FLOAT32, REPROD_SUM, in, -1, 2, out), REPROD_EINVAL);
    cr_assert_eq(reprod_reduce_ordered(REPROD_FLOAT32, REPROD_SUM, with_null, 2, 2, out),
                 REPROD_EINVAL);
    cr_assert_eq(reprod_engine_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, in, 2, 2,
                                     NULL, NULL, NULL),
                 REPROD_EINVAL);
    /* element_count 0 does nothing and is fine, even with NULL buffers. */
    cr_assert_eq(
        reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, NULL, 2, 0, NULL),
        REPROD_OK);
    cr_assert_eq(reprod_reduce_ordered(REPROD_FLOAT32, REPROD_SUM, NULL, 2, 0, NULL), REPROD_OK);
}

/* engine_ordered_element (the GPU kernels' ordered fold) gives reprod_reduce_ordered's bits,
 * NaNs included, for every type, op and kernel level, on every kind of input. */
Test(engine, ordered_element_equals_the_vector_fold_bitwise)
{
    static const int ns[] = {1, 2, 3, 5, 8, 9, 17, 33};
    const size_t count = 203;
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
            int n = ns[s];
            struct rng r = {7000 + 10 * (uint64_t)t + s};
            struct tcase c = case_new("ordered_element", (reprod_type)t, n, count);
            uint64_t terms[ORACLE_MAX_TERMS];
            for (size_t i = 0; i < count; i++) {
                gen_mixed(&test_formats[t], &r, n, terms);
                for (int k = 0; k < n; k++)
                    c.terms[(size_t)k * count + i] = terms[k];
            }
            int order[ORACLE_MAX_TERMS];
            for (int k = 0; k < n; k++)
                order[k] = k;
            void **buffers = case_buffers(&c, order);
            void *out = malloc(count * tf_size((reprod_type)t));
            for (int run = 0; run < 3 * (ENGINE_KERNELS_AVX512 + 1); run++) {
                int op = run % 3, level = run / 3;
                if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
                int rc = reprod_reduce_ordered((reprod_type)t, op, (const void *const *)buffers, n,
                                               count, out);
                engine_limit_kernels(ENGINE_KERNELS_AUTO);
                cr_assert_eq(rc, REPROD_OK);
                for (size_t i = 0; i < count; i++) {
                    uint64_t element = engine_ordered_element((reprod_type)t, op,
                                                              (const void *const *)buffers, n, i);
                    uint64_t got = load_result((reprod_type)t, out, i);
                    if (element != got) report(&c, "ordered element", op, 0, i, got, element);
                    cr_assert_eq(element, got, "%s %s N=%d level %d element %zu: %#llx vs %#llx",
                                 test_formats[t].name, test_op_names[op], n, level, i,
                                 (unsigned long long)element, (unsigned long long)got);
                }
            }
            free(out);
            buffers_free(buffers, n);
            free(c.terms);
        }
}

/* The fixed-point route's host arrays (engine_fixed.c) at every kernel level, the codes reduced
 * through the wire (reprod_engine_fixed_pack): an element whose finite terms cancel exactly (x,
 * -x and zeros of either sign) sums to -0 rounding down and to +0 in every other direction
 * (docs/design.md, Guarantees; IEEE 754's rule for an exact zero sum), in the blocks of one
 * word and in the tail after them; and so does an element of zeros of both signs (in the tail,
 * beside finite ones in its block of codes). */
Test(engine, fixed_route_rounds_exact_zero_sums_by_direction_at_every_kernel_level)
{
    enum { COUNT = 3 * 64 + 5, N = 4, TAIL = 3 * 64 };
    float terms[N][COUNT];
    size_t zeros = 0;
    for (size_t i = 0; i < COUNT; i++) {
        terms[0][i] = ldexpf(1.0f + (float)i / 256.0f, (int)(i % 5) - 2);
        terms[1][i] = -terms[0][i];
        terms[2][i] = (i & 1) ? -0.0f : 0.0f;
        terms[3][i] = 0.0f;
        if (i >= TAIL && i % 2) { /* zeros only: -0, -0, -0, +0 */
            terms[0][i] = terms[1][i] = terms[2][i] = -0.0f;
            zeros++;
        }
    }
    for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
        if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
        for (int d = 0; d < 4; d++) {
            reprod_rounding dir = (reprod_rounding)d;
            uint8_t codes[2 * COUNT], mine[2 * COUNT], wire[2 * COUNT], reduced[2 * COUNT];
            size_t wire_bytes = reprod_engine_fixed_packed_bytes(REPROD_FLOAT32, COUNT);
            memset(reduced, 0, sizeof reduced);
            for (int k = 0; k < N; k++) {
                reprod_engine_fixed_codes(REPROD_FLOAT32, terms[k], COUNT, mine);
                reprod_engine_fixed_pack(REPROD_FLOAT32, dir, mine, COUNT, wire);
                for (size_t b = 0; b < wire_bytes; b++)
                    reduced[b] = wire[b] > reduced[b] ? wire[b] : reduced[b];
            }
            reprod_engine_fixed_unpack(REPROD_FLOAT32, dir, reduced, COUNT, codes);
            size_t offsets[COUNT + 1];
            size_t words =
                reprod_engine_fixed_layout(REPROD_FLOAT32, N, dir, codes, COUNT, offsets);
            cr_assert_eq(words, COUNT - zeros, "one word a finite element (level %d)", level);
            int64_t sums[COUNT] = {0}, part[COUNT];
            for (int k = 0; k < N; k++) {
                reprod_engine_fixed_split(REPROD_FLOAT32, N, dir, terms[k], codes, COUNT, offsets,
                                          part);
                for (size_t w = 0; w < words; w++)
                    sums[w] += part[w];
            }
            float out[COUNT];
            reprod_engine_fixed_round(REPROD_FLOAT32, REPROD_SUM, N, dir, codes, COUNT, offsets,
                                      sums, out);
            uint32_t zero = dir == REPROD_ROUND_DOWN ? 0x80000000u : 0;
            for (size_t i = 0; i < COUNT; i++) {
                uint32_t bits;
                memcpy(&bits, &out[i], sizeof bits);
                cr_assert_eq(bits, zero, "level %d direction %d element %zu: %08x, expected %08x",
                             level, d, i, bits, zero);
            }
        }
    }
    engine_limit_kernels(ENGINE_KERNELS_AUTO);
}

/* The host's wire (reprod_engine_fixed_pack and _unpack: SSE2 blocks on x86-64) against the
 * element functions the kernels run (engine_fixed_pack_block, engine_fixed_unpack_block), byte
 * for byte, on codes and wires of any bytes (not only those terms give), every direction, every
 * count from 0 to 80 (whole blocks and tails), binary32's blocks of 8 and bfloat16's of 1. */
Test(engine, fixed_wire_on_the_host_matches_the_element_functions)
{
    static const reprod_type types[] = {REPROD_FLOAT32, REPROD_BFLOAT16};
    static const uint8_t likely[] = {0, 1, 2, 3, 4, 253, 254, 255};
    struct rng r = {20261205};
    uint8_t codes[160], got[180], want[180];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        struct engine_format f = engine_format_of(types[t]);
        size_t block = (size_t)engine_fixed_lo_block(&f);
        for (int d = 0; d < 4; d++)
            for (size_t count = 0; count <= 80; count++)
                for (int trial = 0; trial < 40; trial++) {
                    for (size_t b = 0; b < sizeof codes; b++)
                        codes[b] = rng_range(&r, 0, 1) ? likely[rng_range(&r, 0, 7)]
                                                       : (uint8_t)rng_next(&r);
                    size_t bytes = reprod_engine_fixed_packed_bytes(types[t], count);
                    memset(got, 0xa5, sizeof got), memset(want, 0xa5, sizeof want);
                    reprod_engine_fixed_pack(types[t], (reprod_rounding)d, codes, count, got);
                    for (size_t i = 0; i < count; i += block)
                        engine_fixed_pack_block(
                            codes + 2 * i, (int)(count - i < block ? count - i : block),
                            (reprod_rounding)d, want + i, want + count + i / block);
                    cr_assert(memcmp(got, want, sizeof got) == 0,
                              "pack: type %d direction %d count %zu", types[t], d, count);
                    /* the codes as a wire of `bytes` bytes, unpacked */
                    memset(got, 0xa5, sizeof got), memset(want, 0xa5, sizeof want);
                    reprod_engine_fixed_unpack(types[t], (reprod_rounding)d, codes, count, got);
                    for (size_t i = 0; i < count; i += block)
                        engine_fixed_unpack_block(codes + i, codes[count + i / block],
                                                  (int)(count - i < block ? count - i : block),
                                                  (reprod_rounding)d, want + 2 * i);
                    cr_assert(memcmp(got, want, sizeof got) == 0 && bytes <= sizeof codes,
                              "unpack: type %d direction %d count %zu", types[t], d, count);
                }
    }
}
