/* kernels.h: host builds of the shim's device kernels, for the stand-in libcuda (tests only):
 * its cuModuleGetFunction finds a kernel here by name and its cuLaunchKernel runs it. */
#ifndef REPROD_STANDIN_KERNELS_H
#define REPROD_STANDIN_KERNELS_H

#include <stddef.h>

/* A host build of a device kernel: runs the whole grid serially on the calling thread. */
typedef void standin_kernel_fn(void **params, const unsigned grid[3], const unsigned block[3]);
/* The host build of the kernel named `name`, or NULL. Defined in tests/standins_nccl/kernels.c. */
standin_kernel_fn *standin_kernel_lookup(const char *name);
/* Bytes of the single by-value struct parameter of kernel `name` (0 if unknown). */
size_t standin_kernel_param_bytes(const char *name);
/* The memory kernel `name` reads or writes given its parameter `param` (the start of each area:
 * the contribution blocks, the own contribution, the pointer array, the output, the scalar), at
 * most `max` of them into `pointers`; returns how many. For the stand-in's check that a kernel
 * touches only memory its device can reach. */
size_t standin_kernel_pointers(const char *name, const void *param, const void **pointers, size_t max);

#endif /* REPROD_STANDIN_KERNELS_H */
