/* cuda_host.c: the device reduction run by the host engine, in stream order and without host
 * synchronisation, for when the kernels are not built or not loaded: the N contributions are
 * copied into pinned staging, a host function reduces them there, the result is copied back.
 *
 * Staging lifetime: a staging buffer is taken from a pool (busy) before anything is enqueued,
 * and a host function enqueued after the copy back marks it free again, so it is reused only
 * once the stream has passed that copy. Under graph capture nothing is marked free by the
 * stream: the staging belongs to the graph (a CUDA user object whose destructor frees it when
 * the graph and its executable graphs are destroyed), or, without user objects, it is kept
 * until the process exits. Replays of a graph reuse its staging in the graph's own order.
 *
 * The same pool gives the scratch of a reduction whose device is full
 * (reprod_cuda_scratch_alloc): pinned memory that the devices reach at its host address
 * (unified addressing), given back in stream order in the same way.
 */
#include "common.h"
#include "device/cuda.h"
#include "device/cuda_driver.h"
#include "device/cuda_kernel.h"
#include "device/cuda_kernel_fixed.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Configuration ---------------------------------------------------------------------- */

#define STAGING_MIN_BYTES ((size_t)1 << 16) /* capacities are powers of two from 64 KiB */
#define SCALAR_BYTES      8                 /* room for the PreMulSum scalar */

enum { STAGING_FREE = 0, STAGING_BUSY = 1 };

/* One pinned staging buffer of the pool, and the reduction it serves while busy. */
struct staging {
    struct staging *next;          /* the pool's list: set before publication, then fixed */
    unsigned char *host;           /* pinned: N pointers, N contributions, the scalar */
    size_t capacity;               /* bytes at host */
    _Atomic int state;             /* STAGING_FREE or STAGING_BUSY */
    int pid;                       /* the process that allocated it (a fork child skips it) */
    struct reprod_kernel_args job; /* the reduction, with host addresses */
};

static _Atomic(struct staging *) pool;

/* Bytes of staging for `args`, or 0 on overflow. */
static size_t staging_bytes(const struct reprod_kernel_args *args, size_t *contribution_bytes)
{
    size_t size = reprod_type_size((reprod_type)args->type);
    size_t count = (size_t)args->count;
    if (args->elements > SIZE_MAX / 2 / size) return 0;
    *contribution_bytes = (size_t)args->elements * size;
    if (*contribution_bytes > (SIZE_MAX / 2 - SCALAR_BYTES) / (count + 1)) return 0;
    return count * sizeof(void *) + count * *contribution_bytes + SCALAR_BYTES;
}

/* A busy staging buffer of at least `bytes` bytes: a free one of the pool, or a new one. */
static struct staging *staging_take(const struct reprod_cuda_driver *d, size_t bytes)
{
    int self = (int)getpid();
    for (struct staging *s = atomic_load_explicit(&pool, memory_order_acquire); s; s = s->next) {
        int expected = STAGING_FREE;
        if (s->pid == self && s->capacity >= bytes &&
            atomic_compare_exchange_strong(&s->state, &expected, STAGING_BUSY))
            return s;
    }
    size_t capacity = STAGING_MIN_BYTES;
    while (capacity < bytes)
        capacity *= 2;
    struct staging *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    void *host = NULL;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED; /* allowed while this thread captures */
    int exchanged = d->thread_exchange_capture_mode(&mode) == CUDA_SUCCESS;
    CUresult rc =
        d->mem_host_alloc(&host, capacity, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (exchanged) d->thread_exchange_capture_mode(&mode);
    if (rc != CUDA_SUCCESS || host == NULL) {
        free(s);
        return NULL;
    }
    s->host = host;
    s->capacity = capacity;
    s->pid = self;
    atomic_init(&s->state, STAGING_BUSY);
    struct staging *head = atomic_load(&pool);
    do
        s->next = head;
    while (!atomic_compare_exchange_weak(&pool, &head, s));
    return s;
}

/* Host function after the copy back (or a graph's user-object destructor): free for reuse. */
static void staging_release(void *user)
{
    struct staging *s = user;
    atomic_store_explicit(&s->state, STAGING_FREE, memory_order_release);
}

/* Host function: the reduction on the staged contributions, into contribution 0's place.
 * PreMulSum scales the staged copies in place first (they are copied again on a replay). */
static void staging_reduce(void *user)
{
    struct staging *s = user;
    const struct reprod_kernel_args *job = &s->job;
    const reprod_type type = (reprod_type)job->type;
    size_t contribution_bytes = (size_t)job->elements * reprod_type_size(type);
    const void **pointers = (const void **)(void *)s->host;
    unsigned char *data = s->host + (size_t)job->count * sizeof(void *);
    for (int k = 0; k < job->count; k++)
        pointers[k] = data + (size_t)k * contribution_bytes;
    if (job->premul != REPROD_KERNEL_PREMUL_NONE) {
        const unsigned char *scalar_at = data + (size_t)job->count * contribution_bytes;
        uint64_t scalar = job->premul == REPROD_KERNEL_PREMUL_DEVICE
                              ? engine_load_bits(type, scalar_at, 0)
                              : job->scalar_bits;
        for (int k = 0; k < job->count; k++)
            for (size_t i = 0; i < job->elements; i++)
                engine_store_bits(type, (void *)(uintptr_t)pointers[k], i,
                                  reprod_kernel_scale_bits(
                                      type, engine_load_bits(type, pointers[k], i), scalar));
    }
    if (job->ordered)
        reprod_reduce_ordered(type, (reprod_op)job->op, pointers, job->count, job->elements, data);
    else
        reprod_reduce_exact(type, (reprod_op)job->op, (reprod_rounding)job->rounding, pointers,
                            job->count, job->elements, data);
}

/* Give a staging buffer to the graph being captured on `stream`: freed with the graph.
 * Returns 0 when this driver cannot (the staging is then kept for good). */
static int staging_give_to_graph(const struct reprod_cuda_driver *d, CUstream stream,
                                 struct staging *s)
{
    if (d->stream_get_capture_info == NULL || d->user_object_create == NULL ||
        d->graph_retain_user_object == NULL)
        return 0;
    int status = 0;
    unsigned long long id = 0;
    CUgraph graph = NULL;
    const CUgraphNode *dependencies = NULL;
    size_t dependency_count = 0;
    if (d->stream_get_capture_info(stream, &status, &id, &graph, &dependencies,
                                   &dependency_count) != CUDA_SUCCESS ||
        status != CU_STREAM_CAPTURE_STATUS_ACTIVE || graph == NULL)
        return 0;
    CUuserObject object;
    if (d->user_object_create(&object, s, staging_release, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) !=
        CUDA_SUCCESS)
        return 0;
    return d->graph_retain_user_object(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE) ==
           CUDA_SUCCESS;
}

/* Enqueue the copies of the contributions (and the device scalar) into staging. */
static CUresult stage_inputs(const struct reprod_cuda_driver *d, CUstream stream,
                             const struct reprod_kernel_args *args, unsigned char *data,
                             size_t contribution_bytes)
{
    CUresult rc = CUDA_SUCCESS;
    if (args->own_index < 0 && args->block_stride_bytes == contribution_bytes) {
        rc = d->memcpy_async((CUdeviceptr)(uintptr_t)data, (CUdeviceptr)(uintptr_t)args->blocks,
                             contribution_bytes * (size_t)args->count, stream);
    } else {
        for (int k = 0; k < args->count && rc == CUDA_SUCCESS; k++)
            rc = d->memcpy_async((CUdeviceptr)(uintptr_t)(data + (size_t)k * contribution_bytes),
                                 (CUdeviceptr)(uintptr_t)reprod_kernel_contribution(args, k),
                                 contribution_bytes, stream);
    }
    if (rc == CUDA_SUCCESS && args->premul == REPROD_KERNEL_PREMUL_DEVICE)
        rc = d->memcpy_async(
            (CUdeviceptr)(uintptr_t)(data + (size_t)args->count * contribution_bytes),
            (CUdeviceptr)(uintptr_t)args->scalar_device,
            reprod_type_size((reprod_type)args->type), stream);
    return rc;
}

int reprod_cuda_reduce_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                               const struct reprod_kernel_args *args, int capturing)
{
    size_t contribution_bytes = 0;
    size_t bytes = staging_bytes(args, &contribution_bytes);
    if (bytes == 0) return REPROD_CUDA_INVALID_VALUE;
    struct staging *s = staging_take(d, bytes);
    if (s == NULL) return REPROD_CUDA_UNAVAILABLE;
    s->job = *args;
    unsigned char *data = s->host + (size_t)args->count * sizeof(void *);
    CUresult rc = stage_inputs(d, stream, args, data, contribution_bytes);
    if (rc == CUDA_SUCCESS) rc = d->launch_host_func(stream, staging_reduce, s);
    if (rc == CUDA_SUCCESS)
        rc = d->memcpy_async((CUdeviceptr)(uintptr_t)args->out, (CUdeviceptr)(uintptr_t)data,
                             contribution_bytes, stream);
    if (rc != CUDA_SUCCESS) return rc; /* the staging stays busy: an enqueued copy may use it */
    if (capturing) {
        staging_give_to_graph(d, stream, s);
        return CUDA_SUCCESS;
    }
    return d->launch_host_func(stream, staging_release, s);
}

void *reprod_cuda_host_scratch_take(const struct reprod_cuda_driver *d, size_t bytes)
{
    struct staging *s = staging_take(d, bytes);
    return s != NULL ? s->host : NULL;
}

int reprod_cuda_host_scratch_release(const struct reprod_cuda_driver *d, CUstream stream,
                                     void *pointer, int capturing)
{
    int self = (int)getpid();
    for (struct staging *s = atomic_load_explicit(&pool, memory_order_acquire); s; s = s->next) {
        if (s->host != pointer || s->pid != self ||
            atomic_load_explicit(&s->state, memory_order_acquire) != STAGING_BUSY)
            continue;
        if (capturing)
            staging_give_to_graph(d, stream, s);
        else /* if this fails, the buffer stays busy: the stream may still use it */
            (void)d->launch_host_func(stream, staging_release, s);
        return 1;
    }
    return 0;
}

/* ---- The fixed-point route's stages on the host ------------------------------------------ */

/* The arrays a stage reads or writes, in the order they are staged. */
enum { AREA_TERMS, AREA_CODES, AREA_WORDS, AREA_OUT, AREA_LAYOUT, AREA_MAX_WORDS, AREAS };

struct fixed_job {
    struct staging *staging;
    struct reprod_fixed_args device; /* as the caller passed it (device addresses) */
    struct reprod_fixed_args host;   /* the same on the staged copies */
    size_t offset[AREAS], bytes[AREAS];
    unsigned reads, writes; /* bit masks of areas */
};

static void *area_address(const struct reprod_fixed_args *a, int area)
{
    switch (area) {
    case AREA_TERMS: return (void *)(uintptr_t)a->terms;
    case AREA_CODES: return a->codes;
    case AREA_WORDS: return a->words;
    case AREA_OUT: return a->out;
    case AREA_LAYOUT:
        return a->layout;
    default: return a->max_words;
    }
}

/* What the stage of `job->device` reads and writes, and the areas' sizes; 0 when invalid. */
static int fixed_areas(struct fixed_job *job)
{
    const struct reprod_fixed_args *a = &job->device;
    size_t n = (size_t)a->elements, size = reprod_type_size((reprod_type)a->type);
    size_t stride = (size_t)(a->stride > 0 ? a->stride : 1);
    const unsigned terms = 1u << AREA_TERMS, codes = 1u << AREA_CODES, words = 1u << AREA_WORDS,
                   out = 1u << AREA_OUT, layout = 1u << AREA_LAYOUT, cells = 1u << AREA_MAX_WORDS;
    const unsigned reads[] = {
        terms,  codes | cells,  terms | codes,  codes | words, terms, words, codes | cells | layout,
        layout, layout | cells, layout | cells, codes,         out};
    const unsigned writes[] = {codes | cells,  cells,  words,          out,    words, out,
                               layout | cells, layout, layout | cells, layout, out,   codes};
    if (size == 0 || a->stage < 0 || a->stage > REPROD_FIXED_UNPACK) return 0;
    if (stride > SIZE_MAX / 16 / (n + 1)) return 0;
    job->reads = reads[a->stage], job->writes = writes[a->stage];
    int per_element = a->layout != NULL;
    if (per_element && (a->stage == REPROD_FIXED_SPLIT || a->stage == REPROD_FIXED_ROUND)) {
        /* the layout's blocks and carries, the sub-piece's words only; ROUND writes the
         * results of the elements that end in the sub-piece, so the others are staged in to be
         * copied back as they were */
        if (a->word_end < a->word_first || a->word_end - a->word_first > SIZE_MAX / 16) return 0;
        job->reads |= layout | (a->stage == REPROD_FIXED_ROUND ? out : 0u);
        job->writes |= layout;
        job->bytes[AREA_WORDS] =
            (size_t)(a->word_end - a->word_first) * (a->narrow ? sizeof(int32_t) : sizeof(int64_t));
    } else {
        job->bytes[AREA_WORDS] =
            n * stride * (reprod_fixed_narrow(a) ? sizeof(int32_t) : sizeof(int64_t));
    }
    job->bytes[AREA_TERMS] = n * size;
    job->bytes[AREA_CODES] = 2 * n;
    const struct engine_format f = engine_format_of((reprod_type)a->type);
    job->bytes[AREA_OUT] = a->stage == REPROD_FIXED_PACK || a->stage == REPROD_FIXED_UNPACK
                               ? (size_t)engine_fixed_packed_bytes(&f, n)
                               : n * size;
    job->bytes[AREA_LAYOUT] = (size_t)reprod_fixed_layout_size(n) * sizeof(uint64_t);
    job->bytes[AREA_MAX_WORDS] = REPROD_FIXED_CELLS * sizeof(int32_t);
    size_t at = 0;
    for (int area = 0; area < AREAS; area++) {
        job->offset[area] = at;
        if ((job->reads | job->writes) >> area & 1) {
            if (area_address(a, area) == NULL) return 0;
            at += (job->bytes[area] + 15) & ~(size_t)15;
        }
    }
    return at > 0 ? 1 : 0;
}

static void fixed_run(void *user)
{
    struct fixed_job *job = user;
    reprod_kernel_fixed(&job->host, 0, 1);
}

static void fixed_release(void *user)
{
    struct fixed_job *job = user;
    staging_release(job->staging);
    free(job);
}

int reprod_cuda_fixed_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                              const struct reprod_fixed_args *args, int capturing)
{
    struct fixed_job *job = calloc(1, sizeof *job);
    if (job == NULL) return REPROD_CUDA_UNAVAILABLE;
    job->device = *args;
    if (!fixed_areas(job)) {
        free(job);
        return REPROD_CUDA_INVALID_VALUE;
    }
    size_t total = job->offset[AREAS - 1] + 16 + job->bytes[AREA_MAX_WORDS];
    job->staging = staging_take(d, total);
    if (job->staging == NULL) {
        free(job);
        return REPROD_CUDA_UNAVAILABLE;
    }
    unsigned char *base = job->staging->host;
    job->host = *args;
    job->host.terms = base + job->offset[AREA_TERMS];
    job->host.codes = base + job->offset[AREA_CODES];
    job->host.words = (int64_t *)(void *)(base + job->offset[AREA_WORDS]);
    job->host.out = base + job->offset[AREA_OUT];
    if (args->layout) /* NULL: the stride layout, which the kernel tells by it */
        job->host.layout = (uint64_t *)(void *)(base + job->offset[AREA_LAYOUT]);
    job->host.max_words = (int32_t *)(void *)(base + job->offset[AREA_MAX_WORDS]);
    CUresult rc = CUDA_SUCCESS;
    job->host.terms_block = 0; /* staged contiguous */
    for (int area = 0; area < AREAS && rc == CUDA_SUCCESS; area++) {
        if (!(job->reads >> area & 1)) continue;
        if (area == AREA_TERMS && args->terms_block) { /* block by block */
            size_t size = reprod_type_size((reprod_type)args->type), block = args->terms_block;
            for (size_t b = 0; b * block < args->elements && rc == CUDA_SUCCESS; b++)
                rc = d->memcpy_async(
                    (CUdeviceptr)(uintptr_t)(base + job->offset[area] + b * block * size),
                    (CUdeviceptr)(uintptr_t)((const char *)args->terms + b * args->terms_stride * size),
                    (args->elements - b * block < block ? args->elements - b * block : block) * size,
                    stream);
            continue;
        }
        rc = d->memcpy_async((CUdeviceptr)(uintptr_t)(base + job->offset[area]),
                             (CUdeviceptr)(uintptr_t)area_address(args, area), job->bytes[area],
                             stream);
    }
    if (rc == CUDA_SUCCESS) rc = d->launch_host_func(stream, fixed_run, job);
    for (int area = 0; area < AREAS && rc == CUDA_SUCCESS; area++)
        if (job->writes >> area & 1)
            rc = d->memcpy_async((CUdeviceptr)(uintptr_t)area_address(args, area),
                                 (CUdeviceptr)(uintptr_t)(base + job->offset[area]),
                                 job->bytes[area], stream);
    if (rc != CUDA_SUCCESS) return rc; /* the staging stays busy: an enqueued copy may use it */
    if (capturing) { /* the job is the graph's for its replays (kept) */
        staging_give_to_graph(d, stream, job->staging);
        return CUDA_SUCCESS;
    }
    return d->launch_host_func(stream, fixed_release, job);
}

/* ---- A layout's cells back to the host, in stream order ---------------------------------- */

struct readback {
    struct staging *staging;
    void (*done)(void *owner, const int32_t *cells);
    void *owner;
};

static void readback_arrived(void *user)
{
    struct readback *r = user;
    int32_t cells[REPROD_DEVICE_FIXED_CELLS];
    memcpy(cells, r->staging->host, sizeof cells);
    staging_release(r->staging);
    r->done(r->owner, cells);
    free(r);
}

int reprod_cuda_readback_on_host(const struct reprod_cuda_driver *d, CUstream stream,
                                 const int32_t *device_cells,
                                 void (*done)(void *owner, const int32_t *cells), void *owner)
{
    const size_t bytes = REPROD_DEVICE_FIXED_CELLS * sizeof(int32_t);
    struct readback *r = calloc(1, sizeof *r);
    if (r == NULL) return REPROD_CUDA_UNAVAILABLE;
    r->staging = staging_take(d, bytes);
    if (r->staging == NULL) {
        free(r);
        return REPROD_CUDA_UNAVAILABLE;
    }
    r->done = done, r->owner = owner;
    CUresult rc = d->memcpy_async((CUdeviceptr)(uintptr_t)r->staging->host,
                                  (CUdeviceptr)(uintptr_t)device_cells, bytes, stream);
    if (rc == CUDA_SUCCESS) rc = d->launch_host_func(stream, readback_arrived, r);
    return rc; /* on failure the staging stays busy (a copy may be enqueued) */
}
