/*
 * diag.c: how burstc speaks about mistakes.
 *
 * Every user error is `file:line:col: error: message`, then the source line
 * and a caret under the column, as compilers people know do it. Errors are
 * counted, not fatal: the front end, the IR reader and the verifier keep going
 * and report everything they find. Internal errors (bugs in burstc) go
 * through ice() and exit with status 2.
 */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void diag_init(diag_ctx *d, FILE *out)
{
    d->out = out;
    d->nerrors = 0;
    d->max_errors = 100;
}

/* Prints the source line of loc (tabs kept so the caret lines up) and a caret. */
static void show_line(FILE *out, src_loc loc)
{
    if (!loc.file || !loc.file->text || loc.line < 1)
        return;
    const char *p = loc.file->text, *end = p + loc.file->len;
    for (int l = 1; l < loc.line && p < end; p++)
        if (*p == '\n')
            l++;
    if (p >= end && loc.line > 1)
        return;
    const char *e = p;
    while (e < end && *e != '\n')
        e++;
    if (e - p > 200)
        return; /* minified or binary input: the caret would not help */
    fputs("  ", out);
    for (const char *q = p; q < e; q++) {
        unsigned char c = (unsigned char)*q;
        fputc(c == '\t' || (c >= 32 && c < 127) || c >= 128 ? (int)c : '?', out);
    }
    fputs("\n  ", out);
    for (int c = 1; c < loc.col && p + c - 1 < e; c++)
        fputc(p[c - 1] == '\t' ? '\t' : ' ', out);
    fputs("^\n", out);
}

static void report(diag_ctx *d, const char *kind, src_loc loc, const char *fmt, va_list ap)
{
    if (loc.file)
        fprintf(d->out, "%s:%d:%d: %s: ", loc.file->path, loc.line, loc.col, kind);
    else
        fprintf(d->out, "burstc: %s: ", kind);
    vfprintf(d->out, fmt, ap);
    fputc('\n', d->out);
    show_line(d->out, loc);
}

void diag_verror(diag_ctx *d, src_loc loc, const char *fmt, va_list ap)
{
    d->nerrors++;
    if (d->max_errors && d->nerrors > d->max_errors) {
        if (d->nerrors == d->max_errors + 1)
            fprintf(d->out, "burstc: error: too many errors, stopping\n");
        return;
    }
    report(d, "error", loc, fmt, ap);
}

void diag_error(diag_ctx *d, src_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_verror(d, loc, fmt, ap);
    va_end(ap);
}

void diag_note(diag_ctx *d, src_loc loc, const char *fmt, ...)
{
    if (d->max_errors && d->nerrors > d->max_errors)
        return;
    va_list ap;
    va_start(ap, fmt);
    report(d, "note", loc, fmt, ap);
    va_end(ap);
}

void diag_warning(diag_ctx *d, src_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(d, "warning", loc, fmt, ap);
    va_end(ap);
}

void diag_summary(const diag_ctx *d)
{
    if (d->nerrors > 0)
        fprintf(d->out, "%d error%s generated.\n", d->nerrors, d->nerrors == 1 ? "" : "s");
}

src_file *src_file_from_string(arena *a, const char *path, const char *text, size_t len)
{
    src_file *f = arena_alloc(a, sizeof *f);
    f->path = arena_strdup(a, path);
    f->text = arena_strndup(a, text, len);
    f->len = len;
    return f;
}

src_file *src_file_read(arena *a, const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(fp);
        errno = ENOMEM;
        return NULL;
    }
    size_t n;
    while ((n = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += n;
        if (len == cap) {
            if (cap > ((size_t)1 << 30)) {
                free(buf);
                fclose(fp);
                errno = EFBIG;
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(fp);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    src_file *f = src_file_from_string(a, path, buf, len);
    free(buf);
    return f;
}

_Noreturn void ice_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: internal compiler error: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nplease report this as a burstc bug, with the input that caused it\n", stderr);
    exit(2);
}
