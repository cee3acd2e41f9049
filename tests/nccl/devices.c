/* devices.c: one process, one thread, driving the communicators of several devices
 * (ncclCommInitAll), as a single-process multi-GPU job does; float32 all-reduces and
 * reduce-scatters checked against MPFR's correctly rounded sum, on the devices' default stream
 * (0) or on streams of their own. Scenarios:
 *   group-end    stream 0, the calls grouped while each device is made current in turn: at
 *                ncclGroupEnd the last device is current, and each communicator's work must
 *                still run on its own device; then the same ungrouped, another device current
 *   plain        each device's own stream, no memory pressure
 *   pool-trim    each device nearly full: CUDA's pool (release threshold UINT64_MAX, as
 *                PyTorch sets it) holds free blocks too small for the shim's scratch, and
 *                ordinary allocations (a caching allocator's) take the rest but 4 MiB
 *   device-full  each device full but 4 MiB, the pool empty (run with
 *                STANDIN_DEVICE_MEMORY_MB=64 and REPROD_SCRATCH_MB=8 for both)
 *   premul-op    ncclRedOpCreatePreMulSum and ncclRedOpDestroy: prints "premul-op code=C"
 *                with the creation's code (over an NCCL that lacks the function, the
 *                shim's answer: natively the call cannot even be bound)
 * Usage: devices SCENARIO [DEVICES]. Prints "ok: SCENARIO inexact=K digest=D": K elements that
 * differ from the exact sum (0 expected under the shim; natively, a rounded fold), D a hash of
 * every result (a pass-through run must equal the native run's). Exit 1 on a CUDA or NCCL
 * error, named on stderr.
 */
#include "engine_oracle.h"
#include "nccl_data.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 8
#define MIB ((size_t)1 << 20)

static const char *test_who(void)
{
    return "devices";
}

static void test_stop(void)
{
    exit(1);
}

static int devices = 2;
static ncclComm_t comms[MAX_DEVICES];
static long inexact;
static uint64_t digest = 0xcbf29ce484222325ull;

/* A buffer of `count` floats on device d (current afterwards) holding its set `set`. */
static float *device_data(int d, int set, size_t count)
{
    float *host = malloc(count * sizeof *host), *device;
    for (size_t i = 0; i < count; i++)
        host[i] = test_contribution(set, d, i);
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaMalloc((void **)&device, count * sizeof *host));
    CHECK_CUDA(cudaMemcpy(device, host, count * sizeof *host, cudaMemcpyHostToDevice));
    free(host);
    return device;
}

/* Device d's result of `count` floats, whose element i is the sum of element first + i of every
 * device's set `set`: counted against MPFR, hashed into the digest. */
static void check(const char *what, int d, const float *result, cudaStream_t stream, int set,
                  size_t first, size_t count)
{
    float *host = malloc(count * sizeof *host);
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host, result, count * sizeof *host, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int k = 0; k < devices; k++) {
            float v = test_contribution(set, k, first + i);
            uint32_t bits;
            memcpy(&bits, &v, 4);
            terms[k] = bits;
        }
        uint32_t bits;
        memcpy(&bits, &host[i], 4);
        uint64_t expected =
            oracle_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST, terms, devices);
        if (bits != expected && inexact++ < 3)
            fprintf(stderr, "devices: %s: device %d element %zu is %a, the exact sum 0x%llx\n",
                    what, d, first + i, host[i], (unsigned long long)expected);
        test_digest(&digest, &bits, sizeof bits); /* little-endian: the bytes from the lowest */
    }
    free(host);
}

/* An in-place all-reduce of `count` floats on every device, grouped (each device current in
 * turn, as a loop over the devices makes it) or not (`current`: the device current for every
 * call), on `streams` (NULL: stream 0). */
static void all_reduce(const char *what, int set, size_t count, int grouped, int current,
                       cudaStream_t *streams)
{
    float *buffers[MAX_DEVICES];
    for (int d = 0; d < devices; d++)
        buffers[d] = device_data(d, set, count);
    if (grouped) CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < devices; d++) { /* NCCL only enqueues: the ranks meet on the devices */
        CHECK_CUDA(cudaSetDevice(grouped ? d : current));
        CHECK_NCCL(ncclAllReduce(buffers[d], buffers[d], count, ncclFloat32, ncclSum, comms[d],
                                 streams ? streams[d] : 0));
    }
    if (grouped) CHECK_NCCL(ncclGroupEnd());
    for (int d = 0; d < devices; d++) {
        check(what, d, buffers[d], streams ? streams[d] : 0, set, 0, count);
        CHECK_CUDA(cudaFree(buffers[d]));
    }
}

/* A grouped reduce-scatter, stream 0: device d gets chunk d. */
static void reduce_scatter(int set, size_t chunk)
{
    float *in[MAX_DEVICES], *out[MAX_DEVICES];
    for (int d = 0; d < devices; d++) {
        in[d] = device_data(d, set, chunk * (size_t)devices);
        CHECK_CUDA(cudaMalloc((void **)&out[d], chunk * sizeof(float)));
    }
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < devices; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_NCCL(ncclReduceScatter(in[d], out[d], chunk, ncclFloat32, ncclSum, comms[d], 0));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int d = 0; d < devices; d++) {
        check("reduce-scatter", d, out[d], 0, set, (size_t)d * chunk, chunk);
        CHECK_CUDA(cudaFree(in[d]));
        CHECK_CUDA(cudaFree(out[d]));
    }
}

/* Fill device d but `left` bytes with ordinary allocations; with `fragments`, first leave the
 * pool holding that many free 6 MiB blocks (too small for an 8 MiB scratch). */
static void *fill_device(int d, cudaStream_t stream, int fragments, size_t left)
{
    cudaMemPool_t pool;
    uint64_t keep_everything = UINT64_MAX;
    void *blocks[8], *filler = NULL;
    size_t free_bytes, total;
    CHECK_CUDA(cudaSetDevice(d));
    CHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, d));
    CHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    for (int k = 0; k < fragments; k++)
        CHECK_CUDA(cudaMallocAsync(&blocks[k], 6 * MIB, stream));
    for (int k = 0; k < fragments; k++)
        CHECK_CUDA(cudaFreeAsync(blocks[k], stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total));
    if (free_bytes > left) CHECK_CUDA(cudaMalloc(&filler, free_bytes - left));
    return filler;
}

int main(int argc, char **argv)
{
    const char *scenario = argc > 1 ? argv[1] : "";
    if (argc > 2) devices = atoi(argv[2]);
    if (devices < 2 || devices > MAX_DEVICES) {
        fprintf(stderr, "usage: devices group-end|plain|pool-trim|device-full|premul-op [2..%d]\n",
                MAX_DEVICES);
        return 2;
    }
    int list[MAX_DEVICES];
    for (int d = 0; d < devices; d++)
        list[d] = d;
    CHECK_NCCL(ncclCommInitAll(comms, devices, list));
    cudaStream_t streams[MAX_DEVICES];
    for (int d = 0; d < devices; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_CUDA(cudaStreamCreate(&streams[d]));
    }
    if (strcmp(scenario, "group-end") == 0) {
        all_reduce("grouped, stream 0", 1, 100000, 1, 0, NULL); /* exchange, reduce, share */
        all_reduce("grouped, stream 0, small", 2, 1000, 1, 0, NULL); /* one all-gather */
        reduce_scatter(3, 30000);
        all_reduce("ungrouped, stream 0, device 0 current", 4, 100000, 0, 0, NULL);
    } else if (strcmp(scenario, "plain") == 0) {
        all_reduce("own streams", 5, 100000, 1, 0, streams);
    } else if (strcmp(scenario, "premul-op") == 0) {
        float scalar = 0.5f;
        ncclRedOp_t op;
        ncclResult_t code = ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32,
                                                     ncclScalarHostImmediate, comms[0]);
        if (code == ncclSuccess) CHECK_NCCL(ncclRedOpDestroy(op, comms[0]));
        printf("premul-op code=%d\n", (int)code);
    } else if (strcmp(scenario, "pool-trim") == 0 || strcmp(scenario, "device-full") == 0) {
        int trim = strcmp(scenario, "pool-trim") == 0;
        float *x[MAX_DEVICES];
        void *filler[MAX_DEVICES];
        size_t count = 4 * MIB; /* 16 MiB: pieces of 8 MiB of scratch at REPROD_SCRATCH_MB=8 */
        for (int d = 0; d < devices; d++) {
            x[d] = device_data(d, 6, count);
            filler[d] = fill_device(d, streams[d], trim ? 4 : 0, 4 * MIB);
        }
        CHECK_NCCL(ncclGroupStart());
        for (int d = 0; d < devices; d++)
            CHECK_NCCL(ncclAllReduce(x[d], x[d], count, ncclFloat32, ncclSum, comms[d],
                                     streams[d]));
        CHECK_NCCL(ncclGroupEnd());
        for (int d = 0; d < devices; d++) {
            check(scenario, d, x[d], streams[d], 6, 0, count);
            CHECK_CUDA(cudaFree(x[d]));
            if (filler[d]) CHECK_CUDA(cudaFree(filler[d]));
        }
    } else {
        fprintf(stderr, "devices: unknown scenario '%s'\n", scenario);
        return 2;
    }
    for (int d = 0; d < devices; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_CUDA(cudaDeviceSynchronize()); /* a fault on the device is reported here */
        CHECK_NCCL(ncclCommDestroy(comms[d]));
    }
    printf("ok: %s inexact=%ld digest=%016llx\n", scenario, inexact, (unsigned long long)digest);
    return 0;
}
