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
 * Usage: features SCENARIO... (all when none is named). Rank 0 prints "ok: <scenario>".
 */
#include "nccl_test.h"

#include "engine_oracle.h"

#include <pthread.h>

static long wrong;

/* Element i of rank r's float32 contribution in data set `set`. */
static float contribution(int set, int r, size_t i)
{
    uint64_t x = test_mix(((uint64_t)set << 48) ^ ((uint64_t)r << 32) ^ i);
    float v = ldexpf((float)(x >> 40) / 16777216.0f + 0.5f, (int)(x % 41) - 20);
    return (x >> 8) & 1 ? -v : v;
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
    for (size_t i = first; i < count; i += step) {
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int k = 0; k < member_count; k++) {
            float v = contribution(set, members[k], i) * scale; /* rounded to float, as NCCL */
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
        host[i] = contribution(set, r, i);
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
            float v = contribution(3, k, (size_t)rank * n + i);
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
    size_t n = 777;
    CHECK_CUDA(cudaStreamCreate(&stream));
    for (int round = 0; round < 10; round++) {
        float *x = device_contribution(job->set + round, rank, n);
        CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, job->comm, stream));
        float *h = to_host(x, n, stream);
        check_sum("threads", h, n, job->set + round, all_ranks, ranks, 1.0f, 1, 1);
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

/* Poll a nonblocking communicator until its last operation has finished. */
static void wait_comm(ncclComm_t comm)
{
    ncclResult_t state;
    do {
        CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    } while (state == ncclInProgress);
    CHECK_NCCL(state);
}

static void scenario_nonblocking(cudaStream_t stream)
{
    ncclUniqueId id;
    if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRankConfig(&comm, ranks, id, rank, &config));
    wait_comm(comm);
    size_t n = 4000;
    for (int round = 0; round < 3; round++) {
        float *x = device_contribution(30 + round, rank, n);
        CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat32, round == 1 ? ncclAvg : ncclSum, comm,
                                 stream));
        wait_comm(comm);
        float *h = to_host(x, n, stream);
        check_sum("nonblocking", h, n, 30 + round, all_ranks, ranks, 1.0f,
                  round == 1 ? ranks : 1, 1);
        free(h);
        cudaFree(x);
    }
    CHECK_NCCL(ncclCommFinalize(comm));
    wait_comm(comm);
    CHECK_NCCL(ncclCommDestroy(comm));
}

static void scenario_graph(ncclComm_t comm, cudaStream_t stream)
{
    size_t n = 3000;
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
        check_sum("graph replay", h, n, 41 + replay, all_ranks, ranks, 1.0f, 1, 1);
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
                    float v = contribution(80 + k, r, i) * (float)(r + 1);
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

/* The codes of erroneous calls, one line (compared with the native run's by the script). */
static void scenario_bad(ncclComm_t comm, cudaStream_t stream)
{
    float *x = device_contribution(60, rank, 16);
    ncclRedOp_t premul;
    float scalar = 2.0f;
    CHECK_NCCL(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat32, ncclScalarHostImmediate,
                                        comm));
    CHECK_NCCL(ncclRedOpDestroy(premul, comm));
    int codes[6] = {
        ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, NULL, stream),
        ncclAllReduce(x, x, 16, (ncclDataType_t)(ncclNumTypes + 3), ncclSum, comm, stream),
        ncclAllReduce(x, x, 16, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 100), comm, stream),
        ncclAllReduce(NULL, x, 16, ncclFloat32, ncclSum, comm, stream),
        ncclAllReduce(x, x, 16, ncclFloat32, premul, comm, stream),
        ncclReduce(x, x, 16, ncclFloat32, ncclSum, ranks + 5, comm, stream),
    };
    if (rank == 0)
        printf("bad: %d %d %d %d %d %d\n", codes[0], codes[1], codes[2], codes[3], codes[4],
               codes[5]);
    for (int i = 0; i < 6; i++)
        if (codes[i] == ncclSuccess) wrong++;
    cudaFree(x);
}

int main(int argc, char **argv)
{
    ncclUniqueId id = join_world(&argc, &argv);
    for (int r = 0; r < 64; r++)
        all_ranks[r] = r;
    ncclComm_t comm = world_comm(id);
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    const char *all[] = {"group", "threads", "split",        "nonblocking", "graph",
                         "large", "initall", "premul-ranks", "order",       "bad"};
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
