/* cuda_module.c: the device kernels embedded in the shim (REPROD_HAVE_KERNELS: a fatbin that
 * nvcc built from cuda_kernels.cu, in cuda_image.S), loaded once per CUDA context, and their
 * launch. Without them, or when a context cannot load them, reductions take the host path.
 * Which path runs, and why, is said once: at REPROD_VERBOSE=1 when the kernels load (the code
 * the device runs, the stack a thread needs), as a warning when they do not (a driver older
 * than the toolkit that built them, a GPU they were not built for, ...), and in the counts
 * line at exit (device=kernels, device=host:<why>), which `reprod doctor` reads.
 */
#include "common.h"
#include "device/cuda.h"
#include "device/cuda_driver.h"
#include "device/cuda_kernel.h"
#include "device/cuda_kernel_fixed.h"
#include "runtime/log.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- Configuration ---------------------------------------------------------------------- */

#define MODULE_SLOTS       64  /* contexts a process can have the kernels loaded in */
#define BLOCK_THREADS      256 /* threads per block */
#define BLOCKS_PER_SM      4   /* grid cap: 4 blocks of 256 per multiprocessor keep it full */
#define BLOCKS_IF_UNKNOWN  1024 /* grid cap when the multiprocessor count is unknown */

#if defined(REPROD_HAVE_KERNELS)
extern const unsigned char reprod_cuda_image[]; /* cuda_image.S */
#endif
/* From the Makefile: the toolkit that built the kernels (13.0: 13000), the architectures built
 * as machine code and as PTX. */
#if !defined(REPROD_KERNEL_CUDA_VERSION)
#define REPROD_KERNEL_CUDA_VERSION 0
#endif
#if !defined(REPROD_KERNEL_SASS)
#define REPROD_KERNEL_SASS ""
#endif
#if !defined(REPROD_KERNEL_PTX)
#define REPROD_KERNEL_PTX ""
#endif

enum slot_state { SLOT_EMPTY = 0, SLOT_READY, SLOT_FAILED };

/* One context's kernels. A slot is written once, under the table lock, then published by its
 * state (release); readers need no lock. */
struct module_slot {
    _Atomic unsigned long long key; /* the context's id + 1 (or its address) */
    _Atomic int state;              /* enum slot_state */
    CUfunction reduce;
    CUfunction pointers;
    CUfunction fixed; /* the fixed-point route's stages */
    unsigned max_blocks;
    const char *why; /* SLOT_FAILED: why, one word for the counts line */
};

static struct module_slot slots[MODULE_SLOTS];
static _Atomic int slots_used;
static _Atomic int table_pid;  /* the process the table belongs to (a fork child resets it) */
static _Atomic int table_lock; /* 0, or the pid of the process holding it */

/* The context's key: its unique id where the driver has cuCtxGetId (a destroyed context's
 * address can come back for a new one), else its address. Never 0. */
static unsigned long long context_key(const struct reprod_cuda_driver *d, CUcontext context)
{
    unsigned long long id;
    if (d->ctx_get_id != NULL && d->ctx_get_id(context, &id) == CUDA_SUCCESS) return id + 1;
    return (unsigned long long)(uintptr_t)context | 1ull << 63;
}

/* The ready or failed slot of `key` in this process, or NULL. Lock-free. */
static struct module_slot *slot_find(unsigned long long key)
{
    if (atomic_load_explicit(&table_pid, memory_order_acquire) != (int)getpid()) return NULL;
    int used = atomic_load_explicit(&slots_used, memory_order_acquire);
    for (int i = 0; i < used && i < MODULE_SLOTS; i++)
        if (atomic_load_explicit(&slots[i].state, memory_order_acquire) != SLOT_EMPTY &&
            atomic_load_explicit(&slots[i].key, memory_order_relaxed) == key)
            return &slots[i];
    return NULL;
}

/* The table lock: held only while a context loads the kernels. A holder that is not this
 * process (a parent that forked while loading) is taken over. */
static void table_lock_take(void)
{
    int self = (int)getpid();
    for (;;) {
        int holder = atomic_load(&table_lock);
        if (holder != self && atomic_compare_exchange_weak(&table_lock, &holder, self)) return;
        sched_yield();
    }
}

static void table_lock_release(void)
{
    atomic_store(&table_lock, 0);
}

static atomic_flag logged_unavailable = ATOMIC_FLAG_INIT;

/* Say once per process why reductions run on the host. */
static void log_host_path(const struct reprod_cuda_driver *d, const char *why, CUresult code)
{
    if (atomic_flag_test_and_set(&logged_unavailable)) return;
    if (code != CUDA_SUCCESS)
        reprod_log(REPROD_LOG_WARN,
                   "device reductions run on the host (slower, the same bits): %s (%s, %d)", why,
                   reprod_cuda_error_name(d, code), code);
    else
        reprod_log(REPROD_LOG_WARN, "device reductions run on the host (slower, the same bits): %s",
                   why);
}

#if defined(REPROD_HAVE_KERNELS)
/* An attribute of the current context's device, or -1. */
static int device_attribute(const struct reprod_cuda_driver *d, int attribute)
{
    CUdevice device;
    int value = -1;
    if (d->ctx_get_device(&device) != CUDA_SUCCESS ||
        d->device_get_attribute(&value, attribute, device) != CUDA_SUCCESS)
        return -1;
    return value;
}

/* Why the kernels did not load (`rc`), for the log and the counts line. */
static const char *explain_load_failure(const struct reprod_cuda_driver *d, CUresult rc)
{
    char text[320];
    int driver = 0, toolkit = REPROD_KERNEL_CUDA_VERSION;
    if (d->driver_get_version == NULL || d->driver_get_version(&driver) != CUDA_SUCCESS) driver = 0;
    if (driver > 0 && driver < toolkit) {
        snprintf(text, sizeof text,
                 "the kernels do not load: the driver supports CUDA %d.%d, older than the CUDA "
                 "%d.%d that built them (update the driver, or build the shim with an nvcc of "
                 "CUDA %d.%d or older: make NVCC=...)",
                 driver / 1000, driver % 1000 / 10, toolkit / 1000, toolkit % 1000 / 10,
                 driver / 1000, driver % 1000 / 10);
        log_host_path(d, text, rc);
        return "driver-older-than-kernels";
    }
    if (rc == CUDA_ERROR_NO_BINARY_FOR_GPU) {
        snprintf(
            text, sizeof text,
            "the kernels hold no code for this GPU (compute %d.%d; built: sm " REPROD_KERNEL_SASS
            ", PTX compute " REPROD_KERNEL_PTX ")",
            device_attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            device_attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
        log_host_path(d, text, rc);
        return "no-kernels-for-this-gpu";
    }
    log_host_path(d, "the device kernels do not load in this context", rc);
    return "kernels-do-not-load";
}

/* Whether `binary` (a function's CU_FUNC_ATTRIBUTE_BINARY_VERSION, 90 for sm_90) is one of the
 * architectures the kernels were built for as machine code. */
static int built_as_code(int binary)
{
    char word[16];
    snprintf(word, sizeof word, " %d ", binary);
    char list[sizeof REPROD_KERNEL_SASS + 2] = " ";
    strcat(list, REPROD_KERNEL_SASS " ");
    return strstr(list, word) != NULL;
}

/* The kernels are loaded in the current context: say what the device runs at REPROD_VERBOSE=1
 * (the code and the stack a thread needs), and 0 when a launch would have to grow the
 * device's per-thread stack (the first launch would resize local memory for the whole device
 * and synchronise it, while NCCL's kernels may wait on peers): then the host path. */
static int kernels_fit(const struct reprod_cuda_driver *d, const struct module_slot *slot,
                       int multiprocessors)
{
    int binary = 0, stack = -1;
    size_t limit = 0;
    if (d->func_get_attribute == NULL ||
        d->func_get_attribute(&binary, CU_FUNC_ATTRIBUTE_BINARY_VERSION, slot->reduce) !=
            CUDA_SUCCESS ||
        d->func_get_attribute(&stack, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, slot->reduce) !=
            CUDA_SUCCESS)
        binary = 0, stack = -1;
    if (d->ctx_get_limit == NULL || d->ctx_get_limit(&limit, CU_LIMIT_STACK_SIZE) != CUDA_SUCCESS)
        limit = 0;
    CUdevice device = -1;
    if (d->ctx_get_device(&device) != CUDA_SUCCESS) device = -1;
    int major = device_attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    int minor = device_attribute(d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    char code[96];
    if (binary <= 0)
        snprintf(code, sizeof code, "code of unknown architecture");
    else if (built_as_code(binary))
        snprintf(code, sizeof code, "the sm_%d code built for it", binary);
    else
        snprintf(code, sizeof code, "sm_%d code the driver compiled from the embedded PTX", binary);
    if (stack >= 0 && limit > 0 && (size_t)stack > limit) {
        char text[256];
        snprintf(text, sizeof text,
                 "the kernel needs %d bytes of stack a thread, above this context's %zu "
                 "(cudaLimitStackSize): its first launch would grow local memory for the whole "
                 "device",
                 stack, limit);
        log_host_path(d, text, CUDA_SUCCESS);
        return 0;
    }
    reprod_log(REPROD_LOG_INFO,
               "device kernels loaded: device reductions run on the GPU (device %d, compute "
               "%d.%d, %s; %d bytes of stack a thread, limit %zu; %d multiprocessors)",
               device, major, minor, code, stack, limit, multiprocessors);
    return 1;
}
#endif

/* Load the kernels into the current context `context` and fill `slot` (not yet published). */
static void slot_load(const struct reprod_cuda_driver *d, CUcontext context,
                      struct module_slot *slot)
{
    (void)context;
#if defined(REPROD_HAVE_KERNELS)
    CUmodule module = NULL;
    int mode = CU_STREAM_CAPTURE_MODE_RELAXED; /* a capture on another stream must not object */
    int exchanged = d->thread_exchange_capture_mode(&mode) == CUDA_SUCCESS;
    CUresult rc = d->module_load_data(&module, reprod_cuda_image);
    if (exchanged) d->thread_exchange_capture_mode(&mode);
    if (rc != CUDA_SUCCESS) {
        slot->why = explain_load_failure(d, rc);
        atomic_store_explicit(&slot->state, SLOT_FAILED, memory_order_release);
        return;
    }
    rc = d->module_get_function(&slot->reduce, module, REPROD_KERNEL_NAME);
    if (rc == CUDA_SUCCESS)
        rc = d->module_get_function(&slot->pointers, module, REPROD_KERNEL_POINTERS_NAME);
    if (rc == CUDA_SUCCESS)
        rc = d->module_get_function(&slot->fixed, module, REPROD_KERNEL_FIXED_NAME);
    if (rc != CUDA_SUCCESS) {
        log_host_path(d, "the device kernels do not load in this context", rc);
        slot->why = "kernels-do-not-load";
        atomic_store_explicit(&slot->state, SLOT_FAILED, memory_order_release);
        return;
    }
    int multiprocessors = device_attribute(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    slot->max_blocks =
        multiprocessors > 0 ? (unsigned)multiprocessors * BLOCKS_PER_SM : BLOCKS_IF_UNKNOWN;
    if (!kernels_fit(d, slot, multiprocessors)) {
        slot->why = "stack-over-limit";
        atomic_store_explicit(&slot->state, SLOT_FAILED, memory_order_release);
        return;
    }
    atomic_store_explicit(&slot->state, SLOT_READY, memory_order_release);
#else
    log_host_path(d, "this shim was built without nvcc", CUDA_SUCCESS);
    slot->why = "built-without-nvcc";
    atomic_store_explicit(&slot->state, SLOT_FAILED, memory_order_release);
#endif
}

/* The slot of the current context `context`, loading the kernels when `may_load`; NULL when
 * not loaded (yet) or the table is full. */
static struct module_slot *slot_of(const struct reprod_cuda_driver *d, CUcontext context,
                                   int may_load)
{
    unsigned long long key = context_key(d, context);
    struct module_slot *slot = slot_find(key);
    if (REPROD_LIKELY(slot != NULL) || !may_load) return slot;
    table_lock_take();
    int self = (int)getpid();
    if (atomic_load_explicit(&table_pid, memory_order_acquire) != self) { /* fork child */
        for (int i = 0; i < MODULE_SLOTS; i++)
            atomic_store(&slots[i].state, SLOT_EMPTY);
        atomic_store(&slots_used, 0);
        atomic_store_explicit(&table_pid, self, memory_order_release);
    }
    slot = slot_find(key); /* loaded by another thread meanwhile? */
    int used = atomic_load(&slots_used);
    if (slot == NULL && used < MODULE_SLOTS) {
        slot = &slots[used];
        atomic_store_explicit(&slot->key, key, memory_order_relaxed);
        slot_load(d, context, slot);
        atomic_store_explicit(&slots_used, used + 1, memory_order_release);
    } else if (slot == NULL) {
        log_host_path(d, "more CUDA contexts than the shim keeps kernels for", CUDA_SUCCESS);
    }
    table_lock_release();
    return slot;
}

int reprod_cuda_kernels_loaded(int device)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    struct reprod_cuda_scope scope;
    if (d == NULL || reprod_cuda_enter(d, NULL, device, &scope) != CUDA_SUCCESS) return 0;
    struct module_slot *slot = scope.context != NULL ? slot_of(d, scope.context, 1) : NULL;
    reprod_cuda_leave(d, &scope);
    return slot != NULL && atomic_load_explicit(&slot->state, memory_order_acquire) == SLOT_READY;
}

/* Blocks for `work_items` items of one thread each, at most `cap`. */
static unsigned grid_blocks(uint64_t work_items, unsigned cap)
{
    uint64_t blocks = (work_items + BLOCK_THREADS - 1) / BLOCK_THREADS;
    if (blocks > cap) blocks = cap;
    return blocks < 1 ? 1 : (unsigned)blocks;
}

static atomic_flag logged_launch_failure = ATOMIC_FLAG_INIT;

CUresult reprod_cuda_launch(const struct reprod_cuda_driver *d, CUcontext context, CUstream stream,
                            const struct reprod_kernel_args *args, int capturing, const char **why)
{
    struct module_slot *slot = slot_of(d, context, !capturing);
    if (slot == NULL) {
        *why = capturing ? "captured-before-kernels-loaded" : "too-many-contexts";
        return REPROD_CUDA_UNAVAILABLE;
    }
    if (atomic_load_explicit(&slot->state, memory_order_acquire) != SLOT_READY) {
        *why = slot->why;
        return REPROD_CUDA_UNAVAILABLE;
    }
    struct reprod_kernel_args copy = *args; /* cuLaunchKernel copies the parameter at the call */
    void *parameters[1] = {&copy};
    CUresult rc = CUDA_SUCCESS;
    if (copy.pointers != NULL)
        rc = d->launch_kernel(slot->pointers, grid_blocks((uint64_t)copy.count, slot->max_blocks),
                              1, 1, BLOCK_THREADS, 1, 1, 0, stream, parameters, NULL);
    if (rc == CUDA_SUCCESS)
        rc = d->launch_kernel(slot->reduce, grid_blocks(copy.elements, slot->max_blocks), 1, 1,
                              BLOCK_THREADS, 1, 1, 0, stream, parameters, NULL);
    if (rc != CUDA_SUCCESS) {
        *why = "launch-failed";
        if (!atomic_flag_test_and_set(&logged_launch_failure))
            reprod_log(REPROD_LOG_WARN,
                       "warning: a launch of the device kernels failed (%s, %d): that reduction "
                       "ran on the host (slower, the same bits)",
                       reprod_cuda_error_name(d, rc), rc);
    }
    return rc;
}

CUresult reprod_cuda_launch_fixed(const struct reprod_cuda_driver *d, CUcontext context,
                                  CUstream stream, const struct reprod_fixed_args *args,
                                  int capturing, const char **why)
{
    struct module_slot *slot = slot_of(d, context, !capturing);
    if (slot == NULL) {
        *why = capturing ? "captured-before-kernels-loaded" : "too-many-contexts";
        return REPROD_CUDA_UNAVAILABLE;
    }
    if (atomic_load_explicit(&slot->state, memory_order_acquire) != SLOT_READY) {
        *why = slot->why;
        return REPROD_CUDA_UNAVAILABLE;
    }
    struct reprod_fixed_args copy = *args;
    void *parameters[1] = {&copy};
    CUresult rc =
        d->launch_kernel(slot->fixed, grid_blocks(reprod_fixed_threads(&copy), slot->max_blocks), 1,
                         1, BLOCK_THREADS, 1, 1, 0, stream, parameters, NULL);
    if (rc != CUDA_SUCCESS) *why = "launch-failed";
    return rc;
}

/* ---- Which path ran ----------------------------------------------------------------------- */

static _Atomic unsigned long long kernel_reductions, host_reductions;
static _Atomic(const char *) first_host_reason; /* see reprod_cuda_count_path */

void reprod_cuda_count_path(const char *why)
{
    if (why == NULL) {
        atomic_fetch_add_explicit(&kernel_reductions, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&host_reductions, 1, memory_order_relaxed);
    /* The first reason, except that a device's own reason replaces a caller's choice (no work
     * memory for more than REPROD_KERNEL_LOCAL_POINTERS contributions). */
    const char *seen = atomic_load(&first_host_reason);
    while ((seen == NULL || (strcmp(seen, "no-pointer-array") == 0 && strcmp(why, seen) != 0)) &&
           !atomic_compare_exchange_weak(&first_host_reason, &seen, why))
        ;
}

const char *reprod_cuda_path_word(void)
{
    static char word[64];
    int kernels = atomic_load(&kernel_reductions) > 0, host = atomic_load(&host_reductions) > 0;
    if (!kernels && !host) return NULL;
    const char *why = atomic_load(&first_host_reason);
    snprintf(word, sizeof word, "%s%s%s%s", kernels ? "kernels" : "", kernels && host ? "+" : "",
             host ? "host:" : "", host && why ? why : "");
    return word;
}
