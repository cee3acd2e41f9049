/* entropy_probe: read entropy through every route REPROD_ENTROPY pins, and print it in hex,
 * one line per route (labelled); run twice under the shim with REPROD_ENTROPY set, the output
 * must repeat; without it, it must not.
 *
 *     entropy_probe all             every route, then a fork and threads
 *     entropy_probe files FILE      reads of a regular FILE, and of a descriptor number that
 *                                   was /dev/urandom, closed behind the shim's back, and now
 *                                   is FILE: both must print FILE's bytes
 *     entropy_probe dlopen SHIM     load SHIM with dlopen (works in a setuid process, where
 *                                   LD_PRELOAD does not) and call its getrandom
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static void print_hex(const char *label, const void *bytes, size_t count)
{
    const unsigned char *p = bytes;
    printf("%s: ", label);
    for (size_t i = 0; i < count; i++)
        printf("%02x", p[i]);
    printf("\n");
    fflush(stdout);
}

static void read_device(const char *label, const char *path, int use_openat)
{
    unsigned char buffer[16] = {0};
    int fd = use_openat ? openat(AT_FDCWD, path, O_RDONLY) : open(path, O_RDONLY);
    if (fd < 0 || read(fd, buffer, sizeof buffer) != (ssize_t)sizeof buffer) perror(label);
    print_hex(label, buffer, sizeof buffer);
    close(fd);
}

static void *thread_draw(void *out)
{
    if (getrandom(out, 8, 0) != 8) perror("thread getrandom");
    return NULL;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int probe_all(void)
{
    unsigned char buffer[16];
    if (getrandom(buffer, sizeof buffer, 0) != (ssize_t)sizeof buffer) perror("getrandom");
    print_hex("getrandom", buffer, sizeof buffer);
    if (getrandom(buffer, sizeof buffer, GRND_NONBLOCK | GRND_RANDOM) < 0) perror("getrandom");
    print_hex("getrandom(GRND_RANDOM)", buffer, sizeof buffer);
    if (getentropy(buffer, sizeof buffer) != 0) perror("getentropy");
    print_hex("getentropy", buffer, sizeof buffer);
    uint32_t word = arc4random();
    print_hex("arc4random", &word, sizeof word);
    arc4random_buf(buffer, sizeof buffer);
    print_hex("arc4random_buf", buffer, sizeof buffer);
    word = arc4random_uniform(1000);
    printf("arc4random_uniform(1000): %u\n", word);

    read_device("read /dev/urandom", "/dev/urandom", 0);
    read_device("read /dev/random", "/dev/random", 0);
    read_device("openat /dev/urandom", "/dev/urandom", 1);

    FILE *stream = fopen("/dev/urandom", "rb");
    if (!stream || fread(buffer, 1, sizeof buffer, stream) != sizeof buffer) perror("fread");
    print_hex("fopen+fread", buffer, sizeof buffer);
    if (read(fileno(stream), buffer, sizeof buffer) != (ssize_t)sizeof buffer) perror("fileno");
    print_hex("fopen+read(fileno)", buffer, sizeof buffer);
    fclose(stream);

    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    int copy = dup(fd);
    int copy2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
    close(fd); /* the copies stay tracked */
    if (read(copy, buffer, sizeof buffer) != (ssize_t)sizeof buffer) perror("dup");
    print_hex("dup+read", buffer, sizeof buffer);
    if (read(copy2, buffer, sizeof buffer) != (ssize_t)sizeof buffer) perror("F_DUPFD");
    print_hex("fcntl(F_DUPFD)+read", buffer, sizeof buffer);
    struct iovec vectors[2] = {{buffer, 5}, {buffer + 5, 11}};
    if (readv(copy, vectors, 2) != (ssize_t)sizeof buffer) perror("readv");
    print_hex("readv", buffer, sizeof buffer);
    if (pread(copy2, buffer, sizeof buffer, 0) != (ssize_t)sizeof buffer) perror("pread");
    print_hex("pread", buffer, sizeof buffer);
    close(copy2);
    stream = fdopen(copy, "r");
    if (!stream || fread(buffer, 1, sizeof buffer, stream) != sizeof buffer) perror("fdopen");
    print_hex("fdopen+fread", buffer, sizeof buffer);
    fclose(stream);

    /* Two children: each its own stream, different from the parent's and from each other. */
    for (int child = 0; child < 2; child++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (getrandom(buffer, sizeof buffer, 0) < 0) perror("getrandom");
            print_hex(child == 0 ? "fork child 1" : "fork child 2", buffer, sizeof buffer);
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    if (getrandom(buffer, sizeof buffer, 0) < 0) perror("getrandom");
    print_hex("fork parent", buffer, sizeof buffer);

    /* Threads take disjoint parts of the stream in a racy order: the set is deterministic. */
    enum { THREADS = 4 };
    pthread_t threads[THREADS];
    uint64_t drawn[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, thread_draw, &drawn[i]);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    qsort(drawn, THREADS, sizeof drawn[0], compare_u64);
    print_hex("threads (sorted)", drawn, sizeof drawn);
    return 0;
}

static int probe_files(const char *path)
{
    unsigned char buffer[16] = {0};
    int fd = open(path, O_RDONLY);
    ssize_t got = read(fd, buffer, sizeof buffer);
    print_hex("regular file", buffer, got > 0 ? (size_t)got : 0);
    close(fd);

    int device = open("/dev/urandom", O_RDONLY);
    syscall(SYS_close, device); /* behind the shim's back */
    fd = open(path, O_RDONLY);
    if (fd != device) printf("note: descriptor %d not reused (%d)\n", device, fd);
    memset(buffer, 0, sizeof buffer);
    got = read(fd, buffer, sizeof buffer);
    print_hex("regular file on a reused descriptor", buffer, got > 0 ? (size_t)got : 0);
    close(fd);
    return 0;
}

static int probe_dlopen(const char *shim)
{
    printf("secure: %lu\n", getauxval(AT_SECURE));
    fflush(stdout);
    void *handle = dlopen(shim, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fprintf(stderr, "entropy_probe: %s\n", dlerror());
        return 2;
    }
    ssize_t (*draw)(void *, size_t, unsigned) =
        (ssize_t(*)(void *, size_t, unsigned))dlsym(handle, "getrandom");
    unsigned char buffer[16];
    if (!draw || draw(buffer, sizeof buffer, 0) != (ssize_t)sizeof buffer) {
        fprintf(stderr, "entropy_probe: the shim's getrandom failed\n");
        return 2;
    }
    print_hex("getrandom", buffer, sizeof buffer);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "all") == 0) return probe_all();
    if (argc == 3 && strcmp(argv[1], "files") == 0) return probe_files(argv[2]);
    if (argc == 3 && strcmp(argv[1], "dlopen") == 0) return probe_dlopen(argv[2]);
    fprintf(stderr, "usage: %s all | files FILE | dlopen SHIM\n", argv[0]);
    return 2;
}
