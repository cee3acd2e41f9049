/* exactness.c: ncclAllReduce, ncclReduceScatter and ncclReduce of the same contributions,
 * placed on the ranks in several rotations, for every float type, sum, average, PreMulSum
 * (host and device scalar) and product, in place and not, with counts that do not divide by
 * the rank count; each result is compared bitwise with MPFR (tests/unit/engine_oracle.h).
 *
 * An ordinary NCCL program. Under the shim every check holds; with --native it skips the
 * oracle and reports how many different results the rotations gave.
 *   exactness [--native] [--quick] [--large] [--ordered] [--rounding nearest|zero|up|down]
 * --ordered: the oracle is the rank-order fold (REPROD_MODE=ordered); --rounding: the direction
 * of REPROD_ROUNDING; --quick: one count per case; --large: also counts past the small path.
 * Output (rank 0): "cases <n> wrong <w> digest <hex> distinct <d>": the digest of rotation 0's
 * sums and averages, and the number of distinct digests over the rotations.
 */
#include "nccl_test.h"

#include "engine_oracle.h"

enum op_kind { OP_SUM, OP_AVG, OP_PREMUL_HOST, OP_PREMUL_DEVICE, OP_PROD, OP_KINDS };
enum collective { ALL_REDUCE, REDUCE_SCATTER, REDUCE, COLLECTIVES };

static const char *const op_names[OP_KINDS] = {"sum", "avg", "premul-host", "premul-device",
                                               "prod"};
static const char *const collective_names[COLLECTIVES] = {"AllReduce", "ReduceScatter", "Reduce"};
static const ncclDataType_t nccl_types[4] = {ncclFloat16, ncclBfloat16, ncclFloat32, ncclFloat64};

static int native, ordered, quick, large;
static reprod_rounding rounding = REPROD_ROUND_NEAREST;
static long cases, wrong;

/* Bits of element i of contribution v: magnitudes over a few dozen binades (fewer for the
 * 16-bit types), both signs; every 7th element cancels the previous contribution's; factors of
 * a product lie in [1/2, 2). */
static uint64_t element_bits(reprod_type t, int v, size_t i, int factor)
{
    const struct tfmt *f = &test_formats[t];
    uint64_t r = test_mix(((uint64_t)v << 40) ^ i ^ ((uint64_t)t << 56));
    int span = factor ? 2 : (t == REPROD_FLOAT16 ? 12 : 40);
    int field = f->bias - (factor ? 1 : span / 2) + (int)((r >> 1) % (uint64_t)span);
    uint64_t bits = tf_make(f, (int)(r & 1), field, (r >> 12) & tf_frac_mask(f));
    if (!factor && v > 0 && i % 7 == 3) bits = element_bits(t, v - 1, i, 0) ^ tf_sign(f);
    return bits;
}

/* The scalar of PreMulSum: 1/3 rounded to the type. */
static uint64_t scalar_bits(reprod_type t)
{
    mpfr_t y;
    mpfr_init2(y, test_formats[t].p);
    int inex = mpfr_set_d(y, 1.0 / 3.0, MPFR_RNDN);
    uint64_t bits = oracle_fit(t, y, inex, MPFR_RNDN);
    mpfr_clear(y);
    return bits;
}

/* a * b rounded to nearest in the type (a PreMulSum term, a product's step). */
static uint64_t product_bits(reprod_type t, uint64_t a, uint64_t b)
{
    mpfr_t x, y, z;
    mpfr_inits2(60, x, y, (mpfr_ptr)0);
    mpfr_init2(z, test_formats[t].p);
    mpfr_set_d(x, tf_to_double(t, a), MPFR_RNDN);
    mpfr_set_d(y, tf_to_double(t, b), MPFR_RNDN);
    int inex = mpfr_mul(z, x, y, MPFR_RNDN);
    uint64_t bits = oracle_fit(t, z, inex, MPFR_RNDN);
    mpfr_clears(x, y, z, (mpfr_ptr)0);
    return bits;
}

/* The expected result from the terms in rank order. */
static uint64_t oracle(reprod_type t, enum op_kind op, uint64_t *terms, int n)
{
    if (op == OP_PROD) {
        uint64_t acc = terms[0];
        for (int k = 1; k < n; k++)
            acc = product_bits(t, acc, terms[k]);
        return acc;
    }
    if (op == OP_PREMUL_HOST || op == OP_PREMUL_DEVICE)
        for (int k = 0; k < n; k++)
            terms[k] = product_bits(t, terms[k], scalar_bits(t));
    reprod_op rop = op == OP_AVG ? REPROD_AVG : REPROD_SUM;
    return ordered ? oracle_ordered(t, rop, terms, n) : oracle_exact(t, rop, rounding, terms, n);
}

static void store(reprod_type t, void *array, size_t i, uint64_t bits)
{
    size_t s = tf_size(t);
    memcpy((char *)array + i * s, &bits, s); /* little-endian */
}

static uint64_t load(reprod_type t, const void *array, size_t i)
{
    uint64_t bits = 0;
    memcpy(&bits, (const char *)array + i * tf_size(t), tf_size(t));
    return bits;
}

/* One case: returns its digest contribution; counts wrong elements. */
static void run_case(ncclComm_t comm, cudaStream_t stream, enum collective c, reprod_type t,
                     enum op_kind op, int in_place, size_t count, int rotation, uint64_t *digest)
{
    size_t s = tf_size(t), total = c == REDUCE_SCATTER ? count * (size_t)ranks : count;
    int root = (int)(count % (size_t)ranks), mine = (rank + rotation) % ranks;
    size_t out_elements = c == REDUCE_SCATTER ? count : total;
    char *host = malloc(total * s), *result = malloc(out_elements * s);
    for (size_t i = 0; i < total; i++)
        store(t, host, i, element_bits(t, mine, i, op == OP_PROD));
    void *send, *recv, *device_scalar;
    CHECK_CUDA(cudaMalloc(&send, total * s));
    CHECK_CUDA(cudaMalloc(&recv, total * s));
    CHECK_CUDA(cudaMalloc(&device_scalar, 8));
    CHECK_CUDA(cudaMemcpy(send, host, total * s, cudaMemcpyHostToDevice));
    uint64_t scalar = scalar_bits(t);
    CHECK_CUDA(cudaMemcpy(device_scalar, &scalar, s, cudaMemcpyHostToDevice));
    ncclRedOp_t nop = op == OP_AVG ? ncclAvg : op == OP_PROD ? ncclProd : ncclSum;
    ncclDataType_t dt = nccl_types[t];
    if (op == OP_PREMUL_HOST) CHECK_NCCL(ncclRedOpCreatePreMulSum(&nop, &scalar, dt, ncclScalarHostImmediate, comm));
    if (op == OP_PREMUL_DEVICE)
        CHECK_NCCL(ncclRedOpCreatePreMulSum(&nop, device_scalar, dt, ncclScalarDevice, comm));
    char *out = in_place && c == REDUCE_SCATTER ? (char *)send + (size_t)rank * count * s
                : in_place                      ? send
                                                : recv;
    if (c == ALL_REDUCE) CHECK_NCCL(ncclAllReduce(send, out, count, dt, nop, comm, stream));
    if (c == REDUCE_SCATTER) CHECK_NCCL(ncclReduceScatter(send, out, count, dt, nop, comm, stream));
    if (c == REDUCE) CHECK_NCCL(ncclReduce(send, out, count, dt, nop, root, comm, stream));
    if (op == OP_PREMUL_HOST || op == OP_PREMUL_DEVICE) CHECK_NCCL(ncclRedOpDestroy(nop, comm));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    int receives = c != REDUCE || rank == root;
    if (receives) CHECK_CUDA(cudaMemcpy(result, out, out_elements * s, cudaMemcpyDeviceToHost));
    cases++;
    for (size_t i = 0; receives && !native && i < out_elements; i++) {
        size_t global = c == REDUCE_SCATTER ? (size_t)rank * count + i : i;
        uint64_t terms[ORACLE_MAX_TERMS] = {0};
        for (int r = 0; r < ranks; r++)
            terms[r] = element_bits(t, (r + rotation) % ranks, global, op == OP_PROD);
        uint64_t expected = oracle(t, op, terms, ranks), got = load(t, result, i);
        if (got == expected) continue;
        if (wrong++ < 5)
            fprintf(stderr,
                    "rank %d: %s %s %s count %zu%s rotation %d: element %zu is 0x%llx, expected "
                    "0x%llx\n",
                    rank, collective_names[c], test_formats[t].name, op_names[op], count,
                    in_place ? " in place" : "", rotation, i, (unsigned long long)got,
                    (unsigned long long)expected);
    }
    if (receives && op != OP_PROD) test_digest(digest, result, out_elements * s);
    CHECK_CUDA(cudaFree(send));
    CHECK_CUDA(cudaFree(recv));
    CHECK_CUDA(cudaFree(device_scalar));
    free(host);
    free(result);
}

static int parse_rounding(const char *word)
{
    const char *const words[] = {"nearest", "zero", "up", "down"};
    for (int i = 0; i < 4; i++)
        if (strcmp(word, words[i]) == 0) return i;
    fprintf(stderr, "exactness: unknown rounding %s\n", word);
    exit(2);
}

int main(int argc, char **argv)
{
    ncclUniqueId id = join_world(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--native") == 0) native = 1;
        else if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--large") == 0) large = 1;
        else if (strcmp(argv[i], "--ordered") == 0) ordered = 1;
        else if (strcmp(argv[i], "--rounding") == 0 && i + 1 < argc)
            rounding = (reprod_rounding)parse_rounding(argv[++i]);
    }
    ncclComm_t comm = world_comm(id);
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    size_t counts[4] = {(size_t)ranks * 5 + 3, 1, 301, 0};
    int count_kinds = quick ? 1 : 3;
    int rotations[3] = {0, 1, ranks - 1}, rotation_count = ranks == 1 ? 1 : ranks == 2 ? 2 : 3;
    uint64_t digests[3];
    for (int rot = 0; rot < rotation_count; rot++) {
        digests[rot] = 0xcbf29ce484222325ull;
        for (int c = 0; c < COLLECTIVES; c++)
            for (int t = 0; t < 4; t++)
                for (int op = 0; op < OP_KINDS; op++)
                    for (int in_place = 0; in_place < 2; in_place++) {
                        for (int k = 0; k < count_kinds; k++)
                            run_case(comm, stream, c, t, op, in_place, counts[k], rotations[rot],
                                     &digests[rot]);
                        /* Past the small path (64 KiB): the chunked exchange. */
                        if (large && (op == OP_SUM || op == OP_PREMUL_DEVICE) && !in_place == !t)
                            run_case(comm, stream, c, t, op, in_place, 40000 + 3, rotations[rot],
                                     &digests[rot]);
                    }
    }
    int distinct = 0;
    for (int i = 0; i < rotation_count; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= digests[j] == digests[i];
        distinct += !seen;
    }
    long totals[2] = {cases, wrong}, sums[2];
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("cases %ld wrong %ld digest %016llx distinct %d\n", sums[0], sums[1],
               (unsigned long long)digests[0], distinct);
    CHECK_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return !native && sums[1] && rank == 0 ? 1 : 0;
}
