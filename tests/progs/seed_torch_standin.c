/* seed_torch_standin: drive the CUDA-generator stand-in (tests/standins/torchcuda.c) as
 * PyTorch's Python layer drives libtorch_cuda.so, and print the generator's seed after each
 * step: creation (default seed), manual_seed(SEED), manual_seed(initial_seed()) (seeding again
 * with the seed the generator reports), clone(), set_rng_state(STATE_SEED), then clone() of
 * the restored generator.
 *
 *     seed_torch_standin LIBTORCHCUDA SEED STATE_SEED
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s LIBTORCHCUDA SEED STATE_SEED\n", argv[0]);
        return 2;
    }
    void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        fprintf(stderr, "seed_torch_standin: %s\n", dlerror());
        return 2;
    }
    void *(*generator)(void) = (void *(*)(void))dlsym(library, "standin_generator");
    void (*manual_seed)(void *, uint64_t) =
        (void (*)(void *, uint64_t))dlsym(library, "standin_manual_seed");
    void (*set_rng_state)(void *, uint64_t, uint64_t) =
        (void (*)(void *, uint64_t, uint64_t))dlsym(library, "standin_set_rng_state");
    void *(*clone)(void *) = (void *(*)(void *))dlsym(library, "standin_clone");
    uint64_t (*current_seed)(void *) = (uint64_t(*)(void *))dlsym(library, "standin_current_seed");
    if (!generator || !manual_seed || !set_rng_state || !clone || !current_seed) {
        fprintf(stderr, "seed_torch_standin: %s is not the stand-in\n", argv[1]);
        return 2;
    }
    void *g = generator();
    printf("created: %" PRIu64 "\n", current_seed(g));
    manual_seed(g, strtoull(argv[2], NULL, 0));
    printf("manual_seed: %" PRIu64 "\n", current_seed(g));
    manual_seed(g, current_seed(g));
    printf("manual_seed(initial_seed): %" PRIu64 "\n", current_seed(g));
    void *copy = clone(g);
    printf("clone: %" PRIu64 "\n", current_seed(copy));
    free(copy);
    set_rng_state(g, strtoull(argv[3], NULL, 0), 8);
    printf("set_rng_state: %" PRIu64 "\n", current_seed(g));
    copy = clone(g);
    printf("clone after set_rng_state: %" PRIu64 "\n", current_seed(copy));
    free(copy);
    return 0;
}
