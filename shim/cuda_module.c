/* cuda_module.c: the device kernels embedded in the shim (REPROD_HAVE_KERNELS: a fatbin that
 * nvcc built from cuda_kernels.cu, in cuda_image.S), loaded once per CUDA context, and their
 * launch. Without them, or when a context cannot load them, reductions take the host path and
 * the log says so once.
 */
#include "common.h"
#include "cuda.h"
#include "cuda_driver.h"
#include "cuda_kernel.h"
#include "log.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

/* ---- Configuration ---------------------------------------------------------------------- */

#define MODULE_SLOTS       64  /* contexts a process can have the kernels loaded in */
#define BLOCK_THREADS      256 /* threads per block */
#define BLOCKS_PER_SM      4   /* grid cap: 4 blocks of 256 per multiprocessor keep it full */
#define BLOCKS_IF_UNKNOWN  1024 /* grid cap when the multiprocessor count is unknown */

#if defined(REPROD_HAVE_KERNELS)
extern const unsigned char reprod_cuda_image[]; /* cuda_image.S */
#endif

enum slot_state { SLOT_EMPTY = 0, SLOT_READY, SLOT_FAILED };

/* One context's kernels. A slot is written once, under the table lock, then published by its
 * state (release); readers need no lock. */
struct module_slot {
    _Atomic unsigned long long key; /* the context's id + 1 (or its address) */
    _Atomic int state;              /* enum slot_state */
    CUfunction reduce;
    CUfunction pointers;
    unsigned max_blocks;
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
static void log_host_path(const char *why, int code)
{
    if (atomic_flag_test_and_set(&logged_unavailable)) return;
    if (code != 0)
        reprod_log(REPROD_LOG_WARN,
                   "device reductions run on the host (slower, the same bits): %s (CUDA error %d)",
                   why, code);
    else
        reprod_log(REPROD_LOG_WARN, "device reductions run on the host (slower, the same bits): %s",
                   why);
}

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
    if (rc == CUDA_SUCCESS) rc = d->module_get_function(&slot->reduce, module, REPROD_KERNEL_NAME);
    if (rc == CUDA_SUCCESS)
        rc = d->module_get_function(&slot->pointers, module, REPROD_KERNEL_POINTERS_NAME);
    if (rc != CUDA_SUCCESS) {
        log_host_path("the device kernels do not load in this context (driver or GPU too old?)",
                      rc);
        atomic_store_explicit(&slot->state, SLOT_FAILED, memory_order_release);
        return;
    }
    CUdevice device;
    int multiprocessors = 0;
    if (d->ctx_get_device(&device) != CUDA_SUCCESS ||
        d->device_get_attribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                device) != CUDA_SUCCESS ||
        multiprocessors <= 0)
        multiprocessors = 0;
    slot->max_blocks =
        multiprocessors > 0 ? (unsigned)multiprocessors * BLOCKS_PER_SM : BLOCKS_IF_UNKNOWN;
    reprod_log(REPROD_LOG_INFO, "device kernels loaded (%d multiprocessors)", multiprocessors);
    atomic_store_explicit(&slot->state, SLOT_READY, memory_order_release);
#else
    (void)d;
    log_host_path("this shim was built without nvcc", 0);
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
        log_host_path("more CUDA contexts than the shim keeps kernels for", 0);
    }
    table_lock_release();
    return slot;
}

int reprod_cuda_kernels_loaded(void)
{
    const struct reprod_cuda_driver *d = reprod_cuda_driver();
    CUcontext context = NULL;
    if (d == NULL || d->ctx_get_current(&context) != CUDA_SUCCESS || context == NULL) return 0;
    struct module_slot *slot = slot_of(d, context, 1);
    return slot != NULL && atomic_load_explicit(&slot->state, memory_order_acquire) == SLOT_READY;
}

/* Blocks for `work_items` items of one thread each, at most `cap`. */
static unsigned grid_blocks(uint64_t work_items, unsigned cap)
{
    uint64_t blocks = (work_items + BLOCK_THREADS - 1) / BLOCK_THREADS;
    if (blocks > cap) blocks = cap;
    return blocks < 1 ? 1 : (unsigned)blocks;
}

CUresult reprod_cuda_launch(const struct reprod_cuda_driver *d, CUcontext context,
                            CUstream stream, const struct reprod_kernel_args *args,
                            int capturing)
{
    struct module_slot *slot = slot_of(d, context, !capturing);
    if (slot == NULL || atomic_load_explicit(&slot->state, memory_order_acquire) != SLOT_READY)
        return REPROD_CUDA_UNAVAILABLE;
    struct reprod_kernel_args copy = *args; /* cuLaunchKernel copies the parameter at the call */
    void *parameters[1] = {&copy};
    CUresult rc;
    if (copy.pointers != NULL) {
        rc = d->launch_kernel(slot->pointers, grid_blocks((uint64_t)copy.count, slot->max_blocks),
                              1, 1, BLOCK_THREADS, 1, 1, 0, stream, parameters, NULL);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return d->launch_kernel(slot->reduce, grid_blocks(copy.elements, slot->max_blocks), 1, 1,
                            BLOCK_THREADS, 1, 1, 0, stream, parameters, NULL);
}
