/* check_kernels.c: the shim's device arithmetic (shim/cuda*.c) through the real CUDA driver,
 * on a machine with a GPU (make test-gpu; CI never runs it). Loads libcuda itself, as an
 * application would, and checks against the host engine bitwise: the kernel path and the host
 * path (N > 32 without work memory) for every type, op and rounding on adversarial data; a
 * captured graph replayed on new data; and the kernel's throughput as a fraction of
 * cuMemcpyDtoD bandwidth for binary32 N=8 (target >= 0.6). Exit status 0 when all match.
 */
#include "cuda.h"
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

static int failures;

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
    CHECK(reprod_cuda_alloc_async(&device, bytes, stream));
    CHECK(reprod_cuda_alloc_async(&out, size * elements, stream));
    size_t work_bytes = reprod_cuda_reduce_work_bytes(&r);
    if (with_work && work_bytes) CHECK(reprod_cuda_alloc_async(&work, work_bytes, stream));
    CHECK(reprod_cuda_copy_async(device, host, bytes, stream));
    r.blocks = device, r.out = out, r.work = work;
    CHECK(reprod_cuda_reduce(stream, &r));
    CHECK(reprod_cuda_copy_async(got, out, size * elements, stream));
    CHECK(reprod_cuda_stream_sync(stream));
    if (memcmp(want, got, size * elements) != 0) {
        failures++;
        fprintf(stderr, "MISMATCH type %d op %d dir %d ordered %d N %d work %d\n", type, op, dir,
                ordered, count, with_work);
    }
    reprod_cuda_free_async(device, stream);
    reprod_cuda_free_async(out, stream);
    if (work) reprod_cuda_free_async(work, stream);
    CHECK(reprod_cuda_stream_sync(stream));
    free(host), free(want), free(got), free(pointers);
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
    CHECK(reprod_cuda_alloc_async(&device, bytes, stream));
    CHECK(reprod_cuda_alloc_async(&out, 4 * elements, stream));
    if (with_work) CHECK(reprod_cuda_alloc_async(&work, 8 * (size_t)count, stream));
    CHECK(reprod_cuda_stream_sync(stream));
    r.blocks = device, r.out = out, r.work = work;
    handle graph, exec;
    CHECK(cuStreamBeginCapture(stream, 0));
    CHECK(reprod_cuda_reduce(stream, &r));
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
        CHECK(reprod_cuda_copy_async(device, host, bytes, stream));
        CHECK(cuGraphLaunch(exec, stream));
        CHECK(reprod_cuda_copy_async(got, out, 4 * elements, stream));
        CHECK(reprod_cuda_stream_sync(stream));
        if (memcmp(want, got, 4 * elements) != 0) {
            failures++;
            fprintf(stderr, "MISMATCH graph replay %d N %d work %d\n", replay, count, with_work);
        }
    }
    free(host), free(want), free(got);
}

/* Kernel bandwidth over cuMemcpyDtoD bandwidth, binary32, N = 8. */
static double throughput_ratio(handle stream)
{
    const size_t elements = (size_t)1 << 25, count = 8, bytes = 4 * elements * count;
    void *device = NULL, *out = NULL;
    CHECK(reprod_cuda_alloc_async(&device, bytes, stream));
    CHECK(reprod_cuda_alloc_async(&out, 4 * elements, stream));
    struct reprod_device_reduction r = {REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, 0, 8,
                                        elements, device, 4 * elements, NULL, -1, out, NULL,
                                        REPROD_PREMUL_NONE, 0, NULL};
    handle start, stop;
    CHECK(cuEventCreate(&start, 0));
    CHECK(cuEventCreate(&stop, 0));
    float kernel_ms = 0, copy_ms = 0;
    CHECK(reprod_cuda_reduce(stream, &r)); /* warm up */
    CHECK(cuEventRecord(start, stream));
    for (int i = 0; i < 10; i++)
        CHECK(reprod_cuda_reduce(stream, &r));
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    CHECK(cuEventElapsedTime(&kernel_ms, start, stop));
    CHECK(cuEventRecord(start, stream));
    for (int i = 0; i < 10; i++)
        CHECK(reprod_cuda_copy_async((char *)device + bytes / 2, device, bytes / 2, stream));
    CHECK(cuEventRecord(stop, stream));
    CHECK(cuEventSynchronize(stop));
    CHECK(cuEventElapsedTime(&copy_ms, start, stop));
    double kernel_bandwidth = 10.0 * (double)(bytes + 4 * elements) / kernel_ms * 1e-6;
    double copy_bandwidth = 10.0 * (double)bytes / copy_ms * 1e-6; /* bytes/2 read + written */
    printf("binary32 N=8: kernel %.0f GB/s, cuMemcpyDtoD %.0f GB/s\n", kernel_bandwidth,
           copy_bandwidth);
    reprod_cuda_free_async(device, stream);
    reprod_cuda_free_async(out, stream);
    CHECK(reprod_cuda_stream_sync(stream));
    return kernel_bandwidth / copy_bandwidth;
}

int main(void)
{
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
    int kernels = reprod_cuda_kernels_loaded();
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
    check_graph(stream, 8, 1);
    check_graph(stream, 40, 0); /* the host path, captured */
    check_graph(stream, 40, 1);
    printf("%d cases, %d mismatches\n", cases + 6, failures);
    double ratio = throughput_ratio(stream);
    printf("throughput ratio %.2f (target >= 0.60)%s\n", ratio, ratio >= 0.6 ? "" : "  BELOW TARGET");
    return failures == 0 && kernels ? 0 : 1;
}
