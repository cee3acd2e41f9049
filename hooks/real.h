/* real.h: the real definition of a hooked function, looked up once per symbol.
 *
 * For the hooks of libc, cuRAND and PyTorch (the MPI hooks have their own table). The lookup
 * is reprod_resolve: dlsym(RTLD_NEXT), then a walk of the loaded objects for libraries loaded
 * RTLD_LOCAL (PyTorch's, and cuRAND under a framework). It is safe before the constructor.
 */
#ifndef REPROD_HOOKS_REAL_H
#define REPROD_HOOKS_REAL_H

#include "common.h"
#include "runtime/log.h"
#include "interpose/resolve.h"

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

/* A hook whose real `name` was not found: say so once (the hook then does what the library
 * would answer without the function, or nothing; it never calls through NULL, and derives no
 * seed that nothing would use). */
#define REPROD_REAL_MISSING(name)                                                                  \
    do {                                                                                           \
        static atomic_flag warned_ = ATOMIC_FLAG_INIT;                                             \
        if (!atomic_flag_test_and_set(&warned_))                                                   \
            reprod_log(REPROD_LOG_WARN, "warning: %s: the real function was not found", name);     \
    } while (0)

/* REPROD_REAL, and when the real `name` was not found, REPROD_REAL_MISSING and return from the
 * hook with the expression that follows (empty for a void hook): every hook's one way to meet
 * a missing function. */
#define REPROD_REAL_OR_RETURN(type, variable, name, ...)                                           \
    REPROD_REAL(type, variable, name);                                                             \
    if (!variable) {                                                                               \
        REPROD_REAL_MISSING(name);                                                                 \
        return __VA_ARGS__;                                                                        \
    }

#endif /* REPROD_HOOKS_REAL_H */
