/* config.h: the REPROD_* settings of DESIGN.md section 4, read once when the shim loads.
 *
 * A bad value stops the process before main with exit status 2 and one line naming the
 * variable, the value and the allowed values.
 */
#ifndef REPROD_CONFIG_H
#define REPROD_CONFIG_H

#include "reprod.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

enum reprod_mode {
    REPROD_MODE_EXACT = 0,   /* exact sum rounded once (default) */
    REPROD_MODE_ORDERED = 1, /* rank-order fold in the type */
    REPROD_MODE_OFF = 2,     /* the shim changes nothing */
};

struct reprod_config {
    enum reprod_mode mode;          /* REPROD_MODE */
    reprod_rounding rounding;       /* REPROD_ROUNDING */
    int strict;                     /* REPROD_STRICT: 1 stops on a non-deterministic pass */
    reprod_seed_policy seed_policy; /* REPROD_SEED_POLICY */
    int entropy_set;                /* REPROD_ENTROPY given */
    uint64_t entropy;               /* its value */
    int verbose;                    /* REPROD_VERBOSE: 0, 1 or 2 */
    char log_pattern[PATH_MAX];     /* REPROD_LOG; empty: stderr */
    char trace_dir[PATH_MAX];       /* REPROD_TRACE; empty: no trace */
};

/* The process's settings, parsed on first use (thread-safe; a call that re-enters while this
 * thread parses them gets the defaults). On a bad value it writes one line to stderr and calls
 * _exit(2): it never returns NULL. In a secure-execution process (AT_SECURE: setuid, setgid,
 * capabilities) every setting that names a file is ignored, with one line on stderr each. */
const struct reprod_config *reprod_config(void);

/* Parse the settings from `environment` (a NULL-terminated "NAME=value" array, like environ)
 * into *config. Returns 0, or -1 with one line (no newline) describing the first bad value in
 * error[0 .. error_bytes). Unknown REPROD_* names are not errors: see reprod_config_unknown. */
int reprod_config_parse(char *const environment[], struct reprod_config *config, char *error,
                        size_t error_bytes);

/* For the first unknown REPROD_* variable from index *cursor of `environment` on, write its
 * name into name[0 .. name_bytes) (cut if longer), set *nearest to the known name nearest to it
 * or to NULL when none is close, and return 1 (advancing *cursor past it); return 0 when there
 * is none left. */
int reprod_config_unknown(char *const environment[], size_t *cursor, char *name, size_t name_bytes,
                          const char **nearest);

/* Write one warning line on stderr for each unknown REPROD_* variable of `environment`. */
void reprod_config_warn_unknown(char *const environment[]);

/* Names for messages. */
const char *reprod_mode_name(enum reprod_mode mode);
const char *reprod_rounding_name(reprod_rounding rounding);
const char *reprod_seed_policy_name(reprod_seed_policy policy);

#endif /* REPROD_CONFIG_H */
