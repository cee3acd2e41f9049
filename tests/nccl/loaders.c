/* loaders.c: the three ways a framework loads NCCL, each followed by a float32 all-reduce
 * checked bitwise against MPFR's correctly rounded sum:
 *   link    the program links libnccl (built with -DLINKED)
 *   local   it dlopens, RTLD_LOCAL, a library that depends on libnccl (PyTorch's
 *           libtorch_cuda.so): LIBDIR/libnccl_user.so
 *   dlsym   it dlopens libnccl.so.2 and looks its functions up by name (XLA's NCCL stub)
 * Usage: loaders MODE [LIBDIR]. Rank 0 prints "ok: MODE" when every element was exact.
 */
#include "loaders_api.h"

#include "engine_oracle.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *open_or_die(const char *path)
{
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "loaders: %s\n", dlerror());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return handle;
}

static struct loader_api find_api(const char *mode, const char *libdir)
{
    struct loader_api api = {0};
    if (strcmp(mode, "link") == 0) {
#ifdef LINKED
        api.get_unique_id = ncclGetUniqueId;
        api.comm_init_rank = ncclCommInitRank;
        api.all_reduce = ncclAllReduce;
        api.comm_destroy = ncclCommDestroy;
#endif
    } else if (strcmp(mode, "local") == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/libnccl_user.so", libdir);
        void (*fill)(struct loader_api *) =
            (void (*)(struct loader_api *))dlsym(open_or_die(path), "nccl_user_api");
        if (fill) fill(&api);
    } else if (strcmp(mode, "dlsym") == 0) {
        void *nccl = open_or_die("libnccl.so.2");
        api.get_unique_id = (__typeof__(api.get_unique_id))dlsym(nccl, "ncclGetUniqueId");
        api.comm_init_rank = (__typeof__(api.comm_init_rank))dlsym(nccl, "ncclCommInitRank");
        api.all_reduce = (__typeof__(api.all_reduce))dlsym(nccl, "ncclAllReduce");
        api.comm_destroy = (__typeof__(api.comm_destroy))dlsym(nccl, "ncclCommDestroy");
    }
    return api;
}

int main(int argc, char **argv)
{
    int rank, ranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    const char *mode = argc > 1 ? argv[1] : "link";
    struct loader_api api = find_api(mode, argc > 2 ? argv[2] : ".");
    if (!api.get_unique_id || !api.comm_init_rank || !api.all_reduce || !api.comm_destroy) {
        fprintf(stderr, "loaders: mode %s found no NCCL\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ncclUniqueId id;
    if (rank == 0 && api.get_unique_id(&id) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    cudaSetDevice(rank);
    if (api.comm_init_rank(&comm, ranks, id, rank) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
    size_t n = 5000;
    float *host = malloc(n * sizeof *host), *device;
    for (size_t i = 0; i < n; i++) /* magnitudes over 2^-20 .. 2^20, both signs */
        host[i] = ldexpf((float)((i * 2654435761u + (unsigned)rank * 40503u) % 1000003u) / 1e6f,
                         (int)((i * 7 + (size_t)rank * 13) % 41) - 20) * ((i + (size_t)rank) % 2 ? -1 : 1);
    cudaMalloc((void **)&device, n * sizeof *host);
    cudaMemcpy(device, host, n * sizeof *host, cudaMemcpyHostToDevice);
    if (api.all_reduce(device, device, n, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
        MPI_Abort(MPI_COMM_WORLD, 1);
    cudaStreamSynchronize(NULL);
    float *result = malloc(n * sizeof *result), *all = malloc(n * (size_t)ranks * sizeof *all);
    cudaMemcpy(result, device, n * sizeof *result, cudaMemcpyDeviceToHost);
    MPI_Allgather(host, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
    long wrong = 0, total;
    for (size_t i = 0; i < n; i++) {
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int r = 0; r < ranks; r++) {
            uint32_t bits;
            memcpy(&bits, &all[(size_t)r * n + i], 4);
            terms[r] = bits;
        }
        uint32_t got;
        memcpy(&got, &result[i], 4);
        wrong += got != oracle_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, terms, ranks);
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("%s: %s (%ld elements not exact)\n", total ? "inexact" : "ok", mode, total);
    api.comm_destroy(comm);
    cudaFree(device);
    free(host), free(result), free(all);
    MPI_Finalize();
    return 0;
}
