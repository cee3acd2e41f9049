/* stats.h: what the shim did, counted per process, and the decision shared by every hook on
 * calls it passes through unchanged (count, log, or stop under REPROD_STRICT=1). */
#ifndef REPROD_STATS_H
#define REPROD_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Why a call went to the real library unchanged. */
enum reprod_reason {
    REPROD_PASS_MODE_OFF = 0,     /* REPROD_MODE=off */
    REPROD_PASS_DETERMINISTIC_OP, /* max, min, logical, bitwise, loc, replace, no-op */
    REPROD_PASS_NON_FLOAT,        /* integer or other types whose sum is exact already */
    REPROD_PASS_EMPTY,            /* nothing to reduce */
    REPROD_PASS_NOT_ACTIVE,       /* the library is not initialised (it reports the error) */
    REPROD_PASS_BAD_ARGUMENT,     /* the real library checks and reports it */
    REPROD_PASS_INTERCOMM,        /* an intercommunicator */
    REPROD_PASS_NO_MEMORY,        /* the shim could not get its scratch memory */
    REPROD_PASS_UNSUPPORTED,      /* anything else the shim cannot make deterministic */
    REPROD_PASS_ONE_RANK,         /* a one-rank communicator: nothing to combine */
    REPROD_PASS_AUDIT,            /* REPROD_MODE=audit: the native result, not audited */
    REPROD_PASS_REASON_COUNT
};

/* How a deterministic call was made so. */
enum reprod_path {
    REPROD_PATH_EXACT = 0, /* exact sum rounded once */
    REPROD_PATH_ORDERED,   /* rank-order fold */
};

/* Monotonic time in nanoseconds. */
uint64_t reprod_clock_ns(void);

/* Monotonic time in nanoseconds when the times are reported (REPROD_VERBOSE >= 1), else 0:
 * reading the clock costs as much as a small reduction's arithmetic. */
uint64_t reprod_stats_clock_ns(void);

/* The reason's name for logs ("integer type", "intercommunicator", ...). */
const char *reprod_reason_name(enum reprod_reason reason);

/* 1 when passing a call through for `reason` leaves its result deterministic anyway. */
int reprod_reason_is_deterministic(enum reprod_reason reason);

/* The API family of an intercepted call, from its name ("MPI_...", "PMPI_...", "nccl..."), for
 * the summary's count by family. */
enum reprod_family {
    REPROD_FAMILY_MPI = 0,
    REPROD_FAMILY_NCCL,
    REPROD_FAMILY_OTHER,
    REPROD_FAMILY_COUNT
};
enum reprod_family reprod_family_of(const char *api);

/* Count a call of `api` made deterministic: its payload in bytes, wall time in the shim and the
 * part of it spent in the engine. Counted only when the summary is written (REPROD_VERBOSE >=
 * 1). */
void reprod_stats_record(const char *api, enum reprod_path path, size_t bytes, uint64_t shim_ns,
                         uint64_t engine_ns);

/* Count and log a call handed to the real library unchanged. A reason that may leave the
 * result non-deterministic is logged once per reason as a warning; any other reason once at
 * REPROD_VERBOSE=1 (every call at REPROD_VERBOSE=2). Returns 0 to go on; -1 when
 * REPROD_STRICT=1 forbids the pass-through, after logging an error: the caller must stop the
 * job. */
int reprod_pass_through(const char *api, enum reprod_reason reason, const char *detail);

/* REPROD_MODE=audit: count one audited call of `api` (trace number `trace_sequence`, 0 when
 * not tracing) whose native result had `differing` elements not bitwise equal to the exact
 * sum, the farthest `worst_ulps` units in the last place away (REPROD_ULPS_NAN: a NaN where
 * the other is a number). */
void reprod_stats_audit(const char *api, uint64_t trace_sequence, uint64_t differing,
                        uint64_t worst_ulps);

/* Count one seeding call that reached a hook (for the summary and `reprod doctor`). */
void reprod_stats_seed(void);

/* Log the one-line summary (REPROD_VERBOSE >= 1), at most once per process; called at exit.
 * A process in which nothing was intercepted writes nothing. With it, a line of key=value
 * counts for tools ("counts: pid=... exact=... pass.non-float-type=... seeds=..."; read by
 * `reprod doctor`). Under REPROD_MODE=audit the audit line ("audit: N calls audited, ...") is
 * written whatever REPROD_VERBOSE says: asking for an audit is asking for its answer. */
void reprod_stats_summary(void);

/* Zero the counters (the fork child starts its own account). */
void reprod_stats_reset(void);

#endif /* REPROD_STATS_H */
