/* audit.h: REPROD_MODE=audit's measure of how far a native sum is from the exact one: per
 * element, the distance in units in the last place between the two values. */
#ifndef REPROD_AUDIT_H
#define REPROD_AUDIT_H

#include "reprod.h"

#include <stddef.h>
#include <stdint.h>

/* A NaN on one side and a number (finite or infinite) on the other: farther than any distance. */
#define REPROD_ULPS_NAN UINT64_MAX

/* The distance between `native` and `exact`, two values of `type` (their bits at the
 * pointers), in ulps: how many representable values lie between them plus one, i.e. the
 * difference of their bit patterns in the type's ordered integer representation (where +0 and
 * -0 are both 0, and the infinities follow the largest finite values). Two NaNs are 0 apart
 * whatever their payloads; a NaN and a number REPROD_ULPS_NAN. */
uint64_t reprod_ulps(reprod_type type, const void *native, const void *exact);

/* Compare `elements` elements of `components` values of `type` each (2 for a complex type):
 * *differing receives how many elements differ in the bits of some component (two NaNs of any
 * payloads count as equal; +0 against -0 differs, at 0 ulps), *worst_ulps the largest
 * component distance (0 when none differs). */
void reprod_audit_compare(reprod_type type, const void *native, const void *exact,
                          size_t elements, size_t components, uint64_t *differing,
                          uint64_t *worst_ulps);

#endif /* REPROD_AUDIT_H */
