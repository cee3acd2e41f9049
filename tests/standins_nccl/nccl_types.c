/* The NCCL stand-in's arithmetic. Assumptions: IEEE binary32/64 floats, the default rounding
 * mode (nearest-even), no FMA contraction (-ffp-contract=off), two's-complement wrap for integer
 * sums and products. half, bfloat16 and the FP8 formats compute in float and are rounded back to
 * the type (nearest-even) after every step, as NCCL's kernels do; FP8 saturates to its largest
 * finite value on overflow (NCCL converts with __NV_SATFINITE), half and bfloat16 overflow to
 * infinity. */
#include "nccl_internal.h"

#include <math.h>
#include <string.h>

struct small_format {
    int mantissa_bits, exponent_bits, bias, has_infinity, saturates;
    double max_finite;
};

static const struct small_format half_format = {10, 5, 15, 1, 0, 65504.0};
static const struct small_format e4m3_format = {3, 4, 7, 0, 1, 448.0};
static const struct small_format e5m2_format = {2, 5, 15, 1, 1, 57344.0};

/* x rounded to nearest-even in the format, as its bits. */
static uint32_t small_encode(double x, const struct small_format *f) {
    int m = f->mantissa_bits;
    uint32_t exponent_mask = (1u << f->exponent_bits) - 1;
    uint32_t sign = signbit(x) ? 1u << (m + f->exponent_bits) : 0;
    if (isnan(x))
        return sign | (exponent_mask << m) | (f->has_infinity ? 1u << (m - 1) : (1u << m) - 1);
    double magnitude = fabs(x);
    if (magnitude == 0)
        return sign;
    int exponent, emin = 1 - f->bias;
    frexp(magnitude, &exponent);
    exponent -= 1; /* magnitude in [2^exponent, 2^(exponent+1)) */
    if (exponent < emin)
        exponent = emin;
    double quantum = ldexp(1.0, exponent - m);
    double rounded = isinf(magnitude) ? magnitude : nearbyint(magnitude / quantum) * quantum;
    if (rounded > f->max_finite) {
        if (f->saturates || !f->has_infinity)
            rounded = f->max_finite;
        else
            return sign | (exponent_mask << m);
    }
    if (rounded == 0)
        return sign;
    frexp(rounded, &exponent);
    exponent -= 1;
    if (exponent < emin) /* subnormal */
        return sign | (uint32_t)(rounded / ldexp(1.0, emin - m));
    uint32_t mantissa = (uint32_t)(rounded / ldexp(1.0, exponent - m)) - (1u << m);
    return sign | ((uint32_t)(exponent + f->bias) << m) | mantissa;
}

static float small_decode(uint32_t bits, const struct small_format *f) {
    int m = f->mantissa_bits;
    uint32_t exponent_mask = (1u << f->exponent_bits) - 1;
    uint32_t exponent = (bits >> m) & exponent_mask, mantissa = bits & ((1u << m) - 1);
    int negative = (bits >> (m + f->exponent_bits)) & 1;
    double value;
    if (f->has_infinity && exponent == exponent_mask)
        value = mantissa ? NAN : INFINITY;
    else if (!f->has_infinity && exponent == exponent_mask && mantissa == (1u << m) - 1)
        value = NAN;
    else if (exponent)
        value = ldexp(1.0 + ldexp(mantissa, -m), (int)exponent - f->bias);
    else
        value = ldexp(mantissa, 1 - f->bias - m);
    return (float)(negative ? -value : value);
}

static float bf16_decode(uint16_t bits) {
    uint32_t word = (uint32_t)bits << 16;
    float value;
    memcpy(&value, &word, sizeof value);
    return value;
}

/* float to bfloat16, nearest-even on the bits (NaN stays NaN). */
static uint16_t bf16_encode(float x) {
    uint32_t word;
    memcpy(&word, &x, sizeof word);
    if (isnan(x))
        return (uint16_t)((word >> 16) | 0x40);
    word += 0x7fff + ((word >> 16) & 1);
    return (uint16_t)(word >> 16);
}

size_t snccl_type_bytes(ncclDataType_t type) {
    static const size_t bytes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return (unsigned)type < ncclNumTypes ? bytes[type] : 0;
}

int snccl_type_is_float(ncclDataType_t type) {
    return type >= ncclFloat16 && type < ncclNumTypes;
}

void snccl_store_double(ncclDataType_t type, double x, void *out) {
    switch (type) {
    case ncclInt8: *(int8_t *)out = (int8_t)x; break;
    case ncclUint8: *(uint8_t *)out = (uint8_t)x; break;
    case ncclInt32: *(int32_t *)out = (int32_t)x; break;
    case ncclUint32: *(uint32_t *)out = (uint32_t)x; break;
    case ncclInt64: *(int64_t *)out = (int64_t)x; break;
    case ncclUint64: *(uint64_t *)out = (uint64_t)x; break;
    case ncclFloat16: *(uint16_t *)out = (uint16_t)small_encode(x, &half_format); break;
    case ncclFloat32: *(float *)out = (float)x; break;
    case ncclFloat64: *(double *)out = x; break;
    case ncclBfloat16: *(uint16_t *)out = bf16_encode((float)x); break;
    case ncclFloat8e4m3: *(uint8_t *)out = (uint8_t)small_encode(x, &e4m3_format); break;
    case ncclFloat8e5m2: *(uint8_t *)out = (uint8_t)small_encode(x, &e5m2_format); break;
    default: break;
    }
}

/* Per type: how a stored value becomes the compute type (LOAD), goes back (STORE), how a computed
 * value is rounded to the type (ROUND), and the sum and product (wrapping for integers). */
#define IDENTITY(x) (x)
#define COMBINE(op, a, b, ADD, MUL)                                                                   \
    ((op) == SNCCL_PROD ? MUL(a, b) : (op) == SNCCL_MAX ? ((a) > (b) ? (a) : (b))                     \
                                    : (op) == SNCCL_MIN ? ((a) < (b) ? (a) : (b))                     \
                                                        : ADD(a, b))

#define DEFINE_REDUCE(NAME, T, C, LOAD, STORE, ROUND, ADD, MUL)                                       \
    static void reduce_##NAME(enum snccl_op op, int tree, const void *const *srcs, int n, void *out_bytes, \
                              size_t len, const void *scalar_bytes) {                                    \
        T *out = out_bytes;                                                                             \
        C scalar = 0, v[SNCCL_MAX_RANKS];                                                               \
        if (scalar_bytes) {                                                                             \
            T stored;                                                                                   \
            memcpy(&stored, scalar_bytes, sizeof stored);                                               \
            scalar = LOAD(stored);                                                                      \
        }                                                                                               \
        for (size_t e = 0; e < len; e++) {                                                              \
            for (int i = 0; i < n; i++) {                                                               \
                v[i] = LOAD(((const T *)srcs[i])[e]);                                                   \
                if (op == SNCCL_PREMUL)                                                                 \
                    v[i] = ROUND(MUL(v[i], scalar));                                                    \
            }                                                                                           \
            if (tree) {                                                                                 \
                for (int s = 1; s < n; s *= 2)                                                          \
                    for (int i = 0; i + s < n; i += 2 * s)                                              \
                        v[i] = ROUND(COMBINE(op, v[i], v[i + s], ADD, MUL));                            \
            } else {                                                                                    \
                for (int i = 1; i < n; i++)                                                             \
                    v[0] = ROUND(COMBINE(op, v[0], v[i], ADD, MUL));                                    \
            }                                                                                           \
            if (op == SNCCL_AVG_INT)                                                                    \
                v[0] = (C)(v[0] / (C)n);                                                                \
            out[e] = STORE(v[0]);                                                                       \
        }                                                                                               \
    }

#define FLOAT_ADD(a, b) ((a) + (b))
#define FLOAT_MUL(a, b) ((a) * (b))
#define I8_ADD(a, b) ((int8_t)(uint8_t)((uint8_t)(a) + (uint8_t)(b)))
#define I8_MUL(a, b) ((int8_t)(uint8_t)((unsigned)(uint8_t)(a) * (uint8_t)(b)))
#define U8_ADD(a, b) ((uint8_t)((a) + (b)))
#define U8_MUL(a, b) ((uint8_t)((unsigned)(a) * (unsigned)(b)))
#define I32_ADD(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define I32_MUL(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define I64_ADD(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define I64_MUL(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))
#define HALF_LOAD(x) small_decode(x, &half_format)
#define HALF_STORE(x) ((uint16_t)small_encode(x, &half_format))
#define HALF_ROUND(x) HALF_LOAD(HALF_STORE(x))
#define BF16_STORE(x) bf16_encode(x)
#define BF16_ROUND(x) bf16_decode(bf16_encode(x))
#define E4M3_LOAD(x) small_decode(x, &e4m3_format)
#define E4M3_STORE(x) ((uint8_t)small_encode(x, &e4m3_format))
#define E4M3_ROUND(x) E4M3_LOAD(E4M3_STORE(x))
#define E5M2_LOAD(x) small_decode(x, &e5m2_format)
#define E5M2_STORE(x) ((uint8_t)small_encode(x, &e5m2_format))
#define E5M2_ROUND(x) E5M2_LOAD(E5M2_STORE(x))

DEFINE_REDUCE(int8, int8_t, int8_t, IDENTITY, IDENTITY, IDENTITY, I8_ADD, I8_MUL)
DEFINE_REDUCE(uint8, uint8_t, uint8_t, IDENTITY, IDENTITY, IDENTITY, U8_ADD, U8_MUL)
DEFINE_REDUCE(int32, int32_t, int32_t, IDENTITY, IDENTITY, IDENTITY, I32_ADD, I32_MUL)
DEFINE_REDUCE(uint32, uint32_t, uint32_t, IDENTITY, IDENTITY, IDENTITY, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(int64, int64_t, int64_t, IDENTITY, IDENTITY, IDENTITY, I64_ADD, I64_MUL)
DEFINE_REDUCE(uint64, uint64_t, uint64_t, IDENTITY, IDENTITY, IDENTITY, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(float16, uint16_t, float, HALF_LOAD, HALF_STORE, HALF_ROUND, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(float32, float, float, IDENTITY, IDENTITY, IDENTITY, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(float64, double, double, IDENTITY, IDENTITY, IDENTITY, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(bfloat16, uint16_t, float, bf16_decode, BF16_STORE, BF16_ROUND, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(e4m3, uint8_t, float, E4M3_LOAD, E4M3_STORE, E4M3_ROUND, FLOAT_ADD, FLOAT_MUL)
DEFINE_REDUCE(e5m2, uint8_t, float, E5M2_LOAD, E5M2_STORE, E5M2_ROUND, FLOAT_ADD, FLOAT_MUL)

void snccl_reduce(ncclDataType_t type, enum snccl_op op, int tree, const void *const *srcs, int n, void *out,
                  size_t len, const void *scalar) {
    typedef void reducer(enum snccl_op, int, const void *const *, int, void *, size_t, const void *);
    static reducer *const reducers[ncclNumTypes] = {reduce_int8,   reduce_uint8,    reduce_int32,   reduce_uint32,
                                                    reduce_int64,  reduce_uint64,   reduce_float16, reduce_float32,
                                                    reduce_float64, reduce_bfloat16, reduce_e4m3,    reduce_e5m2};
    if ((unsigned)type < ncclNumTypes)
        reducers[type](op, tree, srcs, n, out, len, op == SNCCL_PREMUL ? scalar : NULL);
}
