/* The NCCL stand-in's communicators: unique ids (the name of a shared segment), init in every
 * form (blocking, nonblocking in a background thread, inside a group, InitAll, split), the
 * queries, finalize/destroy/abort, error strings and PreMulSum ops. A communicator's struct is
 * never freed (a graph may still name it): destroy and abort unmap its segment and mark it
 * dead, and any later call naming it is reported as the use after free it is natively (the
 * process aborts). Settings read at init: NCCL_ALGO (ring or tree, default ring),
 * NCCL_MAX_NCHANNELS (1 to 32, default 2), NCCL_STANDIN_TIMEOUT (seconds a wait for peers may
 * take, default 60). NCCL_STANDIN_REPORT=1 prints, for tests, what each communicator did when
 * it ends (messages sent and received, peers, collectives) and the process's peak of
 * stream-ordered device memory at exit. */
#include "nccl_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#define ID_PREFIX "/snccl-"

static _Thread_local char last_error[160];

static void note_error(struct ncclComm *comm, const char *message) {
    snprintf(comm ? comm->last_error : last_error, sizeof last_error, "%s", message);
}

SNCCL_API(ncclResult_t, ncclGetVersion, int *version) {
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId *id) {
    if (!id)
        return ncclInvalidArgument;
    uint64_t random = 0;
    if (getrandom(&random, sizeof random, 0) != sizeof random)
        random = (uint64_t)snccl_now() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, ID_PREFIX "%d-%016llx", (int)getpid(), (unsigned long long)random);
    return ncclSuccess;
}

/* Communicators destroyed or aborted: addresses only, never dereferenced from here. */
static pthread_mutex_t ended_lock = PTHREAD_MUTEX_INITIALIZER;
static const void **ended_comms;
static size_t ended_count, ended_capacity;

static void note_ended(const struct ncclComm *comm) {
    pthread_mutex_lock(&ended_lock);
    if (ended_count == ended_capacity) {
        size_t capacity = ended_capacity ? ended_capacity * 2 : 64;
        const void **grown = realloc(ended_comms, capacity * sizeof *grown);
        if (grown) {
            ended_comms = grown;
            ended_capacity = capacity;
        }
    }
    if (ended_count < ended_capacity)
        ended_comms[ended_count++] = comm;
    pthread_mutex_unlock(&ended_lock);
}

static int was_ended(const void *handle) {
    int found = 0;
    pthread_mutex_lock(&ended_lock);
    for (size_t i = 0; i < ended_count && !found; i++)
        found = ended_comms[i] == handle;
    pthread_mutex_unlock(&ended_lock);
    return found;
}

struct ncclComm *snccl_comm_check_in(ncclComm_t comm, const char *api) {
    if (!comm)
        return NULL;
    if (scuda_handle_live(comm) && comm->magic == SNCCL_COMM_MAGIC)
        return comm;
    if (was_ended(comm)) {
        fprintf(stderr, "NCCL stand-in: %s: communicator %p used after ncclCommDestroy or ncclCommAbort (a use after free)\n",
                api[0] == 'p' ? api + 1 : api, (void *)comm);
        abort();
    }
    return NULL;
}

static int report_wanted(void) {
    const char *value = getenv("NCCL_STANDIN_REPORT");
    return value && *value && strcmp(value, "0") != 0;
}

static int world_rank(void) {
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank)
        rank = getenv("PMI_RANK");
    return rank ? atoi(rank) : -1;
}

/* What a communicator did (NCCL_STANDIN_REPORT=1), when it ends. */
static void report_comm(const struct ncclComm *comm) {
    if (!report_wanted())
        return;
    int peers = 0;
    for (int q = 0; q < comm->nranks; q++)
        peers += comm->counts.peers[q];
    fprintf(stderr,
            "NCCL stand-in report: process %d comm rank %d of %d: sends %llu receives %llu peers %d collectives %llu "
            "calls-after-error %llu\n",
            world_rank(), comm->rank, comm->nranks, (unsigned long long)comm->counts.sends,
            (unsigned long long)comm->counts.receives, peers, (unsigned long long)comm->counts.collectives,
            (unsigned long long)atomic_load(&comm->calls_after_error));
}

__attribute__((destructor)) static void report_process(void) {
    if (report_wanted())
        fprintf(stderr, "NCCL stand-in report: process %d: peak stream-ordered device memory %zu bytes\n", world_rank(),
                standin_async_memory_peak());
}

static int setting_int(const char *name, int fallback, int low, int high) {
    const char *value = getenv(name);
    if (!value || !*value)
        return fallback;
    int parsed = atoi(value);
    return parsed < low ? low : parsed > high ? high : parsed;
}

static struct ncclComm *comm_new(int nranks, int rank, const char *name, int blocking) {
    struct ncclComm *comm = calloc(1, sizeof *comm);
    if (!comm)
        return NULL;
    comm->magic = SNCCL_COMM_MAGIC;
    comm->rank = rank;
    comm->nranks = nranks;
    comm->blocking = blocking;
    standin_runtime_used();
    comm->device = standin_current_device();
    const char *algo = getenv("NCCL_ALGO");
    comm->tree = algo && !strncasecmp(algo, "tree", 4);
    comm->channels = setting_int("NCCL_MAX_NCHANNELS", 2, 1, 32);
    comm->timeout_s = setting_int("NCCL_STANDIN_TIMEOUT", 60, 1, 1 << 20);
    comm->failing_call = (uint64_t)setting_int("NCCL_STANDIN_FAIL_CALL", 0, 0, 1 << 30);
    snprintf(comm->name, sizeof comm->name, "%s", name);
    atomic_init(&comm->state, ncclInProgress);
    pthread_mutex_init(&comm->lock, NULL);
    pthread_cond_init(&comm->cond, NULL);
    pthread_mutex_init(&comm->exec_lock, NULL);
    return comm;
}

static void comm_join(struct ncclComm *comm) {
    ncclResult_t result = snccl_segment_join(comm);
    pthread_mutex_lock(&comm->lock);
    comm->joined = result == ncclSuccess ? 1 : -1;
    if (result == ncclSuccess) {
        int expected = ncclInProgress;
        atomic_compare_exchange_strong(&comm->state, &expected, ncclSuccess);
    } else {
        snccl_set_error(comm, result, "init failed");
    }
    pthread_cond_broadcast(&comm->cond);
    pthread_mutex_unlock(&comm->lock);
}

static void *join_thread(void *argument) {
    comm_join(argument);
    return NULL;
}

ncclResult_t snccl_comm_wait_joined(struct ncclComm *comm) {
    pthread_mutex_lock(&comm->lock);
    while (!comm->joined)
        pthread_cond_wait(&comm->cond, &comm->lock);
    int joined = comm->joined;
    pthread_mutex_unlock(&comm->lock);
    if (joined > 0)
        return ncclSuccess;
    int state = atomic_load(&comm->state);
    return state == ncclSuccess || state == ncclInProgress ? ncclSystemError : (ncclResult_t)state;
}

/* Starts the join: at once when blocking outside a group, else in a background thread. */
static ncclResult_t comm_start(struct ncclComm *comm, ncclComm_t *out) {
    scuda_handle_add(comm);
    *out = comm;
    if (comm->blocking && !snccl_group_depth()) {
        comm_join(comm);
        return snccl_comm_wait_joined(comm);
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, join_thread, comm)) {
        comm_join(comm);
    } else {
        pthread_detach(thread);
    }
    if (snccl_group_depth())
        snccl_group_note_init(comm);
    return comm->blocking ? ncclSuccess : ncclInProgress;
}

static ncclResult_t config_blocking(const ncclConfig_t *config, int fallback, int *blocking) {
    *blocking = fallback;
    if (!config)
        return ncclSuccess;
    if (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize))
        return ncclInvalidArgument;
    if (config->blocking != NCCL_CONFIG_UNDEF_INT)
        *blocking = config->blocking != 0;
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
          ncclConfig_t *config) {
    int blocking;
    if (!out)
        return ncclInvalidArgument;
    *out = NULL;
    if (nranks < 1 || nranks > SNCCL_MAX_RANKS || rank < 0 || rank >= nranks) {
        note_error(NULL, "invalid nranks or rank");
        return ncclInvalidArgument;
    }
    if (strncmp(id.internal, ID_PREFIX, strlen(ID_PREFIX)) || !memchr(id.internal, 0, SNCCL_NAME_BYTES)) {
        note_error(NULL, "not a unique id from ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    if (config_blocking(config, 1, &blocking) != ncclSuccess)
        return ncclInvalidArgument;
    struct ncclComm *comm = comm_new(nranks, rank, id.internal, blocking);
    return comm ? comm_start(comm, out) : ncclSystemError;
}

SNCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    return pncclCommInitRankConfig(out, nranks, id, rank, NULL);
}

SNCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t *out, int nranks, int rank, int id_count,
          ncclUniqueId *ids, ncclConfig_t *config) {
    if (id_count < 1 || !ids)
        return ncclInvalidArgument;
    return pncclCommInitRankConfig(out, nranks, ids[0], rank, config);
}

/* One communicator per device of `devices` (0..count-1 when NULL), joined by one thread each. */
SNCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t *comms, int count, const int *devices) {
    ncclUniqueId id;
    if (!comms || count < 1 || count > SNCCL_MAX_RANKS)
        return ncclInvalidArgument;
    for (int i = 0; i < count; i++)
        if (devices && (devices[i] < 0 || devices[i] >= standin_device_count()))
            return ncclInvalidArgument;
    pncclGetUniqueId(&id);
    CUcontext saved = NULL;
    cuCtxGetCurrent(&saved);
    ncclResult_t result = ncclSuccess;
    ncclGroupStart();
    for (int i = 0; i < count && result == ncclSuccess; i++) {
        cuCtxSetCurrent(scuda_primary_context(devices ? devices[i] : i));
        result = pncclCommInitRank(&comms[i], count, id, i);
    }
    ncclResult_t ended = ncclGroupEnd();
    cuCtxSetCurrent(saved);
    return result != ncclSuccess ? result : ended;
}

static uint64_t fnv1a(uint64_t hash, const void *bytes, size_t length) {
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ ((const unsigned char *)bytes)[i]) * 0x100000001b3ULL;
    return hash;
}

/* Collective over the parent on the calling threads: every rank posts (color, key) in the
 * parent's segment; the children's segment name is derived from the parent's, the split's
 * ordinal and the color, so the ranks of one color meet without another exchange. */
SNCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t handle, int color, int key, ncclComm_t *out,
          ncclConfig_t *config) {
    struct ncclComm *parent = snccl_comm_check(handle);
    int blocking;
    if (!parent || !out || (color < 0 && color != NCCL_SPLIT_NOCOLOR))
        return ncclInvalidArgument;
    *out = NULL;
    if (config_blocking(config, parent->blocking, &blocking) != ncclSuccess)
        return ncclInvalidArgument;
    ncclResult_t result = snccl_comm_wait_joined(parent);
    if (result != ncclSuccess)
        return result;
    struct snccl_shared *shared = parent->shared;
    shared->split[parent->rank].color = color;
    shared->split[parent->rank].key = key;
    result = snccl_barrier(parent, &shared->control, &parent->control_epoch);
    int size = 0, rank = 0;
    for (int q = 0; q < parent->nranks && result == ncclSuccess; q++) {
        if (shared->split[q].color != color)
            continue;
        size++;
        if (shared->split[q].key < key || (shared->split[q].key == key && q < parent->rank))
            rank++;
    }
    if (result == ncclSuccess)
        result = snccl_barrier(parent, &shared->control, &parent->control_epoch);
    unsigned ordinal = parent->splits++;
    if (result != ncclSuccess || color == NCCL_SPLIT_NOCOLOR)
        return result;
    uint64_t hash = fnv1a(0xcbf29ce484222325ULL, parent->name, strlen(parent->name));
    hash = fnv1a(hash, &ordinal, sizeof ordinal);
    hash = fnv1a(hash, &color, sizeof color);
    char name[SNCCL_NAME_BYTES];
    snprintf(name, sizeof name, ID_PREFIX "split-%016llx", (unsigned long long)hash);
    struct ncclComm *child = comm_new(size, rank, name, blocking);
    if (!child)
        return ncclSystemError;
    child->device = parent->device;
    return comm_start(child, out);
}

/* Waits until the bundles enqueued so far have run. */
static void wait_pending(struct ncclComm *comm) {
    pthread_mutex_lock(&comm->lock);
    while (comm->pending > 0)
        pthread_cond_wait(&comm->cond, &comm->lock);
    pthread_mutex_unlock(&comm->lock);
}

static void *finalize_thread(void *argument) {
    struct ncclComm *comm = argument;
    wait_pending(comm);
    int expected = ncclInProgress;
    atomic_compare_exchange_strong(&comm->state, &expected, ncclSuccess);
    return NULL;
}

SNCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t handle) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm)
        return ncclInvalidArgument;
    snccl_comm_wait_joined(comm);
    pthread_t thread;
    int expected = ncclSuccess;
    if (comm->blocking || !atomic_compare_exchange_strong(&comm->state, &expected, ncclInProgress)) {
        wait_pending(comm);
        return comm->blocking ? ncclSuccess : (ncclResult_t)expected;
    }
    if (pthread_create(&thread, NULL, finalize_thread, comm)) {
        finalize_thread(comm);
        return ncclSuccess;
    }
    pthread_detach(thread);
    return ncclInProgress;
}

/* Destroy or abort: from here on the handle is dead. Abort first makes every wait of every
 * rank give up; then the launches and bundles in flight end before the segment goes. */
static ncclResult_t comm_end(ncclComm_t handle, int abort) {
    struct ncclComm *comm = snccl_comm_check_in(handle, abort ? "ncclCommAbort" : "ncclCommDestroy");
    if (!comm)
        return ncclInvalidArgument;
    note_ended(comm);
    scuda_handle_remove(comm);
    if (abort && comm->shared)
        snccl_abort_shared(comm);
    snccl_comm_wait_joined(comm);
    if (abort)
        snccl_abort_shared(comm);
    pthread_mutex_lock(&comm->lock);
    while (comm->launching > 0)
        pthread_cond_wait(&comm->cond, &comm->lock);
    pthread_mutex_unlock(&comm->lock);
    wait_pending(comm);
    pthread_mutex_lock(&comm->exec_lock);
    pthread_mutex_lock(&comm->lock);
    comm->dead = 1;
    comm->magic = SNCCL_COMM_DEAD;
    snccl_segment_leave(comm);
    pthread_mutex_unlock(&comm->lock);
    pthread_mutex_unlock(&comm->exec_lock);
    report_comm(comm);
    snccl_model_write(comm);
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
    return comm_end(comm, 0);
}

SNCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
    return comm ? comm_end(comm, 1) : ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t handle, ncclResult_t *error) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm || !error)
        return ncclInvalidArgument;
    *error = (ncclResult_t)atomic_load(&comm->state);
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t handle, int *count) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm || !count)
        return ncclInvalidArgument;
    *count = comm->nranks;
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t handle, int *device) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm || !device)
        return ncclInvalidArgument;
    *device = comm->device;
    return ncclSuccess;
}

SNCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t handle, int *rank) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm || !rank)
        return ncclInvalidArgument;
    *rank = comm->rank;
    return ncclSuccess;
}

SNCCL_API(const char *, ncclGetErrorString, ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

SNCCL_API(const char *, ncclGetLastError, ncclComm_t handle) {
    struct ncclComm *comm = snccl_comm_check(handle);
    return comm ? comm->last_error : last_error;
}

SNCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op, void *scalar, ncclDataType_t type,
          ncclScalarResidence_t residence, ncclComm_t handle) {
    struct ncclComm *comm = snccl_comm_check(handle);
    size_t bytes = snccl_type_bytes(type);
    if (!comm || !op || !scalar || !bytes || (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return ncclInvalidArgument;
    struct snccl_redop made = {1, type, residence, {0}, residence == ncclScalarDevice ? scalar : NULL};
    if (residence == ncclScalarHostImmediate)
        memcpy(made.scalar, scalar, bytes);
    pthread_mutex_lock(&comm->lock);
    struct snccl_redop *grown = realloc(comm->redops, (comm->redop_count + 1) * sizeof *grown);
    if (grown) {
        comm->redops = grown;
        grown[comm->redop_count] = made;
        *op = (ncclRedOp_t)(ncclNumOps + comm->redop_count++);
    }
    pthread_mutex_unlock(&comm->lock);
    return grown ? ncclSuccess : ncclSystemError;
}

SNCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t handle) {
    struct ncclComm *comm = snccl_comm_check(handle);
    if (!comm || (int)op < (int)ncclNumOps)
        return ncclInvalidArgument;
    ncclResult_t result = ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    int index = (int)op - (int)ncclNumOps;
    if (index < comm->redop_count && comm->redops[index].live) {
        comm->redops[index].live = 0;
        result = ncclSuccess;
    }
    pthread_mutex_unlock(&comm->lock);
    return result;
}

ncclResult_t snccl_resolve_op(struct ncclComm *comm, ncclRedOp_t op, struct snccl_task *task) {
    size_t bytes = snccl_type_bytes(task->type);
    task->scalar_device = NULL;
    switch ((int)op) {
    case ncclSum: task->op = SNCCL_SUM; return ncclSuccess;
    case ncclProd: task->op = SNCCL_PROD; return ncclSuccess;
    case ncclMax: task->op = SNCCL_MAX; return ncclSuccess;
    case ncclMin: task->op = SNCCL_MIN; return ncclSuccess;
    case ncclAvg: /* floats: PreMulSum by 1/N rounded to the type, as NCCL; integers: sum, then divide */
        task->op = snccl_type_is_float(task->type) ? SNCCL_PREMUL : SNCCL_AVG_INT;
        snccl_store_double(task->type, 1.0 / comm->nranks, task->scalar);
        return ncclSuccess;
    default: break;
    }
    ncclResult_t result = ncclInvalidArgument;
    pthread_mutex_lock(&comm->lock);
    int index = (int)op - (int)ncclNumOps;
    if (index >= 0 && index < comm->redop_count && comm->redops[index].live && comm->redops[index].type == task->type) {
        task->op = SNCCL_PREMUL;
        memcpy(task->scalar, comm->redops[index].scalar, bytes);
        task->scalar_device = comm->redops[index].scalar_device;
        result = ncclSuccess;
    }
    pthread_mutex_unlock(&comm->lock);
    return result;
}

SNCCL_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t bytes) {
    if (!ptr)
        return ncclInvalidArgument;
    return scuda_memory_alloc(ptr, bytes, SCUDA_DEVICE) == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

SNCCL_API(ncclResult_t, ncclMemFree, void *ptr) {
    if (!ptr)
        return ncclSuccess;
    return scuda_memory_free(ptr, SCUDA_DEVICE) == CUDA_SUCCESS ? ncclSuccess : ncclInvalidArgument;
}
