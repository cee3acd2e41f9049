/* audit.c: distances in units in the last place between a native and an exact sum, per type
 * (REPROD_MODE=audit). Pure arithmetic on bit patterns: no I/O, no state. */
#include "runtime/audit.h"

#include <string.h>

/* One type's bit layout: its width and where its sign, exponent and fraction are. */
struct layout {
    unsigned bits;          /* 16, 32 or 64 */
    uint64_t sign;          /* the sign bit */
    uint64_t exponent_mask; /* all exponent bits */
    uint64_t fraction_mask; /* all fraction bits */
};

static const struct layout layouts[] = {
    [REPROD_FLOAT16] = {16, 0x8000u, 0x7c00u, 0x03ffu},
    [REPROD_BFLOAT16] = {16, 0x8000u, 0x7f80u, 0x007fu},
    [REPROD_FLOAT32] = {32, 0x80000000u, 0x7f800000u, 0x007fffffu},
    [REPROD_FLOAT64] = {64, 0x8000000000000000ull, 0x7ff0000000000000ull, 0x000fffffffffffffull},
};

static uint64_t load_bits(const struct layout *layout, const void *value)
{
    uint16_t b16;
    uint32_t b32;
    uint64_t b64;
    switch (layout->bits) {
    case 16: memcpy(&b16, value, 2); return b16;
    case 32: memcpy(&b32, value, 4); return b32;
    default: memcpy(&b64, value, 8); return b64;
    }
}

static int is_nan(const struct layout *layout, uint64_t bits)
{
    return (bits & layout->exponent_mask) == layout->exponent_mask &&
           (bits & layout->fraction_mask) != 0;
}

/* The magnitude bits as a distance from zero, and the sign: the ordered representation is
 * +magnitude or -magnitude (so +0 and -0 meet at 0). */
static uint64_t distance(const struct layout *layout, uint64_t a, uint64_t b)
{
    uint64_t a_magnitude = a & ~layout->sign, b_magnitude = b & ~layout->sign;
    int a_negative = (a & layout->sign) != 0, b_negative = (b & layout->sign) != 0;
    if (a_negative == b_negative)
        return a_magnitude > b_magnitude ? a_magnitude - b_magnitude : b_magnitude - a_magnitude;
    return a_magnitude + b_magnitude; /* at most 2^64 - 2 for binary64: no overflow */
}

uint64_t reprod_ulps(reprod_type type, const void *native, const void *exact)
{
    const struct layout *layout = &layouts[type];
    uint64_t a = load_bits(layout, native), b = load_bits(layout, exact);
    int a_nan = is_nan(layout, a), b_nan = is_nan(layout, b);
    if (a_nan || b_nan) return a_nan && b_nan ? 0 : REPROD_ULPS_NAN;
    return distance(layout, a, b);
}

void reprod_audit_compare(reprod_type type, const void *native, const void *exact,
                          size_t elements, size_t components, uint64_t *differing,
                          uint64_t *worst_ulps)
{
    const struct layout *layout = &layouts[type];
    size_t bytes = layout->bits / 8;
    const unsigned char *n = native, *e = exact;
    *differing = 0;
    *worst_ulps = 0;
    for (size_t i = 0; i < elements; i++) {
        int differs = 0;
        for (size_t c = 0; c < components; c++, n += bytes, e += bytes) {
            uint64_t a = load_bits(layout, n), b = load_bits(layout, e);
            if (a == b || (is_nan(layout, a) && is_nan(layout, b))) continue;
            differs = 1;
            uint64_t ulps = reprod_ulps(type, n, e);
            if (ulps > *worst_ulps) *worst_ulps = ulps;
        }
        *differing += (uint64_t)differs;
    }
}
