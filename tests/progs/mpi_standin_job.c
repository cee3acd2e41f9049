/* mpi_standin_job: a one-rank MPI job linked against the stand-in MPI library
 * (tests/standins/mpi_standin.c; LD_LIBRARY_PATH picks the variant). It reduces floats through
 * MPI_Allreduce, PMPI_Allreduce (as Fortran bindings call it), MPI_Reduce, MPI_Iallreduce with
 * MPI_Wait, and prints each result exactly, then how many times each of the library's own
 * functions ran: under a shim that cannot serve this library, the same as without it. */
#include "mpi_standin.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    double send[3] = {0x1p60, 1.0, -0x1.8p-3}, out[3] = {0};
    float single = 0.1f, single_out = 0;
    MPI_Request request;
    int rank = -1, size = -1, failed = 0;
    failed |= MPI_Init(&argc, &argv);
    failed |= MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    failed |= MPI_Comm_size(MPI_COMM_WORLD, &size);
    failed |= MPI_Allreduce(send, out, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    printf("MPI_Allreduce: %a %a %a\n", out[0], out[1], out[2]);
    failed |= PMPI_Allreduce(&single, &single_out, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    printf("PMPI_Allreduce: %a\n", (double)single_out);
    failed |= MPI_Reduce(send, out, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    printf("MPI_Reduce: %a %a\n", out[0], out[1]);
    failed |= MPI_Iallreduce(MPI_IN_PLACE, out, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    failed |= MPI_Wait(&request, MPI_STATUS_IGNORE);
    printf("MPI_Iallreduce: %a %a %a, request %s\n", out[0], out[1], out[2],
           request == MPI_REQUEST_NULL ? "completed" : "left open");
    failed |= MPI_Finalize();
    printf("rank %d of %d\n", rank, size);
    static const char *const names[] = {"MPI_Init",      "MPI_Comm_rank", "MPI_Comm_size",
                                        "MPI_Allreduce", "MPI_Reduce",    "MPI_Iallreduce",
                                        "MPI_Wait",      "MPI_Finalize"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        printf("%s ran %ld times\n", names[i], standin_mpi_calls(names[i]));
    return failed ? 1 : 0;
}
