/* ab_engine.c: two builds of the engine side by side in one process, for judging a change.
 *
 * Separate runs of `make bench` on a shared 2-core VM moved 10-20% from run to run: too much
 * to see a 5% change. This loads two builds of the shim (dlopen, RTLD_LOCAL: each keeps its
 * own symbols) and times reprod_reduce_exact of each on the same data, alternating, and
 * prints the medians and their ratio (B/A: below 1, B is faster). Two copies of one build
 * give 0.98 - 1.02.
 *
 *   make build/bench/ab_engine
 *   cp build/libreprod_shim.so /tmp/before.so   # then change, rebuild
 *   build/bench/ab_engine /tmp/before.so build/libreprod_shim.so float64 200 65536 [cancel] [N=64]
 *
 * Data as bench_engine's "spread" rows: each contribution's exponent uniform in +-spread
 * binades around gradient-like values; "cancel": the last contribution cancels the others.
 */
#include "reprod.h"
#include "bench_util.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 41  /* samples per build; the median is reported */
#define CALLS  20  /* calls per sample */
#define MAX_N  256 /* contributions at most (N=... on the command line; 8 unless said) */

typedef int exact_fn(reprod_type, reprod_op, reprod_rounding, const void *const[], int, size_t,
                     void *);

static exact_fn *load(const char *path)
{
    void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *function = library ? dlsym(library, "reprod_reduce_exact") : NULL;
    if (!function) {
        fprintf(stderr, "ab_engine: %s: %s\n", path,
                library ? "no reprod_reduce_exact" : dlerror());
        exit(2);
    }
    exact_fn *exact;
    memcpy(&exact, &function, sizeof exact);
    return exact;
}

/* Element i of contribution k as the given type, from the value v. */
static void store(reprod_type type, void *buffer, size_t i, double v)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (type == REPROD_FLOAT64)
        ((double *)buffer)[i] = v;
    else if (type == REPROD_FLOAT32)
        ((float *)buffer)[i] = f;
    else
        ((uint16_t *)buffer)[i] = (uint16_t)(bits >> 16);
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: ab_engine A.so B.so float64|float32|bfloat16 spread count "
                        "[cancel] [N=contributions]\n");
        return 2;
    }
    exact_fn *a = load(argv[1]), *b = load(argv[2]);
    reprod_type type = strcmp(argv[3], "float64") == 0   ? REPROD_FLOAT64
                       : strcmp(argv[3], "float32") == 0 ? REPROD_FLOAT32
                                                         : REPROD_BFLOAT16;
    int spread = atoi(argv[4]), cancel = 0, N = 8;
    for (int i = 6; i < argc; i++) {
        cancel |= strcmp(argv[i], "cancel") == 0;
        if (strncmp(argv[i], "N=", 2) == 0) N = atoi(argv[i] + 2);
    }
    if (N < 1 || N > MAX_N) {
        fprintf(stderr, "ab_engine: N from 1 to %d\n", MAX_N);
        return 2;
    }
    size_t count = strtoul(argv[5], NULL, 10);
    void *in[MAX_N];
    double *partial = calloc(count, sizeof(double));
    uint64_t state = 0x5eed;
    for (int k = 0; k < N; k++) {
        in[k] = aligned_alloc(64, (count * 8 + 63) / 64 * 64);
        for (size_t i = 0; i < count; i++) {
            double v = sample_value(&state, i);
            if (cancel && k == N - 1)
                v = -partial[i];
            else
                v = ldexp(v, (int)(next_random(&state) % (uint64_t)(2 * spread + 1)) - spread);
            store(type, in[k], i, v);
            partial[i] += v;
        }
    }
    void *out = aligned_alloc(64, (count * 8 + 63) / 64 * 64);
    const void *const *inputs = (const void *const *)in;
    double time_a[ROUNDS], time_b[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (int c = 0; c < CALLS; c++)
            a(type, REPROD_SUM, REPROD_ROUND_NEAREST, inputs, N, count, out);
        double t1 = now_ns();
        for (int c = 0; c < CALLS; c++)
            b(type, REPROD_SUM, REPROD_ROUND_NEAREST, inputs, N, count, out);
        double t2 = now_ns();
        time_a[r] = (t1 - t0) / CALLS / (double)count;
        time_b[r] = (t2 - t1) / CALLS / (double)count;
    }
    double median_a = median(time_a, ROUNDS), median_b = median(time_b, ROUNDS);
    printf("%s N=%d %s+-%d count %zu: A %.3f ns an element, B %.3f, B/A %.3f\n", argv[3], N,
           cancel ? "cancel" : "spread", spread, count, median_a, median_b, median_b / median_a);
    for (int k = 0; k < N; k++)
        free(in[k]);
    free(out);
    free(partial);
    return 0;
}
