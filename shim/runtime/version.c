/* version.c: the library's version string. */
#include "common.h"
#include "reprod.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

REPROD_EXPORT const char *reprod_version(void)
{
    return STRINGIFY(REPROD_VERSION_MAJOR) "." STRINGIFY(REPROD_VERSION_MINOR) "." STRINGIFY(
        REPROD_VERSION_PATCH);
}
