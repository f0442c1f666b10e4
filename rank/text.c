/* text.c: writing item names where they can do harm.
 *
 * Names are arbitrary bytes from the user's file.  Echoed raw into a terminal, an
 * escape sequence in a name could recolour, retitle or rewrite the screen; written
 * raw into JSON, bytes that are not UTF-8 make the document invalid.  Messages and
 * text output therefore go through rank_put_escaped, JSON through rank_put_json. */
#include "rank.h"

#include <string.h>

size_t rank_utf8_len(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *)str;
    if (len == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (len < need || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < need; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return need;
}

/* C0 controls, DEL, and C1 controls (U+0080..U+009F, two bytes C2 80..C2 9F). */
static int is_control(const unsigned char *s, size_t n)
{
    if (n == 1)
        return s[0] < 0x20 || s[0] == 0x7f;
    return n == 2 && s[0] == 0xc2 && s[1] < 0xa0;
}

void rank_put_escaped(FILE *f, const char *s, size_t len, size_t max)
{
    size_t i = 0;
    while (i < len) {
        if (max && i >= max) {
            fputs("...", f);
            return;
        }
        size_t n = rank_utf8_len(s + i, len - i);
        if (n == 0 || is_control((const unsigned char *)s + i, n)) {
            size_t bad = n ? n : 1;
            for (size_t k = 0; k < bad; k++)
                fprintf(f, "\\x%02x", (unsigned char)s[i + k]);
            i += bad;
        } else {
            fwrite(s + i, 1, n, f);
            i += n;
        }
    }
}

void rank_put_json(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t n = rank_utf8_len(s + i, len - i);
        if (n == 0) {
            fputs("\\ufffd", f); /* not UTF-8: JSON text must be */
            i++;
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (is_control((const unsigned char *)s + i, n))
            fprintf(f, "\\u%04x", n == 1 ? c : (unsigned char)s[i + 1]);
        else
            fwrite(s + i, 1, n, f);
        i += n;
    }
    fputc('"', f);
}
