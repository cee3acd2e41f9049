/* mpi_pending.c: the table of nonblocking and persistent reductions in flight (a hash table
 * keyed by request handle, so that completing thousands of requests costs a lookup each), the
 * handles their entries hold, and their completion. See mpi_pending.h for the claim protocol.
 * One lock guards the table; it is never held across a call into MPI. */
#include "mpi/mpi_pending.h"

#include "interpose/init.h"
#include "runtime/log.h"
#include "runtime/stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_BUCKETS 256 /* grows to keep chains short: 20,000 requests, chains of ~2 */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending **buckets;
static size_t bucket_count;
static size_t entry_count;
static _Atomic size_t entry_count_hint; /* entry_count for the lock-free fast path */
static atomic_flag fork_handler_added = ATOMIC_FLAG_INIT;

/* User ops and derived datatypes that entries hold: their MPI_Op_free / MPI_Type_free waits
 * until the last entry lets go. The application's handle is what the entry uses (a user op may
 * look at the datatype handle it is called with, and a duplicate would run the datatype's
 * attribute callbacks), so nothing is duplicated: the free is deferred. The table grows. */
struct held_handle {
    mpi_handle handle;
    int entries;
    int free_requested;
};
static struct held_handle *held;
static size_t held_slots;

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

/* Hold `handle` for one more entry (under the lock). Returns 0 when there is no memory to
 * record it (the caller stops the job: the application may free the handle at any time). */
static int hold(mpi_handle handle)
{
    struct held_handle *free_slot = NULL;
    for (size_t i = 0; i < held_slots; i++) {
        if (held[i].entries > 0 && held[i].handle == handle) {
            held[i].entries++;
            return 1;
        }
        if (held[i].entries == 0 && !free_slot) free_slot = &held[i];
    }
    if (!free_slot) {
        size_t slots = held_slots ? 2 * held_slots : 16;
        struct held_handle *grown = realloc(held, slots * sizeof *grown);
        if (!grown) return 0;
        memset(grown + held_slots, 0, (slots - held_slots) * sizeof *grown);
        free_slot = grown + held_slots;
        held = grown;
        held_slots = slots;
    }
    *free_slot = (struct held_handle){handle, 1, 0};
    return 1;
}

/* Let go of `handle` (under the lock). Returns 1 when the application freed it meanwhile and
 * this was the last entry: the caller frees it for real, after dropping the lock. */
static int release(mpi_handle handle)
{
    for (size_t i = 0; i < held_slots; i++) {
        if (held[i].entries == 0 || held[i].handle != handle) continue;
        return --held[i].entries == 0 && held[i].free_requested;
    }
    return 0;
}

int mpi_pending_defer_free(mpi_handle handle)
{
    int deferred = 0;
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < held_slots && !deferred; i++) {
        if (held[i].entries > 0 && held[i].handle == handle && !held[i].free_requested) {
            held[i].free_requested = 1;
            deferred = 1;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return deferred;
}

struct pending *mpi_pending_new(const struct mpi_reduction *reduction, mpi_count elements,
                                size_t extra_bytes, void **extra)
{
    struct pending *entry = calloc(1, sizeof *entry);
    if (!entry) mpi_fatal_no_memory(reduction, sizeof *entry);
    entry->reduction = *reduction;
    entry->reduction.keeps_scratch = 1;
    entry->blocks = mpi_scratch(&entry->reduction, elements, &entry->raw, extra_bytes, extra);
    /* The application may free its datatype and op as soon as the call returns (MPI allows
     * it; MPICH's nonblocking3 test does it): the entry holds them until it is done. */
    int holds_datatype = !reduction->type.predefined;
    int holds_op = reprod_mpi_classify_op(reduction->op) == REPROD_OPCLASS_USER;
    pthread_mutex_lock(&table_lock);
    int held_all = (!holds_datatype || hold(reduction->datatype)) &&
                   (!holds_op || hold(reduction->op));
    pthread_mutex_unlock(&table_lock);
    if (!held_all) mpi_fatal_no_memory(reduction, sizeof(struct held_handle));
    entry->held_datatype = holds_datatype ? reduction->datatype : 0;
    entry->held_op = holds_op ? reduction->op : 0;
    return entry;
}

void mpi_pending_free(struct pending *entry)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_scratch_release(entry->raw);
    pthread_mutex_lock(&table_lock);
    int free_datatype = entry->held_datatype && release(entry->held_datatype);
    int free_op = entry->held_op && release(entry->held_op);
    pthread_mutex_unlock(&table_lock);
    if (free_datatype) mpi->real.Type_free(&entry->held_datatype);
    if (free_op) mpi->real.Op_free(&entry->held_op);
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
    int claimed = 0;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < count; i++) {
        entries[i] = find_unclaimed(mpi_handle_load(requests, i), NULL);
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
    if (entry->words) {
        uint64_t started = entry->reduction.timed ? reprod_clock_ns() : 0;
        mpi_fixed_one_pass_round(&entry->reduction, entry->fixed_terms, entry->words,
                                 entry->block_elements, entry->out);
        if (entry->reduction.timed) entry->reduction.engine_ns += reprod_clock_ns() - started;
        return REPROD_MPI_OK;
    }
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
