/* engine_inner.h: the exact reduction of one element: the tiers that decide it cheaply, their
 * exactness conditions, and the superaccumulator of the general path.
 *
 * Every function here works on one element and is shared with the GPU kernels (one source of
 * truth for the arithmetic). The host engine runs the same tiers on vectors of elements
 * (engine.c, engine_avx2.c, engine_avx512.c, engine_distill.c, engine_beyond_window.c): the
 * arithmetic per term in
 * vector code, every decision by calling these functions lane by lane (see "Lane masks"). Which
 * tier decides an element never changes its bits: each computes the exact sum, or a pair that
 * rounds as it does, and rounds it once.
 *
 * The tiers, in the order an element meets them (enum engine_tier; the letters name their
 * proofs below, where they serve as cross-references):
 *
 *   name          proof  what decides the element                                  types
 *   WINDOW        (c)    the terms' exponents span at most the window: their        16, 32 bits
 *                        binary64 sum is exact
 *   EXACT_ERRORS  (c')   TwoSum cascade (s, t): t, the sum of its errors, is         binary64
 *                        proved exact from their magnitudes and the smallest term
 *   CERTIFIED     (d)    the cascade's s + t is certified to round as the exact     binary64
 *                        sum (a bound on t's error against the gap beside s + t)
 *   DISTILLED     (e)    the cascade run again over its own output, up to           binary64
 *                        ENGINE_DISTILL_PASSES times, each pass judged by (d), (c')
 *   MIDPOINT      (f)    a distilled sum on a midpoint whose side the rest decides  binary64
 *   BRACKET       (i)    the plain binary64 sum, +- a bound on its error, rounds    binary32,
 *                        to one value at both ends                                  bfloat16
 *   SPLIT         (h)    the terms split against powers of two (ExtractScalar):     binary32,
 *                        the parts' sums are exact                                  bfloat16
 *   CASCADE       (g)    the binary64 cascade over the terms (with distillation),   binary32,
 *                        rounded through the odd neighbour                          bfloat16
 *   GENERAL       --     the superaccumulator: every element the others leave      all
 *
 * (a) and (b) are lemmas of (c); binary32 meets BRACKET, SPLIT and CASCADE in that order (the
 * vector kernels may run SPLIT first on cancelling data: the same elements decided).
 */
#ifndef REPROD_ENGINE_INNER_H
#define REPROD_ENGINE_INNER_H

#include "engine/engine_round.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Configuration ----------------------------------------------------------------------
 * The superaccumulator is a fixed-point number: bit 0 weighs 2^ENGINE_ACC_LOW_EXPONENT, one
 * limb below the smallest subnormal double so that an average's quotient keeps its round bit;
 * 68 limbs of 32 bits reach 2^1070 > 2^31 * 2^1024, so any sum of < 2^31 doubles fits. */

#define ENGINE_ACC_LIMB_BITS    32      /* data bits per limb; the code shifts by 32 */
#define ENGINE_ACC_LOW_EXPONENT (-1106) /* weight of bit 0: 2^-1106 = 2^-1074 / 2^32 */
#define ENGINE_ACC_LIMBS        68      /* limbs 0..67: bits of weight 2^-1106 .. 2^1069 */

/* Which tier decided an element (0: none yet; the general path decides). */
enum engine_tier {
    ENGINE_TIER_NONE = 0,
    ENGINE_TIER_WINDOW,       /* (c) */
    ENGINE_TIER_EXACT_ERRORS, /* (c') */
    ENGINE_TIER_CERTIFIED,    /* (d) */
    ENGINE_TIER_DISTILLED,    /* (e) */
    ENGINE_TIER_MIDPOINT,     /* (f) */
    ENGINE_TIER_BRACKET,      /* (i) */
    ENGINE_TIER_SPLIT,        /* (h) */
    ENGINE_TIER_CASCADE,      /* (g) */
    ENGINE_TIER_GENERAL,
};

/* ---- Small helpers ---------------------------------------------------------------------- */

/* ceil(log2(n)) for 1 <= n <= 2^31 - 1. */
ENGINE_FUNCTION int engine_ceil_log2(int n)
{
    if (n <= 1) return 0;
#if defined(__CUDA_ARCH__)
    int l = 32 - __clz(n - 1);
#else
    int l = 32 - __builtin_clz((unsigned)(n - 1));
#endif
    return l < 31 ? l : 31;
}

/* Knuth's TwoSum: *sum = RN(a + b) and *error = a + b - *sum exactly (no overflow assumed). */
ENGINE_FUNCTION void engine_two_sum(double a, double b, double *sum, double *error)
{
    double s = a + b;
    double bb = s - a;
    *error = (a - (s - bb)) + (b - bb);
    *sum = s;
}

/* Bits of an exactly zero result (MPFR's mpfr_sum rule, which is IEEE addition's): -0 when
 * every term is -0, +0 when every term is +0, otherwise +0, or -0 when rounding down. */
ENGINE_FUNCTION uint64_t engine_zero_bits(const struct engine_format *f, reprod_rounding dir,
                                          int all_negative_zero, int all_positive_zero)
{
    int negative = all_negative_zero || (!all_positive_zero && dir == REPROD_ROUND_DOWN);
    return negative ? engine_sign_bit(f) : 0;
}

/* ---- Lane masks -------------------------------------------------------------------------
 * Every test that decides an element returns a mask: all ones (-1) where it holds, 0 where not,
 * computed with shifts, subtractions and bitwise operations, never a comparison or a branch on
 * the element's values (a branch on the call's parameters, the same for every element, is
 * fine). One element runs such a test branch-free (the GPU kernel, engine_exact_element); the
 * host kernels run the same function on each lane of a vector in a plain loop, which the
 * compiler turns into vector code (engine_lanes.h): one implementation of each decision for
 * both. A caller on one element reads a mask as a truth value. The bits of a double compare as
 * signed integers as the doubles do when both are >= 0 and not NaNs. */

#define ENGINE_MAGNITUDE 0x7fffffffffffffffll /* bits of a double but the sign */
#define ENGINE_EXPONENT  0x7ff0000000000000ll /* its exponent field; +infinity */
#define ENGINE_FRACTION  0x000fffffffffffffll /* its fraction field */

typedef int64_t engine_mask; /* -1 or 0 */

/* Unroll the next loop completely where its trip count is known when compiled: GCC vectorises a
 * lane loop of the host kernels only with no loop left inside it (clang needs no hint, and would
 * warn where the count is not known). */
#if defined(__CUDACC__)
#define ENGINE_UNROLL _Pragma("unroll")
#elif defined(__GNUC__) && !defined(__clang__)
#define ENGINE_UNROLL _Pragma("GCC unroll 8")
#else
#define ENGINE_UNROLL
#endif

/* The bits of a double as a signed integer, and back. */
ENGINE_FUNCTION int64_t engine_signed_bits(double x)
{
    return (int64_t)engine_double_bits(x);
}

ENGINE_FUNCTION double engine_from_signed_bits(int64_t bits)
{
    return engine_double_from_bits((uint64_t)bits);
}

/* x < 0 (>> of a negative int64_t shifts in sign bits: engine_round.h's assumptions). */
ENGINE_FUNCTION engine_mask engine_mask_negative(int64_t x)
{
    return x >> 63;
}

/* x == 0, for x >= 0. */
ENGINE_FUNCTION engine_mask engine_mask_zero(int64_t x)
{
    return (x - 1) >> 63;
}

/* x > y, for y >= 0: the subtraction runs unsigned (no overflow) and counts only when x >= 0. */
ENGINE_FUNCTION engine_mask engine_mask_above(int64_t x, int64_t y)
{
    return engine_mask_negative((int64_t)((uint64_t)y - (uint64_t)x)) & ~engine_mask_negative(x);
}

/* x and y equal as values (+0 and -0 too), for x and y not NaNs. */
ENGINE_FUNCTION engine_mask engine_mask_equal(double x, double y)
{
    int64_t a = engine_signed_bits(x), b = engine_signed_bits(y), differ = a ^ b;
    return ~engine_mask_negative(differ | (int64_t)(0 - (uint64_t)differ)) |
           (engine_mask_zero(a & ENGINE_MAGNITUDE) & engine_mask_zero(b & ENGINE_MAGNITUDE));
}

/* x is finite. */
ENGINE_FUNCTION engine_mask engine_mask_finite(double x)
{
    return engine_mask_negative((engine_signed_bits(x) & ENGINE_MAGNITUDE) - ENGINE_EXPONENT);
}

/* x where `mask`, y elsewhere, bit by bit. */
ENGINE_FUNCTION double engine_select(engine_mask mask, double x, double y)
{
    return engine_from_signed_bits((engine_signed_bits(x) & mask) |
                                   (engine_signed_bits(y) & ~mask));
}

/* The running minimum `low` of magnitude bits minus one (zeros: all ones, never the minimum)
 * with a term's bits taken in. */
ENGINE_FUNCTION int64_t engine_min_less_one(int64_t low, int64_t bits)
{
    int64_t less_one = (int64_t)(((uint64_t)bits - 1) & ENGINE_MAGNITUDE), step = less_one - low;
    return low + (step & engine_mask_negative(step));
}

/* ---- Loading and storing elements ------------------------------------------------------- */

/* The bit pattern of element i of an array of `type`. */
ENGINE_FUNCTION uint64_t engine_load_bits(reprod_type type, const void *array, size_t i)
{
    if (type == REPROD_FLOAT64) return ((const uint64_t *)array)[i];
    if (type == REPROD_FLOAT32) return ((const uint32_t *)array)[i];
    return ((const uint16_t *)array)[i];
}

ENGINE_FUNCTION void engine_store_bits(reprod_type type, void *array, size_t i, uint64_t bits)
{
    if (type == REPROD_FLOAT64)
        ((uint64_t *)array)[i] = bits;
    else if (type == REPROD_FLOAT32)
        ((uint32_t *)array)[i] = (uint32_t)bits;
    else
        ((uint16_t *)array)[i] = (uint16_t)bits;
}

/* The value of a bit pattern of `type` as a binary64, exactly. */
ENGINE_FUNCTION double engine_bits_to_double(reprod_type type, const struct engine_format *f,
                                             uint64_t bits)
{
    if (type == REPROD_FLOAT64) return engine_double_from_bits(bits);
    if (type == REPROD_FLOAT32) return (double)engine_float_from_bits((uint32_t)bits);
    return engine_small_to_double(f, bits);
}

/* ---- The general path: a superaccumulator ------------------------------------------------
 * A fixed-point number with bit 0 of weight 2^ENGINE_ACC_LOW_EXPONENT, in limbs of 32 bits
 * held in int64_t (Neal's "small accumulator"): adding a double adds its 53-bit significand,
 * split at a limb boundary, to three consecutive limbs with no carry, so up to 2^31 - 1 terms
 * fit before any limb could overflow. Carries are propagated once, when rounding. */

struct engine_accumulator {
    int64_t limb[ENGINE_ACC_LIMBS]; /* value = sum of limb[i] * 2^(32 i + LOW_EXPONENT) */
    int lowest;                     /* limbs outside [lowest, highest] are zero */
    int highest;                    /* (lowest > highest: nothing finite and nonzero added) */
    int has_nan;                    /* a NaN was added */
    int has_positive_inf;           /* +inf was added */
    int has_negative_inf;           /* -inf was added */
    int not_all_negative_zero;      /* some term was not -0 */
    int not_all_positive_zero;      /* some term was not +0 */
};

/* Make `a` empty. Needed once; engine_accumulator_round leaves it empty again. */
ENGINE_FUNCTION void engine_accumulator_clear(struct engine_accumulator *a)
{
    for (int i = 0; i < ENGINE_ACC_LIMBS; i++)
        a->limb[i] = 0;
    a->lowest = ENGINE_ACC_LIMBS;
    a->highest = -1;
    a->has_nan = a->has_positive_inf = a->has_negative_inf = 0;
    a->not_all_negative_zero = a->not_all_positive_zero = 0;
}

/* Add the binary64 x (any value) to `a`, exactly. */
ENGINE_FUNCTION void engine_accumulator_add(struct engine_accumulator *a, double x)
{
    uint64_t bits = engine_double_bits(x);
    uint64_t magnitude = bits & 0x7fffffffffffffffull;
    int negative = (int)(bits >> 63);
    a->not_all_negative_zero |= bits != 0x8000000000000000ull;
    a->not_all_positive_zero |= bits != 0;
    if (magnitude == 0) return;
    int field = (int)(magnitude >> 52);
    uint64_t m = magnitude & 0xfffffffffffffull;
    if (field == 0x7ff) {
        if (m != 0)
            a->has_nan = 1;
        else if (negative)
            a->has_negative_inf = 1;
        else
            a->has_positive_inf = 1;
        return;
    }
    int q = -1074;
    if (field != 0) {
        m |= 1ull << 52;
        q = field - 1075;
    }
    int position = q - ENGINE_ACC_LOW_EXPONENT; /* >= 32 */
    int i = position >> 5, offset = position & 31;
    uint64_t low = m << offset;                      /* bits 0..63 of m * 2^offset */
    uint64_t high = offset ? m >> (64 - offset) : 0; /* bits 64..84, below 2^21 */
    int64_t sign = -(int64_t)negative;               /* 0 or -1: conditional negation */
    a->limb[i] += ((int64_t)(low & 0xffffffffu) ^ sign) - sign;
    a->limb[i + 1] += ((int64_t)(low >> 32) ^ sign) - sign;
    a->limb[i + 2] += ((int64_t)high ^ sign) - sign;
    if (i < a->lowest) a->lowest = i;
    if (i + 2 > a->highest) a->highest = i + 2;
}

/* Propagate carries so that limbs [from, to) lie in [0, 2^32); limb `to` takes the rest. */
ENGINE_FUNCTION void engine_accumulator_carry(struct engine_accumulator *a, int from, int to)
{
    for (int i = from; i < to; i++) {
        int64_t carry = a->limb[i] >> 32; /* floor division by 2^32 */
        a->limb[i] &= 0xffffffff;
        a->limb[i + 1] += carry;
    }
}

/* Limb i of a normalised magnitude, zero outside [valid_low, ...). */
ENGINE_FUNCTION uint64_t engine_accumulator_digit(const struct engine_accumulator *a, int i,
                                                  int valid_low)
{
    return i >= valid_low ? (uint64_t)a->limb[i] : 0;
}

/* The sum held by `a`, divided by `divisor` (1 for a sum, N for an average), rounded once to
 * format f in direction dir; returns the bits and leaves `a` empty. */
ENGINE_FUNCTION uint64_t engine_accumulator_round(struct engine_accumulator *a,
                                                  const struct engine_format *f,
                                                  reprod_rounding dir, uint32_t divisor)
{
    uint64_t result;
    int low = a->lowest, high = a->highest, clear_low = low, top = high + 1;
    if (a->has_nan || (a->has_positive_inf && a->has_negative_inf)) {
        result = f->nan_bits;
    } else if (a->has_positive_inf || a->has_negative_inf) {
        result = engine_inf_bits(f) | (a->has_negative_inf ? engine_sign_bit(f) : 0);
    } else {
        int negative = 0;
        if (low <= high) {
            engine_accumulator_carry(a, low, high);
            negative = a->limb[high] < 0;
            if (negative) { /* magnitude: negate every limb, then normalise again */
                for (int i = low; i <= high; i++)
                    a->limb[i] = -a->limb[i];
                engine_accumulator_carry(a, low, high);
            }
            a->limb[high + 1] = a->limb[high] >> 32; /* the top limb is < 2^63: split it */
            a->limb[high] &= 0xffffffff;
            while (top >= low && a->limb[top] == 0)
                top--;
        }
        if (low > high || top < low) { /* nothing, or an exact cancellation */
            result = engine_zero_bits(f, dir, !a->not_all_negative_zero, !a->not_all_positive_zero);
        } else {
            int valid_low = low, sticky = 0;
            if (divisor > 1) {
                /* Long division, top limb first, continuing below `low` into zero limbs, until
                 * three limbs (>= 65 bits) from the quotient's first nonzero limb are known; what
                 * is left (remainder, undivided limbs) only matters as a sticky bit. The sum is
                 * a multiple of 2^-1074 = limb 1, so the quotient is nonzero. */
                uint64_t remainder = 0;
                int i = top, quotient_top = -1;
                for (; i >= 0; i--) {
                    uint64_t current = (remainder << 32) | (uint64_t)a->limb[i];
                    a->limb[i] = (int64_t)(current / divisor);
                    remainder = current % divisor;
                    if (quotient_top < 0 && a->limb[i] != 0) quotient_top = i;
                    if (quotient_top >= 0 && i <= quotient_top - 2) break;
                }
                if (i < 0) i = 0;
                sticky = remainder != 0;
                for (int k = i - 1; k >= low; k--)
                    sticky |= a->limb[k] != 0;
                valid_low = i;
                if (i < clear_low) clear_low = i;
                top = quotient_top;
            }
            /* The 64 bits from the leading one down, and a sticky bit for the rest. */
            uint64_t lead = (uint64_t)a->limb[top];
            int b = 63 - engine_leading_zeros(lead); /* 0..31 */
            uint64_t upper = (lead << 32) | engine_accumulator_digit(a, top - 1, valid_low);
            uint64_t third = engine_accumulator_digit(a, top - 2, valid_low);
            uint64_t m = (upper << (31 - b)) | (third >> (b + 1));
            sticky |= (third & ((1ull << (b + 1)) - 1)) != 0;
            for (int k = top - 3; k >= valid_low; k--)
                sticky |= a->limb[k] != 0;
            int q = 32 * top + b - 63 + ENGINE_ACC_LOW_EXPONENT;
            result = engine_round_value(f, negative, m, q, sticky, dir);
        }
    }
    for (int i = clear_low; i <= high + 1 && i < ENGINE_ACC_LIMBS; i++)
        a->limb[i] = 0;
    a->lowest = ENGINE_ACC_LIMBS;
    a->highest = -1;
    a->has_nan = a->has_positive_inf = a->has_negative_inf = 0;
    a->not_all_negative_zero = a->not_all_positive_zero = 0;
    return result;
}

/* ---- The fast paths ---------------------------------------------------------------------
 * Notation for one element: its nonzero finite terms x_k, E the largest and e the smallest of
 * their exponents (floor(log2|x|), a subnormal counting as the format's smallest normal
 * exponent, which only makes the test stricter), p the precision of the input type, N the
 * number of terms, L = ceil(log2 N). Every term is a multiple of u = 2^(e - p + 1) (its ulp is)
 * and |x_k| < 2^(E+1).
 *
 * Binary16, bfloat16, binary32 (p = 11, 8, 24): sum the terms in binary64, any order. Every
 * partial sum is a multiple of u of magnitude < N 2^(E+1) <= 2^(E+1+L), so it has at most
 * E + 1 + L - (e - p + 1) = (E - e) + L + p significant bits, and it is exact in binary64 when
 *     E - e <= 53 - p - L                                  (29 - L for binary32)
 * (no overflow: 2^(E+1+L) <= 2^159). The exact double is then rounded once.
 *
 * Binary64 (p = 53): s_0 = x_0, (s_k, e_k) = TwoSum(s_{k-1}, x_k), t = sum of e_k in binary64.
 * (a) |s_k| <= (k+1) 2^(E+1) by induction, as RN is monotone and (k+1) 2^(E+1) is a double;
 *     so |s_{k-1} + x_k| <= 2^(E+1+L). Overflow is not excluded beforehand but detected
 *     afterwards: a partial sum that overflows becomes infinite, every later s and t is then
 *     inf or NaN, and so is s + t; the fast path requires s + t finite, which also rejects
 *     infinite and NaN terms. Without overflow, TwoSum is exact.
 * (b) every s_k is a multiple of u (RN of a multiple of u is one: if it is inexact the ulp is
 *     coarser than u), hence so is every e_k, and |e_k| <= ulp/2 of a number of magnitude at
 *     most 2^(E+1+L) (that power of two itself rounds exactly): |e_k| <= 2^(E+L-53).
 * (c) every partial sum of the e_k is a multiple of u below (N-1) 2^(E+L-53) < 2^(E+2L-53)
 *     in magnitude; it is a double when that is at most 2^53 u = 2^(e+1), that is when
 *     E - e <= 54 - 2L.
 * Then t is exact, the exact sum is s + t, and (S, T) = TwoSum(s, t) gives S = RN(sum) and
 * T = sum - S exactly: the sign of T says whether a directed rounding steps S by one ulp (to
 * infinity from the largest double when rounding away: the right overflow).
 * (c') The binary64 kernels test (c) on the errors themselves, which are usually far below
 *     the bound of (b), and need only the smallest term: every partial sum of the e_k is a
 *     multiple of u at most sum |e_k| in magnitude, a double when that is at most 2^53 u. With
 *     A = fl(sum |e_k|) (recursive, nonnegative terms: sum |e_k| <= A (1 + N 2^-52)), A <= 2^52
 *     u suffices: t is exact. 2^52 u = 2^(f - 1023), f the exponent field of the smallest
 *     nonzero term (at least 1), a power of two: one integer compare of A's bits with f << 52.
 *     It accepts what the window does except its worst cases (then: (d)), and more.
 *
 * (d) Beyond the window t may be inexact, but the rounding of the exact sum is often still
 *     known from s + t: the TwoSum cascade itself stays exact for any spread, so the exact sum
 *     is s + t + eta with eta = (sum of e_k) - t the error of t's recursive summation alone,
 *     |eta| <= gamma_{N-1} sum |e_k| (Higham; additions have relative error <= 2^-53 also
 *     when subnormal, as such a sum is exact). With A = fl(sum |e_k|) >= (1 - 2^-53)^(N-1)
 *     sum |e_k| summed alongside t, |eta| <= N 2^-53 (1 + 2^-20) A <= D = fl(2N A) 2^-52 for
 *     N < 2^31 (2N A is a multiple of 2^-1074: exact if subnormal, relative error 2^-53
 *     otherwise). Let (S, T) = TwoSum(s, t), exact, and h the half gap beside S on T's side:
 *     2^(k-53) for 2^k <= |S| < 2^(k+1), halved when S = +-2^k and T points to zero. If
 *     |T| > D and |T| + D < h, then the exact sum - S = T + eta has the sign of T and lies
 *     strictly within h of S: S = RN(exact sum), no tie, and the sign of T says where the
 *     exact sum lies: exactly what the finishing below uses. Scaled by 2^53 (exact: |T| <=
 *     2^970): |T| 2^53 > Z and RN(G - |T| 2^53) > Z with Z = 2 fl(2N A), G = h 2^53 = the
 *     power-of-two part of |S| (halved as said); RN is monotone, so the rounded difference
 *     exceeding Z implies the exact one does. A subnormal or zero S gives G = 0 and fails;
 *     NaN fails every compare. A = 0 means t is exact.
 *     This covers any spread unless the sum cancels to well below the largest term or lies
 *     within about N^2 2^-106 of a double or a midpoint (then: the general path).
 *     Rounding to nearest needs less: only S = RN(exact sum), not the side, so |T| + D < h
 *     suffices (then |exact - S| = |T + eta| < h), with h the smaller half gap when S is a
 *     power of two whatever T's sign. That accepts T = 0 too: sums that are (nearly) doubles,
 *     common when the terms are of similar size, which otherwise only the window proves.
 *
 * For the 16- and 32-bit types the partial sums cannot overflow; infinite and NaN terms are
 * rejected by their exponent field (all ones).
 *
 * Exact zero: with the sum started at -0, IEEE addition gives -0 exactly when every term is
 * -0; only "round down" needs another look (mixed zeros must give -0, all +0 must give +0). */

/* Largest E - e for which the binary64 fast path is exact, for precision p and N terms. */
ENGINE_FUNCTION int engine_fast_window(int precision, int count)
{
    int l = engine_ceil_log2(count);
    return precision == 53 ? 54 - 2 * l : 53 - precision - l;
}

/* Whether the exponent span of the terms fits the window, given the largest magnitude bits
 * and (the smallest nonzero magnitude bits - 1), where zeros count as all ones so that they
 * never win the minimum. Infinities and NaN are the callers' business. */
ENGINE_FUNCTION int engine_fast_span_ok(const struct engine_format *f, uint64_t max_magnitude,
                                        uint64_t min_nonzero_less_one, int window)
{
    int fraction_bits = f->precision - 1;
    int64_t e_max = (int64_t)(max_magnitude >> fraction_bits);
    int64_t e_min = (int64_t)((min_nonzero_less_one + 1) >> fraction_bits);
    if (e_min < 1) e_min = 1;
    return e_max - e_min <= window;
}

/* Whether t = fl(sum of e_k) is exact by (c'): error_sum = fl(sum |e_k|), and the smallest
 * nonzero term's magnitude bits minus one (zeros count as all ones: never the minimum). */
ENGINE_FUNCTION engine_mask engine_errors_exact(double error_sum, uint64_t min_nonzero_less_one)
{
    int64_t field = (int64_t)(((min_nonzero_less_one + 1) & ENGINE_MAGNITUDE) >> 52);
    field |= engine_mask_zero(field) & 1; /* at least 1 */
    return ~engine_mask_above(engine_signed_bits(error_sum), field << 52);
}

/* The same for binary32 terms held as doubles, from the smallest nonzero term's binary32
 * magnitude bits minus one: each term is a multiple of u = 2^(f - 150), f that term's binary32
 * exponent field (at least 1: subnormals are multiples of 2^-149), and 2^52 u = 2^(f - 98) is
 * the double of field f + 925. */
ENGINE_FUNCTION engine_mask engine_errors_exact_float32(double error_sum,
                                                        int64_t min_nonzero_less_one)
{
    int64_t field = ((min_nonzero_less_one + 1) & 0x7fffffff) >> 23;
    field |= engine_mask_zero(field) & 1; /* at least 1 */
    return ~engine_mask_above(engine_signed_bits(error_sum), (field + 925) << 52);
}

/* Whether s + t rounds as the exact sum s + (sum of e_k) does in direction dir, t = fl(sum of
 * e_k) and error_sum = fl(sum |e_k|) over N = count terms (see (d) above); the caller checks
 * that s + t is finite. */
ENGINE_FUNCTION engine_mask engine_rounding_certified(double s, double t, double error_sum,
                                                      int count, reprod_rounding dir)
{
    double S, T;
    engine_two_sum(s, t, &S, &T);
    const engine_mask nearest = -(engine_mask)(dir == REPROD_ROUND_NEAREST); /* every element */
    int64_t S_bits = engine_signed_bits(S), T_bits = engine_signed_bits(T);
    double G = engine_from_signed_bits(S_bits & ENGINE_EXPONENT); /* 2^k; 0 when S is subnormal */
    engine_mask halved = engine_mask_zero(S_bits & ENGINE_FRACTION) &
                         (nearest | engine_mask_negative(S_bits ^ T_bits)); /* T toward zero */
    G = engine_select(halved, G * 0.5, G);
    double tail = engine_from_signed_bits(T_bits & ENGINE_MAGNITUDE) * 0x1p53;
    int64_t Z_bits = engine_signed_bits(error_sum * (2.0 * count) * 2.0); /* >= 0, or a NaN */
    engine_mask inside = (nearest | engine_mask_above(engine_signed_bits(tail), Z_bits)) &
                         engine_mask_above(engine_signed_bits(G - tail), Z_bits);
    return engine_mask_zero(engine_signed_bits(error_sum)) | inside;
}

/* Whether a binary64 value is finite (integer test: no libm, no environment). */
ENGINE_FUNCTION int engine_is_finite(double x)
{
    return (engine_double_bits(x) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

/* Bits of an exactly zero fast-path result: `sum` is the zero IEEE addition from -0 gave;
 * any_nonzero says whether some term was nonzero (-1: unknown, look). */
ENGINE_FUNCTION uint64_t engine_fast_zero(const struct engine_format *f, reprod_type type,
                                          reprod_rounding dir, double sum, int any_nonzero,
                                          const void *const *contributions, int count, size_t index)
{
    if (any_nonzero < 0) {
        uint64_t magnitude_mask = engine_sign_bit(f) - 1;
        any_nonzero = 0;
        for (int k = 0; k < count; k++)
            any_nonzero |= (engine_load_bits(type, contributions[k], index) & magnitude_mask) != 0;
    }
    if (any_nonzero || engine_double_bits(sum) != 0) /* cancellation, or every term -0 */
        return engine_zero_bits(f, dir, !any_nonzero && engine_double_bits(sum) != 0, 0);
    if (dir != REPROD_ROUND_DOWN) return 0;
    for (int k = 0; k < count; k++) /* all zeros, not all -0: is any of them -0? */
        if (engine_load_bits(type, contributions[k], index) != 0)
            return engine_zero_bits(f, dir, 0, 0);
    return 0;
}

/* Round S / N, S an exact nonzero binary64 sum of binary32, bfloat16 or binary16 terms, once
 * to format f. q = RN(S / N) is normal and r = S - qN is exact (a multiple of ulp(q) below N
 * ulp(q)), so S / N lies strictly beside q on the side of r when r != 0: pass the truncation
 * with a sticky bit. */
ENGINE_FUNCTION uint64_t engine_round_quotient(const struct engine_format *f, double sum, int count,
                                               reprod_rounding dir)
{
    double n = (double)count;
    double q = sum / n;
    double r = fma(-q, n, sum);
    uint64_t bits = engine_double_bits(q);
    int negative = (int)(bits >> 63);
    uint64_t m = (bits & 0xfffffffffffffull) | (1ull << 52);
    int exponent = (int)((bits >> 52) & 0x7ff) - 1075;
    int sticky = r != 0;
    if (sticky && ((r < 0) != negative)) m -= 1; /* |S / N| < |q|: truncate to the double below */
    return engine_round_value(f, negative, m, exponent, sticky, dir);
}

/* Round the exact binary64 sum `sum` of a fast-path element of a 16- or 32-bit type. */
ENGINE_FUNCTION uint64_t engine_fast_finish(const struct engine_format *f, reprod_type type,
                                            reprod_op op, reprod_rounding dir, double sum,
                                            int any_nonzero, const void *const *contributions,
                                            int count, size_t index)
{
    if (sum == 0)
        return engine_fast_zero(f, type, dir, sum, any_nonzero, contributions, count, index);
    if (op == REPROD_AVG) return engine_round_quotient(f, sum, count, dir);
    return engine_round_double(f, sum, dir);
}

/* Round the exact unevaluated sum s + t of a binary64 fast-path element (see (c) above). */
ENGINE_FUNCTION uint64_t engine_fast_finish_double(const struct engine_format *f,
                                                   reprod_rounding dir, double s, double t,
                                                   int any_nonzero,
                                                   const void *const *contributions, int count,
                                                   size_t index)
{
    double S, T;
    engine_two_sum(s, t, &S, &T);
    if (S == 0) /* then s + t = 0 exactly, and t = 0 when every term is zero */
        return engine_fast_zero(f, REPROD_FLOAT64, dir, t == 0 ? s : 0.0, any_nonzero,
                                contributions, count, index);
    uint64_t bits = engine_double_bits(S);
    if (T == 0 || dir == REPROD_ROUND_NEAREST) return bits;
    int negative = S < 0;
    int beyond = (T < 0) == negative; /* the exact sum is farther from zero than S */
    if (engine_rounds_away(dir, negative)) return bits + (beyond ? 1 : 0);
    return bits - (beyond ? 0 : 1); /* S != 0 is a multiple of u: no underflow to zero */
}

/* AVG of a binary64 fast-path element when N = 2^k, from `bits`, the sum rounded in the
 * direction: scaling by 2^-k is exact and commutes with rounding as long as the quotient is
 * normal; |q| >= 2^-1021 keeps a binade of margin, since just below 2^-1022 the subnormal grid
 * is coarser than the scaled one. A sum that rounded to infinity (just above the largest
 * double, rounding away) has a finite mean: not here either. Returns 0 where it does not
 * apply (then take the general path). */
ENGINE_FUNCTION int engine_fast_average_double(uint64_t *bits, int count)
{
    if (count & (count - 1)) return 0;
    double sum = engine_double_from_bits(*bits);
    double q = sum * (1.0 / count); /* 1/N is a power of two: exact */
    uint64_t magnitude = engine_double_bits(q) & 0x7fffffffffffffffull;
    if (sum != 0 && magnitude < (2ull << 52)) /* below 2^-1021: the general path */
        return 0;
    if (magnitude >= 0x7ff0000000000000ull) /* the sum overflowed */
        return 0;
    *bits = engine_double_bits(q);
    return 1;
}

/* Whether the binary64 fast path serves `op` for N terms (AVG only for N a power of two). */
ENGINE_FUNCTION int engine_fast_double_serves(reprod_op op, int count)
{
    return op == REPROD_SUM || (count & (count - 1)) == 0;
}

/* ---- The distillation tier (binary64) ----------------------------------------------------
 * (e) When the certificate refuses a binary64 element (its sum cancels far below its terms, or
 *     the spread makes t too coarse), the cascade is run again over its own output. The
 *     cascade is error-free: the N doubles [e_1, ..., e_{N-1}, s] (errors first, the sum last)
 *     hold exactly the exact sum, so a cascade over them gives a new (s, t, A) of which (d)
 *     holds word for word (N terms again). Each pass leaves errors about 2^-53 N times the
 *     previous ones' size (Ogita, Rump and Oishi's SumK), whatever the cancellation, so a sum
 *     that cancels by c bits is decided after about c / 50 more passes. Up to
 *     ENGINE_DISTILL_PASSES passes after the first, then the general path. Overflow inside a
 *     pass shows, as in (a), as a non-finite s + t: refused. The work per element is the same
 *     for every element of a block (no branch between elements): GPU-friendly, and the host
 *     kernels run it on vectors of refused lanes (engine_distill.c). */

/* (f) A pass can leave the sum on a midpoint: its last error c is exactly half an ulp of s
 *     (adding numbers of neighbouring binades often needs just one bit more), the errors below
 *     it (R, far smaller) decide the side, and t = fl(c + R) = c has lost them; later passes
 *     change nothing (the expansion is distilled already). With (S, T) = TwoSum(s, c), exact,
 *     |T| = h (the half gap beside S on T's side), R' = fl(sum of the rest), A_R = fl(sum of
 *     |rest|) and Z as in (d): if |R'| 2^53 > Z and h 2^53 - |R'| 2^53 > Z, R has the sign of
 *     R' and |R| < h, so the exact sum lies strictly between S and its neighbour S + 2T, past
 *     the midpoint when R has T's sign. The pair (S + 2T, -T/2) or (S, T/2) then rounds as the
 *     exact sum in every direction in the finishing below. */

#define ENGINE_DISTILL_TERMS  64 /* up to this many contributions (N doubles per element) */
#define ENGINE_DISTILL_PASSES 2  /* passes after the first, each followed by (d) */

/* One pass of the cascade over v[0..n-1] in place: v becomes [e_1, ..., e_{n-1}, s]; *s, *t,
 * *error_sum as in (d). */
ENGINE_FUNCTION void engine_distill_pass(double *v, int n, double *s_out, double *t_out,
                                         double *error_sum_out)
{
    double s = v[0], t = 0.0, error_sum = 0.0;
    for (int k = 1; k < n; k++) {
        double e;
        engine_two_sum(s, v[k], &s, &e);
        v[k - 1] = e;
        t += e;
        error_sum += fabs(e);
    }
    v[n - 1] = s;
    *s_out = s;
    *t_out = t;
    *error_sum_out = error_sum;
}

/* The min over the errors a pass left in v[0..n-2] of their magnitude bits minus one (zeros:
 * all ones), for (c'): each error is a multiple of its own ulp, so of the smallest one's. */
ENGINE_FUNCTION uint64_t engine_distill_errors_low(const double *v, int n)
{
    int64_t low = ENGINE_MAGNITUDE;
    for (int k = 0; k < n - 1; k++)
        low = engine_min_less_one(low, engine_signed_bits(v[k]));
    return (uint64_t)low;
}

/* The midpoint rule (f) for a distilled expansion whose last two terms are c and s (`top`),
 * given rest = fl(sum of the others) and rest_abs = fl(sum of their magnitudes), summed from 0 in
 * their order, over N = count terms in all (N >= 3): where it applies, (s, t) that round as the
 * exact sum in every direction. */
ENGINE_FUNCTION engine_mask engine_midpoint(double top, double c, double rest, double rest_abs,
                                            int count, double *s_out, double *t_out)
{
    double S, T;
    engine_two_sum(top, c, &S, &T);
    int64_t S_bits = engine_signed_bits(S), T_bits = engine_signed_bits(T);
    int64_t power = S_bits & ENGINE_EXPONENT; /* 2^k: far from both ends of the range */
    engine_mask in_range =
        ~engine_mask_negative(power - (23ll << 52)) & engine_mask_negative(power - ENGINE_EXPONENT);
    engine_mask halved =
        engine_mask_zero(S_bits & ENGINE_FRACTION) & engine_mask_negative(S_bits ^ T_bits);
    double h = engine_from_signed_bits(power) * 0x1p-53; /* the half gap on T's side */
    h = engine_select(halved, h * 0.5, h);
    engine_mask on_midpoint = engine_mask_zero((T_bits & ENGINE_MAGNITUDE) ^ engine_signed_bits(h));
    int64_t Z_bits = engine_signed_bits(rest_abs * (2.0 * count) * 2.0);
    double tail = engine_from_signed_bits(engine_signed_bits(rest) & ENGINE_MAGNITUDE) * 0x1p53;
    engine_mask side_known = engine_mask_above(engine_signed_bits(tail), Z_bits) &
                             engine_mask_above(engine_signed_bits(h * 0x1p53 - tail), Z_bits);
    double next = S + 2.0 * T; /* the neighbour of S on T's side: exact */
    engine_mask short_of_midpoint = engine_mask_negative(engine_signed_bits(rest) ^ T_bits);
    *s_out = engine_select(short_of_midpoint, S, next);
    *t_out = engine_select(short_of_midpoint, 0.5 * T, -0.5 * T);
    return in_range & on_midpoint & side_known & engine_mask_finite(next);
}

/* The midpoint rule for a distilled v[0..n-1] = [rest..., c, s]: as engine_midpoint, 0 for
 * n < 3. */
ENGINE_FUNCTION engine_mask engine_midpoint_of(const double *v, int n, double *s_out, double *t_out)
{
    if (n < 3) return 0;
    double rest = 0.0, rest_abs = 0.0;
    for (int k = 0; k < n - 2; k++) {
        rest += v[k];
        rest_abs += fabs(v[k]);
    }
    return engine_midpoint(v[n - 1], v[n - 2], rest, rest_abs, n, s_out, t_out);
}

/* The distillation tier for binary64 element `index` (see (e)), rounding in dir: the tier that
 * decided (DISTILLED, or MIDPOINT for the rule (f)) with (s, t) whose s + t rounds as the exact
 * sum, ENGINE_TIER_NONE when it does not decide (then: the general path).
 * Its first pass is the fast path's cascade, refused already; each later one is judged by
 * (d), then by (c') with u from the smallest nonzero error the pass left (every error is a
 * multiple of its own ulp, so of that u; a finer criterion than the terms' smallest), then
 * by (f). */
ENGINE_FUNCTION enum engine_tier engine_distill_element(const void *const *contributions, int count,
                                                        size_t index, reprod_rounding dir,
                                                        double *s_out, double *t_out)
{
    double v[ENGINE_DISTILL_TERMS];
    if (count < 1 || count > ENGINE_DISTILL_TERMS) return ENGINE_TIER_NONE;
    for (int k = 0; k < count; k++)
        v[k] = engine_double_from_bits(engine_load_bits(REPROD_FLOAT64, contributions[k], index));
    double s, t, error_sum;
    engine_distill_pass(v, count, &s, &t, &error_sum);
    for (int pass = 0; pass < ENGINE_DISTILL_PASSES; pass++) {
        engine_distill_pass(v, count, &s, &t, &error_sum);
        if (!engine_is_finite(s + t)) continue;
        double s_tie, t_tie;
        enum engine_tier tier = ENGINE_TIER_NONE;
        if (engine_rounding_certified(s, t, error_sum, count, dir) ||
            engine_errors_exact(error_sum, engine_distill_errors_low(v, count)))
            tier = ENGINE_TIER_DISTILLED;
        else if (engine_midpoint_of(v, count, &s_tie, &t_tie)) {
            tier = ENGINE_TIER_MIDPOINT;
            s = s_tie;
            t = t_tie;
        }
        if (tier) {
            *s_out = s;
            *t_out = t;
            return tier;
        }
    }
    return ENGINE_TIER_NONE;
}

/* The distillation tier's result for element `index` (binary64, an op the fast path serves):
 * the tier that decided, with its bits, ENGINE_TIER_NONE when the general path must decide. Only
 * for elements engine_exact_fast
 * refused, which hold a nonzero term (a zero sum is then +0, or -0 rounding down). */
ENGINE_FUNCTION enum engine_tier engine_exact_distilled(reprod_type type, reprod_op op,
                                                        reprod_rounding dir,
                                                        const void *const *contributions, int count,
                                                        size_t index, uint64_t *bits_out)
{
    double s, t;
    if (type != REPROD_FLOAT64 || !engine_fast_double_serves(op, count)) return ENGINE_TIER_NONE;
    enum engine_tier tier = engine_distill_element(contributions, count, index, dir, &s, &t);
    if (!tier) return ENGINE_TIER_NONE;
    const struct engine_format f = engine_format_of(REPROD_FLOAT64);
    uint64_t bits = engine_fast_finish_double(&f, dir, s, t, 1, contributions, count, index);
    if (op != REPROD_SUM && !engine_fast_average_double(&bits, count)) return ENGINE_TIER_NONE;
    *bits_out = bits;
    return tier;
}

/* ---- Binary32 beyond its window ------------------------------------------------------------
 * (g) Binary32 terms whose exponents spread wider than the window of the fast path (29 - L
 *     binades: gradients of 1e-2 and 1e-12 in one element already do) are exact doubles, and
 *     the binary64 cascade over them is error-free at any spread. When (c') proves its t exact
 *     (after the first pass, with u the smallest term's float ulp, or after up to
 *     ENGINE_DISTILL_PASSES passes of (e), judged on the errors they leave), the exact sum is
 *     S + T = TwoSum(s, t), |T| at most half an ulp of S.
 *     Rounding it to binary32 once: S itself when T = 0; otherwise round to odd: of S and its
 *     neighbour toward T (between which the exact sum lies, with no double between), the one
 *     with an odd significand. Floats and midpoints between floats are even doubles (53 >= 24 +
 *     2), so no rounding boundary lies between the exact sum and that odd double: every
 *     direction rounds the two alike. An average needs T = 0 (the odd double's quotient is not
 *     so safe). */

/* (h) Before the cascade, a cheaper exact sum for spreads up to 82 - 2L binades (L =
 *     ceil(log2 N)): each term x, a binary32 value held as a double with |x| < 2^e (e from the
 *     largest exponent field F: e = F - 126), is split against sigma = 2^(e + L) by Rump, Ogita
 *     and Oishi's ExtractScalar (Accurate floating-point summation I, Lemma 3.2): q = (sigma +
 *     x) - sigma and r = x - q, both exact, q a multiple of 2^(e + L - 53) with |q| <= 2^e and
 *     |r| <= 2^(e + L - 53). The N q's sum exactly (multiples of 2^(e + L - 53), at most
 *     2^(e + L) = 2^53 of those steps), and so do the N r's: multiples of the smallest term's
 *     float ulp 2^(f - 150) (f: the smallest nonzero field, at least 1; a term whose own ulp
 *     exceeds 2^(e + L - 53) has r = 0), at most 2^(e + 2L - 53) <= 2^(f - 97) when F - f <=
 *     82 - 2L (tight: positive terms just below a midpoint of the q grid reach |r| = 2^(e + L
 *     - 53)). TwoSum of the two sums is then the exact sum as S + T. Like TwoSum, the split
 *     needs rounding to nearest (the host engine sets it; CUDA's default). Five operations a
 *     term (the cascade: eight and the certificate), no branch between elements, any N;
 *     infinities and NaNs (F = 255) are left to the cascade. Bfloat16 terms are multiples of
 *     2^(f - 134): 16 binades more (98 - 2L).
 *
 *     Wider spans split again: the r's of one level (|r| <= 2^e', e' = e + L - 53) are split
 *     against sigma' = 2^(e' + L) the same way, their q's summed into a second accumulator, and
 *     so on; k levels leave r's of at most 2^(e + k (L - 53)) and take F - f <= 29 + 53 k -
 *     (k + 1) L binades (45 + ... for bfloat16); every term's r is a multiple of the smallest
 *     term's ulp at every level (a grid finer than a term's ulp leaves that term whole). Each
 *     element takes the fewest levels its span needs, up to ENGINE_SPLIT_LEVELS (5: every
 *     finite binary32 span, 253 binades, for N <= 64), 4 k + 1 operations a term; a lane of a
 *     vector that runs more levels than its own has sigma = 0 at the extra ones (q = r, the
 *     rest 0), so its accumulators and everything below are those of its own k.
 *     The k + 1 exact accumulators hi_1, ..., hi_k, lo (each within 2^L units of the grid of
 *     the one above) give S + T by a TwoSum chain from the bottom: s = lo, then (s, e_i) =
 *     TwoSum(hi_i, s) for i = k .. 1, the exact sum s + e_1 + ... + e_k. The errors below e_1
 *     are summed by TwoSum too, w = e_k + ... + e_2 with D the sum of the |delta| they drop,
 *     and T = fl(w + e_1). When D = 0 (always for k <= 2), T is the remainder rounded once: its
 *     sign and zero are the remainder's, and fl(s + T) = s bounds it below the spacing toward
 *     T: S = s and T serve round to odd. Otherwise the remainder is w + e_1 + (the deltas):
 *     |T| >= 4 D keeps T's sign, and fl(s + T) = s with fl(s +- 4 D) = s (D at most an eighth
 *     of the spacing either way) still bounds it below the spacing. An element whose chain
 *     fails these (cancellation among the accumulators) takes the cascade (g). k = 1 never
 *     fails: its chain is the one TwoSum. */
#define ENGINE_SPLIT_LEVELS 5

/* Term `index` of a binary32 or bfloat16 array as binary32 bits (a bfloat16 is the top half
 * of a binary32: (g) and (h) serve it as they serve binary32, its sum rounded to bfloat16). */
ENGINE_FUNCTION uint32_t engine_load_float32_bits(reprod_type type, const void *array, size_t index)
{
    uint32_t bits = (uint32_t)engine_load_bits(type, array, index);
    return type == REPROD_BFLOAT16 ? bits << 16 : bits;
}

/* The widest span of exponent fields (h) takes with `levels` levels for N = count terms of
 * the type (binary32 or bfloat16). */
ENGINE_FUNCTION int engine_split_limit(reprod_type type, int count, int levels)
{
    int base = type == REPROD_BFLOAT16 ? 45 : 29;
    return base + 53 * levels - (levels + 1) * engine_ceil_log2(count);
}

/* The split's parameters for N = count terms of the type (binary32 or bfloat16), the same for
 * every element. */
struct engine_split_rule {
    int32_t limit[ENGINE_SPLIT_LEVELS + 1]; /* limit[k]: engine_split_limit of k levels (k >= 1) */
    int64_t log2_count;                     /* L = ceil(log2 N) */
    double step;                            /* 2^(L - 53): one level's sigma over the one before */
};

ENGINE_FUNCTION struct engine_split_rule engine_split_rule_of(reprod_type type, int count)
{
    struct engine_split_rule rule;
    rule.limit[0] = 0;
    for (int k = 1; k <= ENGINE_SPLIT_LEVELS; k++)
        rule.limit[k] = engine_split_limit(type, count, k);
    rule.log2_count = engine_ceil_log2(count);
    rule.step = engine_double_from_bits((uint64_t)(rule.log2_count - 53 + 1023) << 52);
    return rule;
}

/* The span of the terms' exponent fields (the largest minus the smallest nonzero one, at least 1;
 * -1 when every term is zero), from their largest binary32 magnitude bits and their smallest
 * nonzero magnitude bits minus one (zeros: all ones); beyond every limit (4096 more) when a term
 * is infinite or NaN. */
ENGINE_FUNCTION int32_t engine_split_span(int32_t largest, int32_t smallest_less_one)
{
    int32_t field_max = largest >> 23;
    int32_t field_min = (int32_t)(((uint32_t)smallest_less_one + 1) & 0x7fffffffu) >> 23;
    field_min = field_min > 1 ? field_min : 1;
    return field_max - field_min + (field_max > 254 ? 4096 : 0); /* field 255: inf, NaN */
}

/* Whether a span fits the limit of `levels` levels. */
ENGINE_FUNCTION int32_t engine_split_fits(const struct engine_split_rule *rule, int32_t span,
                                          int levels)
{
    return span <= rule->limit[levels] ? -1 : 0;
}

/* The levels the split takes for a span: the fewest whose limit it fits, 0 when none does. */
ENGINE_FUNCTION int32_t engine_split_levels_for(const struct engine_split_rule *rule, int32_t span)
{
    int32_t levels = 1;
    for (int k = 1; k < ENGINE_SPLIT_LEVELS; k++)
        levels += 1 + engine_split_fits(rule, span, k); /* one more beyond each limit */
    return levels & engine_split_fits(rule, span, ENGINE_SPLIT_LEVELS);
}

/* The levels the split (h) takes, from the terms' largest binary32 magnitude bits and their
 * smallest nonzero magnitude bits minus one (zeros: all ones): the fewest whose limit the span
 * fits, 0 when none up to ENGINE_SPLIT_LEVELS does or a term is infinite or NaN. */
ENGINE_FUNCTION int engine_split_levels(reprod_type type, uint32_t high, uint32_t low, int count)
{
    struct engine_split_rule rule = engine_split_rule_of(type, count);
    return engine_split_levels_for(&rule, engine_split_span((int32_t)high, (int32_t)low));
}

/* sigma = 2^(e + L) of the split's (h) first level from the largest magnitude bits (e = F - 126, F
 * at least 1); each level's is 2^(L - 53) times the one before. */
ENGINE_FUNCTION int32_t engine_split_sigma_field(const struct engine_split_rule *rule, int32_t high)
{
    int32_t field = high >> 23;
    field = field > 1 ? field : 1;
    return field - 126 + (int32_t)rule->log2_count + 1023;
}

ENGINE_FUNCTION double engine_split_sigma(const struct engine_split_rule *rule, int64_t high)
{
    return engine_from_signed_bits((int64_t)engine_split_sigma_field(rule, (int32_t)high) << 52);
}

/* The sigma of level `level` >= 1 from the one before, for an element whose terms span `span`:
 * 0 when the element takes fewer levels (then q = r there, and the levels below get nothing:
 * the accumulators of a vector lane that runs more levels than its own are its own ones'). */
ENGINE_FUNCTION double engine_split_next_sigma(const struct engine_split_rule *rule,
                                               double previous, int64_t span, int level)
{
    return engine_select(engine_mask_above(span, rule->limit[level]), previous * rule->step, 0.0);
}

/* The split's (h) accumulators of element `index` with `levels` levels (engine_split_levels's),
 * given the terms' largest binary32 magnitude bits: hi[0..levels-1] (largest first) and *lo,
 * whose sum is the exact sum of the terms. */
ENGINE_FUNCTION void engine_split_sums(reprod_type type, const void *const *contributions,
                                       int count, size_t index, int levels, uint32_t largest,
                                       double *hi, double *lo)
{
    const struct engine_split_rule rule = engine_split_rule_of(type, count);
    double sigma[ENGINE_SPLIT_LEVELS], low = 0.0;
    sigma[0] = engine_split_sigma(&rule, largest);
    for (int i = 0; i < levels; i++) {
        if (i > 0) sigma[i] = sigma[i - 1] * rule.step; /* the element's own levels */
        hi[i] = 0.0;
    }
    for (int k = 0; k < count; k++) {
        uint32_t bits = engine_load_float32_bits(type, contributions[k], index);
        double r = (double)engine_float_from_bits(bits);
        for (int i = 0; i < levels; i++) {
            double q = (sigma[i] + r) - sigma[i];
            hi[i] += q;
            r -= q;
        }
        low += r;
    }
    *lo = low;
}

/* The split's (h) chain over its accumulators hi[0..levels-1] (largest first) and lo: 1 with S + T
 * fit for round to odd, 0 when the chain cannot tell. */
ENGINE_FUNCTION engine_mask engine_split_chain(const double *hi, int levels, double lo,
                                               double *S_out, double *T_out)
{
    double s = lo, w = 0.0, D = 0.0, e = 0.0;
    ENGINE_UNROLL for (int i = levels - 1; i >= 0; i--)
    {
        engine_two_sum(hi[i], s, &s, &e);
        if (i > 0 && i == levels - 1) {
            w = e; /* the first error: w + e exact */
        } else if (i > 0) {
            double delta;
            engine_two_sum(w, e, &w, &delta);
            D += fabs(delta);
        }
    }
    double T = w + e;
    *S_out = s;
    *T_out = T;
    engine_mask fits = engine_mask_equal(s + T, s);
    if (levels > 2) { /* D = 0 below three levels */
        double four_D = 4.0 * D;
        engine_mask large = ~engine_mask_above(engine_signed_bits(four_D),
                                               engine_signed_bits(T) & ENGINE_MAGNITUDE);
        fits &= engine_mask_zero(engine_signed_bits(D)) |
                (large & engine_mask_equal(s + four_D, s) & engine_mask_equal(s - four_D, s));
    }
    return fits;
}

/* Whether a pass of the cascade (g) over binary32 terms decides: its t proved exact (`exact`,
 * by the exact-errors test) or s + t certified in its directed form (the exact sum lies
 * strictly between S and its neighbour toward T, which is all the rounding through the odd
 * double needs), and s + t finite. S + T = TwoSum(s, t), the exact sum where it decides. */
ENGINE_FUNCTION engine_mask engine_cascade_decided(double s, double t, double error_sum, int count,
                                                   engine_mask exact, double *S_out, double *T_out)
{
    engine_two_sum(s, t, S_out, T_out);
    engine_mask decided =
        exact | engine_rounding_certified(s, t, error_sum, count, REPROD_ROUND_UP);
    return decided & engine_mask_finite(s + t);
}

/* The running largest magnitude bits of binary32 terms, with one term's bits taken in. */
ENGINE_FUNCTION uint32_t engine_max_magnitude32(uint32_t largest, uint32_t bits)
{
    uint32_t magnitude = bits & 0x7fffffffu;
    return magnitude > largest ? magnitude : largest;
}

/* The running smallest nonzero magnitude bits minus one of binary32 terms (zeros: all ones,
 * never the minimum), with one term's bits taken in. */
ENGINE_FUNCTION uint32_t engine_min_less_one32(uint32_t smallest, uint32_t bits)
{
    uint32_t less_one = (bits - 1) & 0x7fffffffu;
    return less_one < smallest ? less_one : smallest;
}

/* The exact sum of the binary32 (or bfloat16) terms of element `index` as S + T, by the split
 * (h) or the cascade (g): the tier, or ENGINE_TIER_NONE when the split does not apply and no pass
 * of the cascade decides. */
ENGINE_FUNCTION enum engine_tier engine_float32_exact_sum(reprod_type type,
                                                          const void *const *contributions,
                                                          int count, size_t index, double *S_out,
                                                          double *T_out)
{
    uint32_t largest = 0, smallest = 0x7fffffffu; /* magnitude bits; nonzero ones minus one */
    for (int k = 0; k < count; k++) {
        uint32_t bits = engine_load_float32_bits(type, contributions[k], index);
        largest = engine_max_magnitude32(largest, bits);
        smallest = engine_min_less_one32(smallest, bits);
    }
    int levels = count >= 1 ? engine_split_levels(type, largest, smallest, count) : 0;
    if (levels) { /* (h) */
        double hi[ENGINE_SPLIT_LEVELS], lo;
        engine_split_sums(type, contributions, count, index, levels, largest, hi, &lo);
        if (engine_split_chain(hi, levels, lo, S_out, T_out)) return ENGINE_TIER_SPLIT;
    }
    double v[ENGINE_DISTILL_TERMS];
    if (count < 1 || count > ENGINE_DISTILL_TERMS) return ENGINE_TIER_NONE;
    for (int k = 0; k < count; k++)
        v[k] =
            (double)engine_float_from_bits(engine_load_float32_bits(type, contributions[k], index));
    double s, t, error_sum;
    engine_distill_pass(v, count, &s, &t, &error_sum);
    for (int pass = 0; pass <= ENGINE_DISTILL_PASSES; pass++) {
        uint64_t low = 0x7fffffffffffffffull;
        if (pass > 0) {
            engine_distill_pass(v, count, &s, &t, &error_sum);
            low = engine_distill_errors_low(v, count);
        }
        engine_mask exact = pass == 0 ? engine_errors_exact_float32(error_sum, smallest)
                                      : engine_errors_exact(error_sum, low);
        if (engine_cascade_decided(s, t, error_sum, count, exact, S_out, T_out))
            return ENGINE_TIER_CASCADE;
    }
    return ENGINE_TIER_NONE;
}

/* (i) Before (h) and (g), and enough for nearly every element they would get: the plain binary64
 *     sum s of the terms (the even-indexed and the odd-indexed ones in two sums from -0, then those
 *     two added: the vector code's order too) lies within beta of the exact sum x, beta <=
 *     gamma_{N-1} sum |x_k| (Higham, any order) < 2^L 2^-53 (1 + 2^-20) 2^(e + L) < 2^(e + 2L -
 *     52), with |x_k| < 2^e as in (h). Let B = 2^(e + 2L - 51), lo = fl(s - B) and hi = fl(s + B):
 *     |s +- B| < 2^(e + L) + beta + B < 2^(e + L + 1) (B <= 2^(e + L - 20), as L <= 31), so each
 *     errs by at most half an ulp there, 2^(e + L - 53) <= B - beta: lo <= x, s <= hi. Rounding to
 *     the type (binary32, or bfloat16: p = 24 or 8) in direction dir is monotone, so when it takes
 *     lo and hi to the same value it takes every number between them there, x and s too: S = s, T =
 *     0 serve engine_float32_finish. The test rounds the magnitudes' bits to p bits in the integers
 *     (truncating, adding all ones below, or half of that and the last kept bit: toward zero, away,
 *     to nearest even) and compares them, for lo and hi of one sign with magnitudes in binary32's
 *     normal range [2^-126, 2^128) (where the grid of p bits is the type's; zero, infinite and NaN
 *     sums fail). An average tests fl(lo / N) and fl(hi / N) instead, which bracket x / N and s / N
 *     (N = 1 divides exactly; for L >= 1 the margin above, (B - beta - 2^(e + L - 53)) / N > 2^(e +
 *     L - 53) (2^(L + 1) - 1) / N, covers the division's half ulp, below 2^(e + L - 52) / N);
 *     engine_round_quotient then rounds s / N. It refuses a sum within about N^2 2^-50 of the
 *     largest term from a midpoint (to nearest) or from one of the type's values (directed: so
 *     every sum that one term dominates by more than 29 binades), or cancelling below about N^2
 *     2^-26 of it (bfloat16: 2^-42): those go on to (h) and (g). Two operations a term, the same
 *     for every element. */

/* The bracket's (i) binary64 sum s of element `index`, and its terms' largest binary32 magnitude
 * bits. */
ENGINE_FUNCTION double engine_bracket_plain_sum(reprod_type type, const void *const *contributions,
                                                int count, size_t index, uint32_t *largest)
{
    double even = -0.0, odd = -0.0;
    uint32_t high = 0;
    for (int k = 0; k < count; k++) {
        uint32_t bits = engine_load_float32_bits(type, contributions[k], index);
        high = engine_max_magnitude32(high, bits);
        double x = (double)engine_float_from_bits(bits);
        if (k & 1)
            odd += x;
        else
            even += x;
    }
    *largest = high;
    return even + odd;
}

/* The bracket's parameters for a call, the same for every element. */
struct engine_bracket_rule {
    int64_t bias;         /* B's exponent field: the largest term's field + bias */
    int cut;              /* 53 - p: the fraction bits that rounding to the type drops */
    int64_t add_positive; /* what rounding adds below bit `cut` before truncating: positive sums */
    int64_t add_negative; /* ... negative ones */
    int64_t ties_to_even; /* 1 to nearest: the last kept bit is added too; 0 directed */
};

ENGINE_FUNCTION struct engine_bracket_rule engine_bracket_rule_of(reprod_type type,
                                                                  reprod_rounding dir, int count)
{
    struct engine_bracket_rule rule;
    rule.cut = type == REPROD_BFLOAT16 ? 45 : 29;
    rule.bias = 2 * engine_ceil_log2(count) + 846; /* B = 2^(e + 2L - 51), e = F - 126 */
    const int64_t all = ((int64_t)1 << rule.cut) - 1;
    if (dir == REPROD_ROUND_NEAREST) { /* half, less one, and the last kept bit: ties to even */
        rule.add_positive = rule.add_negative = ((int64_t)1 << (rule.cut - 1)) - 1;
        rule.ties_to_even = 1;
    } else { /* all ones below the cut away from zero, nothing toward it */
        rule.add_positive = engine_rounds_away(dir, 0) ? all : 0;
        rule.add_negative = engine_rounds_away(dir, 1) ? all : 0;
        rule.ties_to_even = 0;
    }
    return rule;
}

/* The bracket [lo, hi] = [fl(s - B), fl(s + B)] around the plain sum s of an element whose
 * terms' largest binary32 magnitude bits are `largest`. */
ENGINE_FUNCTION void engine_bracket_ends(const struct engine_bracket_rule *rule, double s,
                                         int64_t largest, double *lo, double *hi)
{
    int64_t field = largest >> 23;
    field |= engine_mask_zero(field) & 1; /* at least 1 */
    double bound = engine_from_signed_bits((field + rule->bias) << 52);
    *lo = s - bound;
    *hi = s + bound;
}

/* Whether rounding to the type takes lo and hi to the same value: both of one sign with
 * magnitudes in binary32's normal range [2^-126, 2^128), rounded to p bits in the integers. */
ENGINE_FUNCTION engine_mask engine_bracket_rounds_alike(const struct engine_bracket_rule *rule,
                                                        double lo, double hi)
{
    int64_t lo_bits = engine_signed_bits(lo), hi_bits = engine_signed_bits(hi);
    int64_t lo_magnitude = lo_bits & ENGINE_MAGNITUDE, hi_magnitude = hi_bits & ENGINE_MAGNITUDE;
    const int64_t smallest = 897ll << 52, beyond = 1151ll << 52; /* 2^-126, 2^128 */
    engine_mask fit =
        ~engine_mask_negative(lo_bits ^ hi_bits) & ~engine_mask_negative(lo_magnitude - smallest) &
        ~engine_mask_negative(hi_magnitude - smallest) &
        engine_mask_negative(lo_magnitude - beyond) & engine_mask_negative(hi_magnitude - beyond);
    engine_mask negative = engine_mask_negative(lo_bits);
    int64_t add = (rule->add_negative & negative) | (rule->add_positive & ~negative);
    /* unsigned: a NaN's magnitude plus the addend passes 2^63 (that element is not `fit`) */
    uint64_t lo_rounded = ((uint64_t)lo_magnitude + (uint64_t)add +
                           (uint64_t)((lo_magnitude >> rule->cut) & rule->ties_to_even)) >>
                          rule->cut;
    uint64_t hi_rounded = ((uint64_t)hi_magnitude + (uint64_t)add +
                           (uint64_t)((hi_magnitude >> rule->cut) & rule->ties_to_even)) >>
                          rule->cut;
    return fit & engine_mask_zero((int64_t)(lo_rounded ^ hi_rounded)); /* below 2^35: >= 0 */
}

/* Whether the bracket (i) decides the element whose plain sum is s (engine_bracket_plain_sum) in
 * direction dir, given its terms' largest binary32 magnitude bits, for N = count >= 1 terms of the
 * type; an average tests the ends divided by N. */
ENGINE_FUNCTION engine_mask engine_bracket_decides(reprod_type type, reprod_op op,
                                                   reprod_rounding dir, double s, uint32_t largest,
                                                   int count)
{
    const struct engine_bracket_rule rule = engine_bracket_rule_of(type, dir, count);
    double lo, hi;
    engine_bracket_ends(&rule, s, largest, &lo, &hi);
    if (op == REPROD_AVG) {
        lo /= count;
        hi /= count;
    }
    return engine_bracket_rounds_alike(&rule, lo, hi);
}

/* Round to odd: of S and its neighbour toward T (S + T an exact sum, |T| at most half an ulp
 * of S), the one with an odd significand; S itself when T = 0 (see (g)). */
ENGINE_FUNCTION double engine_round_to_odd(double S, double T)
{
    int64_t S_bits = engine_signed_bits(S), T_bits = engine_signed_bits(T);
    engine_mask move =
        ~engine_mask_zero(T_bits & ENGINE_MAGNITUDE) & engine_mask_zero(S_bits & 1); /* even S */
    int64_t step = (engine_mask_negative(S_bits ^ T_bits) | 1) & move; /* -1, +1 or 0 */
    return engine_from_signed_bits((int64_t)((uint64_t)S_bits + (uint64_t)step));
}

/* The bfloat16 nearest to `odd` (a sum rounded to odd: 53 >= 8 + 2 bits, so one rounding of the
 * exact sum), in the integers: a carry into bit 45 at or past the half (ties to even), the
 * exponent rebiased, overflow to infinity. *normal: all ones where the result is in bfloat16's
 * normal range (zero sums and results below it need engine_round_double). */
ENGINE_FUNCTION int64_t engine_bfloat16_nearest(double odd, engine_mask *normal)
{
    int64_t bits = engine_signed_bits(odd), magnitude = bits & ENGINE_MAGNITUDE;
    int64_t top =
        (int64_t)(((uint64_t)magnitude + ((1ull << 44) - 1) + (((uint64_t)magnitude >> 45) & 1)) >>
                  45);
    int64_t rounded = top - ((1023 - 127) << 7);
    rounded -= (rounded - 0x7f80) & ~engine_mask_negative(rounded - 0x7f80); /* at most inf */
    rounded |= (int64_t)(((uint64_t)bits >> 48) & 0x8000);
    *normal = ~engine_mask_negative(magnitude - (897ll << 52));
    return rounded;
}

/* The binary32 (or bfloat16: type) result of element `index` from its exact sum S + T (see
 * (g)); 0 when an average needs the general path. Round to odd serves bfloat16 as binary32:
 * 53 >= 8 + 2. */
ENGINE_FUNCTION int engine_float32_finish(reprod_type type, reprod_op op, reprod_rounding dir,
                                          double S, double T, const void *const *contributions,
                                          int count, size_t index, uint64_t *bits_out)
{
    const struct engine_format f = engine_format_of(type);
    if (S == 0) { /* the sign rules of a zero sum look at the terms */
        int any_nonzero = 0, all_negative_zero = 1;
        for (int k = 0; k < count; k++) {
            uint32_t bits = engine_load_float32_bits(type, contributions[k], index);
            any_nonzero |= (bits & 0x7fffffffu) != 0;
            all_negative_zero &= bits == 0x80000000u;
        }
        *bits_out = engine_fast_zero(&f, type, dir, all_negative_zero ? -0.0 : 0.0, any_nonzero,
                                     contributions, count, index);
        return 1;
    }
    if (T != 0 && op != REPROD_SUM) return 0; /* an average needs S exact */
    double odd = T != 0 ? engine_round_to_odd(S, T) : S;
    if (type == REPROD_BFLOAT16 && op == REPROD_SUM && dir == REPROD_ROUND_NEAREST) {
        engine_mask normal;
        uint64_t bits = (uint64_t)engine_bfloat16_nearest(odd, &normal);
        if (normal) {
            *bits_out = bits;
            return 1;
        }
    }
    *bits_out = op == REPROD_AVG ? engine_round_quotient(&f, odd, count, dir)
                                 : engine_round_double(&f, odd, dir);
    return 1;
}

/* Binary32 or bfloat16 element `index` beyond the fast path's window, by the bracket (i), the
 * split (h) or the cascade (g): the tier, with its bits, or ENGINE_TIER_NONE when the general
 * path must decide. */
ENGINE_FUNCTION enum engine_tier engine_exact_beyond_window(reprod_type type, reprod_op op,
                                                            reprod_rounding dir,
                                                            const void *const *contributions,
                                                            int count, size_t index,
                                                            uint64_t *bits_out)
{
    double S, T;
    if (type != REPROD_FLOAT32 && type != REPROD_BFLOAT16) return ENGINE_TIER_NONE;
    if (count >= 1) {
        uint32_t largest;
        double s = engine_bracket_plain_sum(type, contributions, count, index, &largest);
        if (engine_bracket_decides(type, op, dir, s, largest, count))
            return engine_float32_finish(type, op, dir, s, 0.0, contributions, count, index,
                                         bits_out)
                       ? ENGINE_TIER_BRACKET
                       : ENGINE_TIER_NONE;
    }
    enum engine_tier tier = engine_float32_exact_sum(type, contributions, count, index, &S, &T);
    if (!tier || !engine_float32_finish(type, op, dir, S, T, contributions, count, index, bits_out))
        return ENGINE_TIER_NONE;
    return tier;
}

/* ---- One element, either path ----------------------------------------------------------- */

/* The fast path of element `index` of the exact reduction: its tier (WINDOW, EXACT_ERRORS or
 * CERTIFIED) with its bits in *bits when the fast path serves it, ENGINE_TIER_NONE when it must
 * take the general path (nothing else changes). Split from
 * engine_exact_element so that a GPU thread touches its accumulator only on the general path. */
ENGINE_FUNCTION enum engine_tier engine_exact_fast(reprod_type type, reprod_op op,
                                                   reprod_rounding dir,
                                                   const void *const *contributions, int count,
                                                   size_t index, uint64_t *bits_out)
{
    struct engine_format f = engine_format_of(type);
    uint64_t magnitude_mask = engine_sign_bit(&f) - 1;
    if (type == REPROD_FLOAT64 && !engine_fast_double_serves(op, count)) return ENGINE_TIER_NONE;
    uint64_t max_magnitude = 0, min_nonzero_less_one = magnitude_mask;
    double s = -0.0, t = 0.0, error_sum = 0.0;
    for (int k = 0; k < count; k++) {
        uint64_t bits = engine_load_bits(type, contributions[k], index);
        uint64_t magnitude = bits & magnitude_mask;
        uint64_t less_one = (magnitude - 1) & magnitude_mask;
        max_magnitude = magnitude > max_magnitude ? magnitude : max_magnitude;
        min_nonzero_less_one = less_one < min_nonzero_less_one ? less_one : min_nonzero_less_one;
        double x = engine_bits_to_double(type, &f, bits);
        if (type == REPROD_FLOAT64) {
            double e;
            engine_two_sum(s, x, &s, &e);
            t += e;
            error_sum += fabs(e);
        } else {
            s += x;
        }
    }
    int window = engine_fast_window(f.precision, count);
    int span_ok = engine_fast_span_ok(&f, max_magnitude, min_nonzero_less_one, window);
    if (type == REPROD_FLOAT64) {
        enum engine_tier tier = ENGINE_TIER_NONE;
        if (!engine_is_finite(s + t)) return ENGINE_TIER_NONE;
        if (engine_errors_exact(error_sum, min_nonzero_less_one))
            tier = ENGINE_TIER_EXACT_ERRORS;
        else if (engine_rounding_certified(s, t, error_sum, count, dir))
            tier = ENGINE_TIER_CERTIFIED;
        else
            return ENGINE_TIER_NONE;
        uint64_t bits = engine_fast_finish_double(&f, dir, s, t, max_magnitude != 0, contributions,
                                                  count, index);
        if (op != REPROD_SUM && !engine_fast_average_double(&bits, count)) return ENGINE_TIER_NONE;
        *bits_out = bits;
        return tier;
    }
    if (!span_ok) return ENGINE_TIER_NONE;
    if ((max_magnitude >> (f.precision - 1)) >= (1u << f.exponent_bits) - 1)
        return ENGINE_TIER_NONE;
    *bits_out =
        engine_fast_finish(&f, type, op, dir, s, max_magnitude != 0, contributions, count, index);
    return ENGINE_TIER_WINDOW;
}

/* Every tier before the general path, in order (the table at the top): the tier that decided
 * element `index`, with its bits, or ENGINE_TIER_NONE when only the general path can decide; no
 * accumulator involved (a GPU thread touches its own only then). */
ENGINE_FUNCTION enum engine_tier engine_exact_tiers(reprod_type type, reprod_op op,
                                                    reprod_rounding dir,
                                                    const void *const *contributions, int count,
                                                    size_t index, uint64_t *bits_out)
{
    enum engine_tier tier = engine_exact_fast(type, op, dir, contributions, count, index, bits_out);
    if (!tier) tier = engine_exact_distilled(type, op, dir, contributions, count, index, bits_out);
    if (!tier)
        tier = engine_exact_beyond_window(type, op, dir, contributions, count, index, bits_out);
    return tier;
}

/* Element `index` of the exact reduction: the bits of the rounded sum (or average) of
 * contributions[0..count-1][index]. Tries the fast path unless force_general; `a` must be empty
 * (and is left empty); *general is incremented when the general path ran. */
ENGINE_FUNCTION uint64_t engine_exact_element(reprod_type type, reprod_op op, reprod_rounding dir,
                                              const void *const *contributions, int count,
                                              size_t index, int force_general,
                                              struct engine_accumulator *a, size_t *general)
{
    uint64_t bits;
    if (!force_general && engine_exact_tiers(type, op, dir, contributions, count, index, &bits))
        return bits;
    struct engine_format f = engine_format_of(type);
    ++*general;
    for (int k = 0; k < count; k++)
        engine_accumulator_add(
            a, engine_bits_to_double(type, &f, engine_load_bits(type, contributions[k], index)));
    return engine_accumulator_round(a, &f, dir, op == REPROD_AVG ? (uint32_t)count : 1u);
}

/* One binary64 lane of a vector kernel: the fast-path result from its (s, t), or the general
 * path when the kernel refused the lane (`fast` 0) or for an average the fast path does not
 * serve. */
ENGINE_FUNCTION uint64_t engine_float64_lane(reprod_op op, reprod_rounding dir,
                                             const void *const *contributions, int count,
                                             size_t index, int fast, double s, double t,
                                             int any_nonzero, struct engine_accumulator *a,
                                             size_t *general)
{
    if (fast) {
        const struct engine_format f = engine_format_of(REPROD_FLOAT64);
        uint64_t bits =
            engine_fast_finish_double(&f, dir, s, t, any_nonzero, contributions, count, index);
        if (op == REPROD_SUM || engine_fast_average_double(&bits, count)) return bits;
    }
    return engine_exact_element(REPROD_FLOAT64, op, dir, contributions, count, index, 1, a,
                                general);
}

#endif /* REPROD_ENGINE_INNER_H */
