/* mpi_nonblocking.c: MPI_Iallreduce, MPI_Ireduce, MPI_Ireduce_scatter(_block), MPI_Iscan,
 * MPI_Iexscan, and the Wait/Test calls that complete them.
 *
 * Each nonblocking reduction is ONE nonblocking data movement of the real library (all-gather,
 * gather or all-to-all) that the library progresses on its own; the request the caller gets is
 * that movement's request. When a Wait/Test call reports it complete, we reduce the gathered
 * contributions into the caller's buffer before returning. A second collective phase (as the
 * blocking all-reduce uses) would need the shim to progress it, and a rank blocked in an
 * unrelated MPI call would then hang its peers; one phase cannot.
 */
#include "mpi_path.h"

#include "log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A nonblocking reduction whose data is in flight or gathered but not yet reduced. */
struct pending {
    MPI_Request request;            /* the caller's handle (the data movement's request) */
    struct mpi_reduction reduction; /* decided at the start */
    void *raw;                      /* scratch to free */
    char *blocks;                   /* contributions, in rank order */
    size_t block_elements;          /* elements per contribution */
    int block_count;                /* contributions to reduce (a scan's prefix length) */
    void *out;                      /* where the result goes; NULL: nothing to reduce here */
    long long elements;             /* for the statistics */
    const char *how;                /* for the log */
    int reduced;                    /* already reduced (MPI_Request_get_status saw it done) */
    struct pending *next;
};

static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending *pending_list;
static _Atomic int pending_count; /* lets Wait/Test skip the lock when nothing is pending */

static void add_pending(struct pending *entry)
{
    pthread_mutex_lock(&pending_lock);
    entry->next = pending_list;
    pending_list = entry;
    atomic_fetch_add(&pending_count, 1);
    pthread_mutex_unlock(&pending_lock);
}

/* Find the entry of `request`; with `take`, also unlink it (the caller then owns it). */
static struct pending *find_pending(MPI_Request request, int take)
{
    if (atomic_load(&pending_count) == 0 || request == NULL) return NULL;
    pthread_mutex_lock(&pending_lock);
    struct pending **link = &pending_list;
    while (*link && (*link)->request != request)
        link = &(*link)->next;
    struct pending *entry = *link;
    if (entry && take) {
        *link = entry->next;
        atomic_fetch_sub(&pending_count, 1);
    }
    pthread_mutex_unlock(&pending_lock);
    return entry;
}

/* Reduce an entry's gathered contributions into the caller's buffer. */
static int reduce_entry(struct pending *entry)
{
    if (entry->reduced || !entry->out) return MPI_SUCCESS;
    entry->reduced = 1;
    entry->reduction.start_ns = reprod_stats_clock_ns();
    return mpi_reduce_blocks(&entry->reduction, entry->blocks, entry->block_elements,
                             entry->block_count, entry->out);
}

/* The request `request` (its handle before the Wait/Test call) completed, successfully or not:
 * if it is ours, reduce (when it succeeded) and forget it. Returns the reduction's error, or
 * MPI_SUCCESS. */
static int finish(MPI_Request request, int succeeded)
{
    struct pending *entry = find_pending(request, 1);
    if (!entry) return MPI_SUCCESS;
    int rc = MPI_SUCCESS;
    if (succeeded) {
        rc = reduce_entry(entry);
        mpi_reduction_done(&entry->reduction, entry->elements, entry->how, rc, entry->out,
                           (long long)entry->block_elements);
    } else {
        reprod_log(REPROD_LOG_WARN, "warning: %s: the data movement failed; result not reduced",
                   entry->reduction.api);
    }
    mpi_scratch_release(entry->raw);
    free(entry);
    return rc;
}

/* Start: allocate the entry and its scratch for `elements` elements plus `extra_bytes`. */
static struct pending *new_pending(const struct mpi_reduction *reduction, size_t elements,
                                   size_t extra_bytes, void **extra)
{
    struct pending *entry = calloc(1, sizeof *entry);
    if (!entry) return NULL;
    entry->reduction = *reduction;
    entry->reduction.keeps_scratch = 1;
    entry->blocks = mpi_scratch(&entry->reduction, elements, &entry->raw, extra_bytes, extra);
    if (!entry->blocks) {
        free(entry);
        return NULL;
    }
    return entry;
}

/* The data movement started (rc) for `entry`: register it, or clean up. */
static int started(struct pending *entry, MPI_Request *request, int rc)
{
    struct mpi_reduction *reduction = &entry->reduction;
    reduction->shim_ns = reprod_stats_clock_ns() - reduction->start_ns;
    if (rc != MPI_SUCCESS) {
        mpi_scratch_release(entry->raw);
        free(entry);
        return rc;
    }
    /* Some requests are complete as they start, and not all are unique: Open MPI hands out its
     * one shared empty request for collectives on a single process. Such a reduction is done
     * now; only a request still in flight identifies its entry. */
    int complete = 0;
    if (reprod_mpi()->real.Request_get_status(*request, &complete, MPI_STATUS_IGNORE) ==
            MPI_SUCCESS &&
        complete) {
        int rc_reduce = reduce_entry(entry);
        mpi_reduction_done(reduction, entry->elements, entry->how, rc_reduce, entry->out,
                           (long long)entry->block_elements);
        mpi_scratch_release(entry->raw);
        free(entry);
        return rc_reduce;
    }
    entry->request = *request;
    add_pending(entry);
    return MPI_SUCCESS;
}

/* No scratch memory: the peers already chose the same deterministic path, so the call must
 * fail as MPI fails, through the communicator's error handler. */
static int no_memory(struct mpi_reduction *reduction, long long elements)
{
    return mpi_reduction_done(reduction, elements, "not started", MPI_ERR_NO_MEM, NULL, 0);
}

/* Iallreduce, Iscan and Iexscan: all-gather every contribution; at completion reduce all of
 * them (all-reduce) or the prefix up to this rank (scan: 0..rank, exclusive: 0..rank-1). */
static int gather_everywhere(const char *api, const void *sendbuf, void *recvbuf, int count,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request,
                             int kind)
{
    enum { ALLREDUCE, SCAN, EXSCAN };
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    if (mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason) !=
            REPROD_ACTION_PASS &&
        (aliased(sendbuf, recvbuf, count) || !request)) {
        reduction.action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    if (reduction.action == REPROD_ACTION_PASS) {
        if (kind == SCAN)
            PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), NULL, 0, Iscan,
                         sendbuf, recvbuf, count, datatype, op, comm, request);
        if (kind == EXSCAN)
            PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), NULL, 0, Iexscan,
                         sendbuf, recvbuf, count, datatype, op, comm, request);
        PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), NULL, 0, Iallreduce,
                     sendbuf, recvbuf, count, datatype, op, comm, request);
    }
    struct pending *entry =
        new_pending(&reduction, (size_t)count * (size_t)reduction.ranks, 0, NULL);
    if (!entry) return no_memory(&reduction, count);
    entry->block_elements = (size_t)count;
    entry->block_count = kind == ALLREDUCE ? reduction.ranks
                         : kind == SCAN    ? reduction.rank + 1
                                           : reduction.rank;
    entry->out = kind == EXSCAN && reduction.rank == 0 ? NULL : recvbuf; /* undefined there */
    entry->elements = count;
    entry->how = kind == ALLREDUCE ? "all-reduce (all-gather)" : "scan (all-gather)";
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&entry->reduction, source, count);
    int rc = reprod_mpi()->real.Iallgather(source, count, datatype, entry->blocks, count, datatype,
                                           comm, request);
    return started(entry, request, rc);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request)
{
    return gather_everywhere("MPI_Iallreduce", sendbuf, recvbuf, count, datatype, op, comm, request,
                             0);
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request *request)
{
    return gather_everywhere("MPI_Iscan", sendbuf, recvbuf, count, datatype, op, comm, request, 1);
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request *request)
{
    return gather_everywhere("MPI_Iexscan", sendbuf, recvbuf, count, datatype, op, comm, request,
                             2);
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request)
{
    static const char api[] = "MPI_Ireduce";
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    if (mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason) !=
            REPROD_ACTION_PASS &&
        (root < 0 || root >= reduction.ranks || !request ||
         (sendbuf == MPI_IN_PLACE && reduction.rank != root) ||
         (reduction.rank == root && aliased(sendbuf, recvbuf, count)))) {
        reduction.action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    if (reduction.action == REPROD_ACTION_PASS)
        PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), NULL, 0, Ireduce,
                     sendbuf, recvbuf, count, datatype, op, root, comm, request);
    const struct reprod_mpi *mpi = reprod_mpi();
    if (reduction.rank != root) {
        /* Nothing to reduce here: the gather's request is all there is. */
        mpi_trace_input(&reduction, sendbuf, count);
        int rc =
            mpi->real.Igather(sendbuf, count, datatype, NULL, 0, datatype, root, comm, request);
        return mpi_reduction_done(&reduction, count, "reduce (gather, not root)", rc, NULL, 0);
    }
    struct pending *entry =
        new_pending(&reduction, (size_t)count * (size_t)reduction.ranks, 0, NULL);
    if (!entry) return no_memory(&reduction, count);
    entry->block_elements = (size_t)count;
    entry->block_count = reduction.ranks;
    entry->out = recvbuf;
    entry->elements = count;
    entry->how = "reduce (gather)";
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&entry->reduction, source, count);
    int rc = mpi->real.Igather(source, count, datatype, entry->blocks, count, datatype, root, comm,
                               request);
    return started(entry, request, rc);
}

/* Ireduce_scatter and Ireduce_scatter_block: all-to-all of the chunks; at completion reduce
 * our chunk of every rank. The count arrays must live until completion: they sit in the
 * entry's scratch. */
static int scatter_chunks(const char *api, const void *sendbuf, void *recvbuf,
                          const int recvcounts[], int recvcount, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Request *request)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    int blockwise = recvcounts == NULL;
    long long total = 0;
    if (mpi_reduction_decide(&reduction, api, blockwise ? recvcount : 1, datatype, op, comm,
                             &reason) != REPROD_ACTION_PASS) {
        int why = mpi_check_counts(&reduction, recvcounts, recvcount, &total);
        if (why < 0 && (!request || aliased(sendbuf, recvbuf, total)))
            why = REPROD_PASS_BAD_ARGUMENT;
        if (why >= 0) {
            reduction.action = REPROD_ACTION_PASS;
            reason = (enum reprod_reason)why;
        }
    }
    if (reduction.action == REPROD_ACTION_PASS) {
        if (blockwise)
            PASS_TO_REAL(api, reason, recvcount, datatype, SOURCE(sendbuf, recvbuf), NULL, 0,
                         Ireduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm,
                         request);
        PASS_TO_REAL(api, reason, -1, datatype, NULL, NULL, 0, Ireduce_scatter, sendbuf, recvbuf,
                     recvcounts, datatype, op, comm, request);
    }
    int ranks = reduction.ranks;
    int mine = blockwise ? recvcount : recvcounts[reduction.rank];
    int *arrays = NULL;
    struct pending *entry = new_pending(&reduction, (size_t)mine * (size_t)ranks,
                                        4 * sizeof(int) * (size_t)ranks, (void **)&arrays);
    if (!entry) return no_memory(&reduction, total);
    int *send = arrays, *send_offsets = arrays + ranks;
    int *receive = arrays + 2 * ranks, *receive_offsets = arrays + 3 * ranks;
    int offset = 0;
    for (int r = 0; r < ranks; r++) {
        send[r] = blockwise ? recvcount : recvcounts[r];
        send_offsets[r] = offset;
        offset += send[r];
        receive[r] = mine;
        receive_offsets[r] = r * mine;
    }
    entry->block_elements = (size_t)mine;
    entry->block_count = ranks;
    entry->out = mine > 0 ? recvbuf : NULL;
    entry->elements = total;
    entry->how = "reduce-scatter (all-to-all)";
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&entry->reduction, source, total);
    int rc = reprod_mpi()->real.Ialltoallv(source, send, send_offsets, datatype, entry->blocks,
                                           receive, receive_offsets, datatype, comm, request);
    return started(entry, request, rc);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    if (!recvcounts)
        PASS_TO_REAL("MPI_Ireduce_scatter", REPROD_PASS_BAD_ARGUMENT, -1, datatype, NULL, NULL, 0,
                     Ireduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
    return scatter_chunks("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, 0, datatype, op,
                          comm, request);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    return scatter_chunks("MPI_Ireduce_scatter_block", sendbuf, recvbuf, NULL, recvcount, datatype,
                          op, comm, request);
}

/* Completion. Every call that can complete a request is hooked: the handles are copied
 * before the real call (it overwrites completed ones with MPI_REQUEST_NULL), and each of ours
 * that completed is reduced before we return. When nothing is pending they cost one atomic
 * load more than the real call. */

/* Copies of up to this many handles live on the stack. */
#define STACK_HANDLES 64

/* A copy of `count` handles, on the stack when they fit; NULL when there is no memory. */
static MPI_Request *copy_handles(int count, const MPI_Request requests[],
                                 MPI_Request stack[STACK_HANDLES])
{
    MPI_Request *copy = count <= STACK_HANDLES ? stack : malloc(sizeof(MPI_Request) * count);
    if (copy && count > 0) memcpy(copy, requests, sizeof(MPI_Request) * (size_t)count);
    return copy;
}

/* Whether request i succeeded, given the call's return code and its statuses. */
static int succeeded(int rc, const MPI_Status *statuses, int i)
{
    if (rc == MPI_SUCCESS) return 1;
    return rc == MPI_ERR_IN_STATUS && statuses != MPI_STATUSES_IGNORE &&
           statuses[i].MPI_ERROR == MPI_SUCCESS;
}

/* Finish the completed requests `indices[0 .. done)` of `copy`, folding errors into rc. */
static int finish_indices(int rc, const MPI_Request copy[], const int indices[], int done,
                          const MPI_Status *statuses)
{
    for (int j = 0; j < done; j++) {
        int error = finish(copy[indices[j]], succeeded(rc, statuses, j));
        if (error != MPI_SUCCESS && rc == MPI_SUCCESS) rc = error;
    }
    return rc;
}

/* Finish every request of `copy` (all completed), folding errors into rc. */
static int finish_all(int rc, const MPI_Request copy[], int count, const MPI_Status *statuses)
{
    for (int i = 0; i < count; i++) {
        if (!find_pending(copy[i], 0)) continue;
        int error = finish(copy[i], succeeded(rc, statuses, i));
        if (error != MPI_SUCCESS && rc == MPI_SUCCESS) rc = error;
    }
    return rc;
}

#define REAL_OR_INTERNAL(name)                                                                     \
    if (!REPROD_MPI_REAL(name)) return MPI_ERR_INTERN

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    REAL_OR_INTERNAL(Wait);
    if (atomic_load(&pending_count) == 0 || !request) return REPROD_MPI_REAL(Wait)(request, status);
    MPI_Request handle = *request;
    int rc = REPROD_MPI_REAL(Wait)(request, status);
    int error = finish(handle, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? error : rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    REAL_OR_INTERNAL(Test);
    if (atomic_load(&pending_count) == 0 || !request || !flag)
        return REPROD_MPI_REAL(Test)(request, flag, status);
    MPI_Request handle = *request;
    int rc = REPROD_MPI_REAL(Test)(request, flag, status);
    if (!*flag) return rc;
    int error = finish(handle, rc == MPI_SUCCESS);
    return rc == MPI_SUCCESS ? error : rc;
}

int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    REAL_OR_INTERNAL(Request_get_status);
    int rc = REPROD_MPI_REAL(Request_get_status)(request, flag, status);
    if (rc != MPI_SUCCESS || !flag || !*flag) return rc;
    /* Complete but not freed: the caller may read the buffer now, so reduce now; the Wait or
     * Test that frees the request later finds it reduced. */
    struct pending *entry = find_pending(request, 0);
    return entry ? reduce_entry(entry) : rc;
}

int MPI_Request_free(MPI_Request *request)
{
    REAL_OR_INTERNAL(Request_free);
    /* Freeing an active collective request is erroneous in MPI; if it happens anyway, forget
     * the entry so that a later request reusing the handle is not taken for ours. The scratch
     * may still be written by the library: it is left allocated. */
    struct pending *entry = request ? find_pending(*request, 1) : NULL;
    if (entry) {
        reprod_log(REPROD_LOG_WARN,
                   "warning: %s: request freed before completion; result not "
                   "reduced",
                   entry->reduction.api);
        free(entry);
    }
    return REPROD_MPI_REAL(Request_free)(request);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    REAL_OR_INTERNAL(Waitall);
    MPI_Request stack[STACK_HANDLES], *copy = NULL;
    if (atomic_load(&pending_count) == 0 || count <= 0 || !requests ||
        !(copy = copy_handles(count, requests, stack)))
        return REPROD_MPI_REAL(Waitall)(count, requests, statuses);
    int rc = REPROD_MPI_REAL(Waitall)(count, requests, statuses);
    rc = finish_all(rc, copy, count, statuses);
    if (copy != stack) free(copy);
    return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    REAL_OR_INTERNAL(Testall);
    MPI_Request stack[STACK_HANDLES], *copy = NULL;
    if (atomic_load(&pending_count) == 0 || count <= 0 || !requests || !flag ||
        !(copy = copy_handles(count, requests, stack)))
        return REPROD_MPI_REAL(Testall)(count, requests, flag, statuses);
    int rc = REPROD_MPI_REAL(Testall)(count, requests, flag, statuses);
    if (*flag) rc = finish_all(rc, copy, count, statuses);
    if (copy != stack) free(copy);
    return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    REAL_OR_INTERNAL(Waitany);
    MPI_Request stack[STACK_HANDLES], *copy = NULL;
    if (atomic_load(&pending_count) == 0 || count <= 0 || !requests || !index ||
        !(copy = copy_handles(count, requests, stack)))
        return REPROD_MPI_REAL(Waitany)(count, requests, index, status);
    int rc = REPROD_MPI_REAL(Waitany)(count, requests, index, status);
    if (*index != MPI_UNDEFINED && *index >= 0 && *index < count) {
        int error = finish(copy[*index], rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = error;
    }
    if (copy != stack) free(copy);
    return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    REAL_OR_INTERNAL(Testany);
    MPI_Request stack[STACK_HANDLES], *copy = NULL;
    if (atomic_load(&pending_count) == 0 || count <= 0 || !requests || !index || !flag ||
        !(copy = copy_handles(count, requests, stack)))
        return REPROD_MPI_REAL(Testany)(count, requests, index, flag, status);
    int rc = REPROD_MPI_REAL(Testany)(count, requests, index, flag, status);
    if (*flag && *index != MPI_UNDEFINED && *index >= 0 && *index < count) {
        int error = finish(copy[*index], rc == MPI_SUCCESS);
        if (rc == MPI_SUCCESS) rc = error;
    }
    if (copy != stack) free(copy);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    REAL_OR_INTERNAL(Waitsome);
    MPI_Request stack[STACK_HANDLES], *copy = NULL;
    if (atomic_load(&pending_count) == 0 || incount <= 0 || !requests || !outcount || !indices ||
        !(copy = copy_handles(incount, requests, stack)))
        return REPROD_MPI_REAL(Waitsome)(incount, requests, outcount, indices, statuses);
    int rc = REPROD_MPI_REAL(Waitsome)(incount, requests, outcount, indices, statuses);
    if (*outcount != MPI_UNDEFINED && *outcount > 0)
        rc = finish_indices(rc, copy, indices, *outcount, statuses);
    if (copy != stack) free(copy);
    return rc;
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    REAL_OR_INTERNAL(Testsome);
    MPI_Request stack[STACK_HANDLES], *copy = NULL;
    if (atomic_load(&pending_count) == 0 || incount <= 0 || !requests || !outcount || !indices ||
        !(copy = copy_handles(incount, requests, stack)))
        return REPROD_MPI_REAL(Testsome)(incount, requests, outcount, indices, statuses);
    int rc = REPROD_MPI_REAL(Testsome)(incount, requests, outcount, indices, statuses);
    if (*outcount != MPI_UNDEFINED && *outcount > 0)
        rc = finish_indices(rc, copy, indices, *outcount, statuses);
    if (copy != stack) free(copy);
    return rc;
}
