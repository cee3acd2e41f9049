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
}
