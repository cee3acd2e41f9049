/* cost_tally.h: one rank's tally in the cost model (cost.c): the messages it sends, step by
 * step, with their modelled time; and the Open MPI 4.1.4 algorithms that fill it
 * (cost_openmpi.c). Private to the model. */
#ifndef REPROD_COST_TALLY_H
#define REPROD_COST_TALLY_H

#include "runtime/cost.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- One rank's tally --------------------------------------------------------------------- */

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

static inline void tally_start(struct tally *t, const struct reprod_cost_machine *m, int ranks, int rank)
{
    memset(t, 0, sizeof *t);
    t->m = m, t->ranks = ranks, t->rank = rank;
    size_t words = ((size_t)ranks + 63) / 64;
    t->seen = words <= STACK_PEER_WORDS ? t->stack_seen : calloc(words, sizeof(uint64_t));
}

static inline void tally_end(struct tally *t)
{
    if (t->seen != t->stack_seen) free(t->seen);
}

static inline int same_node(const struct tally *t, int peer)
{
    int g = t->m->ranks_per_node > 0 ? t->m->ranks_per_node : 1;
    return t->rank / g == peer / g;
}

static inline double transfer_us(const struct tally *t, int peer, uint64_t bytes)
{
    double gbps = same_node(t, peer) ? t->m->intra_gbps : t->m->inter_gbps;
    return (double)bytes / (gbps * 1e3);
}

static inline void note_latency(struct tally *t, int peer)
{
    double latency = same_node(t, peer) ? t->m->intra_latency_us : t->m->inter_latency_us;
    if (latency > t->batch_latency) t->batch_latency = latency;
    t->batch_messages++;
}

/* Post a send of `bytes` to `peer` in the current batch (a self-send is a local copy). */
static inline void post_send(struct tally *t, int peer, uint64_t bytes)
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

static inline void post_receive(struct tally *t, int peer, uint64_t bytes)
{
    if (peer < 0 || peer == t->rank) return;
    note_latency(t, peer);
    t->batch_recv_us += transfer_us(t, peer, bytes);
}

/* The batch completes: one latency, an overhead per further message, the transfers in and
 * out in parallel (full duplex), each direction's serialised. */
static inline void batch_end(struct tally *t)
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
static inline void step(struct tally *t, int to, uint64_t send_bytes, int from, uint64_t recv_bytes)
{
    post_send(t, to, send_bytes);
    post_receive(t, from, recv_bytes);
    batch_end(t);
}

/* The library's local reduction of `bytes` of one operand. */
static inline void reduce_local(struct tally *t, uint64_t bytes)
{
    t->time_us += (double)bytes / (t->m->reduce_gbps * 1e3);
}

static inline void note_memory(struct tally *t, uint64_t bytes)
{
    if (bytes > t->memory) t->memory = bytes;
}

static inline int floor_log2(int n)
{
    int k = 0;
    while ((2 << k) <= n)
        k++;
    return k;
}

/* ---- Open MPI 4.1.4 (cost_openmpi.c): what rank t->rank sends, and the algorithm's name -- */

/* MPI_Allreduce of `count` elements of `size` bytes (a commutative op), as the tuned fixed
 * decision picks it. */
const char *cost_mpi_allreduce(struct tally *t, int64_t count, int size);
/* MPI_Allgather of blocks of `block` bytes. */
const char *cost_mpi_allgather(struct tally *t, uint64_t block);
/* MPI_Allgatherv in place of chunks of `block` bytes (the average chunk). */
const char *cost_mpi_allgatherv(struct tally *t, uint64_t block);
/* MPI_Alltoallv of chunks of `chunk` bytes, this rank's own kept. */
const char *cost_mpi_alltoallv(struct tally *t, uint64_t chunk);
/* The ring all-gather's steps (NCCL's all-gather too). */
void cost_allgather_ring(struct tally *t, uint64_t block);

#endif /* REPROD_COST_TALLY_H */
