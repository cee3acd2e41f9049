/* test_cuda_kernel.c: the device kernel's body (shim/device/cuda_kernel.h) run on the host, thread by
 * thread, against the host engine bitwise: every type, op, rounding direction and layout,
 * several grid sizes, random and adversarial data (engine_cases.h's generators); PreMulSum's
 * product against MPFR; and the stand-in libcuda's host build of the kernels
 * (tests/standins_nccl/kernels.c) against the same.
 */
#include <criterion/criterion.h>

#pragma GCC diagnostic ignored "-Wunused-function" /* engine_cases.h: the helpers we use */
#include "engine_cases.h"

#include "device/cuda_kernel.h"
#include "device/cuda_kernel_fixed.h"
#include "../standins_nccl/kernels.h"

#include <stdlib.h>

static const int contribution_counts[] = {1, 2, 3, 8, 17, 40}; /* 40: the pointer-array path */
static const uint64_t thread_counts[] = {1, 7, 256};
#define ELEMENTS 61

/* Any of the adversarial generators, chosen per element. */
static void gen_any(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    static generator *const all[] = {gen_similar, gen_wide,          gen_cancel,     gen_zeros,
                                     gen_ties,    gen_subnormal,     gen_overflow,   gen_specials,
                                     gen_big_cancel, gen_quotient_ties, gen_window_edge};
    all[rng_range(r, 0, (int)(sizeof all / sizeof all[0]) - 1)](f, r, n, terms);
}

/* Contributions laid out as the shim receives them: N blocks at a stride (with a gap when
 * `gap`), contribution own_index (>= 0) in a buffer of its own. */
struct layout {
    unsigned char *blocks;
    size_t stride;
    unsigned char *own;
    int own_index;
};

static struct layout layout_new(const struct tcase *c, int gap, int own_index)
{
    size_t size = tf_size(c->type);
    struct layout l = {NULL, (c->count + (gap ? 3 : 0)) * size, NULL, own_index};
    l.blocks = calloc((size_t)c->n, l.stride);
    l.own = calloc(c->count, size);
    for (int k = 0; k < c->n; k++)
        for (size_t i = 0; i < c->count; i++) {
            unsigned char *at = k == own_index ? l.own : l.blocks + (size_t)k * l.stride;
            memcpy(at + i * size, &c->terms[(size_t)k * c->count + i], size);
        }
    return l;
}

static void layout_free(struct layout *l)
{
    free(l->blocks);
    free(l->own);
}

static struct reprod_kernel_args args_of(const struct tcase *c, const struct layout *l, int op,
                                         int dir, int ordered, void *out)
{
    struct reprod_kernel_args a;
    memset(&a, 0, sizeof a);
    a.type = c->type, a.op = op, a.rounding = dir, a.ordered = ordered, a.count = c->n;
    a.own_index = l->own_index, a.elements = c->count, a.block_stride_bytes = l->stride;
    a.blocks = l->blocks, a.own = l->own, a.out = out;
    return a;
}

/* Run the kernel over a grid of `threads` threads, one after the other, as the stand-in does
 * (the pointer-array kernel first when N needs it). */
static void run_kernel(struct reprod_kernel_args *a, uint64_t threads)
{
    const void **pointers = NULL;
    if (a->count > REPROD_KERNEL_LOCAL_POINTERS) {
        pointers = calloc((size_t)a->count, sizeof *pointers);
        a->pointers = pointers;
        for (uint64_t t = 0; t < threads; t++)
            reprod_kernel_pointers(a, t, threads);
    }
    for (uint64_t t = 0; t < threads; t++)
        reprod_kernel_reduce(a, t, threads);
    a->pointers = NULL;
    free(pointers);
}

/* The engine's result for the case's contributions, each scaled first when `scaled`. */
static void engine_reference(const struct tcase *c, int op, int dir, int ordered, int scaled,
                             uint64_t scalar, void *out)
{
    size_t size = tf_size(c->type);
    void **buffers = calloc((size_t)c->n, sizeof(void *));
    for (int k = 0; k < c->n; k++) {
        buffers[k] = calloc(c->count, size);
        for (size_t i = 0; i < c->count; i++) {
            uint64_t bits = c->terms[(size_t)k * c->count + i];
            if (scaled) bits = reprod_kernel_scale_bits(c->type, bits, scalar);
            memcpy((char *)buffers[k] + i * size, &bits, size);
        }
    }
    int rc = ordered ? reprod_reduce_ordered(c->type, op, (const void *const *)buffers, c->n,
                                             c->count, out)
                     : reprod_reduce_exact(c->type, op, dir, (const void *const *)buffers, c->n,
                                           c->count, out);
    cr_assert_eq(rc, REPROD_OK);
    buffers_free(buffers, c->n);
}

/* Compare element by element; print the inputs of the first mismatches. */
static void expect_same(const struct tcase *c, const char *how, int op, int dir, const void *want,
                        const void *got)
{
    size_t mismatches = 0;
    for (size_t i = 0; i < c->count; i++) {
        uint64_t w = load_result(c->type, want, i), g = load_result(c->type, got, i);
        if (w != g && mismatches++ < MAX_REPORTS) report(c, how, op, dir, i, w, g);
    }
    cr_expect_eq(mismatches, 0, "%s %s %s N=%d: %zu mismatches", how, test_formats[c->type].name,
                 test_op_names[op], c->n, mismatches);
}

static struct tcase random_case(reprod_type t, int n, uint64_t seed)
{
    struct rng r = {seed};
    struct tcase c = case_new("kernel", t, n, ELEMENTS);
    uint64_t terms[ORACLE_MAX_TERMS];
    for (size_t i = 0; i < c.count; i++) {
        gen_any(&test_formats[t], &r, n, terms);
        for (int k = 0; k < n; k++)
            c.terms[(size_t)k * c.count + i] = terms[k];
    }
    return c;
}

/* Every (op, rounding) of a mode: exact SUM/AVG in each direction; ordered SUM/AVG/PROD. */
static void check_mode(int ordered, uint64_t seed)
{
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof contribution_counts / sizeof contribution_counts[0]; s++) {
            int n = contribution_counts[s];
            struct tcase c = random_case((reprod_type)t, n, seed + 100 * (uint64_t)t + s);
            unsigned char want[ELEMENTS * 8], got[ELEMENTS * 8];
            for (int op = 0; op < (ordered ? 3 : 2); op++)
                for (int dir = 0; dir < (ordered ? 1 : 4); dir++) {
                    engine_reference(&c, op, dir, ordered, 0, 0, want);
                    for (int form = 0; form < 3; form++) {
                        struct layout l = layout_new(&c, form >= 1, form == 2 ? n / 2 : -1);
                        struct reprod_kernel_args a = args_of(&c, &l, op, dir, ordered, got);
                        run_kernel(&a, thread_counts[form]);
                        expect_same(&c, ordered ? "kernel ordered" : "kernel exact", op, dir,
                                    want, got);
                        layout_free(&l);
                    }
                }
            free(c.terms);
        }
}

Test(cuda_kernel, exact_equals_the_engine_for_every_type_op_rounding_and_layout)
{
    check_mode(0, 1000);
}

Test(cuda_kernel, ordered_equals_the_engine_for_sum_average_and_product)
{
    check_mode(1, 2000);
}

/* out may be the own contribution or the last block: each element's inputs are read first. */
Test(cuda_kernel, result_may_overwrite_a_contribution)
{
    for (int t = 0; t < ALL_TYPES; t++)
        for (int ordered = 0; ordered < 2; ordered++)
            for (size_t s = 0; s < sizeof contribution_counts / sizeof contribution_counts[0];
                 s++) {
                int n = contribution_counts[s];
                struct tcase c = random_case((reprod_type)t, n, 3000 + 10 * (uint64_t)t + s);
                unsigned char want[ELEMENTS * 8];
                engine_reference(&c, REPROD_SUM, REPROD_ROUND_NEAREST, ordered, 0, 0, want);
                for (int target = 0; target < 2; target++) {
                    struct layout l = layout_new(&c, 1, target == 0 ? 0 : -1);
                    void *out = target == 0 ? (void *)l.own : l.blocks + (size_t)(n - 1) * l.stride;
                    struct reprod_kernel_args a =
                        args_of(&c, &l, REPROD_SUM, REPROD_ROUND_NEAREST, ordered, out);
                    run_kernel(&a, 7);
                    expect_same(&c, "in place", REPROD_SUM, REPROD_ROUND_NEAREST, want, out);
                    layout_free(&l);
                }
                free(c.terms);
            }
}

/* PreMulSum's product: x * s rounded to nearest in the type, as MPFR computes it. */
Test(cuda_kernel, premul_product_is_the_correctly_rounded_product)
{
    for (int t = 0; t < ALL_TYPES; t++) {
        const struct tfmt *f = &test_formats[t];
        struct rng r = {4000 + (uint64_t)t};
        mpfr_t x, s, y;
        mpfr_inits2(f->p, x, s, y, (mpfr_ptr)0);
        for (int trial = 0; trial < 20000; trial++) {
            uint64_t terms[2];
            gen_any(f, &r, 2, terms);
            if (trial % 3 == 0) /* a plain normal scalar */
                terms[1] = tf_make(f, rng_next(&r) & 1, rng_range(&r, 1, tf_max_field(f)),
                                   rng_next(&r));
            mpfr_set_d(x, tf_to_double((reprod_type)t, terms[0]), MPFR_RNDN);
            mpfr_set_d(s, tf_to_double((reprod_type)t, terms[1]), MPFR_RNDN);
            int inex = mpfr_mul(y, x, s, MPFR_RNDN);
            uint64_t want = oracle_fit((reprod_type)t, y, inex, MPFR_RNDN);
            uint64_t got = reprod_kernel_scale_bits((reprod_type)t, terms[0], terms[1]);
            if (tf_is_nan(f, want)) want = f->nan; /* MPFR's NaN has no sign; ours is canonical */
            cr_assert_eq(got, want, "%s: %#llx * %#llx: want %#llx got %#llx", f->name,
                         (unsigned long long)terms[0], (unsigned long long)terms[1],
                         (unsigned long long)want, (unsigned long long)got);
        }
        mpfr_clears(x, s, y, (mpfr_ptr)0);
    }
}

/* PreMulSum with the scalar given by value or in (here host) "device" memory equals scaling
 * every contribution first and reducing with the engine. */
Test(cuda_kernel, premul_equals_scaling_then_the_engine)
{
    for (int t = 0; t < ALL_TYPES; t++)
        for (size_t s = 0; s < sizeof contribution_counts / sizeof contribution_counts[0]; s++) {
            int n = contribution_counts[s];
            struct tcase c = random_case((reprod_type)t, n, 5000 + 10 * (uint64_t)t + s);
            struct rng r = {6000 + (uint64_t)s};
            const struct tfmt *f = &test_formats[t];
            uint64_t scalars[3] = {tf_from_double((reprod_type)t, 0.125),
                                   tf_make(f, 0, rng_range(&r, 1, tf_max_field(f)), rng_next(&r)),
                                   tf_make(f, 1, f->bias, rng_next(&r))};
            unsigned char want[ELEMENTS * 8], got[ELEMENTS * 8];
            for (int v = 0; v < 3; v++)
                for (int ordered = 0; ordered < 2; ordered++)
                    for (int op = 0; op < (ordered ? 3 : 2); op++)
                        for (int dir = 0; dir < (ordered ? 1 : 4); dir++) {
                            engine_reference(&c, op, dir, ordered, 1, scalars[v], want);
                            struct layout l = layout_new(&c, 1, n > 1 ? 1 : -1);
                            struct reprod_kernel_args a = args_of(&c, &l, op, dir, ordered, got);
                            uint64_t device_scalar = scalars[v];
                            a.premul = (v + dir) % 2 ? REPROD_KERNEL_PREMUL_DEVICE
                                                     : REPROD_KERNEL_PREMUL_HOST;
                            a.scalar_bits = a.premul == REPROD_KERNEL_PREMUL_HOST ? scalars[v] : 0;
                            a.scalar_device = &device_scalar; /* little endian: its low bytes */
                            run_kernel(&a, thread_counts[(size_t)(v + op) % 3]);
                            expect_same(&c, "premul", op, dir, want, got);
                            layout_free(&l);
                        }
            free(c.terms);
        }
}

/* The stand-in libcuda's kernels: the same bits as the body, by name, with the parameter size
 * the shim passes. */
Test(cuda_kernel, standin_host_build_runs_the_same_kernel)
{
    cr_assert_eq(sizeof(struct reprod_kernel_args), REPROD_KERNEL_ARGS_BYTES);
    cr_assert_eq(standin_kernel_param_bytes("reprod_reduce"), REPROD_KERNEL_ARGS_BYTES);
    cr_assert_eq(standin_kernel_param_bytes("reprod_pointers"), REPROD_KERNEL_ARGS_BYTES);
    cr_assert_eq(standin_kernel_param_bytes("no_such_kernel"), 0);
    cr_assert_null(standin_kernel_lookup("no_such_kernel"));
    standin_kernel_fn *reduce = standin_kernel_lookup("reprod_reduce");
    standin_kernel_fn *pointers = standin_kernel_lookup("reprod_pointers");
    cr_assert_not_null(reduce);
    cr_assert_not_null(pointers);
    for (int t = 0; t < ALL_TYPES; t++)
        for (int n = 1; n <= 40; n += 13) {
            struct tcase c = random_case((reprod_type)t, n, 7000 + 10 * (uint64_t)t + (uint64_t)n);
            unsigned char want[ELEMENTS * 8], got[ELEMENTS * 8];
            engine_reference(&c, REPROD_AVG, REPROD_ROUND_UP, 0, 0, 0, want);
            struct layout l = layout_new(&c, 1, 0);
            struct reprod_kernel_args a = args_of(&c, &l, REPROD_AVG, REPROD_ROUND_UP, 0, got);
            const void **array = calloc((size_t)n, sizeof *array);
            if (n > REPROD_KERNEL_LOCAL_POINTERS) a.pointers = array;
            void *parameters[1] = {&a};
            const unsigned grid[3] = {3, 1, 1}, block[3] = {5, 1, 1};
            if (a.pointers != NULL) pointers(parameters, grid, block);
            reduce(parameters, grid, block);
            expect_same(&c, "stand-in", REPROD_AVG, REPROD_ROUND_UP, want, got);
            free(array);
            layout_free(&l);
            free(c.terms);
        }
}

/* ---- The fixed-point route's kernel (cuda_kernel_fixed.h) ---------------------------------- */

/* Run one stage over `a->elements` elements with `threads` threads, one after the other. */
static void fixed_stage(struct reprod_fixed_args *a, int stage, uint64_t threads)
{
    a->stage = stage;
    for (uint64_t t = 0; t < threads; t++)
        reprod_kernel_fixed(a, t, threads);
}

/* W of the narrow words at n ranks: 31 - ceil(log2 n). */
static int narrow_width(int n)
{
    int c = 0;
    while ((1 << c) < n)
        c++;
    return 31 - c;
}

/* Rank k's terms of the case into `terms`, as the kernels read a rank's input. */
static void rank_terms(const struct tcase *c, int k, unsigned char *terms)
{
    size_t size = tf_size(c->type);
    for (size_t i = 0; i < c->count; i++)
        memcpy(terms + i * size, &c->terms[(size_t)k * c->count + i], size);
}

/* Round 1: each rank's codes (CODES into `own`) and their MAX into `codes`, as the library's
 * ncclMax would; then a->codes points at them. */
static void reduced_codes(const struct tcase *c, struct reprod_fixed_args *a, unsigned char *terms,
                          uint8_t *own, uint8_t *codes, uint64_t threads)
{
    /* As the route sends them: each rank's codes packed (PACK), the MAX of the wire, UNPACK. */
    const struct engine_format f = engine_format_of(c->type);
    size_t wire_bytes = (size_t)engine_fixed_packed_bytes(&f, c->count);
    uint8_t *own_wire = malloc(wire_bytes + 1), *wire = calloc(wire_bytes + 1, 1);
    cr_assert(own_wire && wire);
    void *out = a->out;
    for (int k = 0; k < c->n; k++) {
        rank_terms(c, k, terms);
        a->codes = own;
        fixed_stage(a, REPROD_FIXED_CODES, threads);
        a->out = own_wire;
        fixed_stage(a, REPROD_FIXED_PACK, threads);
        for (size_t j = 0; j < wire_bytes; j++)
            if (own_wire[j] > wire[j]) wire[j] = own_wire[j];
    }
    a->codes = codes, a->out = wire;
    fixed_stage(a, REPROD_FIXED_UNPACK, threads);
    a->out = out;
    free(own_wire), free(wire);
}

/* Round 2: every rank's `words` words (SPLIT into own_words), summed into `sums` as the library
 * would; narrow words must each be below 2^W and their sums within int32 (what ncclInt32
 * carries), and come back in sums32. */
static void summed_words(const struct tcase *c, struct reprod_fixed_args *a, unsigned char *terms,
                         uint64_t threads, size_t words, int64_t *own_words, int64_t *sums,
                         int32_t *sums32)
{
    int64_t bound = 1ll << narrow_width(c->n); /* 2^W of the narrow words */
    memset(sums, 0, words * sizeof *sums);
    for (int k = 0; k < c->n && words > 0; k++) {
        rank_terms(c, k, terms);
        memset(own_words, 0x5a, words * sizeof *own_words); /* every word written */
        a->words = own_words;
        fixed_stage(a, REPROD_FIXED_SPLIT, threads);
        for (size_t j = 0; j < words; j++) {
            int64_t v = a->narrow ? ((int32_t *)own_words)[j] : own_words[j];
            if (a->narrow)
                cr_assert(v > -bound && v < bound, "word %lld, W %d", (long long)v,
                          narrow_width(c->n));
            sums[j] += v;
        }
    }
    for (size_t j = 0; a->narrow && j < words; j++) {
        cr_assert(sums[j] >= INT32_MIN && sums[j] <= INT32_MAX, "sum %lld", (long long)sums[j]);
        sums32[j] = (int32_t)sums[j];
    }
    a->words = a->narrow ? (int64_t *)(void *)sums32 : sums;
}

/* Elements of `got` that are not MPFR's correctly rounded result of the case (the first few
 * reported). */
static size_t wrong_results(const struct tcase *c, int op, int dir, const void *got,
                            const char *how)
{
    uint64_t *element = calloc((size_t)c->n, sizeof *element);
    size_t wrong = 0;
    for (size_t i = 0; i < c->count; i++) {
        for (int k = 0; k < c->n; k++)
            element[k] = c->terms[(size_t)k * c->count + i];
        uint64_t want = oracle_exact(c->type, op, dir, element, c->n);
        uint64_t bits = load_result(c->type, got, i);
        if (bits != want && wrong++ < MAX_REPORTS) report(c, how, op, dir, i, want, bits);
    }
    free(element);
    return wrong;
}

struct fixed_outcome {
    int narrow; /* the words were int32 */
    int stride; /* words an element */
};

/* The two-pass route as hooks/nccl/nccl_fixed.c drives it, the library's part done here: each
 * rank's codes and their MAX, the layout read back (with the narrow probe), each rank's words
 * and their sum, the rounding into `out`. Narrow words are summed in int64 and must each be
 * below 2^W, W = 31 - ceil(log2 N), and their sum must fit int32 (what ncclInt32 carries). */
static struct fixed_outcome fixed_route(const struct tcase *c, int op, int dir, uint64_t threads,
                                        void *out)
{
    size_t size = tf_size(c->type), count = c->count;
    int probe = 1;
    uint8_t *codes = calloc(2 * count, 1), *own = calloc(2 * count, 1);
    unsigned char *terms = calloc(count, size);
    int32_t max_words[REPROD_FIXED_CELLS] = {0};
    struct reprod_fixed_args a;
    memset(&a, 0, sizeof a);
    a.type = c->type, a.op = op, a.rounding = dir, a.ranks = c->n, a.elements = count;
    a.terms = terms, a.max_words = max_words;
    reduced_codes(c, &a, terms, own, codes, threads);
    a.narrow = probe;
    fixed_stage(&a, REPROD_FIXED_MAX_WORDS, threads);
    struct fixed_outcome o;
    o.narrow = reprod_fixed_layout(max_words, probe, &o.stride);
    cr_assert(o.stride >= 1 && o.stride <= ENGINE_FIXED_MAX_WORDS, "stride %d", o.stride);
    if (o.narrow) /* fewer bytes than the int64 words */
        cr_assert(o.stride <= REPROD_FIXED_NARROW_MOST && 4 * o.stride < 8 * max_words[0],
                  "narrow stride %d, int64 words %d", o.stride, max_words[0]);
    a.narrow = o.narrow, a.stride = o.stride;
    size_t words = count * (size_t)o.stride;
    int64_t *own_words = calloc(words, sizeof(int64_t)), *sums = calloc(words, sizeof(int64_t));
    int32_t *sums32 = calloc(words, sizeof(int32_t));
    summed_words(c, &a, terms, threads, words, own_words, sums, sums32);
    a.out = out;
    fixed_stage(&a, REPROD_FIXED_ROUND, threads);
    free(codes), free(own), free(terms), free(own_words), free(sums), free(sums32);
    return o;
}

/* n - 1 terms of one sign with every significand bit set in a binade, one term whose last bit
 * lies `width` bits below their top (its field at least 3: fields 1 and 2 share a bucket). */
static void gen_span(const struct tfmt *f, struct rng *r, int n, int width, uint64_t *terms)
{
    int negative = (int)(rng_next(r) & 1);
    int top = rng_range(r, width - f->p + 3, tf_max_field(f) - 1);
    for (int k = 0; k < n; k++)
        terms[k] = tf_make(f, negative, top, tf_frac_mask(f));
    terms[rng_range(r, 0, n - 1)] = tf_make(f, negative, top - (width - f->p), 1);
}

/* Words at the narrow width's edge: a span of exactly W bits, so the word sums reach
 * (n - 1)(2^W - 2^(W - p)) in one narrow word. */
static void gen_narrow_edge(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    gen_span(f, r, n, narrow_width(n), terms);
}

/* Just past it: W + 1 bits, or 2W + 1 where the type's range allows (int64 words). */
static void gen_narrow_past(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int w = narrow_width(n), width = rng_range(r, 0, 1) ? 2 * w + 1 : w + 1;
    if (width - f->p + 3 > tf_max_field(f) - 1) width = w + 1;
    gen_span(f, r, n, width, terms);
}

/* A block-mate of the element at `terms`: each finite nonzero term (field 1 and up) with a new
 * random significand of the same field; zeros, subnormals, infinities and NaNs kept. The
 * element's buckets stay its block's, so its words are its own. */
static void vary_significands(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    for (int k = 0; k < n; k++) {
        uint64_t magnitude = terms[k] & (tf_sign(f) - 1);
        int field = (int)(magnitude >> (f->p - 1));
        if (field >= 1 && field <= tf_max_field(f))
            terms[k] = (terms[k] & ~tf_frac_mask(f)) | (rng_next(r) & tf_frac_mask(f));
    }
}

/* Past one int64 word, W + 33 bits: two int64 words, or three narrow ones (fewer bytes); where
 * the type's range is too narrow for that, at the edge. */
static void gen_narrow_three(const struct tfmt *f, struct rng *r, int n, uint64_t *terms)
{
    int width = narrow_width(n) + 33;
    if (width - f->p + 3 > tf_max_field(f) - 1) width = narrow_width(n);
    gen_span(f, r, n, width, terms);
}

/* Narrow words (int32 words where they take fewer bytes than int64 ones, hooks/nccl/nccl_fixed.c)
 * against MPFR at rank counts from 1 to 16,384, every type, SUM and AVG in every direction: each
 * element correctly rounded, no word sum past int32. A 16-bit type's pieces of similar
 * magnitudes take one up to 1,024 ranks, a span wider than one takes int64 words; an infinity
 * or NaN takes int64 words; binary32 and binary64 pieces take two and more of them (wide spans,
 * binary64's significands), each carried into the next. */
Test(cuda_kernel, fixed_narrow_words_are_exact_at_every_rank_count, .timeout = 300)
{
    static const int ranks[] = {1, 2, 3, 31, 32, 33, 1000, 1024, 16384};
    static generator *const mixed[] = {
        gen_similar,  gen_wide,        gen_cancel,      gen_zeros,   gen_ties, gen_subnormal,
        gen_overflow, gen_narrow_edge, gen_narrow_past, gen_specials}; /* the last round only */
    static generator *const one_kind[] = {gen_similar, gen_narrow_edge, gen_specials,
                                          gen_wide,    gen_narrow_past, gen_narrow_three};
    const size_t count = 24;
    long several[REPROD_FLOAT64 + 1] = {0}; /* cases in two narrow words or more */
    for (int t = REPROD_FLOAT16; t <= REPROD_FLOAT64; t++)
        for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
            int n = ranks[s];
            const size_t kinds = sizeof one_kind / sizeof one_kind[0];
            for (size_t g = 0; g <= kinds + 1; g++) { /* then mixed, then mixed with specials */
                struct rng r = {9000 + 131 * (uint64_t)t + 17 * (uint64_t)n + g};
                struct tcase c = case_new("narrow", (reprod_type)t, n, count);
                uint64_t *element = calloc((size_t)n, sizeof *element);
                int special = 0; /* an infinity or NaN beside the other kinds */
                for (size_t i = 0; i < count; i++) {
                    generator *gen =
                        g < kinds ? one_kind[g] : mixed[rng_range(&r, 0, g == kinds ? 8 : 9)];
                    special |= g > kinds && gen == gen_specials;
                    /* one kind: one element's buckets a block of codes, its block-mates with
                     * other significands (the block's lo is each one's: their words their
                     * own); mixed kinds share a block's lo */
                    if (g >= kinds || i % ENGINE_FIXED_LO_BLOCK == 0)
                        gen(&test_formats[t], &r, n, element);
                    else
                        vary_significands(&test_formats[t], &r, n, element);
                    for (int k = 0; k < n; k++)
                        c.terms[(size_t)k * count + i] = element[k];
                }
                for (int op = REPROD_SUM; op <= REPROD_AVG; op++)
                    for (int dir = 0; dir < 4; dir++) {
                        unsigned char got[24 * 8];
                        struct fixed_outcome o = fixed_route(&c, op, dir, g % 2 ? 7 : 1, got);
                        int sixteen = tf_size(c.type) == 2;
                        several[t] += o.narrow && o.stride > 1;
                        if (sixteen && g == 0 && n <= 1024) /* similar magnitudes: one word */
                            cr_expect(o.narrow && o.stride == 1, "%s N=%d: narrow %d stride %d",
                                      test_formats[t].name, n, o.narrow, o.stride);
                        if (sixteen && g == 1) /* a span of W bits: one narrow word */
                            cr_expect(o.narrow && o.stride == 1, "%s N=%d at the edge: narrow %d",
                                      test_formats[t].name, n, o.narrow);
                        if (g == 2 || special || (sixteen && g == 4 && n > 1)) /* an infinity
                                                                     or NaN; past one word */
                            cr_expect(!o.narrow, "%s N=%d kind %zu: narrow", test_formats[t].name,
                                      n, g);
                        size_t wrong =
                            wrong_results(&c, op, dir, got, o.narrow ? "narrow" : "wide");
                        cr_expect_eq(wrong, 0, "%s N=%d kind %zu %s %s: %zu wrong (narrow %d)",
                                     test_formats[t].name, n, g, test_op_names[op],
                                     test_rounding_names[dir], wrong, o.narrow);
                    }
                free(element);
                free(c.terms);
            }
        }
    cr_expect(several[REPROD_FLOAT32] > 0 && several[REPROD_FLOAT64] > 0,
              "cases in two narrow words or more: binary32 %ld, binary64 %ld",
              several[REPROD_FLOAT32], several[REPROD_FLOAT64]);
}

/* ---- The per-element layout ------------------------------------------------------------- */

struct layout_outcome {
    int narrow;     /* the words were int32 */
    uint64_t total; /* T: the piece's words */
    int subs;       /* sub-pieces */
    int straddled;  /* elements whose words two sub-pieces held */
};

/* The per-element layout as hooks/nccl/nccl_fixed.c drives it (AllReduce), the library's part
 * done here: each rank's codes and their MAX; LAYOUT, GROUPS, TOTAL, OFFSETS and T read back;
 * then sub-pieces of `capacity` words: each rank's words of [w0, w1), their sum, the rounding
 * of the elements that end there into `out`. T must be what the elements' own words add up to
 * (each as engine_fixed_element lays it, in the unit TOTAL chose), and the unit the one of
 * fewer bytes; narrow words as in fixed_route. */
static struct layout_outcome per_element_route(const struct tcase *c, int op, int dir,
                                               uint64_t threads, uint64_t capacity, void *out)
{
    size_t size = tf_size(c->type), count = c->count;
    int n = c->n;
    uint8_t *codes = calloc(2 * count, 1), *own = calloc(2 * count, 1);
    unsigned char *terms = calloc(count, size);
    uint64_t *layout = calloc(reprod_fixed_layout_size(count), sizeof(uint64_t));
    int32_t cells[REPROD_FIXED_CELLS] = {0};
    struct reprod_fixed_args a;
    memset(&a, 0, sizeof a);
    a.type = c->type, a.op = op, a.rounding = dir, a.ranks = n, a.elements = count;
    a.terms = terms, a.max_words = cells;
    reduced_codes(c, &a, terms, own, codes, threads);
    a.narrow = 1, a.layout = layout;
    for (int stage = REPROD_FIXED_LAYOUT; stage <= REPROD_FIXED_OFFSETS; stage++)
        fixed_stage(&a, stage, stage == REPROD_FIXED_TOTAL ? 1 : threads);
    struct layout_outcome o = {0, 0, 0, 0};
    o.total = reprod_fixed_total(cells, &o.narrow);
    /* The test's own count of the words, each element in each unit. */
    const struct engine_format f = engine_format_of(c->type);
    uint64_t wide = 0, narrow = 0;
    int narrow_possible = 1;
    for (size_t i = 0; i < count; i++) {
        wide += (uint64_t)engine_fixed_element(&f, engine_fixed_word_bits(n), codes[2 * i],
                                               codes[2 * i + 1], dir)
                    .words;
        int k = reprod_fixed_narrow_words(&f, n, codes[2 * i], codes[2 * i + 1], dir);
        narrow_possible &= k <= REPROD_FIXED_NARROW_MOST;
        narrow += k <= REPROD_FIXED_NARROW_MOST ? (uint64_t)k : 0;
    }
    int want_narrow = narrow_possible && 4 * narrow < 8 * wide;
    cr_assert_eq(o.narrow, want_narrow, "unit %d, words %llu int64 / %llu narrow", o.narrow,
                 (unsigned long long)wide, (unsigned long long)narrow);
    cr_assert_eq(o.total, want_narrow ? narrow : wide, "T %llu, int64 %llu, narrow %llu",
                 (unsigned long long)o.total, (unsigned long long)wide, (unsigned long long)narrow);
    a.narrow = o.narrow, a.word_total = o.total, a.out = out;
    memset(out, 0xa5, count * size); /* every result written */
    int64_t *own_words = calloc(capacity, sizeof(int64_t)), *sums = calloc(capacity, 8);
    int32_t *sums32 = calloc(capacity, sizeof(int32_t));
    uint64_t w0 = 0;
    do { /* sub-pieces; one ROUND without words where T is 0 */
        uint64_t w1 = o.total - w0 < capacity ? o.total : w0 + capacity;
        a.word_first = w0, a.word_end = w1, a.sub = o.subs;
        summed_words(c, &a, terms, threads, (size_t)(w1 - w0), own_words, sums, sums32);
        fixed_stage(&a, REPROD_FIXED_ROUND, threads);
        o.subs++;
        w0 = w1;
    } while (w0 < o.total);
    /* Straddlers: elements whose first and last words lie in different sub-pieces. */
    for (size_t i = 0, first = 0; i < count; i++) {
        int k = engine_fixed_element(&f, o.narrow ? narrow_width(n) : engine_fixed_word_bits(n),
                                     codes[2 * i], codes[2 * i + 1], dir)
                    .words;
        o.straddled += k > 0 && first / capacity != (first + (size_t)k - 1) / capacity;
        first += (size_t)k;
    }
    free(codes), free(own), free(terms), free(layout), free(own_words), free(sums), free(sums32);
    return o;
}

/* The per-element layout against MPFR: every type, 1 to 16,384 ranks, SUM and AVG in every
 * direction, sub-pieces as small as the kernels allow (an element's most words), so that
 * elements straddle them and their carries alternate; pieces of zeros only (T = 0: one ROUND);
 * pieces that take narrow words and int64 ones; 1 and 7 threads. */
Test(cuda_kernel, per_element_layout_is_exact_across_sub_pieces, .timeout = 300)
{
    static const int ranks[] = {1, 2, 3, 33, 1024, 16384};
    static generator *const mixed[] = {
        gen_similar,  gen_wide,        gen_cancel,      gen_zeros,   gen_ties, gen_subnormal,
        gen_overflow, gen_narrow_edge, gen_narrow_past, gen_specials}; /* the last round only */
    static generator *const one_kind[] = {gen_similar, gen_zeros, gen_narrow_past, gen_wide};
    const size_t kinds = sizeof one_kind / sizeof one_kind[0];
    long straddled = 0, narrow_subs = 0, wide_subs = 0, empty = 0;
    for (int t = REPROD_FLOAT16; t <= REPROD_FLOAT64; t++)
        for (size_t s = 0; s < sizeof ranks / sizeof ranks[0]; s++) {
            int n = ranks[s];
            size_t count = n <= 33 ? 300 : 40;
            for (size_t g = 0; g <= kinds + 1; g++) {
                struct rng r = {7000 + 131 * (uint64_t)t + 17 * (uint64_t)n + g};
                struct tcase c = case_new("per-element", (reprod_type)t, n, count);
                uint64_t *element = calloc((size_t)n, sizeof *element);
                for (size_t i = 0; i < count; i++) {
                    generator *gen =
                        g < kinds ? one_kind[g] : mixed[rng_range(&r, 0, g == kinds ? 8 : 9)];
                    gen(&test_formats[t], &r, n, element);
                    for (int k = 0; k < n; k++)
                        c.terms[(size_t)k * count + i] = element[k];
                }
                unsigned char *got = calloc(count, 8);
                for (int op = REPROD_SUM; op <= REPROD_AVG; op++)
                    for (int dir = 0; dir < 4; dir++) {
                        uint64_t capacity = ENGINE_FIXED_MAX_WORDS + (uint64_t)(dir * 3 + op);
                        struct layout_outcome o = per_element_route(
                            &c, op, dir, (g + (size_t)dir) % 2 ? 7 : 1, capacity, got);
                        straddled += o.straddled;
                        if (o.subs > 1) *(o.narrow ? &narrow_subs : &wide_subs) += 1;
                        empty += o.total == 0;
                        size_t wrong =
                            wrong_results(&c, op, dir, got, o.narrow ? "narrow" : "wide");
                        cr_expect_eq(wrong, 0,
                                     "%s N=%d kind %zu %s %s: %zu wrong (narrow %d, T %llu, %d "
                                     "sub-pieces)",
                                     test_formats[t].name, n, g, test_op_names[op],
                                     test_rounding_names[dir], wrong, o.narrow,
                                     (unsigned long long)o.total, o.subs);
                    }
                free(got);
                free(element);
                free(c.terms);
            }
        }
    cr_expect(straddled > 100 && narrow_subs > 0 && wide_subs > 0 && empty > 0,
              "straddling elements %ld, cases in narrow sub-pieces %ld, int64 ones %ld, "
              "zeros only %ld",
              straddled, narrow_subs, wide_subs, empty);
}

/* Groups: a piece of more than one group of blocks (REPROD_FIXED_GROUP x REPROD_FIXED_BLOCK
 * elements) at 2 ranks, its first words carried across groups, against MPFR. */
Test(cuda_kernel, per_element_layout_spans_groups, .timeout = 300)
{
    const size_t count = 2 * REPROD_FIXED_GROUP * REPROD_FIXED_BLOCK + 37;
    static generator *const mixed[] = {gen_similar, gen_wide, gen_zeros, gen_narrow_past,
                                       gen_cancel};
    for (int t = REPROD_FLOAT16; t <= REPROD_FLOAT64; t++) {
        struct rng r = {555 + (uint64_t)t};
        struct tcase c = case_new("groups", (reprod_type)t, 2, count);
        uint64_t element[2];
        for (size_t i = 0; i < count; i++) {
            mixed[i % 4096 < 4000 ? 0 : rng_range(&r, 0, 4)](&test_formats[t], &r, 2, element);
            c.terms[i] = element[0], c.terms[count + i] = element[1];
        }
        unsigned char *got = calloc(count, 8);
        struct layout_outcome o =
            per_element_route(&c, REPROD_SUM, REPROD_ROUND_NEAREST, 5, 4099, got);
        cr_expect(o.total > count / 2 && o.subs > 2, "T %llu, %d sub-pieces",
                  (unsigned long long)o.total, o.subs);
        size_t wrong = wrong_results(&c, REPROD_SUM, REPROD_ROUND_NEAREST, got, "groups");
        cr_expect_eq(wrong, 0, "%s: %zu wrong", test_formats[t].name, wrong);
        free(got);
        free(c.terms);
    }
}
