/* cuda_driver.h: the CUDA driver API as the shim calls it (internal to shim/cuda*.c).
 *
 * The few types and constants the shim needs are restated from CUDA's cuda.h (as
 * hooks/curand.c does for cuRAND), so the shim builds without CUDA; every function is found at
 * run time in the libcuda.so.1 the process already loaded (cuda.c).
 */
#ifndef REPROD_CUDA_DRIVER_H
#define REPROD_CUDA_DRIVER_H

#include "cuda.h"

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
typedef reprod_stream CUstream;
typedef void CUhostFn(void *user_data);

#define CUDA_SUCCESS                          0
#define CU_STREAM_CAPTURE_STATUS_NONE         0
#define CU_STREAM_CAPTURE_STATUS_ACTIVE       1
#define CU_STREAM_CAPTURE_STATUS_INVALIDATED  2
#define CU_STREAM_CAPTURE_MODE_RELAXED        2
#define CU_MEMHOSTALLOC_PORTABLE              0x01
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_USER_OBJECT_NO_DESTRUCTOR_SYNC     1
#define CU_GRAPH_USER_OBJECT_MOVE             1
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM     1
#define CU_GET_PROC_ADDRESS_SUCCESS           0

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
};

/* The driver's functions, or NULL when the process has not loaded libcuda.so.1 (or lacks a
 * required function). Lock-free once found; safe in a fork child (the addresses stay). */
const struct reprod_cuda_driver *reprod_cuda_driver(void);

/* The stream's context made current for the duration of a call: *pushed is 1 when it had to
 * be pushed (then reprod_cuda_context_leave pops it). Returns CUDA_SUCCESS or the error. */
CUresult reprod_cuda_context_enter(const struct reprod_cuda_driver *d, CUstream stream,
                                   CUcontext *context, int *pushed);
void reprod_cuda_context_leave(const struct reprod_cuda_driver *d, int pushed);

/* cuda_module.c: launch the reduction kernel for `args` (already checked) on `stream`, whose
 * context `context` is current. Loads the kernels for the context first unless `capturing`.
 * Returns CUDA_SUCCESS, or nonzero when the kernels are not available or the launch failed
 * (then the reduction itself was not enqueued: the caller takes the host path). */
struct reprod_kernel_args;
CUresult reprod_cuda_launch(const struct reprod_cuda_driver *d, CUcontext context,
                            CUstream stream, const struct reprod_kernel_args *args,
                            int capturing);

/* cuda_host.c: the same reduction in stream order on the host (pinned staging, host engine);
 * `capturing`: the staging then belongs to the graph being captured. */
int reprod_cuda_reduce_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                               const struct reprod_kernel_args *args, int capturing);

#endif /* REPROD_CUDA_DRIVER_H */
