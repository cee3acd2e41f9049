/* config.h: the REPROD_* settings (docs/design.md, Settings), read once when the shim loads.
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
    REPROD_MODE_AUDIT = 3,   /* native results returned; their distance to exact recorded */
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
    unsigned scratch_mb;            /* REPROD_SCRATCH_MB: device scratch bound per call (MiB) */
    int route;                      /* REPROD_ROUTE: enum reprod_route_setting (route.h) */
    const char *launcher;           /* non-NULL: this process is that launcher (launcher.h) */
};

/* `verbose` of a launcher: nothing is written, not even a warning. */
#define REPROD_VERBOSE_SILENT (-1)

/* REPROD_SCRATCH_MB's default and upper bound (MiB). */
#define REPROD_SCRATCH_MB_DEFAULT 64
#define REPROD_SCRATCH_MB_MAX     1048576

/* One setting, defined once: the parser, the unknown-variable check and `reprod settings`
 * (README.md's table of settings too, through `make readme`) all read this table. A word
 * setting stores the index of its word in an int-sized field; the others have their own parse
 * and show functions. */
struct reprod_setting {
    const char *name;          /* "REPROD_MODE" */
    const char *const *words;  /* a word setting: its words, NULL-terminated; index = value */
    size_t word_field;         /* a word setting: offsetof its field in struct reprod_config */
    const char *allowed;       /* the other settings: their allowed values, in words */
    const char *default_value; /* what applies when it is unset or empty */
    const char *help;          /* what it does, one line */
    int names_file;            /* names a file or directory: ignored under secure execution */
    /* The other settings: store the non-empty `text` into *config, or write why not (one
     * line) into error and return -1. */
    int (*parse)(const struct reprod_setting *setting, const char *text,
                 struct reprod_config *config, char *error, size_t error_bytes);
    /* The other settings: the value in *config as text in `text`, or NULL when unset. */
    const char *(*show)(const struct reprod_config *config, char *text, size_t text_bytes);
};

extern const struct reprod_setting reprod_settings[];
extern const size_t reprod_setting_count;

/* The allowed values of `setting` as one line ("exact, ordered, off"), in text[0 .. bytes). */
void reprod_setting_allowed(const struct reprod_setting *setting, char *text, size_t text_bytes);

/* The value of `setting` in `config` as one line: its word, its value (escaped, record.h), or
 * "(<default>)" when unset. Returns `text`. */
const char *reprod_setting_show(const struct reprod_setting *setting,
                                const struct reprod_config *config, char *text, size_t text_bytes);

/* The process's settings, parsed on first use (thread-safe; a call that re-enters while this
 * thread parses them gets the defaults). On a bad value it writes one line to stderr and calls
 * _exit(2): it never returns NULL. In a secure-execution process (AT_SECURE: setuid, setgid,
 * capabilities) every setting that names a file is ignored, with one line on stderr each. In
 * a launcher (launcher.h) nothing is read: the shim changes nothing there (mode off), writes
 * nothing (REPROD_VERBOSE_SILENT, no log, no trace, no entropy) and `launcher` names it. */
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
