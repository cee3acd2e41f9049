/* job_oracle.h: what the MPI test programs (exactness.c, fixed.c) share: their data's mixer,
 * a digest of a result for comparing runs, and the check of one real against MPFR's correctly
 * rounded sum of its terms (oracle_exact of tests/unit/engine_oracle.h, the engine tests'
 * independent reference: none of it is the shim's code). */
#ifndef REPROD_TEST_JOB_ORACLE_H
#define REPROD_TEST_JOB_ORACLE_H

#include "engine_oracle.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* splitmix64's finaliser: the programs' data from (contribution, index). */
static inline uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* 64-bit FNV-1a of a result, for comparing results across runs in the scripts. */
static inline uint64_t digest(const void *data, size_t bytes)
{
    const unsigned char *p = data;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ull;
    return hash;
}

/* Whether `got` (a binary32 or binary64 real, as stored) is the sum of `terms` values (each
 * exactly representable in the type) rounded once in direction `dir`; a NaN matches any NaN.
 * *expected gets the oracle's value. At most ORACLE_MAX_TERMS terms. */
static inline int oracle_matches(reprod_type type, reprod_rounding dir, const double *terms,
                                 int count, const void *got, double *expected)
{
    uint64_t bits[ORACLE_MAX_TERMS], mine = 0;
    *expected = NAN;
    if (count > ORACLE_MAX_TERMS) {
        fprintf(stderr, "oracle: %d terms, at most %d\n", count, ORACLE_MAX_TERMS);
        return 0;
    }
    for (int k = 0; k < count; k++)
        bits[k] = tf_from_double(type, terms[k]);
    uint64_t want = oracle_exact(type, REPROD_SUM, dir, bits, count);
    memcpy(&mine, got, tf_size(type)); /* little-endian: the low bytes */
    *expected = tf_to_double(type, want);
    const struct tfmt *f = &test_formats[type];
    return mine == want || (tf_is_nan(f, mine) && tf_is_nan(f, want));
}

#endif /* REPROD_TEST_JOB_ORACLE_H */
