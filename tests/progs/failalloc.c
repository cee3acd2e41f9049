/* failalloc.c: a preload library for tests: posix_memalign called from libreprod_shim.so fails
 * for requests of FAILALLOC_BYTES or more on the rank FAILALLOC_RANK (Open MPI's or MPICH's
 * rank variable), as if that one rank were out of memory. Everything else is untouched.
 *
 *   LD_PRELOAD="build/libreprod_shim.so build/tests/progs/libfailalloc.so"
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int this_rank(void)
{
    const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (getenv(names[i])) return atoi(getenv(names[i]));
    return -1;
}

int posix_memalign(void **memory, size_t alignment, size_t bytes)
{
    static int (*real)(void **, size_t, size_t);
    if (!real) real = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    const char *rank = getenv("FAILALLOC_RANK"), *limit = getenv("FAILALLOC_BYTES");
    Dl_info caller;
    if (rank && limit && atoi(rank) == this_rank() && bytes >= strtoull(limit, NULL, 10) &&
        dladdr(__builtin_return_address(0), &caller) && caller.dli_fname &&
        strstr(caller.dli_fname, "libreprod_shim"))
        return ENOMEM;
    return real(memory, alignment, bytes);
}
