/* resolve.c: symbol resolution by RTLD_NEXT, then by walking the loaded objects. */
#include "interpose/resolve.h"

#include "common.h"
#include "interpose/once.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

/* The most objects and bytes of their names a walk looks at: a PyTorch process loads a few
 * hundred objects; names beyond the budget are skipped, not truncated. */
#define MAX_OBJECTS     1024
#define NAME_BUFFER_LEN (MAX_OBJECTS * 96)

struct object_list {
    int count;
    size_t used;
    const char *shim_path; /* our own file, skipped */
    int offsets[MAX_OBJECTS];
    char names[NAME_BUFFER_LEN];
};

/* dl_iterate_phdr callback: copy each object's name (the loader's strings may go away once
 * its lock is dropped, and dlopen must not run under it). The main program has the empty
 * name. */
static int collect_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct object_list *list = data;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    size_t length = strlen(name) + 1;
    if (list->count >= MAX_OBJECTS || list->used + length > NAME_BUFFER_LEN) return 0;
    if (list->shim_path && strcmp(name, list->shim_path) == 0) return 0;
    if (strstr(name, "linux-vdso") || strstr(name, "linux-gate")) return 0;
    memcpy(list->names + list->used, name, length);
    list->offsets[list->count++] = (int)list->used;
    list->used += length;
    return 0;
}

/* glibc (2.36) does not reset the lock dl_iterate_phdr takes in a fork child: after a fork
 * made while another thread was inside it, the child's next dl_iterate_phdr (ours, or the C++
 * unwinder's) waits for ever. So a fork waits until no walk of ours is inside it, and holds
 * new ones back until it is done; the child starts with both counts at zero. The counts are
 * sequentially consistent atomics: a walk and a fork that start together see each other. */
static _Atomic int walks_listing; /* threads inside dl_iterate_phdr for a walk */
static _Atomic int forks_pending; /* forks between their prepare and parent handlers */
static struct reprod_once fork_gate_once = REPROD_ONCE_INIT;
/* 1 while this thread is inside: a fork from a signal handler that interrupted it must not
 * wait for itself. */
static _Thread_local int listing_here __attribute__((tls_model("initial-exec")));

static void before_fork(void)
{
    atomic_fetch_add(&forks_pending, 1);
    while (atomic_load(&walks_listing) > listing_here)
        sched_yield();
}

static void after_fork_in_parent(void)
{
    atomic_fetch_sub(&forks_pending, 1);
}

static void after_fork_in_child(void)
{
    atomic_store(&forks_pending, 0);
    atomic_store(&walks_listing, 0);
}

static void register_fork_gate(void)
{
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* dl_iterate_phdr(collect_object, list), never while a fork is under way. */
static void list_objects(struct object_list *list)
{
    reprod_once(&fork_gate_once, register_fork_gate);
    for (;;) {
        while (atomic_load(&forks_pending))
            sched_yield();
        atomic_fetch_add(&walks_listing, 1);
        if (!atomic_load(&forks_pending)) break;
        atomic_fetch_sub(&walks_listing, 1);
    }
    listing_here = 1;
    dl_iterate_phdr(collect_object, list);
    listing_here = 0;
    atomic_fetch_sub(&walks_listing, 1);
}

/* 1 when `address` lies inside the shim itself. */
static int inside_shim(const void *address)
{
    Dl_info mine, theirs;
    if (!dladdr((void *)&inside_shim, &mine) || !dladdr(address, &theirs)) return 0;
    return mine.dli_fbase == theirs.dli_fbase;
}

/* Walk the loaded objects in load order for `name`, only those whose path contains
 * `library` when it is not NULL. NULL when none defines it, or when no memory is left. */
static void *walk_objects(const char *name, const char *library)
{
    /* ~100 KB, too big for a small thread stack: each walk maps its own list. No lock is held
     * across dlopen and dlsym, and a fork child can walk whatever its parent's other threads
     * were doing (a lock held by one of them would stay held in the child for ever). */
    struct object_list *list =
        mmap(NULL, sizeof *list, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (list == MAP_FAILED) return NULL;
    void *found = NULL;
    Dl_info mine;
    list->count = 0;
    list->used = 0;
    list->shim_path = dladdr((void *)&walk_objects, &mine) ? mine.dli_fname : NULL;
    list_objects(list);
    for (int i = 0; i < list->count; i++) {
        const char *path = list->names + list->offsets[i];
        if (library && !strstr(path, library)) continue;
        void *handle = dlopen(path[0] ? path : NULL, RTLD_LAZY | RTLD_NOLOAD);
        if (!handle) continue;
        void *symbol = reprod_dlsym(handle, name);
        dlclose(handle);
        if (symbol && !inside_shim(symbol)) {
            found = symbol;
            break;
        }
    }
    munmap(list, sizeof *list);
    return found;
}

void *reprod_resolve(const char *name)
{
    void *symbol = reprod_dlsym(RTLD_NEXT, name);
    if (symbol && !inside_shim(symbol)) return symbol;
    return walk_objects(name, NULL);
}

void *reprod_resolve_data(const char *name)
{
    void *symbol = reprod_dlsym(RTLD_DEFAULT, name);
    if (symbol && !inside_shim(symbol)) return symbol;
    return walk_objects(name, NULL);
}
