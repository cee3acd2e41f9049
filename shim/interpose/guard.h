/* guard.h: the thread-local "inside the shim" counter (libfaketime's dont_fake).
 *
 * While it is non-zero on a thread, every hook reached on that thread passes straight to the
 * real function: the shim's own open, write and close (log, trace) and whatever its
 * initialisation calls are never intercepted by the shim itself. Enter and leave in pairs.
 */
#ifndef REPROD_GUARD_H
#define REPROD_GUARD_H

/* initial-exec: one load from the thread pointer, no allocation, safe in a signal handler
 * (defined in once.c). */
extern _Thread_local int reprod_guard_depth __attribute__((tls_model("initial-exec")));

static inline void reprod_guard_enter(void)
{
    reprod_guard_depth++;
}

static inline void reprod_guard_leave(void)
{
    reprod_guard_depth--;
}

/* 1 when this thread is inside the shim: a hook must pass straight to the real function. */
static inline int reprod_guard_active(void)
{
    return reprod_guard_depth != 0;
}

#endif /* REPROD_GUARD_H */
