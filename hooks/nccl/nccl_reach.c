/* nccl_reach.c: say when NCCL is out of reach. NCCL linked statically into a framework (some
 * JAX and TensorFlow wheels) has no symbol the shim can interpose on: at exit, at
 * REPROD_VERBOSE=1, a process that used CUDA, made no NCCL call the shim saw and loaded no
 * libnccl is told so in one line. */
#include "runtime/config.h"
#include "interpose/init.h"
#include "runtime/log.h"

#include <link.h>
#include <string.h>

struct loaded {
    int cuda, nccl;
};

static int look_at_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct loaded *loaded = data;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    loaded->cuda |= strstr(name, "libcuda.so") != NULL;
    loaded->nccl |= strstr(name, "libnccl") != NULL;
    return 0;
}

static void note_unreached_nccl(void)
{
    if (reprod_config()->verbose < 1) return;
    struct loaded loaded = {0, 0};
    dl_iterate_phdr(look_at_object, &loaded);
    if (loaded.cuda && !loaded.nccl)
        reprod_log(REPROD_LOG_INFO,
                   "note: this process used CUDA but loaded no libnccl: if a framework linked "
                   "NCCL statically, its collectives were out of the shim's reach");
}

__attribute__((constructor)) static void register_note(void)
{
    reprod_init_on_exit(note_unreached_nccl);
}
