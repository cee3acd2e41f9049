/* engine_round.h: the four element formats, exact conversions to binary64, and the single
 * rounding of an exact value to a format in a given direction.
 *
 * Pure integer arithmetic on bit patterns: no libc, no dependence on the floating-point
 * environment, so the same source serves the host engine and the GPU kernels (one source of
 * truth for the arithmetic). Define ENGINE_FUNCTION before including to add qualifiers (for
 * instance __host__ __device__).
 */
#ifndef REPROD_ENGINE_ROUND_H
#define REPROD_ENGINE_ROUND_H

#include "reprod.h"

#include <stdint.h>
#include <string.h>

/* ---- Implementation assumptions ------------------------------------------------------------
 * double is IEEE 754 binary64 and float binary32, with the byte order of the integers of the
 * same width (memcpy between them gives the bit pattern); int64_t is two's complement and >>
 * of a negative int64_t shifts in sign bits (GCC, Clang and NVCC define it so); the engine runs
 * its floating-point code in the default environment (round to nearest, no flush to zero). */

#ifndef ENGINE_FUNCTION
#define ENGINE_FUNCTION static inline
#endif

/* ---- Formats ---------------------------------------------------------------------------- */

/* One IEEE-style binary format: a sign bit, exponent_bits of biased exponent, precision - 1
 * bits of fraction, gradual underflow. */
struct engine_format {
    int precision;        /* p: significand bits, the hidden one included (11, 8, 24, 53) */
    int exponent_bits;    /* width of the exponent field (5, 8, 8, 11) */
    int min_ulp_exponent; /* e such that 2^e is the smallest subnormal (-24, -133, -149, -1074) */
    uint64_t nan_bits;    /* the canonical quiet NaN: sign clear, quiet bit set, no payload */
};

/* The format of `type` (an unknown type gets binary64; callers validate types first). */
ENGINE_FUNCTION struct engine_format engine_format_of(reprod_type type)
{
    struct engine_format f;
    switch (type) {
    case REPROD_FLOAT16:
        f.precision = 11, f.exponent_bits = 5, f.min_ulp_exponent = -24, f.nan_bits = 0x7e00;
        break;
    case REPROD_BFLOAT16:
        f.precision = 8, f.exponent_bits = 8, f.min_ulp_exponent = -133, f.nan_bits = 0x7fc0;
        break;
    case REPROD_FLOAT32:
        f.precision = 24, f.exponent_bits = 8, f.min_ulp_exponent = -149;
        f.nan_bits = 0x7fc00000;
        break;
    default:
        f.precision = 53, f.exponent_bits = 11, f.min_ulp_exponent = -1074;
        f.nan_bits = 0x7ff8000000000000ull;
        break;
    }
    return f;
}

/* The sign bit of format f. */
ENGINE_FUNCTION uint64_t engine_sign_bit(const struct engine_format *f)
{
    return 1ull << (f->exponent_bits + f->precision - 1);
}

/* The bits of +infinity of format f; the largest finite magnitude is one less. */
ENGINE_FUNCTION uint64_t engine_inf_bits(const struct engine_format *f)
{
    return ((1ull << f->exponent_bits) - 1) << (f->precision - 1);
}

/* ---- Bit casts and exact conversions ---------------------------------------------------- */

ENGINE_FUNCTION uint64_t engine_double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

ENGINE_FUNCTION double engine_double_from_bits(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

ENGINE_FUNCTION uint32_t engine_float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

ENGINE_FUNCTION float engine_float_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Number of leading zero bits of a nonzero 64-bit integer. */
ENGINE_FUNCTION int engine_leading_zeros(uint64_t x)
{
#if defined(__CUDA_ARCH__)
    return __clzll((long long)x);
#else
    return __builtin_clzll(x);
#endif
}

/* The value of a binary16 or bfloat16 bit pattern as a binary64, exactly. Integer-only, so a
 * subnormal input costs no microcode assist. */
ENGINE_FUNCTION double engine_small_to_double(const struct engine_format *f, uint64_t bits)
{
    int fraction_bits = f->precision - 1;
    int bias = (1 << (f->exponent_bits - 1)) - 1;
    uint64_t sign = (bits >> (f->exponent_bits + fraction_bits)) & 1;
    uint64_t field = (bits >> fraction_bits) & ((1u << f->exponent_bits) - 1);
    uint64_t fraction = bits & ((1u << fraction_bits) - 1);
    uint64_t out;
    if (field == 0) { /* zero or subnormal: fraction * 2^min_ulp, an exact product */
        double magnitude = (double)(int64_t)fraction;
        uint64_t scale = (uint64_t)(1023 + f->min_ulp_exponent) << 52;
        out = engine_double_bits(magnitude * engine_double_from_bits(scale));
    } else if (field == (1u << f->exponent_bits) - 1) { /* inf or NaN: keep the payload */
        out = (0x7ffull << 52) | (fraction << (52 - fraction_bits));
    } else {
        out = ((field - bias + 1023) << 52) | (fraction << (52 - fraction_bits));
    }
    return engine_double_from_bits(out | (sign << 63));
}

/* ---- The one rounding ------------------------------------------------------------------- */

/* Whether rounding in direction `dir` moves a value of this sign away from zero when it is
 * inexact (up for positive, down for negative values). */
ENGINE_FUNCTION int engine_rounds_away(reprod_rounding dir, int negative)
{
    return (dir == REPROD_ROUND_UP && !negative) || (dir == REPROD_ROUND_DOWN && negative);
}

/* Round the value (-1)^negative * (m + d) * 2^q, where m != 0 and 0 <= d < 1 with d > 0 exactly
 * when `sticky` is set, once to format f in direction dir; return the bit pattern. Handles
 * subnormal results, overflow (infinity or the largest finite value as the direction says) and
 * underflow to a signed zero. Contract: when sticky is set, m must extend at least two bits
 * below the result's last bit, so that the round bit is a bit of m (true for every caller:
 * they pass 53 or 64 significant bits for at most 53 kept). */
ENGINE_FUNCTION uint64_t engine_round_value(const struct engine_format *f, int negative, uint64_t m,
                                            int q, int sticky, reprod_rounding dir)
{
    int msb = q + 63 - engine_leading_zeros(m);
    int ulp = msb - (f->precision - 1); /* exponent of the result's last bit */
    if (ulp < f->min_ulp_exponent) ulp = f->min_ulp_exponent; /* subnormal: fewer bits kept */
    int shift = ulp - q;
    uint64_t kept, round_bit = 0;
    if (shift <= 0) {
        kept = m << -shift; /* exact: the kept field has at most p bits */
    } else if (shift < 64) {
        kept = m >> shift;
        round_bit = (m >> (shift - 1)) & 1;
        sticky |= (m & ((1ull << (shift - 1)) - 1)) != 0;
    } else if (shift == 64) {
        kept = 0;
        round_bit = m >> 63;
        sticky |= (m << 1) != 0;
    } else {
        kept = 0;
        sticky = 1;
    }
    int inexact = round_bit || sticky;
    if (dir == REPROD_ROUND_NEAREST)
        kept += round_bit && (sticky || (kept & 1));
    else if (engine_rounds_away(dir, negative))
        kept += inexact;

    uint64_t sign = negative ? engine_sign_bit(f) : 0;
    uint64_t inf = engine_inf_bits(f);
    int field_base = ulp - f->min_ulp_exponent; /* biased exponent - 1 for a normal result */
    /* The fields add: a normal kept carries its hidden bit into the exponent field, and a
     * kept that rounded up to 2^p carries into the next binade, both by plain addition. */
    if (field_base < (1 << f->exponent_bits) - 1) {
        uint64_t magnitude = ((uint64_t)field_base << (f->precision - 1)) + kept;
        if (magnitude < inf) return sign | magnitude;
    }
    int to_infinity = dir == REPROD_ROUND_NEAREST || engine_rounds_away(dir, negative);
    return sign | (to_infinity ? inf : inf - 1);
}

/* Round a finite nonzero binary64 value once to format f in direction dir. */
ENGINE_FUNCTION uint64_t engine_round_double(const struct engine_format *f, double x,
                                             reprod_rounding dir)
{
    uint64_t bits = engine_double_bits(x);
    int field = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & 0xfffffffffffffull;
    int q = -1074;
    if (field != 0) {
        m |= 1ull << 52;
        q = field - 1075;
    }
    return engine_round_value(f, (int)(bits >> 63), m, q, 0, dir);
}

/* The bits of x rounded to nearest (ties to even) in format f, for any x: the ordered fold
 * of binary16 and bfloat16. Every NaN becomes the canonical one (the vector kernels and this
 * scalar path then agree whatever NaN the hardware made). */
ENGINE_FUNCTION uint64_t engine_round_double_nearest_any(const struct engine_format *f, double x)
{
    uint64_t bits = engine_double_bits(x);
    uint64_t sign = (bits >> 63) ? engine_sign_bit(f) : 0;
    uint64_t magnitude = bits & 0x7fffffffffffffffull;
    if (magnitude >= 0x7ff0000000000000ull) {
        if (magnitude > 0x7ff0000000000000ull) return f->nan_bits;
        return sign | engine_inf_bits(f);
    }
    if (magnitude == 0) return sign;
    return engine_round_double(f, x, REPROD_ROUND_NEAREST);
}

#endif /* REPROD_ENGINE_ROUND_H */
