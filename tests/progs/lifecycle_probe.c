/* lifecycle_probe: a host that is hard on the shim's initialisation and fork handling
 * (tests/lifecycle.sh). Run it with the shim preloaded and under timeout: a hang is the
 * failure.
 *
 *     lifecycle_probe calls     make hooked calls (srand, getrandom, open and read
 *                               /dev/urandom) in main; with LIFECYCLE_REENTER=1, this
 *                               program's getenv, which the shim calls while it initialises,
 *                               makes them too: they re-enter the shim's initialisation
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

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

int main(int argc, char **argv)
{
    atomic_store(&main_started, 1);
    if (argc == 2 && strcmp(argv[1], "calls") == 0) {
        call_hooked_functions();
        printf("calls: main ran\n");
        return 0;
    }
    fprintf(stderr, "usage: lifecycle_probe calls\n");
    return 2;
}
