/* mpi_path.c: the arithmetic of every MPI reduction (mpi_reduce_blocks) and the blocking data
 * paths: move raw contributions with the real library, reduce them in one place, move results
 * back. See docs/mpi.md, "How the data moves". */
#include "mpi/mpi_path.h"

#include "common.h"
#include "runtime/config.h"
#include "runtime/stats.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Configuration. */
#define GATHER_ALL_MAX_BYTES 2048 /* gather whole contributions up to this size (bytes) */
#define STACK_POINTERS       64   /* contributions whose pointers fit on the stack */

/* The library's fold, MPI's canonical order ((c0 op c1) op c2) ...: Reduce_local(in, inout)
 * computes inout = in op inout, so block k becomes the fold of blocks 0..k. Then the last
 * block is copied to `out`. Counts beyond int go a piece at a time. */
static int fold_with_library(struct mpi_reduction *reduction, char *blocks,
                             mpi_count block_elements, int block_count, void *out)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    size_t block_bytes = (size_t)block_elements * (size_t)reduction->extent;
    int rc = REPROD_MPI_OK;
    for (int k = 1; k < block_count && rc == REPROD_MPI_OK; k++) {
        for (mpi_count done = 0; done < block_elements && rc == REPROD_MPI_OK; done += INT_MAX) {
            mpi_count piece = block_elements - done < INT_MAX ? block_elements - done : INT_MAX;
            size_t offset = (size_t)done * (size_t)reduction->extent;
            rc = mpi->real.Reduce_local(blocks + (size_t)(k - 1) * block_bytes + offset,
                                        blocks + (size_t)k * block_bytes + offset, (int)piece,
                                        reduction->datatype, reduction->op);
        }
    }
    if (rc != REPROD_MPI_OK) return rc;
    return mpi_copy_elements(reduction, blocks + (size_t)(block_count - 1) * block_bytes, out,
                             block_elements);
}

int mpi_reduce_blocks(struct mpi_reduction *reduction, char *blocks, mpi_count block_elements,
                      int block_count, void *out)
{
    if (block_count <= 0 || block_elements <= 0) return REPROD_MPI_OK;
    uint64_t started = reduction->timed ? reprod_clock_ns() : 0;
    int rc = REPROD_MPI_OK;
    if (reduction->action == REPROD_ACTION_ORDERED_LIBRARY) {
        rc = fold_with_library(reduction, blocks, block_elements, block_count, out);
    } else {
        size_t block_bytes = (size_t)block_elements * (size_t)reduction->extent;
        const void *stack_pointers[STACK_POINTERS];
        const void **contributions = stack_pointers;
        if (block_count > STACK_POINTERS)
            contributions = mpi_allocate(reduction, sizeof(void *) * (size_t)block_count);
        for (int k = 0; k < block_count; k++)
            contributions[k] = blocks + (size_t)k * block_bytes;
        if (reduction->own_block && reduction->rank < block_count)
            contributions[reduction->rank] = reduction->own_block;
        size_t engine_elements = (size_t)block_elements * (size_t)reduction->type.engine_elements;
        int engine_rc =
            reduction->action == REPROD_ACTION_EXACT
                ? reprod_reduce_exact(reduction->type.engine_type, REPROD_SUM,
                                      reprod_config()->rounding, contributions, block_count,
                                      engine_elements, out)
                : reprod_reduce_ordered(reduction->type.engine_type, REPROD_SUM, contributions,
                                        block_count, engine_elements, out);
        if (contributions != stack_pointers) free(contributions);
        if (engine_rc != REPROD_OK) rc = mpi_own_error(reduction, reprod_mpi()->abi->err_intern);
    }
    if (reduction->timed) reduction->engine_ns += reprod_clock_ns() - started;
    return rc;
}

int mpi_is_small(const struct mpi_reduction *reduction, mpi_count count)
{
    /* Gathering whole contributions beats exchanging chunks while each still travels as one
     * small message (shared-memory transports switch to a slower protocol above a few KiB:
     * Open MPI's vader at 4 KiB). Bytes decide, whatever the count. No division: a 64-bit
     * one costs a small reduction more than the rest of this choice. */
    mpi_count extent = reduction->extent;
    return count <= 0 || (count <= GATHER_ALL_MAX_BYTES && extent <= GATHER_ALL_MAX_BYTES &&
                          count * extent <= GATHER_ALL_MAX_BYTES);
}

/* Split `count` elements into `ranks` chunks as evenly as possible, the longer ones first. */
static void split_evenly(mpi_count count, int ranks, mpi_count counts[], mpi_count offsets[])
{
    mpi_count offset = 0;
    for (int r = 0; r < ranks; r++) {
        counts[r] = count / ranks + (r < count % ranks);
        offsets[r] = offset;
        offset += counts[r];
    }
}

/* The exchange of a reduce-scatter: chunk r of every rank's contribution (`counts[r]` elements
 * at `offsets[r]` of `source`) goes to rank r, so that we own `counts[rank]` elements of each
 * rank, laid out in rank order in *blocks. The engine reads our own chunk where it is (no
 * copy: reduction->own_block) unless the library's fold needs it in place, or the result
 * (`output`, where the chunk's reduction goes) overlaps it without being it: the engine may
 * write over a contribution only element for element. */
static int exchange_chunks(struct mpi_reduction *reduction, const void *source,
                           const mpi_count counts[], const mpi_count offsets[], const void *output,
                           char **blocks, void **raw)
{
    int ranks = reduction->ranks, rank = reduction->rank;
    mpi_count mine = counts[rank];
    void *arrays = NULL;
    reduction->route = "chunks exchanged";
    *blocks = mpi_scratch(reduction, mine * ranks, raw, mpi_exchange_bytes(ranks), &arrays);
    struct mpi_exchange exchange;
    mpi_exchange_layout(&exchange, ranks, arrays);
    for (int r = 0; r < ranks; r++) {
        exchange.send_counts[r] = counts[r];
        exchange.send_offsets[r] = offsets[r];
        exchange.receive_counts[r] = mine;
        exchange.receive_offsets[r] = r * mine;
    }
    const char *own = (const char *)source + (size_t)offsets[rank] * (size_t)reduction->extent;
    size_t bytes = (size_t)mine * (size_t)reduction->extent;
    const char *out = output;
    int overlaps = out && own != out && own < out + bytes && out < own + bytes;
    if (reduction->action != REPROD_ACTION_ORDERED_LIBRARY && !overlaps) {
        exchange.send_counts[rank] = exchange.receive_counts[rank] = 0;
        reduction->own_block = own;
    }
    return mpi_exchange_run(reduction, &exchange, counts, source, *blocks, NULL);
}

/* The chunk layout of `count` over the ranks: counts then offsets, `ranks` each. */
static mpi_count *chunk_layout(const struct mpi_reduction *reduction, mpi_count count)
{
    mpi_count *layout = mpi_allocate(reduction, 2 * sizeof(mpi_count) * (size_t)reduction->ranks);
    split_evenly(count, reduction->ranks, layout, layout + reduction->ranks);
    return layout;
}

int mpi_allreduce_path(struct mpi_reduction *reduction, const void *source, void *result,
                       mpi_count count)
{
    if (mpi_route(reduction, REPROD_COLLECTIVE_ALLREDUCE, count, 0) != REPROD_ROUTE_EXCHANGE)
        return mpi_fixed_allreduce(reduction, source, result, count);
    char *blocks = NULL;
    void *raw = NULL;
    int rc;
    if (mpi_is_small(reduction, count)) {
        reduction->route = "whole contributions gathered";
        blocks = mpi_scratch(reduction, count * reduction->ranks, &raw, 0, NULL);
        rc = mpi_move_allgather(reduction, source, count, blocks, NULL);
        if (rc == REPROD_MPI_OK)
            rc = mpi_reduce_blocks(reduction, blocks, count, reduction->ranks, result);
        mpi_scratch_release(raw);
        return rc;
    }
    mpi_count *layout = chunk_layout(reduction, count);
    mpi_count *counts = layout, *offsets = layout + reduction->ranks;
    char *own = (char *)result + (size_t)offsets[reduction->rank] * (size_t)reduction->extent;
    rc = exchange_chunks(reduction, source, counts, offsets, own, &blocks, &raw);
    if (rc == REPROD_MPI_OK) {
        mpi_count mine = counts[reduction->rank];
        int reduced = mpi_reduce_blocks(reduction, blocks, mine, reduction->ranks, own);
        /* Every rank takes part in the all-gather even if its reduction failed: a rank that
         * left the collective out would hang the others. */
        rc = mpi_move_allgatherv_in_place(reduction, result, counts, offsets);
        if (reduced != REPROD_MPI_OK) rc = reduced;
    }
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}

int mpi_reduce_path(struct mpi_reduction *reduction, const void *source, void *result,
                    mpi_count count, int root)
{
    if (mpi_route(reduction, REPROD_COLLECTIVE_REDUCE, count, 0) != REPROD_ROUTE_EXCHANGE)
        return mpi_fixed_reduce(reduction, source, result, count, root);
    int is_root = reduction->rank == root;
    char *blocks = NULL;
    void *raw = NULL;
    int rc;
    if (mpi_is_small(reduction, count)) {
        reduction->route = "whole contributions gathered";
        if (is_root) blocks = mpi_scratch(reduction, count * reduction->ranks, &raw, 0, NULL);
        rc = mpi_move_gather(reduction, source, count, blocks, root, NULL);
        if (rc == REPROD_MPI_OK && is_root)
            rc = mpi_reduce_blocks(reduction, blocks, count, reduction->ranks, result);
        mpi_scratch_release(raw);
        return rc;
    }
    mpi_count *layout = chunk_layout(reduction, count);
    mpi_count *counts = layout, *offsets = layout + reduction->ranks;
    char *root_chunk =
        is_root ? (char *)result + (size_t)offsets[reduction->rank] * (size_t)reduction->extent
                : NULL;
    rc = exchange_chunks(reduction, source, counts, offsets, root_chunk, &blocks, &raw);
    if (rc == REPROD_MPI_OK) {
        mpi_count mine = counts[reduction->rank];
        /* The root reduces straight into its result; the others into their last block. */
        char *last = blocks + (size_t)(reduction->ranks - 1) * (size_t)mine *
                                  (size_t)reduction->extent;
        char *own = is_root ? root_chunk : last;
        int reduced = mpi_reduce_blocks(reduction, blocks, mine, reduction->ranks, own);
        const void *send = is_root ? (const void *)reprod_mpi()->abi->in_place : own;
        rc = mpi_move_gatherv(reduction, send, mine, result, counts, offsets, root);
        if (reduced != REPROD_MPI_OK) rc = reduced;
    }
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}

int mpi_reduce_scatter_path(struct mpi_reduction *reduction, const void *source, void *result,
                            const mpi_count result_counts[])
{
    int ranks = reduction->ranks;
    mpi_count *offsets = mpi_allocate(reduction, sizeof(mpi_count) * (size_t)ranks);
    mpi_count offset = 0;
    for (int r = 0; r < ranks; r++) {
        offsets[r] = offset;
        offset += result_counts[r];
    }
    if (mpi_route(reduction, REPROD_COLLECTIVE_REDUCE_SCATTER, offset, 0) != REPROD_ROUTE_EXCHANGE) {
        free(offsets);
        return mpi_fixed_reduce_scatter(reduction, source, result, result_counts);
    }
    char *blocks = NULL;
    void *raw = NULL;
    int rc = exchange_chunks(reduction, source, result_counts, offsets, result, &blocks, &raw);
    if (rc == REPROD_MPI_OK)
        rc = mpi_reduce_blocks(reduction, blocks, result_counts[reduction->rank], ranks, result);
    mpi_scratch_release(raw);
    free(offsets);
    return rc;
}

/* The prefixes of our chunk (`mine` elements of each of the blocks): prefix r is the
 * reduction of blocks 0..r. The library fold computes them all in one pass, in place; the
 * engine computes each from scratch (the exact sum of a prefix is not the rounded previous
 * prefix plus one block). Returns where they are; *raw gets scratch to release. */
static char *scan_prefixes(struct mpi_reduction *reduction, char *blocks, mpi_count mine,
                           int exclusive, int *local, void **raw)
{
    int ranks = reduction->ranks;
    size_t block_bytes = (size_t)mine * (size_t)reduction->extent;
    if (reduction->action == REPROD_ACTION_ORDERED_LIBRARY) {
        *local = mpi_reduce_blocks(reduction, blocks, mine, ranks,
                                   blocks + (size_t)(ranks - 1) * block_bytes);
        return blocks;
    }
    char *prefixes = mpi_scratch(reduction, mine * ranks, raw, 0, NULL);
    *local = REPROD_MPI_OK;
    for (int r = 0; r < ranks - exclusive && *local == REPROD_MPI_OK; r++)
        *local = mpi_reduce_blocks(reduction, blocks, mine, r + 1, prefixes + (size_t)r * block_bytes);
    return prefixes;
}

int mpi_scan_path(struct mpi_reduction *reduction, const void *source, void *result,
                  mpi_count count, int exclusive)
{
    if (mpi_route(reduction, REPROD_COLLECTIVE_SCAN, count, 1) != REPROD_ROUTE_EXCHANGE)
        return mpi_fixed_scan(reduction, source, result, count, exclusive);
    int ranks = reduction->ranks, rank = reduction->rank;
    mpi_count *layout = chunk_layout(reduction, count);
    mpi_count *counts = layout, *offsets = layout + ranks;
    mpi_count mine = counts[rank];

    char *blocks = NULL;
    void *raw = NULL, *prefix_raw = NULL;
    int rc = exchange_chunks(reduction, source, counts, offsets, NULL, &blocks, &raw);
    if (rc == REPROD_MPI_OK) {
        int local = REPROD_MPI_OK;
        char *prefixes = scan_prefixes(reduction, blocks, mine, exclusive, &local, &prefix_raw);
        /* Prefix r of our chunk goes to rank r (r + 1 for an exclusive scan). A rank whose
         * local step failed still takes part with the same counts, so that no rank hangs. */
        void *arrays = mpi_allocate(reduction, mpi_exchange_bytes(ranks));
        struct mpi_exchange exchange;
        mpi_exchange_layout(&exchange, ranks, arrays);
        for (int r = 0; r < ranks; r++) {
            int gets_nothing = exclusive && r == 0;
            exchange.send_counts[r] = gets_nothing ? 0 : mine;
            exchange.send_offsets[r] = gets_nothing ? 0 : (r - exclusive) * mine;
            exchange.receive_counts[r] = exclusive && rank == 0 ? 0 : counts[r];
            exchange.receive_offsets[r] = offsets[r];
        }
        rc = mpi_exchange_run(reduction, &exchange, counts, prefixes, result, NULL);
        if (local != REPROD_MPI_OK) rc = local;
        free(arrays);
    }
    mpi_scratch_release(prefix_raw);
    mpi_scratch_release(raw);
    free(layout);
    return rc;
}
