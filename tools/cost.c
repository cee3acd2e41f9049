/* cost.c: `reprod cost`, what one all-reduce costs a rank natively and under the shim, in the
 * model of shim/runtime/cost.h; `reprod cost --table`, the model's table for make bench. */
#include "runtime/cost.h"
#include "runtime/record.h"
#include "reprod_tool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char cost_help[] =
    "usage: reprod cost --ranks N --bytes M --type T [--words K] [--library mpi|nccl]\n"
    "                   [--route auto|exchange|fixed|one-pass] [--ranks-per-node G]\n"
    "                   [--intra-latency-us X] [--intra-gbps X] [--inter-latency-us X]\n"
    "                   [--inter-gbps X] [--overhead-us X] [--reduce-gbps X] [--engine-ns X]\n"
    "                   [--fixed-ns X] [--segment-elements S] [--rank R]\n"
    "       reprod cost --table [--library mpi|nccl] [machine options]\n"
    "What one all-reduce of M bytes of T (float32, float64, float16, bfloat16) over N ranks\n"
    "costs each rank: natively (the algorithm the library picks: Open MPI 4.1's tuned decision,\n"
    "or NCCL's ring or tree) and under the shim (the route it takes for these arguments, or the\n"
    "one --route names), one line each: messages and bytes a rank sends, the peers it sends\n"
    "to, its temporary memory, and the modelled time. M takes K, M, G (KiB, MiB, GiB).\n"
    "--words K: the fixed route's words per element (default: the type's typical K).\n"
    "--segment-elements S: the MPI fixed route's segment (default 8257536, the shim's).\n"
    "--fixed-ns X: the fixed route's split and rounding, ns an element and word (default 0.05,\n"
    "          a GPU's; host buffers: about 1.4 for binary32 with AVX2, `make bench` measures "
    "it).\n"
    "--rank R: rank R's figures, not the largest over the ranks, and the ranks it sends to;\n"
    "          --rank all: two lines a rank (\"native rank=R ...\", \"shim rank=R ...\").\n"
    "--table: shim/native for N = 2 ... 16384 and M = 8 B ... 1 GiB (float32).\n"
    "Exit status: 0; 2 on a usage error.\n";

static int usage_error(const char *option, const char *needs, const char *text)
{
    char shown[256];
    fprintf(stderr, "reprod cost: %s needs %s, got %s\n", option, needs,
            text ? reprod_escape_value(text, shown, sizeof shown) : "nothing");
    return 2;
}

/* A positive integer with an optional binary suffix: 0 on success. */
static int parse_size(const char *text, uint64_t limit, uint64_t *value)
{
    if (!text || !text[0] || text[0] < '0' || text[0] > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE) return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M') shift = 20, end++;
    else if (*end == 'G') shift = 30, end++;
    if (*end || v == 0 || v > (limit >> shift)) return -1;
    *value = (uint64_t)v << shift;
    return 0;
}

static int parse_number(const char *text, double *value)
{
    if (!text || !text[0]) return -1;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || errno == ERANGE || !isfinite(v) || v <= 0) return -1;
    *value = v;
    return 0;
}

#define ALL_RANKS 2097151 /* --rank all */

static const char *const type_names[] = {"float16", "bfloat16", "float32", "float64", NULL};

/* One line; with `peer_set` (--rank), the ranks it sends to, as peer_list=a,b,c at the end. */
static void print_line(const char *label, const struct reprod_cost *c, const char *route,
                       const uint64_t *peer_set, uint64_t ranks)
{
    printf("%s messages=%llu bytes=%llu peers=%llu memory=%llu time_us=%.3f route=%s "
           "algorithm=\"%s\"",
           label, (unsigned long long)c->messages, (unsigned long long)c->bytes,
           (unsigned long long)c->peers, (unsigned long long)c->memory, c->time_us, route,
           c->algorithm);
    if (peer_set) {
        const char *separator = " peer_list=";
        for (uint64_t r = 0; r < ranks; r++)
            if (peer_set[r / 64] >> (r % 64) & 1) {
                printf("%s%llu", separator, (unsigned long long)r);
                separator = ",";
            }
    }
    printf("\n");
}

static const char *route_word(enum reprod_route route)
{
    return route == REPROD_ROUTE_FIXED_ONE_PASS ? "fixed-one-pass" : reprod_route_name(route);
}

static void print_assumptions(const struct reprod_cost_machine *m, int nccl)
{
    char whose[64];
    if (m->rank >= 0)
        snprintf(whose, sizeof whose, "the figures of rank %d", m->rank);
    else
        snprintf(whose, sizeof whose, "per rank: each figure the most of any rank");
    printf("model: alpha-beta per message; %d ranks a node (consecutive ranks); inside a node "
           "%.3g us + bytes / %.3g GB/s, between nodes %.3g us + bytes / %.3g GB/s; %.3g us a "
           "further message of a batch; local sum %.3g GB/s; the shim's exact sum %.3g ns an "
           "element and contribution, fixed-point split and rounding %.3g ns an element and "
           "word; the MPI fixed route in segments of %llu elements; native = %s; %s; the shim's "
           "route chosen on the default machine\n",
           m->ranks_per_node, m->intra_latency_us, m->intra_gbps, m->inter_latency_us,
           m->inter_gbps, m->overhead_us, m->reduce_gbps, m->engine_ns, m->fixed_ns,
           (unsigned long long)m->segment_elements,
           nccl ? "NCCL ring or tree, the faster" : "Open MPI 4.1 coll/tuned fixed decision", whose);
}

/* The model's table: shim/native time, messages and bytes for each N and M (float32). */
static void print_table(const struct reprod_cost_machine *m, int nccl)
{
    static const int ranks[] = {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
    static const uint64_t sizes[] = {8, 1024, 4096, 65536, 1u << 20, 16u << 20, 256u << 20,
                                     1u << 30};
    printf("%-6s %-8s %-10s %-8s %-10s %-8s %-10s %s\n", "ranks", "bytes", "time", "messages",
           "messages", "bytes", "memory", "route");
    printf("%-6s %-8s %-10s %-8s %-10s %-8s %-10s\n", "", "", "shim/nat", "native", "shim",
           "shim/nat", "shim");
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            struct reprod_route_call call = {nccl, REPROD_COLLECTIVE_ALLREDUCE, ranks[i],
                                             sizes[j] / 4, REPROD_FLOAT32, 0};
            struct reprod_cost native, shim;
            enum reprod_route route = reprod_route_by_model(&call);
            reprod_cost_native(m, &call, &native);
            reprod_cost_route(m, &call, route, 0, &shim);
            char size[16];
            if (sizes[j] >= 1u << 30) snprintf(size, sizeof size, "%lluG", (unsigned long long)(sizes[j] >> 30));
            else if (sizes[j] >= 1u << 20) snprintf(size, sizeof size, "%lluM", (unsigned long long)(sizes[j] >> 20));
            else if (sizes[j] >= 1024) snprintf(size, sizeof size, "%lluK", (unsigned long long)(sizes[j] >> 10));
            else snprintf(size, sizeof size, "%llu", (unsigned long long)sizes[j]);
            printf("%-6d %-8s %-10.3g %-8llu %-10llu %-8.2f %-10llu %s\n", ranks[i], size,
                   shim.time_us / native.time_us, (unsigned long long)native.messages,
                   (unsigned long long)shim.messages, (double)shim.bytes / (double)native.bytes,
                   (unsigned long long)shim.memory, route_word(route));
        }
}

int reprod_cost_command(int argc, char **argv)
{
    struct reprod_cost_machine machine;
    reprod_cost_machine_defaults(&machine);
    uint64_t ranks = 0, bytes = 0, words = 0;
    int type = -1, nccl = 0, table = 0, forced = -1;
    for (int i = 0; i < argc; i++) {
        const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0) {
            fputs(cost_help, stdout);
            return 0;
        }
        if (strcmp(option, "--table") == 0) {
            table = 1;
            continue;
        }
        i++;
        double *number = strcmp(option, "--intra-latency-us") == 0   ? &machine.intra_latency_us
                         : strcmp(option, "--intra-gbps") == 0       ? &machine.intra_gbps
                         : strcmp(option, "--inter-latency-us") == 0 ? &machine.inter_latency_us
                         : strcmp(option, "--inter-gbps") == 0       ? &machine.inter_gbps
                         : strcmp(option, "--overhead-us") == 0      ? &machine.overhead_us
                         : strcmp(option, "--reduce-gbps") == 0      ? &machine.reduce_gbps
                         : strcmp(option, "--engine-ns") == 0        ? &machine.engine_ns
                         : strcmp(option, "--fixed-ns") == 0         ? &machine.fixed_ns
                                                                     : NULL;
        if (number) {
            if (parse_number(value, number)) return usage_error(option, "a positive number", value);
        } else if (strcmp(option, "--ranks") == 0) {
            if (parse_size(value, 2097151, &ranks))
                return usage_error(option, "a rank count from 1 to 2097151", value);
        } else if (strcmp(option, "--ranks-per-node") == 0) {
            uint64_t g;
            if (parse_size(value, 65536, &g))
                return usage_error(option, "a positive integer up to 65536", value);
            machine.ranks_per_node = (int)g;
        } else if (strcmp(option, "--bytes") == 0) {
            if (parse_size(value, (uint64_t)1 << 50, &bytes))
                return usage_error(option, "a positive byte count (K, M, G allowed)", value);
        } else if (strcmp(option, "--rank") == 0) {
            uint64_t r;
            if (value && strcmp(value, "all") == 0)
                r = (uint64_t)ALL_RANKS;
            else if (value && strcmp(value, "0") == 0)
                r = 0;
            else if (parse_size(value, 2097150, &r))
                return usage_error(option, "a rank from 0 to 2097150, or all", value);
            machine.rank = (int)r;
        } else if (strcmp(option, "--segment-elements") == 0) {
            if (parse_size(value, (uint64_t)1 << 40, &machine.segment_elements))
                return usage_error(option, "a positive element count (K, M, G allowed)", value);
        } else if (strcmp(option, "--words") == 0) {
            if (parse_size(value, 54, &words))
                return usage_error(option, "a word count from 1 to 54", value);
        } else if (strcmp(option, "--type") == 0) {
            for (int t = 0; value && type_names[t]; t++)
                if (strcmp(value, type_names[t]) == 0) type = t;
            if (type < 0) return usage_error(option, "float32, float64, float16 or bfloat16", value);
        } else if (strcmp(option, "--library") == 0) {
            if (!value || (strcmp(value, "mpi") && strcmp(value, "nccl")))
                return usage_error(option, "mpi or nccl", value);
            nccl = strcmp(value, "nccl") == 0;
        } else if (strcmp(option, "--route") == 0) {
            static const char *const routes[] = {"exchange", "fixed", "one-pass", "auto"};
            for (int r = 0; value && r < 4; r++)
                if (strcmp(value, routes[r]) == 0) forced = r == 3 ? -1 : r;
            if (!value || (forced < 0 && strcmp(value, "auto")))
                return usage_error(option, "auto, exchange, fixed or one-pass", value);
        } else {
            char shown[256];
            fprintf(stderr, "reprod cost: %s is not an option\n%s",
                    reprod_escape_value(option, shown, sizeof shown), cost_help);
            return 2;
        }
    }
    if (table) {
        print_assumptions(&machine, nccl);
        print_table(&machine, nccl);
        return 0;
    }
    if (machine.rank == ALL_RANKS) { /* each rank's two lines, "native rank=R ..." */
        size_t set_words = (size_t)ranks / 64 + 1;
        uint64_t *sets = calloc(2 * set_words, sizeof(uint64_t));
        uint64_t size = (uint64_t)reprod_cost_type_bytes((reprod_type)type);
        if (!sets || !bytes || type < 0 || bytes % size) {
            free(sets);
            fprintf(stderr, "reprod cost: --rank all needs --ranks, --bytes (a multiple of the "
                            "type's size) and --type\n");
            return 2;
        }
        struct reprod_route_call call = {nccl, REPROD_COLLECTIVE_ALLREDUCE, (int)ranks,
                                         bytes / size, (reprod_type)type,
                                         forced == REPROD_ROUTE_FIXED_ONE_PASS};
        enum reprod_route route =
            forced >= 0 ? (enum reprod_route)forced : reprod_route_by_model(&call);
        for (uint64_t r = 0; r < ranks; r++) {
            struct reprod_cost native, shim;
            memset(sets, 0, 2 * set_words * sizeof(uint64_t));
            machine.rank = (int)r;
            machine.peer_set = sets;
            reprod_cost_native(&machine, &call, &native);
            machine.peer_set = sets + set_words;
            reprod_cost_route(&machine, &call, route, (int)words, &shim);
            char label[48];
            snprintf(label, sizeof label, "native rank=%llu", (unsigned long long)r);
            print_line(label, &native, "native", sets, ranks);
            snprintf(label, sizeof label, "shim rank=%llu", (unsigned long long)r);
            print_line(label, &shim, route_word(route), sets + set_words, ranks);
        }
        free(sets);
        return 0;
    }
    if (machine.rank >= 0 && (uint64_t)machine.rank >= ranks) {
        fprintf(stderr, "reprod cost: --rank needs a rank below --ranks %llu, got %d\n",
                (unsigned long long)ranks, machine.rank);
        return 2;
    }
    if (!ranks || !bytes || type < 0) {
        fprintf(stderr, "reprod cost: %s is needed\n%s",
                !ranks ? "--ranks" : !bytes ? "--bytes" : "--type", cost_help);
        return 2;
    }
    uint64_t size = (uint64_t)reprod_cost_type_bytes((reprod_type)type);
    if (bytes % size) {
        fprintf(stderr, "reprod cost: --bytes needs a multiple of %s's %llu bytes, got %llu\n",
                type_names[type], (unsigned long long)size, (unsigned long long)bytes);
        return 2;
    }
    struct reprod_route_call call = {nccl, REPROD_COLLECTIVE_ALLREDUCE, (int)ranks, bytes / size,
                                     (reprod_type)type, forced == REPROD_ROUTE_FIXED_ONE_PASS};
    enum reprod_route route = forced >= 0 ? (enum reprod_route)forced : reprod_route_by_model(&call);
    struct reprod_cost native, shim;
    size_t set_words = (size_t)ranks / 64 + 1;
    uint64_t *sets = machine.rank >= 0 ? calloc(2 * set_words, sizeof(uint64_t)) : NULL;
    machine.peer_set = sets;
    reprod_cost_native(&machine, &call, &native);
    machine.peer_set = sets ? sets + set_words : NULL;
    reprod_cost_route(&machine, &call, route, (int)words, &shim);
    print_line("native", &native, "native", sets, ranks);
    print_line("shim", &shim, route_word(route), sets ? sets + set_words : NULL, ranks);
    free(sets);
    print_assumptions(&machine, nccl);
    return 0;
}
