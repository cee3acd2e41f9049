/* safe_path.h: the shim's own files (REPROD_LOG, REPROD_TRACE) on a machine shared with other
 * users. A path is walked one component at a time from / (or the working directory), each
 * opened relative to the directory before it without following a symbolic link, and every
 * directory on the way must be root's or this user's (the effective uid): no other user can
 * have planted a link there, or swap a directory between the check and the use, since each
 * check is made on the open descriptor that the next step uses.
 */
#ifndef REPROD_SAFE_PATH_H
#define REPROD_SAFE_PATH_H

#include <stddef.h>

/* Open the directory `path` (absolute, or relative to the working directory) for openat (an
 * O_PATH descriptor), creating the components that are missing (mode 0755, as mkdir -p) when
 * `create`. Returns the descriptor, or -1 with the reason in why[0 .. why_bytes): one line
 * naming the part of the path at fault, escaped. */
int reprod_safe_open_directory(const char *path, int create, char *why, size_t why_bytes);

/* Open the file `path` to append to (created 0644 if missing, never truncated), as a log: its
 * directories as above; the file itself not a symbolic link, and either a regular file of this
 * user's with no other name (one hard link) or a character device of root's or this user's
 * (/dev/null, a terminal). Never blocks (a FIFO is refused). Returns the descriptor (blocking,
 * close-on-exec), or -1 with the reason in why. */
int reprod_safe_open_append(const char *path, char *why, size_t why_bytes);

#endif /* REPROD_SAFE_PATH_H */
