/* cuda_kernel_fixed.h: the body of the fixed-point route's kernel (engine_fixed.h's arithmetic
 * over arrays), as plain C that gcc and nvcc both compile: shim/device/cuda_kernels.cu runs it
 * on the GPU, cuda_host.c and the stand-in libcuda on the CPU; tests/gpu/check_kernels.c checks
 * it against the host engine's arrays (reprod_engine_fixed_*), tests/unit/test_cuda_kernel.c
 * the narrow words against MPFR. One launch runs one stage over `elements` elements:
 *
 *   CODES      terms -> codes (2 bytes an element, reduced by the library's MAX); thread 0
 *              also clears max_words[0 .. 1] for the MAX_WORDS stage that follows the reduction
 *   MAX_WORDS  reduced codes -> max_words[0] = the most int64 words any element takes (at
 *              least 1), read back by the host to size the sum; with `narrow` set also
 *              max_words[1] = the most narrow words (below) any element takes, or
 *              REPROD_FIXED_NARROW_NONE where some element cannot take them
 *   SPLIT      terms, reduced codes -> words, `stride` a element (element-major: element i's
 *              words at words + i * stride, unused ones zero), reduced by the library's SUM;
 *              with `narrow` set, int32 words
 *   ROUND      reduced codes, summed words (int32 ones with `narrow`) -> out (the exact sum,
 *              rounded once)
 *   FULL_SPLIT terms -> words, the whole range of the type, `stride` (= full words) an element
 *   FULL_ROUND summed words -> out
 *
 * Every element is independent (no shared memory, no barrier) except MAX_WORDS's maxima: each
 * thread's own over its elements, then one atomic a cell on the device (a plain maximum where
 * the threads run one after the other).
 */
#ifndef REPROD_CUDA_KERNEL_FIXED_H
#define REPROD_CUDA_KERNEL_FIXED_H

#include "engine/engine_fixed.h"
#include "engine/engine_inner.h"

#include <stddef.h>
#include <stdint.h>

#define REPROD_KERNEL_FIXED_NAME "reprod_fixed"

enum reprod_fixed_stage {
    REPROD_FIXED_CODES = 0,
    REPROD_FIXED_MAX_WORDS,
    REPROD_FIXED_SPLIT,
    REPROD_FIXED_ROUND,
    REPROD_FIXED_FULL_SPLIT,
    REPROD_FIXED_FULL_ROUND,
};

/* One launch's parameter, fixed-width fields only (gcc and nvcc lay it out alike). */
struct reprod_fixed_args {
    int32_t stage;     /* enum reprod_fixed_stage */
    int32_t type;      /* reprod_type */
    int32_t op;        /* REPROD_SUM or REPROD_AVG (ROUND, FULL_ROUND) */
    int32_t rounding;  /* reprod_rounding */
    int32_t ranks;     /* contributions N: the word width W = 63 - ceil(log2 N) */
    int32_t stride;    /* words an element in the words array (SPLIT, ROUND, FULL_*) */
    uint64_t elements; /* elements this launch covers */
    const void *terms; /* CODES, SPLIT, FULL_SPLIT: this rank's contribution (term_at) */
    uint8_t *codes;    /* 2 an element */
    int64_t *words;    /* stride an element */
    void *out;         /* ROUND, FULL_ROUND */
    int32_t *max_words;    /* two cells: CODES clears them, MAX_WORDS takes the maxima */
    uint64_t terms_block;  /* 0: the terms are contiguous; else they come in blocks of this */
    uint64_t terms_stride; /* many elements, block b at terms + b * terms_stride elements (a
                              ReduceScatter's piece: a block of each rank's part) */
    int32_t narrow;        /* MAX_WORDS: probe them; SPLIT, ROUND: int32 words (below) */
    int32_t unused;
};

#define REPROD_FIXED_ARGS_BYTES 96

/* Narrow words: int32 words of W = 31 - ceil(log2 N) bits, summed by the library as int32:
 * each word is below 2^W in magnitude, so no sum of N of them, nor any partial sum, leaves
 * int32. A piece takes K' of them an element where 4 K' bytes are fewer than its 8 K bytes of
 * int64 words: one for a 16-bit type's element within a few binades, three for a binary64
 * element where int64 words take two (up to 256 ranks). At most REPROD_FIXED_NARROW_MOST an
 * element. An infinity or NaN needs the int64 layout's counting word: an element with one,
 * like one that would take more narrow words than that, takes none
 * (REPROD_FIXED_NARROW_NONE), and so its piece takes int64 words. */
#define REPROD_FIXED_NARROW_MOST 8
#define REPROD_FIXED_NARROW_NONE 255
#define REPROD_FIXED_CELLS       2 /* max_words: the most int64 words, the most narrow ones */

/* 1 where the launch's words are narrow ones: the stages that read or write K's layout
 * (MAX_WORDS, SPLIT, ROUND); the one-pass stages always take int64 words. */
ENGINE_FUNCTION int reprod_fixed_narrow(const struct reprod_fixed_args *a)
{
    return a->narrow != 0 && (a->stage == REPROD_FIXED_MAX_WORDS ||
                              a->stage == REPROD_FIXED_SPLIT || a->stage == REPROD_FIXED_ROUND);
}

/* W of the narrow words: 31 - ceil(log2 N) (the int64 words' W less 32). */
ENGINE_FUNCTION int reprod_fixed_narrow_bits(int ranks)
{
    return engine_fixed_word_bits(ranks) - 32;
}

/* The narrow words element (hi, lo) takes (0 for zeros), or REPROD_FIXED_NARROW_NONE. */
ENGINE_FUNCTION int reprod_fixed_narrow_words(const struct engine_format *f, int ranks, unsigned hi,
                                              unsigned lo, reprod_rounding dir)
{
    if (hi == ENGINE_FIXED_HI_SPECIAL) return REPROD_FIXED_NARROW_NONE;
    int narrow = engine_fixed_element(f, reprod_fixed_narrow_bits(ranks), hi, lo, dir).words;
    return narrow <= REPROD_FIXED_NARROW_MOST ? narrow : REPROD_FIXED_NARROW_NONE;
}

/* The piece's layout from MAX_WORDS's two cells: 1 where it takes narrow words (their
 * stride in *stride), 0 for int64 words (*stride: the most int64 words, at least 1). The same
 * on every rank: the cells come from the reduced codes. */
ENGINE_FUNCTION int reprod_fixed_layout(const int32_t cells[REPROD_FIXED_CELLS], int probe,
                                        int *stride)
{
    int wide = cells[0] > 1 ? cells[0] : 1;
    int narrow = cells[1] > 1 ? cells[1] : 1;
    if (probe && cells[1] <= REPROD_FIXED_NARROW_MOST && 4 * narrow < 8 * wide) {
        *stride = narrow;
        return 1;
    }
    *stride = wide;
    return 0;
}

/* Where element i's term is in a->terms, in elements. */
ENGINE_FUNCTION size_t reprod_fixed_term_at(const struct reprod_fixed_args *a, uint64_t i)
{
    if (a->terms_block == 0) return (size_t)i;
    return (size_t)((i / a->terms_block) * a->terms_stride + i % a->terms_block);
}

/* The most words of the stage's elements into *cell. */
ENGINE_FUNCTION void reprod_fixed_note_words(int32_t *cell, int words)
{
#if defined(__CUDA_ARCH__)
    atomicMax((int *)cell, words);
#else
    if (words > *cell) *cell = words;
#endif
}

/* Run the stage for elements thread, thread + threads, ... */
ENGINE_FUNCTION void reprod_kernel_fixed(const struct reprod_fixed_args *a, uint64_t thread,
                                         uint64_t threads)
{
    const reprod_type type = (reprod_type)a->type;
    const struct engine_format f = engine_format_of(type);
    const reprod_rounding dir = (reprod_rounding)a->rounding;
    const int narrow = reprod_fixed_narrow(a);
    const int word_bits =
        narrow ? reprod_fixed_narrow_bits(a->ranks) : engine_fixed_word_bits(a->ranks);
    const uint64_t stride = (uint64_t)(a->stride > 0 ? a->stride : 1);
    int32_t *const narrow_words = (int32_t *)(void *)a->words;
    if (narrow && (a->stage == REPROD_FIXED_SPLIT || a->stage == REPROD_FIXED_ROUND) &&
        stride > REPROD_FIXED_NARROW_MOST)
        return; /* never: the host takes narrow words only where they are at most that many */
    if (a->stage == REPROD_FIXED_CODES && thread == 0) a->max_words[0] = 1, a->max_words[1] = 0;
    int most_wide = 0, most_narrow = 0;    /* MAX_WORDS: this thread's, noted once at the end */
    int64_t own[REPROD_FIXED_NARROW_MOST]; /* SPLIT, ROUND: an element's narrow words */
    for (uint64_t i = thread; i < a->elements; i += threads) {
        switch (a->stage) {
        case REPROD_FIXED_CODES:
            engine_fixed_codes(&f, engine_load_bits(type, a->terms, reprod_fixed_term_at(a, i)), &a->codes[2 * i],
                               &a->codes[2 * i + 1]);
            break;
        case REPROD_FIXED_MAX_WORDS: {
            int wide = engine_fixed_element(&f, engine_fixed_word_bits(a->ranks), a->codes[2 * i],
                                            a->codes[2 * i + 1], dir)
                           .words;
            int words = narrow ? reprod_fixed_narrow_words(&f, a->ranks, a->codes[2 * i],
                                                           a->codes[2 * i + 1], dir)
                               : 0;
            if (wide > most_wide) most_wide = wide;
            if (words > most_narrow) most_narrow = words;
            break;
        }
        case REPROD_FIXED_SPLIT: {
            struct engine_fixed_element e =
                engine_fixed_element(&f, word_bits, a->codes[2 * i], a->codes[2 * i + 1], dir);
            int64_t *w = narrow ? own : a->words + i * stride;
            for (uint64_t k = 0; k < stride; k++)
                w[k] = 0;
            if ((uint64_t)e.words <= stride) /* always, with the stride read back */
                engine_fixed_split(&f, engine_load_bits(type, a->terms, reprod_fixed_term_at(a, i)), word_bits,
                                   a->codes[2 * i], e, w);
            for (uint64_t k = 0; narrow && k < stride; k++)
                narrow_words[i * stride + k] = (int32_t)own[k]; /* below 2^W: exact */
            break;
        }
        case REPROD_FIXED_ROUND: {
            struct engine_fixed_element e =
                engine_fixed_element(&f, word_bits, a->codes[2 * i], a->codes[2 * i + 1], dir);
            for (uint64_t k = 0; narrow && k < stride; k++)
                own[k] = narrow_words[i * stride + k];
            engine_store_bits(type, a->out, (size_t)i,
                              engine_fixed_round(&f, narrow ? own : a->words + i * stride,
                                                 word_bits, a->codes[2 * i], e, (reprod_op)a->op,
                                                 a->ranks, dir));
            break;
        }
        case REPROD_FIXED_FULL_SPLIT:
            engine_fixed_full_split(&f, engine_load_bits(type, a->terms, reprod_fixed_term_at(a, i)), word_bits,
                                    engine_fixed_full_element(&f, word_bits),
                                    a->words + i * stride);
            break;
        case REPROD_FIXED_FULL_ROUND:
            engine_store_bits(type, a->out, (size_t)i,
                              engine_fixed_full_round(&f, a->words + i * stride, word_bits,
                                                      engine_fixed_full_element(&f, word_bits),
                                                      (reprod_op)a->op, a->ranks, dir));
            break;
        default:
            return;
        }
    }
    if (a->stage == REPROD_FIXED_MAX_WORDS && thread < a->elements) { /* one atomic a cell */
        reprod_fixed_note_words(&a->max_words[0], most_wide);
        if (narrow) reprod_fixed_note_words(&a->max_words[1], most_narrow);
    }
}

#endif /* REPROD_CUDA_KERNEL_FIXED_H */
