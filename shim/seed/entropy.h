/* entropy.h: REPROD_ENTROPY. A deterministic byte stream keyed by (the value, the rank, the
 * fork ordinal) that replaces what getrandom, getentropy, arc4random and reads of /dev/urandom
 * and /dev/random return; and the table of descriptors open on those two devices.
 *
 * Off unless REPROD_ENTROPY is set; refused (with a message on stderr) in setuid and other
 * secure-execution processes; off under REPROD_MODE=off. For debugging only: the stream is
 * predictable by design.
 */
#ifndef REPROD_ENTROPY_H
#define REPROD_ENTROPY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* How many descriptors are tracked. The read hooks test this first, so that a process that
 * never opens an entropy device pays one load and one predictable branch per read. */
extern _Atomic int reprod_entropy_tracked_count;

/* 1 when some descriptor may be tracked (the read hooks' only test on their hot path). */
static inline int reprod_entropy_any_tracked(void)
{
    return atomic_load_explicit(&reprod_entropy_tracked_count, memory_order_relaxed) != 0;
}

/* 1 when REPROD_ENTROPY applies to this process. The first call decides (and writes the
 * warning or the refusal to stderr); safe before the constructor and from any thread. */
int reprod_entropy_active(void);

/* Overwrite buffer[0 .. bytes) with the next `bytes` bytes of this process's stream; `api`
 * names the source for the REPROD_VERBOSE=2 log. Thread-safe: concurrent calls get disjoint
 * parts of the stream. Only call when reprod_entropy_active(). */
void reprod_entropy_fill(const char *api, void *buffer, size_t bytes);

/* One uniformly distributed 32-bit value from the stream (arc4random). */
uint32_t reprod_entropy_next32(const char *api);

/* 1 when `path` is "/dev/urandom" or "/dev/random". */
int reprod_entropy_is_device_path(const char *path);

/* Serve the reads of `fd`, just opened on an entropy device, from the stream. Records the
 * device and inode, so that a stale entry is recognised later. */
void reprod_entropy_track(int fd);

/* Stop serving `fd` (it is being closed or replaced). */
void reprod_entropy_untrack(int fd);

/* After `new_fd` became a copy of `old_fd` (dup, dup2, dup3, F_DUPFD): track it iff `old_fd`
 * is tracked. */
void reprod_entropy_copy_tracking(int old_fd, int new_fd);

/* 1 when `fd` is tracked and still refers to the file recorded by reprod_entropy_track. An
 * entry whose descriptor was closed behind the shim's back (close_range, closefrom, a raw
 * syscall) and reused for another file is dropped, and 0 returned: a regular file is never
 * served from the stream. */
int reprod_entropy_is_tracked(int fd);

#endif /* REPROD_ENTROPY_H */
