/* nccl_test.h: what the NCCL test programs share: an MPI job whose ranks make one NCCL
 * communicator, as nccl-tests do (rank 0 makes the unique id, MPI broadcasts it); with
 * nccl_data.h's checks, data and digest.
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

#include "nccl_data.h"

static const char *test_who(void)
{
    static char who[32];
    snprintf(who, sizeof who, "rank %d", rank);
    return who;
}

static void test_stop(void)
{
    MPI_Abort(MPI_COMM_WORLD, 1);
}

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

#endif /* REPROD_NCCL_TEST_H */
