/* reprod_tool.h: the subcommands of the `reprod` command that live in their own files. */
#ifndef REPROD_TOOL_H
#define REPROD_TOOL_H

/* `reprod diff <trace-dir-a> <trace-dir-b>`: argv holds the arguments after "diff". */
int reprod_diff_command(int argc, char **argv);

#endif /* REPROD_TOOL_H */
