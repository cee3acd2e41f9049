/* seed_record.h: the seeds this process's shim produced or handed out, remembered per width, so
 * that a seed passed back (torch.manual_seed(torch.initial_seed()), a cloned generator, the X
 * that seed48 returned) keeps its stream instead of being derived a second time.
 *
 * The derivations are bijections, so a value alone cannot say whether it is a user's seed or
 * one the shim derived: the shim remembers what it produced. The record is a ring of the last
 * REPROD_SEED_RECORD_LENGTH values of each width, without a lock.
 */
#ifndef REPROD_SEED_RECORD_H
#define REPROD_SEED_RECORD_H

#include <stdint.h>

#define REPROD_SEED_RECORD_LENGTH 256 /* values remembered per width (a power of 2) */

/* One record per seed width: values of different widths never match each other. */
enum reprod_seed_width {
    REPROD_SEED_WIDTH_32 = 0, /* srand, srandom, initstate, srand48 and their _r forms */
    REPROD_SEED_WIDTH_48,     /* the X of seed48, lcong48 and their _r forms */
    REPROD_SEED_WIDTH_64,     /* PyTorch's generators, cuRAND */
    REPROD_SEED_WIDTHS
};

/* Remember `value` (below 2^width) as the newest of its width, forgetting the oldest when
 * REPROD_SEED_RECORD_LENGTH are remembered. Thread-safe, lock-free, safe in a fork child. */
void reprod_seed_record_add(enum reprod_seed_width width, uint64_t value);

/* 1 when `value` is among the values remembered for `width`, and then remembers it again as the
 * newest (a seed reused again and again stays known); 0 otherwise, changing nothing. */
int reprod_seed_record_recall(enum reprod_seed_width width, uint64_t value);

#endif /* REPROD_SEED_RECORD_H */
