/* mpi_audit.c: REPROD_MODE=audit for the blocking MPI reductions: the job gets the library's
 * native result, unchanged; beside it the shim computes the exact sum into scratch and records
 * how far the native one was (elements that differ, the largest distance in ulps).
 *
 * Every rank decides to audit from the arguments alone (mpi_reduction_decide), runs the native
 * call and then the exact path: two collectives in the same order on every rank.
 * Nonblocking and persistent reductions are not audited (their native result is returned, and
 * counted as "audit mode, native").
 */
#include "mpi/mpi_path.h"

#include "runtime/audit.h"
#include "runtime/log.h"
#include "runtime/stats.h"
#include "runtime/trace.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

char *mpi_audit_begin(struct mpi_audit *audit, struct mpi_reduction *reduction,
                      const void *sendbuf, const void *recvbuf, mpi_count input_elements,
                      mpi_count output_elements)
{
    memset(audit, 0, sizeof *audit);
    audit->reduction = reduction;
    audit->input_elements = input_elements;
    audit->output_elements = output_elements;
    reduction->action = REPROD_ACTION_EXACT;
    size_t element_bytes = (size_t)reduction->type_bytes; /* plain: audited types are */
    audit->source = mpi_source(sendbuf, recvbuf);
    if (mpi_in_place(sendbuf) && input_elements > 0) {
        /* The native call overwrites the contribution: the exact path reads a copy. */
        audit->source_copy = mpi_allocate(reduction, (size_t)input_elements * element_bytes);
        memcpy(audit->source_copy, audit->source, (size_t)input_elements * element_bytes);
        audit->source = audit->source_copy;
    }
    mpi_trace_input(reduction, audit->source, input_elements);
    if (output_elements > 0)
        audit->exact = mpi_allocate(reduction, (size_t)output_elements * element_bytes);
    return audit->exact;
}

/* Say once per process that an exact path failed beside a native call (the job goes on with
 * the native result; the call is not counted as audited). */
static void warn_exact_failed(const char *api, int rc)
{
    static _Atomic int warned;
    if (!atomic_exchange(&warned, 1))
        reprod_log(REPROD_LOG_WARN,
                   "warning: audit: the exact sum beside %s failed (MPI error %d); that call is "
                   "not audited, the job keeps the native result",
                   api, rc);
}

int mpi_audit_end(struct mpi_audit *audit, int native_rc, int exact_rc, const void *output)
{
    struct mpi_reduction *reduction = audit->reduction;
    uint64_t differing = 0, worst_ulps = 0;
    int compared = native_rc == REPROD_MPI_OK && exact_rc == REPROD_MPI_OK;
    if (compared && audit->exact && output)
        reprod_audit_compare(reduction->type.engine_type, output, audit->exact,
                             (size_t)audit->output_elements,
                             (size_t)reduction->type.engine_elements, &differing, &worst_ulps);
    if (compared)
        reprod_stats_audit(reduction->api, reduction->trace_sequence, differing, worst_ulps);
    else if (native_rc == REPROD_MPI_OK)
        warn_exact_failed(reduction->api, exact_rc);
    if (reduction->trace_sequence) {
        struct reprod_trace_record record;
        memset(&record, 0, sizeof record);
        record.sequence = reduction->trace_sequence;
        record.api = reduction->api;
        record.action = "audit";
        record.detail = mpi_type_name(reduction);
        record.count = audit->input_elements;
        record.ranks = reduction->ranks;
        record.has_input = reduction->trace_has_input;
        record.input_hash = reduction->trace_input_hash;
        if (native_rc == REPROD_MPI_OK && output && audit->output_elements > 0) {
            record.has_output = 1;
            record.output_hash = reprod_trace_hash(
                output, (size_t)audit->output_elements * (size_t)reduction->type_bytes);
        }
        if (compared)
            reprod_trace_write_audited(&record, differing, worst_ulps);
        else
            reprod_trace_write(&record);
    }
    reprod_log(REPROD_LOG_DEBUG, "%s: audited, %lld elements received, %llu differ from the exact "
               "sum, worst %llu ulps, rc %d",
               reduction->api, (long long)audit->output_elements, (unsigned long long)differing,
               (unsigned long long)worst_ulps, native_rc);
    free(audit->source_copy);
    free(audit->exact);
    return native_rc;
}
