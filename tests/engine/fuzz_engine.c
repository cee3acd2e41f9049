/* fuzz_engine.c: a seeded fuzzer of the exact and ordered engine.
 *
 *     fuzz_engine ITERATIONS SEED [FIRST_ITERATION]
 *
 * Iteration i draws one case from (SEED, i) alone, so that any iteration replays by itself: a
 * type, an op, a rounding direction, 1 to 70 contributions, an element count that crosses the
 * kernels' vector widths and blocks, and elements from the recipes of fuzz_inputs.h. The exact
 * reduction runs in every way the engine can run it (each kernel level this CPU has, the
 * general path, permuted contributions, in place over a contribution) and must give, element
 * by element, MPFR's correctly rounded mpfr_sum (engine_oracle.h), with the zero signs of
 * docs/design.md, Guarantees; the ordered fold must give a plain rank-order loop. Neither may
 * write outside the result nor change a contribution. A mismatch prints the seed, the
 * iteration, the command that replays it and the inputs of the element, and the program exits
 * 1; it exits 0 when every element matched and 2 on bad usage.
 */
#include "engine/engine.h"
#include "engine/engine_kernels.h" /* engine_limit_kernels: every kernel level */
#include "fuzz_inputs.h"

#define ENGINE_FUNCTION static inline
#include "engine/engine_fixed.h" /* the fixed-point route, element by element */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FUZZ_MAX_CONTRIBUTIONS 70   /* above the MPI path's 64 stack pointers */
#define FUZZ_MAX_ELEMENTS      1100 /* above the ordered fold's two blocks of 512 */
#define FUZZ_GUARD_ELEMENTS    8    /* result elements past the end that must stay untouched */
#define FUZZ_GUARD_BYTE        0xa5
#define FUZZ_MAX_REPORTS       5     /* mismatching elements printed per iteration */
#define FUZZ_PROGRESS          10000 /* iterations per progress line of a long run */

_Static_assert(FUZZ_MAX_CONTRIBUTIONS <= ORACLE_MAX_TERMS, "the oracle takes at most 80 terms");

/* One iteration's case: count elements of n contributions, terms[k * count + i]. */
struct fuzz_case {
    const char *program;
    uint64_t seed, iteration;
    reprod_type type;
    reprod_op op;
    reprod_rounding dir;
    int n;
    size_t count;
    const char *recipe;
    uint64_t *terms;
    void *blocks[FUZZ_MAX_CONTRIBUTIONS];              /* what was allocated */
    const void *contributions[FUZZ_MAX_CONTRIBUTIONS]; /* inside the blocks, maybe aliased */
    size_t mismatches;
};

/* Totals over the run, for the summary line. */
static struct {
    size_t elements, general_elements, distilled_elements, ordered_elements;
} totals;

static void *checked_malloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "fuzz_engine: out of memory\n");
        exit(2);
    }
    return p;
}

static uint64_t term(const struct fuzz_case *c, int k, size_t i)
{
    return c->terms[(size_t)k * c->count + i];
}

/* ---- Drawing a case -------------------------------------------------------------------- */

static int draw_contribution_count(struct rng *r)
{
    static const int edges[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70};
    if (rng_range(r, 0, 1)) return edges[rng_range(r, 0, (int)(sizeof edges / sizeof *edges) - 1)];
    return rng_range(r, 1, FUZZ_MAX_CONTRIBUTIONS);
}

/* Element counts: short tails, multiples of the vector widths and one off, the kernels'
 * 256-element chunks and the ordered fold's 512-element blocks, anything up to the maximum. */
static size_t draw_element_count(struct rng *r)
{
    static const int widths[] = {2, 4, 8, 16, 32, 64};
    static const int blocks[] = {256, 512, 1024};
    int count;
    switch (rng_range(r, 0, 9)) {
    case 0:
    case 1:
    case 2:
    case 3:
        count = rng_range(r, 1, 24);
        break;
    case 4:
    case 5:
    case 6:
        count = widths[rng_range(r, 0, 5)] * rng_range(r, 1, 4) + rng_range(r, -1, 1);
        break;
    case 7:
    case 8:
        count = blocks[rng_range(r, 0, 2)] + rng_range(r, -2, 2);
        break;
    default:
        count = rng_range(r, 1, FUZZ_MAX_ELEMENTS);
        break;
    }
    return count < 1 ? 1 : (size_t)count;
}

/* The terms of every element: one recipe for all, one per element, or a sparse few elements
 * of another recipe among similar ones (one bad lane in a vector block); specials sometimes. */
static void draw_terms(struct fuzz_case *c, struct rng *r)
{
    const struct tfmt *f = &test_formats[c->type];
    int mix = rng_range(r, 0, 2), one = rng_range(r, 0, FUZZ_RECIPES - 1);
    int specials_in = rng_range(r, 0, 3) == 0 ? rng_range(r, 1, 16) : 0; /* 1 element in ... */
    static const char *const mixes[] = {"one recipe", "mixed recipes", "sparse"};
    c->recipe = mix == 0 ? fuzz_recipes[one].name : mixes[mix];
    uint64_t terms[FUZZ_MAX_CONTRIBUTIONS];
    for (size_t i = 0; i < c->count; i++) {
        int pick = one;
        if (mix == 1) pick = rng_range(r, 0, FUZZ_RECIPES - 1);
        if (mix == 2) /* recipe 0 is "similar": the fast path's lanes */
            pick = rng_range(r, 0, 15) ? 0 : rng_range(r, 1, FUZZ_RECIPES - 1);
        fuzz_recipes[pick].fill(f, r, c->n, terms);
        if (specials_in && rng_range(r, 1, specials_in) == 1) fuzz_add_specials(f, r, c->n, terms);
        for (int k = 0; k < c->n; k++)
            c->terms[(size_t)k * c->count + i] = terms[k];
    }
}

/* Contribution buffers of exactly count elements (a sanitizer sees any read past them), each
 * at a random element offset from its block's start (vector loads at every alignment); now
 * and then two contributions share one buffer. */
static void make_buffers(struct fuzz_case *c, struct rng *r)
{
    size_t size = tf_size(c->type), bytes = c->count * size;
    for (int k = 0; k < c->n; k++) {
        c->blocks[k] = NULL;
        if (k > 0 && rng_range(r, 0, 15) == 0) { /* alias an earlier contribution */
            int j = rng_range(r, 0, k - 1);
            memcpy(c->terms + (size_t)k * c->count, c->terms + (size_t)j * c->count,
                   c->count * sizeof(uint64_t));
            c->contributions[k] = c->contributions[j];
            continue;
        }
        size_t offset = (size_t)rng_range(r, 0, 7) * size;
        c->blocks[k] = checked_malloc(offset + bytes);
        char *start = (char *)c->blocks[k] + offset;
        for (size_t i = 0; i < c->count; i++)
            memcpy(start + i * size, &c->terms[(size_t)k * c->count + i], size);
        c->contributions[k] = start;
    }
}

/* ---- Checking ---------------------------------------------------------------------------- */

static void print_case_header(const struct fuzz_case *c, const char *what)
{
    fprintf(stderr,
            "fuzz_engine: MISMATCH seed=%" PRIu64 " iteration=%" PRIu64 " (%s)\n"
            "  replay: %s 1 %" PRIu64 " %" PRIu64 "\n"
            "  case: %s %s rounding=%s N=%d count=%zu recipe=%s\n",
            c->seed, c->iteration, what, c->program, c->seed, c->iteration,
            test_formats[c->type].name, test_op_names[c->op], test_rounding_names[c->dir], c->n,
            c->count, c->recipe);
}

/* Report element i's mismatch in run `way` (the first few of an iteration in full). */
static void report(struct fuzz_case *c, const char *what, const char *way, size_t i,
                   uint64_t expected, uint64_t got)
{
    if (c->mismatches++ >= FUZZ_MAX_REPORTS) return;
    print_case_header(c, what);
    fprintf(stderr, "  element %zu, run %s: contributions[0..%d]:", i, way, c->n - 1);
    for (int k = 0; k < c->n; k++)
        fprintf(stderr, " %#" PRIx64, term(c, k, i));
    fprintf(stderr, "\n  expected %#" PRIx64 " got %#" PRIx64 "\n", expected, got);
}

static uint64_t load_element(reprod_type t, const void *array, size_t i)
{
    uint64_t bits = 0;
    memcpy(&bits, (const char *)array + i * tf_size(t), tf_size(t));
    return bits;
}

/* The bits of an exactly zero sum by docs/design.md, Guarantees (-0 when every term is -0, +0 when
 * every term is +0, otherwise +0, or -0 rounding down), or 1 when the sum is not exactly zero
 * (1 is never a zero's bits). Independent of the oracle's own zero handling. */
static uint64_t zero_rule(const struct fuzz_case *c, size_t i)
{
    const struct tfmt *f = &test_formats[c->type];
    mpfr_t sum, x;
    mpfr_inits2(ORACLE_EXACT_BITS, sum, x, (mpfr_ptr)0);
    mpfr_set_zero(sum, 1);
    int all_negative_zero = 1, all_positive_zero = 1, special = 0;
    for (int k = 0; k < c->n; k++) {
        uint64_t bits = term(c, k, i);
        all_negative_zero &= bits == tf_sign(f);
        all_positive_zero &= bits == 0;
        special |= (bits & (tf_sign(f) - 1)) >= tf_inf(f);
        mpfr_set_d(x, tf_to_double(c->type, bits), MPFR_RNDN);
        mpfr_add(sum, sum, x, MPFR_RNDN); /* exact (NaN when special) */
    }
    int zero = !special && mpfr_zero_p(sum);
    mpfr_clears(sum, x, (mpfr_ptr)0);
    if (!zero) return 1;
    int negative = all_negative_zero || (!all_positive_zero && c->dir == REPROD_ROUND_DOWN);
    return negative ? tf_sign(f) : 0;
}

/* Compare a run's result with the expected bits; `either_nan` accepts any NaN for a NaN. */
static void check_result(struct fuzz_case *c, const char *what, const char *way,
                         const uint64_t *expected, const void *result, int either_nan)
{
    const struct tfmt *f = &test_formats[c->type];
    for (size_t i = 0; i < c->count; i++) {
        uint64_t got = load_element(c->type, result, i);
        int both_nan = either_nan && tf_is_nan(f, got) && tf_is_nan(f, expected[i]);
        if (got != expected[i] && !both_nan) report(c, what, way, i, expected[i], got);
    }
}

/* Neither the guard after the result nor any contribution may have changed. */
static void check_untouched(struct fuzz_case *c, const char *what, const char *way,
                            const unsigned char *guard)
{
    for (size_t b = 0; b < FUZZ_GUARD_ELEMENTS * tf_size(c->type); b++)
        if (guard[b] != FUZZ_GUARD_BYTE) {
            print_case_header(c, what);
            fprintf(stderr, "  run %s wrote past the result's %zu elements\n", way, c->count);
            c->mismatches++;
            return;
        }
    for (int k = 0; k < c->n; k++)
        for (size_t i = 0; i < c->count; i++)
            if (load_element(c->type, c->contributions[k], i) != term(c, k, i)) {
                print_case_header(c, what);
                fprintf(stderr, "  run %s changed contribution %d at element %zu\n", way, k, i);
                c->mismatches++;
                return;
            }
}

/* A result buffer of count elements and a guard after it, at a random element offset. */
static char *new_result(const struct fuzz_case *c, struct rng *r, void **block)
{
    size_t size = tf_size(c->type), offset = (size_t)rng_range(r, 0, 7) * size;
    *block = checked_malloc(offset + (c->count + FUZZ_GUARD_ELEMENTS) * size);
    memset(*block, FUZZ_GUARD_BYTE, offset + (c->count + FUZZ_GUARD_ELEMENTS) * size);
    return (char *)*block + offset;
}

/* Copy contribution k into a new exactly sized buffer that replaces it and takes the result
 * (in place); returns the buffer for free(). */
static void *in_place_copy(const struct fuzz_case *c, const void **inputs, int k)
{
    size_t bytes = c->count * tf_size(c->type);
    void *copy = checked_malloc(bytes);
    memcpy(copy, c->contributions[k], bytes);
    inputs[k] = copy;
    return copy;
}

/* Check one run: its return code, its result against `expected` (any NaN for a NaN when
 * either_nan), the guard after `result` and the contributions. */
static void check_run(struct fuzz_case *c, const char *what, const char *way, int rc,
                      const uint64_t *expected, const void *out, int either_nan,
                      const unsigned char *guard)
{
    if (rc != REPROD_OK) {
        print_case_header(c, what);
        fprintf(stderr, "  run %s returned %d\n", way, rc);
        c->mismatches++;
    }
    check_result(c, what, way, expected, out, either_nan);
    check_untouched(c, what, way, guard);
}

/* ---- The runs -------------------------------------------------------------------------- */

static const char *const level_names[] = {"generic kernels", "AVX2 kernels", "AVX-512 kernels"};

/* The host arrays of the fixed-point route at one kernel level: each rank's codes (ranks on
 * CPUs of different levels meet in one MAX), the reduced codes, the offsets, the two-pass word
 * sums and results, the one-pass results. */
struct fixed_arrays {
    uint8_t *own, *codes;
    size_t *offsets, total;
    int64_t *sums;
    char *two_pass, *one_pass;
};

static void fixed_arrays_free(struct fixed_arrays *a)
{
    free(a->own), free(a->codes), free(a->offsets), free(a->sums), free(a->two_pass);
    free(a->one_pass);
}

/* Run the host arrays as the data paths call them, with the real rank count; 1 if an int64
 * word sum overflowed. */
static int fixed_host_run(struct fuzz_case *c, struct fixed_arrays *a)
{
    size_t count = c->count, size = tf_size(c->type);
    a->own = checked_malloc((size_t)c->n * 2 * count);
    a->codes = checked_malloc(2 * count);
    /* The codes cross the MAX as the data paths send them: packed, a lo a block. */
    size_t wire_bytes = reprod_engine_fixed_packed_bytes(c->type, count);
    uint8_t *wire = checked_malloc(wire_bytes + 1), *reduced = checked_malloc(wire_bytes + 1);
    memset(reduced, 0, wire_bytes);
    for (int k = 0; k < c->n; k++) {
        uint8_t *mine = a->own + (size_t)k * 2 * count;
        reprod_engine_fixed_codes(c->type, c->contributions[k], count, mine);
        reprod_engine_fixed_pack(c->type, c->dir, mine, count, wire);
        for (size_t b = 0; b < wire_bytes; b++)
            if (wire[b] > reduced[b]) reduced[b] = wire[b];
    }
    reprod_engine_fixed_unpack(c->type, c->dir, reduced, count, a->codes);
    free(wire), free(reduced);
    a->offsets = checked_malloc((count + 1) * sizeof(size_t));
    a->total = reprod_engine_fixed_layout(c->type, c->n, c->dir, a->codes, count, a->offsets);
    int full = reprod_engine_fixed_full_words(c->type, c->n);
    size_t words = a->total > count * (size_t)full ? a->total : count * (size_t)full;
    int64_t *sums = checked_malloc((words + 1) * sizeof(int64_t));
    int64_t *part = checked_malloc((words + 1) * sizeof(int64_t));
    a->sums = checked_malloc((a->total + 1) * sizeof(int64_t));
    a->two_pass = checked_malloc(count * size + 1);
    a->one_pass = checked_malloc(count * size + 1);
    int overflow = 0;
    for (int pass = 0; pass < 2; pass++) { /* two passes, then one */
        size_t n_words = pass == 0 ? a->total : count * (size_t)full;
        memset(sums, 0, n_words * sizeof(int64_t));
        for (int k = 0; k < c->n; k++) {
            if (pass == 0)
                reprod_engine_fixed_split(c->type, c->n, c->dir, c->contributions[k], a->codes,
                                          count, a->offsets, part);
            else
                reprod_engine_fixed_full_split(c->type, c->n, c->contributions[k], count, part);
            for (size_t w = 0; w < n_words; w++)
                overflow |= __builtin_add_overflow(sums[w], part[w], &sums[w]);
        }
        if (pass == 0) {
            memcpy(a->sums, sums, a->total * sizeof(int64_t));
            reprod_engine_fixed_round(c->type, c->op, c->n, c->dir, a->codes, count, a->offsets,
                                      sums, a->two_pass);
        } else {
            reprod_engine_fixed_full_round(c->type, c->op, c->n, c->dir, count, sums, a->one_pass);
        }
    }
    free(sums), free(part);
    return overflow;
}

/* The fixed-point route (engine_fixed.h) against the same expected bits: the host arrays at
 * every kernel level (each level's codes, offsets, word sums and results the generic
 * level's, bit for bit), and element by element at a narrower word than the rank count needs
 * (more words, carries across them), both the two-pass and the one-pass layouts. The words'
 * sums are taken in int64 and must not overflow. */
static void fuzz_fixed(struct fuzz_case *c, struct rng *r, const uint64_t *expected)
{
    struct engine_format f = engine_format_of(c->type);
    size_t count = c->count, size = tf_size(c->type);
    struct fixed_arrays generic = {0};
    for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
        if (engine_limit_kernels(level) != 0) continue;
        struct fixed_arrays a = {0};
        int overflow = fixed_host_run(c, &a);
        engine_limit_kernels(ENGINE_KERNELS_AUTO);
        if (overflow) {
            print_case_header(c, "fixed point");
            fprintf(stderr, "  %s: an int64 word sum overflowed\n", level_names[level]);
            c->mismatches++;
        }
        char way[64];
        snprintf(way, sizeof way, "two passes, %s", level_names[level]);
        check_result(c, "fixed point against MPFR mpfr_sum", way, expected, a.two_pass, 0);
        snprintf(way, sizeof way, "one pass, %s", level_names[level]);
        check_result(c, "fixed point against MPFR mpfr_sum", way, expected, a.one_pass, 0);
        if (level == ENGINE_KERNELS_GENERIC) {
            generic = a;
            continue;
        }
        const char *differs =
            memcmp(a.own, generic.own, (size_t)c->n * 2 * count)               ? "ranks' own codes"
            : memcmp(a.codes, generic.codes, 2 * count)                        ? "codes"
            : memcmp(a.offsets, generic.offsets, (count + 1) * sizeof(size_t)) ? "offsets"
            : memcmp(a.sums, generic.sums, a.total * sizeof(int64_t))          ? "word sums"
            : memcmp(a.two_pass, generic.two_pass, count * size)               ? "two-pass results"
            : memcmp(a.one_pass, generic.one_pass, count * size)               ? "one-pass results"
                                                                               : NULL;
        if (differs) {
            print_case_header(c, "fixed point");
            fprintf(stderr, "  %s: the %s differ from the generic level's\n", level_names[level],
                    differs);
            c->mismatches++;
        }
        fixed_arrays_free(&a);
    }
    const uint8_t *codes = generic.codes;
    /* Element by element at a narrow word: W from a rank count up to 2^21 - 1. */
    int word_bits = engine_fixed_word_bits(1 << rng_range(r, 0, ENGINE_FIXED_COUNT_BITS - 1));
    if (word_bits > engine_fixed_word_bits(c->n)) word_bits = engine_fixed_word_bits(c->n);
    int64_t element_sums[ENGINE_FIXED_MAX_WORDS], element_part[ENGINE_FIXED_MAX_WORDS];
    for (size_t i = 0; i < count; i++) {
        struct engine_fixed_element e =
            engine_fixed_element(&f, word_bits, codes[2 * i], codes[2 * i + 1], c->dir);
        struct engine_fixed_element e_full = engine_fixed_full_element(&f, word_bits);
        uint64_t got[2];
        for (int pass = 0; pass < 2; pass++) {
            int n_words = pass == 0 ? e.words : e_full.words;
            memset(element_sums, 0, sizeof element_sums);
            for (int k = 0; k < c->n; k++) {
                if (pass == 0)
                    engine_fixed_split(&f, term(c, k, i), word_bits, codes[2 * i], e,
                                       element_part);
                else
                    engine_fixed_full_split(&f, term(c, k, i), word_bits, e_full, element_part);
                for (int w = 0; w < n_words; w++)
                    element_sums[w] += element_part[w];
            }
            got[pass] = pass == 0 ? engine_fixed_round(&f, element_sums, word_bits, codes[2 * i],
                                                       e, c->op, c->n, c->dir)
                                  : engine_fixed_full_round(&f, element_sums, word_bits, e_full,
                                                            c->op, c->n, c->dir);
            if (got[pass] != expected[i])
                report(c, "fixed point against MPFR mpfr_sum",
                       pass == 0 ? "two passes, narrow words" : "one pass, narrow words", i,
                       expected[i], got[pass]);
        }
    }
    fixed_arrays_free(&generic);
}

/* The exact reduction in every way against MPFR. */
static void fuzz_exact(struct fuzz_case *c, struct rng *r)
{
    uint64_t *expected = checked_malloc(c->count * sizeof(uint64_t));
    uint64_t terms[FUZZ_MAX_CONTRIBUTIONS];
    for (size_t i = 0; i < c->count; i++) {
        for (int k = 0; k < c->n; k++)
            terms[k] = term(c, k, i);
        expected[i] = oracle_exact(c->type, c->op, c->dir, terms, c->n);
        if ((expected[i] & (tf_sign(&test_formats[c->type]) - 1)) == 0) {
            uint64_t rule = zero_rule(c, i);
            if (rule != 1 && rule != expected[i])
                report(c, "MPFR's zero against docs/design.md", "oracle", i, rule, expected[i]);
        }
    }
    /* Which tier decides each element, by the per-element functions the GPU kernels run: for
     * binary64 every host kernel level must send exactly the elements both fast tiers refuse to
     * the general path (two contributions: one addition, no general path at all); binary32 and
     * bfloat16 at most those their tiers refuse (the kernels also accept any sum the inexact
     * flag shows exact, so they may send fewer). */
    size_t expected_general = 0;
    for (size_t i = 0; i < c->count; i++) {
        uint64_t bits;
        if (engine_exact_fast(c->type, c->op, c->dir, c->contributions, c->n, i, &bits)) continue;
        if (engine_exact_distilled(c->type, c->op, c->dir, c->contributions, c->n, i, &bits) ||
            engine_exact_beyond_window(c->type, c->op, c->dir, c->contributions, c->n, i, &bits))
            totals.distilled_elements++;
        else
            expected_general++;
    }
    int check_general = c->type == REPROD_FLOAT64 && !(c->n == 2 && c->op == REPROD_SUM);
    int at_most_general = c->type == REPROD_FLOAT32 || c->type == REPROD_BFLOAT16;
    const void *inputs[FUZZ_MAX_CONTRIBUTIONS];
    void *block;
    char *result = new_result(c, r, &block);
    unsigned char *guard = (unsigned char *)result + c->count * tf_size(c->type);
    enum { DEFAULT, GENERAL, PERMUTED, IN_PLACE, LEVELS };
    for (int run = DEFAULT; run <= LEVELS + ENGINE_KERNELS_AVX512; run++) {
        memcpy(inputs, c->contributions, sizeof(void *) * (size_t)c->n);
        struct reprod_engine_options general = {.force_general = 1};
        struct reprod_engine_stats stats = {0};
        const char *way = run == DEFAULT    ? "default"
                          : run == GENERAL  ? "force_general"
                          : run == PERMUTED ? "permuted contributions"
                          : run == IN_PLACE ? "in place"
                                            : level_names[run - LEVELS];
        if (run >= LEVELS && engine_limit_kernels(run - LEVELS) != 0) continue;
        void *copy = NULL, *out = result;
        int k_in_place = rng_range(r, 0, c->n - 1);
        if (run == PERMUTED)
            for (int k = c->n - 1; k > 0; k--) {
                int j = rng_range(r, 0, k);
                const void *swap = inputs[k];
                inputs[k] = inputs[j], inputs[j] = swap;
            }
        if (run == IN_PLACE) out = copy = in_place_copy(c, inputs, k_in_place);
        int rc = run == PERMUTED /* the public entry point */
                     ? reprod_reduce_exact(c->type, c->op, c->dir, inputs, c->n, c->count, out)
                     : reprod_engine_exact(c->type, c->op, c->dir, inputs, c->n, c->count, out,
                                           run == GENERAL ? &general : NULL, &stats);
        engine_limit_kernels(ENGINE_KERNELS_AUTO);
        if (run == DEFAULT) totals.general_elements += stats.general_elements;
        if ((run == DEFAULT || run >= LEVELS) &&
            ((check_general && stats.general_elements != expected_general) ||
             (at_most_general && stats.general_elements > expected_general))) {
            print_case_header(c, "exact");
            fprintf(stderr, "  %s ran %zu elements on the general path, the tiers refuse %zu\n",
                    way, stats.general_elements, expected_general);
            c->mismatches++;
        }
        if (run == GENERAL && stats.general_elements != c->count) {
            print_case_header(c, "exact");
            fprintf(stderr, "  force_general ran %zu of %zu elements on the general path\n",
                    stats.general_elements, c->count);
            c->mismatches++;
        }
        check_run(c, "exact against MPFR mpfr_sum", way, rc, expected, out, 0, guard);
        free(copy);
    }
    fuzz_fixed(c, r, expected);
    totals.elements += c->count;
    free(block);
    free(expected);
}

/* The bfloat16 nearest to a binary32 (ties to even; NaNs are compared as NaNs only). */
static uint64_t bfloat16_nearest(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    return (bits + 0x7fffu + ((bits >> 16) & 1)) >> 16;
}

/* The plain rank-order loop in the type: acc = x_0; acc = acc + x_k; AVG: acc / N, each step
 * rounded to nearest (binary16 in _Float16 where the compiler has it, else MPFR; bfloat16 in
 * binary32, whose 24 bits make rounding twice the same as once). */
static uint64_t plain_fold(reprod_type t, reprod_op op, const uint64_t *terms, int n)
{
    if (t == REPROD_FLOAT64) {
        double acc = tf_to_double(t, terms[0]);
        for (int k = 1; k < n; k++)
            acc = acc + tf_to_double(t, terms[k]);
        if (op == REPROD_AVG) acc = acc / (double)n;
        return tf_from_double(t, acc);
    }
    if (t == REPROD_FLOAT32) {
        float acc = (float)tf_to_double(t, terms[0]);
        for (int k = 1; k < n; k++)
            acc = acc + (float)tf_to_double(t, terms[k]);
        if (op == REPROD_AVG) acc = acc / (float)n;
        uint32_t bits;
        memcpy(&bits, &acc, sizeof bits);
        return bits;
    }
    if (t == REPROD_BFLOAT16) {
        uint64_t acc = terms[0];
        for (int k = 1; k < n; k++)
            acc = bfloat16_nearest((float)tf_to_double(t, acc) + (float)tf_to_double(t, terms[k]));
        if (op == REPROD_AVG) acc = bfloat16_nearest((float)tf_to_double(t, acc) / (float)n);
        return acc;
    }
#if defined(__FLT16_MAX__)
    _Float16 acc = (_Float16)tf_to_double(t, terms[0]);
    for (int k = 1; k < n; k++)
        acc = acc + (_Float16)tf_to_double(t, terms[k]);
    if (op == REPROD_AVG) acc = acc / (_Float16)n;
    return tf_from_double(t, (double)acc);
#else
    return oracle_ordered(t, op, terms, n);
#endif
}

/* The ordered fold at every kernel level and in place against the plain loop. */
static void fuzz_ordered(struct fuzz_case *c, struct rng *r)
{
    uint64_t *expected = checked_malloc(c->count * sizeof(uint64_t));
    uint64_t terms[FUZZ_MAX_CONTRIBUTIONS];
    for (size_t i = 0; i < c->count; i++) {
        for (int k = 0; k < c->n; k++)
            terms[k] = term(c, k, i);
        expected[i] = plain_fold(c->type, c->op, terms, c->n);
    }
    const void *inputs[FUZZ_MAX_CONTRIBUTIONS];
    void *block;
    char *result = new_result(c, r, &block);
    unsigned char *guard = (unsigned char *)result + c->count * tf_size(c->type);
    for (int run = -1; run <= ENGINE_KERNELS_AVX512; run++) { /* -1: default, in place */
        if (run >= 0 && engine_limit_kernels(run) != 0) continue;
        memcpy(inputs, c->contributions, sizeof(void *) * (size_t)c->n);
        void *copy = NULL, *out = result;
        if (run < 0) out = copy = in_place_copy(c, inputs, rng_range(r, 0, c->n - 1));
        int rc = reprod_reduce_ordered(c->type, c->op, inputs, c->n, c->count, out);
        engine_limit_kernels(ENGINE_KERNELS_AUTO);
        check_run(c, "ordered against the rank-order loop", run < 0 ? "in place" : level_names[run],
                  rc, expected, out, 1, guard);
        free(copy);
    }
    totals.ordered_elements += c->count;
    free(block);
    free(expected);
}

/* Draw and check iteration `iteration`; returns its number of mismatches. */
static size_t fuzz_iteration(const char *program, uint64_t seed, uint64_t iteration)
{
    struct rng r = {seed ^ (iteration * 0xd1b54a32d192ed03ull)};
    rng_next(&r);
    struct fuzz_case c = {.program = program, .seed = seed, .iteration = iteration};
    c.type = (reprod_type)rng_range(&r, 0, 3);
    c.op = (reprod_op)rng_range(&r, 0, 1);
    c.dir = (reprod_rounding)rng_range(&r, 0, 3);
    c.n = draw_contribution_count(&r);
    c.count = draw_element_count(&r);
    c.terms = checked_malloc((size_t)c.n * c.count * sizeof(uint64_t));
    draw_terms(&c, &r);
    make_buffers(&c, &r);
    fuzz_exact(&c, &r);
    fuzz_ordered(&c, &r);
    for (int k = 0; k < c.n; k++)
        free(c.blocks[k]);
    free(c.terms);
    return c.mismatches;
}

static int parse_u64(const char *text, uint64_t *value)
{
    char *end;
    if (text[0] < '0' || text[0] > '9') return 0;
    *value = strtoull(text, &end, 0);
    return *end == '\0';
}

int main(int argc, char **argv)
{
    uint64_t iterations, seed, first = 0;
    if ((argc != 3 && argc != 4) || !parse_u64(argv[1], &iterations) ||
        !parse_u64(argv[2], &seed) || (argc == 4 && !parse_u64(argv[3], &first))) {
        fprintf(stderr, "usage: %s ITERATIONS SEED [FIRST_ITERATION]\n", argv[0]);
        return 2;
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint64_t i = first; i < first + iterations; i++) {
        if (fuzz_iteration(argv[0], seed, i) != 0) return 1;
        if (iterations >= 2 * FUZZ_PROGRESS && (i + 1 - first) % FUZZ_PROGRESS == 0)
            printf("fuzz_engine: seed %" PRIu64 ": %" PRIu64 " iterations passed\n", seed,
                   i + 1 - first);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds =
        (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) * 1e-9;
    printf("fuzz_engine: seed %" PRIu64 ", iterations %" PRIu64 "..%" PRIu64 ": %zu exact elements"
           " equal to MPFR (%zu by later tiers, %zu on the general path), %zu ordered equal to the"
           " rank-order loop, %.1f s\n",
           seed, first, first + iterations - 1, totals.elements, totals.distilled_elements,
           totals.general_elements, totals.ordered_elements, seconds);
    return 0;
}
