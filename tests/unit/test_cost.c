/* test_cost.c: the cost model (shim/runtime/cost.c) and the route it chooses
 * (shim/runtime/route.c). The model's figures against Open MPI are checked by
 * tests/mpi/cost_model.sh with a real count; here, what the choice promises: the exchange never
 * above 16 ranks and always at 2 and 4, the same answer from the per-thread memory as from the
 * model, and the native figures issue 19 measured at 32 ranks. No timing. */
#include "runtime/cost.h"
#include "runtime/route.h"

#include <criterion/criterion.h>

static struct reprod_route_call call_of(int ranks, uint64_t bytes, reprod_type type)
{
    struct reprod_route_call call = {0, REPROD_COLLECTIVE_ALLREDUCE, ranks,
                                     bytes / (uint64_t)reprod_cost_type_bytes(type), type, 0};
    return call;
}

static const uint64_t sizes[] = {8, 1024, 2048, 4096, 65536, 1 << 20, 16 << 20, 1u << 30};
static const reprod_type types[] = {REPROD_FLOAT32, REPROD_FLOAT64, REPROD_FLOAT16,
                                    REPROD_BFLOAT16};

Test(route, never_the_exchange_above_16_ranks)
{
    static const int ranks[] = {17, 24, 32, 100, 1024, 16384};
    for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t t = 0; t < 4; t++) {
                struct reprod_route_call call = call_of(ranks[r], sizes[s], types[t]);
                cr_expect_eq(reprod_route_by_model(&call), REPROD_ROUTE_FIXED,
                             "%d ranks, %llu bytes, type %d", ranks[r],
                             (unsigned long long)sizes[s], (int)types[t]);
                call.one_pass = 1;
                cr_expect_eq(reprod_route_by_model(&call), REPROD_ROUTE_FIXED_ONE_PASS,
                             "one pass: %d ranks, %llu bytes", ranks[r], (unsigned long long)sizes[s]);
            }
}

Test(route, the_exchange_up_to_4_ranks_for_every_size_type_and_library)
{
    /* route.c answers so without the model up to 4 ranks: the model must agree. */
    for (int ranks = 2; ranks <= 4; ranks++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t t = 0; t < 4; t++)
                for (int nccl = 0; nccl < 2; nccl++) {
                    struct reprod_route_call call = call_of(ranks, sizes[s], types[t]);
                    call.nccl = nccl;
                    cr_expect_eq(reprod_route_by_model(&call), REPROD_ROUTE_EXCHANGE,
                                 "%d ranks, %llu bytes, type %d, nccl %d", ranks,
                                 (unsigned long long)sizes[s], (int)types[t], nccl);
                }
}

Test(route, the_remembered_choice_is_the_models)
{
    /* Calls that share memory slots, in several orders, twice: each answer the model's. */
    for (int pass = 0; pass < 2; pass++)
        for (int ranks = 2; ranks <= 20; ranks++)
            for (uint64_t count = 1; count < 70000; count = count * 3 + 1)
                for (size_t t = 0; t < 4; t++) {
                    struct reprod_route_call call = {pass, REPROD_COLLECTIVE_ALLREDUCE, ranks,
                                                     count, types[t], (int)(count & 1)};
                    cr_assert_eq(reprod_route_choose(&call), reprod_route_by_model(&call),
                                 "%d ranks, count %llu, type %d", ranks,
                                 (unsigned long long)count, (int)types[t]);
                }
}

Test(cost, native_figures_at_32_ranks_are_open_mpis)
{
    /* Issue 19's count with pml monitoring, float at np=32: messages / peers / bytes. */
    static const struct {
        uint64_t bytes, messages, peers, sent;
    } measured[] = {{8, 5, 5, 40}, {4096, 10, 5, 7936}, {1 << 20, 10, 5, 2031616}};
    struct reprod_cost_machine machine;
    reprod_cost_machine_defaults(&machine);
    for (size_t i = 0; i < 3; i++) {
        struct reprod_route_call call = call_of(32, measured[i].bytes, REPROD_FLOAT32);
        struct reprod_cost cost;
        cr_assert_eq(reprod_cost_native(&machine, &call, &cost), 0);
        cr_expect_eq(cost.messages, measured[i].messages, "%llu B", (unsigned long long)measured[i].bytes);
        cr_expect_eq(cost.peers, measured[i].peers, "%llu B", (unsigned long long)measured[i].bytes);
        cr_expect_eq(cost.bytes, measured[i].sent, "%llu B", (unsigned long long)measured[i].bytes);
    }
}

Test(cost, the_fixed_routes_memory_does_not_grow_with_the_ranks)
{
    struct reprod_cost_machine machine;
    reprod_cost_machine_defaults(&machine);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        struct reprod_route_call small = call_of(1024, sizes[s], REPROD_FLOAT32);
        struct reprod_route_call large = call_of(16384, sizes[s], REPROD_FLOAT32);
        struct reprod_cost a, b;
        reprod_cost_route(&machine, &small, REPROD_ROUTE_FIXED, 0, &a);
        reprod_cost_route(&machine, &large, REPROD_ROUTE_FIXED, 0, &b);
        cr_expect_eq(a.memory, b.memory, "%llu B: %llu at 1,024 ranks, %llu at 16,384",
                     (unsigned long long)sizes[s], (unsigned long long)a.memory,
                     (unsigned long long)b.memory);
    }
    /* The one exception: a call whose words Open MPI would take through Rabenseifner's linear
     * fallback is padded to 2^floor(log2 N) words (16 - 64 KiB of binary32 at 16,384 ranks):
     * the shim's words and the library's buffer of them, at most 16 bytes a power-of-two rank
     * more. */
    for (uint64_t bytes = 16384; bytes < 65536; bytes += 4096) {
        struct reprod_route_call small = call_of(1024, bytes, REPROD_FLOAT32);
        struct reprod_route_call large = call_of(16384, bytes, REPROD_FLOAT32);
        struct reprod_cost a, b;
        reprod_cost_route(&machine, &small, REPROD_ROUTE_FIXED, 0, &a);
        reprod_cost_route(&machine, &large, REPROD_ROUTE_FIXED, 0, &b);
        cr_expect(b.memory <= a.memory + 16 * 16384, "%llu B: %llu at 1,024 ranks, %llu at 16,384",
                  (unsigned long long)bytes, (unsigned long long)a.memory,
                  (unsigned long long)b.memory);
    }
}

/* Most messages and peers one Open MPI all-reduce costs a rank on an algorithm whose cost grows
 * like log N: recursive doubling or Rabenseifner with the fold of a non-power of two's extra
 * ranks (2 floor(log2 N) + 2 messages, floor(log2 N) + 1 peers), or the binomial reduce and
 * broadcast. A ring of N - 1 steps each way, or a linear reduce to rank 0, exceeds it from 8
 * ranks. */
static uint64_t log_messages(int ranks)
{
    int steps = 0;
    while ((2 << steps) <= ranks)
        steps++;
    return 2 * (uint64_t)steps + 2;
}

Test(cost, the_fixed_route_sends_log_n_messages_at_every_size)
{
    /* Issue 19: O(log N) messages and peers. Open MPI's decision runs a ring at small totals
     * (16 - 63 ranks, 2,048 and more) and falls back to a linear algorithm below a power of
     * two of elements; the route hands it counts that avoid both. Every size from one element
     * to 4 MiB, in steps of an eighth of a power of two, at ranks that cross every row of the
     * decision: two all-reduces (codes, one piece of words), each within the bound, and at
     * most 4.5x native's time (16-bit types: 8x, their words 4x native's bytes). */
    static const int ranks[] = {8,    9,    15,   16,   17,   20,   24,   31,    32,    33,
                                48,   63,   64,   100,  128,  255,  256,  511,   512,   1000,
                                1024, 2047, 2048, 3000, 4096, 6000, 8192, 12000, 16384, 32768};
    struct reprod_cost_machine machine;
    reprod_cost_machine_defaults(&machine);
    for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++)
        for (size_t t = 0; t < 4; t++) {
            uint64_t element = (uint64_t)reprod_cost_type_bytes(types[t]);
            for (uint64_t base = element; base <= ((uint64_t)4 << 20); base *= 2)
                for (uint64_t eighth = 0; eighth < 8; eighth++) {
                    uint64_t bytes = (base + base / 8 * eighth) / element * element;
                    struct reprod_route_call call = call_of(ranks[r], bytes, types[t]);
                    struct reprod_cost cost, native;
                    reprod_cost_route(&machine, &call, REPROD_ROUTE_FIXED, 0, &cost);
                    reprod_cost_native(&machine, &call, &native);
                    /* No cliff in time either (they were 400 - 2,100x): two passes of 2.25 -
                     * 2.5x the bytes, or 4.4x the latency where Open MPI's decision has no
                     * recursive doubling for them (33 - 63 ranks, below 128 bytes). */
                    cr_expect_leq(
                        cost.time_us,
                        (types[t] == REPROD_FLOAT32 || types[t] == REPROD_FLOAT64 ? 4.5 : 8) *
                            native.time_us,
                        "%d ranks, %llu bytes, type %d: %.1f us against %.1f (%s)", ranks[r],
                        (unsigned long long)bytes, (int)types[t], cost.time_us, native.time_us,
                        cost.algorithm);
                    cr_expect_leq(cost.messages, 2 * log_messages(ranks[r]),
                                  "%d ranks, %llu bytes, type %d: %llu messages (%s)", ranks[r],
                                  (unsigned long long)bytes, (int)types[t],
                                  (unsigned long long)cost.messages, cost.algorithm);
                    cr_expect_leq(cost.peers, log_messages(ranks[r]) / 2,
                                  "%d ranks, %llu bytes, type %d: %llu peers (%s)", ranks[r],
                                  (unsigned long long)bytes, (int)types[t],
                                  (unsigned long long)cost.peers, cost.algorithm);
                }
        }
}

Test(cost, the_padded_count_is_bounded)
{
    /* What the route adds to a count for Open MPI: nothing below 4 ranks, never a smaller
     * count, and at most up to 16 KiB or the ranks' power of two of elements. */
    for (int ranks = 2; ranks <= 70000; ranks = ranks < 80 ? ranks + 1 : ranks * 5 / 4)
        for (int size = 1; size <= 8; size *= 8)
            for (uint64_t count = 1; count < ((uint64_t)1 << 22); count = count * 5 / 4 + 1) {
                uint64_t handed = reprod_cost_openmpi_allreduce_count(ranks, count, size);
                uint64_t pof2 = 1;
                while (pof2 * 2 <= (uint64_t)ranks)
                    pof2 *= 2;
                uint64_t most = 16384 / (uint64_t)size > pof2 ? 16384 / (uint64_t)size : pof2;
                cr_expect(handed == count || (ranks >= 4 && handed > count && handed <= most),
                          "%d ranks, %llu elements of %d bytes: %llu handed", ranks,
                          (unsigned long long)count, size, (unsigned long long)handed);
            }
}

/* NCCL's words where the model takes them (hooks/nccl/nccl_fixed.c's rule: int32 words where 4 K'
 * bytes are fewer than 8 K), at the edges the docs give for the typical span: shim/native bytes
 * of 1 MiB, the codes (2 bytes an element for the 16-bit types, 1 1/8 for binary32 and binary64:
 * a lo a block of 8) plus the words an element against the type's size. */
Test(cost, nccls_narrow_words_end_where_the_docs_say)
{
    static const struct {
        reprod_type type;
        int ranks;
        double ratio; /* (codes + bytes of words) / size */
    } edges[] = {
        {REPROD_FLOAT64, 256, (1.125 + 3 * 4) / 8.0}, /* three narrow words */
        {REPROD_FLOAT64, 512, (1.125 + 2 * 8) / 8.0}, /* four: as many bytes as two int64 */
        {REPROD_FLOAT16, 4096, (2 + 4) / 2.0},        /* one narrow word */
        {REPROD_FLOAT16, 8192, (2 + 8) / 2.0},        /* two: one int64 word's bytes */
        {REPROD_BFLOAT16, 32768, (2 + 4) / 2.0},      /* one narrow word */
        {REPROD_BFLOAT16, 65536, (2 + 8) / 2.0},      /* two */
        {REPROD_FLOAT32, 32, (1.125 + 8) / 4.0},      /* two narrow words: one int64's bytes */
    };
    struct reprod_cost_machine machine;
    reprod_cost_machine_defaults(&machine);
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        struct reprod_route_call call = call_of(edges[e].ranks, 1 << 20, edges[e].type);
        call.nccl = 1;
        struct reprod_cost native, shim;
        cr_assert_eq(reprod_cost_native(&machine, &call, &native), 0);
        cr_assert_eq(reprod_cost_route(&machine, &call, REPROD_ROUTE_FIXED, 0, &shim), 0);
        double ratio = (double)shim.bytes / (double)native.bytes;
        cr_expect(ratio > 0.999 * edges[e].ratio && ratio < 1.001 * edges[e].ratio,
                  "type %d at %d ranks: shim/native bytes %.4f, expected %.4f", edges[e].type,
                  edges[e].ranks, ratio, edges[e].ratio);
    }
}
