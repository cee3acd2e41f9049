/* nccl_api.h: NCCL as the hooks see it, without nccl.h: the types and constants restated from
 * NCCL 2.28's header (stable since 2.19), and the real library's functions, found at run time.
 *
 * Nothing links against NCCL. The real functions are looked up among the loaded objects (also
 * a libnccl that PyTorch loaded RTLD_LOCAL as a dependency of libtorch_cuda.so), under their
 * ncclX names, which the shim itself defines too: reprod_resolve skips the shim.
 */
#ifndef REPROD_NCCL_API_H
#define REPROD_NCCL_API_H

#include "device/cuda.h"
#include "interpose/real.h"

#include <stddef.h>

typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef int ncclScalarResidence_t;
typedef reprod_stream cudaStream_t;

/* ncclResult_t */
enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
};

/* ncclDataType_t */
enum {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclFloat32 = 7,
    ncclFloat64 = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12,
};

/* ncclRedOp_t: the built-in ops; ops made by ncclRedOpCreatePreMulSum come after. */
enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
};

/* ncclScalarResidence_t */
enum {
    ncclScalarDevice = 0,
    ncclScalarHostImmediate = 1,
};

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ncclConfig_t's head, as far as the shim reads it: size, magic, version, then blocking. The
 * rest of the struct is NCCL's and is passed on untouched. */
struct nccl_config_head {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
};
typedef struct nccl_config_head ncclConfig_t;

/* The real library's functions the shim calls (NULL where the library lacks one): X(field,
 * symbol, type) for interpose/real.h. */
/* clang-format off */
#define REPROD_NCCL_FUNCTIONS(X)                                                                   \
    X(GetVersion, "ncclGetVersion", ncclResult_t (*)(int *))                                       \
    X(CommInitRank, "ncclCommInitRank", ncclResult_t (*)(ncclComm_t *, int, ncclUniqueId, int))    \
    X(CommInitRankConfig, "ncclCommInitRankConfig",                                                \
      ncclResult_t (*)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *))                      \
    X(CommInitAll, "ncclCommInitAll", ncclResult_t (*)(ncclComm_t *, int, const int *))            \
    X(CommInitRankScalable, "ncclCommInitRankScalable",                                            \
      ncclResult_t (*)(ncclComm_t *, int, int, int, ncclUniqueId *, ncclConfig_t *))               \
    X(CommSplit, "ncclCommSplit",                                                                  \
      ncclResult_t (*)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *))                        \
    X(CommDestroy, "ncclCommDestroy", ncclResult_t (*)(ncclComm_t))                                \
    X(CommAbort, "ncclCommAbort", ncclResult_t (*)(ncclComm_t))                                    \
    X(CommFinalize, "ncclCommFinalize", ncclResult_t (*)(ncclComm_t))                              \
    X(CommCount, "ncclCommCount", ncclResult_t (*)(const ncclComm_t, int *))                       \
    X(CommUserRank, "ncclCommUserRank", ncclResult_t (*)(const ncclComm_t, int *))                 \
    X(CommCuDevice, "ncclCommCuDevice", ncclResult_t (*)(const ncclComm_t, int *))                 \
    X(CommGetAsyncError, "ncclCommGetAsyncError", ncclResult_t (*)(ncclComm_t, ncclResult_t *))    \
    X(AllReduce, "ncclAllReduce",                                                                  \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,      \
                       cudaStream_t))                                                              \
    X(ReduceScatter, "ncclReduceScatter",                                                          \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,      \
                       cudaStream_t))                                                              \
    X(Reduce, "ncclReduce",                                                                        \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, \
                       cudaStream_t))                                                              \
    X(AllGather, "ncclAllGather",                                                                  \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))    \
    X(Broadcast, "ncclBroadcast",                                                                  \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,              \
                       cudaStream_t))                                                              \
    X(Gather, "ncclGather",                                                                        \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,              \
                       cudaStream_t))                                                              \
    X(Scatter, "ncclScatter",                                                                      \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,              \
                       cudaStream_t))                                                              \
    X(AlltoAll, "ncclAlltoAll",                                                                    \
      ncclResult_t (*)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))    \
    X(Send, "ncclSend",                                                                            \
      ncclResult_t (*)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))       \
    X(Recv, "ncclRecv",                                                                            \
      ncclResult_t (*)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))             \
    X(GroupStart, "ncclGroupStart", ncclResult_t (*)(void))                                        \
    X(GroupEnd, "ncclGroupEnd", ncclResult_t (*)(void))                                            \
    X(GroupSimulateEnd, "ncclGroupSimulateEnd", ncclResult_t (*)(void *))                          \
    X(RedOpCreatePreMulSum, "ncclRedOpCreatePreMulSum",                                            \
      ncclResult_t (*)(ncclRedOp_t *, void *, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))  \
    X(RedOpDestroy, "ncclRedOpDestroy", ncclResult_t (*)(ncclRedOp_t, ncclComm_t))
/* clang-format on */
struct nccl_real {
    REPROD_REAL_FIELDS(REPROD_NCCL_FUNCTIONS)
};

/* The real functions, every one looked up on the first call (real.h: no lock, safe when
 * re-entered; the table lives for ever). A NULL entry means no loaded object defines it. */
const struct nccl_real *nccl_real(void);

/* Bytes of one element of `type`, 0 for a type outside ncclDataType_t. */
size_t nccl_type_bytes(ncclDataType_t type);

/* The engine's type for an NCCL float type the shim reduces; -1 for any other type. */
int nccl_engine_type(ncclDataType_t type);

#endif /* REPROD_NCCL_API_H */
