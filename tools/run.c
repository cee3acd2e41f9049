/* run.c: `reprod run [options] -- CMD...`: run CMD with the shim preloaded and the settings
 * given, by exec (CMD's exit status is ours). The shim is the libreprod_shim.so next to the
 * reprod binary; LD_PRELOAD keeps what it held, the shim appended. Also the environment
 * setup `reprod doctor` shares. */
#include "runtime/config.h"
#include "runtime/record.h"
#include "reprod_tool.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static const char run_help[] =
    "usage: reprod run [--mode M] [--rounding R] [--seed-policy P] [--trace DIR] [--verbose [N]]\n"
    "                  [--] CMD [ARGS...]\n"
    "Run CMD with the shim preloaded: LD_PRELOAD gets the libreprod_shim.so next to this\n"
    "reprod binary appended (what it held is kept), the options become REPROD_MODE,\n"
    "REPROD_ROUNDING, REPROD_SEED_POLICY, REPROD_TRACE and REPROD_VERBOSE, and CMD replaces\n"
    "this process (its exit status is returned). A value follows its option (--mode exact) or\n"
    "is joined to it (--mode=exact); --verbose without a number is --verbose 1.\n"
    "Under a launcher, put reprod run after it:\n"
    "    mpirun -np 4 reprod run -- ./solver\n"
    "Exit status: CMD's; 2 for a bad option or value; 126/127 when CMD cannot be run.\n";

int reprod_shim_path(char *path, size_t path_bytes)
{
    char self[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) return -1;
    self[length] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return -1;
    *slash = '\0';
    if ((size_t)snprintf(path, path_bytes, "%s/libreprod_shim.so", self) >= path_bytes) return -1;
    return access(path, R_OK) == 0 ? 0 : -1;
}

int reprod_preload_shim(void)
{
    char shim[PATH_MAX];
    if (reprod_shim_path(shim, sizeof shim) != 0) {
        fprintf(stderr, "reprod: no libreprod_shim.so beside the reprod binary (build it: make)\n");
        return -1;
    }
    /* The loader splits LD_PRELOAD at spaces and colons and skips the pieces it cannot open:
     * the command would run without the shim, and say nothing about it. */
    const char *split = strpbrk(shim, " :");
    if (split) {
        fprintf(stderr,
                "reprod: the shim's path %s contains %s, where the loader splits LD_PRELOAD: the "
                "command would run without the shim; move the build to a path without spaces or "
                "colons\n",
                shim, *split == ' ' ? "a space" : "a colon");
        return -1;
    }
    const char *old = getenv("LD_PRELOAD");
    if (old && *old) {
        /* Already there (a nested reprod run, or the user's own): keep the list as it is. */
        size_t length = strlen(shim);
        for (const char *p = strstr(old, shim); p; p = strstr(p + 1, shim))
            if ((p == old || p[-1] == ':' || p[-1] == ' ') &&
                (p[length] == '\0' || p[length] == ':' || p[length] == ' '))
                return 0;
        size_t bytes = strlen(old) + length + 2;
        char *joined = malloc(bytes);
        if (!joined) return -1;
        snprintf(joined, bytes, "%s:%s", old, shim);
        setenv("LD_PRELOAD", joined, 1);
        free(joined);
        return 0;
    }
    setenv("LD_PRELOAD", shim, 1);
    return 0;
}

int reprod_check_settings(const char *command)
{
    struct reprod_config config;
    char error[PATH_MAX + 128];
    if (reprod_config_parse(environ, &config, error, sizeof error) == 0) return 0;
    fprintf(stderr, "reprod %s: %s\n", command, error);
    return -1;
}

int reprod_exec(const char *command, char **argv)
{
    execvp(argv[0], argv);
    int status = errno == ENOENT ? 127 : 126;
    fprintf(stderr, "reprod %s: cannot run %s: %s\n", command, argv[0], strerror(errno));
    return status;
}

/* Set `variable` from an option's value; a relative trace directory is made absolute (the
 * ranks of a job may start elsewhere). */
static int set_option(const char *variable, const char *value)
{
    char absolute[PATH_MAX];
    if (strcmp(variable, "REPROD_TRACE") == 0 && value[0] != '/' && getcwd(absolute, sizeof absolute) &&
        strlen(absolute) + strlen(value) + 2 < sizeof absolute) {
        strcat(absolute, "/");
        strcat(absolute, value);
        value = absolute;
    }
    return setenv(variable, value, 1);
}

int reprod_run_command(int argc, char **argv)
{
    static const char *const options[][2] = {
        {"--mode", "REPROD_MODE"},       {"--rounding", "REPROD_ROUNDING"},
        {"--seed-policy", "REPROD_SEED_POLICY"}, {"--trace", "REPROD_TRACE"},
        {"--verbose", "REPROD_VERBOSE"},
    };
    int i = 0;
    while (i < argc) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(run_help, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strncmp(argv[i], "--", 2) != 0) break;
        /* --option=value, or --option value where the value is not itself an option (nor the
         * "--" that ends them): `--verbose -- cmd` must not set REPROD_VERBOSE=--. */
        const char *equals = strchr(argv[i], '=');
        size_t name_length = equals ? (size_t)(equals - argv[i]) : strlen(argv[i]);
        size_t k = 0, known = sizeof options / sizeof options[0];
        while (k < known && (strlen(options[k][0]) != name_length ||
                             strncmp(argv[i], options[k][0], name_length) != 0))
            k++;
        char shown[256];
        if (k == known) {
            fprintf(stderr, "reprod run: %s is not an option\n%s",
                    reprod_escape_value(argv[i], shown, sizeof shown), run_help);
            return 2;
        }
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        int separate = !equals && next && strncmp(next, "--", 2) != 0;
        const char *value = equals ? equals + 1 : separate ? next : NULL;
        if (!equals && strcmp(options[k][1], "REPROD_VERBOSE") == 0 &&
            (!separate || next[strspn(next, "0123456789")] != '\0'))
            value = "1", separate = 0; /* --verbose alone, before an option or the command */
        if (!value) {
            fprintf(stderr, "reprod run: %s needs a value (%s VALUE or %s=VALUE)\n%s",
                    options[k][0], options[k][0], options[k][0], run_help);
            return 2;
        }
        set_option(options[k][1], value);
        i += separate ? 2 : 1;
    }
    if (i >= argc) {
        fprintf(stderr, "reprod run: no command\n%s", run_help);
        return 2;
    }
    if (reprod_check_settings("run") != 0 || reprod_preload_shim() != 0) return 2;
    return reprod_exec("run", argv + i);
}
