/* mpi_pending.h: nonblocking and persistent reductions whose data is in flight, found by their
 * request when a Wait/Test call completes them.
 *
 * A request handle is only a key while its request lives: the library reuses a freed handle at
 * once, for another thread's new request. So an entry is *claimed* by the thread that waits on
 * it before the library is called, and from then on that thread holds it by pointer: a new
 * request that reuses the handle gets an entry of its own, and no thread ever finishes or frees
 * another's. An unclaimed entry whose handle the library hands out again was completed behind
 * the shim's back (a call it does not hook): it is dropped as stale.
 */
#ifndef REPROD_MPI_PENDING_H
#define REPROD_MPI_PENDING_H

#include "mpi/mpi_path.h"

/* A nonblocking or persistent reduction. */
struct pending {
    mpi_handle request;             /* the key: the library's request that the caller holds */
    struct mpi_reduction reduction; /* decided at the start; its handles are held (below) */
    void *raw;                      /* scratch to free */
    char *blocks;                   /* contributions, in rank order */
    mpi_count block_elements;       /* elements per contribution */
    int block_count;                /* contributions to reduce (a scan's prefix length) */
    void *out;                      /* where the result goes; NULL: nothing to reduce here */
    mpi_count elements;             /* for the statistics */
    const char *how;                /* for the log */
    const void *source;             /* this rank's contribution (persistent: traced per start) */
    int reduced;                    /* reduced already (MPI_Request_get_status saw it done) */
    int persistent;                 /* MPI_Allreduce_init: lives until MPI_Request_free */
    int active;                     /* persistent: started and not yet completed */
    mpi_handle held_datatype;       /* a derived datatype whose MPI_Type_free waits, or 0 */
    mpi_handle held_op;             /* a user op whose MPI_Op_free waits, or 0 */
    int64_t *words;                 /* the one-pass fixed route: this rank's words, summed in
                                       place by the library; NULL: the blocks above */
    int fixed_terms;                /* contributions in that sum (a scan: its prefix) */
    int64_t *raw_words;             /* a reduce-scatter's: this rank's words of every element */
    int claimed;                    /* a thread is completing it (under the table's lock) */
    struct pending *next;           /* the bucket's chain */
};

/* A new entry for `reduction` with scratch for `elements` elements plus `extra_bytes` (at
 * *extra). It holds the reduction's derived datatype and user op until it is freed (their
 * MPI_Type_free and MPI_Op_free are deferred), so the application may free them at once. */
struct pending *mpi_pending_new(const struct mpi_reduction *reduction, mpi_count elements,
                                size_t extra_bytes, void **extra);

/* Give back everything an entry holds and the entry itself. It must not be in the table. */
void mpi_pending_free(struct pending *entry);

/* Put `entry` (keyed by entry->request) in the table, unclaimed. */
void mpi_pending_add(struct pending *entry);

/* 1 when the table may hold entries (one atomic load: the fast path of every Wait/Test). */
int mpi_pending_any(void);

/* Claim the unclaimed entry of `request`: returns it (the caller now holds it), or NULL.
 * *busy (may be NULL) is set when an entry of that request exists but another thread holds it. */
struct pending *mpi_pending_claim(mpi_handle request, int *busy);

/* Claim the entries of `count` requests of the array `requests`: entries[i] is the entry of
 * request i, or NULL. Returns the number claimed. One pass under the lock. */
int mpi_pending_claim_array(int count, const void *requests, struct pending **entries);

/* Give a claimed entry back to the table (its request is still in flight, or persistent). */
void mpi_pending_unclaim(struct pending *entry);

/* Reduce an entry's contributions into the caller's buffer, once. Returns the MPI error. */
int mpi_pending_reduce(struct pending *entry);

/* A claimed entry's request completed, successfully (`succeeded`) or not: reduce, account and
 * forget it (a persistent entry goes back to the table, inactive). Returns the reduction's
 * error, or MPI_SUCCESS. */
int mpi_pending_finish(struct pending *entry, int succeeded);

/* Take a claimed entry out of the table for good (MPI_Request_free); the caller frees it. */
void mpi_pending_remove(struct pending *entry);

/* MPI_Op_free or MPI_Type_free of `handle`: 1 when an entry still holds it (the real free
 * then happens when the last one lets go), 0 when the caller should free it now. */
int mpi_pending_defer_free(mpi_handle handle);

#endif /* REPROD_MPI_PENDING_H */
