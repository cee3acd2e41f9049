/* cuda.c: the CUDA driver API found at run time in the libcuda.so.1 the process loaded, the
 * stream-ordered memory calls of cuda.h, and reprod_cuda_reduce's choice between the device
 * kernels (cuda_module.c) and the host path (cuda_host.c), which give the same bits.
 */
#include "cuda.h"

#include "common.h"
#include "cuda_driver.h"
#include "cuda_kernel.h"
#include "resolve.h"

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

/* ---- Configuration ---------------------------------------------------------------------- */

#define REPROD_CUDA_API_VERSION 12000 /* the signatures cuda_driver.h restates are CUDA 12.0's */

_Static_assert(REPROD_PREMUL_NONE == REPROD_KERNEL_PREMUL_NONE &&
                   REPROD_PREMUL_HOST == REPROD_KERNEL_PREMUL_HOST &&
                   REPROD_PREMUL_DEVICE == REPROD_KERNEL_PREMUL_DEVICE,
               "cuda.h and cuda_kernel.h name the same PreMulSum kinds");
_Static_assert(sizeof(struct reprod_kernel_args) == REPROD_KERNEL_ARGS_BYTES,
               "the kernel's parameter layout");

/* Each function: where it goes, the name cuGetProcAddress knows, the exported name to look for
 * when there is no cuGetProcAddress (the versioned symbol cuda.h maps the name to, legacy
 * default stream), and whether the shim can do without it. */
struct driver_symbol {
    size_t offset;
    const char *name;
    const char *exported;
    int optional;
};

#define SYMBOL(field, name, exported, optional)                                                    \
    {                                                                                              \
        offsetof(struct reprod_cuda_driver, field), name, exported, optional                       \
    }

static const struct driver_symbol driver_symbols[] = {
    SYMBOL(ctx_get_current, "cuCtxGetCurrent", "cuCtxGetCurrent", 0),
    SYMBOL(ctx_get_device, "cuCtxGetDevice", "cuCtxGetDevice", 0),
    SYMBOL(ctx_get_id, "cuCtxGetId", "cuCtxGetId", 1),
    SYMBOL(ctx_push_current, "cuCtxPushCurrent", "cuCtxPushCurrent_v2", 0),
    SYMBOL(ctx_pop_current, "cuCtxPopCurrent", "cuCtxPopCurrent_v2", 0),
    SYMBOL(device_get_attribute, "cuDeviceGetAttribute", "cuDeviceGetAttribute", 0),
    SYMBOL(stream_get_ctx, "cuStreamGetCtx", "cuStreamGetCtx", 0),
    SYMBOL(stream_is_capturing, "cuStreamIsCapturing", "cuStreamIsCapturing", 0),
    SYMBOL(stream_get_capture_info, "cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2", 1),
    SYMBOL(stream_synchronize, "cuStreamSynchronize", "cuStreamSynchronize", 0),
    SYMBOL(thread_exchange_capture_mode, "cuThreadExchangeStreamCaptureMode",
           "cuThreadExchangeStreamCaptureMode", 0),
    SYMBOL(mem_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync", 0),
    SYMBOL(mem_free_async, "cuMemFreeAsync", "cuMemFreeAsync", 0),
    SYMBOL(memcpy_async, "cuMemcpyAsync", "cuMemcpyAsync", 0),
    SYMBOL(mem_host_alloc, "cuMemHostAlloc", "cuMemHostAlloc", 0),
    SYMBOL(mem_free_host, "cuMemFreeHost", "cuMemFreeHost", 0),
    SYMBOL(launch_host_func, "cuLaunchHostFunc", "cuLaunchHostFunc", 0),
    SYMBOL(module_load_data, "cuModuleLoadData", "cuModuleLoadData", 0),
    SYMBOL(module_get_function, "cuModuleGetFunction", "cuModuleGetFunction", 0),
    SYMBOL(launch_kernel, "cuLaunchKernel", "cuLaunchKernel", 0),
    SYMBOL(user_object_create, "cuUserObjectCreate", "cuUserObjectCreate", 1),
    SYMBOL(graph_retain_user_object, "cuGraphRetainUserObject", "cuGraphRetainUserObject", 1),
};

typedef CUresult get_proc_address_fn(const char *symbol, void **function, int cuda_version,
                                     unsigned long long flags, int *symbol_status);

/* Fill *d from the loaded libcuda; 0 when it is not loaded or lacks a required function. */
static int driver_resolve(struct reprod_cuda_driver *d)
{
    memset(d, 0, sizeof *d);
    void *get_proc_address = reprod_resolve("cuGetProcAddress_v2");
    if (get_proc_address == NULL && reprod_resolve("cuInit") == NULL) return 0; /* no CUDA */
    get_proc_address_fn *get;
    memcpy(&get, &get_proc_address, sizeof get);
    for (size_t i = 0; i < sizeof driver_symbols / sizeof driver_symbols[0]; i++) {
        const struct driver_symbol *s = &driver_symbols[i];
        void *function = NULL;
        int status = -1;
        if (get == NULL || get(s->name, &function, REPROD_CUDA_API_VERSION,
                               CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
            status != CU_GET_PROC_ADDRESS_SUCCESS)
            function = NULL;
        if (function == NULL) function = reprod_resolve(s->exported);
        if (function == NULL && !s->optional) return 0;
        memcpy((char *)d + s->offset, &function, sizeof function);
    }
    return 1;
}

/* The published table: state 0 (none), DRIVER_READY, or DRIVER_WRITING + the writer's pid (a
 * fork child whose parent was writing takes over). */
#define DRIVER_READY   1
#define DRIVER_WRITING 2
static struct reprod_cuda_driver driver_table;
static _Atomic int driver_state;

const struct reprod_cuda_driver *reprod_cuda_driver(void)
{
    int state = atomic_load_explicit(&driver_state, memory_order_acquire);
    if (REPROD_LIKELY(state == DRIVER_READY)) return &driver_table;
    struct reprod_cuda_driver found;
    if (!driver_resolve(&found)) return NULL; /* CUDA not loaded (yet): ask again next time */
    int self = DRIVER_WRITING + (int)getpid();
    for (;;) {
        state = atomic_load_explicit(&driver_state, memory_order_acquire);
        if (state == DRIVER_READY) return &driver_table;
        if (state == self) { /* another thread of this process is publishing the same table */
            sched_yield();
            continue;
        }
        if (atomic_compare_exchange_weak(&driver_state, &state, self)) break;
    }
    driver_table = found;
    atomic_store_explicit(&driver_state, DRIVER_READY, memory_order_release);
    return &driver_table;
}

CUresult reprod_cuda_context_enter(const struct reprod_cuda_driver *d, CUstream stream,
                                   CUcontext *context, int *pushed)
{
    CUcontext current = NULL;
    *pushed = 0;
    CUresult rc = d->stream_get_ctx(stream, context);
    if (rc != CUDA_SUCCESS) return rc;
    rc = d->ctx_get_current(&current);
    if (rc != CUDA_SUCCESS) return rc;
    if (current == *context) return CUDA_SUCCESS;
    rc = d->ctx_push_current(*context);
    *pushed = rc == CUDA_SUCCESS;
    return rc;
}

void reprod_cuda_context_leave(const struct reprod_cuda_driver *d, int pushed)
{
    CUcontext popped;
    if (pushed) d->ctx_pop_current(&popped);
}

/* ---- cuda.h ------------------------------------------------------------------------------ */

int reprod_cuda_ready(void)
{
    return reprod_cuda_driver() != NULL;
}

int reprod_cuda_alloc_async(void **pointer, size_t bytes, reprod_stream stream)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    CUdeviceptr address = 0;
    CUresult rc = d->mem_alloc_async(&address, bytes, stream);
    *pointer = rc == CUDA_SUCCESS ? (void *)(uintptr_t)address : NULL;
    return rc;
}

int reprod_cuda_free_async(void *pointer, reprod_stream stream)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    return d->mem_free_async((CUdeviceptr)(uintptr_t)pointer, stream);
}

int reprod_cuda_copy_async(void *destination, const void *source, size_t bytes,
                           reprod_stream stream)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    if (bytes == 0) return REPROD_CUDA_OK;
    return d->memcpy_async((CUdeviceptr)(uintptr_t)destination, (CUdeviceptr)(uintptr_t)source,
                           bytes, stream);
}

int reprod_cuda_capturing(reprod_stream stream, int *capturing)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc = d->stream_is_capturing(stream, &status);
    *capturing = rc == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
    return rc;
}

int reprod_cuda_stream_sync(reprod_stream stream)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    return d->stream_synchronize(stream);
}

size_t reprod_cuda_reduce_work_bytes(const struct reprod_device_reduction *reduction)
{
    if (reduction == NULL || reduction->count <= REPROD_KERNEL_LOCAL_POINTERS) return 0;
    return (size_t)reduction->count * sizeof(void *);
}

/* The kernel arguments of a valid reduction; 0 when it is not valid. */
static int kernel_args_of(const struct reprod_device_reduction *r, struct reprod_kernel_args *a)
{
    size_t size = reprod_type_size(r->type);
    int op_valid = r->op == REPROD_SUM || r->op == REPROD_AVG ||
                   (r->ordered && r->op == REPROD_PROD);
    if (size == 0 || !op_valid || r->count < 1 || (unsigned)r->rounding > REPROD_ROUND_DOWN)
        return 0;
    if ((unsigned)r->premul > REPROD_PREMUL_DEVICE) return 0;
    if (r->premul == REPROD_PREMUL_DEVICE && r->scalar_device == NULL) return 0;
    if (r->elements > 0 && r->out == NULL) return 0;
    if (r->elements > 0 && r->own_index >= 0 && r->own_index < r->count && r->own == NULL)
        return 0;
    if (r->elements > 0 && r->blocks == NULL && !(r->count == 1 && r->own_index == 0)) return 0;
    memset(a, 0, sizeof *a);
    a->type = r->type;
    a->op = r->op;
    a->rounding = r->rounding;
    a->ordered = r->ordered != 0;
    a->count = r->count;
    a->own_index = r->own_index >= 0 && r->own_index < r->count ? r->own_index : -1;
    a->premul = r->premul;
    a->elements = r->elements;
    a->block_stride_bytes = r->block_stride_bytes;
    a->blocks = r->blocks;
    a->own = r->own;
    a->pointers = r->count > REPROD_KERNEL_LOCAL_POINTERS ? (const void *const *)r->work : NULL;
    a->out = r->out;
    a->scalar_bits = r->premul == REPROD_PREMUL_HOST ? r->scalar_bits : 0;
    a->scalar_device = r->premul == REPROD_PREMUL_DEVICE ? r->scalar_device : NULL;
    return 1;
}

int reprod_cuda_reduce(reprod_stream stream, const struct reprod_device_reduction *reduction)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    struct reprod_kernel_args args;
    if (reduction == NULL || !kernel_args_of(reduction, &args)) return REPROD_CUDA_INVALID_VALUE;
    if (args.elements == 0) return REPROD_CUDA_OK;
    CUcontext context;
    int pushed;
    CUresult rc = reprod_cuda_context_enter(d, stream, &context, &pushed);
    if (rc != CUDA_SUCCESS) return rc;
    int capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    rc = d->stream_is_capturing(stream, &capture_status);
    if (rc == CUDA_SUCCESS) {
        int capturing = capture_status != CU_STREAM_CAPTURE_STATUS_NONE;
        int kernel_possible = args.count <= REPROD_KERNEL_LOCAL_POINTERS || args.pointers != NULL;
        rc = kernel_possible ? reprod_cuda_launch(d, context, stream, &args, capturing)
                             : REPROD_CUDA_UNAVAILABLE;
        if (rc != CUDA_SUCCESS) rc = reprod_cuda_reduce_on_host(d, stream, &args, capturing);
    }
    reprod_cuda_context_leave(d, pushed);
    return rc;
}
