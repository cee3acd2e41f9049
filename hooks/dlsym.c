/* dlsym.c: dlsym itself, so that a framework that dlopens libnccl and looks its functions up
 * by name (XLA's NCCL stub, TensorFlow, Paddle) reaches the shim's hooks: LD_PRELOAD alone
 * changes what the dynamic linker binds, not what dlsym(handle, "ncclAllReduce") answers.
 *
 * Only names the shim hooks, found in the library asked, are answered with the shim's own
 * function; every other lookup is glibc's answer. dlsym(RTLD_NEXT, ...) depends on its
 * caller's address, so that case jumps to glibc's dlsym as a tail call (this file is built
 * without instrumentation: see the Makefile), leaving the caller's return address in place.
 */
#include "common.h"
#include "resolve.h"

#include <dlfcn.h>
#include <string.h>

/* The hooks (hooks/nccl*.c); only their addresses are taken here. */
void ncclAllReduce(void);
void ncclReduceScatter(void);
void ncclReduce(void);
void ncclGroupStart(void);
void ncclGroupEnd(void);
void ncclGroupSimulateEnd(void);
void ncclRedOpCreatePreMulSum(void);
void ncclRedOpDestroy(void);
void ncclCommInitRank(void);
void ncclCommInitRankConfig(void);
void ncclCommInitAll(void);
void ncclCommInitRankScalable(void);
void ncclCommSplit(void);
void ncclCommDestroy(void);
void ncclCommAbort(void);
void ncclCommFinalize(void);
void ncclAllGather(void);
void ncclBroadcast(void);
void ncclBcast(void);
void ncclSend(void);
void ncclRecv(void);
void ncclGather(void);
void ncclScatter(void);
void ncclAlltoAll(void);

#define HOOKED(name) {#name, (void *)name}

/* The NCCL functions the shim defines. */
static const struct {
    const char *name;
    void *hook;
} hooked[] = {
    HOOKED(ncclAllReduce),        HOOKED(ncclReduceScatter),
    HOOKED(ncclReduce),           HOOKED(ncclGroupStart),
    HOOKED(ncclGroupEnd),         HOOKED(ncclGroupSimulateEnd), HOOKED(ncclRedOpCreatePreMulSum),
    HOOKED(ncclRedOpDestroy),     HOOKED(ncclCommInitRank),
    HOOKED(ncclCommInitRankConfig), HOOKED(ncclCommInitAll),
    HOOKED(ncclCommInitRankScalable), HOOKED(ncclCommSplit),
    HOOKED(ncclCommDestroy),      HOOKED(ncclCommAbort),
    HOOKED(ncclCommFinalize),     HOOKED(ncclAllGather),
    HOOKED(ncclBroadcast),        HOOKED(ncclBcast),
    HOOKED(ncclSend),             HOOKED(ncclRecv),
    HOOKED(ncclGather),           HOOKED(ncclScatter),
    HOOKED(ncclAlltoAll),
};

void *dlsym(void *handle, const char *name);

REPROD_EXPORT void *dlsym(void *handle, const char *name)
{
    if (handle == RTLD_NEXT) return reprod_glibc_dlsym()(handle, name); /* a tail call */
    void *found = reprod_dlsym(handle, name);
    if (!found || strncmp(name, "nccl", 4) != 0) return found;
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(hooked); i++)
        if (strcmp(name, hooked[i].name) == 0) return hooked[i].hook;
    return found;
}
