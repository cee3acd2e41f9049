/* cuda_kernels.cu: the device kernels, built by nvcc into a fatbin that the shim embeds
 * (Makefile; loaded by cuda_module.c). The bodies are cuda_kernel.h's, shared with the host.
 *
 * Build with -fmad=false -ftz=false -prec-div=true: no contraction, subnormals kept, IEEE
 * division, as the host engine computes (engine_ordered.h also uses the _rn intrinsics). */
#define ENGINE_FUNCTION     __host__ __device__ static inline
#define REPROD_KERNEL_APART __device__ __noinline__ static /* a stack frame of its own */

#include "device/cuda_kernel.h"
#include "device/cuda_kernel_fixed.h"

static_assert(sizeof(struct reprod_kernel_args) == REPROD_KERNEL_ARGS_BYTES,
              "the launch's parameter layout");
static_assert(sizeof(struct reprod_fixed_args) == REPROD_FIXED_ARGS_BYTES,
              "the fixed route's parameter layout");

/* One thread per element stride: thread = global index, threads = the grid's thread count;
 * consecutive threads read consecutive elements of each contribution (coalesced). */
/* __grid_constant__: the parameter is read where it was passed, not copied to the stack. */
extern "C" __global__ void reprod_reduce(const __grid_constant__ struct reprod_kernel_args args)
{
    uint64_t thread = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t threads = (uint64_t)gridDim.x * blockDim.x;
    reprod_kernel_reduce(&args, thread, threads);
}

extern "C" __global__ void reprod_pointers(struct reprod_kernel_args args)
{
    uint64_t thread = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t threads = (uint64_t)gridDim.x * blockDim.x;
    reprod_kernel_pointers(&args, thread, threads);
}

/* The fixed-point route's stages (cuda_kernel_fixed.h), one element a thread-stride. */
extern "C" __global__ void reprod_fixed(const __grid_constant__ struct reprod_fixed_args args)
{
    uint64_t thread = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t threads = (uint64_t)gridDim.x * blockDim.x;
    reprod_kernel_fixed(&args, thread, threads);
}
