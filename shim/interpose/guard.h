/* guard.h: where this thread is inside the shim, in one thread-local word (libfaketime's
 * dont_fake). Every re-entrancy check of the shim reads it.
 *
 * Two ways in, both in pairs:
 * - the shim's own work (reprod_guard_enter / reprod_guard_leave, nesting): its open, write
 *   and close (log, trace) and whatever an initialiser calls (once.h). While this thread is
 *   in it, every hook it reaches passes straight to the real function (reprod_guard_active).
 * - a hook family's call (reprod_guard_claim / reprod_guard_release): the MPI hooks claim
 *   REPROD_GUARD_MPI for the length of an intercepted call. An MPI hook reached inside it (a
 *   call the library or a user's reduction function makes while the shim runs), or inside the
 *   shim's own work, is refused the claim and hands its call straight to the library. Hooks of
 *   other families still work inside an MPI call: entropy a library draws inside a collective
 *   is pinned as anywhere else, as a seed it sets is derived.
 */
#ifndef REPROD_GUARD_H
#define REPROD_GUARD_H

/* The word: the depth of the shim's own work in the low bits, one bit per hook family above. */
#define REPROD_GUARD_DEPTH 0x00ffffffu
enum reprod_guard_family {
    REPROD_GUARD_MPI = 1u << 24, /* inside an MPI hook */
};

/* initial-exec: one load from the thread pointer, no allocation, safe in a signal handler
 * (defined in once.c). A handler that enters and leaves leaves the word as it found it. */
extern _Thread_local unsigned reprod_guard_word __attribute__((tls_model("initial-exec")));

static inline void reprod_guard_enter(void)
{
    reprod_guard_word++;
}

static inline void reprod_guard_leave(void)
{
    reprod_guard_word--;
}

/* 1 when this thread is inside the shim's own work: a hook must pass straight to the real
 * function. */
static inline int reprod_guard_active(void)
{
    return (reprod_guard_word & REPROD_GUARD_DEPTH) != 0;
}

/* Enter a call of hook `family` on this thread: 1 to go on (pair it with reprod_guard_release),
 * 0 when the thread is already inside a hook of that family or inside the shim's own work:
 * the hook then hands the call to the real function untouched. */
static inline int reprod_guard_claim(enum reprod_guard_family family)
{
    if (reprod_guard_word & (REPROD_GUARD_DEPTH | (unsigned)family)) return 0;
    reprod_guard_word |= (unsigned)family;
    return 1;
}

static inline void reprod_guard_release(enum reprod_guard_family family)
{
    reprod_guard_word &= ~(unsigned)family;
}

#endif /* REPROD_GUARD_H */
