/* launcher.c: the launchers and daemons the shim leaves alone (launcher.h), recognised by the
 * program the process runs, never by a guess from its environment (a launcher started inside a
 * rank inherits the rank's variables).
 *
 * Names are compared whole, after links are resolved: mpirun-wrapper, my_orted or srun.sh are
 * programs like any other, and so is a link named srun to another program. The cost is one
 * readlink per process, and for a Python interpreter one read of its command line.
 */
#include "interpose/launcher.h"

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Programs that start or host ranks and are never one (docs/design.md, "Launchers"). */
static const char *const launcher_executables[] = {
    "mpiexec.hydra", "hydra_pmi_proxy", "pmi_proxy", /* Hydra: MPICH, MVAPICH, Intel MPI */
    "orterun",       "orted",                        /* Open MPI 4 (mpirun links to orterun) */
    "mpirun",        "mpiexec",                      /* Open MPI 5's own, which exec prterun */
    "prterun",       "prted",           "prte",      /* Open MPI 5 (PRRTE) */
    "srun",          "slurmstepd",                   /* Slurm */
};
/* torchrun's agent (PyTorch's elastic launcher), a Python program: its script's name, or the
 * modules `python -m` runs it as. Its workers are started by exec: they are not the agent. */
static const char *const launcher_scripts[] = {"torchrun"};
static const char *const launcher_modules[] = {"torch.distributed.run", "torch.distributed.launch"};

#define COMMAND_LINE_BYTES     4096 /* the options before a script or module fit easily */
#define COMMAND_LINE_ARGUMENTS 64

static const char *last_component(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The entry of table[0 .. count) equal to `name`, or NULL. */
static const char *find(const char *name, const char *const table[], size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, table[i]) == 0) return table[i];
    return NULL;
}

static int is_python(const char *executable)
{
    return strncmp(last_component(executable), "python", 6) == 0;
}

/* What a Python command line runs: the module after -m (*is_module = 1), the script (or "-",
 * stdin), or NULL for -c and for none. The interpreter's options before it are skipped as
 * CPython reads them: flags may be combined (-um), -W and -X take a value (attached or the next
 * argument), so does --check-hash-based-pycs, and "--" ends the options. */
static const char *python_target(int argc, const char *const argv[], int *is_module)
{
    *is_module = 0;
    for (int i = 1; i < argc; i++) {
        const char *argument = argv[i];
        if (argument[0] != '-' || argument[1] == '\0') return argument;
        if (strcmp(argument, "--") == 0) return i + 1 < argc ? argv[i + 1] : NULL;
        if (argument[1] == '-') {
            if (strcmp(argument, "--check-hash-based-pycs") == 0) i++;
            continue;
        }
        for (const char *c = argument + 1; *c; c++) {
            if (*c == 'c') return NULL;
            if (*c == 'm') {
                *is_module = 1;
                return c[1] ? c + 1 : i + 1 < argc ? argv[i + 1] : NULL;
            }
            if (*c == 'W' || *c == 'X') {
                if (!c[1]) i++;
                break;
            }
        }
    }
    return NULL;
}

const char *reprod_launcher_classify(const char *executable, int argc, const char *const argv[])
{
    const char *launcher = find(last_component(executable), launcher_executables,
                                REPROD_ARRAY_LENGTH(launcher_executables));
    if (launcher || !is_python(executable)) return launcher;
    int is_module;
    const char *target = python_target(argc, argv, &is_module);
    if (!target) return NULL;
    if (is_module) return find(target, launcher_modules, REPROD_ARRAY_LENGTH(launcher_modules));
    return find(last_component(target), launcher_scripts, REPROD_ARRAY_LENGTH(launcher_scripts));
}

/* Split /proc/self/cmdline (arguments ended by NUL) into argv[0 .. most) over text; an
 * argument cut by the end of text is left out. Returns the count, 0 when it cannot be read. */
static int read_command_line(char *text, size_t text_bytes, const char *argv[], int most)
{
    long fd = syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t used = 0;
    while (used < text_bytes) {
        long got = syscall(SYS_read, (int)fd, text + used, text_bytes - used);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        used += (size_t)got;
    }
    syscall(SYS_close, (int)fd);
    int argc = 0;
    for (size_t start = 0; start < used && argc < most;) {
        const char *end = memchr(text + start, '\0', used - start);
        if (!end) break;
        argv[argc++] = text + start;
        start = (size_t)(end - text) + 1;
    }
    return argc;
}

const char *reprod_launcher_detect(void)
{
    int saved_errno = errno; /* asked from inside a host's call: leave its errno alone */
    char executable[PATH_MAX];
    const char *launcher;
    long length = syscall(SYS_readlink, "/proc/self/exe", executable, sizeof executable - 1);
    if (length <= 0) {
        launcher = reprod_launcher_classify(program_invocation_name, 0, NULL);
    } else {
        executable[length] = '\0';
        char text[COMMAND_LINE_BYTES];
        const char *argv[COMMAND_LINE_ARGUMENTS];
        int argc = is_python(executable)
                       ? read_command_line(text, sizeof text, argv, COMMAND_LINE_ARGUMENTS)
                       : 0;
        launcher = reprod_launcher_classify(executable, argc, argv);
    }
    errno = saved_errno;
    return launcher;
}
