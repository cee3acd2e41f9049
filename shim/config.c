/* config.c: parse and validate the REPROD_* environment once per process.
 *
 * Everything is read from the environment the process started with; nothing is re-read per
 * call (the hot paths only load the parsed struct).
 */
#include "config.h"

#include "common.h"
#include "once.h"

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

/* A variable whose value is one word of a fixed set. */
struct word_setting {
    const char *variable;
    const char *const *words; /* NULL-terminated; index = the enum value */
    const char *allowed;      /* for the error message */
};

static const char *const mode_words[] = {"exact", "ordered", "off", NULL};
static const char *const rounding_words[] = {"nearest", "zero", "up", "down", NULL};
static const char *const seed_words[] = {"hash", "rank", "shared", "off", NULL};
static const char *const strict_words[] = {"0", "1", NULL};
static const char *const verbose_words[] = {"0", "1", "2", NULL};

static const struct word_setting mode_setting = {"REPROD_MODE", mode_words, "exact, ordered, off"};
static const struct word_setting rounding_setting = {"REPROD_ROUNDING", rounding_words,
                                                     "nearest, zero, up, down"};
static const struct word_setting seed_setting = {"REPROD_SEED_POLICY", seed_words,
                                                 "hash, rank, shared, off"};
static const struct word_setting strict_setting = {"REPROD_STRICT", strict_words, "0, 1"};
static const struct word_setting verbose_setting = {"REPROD_VERBOSE", verbose_words, "0, 1, 2"};

/* Every variable the shim knows, for the "did you mean" warning. */
static const char *const known_variables[] = {
    "REPROD_MODE",    "REPROD_ROUNDING", "REPROD_STRICT",  "REPROD_SEED_POLICY",
    "REPROD_ENTROPY", "REPROD_LOG",      "REPROD_VERBOSE", "REPROD_TRACE",
};

const char *reprod_mode_name(enum reprod_mode mode)
{
    return (unsigned)mode < 3 ? mode_words[mode] : "?";
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

/* Parse a word setting into *value (unchanged when absent). Case is ignored. */
static int parse_word(char *const environment[], const struct word_setting *setting, int *value,
                      char *error, size_t error_bytes)
{
    const char *text = lookup(environment, setting->variable);
    if (!text) return 0;
    for (int i = 0; setting->words[i]; i++) {
        if (strcasecmp(text, setting->words[i]) == 0) {
            *value = i;
            return 0;
        }
    }
    snprintf(error, error_bytes, "%s=%s is not valid; allowed values: %s", setting->variable, text,
             setting->allowed);
    return -1;
}

/* Parse REPROD_ENTROPY: an unsigned 64-bit integer, decimal or 0x hexadecimal, and nothing
 * else (strtoull alone would take a sign, blanks and octal). */
static int parse_entropy(char *const environment[], struct reprod_config *config, char *error,
                         size_t error_bytes)
{
    const char *text = lookup(environment, "REPROD_ENTROPY");
    if (!text) return 0;
    int hexadecimal = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *digits = hexadecimal ? text + 2 : text;
    size_t count = strspn(digits, hexadecimal ? "0123456789abcdefABCDEF" : "0123456789");
    errno = 0;
    unsigned long long value = count ? strtoull(digits, NULL, hexadecimal ? 16 : 10) : 0;
    if (count == 0 || digits[count] != '\0' || errno) {
        snprintf(error, error_bytes,
                 "REPROD_ENTROPY=%s is not valid; allowed values: an unsigned 64-bit integer, "
                 "decimal or 0x hexadecimal",
                 text);
        return -1;
    }
    config->entropy_set = 1;
    config->entropy = value;
    return 0;
}

/* Parse REPROD_LOG: a file pattern whose % escapes are %h, %p, %r or %%. */
static int parse_log(char *const environment[], struct reprod_config *config, char *error,
                     size_t error_bytes)
{
    const char *text = lookup(environment, "REPROD_LOG");
    if (!text) return 0;
    for (const char *p = text; *p; p++) {
        if (*p != '%') continue;
        p++;
        if (*p != 'h' && *p != 'p' && *p != 'r' && *p != '%') {
            snprintf(error, error_bytes,
                     "REPROD_LOG=%s is not valid; allowed values: a file path whose %% escapes "
                     "are %%h (host), %%p (pid), %%r (rank), %%%%",
                     text);
            return -1;
        }
    }
    if (strlen(text) >= sizeof config->log_pattern) {
        snprintf(error, error_bytes, "REPROD_LOG is longer than %zu bytes",
                 sizeof config->log_pattern - 1);
        return -1;
    }
    strcpy(config->log_pattern, text);
    return 0;
}

/* Parse REPROD_TRACE: a directory path (created on first use). */
static int parse_trace(char *const environment[], struct reprod_config *config, char *error,
                       size_t error_bytes)
{
    const char *text = lookup(environment, "REPROD_TRACE");
    if (!text) return 0;
    if (strlen(text) >= sizeof config->trace_dir - 32) {
        snprintf(error, error_bytes, "REPROD_TRACE is longer than %zu bytes",
                 sizeof config->trace_dir - 33);
        return -1;
    }
    strcpy(config->trace_dir, text);
    return 0;
}

/* reprod_config_parse, leaving out the settings that name a file when `skip_files`. */
static int parse_settings(char *const environment[], int skip_files, struct reprod_config *config,
                          char *error, size_t error_bytes)
{
    memset(config, 0, sizeof *config);
    config->mode = REPROD_MODE_EXACT;
    config->rounding = REPROD_ROUND_NEAREST;
    config->seed_policy = REPROD_SEED_HASH;

    int mode = config->mode, rounding = config->rounding, policy = config->seed_policy;
    if (parse_word(environment, &mode_setting, &mode, error, error_bytes) ||
        parse_word(environment, &rounding_setting, &rounding, error, error_bytes) ||
        parse_word(environment, &strict_setting, &config->strict, error, error_bytes) ||
        parse_word(environment, &seed_setting, &policy, error, error_bytes) ||
        parse_word(environment, &verbose_setting, &config->verbose, error, error_bytes) ||
        parse_entropy(environment, config, error, error_bytes) ||
        (!skip_files && parse_log(environment, config, error, error_bytes)) ||
        (!skip_files && parse_trace(environment, config, error, error_bytes)))
        return -1;
    config->mode = (enum reprod_mode)mode;
    config->rounding = (reprod_rounding)rounding;
    config->seed_policy = (reprod_seed_policy)policy;
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
    for (size_t k = 0; k < REPROD_ARRAY_LENGTH(known_variables); k++) {
        size_t distance = edit_distance(entry, length, known_variables[k]);
        if (distance < best) {
            best = distance;
            nearest = known_variables[k];
        }
    }
    return nearest;
}

static int is_known(const char *entry, size_t length)
{
    for (size_t k = 0; k < REPROD_ARRAY_LENGTH(known_variables); k++)
        if (strlen(known_variables[k]) == length && strncmp(entry, known_variables[k], length) == 0)
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

/* The defaults until load_config is done: what a call that re-enters while it runs gets. */
static struct reprod_config process_config;
static struct reprod_once config_once = REPROD_ONCE_INIT;

/* Write "reprod: <text>" and a newline to stderr in one write, without stdio (the host's
 * stderr buffer is not ours). */
static void write_stderr_line(const char *text)
{
    char line[PATH_MAX + 256];
    int length = snprintf(line, sizeof line, "reprod: %s\n", text);
    if (length < 0) return;
    if ((size_t)length >= sizeof line) length = sizeof line - 1;
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)length);
    (void)ignored;
}

/* Append `item` to the list in text[0 .. text_bytes), which holds `used` bytes, after ", "
 * unless it is the first. Returns the new length (at most text_bytes: cut). */
static size_t append_listed(char *text, size_t text_bytes, size_t used, const char *item)
{
    if (used >= text_bytes) return used;
    int length = snprintf(text + used, text_bytes - used, "%s%s", used ? ", " : "", item);
    return length < 0 ? used : used + (size_t)length;
}

void reprod_config_warn_unknown(char *const environment[])
{
    char known[256] = "";
    size_t used = 0;
    for (size_t k = 0; k < REPROD_ARRAY_LENGTH(known_variables); k++)
        used = append_listed(known, sizeof known, used, known_variables[k]);
    size_t cursor = 0;
    char name[128];
    const char *nearest = NULL;
    while (reprod_config_unknown(environment, &cursor, name, sizeof name, &nearest)) {
        char warning[512];
        if (nearest)
            snprintf(warning, sizeof warning, "warning: unknown variable %s; did you mean %s?",
                     name, nearest);
        else
            snprintf(warning, sizeof warning,
                     "warning: unknown variable %s; no known name is close (known: %s)", name,
                     known);
        write_stderr_line(warning);
    }
}

/* In a secure-execution process: one line for each setting naming a file that is set, which
 * the parse then leaves out. A setuid program must not write where its caller says. */
static void say_file_settings_ignored(char *const environment[])
{
    static const struct {
        const char *name, *default_value;
    } file_settings[] = {{"REPROD_LOG", "stderr"}, {"REPROD_TRACE", "no trace"}};
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(file_settings); i++) {
        if (!lookup(environment, file_settings[i].name)) continue;
        char line[256];
        snprintf(line, sizeof line,
                 "%s ignored: this is a setuid or secure-execution process, where no setting "
                 "may name a file; the default applies: %s",
                 file_settings[i].name, file_settings[i].default_value);
        write_stderr_line(line);
    }
}

static void load_config(void)
{
    static struct reprod_config loaded;
    char *const no_environment[] = {NULL};
    char error[PATH_MAX + 128];
    reprod_config_parse(no_environment, &process_config, error, sizeof error);
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
