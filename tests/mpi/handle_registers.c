/* handle_registers.c: MPI's reductions called through function pointers whose handle, count and
 * root parameters are 64-bit: the value in the low 32 bits, garbage above it, as a caller built
 * by another compiler or from another language may leave its registers. On x86-64 and AArch64
 * the upper half of a register that carries an int is undefined, and MPICH, whose handles are
 * ints, reads the low half only; so must anything that stands in between. (Open MPI's handles
 * are pointers, whole registers: its build passes them clean.)
 *
 * Every kind of hook that takes a handle by value is called so: blocking (classic, and
 * large-count with an MPI-4 library), nonblocking, persistent (MPI-4), and
 * MPI_Request_get_status on a nonblocking call's request (which must find it the shim's, and
 * reduce, before it reports it complete).
 *
 * Three ranks hold, for each of three elements, the values 2^60, -2^60 and 1 in a rotated
 * placement: whatever order a library adds them in, two of the three elements of a full sum
 * lose the 1 to rounding, so natively an all-reduce differs from the exact sum (MPFR's
 * mpfr_sum).
 *
 * Output (rank 0), one line per call:
 *     <call> <handles: dirty|clean> <rank 0's elements with %a> <exact|inexact>
 * where exact means every rank's result is the exact (sum or prefix) MPI defines for it.
 * Exit status 0 unless an MPI call failed, or the program runs on other than 3 ranks.
 */
#include <mpfr.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANKS    3
#define ELEMENTS 3

/* The calls with every int and handle parameter 64 bits wide. */
typedef uint64_t W; /* a wide int or handle argument */
typedef int (*wide_allreduce)(const void *, void *, W, W, W, W);
typedef int (*wide_reduce)(const void *, void *, W, W, W, W, W);
typedef int (*wide_reduce_scatter)(const void *, void *, const void *, W, W, W);
typedef int (*wide_iallreduce)(const void *, void *, W, W, W, W, MPI_Request *);
typedef int (*wide_ireduce)(const void *, void *, W, W, W, W, W, MPI_Request *);
typedef int (*wide_allreduce_init)(const void *, void *, W, W, W, W, W, MPI_Request *);
typedef int (*wide_get_status)(W, int *, MPI_Status *);

/* A handle (or int) as a 64-bit argument: for MPICH, garbage in the upper half. */
#ifdef MPICH_VERSION
#define HANDLES     "dirty"
#define WIDE(value) ((uint64_t)0xdeadbeefu << 32 | (uint32_t)(value))
#else
#define HANDLES     "clean"
#define WIDE(value) ((uint64_t)(uintptr_t)(value))
#endif
/* `function` as a `type` (called through a variable: GCC refuses a call through a cast). */
#define AS(type, variable, function) type variable = (type)(void (*)(void))(function)

static const double values[RANKS] = {0x1p60, -0x1p60, 1.0};
static int rank;

/* The contribution of `rank` to `element`. */
static double contribution(int who, int element)
{
    return values[(who + element) % RANKS];
}

/* 1 when result[i] is the exact sum, rounded once (MPFR), of the contributions of ranks
 * 0 .. ranks - 1 to element first + i, for each of `count` elements. */
static int exact(const double *result, int first, int count, int ranks)
{
    int all = 1;
    for (int i = 0; i < count; i++) {
        mpfr_t terms[RANKS], sum;
        mpfr_ptr pointers[RANKS];
        for (int r = 0; r < ranks; r++) {
            mpfr_init2(terms[r], 53);
            mpfr_set_d(terms[r], contribution(r, first + i), MPFR_RNDN);
            pointers[r] = terms[r];
        }
        mpfr_init2(sum, 53);
        mpfr_sum(sum, pointers, (unsigned long)ranks, MPFR_RNDN);
        double expected = mpfr_get_d(sum, MPFR_RNDN);
        if (memcmp(&expected, &result[i], sizeof expected) != 0) all = 0;
        mpfr_clear(sum);
        for (int r = 0; r < ranks; r++)
            mpfr_clear(terms[r]);
    }
    return all;
}

static void check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS) return;
    fprintf(stderr, "handle_registers: %s returned %d\n", call, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Print rank 0's line for `call`: exact when this rank's `mine` and every other rank's is. */
static void report(const char *call, const double *result, int mine)
{
    int all[RANKS];
    MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD); /* not intercepted */
    if (rank != 0) return;
    int every = 1;
    for (int r = 0; r < RANKS; r++)
        every &= all[r];
    printf("%s %s", call, HANDLES);
    for (int element = 0; element < ELEMENTS; element++)
        printf(" %a", result[element]);
    printf(" %s\n", every ? "exact" : "inexact");
}

int main(int argc, char **argv)
{
    int ranks;
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
    const W type = WIDE(MPI_DOUBLE), sum = WIDE(MPI_SUM), world = WIDE(MPI_COMM_WORLD);
    MPI_Request request;

    AS(wide_allreduce, allreduce, MPI_Allreduce);
    memset(result, 0, sizeof result);
    check(allreduce(send, result, WIDE(ELEMENTS), type, sum, world), "MPI_Allreduce");
    report("MPI_Allreduce", result, exact(result, 0, ELEMENTS, RANKS));

    AS(wide_reduce, reduce, MPI_Reduce);
    memset(result, 0, sizeof result);
    check(reduce(send, result, WIDE(ELEMENTS), type, sum, WIDE(0), world), "MPI_Reduce");
    report("MPI_Reduce", result, rank != 0 || exact(result, 0, ELEMENTS, RANKS));

#if MPI_VERSION >= 4
    /* Large-count: the count is an MPI_Count already, the handles are not. */
    AS(wide_allreduce, allreduce_c, MPI_Allreduce_c);
    memset(result, 0, sizeof result);
    check(allreduce_c(send, result, ELEMENTS, type, sum, world), "MPI_Allreduce_c");
    report("MPI_Allreduce_c", result, exact(result, 0, ELEMENTS, RANKS));
#endif

    /* Each rank receives element `rank` of the sum. */
    AS(wide_allreduce, reduce_scatter_block, MPI_Reduce_scatter_block);
    memset(result, 0, sizeof result);
    check(reduce_scatter_block(send, result, WIDE(1), type, sum, world),
          "MPI_Reduce_scatter_block");
    report("MPI_Reduce_scatter_block", result, exact(result, rank, 1, RANKS));

    static const int ones[RANKS] = {1, 1, 1};
    AS(wide_reduce_scatter, reduce_scatter, MPI_Reduce_scatter);
    memset(result, 0, sizeof result);
    check(reduce_scatter(send, result, ones, type, sum, world), "MPI_Reduce_scatter");
    report("MPI_Reduce_scatter", result, exact(result, rank, 1, RANKS));

    /* Rank r receives the sum over ranks 0..r (0..r-1: exclusive, undefined on rank 0). */
    AS(wide_allreduce, scan, MPI_Scan);
    memset(result, 0, sizeof result);
    check(scan(send, result, WIDE(ELEMENTS), type, sum, world), "MPI_Scan");
    report("MPI_Scan", result, exact(result, 0, ELEMENTS, rank + 1));

    AS(wide_allreduce, exscan, MPI_Exscan);
    memset(result, 0, sizeof result);
    check(exscan(send, result, WIDE(ELEMENTS), type, sum, world), "MPI_Exscan");
    report("MPI_Exscan", result, rank == 0 || exact(result, 0, ELEMENTS, rank));

    AS(wide_iallreduce, iallreduce, MPI_Iallreduce);
    memset(result, 0, sizeof result);
    check(iallreduce(send, result, WIDE(ELEMENTS), type, sum, world, &request), "MPI_Iallreduce");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    report("MPI_Iallreduce", result, exact(result, 0, ELEMENTS, RANKS));

    AS(wide_ireduce, ireduce, MPI_Ireduce);
    memset(result, 0, sizeof result);
    check(ireduce(send, result, WIDE(ELEMENTS), type, sum, WIDE(0), world, &request),
          "MPI_Ireduce");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    report("MPI_Ireduce", result, rank != 0 || exact(result, 0, ELEMENTS, RANKS));

#if MPI_VERSION >= 4
    AS(wide_allreduce_init, allreduce_init, MPI_Allreduce_init);
    memset(result, 0, sizeof result);
    check(allreduce_init(send, result, WIDE(ELEMENTS), type, sum, world, WIDE(MPI_INFO_NULL),
                         &request),
          "MPI_Allreduce_init");
    check(MPI_Start(&request), "MPI_Start");
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    check(MPI_Request_free(&request), "MPI_Request_free");
    report("MPI_Allreduce_init", result, exact(result, 0, ELEMENTS, RANKS));
#endif

    /* The request itself dirty: complete means reduced, read before any Wait. */
    AS(wide_get_status, get_status, MPI_Request_get_status);
    memset(result, 0, sizeof result);
    check(MPI_Iallreduce(send, result, ELEMENTS, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request),
          "MPI_Iallreduce");
    int complete = 0;
    while (!complete)
        check(get_status(WIDE(request), &complete, MPI_STATUS_IGNORE), "MPI_Request_get_status");
    int reduced = exact(result, 0, ELEMENTS, RANKS);
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
    report("MPI_Request_get_status", result, reduced);

    MPI_Finalize();
    return 0;
}
