/* cost.c: the alpha-beta model of cost.h: the machine, NCCL's algorithms, and the calls each
 * route makes, priced rank by rank with the tally of cost_tally.h (Open MPI's algorithms are
 * cost_openmpi.c's); a few ranks stand for all of them (rank 0, 1, N/2 and N-1: the roots, the
 * ranks a non-power-of-two folds away, and ordinary ones). */
#include "runtime/cost.h"
#include "runtime/cost_tally.h"

#include "device/cuda.h" /* reprod_device_fixed_layout: the route's own choice of words */
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixed route's cut of a call (hooks/mpi/mpi_fixed.c's SEGMENT_ELEMENTS and PIECE_WORDS):
 * a pass 1 of codes a segment at a time, then its words at most a piece a call. */
#define FIXED_PIECE_WORDS      (((uint64_t)1 << 22) - ((uint64_t)1 << 16))
#define FIXED_SEGMENT_ELEMENTS (2 * FIXED_PIECE_WORDS)
/* hooks/nccl/nccl_fixed.c at REPROD_SCRATCH_MB's default 64 MiB: the two-pass route's sub-pieces
 * hold half of it in words, its piece the other half in codes (2 bytes an element) and the
 * per-element layout's blocks (8 bytes every 16 elements), less the cells' 256 bytes and the
 * groups' and side slots' few KiB: the largest piece whose scratch fits (nccl_fixed_prepare). */
#define NCCL_SUB_PIECE_WORDS ((uint64_t)4 << 20)
#define NCCL_PIECE_ELEMENTS  ((uint64_t)13415680)

/* ---- The machine ------------------------------------------------------------------------- */

void reprod_cost_machine_defaults(struct reprod_cost_machine *m)
{
    m->ranks_per_node = 8;      /* 8 GPUs a node */
    m->intra_latency_us = 2.0;  /* NVLink through the library: a few microseconds */
    m->intra_gbps = 150.0;      /* NVLink 4, one direction, one peer, achieved */
    m->inter_latency_us = 5.0;  /* InfiniBand between nodes, through the library */
    m->inter_gbps = 25.0;       /* one 200 Gb/s HDR port per GPU */
    m->overhead_us = 0.5;       /* posting one more message of a batch */
    m->reduce_gbps = 100.0;     /* a GPU's or a node's vector sum, one operand */
    m->engine_ns = 0.05;        /* exact sum on the GPU, per element and contribution */
    m->fixed_ns = 0.05;         /* split + rounding on the GPU, per element and word */
    m->segment_elements = FIXED_SEGMENT_ELEMENTS;
    m->rank = -1;
    m->peer_set = NULL;
}

int reprod_cost_type_bytes(reprod_type type)
{
    return type == REPROD_FLOAT64 ? 8 : type == REPROD_FLOAT32 ? 4 : 2;
}

/* Words of `width` - ceil(log2 N) bits that hold a typical element: a finite element within
 * one bucket spans the bucket's binades and the significand (engine_fixed_element): 24 + 0
 * (binary32), 11 (binary16), 8 (bfloat16), 60 (binary64: 8 binades a bucket); a few binades
 * more for contributions that differ. */
static int typical_words(reprod_type type, int ranks, int width)
{
    int c = 0;
    while ((1 << c) < ranks)
        c++;
    int word_bits = width - c;
    int bits = type == REPROD_FLOAT64    ? 60 + 8
               : type == REPROD_FLOAT32  ? 24 + 8
               : type == REPROD_BFLOAT16 ? 8 + 8
                                         : 11 + 8;
    return (bits + word_bits - 1) / word_bits;
}

int reprod_cost_typical_words(reprod_type type, int ranks)
{
    /* int64 words; bfloat16 priced as binary16 (one word either way up to 2^44 ranks) */
    return typical_words(type == REPROD_BFLOAT16 ? REPROD_FLOAT16 : type, ranks, 63);
}

int reprod_cost_typical_narrow_words(reprod_type type, int ranks)
{
    return typical_words(type, ranks, 31);
}

/* ---- NCCL ------------------------------------------------------------------------------- */

/* NCCL's ring or tree all-reduce, the faster in the model (NCCL's own tuner chooses from a
 * model of the same shape). Steps of the pipeline counted as messages. */
static const char *nccl_allreduce(struct tally *t, uint64_t bytes)
{
    int n = t->ranks, g = t->m->ranks_per_node > 0 ? t->m->ranks_per_node : 1;
    if (n < 2 || bytes == 0) return "none";
    int nodes = (n + g - 1) / g, local = n < g ? n : g;
    double ring_latency = n > g ? t->m->inter_latency_us : t->m->intra_latency_us;
    double ring_gbps = n > g ? t->m->inter_gbps : t->m->intra_gbps;
    double ring = 2.0 * (n - 1) * ring_latency + 2.0 * (double)(n - 1) / n * (double)bytes /
                                                     (ring_gbps * 1e3);
    double tree = 2.0 * ((local - 1) * t->m->intra_latency_us +
                         floor_log2(2 * nodes - 1) * t->m->inter_latency_us) +
                  2.0 * (double)bytes / ((nodes > 1 ? t->m->inter_gbps : t->m->intra_gbps) * 1e3);
    if (nodes > 1 && tree < ring) {
        /* Double binary tree between nodes, a chain inside: each rank sends half the message
         * up and down each of two trees, to at most three peers. */
        t->messages = 6, t->peers = 3, t->bytes = 2 * bytes;
        t->time_us += tree;
        note_memory(t, 4u << 20);
        return "NCCL tree";
    }
    uint64_t chunk = (bytes + (uint64_t)n - 1) / (uint64_t)n;
    t->messages = 2 * (uint64_t)(n - 1), t->peers = 1, t->bytes = t->messages * chunk;
    t->time_us += ring;
    note_memory(t, 4u << 20); /* one channel's buffers, NCCL_BUFFSIZE */
    return "NCCL ring";
}

/* ---- Calls ------------------------------------------------------------------------------ */

typedef const char *(*rank_cost)(struct tally *t, const void *args);

/* Run `one` for each representative rank; the cost is the largest of each figure. */
static void over_ranks(const struct reprod_cost_machine *m, int ranks, rank_cost one,
                       const void *args, struct reprod_cost *cost)
{
    int reps[4] = {0, 1, ranks / 2, ranks - 1};
    memset(cost, 0, sizeof *cost);
    for (int i = 0; i < 4; i++) {
        if (m->rank >= 0) reps[i] = i ? -1 : m->rank % ranks;
        if (reps[i] < 0 || reps[i] >= ranks || (i && reps[i] == reps[i - 1]) || (i == 3 && reps[3] == reps[1]))
            continue;
        struct tally t;
        tally_start(&t, m, ranks, reps[i]);
        const char *name = one(&t, args);
        if (!cost->algorithm[0]) snprintf(cost->algorithm, sizeof cost->algorithm, "%s", name);
        if (t.messages > cost->messages) cost->messages = t.messages;
        if (t.bytes > cost->bytes) cost->bytes = t.bytes;
        if (t.peers > cost->peers) cost->peers = t.peers;
        if (t.memory > cost->memory) cost->memory = t.memory;
        if (t.time_us > cost->time_us) cost->time_us = t.time_us;
        if (m->rank >= 0 && m->peer_set && t.seen)
            for (size_t w = 0; w < ((size_t)ranks + 63) / 64; w++)
                m->peer_set[w] |= t.seen[w];
        tally_end(&t);
    }
}

struct allreduce_args {
    int nccl;
    int64_t count;
    int size;
};

static const char *one_allreduce(struct tally *t, const void *p)
{
    const struct allreduce_args *a = p;
    if (a->nccl) return nccl_allreduce(t, (uint64_t)a->count * (uint64_t)a->size);
    return cost_mpi_allreduce(t, a->count, a->size);
}

static void library_allreduce(const struct reprod_cost_machine *m, int nccl, int ranks,
                              int64_t count, int size, struct reprod_cost *cost)
{
    struct allreduce_args a = {nccl, count, size};
    over_ranks(m, ranks, one_allreduce, &a, cost);
}

int reprod_cost_native(const struct reprod_cost_machine *m, const struct reprod_route_call *call,
                       struct reprod_cost *cost)
{
    memset(cost, 0, sizeof *cost);
    if (call->ranks < 1) return -1;
    library_allreduce(m, call->nccl, call->ranks, (int64_t)call->count,
                      reprod_cost_type_bytes(call->type), cost);
    return 0;
}

struct exchange_args {
    int nccl, small;
    uint64_t message, chunk;
};

static const char *one_exchange(struct tally *t, const void *p)
{
    const struct exchange_args *a = p;
    int n = t->ranks;
    if (a->nccl) {
        if (a->small) { /* ncclAllGather of the whole message: a ring */
            cost_allgather_ring(t, a->message);
            note_memory(t, (uint64_t)n * a->message);
            return "ncclAllGather of contributions";
        }
        for (int r = 0; r < n; r++) {
            post_send(t, r, a->chunk);
            post_receive(t, r, a->chunk);
        }
        batch_end(t);
        cost_allgather_ring(t, a->chunk);
        /* a connection to each peer with its buffers (1 MiB each way, assumed) */
        note_memory(t, (uint64_t)n * a->chunk + (uint64_t)(n - 1) * (2u << 20));
        return "grouped Send/Recv to every peer + ncclAllGather";
    }
    if (a->small) {
        const char *name = cost_mpi_allgather(t, a->message);
        note_memory(t, (uint64_t)n * a->message);
        return name;
    }
    static __thread char name[160];
    const char *first = cost_mpi_alltoallv(t, a->chunk);
    const char *second = cost_mpi_allgatherv(t, a->chunk);
    note_memory(t, (uint64_t)n * a->chunk);
    snprintf(name, sizeof name, "%s + %s", first, second);
    return name;
}

/* `sum` += `times` x `part`; the peers and the memory are the same ones reused: the most. */
static void scale(struct reprod_cost *sum, const struct reprod_cost *part, uint64_t times)
{
    sum->messages += part->messages * times;
    sum->bytes += part->bytes * times;
    if (part->peers > sum->peers) sum->peers = part->peers;
    if (part->memory > sum->memory) sum->memory = part->memory;
    sum->time_us += part->time_us * (double)times;
}

/* The count the route hands the library's all-reduce (Open MPI's: padded out of its
 * degenerate algorithms, hooks/mpi/mpi_fixed.c). */
static uint64_t handed(int nccl, int n, uint64_t count, int size)
{
    return nccl ? count : reprod_cost_openmpi_allreduce_count(n, count, size);
}

/* The bytes of the codes of `elements` elements the MAX carries: packed, a hi an element and a
 * lo a block (reprod_engine_fixed_pack). */
static uint64_t codes_bytes(reprod_type type, uint64_t elements)
{
    return (uint64_t)reprod_engine_fixed_packed_bytes(type, (size_t)elements);
}

/* One segment of the two-pass route: the MAX of its codes (uint8, codes_bytes), then the SUM
 * of its words (k an element, of word_size bytes: int64, or NCCL's int32 narrow words) a piece
 * at a time. */
static void fixed_segment(const struct reprod_cost_machine *m, int nccl, int n, reprod_type type,
                          uint64_t elements, int k, int word_size, struct reprod_cost *cost)
{
    struct reprod_cost part;
    memset(cost, 0, sizeof *cost);
    library_allreduce(m, nccl, n, (int64_t)handed(nccl, n, codes_bytes(type, elements), 1), 1,
                      &part);
    scale(cost, &part, 1);
    char codes[64];
    snprintf(codes, sizeof codes, "%.60s", part.algorithm);
    uint64_t words = elements * (uint64_t)k;
    /* MPI: pieces of 2^22 - 2^16 words; NCCL: sub-pieces of half REPROD_SCRATCH_MB's 64 MiB
     * (4 Mi int64 words, 8 Mi narrow ones). */
    uint64_t most = nccl ? NCCL_SUB_PIECE_WORDS * 8 / (uint64_t)word_size : FIXED_PIECE_WORDS;
    uint64_t piece = words <= most ? words : most / (uint64_t)k * (uint64_t)k;
    uint64_t pieces = words / piece, rest = words % piece;
    library_allreduce(m, nccl, n, (int64_t)handed(nccl, n, piece, word_size), word_size, &part);
    scale(cost, &part, pieces);
    if (rest) {
        library_allreduce(m, nccl, n, (int64_t)handed(nccl, n, rest, word_size), word_size, &part);
        scale(cost, &part, 1);
    }
    snprintf(cost->algorithm, sizeof cost->algorithm, "codes: %.60s + words: %.60s%s", codes,
             part.algorithm, pieces + (rest != 0) > 1 ? " (pieces)" : "");
}

int reprod_cost_route(const struct reprod_cost_machine *m, const struct reprod_route_call *call,
                      enum reprod_route route, int words, struct reprod_cost *cost)
{
    memset(cost, 0, sizeof *cost);
    int n = call->ranks, size = reprod_cost_type_bytes(call->type);
    if (n < 1) return -1;
    uint64_t count = call->count, message = count * (uint64_t)size;
    if (route == REPROD_ROUTE_EXCHANGE) {
        struct exchange_args a = {call->nccl, 0, message, 0};
        a.small = call->nccl ? message <= (64u << 10) || count < (uint64_t)n : message <= 2048;
        a.chunk = (count + (uint64_t)n - 1) / (uint64_t)n * (uint64_t)size;
        if (n > 1) over_ranks(m, n, one_exchange, &a, cost);
        /* The engine: every element of every contribution of the rank's part. */
        double reduced = (double)count * (a.small ? n : 1);
        cost->time_us += reduced * m->engine_ns * 1e-3;
        return 0;
    }
    /* NCCL: pieces whose scratch, sized for the one-pass layout, fits REPROD_SCRATCH_MB's
     * default 64 MiB less 768 bytes of alignment (hooks/nccl/nccl_fixed.c); MPI: pass 1 a
     * segment at a time (hooks/mpi/mpi_fixed.c), a nonblocking call's one pass whole. */
    int full_words = reprod_engine_fixed_full_words(call->type, n);
    uint64_t nccl_piece = (((uint64_t)64 << 20) - 3 * 256) / (2 + 8 * (uint64_t)full_words);
    if (route == REPROD_ROUTE_FIXED_ONE_PASS) {
        uint64_t piece = call->nccl && count > nccl_piece ? nccl_piece : count;
        struct reprod_cost one;
        library_allreduce(m, call->nccl, n, (int64_t)(piece * (uint64_t)full_words), 8, &one);
        scale(cost, &one, count / piece);
        if (count % piece) {
            library_allreduce(m, call->nccl, n, (int64_t)(count % piece * (uint64_t)full_words), 8,
                              &one);
            scale(cost, &one, 1);
        }
        memcpy(cost->algorithm, one.algorithm, sizeof one.algorithm);
        cost->memory += piece * (uint64_t)full_words * 8;
        cost->time_us += (double)count * full_words * m->fixed_ns * 1e-3;
        return 0;
    }
    int k = words > 0 ? words : reprod_cost_typical_words(call->type, n), word_size = 8;
    if (words <= 0 && call->nccl) { /* int32 words where fewer bytes (hooks/nccl/nccl_fixed.c) */
        int32_t cells[REPROD_DEVICE_FIXED_CELLS] = {
            k, reprod_cost_typical_narrow_words(call->type, n)};
        if (reprod_device_fixed_layout(cells, 1, &k)) word_size = 4;
    }
    uint64_t cut = call->nccl            ? NCCL_PIECE_ELEMENTS
                   : m->segment_elements ? m->segment_elements
                                         : count;
    uint64_t segment = count < cut ? count : cut;
    uint64_t full = count / segment, rest = count % segment;
    struct reprod_cost one;
    fixed_segment(m, call->nccl, n, call->type, segment, k, word_size, &one);
    scale(cost, &one, full);
    if (rest) {
        fixed_segment(m, call->nccl, n, call->type, rest, k, word_size, &one);
        scale(cost, &one, 1);
    }
    if (full + (rest != 0) > 1) {
        char name[sizeof cost->algorithm];
        snprintf(name, sizeof name, "%llu segments of: %.120s", (unsigned long long)(full + (rest != 0)),
                 one.algorithm);
        memcpy(cost->algorithm, name, sizeof name);
    } else {
        memcpy(cost->algorithm, one.algorithm, sizeof one.algorithm);
    }
    if (call->nccl) { /* a piece's codes, and its words at the most K can be or half the bound */
        uint64_t held = 8 * segment * (uint64_t)full_words;
        cost->memory +=
            2 * segment + (held < 8 * NCCL_SUB_PIECE_WORDS ? held : 8 * NCCL_SUB_PIECE_WORDS);
    } else { /* a segment's codes, and packed as padded for Open MPI; a piece's word offsets and
                words (two an element at least), padded */
        uint64_t piece = segment < FIXED_PIECE_WORDS ? segment : FIXED_PIECE_WORDS;
        uint64_t held = segment * (uint64_t)(k > 2 ? k : 2);
        if (held > FIXED_PIECE_WORDS) held = FIXED_PIECE_WORDS;
        cost->memory += 2 * segment + handed(0, n, codes_bytes(call->type, segment), 1) +
                        8 * (piece + 1) + 8 * handed(0, n, held, 8);
    }
    cost->time_us += (double)count * k * m->fixed_ns * 1e-3;
    return 0;
}
