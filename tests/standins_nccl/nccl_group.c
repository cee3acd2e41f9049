/* The NCCL stand-in's operations and groups: each call checks its arguments as NCCL does
 * (ncclEnqueueCheck: the communicator, that it is ready, the arguments, the stream), then joins
 * the calling thread's group (ncclGroupStart/End nest) or runs as a group of one. A call that
 * fails its checks returns its error at once and, inside a group, fails the whole group: the
 * outermost ncclGroupEnd drops every call of it and returns that error (ncclGroupErrCheck).
 *
 * At the outermost ncclGroupEnd the group's operations become one bundle per (communicator,
 * stream), in issue order, and are launched: each rank first connects to the peers a bundle
 * needs the first time it needs them (its hello, then the peers'; NCCL connects its transports
 * at first use, which needs the peers to launch too), then the bundles are enqueued on their
 * streams. A group with a nonblocking communicator launches on a thread of its own, as NCCL
 * does: the communicators report ncclInProgress until it is done, and a call on one of them
 * meanwhile gets ncclInvalidArgument (ncclCommEnsureReady). A bundle's sends and receives
 * progress together, then its collectives run in order; one communicator's bundles run in the
 * order they were issued, whatever their streams (a ticket each), as NCCL orders its work. */
#include "nccl_internal.h"

#include <stdlib.h>
#include <string.h>

struct bundle {
    struct ncclComm *comm;
    CUstream stream;
    int counted;     /* enqueued on a stream (not captured): counted in comm->pending */
    uint64_t ticket; /* counted: its turn among the comm's bundles; captured: taken at each run */
    size_t count, capacity;
    struct snccl_task *tasks;
};

struct pending_task {
    struct ncclComm *comm;
    CUstream stream;
    struct snccl_task task;
};

static _Thread_local int group_depth;
static _Thread_local ncclResult_t group_failed; /* the group's error: it is dropped at its end */
static _Thread_local struct pending_task *group_tasks;
static _Thread_local size_t group_count, group_capacity;
static _Thread_local struct ncclComm **group_inits;
static _Thread_local size_t group_init_count;

int snccl_group_depth(void) {
    return group_depth;
}

ncclResult_t snccl_group_error(ncclResult_t error) {
    if (group_depth > 0 && error != ncclSuccess && error != ncclInProgress)
        group_failed = error;
    return error;
}

void snccl_group_note_init(struct ncclComm *comm) {
    struct ncclComm **grown = realloc(group_inits, (group_init_count + 1) * sizeof *grown);
    if (grown) {
        group_inits = grown;
        group_inits[group_init_count++] = comm;
    }
}

static void count_tasks(struct ncclComm *comm, const struct bundle *bundle) {
    for (size_t i = 0; i < bundle->count; i++) {
        const struct snccl_task *task = &bundle->tasks[i];
        snccl_model_count(comm, task);
        if (task->kind == SNCCL_SEND || task->kind == SNCCL_RECV) {
            if (task->kind == SNCCL_SEND)
                comm->counts.sends++;
            else
                comm->counts.receives++;
            comm->counts.peers[task->root] = 1;
        } else {
            comm->counts.collectives++;
        }
    }
}

static void bundle_run(void *arg) {
    struct bundle *bundle = arg;
    struct ncclComm *comm = bundle->comm;
    int joined = snccl_comm_wait_joined(comm) == ncclSuccess;
    pthread_mutex_lock(&comm->lock);
    uint64_t ticket = bundle->counted ? bundle->ticket : comm->issued++; /* a graph's: at each run */
    while (comm->finished != ticket)
        pthread_cond_wait(&comm->cond, &comm->lock);
    int usable = joined && !comm->dead;
    pthread_mutex_unlock(&comm->lock);
    pthread_mutex_lock(&comm->exec_lock);
    if (usable && !atomic_load(&comm->broken)) { /* an argument error reported does not stop it */
        ncclResult_t result = ncclSuccess;
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
        if (result == ncclSuccess)
            count_tasks(comm, bundle);
        else
            snccl_set_error(comm, result, "a collective failed");
    }
    pthread_mutex_unlock(&comm->exec_lock);
    pthread_mutex_lock(&comm->lock);
    comm->finished++;
    if (bundle->counted) {
        bundle->counted = 0;
        comm->pending--;
    }
    pthread_cond_broadcast(&comm->cond);
    pthread_mutex_unlock(&comm->lock);
}

static void bundle_free(void *arg) {
    struct bundle *bundle = arg;
    free(bundle->tasks);
    free(bundle);
}

/* Enqueue the bundle on its stream (or its capture), with its ticket; frees it on failure. The
 * comm's lock is held across the enqueue so that tickets follow the order of the queues. */
static ncclResult_t bundle_enqueue(struct bundle *bundle) {
    struct ncclComm *comm = bundle->comm;
    CUstreamCaptureStatus status;
    pthread_mutex_lock(&comm->lock);
    CUresult result = cuStreamIsCapturing(bundle->stream, &status);
    if (result == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_NONE) {
        bundle->counted = 1;
        bundle->ticket = comm->issued++;
        comm->pending++;
    }
    if (result == CUDA_SUCCESS)
        result = standin_stream_enqueue(bundle->stream, bundle_run, bundle, bundle_free);
    if (result != CUDA_SUCCESS && bundle->counted) {
        comm->issued--;
        comm->pending--;
    }
    pthread_mutex_unlock(&comm->lock);
    if (result == CUDA_SUCCESS)
        return ncclSuccess;
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

/* The peers `bundle` needs connections to: its sends' and receives' peers; every rank when it
 * has a collective. */
static void needed_peers(const struct bundle *bundle, unsigned char *need) {
    struct ncclComm *comm = bundle->comm;
    memset(need, 0, SNCCL_MAX_RANKS);
    for (size_t i = 0; i < bundle->count; i++) {
        const struct snccl_task *task = &bundle->tasks[i];
        if (task->kind == SNCCL_SEND || task->kind == SNCCL_RECV)
            need[task->root] = 1;
        else
            memset(need, 1, (size_t)comm->nranks);
    }
    need[comm->rank] = 0;
}

static void connect_post(struct ncclComm *comm, const unsigned char *need) {
    struct snccl_shared *shared = comm->shared;
    for (int peer = 0; peer < comm->nranks; peer++) {
        if (!need[peer] || comm->connected[peer])
            continue;
        atomic_store(&shared->hello[comm->rank][peer], 1);
        atomic_fetch_add(&shared->doorbell[peer], 1);
        snccl_wake(&shared->doorbell[peer]);
    }
}

static ncclResult_t connect_wait(struct ncclComm *comm, const unsigned char *need) {
    struct snccl_shared *shared = comm->shared;
    _Atomic uint32_t *doorbell = &shared->doorbell[comm->rank];
    double deadline = snccl_now() + comm->timeout_s;
    for (int peer = 0; peer < comm->nranks; peer++) {
        if (!need[peer] || comm->connected[peer])
            continue;
        for (;;) {
            uint32_t seen = atomic_load(doorbell);
            if (atomic_load(&shared->hello[peer][comm->rank]))
                break;
            ncclResult_t result = snccl_wait_change(comm, doorbell, seen, deadline);
            if (result != ncclSuccess)
                return result;
        }
        comm->connected[peer] = 1;
    }
    return ncclSuccess;
}

struct launch {
    struct bundle **bundles;
    size_t count;
    int nonblocking;
};

static void launch_free(struct launch *launch) {
    free(launch->bundles);
    free(launch);
}

/* Enqueue `bundle` as NCCL launches, with the communicator's device current
 * (cudaSetDevice(comm->cudaDev)): a default stream (0) is that device's, whatever device the
 * calling thread has current (or none, on a nonblocking group's launch thread). */
static ncclResult_t enqueue_on_device(struct bundle *bundle) {
    CUcontext caller = NULL;
    cuCtxGetCurrent(&caller);
    cuCtxSetCurrent(scuda_primary_context(bundle->comm->device));
    ncclResult_t result = bundle_enqueue(bundle);
    cuCtxSetCurrent(caller);
    return result;
}

/* Connect every bundle (every hello posted before any wait: one thread may launch several ranks
 * of a communicator), then enqueue them. Frees the launch; the first error, or ncclSuccess. */
static ncclResult_t launch_run(struct launch *launch) {
    unsigned char need[SNCCL_MAX_RANKS];
    ncclResult_t result = ncclSuccess;
    for (size_t b = 0; b < launch->count; b++) {
        needed_peers(launch->bundles[b], need);
        connect_post(launch->bundles[b]->comm, need);
    }
    for (size_t b = 0; b < launch->count && result == ncclSuccess; b++) {
        needed_peers(launch->bundles[b], need);
        result = connect_wait(launch->bundles[b]->comm, need);
    }
    for (size_t b = 0; b < launch->count; b++) {
        struct ncclComm *comm = launch->bundles[b]->comm;
        ncclResult_t enqueued = result == ncclSuccess ? enqueue_on_device(launch->bundles[b]) : ncclSuccess;
        if (result != ncclSuccess)
            bundle_free(launch->bundles[b]);
        if (result == ncclSuccess)
            result = enqueued;
        pthread_mutex_lock(&comm->lock);
        comm->launching--;
        if (launch->nonblocking) /* what ncclCommGetAsyncError reports from now on */
            atomic_store(&comm->state, result);
        pthread_cond_broadcast(&comm->cond);
        pthread_mutex_unlock(&comm->lock);
    }
    launch_free(launch);
    return result;
}

static void *launch_thread(void *argument) {
    launch_run(argument);
    return NULL;
}

/* Launch the group's tasks: one bundle per (comm, stream) in order of first appearance; a
 * nonblocking group on a thread of its own (then ncclInProgress). */
static ncclResult_t launch(struct pending_task *tasks, size_t count, int *nonblocking) {
    struct launch *launch = calloc(1, sizeof *launch);
    struct bundle **bundles = calloc(count ? count : 1, sizeof *bundles);
    ncclResult_t result = launch && bundles ? ncclSuccess : ncclSystemError;
    size_t bundle_count = 0;
    int any_nonblocking = 0;
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
            any_nonblocking |= !tasks[i].comm->blocking;
        }
        if (!bundle_add(bundles[b], &tasks[i].task))
            result = ncclSystemError;
    }
    if (result != ncclSuccess || !bundle_count) {
        for (size_t b = 0; b < bundle_count; b++)
            bundle_free(bundles[b]);
        free(bundles);
        free(launch);
        return result;
    }
    *nonblocking |= any_nonblocking;
    *launch = (struct launch){bundles, bundle_count, any_nonblocking};
    for (size_t b = 0; b < bundle_count; b++) {
        struct ncclComm *comm = bundles[b]->comm;
        pthread_mutex_lock(&comm->lock);
        comm->launching++;
        if (launch->nonblocking)
            atomic_store(&comm->state, ncclInProgress);
        pthread_mutex_unlock(&comm->lock);
    }
    pthread_t thread;
    if (!launch->nonblocking || pthread_create(&thread, NULL, launch_thread, launch))
        return launch_run(launch);
    pthread_detach(thread);
    return ncclSuccess;
}

/* nccl.h declares these two without a prototype: */
ncclResult_t pncclGroupStart(void);
ncclResult_t pncclGroupEnd(void);

SNCCL_API(ncclResult_t, ncclGroupStart, void) {
    group_depth++;
    return ncclSuccess;
}

/* Drop the group's tasks after an error: its nonblocking communicators report the error, as
 * NCCL's groupCleanup sets it. */
static void drop_group(ncclResult_t error) {
    for (size_t i = 0; i < group_count; i++)
        if (!group_tasks[i].comm->blocking)
            atomic_store(&group_tasks[i].comm->state, error);
    group_count = 0;
}

SNCCL_API(ncclResult_t, ncclGroupEnd, void) {
    if (group_depth <= 0)
        return ncclInvalidUsage;
    if (--group_depth > 0)
        return ncclSuccess;
    ncclResult_t result = group_failed;
    int nonblocking = 0;
    group_failed = ncclSuccess;
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
    if (result != ncclSuccess) {
        drop_group(result);
        return result;
    }
    result = launch(group_tasks, group_count, &nonblocking);
    group_count = 0;
    return result == ncclSuccess && nonblocking ? ncclInProgress : result;
}

SNCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *info) {
    if (info)
        info->estimatedTime = 0;
    return pncclGroupEnd();
}

/* NCCL's checks of one call (ncclEnqueueCheck, ArgsCheck, taskAppend), in its order, once the
 * communicator is known to be one: ncclSuccess, or the error the call returns. */
static ncclResult_t check(struct snccl_task *task, struct ncclComm *comm, cudaStream_t stream, ncclRedOp_t op) {
    int state = atomic_load(&comm->state);
    if (state == ncclInProgress) /* ncclCommEnsureReady */
        return ncclInvalidArgument;
    if (state != ncclSuccess)
        return (ncclResult_t)state;
    int rooted = task->kind == SNCCL_REDUCE || task->kind == SNCCL_BROADCAST || task->kind == SNCCL_SEND ||
                 task->kind == SNCCL_RECV;
    if (rooted && (task->root < 0 || task->root >= comm->nranks))
        return ncclInvalidArgument;
    if (!snccl_type_bytes(task->type))
        return ncclInvalidArgument;
    int reduction = task->kind == SNCCL_ALLREDUCE || task->kind == SNCCL_REDUCESCATTER || task->kind == SNCCL_REDUCE;
    if (reduction && snccl_resolve_op(comm, op, task) != ncclSuccess)
        return ncclInvalidArgument;
    int needs_send = task->kind != SNCCL_RECV && (task->kind != SNCCL_BROADCAST || comm->rank == task->root);
    int needs_recv = task->kind != SNCCL_SEND && (task->kind != SNCCL_REDUCE || comm->rank == task->root);
    if (task->count && ((needs_send && !task->send) || (needs_recv && !task->recv)))
        return ncclInvalidArgument; /* NCCL_CHECK_POINTERS=1's answer */
    int p2p = task->kind == SNCCL_SEND || task->kind == SNCCL_RECV;
    if (!p2p && !task->count) /* an empty collective is discarded before the stream is looked at */
        return ncclSuccess;
    if (standin_stream_device(stream) < 0) /* cudaStreamGetCaptureInfo fails */
        return ncclUnhandledCudaError;
    return ncclSuccess;
}

/* Checks a task as NCCL does, then adds it to the group (or launches it alone). */
static ncclResult_t issue(struct snccl_task *task, ncclComm_t handle, cudaStream_t stream, ncclRedOp_t op,
                          const char *api) {
    struct ncclComm *comm = snccl_comm_check_in(handle, api);
    if (!comm)
        return snccl_group_error(ncclInvalidArgument);
    uint64_t call = atomic_fetch_add(&comm->calls, 1) + 1;
    if (atomic_load(&comm->broken) || atomic_load(&comm->launch_failed))
        atomic_fetch_add(&comm->calls_after_error, 1);
    /* Fault injection for tests: NCCL_STANDIN_FAIL_CALL=k makes the k-th call issued on each
     * communicator fail as a launch that went wrong does: it returns ncclSystemError and
     * ncclCommGetAsyncError reports it from then on, while the work enqueued before it still
     * runs (with its peers). The report counts the calls made on the communicator after that. */
    if (call == comm->failing_call) {
        int expected = ncclSuccess;
        atomic_store(&comm->launch_failed, 1);
        atomic_compare_exchange_strong(&comm->state, &expected, ncclSystemError);
        return snccl_group_error(ncclSystemError);
    }
    ncclResult_t result = check(task, comm, stream, op);
    if (result != ncclSuccess) {
        if (!comm->blocking) /* ncclEnqueueCheck's failure: the communicator reports it */
            atomic_store(&comm->state, result);
        return snccl_group_error(result);
    }
    if (!task->count)
        return ncclSuccess;
    if (group_count == group_capacity) {
        size_t capacity = group_capacity ? group_capacity * 2 : 16;
        struct pending_task *grown = realloc(group_tasks, capacity * sizeof *grown);
        if (!grown)
            return snccl_group_error(ncclSystemError);
        group_tasks = grown;
        group_capacity = capacity;
    }
    group_tasks[group_count++] = (struct pending_task){comm, stream, *task};
    if (group_depth)
        return ncclSuccess;
    int nonblocking = 0;
    result = launch(group_tasks, group_count, &nonblocking);
    group_count = 0;
    return result == ncclSuccess && nonblocking ? ncclInProgress : result;
}

SNCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_ALLREDUCE, .send = sendbuff, .recv = recvbuff, .count = count, .type = datatype};
    return issue(&task, comm, stream, op, __func__);
}

SNCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
          ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_REDUCESCATTER, .send = sendbuff, .recv = recvbuff, .count = recvcount,
                              .type = datatype};
    return issue(&task, comm, stream, op, __func__);
}

SNCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_REDUCE, .send = sendbuff, .recv = recvbuff, .count = count,
                              .type = datatype, .root = root};
    return issue(&task, comm, stream, op, __func__);
}

SNCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
          ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_ALLGATHER, .send = sendbuff, .recv = recvbuff, .count = sendcount,
                              .type = datatype};
    return issue(&task, comm, stream, ncclSum, __func__);
}

SNCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
          int root, ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_BROADCAST, .send = sendbuff, .recv = recvbuff, .count = count,
                              .type = datatype, .root = root};
    return issue(&task, comm, stream, ncclSum, __func__);
}

SNCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
          cudaStream_t stream) {
    return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

SNCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
          ncclComm_t comm, cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_SEND, .send = sendbuff, .count = count, .type = datatype, .root = peer};
    return issue(&task, comm, stream, ncclSum, __func__);
}

SNCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
          cudaStream_t stream) {
    struct snccl_task task = {.kind = SNCCL_RECV, .recv = recvbuff, .count = count, .type = datatype, .root = peer};
    return issue(&task, comm, stream, ncclSum, __func__);
}
