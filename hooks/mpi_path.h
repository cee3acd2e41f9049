/* mpi_path.h: the deterministic data paths of the MPI hooks.
 *
 * Only data moves through the real library (all-gather, all-to-all, gather: exact copies);
 * the arithmetic happens in one place, reduce_blocks, on N contributions laid side by side.
 * The blocking hooks (mpi.c) and the nonblocking ones (mpi_nonblocking.c) share it.
 */
#ifndef REPROD_MPI_PATH_H
#define REPROD_MPI_PATH_H

#include "mpi_abi.h"

#include <stddef.h>
#include <stdint.h>

/* One intercepted reduction, once decided. */
struct mpi_reduction {
    const char *api; /* "MPI_Allreduce", ... for logs */
    MPI_Comm comm;
    int ranks; /* communicator size */
    int rank;  /* our rank in it */
    MPI_Datatype datatype;
    MPI_Op op;
    enum reprod_action action; /* never REPROD_ACTION_PASS here */
    struct reprod_mpi_type type;
    MPI_Aint extent;         /* bytes from one element to the next */
    MPI_Aint true_lb;        /* first byte an element touches, from its start */
    MPI_Aint true_extent;    /* bytes an element touches */
    size_t type_bytes;       /* MPI_Type_size: payload bytes of one element */
    uint64_t start_ns;       /* when the hook started */
    uint64_t shim_ns;        /* time spent in the shim before start_ns (nonblocking) */
    uint64_t engine_ns;      /* time spent reducing so far */
    int keeps_scratch;       /* its scratch outlives the call (nonblocking): never cached */
    const char *own_block;   /* when set, our block is read here, not from the blocks */
    uint64_t trace_sequence; /* REPROD_TRACE: the call's number, 0 when not tracing */
    int trace_has_input;
    uint64_t trace_input_hash; /* this rank's contribution */
};

/* Decide what to do with a call: fills *reduction and returns REPROD_ACTION_PASS with *reason
 * set, or the deterministic action. `elements` is the call's element count as the policy
 * sees it (0: nothing to reduce). Checks that MPI is initialised, the communicator is an
 * intracommunicator, and the arguments are ones the real library would accept. */
enum reprod_action mpi_reduction_decide(struct mpi_reduction *reduction, const char *api,
                                        long long elements, MPI_Datatype datatype, MPI_Op op,
                                        MPI_Comm comm, enum reprod_reason *reason);

/* A call handed to the real library unchanged (see PASS_TO_REAL). */
struct mpi_pass {
    const char *api;
    enum reprod_reason reason;
    long long elements;      /* -1 when unknown */
    uint64_t trace_sequence; /* 0 when not tracing */
    size_t type_bytes;       /* 0 when the datatype cannot be hashed */
    int has_input;
    uint64_t input_hash;
};

/* Before the real call: count it, log it, note its contribution for the trace (`input`,
 * `elements` elements of `datatype`; the datatype is only asked about when tracing, and only
 * for reasons that say it is valid). Returns 0 to go on; nonzero when REPROD_STRICT=1 stops
 * the job (it has been aborted; the caller returns MPI_ERR_OTHER). */
int mpi_pass_begin(struct mpi_pass *pass, const char *api, enum reprod_reason reason,
                   long long elements, MPI_Datatype datatype, const void *input);

/* After the real call returned `rc`: trace it with the result this rank received
 * (`output_elements` at `output`; NULL when none or not known yet). Returns rc. */
int mpi_pass_end(const struct mpi_pass *pass, int rc, const void *output,
                 long long output_elements);

/* Hand the call to the real `name`(arguments), as described above. A library without that
 * function cannot have called us through it: answer as MPI would for an internal failure. */
#define PASS_TO_REAL(api, reason, elements, datatype, input, output, output_elements, name, ...)   \
    do {                                                                                           \
        struct mpi_pass pass_;                                                                     \
        const struct reprod_mpi *mpi_ = reprod_mpi();                                              \
        if (mpi_pass_begin(&pass_, api, reason, elements, datatype, input) != 0)                   \
            return MPI_ERR_OTHER;                                                                  \
        if (!mpi_->real.name) return MPI_ERR_INTERN;                                               \
        return mpi_pass_end(&pass_, mpi_->real.name(__VA_ARGS__), output, output_elements);        \
    } while (0)

/* Where a call's contribution is: the send buffer, or the receive buffer for MPI_IN_PLACE. */
#define SOURCE(sendbuf, recvbuf)                                                                   \
    ((sendbuf) == MPI_IN_PLACE ? (const void *)(recvbuf) : (const void *)(sendbuf))

/* The caller's send and receive buffers are the same memory without MPI_IN_PLACE: erroneous
 * in MPI; the real library reports it. */
static inline int aliased(const void *sendbuf, const void *recvbuf, long long elements)
{
    return elements > 0 && sendbuf != MPI_IN_PLACE && sendbuf == recvbuf;
}

/* The counts of a reduce-scatter, per rank (`counts`) or one for all (`counts` NULL,
 * `uniform_count`): valid, not all zero, their *total fitting MPI's int displacements.
 * Returns the reason to pass the call through, or -1 to go on. */
int mpi_check_counts(const struct mpi_reduction *reduction, const int counts[], int uniform_count,
                     long long *total);

/* REPROD_TRACE: note this rank's contribution (`elements` elements at `input`) before the
 * data moves; mpi_reduction_done writes the line with the result. */
void mpi_trace_input(struct mpi_reduction *reduction, const void *input, long long elements);

/* Count a finished deterministic call of `elements` elements, log it at REPROD_VERBOSE=2,
 * trace it with the result this rank received (`output_elements` at `output`; NULL when it
 * receives none), and return `rc`. When the shim itself failed (MPI_ERR_NO_MEM: no scratch
 * memory) the communicator's error handler is called, as the real library would: the job
 * stops cleanly instead of hanging its peers. */
int mpi_reduction_done(struct mpi_reduction *reduction, long long elements, const char *how, int rc,
                       const void *output, long long output_elements);

/* Scratch space for `elements` elements of the reduction's datatype, laid out as MPI lays
 * out count = elements (element k at returned + k * extent). *raw receives what to give to
 * mpi_scratch_release. NULL when out of memory. `extra_bytes` more bytes are appended (at
 * *extra, aligned). A blocking call's scratch comes from a buffer the thread keeps. */
char *mpi_scratch(const struct mpi_reduction *reduction, size_t elements, void **raw,
                  size_t extra_bytes, void **extra);

/* Give back what mpi_scratch returned in *raw (NULL is fine). */
void mpi_scratch_release(void *raw);

/* Reduce `block_count` blocks of `block_elements` elements each, laid one after the other
 * from `blocks` in rank order, into `out` (out may be the last block, or own_block; it may not
 * overlap the others). Block `rank` is read from reduction->own_block when that is set (the
 * exchange then skipped copying our own chunk). The ordered library path folds in place, so
 * the blocks are clobbered. Returns MPI_SUCCESS or an MPI error code. */
int mpi_reduce_blocks(struct mpi_reduction *reduction, char *blocks, size_t block_elements,
                      int block_count, void *out);

/* The blocking data paths. `source` is the contribution (the receive buffer for
 * MPI_IN_PLACE). Each returns MPI_SUCCESS or the first MPI error. The reduce-scatter takes
 * the counts per rank, or NULL and one count for all (MPI_Reduce_scatter_block). */
int mpi_allreduce_path(struct mpi_reduction *reduction, const void *source, void *result,
                       int count);
int mpi_reduce_path(struct mpi_reduction *reduction, const void *source, void *result, int count,
                    int root);
int mpi_reduce_scatter_path(struct mpi_reduction *reduction, const void *source, void *result,
                            const int result_counts[], int uniform_count);
int mpi_scan_path(struct mpi_reduction *reduction, const void *source, void *result, int count,
                  int exclusive);

#endif /* REPROD_MPI_PATH_H */
