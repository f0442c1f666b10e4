/*
 * diag.c: how burstc speaks about mistakes.
 *
 * Every user error is `file:line:col: error: message`, then the source line
 * and a caret under the column, as compilers people know do it. Errors are
 * counted, not fatal: the front end, the IR reader and the verifier keep going
 * and report everything they find. Internal errors (bugs in burstc)
 * go through ice() (ice.c) and exit with status 2.
 */
#include "ir.h"
#include "readfile.h"

#include <stdlib.h>
#include <string.h>

void diag_init(diag_ctx *d, FILE *out)
{
    d->out = out;
    d->nerrors = 0;
    d->max_errors = 100;
}

#define SRC_MARK_EVERY 64 /* lines between two entries of a file's line index */

/* The index of every SRC_MARK_EVERY-th line start: small (a word per 64
 * lines), built once per file, and enough to find any line by scanning at
 * most 63 newlines from the closest mark. */
static void build_marks(src_file *f)
{
    size_t lines = 1;
    for (const char *p = f->text, *end = f->text + f->len; (p = memchr(p, '\n', (size_t)(end - p)));
         p++)
        lines++;
    f->nmarks = (lines + SRC_MARK_EVERY - 1) / SRC_MARK_EVERY;
    f->marks = arena_alloc(f->arena, sizeof *f->marks * f->nmarks);
    size_t line = 0, k = 0;
    for (size_t off = 0;;) {
        if (line % SRC_MARK_EVERY == 0)
            f->marks[k++] = off;
        const char *nl = memchr(f->text + off, '\n', f->len - off);
        if (!nl)
            break;
        off = (size_t)(nl - f->text) + 1;
        line++;
    }
}

const char *src_line(const src_file *cf, int line, size_t *len)
{
    if (!cf || !cf->text || line < 1)
        return NULL;
    src_file *f = (src_file *)cf; /* the index is a cache; the text stays as it was */
    if (!f->marks) {
        if (!f->arena)
            return NULL;
        build_marks(f);
    }
    size_t k = (size_t)(line - 1) / SRC_MARK_EVERY;
    if (k >= f->nmarks)
        return NULL;
    const char *p = f->text + f->marks[k], *end = f->text + f->len;
    for (int l = (int)(k * SRC_MARK_EVERY) + 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            return NULL;
        p = nl + 1;
    }
    const char *e = memchr(p, '\n', (size_t)(end - p));
    *len = (size_t)((e ? e : end) - p);
    return p;
}

/* Prints the source line of loc (tabs kept so the caret lines up) and a caret. */
static void show_line(FILE *out, src_loc loc)
{
    size_t n;
    const char *p = src_line(loc.file, loc.line, &n);
    if (!p || (n == 0 && loc.line > 1 && p == loc.file->text + loc.file->len))
        return;
    if (n > 200)
        return; /* minified or binary input: the caret would not help */
    const char *e = p + n;
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
    if (!d->out)
        return; /* a diag that only counts */
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
        if (d->nerrors == d->max_errors + 1 && d->out)
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
    f->arena = a;
    f->path = arena_strdup(a, path);
    f->text = arena_strndup(a, text, len);
    f->len = len;
    return f;
}

src_file *src_file_read(arena *a, const char *path, const char **why)
{
    char *data, msg[256];
    size_t len;
    if (!ir_file_read(path, IR_FILE_MAX, &data, &len, msg, sizeof msg)) {
        *why = arena_strdup(a, msg);
        return NULL;
    }
    src_file *f = src_file_from_string(a, path, data, len);
    free(data);
    return f;
}
