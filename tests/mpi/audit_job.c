/* audit_job.c: reductions whose native sums are off, checked against MPFR by the program
 * itself, for tests/runtime/audit.sh: the program counts, independently of the shim, how many
 * elements of each result differ from the correctly rounded sum and by how many ulps; under
 * REPROD_MODE=audit the shim's audit line must report the same numbers.
 *
 * An ordinary MPI program. `--integers`: integer-valued data, whose every sum is exact in any
 * order (the audit must find nothing). Output (rank 0 and every rank's own line):
 *   oracle rank=<r> calls=<n> differed=<calls> elements=<e> worst=<ulps>
 * Calls, per rank: MPI_Allreduce float64, float32 (in place), MPI_Reduce float64 (root 0
 * receives), MPI_Reduce_scatter_block float64, then one MPI_Iallreduce (not audited).
 */
#include <math.h>
#include <mpfr.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 4096

static int rank, ranks, integers;
static long calls, differed_calls, differed_elements;
static uint64_t worst;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Element i of rank r's contribution: wide magnitudes, both signs, and a large term cancelling
 * between even and odd ranks (the rounded sum then depends on the order); or small integers. */
static double value(int r, int i)
{
    uint64_t bits = mix(((uint64_t)r << 40) ^ (uint64_t)i);
    if (integers) return (double)((int64_t)(bits % 2001) - 1000);
    double x = (1.0 + (double)(bits >> 11) / 9007199254740992.0) *
               ldexp(1.0, (int)((bits >> 3) % 41) - 20);
    if (bits & 1) x = -x;
    if (i % 3 == 0) x += (r % 2 ? -1.0 : 1.0) * ldexp(1.0, 30);
    return x;
}

/* The ordered integer of a binary64: sign-magnitude to two's complement. */
static int64_t ordered64(double x)
{
    int64_t bits;
    memcpy(&bits, &x, 8);
    return bits < 0 ? -(bits & INT64_MAX) : bits;
}

static int64_t ordered32(float x)
{
    int32_t bits;
    memcpy(&bits, &x, 4);
    return bits < 0 ? -(int64_t)(bits & INT32_MAX) : bits;
}

/* The correctly rounded (nearest) sum over all ranks of element i, in binary64 or binary32. */
static double oracle(int i, int single)
{
    mpfr_t sum, term;
    mpfr_inits2(2200, sum, term, (mpfr_ptr)0);
    mpfr_set_zero(sum, 1);
    for (int r = 0; r < ranks; r++) {
        double v = single ? (double)(float)value(r, i) : value(r, i);
        mpfr_set_d(term, v, MPFR_RNDN);
        mpfr_add(sum, sum, term, MPFR_RNDN); /* exact at this precision */
    }
    double result = single ? (double)mpfr_get_flt(sum, MPFR_RNDN) : mpfr_get_d(sum, MPFR_RNDN);
    mpfr_clears(sum, term, (mpfr_ptr)0);
    return result;
}

/* Count one received result: `received` holds elements first .. first + n of the sum. */
static void check(const void *received, int first, int n, int single)
{
    long differing = 0;
    for (int k = 0; k < n; k++) {
        double expected = oracle(first + k, single);
        int64_t a, b;
        if (single) {
            a = ordered32(((const float *)received)[k]);
            b = ordered32((float)expected);
        } else {
            a = ordered64(((const double *)received)[k]);
            b = ordered64(expected);
        }
        if (a == b) continue;
        differing++;
        uint64_t ulps = (uint64_t)(a > b ? a - b : b - a);
        if (ulps > worst) worst = ulps;
    }
    calls++;
    if (differing) differed_calls++;
    differed_elements += differing;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    integers = argc > 1 && strcmp(argv[1], "--integers") == 0;
    static double send[COUNT], receive[COUNT];
    static float single[COUNT];
    for (int i = 0; i < COUNT; i++) {
        send[i] = value(rank, i);
        single[i] = (float)value(rank, i);
    }
    MPI_Allreduce(send, receive, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check(receive, 0, COUNT, 0);
    MPI_Allreduce(MPI_IN_PLACE, single, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check(single, 0, COUNT, 1);
    MPI_Reduce(send, receive, COUNT, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) check(receive, 0, COUNT, 0);
    else calls++; /* audited, nothing received */
    int block = COUNT / ranks;
    MPI_Reduce_scatter_block(send, receive, block, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check(receive, rank * block, block, 0);
    MPI_Request request;
    MPI_Iallreduce(send, receive, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    printf("oracle rank=%d calls=%ld differed=%ld elements=%ld worst=%llu\n", rank, calls,
           differed_calls, differed_elements, (unsigned long long)worst);
    MPI_Finalize();
    return 0;
}
