/* trace_job.c: a small "training loop" for tests/runtime/trace.sh: a few all-reduces of gradients of
 * mixed magnitudes (their native sum depends on the algorithm), one integer all-reduce, one
 * reduce and one nonblocking all-reduce.
 *
 * PERTURB_CALL=k PERTURB_RANK=r: rank r changes one element of its contribution to step k, as
 * an application whose data differs between two runs would.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

#define STEPS 6
#define COUNT 5000

static double gradient(int rank, int step, int i)
{
    uint64_t x = ((uint64_t)rank << 48) ^ ((uint64_t)step << 32) ^ (uint64_t)i;
    x = (x ^ (x >> 31)) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    double mantissa = (double)(x >> 11) / 9007199254740992.0;
    return (x & 1 ? -1 : 1) * (1 + mantissa) * ldexp(1.0, (int)(x % 40) - 20);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *perturb_call = getenv("PERTURB_CALL"), *perturb_rank = getenv("PERTURB_RANK");
    int perturbed_step = perturb_call ? atoi(perturb_call) : -1;
    int perturbed_rank = perturb_rank ? atoi(perturb_rank) : -1;

    static double send[COUNT], receive[COUNT];
    for (int step = 0; step < STEPS; step++) {
        for (int i = 0; i < COUNT; i++)
            send[i] = gradient(rank, step, i);
        if (step == perturbed_step && rank == perturbed_rank) send[17] = nextafter(send[17], 1e9);
        MPI_Allreduce(send, receive, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    int samples = 100 + rank, total = 0;
    MPI_Allreduce(&samples, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce(send, receive, COUNT, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Request request;
    MPI_Iallreduce(send, receive, 100, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
