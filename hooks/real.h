/* real.h: the real definition of a hooked function, looked up once per symbol.
 *
 * For the hooks of libc, cuRAND and PyTorch (the MPI hooks have their own table). The lookup
 * is reprod_resolve: dlsym(RTLD_NEXT), then a walk of the loaded objects for libraries loaded
 * RTLD_LOCAL (PyTorch's, and cuRAND under a framework). It is safe before the constructor.
 */
#ifndef REPROD_HOOKS_REAL_H
#define REPROD_HOOKS_REAL_H

#include "common.h"
#include "resolve.h"

#include <stdatomic.h>

/* The address of the real `name`, cached in *slot (NULL if no other object defines it).
 * Threads racing on the first call resolve the same address; none takes a lock after it. */
static inline void *reprod_real(_Atomic(void *) *slot, const char *name)
{
    void *address = atomic_load_explicit(slot, memory_order_acquire);
    if (REPROD_UNLIKELY(!address)) {
        address = reprod_resolve(name);
        atomic_store_explicit(slot, address, memory_order_release);
    }
    return address;
}

/* Declare `variable`, a pointer of `type` to the real `name`. */
#define REPROD_REAL(type, variable, name)                                                          \
    static _Atomic(void *) variable##_slot;                                                        \
    __typeof__(type) variable = (__typeof__(type))reprod_real(&variable##_slot, name)

#endif /* REPROD_HOOKS_REAL_H */
