/* bench_fixed.c: what the fixed-point route costs an element on the host (issue 19), stage by
 * stage, against the library's own local sum of the same elements.
 *
 * The MPI route runs on host buffers: each rank computes its codes (pass 1), packs them for the
 * library's MAX and unpacks the reduced ones ("wire": both, reprod_engine_fixed_pack), the layout,
 * its words (pass 2) and, after the library's int64 sum, the rounding, for every element of the
 * call. Natively the library's reduction op adds two vectors (Open MPI's ompi_op_sum: one load,
 * one add, one store an element), about once an element over a Rabenseifner all-reduce. So the
 * ratio below is the shim's local work over the library's, per element, where the network's
 * time is the same for both (docs/performance.md). Stages alternate with the native sum for
 * ROUNDS rounds at each kernel level; each sample repeats its stage until it covers
 * MIN_SAMPLE_NS; medians are printed. Always exits 0.
 */
#include "engine/engine.h"
#include "engine/engine_kernels.h" /* engine_limit_kernels */
#include "bench_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS        11
#define MIN_SAMPLE_NS 2000000.0
#define ELEMENTS      ((size_t)1 << 20) /* 4 MiB of binary32: beyond the L2, as a real call */
#define RANKS         1024
#define SEED          0x5eedull

enum stage { CODES, WIRE, LAYOUT, SPLIT, ROUND, NATIVE, STAGES };
static const char *const stage_names[STAGES] = {"codes", "wire",  "layout",
                                                "split", "round", "native sum"};

struct arrays {
    reprod_type type;
    void *terms, *other, *result;
    uint8_t *codes, *wire;
    size_t *offsets;
    int64_t *words;
};

static void native_sum(struct arrays *a)
{
    if (a->type == REPROD_FLOAT32) {
        float *x = a->result;
        const float *y = a->other;
        for (size_t i = 0; i < ELEMENTS; i++)
            x[i] += y[i];
    } else {
        double *x = a->result;
        const double *y = a->other;
        for (size_t i = 0; i < ELEMENTS; i++)
            x[i] += y[i];
    }
}

static void run_stage(struct arrays *a, enum stage s)
{
    switch (s) {
    case CODES:
        reprod_engine_fixed_codes(a->type, a->terms, ELEMENTS, a->codes);
        break;
    case WIRE: /* this rank's packed codes stand for the reduced ones: the same work */
        reprod_engine_fixed_pack(a->type, REPROD_ROUND_NEAREST, a->codes, ELEMENTS, a->wire);
        reprod_engine_fixed_unpack(a->type, REPROD_ROUND_NEAREST, a->wire, ELEMENTS, a->codes);
        break;
    case LAYOUT:
        reprod_engine_fixed_layout(a->type, RANKS, REPROD_ROUND_NEAREST, a->codes, ELEMENTS,
                                   a->offsets);
        break;
    case SPLIT:
        reprod_engine_fixed_split(a->type, RANKS, REPROD_ROUND_NEAREST, a->terms, a->codes,
                                  ELEMENTS, a->offsets, a->words);
        break;
    case ROUND: /* this rank's words stand for their sums: the same work */
        reprod_engine_fixed_round(a->type, REPROD_SUM, RANKS, REPROD_ROUND_NEAREST, a->codes,
                                  ELEMENTS, a->offsets, a->words, a->result);
        break;
    default:
        native_sum(a);
        break;
    }
}

/* ns an element of one sample of stage s. */
static double sample(struct arrays *a, enum stage s)
{
    int reps = 0;
    double start = now_ns(), elapsed;
    do {
        run_stage(a, s);
        reps++;
        elapsed = now_ns() - start;
    } while (elapsed < MIN_SAMPLE_NS);
    return elapsed / reps / (double)ELEMENTS;
}

static void bench_type(reprod_type type, const char *name)
{
    size_t size = reprod_type_size(type);
    struct arrays a = {type,
                       malloc(ELEMENTS * size),
                       malloc(ELEMENTS * size),
                       malloc(ELEMENTS * size),
                       malloc(2 * ELEMENTS),
                       malloc(2 * ELEMENTS),
                       malloc((ELEMENTS + 1) * sizeof(size_t)),
                       NULL};
    uint64_t state = SEED;
    for (size_t i = 0; i < ELEMENTS; i++) {
        double v = sample_value(&state, i);
        float f = (float)v;
        memcpy((char *)a.terms + i * size, type == REPROD_FLOAT32 ? (void *)&f : (void *)&v, size);
        memcpy((char *)a.other + i * size, type == REPROD_FLOAT32 ? (void *)&f : (void *)&v, size);
    }
    memset(a.result, 0, ELEMENTS * size);
    run_stage(&a, CODES);
    size_t words =
        reprod_engine_fixed_layout(type, RANKS, REPROD_ROUND_NEAREST, a.codes, ELEMENTS, a.offsets);
    a.words = malloc(words * sizeof(int64_t));
    static const char *const levels[] = {"generic", "AVX2", "AVX-512"};
    for (int level = ENGINE_KERNELS_GENERIC; level <= ENGINE_KERNELS_AVX512; level++) {
        if (engine_limit_kernels(level) != 0) continue;
        double t[STAGES][ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            for (int s = 0; s < STAGES; s++)
                t[s][r] = sample(&a, (enum stage)s);
        double m[STAGES], total = 0;
        for (int s = 0; s < STAGES; s++) {
            m[s] = median(t[s], ROUNDS);
            if (s != NATIVE) total += m[s];
        }
        printf("%-8s %-8s %2.1f words an element:", name, levels[level],
               (double)words / (double)ELEMENTS);
        for (int s = 0; s < NATIVE; s++)
            printf(" %s %.2f", stage_names[s], m[s]);
        printf(" = %.2f ns; native sum %.2f ns; ratio %.1f\n", total, m[NATIVE], total / m[NATIVE]);
    }
    engine_limit_kernels(ENGINE_KERNELS_AUTO);
    free(a.terms), free(a.other), free(a.result), free(a.codes), free(a.wire), free(a.offsets);
    free(a.words);
}

int main(void)
{
    printf("%zu elements, %d ranks, gradient-like values; ns an element, medians of %d\n", ELEMENTS,
           RANKS, ROUNDS);
    bench_type(REPROD_FLOAT32, "float32");
    bench_type(REPROD_FLOAT64, "float64");
    return 0;
}
