/* engine_fixed.c: the fixed-point route on host arrays (engine_fixed.h does one element).
 *
 * The MPI data path calls these around the library's own reductions: codes (pass 1, reduced
 * with MAX), fit and split (pass 2, the packed words, reduced with an int64 SUM), round; and the
 * one-pass form. Every rank derives the same fields from the same reduced codes, so the int64
 * buffers line up word for word.
 */
#include "engine/engine.h"

#define ENGINE_FUNCTION static inline __attribute__((always_inline))
#include "engine/engine_fixed.h"

#include <stdint.h>
#include <string.h>

/* Run `call` with `type` a constant, so that each loop is compiled once per type with the
 * format's fields folded in. */
#define FOR_EACH_TYPE(type, call)                                                                  \
    switch (type) {                                                                                \
    case REPROD_FLOAT16: call(REPROD_FLOAT16); break;                                              \
    case REPROD_BFLOAT16: call(REPROD_BFLOAT16); break;                                            \
    case REPROD_FLOAT32: call(REPROD_FLOAT32); break;                                              \
    default: call(REPROD_FLOAT64); break;                                                          \
    }

/* The bit pattern of element i of an array of `type`. */
static inline __attribute__((always_inline)) uint64_t load_bits(reprod_type type, const void *array, size_t i)
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

static inline __attribute__((always_inline)) void store_bits(reprod_type type, void *array,
                                                             size_t i, uint64_t bits)
{
    switch (type) {
    case REPROD_FLOAT16:
    case REPROD_BFLOAT16: {
        uint16_t v = (uint16_t)bits;
        memcpy((char *)array + 2 * i, &v, 2);
        break;
    }
    case REPROD_FLOAT32: {
        uint32_t v = (uint32_t)bits;
        memcpy((char *)array + 4 * i, &v, 4);
        break;
    }
    default: memcpy((char *)array + 8 * i, &bits, 8); break;
    }
}

int reprod_engine_fixed_supported(reprod_type type, int ranks)
{
    return reprod_type_size(type) != 0 && ranks >= 1 && ranks <= ENGINE_FIXED_MAX_RANKS;
}

/* Each loop below is a body on a constant type (inlined), instantiated by FOR_EACH_TYPE. */

#define FIXED_INLINE static inline __attribute__((always_inline))

FIXED_INLINE void codes_body(reprod_type type, const void *terms, size_t count, uint8_t *codes)
{
    struct engine_format f = engine_format_of(type);
    for (size_t i = 0; i < count; i++)
        engine_fixed_codes(&f, load_bits(type, terms, i), &codes[2 * i], &codes[2 * i + 1]);
}

void reprod_engine_fixed_codes(reprod_type type, const void *terms, size_t count, uint8_t *codes)
{
#define CODES(t) codes_body(t, terms, count, codes)
    FOR_EACH_TYPE(type, CODES)
#undef CODES
}

#if defined(__x86_64__)
/* MXCSR: exceptions masked, no flush to zero, the rounding control of `dir`; returns the
 * caller's, for mxcsr_leave. */
static unsigned mxcsr_enter(reprod_rounding dir)
{
    static const unsigned control[] = {0x1f80u, 0x7f80u, 0x5f80u, 0x3f80u}; /* near, zero, up, down */
    unsigned saved = 0, wanted = control[dir];
    __asm__ volatile("stmxcsr %0" : "=m"(saved) : : "memory");
    __asm__ volatile("ldmxcsr %0" : : "m"(wanted) : "memory");
    return saved;
}

static void mxcsr_leave(unsigned saved)
{
    __asm__ volatile("ldmxcsr %0" : : "m"(saved) : "memory");
}

/* The bits of sum * 2^base (|sum| <= 2^53, base >= -149) rounded once to binary32 under
 * mxcsr_enter's direction; `zero` for a sum of 0. */
FIXED_INLINE uint32_t float32_of_scaled(int64_t sum, int32_t base, uint32_t zero)
{
    double scale = engine_double_from_bits((uint64_t)(base + 1023) << 52);
    uint32_t bits = engine_float_bits((float)((double)sum * scale));
    return sum == 0 ? zero : bits;
}

#endif

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

/* ---- Pass 2 packed (engine_fixed.h: the fields of one bit stream) -------------------------- */

int reprod_engine_fixed_digit_bits(int ranks)
{
    return engine_fixed_word_bits(ranks);
}

/* The elements from the first whose fields fit `max_words` words (at least one, at most
 * count), and in *words the words they take. */
FIXED_INLINE size_t packed_fit_body(reprod_type type, int ranks, const uint8_t *codes, size_t count,
                                    size_t max_words, size_t *words)
{
    struct engine_format f = engine_format_of(type);
    int digit_bits = engine_fixed_word_bits(ranks);
    size_t at = 0, room = max_words > SIZE_MAX / 64 ? SIZE_MAX : max_words * (size_t)digit_bits;
    size_t i = 0;
    for (; i < count; i++) {
        size_t bits =
            (size_t)engine_fixed_packed_field(&f, digit_bits, codes[2 * i], codes[2 * i + 1]).bits;
        if (i > 0 && at + bits > room) break;
        at += bits;
    }
    *words = (at + (size_t)digit_bits - 1) / (size_t)digit_bits;
    return i;
}

size_t reprod_engine_fixed_packed_fit(reprod_type type, int ranks, const uint8_t *codes,
                                      size_t count, size_t max_words, size_t *words)
{
    size_t taken = 0;
#define FIT(t) taken = packed_fit_body(t, ranks, codes, count, max_words, words)
    FOR_EACH_TYPE(type, FIT)
#undef FIT
    return taken;
}

size_t reprod_engine_fixed_packed_words(reprod_type type, int ranks, const uint8_t *codes,
                                        size_t count)
{
    size_t words = 0;
    reprod_engine_fixed_packed_fit(type, ranks, codes, count, SIZE_MAX, &words);
    return words;
}

FIXED_INLINE void packed_split_body(reprod_type type, int ranks, const void *terms,
                                    const uint8_t *codes, size_t count, size_t n, int64_t *words)
{
    struct engine_format f = engine_format_of(type);
    int digit_bits = engine_fixed_word_bits(ranks);
    uint64_t *digits = (uint64_t *)words;
    memset(digits, 0, n * sizeof *digits);
    struct engine_fixed_at at = {0, 0};
    for (size_t i = 0; i < count; i++) {
        unsigned hi = codes[2 * i];
        struct engine_fixed_field e =
            engine_fixed_packed_field(&f, digit_bits, hi, codes[2 * i + 1]);
        if (e.bits)
            engine_fixed_packed_split(&f, load_bits(type, terms, i), hi, e, digits, digit_bits, at);
        at = engine_fixed_after(at, digit_bits, (uint64_t)e.bits);
    }
}

void reprod_engine_fixed_packed_split(reprod_type type, int ranks, const void *terms,
                                      const uint8_t *codes, size_t count, size_t n, int64_t *words){
#define SPLIT(t) packed_split_body(t, ranks, terms, codes, count, n, words)
    FOR_EACH_TYPE(type, SPLIT)
#undef SPLIT
}

FIXED_INLINE void packed_round_body(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                                    const uint8_t *codes, size_t count, size_t n, int64_t *sums,
                                    void *result)
{
    struct engine_format f = engine_format_of(type);
    int digit_bits = engine_fixed_word_bits(ranks);
    uint64_t *digits = (uint64_t *)sums, mask = (1ull << digit_bits) - 1, carry = 0;
    for (size_t j = 0; j < n; j++) { /* each sum below 2^63, each carry below N */
        uint64_t t = digits[j] + carry;
        digits[j] = t & mask;
        carry = t >> digit_bits;
    }
    struct engine_fixed_at at = {0, 0};
#if defined(__x86_64__)
    /* Binary32 sums: a field of at most 63 bits whose sum is below 2^53 converts to binary64
     * exactly and is scaled by 2^B exactly; the hardware's conversion to binary32 in the
     * requested direction (MXCSR) is then the one rounding (as round_float32_block). */
    int fast = type == REPROD_FLOAT32 && (op == REPROD_SUM || ranks == 1);
    unsigned saved = fast ? mxcsr_enter(dir) : 0;
    uint32_t zero = dir == REPROD_ROUND_DOWN ? 0x80000000u : 0; /* an exactly zero sum */
#endif
    for (size_t i = 0; i < count; i++) {
        unsigned hi = codes[2 * i];
        struct engine_fixed_field e =
            engine_fixed_packed_field(&f, digit_bits, hi, codes[2 * i + 1]);
#if defined(__x86_64__)
        if (fast && hi >= ENGINE_FIXED_FIRST_BUCKET && hi != ENGINE_FIXED_HI_SPECIAL &&
            e.bits <= 63) {
            uint64_t field = engine_fixed_stream_get(digits, digit_bits, at, e.bits);
            int64_t sum = (int64_t)(field - ((uint64_t)ranks << e.span));
            if ((uint64_t)(sum + (1ll << 53)) <= (1ull << 54)) {
                uint32_t bits = float32_of_scaled(sum, e.base_exponent, zero);
                memcpy((char *)result + 4 * i, &bits, 4);
                at = engine_fixed_after(at, digit_bits, (uint64_t)e.bits);
                continue;
            }
        }
#endif
        store_bits(type, result, i,
                   engine_fixed_packed_round(&f, digits, digit_bits, at, hi, e, op, ranks, dir));
        at = engine_fixed_after(at, digit_bits, (uint64_t)e.bits);
    }
#if defined(__x86_64__)
    if (fast) mxcsr_leave(saved);
#endif
}

void reprod_engine_fixed_packed_round(reprod_type type, reprod_op op, int ranks,
                                      reprod_rounding dir, const uint8_t *codes, size_t count,
                                      size_t n, int64_t *sums, void *result)
{
#define ROUND(t) packed_round_body(t, op, ranks, dir, codes, count, n, sums, result)
    FOR_EACH_TYPE(type, ROUND)
#undef ROUND
}
