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
#include <stdint.h>

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

/* ---- The fixed-point route (engine_fixed.h has the arithmetic and why it is exact) -------
 * An exact sum through two of a library's own reductions: a MAX of two byte codes per element
 * (pass 1), then an int64 SUM of words (pass 2), rounded once. Every rank calls these with the
 * same `ranks` (the communicator's size), `type` (a complex type: twice the count of its real
 * type) and direction. A contribution is `count` elements of `type` at `terms`. */

/* 1 when the route can serve `ranks` contributions of `type` (ranks < 2^21). */
int reprod_engine_fixed_supported(reprod_type type, int ranks);

/* Pass 1: codes[2 i] and codes[2 i + 1], this rank's two codes of element i, to be reduced
 * with MAX (unsigned bytes) over the ranks. */
void reprod_engine_fixed_codes(reprod_type type, const void *terms, size_t count, uint8_t *codes);

/* Pass 1 on the wire (engine_fixed.h, engine_fixed_lo_block): the codes of `count` elements
 * as reprod_engine_fixed_packed_bytes(type, count) bytes, count hi then a lo a block (8
 * elements of binary32 and binary64, 1 of the 16-bit types), to be reduced with MAX (unsigned
 * bytes) instead of the codes themselves; then the reduced codes from the reduced wire. Every
 * rank packs with its own direction: the bytes are the same. */
size_t reprod_engine_fixed_packed_bytes(reprod_type type, size_t count);
void reprod_engine_fixed_pack(reprod_type type, reprod_rounding dir, const uint8_t *codes,
                              size_t count, uint8_t *packed);
void reprod_engine_fixed_unpack(reprod_type type, reprod_rounding dir, const uint8_t *packed,
                                size_t count, uint8_t *codes);

/* From the reduced codes: the words each element takes in pass 2. With offsets non-NULL
 * (count + 1 entries) offsets[i] is where element i's words start and offsets[count] the
 * total. Returns the total number of int64 words. The same on every rank. */
size_t reprod_engine_fixed_layout(reprod_type type, int ranks, reprod_rounding dir,
                                  const uint8_t *codes, size_t count, size_t *offsets);

/* Pass 2: this rank's words (offsets[count] of them) of its terms, to be reduced with an int64
 * SUM over the ranks. */
void reprod_engine_fixed_split(reprod_type type, int ranks, reprod_rounding dir, const void *terms,
                               const uint8_t *codes, size_t count, const size_t *offsets,
                               int64_t *words);

/* The results from the summed words: each element the exact sum (REPROD_AVG: divided by
 * `ranks`), rounded once in direction dir; the guarantees of reprod_reduce_exact. */
void reprod_engine_fixed_round(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                               const uint8_t *codes, size_t count, const size_t *offsets,
                               const int64_t *sums, void *result);

/* One pass (no codes): reprod_engine_fixed_full_words(type, ranks) words per element, enough
 * for every value of the type, so one int64 SUM is the whole collective (a nonblocking one
 * cannot wait between two passes). */
int reprod_engine_fixed_full_words(reprod_type type, int ranks);
void reprod_engine_fixed_full_split(reprod_type type, int ranks, const void *terms, size_t count,
                                    int64_t *words);
void reprod_engine_fixed_full_round(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                                    size_t count, const int64_t *sums, void *result);
/* The same for a prefix of a scan: the sums of `terms` contributions (1 <= terms <= ranks),
 * split with the word of `ranks`. The two-pass layout cannot serve a prefix: its codes, reduced
 * over every rank, would call a prefix of zeros or of finite terms an infinity or a +0. */
void reprod_engine_fixed_full_round_prefix(reprod_type type, int ranks, int terms,
                                           reprod_rounding dir, size_t count, const int64_t *sums,
                                           void *result);

#endif /* REPROD_ENGINE_H */
