/* reprod.h: the public C API of reprod.
 *
 * The shim (build/libreprod_shim.so) is meant to be preloaded, but everything it computes with
 * is also usable by linking against it: the exact and ordered reduction engine on host buffers,
 * the seed derivation, and the version. Every function here is thread-safe and allocates no
 * memory that the caller must free.
 */
#ifndef REPROD_H
#define REPROD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REPROD_VERSION_MAJOR 0
#define REPROD_VERSION_MINOR 1
#define REPROD_VERSION_PATCH 0

/* Return codes of the functions below. */
enum {
    REPROD_OK = 0,
    REPROD_EINVAL = -1, /* an argument is out of its range (unknown type, NULL buffer, ...) */
};

/* Element types the engine reduces. A complex type is a pair of its real type: reduce it as
 * 2 * element_count elements of the real type (the sum is taken component by component). */
typedef enum reprod_type {
    REPROD_FLOAT16 = 0,  /* IEEE 754 binary16, stored as uint16_t */
    REPROD_BFLOAT16 = 1, /* bfloat16 (the top half of a binary32), stored as uint16_t */
    REPROD_FLOAT32 = 2,  /* IEEE 754 binary32, float */
    REPROD_FLOAT64 = 3,  /* IEEE 754 binary64, double */
} reprod_type;

/* Direction of the single rounding of an exact result (REPROD_ROUNDING). */
typedef enum reprod_rounding {
    REPROD_ROUND_NEAREST = 0, /* to nearest, ties to even */
    REPROD_ROUND_ZERO = 1,    /* toward zero */
    REPROD_ROUND_UP = 2,      /* toward +infinity */
    REPROD_ROUND_DOWN = 3,    /* toward -infinity */
} reprod_rounding;

/* What to compute from the contributions. */
typedef enum reprod_op {
    REPROD_SUM = 0, /* the sum of the contributions */
    REPROD_AVG = 1, /* the sum divided by the number of contributions */
    REPROD_PROD = 2, /* the product: ordered only (reprod_reduce_exact refuses it) */
} reprod_op;

/* Size in bytes of one element of `type`, or 0 for an unknown type. */
size_t reprod_type_size(reprod_type type);

/* Exact reduction. For each i < element_count, result[i] is the exact mathematical sum of
 * contributions[0][i] .. contributions[contribution_count-1][i] (for REPROD_AVG: that sum
 * divided by contribution_count), rounded once to `type` in direction `rounding`.
 *
 * IEEE 754 behaviour: subnormal inputs and results are exact; a sum beyond the largest finite
 * value becomes infinity or the largest finite value as the direction says; any NaN, or +inf
 * together with -inf, gives the quiet NaN with a clear sign bit and no payload (the same bits
 * whatever NaN came in); an exactly zero sum is -0 when every term is -0, +0 when every term is
 * +0, and otherwise +0, or -0 when rounding down (the rule of MPFR's mpfr_sum).
 *
 * The result does not depend on the order of the contributions, nor on the machine, nor on the
 * floating-point environment of the caller (which is left as it was found). `result` may be
 * one of the contributions (the same pointer), but may not overlap one partially.
 * Returns REPROD_OK, or REPROD_EINVAL for an unknown type, op or rounding (REPROD_PROD
 * included: a product has no exact mode), a contribution_count below 1, or a NULL pointer
 * where element_count > 0. */
int reprod_reduce_exact(reprod_type type, reprod_op op, reprod_rounding rounding,
                        const void *const contributions[], int contribution_count,
                        size_t element_count, void *result);

/* Ordered reduction: for each i, the fold in rank order
 *     acc = contributions[0][i]; acc = acc + contributions[k][i] for k = 1 .. count-1
 * where each addition is rounded to `type` to nearest (ties to even); REPROD_AVG divides the
 * folded sum by contribution_count, rounded to nearest once more. REPROD_PROD folds products
 * the same way: acc = acc * contributions[k][i], each product rounded to nearest in `type` (for
 * binary16 and bfloat16 the product of two values is exact in binary64, then rounded). Any NaN
 * result is the canonical quiet NaN of reprod_reduce_exact. Deterministic for a fixed
 * contribution order; cheaper than exact; not independent of that order. Same aliasing rules
 * and return codes as reprod_reduce_exact. */
int reprod_reduce_ordered(reprod_type type, reprod_op op, const void *const contributions[],
                          int contribution_count, size_t element_count, void *result);

/* Seed policies of REPROD_SEED_POLICY (see reprod_seed_derive). */
typedef enum reprod_seed_policy {
    REPROD_SEED_HASH = 0,   /* s -> H(s): shared seeds stay shared, adjacent seeds decorrelate */
    REPROD_SEED_RANK = 1,   /* s -> H(s - r, r): for seeds of the form base + rank */
    REPROD_SEED_SHARED = 2, /* s -> H(s - r): every rank gets the same stream */
    REPROD_SEED_OFF = 3,    /* s -> s */
} reprod_seed_policy;

/* The seed the shim substitutes for `seed` passed to a 64-bit seeding call on rank `rank`
 * under `policy`: hash H(s), rank H(s - r, r), shared H(s - r), off s, where H(s) is the first
 * output of splitmix64 started from state s (docs/seeding.md, "The derivation"). For a fixed
 * rank the mapping is a bijection of the 64-bit integers; it does not depend on the world size.
 * A policy outside the enumeration is treated as REPROD_SEED_OFF. */
uint64_t reprod_seed_derive(uint64_t seed, int rank, reprod_seed_policy policy);

/* The same for a 32-bit seeding call (srand, srandom, ...): a bijection of the 32-bit
 * integers for a fixed rank. */
uint32_t reprod_seed_derive32(uint32_t seed, int rank, reprod_seed_policy policy);

/* The same for a 48-bit seed (the X of seed48 and lcong48): `seed` is taken modulo 2^48 and
 * the result is below 2^48; a bijection of the 48-bit integers for a fixed rank. (srand48
 * takes a long, but glibc keeps only its low 32 bits: it is a 32-bit seeding call.) */
uint64_t reprod_seed_derive48(uint64_t seed, int rank, reprod_seed_policy policy);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *reprod_version(void);

#ifdef __cplusplus
}
#endif

#endif /* REPROD_H */
