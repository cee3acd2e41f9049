/* seed_after_init: seed rand() before MPI_Init and again after it, and print the first value
 * of each with the rank; an ordinary MPI program that knows nothing of the shim. Before
 * MPI_Init the shim knows the rank only from the launcher's variables, after it from MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    unsigned int seed = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 0) : 42;
    srand(seed);
    int before = rand();
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    srand(seed);
    int after = rand();
    printf("rank %d: before MPI_Init %d, after %d\n", rank, before, after);
    MPI_Finalize();
    return 0;
}
