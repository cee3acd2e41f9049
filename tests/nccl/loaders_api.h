/* loaders_api.h: the NCCL functions tests/nccl/loaders.c calls, however it found them. */
#ifndef REPROD_LOADERS_API_H
#define REPROD_LOADERS_API_H

#include <nccl.h>

struct loader_api {
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*comm_destroy)(ncclComm_t);
};

#endif
