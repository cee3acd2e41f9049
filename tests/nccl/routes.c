/* routes.c: the same exact sums whatever the route and the world size (tests/nccl/nccl_routes.sh).
 *
 * An ordinary NCCL program. Eight sources hold the data: rank r < 8 holds source r, the other
 * ranks hold -0 everywhere (which changes no exact sum), so that 8, 16 or 32 ranks reduce the same
 * terms and must give the same bits. The elements cover what the fixed route's layout must get
 * right: wide spans, spans over the whole range of the type (many words an element), exact
 * cancellation, every term -0, infinities and NaN, subnormals.
 * Scenarios run in the order given (e.g. "routes group graph"):
 *   routes spread [--rounding R]   AllReduce, ReduceScatter, Reduce (root: the last rank),
 *                                  sum and PreMulSum (host scalar 1), each type; every element
 *                                  against MPFR; prints "spread cases C wrong W digest D"
 *                                  (the digest of every result, in the order of the vector)
 *   routes group                   four calls of mixed types and collectives in one group
 *   routes graph                   two calls captured into a graph, replayed twice
 *   routes count N                 one float32 ncclAllReduce of N elements, nothing else (what
 *                                  the stand-in counts, NCCL_STANDIN_COUNTS, is that call's)
 *   routes count16 N [--exact]     the same in bfloat16, of similar magnitudes (--exact: every
 *                                  997th element of the result checked against MPFR)
 *   routes count64 N [--exact]     the same in binary64, within 4 binades
 *   routes switch16 N              the same as count16, but elements 2^19 .. 2^19 + 63 of the
 *                                  odd ranks 2^40 smaller (one narrow word does not hold them:
 *                                  they take two, every other element one); every 997th element
 *                                  and each of those against MPFR
 *   routes count32 N [--exact]     the same in binary32, within 4 binades (one int64 word)
 *   routes sparse32 N              as count32, but every 1,024th element (i % 1024 == 5) of the
 *                                  odd ranks 2^60 smaller: those take two int64 words, the others
 *                                  one; every 997th element and each of those against MPFR
 * Exit status 1 when an element is wrong (rank 0).
 */
#include "nccl_test.h"

#include "engine_oracle.h"

#define SOURCES 8
#define VECTOR  96 /* elements of each vector: divides by 8, 16, 32 (ReduceScatter's blocks) */

static const ncclDataType_t nccl_types[4] = {ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};
static const char *const collective_names[3] = {"AllReduce", "ReduceScatter", "Reduce"};
static reprod_rounding rounding = REPROD_ROUND_NEAREST;
static long cases, wrong;

/* Element i of source v (v >= SOURCES: -0). */
static uint64_t term(reprod_type t, int v, size_t i)
{
    const struct tfmt *f = &test_formats[t];
    if (v >= SOURCES) return tf_sign(f);
    uint64_t r = test_mix(((uint64_t)v << 40) ^ (i * 0x9e37ull) ^ ((uint64_t)t << 56));
    int top = (1 << f->eb) - 2, sign = (int)(r & 1);
    uint64_t frac = (r >> 12) & tf_frac_mask(f);
    switch (i % 8) {
    case 5: /* the whole range: the largest binades against subnormals */
        return tf_make(f, sign, v == 0 ? top : v == 1 ? top - 1 : v % 3 == 0 ? 0 : 1 + v, frac);
    case 6: /* exact cancellation, and now and then an infinity or NaN */
        if (i % 48 == 6 && v == 3) return tf_inf(f) | (i % 96 == 6 ? 0 : tf_sign(f));
        if (i % 48 == 30 && v == 5) return f->nan;
        if (v % 2 == 1) return term(t, v - 1, i) ^ tf_sign(f);
        return tf_make(f, sign, f->bias + (int)((r >> 3) % 20), frac);
    case 7: /* every term -0 */
        return tf_sign(f);
    default: { /* a wide span around 1 */
        int span = t == REPROD_FLOAT16 ? 12 : t == REPROD_FLOAT64 ? 200 : 60;
        return tf_make(f, sign, f->bias - span / 2 + (int)((r >> 1) % (uint64_t)span), frac);
    }
    }
}

static void store(reprod_type t, void *array, size_t i, uint64_t bits)
{
    memcpy((char *)array + i * tf_size(t), &bits, tf_size(t)); /* little-endian */
}

static uint64_t load(reprod_type t, const void *array, size_t i)
{
    uint64_t bits = 0;
    memcpy(&bits, (const char *)array + i * tf_size(t), tf_size(t));
    return bits;
}

/* One rank's device buffers of one call. */
struct call {
    int collective; /* 0 AllReduce, 1 ReduceScatter, 2 Reduce */
    reprod_type type;
    int premul;
    void *send, *recv;
    size_t count; /* the call's count: ReduceScatter's is a block */
};

static void call_make(struct call *c, int collective, reprod_type t, int premul)
{
    size_t s = tf_size(t);
    c->collective = collective, c->type = t, c->premul = premul;
    c->count = collective == 1 ? VECTOR / (size_t)ranks : VECTOR;
    char *host = malloc(VECTOR * s);
    for (size_t i = 0; i < VECTOR; i++)
        store(t, host, i, term(t, rank, i));
    CHECK_CUDA(cudaMalloc(&c->send, VECTOR * s));
    CHECK_CUDA(cudaMalloc(&c->recv, VECTOR * s));
    CHECK_CUDA(cudaMemcpy(c->send, host, VECTOR * s, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(c->recv, 0, VECTOR * s));
    free(host);
}

/* Issue the call (PreMulSum by 1, a host scalar: the op made and destroyed around it). */
static void call_issue(const struct call *c, ncclComm_t comm, cudaStream_t stream)
{
    ncclDataType_t dt = nccl_types[c->type];
    ncclRedOp_t op = ncclSum;
    uint64_t one = tf_make(&test_formats[c->type], 0, test_formats[c->type].bias, 0); /* 1 */
    if (c->premul) CHECK_NCCL(ncclRedOpCreatePreMulSum(&op, &one, dt, ncclScalarHostImmediate, comm));
    if (c->collective == 0) CHECK_NCCL(ncclAllReduce(c->send, c->recv, c->count, dt, op, comm, stream));
    if (c->collective == 1) CHECK_NCCL(ncclReduceScatter(c->send, c->recv, c->count, dt, op, comm, stream));
    if (c->collective == 2) CHECK_NCCL(ncclReduce(c->send, c->recv, c->count, dt, op, ranks - 1, comm, stream));
    if (c->premul) CHECK_NCCL(ncclRedOpDestroy(op, comm));
}

/* Check this rank's results against MPFR and gather the whole result vector to rank 0, whose
 * digest it joins. The stream must be done. */
static void call_check(struct call *c, uint64_t *digest)
{
    size_t s = tf_size(c->type);
    size_t mine = c->collective == 1 ? c->count : c->collective == 2 && rank != ranks - 1 ? 0 : VECTOR;
    size_t first = c->collective == 1 ? (size_t)rank * c->count : 0;
    char *result = calloc(VECTOR, s);
    if (mine) CHECK_CUDA(cudaMemcpy(result, c->recv, mine * s, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < mine; i++) {
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int r = 0; r < ranks; r++)
            terms[r] = term(c->type, r, first + i);
        uint64_t expected = oracle_exact(c->type, REPROD_SUM, rounding, terms, ranks);
        uint64_t got = load(c->type, result, i);
        if (got == expected) continue;
        if (wrong++ < 5)
            fprintf(stderr, "rank %d of %d: %s %s%s: element %zu is 0x%llx, expected 0x%llx\n", rank, ranks,
                    collective_names[c->collective], test_formats[c->type].name, c->premul ? " premul" : "",
                    first + i, (unsigned long long)got, (unsigned long long)expected);
    }
    cases++;
    char *whole = rank == 0 ? malloc(VECTOR * s) : NULL;
    if (c->collective == 1) {
        MPI_Gather(result, (int)(mine * s), MPI_BYTE, whole, (int)(mine * s), MPI_BYTE, 0, MPI_COMM_WORLD);
    } else if (c->collective == 2) {
        if (rank == ranks - 1 && ranks > 1) MPI_Send(result, (int)(VECTOR * s), MPI_BYTE, 0, 7, MPI_COMM_WORLD);
        if (rank == 0 && ranks > 1) MPI_Recv(whole, (int)(VECTOR * s), MPI_BYTE, ranks - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank == 0 && ranks == 1) memcpy(whole, result, VECTOR * s);
    } else if (rank == 0) {
        memcpy(whole, result, VECTOR * s);
    }
    if (rank == 0) test_digest(digest, whole, VECTOR * s);
    free(whole);
    free(result);
    CHECK_CUDA(cudaFree(c->send));
    CHECK_CUDA(cudaFree(c->recv));
}

static void spread(ncclComm_t comm, cudaStream_t stream, uint64_t *digest)
{
    for (int collective = 0; collective < 3; collective++)
        for (int t = 0; t < 4; t++)
            for (int premul = 0; premul < 2; premul++) {
                struct call c;
                call_make(&c, collective, (reprod_type)t, premul);
                call_issue(&c, comm, stream);
                CHECK_CUDA(cudaStreamSynchronize(stream));
                call_check(&c, digest);
            }
}

/* Four calls of one group: every type, every collective. */
static void group(ncclComm_t comm, cudaStream_t stream, uint64_t *digest)
{
    struct call c[4];
    call_make(&c[0], 0, REPROD_FLOAT32, 0);
    call_make(&c[1], 1, REPROD_FLOAT64, 0);
    call_make(&c[2], 2, REPROD_BFLOAT16, 1);
    call_make(&c[3], 0, REPROD_FLOAT16, 0);
    CHECK_NCCL(ncclGroupStart());
    for (int i = 0; i < 4; i++)
        call_issue(&c[i], comm, stream);
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int i = 0; i < 4; i++)
        call_check(&c[i], digest);
}

/* Two calls captured into a graph, the graph replayed twice (the results of the second). */
static void graph(ncclComm_t comm, cudaStream_t stream, uint64_t *digest)
{
    struct call c[2];
    call_make(&c[0], 0, REPROD_FLOAT32, 0);
    call_make(&c[1], 1, REPROD_FLOAT64, 0);
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    call_issue(&c[0], comm, stream);
    call_issue(&c[1], comm, stream);
    CHECK_CUDA(cudaStreamEndCapture(stream, &g));
    CHECK_CUDA(cudaGraphInstantiate(&exec, g, 0));
    for (int replay = 0; replay < 2; replay++) {
        CHECK_CUDA(cudaMemset(c[0].recv, 0, VECTOR * 4));
        CHECK_CUDA(cudaGraphLaunch(exec, stream));
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(g));
    call_check(&c[0], digest);
    call_check(&c[1], digest);
}

static void count_call(ncclComm_t comm, cudaStream_t stream, size_t count)
{
    float *data;
    CHECK_CUDA(cudaMalloc((void **)&data, count * sizeof *data));
    float *host = malloc(count * sizeof *host);
    for (size_t i = 0; i < count; i++)
        host[i] = test_contribution(1, rank, i);
    CHECK_CUDA(cudaMemcpy(data, host, count * sizeof *host, cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaFree(data));
    free(host);
}

/* Element i of rank r's bfloat16 contribution of similar magnitudes (within 4 binades of each
 * other, as a gradient's often are). */
static uint64_t similar_bf16(int r, size_t i)
{
    float v = test_contribution(1, r, i);
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits = (bits & 0x807fffffu) | (uint32_t)(127 + ((bits >> 23) & 3)) << 23;
    return (uint16_t)(bits >> 16);
}

/* The same in binary64: within 4 binades, one bucket of the fixed route's (8 binades). */
static uint64_t similar_f64(int r, size_t i)
{
    double v = (double)test_contribution(1, r, i) * (1.0 + 0x1p-40 * (double)(i % 4099));
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (bits & 0x800fffffffffffffull) | (uint64_t)(1024 + ((bits >> 52) & 3)) << 52;
}

/* The same in binary32. */
static uint64_t similar_f32(int r, size_t i)
{
    float v = test_contribution(1, r, i);
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (bits & 0x807fffffu) | (uint32_t)(127 + ((bits >> 23) & 3)) << 23;
}

#define SWITCH_FIRST    ((size_t)1 << 19)
#define SWITCH_ELEMENTS 64
#define SPARSE_EVERY    1024
#define SPARSE_AT       5

/* The elements the scenarios below move far apart (all checked against MPFR with --exact). */
static int far_element(size_t i)
{
    return i - SWITCH_FIRST < SWITCH_ELEMENTS || i % SPARSE_EVERY == SPARSE_AT;
}

/* As similar_f32, but every SPARSE_EVERY-th element of the odd ranks 2^60 smaller: 88 bits
 * from the largest term's top to the smallest's last, past one int64 word's W (at most 62). */
static uint64_t sparse_f32(int r, size_t i)
{
    uint64_t v = similar_f32(r, i);
    if (r % 2 && i % SPARSE_EVERY == SPARSE_AT) v -= (uint64_t)60 << 23; /* the exponent field */
    return v;
}

/* As similar_bf16, but the odd ranks' elements SWITCH_FIRST .. + SWITCH_ELEMENTS - 1 are 2^40
 * smaller: 40 binades and more apart, past any narrow word's W (31 - ceil(log2 N) bits less
 * bfloat16's 8 of precision), within one int64 word's. */
static uint64_t switching_bf16(int r, size_t i)
{
    uint64_t v = similar_bf16(r, i);
    if (r % 2 && i - SWITCH_FIRST < SWITCH_ELEMENTS) v -= 40 << 7; /* the exponent field */
    return v;
}

/* One ncclAllReduce of N elements of `term_of` (bfloat16, binary32 or binary64), nothing else
 * (the fixed route's layout); with `exact`, every 997th element of the result, and those
 * switching_bf16 and sparse_f32 make far apart, checked against MPFR. */
static void count_similar(ncclComm_t comm, cudaStream_t stream, reprod_type t, size_t count,
                          int exact, uint64_t (*term_of)(int r, size_t i))
{
    size_t size = tf_size(t);
    unsigned char *data, *host = malloc(count * size);
    CHECK_CUDA(cudaMalloc((void **)&data, count * size));
    for (size_t i = 0; i < count; i++)
        store(t, host, i, term_of(rank, i));
    CHECK_CUDA(cudaMemcpy(data, host, count * size, cudaMemcpyHostToDevice));
    ncclDataType_t dt = t == REPROD_FLOAT64   ? ncclFloat64
                        : t == REPROD_FLOAT32 ? ncclFloat32
                                              : ncclBfloat16;
    CHECK_NCCL(ncclAllReduce(data, data, count, dt, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host, data, count * size, cudaMemcpyDeviceToHost));
    for (size_t i = 0; exact && i < count; i++) {
        if (i % 997 != 0 && !far_element(i)) continue;
        uint64_t terms[ORACLE_MAX_TERMS];
        for (int r = 0; r < ranks; r++)
            terms[r] = term_of(r, i);
        uint64_t expected = oracle_exact(t, REPROD_SUM, rounding, terms, ranks);
        if (load(t, host, i) != expected && wrong++ < 5)
            fprintf(stderr, "rank %d of %d: count: element %zu is 0x%llx, expected 0x%llx\n", rank,
                    ranks, i, (unsigned long long)load(t, host, i), (unsigned long long)expected);
    }
    cases++;
    CHECK_CUDA(cudaFree(data));
    free(host);
}

int main(int argc, char **argv)
{
    ncclUniqueId id = join_world(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr,
                "usage: routes spread|group|graph|count N|count16 N [--exact]|count64 N [--exact]|"
                "switch16 N|count32 N [--exact]|sparse32 N "
                "[--rounding R]\n");
        return 2;
    }
    int exact = 0; /* count16: the results must be the exact sums */
    for (int i = 2; i < argc; i++)
        if (strcmp(argv[i], "--exact") == 0)
            exact = 1;
        else if (strcmp(argv[i], "--rounding") == 0 && i + 1 < argc) {
            const char *const words[] = {"nearest", "zero", "up", "down"};
            for (int k = 0; k < 4; k++)
                if (strcmp(argv[i + 1], words[k]) == 0) rounding = (reprod_rounding)k;
        }
    if (ranks > ORACLE_MAX_TERMS || VECTOR % ranks != 0) {
        fprintf(stderr, "routes: %d ranks: the vector of %d does not divide\n", ranks, VECTOR);
        return 2;
    }
    ncclComm_t comm = world_comm(id);
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        const char *scenario = argv[i];
        uint64_t digest = 0xcbf29ce484222325ull;
        cases = wrong = 0;
        if (strcmp(scenario, "spread") == 0) spread(comm, stream, &digest);
        else if (strcmp(scenario, "group") == 0) group(comm, stream, &digest);
        else if (strcmp(scenario, "graph") == 0) graph(comm, stream, &digest);
        else if (strcmp(scenario, "count") == 0 && i + 1 < argc)
            count_call(comm, stream, (size_t)strtoull(argv[++i], NULL, 10));
        else if (strcmp(scenario, "count16") == 0 && i + 1 < argc)
            count_similar(comm, stream, REPROD_BFLOAT16, (size_t)strtoull(argv[++i], NULL, 10),
                          exact, similar_bf16);
        else if (strcmp(scenario, "count64") == 0 && i + 1 < argc)
            count_similar(comm, stream, REPROD_FLOAT64, (size_t)strtoull(argv[++i], NULL, 10),
                          exact, similar_f64);
        else if (strcmp(scenario, "switch16") == 0 && i + 1 < argc)
            count_similar(comm, stream, REPROD_BFLOAT16, (size_t)strtoull(argv[++i], NULL, 10), 1,
                          switching_bf16);
        else if (strcmp(scenario, "count32") == 0 && i + 1 < argc)
            count_similar(comm, stream, REPROD_FLOAT32, (size_t)strtoull(argv[++i], NULL, 10),
                          exact, similar_f32);
        else if (strcmp(scenario, "sparse32") == 0 && i + 1 < argc)
            count_similar(comm, stream, REPROD_FLOAT32, (size_t)strtoull(argv[++i], NULL, 10), 1,
                          sparse_f32);
        else
            continue; /* --rounding R, --exact */
        long totals[2] = {cases, wrong}, sums[2];
        MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        failed |= rank == 0 && sums[1] != 0;
        if (rank == 0 && strncmp(scenario, "count", 5) != 0)
            printf("%s cases %ld wrong %ld digest %016llx\n", scenario, sums[0], sums[1],
                   (unsigned long long)digest);
    }
    CHECK_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return failed;
}
