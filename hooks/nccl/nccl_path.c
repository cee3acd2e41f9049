/* nccl_path.c: the data path of one deterministic NCCL reduction (docs/nccl.md), all
 * enqueued on the caller's stream, asynchronous, capturable, with no host synchronisation.
 *
 * The message goes in pieces whose scratch fits REPROD_SCRATCH_MB, chosen when the call is made;
 * the scratch is taken at the call's first turn and given back after its last, so a group of
 * any size holds one call's scratch per communicator at a time. For each piece, each rank
 * owns one chunk: grouped ncclSend/ncclRecv bring every rank's contribution to that chunk into
 * scratch (small messages: one ncclAllGather of the whole piece instead), one reduction of the
 * N contributions runs on the device (shim/device/cuda.h: the engine's arithmetic), and the reduced
 * chunks are shared: all-gathered in place (grouped in-place broadcasts when the chunks differ
 * in length), sent to the root (Reduce), or kept (ReduceScatter). Only data moves through
 * NCCL, and data movement is exact. The rounds of several calls run in lockstep, one real
 * group per round (nccl_group.c), so one thread can drive the communicators of several GPUs.
 */
#include "nccl/nccl_internal.h"

#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/trace.h"

#define SMALL_BYTES (64u << 10) /* pieces up to this size go by one all-gather */
#define ALIGN_BYTES 256u        /* of each scratch area */

static size_t align_up(size_t bytes)
{
    return (bytes + ALIGN_BYTES - 1) & ~(size_t)(ALIGN_BYTES - 1);
}

/* Chunk `r` of a piece of `elements` split over `ranks`: [*start, *start + *length). */
static void chunk_of(size_t elements, int ranks, int r, size_t *start, size_t *length)
{
    size_t base = elements / (size_t)ranks, rest = elements % (size_t)ranks;
    *start = (size_t)r * base + ((size_t)r < rest ? (size_t)r : rest);
    *length = base + ((size_t)r < rest);
}

/* Elements of one contribution block in scratch for a piece of `piece` elements. */
static size_t block_elements(const struct nccl_work *w, size_t piece)
{
    if (w->collective == NCCL_REDUCE_SCATTER || w->small) return piece;
    return (piece + (size_t)w->info.ranks - 1) / (size_t)w->info.ranks;
}

/* Elements of this rank's own input in one piece: ReduceScatter reads a block per rank. */
static size_t own_elements(const struct nccl_work *w, size_t piece)
{
    return w->collective == NCCL_REDUCE_SCATTER ? piece * (size_t)w->info.ranks : piece;
}

/* Where each part of the scratch lies, in bytes from its start, for pieces of `piece` elements:
 * the N contribution blocks at 0, Reduce's reduced chunk off the root, PreMulSum's scaled copy
 * of this rank's input, then the device reduction's work area. */
struct scratch_layout {
    size_t reduced, scaled, work;
};

static struct scratch_layout layout_of(const struct nccl_work *w, size_t piece)
{
    size_t block = block_elements(w, piece) * w->element_bytes;
    struct scratch_layout l;
    l.reduced = align_up((size_t)w->info.ranks * block);
    l.scaled = l.reduced + (w->collective == NCCL_REDUCE && !w->small ? align_up(block) : 0);
    l.work = l.scaled + (w->arithmetic.premul != REPROD_PREMUL_NONE
                             ? align_up(own_elements(w, piece) * w->element_bytes)
                             : 0);
    return l;
}

/* Scratch bytes for pieces of `piece` elements (layout_of, and the work area's size). */
static size_t scratch_bytes_for(struct nccl_work *w, size_t piece)
{
    w->arithmetic.count = w->info.ranks;
    w->arithmetic.elements = block_elements(w, piece);
    w->arithmetic.work = NULL;
    return layout_of(w, piece).work + align_up(reprod_cuda_reduce_work_bytes(&w->arithmetic));
}

/* Choose the path and the piece size: the largest that keeps the scratch within the bound.
 * Every rank computes the same from the same arguments and settings. */
static int choose_pieces(struct nccl_work *w)
{
    size_t bound = (size_t)reprod_config()->scratch_mb << 20;
    size_t ranks = (size_t)w->info.ranks, s = w->element_bytes;
    if (w->collective != NCCL_REDUCE_SCATTER && (w->count * s <= SMALL_BYTES || w->count < ranks)) {
        w->small = 1;
        if (scratch_bytes_for(w, w->count) <= bound) {
            w->piece_elements = w->count;
            return 0;
        }
    }
    w->small = 0;
    size_t piece = w->collective == NCCL_REDUCE_SCATTER ? bound / (ranks * s) : bound / s;
    if (w->arithmetic.premul != REPROD_PREMUL_NONE) piece /= 2; /* room for the scaled copy */
    if (piece > w->count) piece = w->count;
    while (piece > ranks && scratch_bytes_for(w, piece) > bound)
        piece -= piece / 8 > ranks ? piece / 8 : ranks;
    if (w->collective != NCCL_REDUCE_SCATTER && piece < w->count) piece -= piece % ranks;
    if (piece == 0 || scratch_bytes_for(w, piece) > bound) return -1;
    w->piece_elements = piece;
    return 0;
}

ncclResult_t nccl_work_prepare(struct nccl_work *w)
{
    w->element_bytes = nccl_type_bytes(w->datatype);
    if (nccl_fixed_prepare(w) == 0 && (w->route != REPROD_ROUTE_EXCHANGE || choose_pieces(w) == 0))
        return ncclSuccess;
    reprod_log(REPROD_LOG_WARN,
               "warning: %s: REPROD_SCRATCH_MB=%u is too small for %d ranks; the call fails",
               w->api, reprod_config()->scratch_mb, w->info.ranks);
    return ncclInvalidUsage;
}

/* What the call reads on this rank, in bytes: its contribution. */
static size_t input_bytes(const struct nccl_work *w)
{
    size_t elements =
        w->collective == NCCL_REDUCE_SCATTER ? w->count * (size_t)w->info.ranks : w->count;
    return elements * w->element_bytes;
}

ncclResult_t nccl_work_start(struct nccl_work *w)
{
    w->offset = 0, w->sub_offset = 0, w->phase = 0, w->done = 0, w->result = ncclSuccess;
    /* In stream order: after the calls before it in its group, which it may read. */
    if (reprod_trace_enabled() &&
        nccl_hash_device(w->send, input_bytes(w), w->stream, w->info.device, &w->input_hash) == 0)
        w->has_input_hash = 1;
    w->scratch_bytes = w->route != REPROD_ROUTE_EXCHANGE ? nccl_fixed_scratch_bytes(w)
                                                         : scratch_bytes_for(w, w->piece_elements);
    if (reprod_cuda_scratch_alloc(&w->scratch, w->scratch_bytes, w->stream, w->info.device) !=
        REPROD_CUDA_OK) {
        reprod_log(REPROD_LOG_WARN, "warning: %s: no device memory for %zu bytes of scratch",
                   w->api, w->scratch_bytes);
        w->scratch = NULL;
        return ncclUnhandledCudaError;
    }
    w->started = 1;
    return ncclSuccess;
}

void nccl_work_drop(struct nccl_work *w, ncclResult_t rc)
{
    nccl_fixed_drop(w);
    if (w->scratch) reprod_cuda_scratch_free(w->scratch, w->stream, w->info.device);
    w->scratch = NULL;
    w->done = 1;
    if (w->result == ncclSuccess || w->result == ncclInProgress) w->result = rc;
}

/* Elements of the current piece. */
static size_t piece_now(const struct nccl_work *w)
{
    size_t left = w->count - w->offset;
    return left < w->piece_elements ? left : w->piece_elements;
}

static const char *at(const void *base, size_t elements, size_t element_bytes)
{
    return (const char *)base + elements * element_bytes;
}

/* Reduce's reduced chunk off the root, in scratch. */
static void *reduced_chunk(const struct nccl_work *w, size_t piece)
{
    return (char *)w->scratch + layout_of(w, piece).reduced;
}

/* PreMulSum's scaled copy of this rank's input for the current piece, in scratch. */
static char *scaled_area(const struct nccl_work *w, size_t piece)
{
    return (char *)w->scratch + layout_of(w, piece).scaled;
}

/* Element `index` of this rank's input in the current piece (ReduceScatter: of its block
 * `block`): the caller's buffer, or the scaled copy for a PreMulSum. */
static const char *local(const struct nccl_work *w, size_t piece, size_t block, size_t index)
{
    size_t s = w->element_bytes;
    if (w->arithmetic.premul != REPROD_PREMUL_NONE)
        return scaled_area(w, piece) + (block * piece + index) * s;
    if (w->collective == NCCL_REDUCE_SCATTER) return at(w->send, block * w->count + w->offset + index, s);
    return at(w->send, w->offset + index, s);
}

/* PreMulSum: every rank multiplies its own contribution by its own scalar (NCCL's "pre-
 * multiplies input values locally": the scalars may differ between ranks), in its type,
 * rounded to nearest, before anything is sent. The device reduction of one contribution
 * does that multiplication exactly as in a sum. */
static int scale_own_input(struct nccl_work *w, size_t piece)
{
    size_t s = w->element_bytes, blocks = w->collective == NCCL_REDUCE_SCATTER ? (size_t)w->info.ranks : 1;
    for (size_t b = 0; b < blocks; b++) {
        struct reprod_device_reduction r = w->arithmetic;
        r.op = REPROD_SUM, r.ordered = 0, r.count = 1;
        r.elements = piece;
        r.blocks = w->collective == NCCL_REDUCE_SCATTER ? at(w->send, b * w->count + w->offset, s)
                                                        : at(w->send, w->offset, s);
        r.block_stride_bytes = piece * s;
        r.own = NULL, r.own_index = -1;
        r.out = scaled_area(w, piece) + b * piece * s;
        r.work = NULL;
        if (reprod_cuda_reduce(w->stream, w->info.device, &r) != REPROD_CUDA_OK) return -1;
    }
    return 0;
}

#define CALL(expression)                                                                           \
    do {                                                                                           \
        ncclResult_t rc_ = (expression);                                                           \
        if (rc_ != ncclSuccess && rc_ != ncclInProgress) return rc_;                               \
    } while (0)

/* Phase 0 of the piece: every contribution to this rank's chunk into scratch. */
static ncclResult_t exchange(const struct nccl_work *w, size_t piece)
{
    const struct nccl_real *real = nccl_real();
    int me = w->info.rank, ranks = w->info.ranks;
    size_t s = w->element_bytes, block = block_elements(w, piece), start, length, mine, mine_len;
    ncclDataType_t dt = w->datatype;
    if (w->collective == NCCL_ALL_REDUCE && w->small)
        return real->AllGather(local(w, piece, 0, 0), w->scratch, piece, dt, w->comm, w->stream);
    if (w->collective == NCCL_REDUCE && w->small) {
        if (me != w->root)
            return real->Send(local(w, piece, 0, 0), piece, dt, w->root, w->comm, w->stream);
        for (int p = 0; p < ranks; p++)
            if (p != me)
                CALL(real->Recv((char *)w->scratch + (size_t)p * block * s, piece, dt, p, w->comm,
                                w->stream));
        return ncclSuccess;
    }
    chunk_of(piece, ranks, me, &mine, &mine_len);
    for (int p = 0; p < ranks; p++) {
        if (p == me) continue;
        const void *theirs;
        if (w->collective == NCCL_REDUCE_SCATTER) {
            theirs = local(w, piece, (size_t)p, 0), length = piece;
            mine_len = piece;
        } else {
            chunk_of(piece, ranks, p, &start, &length);
            theirs = local(w, piece, 0, start);
        }
        if (length) CALL(real->Send(theirs, length, dt, p, w->comm, w->stream));
        if (mine_len)
            CALL(real->Recv((char *)w->scratch + (size_t)p * block * s, mine_len, dt, p, w->comm,
                            w->stream));
    }
    return ncclSuccess;
}

/* Phase 1 of the piece: share the reduced chunks (AllReduce) or send them to the root. */
static ncclResult_t share(const struct nccl_work *w, size_t piece)
{
    const struct nccl_real *real = nccl_real();
    int me = w->info.rank, ranks = w->info.ranks;
    size_t s = w->element_bytes, start, length;
    ncclDataType_t dt = w->datatype;
    if (w->collective == NCCL_REDUCE) {
        chunk_of(piece, ranks, me, &start, &length);
        if (me != w->root)
            return length ? real->Send(reduced_chunk(w, piece), length, dt, w->root, w->comm,
                                       w->stream)
                          : ncclSuccess;
        for (int p = 0; p < ranks; p++) {
            chunk_of(piece, ranks, p, &start, &length);
            if (p != me && length)
                CALL(real->Recv((char *)at(w->recv, w->offset + start, s), length, dt, p, w->comm,
                                w->stream));
        }
        return ncclSuccess;
    }
    if (piece % (size_t)ranks == 0) {
        chunk_of(piece, ranks, me, &start, &length);
        return real->AllGather(at(w->recv, w->offset + start, s), (char *)at(w->recv, w->offset, s),
                               length, dt, w->comm, w->stream);
    }
    for (int p = 0; p < ranks; p++) {
        chunk_of(piece, ranks, p, &start, &length);
        char *chunk = (char *)at(w->recv, w->offset + start, s);
        if (length) CALL(real->Broadcast(chunk, chunk, length, dt, p, w->comm, w->stream));
    }
    return ncclSuccess;
}

ncclResult_t nccl_work_communicate(struct nccl_work *w)
{
    if (w->route != REPROD_ROUTE_EXCHANGE) return nccl_fixed_communicate(w);
    size_t piece = piece_now(w);
    if (w->phase == 0 && w->arithmetic.premul != REPROD_PREMUL_NONE &&
        scale_own_input(w, piece) != 0 && w->local_error == ncclSuccess) {
        reprod_log(REPROD_LOG_WARN, "warning: %s: the PreMulSum scaling could not be enqueued",
                   w->api);
        w->local_error = ncclUnhandledCudaError;
    }
    return w->phase == 0 ? exchange(w, piece) : share(w, piece);
}

/* Whether this collective shares its reduced chunks in a phase 1. */
static int has_share_phase(const struct nccl_work *w)
{
    return !w->small && w->collective != NCCL_REDUCE_SCATTER;
}

/* Enqueue the reduction of this rank's chunk of the current piece. */
static void reduce_piece(struct nccl_work *w, size_t piece)
{
    int me = w->info.rank, ranks = w->info.ranks;
    size_t s = w->element_bytes, block = block_elements(w, piece), start = 0, length = piece;
    struct reprod_device_reduction r = w->arithmetic;
    r.premul = REPROD_PREMUL_NONE; /* each rank scaled its own input already */
    r.count = ranks;
    r.blocks = w->scratch;
    r.block_stride_bytes = block * s;
    r.own = NULL, r.own_index = -1;
    if (w->collective == NCCL_ALL_REDUCE && w->small) {
        r.out = (char *)at(w->recv, w->offset, s);
    } else if (w->collective == NCCL_REDUCE && w->small) {
        if (me != w->root) return;
        r.own = local(w, piece, 0, 0), r.own_index = me;
        r.out = (char *)at(w->recv, w->offset, s);
    } else if (w->collective == NCCL_REDUCE_SCATTER) {
        r.own = local(w, piece, (size_t)me, 0), r.own_index = me;
        r.out = (char *)at(w->recv, w->offset, s);
    } else {
        chunk_of(piece, ranks, me, &start, &length);
        r.own = local(w, piece, 0, start), r.own_index = me;
        r.out = w->collective == NCCL_REDUCE && me != w->root
                    ? reduced_chunk(w, piece)
                    : (char *)at(w->recv, w->offset + start, s);
    }
    if (length == 0) return;
    r.elements = length;
    r.work = (char *)w->scratch + w->scratch_bytes - align_up(reprod_cuda_reduce_work_bytes(&r));
    if (reprod_cuda_reduce(w->stream, w->info.device, &r) != REPROD_CUDA_OK &&
        w->local_error == ncclSuccess) {
        reprod_log(REPROD_LOG_WARN, "warning: %s: the device reduction could not be enqueued",
                   w->api);
        w->local_error = ncclUnhandledCudaError;
    }
}

void nccl_work_finish(struct nccl_work *w)
{
    nccl_work_drop(w, ncclSuccess);
    size_t payload =
        w->collective == NCCL_REDUCE_SCATTER ? w->count * (size_t)w->info.ranks : w->count;
    uint64_t now = w->started_ns ? reprod_clock_ns() : 0;
    reprod_stats_record(w->api, w->path, payload * w->element_bytes,
                        w->started_ns ? now - w->started_ns : 0, 0);
    if (!reprod_trace_enabled()) return;
    static const char *const type_names[] = {"float16", "bfloat16", "float32", "float64"};
    const void *output = w->recv;
    size_t output_bytes = w->count * w->element_bytes;
    if (w->collective == NCCL_REDUCE && w->info.rank != w->root) output = NULL;
    struct reprod_trace_record record = {
        .sequence = reprod_trace_sequence(),
        .api = w->api,
        .action = w->path == REPROD_PATH_EXACT ? "exact" : "ordered",
        .detail = type_names[w->arithmetic.type],
        .count = (long long)payload,
        .ranks = w->info.ranks,
        .has_input = w->has_input_hash,
        .input_hash = w->input_hash,
    };
    if (output && nccl_hash_device(output, output_bytes, w->stream, w->info.device,
                                      &record.output_hash) == 0)
        record.has_output = 1;
    if (w->path == REPROD_PATH_EXACT)
        reprod_trace_write_route(&record, reprod_route_name(w->route));
    else
        reprod_trace_write(&record);
}

void nccl_work_advance(struct nccl_work *w)
{
    if (w->route != REPROD_ROUTE_EXCHANGE) {
        nccl_fixed_advance(w);
        return;
    }
    size_t piece = piece_now(w);
    if (w->phase == 0) {
        reduce_piece(w, piece);
        if (has_share_phase(w)) {
            w->phase = 1;
            return;
        }
    }
    w->phase = 0;
    w->offset += piece;
    if (w->offset >= w->count) nccl_work_finish(w);
}
