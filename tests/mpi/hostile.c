/* hostile.c: MPI programs written the way real codes (and a hostile reviewer) use MPI, one
 * scenario per run: `hostile <scenario>`. Each is an ordinary MPI program that knows nothing of
 * the shim; it checks its own results (against MPFR's correctly rounded sum where the result
 * must be exact) and exits 1 with the inputs that broke it. tests/mpi/mpi_hostile.sh runs each
 * natively and under the shim, with Open MPI and with MPICH.
 *
 *   padded          user op on MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT, MPI_FLOAT_INT,
 *                   MPI_LONG_DOUBLE_INT (size < extent): every element reduced
 *   self-wildcard   an application's MPI_ANY_SOURCE receive on MPI_COMM_SELF stays its own
 *   f90             MPI_Type_create_f90_real / _complex sums are exact (np >= 3)
 *   big-scatter     reduce-scatter counts {2^30+64, 0, 0} (np = 3): offsets beyond int
 *   op-free         MPI_Op_free between MPI_Iallreduce and MPI_Wait (MPICH's nonblocking3)
 *   intercomm-int   integer sum and float max on an intercommunicator (run with STRICT=1)
 *   in-place-recv   MPI_IN_PLACE as a receive buffer: the library's error, not a crash
 *   errhandler      a null datatype on an MPI_ERRORS_RETURN communicator returns an error
 *                   and calls a user handler once, with MPI_COMM_WORLD fatal
 *   large-extent    a resized type of 64 KiB extent, one element per call
 *   waitall         20,000 one-element MPI_Iallreduce completed by one MPI_Waitall
 *   persistent      MPI_Allreduce_init (MPIX_ in Open MPI 4) started 5 times: exact sums
 *   large-count     MPI-4 _c bindings (MPICH): exact sums
 *   alloc-fail      a 1 Mi-element MPI_Allreduce under MPI_ERRORS_RETURN (run with one rank out
 *                   of memory: tests/progs/failalloc.c): the job must stop, never hang
 *   alias           the same buffer as send and receive buffer (erroneous) in MPI_Exscan and in
 *                   an MPI_Reduce_scatter where some ranks receive nothing: every rank gets the
 *                   same answer (success everywhere or an error everywhere), never a hang
 *   type-free       a derived type with an attribute and a user op that checks the handle it is
 *                   called with, both freed before MPI_Wait: the op sees the application's
 *                   handle, the attribute is never copied and deleted once; 70 distinct user
 *                   ops freed in flight
 *   null-buffer     NULL as a receive buffer (MPICH refuses it with MPI_ERR_BUFFER)
 *   persistent-derived  MPI_Allreduce_init of a derived type with a user op, started twice
 *   sessions        an MPI-4 sessions program (no MPI_Init): exact sums (MPICH)
 */
#include <limits.h>
#include <math.h>
#include <mpfr.h>
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, ranks, failures;

#define CHECK(condition, ...)                                                                      \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            if (failures++ < 10) {                                                                 \
                fprintf(stderr, "FAIL rank %d: ", rank);                                           \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fprintf(stderr, "\n");                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- Exact sums ------------------------------------------------------------------------ */

/* Element i of rank r's contribution: 1 on rank i mod ranks and 2^-53 elsewhere, so that the
 * correctly rounded sum (1 + (ranks-1) 2^-53 rounded) differs from a fold in rank order that
 * starts at the 1 whenever ranks >= 3; every third element a wide-range value as well. */
static double contribution(int r, long i)
{
    double x = (i % ranks == r) ? 1.0 : ldexp(1.0, -53);
    if (i % 3 == 2) x += ldexp((double)((r * 7 + i) % 13 - 6), (int)((r * 5 + i) % 60) - 30);
    return x;
}

/* The correctly rounded sum of element i over all ranks. */
static double exact_sum(long i)
{
    mpfr_t terms[64], sum;
    mpfr_ptr pointers[64];
    for (int r = 0; r < ranks; r++) {
        mpfr_init2(terms[r], 64);
        mpfr_set_d(terms[r], contribution(r, i), MPFR_RNDN);
        pointers[r] = terms[r];
    }
    mpfr_init2(sum, 53);
    mpfr_sum(sum, pointers, (unsigned long)ranks, MPFR_RNDN);
    double result = mpfr_get_d(sum, MPFR_RNDN);
    mpfr_clear(sum);
    for (int r = 0; r < ranks; r++)
        mpfr_clear(terms[r]);
    return result;
}

/* Check `n` results (every `stride` doubles in `result`) against the exact sums. */
static void expect_exact(const char *what, const double *result, long n, int stride)
{
    for (long i = 0; i < n; i++) {
        double want = exact_sum(i), got = result[i * stride];
        CHECK(memcmp(&want, &got, sizeof want) == 0, "%s: element %ld is %a, exact sum %a", what,
              i, got, want);
    }
}

static void fill(double *buffer, long n, int stride)
{
    for (long i = 0; i < n; i++)
        buffer[i * stride] = contribution(rank, i);
}

/* ---- world-geometry: what the shim knows of MPI_COMM_WORLD stays with it ---------------- */

/* An all-reduce and a reduce to the last rank on `comm`, checked on our rank in it (the
 * contributions and exact sums follow rank and ranks, set to the communicator's here). */
static void reduce_on(MPI_Comm comm, const char *what)
{
    enum { N = 48 };
    double send[N], receive[N];
    int world_rank = rank, world_ranks = ranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    fill(send, N, 1);
    MPI_Allreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, comm);
    expect_exact(what, receive, N, 1);
    memset(receive, 0, sizeof receive);
    MPI_Reduce(send, receive, N, MPI_DOUBLE, MPI_SUM, ranks - 1, comm);
    if (rank == ranks - 1) expect_exact(what, receive, N, 1);
    rank = world_rank, ranks = world_ranks;
}

/* Reductions on MPI_COMM_WORLD (whose size and rank the shim learns once, at MPI_Init)
 * interleaved with reductions on communicators of another size or rank order, each freed before
 * the next is made (the libraries hand the freed handle value out again): each must be reduced
 * over its own ranks, with its own root. */
static void world_geometry(void)
{
    MPI_Comm first = MPI_COMM_NULL;
    int reused = 0;
    for (int round = 0; round < 6; round++) {
        reduce_on(MPI_COMM_WORLD, "MPI_COMM_WORLD");
        /* Even rounds: every rank, in reverse order; odd ones: all but rank 0, in order. */
        int reversed = round % 2 == 0;
        int colour = reversed || rank > 0 ? 0 : MPI_UNDEFINED;
        MPI_Comm other;
        MPI_Comm_split(MPI_COMM_WORLD, colour, reversed ? ranks - rank : rank, &other);
        if (round == 0) first = other;
        if (round > 0 && other != MPI_COMM_NULL && other == first) reused++;
        if (other != MPI_COMM_NULL) {
            reduce_on(other, reversed ? "ranks reversed" : "all but rank 0");
            MPI_Comm_free(&other);
        }
    }
    if (rank == 1) printf("world-geometry: a freed handle value came back %d times\n", reused);
}

/* ---- padded: pair types whose extent exceeds their size -------------------------------- */

struct double_int { double value; int index; };
struct long_int { long value; int index; };
struct short_int { short value; int index; };
struct float_int { float value; int index; };
struct long_double_int { long double value; int index; };

/* The user op: add the values, keep the larger index. */
#define PAIR_ADD(type, in, inout, n)                                                               \
    for (int k = 0; k < (n); k++) {                                                                \
        ((type *)(inout))[k].value += ((const type *)(in))[k].value;                               \
        if (((const type *)(in))[k].index > ((type *)(inout))[k].index)                            \
            ((type *)(inout))[k].index = ((const type *)(in))[k].index;                            \
    }

static void pair_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    if (*datatype == MPI_DOUBLE_INT) PAIR_ADD(struct double_int, in, inout, *length)
    else if (*datatype == MPI_LONG_INT) PAIR_ADD(struct long_int, in, inout, *length)
    else if (*datatype == MPI_SHORT_INT) PAIR_ADD(struct short_int, in, inout, *length)
    else if (*datatype == MPI_FLOAT_INT) PAIR_ADD(struct float_int, in, inout, *length)
    else if (*datatype == MPI_LONG_DOUBLE_INT) PAIR_ADD(struct long_double_int, in, inout, *length)
}

#define PAIR_CASE(type, datatype, name)                                                            \
    do {                                                                                           \
        type send[8], receive[8];                                                                  \
        memset(receive, 0, sizeof receive);                                                        \
        for (int k = 0; k < 8; k++) {                                                              \
            memset(&send[k], 0, sizeof send[k]);                                                   \
            send[k].value = rank + 1 + k;                                                          \
            send[k].index = rank * 10 + k;                                                         \
        }                                                                                          \
        MPI_Allreduce(send, receive, 8, datatype, op, MPI_COMM_WORLD);                             \
        for (int k = 0; k < 8; k++) {                                                              \
            long want = (long)ranks * (ranks + 1) / 2 + (long)ranks * k;                           \
            CHECK((long)receive[k].value == want && receive[k].index == (ranks - 1) * 10 + k,      \
                  "%s element %d: value %ld index %d, want %ld and %d", name, k,                   \
                  (long)receive[k].value, receive[k].index, want, (ranks - 1) * 10 + k);           \
        }                                                                                          \
    } while (0)

static void padded(void)
{
    MPI_Op op;
    MPI_Op_create(pair_add, 1, &op);
    PAIR_CASE(struct double_int, MPI_DOUBLE_INT, "MPI_DOUBLE_INT");
    PAIR_CASE(struct long_int, MPI_LONG_INT, "MPI_LONG_INT");
    PAIR_CASE(struct short_int, MPI_SHORT_INT, "MPI_SHORT_INT");
    PAIR_CASE(struct float_int, MPI_FLOAT_INT, "MPI_FLOAT_INT");
    PAIR_CASE(struct long_double_int, MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT");
    MPI_Op_free(&op);
}

/* ---- self-wildcard: copies of derived types stay local -------------------------------- */

/* The strided type: doubles 0, 1, 4 and 5 of every 8 (a vector resized to 8 doubles). */
static int strided_described(int k)
{
    return k % 8 < 2 || (k % 8 >= 4 && k % 8 < 6);
}

/* A user sum over the strided type. */
static void strided_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    (void)datatype;
    for (int k = 0; k < 8 * *length; k++)
        if (strided_described(k)) ((double *)inout)[k] += ((const double *)in)[k];
}

struct strided_job {
    MPI_Comm comm;
    int thread;
    int iterations;
    int wrong;
};

/* All-reduce the strided type with a user op, `iterations` times. */
static void reduce_strided(struct strided_job *job)
{
    MPI_Datatype vector, strided;
    MPI_Op op;
    MPI_Type_vector(2, 2, 4, MPI_DOUBLE, &vector); /* doubles 0, 1 and 4, 5 */
    MPI_Type_create_resized(vector, 0, 8 * sizeof(double), &strided);
    MPI_Type_commit(&strided);
    MPI_Op_create(strided_add, 1, &op);
    for (int iteration = 0; iteration < job->iterations; iteration++) {
        double send[16], receive[16];
        for (int k = 0; k < 16; k++) {
            send[k] = rank + 100.0 * job->thread + 10000.0 * iteration + k;
            receive[k] = -1.0;
        }
        MPI_Allreduce(send, receive, 2, strided, op, job->comm);
        for (int k = 0; k < 16; k++) {
            double want = strided_described(k) ? (double)ranks * (ranks - 1) / 2 +
                                          ranks * (100.0 * job->thread + 10000.0 * iteration + k)
                                    : -1.0;
            if (receive[k] != want) job->wrong++;
        }
    }
    MPI_Op_free(&op);
    MPI_Type_free(&strided);
    MPI_Type_free(&vector);
}

static void self_wildcard(void)
{
    int mine = -1, got = 0;
    MPI_Request request;
    MPI_Irecv(&mine, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &request);
    struct strided_job job = {MPI_COMM_WORLD, 0, 3, 0};
    reduce_strided(&job); /* must return, and leave the receive alone */
    CHECK(job.wrong == 0, "%d wrong doubles", job.wrong);
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    CHECK(!done, "the application's MPI_COMM_SELF receive matched a message it did not send");
    int value = 4242;
    MPI_Send(&value, 1, MPI_INT, 0, 7, MPI_COMM_SELF);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    got = mine;
    CHECK(got == 4242, "the application's own message arrived as %d", got);
}

/* ---- f90: parameterised Fortran types --------------------------------------------------- */

static void f90(void)
{
    enum { N = 64 };
    MPI_Datatype real8, complex16;
    MPI_Type_create_f90_real(15, 300, &real8);
    MPI_Type_create_f90_complex(15, 300, &complex16);
    double send[2 * N], receive[2 * N];
    fill(send, N, 1);
    MPI_Allreduce(send, receive, N, real8, MPI_SUM, MPI_COMM_WORLD);
    expect_exact("MPI_Type_create_f90_real(15, 300) MPI_Allreduce", receive, N, 1);
    fill(send, N, 2); /* real parts */
    for (int i = 0; i < N; i++)
        send[2 * i + 1] = contribution(rank, i);
    MPI_Allreduce(send, receive, N, complex16, MPI_SUM, MPI_COMM_WORLD);
    expect_exact("f90 complex real parts", receive, N, 2);
    expect_exact("f90 complex imaginary parts", receive + 1, N, 2);
}

/* ---- big-scatter: counts and offsets beyond int ---------------------------------------- */

static void byte_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    (void)datatype;
    for (int k = 0; k < *length; k++)
        ((unsigned char *)inout)[k] += ((const unsigned char *)in)[k];
}

static void big_scatter(void)
{
    const int first = (1 << 30) + 64;
    int counts[64] = {0};
    counts[0] = first;
    unsigned char *send = malloc((size_t)first);
    unsigned char *receive = rank == 0 ? malloc((size_t)first) : malloc(1);
    if (!send || !receive) {
        CHECK(0, "no memory for the test");
        return;
    }
    for (size_t k = 0; k < (size_t)first; k += 4096)
        send[k] = (unsigned char)(rank + 1 + k / 4096);
    send[first - 1] = (unsigned char)(rank + 3);
    MPI_Op op;
    MPI_Op_create(byte_add, 1, &op);
    int rc = MPI_Reduce_scatter(send, receive, counts, MPI_BYTE, op, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Reduce_scatter returned %d", rc);
    if (rank == 0 && rc == MPI_SUCCESS) {
        unsigned sum_ranks = (unsigned)(ranks * (ranks + 1) / 2);
        for (size_t k = 0; k < (size_t)first - 1; k += 4096 * 1021) {
            unsigned char want = (unsigned char)(sum_ranks + (unsigned)ranks * (k / 4096));
            CHECK(receive[k] == want, "byte %zu is %u, want %u", k, receive[k], want);
        }
        unsigned char last = (unsigned char)(sum_ranks + 2u * (unsigned)ranks);
        CHECK(receive[first - 1] == last, "last byte is %u, want %u", receive[first - 1], last);
    }
    MPI_Op_free(&op);
    free(send);
    free(receive);
}

/* ---- op-free: a user op freed while its reduction is in flight -------------------------- */

static void double_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    (void)datatype;
    for (int k = 0; k < *length; k++)
        ((double *)inout)[k] += ((const double *)in)[k];
}

static void op_free(void)
{
    for (int round = 0; round < 5; round++) {
        enum { N = 300 };
        double send[N], receive[N];
        for (int k = 0; k < N; k++)
            send[k] = rank + k + round;
        MPI_Op op;
        MPI_Request request;
        MPI_Op_create(double_add, 1, &op);
        MPI_Iallreduce(send, receive, N, MPI_DOUBLE, op, MPI_COMM_WORLD, &request);
        MPI_Op_free(&op);
        CHECK(op == MPI_OP_NULL, "MPI_Op_free left the handle set");
        /* Ops created now may reuse the freed one's memory. */
        MPI_Op others[4];
        for (int k = 0; k < 4; k++)
            MPI_Op_create(byte_add, 0, &others[k]);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        for (int k = 0; k < 4; k++)
            MPI_Op_free(&others[k]);
        for (int k = 0; k < N; k++) {
            double want = (double)ranks * (ranks - 1) / 2 + (double)ranks * (k + round);
            CHECK(receive[k] == want, "round %d element %d: %g, want %g", round, k, receive[k],
                  want);
        }
    }
}

/* ---- intercomm-int: deterministic reductions on an intercommunicator -------------------- */

static void intercomm_int(void)
{
    if (ranks < 2) return;
    MPI_Comm half, inter;
    int color = rank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 99, &inter);
    int value = rank + 1, total = 0;
    float f = (float)rank, biggest = -1;
    MPI_Allreduce(&value, &total, 1, MPI_INT, MPI_SUM, inter);
    MPI_Allreduce(&f, &biggest, 1, MPI_FLOAT, MPI_MAX, inter);
    int remote = 0, want = 0;
    MPI_Comm_remote_size(inter, &remote);
    for (int r = 0; r < ranks; r++)
        if (r % 2 != color) want += r + 1;
    CHECK(total == want, "intercommunicator integer sum %d, want %d", total, want);
    CHECK(biggest >= 0, "intercommunicator float max %g", biggest);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* ---- in-place-recv: erroneous arguments get the library's answer ------------------------ */

static void in_place_recv(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    double send[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int counts[64];
    for (int r = 0; r < ranks; r++)
        counts[r] = 1;
    MPI_Request request;
    int rc = MPI_Allreduce(send, MPI_IN_PLACE, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "MPI_Allreduce with MPI_IN_PLACE as recvbuf succeeded");
    rc = MPI_Iallreduce(send, MPI_IN_PLACE, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    CHECK(rc != MPI_SUCCESS, "MPI_Iallreduce with MPI_IN_PLACE as recvbuf succeeded");
    if (rank == 0) {
        /* At the root only: elsewhere the receive buffer is not significant (no collective
         * starts on the root, so the others must not call either). */
        rc = MPI_Reduce(send, MPI_IN_PLACE, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_SELF);
        CHECK(rc != MPI_SUCCESS, "MPI_Reduce with MPI_IN_PLACE as the root's recvbuf succeeded");
    }
    rc = MPI_Reduce_scatter(send, MPI_IN_PLACE, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "MPI_Reduce_scatter with MPI_IN_PLACE as recvbuf succeeded");
    rc = MPI_Reduce_scatter_block(send, MPI_IN_PLACE, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "MPI_Reduce_scatter_block with MPI_IN_PLACE as recvbuf succeeded");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- errhandler: the shim's own checks never raise errors ------------------------------- */

static int handler_calls;

static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    handler_calls++;
}

static void errhandler(void)
{
    MPI_Comm returning, counting;
    MPI_Comm_dup(MPI_COMM_WORLD, &returning);
    MPI_Comm_set_errhandler(returning, MPI_ERRORS_RETURN);
    double x = 1, y = 0;
    int rc = MPI_Allreduce(&x, &y, 1, MPI_DATATYPE_NULL, MPI_SUM, returning);
    CHECK(rc != MPI_SUCCESS, "a null datatype returned MPI_SUCCESS");
    rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_OP_NULL, returning);
    CHECK(rc != MPI_SUCCESS, "a null op returned MPI_SUCCESS");
    MPI_Errhandler handler;
    MPI_Comm_dup(MPI_COMM_WORLD, &counting);
    MPI_Comm_create_errhandler(count_errors, &handler);
    MPI_Comm_set_errhandler(counting, handler);
    MPI_Allreduce(&x, &y, 1, MPI_DATATYPE_NULL, MPI_SUM, counting);
    CHECK(handler_calls == 1, "the user's error handler ran %d times for one error",
          handler_calls);
    MPI_Errhandler_free(&handler);
    MPI_Comm_free(&counting);
    MPI_Comm_free(&returning);
}

/* ---- large-extent: one element of a 64 KiB extent per call ------------------------------ */

#define PADDED_STRIDE 8192 /* doubles per element of the resized type */

static void padded_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    (void)datatype;
    for (int k = 0; k < *length; k++)
        ((double *)inout)[k * PADDED_STRIDE] += ((const double *)in)[k * PADDED_STRIDE];
}

static void large_extent(void)
{
    MPI_Datatype padded_double;
    MPI_Type_create_resized(MPI_DOUBLE, 0, PADDED_STRIDE * sizeof(double), &padded_double);
    MPI_Type_commit(&padded_double);
    MPI_Op op;
    MPI_Op_create(padded_add, 1, &op);
    double *send = calloc(PADDED_STRIDE * 3, sizeof(double)), *receive = calloc(PADDED_STRIDE * 3, sizeof(double));
    for (int count = 1; count <= 3; count++) {
        for (int k = 0; k < count; k++)
            send[k * PADDED_STRIDE] = rank + k;
        MPI_Allreduce(send, receive, count, padded_double, op, MPI_COMM_WORLD);
        for (int k = 0; k < count; k++) {
            double want = (double)ranks * (ranks - 1) / 2 + (double)ranks * k;
            CHECK(receive[k * PADDED_STRIDE] == want, "count %d element %d: %g, want %g", count, k,
                  receive[k * PADDED_STRIDE], want);
        }
    }
    free(send);
    free(receive);
    MPI_Op_free(&op);
    MPI_Type_free(&padded_double);
}

/* ---- waitall: many outstanding requests ------------------------------------------------- */

static void waitall(int outstanding)
{
    double *send = malloc(sizeof(double) * (size_t)outstanding);
    double *receive = malloc(sizeof(double) * (size_t)outstanding);
    MPI_Request *requests = malloc(sizeof(MPI_Request) * (size_t)outstanding);
    /* The others start late: rank 0's requests are all still in flight when it waits. */
    if (rank > 0) usleep(300000);
    for (int k = 0; k < outstanding; k++) {
        send[k] = rank + k;
        MPI_Iallreduce(&send[k], &receive[k], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                       &requests[k]);
    }
    double started = MPI_Wtime();
    MPI_Waitall(outstanding, requests, MPI_STATUSES_IGNORE);
    double seconds = MPI_Wtime() - started;
    for (int k = 0; k < outstanding; k++) {
        double want = (double)ranks * (ranks - 1) / 2 + (double)ranks * k;
        CHECK(receive[k] == want, "request %d: %g, want %g", k, receive[k], want);
    }
    if (rank == 0) printf("waitall: %d requests completed in %.3f s\n", outstanding, seconds);
    free(send);
    free(receive);
    free(requests);
}

/* ---- persistent and large-count bindings ------------------------------------------------ */

static void persistent(void)
{
    enum { N = 200 };
    double send[N] = {0}, receive[N] = {0};
    MPI_Request request;
#if MPI_VERSION >= 4
    int rc = MPI_Allreduce_init(send, receive, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                                MPI_INFO_NULL, &request);
#else
    int rc = MPIX_Allreduce_init(send, receive, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &request);
#endif
    CHECK(rc == MPI_SUCCESS, "MPI_Allreduce_init returned %d", rc);
    for (int start = 0; start < 5; start++) {
        fill(send, N, 1);
        for (int i = 0; i < N; i++)
            send[i] = ldexp(send[i], start); /* exact: the sum scales with it */
        memset(receive, 0, sizeof receive);
        if (start % 2)
            MPI_Startall(1, &request);
        else
            MPI_Start(&request);
        if (start == 3) {
            int done = 0;
            while (!done)
                MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        } else {
            MPI_Wait(&request, MPI_STATUS_IGNORE);
        }
        for (int i = 0; i < N; i++)
            receive[i] = ldexp(receive[i], -start);
        expect_exact("persistent all-reduce", receive, N, 1);
    }
    MPI_Request_free(&request);
}

static void large_count(void)
{
#if MPI_VERSION >= 4
    enum { N = 300 };
    double send[N], receive[N];
    fill(send, N, 1);
    MPI_Allreduce_c(send, receive, (MPI_Count)N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    expect_exact("MPI_Allreduce_c", receive, N, 1);
    memset(receive, 0, sizeof receive);
    MPI_Request request;
    MPI_Iallreduce_c(send, receive, (MPI_Count)N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    expect_exact("MPI_Iallreduce_c", receive, N, 1);
    memset(receive, 0, sizeof receive);
    MPI_Reduce_c(send, receive, (MPI_Count)N, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) expect_exact("MPI_Reduce_c", receive, N, 1);
#else
    if (rank == 0) printf("large-count: MPI %d has no _c bindings\n", MPI_VERSION);
#endif
}

/* ---- alloc-fail: one rank cannot get memory ------------------------------------------- */

static void alloc_fail(void)
{
    enum { N = 1 << 20 };
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double *send = calloc(N, sizeof(double)), *receive = calloc(N, sizeof(double));
    int rc = MPI_Allreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("alloc-fail: rank %d: MPI_Allreduce returned %d\n", rank, rc);
    fflush(stdout);
    free(send);
    free(receive);
}

/* ---- alias: erroneous same-buffer calls are judged alike on every rank --------------------- */

/* 1 when every rank got `rc` of the same kind (all success, or all an error). */
static int agree(int rc)
{
    int failed = rc != MPI_SUCCESS, fewest = 0, most = 0;
    MPI_Allreduce(&failed, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&failed, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return fewest == most;
}

static void alias(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double buffer[64];
    int counts[64] = {0};
    for (int k = 0; k < 64; k++)
        buffer[k] = 0.1 * (rank + 1);
    int rc = MPI_Exscan(buffer, buffer, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(agree(rc), "MPI_Exscan with one buffer: rank %d returned %d, not as the others", rank,
          rc);
    counts[0] = 1; /* the other ranks receive nothing */
    rc = MPI_Reduce_scatter(buffer, buffer, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(agree(rc), "MPI_Reduce_scatter with one buffer: rank %d returned %d, not as the others",
          rank, rc);
}

/* ---- type-free: the application's handles, freed in flight ------------------------------ */

static MPI_Datatype pair_type; /* as created: MPI_Type_free sets the application's copy null */
static int op_calls, wrong_handle, attribute_copies, attribute_deletes;

static void pair_type_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    op_calls++;
    if (*datatype != pair_type) {
        wrong_handle++;
        return;
    }
    for (int k = 0; k < 2 * *length; k++)
        ((double *)inout)[k] += ((const double *)in)[k];
}

static int copy_attribute(MPI_Datatype type, int key, void *extra, void *in, void *out, int *flag)
{
    attribute_copies++;
    return MPI_TYPE_DUP_FN(type, key, extra, in, out, flag);
}

static int delete_attribute(MPI_Datatype type, int key, void *value, void *extra)
{
    (void)type, (void)key, (void)extra;
    attribute_deletes++;
    free(value);
    return MPI_SUCCESS;
}

static void type_free(void)
{
    MPI_Datatype pair;
    int key;
    MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
    MPI_Type_commit(&pair);
    pair_type = pair;
    MPI_Type_create_keyval(copy_attribute, delete_attribute, &key, NULL);
    int *value = malloc(sizeof *value);
    MPI_Type_set_attr(pair, key, value);
    MPI_Op op;
    MPI_Op_create(pair_type_add, 1, &op);
    double send[8], receive[8];
    for (int k = 0; k < 8; k++)
        send[k] = rank + 1 + k;
    MPI_Request request;
    MPI_Iallreduce(send, receive, 4, pair, op, MPI_COMM_WORLD, &request);
    MPI_Type_free(&pair);
    MPI_Op_free(&op);
    CHECK(pair == MPI_DATATYPE_NULL && op == MPI_OP_NULL, "the freed handles were not set null");
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    for (int k = 0; k < 8; k++) {
        double want = (double)ranks * (ranks + 1) / 2 + (double)ranks * k;
        CHECK(receive[k] == want, "element %d: %g, want %g", k, receive[k], want);
    }
    CHECK(wrong_handle == 0, "the user op was called %d of %d times with another datatype",
          wrong_handle, op_calls);
    CHECK(attribute_copies == 0, "the datatype's attribute was copied %d times",
          attribute_copies);
    CHECK(attribute_deletes == 1, "the attribute was deleted %d times, not once",
          attribute_deletes);
    MPI_Type_free_keyval(&key);

    /* More distinct user ops in flight than any fixed table would hold. */
    enum { OPS = 70, N = 512 };
    static double many_send[OPS][N], many_receive[OPS][N];
    MPI_Request requests[OPS];
    for (int i = 0; i < OPS; i++) {
        for (int k = 0; k < N; k++)
            many_send[i][k] = rank + i + k;
        MPI_Op one;
        MPI_Op_create(double_add, 1, &one);
        MPI_Iallreduce(many_send[i], many_receive[i], N, MPI_DOUBLE, one, MPI_COMM_WORLD,
                       &requests[i]);
        MPI_Op_free(&one);
    }
    MPI_Op others[8];
    for (int k = 0; k < 8; k++)
        MPI_Op_create(byte_add, 0, &others[k]);
    MPI_Waitall(OPS, requests, MPI_STATUSES_IGNORE);
    for (int k = 0; k < 8; k++)
        MPI_Op_free(&others[k]);
    int wrong = 0;
    for (int i = 0; i < OPS; i++)
        for (int k = 0; k < N; k++)
            wrong += many_receive[i][k] != (double)ranks * (ranks - 1) / 2 + (double)ranks * (i + k);
    CHECK(wrong == 0, "%d wrong elements with %d user ops freed in flight", wrong, OPS);
}

/* ---- null-buffer: NULL with a predefined type is the library's to refuse ---------------- */

static void null_buffer(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double send[4] = {1, 2, 3, 4};
    int rc = MPI_Allreduce(send, NULL, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "MPI_Allreduce into NULL succeeded");
    MPI_Request request;
    rc = MPI_Iallreduce(send, NULL, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    CHECK(rc != MPI_SUCCESS, "MPI_Iallreduce into NULL succeeded");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- persistent-derived ----------------------------------------------------------------- */

static void persistent_derived(void)
{
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
    MPI_Type_commit(&pair);
    pair_type = pair;
    MPI_Op op;
    MPI_Op_create(pair_type_add, 1, &op);
    double send[8], receive[8];
    MPI_Request request;
#if MPI_VERSION >= 4
    MPI_Allreduce_init(send, receive, 4, pair, op, MPI_COMM_WORLD, MPI_INFO_NULL, &request);
#else
    MPIX_Allreduce_init(send, receive, 4, pair, op, MPI_COMM_WORLD, MPI_INFO_NULL, &request);
#endif
    for (int start = 0; start < 2; start++) {
        for (int k = 0; k < 8; k++)
            send[k] = rank + k + 10 * start;
        MPI_Start(&request);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
        for (int k = 0; k < 8; k++) {
            double want = (double)ranks * (ranks - 1) / 2 + (double)ranks * (k + 10 * start);
            CHECK(receive[k] == want, "start %d element %d: %g, want %g", start, k, receive[k],
                  want);
        }
    }
    MPI_Request_free(&request);
    MPI_Op_free(&op);
    MPI_Type_free(&pair);
}

/* ---- sessions: MPI-4 without MPI_Init ---------------------------------------------------- */

static int sessions(void)
{
#if MPI_VERSION >= 4
    enum { N = 64 };
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, "reprod.hostile", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL,
                               &comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    double send[N], receive[N];
    fill(send, N, 1);
    MPI_Allreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, comm);
    expect_exact("MPI_Allreduce in a session", receive, N, 1);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, comm);
    if (rank == 0) printf("hostile sessions: np=%d: %s (%d failed checks)\n", ranks,
                          total ? "FAIL" : "ok", total);
    MPI_Group_free(&group);
    MPI_Comm_free(&comm);
    MPI_Session_finalize(&session);
    return total ? 1 : 0;
#else
    printf("hostile sessions: MPI %d has no sessions\n", MPI_VERSION);
    return 0;
#endif
}

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "";
    if (strcmp(scenario, "sessions") == 0) return sessions();
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks > 64) MPI_Abort(MPI_COMM_WORLD, 3);

    if (strcmp(scenario, "padded") == 0) padded();
    else if (strcmp(scenario, "self-wildcard") == 0) self_wildcard();
    else if (strcmp(scenario, "f90") == 0) f90();
    else if (strcmp(scenario, "big-scatter") == 0) big_scatter();
    else if (strcmp(scenario, "op-free") == 0) op_free();
    else if (strcmp(scenario, "intercomm-int") == 0) intercomm_int();
    else if (strcmp(scenario, "in-place-recv") == 0) in_place_recv();
    else if (strcmp(scenario, "errhandler") == 0) errhandler();
    else if (strcmp(scenario, "large-extent") == 0) large_extent();
    else if (strcmp(scenario, "waitall") == 0) waitall(argc > 2 ? atoi(argv[2]) : 20000);
    else if (strcmp(scenario, "persistent") == 0) persistent();
    else if (strcmp(scenario, "large-count") == 0) large_count();
    else if (strcmp(scenario, "alloc-fail") == 0) alloc_fail();
    else if (strcmp(scenario, "alias") == 0) alias();
    else if (strcmp(scenario, "type-free") == 0) type_free();
    else if (strcmp(scenario, "null-buffer") == 0) null_buffer();
    else if (strcmp(scenario, "persistent-derived") == 0) persistent_derived();
    else if (strcmp(scenario, "world-geometry") == 0) world_geometry();
    else {
        if (rank == 0) fprintf(stderr, "hostile: unknown scenario '%s'\n", scenario);
        MPI_Finalize();
        return 2;
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("hostile %s: np=%d: %s (%d failed checks)\n", scenario, ranks,
                          total ? "FAIL" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
