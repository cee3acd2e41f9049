/* nccl_group.c: ncclGroupStart / ncclGroupEnd, and when the shim's reductions run.
 *
 * Group depth is per thread, as in NCCL. A deterministic call made inside a group is copied
 * into this thread's list and runs at the outermost ncclGroupEnd, after the real group (the
 * application's other grouped calls, passed through, inside it) has been launched: on every
 * rank in the same order, since every rank takes the same decisions. Once a group holds a
 * deferred call, the group's later calls (passed-through reductions, AllGather, Broadcast,
 * Send, Recv, ...) are deferred too, so that each communicator sees the group's calls in the
 * order they were made. The listed calls run in rounds, one real group per round: in each, the
 * earliest unfinished call of each communicator takes its next step (so a communicator's calls
 * run as they would ungrouped, whatever another rank grouped), and the communicators go in
 * lockstep, so that a thread driving several GPUs' ranks never waits on a rank it has not
 * launched yet.
 */
#include "nccl_internal.h"

#include "guard.h"
#include "log.h"
#include "trace.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A pass-through call whose output is hashed at the outermost group end (REPROD_TRACE). */
struct traced_pass {
    const char *api;
    const char *reason;
    ncclDataType_t datatype;
    size_t count;
    int ranks;
    const void *output;
    size_t output_bytes;
    cudaStream_t stream;
    struct traced_pass *next;
};

static _Thread_local int group_depth;
static _Thread_local struct nccl_work *deferred_head, *deferred_tail;
static _Thread_local struct traced_pass *passes_head, *passes_tail;

int nccl_group_open(void)
{
    return group_depth > 0;
}

ncclResult_t nccl_wait_comm(ncclComm_t comm)
{
    const struct nccl_real *real = nccl_real();
    ncclResult_t state = ncclSuccess;
    if (!real->CommGetAsyncError) return ncclSuccess;
    while (real->CommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress)
        sched_yield();
    return state;
}

/* After a real group end that answered `rc`: wait for the nonblocking communicators of the
 * works still running, so that the next round may be issued on them. */
static ncclResult_t settle(struct nccl_work *works, ncclResult_t rc)
{
    if (rc != ncclInProgress) return rc;
    ncclResult_t worst = ncclSuccess;
    for (struct nccl_work *w = works; w; w = w->next) {
        if (w->done) continue; /* a blocking communicator answers at once */
        ncclResult_t state = nccl_wait_comm(w->comm);
        if (state != ncclSuccess) worst = state;
    }
    return worst;
}

static _Thread_local int running_works; /* inside run_works: traces wait for the end */

/* 1 when `w` is the earliest unfinished work of its communicator in the list. */
static int has_turn(const struct nccl_work *works, const struct nccl_work *w)
{
    for (const struct nccl_work *v = works; v != w; v = v->next)
        if (!v->done && v->comm == w->comm) return 0;
    return 1;
}

/* Run every work of the list to the end; the first error, or ncclSuccess. */
static ncclResult_t run_works(struct nccl_work *works)
{
    const struct nccl_real *real = nccl_real();
    ncclResult_t first_error = ncclSuccess;
    running_works = 1;
    for (struct nccl_work *w = works; w; w = w->next) {
        ncclResult_t rc = w->passthrough ? ncclSuccess : nccl_work_start(w);
        if (rc != ncclSuccess) {
            /* The other ranks are already in this call: as on the MPI path, the job stops here
             * rather than leave them waiting (aborting the application's communicator under
             * its feet would make its next call on it a use after free). */
            reprod_log(REPROD_LOG_ERROR,
                       "error: %s could not start on this rank (%s); the other ranks are already "
                       "in this call, so the job stops here rather than hang",
                       w->api, rc == ncclUnhandledCudaError ? "no device memory for its scratch"
                                                             : "REPROD_SCRATCH_MB too small");
            _exit(2);
        }
    }
    for (;;) {
        int active = 0;
        for (struct nccl_work *w = works; w; w = w->next)
            w->turn = !w->done && has_turn(works, w), active += w->turn;
        if (!active) break;
        ncclResult_t rc = real->GroupStart();
        for (struct nccl_work *w = works; w; w = w->next) {
            if (!w->turn) continue;
            ncclResult_t call = w->passthrough ? nccl_call_issue(&w->call) : nccl_work_communicate(w);
            if (call != ncclSuccess && call != ncclInProgress && w->result == ncclSuccess)
                w->result = call;
        }
        if (rc == ncclSuccess) rc = settle(works, real->GroupEnd());
        for (struct nccl_work *w = works; w; w = w->next) {
            if (!w->turn) continue;
            if (rc != ncclSuccess && w->result == ncclSuccess) w->result = rc;
            if (!w->passthrough) {
                nccl_work_advance(w);
                continue;
            }
            w->done = 1;
            if (w->trace_reason && w->result == ncclSuccess) nccl_trace_call(&w->call, w->trace_reason);
        }
    }
    running_works = 0;
    for (struct nccl_work *w = works; w; w = w->next)
        if (w->result != ncclSuccess && first_error == ncclSuccess) first_error = w->result;
    return first_error;
}

/* Hash the outputs of this thread's traced pass-through calls, and write their lines. */
static void trace_passes(void)
{
    struct traced_pass *p = passes_head;
    passes_head = passes_tail = NULL;
    while (p) {
        struct reprod_trace_record record = {
            .sequence = reprod_trace_sequence(),
            .api = p->api,
            .action = "pass",
            .detail = p->reason,
            .count = (long long)p->count,
            .ranks = p->ranks,
        };
        if (p->output && nccl_hash_device(p->output, p->output_bytes, p->stream,
                                          &record.output_hash) == 0)
            record.has_output = 1;
        reprod_trace_write(&record);
        struct traced_pass *next = p->next;
        free(p);
        p = next;
    }
}

void nccl_trace_call(const struct nccl_call *c, const char *reason)
{
    struct nccl_comm_info info;
    if (nccl_comm_lookup(c->comm, &info) != 0) return;
    struct traced_pass *p = calloc(1, sizeof *p);
    if (!p) return;
    int receives = c->collective != NCCL_REDUCE || c->root == info.rank;
    p->api = c->api, p->reason = reason, p->datatype = c->datatype;
    p->count = c->collective == NCCL_REDUCE_SCATTER ? c->count * (size_t)info.ranks : c->count;
    p->ranks = info.ranks;
    p->output = receives ? c->recv : NULL;
    p->output_bytes = receives ? c->count * nccl_type_bytes(c->datatype) : 0;
    p->stream = c->stream;
    if (passes_tail)
        passes_tail->next = p;
    else
        passes_head = p;
    passes_tail = p;
    if (!group_depth && !running_works) trace_passes();
}

int nccl_group_defers(void)
{
    return group_depth > 0 && deferred_head != NULL && !reprod_guard_active();
}

/* Append a copy of `work` to this thread's deferred list. */
static ncclResult_t defer_work(const struct nccl_work *work)
{
    struct nccl_work *copy = malloc(sizeof *copy);
    if (!copy) return ncclSystemError;
    *copy = *work;
    copy->next = NULL;
    if (deferred_tail)
        deferred_tail->next = copy;
    else
        deferred_head = copy;
    deferred_tail = copy;
    return ncclSuccess;
}

ncclResult_t nccl_group_defer(const struct nccl_call *call, const char *trace_reason)
{
    struct nccl_work work;
    memset(&work, 0, sizeof work);
    work.passthrough = 1;
    work.call = *call;
    work.trace_reason = trace_reason;
    work.api = call->api;
    work.comm = call->comm;
    work.stream = call->stream;
    return defer_work(&work);
}

ncclResult_t nccl_group_submit(const struct nccl_work *work)
{
    if (group_depth > 0) return defer_work(work);
    struct nccl_work copy = *work;
    copy.next = NULL;
    return run_works(&copy);
}

static void free_works(struct nccl_work *works)
{
    while (works) {
        struct nccl_work *next = works->next;
        free(works);
        works = next;
    }
}

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclGroupSimulateEnd(void *sim_info);

REPROD_EXPORT ncclResult_t ncclGroupStart(void)
{
    const struct nccl_real *real = nccl_real();
    if (!real->GroupStart) return nccl_missing("ncclGroupStart", ncclSystemError);
    ncclResult_t rc = real->GroupStart();
    if (rc == ncclSuccess && !reprod_guard_active()) group_depth++;
    return rc;
}

/* The outermost end launches the real group first, then this thread's deferred reductions;
 * an error of either is returned (the first one). */
REPROD_EXPORT ncclResult_t ncclGroupEnd(void)
{
    const struct nccl_real *real = nccl_real();
    if (!real->GroupEnd) return nccl_missing("ncclGroupEnd", ncclSystemError);
    if (reprod_guard_active() || group_depth == 0) return real->GroupEnd();
    ncclResult_t rc = real->GroupEnd();
    if (--group_depth > 0) return rc;
    struct nccl_work *works = deferred_head;
    deferred_head = deferred_tail = NULL;
    if (works) {
        ncclResult_t settled = settle(works, rc); /* an asynchronous error of the group's own */
        if (rc == ncclInProgress && settled != ncclSuccess) rc = settled;
        ncclResult_t ours = run_works(works);
        if (rc == ncclSuccess || rc == ncclInProgress) rc = ours == ncclSuccess ? rc : ours;
        free_works(works);
    }
    if (passes_head) trace_passes();
    return rc;
}

/* A simulated end (NCCL 2.24) closes the group without launching anything: the calls deferred
 * in it are dropped, as NCCL drops the group's own. */
REPROD_EXPORT ncclResult_t ncclGroupSimulateEnd(void *sim_info)
{
    const struct nccl_real *real = nccl_real();
    if (!real->GroupSimulateEnd) return nccl_missing("ncclGroupSimulateEnd", ncclInvalidUsage);
    ncclResult_t rc = real->GroupSimulateEnd(sim_info);
    if (reprod_guard_active() || group_depth == 0 || --group_depth > 0) return rc;
    free_works(deferred_head);
    deferred_head = deferred_tail = NULL;
    while (passes_head) {
        struct traced_pass *next = passes_head->next;
        free(passes_head);
        passes_head = next;
    }
    passes_tail = NULL;
    return rc;
}
