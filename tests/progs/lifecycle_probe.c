/* lifecycle_probe: a host that is hard on the shim's initialisation and fork handling
 * (tests/runtime/lifecycle.sh), and one that loads it in a setuid process (tests/runtime/secure_execution.sh).
 * Run the first two with the shim preloaded and under timeout: a hang is the failure.
 *
 *     lifecycle_probe calls     make hooked calls (srand, getrandom, open and read
 *                               /dev/urandom) in main; with LIFECYCLE_REENTER=1, this
 *                               program's getenv, which the shim calls while it initialises,
 *                               makes them too: they re-enter the shim's initialisation
 *     lifecycle_probe fork      threads resolve a symbol no library defines, over and over
 *                               (each call walks the loaded objects); meanwhile the main thread
 *                               forks children that resolve it too
 *     lifecycle_probe dlopen SHIM
 *                               print "secure: <AT_SECURE>", load SHIM with dlopen (LD_PRELOAD
 *                               is ignored in a setuid process) and call its srand
 */
#include <fcntl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#define WALKING_THREADS 3
#define FORKS           60

extern char **environ;

static _Atomic int main_started;
static _Thread_local int hook_depth; /* hooked calls made from inside getenv, nested */

/* The hooked calls a host might make from a function the shim calls. */
static void call_hooked_functions(void)
{
    unsigned char bytes[8];
    srand(7);
    if (getrandom(bytes, sizeof bytes, 0) < 0) perror("getrandom");
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, bytes, sizeof bytes) < 0) perror("read");
        close(fd);
    }
}

/* getenv without calling anything. */
static char *lookup(const char *name)
{
    size_t length = strlen(name);
    for (char **entry = environ; entry && *entry; entry++)
        if (strncmp(*entry, name, length) == 0 && (*entry)[length] == '=')
            return *entry + length + 1;
    return NULL;
}

/* Interposes libc's getenv for the whole process (the shim included). Before main, under
 * LIFECYCLE_REENTER=1, it makes hooked calls, at most two levels deep so that it ends. */
char *getenv(const char *name)
{
    if (!atomic_load(&main_started) && hook_depth < 2 && lookup("LIFECYCLE_REENTER")) {
        hook_depth++;
        call_hooked_functions();
        hook_depth--;
    }
    return lookup(name);
}

typedef int (*curand_seed_fn)(void *generator, unsigned long long seed);

/* The shim's cuRAND hook: no libcurand is loaded, so each call walks the loaded objects for
 * the real function and finds none. */
static curand_seed_fn curand_hook;

static _Atomic int stop_walking;

static void *walk_forever(void *unused)
{
    (void)unused;
    while (!atomic_load(&stop_walking))
        curand_hook(NULL, 1);
    return NULL;
}

/* Fork while other threads resolve; every child resolves too and must exit. */
static int probe_fork(void)
{
    curand_hook = (curand_seed_fn)dlsym(RTLD_DEFAULT, "curandSetPseudoRandomGeneratorSeed");
    if (!curand_hook) {
        fprintf(stderr, "lifecycle_probe: the shim is not preloaded\n");
        return 1;
    }
    pthread_t threads[WALKING_THREADS];
    for (int i = 0; i < WALKING_THREADS; i++)
        pthread_create(&threads[i], NULL, walk_forever, NULL);
    int children = 0;
    for (int i = 0; i < FORKS; i++) {
        pid_t child = fork();
        if (child == 0) {
            curand_hook(NULL, 2);
            call_hooked_functions();
            _exit(0);
        }
        int status = 0;
        if (child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            children++;
    }
    atomic_store(&stop_walking, 1);
    for (int i = 0; i < WALKING_THREADS; i++)
        pthread_join(threads[i], NULL);
    printf("fork: %d of %d children exited\n", children, FORKS);
    return children == FORKS ? 0 : 1;
}

/* Load the shim like a setuid program that links it would, and make a seeding call. */
static int probe_dlopen(const char *shim)
{
    printf("secure: %lu\n", getauxval(AT_SECURE));
    fflush(stdout);
    void *handle = dlopen(shim, RTLD_NOW | RTLD_LOCAL);
    void (*shim_srand)(unsigned int) =
        handle ? (void (*)(unsigned int))dlsym(handle, "srand") : NULL;
    if (!shim_srand) {
        fprintf(stderr, "lifecycle_probe: cannot load %s: %s\n", shim, dlerror());
        return 1;
    }
    shim_srand(7);
    return 0;
}

int main(int argc, char **argv)
{
    atomic_store(&main_started, 1);
    if (argc == 2 && strcmp(argv[1], "calls") == 0) {
        call_hooked_functions();
        printf("calls: main ran\n");
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "fork") == 0) return probe_fork();
    if (argc == 3 && strcmp(argv[1], "dlopen") == 0) return probe_dlopen(argv[2]);
    fprintf(stderr, "usage: lifecycle_probe calls|fork|dlopen SHIM\n");
    return 2;
}
