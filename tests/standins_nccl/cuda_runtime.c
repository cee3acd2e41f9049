/* The CUDA runtime stand-in (libcudart.so.12 and .13): each call is the driver stand-in's call
 * (libcuda.so.1), so device memory, streams and graphs are the same objects. cudaStream_t is
 * CUstream, cudaEvent_t CUevent, cudaGraph_t CUgraph: the handles are shared. Error numbers of
 * the two APIs agree for every error the driver stand-in returns. Every call binds the calling
 * thread to its device's primary context (standin_runtime_used). */
#include "standin_cuda.h"

#include <cuda_runtime_api.h>
#include <string.h>

static _Thread_local cudaError_t last_error;

/* Records a failure as cudaGetLastError reports it, and returns it. */
static cudaError_t note(CUresult result) {
    cudaError_t error = (cudaError_t)result;
    if (error != cudaSuccess && error != cudaErrorNotReady)
        last_error = error;
    return error;
}

#define ENTER() standin_runtime_used()

cudaError_t cudaGetLastError(void) {
    cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

cudaError_t cudaPeekAtLastError(void) {
    return last_error;
}

const char *cudaGetErrorString(cudaError_t error) {
    const char *text = NULL;
    if (error == cudaErrorMemoryAllocation)
        return "out of memory";
    if (cuGetErrorString((CUresult)error, &text) != CUDA_SUCCESS)
        return "unrecognized error code";
    return text;
}

const char *cudaGetErrorName(cudaError_t error) {
    static const char *const names[] = {[cudaSuccess] = "cudaSuccess", [cudaErrorInvalidValue] = "cudaErrorInvalidValue",
                                        [cudaErrorMemoryAllocation] = "cudaErrorMemoryAllocation",
                                        [cudaErrorInitializationError] = "cudaErrorInitializationError"};
    if ((size_t)error < sizeof names / sizeof *names && names[error])
        return names[error];
    switch (error) {
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorSymbolNotFound: return "cudaErrorSymbolNotFound";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    default: return "cudaErrorUnknown";
    }
}

cudaError_t cudaDriverGetVersion(int *version) {
    return note(cuDriverGetVersion(version));
}

cudaError_t cudaRuntimeGetVersion(int *version) {
    if (!version)
        return note(CUDA_ERROR_INVALID_VALUE);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *count) {
    ENTER();
    return note(cuDeviceGetCount(count));
}

cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= standin_device_count())
        return note(CUDA_ERROR_INVALID_DEVICE);
    ENTER();
    return note(cuCtxSetCurrent(scuda_primary_context(device)));
}

cudaError_t cudaGetDevice(int *device) {
    ENTER();
    if (!device)
        return note(CUDA_ERROR_INVALID_VALUE);
    *device = standin_current_device();
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    ENTER();
    return note(cuCtxSynchronize());
}

cudaError_t cudaDeviceReset(void) {
    ENTER();
    return note(cuCtxSynchronize());
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attribute, int device) {
    ENTER();
    return note(cuDeviceGetAttribute(value, (CUdevice_attribute)attribute, device));
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *properties, int device) {
    ENTER();
    if (!properties)
        return note(CUDA_ERROR_INVALID_VALUE);
    if (device < 0 || device >= standin_device_count())
        return note(CUDA_ERROR_INVALID_DEVICE);
    memset(properties, 0, sizeof *properties);
    cuDeviceGetName(properties->name, sizeof properties->name, device);
    properties->totalGlobalMem = (size_t)80 << 30;
    properties->major = 9;
    properties->minor = 0;
    properties->multiProcessorCount = 132;
    properties->warpSize = 32;
    properties->maxThreadsPerBlock = 1024;
    properties->maxThreadsPerMultiProcessor = 2048;
    properties->sharedMemPerBlock = 49152;
    properties->sharedMemPerBlockOptin = 232448;
    properties->regsPerBlock = 65536;
    properties->maxThreadsDim[0] = properties->maxThreadsDim[1] = 1024;
    properties->maxThreadsDim[2] = 64;
    properties->maxGridSize[0] = 2147483647;
    properties->maxGridSize[1] = properties->maxGridSize[2] = 65535;
    properties->unifiedAddressing = 1;
    properties->pciBusID = device + 1;
    properties->l2CacheSize = 52428800;
    return cudaSuccess;
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
    ENTER();
    if (!ptr)
        return note(CUDA_ERROR_INVALID_VALUE);
    if (!bytes) {
        *ptr = NULL;
        return cudaSuccess;
    }
    return note(scuda_memory_alloc(ptr, bytes, SCUDA_DEVICE));
}

cudaError_t cudaFree(void *ptr) {
    ENTER();
    return ptr ? note(scuda_memory_free(ptr, SCUDA_DEVICE)) : cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
    ENTER();
    return note(scuda_memory_alloc(ptr, bytes, SCUDA_HOST));
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned int flags) {
    (void)flags;
    return cudaMallocHost(ptr, bytes);
}

cudaError_t cudaFreeHost(void *ptr) {
    ENTER();
    return ptr ? note(scuda_memory_free(ptr, SCUDA_HOST)) : cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
    ENTER();
    return note(cuMemAllocAsync((CUdeviceptr *)ptr, bytes, stream));
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
    ENTER();
    return ptr ? note(cuMemFreeAsync((CUdeviceptr)ptr, stream)) : cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    ENTER();
    return note(cuMemGetInfo_v2(free_bytes, total_bytes));
}

/* The pools: the driver's (cudaMemPool_t is CUmemoryPool; the attribute numbers agree). */
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
    ENTER();
    return note(cuDeviceGetDefaultMemPool(pool, device));
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device) {
    ENTER();
    return note(cuDeviceGetMemPool(pool, device));
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
    ENTER();
    return note(cuMemPoolTrimTo(pool, keep));
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attribute, void *value) {
    ENTER();
    return note(cuMemPoolSetAttribute(pool, (CUmemPool_attribute)attribute, value));
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attribute, void *value) {
    ENTER();
    return note(cuMemPoolGetAttribute(pool, (CUmemPool_attribute)attribute, value));
}

/* The direction does not matter: all memory is host memory. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    (void)kind;
    ENTER();
    return note(cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, bytes));
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t stream) {
    (void)kind;
    ENTER();
    return note(cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, stream));
}

cudaError_t cudaMemset(void *dst, int value, size_t bytes) {
    ENTER();
    return note(cuMemsetD8((CUdeviceptr)dst, (unsigned char)value, bytes));
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t stream) {
    ENTER();
    return note(cuMemsetD8Async((CUdeviceptr)dst, (unsigned char)value, bytes, stream));
}

/* Unregistered host memory is cudaMemoryTypeUnregistered with success, as CUDA 11 and later. */
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
    ENTER();
    if (!attributes)
        return note(CUDA_ERROR_INVALID_VALUE);
    enum scuda_memory_kind kind;
    int device;
    memset(attributes, 0, sizeof *attributes);
    attributes->device = -2;
    if (!scuda_memory_find(ptr, NULL, NULL, &kind, &device))
        return cudaSuccess;
    attributes->type = kind == SCUDA_DEVICE ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    attributes->device = device;
    attributes->devicePointer = (void *)ptr;
    attributes->hostPointer = kind == SCUDA_HOST ? (void *)ptr : NULL;
    return cudaSuccess;
}

/* ---- streams, events, graphs ---- */

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    ENTER();
    return note(cuStreamCreate(stream, 0));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    ENTER();
    return note(cuStreamCreate(stream, flags));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream, unsigned int flags, int priority) {
    ENTER();
    return note(cuStreamCreateWithPriority(stream, flags, priority));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    ENTER();
    return note(cuStreamDestroy(stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    ENTER();
    return note(cuStreamSynchronize(stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
    ENTER();
    return note(cuStreamQuery(stream));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
    ENTER();
    return note(cuStreamWaitEvent(stream, event, flags));
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *user_data) {
    ENTER();
    return note(cuLaunchHostFunc(stream, fn, user_data));
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
    ENTER();
    return note(cuEventCreate(event, 0));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    ENTER();
    return note(cuEventCreate(event, flags));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    ENTER();
    return note(cuEventRecord(event, stream));
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
    ENTER();
    return note(cuEventRecordWithFlags(event, stream, flags));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    ENTER();
    return note(cuEventSynchronize(event));
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
    ENTER();
    return note(cuEventQuery(event));
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
    ENTER();
    return note(cuEventDestroy(event));
}

cudaError_t cudaEventElapsedTime(float *milliseconds, cudaEvent_t start, cudaEvent_t end) {
    ENTER();
    return note(cuEventElapsedTime(milliseconds, start, end));
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    ENTER();
    return note(cuStreamBeginCapture(stream, (CUstreamCaptureMode)mode));
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph) {
    ENTER();
    return note(cuStreamEndCapture(stream, graph));
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status) {
    ENTER();
    return note(cuStreamIsCapturing(stream, (CUstreamCaptureStatus *)status));
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                     unsigned long long *id, cudaGraph_t *graph,
                                     const cudaGraphNode_t **dependencies, const cudaGraphEdgeData **edges,
                                     size_t *count) {
    ENTER();
    return note(cuStreamGetCaptureInfo(stream, (CUstreamCaptureStatus *)status, (cuuint64_t *)id, graph,
                                       (const CUgraphNode **)dependencies, (const CUgraphEdgeData **)edges, count));
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    ENTER();
    return note(cuGraphInstantiateWithFlags(exec, graph, flags));
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags) {
    return cudaGraphInstantiate(exec, graph, flags);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
    ENTER();
    return note(cuGraphLaunch(exec, stream));
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    ENTER();
    return note(cuGraphExecDestroy(exec));
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    ENTER();
    return note(cuGraphDestroy(graph));
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **function, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status) {
    ENTER();
    return note(cuGetProcAddress(symbol, function, (int)version, flags, (CUdriverProcAddressQueryResult *)status));
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **function, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status) {
    return cudaGetDriverEntryPointByVersion(symbol, function, CUDART_VERSION, flags, status);
}
