/* nccl_fixed.c: the fixed-point routes of one deterministic NCCL reduction (docs/nccl.md,
 * "Routes"): the communication is NCCL's own integer collectives, whose ring, tree, NVLS or
 * in-network algorithms talk to O(log N) peers; the arithmetic is the engine's (engine_fixed.h), in
 * device kernels (shim/device/cuda_kernel_fixed.h).
 *
 * Two passes (REPROD_ROUTE_FIXED), per piece:
 *   round 1: each rank's byte codes, packed (PACK: a hi an element, a lo a block of 8 binary32
 *            or binary64 elements, 1 1/8 bytes an element; of one 16-bit element),
 *            ncclAllReduce(ncclUint8, ncclMax) in place, and unpacked;
 *            then, on the device, the layout, read back to the host in stream order without
 *            waiting (the rounds go on with other communicators meanwhile): AllReduce and Reduce
 *            lay out each element's own words one after another (the per-element layout:
 *            LAYOUT, GROUPS, TOTAL, OFFSETS; T, the piece's words, comes back); ReduceScatter
 *            gives every element the most any needs (K, a stride: each rank's block of words
 *            the same size);
 *   round 2: each rank's words, the call's own collective on them with ncclInt64 and ncclSum
 *            in place (AllReduce, ReduceScatter, Reduce), then the rounding kernel writes the
 *            results. Round 1 also says whether int32 words of W = 31 - ceil(log2 N) bits take
 *            fewer bytes (one for a 16-bit element within a few binades, where int64 words take
 *            one; three for binary64 up to 256 ranks, where they take two): then the words are
 *            int32, summed with ncclInt32.
 * AllReduce and Reduce take round 2 in sub-pieces of as many words as half the scratch holds
 * (the words [sub_offset, + C) of the T; an element that straddles two keeps its words so far in
 * a carry on the device): the piece (its codes) can then be as large as the other half holds at
 * 2 bytes an element, not at the most words an element can take, so a large message takes a few
 * NCCL calls, not hundreds. The layout is the same on every rank (the reduced codes are), so
 * every rank issues the same calls.
 * One pass (REPROD_ROUTE_FIXED_ONE_PASS), where the host cannot read K back (graph capture,
 * nonblocking communicators): the whole range of the type in every element, one int64 sum.
 *
 * Scratch per piece: codes, the read-back cells, the per-element layout's blocks, PreMulSum's
 * scaled copy, the words (sized for the one-pass layout, the most K can be; in sub-pieces, half
 * of REPROD_SCRATCH_MB). Pieces keep it within
 * REPROD_SCRATCH_MB whatever the rank count.
 */
#include "nccl/nccl_internal.h"

#include "engine/engine.h"
#include "runtime/config.h"
#include "runtime/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALIGN_BYTES 256u

static size_t align_up(size_t bytes)
{
    return (bytes + ALIGN_BYTES - 1) & ~(size_t)(ALIGN_BYTES - 1);
}

/* The layout read back from the device: shared by the work and the host function that fills
 * it. */
struct nccl_readback {
    _Atomic int arrived;
    _Atomic int owners; /* the work and the pending host function */
    int32_t cells[REPROD_DEVICE_FIXED_CELLS];
};

static void readback_unref(struct nccl_readback *r)
{
    if (atomic_fetch_sub(&r->owners, 1) == 1) free(r);
}

static void readback_done(void *owner, const int32_t *cells)
{
    struct nccl_readback *r = owner;
    memcpy(r->cells, cells, sizeof r->cells);
    atomic_store_explicit(&r->arrived, 1, memory_order_release);
    readback_unref(r);
}

/* Elements of the vector the current piece covers on this rank: ReduceScatter's piece is a
 * block of each rank. */
static size_t piece_total(const struct nccl_work *w, size_t piece)
{
    return w->collective == NCCL_REDUCE_SCATTER ? piece * (size_t)w->info.ranks : piece;
}

/* Where each part of the scratch lies for pieces of `piece` elements. */
struct fixed_layout {
    size_t codes, max_words, layout, scaled, words, end;
};

static struct fixed_layout layout_for(const struct nccl_work *w, size_t piece)
{
    size_t total = piece_total(w, piece);
    struct fixed_layout l;
    l.codes = 0;
    l.max_words = align_up(2 * total);
    l.layout = l.max_words + ALIGN_BYTES;
    l.scaled = l.layout + (w->per_element ? align_up(reprod_device_fixed_layout_bytes(total)) : 0);
    l.words = l.scaled +
              (w->arithmetic.premul != REPROD_PREMUL_NONE ? align_up(total * w->element_bytes) : 0);
    l.end = l.words + (w->words_bytes ? w->words_bytes
                                      : align_up(total * (size_t)w->full_words * sizeof(int64_t)));
    return l;
}

/* Bytes of one of the current piece's words: int32 narrow ones, or int64. */
static size_t word_bytes(const struct nccl_work *w)
{
    return w->narrow ? sizeof(int32_t) : sizeof(int64_t);
}

/* Elements of the current sub-piece of a piece of `piece` (the whole piece but in sub-pieces);
 * per-element layout: its words. */
static size_t sub_now(const struct nccl_work *w, size_t piece)
{
    if (w->per_element) {
        size_t fit = w->words_bytes / word_bytes(w), left = w->word_total - w->sub_offset;
        return left < fit ? left : fit;
    }
    if (!w->words_bytes) return piece;
    size_t stride = w->stride > 0 ? (size_t)w->stride : 1; /* the kernel reads back at least 1 */
    size_t fit = w->words_bytes / (stride * word_bytes(w));
    if (fit == 0) fit = 1; /* never (the words hold one element at the most K), but never 0 */
    size_t left = piece - w->sub_offset;
    return left < fit ? left : fit;
}

/* The route of the call, and its pieces when it is a fixed one (the exchange when
 * REPROD_SCRATCH_MB cannot hold one piece's scratch). Every rank computes the same from the same
 * arguments and settings. Returns 0. */
int nccl_fixed_prepare(struct nccl_work *w)
{
    w->route = REPROD_ROUTE_EXCHANGE;
    if (w->arithmetic.ordered || (w->arithmetic.op != REPROD_SUM && w->arithmetic.op != REPROD_AVG))
        return 0;
    int capturing = 0;
    if (reprod_cuda_capturing(w->stream, w->info.device, &capturing) != REPROD_CUDA_OK) capturing = 0;
    struct reprod_route_call call = {
        .nccl = 1,
        .collective = w->collective == NCCL_ALL_REDUCE    ? REPROD_COLLECTIVE_ALLREDUCE
                      : w->collective == NCCL_REDUCE      ? REPROD_COLLECTIVE_REDUCE
                                                          : REPROD_COLLECTIVE_REDUCE_SCATTER,
        .ranks = w->info.ranks,
        .count = w->collective == NCCL_REDUCE_SCATTER ? (uint64_t)w->count * (uint64_t)w->info.ranks
                                                      : (uint64_t)w->count,
        .type = w->arithmetic.type,
        .one_pass = !w->info.blocking || capturing,
    };
    w->route = reprod_route_choose(&call);
    if (w->route == REPROD_ROUTE_EXCHANGE) return 0;
    w->narrow_probe = w->route == REPROD_ROUTE_FIXED;
    w->narrow = 0;
    w->per_element = w->route == REPROD_ROUTE_FIXED && w->collective != NCCL_REDUCE_SCATTER;
    w->word_total = 0, w->sub = 0;
    w->full_words = reprod_engine_fixed_full_words(w->arithmetic.type, w->info.ranks);
    size_t bound = (size_t)reprod_config()->scratch_mb << 20;
    size_t premul = w->arithmetic.premul != REPROD_PREMUL_NONE ? w->element_bytes : 0;
    size_t per_element = 2 + (size_t)w->full_words * sizeof(int64_t) + premul;
    w->words_bytes = 0;
    if (w->route == REPROD_ROUTE_FIXED && w->collective != NCCL_REDUCE_SCATTER) {
        /* Sub-pieces: half the bound for a sub-piece's words (K an element, K known after
         * round 1), half for the piece's codes and scaled copy. */
        w->words_bytes = bound / 2 / ALIGN_BYTES * ALIGN_BYTES;
        per_element = 2 + premul;
    }
    /* The codes and K's cell in the other half (K's cell: one ALIGN_BYTES; the codes and
     * PreMulSum's scaled copy each rounded up to ALIGN_BYTES: one more each). Without
     * sub-pieces the words are in the same bound: K's cell and the codes' and words' rounding. */
    size_t cells = (w->words_bytes ? 1 : 3) + (premul ? 2 : 0);
    size_t piece = (bound - w->words_bytes - cells * ALIGN_BYTES) / per_element;
    if (w->collective == NCCL_REDUCE_SCATTER) piece /= (size_t)w->info.ranks;
    if (piece > w->count) piece = w->count;
    if (w->words_bytes) { /* a small call: room for its words at the most K can be, no more */
        size_t most = align_up(piece * (size_t)w->full_words * sizeof(int64_t));
        if (most < w->words_bytes) w->words_bytes = most;
    }
    /* A sub-piece but the last holds an element's words at the most (its carry's bound). */
    if (w->words_bytes && w->words_bytes < REPROD_DEVICE_FIXED_WORDS_MOST * sizeof(int64_t))
        w->words_bytes = align_up(REPROD_DEVICE_FIXED_WORDS_MOST * sizeof(int64_t));
    if (layout_for(w, piece).end > bound) { /* the largest piece that fits: the per-element
                                               layout's blocks and the areas' rounding */
        size_t fits = 0, over = piece;
        while (over - fits > 1) {
            size_t middle = fits + (over - fits) / 2;
            if (layout_for(w, middle).end <= bound)
                fits = middle;
            else
                over = middle;
        }
        piece = fits;
    }
    if (piece == 0 || layout_for(w, piece).end > bound) {
        /* Not one element's scratch within the bound (a ReduceScatter's piece holds one of each
         * rank): the exchange, on every rank alike, which says whether it fits. */
        w->route = REPROD_ROUTE_EXCHANGE;
        return 0;
    }
    w->piece_elements = piece;
    return 0;
}

size_t nccl_fixed_scratch_bytes(const struct nccl_work *w)
{
    return layout_for(w, w->piece_elements).end;
}

static size_t piece_now(const struct nccl_work *w)
{
    size_t left = w->count - w->offset;
    return left < w->piece_elements ? left : w->piece_elements;
}

static char *scratch_at(const struct nccl_work *w, size_t offset)
{
    return (char *)w->scratch + offset;
}

/* A stage with the call's arithmetic, over `elements` elements. */
static struct reprod_device_fixed stage_of(const struct nccl_work *w,
                                           enum reprod_device_fixed_stage stage, size_t elements)
{
    struct fixed_layout l = layout_for(w, w->piece_elements);
    struct reprod_device_fixed s = {
        .stage = stage,
        .type = w->arithmetic.type,
        .op = w->arithmetic.op,
        .rounding = w->arithmetic.rounding,
        .ranks = w->info.ranks,
        .stride = w->route == REPROD_ROUTE_FIXED ? w->stride : w->full_words,
        .narrow = stage == REPROD_DEVICE_FIXED_MAX_WORDS ? w->narrow_probe : w->narrow,
        .elements = elements,
        .codes = (uint8_t *)scratch_at(w, l.codes),
        .words = (int64_t *)(void *)scratch_at(w, l.words),
        .max_words = (int32_t *)(void *)scratch_at(w, l.max_words),
    };
    if (w->per_element) {
        s.layout = (uint64_t *)(void *)scratch_at(w, l.layout);
        s.word_total = w->word_total;
        s.sub = w->sub;
    }
    return s;
}

static void note_local_error(struct nccl_work *w, const char *what)
{
    if (w->local_error != ncclSuccess) return;
    reprod_log(REPROD_LOG_WARN, "warning: %s: %s could not be enqueued", w->api, what);
    w->local_error = ncclUnhandledCudaError;
}

static void run_stage(struct nccl_work *w, const struct reprod_device_fixed *s, const char *what)
{
    if (reprod_cuda_fixed(w->stream, w->info.device, s) != REPROD_CUDA_OK) note_local_error(w, what);
}

/* This rank's terms of the piece from its element `first` on, for a stage that reads them
 * (CODES, SPLIT, FULL_SPLIT): PreMulSum's scaled copy, or the caller's input (a ReduceScatter in
 * pieces: a block of each rank's part, read in place). */
static void take_terms(const struct nccl_work *w, struct reprod_device_fixed *st, size_t piece,
                       size_t first)
{
    size_t s = w->element_bytes;
    st->codes += 2 * first; /* a sub-piece's: from its first element (0 but in sub-pieces) */
    if (w->arithmetic.premul != REPROD_PREMUL_NONE) {
        st->terms = scratch_at(w, layout_for(w, w->piece_elements).scaled) + first * s;
        return;
    }
    st->terms = (const char *)w->send + (w->offset + first) * s;
    if (w->collective == NCCL_REDUCE_SCATTER && piece < w->count) /* block b at b * count */
        st->terms_block = piece, st->terms_stride = w->count;
}

static void run_terms_stage(struct nccl_work *w, enum reprod_device_fixed_stage stage, size_t piece,
                            size_t first)
{
    struct reprod_device_fixed st = stage_of(w, stage, piece_total(w, piece));
    take_terms(w, &st, piece, first);
    run_stage(w, &st, "the fixed route's split");
}

/* PACK or UNPACK of the piece's codes: the wire lies in the words' area, which holds it (at
 * least 8 bytes an element, against 2 at most) and which round 2 only writes after UNPACK. */
static struct reprod_device_fixed wire_stage(const struct nccl_work *w,
                                             enum reprod_device_fixed_stage stage, size_t piece)
{
    struct reprod_device_fixed s = stage_of(w, stage, piece_total(w, piece));
    s.out = s.words;
    return s;
}

/* PreMulSum: every rank multiplies its own contribution by its own scalar, in its type,
 * rounded to nearest (as nccl_path.c does), into the scaled copy: blocks one after another. */
static void scale_own_input(struct nccl_work *w, size_t piece)
{
    size_t s = w->element_bytes;
    size_t blocks = w->collective == NCCL_REDUCE_SCATTER ? (size_t)w->info.ranks : 1;
    char *scaled = scratch_at(w, layout_for(w, w->piece_elements).scaled);
    for (size_t b = 0; b < blocks; b++) {
        struct reprod_device_reduction r = w->arithmetic;
        r.op = REPROD_SUM, r.ordered = 0, r.count = 1;
        r.elements = piece;
        r.blocks = (const char *)w->send + (b * (blocks > 1 ? w->count : 0) + w->offset) * s;
        r.block_stride_bytes = piece * s;
        r.own = NULL, r.own_index = -1;
        r.out = scaled + b * piece * s;
        r.work = NULL;
        if (reprod_cuda_reduce(w->stream, w->info.device, &r) != REPROD_CUDA_OK)
            note_local_error(w, "the PreMulSum scaling");
    }
}

/* The call's own collective on the piece's words (int64, or int32 narrow ones), summed in
 * place. */
static ncclResult_t sum_words(const struct nccl_work *w, size_t piece, int stride)
{
    const struct nccl_real *real = nccl_real();
    char *words = (char *)stage_of(w, REPROD_DEVICE_FIXED_SPLIT, 0).words;
    size_t per_rank = piece * (size_t)stride;
    ncclDataType_t type = w->narrow ? ncclInt32 : ncclInt64;
    switch (w->collective) {
    case NCCL_REDUCE_SCATTER:
        return real->ReduceScatter(words, words + (size_t)w->info.rank * per_rank * word_bytes(w),
                                   per_rank, type, ncclSum, w->comm, w->stream);
    case NCCL_REDUCE:
        return real->Reduce(words, words, per_rank, type, ncclSum, w->root, w->comm, w->stream);
    default:
        return real->AllReduce(words, words, per_rank, type, ncclSum, w->comm, w->stream);
    }
}

/* The other ranks are already in this call: the job stops here rather than hang. */
static void layout_lost(const struct nccl_work *w, const char *why)
{
    reprod_log(REPROD_LOG_ERROR,
               "error: %s %s; the other ranks are already in this call, so the job stops here "
               "rather than hang",
               w->api, why);
    _exit(2);
}

/* The piece's layout from round 1's cells: narrow words or int64 ones, and how many an
 * element (per-element layout: the piece's words T). */
static void take_stride(struct nccl_work *w, const int32_t *cells)
{
    if (cells[0] < 0 || cells[0] > w->full_words || cells[1] < 0 ||
        (cells[1] > REPROD_DEVICE_FIXED_NARROW_MOST && cells[1] != REPROD_DEVICE_FIXED_NARROW_NONE))
        layout_lost(w, "read a layout back from the device that no kernel writes");
    w->narrow = reprod_device_fixed_layout(cells, w->narrow_probe, &w->stride);
    if (!w->per_element) return;
    int narrow = 0;
    uint64_t total = reprod_device_fixed_total(cells, &narrow);
    uint64_t most = (uint64_t)piece_now(w) *
                    (uint64_t)(narrow ? REPROD_DEVICE_FIXED_NARROW_MOST : w->full_words);
    if (cells[2] < 0 || cells[2] > 1 || total > most ||
        (narrow && (!w->narrow_probe || cells[1] > REPROD_DEVICE_FIXED_NARROW_MOST)))
        layout_lost(w, "read a layout back from the device that no kernel writes");
    w->narrow = narrow;
    w->word_total = total;
    w->sub_offset = 0, w->sub = 0;
}

int nccl_fixed_waiting(struct nccl_work *w)
{
    if (!w->readback) return 0;
    if (!atomic_load_explicit(&w->readback->arrived, memory_order_acquire)) return 1;
    take_stride(w, w->readback->cells);
    readback_unref(w->readback);
    w->readback = NULL;
    return 0;
}

ncclResult_t nccl_fixed_communicate(struct nccl_work *w)
{
    size_t piece = piece_now(w);
    if (w->phase == 0 && w->arithmetic.premul != REPROD_PREMUL_NONE) scale_own_input(w, piece);
    if (w->route == REPROD_ROUTE_FIXED_ONE_PASS) {
        run_terms_stage(w, REPROD_DEVICE_FIXED_FULL_SPLIT, piece, 0);
        return sum_words(w, piece, w->full_words);
    }
    if (w->phase == 0) {
        run_terms_stage(w, REPROD_DEVICE_FIXED_CODES, piece, 0);
        struct reprod_device_fixed pack = wire_stage(w, REPROD_DEVICE_FIXED_PACK, piece);
        run_stage(w, &pack, "the fixed route's codes");
        return nccl_real()->AllReduce(
            pack.out, pack.out,
            reprod_engine_fixed_packed_bytes(w->arithmetic.type, piece_total(w, piece)), ncclUint8,
            ncclMax, w->comm, w->stream);
    }
    size_t sub = sub_now(w, piece);
    if (w->per_element) {                 /* the words [sub_offset, + sub) of the piece's */
        if (sub == 0) return ncclSuccess; /* zeros only: nothing to sum, ROUND alone */
        struct reprod_device_fixed st = stage_of(w, REPROD_DEVICE_FIXED_SPLIT, piece);
        st.word_first = w->sub_offset, st.word_end = w->sub_offset + sub;
        take_terms(w, &st, piece, 0);
        run_stage(w, &st, "the fixed route's split");
        return sum_words(w, sub, 1);
    }
    run_terms_stage(w, REPROD_DEVICE_FIXED_SPLIT, sub, w->sub_offset);
    return sum_words(w, sub, w->stride);
}

/* The layout back to the host without waiting; where the readback cannot be enqueued, the host
 * waits for the stream instead (the other ranks are in this call: every rank must learn it). */
static void read_back_stride(struct nccl_work *w)
{
    int32_t *max_words = stage_of(w, REPROD_DEVICE_FIXED_MAX_WORDS, 0).max_words;
    struct nccl_readback *r = calloc(1, sizeof *r);
    if (r) {
        atomic_init(&r->owners, 2);
        if (reprod_cuda_readback(w->stream, w->info.device, max_words, readback_done, r) ==
            REPROD_CUDA_OK) {
            w->readback = r;
            return;
        }
        free(r);
    }
    int32_t cells[REPROD_DEVICE_FIXED_CELLS] = {0};
    if (reprod_cuda_copy_async(cells, max_words, sizeof cells, w->stream, w->info.device) ==
            REPROD_CUDA_OK &&
        reprod_cuda_stream_sync(w->stream, w->info.device) == REPROD_CUDA_OK) {
        take_stride(w, cells);
        return;
    }
    layout_lost(w, "could not read its layout back from the device");
}

/* The next piece, or the call's end. */
static void next_piece(struct nccl_work *w, size_t piece)
{
    w->sub_offset = 0;
    w->sub = 0;
    w->phase = 0;
    w->offset += piece;
    if (w->offset >= w->count) nccl_work_finish(w);
}

/* Per-element layout: round the elements that end in the current sub-piece (and keep the
 * straddler's words), then the next sub-piece or piece. */
static void advance_per_element(struct nccl_work *w, size_t piece)
{
    size_t sub = sub_now(w, piece);
    if (w->collective != NCCL_REDUCE || w->info.rank == w->root) {
        struct reprod_device_fixed s = stage_of(w, REPROD_DEVICE_FIXED_ROUND, piece);
        s.word_first = w->sub_offset, s.word_end = w->sub_offset + sub;
        s.out = (char *)w->recv + w->offset * w->element_bytes;
        run_stage(w, &s, "the fixed route's rounding");
    }
    if (w->sub_offset + sub < w->word_total) {
        w->sub_offset += sub;
        w->sub++;
        return;
    }
    next_piece(w, piece);
}

void nccl_fixed_advance(struct nccl_work *w)
{
    size_t piece = piece_now(w);
    if (w->route == REPROD_ROUTE_FIXED && w->phase == 0) {
        struct reprod_device_fixed unpack = wire_stage(w, REPROD_DEVICE_FIXED_UNPACK, piece);
        run_stage(w, &unpack, "the fixed route's codes");
        static const enum reprod_device_fixed_stage per_element[] = {
            REPROD_DEVICE_FIXED_LAYOUT, REPROD_DEVICE_FIXED_GROUPS, REPROD_DEVICE_FIXED_TOTAL,
            REPROD_DEVICE_FIXED_OFFSETS};
        for (int k = 0; k < (w->per_element ? 4 : 1); k++) {
            struct reprod_device_fixed s =
                stage_of(w, w->per_element ? per_element[k] : REPROD_DEVICE_FIXED_MAX_WORDS,
                         piece_total(w, piece));
            s.narrow = w->narrow_probe;
            run_stage(w, &s, "the fixed route's layout");
        }
        read_back_stride(w);
        w->phase = 1;
        return;
    }
    if (w->per_element) {
        advance_per_element(w, piece);
        return;
    }
    int me = w->info.rank;
    size_t sub = w->route == REPROD_ROUTE_FIXED ? sub_now(w, piece) : piece;
    size_t first = w->route == REPROD_ROUTE_FIXED ? w->sub_offset : 0;
    if (w->collective != NCCL_REDUCE || me == w->root) {
        enum reprod_device_fixed_stage stage = w->route == REPROD_ROUTE_FIXED
                                                   ? REPROD_DEVICE_FIXED_ROUND
                                                   : REPROD_DEVICE_FIXED_FULL_ROUND;
        size_t elements = w->collective == NCCL_REDUCE_SCATTER ? sub : piece_total(w, sub);
        struct reprod_device_fixed s = stage_of(w, stage, elements);
        s.codes += 2 * first;
        if (w->collective == NCCL_REDUCE_SCATTER) {
            s.codes += 2 * (size_t)me * piece;
            s.words = (int64_t *)(void *)((char *)s.words +
                                          (size_t)me * piece * (size_t)s.stride * word_bytes(w));
        }
        s.out = (char *)w->recv + (w->offset + first) * w->element_bytes;
        run_stage(w, &s, "the fixed route's rounding");
    }
    if (w->route == REPROD_ROUTE_FIXED && first + sub < piece) { /* the next sub-piece */
        w->sub_offset = first + sub;
        return;
    }
    next_piece(w, piece);
}

void nccl_fixed_drop(struct nccl_work *w)
{
    if (w->readback) readback_unref(w->readback);
    w->readback = NULL;
}
