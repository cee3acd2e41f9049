/* nccl_user.c: a library that depends on libnccl, as libtorch_cuda.so does: tests/nccl/
 * loaders.c opens it RTLD_LOCAL, so libnccl comes in as a dependency of a local object. */
#include "loaders_api.h"

void nccl_user_api(struct loader_api *api);

void nccl_user_api(struct loader_api *api)
{
    api->get_unique_id = ncclGetUniqueId;
    api->comm_init_rank = ncclCommInitRank;
    api->all_reduce = ncclAllReduce;
    api->comm_destroy = ncclCommDestroy;
}
