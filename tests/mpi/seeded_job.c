/* seeded_job.c: for tests/seed/trace_seeds.sh: seed rand() with argv[1] (before MPI_Init, as
 * training scripts do), draw this rank's "weights" from it, and all-reduce them twice. An
 * ordinary MPI program: two runs with different seeds part at the seeding call, before their
 * first reduction differs. */
#include <mpi.h>
#include <stdlib.h>

#define COUNT 1000

int main(int argc, char **argv)
{
    srand(argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 1);
    MPI_Init(&argc, &argv);
    static double weights[COUNT], sum[COUNT];
    for (int step = 0; step < 2; step++) {
        for (int i = 0; i < COUNT; i++)
            weights[i] = (double)rand() / RAND_MAX - 0.5;
        MPI_Allreduce(weights, sum, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
