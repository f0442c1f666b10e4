/* test_read.c: reading comparison files at the edges.
 *
 * A large file is read in parts on several threads; the result (names, ids by first
 * appearance, records, every message with its line number) must be exactly that of
 * reading it in one go, whatever goes wrong in which part.  Around that: the byte
 * order mark, the cap on shown messages, --quiet, lines that never end (/dev/zero),
 * and files that are not files (a directory, a FIFO nobody writes to). */
#include "check.h"
#include "rank.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct result {
    rank_data d;
    int64_t rc;
    rank_read_stats st;
    char *diag;
    size_t diag_len;
} result;

/* Reads PATH with THREADS threads; diagnostics are captured in r->diag. */
static void read_file(const char *path, int threads, int quiet, result *r)
{
    rank_data_init(&r->d);
    FILE *err = open_memstream(&r->diag, &r->diag_len);
    rank_read_opts o;
    rank_read_opts_default(&o, err);
    o.threads = threads;
    o.quiet = quiet;
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    r->rc = rank_read_fd(fd, "t.csv", &r->d, &o, &r->st);
    close(fd);
    fclose(err);
}

static void free_result(result *r)
{
    rank_data_free(&r->d);
    free(r->diag);
}

/* Everything read must be the same. */
static int same(const result *x, const result *y)
{
    /* (Where reading stopped early, the bytes read ahead may differ.) */
    int ok = x->rc == y->rc && x->d.n == y->d.n && x->d.m == y->d.m && x->st.lines == y->st.lines &&
             (x->rc != 0 || x->st.bytes == y->st.bytes) && x->st.errors == y->st.errors &&
             x->st.warnings == y->st.warnings && x->diag_len == y->diag_len &&
             memcmp(x->diag, y->diag, x->diag_len) == 0;
    for (int32_t i = 0; ok && i < x->d.n; i++)
        ok = strcmp(x->d.names[i], y->d.names[i]) == 0;
    for (size_t k = 0; ok && k < x->d.m; k++)
        ok = x->d.a[k] == y->d.a[k] && x->d.b[k] == y->d.b[k] && x->d.a_wins[k] == y->d.a_wins[k];
    if (!ok)
        fprintf(
            stderr,
            "differs: rc %lld/%lld n %d/%d m %zu/%zu lines %lld/%lld e %lld/%lld w %lld/%lld len %zu/%zu\n",
            (long long)x->rc, (long long)y->rc, x->d.n, y->d.n, x->d.m, y->d.m,
            (long long)x->st.lines, (long long)y->st.lines, (long long)x->st.errors,
            (long long)y->st.errors, (long long)x->st.warnings, (long long)y->st.warnings,
            x->diag_len, y->diag_len);
    return ok;
}

#define LINES 600000

/* A file of about 13 MB (so that it is read in up to three parts), names from a pool of 50,000,
 * with BAD(line) deciding which lines carry a problem. */
static void write_big(const char *path, int (*bad)(long))
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    uint64_t x = 12345;
    for (long line = 1; line <= LINES; line++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned a = (unsigned)(x >> 33) % 50000, b = (unsigned)(x >> 17) % 50000;
        if (a == b)
            b = (b + 1) % 50000;
        int kind = bad ? bad(line) : 0;
        if (kind == 1)
            fprintf(f, "player%u\n", a); /* one field */
        else if (kind == 2)
            fprintf(f, "player%u,player%u\n", a, a); /* self-comparison */
        else if (kind == 3)
            fprintf(f, "# a comment, with commas\n");
        else
            fprintf(f, "player%u, player%u,%u\n", a, b, (unsigned)(x >> 40) % 3 + 1);
    }
    fclose(f);
}

static int no_problems(long line)
{
    return line % 1000 == 0 ? 3 : 0;
}
static int late_problems(long line)
{
    return line > 540000 && line % 4200 == 0 ? 1 : line > 480000 && line % 5400 == 0 ? 2 : 0;
}
static int early_and_late(long line)
{
    return line == 10 ? 2 : line == LINES - 1 ? 1 : 0;
}
static int many_errors(long line)
{
    return line > 180000 && line % 300 == 0 ? 1 : 0; /* 1400 errors, past the limit */
}

static void parts_equal(const char *path, int (*bad)(long), int quiet)
{
    write_big(path, bad);
    result one, two, three;
    read_file(path, 1, quiet, &one);
    read_file(path, 2, quiet, &two);
    read_file(path, 3, quiet, &three);
    CHECK(same(&one, &two));
    CHECK(same(&one, &three));
    free_result(&one);
    free_result(&two);
    free_result(&three);
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        fwrite(text, 1, len, f);
        fclose(f);
    }
}

int main(void)
{
    char dir[] = "/tmp/rank_test_read.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], fifo[256];
    snprintf(path, sizeof path, "%s/big.csv", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);

    /* Read in parts = read in one go: clean, with problems late (held back and
     * printed with their true line numbers), early and late, and past the error
     * limit (the parts then defer to one reader). */
    parts_equal(path, no_problems, 0);
    parts_equal(path, late_problems, 0);
    parts_equal(path, late_problems, 1);
    parts_equal(path, early_and_late, 0);
    parts_equal(path, many_errors, 0);
    {
        result r;
        write_big(path, late_problems);
        read_file(path, 2, 0, &r);
        CHECK(r.st.lines == LINES);
        CHECK(r.d.n == 0 && r.d.m == 0); /* nothing is kept from a bad file */
        CHECK(r.st.errors == 14 && r.st.warnings == 22);
        /* Warnings from line 480600 on, errors from 541800 on: 20 of each kind are
         * shown, all with their line numbers in the whole file. */
        CHECK(strstr(r.diag, "t.csv:480600: warning: 'player") != NULL);
        CHECK(strstr(r.diag, "t.csv:541800: error: 1 field") != NULL);
        CHECK(strstr(r.diag, "t.csv: note: 2 more warnings not shown\n") != NULL);
        free_result(&r);
    }

    /* A byte-order mark is not part of the first name; elsewhere it is. */
    {
        static const char bom[] = "\xef\xbb\xbf"
                                  "alice,bob\n\xef\xbb\xbf"
                                  "carol,bob\n";
        write_text(path, bom, sizeof bom - 1);
        result r;
        read_file(path, 1, 0, &r);
        CHECK(r.rc == 0 && r.d.n == 3);
        CHECK(strcmp(r.d.names[0], "alice") == 0);
        CHECK(strcmp(r.d.names[2], "\xef\xbb\xbf"
                                   "carol") == 0);
        free_result(&r);
    }

    /* Shown messages are capped (20 errors, 20 warnings), the rest counted; --quiet
     * drops warnings but never errors. */
    {
        char text[8192];
        size_t len = 0;
        for (int i = 0; i < 30; i++)
            len += (size_t)snprintf(text + len, sizeof text - len, "bad%d\nx%d,x%d\n", i, i, i);
        write_text(path, text, len);
        result r;
        read_file(path, 1, 0, &r);
        CHECK(r.rc == 30 && r.st.errors == 30 && r.st.warnings == 30);
        int lines = 0;
        for (char *p = r.diag; (p = strchr(p, '\n')) != NULL; p++)
            lines++;
        CHECK(lines == 41);
        CHECK(strstr(r.diag, "t.csv:39: error: 1 field;") != NULL);
        CHECK(strstr(r.diag, "t.csv:41: error:") == NULL);
        CHECK(strstr(r.diag, "t.csv: note: 10 more errors and 10 more warnings not shown\n"));
        free_result(&r);
        read_file(path, 1, 1, &r);
        CHECK(strstr(r.diag, "warning") == NULL);
        CHECK(strstr(r.diag, "t.csv: note: 10 more errors not shown\n") != NULL);
        free_result(&r);
    }

    /* Control characters in names are escaped in messages. */
    {
        write_text(path, "a\x1b[2Jb,a\x1b[2Jb\n", 14);
        result r;
        read_file(path, 1, 0, &r);
        CHECK(strcmp(r.diag, "t.csv:1: warning: 'a\\x1b[2Jb' is compared with itself; line "
                             "ignored\n") == 0);
        free_result(&r);
    }

    /* A line that never ends stops reading, after about a line's worth: memory and
     * time are bounded. */
    {
        rank_data d;
        rank_data_init(&d);
        char *diag = NULL;
        size_t dlen = 0;
        FILE *err = open_memstream(&diag, &dlen);
        rank_read_opts o;
        rank_read_opts_default(&o, err);
        rank_read_stats st;
        int fd = open("/dev/zero", O_RDONLY);
        CHECK(fd >= 0);
        CHECK(rank_read_fd(fd, "/dev/zero", &d, &o, &st) == 1);
        close(fd);
        fclose(err);
        CHECK(st.bytes <= 8 << 20);
        CHECK(strcmp(diag, "/dev/zero:1: error: line is longer than 1048576 bytes; stopped "
                           "reading\n") == 0);
        free(diag);
        rank_data_free(&d);
    }

    /* Not files: a directory is refused, a FIFO that nobody writes to is given up on
     * after the wait (and does not hang). */
    {
        char *diag = NULL;
        size_t dlen = 0;
        FILE *err = open_memstream(&diag, &dlen);
        CHECK(rank_open_input(dir, 100, err) == -1);
        CHECK(mkfifo(fifo, 0600) == 0);
        time_t t0 = time(NULL);
        CHECK(rank_open_input(fifo, 200, err) == -1);
        CHECK(time(NULL) - t0 < 5);
        fclose(err);
        char want[1024];
        snprintf(want, sizeof want,
                 "burstc rank: error: '%s' is a directory\n"
                 "burstc rank: error: nothing was written to the FIFO '%s' in 0.2 s\n",
                 dir, fifo);
        CHECK(strcmp(diag, want) == 0);
        free(diag);
        unlink(fifo);
    }

    unlink(path);
    rmdir(dir);
    return check_done("test_read");
}
