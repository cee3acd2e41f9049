/* engine.h: exact and ordered reduction of N contributions (internal interface).
 *
 * Pure arithmetic: no I/O, no allocation, no global state. The public entry points
 * reprod_reduce_exact and reprod_reduce_ordered (include/reprod.h) are thin wrappers over
 * these; tests and benchmarks use the options below to pin which path runs.
 */
#ifndef REPROD_ENGINE_H
#define REPROD_ENGINE_H

#include "reprod.h"

#include <stddef.h>

/* How reprod_engine_exact may run. Zero-initialise for the defaults. */
struct reprod_engine_options {
    int force_general; /* 1: every element takes the general (superaccumulator) path */
};

/* What reprod_engine_exact did, for tests and benchmarks. */
struct reprod_engine_stats {
    size_t general_elements; /* elements that took the general path */
};

/* reprod_reduce_exact with options (NULL for defaults) and stats (NULL if unwanted).
 * Which path an element takes never changes its bits. */
int reprod_engine_exact(reprod_type type, reprod_op op, reprod_rounding rounding,
                        const void *const contributions[], int contribution_count,
                        size_t element_count, void *result,
                        const struct reprod_engine_options *options,
                        struct reprod_engine_stats *stats);

#endif /* REPROD_ENGINE_H */
