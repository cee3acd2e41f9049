/* engine_fixed.c: the fixed-point route on host arrays (engine_fixed.h does one element).
 *
 * The data paths call these around the library's own reductions: codes (pass 1, reduced with
 * MAX), layout and split (pass 2, reduced with an int64 SUM), round. Every rank computes the
 * same layout from the same reduced codes, so the int64 buffers line up word for word.
 */
#include "engine/engine.h"

#define ENGINE_FUNCTION static inline __attribute__((always_inline))
#include "engine/engine_fixed.h"
#include "engine/engine_kernels.h" /* the AVX2 blocks, and the level in use */

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

/* Elements of a block that takes the branch-free forms below (and their AVX2 forms). */
#define FAST_BLOCK ENGINE_FIXED_BLOCK

/* Each loop below is a body on a constant type (inlined), instantiated by FOR_EACH_TYPE. */

#define FIXED_INLINE static inline __attribute__((always_inline))

/* Element i's layout from the one the caller computed (its words: the offsets' difference),
 * without engine_fixed_element's division. */
FIXED_INLINE struct engine_fixed_element element_at(const struct engine_format *f,
                                                    const uint8_t *codes, const size_t *offsets,
                                                    size_t i)
{
    struct engine_fixed_element e = {(int)(offsets[i + 1] - offsets[i]), 0};
    unsigned hi = codes[2 * i];
    if (hi == ENGINE_FIXED_HI_ZEROS) e.base_exponent = codes[2 * i + 1] != 0; /* a -0 among them */
    if (hi >= ENGINE_FIXED_FIRST_BUCKET && hi != ENGINE_FIXED_HI_SPECIAL) {
        int bias = (1 << (f->exponent_bits - 1)) - 1;
        unsigned lowest = ENGINE_FIXED_LAST_BUCKET - codes[2 * i + 1];
        e.base_exponent = engine_fixed_bucket_low(f, lowest) - bias - (f->precision - 1);
    }
    return e;
}

FIXED_INLINE void codes_body(reprod_type type, const void *terms, size_t count, uint8_t *codes)
{
    struct engine_format f = engine_format_of(type);
    size_t i = 0;
    if (ENGINE_FIXED_VECTORS && engine_kernels_in_use() >= ENGINE_KERNELS_AVX2) {
        if (type == REPROD_FLOAT32) i = engine_fixed_codes_float32_avx2(terms, count, codes);
        if (type == REPROD_FLOAT64) i = engine_fixed_codes_float64_avx2(terms, count, codes);
    }
    for (; i < count; i++)
        engine_fixed_codes(&f, load_bits(type, terms, i), &codes[2 * i], &codes[2 * i + 1]);
}

void reprod_engine_fixed_codes(reprod_type type, const void *terms, size_t count, uint8_t *codes)
{
#define CODES(t) codes_body(t, terms, count, codes)
    FOR_EACH_TYPE(type, CODES)
#undef CODES
}

size_t reprod_engine_fixed_packed_bytes(reprod_type type, size_t count)
{
    struct engine_format f = engine_format_of(type);
    return (size_t)engine_fixed_packed_bytes(&f, count);
}

/* The wire on the host, blocks of 8 at a time in SSE2 (x86-64's baseline): the bits of
 * engine_fixed_pack_block and engine_fixed_unpack_block (the tests compare them with the
 * kernel's), which cost 0.7 and 0.6 ns an element called block by block, against the MPI
 * route's whole conversion of about 1.5 ns. Each 16-bit lane holds one element: its hi in the
 * low byte, its lo in the high one, as the codes lie in memory. */
#if ENGINE_FIXED_VECTORS
#include <emmintrin.h>

_Static_assert(ENGINE_FIXED_LO_BLOCK == 8, "pack_eights takes blocks of 8");

static void pack_eights(const uint8_t *codes, size_t blocks, unsigned down, uint8_t *hi,
                        uint8_t *lo)
{
    const __m128i low_byte = _mm_set1_epi16(0xff), one = _mm_set1_epi16(1);
    const __m128i first = _mm_set1_epi16(ENGINE_FIXED_FIRST_BUCKET);
    const __m128i special = _mm_set1_epi16(ENGINE_FIXED_HI_SPECIAL);
    const __m128i down_two = _mm_set1_epi16(down ? ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN : 0);
    for (size_t b = 0; b < blocks; b++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(codes + 16 * b));
        __m128i h = _mm_and_si128(v, low_byte), l = _mm_srli_epi16(v, 8);
        __m128i finite = _mm_andnot_si128(_mm_cmpeq_epi16(h, special), _mm_cmpgt_epi16(h, one));
        __m128i m = _mm_and_si128(l, finite); /* a lo of a finite term, else 0 */
        m = _mm_max_epi16(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
        m = _mm_max_epi16(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
        m = _mm_max_epi16(m, _mm_srli_epi32(m, 16));
        lo[b] = (uint8_t)_mm_cvtsi128_si32(m);
        /* h + (h == first) + 2 (h == -0s, rounding down): cmpeq is -1 where it holds */
        h = _mm_sub_epi16(h, _mm_cmpeq_epi16(h, first));
        h = _mm_add_epi16(h, _mm_and_si128(_mm_cmpeq_epi16(h, _mm_setzero_si128()), down_two));
        _mm_storel_epi64((__m128i *)(void *)(hi + 8 * b), _mm_packus_epi16(h, h));
    }
}

static void unpack_eights(const uint8_t *hi, const uint8_t *lo, size_t blocks, unsigned down,
                          uint8_t *codes)
{
    const __m128i one = _mm_set1_epi16(1), three = _mm_set1_epi16(3);
    const __m128i special = _mm_set1_epi16(ENGINE_FIXED_HI_SPECIAL);
    const __m128i two = _mm_set1_epi16(ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN);
    const __m128i down_mask = down ? _mm_set1_epi16(-1) : _mm_setzero_si128();
    for (size_t b = 0; b < blocks; b++) {
        __m128i h = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(const void *)(hi + 8 * b)),
                                      _mm_setzero_si128());
        __m128i zeros = _mm_cmplt_epi16(h, three);
        __m128i negative = _mm_or_si128(_mm_cmpeq_epi16(h, _mm_setzero_si128()),
                                        _mm_and_si128(_mm_cmpeq_epi16(h, two), down_mask));
        __m128i zero_hi = _mm_andnot_si128(negative, one); /* -0: 0, +0: 1 */
        __m128i other_lo = _mm_andnot_si128(_mm_cmpeq_epi16(h, special), _mm_set1_epi16(lo[b]));
        __m128i out_hi = _mm_or_si128(_mm_and_si128(zeros, zero_hi), _mm_andnot_si128(zeros, h));
        __m128i out_lo = _mm_or_si128(_mm_and_si128(zeros, _mm_and_si128(negative, one)),
                                      _mm_andnot_si128(zeros, other_lo));
        _mm_storeu_si128((__m128i *)(void *)(codes + 16 * b),
                         _mm_or_si128(out_hi, _mm_slli_epi16(out_lo, 8)));
    }
}
#endif

void reprod_engine_fixed_pack(reprod_type type, reprod_rounding dir, const uint8_t *codes,
                              size_t count, uint8_t *packed)
{
    struct engine_format f = engine_format_of(type);
    size_t block = (size_t)engine_fixed_lo_block(&f), i = 0;
    uint8_t *lo = packed + count;
#if ENGINE_FIXED_VECTORS
    if (block == ENGINE_FIXED_LO_BLOCK) {
        pack_eights(codes, count / 8, dir == REPROD_ROUND_DOWN, packed, lo);
        i = count / 8 * 8;
    }
#endif
    for (; i < count; i += block) {
        int n = (int)(count - i < block ? count - i : block);
        engine_fixed_pack_block(codes + 2 * i, n, dir, packed + i, &lo[i / block]);
    }
}

void reprod_engine_fixed_unpack(reprod_type type, reprod_rounding dir, const uint8_t *packed,
                                size_t count, uint8_t *codes)
{
    struct engine_format f = engine_format_of(type);
    size_t block = (size_t)engine_fixed_lo_block(&f), i = 0;
    const uint8_t *lo = packed + count;
#if ENGINE_FIXED_VECTORS
    if (block == ENGINE_FIXED_LO_BLOCK) {
        unpack_eights(packed, lo, count / 8, dir == REPROD_ROUND_DOWN, codes);
        i = count / 8 * 8;
    }
#endif
    for (; i < count; i += block) {
        int n = (int)(count - i < block ? count - i : block);
        engine_fixed_unpack_block(packed + i, lo[i / block], n, dir, codes + 2 * i);
    }
}

FIXED_INLINE size_t layout_body(reprod_type type, int ranks, reprod_rounding dir,
                                const uint8_t *codes, size_t count, size_t *offsets)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    int avx2 = ENGINE_FIXED_VECTORS && engine_kernels_in_use() >= ENGINE_KERNELS_AVX2;
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        /* a block of binary32 elements of one word each, of binary64 elements of two */
        if (avx2 && offsets && i % FAST_BLOCK == 0 && i + FAST_BLOCK <= count &&
            (type == REPROD_FLOAT32
                 ? engine_fixed_layout_float32_avx2(word_bits, codes + 2 * i, total, offsets + i)
             : type == REPROD_FLOAT64
                 ? engine_fixed_layout_float64_avx2(word_bits, codes + 2 * i, total, offsets + i)
                 : 0)) {
            total += (type == REPROD_FLOAT32 ? 1 : 2) * FAST_BLOCK;
            i += FAST_BLOCK - 1;
            continue;
        }
        if (offsets) offsets[i] = total;
        total += (size_t)engine_fixed_element(&f, word_bits, codes[2 * i], codes[2 * i + 1], dir)
                     .words;
    }
    if (offsets) offsets[count] = total;
    return total;
}

size_t reprod_engine_fixed_layout(reprod_type type, int ranks, reprod_rounding dir,
                                  const uint8_t *codes, size_t count, size_t *offsets)
{
    size_t total = 0;
#define LAYOUT(t) total = layout_body(t, ranks, dir, codes, count, offsets)
    FOR_EACH_TYPE(type, LAYOUT)
#undef LAYOUT
    return total;
}

/* ---- Binary32 elements of one word, a block at a time -------------------------------------
 * Most binary32 elements take one word (their terms within 39 - log2 N binades of each other).
 * For a block whose elements all do (each hi a finite bucket, so each takes at least one word,
 * and the block's words as many as its elements), the split and the rounding below take no
 * branch per element. They give the bits of engine_fixed_split and engine_fixed_round (the
 * fuzzer runs blocks of both kinds): the split is the one-word case of
 * engine_fixed_split_finite; the rounding converts the word sum S to binary64 (exact while
 * |S| < 2^53, else the block takes the general loop), scales it by 2^B (a power of two, exact)
 * and lets the hardware round that once to binary32 in the requested direction (MXCSR's
 * rounding control; no flush to zero), which is the one rounding of the exact sum. */

/* 1 when elements i .. i + FAST_BLOCK - 1 all take exactly one word. */
FIXED_INLINE int block_takes_one_word(const uint8_t *codes, const size_t *offsets, size_t i,
                                      int avx2)
{
    if (offsets[i + FAST_BLOCK] - offsets[i] != FAST_BLOCK) return 0;
    if (avx2) return engine_fixed_block_finite_avx2(codes + 2 * i);
    unsigned finite = 1;
    for (size_t j = i; j < i + FAST_BLOCK; j++)
        finite &= (codes[2 * j] >= ENGINE_FIXED_FIRST_BUCKET) &
                  (codes[2 * j] != ENGINE_FIXED_HI_SPECIAL);
    return (int)finite;
}

/* The lowest effective field of the bucket a lo code names (`type` a constant: folded). */
FIXED_INLINE int32_t low_field(reprod_type type, uint8_t lo)
{
    struct engine_format f = engine_format_of(type);
    return engine_fixed_bucket_low(&f, ENGINE_FIXED_LAST_BUCKET - (unsigned)lo);
}

FIXED_INLINE void split_float32_block(const char *terms, const uint8_t *codes, int64_t *words)
{
    for (size_t j = 0; j < FAST_BLOCK; j++) {
        uint32_t u;
        memcpy(&u, terms + 4 * j, 4);
        uint32_t magnitude = u & 0x7fffffffu, field = magnitude >> 23;
        uint64_t m = (magnitude & 0x7fffffu) | ((uint64_t)(field != 0) << 23);
        int32_t effective = field > 1 ? (int32_t)field : 1;
        int32_t shift = effective - low_field(REPROD_FLOAT32, codes[2 * j + 1]);
        shift = shift > 0 ? shift : 0; /* a zero term: m = 0 */
        int64_t word = (int64_t)(m << shift);
        words[j] = (u >> 31) ? -word : word;
    }
}

/* ---- Binary64 elements of two words, a block at a time ------------------------------------
 * Binary64 terms within a bucket or two of each other take two words (60 - 68 bits against
 * W = 63 - log2 N). For a block whose elements all take exactly two and are finite, the split
 * writes m 2^shift's low W bits and the rest (engine_fixed_split_finite's two pieces, each
 * negated for a negative term) without a loop; the rounding forms the 128-bit sum
 * S = s0 + s1 2^W, and where it fits an int64 converts it to binary64 in the requested
 * direction (the hardware's one rounding, MXCSR), then adds B to the exponent: exact while the
 * result is normal (else, or for S = 0 or beyond int64, that element takes
 * engine_fixed_round). */

/* 1 when elements i .. i + FAST_BLOCK - 1 all take exactly two words and are finite. */
FIXED_INLINE int block_takes_two_words(const uint8_t *codes, const size_t *offsets, size_t i,
                                       int avx2)
{
    if (avx2) return engine_fixed_block_two_words_avx2(codes + 2 * i, offsets + i);
    unsigned two = 1;
    for (size_t j = i; j < i + FAST_BLOCK; j++)
        two &= (offsets[j + 1] - offsets[j] == 2) & (codes[2 * j] != ENGINE_FIXED_HI_SPECIAL);
    return (int)two;
}

#if defined(__SIZEOF_INT128__) /* 64-bit targets: the block's shift goes through 128 bits */
#define SPLIT_FLOAT64_BLOCKS 1
FIXED_INLINE void split_float64_block(const char *terms, const uint8_t *codes, int word_bits,
                                      int64_t *words)
{
    uint64_t mask = (1ull << word_bits) - 1;
    for (size_t j = 0; j < FAST_BLOCK; j++) {
        uint64_t u;
        memcpy(&u, terms + 8 * j, 8);
        uint64_t magnitude = u & 0x7fffffffffffffffull, field = magnitude >> 52;
        uint64_t m = (magnitude & 0xfffffffffffffull) | ((uint64_t)(field != 0) << 52);
        int32_t effective = field > 1 ? (int32_t)field : 1;
        int32_t shift = effective - low_field(REPROD_FLOAT64, codes[2 * j + 1]);
        shift = shift > 0 ? shift : 0; /* a zero term: m = 0; shift < 2 W - 52 */
        unsigned __int128 v = (unsigned __int128)m << shift;
        int64_t low = (int64_t)((uint64_t)v & mask), high = (int64_t)(uint64_t)(v >> word_bits);
        words[2 * j] = (u >> 63) ? -low : low;
        words[2 * j + 1] = (u >> 63) ? -high : high;
    }
}
#else
#define SPLIT_FLOAT64_BLOCKS 0
#endif

#if defined(__x86_64__)
/* MXCSR: exceptions masked, no flush to zero, the rounding control of `dir`. */
static unsigned mxcsr_of(reprod_rounding dir)
{
    static const unsigned control[] = {0x1f80u, 0x7f80u, 0x5f80u, 0x3f80u}; /* near, zero, up, down */
    return control[dir];
}

/* Round a block from its word sums; 0 (nothing written) when a sum is beyond 2^53. */
FIXED_INLINE int round_float32_block(const uint8_t *codes, const int64_t *sums,
                                     reprod_rounding dir, char *result)
{
    int64_t beyond = 0;
    for (size_t j = 0; j < FAST_BLOCK; j++) {
        int64_t s = sums[j];
        beyond |= (s < 0 ? -s : s) >> 53;
    }
    if (beyond) return 0;
    uint32_t zero = dir == REPROD_ROUND_DOWN ? 0x80000000u : 0; /* an exactly zero sum */
    for (size_t j = 0; j < FAST_BLOCK; j++) {
        int32_t base = low_field(REPROD_FLOAT32, codes[2 * j + 1]) - 127 - 23; /* >= -149 */
        double scale = engine_double_from_bits((uint64_t)(base + 1023) << 52);
        float rounded = (float)((double)sums[j] * scale);
        uint32_t bits = engine_float_bits(rounded);
        bits = sums[j] == 0 ? zero : bits;
        memcpy(result + 4 * j, &bits, 4);
    }
    return 1;
}
#endif

#if defined(__x86_64__)
/* Element j of a two-word block by engine_fixed_round: what the fast forms leave. */
FIXED_INLINE uint64_t round_float64_other(const struct engine_format *f, const uint8_t *codes,
                                          const int64_t *sums, int word_bits, reprod_op op,
                                          int ranks, reprod_rounding dir, size_t j)
{
    struct engine_fixed_element e = {2, low_field(REPROD_FLOAT64, codes[2 * j + 1]) - 1023 - 52};
    return engine_fixed_round(f, sums + 2 * j, word_bits, codes[2 * j], e, op, ranks, dir);
}

/* Round a block of two-word binary64 sums: S = s0 + s1 2^W where it fits an int64, converted by
 * the hardware, 2^B added to the exponent; the elements the fast form cannot take go to
 * engine_fixed_round. */
FIXED_INLINE void round_float64_block(const struct engine_format *f, const uint8_t *codes,
                                      const int64_t *sums, int word_bits, reprod_op op, int ranks,
                                      reprod_rounding dir, char *result)
{
    for (size_t j = 0; j < FAST_BLOCK; j++) {
        __int128 sum = (__int128)sums[2 * j] + (__int128)sums[2 * j + 1] * ((__int128)1 << word_bits);
        int64_t narrow = (int64_t)sum;
        int32_t base = low_field(REPROD_FLOAT64, codes[2 * j + 1]) - 1023 - 52;
        uint64_t bits = engine_double_bits((double)narrow);
        int32_t exponent = (int32_t)((bits >> 52) & 0x7ff) + base;
        if ((__int128)narrow == sum && narrow != 0 && exponent >= 1 && exponent <= 2046)
            bits += (uint64_t)(int64_t)base << 52; /* times 2^B, exactly */
        else
            bits = round_float64_other(f, codes, sums, word_bits, op, ranks, dir, j);
        memcpy(result + 8 * j, &bits, 8);
    }
}

/* The same block in AVX-512 lanes (engine_fixed_avx512.c), its leftovers here. */
FIXED_INLINE void round_float64_block_avx512(const struct engine_format *f, const uint8_t *codes,
                                             const int64_t *sums, int word_bits, reprod_op op,
                                             int ranks, reprod_rounding dir, char *result)
{
    uint64_t left = engine_fixed_round_float64_avx512(codes, sums, word_bits, result);
    for (; left; left &= left - 1) {
        size_t j = (size_t)__builtin_ctzll(left);
        uint64_t bits = round_float64_other(f, codes, sums, word_bits, op, ranks, dir, j);
        memcpy(result + 8 * j, &bits, 8);
    }
}
#endif

FIXED_INLINE void split_body(reprod_type type, int ranks, reprod_rounding dir, const void *terms,
                             const uint8_t *codes, size_t count, const size_t *offsets,
                             int64_t *words)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
    int avx2 = ENGINE_FIXED_VECTORS && engine_kernels_in_use() >= ENGINE_KERNELS_AVX2;
    (void)dir; /* in the offsets already */
    for (size_t i = 0; i < count;) {
        if (type == REPROD_FLOAT32 && i + FAST_BLOCK <= count &&
            block_takes_one_word(codes, offsets, i, avx2)) {
            if (avx2)
                engine_fixed_split_float32_avx2((const char *)terms + 4 * i, codes + 2 * i,
                                                words + offsets[i]);
            else
                split_float32_block((const char *)terms + 4 * i, codes + 2 * i, words + offsets[i]);
            i += FAST_BLOCK;
            continue;
        }
        if (SPLIT_FLOAT64_BLOCKS && type == REPROD_FLOAT64 && i + FAST_BLOCK <= count &&
            block_takes_two_words(codes, offsets, i, avx2)) {
#if SPLIT_FLOAT64_BLOCKS
            if (avx2)
                engine_fixed_split_float64_avx2((const char *)terms + 8 * i, codes + 2 * i,
                                                word_bits, words + offsets[i]);
            else
                split_float64_block((const char *)terms + 8 * i, codes + 2 * i, word_bits,
                                    words + offsets[i]);
#endif
            i += FAST_BLOCK;
            continue;
        }
        size_t end = i + FAST_BLOCK < count ? i + FAST_BLOCK : count;
        for (; i < end; i++) {
            struct engine_fixed_element e = element_at(&f, codes, offsets, i);
            engine_fixed_split(&f, load_bits(type, terms, i), word_bits, codes[2 * i], e,
                               words + offsets[i]);
        }
    }
}

void reprod_engine_fixed_split(reprod_type type, int ranks, reprod_rounding dir, const void *terms,
                               const uint8_t *codes, size_t count, const size_t *offsets,
                               int64_t *words)
{
#define SPLIT(t) split_body(t, ranks, dir, terms, codes, count, offsets, words)
    FOR_EACH_TYPE(type, SPLIT)
#undef SPLIT
}

FIXED_INLINE void round_body(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                             const uint8_t *codes, size_t count, const size_t *offsets,
                             const int64_t *sums, void *result)
{
    struct engine_format f = engine_format_of(type);
    int word_bits = engine_fixed_word_bits(ranks);
#if defined(__x86_64__)
    int fast = (type == REPROD_FLOAT32 || type == REPROD_FLOAT64) && (op == REPROD_SUM || ranks == 1);
    enum engine_kernel_level level =
        ENGINE_FIXED_VECTORS ? engine_kernels_in_use() : ENGINE_KERNELS_GENERIC;
    int avx2 = level >= ENGINE_KERNELS_AVX2, avx512 = level >= ENGINE_KERNELS_AVX512;
    unsigned saved = 0, wanted = mxcsr_of(dir);
    if (fast) {
        __asm__ volatile("stmxcsr %0" : "=m"(saved) : : "memory");
        __asm__ volatile("ldmxcsr %0" : : "m"(wanted) : "memory");
    }
#endif
    for (size_t i = 0; i < count;) {
#if defined(__x86_64__)
        if (fast && type == REPROD_FLOAT32 && i + FAST_BLOCK <= count &&
            block_takes_one_word(codes, offsets, i, avx2) &&
            ((avx2 && engine_fixed_round_float32_avx2(codes + 2 * i, sums + offsets[i], dir,
                                                      (char *)result + 4 * i)) ||
             round_float32_block(codes + 2 * i, sums + offsets[i], dir, (char *)result + 4 * i))) {
            i += FAST_BLOCK;
            continue;
        }
        if (fast && type == REPROD_FLOAT64 && i + FAST_BLOCK <= count &&
            block_takes_two_words(codes, offsets, i, avx2)) {
            if (avx512)
                round_float64_block_avx512(&f, codes + 2 * i, sums + offsets[i], word_bits, op,
                                           ranks, dir, (char *)result + 8 * i);
            else
                round_float64_block(&f, codes + 2 * i, sums + offsets[i], word_bits, op, ranks, dir,
                                    (char *)result + 8 * i);
            i += FAST_BLOCK;
            continue;
        }
#endif
        size_t end = i + FAST_BLOCK < count ? i + FAST_BLOCK : count;
        for (; i < end; i++) {
            struct engine_fixed_element e = element_at(&f, codes, offsets, i);
            store_bits(type, result, i,
                       engine_fixed_round(&f, sums + offsets[i], word_bits, codes[2 * i], e, op,
                                          ranks, dir));
        }
    }
#if defined(__x86_64__)
    if (fast) __asm__ volatile("ldmxcsr %0" : : "m"(saved) : "memory");
#endif
}

void reprod_engine_fixed_round(reprod_type type, reprod_op op, int ranks, reprod_rounding dir,
                               const uint8_t *codes, size_t count, const size_t *offsets,
                               const int64_t *sums, void *result)
{
#define ROUND(t) round_body(t, op, ranks, dir, codes, count, offsets, sums, result)
    FOR_EACH_TYPE(type, ROUND)
#undef ROUND
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
