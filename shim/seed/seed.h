/* seed.h: the seed policies (docs/seeding.md) applied to one intercepted seeding call,
 * the bijective mixers behind them, and their inverses (which prove the bijections in tests).
 *
 * A hook calls reprod_seed_replace*(api, seed) and hands the result to the real function; the
 * call is logged at REPROD_VERBOSE=2 with the API, the seed in, the seed out and the rank. A
 * seed the shim produced or handed out earlier is recognised and kept (shim/seed/seed_record.h).
 */
#ifndef REPROD_SEED_H
#define REPROD_SEED_H

#include "reprod.h"

#include <stdint.h>

/* The seed the real `api` gets for the `seed` the caller passed, under the process's
 * REPROD_SEED_POLICY and rank (rank 0 while none is known; the log line says so). A seed this
 * process's shim produced (one of the last REPROD_SEED_RECORD_LENGTH of its width) or handed
 * out (reprod_seed_note_handed_out48) goes through unchanged, so that re-seeding with a
 * generator's reported seed keeps its stream. Logs the call at REPROD_VERBOSE=2, with the
 * reason when the seed is kept. REPROD_MODE=off (the shim changes nothing) passes seeds
 * through, and so does a call made inside the shim (guard.h), without a log line. Safe before
 * the constructor and from any thread. */
uint64_t reprod_seed_replace64(const char *api, uint64_t seed);
uint32_t reprod_seed_replace32(const char *api, uint32_t seed);
uint64_t reprod_seed_replace48(const char *api, uint64_t seed); /* modulo 2^48 */

/* Remember a 48-bit generator state X (the low 48 bits of `state`) that a seeding call handed
 * back to its caller (seed48's return value, seed48_r's __old_x): a caller that passes it back
 * means "restore", so reprod_seed_replace48 keeps it. Not logged. */
void reprod_seed_note_handed_out48(uint64_t state);

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
 * of the deterministic entropy stream (shim/seed/entropy.c). */
uint64_t reprod_mix64(uint64_t x);

#endif /* REPROD_SEED_H */
