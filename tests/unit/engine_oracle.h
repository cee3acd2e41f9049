/* engine_oracle.h: an independent reference for the engine tests: MPFR's mpfr_sum, rounded to
 * each element format with MPFR's own exponent-range emulation, plus the test's own exact
 * conversions, formats and generators (none of them shared with the engine). */
#ifndef REPROD_TEST_ENGINE_ORACLE_H
#define REPROD_TEST_ENGINE_ORACLE_H

#include "reprod.h"

#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORACLE_MAX_TERMS  80   /* contributions an element of a test case or the fuzzer */
#define ORACLE_EXACT_BITS 2400 /* > 1074 + 1024 + 21: any sum of 2^21 doubles is exact */

/* A format as the tests see it. */
struct tfmt {
    const char *name; /* for messages */
    int p;            /* precision, hidden bit included */
    int eb;           /* exponent field width */
    int bias;         /* exponent bias */
    uint64_t nan;     /* canonical quiet NaN */
};

static const struct tfmt test_formats[4] = {
    [REPROD_FLOAT16] = {"float16", 11, 5, 15, 0x7e00},
    [REPROD_BFLOAT16] = {"bfloat16", 8, 8, 127, 0x7fc0},
    [REPROD_FLOAT32] = {"float32", 24, 8, 127, 0x7fc00000},
    [REPROD_FLOAT64] = {"float64", 53, 11, 1023, 0x7ff8000000000000ull},
};

static const char *const test_rounding_names[4] = {"nearest", "zero", "up", "down"};
static const char *const test_op_names[3] = {"sum", "avg", "prod"};

static inline uint64_t tf_sign(const struct tfmt *f)
{
    return 1ull << (f->eb + f->p - 1);
}
static inline int tf_max_field(const struct tfmt *f)
{
    return (1 << f->eb) - 2; /* largest finite exponent field */
}
static inline uint64_t tf_frac_mask(const struct tfmt *f)
{
    return (1ull << (f->p - 1)) - 1;
}
static inline uint64_t tf_make(const struct tfmt *f, int negative, int field, uint64_t frac)
{
    return (negative ? tf_sign(f) : 0) | ((uint64_t)field << (f->p - 1)) | (frac & tf_frac_mask(f));
}
static inline uint64_t tf_inf(const struct tfmt *f)
{
    return (uint64_t)((1 << f->eb) - 1) << (f->p - 1);
}
static inline uint64_t tf_max(const struct tfmt *f)
{
    return tf_inf(f) - 1;
}
static inline size_t tf_size(reprod_type t)
{
    return t == REPROD_FLOAT64 ? 8 : t == REPROD_FLOAT32 ? 4 : 2;
}
static inline int tf_is_nan(const struct tfmt *f, uint64_t bits)
{
    return (bits & (tf_sign(f) - 1)) > tf_inf(f);
}

/* The value of a bit pattern, exactly, by field arithmetic (no bit tricks shared with the
 * engine). */
static inline double tf_to_double(reprod_type t, uint64_t bits)
{
    if (t == REPROD_FLOAT64) {
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    const struct tfmt *f = &test_formats[t];
    int negative = (bits & tf_sign(f)) != 0;
    int field = (int)((bits >> (f->p - 1)) & ((1u << f->eb) - 1));
    uint64_t frac = bits & tf_frac_mask(f);
    double v;
    if (field == (1 << f->eb) - 1)
        v = frac ? NAN : INFINITY;
    else if (field == 0)
        v = ldexp((double)frac, 1 - f->bias - (f->p - 1));
    else
        v = ldexp((double)(frac | (1ull << (f->p - 1))), field - f->bias - (f->p - 1));
    return negative ? -v : v;
}

/* The bits of a value exactly representable in the format (or +-inf, +-0). */
static inline uint64_t tf_from_double(reprod_type t, double d)
{
    uint64_t bits;
    if (t == REPROD_FLOAT64) {
        memcpy(&bits, &d, 8);
        return bits;
    }
    const struct tfmt *f = &test_formats[t];
    uint64_t sign = signbit(d) ? tf_sign(f) : 0;
    double a = fabs(d);
    if (isnan(d)) return f->nan;
    if (isinf(a)) return sign | tf_inf(f);
    if (a == 0) return sign;
    int min_normal_exp = 1 - f->bias;
    if (a < ldexp(1, min_normal_exp)) return sign | (uint64_t)ldexp(a, f->bias + f->p - 2);
    int e;
    frexp(a, &e);
    int E = e - 1;
    uint64_t frac = (uint64_t)ldexp(ldexp(a, -E) - 1, f->p - 1);
    return sign | tf_make(f, 0, E + f->bias, frac);
}

static inline mpfr_rnd_t tf_mpfr_rnd(reprod_rounding r)
{
    switch (r) {
    case REPROD_ROUND_ZERO:
        return MPFR_RNDZ;
    case REPROD_ROUND_UP:
        return MPFR_RNDU;
    case REPROD_ROUND_DOWN:
        return MPFR_RNDD;
    default:
        return MPFR_RNDN;
    }
}

/* Round y (already holding the precision-p result of an operation with ternary value inex)
 * into the format's exponent range with subnormals, MPFR's documented recipe; return bits. */
static inline uint64_t oracle_fit(reprod_type t, mpfr_t y, int inex, mpfr_rnd_t rnd)
{
    const struct tfmt *f = &test_formats[t];
    mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_set_emin(2 - f->bias - (f->p - 1)); /* smallest subnormal 2^(emin-1) */
    mpfr_set_emax(f->bias + 1);
    inex = mpfr_check_range(y, inex, rnd);
    mpfr_subnormalize(y, inex, rnd);
    double d = mpfr_get_d(y, MPFR_RNDN); /* exact: y is representable */
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    return tf_from_double(t, d);
}

/* Round the exact value `exact` (divided by n for AVG) to the format, as the engine must. */
static inline uint64_t oracle_round_exact(reprod_type t, reprod_op op, reprod_rounding dir,
                                          mpfr_t exact, unsigned long n)
{
    mpfr_rnd_t rnd = tf_mpfr_rnd(dir);
    mpfr_t y;
    mpfr_init2(y, test_formats[t].p);
    int inex = op == REPROD_SUM ? mpfr_set(y, exact, rnd) : mpfr_div_ui(y, exact, n, rnd);
    uint64_t bits = oracle_fit(t, y, inex, rnd);
    mpfr_clear(y);
    return bits;
}

/* The oracle of the exact reduction of one element. */
static inline uint64_t oracle_exact(reprod_type t, reprod_op op, reprod_rounding dir,
                                    const uint64_t *terms, int n)
{
    const struct tfmt *f = &test_formats[t];
    int nan = 0, pos_inf = 0, neg_inf = 0;
    mpfr_t exact, y;
    for (int k = 0; k < n; k++) {
        double d = tf_to_double(t, terms[k]);
        nan |= isnan(d);
        pos_inf |= isinf(d) && d > 0;
        neg_inf |= isinf(d) && d < 0;
    }
    if (nan || (pos_inf && neg_inf)) return f->nan;
    if (pos_inf || neg_inf) return tf_inf(f) | (neg_inf ? tf_sign(f) : 0);
    /* n terms: ORACLE_MAX_TERMS on the stack, more (the route tests' thousands of ranks) not */
    __mpfr_struct local[ORACLE_MAX_TERMS], *x = local;
    mpfr_ptr local_ptr[ORACLE_MAX_TERMS], *ptr = local_ptr;
    if (n > ORACLE_MAX_TERMS) {
        x = malloc((size_t)n * sizeof *x);
        ptr = malloc((size_t)n * sizeof *ptr);
        if (x == NULL || ptr == NULL) abort();
    }
    mpfr_rnd_t rnd = tf_mpfr_rnd(dir);
    for (int k = 0; k < n; k++) {
        mpfr_init2(&x[k], 53);
        mpfr_set_d(&x[k], tf_to_double(t, terms[k]), MPFR_RNDN);
        ptr[k] = &x[k];
    }
    mpfr_init2(y, f->p);
    int inex;
    if (op == REPROD_SUM) { /* mpfr_sum rounds correctly to y's precision itself */
        inex = mpfr_sum(y, ptr, (unsigned long)n, rnd);
    } else {
        mpfr_init2(exact, ORACLE_EXACT_BITS);
        if (mpfr_sum(exact, ptr, (unsigned long)n, rnd) != 0)
            fprintf(stderr, "oracle: mpfr_sum was not exact\n");
        inex = mpfr_div_ui(y, exact, n, rnd);
        mpfr_clear(exact);
    }
    uint64_t bits = oracle_fit(t, y, inex, rnd);
    for (int k = 0; k < n; k++)
        mpfr_clear(&x[k]);
    mpfr_clear(y);
    if (x != local) free(x), free(ptr);
    return bits;
}

/* The reference of the ordered fold of one element: each addition (REPROD_PROD: each
 * multiplication) rounded to nearest in the format (MPFR with the format's range), then the
 * average's division. */
static inline uint64_t oracle_ordered(reprod_type t, reprod_op op, const uint64_t *terms, int n)
{
    const struct tfmt *f = &test_formats[t];
    mpfr_t acc, x, y;
    mpfr_inits2(f->p, acc, x, y, (mpfr_ptr)0);
    mpfr_set_d(acc, tf_to_double(t, terms[0]), MPFR_RNDN);
    for (int k = 1; k < n; k++) {
        mpfr_set_d(x, tf_to_double(t, terms[k]), MPFR_RNDN);
        int inex =
            op == REPROD_PROD ? mpfr_mul(y, acc, x, MPFR_RNDN) : mpfr_add(y, acc, x, MPFR_RNDN);
        mpfr_set_d(acc, tf_to_double(t, oracle_fit(t, y, inex, MPFR_RNDN)), MPFR_RNDN);
    }
    uint64_t bits;
    if (op == REPROD_AVG) {
        int inex = mpfr_div_ui(y, acc, n, MPFR_RNDN);
        bits = oracle_fit(t, y, inex, MPFR_RNDN);
    } else {
        bits = tf_from_double(t, mpfr_get_d(acc, MPFR_RNDN));
    }
    mpfr_clears(acc, x, y, (mpfr_ptr)0);
    return bits;
}

/* ---- Deterministic pseudo-random numbers (splitmix64) ---------------------------------- */

struct rng {
    uint64_t state;
};

static inline uint64_t rng_next(struct rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int rng_range(struct rng *r, int lo, int hi)
{
    return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static inline void rng_shuffle(struct rng *r, uint64_t *v, int n)
{
    for (int i = n - 1; i > 0; i--) {
        int j = rng_range(r, 0, i);
        uint64_t tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
    }
}

/* ---- Inputs shared by the unit tests and the fuzzer --------------------------------------- */

/* Sums within a few binary64 ulps of a rounding boundary, the edge of engine_inner.h (i): a
 * value P with one bit more than the format (one of its values, or a midpoint between two) as
 * two terms, then pairs x, -(x + ulp(x)) below P, which cancel to -ulp(x) exactly but round in
 * a binary64 sum when x lies far enough below P (binary32: 30 binades and more), and for an odd
 * N a tiny last term; shuffled. Any format (the binary64 path sees the same boundaries). */
static inline void oracle_gen_plain_edge(const struct tfmt *f, struct rng *r, int n,
                                         uint64_t *terms)
{
    int top = tf_max_field(f), deepest = 2 * (53 - f->p) + 20;
    int field = rng_range(r, top / 2, top - 1), negative = (int)(rng_next(r) & 1);
    terms[0] = tf_make(f, negative, field, rng_next(r));
    if (n >= 2) /* half an ulp of terms[0] (P a midpoint), or nothing */
        terms[1] = (rng_next(r) & 1) && field > f->p ? tf_make(f, negative, field - f->p, 0) : 0;
    for (int k = 2; k + 1 < n; k += 2) {
        int below = field - rng_range(r, 1, deepest);
        uint64_t x = tf_make(f, (int)(rng_next(r) & 1), below >= 1 ? below : rng_range(r, 1, 3),
                             rng_next(r));
        terms[k] = x;
        terms[k + 1] = (x ^ tf_sign(f)) + 1; /* -(x + ulp(x)): the magnitude one step up */
    }
    if (n >= 3 && n % 2 == 1)
        terms[n - 1] = (rng_next(r) & 1) ? tf_make(f, (int)(rng_next(r) & 1), 1, rng_next(r)) : 0;
    rng_shuffle(r, terms, n);
}

#endif /* REPROD_TEST_ENGINE_ORACLE_H */
