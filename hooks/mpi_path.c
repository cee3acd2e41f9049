/* mpi_path.c: decide, move raw contributions with the real library, reduce them in one
 * place, move results back. See DESIGN.md section 5 for the data path. */
#include "mpi_path.h"

#include "common.h"
#include "config.h"
#include "init.h"
#include "log.h"
#include "rank.h"
#include "stats.h"
#include "trace.h"

#include <limits.h>
#include <pthread.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* Configuration. */
#define GATHER_ALL_MAX_BYTES 2048 /* gather whole contributions up to this size (bytes) */
#define SCRATCH_ALIGNMENT    64   /* engine-friendly alignment of scratch blocks */
#define STACK_POINTERS       64   /* contributions whose pointers fit on the stack */
#define SCRATCH_CACHE_BYTES  ((size_t)256 << 20) /* a thread keeps its scratch up to this size */

/* 1 when a pass-through for `reason` has a datatype the library accepted already. */
static int datatype_is_valid(enum reprod_reason reason)
{
    return reason == REPROD_PASS_DETERMINISTIC_OP || reason == REPROD_PASS_NON_FLOAT ||
           reason == REPROD_PASS_EMPTY || reason == REPROD_PASS_INTERCOMM ||
           reason == REPROD_PASS_MODE_OFF;
}

int mpi_pass_begin(struct mpi_pass *pass, const char *api, enum reprod_reason reason,
                   long long elements, MPI_Datatype datatype, const void *input)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    memset(pass, 0, sizeof *pass);
    pass->api = api;
    pass->reason = reason;
    pass->elements = elements;
    if (reprod_trace_enabled()) {
        pass->trace_sequence = reprod_trace_sequence();
        int bytes = 0;
        MPI_Aint lb, extent, true_lb, true_extent;
        if (mpi->usable && datatype_is_valid(reason) && datatype != mpi->datatype_null &&
            reprod_mpi_state() == REPROD_MPI_RUNNING &&
            mpi->real.Type_size(datatype, &bytes) == MPI_SUCCESS &&
            mpi->real.Type_get_extent(datatype, &lb, &extent) == MPI_SUCCESS &&
            mpi->real.Type_get_true_extent(datatype, &true_lb, &true_extent) == MPI_SUCCESS &&
            bytes > 0 && extent == bytes && true_lb == 0 && true_extent == extent)
            pass->type_bytes = (size_t)bytes;
        if (pass->type_bytes && input && input != MPI_IN_PLACE && elements > 0) {
            pass->has_input = 1;
            pass->input_hash = reprod_trace_hash(input, (size_t)elements * pass->type_bytes);
        }
    }
    if (reprod_pass_through(api, reason, mpi->usable ? NULL : mpi->why_not) == 0) return 0;
    if (mpi->usable) mpi->real.Abort(mpi->comm_world, 2);
    _exit(2); /* Abort returned, or there is no MPI to abort with */
}

int mpi_pass_end(const struct mpi_pass *pass, int rc, const void *output, long long output_elements)
{
    if (!pass->trace_sequence) return rc;
    struct reprod_trace_record record = {pass->trace_sequence,
                                         pass->api,
                                         "pass",
                                         reprod_reason_name(pass->reason),
                                         pass->elements,
                                         0,
                                         pass->has_input,
                                         pass->input_hash,
                                         0,
                                         0};
    if (rc == MPI_SUCCESS && pass->type_bytes && output && output_elements > 0) {
        record.has_output = 1;
        record.output_hash = reprod_trace_hash(output, (size_t)output_elements * pass->type_bytes);
    }
    reprod_trace_write(&record);
    return rc;
}

/* Learn our rank from MPI_COMM_WORLD once MPI runs (the launcher's variable may be absent). */
static void learn_rank(const struct reprod_mpi *mpi)
{
    if (reprod_rank_source(NULL) == REPROD_RANK_FROM_LIBRARY) return;
    int rank = 0, size = 0;
    if (mpi->real.Comm_rank(mpi->comm_world, &rank) == MPI_SUCCESS &&
        mpi->real.Comm_size(mpi->comm_world, &size) == MPI_SUCCESS)
        reprod_rank_set_from_library(rank, size);
}

enum reprod_action mpi_reduction_decide(struct mpi_reduction *reduction, const char *api,
                                        long long elements, MPI_Datatype datatype, MPI_Op op,
                                        MPI_Comm comm, enum reprod_reason *reason)
{
    reprod_init();
    memset(reduction, 0, sizeof *reduction);
    reduction->api = api;
    reduction->start_ns = reprod_stats_clock_ns();
    *reason = REPROD_PASS_UNSUPPORTED;
    if (reprod_config()->mode == REPROD_MODE_OFF) {
        *reason = REPROD_PASS_MODE_OFF;
        return REPROD_ACTION_PASS;
    }
    const struct reprod_mpi *mpi = reprod_mpi();
    if (!mpi->usable) return REPROD_ACTION_PASS;

    if (reprod_mpi_state() != REPROD_MPI_RUNNING) {
        *reason = REPROD_PASS_NOT_ACTIVE;
        return REPROD_ACTION_PASS;
    }
    learn_rank(mpi);

    int inter = 0;
    *reason = REPROD_PASS_BAD_ARGUMENT;
    if (elements < 0 || !datatype || !op || mpi->real.Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return REPROD_ACTION_PASS;
    if (inter) {
        *reason = REPROD_PASS_INTERCOMM;
        return REPROD_ACTION_PASS;
    }
    if (reprod_mpi_classify_type(datatype, &reduction->type) != MPI_SUCCESS)
        return REPROD_ACTION_PASS;
    enum reprod_op_class op_class = reprod_mpi_classify_op(op);
    /* MPI defines its predefined ops on predefined datatypes only (Open MPI answers
     * MPI_ERR_OP for a derived one): the real library reports it. */
    if (!reduction->type.predefined && op_class != REPROD_OPCLASS_USER &&
        op_class != REPROD_OPCLASS_DETERMINISTIC)
        return REPROD_ACTION_PASS;
    struct reprod_decision decision = reprod_decide(op_class, reduction->type.element_class);
    if (decision.action == REPROD_ACTION_PASS) {
        *reason = decision.reason;
        return REPROD_ACTION_PASS;
    }
    if (elements == 0) {
        *reason = REPROD_PASS_EMPTY;
        return REPROD_ACTION_PASS;
    }

    int type_bytes = 0;
    MPI_Aint lb = 0;
    if (mpi->real.Comm_size(comm, &reduction->ranks) != MPI_SUCCESS ||
        mpi->real.Comm_rank(comm, &reduction->rank) != MPI_SUCCESS)
        return REPROD_ACTION_PASS;
    if (reduction->type.element_class == REPROD_ELEMENT_ENGINE_FLOAT) {
        /* A predefined float type: contiguous, its size known without asking. */
        type_bytes = (int)(reprod_type_size(reduction->type.engine_type) *
                           (size_t)reduction->type.engine_elements);
        reduction->extent = reduction->true_extent = type_bytes;
        reduction->true_lb = 0;
    } else if (mpi->real.Type_size(datatype, &type_bytes) != MPI_SUCCESS ||
               mpi->real.Type_get_extent(datatype, &lb, &reduction->extent) != MPI_SUCCESS ||
               mpi->real.Type_get_true_extent(datatype, &reduction->true_lb,
                                              &reduction->true_extent) != MPI_SUCCESS) {
        return REPROD_ACTION_PASS;
    }
    if (reduction->extent <= 0 || reduction->true_extent <= 0 || type_bytes <= 0) {
        *reason = REPROD_PASS_UNSUPPORTED; /* zero or negative extents: leave them to MPI */
        return REPROD_ACTION_PASS;
    }
    reduction->type_bytes = (size_t)type_bytes;
    reduction->comm = comm;
    reduction->datatype = datatype;
    reduction->op = op;
    reduction->action = decision.action;
    return decision.action;
}

/* The element type's name in traces. */
static const char *type_name(const struct mpi_reduction *reduction)
{
    static const char *const names[4][2] = {{"float16", "complex32"},
                                            {"bfloat16", "complex-bfloat16"},
                                            {"float32", "complex64"},
                                            {"float64", "complex128"}};
    if (reduction->type.element_class != REPROD_ELEMENT_ENGINE_FLOAT) return "mpi-datatype";
    return names[reduction->type.engine_type][reduction->type.engine_elements == 2];
}

/* 1 when `elements` elements are `elements * type_bytes` bytes without gaps: hashable. */
static int contiguous(const struct mpi_reduction *reduction)
{
    return reduction->true_lb == 0 && (size_t)reduction->extent == reduction->type_bytes &&
           reduction->true_extent == reduction->extent;
}

void mpi_trace_input(struct mpi_reduction *reduction, const void *input, long long elements)
{
    if (!reprod_trace_enabled()) return;
    reduction->trace_sequence = reprod_trace_sequence();
    if (!contiguous(reduction) || !input) return;
    reduction->trace_has_input = 1;
    reduction->trace_input_hash =
        reprod_trace_hash(input, (size_t)elements * reduction->type_bytes);
}

/* Write the trace line of a finished call (see mpi_reduction_done). */
static void trace_output(const struct mpi_reduction *reduction, long long elements,
                         const void *output, long long output_elements)
{
    static const char *const actions[] = {"pass", "exact", "ordered", "ordered-mpi-op"};
    struct reprod_trace_record record = {reduction->trace_sequence,
                                         reduction->api,
                                         actions[reduction->action],
                                         type_name(reduction),
                                         elements,
                                         reduction->ranks,
                                         reduction->trace_has_input,
                                         reduction->trace_input_hash,
                                         0,
                                         0};
    if (output && contiguous(reduction)) {
        record.has_output = 1;
        record.output_hash =
            reprod_trace_hash(output, (size_t)output_elements * reduction->type_bytes);
    }
    reprod_trace_write(&record);
}

int mpi_reduction_done(struct mpi_reduction *reduction, long long elements, const char *how, int rc,
                       const void *output, long long output_elements)
{
    if (reduction->trace_sequence)
        trace_output(reduction, elements, rc == MPI_SUCCESS ? output : NULL, output_elements);
    uint64_t elapsed = reduction->shim_ns + (reprod_stats_clock_ns() - reduction->start_ns);
    enum reprod_path path =
        reduction->action == REPROD_ACTION_EXACT ? REPROD_PATH_EXACT : REPROD_PATH_ORDERED;
    reprod_stats_record(path, (size_t)elements * reduction->type_bytes, elapsed,
                        reduction->engine_ns);
    if (rc == MPI_ERR_NO_MEM) {
        reprod_log(REPROD_LOG_ERROR, "error: %s: no memory for %lld elements of scratch space",
                   reduction->api, elements * reduction->ranks);
        reprod_mpi()->real.Comm_call_errhandler(reduction->comm, rc);
    }
    if (!reprod_log_enabled(REPROD_LOG_DEBUG)) return rc;
    const char *what = reduction->action == REPROD_ACTION_EXACT            ? "exact"
                       : reduction->action == REPROD_ACTION_ORDERED_ENGINE ? "ordered"
                                                                           : "ordered (MPI op)";
    reprod_log(REPROD_LOG_DEBUG, "%s: %s, %lld elements of %zu bytes over %d ranks, %s, %.1f us",
               reduction->api, what, elements, reduction->type_bytes, reduction->ranks, how,
               (double)elapsed / 1e3);
    return rc;
}

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
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

static void free_thread_cache(void *memory)
{
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
        pthread_once(&cache_key_once, create_cache_key);
        pthread_setspecific(cache_key, memory);
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

char *mpi_scratch(const struct mpi_reduction *reduction, size_t elements, void **raw,
                  size_t extra_bytes, void **extra)
{
    size_t span = 0;
    if (elements > 0) {
        size_t extent = (size_t)reduction->extent;
        if (elements - 1 > (SIZE_MAX - (size_t)reduction->true_extent) / extent) return NULL;
        span = (elements - 1) * extent + (size_t)reduction->true_extent;
    }
    size_t rounded = (span + SCRATCH_ALIGNMENT - 1) / SCRATCH_ALIGNMENT * SCRATCH_ALIGNMENT;
    if (rounded < span || rounded + extra_bytes + 1 < rounded) return NULL;
    *raw = scratch_memory(rounded + extra_bytes + 1, !reduction->keeps_scratch);
    if (!*raw) return NULL;
    if (extra) *extra = (char *)*raw + rounded;
    /* Element 0 starts true_lb bytes before the first byte it touches. */
    return (char *)*raw - reduction->true_lb;
}

/* Copy `elements` elements of the reduction's datatype from `from` to `to`, touching only the
 * bytes the datatype describes (a derived type's gaps in `to` stay as they were). */
static int copy_elements(const struct mpi_reduction *reduction, const void *from, void *to,
                         size_t elements)
{
    if (from == to || elements == 0) return MPI_SUCCESS;
    if (reduction->type.predefined) {
        memmove(to, from, elements * reduction->type_bytes);
        return MPI_SUCCESS;
    }
    const struct reprod_mpi *mpi = reprod_mpi();
    return mpi->real.Sendrecv(from, (int)elements, reduction->datatype, 0, 0, to, (int)elements,
                              reduction->datatype, 0, 0, mpi->comm_self, MPI_STATUS_IGNORE);
}

int mpi_reduce_blocks(struct mpi_reduction *reduction, char *blocks, size_t block_elements,
                      int block_count, void *out)
{
    if (block_count <= 0 || block_elements == 0) return MPI_SUCCESS;
    size_t block_bytes = block_elements * (size_t)reduction->extent;
    uint64_t started = reprod_stats_clock_ns();
    int rc = MPI_SUCCESS;

    if (reduction->action == REPROD_ACTION_ORDERED_LIBRARY) {
        /* MPI's canonical order: ((c0 op c1) op c2) ...; Reduce_local(in, inout) computes
         * inout = in op inout, so block k becomes the fold of blocks 0..k. */
        const struct reprod_mpi *mpi = reprod_mpi();
        for (int k = 1; k < block_count && rc == MPI_SUCCESS; k++)
            rc = mpi->real.Reduce_local(blocks + (size_t)(k - 1) * block_bytes,
                                        blocks + (size_t)k * block_bytes, (int)block_elements,
                                        reduction->datatype, reduction->op);
        if (rc == MPI_SUCCESS)
            rc = copy_elements(reduction, blocks + (size_t)(block_count - 1) * block_bytes, out,
                               block_elements);
    } else {
        const void *stack_pointers[STACK_POINTERS];
        const void **contributions = stack_pointers;
        if (block_count > STACK_POINTERS) {
            contributions = malloc(sizeof(void *) * (size_t)block_count);
            if (!contributions) return MPI_ERR_NO_MEM;
        }
        for (int k = 0; k < block_count; k++)
            contributions[k] = blocks + (size_t)k * block_bytes;
        if (reduction->own_block && reduction->rank < block_count)
            contributions[reduction->rank] = reduction->own_block;
        size_t engine_elements = block_elements * (size_t)reduction->type.engine_elements;
        int engine_rc =
            reduction->action == REPROD_ACTION_EXACT
                ? reprod_reduce_exact(reduction->type.engine_type, REPROD_SUM,
                                      reprod_config()->rounding, contributions, block_count,
                                      engine_elements, out)
                : reprod_reduce_ordered(reduction->type.engine_type, REPROD_SUM, contributions,
                                        block_count, engine_elements, out);
        if (contributions != stack_pointers) free(contributions);
        if (engine_rc != REPROD_OK) rc = MPI_ERR_INTERN;
    }
    reduction->engine_ns += reprod_stats_clock_ns() - started;
    return rc;
}

int mpi_check_counts(const struct mpi_reduction *reduction, const int counts[], int uniform_count,
                     long long *total)
{
    *total = 0;
    for (int r = 0; r < reduction->ranks; r++) {
        int count = counts ? counts[r] : uniform_count;
        if (count < 0) return REPROD_PASS_BAD_ARGUMENT;
        *total += count;
    }
    if (*total == 0) return REPROD_PASS_EMPTY;
    if (*total > INT_MAX) return REPROD_PASS_UNSUPPORTED;
    return -1;
}

/* Split `count` elements into `ranks` chunks as evenly as possible, the longer ones first. */
static void split_evenly(int count, int ranks, int counts[], int offsets[])
{
    int offset = 0;
    for (int r = 0; r < ranks; r++) {
        counts[r] = count / ranks + (r < count % ranks);
        offsets[r] = offset;
        offset += counts[r];
    }
}

/* Small messages: one all-gather, and every rank reduces everything. */
static int gather_all(struct mpi_reduction *reduction, const void *source, int count,
                      char **gathered, void **raw)
{
    *gathered = mpi_scratch(reduction, (size_t)count * (size_t)reduction->ranks, raw, 0, NULL);
    if (!*gathered) return MPI_ERR_NO_MEM;
    return reprod_mpi()->real.Allgather(source, count, reduction->datatype, *gathered, count,
                                        reduction->datatype, reduction->comm);
}

/* The exchange of a reduce-scatter: chunk r of every rank's contribution goes to rank r, so
 * that we own `counts[rank]` elements of each rank, laid out in rank order in *blocks.
 * `offsets` locate the chunks in `source`. The engine reads our own chunk where it is (no
 * copy: reduction->own_block) unless the library's fold needs it in place, or the result
 * (`output`, where the chunk's reduction goes) overlaps it without being it: the engine may
 * write over a contribution only element for element. */
static int exchange_chunks(struct mpi_reduction *reduction, const void *source, const int counts[],
                           const int offsets[], const void *output, char **blocks, void **raw)
{
    int ranks = reduction->ranks, rank = reduction->rank;
    int mine = counts[rank];
    int *arrays = NULL;
    *blocks = mpi_scratch(reduction, (size_t)mine * (size_t)ranks, raw,
                          3 * sizeof(int) * (size_t)ranks, (void **)&arrays);
    if (!*blocks) return MPI_ERR_NO_MEM;
    int *send = arrays, *receive = arrays + ranks, *receive_offsets = arrays + 2 * ranks;
    for (int r = 0; r < ranks; r++) {
        send[r] = counts[r];
        receive[r] = mine;
        receive_offsets[r] = r * mine;
    }
    const char *own = (const char *)source + (size_t)offsets[rank] * (size_t)reduction->extent;
    size_t bytes = (size_t)mine * (size_t)reduction->extent;
    const char *out = output;
    int overlaps = own != out && own < out + bytes && out < own + bytes;
    if (reduction->action != REPROD_ACTION_ORDERED_LIBRARY && !overlaps) {
        send[rank] = receive[rank] = 0;
        reduction->own_block = own;
    }
    return reprod_mpi()->real.Alltoallv(source, send, offsets, reduction->datatype, *blocks,
                                        receive, receive_offsets, reduction->datatype,
                                        reduction->comm);
}

/* 1 when gathering whole contributions beats exchanging chunks: one round instead of two,
 * while each contribution still travels as one small message (shared-memory transports
 * switch to a slower protocol above a few KiB: Open MPI's vader at 4 KiB). */
static int is_small(const struct mpi_reduction *reduction, int count)
{
    return count < reduction->ranks ||
           (size_t)count * (size_t)reduction->extent <= GATHER_ALL_MAX_BYTES;
}

/* Scratch for the chunk layout of `count`: counts then offsets, one int per rank each. */
static int *chunk_layout(int ranks, int count)
{
    int *layout = malloc(2 * sizeof(int) * (size_t)ranks);
    if (layout) split_evenly(count, ranks, layout, layout + ranks);
    return layout;
}

int mpi_allreduce_path(struct mpi_reduction *reduction, const void *source, void *result, int count)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    char *blocks = NULL;
    void *raw = NULL;
    int rc;
    if (is_small(reduction, count)) {
        rc = gather_all(reduction, source, count, &blocks, &raw);
        if (rc == MPI_SUCCESS)
            rc = mpi_reduce_blocks(reduction, blocks, (size_t)count, reduction->ranks, result);
        mpi_scratch_release(raw);
        return rc;
    }
    int *layout = chunk_layout(reduction->ranks, count);
    if (!layout) return MPI_ERR_NO_MEM;
    int *counts = layout, *offsets = layout + reduction->ranks;
    char *own = (char *)result + (size_t)offsets[reduction->rank] * (size_t)reduction->extent;
    rc = exchange_chunks(reduction, source, counts, offsets, own, &blocks, &raw);
    if (rc == MPI_SUCCESS) {
        int mine = counts[reduction->rank];
        int reduced = mpi_reduce_blocks(reduction, blocks, (size_t)mine, reduction->ranks, own);
        /* Every rank takes part in the all-gather even if its reduction failed: a rank that
         * left the collective out would hang the others. */
        rc = mpi->real.Allgatherv(MPI_IN_PLACE, 0, reduction->datatype, result, counts, offsets,
                                  reduction->datatype, reduction->comm);
        if (reduced != MPI_SUCCESS) rc = reduced;
    }
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}

int mpi_reduce_path(struct mpi_reduction *reduction, const void *source, void *result, int count,
                    int root)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int is_root = reduction->rank == root;
    char *blocks = NULL;
    void *raw = NULL;
    int rc;
    if (is_small(reduction, count)) {
        if (is_root) {
            blocks =
                mpi_scratch(reduction, (size_t)count * (size_t)reduction->ranks, &raw, 0, NULL);
            if (!blocks) return MPI_ERR_NO_MEM;
        }
        rc = mpi->real.Gather(source, count, reduction->datatype, blocks, count,
                              reduction->datatype, root, reduction->comm);
        if (rc == MPI_SUCCESS && is_root)
            rc = mpi_reduce_blocks(reduction, blocks, (size_t)count, reduction->ranks, result);
        mpi_scratch_release(raw);
        return rc;
    }
    int *layout = chunk_layout(reduction->ranks, count);
    if (!layout) return MPI_ERR_NO_MEM;
    int *counts = layout, *offsets = layout + reduction->ranks;
    char *root_chunk =
        is_root ? (char *)result + (size_t)offsets[reduction->rank] * (size_t)reduction->extent
                : NULL;
    rc = exchange_chunks(reduction, source, counts, offsets, root_chunk, &blocks, &raw);
    if (rc == MPI_SUCCESS) {
        int mine = counts[reduction->rank];
        /* The root reduces straight into its result; the others into their last block. */
        char *last =
            blocks + (size_t)(reduction->ranks - 1) * (size_t)mine * (size_t)reduction->extent;
        char *own = is_root ? root_chunk : last;
        int reduced = mpi_reduce_blocks(reduction, blocks, (size_t)mine, reduction->ranks, own);
        rc = mpi->real.Gatherv(is_root ? MPI_IN_PLACE : own, mine, reduction->datatype, result,
                               counts, offsets, reduction->datatype, root, reduction->comm);
        if (reduced != MPI_SUCCESS) rc = reduced;
    }
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}

int mpi_reduce_scatter_path(struct mpi_reduction *reduction, const void *source, void *result,
                            const int result_counts[], int uniform_count)
{
    int ranks = reduction->ranks;
    int *layout = malloc(2 * sizeof(int) * (size_t)ranks);
    if (!layout) return MPI_ERR_NO_MEM;
    int *counts = layout, *offsets = layout + ranks;
    long long offset = 0;
    for (int r = 0; r < ranks; r++) {
        counts[r] = result_counts ? result_counts[r] : uniform_count;
        offsets[r] = (int)offset;
        offset += counts[r];
    }
    char *blocks = NULL;
    void *raw = NULL;
    int rc = exchange_chunks(reduction, source, counts, offsets, result, &blocks, &raw);
    if (rc == MPI_SUCCESS)
        rc = mpi_reduce_blocks(reduction, blocks, (size_t)counts[reduction->rank], ranks, result);
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}

int mpi_scan_path(struct mpi_reduction *reduction, const void *source, void *result, int count,
                  int exclusive)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int ranks = reduction->ranks, rank = reduction->rank;
    int *layout = malloc(6 * sizeof(int) * (size_t)ranks);
    if (!layout) return MPI_ERR_NO_MEM;
    int *counts = layout, *offsets = layout + ranks;
    int *send = layout + 2 * ranks, *send_offsets = layout + 3 * ranks;
    int *receive = layout + 4 * ranks, *receive_offsets = layout + 5 * ranks;
    split_evenly(count, ranks, counts, offsets);
    int mine = counts[rank];
    size_t block_bytes = (size_t)mine * (size_t)reduction->extent;

    char *blocks = NULL, *prefixes = NULL;
    void *raw = NULL, *prefix_raw = NULL;
    int rc = exchange_chunks(reduction, source, counts, offsets, NULL, &blocks, &raw);
    if (rc != MPI_SUCCESS) goto done;

    /* Prefix r of our chunk: the reduction of blocks 0..r. The library fold computes them all
     * in one pass, in place; the engine computes each from scratch (the exact sum of a prefix
     * is not the rounded previous prefix plus one block). */
    int local = MPI_SUCCESS;
    if (reduction->action == REPROD_ACTION_ORDERED_LIBRARY) {
        prefixes = blocks;
        local = mpi_reduce_blocks(reduction, blocks, (size_t)mine, ranks,
                                  blocks + (size_t)(ranks - 1) * block_bytes);
    } else {
        prefixes = mpi_scratch(reduction, (size_t)mine * (size_t)ranks, &prefix_raw, 0, NULL);
        if (!prefixes) local = MPI_ERR_NO_MEM;
        for (int r = 0; r < ranks - exclusive && local == MPI_SUCCESS; r++)
            local = mpi_reduce_blocks(reduction, blocks, (size_t)mine, r + 1,
                                      prefixes + (size_t)r * block_bytes);
    }
    /* A rank whose local step failed still takes part in the exchange with the same counts,
     * so that no rank hangs; it returns its error. */
    if (local != MPI_SUCCESS) prefixes = blocks;
    for (int r = 0; r < ranks; r++) {
        int gets_nothing = exclusive && r == 0;
        send[r] = gets_nothing ? 0 : mine;
        send_offsets[r] = gets_nothing ? 0 : (r - exclusive) * mine;
        receive[r] = exclusive && rank == 0 ? 0 : counts[r];
        receive_offsets[r] = offsets[r];
    }
    rc = mpi->real.Alltoallv(prefixes, send, send_offsets, reduction->datatype, result, receive,
                             receive_offsets, reduction->datatype, reduction->comm);
    if (local != MPI_SUCCESS) rc = local;
done:
    mpi_scratch_release(prefix_raw);
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}
