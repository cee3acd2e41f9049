/* seed.h: the seed policies of DESIGN.md section 4 applied to one intercepted seeding call,
 * the bijective mixers behind them, and their inverses (which prove the bijections in tests).
 *
 * A hook calls reprod_seed_replace*(api, seed) and hands the result to the real function; the
 * call is logged at REPROD_VERBOSE=2 with the API, the seed in, the seed out and the rank.
 */
#ifndef REPROD_SEED_H
#define REPROD_SEED_H

#include "reprod.h"

#include <stdint.h>

/* The seed the real `api` gets for the `seed` the caller passed, under the process's
 * REPROD_SEED_POLICY and rank (rank 0 while none is known; the log line says so). Logs the
 * call at REPROD_VERBOSE=2. REPROD_MODE=off (the shim changes nothing) passes seeds through,
 * and so does a call made inside the shim (guard.h), without a log line. Safe before the
 * constructor and from any thread. */
uint64_t reprod_seed_replace64(const char *api, uint64_t seed);
uint32_t reprod_seed_replace32(const char *api, uint32_t seed);
uint64_t reprod_seed_replace48(const char *api, uint64_t seed); /* modulo 2^48 */

/* Log a seeding call that reached a hook but was handed to the real function unchanged on
 * purpose (`why`: e.g. PyTorch restoring a saved generator state). REPROD_VERBOSE=2 only. */
void reprod_seed_note_unchanged(const char *api, uint64_t seed, const char *why);

/* The inverses of reprod_seed_derive, reprod_seed_derive32 and reprod_seed_derive48 for a
 * fixed rank and policy: underive(derive(s)) == s and derive(underive(d)) == d for every s
 * and d. Their existence is the proof that each derivation is a bijection. */
uint64_t reprod_seed_underive(uint64_t derived, int rank, reprod_seed_policy policy);
uint32_t reprod_seed_underive32(uint32_t derived, int rank, reprod_seed_policy policy);
uint64_t reprod_seed_underive48(uint64_t derived, int rank, reprod_seed_policy policy);

/* H: the 64-bit mixer, splitmix64's output for state x (bijective). Also the block function
 * of the deterministic entropy stream (shim/entropy.c). */
uint64_t reprod_mix64(uint64_t x);

#endif /* REPROD_SEED_H */
