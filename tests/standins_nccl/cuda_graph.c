/* The CUDA stand-in's events, stream capture and graphs. A capture records the work enqueued on
 * the capturing stream, and on streams that joined it by waiting on an event recorded in it, as
 * one sequence; a launch enqueues that sequence on the launch stream (inside a graph everything
 * runs in capture order). Waits on events inside a capture are no-ops for that reason. */
#include "cuda_objects.h"

#include <stdlib.h>

static uint64_t capture_ids;

/* ---- events ---- */

static CUevent event_resolve(CUevent event) {
    return scuda_handle_live(event) && event->magic == EVENT_MAGIC ? event : NULL;
}

CUresult cuEventCreate(CUevent *out, unsigned int flags) {
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *event = calloc(1, sizeof *event);
    if (!event)
        return CUDA_ERROR_OUT_OF_MEMORY;
    event->magic = EVENT_MAGIC;
    event->flags = flags;
    pthread_mutex_init(&event->lock, NULL);
    pthread_cond_init(&event->cond, NULL);
    scuda_handle_add(event);
    *out = event;
    return CUDA_SUCCESS;
}

/* The memory stays: work queued before the destroy may still reach the event. */
CUresult cuEventDestroy_v2(CUevent event) {
    if (!event_resolve(event))
        return CUDA_ERROR_INVALID_HANDLE;
    scuda_handle_remove(event);
    event->magic = DEAD_MAGIC;
    return CUDA_SUCCESS;
}

struct event_mark {
    CUevent event;
    uint64_t target; /* 0: a record replayed from a graph, which counts itself */
};

static void event_reach(void *arg) {
    struct event_mark *mark = arg;
    CUevent event = mark->event;
    pthread_mutex_lock(&event->lock);
    if (!mark->target)
        event->recorded++;
    uint64_t target = mark->target ? mark->target : event->recorded;
    if (event->reached < target)
        event->reached = target;
    event->time_ms = scuda_now_ms();
    pthread_cond_broadcast(&event->cond);
    pthread_mutex_unlock(&event->lock);
}

static void event_wait(void *arg) {
    struct event_mark *mark = arg;
    pthread_mutex_lock(&mark->event->lock);
    while (mark->event->reached < mark->target)
        pthread_cond_wait(&mark->event->cond, &mark->event->lock);
    pthread_mutex_unlock(&mark->event->lock);
}

CUresult cuEventRecord(CUevent handle, CUstream stream_handle) {
    CUevent event = event_resolve(handle);
    CUstream stream = scuda_stream_resolve(stream_handle);
    if (!event || !stream)
        return CUDA_ERROR_INVALID_HANDLE;
    struct event_mark *mark = malloc(sizeof *mark);
    if (!mark)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&scuda_capture_lock);
    if (stream->capture) {
        event->capture = stream->capture;
        *mark = (struct event_mark){event, 0};
        scuda_node_list_append(stream->capture->graph->nodes, event_reach, mark, free);
        pthread_mutex_unlock(&scuda_capture_lock);
        return CUDA_SUCCESS;
    }
    event->capture = NULL;
    pthread_mutex_unlock(&scuda_capture_lock);
    pthread_mutex_lock(&event->lock);
    *mark = (struct event_mark){event, ++event->recorded};
    pthread_mutex_unlock(&event->lock);
    CUresult result = standin_stream_enqueue(stream, event_reach, mark, free);
    if (result != CUDA_SUCCESS)
        free(mark);
    return result;
}

CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned int flags) {
    (void)flags;
    return cuEventRecord(event, stream);
}

CUresult cuEventQuery(CUevent handle) {
    CUevent event = event_resolve(handle);
    if (!event)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&event->lock);
    int reached = event->reached >= event->recorded;
    pthread_mutex_unlock(&event->lock);
    return reached ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent handle) {
    CUevent event = event_resolve(handle);
    if (!event)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&event->lock);
    uint64_t target = event->recorded;
    while (event->reached < target)
        pthread_cond_wait(&event->cond, &event->lock);
    pthread_mutex_unlock(&event->lock);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime_v2(float *milliseconds, CUevent start_handle, CUevent end_handle) {
    CUevent start = event_resolve(start_handle), end = event_resolve(end_handle);
    if (!milliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!start || !end || (start->flags & CU_EVENT_DISABLE_TIMING) || (end->flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!start->reached || !end->reached || cuEventQuery(start) || cuEventQuery(end))
        return CUDA_ERROR_NOT_READY;
    *milliseconds = (float)(end->time_ms - start->time_ms);
    return CUDA_SUCCESS;
}

/* A wait on an event recorded in an active capture joins the stream to that capture. */
CUresult cuStreamWaitEvent(CUstream stream_handle, CUevent handle, unsigned int flags) {
    (void)flags;
    CUevent event = event_resolve(handle);
    CUstream stream = scuda_stream_resolve(stream_handle);
    if (!event || !stream)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&scuda_capture_lock);
    if (stream->capture || (event->capture && event->capture->graph)) {
        if (!stream->capture)
            stream->capture = event->capture;
        pthread_mutex_unlock(&scuda_capture_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&scuda_capture_lock);
    struct event_mark *mark = malloc(sizeof *mark);
    if (!mark)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&event->lock);
    *mark = (struct event_mark){event, event->recorded};
    int reached = event->reached >= mark->target;
    pthread_mutex_unlock(&event->lock);
    CUresult result = reached ? CUDA_SUCCESS : standin_stream_enqueue(stream, event_wait, mark, free);
    if (reached || result != CUDA_SUCCESS)
        free(mark);
    return result;
}

/* ---- graphs ---- */

static void node_list_release(struct node_list *nodes) {
    if (atomic_fetch_sub(&nodes->refs, 1) != 1)
        return;
    for (size_t i = 0; i < nodes->count; i++)
        if (nodes->items[i].release)
            nodes->items[i].release(nodes->items[i].arg);
    free(nodes->items);
    free(nodes);
}

static void node_list_release_work(void *arg) {
    node_list_release(arg);
}

static void node_list_run(void *arg) {
    struct node_list *nodes = arg;
    for (size_t i = 0; i < nodes->count; i++)
        nodes->items[i].run(nodes->items[i].arg);
}

CUresult cuGraphCreate(CUgraph *out, unsigned int flags) {
    if (!out || flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *graph = calloc(1, sizeof *graph);
    struct node_list *nodes = calloc(1, sizeof *nodes);
    if (!graph || !nodes) {
        free(graph);
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    atomic_init(&nodes->refs, 1);
    graph->magic = GRAPH_MAGIC;
    graph->nodes = nodes;
    scuda_handle_add(graph);
    *out = graph;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
    if (!scuda_handle_live(graph) || graph->magic != GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    scuda_handle_remove(graph);
    graph->magic = DEAD_MAGIC;
    node_list_release(graph->nodes);
    free(graph);
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph graph, unsigned long long flags) {
    (void)flags;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!scuda_handle_live(graph) || graph->magic != GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUgraphExec_st *exec = calloc(1, sizeof *exec);
    if (!exec)
        return CUDA_ERROR_OUT_OF_MEMORY;
    exec->magic = EXEC_MAGIC;
    exec->nodes = graph->nodes;
    atomic_fetch_add(&exec->nodes->refs, 1);
    scuda_handle_add(exec);
    *out = exec;
    return CUDA_SUCCESS;
}

/* The CUDA 11 signature, still exported as cuGraphInstantiate and cuGraphInstantiate_v2. */
CUresult standin_cuGraphInstantiate_legacy(CUgraphExec *out, CUgraph graph, CUgraphNode *error_node, char *log,
                                           size_t log_bytes) __asm__("cuGraphInstantiate_v2");
CUresult standin_cuGraphInstantiate_legacy(CUgraphExec *out, CUgraph graph, CUgraphNode *error_node, char *log,
                                           size_t log_bytes) {
    (void)log;
    (void)log_bytes;
    if (error_node)
        *error_node = NULL;
    return cuGraphInstantiateWithFlags(out, graph, 0);
}
extern __typeof__(standin_cuGraphInstantiate_legacy) standin_cuGraphInstantiate_plain
    __asm__("cuGraphInstantiate") __attribute__((alias("cuGraphInstantiate_v2")));

CUresult cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    CUresult result = cuGraphInstantiateWithFlags(out, graph, params ? params->flags : 0);
    if (params)
        params->result_out = result == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return result;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
    if (!scuda_handle_live(exec) || exec->magic != EXEC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    scuda_handle_remove(exec);
    exec->magic = DEAD_MAGIC;
    node_list_release(exec->nodes);
    free(exec);
    return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
    if (!scuda_handle_live(exec) || exec->magic != EXEC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    atomic_fetch_add(&exec->nodes->refs, 1);
    CUresult result = standin_stream_enqueue(stream, node_list_run, exec->nodes, node_list_release_work);
    if (result != CUDA_SUCCESS)
        node_list_release(exec->nodes);
    return result;
}

/* ---- capture ---- */

CUresult cuStreamBeginCapture_v2(CUstream handle, CUstreamCaptureMode mode) {
    (void)mode;
    if (handle == NULL || handle == CU_STREAM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream)
        return CUDA_ERROR_INVALID_HANDLE;
    struct capture *capture = calloc(1, sizeof *capture);
    if (!capture)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult result = cuGraphCreate(&capture->graph, 0);
    if (result != CUDA_SUCCESS) {
        free(capture);
        return result;
    }
    pthread_mutex_lock(&scuda_capture_lock);
    if (stream->capture) {
        pthread_mutex_unlock(&scuda_capture_lock);
        cuGraphDestroy(capture->graph);
        free(capture);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    capture->id = ++capture_ids;
    capture->origin = stream;
    stream->capture = capture;
    pthread_mutex_unlock(&scuda_capture_lock);
    return CUDA_SUCCESS;
}
extern __typeof__(cuStreamBeginCapture_v2) standin_cuStreamBeginCapture_plain __asm__("cuStreamBeginCapture")
    __attribute__((alias("cuStreamBeginCapture_v2")));

/* Ends the capture for every stream in it; the capture record stays (events may name it). */
CUresult cuStreamEndCapture(CUstream handle, CUgraph *graph_out) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!graph_out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&scuda_capture_lock);
    struct capture *capture = stream->capture;
    if (!capture || capture->origin != stream) {
        pthread_mutex_unlock(&scuda_capture_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    for (struct CUstream_st *member = atomic_load(&scuda_all_streams); member; member = member->next_of_all)
        if (member->capture == capture)
            member->capture = NULL;
    *graph_out = capture->graph;
    capture->graph = NULL;
    pthread_mutex_unlock(&scuda_capture_lock);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream handle, CUstreamCaptureStatus *status) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&scuda_capture_lock);
    *status = stream->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    pthread_mutex_unlock(&scuda_capture_lock);
    return CUDA_SUCCESS;
}

/* The v3 form (the header's cuStreamGetCaptureInfo); dependencies are never reported. */
CUresult cuStreamGetCaptureInfo(CUstream handle, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                                const CUgraphNode **dependencies, const CUgraphEdgeData **edges, size_t *count) {
    CUstream stream = scuda_stream_resolve(handle);
    if (!stream)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&scuda_capture_lock);
    struct capture *capture = stream->capture;
    *status = capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id && capture)
        *id = capture->id;
    if (graph)
        *graph = capture ? capture->graph : NULL;
    pthread_mutex_unlock(&scuda_capture_lock);
    if (dependencies)
        *dependencies = NULL;
    if (edges)
        *edges = NULL;
    if (count)
        *count = 0;
    return CUDA_SUCCESS;
}

CUresult standin_cuStreamGetCaptureInfo_v1(CUstream stream, CUstreamCaptureStatus *status, cuuint64_t *id)
    __asm__("cuStreamGetCaptureInfo");
CUresult standin_cuStreamGetCaptureInfo_v1(CUstream stream, CUstreamCaptureStatus *status, cuuint64_t *id) {
    return cuStreamGetCaptureInfo(stream, status, id, NULL, NULL, NULL, NULL);
}

CUresult standin_cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus *status, cuuint64_t *id,
                                           CUgraph *graph, const CUgraphNode **dependencies, size_t *count)
    __asm__("cuStreamGetCaptureInfo_v2");
CUresult standin_cuStreamGetCaptureInfo_v2(CUstream stream, CUstreamCaptureStatus *status, cuuint64_t *id,
                                           CUgraph *graph, const CUgraphNode **dependencies, size_t *count) {
    return cuStreamGetCaptureInfo(stream, status, id, graph, dependencies, NULL, count);
}

extern __typeof__(cuEventDestroy_v2) standin_cuEventDestroy_plain __asm__("cuEventDestroy")
    __attribute__((alias("cuEventDestroy_v2")));
extern __typeof__(cuEventElapsedTime_v2) standin_cuEventElapsedTime_plain __asm__("cuEventElapsedTime")
    __attribute__((alias("cuEventElapsedTime_v2")));
