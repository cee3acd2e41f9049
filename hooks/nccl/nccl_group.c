/* nccl_group.c: ncclGroupStart / ncclGroupEnd: which calls the shim defers, and a group's
 * errors.
 *
 * Group depth is per thread, as in NCCL. A deterministic call made inside a group is copied
 * into this thread's list and runs at the outermost ncclGroupEnd, after the real group (the
 * application's other grouped calls, passed through, inside it) has been launched: on every
 * rank in the same order, since every rank takes the same decisions. Once a group holds a
 * deferred call, the group's later valid calls (passed-through reductions, AllGather,
 * Broadcast, Send, Recv, ...) are deferred too, so that each communicator sees the group's
 * calls in the order they were made; the list then runs in rounds (nccl_rounds.c).
 *
 * Errors as NCCL has them (ncclGroupErrCheck): a call that fails NCCL's checks is never
 * deferred; it goes to the library at once, which returns its code, and the group fails: the
 * outermost ncclGroupEnd drops every call of it, the deferred ones included, and returns the
 * error. Where the shim itself refuses a call, it fails the library's group too.
 */
#include "nccl/nccl_internal.h"

#include "interpose/guard.h"
#include "runtime/log.h"
#include "runtime/trace.h"

#include <stdlib.h>
#include <string.h>

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
    int device; /* the communicator's (nccl_comm_info) */
    struct traced_pass *next;
};

static _Thread_local int group_depth;
static _Thread_local ncclResult_t group_error; /* the last error of a call of the open group */
static _Thread_local struct nccl_work *deferred_head, *deferred_tail;
static _Thread_local struct traced_pass *passes_head, *passes_tail;

int nccl_group_open(void)
{
    return group_depth > 0;
}

ncclResult_t nccl_group_note_result(ncclResult_t rc)
{
    if (group_depth > 0 && rc != ncclSuccess && rc != ncclInProgress) group_error = rc;
    return rc;
}

ncclResult_t nccl_group_refuse(ncclResult_t rc, cudaStream_t stream)
{
    const struct nccl_real *real = nccl_real();
    /* A call without a communicator fails NCCL's CommCheck, which fails its open group. */
    if (group_depth > 0 && real->AllReduce)
        (void)real->AllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, NULL, stream);
    return nccl_group_note_result(rc);
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
        if (p->output &&
            nccl_hash_device(p->output, p->output_bytes, p->stream, p->device, &record.output_hash) == 0)
            record.has_output = 1;
        reprod_trace_write(&record);
        struct traced_pass *next = p->next;
        free(p);
        p = next;
    }
}

static void drop_passes(void)
{
    while (passes_head) {
        struct traced_pass *next = passes_head->next;
        free(passes_head);
        passes_head = next;
    }
    passes_tail = NULL;
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
    p->device = info.device;
    if (passes_tail)
        passes_tail->next = p;
    else
        passes_head = p;
    passes_tail = p;
    if (!group_depth) trace_passes();
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

ncclResult_t nccl_group_defer(const struct nccl_call *call, const struct nccl_comm_info *info,
                              const char *trace_reason)
{
    struct nccl_work work;
    memset(&work, 0, sizeof work);
    work.passthrough = 1;
    work.call = *call;
    work.trace_reason = trace_reason;
    work.collective = call->collective;
    work.api = call->api;
    work.comm = call->comm;
    work.info = *info;
    work.stream = call->stream;
    return defer_work(&work);
}

ncclResult_t nccl_group_submit(const struct nccl_work *work)
{
    if (group_depth > 0) return nccl_group_note_result(defer_work(work));
    struct nccl_work *copy = malloc(sizeof *copy);
    if (!copy) return ncclSystemError;
    *copy = *work;
    copy->next = NULL;
    ncclResult_t rc = nccl_rounds_run(copy);
    if (passes_head) trace_passes();
    return rc;
}

void nccl_works_free(struct nccl_work *works)
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

/* 1 when the list holds only calls the shim passes through (a group's Send and Recv, deferred
 * from its start, and the calls after them). */
static int all_passed_through(const struct nccl_work *works)
{
    for (const struct nccl_work *w = works; w; w = w->next)
        if (!w->passthrough) return 0;
    return 1;
}

/* The outermost end of a group that holds no shimmed call: its deferred calls go to NCCL's
 * group still open, in the order they were made, as if never deferred. */
static void issue_into_open_group(void)
{
    struct nccl_work *works = deferred_head;
    deferred_head = deferred_tail = NULL;
    for (struct nccl_work *w = works; w; w = w->next) {
        nccl_group_note_result(nccl_call_issue(&w->call));
        if (w->trace_reason) nccl_trace_call(&w->call, w->trace_reason); /* hashed at the end */
    }
    nccl_works_free(works);
}

/* The outermost end launches the real group first, then this thread's deferred calls. A
 * failed group (a call's error, or the library's at its end) runs none of them: the error. */
REPROD_EXPORT ncclResult_t ncclGroupEnd(void)
{
    const struct nccl_real *real = nccl_real();
    if (!real->GroupEnd) return nccl_missing("ncclGroupEnd", ncclSystemError);
    if (reprod_guard_active() || group_depth == 0) return real->GroupEnd();
    if (group_depth == 1 && deferred_head && group_error == ncclSuccess &&
        all_passed_through(deferred_head))
        issue_into_open_group();
    ncclResult_t rc = real->GroupEnd();
    if (--group_depth > 0) return rc;
    struct nccl_work *works = deferred_head;
    ncclResult_t failed = group_error;
    deferred_head = deferred_tail = NULL;
    group_error = ncclSuccess;
    if (failed == ncclSuccess && rc != ncclSuccess && rc != ncclInProgress) failed = rc;
    if (failed != ncclSuccess) { /* nothing of the group runs (no scratch was taken yet) */
        nccl_works_free(works);
        drop_passes();
        return failed;
    }
    if (works) {
        ncclResult_t ours = nccl_rounds_run(works);
        if (ours != ncclSuccess) rc = ours; /* its error, or ncclInProgress */
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
    nccl_works_free(deferred_head);
    deferred_head = deferred_tail = NULL;
    group_error = ncclSuccess;
    drop_passes();
    return rc;
}
