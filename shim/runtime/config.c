/* config.c: the REPROD_* settings: one table (name, values, default, help) from which the
 * parser, the unknown-variable check and `reprod settings` come; parsed once per process.
 *
 * Everything is read from the environment the process started with; nothing is re-read per
 * call (the hot paths only load the parsed struct).
 */
#include "runtime/config.h"

#include "common.h"
#include "interpose/launcher.h"
#include "interpose/once.h"
#include "runtime/record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <unistd.h>

extern char **environ;

/* Unknown names within this many edits of a known one get "did you mean" (REPROD_MOD). */
#define MAX_SUGGESTION_DISTANCE 3
/* The longest known name the edit distance handles (the known names are far shorter). */
#define MAX_KNOWN_NAME_LENGTH 63

static const char *const mode_words[] = {"exact", "ordered", "off", "audit", NULL};
static const char *const rounding_words[] = {"nearest", "zero", "up", "down", NULL};
static const char *const route_words[] = {"auto", "exchange", "fixed", NULL};
static const char *const seed_words[] = {"hash", "rank", "shared", "off", NULL};
static const char *const strict_words[] = {"0", "1", NULL};
static const char *const verbose_words[] = {"0", "1", "2", NULL};

/* A word setting's field holds the index of its word: an int, or an enum of int's size. */
_Static_assert(sizeof(enum reprod_mode) == sizeof(int), "REPROD_MODE is stored as an int");
_Static_assert(sizeof(reprod_rounding) == sizeof(int), "REPROD_ROUNDING is stored as an int");
_Static_assert(sizeof(reprod_seed_policy) == sizeof(int), "REPROD_SEED_POLICY: an int");

static void store_word(const struct reprod_setting *setting, struct reprod_config *config,
                       int index)
{
    memcpy((char *)config + setting->word_field, &index, sizeof index);
}

static int load_word(const struct reprod_setting *setting, const struct reprod_config *config)
{
    int index;
    memcpy(&index, (const char *)config + setting->word_field, sizeof index);
    return index;
}

/* Write the "not valid" line for `text` of `setting` into error (the value escaped: it is
 * one line whatever it holds); returns -1. */
static int refuse(const struct reprod_setting *setting, const char *text, char *error,
                  size_t error_bytes)
{
    char allowed[256], shown[1024];
    reprod_setting_allowed(setting, allowed, sizeof allowed);
    snprintf(error, error_bytes, "%s=%s is not valid; allowed values: %s", setting->name,
             reprod_escape_value(text, shown, sizeof shown), allowed);
    return -1;
}

/* REPROD_ENTROPY: an unsigned 64-bit integer, decimal or 0x hexadecimal, and nothing else
 * (strtoull alone would take a sign, blanks and octal). */
static int parse_entropy(const struct reprod_setting *setting, const char *text,
                         struct reprod_config *config, char *error, size_t error_bytes)
{
    int hexadecimal = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *digits = hexadecimal ? text + 2 : text;
    size_t count = strspn(digits, hexadecimal ? "0123456789abcdefABCDEF" : "0123456789");
    if (count == 0 || digits[count] != '\0') return refuse(setting, text, error, error_bytes);
    errno = 0;
    unsigned long long value = strtoull(digits, NULL, hexadecimal ? 16 : 10);
    if (errno) return refuse(setting, text, error, error_bytes);
    config->entropy_set = 1;
    config->entropy = value;
    return 0;
}

static const char *show_entropy(const struct reprod_config *config, char *text, size_t text_bytes)
{
    if (!config->entropy_set) return NULL;
    snprintf(text, text_bytes, "%llu", (unsigned long long)config->entropy);
    return text;
}

/* Copy the path `text` of `setting` into field[0 .. usable_bytes), or say it is too long. */
static int store_path(const struct reprod_setting *setting, const char *text, char *field,
                      size_t usable_bytes, char *error, size_t error_bytes)
{
    if (strlen(text) >= usable_bytes) {
        snprintf(error, error_bytes, "%s is longer than %zu bytes", setting->name,
                 usable_bytes - 1);
        return -1;
    }
    strcpy(field, text);
    return 0;
}

/* REPROD_LOG: a file pattern whose % escapes are %h, %p, %r or %%. */
static int parse_log(const struct reprod_setting *setting, const char *text,
                     struct reprod_config *config, char *error, size_t error_bytes)
{
    for (const char *p = text; *p; p++) {
        if (*p != '%') continue;
        p++;
        if (*p != 'h' && *p != 'p' && *p != 'r' && *p != '%')
            return refuse(setting, text, error, error_bytes);
    }
    return store_path(setting, text, config->log_pattern, sizeof config->log_pattern, error,
                      error_bytes);
}

static const char *show_log(const struct reprod_config *config, char *text, size_t text_bytes)
{
    (void)text, (void)text_bytes;
    return config->log_pattern[0] ? config->log_pattern : NULL;
}

/* REPROD_TRACE: a directory path (created on first use); room is left for the file name. */
static int parse_trace(const struct reprod_setting *setting, const char *text,
                       struct reprod_config *config, char *error, size_t error_bytes)
{
    return store_path(setting, text, config->trace_dir, sizeof config->trace_dir - 32, error,
                      error_bytes);
}

static const char *show_trace(const struct reprod_config *config, char *text, size_t text_bytes)
{
    (void)text, (void)text_bytes;
    return config->trace_dir[0] ? config->trace_dir : NULL;
}

/* REPROD_SCRATCH_MB: a whole number of MiB, 1 to REPROD_SCRATCH_MB_MAX, decimal digits only;
 * leading zeros, any number of them, are accepted, as REPROD_ENTROPY accepts them (0064 and
 * 00000064 are both 64). */
static int parse_scratch(const struct reprod_setting *setting, const char *text,
                         struct reprod_config *config, char *error, size_t error_bytes)
{
    size_t count = strspn(text, "0123456789");
    if (count == 0 || text[count] != '\0') return refuse(setting, text, error, error_bytes);
    const char *significant = text + strspn(text, "0");
    if (strlen(significant) > 7) return refuse(setting, text, error, error_bytes);
    unsigned long value = strtoul(significant, NULL, 10);
    if (value < 1 || value > REPROD_SCRATCH_MB_MAX)
        return refuse(setting, text, error, error_bytes);
    config->scratch_mb = (unsigned)value;
    return 0;
}

static const char *show_scratch(const struct reprod_config *config, char *text, size_t text_bytes)
{
    snprintf(text, text_bytes, "%u", config->scratch_mb);
    return text;
}

#define WORD_FIELD(field) .word_field = offsetof(struct reprod_config, field)

/* The settings in the order of docs/design.md, Settings (a bad value is reported for the
 * first one in it); README.md's table is generated from this one (`make readme`). */
const struct reprod_setting reprod_settings[] = {
    {.name = "REPROD_MODE",
     .words = mode_words,
     WORD_FIELD(mode),
     .default_value = "exact",
     .help = "exact sums; rank-order folds; change nothing at all (reductions, seeds, "
             "entropy); or audit: native sums returned, their distance to the exact sum "
             "recorded"},
    {.name = "REPROD_ROUNDING",
     .words = rounding_words,
     WORD_FIELD(rounding),
     .default_value = "nearest",
     .help = "direction of the one rounding of an exact sum"},
    {.name = "REPROD_STRICT",
     .words = strict_words,
     WORD_FIELD(strict),
     .default_value = "0",
     .help = "1: a float reduction that cannot be made deterministic stops the job"},
    {.name = "REPROD_SEED_POLICY",
     .words = seed_words,
     WORD_FIELD(seed_policy),
     .default_value = "hash",
     .help = "how seeds are re-derived"},
    {.name = "REPROD_ENTROPY",
     .allowed = "an unsigned 64-bit integer, decimal or 0x hexadecimal",
     .default_value = "not pinned",
     .parse = parse_entropy,
     .show = show_entropy,
     .help = "pin getrandom and /dev/urandom to a stream keyed by this value (debugging only)"},
    {.name = "REPROD_LOG",
     .allowed = "a file path whose % escapes are %h (host), %p (pid), %r (rank), %%",
     .default_value = "stderr",
     .names_file = 1,
     .parse = parse_log,
     .show = show_log,
     .help = "where messages go"},
    {.name = "REPROD_VERBOSE",
     .words = verbose_words,
     WORD_FIELD(verbose),
     .default_value = "0",
     .help = "0 warnings only; 1 a summary line per rank at exit; 2 every call"},
    {.name = "REPROD_TRACE",
     .allowed = "a directory",
     .default_value = "no trace",
     .names_file = 1,
     .parse = parse_trace,
     .show = show_trace,
     .help = "write per-rank traces there, for `reprod diff`"},
    {.name = "REPROD_SCRATCH_MB",
     .allowed = "a whole number of MiB, 1 to 1048576",
     .default_value = "64",
     .parse = parse_scratch,
     .show = show_scratch,
     .help = "bound on the device scratch of one NCCL reduction; larger messages go in pieces"},
    {.name = "REPROD_ROUTE",
     .words = route_words,
     WORD_FIELD(route),
     .default_value = "auto",
     .help = "how an exact sum moves: chosen per call from the ranks, size and type (auto); "
             "always the all-to-all exchange; always the library's own integer sums (fixed)"},
};
const size_t reprod_setting_count = REPROD_ARRAY_LENGTH(reprod_settings);

/* Append `item` to the list in text[0 .. text_bytes), which holds `used` bytes, after ", "
 * unless it is the first. Returns the new length (at most text_bytes: cut). */
static size_t append_listed(char *text, size_t text_bytes, size_t used, const char *item)
{
    if (used >= text_bytes) return used;
    int length = snprintf(text + used, text_bytes - used, "%s%s", used ? ", " : "", item);
    return length < 0 ? used : used + (size_t)length;
}

void reprod_setting_allowed(const struct reprod_setting *setting, char *text, size_t text_bytes)
{
    size_t used = 0;
    text[0] = '\0';
    if (!setting->words) {
        append_listed(text, text_bytes, used, setting->allowed);
        return;
    }
    for (int i = 0; setting->words[i]; i++)
        used = append_listed(text, text_bytes, used, setting->words[i]);
}

const char *reprod_setting_show(const struct reprod_setting *setting,
                                const struct reprod_config *config, char *text, size_t text_bytes)
{
    const char *value = setting->words ? setting->words[load_word(setting, config)]
                                       : setting->show(config, text, text_bytes);
    char shown[1024]; /* a path escaped (record.h): one line whatever it holds */
    if (!value)
        snprintf(text, text_bytes, "(%s)", setting->default_value);
    else
        snprintf(text, text_bytes, "%s", reprod_escape_value(value, shown, sizeof shown));
    return text;
}

const char *reprod_mode_name(enum reprod_mode mode)
{
    return (unsigned)mode < 4 ? mode_words[mode] : "?";
}

const char *reprod_rounding_name(reprod_rounding rounding)
{
    return (unsigned)rounding < 4 ? rounding_words[rounding] : "?";
}

const char *reprod_seed_policy_name(reprod_seed_policy policy)
{
    return (unsigned)policy < 4 ? seed_words[policy] : "?";
}

/* The value of `name` in `environment`, or NULL when it is absent or empty (an empty value
 * means "default", as `REPROD_MODE= cmd` is commonly written to unset). */
static const char *lookup(char *const environment[], const char *name)
{
    size_t length = strlen(name);
    for (size_t i = 0; environment && environment[i]; i++) {
        const char *entry = environment[i];
        if (strncmp(entry, name, length) == 0 && entry[length] == '=')
            return entry[length + 1] ? entry + length + 1 : NULL;
    }
    return NULL;
}

/* Set `setting` from its non-empty `text`. Words ignore case. */
static int parse_one(const struct reprod_setting *setting, const char *text,
                     struct reprod_config *config, char *error, size_t error_bytes)
{
    if (!setting->words) return setting->parse(setting, text, config, error, error_bytes);
    for (int i = 0; setting->words[i]; i++) {
        if (strcasecmp(text, setting->words[i]) == 0) {
            store_word(setting, config, i);
            return 0;
        }
    }
    return refuse(setting, text, error, error_bytes);
}

/* reprod_config_parse, leaving out the settings that name a file when `skip_files`. */
static int parse_settings(char *const environment[], int skip_files, struct reprod_config *config,
                          char *error, size_t error_bytes)
{
    memset(config, 0, sizeof *config);
    config->scratch_mb = REPROD_SCRATCH_MB_DEFAULT;
    for (size_t i = 0; i < reprod_setting_count; i++) {
        const struct reprod_setting *setting = &reprod_settings[i];
        if (setting->words) parse_one(setting, setting->default_value, config, error, error_bytes);
        const char *text = lookup(environment, setting->name);
        if (!text || (skip_files && setting->names_file)) continue;
        if (parse_one(setting, text, config, error, error_bytes) != 0) return -1;
    }
    return 0;
}

int reprod_config_parse(char *const environment[], struct reprod_config *config, char *error,
                        size_t error_bytes)
{
    return parse_settings(environment, 0, config, error, error_bytes);
}

/* Levenshtein distance between a[0 .. a_length) and the known name `b`; any length of a. */
static size_t edit_distance(const char *a, size_t a_length, const char *b)
{
    size_t b_length = strlen(b);
    if (b_length > MAX_KNOWN_NAME_LENGTH) return (size_t)-1;
    size_t row[MAX_KNOWN_NAME_LENGTH + 1]; /* distances from a[0 .. i) to each prefix of b */
    for (size_t j = 0; j <= b_length; j++)
        row[j] = j;
    for (size_t i = 1; i <= a_length; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b_length; j++) {
            size_t above = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diagonal + cost;
            if (above + 1 < best) best = above + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[b_length];
}

/* The known name nearest to entry[0 .. length), or NULL when none is within reach. */
static const char *nearest_known(const char *entry, size_t length)
{
    const char *nearest = NULL;
    size_t best = MAX_SUGGESTION_DISTANCE + 1;
    for (size_t k = 0; k < reprod_setting_count; k++) {
        size_t distance = edit_distance(entry, length, reprod_settings[k].name);
        if (distance < best) {
            best = distance;
            nearest = reprod_settings[k].name;
        }
    }
    return nearest;
}

static int is_known(const char *entry, size_t length)
{
    for (size_t k = 0; k < reprod_setting_count; k++)
        if (strlen(reprod_settings[k].name) == length &&
            strncmp(entry, reprod_settings[k].name, length) == 0)
            return 1;
    return 0;
}

int reprod_config_unknown(char *const environment[], size_t *cursor, char *name, size_t name_bytes,
                          const char **nearest)
{
    for (; environment && environment[*cursor]; (*cursor)++) {
        const char *entry = environment[*cursor];
        if (strncmp(entry, "REPROD_", 7) != 0) continue;
        size_t length = strcspn(entry, "=");
        if (is_known(entry, length)) continue;
        snprintf(name, name_bytes, "%.*s", (int)length, entry);
        *nearest = nearest_known(entry, length);
        (*cursor)++;
        return 1;
    }
    return 0;
}

/* Write "reprod: <text>" and a newline to stderr in one write, without stdio (the host's
 * stderr buffer is not ours); one line whatever the text holds (record.h). */
static void write_stderr_line(const char *text)
{
    char line[PATH_MAX + 256];
    size_t length = (size_t)snprintf(line, sizeof line, "reprod: ");
    length += reprod_escape_controls(text, strlen(text), line + length, sizeof line - length - 1);
    line[length++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, length);
    (void)ignored;
}

void reprod_config_warn_unknown(char *const environment[])
{
    char known[256] = "";
    size_t used = 0;
    for (size_t k = 0; k < reprod_setting_count; k++)
        used = append_listed(known, sizeof known, used, reprod_settings[k].name);
    size_t cursor = 0;
    char name[128], shown[512];
    const char *nearest = NULL;
    while (reprod_config_unknown(environment, &cursor, name, sizeof name, &nearest)) {
        char warning[1024];
        reprod_escape_text(name, shown, sizeof shown);
        if (nearest)
            snprintf(warning, sizeof warning, "warning: unknown variable %s; did you mean %s?",
                     shown, nearest);
        else
            snprintf(warning, sizeof warning,
                     "warning: unknown variable %s; no known name is close (known: %s)", shown,
                     known);
        write_stderr_line(warning);
    }
}

/* In a secure-execution process: one line for each setting naming a file that is set, which
 * the parse then leaves out. A setuid program must not write where its caller says. */
static void say_file_settings_ignored(char *const environment[])
{
    for (size_t i = 0; i < reprod_setting_count; i++) {
        if (!reprod_settings[i].names_file || !lookup(environment, reprod_settings[i].name))
            continue;
        char line[256];
        snprintf(line, sizeof line,
                 "%s ignored: this is a setuid or secure-execution process, where no setting "
                 "may name a file; the default applies: %s",
                 reprod_settings[i].name, reprod_settings[i].default_value);
        write_stderr_line(line);
    }
}

/* The defaults until load_config is done: what a call that re-enters while it runs gets. */
static struct reprod_config process_config;
static struct reprod_once config_once = REPROD_ONCE_INIT;

static void load_config(void)
{
    static struct reprod_config loaded;
    char *const no_environment[] = {NULL};
    char error[PATH_MAX + 128];
    parse_settings(no_environment, 0, &process_config, error, sizeof error);
    /* A launcher is left exactly as it is: its settings are not even read (its ranks read
     * them, and a bad one stops them), and nothing is ever written. */
    const char *launcher = reprod_launcher_detect();
    if (launcher) {
        process_config.mode = REPROD_MODE_OFF;
        process_config.verbose = REPROD_VERBOSE_SILENT;
        process_config.launcher = launcher;
        return;
    }
    int secure = getauxval(AT_SECURE) != 0;
    if (parse_settings(environ, secure, &loaded, error, sizeof error) != 0) {
        write_stderr_line(error);
        _exit(2);
    }
    if (secure) say_file_settings_ignored(environ);
    reprod_config_warn_unknown(environ);
    process_config = loaded;
}

const struct reprod_config *reprod_config(void)
{
    reprod_once(&config_once, load_config);
    return &process_config;
}
