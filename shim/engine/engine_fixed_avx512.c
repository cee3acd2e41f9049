/* engine_fixed_avx512.c: the fixed-point route's binary64 rounding in AVX-512 lanes
 * (engine_fixed.c's round_float64_block, 8 elements at a time), chosen at run time at
 * ENGINE_KERNELS_AVX512.
 *
 * A block of binary64 elements that all take two words: S = s0 + s1 2^W where it fits an
 * int64, converted to binary64 by the hardware in the direction MXCSR holds (AVX-512DQ's
 * vcvtqq2pd: the one rounding of the exact integer), then B added to the exponent, exact while
 * the result stays normal. The other elements (S beyond an int64, S = 0, a result outside the
 * normal range) are left to the caller, which rounds them with engine_fixed_round, as the
 * scalar block does. Built where ENGINE_FIXED_VECTORS is 1 (x86-64, 64-bit size_t).
 */
#include "engine/engine_kernels.h"

#include "engine/engine_fixed.h" /* the codes' values */

#if ENGINE_FIXED_VECTORS

#include <immintrin.h>

#define AVX512_FUNCTION __attribute__((target("avx512f,avx512dq")))

/* Codes [hi, lo] of 8 elements -> their 8 lo (odd) bytes first. */
static const char odd_bytes[16] = {1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14};

AVX512_FUNCTION uint64_t engine_fixed_round_float64_avx512(const uint8_t *codes,
                                                           const int64_t *sums, int word_bits,
                                                           char *result)
{
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i w = _mm512_set1_epi64(word_bits), zero = _mm512_setzero_si512();
    uint64_t refused = 0;
    for (size_t j = 0; j < ENGINE_FIXED_BLOCK; j += 8) {
        __m512i a = _mm512_loadu_si512((const void *)(sums + 2 * j));
        __m512i b = _mm512_loadu_si512((const void *)(sums + 2 * j + 8));
        __m512i s0 = _mm512_permutex2var_epi64(a, even, b),
                s1 = _mm512_permutex2var_epi64(a, odd, b);
        /* S = s0 + s1 2^W in an int64: s1 2^W fits, and the sum does not overflow */
        __m512i t = _mm512_sllv_epi64(s1, w), sum = _mm512_add_epi64(s0, t);
        __mmask8 good = _mm512_cmpeq_epi64_mask(_mm512_srav_epi64(t, w), s1);
        __m512i overflow = _mm512_and_si512(_mm512_xor_si512(s0, sum), _mm512_xor_si512(t, sum));
        good &= _mm512_cmpge_epi64_mask(overflow, zero) & _mm512_cmpneq_epi64_mask(sum, zero);
        /* B = the lowest field of bucket 254 - lo (<< 3; the first bucket's 1) - 1023 - 52 */
        __m128i lo =
            _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(codes + 2 * j)),
                             _mm_loadu_si128((const __m128i *)(const void *)odd_bytes));
        __m512i bucket =
            _mm512_sub_epi64(_mm512_set1_epi64(ENGINE_FIXED_LAST_BUCKET), _mm512_cvtepu8_epi64(lo));
        __m512i low = _mm512_mask_blend_epi64(
            _mm512_cmpeq_epi64_mask(bucket, _mm512_set1_epi64(ENGINE_FIXED_FIRST_BUCKET)),
            _mm512_slli_epi64(bucket, 3), _mm512_set1_epi64(1));
        __m512i base = _mm512_sub_epi64(low, _mm512_set1_epi64(1023 + 52));
        __m512i bits = _mm512_castpd_si512(_mm512_cvtepi64_pd(sum)); /* MXCSR's direction */
        __m512i exponent = _mm512_add_epi64(
            _mm512_and_si512(_mm512_srli_epi64(bits, 52), _mm512_set1_epi64(0x7ff)), base);
        good &= _mm512_cmpge_epi64_mask(exponent, _mm512_set1_epi64(1)) &
                _mm512_cmple_epi64_mask(exponent, _mm512_set1_epi64(2046));
        __m512i scaled = _mm512_add_epi64(bits, _mm512_slli_epi64(base, 52)); /* times 2^B */
        _mm512_mask_storeu_epi64((void *)(result + 8 * j), good, scaled);
        refused |= (uint64_t)(uint8_t)~good << j;
    }
    return refused;
}

#else /* never called: engine_fixed.c takes these only where ENGINE_FIXED_VECTORS is 1 */

uint64_t engine_fixed_round_float64_avx512(const uint8_t *codes, const int64_t *sums, int word_bits,
                                           char *result)
{
    (void)codes, (void)sums, (void)word_bits, (void)result;
    return ~0ull;
}

#endif
