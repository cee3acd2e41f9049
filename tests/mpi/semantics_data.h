/* semantics_data.h: element layouts, deterministic inputs and the oracles of semantics.c.
 *
 * An element of an MPI datatype is described by its leaves: the scalars it holds (an integer
 * of some width and signedness, a binary32, a binary64 or an x87 long double) and their byte
 * offsets. Everything the test checks is checked leaf by leaf; bytes that belong to no leaf
 * (the gaps of a derived datatype) must stay untouched in receive buffers.
 *
 * Every rank generates every rank's inputs from (case seed, rank, element index), so each rank
 * computes the expected result of its own receive buffer locally.
 */
#ifndef SEMANTICS_DATA_H
#define SEMANTICS_DATA_H

#include <mpi.h>
#include <mpfr.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LEAVES 4

enum leaf_kind {
    LK_I8,
    LK_U8,
    LK_I16,
    LK_U16,
    LK_I32,
    LK_U32,
    LK_I64,
    LK_U64,
    LK_F32,
    LK_F64,
    LK_F80
};

struct leaf {
    enum leaf_kind kind;
    int offset;
};

/* The datatype families of MPI 3.1 section 5.9.2, and user-defined ones. */
enum tclass {
    TC_CINT,    /* C integer */
    TC_FINT,    /* Fortran integer (and MPI_AINT, MPI_OFFSET, MPI_COUNT) */
    TC_LOGICAL, /* C_BOOL, CXX_BOOL, LOGICAL */
    TC_BYTE,    /* MPI_BYTE */
    TC_REAL,    /* floating point */
    TC_COMPLEX, /* complex */
    TC_PAIR,    /* MINLOC/MAXLOC pairs */
    TC_USER,    /* derived datatypes, with user-defined ops */
};

struct tinfo {
    const char *name;
    MPI_Datatype type;
    enum tclass cls;
    size_t extent;
    int nleaves;
    struct leaf leaf[MAX_LEAVES];
    int check_gaps; /* bytes outside the leaves must stay untouched in receive buffers */
    int sign_quirk; /* Open MPI 4.1.4 orders it with the wrong signedness in MAX/MIN
                       (MPI_UNSIGNED_LONG as signed: open-mpi/ompi#10525; MPI_OFFSET as
                       unsigned; MPICH 4.0.2 every unsigned type as signed): only values with
                       the top bit clear, where both orders agree */
};

enum opkind {
    OP_SUM,
    OP_PROD,
    OP_MAX,
    OP_MIN,
    OP_LAND,
    OP_LOR,
    OP_LXOR,
    OP_BAND,
    OP_BOR,
    OP_BXOR,
    OP_MAXLOC,
    OP_MINLOC,
    OP_USER,
};

struct opinfo {
    const char *name;
    MPI_Op op;
    enum opkind kind;
};

/* How the expected result is computed. */
enum oracle {
    OR_HAND,  /* by hand: integer, logical, bitwise, max/min, loc: order cannot matter */
    OR_EXACT, /* float sum: the exact sum correctly rounded (MPFR) */
    OR_FOLD,  /* float sum under the ordered mode: ((c0 + c1) + c2) ... in the type */
    OR_LOCAL, /* MPI_Reduce_local folded in rank order: (c0 op c1) op c2 ... */
};

/* What bounds a native (order-dependent) float result, for --native: MAG_NONE means the result
 * is exact in any order and is checked bit for bit in every run. */
enum magnitude { MAG_NONE, MAG_SUM, MAG_PROD, MAG_CPROD, MAG_MATRIX };

/* What inputs look like. */
enum flavor {
    FL_BITS,     /* integers: any bits; floats: wide magnitudes, both signs */
    FL_LAND,     /* mostly non-zero */
    FL_LOR,      /* mostly zero */
    FL_LXOR,     /* half zero */
    FL_FACTOR,   /* floats in +-[0.5, 2): products stay in range */
    FL_LOC,      /* pairs: values with ties, small indices */
    FL_SPECIAL,  /* floats: zeros, infinities, NaN, cancellation, ties, subnormals, overflow */
    FL_SMALLINT, /* small integers, positive floats: exact in any order or grouping */
};

struct tcase {
    const struct tinfo *t;
    const struct opinfo *o;
    enum oracle oracle;
    enum magnitude mag;
    enum flavor flavor;
    uint64_t seed;
};

/* ---- leaves ------------------------------------------------------------------------------- */

static int leaf_bytes(enum leaf_kind kind)
{
    static const int bytes[] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 10};
    return bytes[kind];
}

static int leaf_is_float(enum leaf_kind kind)
{
    return kind == LK_F32 || kind == LK_F64 || kind == LK_F80;
}

static int leaf_is_signed(enum leaf_kind kind)
{
    return kind == LK_I8 || kind == LK_I16 || kind == LK_I32 || kind == LK_I64;
}

/* An integer leaf's bits, zero-extended. */
static uint64_t leaf_raw(const char *p, enum leaf_kind kind)
{
    uint64_t raw = 0;
    memcpy(&raw, p, (size_t)leaf_bytes(kind)); /* little-endian */
    return raw;
}

static int64_t leaf_signed(uint64_t raw, enum leaf_kind kind)
{
    int bits = 8 * leaf_bytes(kind);
    if (bits == 64) return (int64_t)raw;
    uint64_t sign = 1ull << (bits - 1);
    return (int64_t)((raw ^ sign) - sign);
}

static void leaf_store_raw(char *p, enum leaf_kind kind, uint64_t raw)
{
    memcpy(p, &raw, (size_t)leaf_bytes(kind));
}

/* Any leaf's numeric value (exact: long double holds every int64, uint64, float, double). */
static long double leaf_value(const char *p, enum leaf_kind kind)
{
    switch (kind) {
    case LK_F32: {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    case LK_F64: {
        double d;
        memcpy(&d, p, sizeof d);
        return d;
    }
    case LK_F80: {
        long double x = 0;
        memcpy(&x, p, 10);
        return x;
    }
    default: {
        uint64_t raw = leaf_raw(p, kind);
        return leaf_is_signed(kind) ? (long double)leaf_signed(raw, kind) : (long double)raw;
    }
    }
}

/* Store `value` (representable in the leaf) into a leaf. */
static void leaf_store_value(char *p, enum leaf_kind kind, long double value)
{
    switch (kind) {
    case LK_F32: {
        float f = (float)value;
        memcpy(p, &f, sizeof f);
        break;
    }
    case LK_F64: {
        double d = (double)value;
        memcpy(p, &d, sizeof d);
        break;
    }
    case LK_F80:
        memcpy(p, &value, 10);
        break;
    default:
        leaf_store_raw(p, kind, leaf_is_signed(kind) ? (uint64_t)(int64_t)value : (uint64_t)value);
    }
}

/* A printable leaf: decimal and hex for integers, bits and %a for floats. */
static const char *leaf_text(const char *p, enum leaf_kind kind, char *text, size_t size)
{
    if (kind == LK_F32) {
        uint32_t bits;
        float f;
        memcpy(&bits, p, 4);
        memcpy(&f, p, 4);
        snprintf(text, size, "0x%08x (%a)", bits, (double)f);
    } else if (kind == LK_F64) {
        uint64_t bits;
        double d;
        memcpy(&bits, p, 8);
        memcpy(&d, p, 8);
        snprintf(text, size, "0x%016llx (%a)", (unsigned long long)bits, d);
    } else if (kind == LK_F80) {
        uint64_t mantissa;
        uint16_t top;
        memcpy(&mantissa, p, 8);
        memcpy(&top, p + 8, 2);
        snprintf(text, size, "0x%04x%016llx (%La)", top, (unsigned long long)mantissa,
                 leaf_value(p, kind));
    } else {
        uint64_t raw = leaf_raw(p, kind);
        if (leaf_is_signed(kind))
            snprintf(text, size, "%lld (0x%llx)", (long long)leaf_signed(raw, kind),
                     (unsigned long long)raw);
        else
            snprintf(text, size, "%llu (0x%llx)", (unsigned long long)raw, (unsigned long long)raw);
    }
    return text;
}

/* ---- deterministic inputs ----------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

struct rng {
    uint64_t state;
};

static uint64_t rng_next(struct rng *g)
{
    g->state += 0x9e3779b97f4a7c15ull;
    return mix64(g->state);
}

/* Uniform in [0, n). */
static uint64_t rng_below(struct rng *g, uint64_t n)
{
    return rng_next(g) % n;
}

#define GAP_FILL 0x5a /* bytes of input elements outside the leaves */
#define SENTINEL 0xa5 /* receive buffers before the call */

/* A float of `precision` bits with a random significand: +-(1 + f) * 2^exponent (normal in
 * binary32 for precision 24, binary64 for 53; x87 for 64). Built from bits: ldexpl is slow. */
static long double random_float(struct rng *g, int precision, int exponent)
{
    uint64_t random = rng_next(g), sign = random >> 63;
    if (precision == 24 && exponent >= -126 && exponent <= 127) {
        uint32_t bits = (uint32_t)(sign << 31) | (uint32_t)(exponent + 127) << 23 |
                        (uint32_t)(random >> 8 & 0x7fffff);
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    if (precision == 53 && exponent >= -1022 && exponent <= 1023) {
        uint64_t bits =
            sign << 63 | (uint64_t)(exponent + 1023) << 52 | (random >> 4 & 0xfffffffffffffull);
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    uint64_t fraction = rng_next(g) >> (64 - (precision - 1));
    long double value = ldexpl(1.0L + ldexpl((long double)fraction, -(precision - 1)), exponent);
    return sign ? -value : value;
}

static int float_precision(enum leaf_kind kind)
{
    return kind == LK_F32 ? 24 : kind == LK_F64 ? 53 : 64;
}

/* The special-value patterns of FL_SPECIAL, for a binary32 or binary64 leaf: element pattern
 * `pattern` of rank `r` out of `ranks`. */
#define SPECIAL_PATTERNS 16
static long double special_value(struct rng *g, enum leaf_kind kind, int pattern, int r, int ranks)
{
    int p = float_precision(kind);
    long double max = kind == LK_F32 ? FLT_MAX : DBL_MAX;
    long double min_normal = kind == LK_F32 ? FLT_MIN : DBL_MIN;
    long double min_sub = ldexpl(min_normal, -(p - 1));
    int max_exp = kind == LK_F32 ? 127 : 1023;
    long double random_mid = random_float(g, p, (int)rng_below(g, 20) - 10);
    switch (pattern) {
    case 0:
        return 0.0L; /* all +0: +0 */
    case 1:
        return -0.0L; /* all -0: -0 */
    case 2:
        return (r % 2) ? -0.0L : 0.0L; /* mixed zeros: +0 */
    case 3:
        return r == 0 ? (long double)INFINITY : random_mid;
    case 4: /* +inf and -inf: NaN */
        if (r == 0) return INFINITY;
        if (r == ranks - 1) return -INFINITY;
        return random_mid;
    case 5: /* a NaN with a payload: the canonical NaN in exact mode */
        if (r == ranks / 2) {
            double nan_payload;
            uint64_t bits = 0x7ff8000000012345ull | (rng_next(g) & 0x8000000000000000ull);
            memcpy(&nan_payload, &bits, 8);
            return nan_payload;
        }
        return random_mid;
    case 6: /* cancellation of huge terms around small ones */
        if (r == 0) return ldexpl(1.0L, p + 7);
        if (r == 1) return 1.0L;
        if (r == 2) return -ldexpl(1.0L, p + 7);
        return random_float(g, p, -p - 5);
    case 7: /* subnormal terms */
        return (long double)(rng_below(g, 1ull << (p - 2)) + 1) * min_sub *
               (rng_next(g) & 1 ? -1.0L : 1.0L);
    case 8: /* near overflow */
        if (r < 2) return max;
        if (r == 2) return -max;
        return ldexpl(random_float(g, p, 0), max_exp - p - 1);
    case 9: /* an exact tie at the first rank's half ulp, broken (or not) by later ranks */
        if (r == 0) return 1.0L;
        if (r == 1) return ldexpl(1.0L, -p);
        if (r == 2) return ldexpl(rng_next(g) & 1 ? 1.0L : -1.0L, -2 * p - 3);
        return 0.0L;
    case 10: /* -0 everywhere but one tiny negative subnormal */
        return r == ranks - 1 ? -min_sub : -0.0L;
    case 11: /* anything in the exponent range */
        return random_float(g, p, (int)rng_below(g, 2 * (max_exp - 2)) - (max_exp - 2));
    case 12: /* subnormals that sum to a normal */
        return min_normal / 2 + min_sub * (long double)rng_below(g, 4);
    case 13: /* just below half an ulp of 2^p (its ulp is 2) */
        if (r == 0) return ldexpl(1.0L, p);
        if (r == 1) return 1.0L - ldexpl(1.0L, -p);
        return r == 2 ? ldexpl(rng_next(g) & 1 ? 1.0L : -1.0L, -p - 8) : 0.0L;
    case 14: /* the largest finite value plus rounding: overflow or not by the rounding */
        if (r == 0) return max;
        return ldexpl(1.0L, max_exp - p - 1 - (int)rng_below(g, 3));
    default: /* ordinary terms of mixed magnitude */
        return random_float(g, p, (int)rng_below(g, 60) - 30);
    }
}

/* One leaf of rank r's element. `index` is the leaf's position (a pair's index is leaf 1). */
static void gen_leaf(const struct tcase *tc, struct rng *g, int index, int r, int ranks,
                     size_t element, char *p)
{
    const struct tinfo *t = tc->t;
    enum leaf_kind kind = t->leaf[index].kind;
    int bits = 8 * leaf_bytes(kind);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (tc->flavor == FL_LOC) {
        /* Values with many ties, indices that differ: the tie rule decides. */
        long double v =
            index == 0 ? (long double)rng_below(g, 7) - 3.0L : (long double)rng_below(g, 100);
        leaf_store_value(p, kind, v);
        return;
    }
    if (t->cls == TC_LOGICAL) {
        uint64_t one = tc->flavor == FL_LAND  ? rng_below(g, 8) != 0
                       : tc->flavor == FL_LOR ? rng_below(g, 8) == 0
                                              : rng_below(g, 2);
        leaf_store_raw(p, kind, one);
        return;
    }
    if (!leaf_is_float(kind)) {
        uint64_t raw = rng_next(g) & mask;
        if (tc->flavor == FL_SMALLINT) raw = (uint64_t)((int64_t)rng_below(g, 4) - 1) & mask;
        if ((tc->o->kind == OP_MAX || tc->o->kind == OP_MIN) && t->sign_quirk) raw >>= 1;
        if (tc->o->kind == OP_SUM && bits <= 16) {
            /* Open MPI 4.1's op/avx component saturates 8- and 16-bit sums instead of wrapping
             * (open-mpi/ompi#8045, "wontfix"): keep such sums in range, so that only what MPI
             * defines is tested. */
            uint64_t limit = (leaf_is_signed(kind) ? mask >> 1 : mask) / (uint64_t)ranks;
            raw = rng_below(g, limit + 1);
            if (leaf_is_signed(kind) && (rng_next(g) & 1)) raw = (uint64_t)(-(int64_t)raw) & mask;
        }
        int zero = tc->flavor == FL_LAND   ? rng_below(g, 6) == 0
                   : tc->flavor == FL_LOR  ? rng_below(g, 6) != 0
                   : tc->flavor == FL_LXOR ? rng_below(g, 2) == 0
                                           : 0;
        if (tc->flavor == FL_LAND || tc->flavor == FL_LOR || tc->flavor == FL_LXOR) {
            if (zero)
                raw = 0;
            else if (raw == 0)
                raw = 1;
        }
        leaf_store_raw(p, kind, raw);
        return;
    }
    int precision = float_precision(kind);
    long double v;
    switch (tc->flavor) {
    case FL_SPECIAL:
        v = special_value(g, kind, (int)((element + (size_t)index * 5) % SPECIAL_PATTERNS), r,
                          ranks);
        break;
    case FL_FACTOR:
        v = random_float(g, precision, (int)rng_below(g, 2) - 1);
        break;
    case FL_SMALLINT: /* positive: no zero whose sign would depend on the grouping */
        v = (long double)rng_below(g, 3) + 1.0L;
        break;
    default: {
        int spread = kind == LK_F32 ? 12 : 30;
        v = random_float(g, precision, (int)rng_below(g, 2 * spread + 1) - spread);
    }
    }
    leaf_store_value(p, kind, v);
}

/* Elements first .. first + count of rank r's input, the same on every rank. */
static void gen_input(const struct tcase *tc, int r, int ranks, size_t first, size_t count,
                      char *out)
{
    const struct tinfo *t = tc->t;
    memset(out, GAP_FILL, count * t->extent);
    for (size_t i = 0; i < count; i++) {
        size_t e = first + i;
        struct rng g = {mix64(tc->seed ^ mix64(((uint64_t)r << 40) ^ e))};
        char *element = out + i * t->extent;
        for (int l = 0; l < t->nleaves; l++)
            gen_leaf(tc, &g, l, r, ranks, e, element + t->leaf[l].offset);
    }
}

/* ---- oracles ------------------------------------------------------------------------------ */

/* a = a op b for one element, by hand. */
static void hand_combine(const struct tcase *tc, char *a, const char *b)
{
    const struct tinfo *t = tc->t;
    enum opkind op = tc->o->kind;
    if (op == OP_MAXLOC || op == OP_MINLOC) {
        const struct leaf *v = &t->leaf[0], *i = &t->leaf[1];
        long double va = leaf_value(a + v->offset, v->kind),
                    vb = leaf_value(b + v->offset, v->kind);
        long double ia = leaf_value(a + i->offset, i->kind),
                    ib = leaf_value(b + i->offset, i->kind);
        int take_b = op == OP_MAXLOC ? vb > va : vb < va;
        if (take_b) {
            memcpy(a + v->offset, b + v->offset, (size_t)leaf_bytes(v->kind));
            memcpy(a + i->offset, b + i->offset, (size_t)leaf_bytes(i->kind));
        } else if (vb == va && ib < ia) {
            memcpy(a + i->offset, b + i->offset, (size_t)leaf_bytes(i->kind));
        }
        return;
    }
    for (int l = 0; l < t->nleaves; l++) {
        enum leaf_kind kind = t->leaf[l].kind;
        char *pa = a + t->leaf[l].offset;
        const char *pb = b + t->leaf[l].offset;
        if (leaf_is_float(kind)) { /* max and min only */
            long double va = leaf_value(pa, kind), vb = leaf_value(pb, kind);
            if (op == OP_MAX ? vb > va : vb < va) memcpy(pa, pb, (size_t)leaf_bytes(kind));
            continue;
        }
        uint64_t x = leaf_raw(pa, kind), y = leaf_raw(pb, kind), r = 0;
        int sgn = leaf_is_signed(kind);
        switch (op) {
        case OP_SUM:
            r = x + y;
            break;
        case OP_PROD:
            r = x * y;
            break;
        case OP_MAX:
            r = (sgn ? leaf_signed(y, kind) > leaf_signed(x, kind) : y > x) ? y : x;
            break;
        case OP_MIN:
            r = (sgn ? leaf_signed(y, kind) < leaf_signed(x, kind) : y < x) ? y : x;
            break;
        case OP_LAND:
            r = x != 0 && y != 0;
            break;
        case OP_LOR:
            r = x != 0 || y != 0;
            break;
        case OP_LXOR:
            r = (x != 0) != (y != 0);
            break;
        case OP_BAND:
            r = x & y;
            break;
        case OP_BOR:
            r = x | y;
            break;
        case OP_BXOR:
            r = x ^ y;
            break;
        default:
            abort();
        }
        leaf_store_raw(pa, kind, r);
    }
}

/* The exact sum of `n` terms correctly rounded to binary32/64 (MPFR: exponent range of the
 * format, subnormals, overflow by the rounding direction); NaN as the canonical quiet NaN. */
static mpfr_t mp_terms[64];
static mpfr_ptr mp_pointers[64];
static mpfr_t mp_sum;
static int mp_ready;

static void exact_sum(enum leaf_kind kind, const double *terms, int n, mpfr_rnd_t rnd, char *out)
{
    if (!mp_ready) {
        for (int i = 0; i < 64; i++) {
            mpfr_init2(mp_terms[i], 53);
            mp_pointers[i] = mp_terms[i];
        }
        mpfr_init2(mp_sum, 53);
        mp_ready = 1;
    }
    if (n > 64) abort();
    mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
    int single = kind == LK_F32;
    mpfr_set_prec(mp_sum, single ? 24 : 53);
    mpfr_set_emin(single ? -148 : -1073);
    mpfr_set_emax(single ? 128 : 1024);
    for (int i = 0; i < n; i++)
        mpfr_set_d(mp_terms[i], terms[i], MPFR_RNDN); /* exact */
    int inexact = mpfr_sum(mp_sum, mp_pointers, (unsigned long)n, rnd);
    mpfr_subnormalize(mp_sum, inexact, rnd);
    if (single) {
        float f = mpfr_get_flt(mp_sum, rnd);
        if (isnan(f)) {
            uint32_t bits = 0x7fc00000u;
            memcpy(&f, &bits, 4);
        }
        memcpy(out, &f, 4);
    } else {
        double d = mpfr_get_d(mp_sum, rnd);
        if (isnan(d)) {
            uint64_t bits = 0x7ff8000000000000ull;
            memcpy(&d, &bits, 8);
        }
        memcpy(out, &d, 8);
    }
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
}

/* Expected result of reducing terms[0 .. nterms) (each `n` elements) into `out`; `scale`
 * (n * nleaves, may be NULL) receives the magnitude that bounds a native result's error. */
static int expect(const struct tcase *tc, char *const *terms, int nterms, size_t n, char *out,
                  long double *scale, mpfr_rnd_t rnd)
{
    const struct tinfo *t = tc->t;
    size_t extent = t->extent;
    if (n == 0 || nterms <= 0) return MPI_SUCCESS;
    memcpy(out, terms[0], n * extent);
    if (tc->oracle == OR_HAND) {
        for (int k = 1; k < nterms; k++)
            for (size_t e = 0; e < n; e++)
                hand_combine(tc, out + e * extent, terms[k] + e * extent);
    } else if (tc->oracle == OR_EXACT) {
        double values[64];
        for (size_t e = 0; e < n; e++)
            for (int l = 0; l < t->nleaves; l++) {
                size_t at = e * extent + (size_t)t->leaf[l].offset;
                for (int k = 0; k < nterms; k++)
                    values[k] = (double)leaf_value(terms[k] + at, t->leaf[l].kind);
                exact_sum(t->leaf[l].kind, values, nterms, rnd, out + at);
            }
    } else if (tc->oracle == OR_FOLD) {
        for (size_t e = 0; e < n; e++)
            for (int l = 0; l < t->nleaves; l++) {
                size_t at = e * extent + (size_t)t->leaf[l].offset;
                if (t->leaf[l].kind == LK_F32) {
                    float acc, x;
                    memcpy(&acc, terms[0] + at, 4);
                    for (int k = 1; k < nterms; k++) {
                        memcpy(&x, terms[k] + at, 4);
                        acc = acc + x;
                    }
                    memcpy(out + at, &acc, 4);
                } else {
                    double acc, x;
                    memcpy(&acc, terms[0] + at, 8);
                    for (int k = 1; k < nterms; k++) {
                        memcpy(&x, terms[k] + at, 8);
                        acc = acc + x;
                    }
                    memcpy(out + at, &acc, 8);
                }
            }
    } else {
        /* MPI_Reduce_local(in, inout) computes inout = in op inout: the accumulator goes in
         * first, so the fold is (c0 op c1) op c2 ..., MPI's canonical order. */
        char *tmp = malloc(n * extent);
        if (!tmp) abort();
        for (int k = 1; k < nterms; k++) {
            memcpy(tmp, terms[k], n * extent);
            int rc = MPI_Reduce_local(out, tmp, (int)n, t->type, tc->o->op);
            if (rc != MPI_SUCCESS) {
                free(tmp);
                return rc;
            }
            memcpy(out, tmp, n * extent);
        }
        free(tmp);
    }
    if (!scale || tc->mag == MAG_NONE) return MPI_SUCCESS;
    for (size_t e = 0; e < n; e++) {
        for (int l = 0; l < t->nleaves; l++) {
            long double s = tc->mag == MAG_SUM ? 0.0L : 1.0L;
            for (int k = 0; k < nterms; k++) {
                const char *element = terms[k] + e * extent;
                long double x = fabsl(leaf_value(element + t->leaf[l].offset, t->leaf[l].kind));
                if (tc->mag == MAG_SUM)
                    s += x;
                else if (tc->mag == MAG_PROD)
                    s *= x;
                else if (tc->mag == MAG_CPROD)
                    s *= fabsl(leaf_value(element + t->leaf[0].offset, t->leaf[0].kind)) +
                         fabsl(leaf_value(element + t->leaf[1].offset, t->leaf[1].kind));
                else { /* 2x2 matrix product: entries bounded by prod of 2 max|entry| */
                    long double m = 0;
                    for (int j = 0; j < 4; j++)
                        m = fmaxl(m,
                                  fabsl(leaf_value(element + t->leaf[j].offset, t->leaf[j].kind)));
                    s *= 2 * m;
                }
            }
            scale[e * (size_t)t->nleaves + (size_t)l] = s;
        }
    }
    return MPI_SUCCESS;
}

#endif /* SEMANTICS_DATA_H */
