/* A stand-in MPI library with an ABI of its own (mpi_standin.h), a world of one rank, for the
 * shim's behaviour with an MPI it cannot serve: one of no known family (the default: its
 * version string names no family), or, built with -DSTANDIN_VERSION='"MPICH ..."'
 * -DSTANDIN_WITHOUT_ALLTOALLV, one that looks like MPICH and lacks a function the shim's data
 * paths need. Every call must still reach it. Each function is PMPI_name, with MPI_name a
 * weak alias (as MPICH defines them), and counts its calls for standin_mpi_calls(). */
#include "mpi_standin.h"

#include <stdio.h>
#include <string.h>

#ifndef STANDIN_VERSION
#define STANDIN_VERSION "Stand-in MPI 1.0 (an MPI of no known family)"
#endif

/* The calls counted, by name. */
#define MAX_NAMES 64
static struct {
    const char *name;
    long calls;
} counted[MAX_NAMES];

static void tally(const char *name)
{
    for (int i = 0; i < MAX_NAMES; i++) {
        if (!counted[i].name) counted[i].name = name;
        if (strcmp(counted[i].name, name) == 0) {
            counted[i].calls++;
            return;
        }
    }
}

long standin_mpi_calls(const char *name)
{
    for (int i = 0; i < MAX_NAMES && counted[i].name; i++)
        if (strcmp(counted[i].name, name) == 0) return counted[i].calls;
    return 0;
}

/* PMPI_name with its parameters, MPI_name a weak alias of it. */
#define DEFINE(name, parameters)                                                                   \
    int PMPI_##name parameters;                                                                    \
    int MPI_##name parameters __attribute__((weak, alias("PMPI_" #name)));                         \
    int PMPI_##name parameters

static int initialized;

DEFINE(Init, (int *argc, char ***argv))
{
    (void)argc, (void)argv;
    tally("MPI_Init");
    initialized = 1;
    return MPI_SUCCESS;
}

DEFINE(Initialized, (int *flag))
{
    tally("MPI_Initialized");
    *flag = initialized;
    return MPI_SUCCESS;
}

DEFINE(Finalize, (void))
{
    tally("MPI_Finalize");
    initialized = 0;
    return MPI_SUCCESS;
}

DEFINE(Get_library_version, (char *version, int *length))
{
    tally("MPI_Get_library_version");
    *length = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING, "%s", STANDIN_VERSION);
    return MPI_SUCCESS;
}

DEFINE(Comm_rank, (MPI_Comm comm, int *rank))
{
    tally("MPI_Comm_rank");
    *rank = 0;
    return comm == MPI_COMM_WORLD ? MPI_SUCCESS : MPI_ERR_OTHER;
}

DEFINE(Comm_size, (MPI_Comm comm, int *size))
{
    tally("MPI_Comm_size");
    *size = 1;
    return comm == MPI_COMM_WORLD ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* The sum over one rank: the contribution itself, for this ABI's handles only. */
static int reduce_one(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm)
{
    size_t bytes = datatype == MPI_DOUBLE  ? sizeof(double)
                   : datatype == MPI_FLOAT ? sizeof(float)
                                           : 0;
    if (!bytes || op != MPI_SUM || comm != MPI_COMM_WORLD || count < 0 || !initialized)
        return MPI_ERR_OTHER;
    if (sendbuf != MPI_IN_PLACE) memmove(recvbuf, sendbuf, bytes * (size_t)count);
    return MPI_SUCCESS;
}

DEFINE(Allreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm))
{
    tally("MPI_Allreduce");
    return reduce_one(sendbuf, recvbuf, count, datatype, op, comm);
}

DEFINE(Reduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm))
{
    tally("MPI_Reduce");
    return root == 0 ? reduce_one(sendbuf, recvbuf, count, datatype, op, comm) : MPI_ERR_OTHER;
}

DEFINE(Iallreduce, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, MPI_Request *request))
{
    tally("MPI_Iallreduce");
    int rc = reduce_one(sendbuf, recvbuf, count, datatype, op, comm);
    *request = rc == MPI_SUCCESS ? 1 : MPI_REQUEST_NULL;
    return rc;
}

DEFINE(Wait, (MPI_Request * request, MPI_Status *status))
{
    tally("MPI_Wait");
    if (status) memset(status, 0, sizeof *status);
    *request = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

DEFINE(Type_get_envelope,
       (MPI_Datatype datatype, int *integers, int *addresses, int *datatypes, int *combiner))
{
    tally("MPI_Type_get_envelope");
    *integers = *addresses = *datatypes = 0;
    *combiner = 1; /* named */
    return datatype == MPI_DOUBLE || datatype == MPI_FLOAT ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* The rest of what an MPI library has and the shim's data paths would use: present (so that
 * only what a variant leaves out is missing), never reached in a one-rank job that passes
 * through. */
#define PRESENT(name)                                                                              \
    DEFINE(name, (void))                                                                           \
    {                                                                                              \
        tally("MPI_" #name);                                                                       \
        return MPI_ERR_OTHER;                                                                      \
    }
PRESENT(Allgather)
PRESENT(Allgatherv)
#ifndef STANDIN_WITHOUT_ALLTOALLV
PRESENT(Alltoallv)
#endif
PRESENT(Alltoallw)
PRESENT(Gather)
PRESENT(Gatherv)
PRESENT(Iallgather)
PRESENT(Igather)
PRESENT(Ialltoallv)
PRESENT(Ialltoallw)
PRESENT(Request_get_status)
PRESENT(Abort)
PRESENT(Error_class)
PRESENT(Comm_test_inter)
PRESENT(Type_size_x)
PRESENT(Type_get_extent)
PRESENT(Type_get_true_extent)
PRESENT(Type_get_contents)
PRESENT(Comm_call_errhandler)
PRESENT(Type_free)
PRESENT(Type_create_hindexed)
PRESENT(Type_commit)
PRESENT(Pack)
PRESENT(Unpack)
PRESENT(Reduce_local)
PRESENT(Op_free)
