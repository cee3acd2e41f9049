/* oracle.c: the independent oracle for the Fortran tests, called from Fortran (bind(C)): the
 * correctly rounded sum of N terms (MPFR's mpfr_sum), and a digest of a result's bytes. */
#include <mpfr.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_TERMS 64

/* Called from Fortran (test_data.f90's interface block). */
double oracle_sum64(const double *terms, int count);
float oracle_sum32(const float *terms, int count);
int64_t oracle_digest(const void *data, int64_t bytes);

/* The sum of terms[0 .. count) rounded once, to nearest, to `precision` bits. */
static double sum_rounded(const double *terms, int count, mpfr_prec_t precision)
{
    mpfr_t values[MAX_TERMS], sum;
    mpfr_ptr pointers[MAX_TERMS];
    if (count > MAX_TERMS) count = MAX_TERMS;
    for (int k = 0; k < count; k++) {
        mpfr_init2(values[k], 53);
        mpfr_set_d(values[k], terms[k], MPFR_RNDN);
        pointers[k] = values[k];
    }
    mpfr_init2(sum, precision);
    mpfr_sum(sum, pointers, (unsigned long)count, MPFR_RNDN);
    double result = mpfr_get_d(sum, MPFR_RNDN); /* exact: sum has at most 53 bits */
    mpfr_clear(sum);
    for (int k = 0; k < count; k++)
        mpfr_clear(values[k]);
    return result;
}

/* The sum of terms[0 .. count) rounded once to binary64 (to nearest). */
double oracle_sum64(const double *terms, int count)
{
    return sum_rounded(terms, count, 53);
}

/* The same, rounded once to binary32 (the test's sums stay in binary32's exponent range). */
float oracle_sum32(const float *terms, int count)
{
    double wide[MAX_TERMS];
    if (count > MAX_TERMS) count = MAX_TERMS;
    for (int k = 0; k < count; k++)
        wide[k] = terms[k];
    return (float)sum_rounded(wide, count, 24);
}

/* 64-bit FNV-1a of `bytes` bytes, to compare results across runs. */
int64_t oracle_digest(const void *data, int64_t bytes)
{
    const unsigned char *p = data;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < bytes; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ull;
    return (int64_t)hash;
}
