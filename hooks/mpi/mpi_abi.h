/* mpi_abi.h: the MPI library as the hooks see it at run time, whichever family it belongs to.
 *
 * The MPI hooks are compiled without any mpi.h. Open MPI's handles are pointers to library
 * globals; the MPICH family's (MPICH, MVAPICH, Intel MPI, Cray MPICH) are 32-bit integers;
 * status objects, error codes and type combiners differ too, and both libraries can be
 * installed side by side. So a handle travels as an integer as wide as a pointer
 * (mpi_handle), each family's constants come from its own mpi.h compiled into a table
 * (mpi_abi_openmpi.c, mpi_abi_mpich.c), and the family is recognised when a hook first runs.
 * On x86-64 and AArch64 an int argument and a pointer argument travel in the same register, so
 * one exported function serves both ABIs once the handle is narrowed: the upper half of a
 * register that carries an int is undefined. A hook therefore receives each handle as an
 * mpi_handle_arg, which nothing but mpi_handle_of turns into an mpi_handle: a hook that skips
 * the narrowing does not compile. Handles in memory (arrays of requests, handles the library
 * writes) are read at their own width (mpi_handle_load), and need none.
 */
#ifndef REPROD_MPI_ABI_H
#define REPROD_MPI_ABI_H

#include "interpose/real.h"
#include "runtime/policy.h"
#include "reprod.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef uintptr_t mpi_handle; /* MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request, MPI_Info */
typedef int64_t mpi_count;    /* MPI_Count and MPI_Aint: 64 bits in both families */

/* A handle as an exported hook receives it: the whole register (or stack slot) the caller
 * passed it in. A struct of one pointer-sized integer travels exactly as that integer does
 * (x86-64 and AArch64 calling conventions), but converts to nothing: mpi_handle_of reads it. */
typedef struct {
    uintptr_t bits;
} mpi_handle_arg;

/* MPI_SUCCESS is 0 in every MPI. */
#define REPROD_MPI_OK 0

/* A predefined handle: a value known at compile time (MPICH), or the address of a library
 * global named `symbol` (Open MPI), looked up at run time (referring to it at link time would
 * tie the shim to libmpi). */
struct mpi_predefined {
    uintptr_t value;
    const char *symbol;
};

/* A predefined datatype that reduces as floating point. */
struct mpi_named_type {
    struct mpi_predefined handle;
    enum reprod_element_class element_class;
    reprod_type engine_type; /* REPROD_ELEMENT_ENGINE_FLOAT only */
    int engine_elements;     /* engine elements per MPI element: 2 for complex */
};

/* Everything of one family's mpi.h that the hooks need. */
struct mpi_constants {
    const char *family;         /* "Open MPI", "MPICH" */
    size_t handle_bytes;        /* sizeof(MPI_Datatype) = sizeof(MPI_Request) = ... */
    size_t status_bytes;        /* sizeof(MPI_Status) */
    size_t status_error_offset; /* offsetof(MPI_Status, MPI_ERROR) */
    uintptr_t in_place;         /* MPI_IN_PLACE */
    uintptr_t status_ignore;    /* MPI_STATUS_IGNORE */
    uintptr_t statuses_ignore;  /* MPI_STATUSES_IGNORE */
    int undefined;              /* MPI_UNDEFINED */
    /* Error classes. */
    int err_buffer, err_count, err_type, err_op, err_arg, err_root, err_other, err_intern;
    int err_in_status, err_pending, err_no_mem, err_request;
    /* Datatype combiners. */
    int combiner_named, combiner_f90_real, combiner_f90_complex, combiner_f90_integer;
    /* Predefined handles. */
    struct mpi_predefined comm_world, comm_self, comm_null, datatype_null, op_null, request_null;
    struct mpi_predefined op_sum, op_prod;
    /* The fixed-point route's own reductions (mpi_fixed.c): MAX of bytes (as int8: MPICH 4.0's
     * MAX of MPI_UINT8_T and MPI_UNSIGNED_CHAR gives wrong answers), SUM of int64. */
    struct mpi_predefined op_max, datatype_int8, datatype_int64;
    const struct mpi_named_type *float_types; /* every predefined float type */
    size_t float_type_count;
    const struct mpi_predefined *deterministic_ops; /* max, min, logical, bitwise, loc, ... */
    size_t deterministic_op_count;
    const char *allgather_init_name; /* the persistent all-gather: MPI-4's or Open MPI's MPIX_ */
    int persistent_derived_broken;   /* its persistent all-gather mishandles derived datatypes
                                        (MPICH 4.0 releases a datatype reference each round) */
};

extern const struct mpi_constants reprod_mpi_openmpi;
extern const struct mpi_constants reprod_mpi_mpich;

/* The library's functions the hooks call, X(field, symbol, type) for interpose/real.h (each
 * looked up as PMPI_name, else MPI_name: mpi_abi.c), with neutral types: MPI_Datatype, MPI_Op,
 * MPI_Comm, MPI_Request, MPI_Info passed by value are MPI_HANDLE; arrays of handles are void *
 * (their element size is handle_bytes); MPI_Status * is void *. MPI_HANDLE is an mpi_handle
 * where the shim calls the library, and an mpi_handle_arg in the prototype of the shim's own
 * hook of the same name (MPI_HOOK, mpi_path.h, checks each hook against the list). */
#define MPI_HANDLE mpi_handle

/* clang-format off */
#define REPROD_MPI_FUNCTIONS(X)                                                                    \
    X(Allreduce, "MPI_Allreduce",                                                                  \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                      \
    X(Allreduce_c, "MPI_Allreduce_c",                                                              \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                \
    X(Reduce, "MPI_Reduce",                                                                        \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, int, MPI_HANDLE))                 \
    X(Reduce_c, "MPI_Reduce_c",                                                                    \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, int, MPI_HANDLE))           \
    X(Reduce_scatter, "MPI_Reduce_scatter",                                                        \
      int (*)(const void *, void *, const int *, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))              \
    X(Reduce_scatter_c, "MPI_Reduce_scatter_c",                                                    \
      int (*)(const void *, void *, const mpi_count *, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))        \
    X(Reduce_scatter_block, "MPI_Reduce_scatter_block",                                            \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                      \
    X(Reduce_scatter_block_c, "MPI_Reduce_scatter_block_c",                                        \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                \
    X(Scan, "MPI_Scan", int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))    \
    X(Scan_c, "MPI_Scan_c",                                                                        \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                \
    X(Exscan, "MPI_Exscan",                                                                        \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                      \
    X(Exscan_c, "MPI_Exscan_c",                                                                    \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE))                \
    X(Iallreduce, "MPI_Iallreduce",                                                                \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))              \
    X(Iallreduce_c, "MPI_Iallreduce_c",                                                            \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))        \
    X(Ireduce, "MPI_Ireduce",                                                                      \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, int, MPI_HANDLE, void *))         \
    X(Ireduce_c, "MPI_Ireduce_c",                                                                  \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, int, MPI_HANDLE, void *))   \
    X(Ireduce_scatter, "MPI_Ireduce_scatter",                                                      \
      int (*)(const void *, void *, const int *, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))      \
    X(Ireduce_scatter_c, "MPI_Ireduce_scatter_c",                                                  \
      int (*)(const void *, void *, const mpi_count *, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE,         \
              void *))                                                                             \
    X(Ireduce_scatter_block, "MPI_Ireduce_scatter_block",                                          \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))              \
    X(Ireduce_scatter_block_c, "MPI_Ireduce_scatter_block_c",                                      \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))        \
    X(Iscan, "MPI_Iscan",                                                                          \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))              \
    X(Iscan_c, "MPI_Iscan_c",                                                                      \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))        \
    X(Iexscan, "MPI_Iexscan",                                                                      \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))              \
    X(Iexscan_c, "MPI_Iexscan_c",                                                                  \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))        \
    X(Allreduce_init, "MPI_Allreduce_init",                                                        \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))  \
    X(Allreduce_init_c, "MPI_Allreduce_init_c",                                                    \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE,     \
              void *))                                                                             \
    X(Allreduce_init_mpix, "MPIX_Allreduce_init",                                                  \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE, void *))  \
    X(Allgather, "MPI_Allgather",                                                                  \
      int (*)(const void *, int, MPI_HANDLE, void *, int, MPI_HANDLE, MPI_HANDLE))                 \
    X(Allgather_c, "MPI_Allgather_c",                                                              \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, mpi_count, MPI_HANDLE, MPI_HANDLE))     \
    X(Allgatherv, "MPI_Allgatherv",                                                                \
      int (*)(const void *, int, MPI_HANDLE, void *, const int *, const int *, MPI_HANDLE,         \
              MPI_HANDLE))                                                                         \
    X(Allgatherv_c, "MPI_Allgatherv_c",                                                            \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, const mpi_count *, const mpi_count *,   \
              MPI_HANDLE, MPI_HANDLE))                                                             \
    X(Alltoallv, "MPI_Alltoallv",                                                                  \
      int (*)(const void *, const int *, const int *, MPI_HANDLE, void *, const int *,             \
              const int *, MPI_HANDLE, MPI_HANDLE))                                                \
    X(Alltoallv_c, "MPI_Alltoallv_c",                                                              \
      int (*)(const void *, const mpi_count *, const mpi_count *, MPI_HANDLE, void *,              \
              const mpi_count *, const mpi_count *, MPI_HANDLE, MPI_HANDLE))                       \
    X(Alltoallw, "MPI_Alltoallw",                                                                  \
      int (*)(const void *, const int *, const int *, const void *, void *, const int *,           \
              const int *, const void *, MPI_HANDLE))                                              \
    X(Gather, "MPI_Gather",                                                                        \
      int (*)(const void *, int, MPI_HANDLE, void *, int, MPI_HANDLE, int, MPI_HANDLE))            \
    X(Gather_c, "MPI_Gather_c",                                                                    \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, mpi_count, MPI_HANDLE, int,             \
              MPI_HANDLE))                                                                         \
    X(Gatherv, "MPI_Gatherv",                                                                      \
      int (*)(const void *, int, MPI_HANDLE, void *, const int *, const int *, MPI_HANDLE, int,    \
              MPI_HANDLE))                                                                         \
    X(Gatherv_c, "MPI_Gatherv_c",                                                                  \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, const mpi_count *, const mpi_count *,   \
              MPI_HANDLE, int, MPI_HANDLE))                                                        \
    X(Iallgather, "MPI_Iallgather",                                                                \
      int (*)(const void *, int, MPI_HANDLE, void *, int, MPI_HANDLE, MPI_HANDLE, void *))         \
    X(Iallgather_c, "MPI_Iallgather_c",                                                            \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, mpi_count, MPI_HANDLE, MPI_HANDLE,      \
              void *))                                                                             \
    X(Igather, "MPI_Igather",                                                                      \
      int (*)(const void *, int, MPI_HANDLE, void *, int, MPI_HANDLE, int, MPI_HANDLE, void *))    \
    X(Igather_c, "MPI_Igather_c",                                                                  \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, mpi_count, MPI_HANDLE, int, MPI_HANDLE, \
              void *))                                                                             \
    X(Ialltoallv, "MPI_Ialltoallv",                                                                \
      int (*)(const void *, const int *, const int *, MPI_HANDLE, void *, const int *,             \
              const int *, MPI_HANDLE, MPI_HANDLE, void *))                                        \
    X(Ialltoallv_c, "MPI_Ialltoallv_c",                                                            \
      int (*)(const void *, const mpi_count *, const mpi_count *, MPI_HANDLE, void *,              \
              const mpi_count *, const mpi_count *, MPI_HANDLE, MPI_HANDLE, void *))               \
    X(Ialltoallw, "MPI_Ialltoallw",                                                                \
      int (*)(const void *, const int *, const int *, const void *, void *, const int *,           \
              const int *, const void *, MPI_HANDLE, void *))                                      \
    X(Allgather_init, "MPI_Allgather_init",                                                        \
      int (*)(const void *, int, MPI_HANDLE, void *, int, MPI_HANDLE, MPI_HANDLE, MPI_HANDLE,      \
              void *))                                                                             \
    X(Allgather_init_c, "MPI_Allgather_init_c",                                                    \
      int (*)(const void *, mpi_count, MPI_HANDLE, void *, mpi_count, MPI_HANDLE, MPI_HANDLE,      \
              MPI_HANDLE, void *))                                                                 \
    X(Start, "MPI_Start", int (*)(void *))                                                         \
    X(Startall, "MPI_Startall", int (*)(int, void *))                                              \
    X(Wait, "MPI_Wait", int (*)(void *, void *))                                                   \
    X(Waitall, "MPI_Waitall", int (*)(int, void *, void *))                                        \
    X(Waitany, "MPI_Waitany", int (*)(int, void *, int *, void *))                                 \
    X(Waitsome, "MPI_Waitsome", int (*)(int, void *, int *, int *, void *))                        \
    X(Test, "MPI_Test", int (*)(void *, int *, void *))                                            \
    X(Testall, "MPI_Testall", int (*)(int, void *, int *, void *))                                 \
    X(Testany, "MPI_Testany", int (*)(int, void *, int *, int *, void *))                          \
    X(Testsome, "MPI_Testsome", int (*)(int, void *, int *, int *, void *))                        \
    X(Request_get_status, "MPI_Request_get_status", int (*)(MPI_HANDLE, int *, void *))            \
    X(Request_free, "MPI_Request_free", int (*)(void *))                                           \
    X(Init, "MPI_Init", int (*)(int *, char ***))                                                  \
    X(Init_thread, "MPI_Init_thread", int (*)(int *, char ***, int, int *))                        \
    X(Initialized, "MPI_Initialized", int (*)(int *))                                              \
    X(Finalize, "MPI_Finalize", int (*)(void))                                                     \
    X(Abort, "MPI_Abort", int (*)(MPI_HANDLE, int))                                                \
    X(Error_class, "MPI_Error_class", int (*)(int, int *))                                         \
    X(Get_library_version, "MPI_Get_library_version", int (*)(char *, int *))                      \
    X(Comm_size, "MPI_Comm_size", int (*)(MPI_HANDLE, int *))                                      \
    X(Comm_rank, "MPI_Comm_rank", int (*)(MPI_HANDLE, int *))                                      \
    X(Comm_test_inter, "MPI_Comm_test_inter", int (*)(MPI_HANDLE, int *))                          \
    X(Type_size_x, "MPI_Type_size_x", int (*)(MPI_HANDLE, mpi_count *))                            \
    X(Type_get_extent, "MPI_Type_get_extent", int (*)(MPI_HANDLE, mpi_count *, mpi_count *))       \
    X(Type_get_true_extent, "MPI_Type_get_true_extent",                                            \
      int (*)(MPI_HANDLE, mpi_count *, mpi_count *))                                               \
    X(Type_get_envelope, "MPI_Type_get_envelope", int (*)(MPI_HANDLE, int *, int *, int *, int *)) \
    X(Type_get_contents, "MPI_Type_get_contents",                                                  \
      int (*)(MPI_HANDLE, int, int, int, int *, mpi_count *, void *))                              \
    X(Type_free, "MPI_Type_free", int (*)(void *))                                                 \
    X(Type_create_hindexed, "MPI_Type_create_hindexed",                                            \
      int (*)(int, const int *, const mpi_count *, MPI_HANDLE, void *))                            \
    X(Type_commit, "MPI_Type_commit", int (*)(void *))                                             \
    X(Pack, "MPI_Pack", int (*)(const void *, int, MPI_HANDLE, void *, int, int *, MPI_HANDLE))    \
    X(Unpack, "MPI_Unpack",                                                                        \
      int (*)(const void *, int, int *, void *, int, MPI_HANDLE, MPI_HANDLE))                      \
    X(Reduce_local, "MPI_Reduce_local",                                                            \
      int (*)(const void *, void *, int, MPI_HANDLE, MPI_HANDLE))                                  \
    X(Reduce_local_c, "MPI_Reduce_local_c",                                                        \
      int (*)(const void *, void *, mpi_count, MPI_HANDLE, MPI_HANDLE))                            \
    X(Op_free, "MPI_Op_free", int (*)(void *))                                                     \
    X(Comm_call_errhandler, "MPI_Comm_call_errhandler", int (*)(MPI_HANDLE, int))                  \
    X(Session_init, "MPI_Session_init", int (*)(MPI_HANDLE, MPI_HANDLE, void *))                   \
    X(Session_finalize, "MPI_Session_finalize", int (*)(void *))
/* clang-format on */

struct mpi_functions {
    REPROD_REAL_FIELDS(REPROD_MPI_FUNCTIONS)
};

/* The MPI library of this process, as found. */
struct reprod_mpi {
    int usable;          /* 1: a known family with every function the data paths need */
    const char *why_not; /* when !usable: what is missing, for the log */
    const struct mpi_constants *abi;
    mpi_handle handle_mask;       /* the bits of a handle: all, or the low 32 (MPICH) */
    struct mpi_functions real;    /* a function the library lacks answers MPI_ERR_INTERN */
    unsigned char has[128];       /* has[i]: function i of REPROD_MPI_FUNCTIONS was found */
    mpi_handle comm_world, comm_self, comm_null, datatype_null, op_null, request_null;
    mpi_handle op_sum, op_prod;
    mpi_handle op_max, datatype_int8, datatype_int64; /* 0: absent (no fixed-point route) */
};

/* The process's MPI, resolved on first use (thread-safe). Never NULL; check usable. Every hook
 * asks many times per call: after the first, it is one acquire load. */
extern _Atomic(const struct reprod_mpi *) reprod_mpi_resolved;
const struct reprod_mpi *reprod_mpi_resolve(void);
static inline const struct reprod_mpi *reprod_mpi(void)
{
    const struct reprod_mpi *found =
        atomic_load_explicit(&reprod_mpi_resolved, memory_order_acquire);
    return found ? found : reprod_mpi_resolve();
}

/* Indices of the functions, for reprod_mpi()->has[]. */
#define REPROD_MPI_INDEX(field, symbol, type) MPI_FUNCTION_##field,
enum { REPROD_MPI_FUNCTIONS(REPROD_MPI_INDEX) MPI_FUNCTION_COUNT };
#undef REPROD_MPI_INDEX

/* The real function `name` (never NULL: a missing one returns MPI_ERR_INTERN). */
#define REAL_MPI(name) (reprod_mpi()->real.name)
/* 1 when the library defines `name`. */
#define HAS_MPI(name) (reprod_mpi()->has[MPI_FUNCTION_##name])

/* A handle argument as the library means it (the low 32 bits for MPICH): the one place a
 * hook's handle is narrowed. */
static inline mpi_handle mpi_handle_of(mpi_handle_arg handle)
{
    return handle.bits & reprod_mpi()->handle_mask;
}

/* Handle number `index` of an array of handles (requests, datatypes) laid out by the ABI, or
 * one the library wrote at `array` (index 0): handle_bytes bytes, so narrow as read. */
mpi_handle mpi_handle_load(const void *array, long index);
void mpi_handle_store(void *array, long index, mpi_handle handle);

/* The error field of status number `index` of an array of statuses. */
int mpi_status_error(const void *statuses, long index);

/* The error class of an error code (MPICH encodes details in its codes). */
int mpi_error_class(int code);

/* Where MPI is in its life, as MPI_Init, MPI_Init_thread and MPI_Finalize were seen (or
 * MPI_Initialized, for an MPI started before the shim could see it), and MPI-4 sessions:
 * running while the world model or a session is. */
enum reprod_mpi_state {
    REPROD_MPI_NOT_STARTED = 0,
    REPROD_MPI_RUNNING,
    REPROD_MPI_FINALIZING, /* MPI_Finalize was called: the shim stays out of the way */
};
enum reprod_mpi_state reprod_mpi_state(void);
void reprod_mpi_set_state(enum reprod_mpi_state state);

/* 1 when the world model runs (MPI_Init was called, MPI_Finalize not yet): MPI_COMM_WORLD may
 * be used. Under sessions alone it may not. */
int reprod_mpi_world_running(void);

/* MPI_COMM_WORLD's size and our rank in it, noted by the MPI_Init hook (reprod_mpi_note_world)
 * and forgotten when the state leaves RUNNING: the world is an intracommunicator whose size
 * and rank never change and whose handle is never freed, so a reduction on it need not ask.
 * Returns 1 with *size and *rank set, or 0 when not known (MPI started unseen, finalizing):
 * then ask the library. */
void reprod_mpi_note_world(int size, int rank);
int reprod_mpi_world_geometry(int *size, int *rank);

/* An MPI-4 session began (+1) or ended (-1). */
void reprod_mpi_count_session(int change);

/* How one datatype reduces. */
struct reprod_mpi_type {
    enum reprod_element_class element_class;
    reprod_type engine_type; /* for REPROD_ELEMENT_ENGINE_FLOAT */
    int engine_elements;     /* engine elements per MPI element (2 for complex) */
    int predefined;          /* predefined (named or Fortran 90 parameterised): never freed */
};

/* Classify `datatype` (derived types are walked through MPI_Type_get_contents). Returns
 * REPROD_MPI_OK, or the library's error code when it refuses the handle. */
int reprod_mpi_classify_type(mpi_handle datatype, struct reprod_mpi_type *type);

/* Classify `op`: sum, product, user-defined or one of the deterministic predefined ops. */
enum reprod_op_class reprod_mpi_classify_op(mpi_handle op);

#endif /* REPROD_MPI_ABI_H */
