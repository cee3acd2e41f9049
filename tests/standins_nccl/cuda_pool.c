/* cuda_pool.c: the CUDA stand-in's device capacity and stream-ordered pools. Each device holds
 * STANDIN_DEVICE_MEMORY_MB (default 80 GiB, what cuDeviceTotalMem says); cuMemAlloc and every
 * pool block take from it. cuMemAllocAsync takes from the stream's device's default pool: a free
 * block at least as large (the smallest such), else a new block while the device has room, else
 * CUDA_ERROR_OUT_OF_MEMORY. A block freed in stream order goes back into the pool, which keeps it
 * (its device memory stays taken) until cuMemPoolTrimTo, or a synchronisation while the pool holds
 * more than its release threshold (0 by default; PyTorch sets it to UINT64_MAX). So a pool of
 * small free blocks can refuse a large allocation that a trim would let through, as CUDA's does. */
#include "cuda_objects.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAGIC 0x504f4f4cU
#define DEFAULT_DEVICE_MB ((size_t)80 << 10)

struct block {
    void *base;
    size_t bytes;
    struct block *next;
};

struct CUmemPoolHandle_st {
    uint32_t magic;
    int device;
    pthread_mutex_t lock;
    struct block *free_blocks;
    size_t reserved_bytes; /* blocks in use and free */
    size_t used_bytes;     /* blocks in use */
    uint64_t release_threshold;
};

static struct CUmemPoolHandle_st pools[MAX_DEVICES];
static _Atomic size_t device_used[MAX_DEVICES];
static _Atomic int device_faulted[MAX_DEVICES];
static pthread_once_t pools_once = PTHREAD_ONCE_INIT;
static size_t device_total;

static void pools_init(void) {
    const char *mb = getenv("STANDIN_DEVICE_MEMORY_MB");
    char *end = NULL;
    unsigned long long value = mb && *mb ? strtoull(mb, &end, 10) : 0;
    device_total = (value && end && !*end ? (size_t)value : DEFAULT_DEVICE_MB) << 20;
    for (int device = 0; device < MAX_DEVICES; device++) {
        pools[device].magic = POOL_MAGIC;
        pools[device].device = device;
        pthread_mutex_init(&pools[device].lock, NULL);
    }
}

size_t scuda_device_total_bytes(void) {
    pthread_once(&pools_once, pools_init);
    return device_total;
}

size_t scuda_device_used_bytes(int device) {
    return device >= 0 && device < MAX_DEVICES ? atomic_load(&device_used[device]) : 0;
}

int scuda_device_reserve(int device, size_t bytes) {
    size_t total = scuda_device_total_bytes();
    if (device < 0 || device >= MAX_DEVICES)
        return 0;
    size_t used = atomic_load(&device_used[device]);
    do {
        if (bytes > total || used > total - bytes)
            return 0;
    } while (!atomic_compare_exchange_weak(&device_used[device], &used, used + bytes));
    return 1;
}

void scuda_device_unreserve(int device, size_t bytes) {
    if (device >= 0 && device < MAX_DEVICES)
        atomic_fetch_sub(&device_used[device], bytes);
}

CUresult scuda_device_fault(int device) {
    return device >= 0 && device < MAX_DEVICES && atomic_load(&device_faulted[device]) ? CUDA_ERROR_ILLEGAL_ADDRESS
                                                                                       : CUDA_SUCCESS;
}

void scuda_device_set_fault(int device) {
    if (device >= 0 && device < MAX_DEVICES)
        atomic_store(&device_faulted[device], 1);
}

static struct CUmemPoolHandle_st *pool_of(int device) {
    pthread_once(&pools_once, pools_init);
    return device >= 0 && device < standin_device_count() ? &pools[device] : NULL;
}

static int pool_valid(CUmemoryPool pool) {
    pthread_once(&pools_once, pools_init);
    return pool >= pools && pool < pools + MAX_DEVICES && pool->magic == POOL_MAGIC &&
           pool->device < standin_device_count();
}

/* Release free blocks (the largest first) while the pool holds more than `keep` bytes. Call with
 * the pool's lock held. */
static void pool_trim(struct CUmemPoolHandle_st *pool, size_t keep) {
    while (pool->reserved_bytes > keep && pool->free_blocks) {
        struct block **largest = &pool->free_blocks;
        for (struct block **b = &pool->free_blocks; *b; b = &(*b)->next)
            if ((*b)->bytes > (*largest)->bytes)
                largest = b;
        struct block *gone = *largest;
        *largest = gone->next;
        pool->reserved_bytes -= gone->bytes;
        scuda_device_unreserve(pool->device, gone->bytes);
        free(gone->base);
        free(gone);
    }
}

void scuda_pool_give_back(int device, void *base, size_t reserved) {
    struct CUmemPoolHandle_st *pool = pool_of(device);
    struct block *block = malloc(sizeof *block);
    if (!pool || !block) { /* cannot keep it: release it */
        free(block);
        free(base);
        scuda_device_unreserve(device, reserved);
        if (pool) {
            pthread_mutex_lock(&pool->lock);
            pool->reserved_bytes -= reserved;
            pool->used_bytes -= reserved;
            pthread_mutex_unlock(&pool->lock);
        }
        return;
    }
    *block = (struct block){base, reserved, NULL};
    pthread_mutex_lock(&pool->lock);
    block->next = pool->free_blocks;
    pool->free_blocks = block;
    pool->used_bytes -= reserved;
    pthread_mutex_unlock(&pool->lock);
}

void scuda_pool_release_at_sync(int device) {
    for (int d = 0; d < standin_device_count(); d++) {
        if (device >= 0 && d != device)
            continue;
        struct CUmemPoolHandle_st *pool = pool_of(d);
        pthread_mutex_lock(&pool->lock);
        pool_trim(pool, pool->release_threshold);
        pthread_mutex_unlock(&pool->lock);
    }
}

/* A block of at least `bytes` from `device`'s pool: the smallest free one that fits, else a new
 * one while the device has room. */
static CUresult pool_take(int device, size_t bytes, void **base, size_t *reserved) {
    struct CUmemPoolHandle_st *pool = pool_of(device);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool->lock);
    struct block **best = NULL;
    for (struct block **b = &pool->free_blocks; *b; b = &(*b)->next)
        if ((*b)->bytes >= bytes && (!best || (*b)->bytes < (*best)->bytes))
            best = b;
    if (best) {
        struct block *taken = *best;
        *best = taken->next;
        *base = taken->base;
        *reserved = taken->bytes;
        pool->used_bytes += taken->bytes;
        pthread_mutex_unlock(&pool->lock);
        free(taken);
        return CUDA_SUCCESS;
    }
    size_t size = (bytes + 4095) & ~(size_t)4095;
    void *memory = NULL;
    if (!size || !scuda_device_reserve(device, size)) {
        pthread_mutex_unlock(&pool->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (posix_memalign(&memory, 4096, size)) {
        scuda_device_unreserve(device, size);
        pthread_mutex_unlock(&pool->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pool->reserved_bytes += size;
    pool->used_bytes += size;
    pthread_mutex_unlock(&pool->lock);
    *base = memory;
    *reserved = size;
    return CUDA_SUCCESS;
}

/* Fault injection for tests: STANDIN_FAIL_ALLOC_ASYNC_RANK=r makes the stream-ordered
 * allocation fail in the process of rank r (out of device memory). */
static int alloc_async_fails(void) {
    return scuda_fault_here("STANDIN_FAIL_ALLOC_ASYNC_RANK");
}

static _Atomic size_t async_bytes, async_peak; /* held from cuMemAllocAsync to cuMemFreeAsync */

size_t standin_async_memory_peak(void) {
    return atomic_load(&async_peak);
}

/* Stream-ordered allocation from the pool of the stream's device: taken at once, given back to
 * the pool when the stream reaches the free. Inside a capture the free never runs: the memory
 * lives as long as the graph. */
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream stream) {
    int device = standin_stream_device(stream);
    if (device < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!dptr || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (alloc_async_fails())
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *base;
    size_t reserved;
    CUresult result = pool_take(device, bytes, &base, &reserved);
    if (result != CUDA_SUCCESS)
        return result;
    result = scuda_memory_record(base, bytes, SCUDA_DEVICE, device, reserved, 1);
    if (result != CUDA_SUCCESS) {
        scuda_pool_give_back(device, base, reserved);
        return result;
    }
    *dptr = (CUdeviceptr)base;
    size_t now = atomic_fetch_add(&async_bytes, bytes) + bytes, peak = atomic_load(&async_peak);
    while (now > peak && !atomic_compare_exchange_weak(&async_peak, &peak, now))
        ;
    return CUDA_SUCCESS;
}

static void free_now(void *arg) {
    scuda_memory_free(arg, SCUDA_DEVICE);
}

static void nothing(void *arg) {
    (void)arg;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    size_t bytes = 0;
    if (!scuda_memory_find((void *)dptr, NULL, &bytes, NULL, NULL))
        return CUDA_ERROR_INVALID_VALUE;
    size_t held = atomic_load(&async_bytes); /* saturating: cuMemAlloc's memory may be freed here */
    while (!atomic_compare_exchange_weak(&async_bytes, &held, held > bytes ? held - bytes : 0))
        ;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult result = cuStreamIsCapturing(stream, &status);
    if (result != CUDA_SUCCESS)
        return result;
    if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return standin_stream_enqueue(stream, nothing, (void *)dptr, free_now);
    return standin_stream_enqueue(stream, free_now, (void *)dptr, NULL);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice device) {
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    *pool = pool_of(device);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* No cuDeviceSetMemPool: the current pool is the default one. */
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice device) {
    return cuDeviceGetDefaultMemPool(pool, device);
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
    if (!pool_valid(pool))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool->lock);
    pool_trim(pool, keep);
    pthread_mutex_unlock(&pool->lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void *value) {
    if (!pool_valid(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    if (attribute != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&pool->lock);
    pool->release_threshold = *(cuuint64_t *)value;
    pthread_mutex_unlock(&pool->lock);
    return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attribute, void *value) {
    if (!pool_valid(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&pool->lock);
    switch (attribute) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = pool->release_threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = pool->reserved_bytes; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = pool->used_bytes; break;
    default: result = CUDA_ERROR_NOT_SUPPORTED; break;
    }
    pthread_mutex_unlock(&pool->lock);
    return result;
}
