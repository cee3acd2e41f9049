/* cost.h: what one reduction costs a rank, natively and under each of the shim's routes, in an
 * alpha-beta model (docs/performance.md, "The cost model").
 *
 * The native cost is the library's own algorithm for exactly these arguments: for MPI the one
 * Open MPI 4.1's coll/tuned fixed decision picks (recursive doubling, Rabenseifner, ring, ...:
 * mirrored message for message, so that a count with pml monitoring can check it), for NCCL a
 * ring or a tree, the faster. A route's cost is that of the library calls it makes, each priced
 * the same way, plus the shim's own arithmetic. Pure functions of their arguments: no timing,
 * no state; every rank computes the same.
 */
#ifndef REPROD_COST_H
#define REPROD_COST_H

#include "runtime/route.h"

#include <stdint.h>

/* The machine, as the model sees it: ranks placed in nodes of `ranks_per_node` consecutive
 * ranks; a message between two ranks of a node costs intra_latency_us + bytes / intra_gbps,
 * between nodes the inter_ figures; each further message posted at once costs overhead_us. */
struct reprod_cost_machine {
    int ranks_per_node;
    double intra_latency_us, intra_gbps; /* GB/s = 1e3 bytes per microsecond */
    double inter_latency_us, inter_gbps;
    double overhead_us;       /* per message, beyond the first of a batch posted together */
    double reduce_gbps;       /* the library's local sum (bytes of one operand a second) */
    double engine_ns;         /* the shim's exact sum, per element and contribution */
    double fixed_ns;          /* the fixed route's split and rounding, per element and word */
    uint64_t segment_elements; /* the MPI fixed route's pass 1 a segment of this many elements
                                  at a time (hooks/mpi/mpi_fixed.c's SEGMENT_ELEMENTS) */
    /* How to evaluate, not the machine: */
    int rank;                 /* -1: each figure the largest over the ranks; else this rank's */
    uint64_t *peer_set;       /* with rank >= 0, non-NULL: the ranks it sends to are or-ed in,
                                 bit r of word r / 64 (ranks / 64 + 1 words) */
};

/* The defaults: a node of 8 GPUs on NVLink, nodes on InfiniBand (docs/performance.md). */
void reprod_cost_machine_defaults(struct reprod_cost_machine *machine);

/* What one call costs one rank: each figure the largest over the ranks. */
struct reprod_cost {
    uint64_t messages; /* messages the rank sends */
    uint64_t bytes;    /* bytes the rank sends */
    uint64_t peers;    /* ranks it sends to */
    uint64_t memory;   /* bytes of temporary buffers (the library's and the shim's) */
    double time_us;    /* modelled time of the call (its critical path) */
    char algorithm[160];
};

/* The library's own reduction of `call` (a sum; the type's size and count). 0, or -1 when the
 * call is outside the model (ranks < 1, a collective not modelled). */
int reprod_cost_native(const struct reprod_cost_machine *machine,
                       const struct reprod_route_call *call, struct reprod_cost *cost);

/* The shim's reduction of `call` by `route`. words_per_element: the fixed route's K (0: the
 * type's typical K, reprod_cost_typical_words). 0, or -1 as above. */
int reprod_cost_route(const struct reprod_cost_machine *machine,
                      const struct reprod_route_call *call, enum reprod_route route,
                      int words_per_element, struct reprod_cost *cost);

/* The count the shim hands Open MPI's MPI_Allreduce for `count` elements of `size` bytes over
 * `ranks` ranks (zeros after the data): `count`, or more where Open MPI 4.1's tuned decision
 * (coll_tuned_decision_fixed.c) would take an algorithm whose messages grow with N. It runs a
 * ring (2 (N - 1) messages of count / N elements) for small totals (below 16 B at 4 - 7 ranks,
 * below 64 or 128 B at 16 - 63, 2 - 4 KiB at 2,048 - 4,095, 2 - 16 KiB from 4,096; a ring of
 * fewer elements than ranks is recursive doubling), and
 * Rabenseifner's reduce-scatter + all-gather falls back to a linear reduce to rank 0 and a
 * broadcast (N - 1 messages at rank 0) for fewer elements than 2^floor(log2 N). Such a count
 * becomes the least larger one whose algorithm is recursive doubling or Rabenseifner proper
 * (every total where the decision changes is a power of two of bytes): at most
 * max(16 KiB / size, 2^floor(log2 N)) elements. And a count whose algorithm is the reduce and
 * broadcast becomes the first larger region's whose algorithm is recursive doubling, within 4
 * times its bytes. Below 4 ranks, `count`. */
uint64_t reprod_cost_openmpi_allreduce_count(int ranks, uint64_t count, int size);

/* K for contributions within a few binades of each other: 1 for the 16- and 32-bit types
 * while ranks leave a word room for them, 2 for binary64 (its buckets are 8 binades). */
int reprod_cost_typical_words(reprod_type type, int ranks);

/* The same in NCCL's int32 narrow words (W = 31 - ceil(log2 N): for binary16 1 up to 4,096
 * ranks, for bfloat16 up to 32,768, 2 beyond; for binary64 3 up to 256 ranks, 4 beyond); the
 * route takes them where they are fewer bytes than the int64 words (reprod_cost_route). */
int reprod_cost_typical_narrow_words(reprod_type type, int ranks);

/* Bytes of one element of `type`. */
int reprod_cost_type_bytes(reprod_type type);

#endif /* REPROD_COST_H */
