/* parse.c: reads the comparison file format of `burstc rank`.
 *
 * One comparison per line: "winner,loser[,count]".  Names are any strings without a
 * comma or a line break; spaces and tabs around a field are trimmed, so "a, b" names
 * "a" and "b".  count is a positive decimal integer (default 1).  Blank lines and
 * lines whose first non-blank character is '#' are skipped; a UTF-8 byte-order mark
 * at the start is skipped.  Every malformed line is counted and the first few are
 * reported, so a user can fix a file in one pass; the caller decides to stop when
 * any was found.
 *
 * The input is read in large blocks with read(2) (any file: a pipe or a terminal
 * works like a regular file) and split by hand with memchr; complete lines are parsed
 * in place and their names resolved in batches (rank_data_intern_many), which is
 * where the time goes on large files.  Whatever the input, memory is bounded by the
 * block plus what the comparisons themselves need: a line longer than RANK_MAX_LINE
 * (which is what /dev/zero or a binary file looks like) stops reading, and so do too
 * many errors.
 *
 * A large regular file is cut at line boundaries into one part per thread.  Part 0
 * is read into the caller's rank_data; each other part into its own, with its
 * diagnostics held back (their line numbers are not known yet).  The parts are then
 * merged in order: the part's new names are added in their order of first appearance
 * and its records renumbered, and its diagnostics printed with their true line
 * numbers, so the result is exactly that of reading the file in one go.  Where that
 * could differ (a part stopped reading, or the errors would have reached the limit),
 * the main reader simply reads that part again itself. */
#include "rank.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK (4u << 20) /* > RANK_MAX_LINE, so a whole line always fits */
#define BATCH 1024

void rank_read_opts_default(rank_read_opts *o, FILE *err)
{
    o->err = err;
    o->quiet = 0;
    o->show = 20;
    o->max_errors = 1000;
    o->threads = 1;
}

/* A diagnostic of a part read ahead: its line within the part, and where its text
 * (what follows "FILE:LINE: kind: ") lies in the part's memory stream. */
typedef struct held {
    int64_t line;
    int error;
    size_t start;
} held;

typedef struct reader {
    rank_data *d;
    const char *fname;
    const rank_read_opts *o;
    rank_read_stats st;
    int64_t shown_errors, shown_warnings;
    int stop;       /* fatal: stop reading */
    int oom;        /* out of memory */
    int io_error;   /* errno of a failed read, or 0 */
    int first_line; /* the next line is the first of the input (it may carry a BOM) */
    /* Where the bytes come from: a stdio stream, a range of a file (pread), or a
     * descriptor read to its end. */
    FILE *f;
    int fd;
    int ranged;
    int64_t off, end;
    /* Where diagnostics go: the caller's stream, or a memory stream when held back. */
    FILE *out;
    held *held;
    int nheld;
    char *mem;
    size_t memlen;
    /* Where records go: appended to d, or (a part read ahead) into a region of the
     * result's arrays reserved for this part: ra/rb/rw, rm used of rcap. */
    int32_t *ra, *rb;
    int64_t *rw;
    size_t rm, rcap;
    char *buf;
    size_t nb; /* comparisons waiting in the batch */
    const char *name[2 * BATCH];
    size_t len[2 * BATCH];
    int32_t id[2 * BATCH];
    int64_t count[BATCH];
} reader;

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

/* Starts a message about the current line and returns 1; the caller may add to it
 * on r->out.  Returns 0 when it is not to be shown (quiet warnings, or past the
 * limit: then it is only counted). */
static int diag(reader *r, int error, const char *fmt, ...)
{
    int64_t *shown = error ? &r->shown_errors : &r->shown_warnings;
    if (error) {
        r->st.errors++;
        if (r->o->max_errors > 0 && r->st.errors >= r->o->max_errors)
            r->stop = 1;
    } else {
        r->st.warnings++;
        if (r->o->quiet)
            return 0;
    }
    if (*shown >= r->o->show)
        return 0;
    ++*shown;
    if (r->held) {
        fflush(r->out);
        r->held[r->nheld++] = (held){r->st.lines, error, r->memlen};
    } else {
        rank_put_escaped(r->out, r->fname, strlen(r->fname), 0);
        fprintf(r->out, ":%lld: %s: ", (long long)r->st.lines, error ? "error" : "warning");
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->out, fmt, ap);
    va_end(ap);
    return 1;
}

/* Parses a positive count without sign, spaces or overflow: 0, -1 not a positive
 * integer, -2 too large. */
static int parse_count(field f, int64_t *out)
{
    if (f.len == 0)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < f.len; i++) {
        unsigned dgt = (unsigned)(unsigned char)f.s[i] - '0';
        if (dgt > 9)
            return -1;
        if (v > (INT64_MAX - (int64_t)dgt) / 10) {
            for (size_t k = i + 1; k < f.len; k++)
                if ((unsigned)(unsigned char)f.s[k] - '0' > 9)
                    return -1;
            return -2;
        }
        v = v * 10 + (int64_t)dgt;
    }
    if (v == 0)
        return -1;
    *out = v;
    return 0;
}

/* Resolves the names of the waiting comparisons and appends their records. */
static void flush(reader *r)
{
    if (r->nb == 0 || r->oom)
        return;
    rank_data *d = r->d;
    if (rank_data_intern_many(d, r->name, r->len, r->id, 2 * r->nb) ||
        (r->ra ? r->rcap - r->rm < r->nb : rank_data_reserve(d, r->nb) != 0)) {
        /* (A region holds a record per line, so it cannot fill up.) */
        r->oom = r->stop = 1;
        r->nb = 0;
        return;
    }
    if (r->ra) {
        for (size_t k = 0; k < r->nb; k++) {
            r->ra[r->rm] = r->id[2 * k];
            r->rb[r->rm] = r->id[2 * k + 1];
            r->rw[r->rm] = r->count[k];
            r->rm++;
        }
        r->nb = 0;
        return;
    }
    for (size_t k = 0; k < r->nb; k++) {
        d->a[d->m] = r->id[2 * k];
        d->b[d->m] = r->id[2 * k + 1];
        d->a_wins[d->m] = r->count[k];
        if (d->b_wins)
            d->b_wins[d->m] = 0;
        d->m++;
    }
    r->nb = 0;
}

static void line_too_long(reader *r)
{
    diag(r, 1, "line is longer than %d bytes; stopped reading\n", RANK_MAX_LINE);
    r->stop = 1;
}

/* One line without its '\n'. */
static void parse_line(reader *r, const char *line, size_t len)
{
    r->st.lines++;
    if (len > RANK_MAX_LINE) {
        line_too_long(r);
        return;
    }
    if (r->first_line) {
        r->first_line = 0;
        if (len >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0)
            line += 3, len -= 3;
    }
    while (len && line[len - 1] == '\r')
        len--;
    field whole = trim(line, len);
    if (whole.len == 0 || whole.s[0] == '#')
        return;
    if (memchr(line, '\0', len)) {
        diag(r, 1, "line contains a NUL byte\n");
        return;
    }
    const char *c1 = memchr(whole.s, ',', whole.len);
    if (!c1) {
        diag(r, 1, "1 field; expected 'winner,loser[,count]'\n");
        return;
    }
    const char *end = whole.s + whole.len;
    const char *c2 = memchr(c1 + 1, ',', (size_t)(end - c1 - 1));
    if (c2) {
        const char *c3 = memchr(c2 + 1, ',', (size_t)(end - c2 - 1));
        if (c3) {
            int64_t fields = 4;
            for (const char *p = c3 + 1; (p = memchr(p, ',', (size_t)(end - p))) != NULL; p++)
                fields++;
            diag(r, 1, "%lld fields; expected 'winner,loser[,count]'\n", (long long)fields);
            return;
        }
    }
    field w = trim(whole.s, (size_t)(c1 - whole.s));
    field l = trim(c1 + 1, (size_t)((c2 ? c2 : end) - c1 - 1));
    if (w.len == 0 || l.len == 0) {
        diag(r, 1, "empty %s name\n", w.len == 0 ? "winner" : "loser");
        return;
    }
    int64_t count = 1;
    if (c2) {
        field cf = trim(c2 + 1, (size_t)(end - c2 - 1));
        int rc = parse_count(cf, &count);
        if (rc) {
            if (diag(r, 1, "count '")) {
                rank_put_escaped(r->out, cf.s, cf.len, 40);
                fprintf(r->out, "' is %s\n", rc == -2 ? "too large" : "not a positive integer");
            }
            return;
        }
    }
    if (w.len == l.len && memcmp(w.s, l.s, w.len) == 0) {
        if (diag(r, 0, "'")) {
            rank_put_escaped(r->out, w.s, w.len, RANK_NAME_SHOWN);
            fputs("' is compared with itself; line ignored\n", r->out);
        }
        return;
    }
    /* Later stages need no records once the file is known to be bad. */
    if (r->st.errors)
        return;
    r->name[2 * r->nb] = w.s;
    r->len[2 * r->nb] = w.len;
    r->name[2 * r->nb + 1] = l.s;
    r->len[2 * r->nb + 1] = l.len;
    r->count[r->nb] = count;
    if (++r->nb == BATCH)
        flush(r);
}

/* Parses the complete lines of buf[0..len) (the last one ends with '\n'). */
static void parse_block(reader *r, const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;
    while (p < end && !r->stop) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            nl = end;
        parse_line(r, p, (size_t)(nl - p));
        p = nl + 1;
    }
    /* The batch points into buf, which the caller is about to overwrite. */
    flush(r);
}

/* Reads up to len bytes from the source; -1 on error (errno set). */
static ssize_t read_some(reader *r, char *buf, size_t len)
{
    if (r->f) {
        size_t got = fread(buf, 1, len, r->f);
        return got == 0 && ferror(r->f) ? -1 : (ssize_t)got;
    }
    if (r->ranged) {
        if (r->off >= r->end)
            return 0;
        if ((int64_t)len > r->end - r->off)
            len = (size_t)(r->end - r->off);
    }
    for (;;) {
        ssize_t got = r->ranged ? pread(r->fd, buf, len, (off_t)r->off) : read(r->fd, buf, len);
        if (got >= 0) {
            r->off += got;
            return got;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            /* A non-blocking descriptor (say, an inherited stdin): wait for data. */
            struct pollfd pfd = {r->fd, POLLIN, 0};
            if (poll(&pfd, 1, -1) >= 0 || errno == EINTR)
                continue;
        }
        return -1;
    }
}

/* Reads and parses the reader's source to its end (or until told to stop). */
static void read_all(reader *r)
{
    size_t keep = 0; /* bytes of an incomplete line at the start of buf */
    char *buf = r->buf;
    while (!r->stop) {
        ssize_t got = read_some(r, buf + keep, BLOCK - keep);
        if (got < 0) {
            r->io_error = errno ? errno : EIO;
            r->stop = 1;
            break;
        }
        r->st.bytes += got;
        if (got == 0) {
            if (keep)
                parse_block(r, buf, keep);
            break;
        }
        size_t have = keep + (size_t)got;
        size_t done = have; /* up to and including the last '\n' */
        while (done && buf[done - 1] != '\n')
            done--;
        if (done)
            parse_block(r, buf, done);
        keep = have - done;
        if (keep > RANK_MAX_LINE && !r->stop) {
            r->st.lines++;
            line_too_long(r);
        }
        memmove(buf, buf + done, keep);
    }
}

static reader *new_reader(rank_data *d, const char *fname, const rank_read_opts *o, int hold)
{
    reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->d = d;
    r->fname = fname;
    r->o = o;
    r->out = o->err;
    r->buf = malloc(BLOCK);
    if (hold) {
        /* At most o->show messages of each kind are kept. */
        size_t cap = o->show > 0 && o->show < 1000000 ? 2 * (size_t)o->show : 1;
        r->held = malloc(cap * sizeof *r->held);
        r->out = open_memstream(&r->mem, &r->memlen);
    }
    if (!r->buf || (hold && (!r->held || !r->out))) {
        if (hold && r->out)
            fclose(r->out);
        free(r->mem);
        free(r->held);
        free(r->buf);
        free(r);
        return NULL;
    }
    return r;
}

static void free_reader(reader *r)
{
    if (!r)
        return;
    if (r->held)
        fclose(r->out);
    free(r->mem);
    free(r->held);
    free(r->buf);
    free(r);
}

/* The closing notes, the result, and the reader freed. */
static int64_t finish(reader *r, rank_read_stats *st)
{
    const rank_read_opts *o = r->o;
    FILE *e = o->err;
    const char *fname = r->fname;
    int64_t errors = r->st.errors;
    if (st)
        *st = r->st;
    if (r->oom) {
        fprintf(e, "burstc rank: error: out of memory\n");
        errors = -1;
    } else if (r->io_error) {
        rank_put_escaped(e, fname, strlen(fname), 0);
        fprintf(e, ": error: read failed: %s\n", strerror(r->io_error));
        errors = -1;
    } else {
        if (errors) {
            /* Nothing is ranked from a bad file: what was kept is incomplete. */
            rank_data_free(r->d);
            rank_data_init(r->d);
        }
        int64_t hidden_e = r->st.errors - r->shown_errors;
        int64_t hidden_w = o->quiet ? 0 : r->st.warnings - r->shown_warnings;
        if (o->max_errors > 0 && r->st.errors >= o->max_errors) {
            rank_put_escaped(e, fname, strlen(fname), 0);
            fprintf(e, ":%lld: note: stopped reading after %lld errors\n", (long long)r->st.lines,
                    (long long)r->st.errors);
        }
        if (hidden_e || hidden_w) {
            rank_put_escaped(e, fname, strlen(fname), 0);
            fprintf(e, ": note: ");
            if (hidden_e)
                fprintf(e, "%lld more error%s", (long long)hidden_e, hidden_e == 1 ? "" : "s");
            if (hidden_e && hidden_w)
                fprintf(e, " and ");
            if (hidden_w)
                fprintf(e, "%lld more warning%s", (long long)hidden_w, hidden_w == 1 ? "" : "s");
            fprintf(e, " not shown\n");
        }
    }
    free_reader(r);
    return errors;
}

/* ---- reading a large file in parts ---- */

#define PART_MIN  (8 << 20) /* smaller files are read in one go */
#define MAX_PARTS 16

typedef struct parts {
    int count;
    int fd;
    int64_t cut[MAX_PARTS + 1]; /* part k is [cut[k], cut[k+1]) */
    int64_t lines[MAX_PARTS];   /* lines of part k, so records at most */
    size_t base[MAX_PARTS + 1]; /* where part k's records go in the result */
    reader *r[MAX_PARTS];
    rank_data data[MAX_PARTS];
    int failed;
} parts;

/* Counts the lines of part k: its records can then go straight to their place in
 * the result, with no copy (on a fresh process, memory first touched costs more than
 * reading the file twice from the page cache). */
static void count_part(void *arg, int k)
{
    parts *p = arg;
    char *buf = p->r[k]->buf;
    int64_t lines = 0, at = p->cut[k], end = p->cut[k + 1];
    char last = '\n';
    while (at < end) {
        size_t want = BLOCK;
        if ((int64_t)want > end - at)
            want = (size_t)(end - at);
        ssize_t got = pread(p->fd, buf, want, (off_t)at);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            p->failed = 1;
            return;
        }
        for (const char *q = buf, *e = buf + got; (q = memchr(q, '\n', (size_t)(e - q))); q++)
            lines++;
        last = buf[got - 1];
        at += got;
    }
    p->lines[k] = lines + (last != '\n');
}

static void read_part(void *arg, int k)
{
    parts *p = arg;
    read_all(p->r[k]);
    flush(p->r[k]);
}

/* Moves cut to just after the next '\n' at or after it; 0, or -1 when there is none
 * within a line's length (the file is not made of lines: read it in one go). */
static int align_cut(int fd, int64_t *cut, int64_t end, char *buf)
{
    int64_t at = *cut;
    while (at < end && at - *cut <= RANK_MAX_LINE + 1) {
        size_t want = BLOCK;
        if ((int64_t)want > end - at)
            want = (size_t)(end - at);
        ssize_t got = pread(fd, buf, want, (off_t)at);
        if (got <= 0)
            return -1;
        const char *nl = memchr(buf, '\n', (size_t)got);
        if (nl) {
            *cut = at + (nl - buf) + 1;
            return 0;
        }
        at += got;
    }
    return -1;
}

/* Adds part Q's names and records to the main reader's data, and prints its
 * diagnostics with line numbers counted from the start of the input. */
static void merge_part(reader *m, reader *q)
{
    rank_data *d = m->d, *pd = q->d;
    fflush(q->out);
    for (int k = 0; k < q->nheld; k++) {
        held *h = &q->held[k];
        int64_t *shown = h->error ? &m->shown_errors : &m->shown_warnings;
        if (*shown >= m->o->show)
            continue;
        ++*shown;
        size_t end = k + 1 < q->nheld ? q->held[k + 1].start : q->memlen;
        rank_put_escaped(m->o->err, m->fname, strlen(m->fname), 0);
        fprintf(m->o->err, ":%lld: %s: ", (long long)(m->st.lines + h->line),
                h->error ? "error" : "warning");
        fwrite(q->mem + h->start, 1, end - h->start, m->o->err);
    }
    int clean = m->st.errors == 0 && q->st.errors == 0;
    m->st.bytes += q->st.bytes;
    m->st.lines += q->st.lines;
    m->st.errors += q->st.errors;
    m->st.warnings += q->st.warnings;
    if (!clean || pd->n == 0)
        return;
    int32_t *map = malloc((size_t)pd->n * sizeof *map);
    size_t *len = malloc((size_t)pd->n * sizeof *len);
    if (!map || !len) {
        m->oom = m->stop = 1;
        free(map);
        free(len);
        return;
    }
    for (int32_t i = 0; i < pd->n; i++)
        len[i] = strlen(pd->names[i]);
    if (rank_data_intern_many(d, (const char *const *)pd->names, len, map, (size_t)pd->n)) {
        m->oom = m->stop = 1;
    } else {
        /* The part's records sit in its region, at or after d->m: renumber them and
         * close the gap that lines without a record left (usually none). */
        size_t from = (size_t)(q->ra - d->a);
        for (size_t r = 0; r < q->rm; r++) {
            d->a[d->m + r] = map[d->a[from + r]];
            d->b[d->m + r] = map[d->b[from + r]];
            d->a_wins[d->m + r] = d->a_wins[from + r];
        }
        d->m += q->rm;
    }
    free(map);
    free(len);
}

/* Reads the rest of a regular file, from START to SIZE, in parts.  Returns 0, or -1
 * when the file does not split (then nothing has been read). */
static int read_in_parts(reader *m, int fd, int64_t start, int64_t size, int threads)
{
    parts *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    int count = threads < MAX_PARTS ? threads : MAX_PARTS;
    if ((size - start) / count < PART_MIN / 2)
        count = (int)((size - start) / (PART_MIN / 2));
    if (count < 2) {
        free(p);
        return -1;
    }
    p->cut[0] = start;
    p->cut[count] = size;
    int ok = 1;
    for (int k = 1; k < count && ok; k++) {
        p->cut[k] = start + (size - start) / count * k;
        if (p->cut[k] < p->cut[k - 1] || align_cut(fd, &p->cut[k], size, m->buf) != 0)
            ok = 0;
    }
    for (int k = 1; k < count && ok; k++)
        if (p->cut[k] >= p->cut[k + 1])
            ok = 0;
    p->count = count;
    p->fd = fd;
    p->r[0] = m;
    for (int k = 1; k < count && ok; k++) {
        rank_data_init(&p->data[k]);
        p->r[k] = new_reader(&p->data[k], m->fname, m->o, 1);
        if (!p->r[k])
            ok = 0;
    }
    if (ok) {
        rank_parallel(count, threads, count_part, p);
        ok = !p->failed;
    }
    rank_data *d = m->d;
    for (int k = 0; k < count && ok; k++)
        p->base[k + 1] = p->base[k] + (size_t)p->lines[k];
    /* The regions are reserved (address space; only what is written is touched). */
    if (ok && (d->m != 0 || d->b_wins || rank_data_reserve(d, p->base[count])))
        ok = 0;
    if (!ok) {
        for (int k = 1; k < count; k++) {
            free_reader(p->r[k]);
            rank_data_free(&p->data[k]);
        }
        free(p);
        return -1;
    }
    for (int k = 0; k < count; k++) {
        reader *r = p->r[k];
        r->fd = fd;
        r->ranged = 1;
        r->off = p->cut[k];
        r->end = p->cut[k + 1];
        r->ra = d->a + p->base[k];
        r->rb = d->b + p->base[k];
        r->rw = d->a_wins + p->base[k];
        r->rcap = (size_t)p->lines[k];
    }
    rank_parallel(count, threads, read_part, p);
    /* From here on the main reader appends: its records are the first d->m. */
    d->m = m->rm;
    m->ra = m->rb = NULL;
    m->rw = NULL;
    for (int k = 1; k < count; k++) {
        reader *q = p->r[k];
        /* Merged only where that gives what reading in one go would have given. */
        int same = !m->stop && !q->stop && !q->oom &&
                   (m->o->max_errors <= 0 || m->st.errors + q->st.errors < m->o->max_errors);
        if (same) {
            merge_part(m, q);
        } else if (!m->stop) {
            m->off = p->cut[k];
            m->end = p->cut[k + 1];
            read_all(m);
            flush(m);
        }
        free_reader(q);
        rank_data_free(&p->data[k]);
    }
    free(p);
    return 0;
}

int rank_open_input(const char *path, int fifo_wait_ms, FILE *err)
{
    if (strcmp(path, "-") == 0)
        return 0;
    /* O_NONBLOCK so that opening a FIFO does not wait for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int saved = errno;
        fputs("burstc rank: error: cannot open '", err);
        rank_put_escaped(err, path, strlen(path), 0);
        fprintf(err, "': %s\n", strerror(saved));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (S_ISDIR(sb.st_mode)) {
        fputs("burstc rank: error: '", err);
        rank_put_escaped(err, path, strlen(path), 0);
        fputs("' is a directory\n", err);
        close(fd);
        return -1;
    }
    if (S_ISFIFO(sb.st_mode)) {
        /* A FIFO nobody has opened for writing: wait a while for a writer's data (or
         * its end), not for ever. */
        struct pollfd pfd = {fd, POLLIN, 0};
        int r;
        do
            r = poll(&pfd, 1, fifo_wait_ms);
        while (r < 0 && errno == EINTR);
        if (r == 0) {
            fputs("burstc rank: error: nothing was written to the FIFO '", err);
            rank_put_escaped(err, path, strlen(path), 0);
            fprintf(err, "' in %g s\n", fifo_wait_ms / 1000.0);
            close(fd);
            return -1;
        }
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

int64_t rank_read_fd(int fd, const char *fname, rank_data *d, const rank_read_opts *o,
                     rank_read_stats *st)
{
    reader *r = new_reader(d, fname, o, 0);
    if (!r) {
        fprintf(o->err, "burstc rank: error: out of memory\n");
        return -1;
    }
    r->fd = fd;
    r->first_line = 1;
    struct stat sb;
    off_t start = lseek(fd, 0, SEEK_CUR);
    int parted = 0;
    if (o->threads > 1 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && start >= 0 &&
        sb.st_size - start >= PART_MIN) {
        if (read_in_parts(r, fd, start, sb.st_size, o->threads) == 0) {
            parted = 1;
            lseek(fd, sb.st_size, SEEK_SET);
        }
    }
    if (!parted) {
        read_all(r);
        flush(r);
    }
    return finish(r, st);
}

int64_t rank_parse(FILE *f, const char *fname, rank_data *d, FILE *err)
{
    rank_read_opts o;
    rank_read_opts_default(&o, err);
    reader *r = new_reader(d, fname, &o, 0);
    if (!r) {
        fprintf(err, "burstc rank: error: out of memory\n");
        return -1;
    }
    r->f = f;
    r->first_line = 1;
    read_all(r);
    flush(r);
    return finish(r, NULL);
}
