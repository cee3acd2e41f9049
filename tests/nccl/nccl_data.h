/* nccl_data.h: what the NCCL test programs share, with MPI or without: checks that stop the
 * program with the failing call named, the data every rank can make of every rank, and the
 * digest of results. The includer defines test_who() (who speaks: "rank 3") and test_stop()
 * (how the program stops: MPI_Abort, exit).
 */
#ifndef REPROD_NCCL_DATA_H
#define REPROD_NCCL_DATA_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *test_who(void);
static void test_stop(void);

#define CHECK_CUDA(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s:%d: %s: %s\n", test_who(), __FILE__, __LINE__, #call,          \
                    cudaGetErrorString(e_));                                                       \
            test_stop();                                                                           \
        }                                                                                          \
    } while (0)

/* The call must return ncclSuccess exactly (a nonblocking call's ncclInProgress is checked
 * where it is expected, with its own code). */
#define CHECK_NCCL(call)                                                                           \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "%s: %s:%d: %s: %s\n", test_who(), __FILE__, __LINE__, #call,          \
                    ncclGetErrorString(r_));                                                       \
            test_stop();                                                                           \
        }                                                                                          \
    } while (0)

/* splitmix64: the data generator (every rank can make every rank's contribution). */
static inline uint64_t test_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* FNV-1a over bytes, folded into *digest. */
static inline void test_digest(uint64_t *digest, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++)
        *digest = (*digest ^ p[i]) * 0x100000001b3ull;
}

/* Element i of contributor r's float32 contribution in data set `set`. */
static inline float test_contribution(int set, int r, size_t i)
{
    uint64_t x = test_mix(((uint64_t)set << 48) ^ ((uint64_t)r << 32) ^ i);
    float v = ldexpf((float)(x >> 40) / 16777216.0f + 0.5f, (int)(x % 41) - 20);
    return (x >> 8) & 1 ? -v : v;
}

#endif /* REPROD_NCCL_DATA_H */
