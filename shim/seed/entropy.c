/* entropy.c: the REPROD_ENTROPY stream, its activation, its re-keying in fork children, and the
 * table of descriptors open on /dev/urandom and /dev/random.
 *
 * The stream is splitmix64 started from a key: byte j is byte (j mod 8), little-endian, of
 * H64(key + (j / 8) * 0x9E3779B97F4A7C15) (reprod_mix64 adds the constant once more: these are
 * splitmix64's outputs 1, 2, ... from state key). It is seekable, so concurrent callers
 * reserve disjoint ranges with one atomic add and fill them without a lock.
 *
 *   key = H(H(H(value) ^ H(rank ^ RANK_TWEAK)) + lineage)
 *
 * lineage is 0 in a process started by exec; a fork child of a process with lineage L, born
 * of its n-th fork (n = 1, 2, ...), has lineage H(L + n * FORK_STEP), and starts its stream
 * at offset 0. Parent and child thus draw different bytes, and each the same ones in every
 * run whose forks happen in the same order. The rank is read at each call: a rank learned
 * later (MPI_Init) re-keys the rest of the stream, the same way in every run.
 */
#include "seed/entropy.h"

#include "common.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "interpose/once.h"
#include "runtime/rank.h"
#include "seed/seed.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#define STREAM_STEP UINT64_C(0x9E3779B97F4A7C15) /* splitmix64's increment */
#define RANK_TWEAK  UINT64_C(0x6A09E667F3BCC909) /* separates the rank from the value */
#define FORK_STEP   UINT64_C(0xBB67AE8584CAA73B) /* odd: n * FORK_STEP is injective in n */
#define MAX_TRACKED 64                           /* descriptors open on the devices at once */

enum { STATE_UNDECIDED = -1, STATE_OFF = 0, STATE_ON = 1 };

static _Atomic int entropy_state = STATE_UNDECIDED;
static struct reprod_once entropy_once = REPROD_ONCE_INIT;
static uint64_t entropy_value;         /* REPROD_ENTROPY */
static uint64_t lineage;               /* 0, or re-keyed in each fork child */
static _Atomic uint64_t forks_made;    /* by this process, for its children's lineage */
static _Atomic uint64_t stream_offset; /* bytes of the stream handed out */
static _Atomic int message_pending;    /* the start-up message, written after the once */
static char message[512];

/* A descriptor open on an entropy device, and the file it was opened on. The table is read
 * and written without a lock (a read hook may run in a signal handler, or in a fork child of a
 * thread that held a lock): a slot is claimed by moving `state` from FREE to CLAIMED, filled,
 * then published by storing fd + 1; it is released by moving fd + 1 back to FREE. */
enum { SLOT_FREE = 0, SLOT_CLAIMED = -1 };
struct tracked_fd {
    _Atomic int state; /* SLOT_FREE, SLOT_CLAIMED, or fd + 1 */
    _Atomic uint64_t device;
    _Atomic uint64_t inode;
};

_Atomic int reprod_entropy_tracked_count;
static struct tracked_fd tracked[MAX_TRACKED];
static _Atomic int table_full_warned;

/* ---- activation ---- */

/* Count the fork before it happens: the child sees the new count as its ordinal. */
static void before_fork(void)
{
    atomic_fetch_add(&forks_made, 1);
}

/* The child: a new lineage from the parent's and the ordinal, a fresh stream, a fresh lock. */
static void after_fork_in_child(void)
{
    uint64_t ordinal = atomic_load(&forks_made);
    lineage = reprod_mix64(lineage + ordinal * FORK_STEP);
    atomic_store(&forks_made, 0);
    atomic_store(&stream_offset, 0);
}

/* Decide once. Messages are only prepared here and written after the once is over: writing
 * may open the REPROD_LOG file, and a hook on open may ask whether entropy is active. */
static void decide(void)
{
    /* Not reprod_init: what it calls may read entropy, and this once would then be running
     * inside its own (it would return at once, with entropy off). */
    const struct reprod_config *config = reprod_config();
    reprod_rank_discover_from_env();
    int state = STATE_OFF;
    if (config->entropy_set) {
        int rank = reprod_rank();
        if (getauxval(AT_SECURE)) {
            snprintf(message, sizeof message,
                     "reprod[%d]: REPROD_ENTROPY=%" PRIu64
                     " refused: this is a setuid or secure-execution process; getrandom, "
                     "getentropy, arc4random and /dev/urandom stay random\n",
                     rank, config->entropy);
        } else if (config->mode == REPROD_MODE_OFF) {
            snprintf(message, sizeof message,
                     "reprod[%d]: warning: REPROD_ENTROPY=%" PRIu64
                     " ignored: REPROD_MODE=off (the shim changes nothing)\n",
                     rank, config->entropy);
        } else {
            snprintf(message, sizeof message,
                     "reprod[%d]: warning: REPROD_ENTROPY=%" PRIu64
                     ": getrandom, getentropy, arc4random and reads of /dev/urandom and "
                     "/dev/random return a fixed stream in this process (keyed by the value, "
                     "the rank and the fork ordinal); for debugging only, never for keys or "
                     "secrets\n",
                     rank, config->entropy);
            entropy_value = config->entropy;
            pthread_atfork(before_fork, NULL, after_fork_in_child);
            state = STATE_ON;
        }
        atomic_store(&message_pending, 1);
    }
    atomic_store_explicit(&entropy_state, state, memory_order_release);
}

/* The start-up message goes to stderr itself (DESIGN: a warning on stderr at start), not to
 * REPROD_LOG: a secure-execution process must not open a file the environment names. */
static void write_pending_message(void)
{
    if (!atomic_exchange(&message_pending, 0)) return;
    ssize_t ignored = write(STDERR_FILENO, message, strlen(message));
    (void)ignored;
}

int reprod_entropy_active(void)
{
    int state = atomic_load_explicit(&entropy_state, memory_order_acquire);
    if (REPROD_LIKELY(state != STATE_UNDECIDED)) return state;
    /* A source read by what decide() calls, on its own thread: not pinned. */
    if (!reprod_once(&entropy_once, decide)) return STATE_OFF;
    write_pending_message();
    return atomic_load_explicit(&entropy_state, memory_order_acquire);
}

/* Decide at load time, so that the warning appears at start even in a process that never
 * asks for entropy. */
__attribute__((constructor)) static void entropy_constructor(void)
{
    reprod_entropy_active();
}

/* ---- the stream ---- */

static uint64_t stream_key(void)
{
    uint64_t rank_part = reprod_mix64((uint64_t)(uint32_t)reprod_rank() ^ RANK_TWEAK);
    return reprod_mix64(reprod_mix64(reprod_mix64(entropy_value) ^ rank_part) + lineage);
}

/* Write stream bytes [offset, offset + bytes) into `out`. */
static void stream_bytes(uint64_t key, uint64_t offset, unsigned char *out, size_t bytes)
{
    size_t done = 0;
    while (done < bytes) {
        uint64_t position = offset + done;
        uint64_t word = reprod_mix64(key + (position / 8) * STREAM_STEP);
        for (unsigned b = (unsigned)(position % 8); b < 8 && done < bytes; b++)
            out[done++] = (unsigned char)(word >> (8 * b));
    }
}

void reprod_entropy_fill(const char *api, void *buffer, size_t bytes)
{
    uint64_t key = stream_key();
    uint64_t offset = atomic_fetch_add(&stream_offset, (uint64_t)bytes);
    stream_bytes(key, offset, buffer, bytes);
    if (reprod_log_enabled(REPROD_LOG_DEBUG))
        reprod_log(REPROD_LOG_DEBUG,
                   "entropy: %s: %zu bytes from the REPROD_ENTROPY stream at offset %" PRIu64, api,
                   bytes, offset);
}

uint32_t reprod_entropy_next32(const char *api)
{
    uint32_t value;
    reprod_entropy_fill(api, &value, sizeof value);
    return value;
}

/* ---- descriptors open on the devices ---- */

int reprod_entropy_is_device_path(const char *path)
{
    /* The first test rejects nearly every path of an ordinary open at the cost of a load. */
    if (!path || path[0] != '/' || path[1] != 'd') return 0;
    return strcmp(path, "/dev/urandom") == 0 || strcmp(path, "/dev/random") == 0;
}

/* The slot publishing `fd`, or -1. */
static int find_slot(int fd)
{
    for (int i = 0; i < MAX_TRACKED; i++)
        if (atomic_load_explicit(&tracked[i].state, memory_order_acquire) == fd + 1) return i;
    return -1;
}

/* Release `slot` if it still publishes `fd`. */
static void release_slot(int slot, int fd)
{
    int expected = fd + 1;
    if (atomic_compare_exchange_strong(&tracked[slot].state, &expected, SLOT_FREE))
        atomic_fetch_sub(&reprod_entropy_tracked_count, 1);
}

void reprod_entropy_track(int fd)
{
    struct stat status;
    if (fd < 0 || fstat(fd, &status) != 0) return;
    int slot = find_slot(fd);
    if (slot >= 0) release_slot(slot, fd); /* a stale entry for the same number */
    for (slot = 0; slot < MAX_TRACKED; slot++) {
        int expected = SLOT_FREE;
        if (atomic_compare_exchange_strong(&tracked[slot].state, &expected, SLOT_CLAIMED)) break;
    }
    if (slot == MAX_TRACKED) {
        if (!atomic_exchange(&table_full_warned, 1))
            reprod_log(REPROD_LOG_WARN,
                       "warning: more than %d descriptors open on /dev/urandom or /dev/random "
                       "at once: reads of the others are not pinned by REPROD_ENTROPY",
                       MAX_TRACKED);
        return;
    }
    atomic_store(&tracked[slot].device, (uint64_t)status.st_dev);
    atomic_store(&tracked[slot].inode, (uint64_t)status.st_ino);
    atomic_fetch_add(&reprod_entropy_tracked_count, 1);
    atomic_store_explicit(&tracked[slot].state, fd + 1, memory_order_release);
}

void reprod_entropy_untrack(int fd)
{
    int slot = find_slot(fd);
    if (slot >= 0) release_slot(slot, fd);
}

int reprod_entropy_is_tracked(int fd)
{
    int slot = find_slot(fd);
    if (slot < 0) return 0;
    struct stat status;
    if (fstat(fd, &status) == 0 && (uint64_t)status.st_dev == atomic_load(&tracked[slot].device) &&
        (uint64_t)status.st_ino == atomic_load(&tracked[slot].inode))
        return 1;
    release_slot(slot, fd); /* closed behind our back and reused: not ours any more */
    return 0;
}

void reprod_entropy_copy_tracking(int old_fd, int new_fd)
{
    if (old_fd == new_fd) return;
    if (reprod_entropy_is_tracked(old_fd))
        reprod_entropy_track(new_fd);
    else
        reprod_entropy_untrack(new_fd);
}
