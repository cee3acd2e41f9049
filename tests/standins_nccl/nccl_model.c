/* What real NCCL would send for each operation the stand-in runs (which moves data through shared
 * memory, not messages): the messages, bytes and peers of NCCL's own algorithms, counted per
 * communicator, so that a test can assert how a route's cost grows with the rank count.
 *
 * One channel, NCCL's algorithms as its documentation draws them (each step one message to one
 * peer; NCCL cuts steps into chunks, the same factor natively and under the shim):
 *   ring AllReduce: reduce-scatter then all-gather around the ring, 2(N-1) messages of
 *     count/N elements to the next rank, from the previous one;
 *   tree AllReduce (NCCL_ALGO=Tree): reduce up a binary tree (parent (r-1)/2, children 2r+1 and
 *     2r+2), then broadcast down it: one message to the parent, one to each child;
 *   ReduceScatter and AllGather: N-1 ring steps of one rank's block;
 *   Reduce: a chain around the ring ending at the root (every rank but the root sends once);
 *   Broadcast: a chain from the root (every rank but the one before the root sends once);
 *   Send: one message to its peer; Recv: none sent, its peer counted.
 * NCCL_STANDIN_COUNTS=<dir>: each communicator, when it ends, appends one line to
 * <dir>/counts.<pid>: "rank R ranks N messages M bytes B peers P calls C". */
#include "nccl_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void send_to(struct ncclComm *comm, int peer, uint64_t bytes) {
    comm->model.messages++;
    comm->model.bytes += bytes;
    comm->model.peers[peer] = 1;
}

static void tree_all_reduce(struct ncclComm *comm, uint64_t bytes) {
    int r = comm->rank, n = comm->nranks;
    if (r > 0)
        send_to(comm, (r - 1) / 2, bytes); /* the reduction up (the broadcast comes from it) */
    for (int child = 2 * r + 1; child <= 2 * r + 2 && child < n; child++)
        send_to(comm, child, bytes); /* the broadcast down (its reduction came from it) */
}

void snccl_model_count(struct ncclComm *comm, const struct snccl_task *task) {
    int n = comm->nranks, r = comm->rank;
    int next = (r + 1) % n, previous = (r + n - 1) % n;
    uint64_t bytes = (uint64_t)task->count * snccl_type_bytes(task->type);
    comm->model.calls++;
    if (task->kind == SNCCL_RECV) {
        comm->model.peers[task->root] = 1;
        return;
    }
    if (task->kind == SNCCL_SEND) {
        send_to(comm, task->root, bytes);
        return;
    }
    if (n == 1 || task->count == 0)
        return;
    switch (task->kind) {
    case SNCCL_ALLREDUCE:
        if (comm->tree) {
            tree_all_reduce(comm, bytes);
        } else {
            for (int step = 0; step < 2 * (n - 1); step++)
                send_to(comm, next, (bytes + n - 1) / n);
            comm->model.peers[previous] = 1;
        }
        break;
    case SNCCL_REDUCESCATTER: /* count is one rank's block */
    case SNCCL_ALLGATHER:
        for (int step = 0; step < n - 1; step++)
            send_to(comm, next, bytes);
        comm->model.peers[previous] = 1;
        break;
    case SNCCL_REDUCE:
        if (r != task->root)
            send_to(comm, next, bytes);
        if (previous != task->root)
            comm->model.peers[previous] = 1;
        break;
    case SNCCL_BROADCAST:
        if (next != task->root)
            send_to(comm, next, bytes);
        if (r != task->root)
            comm->model.peers[previous] = 1;
        break;
    default:
        break;
    }
}

void snccl_model_write(const struct ncclComm *comm) {
    const char *dir = getenv("NCCL_STANDIN_COUNTS");
    if (!dir || !*dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/counts.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    int peers = 0;
    for (int q = 0; q < comm->nranks; q++)
        peers += comm->model.peers[q] && q != comm->rank;
    char line[256];
    int length = snprintf(line, sizeof line, "rank %d ranks %d messages %llu bytes %llu peers %d calls %llu\n",
                          comm->rank, comm->nranks, (unsigned long long)comm->model.messages,
                          (unsigned long long)comm->model.bytes, peers, (unsigned long long)comm->model.calls);
    if (length > 0 && write(fd, line, (size_t)length) != length)
        fprintf(stderr, "NCCL stand-in: could not write %s\n", path);
    close(fd);
}
