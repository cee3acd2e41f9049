/* rng.c: libc's seeding calls (srand, srandom, initstate, srand48, seed48, lcong48 and glibc's
 * reentrant variants): each gives the real function the seed of REPROD_SEED_POLICY.
 *
 * Only seeding calls are hooked. A generator never seeded keeps libc's default state (rand
 * and random start as if srandom(1), the drand48 family from a fixed X): its sequence is the
 * same under the shim as without. glibc's own calls between these functions (srand48 ->
 * srand48_r, initstate -> initstate_r) use internal aliases, so no seed is derived twice.
 * rand_r has no seeding call (its state is the caller's variable) and is not touched.
 *
 * seed48 returns the X it replaces (seed48_r leaves it in the buffer's __old_x). A caller that
 * saves it and passes it back to seed48, seed48_r or lcong48 later means "restore": the shim
 * remembers each X it hands back, and reprod_seed_replace48 keeps a remembered X unchanged.
 */
#include "interpose/real.h"
#include "seed/seed.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The real functions, each looked up on its hook's first call. */
/* clang-format off */
#define REAL_FUNCTIONS(X)                                                                          \
    REPROD_REAL_AS_HOOK(X, srand) REPROD_REAL_AS_HOOK(X, srandom) REPROD_REAL_AS_HOOK(X, initstate) \
    REPROD_REAL_AS_HOOK(X, srand48) REPROD_REAL_AS_HOOK(X, seed48) REPROD_REAL_AS_HOOK(X, lcong48) \
    REPROD_REAL_AS_HOOK(X, srandom_r) REPROD_REAL_AS_HOOK(X, initstate_r)                          \
    REPROD_REAL_AS_HOOK(X, srand48_r) REPROD_REAL_AS_HOOK(X, seed48_r)                             \
    REPROD_REAL_AS_HOOK(X, lcong48_r)
/* clang-format on */
struct libc_seeding {
    REPROD_REAL_FIELDS(REAL_FUNCTIONS)
};
REPROD_REAL_TABLE(real_functions, struct libc_seeding, REAL_FUNCTIONS, NULL);

/* X of the 48-bit generators: x[0] holds the low 16 bits, x[2] the high (glibc and POSIX). */
static uint64_t x48_from(const unsigned short x[3])
{
    return (uint64_t)x[0] | (uint64_t)x[1] << 16 | (uint64_t)x[2] << 32;
}

static void x48_to(uint64_t value, unsigned short x[3])
{
    x[0] = (unsigned short)value;
    x[1] = (unsigned short)(value >> 16);
    x[2] = (unsigned short)(value >> 32);
}

REPROD_EXPORT void srand(unsigned int seed)
{
    REPROD_REAL_OR_RETURN(real, real_functions, srand, );
    real(reprod_seed_replace32("srand", seed));
}

REPROD_EXPORT void srandom(unsigned int seed)
{
    REPROD_REAL_OR_RETURN(real, real_functions, srandom, );
    real(reprod_seed_replace32("srandom", seed));
}

REPROD_EXPORT char *initstate(unsigned int seed, char *state, size_t state_bytes)
{
    REPROD_REAL_OR_RETURN(real, real_functions, initstate, NULL);
    return real(reprod_seed_replace32("initstate", seed), state, state_bytes);
}

/* srand48 takes a long, but glibc keeps only its low 32 bits: a 32-bit seed. */
REPROD_EXPORT void srand48(long seed)
{
    REPROD_REAL_OR_RETURN(real, real_functions, srand48, );
    real((long)reprod_seed_replace32("srand48", (uint32_t)seed));
}

/* The caller's array is read, never written: the real function gets a derived copy. The X
 * handed back is remembered, so that passing it back restores it. */
REPROD_EXPORT unsigned short *seed48(unsigned short seed[3])
{
    REPROD_REAL_OR_RETURN(real, real_functions, seed48, NULL);
    unsigned short derived[3];
    x48_to(reprod_seed_replace48("seed48", x48_from(seed)), derived);
    unsigned short *previous = real(derived);
    if (previous) reprod_seed_note_handed_out48(x48_from(previous));
    return previous;
}

/* param[0..2] is the seed X; the multiplier param[3..5] and addend param[6] are kept. */
REPROD_EXPORT void lcong48(unsigned short param[7])
{
    REPROD_REAL_OR_RETURN(real, real_functions, lcong48, );
    unsigned short derived[7];
    memcpy(derived, param, sizeof derived);
    x48_to(reprod_seed_replace48("lcong48", x48_from(param)), derived);
    real(derived);
}

REPROD_EXPORT int srandom_r(unsigned int seed, struct random_data *buffer)
{
    REPROD_REAL_OR_RETURN(real, real_functions, srandom_r, errno = ENOSYS, -1);
    unsigned int derived = reprod_seed_replace32("srandom_r", seed);
    return real(derived, buffer);
}

REPROD_EXPORT int initstate_r(unsigned int seed, char *state, size_t state_bytes,
                              struct random_data *buffer)
{
    REPROD_REAL_OR_RETURN(real, real_functions, initstate_r, errno = ENOSYS, -1);
    unsigned int derived = reprod_seed_replace32("initstate_r", seed);
    return real(derived, state, state_bytes, buffer);
}

REPROD_EXPORT int srand48_r(long seed, struct drand48_data *buffer)
{
    REPROD_REAL_OR_RETURN(real, real_functions, srand48_r, errno = ENOSYS, -1);
    long derived = (long)reprod_seed_replace32("srand48_r", (uint32_t)seed);
    return real(derived, buffer);
}

REPROD_EXPORT int seed48_r(unsigned short seed[3], struct drand48_data *buffer)
{
    REPROD_REAL_OR_RETURN(real, real_functions, seed48_r, errno = ENOSYS, -1);
    unsigned short derived[3];
    x48_to(reprod_seed_replace48("seed48_r", x48_from(seed)), derived);
    int status = real(derived, buffer);
    if (status == 0) reprod_seed_note_handed_out48(x48_from(buffer->__old_x));
    return status;
}

REPROD_EXPORT int lcong48_r(unsigned short param[7], struct drand48_data *buffer)
{
    REPROD_REAL_OR_RETURN(real, real_functions, lcong48_r, errno = ENOSYS, -1);
    unsigned short derived[7];
    memcpy(derived, param, sizeof derived);
    x48_to(reprod_seed_replace48("lcong48_r", x48_from(param)), derived);
    return real(derived, buffer);
}
