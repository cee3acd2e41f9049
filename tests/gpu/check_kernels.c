/* check_kernels.c: the shim's device arithmetic (shim/cuda*.c) through the real CUDA driver,
 * on a machine with a GPU (make test-gpu; CI never runs it). Loads libcuda itself, as an
 * application would, and checks against the host engine bitwise: the kernel path and the host
 * path (N > 32 without work memory) for every type, op and rounding on adversarial data; a
 * captured graph replayed on new data; the device full (a caching allocator holding nearly
 * all of it, CUDA's pool holding free blocks too small): the shim's scratch after a trim of
 * the pool, then in pinned host memory, a reduction on it, and the kernels still launching
 * (their stack fits the default: the per-thread stack limit never grows); and the kernel's
 * throughput as a fraction of cuMemcpyDtoD bandwidth for binary32 N=8 (target >= 0.6). The
 * fixed-point route's stages (shim/device/cuda_kernel_fixed.h) against the host engine's arrays
 * (reprod_engine_fixed_*) and its exact sum, N ranks simulated on the one device (the MAX of
 * the codes and the int64 SUM of the words done on the host, as NCCL would), both layouts, and
 * the readback of the words an element; narrow int32 words: one for the 16-bit types up to 1,024
 * ranks and for binary32 at 2 and 5, three for binary64 at 2 - 40; the per-element layout
 * (each element its own words, in sub-pieces that elements straddle).
 * Exit status 0 when all match and the kernels ran; with --any-path (CUDA_FORCE_PTX_JIT=1
 * runs), 0 when all match whichever path ran. 77 without a driver.
 */
#include "device/cuda.h"
#include "engine/engine.h"
#include "reprod.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef void *handle;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(handle *, int);
static CUresult (*cuCtxSetCurrent)(handle);
static CUresult (*cuStreamCreate)(handle *, unsigned);
static CUresult (*cuStreamBeginCapture)(handle, int);
static CUresult (*cuStreamEndCapture)(handle, handle *);
static CUresult (*cuGraphInstantiate)(handle *, handle, unsigned long long);
static CUresult (*cuGraphLaunch)(handle, handle);
static CUresult (*cuEventCreate)(handle *, unsigned);
static CUresult (*cuEventRecord)(handle, handle);
static CUresult (*cuEventSynchronize)(handle);
static CUresult (*cuEventElapsedTime)(float *, handle, handle);
static CUresult (*cuMemGetInfo)(size_t *, size_t *);
static CUresult (*cuMemAlloc)(unsigned long long *, size_t);
static CUresult (*cuMemFree)(unsigned long long);
static CUresult (*cuMemAllocAsync)(unsigned long long *, size_t, handle);
static CUresult (*cuMemFreeAsync)(unsigned long long, handle);
static CUresult (*cuStreamSynchronize)(handle);
static CUresult (*cuDeviceGetDefaultMemPool)(handle *, int);
static CUresult (*cuMemPoolSetAttribute)(handle, int, void *);
static CUresult (*cuMemPoolTrimTo)(handle, size_t);
static CUresult (*cuPointerGetAttribute)(void *, int, unsigned long long);
static CUresult (*cuCtxGetLimit)(size_t *, int);

#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD  4
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE   2
#define CU_MEMORYTYPE_HOST                 1
#define CU_MEMORYTYPE_DEVICE               2
#define CU_LIMIT_STACK_SIZE                0
#define MIB                                ((size_t)1 << 20)

static int failures;

#define DEVICE REPROD_CUDA_CURRENT_DEVICE /* the context main makes current */

#define CHECK(call)                                                                                \
    do {                                                                                           \
        long rc_ = (long)(call);                                                                   \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: %s failed: %ld\n", __FILE__, __LINE__, #call, rc_);           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void *symbol(void *library, const char *name)
{
    void *address = dlsym(library, name);
    if (address == NULL) {
        fprintf(stderr, "check_kernels: libcuda lacks %s\n", name);
        exit(1);
    }
    return address;
}

static void load_driver(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (cuda == NULL) {
        fprintf(stderr, "check_kernels: no libcuda.so.1 (%s)\n", dlerror());
        exit(77);
    }
    *(void **)&cuInit = symbol(cuda, "cuInit");
    *(void **)&cuDeviceGet = symbol(cuda, "cuDeviceGet");
    *(void **)&cuDevicePrimaryCtxRetain = symbol(cuda, "cuDevicePrimaryCtxRetain");
    *(void **)&cuCtxSetCurrent = symbol(cuda, "cuCtxSetCurrent");
    *(void **)&cuStreamCreate = symbol(cuda, "cuStreamCreate");
    *(void **)&cuStreamBeginCapture = symbol(cuda, "cuStreamBeginCapture_v2");
    *(void **)&cuStreamEndCapture = symbol(cuda, "cuStreamEndCapture");
    *(void **)&cuGraphInstantiate = symbol(cuda, "cuGraphInstantiateWithFlags");
    *(void **)&cuGraphLaunch = symbol(cuda, "cuGraphLaunch");
    *(void **)&cuEventCreate = symbol(cuda, "cuEventCreate");
    *(void **)&cuEventRecord = symbol(cuda, "cuEventRecord");
    *(void **)&cuEventSynchronize = symbol(cuda, "cuEventSynchronize");
    *(void **)&cuEventElapsedTime = symbol(cuda, "cuEventElapsedTime_v2");
    *(void **)&cuMemGetInfo = symbol(cuda, "cuMemGetInfo_v2");
    *(void **)&cuMemAlloc = symbol(cuda, "cuMemAlloc_v2");
    *(void **)&cuMemFree = symbol(cuda, "cuMemFree_v2");
    *(void **)&cuMemAllocAsync = symbol(cuda, "cuMemAllocAsync");
    *(void **)&cuMemFreeAsync = symbol(cuda, "cuMemFreeAsync");
    *(void **)&cuStreamSynchronize = symbol(cuda, "cuStreamSynchronize");
    *(void **)&cuDeviceGetDefaultMemPool = symbol(cuda, "cuDeviceGetDefaultMemPool");
    *(void **)&cuMemPoolSetAttribute = symbol(cuda, "cuMemPoolSetAttribute");
    *(void **)&cuMemPoolTrimTo = symbol(cuda, "cuMemPoolTrimTo");
    *(void **)&cuPointerGetAttribute = symbol(cuda, "cuPointerGetAttribute");
    *(void **)&cuCtxGetLimit = symbol(cuda, "cuCtxGetLimit");
}

static uint64_t rng_state = 12345;
static uint64_t next_random(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random bit patterns biased to the hard cases: cancellation, similar and wide exponents,
 * zeros, infinities, NaNs, subnormals. */
static void fill(reprod_type type, void *data, size_t elements, int count)
{
    size_t size = reprod_type_size(type);
    unsigned bits_total = (unsigned)size * 8;
    uint64_t mask = bits_total == 64 ? ~0ull : (1ull << bits_total) - 1;
    for (size_t i = 0; i < elements * (size_t)count; i++) {
        uint64_t r = next_random(), v;
        switch (r % 8) {
        case 0: v = 0; break;                                   /* +0 */
        case 1: v = next_random() & ((1ull << (bits_total - 9)) - 1); break; /* subnormal */
        case 2: v = i >= elements ? 0 : next_random(); break;
        default: v = next_random(); break;
        }
        if (i >= elements && r % 5 == 0) { /* the negation of contribution 0: cancellation */
            uint64_t first = 0;
            memcpy(&first, (char *)data + (i % elements) * size, size);
            v = first ^ (1ull << (bits_total - 1));
        }
        v &= mask;
        memcpy((char *)data + i * size, &v, size);
    }
}

/* One reduction on the device against the engine; `kernels`: give work memory (N > 32). */
static void check_case(handle stream, reprod_type type, reprod_op op, reprod_rounding dir,
                       int ordered, int count, size_t elements, int with_work)
{
    size_t size = reprod_type_size(type), bytes = size * elements * (size_t)count;
    unsigned char *host = malloc(bytes), *want = malloc(size * elements),
                  *got = malloc(size * elements);
    fill(type, host, elements, count);
    const void **pointers = malloc(sizeof(void *) * (size_t)count);
    for (int k = 0; k < count; k++)
        pointers[k] = host + (size_t)k * size * elements;
    int rc = ordered ? reprod_reduce_ordered(type, op, pointers, count, elements, want)
                     : reprod_reduce_exact(type, op, dir, pointers, count, elements, want);
    CHECK(rc);
    void *device = NULL, *out = NULL, *work = NULL;
    struct reprod_device_reduction r = {type, op, dir, ordered, count, elements, NULL,
                                        size * elements, NULL, -1, NULL, NULL,
                                        REPROD_PREMUL_NONE, 0, NULL};
    CHECK(reprod_cuda_scratch_alloc(&device, bytes, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&out, size * elements, stream, DEVICE));
    size_t work_bytes = reprod_cuda_reduce_work_bytes(&r);
    if (with_work && work_bytes) CHECK(reprod_cuda_scratch_alloc(&work, work_bytes, stream, DEVICE));
    CHECK(reprod_cuda_copy_async(device, host, bytes, stream, DEVICE));
    r.blocks = device, r.out = out, r.work = work;
    CHECK(reprod_cuda_reduce(stream, DEVICE, &r));
    CHECK(reprod_cuda_copy_async(got, out, size * elements, stream, DEVICE));
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    if (memcmp(want, got, size * elements) != 0) {
        failures++;
        fprintf(stderr, "MISMATCH type %d op %d dir %d ordered %d N %d work %d\n", type, op, dir,
                ordered, count, with_work);
    }
    reprod_cuda_scratch_free(device, stream, DEVICE);
    reprod_cuda_scratch_free(out, stream, DEVICE);
    if (work) reprod_cuda_scratch_free(work, stream, DEVICE);
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    free(host), free(want), free(got), free(pointers);
}

/* The readback's host function: the cells, and that they came. */
static void readback_arrived(void *owner, const int32_t *cells)
{
    int32_t *cell = owner;
    memcpy(cell, cells, REPROD_DEVICE_FIXED_CELLS * sizeof *cell);
    cell[REPROD_DEVICE_FIXED_CELLS] = 1;
}

/* Copy `bytes` to the host after the stream's work. */
static void fetch(void *host, const void *device, size_t bytes, handle stream)
{
    CHECK(reprod_cuda_copy_async(host, device, bytes, stream, DEVICE));
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
}

static void fixed_mismatch(const char *what, reprod_type type, reprod_op op, int dir, int ranks)
{
    failures++;
    fprintf(stderr, "MISMATCH fixed route: %s: type %d op %d dir %d N %d\n", what, type, op, dir,
            ranks);
}

/* The device areas of a fixed-route check (N ranks' terms, copied from `host`; the codes;
 * `word_bytes` of words; the results; K's cell) and the stage over them, CODES first. */
static struct reprod_device_fixed fixed_areas(handle stream, reprod_type type, reprod_op op,
                                              reprod_rounding dir, int ranks, size_t elements,
                                              size_t word_bytes, const void *host)
{
    size_t size = reprod_type_size(type), bytes = size * elements * (size_t)ranks;
    void *terms = NULL, *codes = NULL, *words = NULL, *out = NULL, *max_words = NULL;
    CHECK(reprod_cuda_scratch_alloc(&terms, bytes, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&codes, 2 * elements, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&words, word_bytes, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&out, size * elements, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&max_words, 256, stream, DEVICE));
    CHECK(reprod_cuda_copy_async(terms, host, bytes, stream, DEVICE));
    struct reprod_device_fixed stage = {.stage = REPROD_DEVICE_FIXED_CODES,
                                        .type = type,
                                        .op = op,
                                        .rounding = dir,
                                        .ranks = ranks,
                                        .stride = 1,
                                        .elements = elements,
                                        .terms = terms,
                                        .codes = codes,
                                        .words = words,
                                        .out = out,
                                        .max_words = max_words};
    return stage;
}

/* Rank k's terms of the areas whose first rank's are at `terms`. */
static const void *rank_terms(const struct reprod_device_fixed *stage, const void *terms, int k)
{
    return (const char *)terms + (size_t)k * reprod_type_size(stage->type) * stage->elements;
}

static void fixed_areas_free(handle stream, const struct reprod_device_fixed *stage,
                             const void *terms)
{
    reprod_cuda_scratch_free((void *)(uintptr_t)terms, stream, DEVICE);
    reprod_cuda_scratch_free(stage->codes, stream, DEVICE);
    reprod_cuda_scratch_free(stage->words, stream, DEVICE);
    reprod_cuda_scratch_free(stage->out, stream, DEVICE);
    reprod_cuda_scratch_free(stage->max_words, stream, DEVICE);
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
}

/* Each simulated rank's codes (CODES; with `host` set, checked against the host engine's for
 * its terms there), packed on the device (PACK, checked against the host's pack of them), the
 * MAX of the wire as ncclMax would take it, and that unpacked on the device (UNPACK) into the
 * stage's codes, checked against the host's unpack: max_codes gets the reduced codes. */
static void reduced_codes(handle stream, struct reprod_device_fixed *stage, const void *terms,
                          const unsigned char *host, uint8_t *codes, uint8_t *max_codes)
{
    size_t elements = stage->elements, size = reprod_type_size(stage->type);
    size_t wire_bytes = reprod_engine_fixed_packed_bytes(stage->type, elements);
    uint8_t *wire = malloc(wire_bytes + 1), *want = malloc(wire_bytes + 2 * elements + 1);
    uint8_t *max_wire = calloc(wire_bytes + 1, 1);
    void *device_wire = NULL, *out = stage->out;
    CHECK(reprod_cuda_scratch_alloc(&device_wire, wire_bytes, stream, DEVICE));
    for (int k = 0; k < stage->ranks; k++) {
        stage->stage = REPROD_DEVICE_FIXED_CODES;
        stage->terms = rank_terms(stage, terms, k);
        CHECK(reprod_cuda_fixed(stream, DEVICE, stage));
        fetch(codes, stage->codes, 2 * elements, stream);
        if (host) {
            reprod_engine_fixed_codes(stage->type, host + (size_t)k * size * elements, elements,
                                      want);
            if (memcmp(codes, want, 2 * elements) != 0)
                fixed_mismatch("codes", stage->type, stage->op, (int)stage->rounding, stage->ranks);
        }
        stage->stage = REPROD_DEVICE_FIXED_PACK, stage->out = device_wire;
        CHECK(reprod_cuda_fixed(stream, DEVICE, stage));
        stage->out = out;
        fetch(wire, device_wire, wire_bytes, stream);
        reprod_engine_fixed_pack(stage->type, stage->rounding, codes, elements, want);
        if (memcmp(wire, want, wire_bytes) != 0)
            fixed_mismatch("packed codes", stage->type, stage->op, (int)stage->rounding,
                           stage->ranks);
        for (size_t i = 0; i < wire_bytes; i++)
            if (wire[i] > max_wire[i]) max_wire[i] = wire[i];
    }
    CHECK(reprod_cuda_copy_async(device_wire, max_wire, wire_bytes, stream, DEVICE));
    stage->stage = REPROD_DEVICE_FIXED_UNPACK, stage->out = device_wire;
    CHECK(reprod_cuda_fixed(stream, DEVICE, stage));
    stage->out = out;
    fetch(codes, stage->codes, 2 * elements, stream);
    reprod_engine_fixed_unpack(stage->type, stage->rounding, max_wire, elements, max_codes);
    if (memcmp(codes, max_codes, 2 * elements) != 0)
        fixed_mismatch("unpacked codes", stage->type, stage->op, (int)stage->rounding,
                       stage->ranks);
    reprod_cuda_scratch_free(device_wire, stream, DEVICE);
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    free(wire), free(want), free(max_wire);
}

/* The fixed route's stages for N simulated ranks: codes, their MAX, the most words (read back),
 * the words, their SUM, the rounding; then the one-pass layout. Bitwise against the host arrays
 * and the exact sum. */
static void check_fixed_case(handle stream, reprod_type type, reprod_op op, reprod_rounding dir,
                             int ranks, size_t elements)
{
    size_t size = reprod_type_size(type), bytes = size * elements * (size_t)ranks;
    int full = reprod_engine_fixed_full_words(type, ranks);
    unsigned char *host = malloc(bytes), *want = malloc(size * elements), *got = malloc(size * elements);
    uint8_t *codes = malloc(2 * elements), *max_codes = calloc(2 * elements, 1);
    int64_t *words = malloc(8 * elements * (size_t)full), *sums = malloc(8 * elements * (size_t)full);
    size_t *offsets = malloc(sizeof *offsets * (elements + 1));
    fill(type, host, elements, ranks);
    const void **pointers = malloc(sizeof(void *) * (size_t)ranks);
    for (int k = 0; k < ranks; k++)
        pointers[k] = host + (size_t)k * size * elements;
    CHECK(reprod_reduce_exact(type, op, dir, pointers, ranks, elements, want));
    struct reprod_device_fixed stage =
        fixed_areas(stream, type, op, dir, ranks, elements, 8 * elements * (size_t)full, host);
    const void *terms = stage.terms;
    /* pass 1: each rank's codes, against the host's, reduced with MAX on the wire */
    reduced_codes(stream, &stage, terms, host, codes, max_codes);
    /* the most words an element, read back in stream order */
    stage.stage = REPROD_DEVICE_FIXED_MAX_WORDS;
    CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
    int32_t cell[REPROD_DEVICE_FIXED_CELLS + 1] = {0}; /* and whether they came */
    CHECK(reprod_cuda_readback(stream, DEVICE, stage.max_words, readback_arrived, cell));
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    reprod_engine_fixed_layout(type, ranks, dir, max_codes, elements, offsets);
    int most = 1;
    for (size_t i = 0; i < elements; i++)
        if ((int)(offsets[i + 1] - offsets[i]) > most) most = (int)(offsets[i + 1] - offsets[i]);
    if (!cell[REPROD_DEVICE_FIXED_CELLS] || cell[0] != most)
        fixed_mismatch("the words an element read back", type, op, dir, ranks);
    { /* the narrow probe: random bits hold infinities and NaNs, so int64 words */
        int stride = 0;
        stage.narrow = 1;
        CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
        fetch(cell, stage.max_words, 2 * sizeof cell[0], stream);
        if (cell[0] != most || cell[1] != REPROD_DEVICE_FIXED_NARROW_NONE ||
            reprod_device_fixed_layout(cell, 1, &stride) != 0 || stride != most)
            fixed_mismatch("the narrow probe of wide data", type, op, dir, ranks);
        stage.narrow = 0;
    }
    /* pass 2: each rank's words, summed as NCCL's int64 sum would, then rounded */
    for (int layout = 0; layout < 2; layout++) {
        int stride = layout == 0 ? most : full;
        memset(sums, 0, 8 * elements * (size_t)stride);
        stage.stride = stride;
        for (int k = 0; k < ranks; k++) {
            stage.stage = layout == 0 ? REPROD_DEVICE_FIXED_SPLIT : REPROD_DEVICE_FIXED_FULL_SPLIT;
            stage.terms = rank_terms(&stage, terms, k);
            CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
            fetch(words, stage.words, 8 * elements * (size_t)stride, stream);
            for (size_t i = 0; i < elements * (size_t)stride; i++)
                sums[i] += words[i];
        }
        CHECK(reprod_cuda_copy_async(stage.words, sums, 8 * elements * (size_t)stride, stream,
                                     DEVICE));
        stage.stage = layout == 0 ? REPROD_DEVICE_FIXED_ROUND : REPROD_DEVICE_FIXED_FULL_ROUND;
        CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
        fetch(got, stage.out, size * elements, stream);
        if (memcmp(want, got, size * elements) != 0)
            fixed_mismatch(layout == 0 ? "two passes" : "one pass", type, op, dir, ranks);
    }
    fixed_areas_free(stream, &stage, terms);
    free(host), free(want), free(got), free(codes), free(max_codes);
    free(words), free(sums), free(offsets), free(pointers);
}

/* The engine's exact sum of N ranks' contributions, one after another in `host`. */
static void exact_sum(reprod_type type, reprod_op op, reprod_rounding dir, const void *host,
                      int ranks, size_t elements, void *out)
{
    const void **pointers = malloc(sizeof(void *) * (size_t)ranks);
    for (int k = 0; k < ranks; k++)
        pointers[k] = (const char *)host + (size_t)k * reprod_type_size(type) * elements;
    CHECK(reprod_reduce_exact(type, op, dir, pointers, ranks, elements, out));
    free(pointers);
}

/* N ranks' contributions of similar magnitudes: 4 binades, across a bucket boundary of
 * binary64's; with `far`, every 1,000th element of the odd ranks 2^30 smaller (not binary16,
 * whose range is too short). */
static void fill_similar(reprod_type type, void *host, size_t elements, int ranks, int far)
{
    size_t size = reprod_type_size(type);
    int exponent_bits = type == REPROD_BFLOAT16 || type == REPROD_FLOAT32 ? 8
                        : type == REPROD_FLOAT64                          ? 11
                                                                          : 5;
    int fraction_bits = (int)(8 * size) - 1 - exponent_bits;
    int middle = 1 << (exponent_bits - 1);
    for (size_t i = 0; i < elements * (size_t)ranks; i++) {
        uint64_t r = next_random();
        int apart = far && (i / elements) % 2 && (i % elements) % 1000 == 7 && exponent_bits > 5;
        uint64_t field = (uint64_t)(middle - 2 + (int)((r >> 1) % 4) - (apart ? 30 : 0));
        uint64_t bits = (r & 1) << (8 * size - 1) | field << fraction_bits |
                        ((next_random() >> 8) & (((uint64_t)1 << fraction_bits) - 1));
        memcpy((unsigned char *)host + i * size, &bits, size); /* little-endian: the low bytes */
    }
}

/* Narrow words: N simulated ranks of similar magnitudes (4 binades, across a bucket boundary of
 * binary64's), in int32 words of W = 31 - ceil(log2 N) bits where they take fewer bytes than
 * int64 ones (`stride` of them: one for the 16-bit types and for binary32 up to 16 ranks, three
 * for binary64): the probe reads that back, each rank's int32 words, their sum in int32 as
 * NCCL's ncclInt32 would (each word below 2^W), the rounding, bitwise against the engine's
 * exact sum. */
static void check_narrow_case(handle stream, reprod_type type, reprod_op op, reprod_rounding dir,
                              int ranks, size_t elements, int stride)
{
    size_t size = reprod_type_size(type), bytes = size * elements * (size_t)ranks;
    size_t words_bytes = 4 * elements * (size_t)stride;
    unsigned char *host = malloc(bytes), *want = malloc(size * elements),
                  *got = malloc(size * elements);
    uint8_t *codes = malloc(2 * elements), *max_codes = calloc(2 * elements, 1);
    int32_t *words = malloc(words_bytes);
    int64_t *sums = calloc(elements * (size_t)stride, sizeof *sums);
    fill_similar(type, host, elements, ranks, 0);
    const void **pointers = malloc(sizeof(void *) * (size_t)ranks);
    for (int k = 0; k < ranks; k++)
        pointers[k] = host + (size_t)k * elements * size;
    CHECK(reprod_reduce_exact(type, op, dir, pointers, ranks, elements, want));
    struct reprod_device_fixed stage =
        fixed_areas(stream, type, op, dir, ranks, elements, words_bytes, host);
    const void *terms = stage.terms;
    reduced_codes(stream, &stage, terms, NULL, codes, max_codes);
    stage.stage = REPROD_DEVICE_FIXED_MAX_WORDS, stage.narrow = 1;
    CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
    int32_t cells[REPROD_DEVICE_FIXED_CELLS] = {0};
    fetch(cells, stage.max_words, sizeof cells, stream);
    int taken = 0, narrow = reprod_device_fixed_layout(cells, 1, &taken);
    if (!narrow || taken != stride)
        fixed_mismatch("the narrow probe of similar magnitudes", type, op, dir, ranks);
    stage.narrow = narrow, stage.stride = stride;
    int64_t bound =
        (int64_t)1 << (31 - (ranks > 1 ? 64 - __builtin_clzll((uint64_t)ranks - 1) : 0));
    size_t count = elements * (size_t)stride;
    for (int k = 0; k < ranks && narrow && taken == stride; k++) {
        stage.stage = REPROD_DEVICE_FIXED_SPLIT;
        stage.terms = rank_terms(&stage, terms, k);
        CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
        fetch(words, stage.words, words_bytes, stream);
        for (size_t i = 0; i < count; i++) {
            if (words[i] <= -bound || words[i] >= bound)
                fixed_mismatch("a narrow word past 2^W", type, op, dir, ranks);
            sums[i] += words[i];
        }
    }
    for (size_t i = 0; i < count; i++)
        words[i] = (int32_t)sums[i]; /* below N 2^W <= 2^31 */
    CHECK(reprod_cuda_copy_async(stage.words, words, words_bytes, stream, DEVICE));
    stage.stage = REPROD_DEVICE_FIXED_ROUND;
    CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
    fetch(got, stage.out, size * elements, stream);
    if (memcmp(want, got, size * elements) != 0)
        fixed_mismatch("narrow words", type, op, dir, ranks);
    fixed_areas_free(stream, &stage, terms);
    free(host), free(want), free(got), free(codes), free(max_codes), free(words), free(sums);
    free(pointers);
}

/* The per-element layout (AllReduce, Reduce): N simulated ranks, adversarial data (`similar`
 * 0: random bits, infinities and NaNs among them, so int64 words) or similar magnitudes with
 * every 1,000th element of the odd ranks 2^30 smaller (narrow words for the 16-bit types, a few
 * elements more of them). LAYOUT, GROUPS, TOTAL and OFFSETS on the device over more than one
 * group; T read back against the engine's own layout (int64 words) or the narrow words' count;
 * the words in sub-pieces of `capacity` words (elements straddle them), summed as NCCL would,
 * the rounding, bitwise against the engine's exact sum. */
static void check_per_element_case(handle stream, reprod_type type, reprod_op op,
                                   reprod_rounding dir, int ranks, size_t elements, int similar,
                                   size_t capacity)
{
    size_t size = reprod_type_size(type), bytes = size * elements * (size_t)ranks;
    unsigned char *host = malloc(bytes), *want = malloc(size * elements),
                  *got = malloc(size * elements);
    uint8_t *codes = malloc(2 * elements), *max_codes = calloc(2 * elements, 1);
    int64_t *words = malloc(8 * capacity), *sums = malloc(8 * capacity);
    size_t *offsets = malloc(sizeof *offsets * (elements + 1));
    if (similar) {
        fill_similar(type, host, elements, ranks, 1);
    } else {
        fill(type, host, elements, ranks);
    }
    exact_sum(type, op, dir, host, ranks, elements, want);
    struct reprod_device_fixed stage =
        fixed_areas(stream, type, op, dir, ranks, elements, 8 * capacity, host);
    void *layout = NULL;
    CHECK(reprod_cuda_scratch_alloc(&layout, reprod_device_fixed_layout_bytes(elements), stream,
                                    DEVICE));
    const void *terms = stage.terms;
    reduced_codes(stream, &stage, terms, NULL, codes, max_codes);
    stage.layout = layout, stage.narrow = 1;
    for (int s = REPROD_DEVICE_FIXED_LAYOUT; s <= REPROD_DEVICE_FIXED_OFFSETS; s++) {
        stage.stage = (enum reprod_device_fixed_stage)s;
        CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
    }
    int32_t cells[REPROD_DEVICE_FIXED_CELLS] = {0};
    fetch(cells, stage.max_words, sizeof cells, stream);
    int narrow = 0;
    uint64_t total = reprod_device_fixed_total(cells, &narrow);
    reprod_engine_fixed_layout(type, ranks, dir, max_codes, elements, offsets);
    int sixteen = size == 2;
    if ((!narrow && total != offsets[elements]) || (narrow && total < elements) ||
        (similar && sixteen && ranks <= 1024 && (!narrow || total >= elements + elements / 100)) ||
        (!similar && narrow))
        fixed_mismatch("the per-element layout's T", type, op, dir, ranks);
    stage.narrow = narrow, stage.word_total = total;
    size_t unit = narrow ? 4 : 8;
    int64_t bound =
        (int64_t)1 << (31 - (ranks > 1 ? 64 - __builtin_clzll((uint64_t)ranks - 1) : 0));
    uint64_t w0 = 0;
    int sub = 0;
    do {
        uint64_t w1 = total - w0 < capacity ? total : w0 + capacity;
        size_t count = (size_t)(w1 - w0);
        stage.word_first = w0, stage.word_end = w1, stage.sub = sub++;
        memset(sums, 0, 8 * capacity);
        for (int k = 0; k < ranks && count > 0; k++) {
            stage.stage = REPROD_DEVICE_FIXED_SPLIT;
            stage.terms = rank_terms(&stage, terms, k);
            CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
            fetch(words, stage.words, unit * count, stream);
            for (size_t i = 0; i < count; i++) {
                int64_t v = narrow ? ((int32_t *)(void *)words)[i] : words[i];
                if (narrow && (v <= -bound || v >= bound))
                    fixed_mismatch("a narrow word past 2^W", type, op, dir, ranks);
                sums[i] += v;
            }
        }
        for (size_t i = 0; narrow && i < count; i++)
            ((int32_t *)(void *)words)[i] = (int32_t)sums[i];
        CHECK(reprod_cuda_copy_async(stage.words, narrow ? (void *)words : (void *)sums,
                                     unit * count, stream, DEVICE));
        stage.stage = REPROD_DEVICE_FIXED_ROUND;
        CHECK(reprod_cuda_fixed(stream, DEVICE, &stage));
        CHECK(reprod_cuda_stream_sync(stream, DEVICE)); /* the copy has read sums */
        w0 = w1;
    } while (w0 < total);
    fetch(got, stage.out, size * elements, stream);
    if (memcmp(want, got, size * elements) != 0)
        fixed_mismatch(similar ? "per-element layout, similar" : "per-element layout", type, op,
                       dir, ranks);
    reprod_cuda_scratch_free(layout, stream, DEVICE);
    fixed_areas_free(stream, &stage, terms);
    free(host), free(want), free(got), free(codes), free(max_codes), free(words), free(sums);
    free(offsets);
}

/* A captured reduction replayed twice on different data. */
static void check_graph(handle stream, int count, int with_work)
{
    const size_t elements = 4099, bytes = 4 * elements * (size_t)count;
    float *host = malloc(bytes), *want = malloc(4 * elements), *got = malloc(4 * elements);
    void *device = NULL, *out = NULL, *work = NULL;
    struct reprod_device_reduction r = {REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, 0,
                                        count, elements, NULL, 4 * elements, NULL, -1, NULL, NULL,
                                        REPROD_PREMUL_NONE, 0, NULL};
    CHECK(reprod_cuda_scratch_alloc(&device, bytes, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&out, 4 * elements, stream, DEVICE));
    if (with_work) CHECK(reprod_cuda_scratch_alloc(&work, 8 * (size_t)count, stream, DEVICE));
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    r.blocks = device, r.out = out, r.work = work;
    handle graph, exec;
    CHECK(cuStreamBeginCapture(stream, 0));
    CHECK(reprod_cuda_reduce(stream, DEVICE, &r));
    CHECK(cuStreamEndCapture(stream, &graph));
    CHECK(cuGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; replay++) {
        fill(REPROD_FLOAT32, host, elements, count);
        const void **pointers = malloc(sizeof(void *) * (size_t)count);
        for (int k = 0; k < count; k++)
            pointers[k] = host + (size_t)k * elements;
        CHECK(reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, pointers,
                                  count, elements, want));
        free(pointers);
        CHECK(reprod_cuda_copy_async(device, host, bytes, stream, DEVICE));
        CHECK(cuGraphLaunch(exec, stream));
        CHECK(reprod_cuda_copy_async(got, out, 4 * elements, stream, DEVICE));
        CHECK(reprod_cuda_stream_sync(stream, DEVICE));
        if (memcmp(want, got, 4 * elements) != 0) {
            failures++;
            fprintf(stderr, "MISMATCH graph replay %d N %d work %d\n", replay, count, with_work);
        }
    }
    free(host), free(want), free(got);
}

/* Take device memory with ordinary allocations (as a caching allocator does) until at most
 * `left` bytes are free; returns how many allocations, in held[]. */
static int fill_device(unsigned long long *held, int most, size_t left)
{
    int count = 0;
    size_t free_bytes, total;
    for (size_t chunk = (size_t)1 << 30; chunk >= MIB && count < most; chunk /= 2)
        while (count < most && cuMemGetInfo(&free_bytes, &total) == 0 && free_bytes > left + chunk &&
               cuMemAlloc(&held[count], chunk) == 0)
            count++;
    return count;
}

/* The kind of memory at `pointer` (CU_MEMORYTYPE_*). */
static unsigned memory_type(const void *pointer)
{
    unsigned type = 0;
    CHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                (unsigned long long)(uintptr_t)pointer));
    return type;
}

/* A binary32 N=8 reduction whose contributions lie in `blocks` (the shim's scratch), against
 * the engine. */
static void check_on(handle stream, void *blocks, const char *what)
{
    const size_t elements = 1 << 16, bytes = 4 * elements * 8;
    float *host = malloc(bytes), *want = malloc(4 * elements), *got = malloc(4 * elements);
    void *out = NULL;
    fill(REPROD_FLOAT32, host, elements, 8);
    const void *pointers[8];
    for (int k = 0; k < 8; k++)
        pointers[k] = host + (size_t)k * elements;
    CHECK(reprod_reduce_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, pointers, 8,
                              elements, want));
    CHECK(reprod_cuda_scratch_alloc(&out, 4 * elements, stream, DEVICE));
    struct reprod_device_reduction r = {REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, 0, 8,
                                        elements, blocks, 4 * elements, NULL, -1, out, NULL,
                                        REPROD_PREMUL_NONE, 0, NULL};
    CHECK(reprod_cuda_copy_async(blocks, host, bytes, stream, DEVICE));
    CHECK(reprod_cuda_reduce(stream, DEVICE, &r));
    CHECK(reprod_cuda_copy_async(got, out, 4 * elements, stream, DEVICE));
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    if (memcmp(want, got, 4 * elements) != 0) {
        failures++;
        fprintf(stderr, "MISMATCH: a reduction on the scratch %s\n", what);
    }
    CHECK(reprod_cuda_scratch_free(out, stream, DEVICE));
    free(host), free(want), free(got);
}

/* The device full (C12 of issue 17): CUDA's pool keeps four free 48 MiB blocks (release
 * threshold UINT64_MAX, as PyTorch sets it) and ordinary allocations take all but 32 MiB: a
 * 64 MiB scratch fits after the shim trims the pool. Then all but 16 MiB taken and the pool
 * empty: the scratch is pinned host memory. A reduction runs on each. */
static void check_full_device(handle stream, int device)
{
    static unsigned long long held[4096];
    handle pool;
    unsigned long long blocks[4];
    uint64_t keep_everything = UINT64_MAX;
    CHECK(cuDeviceGetDefaultMemPool(&pool, device));
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_everything));
    for (int k = 0; k < 4; k++)
        CHECK(cuMemAllocAsync(&blocks[k], 48 * MIB, stream));
    for (int k = 0; k < 4; k++)
        CHECK(cuMemFreeAsync(blocks[k], stream));
    CHECK(cuStreamSynchronize(stream));
    int count = fill_device(held, 4096, 32 * MIB);
    void *scratch = NULL;
    CHECK(reprod_cuda_scratch_alloc(&scratch, 64 * MIB, stream, DEVICE));
    printf("device full but 32 MiB, the pool holding 4 x 48 MiB: scratch in %s memory\n",
           memory_type(scratch) == CU_MEMORYTYPE_DEVICE ? "device" : "host");
    if (memory_type(scratch) != CU_MEMORYTYPE_DEVICE) failures++;
    check_on(stream, scratch, "after a trim");
    CHECK(reprod_cuda_scratch_free(scratch, stream, DEVICE));
    CHECK(cuStreamSynchronize(stream));
    CHECK(cuMemPoolTrimTo(pool, 0)); /* the pool kept that scratch: empty it */
    count += fill_device(held + count, 4096 - count, 16 * MIB);
    CHECK(reprod_cuda_scratch_alloc(&scratch, 64 * MIB, stream, DEVICE));
    printf("device full but 16 MiB: scratch in %s memory\n",
           memory_type(scratch) == CU_MEMORYTYPE_HOST ? "pinned host" : "device");
    if (memory_type(scratch) != CU_MEMORYTYPE_HOST) failures++;
    check_on(stream, scratch, "in pinned host memory");
    CHECK(reprod_cuda_scratch_free(scratch, stream, DEVICE));
    CHECK(cuStreamSynchronize(stream));
    for (int k = 0; k < count; k++)
        CHECK(cuMemFree(held[k]));
}

/* Kernel bandwidth over cuMemcpyDtoD bandwidth, binary32, N = 8. */
static double throughput_ratio(handle stream)
{
    const size_t elements = (size_t)1 << 25, count = 8, bytes = 4 * elements * count;
    void *device = NULL, *out = NULL;
    CHECK(reprod_cuda_scratch_alloc(&device, bytes, stream, DEVICE));
    CHECK(reprod_cuda_scratch_alloc(&out, 4 * elements, stream, DEVICE));
    struct reprod_device_reduction r = {REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, 0, 8,
                                        elements, device, 4 * elements, NULL, -1, out, NULL,
                                        REPROD_PREMUL_NONE, 0, NULL};
    handle start, stop;
    CHECK(cuEventCreate(&start, 0));
    CHECK(cuEventCreate(&stop, 0));
    float kernel_ms = 0, copy_ms = 0;
    CHECK(reprod_cuda_reduce(stream, DEVICE, &r)); /* warm up */
    CHECK(cuEventRecord(start, stream));
    for (int i = 0; i < 10; i++)
        CHECK(reprod_cuda_reduce(stream, DEVICE, &r));
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    CHECK(cuEventElapsedTime(&kernel_ms, start, stop));
    CHECK(cuEventRecord(start, stream));
    for (int i = 0; i < 10; i++)
        CHECK(reprod_cuda_copy_async((char *)device + bytes / 2, device, bytes / 2, stream, DEVICE));
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    CHECK(cuEventElapsedTime(&copy_ms, start, stop));
    double kernel_bandwidth = 10.0 * (double)(bytes + 4 * elements) / kernel_ms * 1e-6;
    double copy_bandwidth = 10.0 * (double)bytes / copy_ms * 1e-6; /* bytes/2 read + written */
    printf("binary32 N=8: kernel %.0f GB/s, cuMemcpyDtoD %.0f GB/s\n", kernel_bandwidth,
           copy_bandwidth);
    reprod_cuda_scratch_free(device, stream, DEVICE);
    reprod_cuda_scratch_free(out, stream, DEVICE);
    CHECK(reprod_cuda_stream_sync(stream, DEVICE));
    return kernel_bandwidth / copy_bandwidth;
}

int main(int argc, char **argv)
{
    int any_path = argc > 1 && strcmp(argv[1], "--any-path") == 0;
    load_driver();
    int device;
    handle context, stream;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&context, device));
    CHECK(cuCtxSetCurrent(context));
    CHECK(cuStreamCreate(&stream, 1));
    if (!reprod_cuda_ready()) {
        fprintf(stderr, "check_kernels: the shim did not find the driver\n");
        return 1;
    }
    size_t stack_before = 0, stack_after = 0;
    CHECK(cuCtxGetLimit(&stack_before, CU_LIMIT_STACK_SIZE));
    int kernels = reprod_cuda_kernels_loaded(DEVICE);
    printf("kernels loaded: %d\n", kernels);
    static const int counts[] = {1, 2, 3, 8, 17, 40};
    int cases = 0;
    for (int t = 0; t < 4; t++)
        for (int ordered = 0; ordered < 2; ordered++)
            for (int op = 0; op < (ordered ? 3 : 2); op++)
                for (int dir = 0; dir < (ordered ? 1 : 4); dir++)
                    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                        for (int with_work = 0; with_work < (counts[c] > 32 ? 2 : 1); with_work++) {
                            check_case(stream, (reprod_type)t, (reprod_op)op, (reprod_rounding)dir,
                                       ordered, counts[c], 100003, with_work || counts[c] <= 32);
                            cases++;
                        }
    static const int fixed_ranks[] = {2, 5, 40}, narrow_ranks[] = {3, 40, 1024};
    for (int t = 0; t < 4; t++)
        for (int op = 0; op < 2; op++)
            for (int dir = 0; dir < 4; dir++)
                for (size_t c = 0; c < sizeof fixed_ranks / sizeof fixed_ranks[0]; c++) {
                    check_fixed_case(stream, (reprod_type)t, (reprod_op)op, (reprod_rounding)dir,
                                     fixed_ranks[c], 10007);
                    cases++;
                    int n =
                        reprod_type_size((reprod_type)t) == 2 ? narrow_ranks[c] : fixed_ranks[c];
                    if (t == REPROD_FLOAT32 && n > 16) continue; /* 27 bits: one word to 16 */
                    check_narrow_case(stream, (reprod_type)t, (reprod_op)op, (reprod_rounding)dir,
                                      n, 4099, t == REPROD_FLOAT64 ? 3 : 1);
                    cases++;
                }
    for (int t = 0; t < 4; t++) /* more than one group of blocks; sub-pieces of 61 and 4,099 */
        for (int dir = 0; dir < 4; dir++)
            for (int similar = 0; similar < 2; similar++) {
                check_per_element_case(stream, (reprod_type)t, (reprod_op)(dir % 2),
                                       (reprod_rounding)dir, similar ? 40 : 5, 20011, similar,
                                       dir < 2 ? 61 : 4099);
                cases++;
            }
    check_graph(stream, 8, 1);
    check_graph(stream, 40, 0); /* the host path, captured */
    check_graph(stream, 40, 1);
    check_full_device(stream, device);
    printf("%d cases, %d mismatches\n", cases + 8, failures);
    CHECK(cuCtxGetLimit(&stack_after, CU_LIMIT_STACK_SIZE));
    printf("per-thread stack limit %zu bytes before the first launch, %zu after\n", stack_before,
           stack_after);
    if (stack_after != stack_before) {
        failures++;
        fprintf(stderr, "the kernels' launches grew the per-thread stack\n");
    }
    const char *path = reprod_cuda_path_word();
    printf("device reductions ran on: %s\n", path ? path : "(none)");
    if (any_path) return failures == 0 ? 0 : 1;
    if (path && strcmp(path, "kernels") != 0 && strstr(path, "host:no-pointer-array") == NULL) {
        failures++; /* (the N > 32 cases without work memory take the host path on purpose) */
        fprintf(stderr, "some kernel launches failed: %s\n", path);
    }
    double ratio = throughput_ratio(stream);
    printf("throughput ratio %.2f: the kernel's share of copy bandwidth (target >= 0.60)%s\n",
           ratio, ratio >= 0.6 ? "" : "  BELOW TARGET");
    return failures == 0 && kernels ? 0 : 1;
}
