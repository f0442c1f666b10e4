/* parse.c: reads the comparison file format of `burstc rank`.
 *
 * One comparison per line: "winner,loser[,count]".  Names are any strings without a
 * comma or a line break; spaces and tabs around a field are trimmed, so "a, b" names
 * "a" and "b".  count is a positive decimal integer (default 1).  Blank lines and
 * lines whose first non-blank character is '#' are skipped.  Every malformed line is
 * reported (not just the first) so a user can fix a file in one pass; the caller
 * decides to stop when any was found. */
#include "rank.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct field {
    const char *s;
    size_t len;
} field;

static field trim(const char *s, size_t len)
{
    while (len && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    return (field){s, len};
}

/* Parses a positive count without sign, spaces or overflow. */
static int parse_count(field f, int64_t *out)
{
    if (f.len == 0 || f.len > 18) {
        /* 18 digits always fit in int64; longer ones might not. */
        if (f.len == 0)
            return -1;
        for (size_t i = 0; i < f.len; i++)
            if (f.s[i] < '0' || f.s[i] > '9')
                return -1;
        return -2;
    }
    int64_t v = 0;
    for (size_t i = 0; i < f.len; i++) {
        if (f.s[i] < '0' || f.s[i] > '9')
            return -1;
        v = v * 10 + (f.s[i] - '0');
    }
    if (v == 0)
        return -1;
    *out = v;
    return 0;
}

/* The names of the previous line and their ids: files often group one item's results
 * together, and a hit here skips a hash-table probe that at 10^6 items is mostly
 * cache misses. */
typedef struct recent {
    char *s;
    size_t len, cap;
    int32_t id;
} recent;

static int32_t intern_cached(rank_data *d, recent *r, field f)
{
    for (int k = 0; k < 2; k++)
        if (r[k].id >= 0 && r[k].len == f.len && memcmp(r[k].s, f.s, f.len) == 0)
            return r[k].id;
    int32_t id = rank_data_intern(d, f.s, f.len);
    if (id < 0)
        return -1;
    /* The newest goes first; its buffer is the older entry's, grown only for longer
   * names. */
    recent t = r[1];
    r[1] = r[0];
    r[0] = t;
    recent *slot = &r[0];
    slot->id = -1;
    if (f.len + 1 > slot->cap) {
        char *ns = realloc(slot->s, f.len + 1);
        if (!ns)
            return id; /* the cache is an optimisation: skip it */
        slot->s = ns;
        slot->cap = f.len + 1;
    }
    memcpy(slot->s, f.s, f.len);
    slot->len = f.len;
    slot->id = id;
    return id;
}

int64_t rank_parse(FILE *f, const char *fname, rank_data *d, FILE *err)
{
    recent cache[2] = {{NULL, 0, 0, -1}, {NULL, 0, 0, -1}};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0, errors = 0;
    while ((len = getline(&line, &cap, f)) != -1) {
        lineno++;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        field whole = trim(line, (size_t)len);
        if (whole.len == 0 || whole.s[0] == '#')
            continue;
        if (memchr(line, '\0', (size_t)len)) {
            fprintf(err, "%s:%lld: error: line contains a NUL byte\n", fname, (long long)lineno);
            errors++;
            continue;
        }
        field fl[3];
        int nf = 0;
        size_t start = 0;
        int too_many = 0;
        for (size_t i = 0; i <= (size_t)len; i++) {
            if (i == (size_t)len || line[i] == ',') {
                if (nf == 3) {
                    too_many++;
                } else {
                    fl[nf++] = trim(line + start, i - start);
                }
                start = i + 1;
            }
        }
        if (too_many) {
            fprintf(err, "%s:%lld: error: %d fields; expected 'winner,loser[,count]'\n", fname,
                    (long long)lineno, 3 + too_many);
            errors++;
            continue;
        }
        if (nf < 2) {
            fprintf(err, "%s:%lld: error: 1 field; expected 'winner,loser[,count]'\n", fname,
                    (long long)lineno);
            errors++;
            continue;
        }
        if (fl[0].len == 0 || fl[1].len == 0) {
            fprintf(err, "%s:%lld: error: empty %s name\n", fname, (long long)lineno,
                    fl[0].len == 0 ? "winner" : "loser");
            errors++;
            continue;
        }
        int64_t count = 1;
        if (nf == 3) {
            int rc = parse_count(fl[2], &count);
            if (rc) {
                fprintf(err, "%s:%lld: error: count '%.*s' is %s\n", fname, (long long)lineno,
                        (int)fl[2].len, fl[2].s, rc == -2 ? "too large" : "not a positive integer");
                errors++;
                continue;
            }
        }
        if (fl[0].len == fl[1].len && memcmp(fl[0].s, fl[1].s, fl[0].len) == 0) {
            fprintf(err, "%s:%lld: warning: '%.*s' is compared with itself; line ignored\n", fname,
                    (long long)lineno, (int)fl[0].len, fl[0].s);
            continue;
        }
        /* Later stages need no records once the file is known to be bad. */
        if (errors)
            continue;
        int32_t w = intern_cached(d, cache, fl[0]);
        int32_t l = w < 0 ? -1 : intern_cached(d, cache, fl[1]);
        if (l < 0 || rank_data_add(d, w, l, count, 0)) {
            fprintf(err, "%s:%lld: error: out of memory\n", fname, (long long)lineno);
            free(line);
            free(cache[0].s);
            free(cache[1].s);
            return -1;
        }
    }
    int io_error = ferror(f);
    int saved = errno;
    free(line);
    free(cache[0].s);
    free(cache[1].s);
    if (io_error) {
        fprintf(err, "%s: error: read failed: %s\n", fname, strerror(saved));
        return -1;
    }
    return errors;
}
