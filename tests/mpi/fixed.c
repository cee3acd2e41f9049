/* fixed.c: every float sum the shim serves (MPI_Allreduce, MPI_Reduce, MPI_Reduce_scatter_block,
 * MPI_Reduce_scatter, MPI_Scan, MPI_Exscan, MPI_Iallreduce, MPI_Ireduce, MPI_Iscan,
 * MPI_Ireduce_scatter, the persistent all-reduce) on float, double and both complex types, checked element by element
 * against MPFR's correctly rounded sum in the direction REPROD_ROUNDING names. Written for
 * tests/mpi/mpi_fixed.sh, which runs it with REPROD_ROUTE=fixed and =exchange: the same bits
 * either way.
 *
 * The data: wide exponents, both signs, cancellation (so the rounded sum depends on order),
 * signed zeros (every term -0, a mix), an infinity on rank 1 only (a scan's prefix before it is
 * finite), subnormals; with --large, large calls too ("large" lines: several segments and pieces of
 * the fixed route). Then the "pairs" cases: rank 0 and 1 hold A and B, the other ranks pairs
 * c, -c that cancel exactly (an odd one out holds +0), so that every world size has the same
 * exact sum, A + B, while a native sum's order makes it lose A or B under c.
 *
 * An ordinary MPI program; it knows nothing of the shim (--native: no oracle). Output (rank 0):
 * one line per case, "case|large|pairs <call> <type> <count> <digest>" (a reduce-scatter's digest is of rank 0's block, a
 * scan's of the last rank's prefix). Exit status 1 on a wrong element, printed with its inputs.
 */
#include "job_oracle.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#define ALLREDUCE_INIT MPIX_Allreduce_init
#else
#define ALLREDUCE_INIT MPI_Allreduce_init
#endif

static int rank, ranks, pairs, wide, large, native, failures;
static reprod_rounding direction = REPROD_ROUND_NEAREST;

/* Real number i of contribution v (a complex element is two reals), in a type whose
 * smallest normal exponent is `min_exponent` (float: -126, double: -1022). */
static double value(int v, size_t i, int min_exponent)
{
    uint64_t bits = mix(((uint64_t)(v + 1) << 40) ^ (i * 7919));
    if (wide) { /* terms across the whole binary64 range: the most words an element takes
                   (ranks 0 and 1 at its two ends, so that every element spans it) */
        int exponent = v == 0 ? -1000 : v == 1 ? 999 : (int)(bits % 2000) - 1000;
        double x = ldexp(1.0 + (double)(bits >> 12) / 4503599627370496.0, exponent);
        return (bits & 1) ? -x : x;
    }
    if (pairs) {
        double x = ldexp(1.0 + (double)(bits >> 12) / 4503599627370496.0, (int)(bits % 41) - 20);
        if (v == 0 || v == 1) return (bits & 1) ? -x : x;
        if (v == ranks - 1 && (ranks - 2) % 2) return 0.0; /* the odd one out */
        int pair = (v - 2) / 2;
        uint64_t c = mix(((uint64_t)pair << 32) ^ i ^ 0x5555);
        double big = ldexp(1.0 + (double)(c >> 12) / 4503599627370496.0, 60 + (int)(c % 8));
        return (v - 2) % 2 ? -big : big;
    }
    if (i % 17 == 6) return v % 2 ? 0.0 : -0.0; /* a mix of signed zeros */
    if (i % 19 == 7) return -0.0;               /* every term -0 */
    if (i % 13 == 4 && v == 1) return INFINITY; /* one infinity, on rank 1 */
    if (i % 23 == 9) return ldexp((double)(bits % 1000) - 500.0, min_exponent - 10); /* subnormal */
    double mantissa = (double)(bits >> 11) / 9007199254740992.0;
    double x = (1.0 + mantissa) * ldexp(1.0, (int)((bits >> 3) % 61) - 30);
    if (bits & 1) x = -x;
    if (i % 5 == 0) x += (v % 2 ? -1.0 : 1.0) * ldexp(1.0, 40);
    return x;
}

struct type_case {
    const char *name;
    MPI_Datatype datatype;
    size_t real_bytes; /* of one real component */
    int components;    /* 2 for complex */
    int min_exponent;
};

static double to_type(const struct type_case *type, double x)
{
    return type->real_bytes == 4 ? (double)(float)x : x;
}

static void fill(const struct type_case *type, int v, size_t reals, size_t first, void *out)
{
    for (size_t i = 0; i < reals; i++) {
        double x = value(v, first + i, type->min_exponent);
        if (type->real_bytes == 4)
            ((float *)out)[i] = (float)x;
        else
            ((double *)out)[i] = x;
    }
}

/* result[0 .. reals) against the exact sum of contributions first_term .. first_term + terms - 1
 * of reals first .. first + reals, rounded once in the direction of REPROD_ROUNDING. */
static void check(const struct type_case *type, const char *call, const void *result,
                  size_t reals, size_t first, int first_term, int terms)
{
    if (native || terms <= 0) return;
    reprod_type t = type->real_bytes == 4 ? REPROD_FLOAT32 : REPROD_FLOAT64;
    double values[ORACLE_MAX_TERMS], expected;
    for (size_t i = 0; i < reals; i++) {
        for (int k = 0; k < terms && k < ORACLE_MAX_TERMS; k++)
            values[k] = to_type(type, value(first_term + k, first + i, type->min_exponent));
        const char *got = (const char *)result + i * type->real_bytes;
        if (!oracle_matches(t, direction, values, terms, got, &expected) && failures++ < 5) {
            double mine = t == REPROD_FLOAT32 ? (double)*(const float *)(const void *)got
                                              : *(const double *)(const void *)got;
            fprintf(stderr,
                    "rank %d of %d: %s %s real %zu: expected %a, got %a; terms %d..%d:", rank,
                    ranks, call, type->name, first + i, expected, mine, first_term,
                    first_term + terms - 1);
            for (int k = 0; k < terms && k < 8; k++)
                fprintf(stderr, " %a", values[k]);
            fprintf(stderr, "\n");
        }
    }
}

enum call {
    ALLREDUCE, ALLREDUCE_IN_PLACE, REDUCE, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER, SCAN, EXSCAN,
    IALLREDUCE, IREDUCE, ISCAN, IREDUCE_SCATTER, PERSISTENT, CALLS
};
static const char *const names[CALLS] = {
    "allreduce", "allreduce_in_place", "reduce", "reduce_scatter_block", "reduce_scatter",
    "scan", "exscan", "iallreduce", "ireduce", "iscan", "ireduce_scatter", "persistent"};

/* Report a digest of `bytes` at `data` held by rank `holder`. */
static void report(enum call call, const struct type_case *type, size_t count, const void *data,
                   size_t bytes, int holder)
{
    uint64_t mine = digest(data, bytes), theirs = mine;
    MPI_Bcast(&theirs, 1, MPI_UINT64_T, holder, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s %s %zu %016llx\n", pairs ? "pairs" : count > 1000 ? "large" : "case",
               names[call], type->name, count,
               (unsigned long long)theirs);
}

static void run_case(enum call call, const struct type_case *type, size_t count)
{
    size_t element = type->real_bytes * (size_t)type->components;
    size_t reals = count * (size_t)type->components;
    /* A reduce-scatter: rank r gets count + (r % 3) elements (block: count each). */
    int *counts = malloc(sizeof(int) * (size_t)ranks);
    size_t total = 0, mine_first = 0;
    for (int r = 0; r < ranks; r++) {
        counts[r] = (int)count + (call == REDUCE_SCATTER || call == IREDUCE_SCATTER ? r % 3 : 0);
        if (r < rank) mine_first += (size_t)counts[r];
        total += (size_t)counts[r];
    }
    int scattered = call == REDUCE_SCATTER || call == REDUCE_SCATTER_BLOCK || call == IREDUCE_SCATTER;
    size_t in_elements = scattered ? total : count;
    size_t out_elements = scattered ? (size_t)counts[rank] : count;
    char *send = malloc(element * in_elements + 8);
    char *receive = malloc(element * in_elements + 8);
    fill(type, rank, in_elements * (size_t)type->components, 0, send);
    memset(receive, 0x7f, element * in_elements);
    MPI_Request request;
    /* The last rank, or rank 1 for an even count (MPICH 4.0 mishandles MPI_IN_PLACE on a
     * root other than 0 from 512 int64 elements: the fixed route must not rely on it). */
    int root = count % 2 == 0 && ranks > 1 ? 1 : ranks - 1;
    switch (call) {
    case ALLREDUCE:
        MPI_Allreduce(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLREDUCE_IN_PLACE:
        memcpy(receive, send, element * count);
        MPI_Allreduce(MPI_IN_PLACE, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(send, receive, (int)count, type->datatype, MPI_SUM, root, MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER_BLOCK:
        MPI_Reduce_scatter_block(send, receive, (int)count, type->datatype, MPI_SUM,
                                 MPI_COMM_WORLD);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter(send, receive, counts, type->datatype, MPI_SUM, MPI_COMM_WORLD);
        break;
    case SCAN:
        MPI_Scan(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD);
        break;
    case EXSCAN:
        MPI_Exscan(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD);
        break;
    case IALLREDUCE:
        MPI_Iallreduce(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD,
                       &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case IREDUCE:
        MPI_Ireduce(send, receive, (int)count, type->datatype, MPI_SUM, root, MPI_COMM_WORLD,
                    &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case ISCAN:
        MPI_Iscan(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD, &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case IREDUCE_SCATTER:
        MPI_Ireduce_scatter(send, receive, counts, type->datatype, MPI_SUM, MPI_COMM_WORLD,
                            &request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        break;
    case PERSISTENT:
        ALLREDUCE_INIT(send, receive, (int)count, type->datatype, MPI_SUM, MPI_COMM_WORLD,
                       MPI_INFO_NULL, &request);
        /* Twice: the second round's contribution differs (the first's negated). */
        for (int round = 0; round < 2; round++) {
            if (round && !pairs) fill(type, rank + 1000, reals, 0, send);
            MPI_Start(&request);
            MPI_Wait(&request, MPI_STATUS_IGNORE);
            if (!round) check(type, "persistent (round 1)", receive, reals, 0, 0, ranks);
        }
        MPI_Request_free(&request);
        break;
    default:
        break;
    }
    const char *name = names[call];
    size_t out_reals = out_elements * (size_t)type->components;
    int holder = 0;
    if (call == REDUCE || call == IREDUCE) {
        if (rank == root) check(type, name, receive, out_reals, 0, 0, ranks);
        holder = root;
    } else if (scattered) {
        check(type, name, receive, out_reals, mine_first * (size_t)type->components, 0, ranks);
    } else if (call == SCAN || call == ISCAN) {
        check(type, name, receive, out_reals, 0, 0, rank + 1);
        holder = ranks - 1;
    } else if (call == EXSCAN) {
        check(type, name, receive, out_reals, 0, 0, rank);
        holder = ranks - 1;
    } else if (call == PERSISTENT) {
        if (!native) { /* round 2: contributions 1000 .. 1000 + ranks - 1 */
            check(type, "persistent (round 2)", receive, out_reals, 0, pairs ? 0 : 1000, ranks);
        }
    } else {
        check(type, name, receive, out_reals, 0, 0, ranks);
    }
    report(call, type, count, receive, element * out_elements, holder);
    free(send);
    free(receive);
    free(counts);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    for (int a = 1; a < argc; a++) {
        native |= strcmp(argv[a], "--native") == 0;
        large |= strcmp(argv[a], "--large") == 0;
    }
    const char *rounding = getenv("REPROD_ROUNDING");
    if (rounding && strcmp(rounding, "zero") == 0) direction = REPROD_ROUND_ZERO;
    if (rounding && strcmp(rounding, "up") == 0) direction = REPROD_ROUND_UP;
    if (rounding && strcmp(rounding, "down") == 0) direction = REPROD_ROUND_DOWN;

    const struct type_case types[] = {
        {"float", MPI_FLOAT, 4, 1, -126},
        {"double", MPI_DOUBLE, 8, 1, -1022},
        {"complex", MPI_C_FLOAT_COMPLEX, 4, 2, -126},
        {"double_complex", MPI_C_DOUBLE_COMPLEX, 8, 2, -1022},
    };
    /* 20: at 32 ranks Open MPI's decision would run its 40 bytes of codes as a ring and its 20
     * words (floats, one word each) as Rabenseifner's linear fallback; the route pads both
     * (hooks/mpi/mpi_fixed.c, handed_count). */
    const size_t counts[] = {1, 20, 41};
    for (pairs = 0; pairs < 2; pairs++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (int call = 0; call < CALLS; call++) {
                    /* Pairs: the calls whose result is the whole sum. */
                    if (pairs && (call == SCAN || call == EXSCAN || call == ISCAN)) continue;
                    run_case((enum call)call, &types[t], counts[c]);
                }
    /* --large: large calls (on few ranks: MPFR checks every element), two segments of pass 1
     * (hooks/mpi/mpi_fixed.c: 2 (2^22 - 2^16) elements, the first in two pieces of pass 2), and
     * with terms over the whole binary64 range (35 words an element at 3 ranks) two pieces of
     * pass 2. */
    pairs = 0;
    run_case(REDUCE, &types[0], 600);
    run_case(IREDUCE, &types[0], 600);
    if (large) {
        run_case(ALLREDUCE, &types[0], 2 * (((size_t)1 << 22) - ((size_t)1 << 16)) + 77);
        run_case(REDUCE_SCATTER_BLOCK, &types[0], ((size_t)1 << 17) / (size_t)ranks + 5);
        wide = 1;
        run_case(ALLREDUCE, &types[1], ((size_t)1 << 17) + 3);
        run_case(REDUCE, &types[1], ((size_t)1 << 17) + 3);
        wide = 0;
    }
    int all_failures = 0;
    MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return all_failures ? 1 : 0;
}
