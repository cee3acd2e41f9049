/* Placeholder: no host builds of kernels yet. The branch that adds the shim's kernels replaces this
 * file with one that maps each kernel name to its host build (kernels.h). */
#include "kernels.h"

standin_kernel_fn *standin_kernel_lookup(const char *name) {
    (void)name;
    return NULL;
}

size_t standin_kernel_param_bytes(const char *name) {
    (void)name;
    return 0;
}
