/* test_launcher.c: which processes the shim takes for a launcher (shim/interpose/launcher.c): the
 * launchers' executables by their whole name, torchrun's agent by its Python command line,
 * and nothing that merely resembles them. */
#include "interpose/launcher.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define PYTHON "/usr/bin/python3.11"

/* classify(executable, argv...) with the argv given as a NULL-terminated list. */
static const char *classify_line(const char *executable, const char *const *argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return reprod_launcher_classify(executable, argc, argv);
}

#define CLASSIFY(executable, ...)                                                                  \
    classify_line(executable, (const char *const[]){__VA_ARGS__, NULL})

static void expect_launcher(const char *got, const char *want, const char *what)
{
    if (!want)
        cr_expect_null(got, "%s: taken for the launcher %s", what, got ? got : "");
    else
        cr_expect(got && strcmp(got, want) == 0, "%s: %s, expected %s", what,
                  got ? got : "not a launcher", want);
}

Test(launcher, every_listed_executable_is_one_by_its_whole_name)
{
    static const char *const names[] = {
        "mpiexec.hydra", "hydra_pmi_proxy", "pmi_proxy", "orterun", "orted", "mpirun",
        "mpiexec",       "prterun",         "prted",     "prte",    "srun",  "slurmstepd"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/opt/some where/bin/%s", names[i]);
        expect_launcher(reprod_launcher_classify(path, 0, NULL), names[i], path);
        expect_launcher(reprod_launcher_classify(names[i], 0, NULL), names[i], names[i]);
    }
}

Test(launcher, names_that_only_resemble_a_launcher_are_not_one)
{
    static const char *const paths[] = {"/home/u/mpirun-wrapper",
                                        "/home/u/my_orted",
                                        "/home/u/orted2",
                                        "/home/u/srun.sh",
                                        "/mpiexec.hydra.old",
                                        "/home/u/xprterun",
                                        "/home/u/MPIRUN",
                                        "/home/u/Srun",
                                        "/home/u/srun ",
                                        "/usr/bin/torchrun",
                                        "/srun/solver",
                                        "/home/u/mpirun.d/solver",
                                        "/usr/bin/orted (deleted)",
                                        "",
                                        "/"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        expect_launcher(reprod_launcher_classify(paths[i], 0, NULL), NULL, paths[i]);
}

Test(launcher, torchruns_agent_is_python_running_torchrun_or_its_modules)
{
    expect_launcher(CLASSIFY(PYTHON, PYTHON, "/usr/bin/torchrun", "--nproc_per_node", "2", "w.py"),
                    "torchrun", "the torchrun script");
    expect_launcher(CLASSIFY("/venv/bin/python", "python", "torchrun", "w.py"), "torchrun",
                    "a relative torchrun script");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-m", "torch.distributed.run", "w.py"),
                    "torch.distributed.run", "-m torch.distributed.run");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-mtorch.distributed.launch", "w.py"),
                    "torch.distributed.launch", "-mtorch.distributed.launch");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-um", "torch.distributed.run", "w.py"),
                    "torch.distributed.run", "-um (combined flags)");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-X", "dev", "-W", "ignore", "-Xutf8", "-Wd", "-u",
                             "-B", "-m", "torch.distributed.run"),
                    "torch.distributed.run", "options with values before -m");
    expect_launcher(
        CLASSIFY(PYTHON, "python3", "--check-hash-based-pycs", "never", "/usr/local/bin/torchrun"),
        "torchrun", "--check-hash-based-pycs VALUE, then the script");
    expect_launcher(CLASSIFY(PYTHON, "python3", "--", "/usr/bin/torchrun"), "torchrun",
                    "-- then the script");
}

Test(launcher, other_python_programs_are_not_torchruns_agent)
{
    expect_launcher(CLASSIFY(PYTHON, "python3", "-u", "w.py", "--local_rank=0"), NULL,
                    "torchrun's worker");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-c",
                             "from multiprocessing.spawn import spawn_main; spawn_main()",
                             "--multiprocessing-fork"),
                    NULL, "a spawned worker");
    expect_launcher(CLASSIFY(PYTHON, "python3", "train.py", "torchrun"), NULL,
                    "torchrun as the script's argument");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-c", "pass", "-m", "torch.distributed.run"), NULL,
                    "-c, then -m as an argument");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-m", "mypackage", "-m", "torch.distributed.run"),
                    NULL, "another module, then -m as its argument");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-W", "torchrun", "w.py"), NULL,
                    "torchrun as -W's value");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-m", "torch.distributed.runner"), NULL,
                    "-m torch.distributed.runner");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-m", "torch.distributed.elastic.agent"), NULL,
                    "-m torch.distributed.elastic.agent");
    expect_launcher(CLASSIFY(PYTHON, "python3", "/home/u/torchrun.py"), NULL, "torchrun.py");
    expect_launcher(CLASSIFY(PYTHON, "python3", "/home/u/my_torchrun"), NULL, "my_torchrun");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-"), NULL, "stdin");
    expect_launcher(CLASSIFY(PYTHON, "python3", "-m"), NULL, "-m and nothing");
    expect_launcher(reprod_launcher_classify(PYTHON, 0, NULL), NULL, "no command line");
    expect_launcher(CLASSIFY("/bin/bash", "bash", "/usr/bin/torchrun"), NULL,
                    "another interpreter given the torchrun script");
    expect_launcher(CLASSIFY("/bin/sh", "sh", "-m", "torch.distributed.run"), NULL,
                    "another program given -m torch.distributed.run");
}

Test(launcher, this_test_program_is_not_a_launcher)
{
    cr_expect_null(reprod_launcher_detect());
}
