/* reprod_tool.h: the subcommands of the `reprod` command that live in their own files, and
 * what they share. */
#ifndef REPROD_TOOL_H
#define REPROD_TOOL_H

#include <stddef.h>

/* `reprod diff <trace-dir-a> <trace-dir-b>`: argv holds the arguments after "diff". */
int reprod_diff_command(int argc, char **argv);

/* `reprod run [options] -- CMD...` (run.c): argv holds the arguments after "run". */
int reprod_run_command(int argc, char **argv);

/* `reprod doctor -- CMD...` (doctor.c). */
int reprod_doctor_command(int argc, char **argv);

/* `reprod cost --ranks N --bytes M --type T ...` (cost.c): the cost model's two lines. */
int reprod_cost_command(int argc, char **argv);

/* The shim beside the reprod binary (its absolute path into path[0 .. path_bytes)): 0, or -1
 * when there is none. */
int reprod_shim_path(char *path, size_t path_bytes);

/* Append the shim to LD_PRELOAD in this process's environment (kept as it is when it is
 * there already). 0, or -1 after a message: also when the shim's path holds a space or a
 * colon, which the loader would split (the command would run without the shim). */
int reprod_preload_shim(void);

/* Check the REPROD_* environment as the shim will at load: 0, or -1 after the shim's message,
 * prefixed "reprod <command>: ". */
int reprod_check_settings(const char *command);

/* execvp(argv) or, when it fails, a message and 127 (not found) or 126. */
int reprod_exec(const char *command, char **argv);

#endif /* REPROD_TOOL_H */
