/* namespaces.c: a program that loads libnccl into a link-map namespace of its own (dlmopen
 * LM_ID_NEWLM, as a plugin host isolating a library's dependencies does) and calls it through
 * dlsym: ncclGetVersion, ncclGetUniqueId, ncclCommInitRank of a one-rank communicator and
 * ncclCommDestroy. The main namespace has no libnccl, and a preloaded library is not loaded into
 * the new namespace: whatever dlsym answers must work there. Built without -lnccl.
 * Usage: namespaces LIBNCCL. Prints "ok: ..." and exits 0 when every call succeeded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int result_t; /* ncclResult_t */
typedef struct {
    char internal[128];
} unique_id_t;

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "libnccl.so.2";
    void *nccl = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
    if (!nccl) {
        fprintf(stderr, "namespaces: dlmopen %s: %s\n", path, dlerror());
        return 1;
    }
    result_t (*get_unique_id)(unique_id_t *) =
        (result_t(*)(unique_id_t *))dlsym(nccl, "ncclGetUniqueId");
    result_t (*init_rank)(void **, int, unique_id_t, int) =
        (result_t(*)(void **, int, unique_id_t, int))dlsym(nccl, "ncclCommInitRank");
    result_t (*destroy)(void *) = (result_t(*)(void *))dlsym(nccl, "ncclCommDestroy");
    result_t (*get_version)(int *) = (result_t(*)(int *))dlsym(nccl, "ncclGetVersion");
    if (!get_unique_id || !init_rank || !destroy || !get_version) {
        fprintf(stderr, "namespaces: a function is missing from %s\n", path);
        return 1;
    }
    unique_id_t id;
    void *comm = NULL;
    int version = 0;
    result_t rc = get_version(&version);
    if (rc == 0) rc = get_unique_id(&id);
    if (rc == 0) rc = init_rank(&comm, 1, id, 0);
    if (rc != 0) {
        fprintf(stderr, "namespaces: ncclCommInitRank in the new namespace returned %d\n", rc);
        return 1;
    }
    rc = destroy(comm);
    if (rc != 0) {
        fprintf(stderr, "namespaces: ncclCommDestroy in the new namespace returned %d\n", rc);
        return 1;
    }
    Dl_info where;
    int found = dladdr((void *)init_rank, &where);
    printf("ok: NCCL %d in a namespace of its own: ncclCommInitRank and ncclCommDestroy succeeded "
           "(dlsym answered %s)\n",
           version, found && where.dli_fname ? where.dli_fname : "?");
    return 0;
}
