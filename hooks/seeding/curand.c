/* curand.c: cuRAND's host API seeding call, curandSetPseudoRandomGeneratorSeed: the real
 * function gets the 64-bit seed of REPROD_SEED_POLICY.
 *
 * No cuRAND header or library is needed: the types are restated from curand.h (an opaque
 * generator handle, an enum status, an unsigned long long seed) and the real function is
 * found at run time, also when a framework loaded libcurand RTLD_LOCAL. A generator never
 * seeded keeps cuRAND's default seed. Device-side seeding (curand_init in a kernel) is code
 * compiled into the application's kernels and cannot be reached.
 */
#include "interpose/real.h"
#include "seed/seed.h"

typedef struct curandGenerator_st *curandGenerator_t;
typedef int curandStatus_t;

#define CURAND_STATUS_INTERNAL_ERROR 999 /* curand.h */

curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t generator,
                                                  unsigned long long seed);

/* The real function, looked up on the hook's first call. */
#define REAL_FUNCTIONS(X) REPROD_REAL_AS_HOOK(X, curandSetPseudoRandomGeneratorSeed)
struct curand_seeding {
    REPROD_REAL_FIELDS(REAL_FUNCTIONS)
};
REPROD_REAL_TABLE(real_functions, struct curand_seeding, REAL_FUNCTIONS, NULL);

REPROD_EXPORT curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t generator,
                                                                unsigned long long seed)
{
    static const char api[] = "curandSetPseudoRandomGeneratorSeed";
    REPROD_REAL_OR_RETURN(real, real_functions, curandSetPseudoRandomGeneratorSeed,
                          CURAND_STATUS_INTERNAL_ERROR);
    return real(generator, reprod_seed_replace64(api, seed));
}
