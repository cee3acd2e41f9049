/* monitor_job.c: MPI_Allreduce (MPI_SUM) of one type and size, called 1 + ITERATIONS times and
 * nothing else, so that the messages Open MPI's pml monitoring counts over the whole run
 * (--mca pml_monitoring_enable 1 --mca pml_monitoring_enable_output 3: one file per rank at
 * MPI_Finalize) are those calls' alone: tests/mpi/mpi_scale.sh divides them by the calls. (Open
 * MPI 4.1's MPI_T variables of the pml monitoring are unregistered when the component steps
 * aside for ob1, so the counts are read from its files.)
 *
 * Usage: monitor_job float|double BYTES CALLS. An ordinary MPI program, run natively and under
 * the shim.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: monitor_job float|double BYTES CALLS\n");
        MPI_Finalize();
        return 2;
    }
    int is_float = strcmp(argv[1], "float") == 0;
    size_t bytes = (size_t)atol(argv[2]);
    int calls = atoi(argv[3]);
    size_t size = is_float ? sizeof(float) : sizeof(double);
    size_t count = bytes / size;
    char *send = malloc(bytes), *receive = malloc(bytes);
    /* Values of a few binades, as a gradient's might be. */
    for (size_t i = 0; i < count; i++) {
        double x = (1.0 + (double)((i * 7 + (size_t)rank) % 1000) / 1024.0) * (i % 3 ? 1 : -0.25);
        if (is_float)
            ((float *)send)[i] = (float)x;
        else
            ((double *)send)[i] = x;
    }
    for (int c = 0; c < calls; c++)
        MPI_Allreduce(send, receive, (int)count, is_float ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
    free(send);
    free(receive);
    MPI_Finalize();
    return 0;
}
