/* cuda.c: the CUDA driver API found at run time in the libcuda.so.1 the process loaded, the
 * context each call's work runs in, the stream-ordered memory calls of cuda.h (the scratch of a
 * full device included), and reprod_cuda_reduce's choice between the device kernels
 * (cuda_module.c) and the host path (cuda_host.c), which give the same bits.
 */
#include "device/cuda.h"

#include "common.h"
#include "device/cuda_driver.h"
#include "device/cuda_kernel.h"
#include "device/cuda_kernel_fixed.h"
#include "runtime/log.h"
#include "interpose/once.h"
#include "interpose/resolve.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
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
_Static_assert(sizeof(struct reprod_fixed_args) == REPROD_FIXED_ARGS_BYTES,
               "the fixed-point kernel's parameter layout");
_Static_assert(REPROD_DEVICE_FIXED_NARROW_MOST == REPROD_FIXED_NARROW_MOST &&
                   REPROD_DEVICE_FIXED_NARROW_NONE == REPROD_FIXED_NARROW_NONE &&
                   REPROD_DEVICE_FIXED_CELLS == REPROD_FIXED_CELLS &&
                   REPROD_DEVICE_FIXED_WORDS_MOST == ENGINE_FIXED_MAX_WORDS &&
                   REPROD_FIXED_NARROW_MOST < REPROD_FIXED_NARROW_NONE,
               "cuda.h and cuda_kernel_fixed.h bound narrow words alike");

#define DRIVER_READY   1
#define DRIVER_LACKING 2

typedef CUresult get_proc_address_fn(const char *symbol, void **function, int cuda_version,
                                     unsigned long long flags, int *symbol_status);

/* libcuda's cuGetProcAddress_v2 (NULL in a driver without it): set before the table is
 * filled, under driver_once. */
static get_proc_address_fn *driver_get_proc_address;

/* `symbol` without its _vN suffix: the name cuGetProcAddress knows it by. */
static void base_name(const char *symbol, char *name, size_t size)
{
    snprintf(name, size, "%s", symbol);
    char *suffix = strrchr(name, '_');
    if (suffix && suffix[1] == 'v' && suffix[2] &&
        strspn(suffix + 2, "0123456789") == strlen(suffix + 2))
        *suffix = '\0';
}

/* How the driver's functions are found (the table's finder): through cuGetProcAddress, the
 * version CUDA 12.0's headers call (legacy default stream), else by the exported symbol. */
static void *find_driver_function(const char *symbol)
{
    char name[64];
    void *function = NULL;
    int status = -1;
    base_name(symbol, name, sizeof name);
    if (driver_get_proc_address == NULL ||
        driver_get_proc_address(name, &function, REPROD_CUDA_API_VERSION,
                                CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
        function = NULL;
    return function ? function : reprod_resolve(symbol);
}

REPROD_REAL_TABLE(driver_functions, struct reprod_cuda_driver, REPROD_CUDA_DRIVER_FUNCTIONS,
                  find_driver_function);

/* The functions the shim can do without (NULL where the driver lacks them). */
static const int optional_functions[] = {
    REPROD_REAL_INDEX(driver_functions, ctx_get_id),
    REPROD_REAL_INDEX(driver_functions, stream_get_capture_info),
    REPROD_REAL_INDEX(driver_functions, user_object_create),
    REPROD_REAL_INDEX(driver_functions, graph_retain_user_object),
    REPROD_REAL_INDEX(driver_functions, device_get_mem_pool),
    REPROD_REAL_INDEX(driver_functions, mem_pool_trim_to),
    REPROD_REAL_INDEX(driver_functions, driver_get_version),
    REPROD_REAL_INDEX(driver_functions, get_error_name),
    REPROD_REAL_INDEX(driver_functions, func_get_attribute),
    REPROD_REAL_INDEX(driver_functions, ctx_get_limit),
};

static int optional(int index)
{
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(optional_functions); i++)
        if (optional_functions[i] == index) return 1;
    return 0;
}

/* The table, filled once libcuda is loaded (once.h: a fork child whose parent was filling it
 * fills it again): driver_state is then DRIVER_READY, or DRIVER_LACKING for good (the loaded
 * libcuda lacks a required function: driver_lacks). */
static char driver_lacks[96]; /* DRIVER_LACKING: "the CUDA driver lacks cuMemAllocAsync" */
static _Atomic int driver_state;
static struct reprod_once driver_once = REPROD_ONCE_INIT;

static void fill_driver_table(void)
{
    void *get_proc_address = reprod_resolve("cuGetProcAddress_v2");
    memcpy(&driver_get_proc_address, &get_proc_address, sizeof get_proc_address);
    reprod_real_complete_once(&driver_functions.table);
    for (int i = 0; i < driver_functions.table.count; i++) {
        if (reprod_real_slot(&driver_functions.table, i) != NULL || optional(i)) continue;
        char name[64];
        base_name(driver_functions_symbols[i], name, sizeof name);
        snprintf(driver_lacks, sizeof driver_lacks, "the CUDA driver lacks %s", name);
        atomic_store_explicit(&driver_state, DRIVER_LACKING, memory_order_release);
        return;
    }
    atomic_store_explicit(&driver_state, DRIVER_READY, memory_order_release);
}

/* 1 when the process has loaded libcuda (the table can be filled). */
static int driver_loaded(void)
{
    return reprod_resolve("cuGetProcAddress_v2") != NULL || reprod_resolve("cuInit") != NULL;
}

const struct reprod_cuda_driver *reprod_cuda_driver(void)
{
    int state = atomic_load_explicit(&driver_state, memory_order_acquire);
    if (REPROD_LIKELY(state == DRIVER_READY)) return &driver_functions.functions;
    if (state == DRIVER_LACKING) return NULL;
    /* CUDA not loaded (yet): ask again next time. A call from inside the filling itself finds
     * no driver. */
    if (!driver_loaded() || !reprod_once(&driver_once, fill_driver_table)) return NULL;
    return atomic_load_explicit(&driver_state, memory_order_acquire) == DRIVER_READY
               ? &driver_functions.functions
               : NULL;
}

const char *reprod_cuda_unready_reason(void)
{
    if (reprod_cuda_driver() != NULL) return NULL;
    if (atomic_load_explicit(&driver_state, memory_order_acquire) != DRIVER_LACKING)
        return "no CUDA driver in the process";
    return driver_lacks;
}

const char *reprod_cuda_error_name(const struct reprod_cuda_driver *d, CUresult error)
{
    const char *name = NULL;
    if (d->get_error_name == NULL || d->get_error_name(error, &name) != CUDA_SUCCESS ||
        name == NULL)
        return "CUDA error";
    return name;
}

/* A default stream (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD): the current context's. */
static int default_stream(CUstream stream)
{
    return (uintptr_t)stream <= 2;
}

static atomic_flag logged_no_primary = ATOMIC_FLAG_INIT;

CUresult reprod_cuda_enter(const struct reprod_cuda_driver *d, CUstream stream, int device,
                           struct reprod_cuda_scope *scope)
{
    CUcontext current = NULL, target = NULL;
    memset(scope, 0, sizeof *scope);
    scope->device = device;
    if (d->ctx_get_current(&current) != CUDA_SUCCESS) current = NULL;
    if (device >= 0 && default_stream(stream)) {
        CUdevice current_device = -1;
        if (current != NULL && d->ctx_get_device(&current_device) == CUDA_SUCCESS &&
            current_device == device)
            target = current;
        else if (d->primary_ctx_retain(&target, device) == CUDA_SUCCESS)
            scope->retained = 1;
        else if (!atomic_flag_test_and_set(&logged_no_primary))
            reprod_log(REPROD_LOG_WARN,
                       "warning: the CUDA driver cannot give device %d's context "
                       "(cuDevicePrimaryCtxRetain): work on a default stream goes to the "
                       "calling thread's current device",
                       device);
    }
    CUresult rc = target != NULL ? CUDA_SUCCESS : d->stream_get_ctx(stream, &target);
    if (rc == CUDA_SUCCESS && target != current) {
        rc = d->ctx_push_current(target);
        scope->pushed = rc == CUDA_SUCCESS;
    }
    if (rc != CUDA_SUCCESS) {
        reprod_cuda_leave(d, scope);
        return rc;
    }
    scope->context = target;
    return CUDA_SUCCESS;
}

void reprod_cuda_leave(const struct reprod_cuda_driver *d, struct reprod_cuda_scope *scope)
{
    CUcontext popped;
    if (scope->pushed) d->ctx_pop_current(&popped);
    if (scope->retained) d->primary_ctx_release(scope->device);
    scope->pushed = scope->retained = 0;
}

/* ---- cuda.h ------------------------------------------------------------------------------ */

int reprod_cuda_ready(void)
{
    return reprod_cuda_driver() != NULL;
}

int reprod_cuda_current_device(void)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    CUcontext current = NULL;
    CUdevice device = REPROD_CUDA_CURRENT_DEVICE;
    if (d == NULL || d->ctx_get_current(&current) != CUDA_SUCCESS || current == NULL ||
        d->ctx_get_device(&device) != CUDA_SUCCESS)
        return REPROD_CUDA_CURRENT_DEVICE;
    return device;
}

/* Give the current device's stream-ordered pool's free memory back to the device
 * (cuMemPoolTrimTo; a capture elsewhere on this thread must not object). 1 when trimmed. */
static int trim_pool(const struct reprod_cuda_driver *d)
{
    CUdevice device;
    CUmemoryPool pool;
    if (d->device_get_mem_pool == NULL || d->mem_pool_trim_to == NULL ||
        d->ctx_get_device(&device) != CUDA_SUCCESS ||
        d->device_get_mem_pool(&pool, device) != CUDA_SUCCESS)
        return 0;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    int exchanged = d->thread_exchange_capture_mode(&mode) == CUDA_SUCCESS;
    CUresult rc = d->mem_pool_trim_to(pool, 0);
    if (exchanged) d->thread_exchange_capture_mode(&mode);
    return rc == CUDA_SUCCESS;
}

static atomic_flag logged_trim = ATOMIC_FLAG_INIT, logged_host_scratch = ATOMIC_FLAG_INIT;

/* The fallbacks change where this process's scratch lives, never its size: every rank's NCCL
 * calls stay the same (the pieces follow from the arguments and REPROD_SCRATCH_MB alone). */
int reprod_cuda_scratch_alloc(void **pointer, size_t bytes, reprod_stream stream, int device)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    struct reprod_cuda_scope scope;
    *pointer = NULL;
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    CUdeviceptr address = 0;
    rc = d->mem_alloc_async(&address, bytes, stream);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && trim_pool(d)) {
        rc = d->mem_alloc_async(&address, bytes, stream);
        if (rc == CUDA_SUCCESS && !atomic_flag_test_and_set(&logged_trim))
            reprod_log(REPROD_LOG_INFO,
                       "the device was full: trimming CUDA's stream-ordered pool made room for "
                       "%zu bytes of the shim's scratch",
                       bytes);
    }
    if (rc == CUDA_SUCCESS) {
        *pointer = (void *)(uintptr_t)address;
    } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        *pointer = reprod_cuda_host_scratch_take(d, bytes);
        if (*pointer != NULL) rc = CUDA_SUCCESS;
        if (*pointer != NULL && !atomic_flag_test_and_set(&logged_host_scratch))
            reprod_log(REPROD_LOG_WARN,
                       "warning: the device is full (even after trimming CUDA's pool): the "
                       "shim's scratch (%zu bytes) is in pinned host memory, which the device "
                       "reaches over the bus (slower, the same bits)",
                       bytes);
    }
    reprod_cuda_leave(d, &scope);
    return rc;
}

int reprod_cuda_scratch_free(void *pointer, reprod_stream stream, int device)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    struct reprod_cuda_scope scope;
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    rc = d->stream_is_capturing(stream, &status);
    int capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
    if (rc == CUDA_SUCCESS && !reprod_cuda_host_scratch_release(d, stream, pointer, capturing))
        rc = d->mem_free_async((CUdeviceptr)(uintptr_t)pointer, stream);
    reprod_cuda_leave(d, &scope);
    return rc;
}

int reprod_cuda_copy_async(void *destination, const void *source, size_t bytes,
                           reprod_stream stream, int device)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    struct reprod_cuda_scope scope;
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    if (bytes == 0) return REPROD_CUDA_OK;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    rc = d->memcpy_async((CUdeviceptr)(uintptr_t)destination, (CUdeviceptr)(uintptr_t)source, bytes,
                         stream);
    reprod_cuda_leave(d, &scope);
    return rc;
}

int reprod_cuda_capturing(reprod_stream stream, int device, int *capturing)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    struct reprod_cuda_scope scope;
    *capturing = 0;
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    int status = CU_STREAM_CAPTURE_STATUS_NONE;
    rc = d->stream_is_capturing(stream, &status);
    *capturing = rc == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
    reprod_cuda_leave(d, &scope);
    return rc;
}

int reprod_cuda_stream_sync(reprod_stream stream, int device)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    struct reprod_cuda_scope scope;
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    rc = d->stream_synchronize(stream);
    reprod_cuda_leave(d, &scope);
    return rc;
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

/* One launch of a kernel (cuda_module.c), or where it does not start, the same arithmetic on the
 * host in stream order (cuda_host.c); counted either way (reprod_cuda_count_path). */
struct stage {
    CUresult (*launch)(const struct reprod_cuda_driver *d, CUcontext context, CUstream stream,
                       const void *args, int capturing, const char **why); /* NULL: not tried */
    int (*on_host)(const struct reprod_cuda_driver *d, CUstream stream, const void *args,
                   int capturing);
    const void *args;
    const char *why; /* the host path's word when the kernel is not tried (launch may set it) */
};

static int run_stage(const struct reprod_cuda_driver *d, reprod_stream stream, int device,
                     const struct stage *stage)
{
    struct reprod_cuda_scope scope;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    int capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    rc = d->stream_is_capturing(stream, &capture_status);
    if (rc == CUDA_SUCCESS) {
        int capturing = capture_status != CU_STREAM_CAPTURE_STATUS_NONE;
        const char *why = stage->why;
        rc = stage->launch ? stage->launch(d, scope.context, stream, stage->args, capturing, &why)
                           : REPROD_CUDA_UNAVAILABLE;
        if (rc == CUDA_SUCCESS) {
            reprod_cuda_count_path(NULL);
        } else {
            rc = stage->on_host(d, stream, stage->args, capturing);
            if (rc == CUDA_SUCCESS) reprod_cuda_count_path(why);
        }
    }
    reprod_cuda_leave(d, &scope);
    return rc;
}

/* The two kinds of launch, as run_stage takes them. */
static CUresult launch_reduce(const struct reprod_cuda_driver *d, CUcontext context,
                              CUstream stream, const void *args, int capturing, const char **why)
{
    return reprod_cuda_launch(d, context, stream, args, capturing, why);
}

static int reduce_on_host(const struct reprod_cuda_driver *d, CUstream stream, const void *args,
                          int capturing)
{
    return reprod_cuda_reduce_on_host(d, stream, args, capturing);
}

static CUresult launch_fixed(const struct reprod_cuda_driver *d, CUcontext context, CUstream stream,
                             const void *args, int capturing, const char **why)
{
    return reprod_cuda_launch_fixed(d, context, stream, args, capturing, why);
}

static int fixed_on_host(const struct reprod_cuda_driver *d, CUstream stream, const void *args,
                         int capturing)
{
    return reprod_cuda_fixed_on_host(d, stream, args, capturing);
}

int reprod_cuda_reduce(reprod_stream stream, int device,
                       const struct reprod_device_reduction *reduction)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    struct reprod_kernel_args args;
    if (reduction == NULL || !kernel_args_of(reduction, &args)) return REPROD_CUDA_INVALID_VALUE;
    if (args.elements == 0) return REPROD_CUDA_OK;
    /* Without a pointer array the kernel cannot reach more than its local pointers. */
    int kernel_possible = args.count <= REPROD_KERNEL_LOCAL_POINTERS || args.pointers != NULL;
    struct stage stage = {kernel_possible ? launch_reduce : NULL, reduce_on_host, &args,
                          "no-pointer-array"};
    return run_stage(d, stream, device, &stage);
}

int reprod_cuda_fixed(reprod_stream stream, int device, const struct reprod_device_fixed *stage)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    if (stage == NULL || reprod_type_size(stage->type) == 0 || stage->ranks < 1 ||
        (unsigned)stage->stage > REPROD_DEVICE_FIXED_UNPACK ||
        (unsigned)stage->rounding > REPROD_ROUND_DOWN ||
        (stage->op != REPROD_SUM && stage->op != REPROD_AVG))
        return REPROD_CUDA_INVALID_VALUE;
    if (stage->elements == 0 && stage->stage != REPROD_DEVICE_FIXED_CODES) return REPROD_CUDA_OK;
    struct reprod_fixed_args args;
    memset(&args, 0, sizeof args);
    args.stage = (int32_t)stage->stage;
    args.type = stage->type;
    args.op = stage->op;
    args.rounding = stage->rounding;
    args.ranks = stage->ranks;
    args.stride = stage->stride;
    args.narrow = stage->narrow != 0; /* read by the stages that take it: reprod_fixed_narrow */
    args.elements = stage->elements;
    args.terms = stage->terms;
    args.terms_block = stage->terms_block;
    args.terms_stride = stage->terms_stride;
    args.codes = stage->codes;
    args.words = stage->words;
    args.out = stage->out;
    args.max_words = stage->max_words;
    args.layout = stage->layout;
    args.word_first = stage->word_first;
    args.word_end = stage->word_end;
    args.word_total = stage->word_total;
    args.sub = stage->sub;
    struct stage run = {launch_fixed, fixed_on_host, &args, "kernels"};
    return run_stage(d, stream, device, &run);
}

size_t reprod_device_fixed_layout_bytes(size_t elements)
{
    return (size_t)reprod_fixed_layout_size(elements) * sizeof(uint64_t);
}

uint64_t reprod_device_fixed_total(const int32_t cells[REPROD_DEVICE_FIXED_CELLS], int *narrow)
{
    return reprod_fixed_total(cells, narrow);
}

int reprod_device_fixed_layout(const int32_t cells[REPROD_DEVICE_FIXED_CELLS], int probe,
                               int *stride)
{
    return reprod_fixed_layout(cells, probe, stride);
}

int reprod_cuda_readback(reprod_stream stream, int device, const int32_t *device_cells,
                         void (*done)(void *owner, const int32_t *cells), void *owner)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    if (d == NULL) return REPROD_CUDA_UNAVAILABLE;
    if (device_cells == NULL || done == NULL) return REPROD_CUDA_INVALID_VALUE;
    struct reprod_cuda_scope scope;
    CUresult rc = reprod_cuda_enter(d, stream, device, &scope);
    if (rc != CUDA_SUCCESS) return rc;
    rc = reprod_cuda_readback_on_host(d, stream, device_cells, done, owner);
    reprod_cuda_leave(d, &scope);
    return rc;
}
