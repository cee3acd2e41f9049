/* bench_util.h: what the benchmarks share (bench_engine.c, ab_engine.c, bench_fixed.c,
 * bench_layout.c): a clock,
 * the inputs' random numbers and gradient-like values, and medians. */
#ifndef REPROD_BENCH_UTIL_H
#define REPROD_BENCH_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static inline uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value like a gradient entry: random sign, magnitude in [2^-8, 2^-4), element-dependent
 * scale so that neighbouring elements differ (exponents within 4 of each other per element). */
static inline double sample_value(uint64_t *state, size_t i)
{
    double u = (double)(next_random(state) >> 11) * 0x1p-53;
    double scale = ldexp(1.0, -8 - (int)(i % 7));
    double v = scale * (1.0 + 15.0 * u);
    return (next_random(state) & 1) ? -v : v;
}

static inline int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1] (sorts v). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_doubles);
    return v[n / 2];
}

#endif /* REPROD_BENCH_UTIL_H */
