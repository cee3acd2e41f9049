/* init.c: constructor, fork child and exit handling, initialised once (once.h: a call that
 * re-enters while this thread initialises returns at once instead of waiting for itself). */
#include "interpose/init.h"

#include "common.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "interpose/once.h"
#include "runtime/rank.h"
#include "runtime/stats.h"
#include "runtime/trace.h"

#include <pthread.h>
#include <stdatomic.h>

#define MAX_HANDLERS 8

static void (*fork_handlers[MAX_HANDLERS])(void);
static void (*exit_handlers[MAX_HANDLERS])(void);
static _Atomic int fork_handler_count;
static _Atomic int exit_handler_count;
static struct reprod_once init_once = REPROD_ONCE_INIT;

static void after_fork_in_child(void)
{
    reprod_log_reset_after_fork();
    reprod_stats_reset();
    reprod_trace_reset_after_fork();
    int count = atomic_load(&fork_handler_count);
    for (int i = 0; i < count; i++)
        fork_handlers[i]();
}

static void initialise(void)
{
    reprod_config(); /* a bad setting stops the process here, before main */
    reprod_rank_discover_from_env();
    pthread_atfork(NULL, NULL, after_fork_in_child);
}

void reprod_init(void)
{
    reprod_once(&init_once, initialise);
}

static void add_handler(void (**table)(void), _Atomic int *count, void (*handler)(void))
{
    int slot = atomic_fetch_add(count, 1);
    if (slot < MAX_HANDLERS)
        table[slot] = handler;
    else
        atomic_store(count, MAX_HANDLERS);
}

void reprod_init_on_fork_child(void (*handler)(void))
{
    add_handler(fork_handlers, &fork_handler_count, handler);
}

void reprod_init_on_exit(void (*handler)(void))
{
    add_handler(exit_handlers, &exit_handler_count, handler);
}

__attribute__((constructor)) static void reprod_constructor(void)
{
    reprod_init();
}

__attribute__((destructor)) static void reprod_destructor(void)
{
    int count = atomic_load(&exit_handler_count);
    for (int i = 0; i < count; i++)
        exit_handlers[i]();
    reprod_stats_summary();
}
