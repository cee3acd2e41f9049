/* test_interpose.c: the shim's ways of living inside another process (shim/interpose/): the
 * re-entrancy guard (guard.h: the shim's own work against a hook family's claim), the once
 * (once.h: one run per process, a re-entering call that does not wait for itself, a fork
 * child that runs the initialiser again when its parent was in the middle of it) and the
 * tables of real functions (real.h: looked up once found, again while missing, final once the
 * whole table was looked up; no waiting when re-entered or raced). */
#include "interpose/guard.h"
#include "interpose/once.h"
#include "interpose/real.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

/* A test that waits for itself would hang: each ends in SIGALRM (Criterion reports the crash)
 * after its own limit. Criterion's .timeout would do the same, but its timer leaks an
 * allocation that LeakSanitizer reports under make test-sanitize. */
static void time_limit(unsigned seconds)
{
    alarm(seconds);
}

Test(guard, the_shims_own_work_nests_and_every_hook_passes_inside_it)
{
    cr_expect_not(reprod_guard_active());
    reprod_guard_enter();
    reprod_guard_enter();
    cr_expect(reprod_guard_active());
    cr_expect_not(reprod_guard_claim(REPROD_GUARD_MPI), "an MPI hook claimed inside the shim");
    reprod_guard_leave();
    cr_expect(reprod_guard_active(), "left the shim's own work one level too early");
    reprod_guard_leave();
    cr_expect_not(reprod_guard_active());
}

Test(guard, an_mpi_hook_refuses_a_nested_one_and_leaves_other_hooks_working)
{
    cr_assert(reprod_guard_claim(REPROD_GUARD_MPI));
    cr_expect_not(reprod_guard_active(), "inside an MPI hook, the seeding hooks would pass");
    cr_expect_not(reprod_guard_claim(REPROD_GUARD_MPI), "a nested MPI hook was let in");
    reprod_guard_enter(); /* the hook logs */
    cr_expect(reprod_guard_active());
    reprod_guard_leave();
    cr_expect_not(reprod_guard_claim(REPROD_GUARD_MPI), "logging released the MPI claim");
    reprod_guard_release(REPROD_GUARD_MPI);
    cr_expect(reprod_guard_claim(REPROD_GUARD_MPI), "released, yet the next hook was refused");
    reprod_guard_release(REPROD_GUARD_MPI);
    cr_expect_not(reprod_guard_active());
}

static struct reprod_once reentered_once = REPROD_ONCE_INIT;
static int reentered_runs, inner_answer = -1, guarded_inside;

static void reentering_initialiser(void)
{
    reentered_runs++;
    guarded_inside = reprod_guard_active();
    inner_answer = reprod_once(&reentered_once, reentering_initialiser); /* must not wait */
}

Test(once, an_initialiser_that_reenters_is_answered_0_instead_of_waiting_for_itself)
{
    time_limit(10);
    cr_expect_eq(reprod_once(&reentered_once, reentering_initialiser), 1);
    cr_expect_eq(inner_answer, 0);
    cr_expect_eq(reentered_runs, 1);
    cr_expect(guarded_inside, "the initialiser ran outside the guard");
    cr_expect_not(reprod_guard_active());
    cr_expect_eq(reprod_once(&reentered_once, reentering_initialiser), 1);
    cr_expect_eq(reentered_runs, 1);
}

static struct reprod_once shared_once = REPROD_ONCE_INIT;
static _Atomic int shared_runs, shared_done;

static void slow_initialiser(void)
{
    atomic_fetch_add(&shared_runs, 1);
    for (int i = 0; i < 1000; i++)
        sched_yield();
    atomic_store(&shared_done, 1);
}

static void *call_once(void *unused)
{
    (void)unused;
    int answer = reprod_once(&shared_once, slow_initialiser);
    /* Every caller returns after the initialiser finished, not before. */
    return (void *)(intptr_t)(answer == 1 && atomic_load(&shared_done));
}

Test(once, threads_run_the_initialiser_once_and_all_wait_for_it)
{
    time_limit(20);
    pthread_t threads[8];
    for (int i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&threads[i], NULL, call_once, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *ok = NULL;
        pthread_join(threads[i], &ok);
        cr_expect(ok, "thread %d returned before the initialiser finished", i);
    }
    cr_expect_eq(atomic_load(&shared_runs), 1);
}

static struct reprod_once forked_once = REPROD_ONCE_INIT;
static _Atomic int parent_inside, parent_may_finish, forked_runs;

static void parent_initialiser(void)
{
    atomic_fetch_add(&forked_runs, 1);
    atomic_store(&parent_inside, 1);
    while (!atomic_load(&parent_may_finish))
        sched_yield();
}

static void *run_parent_initialiser(void *unused)
{
    (void)unused;
    reprod_once(&forked_once, parent_initialiser);
    return NULL;
}

static void quick_initialiser(void)
{
    atomic_fetch_add(&forked_runs, 1);
}

Test(once, a_fork_child_runs_the_initialiser_its_parent_was_in_the_middle_of)
{
    time_limit(20);
    pthread_t runner;
    cr_assert_eq(pthread_create(&runner, NULL, run_parent_initialiser, NULL), 0);
    while (!atomic_load(&parent_inside))
        sched_yield();
    pid_t child = fork();
    if (child == 0) {
        /* The thread running it did not come along: waiting for it would be for ever. */
        alarm(5);
        int answer = reprod_once(&forked_once, quick_initialiser);
        _exit(answer == 1 && atomic_load(&forked_runs) == 2 ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the fork child hung or did not run the initialiser (status %#x)", status);
    atomic_store(&parent_may_finish, 1);
    pthread_join(runner, NULL);
    cr_expect_eq(atomic_load(&forked_runs), 1, "the parent ran the initialiser again");
}

/* A table of real functions whose finder counts its calls and can be told what to find. */
static _Atomic int finder_calls;
static _Atomic int provide_late; /* "late" is found only once this is set */
static _Atomic int reenter_depth;

static int late_function(void)
{
    return 7;
}

static void *counting_finder(const char *symbol);

/* clang-format off */
#define TEST_FUNCTIONS(X)                                                                          \
    X(length, "strlen", size_t (*)(const char *))                                                  \
    X(late, "late", int (*)(void))                                                                 \
    X(reentrant, "reentrant", size_t (*)(const char *))
/* clang-format on */
struct test_functions {
    REPROD_REAL_FIELDS(TEST_FUNCTIONS)
};
REPROD_REAL_TABLE(test_table, struct test_functions, TEST_FUNCTIONS, counting_finder);

static void *counting_finder(const char *symbol)
{
    atomic_fetch_add(&finder_calls, 1);
    if (strcmp(symbol, "late") == 0)
        return atomic_load(&provide_late) ? (void *)(intptr_t)late_function : NULL;
    if (strcmp(symbol, "reentrant") == 0) {
        /* A lookup that reaches a lookup of the same function (a hook its finder calls). */
        if (atomic_fetch_add(&reenter_depth, 1) == 0) (void)REPROD_REAL(test_table, reentrant);
        symbol = "strlen";
    }
    return reprod_resolve(symbol);
}

Test(real, a_function_found_is_kept_one_missing_is_looked_up_again_until_the_table_is_complete)
{
    cr_assert(REPROD_REAL(test_table, length) == &strlen, "strlen is not libc's");
    int calls = atomic_load(&finder_calls);
    cr_expect(REPROD_REAL(test_table, length) == &strlen);
    cr_expect_eq(atomic_load(&finder_calls), calls, "a function found was looked up again");

    cr_expect_null(REPROD_REAL(test_table, late));
    cr_expect_null(REPROD_REAL(test_table, late));
    cr_expect_eq(atomic_load(&finder_calls), calls + 2,
                 "a missing function was not looked up again");
    atomic_store(&provide_late, 1);
    cr_assert_not_null(REPROD_REAL(test_table, late), "a function loaded later was not found");
    cr_expect_eq(REPROD_REAL(test_table, late)(), 7);

    const struct test_functions *all = REPROD_REAL_ALL(test_table);
    cr_expect(all->length == &strlen && all->late == &late_function && all->reentrant == &strlen);
}

Test(real, once_the_whole_table_was_looked_up_a_missing_function_is_missing_for_good)
{
    const struct test_functions *all = REPROD_REAL_ALL(test_table);
    cr_expect_null(all->late);
    int calls = atomic_load(&finder_calls);
    atomic_store(&provide_late, 1);
    cr_expect_null(REPROD_REAL(test_table, late));
    cr_expect_null(REPROD_REAL_ALL(test_table)->late);
    cr_expect_eq(atomic_load(&finder_calls), calls, "a complete table was looked up again");
}

Test(real, a_lookup_reached_from_inside_a_lookup_looks_up_again_instead_of_waiting)
{
    time_limit(10);
    cr_expect(REPROD_REAL(test_table, reentrant) == &strlen);
    cr_expect_eq(atomic_load(&reenter_depth), 2);
}

static void *complete_table(void *unused)
{
    (void)unused;
    const struct test_functions *all = REPROD_REAL_ALL(test_table);
    return (void *)(intptr_t)(all->length == &strlen && all->reentrant == &strlen);
}

Test(real, threads_racing_on_the_first_use_all_see_the_same_table)
{
    time_limit(20);
    pthread_t threads[8];
    for (int i = 0; i < 8; i++)
        cr_assert_eq(pthread_create(&threads[i], NULL, complete_table, NULL), 0);
    for (int i = 0; i < 8; i++) {
        void *ok = NULL;
        pthread_join(threads[i], &ok);
        cr_expect(ok, "thread %d saw an incomplete table", i);
    }
}
