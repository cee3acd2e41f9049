/* nccl_internal.h: what the NCCL hook files share: the communicators and PreMulSum ops the shim
 * knows (nccl_comm.c), one deterministic reduction and its data path (nccl_path.c), and the
 * per-thread group that runs them (nccl_group.c).
 */
#ifndef REPROD_NCCL_INTERNAL_H
#define REPROD_NCCL_INTERNAL_H

#include "nccl_api.h"

#include "common.h"
#include "stats.h"

#include <stdint.h>

/* ---- Communicators (nccl_comm.c) ------------------------------------------------------- */

/* What the shim knows of a communicator; a copy, read without a lock. */
struct nccl_comm_info {
    int rank;
    int ranks;
    int blocking; /* 0: config.blocking = 0 (calls may return ncclInProgress) */
    int device;   /* ncclCommCuDevice: where the shim's work for it runs (cuda.h), or
                     REPROD_CUDA_CURRENT_DEVICE when not known */
};

/* Fill *info for `comm`: from the table when the shim saw it made, else from the real library
 * (and remember it). Returns 0, or -1 when the library does not know it either (an invalid or
 * not yet ready communicator: the call goes to the library, which reports it). */
int nccl_comm_lookup(ncclComm_t comm, struct nccl_comm_info *info);

/* Remember a communicator the real library made (rank and size -1 when not known yet: a
 * nonblocking init still in progress), and learn the rank for seeding from it. `device`: its
 * device as the init call tells it (the one current then), for a library without
 * ncclCommCuDevice. */
void nccl_comm_remember(ncclComm_t comm, int rank, int ranks, int blocking, int device);

/* Forget a communicator and its PreMulSum ops (destroy, abort). */
void nccl_comm_forget(ncclComm_t comm);

/* A hook whose real NCCL function the process lacks: log it once (by name) and return `code`,
 * never a call through NULL. */
ncclResult_t nccl_missing(const char *name, ncclResult_t code);

/* Why the deterministic path cannot run in this process (the loaded NCCL lacks a function it
 * issues, or CUDA is missing or lacks one), for the pass-through's log line; NULL when it can. */
const char *nccl_unsupported_reason(void);

/* A PreMulSum op as the shim saw it made, copied at each call (PyTorch destroys the op as soon
 * as the call returns, before ncclGroupEnd). */
struct nccl_premul {
    ncclDataType_t datatype;
    int residence;        /* ncclScalarHostImmediate or ncclScalarDevice */
    uint64_t scalar_bits; /* host-immediate: the scalar's bits, read at creation */
    const void *scalar_device;
};

/* Look up PreMulSum `op` of `comm`; returns 0 and fills *premul, or -1 when unknown. */
int nccl_premul_lookup(ncclComm_t comm, ncclRedOp_t op, struct nccl_premul *premul);

/* ---- One deterministic reduction (nccl_path.c) --------------------------------------------- */

enum nccl_collective {
    NCCL_ALL_REDUCE = 0,
    NCCL_REDUCE_SCATTER,
    NCCL_REDUCE,
    /* Calls the shim never changes, deferred only to keep a group's order (nccl_calls.c). */
    NCCL_ALL_GATHER,
    NCCL_BROADCAST,
    NCCL_SEND,
    NCCL_RECV,
    NCCL_GATHER,
    NCCL_SCATTER,
    NCCL_ALL_TO_ALL,
};

/* One call's arguments as the application made it. */
struct nccl_call {
    const char *api;
    enum nccl_collective collective;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t datatype;
    ncclRedOp_t op; /* the reductions */
    int root;       /* Reduce, Broadcast, Gather, Scatter: the root; Send, Recv: the peer */
    ncclComm_t comm;
    cudaStream_t stream;
};

/* Hand `call` to the real library as it was made. */
ncclResult_t nccl_call_issue(const struct nccl_call *call);

/* A call the shim makes deterministic: everything it needs, taken when it is made. */
struct nccl_work {
    int passthrough;       /* 1: `call` goes to the library unchanged, in its turn */
    int turn;              /* takes a step in the current round */
    struct nccl_call call; /* passthrough: the call; traced when trace_reason is set */
    const char *trace_reason;
    enum nccl_collective collective;
    const char *api;
    const void *send;
    void *recv;
    size_t count; /* AllReduce, Reduce: elements; ReduceScatter: recvcount */
    ncclDataType_t datatype;
    int root; /* Reduce */
    ncclComm_t comm;
    struct nccl_comm_info info;
    cudaStream_t stream;
    struct reprod_device_reduction arithmetic; /* type, op, rounding, ordered, premul */
    enum reprod_path path;
    /* Progress, set by nccl_work_start and advanced by the rounds. */
    size_t element_bytes;
    size_t piece_elements; /* elements of the vector (of one rank's block) per piece */
    size_t offset;         /* where the current piece starts */
    int small;             /* one all-gather (or gather to the root) of whole pieces */
    int phase;             /* 0: exchange and reduce; 1: share the reduced chunks */
    int done;
    void *scratch;
    size_t scratch_bytes;
    ncclResult_t result;
    uint64_t started_ns;
    uint64_t input_hash; /* REPROD_TRACE */
    int has_input_hash;
    struct nccl_work *next;
};

/* Prepare `work` (its call fields set) to run: choose pieces and paths, get its scratch.
 * Returns ncclSuccess or the error to give the caller (then nothing was enqueued). */
ncclResult_t nccl_work_start(struct nccl_work *work);

/* Issue this round's communication of `work` (inside the caller's real group). */
ncclResult_t nccl_work_communicate(struct nccl_work *work);

/* After the round's group ended: the local arithmetic of the round, and move on. Sets
 * work->done after the last round (scratch released, stats and trace written). */
void nccl_work_advance(struct nccl_work *work);

/* ---- Groups (nccl_group.c) ---------------------------------------------------------------- */

/* Run `work` now, or at the outermost ncclGroupEnd of this thread when a group is open (the
 * work is copied). Returns what the caller gets: ncclSuccess when deferred. */
ncclResult_t nccl_group_submit(const struct nccl_work *work);

/* 1 when this thread is inside ncclGroupStart .. ncclGroupEnd. */
int nccl_group_open(void);

/* 1 when this thread's open group holds deferred reductions: a later call of the group must
 * be deferred too (nccl_group_defer), so that each communicator sees the group's calls in the
 * order they were made. */
int nccl_group_defers(void);

/* Defer `call`, unchanged, to its turn at the outermost ncclGroupEnd (traced then, with
 * `trace_reason`, when that is not NULL). Returns ncclSuccess, or ncclSystemError when out of
 * memory (then the call was issued at once). */
ncclResult_t nccl_group_defer(const struct nccl_call *call, const char *trace_reason);

/* Trace a reduction passed through (REPROD_TRACE): its output is hashed after the outermost
 * group end, or at once outside a group. */
void nccl_trace_call(const struct nccl_call *call, const char *reason);

/* Wait until a nonblocking communicator has finished what was issued on it; the result. */
ncclResult_t nccl_wait_comm(ncclComm_t comm);

/* Hash `bytes` of device memory at `device` after everything enqueued on `stream` so far
 * (the stream is synchronised: tracing may be slow). 0 with *hash set, -1 when it cannot. */
int nccl_hash_device(const void *device, size_t bytes, cudaStream_t stream, uint64_t *hash);

#endif /* REPROD_NCCL_INTERNAL_H */
