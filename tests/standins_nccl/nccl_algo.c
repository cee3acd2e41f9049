/* How the NCCL stand-in moves and reduces data, on the stream's worker thread. A collective goes
 * through the slots one step of at most SNCCL_SLOT_BYTES at a time: each rank copies its part in,
 * a barrier, then (reductions) each rank reduces 1/N of the step into the result area and a
 * second barrier, then each rank copies out. The reduction order is NCCL-like and changes with
 * the settings: the buffer is cut into one slice per channel and each slice into N chunks; the
 * ring folds chunk k of channel c starting at rank (c + k + 1) mod N, the tree adds pairwise over
 * the ranks rotated by c. Send/recv stream through per-pair ring buffers. */
#include "nccl_internal.h"

#include <string.h>

struct step { /* one step of a reduction: global elements [offset, offset + length) */
    struct ncclComm *comm;
    struct snccl_task *task;
    size_t total, offset, length, element_bytes;
    unsigned set;
    const void *scalar;
};

/* Reduce global elements [low, high) of the step into the result area, run by run of elements
 * that share a reduction order. */
static void reduce_part(const struct step *step, size_t low, size_t high) {
    struct ncclComm *comm = step->comm;
    int n = comm->nranks;
    size_t channels = (size_t)comm->channels;
    size_t slice = (step->total + channels - 1) / channels;
    const void *sources[SNCCL_MAX_RANKS];
    char *result = snccl_slot(comm, step->set, n);
    for (size_t g = low; g < high;) {
        size_t channel = g / slice, slice_start = channel * slice;
        size_t slice_length = step->total - slice_start < slice ? step->total - slice_start : slice;
        size_t chunk = (slice_length + n - 1) / n;
        size_t k = (g - slice_start) / chunk;
        size_t run_end = slice_start + (k + 1) * chunk;
        if (run_end > high)
            run_end = high;
        int first = comm->tree ? (int)(channel % n) : (int)((channel + k + 1) % n);
        for (int i = 0; i < n; i++)
            sources[i] = snccl_slot(comm, step->set, (first + i) % n) + (g - step->offset) * step->element_bytes;
        snccl_reduce(step->task->type, step->task->op, comm->tree, sources, n,
                     result + (g - step->offset) * step->element_bytes, run_end - g, step->scalar);
        g = run_end;
    }
}

static ncclResult_t run_reduction(struct ncclComm *comm, struct snccl_task *task) {
    int n = comm->nranks, rank = comm->rank;
    struct step step = {comm, task, task->count, 0, 0, snccl_type_bytes(task->type), 0, task->scalar};
    unsigned char device_scalar[8];
    if (task->kind == SNCCL_REDUCESCATTER)
        step.total = task->count * n;
    if (task->op == SNCCL_PREMUL && task->scalar_device) {
        memcpy(device_scalar, task->scalar_device, step.element_bytes); /* in stream order */
        step.scalar = device_scalar;
    }
    size_t per_step = SNCCL_SLOT_BYTES / step.element_bytes;
    const char *send = task->send;
    char *recv = task->recv;
    for (step.offset = 0; step.offset < step.total; step.offset += step.length) {
        step.length = step.total - step.offset < per_step ? step.total - step.offset : per_step;
        step.set = comm->parity;
        comm->parity ^= 1;
        memcpy(snccl_slot(comm, step.set, rank), send + step.offset * step.element_bytes,
               step.length * step.element_bytes);
        ncclResult_t result = snccl_barrier(comm, &comm->shared->barrier, &comm->barrier_epoch);
        if (result != ncclSuccess)
            return result;
        reduce_part(&step, step.offset + step.length * rank / n, step.offset + step.length * (rank + 1) / n);
        result = snccl_barrier(comm, &comm->shared->barrier, &comm->barrier_epoch);
        if (result != ncclSuccess)
            return result;
        const char *reduced = snccl_slot(comm, step.set, n);
        if (task->kind == SNCCL_ALLREDUCE || (task->kind == SNCCL_REDUCE && rank == task->root)) {
            memcpy(recv + step.offset * step.element_bytes, reduced, step.length * step.element_bytes);
        } else if (task->kind == SNCCL_REDUCESCATTER) {
            size_t mine_low = task->count * rank, mine_high = mine_low + task->count;
            size_t low = step.offset > mine_low ? step.offset : mine_low;
            size_t high = step.offset + step.length < mine_high ? step.offset + step.length : mine_high;
            if (low < high)
                memcpy(recv + (low - mine_low) * step.element_bytes, reduced + (low - step.offset) * step.element_bytes,
                       (high - low) * step.element_bytes);
        }
    }
    return ncclSuccess;
}

/* AllGather and Broadcast: data movement only, one barrier a step. */
static ncclResult_t run_movement(struct ncclComm *comm, struct snccl_task *task) {
    size_t element_bytes = snccl_type_bytes(task->type);
    size_t total_bytes = task->count * element_bytes;
    int gather = task->kind == SNCCL_ALLGATHER;
    const char *send = task->send;
    char *recv = task->recv;
    for (size_t offset = 0; offset < total_bytes; offset += SNCCL_SLOT_BYTES) {
        size_t length = total_bytes - offset < SNCCL_SLOT_BYTES ? total_bytes - offset : SNCCL_SLOT_BYTES;
        unsigned set = comm->parity;
        comm->parity ^= 1;
        if (gather)
            memcpy(snccl_slot(comm, set, comm->rank), send + offset, length);
        else if (comm->rank == task->root)
            memcpy(snccl_slot(comm, set, 0), send + offset, length);
        ncclResult_t result = snccl_barrier(comm, &comm->shared->barrier, &comm->barrier_epoch);
        if (result != ncclSuccess)
            return result;
        if (gather) {
            for (int q = 0; q < comm->nranks; q++)
                memcpy(recv + q * total_bytes + offset, snccl_slot(comm, set, q), length);
        } else {
            memcpy(recv + offset, snccl_slot(comm, set, 0), length);
        }
    }
    return ncclSuccess;
}

ncclResult_t snccl_run_collective(struct ncclComm *comm, struct snccl_task *task) {
    if (!task->count)
        return ncclSuccess;
    if (task->kind == SNCCL_ALLGATHER || task->kind == SNCCL_BROADCAST)
        return run_movement(comm, task);
    return run_reduction(comm, task);
}

/* ---- send / recv ---- */

/* Move what the pair's ring buffer allows for one send or recv; 1 if anything moved. */
static int p2p_progress(struct ncclComm *comm, struct snccl_task *task) {
    int sending = task->kind == SNCCL_SEND;
    int from = sending ? comm->rank : task->root, to = sending ? task->root : comm->rank;
    struct snccl_mailbox *mailbox = snccl_mailbox(comm, from, to);
    char *data = snccl_mailbox_data(comm, from, to);
    size_t total = task->count * snccl_type_bytes(task->type);
    uint64_t head = atomic_load(&mailbox->head), tail = atomic_load(&mailbox->tail);
    size_t room = sending ? SNCCL_MAILBOX_BYTES - (size_t)(head - tail) : (size_t)(head - tail);
    size_t moving = total - task->done_bytes < room ? total - task->done_bytes : room;
    if (!moving)
        return 0;
    uint64_t position = sending ? head : tail;
    for (size_t moved = 0; moved < moving;) {
        size_t at = (size_t)((position + moved) % SNCCL_MAILBOX_BYTES);
        size_t piece = SNCCL_MAILBOX_BYTES - at < moving - moved ? SNCCL_MAILBOX_BYTES - at : moving - moved;
        if (sending)
            memcpy(data + at, (const char *)task->send + task->done_bytes + moved, piece);
        else
            memcpy((char *)task->recv + task->done_bytes + moved, data + at, piece);
        moved += piece;
    }
    task->done_bytes += moving;
    if (sending)
        atomic_store(&mailbox->head, head + moving);
    else
        atomic_store(&mailbox->tail, tail + moving);
    int other = sending ? to : from;
    atomic_fetch_add(&comm->shared->doorbell[other], 1);
    snccl_wake(&comm->shared->doorbell[other]);
    return 1;
}

/* Whether an earlier unfinished task of the same direction and peer must go first (messages
 * between two ranks match in issue order). */
static int blocked_by_earlier(const struct snccl_task *tasks, size_t index) {
    for (size_t i = 0; i < index; i++)
        if (tasks[i].kind == tasks[index].kind && tasks[i].root == tasks[index].root &&
            tasks[i].done_bytes < tasks[i].count * snccl_type_bytes(tasks[i].type))
            return 1;
    return 0;
}

ncclResult_t snccl_run_p2p(struct ncclComm *comm, struct snccl_task *tasks, size_t count) {
    _Atomic uint32_t *doorbell = &comm->shared->doorbell[comm->rank];
    double deadline = snccl_now() + comm->timeout_s;
    for (;;) {
        uint32_t seen = atomic_load(doorbell);
        int unfinished = 0, moved = 0;
        for (size_t i = 0; i < count; i++) {
            if (tasks[i].kind != SNCCL_SEND && tasks[i].kind != SNCCL_RECV)
                continue;
            if (tasks[i].done_bytes >= tasks[i].count * snccl_type_bytes(tasks[i].type))
                continue;
            unfinished = 1;
            if (!blocked_by_earlier(tasks, i))
                moved |= p2p_progress(comm, &tasks[i]);
        }
        if (!unfinished)
            return ncclSuccess;
        if (moved) {
            deadline = snccl_now() + comm->timeout_s;
            continue;
        }
        ncclResult_t result = snccl_wait_change(comm, doorbell, seen, deadline);
        if (result != ncclSuccess)
            return result;
    }
}
