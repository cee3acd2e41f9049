/* nccl_calls.c: the NCCL calls the shim never changes but must keep in order: AllGather,
 * Broadcast, Bcast, Send, Recv, Gather, Scatter and AlltoAll go straight to the library, except
 * inside a group that already holds a deferred reduction, where they wait for their turn
 * (nccl_group.c): NCCL runs a communicator's grouped calls in the order they were made, and a
 * later call may read what a deferred reduction writes. Only a call that passes NCCL's own
 * checks waits: one that NCCL refuses goes to it at once, which answers at once, as natively.
 */
#include "nccl/nccl_internal.h"

#include "interpose/guard.h"

ncclResult_t nccl_call_issue(const struct nccl_call *c)
{
    const struct nccl_real *real = nccl_real();
    switch (c->collective) {
    case NCCL_ALL_REDUCE:
        return real->AllReduce ? real->AllReduce(c->send, c->recv, c->count, c->datatype, c->op,
                                                 c->comm, c->stream)
                               : nccl_missing("ncclAllReduce", ncclSystemError);
    case NCCL_REDUCE_SCATTER:
        return real->ReduceScatter ? real->ReduceScatter(c->send, c->recv, c->count, c->datatype,
                                                         c->op, c->comm, c->stream)
                                   : nccl_missing("ncclReduceScatter", ncclSystemError);
    case NCCL_REDUCE:
        return real->Reduce ? real->Reduce(c->send, c->recv, c->count, c->datatype, c->op, c->root,
                                           c->comm, c->stream)
                            : nccl_missing("ncclReduce", ncclSystemError);
    case NCCL_ALL_GATHER:
        return real->AllGather ? real->AllGather(c->send, c->recv, c->count, c->datatype, c->comm,
                                                 c->stream)
                               : nccl_missing("ncclAllGather", ncclSystemError);
    case NCCL_BROADCAST:
        return real->Broadcast ? real->Broadcast(c->send, c->recv, c->count, c->datatype, c->root,
                                                 c->comm, c->stream)
                               : nccl_missing("ncclBroadcast", ncclSystemError);
    case NCCL_SEND:
        return real->Send ? real->Send(c->send, c->count, c->datatype, c->root, c->comm, c->stream)
                          : nccl_missing("ncclSend", ncclSystemError);
    case NCCL_RECV:
        return real->Recv ? real->Recv(c->recv, c->count, c->datatype, c->root, c->comm, c->stream)
                          : nccl_missing("ncclRecv", ncclSystemError);
    case NCCL_GATHER:
        return real->Gather ? real->Gather(c->send, c->recv, c->count, c->datatype, c->root,
                                           c->comm, c->stream)
                            : nccl_missing("ncclGather", ncclInvalidUsage);
    case NCCL_SCATTER:
        return real->Scatter ? real->Scatter(c->send, c->recv, c->count, c->datatype, c->root,
                                             c->comm, c->stream)
                             : nccl_missing("ncclScatter", ncclInvalidUsage);
    case NCCL_ALL_TO_ALL:
        return real->AlltoAll ? real->AlltoAll(c->send, c->recv, c->count, c->datatype, c->comm,
                                               c->stream)
                              : nccl_missing("ncclAlltoAll", ncclInvalidUsage);
    }
    return ncclInvalidArgument;
}

/* Whether `call` reads `send` (it sends) and writes `recv` on this rank. */
static void buffers_used(const struct nccl_call *c, int rank, int *sends, int *receives)
{
    int root = c->root == rank;
    switch (c->collective) {
    case NCCL_SEND:
        *sends = 1, *receives = 0;
        return;
    case NCCL_RECV:
        *sends = 0, *receives = 1;
        return;
    case NCCL_BROADCAST:
        *sends = root, *receives = 1;
        return;
    case NCCL_REDUCE:
        *sends = 1, *receives = root;
        return;
    case NCCL_GATHER:
        *sends = 1, *receives = root;
        return;
    case NCCL_SCATTER:
        *sends = root, *receives = 1;
        return;
    default:
        *sends = *receives = 1;
        return;
    }
}

/* 1 when `op` is valid for `c`: a built-in op, or a PreMulSum op of its communicator made for
 * its type. */
static int op_valid(const struct nccl_call *c)
{
    struct nccl_premul premul;
    if (c->op >= 0 && c->op < ncclNumOps) return 1;
    return c->op >= ncclNumOps && nccl_premul_lookup(c->comm, c->op, &premul) == 0 &&
           premul.datatype == c->datatype;
}

int nccl_call_check(const struct nccl_call *c, struct nccl_comm_info *info)
{
    const struct nccl_real *real = nccl_real();
    if (nccl_comm_lookup(c->comm, info) != 0) return -1; /* invalid, or not initialised yet */
    if (!info->blocking) {                               /* ncclCommEnsureReady */
        ncclResult_t state = ncclInProgress;
        if (!real->CommGetAsyncError || real->CommGetAsyncError(c->comm, &state) != ncclSuccess ||
            state != ncclSuccess)
            return -1;
    }
    int rooted = c->collective == NCCL_REDUCE || c->collective == NCCL_BROADCAST ||
                 c->collective == NCCL_SEND || c->collective == NCCL_RECV ||
                 c->collective == NCCL_GATHER || c->collective == NCCL_SCATTER;
    if (rooted && (c->root < 0 || c->root >= info->ranks)) return -1;
    if (!nccl_type_bytes(c->datatype)) return -1;
    int reduction = c->collective == NCCL_ALL_REDUCE || c->collective == NCCL_REDUCE_SCATTER ||
                    c->collective == NCCL_REDUCE;
    if (reduction && !op_valid(c)) return -1;
    int sends, receives;
    buffers_used(c, info->rank, &sends, &receives);
    if (c->count && ((sends && !c->send) || (receives && !c->recv))) return -1;
    int p2p = c->collective == NCCL_SEND || c->collective == NCCL_RECV;
    if (!p2p && c->count == 0) return 0; /* discarded before NCCL looks at the stream */
    int capturing; /* NCCL asks CUDA about the stream (cudaStreamGetCaptureInfo) */
    if (reprod_cuda_ready() && reprod_cuda_capturing(c->stream, info->device, &capturing) != REPROD_CUDA_OK)
        return -1;
    return 0;
}

/* Issue `call` now, or defer it to keep the group's order. */
static ncclResult_t in_order(const struct nccl_call *call)
{
    if (reprod_guard_active()) return nccl_call_issue(call);
    if (nccl_rounds_hold(call->comm)) /* the shim's work on it is still in progress */
        return nccl_group_refuse(ncclInvalidArgument, call->stream);
    struct nccl_comm_info info;
    /* A group's Send and Recv are deferred from its start: NCCL runs them together, and a shimmed
     * call later in the group would otherwise split a pair over two real groups. */
    int point_to_point = call->collective == NCCL_SEND || call->collective == NCCL_RECV;
    if ((nccl_group_defers() || (point_to_point && nccl_group_open())) &&
        nccl_call_check(call, &info) == 0 &&
        nccl_group_defer(call, &info, NULL) == ncclSuccess)
        return ncclSuccess;
    return nccl_group_note_result(nccl_call_issue(call));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

REPROD_EXPORT ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                         ncclDataType_t datatype, ncclComm_t comm,
                                         cudaStream_t stream)
{
    struct nccl_call c = {"ncclAllGather", NCCL_ALL_GATHER, sendbuff, recvbuff, sendcount,
                          datatype, 0, -1, comm, stream};
    return in_order(&c);
}

REPROD_EXPORT ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream)
{
    struct nccl_call c = {"ncclBroadcast", NCCL_BROADCAST, sendbuff, recvbuff, count, datatype, 0,
                          root, comm, stream};
    return in_order(&c);
}

/* ncclBcast is the in-place ncclBroadcast. */
REPROD_EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                                     ncclComm_t comm, cudaStream_t stream)
{
    struct nccl_call c = {"ncclBcast", NCCL_BROADCAST, buff, buff, count, datatype, 0, root, comm,
                          stream};
    return in_order(&c);
}

REPROD_EXPORT ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                    int peer, ncclComm_t comm, cudaStream_t stream)
{
    struct nccl_call c = {"ncclSend", NCCL_SEND, sendbuff, NULL, count, datatype, 0, peer, comm,
                          stream};
    return in_order(&c);
}

REPROD_EXPORT ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                                    int peer, ncclComm_t comm, cudaStream_t stream)
{
    struct nccl_call c = {"ncclRecv", NCCL_RECV, NULL, recvbuff, count, datatype, 0, peer, comm,
                          stream};
    return in_order(&c);
}

REPROD_EXPORT ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                      ncclDataType_t datatype, int root, ncclComm_t comm,
                                      cudaStream_t stream)
{
    struct nccl_call c = {"ncclGather", NCCL_GATHER, sendbuff, recvbuff, count, datatype, 0, root,
                          comm, stream};
    return in_order(&c);
}

REPROD_EXPORT ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream)
{
    struct nccl_call c = {"ncclScatter", NCCL_SCATTER, sendbuff, recvbuff, count, datatype, 0,
                          root, comm, stream};
    return in_order(&c);
}

REPROD_EXPORT ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclComm_t comm,
                                        cudaStream_t stream)
{
    struct nccl_call c = {"ncclAlltoAll", NCCL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, 0,
                          -1, comm, stream};
    return in_order(&c);
}
