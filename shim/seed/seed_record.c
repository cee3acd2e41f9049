/* seed_record.c: the ring of seeds the shim produced or handed out, one per width, without a
 * lock (seed_record.h says what it is for).
 *
 * Determinism. The ring holds the last REPROD_SEED_RECORD_LENGTH values added, in the order of
 * the calls: what it answers depends only on the sequence of seeding calls, never on time,
 * addresses or the load. (Threads that seed concurrently make that sequence what their calls'
 * order is, as it makes the generators' seeds.)
 *
 * False matches. A user's fresh seed that equals a remembered value goes through unchanged.
 * The remembered values are mixer outputs (derived seeds) or states a generator reached from
 * one, which behave like uniform draws from the w-bit integers: a given fresh seed equals a
 * given remembered value with probability 2^-w, and one of the k remembered values of its
 * width with probability at most k * 2^-w. For k = 256: 2^-56 for 64-bit seeds, 2^-40 for
 * 48-bit X, and k / 2^32 = 2^-24 (about 6e-8 per call) for 32-bit seeds. One remembered value
 * is not random: glibc's never-seeded drand48 X is 0, so after seed48 handed that back a fresh
 * seed48 of X = 0 also goes through unchanged. This is acceptable because a false match only
 * means that one seed reaches the generator as the caller gave it, as without the shim, and in
 * every run alike (the record depends on the calls only): determinism is kept, only that
 * seed's decorrelation is lost. Deriving a returned seed again instead breaks every restore
 * and every clone, for certain.
 *
 * Fork. No lock is taken, so none can be held in a fork child. The child keeps its parent's
 * record, as it keeps its parent's generators (torch.initial_seed() in a DataLoader worker
 * reports the parent's derived seed). A parent's thread interrupted by fork in the middle of an
 * add leaves one slot unfilled in the child: that value is forgotten there, nothing else.
 */
#include "seed/seed_record.h"

#include <stdatomic.h>

_Static_assert((REPROD_SEED_RECORD_LENGTH & (REPROD_SEED_RECORD_LENGTH - 1)) == 0,
               "the slot index wraps with the 32-bit count only for a power of 2");

struct seed_ring {
    _Atomic uint64_t values[REPROD_SEED_RECORD_LENGTH];
    _Atomic unsigned char filled[REPROD_SEED_RECORD_LENGTH]; /* 1 once values[i] was stored */
    _Atomic uint32_t added; /* values added so far, mod 2^32: the next slot is added % LENGTH */
};

static struct seed_ring rings[REPROD_SEED_WIDTHS]; /* zero: empty, usable before constructors */

void reprod_seed_record_add(enum reprod_seed_width width, uint64_t value)
{
    if ((unsigned)width >= REPROD_SEED_WIDTHS) return;
    struct seed_ring *ring = &rings[width];
    uint32_t added = atomic_fetch_add_explicit(&ring->added, 1, memory_order_relaxed);
    uint32_t slot = added % REPROD_SEED_RECORD_LENGTH;
    atomic_store_explicit(&ring->values[slot], value, memory_order_relaxed);
    /* Release: a reader that sees the slot filled sees a value stored in it, never the zero of
     * an empty slot (which would make seed 0 look remembered). */
    atomic_store_explicit(&ring->filled[slot], 1, memory_order_release);
}

int reprod_seed_record_recall(enum reprod_seed_width width, uint64_t value)
{
    if ((unsigned)width >= REPROD_SEED_WIDTHS) return 0;
    struct seed_ring *ring = &rings[width];
    for (int slot = 0; slot < REPROD_SEED_RECORD_LENGTH; slot++) {
        if (!atomic_load_explicit(&ring->filled[slot], memory_order_acquire)) continue;
        if (atomic_load_explicit(&ring->values[slot], memory_order_relaxed) == value) {
            reprod_seed_record_add(width, value);
            return 1;
        }
    }
    return 0;
}
