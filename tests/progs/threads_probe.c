/* threads_probe: the shim's first calls arriving from several threads at once, as in a
 * threaded job (loader threads seeding and drawing entropy while another thread reduces).
 *
 *     threads_probe THREADS
 *
 * THREADS threads start together at a barrier; each seeds srand and srandom (hooked seeding
 * calls), draws from getrandom (the entropy hooks), derives a seed with reprod_seed_derive and
 * reduces one fixed set of contributions of every type with reprod_reduce_exact and
 * reprod_reduce_ordered (the engine's first use chooses its kernels), the reprod_* functions
 * taken with dlsym from the preloaded shim. Prints a hash of what the threads computed, one line
 * per route, the same for any THREADS; exits 1 when two threads disagree, 2 when the shim is not
 * preloaded or on bad usage.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MAX_THREADS   64
#define CONTRIBUTIONS 8
#define ELEMENTS      1000 /* crosses every kernel's blocks and leaves a tail */
#define TYPES         4    /* reprod_type: binary16, bfloat16, binary32, binary64 */

typedef int reduce_exact_fn(int type, int op, int rounding, const void *const *contributions,
                            int count, size_t elements, void *result);
typedef int reduce_ordered_fn(int type, int op, const void *const *contributions, int count,
                              size_t elements, void *result);
typedef uint64_t seed_derive_fn(uint64_t seed, int rank, int policy);

static reduce_exact_fn *reduce_exact;
static reduce_ordered_fn *reduce_ordered;
static seed_derive_fn *seed_derive;

static uint64_t inputs[CONTRIBUTIONS][ELEMENTS]; /* read as every type: bit patterns */
static pthread_barrier_t start;

/* What one thread computed, as hashes. */
struct outcome {
    uint64_t exact, ordered, seed;
    int failures;
};

/* FNV-1a of `bytes`, continuing from `hash`. */
static uint64_t hash_bytes(uint64_t hash, const void *bytes, size_t count)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < count; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ull;
    return hash;
}

static void *run_thread(void *argument)
{
    struct outcome *out = argument;
    static const size_t sizes[TYPES] = {2, 2, 4, 8};
    const void *contributions[CONTRIBUTIONS];
    uint64_t result[ELEMENTS];
    unsigned char drawn[16];
    for (int k = 0; k < CONTRIBUTIONS; k++)
        contributions[k] = inputs[k];
    pthread_barrier_wait(&start);
    srand(42);
    srandom(43);
    if (getrandom(drawn, sizeof drawn, 0) != (ssize_t)sizeof drawn) out->failures++;
    out->seed = seed_derive(42, 0, 0);
    out->exact = out->ordered = 0xcbf29ce484222325ull;
    for (int type = 0; type < TYPES; type++) {
        if (reduce_exact(type, 0, 0, contributions, CONTRIBUTIONS, ELEMENTS, result) != 0)
            out->failures++;
        out->exact = hash_bytes(out->exact, result, ELEMENTS * sizes[type]);
        if (reduce_ordered(type, 1, contributions, CONTRIBUTIONS, ELEMENTS, result) != 0)
            out->failures++;
        out->ordered = hash_bytes(out->ordered, result, ELEMENTS * sizes[type]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc == 2 ? atoi(argv[1]) : 0;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "usage: %s THREADS (1 to %d)\n", argv[0], MAX_THREADS);
        return 2;
    }
    reduce_exact = (reduce_exact_fn *)dlsym(RTLD_DEFAULT, "reprod_reduce_exact");
    reduce_ordered = (reduce_ordered_fn *)dlsym(RTLD_DEFAULT, "reprod_reduce_ordered");
    seed_derive = (seed_derive_fn *)dlsym(RTLD_DEFAULT, "reprod_seed_derive");
    if (!reduce_exact || !reduce_ordered || !seed_derive) {
        fprintf(stderr, "threads_probe: the shim is not preloaded\n");
        return 2;
    }
    uint64_t state = 7; /* splitmix64: finite values of similar magnitude in every type */
    for (int k = 0; k < CONTRIBUTIONS; k++)
        for (int i = 0; i < ELEMENTS; i++) {
            uint64_t z = (state += 0x9e3779b97f4a7c15ull);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            inputs[k][i] = (z ^ (z >> 31)) & 0x3fff3fff3fff3fffull; /* exponents below max */
        }
    pthread_t id[MAX_THREADS];
    struct outcome outcomes[MAX_THREADS] = {{0}};
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++)
        pthread_create(&id[t], NULL, run_thread, &outcomes[t]);
    for (int t = 0; t < threads; t++)
        pthread_join(id[t], NULL);
    pthread_barrier_destroy(&start);
    int status = 0;
    for (int t = 0; t < threads; t++) {
        if (outcomes[t].failures) status = 1;
        if (memcmp(&outcomes[t], &outcomes[0], 3 * sizeof(uint64_t)) != 0) {
            fprintf(stderr, "threads_probe: thread %d computed other bits than thread 0\n", t);
            status = 1;
        }
    }
    printf("exact: %016" PRIx64 "\nordered: %016" PRIx64 "\nseed: %016" PRIx64 "\n",
           outcomes[0].exact, outcomes[0].ordered, outcomes[0].seed);
    return status;
}
