/* nccl_test.h: what the NCCL test programs share: an MPI job whose ranks make one NCCL
 * communicator, as nccl-tests do (rank 0 makes the unique id, MPI broadcasts it), and checks
 * that stop the program with the failing call named.
 *
 * The programs are ordinary NCCL programs: they know nothing of the shim. On this machine
 * they run over the host-memory stand-ins of build/standins/ (tests/standins_nccl/).
 */
#ifndef REPROD_NCCL_TEST_H
#define REPROD_NCCL_TEST_H

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, ranks;

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #call,           \
                    cudaGetErrorString(e_));                                                       \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

/* The call must return ncclSuccess exactly (a nonblocking call's ncclInProgress is checked
 * where it is expected, with its own code). */
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, #call,           \
                    ncclGetErrorString(r_));                                                       \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

/* MPI_Init, this rank's device, and the id rank 0 made, broadcast to every rank. */
static ncclUniqueId join_world(int *argc, char ***argv)
{
    ncclUniqueId id;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int devices = 1;
    CHECK_CUDA(cudaGetDeviceCount(&devices));
    CHECK_CUDA(cudaSetDevice(rank % (devices > 0 ? devices : 1)));
    if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    return id;
}

/* A communicator of every rank of the job. */
static ncclComm_t world_comm(ncclUniqueId id)
{
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, ranks, id, rank));
    return comm;
}

/* splitmix64: the data generator (every rank can make every rank's contribution). */
static inline uint64_t test_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* FNV-1a over bytes, folded into *digest. */
static inline void test_digest(uint64_t *digest, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++)
        *digest = (*digest ^ p[i]) * 0x100000001b3ull;
}

#endif /* REPROD_NCCL_TEST_H */
