/* threads.c: MPI_THREAD_MULTIPLE, several threads per rank, each running thousands of blocking
 * and nonblocking reductions on its own duplicated communicator, contiguous and derived types,
 * every result checked against its exact expected value (integers in doubles: any order of
 * addition gives the same sum, so the check holds natively and under the shim alike).
 *
 *   threads [THREADS] [ITERATIONS]
 *
 * Each iteration of a thread, with values that depend on the rank, thread and iteration:
 *   - MPI_Allreduce of doubles (the exact engine), and of a strided derived type with a user op
 *     (the library's fold and the shim's local copies);
 *   - MPI_Iallreduce + MPI_Wait, MPI_Iallreduce + MPI_Test until done, two MPI_Iallreduce
 *     completed by MPI_Waitall, MPI_Ireduce_scatter_block + MPI_Waitany: requests that other
 *     threads' requests reuse the handles of as soon as they are freed;
 *   - MPI_Iallreduce with a user op that is freed before the wait;
 *   - MPI_Request_get_status polling before the Wait.
 * Prints "threads: ok" or the first wrong results, and exits 1 on any.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16
#define N           37 /* elements per reduction: not a multiple of the rank count */

static int rank, ranks;

struct job {
    MPI_Comm comm;
    int thread;
    int iterations;
    long wrong;
    char first[200];
};

/* The value rank r contributes at element k of iteration i of thread t. */
static double value(int r, int t, int i, int k)
{
    return (double)(r + 1) * 1000.0 + t * 100000.0 + (i % 1000) * 0.5 + k;
}

/* The sum of value() over the ranks. */
static double expected(int t, int i, int k)
{
    double sum = 0;
    for (int r = 0; r < ranks; r++)
        sum += value(r, t, i, k);
    return sum;
}

static void note(struct job *job, const char *what, int i, int k, double got, double want)
{
    if (job->wrong++ == 0)
        snprintf(job->first, sizeof job->first, "%s: iteration %d element %d is %.17g, want %.17g",
                 what, i, k, got, want);
}

static void check(struct job *job, const char *what, int i, const double *got, int stride)
{
    for (int k = 0; k < N; k++) {
        double want = expected(job->thread, i, k);
        if (got[k * stride] != want) note(job, what, i, k, got[k * stride], want);
    }
}

/* A user sum over a strided type: one double of every two. */
static void strided_add(void *in, void *inout, int *length, MPI_Datatype *datatype)
{
    (void)datatype;
    for (int k = 0; k < *length; k++)
        ((double *)inout)[2 * k] += ((const double *)in)[2 * k];
}

static void *run(void *argument)
{
    struct job *job = argument;
    int t = job->thread;
    MPI_Datatype strided, one;
    MPI_Type_vector(1, 1, 2, MPI_DOUBLE, &one);
    MPI_Type_create_resized(one, 0, 2 * sizeof(double), &strided);
    MPI_Type_commit(&strided);
    MPI_Op strided_op;
    MPI_Op_create(strided_add, 1, &strided_op);
    double send[2 * N], receive[2 * N], second[N], scatter_send[N * 4];
    for (int i = 0; i < job->iterations; i++) { /* every rank runs every iteration */
        for (int k = 0; k < N; k++)
            send[k] = value(rank, t, i, k);
        MPI_Request requests[2];
        int flag = 0, index;

        MPI_Allreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, job->comm);
        check(job, "MPI_Allreduce", i, receive, 1);

        MPI_Iallreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, job->comm, &requests[0]);
        MPI_Request_get_status(requests[0], &flag, MPI_STATUS_IGNORE);
        MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
        check(job, "MPI_Iallreduce + MPI_Wait", i, receive, 1);

        MPI_Iallreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, job->comm, &requests[0]);
        for (flag = 0; !flag;)
            MPI_Test(&requests[0], &flag, MPI_STATUS_IGNORE);
        check(job, "MPI_Iallreduce + MPI_Test", i, receive, 1);

        MPI_Iallreduce(send, receive, N, MPI_DOUBLE, MPI_SUM, job->comm, &requests[0]);
        MPI_Iallreduce(send, second, N, MPI_DOUBLE, MPI_SUM, job->comm, &requests[1]);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
        check(job, "MPI_Waitall first", i, receive, 1);
        check(job, "MPI_Waitall second", i, second, 1);

        for (int r = 0; r < ranks; r++)
            for (int k = 0; k < N; k++)
                scatter_send[r * N + k] = value(rank, t, i, k);
        MPI_Ireduce_scatter_block(scatter_send, receive, N, MPI_DOUBLE, MPI_SUM, job->comm,
                                  &requests[0]);
        MPI_Waitany(1, requests, &index, MPI_STATUS_IGNORE);
        check(job, "MPI_Ireduce_scatter_block + MPI_Waitany", i, receive, 1);

        for (int k = 0; k < N; k++) {
            send[2 * k] = value(rank, t, i, k);
            send[2 * k + 1] = -1.0;
            receive[2 * k + 1] = -2.0;
        }
        MPI_Allreduce(send, receive, N, strided, strided_op, job->comm);
        check(job, "MPI_Allreduce strided, user op", i, receive, 2);
        for (int k = 0; k < N; k++)
            if (receive[2 * k + 1] != -2.0) note(job, "strided gap", i, k, receive[2 * k + 1], -2);

        MPI_Op freed;
        MPI_Op_create(strided_add, 1, &freed);
        MPI_Iallreduce(send, receive, N, strided, freed, job->comm, &requests[0]);
        MPI_Op_free(&freed);
        MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
        check(job, "MPI_Iallreduce strided, op freed", i, receive, 2);
    }
    MPI_Op_free(&strided_op);
    MPI_Type_free(&strided);
    MPI_Type_free(&one);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    int iterations = argc > 2 ? atoi(argv[2]) : 1000;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (provided < MPI_THREAD_MULTIPLE || threads < 1 || threads > MAX_THREADS || ranks > 4) {
        if (rank == 0) fprintf(stderr, "threads: need MPI_THREAD_MULTIPLE, 1-16 threads, np <= 4\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    struct job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        memset(&jobs[t], 0, sizeof jobs[t]);
        jobs[t].thread = t;
        jobs[t].iterations = iterations;
        MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
    }
    for (int t = 0; t < threads; t++)
        pthread_create(&ids[t], NULL, run, &jobs[t]);
    long wrong = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        if (jobs[t].wrong) fprintf(stderr, "rank %d thread %d: %ld wrong, first %s\n", rank, t,
                                   jobs[t].wrong, jobs[t].first);
        wrong += jobs[t].wrong;
        MPI_Comm_free(&jobs[t].comm);
    }
    long total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("threads: np=%d, %d threads x %d iterations: %s (%ld wrong results)\n", ranks,
               threads, iterations, total ? "FAIL" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
