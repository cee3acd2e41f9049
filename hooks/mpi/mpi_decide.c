/* mpi_decide.c: whether an MPI reduction takes the deterministic path or goes to the real
 * library, and the accounting of both (statistics, log, trace, REPROD_STRICT). */
#include "mpi/mpi_path.h"

#include "common.h"
#include "runtime/config.h"
#include "interpose/init.h"
#include "runtime/log.h"
#include "runtime/rank.h"
#include "runtime/stats.h"
#include "runtime/trace.h"

#include <string.h>
#include <unistd.h>

int mpi_buffers_erroneous(const struct mpi_reduction *reduction, const void *sendbuf,
                          const void *recvbuf, mpi_count elements, int receives,
                          int alias_checked, int send_in_place_allowed)
{
    if (elements <= 0) return 0;
    if (mpi_in_place(sendbuf) && !send_in_place_allowed) return 1;
    /* Send and receive buffer the same memory: some libraries accept it in some calls (Open
     * MPI in a scan), so every rank must judge it alike, whether it receives or not. */
    if (alias_checked && sendbuf == recvbuf && !mpi_in_place(sendbuf)) return 1;
    /* A NULL buffer with a predefined type (a derived one may address absolute memory from
     * MPI_BOTTOM, which is NULL). The library refuses these on the rank that passes them. */
    if (reduction->type.predefined && !sendbuf) return 1;
    if (!receives) return 0;
    return mpi_in_place(recvbuf) || (reduction->type.predefined && !recvbuf);
}

/* 1 when a pass-through for `reason` has a datatype the library accepted already. */
static int datatype_is_valid(enum reprod_reason reason)
{
    return reason == REPROD_PASS_DETERMINISTIC_OP || reason == REPROD_PASS_NON_FLOAT ||
           reason == REPROD_PASS_EMPTY || reason == REPROD_PASS_INTERCOMM ||
           reason == REPROD_PASS_MODE_OFF;
}

/* The bytes of one element of `datatype` when it is plain bytes (hashable), else 0. */
static size_t hashable_bytes(mpi_handle datatype)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_count bytes = 0, lb, extent, true_lb, true_extent;
    if (mpi->real.Type_size_x(datatype, &bytes) != REPROD_MPI_OK ||
        mpi->real.Type_get_extent(datatype, &lb, &extent) != REPROD_MPI_OK ||
        mpi->real.Type_get_true_extent(datatype, &true_lb, &true_extent) != REPROD_MPI_OK ||
        bytes <= 0 || extent != bytes || true_lb != 0 || true_extent != extent)
        return 0;
    return (size_t)bytes;
}

/* Stop the job: REPROD_STRICT=1 refused a pass-through, or the shim cannot go on. The job is
 * aborted through `comm` (0: MPI_COMM_WORLD, when the world model runs; under sessions alone
 * the process exits and the launcher ends the others). */
static _Noreturn void stop_job(mpi_handle comm)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    if (mpi->usable && (comm || reprod_mpi_world_running()))
        mpi->real.Abort(comm ? comm : mpi->comm_world, 2);
    _exit(2); /* Abort returned, or there is no MPI to abort with */
}

void mpi_pass_begin(struct mpi_pass *pass, const char *api, enum reprod_reason reason,
                    mpi_count elements, mpi_handle datatype, const void *input)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    memset(pass, 0, sizeof *pass);
    pass->api = api;
    pass->reason = reason;
    pass->elements = elements;
    if (reprod_trace_enabled()) {
        pass->trace_sequence = reprod_trace_sequence();
        if (mpi->usable && datatype_is_valid(reason) && datatype != mpi->datatype_null &&
            reprod_mpi_state() == REPROD_MPI_RUNNING)
            pass->type_bytes = hashable_bytes(datatype);
        if (pass->type_bytes && input && !mpi_in_place(input) && elements > 0) {
            pass->has_input = 1;
            pass->input_hash = reprod_trace_hash(input, (size_t)elements * pass->type_bytes);
        }
    }
    if (reprod_pass_through(api, reason, mpi->usable ? NULL : mpi->why_not) != 0) stop_job(0);
}

int mpi_pass_end(const struct mpi_pass *pass, int rc, const void *output, mpi_count output_elements)
{
    /* The shim passes a call it takes for erroneous (or for made while MPI does not run) to the
     * library, which reports it. If the library runs it after all, its result is the
     * library's: say so. */
    if (pass->elements != 0 && rc == REPROD_MPI_OK &&
        (pass->reason == REPROD_PASS_BAD_ARGUMENT || pass->reason == REPROD_PASS_NOT_ACTIVE) &&
        reprod_pass_through(pass->api, REPROD_PASS_UNSUPPORTED,
                            pass->reason == REPROD_PASS_BAD_ARGUMENT
                                ? "arguments MPI calls erroneous, accepted by the library"
                                : "MPI seemed not to run, yet the library reduced") != 0)
        stop_job(0);
    if (!pass->trace_sequence) return rc;
    struct reprod_trace_record record = {pass->trace_sequence,
                                         pass->api,
                                         "pass",
                                         reprod_reason_name(pass->reason),
                                         pass->elements,
                                         0,
                                         pass->has_input,
                                         pass->input_hash,
                                         0,
                                         0};
    if (rc == REPROD_MPI_OK && pass->type_bytes && output && output_elements > 0) {
        record.has_output = 1;
        record.output_hash = reprod_trace_hash(output, (size_t)output_elements * pass->type_bytes);
    }
    reprod_trace_write(&record);
    return rc;
}

/* Learn our rank from MPI_COMM_WORLD once MPI runs (the launcher's variable may be absent). */
static void learn_rank(const struct reprod_mpi *mpi)
{
    if (reprod_rank_source(NULL) == REPROD_RANK_FROM_LIBRARY || !reprod_mpi_world_running())
        return;
    int rank = 0, size = 0;
    if (mpi->real.Comm_rank(mpi->comm_world, &rank) == REPROD_MPI_OK &&
        mpi->real.Comm_size(mpi->comm_world, &size) == REPROD_MPI_OK)
        reprod_rank_set_from_library(rank, size);
}

/* The geometry of the reduction's datatype. Returns 0, or the reason to pass. */
static int learn_geometry(struct mpi_reduction *reduction)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    if (reduction->type.element_class == REPROD_ELEMENT_ENGINE_FLOAT &&
        reduction->type.predefined) {
        /* A predefined float type: contiguous, its size known without asking. */
        reduction->type_bytes = (mpi_count)(reprod_type_size(reduction->type.engine_type) *
                                            (size_t)reduction->type.engine_elements);
        reduction->extent = reduction->true_extent = reduction->type_bytes;
        reduction->true_lb = 0;
        reduction->plain = 1;
        return -1;
    }
    mpi_count lb = 0;
    if (mpi->real.Type_size_x(reduction->datatype, &reduction->type_bytes) != REPROD_MPI_OK ||
        mpi->real.Type_get_extent(reduction->datatype, &lb, &reduction->extent) != REPROD_MPI_OK ||
        mpi->real.Type_get_true_extent(reduction->datatype, &reduction->true_lb,
                                       &reduction->true_extent) != REPROD_MPI_OK)
        return REPROD_PASS_BAD_ARGUMENT;
    if (reduction->type_bytes == 0) return REPROD_PASS_EMPTY;
    /* Negative or overlapping extents (resized types) have no layout the shim can copy. */
    if (reduction->type_bytes < 0 || reduction->extent <= 0 || reduction->true_extent <= 0 ||
        reduction->true_lb < 0 || reduction->true_extent > reduction->extent)
        return REPROD_PASS_UNSUPPORTED;
    reduction->plain = reduction->type_bytes == reduction->extent &&
                       reduction->true_lb == 0 && reduction->true_extent == reduction->extent;
    return -1;
}

/* The communicator's size and our rank in it, for `elements` elements. Returns -1, or the
 * reason to pass (an intercommunicator, nothing to reduce, a handle the library refuses).
 * MPI_COMM_WORLD's are known without asking (three calls into the library cost a small
 * reduction as much as its arithmetic). */
static int learn_communicator(struct mpi_reduction *reduction, mpi_count elements)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_handle comm = reduction->comm;
    int known = comm == mpi->comm_world &&
                reprod_mpi_world_geometry(&reduction->ranks, &reduction->rank);
    int inter = 0;
    if (!known && mpi->real.Comm_test_inter(comm, &inter) != REPROD_MPI_OK)
        return REPROD_PASS_BAD_ARGUMENT;
    if (inter) return REPROD_PASS_INTERCOMM;
    if (elements == 0) return REPROD_PASS_EMPTY;
    if (!known && (mpi->real.Comm_size(comm, &reduction->ranks) != REPROD_MPI_OK ||
                   mpi->real.Comm_rank(comm, &reduction->rank) != REPROD_MPI_OK))
        return REPROD_PASS_BAD_ARGUMENT;
    return -1;
}

/* The decision once the library is known to run; see mpi_reduction_decide. */
static int decide_running(struct mpi_reduction *reduction, mpi_count elements)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    mpi_handle datatype = reduction->datatype, op = reduction->op, comm = reduction->comm;
    /* A null handle is the library's to report: ask it nothing about it first. */
    if (elements < 0 || !datatype || !op || !comm || datatype == mpi->datatype_null ||
        op == mpi->op_null || comm == mpi->comm_null)
        return REPROD_PASS_BAD_ARGUMENT;
    enum reprod_op_class op_class = reprod_mpi_classify_op(op);
    if (op_class == REPROD_OPCLASS_DETERMINISTIC) return REPROD_PASS_DETERMINISTIC_OP;
    if (reprod_mpi_classify_type(datatype, &reduction->type) != REPROD_MPI_OK)
        return REPROD_PASS_BAD_ARGUMENT;
    struct reprod_decision decision;
    reprod_decide(op_class, reduction->type.element_class, &decision);
    /* Audit mode passes a float sum through, to be audited beside: it goes on to learn the
     * reduction's geometry (and may still pass for a structural reason). */
    if (decision.action == REPROD_ACTION_PASS && decision.audit_action == REPROD_ACTION_PASS)
        return decision.reason;
    /* MPI defines its predefined ops on predefined datatypes only; Open MPI and MPICH answer
     * MPI_ERR_OP for a derived one. */
    if (!reduction->type.predefined && op_class != REPROD_OPCLASS_USER)
        return REPROD_PASS_BAD_ARGUMENT;
    int why = learn_communicator(reduction, elements);
    if (why >= 0) return why;
    why = learn_geometry(reduction);
    if (why >= 0) return why;
    reduction->action = decision.action;
    if (decision.action != REPROD_ACTION_PASS) return -1;
    reduction->audit = reduction->plain && reduction->type.predefined &&
                       reduction->type.element_class == REPROD_ELEMENT_ENGINE_FLOAT;
    return decision.reason;
}

enum reprod_action mpi_reduction_decide(struct mpi_reduction *reduction, const char *api,
                                        mpi_count elements, mpi_handle datatype, mpi_handle op,
                                        mpi_handle comm, enum reprod_reason *reason)
{
    reprod_init();
    memset(reduction, 0, sizeof *reduction);
    reduction->api = api;
    reduction->datatype = datatype;
    reduction->op = op;
    reduction->comm = comm;
    /* Times only for the summary and the log: reading the clock costs a small reduction as
     * much as its arithmetic. */
    reduction->timed = reprod_log_enabled(REPROD_LOG_INFO);
    if (reduction->timed) reduction->start_ns = reprod_clock_ns();
    reduction->action = REPROD_ACTION_PASS;
    if (reprod_config()->mode == REPROD_MODE_OFF) {
        *reason = REPROD_PASS_MODE_OFF;
        return REPROD_ACTION_PASS;
    }
    const struct reprod_mpi *mpi = reprod_mpi();
    if (!mpi->usable) {
        *reason = REPROD_PASS_UNSUPPORTED;
        return REPROD_ACTION_PASS;
    }
    if (reprod_mpi_state() != REPROD_MPI_RUNNING) {
        *reason = REPROD_PASS_NOT_ACTIVE;
        return REPROD_ACTION_PASS;
    }
    learn_rank(mpi);
    int why = decide_running(reduction, elements);
    if (why >= 0) {
        reduction->action = REPROD_ACTION_PASS;
        *reason = (enum reprod_reason)why;
    }
    return reduction->action;
}

void mpi_trace_input(struct mpi_reduction *reduction, const void *input, mpi_count elements)
{
    if (!reprod_trace_enabled()) return;
    reduction->trace_sequence = reprod_trace_sequence();
    if (reduction->plain && input && elements > 0) {
        reduction->trace_has_input = 1;
        reduction->trace_input_hash =
            reprod_trace_hash(input, (size_t)elements * (size_t)reduction->type_bytes);
    }
}

const char *mpi_type_name(const struct mpi_reduction *reduction)
{
    static const char *const names[4][2] = {{"float16", "complex32"},
                                            {"bfloat16", "complex-bfloat16"},
                                            {"float32", "complex64"},
                                            {"float64", "complex128"}};
    if (reduction->type.element_class != REPROD_ELEMENT_ENGINE_FLOAT) return "mpi-datatype";
    return names[reduction->type.engine_type][reduction->type.engine_elements == 2];
}

/* Write the trace line of a finished call (see mpi_reduction_done). */
static void trace_output(const struct mpi_reduction *reduction, mpi_count elements,
                         const void *output, mpi_count output_elements)
{
    static const char *const actions[] = {"pass", "exact", "ordered", "ordered-mpi-op"};
    struct reprod_trace_record record = {reduction->trace_sequence,
                                         reduction->api,
                                         actions[reduction->action],
                                         mpi_type_name(reduction),
                                         elements,
                                         reduction->ranks,
                                         reduction->trace_has_input,
                                         reduction->trace_input_hash,
                                         0,
                                         0};
    if (output && reduction->plain && output_elements > 0) {
        record.has_output = 1;
        record.output_hash =
            reprod_trace_hash(output, (size_t)output_elements * (size_t)reduction->type_bytes);
    }
    reprod_trace_write_route(&record, reprod_route_name(reduction->taken));
}

int mpi_reduction_done(struct mpi_reduction *reduction, mpi_count elements, const char *how,
                       int rc, const void *output, mpi_count output_elements)
{
    /* An error of the shim's own (not one the library reported through its handler already)
     * goes through the communicator's handler, as the library's would. The communicator of a
     * nonblocking call may be gone by its completion: its error is only returned. */
    if (rc != REPROD_MPI_OK && rc == reduction->own_error && !reduction->keeps_scratch)
        reprod_mpi()->real.Comm_call_errhandler(reduction->comm, rc);
    if (reduction->trace_sequence)
        trace_output(reduction, elements, rc == REPROD_MPI_OK ? output : NULL, output_elements);
    if (!reduction->timed) return rc; /* neither counted (reprod_stats_record) nor logged */
    uint64_t elapsed = reduction->shim_ns + (reprod_stats_clock_ns() - reduction->start_ns);
    enum reprod_path path =
        reduction->action == REPROD_ACTION_EXACT ? REPROD_PATH_EXACT : REPROD_PATH_ORDERED;
    reprod_stats_record(reduction->api, path, (size_t)elements * (size_t)reduction->type_bytes, elapsed,
                        reduction->engine_ns);
    if (!reprod_log_enabled(REPROD_LOG_DEBUG)) return rc;
    const char *what = reduction->action == REPROD_ACTION_EXACT            ? "exact"
                       : reduction->action == REPROD_ACTION_ORDERED_ENGINE ? "ordered"
                                                                           : "ordered (MPI op)";
    reprod_log(REPROD_LOG_DEBUG,
               "%s: %s, %lld elements of %lld bytes over %d ranks, %s%s%s%s, %.1f us, rc %d",
               reduction->api, what, (long long)elements, (long long)reduction->type_bytes,
               reduction->ranks, how, reduction->route ? " (" : "",
               reduction->route ? reduction->route : "", reduction->route ? ")" : "",
               (double)elapsed / 1e3, rc);
    return rc;
}

_Noreturn void mpi_fatal_no_memory(const struct mpi_reduction *reduction, size_t bytes)
{
    reprod_log(REPROD_LOG_ERROR,
               "error: %s: no memory for %zu bytes of the shim's scratch; the other ranks are "
               "already in this collective, so the job stops here rather than hang",
               reduction->api, bytes);
    stop_job(reduction->comm);
}

int mpi_own_error(struct mpi_reduction *reduction, int code)
{
    if (code != REPROD_MPI_OK && !reduction->own_error) reduction->own_error = code;
    return code;
}
