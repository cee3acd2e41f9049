/* seed_curand: seed a cuRAND host generator and print its first uniforms exactly.
 *
 *     seed_curand LIBCURAND SEED
 *
 * libcurand is loaded RTLD_LOCAL, as frameworks load it. The seeding call is looked up the way
 * a framework's own call to it binds (global scope first: an LD_PRELOADed definition wins),
 * and only then in libcurand itself; the other calls come from libcurand directly.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*create_fn)(void **, int);
typedef int (*seed_fn)(void *, unsigned long long);
typedef int (*uniform_fn)(void *, float *, size_t);
typedef int (*destroy_fn)(void *);

#define CURAND_RNG_PSEUDO_DEFAULT 100

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBCURAND SEED\n", argv[0]);
        return 2;
    }
    void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        fprintf(stderr, "seed_curand: %s\n", dlerror());
        return 2;
    }
    create_fn create = (create_fn)dlsym(library, "curandCreateGeneratorHost");
    seed_fn set_seed = (seed_fn)dlsym(RTLD_DEFAULT, "curandSetPseudoRandomGeneratorSeed");
    if (!set_seed) set_seed = (seed_fn)dlsym(library, "curandSetPseudoRandomGeneratorSeed");
    uniform_fn uniform = (uniform_fn)dlsym(library, "curandGenerateUniform");
    destroy_fn destroy = (destroy_fn)dlsym(library, "curandDestroyGenerator");
    if (!create || !set_seed || !uniform || !destroy) {
        fprintf(stderr, "seed_curand: %s lacks a cuRAND call\n", argv[1]);
        return 2;
    }
    void *generator = NULL;
    float values[4];
    int rc = create(&generator, CURAND_RNG_PSEUDO_DEFAULT);
    if (rc == 0) rc = set_seed(generator, strtoull(argv[2], NULL, 0));
    if (rc == 0) rc = uniform(generator, values, 4);
    if (rc != 0) {
        fprintf(stderr, "seed_curand: cuRAND status %d\n", rc);
        if (generator) destroy(generator);
        return 1;
    }
    printf("curand: %a %a %a %a\n", values[0], values[1], values[2], values[3]);
    destroy(generator);
    return 0;
}
