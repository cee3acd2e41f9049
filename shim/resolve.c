/* resolve.c: symbol resolution by RTLD_NEXT, then by walking the loaded objects. */
#include "resolve.h"

#include "common.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

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
 * the walk's lock is dropped). The main program has the empty name. */
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

/* 1 when `address` lies inside the shim itself. */
static int inside_shim(const void *address)
{
    Dl_info mine, theirs;
    if (!dladdr((void *)&inside_shim, &mine) || !dladdr(address, &theirs)) return 0;
    return mine.dli_fbase == theirs.dli_fbase;
}

/* Walk the loaded objects in load order for `name`, only those whose path contains
 * `library` when it is not NULL. */
static void *walk_objects(const char *name, const char *library)
{
    /* ~100 KB, too big for a small thread stack and too big to give every thread of the host
     * a copy: one list, under a lock. Resolution is rare (once per symbol); RTLD_NOLOAD runs
     * no constructor, so nothing re-enters while the lock is held. */
    static struct object_list list;
    static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
    void *found = NULL;
    Dl_info mine;
    pthread_mutex_lock(&list_lock);
    list.count = 0;
    list.used = 0;
    list.shim_path = dladdr((void *)&walk_objects, &mine) ? mine.dli_fname : NULL;
    dl_iterate_phdr(collect_object, &list);
    for (int i = 0; i < list.count; i++) {
        const char *path = list.names + list.offsets[i];
        if (library && !strstr(path, library)) continue;
        void *handle = dlopen(path[0] ? path : NULL, RTLD_LAZY | RTLD_NOLOAD);
        if (!handle) continue;
        void *symbol = dlsym(handle, name);
        dlclose(handle);
        if (symbol && !inside_shim(symbol)) {
            found = symbol;
            break;
        }
    }
    pthread_mutex_unlock(&list_lock);
    return found;
}

void *reprod_resolve(const char *name)
{
    void *symbol = dlsym(RTLD_NEXT, name);
    if (symbol && !inside_shim(symbol)) return symbol;
    return walk_objects(name, NULL);
}

void *reprod_resolve_data(const char *name)
{
    void *symbol = dlsym(RTLD_DEFAULT, name);
    if (symbol && !inside_shim(symbol)) return symbol;
    return walk_objects(name, NULL);
}
