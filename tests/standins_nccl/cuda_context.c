/* cuda_context.c: the context calls a driver-API client makes around its own work (the shim's
 * shim/device/cuda.c): a stream's context, push and pop, a context's id, the thread's capture mode.
 * Contexts are the stand-in's primary contexts, one per device (cuda_driver.c). */
#include "cuda_objects.h"
#include "standin_cuda.h"

#define STACK_DEPTH 16

static _Thread_local CUcontext pushed[STACK_DEPTH];
static _Thread_local int depth;
static _Thread_local CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUresult cuStreamGetCtx(CUstream stream, CUcontext *context)
{
    if (!context) return CUDA_ERROR_INVALID_VALUE;
    int device = standin_stream_device(stream);
    if (device < 0) return CUDA_ERROR_INVALID_HANDLE;
    *context = scuda_primary_context(device);
    return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx_v2(CUstream stream, CUcontext *context, CUgreenCtx *green)
{
    if (green) *green = NULL;
    return cuStreamGetCtx(stream, context);
}

/* The header maps cuCtxPushCurrent and cuCtxPopCurrent to their _v2 names. */
CUresult cuCtxPushCurrent(CUcontext context)
{
    CUcontext current;
    if (!context || depth == STACK_DEPTH) return CUDA_ERROR_INVALID_VALUE;
    cuCtxGetCurrent(&current);
    CUresult rc = cuCtxSetCurrent(context);
    if (rc == CUDA_SUCCESS) pushed[depth++] = current;
    return rc;
}

CUresult cuCtxPopCurrent(CUcontext *context)
{
    if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext current;
    cuCtxGetCurrent(&current);
    if (context) *context = current;
    return cuCtxSetCurrent(pushed[--depth]);
}

CUresult cuCtxGetId(CUcontext context, unsigned long long *id)
{
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    if (!context) cuCtxGetCurrent(&context);
    if (!context) return CUDA_ERROR_INVALID_CONTEXT;
    *id = (unsigned long long)(uintptr_t)context;
    return CUDA_SUCCESS;
}

/* The context's limits: CUDA's defaults (a thread's stack: 1 KiB). */
CUresult cuCtxGetLimit(size_t *value, CUlimit limit) {
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (limit) {
    case CU_LIMIT_STACK_SIZE: *value = 1024; return CUDA_SUCCESS;
    case CU_LIMIT_PRINTF_FIFO_SIZE: *value = 1 << 20; return CUDA_SUCCESS;
    case CU_LIMIT_MALLOC_HEAP_SIZE: *value = 8 << 20; return CUDA_SUCCESS;
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
    }
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
