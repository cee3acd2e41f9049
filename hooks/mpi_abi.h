/* mpi_abi.h: Open MPI as the MPI hooks see it at run time.
 *
 * We compile against Open MPI's mpi.h for its types and prototypes, but never use its
 * predefined-handle macros (MPI_FLOAT is the address of a symbol in libmpi: referencing it
 * would tie the shim to libmpi at link time). Instead the real PMPI functions and the
 * predefined handles are looked up once, when the first hook needs them.
 */
#ifndef REPROD_MPI_ABI_H
#define REPROD_MPI_ABI_H

#include "policy.h"
#include "reprod.h"

#include <mpi.h>

/* Every real function the MPI hooks call, as X(name). */
#define REPROD_MPI_FUNCTIONS(X)                                                                    \
    X(Allreduce)                                                                                   \
    X(Reduce)                                                                                      \
    X(Reduce_scatter_block)                                                                        \
    X(Reduce_scatter)                                                                              \
    X(Scan) X(Exscan) X(Iallreduce) X(Ireduce) X(Ireduce_scatter_block) X(Ireduce_scatter)         \
        X(Iscan) X(Iexscan) X(Allgather) X(Allgatherv) X(Alltoall) X(Alltoallv) X(Gather)          \
            X(Gatherv) X(Iallgather) X(Ialltoall) X(Ialltoallv) X(Igather) X(Wait) X(Waitall)      \
                X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany) X(Testsome)                   \
                    X(Request_get_status) X(Init) X(Init_thread) X(Initialized) X(Finalize)        \
                        X(Abort) X(Comm_size) X(Comm_rank) X(Comm_test_inter) X(Type_size)         \
                            X(Type_get_extent) X(Type_get_true_extent) X(Type_get_envelope)        \
                                X(Type_get_contents) X(Type_free) X(Reduce_local) X(Sendrecv)      \
                                    X(Comm_call_errhandler) X(Request_free)

#define REPROD_MPI_POINTER(name) __typeof__(PMPI_##name) *name;
struct reprod_mpi_functions {
    REPROD_MPI_FUNCTIONS(REPROD_MPI_POINTER)
};
#undef REPROD_MPI_POINTER

/* The MPI library as found: its real functions and the predefined handles we compare to. */
struct reprod_mpi {
    int usable;          /* 1: Open MPI found, everything below is set */
    const char *why_not; /* when !usable: what is missing, for the log */
    struct reprod_mpi_functions real;
    MPI_Comm comm_world;        /* &ompi_mpi_comm_world */
    MPI_Comm comm_self;         /* &ompi_mpi_comm_self */
    MPI_Op op_sum;              /* &ompi_mpi_op_sum */
    MPI_Op op_prod;             /* &ompi_mpi_op_prod */
    MPI_Datatype datatype_null; /* &ompi_mpi_datatype_null */
};

/* The process's view of MPI, resolved on first use (thread-safe). Never NULL; check usable. */
const struct reprod_mpi *reprod_mpi(void);

/* Where MPI is in its life, as the hooks of MPI_Init, MPI_Init_thread and MPI_Finalize saw it
 * (or MPI_Initialized, for an MPI started before the shim could see it). */
enum reprod_mpi_state {
    REPROD_MPI_NOT_STARTED = 0,
    REPROD_MPI_RUNNING,
    REPROD_MPI_FINALIZING, /* MPI_Finalize was called: the shim stays out of the way */
};
enum reprod_mpi_state reprod_mpi_state(void);
void reprod_mpi_set_state(enum reprod_mpi_state state);

/* The real function `name`, whatever else is usable: pass-through needs only this. NULL when
 * no loaded object defines it. */
#define REPROD_MPI_REAL(name) (reprod_mpi()->real.name)

/* How one datatype reduces: its element class for the policy and, for engine types, the
 * engine type and how many engine elements one MPI element holds (2 for complex). */
struct reprod_mpi_type {
    enum reprod_element_class element_class;
    reprod_type engine_type;
    int engine_elements; /* engine elements per MPI element */
    int predefined;      /* a named (predefined) datatype */
};

/* Classify `datatype` (derived types are walked through MPI_Type_get_contents). Returns 0, or
 * an MPI error code when the library refuses the handle. */
int reprod_mpi_classify_type(MPI_Datatype datatype, struct reprod_mpi_type *type);

/* Classify `op`: sum, product, user-defined or one of the deterministic predefined ops. */
enum reprod_op_class reprod_mpi_classify_op(MPI_Op op);

#endif /* REPROD_MPI_ABI_H */
