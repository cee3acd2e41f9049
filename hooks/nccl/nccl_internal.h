/* nccl_internal.h: what the NCCL hook files share: the communicators and PreMulSum ops the shim
 * knows (nccl_comm.c), one deterministic reduction and its data path (nccl_path.c: the
 * exchange; nccl_fixed.c: the fixed-point routes on NCCL's own integer collectives), the calls
 * checked as NCCL checks them (nccl_calls.c), the per-thread group that defers them
 * (nccl_group.c) and the rounds that run them (nccl_rounds.c).
 */
#ifndef REPROD_NCCL_INTERNAL_H
#define REPROD_NCCL_INTERNAL_H

#include "nccl/nccl_api.h"

#include "common.h"
#include "runtime/route.h"
#include "runtime/stats.h"

#include <stdint.h>

/* ---- Communicators (nccl_comm.c) ------------------------------------------------------- */

/* What the shim knows of a communicator; a copy, read without a lock. */
struct nccl_comm_info {
    int rank;
    int ranks;
    int blocking;    /* 0: config.blocking = 0 (calls may return ncclInProgress) */
    int device;      /* ncclCommCuDevice: where the shim's work for it runs (cuda.h), or
                        REPROD_CUDA_CURRENT_DEVICE when not known */
    uint64_t serial; /* which making of the communicator (a handle may be reused after free) */
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

/* Forget a communicator and its PreMulSum ops (destroy, abort), and drop the shim's work
 * still pending on it (nccl_rounds_comm_gone): from then on the shim never touches it. */
void nccl_comm_forget(ncclComm_t comm);

/* A hook whose real NCCL function the process lacks: log it once (by name) and return `code`,
 * never a call through NULL. */
ncclResult_t nccl_missing(const char *name, ncclResult_t code);

/* Why the deterministic path cannot run in this process (the loaded NCCL lacks a function it
 * issues, or CUDA is missing or lacks one), for the pass-through's log line; NULL when it can. */
const char *nccl_unsupported_reason(void);

/* 1 while the communicator that nccl_comm_lookup described with `serial` is still known (not
 * destroyed or aborted since); never asks the library. */
int nccl_comm_current(ncclComm_t comm, uint64_t serial);

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

/* Whether the library would refuse `call` at once, as NCCL checks a call before it enqueues
 * anything (ncclEnqueueCheck: the communicator, that it is ready, the root or peer, the type,
 * the op, the buffers, then the stream for a non-empty call). 0 with *info filled when it looks
 * valid; -1 when it does not: then the call goes to the library at once, which answers with its
 * own code (and fails its group). */
int nccl_call_check(const struct nccl_call *call, struct nccl_comm_info *info);

/* Answer `rc` for a call of this thread: an error inside a group fails the group (NCCL's
 * ncclGroupErrCheck): its outermost ncclGroupEnd drops every call of it and returns the error.
 * Returns rc. */
ncclResult_t nccl_group_note_result(ncclResult_t rc);

/* Refuse a call with `rc` where the library itself would accept it (the shim's own refusals):
 * inside a group the library's group is failed too, so that it drops the group's calls. */
ncclResult_t nccl_group_refuse(ncclResult_t rc, cudaStream_t stream);

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
    enum reprod_route route; /* how the sum moves (nccl_fixed.c for the fixed routes) */
    int full_words;          /* fixed routes: words an element over the type's whole range */
    int stride;              /* two-pass: words an element in the current piece (read back) */
    int narrow_probe;        /* two-pass: round 1 asks whether int32 words take fewer bytes */
    int narrow;              /* two-pass: the current piece's words are int32 (read back) */
    size_t words_bytes;      /* two-pass in sub-pieces: the scratch for a sub-piece's words */
    size_t sub_offset;       /* two-pass in sub-pieces: where the current one starts in the piece
                                (per-element layout: in its words) */
    int per_element;         /* two-pass: each element takes its own words (AllReduce, Reduce) */
    uint64_t word_total;     /* per-element layout: the current piece's words (read back) */
    int sub;                 /* per-element layout: the current sub-piece's index */
    struct nccl_readback *readback; /* two-pass: that number on its way back, or NULL */
    /* Pieces, chosen when the call is made (nccl_work_prepare). */
    size_t element_bytes;
    size_t piece_elements; /* elements of the vector (of one rank's block) per piece */
    int small;             /* one all-gather (or gather to the root) of whole pieces */
    /* Progress, from its first turn (nccl_work_start) through the rounds. */
    int started;   /* its scratch is held (from its first turn to its last) */
    size_t offset; /* where the current piece starts */
    int phase;     /* 0: exchange and reduce; 1: share the reduced chunks */
    int done;
    void *scratch;
    size_t scratch_bytes;
    ncclResult_t result;      /* the library's: its communicator gets nothing more */
    ncclResult_t local_error; /* the arithmetic's: the rounds go on (the other ranks are in
                                 them), and the call returns it */
    uint64_t started_ns;
    uint64_t input_hash; /* REPROD_TRACE */
    int has_input_hash;
    struct nccl_work *next;
};

/* Choose `work`'s path and pieces (its call fields set), the same on every rank from the
 * arguments and settings: ncclSuccess, or ncclInvalidUsage when REPROD_SCRATCH_MB is too small
 * for the call (logged). */
ncclResult_t nccl_work_prepare(struct nccl_work *work);

/* At its first turn: take its scratch, and hash its input in stream order (REPROD_TRACE).
 * Returns ncclSuccess or the error (then nothing was enqueued). */
ncclResult_t nccl_work_start(struct nccl_work *work);

/* Issue this round's communication of `work` (inside the caller's real group). */
ncclResult_t nccl_work_communicate(struct nccl_work *work);

/* After the round's group was launched: the local arithmetic of the round, and move on. Sets
 * work->done after the last round (scratch released, stats and trace written). */
void nccl_work_advance(struct nccl_work *work);

/* End `work` without running the rest of it (its communicator failed or is gone): the scratch
 * back to the pool in stream order, work->done set, work->result `rc` unless already an error. */
void nccl_work_drop(struct nccl_work *work, ncclResult_t rc);

/* The call is complete on the stream: scratch back to the pool, stats and trace. */
void nccl_work_finish(struct nccl_work *work);

/* ---- The fixed-point routes (nccl_fixed.c) -------------------------------------------------- */

/* Choose `work`'s route (reprod_route_choose) and, for a fixed one, its pieces (the exchange
 * where REPROD_SCRATCH_MB cannot hold a piece of the fixed route). Returns 0. */
int nccl_fixed_prepare(struct nccl_work *work);
size_t nccl_fixed_scratch_bytes(const struct nccl_work *work);
ncclResult_t nccl_fixed_communicate(struct nccl_work *work);
void nccl_fixed_advance(struct nccl_work *work);
/* 1 while the work waits for its layout from the device (it takes no turn meanwhile). */
int nccl_fixed_waiting(struct nccl_work *work);
/* Let go of what the work holds that the device may still write (its readback). */
void nccl_fixed_drop(struct nccl_work *work);

/* ---- Groups (nccl_group.c) ---------------------------------------------------------------- */

/* Run `work` now, or at the outermost ncclGroupEnd of this thread when a group is open (the
 * work is copied). Returns what the caller gets: ncclSuccess when deferred; ncclInProgress
 * when its communicator is nonblocking and the work goes on (nccl_rounds.c). */
ncclResult_t nccl_group_submit(const struct nccl_work *work);

/* 1 when this thread is inside ncclGroupStart .. ncclGroupEnd. */
int nccl_group_open(void);

/* 1 when this thread's open group holds deferred reductions: a later call of the group must
 * be deferred too (nccl_group_defer), so that each communicator sees the group's calls in the
 * order they were made. */
int nccl_group_defers(void);

/* Defer `call` (checked valid, its communicator described by `info`), unchanged, to its turn
 * at the outermost ncclGroupEnd (traced then, with `trace_reason`, when that is not NULL).
 * Returns ncclSuccess, or ncclSystemError when out of memory (then nothing was deferred). */
ncclResult_t nccl_group_defer(const struct nccl_call *call, const struct nccl_comm_info *info,
                              const char *trace_reason);

/* Free a list of works (their scratch already given back). */
void nccl_works_free(struct nccl_work *works);

/* Trace a reduction passed through (REPROD_TRACE): its output is hashed after the outermost
 * group end, or at once outside a group. */
void nccl_trace_call(const struct nccl_call *call, const char *reason);

/* Hash `bytes` of device memory at `buffer` after everything enqueued on `stream` so far (the
 * stream is synchronised: tracing may be slow), in `device`'s context for a default stream (the
 * communicator's: struct nccl_comm_info). 0 with *hash set, -1 when it cannot. */
int nccl_hash_device(const void *buffer, size_t bytes, cudaStream_t stream, int device,
                     uint64_t *hash);

/* ---- Rounds (nccl_rounds.c) --------------------------------------------------------------- */

/* Run the list `works` (taken over: freed here) in rounds, one real group per round. On
 * blocking communicators to the end, and the first error; on nonblocking ones as far as they
 * are ready, the rest as the application polls ncclCommGetAsyncError: ncclInProgress. */
ncclResult_t nccl_rounds_run(struct nccl_work *works);

/* 1 when shim work not yet issued holds `comm` (nonblocking): a call on it now is refused as
 * NCCL refuses a call on a communicator not ready (ncclInvalidArgument). */
int nccl_rounds_hold(ncclComm_t comm);

/* `comm` is being destroyed or aborted: drop the shim's work pending on it. */
void nccl_rounds_comm_gone(ncclComm_t comm);

#endif /* REPROD_NCCL_INTERNAL_H */
