/* cost.c: the alpha-beta model of cost.h. Each algorithm is written as the messages one rank
 * sends and receives, step by step, as the library's source sends them (Open MPI 4.1.4,
 * ompi/mca/coll/base/coll_base_{allreduce,allgather,allgatherv,alltoallv}.c, chosen by
 * ompi/mca/coll/tuned/coll_tuned_decision_fixed.c); a few ranks stand for all of them (rank 0,
 * 1, N/2 and N-1: the roots, the ranks a non-power-of-two folds away, and ordinary ones). */
#include "runtime/cost.h"

#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fixed route's cut of a call (hooks/mpi/mpi_fixed.c's SEGMENT_ELEMENTS and PIECE_WORDS):
 * a pass 1 of codes a segment at a time, then its words at most a piece a call. */
#define FIXED_SEGMENT_ELEMENTS ((uint64_t)1 << 18)
#define FIXED_PIECE_WORDS      ((uint64_t)1 << 22)

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

int reprod_cost_typical_words(reprod_type type, int ranks)
{
    /* A finite element within one bucket: its bits span the bucket's binades and the
     * significand (engine_fixed_element): 24 + 0 (binary32), 11 and 8 (16-bit types), 60
     * (binary64: 8 binades a bucket); a few binades more for contributions that differ. */
    int word_bits = 63, c = 0;
    while ((1 << c) < ranks)
        c++;
    word_bits -= c;
    int bits = type == REPROD_FLOAT64 ? 60 + 8 : type == REPROD_FLOAT32 ? 24 + 8 : 11 + 8;
    return (bits + word_bits - 1) / word_bits;
}

/* ---- One rank's tally -------------------------------------------------------------------- */

#define STACK_PEER_WORDS 64 /* ranks up to 4,096 counted in a bitmap on the stack */

struct tally {
    const struct reprod_cost_machine *m;
    int ranks, rank;
    uint64_t messages, bytes, peers, memory;
    double time_us;
    /* The batch being posted: messages that go out together. */
    int batch_messages;
    double batch_latency, batch_send_us, batch_recv_us;
    uint64_t *seen;
    uint64_t stack_seen[STACK_PEER_WORDS];
};

static void tally_start(struct tally *t, const struct reprod_cost_machine *m, int ranks, int rank)
{
    memset(t, 0, sizeof *t);
    t->m = m, t->ranks = ranks, t->rank = rank;
    size_t words = ((size_t)ranks + 63) / 64;
    t->seen = words <= STACK_PEER_WORDS ? t->stack_seen : calloc(words, sizeof(uint64_t));
}

static void tally_end(struct tally *t)
{
    if (t->seen != t->stack_seen) free(t->seen);
}

static int same_node(const struct tally *t, int peer)
{
    int g = t->m->ranks_per_node > 0 ? t->m->ranks_per_node : 1;
    return t->rank / g == peer / g;
}

static double transfer_us(const struct tally *t, int peer, uint64_t bytes)
{
    double gbps = same_node(t, peer) ? t->m->intra_gbps : t->m->inter_gbps;
    return (double)bytes / (gbps * 1e3);
}

static void note_latency(struct tally *t, int peer)
{
    double latency = same_node(t, peer) ? t->m->intra_latency_us : t->m->inter_latency_us;
    if (latency > t->batch_latency) t->batch_latency = latency;
    t->batch_messages++;
}

/* Post a send of `bytes` to `peer` in the current batch (a self-send is a local copy). */
static void post_send(struct tally *t, int peer, uint64_t bytes)
{
    if (peer < 0 || peer == t->rank) return;
    t->messages++;
    t->bytes += bytes;
    if (t->seen && !(t->seen[peer / 64] >> (peer % 64) & 1)) {
        t->seen[peer / 64] |= 1ull << (peer % 64);
        t->peers++;
    }
    note_latency(t, peer);
    t->batch_send_us += transfer_us(t, peer, bytes);
}

static void post_receive(struct tally *t, int peer, uint64_t bytes)
{
    if (peer < 0 || peer == t->rank) return;
    note_latency(t, peer);
    t->batch_recv_us += transfer_us(t, peer, bytes);
}

/* The batch completes: one latency, an overhead per further message, the transfers in and
 * out in parallel (full duplex), each direction's serialised. */
static void batch_end(struct tally *t)
{
    if (t->batch_messages) {
        int extra = t->batch_messages - 1;
        double transfer = t->batch_send_us > t->batch_recv_us ? t->batch_send_us : t->batch_recv_us;
        t->time_us += t->batch_latency + extra * t->m->overhead_us + transfer;
    }
    t->batch_messages = 0;
    t->batch_latency = t->batch_send_us = t->batch_recv_us = 0;
}

/* One sendrecv step. */
static void step(struct tally *t, int to, uint64_t send_bytes, int from, uint64_t recv_bytes)
{
    post_send(t, to, send_bytes);
    post_receive(t, from, recv_bytes);
    batch_end(t);
}

/* The library's local reduction of `bytes` of one operand. */
static void reduce_local(struct tally *t, uint64_t bytes)
{
    t->time_us += (double)bytes / (t->m->reduce_gbps * 1e3);
}

static void note_memory(struct tally *t, uint64_t bytes)
{
    if (bytes > t->memory) t->memory = bytes;
}

/* ---- Open MPI 4.1.4: the algorithms ----------------------------------------------------- */

static int floor_log2(int n)
{
    int k = 0;
    while ((2 << k) <= n)
        k++;
    return k;
}

/* ompi_coll_base_allreduce_intra_recursivedoubling */
static void allreduce_recursive_doubling(struct tally *t, int64_t count, int size)
{
    int n = t->ranks, rank = t->rank;
    uint64_t m = (uint64_t)count * (uint64_t)size;
    int adjsize = 1 << floor_log2(n), extra = n - adjsize, newrank;
    note_memory(t, m);
    if (rank < 2 * extra) {
        if (rank % 2 == 0) {
            step(t, rank + 1, m, -1, 0);
            newrank = -1;
        } else {
            step(t, -1, 0, rank - 1, m);
            reduce_local(t, m);
            newrank = rank >> 1;
        }
    } else {
        newrank = rank - extra;
    }
    if (newrank != -1) {
        for (int distance = 1; distance < adjsize; distance <<= 1) {
            int newremote = newrank ^ distance;
            int remote = newremote < extra ? newremote * 2 + 1 : newremote + extra;
            step(t, remote, m, remote, m);
            reduce_local(t, m);
        }
    } else {
        /* Waits for the others' doubling: as long as its partner's (rank + 1). */
        for (int distance = 1; distance < adjsize; distance <<= 1) {
            t->time_us += (same_node(t, rank + 1) && distance < t->m->ranks_per_node
                               ? t->m->intra_latency_us + (double)m / (t->m->intra_gbps * 1e3)
                               : t->m->inter_latency_us + (double)m / (t->m->inter_gbps * 1e3)) +
                          (double)m / (t->m->reduce_gbps * 1e3);
        }
    }
    if (rank < 2 * extra) {
        if (rank % 2 == 0)
            step(t, -1, 0, rank + 1, m);
        else
            step(t, rank - 1, m, -1, 0);
    }
}

/* The early/late blocks of COLL_BASE_COMPUTE_BLOCKCOUNT. */
static int64_t block_count(int64_t count, int blocks, int index)
{
    return count / blocks + (index < count % blocks);
}

/* ompi_coll_base_allreduce_intra_ring (count >= ranks) */
static void allreduce_ring(struct tally *t, int64_t count, int size)
{
    int n = t->ranks, rank = t->rank;
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    note_memory(t, 2 * (uint64_t)block_count(count, n, 0) * (uint64_t)size);
    /* Reduce-scatter: blocks rank, rank - 1, ..., each received block reduced. */
    for (int k = 0; k < n - 1; k++) {
        int send_block = (rank - k + n) % n, recv_block = (rank - k - 1 + n) % n;
        uint64_t in = (uint64_t)block_count(count, n, recv_block) * (uint64_t)size;
        step(t, to, (uint64_t)block_count(count, n, send_block) * (uint64_t)size, from, in);
        reduce_local(t, in);
    }
    /* All-gather: blocks rank + 1, rank, ... */
    for (int k = 0; k < n - 1; k++) {
        int send_block = (rank + 1 - k + n) % n, recv_block = (rank - k + n) % n;
        step(t, to, (uint64_t)block_count(count, n, send_block) * (uint64_t)size, from,
             (uint64_t)block_count(count, n, recv_block) * (uint64_t)size);
    }
}

/* ompi_coll_base_reduce_intra_basic_linear + ompi_coll_base_bcast_intra_basic_linear, root 0 */
static void allreduce_basic_linear(struct tally *t, int64_t count, int size)
{
    uint64_t m = (uint64_t)count * (uint64_t)size;
    if (t->rank == 0) {
        note_memory(t, m);
        for (int r = 1; r < t->ranks; r++) { /* received one by one, in rank order */
            step(t, -1, 0, r, m);
            reduce_local(t, m);
        }
        for (int r = 1; r < t->ranks; r++)
            post_send(t, r, m);
        batch_end(t);
    } else {
        step(t, 0, m, -1, 0);
        /* ... then waits for the root's gather and its broadcast. */
        t->time_us += (t->ranks - 1) * (t->m->inter_latency_us + (double)m / (t->m->inter_gbps * 1e3));
        step(t, -1, 0, 0, m);
    }
}

/* A k-nomial tree's broadcast from rank 0 (ompi_coll_base_bcast_intra_knomial; radix 2 is the
 * binomial tree): from the parent, then to the children, the farthest first. */
static void bcast_knomial(struct tally *t, uint64_t bytes, int radix)
{
    int n = t->ranks, v = t->rank;
    uint64_t level = 1; /* the place of v's lowest nonzero digit: v's children lie below it */
    while (v && level < (uint64_t)n && v % (int64_t)(level * radix) == 0)
        level *= radix;
    if (v) step(t, -1, 0, (int)(v - v % (int64_t)(level * radix)), bytes);
    if (!v) level = (uint64_t)n;
    uint64_t top = 1;
    while (top * radix < level)
        top *= radix;
    for (uint64_t mask = top; mask >= 1 && mask < level; mask /= radix) {
        for (int r = 1; r < radix; r++)
            if (v + (uint64_t)r * mask < (uint64_t)n) post_send(t, (int)(v + r * mask), bytes);
        batch_end(t);
        if (mask == 1) break;
    }
}

/* Open MPI's nonoverlapping allreduce is its tuned reduce and bcast to and from rank 0: priced
 * as a binomial tree each way (an approximation: those have decisions of their own). */
static void allreduce_reduce_bcast(struct tally *t, int64_t count, int size)
{
    uint64_t m = (uint64_t)count * (uint64_t)size;
    int n = t->ranks, rank = t->rank;
    int lowbit = rank ? rank & -rank : 1 << (floor_log2(n) + 1);
    note_memory(t, m);
    for (int bit = 1; bit < lowbit && rank + bit < n; bit <<= 1) { /* children's sums */
        step(t, -1, 0, rank + bit, m);
        reduce_local(t, m);
    }
    if (rank) step(t, rank - lowbit, m, -1, 0);
    bcast_knomial(t, m, 2);
}

/* ompi_coll_base_allreduce_intra_redscat_allgather (Rabenseifner) */
static void allreduce_rabenseifner(struct tally *t, int64_t count, int size)
{
    int n = t->ranks, rank = t->rank;
    int nsteps = floor_log2(n), pof2 = 1 << nsteps, rem = n - pof2, vrank;
    if (count < pof2) {
        allreduce_basic_linear(t, count, size);
        return;
    }
    uint64_t s = (uint64_t)size;
    note_memory(t, (uint64_t)count * s);
    int64_t lhalf = count / 2, rhalf = count - lhalf;
    if (rank < 2 * rem) {
        if (rank % 2) {
            step(t, rank - 1, (uint64_t)lhalf * s, rank - 1, (uint64_t)rhalf * s);
            reduce_local(t, (uint64_t)rhalf * s);
            step(t, rank - 1, (uint64_t)rhalf * s, -1, 0);
            vrank = -1;
        } else {
            step(t, rank + 1, (uint64_t)rhalf * s, rank + 1, (uint64_t)lhalf * s);
            reduce_local(t, (uint64_t)lhalf * s);
            step(t, -1, 0, rank + 1, (uint64_t)rhalf * s);
            vrank = rank / 2;
        }
    } else {
        vrank = rank - rem;
    }
    if (vrank != -1) {
        int64_t rcount[32], scount[32], wsize = count;
        int dests[32], k = 0;
        for (int mask = 1; mask < pof2; mask <<= 1, k++) {
            int vdest = vrank ^ mask;
            int dest = vdest < rem ? vdest * 2 : vdest + rem;
            if (rank < dest) {
                rcount[k] = wsize / 2;
                scount[k] = wsize - rcount[k];
            } else {
                scount[k] = wsize / 2;
                rcount[k] = wsize - scount[k];
            }
            dests[k] = dest;
            step(t, dest, (uint64_t)scount[k] * s, dest, (uint64_t)rcount[k] * s);
            reduce_local(t, (uint64_t)rcount[k] * s);
            wsize = rcount[k];
        }
        for (k = nsteps - 1; k >= 0; k--)
            step(t, dests[k], (uint64_t)rcount[k] * s, dests[k], (uint64_t)scount[k] * s);
    } else {
        /* Waits for its partner's reduce-scatter and all-gather: about 2 m of transfers. */
        for (int k = 0; k < 2 * nsteps; k++)
            t->time_us += t->m->inter_latency_us;
        t->time_us += 2.0 * (double)count * (double)s / (t->m->inter_gbps * 1e3);
    }
    if (rank < 2 * rem) {
        if (rank % 2)
            step(t, -1, 0, rank - 1, (uint64_t)count * s);
        else
            step(t, rank + 1, (uint64_t)count * s, -1, 0);
    }
}

/* The algorithm coll_tuned_decision_fixed.c picks for a commutative allreduce. */
static int allreduce_decision(int n, uint64_t total)
{
    if (n < 4) {
        if (total < 8) return 4;
        if (total < 4096) return 3;
        if (total < 8192) return 4;
        if (total < 16384) return 3;
        if (total < 65536) return 4;
        if (total < 262144) return 5;
        return 6;
    }
    if (n < 8) return total < 16 ? 4 : total < 8192 ? 3 : 6;
    if (n < 16) return total < 8192 ? 3 : 6;
    if (n < 32) return total < 64 ? 5 : total < 4096 ? 3 : 6;
    if (n < 64) return total < 128 ? 5 : 6;
    if (n < 128) return total < 262144 ? 3 : 6;
    if (n < 256) return total < 131072 ? 2 : total < 262144 ? 3 : 6;
    if (n < 512) return total < 4096 ? 2 : 6;
    if (n < 2048) return total < 2048 ? 2 : total < 16384 ? 3 : 6;
    if (n < 4096) return total < 2048 ? 2 : total < 4096 ? 5 : total < 16384 ? 3 : 6;
    return total < 2048 ? 2 : total < 16384 ? 5 : total < 32768 ? 3 : 6;
}

/* Open MPI's allreduce of `count` elements of `size` bytes, as rank t->rank sends it. */
static const char *mpi_allreduce(struct tally *t, int64_t count, int size)
{
    int n = t->ranks;
    if (n < 2 || count <= 0) return "none";
    int alg = allreduce_decision(n, (uint64_t)count * (uint64_t)size);
    /* Segmented ring with the fixed decision's segment size 0 is the plain ring; the ring with
     * fewer elements than ranks is recursive doubling. */
    if ((alg == 4 || alg == 5) && count < n) alg = 3;
    switch (alg) {
    case 2: allreduce_reduce_bcast(t, count, size); return "reduce+bcast (binomial, approx.)";
    case 3: allreduce_recursive_doubling(t, count, size); return "recursive doubling";
    case 4: case 5: allreduce_ring(t, count, size); return "ring";
    default:
        if (count < (1 << floor_log2(n))) {
            allreduce_basic_linear(t, count, size);
            return "linear reduce+bcast";
        }
        allreduce_rabenseifner(t, count, size);
        return "Rabenseifner";
    }
}

/* ---- Open MPI 4.1.4: all-gather, all-gather-v, all-to-all-v (the exchange route) -------- */

/* Bruck's all-gather of blocks of `block` bytes (the -v form: the average block). */
static void allgather_bruck(struct tally *t, uint64_t block)
{
    int n = t->ranks;
    for (int distance = 1; distance < n; distance <<= 1) {
        uint64_t blocks = distance <= n / 2 ? (uint64_t)distance : (uint64_t)(n - distance);
        step(t, (t->rank - distance + n) % n, blocks * block, (t->rank + distance) % n,
             blocks * block);
    }
}

static void allgather_ring(struct tally *t, uint64_t block)
{
    int n = t->ranks;
    for (int k = 0; k < n - 1; k++)
        step(t, (t->rank + 1) % n, block, (t->rank - 1 + n) % n, block);
}

/* Neighbour exchange (even ranks only; odd counts take the ring). */
static void allgather_neighbor(struct tally *t, uint64_t block)
{
    int n = t->ranks, rank = t->rank;
    if (n % 2) {
        allgather_ring(t, block);
        return;
    }
    int neighbor[2];
    if (rank % 2 == 0)
        neighbor[0] = (rank + 1) % n, neighbor[1] = (rank - 1 + n) % n;
    else
        neighbor[0] = (rank - 1 + n) % n, neighbor[1] = (rank + 1) % n;
    step(t, neighbor[0], block, neighbor[0], block);
    for (int i = 1; i < n / 2; i++)
        step(t, neighbor[i % 2], 2 * block, neighbor[i % 2], 2 * block);
}

static const char *mpi_allgather(struct tally *t, uint64_t block)
{
    int n = t->ranks;
    note_memory(t, 0);
    if (n < 2) return "none";
    int alg;
    if (n == 2)
        alg = 6;
    else if (n < 32)
        alg = 3;
    else if (n < 64)
        alg = block < 1024 ? 3 : block < 65536 ? 5 : 4;
    else if (n < 128)
        alg = block < 512 ? 3 : block < 65536 ? 5 : 4;
    else if (n < 256)
        alg = block < 512 ? 3 : block < 131072 ? 5 : block < 524288 ? 4 : block < 1048576 ? 5 : 4;
    else if (n < 512)
        alg = block < 32 ? 3 : block < 128 ? 2 : block < 1024 ? 3 : block < 131072 ? 5
            : block < 524288 ? 4 : block < 1048576 ? 5 : 4;
    else if (n < 1024)
        alg = block < 64 ? 3 : block < 256 ? 2 : block < 2048 ? 3 : 5;
    else
        alg = block < 512 ? 2 : block < 4096 ? 3 : 5;
    if (alg == 3 && (n & (n - 1))) alg = 2; /* recursive doubling needs a power of two */
    switch (alg) {
    case 6: step(t, t->rank ^ 1, block, t->rank ^ 1, block); return "allgather two-proc";
    case 3:
        for (int distance = 1; distance < n; distance <<= 1)
            step(t, t->rank ^ distance, (uint64_t)distance * block, t->rank ^ distance,
                 (uint64_t)distance * block);
        return "allgather recursive doubling";
    case 2:
        note_memory(t, (uint64_t)(n - t->rank) * block); /* the final shift */
        allgather_bruck(t, block);
        return "allgather Bruck";
    case 4: allgather_ring(t, block); return "allgather ring";
    default: allgather_neighbor(t, block); return "allgather neighbor";
    }
}

/* Open MPI's broadcast from rank 0 (the tuned decision below 128 ranks, where the all-gather-v
 * takes its gather and broadcast; the segmented trees and chains priced as a binomial tree). */
static const char *mpi_bcast(struct tally *t, uint64_t bytes)
{
    int n = t->ranks, alg;
    if (n < 4)
        alg = bytes < 32 ? 3 : bytes < 256 ? 5 : bytes < 512 ? 3 : bytes < 1024 ? 7
            : bytes < 32768 ? 1 : bytes < 131072 ? 5 : bytes < 262144 ? 2 : bytes < 524288 ? 1
            : bytes < 1048576 ? 6 : 5;
    else if (n < 8)
        alg = bytes < 64 ? 5 : bytes < 128 ? 6 : bytes < 2048 ? 5 : bytes < 8192 ? 6
            : bytes < 1048576 ? 1 : 2;
    else if (n < 16)
        alg = bytes < 8 ? 7 : bytes < 64 ? 5 : bytes < 4096 ? 7 : bytes < 16384 ? 5
            : bytes < 32768 ? 6 : 1;
    else if (n < 32)
        alg = bytes < 4096 ? 7 : bytes < 1048576 ? 6 : 8;
    else if (n < 64)
        alg = bytes < 2048 ? 6 : 7;
    else
        alg = 7;
    if (alg == 1) {
        for (int r = 1; t->rank == 0 && r < n; r++)
            post_send(t, r, bytes);
        if (t->rank) post_receive(t, 0, bytes);
        batch_end(t);
        return "allgatherv gatherv+bcast linear";
    }
    bcast_knomial(t, bytes, alg == 7 ? 4 : 2);
    return alg == 7 ? "allgatherv gatherv+bcast 4-nomial"
         : alg == 6 ? "allgatherv gatherv+bcast binomial"
                    : "allgatherv gatherv+bcast (tree, approx. binomial)";
}

/* The in-place all-gather-v of the reduced chunks (`block`: the average chunk's bytes). */
static const char *mpi_allgatherv(struct tally *t, uint64_t block)
{
    int n = t->ranks, alg;
    if (n < 2) return "none";
    if (n == 2)
        alg = block < 2048 ? 3 : block < 4096 ? 5 : block < 8192 ? 3 : 5;
    else if (n < 8)
        alg = block < 256 ? 1 : block < 4096 ? 4 : block < 8192 ? 3 : block < 16384 ? 4
            : block < 262144 ? 2 : 4;
    else if (n < 16)
        alg = block < 1024 ? 1 : 2;
    else if (n < 32)
        alg = block < 128 ? 1 : block < 262144 ? 2 : 3;
    else if (n < 64)
        alg = block < 256 ? 1 : block < 8192 ? 2 : 3;
    else if (n < 128)
        alg = block < 256 ? 1 : block < 4096 ? 2 : 3;
    else if (n < 256)
        alg = block < 1024 ? 2 : block < 65536 ? 4 : 3;
    else if (n < 512)
        alg = block < 1024 ? 2 : 3;
    else if (n < 1024)
        alg = block < 512 ? 2 : block < 1024 ? 1 : block < 4096 ? 2 : block < 1048576 ? 4 : 3;
    else
        alg = block < 4096 ? 2 : 4;
    switch (alg) {
    case 1: /* gather-v to rank 0, then its broadcast of the whole */
        if (t->rank) step(t, 0, block, -1, 0);
        for (int r = 1; t->rank == 0 && r < n; r++)
            post_receive(t, r, block);
        batch_end(t);
        return mpi_bcast(t, block * (uint64_t)n);
    case 2: allgather_bruck(t, block); return "allgatherv Bruck";
    case 3: allgather_ring(t, block); return "allgatherv ring";
    case 5: step(t, t->rank ^ 1, block, t->rank ^ 1, block); return "allgatherv two-proc";
    default: allgather_neighbor(t, block); return "allgatherv neighbor";
    }
}

/* The exchange's all-to-all-v: chunk r of each contribution to rank r, our own kept. */
static const char *mpi_alltoallv(struct tally *t, uint64_t chunk)
{
    int n = t->ranks;
    int pairwise = n < 4 || (n >= 64 && n < 128) || (n >= 256 && n < 1024);
    if (pairwise) {
        for (int s = 1; s < n; s++)
            step(t, (t->rank + s) % n, chunk, (t->rank - s + n) % n, chunk);
        return "alltoallv pairwise";
    }
    for (int r = 0; r < n; r++) {
        post_send(t, r, chunk);
        post_receive(t, r, chunk);
    }
    batch_end(t);
    return "alltoallv linear";
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
    return mpi_allreduce(t, a->count, a->size);
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
            allgather_ring(t, a->message);
            note_memory(t, (uint64_t)n * a->message);
            return "ncclAllGather of contributions";
        }
        for (int r = 0; r < n; r++) {
            post_send(t, r, a->chunk);
            post_receive(t, r, a->chunk);
        }
        batch_end(t);
        allgather_ring(t, a->chunk);
        /* a connection to each peer with its buffers (1 MiB each way, assumed) */
        note_memory(t, (uint64_t)n * a->chunk + (uint64_t)(n - 1) * (2u << 20));
        return "grouped Send/Recv to every peer + ncclAllGather";
    }
    if (a->small) {
        const char *name = mpi_allgather(t, a->message);
        note_memory(t, (uint64_t)n * a->message);
        return name;
    }
    static __thread char name[160];
    const char *first = mpi_alltoallv(t, a->chunk);
    const char *second = mpi_allgatherv(t, a->chunk);
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

/* One segment of the two-pass route: the MAX of its codes (uint8, two an element), then the SUM
 * of its words (int64, k an element) a piece at a time. */
static void fixed_segment(const struct reprod_cost_machine *m, int nccl, int n, uint64_t elements,
                          int k, struct reprod_cost *cost)
{
    struct reprod_cost part;
    memset(cost, 0, sizeof *cost);
    library_allreduce(m, nccl, n, (int64_t)(2 * elements), 1, &part);
    scale(cost, &part, 1);
    char codes[64];
    snprintf(codes, sizeof codes, "%.60s", part.algorithm);
    uint64_t words = elements * (uint64_t)k;
    uint64_t piece = nccl || words <= FIXED_PIECE_WORDS ? words : FIXED_PIECE_WORDS / (uint64_t)k * (uint64_t)k;
    uint64_t pieces = words / piece, rest = words % piece;
    library_allreduce(m, nccl, n, (int64_t)piece, 8, &part);
    scale(cost, &part, pieces);
    if (rest) {
        library_allreduce(m, nccl, n, (int64_t)rest, 8, &part);
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
     * default 64 MiB (hooks/nccl/nccl_fixed.c); MPI: pass 1 a segment at a time
     * (hooks/mpi/mpi_fixed.c), a nonblocking call's one pass whole. */
    int full_words = reprod_engine_fixed_full_words(call->type, n);
    uint64_t nccl_piece = ((uint64_t)64 << 20) / (2 + 8 * (uint64_t)full_words);
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
    int k = words > 0 ? words : reprod_cost_typical_words(call->type, n);
    uint64_t cut = call->nccl ? nccl_piece : m->segment_elements ? m->segment_elements : count;
    uint64_t segment = count < cut ? count : cut;
    uint64_t full = count / segment, rest = count % segment;
    struct reprod_cost one;
    fixed_segment(m, call->nccl, n, segment, k, &one);
    scale(cost, &one, full);
    if (rest) {
        fixed_segment(m, call->nccl, n, rest, k, &one);
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
    /* The scratch of one segment: its codes, word offsets and at least two words an element. */
    cost->memory += 2 * segment + 8 * (segment + 1) + 8 * segment * (uint64_t)(k > 2 ? k : 2);
    cost->time_us += (double)count * k * m->fixed_ns * 1e-3;
    return 0;
}
