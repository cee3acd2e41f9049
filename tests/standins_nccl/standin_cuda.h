/* What the CUDA stand-in's files share, and what libcudart.so and libnccl.so.2 (the other
 * stand-ins) call in libcuda.so.1 besides the driver API. Device memory is host memory; each
 * stream is a worker thread that runs its work in order. Test use only: never in the shim. */
#ifndef STANDIN_CUDA_H
#define STANDIN_CUDA_H

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

/* One unit of stream work: `run` is called when the stream reaches it (on a graph, once per
 * launch); `release` (may be NULL) frees `arg` when the work is done with for good. */
typedef void standin_work_fn(void *arg);

/* Enqueue work on `stream` (NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the legacy
 * stream of the calling thread's device). While the stream is being captured, the work is
 * appended to the capture's graph instead and the graph owns `arg`. On success `arg` belongs to
 * the stand-in; on an error the caller keeps it. */
CUresult standin_stream_enqueue(CUstream stream, standin_work_fn *run, void *arg, standin_work_fn *release);

/* The device of `stream` (as above), or -1 for an invalid handle. */
int standin_stream_device(CUstream stream);

/* Called by every runtime entry point: from then on a thread without a current context gets
 * the primary context of its device, as the runtime binds it. */
void standin_runtime_used(void);

/* The calling thread's current device (0 when none was set). */
int standin_current_device(void);

/* The number of devices: the entries of CUDA_VISIBLE_DEVICES when set, else 8. */
int standin_device_count(void);

/* The CUDA version the driver supports (cuDriverGetVersion): the toolkit's (CUDA_VERSION), or
 * STANDIN_CUDA_DRIVER_VERSION. A driver older than the toolkit loads no module (the images are
 * taken to be built by this toolkit, as the shim's kernels are): CUDA_ERROR_UNSUPPORTED_PTX_VERSION. */
int standin_driver_version(void);

/* The most bytes of stream-ordered device memory (cuMemAllocAsync) held at once so far: an
 * allocation counts until its cuMemFreeAsync is called (the pool may reuse it in stream order
 * from then on). For tests that bound a library's scratch. */
size_t standin_async_memory_peak(void);

/* ---- internal to libcuda.so.1 ---- */

/* Fault injection for tests: 1 when the setting `variable` names this process's rank
 * (OMPI_COMM_WORLD_RANK). */
int scuda_fault_here(const char *variable);

/* A set of live handles, so that a destroyed or made-up handle gives an error, not a crash. */
void scuda_handle_add(const void *handle);
void scuda_handle_remove(const void *handle);
int scuda_handle_live(const void *handle);

/* Bind the calling thread (a stream worker) to `device`'s primary context. */
void scuda_bind_device(int device);

/* Wait for every stream of `device` (-1: every device) to finish its work so far. */
CUresult scuda_synchronize_device(int device);

/* Allocation table, for cuPointerGetAttribute and for frees. */
enum scuda_memory_kind { SCUDA_DEVICE = 1, SCUDA_HOST = 2 };
CUresult scuda_memory_alloc(void **ptr, size_t bytes, enum scuda_memory_kind kind);
CUresult scuda_memory_free(void *ptr, enum scuda_memory_kind kind);
/* Record memory at `base` (`reserved` device bytes behind it; `pooled`: a pool's block). */
CUresult scuda_memory_record(void *base, size_t bytes, enum scuda_memory_kind kind, int device, size_t reserved,
                             int pooled);
/* Take the entry of `ptr` out of the table without freeing it: 1 with what it held, or 0. */
int scuda_memory_remove(void *ptr, enum scuda_memory_kind kind, size_t *reserved, int *device, int *pooled);

/* Device capacity (cuda_pool.c): STANDIN_DEVICE_MEMORY_MB per device (default 80 GiB). Every
 * device allocation and every pool block holds its bytes until released. */
size_t scuda_device_total_bytes(void);
size_t scuda_device_used_bytes(int device);
int scuda_device_reserve(int device, size_t bytes); /* 1, or 0 when the device is full */
void scuda_device_unreserve(int device, size_t bytes);
/* A pool block back into its device's default pool (kept, not released). */
void scuda_pool_give_back(int device, void *base, size_t reserved);
/* At a synchronisation on `device` (-1: every device): each pool releases its free blocks down to
 * its release threshold (0 unless set), as CUDA's pools do. */
void scuda_pool_release_at_sync(int device);

/* A kernel that touched device memory of another device than its stream's (no peer access) made
 * `device` fault: the sticky error of its later synchronisations and launches, or CUDA_SUCCESS. */
CUresult scuda_device_fault(int device);
void scuda_device_set_fault(int device);
/* Finds the allocation holding `ptr`: 1 with its base, size, kind and device, or 0. */
int scuda_memory_find(const void *ptr, void **base, size_t *bytes, enum scuda_memory_kind *kind, int *device);

/* The context object of `device` (never NULL for a valid device). */
CUcontext scuda_primary_context(int device);

#endif
