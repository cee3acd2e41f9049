/* exactness.c: the same contributions, placed on the ranks in several rotations, reduced with
 * MPI_Allreduce, MPI_Reduce and MPI_Reduce_scatter_block; the results are compared with the
 * correctly rounded exact sum (MPFR's mpfr_sum: job_oracle.h), across rotations and across ranks.
 *
 * An ordinary MPI program: it knows nothing of the shim. Under the shim every check holds; run
 * natively with --native it skips the oracle and reports how many different results the
 * rotations gave, which tests/mpi/mpi_exactness.sh uses to show that natively they differ.
 *
 * Output (rank 0): one line per case, "case <call> <type> <count> <digest> <distinct>", the
 * digest of rotation 0's result and the number of distinct results over the rotations.
 * Exit status 1 on a check that failed, with the inputs of the first wrong element.
 */
#include "job_oracle.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROTATIONS 4

static int rank, ranks, native, failures;

/* Element i of contribution v (from mix(), so that every rank can make every contribution):
 * magnitudes over 2^-30 .. 2^30 and both signs, plus every 5th
 * element a large value that cancels between even and odd contributions, so that the rounded
 * sum depends on the order of additions. */
static double value(int v, size_t i)
{
    uint64_t bits = mix(((uint64_t)v << 40) ^ i);
    double mantissa = (double)(bits >> 11) / 9007199254740992.0; /* [0, 1), 53 bits */
    int exponent = (int)((bits >> 3) % 61) - 30;
    double x = (1.0 + mantissa) * ldexp(1.0, exponent);
    if (bits & 1) x = -x;
    if (i % 5 == 0) x += (v % 2 ? -1.0 : 1.0) * ldexp(1.0, 40);
    return x;
}

struct type_case {
    const char *name;
    MPI_Datatype datatype;
    size_t bytes;
};

static void fill(const struct type_case *type, int v, size_t count, void *out)
{
    for (size_t i = 0; i < count; i++) {
        double x = value(v, i);
        if (type->bytes == 4)
            ((float *)out)[i] = (float)x;
        else
            ((double *)out)[i] = x;
    }
}

/* Check result[offset ..) against the exact sum of all contributions, rounded to nearest. */
static void check_oracle(const struct type_case *type, const char *call, const void *result,
                         size_t count, size_t offset)
{
    reprod_type t = type->bytes == 4 ? REPROD_FLOAT32 : REPROD_FLOAT64;
    double terms[ORACLE_MAX_TERMS], expected;
    for (size_t i = 0; i < count; i++) {
        for (int v = 0; v < ranks && v < ORACLE_MAX_TERMS; v++)
            terms[v] =
                type->bytes == 4 ? (double)(float)value(v, offset + i) : value(v, offset + i);
        const char *got = (const char *)result + i * type->bytes;
        if (!oracle_matches(t, REPROD_ROUND_NEAREST, terms, ranks, got, &expected) &&
            failures++ < 5) {
            double mine = t == REPROD_FLOAT32 ? (double)*(const float *)(const void *)got
                                              : *(const double *)(const void *)got;
            fprintf(stderr, "rank %d: %s %s element %zu: expected %a, got %a; inputs:", rank, call,
                    type->name, offset + i, expected, mine);
            for (int v = 0; v < ranks && v < ORACLE_MAX_TERMS; v++)
                fprintf(stderr, " %a", terms[v]);
            fprintf(stderr, "\n");
        }
    }
}

/* Every rank must hold the same digest as rank 0. */
static void check_same_everywhere(const char *call, const char *type, uint64_t mine)
{
    uint64_t root = mine;
    MPI_Bcast(&root, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (root != mine && failures++ < 5)
        fprintf(stderr, "rank %d: %s %s: result differs from rank 0's\n", rank, call, type);
}

enum call { ALLREDUCE, REDUCE, REDUCE_SCATTER_BLOCK, CALLS };
static const char *const call_names[CALLS] = {"allreduce", "reduce", "reduce_scatter_block"};

/* One case: run `call` once per rotation, check, print the line. */
static void run_case(enum call call, const struct type_case *type, size_t count)
{
    size_t total = call == REDUCE_SCATTER_BLOCK ? count * (size_t)ranks : count;
    char *send = malloc(type->bytes * total + 1);
    char *receive = malloc(type->bytes * total + 1);
    uint64_t digests[ROTATIONS];
    for (int rotation = 0; rotation < ROTATIONS; rotation++) {
        int v = (rank + rotation) % ranks; /* which contribution this rank holds */
        int root = rotation % ranks;
        fill(type, v, total, send);
        memset(receive, 0, type->bytes * total);
        size_t offset = 0;
        if (call == ALLREDUCE)
            MPI_Allreduce(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD);
        else if (call == REDUCE)
            MPI_Reduce(send, receive, (int)count, type->datatype, MPI_SUM, root, MPI_COMM_WORLD);
        else
            MPI_Reduce_scatter_block(send, receive, (int)count, type->datatype, MPI_SUM,
                                     MPI_COMM_WORLD);
        if (call == REDUCE_SCATTER_BLOCK) offset = (size_t)rank * count;
        /* A reduce's result is on the root only: broadcast it so every rank checks it. */
        if (call == REDUCE)
            MPI_Bcast(receive, (int)(count * type->bytes), MPI_BYTE, root, MPI_COMM_WORLD);
        digests[rotation] = digest(receive, count * type->bytes);
        /* The oracle once; the other rotations must give the same bits (checked below). */
        if (!native && rotation == 0) check_oracle(type, call_names[call], receive, count, offset);
        if (call != REDUCE_SCATTER_BLOCK)
            check_same_everywhere(call_names[call], type->name, digests[rotation]);
    }
    int distinct = 0;
    for (int a = 0; a < ROTATIONS; a++) {
        int seen = 0;
        for (int b = 0; b < a; b++)
            seen |= digests[a] == digests[b];
        distinct += !seen;
    }
    if (!native && distinct != 1 && failures++ < 5)
        fprintf(stderr, "rank %d: %s %s %zu: %d different results over the rotations\n", rank,
                call_names[call], type->name, count, distinct);
    /* For a reduce-scatter each rank holds its own block: report rank 0's. */
    if (rank == 0)
        printf("case %s %s %zu %016llx %d\n", call_names[call], type->name, count,
               (unsigned long long)digests[0], distinct);
    free(send);
    free(receive);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    native = argc > 1 && strcmp(argv[1], "--native") == 0;

    const struct type_case types[] = {{"double", MPI_DOUBLE, 8}, {"float", MPI_FLOAT, 4}};
    const size_t counts[] = {1, 7, 1000, 40000};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (int call = 0; call < CALLS; call++)
                run_case((enum call)call, &types[t], counts[c]);

    int all_failures = 0;
    MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return all_failures ? 1 : 0;
}
