/* cuda.h: the CUDA driver API as the shim uses it, loaded at run time, and the shim's device
 * arithmetic: the exact (or ordered) reduction of N contributions in device memory, enqueued
 * on a stream, from the same arithmetic source as the host engine.
 *
 * Nothing here links against CUDA: libcuda.so.1 is found among the loaded objects when the
 * application uses CUDA (the shim never loads it itself). The kernels are built by nvcc into
 * the shim when it was present at build time; otherwise, or when they cannot be loaded for the
 * current context, the same reduction runs on the host, in stream order (device-to-host copy,
 * host engine, host-to-device copy), with bitwise the same result, and the log says so once.
 */
#ifndef REPROD_CUDA_H
#define REPROD_CUDA_H

#include "reprod.h"

#include <stddef.h>
#include <stdint.h>

/* A CUDA stream (cudaStream_t and CUstream are the same handle); NULL is the legacy default
 * stream. */
typedef struct CUstream_st *reprod_stream;

/* Status of every function below: 0 on success, else a CUresult-like nonzero code. */
enum {
    REPROD_CUDA_OK = 0,
    REPROD_CUDA_UNAVAILABLE = -1,  /* CUDA is not loaded, or lacks a function the shim needs */
    REPROD_CUDA_INVALID_VALUE = 1, /* an argument is out of range (CUDA_ERROR_INVALID_VALUE) */
};

/* 1 when the process uses CUDA (libcuda.so.1 is loaded and initialised) and the functions the
 * shim needs were found; thread-safe, cheap after the first call. */
int reprod_cuda_ready(void);

/* Why the shim cannot use CUDA, for a pass-through's log line: "no CUDA driver in the process",
 * or "the CUDA driver lacks cuMemAllocAsync" (a required function, by name); NULL when
 * reprod_cuda_ready(). */
const char *reprod_cuda_unready_reason(void);

/* Where the work of each call below runs. `device` is the device the work is done for (an NCCL
 * communicator's, ncclCommCuDevice), or REPROD_CUDA_CURRENT_DEVICE. A call on a default stream
 * (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) runs in that device's primary context, whatever
 * device the calling thread has current (NCCL resolves such a stream on its communicator's
 * device); the caller's context is current again when the call returns. A created stream's
 * work runs in the stream's own context. */
#define REPROD_CUDA_CURRENT_DEVICE (-1)

/* The calling thread's current device (its current context's), or REPROD_CUDA_CURRENT_DEVICE
 * when it has none or CUDA is not ready. */
int reprod_cuda_current_device(void);

/* 1 when the device kernels are built into the shim and loaded for `device`'s context (the
 * calling thread's current context for REPROD_CUDA_CURRENT_DEVICE), else reductions take the
 * host path. Loads them on the first call for a context: call it when a communicator is
 * created, outside any graph capture (a reduction on a capturing stream never loads them: it
 * takes the host path until they are loaded). */
int reprod_cuda_kernels_loaded(int device);

/* Memory for a reduction's data path, in stream order, where there is room: the device's
 * stream-ordered pool (cuMemAllocAsync on `stream`); when the device is full, the same after
 * trimming the pool (cuMemPoolTrimTo: its free blocks go back to the device); then pinned host
 * memory that the devices reach at the same address (slower; logged once). The choice changes
 * only where this process's scratch lives, never its size: peers see the same calls. Free it
 * with reprod_cuda_scratch_free (in stream order), which knows which it was. */
int reprod_cuda_scratch_alloc(void **pointer, size_t bytes, reprod_stream stream, int device);
int reprod_cuda_scratch_free(void *pointer, reprod_stream stream, int device);

/* Copy `bytes` bytes in stream order, any direction (unified addressing: cuMemcpyAsync). */
int reprod_cuda_copy_async(void *destination, const void *source, size_t bytes,
                           reprod_stream stream, int device);

/* 1 in *capturing when `stream` is being captured into a graph (cuStreamIsCapturing; an
 * invalidated capture counts as capturing). */
int reprod_cuda_capturing(reprod_stream stream, int device, int *capturing);

/* Wait until `stream` has done all its work (cuStreamSynchronize). For tests, tools and
 * tracing (REPROD_TRACE hashes device data in stream order): the data path never waits. */
int reprod_cuda_stream_sync(reprod_stream stream, int device);

/* Where this process's device reductions ran, as one word for the counts line (`reprod
 * doctor`): NULL when none ran; "kernels"; "host:<why>" (e.g. host:driver-older-than-kernels,
 * host:built-without-nvcc); "kernels+host:<why>" when both did. */
const char *reprod_cuda_path_word(void);

/* PreMulSum: how each contribution is scaled before the sum (NCCL multiplies every
 * contribution by the scalar in its type, rounded to nearest). */
enum reprod_premul {
    REPROD_PREMUL_NONE = 0,
    REPROD_PREMUL_HOST,   /* scalar_bits holds the scalar's bit pattern, read at the call */
    REPROD_PREMUL_DEVICE, /* scalar_device points to it in device memory, read in stream order */
};

/* One reduction on the device: contribution k (0 <= k < count) is `elements` elements at
 * blocks + k * block_stride_bytes, except contribution own_index (when >= 0), which is at
 * `own`. The result goes to `out` (it may be own, or the last block, but overlaps no other
 * contribution). `work` is device memory of reprod_cuda_reduce_work_bytes() bytes for the
 * kernel's own use (a pointer array, scaled copies: whatever the implementation needs). */
struct reprod_device_reduction {
    reprod_type type;
    reprod_op op;             /* REPROD_SUM or REPROD_AVG; REPROD_PROD when ordered */
    reprod_rounding rounding; /* exact mode */
    int ordered;              /* 1: the rank-order fold (REPROD_MODE=ordered), not exact */
    int count;                /* contributions N >= 1 */
    size_t elements;          /* elements per contribution (complex: twice the count) */
    const void *blocks;
    size_t block_stride_bytes;
    const void *own;
    int own_index;
    void *out;
    void *work;
    enum reprod_premul premul;
    uint64_t scalar_bits;      /* REPROD_PREMUL_HOST */
    const void *scalar_device; /* REPROD_PREMUL_DEVICE */
};

/* Device bytes reprod_cuda_reduce needs in `work` for `reduction` (its work field unset):
 * count * sizeof(void *) for more than 32 contributions (the kernel's pointer array, filled in
 * stream order by a first small kernel), else 0 (work may then be NULL). Without it the
 * reduction still runs, on the host path. */
size_t reprod_cuda_reduce_work_bytes(const struct reprod_device_reduction *reduction);

/* Enqueue the reduction on `stream`: asynchronous, capturable into a CUDA graph, no host
 * synchronisation. PreMulSum multiplies each contribution (read, never written) by the scalar
 * in its type, rounded to nearest, before the exact sum (or the ordered fold). It runs in the
 * context `stream` and `device` name (above). Device kernels when loaded for that context,
 * else the host path (pinned staging, host engine, in stream order): the same bits.
 * Returns REPROD_CUDA_OK; REPROD_CUDA_INVALID_VALUE for bad arguments, REPROD_CUDA_UNAVAILABLE
 * without CUDA, or the driver's error (then a part may have been enqueued, e.g. a copy). */
int reprod_cuda_reduce(reprod_stream stream, int device,
                       const struct reprod_device_reduction *reduction);

/* ---- The fixed-point route (engine_fixed.h): its stages on the device -------------------
 * One stage over `elements` elements (cuda_kernel_fixed.h says what each reads and writes),
 * enqueued on `stream` like reprod_cuda_reduce: the kernels when loaded, else the host path
 * (the same bits), asynchronous and capturable. */
enum reprod_device_fixed_stage {
    REPROD_DEVICE_FIXED_CODES = 0,  /* terms -> codes; clears max_words's two cells */
    REPROD_DEVICE_FIXED_MAX_WORDS,  /* reduced codes -> max_words (the layout) */
    REPROD_DEVICE_FIXED_SPLIT,      /* terms, reduced codes -> words (`stride` an element) */
    REPROD_DEVICE_FIXED_ROUND,      /* reduced codes, summed words -> out */
    REPROD_DEVICE_FIXED_FULL_SPLIT, /* terms -> whole-range words (`stride` = full words) */
    REPROD_DEVICE_FIXED_FULL_ROUND, /* summed whole-range words -> out */
    REPROD_DEVICE_FIXED_LAYOUT,     /* reduced codes -> each block's words (per-element) */
    REPROD_DEVICE_FIXED_GROUPS,     /* blocks' words -> groups' */
    REPROD_DEVICE_FIXED_TOTAL,      /* groups' -> the unit and T (cells), groups' first words */
    REPROD_DEVICE_FIXED_OFFSETS,    /* each block's first word */
    REPROD_DEVICE_FIXED_PACK,       /* codes -> the wire in `out` (what the MAX reduces) */
    REPROD_DEVICE_FIXED_UNPACK,     /* the reduced wire in `out` -> the reduced codes */
};

struct reprod_device_fixed {
    enum reprod_device_fixed_stage stage;
    reprod_type type;
    reprod_op op; /* REPROD_SUM or REPROD_AVG */
    reprod_rounding rounding;
    int ranks;  /* contributions summed by the library */
    int stride; /* words an element in `words` */
    int narrow; /* MAX_WORDS, SPLIT, ROUND: int32 words (cuda_kernel_fixed.h) */
    size_t elements;
    const void *terms;
    size_t terms_block;  /* 0: contiguous terms; else blocks of this many elements, */
    size_t terms_stride; /* block b at terms + b * terms_stride elements */
    uint8_t *codes;
    int64_t *words;
    void *out;          /* ROUND, FULL_ROUND: the results; PACK, UNPACK: the wire */
    int32_t *max_words; /* REPROD_DEVICE_FIXED_CELLS int32 of device memory */
    /* The per-element layout (AllReduce, Reduce): `layout` is device memory of
     * reprod_device_fixed_layout_bytes(elements); SPLIT and ROUND with it set take the words
     * [word_first, word_end) of the piece's word_total (in `words`, from its start), `sub`
     * the sub-piece's index. NULL: the stride layout. */
    uint64_t *layout;
    size_t word_first, word_end, word_total;
    int sub;
};

/* MAX_WORDS's cells (and LAYOUT's): the most int64 words an element takes, and with `narrow`
 * set the most narrow (int32) words or REPROD_DEVICE_FIXED_NARROW_NONE;
 * reprod_device_fixed_layout (the kernels' own rule, cuda_kernel_fixed.h) says which words a
 * piece takes. TOTAL's: the per-element layout's unit and T, read by
 * reprod_device_fixed_total. */
#define REPROD_DEVICE_FIXED_CELLS       5
#define REPROD_DEVICE_FIXED_NARROW_MOST 8
#define REPROD_DEVICE_FIXED_NARROW_NONE 255
/* The most words an element takes (int64 ones): a sub-piece but the last holds at least this
 * many. */
#define REPROD_DEVICE_FIXED_WORDS_MOST 54

/* Bytes of the per-element layout's array for a piece of `elements` elements. */
size_t reprod_device_fixed_layout_bytes(size_t elements);

/* The per-element layout's T, in narrow words (*narrow = 1) or int64 ones. */
uint64_t reprod_device_fixed_total(const int32_t cells[REPROD_DEVICE_FIXED_CELLS], int *narrow);

/* 1 where the piece takes narrow words, *stride of them an element; else 0, *stride int64
 * words an element. `probe`: MAX_WORDS ran with `narrow` set. */
int reprod_device_fixed_layout(const int32_t cells[REPROD_DEVICE_FIXED_CELLS], int probe,
                               int *stride);

int reprod_cuda_fixed(reprod_stream stream, int device, const struct reprod_device_fixed *stage);

/* Read the REPROD_DEVICE_FIXED_CELLS int32 at `device_cells` back in stream order, without
 * waiting: once the stream has passed this point, a host function calls done(owner, cells) (on
 * a CUDA thread: it must only publish them). Not under graph capture (a replay would call it
 * again). */
int reprod_cuda_readback(reprod_stream stream, int device, const int32_t *device_cells,
                         void (*done)(void *owner, const int32_t *cells), void *owner);

#endif /* REPROD_CUDA_H */
