/* engine_float64_driver.h: the binary64 exact kernel's loop over blocks of elements, one text
 * for engine_avx2.c and engine_avx512.c (each includes it once, after its own primitives).
 *
 * The includer defines FLOAT64_KERNEL (the function's name), FLOAT64_FUNCTION (its target
 * attribute), FLOAT64_STATE (the first pass's state of FLOAT64_LANES elements) and the
 * primitives float64_start, float64_add, float64_track, float64_second_start,
 * float64_second_add and float64_finish (engine_avx512.c describes them).
 *
 * The TwoSum cascade, judged by engine_inner.h (c') and (d), a non-finite s + t for
 * infinities, NaNs and overflow; refused lanes go to the distillation tier (engine_distill.c).
 * Up to FLOAT64_DIRECT contributions, two states (2 FLOAT64_LANES elements, interleaved for
 * latency) run through every contribution; after a block with refused lanes that follows
 * another within FLOAT64_QUIET blocks, the next ones keep each error for the tier and run its
 * second pass alongside (two blocks of hysteresis). After a block where (c') proved at most a
 * quarter of the lanes and nothing was refused, the blocks leave out (c')'s minimum
 * (float64_start and float64_add with track 0). A block of that loop with refused lanes
 * (float64_finish says so: FLOAT64_TRACK_FIRST) has its terms reloaded for the minimum
 * (float64_track) and is finished again, so (c') judges every element as it would have; the
 * blocks go back to the first loop when lanes stay refused after that and (c') proved more
 * than a quarter of them, or refusals come close together (their errors are worth storing).
 * With more contributions, the states of a block of FLOAT64_BLOCK elements stay in L1 while
 * groups of FLOAT64_GROUP contributions stream through it (as the ordered fold does): few
 * memory streams at a time. Each element adds its terms in the same order either way.
 */

#define FLOAT64_QUIET 4

FLOAT64_FUNCTION size_t FLOAT64_KERNEL(reprod_op op, reprod_rounding dir,
                                       const void *const *contributions, int count,
                                       size_t element_count, double *result,
                                       struct engine_accumulator *a, size_t *general)
{
    enum { W = FLOAT64_LANES, PAIR = 2 * FLOAT64_LANES };
    size_t j = 0;
    if (count <= FLOAT64_DIRECT) {
        double errors[FLOAT64_DIRECT * ENGINE_DISTILL_PREPARED_LANES] __attribute__((aligned(64)));
        int storing = 0;         /* blocks left to store the errors of */
        size_t last_refusal = 0; /* where the last block with refused lanes began, + 1 */
        while (j + PAIR <= element_count) {
            /* Blocks that track (c')'s minimum, the old loop unchanged for data it proves. */
            for (; j + PAIR <= element_count; j += PAIR) {
                FLOAT64_STATE x0, x1; /* not an array: they stay in registers */
                float64_start(&x0, 1);
                float64_start(&x1, 1);
                float64_add(&x0, (const double *)contributions[0] + j, NULL, 1);
                float64_add(&x1, (const double *)contributions[0] + j + W, NULL, 1);
                struct float64_second y0, y1;
                float64_second_start(&y0);
                float64_second_start(&y1);
                if (storing) {
                    for (int k = 1; k < count; k++) {
                        const double *p = (const double *)contributions[k] + j;
                        double *slot = errors + (size_t)(k - 1) * ENGINE_DISTILL_PREPARED_LANES;
                        float64_second_add(&y0, float64_add(&x0, p, slot, 1));
                        float64_second_add(&y1, float64_add(&x1, p + W, slot + W, 1));
                    }
                    float64_second_add(&y0, x0.s); /* the first pass's s comes last */
                    float64_second_add(&y1, x1.s);
                    double *top = errors + (size_t)(count - 1) * ENGINE_DISTILL_PREPARED_LANES;
                    memcpy(top, &x0.s, sizeof x0.s);
                    memcpy(top + W, &x1.s, sizeof x1.s);
                } else {
                    for (int k = 1; k < count; k++) {
                        const double *p = (const double *)contributions[k] + j;
                        float64_add(&x0, p, NULL, 1);
                        float64_add(&x1, p + W, NULL, 1);
                    }
                }
                const FLOAT64_STATE x[2] = {x0, x1};
                const struct float64_second y[2] = {y0, y1};
                uint32_t proved; /* lanes (c') proved */
                uint32_t refused = float64_finish(op, dir, contributions, count, j, x, result, a,
                                                  general, storing ? errors : NULL, y, 1, &proved);
                /* Refusals close together (cancelling data): keep the errors of the next two
                 * blocks. A lone one (a rare element of a wide spread) does not pay for it. */
                if (refused) {
                    storing = last_refusal && j + 1 - last_refusal <= FLOAT64_QUIET * PAIR ? 2 : 0;
                    last_refusal = j + 1;
                } else if (storing) {
                    storing--;
                } else if (__builtin_popcount(proved) <= PAIR / 4) {
                    j += PAIR;
                    break; /* to the blocks without the minimum */
                }
            }
            /* Wide spreads: (c') proves few lanes and (d) decides them all; the minimum it
             * needs costs three of the cascade's thirteen operations a term. Left out; a block
             * with refused lanes ((c') might decide them) finds its minimum after all, here,
             * and is finished again; a lone one (1 element in 400 at +-200 binades) stays. */
            for (; j + PAIR <= element_count; j += PAIR) {
                FLOAT64_STATE x0, x1;
                float64_start(&x0, 0);
                float64_start(&x1, 0);
                for (int k = 0; k < count; k++) {
                    const double *p = (const double *)contributions[k] + j;
                    float64_add(&x0, p, NULL, 0);
                    float64_add(&x1, p + W, NULL, 0);
                }
                const FLOAT64_STATE x[2] = {x0, x1};
                uint32_t proved = 0;
                uint32_t refused = float64_finish(op, dir, contributions, count, j, x, result, a,
                                                  general, NULL, NULL, 0, &proved);
                int tracked_after_all = refused == FLOAT64_TRACK_FIRST;
                if (tracked_after_all) { /* (c') decides as it would have */
                    FLOAT64_STATE fresh;
                    float64_start(&fresh, 1);
                    x0.min = x1.min = fresh.min;
                    for (int k = 0; k < count; k++) {
                        const double *p = (const double *)contributions[k] + j;
                        float64_track(&x0, p);
                        float64_track(&x1, p + W);
                    }
                    const FLOAT64_STATE tracked_x[2] = {x0, x1};
                    refused = float64_finish(op, dir, contributions, count, j, tracked_x, result, a,
                                             general, NULL, NULL, 1, &proved);
                }
                if (refused) {
                    storing = last_refusal && j + 1 - last_refusal <= FLOAT64_QUIET * PAIR ? 2 : 0;
                    last_refusal = j + 1;
                }
                /* Back to tracking when refusals come close together (their errors are worth
                 * storing) or when a refused block's minimum, found after all, proved much
                 * (cancelling data); a lone refusal that (c') cannot help (a midpoint among
                 * wide spreads) stays here, and so does a block the reload left unrefused (a
                 * cancelling block among wide ones: going back would make every wide block
                 * after it track the minimum, 20% slower on such alternations). */
                if (storing ||
                    (refused && tracked_after_all && __builtin_popcount(proved) > PAIR / 4)) {
                    j += PAIR;
                    break;
                }
            }
        }
        return j;
    }
    FLOAT64_STATE x[FLOAT64_BLOCK / W];
    /* Inputs beyond the caches: each line of the next block is prefetched as the same line of
     * this block is read (engine_prefetch_wanted: streams read 2 KiB at a time; N = 64 out of
     * cache took 1.35 times as long without). */
    const int far = engine_prefetch_wanted(count, element_count, sizeof(double));
    while (j + PAIR <= element_count) {
        size_t length = element_count - j < FLOAT64_BLOCK ? element_count - j : FLOAT64_BLOCK;
        length &= ~(size_t)(PAIR - 1);
        int vectors = (int)(length / W);
        for (int v = 0; v < vectors; v++)
            float64_start(&x[v], 1);
        for (int k = 0; k < count; k += FLOAT64_GROUP) {
            int group = count - k < FLOAT64_GROUP ? count - k : FLOAT64_GROUP;
            for (int v = 0; v < vectors; v++) {
                FLOAT64_STATE y = x[v];
                for (int g = 0; g < group; g++) {
                    const double *p = (const double *)contributions[k + g] + j + W * (size_t)v;
                    if (far && (W * sizeof(double) >= 64 || (v & 1) == 0))
                        engine_prefetch_ahead(p, FLOAT64_BLOCK * sizeof(double));
                    float64_add(&y, p, NULL, 1);
                }
                x[v] = y;
            }
        }
        for (int v = 0; v < vectors; v += 2) {
            uint32_t proved;
            float64_finish(op, dir, contributions, count, j + W * (size_t)v, &x[v], result, a,
                           general, NULL, NULL, 1, &proved);
        }
        j += length;
    }
    return j;
}
