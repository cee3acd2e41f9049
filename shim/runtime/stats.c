/* stats.c: per-process counters and the pass-through decision. Counters are atomics: hooks
 * run on any thread and never take a lock for accounting. */
#include "runtime/stats.h"

#include "runtime/config.h"
#include "runtime/audit.h"
#include "device/cuda.h"
#include "runtime/log.h"
#include "runtime/record.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct reason_info {
    const char *name;
    int deterministic; /* the real library's result is deterministic anyway */
};

static const struct reason_info reasons[REPROD_PASS_REASON_COUNT] = {
    [REPROD_PASS_MODE_OFF] = {"mode off", 0},
    [REPROD_PASS_DETERMINISTIC_OP] = {"deterministic op", 1},
    [REPROD_PASS_NON_FLOAT] = {"non-float type", 1},
    [REPROD_PASS_EMPTY] = {"empty", 1},
    [REPROD_PASS_NOT_ACTIVE] = {"library not active", 1},
    [REPROD_PASS_BAD_ARGUMENT] = {"invalid argument", 1},
    [REPROD_PASS_INTERCOMM] = {"intercommunicator", 0},
    [REPROD_PASS_NO_MEMORY] = {"out of memory", 0},
    [REPROD_PASS_UNSUPPORTED] = {"unsupported", 0},
    [REPROD_PASS_ONE_RANK] = {"one rank", 1},
    [REPROD_PASS_AUDIT] = {"audit mode, native", 0},
};

static _Atomic uint64_t path_calls[2];
static _Atomic uint64_t family_deterministic[REPROD_FAMILY_COUNT];
static _Atomic uint64_t family_passed[REPROD_FAMILY_COUNT];
static const char *const family_names[REPROD_FAMILY_COUNT] = {"MPI", "NCCL", "other"};
static _Atomic uint64_t path_bytes;
static _Atomic uint64_t shim_time_ns;
static _Atomic uint64_t engine_time_ns;
static _Atomic uint64_t pass_calls[REPROD_PASS_REASON_COUNT];
static _Atomic int pass_warned[REPROD_PASS_REASON_COUNT];
static atomic_flag summary_written = ATOMIC_FLAG_INIT;
static _Atomic uint64_t seed_calls;
/* REPROD_MODE=audit. The worst call is updated under a lock: audit is a debugging mode. */
static _Atomic uint64_t audited_calls, audited_differing_calls, audited_differing_elements;
static pthread_mutex_t worst_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t ulps;           /* REPROD_ULPS_NAN above any distance */
    uint64_t audited_number; /* which audited call (1, 2, ...) */
    uint64_t trace_sequence; /* its trace number, 0 when not tracing */
    const char *api;
} worst;

uint64_t reprod_clock_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

uint64_t reprod_stats_clock_ns(void)
{
    return reprod_config()->verbose >= 1 ? reprod_clock_ns() : 0;
}

const char *reprod_reason_name(enum reprod_reason reason)
{
    return (unsigned)reason < REPROD_PASS_REASON_COUNT ? reasons[reason].name : "?";
}

int reprod_reason_is_deterministic(enum reprod_reason reason)
{
    return (unsigned)reason < REPROD_PASS_REASON_COUNT && reasons[reason].deterministic;
}

enum reprod_family reprod_family_of(const char *api)
{
    if (!api) return REPROD_FAMILY_OTHER;
    if (strncmp(api, "MPI", 3) == 0 || strncmp(api, "PMPI", 4) == 0) return REPROD_FAMILY_MPI;
    if (strncmp(api, "nccl", 4) == 0) return REPROD_FAMILY_NCCL;
    return REPROD_FAMILY_OTHER;
}

void reprod_stats_record(const char *api, enum reprod_path path, size_t bytes, uint64_t shim_ns,
                         uint64_t engine_ns)
{
    /* Only the summary (REPROD_VERBOSE >= 1) reads these: below it, five atomic additions on
     * shared lines per call would buy nothing. */
    if (!reprod_log_enabled(REPROD_LOG_INFO)) return;
    atomic_fetch_add_explicit(&path_calls[path], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&family_deterministic[reprod_family_of(api)], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&path_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&shim_time_ns, shim_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&engine_time_ns, engine_ns, memory_order_relaxed);
}

int reprod_pass_through(const char *api, enum reprod_reason reason, const char *detail)
{
    if ((unsigned)reason >= REPROD_PASS_REASON_COUNT) reason = REPROD_PASS_UNSUPPORTED;
    atomic_fetch_add_explicit(&pass_calls[reason], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&family_passed[reprod_family_of(api)], 1, memory_order_relaxed);
    if (!detail) detail = "";
    const struct reprod_config *config = reprod_config();
    /* Mode off and audit ask for the library's own results: neither a warning nor STRICT. */
    int asked = reason == REPROD_PASS_MODE_OFF || reason == REPROD_PASS_AUDIT;
    int risky = !reasons[reason].deterministic && !asked;
    if (risky && config->strict) {
        reprod_log(REPROD_LOG_ERROR,
                   "error: %s cannot be made deterministic (%s%s%s) and REPROD_STRICT=1: "
                   "stopping the job",
                   api, reasons[reason].name, *detail ? ": " : "", detail);
        return -1;
    }
    int first = !atomic_exchange(&pass_warned[reason], 1);
    if (risky && first)
        reprod_log(REPROD_LOG_WARN,
                   "warning: %s passed through unchanged, its result may not be reproducible "
                   "(%s%s%s); further such calls are counted in the summary (REPROD_VERBOSE=1)",
                   api, reasons[reason].name, *detail ? ": " : "", detail);
    else if (first && !asked && !reprod_log_enabled(REPROD_LOG_DEBUG))
        reprod_log(REPROD_LOG_INFO,
                   "%s passed through unchanged (%s%s%s), deterministic as it is; further such "
                   "calls are counted in the summary",
                   api, reasons[reason].name, *detail ? ": " : "", detail);
    else
        reprod_log(REPROD_LOG_DEBUG, "%s pass-through (%s%s%s)", api, reasons[reason].name,
                   *detail ? ": " : "", detail);
    return 0;
}

void reprod_stats_audit(const char *api, uint64_t trace_sequence, uint64_t differing,
                        uint64_t worst_ulps)
{
    uint64_t number = atomic_fetch_add(&audited_calls, 1) + 1;
    if (!differing) return;
    atomic_fetch_add(&audited_differing_calls, 1);
    atomic_fetch_add(&audited_differing_elements, differing);
    pthread_mutex_lock(&worst_lock);
    if (worst_ulps > worst.ulps || !worst.api) {
        worst.ulps = worst_ulps;
        worst.audited_number = number;
        worst.trace_sequence = trace_sequence;
        worst.api = api;
    }
    pthread_mutex_unlock(&worst_lock);
}

void reprod_stats_seed(void)
{
    atomic_fetch_add_explicit(&seed_calls, 1, memory_order_relaxed);
}

/* The audit line: what REPROD_MODE=audit is for, so it is written at every verbosity. */
static void audit_summary(void)
{
    uint64_t audited = atomic_load(&audited_calls);
    uint64_t unaudited = atomic_load(&pass_calls[REPROD_PASS_AUDIT]);
    if (reprod_config()->mode != REPROD_MODE_AUDIT || audited + unaudited == 0) return;
    char where[256] = "";
    pthread_mutex_lock(&worst_lock);
    if (worst.api) {
        char ulps[32];
        if (worst.ulps == REPROD_ULPS_NAN)
            snprintf(ulps, sizeof ulps, "a NaN against a number");
        else
            snprintf(ulps, sizeof ulps, "%llu ulps", (unsigned long long)worst.ulps);
        int n = snprintf(where, sizeof where, "; worst %s, at audited call %llu (%s", ulps,
                         (unsigned long long)worst.audited_number, worst.api);
        if (worst.trace_sequence && n > 0)
            n += snprintf(where + n, sizeof where - (size_t)n, ", trace seq=%llu",
                          (unsigned long long)worst.trace_sequence);
        if (n > 0) snprintf(where + n, sizeof where - (size_t)n, ")");
    }
    pthread_mutex_unlock(&worst_lock);
    reprod_log(REPROD_LOG_WARN,
               "audit: %llu calls audited, %llu differed from the exact sum (%llu elements)%s; "
               "%llu not audited (nonblocking, products, user ops, other types: native)",
               (unsigned long long)audited,
               (unsigned long long)atomic_load(&audited_differing_calls),
               (unsigned long long)atomic_load(&audited_differing_elements), where,
               (unsigned long long)unaudited);
}

/* The counts: line being built, a record of record.h after "counts:": words key=value that
 * tools (`reprod doctor`) read back and that no value can forge (each is escaped as a word).
 * A new field is one more add_word or add_count; readers ignore keys they do not know. */
struct counts_text {
    char text[1024];
    size_t used;
};

static void add_word(struct counts_text *counts, const char *key, const char *value)
{
    char word[128];
    reprod_escape_word(value, word, sizeof word);
    if (counts->used >= sizeof counts->text) return;
    int n = snprintf(counts->text + counts->used, sizeof counts->text - counts->used, " %s=%s", key,
                     word);
    if (n > 0 && counts->used + (size_t)n < sizeof counts->text)
        counts->used += (size_t)n;
    else
        counts->text[counts->used] = '\0'; /* a word that does not fit is left out whole */
}

static void add_count(struct counts_text *counts, const char *key, uint64_t value)
{
    char number[24];
    snprintf(number, sizeof number, "%llu", (unsigned long long)value);
    add_word(counts, key, number);
}

/* The counts as key=value words for tools (`reprod doctor`): one line, no prose. */
static void counts_line(uint64_t exact, uint64_t ordered, uint64_t passed)
{
    struct counts_text counts = {.text = "counts:", .used = strlen("counts:")};
    add_count(&counts, "pid", (uint64_t)getpid());
    add_count(&counts, "exact", exact);
    add_count(&counts, "ordered", ordered);
    add_count(&counts, "passed", passed);
    add_count(&counts, "audited", atomic_load(&audited_calls));
    add_count(&counts, "audit-differed", atomic_load(&audited_differing_calls));
    add_count(&counts, "seeds", atomic_load(&seed_calls));
    for (int f = 0; f < REPROD_FAMILY_COUNT; f++) {
        char key[32];
        snprintf(key, sizeof key, "%s.made", family_names[f]);
        add_count(&counts, key, atomic_load(&family_deterministic[f]));
        snprintf(key, sizeof key, "%s.passed", family_names[f]);
        add_count(&counts, key, atomic_load(&family_passed[f]));
    }
    for (int i = 0; i < REPROD_PASS_REASON_COUNT; i++) {
        uint64_t calls = atomic_load(&pass_calls[i]);
        if (!calls) continue;
        char key[64];
        snprintf(key, sizeof key, "pass.%s", reasons[i].name);
        for (char *c = key; *c; c++)
            if (*c == ' ' || *c == ',') *c = '-';
        add_count(&counts, key, calls);
    }
    const char *device = reprod_cuda_path_word(); /* where device reductions ran (cuda.h) */
    if (device) add_word(&counts, "device", device);
    reprod_log(REPROD_LOG_INFO, "%s", counts.text);
}

void reprod_stats_summary(void)
{
    uint64_t exact = atomic_load(&path_calls[REPROD_PATH_EXACT]);
    uint64_t ordered = atomic_load(&path_calls[REPROD_PATH_ORDERED]);
    uint64_t passed = 0;
    for (int i = 0; i < REPROD_PASS_REASON_COUNT; i++)
        passed += atomic_load(&pass_calls[i]);
    uint64_t audited = atomic_load(&audited_calls), seeds = atomic_load(&seed_calls);
    const char *device = reprod_cuda_path_word(); /* where device reductions ran (cuda.h) */
    if (exact + ordered + passed + audited + seeds == 0) return;
    if (atomic_flag_test_and_set(&summary_written)) return;
    audit_summary();
    if (!reprod_log_enabled(REPROD_LOG_INFO)) return;
    counts_line(exact, ordered, passed);

    char reasons_text[512] = "";
    size_t used = 0;
    for (int i = 0; i < REPROD_PASS_REASON_COUNT && used < sizeof reasons_text; i++) {
        uint64_t calls = atomic_load(&pass_calls[i]);
        if (!calls) continue;
        int n = snprintf(reasons_text + used, sizeof reasons_text - used, "%s%s %llu",
                         used ? ", " : "", reasons[i].name, (unsigned long long)calls);
        if (n > 0) used += (size_t)n;
    }
    char families_text[256] = "";
    size_t families_used = 0;
    for (int f = 0; f < REPROD_FAMILY_COUNT && families_used < sizeof families_text; f++) {
        uint64_t made = atomic_load(&family_deterministic[f]),
                 kept = atomic_load(&family_passed[f]);
        if (!made && !kept) continue;
        int n = snprintf(families_text + families_used, sizeof families_text - families_used,
                         "%s%s %llu reproducible, %llu passed", families_used ? "; " : "",
                         family_names[f], (unsigned long long)made, (unsigned long long)kept);
        if (n > 0) families_used += (size_t)n;
    }
    reprod_log(REPROD_LOG_INFO,
               "summary: %llu calls exact, %llu ordered, %llu passed through%s%s%s; "
               "by family: %s; %llu seeding calls; "
               "%.1f MiB reduced; %.3f ms in reproducible calls, %.3f ms of it arithmetic%s%s",
               (unsigned long long)exact, (unsigned long long)ordered, (unsigned long long)passed,
               used ? " (" : "", reasons_text, used ? ")" : "",
               families_used ? families_text : "none", (unsigned long long)seeds,
               (double)atomic_load(&path_bytes) / (1024.0 * 1024.0),
               (double)atomic_load(&shim_time_ns) / 1e6, (double)atomic_load(&engine_time_ns) / 1e6,
               device ? "; device reductions: " : "", device ? device : "");
}

void reprod_stats_reset(void)
{
    for (int i = 0; i < 2; i++)
        atomic_store(&path_calls[i], 0);
    atomic_store(&path_bytes, 0);
    atomic_store(&shim_time_ns, 0);
    atomic_store(&engine_time_ns, 0);
    for (int i = 0; i < REPROD_PASS_REASON_COUNT; i++) {
        atomic_store(&pass_calls[i], 0);
        atomic_store(&pass_warned[i], 0);
    }
    for (int f = 0; f < REPROD_FAMILY_COUNT; f++) {
        atomic_store(&family_deterministic[f], 0);
        atomic_store(&family_passed[f], 0);
    }
    atomic_store(&seed_calls, 0);
    atomic_store(&audited_calls, 0);
    atomic_store(&audited_differing_calls, 0);
    atomic_store(&audited_differing_elements, 0);
    worst.api = NULL;
    worst.ulps = 0;
}
