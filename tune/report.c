/*
 * report.c: the background report of a generated program, read back by the
 * exec runner (tools/cmd_tune.c) for the cluster metric.
 *
 * At exit, rank 0 of a program with background copies prints one line per
 * background model (runtime/background.c, rt_bg_finish):
 *
 *   background MODEL: N cop(y|ies), S steps, X samples/s
 *
 * X is the model's samples over the program's whole training loop, summed
 * over its copies; a run's background throughput is the sum over the lines,
 * as `burstc plan` adds its background jobs. "background off" says the copies
 * were switched off. The output also holds the program's other lines (losses,
 * the runtime's messages, mpirun's), of any length and content: a line reads
 * as a report line only when it matches exactly, and one that begins like
 * one but does not is counted as malformed, never trusted.
 */
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The longest report line read: a model name and numbers printed with %.0f
 * (a finite double prints at most 309 digits) fit well below it. */
#define LINE_MAX_READ 4096

static bool starts(const char **s, const char *end, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(end - *s) < n || memcmp(*s, word, n) != 0)
        return false;
    *s += n;
    return true;
}

/* DIGITS ['.' DIGITS]: what %.0f and %.1f print for a finite non-negative
 * value; its value must be finite. */
static bool number(const char **s, const char *end, double *out)
{
    const char *p = *s;
    char buf[LINE_MAX_READ];
    size_t n = 0;
    while (p < end && *p >= '0' && *p <= '9' && n + 1 < sizeof buf)
        buf[n++] = *p++;
    if (n == 0)
        return false;
    if (p < end && *p == '.') {
        buf[n++] = *p++;
        size_t frac = 0;
        while (p < end && *p >= '0' && *p <= '9' && n + 1 < sizeof buf) {
            buf[n++] = *p++;
            frac++;
        }
        if (frac == 0)
            return false;
    }
    if (p < end && *p >= '0' && *p <= '9')
        return false; /* longer than any printed double */
    buf[n] = 0;
    double x = strtod(buf, NULL);
    if (!isfinite(x))
        return false;
    *out = x;
    *s = p;
    return true;
}

/* Whether a line begins like a report line: the word "background". */
static bool report_start(const char *line, size_t len)
{
    const char *s = line;
    return starts(&s, line + len, "background") &&
           (s == line + len || *s == ' ' || *s == '\t' || *s == '\r');
}

bool tune_report_line(const char *line, size_t len, tune_program_report *r)
{
    if (!report_start(line, len))
        return false;
    const char *s = line + strlen("background"), *end = line + len;
    while (end > s && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    if (starts(&s, end, " off") && s == end) {
        r->bg_off = true;
        return true;
    }
    s = line + strlen("background");
    double copies = 0, steps, rate;
    const char *name = s + 1;
    bool ok = starts(&s, end, " ");
    /* MODEL ':' -- a name without spaces or colons */
    while (ok && s < end && *s != ':' && *s != ' ' && *s != '\t')
        s++;
    ok = ok && s > name && starts(&s, end, ": ") && number(&s, end, &copies) && copies >= 1 &&
         copies == floor(copies) && starts(&s, end, " cop") &&
         starts(&s, end, copies == 1 ? "y" : "ies") && starts(&s, end, ", ") &&
         number(&s, end, &steps) && starts(&s, end, " steps, ") && number(&s, end, &rate) &&
         starts(&s, end, " samples/s") && s == end && isfinite(r->bg_samples_per_s + rate);
    if (!ok) {
        r->malformed++;
        return true;
    }
    r->nbg++;
    r->bg_samples_per_s += rate;
    return true;
}

/* A line that does not fit the buffer, or holds a NUL, is not one the
 * runtime prints: if it begins like a report line it is malformed. */
static void judge(const char *buf, size_t n, bool whole, tune_program_report *r)
{
    if (whole)
        tune_report_line(buf, n, r);
    else if (report_start(buf, n))
        r->malformed++;
}

bool tune_read_report(FILE *f, tune_program_report *r)
{
    memset(r, 0, sizeof *r);
    char buf[LINE_MAX_READ];
    size_t n = 0;
    bool whole = true, any = false;
    int ch;
    while ((ch = getc(f)) != EOF) {
        if (ch == '\n') {
            judge(buf, n, whole, r);
            n = 0;
            whole = true;
            any = false;
            continue;
        }
        any = true;
        if (ch == 0)
            whole = false;
        if (n < sizeof buf)
            buf[n++] = (char)ch;
        else
            whole = false;
    }
    if (any)
        judge(buf, n, whole, r); /* the last line, without its newline */
    return !ferror(f);
}
