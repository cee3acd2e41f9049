/* test_audit.c: the ulp distances of REPROD_MODE=audit, against values counted by hand or
 * with nextafter (an independent walk), in every type; NaN and the infinities. */
#include "runtime/audit.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t ulps64(double a, double b)
{
    return reprod_ulps(REPROD_FLOAT64, &a, &b);
}

static uint64_t ulps32(float a, float b)
{
    return reprod_ulps(REPROD_FLOAT32, &a, &b);
}

Test(audit, distance_matches_nextafter_steps)
{
    double values[] = {1.0, -1.0, 0x1p-1074, -0x1p-1074, 1e300, 3.5, -2.25};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        double x = values[i], y = values[i];
        for (uint64_t steps = 0; steps < 50; steps++) {
            cr_assert_eq(ulps64(x, y), steps, "%a and %a: %llu, want %llu", x, y,
                         (unsigned long long)ulps64(x, y), (unsigned long long)steps);
            cr_assert_eq(ulps64(y, x), steps);
            y = nextafter(y, INFINITY);
        }
        float f = (float)values[i] == 0 ? 1.0f : (float)values[i], g = f;
        for (uint64_t steps = 0; steps < 50; steps++, g = nextafterf(g, -INFINITY))
            cr_assert_eq(ulps32(f, g), steps, "%a and %a", (double)f, (double)g);
    }
}

Test(audit, zeros_nan_and_infinities)
{
    cr_expect_eq(ulps64(0.0, -0.0), 0);
    cr_expect_eq(ulps64(0x1p-1074, -0x1p-1074), 2); /* across zero */
    cr_expect_eq(ulps64(INFINITY, 0x1.fffffffffffffp1023), 1);
    cr_expect_eq(ulps64(NAN, -NAN), 0);
    cr_expect_eq(ulps64(NAN, 1.0), REPROD_ULPS_NAN);
    cr_expect_eq(ulps64(INFINITY, NAN), REPROD_ULPS_NAN);
    cr_expect_eq(ulps64(INFINITY, -INFINITY), 2 * 0x7ff0000000000000ull);
    cr_expect_eq(ulps32(INFINITY, 0x1.fffffep127f), 1);
}

Test(audit, half_types_count_in_their_own_bits)
{
    uint16_t one = 0x3c00, next = 0x3c01, minus_tiny = 0x8001, plus_tiny = 0x0001;
    cr_expect_eq(reprod_ulps(REPROD_FLOAT16, &one, &next), 1);
    cr_expect_eq(reprod_ulps(REPROD_FLOAT16, &minus_tiny, &plus_tiny), 2);
    uint16_t nan16 = 0x7e00, inf16 = 0x7c00, bnan = 0x7fc0, binf = 0x7f80;
    cr_expect_eq(reprod_ulps(REPROD_FLOAT16, &nan16, &inf16), REPROD_ULPS_NAN);
    cr_expect_eq(reprod_ulps(REPROD_BFLOAT16, &bnan, &binf), REPROD_ULPS_NAN);
    cr_expect_eq(reprod_ulps(REPROD_BFLOAT16, &binf, &nan16), 0x7f80 - 0x7e00); /* a number */
}

Test(audit, compare_counts_elements_not_components)
{
    /* Three complex64 elements: the first equal, the second off by 3 ulps in its imaginary
     * part, the third off by 1 in both parts; NaNs of different payloads are equal. */
    float native[6] = {1.0f, 2.0f, 1.0f, 2.0f, 5.0f, NAN};
    float exact[6] = {1.0f, 2.0f, 1.0f, 2.0f, 5.0f, -NAN};
    native[3] = nextafterf(nextafterf(nextafterf(2.0f, 9), 9), 9);
    uint64_t differing, worst;
    reprod_audit_compare(REPROD_FLOAT32, native, exact, 3, 2, &differing, &worst);
    cr_expect_eq(differing, 1);
    cr_expect_eq(worst, 3);
    native[4] = nextafterf(5.0f, 0);
    reprod_audit_compare(REPROD_FLOAT32, native, exact, 3, 2, &differing, &worst);
    cr_expect_eq(differing, 2);
    double zero = 0.0, minus_zero = -0.0;
    reprod_audit_compare(REPROD_FLOAT64, &zero, &minus_zero, 1, 1, &differing, &worst);
    cr_expect(differing == 1 && worst == 0, "+0 against -0: %llu differ, %llu ulps",
              (unsigned long long)differing, (unsigned long long)worst);
}
