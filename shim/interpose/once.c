/* once.c: the once of once.h, and the thread-local state it and the guard rely on. */
#include "interpose/once.h"

#include "interpose/guard.h"

#include <sched.h>
#include <unistd.h>

_Thread_local unsigned reprod_guard_word __attribute__((tls_model("initial-exec")));

/* Its address names the calling thread: a live thread's differs from every other's. */
static _Thread_local char this_thread __attribute__((tls_model("initial-exec")));

/* Run the initialiser on this thread, which has claimed the state for its process. */
static void run(struct reprod_once *once, void (*initialise)(void))
{
    atomic_store(&once->runner, (const void *)&this_thread);
    reprod_guard_enter();
    initialise();
    reprod_guard_leave();
    atomic_store(&once->runner, NULL);
    atomic_store_explicit(&once->state, REPROD_ONCE_DONE, memory_order_release);
}

int reprod_once_slow(struct reprod_once *once, void (*initialise)(void))
{
    int self = (int)getpid();
    for (;;) {
        int state = atomic_load_explicit(&once->state, memory_order_acquire);
        if (state == REPROD_ONCE_DONE) return 1;
        if (state == self) {
            /* Running in this process: re-entered by its own thread, or wait for it. */
            if (atomic_load(&once->runner) == (const void *)&this_thread) return 0;
            sched_yield();
            continue;
        }
        /* Not started, or started by the parent of this fork child, whose running thread did
         * not come along: claim it. */
        if (atomic_compare_exchange_strong(&once->state, &state, self)) {
            run(once, initialise);
            return 1;
        }
    }
}
