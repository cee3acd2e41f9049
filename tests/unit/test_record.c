/* test_record.c: what the shim writes cannot be forged by a value (shim/runtime/record.c): the
 * escaping of values in messages and in records, the splitting of records that `reprod doctor`
 * and `reprod diff` read back, and a trace line written with hostile strings
 * (shim/runtime/trace.c). Expected texts are written out by hand, byte by byte. */
#include "runtime/config.h"
#include "runtime/record.h"
#include "runtime/trace.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *text(const char *value)
{
    static char out[1024];
    return reprod_escape_text(value, out, sizeof out);
}

static const char *word(const char *value)
{
    static char out[1024];
    return reprod_escape_word(value, out, sizeof out);
}

Test(escape, plain_text_and_utf8_are_kept_as_they_are)
{
    cr_expect_str_eq(text("/tmp/run a/log.%p"), "/tmp/run a/log.%p");
    cr_expect_str_eq(text("/home/jos\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80"),
                     "/home/jos\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x98\x80");
    cr_expect_str_eq(text(""), "");
}

Test(escape, a_value_with_a_space_at_either_end_or_none_at_all_is_quoted)
{
    char out[64];
    cr_expect_str_eq(reprod_escape_value("exact ", out, sizeof out), "\"exact \"");
    cr_expect_str_eq(reprod_escape_value(" /tmp/log", out, sizeof out), "\" /tmp/log\"");
    cr_expect_str_eq(reprod_escape_value("", out, sizeof out), "\"\"");
    cr_expect_str_eq(reprod_escape_value("/tmp/run a/log", out, sizeof out), "/tmp/run a/log");
    cr_expect_str_eq(reprod_escape_value("a\nb ", out, sizeof out), "\"a\\nb \"");
    char small[12];
    cr_expect_str_eq(reprod_escape_value("0123456789ab ", small, sizeof small), "\"012345...\"");
}

Test(escape, line_breaks_and_terminal_controls_are_escaped)
{
    cr_expect_str_eq(text("a\nreprod[0]: counts: pid=1"), "a\\nreprod[0]: counts: pid=1");
    cr_expect_str_eq(text("a\tb\rc\\d"), "a\\tb\\rc\\\\d");
    cr_expect_str_eq(text("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
    cr_expect_str_eq(text("del\x7f nul\x01"), "del\\x7f nul\\x01");
    cr_expect_str_eq(text("\x0b\x0c\x1c\x1d\x1e"), "\\x0b\\x0c\\x1c\\x1d\\x1e");
}

Test(escape, unicode_controls_and_malformed_utf8_are_escaped_byte_by_byte)
{
    cr_expect_str_eq(text("csi\xc2\x9b"
                          "31m"),
                     "csi\\xc2\\x9b31m");                            /* C1 CSI */
    cr_expect_str_eq(text("nel\xc2\x85x"), "nel\\xc2\\x85x");        /* C1 NEL */
    cr_expect_str_eq(text("ls\xe2\x80\xa8x"), "ls\\xe2\\x80\\xa8x"); /* U+2028 */
    cr_expect_str_eq(text("ps\xe2\x80\xa9x"), "ps\\xe2\\x80\\xa9x"); /* U+2029 */
    cr_expect_str_eq(text("rlo\xe2\x80\xae"
                          "cba"),
                     "rlo\\xe2\\x80\\xaecba");                         /* U+202E */
    cr_expect_str_eq(text("lri\xe2\x81\xa6x"), "lri\\xe2\\x81\\xa6x"); /* U+2066 */
    cr_expect_str_eq(text("zw\xe2\x80\x8bx"), "zw\\xe2\\x80\\x8bx");   /* U+200B */
    cr_expect_str_eq(text("bom\xef\xbb\xbfx"), "bom\\xef\\xbb\\xbfx"); /* U+FEFF */
    cr_expect_str_eq(text("lone\xff"), "lone\\xff");
    cr_expect_str_eq(text("overlong\xc0\xaf"), "overlong\\xc0\\xaf");
    cr_expect_str_eq(text("surrogate\xed\xa0\x80"), "surrogate\\xed\\xa0\\x80");
    cr_expect_str_eq(text("beyond\xf4\x90\x80\x80"), "beyond\\xf4\\x90\\x80\\x80");
    cr_expect_str_eq(text("cut\xe6\x97"), "cut\\xe6\\x97");
}

Test(escape, a_word_escapes_the_space_and_everything_beyond_ascii)
{
    cr_expect_str_eq(word("MPI_Allreduce"), "MPI_Allreduce");
    cr_expect_str_eq(word("a b\nseq=9"), "a\\x20b\\nseq=9");
    cr_expect_str_eq(word("jos\xc3\xa9"), "jos\\xc3\\xa9");
    cr_expect_str_eq(word("back\\slash"), "back\\\\slash");
    cr_expect_str_eq(word(""), "-");
}

Test(escape, the_last_defence_keeps_backslashes_and_escapes_the_rest)
{
    char out[64];
    const char line[] = "C:\\x \\n\n\x1b[0m";
    size_t length = reprod_escape_controls(line, sizeof line - 1, out, sizeof out);
    cr_expect_str_eq(out, "C:\\x \\n\\n\\x1b[0m");
    cr_expect_eq(length, strlen("C:\\x \\n\\n\\x1b[0m"));
}

Test(escape, no_byte_of_any_value_reaches_the_output_raw_where_it_could_do_harm)
{
    for (int c = 1; c < 256; c++) {
        char value[4] = {'a', (char)c, 'b', '\0'}, out[32];
        reprod_escape_text(value, out, sizeof out);
        for (const unsigned char *p = (const unsigned char *)out; *p; p++)
            cr_assert(*p >= 0x20 && *p != 0x7f && (*p < 0x80 || c >= 0x80),
                      "byte 0x%02x of a value gave %s", c, out);
        if (c >= 0x80) cr_expect(strstr(out, "\\x") != NULL, "lone byte 0x%02x kept", c);
        reprod_escape_word(value, out, sizeof out);
        for (const unsigned char *p = (const unsigned char *)out; *p; p++)
            cr_assert(*p > 0x20 && *p < 0x7f, "byte 0x%02x of a word gave %s", c, out);
    }
}

Test(escape, a_cut_value_never_splits_an_escape_and_says_it_was_cut)
{
    char out[12];
    reprod_escape_text("abcdefg\n\n\n", out, sizeof out); /* 8 bytes before the "...": */
    cr_expect_str_eq(out, "abcdefg...");                  /* "\n" would need 9 */
    reprod_escape_text("\x1b\x1b\x1b\x1b", out, sizeof out);
    cr_expect_str_eq(out, "\\x1b\\x1b...");
    reprod_escape_text("abcdefghijk", out, sizeof out); /* exactly fits: not cut */
    cr_expect_str_eq(out, "abcdefghijk");
    reprod_escape_text("abcdefghijkl", out, sizeof out);
    cr_expect_str_eq(out, "abcdefgh...");
}

Test(record, the_documented_counts_line_splits_into_its_words)
{
    char line[] = "pid=4711 exact=96 ordered=0 passed=1 audited=0 audit-differed=0 seeds=1 "
                  "MPI.made=96 MPI.passed=1 NCCL.made=0 NCCL.passed=0 other.made=0 "
                  "other.passed=0 pass.non-float-type=1";
    struct reprod_record_word words[32];
    int count = reprod_record_split(line, words, 32);
    cr_assert_eq(count, 14);
    cr_expect_str_eq(words[0].key, "pid");
    cr_expect_str_eq(words[0].value, "4711");
    cr_expect_str_eq(reprod_record_value(words, count, "MPI.made"), "96");
    cr_expect_str_eq(reprod_record_value(words, count, "pass.non-float-type"), "1");
    cr_expect_null(reprod_record_value(words, count, "device"));
}

Test(record, lines_the_shim_cannot_have_written_are_refused)
{
    const char *refused[] = {
        "",
        "pid=1  exact=7",      /* two spaces */
        " pid=1",              /* leading space */
        "pid=1 ",              /* trailing space */
        "pid=1 exact",         /* no '=' */
        "=1",                  /* no key */
        "pid=",                /* no value */
        "p:d=1",               /* a key byte it may not hold */
        "api=a\x1b[2Jb",       /* a raw escape code */
        "api=a\rseq=2",        /* a raw carriage return */
        "api=\xc3\xa9",        /* a raw byte beyond ASCII */
        "api=a\\qb",           /* a backslash that starts no escape */
        "api=a\\e",            /* nor does \e */
        "api=a\\x4",           /* an escape cut short */
        "api=a\\",             /* a backslash at the end */
        "a=1 b=2 c=3 d=4 e=5", /* more words than asked for */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char line[64];
        struct reprod_record_word words[4];
        snprintf(line, sizeof line, "%s", refused[i]);
        cr_expect_eq(reprod_record_split(line, words, 4), -1, "accepted: \"%s\"", refused[i]);
    }
}

Test(record, every_escaped_word_is_a_value_the_reader_accepts)
{
    char value[64], escaped[300], line[320];
    unsigned seed = 12345;
    for (int round = 0; round < 2000; round++) {
        size_t length = 1 + (size_t)(rand_r(&seed) % 40);
        for (size_t i = 0; i < length; i++)
            value[i] = (char)(1 + rand_r(&seed) % 255);
        value[length] = '\0';
        reprod_escape_word(value, escaped, sizeof escaped);
        snprintf(line, sizeof line, "api=%s seq=1", escaped);
        struct reprod_record_word words[4];
        cr_assert_eq(reprod_record_split(line, words, 4), 2, "refused the escaped form %s",
                     escaped);
        cr_assert_str_eq(words[0].value, escaped);
    }
}

/* A trace line written with hostile strings in every string field is one record, its words
 * escaped: a newline, a space or an escape code in a value cannot make a record of its own. */
Test(trace, hostile_strings_stay_inside_one_record)
{
    char dir[] = "/tmp/reprod-test-record.XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    /* Rank 0's trace whatever launched the test (the shim reads the rank from these). */
    const char *rank_variables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                    "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof rank_variables / sizeof rank_variables[0]; i++)
        unsetenv(rank_variables[i]);
    setenv("REPROD_TRACE", dir, 1);
    cr_assert_str_eq(reprod_config()->trace_dir, dir, "the settings were read before the test");
    struct reprod_trace_record record = {
        .sequence = 1,
        .api = "MPI_Allreduce\nseq=2 api=MPI_Allreduce action=exact",
        .action = "exact \x1b[31m",
        .detail = "float64\r\n",
        .count = 5,
        .ranks = 2,
        .has_input = 1,
        .input_hash = 0x1234,
    };
    reprod_trace_write(&record);
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/rank0.trace", dir);
    FILE *file = fopen(path, "r");
    cr_assert_not_null(file, "no trace written at %s", path);
    char header[256], line[1024], more[16];
    cr_assert_not_null(fgets(header, sizeof header, file));
    cr_assert_not_null(fgets(line, sizeof line, file));
    cr_expect_null(fgets(more, sizeof more, file), "more than one record: %s", more);
    fclose(file);
    cr_expect_str_eq(line, "seq=1 api=MPI_Allreduce\\nseq=2\\x20api=MPI_Allreduce\\x20action=exact "
                           "action=exact\\x20\\x1b[31m detail=float64\\r\\n count=5 ranks=2 "
                           "in=0000000000001234 out=-\n");
    line[strlen(line) - 1] = '\0';
    struct reprod_record_word words[16];
    cr_expect_eq(reprod_record_split(line, words, 16), 8);
    unlink(path);
    rmdir(dir);
}
