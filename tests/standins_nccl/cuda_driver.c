/* The CUDA stand-in's driver basics: init and versions, error strings, devices (compute
 * capability 9.0, CUDA_VISIBLE_DEVICES or 8 of them), one primary context per device bound per
 * thread, and cuGetProcAddress over every function the stand-in exports. */
#include "standin_cuda.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64
#define CONTEXT_MAGIC 0x43545854U

struct CUctx_st {
    uint32_t magic;
    int device;
    atomic_int retained;
};

static struct CUctx_st contexts[MAX_DEVICES];
static _Thread_local CUcontext current_context;
static atomic_int runtime_used;
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;
static int device_count;

static void contexts_init(void) {
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    device_count = 8;
    if (visible) {
        device_count = *visible ? 1 : 0;
        for (const char *c = visible; *c; c++)
            device_count += *c == ',';
        if (device_count > MAX_DEVICES)
            device_count = MAX_DEVICES;
    }
    for (int device = 0; device < MAX_DEVICES; device++)
        contexts[device] = (struct CUctx_st){CONTEXT_MAGIC, device, 0};
}

int standin_device_count(void) {
    pthread_once(&contexts_once, contexts_init);
    return device_count;
}

CUcontext scuda_primary_context(int device) {
    pthread_once(&contexts_once, contexts_init);
    return device >= 0 && device < MAX_DEVICES ? &contexts[device] : NULL;
}

void standin_runtime_used(void) {
    atomic_store(&runtime_used, 1);
    if (!current_context)
        current_context = scuda_primary_context(0);
}

void scuda_bind_device(int device) {
    current_context = scuda_primary_context(device);
}

int standin_current_device(void) {
    return current_context ? current_context->device : 0;
}

static int context_valid(CUcontext context) {
    pthread_once(&contexts_once, contexts_init);
    return context >= contexts && context < contexts + MAX_DEVICES && context->device < device_count;
}

CUresult cuInit(unsigned int flags) {
    pthread_once(&contexts_once, contexts_init);
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return device_count ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* The CUDA version this driver supports: the headers' (the toolkit's), or
 * STANDIN_CUDA_DRIVER_VERSION (e.g. 12040) to stand for an older driver. */
int standin_driver_version(void) {
    const char *text = getenv("STANDIN_CUDA_DRIVER_VERSION");
    int version = text && *text ? atoi(text) : 0;
    return version > 0 ? version : CUDA_VERSION;
}

CUresult cuDriverGetVersion(int *version) {
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = standin_driver_version();
    return CUDA_SUCCESS;
}

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", "wait operation timed out"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_UNSUPPORTED_LIMIT, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult code) {
    for (size_t i = 0; i < sizeof errors / sizeof *errors; i++)
        if (errors[i].code == code)
            return (int)i;
    return -1;
}

CUresult cuGetErrorString(CUresult code, const char **text) {
    int i = error_index(code);
    if (!text)
        return CUDA_ERROR_INVALID_VALUE;
    *text = i >= 0 ? errors[i].text : NULL;
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult code, const char **name) {
    int i = error_index(code);
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    *name = i >= 0 ? errors[i].name : NULL;
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- devices ---- */

CUresult cuDeviceGetCount(int *count) {
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = standin_device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    if (!name || length <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (device < 0 || device >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    strncpy(name, "reprod host stand-in (sm_90)", (size_t)length - 1);
    name[length - 1] = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (device < 0 || device >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)80 << 30;
    return CUDA_SUCCESS;
}

/* An H100-like device; attributes not listed are 0. */
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice device) {
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (device < 0 || device >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = device + 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *value = 2; break;
    default: *value = 0; break;
    }
    return CUDA_SUCCESS;
}

/* ---- contexts ---- */

/* Before any runtime call a thread has no context (NULL, as CUDA); once the runtime has been
 * used anywhere in the process, a thread without one gets its device's primary context. */
CUresult cuCtxGetCurrent(CUcontext *context) {
    if (!context)
        return CUDA_ERROR_INVALID_VALUE;
    if (!current_context && atomic_load(&runtime_used))
        current_context = scuda_primary_context(0);
    *context = current_context;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
    if (context && !context_valid(context))
        return CUDA_ERROR_INVALID_CONTEXT;
    current_context = context;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext context;
    cuCtxGetCurrent(&context);
    if (!context)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = context->device;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
    return scuda_synchronize_device(standin_current_device());
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    if (!context)
        return CUDA_ERROR_INVALID_VALUE;
    if (device < 0 || device >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *context = scuda_primary_context(device);
    atomic_fetch_add(&(*context)->retained, 1);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
    if (device < 0 || device >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    atomic_fetch_sub(&scuda_primary_context(device)->retained, 1);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int *flags, int *active) {
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (device < 0 || device >= standin_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = atomic_load(&scuda_primary_context(device)->retained) > 0 || atomic_load(&runtime_used);
    return CUDA_SUCCESS;
}

extern __typeof__(cuDevicePrimaryCtxRelease_v2) standin_cuDevicePrimaryCtxRelease_plain
    __asm__("cuDevicePrimaryCtxRelease") __attribute__((alias("cuDevicePrimaryCtxRelease_v2")));
extern __typeof__(cuDeviceTotalMem_v2) standin_cuDeviceTotalMem_plain __asm__("cuDeviceTotalMem")
    __attribute__((alias("cuDeviceTotalMem_v2")));
