/* cuda_driver.h: the CUDA driver API as the shim calls it (internal to shim/cuda*.c).
 *
 * The few types and constants the shim needs are restated from CUDA's cuda.h (as
 * hooks/seeding/curand.c does for cuRAND), so the shim builds without CUDA; every function is found at
 * run time in the libcuda.so.1 the process already loaded (cuda.c).
 */
#ifndef REPROD_CUDA_DRIVER_H
#define REPROD_CUDA_DRIVER_H

#include "device/cuda.h"
#include "interpose/real.h"

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;                      /* CUDA_SUCCESS = 0 */
typedef int CUdevice;                      /* a device ordinal */
typedef unsigned long long CUdeviceptr;    /* CUdeviceptr_v2 */
typedef struct CUctx_st *CUcontext;        /* opaque handles */
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUuserObject_st *CUuserObject;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef reprod_stream CUstream;
typedef void CUhostFn(void *user_data);

#define CUDA_SUCCESS                                 0
#define CUDA_ERROR_OUT_OF_MEMORY                     2
#define CUDA_ERROR_NO_BINARY_FOR_GPU                 209
#define CUDA_ERROR_UNSUPPORTED_PTX_VERSION           222
#define CU_STREAM_CAPTURE_STATUS_NONE                0
#define CU_STREAM_CAPTURE_STATUS_ACTIVE              1
#define CU_STREAM_CAPTURE_STATUS_INVALIDATED         2
#define CU_STREAM_CAPTURE_MODE_RELAXED               2
#define CU_MEMHOSTALLOC_PORTABLE                     0x01
#define CU_MEMHOSTALLOC_DEVICEMAP                    0x02
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES           3
#define CU_FUNC_ATTRIBUTE_BINARY_VERSION             6
#define CU_LIMIT_STACK_SIZE                          0
#define CU_USER_OBJECT_NO_DESTRUCTOR_SYNC            1
#define CU_GRAPH_USER_OBJECT_MOVE                    1
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM            1
#define CU_GET_PROC_ADDRESS_SUCCESS                  0

/* The functions, X(field, symbol, type) for interpose/real.h: the symbol libcuda exports, and
 * the signature of the version cuGetProcAddress returns for CUDA 12.0 (REPROD_CUDA_API_VERSION)
 * under the symbol's name without its _vN suffix. The optional ones (cuda.c) may be NULL. */
/* clang-format off */
#define REPROD_CUDA_DRIVER_FUNCTIONS(X)                                                            \
    X(ctx_get_current, "cuCtxGetCurrent", CUresult (*)(CUcontext *context))                        \
    X(ctx_get_device, "cuCtxGetDevice", CUresult (*)(CUdevice *device))                            \
    X(ctx_get_id, "cuCtxGetId", CUresult (*)(CUcontext context, unsigned long long *id))           \
    X(ctx_push_current, "cuCtxPushCurrent_v2", CUresult (*)(CUcontext context))                    \
    X(ctx_pop_current, "cuCtxPopCurrent_v2", CUresult (*)(CUcontext *context))                     \
    X(device_get_attribute, "cuDeviceGetAttribute",                                                \
      CUresult (*)(int *value, int attribute, CUdevice device))                                    \
    X(stream_get_ctx, "cuStreamGetCtx", CUresult (*)(CUstream stream, CUcontext *context))         \
    X(stream_is_capturing, "cuStreamIsCapturing", CUresult (*)(CUstream stream, int *status))      \
    X(stream_get_capture_info, "cuStreamGetCaptureInfo_v2",                                        \
      CUresult (*)(CUstream stream, int *status, unsigned long long *id, CUgraph *graph,           \
                   const CUgraphNode **dependencies, size_t *dependency_count))                    \
    X(stream_synchronize, "cuStreamSynchronize", CUresult (*)(CUstream stream))                    \
    X(thread_exchange_capture_mode, "cuThreadExchangeStreamCaptureMode", CUresult (*)(int *mode))  \
    X(mem_alloc_async, "cuMemAllocAsync",                                                          \
      CUresult (*)(CUdeviceptr *pointer, size_t bytes, CUstream stream))                           \
    X(mem_free_async, "cuMemFreeAsync", CUresult (*)(CUdeviceptr pointer, CUstream stream))        \
    X(memcpy_async, "cuMemcpyAsync",                                                               \
      CUresult (*)(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream stream))    \
    X(mem_host_alloc, "cuMemHostAlloc",                                                            \
      CUresult (*)(void **pointer, size_t bytes, unsigned int flags))                              \
    X(mem_free_host, "cuMemFreeHost", CUresult (*)(void *pointer))                                 \
    X(launch_host_func, "cuLaunchHostFunc",                                                        \
      CUresult (*)(CUstream stream, CUhostFn *function, void *user_data))                          \
    X(module_load_data, "cuModuleLoadData", CUresult (*)(CUmodule *module, const void *image))     \
    X(module_get_function, "cuModuleGetFunction",                                                  \
      CUresult (*)(CUfunction *function, CUmodule module, const char *name))                       \
    X(launch_kernel, "cuLaunchKernel",                                                             \
      CUresult (*)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,         \
                   unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,    \
                   CUstream stream, void **parameters, void **extra))                              \
    X(user_object_create, "cuUserObjectCreate",                                                    \
      CUresult (*)(CUuserObject *object, void *pointer, CUhostFn *destroy,                         \
                   unsigned int initial_refcount, unsigned int flags))                             \
    X(graph_retain_user_object, "cuGraphRetainUserObject",                                         \
      CUresult (*)(CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags))    \
    /* The device a default stream's work is done for (cuda.h). */                                 \
    X(primary_ctx_retain, "cuDevicePrimaryCtxRetain",                                              \
      CUresult (*)(CUcontext *context, CUdevice device))                                           \
    X(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", CUresult (*)(CUdevice device))          \
    /* A full device (reprod_cuda_scratch_alloc): without them no trim. */                         \
    X(device_get_mem_pool, "cuDeviceGetMemPool",                                                   \
      CUresult (*)(CUmemoryPool *pool, CUdevice device))                                           \
    X(mem_pool_trim_to, "cuMemPoolTrimTo", CUresult (*)(CUmemoryPool pool, size_t keep_bytes))     \
    /* What the log says about the kernels (cuda_module.c). */                                     \
    X(driver_get_version, "cuDriverGetVersion", CUresult (*)(int *version))                        \
    X(get_error_name, "cuGetErrorName", CUresult (*)(CUresult error, const char **name))           \
    X(func_get_attribute, "cuFuncGetAttribute",                                                    \
      CUresult (*)(int *value, int attribute, CUfunction function))                                \
    X(ctx_get_limit, "cuCtxGetLimit", CUresult (*)(size_t *value, int limit))
/* clang-format on */
struct reprod_cuda_driver {
    REPROD_REAL_FIELDS(REPROD_CUDA_DRIVER_FUNCTIONS)
};

/* The driver's functions, or NULL when the process has not loaded libcuda.so.1 (or lacks a
 * required function). Lock-free once found; safe in a fork child (the addresses stay). */
const struct reprod_cuda_driver *reprod_cuda_driver(void);

/* Where one call's work runs (cuda.h): the context made current for it, and what leaving
 * undoes. */
struct reprod_cuda_scope {
    CUcontext context; /* the context the work runs in */
    int pushed;        /* it was pushed: leaving pops it */
    int retained;      /* a device's primary context was retained: leaving releases it */
    CUdevice device;
};

/* Make current the context of the work on `stream` for `device` (cuda.h: a default stream's
 * work goes to the device's primary context, a created stream's to its own). Returns
 * CUDA_SUCCESS (then call reprod_cuda_leave) or the error. */
CUresult reprod_cuda_enter(const struct reprod_cuda_driver *d, CUstream stream, int device,
                           struct reprod_cuda_scope *scope);
void reprod_cuda_leave(const struct reprod_cuda_driver *d, struct reprod_cuda_scope *scope);

/* The name of a CUDA error ("CUDA_ERROR_OUT_OF_MEMORY"), or "CUDA error" when unknown. */
const char *reprod_cuda_error_name(const struct reprod_cuda_driver *d, CUresult error);

/* cuda_module.c: launch the reduction kernel for `args` (already checked) on `stream`, whose
 * context `context` is current. Loads the kernels for the context first unless `capturing`.
 * Returns CUDA_SUCCESS, or nonzero when the kernels are not available or the launch failed
 * (then the reduction itself was not enqueued: the caller takes the host path, and *why says
 * why in one word for the counts line, e.g. "driver-older-than-kernels"). */
struct reprod_kernel_args;
CUresult reprod_cuda_launch(const struct reprod_cuda_driver *d, CUcontext context, CUstream stream,
                            const struct reprod_kernel_args *args, int capturing, const char **why);

/* cuda_module.c: the same for one stage of the fixed-point route (cuda_kernel_fixed.h). */
struct reprod_fixed_args;
CUresult reprod_cuda_launch_fixed(const struct reprod_cuda_driver *d, CUcontext context,
                                  CUstream stream, const struct reprod_fixed_args *args,
                                  int capturing, const char **why);

/* cuda_host.c: that stage in stream order on the host (pinned staging of the arrays it reads
 * and writes, then a host function runs the kernel's body on them). */
int reprod_cuda_fixed_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                              const struct reprod_fixed_args *args, int capturing);

/* cuda_host.c: copy the REPROD_DEVICE_FIXED_CELLS int32 at `device_cells` into staging in stream
 * order; a host function then calls done(owner, cells). */
int reprod_cuda_readback_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                                 const int32_t *device_cells,
                                 void (*done)(void *owner, const int32_t *cells), void *owner);

/* cuda_module.c: count one device reduction that ran on the kernels (why == NULL) or on the
 * host path (why: the word). */
void reprod_cuda_count_path(const char *why);

/* cuda_host.c: the same reduction in stream order on the host (pinned staging, host engine);
 * `capturing`: the staging then belongs to the graph being captured. */
int reprod_cuda_reduce_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                               const struct reprod_kernel_args *args, int capturing);

/* cuda_host.c: `bytes` of pinned host memory that the devices reach at the same address (the
 * scratch of a full device), taken from the staging pool, or NULL. */
void *reprod_cuda_host_scratch_take(const struct reprod_cuda_driver *d, size_t bytes);

/* cuda_host.c: if `pointer` is host scratch of this process, give it back once `stream` has
 * passed this point (under capture: when the graph is destroyed) and return 1; else 0. */
int reprod_cuda_host_scratch_release(const struct reprod_cuda_driver *d, CUstream stream,
                                     void *pointer, int capturing);

#endif /* REPROD_CUDA_DRIVER_H */
