/* mpi.c: the blocking MPI reductions (C bindings of Open MPI) and MPI_Init.
 *
 * Each hook decides (mpi_reduction_decide) and either hands the call to the real library
 * untouched or runs the deterministic data path of mpi_path.c.
 */
#include "mpi_path.h"

#include "rank.h"


/* MPI_Init and MPI_Init_thread: learn the rank as soon as MPI knows it. */
static void after_init(int rc)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int rank = 0, size = 0;
    if (rc == MPI_SUCCESS) reprod_mpi_set_state(REPROD_MPI_RUNNING);
    if (rc == MPI_SUCCESS && mpi->usable &&
        mpi->real.Comm_rank(mpi->comm_world, &rank) == MPI_SUCCESS &&
        mpi->real.Comm_size(mpi->comm_world, &size) == MPI_SUCCESS)
        reprod_rank_set_from_library(rank, size);
}

int MPI_Init(int *argc, char ***argv)
{
    if (!REPROD_MPI_REAL(Init)) return MPI_ERR_INTERN;
    int rc = REPROD_MPI_REAL(Init)(argc, argv);
    after_init(rc);
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (!REPROD_MPI_REAL(Init_thread)) return MPI_ERR_INTERN;
    int rc = REPROD_MPI_REAL(Init_thread)(argc, argv, required, provided);
    after_init(rc);
    return rc;
}

int MPI_Finalize(void)
{
    if (!REPROD_MPI_REAL(Finalize)) return MPI_ERR_INTERN;
    reprod_mpi_set_state(REPROD_MPI_FINALIZING);
    return REPROD_MPI_REAL(Finalize)();
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm)
{
    static const char api[] = "MPI_Allreduce";
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    if (mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason) ==
        REPROD_ACTION_PASS)
        PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), recvbuf, count,
                     Allreduce, sendbuf, recvbuf, count, datatype, op, comm);
    if (aliased(sendbuf, recvbuf, count))
        PASS_TO_REAL(api, REPROD_PASS_BAD_ARGUMENT, count, datatype, SOURCE(sendbuf, recvbuf),
                     recvbuf, count, Allreduce, sendbuf, recvbuf, count, datatype, op, comm);
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&reduction, source, count);
    int rc = mpi_allreduce_path(&reduction, source, recvbuf, count);
    return mpi_reduction_done(&reduction, count, "all-reduce", rc, recvbuf, count);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm)
{
    static const char api[] = "MPI_Reduce";
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    if (mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason) ==
        REPROD_ACTION_PASS)
        PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), NULL, 0, Reduce,
                     sendbuf, recvbuf, count, datatype, op, root, comm);
    int is_root = reduction.rank == root;
    if (root < 0 || root >= reduction.ranks || (sendbuf == MPI_IN_PLACE && !is_root) ||
        (is_root && aliased(sendbuf, recvbuf, count)))
        PASS_TO_REAL(api, REPROD_PASS_BAD_ARGUMENT, count, datatype, SOURCE(sendbuf, recvbuf), NULL,
                     0, Reduce, sendbuf, recvbuf, count, datatype, op, root, comm);
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&reduction, source, count);
    int rc = mpi_reduce_path(&reduction, source, recvbuf, count, root);
    return mpi_reduction_done(&reduction, count, "reduce", rc, is_root ? recvbuf : NULL, count);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    static const char api[] = "MPI_Reduce_scatter";
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    long long total = 0;
    if (mpi_reduction_decide(&reduction, api, recvcounts ? 1 : -1, datatype, op, comm, &reason) ==
        REPROD_ACTION_PASS)
        PASS_TO_REAL(api, reason, -1, datatype, NULL, NULL, 0, Reduce_scatter, sendbuf, recvbuf,
                     recvcounts, datatype, op, comm);
    int why = mpi_check_counts(&reduction, recvcounts, 0, &total);
    if (why < 0 && aliased(sendbuf, recvbuf, total)) why = REPROD_PASS_BAD_ARGUMENT;
    if (why >= 0)
        PASS_TO_REAL(api, (enum reprod_reason)why, -1, datatype, NULL, NULL, 0, Reduce_scatter,
                     sendbuf, recvbuf, recvcounts, datatype, op, comm);
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&reduction, source, total);
    int rc = mpi_reduce_scatter_path(&reduction, source, recvbuf, recvcounts, 0);
    return mpi_reduction_done(&reduction, total, "reduce-scatter", rc, recvbuf,
                              recvcounts[reduction.rank]);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    static const char api[] = "MPI_Reduce_scatter_block";
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    if (mpi_reduction_decide(&reduction, api, recvcount, datatype, op, comm, &reason) ==
        REPROD_ACTION_PASS)
        PASS_TO_REAL(api, reason, recvcount, datatype, NULL, recvbuf, recvcount,
                     Reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm);
    long long total = 0;
    int why = mpi_check_counts(&reduction, NULL, recvcount, &total);
    if (why < 0 && aliased(sendbuf, recvbuf, total)) why = REPROD_PASS_BAD_ARGUMENT;
    if (why >= 0)
        PASS_TO_REAL(api, (enum reprod_reason)why, recvcount, datatype, NULL, recvbuf, recvcount,
                     Reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm);
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&reduction, source, total);
    int rc = mpi_reduce_scatter_path(&reduction, source, recvbuf, NULL, recvcount);
    return mpi_reduction_done(&reduction, total, "reduce-scatter", rc, recvbuf, recvcount);
}

/* MPI_Scan and MPI_Exscan share everything but the prefix they deliver. */
static int scan(const char *api, const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, int exclusive)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    if (mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason) !=
            REPROD_ACTION_PASS &&
        aliased(sendbuf, recvbuf, count)) {
        reduction.action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    if (reduction.action == REPROD_ACTION_PASS) {
        if (exclusive)
            PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), NULL, 0, Exscan,
                         sendbuf, recvbuf, count, datatype, op, comm);
        PASS_TO_REAL(api, reason, count, datatype, SOURCE(sendbuf, recvbuf), recvbuf, count, Scan,
                     sendbuf, recvbuf, count, datatype, op, comm);
    }
    const void *source = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    mpi_trace_input(&reduction, source, count);
    int rc = mpi_scan_path(&reduction, source, recvbuf, count, exclusive);
    int receives = !exclusive || reduction.rank > 0;
    return mpi_reduction_done(&reduction, count, exclusive ? "exclusive scan" : "scan", rc,
                              receives ? recvbuf : NULL, count);
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm)
{
    return scan("MPI_Scan", sendbuf, recvbuf, count, datatype, op, comm, 0);
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm)
{
    return scan("MPI_Exscan", sendbuf, recvbuf, count, datatype, op, comm, 1);
}
