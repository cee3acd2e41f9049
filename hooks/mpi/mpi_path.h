/* mpi_path.h: what the MPI hooks share: the decision, the accounting, the data movement and
 * the deterministic data paths.
 *
 * Two routes (runtime/route.h), chosen per call. The exchange: only data moves through the
 * real library (all-gather, all-to-all, gather: exact copies); the arithmetic happens in one
 * place, mpi_reduce_blocks, on N contributions laid side by side. The fixed route
 * (mpi_fixed.c): the library's own MAX of byte codes and int64 SUM of fixed-point words, the
 * engine's split and rounding on either side. The blocking hooks (mpi.c), the nonblocking and persistent ones (mpi_nonblocking.c)
 * and completion (mpi_complete.c) share it. Counts are 64-bit throughout: the classic bindings
 * take int, MPI-4's large-count bindings (MPI_Allreduce_c, ...) take MPI_Count.
 */
#ifndef REPROD_MPI_PATH_H
#define REPROD_MPI_PATH_H

#include "common.h"
#include "interpose/guard.h"
#include "mpi/mpi_abi.h"
#include "runtime/route.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Entry points ---------------------------------------------------------------------- */

/* The prototype of each hook: the library's function of the same name in REPROD_MPI_FUNCTIONS,
 * with every handle passed by value an mpi_handle_arg (mpi_hook_type_Allreduce, ...). */
#undef MPI_HANDLE
#define MPI_HANDLE                         mpi_handle_arg
#define MPI_HOOK_TYPE(field, symbol, type) typedef __typeof__(type) mpi_hook_type_##field;
REPROD_MPI_FUNCTIONS(MPI_HOOK_TYPE)
#undef MPI_HOOK_TYPE
#undef MPI_HANDLE
#define MPI_HANDLE mpi_handle

/* Check that the hook `function` has the prototype of `field`'s: a hook whose handles are not
 * mpi_handle_arg (which only mpi_handle_of narrows) does not compile. */
#define MPI_HOOK_CHECK(function, field)                                                            \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&function), mpi_hook_type_##field),     \
                   #function ": the library's prototype, with each handle an mpi_handle_arg")

/* An MPI entry point under both of its names: MPI_name, and PMPI_name, which the library's
 * own Fortran bindings (Open MPI's) and profiling tools stacked on top call (as Darshan's
 * wrapper map does). Its first statement narrows its handles: `mpi_handle comm =
 * mpi_handle_of(comm_arg)`. */
#define MPI_HOOK(name, parameters)                                                                 \
    REPROD_EXPORT int MPI_##name parameters;                                                       \
    REPROD_EXPORT int PMPI_##name parameters __attribute__((alias("MPI_" #name)));                 \
    MPI_HOOK_CHECK(MPI_##name, name);                                                              \
    int MPI_##name parameters

/* Enter a hook on this thread (the MPI family's claim of the guard, interpose/guard.h): 1 to go
 * on, 0 when the thread is already inside one (a call the library or a user's reduction
 * function made while the shim was running) or inside the shim's own work: the caller then
 * hands the call straight to the library, untouched. Pair a 1 with mpi_hook_leave. */
static inline int mpi_hook_enter(void)
{
    return reprod_guard_claim(REPROD_GUARD_MPI);
}

static inline void mpi_hook_leave(void)
{
    reprod_guard_release(REPROD_GUARD_MPI);
}

/* A count array as the caller gave it: int (classic bindings) or MPI_Count (_c bindings). */
struct mpi_counts {
    const void *values;
    int large; /* MPI_Count elements */
};

static inline mpi_count mpi_counts_at(struct mpi_counts counts, int index)
{
    return counts.large ? ((const mpi_count *)counts.values)[index]
                        : ((const int *)counts.values)[index];
}

/* ---- The decision ---------------------------------------------------------------------- */

/* One intercepted reduction, once decided. */
struct mpi_reduction {
    const char *api; /* "MPI_Allreduce", ... for logs */
    mpi_handle comm;
    int ranks; /* communicator size */
    int rank;  /* our rank in it */
    mpi_handle datatype;
    mpi_handle op;
    enum reprod_action action; /* never REPROD_ACTION_PASS here */
    struct reprod_mpi_type type;
    mpi_count extent;        /* bytes from one element to the next */
    mpi_count true_lb;       /* first byte an element touches, from its start */
    mpi_count true_extent;   /* bytes an element touches */
    mpi_count type_bytes;    /* payload bytes of one element */
    int plain;               /* its elements are plain bytes: size == extent == true extent */
    int timed;               /* REPROD_VERBOSE >= 1: the times below are taken (summary, log) */
    uint64_t start_ns;       /* when the hook started */
    uint64_t shim_ns;        /* time spent in the shim before start_ns (nonblocking) */
    uint64_t engine_ns;      /* time spent reducing so far */
    int keeps_scratch;       /* its scratch outlives the call (nonblocking): never cached */
    const char *own_block;   /* when set, our block is read here, not from the blocks */
    const char *route;       /* how the data moved, for the log: "chunks exchanged", ... */
    enum reprod_route taken; /* the route that moved it (the trace's word; 0: the exchange) */
    int own_error;           /* the first error the shim itself raised (not the library) */
    uint64_t trace_sequence; /* REPROD_TRACE: the call's number, 0 when not tracing */
    int trace_has_input;
    uint64_t trace_input_hash; /* this rank's contribution */
    int audit;                 /* REPROD_MODE=audit, action PASS: the exact sum may be computed
                                  beside the native call (a predefined float sum) */
};

/* Decide what to do with a call: fills *reduction and returns REPROD_ACTION_PASS with *reason
 * set, or the deterministic action. `elements` is the call's element count as the policy sees
 * it (0: nothing to reduce, negative: invalid). Handles must already be narrowed
 * (mpi_handle_of). The order of the checks makes deterministic calls (integers, max, min)
 * pass as such whatever the communicator, and asks the library nothing about a null handle. */
enum reprod_action mpi_reduction_decide(struct mpi_reduction *reduction, const char *api,
                                        mpi_count elements, mpi_handle datatype, mpi_handle op,
                                        mpi_handle comm, enum reprod_reason *reason);

/* The element type's name in traces ("float64", "complex64", "mpi-datatype"). */
const char *mpi_type_name(const struct mpi_reduction *reduction);

/* 1 when `buffer` is MPI_IN_PLACE. */
static inline int mpi_in_place(const void *buffer)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    return mpi->abi && (uintptr_t)buffer == mpi->abi->in_place;
}

/* Where a call's contribution is: the send buffer, or the receive buffer for MPI_IN_PLACE. */
static inline const void *mpi_source(const void *sendbuf, const void *recvbuf)
{
    return mpi_in_place(sendbuf) ? recvbuf : sendbuf;
}

/* The buffers of a call the deterministic path would run on, checked as the library checks
 * them: MPI_IN_PLACE where MPI forbids it, send and receive buffer the same memory without
 * MPI_IN_PLACE, NULL with a nonempty predefined type. Returns 1 when they are erroneous (the
 * call then goes to the library, which reports it). `elements` is the call's total count;
 * `receives` says whether this rank receives a result (NULL and MPI_IN_PLACE as a receive
 * buffer are refused there only, as the library refuses them); `alias_checked` whether the
 * receive buffer is significant at all (0 only off the root of a reduce): the same-buffer check
 * then runs on every rank, even one that receives nothing, so that every rank takes the same
 * decision; `send_in_place_allowed` whether MPI_IN_PLACE may be sent. */
int mpi_buffers_erroneous(const struct mpi_reduction *reduction, const void *sendbuf,
                          const void *recvbuf, mpi_count elements, int receives,
                          int alias_checked, int send_in_place_allowed);

/* A call handed to the real library unchanged (see mpi_pass_begin). */
struct mpi_pass {
    const char *api;
    enum reprod_reason reason;
    mpi_count elements;      /* -1 when unknown */
    uint64_t trace_sequence; /* 0 when not tracing */
    size_t type_bytes;       /* 0 when the datatype cannot be hashed */
    int has_input;
    uint64_t input_hash;
};

/* Before the real call: count it, log it, note its contribution for the trace (`input`,
 * `elements` elements of `datatype`; the datatype is only asked about when tracing, and only
 * for reasons that say it is valid). When REPROD_STRICT=1 forbids the pass-through it stops
 * the job and does not return. */
void mpi_pass_begin(struct mpi_pass *pass, const char *api, enum reprod_reason reason,
                    mpi_count elements, mpi_handle datatype, const void *input);

/* After the real call returned `rc`: trace it with the result this rank received
 * (`output_elements` at `output`; NULL when none or not known yet). A call passed through as
 * invalid that the library accepted is reported as not reproducible (and stops the job under
 * REPROD_STRICT=1). Returns rc. */
int mpi_pass_end(const struct mpi_pass *pass, int rc, const void *output,
                 mpi_count output_elements);

/* REPROD_TRACE: note this rank's contribution (`elements` elements at `input`) before the
 * data moves; mpi_reduction_done writes the line with the result. */
void mpi_trace_input(struct mpi_reduction *reduction, const void *input, mpi_count elements);

/* Count a finished deterministic call of `elements` elements, log it at REPROD_VERBOSE=2,
 * trace it with the result this rank received (`output_elements` at `output`; NULL when it
 * receives none), and return `rc`. */
int mpi_reduction_done(struct mpi_reduction *reduction, mpi_count elements, const char *how,
                       int rc, const void *output, mpi_count output_elements);

/* Record `code`, an error the shim itself raised (the engine, a count it cannot move), so that
 * mpi_reduction_done sends it through the communicator's error handler. Returns `code`. */
int mpi_own_error(struct mpi_reduction *reduction, int code);

/* The shim cannot go on with a call its peers are already in (no memory for `bytes` bytes):
 * stop the job with a message naming the call, rather than leave the peers waiting. Does not
 * return. */
_Noreturn void mpi_fatal_no_memory(const struct mpi_reduction *reduction, size_t bytes);

/* ---- REPROD_MODE=audit (mpi_audit.c) ------------------------------------------------- */

/* One blocking call audited: the native call runs into the user's buffers, the exact path
 * beside it into scratch, and the two results are compared. */
struct mpi_audit {
    struct mpi_reduction *reduction;
    const void *source;        /* the contribution the exact path reads */
    void *source_copy;         /* a copy of it, when the native call overwrites it (in place) */
    char *exact;               /* the exact result, output_elements elements; NULL: none */
    mpi_count input_elements;  /* the call's elements, for the trace */
    mpi_count output_elements; /* elements this rank receives */
};

/* Before the native call of an audited reduction (reduction->audit, buffers checked): take
 * a copy of the contribution when it is in the receive buffer (MPI_IN_PLACE), note it for the
 * trace, get room for the `output_elements` elements of the exact result this rank receives.
 * Sets the reduction's action to EXACT for the exact path. Returns the exact result's buffer
 * (NULL when this rank receives nothing); audit->source is what the exact path reads. */
char *mpi_audit_begin(struct mpi_audit *audit, struct mpi_reduction *reduction,
                      const void *sendbuf, const void *recvbuf, mpi_count input_elements,
                      mpi_count output_elements);

/* After both: compare the native result (`output`, where the job received it) with the exact
 * one when both calls succeeded, count it (reprod_stats_audit), trace it and log it at
 * REPROD_VERBOSE=2, free the scratch. Returns `native_rc`: the job sees the native call only. */
int mpi_audit_end(struct mpi_audit *audit, int native_rc, int exact_rc, const void *output);

/* ---- Memory and data movement (mpi_move.c) -------------------------------------------- */

/* Scratch space for `elements` elements of the reduction's datatype, laid out as MPI lays
 * out count = elements (element k at returned + k * extent). *raw receives what to give to
 * mpi_scratch_release. `extra_bytes` more bytes are appended (at *extra, 64-byte aligned). A
 * blocking call's scratch comes from a buffer the thread keeps. Out of memory stops the job
 * (mpi_fatal_no_memory): every rank must take the same path. */
char *mpi_scratch(const struct mpi_reduction *reduction, mpi_count elements, void **raw,
                  size_t extra_bytes, void **extra);

/* Give back what mpi_scratch returned in *raw (NULL is fine). */
void mpi_scratch_release(void *raw);

/* Memory for the shim's own small arrays; out of memory stops the job. */
void *mpi_allocate(const struct mpi_reduction *reduction, size_t bytes);

/* Copy `elements` elements of the reduction's datatype from `from` to `to`, touching only the
 * bytes the datatype describes (a derived or padded type's gaps in `to` stay as they were).
 * Local: no message is sent. */
int mpi_copy_elements(const struct mpi_reduction *reduction, const void *from, void *to,
                      mpi_count elements);

/* The counts and displacements (in elements) of an all-to-all exchange, one per rank, with
 * room for the forms the library's calls take. Lives as long as the exchange. */
struct mpi_exchange {
    int ranks;
    mpi_count *send_counts, *send_offsets, *receive_counts, *receive_offsets;
    int *narrow;     /* 4 * ranks ints: the same, narrowed, or the all-to-all-w form */
    void *types;     /* 2 * ranks handles, for the all-to-all-w form */
};

/* Bytes an exchange of `ranks` needs; lay it out over `memory` (that many bytes). */
size_t mpi_exchange_bytes(int ranks);
void mpi_exchange_layout(struct mpi_exchange *exchange, int ranks, void *memory);

/* Run (request NULL) or start (request: where the library's request goes) the all-to-all of
 * `exchange` from `source` into `blocks`. `chunk_counts` are the chunk sizes per rank, the
 * same numbers on every rank: from them alone every rank chooses the same call. Counts or
 * displacements beyond int go through the large-count call where the library has it, else
 * through per-rank datatypes with 64-bit byte displacements (MPI_Alltoallw). */
int mpi_exchange_run(const struct mpi_reduction *reduction, struct mpi_exchange *exchange,
                     const mpi_count chunk_counts[], const void *source, void *blocks,
                     void *request);

/* The other movements, each with the large-count call when a count exceeds int. */
int mpi_move_allgather(const struct mpi_reduction *reduction, const void *source, mpi_count count,
                       void *gathered, void *request);
int mpi_move_gather(const struct mpi_reduction *reduction, const void *source, mpi_count count,
                    void *gathered, int root, void *request);
int mpi_move_allgatherv_in_place(const struct mpi_reduction *reduction, void *result,
                                 const mpi_count counts[], const mpi_count offsets[]);
int mpi_move_gatherv(const struct mpi_reduction *reduction, const void *source, mpi_count count,
                     void *result, const mpi_count counts[], const mpi_count offsets[], int root);

/* ---- The arithmetic and the blocking paths (mpi_path.c) -------------------------------- */

/* Reduce `block_count` blocks of `block_elements` elements each, laid one after the other
 * from `blocks` in rank order, into `out` (out may be the last block, or own_block; it may not
 * overlap the others). Block `rank` is read from reduction->own_block when that is set (the
 * exchange then skipped copying our own chunk). The ordered library path folds in place, so
 * the blocks are clobbered. Returns MPI_SUCCESS or an MPI error code. */
int mpi_reduce_blocks(struct mpi_reduction *reduction, char *blocks, mpi_count block_elements,
                      int block_count, void *out);

/* 1 when gathering whole contributions beats exchanging chunks (small messages, in bytes). */
int mpi_is_small(const struct mpi_reduction *reduction, mpi_count count);

/* The blocking data paths. `source` is the contribution (the receive buffer for
 * MPI_IN_PLACE). Each returns MPI_SUCCESS or the first MPI error. The reduce-scatter takes
 * the counts per rank. */
int mpi_allreduce_path(struct mpi_reduction *reduction, const void *source, void *result,
                       mpi_count count);
int mpi_reduce_path(struct mpi_reduction *reduction, const void *source, void *result,
                    mpi_count count, int root);
int mpi_reduce_scatter_path(struct mpi_reduction *reduction, const void *source, void *result,
                            const mpi_count result_counts[]);
int mpi_scan_path(struct mpi_reduction *reduction, const void *source, void *result,
                  mpi_count count, int exclusive);

/* ---- The fixed-point route (mpi_fixed.c) ----------------------------------------------- */

/* The route of a call deciding EXACT: REPROD_ROUTE_EXCHANGE unless the type is one the engine
 * splits (a predefined float, plain), the library has the route's own handles (MPI_MAX,
 * MPI_INT8_T, MPI_INT64_T), and reprod_route_choose says so. `count` in MPI elements (the
 * call's total); `one_pass`: the call can take only the one-pass form. The same on every rank. */
enum reprod_route mpi_route(const struct mpi_reduction *reduction,
                            enum reprod_collective collective, mpi_count count, int one_pass);

/* The blocking paths on the fixed route, with the arguments of the exchange's (mpi_allreduce_path,
 * ...): two passes (a scan: one, see mpi_fixed_scan). */
int mpi_fixed_allreduce(struct mpi_reduction *reduction, const void *source, void *result,
                        mpi_count count);
int mpi_fixed_reduce(struct mpi_reduction *reduction, const void *source, void *result,
                     mpi_count count, int root);
int mpi_fixed_reduce_scatter(struct mpi_reduction *reduction, const void *source, void *result,
                             const mpi_count result_counts[]);
/* A scan takes the one-pass words: the codes of pass 1, reduced over every rank, do not
 * describe a prefix (a prefix of zeros or finite terms would round as an infinity or +0). */
int mpi_fixed_scan(struct mpi_reduction *reduction, const void *source, void *result,
                   mpi_count count, int exclusive);

/* The one-pass form: int64 words of `count` MPI elements (mpi_fixed_one_pass_words of them),
 * split from a contribution, and the result of `terms` contributions rounded from their sums. */
size_t mpi_fixed_one_pass_words(const struct mpi_reduction *reduction, mpi_count count);
void mpi_fixed_one_pass_split(const struct mpi_reduction *reduction, const void *source,
                              mpi_count count, int64_t *words);
void mpi_fixed_one_pass_round(const struct mpi_reduction *reduction, int terms,
                              const int64_t *sums, mpi_count count, void *result);

#endif /* REPROD_MPI_PATH_H */
