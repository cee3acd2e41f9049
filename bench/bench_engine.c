/* bench_engine.c: throughput of the exact engine against the ordered fold.
 *
 * For each case (type, N contributions, element count), ordered and exact runs alternate for
 * ROUNDS rounds; each timed sample repeats the call until it covers at least MIN_SAMPLE_NS, and
 * the medians are compared. Inputs have similar magnitudes (the common case of gradients), so
 * the exact engine's fast path runs. Prints one line per case; always exits 0.
 */
#include "engine.h"
#include "reprod.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS        15        /* samples per method and case; the median is reported */
#define MIN_SAMPLE_NS 3000000.0 /* repeat the call until one sample takes this long */
#define SEED          0x5eedull /* inputs are the same on every run */

struct bench_case {
    reprod_type type;
    const char *name;
    int n;
    size_t count;
    int target_percent; /* 0: for information */
};

static const struct bench_case cases[] = {
    {REPROD_FLOAT32, "float32", 8, 1u << 20, 50},  {REPROD_FLOAT32, "float32", 8, 1u << 14, 50},
    {REPROD_FLOAT64, "float64", 8, 1u << 20, 25},  {REPROD_FLOAT64, "float64", 8, 1u << 14, 25},
    {REPROD_FLOAT32, "float32", 2, 1u << 20, 0},   {REPROD_FLOAT64, "float64", 2, 1u << 20, 0},
    {REPROD_BFLOAT16, "bfloat16", 8, 1u << 20, 0}, {REPROD_FLOAT16, "float16", 8, 1u << 20, 0},
};

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value like a gradient entry: random sign, magnitude in [2^-8, 2^-4), element-dependent
 * scale so that neighbouring elements differ (exponents within 4 of each other per element). */
static double sample_value(uint64_t *state, size_t i)
{
    double u = (double)(next_random(state) >> 11) * 0x1p-53;
    double scale = ldexp(1.0, -8 - (int)(i % 7));
    double v = scale * (1.0 + 15.0 * u);
    return (next_random(state) & 1) ? -v : v;
}

static void fill(reprod_type type, void *buffer, size_t count, uint64_t *state)
{
    for (size_t i = 0; i < count; i++) {
        double v = sample_value(state, i);
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

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_doubles);
    return v[n / 2];
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

static void run_case(const struct bench_case *c)
{
    size_t bytes = c->count * reprod_type_size(c->type);
    void **in = calloc((size_t)c->n, sizeof(void *));
    void *out = aligned_alloc(64, bytes);
    uint64_t state = SEED;
    for (int k = 0; k < c->n; k++) {
        in[k] = aligned_alloc(64, bytes);
        fill(c->type, in[k], c->count, &state);
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
    double g_ordered = c->count / t_ordered, g_exact = c->count / t_exact;
    double percent = 100.0 * t_ordered / t_exact;
    printf("engine %-8s N=%d count=%-7zu: ordered %6.2f Gelem/s (%5.1f GB/s in), exact %6.2f "
           "Gelem/s, exact/ordered = %3.0f%%",
           c->name, c->n, c->count, g_ordered, g_ordered * c->n * reprod_type_size(c->type),
           g_exact, percent);
    if (c->target_percent)
        printf(" (target >= %d%%)%s", c->target_percent,
               percent >= c->target_percent ? "" : " BELOW TARGET");
    else
        printf(" (for information)");
    if (stats.general_elements) printf(" [general path: %zu elements]", stats.general_elements);
    printf("\n");
    fflush(stdout);
    for (int k = 0; k < c->n; k++)
        free(in[k]);
    free(in);
    free(out);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    return 0;
}
