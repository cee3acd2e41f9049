/* A host-only stand-in for libcurand, for tests on machines without CUDA: the few calls of
 * cuRAND's host API that tests/progs/seed_curand.c makes, with cuRAND's names and signatures.
 * The generator is splitmix64 from the seed (not cuRAND's XORWOW: only the seed matters).
 * Built with -DSTANDIN_WITHOUT_SEEDING, it lacks curandSetPseudoRandomGeneratorSeed. */
#include <stdint.h>
#include <stdlib.h>

typedef struct curandGenerator_st {
    uint64_t state;
} * curandGenerator_t;
typedef int curandStatus_t;

enum { CURAND_STATUS_SUCCESS = 0, CURAND_STATUS_ALLOCATION_FAILED = 102 };

curandStatus_t curandCreateGenerator(curandGenerator_t *generator, int type);
curandStatus_t curandCreateGeneratorHost(curandGenerator_t *generator, int type);
curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t generator,
                                                  unsigned long long seed);
curandStatus_t curandGenerateUniform(curandGenerator_t generator, float *out, size_t count);
curandStatus_t curandDestroyGenerator(curandGenerator_t generator);

curandStatus_t curandCreateGenerator(curandGenerator_t *generator, int type)
{
    (void)type;
    *generator = calloc(1, sizeof **generator); /* seed 0, cuRAND's default */
    return *generator ? CURAND_STATUS_SUCCESS : CURAND_STATUS_ALLOCATION_FAILED;
}

curandStatus_t curandCreateGeneratorHost(curandGenerator_t *generator, int type)
{
    return curandCreateGenerator(generator, type);
}

#ifndef STANDIN_WITHOUT_SEEDING
curandStatus_t curandSetPseudoRandomGeneratorSeed(curandGenerator_t generator,
                                                  unsigned long long seed)
{
    generator->state = seed;
    return CURAND_STATUS_SUCCESS;
}
#endif

curandStatus_t curandGenerateUniform(curandGenerator_t generator, float *out, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t z = (generator->state += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        z ^= z >> 31;
        out[i] = (float)((z >> 40) + 1) * 0x1p-24f; /* (0, 1], as cuRAND's */
    }
    return CURAND_STATUS_SUCCESS;
}

curandStatus_t curandDestroyGenerator(curandGenerator_t generator)
{
    free(generator);
    return CURAND_STATUS_SUCCESS;
}
