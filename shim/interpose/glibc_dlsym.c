/* glibc_dlsym.c: glibc's own dlsym, for the shim's lookups (the shim exports a dlsym of its own,
 * hooks/nccl/dlsym.c). Built without sanitizers: ASan calls dlsym while it starts, before its
 * shadow memory exists. */
#include "common.h"
#include "interpose/resolve.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>

static _Atomic(reprod_dlsym_function *) glibc_dlsym;

reprod_dlsym_function *reprod_glibc_dlsym(void)
{
    reprod_dlsym_function *function = atomic_load_explicit(&glibc_dlsym, memory_order_acquire);
    if (REPROD_LIKELY(function)) return function;
    /* dlsym moved into libc.so.6 at glibc 2.34 (version GLIBC_2.34); older: libdl's 2.2.5. */
    function = (reprod_dlsym_function *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!function) function = (reprod_dlsym_function *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    atomic_store_explicit(&glibc_dlsym, function, memory_order_release);
    return function;
}

/* Not inlined: glibc's dlsym takes its caller to be this function, inside the shim. */
__attribute__((noinline)) void *reprod_dlsym(void *handle, const char *name)
{
    reprod_dlsym_function *function = reprod_glibc_dlsym();
    void *symbol = function ? function(handle, name) : NULL;
    __asm__ volatile("" ::: "memory"); /* no tail call: the caller must be the shim */
    return symbol;
}

