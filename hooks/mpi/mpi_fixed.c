/* mpi_fixed.c: the fixed-point route of the MPI float sums (runtime/route.h, engine_fixed.h):
 * the library's own MAX of byte codes (a hi an element, a lo a block), then its own int64 SUM of
 * fixed-point words, rounded once; and the one-pass form (one int64 SUM of words covering the
 * type's whole range), which a scan and a nonblocking or persistent reduction use. The same bits as
 * the exchange (mpi_path.c), with the messages and peers of the library's own algorithms: O(log N)
 * where the library's are, and no buffer per peer. See docs/mpi.md, "How the data moves".
 *
 * Every rank cuts the call the same way, from the count alone (segments of pass 1) and from the
 * reduced codes (pieces of pass 2), so their library calls line up; the scratch of one
 * segment is bounded whatever the count, and no count handed to the library exceeds int.
 */
#include "mpi/mpi_path.h"

#include "common.h"
#include "engine/engine.h"
#include "runtime/config.h"
#include "runtime/cost.h"

#include <stdlib.h>
#include <string.h>

/* Configuration. */
/* Int64 words a piece holds (and its elements): below 32 MiB. glibc serves a malloc of 32 MiB
 * or more (the ceiling of its mmap threshold) with fresh pages every time, and the library
 * allocates a temporary buffer of the call's size: on the bench VM at np=2, Open MPI's
 * MPI_Allreduce of 4 Mi int64 took 95 ms, of 4 Mi - 64 Ki 7 ms. */
#define PIECE_WORDS (((size_t)1 << 22) - ((size_t)1 << 16))
/* Engine elements per pass 1: two pieces at one word an element, so that a 16 MiB binary32 call
 * takes one MAX of codes (not two); its codes, 16 MiB, stay below 32 MiB too. */
#define SEGMENT_ELEMENTS (2 * PIECE_WORDS)
#define WORDS_KEPT       2                 /* words per element the first scratch holds */
#define ALIGN(bytes)     (((bytes) + 63) / 64 * 64)

enum reprod_route mpi_route(const struct mpi_reduction *reduction,
                            enum reprod_collective collective, mpi_count count, int one_pass)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    if (reduction->action != REPROD_ACTION_EXACT || !reduction->plain ||
        !reduction->type.predefined ||
        reduction->type.element_class != REPROD_ELEMENT_ENGINE_FLOAT || count <= 0 ||
        !mpi->op_max || !mpi->datatype_int8 || !mpi->datatype_int64)
        return REPROD_ROUTE_EXCHANGE;
    struct reprod_route_call call = {
        .nccl = 0,
        .collective = collective,
        .ranks = reduction->ranks,
        .count = (uint64_t)count * (uint64_t)reduction->type.engine_elements,
        .type = reduction->type.engine_type,
        .one_pass = one_pass,
    };
    return reprod_route_choose(&call);
}

/* One blocking call on the two-pass route. */
struct fixed_run {
    struct mpi_reduction *reduction;
    reprod_type type;
    size_t bytes; /* of one engine element */
    reprod_rounding dir;
    const char *source; /* this rank's contribution, engine elements */
    char *result;       /* where this rank's result goes (NULL: none) */
    uint8_t *codes;     /* a segment's codes, reduced */
    uint8_t *wire;      /* a segment's codes as the MAX carries them (reprod_engine_fixed_pack) */
    size_t *offsets;    /* a piece's word offsets (engine_fixed_layout) */
    int64_t *words;     /* room for word_capacity words */
    size_t word_capacity;
    void *words_raw;    /* words allocated beyond the first scratch, or NULL */
    int words_per_word; /* words of room per word of a piece: 2 where the sums go beside */
    int padded;         /* 1: pass 2 is an MPI_Allreduce, its count padded (handed_count) */
    size_t handed;      /* the piece's words as handed to the library (padded or not) */
    int root;           /* MPI_Reduce */
    const mpi_count *block_starts; /* reduce-scatter: rank r's block, in engine elements, is
                                      [block_starts[r], block_starts[r + 1]) */
    int *word_counts;   /* reduce-scatter: words per rank of a piece */
    int (*pass2)(struct fixed_run *run, size_t first, size_t count, const uint8_t *codes,
                 size_t total);
};

/* The count handed to the library's MPI_Allreduce for `count` elements of `size` bytes: under
 * Open MPI more where its tuned decision would take a ring of tiny blocks or Rabenseifner's
 * linear fallback, whose messages grow with N (cost.h; the caller zeroes the elements added);
 * under the MPICH family, whose algorithms have no such region, `count`. */
static size_t handed_count(const struct mpi_reduction *reduction, size_t count, int size)
{
    if (reprod_mpi()->abi != &reprod_mpi_openmpi) return count;
    return (size_t)reprod_cost_openmpi_allreduce_count(reduction->ranks, count, size);
}

/* The engine's time (the summary's arithmetic) around `work`, when the call is timed. */
#define ENGINE_TIMED(reduction, work)                                                              \
    do {                                                                                           \
        uint64_t started_ = (reduction)->timed ? reprod_clock_ns() : 0;                            \
        work;                                                                                      \
        if ((reduction)->timed) (reduction)->engine_ns += reprod_clock_ns() - started_;            \
    } while (0)

/* Room for `words` words (the first scratch, or memory of their own). */
static void ensure_words(struct fixed_run *run, size_t words)
{
    if (words <= run->word_capacity) return;
    mpi_scratch_release(run->words_raw);
    void *extra = NULL;
    mpi_scratch(run->reduction, 0, &run->words_raw, words * sizeof(int64_t), &extra);
    run->words = extra;
    run->word_capacity = words;
}

static int sum_words(struct fixed_run *run, const void *send, void *receive, size_t total)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    return mpi->real.Allreduce(send, receive, (int)total, mpi->datatype_int64, mpi->op_sum,
                               run->reduction->comm);
}

static int allreduce_pass2(struct fixed_run *run, size_t first, size_t count,
                           const uint8_t *codes, size_t total)
{
    int ranks = run->reduction->ranks;
    ENGINE_TIMED(run->reduction,
                 reprod_engine_fixed_split(run->type, ranks, run->dir,
                                           run->source + first * run->bytes, codes, count,
                                           run->offsets, run->words));
    if (total) memset(run->words + total, 0, (run->handed - total) * sizeof(int64_t));
    int rc =
        total ? sum_words(run, (const void *)reprod_mpi()->abi->in_place, run->words, run->handed)
              : REPROD_MPI_OK;
    if (rc == REPROD_MPI_OK)
        ENGINE_TIMED(run->reduction,
                     reprod_engine_fixed_round(run->type, REPROD_SUM, ranks, run->dir, codes,
                                               count, run->offsets, run->words,
                                               run->result + first * run->bytes));
    return rc;
}

static int reduce_pass2(struct fixed_run *run, size_t first, size_t count, const uint8_t *codes,
                        size_t total)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    int ranks = run->reduction->ranks, is_root = run->reduction->rank == run->root;
    ENGINE_TIMED(run->reduction,
                 reprod_engine_fixed_split(run->type, ranks, run->dir,
                                           run->source + first * run->bytes, codes, count,
                                           run->offsets, run->words));
    /* The root receives beside its words, not in place: MPICH 4.0's MPI_Reduce with
     * MPI_IN_PLACE on a root other than 0 reads MPI_IN_PLACE as a buffer from 512 elements. */
    int64_t *sums = run->words + total;
    int rc = REPROD_MPI_OK;
    if (total)
        rc = mpi->real.Reduce(run->words, is_root ? sums : NULL, (int)total, mpi->datatype_int64,
                              mpi->op_sum, run->root, run->reduction->comm);
    if (rc == REPROD_MPI_OK && is_root)
        ENGINE_TIMED(run->reduction,
                     reprod_engine_fixed_round(run->type, REPROD_SUM, ranks, run->dir, codes,
                                               count, run->offsets, sums,
                                               run->result + first * run->bytes));
    return rc;
}

/* `index` (engine elements) clamped into the piece [first, first + count), from its start. */
static size_t in_piece(mpi_count index, size_t first, size_t count)
{
    if (index <= (mpi_count)first) return 0;
    return (size_t)index >= first + count ? count : (size_t)index - first;
}

static int reduce_scatter_pass2(struct fixed_run *run, size_t first, size_t count,
                                const uint8_t *codes, size_t total)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    struct mpi_reduction *reduction = run->reduction;
    int ranks = reduction->ranks, rank = reduction->rank;
    ENGINE_TIMED(run->reduction,
                 reprod_engine_fixed_split(run->type, ranks, run->dir,
                                           run->source + first * run->bytes, codes, count,
                                           run->offsets, run->words));
    for (int r = 0; r < ranks; r++) {
        size_t low = in_piece(run->block_starts[r], first, count);
        size_t high = in_piece(run->block_starts[r + 1], first, count);
        run->word_counts[r] = (int)(run->offsets[high] - run->offsets[low]);
    }
    int64_t *mine = run->words + total;
    int rc = REPROD_MPI_OK;
    if (total)
        rc = mpi->real.Reduce_scatter(run->words, mine, run->word_counts, mpi->datatype_int64,
                                      mpi->op_sum, reduction->comm);
    size_t low = in_piece(run->block_starts[rank], first, count);
    size_t high = in_piece(run->block_starts[rank + 1], first, count);
    if (rc == REPROD_MPI_OK && high > low) {
        /* Our elements' own offsets, from our first word (the piece's are no longer needed). */
        reprod_engine_fixed_layout(run->type, ranks, run->dir, codes + 2 * low, high - low,
                                   run->offsets);
        size_t at = first + low - (size_t)run->block_starts[rank];
        ENGINE_TIMED(reduction, reprod_engine_fixed_round(run->type, REPROD_SUM, ranks, run->dir,
                                                          codes + 2 * low, high - low,
                                                          run->offsets, mine,
                                                          run->result + at * run->bytes));
    }
    return rc;
}

/* Pass 1: the MAX over the ranks of `bytes` unsigned codes, in place. The library reduces them
 * as int8 with their top bit flipped (the same order): MPICH 4.0's MAX of MPI_UINT8_T and of
 * MPI_UNSIGNED_CHAR answers wrongly, its MAX of MPI_INT8_T rightly. */
static void flip_top_bits(uint8_t *codes, size_t bytes)
{
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) { /* 8 at a time (a byte loop is not vectorised at -O2) */
        uint64_t eight;
        memcpy(&eight, codes + i, 8);
        eight ^= 0x8080808080808080ull;
        memcpy(codes + i, &eight, 8);
    }
    for (; i < bytes; i++)
        codes[i] ^= 0x80;
}

/* The wire's room has handed_count(bytes) bytes: the padding takes zeros. */
static int max_of_codes(struct mpi_reduction *reduction, uint8_t *codes, size_t bytes)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    size_t handed = handed_count(reduction, bytes, 1);
    flip_top_bits(codes, bytes);
    memset(codes + bytes, 0, handed - bytes);
    int rc = mpi->real.Allreduce((const void *)mpi->abi->in_place, codes, (int)handed,
                                 mpi->datatype_int8, mpi->op_max, reduction->comm);
    flip_top_bits(codes, bytes);
    return rc;
}

/* Pass 1 a segment at a time, pass 2 a piece at a time, `elements` engine elements. */
static int run_segments(struct fixed_run *run, size_t elements)
{
    struct mpi_reduction *reduction = run->reduction;
    int ranks = reduction->ranks;
    size_t segment = elements < SEGMENT_ELEMENTS ? elements : SEGMENT_ELEMENTS;
    /* A piece's words at most (half where the sums go beside), and its elements at most. */
    size_t most = PIECE_WORDS / (size_t)run->words_per_word;
    size_t piece = segment < most ? segment : most;
    /* The wire's room, padded as the library is handed it (a shorter last segment's padded
     * count is never larger: it grows with the count). */
    size_t wire_bytes =
        ALIGN(handed_count(reduction, reprod_engine_fixed_packed_bytes(run->type, segment), 1));
    size_t codes_bytes = ALIGN(2 * segment), offsets_bytes = ALIGN((piece + 1) * sizeof(size_t));
    size_t kept = segment * WORDS_KEPT < most ? segment * WORDS_KEPT : most;
    kept *= (size_t)run->words_per_word;
    if (run->padded) kept = handed_count(reduction, kept, (int)sizeof(int64_t)); /* as handed */
    void *raw = NULL, *extra = NULL;
    mpi_scratch(reduction, 0, &raw,
                wire_bytes + codes_bytes + offsets_bytes + kept * sizeof(int64_t), &extra);
    run->wire = extra;
    run->codes = (uint8_t *)extra + wire_bytes;
    run->offsets = (size_t *)((char *)run->codes + codes_bytes);
    run->words = (int64_t *)((char *)run->offsets + offsets_bytes);
    run->word_capacity = kept;
    run->words_raw = NULL;
    int rc = REPROD_MPI_OK;
    for (size_t start = 0; start < elements && rc == REPROD_MPI_OK; start += segment) {
        size_t count = elements - start < segment ? elements - start : segment;
        ENGINE_TIMED(reduction, {
            reprod_engine_fixed_codes(run->type, run->source + start * run->bytes, count,
                                      run->codes);
            reprod_engine_fixed_pack(run->type, run->dir, run->codes, count, run->wire);
        });
        rc = max_of_codes(reduction, run->wire, reprod_engine_fixed_packed_bytes(run->type, count));
        if (rc == REPROD_MPI_OK)
            ENGINE_TIMED(reduction, reprod_engine_fixed_unpack(run->type, run->dir, run->wire,
                                                               count, run->codes));
        for (size_t done = 0; done < count && rc == REPROD_MPI_OK;) {
            const uint8_t *codes = run->codes + 2 * done;
            size_t left = count - done < piece ? count - done : piece;
            size_t total = reprod_engine_fixed_layout(run->type, ranks, run->dir, codes, left,
                                                      run->offsets);
            size_t take = left;
            if (total > most) { /* the same cut on every rank: the codes are */
                take = 1;
                while (take < left && run->offsets[take + 1] <= most)
                    take++;
                total = run->offsets[take];
            }
            run->handed =
                run->padded ? handed_count(reduction, total, (int)sizeof(int64_t)) : total;
            ensure_words(run, run->padded ? run->handed : total * (size_t)run->words_per_word);
            rc = run->pass2(run, start + done, take, codes, total);
            done += take;
        }
    }
    mpi_scratch_release(run->words_raw);
    mpi_scratch_release(raw);
    return rc;
}

static void run_init(struct fixed_run *run, struct mpi_reduction *reduction, const void *source,
                     void *result)
{
    memset(run, 0, sizeof *run);
    run->reduction = reduction;
    run->type = reduction->type.engine_type;
    run->bytes = reprod_type_size(run->type);
    run->dir = reprod_config()->rounding;
    run->source = source;
    run->result = result;
    run->words_per_word = 1;
}

static size_t engine_count(const struct mpi_reduction *reduction, mpi_count count)
{
    return (size_t)count * (size_t)reduction->type.engine_elements;
}

int mpi_fixed_allreduce(struct mpi_reduction *reduction, const void *source, void *result,
                        mpi_count count)
{
    struct fixed_run run;
    run_init(&run, reduction, source, result);
    run.pass2 = allreduce_pass2;
    run.padded = 1;
    reduction->route = "fixed: MAX of codes, int64 SUM of words";
    reduction->taken = REPROD_ROUTE_FIXED;
    return run_segments(&run, engine_count(reduction, count));
}

int mpi_fixed_reduce(struct mpi_reduction *reduction, const void *source, void *result,
                     mpi_count count, int root)
{
    struct fixed_run run;
    run_init(&run, reduction, source, result);
    run.pass2 = reduce_pass2;
    run.words_per_word = 2;
    run.root = root;
    reduction->route = "fixed: MAX of codes, int64 SUM of words to the root";
    reduction->taken = REPROD_ROUTE_FIXED;
    return run_segments(&run, engine_count(reduction, count));
}

int mpi_fixed_reduce_scatter(struct mpi_reduction *reduction, const void *source, void *result,
                             const mpi_count result_counts[])
{
    int ranks = reduction->ranks;
    mpi_count *starts = mpi_allocate(reduction, sizeof(mpi_count) * (size_t)(ranks + 1));
    int *word_counts = mpi_allocate(reduction, sizeof(int) * (size_t)ranks);
    mpi_count total = 0;
    for (int r = 0; r < ranks; r++) {
        starts[r] = total * reduction->type.engine_elements;
        total += result_counts[r];
    }
    starts[ranks] = total * reduction->type.engine_elements;
    struct fixed_run run;
    run_init(&run, reduction, source, result);
    run.pass2 = reduce_scatter_pass2;
    run.words_per_word = 2;
    run.block_starts = starts;
    run.word_counts = word_counts;
    reduction->route = "fixed: MAX of codes, int64 reduce-scatter of words";
    reduction->taken = REPROD_ROUTE_FIXED;
    int rc = run_segments(&run, engine_count(reduction, total));
    free(word_counts);
    free(starts);
    return rc;
}

/* ---- One pass: scans (blocking), and the nonblocking and persistent reductions ---------- */

size_t mpi_fixed_one_pass_words(const struct mpi_reduction *reduction, mpi_count count)
{
    return engine_count(reduction, count) *
           (size_t)reprod_engine_fixed_full_words(reduction->type.engine_type, reduction->ranks);
}

void mpi_fixed_one_pass_split(const struct mpi_reduction *reduction, const void *source,
                              mpi_count count, int64_t *words)
{
    reprod_engine_fixed_full_split(reduction->type.engine_type, reduction->ranks, source,
                                   engine_count(reduction, count), words);
}

void mpi_fixed_one_pass_round(const struct mpi_reduction *reduction, int terms,
                              const int64_t *sums, mpi_count count, void *result)
{
    reprod_engine_fixed_full_round_prefix(reduction->type.engine_type, reduction->ranks, terms,
                                          reprod_config()->rounding,
                                          engine_count(reduction, count), sums, result);
}

int mpi_fixed_scan(struct mpi_reduction *reduction, const void *source, void *result,
                   mpi_count count, int exclusive)
{
    const struct reprod_mpi *mpi = reprod_mpi();
    reprod_type type = reduction->type.engine_type;
    size_t bytes = reprod_type_size(type), elements = engine_count(reduction, count);
    size_t per_element = (size_t)reprod_engine_fixed_full_words(type, reduction->ranks);
    size_t piece = PIECE_WORDS / per_element;
    if (piece > elements) piece = elements;
    int receives = !exclusive || reduction->rank > 0;
    int terms = exclusive ? reduction->rank : reduction->rank + 1;
    void *raw = NULL, *extra = NULL;
    mpi_scratch(reduction, 0, &raw, piece * per_element * sizeof(int64_t), &extra);
    int64_t *words = extra;
    const void *in_place = (const void *)mpi->abi->in_place;
    reduction->route = "fixed one-pass: int64 prefix SUM of whole-range words";
    reduction->taken = REPROD_ROUTE_FIXED_ONE_PASS;
    int rc = REPROD_MPI_OK;
    for (size_t first = 0; first < elements && rc == REPROD_MPI_OK; first += piece) {
        size_t n = elements - first < piece ? elements - first : piece;
        ENGINE_TIMED(reduction, reprod_engine_fixed_full_split(type, reduction->ranks,
                                                               (const char *)source + first * bytes,
                                                               n, words));
        int words_count = (int)(n * per_element);
        rc = exclusive ? mpi->real.Exscan(in_place, words, words_count, mpi->datatype_int64,
                                          mpi->op_sum, reduction->comm)
                       : mpi->real.Scan(in_place, words, words_count, mpi->datatype_int64,
                                        mpi->op_sum, reduction->comm);
        if (rc == REPROD_MPI_OK && receives)
            ENGINE_TIMED(reduction, reprod_engine_fixed_full_round_prefix(
                                        type, reduction->ranks, terms, reprod_config()->rounding,
                                        n, words, (char *)result + first * bytes));
    }
    mpi_scratch_release(raw);
    return rc;
}
