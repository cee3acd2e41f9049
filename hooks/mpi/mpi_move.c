/* mpi_move.c: the shim's memory and its data movement through the real library: scratch
 * buffers, local copies of typed elements, and the all-gather, gather and all-to-all of raw
 * contributions, each with the large-count call when a count or displacement exceeds int. */
#include "mpi/mpi_path.h"

#include "common.h"
#include "interpose/once.h"
#include "runtime/log.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Configuration. */
#define SCRATCH_ALIGNMENT   64                    /* engine-friendly alignment of scratch */
#define SCRATCH_CACHE_BYTES ((size_t)256 << 20)   /* a thread keeps its scratch up to this */
#define COPY_CHUNK_BYTES    ((size_t)4 << 20)     /* typed copies go through pieces this big */

/* The scratch buffer a thread keeps for its blocking calls: small reductions would otherwise
 * spend as long in malloc as in their arithmetic, and large ones in page faults (fresh pages
 * written by the kernel's cross-process copy cost more than the copy). It grows to the largest
 * exchange (as the libraries' own internal buffers do) and is freed when the thread exits. */
struct scratch_cache {
    void *memory;
    size_t bytes;
    int busy; /* handed out (a reduction inside an error handler gets fresh memory) */
};
static __thread struct scratch_cache thread_cache __attribute__((tls_model("initial-exec")));
static pthread_key_t cache_key;
static struct reprod_once cache_key_once = REPROD_ONCE_INIT;

static void free_thread_cache(void *memory)
{
    /* The thread is exiting; a reduction made by a later destructor on it starts afresh. */
    if (thread_cache.memory == memory) thread_cache = (struct scratch_cache){NULL, 0, 0};
    free(memory);
}

static void create_cache_key(void)
{
    pthread_key_create(&cache_key, free_thread_cache);
}

/* Memory of `bytes`, aligned, from the thread's cache when it is free and big enough. */
static void *scratch_memory(size_t bytes, int cacheable)
{
    struct scratch_cache *cache = &thread_cache;
    if (!cacheable || cache->busy || bytes > SCRATCH_CACHE_BYTES) {
        void *memory = NULL;
        return posix_memalign(&memory, SCRATCH_ALIGNMENT, bytes) == 0 ? memory : NULL;
    }
    if (cache->bytes < bytes) {
        void *memory = NULL;
        size_t grown = bytes < 4096 ? 4096 : bytes;
        if (posix_memalign(&memory, SCRATCH_ALIGNMENT, grown) != 0) return NULL;
        free(cache->memory);
        /* (reprod_once answers 0 only to a call made from inside create_cache_key, which
         * makes none: the key always exists here.) */
        if (reprod_once(&cache_key_once, create_cache_key)) pthread_setspecific(cache_key, memory);
        cache->memory = memory;
        cache->bytes = grown;
    }
    cache->busy = 1;
    return cache->memory;
}

void mpi_scratch_release(void *raw)
{
    if (raw && raw == thread_cache.memory)
        thread_cache.busy = 0;
    else
        free(raw);
}

char *mpi_scratch(const struct mpi_reduction *reduction, mpi_count elements, void **raw,
                  size_t extra_bytes, void **extra)
{
    size_t span = 0;
    if (elements > 0) {
        /* Beyond half the address space: no division to find out (it would cost a small
         * reduction more than the rest of this function). */
        size_t strides = 0;
        if (__builtin_mul_overflow((size_t)elements - 1, (size_t)reduction->extent, &strides) ||
            strides > SIZE_MAX / 2 - (size_t)reduction->true_extent)
            mpi_fatal_no_memory(reduction, SIZE_MAX);
        span = strides + (size_t)reduction->true_extent;
    }
    size_t rounded = (span + SCRATCH_ALIGNMENT - 1) / SCRATCH_ALIGNMENT * SCRATCH_ALIGNMENT;
    if (extra_bytes > SIZE_MAX / 4) mpi_fatal_no_memory(reduction, extra_bytes);
    size_t total = rounded + extra_bytes + 1;
    *raw = scratch_memory(total, !reduction->keeps_scratch);
    if (!*raw) mpi_fatal_no_memory(reduction, total);
    if (extra) *extra = (char *)*raw + rounded;
    /* Element 0 starts true_lb bytes before the first byte it touches. */
    return (char *)*raw - reduction->true_lb;
}

void *mpi_allocate(const struct mpi_reduction *reduction, size_t bytes)
{
    void *memory = malloc(bytes ? bytes : 1);
    if (!memory) mpi_fatal_no_memory(reduction, bytes);
    return memory;
}

int mpi_copy_elements(const struct mpi_reduction *reduction, const void *from, void *to,
                      mpi_count elements)
{
    if (from == to || elements <= 0) return REPROD_MPI_OK;
    if (reduction->plain) {
        memmove(to, from, (size_t)elements * (size_t)reduction->type_bytes);
        return REPROD_MPI_OK;
    }
    /* Gaps (a padded pair type, a vector): pack and unpack locally, a piece at a time. */
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_count per_piece = (mpi_count)(COPY_CHUNK_BYTES / (size_t)reduction->type_bytes);
    if (per_piece < 1) per_piece = 1;
    if ((size_t)per_piece * (size_t)reduction->type_bytes > INT_MAX) return mpi->abi->err_intern;
    int piece_bytes = (int)(per_piece * reduction->type_bytes);
    char *packed = mpi_allocate(reduction, (size_t)piece_bytes);
    int rc = REPROD_MPI_OK;
    for (mpi_count done = 0; done < elements && rc == REPROD_MPI_OK; done += per_piece) {
        int count = (int)(elements - done < per_piece ? elements - done : per_piece);
        size_t offset = (size_t)done * (size_t)reduction->extent;
        int position = 0;
        rc = mpi->real.Pack((const char *)from + offset, count, reduction->datatype, packed,
                            piece_bytes, &position, mpi->comm_self);
        int unpacked = 0;
        if (rc == REPROD_MPI_OK)
            rc = mpi->real.Unpack(packed, position, &unpacked, (char *)to + offset, count,
                                  reduction->datatype, mpi->comm_self);
    }
    free(packed);
    return rc;
}

/* ---- All-to-all ---------------------------------------------------------------------- */

size_t mpi_exchange_bytes(int ranks)
{
    return (size_t)ranks * (4 * sizeof(mpi_count) + 2 * sizeof(mpi_handle) + 4 * sizeof(int));
}

void mpi_exchange_layout(struct mpi_exchange *exchange, int ranks, void *memory)
{
    mpi_count *counts = memory;
    exchange->ranks = ranks;
    exchange->send_counts = counts;
    exchange->send_offsets = counts + ranks;
    exchange->receive_counts = counts + 2 * ranks;
    exchange->receive_offsets = counts + 3 * ranks;
    exchange->types = counts + 4 * ranks;
    exchange->narrow = (int *)((char *)exchange->types + 2 * (size_t)ranks * sizeof(mpi_handle));
}

/* 1 when each of the `n` values fits an int; then copies them to `narrow`. */
static int narrowed(const mpi_count *values, int n, int *narrow)
{
    for (int i = 0; i < n; i++) {
        if (values[i] > INT_MAX) return 0;
        narrow[i] = (int)values[i];
    }
    return 1;
}

/* A datatype of `count` elements of the reduction's type, `offset` elements from a buffer's
 * start, as a byte displacement of 64 bits: the all-to-all-w form. */
static mpi_handle block_type(const struct mpi_reduction *reduction, mpi_count count,
                             mpi_count offset)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int length = (int)count;
    mpi_count displacement = offset * reduction->extent;
    mpi_handle type = 0;
    if (count > INT_MAX ||
        mpi->real.Type_create_hindexed(1, &length, &displacement, reduction->datatype, &type) !=
            REPROD_MPI_OK ||
        mpi->real.Type_commit(&type) != REPROD_MPI_OK)
        mpi_fatal_no_memory(reduction, 0);
    return mpi_handle_load(&type, 0);
}

/* The all-to-all as MPI_Alltoallw with one datatype per rank and direction. */
static int exchange_w(const struct mpi_reduction *reduction, struct mpi_exchange *exchange,
                      const void *source, void *blocks, void *request)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int n = exchange->ranks;
    int *ones = exchange->narrow, *zeros = exchange->narrow + n;
    void *send_types = exchange->types;
    void *receive_types = (char *)exchange->types + (size_t)n * mpi->abi->handle_bytes;
    for (int r = 0; r < n; r++) {
        ones[r] = 1;
        zeros[r] = 0;
        mpi_handle_store(send_types, r,
                         block_type(reduction, exchange->send_counts[r], exchange->send_offsets[r]));
        mpi_handle_store(receive_types, r,
                         block_type(reduction, exchange->receive_counts[r],
                                    exchange->receive_offsets[r]));
    }
    int rc = request ? mpi->real.Ialltoallw(source, ones, zeros, send_types, blocks, ones, zeros,
                                            receive_types, reduction->comm, request)
                     : mpi->real.Alltoallw(source, ones, zeros, send_types, blocks, ones, zeros,
                                           receive_types, reduction->comm);
    /* A datatype freed while a communication uses it lives until that completes. */
    for (int r = 0; r < n; r++) {
        mpi_handle send = mpi_handle_load(send_types, r);
        mpi_handle receive = mpi_handle_load(receive_types, r);
        mpi->real.Type_free(&send);
        mpi->real.Type_free(&receive);
    }
    return rc;
}

/* 1 when every count and displacement of an exchange of chunks `chunk_counts` (the same
 * numbers on every rank, so that every rank calls the same collective) fits an int. */
static int exchange_fits_int(const mpi_count chunk_counts[], int ranks)
{
    mpi_count total = 0, largest = 0;
    for (int r = 0; r < ranks; r++) {
        total += chunk_counts[r];
        if (chunk_counts[r] > largest) largest = chunk_counts[r];
    }
    return total <= INT_MAX && largest * ranks <= INT_MAX;
}

int mpi_exchange_run(const struct mpi_reduction *reduction, struct mpi_exchange *exchange,
                     const mpi_count chunk_counts[], const void *source, void *blocks,
                     void *request)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int n = exchange->ranks;
    int *narrow = exchange->narrow;
    mpi_handle type = reduction->datatype, comm = reduction->comm;
    if (exchange_fits_int(chunk_counts, n)) {
        narrowed(exchange->send_counts, n, narrow);
        narrowed(exchange->send_offsets, n, narrow + n);
        narrowed(exchange->receive_counts, n, narrow + 2 * n);
        narrowed(exchange->receive_offsets, n, narrow + 3 * n);
        if (request)
            return mpi->real.Ialltoallv(source, narrow, narrow + n, type, blocks, narrow + 2 * n,
                                        narrow + 3 * n, type, comm, request);
        return mpi->real.Alltoallv(source, narrow, narrow + n, type, blocks, narrow + 2 * n,
                                   narrow + 3 * n, type, comm);
    }
    if (request && HAS_MPI(Ialltoallv_c))
        return mpi->real.Ialltoallv_c(source, exchange->send_counts, exchange->send_offsets, type,
                                      blocks, exchange->receive_counts, exchange->receive_offsets,
                                      type, comm, request);
    if (!request && HAS_MPI(Alltoallv_c))
        return mpi->real.Alltoallv_c(source, exchange->send_counts, exchange->send_offsets, type,
                                     blocks, exchange->receive_counts, exchange->receive_offsets,
                                     type, comm);
    return exchange_w(reduction, exchange, source, blocks, request);
}

/* ---- All-gather and gather ------------------------------------------------------------ */

/* A count beyond int on a library without the large-count call: cannot happen from a caller
 * of that library (its bindings take int), so it is an internal error of the shim's. */
static int too_large(const struct mpi_reduction *reduction)
{
    reprod_log(REPROD_LOG_WARN, "warning: %s: a count beyond int and no large-count call",
               reduction->api);
    return mpi_own_error((struct mpi_reduction *)reduction, reprod_mpi()->abi->err_intern);
}

/* 1 when `counts` (the same numbers on every rank) and the displacements of their blocks laid
 * end to end all fit an int: the condition of an all-gather-v or gather-v. */
static int total_fits_int(const mpi_count counts[], int ranks)
{
    mpi_count total = 0;
    for (int r = 0; r < ranks; r++)
        total += counts[r];
    return total <= INT_MAX;
}

int mpi_move_allgather(const struct mpi_reduction *reduction, const void *source, mpi_count count,
                       void *gathered, void *request)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_handle type = reduction->datatype, comm = reduction->comm;
    if (count <= INT_MAX) {
        if (request)
            return mpi->real.Iallgather(source, (int)count, type, gathered, (int)count, type, comm,
                                        request);
        return mpi->real.Allgather(source, (int)count, type, gathered, (int)count, type, comm);
    }
    if (request && HAS_MPI(Iallgather_c))
        return mpi->real.Iallgather_c(source, count, type, gathered, count, type, comm, request);
    if (!request && HAS_MPI(Allgather_c))
        return mpi->real.Allgather_c(source, count, type, gathered, count, type, comm);
    return too_large(reduction);
}

int mpi_move_gather(const struct mpi_reduction *reduction, const void *source, mpi_count count,
                    void *gathered, int root, void *request)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_handle type = reduction->datatype, comm = reduction->comm;
    if (count <= INT_MAX) {
        if (request)
            return mpi->real.Igather(source, (int)count, type, gathered, (int)count, type, root,
                                     comm, request);
        return mpi->real.Gather(source, (int)count, type, gathered, (int)count, type, root, comm);
    }
    if (request && HAS_MPI(Igather_c))
        return mpi->real.Igather_c(source, count, type, gathered, count, type, root, comm,
                                   request);
    if (!request && HAS_MPI(Gather_c))
        return mpi->real.Gather_c(source, count, type, gathered, count, type, root, comm);
    return too_large(reduction);
}

int mpi_move_allgatherv_in_place(const struct mpi_reduction *reduction, void *result,
                                 const mpi_count counts[], const mpi_count offsets[])
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int n = reduction->ranks;
    const void *in_place = (const void *)mpi->abi->in_place;
    int *narrow = mpi_allocate(reduction, 2 * sizeof(int) * (size_t)n);
    int rc;
    if (total_fits_int(counts, n)) {
        narrowed(counts, n, narrow);
        narrowed(offsets, n, narrow + n);
        rc = mpi->real.Allgatherv(in_place, 0, reduction->datatype, result, narrow, narrow + n,
                                  reduction->datatype, reduction->comm);
    } else if (HAS_MPI(Allgatherv_c))
        rc = mpi->real.Allgatherv_c(in_place, 0, reduction->datatype, result, counts, offsets,
                                    reduction->datatype, reduction->comm);
    else
        rc = too_large(reduction);
    free(narrow);
    return rc;
}

int mpi_move_gatherv(const struct mpi_reduction *reduction, const void *source, mpi_count count,
                     void *result, const mpi_count counts[], const mpi_count offsets[], int root)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int n = reduction->ranks;
    int *narrow = mpi_allocate(reduction, 2 * sizeof(int) * (size_t)n);
    int rc;
    if (total_fits_int(counts, n)) {
        narrowed(counts, n, narrow);
        narrowed(offsets, n, narrow + n);
        rc = mpi->real.Gatherv(source, (int)count, reduction->datatype, result, narrow,
                               narrow + n, reduction->datatype, root, reduction->comm);
    } else if (HAS_MPI(Gatherv_c))
        rc = mpi->real.Gatherv_c(source, count, reduction->datatype, result, counts, offsets,
                                 reduction->datatype, root, reduction->comm);
    else
        rc = too_large(reduction);
    free(narrow);
    return rc;
}
