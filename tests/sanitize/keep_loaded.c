/* keep_loaded.c: dlclose that unloads nothing, preloaded by make test-sanitize.
 *
 * Open MPI unloads its components (mca_*.so) in MPI_Finalize. A leak allocated in an unloaded
 * component is reported at exit against an address no module holds any more, or against the
 * module mapped there since, so that no suppression by library can name it. Keeping every
 * library loaded keeps the reports true to their libraries. */
#include <stddef.h>

int dlclose(void *handle);

/* Always succeeds; the library stays loaded. */
__attribute__((visibility("default"))) int dlclose(void *handle)
{
    (void)handle;
    return 0;
}
