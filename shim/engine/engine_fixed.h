/* engine_fixed.h: exact sums carried by a library's own integer sum (the fixed-point route).
 *
 * Integer addition is associative, so a library's MPI_INT64_T / ncclInt64 sum is exact and
 * deterministic under every algorithm (tree, ring, Rabenseifner, in-network) at any scale. An
 * exact float sum then costs two of the library's own reductions, element by element:
 *
 *   1. a MAX of two byte codes per contribution (engine_fixed_codes): "hi", the highest binade
 *      bucket (or: every term -0, zeros only, an infinity or NaN somewhere), and "lo", the
 *      complement of the lowest bucket;
 *   2. a SUM of int64 words: every rank writes its contribution as an integer multiple of the
 *      element's base 2^B (the last bit of its smallest term), cut into K words of W bits,
 *      W = 63 - ceil(log2 ranks), so that no word's sum over the ranks can overflow; K is
 *      known to every rank from the two codes (engine_fixed_element);
 *
 * then the word sums are carried into one exact integer and rounded once in the requested
 * direction (engine_fixed_round), the average divided by the ranks exactly first. One pass
 * alone (engine_fixed_full_*) covers the whole range of the type instead, for a collective that
 * cannot wait between two passes (a nonblocking one): K covers every binade, and two more words
 * count the infinities, NaNs and zeros.
 *
 * Implementation assumptions: those of engine_round.h (int64_t is two's complement, >> of a
 * negative int64_t shifts in sign bits). The same source serves the host (engine_fixed.c) and
 * the GPU kernels: every function here is an ENGINE_FUNCTION on one element.
 *
 * Why it is exact. A finite term x of field g = max(e, 1) is M * 2^u, M < 2^p an integer and
 * u = g - bias - (p - 1) its last bit's exponent. Its bucket's lowest field gives B <= u, its
 * bucket's highest field gives T with |x| < 2^T, for every term of the element; so x / 2^B is
 * an integer of at most T - B bits, which K = ceil((T - B) / W) words of W bits hold. Each
 * word of a term is below 2^W in magnitude, so the sum of N < 2^(63 - W) + 1 of them is below
 * 2^63: the library's int64 sum of every word is exact, and so is their carried total.
 */
#ifndef REPROD_ENGINE_FIXED_H
#define REPROD_ENGINE_FIXED_H

#include "engine/engine_round.h"

#include <stdint.h>

/* ---- Configuration ---------------------------------------------------------------------- */

#define ENGINE_FIXED_HI_NEGATIVE_ZEROS 0   /* hi: every term is -0 */
#define ENGINE_FIXED_HI_ZEROS          1   /* hi: zeros only, at least one +0 */
#define ENGINE_FIXED_FIRST_BUCKET      2   /* hi and 254 - lo: a finite nonzero term's bucket */
#define ENGINE_FIXED_LAST_BUCKET       254
#define ENGINE_FIXED_HI_SPECIAL        255 /* hi: an infinity or a NaN among the terms */
#define ENGINE_FIXED_COUNT_BITS        21  /* width of a count field in a counting word */
#define ENGINE_FIXED_MAX_RANKS         ((1 << ENGINE_FIXED_COUNT_BITS) - 1)
/* Most words an element takes: the whole binary64 range (2098 bits) at the narrowest word
 * (W = 42, 2^21 ranks), plus the two counting words of the one-pass layout. */
#define ENGINE_FIXED_MAX_WORDS 54
/* Limbs of the carried total: the words' bits, 63 bits of their sums' growth, the average's
 * 128 guard bits. */
#define ENGINE_FIXED_MAX_LIMBS (ENGINE_FIXED_MAX_WORDS + 4)

/* What every rank knows of one element after the MAX of the codes. */
struct engine_fixed_element {
    int words;         /* K: int64 words of this element in the sum */
    int base_exponent; /* B: word 0's bit 0 weighs 2^B (finite elements) */
};

/* ---- Buckets ---------------------------------------------------------------------------- */

/* Buckets are binades (16- and 32-bit types) or groups of 8 binades (binary64, whose 2046
 * fields would not fit a byte), the two ends clamped: the lowest bucket holds the subnormals. */
ENGINE_FUNCTION int engine_fixed_bucket_shift(const struct engine_format *f)
{
    return f->exponent_bits > 8 ? 3 : 0;
}

/* The bucket of a finite nonzero term of exponent field `field` (0 for a subnormal). */
ENGINE_FUNCTION unsigned engine_fixed_bucket(const struct engine_format *f, int field)
{
    int g = field > 1 ? field : 1;
    int bucket = g >> engine_fixed_bucket_shift(f);
    if (bucket < ENGINE_FIXED_FIRST_BUCKET) bucket = ENGINE_FIXED_FIRST_BUCKET;
    if (bucket > ENGINE_FIXED_LAST_BUCKET) bucket = ENGINE_FIXED_LAST_BUCKET;
    return (unsigned)bucket;
}

/* The lowest and highest effective field (max(field, 1)) of a bucket. */
ENGINE_FUNCTION int engine_fixed_bucket_low(const struct engine_format *f, unsigned bucket)
{
    return bucket == ENGINE_FIXED_FIRST_BUCKET ? 1 : (int)bucket << engine_fixed_bucket_shift(f);
}

ENGINE_FUNCTION int engine_fixed_bucket_high(const struct engine_format *f, unsigned bucket)
{
    int s = engine_fixed_bucket_shift(f);
    int top_field = (1 << f->exponent_bits) - 2;
    int high = bucket == ENGINE_FIXED_LAST_BUCKET ? top_field : ((int)bucket << s) + (1 << s) - 1;
    return high < top_field ? high : top_field;
}

/* W: bits per word for `ranks` contributions (1 <= ranks <= ENGINE_FIXED_MAX_RANKS). */
ENGINE_FUNCTION int engine_fixed_word_bits(int ranks)
{
    int c = 0;
    while ((1 << c) < ranks)
        c++;
    return 63 - c;
}

/* ---- Pass 1: the codes ------------------------------------------------------------------ */

/* The two codes of one term (its bit pattern), reduced with MAX over the ranks. */
ENGINE_FUNCTION void engine_fixed_codes(const struct engine_format *f, uint64_t bits,
                                        uint8_t *hi, uint8_t *lo)
{
    int fraction_bits = f->precision - 1;
    uint64_t sign = engine_sign_bit(f);
    uint64_t magnitude = bits & (sign - 1);
    int field = (int)(magnitude >> fraction_bits);
    if (magnitude >= engine_inf_bits(f)) {
        *hi = ENGINE_FIXED_HI_SPECIAL, *lo = 0;
    } else if (magnitude == 0) { /* a -0 also raises lo to 1: "a -0 among the terms" */
        int negative = (bits & sign) != 0;
        *hi = negative ? ENGINE_FIXED_HI_NEGATIVE_ZEROS : ENGINE_FIXED_HI_ZEROS;
        *lo = (uint8_t)negative;
    } else {
        unsigned bucket = engine_fixed_bucket(f, field);
        *hi = (uint8_t)bucket, *lo = (uint8_t)(ENGINE_FIXED_LAST_BUCKET - bucket);
    }
}

/* ---- Pass 1 on the wire: one lo a block of elements ---------------------------------------
 * The codes cross the library's MAX as one hi an element and one lo a block (the highest of the
 * block's finite terms' lo): for binary32 and binary64 a block of ENGINE_FIXED_LO_BLOCK
 * elements, 1 1/8 bytes an element instead of 2. A lower lo only lowers an element's B, which
 * stays exact (a term's words are still integers below 2^W); it may take a word more: an
 * element far below its block's others takes the words of the widest one. The 16-bit types keep
 * a lo an element (a block of 1): their codes are as many bytes as their terms, and NCCL's
 * narrow words hold a bfloat16 element within 13 binades at 1,024 ranks, which a zero-mean
 * gradient's element nearly fills alone (bench/bench_layout.c: 3.4x native's bytes, 4.2x with
 * blocks of 8).
 *
 * The lo of an element of zeros only said whether a -0 was among them, which the rounding
 * toward -inf needs (+0 + -0 is -0 there, +0 in every other direction). On the wire the hi
 * says it: a -0 term's hi is 0, but 2 (ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN) on a rank rounding
 * toward -inf, and +0's is 1; a finite term's first bucket joins the second (3) to make room, a
 * higher T that only adds bits. The MAX then gives 0 for -0 only, 1 for a +0 and no -0 that
 * counts, and 2 (rounding toward -inf) for a -0 among them: the zero of the sum in the rank's
 * own direction. Ranks that disagree on the direction (a misconfiguration) still exchange the
 * same bytes and words, and sums of finite terms or of +0s alone come back right; of signed
 * zeros mixed across such ranks, not always: a rank not rounding toward -inf reads 2 as +0
 * (all -0 then gives it +0), and a rank rounding toward -inf misses a -0 sent as 0 by a rank
 * that does not (the old codes, two bytes an element, got both). */
#define ENGINE_FIXED_LO_BLOCK                8
#define ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN 2

/* Elements a lo covers on the wire. */
ENGINE_FUNCTION int engine_fixed_lo_block(const struct engine_format *f)
{
    return f->exponent_bits + f->precision > 16 ? ENGINE_FIXED_LO_BLOCK : 1;
}

/* Bytes of the wire of `count` elements: count hi, then a lo a block. */
ENGINE_FUNCTION uint64_t engine_fixed_packed_bytes(const struct engine_format *f, uint64_t count)
{
    uint64_t block = (uint64_t)engine_fixed_lo_block(f);
    return count + (count + block - 1) / block;
}

/* This rank's codes of n <= engine_fixed_lo_block elements (two each) on the wire: n hi and
 * one lo. */
ENGINE_FUNCTION void engine_fixed_pack_block(const uint8_t *codes, int n, reprod_rounding dir,
                                             uint8_t *hi, uint8_t *lo)
{
    unsigned most = 0;
    for (int j = 0; j < n; j++) {
        unsigned h = codes[2 * j];
        if (h >= ENGINE_FIXED_FIRST_BUCKET && h != ENGINE_FIXED_HI_SPECIAL) {
            if (codes[2 * j + 1] > most) most = codes[2 * j + 1];
            if (h == ENGINE_FIXED_FIRST_BUCKET) h = ENGINE_FIXED_FIRST_BUCKET + 1;
        } else if (h == ENGINE_FIXED_HI_NEGATIVE_ZEROS && dir == REPROD_ROUND_DOWN) {
            h = ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN;
        }
        hi[j] = (uint8_t)h;
    }
    *lo = (uint8_t)most;
}

/* The reduced codes of n elements (two each) from the reduced wire: their n hi and their
 * block's lo. */
ENGINE_FUNCTION void engine_fixed_unpack_block(const uint8_t *hi, unsigned lo, int n,
                                               reprod_rounding dir, uint8_t *codes)
{
    for (int j = 0; j < n; j++) {
        unsigned h = hi[j];
        if (h <= ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN) { /* zeros only: is their sum -0? */
            int negative = h == ENGINE_FIXED_HI_NEGATIVE_ZEROS ||
                           (h == ENGINE_FIXED_WIRE_NEGATIVE_ZERO_DOWN && dir == REPROD_ROUND_DOWN);
            codes[2 * j] = negative ? ENGINE_FIXED_HI_NEGATIVE_ZEROS : ENGINE_FIXED_HI_ZEROS;
            codes[2 * j + 1] = (uint8_t)negative;
        } else {
            codes[2 * j] = (uint8_t)h;
            codes[2 * j + 1] = (uint8_t)(h == ENGINE_FIXED_HI_SPECIAL ? 0 : lo);
        }
    }
}

/* The element's layout from its reduced codes: K words and the base exponent. Zeros take no
 * word (for zeros only, base_exponent says whether a -0 was among them: lo, which a -0 raises
 * to 1; for an element with finite terms that 1 only lowers B, which stays exact); an
 * infinity or NaN one word of counts. The layout does not depend on the direction, so ranks
 * that disagree on it still exchange the same words. */
ENGINE_FUNCTION struct engine_fixed_element
engine_fixed_element(const struct engine_format *f, int word_bits, unsigned hi, unsigned lo,
                     reprod_rounding dir)
{
    struct engine_fixed_element e = {0, 0};
    (void)dir; /* the same layout in every direction */
    if (hi == ENGINE_FIXED_HI_SPECIAL) {
        e.words = 1;
    } else if (hi == ENGINE_FIXED_HI_ZEROS) {
        e.base_exponent = lo != 0; /* a -0 among the terms */
    } else if (hi >= ENGINE_FIXED_FIRST_BUCKET) {
        int bias = (1 << (f->exponent_bits - 1)) - 1;
        int top = engine_fixed_bucket_high(f, hi) - bias + 1; /* every |x| < 2^top */
        unsigned lowest = ENGINE_FIXED_LAST_BUCKET - lo;
        e.base_exponent = engine_fixed_bucket_low(f, lowest) - bias - (f->precision - 1);
        int bits = top - e.base_exponent;
        e.words = bits <= word_bits ? 1 : (bits + word_bits - 1) / word_bits;
    }
    return e;
}

/* ---- Pass 2: the words ------------------------------------------------------------------ */

/* Write the finite term `bits` as `words` words of word_bits bits relative to 2^base. */
ENGINE_FUNCTION void engine_fixed_split_finite(const struct engine_format *f, uint64_t bits,
                                               int word_bits, int words, int base,
                                               int64_t *out)
{
    for (int k = 0; k < words; k++)
        out[k] = 0;
    int fraction_bits = f->precision - 1;
    uint64_t sign = engine_sign_bit(f);
    uint64_t magnitude = bits & (sign - 1);
    if (magnitude == 0) return;
    int field = (int)(magnitude >> fraction_bits);
    uint64_t m = magnitude & ((1ull << fraction_bits) - 1);
    if (field != 0) m |= 1ull << fraction_bits;
    int bias = (1 << (f->exponent_bits - 1)) - 1;
    int shift = (field > 1 ? field : 1) - bias - fraction_bits - base; /* >= 0 */
    uint64_t mask = (1ull << word_bits) - 1;
    if (words == 1) { /* the common case: the whole term in one word (shift < word_bits) */
        out[0] = (bits & sign) ? -(int64_t)(m << shift) : (int64_t)(m << shift);
        return;
    }
    int first = shift / word_bits, last = (shift + f->precision - 1) / word_bits;
    if (last >= words) last = words - 1;
    for (int k = first; k <= last; k++) {
        int offset = shift - k * word_bits; /* where m's bit 0 lands in word k */
        uint64_t piece = offset >= 0 ? (offset < 64 ? m << offset : 0)
                                     : (-offset < 64 ? m >> -offset : 0);
        piece &= mask;
        out[k] = (bits & sign) ? -(int64_t)piece : (int64_t)piece;
    }
}

/* This rank's words of one element (its term `bits`), as engine_fixed_element laid them. */
ENGINE_FUNCTION void engine_fixed_split(const struct engine_format *f, uint64_t bits, int word_bits,
                                        unsigned hi, struct engine_fixed_element e,
                                        int64_t *out)
{
    uint64_t sign = engine_sign_bit(f);
    uint64_t magnitude = bits & (sign - 1);
    uint64_t inf = engine_inf_bits(f);
    if (hi == ENGINE_FIXED_HI_SPECIAL) { /* counts: +inf, -inf << 21, NaN << 42 */
        int64_t count = 0;
        if (magnitude > inf)
            count = 1ll << (2 * ENGINE_FIXED_COUNT_BITS);
        else if (magnitude == inf)
            count = (bits & sign) ? 1ll << ENGINE_FIXED_COUNT_BITS : 1;
        out[0] = count;
    } else if (hi >= ENGINE_FIXED_FIRST_BUCKET) {
        engine_fixed_split_finite(f, bits, word_bits, e.words, e.base_exponent, out);
    }
}

/* ---- The one rounding ------------------------------------------------------------------- */

/* The bits of an infinity or NaN element from its summed counts word. */
ENGINE_FUNCTION uint64_t engine_fixed_special(const struct engine_format *f, int64_t counts)
{
    int64_t mask = (1ll << ENGINE_FIXED_COUNT_BITS) - 1;
    int64_t positive = counts & mask, negative = (counts >> ENGINE_FIXED_COUNT_BITS) & mask;
    int64_t nans = counts >> (2 * ENGINE_FIXED_COUNT_BITS);
    if (nans || (positive && negative)) return f->nan_bits;
    return (negative ? engine_sign_bit(f) : 0) | engine_inf_bits(f);
}

/* Round sum(sums[k] * 2^(k * word_bits)) * 2^base once to f in direction dir; for REPROD_AVG
 * divide by `ranks` first (exactly: the remainder is the sticky bit). An exactly zero total is
 * +0, or -0 rounding down (the terms were not all zeros). */
ENGINE_FUNCTION uint64_t engine_fixed_round_finite(const struct engine_format *f,
                                                   const int64_t *sums, int words, int word_bits,
                                                   int base, reprod_op op, int ranks,
                                                   reprod_rounding dir)
{
    /* The common cases first: a sum of one or two words (binary32 and binary64 whose terms
     * span a few binades), without the limbs. */
    if (words <= 2 && (op == REPROD_SUM || ranks == 1)) {
        uint64_t low = (uint64_t)sums[0], high = sums[0] < 0 ? ~0ull : 0;
        if (words == 2 && sums[1] != 0) { /* + sums[1] * 2^word_bits, word_bits < 64 */
            uint64_t add_low = (uint64_t)sums[1] << word_bits;
            uint64_t add_high = (uint64_t)(sums[1] >> (64 - word_bits));
            low += add_low;
            high += add_high + (low < add_low);
        }
        int negative = (int)(high >> 63);
        if (negative) { /* the magnitude of a 128-bit two's complement value */
            low = ~low + 1;
            high = ~high + (low == 0);
        }
        if (high == 0) {
            if (low == 0) return dir == REPROD_ROUND_DOWN ? engine_sign_bit(f) : 0;
            return engine_round_value(f, negative, low, base, 0, dir);
        }
        int lead = engine_leading_zeros(high);
        uint64_t m = lead ? (high << lead) | (low >> (64 - lead)) : high;
        int sticky = (lead ? low << lead : low) != 0;
        return engine_round_value(f, negative, m, base + 64 - lead, sticky, dir);
    }
    /* Carry the signed words into a two's complement integer of 64-bit limbs: each word adds
     * to two limbs, its carries and its sign's borrow wait in `pending` (small counts), and one
     * pass from the bottom settles them: time in words + limbs, not their product. */
    uint64_t limb[ENGINE_FIXED_MAX_LIMBS];
    int32_t pending[ENGINE_FIXED_MAX_LIMBS + 1]; /* small: at most two counts a word */
    int limbs = (words * word_bits + 63) / 64 + 2;
    for (int i = 0; i < limbs; i++)
        limb[i] = 0, pending[i] = 0;
    pending[limbs] = 0;
    for (int k = 0; k < words; k++) {
        int64_t v = sums[k];
        if (v == 0) continue;
        int at = k * word_bits, i = at / 64, s = at % 64;
        /* v * 2^s = low + high * 2^64, high read as signed */
        uint64_t low = (uint64_t)v << s;
        uint64_t high = s ? (uint64_t)(v >> (64 - s)) : (v < 0 ? ~0ull : 0);
        limb[i] += low;
        pending[i + 1] += limb[i] < low;
        limb[i + 1] += high;
        pending[i + 2] += (int32_t)(limb[i + 1] < high) - (int32_t)(high >> 63);
    }
    for (int j = 0; j < limbs; j++) {
        int32_t p = pending[j];
        if (p > 0) {
            limb[j] += (uint64_t)p;
            pending[j + 1] += limb[j] < (uint64_t)p;
        } else if (p < 0) {
            uint64_t u = (uint64_t)-p;
            pending[j + 1] -= limb[j] < u;
            limb[j] -= u;
        }
    }
    int negative = (int)(limb[limbs - 1] >> 63);
    if (negative) { /* magnitude: two's complement negation */
        uint64_t carry = 1;
        for (int i = 0; i < limbs; i++) {
            limb[i] = ~limb[i] + carry;
            carry = carry && limb[i] == 0;
        }
    }
    int top = limbs - 1;
    while (top >= 0 && limb[top] == 0)
        top--;
    if (top < 0) return dir == REPROD_ROUND_DOWN ? engine_sign_bit(f) : 0;

    int sticky = 0;
    if (op == REPROD_AVG && ranks > 1) {
        /* Two zero limbs below (128 guard bits), then long division in 32-bit digits: the
         * remainder stays below ranks < 2^21, so each step fits 64 bits. */
        for (int i = top; i >= 0; i--)
            limb[i + 2] = limb[i];
        limb[0] = limb[1] = 0;
        top += 2;
        base -= 128;
        uint64_t remainder = 0;
        for (int i = top; i >= 0; i--) {
            uint64_t high = (remainder << 32) | (limb[i] >> 32);
            uint64_t qh = high / (uint64_t)ranks;
            remainder = high % (uint64_t)ranks;
            uint64_t low = (remainder << 32) | (limb[i] & 0xffffffffull);
            uint64_t ql = low / (uint64_t)ranks;
            remainder = low % (uint64_t)ranks;
            limb[i] = (qh << 32) | ql;
        }
        sticky = remainder != 0;
        while (top >= 0 && limb[top] == 0)
            top--;
    }
    /* The top 64 significant bits, the rest into the sticky bit. */
    int lead = engine_leading_zeros(limb[top]);
    uint64_t m;
    int q;
    if (top == 0) {
        m = limb[0];
        q = base;
    } else {
        m = lead ? (limb[top] << lead) | (limb[top - 1] >> (64 - lead)) : limb[top];
        q = base + 64 * (top - 1) + (64 - lead);
        uint64_t rest = lead ? limb[top - 1] << lead : limb[top - 1];
        sticky |= rest != 0;
        for (int i = top - 2; i >= 0 && !sticky; i--)
            sticky |= limb[i] != 0;
    }
    return engine_round_value(f, negative, m, q, sticky, dir);
}

/* The result of one element from its summed words (the two-pass layout). */
ENGINE_FUNCTION uint64_t engine_fixed_round(const struct engine_format *f, const int64_t *sums,
                                            int word_bits, unsigned hi,
                                            struct engine_fixed_element e, reprod_op op,
                                            int ranks, reprod_rounding dir)
{
    if (hi == ENGINE_FIXED_HI_SPECIAL) return engine_fixed_special(f, sums[0]);
    if (hi == ENGINE_FIXED_HI_NEGATIVE_ZEROS) return engine_sign_bit(f);
    if (hi == ENGINE_FIXED_HI_ZEROS) /* +0, but -0 rounding down with a -0 among the terms */
        return dir == REPROD_ROUND_DOWN && e.base_exponent ? engine_sign_bit(f) : 0;
    return engine_fixed_round_finite(f, sums, e.words, word_bits, e.base_exponent, op, ranks,
                                     dir);
}

/* ---- One pass: the whole range ---------------------------------------------------------- */

/* The one-pass layout: word 0 counts +inf, -inf, NaN; word 1 counts -0 and +0 (<< 21); the
 * words after it hold the finite terms relative to the smallest subnormal. */
ENGINE_FUNCTION struct engine_fixed_element engine_fixed_full_element(const struct engine_format *f,
                                                                      int word_bits)
{
    struct engine_fixed_element e =
        engine_fixed_element(f, word_bits, ENGINE_FIXED_LAST_BUCKET,
                             ENGINE_FIXED_LAST_BUCKET - ENGINE_FIXED_FIRST_BUCKET,
                             REPROD_ROUND_NEAREST);
    e.words += 2;
    return e;
}

ENGINE_FUNCTION void engine_fixed_full_split(const struct engine_format *f, uint64_t bits,
                                             int word_bits, struct engine_fixed_element e,
                                             int64_t *out)
{
    uint64_t sign = engine_sign_bit(f);
    uint64_t magnitude = bits & (sign - 1);
    out[0] = 0;
    out[1] = magnitude == 0 ? (bits == sign ? 1 : 1ll << ENGINE_FIXED_COUNT_BITS) : 0;
    if (magnitude >= engine_inf_bits(f)) {
        engine_fixed_split(f, bits, word_bits, ENGINE_FIXED_HI_SPECIAL, e, out);
        for (int k = 2; k < e.words; k++)
            out[k] = 0;
    } else {
        engine_fixed_split_finite(f, bits, word_bits, e.words - 2, e.base_exponent, out + 2);
    }
}

/* The result of one element from the summed one-pass words of `terms` contributions (a scan's
 * prefix: fewer than the `ranks` whose count chose word_bits; every one for a whole sum). */
ENGINE_FUNCTION uint64_t engine_fixed_full_round_terms(const struct engine_format *f,
                                                       const int64_t *sums, int word_bits,
                                                       struct engine_fixed_element e,
                                                       reprod_op op, int terms,
                                                       reprod_rounding dir)
{
    if (sums[0] != 0) return engine_fixed_special(f, sums[0]);
    int64_t mask = (1ll << ENGINE_FIXED_COUNT_BITS) - 1;
    int64_t negative_zeros = sums[1] & mask, positive_zeros = sums[1] >> ENGINE_FIXED_COUNT_BITS;
    if (negative_zeros == terms) return engine_sign_bit(f);
    if (positive_zeros == terms) return 0;
    return engine_fixed_round_finite(f, sums + 2, e.words - 2, word_bits, e.base_exponent, op,
                                     terms, dir);
}

ENGINE_FUNCTION uint64_t engine_fixed_full_round(const struct engine_format *f,
                                                 const int64_t *sums, int word_bits,
                                                 struct engine_fixed_element e, reprod_op op,
                                                 int ranks, reprod_rounding dir)
{
    return engine_fixed_full_round_terms(f, sums, word_bits, e, op, ranks, dir);
}

#endif /* REPROD_ENGINE_FIXED_H */
