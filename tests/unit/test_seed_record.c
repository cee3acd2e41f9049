/* test_seed_record.c: a seed the shim produced or handed out is kept when passed back
 * (shim/seed/seed_record.c through reprod_seed_replace*): per width, bounded to the last
 * REPROD_SEED_RECORD_LENGTH values, the same for every sequence of calls, across threads and
 * in a fork child. Fresh seeds are still derived. */
#include "runtime/config.h"
#include "runtime/rank.h"
#include "reprod.h"
#include "seed/seed.h"
#include "seed/seed_record.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define MASK48 ((UINT64_C(1) << 48) - 1)

/* What a fresh seed becomes under the process's settings (hash unless the caller set another). */
static uint64_t fresh64(uint64_t seed)
{
    return reprod_seed_derive(seed, reprod_rank(), reprod_config()->seed_policy);
}

static uint32_t fresh32(uint32_t seed)
{
    return reprod_seed_derive32(seed, reprod_rank(), reprod_config()->seed_policy);
}

static uint64_t fresh48(uint64_t seed)
{
    return reprod_seed_derive48(seed, reprod_rank(), reprod_config()->seed_policy);
}

static void require_derivation(void)
{
    const struct reprod_config *config = reprod_config();
    if (config->mode == REPROD_MODE_OFF || config->seed_policy == REPROD_SEED_OFF)
        cr_skip_test("seeds are not derived under these settings");
}

/* Seeds no test passes otherwise: 1000 + i. */
static void derive_others(int count)
{
    for (int i = 0; i < count; i++) {
        reprod_seed_replace64("test", 1000 + (uint64_t)i);
        reprod_seed_replace32("test", 1000 + (uint32_t)i);
        reprod_seed_replace48("test", 1000 + (uint64_t)i);
    }
}

Test(seed_record, a_derived_seed_passed_back_is_kept_in_every_width)
{
    require_derivation();
    uint64_t d64 = reprod_seed_replace64("test", 42);
    cr_assert_eq(d64, fresh64(42));
    cr_expect_eq(reprod_seed_replace64("test", d64), d64, "64-bit %" PRIu64 " derived again", d64);
    uint32_t d32 = reprod_seed_replace32("test", 42);
    cr_assert_eq(d32, fresh32(42));
    cr_expect_eq(reprod_seed_replace32("test", d32), d32, "32-bit %" PRIu32 " derived again", d32);
    uint64_t d48 = reprod_seed_replace48("test", 42);
    cr_assert_eq(d48, fresh48(42));
    cr_expect_eq(reprod_seed_replace48("test", d48), d48, "48-bit %" PRIu64 " derived again", d48);
    /* The user's own seed is still derived, to the same value. */
    cr_expect_eq(reprod_seed_replace64("test", 42), d64);
    cr_expect_eq(reprod_seed_replace32("test", 42), d32);
    cr_expect_eq(reprod_seed_replace48("test", 42), d48);
}

Test(seed_record, fresh_seeds_are_derived_however_many_came_before)
{
    require_derivation();
    for (uint64_t seed = 0; seed < 5000; seed++) {
        cr_assert_eq(reprod_seed_replace64("test", seed), fresh64(seed), "64-bit seed %" PRIu64,
                     seed);
        cr_assert_eq(reprod_seed_replace32("test", (uint32_t)seed), fresh32((uint32_t)seed),
                     "32-bit seed %" PRIu64, seed);
        cr_assert_eq(reprod_seed_replace48("test", seed), fresh48(seed), "48-bit seed %" PRIu64,
                     seed);
    }
}

Test(seed_record, the_record_holds_the_last_values_of_each_width_and_no_more)
{
    require_derivation();
    uint64_t d64 = reprod_seed_replace64("test", 42);
    uint32_t d32 = reprod_seed_replace32("test", 42);
    uint64_t d48 = reprod_seed_replace48("test", 42);
    derive_others(REPROD_SEED_RECORD_LENGTH - 1); /* 42's is now the oldest */
    cr_expect_eq(reprod_seed_replace64("test", d64), d64, "forgotten too early");
    cr_expect_eq(reprod_seed_replace32("test", d32), d32, "forgotten too early");
    cr_expect_eq(reprod_seed_replace48("test", d48), d48, "forgotten too early");
    derive_others(REPROD_SEED_RECORD_LENGTH); /* kept again above: now pushed out */
    cr_expect_eq(reprod_seed_replace64("test", d64), fresh64(d64), "64-bit: not forgotten");
    cr_expect_eq(reprod_seed_replace32("test", d32), fresh32(d32), "32-bit: not forgotten");
    cr_expect_eq(reprod_seed_replace48("test", d48), fresh48(d48), "48-bit: not forgotten");
}

Test(seed_record, a_seed_kept_again_and_again_stays_known)
{
    require_derivation();
    uint64_t d64 = reprod_seed_replace64("test", 42);
    for (int round = 0; round < 4; round++) {
        derive_others(REPROD_SEED_RECORD_LENGTH / 2); /* 4 rounds: twice the ring */
        cr_assert_eq(reprod_seed_replace64("test", d64), d64, "forgotten in round %d", round);
    }
}

Test(seed_record, widths_do_not_match_each_other)
{
    require_derivation();
    uint32_t d32 = reprod_seed_replace32("test", 42);
    cr_expect_eq(reprod_seed_replace64("test", d32), fresh64(d32));
    cr_expect_eq(reprod_seed_replace48("test", d32), fresh48(d32));
    uint64_t d64 = reprod_seed_replace64("test", 7);
    cr_expect_eq(reprod_seed_replace48("test", d64 & MASK48), fresh48(d64 & MASK48));
}

Test(seed_record, a_state_handed_out_is_kept_and_seed_0_is_not_remembered_empty)
{
    require_derivation();
    /* An empty ring must not make 0 look remembered. */
    cr_expect_eq(reprod_seed_replace48("test", 0), fresh48(0));
    cr_expect_eq(reprod_seed_replace64("test", 0), fresh64(0));
    cr_expect_eq(reprod_seed_replace32("test", 0), fresh32(0));
    uint64_t state = UINT64_C(0x1234567890AB);
    cr_expect_eq(reprod_seed_replace48("test", state), fresh48(state));
    reprod_seed_note_handed_out48(state | (UINT64_C(0xFFFF) << 48)); /* bits above 48 ignored */
    cr_expect_eq(reprod_seed_replace48("test", state), state);
}

enum { THREADS = 4, SEEDS_PER_THREAD = REPROD_SEED_RECORD_LENGTH / (2 * THREADS) };

static void *derive_in_thread(void *argument)
{
    uint64_t *derived = argument;
    uint64_t first = derived[0];
    for (int i = 0; i < SEEDS_PER_THREAD; i++)
        derived[i] = reprod_seed_replace64("test", first + (uint64_t)i);
    return NULL;
}

Test(seed_record, threads_seeding_at_once_lose_no_value)
{
    require_derivation();
    static uint64_t derived[THREADS][SEEDS_PER_THREAD];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        derived[t][0] = 100000 * (uint64_t)(t + 1);
        cr_assert_eq(pthread_create(&threads[t], NULL, derive_in_thread, derived[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    /* Half the ring added, half re-added by the checks: nothing pushed out. */
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < SEEDS_PER_THREAD; i++)
            cr_assert_eq(reprod_seed_replace64("test", derived[t][i]), derived[t][i],
                         "thread %d's seed %d (%" PRIu64 ") was lost", t, i, derived[t][i]);
}

Test(seed_record, a_fork_child_keeps_the_record_and_adds_its_own)
{
    require_derivation();
    uint64_t before = reprod_seed_replace64("test", 42);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        int ok = reprod_seed_replace64("test", before) == before;
        uint64_t own = reprod_seed_replace64("test", 43);
        ok = ok && own == fresh64(43) && reprod_seed_replace64("test", own) == own;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the fork child lost its parent's record or could not add to it");
}
