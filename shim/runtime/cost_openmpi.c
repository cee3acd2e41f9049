/* cost_openmpi.c: Open MPI 4.1.4's collectives in the cost model, each written as the messages
 * one rank sends and receives, step by step, as ompi/mca/coll/base/coll_base_{allreduce,
 * allgather,allgatherv,alltoallv,bcast}.c send them, chosen as
 * ompi/mca/coll/tuned/coll_tuned_decision_fixed.c chooses (the algorithms' numbers below are
 * that file's). tests/mpi/cost_model.sh checks them against Open MPI's pml monitoring. */
#include "runtime/cost_tally.h"

#include <stdio.h>

/* ---- Open MPI 4.1.4: the algorithms ----------------------------------------------------- */

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

/* The algorithm Open MPI runs for `count` elements of `size` bytes: the decision's, but a
 * segmented ring (with the fixed decision's segment size 0, the plain ring) or a ring of fewer
 * elements than ranks is recursive doubling. */
static int allreduce_algorithm(int n, uint64_t count, uint64_t size)
{
    int alg = allreduce_decision(n, count * size);
    return (alg == 4 || alg == 5) && count < (uint64_t)n ? 3 : alg;
}

/* Where the decision degenerates (cost.h): a ring (algorithms 4 and 5) of at least as many
 * elements as ranks, or Rabenseifner (6) below the ranks' power of two, at 4 ranks or more. */
static int allreduce_degenerates(int n, int alg, uint64_t count)
{
    if (n < 4) return 0;
    if (alg == 4 || alg == 5) return count >= (uint64_t)n;
    return alg == 6 && count < ((uint64_t)1 << floor_log2(n));
}

uint64_t reprod_cost_openmpi_allreduce_count(int ranks, uint64_t count, int size)
{
    if (ranks < 4 || count == 0 || size <= 0 || ranks > (1 << 29)) return count;
    uint64_t pof2 = (uint64_t)1 << floor_log2(ranks), s = (uint64_t)size;
    if (count >= pof2 && count > 16384 / s) return count; /* past every ring, not linear */
    for (;;) {
        int alg = allreduce_decision(ranks, count * s);
        /* The decision's next region starts at a power of two of bytes. */
        uint64_t total = 1;
        while (total <= count * s)
            total <<= 1;
        uint64_t next = (total + s - 1) / s;
        if (!allreduce_degenerates(ranks, alg, count)) {
            /* Out of the reduce and broadcast (two trees' latency) into recursive doubling
             * (one), where a region of it starts within 4 times the bytes: the codes of a
             * binary32 call of 4 KiB at 1,024 ranks, 1,152 bytes packed, go as 2,048 (at
             * 2,048 ranks, past a ring, as 4,096). */
            for (uint64_t up = next; alg == 2 && up <= 4 * count; up *= 2)
                if (allreduce_algorithm(ranks, up, s) == 3) return up;
            return count;
        }
        if (alg == 6) return pof2; /* Rabenseifner is every row's last region: it stays */
        count = next;              /* out of the ring */
    }
}

/* Open MPI's allreduce of `count` elements of `size` bytes, as rank t->rank sends it. */
const char *cost_mpi_allreduce(struct tally *t, int64_t count, int size)
{
    int n = t->ranks;
    if (n < 2 || count <= 0) return "none";
    int alg = allreduce_algorithm(n, (uint64_t)count, (uint64_t)size);
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

void cost_allgather_ring(struct tally *t, uint64_t block)
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
        cost_allgather_ring(t, block);
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

const char *cost_mpi_allgather(struct tally *t, uint64_t block)
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
    else if (n < 2048)
        alg = block < 4 ? 3 : block < 8 ? 2 : block < 16 ? 3 : block < 32 ? 2 : block < 256 ? 3
            : block < 512 ? 2 : block < 4096 ? 3 : 5;
    else if (n < 4096)
        alg = block < 32 ? 2 : block < 128 ? 3 : block < 512 ? 2 : block < 4096 ? 3 : 5;
    else
        alg = block < 2 ? 3 : block < 8 ? 2 : block < 16 ? 3 : block < 512 ? 2 : block < 4096 ? 3
            : 5;
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
    case 4: cost_allgather_ring(t, block); return "allgather ring";
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
const char *cost_mpi_allgatherv(struct tally *t, uint64_t block)
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
    case 3: cost_allgather_ring(t, block); return "allgatherv ring";
    case 5: step(t, t->rank ^ 1, block, t->rank ^ 1, block); return "allgatherv two-proc";
    default: allgather_neighbor(t, block); return "allgatherv neighbor";
    }
}

/* The exchange's all-to-all-v: chunk r of each contribution to rank r, our own kept. */
const char *cost_mpi_alltoallv(struct tally *t, uint64_t chunk)
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

