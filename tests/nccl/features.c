/* features.c: how real jobs use NCCL, each result checked bitwise against MPFR's correctly
 * rounded sum (tests/unit/engine_oracle.h):
 *   group     coalesced calls mixed with pass-through ones, nested groups, a PreMulSum op
 *             destroyed before ncclGroupEnd (PyTorch's way)
 *   threads   two communicators driven by two threads at once
 *   split     an ncclCommSplit child
 *   nonblocking  a communicator with config.blocking = 0, polled with ncclCommGetAsyncError
 *   graph     a call captured into a CUDA graph, replayed on new inputs
 *   large     a count past the scratch bound (the script sets REPROD_SCRATCH_MB=1)
 *   initall   one thread driving three ranks of one process (ncclCommInitAll) in a group
 *   premul-ranks  a PreMulSum scalar that differs between ranks (each scales its own input)
 *   order     a group's calls in their order; calls grouped on one rank only
 *   bad       erroneous calls: prints the error codes (compared with the native run's)
 *   p2p       a group's Send and Recv before, after and around a shimmed all-reduce, in an
 *             order that may differ between ranks, past the stand-in's mailbox
 *   scratch   twelve grouped 4 MiB all-reduces (the script bounds the scratch held at once)
 *   bad-group a bad call inside a group: its code at once, the group dropped (codes printed)
 *   watchdog  the application's own timeout on a nonblocking communicator whose peer never
 *             comes, then ncclCommAbort (PyTorch's watchdog); watchdog-blocking: the same on a
 *             blocking communicator, aborted by another thread while the call waits
 *   chain     two chained in-place all-reduces in one group (the script reads their traces)
 *   fail-midway  NCCL fails a call midway through a shimmed all-reduce (the script makes the
 *             stand-in fail it, and reads how many calls came after)
 * Every return code is checked against NCCL's exact one. Usage: features [--native]
 * SCENARIO... (when none is named, all but scratch, watchdog, chain and fail-midway; --native: the run without the
 * shim, where sums are NCCL's own: only codes and moved data are checked). Rank 0 prints
 * "ok: <scenario>".
 */
#include "nccl_test.h"

#include "engine_oracle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static long wrong;
static int native; /* --native: NCCL's own sums, not checked against MPFR */

/* Count a return code that is not exactly NCCL's. */
static void expect_code(const char *what, ncclResult_t got, ncclResult_t expected)
{
    if (got != expected && wrong++ < 20)
        fprintf(stderr, "rank %d: %s returned %d (%s), not %d\n", rank, what, (int)got,
                ncclGetErrorString(got), (int)expected);
}


static void check_from(const char *what, const float *got, size_t first, size_t count, int set,
                       const int *members, int member_count, float scale, int divide,
                       size_t step);

/* Check `got` (count float32 results) against the exact sum of the members' contributions,
 * each scaled by `scale` (1: none) first, divided by `divide` (1: a sum). `members` lists
 * the world ranks whose contributions are summed; every `step`-th element. */
static void check_sum(const char *what, const float *got, size_t count, int set,
                      const int *members, int member_count, float scale, int divide, size_t step)
{
    check_from(what, got, 0, count, set, members, member_count, scale, divide, step);
}

/* check_sum from element `first` on. */
static void check_from(const char *what, const float *got, size_t first, size_t count, int set,
                       const int *members, int member_count, float scale, int divide, size_t step)
{
    for (size_t i = first; i < count && !native; i += step) {
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int k = 0; k < member_count; k++) {
            float v = test_contribution(set, members[k], i) * scale; /* rounded to float, as NCCL */
            uint32_t bits;
            memcpy(&bits, &v, 4);
            terms[k] = bits;
        }
        uint64_t expected = oracle_exact(REPROD_FLOAT32, divide > 1 ? REPROD_AVG : REPROD_SUM,
                                         REPROD_ROUND_NEAREST, terms, member_count);
        uint32_t bits;
        memcpy(&bits, &got[i], 4);
        if (bits != expected && wrong++ < 5)
            fprintf(stderr, "rank %d: %s: element %zu is %a, expected 0x%llx\n", rank, what, i,
                    got[i], (unsigned long long)expected);
    }
}

/* A device buffer of rank r's contribution of data set `set`. */
static float *device_contribution(int set, int r, size_t count)
{
    float *host = malloc(count * sizeof *host), *device;
    for (size_t i = 0; i < count; i++)
        host[i] = test_contribution(set, r, i);
    CHECK_CUDA(cudaMalloc((void **)&device, count * sizeof *host));
    CHECK_CUDA(cudaMemcpy(device, host, count * sizeof *host, cudaMemcpyHostToDevice));
    free(host);
    return device;
}

static float *to_host(const float *device, size_t count, cudaStream_t stream)
{
    float *host = malloc(count * sizeof *host);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host, device, count * sizeof *host, cudaMemcpyDeviceToHost));
    return host;
}

static int all_ranks[64];

static void scenario_group(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 1000;
    float *a = device_contribution(1, rank, n), *b = device_contribution(2, rank, n);
    float *c = device_contribution(3, rank, n * (size_t)ranks), *rs;
    int *ints, host_ints[16];
    CHECK_CUDA(cudaMalloc((void **)&rs, n * sizeof *rs));
    CHECK_CUDA(cudaMalloc((void **)&ints, sizeof host_ints));
    for (int i = 0; i < 16; i++)
        host_ints[i] = rank * 100 + i;
    CHECK_CUDA(cudaMemcpy(ints, host_ints, sizeof host_ints, cudaMemcpyHostToDevice));
    float scalar = 0.25f;
    ncclRedOp_t premul;
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclAllReduce(a, a, n, ncclFloat32, ncclSum, comm, stream));
    CHECK_NCCL(ncclAllReduce(ints, ints, 16, ncclInt32, ncclSum, comm, stream)); /* passed */
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate,
                                        comm));
    CHECK_NCCL(ncclAllReduce(b, b, n, ncclFloat32, premul, comm, stream));
    CHECK_NCCL(ncclRedOpDestroy(premul, comm)); /* before ncclGroupEnd, as PyTorch does */
    CHECK_NCCL(ncclGroupEnd());
    CHECK_NCCL(ncclReduceScatter(c, rs, n, ncclFloat32, ncclAvg, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
    float *ha = to_host(a, n, stream), *hb = to_host(b, n, stream), *hrs = to_host(rs, n, stream);
    check_sum("group all-reduce", ha, n, 1, all_ranks, ranks, 1.0f, 1, 1);
    check_sum("group premul", hb, n, 2, all_ranks, ranks, scalar, 1, 1);
    /* rs element i is element rank*n + i of set 3: shift the check by addressing. */
    for (size_t i = 0; i < n; i++) {
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int k = 0; k < ranks; k++) {
            float v = test_contribution(3, k, (size_t)rank * n + i);
            uint32_t bits;
            memcpy(&bits, &v, 4);
            terms[k] = bits;
        }
        uint64_t expected = oracle_exact(REPROD_FLOAT32, REPROD_AVG, REPROD_ROUND_NEAREST, terms,
                                         ranks);
        uint32_t bits;
        memcpy(&bits, &hrs[i], 4);
        if (bits != expected && wrong++ < 5)
            fprintf(stderr, "rank %d: group reduce-scatter avg: element %zu wrong\n", rank, i);
    }
    CHECK_CUDA(cudaMemcpy(host_ints, ints, sizeof host_ints, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++)
        if (host_ints[i] != 100 * ranks * (ranks - 1) / 2 + ranks * i && wrong++ < 5)
            fprintf(stderr, "rank %d: group int all-reduce: element %d is %d\n", rank, i,
                    host_ints[i]);
    free(ha), free(hb), free(hrs);
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(rs), cudaFree(ints);
}

struct thread_job {
    ncclComm_t comm;
    int set;
};

static void *thread_main(void *argument)
{
    struct thread_job *job = argument;
    cudaStream_t stream;
    size_t n = 300001; /* two pieces at REPROD_SCRATCH_MB=1, two rounds each */
    CHECK_CUDA(cudaStreamCreate(&stream));
    for (int round = 0; round < 4; round++) {
        size_t count = round % 2 ? n : 777;
        float *x = device_contribution(job->set + round, rank, count);
        expect_code("threads all-reduce",
                    ncclAllReduce(x, x, count, ncclFloat32, ncclSum, job->comm, stream),
                    ncclSuccess);
        float *h = to_host(x, count, stream);
        check_sum("threads", h, count, job->set + round, all_ranks, ranks, 1.0f, 1, 7);
        free(h);
        cudaFree(x);
    }
    cudaStreamDestroy(stream);
    return NULL;
}

static void scenario_threads(void)
{
    ncclUniqueId first, second;
    if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&first));
    if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&second));
    MPI_Bcast(&first, sizeof first, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&second, sizeof second, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comms[2];
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclCommInitRank(&comms[0], ranks, first, rank));
    CHECK_NCCL(ncclCommInitRank(&comms[1], ranks, second, rank));
    CHECK_NCCL(ncclGroupEnd());
    struct thread_job jobs[2] = {{comms[0], 100}, {comms[1], 200}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, thread_main, &jobs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    CHECK_NCCL(ncclCommDestroy(comms[0]));
    CHECK_NCCL(ncclCommDestroy(comms[1]));
}

static void scenario_split(ncclComm_t comm, cudaStream_t stream)
{
    ncclComm_t child;
    CHECK_NCCL(ncclCommSplit(comm, rank % 2, -rank, &child, NULL));
    int members[64], count = 0;
    for (int r = ranks - 1; r >= 0; r--) /* key -rank: the child's rank order is reversed */
        if (r % 2 == rank % 2) members[count++] = r;
    size_t n = 500;
    float *x = device_contribution(7, rank, n);
    CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, child, stream));
    float *h = to_host(x, n, stream);
    check_sum("split", h, n, 7, members, count, 1.0f, 1, 1);
    free(h);
    cudaFree(x);
    CHECK_NCCL(ncclCommDestroy(child));
}

/* Poll a nonblocking communicator until its last operation has finished: it must succeed. */
static void wait_comm(ncclComm_t comm)
{
    ncclResult_t state;
    do {
        CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    } while (state == ncclInProgress);
    expect_code("a nonblocking communicator, polled", state, ncclSuccess);
}

/* A fresh communicator of every rank, blocking or not. */
static ncclComm_t fresh_comm(int blocking)
{
    ncclUniqueId id;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking;
    ncclComm_t comm;
    if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    expect_code("ncclCommInitRankConfig", ncclCommInitRankConfig(&comm, ranks, id, rank, &config),
                blocking ? ncclSuccess : ncclInProgress);
    if (!blocking) wait_comm(comm);
    return comm;
}

/* config.blocking = 0: a call returns ncclInProgress (NCCL launches on a thread of its own);
 * inside a group the call returns ncclSuccess and ncclGroupEnd ncclInProgress. Counts past
 * REPROD_SCRATCH_MB=1: several pieces, several rounds each. */
static void scenario_nonblocking(cudaStream_t stream)
{
    ncclComm_t comm = fresh_comm(0);
    size_t n = 600001;
    for (int round = 0; round < 3; round++) {
        float *x = device_contribution(30 + round, rank, n);
        ncclRedOp_t op = round == 1 ? ncclAvg : ncclSum;
        if (round < 2) {
            expect_code("nonblocking all-reduce", ncclAllReduce(x, x, n, ncclFloat32, op, comm, stream),
                        ncclInProgress);
            /* A call before the communicator is ready again (NCCL's ncclCommEnsureReady): the
             * shim's own rounds are still to come, whatever the library says. */
            if (!native && round == 0)
                expect_code("a call on a nonblocking communicator not ready",
                            ncclAllReduce(x, x, n, ncclFloat32, op, comm, stream),
                            ncclInvalidArgument);
        } else {
            CHECK_NCCL(ncclGroupStart());
            expect_code("nonblocking all-reduce in a group",
                        ncclAllReduce(x, x, n, ncclFloat32, op, comm, stream), ncclSuccess);
            expect_code("nonblocking ncclGroupEnd", ncclGroupEnd(), ncclInProgress);
        }
        wait_comm(comm);
        float *h = to_host(x, n, stream);
        check_sum("nonblocking", h, n, 30 + round, all_ranks, ranks, 1.0f,
                  round == 1 ? ranks : 1, 7);
        free(h);
        cudaFree(x);
    }
    expect_code("nonblocking finalize", ncclCommFinalize(comm), ncclInProgress);
    wait_comm(comm);
    expect_code("nonblocking destroy", ncclCommDestroy(comm), ncclSuccess);
}

static void scenario_graph(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 700001; /* three pieces at REPROD_SCRATCH_MB=1 */
    float *x = device_contribution(40, rank, n), *y;
    CHECK_CUDA(cudaMalloc((void **)&y, n * sizeof *y));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    CHECK_NCCL(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; replay++) {
        float *fresh = device_contribution(41 + replay, rank, n);
        CHECK_CUDA(cudaMemcpy(x, fresh, n * sizeof *x, cudaMemcpyDeviceToDevice));
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
        float *h = to_host(y, n, stream);
        check_sum("graph replay", h, n, 41 + replay, all_ranks, ranks, 1.0f, 1, 7);
        free(h);
        cudaFree(fresh);
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    cudaFree(x), cudaFree(y);
}

static void scenario_large(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 3 * 262144 + 11; /* 3 MiB of float32: three times REPROD_SCRATCH_MB=1 */
    float *x = device_contribution(50, rank, n);
    float *rs;
    CHECK_CUDA(cudaMalloc((void **)&rs, n / (size_t)ranks * sizeof *rs));
    CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream));
    float *h = to_host(x, n, stream);
    check_sum("large all-reduce", h, n, 50, all_ranks, ranks, 1.0f, 1, 997);
    check_from("large all-reduce (tail)", h, n - 40, n, 50, all_ranks, ranks, 1.0f, 1, 1);
    free(h);
    cudaFree(x), cudaFree(rs);
}

/* One thread drives three ranks of one process (ncclCommInitAll, a device each): the calls on
 * the three communicators are grouped, as NCCL requires, and the shim's work on each must run
 * in lockstep with the others'. Rank 0 of the MPI job only. */
static void scenario_initall(void)
{
    enum { DEVICES = 3 };
    if (rank != 0) return;
    ncclComm_t comms[DEVICES];
    cudaStream_t streams[DEVICES];
    float *buffers[DEVICES];
    size_t n = 100000; /* past the small path: exchange, reduce, share */
    int members[DEVICES] = {0, 1, 2};
    CHECK_NCCL(ncclCommInitAll(comms, DEVICES, NULL));
    for (int d = 0; d < DEVICES; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_CUDA(cudaStreamCreate(&streams[d]));
        buffers[d] = device_contribution(70, d, n);
    }
    CHECK_NCCL(ncclGroupStart());
    for (int d = 0; d < DEVICES; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        CHECK_NCCL(ncclAllReduce(buffers[d], buffers[d], n, ncclFloat32, ncclSum, comms[d],
                                 streams[d]));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int d = 0; d < DEVICES; d++) {
        CHECK_CUDA(cudaSetDevice(d));
        float *h = to_host(buffers[d], n, streams[d]);
        check_sum("initall", h, n, 70, members, DEVICES, 1.0f, 1, 7);
        free(h);
        cudaFree(buffers[d]);
        cudaStreamDestroy(streams[d]);
        CHECK_NCCL(ncclCommDestroy(comms[d]));
    }
    CHECK_CUDA(cudaSetDevice(0));
}

/* Each rank's PreMulSum scalar is its own (NCCL scales each input "locally"): rank r
 * multiplies by r + 1, with the scalar on the host and on the device, small and in pieces. */
static void scenario_premul_ranks(ncclComm_t comm, cudaStream_t stream)
{
    size_t counts[2] = {1000, 300001};
    float scalar = (float)(rank + 1), *device_scalar;
    CHECK_CUDA(cudaMalloc((void **)&device_scalar, sizeof scalar));
    CHECK_CUDA(cudaMemcpy(device_scalar, &scalar, sizeof scalar, cudaMemcpyHostToDevice));
    for (int k = 0; k < 2; k++)
        for (int residence = 0; residence < 2; residence++) {
            size_t n = counts[k];
            float *x = device_contribution(80 + k, rank, n);
            ncclRedOp_t op;
            CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, residence ? (void *)&scalar : device_scalar,
                                                ncclFloat32,
                                                residence ? ncclScalarHostImmediate
                                                          : ncclScalarDevice,
                                                comm));
            CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat32, op, comm, stream));
            CHECK_NCCL(ncclRedOpDestroy(op, comm));
            float *h = to_host(x, n, stream);
            for (size_t i = 0; i < n; i += 13) {
                uint64_t terms[ORACLE_MAX_TERMS];
                for (int r = 0; r < ranks; r++) {
                    float v = test_contribution(80 + k, r, i) * (float)(r + 1);
                    uint32_t bits;
                    memcpy(&bits, &v, 4);
                    terms[r] = bits;
                }
                uint64_t expected = oracle_exact(REPROD_FLOAT32, REPROD_SUM, REPROD_ROUND_NEAREST,
                                                 terms, ranks);
                uint32_t bits;
                memcpy(&bits, &h[i], 4);
                if (bits != expected && wrong++ < 5)
                    fprintf(stderr, "rank %d: premul-ranks count %zu %s: element %zu wrong\n", rank,
                            n, residence ? "host" : "device", i);
            }
            free(h);
            cudaFree(x);
        }
    cudaFree(device_scalar);
}

/* A group's calls keep their order: a Broadcast after an in-place AllReduce in the same group
 * broadcasts the sum; and two calls grouped on one rank, issued one by one on the others
 * (legal in NCCL), neither hang nor mix (pieces: REPROD_SCRATCH_MB=1). */
static void scenario_order(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 1000, big = 300001;
    float *x = device_contribution(90, rank, n), *y;
    CHECK_CUDA(cudaMalloc((void **)&y, n * sizeof *y));
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream));
    CHECK_NCCL(ncclBroadcast(x, y, n, ncclFloat32, 0, comm, stream));
    CHECK_NCCL(ncclGroupEnd());
    float *h = to_host(y, n, stream);
    check_sum("order: broadcast of the group's sum", h, n, 90, all_ranks, ranks, 1.0f, 1, 1);
    free(h);
    float *a = device_contribution(91, rank, big), *b = device_contribution(92, rank, big);
    if (rank == 0) CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclAllReduce(a, a, big, ncclFloat32, ncclSum, comm, stream));
    CHECK_NCCL(ncclAllReduce(b, b, big, ncclFloat32, ncclSum, comm, stream));
    if (rank == 0) CHECK_NCCL(ncclGroupEnd());
    float *ha = to_host(a, big, stream), *hb = to_host(b, big, stream);
    check_sum("order: grouped on one rank only (first)", ha, big, 91, all_ranks, ranks, 1.0f, 1, 101);
    check_sum("order: grouped on one rank only (second)", hb, big, 92, all_ranks, ranks, 1.0f, 1, 101);
    free(ha), free(hb);
    cudaFree(x), cudaFree(y), cudaFree(a), cudaFree(b);
}

/* The codes of erroneous calls, one line (compared with the native run's by the script), each
 * NCCL's exact one: ncclInvalidArgument, and ncclUnhandledCudaError for a destroyed stream (NCCL
 * asks CUDA about the stream: cudaStreamGetCaptureInfo fails). */
static void scenario_bad(ncclComm_t comm, cudaStream_t stream)
{
    float *x = device_contribution(60, rank, 16);
    ncclRedOp_t premul;
    float scalar = 2.0f;
    cudaStream_t dead;
    CHECK_CUDA(cudaStreamCreate(&dead));
    CHECK_CUDA(cudaStreamDestroy(dead));
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate,
                                        comm));
    CHECK_NCCL(ncclRedOpDestroy(premul, comm));
    int codes[7] = {
        ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, NULL, stream),
        ncclAllReduce(x, x, 16, (ncclDataType_t)(ncclNumTypes + 3), ncclSum, comm, stream),
        ncclAllReduce(x, x, 16, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 100), comm, stream),
        ncclAllReduce(NULL, x, 16, ncclFloat32, ncclSum, comm, stream),
        ncclAllReduce(x, x, 16, ncclFloat32, premul, comm, stream),
        ncclReduce(x, x, 16, ncclFloat32, ncclSum, ranks + 5, comm, stream),
        ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, comm, dead),
    };
    const int expected[7] = {4, 4, 4, 4, 4, 4, 1};
    if (rank == 0)
        printf("bad: %d %d %d %d %d %d %d\n", codes[0], codes[1], codes[2], codes[3], codes[4],
               codes[5], codes[6]);
    for (int i = 0; i < 7; i++)
        expect_code("an erroneous call", codes[i], expected[i]);
    cudaFree(x);
}

/* A bad call inside a group (issue 17 B6): it returns its code at once and fails the group:
 * ncclGroupEnd returns that code and none of the group's calls runs, not even the valid
 * shimmed all-reduces around it (NCCL's ncclGroupErrCheck). One line of codes, compared with
 * the native run's. */
static void scenario_bad_group(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 300001;
    float *x = device_contribution(120, rank, n), *y = device_contribution(121, rank, n);
    cudaStream_t dead;
    CHECK_CUDA(cudaStreamCreate(&dead));
    CHECK_CUDA(cudaStreamDestroy(dead));
    static const char *const names[5] = {"NULL comm", "bad type", "NULL buffer", "bad root",
                                         "destroyed stream"};
    char line[160] = "bad-group:";
    for (int bad = 0; bad < 5; bad++) {
        ncclResult_t code = ncclSuccess, expected = bad == 4 ? ncclUnhandledCudaError
                                                             : ncclInvalidArgument;
        CHECK_NCCL(ncclGroupStart());
        expect_code("a valid all-reduce in a group", ncclAllReduce(x, x, n, ncclFloat32, ncclSum,
                                                                   comm, stream),
                    ncclSuccess);
        switch (bad) {
        case 0: code = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, NULL, stream); break;
        case 1: code = ncclAllReduce(x, x, n, (ncclDataType_t)99, ncclSum, comm, stream); break;
        case 2: code = ncclAllReduce(NULL, x, n, ncclFloat32, ncclSum, comm, stream); break;
        case 3: code = ncclReduce(x, x, n, ncclFloat32, ncclSum, ranks + 5, comm, stream); break;
        case 4: code = ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, dead); break;
        }
        expect_code("a valid broadcast in a group", ncclBroadcast(y, y, n, ncclFloat32, 0, comm,
                                                                  stream),
                    ncclSuccess);
        expect_code("a valid all-reduce in a group", ncclAllReduce(y, y, n, ncclFloat32, ncclSum,
                                                                   comm, stream),
                    ncclSuccess);
        ncclResult_t ended = ncclGroupEnd();
        char what[96];
        snprintf(what, sizeof what, "a %s inside a group", names[bad]);
        expect_code(what, code, expected);
        snprintf(what, sizeof what, "ncclGroupEnd of a group with a %s", names[bad]);
        expect_code(what, ended, expected);
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d/%d", code, ended);
        float *hx = to_host(x, n, stream), *hy = to_host(y, n, stream);
        for (size_t i = 0; i < n; i += 101)
            if ((hx[i] != test_contribution(120, rank, i) || hy[i] != test_contribution(121, rank, i)) &&
                wrong++ < 20) {
                fprintf(stderr, "rank %d: a group with a %s ran: element %zu changed\n", rank,
                        names[bad], i);
                break;
            }
        free(hx), free(hy);
    }
    if (rank == 0) printf("%s\n", line);
    cudaFree(x), cudaFree(y);
}

/* A group's Send and Recv around a shimmed all-reduce (issue 17 B3): NCCL runs a group's
 * point-to-point calls together, wherever they stand in it; messages of 1.2 MB, past the
 * stand-in's 256 KiB mailbox. `placement`, one letter a call in the group's order (S: Send,
 * R: Recv, A: the all-reduce); "*" varies with the rank: even ranks Send, Recv, all-reduce, odd
 * ones all-reduce, Recv, Send (NCCL does not order a group's point-to-point calls against its
 * collectives). Without "A", a group of Send and Recv alone (PyTorch's batch_isend_irecv). */
static void scenario_p2p(ncclComm_t comm, cudaStream_t stream, const char *placement)
{
    size_t n = (size_t)1 << 20, m = 300000;
    int next = (rank + 1) % ranks, previous = (rank + ranks - 1) % ranks;
    float *x = device_contribution(100, rank, n), *out = device_contribution(101, rank, m), *in;
    char name[64];
    snprintf(name, sizeof name, "p2p-%s", placement);
    if (strcmp(placement, "*") == 0) placement = rank % 2 ? "ARS" : "SRA";
    CHECK_CUDA(cudaMalloc((void **)&in, m * sizeof *in));
    CHECK_NCCL(ncclGroupStart());
    for (const char *call = placement; *call; call++) {
        ncclResult_t rc = *call == 'S'   ? ncclSend(out, m, ncclFloat32, next, comm, stream)
                          : *call == 'R' ? ncclRecv(in, m, ncclFloat32, previous, comm, stream)
                                         : ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream);
        expect_code(name, rc, ncclSuccess);
    }
    expect_code(name, ncclGroupEnd(), ncclSuccess);
    float *hx = to_host(x, n, stream), *hin = to_host(in, m, stream);
    if (strchr(placement, 'A')) check_sum(name, hx, n, 100, all_ranks, ranks, 1.0f, 1, 61);
    for (size_t i = 0; i < m; i++)
        if (hin[i] != test_contribution(101, previous, i) && wrong++ < 20) {
            fprintf(stderr, "rank %d: %s: element %zu from rank %d is %a\n", rank, name, i,
                    previous, hin[i]);
            break;
        }
    free(hx), free(hin);
    cudaFree(x), cudaFree(out), cudaFree(in);
}

/* A call of NCCL's failing midway through a shimmed all-reduce of several pieces (issue 17 B8:
 * the script makes the stand-in fail the third call issued on the communicator, on every rank,
 * and reads how many calls were made on it after that: none). The all-reduce returns NCCL's
 * error. */
static void scenario_fail_midway(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = (size_t)1 << 20;
    float *x = device_contribution(110, rank, n);
    expect_code("fail-midway", ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream),
                ncclSystemError);
    ncclResult_t state = ncclSuccess;
    expect_code("fail-midway async error", ncclCommGetAsyncError(comm, &state), ncclSuccess);
    expect_code("fail-midway state", state, ncclSystemError);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cudaFree(x);
}

/* Every placement of a group's Send and Recv around a shimmed all-reduce. */
static void scenario_p2p_placements(ncclComm_t comm, cudaStream_t stream)
{
    const char *placements[] = {"ASR", "SAR", "RAS", "SRA", "*", "SR", "RS"};
    for (size_t i = 0; i < sizeof placements / sizeof placements[0]; i++)
        scenario_p2p(comm, stream, placements[i]);
}

/* Twelve grouped 4 MiB all-reduces (issue 17 B4): the script reads the stand-in's peak of
 * stream-ordered memory, which must stay within REPROD_SCRATCH_MB whatever the group's size. */
static void scenario_scratch(ncclComm_t comm, cudaStream_t stream)
{
    enum { CALLS = 12 };
    size_t n = (size_t)1 << 20;
    float *x[CALLS];
    for (int k = 0; k < CALLS; k++)
        x[k] = device_contribution(110 + k, rank, n);
    CHECK_NCCL(ncclGroupStart());
    for (int k = 0; k < CALLS; k++)
        expect_code("scratch all-reduce", ncclAllReduce(x[k], x[k], n, ncclFloat32, ncclSum, comm,
                                                        stream),
                    ncclSuccess);
    expect_code("scratch ncclGroupEnd", ncclGroupEnd(), ncclSuccess);
    for (int k = 0; k < CALLS; k++) {
        float *h = to_host(x[k], n, stream);
        check_sum("scratch all-reduce", h, n, 110 + k, all_ranks, ranks, 1.0f, 1, 997);
        free(h);
        cudaFree(x[k]);
    }
}

/* Long enough for the main thread to be waiting in its call on a loaded machine (sanitizers, 2
 * cores, 3 oversubscribed ranks), short of the stand-in's own timeout (the script's 20 s). */
#define WATCHDOG_SECONDS 4

struct watchdog {
    ncclComm_t comm;
    _Atomic int calling; /* the main thread is about to call: WATCHDOG_SECONDS later, abort */
};

static void *watchdog_main(void *argument)
{
    struct watchdog *watchdog = argument;
    while (!atomic_load(&watchdog->calling))
        usleep(1000);
    sleep(WATCHDOG_SECONDS);
    expect_code("ncclCommAbort from the watchdog thread", ncclCommAbort(watchdog->comm),
                ncclSuccess);
    return NULL;
}

/* The application's own timeout runs (issue 17 B7, B8). On a fresh nonblocking communicator
 * rank 1 never calls; the other ranks' all-reduce returns ncclInProgress at once (NCCL's launch
 * waits for its peers' connection on its own thread) and stays in progress while they poll for
 * their own second; then they abort the communicator, as PyTorch's watchdog does. On a fresh
 * blocking one the call waits for rank 1 (the connection at first use) until another thread
 * aborts the communicator; it then returns NCCL's error. Either way the shim must issue nothing
 * more on it (the stand-in reports any use after abort). */
static void scenario_watchdog(int blocking)
{
    if (ranks < 2) return;
    ncclComm_t comm = fresh_comm(blocking);
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    size_t n = 300001;
    float *x = device_contribution(130 + blocking, rank, n);
    if (rank != 1) {
        pthread_t thread;
        struct watchdog watchdog = {comm, 0};
        if (blocking) pthread_create(&thread, NULL, watchdog_main, &watchdog);
        atomic_store(&watchdog.calling, 1);
        expect_code(blocking ? "all-reduce on a communicator aborted by another thread"
                             : "all-reduce on a nonblocking communicator whose peer never comes",
                    ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream),
                    blocking ? ncclRemoteError : ncclInProgress);
        double deadline = MPI_Wtime() + 1.0;
        ncclResult_t state = ncclInProgress;
        while (!blocking && MPI_Wtime() < deadline && state == ncclInProgress)
            CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
        if (!blocking) expect_code("the communicator polled for a second", state, ncclInProgress);
        if (blocking) pthread_join(thread, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* an abort on one rank ends every rank's waits */
    if (!blocking || rank == 1)
        expect_code("ncclCommAbort after the application's own timeout", ncclCommAbort(comm),
                    ncclSuccess);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaStreamDestroy(stream));
    cudaFree(x);
}

/* Two chained in-place all-reduces in one group (issue 17 B10): the second reads what the
 * first wrote. The script checks that the trace hashes the second's input in stream order:
 * equal to the first's output. */
static void scenario_chain(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 5000;
    float *x = device_contribution(140, rank, n);
    CHECK_NCCL(ncclGroupStart());
    expect_code("chain all-reduce", ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream),
                ncclSuccess);
    expect_code("chain all-reduce", ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, stream),
                ncclSuccess);
    expect_code("chain ncclGroupEnd", ncclGroupEnd(), ncclSuccess);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cudaFree(x);
}

int main(int argc, char **argv)
{
    ncclUniqueId id = join_world(&argc, &argv);
    for (int r = 0; r < 64; r++)
        all_ranks[r] = r;
    if (argc > 1 && strcmp(argv[1], "--native") == 0) native = 1, argc--, argv++;
    ncclComm_t comm = world_comm(id);
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    const char *all[] = {"group",     "threads", "split",    "nonblocking",  "graph",
                         "large",     "initall", "order",    "premul-ranks", "bad",
                         "bad-group", "p2p"};
    const char **names = argc > 1 ? (const char **)argv + 1 : all;
    int count = argc > 1 ? argc - 1 : (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < count; i++) {
        long before = wrong;
        if (strcmp(names[i], "group") == 0) scenario_group(comm, stream);
        else if (strcmp(names[i], "threads") == 0) scenario_threads();
        else if (strcmp(names[i], "split") == 0) scenario_split(comm, stream);
        else if (strcmp(names[i], "nonblocking") == 0) scenario_nonblocking(stream);
        else if (strcmp(names[i], "graph") == 0) scenario_graph(comm, stream);
        else if (strcmp(names[i], "large") == 0) scenario_large(comm, stream);
        else if (strcmp(names[i], "initall") == 0) scenario_initall();
        else if (strcmp(names[i], "premul-ranks") == 0) scenario_premul_ranks(comm, stream);
        else if (strcmp(names[i], "order") == 0) scenario_order(comm, stream);
        else if (strcmp(names[i], "bad") == 0) scenario_bad(comm, stream);
        else if (strcmp(names[i], "bad-group") == 0) scenario_bad_group(comm, stream);
        else if (strcmp(names[i], "p2p") == 0) scenario_p2p_placements(comm, stream);
        else if (strcmp(names[i], "scratch") == 0) scenario_scratch(comm, stream);
        else if (strcmp(names[i], "watchdog") == 0) scenario_watchdog(0);
        else if (strcmp(names[i], "watchdog-blocking") == 0) scenario_watchdog(1);
        else if (strcmp(names[i], "chain") == 0) scenario_chain(comm, stream);
        else if (strcmp(names[i], "fail-midway") == 0) scenario_fail_midway(comm, stream);
        else {
            fprintf(stderr, "features: unknown scenario %s\n", names[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        long failed = wrong - before, total;
        MPI_Allreduce(&failed, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) printf("%s: %s\n", total ? "FAIL" : "ok", names[i]);
    }
    CHECK_NCCL(ncclCommDestroy(comm));
    long total;
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return total ? 1 : 0;
}
