/* The NCCL stand-in's operations and groups: each call checks its arguments as NCCL does, then
 * joins the calling thread's group (ncclGroupStart/End nest) or runs as a group of one. At the
 * outermost ncclGroupEnd the group's operations become one bundle per (communicator, stream), in
 * issue order, enqueued on that stream: the bundle's sends and receives progress together, then
 * its collectives run in order. Ops of one communicator run one bundle at a time even on several
 * streams, in the order the streams reach them: ranks must reach them in the same order. */
#include "nccl_internal.h"

#include <stdlib.h>
#include <string.h>

struct bundle {
    struct ncclComm *comm;
    CUstream stream;
    int counted; /* enqueued on a stream (not captured): counted in comm->pending */
    size_t count, capacity;
    struct snccl_task *tasks;
};

struct pending_task {
    struct ncclComm *comm;
    CUstream stream;
    struct snccl_task task;
};

static _Thread_local int group_depth;
static _Thread_local struct pending_task *group_tasks;
static _Thread_local size_t group_count, group_capacity;
static _Thread_local struct ncclComm **group_inits;
static _Thread_local size_t group_init_count;

int snccl_group_depth(void) {
    return group_depth;
}

void snccl_group_note_init(struct ncclComm *comm) {
    struct ncclComm **grown = realloc(group_inits, (group_init_count + 1) * sizeof *grown);
    if (grown) {
        group_inits = grown;
        group_inits[group_init_count++] = comm;
    }
}

static void bundle_run(void *arg) {
    struct bundle *bundle = arg;
    struct ncclComm *comm = bundle->comm;
    if (snccl_comm_wait_joined(comm) == ncclSuccess) {
        pthread_mutex_lock(&comm->exec_lock);
        pthread_mutex_lock(&comm->lock);
        int usable = !comm->dead;
        pthread_mutex_unlock(&comm->lock);
        int state = atomic_load(&comm->state);
        ncclResult_t result = ncclSuccess;
        if (usable && (state == ncclSuccess || state == ncclInProgress)) {
            int any_p2p = 0;
            for (size_t i = 0; i < bundle->count; i++) {
                bundle->tasks[i].done_bytes = 0;
                any_p2p |= bundle->tasks[i].kind == SNCCL_SEND || bundle->tasks[i].kind == SNCCL_RECV;
            }
            if (any_p2p)
                result = snccl_run_p2p(comm, bundle->tasks, bundle->count);
            for (size_t i = 0; i < bundle->count && result == ncclSuccess; i++)
                if (bundle->tasks[i].kind != SNCCL_SEND && bundle->tasks[i].kind != SNCCL_RECV)
                    result = snccl_run_collective(comm, &bundle->tasks[i]);
            if (result != ncclSuccess)
                snccl_set_error(comm, result, "a collective failed");
        }
        pthread_mutex_unlock(&comm->exec_lock);
    }
    if (bundle->counted) {
        bundle->counted = 0;
        pthread_mutex_lock(&comm->lock);
        comm->pending--;
        pthread_cond_broadcast(&comm->cond);
        pthread_mutex_unlock(&comm->lock);
    }
}

static void bundle_free(void *arg) {
    struct bundle *bundle = arg;
    free(bundle->tasks);
    free(bundle);
}

static ncclResult_t bundle_enqueue(struct bundle *bundle) {
    CUstreamCaptureStatus status;
    if (cuStreamIsCapturing(bundle->stream, &status) != CUDA_SUCCESS) {
        bundle_free(bundle);
        return ncclUnhandledCudaError;
    }
    struct ncclComm *comm = bundle->comm;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) {
        bundle->counted = 1;
        pthread_mutex_lock(&comm->lock);
        comm->pending++;
        pthread_mutex_unlock(&comm->lock);
    }
    if (standin_stream_enqueue(bundle->stream, bundle_run, bundle, bundle_free) == CUDA_SUCCESS)
        return ncclSuccess;
    if (bundle->counted) {
        pthread_mutex_lock(&comm->lock);
        comm->pending--;
        pthread_cond_broadcast(&comm->cond);
        pthread_mutex_unlock(&comm->lock);
    }
    bundle_free(bundle);
    return ncclUnhandledCudaError;
}

static int bundle_add(struct bundle *bundle, const struct snccl_task *task) {
    if (bundle->count == bundle->capacity) {
        size_t capacity = bundle->capacity ? bundle->capacity * 2 : 4;
        struct snccl_task *grown = realloc(bundle->tasks, capacity * sizeof *grown);
        if (!grown)
            return 0;
        bundle->tasks = grown;
        bundle->capacity = capacity;
    }
    bundle->tasks[bundle->count++] = *task;
    return 1;
}

/* Launch the group's tasks: one bundle per (comm, stream) in order of first appearance. */
static ncclResult_t launch(struct pending_task *tasks, size_t count, int *nonblocking) {
    struct bundle **bundles = calloc(count ? count : 1, sizeof *bundles);
    size_t bundle_count = 0;
    ncclResult_t result = bundles ? ncclSuccess : ncclSystemError;
    for (size_t i = 0; i < count && result == ncclSuccess; i++) {
        size_t b = 0;
        while (b < bundle_count && (bundles[b]->comm != tasks[i].comm || bundles[b]->stream != tasks[i].stream))
            b++;
        if (b == bundle_count) {
            bundles[b] = calloc(1, sizeof **bundles);
            if (!bundles[b]) {
                result = ncclSystemError;
                break;
            }
            bundles[b]->comm = tasks[i].comm;
            bundles[b]->stream = tasks[i].stream;
            bundle_count++;
            *nonblocking |= !tasks[i].comm->blocking;
        }
        if (!bundle_add(bundles[b], &tasks[i].task))
            result = ncclSystemError;
    }
    for (size_t b = 0; b < bundle_count; b++) {
        if (result == ncclSuccess) {
            /* NCCL launches with the communicator's device current (cudaSetDevice(comm->cudaDev)):
             * a default stream (0) is that device's, whatever device the caller has current. */
            CUcontext caller = NULL;
            cuCtxGetCurrent(&caller);
            cuCtxSetCurrent(scuda_primary_context(bundles[b]->comm->device));
            result = bundle_enqueue(bundles[b]);
            cuCtxSetCurrent(caller);
        } else {
            bundle_free(bundles[b]);
        }
    }
    free(bundles);
    return result;
}

/* nccl.h declares these two without a prototype: */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);

SNCCL_API(ncclResult_t, ncclGroupStart, void) {
    group_depth++;
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclGroupEnd, void) {
    if (group_depth <= 0)
        return ncclInvalidUsage;
    if (--group_depth > 0)
        return ncclSuccess;
    ncclResult_t result = ncclSuccess;
    int nonblocking = 0;
    for (size_t i = 0; i < group_init_count; i++) {
        if (!group_inits[i]->blocking) {
            nonblocking = 1;
            continue;
        }
        ncclResult_t joined = snccl_comm_wait_joined(group_inits[i]);
        if (result == ncclSuccess)
            result = joined;
    }
    group_init_count = 0;
    if (result == ncclSuccess)
        result = launch(group_tasks, group_count, &nonblocking);
    group_count = 0;
    return result == ncclSuccess && nonblocking ? ncclInProgress : result;
}

SNCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *info) {
    if (info)
        info->estimatedTime = 0;
    return pncclGroupEnd();
}

/* Checks a task as NCCL does, then adds it to the group (or launches it alone). */
static ncclResult_t issue(struct snccl_task *task, ncclComm_t handle, cudaStream_t stream, ncclRedOp_t op) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm || !snccl_type_bytes(task->type))
        return ncclInvalidArgument;
    int rooted = task->kind == SNCCL_REDUCE || task->kind == SNCCL_BROADCAST || task->kind == SNCCL_SEND ||
                 task->kind == SNCCL_RECV;
    if (rooted && (task->root < 0 || task->root >= comm->nranks))
        return ncclInvalidArgument;
    int needs_send = task->kind != SNCCL_RECV && (task->kind != SNCCL_BROADCAST || comm->rank == task->root);
    int needs_recv = task->kind != SNCCL_SEND && (task->kind != SNCCL_REDUCE || comm->rank == task->root);
    if (task->count && ((needs_send && !task->send) || (needs_recv && !task->recv)))
        return ncclInvalidArgument;
    int reduction = task->kind == SNCCL_ALLREDUCE || task->kind == SNCCL_REDUCESCATTER || task->kind == SNCCL_REDUCE;
    if (reduction && snccl_resolve_op(comm, op, task) != ncclSuccess)
        return ncclInvalidArgument;
    if (standin_stream_device(stream) < 0)
        return ncclUnhandledCudaError;
    int state = atomic_load(&comm->state);
    if (state != ncclSuccess && state != ncclInProgress)
        return (ncclResult_t)state;
    if (!task->count)
        return ncclSuccess;
    if (group_count == group_capacity) {
        size_t capacity = group_capacity ? group_capacity * 2 : 16;
        struct pending_task *grown = realloc(group_tasks, capacity * sizeof *grown);
        if (!grown)
            return ncclSystemError;
        group_tasks = grown;
        group_capacity = capacity;
    }
    group_tasks[group_count++] = (struct pending_task){comm, stream, *task};
    if (group_depth)
        return ncclSuccess;
    int nonblocking = 0;
    ncclResult_t result = launch(group_tasks, group_count, &nonblocking);
    group_count = 0;
    return result == ncclSuccess && nonblocking ? ncclInProgress : result;
}

SNCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_ALLREDUCE, .send = sendbuff, .recv = recvbuff, .count = count, .type = datatype};
    return issue(&task, comm, stream, op);
}

SNCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_REDUCESCATTER, .send = sendbuff, .recv = recvbuff, .count = recvcount,
                              .type = datatype};
    return issue(&task, comm, stream, op);
}

SNCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_REDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
                              .type = datatype, .root = root};
    return issue(&task, comm, stream, op);
}

SNCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_ALLGATHER, .send = sendbuff, .recv = recvbuff, .count = sendcount,
                              .type = datatype};
    return issue(&task, comm, stream, ncclSum);
}

SNCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_BROADCAST, .send = sendbuff, .recv = recvbuff, .count = count,
                              .type = datatype, .root = root};
    return issue(&task, comm, stream, ncclSum);
}

SNCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream) {
    return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

SNCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
          ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_SEND, .send = sendbuff, .count = count, .type = datatype, .root = peer};
    return issue(&task, comm, stream, ncclSum);
}

SNCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_RECV, .recv = recvbuff, .count = count, .type = datatype, .root = peer};
    return issue(&task, comm, stream, ncclSum);
}
