/* rank.c: rank discovery from the launchers' variables and from the libraries. */
#include "runtime/rank.h"

#include "common.h"
#include "runtime/config.h"
#include "runtime/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Launchers' variables, in the order of preference: the first one set wins. */
static const char *const rank_variables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                             "PMIX_RANK", "SLURM_PROCID"};
static const char *const size_variables[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                             "SLURM_NTASKS"};

static _Atomic int current_rank;
static _Atomic int current_size;
static _Atomic int current_source = REPROD_RANK_UNKNOWN;
static const char *rank_variable;
/* The first call that used rank 0 while no rank was known (reprod_rank_note_assumed). */
static _Atomic(const char *) assumed_rank_api;

/* A process taken for a launcher (launcher.h) that starts MPI or NCCL is a rank after all,
 * run natively: say so once on stderr (the log is silent there), rather than stay silent. */
static void warn_if_launcher(void)
{
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    const char *launcher = reprod_config()->launcher;
    if (!launcher || atomic_flag_test_and_set(&warned)) return;
    reprod_log_stderr("warning: this process runs %s, which the shim takes for a launcher and "
                      "leaves as it is, yet it started MPI or NCCL: its reductions and seeds are "
                      "the library's own, not made reproducible",
                      launcher);
}

/* Parse a non-negative int, or return -1. */
static int parse_count(const char *text)
{
    if (!text || !*text) return -1;
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || *end || value < 0 || value > 1 << 30) return -1;
    return (int)value;
}

void reprod_rank_discover_from_env(void)
{
    if (atomic_load(&current_source) != REPROD_RANK_UNKNOWN) return;
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(size_variables); i++) {
        int size = parse_count(getenv(size_variables[i]));
        if (size > 0) {
            atomic_store(&current_size, size);
            break;
        }
    }
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(rank_variables); i++) {
        int rank = parse_count(getenv(rank_variables[i]));
        if (rank >= 0) {
            rank_variable = rank_variables[i];
            atomic_store(&current_rank, rank);
            atomic_store(&current_source, REPROD_RANK_FROM_ENV);
            return;
        }
    }
}

void reprod_rank_set_from_library(int rank, int world_size)
{
    atomic_store(&current_rank, rank);
    atomic_store(&current_size, world_size);
    atomic_store(&current_source, REPROD_RANK_FROM_LIBRARY);
    warn_if_launcher();
    const char *api = atomic_exchange(&assumed_rank_api, NULL);
    if (api && rank != 0)
        reprod_log(REPROD_LOG_WARN,
                   "warning: %s ran before the rank was known and used rank 0, but this is rank "
                   "%d: its result differs from a run whose launcher sets RANK (or "
                   "OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID)",
                   api, rank);
}

void reprod_rank_note_assumed(const char *api)
{
    const char *none = NULL;
    atomic_compare_exchange_strong(&assumed_rank_api, &none, api);
}

int reprod_rank(void)
{
    return atomic_load(&current_rank);
}

int reprod_world_size(void)
{
    return atomic_load(&current_size);
}

enum reprod_rank_source reprod_rank_source(const char **variable)
{
    enum reprod_rank_source source = (enum reprod_rank_source)atomic_load(&current_source);
    if (variable) *variable = source == REPROD_RANK_FROM_ENV ? rank_variable : NULL;
    return source;
}
