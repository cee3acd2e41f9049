/* route.h: how an exact sum moves between the ranks, chosen per call.
 *
 * Two routes give the same bits (the exact sum rounded once) at different costs:
 *   - the exchange: raw contributions all-to-all (or all-gathered when small), each rank
 *     reducing its chunk with the engine, the results all-gathered. Bandwidth-optimal at a
 *     few ranks; every rank talks to every other, so it does not scale;
 *   - the fixed-point route (engine_fixed.h): the library's own MAX of byte codes, then its
 *     own int64 SUM of fixed-point words, rounded once. O(log N) messages and peers, the
 *     library's own algorithms. A nonblocking collective takes its one-pass form.
 * Every rank chooses from numbers they all share (ranks, count, type, the call), never from
 * timing, so every rank takes the same route.
 */
#ifndef REPROD_ROUTE_H
#define REPROD_ROUTE_H

#include "reprod.h"

#include <stdint.h>

/* REPROD_ROUTE's words, in order. */
enum reprod_route_setting {
    REPROD_ROUTE_AUTO = 0,
    REPROD_ROUTE_ALWAYS_EXCHANGE = 1,
    REPROD_ROUTE_ALWAYS_FIXED = 2,
};

enum reprod_route {
    REPROD_ROUTE_EXCHANGE = 0,       /* all-to-all (all-gather when small), engine, all-gather */
    REPROD_ROUTE_FIXED = 1,          /* MAX of codes, then int64 SUM of words */
    REPROD_ROUTE_FIXED_ONE_PASS = 2, /* one int64 SUM of whole-range words (nonblocking) */
};

enum reprod_collective {
    REPROD_COLLECTIVE_ALLREDUCE = 0,
    REPROD_COLLECTIVE_REDUCE,
    REPROD_COLLECTIVE_REDUCE_SCATTER,
    REPROD_COLLECTIVE_SCAN, /* inclusive or exclusive prefix */
};

/* One call, as every rank sees it. */
struct reprod_route_call {
    int nccl;                          /* 0: MPI, 1: NCCL */
    enum reprod_collective collective;
    int ranks;                         /* communicator size */
    uint64_t count;                    /* elements of `type` in the whole reduction (a complex
                                          element counts twice) */
    reprod_type type;
    int one_pass;                      /* the call cannot wait between two passes (nonblocking,
                                          persistent): only EXCHANGE or FIXED_ONE_PASS */
};

/* The route of `call`: REPROD_ROUTE forced, else the cheaper by the cost model. A route the
 * engine cannot serve (ranks >= 2^21) is never chosen. */
enum reprod_route reprod_route_choose(const struct reprod_route_call *call);

/* The route the cost model (cost.h) chooses for `call` on its default machine, whatever
 * REPROD_ROUTE says: the exchange up to 16 ranks where the model finds it faster, the fixed
 * route (one-pass for a call that cannot wait) otherwise. */
enum reprod_route reprod_route_by_model(const struct reprod_route_call *call);

/* Its name for logs and traces: "exchange", "fixed", "fixed one-pass". */
const char *reprod_route_name(enum reprod_route route);

#endif /* REPROD_ROUTE_H */
