/* mpi_standin.h: the interface of a stand-in MPI library (tests/standins/mpi_standin.c) with
 * an ABI of its own: int handles whose values no real MPI uses, its own status layout. Enough
 * of MPI for tests/progs/mpi_standin_job.c, a one-rank job, and standin_mpi_calls() to say
 * which real functions were reached. */
#ifndef MPI_STANDIN_H
#define MPI_STANDIN_H

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef struct {
    int source, tag, error, count;
} MPI_Status;

#define MPI_SUCCESS                    0
#define MPI_ERR_OTHER                  15
#define MPI_COMM_WORLD                 0x5a000001
#define MPI_DOUBLE                     0x5a000102
#define MPI_FLOAT                      0x5a000103
#define MPI_SUM                        0x5a000201
#define MPI_REQUEST_NULL               0
#define MPI_STATUS_IGNORE              ((MPI_Status *)0)
#define MPI_IN_PLACE                   ((void *)-1)
#define MPI_MAX_LIBRARY_VERSION_STRING 256

int MPI_Init(int *argc, char ***argv);
int MPI_Initialized(int *flag);
int MPI_Finalize(void);
int MPI_Get_library_version(char *version, int *length);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
int PMPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm);
int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Type_get_envelope(MPI_Datatype datatype, int *integers, int *addresses, int *datatypes,
                          int *combiner);

/* How many times the stand-in's own `name` ("MPI_Allreduce", ...) ran, either name. */
long standin_mpi_calls(const char *name);

#endif
