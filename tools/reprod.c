/* reprod.c: the `reprod` command.
 *
 *   reprod settings            check the REPROD_* environment and print what the shim will do
 *   reprod plan --global-batch G --micro-batch M [--world-sizes 1,2,4,8]
 *                              per-device batch and accumulation steps that keep the global
 *                              batch fixed for each world size (DESIGN.md section 2, layer 1)
 *   reprod diff <trace-dir-a> <trace-dir-b>
 *                              where two runs traced with REPROD_TRACE part, and which side
 *   reprod version
 */
#include "config.h"
#include "reprod.h"
#include "reprod_tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static int usage(void)
{
    fprintf(stderr, "usage: reprod settings\n"
                    "       reprod plan --global-batch G --micro-batch M [--world-sizes 1,2,4,8]\n"
                    "       reprod diff <trace-dir-a> <trace-dir-b>\n"
                    "       reprod version\n");
    return 2;
}

/* `reprod settings`: the same parse the shim does at load, with its messages; then each
 * setting's value and what it does, from the shim's table of settings. */
static int settings(void)
{
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

/* Parse a positive integer argument or exit with a message naming the option. */
static long positive(const char *option, const char *text)
{
    char *end = NULL;
    long value = text ? strtol(text, &end, 10) : 0;
    if (!text || *end || value <= 0) {
        fprintf(stderr, "reprod plan: %s needs a positive integer, got '%s'\n", option,
                text ? text : "");
        exit(2);
    }
    return value;
}

/* `reprod plan`: for each world size W, the per-device batch G / W and the accumulation
 * steps (G / W) / M, when they divide evenly; otherwise say why that W cannot keep G. */
static int plan(int argc, char **argv)
{
    long global = 0, micro = 0;
    const char *sizes = "1,2,4,8";
    for (int i = 0; i < argc; i += 2) {
        const char *option = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(option, "--global-batch") == 0)
            global = positive(option, value);
        else if (strcmp(option, "--micro-batch") == 0)
            micro = positive(option, value);
        else if (strcmp(option, "--world-sizes") == 0 && value)
            sizes = value;
        else
            return usage();
    }
    if (!global || !micro) return usage();
    printf("global batch %ld, micro-batch %ld per device per step\n", global, micro);
    printf("%10s %18s %20s\n", "world size", "per-device batch", "accumulation steps");
    int impossible = 0;
    char *copy = strdup(sizes);
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ",")) {
        long world = positive("--world-sizes", item);
        if (global % world != 0) {
            printf("%10ld   cannot keep the global batch: %ld is not a multiple of %ld\n", world,
                   global, world);
            impossible = 1;
        } else if ((global / world) % micro != 0) {
            printf("%10ld   per-device batch %ld is not a multiple of the micro-batch %ld\n", world,
                   global / world, micro);
            impossible = 1;
        } else {
            printf("%10ld %18ld %20ld\n", world, global / world, global / world / micro);
        }
    }
    free(copy);
    printf("Results match across world sizes when every micro-batch is the same in each layout\n"
           "(same data order, deterministic kernels) and the shim is preloaded.\n");
    return impossible ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    if (strcmp(argv[1], "settings") == 0) return settings();
    if (strcmp(argv[1], "plan") == 0) return plan(argc - 2, argv + 2);
    if (strcmp(argv[1], "diff") == 0) return reprod_diff_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "run") == 0) return reprod_run_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "doctor") == 0) return reprod_doctor_command(argc - 2, argv + 2);
    if (strcmp(argv[1], "version") == 0) {
        printf("reprod %s\n", reprod_version());
        return 0;
    }
    return usage();
}
