/* cost_counts.c: six MPI_Allreduce calls and nothing else that sends a message: float and double
 * (MPI_SUM) at 8 B, 4 KiB and 1 MiB, in that order. tests/mpi/cost_model.sh runs it under Open
 * MPI's pml monitoring, whose files count each rank's messages and bytes to each peer, and
 * compares them with the cost model's (`reprod cost`). Open MPI 4.1.4 drops the monitoring's
 * MPI_T variables when its pml framework closes the components it did not select, so the
 * count is one per run (written at MPI_Finalize), not one per call: the script sums the
 * model's six calls. With an argument TYPE (float or double) only that type's calls run; with
 * TYPE and SIZE (bytes, any multiple of the type's size) one call of that size. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int sizes[] = {8, 4096, 1 << 20}, calls = 3;
    if (argc > 2) sizes[0] = atoi(argv[2]), calls = 1;
    for (int t = 0; t < 2; t++) {
        if (argc > 1 && strcmp(argv[1], t ? "double" : "float") != 0) continue;
        for (int s = 0; s < calls; s++) {
            MPI_Datatype type = t ? MPI_DOUBLE : MPI_FLOAT;
            int element = t ? 8 : 4, count = sizes[s] / element;
            char *in = malloc((size_t)sizes[s]), *out = malloc((size_t)sizes[s]);
            /* Values within a few binades of each other: the model's typical words. */
            for (int i = 0; i < count; i++) {
                double v = 1.0 + (double)((i * 7 + rank * 13) % 97) / 97.0;
                if (t)
                    ((double *)in)[i] = v;
                else
                    ((float *)in)[i] = (float)v;
            }
            MPI_Allreduce(in, out, count, type, MPI_SUM, MPI_COMM_WORLD);
            free(in);
            free(out);
        }
    }
    MPI_Finalize();
    return 0;
}
