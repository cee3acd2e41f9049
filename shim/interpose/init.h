/* init.h: the shim's lifecycle: load (constructor), fork, exit. */
#ifndef REPROD_INIT_H
#define REPROD_INIT_H

/* Run the process-wide initialisation once (config, rank from the environment, fork and exit
 * handlers). The constructor calls it; a hook that runs earlier (from another library's
 * constructor) calls it too. Cheap after the first call. A call that re-enters while this
 * thread runs it returns at once, before it is done (once.h). */
void reprod_init(void);

/* Functions a module wants called in the child after fork(), after the shim's own. At most
 * a handful; registered once, never removed. */
void reprod_init_on_fork_child(void (*handler)(void));

/* Functions a module wants called when the process exits (before the summary). */
void reprod_init_on_exit(void (*handler)(void));

#endif /* REPROD_INIT_H */
