/* cuda_driver.h: the CUDA driver API as the shim calls it (internal to shim/cuda*.c).
 *
 * The few types and constants the shim needs are restated from CUDA's cuda.h (as
 * hooks/seeding/curand.c does for cuRAND), so the shim builds without CUDA; every function is found at
 * run time in the libcuda.so.1 the process already loaded (cuda.c).
 */
#ifndef REPROD_CUDA_DRIVER_H
#define REPROD_CUDA_DRIVER_H

#include "device/cuda.h"

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

/* The functions, with the signatures of the versions cuGetProcAddress returns for CUDA 12.0
 * (REPROD_CUDA_API_VERSION); the names in cuda.c. Optional ones may be NULL. */
struct reprod_cuda_driver {
    CUresult (*ctx_get_current)(CUcontext *context);
    CUresult (*ctx_get_device)(CUdevice *device);
    CUresult (*ctx_get_id)(CUcontext context, unsigned long long *id); /* optional */
    CUresult (*ctx_push_current)(CUcontext context);
    CUresult (*ctx_pop_current)(CUcontext *context);
    CUresult (*device_get_attribute)(int *value, int attribute, CUdevice device);
    CUresult (*stream_get_ctx)(CUstream stream, CUcontext *context);
    CUresult (*stream_is_capturing)(CUstream stream, int *status);
    CUresult (*stream_get_capture_info)(CUstream stream, int *status, unsigned long long *id,
                                        CUgraph *graph, const CUgraphNode **dependencies,
                                        size_t *dependency_count); /* optional (_v2) */
    CUresult (*stream_synchronize)(CUstream stream);
    CUresult (*thread_exchange_capture_mode)(int *mode);
    CUresult (*mem_alloc_async)(CUdeviceptr *pointer, size_t bytes, CUstream stream);
    CUresult (*mem_free_async)(CUdeviceptr pointer, CUstream stream);
    CUresult (*memcpy_async)(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                             CUstream stream);
    CUresult (*mem_host_alloc)(void **pointer, size_t bytes, unsigned int flags);
    CUresult (*mem_free_host)(void *pointer);
    CUresult (*launch_host_func)(CUstream stream, CUhostFn *function, void *user_data);
    CUresult (*module_load_data)(CUmodule *module, const void *image);
    CUresult (*module_get_function)(CUfunction *function, CUmodule module, const char *name);
    CUresult (*launch_kernel)(CUfunction function, unsigned grid_x, unsigned grid_y,
                              unsigned grid_z, unsigned block_x, unsigned block_y,
                              unsigned block_z, unsigned shared_bytes, CUstream stream,
                              void **parameters, void **extra);
    CUresult (*user_object_create)(CUuserObject *object, void *pointer, CUhostFn *destroy,
                                   unsigned int initial_refcount,
                                   unsigned int flags); /* optional */
    CUresult (*graph_retain_user_object)(CUgraph graph, CUuserObject object, unsigned int count,
                                         unsigned int flags); /* optional */
    /* The device a default stream's work is done for (cuda.h). */
    CUresult (*primary_ctx_retain)(CUcontext *context, CUdevice device);
    CUresult (*primary_ctx_release)(CUdevice device);
    /* A full device (reprod_cuda_scratch_alloc): optional, without them no trim. */
    CUresult (*device_get_mem_pool)(CUmemoryPool *pool, CUdevice device);
    CUresult (*mem_pool_trim_to)(CUmemoryPool pool, size_t keep_bytes);
    /* What the log says about the kernels (cuda_module.c): optional. */
    CUresult (*driver_get_version)(int *version);
    CUresult (*get_error_name)(CUresult error, const char **name);
    CUresult (*func_get_attribute)(int *value, int attribute, CUfunction function);
    CUresult (*ctx_get_limit)(size_t *value, int limit);
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
