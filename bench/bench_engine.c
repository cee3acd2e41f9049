/* bench_engine.c: throughput of the exact engine against the ordered fold.
 *
 * For each case (type, N contributions, element count), ordered and exact runs alternate for
 * ROUNDS rounds; each timed sample repeats the call until it covers at least MIN_SAMPLE_NS, and
 * the medians are compared. The first cases are the rows of issue 9: similar magnitudes (the
 * common case of gradients), each contribution's exponent spread over +-B binades, many
 * contributions, subnormals, cancellation, and the worst of several relative placements of the
 * contributions in memory. Prints one line per case; always exits 0. Arguments, if any, are
 * the indices (from 0) of the cases to run, for measuring a few rows while working on them.
 */
#include "engine/engine.h"
#include "reprod.h"
#include "bench_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS        15        /* samples per method and case; the median is reported */
#define MIN_SAMPLE_NS 3000000.0 /* repeat the call until one sample takes this long */
#define SEED          0x5eedull /* inputs are the same on every run */

/* Shapes of the data. */
enum bench_shape {
    SHAPE_GRADIENT,     /* magnitudes within a few binades per element */
    SHAPE_SPREAD,       /* each contribution's exponent uniform in +-spread binades */
    SHAPE_SUBNORMAL,    /* subnormals mixed with normals (spread as above, around 2^-1040) */
    SHAPE_CANCELLATION, /* the last contribution cancels the others' rounded sum */
};

/* Placements: where contribution k lies, relative to the others. */
#define PLACEMENTS                                                                                 \
    4 /* separate 64-byte-aligned buffers; one buffer with stride = the size,                      \
         + 64 bytes, + 2 KiB + 64 bytes */

struct bench_case {
    reprod_type type;
    const char *name;
    int n;
    size_t count;
    enum bench_shape shape;
    int spread;         /* binades, for SHAPE_SPREAD and SHAPE_CANCELLATION */
    int placements;     /* 1: separate buffers; PLACEMENTS: report the worst of all */
    int target_percent; /* 0: for information */
};

static const struct bench_case cases[] = {
    /* issue 9's rows (goal: >= 60% of the fold; any shape >= 25%) */
    {REPROD_FLOAT64, "float64", 8, 1u << 20, SHAPE_GRADIENT, 0, 1, 60},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_SPREAD, 16, 1, 60},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_SPREAD, 24, 1, 60},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_SPREAD, 32, 1, 60},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_SPREAD, 60, 1, 60},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_SPREAD, 200, 1, 60},
    {REPROD_FLOAT64, "float64", 64, 1u << 18, SHAPE_GRADIENT, 0, 1, 60},
    {REPROD_FLOAT64, "float64", 64, 1u << 20, SHAPE_GRADIENT, 0, 1, 60},
    {REPROD_FLOAT32, "float32", 8, 1u << 14, SHAPE_GRADIENT, 0, 1, 60},
    {REPROD_FLOAT64, "float64", 8, 1u << 20, SHAPE_GRADIENT, 0, PLACEMENTS, 60},
    {REPROD_FLOAT64, "float64", 64, 1u << 16, SHAPE_SPREAD, 200, 1, 25},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_SUBNORMAL, 30, 1, 25},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_CANCELLATION, 16, 1, 25},
    {REPROD_FLOAT64, "float64", 8, 1u << 16, SHAPE_CANCELLATION, 60, 1, 25},
    {REPROD_FLOAT32, "float32", 8, 1u << 16, SHAPE_SPREAD, 32, 1, 25},
    {REPROD_FLOAT32, "float32", 8, 1u << 16, SHAPE_CANCELLATION, 16, 1, 25},
    {REPROD_BFLOAT16, "bfloat16", 8, 1u << 16, SHAPE_SPREAD, 32, 1, 25},
    /* wider than one split level takes (engine_inner.h (h)): two, and four or five */
    {REPROD_FLOAT32, "float32", 8, 1u << 16, SHAPE_SPREAD, 60, 1, 25},
    {REPROD_BFLOAT16, "bfloat16", 8, 1u << 16, SHAPE_SPREAD, 60, 1, 25},
    {REPROD_FLOAT32, "float32", 8, 1u << 16, SHAPE_SPREAD, 120, 1, 25},
    /* the earlier table */
    {REPROD_FLOAT32, "float32", 8, 1u << 20, SHAPE_GRADIENT, 0, 1, 50},
    {REPROD_FLOAT64, "float64", 8, 1u << 14, SHAPE_GRADIENT, 0, 1, 25},
    {REPROD_FLOAT32, "float32", 2, 1u << 20, SHAPE_GRADIENT, 0, 1, 0},
    {REPROD_FLOAT64, "float64", 2, 1u << 20, SHAPE_GRADIENT, 0, 1, 0},
    {REPROD_BFLOAT16, "bfloat16", 8, 1u << 20, SHAPE_GRADIENT, 0, 1, 0},
    {REPROD_FLOAT16, "float16", 8, 1u << 20, SHAPE_GRADIENT, 0, 1, 0},
    {REPROD_FLOAT32, "float32", 64, 1u << 20, SHAPE_GRADIENT, 0, 1, 0}, /* many streams */
};

/* A binary64 value of the case's shape (contribution k of n; `partial` is the running sum
 * of the earlier contributions' element i, for SHAPE_CANCELLATION). */
static double shaped_value(const struct bench_case *c, uint64_t *state, size_t i, int k,
                           double partial)
{
    double v = sample_value(state, i);
    if (c->shape == SHAPE_GRADIENT) return v;
    if (c->shape == SHAPE_CANCELLATION && k == c->n - 1) return -partial;
    int width = 2 * c->spread + 1;
    int binade = (int)(next_random(state) % (uint64_t)width) - c->spread;
    if (c->shape == SHAPE_SUBNORMAL) binade -= 1040; /* 2^-1070 .. 2^-1010 */
    return ldexp(v, binade);
}

static void fill(const struct bench_case *c, void *buffer, int k, double *partial, uint64_t *state)
{
    reprod_type type = c->type;
    for (size_t i = 0; i < c->count; i++) {
        double v = shaped_value(c, state, i, k, partial[i]);
        partial[i] += v;
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        switch (type) {
        case REPROD_FLOAT64:
            ((double *)buffer)[i] = v;
            break;
        case REPROD_FLOAT32:
            ((float *)buffer)[i] = f;
            break;
        case REPROD_BFLOAT16:
            ((uint16_t *)buffer)[i] = (uint16_t)(bits >> 16);
            break;
        case REPROD_FLOAT16: { /* |v| is normal in binary16: truncate to 10 fraction bits */
            int e;
            double m = frexp(fabs(v), &e); /* v = m 2^e, m in [0.5, 1) */
            uint16_t h = (uint16_t)(((e - 1 + 15) << 10) | ((uint16_t)((m * 2 - 1) * 1024)));
            ((uint16_t *)buffer)[i] = (uint16_t)(h | (v < 0 ? 0x8000 : 0));
            break;
        }
        }
    }
}

/* Nanoseconds per call of one method, timing `reps` calls. */
static double time_calls(int exact, const struct bench_case *c, const void *const *in, void *out,
                         int reps)
{
    double start = now_ns();
    for (int r = 0; r < reps; r++) {
        if (exact)
            reprod_reduce_exact(c->type, REPROD_SUM, REPROD_ROUND_NEAREST, in, c->n, c->count, out);
        else
            reprod_reduce_ordered(c->type, REPROD_SUM, in, c->n, c->count, out);
    }
    return (now_ns() - start) / reps;
}

/* Exact time / ordered time... as a percentage of the fold's throughput, for one placement;
 * *general_out: elements the general path took. */
static double measure(const struct bench_case *c, int placement, size_t *general_out)
{
    size_t bytes = c->count * reprod_type_size(c->type);
    size_t stride = bytes + (placement == 2 ? 64 : placement == 3 ? 2048 + 64 : 0);
    void **in = calloc((size_t)c->n, sizeof(void *));
    char *block = placement ? aligned_alloc(4096, stride * (size_t)c->n + 4096) : NULL;
    void *out = aligned_alloc(64, bytes);
    double *partial = calloc(c->count, sizeof(double));
    uint64_t state = SEED;
    for (int k = 0; k < c->n; k++) {
        in[k] = placement ? block + stride * (size_t)k : aligned_alloc(64, bytes);
        fill(c, in[k], k, partial, &state);
    }
    const void *const *inputs = (const void *const *)in;
    struct reprod_engine_stats stats = {0};
    reprod_engine_exact(c->type, REPROD_SUM, REPROD_ROUND_NEAREST, inputs, c->n, c->count, out,
                        NULL, &stats);
    double once = time_calls(0, c, inputs, out, 1); /* warm up, and size the samples */
    int reps = once >= MIN_SAMPLE_NS ? 1 : (int)(MIN_SAMPLE_NS / (once + 1)) + 1;
    double ordered[ROUNDS], exact[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ordered[r] = time_calls(0, c, inputs, out, reps);
        exact[r] = time_calls(1, c, inputs, out, reps);
    }
    double t_ordered = median(ordered, ROUNDS), t_exact = median(exact, ROUNDS);
    *general_out = stats.general_elements;
    if (placement == 0)
        for (int k = 0; k < c->n; k++)
            free(in[k]);
    free(block);
    free(in);
    free(out);
    free(partial);
    return 100.0 * t_ordered / t_exact;
}

static void run_case(const struct bench_case *c)
{
    static const char *const shapes[] = {"gradient", "spread", "subnormal", "cancel"};
    size_t general = 0, general_one;
    double percent = 1e9;
    char placements[64] = "";
    for (int placement = 0; placement < c->placements; placement++) {
        double one = measure(c, placement, &general_one);
        if (c->placements > 1)
            snprintf(placements + strlen(placements), sizeof placements - strlen(placements),
                     "%s%.0f", placement ? "/" : " placements ", one);
        if (one < percent) percent = one;
        if (general_one > general) general = general_one;
    }
    char shape[32];
    snprintf(shape, sizeof shape, c->spread ? "%s+-%d" : "%s", shapes[c->shape], c->spread);
    printf("engine %-8s N=%-2d count=%-7zu %-14s: exact/ordered = %3.0f%%%s", c->name, c->n,
           c->count, shape, percent, c->placements > 1 ? " (worst placement)" : "");
    if (c->target_percent)
        printf(" (target >= %d%%)%s", c->target_percent,
               percent >= c->target_percent ? "" : " BELOW TARGET");
    else
        printf(" (for information)");
    if (general) printf(" [general path: %zu elements]", general);
    if (placements[0]) printf("%s", placements);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    size_t n_cases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n_cases && argc <= 1; i++)
        run_case(&cases[i]);
    for (int a = 1; a < argc; a++) {
        char *end;
        unsigned long i = strtoul(argv[a], &end, 10);
        if (*end || i >= n_cases) {
            fprintf(stderr, "bench_engine: no case %s (0 to %zu)\n", argv[a], n_cases - 1);
            return 2;
        }
        run_case(&cases[i]);
    }
    return 0;
}
