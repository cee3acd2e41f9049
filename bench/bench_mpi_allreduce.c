/* bench_mpi_allreduce.c: MPI_Allreduce(float, SUM) under the shim against the real library,
 * side by side in one run.
 *
 * Run it with the shim preloaded: MPI_Allreduce then goes through the shim, and the real
 * library's PMPI_Allreduce is looked up in the library itself (the shim intercepts the PMPI_
 * names too, as Fortran bindings call them). Each sample times a batch of calls of one kind
 * between barriers; batches of the two kinds
 * alternate, and the medians over the samples are compared, so that the machine's noise hits
 * both sides alike. The time of a batch is the slowest rank's.
 *
 * Prints, on rank 0, one line per message size:
 *   allreduce np=2 bytes=1048576 native_us=... shim_us=... ratio=1.12 target<=1.3
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES       9     /* per size and kind: the median of these */
#define MIN_BATCH_SEC 0.004 /* a batch runs at least this long (timer resolution, noise) */
#define MAX_BYTES     (64u << 20)

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static allreduce_fn library_allreduce; /* the MPI library's own PMPI_Allreduce */

/* The library's PMPI_Allreduce, found in the object that defines MPI_Barrier (which the shim
 * does not intercept), whatever is preloaded. */
static allreduce_fn find_library_allreduce(void)
{
    Dl_info info;
    void *library = NULL;
    if (dladdr((void *)&MPI_Barrier, &info) && info.dli_fname)
        library = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    void *found = library ? dlsym(library, "PMPI_Allreduce") : NULL;
    return found ? (allreduce_fn)found : PMPI_Allreduce;
}

/* Seconds per call of `call` over a batch of `calls`, the slowest rank's. */
static double time_batch(allreduce_fn call, const float *send, float *receive, int count, int calls)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < calls; i++)
        call(send, receive, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - start) / calls, slowest = 0;
    library_allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    size_t max_bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : MAX_BYTES;
    library_allreduce = find_library_allreduce();
    if (library_allreduce == (allreduce_fn)MPI_Allreduce) {
        if (rank == 0) fprintf(stderr, "bench: the library's PMPI_Allreduce was not found\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    float *send = malloc(max_bytes), *receive = malloc(max_bytes);
    for (size_t i = 0; i < max_bytes / sizeof(float); i++)
        send[i] = (float)((i * 2654435761u + (size_t)rank * 40503u) % 1000003) / 997.0f - 500.0f;

    for (size_t bytes = 8; bytes <= max_bytes; bytes *= bytes < 1024 ? 2 : 4) {
        int count = (int)(bytes / sizeof(float));
        /* Calibrate the batch on the real library: long enough to time, the same for both. */
        int calls = 1;
        while (calls < (1 << 20) &&
               time_batch(library_allreduce, send, receive, count, calls) * calls < MIN_BATCH_SEC)
            calls *= 2;
        time_batch(MPI_Allreduce, send, receive, count, calls); /* warm the shim's path */
        double native[SAMPLES], shim[SAMPLES];
        for (int s = 0; s < SAMPLES; s++) {
            native[s] = time_batch(library_allreduce, send, receive, count, calls);
            shim[s] = time_batch(MPI_Allreduce, send, receive, count, calls);
        }
        qsort(native, SAMPLES, sizeof(double), compare);
        qsort(shim, SAMPLES, sizeof(double), compare);
        double n = native[SAMPLES / 2], r = shim[SAMPLES / 2];
        const char *target = bytes >= (1u << 20) || bytes <= 1024 ? "target<=1.3" : "";
        if (rank == 0)
            printf("allreduce np=%d bytes=%zu native_us=%.2f shim_us=%.2f ratio=%.2f %s\n", ranks,
                   bytes, n * 1e6, r * 1e6, r / n, ranks == 2 || bytes >= (1u << 20) ? target : "");
        fflush(stdout);
    }
    free(send);
    free(receive);
    MPI_Finalize();
    return 0;
}
