/* The host builds of the shim's device kernels, for the CUDA stand-in (libcuda.so.1 in
 * build/standins/): cuModuleGetFunction looks a kernel up by name here, cuLaunchKernel runs it on
 * the stream's worker thread. Kernels of this project take exactly one parameter, a struct passed
 * by value: the stand-in copies its bytes at launch, as CUDA copies argument values. */
#ifndef STANDIN_KERNELS_H
#define STANDIN_KERNELS_H

#include <stddef.h>

/* A host build of a device kernel: runs the whole grid serially on the calling thread. */
typedef void standin_kernel_fn(void **params, const unsigned grid[3], const unsigned block[3]);
/* The host build of the kernel named `name`, or NULL. Defined in tests/standins_nccl/kernels.c. */
standin_kernel_fn *standin_kernel_lookup(const char *name);
/* The size in bytes of the one parameter of the kernel named `name` (0 if unknown). */
size_t standin_kernel_param_bytes(const char *name);

#endif
