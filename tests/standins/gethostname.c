/* gethostname.c: a stand-in for libc's gethostname, preloaded before the shim by tests that
 * choose the host name %h expands to (tests/lib.sh, with_host_name): it answers $FAKE_HOSTNAME,
 * whatever it holds (a slash, a newline, an escape code, nothing). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gethostname(char *name, size_t length)
{
    const char *fake = getenv("FAKE_HOSTNAME");
    strncpy(name, fake ? fake : "", length);
    return 0;
}
