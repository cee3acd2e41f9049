/* The CUDA stand-in's memory: device and pinned host memory are both host memory, recorded in an
 * allocation table so that pointer attributes and frees can tell them apart; device memory is
 * counted against its device's capacity (cuda_pool.c, which also holds the stream-ordered pools);
 * copies and memsets are stream work (the synchronous forms enqueue on the legacy stream and wait
 * for it). */
#include "standin_cuda.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct allocation {
    char *base;
    size_t bytes;
    enum scuda_memory_kind kind;
    int device;
    size_t reserved; /* device bytes it holds: its pool block's size, else bytes */
    int pooled;      /* from a stream-ordered pool: freed back into the pool */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct allocation *table;
static size_t table_count, table_capacity;

int scuda_fault_here(const char *variable) {
    const char *rank = getenv(variable);
    const char *mine = getenv("OMPI_COMM_WORLD_RANK");
    return rank && mine && strcmp(rank, mine) == 0;
}

/* Fault injection for tests: STANDIN_FAIL_HOST_ALLOC_RANK=r makes pinned host allocations fail in
 * the process of rank r (out of memory). */
static int host_alloc_fails(void) {
    return scuda_fault_here("STANDIN_FAIL_HOST_ALLOC_RANK");
}

CUresult scuda_memory_record(void *base, size_t bytes, enum scuda_memory_kind kind, int device, size_t reserved,
                             int pooled) {
    pthread_mutex_lock(&table_lock);
    if (table_count == table_capacity) {
        size_t capacity = table_capacity ? table_capacity * 2 : 256;
        struct allocation *grown = realloc(table, capacity * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&table_lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        table = grown;
        table_capacity = capacity;
    }
    table[table_count++] = (struct allocation){base, bytes, kind, device, reserved, pooled};
    pthread_mutex_unlock(&table_lock);
    return CUDA_SUCCESS;
}

int scuda_memory_remove(void *ptr, enum scuda_memory_kind kind, size_t *reserved, int *device, int *pooled) {
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < table_count; i++) {
        if (table[i].base == ptr && table[i].kind == kind) {
            *reserved = table[i].reserved;
            *device = table[i].device;
            *pooled = table[i].pooled;
            table[i] = table[--table_count];
            pthread_mutex_unlock(&table_lock);
            return 1;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return 0;
}

CUresult scuda_memory_alloc(void **ptr, size_t bytes, enum scuda_memory_kind kind) {
    if (!ptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (kind == SCUDA_HOST && host_alloc_fails())
        return CUDA_ERROR_OUT_OF_MEMORY;
    int device = standin_current_device();
    if (kind == SCUDA_DEVICE && !scuda_device_reserve(device, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *memory = NULL;
    /* 0 bytes still gives a distinct pointer, which simplifies the table */
    CUresult result = posix_memalign(&memory, 4096, bytes ? bytes : 1) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    if (result == CUDA_SUCCESS)
        result = scuda_memory_record(memory, bytes, kind, device, bytes, 0);
    if (result != CUDA_SUCCESS) {
        free(memory);
        if (kind == SCUDA_DEVICE)
            scuda_device_unreserve(device, bytes);
        return result;
    }
    *ptr = memory;
    return CUDA_SUCCESS;
}

CUresult scuda_memory_free(void *ptr, enum scuda_memory_kind kind) {
    size_t reserved;
    int device, pooled;
    if (!scuda_memory_remove(ptr, kind, &reserved, &device, &pooled))
        return CUDA_ERROR_INVALID_VALUE;
    if (pooled) {
        scuda_pool_give_back(device, ptr, reserved);
        return CUDA_SUCCESS;
    }
    free(ptr);
    if (kind == SCUDA_DEVICE)
        scuda_device_unreserve(device, reserved);
    return CUDA_SUCCESS;
}

int scuda_memory_find(const void *ptr, void **base, size_t *bytes, enum scuda_memory_kind *kind, int *device) {
    const char *address = ptr;
    int found = 0;
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < table_count && !found; i++) {
        if (address >= table[i].base && address < table[i].base + (table[i].bytes ? table[i].bytes : 1)) {
            found = 1;
            if (base)
                *base = table[i].base;
            if (bytes)
                *bytes = table[i].bytes;
            if (kind)
                *kind = table[i].kind;
            if (device)
                *device = table[i].device;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    if (!dptr || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    return scuda_memory_alloc((void **)dptr, bytes, SCUDA_DEVICE);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    return scuda_memory_free((void *)dptr, SCUDA_DEVICE);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytes) {
    return scuda_memory_alloc(pp, bytes, SCUDA_HOST);
}

CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    (void)flags;
    return scuda_memory_alloc(pp, bytes, SCUDA_HOST);
}

CUresult cuMemFreeHost(void *p) {
    return scuda_memory_free(p, SCUDA_HOST);
}

/* ---- copies and memsets ---- */

struct copy {
    void *dst;
    const void *src;
    size_t bytes;
    int value; /* memset: the byte; copy: -1 */
};

static void copy_run(void *arg) {
    struct copy *copy = arg;
    if (copy->value >= 0)
        memset(copy->dst, copy->value, copy->bytes);
    else if (copy->dst != copy->src)
        memmove(copy->dst, copy->src, copy->bytes);
}

static CUresult copy_enqueue(void *dst, const void *src, size_t bytes, int value, CUstream stream) {
    if (!bytes)
        return standin_stream_device(stream) < 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
    if (!dst || (value < 0 && !src))
        return CUDA_ERROR_INVALID_VALUE;
    struct copy *copy = malloc(sizeof *copy);
    if (!copy)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *copy = (struct copy){dst, src, bytes, value};
    CUresult result = standin_stream_enqueue(stream, copy_run, copy, free);
    if (result != CUDA_SUCCESS)
        free(copy);
    return result;
}

static CUresult copy_sync(void *dst, const void *src, size_t bytes, int value) {
    CUresult result = copy_enqueue(dst, src, bytes, value, CU_STREAM_LEGACY);
    return result != CUDA_SUCCESS ? result : cuStreamSynchronize(CU_STREAM_LEGACY);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    return copy_enqueue((void *)dst, (const void *)src, bytes, -1, stream);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream) {
    return copy_enqueue((void *)dst, src, bytes, -1, stream);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    return copy_enqueue(dst, (const void *)src, bytes, -1, stream);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    return copy_enqueue((void *)dst, (const void *)src, bytes, -1, stream);
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
    return copy_enqueue((void *)dst, NULL, count, value, stream);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return copy_sync((void *)dst, (const void *)src, bytes, -1);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    return copy_sync((void *)dst, src, bytes, -1);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    return copy_sync(dst, (const void *)src, bytes, -1);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    return copy_sync((void *)dst, (const void *)src, bytes, -1);
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
    return copy_sync((void *)dst, NULL, count, value);
}

/* ---- pointer attributes ---- */

/* Pointers outside the table are unregistered host memory: CUDA_ERROR_INVALID_VALUE, as CUDA. */
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    void *base;
    size_t bytes;
    enum scuda_memory_kind kind;
    int device;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (!scuda_memory_find((void *)ptr, &base, &bytes, &kind, &device))
        return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = kind == SCUDA_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = scuda_primary_context(device);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (kind != SCUDA_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = device;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = (unsigned long long)(uintptr_t)base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = bytes;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    int device = standin_current_device();
    size_t total = scuda_device_total_bytes(), used = scuda_device_used_bytes(device);
    if (free_bytes)
        *free_bytes = used < total ? total - used : 0;
    if (total_bytes)
        *total_bytes = total;
    return CUDA_SUCCESS;
}

#define PLAIN_ALIAS(plain, versioned)                                                                  \
    extern __typeof__(versioned) standin_##plain##_plain __asm__(#plain) __attribute__((alias(#versioned)));
PLAIN_ALIAS(cuMemAlloc, cuMemAlloc_v2)
PLAIN_ALIAS(cuMemFree, cuMemFree_v2)
PLAIN_ALIAS(cuMemAllocHost, cuMemAllocHost_v2)
PLAIN_ALIAS(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2)
PLAIN_ALIAS(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)
PLAIN_ALIAS(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2)
PLAIN_ALIAS(cuMemcpyHtoD, cuMemcpyHtoD_v2)
PLAIN_ALIAS(cuMemcpyDtoH, cuMemcpyDtoH_v2)
PLAIN_ALIAS(cuMemcpyDtoD, cuMemcpyDtoD_v2)
PLAIN_ALIAS(cuMemsetD8, cuMemsetD8_v2)
PLAIN_ALIAS(cuMemGetInfo, cuMemGetInfo_v2)
