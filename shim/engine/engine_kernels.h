/* engine_kernels.h: the host engine's block kernels (internal to the engine's files).
 *
 * An exact kernel reduces elements [0, done) of an array, done a multiple of its block, and
 * returns done; the caller finishes the tail with engine_exact_element. Within a block every
 * input is read before any result is written, so `result` may be a contribution. Elements
 * outside the fast path's window take the general path (`a`, *general counts them).
 */
#ifndef REPROD_ENGINE_KERNELS_H
#define REPROD_ENGINE_KERNELS_H

#include "engine/engine_inner.h"

#include <stddef.h>

/* Exact binary32 sums or averages: sum in binary64, span check on the magnitude bits. */
typedef size_t engine_exact_float32_kernel(reprod_op op, reprod_rounding dir,
                                           const void *const *contributions, int count,
                                           size_t element_count, float *result,
                                           struct engine_accumulator *a, size_t *general);

/* Exact binary64 sums, and averages when engine_fast_double_serves: the TwoSum cascade. */
typedef size_t engine_exact_float64_kernel(reprod_op op, reprod_rounding dir,
                                           const void *const *contributions, int count,
                                           size_t element_count, double *result,
                                           struct engine_accumulator *a, size_t *general);

/* The distillation tier (engine_inner.h: DISTILLED, MIDPOINT) for the lanes in `refused` (bit l:
 * element j + l, l < lanes, lanes 8 or 16) of a binary64 block whose first pass they failed: out[l]
 * gets their bits, by distillation or the general path. `prepared`: NULL, or the first pass's
 * output [e_1, ..., e_{N-1}, s] of every lane, ENGINE_DISTILL_PREPARED_LANES doubles per term
 * (64-byte aligned, overwritten); count <= ENGINE_DISTILL_TERMS then. One per kernel level
 * (engine_distill.c). */
#define ENGINE_DISTILL_PREPARED_LANES 16
typedef void engine_distill_float64_fn(reprod_op op, reprod_rounding dir,
                                       const void *const *contributions, int count, size_t j,
                                       int lanes, uint32_t refused, double *prepared, uint64_t *out,
                                       struct engine_accumulator *a, size_t *general);
engine_distill_float64_fn engine_distill_float64_avx512, engine_distill_float64_avx2,
    engine_distill_float64_generic;

/* Binary32 lanes beyond the fast path's window (engine_inner.h: BRACKET, SPLIT, CASCADE): the
 * lanes in `refused` (bit l: element j + l, l < lanes, lanes 8 or 16) get their bits in out[l],
 * by those tiers or the general path. `largest` and `smallest`: NULL, or per lane its terms'
 * largest binary32 magnitude bits and smallest nonzero magnitude bits minus one (zeros:
 * 0x7fffffff), which a kernel's span check has found already. `sums`: NULL, or per lane the
 * binary64 sum of its terms in the bracket's order (engine_bracket_plain_sum: the even and the odd
 * terms apart, from -0, then added), which a kernel has as its window's sums. One per kernel level
 * (engine_beyond_window.c). */
typedef void engine_beyond_window_fn(reprod_op op, reprod_rounding dir,
                                     const void *const *contributions, int count, size_t j,
                                     int lanes, uint32_t refused, const uint32_t *largest,
                                     const uint32_t *smallest, const double *sums, uint32_t *out,
                                     struct engine_accumulator *a, size_t *general);
engine_beyond_window_fn engine_beyond_window_avx512, engine_beyond_window_avx2,
    engine_beyond_window_generic;

/* The same for every lane of elements [j, j + length) (length a multiple of 16; largest and
 * smallest given for each, indexed from j), results written to `result` 16 at a time once
 * their inputs are read: for chunks the kernel expects mostly beyond its window. Binary32
 * results, or bfloat16 ones from the _bfloat16_ versions (the binary32 tiers serve bfloat16:
 * every bfloat16 is a binary32; largest and smallest are then of the terms as binary32), for
 * the AVX2 kernel of the 16-bit types at either level. */
typedef void engine_beyond_window_chunk_fn(reprod_op op, reprod_rounding dir,
                                           const void *const *contributions, int count, size_t j,
                                           size_t length, const uint32_t *largest,
                                           const uint32_t *smallest, void *result,
                                           struct engine_accumulator *a, size_t *general);
engine_beyond_window_chunk_fn engine_beyond_window_chunk_avx512, engine_beyond_window_chunk_avx2,
    engine_beyond_window_chunk_generic, engine_beyond_window_chunk_bfloat16_avx512,
    engine_beyond_window_chunk_bfloat16_avx2;

/* Whether a kernel prefetches its next block or chunk: with more than 16 contributions read a
 * block at a time the hardware's prefetcher loses track of the streams (N=64, 1 Mi elements
 * out of cache: binary64 at 0.38 of the fold, binary32 at 0.29, without), but keeps track of
 * 16 or fewer (binary32 at N=8: prefetching cost 29%); in cache it cost 8%, hence only beyond
 * 8 MiB of input. */
static inline int engine_prefetch_wanted(int count, size_t element_count, size_t element_size)
{
    return count > 16 && element_count * (size_t)count * element_size > (8u << 20);
}

/* Prefetch into L2, for reading, the line `bytes` beyond p. The address is formed in the
 * integers: past the end of an array it is no pointer, and prefetching it is harmless. */
static inline void engine_prefetch_ahead(const void *p, size_t bytes)
{
    __builtin_prefetch((const void *)((uintptr_t)p + bytes), 0, 2);
}

/* AVX2 versions (engine_avx2.c); call only when engine_cpu_has_avx2(). */
engine_exact_float32_kernel engine_exact_float32_avx2;
engine_exact_float64_kernel engine_exact_float64_avx2;

/* Exact binary16 or bfloat16 (type) sums or averages, AVX2 + F16C (engine_avx2_16.c);
 * bfloat16 beyond its window goes to `wide_chunk` (a _bfloat16_ chunk function of the caller's
 * level; unused for binary16). */
size_t engine_exact_small_avx2(reprod_type type, reprod_op op, reprod_rounding dir,
                               const void *const *contributions, int count, size_t element_count,
                               uint16_t *result, engine_beyond_window_chunk_fn *wide_chunk,
                               struct engine_accumulator *a, size_t *general);

/* The ordered fold of binary16 or bfloat16, AVX2 + F16C; returns how many elements it did
 * (the caller folds the rest). */
size_t engine_ordered_small_avx2(reprod_type type, int average, const uint16_t *const *c, int count,
                                 size_t element_count, uint16_t *result);

/* AVX-512F versions (engine_avx512.c); call only when engine_cpu_has_avx512(). */
engine_exact_float32_kernel engine_exact_float32_avx512;
engine_exact_float64_kernel engine_exact_float64_avx512;

/* The fixed-point route's host blocks (engine_fixed.c) in AVX2 (engine_fixed_avx2.c), taken
 * at ENGINE_KERNELS_AVX2 and above; each gives the bits of engine_fixed.c's scalar block.
 * A block is ENGINE_FIXED_BLOCK elements; codes are two bytes an element, [hi, lo]. */
#define ENGINE_FIXED_BLOCK 64
/* Built, and taken, on x86-64 with a 64-bit size_t (the layout stores offsets in 64-bit lanes;
 * not the x32 ABI); elsewhere the scalar blocks serve every level. */
#if defined(__x86_64__) && defined(__LP64__) && (defined(__GNUC__) || defined(__clang__))
#define ENGINE_FIXED_VECTORS 1
#else
#define ENGINE_FIXED_VECTORS 0
#endif
/* engine_fixed_codes of binary32 (binary64) terms [0, done), done the largest multiple of 16
 * <= count. */
size_t engine_fixed_codes_float32_avx2(const void *terms, size_t count, uint8_t *codes);
size_t engine_fixed_codes_float64_avx2(const void *terms, size_t count, uint8_t *codes);
/* 1, with offsets[j] = first + j, when every binary32 element of the block is finite and takes
 * one word at W = word_bits (offsets[j] = first + 2 j: every binary64 element two words); else
 * 0, nothing written. */
int engine_fixed_layout_float32_avx2(int word_bits, const uint8_t *codes, size_t first,
                                     size_t *offsets);
int engine_fixed_layout_float64_avx2(int word_bits, const uint8_t *codes, size_t first,
                                     size_t *offsets);
/* 1 when every element of the block has a finite hi code (a bucket: neither zeros only nor an
 * infinity or NaN); when every element takes two words (its offsets 2 apart) and none has an
 * infinity or NaN. */
int engine_fixed_block_finite_avx2(const uint8_t *codes);
int engine_fixed_block_two_words_avx2(const uint8_t *codes, const size_t *offsets);
/* The words of a block whose elements all take one word (binary32), two (binary64). */
void engine_fixed_split_float32_avx2(const char *terms, const uint8_t *codes, int64_t *words);
void engine_fixed_split_float64_avx2(const char *terms, const uint8_t *codes, int word_bits,
                                     int64_t *words);
/* The binary32 results of a one-word block from its word sums, in the direction MXCSR holds
 * (`dir` names it, for the sign of a zero sum); 0, nothing written, when a sum is beyond
 * 2^51 in magnitude. */
int engine_fixed_round_float32_avx2(const uint8_t *codes, const int64_t *sums, reprod_rounding dir,
                                    char *result);

/* The binary64 results of a two-word block from its word sums, in the direction MXCSR holds
 * (engine_fixed_avx512.c, at ENGINE_KERNELS_AVX512): bit j of the answer set for each element
 * j it left unwritten, for the caller's engine_fixed_round. */
uint64_t engine_fixed_round_float64_avx512(const uint8_t *codes, const int64_t *sums, int word_bits,
                                           char *result);

/* Whether this CPU runs the AVX2 (with F16C) or the AVX-512 kernels (0 where they are not
 * built). */
int engine_cpu_has_avx2(void);
int engine_cpu_has_avx512(void);

/* Kernel levels, for tests that pin one: every level computes the same bits. */
enum engine_kernel_level {
    ENGINE_KERNELS_AUTO = -1,   /* the widest this CPU runs (the default) */
    ENGINE_KERNELS_GENERIC = 0, /* GCC vector code, any CPU */
    ENGINE_KERNELS_AVX2 = 1,    /* engine_avx2.c, engine_avx2_16.c */
    ENGINE_KERNELS_AVX512 = 2,  /* engine_avx512.c (16-bit types: the AVX2 kernels, bfloat16
                                 * beyond its window: the AVX-512 tier) */
};

/* Use at most `level` from now on (process-wide; for tests and benchmarks only). Returns 0,
 * or -1 if this CPU cannot run that level. */
int engine_limit_kernels(enum engine_kernel_level level);

/* The level in use now: the widest this CPU runs, within engine_limit_kernels's. */
enum engine_kernel_level engine_kernels_in_use(void);

#endif /* REPROD_ENGINE_KERNELS_H */
