/* mpi_complete.c: the calls that complete, start or free requests (MPI_Wait, Waitall, Waitany,
 * Waitsome, Test, Testall, Testany, Testsome, Request_get_status, Request_free, Start,
 * Startall) and MPI_Op_free.
 *
 * Before the real call, the entries of the shim's requests among the arguments are claimed
 * (mpi_pending.h); after it, each one whose request completed is reduced into the caller's
 * buffer before the call returns, and the others are given back. Which requests completed is
 * read from the call's own answer: its return code, the index or indices it reports, and for
 * MPI_ERR_IN_STATUS each status's error (MPI_ERR_PENDING: not completed). When nothing is
 * pending, each costs one atomic load more than the real call.
 */
#include "mpi/mpi_pending.h"

#include "runtime/log.h"
#include "runtime/stats.h"

#include <stdlib.h>

/* Claimed entries of up to this many requests live on the stack. */
#define STACK_ENTRIES 64

/* How one of our requests stands after a completion call. */
enum outcome { STILL_PENDING, COMPLETED, FAILED };

/* The outcome of request `index` of an "all"-style call that returned `rc`, from its status
 * when the call has per-request errors, else from the request's slot (a completed
 * nonpersistent request is set to MPI_REQUEST_NULL). */
static enum outcome outcome_of(int rc, const void *statuses, long index, const void *requests,
                               const struct pending *entry)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    if (rc == REPROD_MPI_OK) return COMPLETED;
    if (mpi_error_class(rc) == mpi->abi->err_in_status &&
        (uintptr_t)statuses != mpi->abi->statuses_ignore) {
        int error = mpi_error_class(mpi_status_error(statuses, index));
        if (error == REPROD_MPI_OK) return COMPLETED;
        return error == mpi->abi->err_pending ? STILL_PENDING : FAILED;
    }
    /* Without statuses, a nonpersistent request set to MPI_REQUEST_NULL completed; whether it
     * succeeded the call does not say (nor to the application): its result is reduced. */
    if (!entry->persistent && mpi_handle_load(requests, index) == mpi->request_null)
        return COMPLETED;
    return STILL_PENDING;
}

/* Act on the outcome of a claimed entry; fold a reduction's error into *rc. */
static void settle(struct pending *entry, enum outcome outcome, int *rc)
{
    if (outcome == STILL_PENDING) {
        mpi_pending_unclaim(entry);
        return;
    }
    int error = mpi_pending_finish(entry, outcome == COMPLETED);
    if (error != REPROD_MPI_OK && *rc == REPROD_MPI_OK) *rc = error;
}

/* Room for the claimed entries of `count` requests. */
static struct pending **entry_array(int count, struct pending *stack[STACK_ENTRIES])
{
    if (count <= STACK_ENTRIES) return stack;
    return calloc((size_t)count, sizeof(struct pending *));
}

static int wait_or_test(void *request, int *flag, void *status)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct pending *entry = NULL;
    if (mpi_pending_any() && request) entry = mpi_pending_claim(mpi_handle_load(request, 0), NULL);
    int rc = flag ? mpi->real.Test(request, flag, status) : mpi->real.Wait(request, status);
    if (!entry) return rc;
    if (flag && !*flag && rc == REPROD_MPI_OK) {
        mpi_pending_unclaim(entry);
        return rc;
    }
    /* A single request's error is the call's: it completed, and failed. */
    int error = mpi_pending_finish(entry, rc == REPROD_MPI_OK);
    return rc == REPROD_MPI_OK ? error : rc;
}

MPI_HOOK(Wait, (void *request, void *status))
{
    if (!mpi_pending_any() || !mpi_hook_enter()) return REAL_MPI(Wait)(request, status);
    int rc = wait_or_test(request, NULL, status);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Test, (void *request, int *flag, void *status))
{
    if (!mpi_pending_any() || !flag || !mpi_hook_enter())
        return REAL_MPI(Test)(request, flag, status);
    int rc = wait_or_test(request, flag, status);
    mpi_hook_leave();
    return rc;
}

/* MPI_Waitall (flag NULL) and MPI_Testall. */
static int all(int count, void *requests, int *flag, void *statuses)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct pending *stack[STACK_ENTRIES];
    struct pending **entries = entry_array(count, stack);
    if (!entries) /* no memory to track them: the reductions happen at their next Wait/Test */
        return flag ? mpi->real.Testall(count, requests, flag, statuses)
                    : mpi->real.Waitall(count, requests, statuses);
    int claimed = mpi_pending_claim_array(count, requests, entries);
    int rc = flag ? mpi->real.Testall(count, requests, flag, statuses)
                  : mpi->real.Waitall(count, requests, statuses);
    for (int i = 0; i < count && claimed > 0; i++) {
        if (!entries[i]) continue;
        claimed--;
        /* Testall completes all requests or none, unless some failed. */
        enum outcome outcome = flag && !*flag && rc == REPROD_MPI_OK
                                   ? STILL_PENDING
                                   : outcome_of(rc, statuses, i, requests, entries[i]);
        settle(entries[i], outcome, &rc);
    }
    if (entries != stack) free(entries);
    return rc;
}

MPI_HOOK(Waitall, (int count, void *requests, void *statuses))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !mpi_hook_enter())
        return REAL_MPI(Waitall)(count, requests, statuses);
    int rc = all(count, requests, NULL, statuses);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Testall, (int count, void *requests, int *flag, void *statuses))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !flag || !mpi_hook_enter())
        return REAL_MPI(Testall)(count, requests, flag, statuses);
    int rc = all(count, requests, flag, statuses);
    mpi_hook_leave();
    return rc;
}

/* MPI_Waitany (flag NULL) and MPI_Testany: the request at *index completed, no other. */
static int any(int count, void *requests, int *index, int *flag, void *status)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct pending *stack[STACK_ENTRIES];
    struct pending **entries = entry_array(count, stack);
    if (!entries)
        return flag ? mpi->real.Testany(count, requests, index, flag, status)
                    : mpi->real.Waitany(count, requests, index, status);
    int claimed = mpi_pending_claim_array(count, requests, entries);
    int rc = flag ? mpi->real.Testany(count, requests, index, flag, status)
                  : mpi->real.Waitany(count, requests, index, status);
    int done = (!flag || *flag) && *index != mpi->abi->undefined && *index >= 0 && *index < count
                   ? *index
                   : -1;
    for (int i = 0; i < count && claimed > 0; i++) {
        if (!entries[i]) continue;
        claimed--;
        enum outcome outcome = STILL_PENDING;
        if (i == done) outcome = rc == REPROD_MPI_OK ? COMPLETED : FAILED;
        settle(entries[i], outcome, &rc);
    }
    if (entries != stack) free(entries);
    return rc;
}

MPI_HOOK(Waitany, (int count, void *requests, int *index, void *status))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !index || !mpi_hook_enter())
        return REAL_MPI(Waitany)(count, requests, index, status);
    int rc = any(count, requests, index, NULL, status);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Testany, (int count, void *requests, int *index, int *flag, void *status))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !index || !flag || !mpi_hook_enter())
        return REAL_MPI(Testany)(count, requests, index, flag, status);
    int rc = any(count, requests, index, flag, status);
    mpi_hook_leave();
    return rc;
}

/* MPI_Waitsome and MPI_Testsome (`test`): the requests at indices[0 .. *outcount) completed,
 * status j telling request indices[j]'s error under MPI_ERR_IN_STATUS. */
static int some(int count, void *requests, int *outcount, int indices[], void *statuses,
                int test)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct pending *stack[STACK_ENTRIES];
    struct pending **entries = entry_array(count, stack);
    if (!entries)
        return test ? mpi->real.Testsome(count, requests, outcount, indices, statuses)
                    : mpi->real.Waitsome(count, requests, outcount, indices, statuses);
    int claimed = mpi_pending_claim_array(count, requests, entries);
    int rc = test ? mpi->real.Testsome(count, requests, outcount, indices, statuses)
                  : mpi->real.Waitsome(count, requests, outcount, indices, statuses);
    int in_status = rc != REPROD_MPI_OK && mpi_error_class(rc) == mpi->abi->err_in_status;
    int no_statuses = (uintptr_t)statuses == mpi->abi->statuses_ignore;
    int completed = *outcount == mpi->abi->undefined ? 0 : *outcount;
    for (int j = 0; j < completed; j++) {
        int i = indices[j];
        if (i < 0 || i >= count || !entries[i]) continue;
        /* Without statuses the call does not say which failed: each is reduced. */
        int succeeded =
            rc == REPROD_MPI_OK || (in_status && no_statuses) ||
            (in_status && mpi_error_class(mpi_status_error(statuses, j)) == REPROD_MPI_OK);
        struct pending *entry = entries[i];
        entries[i] = NULL;
        claimed--;
        settle(entry, succeeded ? COMPLETED : FAILED, &rc);
    }
    for (int i = 0; i < count && claimed > 0; i++) {
        if (!entries[i]) continue;
        claimed--;
        mpi_pending_unclaim(entries[i]);
    }
    if (entries != stack) free(entries);
    return rc;
}

MPI_HOOK(Waitsome, (int count, void *requests, int *outcount, int indices[], void *statuses))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !outcount || !indices ||
        !mpi_hook_enter())
        return REAL_MPI(Waitsome)(count, requests, outcount, indices, statuses);
    int rc = some(count, requests, outcount, indices, statuses, 0);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Testsome, (int count, void *requests, int *outcount, int indices[], void *statuses))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !outcount || !indices ||
        !mpi_hook_enter())
        return REAL_MPI(Testsome)(count, requests, outcount, indices, statuses);
    int rc = some(count, requests, outcount, indices, statuses, 1);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Request_get_status, (mpi_handle_arg request_arg, int *flag, void *status))
{
    mpi_handle request = mpi_handle_of(request_arg);
    if (!mpi_pending_any() || !flag || !mpi_hook_enter())
        return REAL_MPI(Request_get_status)(request, flag, status);
    int busy = 0;
    struct pending *entry = mpi_pending_claim(request, &busy);
    int rc = REAL_MPI(Request_get_status)(request, flag, status);
    if (entry) {
        /* Complete but not freed: the caller may read the buffer now, so reduce now; the Wait
         * or Test that frees the request later finds it reduced. */
        if (rc == REPROD_MPI_OK && *flag && (!entry->persistent || entry->active)) {
            int error = mpi_pending_reduce(entry);
            if (error != REPROD_MPI_OK) rc = error;
        }
        mpi_pending_unclaim(entry);
    } else if (busy && rc == REPROD_MPI_OK) {
        /* Another thread is completing it and has not reduced yet: not complete for us. */
        *flag = 0;
    }
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Request_free, (void *request))
{
    if (!mpi_pending_any() || !request || !mpi_hook_enter())
        return REAL_MPI(Request_free)(request);
    struct pending *entry = mpi_pending_claim(mpi_handle_load(request, 0), NULL);
    if (entry) {
        mpi_pending_remove(entry);
        if (entry->persistent && !entry->active) {
            mpi_pending_free(entry);
        } else {
            /* Freeing an active collective request is erroneous in MPI; if it happens anyway,
             * the library may still write the scratch and use the handles: they are left
             * allocated. */
            reprod_log(REPROD_LOG_WARN,
                       "warning: %s: request freed before completion; result not reduced",
                       entry->reduction.api);
        }
    }
    int rc = REAL_MPI(Request_free)(request);
    mpi_hook_leave();
    return rc;
}

/* Mark the persistent entry of the request at `requests[index]` (if ours) started or, when
 * `started` is 0, back to inactive. */
static void mark_started(const void *requests, long index, int started)
{
    struct pending *entry = mpi_pending_claim(mpi_handle_load(requests, index), NULL);
    if (!entry) return;
    if (entry->persistent) {
        entry->active = started;
        if (started) {
            entry->reduced = 0;
            entry->reduction.start_ns = reprod_stats_clock_ns();
            entry->reduction.engine_ns = entry->reduction.shim_ns = 0;
            mpi_trace_input(&entry->reduction, entry->source, entry->elements);
            /* The one-pass fixed route sums words: this round's, from the buffer as it is now. */
            if (entry->words)
                mpi_fixed_one_pass_split(&entry->reduction, entry->source, entry->block_elements,
                                         entry->words);
        }
    }
    mpi_pending_unclaim(entry);
}

MPI_HOOK(Start, (void *request))
{
    if (!mpi_pending_any() || !request || !mpi_hook_enter()) return REAL_MPI(Start)(request);
    mark_started(request, 0, 1);
    int rc = REAL_MPI(Start)(request);
    if (rc != REPROD_MPI_OK) mark_started(request, 0, 0);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Startall, (int count, void *requests))
{
    if (!mpi_pending_any() || count <= 0 || !requests || !mpi_hook_enter())
        return REAL_MPI(Startall)(count, requests);
    for (int i = 0; i < count; i++)
        mark_started(requests, i, 1);
    int rc = REAL_MPI(Startall)(count, requests);
    for (int i = 0; i < count && rc != REPROD_MPI_OK; i++)
        mark_started(requests, i, 0);
    mpi_hook_leave();
    return rc;
}

/* MPI_Op_free and MPI_Type_free of a handle a reduction in flight still uses: the
 * application's handle becomes the null handle at once, as MPI says; the object itself is freed
 * when the last reduction is done with it. */
static int free_or_defer(void *handle, int (*real_free)(void *), mpi_handle null_handle)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    if (!mpi_pending_any() || !handle || !mpi->usable) return real_free(handle);
    if (mpi_pending_defer_free(mpi_handle_load(handle, 0))) {
        mpi_handle_store(handle, 0, null_handle);
        return REPROD_MPI_OK;
    }
    return real_free(handle);
}

MPI_HOOK(Op_free, (void *op))
{
    return free_or_defer(op, REAL_MPI(Op_free), reprod_mpi()->op_null);
}

MPI_HOOK(Type_free, (void *datatype))
{
    return free_or_defer(datatype, REAL_MPI(Type_free), reprod_mpi()->datatype_null);
}
