/* seed_libc: seed every libc generator that has a seeding call and print its first outputs,
 * one line per API. Run under the shim with the caller's seeds, or without it with the seeds
 * the shim would have derived: the lines must be equal.
 *
 *     seed_libc SEED32 SEED48     SEED32 for the 32-bit calls (srand, srandom, initstate,
 *                                 srand48 and the _r forms), SEED48 for seed48 and lcong48
 *     seed_libc --unseeded        rand, random and drand48 without any seeding call
 *     seed_libc --restore SEED32 SEED48
 *                                 for seed48, seed48_r and lcong48, after seeding with
 *                                 SEED48 (or srand48 with SEED32): save the state X that
 *                                 seed48 (seed48_r: __old_x) hands back when another seed
 *                                 replaces it, pass X back later, and print whether the
 *                                 generator continues where it was ("continues") or not
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A multiplier and addend for lcong48 other than the standard ones. */
static const unsigned short lcong_a_c[4] = {0xE66D, 0xDEEC, 0x0005, 0x000B};

static void x48(uint64_t value, unsigned short x[3])
{
    x[0] = (unsigned short)value;
    x[1] = (unsigned short)(value >> 16);
    x[2] = (unsigned short)(value >> 32);
}

static void say(const char *api, int continues)
{
    printf("%s: %s\n", api, continues ? "continues" : "does not continue");
}

/* seed48 and seed48_r hand back the previous X; passing it back restores the generator. */
static void restore_48(unsigned int seed32, uint64_t seed48_value)
{
    unsigned short x[3], saved[3], other[3] = {1, 2, 3}, param[7];
    x48(seed48_value, x);

    seed48(x);
    drand48();
    double expected = drand48(); /* the second number after seed48(x) */
    seed48(x);
    drand48();
    memcpy(saved, seed48(other), sizeof saved); /* X after one number */
    drand48();
    seed48(saved);
    say("seed48 restored", drand48() == expected);

    srand48((long)seed32);
    drand48();
    expected = drand48();
    srand48((long)seed32);
    drand48();
    memcpy(saved, seed48(other), sizeof saved);
    seed48(saved);
    say("srand48 state restored by seed48", drand48() == expected);

    memcpy(param, x, sizeof x);
    memcpy(param + 3, lcong_a_c, sizeof lcong_a_c);
    lcong48(param);
    lrand48();
    long expected_long = lrand48();
    lcong48(param);
    lrand48();
    memcpy(param, seed48(other), 3 * sizeof param[0]); /* X; keep lcong48's a and c */
    lcong48(param);
    say("lcong48 state restored by lcong48", lrand48() == expected_long);

    struct drand48_data data, reference;
    double value, expected_value;
    memset(&reference, 0, sizeof reference);
    seed48_r(x, &reference);
    drand48_r(&reference, &value);
    drand48_r(&reference, &expected_value);
    memset(&data, 0, sizeof data);
    seed48_r(x, &data);
    drand48_r(&data, &value);
    seed48_r(other, &data);
    memcpy(saved, data.__old_x, sizeof saved);
    drand48_r(&data, &value);
    seed48_r(saved, &data);
    drand48_r(&data, &value);
    say("seed48_r restored", value == expected_value);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--restore") == 0) {
        restore_48((unsigned int)strtoul(argv[2], NULL, 0), strtoull(argv[3], NULL, 0));
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--unseeded") == 0) {
        int a = rand(), b = rand();
        long c = random();
        printf("unseeded: %d %d %ld %.17g\n", a, b, c, drand48());
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s SEED32 SEED48 | --unseeded | --restore SEED32 SEED48\n",
                argv[0]);
        return 2;
    }
    unsigned int seed32 = (unsigned int)strtoul(argv[1], NULL, 0);
    uint64_t seed48_value = strtoull(argv[2], NULL, 0);
    unsigned short x[3], param[7];
    x48(seed48_value, x);

    srand(seed32);
    int r1 = rand(), r2 = rand();
    printf("srand: %d %d\n", r1, r2);

    srandom(seed32);
    long l1 = random(), l2 = random();
    printf("srandom: %ld %ld\n", l1, l2);

    static char state[256];
    char *previous = initstate(seed32, state, sizeof state);
    l1 = random();
    l2 = random();
    printf("initstate: %ld %ld\n", l1, l2);
    setstate(previous);

    srand48((long)seed32);
    double d1 = drand48(), d2 = drand48();
    printf("srand48: %.17g %.17g\n", d1, d2);

    seed48(x);
    d1 = drand48();
    d2 = drand48();
    printf("seed48: %.17g %.17g\n", d1, d2);

    memcpy(param, x, sizeof x);
    memcpy(param + 3, lcong_a_c, sizeof lcong_a_c);
    lcong48(param);
    long n1 = lrand48(), n2 = lrand48();
    printf("lcong48: %ld %ld\n", n1, n2);

    struct random_data data;
    static char state_r[128];
    int32_t i1, i2;
    memset(&data, 0, sizeof data);
    initstate_r(seed32, state_r, sizeof state_r, &data);
    random_r(&data, &i1);
    random_r(&data, &i2);
    printf("initstate_r: %" PRId32 " %" PRId32 "\n", i1, i2);
    random_r(&data, &i1); /* move on, so that reseeding shows */
    srandom_r(seed32, &data);
    random_r(&data, &i1);
    random_r(&data, &i2);
    printf("srandom_r: %" PRId32 " %" PRId32 "\n", i1, i2);

    struct drand48_data data48;
    memset(&data48, 0, sizeof data48);
    srand48_r((long)seed32, &data48);
    drand48_r(&data48, &d1);
    drand48_r(&data48, &d2);
    printf("srand48_r: %.17g %.17g\n", d1, d2);
    seed48_r(x, &data48);
    drand48_r(&data48, &d1);
    drand48_r(&data48, &d2);
    printf("seed48_r: %.17g %.17g\n", d1, d2);
    lcong48_r(param, &data48);
    lrand48_r(&data48, &n1);
    lrand48_r(&data48, &n2);
    printf("lcong48_r: %ld %ld\n", n1, n2);
    return 0;
}
