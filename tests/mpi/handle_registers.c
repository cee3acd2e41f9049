/* handle_registers.c: MPI_Allreduce and MPI_Reduce called through function pointers whose
 * handle, count and root parameters are 64-bit: the value in the low 32 bits, garbage above it,
 * as a caller built by another compiler or from another language may leave its registers. On
 * x86-64 and AArch64 the upper half of a register that carries an int is undefined, and MPICH,
 * whose handles are ints, reads the low half only; so must anything that stands in between.
 * (Open MPI's handles are pointers, whole registers: its build passes them clean.)
 *
 * Three ranks hold, for each of three elements, the values 2^60, -2^60 and 1 in a rotated
 * placement: whatever order a library adds them in, two of the three elements lose the 1 to
 * rounding, so natively the result differs from the exact sum (MPFR's mpfr_sum).
 *
 * Output (rank 0), one line per call:
 *     <call> <handles: dirty|clean> <each element with %a> <exact|inexact>
 * Exit status 0 unless an MPI call failed, or the program runs on other than 3 ranks.
 */
#include <mpfr.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RANKS    3
#define ELEMENTS 3

/* The same calls with every int and handle parameter 64 bits wide. */
typedef int (*wide_allreduce)(const void *, void *, uint64_t, uint64_t, uint64_t, uint64_t);
typedef int (*wide_reduce)(const void *, void *, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

/* A handle (or int) as a 64-bit argument: for MPICH, garbage in the upper half. */
#ifdef MPICH_VERSION
#define HANDLES     "dirty"
#define WIDE(value) ((uint64_t)0xdeadbeefu << 32 | (uint32_t)(value))
#else
#define HANDLES     "clean"
#define WIDE(value) ((uint64_t)(uintptr_t)(value))
#endif

static const double values[RANKS] = {0x1p60, -0x1p60, 1.0};

/* The contribution of `rank` to `element`. */
static double contribution(int rank, int element)
{
    return values[(rank + element) % RANKS];
}

/* 1 when `result` is every element's exact sum, rounded once (MPFR). */
static int exact(const double *result)
{
    int all = 1;
    for (int element = 0; element < ELEMENTS; element++) {
        mpfr_t terms[RANKS], sum;
        mpfr_ptr pointers[RANKS];
        for (int r = 0; r < RANKS; r++) {
            mpfr_init2(terms[r], 53);
            mpfr_set_d(terms[r], contribution(r, element), MPFR_RNDN);
            pointers[r] = terms[r];
        }
        mpfr_init2(sum, 53);
        mpfr_sum(sum, pointers, RANKS, MPFR_RNDN);
        double expected = mpfr_get_d(sum, MPFR_RNDN);
        if (memcmp(&expected, &result[element], sizeof expected) != 0) all = 0;
        mpfr_clear(sum);
        for (int r = 0; r < RANKS; r++)
            mpfr_clear(terms[r]);
    }
    return all;
}

static void report(int rank, const char *call, const double *result)
{
    if (rank != 0) return;
    printf("%s %s", call, HANDLES);
    for (int element = 0; element < ELEMENTS; element++)
        printf(" %a", result[element]);
    printf(" %s\n", exact(result) ? "exact" : "inexact");
}

int main(int argc, char **argv)
{
    int rank, ranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != RANKS) {
        if (rank == 0) fprintf(stderr, "handle_registers: run on %d ranks\n", RANKS);
        MPI_Finalize();
        return 2;
    }
    double send[ELEMENTS], result[ELEMENTS];
    for (int element = 0; element < ELEMENTS; element++)
        send[element] = contribution(rank, element);

    wide_allreduce allreduce = (wide_allreduce)(void (*)(void))MPI_Allreduce;
    wide_reduce reduce = (wide_reduce)(void (*)(void))MPI_Reduce;
    int rc = allreduce(send, result, WIDE(ELEMENTS), WIDE(MPI_DOUBLE), WIDE(MPI_SUM),
                       WIDE(MPI_COMM_WORLD));
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "handle_registers: MPI_Allreduce returned %d\n", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    report(rank, "MPI_Allreduce", result);

    memset(result, 0, sizeof result);
    rc = reduce(send, result, WIDE(ELEMENTS), WIDE(MPI_DOUBLE), WIDE(MPI_SUM), WIDE(0),
                WIDE(MPI_COMM_WORLD));
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "handle_registers: MPI_Reduce returned %d\n", rc);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    report(rank, "MPI_Reduce", result);
    MPI_Finalize();
    return 0;
}
