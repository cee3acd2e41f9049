/* fuzz_inputs.h: the engine fuzzer's adversarial input recipes (for fuzz_engine.c).
 *
 * Each recipe fills the n terms (bit patterns of format f) of one element from the generator
 * r. Together they reach what the engine's paths decide on: exponent spreads from none to the
 * whole range and right at the fast path's window, cancellation to exact zero (signed zeros
 * included), sums one ulp or half an ulp (a tie) from a rounding boundary, nudged far below
 * it, for sums and for averages, subnormals, overflow, infinities and NaNs, raw bit patterns.
 */
#ifndef REPROD_TEST_FUZZ_INPUTS_H
#define REPROD_TEST_FUZZ_INPUTS_H

#include "engine/engine_inner.h" /* engine_fast_window: spreads at the fast path's border */
#include "engine_oracle.h"

typedef void fuzz_recipe(const struct tfmt *f, struct rng *r, int n, uint64_t *terms);

static reprod_type fuzz_type_of(const struct tfmt *f)
{
    return (reprod_type)(f - test_formats);
}

static int fuzz_sign(struct rng *r)
{
    return (int)(rng_next(r) & 1);
}

/* A fraction: random, or one of the extremes (zero: a power of two; all ones: just below). */
static uint64_t fuzz_fraction(const struct tfmt *f, struct rng *r)
{
    switch (rng_range(r, 0, 5)) {
    case 0:
        return 0;
    case 1:
        return tf_frac_mask(f);
    case 2:
        return (uint64_t)rng_range(r, 1, 3);
    default:
        return rng_next(r) & tf_frac_mask(f);
    }
}

/* An exponent field, most often random, else at an edge of the range. */
static int fuzz_field(const struct tfmt *f, struct rng *r)
{
    switch (rng_range(r, 0, 7)) {
    case 0:
        return rng_range(r, 0, 2); /* subnormal and the smallest normals */
    case 1:
        return tf_max_field(f) - rng_range(r, 0, 2);
    case 2:
        return f->bias + rng_range(r, -2, 2); /* around 1.0 */
    default:
        return rng_range(r, 0, tf_max_field(f));
    }
}

/* Similar magnitudes: exponents within 3 of a per-element centre (the fast path's case). */
static void recipe_similar(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int centre = rng_range(r, 3, tf_max_field(f) - 3);
    int one_sign = rng_range(r, 0, 3) == 0, sign = fuzz_sign(r);
    for (int k = 0; k < n; k++)
        terms[k] = tf_make(f, one_sign ? sign : fuzz_sign(r), centre + rng_range(r, -3, 3),
                           rng_next(r) & tf_frac_mask(f));
}

/* Exponent spreads from none to the whole range; half the time within two of the fast path's
 * window for this n, where the engine's choice of path flips. A third of the elements are
 * heavy: every term but the smallest at the top exponent with one sign and a full significand,
 * the smallest with its last bit set, so that the binary64 sum needs every bit the window
 * allows (one more exponent of spread and it would round). */
static void recipe_spread(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int window = engine_fast_window(f->p, n), top_field = tf_max_field(f);
    int spread = rng_range(r, 0, 1) ? window + rng_range(r, -2, 2) : rng_range(r, 0, top_field);
    if (spread < 0) spread = 0;
    if (spread > top_field) spread = top_field;
    int top = rng_range(r, spread, top_field), heavy = rng_range(r, 0, 2) == 0;
    int one_sign = heavy || rng_range(r, 0, 2) == 0, sign = fuzz_sign(r);
    if (heavy && f->p == 53 && top > top_field - 7) top = top_field - 7; /* no overflow */
    if (top < spread) top = spread;
    for (int k = 0; k < n; k++) {
        int field = k == 0 ? top : k == n - 1 ? top - spread : rng_range(r, top - spread, top);
        uint64_t fraction = fuzz_fraction(f, r);
        if (heavy && k < n - 1) field = top, fraction = tf_frac_mask(f) - (rng_next(r) & 0xf);
        if (heavy && k == n - 1) fraction |= 1;
        terms[k] = tf_make(f, one_sign ? sign : fuzz_sign(r), field, fraction);
    }
    rng_shuffle(r, terms, n);
}

/* What binary64 partial sums lose first, at the fast path's window: n - 2 terms of the top
 * exponent and one sign whose sum lies on a rounding boundary of the type (a midpoint or a
 * value), and a pair at the bottom exponent, x and -y, that differ in their last bit only, so
 * that the exact sum is that boundary plus or minus a single bit `spread + p - 1` exponents
 * below the top: a binary64 sum that drops it rounds the wrong way. */
static void recipe_window_tie(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int window = engine_fast_window(f->p, n), spread = window + rng_range(r, -1, 1);
    if (n < 3 || spread < 0 || spread > tf_max_field(f) - 7) { /* binary16: never outside */
        recipe_spread(f, r, n, terms);
        return;
    }
    int top = rng_range(r, spread, tf_max_field(f) - 7), sign = fuzz_sign(r), big = n - 2;
    uint64_t significand[ORACLE_MAX_TERMS], sum = 0, hidden = 1ull << (f->p - 1);
    for (int k = 0; k < big; k++) {
        significand[k] = hidden | (tf_frac_mask(f) - 0x80 - (rng_next(r) & 0x7f));
        sum += significand[k];
    }
    /* Move term 0 so that the sum, in units of the terms' ulp, is a multiple of half the
     * type's ulp at the sum's magnitude (2^(bits - p) units): a midpoint or a value. */
    int bits = 64 - __builtin_clzll(sum);
    if (bits > f->p) {
        uint64_t unit = 1ull << (bits - f->p), goal = rng_range(r, 0, 1) ? unit / 2 : 0;
        uint64_t off = sum % unit;
        significand[0] = significand[0] - off + goal; /* off < 128, goal <= 64: same binade */
    }
    for (int k = 0; k < big; k++)
        terms[k] = tf_make(f, sign, top, significand[k]);
    int tiny_sign = fuzz_sign(r);
    terms[big] = tf_make(f, tiny_sign, top - spread, 1);
    terms[big + 1] = tf_make(f, !tiny_sign, top - spread, 0);
    rng_shuffle(r, terms, n);
}

/* Terms near and below the smallest normal: subnormal sums and averages. */
static void recipe_subnormal(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    for (int k = 0; k < n; k++)
        terms[k] = tf_make(f, fuzz_sign(r), rng_range(r, 0, 2), fuzz_fraction(f, r));
}

/* Sums at the top of the range, mostly of one sign: overflow to infinity or to the largest
 * value by direction, and partial sums that overflow binary64 before coming back. */
static void recipe_overflow(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int sign = fuzz_sign(r);
    for (int k = 0; k < n; k++) {
        int back = rng_range(r, 0, 4) == 0; /* a term going the other way */
        int field = tf_max_field(f) - (rng_range(r, 0, 2) ? 0 : rng_range(r, 1, f->p + 1));
        terms[k] = tf_make(f, back ? !sign : sign, field, fuzz_fraction(f, r));
    }
}

/* Raw bit patterns: every value of the type, NaNs and infinities included. */
static void recipe_bits(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    for (int k = 0; k < n; k++)
        terms[k] = rng_next(r) & (2 * tf_sign(f) - 1);
}

/* One value n times (an average must give it back), or a value and its successor. */
static void recipe_repeat(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    uint64_t x = tf_make(f, fuzz_sign(r), fuzz_field(f, r), fuzz_fraction(f, r));
    int alternate = fuzz_sign(r) && (x & tf_frac_mask(f)) != tf_frac_mask(f);
    for (int k = 0; k < n; k++)
        terms[k] = alternate && k % 2 ? x + 1 : x;
}

/* The value of the type nearest to `value` (a finite largest value instead of infinity). */
static uint64_t fuzz_nearest(const struct tfmt *f, mpfr_t value)
{
    mpfr_t rounded;
    mpfr_init2(rounded, f->p);
    int inex = mpfr_set(rounded, value, MPFR_RNDN);
    uint64_t bits = oracle_fit(fuzz_type_of(f), rounded, inex, MPFR_RNDN);
    mpfr_clear(rounded);
    if ((bits & (tf_sign(f) - 1)) == tf_inf(f)) bits -= 1;
    return bits;
}

/* n terms whose exact sum is `target` (or as near as n terms of the type get): `noise` terms of
 * random magnitude up to `noise_field` first, then each term the value nearest to what is left
 * (signed zeros once nothing is), in random order. */
static void fuzz_decompose(const struct tfmt *f, struct rng *r, int n, mpfr_t target, int noise,
                           int noise_field, uint64_t *terms)
{
    mpfr_t left, term;
    mpfr_inits2(ORACLE_EXACT_BITS, left, term, (mpfr_ptr)0);
    mpfr_set(left, target, MPFR_RNDN);
    for (int k = 0; k < n; k++) {
        if (k < noise)
            terms[k] = tf_make(f, fuzz_sign(r), rng_range(r, 0, noise_field), fuzz_fraction(f, r));
        else if (mpfr_zero_p(left))
            terms[k] = fuzz_sign(r) ? tf_sign(f) : 0;
        else
            terms[k] = fuzz_nearest(f, left);
        mpfr_set_d(term, tf_to_double(fuzz_type_of(f), terms[k]), MPFR_RNDN);
        mpfr_sub(left, left, term, MPFR_RNDN); /* exact at this precision */
    }
    mpfr_clears(left, term, (mpfr_ptr)0);
    rng_shuffle(r, terms, n);
}

/* Exact zero: x, -x pairs (a zero of either sign for odd n), many terms cancelling each other,
 * or zeros only (all -0, all +0, mixed): the sign rules of an exactly zero sum. */
static void recipe_cancel(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int kind = rng_range(r, 0, 2);
    if (kind == 0) {
        int k = 0;
        for (; k + 1 < n; k += 2) {
            terms[k] = tf_make(f, 0, fuzz_field(f, r), fuzz_fraction(f, r));
            terms[k + 1] = terms[k] | tf_sign(f);
        }
        if (k < n) terms[k] = fuzz_sign(r) ? tf_sign(f) : 0;
        rng_shuffle(r, terms, n);
    } else if (kind == 1) {
        mpfr_t zero;
        mpfr_init2(zero, 2);
        mpfr_set_zero(zero, 1);
        fuzz_decompose(f, r, n, zero, rng_range(r, 1, (n + 1) / 2), fuzz_field(f, r), terms);
        mpfr_clear(zero);
    } else {
        int zeros = rng_range(r, 0, 2); /* all -0, all +0, mixed */
        for (int k = 0; k < n; k++)
            terms[k] = zeros == 0 || (zeros == 2 && fuzz_sign(r)) ? tf_sign(f) : 0;
    }
}

/* Sums on or next to a rounding boundary of the type: a value v plus 0, one or half an ulp
 * (a tie), nudged by 2^-d ulp (d up to far below binary64's reach) or not, times n half the
 * time (the average's ties), written as n terms, some of them noise of v's magnitude. With v
 * at the edges this reaches the subnormal grid, the smallest normal and the overflow
 * threshold. */
/* target = a value of exponent field `field` plus 0, a half (a tie) or one ulp, nudged half
 * the time by +-2^-d ulp with d in [1, deepest] (not below the subnormal grid when on_grid). */
static void fuzz_near_boundary(const struct tfmt *f, struct rng *r, int field, int deepest,
                               int on_grid, mpfr_t target)
{
    int ulp_exponent = (field > 0 ? field : 1) - f->bias - (f->p - 1);
    mpfr_t piece;
    mpfr_init2(piece, ORACLE_EXACT_BITS);
    mpfr_set_d(target, tf_to_double(fuzz_type_of(f), tf_make(f, 0, field, fuzz_fraction(f, r))),
               MPFR_RNDN);
    mpfr_set_ui_2exp(piece, (unsigned long)rng_range(r, 0, 2), ulp_exponent - 1, MPFR_RNDN);
    mpfr_add(target, target, piece, MPFR_RNDN);
    if (rng_range(r, 0, 2) != 0) {
        int below = rng_range(r, 1, deepest);
        if (!on_grid || ulp_exponent - below > 1 - f->bias - (f->p - 1)) {
            mpfr_set_ui_2exp(piece, 1, ulp_exponent - below, MPFR_RNDN);
            if (fuzz_sign(r)) mpfr_neg(piece, piece, MPFR_RNDN);
            mpfr_add(target, target, piece, MPFR_RNDN);
        }
    }
    mpfr_clear(piece);
}

static void recipe_boundary(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int sign = fuzz_sign(r), field = fuzz_field(f, r);
    mpfr_t target;
    mpfr_init2(target, ORACLE_EXACT_BITS);
    fuzz_near_boundary(f, r, field, 2 * f->p + 40, 0, target);
    if (fuzz_sign(r)) mpfr_mul_ui(target, target, (unsigned long)n, MPFR_RNDN);
    if (sign) mpfr_neg(target, target, MPFR_RNDN);
    int noise = n > 2 ? rng_range(r, 0, n / 2) : 0;
    fuzz_decompose(f, r, n, target, noise, field, terms);
    mpfr_clear(target);
}

/* Wide spreads on a rounding boundary: as recipe_boundary, with noise terms of any exponent
 * up to v's and nudges down to 2^-400 ulp (or the subnormal grid): beyond binary64's fast
 * window, the certificate of engine_inner.h (d) must refuse these or round them right. */
static void recipe_wide_boundary(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int sign = fuzz_sign(r), field = fuzz_field(f, r);
    int ulp_exponent = (field > 0 ? field : 1) - f->bias - (f->p - 1);
    int lowest = 1 - f->bias - (f->p - 1); /* smallest subnormal */
    mpfr_t target, piece;
    mpfr_inits2(ORACLE_EXACT_BITS, target, piece, (mpfr_ptr)0);
    mpfr_set_d(target, tf_to_double(fuzz_type_of(f), tf_make(f, 0, field, fuzz_fraction(f, r))),
               MPFR_RNDN);
    mpfr_set_ui_2exp(piece, (unsigned long)rng_range(r, 0, 2), ulp_exponent - 1, MPFR_RNDN);
    mpfr_add(target, target, piece, MPFR_RNDN);
    int depth = ulp_exponent - lowest < 400 ? ulp_exponent - lowest : 400;
    if (depth >= 1 && rng_range(r, 0, 3) != 0) {
        mpfr_set_ui_2exp(piece, 1, ulp_exponent - rng_range(r, 1, depth), MPFR_RNDN);
        if (fuzz_sign(r)) mpfr_neg(piece, piece, MPFR_RNDN);
        mpfr_add(target, target, piece, MPFR_RNDN);
    }
    if (rng_range(r, 0, 7) == 0) mpfr_set_zero(target, 1); /* cancellation to zero */
    if (sign) mpfr_neg(target, target, MPFR_RNDN);
    int noise = n > 2 ? rng_range(r, 1, n - 2) : 0;
    fuzz_decompose(f, r, n, target, noise, field, terms);
    mpfr_clears(target, piece, (mpfr_ptr)0);
}

/* Cancellation of any depth on a rounding boundary: as recipe_wide_boundary, with noise terms
 * up to 2^depth times the sum (depth up to 320 binades, past what the distillation tier of
 * engine_inner.h (e) decides in its passes), so that the sum cancels far below its terms and
 * sits on, next to or just off a tie: each pass must be certified right or refused. */
static void recipe_deep_cancel(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int top = tf_max_field(f) - 2;
    int depth = rng_range(r, 0, 3) == 0 ? rng_range(r, 0, 320) : rng_range(r, 0, 120);
    int field = rng_range(r, 1, top);
    int noise_field = field + depth < top ? field + depth : top;
    mpfr_t target;
    mpfr_init2(target, ORACLE_EXACT_BITS);
    fuzz_near_boundary(f, r, field, 2 * f->p + 60, 1, target);
    if (fuzz_sign(r)) mpfr_neg(target, target, MPFR_RNDN);
    int noise = n > 2 ? rng_range(r, 1, n - 2) : 0;
    fuzz_decompose(f, r, n, target, noise, noise_field, terms);
    mpfr_clear(target);
}

/* Binary32 or bfloat16 at the border of engine_inner.h (h) with 1 to 4 levels: fields spanning
 * that many levels' limit (or one binade less or more), N - 2 terms whose split leaves nearly
 * the largest low parts at the last level, the smallest term odd, so that the low parts need
 * every bit of the limit; one sign or mixed, shuffled. Other types get recipe_spread. */
static void recipe_split_edge(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    if ((f->p != 24 && f->p != 8) || n < 2) {
        recipe_spread(f, r, n, terms);
        return;
    }
    reprod_type type = f->p == 8 ? REPROD_BFLOAT16 : REPROD_FLOAT32;
    int levels = rng_range(r, 1, 4), log2_n = engine_ceil_log2(n);
    int span = engine_split_limit(type, n, levels) + rng_range(r, -1, 1);
    span = span < 0 ? 0 : span > 253 ? 253 : span;
    int field_max = rng_range(r, span + 1, 254), field_min = field_max - span;
    /* about 3 uσ at the last level (see test_engine.c) */
    int middle = field_max + log2_n - 51 - (levels - 1) * (53 - log2_n);
    middle = middle < 1 ? 1 : middle > 254 ? 254 : middle;
    int sign = fuzz_sign(r), mixed = rng_range(r, 0, 3) == 0;
    terms[0] = tf_make(f, sign, field_max, fuzz_fraction(f, r));
    for (int k = 1; k < n - 1; k++)
        terms[k] = tf_make(f, mixed ? fuzz_sign(r) : sign, middle,
                           ((1ull << (f->p - 2)) - 1) - (uint64_t)rng_range(r, 0, 15));
    terms[n - 1] = tf_make(f, mixed ? fuzz_sign(r) : sign, field_min, fuzz_fraction(f, r) | 1);
    rng_shuffle(r, terms, n);
}

/* Infinities of either sign and NaNs (quiet or signalling, any payload and sign) put into
 * 1..3 of the terms. */
static void fuzz_add_specials(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int specials = rng_range(r, 1, n < 3 ? n : 3);
    for (int s = 0; s < specials; s++) {
        uint64_t sign = fuzz_sign(r) ? tf_sign(f) : 0;
        uint64_t payload = rng_range(r, 0, 1) ? 0 : (rng_next(r) & tf_frac_mask(f)) | 1;
        terms[rng_range(r, 0, n - 1)] = sign | tf_inf(f) | payload;
    }
}

/* The fixed-point route's edge of one word (engine_fixed.h; two for binary64): terms whose
 * span takes W = 63 - ceil(log2 n) bits or up to three fewer (W counted here, not taken from the
 * engine), one element in 128 a bit more, so that a block whose elements all take one word
 * borders one that does not. Bits an element: the span of its fields plus p (binade buckets),
 * 8 (hb - lb) + 60 for binary64's buckets of 8 binades. */
static void recipe_fixed_edge(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int word_bits = 63, top_field = tf_max_field(f), over = rng_range(r, 0, 127) == 0;
    while ((1 << (63 - word_bits)) < n)
        word_bits--;
    int low, high;
    if (f->p == 53) {
        int buckets = (2 * word_bits - 60) / 8 - rng_range(r, 0, 1) + over;
        int hb = rng_range(r, buckets + 1, top_field / 8 - 1), lb = hb - buckets;
        high = 8 * hb + rng_range(r, 0, 7), low = 8 * lb + rng_range(r, 0, 7);
    } else {
        int span = word_bits - f->p - rng_range(r, 0, 3) + over;
        if (span > top_field - 2) span = top_field - 2;
        high = rng_range(r, span + 2, top_field), low = high - span;
    }
    for (int k = 0; k < n; k++) {
        int field = k == 0 ? high : k == n - 1 ? low : rng_range(r, low, high);
        terms[k] = tf_make(f, fuzz_sign(r), field, fuzz_fraction(f, r));
    }
    rng_shuffle(r, terms, n);
}

/* Similar magnitudes (the fixed-point route's blocks of one word, whose word sums are small),
 * a quarter of the elements cancelling exactly: x, -x and zeros, a zero sum of finite terms
 * whose sign the direction decides. */
static void recipe_fixed_zero(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    recipe_similar(f, r, n, terms);
    if (n < 2 || rng_range(r, 0, 3) != 0) return;
    terms[1] = terms[0] ^ tf_make(f, 1, 0, 0); /* -x */
    for (int k = 2; k < n; k++)
        terms[k] = tf_make(f, fuzz_sign(r), 0, 0);
    rng_shuffle(r, terms, n);
}

/* Every recipe, with its name for reports. */
static const struct {
    const char *name;
    fuzz_recipe *fill;
} fuzz_recipes[] = {
    {"similar", recipe_similar},
    {"spread", recipe_spread},
    {"subnormal", recipe_subnormal},
    {"overflow", recipe_overflow},
    {"bits", recipe_bits},
    {"repeat", recipe_repeat},
    {"cancel", recipe_cancel},
    {"boundary", recipe_boundary},
    {"window-tie", recipe_window_tie},
    {"wide-boundary", recipe_wide_boundary},
    {"deep-cancel", recipe_deep_cancel},
    {"split-edge", recipe_split_edge},
    {"plain-edge", oracle_gen_plain_edge},
    {"fixed-edge", recipe_fixed_edge},
    {"fixed-zero", recipe_fixed_zero},
};

#define FUZZ_RECIPES ((int)(sizeof fuzz_recipes / sizeof fuzz_recipes[0]))

#endif /* REPROD_TEST_FUZZ_INPUTS_H */
