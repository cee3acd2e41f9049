/* test_config.c: parsing of the REPROD_* settings (shim/runtime/config.c). */
#include "runtime/config.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Parse `environment`; return the parse status, the config and the error text. */
static int parse(char *const environment[], struct reprod_config *config, char *error)
{
    error[0] = '\0';
    return reprod_config_parse(environment, config, error, 512);
}

Test(config, defaults_when_nothing_is_set)
{
    char *environment[] = {"HOME=/root", "PATH=/bin", NULL};
    struct reprod_config config;
    char error[512];
    cr_assert_eq(parse(environment, &config, error), 0);
    cr_expect_eq(config.mode, REPROD_MODE_EXACT);
    cr_expect_eq(config.rounding, REPROD_ROUND_NEAREST);
    cr_expect_eq(config.strict, 0);
    cr_expect_eq(config.seed_policy, REPROD_SEED_HASH);
    cr_expect_eq(config.entropy_set, 0);
    cr_expect_eq(config.verbose, 0);
    cr_expect_str_empty(config.log_pattern);
    cr_expect_str_empty(config.trace_dir);
    cr_expect_eq(config.scratch_mb, REPROD_SCRATCH_MB_DEFAULT);
}

Test(config, every_documented_value_is_accepted)
{
    char *environment[] = {"REPROD_MODE=ordered",
                           "REPROD_ROUNDING=down",
                           "REPROD_STRICT=1",
                           "REPROD_SEED_POLICY=shared",
                           "REPROD_ENTROPY=0x10",
                           "REPROD_LOG=/tmp/reprod.%h.%p.%r.log",
                           "REPROD_VERBOSE=2",
                           "REPROD_TRACE=/tmp/trace",
                           "REPROD_SCRATCH_MB=1048576",
                           NULL};
    struct reprod_config config;
    char error[512];
    cr_assert_eq(parse(environment, &config, error), 0, "%s", error);
    cr_expect_eq(config.mode, REPROD_MODE_ORDERED);
    cr_expect_eq(config.rounding, REPROD_ROUND_DOWN);
    cr_expect_eq(config.strict, 1);
    cr_expect_eq(config.seed_policy, REPROD_SEED_SHARED);
    cr_expect_eq(config.entropy_set, 1);
    cr_expect_eq(config.entropy, 16);
    cr_expect_str_eq(config.log_pattern, "/tmp/reprod.%h.%p.%r.log");
    cr_expect_eq(config.verbose, 2);
    cr_expect_str_eq(config.trace_dir, "/tmp/trace");
    cr_expect_eq(config.scratch_mb, 1048576);
}

Test(config, words_ignore_case_and_empty_means_default)
{
    char *environment[] = {"REPROD_MODE=OFF", "REPROD_ROUNDING=", "REPROD_SEED_POLICY=Rank", NULL};
    struct reprod_config config;
    char error[512];
    cr_assert_eq(parse(environment, &config, error), 0, "%s", error);
    cr_expect_eq(config.mode, REPROD_MODE_OFF);
    cr_expect_eq(config.rounding, REPROD_ROUND_NEAREST);
    cr_expect_eq(config.seed_policy, REPROD_SEED_RANK);
}

/* Each bad value is refused with a message naming the variable, the value and the choices. */
Test(config, a_bad_value_names_the_variable_the_value_and_the_allowed_values)
{
    struct {
        const char *setting, *variable, *allowed;
    } cases[] = {
        {"REPROD_MODE=fast", "REPROD_MODE", "exact, ordered, off"},
        {"REPROD_ROUNDING=even", "REPROD_ROUNDING", "nearest, zero, up, down"},
        {"REPROD_STRICT=yes", "REPROD_STRICT", "0, 1"},
        {"REPROD_SEED_POLICY=random", "REPROD_SEED_POLICY", "hash, rank, shared, off"},
        {"REPROD_VERBOSE=3", "REPROD_VERBOSE", "0, 1, 2"},
        {"REPROD_ENTROPY=-1", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=12abc", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=99999999999999999999", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=+5", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY= 5", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=5 ", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=0x", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=0x-5", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_ENTROPY=0x 5", "REPROD_ENTROPY", "unsigned 64-bit integer"},
        {"REPROD_LOG=/tmp/x.%q", "REPROD_LOG", "%h"},
        {"REPROD_SCRATCH_MB=0", "REPROD_SCRATCH_MB", "1 to 1048576"},
        {"REPROD_SCRATCH_MB=1048577", "REPROD_SCRATCH_MB", "1 to 1048576"},
        {"REPROD_SCRATCH_MB=1.5", "REPROD_SCRATCH_MB", "1 to 1048576"},
        {"REPROD_SCRATCH_MB=-4", "REPROD_SCRATCH_MB", "1 to 1048576"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *environment[] = {(char *)cases[i].setting, NULL};
        struct reprod_config config;
        char error[512];
        cr_assert_eq(parse(environment, &config, error), -1, "%s was accepted", cases[i].setting);
        cr_expect(strstr(error, cases[i].variable), "'%s' does not name %s", error,
                  cases[i].variable);
        const char *value = strchr(cases[i].setting, '=') + 1;
        cr_expect(strstr(error, value), "'%s' does not show the value %s", error, value);
        cr_expect(strstr(error, cases[i].allowed), "'%s' does not list '%s'", error,
                  cases[i].allowed);
        cr_expect_null(strchr(error, '\n'), "the message is more than one line: '%s'", error);
    }
}

/* A value with a space at an end is shown quoted: unquoted, "REPROD_MODE=exact  is not valid"
 * reads as if "exact" were refused. */
Test(config, a_value_with_a_trailing_space_is_shown_in_quotes)
{
    const char *cases[][2] = {
        {"REPROD_MODE=exact ", "REPROD_MODE=\"exact \" is not valid"},
        {"REPROD_SCRATCH_MB= 64", "REPROD_SCRATCH_MB=\" 64\" is not valid"},
        {"REPROD_ENTROPY=5 ", "REPROD_ENTROPY=\"5 \" is not valid"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *environment[] = {(char *)cases[i][0], NULL};
        struct reprod_config config;
        char error[512];
        cr_assert_eq(parse(environment, &config, error), -1, "%s was accepted", cases[i][0]);
        cr_expect(strstr(error, cases[i][1]), "'%s' does not say '%s'", error, cases[i][1]);
    }
    char *environment[] = {"REPROD_TRACE=/tmp/trace ", NULL};
    struct reprod_config config;
    char error[512], shown[256];
    cr_assert_eq(parse(environment, &config, error), 0, "%s", error);
    for (size_t k = 0; k < reprod_setting_count; k++)
        if (strcmp(reprod_settings[k].name, "REPROD_TRACE") == 0)
            cr_expect_str_eq(reprod_setting_show(&reprod_settings[k], &config, shown, sizeof shown),
                             "\"/tmp/trace \"");
}

/* Integer settings take leading zeros, any number of them, as REPROD_ENTROPY does. */
Test(config, scratch_takes_leading_zeros_of_any_count)
{
    const char *cases[] = {"REPROD_SCRATCH_MB=64", "REPROD_SCRATCH_MB=0064",
                           "REPROD_SCRATCH_MB=00000064", "REPROD_SCRATCH_MB=000000000000000064"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *environment[] = {(char *)cases[i], NULL};
        struct reprod_config config;
        char error[512];
        cr_assert_eq(parse(environment, &config, error), 0, "%s: %s", cases[i], error);
        cr_expect_eq(config.scratch_mb, 64, "%s gave %u", cases[i], config.scratch_mb);
    }
    char *environment[] = {"REPROD_SCRATCH_MB=00000000", NULL};
    struct reprod_config config;
    char error[512];
    cr_expect_eq(parse(environment, &config, error), -1, "00000000 MiB was accepted");
    char *large[] = {"REPROD_SCRATCH_MB=0012345678", NULL};
    cr_expect_eq(parse(large, &config, error), -1, "12345678 MiB was accepted");
}

Test(config, entropy_is_decimal_or_hexadecimal_never_octal)
{
    struct {
        const char *setting;
        uint64_t value;
    } cases[] = {
        {"REPROD_ENTROPY=0", 0},
        {"REPROD_ENTROPY=010", 10},
        {"REPROD_ENTROPY=0X1f", 31},
        {"REPROD_ENTROPY=18446744073709551615", UINT64_MAX},
        {"REPROD_ENTROPY=0xffffffffffffffff", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *environment[] = {(char *)cases[i].setting, NULL};
        struct reprod_config config;
        char error[512];
        cr_assert_eq(parse(environment, &config, error), 0, "%s: %s", cases[i].setting, error);
        cr_expect_eq(config.entropy, cases[i].value, "%s gave %llu", cases[i].setting,
                     (unsigned long long)config.entropy);
    }
}

/* Each setting of the table shows the value it parsed, and its default when unset. */
Test(config, every_setting_shows_what_it_parsed)
{
    char *environment[] = {"REPROD_MODE=Ordered",     "REPROD_ROUNDING=up",  "REPROD_STRICT=1",
                           "REPROD_SEED_POLICY=rank", "REPROD_ENTROPY=0x10", "REPROD_LOG=/tmp/l.%p",
                           "REPROD_VERBOSE=2",        "REPROD_TRACE=/tmp/t", "REPROD_SCRATCH_MB=8",
                           "REPROD_ROUTE=fixed",      NULL};
    const char *shown[] = {"ordered", "up", "1", "rank", "16", "/tmp/l.%p", "2", "/tmp/t", "8",
                           "fixed"};
    struct reprod_config config, defaults;
    char error[512], text[PATH_MAX + 16];
    char *nothing[] = {NULL};
    cr_assert_eq(parse(environment, &config, error), 0, "%s", error);
    cr_assert_eq(parse(nothing, &defaults, error), 0, "%s", error);
    cr_assert_eq(reprod_setting_count, sizeof shown / sizeof shown[0]);
    for (size_t i = 0; i < reprod_setting_count; i++) {
        const struct reprod_setting *setting = &reprod_settings[i];
        cr_expect(strncmp(environment[i], setting->name, strlen(setting->name)) == 0,
                  "the table's setting %zu is %s", i, setting->name);
        cr_expect_str_eq(reprod_setting_show(setting, &config, text, sizeof text), shown[i]);
        const char *fallback = reprod_setting_show(setting, &defaults, text, sizeof text);
        cr_expect(strstr(fallback, setting->default_value), "%s unset shows '%s', not its default",
                  setting->name, fallback);
        cr_expect(setting->help && setting->help[0], "%s has no help", setting->name);
    }
}

Test(config, unknown_variables_are_reported_with_the_nearest_known_name)
{
    char *environment[] = {"REPROD_MOD=exact",       "PATH=/bin",
                           "REPROD_MODE=exact",      "REPROD_VERBSE=1",
                           "REPROD_SEEDPOLICY=hash", NULL};
    size_t cursor = 0;
    char name[128];
    const char *nearest = NULL;
    const char *expected[][2] = {{"REPROD_MOD", "REPROD_MODE"},
                                 {"REPROD_VERBSE", "REPROD_VERBOSE"},
                                 {"REPROD_SEEDPOLICY", "REPROD_SEED_POLICY"}};
    for (size_t i = 0; i < 3; i++) {
        cr_assert(reprod_config_unknown(environment, &cursor, name, sizeof name, &nearest),
                  "unknown variable %zu not reported", i);
        cr_expect_str_eq(name, expected[i][0]);
        cr_expect_str_eq(nearest, expected[i][1]);
    }
    cr_expect_not(reprod_config_unknown(environment, &cursor, name, sizeof name, &nearest));
}

/* A name close to no known one (far off, or longer than the edit distance used to allow) gets
 * no suggestion, and its name is cut to the buffer. */
Test(config, unknown_variables_close_to_no_known_name_get_no_suggestion)
{
    char long_name[128];
    snprintf(long_name, sizeof long_name, "REPROD_%070d=1", 0);
    char *environment[] = {"REPROD_XYZZY_PLUGH=1", long_name, NULL};
    size_t cursor = 0;
    char name[40];
    const char *nearest = "unset";
    cr_assert(reprod_config_unknown(environment, &cursor, name, sizeof name, &nearest));
    cr_expect_str_eq(name, "REPROD_XYZZY_PLUGH");
    cr_expect_null(nearest, "REPROD_XYZZY_PLUGH: suggested %s", nearest);
    nearest = "unset";
    cr_assert(reprod_config_unknown(environment, &cursor, name, sizeof name, &nearest));
    cr_expect_eq(strlen(name), sizeof name - 1);
    cr_expect_null(nearest, "a 77-character name: suggested %s", nearest);
}
