/* trace.c: the trace files of REPROD_TRACE. Format, one call per line, a record of record.h
 * (api, action and detail escaped as words: no value can make a space or a line of its own):
 *
 *   seq=12 api=MPI_Allreduce action=exact detail=float32 count=1000 ranks=4 in=<hex> out=<hex>
 *
 * after a first line "# reprod trace 1 rank=<r> world=<n> pid=<p>". A hash that does not
 * apply (a non-root's reduce result, a derived datatype with gaps) is written as "-".
 * An MPI reduction's line ends in " route=exchange|fixed|fixed-one-pass" (how its sum moved).
 * REPROD_MODE=audit appends " differ=<elements> ulps=<n|nan>" to an audited call (action=audit;
 * out= is the native result the job received). A seeding call is a line of its own:
 *
 *   seq=1 api=srand action=seed detail=hash count=0 ranks=4 in=<seed in> out=<seed out>
 *
 * The directory is reached through safe_path.h; `reprod diff` (tools/trace_diff.c) reads it.
 */
#include "runtime/trace.h"

#include "runtime/audit.h"
#include "runtime/config.h"
#include "interpose/guard.h"
#include "runtime/log.h"
#include "interpose/once.h"
#include "runtime/rank.h"
#include "runtime/record.h"
#include "runtime/safe_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct reprod_once open_once = REPROD_ONCE_INIT;
static int trace_fd = -1;        /* this process's trace once open_once has run; -1: none */
static _Atomic int write_failed; /* warned once; the trace is incomplete */
static int forked_child;         /* this process is a fork child: its file names its pid */
static _Atomic uint64_t sequence;

int reprod_trace_enabled(void)
{
    return reprod_config()->trace_dir[0] != '\0';
}

uint64_t reprod_trace_sequence(void)
{
    return atomic_fetch_add(&sequence, 1) + 1;
}

/* Eight bytes at a time, a multiply-xorshift mix per word and a final avalanche: fast enough
 * to hash gigabytes of contributions, stable across machines (little-endian loads). */
uint64_t reprod_trace_hash(const void *data, size_t bytes)
{
    const unsigned char *p = data;
    uint64_t hash = 0x9e3779b97f4a7c15ull ^ (bytes * 0xff51afd7ed558ccdull);
    while (bytes >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        hash = (hash ^ (word * 0xc4ceb9fe1a85ec53ull)) * 0x9e3779b97f4a7c15ull;
        hash ^= hash >> 29;
        p += 8;
        bytes -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, p, bytes);
    hash = (hash ^ (tail * 0xc4ceb9fe1a85ec53ull)) * 0x9e3779b97f4a7c15ull;
    hash ^= hash >> 33;
    hash *= 0xff51afd7ed558ccdull;
    return hash ^ (hash >> 33);
}

/* The trace directory, created as mkdir -p would and opened through safe_path.h (no symbolic
 * link, every directory on the way root's or this user's), or -1 after a warning. It must
 * itself be this user's and not writable by others: a directory another user can write to is
 * one where they could have prepared the trace's name. Checked on the open descriptor and used
 * through it (openat): the directory cannot be swapped in between. */
static int open_trace_directory(const char *dir, const char *shown_dir)
{
    char why[1024];
    int dir_fd = reprod_safe_open_directory(dir, 1, why, sizeof why);
    if (dir_fd < 0) {
        reprod_log(REPROD_LOG_WARN,
                   "warning: REPROD_TRACE: cannot use the directory %s: %s; no trace", shown_dir,
                   why);
        return -1;
    }
    struct stat status;
    if (fstat(dir_fd, &status) != 0 || status.st_uid != geteuid() || (status.st_mode & S_IWOTH)) {
        reprod_log(REPROD_LOG_WARN,
                   "warning: REPROD_TRACE: the directory %s is not yours or is writable by "
                   "others; no trace (use a directory of your own)",
                   shown_dir);
        close(dir_fd);
        return -1;
    }
    return dir_fd;
}

/* open_once's initialiser (inside the guard): create this process's trace file, which must
 * not exist yet: an existing trace is never overwritten, nor anything a link points to. */
static void open_trace(void)
{
    char dir[1024];
    reprod_escape_text(reprod_config()->trace_dir, dir, sizeof dir); /* for messages */
    char name[64];
    if (forked_child)
        snprintf(name, sizeof name, "rank%d.pid%ld.trace", reprod_rank(), (long)getpid());
    else
        snprintf(name, sizeof name, "rank%d.trace", reprod_rank());
    int dir_fd = open_trace_directory(reprod_config()->trace_dir, dir);
    if (dir_fd < 0) return;
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    int open_errno = errno;
    close(dir_fd);
    if (fd < 0 && open_errno == EEXIST) {
        reprod_log(REPROD_LOG_WARN,
                   "warning: REPROD_TRACE: %s/%s exists and traces are never overwritten: remove "
                   "it or use a new directory; no trace",
                   dir, name);
        return;
    }
    if (fd < 0) {
        reprod_log(REPROD_LOG_WARN, "warning: REPROD_TRACE: cannot create %s/%s (%s); no trace",
                   dir, name, strerror(open_errno));
        return;
    }
    char header[128];
    int length = snprintf(header, sizeof header, "# reprod trace 1 rank=%d world=%d pid=%ld\n",
                          reprod_rank(), reprod_world_size(), (long)getpid());
    if (write(fd, header, (size_t)length) != length) {
        close(fd);
        return;
    }
    trace_fd = fd;
}

/* Write `record`'s line with `suffix` (empty, or " differ=... ulps=...") before its newline. */
static void write_record(const struct reprod_trace_record *record, const char *suffix)
{
    if (!reprod_trace_enabled()) return;
    char input[24] = "-", output[24] = "-";
    if (record->has_input)
        snprintf(input, sizeof input, "%016llx", (unsigned long long)record->input_hash);
    if (record->has_output)
        snprintf(output, sizeof output, "%016llx", (unsigned long long)record->output_hash);
    /* Words (record.h): the fields are separated by spaces, and a line ends the record. */
    char spaced[64], api[128], action[64], detail[128];
    snprintf(spaced, sizeof spaced, "%s", record->detail ? record->detail : "");
    for (char *c = spaced; *c; c++)
        if (*c == ' ') *c = '-'; /* "non-float type": non-float-type, as it always was */
    reprod_escape_word(spaced, detail, sizeof detail);
    reprod_escape_word(record->api ? record->api : "", api, sizeof api);
    reprod_escape_word(record->action ? record->action : "", action, sizeof action);
    char line[512];
    int length =
        snprintf(line, sizeof line,
                 "seq=%llu api=%s action=%s detail=%s count=%lld ranks=%d in=%s out=%s%s\n",
                 (unsigned long long)record->sequence, api, action, detail, record->count,
                 record->ranks, input, output, suffix);
    if (length <= 0 || (size_t)length >= sizeof line) return;
    /* A line written while this thread opens the trace (a warning that re-enters) is dropped. */
    if (!reprod_once(&open_once, open_trace) || trace_fd < 0) return;
    reprod_guard_enter();
    ssize_t written = write(trace_fd, line, (size_t)length);
    int write_errno = errno;
    reprod_guard_leave();
    if (written != length && !atomic_exchange(&write_failed, 1))
        reprod_log(REPROD_LOG_WARN, "warning: REPROD_TRACE: write failed (%s); trace incomplete",
                   written < 0 ? strerror(write_errno) : "short write");
}

void reprod_trace_write(const struct reprod_trace_record *record)
{
    write_record(record, "");
}

void reprod_trace_write_route(const struct reprod_trace_record *record, const char *route)
{
    char word[48], suffix[64];
    reprod_escape_word(route, word, sizeof word);
    snprintf(suffix, sizeof suffix, " route=%s", word);
    write_record(record, suffix);
}

void reprod_trace_write_audited(const struct reprod_trace_record *record, uint64_t differing,
                                uint64_t worst_ulps)
{
    char suffix[64];
    if (worst_ulps == REPROD_ULPS_NAN)
        snprintf(suffix, sizeof suffix, " differ=%llu ulps=nan", (unsigned long long)differing);
    else
        snprintf(suffix, sizeof suffix, " differ=%llu ulps=%llu", (unsigned long long)differing,
                 (unsigned long long)worst_ulps);
    write_record(record, suffix);
}

void reprod_trace_seed(const char *api, const char *policy, uint64_t seed_in, uint64_t seed_out)
{
    if (!reprod_trace_enabled()) return;
    struct reprod_trace_record record;
    memset(&record, 0, sizeof record);
    record.sequence = reprod_trace_sequence();
    record.api = api;
    record.action = "seed";
    record.detail = policy;
    record.ranks = reprod_world_size();
    record.has_input = record.has_output = 1;
    record.input_hash = seed_in; /* the seeds themselves, not hashes: diff prints them */
    record.output_hash = seed_out;
    reprod_trace_write(&record);
}

void reprod_trace_reset_after_fork(void)
{
    if (trace_fd >= 0) {
        reprod_guard_enter();
        close(trace_fd);
        reprod_guard_leave();
    }
    trace_fd = -1;
    atomic_store(&write_failed, 0);
    forked_child = 1;
    atomic_store(&sequence, 0);
    reprod_once_reset(&open_once);
}
