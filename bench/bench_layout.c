/* bench_layout.c: how many words the fixed route's layout takes for data of three shapes
 * (issue 19), by the engine's own codes and layout, not by a model.
 *
 * The fixed route writes each element as K_e words relative to the largest and smallest bucket
 * of its N contributions (engine_fixed_element): one int64 word holds a binary32 element whose
 * contributions lie within 53 - 24 = 29 binades of each other at 1,024 ranks, a narrow int32
 * word a bfloat16 element within 21 - 8 = 13. The MPI route lays out K_e words for each element
 * (reprod_engine_fixed_layout): its bytes follow the average K_e. So do NCCL's AllReduce and
 * Reduce (the device kernels' per-element layout), in one kind of word a piece: narrow int32
 * ones where every element has them and they take fewer bytes in all. NCCL's ReduceScatter
 * writes every element of a piece with the piece's largest K (a stride, so that each rank's
 * block of words is the same size): one element in 16 Mi decides for all of them, so what
 * matters there is the share of elements that need more, raised to the piece's size.
 *
 * The shapes, element i of rank r: "similar" (one sign, within 4 binades, as the tests' data);
 * "noise" (zero-mean normal: sign-mixed, a few contributions near 0, as a gradient's noise
 * across data-parallel ranks); "signal+noise" (a normal mean per element, plus normal noise of
 * the same size per rank). Deterministic (one seed); always exits 0.
 */
#include "engine/engine.h"
#include "engine/engine_fixed.h"
#include "device/cuda_kernel_fixed.h" /* reprod_fixed_narrow_words */
#include "bench_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_PIECE ((double)((16 << 20) - 128)) /* elements: hooks/nccl/nccl_fixed.c at 64 MiB */

enum shape { SIMILAR, NOISE, SIGNAL_NOISE, SHAPES };
static const char *const shape_names[SHAPES] = {"similar", "noise", "signal+noise"};

/* A standard normal (Box-Muller, one of the pair). */
static double normal(uint64_t *state)
{
    double u = ((double)(next_random(state) >> 11) + 0.5) * 0x1p-53;
    double v = (double)(next_random(state) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static double value(enum shape s, const double *mean, uint64_t *state, size_t i)
{
    switch (s) {
    case SIMILAR: {
        double u = (double)(next_random(state) >> 11) * 0x1p-53;
        return ldexp(1.0 + u, -7 - (int)(next_random(state) % 4));
    }
    case NOISE:
        return 1e-3 * normal(state);
    default:
        return 1e-3 * (mean[i] + normal(state));
    }
}

static void store(reprod_type type, void *array, size_t i, double v)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if (type == REPROD_FLOAT32) {
        memcpy((char *)array + 4 * i, &bits, 4);
    } else { /* bfloat16, rounded to nearest even */
        uint16_t b = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
        memcpy((char *)array + 2 * i, &b, 2);
    }
}

/* The words of `elements` elements from their reduced codes: int64 ones (in all, the most, the
 * elements that take more than one) and narrow ones (in all where every element has them, the
 * most, the elements that take more than one). */
struct words {
    size_t wide, narrow, wide_more, narrow_more;
    int32_t most[REPROD_FIXED_CELLS]; /* as MAX_WORDS finds them */
};

static struct words count_words(reprod_type type, int ranks, const uint8_t *reduced,
                                size_t elements)
{
    const struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    struct words w = {0, 0, 0, 0, {0, 0}};
    for (size_t i = 0; i < elements; i++) {
        int k = engine_fixed_element(&f, word_bits, reduced[2 * i], reduced[2 * i + 1],
                                     REPROD_ROUND_NEAREST)
                    .words;
        int narrow = reprod_fixed_narrow_words(&f, ranks, reduced[2 * i], reduced[2 * i + 1],
                                               REPROD_ROUND_NEAREST);
        w.wide += (size_t)k;
        w.narrow += narrow <= REPROD_FIXED_NARROW_MOST ? (size_t)narrow : 0;
        w.wide_more += k > 1;
        w.narrow_more += narrow > 1;
        if (k > w.most[0]) w.most[0] = k;
        if (narrow > w.most[1]) w.most[1] = narrow;
    }
    return w;
}

/* NCCL AllReduce's bytes an element: its words in the unit TOTAL's rule picks. */
static double nccl_word_bytes(const struct words *w, double n)
{
    int unit = reprod_fixed_fewer_narrow(1, w->most[1], w->narrow, w->wide);
    return (unit ? 4.0 * (double)w->narrow : 8.0 * (double)w->wide) / n;
}

/* One row: `ranks` contributions of `elements` elements, their codes reduced through the wire
 * (reprod_engine_fixed_pack, as the routes send them) and, for comparison, element by element
 * (a lo an element); then the words. */
static void row(reprod_type type, const char *name, int ranks, size_t elements, enum shape s)
{
    size_t size = reprod_type_size(type);
    void *terms = malloc(elements * size);
    size_t wire_bytes = reprod_engine_fixed_packed_bytes(type, elements);
    uint8_t *codes = malloc(2 * elements), *own = calloc(2 * elements, 1);
    uint8_t *wire = malloc(wire_bytes), *max_wire = calloc(wire_bytes, 1);
    uint8_t *reduced = malloc(2 * elements);
    double *mean = malloc(elements * sizeof *mean);
    uint64_t state = 0x5eedull + (uint64_t)ranks * 131 + (uint64_t)s;
    for (size_t i = 0; i < elements; i++)
        mean[i] = normal(&state);
    for (int r = 0; r < ranks; r++) {
        for (size_t i = 0; i < elements; i++)
            store(type, terms, i, value(s, mean, &state, i));
        reprod_engine_fixed_codes(type, terms, elements, codes);
        for (size_t i = 0; i < 2 * elements; i++)
            if (codes[i] > own[i]) own[i] = codes[i];
        reprod_engine_fixed_pack(type, REPROD_ROUND_NEAREST, codes, elements, wire);
        for (size_t i = 0; i < wire_bytes; i++)
            if (wire[i] > max_wire[i]) max_wire[i] = wire[i];
    }
    reprod_engine_fixed_unpack(type, REPROD_ROUND_NEAREST, max_wire, elements, reduced);
    struct words w = count_words(type, ranks, reduced, elements);
    struct words apart = count_words(type, ranks, own, elements); /* a lo an element */
    int stride, narrow = reprod_fixed_layout(w.most, 1, &stride);
    double n = (double)elements, codes_per = (double)wire_bytes / n;
    double share = (double)(size == 2 ? w.narrow_more : w.wide_more) / n;
    /* A piece of NCCL_PIECE elements holds no such element with probability (1 - share)^P. */
    double clean = share > 0 ? exp(NCCL_PIECE * log1p(-share)) : 1.0;
    double mpi = (codes_per + 8.0 * (double)w.wide / n) / (double)size;
    double nccl = (codes_per + nccl_word_bytes(&w, n)) / (double)size;
    double nccl_apart = (2.0 + nccl_word_bytes(&apart, n)) / (double)size;
    double nccl_stride = (codes_per + (narrow ? 4.0 : 8.0) * stride) / (double)size;
    printf("%-8s %6d %-13s %9.2e %8.3f %4d %8.2f %8.2f %9.2f %9.3g %8.2f\n", name, ranks,
           shape_names[s], share, (double)w.wide / n, w.most[0], mpi, nccl, nccl_apart, clean,
           nccl_stride);
    free(terms), free(codes), free(own), free(wire), free(max_wire), free(reduced), free(mean);
}

int main(void)
{
    printf("the fixed route's words for data shapes, its codes reduced as the routes send them "
           "(a hi an element; a lo a block of 8 binary32 elements, of 1 bfloat16): share = "
           "elements needing more than one word (binary32: int64; bfloat16: a narrow int32 "
           "word); words = int64 words an element (K_e, the MPI route's layout); most = the "
           "largest K_e; bytes = shim/native bytes of one all-reduce's two passes: MPI (K_e an "
           "element), NCCL AllReduce and Reduce (each element's own words, int64 or narrow int32 "
           "ones, the fewer bytes); lo apart = NCCL's with a lo an element (2 bytes of codes); "
           "P(piece) = probability that a piece of 16 Mi elements has no such element; NCCL RS = "
           "ReduceScatter's bytes for this data (its widest element's words for every element)\n");
    printf("%-8s %6s %-13s %9s %8s %4s %8s %8s %9s %9s %8s\n", "type", "ranks", "shape", "share",
           "words", "most", "MPI", "NCCL", "lo apart", "P(piece)", "NCCL RS");
    static const struct {
        int ranks;
        size_t elements;
    } sizes[] = {{32, (size_t)1 << 19}, {1024, (size_t)1 << 17}, {16384, (size_t)1 << 12}};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
        for (int s = 0; s < SHAPES; s++) {
            row(REPROD_FLOAT32, "float32", sizes[z].ranks, sizes[z].elements, (enum shape)s);
            row(REPROD_BFLOAT16, "bfloat16", sizes[z].ranks, sizes[z].elements, (enum shape)s);
        }
    return 0;
}
