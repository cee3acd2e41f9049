/* engine_float64_driver.h: the binary64 exact kernels' walk over blocks of elements, shared by
 * engine_avx2.c and engine_avx512.c: which loop each block takes, as plain functions.
 *
 * A kernel file fills a struct float64_kernel with its vector width's block functions (the
 * TwoSum cascade, judged by the exact-errors test and the certified rounding of
 * engine_inner.h; a non-finite s + t for infinities, NaNs and overflow; refused lanes go to
 * the distillation tier of engine_distill.c) and calls engine_float64_drive with it. The
 * struct is a constant and every function here is inlined, so the calls through it compile to
 * direct, inlined calls.
 *
 * Up to kernel->direct contributions, a block (two vectors of lanes, interleaved for latency)
 * runs through every contribution, in one of two ways that struct float64_walk chooses:
 * - tracked: with the exact-errors test's minimum; after a block with refused lanes that follows
 *   another within FLOAT64_QUIET blocks, the next two blocks also keep each error for the
 *   distillation tier and run its second pass alongside (hysteresis);
 * - untracked: without the minimum, after a tracked block where the exact-errors test proved at
 *   most a quarter of the lanes and nothing was refused (wide spreads: the certified rounding
 *   decides them all, and the minimum costs three of the cascade's thirteen operations a term). A
 *   block there with refused lanes has its terms reloaded for the minimum and is finished again,
 *   so every element is judged as a tracked block would judge it. Blocks go back to tracking
 *   when refusals come close together (their errors are worth keeping) or when a refused
 *   block's minimum, found after all, proved more than a quarter of its lanes (cancelling data).
 * With more contributions, kernel->streamed keeps the states of kernel->stream_block elements in
 * L1 while groups of contributions stream through them (as the ordered fold does): few memory
 * streams at a time. Each element adds its terms in the same order in every way.
 */
#ifndef REPROD_ENGINE_FLOAT64_DRIVER_H
#define REPROD_ENGINE_FLOAT64_DRIVER_H

#include "engine/engine_kernels.h"

#include <stddef.h>
#include <stdint.h>

/* One call of a binary64 kernel: its arguments, as every block function takes them. */
struct float64_call {
    reprod_op op;
    reprod_rounding dir;
    const void *const *contributions;
    int count; /* N */
    size_t element_count;
    double *result;
    struct engine_accumulator *a; /* for the general path */
    size_t *general;              /* elements the general path took */
};

/* A vector width's block functions. Each writes the results of its block and returns the lanes
 * (bit l: element j + l) that the first pass refused, and the lanes the exact-errors test proved
 * in *proved. */
struct float64_kernel {
    size_t block;        /* elements a block: two vectors' lanes */
    int direct;          /* up to this many contributions, blocks run through all of them */
    size_t stream_block; /* beyond that, elements whose states stay in L1 (streamed) */
    /* The block at j, tracking the minimum; errors: NULL, or room for the first pass's output,
     * where the distillation tier's second pass (run alongside) finds it. */
    uint32_t (*tracked)(const struct float64_call *call, size_t j, double *errors,
                        uint32_t *proved);
    /* The block at j without the minimum; one with refused lanes tracks it after all and is
     * finished again (*tracked_after_all = 1). */
    uint32_t (*untracked)(const struct float64_call *call, size_t j, int *tracked_after_all,
                          uint32_t *proved);
    /* Elements [j, j + length), length a multiple of block and at most stream_block; far: the
     * next stream_block elements are worth prefetching. */
    void (*streamed)(const struct float64_call *call, size_t j, size_t length, int far);
};

/* Room for the errors a tracked block keeps: ENGINE_DISTILL_PREPARED_LANES doubles for each of
 * up to FLOAT64_DIRECT_MAX contributions. */
#define FLOAT64_DIRECT_MAX 16
#define FLOAT64_QUIET      4 /* refusals this many blocks apart or closer are "close together" */

/* What a binary64 kernel's block finish returns, having written nothing, for an untracked
 * block with refused lanes: the block function finds the minimum and finishes it again. */
#define FLOAT64_TRACK_FIRST UINT32_MAX

/* Which way the next block goes. */
struct float64_walk {
    int tracking;        /* 1: tracked, 0: untracked */
    int storing;         /* blocks left to keep the errors of */
    size_t last_refusal; /* where the last block with refused lanes began, + 1 (0: none yet) */
};

/* A block at j had refused lanes: keep the errors of the next two blocks when the last refusal
 * was close (cancelling data); a lone one (a rare element of a wide spread) does not pay for
 * it. */
static inline __attribute__((always_inline)) void float64_walk_refused(struct float64_walk *walk,
                                                                       size_t j, size_t block)
{
    int close = walk->last_refusal && j + 1 - walk->last_refusal <= FLOAT64_QUIET * block;
    walk->storing = close ? 2 : 0;
    walk->last_refusal = j + 1;
}

/* After a tracked block at j: leave tracking when the exact-errors test proved at most a
 * quarter of its lanes and nothing needed storing. */
static inline __attribute__((always_inline)) void
float64_walk_after_tracked(struct float64_walk *walk, size_t j, size_t block, uint32_t refused,
                           uint32_t proved)
{
    if (refused)
        float64_walk_refused(walk, j, block);
    else if (walk->storing)
        walk->storing--;
    else if ((size_t)__builtin_popcount(proved) <= block / 4)
        walk->tracking = 0;
}

/* After an untracked block at j: back to tracking when refusals come close together (their
 * errors are worth storing) or when a refused block's minimum, found after all, proved much
 * (cancelling data). A lone refusal that the minimum cannot help (a midpoint among wide
 * spreads) stays untracked, and so does a block the reload left unrefused (a cancelling block
 * among wide ones: going back would make every wide block after it track the minimum, 20%
 * slower on such alternations). */
static inline __attribute__((always_inline)) void
float64_walk_after_untracked(struct float64_walk *walk, size_t j, size_t block, uint32_t refused,
                             int tracked_after_all, uint32_t proved)
{
    if (refused) float64_walk_refused(walk, j, block);
    if (walk->storing ||
        (refused && tracked_after_all && (size_t)__builtin_popcount(proved) > block / 4))
        walk->tracking = 1;
}

/* Elements [0, done) of the call, done a multiple of kernel->block; returns done. */
static inline __attribute__((always_inline)) size_t
engine_float64_drive(const struct float64_kernel *kernel, const struct float64_call *call)
{
    const size_t block = kernel->block, n = call->element_count;
    size_t j = 0;
    if (call->count > kernel->direct) {
        /* Inputs beyond the caches: each line of the next stream block is prefetched as the
         * same line of this one is read (engine_prefetch_wanted: N = 64 out of cache took 1.35
         * times as long without). */
        const int far = engine_prefetch_wanted(call->count, n, sizeof(double));
        while (j + block <= n) {
            size_t length = n - j < kernel->stream_block ? n - j : kernel->stream_block;
            length -= length % block;
            kernel->streamed(call, j, length, far);
            j += length;
        }
        return j;
    }
    double errors[FLOAT64_DIRECT_MAX * ENGINE_DISTILL_PREPARED_LANES] __attribute__((aligned(64)));
    struct float64_walk walk = {1, 0, 0};
    while (j + block <= n) { /* a loop for each way: each keeps its constants in registers */
        for (; j + block <= n && walk.tracking; j += block) {
            uint32_t proved = 0;
            uint32_t refused = kernel->tracked(call, j, walk.storing ? errors : NULL, &proved);
            float64_walk_after_tracked(&walk, j, block, refused, proved);
        }
        for (; j + block <= n && !walk.tracking; j += block) {
            uint32_t proved = 0;
            int tracked_after_all = 0;
            uint32_t refused = kernel->untracked(call, j, &tracked_after_all, &proved);
            float64_walk_after_untracked(&walk, j, block, refused, tracked_after_all, proved);
        }
    }
    return j;
}

#endif /* REPROD_ENGINE_FLOAT64_DRIVER_H */
