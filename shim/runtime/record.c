/* record.c: the escaping of values from outside the shim, and the splitting of the records
 * that tools read back (record.h). The rules are written once, here, for both sides. */
#include "runtime/record.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum escape_rules {
    ESCAPE_TEXT = 0,           /* a value in a message */
    ESCAPE_WORD = 1,           /* a word of a record: also the space and all beyond ASCII */
    ESCAPE_KEEP_BACKSLASH = 2, /* a whole line whose values were escaped already */
};

/* Code points a terminal does not show as text: the C1 controls, the Arabic letter mark,
 * zero-width and directional marks, the line and paragraph separators and the bidirectional
 * embeddings, the invisible operators and isolates, the byte-order mark, and the interlinear
 * annotation marks. */
static int is_hidden(uint32_t code)
{
    return code <= 0x9f || code == 0x61c || (code >= 0x200b && code <= 0x200f) ||
           (code >= 0x2028 && code <= 0x202e) || (code >= 0x2060 && code <= 0x206f) ||
           code == 0xfeff || (code >= 0xfff9 && code <= 0xfffb);
}

/* The length of the well-formed UTF-8 character at s[0 .. left) when it may be shown as it
 * is; 0 for a malformed, overlong, surrogate or hidden one (its bytes are escaped). */
static size_t shown_character_length(const unsigned char *s, size_t left)
{
    size_t length;
    uint32_t code, smallest;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        length = 2, code = s[0] & 0x1fu, smallest = 0x80;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        length = 3, code = s[0] & 0x0fu, smallest = 0x800;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        length = 4, code = s[0] & 0x07u, smallest = 0x10000;
    else
        return 0;
    if (length > left) return 0;
    for (size_t i = 1; i < length; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        code = code << 6 | (s[i] & 0x3fu);
    }
    if (code < smallest || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
    return is_hidden(code) ? 0 : length;
}

/* The escaped form of the text at s[0 .. left) under `rules`: written into piece (at least 5
 * bytes), its length returned; *consumed says how many bytes of s it stands for. */
static size_t next_piece(const unsigned char *s, size_t left, int rules, char *piece,
                         size_t *consumed)
{
    unsigned c = s[0];
    *consumed = 1;
    if (c == '\\')
        return (size_t)snprintf(piece, 5, "%s", rules & ESCAPE_KEEP_BACKSLASH ? "\\" : "\\\\");
    if (c == '\n') return (size_t)snprintf(piece, 5, "\\n");
    if (c == '\t') return (size_t)snprintf(piece, 5, "\\t");
    if (c == '\r') return (size_t)snprintf(piece, 5, "\\r");
    if ((c > ' ' && c < 0x7f) || (c == ' ' && !(rules & ESCAPE_WORD))) {
        piece[0] = (char)c;
        return 1;
    }
    if (c >= 0x80 && !(rules & ESCAPE_WORD)) {
        size_t length = shown_character_length(s, left);
        if (length) {
            memcpy(piece, s, length);
            *consumed = length;
            return length;
        }
    }
    return (size_t)snprintf(piece, 5, "\\x%02x", c);
}

/* Escape text[0 .. length) under `rules` into out[0 .. out_bytes), NUL-terminated; cut at a
 * piece's boundary with "..." when it does not fit. Returns the length written. */
static size_t escape(const char *text, size_t length, int rules, char *out, size_t out_bytes)
{
    const unsigned char *s = (const unsigned char *)text;
    char piece[8];
    size_t consumed, total = 0;
    if (out_bytes < 4) {
        if (out_bytes) out[0] = '\0';
        return 0;
    }
    for (size_t i = 0; i < length; i += consumed)
        total += next_piece(s + i, length - i, rules, piece, &consumed);
    size_t room = total < out_bytes ? out_bytes - 1 : out_bytes - 4, used = 0;
    for (size_t i = 0; i < length; i += consumed) {
        size_t piece_length = next_piece(s + i, length - i, rules, piece, &consumed);
        if (used + piece_length > room) break;
        memcpy(out + used, piece, piece_length);
        used += piece_length;
    }
    if (total >= out_bytes) {
        memcpy(out + used, "...", 3);
        used += 3;
    }
    out[used] = '\0';
    return used;
}

const char *reprod_escape_text(const char *value, char *out, size_t out_bytes)
{
    escape(value, strlen(value), ESCAPE_TEXT, out, out_bytes);
    return out;
}

const char *reprod_escape_value(const char *value, char *out, size_t out_bytes)
{
    size_t length = strlen(value);
    int blank_edge = length == 0 || value[0] == ' ' || value[length - 1] == ' ';
    if (!blank_edge || out_bytes < 6) return reprod_escape_text(value, out, out_bytes);
    size_t used = escape(value, length, ESCAPE_TEXT, out + 1, out_bytes - 2);
    out[0] = '"';
    out[used + 1] = '"';
    out[used + 2] = '\0';
    return out;
}

const char *reprod_escape_word(const char *value, char *out, size_t out_bytes)
{
    escape(*value ? value : "-", *value ? strlen(value) : 1, ESCAPE_WORD, out, out_bytes);
    return out;
}

size_t reprod_escape_controls(const char *text, size_t length, char *out, size_t out_bytes)
{
    return escape(text, length, ESCAPE_KEEP_BACKSLASH, out, out_bytes);
}

static int is_key_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

static int is_hex_digit(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A value the shim can have written: printable ASCII but the space, backslashes in escapes
 * (\\, \n, \t, \r, \xHH). */
static int is_record_value(const char *value)
{
    if (!*value) return 0;
    for (const unsigned char *v = (const unsigned char *)value; *v; v++) {
        if (*v <= ' ' || *v >= 0x7f) return 0;
        if (*v != '\\') continue;
        if (v[1] == '\\' || v[1] == 'n' || v[1] == 't' || v[1] == 'r')
            v++;
        else if (v[1] == 'x' && is_hex_digit(v[2]) && is_hex_digit(v[3]))
            v += 3;
        else
            return 0;
    }
    return 1;
}

int reprod_record_split(char *line, struct reprod_record_word *words, int max_words)
{
    int count = 0;
    for (char *word = line;;) {
        if (count == max_words) return -1;
        char *space = strchr(word, ' ');
        if (space) *space = '\0';
        char *equals = strchr(word, '=');
        if (!equals || equals == word) return -1;
        *equals = '\0';
        for (const char *k = word; *k; k++)
            if (!is_key_byte((unsigned char)*k)) return -1;
        if (!is_record_value(equals + 1)) return -1;
        words[count].key = word;
        words[count].value = equals + 1;
        count++;
        if (!space) return count;
        word = space + 1;
    }
}

const char *reprod_record_value(const struct reprod_record_word *words, int count, const char *key)
{
    for (int i = 0; i < count; i++)
        if (strcmp(words[i].key, key) == 0) return words[i].value;
    return NULL;
}
