/* common.h: what every file of the shim may use: export and branch-hint macros. */
#ifndef REPROD_COMMON_H
#define REPROD_COMMON_H

/* A symbol the shim exports: an intercepted function or the public reprod_* API.
 * Everything else is hidden (-fvisibility=hidden), and shim/exports.map says it again. */
#define REPROD_EXPORT __attribute__((visibility("default")))

#define REPROD_LIKELY(x)   __builtin_expect(!!(x), 1)
#define REPROD_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define REPROD_ARRAY_LENGTH(a) (sizeof(a) / sizeof((a)[0]))

#endif /* REPROD_COMMON_H */
