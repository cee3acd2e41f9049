/* dlsym.c: dlsym itself, so that a framework that dlopens libnccl and looks its functions up
 * by name (XLA's NCCL stub, TensorFlow, Paddle) reaches the shim's hooks: LD_PRELOAD alone
 * changes what the dynamic linker binds, not what dlsym(handle, "ncclAllReduce") answers.
 *
 * An nccl* name found in the library asked is answered with the shim's own function when the
 * shim exports one of that name (its hooks: shim/exports.map) and the library lives in the
 * shim's own link-map namespace: a hook reaches the real NCCL of that namespace only, so for a
 * library opened with dlmopen into another one (where the preloaded shim is not loaded) glibc's
 * answer, the library's own function, is the only one that works. Every other lookup is glibc's
 * answer. dlsym(RTLD_NEXT, ...) depends on its caller's address, so that case jumps to glibc's
 * dlsym as a tail call (this file is built without instrumentation: see the Makefile), leaving
 * the caller's return address in place.
 */
#include "common.h"
#include "interpose/resolve.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>

void *dlsym(void *handle, const char *name);

/* The shim's own handle (its exported symbols are exactly its hooks and API), or NULL. */
static void *shim_handle(void)
{
    static _Atomic(void *) handle;
    void *h = atomic_load_explicit(&handle, memory_order_acquire);
    if (REPROD_LIKELY(h)) return h;
    Dl_info me;
    if (!dladdr((void *)&shim_handle, &me) || !me.dli_fname) return NULL;
    h = dlopen(me.dli_fname, RTLD_LAZY | RTLD_NOLOAD); /* a reference kept for ever */
    if (h) atomic_store_explicit(&handle, h, memory_order_release);
    return h;
}

/* Whether `handle` (a dlopen or dlmopen handle, or RTLD_DEFAULT: the caller's namespace) names
 * objects of the namespace the shim lives in, `self` being the shim's handle. */
static int same_namespace(void *handle, void *self)
{
    Lmid_t theirs, mine;
    if (handle == RTLD_DEFAULT) return 1;
    if (dlinfo(handle, RTLD_DI_LMID, &theirs) != 0 || dlinfo(self, RTLD_DI_LMID, &mine) != 0)
        return 0;
    return theirs == mine;
}

REPROD_EXPORT void *dlsym(void *handle, const char *name)
{
    if (handle == RTLD_NEXT) return reprod_glibc_dlsym()(handle, name); /* a tail call */
    void *found = reprod_dlsym(handle, name);
    if (!found || strncmp(name, "nccl", 4) != 0) return found;
    void *self = shim_handle();
    if (!self || handle == self || !same_namespace(handle, self)) return found;
    void *hook = reprod_dlsym(self, name);
    return hook ? hook : found;
}
