/* record.h: what the shim writes for people and tools to read, made so that no value can forge
 * it: the escaping of values that come from outside the shim, and the key=value records that
 * `reprod doctor` and `reprod diff` read back (the counts: line of the log, a trace's lines).
 *
 * Escaping (docs/design.md, "What the shim writes"): a backslash becomes \\, a newline \n, a
 * tab \t, a carriage return \r, and any other byte that could end a line, move a terminal's
 * cursor or hide text becomes \xHH: control characters, DEL, bytes that are not well-formed
 * UTF-8, the C1 controls, Unicode's line and paragraph separators and its invisible formatting
 * and bidirectional controls. In a record's word the space and every byte beyond ASCII are escaped
 * too. Escaped text is never longer than 4 times the value.
 *
 * A record is words `key=value` separated by one space; a key is made of letters, digits, '.',
 * '_' and '-'; a value is one or more printable ASCII characters other than the space, in which
 * a backslash starts \\, \n, \t, \r or \xHH. Readers ignore keys they do not know, so a
 * field can be added.
 */
#ifndef REPROD_RECORD_H
#define REPROD_RECORD_H

#include <stddef.h>

/* Write `value` escaped for a message into out[0 .. out_bytes) (out_bytes >= 4): spaces and
 * well-formed UTF-8 text are kept. Cut at an escape's or a character's boundary, ending in
 * "...", when it does not fit. Returns out. */
const char *reprod_escape_text(const char *value, char *out, size_t out_bytes);

/* The same for a setting's value: in double quotes when it is empty or begins or ends with a
 * space (unquoted, `REPROD_MODE=exact ` reads as `exact`); otherwise as reprod_escape_text. */
const char *reprod_escape_value(const char *value, char *out, size_t out_bytes);

/* The same for one word of a record: only printable ASCII other than the space is kept (an
 * empty value is written "-"). */
const char *reprod_escape_word(const char *value, char *out, size_t out_bytes);

/* The last line of defence of a message whose values were escaped already (a backslash is
 * kept as it is): text[0 .. length) with whatever reprod_escape_text would escape other than
 * the backslash escaped, into out[0 .. out_bytes). Returns the length written (cut as above;
 * out is NUL-terminated). A line written through it is always one line. */
size_t reprod_escape_controls(const char *text, size_t length, char *out, size_t out_bytes);

/* One word of a record, split in place: key and value are NUL-terminated inside the line. */
struct reprod_record_word {
    const char *key;
    const char *value;
};

/* Split `line` (a record without its newline; changed in place) into its words, at most
 * `max_words`. Returns how many, or -1 when the line is not a record the shim can have written:
 * empty, a space that does not separate two words, a word without '=', a key or a value with a
 * byte it may not hold, a backslash that starts no escape, more than max_words words. */
int reprod_record_split(char *line, struct reprod_record_word *words, int max_words);

/* The value of `key` among words[0 .. count), or NULL. */
const char *reprod_record_value(const struct reprod_record_word *words, int count, const char *key);

#endif /* REPROD_RECORD_H */
