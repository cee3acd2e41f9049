/* trace.h: per-rank traces of the intercepted calls (REPROD_TRACE=<dir>).
 *
 * One text file per rank, one line per call, with a hash of this rank's contribution and of
 * the result it received. `reprod diff <dir-a> <dir-b>` walks two runs' traces side by side
 * and names the first call where they part, and which side differed first: the contributions
 * (the application's side) or the result from identical contributions (the reduction's).
 */
#ifndef REPROD_TRACE_H
#define REPROD_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* One traced call. Strings are the caller's; hashes are valid where has_* is set. */
struct reprod_trace_record {
    uint64_t sequence;  /* the call's number in this process, from reprod_trace_sequence */
    const char *api;    /* "MPI_Allreduce" */
    const char *action; /* "exact", "ordered", "pass" */
    const char *detail; /* the element type, or the pass-through's reason */
    long long count;    /* elements */
    int ranks;          /* communicator size */
    int has_input;
    uint64_t input_hash; /* this rank's contribution */
    int has_output;
    uint64_t output_hash; /* what this rank received */
};

/* 1 when REPROD_TRACE is set. */
int reprod_trace_enabled(void);

/* The next call number of this process (1, 2, ...). */
uint64_t reprod_trace_sequence(void);

/* A 64-bit hash of `bytes` bytes (not cryptographic; the same on every machine). */
uint64_t reprod_trace_hash(const void *data, size_t bytes);

/* REPROD_MODE=audit: reprod_trace_write with " differ=<differing> ulps=<worst_ulps>" appended
 * (elements whose bits differ between the native and the exact result, and the largest
 * distance in ulps, "nan" for REPROD_ULPS_NAN). */
void reprod_trace_write_audited(const struct reprod_trace_record *record, uint64_t differing,
                                uint64_t worst_ulps);

/* Append the line of a seeding call of `api` (action "seed", detail the policy, in= the seed
 * passed, out= the seed the real function got), numbered in the same sequence as reductions:
 * `reprod diff` can then say two runs were seeded differently before a reduction differed. */
void reprod_trace_seed(const char *api, const char *policy, uint64_t seed_in, uint64_t seed_out);

/* Append one line for `record` to this process's trace (opened on first use). Failures to
 * write are reported once as a warning and never disturb the job. */
void reprod_trace_write(const struct reprod_trace_record *record);

/* reprod_trace_write with " route=<route>" appended: how the sum moved ("exchange", "fixed",
 * "fixed-one-pass"; runtime/route.h), which `reprod diff` reads past. */
void reprod_trace_write_route(const struct reprod_trace_record *record, const char *route);

/* The fork child writes its own file. */
void reprod_trace_reset_after_fork(void);

#endif /* REPROD_TRACE_H */
