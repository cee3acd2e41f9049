/* launcher.h: whether this process is a job launcher or one of its daemons (mpirun, Hydra's
 * proxy, orted, srun, torchrun's agent), which the shim leaves exactly as it is.
 *
 * A launcher preloaded with the shim (`LD_PRELOAD=... mpirun ...`) passes LD_PRELOAD on to
 * the ranks it starts; itself, it must not be changed: no seed re-derived, no entropy pinned,
 * no file, no count, no output (docs/design.md, "Launchers"). reprod_config() asks once, at load.
 */
#ifndef REPROD_LAUNCHER_H
#define REPROD_LAUNCHER_H

/* The launcher this process runs ("mpiexec.hydra", "orted", "torchrun"), or NULL. Read from
 * /proc/self/exe (links resolved: mpirun.mpich is mpiexec.hydra) and, for a Python
 * interpreter, /proc/self/cmdline; where /proc cannot be read, from argv[0]. System calls
 * only: no hook, no allocation, no stdio. */
const char *reprod_launcher_detect(void);

/* The rule behind it: `executable` is the program the process runs (a path; its last
 * component is compared whole with the launchers' names), argv[0 .. argc) its command line
 * (read only for a Python interpreter: torchrun's agent is `python .../torchrun ...` or
 * `python -m torch.distributed.run|launch ...`). Returns the launcher's name (a string
 * constant) or NULL. */
const char *reprod_launcher_classify(const char *executable, int argc, const char *const argv[]);

#endif /* REPROD_LAUNCHER_H */
