/* safe_path.c: the walk of safe_path.h, one component at a time with openat(O_NOFOLLOW). One
 * mechanism on every kernel (openat2's RESOLVE_NO_SYMLINKS would not check who owns each
 * directory). It runs inside the guard: the shim's own openat is never its own hook's. */
#include "runtime/safe_path.h"

#include "interpose/guard.h"
#include "runtime/record.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path[0 .. length), escaped for a message, into out[0 .. out_bytes) (at most 512 bytes: a
 * longer part is cut, ending in "..."). */
static const char *shown(const char *path, size_t length, char *out, size_t out_bytes)
{
    char part[1024];
    snprintf(part, sizeof part, "%.*s", (int)length, path);
    return reprod_escape_text(part, out, out_bytes);
}

/* 0 when the directory open on `fd` (path[0 .. length), "/" or "." for the start) is one no
 * other user controls; -1 with the reason. */
static int check_directory(int fd, const char *path, size_t length, char *why, size_t why_bytes)
{
    struct stat status;
    char name[512];
    if (fstat(fd, &status) != 0) {
        const char *reason = strerror(errno);
        snprintf(why, why_bytes, "cannot examine %s (%s)", shown(path, length, name, sizeof name),
                 reason);
        return -1;
    }
    if (!S_ISDIR(status.st_mode)) {
        snprintf(why, why_bytes, "%s is not a directory", shown(path, length, name, sizeof name));
        return -1;
    }
    if (status.st_uid != 0 && status.st_uid != geteuid()) {
        snprintf(why, why_bytes,
                 "%s is another user's directory (uid %u), who could change what lies in it",
                 shown(path, length, name, sizeof name), (unsigned)status.st_uid);
        return -1;
    }
    return 0;
}

/* Open the component `name` of the directory `dir` (it ends path[0 .. length)), creating it
 * when it is missing and `create`; its descriptor, or -1 with the reason. */
static int open_component(int dir, const char *name, int create, const char *path, size_t length,
                          char *why, size_t why_bytes)
{
    const int flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    char shown_path[512];
    int fd = openat(dir, name, flags);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(dir, name, 0755) != 0 && errno != EEXIST) {
            const char *reason = strerror(errno);
            snprintf(why, why_bytes, "cannot create %s (%s)",
                     shown(path, length, shown_path, sizeof shown_path), reason);
            return -1;
        }
        fd = openat(dir, name, flags);
    }
    if (fd >= 0) return fd;
    int open_errno = errno;
    struct stat status;
    if (fstatat(dir, name, &status, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(status.st_mode))
        snprintf(why, why_bytes,
                 "%s is a symbolic link, and none is followed (name the directory it points to)",
                 shown(path, length, shown_path, sizeof shown_path));
    else
        snprintf(why, why_bytes, "cannot open %s (%s)",
                 shown(path, length, shown_path, sizeof shown_path), strerror(open_errno));
    return -1;
}

/* Walk `path` from / or the working directory. With `last` (NAME_MAX + 1 bytes), stop before
 * the last component, a file's name, and copy it there. Returns the directory reached (O_PATH),
 * or -1 with why. */
static int walk(const char *path, int create, char *last, char *why, size_t why_bytes)
{
    int absolute = path[0] == '/';
    int dir = open(absolute ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        snprintf(why, why_bytes, "cannot open %s (%s)", absolute ? "/" : "the working directory",
                 strerror(errno));
        return -1;
    }
    if (check_directory(dir, absolute ? "/" : ".", 1, why, why_bytes) != 0) goto refused;
    const char *p = path;
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p) break;
        size_t length = strcspn(p, "/");
        const char *rest = p + length;
        while (*rest == '/')
            rest++;
        char name[NAME_MAX + 1];
        if (length > NAME_MAX) {
            snprintf(why, why_bytes, "a component is longer than %d bytes", NAME_MAX);
            goto refused;
        }
        memcpy(name, p, length);
        name[length] = '\0';
        if (last && !*rest) {
            if (p[length] == '/' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) break;
            memcpy(last, name, length + 1);
            return dir;
        }
        p += length;
        if (strcmp(name, ".") == 0) continue;
        int next = open_component(dir, name, create, path, (size_t)(p - path), why, why_bytes);
        if (next < 0) goto refused;
        close(dir);
        dir = next;
        if (check_directory(dir, path, (size_t)(p - path), why, why_bytes) != 0) goto refused;
    }
    if (!last) return dir;
    snprintf(why, why_bytes, "it names no file");
refused:
    close(dir);
    return -1;
}

int reprod_safe_open_directory(const char *path, int create, char *why, size_t why_bytes)
{
    reprod_guard_enter();
    int dir = walk(path, create, NULL, why, why_bytes);
    reprod_guard_leave();
    return dir;
}

/* 0 when the file open on `fd` is one to append a log to; -1 with the reason. */
static int check_log_file(int fd, char *why, size_t why_bytes)
{
    struct stat status;
    if (fstat(fd, &status) != 0) {
        snprintf(why, why_bytes, "cannot examine it (%s)", strerror(errno));
        return -1;
    }
    if (S_ISREG(status.st_mode)) {
        if (status.st_uid != geteuid()) {
            snprintf(why, why_bytes, "it is another user's file (uid %u)", (unsigned)status.st_uid);
            return -1;
        }
        if (status.st_nlink != 1) {
            snprintf(why, why_bytes, "it has %lu hard links (another name of some other file)",
                     (unsigned long)status.st_nlink);
            return -1;
        }
        return 0;
    }
    if (S_ISCHR(status.st_mode)) {
        if (status.st_uid != 0 && status.st_uid != geteuid()) {
            snprintf(why, why_bytes, "it is another user's device (uid %u)",
                     (unsigned)status.st_uid);
            return -1;
        }
        return 0;
    }
    snprintf(why, why_bytes, "it is not a regular file or a character device");
    return -1;
}

int reprod_safe_open_append(const char *path, char *why, size_t why_bytes)
{
    reprod_guard_enter();
    char name[NAME_MAX + 1];
    int fd = -1, dir = walk(path, 0, name, why, why_bytes);
    if (dir >= 0) {
        fd = openat(dir, name,
                    O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                    0644);
        if (fd < 0 && errno == ELOOP)
            snprintf(why, why_bytes, "it is a symbolic link");
        else if (fd < 0)
            snprintf(why, why_bytes, "cannot open it (%s)", strerror(errno));
        close(dir);
    }
    if (fd >= 0 && check_log_file(fd, why, why_bytes) != 0) {
        close(fd);
        fd = -1;
    }
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : 0;
    if (fd >= 0 && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) {
        snprintf(why, why_bytes, "cannot make it blocking (%s)", strerror(errno));
        close(fd);
        fd = -1;
    }
    reprod_guard_leave();
    return fd;
}
