/* The CUDA stand-in's modules and kernels: any image loads (unless the driver stands for one older
 * than the toolkit); a function is the host build that kernels.h names; a launch copies the
 * kernel's one by-value parameter and runs the host build on the stream's worker thread (or
 * records it in a capture), unless the kernel would touch another device's memory. */
#include "kernels.h"
#include "standin_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODULE_MAGIC 0x4d4f4455U
#define FUNCTION_MAGIC 0x46554e43U

struct CUmod_st {
    uint32_t magic;
};

struct CUfunc_st {
    uint32_t magic;
    standin_kernel_fn *host_build;
    size_t param_bytes;
    char name[128];
};

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    if (!module || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (standin_driver_version() < CUDA_VERSION) /* built by a newer toolkit than it knows */
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    struct CUmod_st *loaded = calloc(1, sizeof *loaded);
    if (!loaded)
        return CUDA_ERROR_OUT_OF_MEMORY;
    loaded->magic = MODULE_MAGIC;
    scuda_handle_add(loaded);
    *module = loaded;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int count, CUjit_option *options,
                            void **values) {
    (void)count;
    (void)options;
    (void)values;
    return cuModuleLoadData(module, image);
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *image) {
    return cuModuleLoadData(module, image);
}

/* Functions are kept: a launch still queued may name one. */
CUresult cuModuleUnload(CUmodule module) {
    if (!scuda_handle_live(module) || module->magic != MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    scuda_handle_remove(module);
    free(module);
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    if (!function || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!scuda_handle_live(module) || module->magic != MODULE_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    standin_kernel_fn *host_build = standin_kernel_lookup(name);
    if (!host_build || strlen(name) >= sizeof ((struct CUfunc_st *)0)->name)
        return CUDA_ERROR_NOT_FOUND;
    struct CUfunc_st *found = calloc(1, sizeof *found);
    if (!found)
        return CUDA_ERROR_OUT_OF_MEMORY;
    found->magic = FUNCTION_MAGIC;
    found->host_build = host_build;
    found->param_bytes = standin_kernel_param_bytes(name);
    strcpy(found->name, name);
    scuda_handle_add(found);
    *function = found;
    return CUDA_SUCCESS;
}

static int function_valid(CUfunction function) {
    return scuda_handle_live(function) && function->magic == FUNCTION_MAGIC;
}

CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
    (void)attribute;
    (void)value;
    return function_valid(function) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attribute, CUfunction function) {
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!function_valid(function))
        return CUDA_ERROR_INVALID_HANDLE;
    /* an sm_90 build whose stack fits the default (the host build needs none of the device's) */
    *value = attribute == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024
             : attribute == CU_FUNC_ATTRIBUTE_NUM_REGS             ? 32
             : attribute == CU_FUNC_ATTRIBUTE_BINARY_VERSION       ? 90
             : attribute == CU_FUNC_ATTRIBUTE_PTX_VERSION          ? 90
                                                                   : 0;
    return CUDA_SUCCESS;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction function, int block_size,
                                                     size_t dynamic_shared_bytes) {
    (void)dynamic_shared_bytes;
    if (!blocks || block_size <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!function_valid(function))
        return CUDA_ERROR_INVALID_HANDLE;
    int count = 2048 / block_size;
    *blocks = count < 1 ? 1 : count > 32 ? 32 : count;
    return CUDA_SUCCESS;
}

struct launch {
    standin_kernel_fn *host_build;
    const char *name; /* the function's, which lives for ever */
    unsigned grid[3], block[3];
    unsigned char param[]; /* the copy of the one by-value parameter */
};

/* Whether the kernel may run on the calling stream worker's device: every device memory it
 * touches must be that device's (the stand-in enables no peer access). Otherwise a GPU faults
 * with an illegal address, which is sticky: the device's later synchronisations report it. */
static int launch_reaches(const struct launch *launch) {
    const void *pointers[8];
    size_t count = standin_kernel_pointers(launch->name, launch->param, pointers, 8);
    int device = standin_current_device();
    for (size_t i = 0; i < count; i++) {
        enum scuda_memory_kind kind;
        int owner;
        if (!scuda_memory_find(pointers[i], NULL, NULL, &kind, &owner) || kind != SCUDA_DEVICE || owner == device)
            continue;
        fprintf(stderr,
                "stand-in libcuda: kernel %s on device %d touches device memory of device %d (no peer access): "
                "illegal address\n",
                launch->name, device, owner);
        scuda_device_set_fault(device);
        return 0;
    }
    return 1;
}

static void launch_run(void *arg) {
    struct launch *launch = arg;
    void *params[1] = {launch->param};
    if (launch_reaches(launch))
        launch->host_build(params, launch->grid, launch->block);
}

/* The parameter comes from kernelParams[0] (its size from kernels.h), or from `extra`'s
 * CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE pair. */
CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                        unsigned int block_x, unsigned int block_y, unsigned int block_z, unsigned int shared_bytes,
                        CUstream stream, void **params, void **extra) {
    (void)shared_bytes;
    if (!function_valid(function))
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult fault = scuda_device_fault(standin_stream_device(stream));
    if (fault != CUDA_SUCCESS)
        return fault;
    if (!grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z || block_x * block_y * block_z > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    const void *source = NULL;
    size_t bytes = function->param_bytes;
    if (params) {
        source = params[0];
    } else if (extra) {
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
                source = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
                bytes = *(size_t *)extra[i + 1];
        }
    }
    if (bytes && !source)
        return CUDA_ERROR_INVALID_VALUE;
    struct launch *launch = malloc(sizeof *launch + bytes);
    if (!launch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    launch->host_build = function->host_build;
    launch->name = function->name;
    launch->grid[0] = grid_x, launch->grid[1] = grid_y, launch->grid[2] = grid_z;
    launch->block[0] = block_x, launch->block[1] = block_y, launch->block[2] = block_z;
    if (bytes)
        memcpy(launch->param, source, bytes);
    CUresult result = standin_stream_enqueue(stream, launch_run, launch, free);
    if (result != CUDA_SUCCESS)
        free(launch);
    return result;
}
