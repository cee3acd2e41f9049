/* trace_diff.c: `reprod diff <run-a> <run-b>`: walk two runs' traces (REPROD_TRACE
 * directories) side by side and name the first call where they part, and which side differed
 * first: the contributions (the application's side) or the result of identical contributions
 * (the reduction's side).
 *
 * Ranks call their collectives in the same order in every run of the same program, so the
 * k-th line of a rank's trace in one run is compared with the k-th line of that rank in the
 * other. Exit status: 0 when the traces agree, 1 when they part, 2 on a usage or read error.
 */
#include "reprod_tool.h"

#include "runtime/record.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line of a trace. Hashes are kept as text ("-" when absent); api, action and detail as
 * the shim escaped them (record.h: printable ASCII, safe to print as they are). */
struct call {
    unsigned long long sequence;
    char api[128], action[64], detail[128], input[24], output[24];
    long long count;
    int ranks;
};

/* One rank's trace. */
struct rank_trace {
    struct call *calls;
    size_t length;
};

/* A run: its ranks' traces, indexed by rank. */
struct run {
    const char *dir; /* as given, escaped (record.h): it is printed */
    char shown_dir[1024];
    struct rank_trace *ranks;
    int rank_count;
};

static int by_sequence(const void *a, const void *b)
{
    const struct call *x = a, *y = b;
    return (x->sequence > y->sequence) - (x->sequence < y->sequence);
}

/* `text`, at most `limit` digits after an optional '-' (with `sign`), into *value: 0 or -1. */
static int read_integer(const char *text, int sign, size_t limit, long long *value)
{
    const char *digits = sign && *text == '-' ? text + 1 : text;
    size_t length = strlen(digits);
    if (length == 0 || length > limit || strspn(digits, "0123456789") != length) return -1;
    *value = strtoll(text, NULL, 10);
    return 0;
}

/* A hash as the shim writes it: 16 hexadecimal digits, or "-" when it does not apply. */
static int is_hash(const char *text)
{
    return strcmp(text, "-") == 0 || (strlen(text) == 16 && strspn(text, "0123456789abcdef") == 16);
}

/* Copy the escaped word `value` into field[0 .. field_bytes): 0, or -1 when it is too long. */
static int copy_word(char *field, size_t field_bytes, const char *value)
{
    if (strlen(value) >= field_bytes) return -1;
    strcpy(field, value);
    return 0;
}

/* Parse one line of a trace (without its newline; changed in place) into *call: the record
 * trace.c writes, its first eight words in their order, and perhaps more words after them
 * (audit's differ= and ulps=). Returns 0, or -1 when the line is not such a record. */
static int parse_call(char *line, struct call *call)
{
    static const char *const keys[] = {"seq",   "api",   "action", "detail",
                                       "count", "ranks", "in",     "out"};
    struct reprod_record_word words[16];
    int count = reprod_record_split(line, words, 16);
    if (count < 8) return -1;
    for (int i = 0; i < 8; i++)
        if (strcmp(words[i].key, keys[i]) != 0) return -1;
    long long sequence, ranks;
    if (read_integer(words[0].value, 0, 19, &sequence) != 0 ||
        read_integer(words[4].value, 1, 18, &call->count) != 0 ||
        read_integer(words[5].value, 1, 9, &ranks) != 0 || !is_hash(words[6].value) ||
        !is_hash(words[7].value) || copy_word(call->api, sizeof call->api, words[1].value) != 0 ||
        copy_word(call->action, sizeof call->action, words[2].value) != 0 ||
        copy_word(call->detail, sizeof call->detail, words[3].value) != 0)
        return -1;
    call->sequence = (unsigned long long)sequence;
    call->ranks = (int)ranks;
    strcpy(call->input, words[6].value);
    strcpy(call->output, words[7].value);
    return 0;
}

/* The first line of rank `rank`'s trace: "# reprod trace 1 rank=<rank> world=.. pid=..". */
static int is_header(char *line, int rank)
{
    static const char start[] = "# reprod trace 1 ";
    struct reprod_record_word words[8];
    long long header_rank;
    if (strncmp(line, start, sizeof start - 1) != 0) return 0;
    int count = reprod_record_split(line + sizeof start - 1, words, 8);
    const char *value = count > 0 ? reprod_record_value(words, count, "rank") : NULL;
    return value && read_integer(value, 1, 9, &header_rank) == 0 && header_rank == rank;
}

/* Read rank `rank`'s trace at `path` into *trace (lines sorted by call number: a nonblocking
 * call's line is written when it completes). Every line must be one the shim writes: a trace
 * changed by hand, or a line that is not a record, is an error. Returns 0 or -1 (said). */
static int read_trace(const char *path, int rank, struct rank_trace *trace)
{
    char shown[1024];
    reprod_escape_text(path, shown, sizeof shown);
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "reprod diff: cannot read %s\n", shown);
        return -1;
    }
    char line[1024];
    size_t capacity = 0, number = 0;
    while (fgets(line, sizeof line, file)) {
        number++;
        size_t length = strlen(line);
        int whole = length > 0 && line[length - 1] == '\n';
        if (whole) line[--length] = '\0';
        struct call call;
        if (!whole || (number == 1 ? !is_header(line, rank) : parse_call(line, &call) != 0)) {
            fprintf(stderr,
                    "reprod diff: %s: line %zu is not %s reprod writes (a trace changed by hand, "
                    "damaged, or not a trace)\n",
                    shown, number, number == 1 ? "the first line of a trace" : "a record");
            fclose(file);
            return -1;
        }
        if (number == 1) continue;
        if (trace->length == capacity) {
            capacity = capacity ? 2 * capacity : 256;
            struct call *grown = realloc(trace->calls, capacity * sizeof *grown);
            if (!grown) {
                fclose(file);
                return -1;
            }
            trace->calls = grown;
        }
        trace->calls[trace->length++] = call;
    }
    fclose(file);
    if (number == 0) {
        fprintf(stderr, "reprod diff: %s is empty: not a trace\n", shown);
        return -1;
    }
    qsort(trace->calls, trace->length, sizeof *trace->calls, by_sequence);
    return 0;
}

/* Load every rankN.trace of `dir`. Returns 0, or -1 with a message. */
static int read_run(const char *dir, struct run *run)
{
    run->dir = reprod_escape_text(dir, run->shown_dir, sizeof run->shown_dir);
    DIR *listing = opendir(dir);
    if (!listing && errno == ENOTDIR) {
        fprintf(stderr,
                "reprod diff: %s is a file, not a run's trace directory: give the two directories "
                "REPROD_TRACE named (each holds a rankN.trace per rank)\n",
                run->dir);
        return -1;
    }
    if (!listing) {
        fprintf(stderr, "reprod diff: cannot read %s: %s\n", run->dir, strerror(errno));
        return -1;
    }
    struct dirent *entry;
    int highest = -1;
    while ((entry = readdir(listing))) {
        int rank;
        char tail[16];
        if (sscanf(entry->d_name, "rank%d.%15s", &rank, tail) == 2 && strcmp(tail, "trace") == 0 &&
            rank > highest && rank < 1 << 20)
            highest = rank;
    }
    closedir(listing);
    if (highest < 0) {
        fprintf(stderr, "reprod diff: no rank*.trace file in %s (was REPROD_TRACE set?)\n",
                run->dir);
        return -1;
    }
    run->rank_count = highest + 1;
    run->ranks = calloc((size_t)run->rank_count, sizeof *run->ranks);
    for (int r = 0; r < run->rank_count; r++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.trace", dir, r);
        if (read_trace(path, r, &run->ranks[r]) != 0) return -1;
    }
    return 0;
}

static int same_call(const struct call *a, const struct call *b)
{
    return strcmp(a->api, b->api) == 0 && strcmp(a->detail, b->detail) == 0 && a->count == b->count;
}

static int is_seed(const struct call *call)
{
    return strcmp(call->action, "seed") == 0;
}

/* A seeding call of both runs whose seeds differ: say so, and that it comes first. */
static int seeded_differently(size_t index, int rank, const struct call *p, const struct call *q,
                              const char *dir_a, const char *dir_b)
{
    printf("the runs were seeded differently at call %zu of rank %d (%s), before any reduction "
           "differed:\n",
           index + 1, rank, p->api);
    printf("  %s: %s seed %llu -> %llu (policy %s)\n", dir_a, p->api, strtoull(p->input, NULL, 16),
           strtoull(p->output, NULL, 16), p->detail);
    printf("  %s: %s seed %llu -> %llu (policy %s)\n", dir_b, q->api, strtoull(q->input, NULL, 16),
           strtoull(q->output, NULL, 16), q->detail);
    if (strcmp(p->input, q->input) != 0)
        printf("  -> the application's side: it passed different seeds\n");
    else
        printf("  -> the same seed, derived differently: REPROD_SEED_POLICY or the rank differ\n");
    return 1;
}

/* One line for `call`, after `label` ("<dir>: ", or an indent); the rank count when the trace
 * knew it (a call passed through before the communicator was asked has none). */
static void describe(const char *label, const struct call *call)
{
    printf("  %scall %llu: %s %s x %lld, %s", label, call->sequence, call->api, call->detail,
           call->count, call->action);
    if (call->ranks > 0) printf(", on %d ranks", call->ranks);
    printf("\n");
}

/* describe() for the trace in directory `dir`. */
static void describe_in(const char *dir, const struct call *call)
{
    char label[4096];
    snprintf(label, sizeof label, "%s: ", dir);
    describe(label, call);
}

/* Calls before `index` on rank 0 of `run` that passed through where a result may not be
 * reproducible: the suspects when contributions differ later. */
static void list_suspects(const struct run *run, size_t index)
{
    static const char *const risky[] = {"intercommunicator", "mode", "unsupported", "out"};
    const struct rank_trace *trace = &run->ranks[0];
    int shown = 0;
    for (size_t i = 0; i < index && i < trace->length; i++) {
        const struct call *call = &trace->calls[i];
        if (strcmp(call->action, "pass") != 0) continue;
        for (size_t k = 0; k < sizeof risky / sizeof risky[0]; k++) {
            if (strncmp(call->detail, risky[k], strlen(risky[k])) != 0) continue;
            if (!shown++) printf("  earlier calls that were not made deterministic:\n");
            if (shown <= 5) describe("   ", call);
        }
    }
}

/* Same world size: the first index where a rank differs, then which side differed there. */
static int diff_same_layout(const struct run *a, const struct run *b)
{
    size_t first = (size_t)-1;
    int first_rank = -1;
    for (int r = 0; r < a->rank_count; r++) {
        const struct rank_trace *x = &a->ranks[r], *y = &b->ranks[r];
        size_t shorter = x->length < y->length ? x->length : y->length;
        size_t i = 0;
        while (i < shorter && same_call(&x->calls[i], &y->calls[i]) &&
               strcmp(x->calls[i].input, y->calls[i].input) == 0 &&
               strcmp(x->calls[i].output, y->calls[i].output) == 0)
            i++;
        if ((i < shorter || x->length != y->length) && i < first) {
            first = i;
            first_rank = r;
        }
    }
    size_t calls = 0;
    for (int r = 0; r < a->rank_count; r++)
        calls += a->ranks[r].length;
    if (first_rank < 0 && calls == 0) {
        printf("the traces agree, but hold no call: neither run traced a reduction or a seed\n");
        return 0;
    }
    if (first_rank < 0) {
        printf("the traces agree: %zu calls on %d ranks\n", a->ranks[0].length, a->rank_count);
        return 0;
    }
    const struct rank_trace *x = &a->ranks[first_rank], *y = &b->ranks[first_rank];
    if (first >= x->length || first >= y->length) {
        printf("the runs part after %zu calls: rank %d of %s made %zu calls, of %s %zu\n", first,
               first_rank, a->dir, x->length, b->dir, y->length);
        return 1;
    }
    if (is_seed(&x->calls[first]) && is_seed(&y->calls[first]) &&
        strcmp(x->calls[first].api, y->calls[first].api) == 0)
        return seeded_differently(first, first_rank, &x->calls[first], &y->calls[first], a->dir,
                                  b->dir);
    if (!same_call(&x->calls[first], &y->calls[first])) {
        printf("the runs part at call %zu of rank %d: they made different calls\n", first + 1,
               first_rank);
        describe_in(a->dir, &x->calls[first]);
        describe_in(b->dir, &y->calls[first]);
        return 1;
    }
    /* The same call in both runs: did any rank bring different contributions to it? */
    int differing = 0;
    printf("the runs part at call %zu (", first + 1);
    printf("%s %s x %lld):\n", x->calls[first].api, x->calls[first].detail, x->calls[first].count);
    for (int r = 0; r < a->rank_count; r++) {
        const struct rank_trace *p = &a->ranks[r], *q = &b->ranks[r];
        if (first < p->length && first < q->length &&
            strcmp(p->calls[first].input, q->calls[first].input) != 0) {
            if (!differing++) printf("  contributions differ on rank");
            printf(" %d", r);
        }
    }
    if (differing) {
        printf("\n  -> the application's side: it fed this reduction different data (inputs,\n"
               "     batch split, data order, nondeterministic kernels or seeds upstream)\n");
        list_suspects(a, first);
        return 1;
    }
    printf("  every rank brought the same contributions, and the results differ\n");
    if (strcmp(x->calls[first].action, "audit") == 0)
        printf("  -> the reduction's side: the job received the library's native result\n"
               "     (REPROD_MODE=audit), which depends on its algorithm and the layout\n");
    else if (strcmp(x->calls[first].action, "pass") == 0)
        printf("  -> the reduction's side: the call passed through unchanged (%s)\n",
               x->calls[first].detail);
    else
        printf("  -> the reduction's side: a %s reduction gave two results for the same inputs;\n"
               "     that should not happen: please report it with both traces\n",
               x->calls[first].action);
    return 1;
}

/* Different world sizes: the contributions are not comparable (each rank holds another part of
 * the data), the results are: compare rank 0's results call by call. */
static int diff_other_layout(const struct run *a, const struct run *b)
{
    const struct rank_trace *x = &a->ranks[0], *y = &b->ranks[0];
    size_t shorter = x->length < y->length ? x->length : y->length;
    printf("world sizes differ (%d and %d ranks): comparing the results rank 0 received\n",
           a->rank_count, b->rank_count);
    for (size_t i = 0; i < shorter; i++) {
        const struct call *p = &x->calls[i], *q = &y->calls[i];
        if (is_seed(p) && is_seed(q) && strcmp(p->api, q->api) == 0) {
            /* The seed passed is comparable across layouts (the derived one under policy hash
             * too, but not under rank): compare what the application passed. */
            if (strcmp(p->input, q->input) != 0)
                return seeded_differently(i, 0, p, q, a->dir, b->dir);
            continue;
        }
        if (!same_call(p, q) && strcmp(p->api, "MPI_Reduce_scatter") != 0) {
            printf("the runs part at call %zu of rank 0: they made different calls\n", i + 1);
            describe_in(a->dir, p);
            describe_in(b->dir, q);
            return 1;
        }
        if (strcmp(p->output, "-") == 0 || strcmp(q->output, "-") == 0) continue;
        if (strcmp(p->output, q->output) != 0) {
            printf("the results part at call %zu (%s %s x %lld)\n", i + 1, p->api, p->detail,
                   p->count);
            if (strcmp(p->action, "pass") == 0 || strcmp(q->action, "pass") == 0)
                printf("  -> this call passed through (%s): its order of additions may differ\n"
                       "     between world sizes; run both under the shim to tell the\n"
                       "     reduction's side from the application's\n",
                       strcmp(p->action, "pass") == 0 ? p->detail : q->detail);
            else
                printf("  -> with exact reductions, the sums of the contributions differed: the\n"
                       "     application's side (global batch, micro-batches, data order; see\n"
                       "     `reprod plan`)\n");
            list_suspects(a, i);
            return 1;
        }
    }
    if (x->length != y->length) {
        printf("the results agree for %zu calls, then rank 0 of one run made more calls\n",
               shorter);
        return 1;
    }
    printf("the results agree: %zu calls\n", shorter);
    return 0;
}

int reprod_diff_command(int argc, char **argv)
{
    if (argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        printf("usage: reprod diff <trace-dir-a> <trace-dir-b>\nCompare two runs traced with "
               "REPROD_TRACE: the first call where they part (a seeding call, or a reduction)\n"
               "and which side differed first. Exit status: 0 when they agree, 1 when they "
               "part, 2 on an error.\n");
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: reprod diff <trace-dir-a> <trace-dir-b>\n");
        return 2;
    }
    struct run a, b;
    if (read_run(argv[0], &a) != 0 || read_run(argv[1], &b) != 0) return 2;
    return a.rank_count == b.rank_count ? diff_same_layout(&a, &b) : diff_other_layout(&a, &b);
}
