/* engine_fixed.c: the fixed-point route on host arrays (engine_fixed.h does one element).
 *
 * The data paths call these around the library's own reductions: codes (pass 1, reduced with
 * MAX), layout and split (pass 2, reduced with an int64 SUM), round. Every rank computes the
 * same layout from the same reduced codes, so the int64 buffers line up word for word.
 */
#include "engine/engine.h"

#define ENGINE_FUNCTION static inline
#include "engine/engine_fixed.h"

#include <string.h>

/* The bit pattern of element i of an array of `type`. */
static uint64_t load_bits(reprod_type type, const void *array, size_t i)
{
    switch (type) {
    case REPROD_FLOAT16:
    case REPROD_BFLOAT16: {
        uint16_t v;
        memcpy(&v, (const char *)array + 2 * i, 2);
        return v;
    }
    case REPROD_FLOAT32: {
        uint32_t v;
        memcpy(&v, (const char *)array + 4 * i, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, (const char *)array + 8 * i, 8);
        return v;
    }
    }
}

static void store_bits(reprod_type type, void *array, size_t i, uint64_t bits)
{
    size_t size = reprod_type_size(type);
    if (size == 2) {
        uint16_t v = (uint16_t)bits;
        memcpy((char *)array + 2 * i, &v, 2);
    } else if (size == 4) {
        uint32_t v = (uint32_t)bits;
        memcpy((char *)array + 4 * i, &v, 4);
    } else {
        memcpy((char *)array + 8 * i, &bits, 8);
    }
}

int reprod_engine_fixed_supported(reprod_type type, int ranks)
{
    return reprod_type_size(type) != 0 && ranks >= 1 && ranks <= ENGINE_FIXED_MAX_RANKS;
}

void reprod_engine_fixed_codes(reprod_type type, const void *terms, size_t count, uint8_t *codes)
{
    struct engine_format f = engine_format_of(type);
    for (size_t i = 0; i < count; i++)
        engine_fixed_codes(&f, load_bits(type, terms, i), &codes[2 * i], &codes[2 * i + 1]);
}

size_t reprod_engine_fixed_layout(reprod_type type, int ranks, reprod_rounding dir,
                                  const uint8_t *codes, size_t count, size_t *offsets)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        if (offsets) offsets[i] = total;
        total += (size_t)engine_fixed_element(&f, word_bits, codes[2 * i], codes[2 * i + 1], dir)
                     .words;
    }
    if (offsets) offsets[count] = total;
    return total;
}

void reprod_engine_fixed_split(reprod_type type, int ranks, reprod_rounding dir, const void *terms,
                               const uint8_t *codes, size_t count, const size_t *offsets,
                               int64_t *words)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    for (size_t i = 0; i < count; i++) {
        struct engine_fixed_element e =
            engine_fixed_element(&f, word_bits, codes[2 * i], codes[2 * i + 1], dir);
        engine_fixed_split(&f, load_bits(type, terms, i), word_bits, codes[2 * i], e,
                           words + offsets[i]);
    }
}

void reprod_engine_fixed_round(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                               const uint8_t *codes, size_t count, const size_t *offsets,
                               const int64_t *sums, void *result)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    for (size_t i = 0; i < count; i++) {
        struct engine_fixed_element e =
            engine_fixed_element(&f, word_bits, codes[2 * i], codes[2 * i + 1], dir);
        store_bits(type, result, i,
                   engine_fixed_round(&f, sums + offsets[i], word_bits, codes[2 * i], e, op,
                                      ranks, dir));
    }
}

int reprod_engine_fixed_full_words(reprod_type type, int ranks)
{
    struct engine_format f = engine_format_of(type);
    return engine_fixed_full_element(&f, engine_fixed_word_bits(ranks)).words;
}

void reprod_engine_fixed_full_split(reprod_type type, int ranks, const void *terms, size_t count,
                                    int64_t *words)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    struct engine_fixed_element e = engine_fixed_full_element(&f, word_bits);
    for (size_t i = 0; i < count; i++)
        engine_fixed_full_split(&f, load_bits(type, terms, i), word_bits, e,
                                words + i * (size_t)e.words);
}

void reprod_engine_fixed_full_round(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                                    size_t count, const int64_t *sums, void *result)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    struct engine_fixed_element e = engine_fixed_full_element(&f, word_bits);
    for (size_t i = 0; i < count; i++)
        store_bits(type, result, i,
                   engine_fixed_full_round(&f, sums + i * (size_t)e.words, word_bits, e, op,
                                           ranks, dir));
}

void reprod_engine_fixed_full_round_prefix(reprod_type type, int ranks, int terms,
                                           reprod_rounding dir, size_t count, const int64_t *sums,
                                           void *result)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    struct engine_fixed_element e = engine_fixed_full_element(&f, word_bits);
    for (size_t i = 0; i < count; i++)
        store_bits(type, result, i,
                   engine_fixed_full_round_terms(&f, sums + i * (size_t)e.words, word_bits, e,
                                                 REPROD_SUM, terms, dir));
}
