/* engine_ordered.h: the ordered fold (REPROD_MODE=ordered, and every product) of one element:
 * contributions folded in rank order 0..N-1, each step rounded to nearest in the type.
 *
 * Shared by the host engine (products, and the reference its vector fold is tested against)
 * and the GPU kernels, so the device's ordered bits are the host's. Each step is one IEEE
 * operation rounded to nearest (on the device with the explicit _rn intrinsics, so no FMA can
 * form); a NaN result is always the type's canonical NaN, whatever NaN the hardware made.
 */
#ifndef REPROD_ENGINE_ORDERED_H
#define REPROD_ENGINE_ORDERED_H

#include "engine/engine_inner.h"

#include <stddef.h>
#include <stdint.h>

/* One operation rounded to nearest in binary64 or binary32. The host build relies on
 * -ffp-contract=off and the default environment (the callers' contract). */
#if defined(__CUDA_ARCH__)
#define ENGINE_DADD(a, b) __dadd_rn(a, b)
#define ENGINE_DMUL(a, b) __dmul_rn(a, b)
#define ENGINE_DDIV(a, b) __ddiv_rn(a, b)
#define ENGINE_FADD(a, b) __fadd_rn(a, b)
#define ENGINE_FMUL(a, b) __fmul_rn(a, b)
#define ENGINE_FDIV(a, b) __fdiv_rn(a, b)
#else
#define ENGINE_DADD(a, b) ((a) + (b))
#define ENGINE_DMUL(a, b) ((a) * (b))
#define ENGINE_DDIV(a, b) ((a) / (b))
#define ENGINE_FADD(a, b) ((a) + (b))
#define ENGINE_FMUL(a, b) ((a) * (b))
#define ENGINE_FDIV(a, b) ((a) / (b))
#endif

/* The fold's running value is a binary64 that holds a value of the type exactly. */

/* acc (op) x for the value x of `bits`, rounded to nearest in `type`. Binary16 and bfloat16:
 * the binary64 operation is exact (a product of two: 22 or 16 bits; a binary16 sum), or for a
 * bfloat16 sum rounded twice harmlessly (53 >= 2 * 8 + 2), then rounded to the type. */
ENGINE_FUNCTION double engine_ordered_step(reprod_type type, const struct engine_format *f,
                                           reprod_op op, double acc, uint64_t bits)
{
    double x = engine_bits_to_double(type, f, bits);
    if (type == REPROD_FLOAT64) return op == REPROD_PROD ? ENGINE_DMUL(acc, x) : ENGINE_DADD(acc, x);
    if (type == REPROD_FLOAT32) {
        float a = (float)acc, b = (float)x; /* exact: both hold binary32 values */
        return (double)(op == REPROD_PROD ? ENGINE_FMUL(a, b) : ENGINE_FADD(a, b));
    }
    double wide = op == REPROD_PROD ? ENGINE_DMUL(acc, x) : ENGINE_DADD(acc, x);
    return engine_small_to_double(f, engine_round_double_nearest_any(f, wide));
}

/* The bits of the folded value `acc` of `count` terms: AVG divides once more, rounded to
 * nearest (binary32 and the 16-bit types through engine_round_quotient, exact then rounded;
 * binary64 by IEEE division); every NaN becomes the canonical one. */
ENGINE_FUNCTION uint64_t engine_ordered_finish(reprod_type type, const struct engine_format *f,
                                               reprod_op op, double acc, int count)
{
    uint64_t magnitude = engine_double_bits(acc) & 0x7fffffffffffffffull;
    if (magnitude > 0x7ff0000000000000ull) return f->nan_bits;
    int average = op == REPROD_AVG;
    if (type == REPROD_FLOAT64)
        return engine_double_bits(average ? ENGINE_DDIV(acc, (double)count) : acc);
    int plain = acc == 0 || !engine_is_finite(acc); /* +-0, +-inf: the dividend itself */
    if (type == REPROD_FLOAT32) {
        float a = (float)acc;
        if (average && plain) a = ENGINE_FDIV(a, (float)count);
        if (average && !plain) return engine_round_quotient(f, acc, count, REPROD_ROUND_NEAREST);
        return engine_float_bits(a);
    }
    if (average && !plain) return engine_round_quotient(f, acc, count, REPROD_ROUND_NEAREST);
    return engine_round_double_nearest_any(f, acc);
}

/* Element `index` of the ordered fold of contributions[0..count-1] (count >= 1) for
 * REPROD_SUM, REPROD_AVG or REPROD_PROD: bitwise the host engine's vector fold for SUM/AVG. */
ENGINE_FUNCTION uint64_t engine_ordered_element(reprod_type type, reprod_op op,
                                                const void *const *contributions, int count,
                                                size_t index)
{
    const struct engine_format f = engine_format_of(type);
    double acc = engine_bits_to_double(type, &f, engine_load_bits(type, contributions[0], index));
    for (int k = 1; k < count; k++)
        acc = engine_ordered_step(type, &f, op, acc, engine_load_bits(type, contributions[k], index));
    return engine_ordered_finish(type, &f, op, acc, count);
}

#endif /* REPROD_ENGINE_ORDERED_H */
