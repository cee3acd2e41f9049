/* The NCCL stand-in's shared segment: mapping it, the futex waits that every rank's progress
 * goes through (they never spin without yielding, and give up after the comm's timeout or when a
 * rank aborted), and the barriers. */
#include "nccl_internal.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define ROUND_UP(x) (((x) + PAGE - 1) / PAGE * PAGE)

static size_t header_bytes(void) {
    return ROUND_UP(sizeof(struct snccl_shared));
}

static size_t mailboxes_bytes(int nranks) {
    return ROUND_UP((size_t)nranks * nranks * sizeof(struct snccl_mailbox));
}

static size_t slots_bytes(int nranks) {
    return 2 * (size_t)(nranks + 1) * SNCCL_SLOT_BYTES;
}

size_t snccl_segment_bytes(int nranks) {
    return header_bytes() + mailboxes_bytes(nranks) + slots_bytes(nranks) +
           (size_t)nranks * nranks * SNCCL_MAILBOX_BYTES;
}

struct snccl_mailbox *snccl_mailbox(struct ncclComm *comm, int from, int to) {
    return (struct snccl_mailbox *)(comm->base + header_bytes()) + (size_t)from * comm->nranks + to;
}

char *snccl_slot(struct ncclComm *comm, unsigned set, int index) {
    return comm->base + header_bytes() + mailboxes_bytes(comm->nranks) +
           ((size_t)set * (comm->nranks + 1) + index) * SNCCL_SLOT_BYTES;
}

char *snccl_mailbox_data(struct ncclComm *comm, int from, int to) {
    return comm->base + header_bytes() + mailboxes_bytes(comm->nranks) + slots_bytes(comm->nranks) +
           ((size_t)from * comm->nranks + to) * SNCCL_MAILBOX_BYTES;
}

double snccl_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void snccl_wake(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void snccl_set_error(struct ncclComm *comm, ncclResult_t error, const char *message) {
    int expected = ncclSuccess;
    atomic_store(&comm->broken, 1);
    if (atomic_compare_exchange_strong(&comm->state, &expected, error) ||
        (expected = ncclInProgress, atomic_compare_exchange_strong(&comm->state, &expected, error)))
        snprintf(comm->last_error, sizeof comm->last_error, "%s", message);
}

void snccl_abort_shared(struct ncclComm *comm) {
    struct snccl_shared *shared = comm->shared;
    if (!shared)
        return;
    atomic_store(&shared->aborted, 1);
    snccl_wake(&shared->joined);
    snccl_wake(&shared->barrier);
    snccl_wake(&shared->control);
    for (int rank = 0; rank < comm->nranks; rank++)
        snccl_wake(&shared->doorbell[rank]);
}

ncclResult_t snccl_wait_change(struct ncclComm *comm, _Atomic uint32_t *word, uint32_t seen, double deadline) {
    if (atomic_load(&comm->shared->aborted)) {
        snccl_set_error(comm, ncclRemoteError, "a rank aborted the communicator");
        return ncclRemoteError;
    }
    if (snccl_now() > deadline) {
        char message[160];
        snprintf(message, sizeof message, "rank %d: no progress from the other ranks for %g s", comm->rank,
                 comm->timeout_s);
        fprintf(stderr, "NCCL stand-in: %s; aborting the communicator\n", message);
        snccl_set_error(comm, ncclSystemError, message);
        snccl_abort_shared(comm);
        return ncclSystemError;
    }
    /* a few yields first: with more ranks than cores the peer usually needs our core */
    for (int i = 0; i < 4; i++) {
        if (atomic_load(word) != seen)
            return ncclSuccess;
        sched_yield();
    }
    struct timespec timeout = {0, 50 * 1000 * 1000};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &timeout, NULL, 0);
    return ncclSuccess;
}

ncclResult_t snccl_barrier(struct ncclComm *comm, _Atomic uint32_t *counter, uint32_t *epoch) {
    uint32_t target = (*epoch + 1) * (uint32_t)comm->nranks;
    ++*epoch;
    uint32_t now = atomic_fetch_add(counter, 1) + 1;
    if (now == target) {
        snccl_wake(counter);
        return ncclSuccess;
    }
    double deadline = snccl_now() + comm->timeout_s;
    while ((int32_t)((now = atomic_load(counter)) - target) < 0) {
        ncclResult_t result = snccl_wait_change(comm, counter, now, deadline);
        if (result != ncclSuccess)
            return result;
    }
    return ncclSuccess;
}

/* The last rank to arrive unlinks the name: the segment then lives as long as a mapping does. */
ncclResult_t snccl_segment_join(struct ncclComm *comm) {
    comm->bytes = snccl_segment_bytes(comm->nranks);
    int fd = shm_open(comm->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) {
        snccl_set_error(comm, ncclSystemError, "shm_open failed");
        return ncclSystemError;
    }
    struct stat status;
    if (fstat(fd, &status) || ((size_t)status.st_size < comm->bytes && ftruncate(fd, (off_t)comm->bytes))) {
        close(fd);
        snccl_set_error(comm, ncclSystemError, "cannot size the shared segment");
        return ncclSystemError;
    }
    void *base = mmap(NULL, comm->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        snccl_set_error(comm, ncclSystemError, "cannot map the shared segment");
        return ncclSystemError;
    }
    comm->base = base;
    comm->shared = base;
    struct snccl_shared *shared = comm->shared;
    uint32_t expected = 0;
    if (!atomic_compare_exchange_strong(&shared->nranks, &expected, (uint32_t)comm->nranks) &&
        expected != (uint32_t)comm->nranks) {
        snccl_set_error(comm, ncclInvalidUsage, "ranks disagree on the number of ranks");
        return ncclInvalidUsage;
    }
    expected = 0;
    if (!atomic_compare_exchange_strong(&shared->present[comm->rank], &expected, 1)) {
        snccl_set_error(comm, ncclInvalidUsage, "two ranks of the communicator have the same rank");
        return ncclInvalidUsage;
    }
    uint32_t joined = atomic_fetch_add(&shared->joined, 1) + 1;
    if (joined == (uint32_t)comm->nranks) {
        shm_unlink(comm->name);
        snccl_wake(&shared->joined);
    }
    double deadline = snccl_now() + comm->timeout_s;
    while ((joined = atomic_load(&shared->joined)) < (uint32_t)comm->nranks) {
        ncclResult_t result = snccl_wait_change(comm, &shared->joined, joined, deadline);
        if (result != ncclSuccess) {
            shm_unlink(comm->name);
            return result;
        }
    }
    return ncclSuccess;
}

void snccl_segment_leave(struct ncclComm *comm) {
    if (comm->base)
        munmap(comm->base, comm->bytes);
    comm->base = NULL;
    comm->shared = NULL;
}
