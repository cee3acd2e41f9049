/* log.h: the shim's messages, to REPROD_LOG (a file pattern) or stderr.
 *
 * Every line starts with "reprod[<rank>]: " and is one line, whatever a value holds (record.h).
 * Warnings are always written; info lines need REPROD_VERBOSE >= 1 and debug lines (one per
 * intercepted call) REPROD_VERBOSE >= 2.
 */
#ifndef REPROD_LOG_H
#define REPROD_LOG_H

enum reprod_log_level {
    REPROD_LOG_ERROR = 0, /* the job is about to stop */
    REPROD_LOG_WARN = 0,  /* something the user should know; always shown */
    REPROD_LOG_INFO = 1,  /* summaries; REPROD_VERBOSE >= 1 */
    REPROD_LOG_DEBUG = 2, /* every call; REPROD_VERBOSE >= 2 */
};

/* 1 when a message of `level` would be written: test it before building an expensive one. */
int reprod_log_enabled(enum reprod_log_level level);

/* Write one line (printf format, no trailing newline needed) if `level` is enabled. A value
 * from outside the shim (a path, a setting, a name) is passed through reprod_escape_text
 * (record.h) first; whatever control character is left in the line is escaped here, so that a
 * message is always one line. */
void reprod_log(enum reprod_log_level level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Write one line as reprod_log does, but to stderr and whatever the settings say: a warning
 * about the log itself, or one that a silent process (a launcher) must still give. */
void reprod_log_stderr(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Forget the open log file, so that the next line reopens it (the fork child: %p changed). */
void reprod_log_reset_after_fork(void);

#endif /* REPROD_LOG_H */
