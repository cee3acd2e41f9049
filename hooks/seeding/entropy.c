/* entropy.c: the sources REPROD_ENTROPY pins: getrandom, getentropy, arc4random*, and the
 * descriptors and streams open on /dev/urandom and /dev/random (open*, fopen*, fdopen, dup*,
 * fcntl F_DUPFD, close, and the reads: read, readv, pread, their _chk forms).
 *
 * Every hook calls the real function first and keeps its result, errors and length; only the
 * bytes it returned are then overwritten from the stream. Errors (EFAULT, EINVAL, EINTR,
 * EAGAIN), partial reads and blocking thus stay those of the kernel. Without REPROD_ENTROPY
 * the open hooks compare a path and the read hooks test one global counter: nothing else.
 *
 * The shim's own calls (its log and trace files, its initialisation: guard.h) pass straight
 * to the real functions and are never tracked or served.
 *
 * A FILE opened by fopen on a device is a fopencookie stream whose reads come from the stream;
 * its _fileno is the real descriptor (tracked), so fileno() works and code that reads that
 * descriptor directly (libstdc++'s filebuf, std::random_device's "/dev/urandom") is served too.
 */
#include "seed/entropy.h"
#include "interpose/guard.h"
#include "interpose/real.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* glibc's fortified entry points: declared here, as no header does without _FORTIFY_SOURCE. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int directory, const char *path, int flags);
int __openat64_2(int directory, const char *path, int flags);
ssize_t __read_chk(int fd, void *buffer, size_t bytes, size_t buffer_bytes);
ssize_t __pread_chk(int fd, void *buffer, size_t bytes, off_t offset, size_t buffer_bytes);
ssize_t __pread64_chk(int fd, void *buffer, size_t bytes, off64_t offset, size_t buffer_bytes);
int fcntl64(int fd, int command, ...);

/* The real functions, looked up when the shim loads: read, close, dup and friends are
 * async-signal-safe, and their first call may come from a signal handler, where dlsym must not
 * run. A call that arrives before the constructor looks its function up itself. */
/* clang-format off */
#define REAL_FUNCTIONS(X)                                                                          \
    REPROD_REAL_AS_HOOK(X, getrandom) REPROD_REAL_AS_HOOK(X, getentropy)                           \
    REPROD_REAL_AS_HOOK(X, arc4random) REPROD_REAL_AS_HOOK(X, arc4random_buf)                      \
    REPROD_REAL_AS_HOOK(X, arc4random_uniform) REPROD_REAL_AS_HOOK(X, open)                        \
    REPROD_REAL_AS_HOOK(X, open64) REPROD_REAL_AS_HOOK(X, openat) REPROD_REAL_AS_HOOK(X, openat64) \
    REPROD_REAL_AS_HOOK(X, __open_2) REPROD_REAL_AS_HOOK(X, __open64_2)                            \
    REPROD_REAL_AS_HOOK(X, __openat_2) REPROD_REAL_AS_HOOK(X, __openat64_2)                        \
    REPROD_REAL_AS_HOOK(X, read) REPROD_REAL_AS_HOOK(X, __read_chk) REPROD_REAL_AS_HOOK(X, pread)  \
    REPROD_REAL_AS_HOOK(X, pread64) REPROD_REAL_AS_HOOK(X, __pread_chk)                            \
    REPROD_REAL_AS_HOOK(X, __pread64_chk) REPROD_REAL_AS_HOOK(X, readv)                            \
    REPROD_REAL_AS_HOOK(X, close) REPROD_REAL_AS_HOOK(X, dup) REPROD_REAL_AS_HOOK(X, dup2)         \
    REPROD_REAL_AS_HOOK(X, dup3) REPROD_REAL_AS_HOOK(X, fcntl) REPROD_REAL_AS_HOOK(X, fcntl64)     \
    REPROD_REAL_AS_HOOK(X, fopen) REPROD_REAL_AS_HOOK(X, fopen64) REPROD_REAL_AS_HOOK(X, fdopen)
/* clang-format on */
struct entropy_sources {
    REPROD_REAL_FIELDS(REAL_FUNCTIONS)
};
REPROD_REAL_TABLE(real_functions, struct entropy_sources, REAL_FUNCTIONS, NULL);

/* The real `name` (NULL if no other object has it). */
#define REAL(name) REPROD_REAL(real_functions, name)

__attribute__((constructor)) static void resolve_real_functions(void)
{
    reprod_real_complete_once(&real_functions.table);
}

/* 1 when REPROD_ENTROPY applies to this call: a call of the shim's own passes straight. */
static int pinning(void)
{
    return !reprod_guard_active() && reprod_entropy_active();
}

/* 1 when a descriptor may be tracked and this call is not the shim's own: the read hooks' one
 * test on their hot path. */
static int watching_descriptors(void)
{
    return REPROD_UNLIKELY(reprod_entropy_any_tracked()) && !reprod_guard_active();
}

/* ---- getrandom, getentropy, arc4random ---- */

REPROD_EXPORT ssize_t getrandom(void *buffer, size_t bytes, unsigned int flags)
{
    __typeof__(&getrandom) real = REAL(getrandom);
    if (!real) return errno = ENOSYS, -1;
    ssize_t done = real(buffer, bytes, flags);
    if (done > 0 && pinning()) reprod_entropy_fill("getrandom", buffer, done);
    return done;
}

REPROD_EXPORT int getentropy(void *buffer, size_t bytes)
{
    __typeof__(&getentropy) real = REAL(getentropy);
    if (!real) return errno = ENOSYS, -1;
    int rc = real(buffer, bytes);
    if (rc == 0 && bytes > 0 && pinning()) reprod_entropy_fill("getentropy", buffer, bytes);
    return rc;
}

REPROD_EXPORT uint32_t arc4random(void)
{
    if (pinning()) return reprod_entropy_next32("arc4random");
    __typeof__(&arc4random) real = REAL(arc4random);
    return real ? real() : 0;
}

REPROD_EXPORT void arc4random_buf(void *buffer, size_t bytes)
{
    if (pinning()) {
        if (bytes > 0) reprod_entropy_fill("arc4random_buf", buffer, bytes);
        return;
    }
    __typeof__(&arc4random_buf) real = REAL(arc4random_buf);
    if (real) real(buffer, bytes);
}

/* Uniform below `upper` without modulo bias: reject the 2^32 mod upper lowest values. */
REPROD_EXPORT uint32_t arc4random_uniform(uint32_t upper)
{
    if (pinning()) {
        if (upper < 2) return 0;
        uint32_t threshold = (uint32_t)-upper % upper;
        for (;;) {
            uint32_t value = reprod_entropy_next32("arc4random_uniform");
            if (value >= threshold) return value % upper;
        }
    }
    __typeof__(&arc4random_uniform) real = REAL(arc4random_uniform);
    return real ? real(upper) : 0;
}

/* ---- opening ---- */

/* O_CREAT and O_TMPFILE take a mode: the only cases where open's third argument exists. */
static int takes_mode(int flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* After an open of `path` returned `fd`: track it when it is a readable descriptor on an
 * entropy device and REPROD_ENTROPY applies. The path test comes first: it is all that an
 * ordinary open pays. */
static int after_open(const char *path, int flags, int fd)
{
    if (fd >= 0 && reprod_entropy_is_device_path(path) && (flags & O_ACCMODE) != O_WRONLY &&
        pinning()) {
        int saved = errno;
        reprod_entropy_track(fd);
        errno = saved;
    }
    return fd;
}

#define OPEN_HOOK(name)                                                                            \
    REPROD_EXPORT int name(const char *path, int flags, ...)                                       \
    {                                                                                              \
        __typeof__(&name) real = REAL(name);                                                       \
        mode_t mode = 0;                                                                           \
        if (takes_mode(flags)) {                                                                   \
            va_list arguments;                                                                     \
            va_start(arguments, flags);                                                            \
            mode = va_arg(arguments, mode_t);                                                      \
            va_end(arguments);                                                                     \
        }                                                                                          \
        if (!real) return errno = ENOSYS, -1;                                                      \
        return after_open(path, flags, real(path, flags, mode));                                   \
    }

#define OPENAT_HOOK(name)                                                                          \
    REPROD_EXPORT int name(int directory, const char *path, int flags, ...)                        \
    {                                                                                              \
        __typeof__(&name) real = REAL(name);                                                       \
        mode_t mode = 0;                                                                           \
        if (takes_mode(flags)) {                                                                   \
            va_list arguments;                                                                     \
            va_start(arguments, flags);                                                            \
            mode = va_arg(arguments, mode_t);                                                      \
            va_end(arguments);                                                                     \
        }                                                                                          \
        if (!real) return errno = ENOSYS, -1;                                                      \
        return after_open(path, flags, real(directory, path, flags, mode));                        \
    }

OPEN_HOOK(open)
OPEN_HOOK(open64)
OPENAT_HOOK(openat)
OPENAT_HOOK(openat64)

REPROD_EXPORT int __open_2(const char *path, int flags)
{
    __typeof__(&__open_2) real = REAL(__open_2);
    if (!real) return errno = ENOSYS, -1;
    return after_open(path, flags, real(path, flags));
}

REPROD_EXPORT int __open64_2(const char *path, int flags)
{
    __typeof__(&__open64_2) real = REAL(__open64_2);
    if (!real) return errno = ENOSYS, -1;
    return after_open(path, flags, real(path, flags));
}

REPROD_EXPORT int __openat_2(int directory, const char *path, int flags)
{
    __typeof__(&__openat_2) real = REAL(__openat_2);
    if (!real) return errno = ENOSYS, -1;
    return after_open(path, flags, real(directory, path, flags));
}

REPROD_EXPORT int __openat64_2(int directory, const char *path, int flags)
{
    __typeof__(&__openat64_2) real = REAL(__openat64_2);
    if (!real) return errno = ENOSYS, -1;
    return after_open(path, flags, real(directory, path, flags));
}

/* ---- reading ---- */

/* After a read of `fd` returned `done` bytes into `buffer`: overwrite them if `fd` is tracked.
 * The first test is the read hooks' whole cost in a process without tracked descriptors. */
static ssize_t after_read(const char *api, int fd, void *buffer, ssize_t done)
{
    if (watching_descriptors() && done > 0) {
        int saved = errno;
        if (reprod_entropy_is_tracked(fd)) reprod_entropy_fill(api, buffer, (size_t)done);
        errno = saved;
    }
    return done;
}

REPROD_EXPORT ssize_t read(int fd, void *buffer, size_t bytes)
{
    __typeof__(&read) real = REAL(read);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_read("read", fd, buffer, real(fd, buffer, bytes));
}

REPROD_EXPORT ssize_t __read_chk(int fd, void *buffer, size_t bytes, size_t buffer_bytes)
{
    __typeof__(&__read_chk) real = REAL(__read_chk);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_read("read", fd, buffer, real(fd, buffer, bytes, buffer_bytes));
}

REPROD_EXPORT ssize_t pread(int fd, void *buffer, size_t bytes, off_t offset)
{
    __typeof__(&pread) real = REAL(pread);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_read("pread", fd, buffer, real(fd, buffer, bytes, offset));
}

REPROD_EXPORT ssize_t pread64(int fd, void *buffer, size_t bytes, off64_t offset)
{
    __typeof__(&pread64) real = REAL(pread64);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_read("pread", fd, buffer, real(fd, buffer, bytes, offset));
}

REPROD_EXPORT ssize_t __pread_chk(int fd, void *buffer, size_t bytes, off_t offset,
                                  size_t buffer_bytes)
{
    __typeof__(&__pread_chk) real = REAL(__pread_chk);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_read("pread", fd, buffer, real(fd, buffer, bytes, offset, buffer_bytes));
}

REPROD_EXPORT ssize_t __pread64_chk(int fd, void *buffer, size_t bytes, off64_t offset,
                                    size_t buffer_bytes)
{
    __typeof__(&__pread64_chk) real = REAL(__pread64_chk);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_read("pread", fd, buffer, real(fd, buffer, bytes, offset, buffer_bytes));
}

REPROD_EXPORT ssize_t readv(int fd, const struct iovec *vectors, int count)
{
    __typeof__(&readv) real = REAL(readv);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    ssize_t done = real(fd, vectors, count);
    if (watching_descriptors() && done > 0) {
        int saved = errno;
        if (reprod_entropy_is_tracked(fd)) {
            size_t left = (size_t)done;
            for (int i = 0; i < count && left > 0; i++) {
                size_t part = vectors[i].iov_len < left ? vectors[i].iov_len : left;
                if (part > 0) reprod_entropy_fill("readv", vectors[i].iov_base, part);
                left -= part;
            }
        }
        errno = saved;
    }
    return done;
}

/* ---- closing and copying descriptors ---- */

REPROD_EXPORT int close(int fd)
{
    __typeof__(&close) real = REAL(close);
    if (watching_descriptors()) {
        int saved = errno;
        reprod_entropy_untrack(fd); /* before: another thread may reuse the number after */
        errno = saved;
    }
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return real(fd);
}

/* After `new_fd` became a copy of `old_fd` (or the call failed with a negative new_fd). */
static int after_copy(int old_fd, int new_fd)
{
    if (new_fd >= 0 && watching_descriptors()) {
        int saved = errno;
        reprod_entropy_copy_tracking(old_fd, new_fd);
        errno = saved;
    }
    return new_fd;
}

REPROD_EXPORT int dup(int fd)
{
    __typeof__(&dup) real = REAL(dup);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_copy(fd, real(fd));
}

REPROD_EXPORT int dup2(int old_fd, int new_fd)
{
    __typeof__(&dup2) real = REAL(dup2);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_copy(old_fd, real(old_fd, new_fd));
}

REPROD_EXPORT int dup3(int old_fd, int new_fd, int flags)
{
    __typeof__(&dup3) real = REAL(dup3);
    if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;
    return after_copy(old_fd, real(old_fd, new_fd, flags));
}

/* fcntl's third argument is an int, a pointer or absent; glibc itself reads it as a pointer
 * and passes it on, as here. Only F_DUPFD and F_DUPFD_CLOEXEC concern the shim. */
#define FCNTL_HOOK(name)                                                                           \
    REPROD_EXPORT int name(int fd, int command, ...)                                               \
    {                                                                                              \
        __typeof__(&name) real = REAL(name);                                                       \
        va_list arguments;                                                                         \
        va_start(arguments, command);                                                              \
        void *argument = va_arg(arguments, void *);                                                \
        va_end(arguments);                                                                         \
        if (REPROD_UNLIKELY(!real)) return errno = ENOSYS, -1;                                     \
        int rc = real(fd, command, argument);                                                      \
        if (command == F_DUPFD || command == F_DUPFD_CLOEXEC) return after_copy(fd, rc);           \
        return rc;                                                                                 \
    }

FCNTL_HOOK(fcntl)
FCNTL_HOOK(fcntl64)

/* ---- stdio streams on the devices ---- */

static ssize_t cookie_read(void *cookie, char *buffer, size_t bytes)
{
    __typeof__(&read) real = REAL(read);
    int fd = (int)(intptr_t)cookie;
    if (!real) return errno = ENOSYS, -1;
    return after_read("fread", fd, buffer, real(fd, buffer, bytes));
}

static ssize_t cookie_write(void *cookie, const char *buffer, size_t bytes)
{
    return write((int)(intptr_t)cookie, buffer, bytes);
}

static int cookie_seek(void *cookie, off64_t *position, int whence)
{
    off64_t reached = lseek64((int)(intptr_t)cookie, *position, whence);
    if (reached < 0) return -1;
    *position = reached;
    return 0;
}

static int cookie_close(void *cookie)
{
    int fd = (int)(intptr_t)cookie;
    __typeof__(&close) real = REAL(close);
    reprod_entropy_untrack(fd);
    if (!real) return errno = ENOSYS, -1;
    return real(fd);
}

/* A stream reading `fd` (tracked) through the cookie functions, or NULL with errno set. */
static FILE *device_stream(int fd, const char *mode)
{
    cookie_io_functions_t functions = {cookie_read, cookie_write, cookie_seek, cookie_close};
    FILE *stream = fopencookie((void *)(intptr_t)fd, mode, functions);
    /* glibc marks a cookie stream with _fileno -2 ("no descriptor"); the real one lets
     * fileno() answer. glibc's own I/O on the stream goes through the cookie functions. */
    if (stream) stream->_fileno = fd;
    return stream;
}

/* 1 when a fopen/fdopen mode reads: "r", "rb", "re", "r+" ... (not "w", "a", "w+", "a+"). */
static int mode_reads(const char *mode)
{
    return mode && mode[0] == 'r';
}

/* fopen of an entropy device, when REPROD_ENTROPY applies; NULL with *handled = 0 otherwise. */
static FILE *open_device_stream(const char *path, const char *mode, int *handled)
{
    *handled = 0;
    if (!reprod_entropy_is_device_path(path) || !mode_reads(mode) || !pinning()) return NULL;
    *handled = 1;
    int flags = strchr(mode, '+') ? O_RDWR : O_RDONLY;
    if (strchr(mode, 'e')) flags |= O_CLOEXEC;
    __typeof__(&open) real_open = REAL(open);
    if (!real_open) return errno = ENOSYS, NULL;
    int fd = after_open(path, flags, real_open(path, flags)); /* tracked */
    if (fd < 0) return NULL;
    FILE *stream = device_stream(fd, mode);
    if (!stream) {
        int saved = errno;
        cookie_close((void *)(intptr_t)fd);
        errno = saved;
    }
    return stream;
}

REPROD_EXPORT FILE *fopen(const char *path, const char *mode)
{
    int handled;
    FILE *stream = open_device_stream(path, mode, &handled);
    if (handled) return stream;
    __typeof__(&fopen) real = REAL(fopen);
    return real ? real(path, mode) : (errno = ENOSYS, NULL);
}

REPROD_EXPORT FILE *fopen64(const char *path, const char *mode)
{
    int handled;
    FILE *stream = open_device_stream(path, mode, &handled);
    if (handled) return stream;
    __typeof__(&fopen64) real = REAL(fopen64);
    return real ? real(path, mode) : (errno = ENOSYS, NULL);
}

REPROD_EXPORT FILE *fdopen(int fd, const char *mode)
{
    if (watching_descriptors() && mode_reads(mode) && reprod_entropy_is_tracked(fd))
        return device_stream(fd, mode);
    __typeof__(&fdopen) real = REAL(fdopen);
    return real ? real(fd, mode) : (errno = ENOSYS, NULL);
}
