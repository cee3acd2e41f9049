/* seed.c: seed derivation (the policies of docs/seeding.md), its inverse, and one
 * intercepted seeding call: derived, or kept when the shim produced the seed (seed_record.h),
 * and logged.
 *
 * The mixers. Each is a composition of steps that are bijections of the w-bit integers
 * (w = 64, 48 or 32), so each mixer is a bijection:
 *   - x + c mod 2^w, for a constant c. Inverse: x - c.
 *   - x ^ (x >> k), for 0 < k < w. The top k bits of the result are those of x, and each
 *     lower group of k bits is recovered from the group above it. Inverse:
 *     y ^= y >> k; y ^= y >> 2k; y ^= y >> 4k; ... while the shift is below w.
 *   - x * m mod 2^w, for an odd m: gcd(m, 2^w) = 1, so m is a unit of Z/2^w. Inverse: multiply
 *     by m^-1 mod 2^w, from Newton's iteration i <- i (2 - m i), exact to 3, 6, 12, ... bits.
 * H64 is splitmix64's output function (Steele, Lea and Flood 2014, with Stafford's "Mix13"
 * finalizer): H64(x) = fmix64(x + 0x9E3779B97F4A7C15), the first output of splitmix64 started
 * from state x, so published splitmix64 outputs pin it (tests/unit/test_seed.c). H32 is
 * Wellons' "lowbias32" of the same construction on 32-bit words after the same kind of
 * addition, and H48 the same construction on 48-bit words. A 32-bit seed is thus mixed by a
 * bijection of the 32-bit integers, never by truncating a 64-bit one (which would collide).
 *
 * The policies, for a w-bit seed s and the rank r (arithmetic mod 2^w):
 *   hash    s -> H(s)
 *   rank    s -> H(s - r, r), where H(x, r) = H(x + K(r)) and K(r) = H(r ^ RANK_KEY)
 *   shared  s -> H(s - r)
 *   off     s -> s
 * For a fixed r each is a composition of bijections of s (adding the constants -r and K(r),
 * then H), hence a bijection; the inverses below undo the steps in reverse order.
 * Under rank, the seeds base + r and base + r' of two ranks become H(base + K(r)) and
 * H(base + K(r')). K is injective (xor with a constant and H are bijections, and ranks are
 * below 2^31 < 2^w), so these differ: the per-rank seeds of one job never collide. Nothing
 * depends on the world size, so a rank's seed is the same in every world size.
 */
#include "seed/seed.h"

#include "common.h"
#include "runtime/config.h"
#include "interpose/guard.h"
#include "interpose/init.h"
#include "runtime/log.h"
#include "runtime/rank.h"
#include "seed/seed_record.h"
#include "runtime/stats.h"
#include "runtime/trace.h"

#include <inttypes.h>
#include <stdio.h>

#define GOLDEN64   UINT64_C(0x9E3779B97F4A7C15) /* splitmix64's increment (2^64 / phi, odd) */
#define MIX64_M1   UINT64_C(0xBF58476D1CE4E5B9) /* Stafford Mix13 multipliers (odd) */
#define MIX64_M2   UINT64_C(0x94D049BB133111EB)
#define RANK_KEY64 UINT64_C(0xD1B54A32D192ED03) /* separates K(r) from H(s) */

#define GOLDEN32   UINT32_C(0x9E3779B9) /* 2^32 / phi, odd */
#define MIX32_M1   UINT32_C(0x7FEB352D) /* Wellons' lowbias32 multipliers (odd) */
#define MIX32_M2   UINT32_C(0x846CA68B)
#define RANK_KEY32 UINT32_C(0xD192ED03)

#define MASK48     ((UINT64_C(1) << 48) - 1)
#define GOLDEN48   UINT64_C(0x9E3779B97F4A) /* the top 48 bits of GOLDEN64 */
#define MIX48_M1   UINT64_C(0x476D1CE4E5B9) /* the low 48 bits of the Mix13 multipliers (odd) */
#define MIX48_M2   UINT64_C(0x49BB133111EB)
#define RANK_KEY48 UINT64_C(0xD1B54A32D192)

/* The inverse of y = x ^ (x >> shift) on `bits`-bit words. */
static uint64_t unxorshift(uint64_t y, int shift, int bits)
{
    for (int s = shift; s < bits; s *= 2)
        y ^= y >> s;
    return y;
}

/* m^-1 mod 2^64 for an odd m (hence also mod 2^48 and 2^32, after masking). */
static uint64_t inverse_of_odd(uint64_t m)
{
    uint64_t inverse = m; /* m * m == 1 mod 8: 3 bits right */
    for (int i = 0; i < 5; i++)
        inverse *= 2 - m * inverse; /* 6, 12, 24, 48, 96 bits */
    return inverse;
}

/* ---- 64-bit ---- */

uint64_t reprod_mix64(uint64_t x)
{
    x += GOLDEN64;
    x ^= x >> 30;
    x *= MIX64_M1;
    x ^= x >> 27;
    x *= MIX64_M2;
    x ^= x >> 31;
    return x;
}

static uint64_t unmix64(uint64_t x)
{
    x = unxorshift(x, 31, 64);
    x *= inverse_of_odd(MIX64_M2);
    x = unxorshift(x, 27, 64);
    x *= inverse_of_odd(MIX64_M1);
    x = unxorshift(x, 30, 64);
    return x - GOLDEN64;
}

static uint64_t rank_key64(int rank)
{
    return reprod_mix64((uint64_t)(uint32_t)rank ^ RANK_KEY64);
}

REPROD_EXPORT uint64_t reprod_seed_derive(uint64_t seed, int rank, reprod_seed_policy policy)
{
    uint64_t r = (uint64_t)(uint32_t)rank;
    switch (policy) {
    case REPROD_SEED_HASH:
        return reprod_mix64(seed);
    case REPROD_SEED_RANK:
        return reprod_mix64(seed - r + rank_key64(rank));
    case REPROD_SEED_SHARED:
        return reprod_mix64(seed - r);
    default:
        return seed;
    }
}

uint64_t reprod_seed_underive(uint64_t derived, int rank, reprod_seed_policy policy)
{
    uint64_t r = (uint64_t)(uint32_t)rank;
    switch (policy) {
    case REPROD_SEED_HASH:
        return unmix64(derived);
    case REPROD_SEED_RANK:
        return unmix64(derived) - rank_key64(rank) + r;
    case REPROD_SEED_SHARED:
        return unmix64(derived) + r;
    default:
        return derived;
    }
}

/* ---- 32-bit ---- */

static uint32_t mix32(uint32_t x)
{
    x += GOLDEN32;
    x ^= x >> 16;
    x *= MIX32_M1;
    x ^= x >> 15;
    x *= MIX32_M2;
    x ^= x >> 16;
    return x;
}

static uint32_t unmix32(uint32_t x)
{
    x = (uint32_t)unxorshift(x, 16, 32);
    x *= (uint32_t)inverse_of_odd(MIX32_M2);
    x = (uint32_t)unxorshift(x, 15, 32);
    x *= (uint32_t)inverse_of_odd(MIX32_M1);
    x = (uint32_t)unxorshift(x, 16, 32);
    return x - GOLDEN32;
}

static uint32_t rank_key32(int rank)
{
    return mix32((uint32_t)rank ^ RANK_KEY32);
}

REPROD_EXPORT uint32_t reprod_seed_derive32(uint32_t seed, int rank, reprod_seed_policy policy)
{
    uint32_t r = (uint32_t)rank;
    switch (policy) {
    case REPROD_SEED_HASH:
        return mix32(seed);
    case REPROD_SEED_RANK:
        return mix32(seed - r + rank_key32(rank));
    case REPROD_SEED_SHARED:
        return mix32(seed - r);
    default:
        return seed;
    }
}

uint32_t reprod_seed_underive32(uint32_t derived, int rank, reprod_seed_policy policy)
{
    uint32_t r = (uint32_t)rank;
    switch (policy) {
    case REPROD_SEED_HASH:
        return unmix32(derived);
    case REPROD_SEED_RANK:
        return unmix32(derived) - rank_key32(rank) + r;
    case REPROD_SEED_SHARED:
        return unmix32(derived) + r;
    default:
        return derived;
    }
}

/* ---- 48-bit (every value below 2^48; products and sums are taken mod 2^48) ---- */

static uint64_t mix48(uint64_t x)
{
    x = (x + GOLDEN48) & MASK48;
    x ^= x >> 24;
    x = (x * MIX48_M1) & MASK48;
    x ^= x >> 23;
    x = (x * MIX48_M2) & MASK48;
    x ^= x >> 24;
    return x;
}

static uint64_t unmix48(uint64_t x)
{
    x = unxorshift(x & MASK48, 24, 48);
    x = (x * inverse_of_odd(MIX48_M2)) & MASK48;
    x = unxorshift(x, 23, 48);
    x = (x * inverse_of_odd(MIX48_M1)) & MASK48;
    x = unxorshift(x, 24, 48);
    return (x - GOLDEN48) & MASK48;
}

static uint64_t rank_key48(int rank)
{
    return mix48((uint64_t)(uint32_t)rank ^ RANK_KEY48);
}

REPROD_EXPORT uint64_t reprod_seed_derive48(uint64_t seed, int rank, reprod_seed_policy policy)
{
    uint64_t r = (uint64_t)(uint32_t)rank;
    seed &= MASK48;
    switch (policy) {
    case REPROD_SEED_HASH:
        return mix48(seed);
    case REPROD_SEED_RANK:
        return mix48((seed - r + rank_key48(rank)) & MASK48);
    case REPROD_SEED_SHARED:
        return mix48((seed - r) & MASK48);
    default:
        return seed;
    }
}

uint64_t reprod_seed_underive48(uint64_t derived, int rank, reprod_seed_policy policy)
{
    uint64_t r = (uint64_t)(uint32_t)rank;
    derived &= MASK48;
    switch (policy) {
    case REPROD_SEED_HASH:
        return unmix48(derived);
    case REPROD_SEED_RANK:
        return (unmix48(derived) - rank_key48(rank) + r) & MASK48;
    case REPROD_SEED_SHARED:
        return (unmix48(derived) + r) & MASK48;
    default:
        return derived;
    }
}

/* ---- one intercepted call ---- */

/* How a seeding call stands: the policy that applies and the rank it uses, with the words
 * for the log line. */
struct seed_context {
    reprod_seed_policy policy;
    int rank;
    int rank_assumed;          /* no rank known: rank 0 is used */
    char rank_words[96];       /* "rank 3 from RANK", "rank 0: no rank known yet, 0 assumed" */
    const char *unchanged_why; /* non-NULL: the seed goes through as it is */
};

static void seed_context_get(struct seed_context *context)
{
    reprod_init(); /* a seeding call may come from another library's constructor */
    const struct reprod_config *config = reprod_config();
    const char *variable = NULL;
    enum reprod_rank_source source = reprod_rank_source(&variable);
    context->policy = config->seed_policy;
    context->rank = source == REPROD_RANK_UNKNOWN ? 0 : reprod_rank();
    context->rank_assumed = source == REPROD_RANK_UNKNOWN;
    context->unchanged_why = NULL;
    if (config->mode == REPROD_MODE_OFF) {
        context->policy = REPROD_SEED_OFF;
        context->unchanged_why = "REPROD_MODE=off";
    }
    switch (source) {
    case REPROD_RANK_FROM_ENV:
        snprintf(context->rank_words, sizeof context->rank_words, "rank %d from %s", context->rank,
                 variable ? variable : "the environment");
        break;
    case REPROD_RANK_FROM_LIBRARY:
        snprintf(context->rank_words, sizeof context->rank_words, "rank %d from the library",
                 context->rank);
        break;
    default:
        snprintf(context->rank_words, sizeof context->rank_words,
                 "rank 0: no rank known yet, 0 assumed");
        break;
    }
}

static void log_call(const char *api, uint64_t seed, uint64_t derived,
                     const struct seed_context *context)
{
    if (!reprod_log_enabled(REPROD_LOG_DEBUG)) return;
    reprod_log(REPROD_LOG_DEBUG, "seed: %s %" PRIu64 " -> %" PRIu64 " (policy %s, %s%s%s)", api,
               seed, derived, reprod_seed_policy_name(context->policy), context->rank_words,
               context->unchanged_why ? ", unchanged: " : "",
               context->unchanged_why ? context->unchanged_why : "");
}

static uint64_t derive(enum reprod_seed_width width, uint64_t seed,
                       const struct seed_context *context)
{
    switch (width) {
    case REPROD_SEED_WIDTH_32:
        return reprod_seed_derive32((uint32_t)seed, context->rank, context->policy);
    case REPROD_SEED_WIDTH_48:
        return reprod_seed_derive48(seed, context->rank, context->policy);
    default:
        return reprod_seed_derive(seed, context->rank, context->policy);
    }
}

/* The seed the real `api` gets for the caller's `seed` (below 2^width). A seed the shim itself
 * produced or handed out earlier goes through unchanged: it is already derived (a generator's
 * initial_seed(), a clone's seed, a saved X), and deriving it again would start another stream.
 * Any other seed is derived, and the result remembered. Policy off remembers nothing. */
static uint64_t replace(const char *api, enum reprod_seed_width width, uint64_t seed)
{
    if (reprod_guard_active()) return seed; /* the shim's own call, or one from inside it */
    struct seed_context context;
    seed_context_get(&context);
    uint64_t result = seed;
    if (context.policy == REPROD_SEED_OFF) {
        result = derive(width, seed, &context);
    } else if (reprod_seed_record_recall(width, seed)) {
        context.unchanged_why = "the shim produced or handed out this seed earlier";
    } else {
        /* Only rank and shared read the rank: tell later if the guess was wrong. */
        if (context.rank_assumed &&
            (context.policy == REPROD_SEED_RANK || context.policy == REPROD_SEED_SHARED))
            reprod_rank_note_assumed(api);
        result = derive(width, seed, &context);
        reprod_seed_record_add(width, result);
    }
    log_call(api, seed, result, &context);
    reprod_stats_seed();
    reprod_trace_seed(api, context.unchanged_why ? "kept" : reprod_seed_policy_name(context.policy),
                      seed, result);
    return result;
}

uint64_t reprod_seed_replace64(const char *api, uint64_t seed)
{
    return replace(api, REPROD_SEED_WIDTH_64, seed);
}

uint32_t reprod_seed_replace32(const char *api, uint32_t seed)
{
    return (uint32_t)replace(api, REPROD_SEED_WIDTH_32, seed);
}

uint64_t reprod_seed_replace48(const char *api, uint64_t seed)
{
    return replace(api, REPROD_SEED_WIDTH_48, seed & MASK48);
}

void reprod_seed_note_handed_out48(uint64_t state)
{
    reprod_init();
    const struct reprod_config *config = reprod_config();
    if (config->mode == REPROD_MODE_OFF || config->seed_policy == REPROD_SEED_OFF) return;
    reprod_seed_record_add(REPROD_SEED_WIDTH_48, state & MASK48);
}

void reprod_seed_note_unchanged(const char *api, uint64_t seed, const char *why)
{
    reprod_init();
    if (!reprod_log_enabled(REPROD_LOG_DEBUG)) return;
    reprod_log(REPROD_LOG_DEBUG, "seed: %s %" PRIu64 " -> %" PRIu64 " (unchanged: %s)", api, seed,
               seed, why);
}
