/* mpi.c: the blocking MPI reductions, in their classic and large-count (MPI-4 _c) bindings,
 * and MPI_Init / MPI_Finalize.
 *
 * Each hook decides (mpi_reduction_decide) and either hands the call to the real library
 * untouched or runs the deterministic data path of mpi_path.c. Every entry point also answers
 * to its PMPI_ name (MPI_HOOK): Open MPI's Fortran bindings call those.
 */
#include "mpi/mpi_path.h"

#include "runtime/rank.h"

#include <stdlib.h>

/* MPI_Init and MPI_Init_thread: learn the rank as soon as MPI knows it. */
static void after_init(int rc)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int rank = 0, size = 0;
    if (rc != REPROD_MPI_OK) return;
    reprod_mpi_set_state(REPROD_MPI_RUNNING);
    if (mpi->usable && mpi->real.Comm_rank(mpi->comm_world, &rank) == REPROD_MPI_OK &&
        mpi->real.Comm_size(mpi->comm_world, &size) == REPROD_MPI_OK) {
        reprod_rank_set_from_library(rank, size);
        reprod_mpi_note_world(size, rank);
    }
}

MPI_HOOK(Init, (int *argc, char ***argv))
{
    int rc = REAL_MPI(Init)(argc, argv);
    after_init(rc);
    return rc;
}

MPI_HOOK(Init_thread, (int *argc, char ***argv, int required, int *provided))
{
    int rc = REAL_MPI(Init_thread)(argc, argv, required, provided);
    after_init(rc);
    return rc;
}

/* MPI-4 sessions: reductions on communicators made from a session are intercepted while one
 * lives, though MPI_Initialized says no. */
MPI_HOOK(Session_init, (mpi_handle_arg info_arg, mpi_handle_arg errhandler_arg, void *session))
{
    mpi_handle info = mpi_handle_of(info_arg), errhandler = mpi_handle_of(errhandler_arg);
    int rc = REAL_MPI(Session_init)(info, errhandler, session);
    if (rc == REPROD_MPI_OK) reprod_mpi_count_session(+1);
    return rc;
}

MPI_HOOK(Session_finalize, (void *session))
{
    int rc = REAL_MPI(Session_finalize)(session);
    if (rc == REPROD_MPI_OK) reprod_mpi_count_session(-1);
    return rc;
}

MPI_HOOK(Finalize, (void))
{
    reprod_mpi_set_state(REPROD_MPI_FINALIZING);
    return REAL_MPI(Finalize)();
}

/* The checks after a decision to go deterministic: when the buffers are erroneous the call
 * goes to the library instead, which reports it. */
static enum reprod_action check_buffers(struct mpi_reduction *reduction, enum reprod_action action,
                                        enum reprod_reason *reason, const void *sendbuf,
                                        const void *recvbuf, mpi_count elements, int receives,
                                        int alias_checked, int send_in_place_allowed)
{
    if (action == REPROD_ACTION_PASS ||
        !mpi_buffers_erroneous(reduction, sendbuf, recvbuf, elements, receives, alias_checked,
                               send_in_place_allowed))
        return action;
    *reason = REPROD_PASS_BAD_ARGUMENT;
    return REPROD_ACTION_PASS;
}

/* REPROD_MODE=audit: a call to audit is checked as the exact path would be (an erroneous one
 * goes to the library as such). */
static enum reprod_action audited(const struct mpi_reduction *reduction, enum reprod_action action)
{
    return reduction->audit ? REPROD_ACTION_EXACT : action;
}

static int allreduce(const char *api, const void *sendbuf, void *recvbuf, mpi_count count,
                     int large, mpi_handle datatype, mpi_handle op, mpi_handle comm)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action =
        mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason);
    action = check_buffers(&reduction, audited(&reduction, action), &reason, sendbuf, recvbuf,
                           count, 1, 1, 1);
    if (action == REPROD_ACTION_PASS || reduction.audit) {
        struct mpi_pass pass;
        struct mpi_audit audit;
        char *exact = NULL;
        if (action == REPROD_ACTION_PASS)
            mpi_pass_begin(&pass, api, reason, count, datatype, mpi_source(sendbuf, recvbuf));
        else
            exact = mpi_audit_begin(&audit, &reduction, sendbuf, recvbuf, count, count);
        int rc = large ? REAL_MPI(Allreduce_c)(sendbuf, recvbuf, count, datatype, op, comm)
                       : REAL_MPI(Allreduce)(sendbuf, recvbuf, (int)count, datatype, op, comm);
        if (action == REPROD_ACTION_PASS) return mpi_pass_end(&pass, rc, recvbuf, count);
        int exact_rc = mpi_allreduce_path(&reduction, audit.source, exact, count);
        return mpi_audit_end(&audit, rc, exact_rc, recvbuf);
    }
    const void *source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&reduction, source, count);
    int rc = mpi_allreduce_path(&reduction, source, recvbuf, count);
    return mpi_reduction_done(&reduction, count, "all-reduce", rc, recvbuf, count);
}

MPI_HOOK(Allreduce, (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
                     mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter()) return REAL_MPI(Allreduce)(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = allreduce("MPI_Allreduce", sendbuf, recvbuf, count, 0, datatype, op, comm);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Allreduce_c, (const void *sendbuf, void *recvbuf, mpi_count count,
                       mpi_handle_arg datatype_arg, mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Allreduce_c)(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = allreduce("MPI_Allreduce_c", sendbuf, recvbuf, count, 1, datatype, op, comm);
    mpi_hook_leave();
    return rc;
}

static int reduce(const char *api, const void *sendbuf, void *recvbuf, mpi_count count, int large,
                  mpi_handle datatype, mpi_handle op, int root, mpi_handle comm)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action =
        mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason);
    int is_root = reduction.rank == root;
    if (action != REPROD_ACTION_PASS && (root < 0 || root >= reduction.ranks)) {
        action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    if (reduction.audit && (root < 0 || root >= reduction.ranks)) {
        reduction.audit = 0;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    action = check_buffers(&reduction, audited(&reduction, action), &reason, sendbuf, recvbuf,
                           count, is_root, is_root, is_root);
    if (action == REPROD_ACTION_PASS || reduction.audit) {
        struct mpi_pass pass;
        struct mpi_audit audit;
        char *exact = NULL;
        if (action == REPROD_ACTION_PASS)
            mpi_pass_begin(&pass, api, reason, count, datatype, mpi_source(sendbuf, recvbuf));
        else
            exact = mpi_audit_begin(&audit, &reduction, sendbuf, recvbuf, count,
                                    is_root ? count : 0);
        int rc = large ? REAL_MPI(Reduce_c)(sendbuf, recvbuf, count, datatype, op, root, comm)
                       : REAL_MPI(Reduce)(sendbuf, recvbuf, (int)count, datatype, op, root, comm);
        if (action == REPROD_ACTION_PASS) return mpi_pass_end(&pass, rc, NULL, 0);
        int exact_rc = mpi_reduce_path(&reduction, audit.source, exact, count, root);
        return mpi_audit_end(&audit, rc, exact_rc, is_root ? recvbuf : NULL);
    }
    const void *source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&reduction, source, count);
    int rc = mpi_reduce_path(&reduction, source, recvbuf, count, root);
    return mpi_reduction_done(&reduction, count, "reduce", rc, is_root ? recvbuf : NULL, count);
}

MPI_HOOK(Reduce, (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
                  mpi_handle_arg op_arg, int root, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Reduce)(sendbuf, recvbuf, count, datatype, op, root, comm);
    int rc = reduce("MPI_Reduce", sendbuf, recvbuf, count, 0, datatype, op, root, comm);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Reduce_c,
         (const void *sendbuf, void *recvbuf, mpi_count count, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, int root, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Reduce_c)(sendbuf, recvbuf, count, datatype, op, root, comm);
    int rc = reduce("MPI_Reduce_c", sendbuf, recvbuf, count, 1, datatype, op, root, comm);
    mpi_hook_leave();
    return rc;
}

/* The per-rank counts of a reduce-scatter, 64-bit: `counts` per rank, or `uniform` for each
 * when `counts.values` is NULL. Returns the reason to pass the call through (negative counts,
 * nothing to reduce), or -1 with *widened (to free) and *total set. */
static int reduce_scatter_counts(const struct mpi_reduction *reduction, struct mpi_counts counts,
                                 mpi_count uniform, mpi_count **widened, mpi_count *total)
{
    *widened = NULL;
    *total = 0;
    mpi_count *values = mpi_allocate(reduction, sizeof(mpi_count) * (size_t)reduction->ranks);
    for (int r = 0; r < reduction->ranks; r++) {
        values[r] = counts.values ? mpi_counts_at(counts, r) : uniform;
        if (values[r] < 0) {
            free(values);
            return REPROD_PASS_BAD_ARGUMENT;
        }
        *total += values[r];
    }
    if (*total == 0) {
        free(values);
        return REPROD_PASS_EMPTY;
    }
    *widened = values;
    return -1;
}

/* The library's reduce-scatter of either kind (see reduce_scatter). */
static int real_reduce_scatter(const void *sendbuf, void *recvbuf, struct mpi_counts counts,
                               mpi_count uniform, mpi_handle datatype, mpi_handle op,
                               mpi_handle comm)
{
    if (!counts.values && counts.large)
        return REAL_MPI(Reduce_scatter_block_c)(sendbuf, recvbuf, uniform, datatype, op, comm);
    if (!counts.values)
        return REAL_MPI(Reduce_scatter_block)(sendbuf, recvbuf, (int)uniform, datatype, op, comm);
    if (counts.large)
        return REAL_MPI(Reduce_scatter_c)(sendbuf, recvbuf, counts.values, datatype, op, comm);
    return REAL_MPI(Reduce_scatter)(sendbuf, recvbuf, counts.values, datatype, op, comm);
}

/* REPROD_MODE=audit: the library's reduce-scatter into the user's buffer, the exact one beside
 * it (`widened` counts per rank, freed here, `total` in all). */
static int reduce_scatter_audited(struct mpi_reduction *reduction, const void *sendbuf,
                                  void *recvbuf, struct mpi_counts counts, mpi_count uniform,
                                  mpi_count *widened, mpi_count total)
{
    struct mpi_audit audit;
    mpi_count mine = widened[reduction->rank];
    char *exact = mpi_audit_begin(&audit, reduction, sendbuf, recvbuf, total, mine);
    int rc = real_reduce_scatter(sendbuf, recvbuf, counts, uniform, reduction->datatype,
                                 reduction->op, reduction->comm);
    int exact_rc = mpi_reduce_scatter_path(reduction, audit.source, exact, widened);
    free(widened);
    return mpi_audit_end(&audit, rc, exact_rc, recvbuf);
}

/* MPI_Reduce_scatter (counts per rank) and MPI_Reduce_scatter_block (counts.values NULL,
 * `uniform` for each rank), classic or large-count. */
static int reduce_scatter(const char *api, const void *sendbuf, void *recvbuf,
                          struct mpi_counts counts, mpi_count uniform, mpi_handle datatype,
                          mpi_handle op, mpi_handle comm)
{
    int blockwise = counts.values == NULL;
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action = mpi_reduction_decide(
        &reduction, api, blockwise ? uniform : 1, datatype, op, comm, &reason);
    mpi_count *widened = NULL, total = -1;
    action = audited(&reduction, action);
    if (action != REPROD_ACTION_PASS) {
        int why = reduce_scatter_counts(&reduction, counts, uniform, &widened, &total);
        if (why >= 0) {
            action = REPROD_ACTION_PASS;
            reason = (enum reprod_reason)why;
        }
    }
    int receives = widened && widened[reduction.rank] > 0;
    action = check_buffers(&reduction, action, &reason, sendbuf, recvbuf, total, receives, 1, 1);
    if (reduction.audit && action != REPROD_ACTION_PASS)
        return reduce_scatter_audited(&reduction, sendbuf, recvbuf, counts, uniform, widened,
                                      total);
    if (action == REPROD_ACTION_PASS) {
        free(widened);
        struct mpi_pass pass;
        mpi_pass_begin(&pass, api, reason, blockwise ? uniform : -1, datatype, NULL);
        int rc = real_reduce_scatter(sendbuf, recvbuf, counts, uniform, datatype, op, comm);
        return mpi_pass_end(&pass, rc, recvbuf, blockwise ? uniform : 0);
    }
    const void *source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&reduction, source, total);
    int rc = mpi_reduce_scatter_path(&reduction, source, recvbuf, widened);
    mpi_count mine = widened[reduction.rank];
    free(widened);
    return mpi_reduction_done(&reduction, total, "reduce-scatter", rc, recvbuf, mine);
}

MPI_HOOK(Reduce_scatter,
         (const void *sendbuf, void *recvbuf, const int recvcounts[], mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Reduce_scatter)(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    struct mpi_counts counts = {recvcounts, 0};
    int rc = recvcounts ? reduce_scatter("MPI_Reduce_scatter", sendbuf, recvbuf, counts, 0,
                                         datatype, op, comm)
                        : REAL_MPI(Reduce_scatter)(sendbuf, recvbuf, recvcounts, datatype, op,
                                                   comm);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Reduce_scatter_c,
         (const void *sendbuf, void *recvbuf, const mpi_count recvcounts[],
          mpi_handle_arg datatype_arg, mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Reduce_scatter_c)(sendbuf, recvbuf, recvcounts, datatype, op, comm);
    struct mpi_counts counts = {recvcounts, 1};
    int rc = recvcounts ? reduce_scatter("MPI_Reduce_scatter_c", sendbuf, recvbuf, counts, 0,
                                         datatype, op, comm)
                        : REAL_MPI(Reduce_scatter_c)(sendbuf, recvbuf, recvcounts, datatype, op,
                                                     comm);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Reduce_scatter_block,
         (const void *sendbuf, void *recvbuf, int recvcount, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Reduce_scatter_block)(sendbuf, recvbuf, recvcount, datatype, op, comm);
    struct mpi_counts counts = {NULL, 0};
    int rc = reduce_scatter("MPI_Reduce_scatter_block", sendbuf, recvbuf, counts, recvcount,
                            datatype, op, comm);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Reduce_scatter_block_c,
         (const void *sendbuf, void *recvbuf, mpi_count recvcount, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Reduce_scatter_block_c)(sendbuf, recvbuf, recvcount, datatype, op, comm);
    struct mpi_counts counts = {NULL, 1};
    int rc = reduce_scatter("MPI_Reduce_scatter_block_c", sendbuf, recvbuf, counts, recvcount,
                            datatype, op, comm);
    mpi_hook_leave();
    return rc;
}

/* MPI_Scan and MPI_Exscan share everything but the prefix they deliver. */
static int scan(const char *api, const void *sendbuf, void *recvbuf, mpi_count count, int large,
                mpi_handle datatype, mpi_handle op, mpi_handle comm, int exclusive)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action =
        mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason);
    int receives = !exclusive || reduction.rank > 0;
    action = check_buffers(&reduction, audited(&reduction, action), &reason, sendbuf, recvbuf,
                           count, receives, 1, 1);
    if (action == REPROD_ACTION_PASS || reduction.audit) {
        struct mpi_pass pass;
        struct mpi_audit audit;
        char *exact = NULL;
        if (action == REPROD_ACTION_PASS)
            mpi_pass_begin(&pass, api, reason, count, datatype, mpi_source(sendbuf, recvbuf));
        else
            exact = mpi_audit_begin(&audit, &reduction, sendbuf, recvbuf, count,
                                    receives ? count : 0);
        int rc;
        if (exclusive)
            rc = large ? REAL_MPI(Exscan_c)(sendbuf, recvbuf, count, datatype, op, comm)
                       : REAL_MPI(Exscan)(sendbuf, recvbuf, (int)count, datatype, op, comm);
        else
            rc = large ? REAL_MPI(Scan_c)(sendbuf, recvbuf, count, datatype, op, comm)
                       : REAL_MPI(Scan)(sendbuf, recvbuf, (int)count, datatype, op, comm);
        if (action == REPROD_ACTION_PASS)
            return mpi_pass_end(&pass, rc, exclusive ? NULL : recvbuf, count);
        int exact_rc = mpi_scan_path(&reduction, audit.source, exact, count, exclusive);
        return mpi_audit_end(&audit, rc, exact_rc, receives ? recvbuf : NULL);
    }
    const void *source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&reduction, source, count);
    int rc = mpi_scan_path(&reduction, source, recvbuf, count, exclusive);
    return mpi_reduction_done(&reduction, count, exclusive ? "exclusive scan" : "scan", rc,
                              receives ? recvbuf : NULL, count);
}

MPI_HOOK(Scan, (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
                mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter()) return REAL_MPI(Scan)(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = scan("MPI_Scan", sendbuf, recvbuf, count, 0, datatype, op, comm, 0);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Scan_c, (const void *sendbuf, void *recvbuf, mpi_count count, mpi_handle_arg datatype_arg,
                  mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter()) return REAL_MPI(Scan_c)(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = scan("MPI_Scan_c", sendbuf, recvbuf, count, 1, datatype, op, comm, 0);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Exscan, (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
                  mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter()) return REAL_MPI(Exscan)(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = scan("MPI_Exscan", sendbuf, recvbuf, count, 0, datatype, op, comm, 1);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Exscan_c, (const void *sendbuf, void *recvbuf, mpi_count count,
                    mpi_handle_arg datatype_arg, mpi_handle_arg op_arg, mpi_handle_arg comm_arg))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Exscan_c)(sendbuf, recvbuf, count, datatype, op, comm);
    int rc = scan("MPI_Exscan_c", sendbuf, recvbuf, count, 1, datatype, op, comm, 1);
    mpi_hook_leave();
    return rc;
}
