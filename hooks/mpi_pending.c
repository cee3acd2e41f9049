/* mpi_pending.c: the table of nonblocking and persistent reductions in flight (a hash table
 * keyed by request handle, so that completing thousands of requests costs a lookup each), the
 * handles their entries hold, and their completion. See mpi_pending.h for the claim protocol.
 * One lock guards the table; it is never held across a call into MPI. */
#include "mpi_pending.h"

#include "init.h"
#include "log.h"
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 256 /* grows to keep chains short: 20,000 requests, chains of ~2 */
#define MAX_HELD_OPS    64  /* distinct user ops held at once; beyond, frees go through */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending **buckets;
static size_t bucket_count;
static size_t entry_count;
static _Atomic size_t entry_count_hint; /* entry_count for the lock-free fast path */
static atomic_flag fork_handler_added = ATOMIC_FLAG_INIT;

/* User ops that entries hold: their MPI_Op_free waits until the last entry lets go. */
static struct held_op {
    mpi_handle op;
    int entries;
    int free_requested;
} held_ops[MAX_HELD_OPS];

static void reset_after_fork(void)
{
    /* Another thread of the parent may have held the lock: the child starts with a fresh one
     * (its entries belong to the parent's MPI and never complete here). */
    pthread_mutex_init(&table_lock, NULL);
}

static size_t bucket_of(mpi_handle request, size_t count)
{
    uint64_t mixed = (uint64_t)request * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(mixed >> 32) & (count - 1);
}

/* Double the buckets (under the lock). A failed allocation keeps the old ones: longer chains,
 * nothing lost. */
static void grow_table(void)
{
    size_t count = bucket_count ? bucket_count * 2 : INITIAL_BUCKETS;
    struct pending **grown = calloc(count, sizeof *grown);
    if (!grown) return;
    for (size_t b = 0; b < bucket_count; b++) {
        struct pending *entry = buckets[b];
        while (entry) {
            struct pending *next = entry->next;
            size_t target = bucket_of(entry->request, count);
            entry->next = grown[target];
            grown[target] = entry;
            entry = next;
        }
    }
    free(buckets);
    buckets = grown;
    bucket_count = count;
}

/* Unlink `entry` from its bucket (under the lock). */
static void unlink_entry(struct pending *entry)
{
    struct pending **link = &buckets[bucket_of(entry->request, bucket_count)];
    while (*link && *link != entry)
        link = &(*link)->next;
    if (!*link) return;
    *link = entry->next;
    entry_count--;
    atomic_store(&entry_count_hint, entry_count);
}

/* Hold `op` for one more entry (under the lock). Returns 0 when the table of held ops is full:
 * the entry then does not hold it (an application that frees a user op with more than
 * MAX_HELD_OPS distinct ops in flight falls back to the library's own behaviour). */
static int hold_op(mpi_handle op)
{
    struct held_op *free_slot = NULL;
    for (int i = 0; i < MAX_HELD_OPS; i++) {
        if (held_ops[i].entries > 0 && held_ops[i].op == op) {
            held_ops[i].entries++;
            return 1;
        }
        if (held_ops[i].entries == 0 && !free_slot) free_slot = &held_ops[i];
    }
    if (!free_slot) return 0;
    *free_slot = (struct held_op){op, 1, 0};
    return 1;
}

/* Let go of `op` (under the lock). Returns 1 when the application freed it meanwhile and this
 * was the last entry: the caller frees it for real, after dropping the lock. */
static int release_op(mpi_handle op)
{
    for (int i = 0; i < MAX_HELD_OPS; i++) {
        if (held_ops[i].entries == 0 || held_ops[i].op != op) continue;
        return --held_ops[i].entries == 0 && held_ops[i].free_requested;
    }
    return 0;
}

int mpi_pending_defer_op_free(mpi_handle op)
{
    int deferred = 0;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_HELD_OPS && !deferred; i++) {
        if (held_ops[i].entries > 0 && held_ops[i].op == op && !held_ops[i].free_requested) {
            held_ops[i].free_requested = 1;
            deferred = 1;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return deferred;
}

struct pending *mpi_pending_new(const struct mpi_reduction *reduction, mpi_count elements,
                                size_t extra_bytes, void **extra)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct pending *entry = calloc(1, sizeof *entry);
    if (!entry) mpi_fatal_no_memory(reduction, sizeof *entry);
    entry->reduction = *reduction;
    entry->reduction.keeps_scratch = 1;
    entry->blocks = mpi_scratch(&entry->reduction, elements, &entry->raw, extra_bytes, extra);
    /* The application may free its datatype and op as soon as the call returns (MPI allows
     * it; MPICH's nonblocking3 test does it): the entry works with handles it owns. */
    if (!reduction->type.predefined) {
        mpi_handle duplicate = 0;
        if (mpi->real.Type_dup(reduction->datatype, &duplicate) != REPROD_MPI_OK)
            mpi_fatal_no_memory(reduction, 0);
        entry->held_datatype = duplicate & mpi->handle_mask;
        entry->reduction.datatype = entry->held_datatype;
    }
    if (reprod_mpi_classify_op(reduction->op) == REPROD_OPCLASS_USER) {
        pthread_mutex_lock(&table_lock);
        if (hold_op(reduction->op)) entry->held_op = reduction->op;
        pthread_mutex_unlock(&table_lock);
    }
    return entry;
}

void mpi_pending_free(struct pending *entry)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_scratch_release(entry->raw);
    if (entry->held_datatype) mpi->real.Type_free(&entry->held_datatype);
    if (entry->held_op) {
        pthread_mutex_lock(&table_lock);
        int free_now = release_op(entry->held_op);
        pthread_mutex_unlock(&table_lock);
        if (free_now) mpi->real.Op_free(&entry->held_op);
    }
    free(entry);
}

void mpi_pending_add(struct pending *entry)
{
    if (!atomic_flag_test_and_set(&fork_handler_added))
        reprod_init_on_fork_child(reset_after_fork);
    struct pending *stale = NULL;
    pthread_mutex_lock(&table_lock);
    if (entry_count + 1 > 2 * bucket_count) grow_table();
    if (bucket_count) {
        /* An unclaimed entry with the same handle: its request was completed by a call the
         * shim does not see, and the library has reused the handle. Its scratch is no longer
         * the library's: drop it. */
        struct pending **link = &buckets[bucket_of(entry->request, bucket_count)];
        for (; *link; link = &(*link)->next) {
            if ((*link)->request == entry->request && !(*link)->claimed) {
                stale = *link;
                *link = stale->next;
                entry_count--;
                break;
            }
        }
        size_t b = bucket_of(entry->request, bucket_count);
        entry->claimed = 0;
        entry->next = buckets[b];
        buckets[b] = entry;
        entry_count++;
    }
    atomic_store(&entry_count_hint, entry_count);
    pthread_mutex_unlock(&table_lock);
    if (!bucket_count) {
        /* No memory for even the first buckets: the entry cannot be found later. */
        mpi_fatal_no_memory(&entry->reduction, INITIAL_BUCKETS * sizeof *buckets);
    }
    if (stale) {
        reprod_log(REPROD_LOG_WARN,
                   "warning: %s: its request was completed by a call reprod does not intercept; "
                   "its result was not reduced",
                   stale->reduction.api);
        mpi_pending_free(stale);
    }
}

int mpi_pending_any(void)
{
    return atomic_load_explicit(&entry_count_hint, memory_order_acquire) != 0;
}

/* The unclaimed entry of `request` (under the lock), noting in *busy a claimed one. */
static struct pending *find_unclaimed(mpi_handle request, int *busy)
{
    if (!bucket_count) return NULL;
    for (struct pending *entry = buckets[bucket_of(request, bucket_count)]; entry;
         entry = entry->next) {
        if (entry->request != request) continue;
        if (!entry->claimed) return entry;
        if (busy) *busy = 1;
    }
    return NULL;
}

struct pending *mpi_pending_claim(mpi_handle request, int *busy)
{
    if (busy) *busy = 0;
    if (!mpi_pending_any()) return NULL;
    pthread_mutex_lock(&table_lock);
    struct pending *entry = find_unclaimed(request, busy);
    if (entry) entry->claimed = 1;
    pthread_mutex_unlock(&table_lock);
    return entry;
}

int mpi_pending_claim_array(int count, const void *requests, struct pending **entries)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int claimed = 0;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < count; i++) {
        entries[i] = find_unclaimed(mpi_handle_load(requests, i) & mpi->handle_mask, NULL);
        if (entries[i]) {
            entries[i]->claimed = 1;
            claimed++;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return claimed;
}

void mpi_pending_unclaim(struct pending *entry)
{
    pthread_mutex_lock(&table_lock);
    entry->claimed = 0;
    pthread_mutex_unlock(&table_lock);
}

void mpi_pending_remove(struct pending *entry)
{
    pthread_mutex_lock(&table_lock);
    unlink_entry(entry);
    pthread_mutex_unlock(&table_lock);
}

int mpi_pending_reduce(struct pending *entry)
{
    if (entry->reduced || !entry->out) return REPROD_MPI_OK;
    entry->reduced = 1;
    entry->reduction.start_ns = reprod_stats_clock_ns();
    return mpi_reduce_blocks(&entry->reduction, entry->blocks, entry->block_elements,
                             entry->block_count, entry->out);
}

int mpi_pending_finish(struct pending *entry, int succeeded)
{
    int rc = REPROD_MPI_OK;
    if (!entry->persistent || entry->active) {
        if (succeeded) {
            rc = mpi_pending_reduce(entry);
            mpi_reduction_done(&entry->reduction, entry->elements, entry->how, rc, entry->out,
                               entry->block_elements);
        } else {
            reprod_log(REPROD_LOG_WARN,
                       "warning: %s: the data movement failed; result not reduced",
                       entry->reduction.api);
        }
    }
    if (entry->persistent) {
        entry->active = 0;
        mpi_pending_unclaim(entry);
        return rc;
    }
    mpi_pending_remove(entry);
    mpi_pending_free(entry);
    return rc;
}
