/* log.c: one line per message, written with a single write(2) so that lines of several
 * threads or ranks sharing a file do not interleave, and always one line: whatever a value
 * holds, a newline or a terminal control reaches the log only escaped (record.h). The
 * REPROD_LOG file is opened once, on the first line, through safe_path.h (no symbolic link, no
 * other user's directory or file) and without truncating it. */
#include "runtime/log.h"

#include "runtime/config.h"
#include "interpose/guard.h"
#include "interpose/once.h"
#include "runtime/rank.h"
#include "runtime/record.h"
#include "runtime/safe_path.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct reprod_once open_once = REPROD_ONCE_INIT;
static int log_fd = STDERR_FILENO; /* the REPROD_LOG file once open_once has run */

int reprod_log_enabled(enum reprod_log_level level)
{
    return (int)level <= reprod_config()->verbose;
}

/* The names REPROD_LOG may give the process's own stderr by: links, which are otherwise never
 * followed, to a descriptor the process has already. */
static const char *const stderr_names[] = {"/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"};

/* Expand %h, %p, %r and %% of `pattern` into `path`. Returns 0, or -1 with the reason in why:
 * it does not fit, or the host name could add or leave a directory ("/", or empty or dots
 * alone). */
static int expand_pattern(const char *pattern, char *path, size_t path_bytes, char *why,
                          size_t why_bytes)
{
    size_t used = 0;
    for (const char *p = pattern; *p; p++) {
        char piece[256];
        if (*p == '%' && p[1]) {
            p++;
            if (*p == 'h') {
                if (gethostname(piece, sizeof piece) != 0) strcpy(piece, "unknown-host");
                piece[sizeof piece - 1] = '\0';
                /* With the pattern's own characters around it ("x/.%h./y"), an empty host name
                 * or one of dots alone could still make "." or "..": refused too. */
                if (strchr(piece, '/') || strspn(piece, ".") == strlen(piece)) {
                    char name[256];
                    snprintf(why, why_bytes,
                             "the host name %s (%%h) would add or leave a directory",
                             reprod_escape_text(piece, name, sizeof name));
                    return -1;
                }
            } else if (*p == 'p') {
                snprintf(piece, sizeof piece, "%ld", (long)getpid());
            } else if (*p == 'r') {
                snprintf(piece, sizeof piece, "%d", reprod_rank());
            } else {
                snprintf(piece, sizeof piece, "%c", *p);
            }
        } else {
            snprintf(piece, sizeof piece, "%c", *p);
        }
        size_t length = strlen(piece);
        if (used + length + 1 > path_bytes) {
            snprintf(why, why_bytes, "it expands to more than %zu bytes", path_bytes - 1);
            return -1;
        }
        memcpy(path + used, piece, length);
        used += length;
    }
    path[used] = '\0';
    return 0;
}

/* Write "reprod[<rank>]: <message>\n" to `fd` in one write, the message's control characters
 * escaped: values should have been escaped where they were formatted (reprod_escape_text); a
 * value that was not can still not end the line or start another. */
static void write_line(int fd, const char *format, va_list arguments)
{
    char message[2048], line[2048];
    int length = vsnprintf(message, sizeof message, format, arguments);
    if (length < 0) return;
    if ((size_t)length >= sizeof message) length = (int)sizeof message - 1;
    int used = snprintf(line, sizeof line, "reprod[%d]: ", reprod_rank());
    used += (int)reprod_escape_controls(message, (size_t)length, line + used,
                                        sizeof line - (size_t)used - 1);
    line[used++] = '\n';
    reprod_guard_enter();
    ssize_t ignored = write(fd, line, (size_t)used);
    reprod_guard_leave();
    (void)ignored;
}

void reprod_log_stderr(const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    write_line(STDERR_FILENO, format, arguments);
    va_end(arguments);
}

/* open_once's initialiser (it runs inside the guard: open and close are the real ones). The
 * log file as safe_path.h allows it (a file of this user's, or a device), or stderr after a
 * warning. */
static void open_log(void)
{
    const char *pattern = reprod_config()->log_pattern;
    if (!pattern[0]) return;
    for (size_t i = 0; i < sizeof stderr_names / sizeof stderr_names[0]; i++)
        if (strcmp(pattern, stderr_names[i]) == 0) return;
    char path[PATH_MAX], why[1024], shown[1024];
    int fd = -1;
    if (expand_pattern(pattern, path, sizeof path, why, sizeof why) == 0)
        fd = reprod_safe_open_append(path, why, sizeof why);
    else
        snprintf(path, sizeof path, "%s", pattern);
    if (fd < 0)
        reprod_log_stderr("warning: REPROD_LOG: cannot use %s: %s; messages go to stderr",
                          reprod_escape_text(path, shown, sizeof shown), why);
    log_fd = fd >= 0 ? fd : STDERR_FILENO;
}

/* The descriptor to write to: the REPROD_LOG file, opened on first use, or stderr (also for a
 * line written while this thread is opening it). */
static int log_descriptor(void)
{
    if (!reprod_once(&open_once, open_log)) return STDERR_FILENO;
    return log_fd;
}

void reprod_log(enum reprod_log_level level, const char *format, ...)
{
    if (!reprod_log_enabled(level)) return;
    int fd = log_descriptor();
    va_list arguments;
    va_start(arguments, format);
    write_line(fd, format, arguments);
    va_end(arguments);
}

void reprod_log_reset_after_fork(void)
{
    /* A file named after the pid is the parent's: the child opens its own on its first line. */
    if (log_fd > STDERR_FILENO && strstr(reprod_config()->log_pattern, "%p")) {
        reprod_guard_enter();
        close(log_fd);
        reprod_guard_leave();
        log_fd = STDERR_FILENO;
        reprod_once_reset(&open_once);
    }
}
