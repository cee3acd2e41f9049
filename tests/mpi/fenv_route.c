/* fenv_route.c: a job the shim must not disturb through its route choice or its layout.
 *
 *     fenv_route trap|flags|mixed
 *
 * trap: FE_INEXACT traps are enabled (feenableexcept) before a float MPI_Allreduce whose sum is
 * exact: the job must not take a signal from the shim's own arithmetic (the route's cost
 * model). flags: every exception flag is clear before the call and must be clear after it.
 * mixed: run with a different REPROD_ROUNDING on each rank; the sums below are exact (and their
 * zeros all +0), so every direction gives the same values, and each rank checks them. Prints
 * "ok" on rank 0, or what went wrong, and exits 1 on a mismatch.
 */
#include <fenv.h>
#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define COUNT 300

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "trap";
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    float in[COUNT], out[COUNT];
    for (int i = 0; i < COUNT; i++) /* small integers and +0: every sum exact */
        in[i] = (float)((i % 3 == 1 ? 0 : i % 7 + 1) * (rank + 1));
    if (strcmp(what, "trap") == 0) feenableexcept(FE_INEXACT);
    feclearexcept(FE_ALL_EXCEPT);
    int rc = MPI_Allreduce(in, out, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int raised = fetestexcept(FE_ALL_EXCEPT);
    fedisableexcept(FE_ALL_EXCEPT);
    int bad = rc != MPI_SUCCESS;
    if (strcmp(what, "flags") == 0 && raised) {
        printf("rank %d: exception flags 0x%x raised by an exact MPI_Allreduce\n", rank, raised);
        bad = 1;
    }
    double factor = ranks * (ranks + 1) / 2.0;
    for (int i = 0; i < COUNT; i++) {
        float want = (float)((i % 3 == 1 ? 0 : i % 7 + 1) * factor);
        uint32_t got_bits, want_bits;
        memcpy(&got_bits, &out[i], 4), memcpy(&want_bits, &want, 4);
        if (got_bits != want_bits) {
            printf("rank %d: element %d is %a (bits %08x), want %a\n", rank, i, out[i], got_bits,
                   want);
            bad = 1;
            break;
        }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any) printf("ok\n");
    MPI_Finalize();
    return any;
}
