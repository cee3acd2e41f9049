/* seed_derive: print reprod_seed_derive{,32,48}(SEED, RANK, POLICY), taken from the shim by
 * dlopen (not preloaded): the mapping a run without the shim must be seeded with to reproduce
 * a run under it.
 *
 *     seed_derive SHIM POLICY RANK WIDTH SEED...     (POLICY: hash|rank|shared|off; WIDTH:
 *                                                      64|48|32) prints one seed a line
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s SHIM POLICY RANK WIDTH SEED...\n", argv[0]);
        return 2;
    }
    static const char *const names[] = {"hash", "rank", "shared", "off"};
    int policy = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(argv[2], names[i]) == 0) policy = i;
    int rank = atoi(argv[3]);
    int width = atoi(argv[4]);
    void *shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!shim || policy < 0 || (width != 64 && width != 48 && width != 32)) {
        fprintf(stderr, "seed_derive: %s\n", shim ? "bad policy or width" : dlerror());
        return 2;
    }
    uint64_t (*derive64)(uint64_t, int, int) =
        (uint64_t(*)(uint64_t, int, int))dlsym(shim, "reprod_seed_derive");
    uint64_t (*derive48)(uint64_t, int, int) =
        (uint64_t(*)(uint64_t, int, int))dlsym(shim, "reprod_seed_derive48");
    uint32_t (*derive32)(uint32_t, int, int) =
        (uint32_t(*)(uint32_t, int, int))dlsym(shim, "reprod_seed_derive32");
    if (!derive64 || !derive48 || !derive32) {
        fprintf(stderr, "seed_derive: the shim lacks reprod_seed_derive*\n");
        return 2;
    }
    for (int i = 5; i < argc; i++) {
        uint64_t seed = strtoull(argv[i], NULL, 0);
        uint64_t derived = width == 64   ? derive64(seed, rank, policy)
                           : width == 48 ? derive48(seed, rank, policy)
                                         : derive32((uint32_t)seed, rank, policy);
        printf("%" PRIu64 "\n", derived);
    }
    return 0;
}
