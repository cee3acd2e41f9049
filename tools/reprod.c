/* reprod.c: the `reprod` command.
 *
 *   reprod settings            check the REPROD_* environment and print what the shim will do
 *   reprod settings --markdown the table of settings as Markdown (README.md's, `make readme`)
 *   reprod plan --global-batch G --micro-batch M [--world-sizes 1,2,4,8]
 *                              per-device batch and accumulation steps that keep the global
 *                              batch fixed for each world size (docs/design.md, The problem)
 *   reprod run [options] -- CMD  run CMD with the shim preloaded (run.c)
 *   reprod doctor -- CMD       what the shim reached in CMD and what it could not (doctor.c)
 *   reprod diff <trace-dir-a> <trace-dir-b>
 *                              where two runs traced with REPROD_TRACE part, and which side
 *   reprod cost --ranks N --bytes M --type T
 *                              what one all-reduce costs a rank, natively and under the shim,
 *                              in the cost model (cost.c, shim/runtime/cost.h)
 *   reprod version
 */
#include "runtime/config.h"
#include "runtime/record.h"
#include "reprod.h"
#include "reprod_tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static const char usage_text[] =
    "usage: reprod settings [--markdown]\n"
    "       reprod run [--mode M] [--rounding R] [--seed-policy P] [--trace DIR] [--verbose N] "
    "-- CMD...\n"
    "       reprod doctor -- CMD...\n"
    "       reprod plan --global-batch G --micro-batch M [--world-sizes 1,2,4,8]\n"
    "       reprod diff <trace-dir-a> <trace-dir-b>\n"
    "       reprod cost --ranks N --bytes M --type T [options]\n"
    "       reprod version\n"
    "`reprod COMMAND --help` describes each command.\n";

static int usage(void)
{
    fputs(usage_text, stderr);
    return 2;
}

/* One cell of a Markdown table row: `text`, in backquotes when `quoted`, with any '|' escaped
 * (it would end the cell). */
static void markdown_cell(const char *text, int quoted)
{
    fputs(quoted ? " `" : " ", stdout);
    for (const char *c = text; *c; c++) {
        if (*c == '|') putchar('\\');
        putchar(*c);
    }
    fputs(quoted ? "` |" : " |", stdout);
}

/* `reprod settings --markdown`: the shim's table of settings as a Markdown table, whatever
 * the environment holds: README.md's section "Settings" is this output (`make readme`;
 * tests/readme.sh fails when they differ). */
static void settings_markdown(void)
{
    printf("| variable | values | default | meaning |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < reprod_setting_count; i++) {
        const struct reprod_setting *setting = &reprod_settings[i];
        int words = setting->words != NULL;
        fputs("|", stdout);
        markdown_cell(setting->name, 1);
        if (words) {
            fputs(" ", stdout);
            for (int w = 0; setting->words[w]; w++)
                printf("%s`%s`", w ? ", " : "", setting->words[w]);
            fputs(" |", stdout);
        } else {
            markdown_cell(setting->allowed, 0);
        }
        markdown_cell(setting->default_value, words);
        markdown_cell(setting->help, 0);
        fputs("\n", stdout);
    }
}

/* `reprod settings`: the same parse the shim does at load, with its messages; then each
 * setting's value and what it does, from the shim's table of settings. */
static int settings(int argc, char **argv)
{
    if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        printf("usage: reprod settings [--markdown]\nCheck the REPROD_* variables of this "
               "environment as the shim will when it loads, and print each setting's value and "
               "meaning.\n--markdown: print the table of settings (allowed values, default, "
               "meaning) as Markdown instead, whatever the environment holds.\nExit status: 0; "
               "2 when a value is not valid or an argument unknown.\n");
        return 0;
    }
    if (argc == 1 && strcmp(argv[0], "--markdown") == 0) {
        settings_markdown();
        return 0;
    }
    if (argc > 0) {
        char shown[256];
        fprintf(stderr, "reprod settings: unknown argument '%s'\n",
                reprod_escape_text(argv[0], shown, sizeof shown));
        return usage();
    }
    struct reprod_config config;
    char error[PATH_MAX + 128];
    if (reprod_config_parse(environ, &config, error, sizeof error) != 0) {
        fprintf(stderr, "reprod: %s\n", error);
        return 2;
    }
    reprod_config_warn_unknown(environ);
    for (size_t i = 0; i < reprod_setting_count; i++) {
        const struct reprod_setting *setting = &reprod_settings[i];
        char value[PATH_MAX + 16], allowed[256];
        reprod_setting_allowed(setting, allowed, sizeof allowed);
        printf("%s=%s\n    %s (%s; default %s)\n", setting->name,
               reprod_setting_show(setting, &config, value, sizeof value), setting->help, allowed,
               setting->default_value);
    }
    return 0;
}

/* Parse a positive integer argument (decimal digits only, at most LONG_MAX) or exit with a
 * message naming the option: a number too large is refused, never clamped. */
static long positive(const char *option, const char *text)
{
    char shown[256];
    const char *why = NULL;
    long value = 0;
    if (!text)
        why = "a value";
    else if (!text[0] || text[strspn(text, "0123456789")] != '\0')
        why = "a positive integer";
    else {
        errno = 0;
        value = strtol(text, NULL, 10);
        if (errno == ERANGE)
            why = "a positive integer no larger than 9223372036854775807";
        else if (value <= 0)
            why = "a positive integer";
    }
    if (why) {
        fprintf(stderr, "reprod plan: %s needs %s, got %s\n", option, why,
                text ? reprod_escape_value(text, shown, sizeof shown) : "nothing");
        exit(2);
    }
    return value;
}

/* Check `--world-sizes` as a whole before any row is printed: one or more positive integers
 * separated by single commas ("", "1,,2" and "2," are refused, naming the option). */
static void check_world_sizes(const char *sizes)
{
    char shown[256];
    const char *problem = NULL;
    if (!sizes[0])
        problem = "it is empty";
    else if (sizes[0] == ',' || sizes[strlen(sizes) - 1] == ',' || strstr(sizes, ",,"))
        problem = "an item is empty";
    if (problem) {
        fprintf(stderr,
                "reprod plan: --world-sizes needs positive integers separated by commas "
                "(1,2,4,8), got %s: %s\n",
                reprod_escape_value(sizes, shown, sizeof shown), problem);
        exit(2);
    }
    char *copy = strdup(sizes);
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ","))
        positive("--world-sizes", item);
    free(copy);
}

static const char plan_help[] =
    "usage: reprod plan --global-batch G --micro-batch M [--world-sizes 1,2,4,8]\n"
    "For each world size W: the per-device batch G/W and the accumulation steps G/(W*M) that\n"
    "keep the global batch G fixed with micro-batches of M samples; a W for which G is not a\n"
    "multiple of W*M cannot keep it and is marked. Then what the application must do for\n"
    "results that are bitwise equal across the world sizes listed.\n"
    "Exit status: 0 when every world size listed keeps G; 1 when one cannot; 2 on a usage error.\n";

/* `reprod plan`: for each world size W, the per-device batch G / W and the accumulation
 * steps (G / W) / M when G is a multiple of W * M; otherwise W is marked as one that cannot
 * keep G. Then the truth about accumulation: the shim sums across ranks exactly, but a rank
 * that accumulates several micro-batches sums them itself, and how many it holds changes with
 * W. */
static int plan(int argc, char **argv)
{
    long global = 0, micro = 0;
    const char *sizes = "1,2,4,8";
    for (int i = 0; i < argc; i += 2) {
        const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0) {
            fputs(plan_help, stdout);
            return 0;
        }
        if (strcmp(option, "--global-batch") == 0)
            global = positive(option, value);
        else if (strcmp(option, "--micro-batch") == 0)
            micro = positive(option, value);
        else if (strcmp(option, "--world-sizes") == 0 && value)
            sizes = value;
        else {
            char shown[256];
            fprintf(stderr, "reprod plan: %s %s\n%s",
                    reprod_escape_value(option, shown, sizeof shown),
                    strcmp(option, "--world-sizes") == 0 ? "needs a value" : "is not an option",
                    plan_help);
            return 2;
        }
    }
    if (!global || !micro) {
        fprintf(stderr, "reprod plan: %s is needed\n%s",
                !global ? "--global-batch" : "--micro-batch", plan_help);
        return 2;
    }
    check_world_sizes(sizes);
    printf("global batch %ld, micro-batch %ld per device per step\n", global, micro);
    printf("%10s %18s %20s\n", "world size", "per-device batch", "accumulation steps");
    int impossible = 0, accumulating = 0, kept = 0;
    long fewest = 0, most = 0;
    char *copy = strdup(sizes);
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ",")) {
        long world = positive("--world-sizes", item);
        if (global % world != 0) {
            printf("%10ld   cannot keep the global batch: %ld is not a multiple of %ld\n", world,
                   global, world);
            impossible = 1;
        } else if ((global / world) % micro != 0) {
            printf("%10ld   cannot keep the global batch: per-device batch %ld is not a multiple "
                   "of the micro-batch %ld (%ld is not a multiple of %ld x %ld)\n",
                   world, global / world, micro, global, world, micro);
            impossible = 1;
        } else {
            long steps = global / world / micro;
            printf("%10ld %18ld %20ld\n", world, global / world, steps);
            if (!kept++ || steps < fewest) fewest = steps;
            if (steps > most) most = steps;
            accumulating |= steps > 1;
        }
    }
    free(copy);
    printf("\nWith the shim preloaded, every all-reduce returns the exact sum of what the ranks\n"
           "contribute, whatever the world size. Results are bitwise equal across the world\n"
           "sizes above only if each rank's contribution is itself independent of the layout:\n"
           "the same micro-batches (same data order, same micro-batch size %ld), deterministic\n"
           "kernels, the same seeds.\n",
           micro);
    if (accumulating && fewest != most)
        printf("\nCaution: a rank sums its %ld to %ld micro-batch gradients itself, before the\n"
               "all-reduce, and the shim never sees that sum. Its rounding depends on how many\n"
               "micro-batches the rank holds, so the results differ between these world sizes\n"
               "even under the shim, unless the application either\n"
               "  - all-reduces each micro-batch's gradient (one all-reduce per micro-batch, or\n"
               "    all micro-batch gradients in one buffer), so every sum is the shim's; or\n"
               "  - accumulates so that the rank's sum is exact, hence independent of the count:\n"
               "    float32 gradients added in float64 (exact while the terms' exponents span\n"
               "    fewer than about 29 - log2(terms) binades: a few micro-batches, usually), and\n"
               "    all-reduces the float64 accumulator, rounding to float32 after it; rounding\n"
               "    the accumulator to float32 before the all-reduce brings the count back in.\n",
               fewest, most);
    else if (accumulating)
        printf("\nEvery world size above accumulates the same %ld micro-batches per rank, but\n"
               "their sum is the rank's own, not the shim's: it is the same in each layout only\n"
               "when each rank holds the same micro-batches in the same order.\n",
               most);
    if (impossible)
        printf("\nWorld sizes marked above cannot keep the global batch %ld with micro-batches "
               "of %ld: their results will differ.\n",
               global, micro);
    return impossible ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    if (strcmp(argv[1], "settings") == 0) return settings(argc - 2, argv + 2);
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0)
        return fputs(usage_text, stdout), 0;
    if (strcmp(argv[1], "plan") == 0) return plan(argc - 2, argv + 2);
    if (strcmp(argv[1], "cost") == 0) return reprod_cost_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "diff") == 0) return reprod_diff_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "run") == 0) return reprod_run_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "doctor") == 0) return reprod_doctor_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "version") == 0) {
        printf("reprod %s\n", reprod_version());
        return 0;
    }
    char shown[256];
    fprintf(stderr, "reprod: %s is not a command\n",
            reprod_escape_value(argv[1], shown, sizeof shown));
    return usage();
}
