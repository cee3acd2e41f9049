/* nccl_rounds.c: how a list of deferred calls (a group's, or one deterministic call) runs: in
 * rounds, one real group per round.
 *
 * In each round, the earliest unfinished call of each communicator takes its next step, so
 * that a communicator's calls run as they would ungrouped, whatever another rank grouped; the
 * communicators go in lockstep, so that a thread driving several GPUs' ranks never waits on a
 * rank it has not launched yet. A group's point-to-point calls on one communicator go together
 * in its first round: NCCL runs them together, and a receive may need the send of the same
 * group to progress (past the library's buffering they would wait on each other in separate
 * groups); NCCL orders them against nothing else of the group, so ranks may place them
 * differently. A deterministic call takes its scratch at its first step and gives
 * it back after its last: a group holds one call's scratch per communicator at a time.
 *
 * A communicator on which NCCL failed a call gets nothing more from the list; nor does one
 * destroyed or aborted since (nccl_comm_current), which the shim never touches again. A failure
 * of the shim's own arithmetic does not stop the rounds (the other ranks wait in them): the
 * call returns it at the end.
 *
 * Blocking communicators run the rounds to the end inside the call. Nonblocking ones never
 * wait inside the shim: a round is issued, and the next only once the library reports the
 * communicators ready, which the shim learns when the application polls ncclCommGetAsyncError
 * (hooked here): until the list is done the application sees ncclInProgress, as NCCL's own
 * protocol has it, and its own timeout (PyTorch's watchdog) keeps running. Such a list is a
 * pending job in a table under one mutex, never held across a call into NCCL; a thread that
 * finds the job busy with another just reports ncclInProgress.
 */
#include "nccl/nccl_internal.h"

#include "interpose/guard.h"
#include "runtime/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int point_to_point(const struct nccl_work *w)
{
    return w->passthrough && (w->collective == NCCL_SEND || w->collective == NCCL_RECV);
}

/* 1 when `comm` has an unfinished point-to-point call in the list. */
static int has_point_to_point(const struct nccl_work *works, ncclComm_t comm)
{
    for (const struct nccl_work *w = works; w; w = w->next)
        if (!w->done && w->comm == comm && point_to_point(w)) return 1;
    return 0;
}

/* Mark the works that take a step in this round: a communicator's unfinished point-to-point
 * calls all together, first (NCCL orders a group's point-to-point calls against nothing else
 * in it, so ranks may place them differently); then, one a round, its earliest unfinished
 * work, unless that work waits for its layout from the device (the fixed route's second
 * pass: its communicator takes no step until it arrives). Returns how many. */
static int choose_turns(struct nccl_work *works)
{
    int count = 0;
    for (struct nccl_work *w = works; w; w = w->next)
        w->turn = 0;
    for (struct nccl_work *w = works; w; w = w->next) {
        if (w->done) continue;
        if (has_point_to_point(works, w->comm)) {
            w->turn = point_to_point(w);
        } else {
            struct nccl_work *first = works;
            while (first != w && (first->done || first->comm != w->comm))
                first = first->next;
            w->turn = first == w && !nccl_fixed_waiting(w);
        }
        count += w->turn;
    }
    return count;
}

/* Give up every unfinished work of `comm`, with `rc`. */
static void drop_comm(struct nccl_work *works, ncclComm_t comm, ncclResult_t rc)
{
    for (struct nccl_work *w = works; w; w = w->next)
        if (!w->done && w->comm == comm) nccl_work_drop(w, rc);
}

/* Give up the works of communicators destroyed or aborted since they were made. */
static void drop_gone(struct nccl_work *works)
{
    for (struct nccl_work *w = works; w; w = w->next)
        if (!w->done && !nccl_comm_current(w->comm, w->info.serial))
            drop_comm(works, w->comm, ncclInvalidUsage);
}

/* 1 when an unfinished work waits for its layout from the device. */
static int any_waiting(struct nccl_work *works)
{
    for (struct nccl_work *w = works; w; w = w->next)
        if (!w->done && nccl_fixed_waiting(w)) return 1;
    return 0;
}

#define WAIT_POLL_NS    20000L    /* between looks at the layouts on their way back */
#define WAIT_LOCKSTEP_NS 50000000L /* how long the ready works wait for the others' layouts */

/* Before a round of a blocking list in which some works wait for their layout: wait for all of
 * them while no work can take a step; while some can, wait a while (so that communicators
 * driven by one thread stay in lockstep: their layouts come back within microseconds of each
 * other), then go on without the late ones (a peer may need this rank's other steps first:
 * waiting for good could deadlock when ranks grouped differently). Never waits holding a lock. */
static void wait_layouts(struct nccl_work *works)
{
    long waited = 0;
    struct timespec pause = {0, WAIT_POLL_NS};
    while (any_waiting(works)) {
        drop_gone(works);
        if (choose_turns(works) && waited >= WAIT_LOCKSTEP_NS) return;
        nanosleep(&pause, NULL);
        waited += WAIT_POLL_NS;
    }
}

/* The deterministic works that take their first step get their scratch. */
static void start_turns(struct nccl_work *works)
{
    for (struct nccl_work *w = works; w; w = w->next) {
        if (!w->turn || w->passthrough || w->started) continue;
        ncclResult_t rc = nccl_work_start(w);
        if (rc == ncclSuccess) continue;
        /* The other ranks are already in this call: as on the MPI path, the job stops here
         * rather than leave them waiting (aborting the application's communicator under its
         * feet would make its next call on it a use after free). */
        reprod_log(REPROD_LOG_ERROR,
                   "error: %s could not start on this rank (no device memory for its scratch); "
                   "the other ranks are already in this call, so the job stops here rather than "
                   "hang",
                   w->api);
        _exit(2);
    }
}

/* Issue the round's steps in one real group; the group's end. A step refused, or a group that
 * failed, is the result of the works concerned. */
static ncclResult_t issue_round(struct nccl_work *works)
{
    const struct nccl_real *real = nccl_real();
    ncclResult_t rc = real->GroupStart();
    for (struct nccl_work *w = works; w && rc == ncclSuccess; w = w->next) {
        if (!w->turn) continue;
        ncclResult_t step = w->passthrough ? nccl_call_issue(&w->call) : nccl_work_communicate(w);
        if (step != ncclSuccess && step != ncclInProgress && w->result == ncclSuccess)
            w->result = step;
    }
    if (rc == ncclSuccess) rc = real->GroupEnd();
    if (rc != ncclSuccess && rc != ncclInProgress)
        for (struct nccl_work *w = works; w; w = w->next)
            if (w->turn && w->result == ncclSuccess) w->result = rc;
    return rc;
}

/* After the round's group was launched: each step moves on; a communicator whose step failed
 * gets nothing more. */
static void finish_round(struct nccl_work *works)
{
    for (struct nccl_work *w = works; w; w = w->next) {
        if (!w->turn || w->done) continue;
        w->turn = 0;
        if (w->result != ncclSuccess)
            drop_comm(works, w->comm, w->result);
        else if (w->passthrough)
            w->done = 1;
        else
            nccl_work_advance(w);
    }
}

/* The first error of the list, or ncclSuccess; the pass-through calls traced. */
static ncclResult_t list_result(struct nccl_work *works)
{
    ncclResult_t first = ncclSuccess;
    for (struct nccl_work *w = works; w; w = w->next) {
        if (w->result != ncclSuccess && first == ncclSuccess) first = w->result;
        if (w->local_error != ncclSuccess && first == ncclSuccess) first = w->local_error;
        if (w->passthrough && w->trace_reason && w->result == ncclSuccess &&
            nccl_comm_current(w->comm, w->info.serial))
            nccl_trace_call(&w->call, w->trace_reason);
    }
    return first;
}

/* Blocking communicators: every round now; the first error. */
static ncclResult_t run_blocking(struct nccl_work *works)
{
    for (;;) {
        drop_gone(works);
        wait_layouts(works);
        if (!choose_turns(works)) break;
        start_turns(works);
        issue_round(works);
        finish_round(works);
    }
    ncclResult_t rc = list_result(works);
    nccl_works_free(works);
    return rc;
}

/* ---- Nonblocking communicators: jobs advanced by the application's polls ---------------- */

struct job {
    struct nccl_work *works;
    int launched; /* the last group issued must be launched before the next round */
    int busy;     /* a thread is advancing it (jobs_lock) */
    int done;     /* (jobs_lock) */
    struct job *next;
};

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job *jobs;       /* pending, newest first (jobs_lock) */
static _Atomic int jobs_count; /* how many: 0 lets every hook skip the table */

/* 1 when `job` holds `comm`: it has work on it. */
static int job_holds(const struct job *job, ncclComm_t comm)
{
    for (const struct nccl_work *w = job->works; w; w = w->next)
        if (w->comm == comm) return 1;
    return 0;
}

/* The pending job holding `comm`, or NULL; call with jobs_lock held. */
static struct job *job_of(ncclComm_t comm)
{
    for (struct job *job = jobs; job; job = job->next)
        if (!job->done && job_holds(job, comm)) return job;
    return NULL;
}

static void job_unlink(struct job *job)
{
    for (struct job **p = &jobs; *p; p = &(*p)->next)
        if (*p == job) {
            *p = job->next;
            atomic_fetch_sub(&jobs_count, 1);
            return;
        }
}

/* 1 when every communicator with unfinished work in the list reports ready; one that reports
 * an error gets nothing more. Never waits. */
static int comms_ready(struct nccl_work *works)
{
    const struct nccl_real *real = nccl_real();
    int ready = 1;
    for (struct nccl_work *w = works; w; w = w->next) {
        if (w->done || !real->CommGetAsyncError) continue;
        ncclResult_t state = ncclInProgress;
        if (real->CommGetAsyncError(w->comm, &state) != ncclSuccess) state = ncclInvalidUsage;
        if (state == ncclInProgress)
            ready = 0;
        else if (state != ncclSuccess)
            drop_comm(works, w->comm, state);
    }
    return ready;
}

/* Advance `job` (busy: owned by the caller) as far as its communicators are ready; 1 when it
 * is complete. */
static int job_advance(struct job *job)
{
    for (;;) {
        drop_gone(job->works);
        if (job->launched) {
            if (!comms_ready(job->works)) return 0;
            job->launched = 0;
            finish_round(job->works);
        }
        if (!choose_turns(job->works)) return !any_waiting(job->works);
        start_turns(job->works);
        issue_round(job->works);
        job->launched = 1;
    }
}

/* The job is no longer busy; when complete it leaves the table, and its result is returned
 * (the list freed), else ncclInProgress. */
static ncclResult_t job_release(struct job *job, int complete)
{
    pthread_mutex_lock(&jobs_lock);
    job->busy = 0;
    job->done = complete;
    if (complete) job_unlink(job);
    pthread_mutex_unlock(&jobs_lock);
    if (!complete) return ncclInProgress;
    ncclResult_t rc = list_result(job->works);
    nccl_works_free(job->works);
    free(job);
    return rc;
}

/* Nonblocking: a job, advanced now as far as it goes, then at each poll. */
static ncclResult_t run_nonblocking(struct nccl_work *works)
{
    struct job *job = calloc(1, sizeof *job);
    if (!job) {
        nccl_works_free(works);
        return ncclSystemError;
    }
    job->works = works;
    job->launched = 1; /* the application's group just ended may still be launching */
    job->busy = 1;
    pthread_mutex_lock(&jobs_lock);
    job->next = jobs;
    jobs = job;
    atomic_fetch_add(&jobs_count, 1);
    pthread_mutex_unlock(&jobs_lock);
    ncclResult_t rc = job_release(job, job_advance(job));
    return rc == ncclSuccess ? ncclInProgress : rc; /* NCCL's answer for a launch on its thread */
}

ncclResult_t nccl_rounds_run(struct nccl_work *works)
{
    for (struct nccl_work *w = works; w; w = w->next)
        if (!w->info.blocking) return run_nonblocking(works);
    return run_blocking(works);
}

int nccl_rounds_hold(ncclComm_t comm)
{
    if (!atomic_load(&jobs_count)) return 0;
    pthread_mutex_lock(&jobs_lock);
    int held = job_of(comm) != NULL;
    pthread_mutex_unlock(&jobs_lock);
    return held;
}

void nccl_rounds_comm_gone(ncclComm_t comm)
{
    if (!atomic_load(&jobs_count)) return;
    for (;;) {
        pthread_mutex_lock(&jobs_lock);
        struct job *job = job_of(comm);
        int mine = job && !job->busy;
        if (mine) job->busy = 1;
        pthread_mutex_unlock(&jobs_lock);
        /* A job busy in another thread drops the communicator itself (drop_gone). */
        if (!mine) return;
        drop_comm(job->works, comm, ncclInvalidUsage);
        struct nccl_work *w = job->works;
        while (w && w->done)
            w = w->next;
        if (!w) {
            job_release(job, 1);
            continue;
        }
        /* Still work on other communicators: it no longer holds this one (the list changes
         * under the lock: other threads look for communicators in it). */
        struct nccl_work *removed = NULL;
        pthread_mutex_lock(&jobs_lock);
        for (struct nccl_work **p = &job->works; *p;) {
            struct nccl_work *gone = *p;
            if (gone->comm != comm) {
                p = &gone->next;
                continue;
            }
            *p = gone->next;
            gone->next = removed;
            removed = gone;
        }
        pthread_mutex_unlock(&jobs_lock);
        nccl_works_free(removed);
        job_release(job, 0);
    }
}

/* The application polls `comm`: advance the job holding it, if no other thread is; what the
 * application sees is ncclInProgress until the job is complete. */
static void poll_job(ncclComm_t comm, ncclResult_t *state)
{
    const struct nccl_real *real = nccl_real();
    pthread_mutex_lock(&jobs_lock);
    struct job *job = job_of(comm);
    int mine = job && !job->busy && !nccl_group_open(); /* never inside the caller's group */
    if (mine) job->busy = 1;
    pthread_mutex_unlock(&jobs_lock);
    if (!job) return;
    if (!mine) {
        if (*state == ncclSuccess) *state = ncclInProgress;
        return;
    }
    ncclResult_t rc = job_release(job, job_advance(job));
    if (real->CommGetAsyncError(comm, state) != ncclSuccess) return;
    if (*state == ncclSuccess && rc != ncclSuccess) *state = rc;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);

REPROD_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    const struct nccl_real *real = nccl_real();
    if (!real->CommGetAsyncError) return ncclSystemError;
    ncclResult_t rc = real->CommGetAsyncError(comm, async_error);
    if (rc == ncclSuccess && async_error && atomic_load(&jobs_count) && !reprod_guard_active())
        poll_job(comm, async_error);
    return rc;
}
