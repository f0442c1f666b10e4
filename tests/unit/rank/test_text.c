/* test_text.c: names where they can do harm.
 *
 * A name is any bytes.  In a message or the text output it must not reach the
 * terminal as a control sequence; in JSON it must come out as valid UTF-8 JSON text.
 * The UTF-8 decoder behind both must refuse what the standard refuses: overlong
 * forms, surrogates, code points above U+10FFFF, truncated sequences. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>
#include <string.h>

static char out[4096];

static const char *escaped(const char *s, size_t len, size_t max)
{
    FILE *f = fmemopen(out, sizeof out, "w");
    rank_put_escaped(f, s, len, max);
    fclose(f);
    return out;
}

static const char *json(const char *s, size_t len)
{
    FILE *f = fmemopen(out, sizeof out, "w");
    rank_put_json(f, s, len);
    fclose(f);
    return out;
}

#define ESC(lit, want)  CHECK(strcmp(escaped(lit, sizeof lit - 1, 0), want) == 0)
#define JSON(lit, want) CHECK(strcmp(json(lit, sizeof lit - 1), want) == 0)

int main(void)
{
    /* The decoder. */
    CHECK(rank_utf8_len("a", 1) == 1);
    CHECK(rank_utf8_len("\xc3\xa9", 2) == 2);         /* é */
    CHECK(rank_utf8_len("\xe2\x82\xac", 3) == 3);     /* € */
    CHECK(rank_utf8_len("\xf0\x9f\x98\x80", 4) == 4); /* U+1F600 */
    CHECK(rank_utf8_len("\xc0\x80", 2) == 0);         /* overlong NUL */
    CHECK(rank_utf8_len("\xe0\x80\xaf", 3) == 0);     /* overlong '/' */
    CHECK(rank_utf8_len("\xed\xa0\x80", 3) == 0);     /* surrogate D800 */
    CHECK(rank_utf8_len("\xf4\x90\x80\x80", 4) == 0); /* above U+10FFFF */
    CHECK(rank_utf8_len("\xf5\x80\x80\x80", 4) == 0);
    CHECK(rank_utf8_len("\xe2\x82", 2) == 0); /* truncated */
    CHECK(rank_utf8_len("\x80", 1) == 0);     /* a lone continuation byte */
    CHECK(rank_utf8_len("\xff", 1) == 0);

    /* Terminal: printable UTF-8 passes, C0/DEL/C1 controls and invalid bytes are \xHH. */
    ESC("plain name", "plain name");
    ESC("caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac");
    ESC("a\x1b[31mred\x1b[0m", "a\\x1b[31mred\\x1b[0m");
    ESC("bell\a tab\t cr\r del\x7f", "bell\\x07 tab\\x09 cr\\x0d del\\x7f");
    ESC("csi\xc2\x9b"
        "2J",
        "csi\\xc2\\x9b2J"); /* U+009B, the 8-bit CSI */
    ESC("bad\xff\xfe", "bad\\xff\\xfe");
    ESC("\xed\xa0\x80", "\\xed\\xa0\\x80");
    CHECK(strcmp(escaped("abcdefgh", 8, 3), "abc...") == 0);
    CHECK(strcmp(escaped("ab\xc3\xa9"
                         "cd",
                         6, 3),
                 "ab\xc3\xa9...") == 0); /* whole chars */

    /* JSON: quotes, backslashes and controls escaped; invalid UTF-8 becomes U+FFFD. */
    JSON("plain", "\"plain\"");
    JSON("say \"hi\" \\o/", "\"say \\\"hi\\\" \\\\o/\"");
    JSON("nl\ntab\tcr\r", "\"nl\\ntab\\tcr\\r\"");
    JSON("esc\x1b"
         "del\x7f",
         "\"esc\\u001bdel\\u007f\"");
    JSON("c1\xc2\x85", "\"c1\\u0085\"");
    JSON("caf\xc3\xa9", "\"caf\xc3\xa9\"");
    JSON("bad\xff"
         "x\xc3",
         "\"bad\\ufffdx\\ufffd\"");
    JSON("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    return check_done("test_text");
}
