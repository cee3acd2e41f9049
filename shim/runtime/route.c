/* route.c: the per-call choice of route (route.h), from the cost model (cost.h). */
#include "runtime/route.h"

#include "engine/engine.h"
#include "runtime/config.h"
#include "runtime/cost.h"

#include <fenv.h>

/* The exchange is an N-way exchange (every rank sends to every other): above this many ranks
 * it is never taken, whatever the model says of one call (DESIGN.md, section 6: a route's
 * cost grows like the library's own). At 5 to 16 ranks it is taken where the model finds it
 * faster, which depends on the size and not monotonically (docs/performance.md). */
#define ROUTE_EXCHANGE_MAX_RANKS 16
/* Up to this many ranks the model always finds the exchange faster. */
#define ROUTE_EXCHANGE_ALWAYS_RANKS 4
/* Decisions a thread remembers (the model costs a few microseconds at 16 ranks; a small
 * reduction, a fifth of one): recent calls' arguments, direct-mapped. */
#define ROUTE_CACHE_ENTRIES 8

enum reprod_route reprod_route_by_model(const struct reprod_route_call *call)
{
    enum reprod_route fixed = call->one_pass ? REPROD_ROUTE_FIXED_ONE_PASS : REPROD_ROUTE_FIXED;
    if (call->ranks > ROUTE_EXCHANGE_MAX_RANKS) return fixed;
    if (call->ranks < 2 || call->count == 0) return REPROD_ROUTE_EXCHANGE;
    struct reprod_cost_machine machine;
    reprod_cost_machine_defaults(&machine);
    /* Every collective priced as the all-reduce of its whole message: the one the model
     * mirrors; the others move the same data in the same pattern, or less of it. */
    struct reprod_route_call priced = *call;
    priced.collective = REPROD_COLLECTIVE_ALLREDUCE;
    struct reprod_cost exchange, other;
    /* The model computes in binary64: in the default environment, whatever the caller's (a
     * program that traps FE_INEXACT must not take a signal from it, nor find a flag raised),
     * which is given back as it was. */
    fenv_t caller;
    feholdexcept(&caller);
    fesetround(FE_TONEAREST);
    reprod_cost_route(&machine, &priced, REPROD_ROUTE_EXCHANGE, 0, &exchange);
    reprod_cost_route(&machine, &priced, fixed, 0, &other);
    enum reprod_route route = other.time_us < exchange.time_us ? fixed : REPROD_ROUTE_EXCHANGE;
    fesetenv(&caller);
    return route;
}

/* One remembered decision, packed: 16 bytes, so that the memory adds 128 bytes to the shim's
 * static TLS (which a dlopen'ed shim takes from glibc's small surplus). */
struct route_memo {
    uint64_t count;
    uint32_t key;   /* ranks << 8 | collective << 4 | type << 2 | nccl << 1 | one_pass; 0: empty */
    uint32_t route;
};
static __thread struct route_memo route_memo[ROUTE_CACHE_ENTRIES]
    __attribute__((tls_model("initial-exec")));

static enum reprod_route modelled(const struct reprod_route_call *call)
{
    if (call->ranks > ROUTE_EXCHANGE_MAX_RANKS)
        return call->one_pass ? REPROD_ROUTE_FIXED_ONE_PASS : REPROD_ROUTE_FIXED;
    /* The model's answer at every size, type and library up to 4 ranks (test_cost checks it),
     * without the memory's lookup: a 2-rank all-reduce of 8 bytes takes a fifth of a
     * microsecond natively, and make bench times it. */
    if (call->ranks <= ROUTE_EXCHANGE_ALWAYS_RANKS) return REPROD_ROUTE_EXCHANGE;
    uint32_t key = (uint32_t)call->ranks << 8 | ((uint32_t)call->collective & 15) << 4 |
                   ((uint32_t)call->type & 3) << 2 | (call->nccl != 0) << 1 | (call->one_pass != 0);
    unsigned slot = (unsigned)(call->count ^ (call->count >> 7) ^ key) % ROUTE_CACHE_ENTRIES;
    struct route_memo *memo = &route_memo[slot];
    if (memo->key == key && memo->count == call->count) return (enum reprod_route)memo->route;
    enum reprod_route route = reprod_route_by_model(call);
    memo->count = call->count, memo->key = key, memo->route = (uint32_t)route;
    return route;
}

enum reprod_route reprod_route_choose(const struct reprod_route_call *call)
{
    enum reprod_route fixed = call->one_pass ? REPROD_ROUTE_FIXED_ONE_PASS : REPROD_ROUTE_FIXED;
    if (!reprod_engine_fixed_supported(call->type, call->ranks)) return REPROD_ROUTE_EXCHANGE;
    switch (reprod_config()->route) {
    case REPROD_ROUTE_ALWAYS_EXCHANGE: return REPROD_ROUTE_EXCHANGE;
    case REPROD_ROUTE_ALWAYS_FIXED: return fixed;
    default: return modelled(call);
    }
}

const char *reprod_route_name(enum reprod_route route)
{
    switch (route) {
    case REPROD_ROUTE_FIXED: return "fixed";
    case REPROD_ROUTE_FIXED_ONE_PASS: return "fixed one-pass";
    default: return "exchange";
    }
}
