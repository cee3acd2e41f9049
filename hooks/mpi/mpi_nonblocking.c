/* mpi_nonblocking.c: MPI_Iallreduce, MPI_Ireduce, MPI_Ireduce_scatter(_block), MPI_Iscan,
 * MPI_Iexscan (classic and large-count), and the persistent MPI_Allreduce_init (MPI-4, and
 * Open MPI's MPIX_Allreduce_init).
 *
 * Each is ONE nonblocking (or persistent) data movement of the real library (all-gather,
 * gather or all-to-all) that the library progresses on its own; the request the caller gets
 * is that movement's request. When a Wait/Test call reports it complete (mpi_complete.c), the
 * gathered contributions are reduced into the caller's buffer before the call returns. A
 * second collective phase (as the blocking all-reduce uses) would need the shim to progress
 * it, and a rank blocked in an unrelated MPI call would then hang its peers; one phase cannot.
 */
#include "mpi/mpi_pending.h"

#include "runtime/stats.h"

#include <limits.h>

/* The data movement started (rc) for `entry`, its request at `request`: register the entry,
 * or clean up. */
static int started(struct pending *entry, void *request, int rc)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct mpi_reduction *reduction = &entry->reduction;
    reduction->shim_ns = reprod_stats_clock_ns() - reduction->start_ns;
    if (rc != REPROD_MPI_OK) {
        mpi_pending_free(entry);
        return rc;
    }
    entry->request = mpi_handle_load(request, 0);
    if (entry->persistent) {
        mpi_pending_add(entry);
        return REPROD_MPI_OK;
    }
    /* Some requests are complete as they start, and not all are unique: Open MPI hands out its
     * one shared empty request for collectives on a single process. Such a reduction is done
     * now; only a request still in flight identifies its entry. */
    int complete = 0;
    if (mpi->real.Request_get_status(entry->request, &complete, (void *)mpi->abi->status_ignore) ==
            REPROD_MPI_OK &&
        complete) {
        int reduced = mpi_pending_reduce(entry);
        mpi_reduction_done(reduction, entry->elements, entry->how, reduced, entry->out,
                           entry->block_elements);
        mpi_pending_free(entry);
        return reduced;
    }
    mpi_pending_add(entry);
    return REPROD_MPI_OK;
}

/* The one-pass fixed route (runtime/route.h) of a call that chose it: an entry whose scratch
 * holds this rank's words of `count` elements at `source`, split now, that the library sums in
 * place; at completion `terms` contributions are rounded into `out` (NULL: none here). NULL
 * when the call takes its exchange instead: the route says so, or the words exceed int and the
 * library lacks the large-count call (`large_call`). Every rank answers alike. */
static struct pending *one_pass_entry(struct mpi_reduction *reduction,
                                      enum reprod_collective collective, mpi_count count,
                                      int large_call, const void *source, void *out, int terms)
{
    if (mpi_route(reduction, collective, count, 1) != REPROD_ROUTE_FIXED_ONE_PASS) return NULL;
    size_t words = mpi_fixed_one_pass_words(reduction, count);
    if (words > INT_MAX && !large_call) return NULL;
    void *extra = NULL;
    struct pending *entry = mpi_pending_new(reduction, 0, words * sizeof(int64_t), &extra);
    entry->words = extra;
    entry->fixed_terms = terms;
    entry->block_elements = count;
    entry->out = out;
    entry->elements = count;
    entry->source = source;
    entry->reduction.route = "fixed one-pass: int64 SUM of whole-range words";
    entry->reduction.taken = REPROD_ROUTE_FIXED_ONE_PASS;
    mpi_trace_input(&entry->reduction, source, count);
    mpi_fixed_one_pass_split(&entry->reduction, source, count, entry->words);
    return entry;
}

/* The entry's word count, for the library: int, or MPI_Count for the large-count call. */
static mpi_count entry_words(const struct pending *entry)
{
    return (mpi_count)mpi_fixed_one_pass_words(&entry->reduction, entry->block_elements);
}

/* What an all-gather based call delivers. */
enum gathered_kind { ALLREDUCE, SCAN, EXSCAN };

/* The real call of a nonblocking all-gather based reduction, for a pass-through. */
static int pass_gathered(enum gathered_kind kind, int large, const void *sendbuf, void *recvbuf,
                         mpi_count count, mpi_handle datatype, mpi_handle op, mpi_handle comm,
                         void *request)
{
    int narrow = (int)count;
    switch (kind) {
    case SCAN:
        return large ? REAL_MPI(Iscan_c)(sendbuf, recvbuf, count, datatype, op, comm, request)
                     : REAL_MPI(Iscan)(sendbuf, recvbuf, narrow, datatype, op, comm, request);
    case EXSCAN:
        return large ? REAL_MPI(Iexscan_c)(sendbuf, recvbuf, count, datatype, op, comm, request)
                     : REAL_MPI(Iexscan)(sendbuf, recvbuf, narrow, datatype, op, comm, request);
    default:
        return large ? REAL_MPI(Iallreduce_c)(sendbuf, recvbuf, count, datatype, op, comm,
                                              request)
                     : REAL_MPI(Iallreduce)(sendbuf, recvbuf, narrow, datatype, op, comm, request);
    }
}

/* Iallreduce, Iscan and Iexscan: all-gather every contribution; at completion reduce all of
 * them (all-reduce) or the prefix up to this rank (scan: 0..rank, exclusive: 0..rank-1). */
static int gather_everywhere(const char *api, enum gathered_kind kind, int large,
                             const void *sendbuf, void *recvbuf, mpi_count count,
                             mpi_handle datatype, mpi_handle op, mpi_handle comm, void *request)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action =
        mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason);
    int receives = kind != EXSCAN || reduction.rank > 0;
    if (action != REPROD_ACTION_PASS &&
        (!request || mpi_buffers_erroneous(&reduction, sendbuf, recvbuf, count, receives, 1, 1))) {
        action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    if (action == REPROD_ACTION_PASS) {
        struct mpi_pass pass;
        mpi_pass_begin(&pass, api, reason, count, datatype, mpi_source(sendbuf, recvbuf));
        int rc = pass_gathered(kind, large, sendbuf, recvbuf, count, datatype, op, comm, request);
        return mpi_pass_end(&pass, rc, NULL, 0);
    }
    const struct reprod_mpi *mpi = reprod_mpi();
    const void *in_place = (const void *)mpi->abi->in_place;
    int terms = kind == ALLREDUCE ? reduction.ranks
                : kind == SCAN    ? reduction.rank + 1
                                  : reduction.rank;
    int large_call = kind == ALLREDUCE ? HAS_MPI(Iallreduce_c)
                     : kind == SCAN    ? HAS_MPI(Iscan_c)
                                       : HAS_MPI(Iexscan_c);
    struct pending *fixed =
        one_pass_entry(&reduction,
                       kind == ALLREDUCE ? REPROD_COLLECTIVE_ALLREDUCE : REPROD_COLLECTIVE_SCAN,
                       count, large_call, mpi_source(sendbuf, recvbuf), receives ? recvbuf : NULL,
                       terms);
    if (fixed) {
        fixed->how = kind == ALLREDUCE ? "all-reduce (int64 sum)" : "scan (int64 prefix sum)";
        mpi_count words = entry_words(fixed);
        mpi_handle int64 = mpi->datatype_int64, sum = mpi->op_sum;
        int rc = pass_gathered(kind, words > INT_MAX, in_place, fixed->words, words, int64, sum,
                               comm, request);
        return started(fixed, request, rc);
    }
    struct pending *entry = mpi_pending_new(&reduction, count * reduction.ranks, 0, NULL);
    entry->block_elements = count;
    entry->block_count = kind == ALLREDUCE ? reduction.ranks
                         : kind == SCAN    ? reduction.rank + 1
                                           : reduction.rank;
    entry->out = receives ? recvbuf : NULL; /* undefined on rank 0 of an exclusive scan */
    entry->elements = count;
    entry->how = kind == ALLREDUCE ? "all-reduce (all-gather)" : "scan (all-gather)";
    entry->source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&entry->reduction, entry->source, count);
    int rc = mpi_move_allgather(&entry->reduction, entry->source, count, entry->blocks, request);
    return started(entry, request, rc);
}

/* Define the classic and large-count hooks of an all-gather based call. */
#define GATHERED_HOOKS(name, kind)                                                                 \
    MPI_HOOK(name, (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,    \
                    mpi_handle_arg op_arg, mpi_handle_arg comm_arg, void *request))                \
    {                                                                                              \
        mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),             \
                   comm = mpi_handle_of(comm_arg);                                                 \
        if (!mpi_hook_enter())                                                                     \
            return REAL_MPI(name)(sendbuf, recvbuf, count, datatype, op, comm, request);           \
        int rc = gather_everywhere("MPI_" #name, kind, 0, sendbuf, recvbuf, count, datatype, op,   \
                                   comm, request);                                                 \
        mpi_hook_leave();                                                                          \
        return rc;                                                                                 \
    }                                                                                              \
    MPI_HOOK(name##_c,                                                                             \
             (const void *sendbuf, void *recvbuf, mpi_count count, mpi_handle_arg datatype_arg,    \
              mpi_handle_arg op_arg, mpi_handle_arg comm_arg, void *request))                      \
    {                                                                                              \
        mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),             \
                   comm = mpi_handle_of(comm_arg);                                                 \
        if (!mpi_hook_enter())                                                                     \
            return REAL_MPI(name##_c)(sendbuf, recvbuf, count, datatype, op, comm, request);       \
        int rc = gather_everywhere("MPI_" #name "_c", kind, 1, sendbuf, recvbuf, count, datatype,  \
                                   op, comm, request);                                             \
        mpi_hook_leave();                                                                          \
        return rc;                                                                                 \
    }

GATHERED_HOOKS(Iallreduce, ALLREDUCE)
GATHERED_HOOKS(Iscan, SCAN)
GATHERED_HOOKS(Iexscan, EXSCAN)

static int ireduce(const char *api, int large, const void *sendbuf, void *recvbuf,
                   mpi_count count, mpi_handle datatype, mpi_handle op, int root, mpi_handle comm,
                   void *request)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action =
        mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason);
    int is_root = reduction.rank == root;
    if (action != REPROD_ACTION_PASS &&
        (root < 0 || root >= reduction.ranks || !request ||
         mpi_buffers_erroneous(&reduction, sendbuf, recvbuf, count, is_root, is_root,
                               is_root))) {
        action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    if (action == REPROD_ACTION_PASS) {
        struct mpi_pass pass;
        mpi_pass_begin(&pass, api, reason, count, datatype, mpi_source(sendbuf, recvbuf));
        int rc = large ? REAL_MPI(Ireduce_c)(sendbuf, recvbuf, count, datatype, op, root, comm,
                                             request)
                       : REAL_MPI(Ireduce)(sendbuf, recvbuf, (int)count, datatype, op, root,
                                           comm, request);
        return mpi_pass_end(&pass, rc, NULL, 0);
    }
    struct pending *fixed =
        one_pass_entry(&reduction, REPROD_COLLECTIVE_REDUCE, count, HAS_MPI(Ireduce_c),
                       mpi_source(sendbuf, recvbuf), is_root ? recvbuf : NULL, reduction.ranks);
    if (fixed) {
        /* Every rank's words live until its request completes: the root rounds them. */
        const struct reprod_mpi *mpi = reprod_mpi();
        fixed->how = is_root ? "reduce (int64 sum)" : "reduce (int64 sum, not root)";
        mpi_count words = entry_words(fixed);
        const void *send = is_root ? (const void *)mpi->abi->in_place : fixed->words;
        void *receive = is_root ? fixed->words : NULL;
        int rc = words > INT_MAX
                     ? REAL_MPI(Ireduce_c)(send, receive, words, mpi->datatype_int64, mpi->op_sum,
                                           root, comm, request)
                     : REAL_MPI(Ireduce)(send, receive, (int)words, mpi->datatype_int64,
                                         mpi->op_sum, root, comm, request);
        return started(fixed, request, rc);
    }
    if (!is_root) {
        /* Nothing to reduce here: the gather's request is all there is. */
        mpi_trace_input(&reduction, sendbuf, count);
        int rc = mpi_move_gather(&reduction, sendbuf, count, NULL, root, request);
        return mpi_reduction_done(&reduction, count, "reduce (gather, not root)", rc, NULL, 0);
    }
    struct pending *entry = mpi_pending_new(&reduction, count * reduction.ranks, 0, NULL);
    entry->block_elements = count;
    entry->block_count = reduction.ranks;
    entry->out = recvbuf;
    entry->elements = count;
    entry->how = "reduce (gather)";
    entry->source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&entry->reduction, entry->source, count);
    int rc = mpi_move_gather(&entry->reduction, entry->source, count, entry->blocks, root,
                             request);
    return started(entry, request, rc);
}

MPI_HOOK(Ireduce, (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
                   mpi_handle_arg op_arg, int root, mpi_handle_arg comm_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Ireduce)(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    int rc = ireduce("MPI_Ireduce", 0, sendbuf, recvbuf, count, datatype, op, root, comm, request);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Ireduce_c,
         (const void *sendbuf, void *recvbuf, mpi_count count, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, int root, mpi_handle_arg comm_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Ireduce_c)(sendbuf, recvbuf, count, datatype, op, root, comm, request);
    int rc =
        ireduce("MPI_Ireduce_c", 1, sendbuf, recvbuf, count, datatype, op, root, comm, request);
    mpi_hook_leave();
    return rc;
}

/* The real call of a nonblocking reduce-scatter, for a pass-through. */
static int pass_scattered(struct mpi_counts counts, mpi_count uniform, const void *sendbuf,
                          void *recvbuf, mpi_handle datatype, mpi_handle op, mpi_handle comm,
                          void *request)
{
    if (!counts.values && counts.large)
        return REAL_MPI(Ireduce_scatter_block_c)(sendbuf, recvbuf, uniform, datatype, op, comm,
                                                 request);
    if (!counts.values)
        return REAL_MPI(Ireduce_scatter_block)(sendbuf, recvbuf, (int)uniform, datatype, op, comm,
                                               request);
    if (counts.large)
        return REAL_MPI(Ireduce_scatter_c)(sendbuf, recvbuf, counts.values, datatype, op, comm,
                                           request);
    return REAL_MPI(Ireduce_scatter)(sendbuf, recvbuf, counts.values, datatype, op, comm, request);
}

/* The reason to pass a reduce-scatter's counts through, or -1 with *total set. */
static int check_counts(const struct mpi_reduction *reduction, struct mpi_counts counts,
                        mpi_count uniform, mpi_count *total)
{
    *total = 0;
    for (int r = 0; r < reduction->ranks; r++) {
        mpi_count count = counts.values ? mpi_counts_at(counts, r) : uniform;
        if (count < 0) return REPROD_PASS_BAD_ARGUMENT;
        *total += count;
    }
    return *total == 0 ? REPROD_PASS_EMPTY : -1;
}

/* The one-pass fixed route of a reduce-scatter of `total` elements, when the route says so and
 * the library can take its word counts (int, or its large-count call): an entry whose scratch
 * holds this rank's words of every element (at raw_words), room for the words of its own
 * block (words, rounded at completion into recvbuf) and the word counts per rank. NULL: the
 * exchange. */
static struct pending *scattered_words(struct mpi_reduction *reduction, const void *sendbuf,
                                       void *recvbuf, struct mpi_counts counts, mpi_count uniform,
                                       mpi_count total)
{
    if (mpi_route(reduction, REPROD_COLLECTIVE_REDUCE_SCATTER, total, 1) !=
        REPROD_ROUTE_FIXED_ONE_PASS)
        return NULL;
    int ranks = reduction->ranks;
    mpi_count mine = counts.values ? mpi_counts_at(counts, reduction->rank) : uniform;
    size_t per_element = mpi_fixed_one_pass_words(reduction, 1);
    size_t send_words = (size_t)total * per_element, mine_words = (size_t)mine * per_element;
    int narrow = send_words <= INT_MAX;
    if (!narrow && !HAS_MPI(Ireduce_scatter_c)) return NULL;
    size_t count_bytes = (size_t)ranks * (narrow ? sizeof(int) : sizeof(mpi_count));
    void *extra = NULL;
    struct pending *entry = mpi_pending_new(
        reduction, 0, (send_words + mine_words) * sizeof(int64_t) + count_bytes, &extra);
    entry->raw_words = extra;
    entry->words = (int64_t *)extra + send_words;
    void *word_counts = entry->words + mine_words;
    for (int r = 0; r < ranks; r++) {
        mpi_count words = (counts.values ? mpi_counts_at(counts, r) : uniform) *
                          (mpi_count)per_element;
        if (narrow)
            ((int *)word_counts)[r] = (int)words;
        else
            ((mpi_count *)word_counts)[r] = words;
    }
    entry->fixed_terms = ranks;
    entry->block_elements = mine;
    entry->out = mine > 0 ? recvbuf : NULL;
    entry->elements = total;
    entry->how = "reduce-scatter (int64 sum)";
    entry->source = mpi_source(sendbuf, recvbuf);
    entry->reduction.route = "fixed one-pass: int64 SUM of whole-range words";
    entry->reduction.taken = REPROD_ROUTE_FIXED_ONE_PASS;
    mpi_trace_input(&entry->reduction, entry->source, total);
    mpi_fixed_one_pass_split(&entry->reduction, entry->source, total, entry->raw_words);
    return entry;
}

/* Ireduce_scatter and Ireduce_scatter_block (counts.values NULL): all-to-all of the chunks; at
 * completion reduce our chunk of every rank. The count arrays must live until completion:
 * they sit in the entry's scratch. */
static int scatter_chunks(const char *api, const void *sendbuf, void *recvbuf,
                          struct mpi_counts counts, mpi_count uniform, mpi_handle datatype,
                          mpi_handle op, mpi_handle comm, void *request)
{
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    mpi_count total = 0;
    enum reprod_action action = mpi_reduction_decide(
        &reduction, api, counts.values ? 1 : uniform, datatype, op, comm, &reason);
    if (action != REPROD_ACTION_PASS) {
        int why = check_counts(&reduction, counts, uniform, &total);
        mpi_count mine = why < 0 ? (counts.values ? mpi_counts_at(counts, reduction.rank) : uniform)
                                 : 0;
        if (why < 0 &&
            (!request || mpi_buffers_erroneous(&reduction, sendbuf, recvbuf, total, mine > 0, 1, 1)))
            why = REPROD_PASS_BAD_ARGUMENT;
        if (why >= 0) {
            action = REPROD_ACTION_PASS;
            reason = (enum reprod_reason)why;
        }
    }
    if (action == REPROD_ACTION_PASS) {
        struct mpi_pass pass;
        mpi_pass_begin(&pass, api, reason, counts.values ? -1 : uniform, datatype, NULL);
        int rc = pass_scattered(counts, uniform, sendbuf, recvbuf, datatype, op, comm, request);
        return mpi_pass_end(&pass, rc, NULL, 0);
    }
    int ranks = reduction.ranks;
    mpi_count mine = counts.values ? mpi_counts_at(counts, reduction.rank) : uniform;
    struct pending *fixed = scattered_words(&reduction, sendbuf, recvbuf, counts, uniform, total);
    if (fixed) {
        const struct reprod_mpi *mpi = reprod_mpi();
        int64_t *send_words = (int64_t *)fixed->raw_words;
        void *word_counts = fixed->words + mpi_fixed_one_pass_words(&fixed->reduction, mine);
        int narrow = mpi_fixed_one_pass_words(&fixed->reduction, total) <= INT_MAX;
        int rc = narrow ? REAL_MPI(Ireduce_scatter)(send_words, fixed->words, word_counts,
                                                    mpi->datatype_int64, mpi->op_sum, comm,
                                                    request)
                        : REAL_MPI(Ireduce_scatter_c)(send_words, fixed->words, word_counts,
                                                      mpi->datatype_int64, mpi->op_sum, comm,
                                                      request);
        return started(fixed, request, rc);
    }
    void *arrays = NULL;
    struct pending *entry =
        mpi_pending_new(&reduction, mine * ranks, mpi_exchange_bytes(ranks), &arrays);
    struct mpi_exchange exchange;
    mpi_exchange_layout(&exchange, ranks, arrays);
    mpi_count offset = 0;
    for (int r = 0; r < ranks; r++) {
        exchange.send_counts[r] = counts.values ? mpi_counts_at(counts, r) : uniform;
        exchange.send_offsets[r] = offset;
        offset += exchange.send_counts[r];
        exchange.receive_counts[r] = mine;
        exchange.receive_offsets[r] = r * mine;
    }
    entry->block_elements = mine;
    entry->block_count = ranks;
    entry->out = mine > 0 ? recvbuf : NULL;
    entry->elements = total;
    entry->how = "reduce-scatter (all-to-all)";
    entry->source = mpi_source(sendbuf, recvbuf);
    mpi_trace_input(&entry->reduction, entry->source, total);
    int rc = mpi_exchange_run(&entry->reduction, &exchange, exchange.send_counts, entry->source,
                              entry->blocks, request);
    return started(entry, request, rc);
}

MPI_HOOK(Ireduce_scatter,
         (const void *sendbuf, void *recvbuf, const int recvcounts[], mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Ireduce_scatter)(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                                         request);
    struct mpi_counts counts = {recvcounts, 0};
    int rc = recvcounts ? scatter_chunks("MPI_Ireduce_scatter", sendbuf, recvbuf, counts, 0,
                                         datatype, op, comm, request)
                        : REAL_MPI(Ireduce_scatter)(sendbuf, recvbuf, recvcounts, datatype, op,
                                                    comm, request);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Ireduce_scatter_c, (const void *sendbuf, void *recvbuf, const mpi_count recvcounts[],
                             mpi_handle_arg datatype_arg, mpi_handle_arg op_arg,
                             mpi_handle_arg comm_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Ireduce_scatter_c)(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                                           request);
    struct mpi_counts counts = {recvcounts, 1};
    int rc = recvcounts ? scatter_chunks("MPI_Ireduce_scatter_c", sendbuf, recvbuf, counts, 0,
                                         datatype, op, comm, request)
                        : REAL_MPI(Ireduce_scatter_c)(sendbuf, recvbuf, recvcounts, datatype, op,
                                                      comm, request);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Ireduce_scatter_block,
         (const void *sendbuf, void *recvbuf, int recvcount, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Ireduce_scatter_block)(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                               request);
    struct mpi_counts counts = {NULL, 0};
    int rc = scatter_chunks("MPI_Ireduce_scatter_block", sendbuf, recvbuf, counts, recvcount,
                            datatype, op, comm, request);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Ireduce_scatter_block_c,
         (const void *sendbuf, void *recvbuf, mpi_count recvcount, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Ireduce_scatter_block_c)(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                                 request);
    struct mpi_counts counts = {NULL, 1};
    int rc = scatter_chunks("MPI_Ireduce_scatter_block_c", sendbuf, recvbuf, counts, recvcount,
                            datatype, op, comm, request);
    mpi_hook_leave();
    return rc;
}

/* ---- Persistent: MPI_Allreduce_init ---------------------------------------------------- */

/* The real persistent all-reduce, for a pass-through: MPI-4's, or Open MPI's MPIX_. */
typedef int allreduce_init_fn(const void *, void *, int, mpi_handle, mpi_handle, mpi_handle,
                              mpi_handle, void *);

/* A persistent all-reduce: a persistent all-gather into the entry's scratch; each completion
 * after MPI_Start reduces into the caller's buffer (mpi_complete.c). */
static int allreduce_init(const char *api, allreduce_init_fn *real_init, int large,
                          const void *sendbuf, void *recvbuf, mpi_count count, mpi_handle datatype,
                          mpi_handle op, mpi_handle comm, mpi_handle info, void *request)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct mpi_reduction reduction;
    enum reprod_reason reason;
    enum reprod_action action =
        mpi_reduction_decide(&reduction, api, count, datatype, op, comm, &reason);
    if (action != REPROD_ACTION_PASS &&
        (!request || mpi_buffers_erroneous(&reduction, sendbuf, recvbuf, count, 1, 1, 1))) {
        action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_BAD_ARGUMENT;
    }
    /* MPICH 4.0's persistent all-gather releases a derived datatype's reference each round.
     * (Asked only when the call would go deterministic: the family is known then.) */
    if (action != REPROD_ACTION_PASS &&
        !((large ? HAS_MPI(Allgather_init_c) : HAS_MPI(Allgather_init)) &&
          (reduction.type.predefined || !mpi->abi->persistent_derived_broken))) {
        action = REPROD_ACTION_PASS;
        reason = REPROD_PASS_UNSUPPORTED; /* no persistent all-gather to build it from */
    }
    if (action == REPROD_ACTION_PASS) {
        struct mpi_pass pass;
        mpi_pass_begin(&pass, api, reason, count, datatype, NULL);
        int rc = large ? mpi->real.Allreduce_init_c(sendbuf, recvbuf, count, datatype, op, comm,
                                                    info, request)
                       : real_init(sendbuf, recvbuf, (int)count, datatype, op, comm, info,
                                   request);
        return mpi_pass_end(&pass, rc, NULL, 0);
    }
    /* The one-pass fixed route needs the library's own persistent all-reduce. */
    int has_persistent_sum = large                                  ? HAS_MPI(Allreduce_init_c)
                             : real_init == mpi->real.Allreduce_init ? HAS_MPI(Allreduce_init)
                                                                     : 1;
    struct pending *fixed =
        has_persistent_sum ? one_pass_entry(&reduction, REPROD_COLLECTIVE_ALLREDUCE, count,
                                            HAS_MPI(Allreduce_init_c), mpi_source(sendbuf, recvbuf),
                                            recvbuf, reduction.ranks)
                           : NULL;
    if (fixed) {
        fixed->persistent = 1;
        fixed->how = "persistent all-reduce (int64 sum)";
        mpi_count words = entry_words(fixed);
        const void *in_place = (const void *)mpi->abi->in_place;
        int rc = words > INT_MAX
                     ? mpi->real.Allreduce_init_c(in_place, fixed->words, words,
                                                  mpi->datatype_int64, mpi->op_sum, comm, info,
                                                  request)
                     : real_init(in_place, fixed->words, (int)words, mpi->datatype_int64,
                                 mpi->op_sum, comm, info, request);
        return started(fixed, request, rc);
    }
    struct pending *entry = mpi_pending_new(&reduction, count * reduction.ranks, 0, NULL);
    entry->persistent = 1;
    entry->block_elements = count;
    entry->block_count = reduction.ranks;
    entry->out = recvbuf;
    entry->elements = count;
    entry->how = "persistent all-reduce (all-gather)";
    entry->source = mpi_source(sendbuf, recvbuf);
    mpi_handle type = entry->reduction.datatype;
    int rc = large ? mpi->real.Allgather_init_c(entry->source, count, type, entry->blocks, count,
                                                type, comm, info, request)
                   : mpi->real.Allgather_init(entry->source, (int)count, type, entry->blocks,
                                              (int)count, type, comm, info, request);
    return started(entry, request, rc);
}

MPI_HOOK(Allreduce_init,
         (const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg, mpi_handle_arg info_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg), info = mpi_handle_of(info_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Allreduce_init)(sendbuf, recvbuf, count, datatype, op, comm, info,
                                        request);
    int rc = allreduce_init("MPI_Allreduce_init", REAL_MPI(Allreduce_init), 0, sendbuf, recvbuf,
                            count, datatype, op, comm, info, request);
    mpi_hook_leave();
    return rc;
}

MPI_HOOK(Allreduce_init_c,
         (const void *sendbuf, void *recvbuf, mpi_count count, mpi_handle_arg datatype_arg,
          mpi_handle_arg op_arg, mpi_handle_arg comm_arg, mpi_handle_arg info_arg, void *request))
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg), info = mpi_handle_of(info_arg);
    if (!mpi_hook_enter())
        return REAL_MPI(Allreduce_init_c)(sendbuf, recvbuf, count, datatype, op, comm, info,
                                          request);
    int rc = allreduce_init("MPI_Allreduce_init_c", REAL_MPI(Allreduce_init), 1, sendbuf, recvbuf,
                            count, datatype, op, comm, info, request);
    mpi_hook_leave();
    return rc;
}

/* Open MPI 4's persistent collectives are an extension: MPIX_Allreduce_init. */
static allreduce_init_fn *real_mpix_allreduce_init(void)
{
    return HAS_MPI(Allreduce_init_mpix) ? REAL_MPI(Allreduce_init_mpix) : NULL;
}

REPROD_EXPORT int MPIX_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                                      mpi_handle_arg datatype_arg, mpi_handle_arg op_arg,
                                      mpi_handle_arg comm_arg, mpi_handle_arg info_arg,
                                      void *request);
REPROD_EXPORT int PMPIX_Allreduce_init(const void *sendbuf, void *recvbuf, int count,
                                       mpi_handle_arg datatype_arg, mpi_handle_arg op_arg,
                                       mpi_handle_arg comm_arg, mpi_handle_arg info_arg,
                                       void *request) __attribute__((alias("MPIX_Allreduce_init")));
MPI_HOOK_CHECK(MPIX_Allreduce_init, Allreduce_init_mpix);
int MPIX_Allreduce_init(const void *sendbuf, void *recvbuf, int count, mpi_handle_arg datatype_arg,
                        mpi_handle_arg op_arg, mpi_handle_arg comm_arg, mpi_handle_arg info_arg,
                        void *request)
{
    mpi_handle datatype = mpi_handle_of(datatype_arg), op = mpi_handle_of(op_arg),
               comm = mpi_handle_of(comm_arg), info = mpi_handle_of(info_arg);
    allreduce_init_fn *real = real_mpix_allreduce_init();
    if (!real) return REAL_MPI(Allreduce_init)(sendbuf, recvbuf, count, datatype, op, comm, info,
                                                request);
    if (!mpi_hook_enter()) return real(sendbuf, recvbuf, count, datatype, op, comm, info, request);
    int rc = allreduce_init("MPIX_Allreduce_init", real, 0, sendbuf, recvbuf, count, datatype, op,
                            comm, info, request);
    mpi_hook_leave();
    return rc;
}
