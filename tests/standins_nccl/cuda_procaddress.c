/* cuGetProcAddress for the CUDA stand-in: the address of the stand-in's own function for a
 * driver API name (the base name, as CUDA takes it; the version picks the signature where the
 * header has several). A build for tests of an older driver names the functions it lacks in
 * STANDIN_CUDA_WITHOUT (comma-separated; the Makefile also hides their symbols): they are not
 * found here either. */
#include "standin_cuda.h"

#include <string.h>

CUresult standin_cuStreamGetCaptureInfo_v1(CUstream, CUstreamCaptureStatus *, cuuint64_t *)
    __asm__("cuStreamGetCaptureInfo");
CUresult standin_cuStreamGetCaptureInfo_v2(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                           const CUgraphNode **, size_t *) __asm__("cuStreamGetCaptureInfo_v2");
CUresult standin_cuGraphInstantiate_legacy(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t)
    __asm__("cuGraphInstantiate_v2");

#define ENTRY(name) {#name, (void *)name}
static const struct {
    const char *name;
    void *address;
} entries[] = {
    ENTRY(cuInit), ENTRY(cuDriverGetVersion), ENTRY(cuGetErrorString), ENTRY(cuGetErrorName),
    ENTRY(cuDeviceGet), ENTRY(cuDeviceGetCount), ENTRY(cuDeviceGetName), ENTRY(cuDeviceTotalMem),
    ENTRY(cuDeviceGetAttribute), ENTRY(cuCtxGetCurrent), ENTRY(cuCtxSetCurrent), ENTRY(cuCtxGetDevice),
    ENTRY(cuCtxSynchronize), ENTRY(cuDevicePrimaryCtxRetain), ENTRY(cuDevicePrimaryCtxRelease),
    ENTRY(cuDevicePrimaryCtxGetState), ENTRY(cuStreamCreate), ENTRY(cuStreamCreateWithPriority),
    ENTRY(cuStreamGetFlags), ENTRY(cuStreamDestroy), ENTRY(cuStreamSynchronize), ENTRY(cuStreamQuery),
    ENTRY(cuStreamWaitEvent), ENTRY(cuStreamBeginCapture), ENTRY(cuStreamEndCapture),
    ENTRY(cuStreamIsCapturing), ENTRY(cuLaunchHostFunc), ENTRY(cuEventCreate), ENTRY(cuEventRecord),
    ENTRY(cuEventRecordWithFlags), ENTRY(cuEventQuery), ENTRY(cuEventSynchronize), ENTRY(cuEventDestroy),
    ENTRY(cuEventElapsedTime), ENTRY(cuGraphCreate), ENTRY(cuGraphDestroy), ENTRY(cuGraphInstantiateWithFlags),
    ENTRY(cuGraphInstantiateWithParams), ENTRY(cuGraphExecDestroy), ENTRY(cuGraphLaunch), ENTRY(cuMemAlloc),
    ENTRY(cuMemFree), ENTRY(cuMemAllocHost), ENTRY(cuMemHostAlloc), ENTRY(cuMemFreeHost), ENTRY(cuMemAllocAsync),
    ENTRY(cuMemFreeAsync), ENTRY(cuMemcpy), ENTRY(cuMemcpyAsync), ENTRY(cuMemcpyHtoD), ENTRY(cuMemcpyDtoH),
    ENTRY(cuMemcpyDtoD), ENTRY(cuMemcpyHtoDAsync), ENTRY(cuMemcpyDtoHAsync), ENTRY(cuMemcpyDtoDAsync),
    ENTRY(cuMemsetD8), ENTRY(cuMemsetD8Async), ENTRY(cuMemGetInfo), ENTRY(cuPointerGetAttribute),
    ENTRY(cuModuleLoadData), ENTRY(cuModuleLoadDataEx), ENTRY(cuModuleLoadFatBinary), ENTRY(cuModuleUnload),
    ENTRY(cuModuleGetFunction), ENTRY(cuFuncSetAttribute), ENTRY(cuFuncGetAttribute), ENTRY(cuLaunchKernel),
    ENTRY(cuOccupancyMaxActiveBlocksPerMultiprocessor), ENTRY(cuGetProcAddress),
    ENTRY(cuStreamGetCtx), ENTRY(cuCtxPushCurrent), ENTRY(cuCtxPopCurrent), ENTRY(cuCtxGetId),
    ENTRY(cuThreadExchangeStreamCaptureMode), ENTRY(cuDeviceGetDefaultMemPool), ENTRY(cuDeviceGetMemPool),
    ENTRY(cuMemPoolTrimTo), ENTRY(cuMemPoolSetAttribute), ENTRY(cuMemPoolGetAttribute), ENTRY(cuCtxGetLimit),
};

#ifndef STANDIN_CUDA_WITHOUT
#define STANDIN_CUDA_WITHOUT ""
#endif

/* Whether this build leaves `symbol` out (a whole name of STANDIN_CUDA_WITHOUT). */
static int left_out(const char *symbol) {
    static const char *const names = STANDIN_CUDA_WITHOUT;
    size_t length = strlen(symbol);
    for (const char *at = strstr(names, symbol); at; at = strstr(at + 1, symbol))
        if ((at == names || at[-1] == ',') && (at[length] == ',' || at[length] == 0))
            return 1;
    return 0;
}

/* Finds `symbol` for `version` (e.g. 12000); NULL if the stand-in lacks it. */
static void *lookup(const char *symbol, int version) {
    if (left_out(symbol))
        return NULL;
    if (!strcmp(symbol, "cuStreamGetCaptureInfo"))
        return version >= 12030   ? (void *)cuStreamGetCaptureInfo
               : version >= 11030 ? (void *)standin_cuStreamGetCaptureInfo_v2
                                  : (void *)standin_cuStreamGetCaptureInfo_v1;
    if (!strcmp(symbol, "cuGraphInstantiate"))
        return version >= 12000 ? (void *)cuGraphInstantiateWithFlags : (void *)standin_cuGraphInstantiate_legacy;
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        if (!strcmp(entries[i].name, symbol))
            return entries[i].address;
    return NULL;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = lookup(symbol, version);
    if (status)
        *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* The CUDA 11 signature, without the status. */
CUresult standin_cuGetProcAddress_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
    __asm__("cuGetProcAddress");
CUresult standin_cuGetProcAddress_v1(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    return cuGetProcAddress(symbol, pfn, version, flags, NULL);
}
