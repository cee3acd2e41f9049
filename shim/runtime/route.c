/* route.c: the per-call choice of route (route.h). */
#include "runtime/route.h"

#include "engine/engine.h"
#include "runtime/config.h"

/* Until the cost model decides: the exchange up to this many ranks, the fixed route above. */
#define ROUTE_FIXED_FROM_RANKS 16

enum reprod_route reprod_route_choose(const struct reprod_route_call *call)
{
    enum reprod_route fixed = call->one_pass ? REPROD_ROUTE_FIXED_ONE_PASS : REPROD_ROUTE_FIXED;
    if (!reprod_engine_fixed_supported(call->type, call->ranks)) return REPROD_ROUTE_EXCHANGE;
    switch (reprod_config()->route) {
    case REPROD_ROUTE_ALWAYS_EXCHANGE: return REPROD_ROUTE_EXCHANGE;
    case REPROD_ROUTE_ALWAYS_FIXED: return fixed;
    default: return call->ranks > ROUTE_FIXED_FROM_RANKS ? fixed : REPROD_ROUTE_EXCHANGE;
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
