/* What the NCCL stand-in's files share. A communicator's ranks meet in one POSIX shared-memory
 * segment, named in the ncclUniqueId: a header of futex words, one mailbox per ordered pair of
 * ranks (send/recv), and two sets of collective slots (one per rank and one for the result),
 * used alternately so that one barrier a step is enough. Work runs on the caller's stream, one
 * communicator's work in the order it was issued whatever its streams (as NCCL orders it). */
#ifndef STANDIN_NCCL_INTERNAL_H
#define STANDIN_NCCL_INTERNAL_H

#include "standin_cuda.h"

#include <nccl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SNCCL_MAX_RANKS 64
#define SNCCL_SLOT_BYTES ((size_t)512 << 10)    /* one rank's part of a collective step */
#define SNCCL_MAILBOX_BYTES ((size_t)256 << 10) /* the ring buffer of one ordered pair */
#define SNCCL_NAME_BYTES 64
#define SNCCL_COMM_MAGIC 0x4e43434cU
#define SNCCL_COMM_DEAD 0x44454144U /* destroyed or aborted: any later use is reported */

struct snccl_shared { /* offset 0 of the segment; zero when created, which is the initial state */
    _Atomic uint32_t nranks;
    _Atomic uint32_t joined;  /* ranks that mapped the segment (futex word) */
    _Atomic uint32_t aborted; /* set by ncclCommAbort or a timed-out wait: every wait gives up */
    _Atomic uint32_t barrier; /* arrivals at stream-side barriers (futex word) */
    _Atomic uint32_t control; /* arrivals at host-side barriers, for split (futex word) */
    _Atomic uint32_t present[SNCCL_MAX_RANKS];
    _Atomic uint32_t doorbell[SNCCL_MAX_RANKS]; /* bumped when a mailbox of the rank moves */
    /* hello[a][b]: rank a connected towards b (its first launch with b as a peer): a launch
     * waits for the peers' hellos, as NCCL connects its transports at first use. */
    _Atomic uint32_t hello[SNCCL_MAX_RANKS][SNCCL_MAX_RANKS];
    struct {
        int32_t color, key;
    } split[SNCCL_MAX_RANKS];
};

struct snccl_mailbox {     /* bytes head - tail of the pair's ring buffer are in flight */
    _Atomic uint64_t head; /* written by the sender */
    char pad[56];
    _Atomic uint64_t tail; /* written by the receiver */
    char pad2[56];
};

enum snccl_kind { SNCCL_ALLREDUCE, SNCCL_REDUCESCATTER, SNCCL_REDUCE, SNCCL_ALLGATHER, SNCCL_BROADCAST, SNCCL_SEND, SNCCL_RECV };
enum snccl_op { SNCCL_SUM, SNCCL_PROD, SNCCL_MAX, SNCCL_MIN, SNCCL_PREMUL, SNCCL_AVG_INT };

struct snccl_task { /* one operation as issued, with its arguments checked */
    enum snccl_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    enum snccl_op op;
    unsigned char scalar[8];   /* SNCCL_PREMUL: the scalar in the type, unless scalar_device */
    const void *scalar_device; /* read when the task runs */
    int root;                  /* root, or the peer of a send/recv */
    size_t done_bytes;         /* send/recv progress while running */
};

struct snccl_redop {
    int live;
    ncclDataType_t type;
    ncclScalarResidence_t residence;
    unsigned char scalar[8];
    const void *scalar_device;
};

/* What a communicator did, for tests (NCCL_STANDIN_REPORT=1 prints it when it ends). */
struct snccl_counts {
    uint64_t sends, receives, collectives;
    unsigned char peers[SNCCL_MAX_RANKS]; /* 1: a message went to or came from that rank */
};

/* What real NCCL would have sent (nccl_model.c; NCCL_STANDIN_COUNTS=<dir> writes it). */
struct snccl_model {
    uint64_t messages, bytes, calls;
    unsigned char peers[SNCCL_MAX_RANKS]; /* 1: NCCL's algorithm sends to or receives from it */
};

struct ncclComm {
    uint32_t magic;
    int rank, nranks, device, blocking;
    int tree, channels; /* NCCL_ALGO and NCCL_MAX_NCHANNELS, read at init */
    double timeout_s;
    char name[SNCCL_NAME_BYTES];
    char *base; /* the mapped segment */
    size_t bytes;
    struct snccl_shared *shared;
    _Atomic int state;  /* what ncclCommGetAsyncError reports */
    _Atomic int broken; /* its communication failed (snccl_set_error): later bundles do nothing */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int joined; /* 0 while joining, 1 joined, -1 failed (lock) */
    int pending; /* bundles enqueued, not yet run (lock) */
    int dead;    /* destroyed or aborted (lock) */
    int launching; /* launches in progress (nonblocking: on their own thread) (lock) */
    uint64_t issued, finished; /* bundle tickets: a bundle runs when finished == its ticket (lock) */
    pthread_mutex_t exec_lock; /* held while a bundle runs, and by destroy */
    unsigned char connected[SNCCL_MAX_RANKS]; /* peers this rank said hello to (the launcher's) */
    struct snccl_counts counts; /* written by the bundle running (exec_lock) */
    struct snccl_model model;   /* the same, as NCCL's algorithms would send (exec_lock) */
    _Atomic uint64_t calls;             /* calls issued on it (NCCL_STANDIN_FAIL_CALL counts them) */
    _Atomic uint64_t calls_after_error; /* of them, made once its communication had failed */
    _Atomic int launch_failed;          /* a call failed at its launch (NCCL_STANDIN_FAIL_CALL) */
    uint64_t failing_call;              /* NCCL_STANDIN_FAIL_CALL, read at init (0: none) */
    uint32_t barrier_epoch, control_epoch, parity, splits;
    struct snccl_redop *redops;
    int redop_count;
    char last_error[160];
};

/* ---- nccl_shm.c ---- */
size_t snccl_segment_bytes(int nranks);
struct snccl_mailbox *snccl_mailbox(struct ncclComm *comm, int from, int to);
char *snccl_mailbox_data(struct ncclComm *comm, int from, int to);
/* Slot `index` (a rank, or nranks for the result area) of slot set `set` (0 or 1). */
char *snccl_slot(struct ncclComm *comm, unsigned set, int index);
/* Map the segment and wait for every rank to arrive: ncclSuccess or the error. */
ncclResult_t snccl_segment_join(struct ncclComm *comm);
void snccl_segment_leave(struct ncclComm *comm);
/* Wait until *word differs from `seen` (or a short while passed); an error when the comm was
 * aborted or `deadline` (seconds, monotonic) passed: then the comm is marked aborted. */
ncclResult_t snccl_wait_change(struct ncclComm *comm, _Atomic uint32_t *word, uint32_t seen, double deadline);
void snccl_wake(_Atomic uint32_t *word);
/* All ranks meet on `counter` (shared->barrier on streams, shared->control on host threads). */
ncclResult_t snccl_barrier(struct ncclComm *comm, _Atomic uint32_t *counter, uint32_t *epoch);
double snccl_now(void);
void snccl_abort_shared(struct ncclComm *comm);
void snccl_set_error(struct ncclComm *comm, ncclResult_t error, const char *message);

/* ---- nccl_types.c ---- */
size_t snccl_type_bytes(ncclDataType_t type); /* 0 for an invalid type */
int snccl_type_is_float(ncclDataType_t type);
/* The value `x` rounded to `type`, stored at `out` (type_bytes bytes). */
void snccl_store_double(ncclDataType_t type, double x, void *out);
/* out[e] = the fold of srcs[0..n-1][e] in that order (ring) or pairwise (tree), each step rounded
 * to the type; `scalar` (the type's bytes) multiplies each contribution first for SNCCL_PREMUL. */
void snccl_reduce(ncclDataType_t type, enum snccl_op op, int tree, const void *const *srcs, int n, void *out,
                  size_t len, const void *scalar);

/* ---- nccl_algo.c ---- */
/* Run one collective task on the calling (stream worker) thread. */
ncclResult_t snccl_run_collective(struct ncclComm *comm, struct snccl_task *task);
/* Run every send and recv of `tasks` together until all are done. */
ncclResult_t snccl_run_p2p(struct ncclComm *comm, struct snccl_task *tasks, size_t count);

/* ---- nccl_model.c ---- */
/* Count what NCCL's algorithm would send for `task` (run by this rank). */
void snccl_model_count(struct ncclComm *comm, const struct snccl_task *task);
/* Append the communicator's counts to NCCL_STANDIN_COUNTS/counts.<pid>, when that is set. */
void snccl_model_write(const struct ncclComm *comm);

/* ---- nccl_comm.c ---- */
/* The comm a handle names, if it is a live, usable communicator; else NULL. A communicator
 * already destroyed or aborted is a use after free: reported on stderr, and the process aborts
 * (natively the memory is gone). `api` names the entry point. */
struct ncclComm *snccl_comm_check_in(ncclComm_t comm, const char *api);
#define snccl_comm_check(comm) snccl_comm_check_in(comm, __func__)
/* Wait until the comm has joined: ncclSuccess, or why it did not. */
ncclResult_t snccl_comm_wait_joined(struct ncclComm *comm);
/* Fill task->op and its scalar from `op` for `task->type`: ncclInvalidArgument for an unknown,
 * destroyed or mistyped op. */
ncclResult_t snccl_resolve_op(struct ncclComm *comm, ncclRedOp_t op, struct snccl_task *task);

/* A public entry point: the strong pncclX and the weak ncclX that aliases it, as NCCL. */
#define SNCCL_API(type, name, ...)                                                                      \
    type name(__VA_ARGS__) __attribute__((weak, alias("p" #name)));                                    \
    type p##name(__VA_ARGS__)

/* ---- nccl_group.c ---- */
int snccl_group_depth(void);
/* Record `error` as the error of this thread's open group (NCCL's ncclGroupErrCheck): the
 * outermost ncclGroupEnd then drops the whole group and returns it. Returns `error`. */
ncclResult_t snccl_group_error(ncclResult_t error);
/* A comm whose init began inside a group: the outermost ncclGroupEnd waits for it to join. */
void snccl_group_note_init(struct ncclComm *comm);

#endif
