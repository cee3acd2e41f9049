/* engine_cases.h: the exact engine's test harness and input generators (for test_engine.c).
 *
 * check_exact runs one case for every rounding direction and op, in every way the engine can
 * run it (default, force_general, each kernel level, permuted, in place) and compares each
 * result with the MPFR oracle; the generators build the elements of the cases.
 */
#ifndef REPROD_TEST_ENGINE_CASES_H
#define REPROD_TEST_ENGINE_CASES_H

#include <criterion/criterion.h>

#include "engine/engine.h"
#include "engine/engine_inner.h"   /* white box: the fast-path windows */
#include "engine/engine_kernels.h" /* white box: pin each kernel level */
#include "engine_oracle.h"

#include <stdlib.h>

#define ALL_TYPES   4
#define MAX_REPORTS 5 /* mismatches printed in full per case */

/* One test case: count elements of n contributions, terms[k * count + i]. */
struct tcase {
    const char *label;
    reprod_type type;
    int n;
    size_t count;
    uint64_t *terms;
};

static struct tcase case_new(const char *label, reprod_type type, int n, size_t count)
{
    struct tcase c = {label, type, n, count, calloc((size_t)n * count, sizeof(uint64_t))};
    cr_assert_not_null(c.terms);
    return c;
}

/* Contribution buffers of the case's type, in the order given by `order` (NULL: as they are). */
static void **case_buffers(const struct tcase *c, const int *order)
{
    size_t size = tf_size(c->type);
    void **buffers = calloc((size_t)c->n, sizeof(void *));
    for (int k = 0; k < c->n; k++) {
        buffers[k] = calloc(c->count + 1, size);
        for (size_t i = 0; i < c->count; i++) {
            uint64_t bits = c->terms[(size_t)(order ? order[k] : k) * c->count + i];
            memcpy((char *)buffers[k] + i * size, &bits, size);
        }
    }
    return buffers;
}

static void buffers_free(void **buffers, int n)
{
    for (int k = 0; k < n; k++)
        free(buffers[k]);
    free(buffers);
}

static uint64_t load_result(reprod_type t, const void *array, size_t i)
{
    uint64_t bits = 0;
    memcpy(&bits, (const char *)array + i * tf_size(t), tf_size(t));
    return bits;
}

static void report(const struct tcase *c, const char *how, reprod_op op, reprod_rounding dir,
                   size_t i, uint64_t expected, uint64_t got)
{
    fprintf(stderr, "MISMATCH %s [%s]: type=%s op=%s rounding=%s N=%d element=%zu/%zu\n", c->label,
            how, test_formats[c->type].name, test_op_names[op], test_rounding_names[dir], c->n, i,
            c->count);
    fprintf(stderr, "  contributions:");
    for (int k = 0; k < c->n; k++)
        fprintf(stderr, " %#llx", (unsigned long long)c->terms[(size_t)k * c->count + i]);
    fprintf(stderr, "\n  expected %#llx got %#llx\n", (unsigned long long)expected,
            (unsigned long long)got);
}

/* Path counters over a whole test, to show that both paths ran. */
static size_t fast_elements_seen, general_elements_seen;

/* Run the case in every type-independent way and compare with the oracle; returns the number
 * of mismatches (and asserts there are none). */
static size_t check_exact(const struct tcase *c, struct rng *r)
{
    size_t mismatches = 0, reported = 0;
    int n = c->n;
    int identity[ORACLE_MAX_TERMS], permuted[ORACLE_MAX_TERMS];
    for (int k = 0; k < n; k++)
        identity[k] = permuted[k] = k;
    for (int k = n - 1; k > 0; k--) {
        int j = rng_range(r, 0, k), tmp = permuted[k];
        permuted[k] = permuted[j];
        permuted[j] = tmp;
    }
    void **straight = case_buffers(c, identity);
    void **shuffled = case_buffers(c, permuted);
    size_t bytes = (c->count + 1) * tf_size(c->type);
    void *out_default = malloc(bytes), *out_general = malloc(bytes);
    void *out_shuffled = malloc(bytes), *in_place = malloc(bytes), *out_level = malloc(bytes);
    uint64_t *expected = malloc(c->count * sizeof(uint64_t));
    uint64_t terms[ORACLE_MAX_TERMS];
    for (int op = REPROD_SUM; op <= REPROD_AVG; op++) {
        for (int dir = REPROD_ROUND_NEAREST; dir <= REPROD_ROUND_DOWN; dir++) {
            for (size_t i = 0; i < c->count; i++) {
                for (int k = 0; k < n; k++)
                    terms[k] = c->terms[(size_t)k * c->count + i];
                expected[i] = oracle_exact(c->type, op, dir, terms, n);
            }
            struct reprod_engine_options general = {.force_general = 1};
            struct reprod_engine_stats s_default = {0}, s_general = {0};
            const void *const *in = (const void *const *)straight;
            cr_assert_eq(reprod_engine_exact(c->type, op, dir, in, n, c->count, out_default, NULL,
                                             &s_default),
                         REPROD_OK);
            /* Every narrower kernel level this CPU runs gives the same bits as the default. */
            for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
                if (engine_limit_kernels((enum engine_kernel_level)level) != 0) continue;
                cr_assert_eq(
                    reprod_engine_exact(c->type, op, dir, in, n, c->count, out_level, NULL, NULL),
                    REPROD_OK);
                engine_limit_kernels(ENGINE_KERNELS_AUTO);
                for (size_t i = 0; i < c->count; i++) {
                    uint64_t got = load_result(c->type, out_level, i);
                    if (got != expected[i]) {
                        char name[32];
                        snprintf(name, sizeof name, "kernel level %d", level);
                        if (reported++ < MAX_REPORTS) report(c, name, op, dir, i, expected[i], got);
                        mismatches++;
                    }
                }
            }
            cr_assert_eq(reprod_engine_exact(c->type, op, dir, in, n, c->count, out_general,
                                             &general, &s_general),
                         REPROD_OK);
            cr_assert_eq(s_general.general_elements, c->count);
            general_elements_seen += s_default.general_elements;
            fast_elements_seen += c->count - s_default.general_elements;
            cr_assert_eq(reprod_reduce_exact(c->type, op, dir, (const void *const *)shuffled, n,
                                             c->count, out_shuffled),
                         REPROD_OK);
            /* In place: the result overwrites a copy of contribution 0. */
            void *saved0 = straight[0];
            memcpy(in_place, saved0, bytes);
            straight[0] = in_place;
            cr_assert_eq(reprod_reduce_exact(c->type, op, dir, in, n, c->count, in_place),
                         REPROD_OK);
            straight[0] = saved0;
            const void *outputs[4] = {out_default, out_general, out_shuffled, in_place};
            const char *names[4] = {"default", "force_general", "permuted", "in_place"};
            for (size_t i = 0; i < c->count; i++) {
                for (int w = 0; w < 4; w++) {
                    uint64_t got = load_result(c->type, outputs[w], i);
                    if (got != expected[i]) {
                        if (reported++ < MAX_REPORTS)
                            report(c, names[w], op, dir, i, expected[i], got);
                        mismatches++;
                    }
                }
            }
        }
    }
    buffers_free(straight, n);
    buffers_free(shuffled, n);
    free(out_default);
    free(out_general);
    free(out_shuffled);
    free(in_place);
    free(out_level);
    free(expected);
    cr_expect_eq(mismatches, 0, "%s: %zu mismatches (type %s, N=%d, count=%zu)", c->label,
                 mismatches, test_formats[c->type].name, c->n, c->count);
    return mismatches;
}

/* ---- Generators: each fills the n terms of one element --------------------------------- */

typedef void generator(const struct tfmt *f, struct rng *r, int n, uint64_t *terms);

/* A case whose elements the per-element generator fills. */
static struct tcase case_generated(const char *label, reprod_type t, int n, size_t count,
                                   generator *gen, struct rng *r)
{
    struct tcase c = case_new(label, t, n, count);
    uint64_t terms[ORACLE_MAX_TERMS];
    for (size_t i = 0; i < count; i++) {
        gen(&test_formats[t], r, n, terms);
        for (int k = 0; k < n; k++)
            c.terms[(size_t)k * count + i] = terms[k];
    }
    return c;
}

/* Build a case from a per-element generator and check it. */
static void run_generated(const char *label, reprod_type t, int n, size_t count, generator *gen,
                          uint64_t seed)
{
    struct rng r = {seed ^ ((uint64_t)t << 32) ^ (uint64_t)n * 7919 ^ count};
    struct tcase c = case_generated(label, t, n, count, gen, &r);
    check_exact(&c, &r);
    free(c.terms);
}

static uint64_t random_frac(const struct tfmt *f, struct rng *r)
{
    return rng_next(r) & tf_frac_mask(f);
}

/* Similar magnitudes: exponents within 3 of a per-element centre, random signs. */
static void gen_similar(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int centre = rng_range(r, 8, tf_max_field(f) - 8);
    for (int k = 0; k < n; k++)
        terms[k] =
            tf_make(f, (int)(rng_next(r) & 1), centre + rng_range(r, -3, 3), random_frac(f, r));
}

/* Any finite value: every exponent field, subnormals, zeros now and then. */
static void gen_wide(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    for (int k = 0; k < n; k++) {
        int field = rng_range(r, 0, tf_max_field(f));
        uint64_t frac = rng_range(r, 0, 9) == 0 ? 0 : random_frac(f, r);
        terms[k] = tf_make(f, (int)(rng_next(r) & 1), field, frac);
    }
}

/* x, -x pairs (plus a zero of either sign when n is odd) in random order: exactly zero. */
static void gen_cancel(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int k = 0;
    for (; k + 1 < n; k += 2) {
        uint64_t x = tf_make(f, 0, rng_range(r, 0, tf_max_field(f)), random_frac(f, r));
        terms[k] = x;
        terms[k + 1] = x | tf_sign(f);
    }
    if (k < n) terms[k] = (rng_next(r) & 1) ? tf_sign(f) : 0;
    rng_shuffle(r, terms, n);
}

/* Only zeros: all -0, all +0, or mixed, chosen per element. */
static void gen_zeros(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int kind = rng_range(r, 0, 2);
    for (int k = 0; k < n; k++)
        terms[k] = kind == 0 ? tf_sign(f) : kind == 1 ? 0 : (rng_next(r) & 1) ? tf_sign(f) : 0;
}

/* a + ulp(a)/2 (an exact tie at the type's precision), optionally nudged by a tiny term just
 * above or below, padded with cancelling pairs. For AVG: consecutive values a, a + ulp
 * repeated, whose mean is a tie. */
static void gen_ties(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int negative = (int)(rng_next(r) & 1);
    int field = rng_range(r, f->p + 12, tf_max_field(f) - 2);
    uint64_t a = tf_make(f, negative, field, random_frac(f, r));
    int kind = rng_range(r, 0, 3);
    int k = 0;
    if (kind == 3 && n % 2 == 0) { /* mean of a and its successor, repeated */
        for (; k < n; k += 2) {
            terms[k] = a;
            terms[k + 1] = a + 1;
        }
        return;
    }
    terms[k++] = a;
    if (k < n) terms[k++] = tf_make(f, negative, field - f->p, 0); /* half an ulp of a */
    if (k < n && kind != 0) { /* a nudge above (kind 1) or below (kind 2) the tie, from just
                               * under half an ulp to far below binary64's reach */
        int lowest = field - f->p - 1, reach = 2 * f->p + 12;
        int distance = rng_range(r, 1, lowest < reach ? lowest : reach);
        terms[k++] = tf_make(f, kind == 1 ? negative : !negative, field - f->p - distance,
                             random_frac(f, r));
    }
    for (; k + 1 < n; k += 2) {
        uint64_t x = tf_make(f, 0, rng_range(r, 1, tf_max_field(f)), random_frac(f, r));
        terms[k] = x;
        terms[k + 1] = x | tf_sign(f);
    }
    if (k < n) terms[k] = (rng_next(r) & 1) ? tf_sign(f) : 0;
    rng_shuffle(r, terms, n);
}

/* Terms near and below the smallest normal, random signs: subnormal and tiny results. */
static void gen_subnormal(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    for (int k = 0; k < n; k++) {
        int field = rng_range(r, 0, 2);
        uint64_t frac = rng_range(r, 0, 3) == 0 ? (uint64_t)rng_range(r, 1, 3) : random_frac(f, r);
        terms[k] = tf_make(f, (int)(rng_next(r) & 1), field, frac);
    }
}

/* Sums at the top of the range: the largest finite value plus values of its binade, half its
 * ulp, or just below that, with random signs: overflow to infinity or the largest value. */
static void gen_overflow(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int negative = (int)(rng_next(r) & 1);
    for (int k = 0; k < n; k++) {
        switch (rng_range(r, 0, 4)) {
        case 0:
            terms[k] = tf_max(f) | (negative ? tf_sign(f) : 0);
            break;
        case 1: /* half an ulp of the largest value */
            terms[k] = tf_make(f, negative, tf_max_field(f) - f->p, 0);
            break;
        case 2: /* a little less than half an ulp */
            terms[k] = tf_make(f, negative, tf_max_field(f) - f->p - 1, tf_frac_mask(f));
            break;
        case 3:
            terms[k] = tf_make(f, negative, tf_max_field(f), random_frac(f, r));
            break;
        default: /* a few going the other way */
            terms[k] =
                tf_make(f, !negative, tf_max_field(f) - rng_range(r, 0, 3), random_frac(f, r));
            break;
        }
    }
}

/* Infinities and NaNs (with payloads and both signs) among finite terms. */
static void gen_specials(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    gen_similar(f, r, n, terms);
    int specials = rng_range(r, 1, n < 3 ? n : 3);
    for (int s = 0; s < specials; s++) {
        int k = rng_range(r, 0, n - 1);
        switch (rng_range(r, 0, 3)) {
        case 0:
            terms[k] = tf_inf(f);
            break;
        case 1:
            terms[k] = tf_inf(f) | tf_sign(f);
            break;
        default: /* NaN: quiet or signalling, random payload, random sign */
            terms[k] = tf_inf(f) | (random_frac(f, r) | 1) | ((rng_next(r) & 1) ? tf_sign(f) : 0);
            break;
        }
    }
}

/* BIG - BIG + tiny (and its mirror): the tiny terms must survive. */
static void gen_big_cancel(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    uint64_t big = tf_make(f, 0, tf_max_field(f) - rng_range(r, 0, 2), random_frac(f, r));
    int k = 0;
    terms[k++] = big;
    if (k < n) terms[k++] = big | tf_sign(f);
    for (; k < n; k++)
        terms[k] = tf_make(f, (int)(rng_next(r) & 1), rng_range(r, 0, 6), random_frac(f, r));
    rng_shuffle(r, terms, n);
}

/* Sums whose quotient by n is a tie at the type's precision, exactly or nudged by a tiny
 * amount either way, written as n terms of the type (greedy rounding of the remainder, in
 * MPFR). This is what the average's remainder (sticky) bit decides. */
static void gen_quotient_ties(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    reprod_type t = (reprod_type)(f - test_formats);
    mpfr_t sum, term;
    mpfr_init2(sum, ORACLE_EXACT_BITS);
    mpfr_init2(term, f->p);
    int top = tf_max_field(f) - 6, field = rng_range(r, f->p + 2, top);
    int negative = (int)(rng_next(r) & 1);
    mpfr_set_d(sum, tf_to_double(t, tf_make(f, negative, field, random_frac(f, r))), MPFR_RNDN);
    int half_ulp = field - f->bias - f->p; /* exponent of half an ulp of that value */
    mpfr_t piece;
    mpfr_init2(piece, 64);
    mpfr_set_ui_2exp(piece, 1, half_ulp, MPFR_RNDN);
    if (negative) mpfr_neg(piece, piece, MPFR_RNDN);
    mpfr_add(sum, sum, piece, MPFR_RNDN); /* the tie */
    mpfr_mul_ui(sum, sum, (unsigned long)n, MPFR_RNDN);
    int kind = rng_range(r, 0, 2);
    if (kind != 0) {
        int lowest = 1 - f->bias - (f->p - 1); /* smallest subnormal */
        int distance = rng_range(r, 1, half_ulp - lowest < 70 ? half_ulp - lowest : 70);
        mpfr_set_ui_2exp(piece, 1, half_ulp - distance, MPFR_RNDN);
        if (kind == 2) mpfr_neg(piece, piece, MPFR_RNDN);
        mpfr_add(sum, sum, piece, MPFR_RNDN);
    }
    for (int k = 0; k < n; k++) {
        int inex = mpfr_set(term, sum, MPFR_RNDN);
        terms[k] = oracle_fit(t, term, inex, MPFR_RNDN);
        mpfr_set_d(piece, tf_to_double(t, terms[k]), MPFR_RNDN);
        mpfr_sub(sum, sum, piece, MPFR_RNDN);
    }
    mpfr_clears(sum, term, piece, (mpfr_ptr)0);
    rng_shuffle(r, terms, n);
}

/* Wide spreads on or next to a rounding boundary: a value v (up to the top binade), plus 0,
 * half an ulp (a tie) or (below the top binade) one ulp, nudged by 2^-d half ulps (d up to 400,
 * or down to the subnormal grid) or not, or exactly zero (cancellation); some terms are noise
 * spread over 200 binades below v, the rest the greedy decomposition of what is left. Beyond
 * the binary64 fast path's window, this is where the certificate of engine_inner.h (d) must
 * refuse. */
static void gen_wide_boundary(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    reprod_type t = (reprod_type)(f - test_formats);
    mpfr_t sum, term, piece;
    mpfr_init2(sum, ORACLE_EXACT_BITS);
    mpfr_init2(term, f->p);
    mpfr_init2(piece, 64);
    int top = tf_max_field(f), field = rng_range(r, 1, top);
    if (rng_range(r, 0, 3) == 0) field = top - rng_range(r, 0, 1);
    int negative = (int)(rng_next(r) & 1), kind = rng_range(r, 0, 7);
    int half_ulp = (field > 1 ? field : 1) - f->bias - f->p;
    int lowest = 1 - f->bias - (f->p - 1); /* smallest subnormal */
    mpfr_set_d(sum, tf_to_double(t, tf_make(f, negative, field, random_frac(f, r))), MPFR_RNDN);
    if (kind == 7) {
        mpfr_set_zero(sum, 1); /* cancellation to exactly zero */
    } else {
        int halves = rng_range(r, 0, field < top ? 2 : 1);
        mpfr_set_ui_2exp(piece, (unsigned long)halves, half_ulp, MPFR_RNDN);
        if (negative) mpfr_neg(piece, piece, MPFR_RNDN);
        mpfr_add(sum, sum, piece, MPFR_RNDN);
        if (kind >= 3 && half_ulp > lowest) {
            int span = half_ulp - lowest < 400 ? half_ulp - lowest : 400;
            mpfr_set_ui_2exp(piece, 1, half_ulp - rng_range(r, 1, span), MPFR_RNDN);
            if (kind & 1) mpfr_neg(piece, piece, MPFR_RNDN);
            mpfr_add(sum, sum, piece, MPFR_RNDN);
        }
    }
    int noise = n > 2 ? rng_range(r, 0, n / 2) : 0;
    for (int k = 0; k < n; k++) {
        if (k < noise) {
            int low = field - 200 > 1 ? field - 200 : 1;
            terms[k] =
                tf_make(f, (int)(rng_next(r) & 1),
                        rng_range(r, low, field - 1 > low ? field - 1 : low), random_frac(f, r));
        } else if (mpfr_zero_p(sum)) {
            terms[k] = (rng_next(r) & 1) ? tf_sign(f) : 0;
        } else {
            int inex = mpfr_set(term, sum, MPFR_RNDN);
            terms[k] = oracle_fit(t, term, inex, MPFR_RNDN);
            if ((terms[k] & (tf_sign(f) - 1)) == tf_inf(f)) terms[k] -= 1; /* the largest value */
        }
        mpfr_set_d(piece, tf_to_double(t, terms[k]), MPFR_RNDN);
        mpfr_sub(sum, sum, piece, MPFR_RNDN);
    }
    mpfr_clears(sum, term, piece, (mpfr_ptr)0);
    rng_shuffle(r, terms, n);
}

/* Cancellation to a rounding residue: n - 1 terms spread over +-60 binades and, last, minus
 * their sum as the type rounds it (binary64: the plain recursive sum), so that the exact sum
 * is far below the largest term: the binary64 certificate must refuse these beyond the window. */
static void gen_cancel_residue(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    reprod_type t = (reprod_type)(f - test_formats);
    int centre = rng_range(r, 70, tf_max_field(f) - 70 > 70 ? tf_max_field(f) - 70 : 70);
    double sum = 0;
    for (int k = 0; k < n - 1; k++) {
        int field = rng_range(r, centre - 60, centre + 60);
        if (field < 1) field = 1;
        if (field > tf_max_field(f)) field = tf_max_field(f);
        terms[k] = tf_make(f, (int)(rng_next(r) & 1), field, random_frac(f, r));
        sum += tf_to_double(t, terms[k]);
    }
    mpfr_t value;
    mpfr_init2(value, f->p);
    int inex = mpfr_set_d(value, -sum, MPFR_RNDN);
    terms[n - 1] = oracle_fit(t, value, inex, MPFR_RNDN);
    if ((terms[n - 1] & (tf_sign(f) - 1)) >= tf_inf(f)) terms[n - 1] = 0;
    mpfr_clear(value);
}

/* Elements right at the edge of the fast path's exponent window (engine_fast_window), built
 * to make the binary64 partial sums as long as possible: big terms of one sign first (the
 * running sum and the TwoSum errors grow), full significands, the smallest term last. For
 * binary64 the largest exponent is sometimes the highest the fast path accepts. */
static void gen_window_edge(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int window = engine_fast_window(f->p, n);
    /* binary64: the largest exponent for which n terms cannot overflow (E + 1 + L <= 1023) */
    int max_field = f->p == 53 ? 2045 - engine_ceil_log2(n) : tf_max_field(f);
    if (window < 0 || n < 2 || window + 1 > max_field) {
        gen_similar(f, r, n, terms);
        return;
    }
    int top = rng_range(r, 0, 1) ? max_field : rng_range(r, window + 1, max_field);
    int bottom = top - window;
    int negative = (int)(rng_next(r) & 1);
    terms[0] = tf_make(f, negative, top, tf_frac_mask(f) - (rng_next(r) & 0xff));
    for (int k = 1; k < n - 1; k++) {
        int big = rng_range(r, 0, 3) != 0;
        int field = big ? top - rng_range(r, 0, 1) : rng_range(r, bottom, top);
        terms[k] =
            tf_make(f, big ? negative : (int)(rng_next(r) & 1), field, random_frac(f, r) | 1);
    }
    terms[n - 1] = tf_make(f, (int)(rng_next(r) & 1), bottom, random_frac(f, r) | 1);
}

/* Sums within a few ulps of the overflow threshold, from two terms of the top binades (inside
 * the fast path's window): a random value of the top binade and the value of the type nearest
 * to (2^(emax+1) - j ulp/4) minus it; zeros pad to n. */
static void gen_overflow_edge(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    reprod_type t = (reprod_type)(f - test_formats);
    int negative = (int)(rng_next(r) & 1);
    uint64_t a = tf_make(f, negative, tf_max_field(f), random_frac(f, r));
    mpfr_t target, term;
    mpfr_init2(target, ORACLE_EXACT_BITS);
    mpfr_init2(term, f->p);
    /* 2^(emax+1) - j 2^(emax+1-p-2): from 2 ulps below the largest value up to 2^(emax+1) */
    int emax = f->bias;
    mpfr_set_ui_2exp(target, 1, emax + 1, MPFR_RNDN);
    mpfr_set_ui_2exp(term, (unsigned long)rng_range(r, 0, 12), emax + 1 - f->p - 2, MPFR_RNDN);
    mpfr_sub(target, target, term, MPFR_RNDN);
    if (negative) mpfr_neg(target, target, MPFR_RNDN);
    mpfr_set_d(term, tf_to_double(t, a), MPFR_RNDN);
    mpfr_sub(target, target, term, MPFR_RNDN);
    int inex = mpfr_set(term, target, MPFR_RNDN);
    terms[0] = a;
    for (int k = 1; k < n; k++)
        terms[k] = (rng_next(r) & 1) ? tf_sign(f) : 0;
    if (n > 1) terms[1] = oracle_fit(t, term, inex, MPFR_RNDN);
    mpfr_clears(target, term, (mpfr_ptr)0);
    rng_shuffle(r, terms, n);
}

#endif /* REPROD_TEST_ENGINE_CASES_H */
