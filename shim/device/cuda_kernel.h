/* cuda_kernel.h: the body of the device reduction kernel, as plain C that gcc and nvcc both
 * compile (one source of truth for the arithmetic): shim/device/cuda_kernels.cu runs it on the GPU,
 * the unit tests and the host stand-in of libcuda run it on the CPU.
 *
 * Every element is computed by the host engine's element functions (engine_inner.h,
 * engine_ordered.h). A thread reduces elements thread, thread + threads, ...; there is no
 * shared memory and no barrier, so running every thread of a grid one after the other on the
 * host computes the same bits. Define ENGINE_FUNCTION (e.g. __host__ __device__ static
 * inline) before including, or get static inline.
 *
 * Stack: a GPU thread's stack is 1 KiB unless the application raised it, and a kernel whose
 * frame is larger makes its first launch grow local memory for the whole device (some 376 MB on
 * an H200, with a device-wide synchronisation while NCCL's kernels may be waiting on peers). The
 * tiers past the fast path keep 64 terms (512 bytes) and the general path its accumulator (576
 * bytes); the device build makes each a function of its own (REPROD_KERNEL_APART: __noinline__),
 * so that the two are never on the stack together: 848 - 880 bytes a thread (ptxas -v, sm_80 -
 * sm_100; the Makefile fails the build above 1 KiB).
 */
#ifndef REPROD_CUDA_KERNEL_H
#define REPROD_CUDA_KERNEL_H

#include "engine/engine_ordered.h"

#include <stddef.h>
#include <stdint.h>

/* How a slow path of the kernel is built: a function with a stack frame of its own on the
 * device (cuda_kernels.cu), an ordinary one on the host. */
#ifndef REPROD_KERNEL_APART
#define REPROD_KERNEL_APART ENGINE_FUNCTION
#endif

/* ---- Configuration ---------------------------------------------------------------------- */

#define REPROD_KERNEL_LOCAL_POINTERS 32 /* up to this many contributions need no pointer array */
#define REPROD_KERNEL_NAME           "reprod_reduce"   /* the reduction kernel */
#define REPROD_KERNEL_POINTERS_NAME  "reprod_pointers" /* fills args.pointers (count > 32) */

/* PreMulSum kinds (the values of enum reprod_premul in cuda.h). */
#define REPROD_KERNEL_PREMUL_NONE   0
#define REPROD_KERNEL_PREMUL_HOST   1 /* scalar_bits holds the scalar */
#define REPROD_KERNEL_PREMUL_DEVICE 2 /* scalar_device points to it (device memory) */

/* Everything one launch needs, passed by value as the kernel's single parameter. Fixed-width
 * fields only, so that gcc and nvcc lay it out alike (REPROD_KERNEL_ARGS_BYTES). */
struct reprod_kernel_args {
    int32_t type;      /* reprod_type */
    int32_t op;        /* reprod_op: SUM, AVG, or PROD when ordered */
    int32_t rounding;  /* reprod_rounding (exact only) */
    int32_t ordered;   /* 1: the rank-order fold */
    int32_t count;     /* contributions N >= 1 */
    int32_t own_index; /* contribution at `own` instead of in `blocks` (-1: none) */
    int32_t premul;    /* REPROD_KERNEL_PREMUL_* */
    int32_t reserved;  /* zero */
    uint64_t elements; /* elements per contribution */
    uint64_t block_stride_bytes;  /* contribution k is at blocks + k * block_stride_bytes */
    const void *blocks;           /* ... */
    const void *own;              /* ... except contribution own_index */
    const void *const *pointers;  /* the N addresses (filled by reprod_kernel_pointers), or
                                     NULL when count <= REPROD_KERNEL_LOCAL_POINTERS */
    void *out;                    /* result; may be a contribution, never a partial overlap */
    uint64_t scalar_bits;         /* REPROD_KERNEL_PREMUL_HOST: the scalar's bit pattern */
    const void *scalar_device;    /* REPROD_KERNEL_PREMUL_DEVICE */
};

#define REPROD_KERNEL_ARGS_BYTES 96

/* The address of contribution k. */
ENGINE_FUNCTION const void *reprod_kernel_contribution(const struct reprod_kernel_args *args,
                                                       int k)
{
    if (k == args->own_index) return args->own;
    return (const char *)args->blocks + (uint64_t)k * args->block_stride_bytes;
}

/* ---- PreMulSum: one product, rounded once ------------------------------------------------ */

/* The high 64 bits of the 128-bit product a * b. */
ENGINE_FUNCTION uint64_t reprod_kernel_mul_high(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__)
    return __umul64hi(a, b);
#else
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#endif
}

/* The bits of x * s rounded to nearest in `type`, x and s bit patterns of `type` (NCCL's
 * PreMulSum product). Integer arithmetic on the exact 106-bit product of the significands,
 * rounded once by engine_round_value: the same bits on any machine and in any floating-point
 * environment. A NaN operand, or inf * 0, gives the canonical NaN. */
ENGINE_FUNCTION uint64_t reprod_kernel_scale_bits(reprod_type type, uint64_t x_bits,
                                                  uint64_t s_bits)
{
    const struct engine_format f = engine_format_of(type);
    uint64_t xb = engine_double_bits(engine_bits_to_double(type, &f, x_bits));
    uint64_t sb = engine_double_bits(engine_bits_to_double(type, &f, s_bits));
    const uint64_t magnitude_mask = 0x7fffffffffffffffull, inf = 0x7ff0000000000000ull;
    int negative = (int)((xb ^ sb) >> 63);
    uint64_t sign = negative ? engine_sign_bit(&f) : 0;
    uint64_t xm = xb & magnitude_mask, sm = sb & magnitude_mask;
    if (xm > inf || sm > inf) return f.nan_bits;
    if (xm == inf || sm == inf) return (xm == 0 || sm == 0) ? f.nan_bits : sign | engine_inf_bits(&f);
    if (xm == 0 || sm == 0) return sign;
    int xq = -1074, sq = -1074;
    uint64_t xs = xm & 0xfffffffffffffull, ss = sm & 0xfffffffffffffull;
    if (xm >> 52) xs |= 1ull << 52, xq = (int)(xm >> 52) - 1075;
    if (sm >> 52) ss |= 1ull << 52, sq = (int)(sm >> 52) - 1075;
    uint64_t high = reprod_kernel_mul_high(xs, ss), low = xs * ss;
    if (high == 0) return engine_round_value(&f, negative, low, xq + sq, 0, REPROD_ROUND_NEAREST);
    int zeros = engine_leading_zeros(high);
    uint64_t m = zeros ? (high << zeros) | (low >> (64 - zeros)) : high;
    int sticky = (low << zeros) != 0; /* the bits of `low` below m */
    return engine_round_value(&f, negative, m, xq + sq + 64 - zeros, sticky,
                              REPROD_ROUND_NEAREST);
}

/* Element i of a PreMulSum: every contribution scaled, then the ordered fold, or the exact
 * sum through the accumulator `a` (empty, left empty), whose result is exact whatever path
 * the host takes for the same scaled values. */
ENGINE_FUNCTION uint64_t reprod_kernel_premul_element(const struct reprod_kernel_args *args,
                                                      const void *const *c, uint64_t scalar,
                                                      size_t i, struct engine_accumulator *a)
{
    const reprod_type type = (reprod_type)args->type;
    const struct engine_format f = engine_format_of(type);
    if (args->ordered) {
        uint64_t first = reprod_kernel_scale_bits(type, engine_load_bits(type, c[0], i), scalar);
        double acc = engine_bits_to_double(type, &f, first);
        for (int k = 1; k < args->count; k++)
            acc = engine_ordered_step(
                type, &f, (reprod_op)args->op, acc,
                reprod_kernel_scale_bits(type, engine_load_bits(type, c[k], i), scalar));
        return engine_ordered_finish(type, &f, (reprod_op)args->op, acc, args->count);
    }
    for (int k = 0; k < args->count; k++)
        engine_accumulator_add(
            a, engine_bits_to_double(
                   type, &f, reprod_kernel_scale_bits(type, engine_load_bits(type, c[k], i), scalar)));
    return engine_accumulator_round(a, &f, (reprod_rounding)args->rounding,
                                    args->op == REPROD_AVG ? (uint32_t)args->count : 1u);
}

/* ---- The kernel's slow paths, apart ------------------------------------------------------ */

/* engine_exact_tiers past its first tier (engine_exact_fast, which the kernel runs inline):
 * the same tiers in the same order, so the same elements decided. */
REPROD_KERNEL_APART int reprod_kernel_later_tiers(reprod_type type, reprod_op op,
                                                  reprod_rounding dir, const void *const *c,
                                                  int count, size_t i, uint64_t *bits)
{
    return engine_exact_distilled(type, op, dir, c, count, i, bits) ||
           engine_exact_beyond_window(type, op, dir, c, count, i, bits);
}

/* Element i by the general path (a PreMulSum element: the scaled terms, exactly or folded),
 * with an accumulator of its own, cleared for each element (544 bytes of stores, on a path few
 * elements take, that adds every term to it and carries it through when rounding). */
REPROD_KERNEL_APART uint64_t reprod_kernel_general(const struct reprod_kernel_args *args,
                                                   const void *const *c, uint64_t scalar, size_t i)
{
    struct engine_accumulator a;
    size_t general = 0;
    engine_accumulator_clear(&a);
    if (args->premul != REPROD_KERNEL_PREMUL_NONE)
        return reprod_kernel_premul_element(args, c, scalar, i, &a);
    return engine_exact_element((reprod_type)args->type, (reprod_op)args->op,
                                (reprod_rounding)args->rounding, c, args->count, i, 1, &a,
                                &general);
}

/* ---- The kernels ------------------------------------------------------------------------- */

/* Fill args->pointers (count > REPROD_KERNEL_LOCAL_POINTERS): entries thread, thread +
 * threads, ... */
ENGINE_FUNCTION void reprod_kernel_pointers(const struct reprod_kernel_args *args,
                                            uint64_t thread, uint64_t threads)
{
    const void **pointers = (const void **)(uintptr_t)args->pointers;
    for (uint64_t k = thread; k < (uint64_t)args->count; k += threads)
        pointers[k] = reprod_kernel_contribution(args, (int)k);
}

/* Reduce elements thread, thread + threads, ... < args->elements into args->out: each
 * element's inputs are all read before its result is written. Does nothing when the args are
 * inconsistent (count < 1, or more than REPROD_KERNEL_LOCAL_POINTERS without pointers): the
 * host checks them before launching. */
ENGINE_FUNCTION void reprod_kernel_reduce(const struct reprod_kernel_args *args, uint64_t thread,
                                          uint64_t threads)
{
    const reprod_type type = (reprod_type)args->type;
    const reprod_op op = (reprod_op)args->op;
    const reprod_rounding dir = (reprod_rounding)args->rounding;
    const int count = args->count;
    const void *local[REPROD_KERNEL_LOCAL_POINTERS];
    const void *const *c = args->pointers;
    if (count < 1 || (c == NULL && count > REPROD_KERNEL_LOCAL_POINTERS)) return;
    if (c == NULL) {
        for (int k = 0; k < count; k++)
            local[k] = reprod_kernel_contribution(args, k);
        c = local;
    }
    uint64_t scalar = args->scalar_bits;
    if (args->premul == REPROD_KERNEL_PREMUL_DEVICE)
        scalar = engine_load_bits(type, args->scalar_device, 0);
    for (uint64_t i = thread; i < args->elements; i += threads) {
        uint64_t bits;
        if (args->premul != REPROD_KERNEL_PREMUL_NONE || !args->ordered) {
            if (args->premul == REPROD_KERNEL_PREMUL_NONE &&
                (engine_exact_fast(type, op, dir, c, count, (size_t)i, &bits) ||
                 reprod_kernel_later_tiers(type, op, dir, c, count, (size_t)i, &bits))) {
                engine_store_bits(type, args->out, (size_t)i, bits);
                continue;
            }
            bits = reprod_kernel_general(args, c, scalar, (size_t)i);
        } else {
            bits = engine_ordered_element(type, op, c, count, (size_t)i);
        }
        engine_store_bits(type, args->out, (size_t)i, bits);
    }
}

#endif /* REPROD_CUDA_KERNEL_H */
