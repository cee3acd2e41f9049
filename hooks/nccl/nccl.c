/* nccl.c: ncclAllReduce, ncclReduceScatter and ncclReduce.
 *
 * Each hook decides, from the arguments and the settings alone (so that every rank decides
 * the same), whether the call goes to the real library untouched or takes the deterministic
 * path of nccl_path.c: float sums and averages (exact, or the rank-order fold under
 * REPROD_MODE=ordered), PreMulSum sums, and products (the rank-order fold in every mode).
 * Integer types, max and min, empty calls and one-rank communicators go to the library; so do
 * erroneous arguments (NCCL's own checks, nccl_call_check: a bad communicator, type, op, root,
 * buffer or stream, a nonblocking communicator not ready), at once, inside a group too: the
 * library reports them with its own error code and fails the group.
 */
#include "nccl/nccl_internal.h"

#include "runtime/config.h"
#include "interpose/guard.h"
#include "runtime/log.h"
#include "runtime/policy.h"
#include "runtime/trace.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The operation class of `op` on `comm`, with its PreMulSum state; -1 for an op that is not
 * valid (unknown, destroyed, or made for another type): the library reports it. */
static int classify_op(ncclRedOp_t op, ncclComm_t comm, ncclDataType_t datatype,
                       enum reprod_op_class *op_class, struct nccl_premul *premul)
{
    premul->residence = -1;
    switch (op) {
    case ncclSum: *op_class = REPROD_OPCLASS_SUM; return 0;
    case ncclAvg: *op_class = REPROD_OPCLASS_AVG; return 0;
    case ncclProd: *op_class = REPROD_OPCLASS_PROD; return 0;
    case ncclMax:
    case ncclMin: *op_class = REPROD_OPCLASS_DETERMINISTIC; return 0;
    default: break;
    }
    if (op < ncclNumOps || nccl_premul_lookup(comm, op, premul) != 0 ||
        premul->datatype != datatype)
        return -1;
    *op_class = REPROD_OPCLASS_SUM;
    return 0;
}

/* Decide; on REPROD_ACTION_PASS *reason says why, else *work is ready to submit. */
static enum reprod_action decide(const struct nccl_call *c, struct nccl_work *work,
                                 enum reprod_reason *reason, struct nccl_comm_info *info)
{
    enum reprod_op_class op_class;
    struct nccl_premul premul;
    info->ranks = 0;
    if (reprod_config()->mode == REPROD_MODE_OFF) return *reason = REPROD_PASS_MODE_OFF, 0;
    if (!nccl_type_bytes(c->datatype) || classify_op(c->op, c->comm, c->datatype, &op_class,
                                                     &premul) != 0)
        return *reason = REPROD_PASS_BAD_ARGUMENT, 0;
    if (op_class == REPROD_OPCLASS_DETERMINISTIC)
        return *reason = REPROD_PASS_DETERMINISTIC_OP, 0;
    int type = nccl_engine_type(c->datatype);
    if (type < 0 && c->datatype != ncclFloat8e4m3 && c->datatype != ncclFloat8e5m2)
        return *reason = REPROD_PASS_NON_FLOAT, 0;
    if (c->count == 0) return *reason = REPROD_PASS_EMPTY, 0;
    if (c->count > (SIZE_MAX >> 8) / nccl_type_bytes(c->datatype)) /* beyond any memory */
        return *reason = REPROD_PASS_BAD_ARGUMENT, 0;
    if (nccl_call_check(c, info) != 0) return *reason = REPROD_PASS_BAD_ARGUMENT, 0;
    if (info->ranks == 1) return *reason = REPROD_PASS_ONE_RANK, 0;
    if (type < 0) return *reason = REPROD_PASS_UNSUPPORTED, 0; /* FP8 */
    if (nccl_unsupported_reason()) return *reason = REPROD_PASS_UNSUPPORTED, 0;
    struct reprod_decision decision;
    reprod_decide(op_class, REPROD_ELEMENT_ENGINE_FLOAT, &decision);
    if (decision.action == REPROD_ACTION_PASS) return *reason = decision.reason, 0;
    memset(work, 0, sizeof *work);
    work->collective = c->collective;
    work->api = c->api;
    work->send = c->send, work->recv = c->recv, work->count = c->count;
    work->datatype = c->datatype, work->root = c->root;
    work->comm = c->comm, work->info = *info, work->stream = c->stream;
    struct reprod_device_reduction *r = &work->arithmetic;
    r->type = (reprod_type)type;
    r->op = op_class == REPROD_OPCLASS_AVG ? REPROD_AVG
                                           : op_class == REPROD_OPCLASS_PROD ? REPROD_PROD
                                                                              : REPROD_SUM;
    r->rounding = reprod_config()->rounding;
    r->ordered = decision.action != REPROD_ACTION_EXACT;
    work->path = r->ordered ? REPROD_PATH_ORDERED : REPROD_PATH_EXACT;
    if (premul.residence == ncclScalarHostImmediate)
        r->premul = REPROD_PREMUL_HOST, r->scalar_bits = premul.scalar_bits;
    else if (premul.residence == ncclScalarDevice)
        r->premul = REPROD_PREMUL_DEVICE, r->scalar_device = premul.scalar_device;
    return decision.action;
}

/* Hand the call to the real library; count, log and trace it. A call the library refuses
 * goes to it at once; a valid one waits for its turn inside a group that defers. */
static ncclResult_t pass(const struct nccl_call *c, enum reprod_reason reason)
{
    const char *detail = NULL;
    if (reason == REPROD_PASS_UNSUPPORTED)
        detail = c->datatype == ncclFloat8e4m3 || c->datatype == ncclFloat8e5m2
                     ? "FP8 sums are not made deterministic yet"
                     : nccl_unsupported_reason();
    if (reprod_pass_through(c->api, reason, detail) != 0) {
        reprod_log(REPROD_LOG_ERROR, "error: REPROD_STRICT=1 stops the job at %s", c->api);
        _exit(2);
    }
    const char *trace_reason = reprod_trace_enabled() ? reprod_reason_name(reason) : NULL;
    /* A custom op may be destroyed as soon as the call returns: such a call is never deferred. */
    struct nccl_comm_info info;
    if (reason != REPROD_PASS_BAD_ARGUMENT && nccl_group_defers() && c->op < ncclNumOps &&
        nccl_call_check(c, &info) == 0 && nccl_group_defer(c, &info, trace_reason) == ncclSuccess)
        return ncclSuccess;
    ncclResult_t rc = nccl_group_note_result(nccl_call_issue(c));
    if (trace_reason && (rc == ncclSuccess || rc == ncclInProgress))
        nccl_trace_call(c, trace_reason);
    return rc;
}

static ncclResult_t reduction(const struct nccl_call *c)
{
    struct nccl_work work;
    struct nccl_comm_info info = {0};
    enum reprod_reason reason = REPROD_PASS_UNSUPPORTED;
    if (reprod_guard_active()) return pass(c, REPROD_PASS_MODE_OFF);
    if (nccl_rounds_hold(c->comm)) /* the shim's work on it is still in progress */
        return nccl_group_refuse(ncclInvalidArgument, c->stream);
    if (decide(c, &work, &reason, &info) == REPROD_ACTION_PASS) return pass(c, reason);
    ncclResult_t prepared = nccl_work_prepare(&work);
    if (prepared != ncclSuccess) return nccl_group_refuse(prepared, c->stream);
    work.started_ns = reprod_stats_clock_ns();
    if (reprod_log_enabled(REPROD_LOG_DEBUG))
        reprod_log(REPROD_LOG_DEBUG, "%s: %zu elements, %d ranks, %s, route %s%s", c->api,
                   c->count, info.ranks, work.arithmetic.ordered ? "ordered" : "exact",
                   reprod_route_name(work.route),
                   nccl_group_open() ? " (at the group's end)" : "");
    return nccl_group_submit(&work);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);

REPROD_EXPORT ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream)
{
    struct nccl_call c = {"ncclAllReduce", NCCL_ALL_REDUCE, sendbuff, recvbuff, count, datatype, op,
                     -1, comm, stream};
    return reduction(&c);
}

REPROD_EXPORT ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                                             size_t recvcount, ncclDataType_t datatype,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    struct nccl_call c = {"ncclReduceScatter", NCCL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount,
                     datatype, op, -1, comm, stream};
    return reduction(&c);
}

REPROD_EXPORT ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclRedOp_t op, int root,
                                      ncclComm_t comm, cudaStream_t stream)
{
    struct nccl_call c = {"ncclReduce", NCCL_REDUCE, sendbuff, recvbuff, count, datatype, op, root,
                     comm, stream};
    return reduction(&c);
}

int nccl_hash_device(const void *buffer, size_t bytes, cudaStream_t stream, int device,
                     uint64_t *hash)
{
    int capturing = 0;
    if (!buffer || !bytes || reprod_cuda_capturing(stream, device, &capturing) != REPROD_CUDA_OK ||
        capturing)
        return -1;
    void *host = malloc(bytes);
    if (!host) return -1;
    int ok = reprod_cuda_copy_async(host, buffer, bytes, stream, device) == REPROD_CUDA_OK &&
             reprod_cuda_stream_sync(stream, device) == REPROD_CUDA_OK;
    if (ok) *hash = reprod_trace_hash(host, bytes);
    free(host);
    return ok ? 0 : -1;
}
