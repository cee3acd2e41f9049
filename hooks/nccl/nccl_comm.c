/* nccl_comm.c: the real NCCL functions, the communicators and PreMulSum ops the shim knows,
 * and the hooks that make and destroy them.
 *
 * A communicator is remembered when it is made (its rank, size and whether it blocks), or
 * looked up from the real library the first time a reduction names it (one made through a call
 * the shim does not hook, such as ncclCommShrink). The tables are small hash tables under one
 * mutex that is never held across a call into NCCL: PyTorch's watchdog polls communicators
 * from its own thread while the training thread reduces. Each communicator's device
 * (ncclCommCuDevice) is where the shim's work for it runs, whatever device the calling thread
 * has current (one thread may drive several devices' communicators in one group).
 *
 * A hook whose real function the loaded NCCL lacks returns NCCL's error code, logged once; a
 * function the deterministic path issues (ncclSend, ...) missing makes the reductions pass
 * through, logged (nccl_unsupported_reason).
 */
#include "nccl/nccl_internal.h"

#include "runtime/log.h"
#include "runtime/rank.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- The real library ----------------------------------------------------------------- */

REPROD_REAL_TABLE(real_functions, struct nccl_real, REPROD_NCCL_FUNCTIONS, NULL);

const struct nccl_real *nccl_real(void)
{
    return REPROD_REAL_ALL(real_functions);
}

#define MISSING_NAMES 32 /* distinct missing functions logged; more are not logged again */

ncclResult_t nccl_missing(const char *name, ncclResult_t code)
{
    static _Atomic(const char *) logged[MISSING_NAMES];
    for (int i = 0; i < MISSING_NAMES; i++) {
        const char *seen = atomic_load(&logged[i]);
        if (seen == NULL && atomic_compare_exchange_strong(&logged[i], &seen, name)) break;
        if (seen != NULL && strcmp(seen, name) == 0) return code;
    }
    reprod_log(REPROD_LOG_WARN,
               "warning: %s: no loaded NCCL library defines %s; the call returns NCCL error %d "
               "without reaching NCCL",
               name, name, code);
    return code;
}

const char *nccl_unsupported_reason(void)
{
    const struct nccl_real *real = nccl_real(); /* what the deterministic path issues */
    if (!real->Send) return "the loaded NCCL lacks ncclSend";
    if (!real->Recv) return "the loaded NCCL lacks ncclRecv";
    if (!real->AllGather) return "the loaded NCCL lacks ncclAllGather";
    if (!real->Broadcast) return "the loaded NCCL lacks ncclBroadcast";
    if (!real->GroupStart) return "the loaded NCCL lacks ncclGroupStart";
    if (!real->GroupEnd) return "the loaded NCCL lacks ncclGroupEnd";
    return reprod_cuda_unready_reason();
}

size_t nccl_type_bytes(ncclDataType_t type)
{
    static const unsigned char bytes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return type >= 0 && type < ncclNumTypes ? bytes[type] : 0;
}

int nccl_engine_type(ncclDataType_t type)
{
    switch (type) {
    case ncclFloat16: return REPROD_FLOAT16;
    case ncclBfloat16: return REPROD_BFLOAT16;
    case ncclFloat32: return REPROD_FLOAT32;
    case ncclFloat64: return REPROD_FLOAT64;
    default: return -1;
    }
}

/* ---- Tables ---------------------------------------------------------------------------- */

#define BUCKETS 256 /* a process holds a few communicators, PyTorch a few hundred at most */

struct comm_entry {
    ncclComm_t comm;
    struct nccl_comm_info info;
    struct comm_entry *next;
};

struct premul_entry {
    ncclComm_t comm;
    ncclRedOp_t op;
    struct nccl_premul premul;
    struct premul_entry *next;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct comm_entry *comms[BUCKETS];
static struct premul_entry *premuls[BUCKETS];

static size_t bucket_of(const void *comm, int op)
{
    uintptr_t key = (uintptr_t)comm ^ ((uintptr_t)(unsigned)op * 0x9e3779b97f4a7c15u);
    return (size_t)((key >> 4) ^ (key >> 12)) % BUCKETS;
}

/* The entry of `comm`; call with table_lock held. */
static struct comm_entry *find_comm(ncclComm_t comm)
{
    for (struct comm_entry *e = comms[bucket_of(comm, 0)]; e; e = e->next)
        if (e->comm == comm) return e;
    return NULL;
}

/* Insert or update `comm`; info->serial becomes its entry's (a new one for a new entry). */
static void store_comm(ncclComm_t comm, struct nccl_comm_info *info)
{
    static uint64_t last_serial;
    pthread_mutex_lock(&table_lock);
    struct comm_entry *e = find_comm(comm);
    if (!e && (e = calloc(1, sizeof *e))) {
        size_t b = bucket_of(comm, 0);
        e->comm = comm;
        e->info.serial = ++last_serial;
        e->next = comms[b];
        comms[b] = e;
    }
    if (e) {
        info->serial = e->info.serial;
        e->info = *info;
    }
    pthread_mutex_unlock(&table_lock);
}

/* Learn the rank for seeding from the first communicator, or a larger one (the world's). */
static void learn_rank(int rank, int ranks)
{
    if (rank < 0 || ranks < 1) return;
    if (reprod_rank_source(NULL) != REPROD_RANK_FROM_LIBRARY || ranks > reprod_world_size())
        reprod_rank_set_from_library(rank, ranks);
}

/* The device of `comm`: ncclCommCuDevice's answer, else `known` (what its init call tells). */
static int comm_device(ncclComm_t comm, int known)
{
    const struct nccl_real *real = nccl_real();
    int device = -1;
    static atomic_flag logged = ATOMIC_FLAG_INIT;
    if (!real->CommCuDevice) {
        if (!atomic_flag_test_and_set(&logged))
            reprod_log(REPROD_LOG_WARN,
                       "warning: the loaded NCCL lacks ncclCommCuDevice: a communicator's device "
                       "is taken to be the one current when it was made");
        return known;
    }
    if (real->CommCuDevice(comm, &device) != ncclSuccess || device < 0) return known;
    return device;
}

void nccl_comm_remember(ncclComm_t comm, int rank, int ranks, int blocking, int device)
{
    if (!comm) return;
    struct nccl_comm_info info = {.rank = rank, .ranks = ranks, .blocking = blocking};
    /* A nonblocking init still in progress answers no query yet: asked again at the lookup. */
    info.device = rank >= 0 ? comm_device(comm, device) : device;
    store_comm(comm, &info);
    learn_rank(rank, ranks);
    /* The device code is loaded here, before any graph capture can begin on this thread. */
    if (reprod_cuda_ready()) (void)reprod_cuda_kernels_loaded(info.device);
}

int nccl_comm_lookup(ncclComm_t comm, struct nccl_comm_info *info)
{
    if (!comm) return -1;
    pthread_mutex_lock(&table_lock);
    struct comm_entry *e = find_comm(comm);
    int known = e && e->info.rank >= 0 && e->info.ranks >= 1;
    int blocking = e ? e->info.blocking : 1;
    int device = e ? e->info.device : REPROD_CUDA_CURRENT_DEVICE;
    if (known) *info = e->info;
    pthread_mutex_unlock(&table_lock);
    if (known) return 0;
    /* Made by a call the shim did not see, or a nonblocking init that has finished since. */
    const struct nccl_real *real = nccl_real();
    int rank = -1, ranks = -1;
    if (!real->CommCount || !real->CommUserRank || real->CommCount(comm, &ranks) != ncclSuccess ||
        real->CommUserRank(comm, &rank) != ncclSuccess || ranks < 1 || rank < 0 || rank >= ranks)
        return -1;
    info->rank = rank, info->ranks = ranks, info->blocking = blocking;
    info->device = comm_device(comm, device);
    store_comm(comm, info);
    learn_rank(rank, ranks);
    return 0;
}

int nccl_comm_current(ncclComm_t comm, uint64_t serial)
{
    pthread_mutex_lock(&table_lock);
    struct comm_entry *e = find_comm(comm);
    int current = e && e->info.serial == serial;
    pthread_mutex_unlock(&table_lock);
    return current;
}

void nccl_comm_forget(ncclComm_t comm)
{
    struct comm_entry *gone = NULL;
    struct premul_entry *gone_ops = NULL;
    pthread_mutex_lock(&table_lock);
    for (struct comm_entry **p = &comms[bucket_of(comm, 0)]; *p; p = &(*p)->next)
        if ((*p)->comm == comm) {
            gone = *p;
            *p = gone->next;
            break;
        }
    for (size_t b = 0; b < BUCKETS; b++)
        for (struct premul_entry **p = &premuls[b]; *p;) {
            if ((*p)->comm != comm) {
                p = &(*p)->next;
                continue;
            }
            struct premul_entry *e = *p;
            *p = e->next;
            e->next = gone_ops;
            gone_ops = e;
        }
    pthread_mutex_unlock(&table_lock);
    free(gone);
    nccl_rounds_comm_gone(comm);
    while (gone_ops) {
        struct premul_entry *next = gone_ops->next;
        free(gone_ops);
        gone_ops = next;
    }
}

int nccl_premul_lookup(ncclComm_t comm, ncclRedOp_t op, struct nccl_premul *premul)
{
    int found = -1;
    pthread_mutex_lock(&table_lock);
    for (struct premul_entry *e = premuls[bucket_of(comm, op)]; e; e = e->next)
        if (e->comm == comm && e->op == op) {
            *premul = e->premul;
            found = 0;
            break;
        }
    pthread_mutex_unlock(&table_lock);
    return found;
}

/* Remove PreMulSum `op` of `comm` (ncclRedOpDestroy: the op value may be reused at once). */
static void premul_forget(ncclComm_t comm, ncclRedOp_t op)
{
    struct premul_entry *gone = NULL;
    pthread_mutex_lock(&table_lock);
    for (struct premul_entry **p = &premuls[bucket_of(comm, op)]; *p; p = &(*p)->next)
        if ((*p)->comm == comm && (*p)->op == op) {
            gone = *p;
            *p = gone->next;
            break;
        }
    pthread_mutex_unlock(&table_lock);
    free(gone);
}

static void premul_remember(ncclComm_t comm, ncclRedOp_t op, const struct nccl_premul *premul)
{
    premul_forget(comm, op); /* a stale entry of a value NCCL reuses */
    struct premul_entry *e = calloc(1, sizeof *e);
    if (!e) return; /* unknown at the call: passed through, logged */
    e->comm = comm, e->op = op, e->premul = *premul;
    pthread_mutex_lock(&table_lock);
    size_t b = bucket_of(comm, op);
    e->next = premuls[b];
    premuls[b] = e;
    pthread_mutex_unlock(&table_lock);
}

/* ---- Hooks ----------------------------------------------------------------------------- */

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommInitAll(ncclComm_t *comms_out, int ndev, const int *devlist);
ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nId,
                                      ncclUniqueId *ids, ncclConfig_t *config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

static int config_blocking(const ncclConfig_t *config)
{
    return !(config && config->blocking == 0);
}

/* After an init that returned `rc`: remember the new communicator. A nonblocking init in
 * progress has no rank to report yet: it is asked for at the first reduction. */
static void after_init(ncclResult_t rc, ncclComm_t *comm, int rank, int ranks, int blocking)
{
    if (!comm || (rc != ncclSuccess && rc != ncclInProgress)) return;
    if (rc == ncclInProgress) rank = ranks = -1;
    /* NCCL's communicator takes the device current at its init. */
    nccl_comm_remember(*comm, rank, ranks, blocking, reprod_cuda_current_device());
}

REPROD_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommInitRank) return nccl_missing("ncclCommInitRank", ncclSystemError);
    ncclResult_t rc = real->CommInitRank(comm, nranks, id, rank);
    after_init(rc, comm, rank, nranks, 1);
    return rc;
}

REPROD_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                                  int rank, ncclConfig_t *config)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommInitRankConfig) return nccl_missing("ncclCommInitRankConfig", ncclSystemError);
    ncclResult_t rc = real->CommInitRankConfig(comm, nranks, id, rank, config);
    after_init(rc, comm, rank, nranks, config_blocking(config));
    return rc;
}

REPROD_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank,
                                                    int nId, ncclUniqueId *ids,
                                                    ncclConfig_t *config)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommInitRankScalable)
        return nccl_missing("ncclCommInitRankScalable", ncclSystemError);
    ncclResult_t rc = real->CommInitRankScalable(comm, nranks, rank, nId, ids, config);
    after_init(rc, comm, rank, nranks, config_blocking(config));
    return rc;
}

REPROD_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms_out, int ndev, const int *devlist)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommInitAll) return nccl_missing("ncclCommInitAll", ncclSystemError);
    ncclResult_t rc = real->CommInitAll(comms_out, ndev, devlist);
    if (rc == ncclSuccess && comms_out)
        for (int i = 0; i < ndev; i++)
            nccl_comm_remember(comms_out[i], i, ndev, 1, devlist ? devlist[i] : i);
    return rc;
}

/* A child's rank and size are asked of the library at its first reduction (a nonblocking
 * split may still be in progress here). */
REPROD_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                         ncclConfig_t *config)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommSplit) return nccl_missing("ncclCommSplit", ncclSystemError);
    struct nccl_comm_info parent = {.blocking = 1, .device = REPROD_CUDA_CURRENT_DEVICE};
    int known = nccl_comm_lookup(comm, &parent) == 0;
    int blocking = config ? config_blocking(config) : (known ? parent.blocking : 1);
    ncclResult_t rc = real->CommSplit(comm, color, key, newcomm, config);
    /* The child is on its parent's device. */
    if ((rc == ncclSuccess || rc == ncclInProgress) && newcomm && *newcomm)
        nccl_comm_remember(*newcomm, -1, -1, blocking,
                           known ? parent.device : REPROD_CUDA_CURRENT_DEVICE);
    return rc;
}

REPROD_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommDestroy) return nccl_missing("ncclCommDestroy", ncclSystemError);
    if (comm) nccl_comm_forget(comm);
    return real->CommDestroy(comm);
}

REPROD_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommAbort) return nccl_missing("ncclCommAbort", ncclSystemError);
    if (comm) nccl_comm_forget(comm);
    return real->CommAbort(comm);
}

/* Finalize flushes the communicator's work; it stays usable for queries until destroyed. */
REPROD_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommFinalize) return nccl_missing("ncclCommFinalize", ncclSystemError);
    return real->CommFinalize(comm);
}

/* The op's state is copied here, as NCCL copies it: a host-immediate scalar is read now
 * (ncclTypeSize(datatype) bytes), a device scalar is read by each reduction in stream order. */
REPROD_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                    ncclDataType_t datatype,
                                                    ncclScalarResidence_t residence,
                                                    ncclComm_t comm)
{
    const struct nccl_real *real = nccl_real();
    if (!real->RedOpCreatePreMulSum)
        return nccl_missing("ncclRedOpCreatePreMulSum", ncclSystemError);
    ncclResult_t rc = real->RedOpCreatePreMulSum(op, scalar, datatype, residence, comm);
    if (rc != ncclSuccess || !op || !scalar) return rc;
    struct nccl_premul premul = {.datatype = datatype, .residence = residence};
    size_t bytes = nccl_type_bytes(datatype);
    if (residence == ncclScalarHostImmediate && bytes)
        memcpy(&premul.scalar_bits, scalar, bytes); /* little-endian: the low bytes */
    else
        premul.scalar_device = scalar;
    premul_remember(comm, *op, &premul);
    return rc;
}

REPROD_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    const struct nccl_real *real = nccl_real();
    if (!real->RedOpDestroy) return nccl_missing("ncclRedOpDestroy", ncclSystemError);
    premul_forget(comm, op);
    return real->RedOpDestroy(op, comm);
}
