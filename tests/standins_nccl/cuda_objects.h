/* The objects behind the CUDA stand-in's stream, event and graph handles, shared by
 * cuda_stream.c (streams, queues) and cuda_graph.c (events, capture, graphs). */
#ifndef STANDIN_CUDA_OBJECTS_H
#define STANDIN_CUDA_OBJECTS_H

#include "standin_cuda.h"

#include <stdatomic.h>

#define STREAM_MAGIC 0x5354524dU
#define EVENT_MAGIC 0x45564e54U
#define GRAPH_MAGIC 0x47525048U
#define EXEC_MAGIC 0x47455843U
#define DEAD_MAGIC 0xdeadU
#define MAX_DEVICES 64
#define SPECIAL_STREAM(s) ((uintptr_t)(s) <= 2) /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */

struct work {
    standin_work_fn *run;
    standin_work_fn *release;
    void *arg;
    struct work *next;
};

struct node_list { /* the recorded work of a graph, shared by its executable graphs and launches */
    atomic_int refs;
    size_t count, capacity;
    struct work *items;
};

struct capture {
    uint64_t id;
    CUgraph graph;
    CUstream origin;
};

struct CUstream_st {
    uint32_t magic;
    int device;
    unsigned flags;
    pthread_mutex_t lock;
    pthread_cond_t work_ready, work_done;
    struct work *head, *tail;
    uint64_t enqueued, completed;
    int stopping;
    struct capture *capture; /* guarded by capture_lock */
    struct CUstream_st *next_of_all;
};

struct CUevent_st {
    uint32_t magic;
    unsigned flags;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded, reached;
    double time_ms;
    struct capture *capture; /* the capture of its last record, if any (capture_lock) */
};

struct CUgraph_st {
    uint32_t magic;
    struct node_list *nodes;
};

struct CUgraphExec_st {
    uint32_t magic;
    struct node_list *nodes;
};

extern pthread_mutex_t scuda_capture_lock; /* guards every stream's capture and graph appends */
extern _Atomic(struct CUstream_st *) scuda_all_streams; /* every stream ever made, newest first */

/* The stream a handle names: the calling thread's device's legacy stream for the special
 * handles; NULL for a handle that is not a live stream. */
CUstream scuda_stream_resolve(CUstream handle);
/* Append work to a graph's node list (with scuda_capture_lock held). */
void scuda_node_list_append(struct node_list *nodes, standin_work_fn *run, void *arg, standin_work_fn *release);
double scuda_now_ms(void);

#endif
