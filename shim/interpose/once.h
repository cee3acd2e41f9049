/* once.h: run an initialisation once per process, without waiting for oneself.
 *
 * pthread_once deadlocks when the initialiser re-enters (a hooked call made by something it
 * calls), and leaves a fork child waiting for a thread that does not exist. Here, as in
 * libfaketime: the thread that is running the initialiser and re-enters returns at once; other
 * threads wait until it is done; a fork child whose parent was in the middle of it runs it
 * again itself. The initialiser runs inside the guard (guard.h): hooks it reaches pass
 * straight to the real functions.
 */
#ifndef REPROD_ONCE_H
#define REPROD_ONCE_H

#include "common.h"

#include <stdatomic.h>

#define REPROD_ONCE_NOT_STARTED 0
#define REPROD_ONCE_DONE        (-1) /* any other value: the pid of the process running it */

struct reprod_once {
    _Atomic int state;            /* NOT_STARTED, DONE or the running process's pid */
    _Atomic(const void *) runner; /* the running thread (its marker in once.c) */
};

#define REPROD_ONCE_INIT                                                                           \
    {                                                                                              \
        REPROD_ONCE_NOT_STARTED, NULL                                                              \
    }

/* reprod_once's path when the initialiser has not finished: claim, wait or re-enter. */
int reprod_once_slow(struct reprod_once *once, void (*initialise)(void));

/* Run initialise() once per process. Returns 1 when it has run (now or before); 0 when the
 * calling thread is the one running it and has re-entered: the caller must make do without
 * it (return, or pass straight through). */
static inline int reprod_once(struct reprod_once *once, void (*initialise)(void))
{
    if (REPROD_LIKELY(atomic_load_explicit(&once->state, memory_order_acquire) == REPROD_ONCE_DONE))
        return 1;
    return reprod_once_slow(once, initialise);
}

/* Make `once` run again on its next call (a fork child that needs its own file). Only while
 * no other thread can be running it. */
static inline void reprod_once_reset(struct reprod_once *once)
{
    atomic_store(&once->state, REPROD_ONCE_NOT_STARTED);
}

#endif /* REPROD_ONCE_H */
