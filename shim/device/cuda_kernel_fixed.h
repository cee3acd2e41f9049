/* cuda_kernel_fixed.h: the body of the fixed-point route's kernel (engine_fixed.h's arithmetic
 * over arrays), as plain C that gcc and nvcc both compile: shim/device/cuda_kernels.cu runs it
 * on the GPU, cuda_host.c and the stand-in libcuda on the CPU; tests/gpu/check_kernels.c checks
 * it against the host engine's arrays (reprod_engine_fixed_*), tests/unit/test_cuda_kernel.c
 * the narrow words against MPFR. One launch runs one stage over `elements` elements:
 *
 *   CODES      terms -> codes (2 bytes an element); thread 0 also clears max_words[0 .. 1]
 *              for the MAX_WORDS stage that follows the reduction
 *   PACK       codes -> the wire in `out` (engine_fixed_pack_block: a hi an element, a lo a
 *              block of engine_fixed_lo_block; engine_fixed_packed_bytes), reduced by the
 *              library's MAX; a thread a block
 *   UNPACK     the reduced wire in `out` -> the reduced codes; a thread a block
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
 * The per-element layout (AllReduce, Reduce): every element takes its own K words, laid one
 * after another, so a piece's words follow its typical element rather than its widest. After
 * the codes' MAX, four launches lay them out; `layout` holds the piece's blocks (of
 * REPROD_FIXED_BLOCK elements), groups (of REPROD_FIXED_GROUP blocks) and side slots:
 *
 *   LAYOUT     reduced codes -> each block's words in both units (int64; narrow, with `narrow`
 *              set), and max_words[0 .. 1] as MAX_WORDS writes them
 *   GROUPS     blocks' words -> each group's, in both units
 *   TOTAL      one thread: the groups' totals -> the unit (narrow where they take fewer bytes),
 *              max_words[2 .. 4] (the unit, the total T in it), each group's first word
 *   OFFSETS    each block's first word, in the unit
 *   SPLIT, ROUND with `layout` set: the words [word_first, word_end) of the T, a sub-piece
 *              (summed by the library in one call); `words` holds exactly those. An element
 *              whose words straddle word_end leaves its summed words so far in a carry, which
 *              the next sub-piece's ROUND completes (two carries, by the sub-piece's parity)
 *
 * Every element (per-element layout: every block) is independent (no shared memory, no
 * barrier) except MAX_WORDS's and LAYOUT's maxima: each thread's own over its elements, then
 * one atomic a cell on the device (a plain maximum where the threads run one after the
 * other), and the straddler's carry, which one launch writes and a later one reads.
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
    REPROD_FIXED_LAYOUT,
    REPROD_FIXED_GROUPS,
    REPROD_FIXED_TOTAL,
    REPROD_FIXED_OFFSETS,
    REPROD_FIXED_PACK,
    REPROD_FIXED_UNPACK,
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
    void *out;         /* ROUND, FULL_ROUND; PACK, UNPACK: the wire */
    int32_t *max_words;    /* two cells: CODES clears them, MAX_WORDS takes the maxima */
    uint64_t terms_block;  /* 0: the terms are contiguous; else they come in blocks of this */
    uint64_t terms_stride; /* many elements, block b at terms + b * terms_stride elements (a
                              ReduceScatter's piece: a block of each rank's part) */
    int32_t narrow;        /* MAX_WORDS, LAYOUT, TOTAL: probe them; SPLIT, ROUND: int32 words
                              (below) */
    int32_t sub;           /* SPLIT, ROUND with `layout`: the sub-piece's index (its carry) */
    uint64_t *layout;      /* the per-element layout's blocks, groups and side slots (NULL: the
                              stride layout) */
    uint64_t word_first;   /* SPLIT, ROUND with `layout`: the sub-piece's words, [first, end) */
    uint64_t word_end;     /* of the piece's word_total */
    uint64_t word_total;
};

#define REPROD_FIXED_ARGS_BYTES 128

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

/* max_words's cells, read back by the host in one copy. */
#define REPROD_FIXED_CELL_WIDE       0 /* the most int64 words an element takes (at least 1) */
#define REPROD_FIXED_CELL_NARROW     1 /* the most narrow words, or REPROD_FIXED_NARROW_NONE */
#define REPROD_FIXED_CELL_UNIT       2 /* per-element layout: 1 for narrow words, 0 for int64 */
#define REPROD_FIXED_CELL_TOTAL_LOW  3 /* per-element layout: the piece's words T in that unit */
#define REPROD_FIXED_CELL_TOTAL_HIGH 4
#define REPROD_FIXED_CELLS           5

/* The per-element layout's arrays in `layout`, uint64 each: a block's words (int64 ones in the
 * low 32 bits, narrow ones in the high: at most 16 x 54), then its first word; a group's two
 * sums, then its first word in the first; four side slots of ENGINE_FIXED_MAX_WORDS int64:
 * the two carries, then two for a straddler's split. */
#define REPROD_FIXED_BLOCK 16   /* elements a block: a thread's, in series */
#define REPROD_FIXED_GROUP 1024 /* blocks a group */
#define REPROD_FIXED_SIDE  (4 * ENGINE_FIXED_MAX_WORDS)

/* 1 where the launch's words are narrow ones: the stages that read or write K's layout
 * (MAX_WORDS, SPLIT, ROUND); the one-pass stages always take int64 words. */
ENGINE_FUNCTION int reprod_fixed_narrow(const struct reprod_fixed_args *a)
{
    return a->narrow != 0 && (a->stage == REPROD_FIXED_MAX_WORDS ||
                              a->stage == REPROD_FIXED_SPLIT || a->stage == REPROD_FIXED_ROUND ||
                              a->stage == REPROD_FIXED_LAYOUT || a->stage == REPROD_FIXED_TOTAL);
}

/* The per-element layout's blocks and groups for a piece of `elements` elements, and the
 * uint64 its `layout` array holds. */
ENGINE_FUNCTION uint64_t reprod_fixed_blocks(uint64_t elements)
{
    return (elements + REPROD_FIXED_BLOCK - 1) / REPROD_FIXED_BLOCK;
}

ENGINE_FUNCTION uint64_t reprod_fixed_groups(uint64_t elements)
{
    return (reprod_fixed_blocks(elements) + REPROD_FIXED_GROUP - 1) / REPROD_FIXED_GROUP;
}

ENGINE_FUNCTION uint64_t reprod_fixed_layout_size(uint64_t elements)
{
    return reprod_fixed_blocks(elements) + 2 * reprod_fixed_groups(elements) + REPROD_FIXED_SIDE;
}

/* The threads a launch has work for: a block or a group each where the stage walks those. */
ENGINE_FUNCTION uint64_t reprod_fixed_threads(const struct reprod_fixed_args *a)
{
    switch (a->stage) {
    case REPROD_FIXED_LAYOUT:
        return reprod_fixed_blocks(a->elements);
    case REPROD_FIXED_GROUPS:
    case REPROD_FIXED_OFFSETS:
        return reprod_fixed_groups(a->elements);
    case REPROD_FIXED_TOTAL:
        return 1;
    case REPROD_FIXED_PACK:
    case REPROD_FIXED_UNPACK: {
        const struct engine_format f = engine_format_of((reprod_type)a->type);
        return engine_fixed_packed_bytes(&f, a->elements) - a->elements; /* its blocks */
    }
    case REPROD_FIXED_SPLIT:
    case REPROD_FIXED_ROUND:
        return a->layout ? reprod_fixed_blocks(a->elements) : a->elements;
    default:
        return a->elements;
    }
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
/* The one rule of both layouts: narrow words where the probe ran, every element has them (the
 * most any takes, `most_narrow`, at most REPROD_FIXED_NARROW_MOST), and `narrow` of them take
 * fewer bytes than `wide` int64 words (an element's for the stride, the piece's for the
 * per-element layout). */
ENGINE_FUNCTION int reprod_fixed_fewer_narrow(int probe, int32_t most_narrow, uint64_t narrow,
                                              uint64_t wide)
{
    return probe && most_narrow <= REPROD_FIXED_NARROW_MOST && 4 * narrow < 8 * wide;
}

ENGINE_FUNCTION int reprod_fixed_layout(const int32_t cells[REPROD_FIXED_CELLS], int probe,
                                        int *stride)
{
    int wide = cells[0] > 1 ? cells[0] : 1;
    int narrow = cells[1] > 1 ? cells[1] : 1;
    if (reprod_fixed_fewer_narrow(probe, cells[1], (uint64_t)narrow, (uint64_t)wide)) {
        *stride = narrow;
        return 1;
    }
    *stride = wide;
    return 0;
}

/* The per-element layout's unit from TOTAL's cells (1: narrow words) and its total T. */
ENGINE_FUNCTION uint64_t reprod_fixed_total(const int32_t cells[REPROD_FIXED_CELLS], int *narrow)
{
    *narrow = cells[REPROD_FIXED_CELL_UNIT] != 0;
    return (uint64_t)(uint32_t)cells[REPROD_FIXED_CELL_TOTAL_LOW] |
           (uint64_t)(uint32_t)cells[REPROD_FIXED_CELL_TOTAL_HIGH] << 32;
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

/* Element i's words from its reduced codes: int64 ones in *wide, and where `probe` narrow ones
 * (or REPROD_FIXED_NARROW_NONE) in *narrow, else 0: what MAX_WORDS and LAYOUT count. */
ENGINE_FUNCTION void reprod_fixed_element_words(const struct reprod_fixed_args *a,
                                                const struct engine_format *f, uint64_t i,
                                                int probe, int *wide, int *narrow)
{
    const unsigned hi = a->codes[2 * i], lo = a->codes[2 * i + 1];
    const reprod_rounding dir = (reprod_rounding)a->rounding;
    *wide = engine_fixed_element(f, engine_fixed_word_bits(a->ranks), hi, lo, dir).words;
    *narrow = probe ? reprod_fixed_narrow_words(f, a->ranks, hi, lo, dir) : 0;
}

/* ---- The per-element layout ------------------------------------------------------------- */

/* LAYOUT for block b: its words in both units, and the thread's maxima. */
ENGINE_FUNCTION void reprod_fixed_layout_block(const struct reprod_fixed_args *a,
                                               const struct engine_format *f, uint64_t b,
                                               int *most_wide, int *most_narrow)
{
    const int probe = reprod_fixed_narrow(a);
    uint64_t end = (b + 1) * REPROD_FIXED_BLOCK;
    if (end > a->elements) end = a->elements;
    uint32_t wide_words = 0, narrow_words = 0;
    for (uint64_t i = b * REPROD_FIXED_BLOCK; i < end; i++) {
        int wide, narrow;
        reprod_fixed_element_words(a, f, i, probe, &wide, &narrow);
        if (wide > *most_wide) *most_wide = wide;
        if (narrow > *most_narrow) *most_narrow = narrow;
        wide_words += (uint32_t)wide;
        narrow_words += narrow <= REPROD_FIXED_NARROW_MOST ? (uint32_t)narrow : 0;
    }
    a->layout[b] = (uint64_t)wide_words | (uint64_t)narrow_words << 32;
}

/* GROUPS for group g: the sums of its blocks' words, int64 ones then narrow ones. */
ENGINE_FUNCTION void reprod_fixed_group_sums(const struct reprod_fixed_args *a, uint64_t g)
{
    const uint64_t blocks = reprod_fixed_blocks(a->elements);
    uint64_t *group = a->layout + blocks + 2 * g;
    uint64_t end = (g + 1) * REPROD_FIXED_GROUP, wide = 0, narrow = 0;
    for (uint64_t b = g * REPROD_FIXED_GROUP; b < end && b < blocks; b++) {
        wide += a->layout[b] & 0xffffffffu;
        narrow += a->layout[b] >> 32;
    }
    group[0] = wide, group[1] = narrow;
}

/* TOTAL (one thread): the unit, T, and each group's first word in the unit. Narrow words where
 * the probe ran, no element lacks them, and they take fewer bytes than int64 ones. */
ENGINE_FUNCTION void reprod_fixed_take_total(const struct reprod_fixed_args *a)
{
    const uint64_t blocks = reprod_fixed_blocks(a->elements);
    const uint64_t groups = reprod_fixed_groups(a->elements);
    uint64_t *group = a->layout + blocks;
    uint64_t wide = 0, narrow = 0;
    for (uint64_t g = 0; g < groups; g++)
        wide += group[2 * g], narrow += group[2 * g + 1];
    int unit = reprod_fixed_fewer_narrow(reprod_fixed_narrow(a),
                                         a->max_words[REPROD_FIXED_CELL_NARROW], narrow, wide);
    uint64_t first = 0;
    for (uint64_t g = 0; g < groups; g++) {
        uint64_t words = group[2 * g + unit];
        group[2 * g] = first;
        first += words;
    }
    a->max_words[REPROD_FIXED_CELL_UNIT] = unit;
    a->max_words[REPROD_FIXED_CELL_TOTAL_LOW] = (int32_t)(uint32_t)first;
    a->max_words[REPROD_FIXED_CELL_TOTAL_HIGH] = (int32_t)(uint32_t)(first >> 32);
}

/* OFFSETS for group g: each of its blocks' first word, in TOTAL's unit. */
ENGINE_FUNCTION void reprod_fixed_block_offsets(const struct reprod_fixed_args *a, uint64_t g)
{
    const uint64_t blocks = reprod_fixed_blocks(a->elements);
    const int unit = a->max_words[REPROD_FIXED_CELL_UNIT] != 0;
    uint64_t first = a->layout[blocks + 2 * g];
    uint64_t end = (g + 1) * REPROD_FIXED_GROUP;
    for (uint64_t b = g * REPROD_FIXED_GROUP; b < end && b < blocks; b++) {
        uint64_t words = unit ? a->layout[b] >> 32 : a->layout[b] & 0xffffffffu;
        a->layout[b] = first;
        first += words;
    }
}

/* Word w of the sub-piece's summed words (int32 narrow ones or int64), as int64. */
ENGINE_FUNCTION int64_t reprod_fixed_word(const struct reprod_fixed_args *a, int narrow, uint64_t w)
{
    return narrow ? ((const int32_t *)(const void *)a->words)[w - a->word_first]
                  : a->words[w - a->word_first];
}

/* SPLIT or ROUND of block b's elements whose words lie (in part) in [word_first, word_end). */
ENGINE_FUNCTION void reprod_fixed_block_range(const struct reprod_fixed_args *a,
                                              const struct engine_format *f, uint64_t b,
                                              int64_t own[REPROD_FIXED_NARROW_MOST])
{
    const reprod_type type = (reprod_type)a->type;
    const reprod_rounding dir = (reprod_rounding)a->rounding;
    const int narrow = a->narrow != 0;
    const int word_bits =
        narrow ? reprod_fixed_narrow_bits(a->ranks) : engine_fixed_word_bits(a->ranks);
    const uint64_t w0 = a->word_first, w1 = a->word_end;
    const uint64_t blocks = reprod_fixed_blocks(a->elements);
    if (w1 < w0 || w1 > a->word_total || (w1 - w0 < ENGINE_FIXED_MAX_WORDS && w1 < a->word_total))
        return; /* never: a sub-piece but the last holds an element's words at the most */
    uint64_t o = a->layout[b]; /* the element's first word */
    uint64_t block_end = b + 1 < blocks ? a->layout[b + 1] : a->word_total;
    if (block_end < w0 || o > w1) return; /* nothing of this block here */
    int64_t *side = (int64_t *)(void *)(a->layout + blocks + 2 * reprod_fixed_groups(a->elements));
    uint64_t end = (b + 1) * REPROD_FIXED_BLOCK;
    if (end > a->elements) end = a->elements;
    for (uint64_t i = b * REPROD_FIXED_BLOCK; i < end; i++) {
        const unsigned hi = a->codes[2 * i], lo = a->codes[2 * i + 1];
        struct engine_fixed_element e = engine_fixed_element(f, word_bits, hi, lo, dir);
        const uint64_t first = o, last = o + (uint64_t)e.words; /* [first, last) */
        o = last;
        if (e.words > ENGINE_FIXED_MAX_WORDS || (narrow && e.words > REPROD_FIXED_NARROW_MOST))
            return; /* never: TOTAL takes narrow words only where every element has them */
        if (a->stage == REPROD_FIXED_SPLIT) {
            if (e.words == 0 || last <= w0 || first >= w1) continue;
            /* Straight into the words; else a narrow element's own array, or a wide
             * straddler's side slot: one for the element that began before w0, one for the
             * one that goes on past w1 (two threads of one launch: one slot would race, which
             * only a GPU could show). */
            int direct = !narrow && first >= w0 && last <= w1;
            int64_t *all = direct   ? a->words + (first - w0)
                           : narrow ? own
                                    : side + (first < w0 ? 2 : 3) * ENGINE_FIXED_MAX_WORDS;
            for (int k = 0; k < e.words; k++)
                all[k] = 0;
            engine_fixed_split(f, engine_load_bits(type, a->terms, reprod_fixed_term_at(a, i)),
                               word_bits, hi, e, all);
            if (direct) continue;
            for (uint64_t w = first > w0 ? first : w0; w < last && w < w1; w++) {
                if (narrow)
                    ((int32_t *)(void *)a->words)[w - w0] = (int32_t)all[w - first];
                else
                    a->words[w - w0] = all[w - first];
            }
            continue;
        }
        /* ROUND: the elements that end here; a zero-word one where its offset lies, or in the
         * last sub-piece where that is T. */
        const int64_t *sums = own;
        if (e.words == 0) {
            if (!((first >= w0 && first < w1) || (first == a->word_total && w1 == a->word_total)))
                continue;
        } else if (last <= w0 || first >= w1) {
            continue;
        } else if (last > w1) { /* it goes on in the next sub-piece: keep its words so far */
            int64_t *carry = side + (a->sub % 2) * ENGINE_FIXED_MAX_WORDS;
            for (uint64_t w = first; w < w1; w++)
                carry[w - first] = reprod_fixed_word(a, narrow, w);
            continue;
        } else if (first < w0) { /* it began in the previous sub-piece: complete its carry */
            int64_t *carry = side + ((a->sub + 1) % 2) * ENGINE_FIXED_MAX_WORDS;
            for (uint64_t w = w0; w < last; w++)
                carry[w - first] = reprod_fixed_word(a, narrow, w);
            sums = carry;
        } else if (narrow) {
            for (uint64_t w = first; w < last; w++)
                own[w - first] = reprod_fixed_word(a, narrow, w);
        } else {
            sums = a->words + (first - w0);
        }
        engine_store_bits(
            type, a->out, (size_t)i,
            engine_fixed_round(f, sums, word_bits, hi, e, (reprod_op)a->op, a->ranks, dir));
    }
}

/* A per-element layout's stage for thread, thread + threads, ... (of its blocks or groups). */
ENGINE_FUNCTION void reprod_kernel_fixed_layout(const struct reprod_fixed_args *a, uint64_t thread,
                                                uint64_t threads)
{
    const struct engine_format f = engine_format_of((reprod_type)a->type);
    const uint64_t work = reprod_fixed_threads(a);
    int most_wide = 0, most_narrow = 0;    /* LAYOUT: this thread's, noted once at the end */
    int64_t own[REPROD_FIXED_NARROW_MOST]; /* SPLIT, ROUND: an element's narrow words */
    for (uint64_t u = thread; u < work; u += threads) {
        switch (a->stage) {
        case REPROD_FIXED_LAYOUT:
            reprod_fixed_layout_block(a, &f, u, &most_wide, &most_narrow);
            break;
        case REPROD_FIXED_GROUPS:
            reprod_fixed_group_sums(a, u);
            break;
        case REPROD_FIXED_TOTAL:
            reprod_fixed_take_total(a);
            break;
        case REPROD_FIXED_OFFSETS:
            reprod_fixed_block_offsets(a, u);
            break;
        case REPROD_FIXED_PACK:
        case REPROD_FIXED_UNPACK: {
            uint64_t block = (uint64_t)engine_fixed_lo_block(&f);
            uint64_t first = u * block, left = a->elements - first;
            int n = (int)(left < block ? left : block);
            uint8_t *wire = (uint8_t *)a->out;
            if (a->stage == REPROD_FIXED_PACK)
                engine_fixed_pack_block(a->codes + 2 * first, n, (reprod_rounding)a->rounding,
                                        wire + first, wire + a->elements + u);
            else
                engine_fixed_unpack_block(wire + first, wire[a->elements + u], n,
                                          (reprod_rounding)a->rounding, a->codes + 2 * first);
            break;
        }
        default:
            reprod_fixed_block_range(a, &f, u, own);
            break;
        }
    }
    if (a->stage == REPROD_FIXED_LAYOUT && thread < work) { /* one atomic a cell */
        reprod_fixed_note_words(&a->max_words[REPROD_FIXED_CELL_WIDE], most_wide);
        if (reprod_fixed_narrow(a))
            reprod_fixed_note_words(&a->max_words[REPROD_FIXED_CELL_NARROW], most_narrow);
    }
}

/* Run the stage for elements thread, thread + threads, ... */
ENGINE_FUNCTION void reprod_kernel_fixed(const struct reprod_fixed_args *a, uint64_t thread,
                                         uint64_t threads)
{
    if (a->stage >= REPROD_FIXED_LAYOUT ||
        (a->layout && (a->stage == REPROD_FIXED_SPLIT || a->stage == REPROD_FIXED_ROUND))) {
        reprod_kernel_fixed_layout(a, thread, threads);
        return;
    }
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
    if (a->stage == REPROD_FIXED_CODES && thread == 0) {
        for (int c = 0; c < REPROD_FIXED_CELLS; c++)
            a->max_words[c] = 0;
        a->max_words[REPROD_FIXED_CELL_WIDE] = 1;
    }
    int most_wide = 0, most_narrow = 0;    /* MAX_WORDS: this thread's, noted once at the end */
    int64_t own[REPROD_FIXED_NARROW_MOST]; /* SPLIT, ROUND: an element's narrow words */
    for (uint64_t i = thread; i < a->elements; i += threads) {
        switch (a->stage) {
        case REPROD_FIXED_CODES:
            engine_fixed_codes(&f, engine_load_bits(type, a->terms, reprod_fixed_term_at(a, i)), &a->codes[2 * i],
                               &a->codes[2 * i + 1]);
            break;
        case REPROD_FIXED_MAX_WORDS: {
            int wide, words;
            reprod_fixed_element_words(a, &f, i, narrow, &wide, &words);
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
