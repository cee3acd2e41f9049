/* The CUDA stand-in's streams, events and graphs: each stream is a worker thread that runs its
 * work in order; a capturing stream appends its work to a graph instead; a graph launch enqueues
 * the recorded work again. Destroyed streams and events keep their (small) memory, so that work
 * still queued and stale handles never touch freed memory. */
#include "cuda_objects.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

pthread_mutex_t scuda_capture_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;
static CUstream legacy_streams[MAX_DEVICES];
_Atomic(struct CUstream_st *) scuda_all_streams;

/* ---- handle registry: an open-addressing set of pointers ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *registry;
static size_t registry_capacity, registry_used; /* used counts tombstones too */
#define TOMBSTONE ((uintptr_t)1)

static size_t registry_slot(uintptr_t key, size_t capacity) {
    return (size_t)((key >> 4) * 0x9e3779b97f4a7c15ULL) & (capacity - 1);
}

static void registry_grow(void) {
    size_t old_capacity = registry_capacity;
    uintptr_t *old = registry;
    registry_capacity = old_capacity ? old_capacity * 2 : 1024;
    registry = calloc(registry_capacity, sizeof *registry);
    registry_used = 0;
    for (size_t i = 0; i < old_capacity; i++) {
        if (old[i] > TOMBSTONE) {
            size_t slot = registry_slot(old[i], registry_capacity);
            while (registry[slot])
                slot = (slot + 1) & (registry_capacity - 1);
            registry[slot] = old[i];
            registry_used++;
        }
    }
    free(old);
}

void scuda_handle_add(const void *handle) {
    pthread_mutex_lock(&registry_lock);
    if ((registry_used + 1) * 2 > registry_capacity)
        registry_grow();
    size_t slot = registry_slot((uintptr_t)handle, registry_capacity);
    while (registry[slot] > TOMBSTONE)
        slot = (slot + 1) & (registry_capacity - 1);
    if (!registry[slot])
        registry_used++;
    registry[slot] = (uintptr_t)handle;
    pthread_mutex_unlock(&registry_lock);
}

/* The registry slot holding `handle`, or -1. Call with registry_lock held. */
static long registry_find(const void *handle) {
    if (!registry || (uintptr_t)handle <= TOMBSTONE)
        return -1;
    size_t slot = registry_slot((uintptr_t)handle, registry_capacity);
    while (registry[slot]) {
        if (registry[slot] == (uintptr_t)handle)
            return (long)slot;
        slot = (slot + 1) & (registry_capacity - 1);
    }
    return -1;
}

void scuda_handle_remove(const void *handle) {
    pthread_mutex_lock(&registry_lock);
    long slot = registry_find(handle);
    if (slot >= 0)
        registry[slot] = TOMBSTONE;
    pthread_mutex_unlock(&registry_lock);
}

int scuda_handle_live(const void *handle) {
    pthread_mutex_lock(&registry_lock);
    int live = registry_find(handle) >= 0;
    pthread_mutex_unlock(&registry_lock);
    return live;
}

double scuda_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- streams ---- */

static void *stream_worker(void *argument) {
    struct CUstream_st *stream = argument;
    scuda_bind_device(stream->device);
    pthread_mutex_lock(&stream->lock);
    for (;;) {
        while (!stream->head && !stream->stopping)
            pthread_cond_wait(&stream->work_ready, &stream->lock);
        struct work *work = stream->head;
        if (!work)
            break;
        stream->head = work->next;
        if (!stream->head)
            stream->tail = NULL;
        pthread_mutex_unlock(&stream->lock);
        work->run(work->arg);
        if (work->release)
            work->release(work->arg);
        free(work);
        pthread_mutex_lock(&stream->lock);
        stream->completed++;
        pthread_cond_broadcast(&stream->work_done);
    }
    pthread_mutex_unlock(&stream->lock);
    return NULL;
}

static CUresult stream_create(CUstream *out, unsigned flags, int device) {
    struct CUstream_st *stream = calloc(1, sizeof *stream);
    if (!stream)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stream->magic = STREAM_MAGIC;
    stream->device = device;
    stream->flags = flags;
    pthread_mutex_init(&stream->lock, NULL);
    pthread_cond_init(&stream->work_ready, NULL);
    pthread_cond_init(&stream->work_done, NULL);
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&thread, &attributes, stream_worker, stream);
    pthread_attr_destroy(&attributes);
    if (failed) {
        free(stream);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    stream->next_of_all = atomic_load(&scuda_all_streams);
    while (!atomic_compare_exchange_weak(&scuda_all_streams, &stream->next_of_all, stream))
        ;
    scuda_handle_add(stream);
    *out = stream;
    return CUDA_SUCCESS;
}

CUstream scuda_stream_resolve(CUstream handle) {
    if (SPECIAL_STREAM(handle)) {
        int device = standin_current_device();
        if (device < 0 || device >= MAX_DEVICES)
            return NULL;
        pthread_mutex_lock(&legacy_lock);
        if (!legacy_streams[device] && stream_create(&legacy_streams[device], 0, device) != CUDA_SUCCESS)
            legacy_streams[device] = NULL;
        CUstream stream = legacy_streams[device];
        pthread_mutex_unlock(&legacy_lock);
        return stream;
    }
    if (!scuda_handle_live(handle) || handle->magic != STREAM_MAGIC)
        return NULL;
    return handle;
}

int standin_stream_device(CUstream handle) {
    CUstream stream = scuda_stream_resolve(handle);
    return stream ? stream->device : -1;
}

void scuda_node_list_append(struct node_list *nodes, standin_work_fn *run, void *arg, standin_work_fn *release) {
    if (nodes->count == nodes->capacity) {
        nodes->capacity = nodes->capacity ? nodes->capacity * 2 : 16;
        nodes->items = realloc(nodes->items, nodes->capacity * sizeof *nodes->items);
    }
    nodes->items[nodes->count++] = (struct work){run, release, arg, NULL};
}

static void queue_push(CUstream stream, struct work *work) {
    pthread_mutex_lock(&stream->lock);
    if (stream->tail)
        stream->tail->next = work;
    else
        stream->head = work;
    stream->tail = work;
    stream->enqueued++;
    pthread_cond_signal(&stream->work_ready);
    pthread_mutex_unlock(&stream->lock);
}

CUresult standin_stream_enqueue(CUstream handle, standin_work_fn *run, void *arg, standin_work_fn *release) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream || !run)
        return stream ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&scuda_capture_lock);
    if (stream->capture) {
        scuda_node_list_append(stream->capture->graph->nodes, run, arg, release);
        pthread_mutex_unlock(&scuda_capture_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&scuda_capture_lock);
    struct work *work = calloc(1, sizeof *work);
    if (!work)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *work = (struct work){run, release, arg, NULL};
    queue_push(stream, work);
    return CUDA_SUCCESS;
}

static void stream_wait_idle(CUstream stream) {
    pthread_mutex_lock(&stream->lock);
    uint64_t target = stream->enqueued;
    while (stream->completed < target)
        pthread_cond_wait(&stream->work_done, &stream->lock);
    pthread_mutex_unlock(&stream->lock);
}

CUresult scuda_synchronize_device(int device) {
    for (struct CUstream_st *stream = atomic_load(&scuda_all_streams); stream; stream = stream->next_of_all)
        if (device < 0 || stream->device == device)
            stream_wait_idle(stream);
    scuda_pool_release_at_sync(device);
    return scuda_device_fault(device);
}

CUresult cuStreamCreate(CUstream *out, unsigned int flags) {
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_create(out, flags, standin_current_device());
}

CUresult cuStreamCreateWithPriority(CUstream *out, unsigned int flags, int priority) {
    (void)priority;
    return cuStreamCreate(out, flags);
}

CUresult cuStreamGetFlags(CUstream handle, unsigned int *flags) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream || !flags)
        return stream ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
    *flags = stream->flags;
    return CUDA_SUCCESS;
}

/* The worker finishes the queued work, then ends; the struct stays allocated (see the top). */
CUresult cuStreamDestroy(CUstream handle) {
    if (SPECIAL_STREAM(handle) || !scuda_handle_live(handle) || handle->magic != STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    scuda_handle_remove(handle);
    pthread_mutex_lock(&handle->lock);
    handle->magic = DEAD_MAGIC;
    handle->stopping = 1;
    pthread_cond_signal(&handle->work_ready);
    pthread_mutex_unlock(&handle->lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream handle) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream)
        return CUDA_ERROR_INVALID_HANDLE;
    stream_wait_idle(stream);
    scuda_pool_release_at_sync(stream->device);
    return scuda_device_fault(stream->device);
}

CUresult cuStreamQuery(CUstream handle) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&stream->lock);
    int idle = stream->completed == stream->enqueued;
    pthread_mutex_unlock(&stream->lock);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

struct host_call {
    CUhostFn fn;
    void *user_data;
};

static void host_call_run(void *arg) {
    struct host_call *call = arg;
    call->fn(call->user_data);
}

CUresult cuLaunchHostFunc(CUstream handle, CUhostFn fn, void *user_data) {
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct host_call *call = malloc(sizeof *call);
    if (!call)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *call = (struct host_call){fn, user_data};
    CUresult result = standin_stream_enqueue(handle, host_call_run, call, free);
    if (result != CUDA_SUCCESS)
        free(call);
    return result;
}

extern __typeof__(cuStreamDestroy_v2) standin_cuStreamDestroy_plain __asm__("cuStreamDestroy")
    __attribute__((alias("cuStreamDestroy_v2")));
