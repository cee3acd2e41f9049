/* kernels.c: the shim's device kernels (shim/device/cuda_kernels.cu) built for the host from the same
 * source, shim/device/cuda_kernel.h: the stand-in libcuda runs "reprod_reduce" and "reprod_pointers"
 * here, so that under the stand-ins the shim's kernel path runs the kernel's own code.
 *
 * Every thread of the grid runs one after the other (the kernels use no shared memory and no
 * barrier, so that computes what the device does), in the default floating-point environment
 * as a GPU would, whatever the calling thread set. Compile with -Ishim -Iinclude.
 */
#include "kernels.h"

#include "device/cuda_kernel.h"
#include "device/cuda_kernel_fixed.h"

#include <fenv.h>
#include <stdint.h>
#include <string.h>

typedef void kernel_body(const struct reprod_kernel_args *args, uint64_t thread, uint64_t threads);

/* Run `body` for every thread of a one-dimensional grid (the shim launches only those). */
static void run_grid(kernel_body *body, void **params, const unsigned grid[3],
                     const unsigned block[3])
{
    struct reprod_kernel_args args;
    memcpy(&args, params[0], sizeof args);
    uint64_t threads = (uint64_t)grid[0] * block[0];
    fenv_t saved;
    fegetenv(&saved);
    fesetenv(FE_DFL_ENV);
    for (uint64_t thread = 0; thread < threads; thread++)
        body(&args, thread, threads);
    fesetenv(&saved);
}

static void reduce_on_host(void **params, const unsigned grid[3], const unsigned block[3])
{
    run_grid(reprod_kernel_reduce, params, grid, block);
}

static void pointers_on_host(void **params, const unsigned grid[3], const unsigned block[3])
{
    run_grid(reprod_kernel_pointers, params, grid, block);
}

/* The fixed-point route's stages (its own parameter struct). */
static void fixed_on_host(void **params, const unsigned grid[3], const unsigned block[3])
{
    struct reprod_fixed_args args;
    memcpy(&args, params[0], sizeof args);
    uint64_t threads = (uint64_t)grid[0] * block[0];
    fenv_t saved;
    fegetenv(&saved);
    fesetenv(FE_DFL_ENV);
    for (uint64_t thread = 0; thread < threads; thread++)
        reprod_kernel_fixed(&args, thread, threads);
    fesetenv(&saved);
}

standin_kernel_fn *standin_kernel_lookup(const char *name)
{
    if (name == NULL) return NULL;
    if (strcmp(name, REPROD_KERNEL_FIXED_NAME) == 0) return fixed_on_host;
    if (strcmp(name, REPROD_KERNEL_NAME) == 0) return reduce_on_host;
    if (strcmp(name, REPROD_KERNEL_POINTERS_NAME) == 0) return pointers_on_host;
    return NULL;
}

size_t standin_kernel_param_bytes(const char *name)
{
    if (name != NULL && strcmp(name, REPROD_KERNEL_FIXED_NAME) == 0)
        return sizeof(struct reprod_fixed_args);
    return standin_kernel_lookup(name) != NULL ? sizeof(struct reprod_kernel_args) : 0;
}

size_t standin_kernel_pointers(const char *name, const void *param, const void **pointers, size_t max)
{
    if (standin_kernel_lookup(name) == NULL || param == NULL) return 0;
    if (strcmp(name, REPROD_KERNEL_FIXED_NAME) == 0) {
        struct reprod_fixed_args fixed;
        memcpy(&fixed, param, sizeof fixed);
        const void *fixed_areas[6] = {fixed.terms, fixed.codes,     fixed.words,
                                      fixed.out,   fixed.max_words, fixed.layout};
        size_t count = 0;
        for (size_t i = 0; i < 6 && count < max; i++)
            if (fixed_areas[i] != NULL) pointers[count++] = fixed_areas[i];
        return count;
    }
    struct reprod_kernel_args args;
    memcpy(&args, param, sizeof args);
    const void *areas[5] = {args.blocks, args.own_index >= 0 ? args.own : NULL,
                            (const void *)args.pointers, args.out,
                            args.premul == REPROD_KERNEL_PREMUL_DEVICE ? args.scalar_device : NULL};
    size_t found = 0;
    for (size_t i = 0; i < 5 && found < max; i++)
        if (areas[i] != NULL) pointers[found++] = areas[i];
    return found;
}
