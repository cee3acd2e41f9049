/* test_seed.c: seed derivation (shim/seed/seed.c): reference values, bijectivity, the properties
 * of each policy, and the warning when a seed used rank 0 before the rank was known. */
#include "runtime/rank.h"
#include "reprod.h"
#include "seed/seed.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MASK48 ((UINT64_C(1) << 48) - 1)

static const reprod_seed_policy policies[] = {REPROD_SEED_HASH, REPROD_SEED_RANK,
                                              REPROD_SEED_SHARED, REPROD_SEED_OFF};
static const char *const policy_names[] = {"hash", "rank", "shared", "off"};
static const int ranks[] = {0, 1, 2, 3, 7, 63, 1000, 65535, 1 << 30};

/* A reproducible sample of seeds: edge values, then a splitmix64 walk. */
static uint64_t sample_seed(int i)
{
    static const uint64_t edges[] = {0,          1,
                                     2,          41,
                                     42,         43,
                                     0xFFFFFFFF, UINT64_C(0x100000000),
                                     MASK48,     UINT64_C(1) << 63,
                                     UINT64_MAX, UINT64_MAX - 1};
    if (i < (int)(sizeof edges / sizeof edges[0])) return edges[i];
    uint64_t z = (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Index of the first repeated value of values[0 .. count) after sorting, or -1. */
static long first_repeat(uint64_t *values, size_t count)
{
    qsort(values, count, sizeof *values, compare_u64);
    for (size_t i = 1; i < count; i++)
        if (values[i] == values[i - 1]) return (long)i;
    return -1;
}

Test(seed, hash_is_splitmix64_reference_values)
{
    /* splitmix64 (Vigna's reference splitmix64.c): first outputs from state 0, and the first
     * five from state 1234567; H(x) is the first output from state x, and output k from
     * state x is H(x + (k - 1) * 0x9E3779B97F4A7C15). */
    cr_expect_eq(reprod_seed_derive(0, 0, REPROD_SEED_HASH), UINT64_C(0xE220A8397B1DCDAF));
    static const uint64_t from_1234567[] = {
        UINT64_C(6457827717110365317), UINT64_C(3203168211198807973), UINT64_C(9817491932198370423),
        UINT64_C(4593380528125082431), UINT64_C(16408922859458223821)};
    for (uint64_t k = 0; k < 5; k++) {
        uint64_t state = UINT64_C(1234567) + k * UINT64_C(0x9E3779B97F4A7C15);
        uint64_t got = reprod_seed_derive(state, 5, REPROD_SEED_HASH);
        cr_expect_eq(got, from_1234567[k],
                     "splitmix64(1234567) output %" PRIu64 ": %" PRIu64 " expected %" PRIu64, k + 1,
                     got, from_1234567[k]);
    }
    cr_expect_eq(reprod_mix64(0), UINT64_C(0xE220A8397B1DCDAF));
}

/* Every policy and width against values computed without the shim: docs/seeding.md's formula
 * in a few lines of Python (tests/seed/seed_reference.py, which checks splitmix64's published
 * outputs). A derivation that changes anywhere (K(r + 1) for K(r), s + r for s - r) fails
 * here. */
struct reference {
    int width;
    reprod_seed_policy policy;
    int rank;
    uint64_t seed, derived;
};
static const struct reference references[] = {
#include "seed_reference.h"
};

Test(seed, every_policy_and_width_matches_the_independent_reference)
{
    size_t count = sizeof references / sizeof references[0];
    cr_assert_eq(count, 3 * 3 * 4 * 3, "seed_reference.h has %zu rows", count);
    for (size_t i = 0; i < count; i++) {
        const struct reference *r = &references[i];
        uint64_t got = r->width == 64 ? reprod_seed_derive(r->seed, r->rank, r->policy)
                       : r->width == 48
                           ? reprod_seed_derive48(r->seed, r->rank, r->policy)
                           : reprod_seed_derive32((uint32_t)r->seed, r->rank, r->policy);
        cr_expect_eq(got, r->derived,
                     "%d-bit %s, rank %d, seed 0x%" PRIx64 ": 0x%" PRIx64 ", the reference says "
                     "0x%" PRIx64,
                     r->width, policy_names[r->policy], r->rank, r->seed, got, r->derived);
    }
}

Test(seed, every_derivation_has_an_inverse_so_is_a_bijection)
{
    for (size_t p = 0; p < 4; p++)
        for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++)
            for (int i = 0; i < 20000; i++) {
                reprod_seed_policy policy = policies[p];
                int rank = ranks[r];
                uint64_t s = sample_seed(i);
                uint64_t d = reprod_seed_derive(s, rank, policy);
                cr_assert_eq(reprod_seed_underive(d, rank, policy), s,
                             "64-bit %s rank %d seed %" PRIu64, policy_names[p], rank, s);
                cr_assert_eq(
                    reprod_seed_derive(reprod_seed_underive(s, rank, policy), rank, policy), s,
                    "64-bit %s rank %d: derive(underive(%" PRIu64 "))", policy_names[p], rank, s);
                uint32_t s32 = (uint32_t)s;
                uint32_t d32 = reprod_seed_derive32(s32, rank, policy);
                cr_assert_eq(reprod_seed_underive32(d32, rank, policy), s32,
                             "32-bit %s rank %d seed %" PRIu32, policy_names[p], rank, s32);
                cr_assert_eq(
                    reprod_seed_derive32(reprod_seed_underive32(s32, rank, policy), rank, policy),
                    s32, "32-bit %s rank %d: derive32(underive32(%" PRIu32 "))", policy_names[p],
                    rank, s32);
                uint64_t s48 = s & MASK48;
                uint64_t d48 = reprod_seed_derive48(s48, rank, policy);
                cr_assert_leq(d48, MASK48, "48-bit %s result %" PRIu64 " out of range",
                              policy_names[p], d48);
                cr_assert_eq(reprod_seed_underive48(d48, rank, policy), s48,
                             "48-bit %s rank %d seed %" PRIu64, policy_names[p], rank, s48);
                cr_assert_eq(
                    reprod_seed_derive48(reprod_seed_underive48(s48, rank, policy), rank, policy),
                    s48, "48-bit %s rank %d: derive48(underive48(%" PRIu64 "))", policy_names[p],
                    rank, s48);
            }
}

Test(seed, derivations_are_injective_on_runs_of_consecutive_seeds)
{
    enum { COUNT = 1 << 18 };
    uint64_t *values = malloc(COUNT * sizeof *values);
    cr_assert_not_null(values);
    for (size_t p = 0; p < 3; p++)
        for (uint64_t base = 0; base < 3; base++) {
            uint64_t start = base * UINT64_C(0xFFFFFFFF) - COUNT / 2; /* spans wrap-arounds */
            for (int width = 0; width < 3; width++) {
                for (uint64_t i = 0; i < COUNT; i++) {
                    uint64_t s = start + i;
                    values[i] = width == 0   ? reprod_seed_derive(s, 3, policies[p])
                                : width == 1 ? reprod_seed_derive32((uint32_t)s, 3, policies[p])
                                             : reprod_seed_derive48(s, 3, policies[p]);
                }
                long repeat = first_repeat(values, COUNT);
                cr_assert_eq(repeat, -1,
                             "%s width %d: %d consecutive seeds from %" PRIu64
                             " give a repeated seed %" PRIu64,
                             policy_names[p],
                             width == 0   ? 64
                             : width == 1 ? 32
                                          : 48,
                             COUNT, start, repeat < 0 ? 0 : values[repeat]);
            }
        }
    free(values);
}

Test(seed, narrowing_to_32_bits_is_not_truncation)
{
    /* Truncating H64 would map seeds that differ only above bit 31 together; the 32-bit API
     * has no such seeds, but its mixer must still decorrelate adjacent ones on its own. */
    int same = 0;
    for (uint32_t s = 0; s < 1000; s++)
        same += reprod_seed_derive32(s, 0, REPROD_SEED_HASH) ==
                (uint32_t)reprod_seed_derive(s, 0, REPROD_SEED_HASH);
    cr_expect_lt(same, 3, "%d of 1000 32-bit seeds equal the truncated 64-bit ones", same);
}

Test(seed, hash_keeps_shared_seeds_shared_on_every_rank)
{
    for (int i = 0; i < 1000; i++) {
        uint64_t s = sample_seed(i);
        uint64_t on_rank_0 = reprod_seed_derive(s, 0, REPROD_SEED_HASH);
        for (size_t r = 1; r < sizeof ranks / sizeof ranks[0]; r++) {
            cr_assert_eq(reprod_seed_derive(s, ranks[r], REPROD_SEED_HASH), on_rank_0,
                         "seed %" PRIu64 " differs on rank %d", s, ranks[r]);
            cr_assert_eq(reprod_seed_derive32((uint32_t)s, ranks[r], REPROD_SEED_HASH),
                         reprod_seed_derive32((uint32_t)s, 0, REPROD_SEED_HASH));
            cr_assert_eq(reprod_seed_derive48(s, ranks[r], REPROD_SEED_HASH),
                         reprod_seed_derive48(s, 0, REPROD_SEED_HASH));
        }
        cr_assert_neq(on_rank_0, s, "hash left seed %" PRIu64 " unchanged", s);
    }
}

Test(seed, rank_gives_base_plus_rank_seeds_distinct_streams)
{
    enum { RANKS = 1 << 16 };
    uint64_t *values = malloc(RANKS * sizeof *values);
    cr_assert_not_null(values);
    static const uint64_t bases[] = {0, 42, 1234, UINT64_C(0xFFFFFFFF), UINT64_MAX - 100};
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        for (int width = 0; width < 3; width++) {
            for (int r = 0; r < RANKS; r++) {
                uint64_t s = bases[b] + (uint64_t)r;
                values[r] = width == 0   ? reprod_seed_derive(s, r, REPROD_SEED_RANK)
                            : width == 1 ? reprod_seed_derive32((uint32_t)s, r, REPROD_SEED_RANK)
                                         : reprod_seed_derive48(s, r, REPROD_SEED_RANK);
            }
            /* Distinct from the neighbours' and from the hash of the plain seeds. */
            cr_assert_neq(values[1], reprod_seed_derive(bases[b] + 1, 1, REPROD_SEED_HASH));
            long repeat = first_repeat(values, RANKS);
            cr_assert_eq(repeat, -1, "base %" PRIu64 " width %d: two of %d ranks share a seed",
                         bases[b], width, RANKS);
        }
    }
    free(values);
}

Test(seed, shared_gives_base_plus_rank_seeds_one_stream)
{
    for (int i = 0; i < 200; i++) {
        uint64_t base = sample_seed(i);
        uint64_t expected = reprod_seed_derive(base, 0, REPROD_SEED_SHARED);
        cr_assert_eq(expected, reprod_seed_derive(base, 0, REPROD_SEED_HASH),
                     "shared on rank 0 is hash");
        for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
            uint64_t s = base + (uint64_t)ranks[r];
            cr_assert_eq(reprod_seed_derive(s, ranks[r], REPROD_SEED_SHARED), expected,
                         "base %" PRIu64 " rank %d", base, ranks[r]);
            cr_assert_eq(reprod_seed_derive32((uint32_t)s, ranks[r], REPROD_SEED_SHARED),
                         reprod_seed_derive32((uint32_t)base, 0, REPROD_SEED_SHARED));
            cr_assert_eq(reprod_seed_derive48(s, ranks[r], REPROD_SEED_SHARED),
                         reprod_seed_derive48(base, 0, REPROD_SEED_SHARED));
        }
    }
}

Test(seed, off_and_unknown_policies_change_nothing)
{
    for (int i = 0; i < 1000; i++) {
        uint64_t s = sample_seed(i);
        cr_assert_eq(reprod_seed_derive(s, 3, REPROD_SEED_OFF), s);
        cr_assert_eq(reprod_seed_derive32((uint32_t)s, 3, REPROD_SEED_OFF), (uint32_t)s);
        cr_assert_eq(reprod_seed_derive48(s, 3, REPROD_SEED_OFF), s & MASK48);
        cr_assert_eq(reprod_seed_derive(s, 3, (reprod_seed_policy)17), s);
    }
}

/* Mean number of output bits that flip between adjacent seeds: about half the width. */
Test(seed, adjacent_seeds_decorrelate)
{
    double flips64 = 0, flips32 = 0, flips48 = 0;
    enum { PAIRS = 20000 };
    for (uint64_t s = 0; s < PAIRS; s++) {
        flips64 += __builtin_popcountll(reprod_seed_derive(s, 0, REPROD_SEED_HASH) ^
                                        reprod_seed_derive(s + 1, 0, REPROD_SEED_HASH));
        flips32 += __builtin_popcount(reprod_seed_derive32((uint32_t)s, 0, REPROD_SEED_HASH) ^
                                      reprod_seed_derive32((uint32_t)s + 1, 0, REPROD_SEED_HASH));
        flips48 += __builtin_popcountll(reprod_seed_derive48(s, 0, REPROD_SEED_HASH) ^
                                        reprod_seed_derive48(s + 1, 0, REPROD_SEED_HASH));
    }
    flips64 /= PAIRS;
    flips32 /= PAIRS;
    flips48 /= PAIRS;
    cr_expect(flips64 > 31 && flips64 < 33, "64-bit: %.2f bits flip on average", flips64);
    cr_expect(flips32 > 15 && flips32 < 17, "32-bit: %.2f bits flip on average", flips32);
    cr_expect(flips48 > 23 && flips48 < 25, "48-bit: %.2f bits flip on average", flips48);
}

/* Run `action` with fd 2 sent to a temporary file; return what was written. */
static char *capture_stderr(void (*action)(void))
{
    static char text[4096];
    FILE *file = tmpfile();
    cr_assert_not_null(file);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(file), STDERR_FILENO);
    action();
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(file);
    size_t length = fread(text, 1, sizeof text - 1, file);
    text[length] = '\0';
    fclose(file);
    return text;
}

static void seed_early_then_learn_rank_3(void)
{
    reprod_rank_note_assumed("srand");
    reprod_rank_note_assumed("srandom"); /* only the first is remembered */
    reprod_rank_set_from_library(3, 4);
    reprod_rank_set_from_library(3, 4); /* and said once */
}

static void seed_early_then_learn_rank_0(void)
{
    reprod_rank_note_assumed("srand");
    reprod_rank_set_from_library(0, 4);
}

Test(seed, a_seed_that_assumed_rank_0_is_reported_when_the_rank_is_not_0)
{
    char *text = capture_stderr(seed_early_then_learn_rank_3);
    cr_expect(strstr(text, "srand ran before the rank was known") != NULL, "stderr: '%s'", text);
    cr_expect(strstr(text, "srandom") == NULL, "stderr: '%s'", text);
    char *second = strstr(text, "\n");
    cr_expect(second && second[1] == '\0', "one line expected: '%s'", text);
}

Test(seed, a_seed_that_assumed_rank_0_on_rank_0_is_not_reported)
{
    char *text = capture_stderr(seed_early_then_learn_rank_0);
    cr_expect_str_empty(text, "stderr: '%s'", text);
}
