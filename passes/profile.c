/*
 * profile.c: reads measured per-layer timings (`burstc plan --profile FILE`).
 *
 * The format is the one of the DeepPool profiles (docs/plan.md):
 *
 *   op{json attributes}[batch][input shape]  avg_ms  [p50 p90 p99]
 *
 * where the input shape may also be a bare integer (`linear{...}[32]4096`).
 * Blank lines, lines starting with `#` and the summary lines `SUM(...)` and
 * `sum:` are skipped; anything else that does not parse is reported as
 * `FILE:LINE: error: ...`. Lines for the same op, attributes and shape at
 * different batch sizes form one table (several lines at one batch are
 * averaged). The cost model interpolates between batch sizes (costmodel.c).
 *
 * `burstc profile` (tools/cmd_profile.c) writes the same shape of line with
 * the op `layer`, keyed by the layer's name rather than its op:
 *
 *   layer{"name":"conv1","op":"conv2d"}[batch][input shape]  fwd_ms bwd_ms [fwd_iqr bwd_iqr]
 *
 * Such a line belongs to one model: plan_ir.c matches it by name and refuses
 * a profile whose layers the model does not have. An input's line (op
 * "input") is the time its data take; the optimizer's update has a line of
 * its own, with the parameters it updated:
 *
 *   optimizer{"op":"sgd","params":421642}[batch][]  update_ms [iqr]
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "readfile.h"

static char *xstrndup(const char *s, size_t n)
{
    char *d = plan_xrealloc(NULL, n + 1, 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* Sorts the top-level members of a JSON object text so that key order does
 * not matter; whitespace outside strings is dropped. */
static char *canon_attrs(const char *s, size_t n)
{
    char *flat = plan_xrealloc(NULL, n + 1, 1);
    size_t m = 0;
    bool instr = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '"' && (i == 0 || s[i - 1] != '\\'))
            instr = !instr;
        if (!instr && isspace((unsigned char)ch))
            continue;
        flat[m++] = ch;
    }
    flat[m] = 0;
    if (m < 2) {
        return flat;
    }
    /* split flat[1..m-2] at depth-0 commas */
    char **mem = NULL;
    int nm = 0, depth = 0;
    size_t start = 1;
    instr = false;
    for (size_t i = 1; i + 1 <= m - 1; i++) {
        char ch = flat[i];
        if (ch == '"' && flat[i - 1] != '\\')
            instr = !instr;
        if (instr)
            continue;
        if (ch == '{' || ch == '[')
            depth++;
        else if (ch == '}' || ch == ']')
            depth--;
        if ((ch == ',' && depth == 0) || i == m - 1) {
            mem = plan_xrealloc(mem, (size_t)(nm + 1), sizeof(char *));
            mem[nm++] = xstrndup(flat + start, i - start);
            start = i + 1;
        }
    }
    if (start < m - 1) {
        mem = plan_xrealloc(mem, (size_t)(nm + 1), sizeof(char *));
        mem[nm++] = xstrndup(flat + start, m - 1 - start);
    }
    for (int i = 1; i < nm; i++)
        for (int j = i; j > 0 && strcmp(mem[j], mem[j - 1]) < 0; j--) {
            char *t = mem[j];
            mem[j] = mem[j - 1];
            mem[j - 1] = t;
        }
    char *out = plan_xrealloc(NULL, m + 2, 1);
    size_t o = 0;
    out[o++] = '{';
    for (int i = 0; i < nm; i++) {
        if (i)
            out[o++] = ',';
        size_t len = strlen(mem[i]);
        memcpy(out + o, mem[i], len);
        o += len;
        free(mem[i]);
    }
    out[o++] = '}';
    out[o] = 0;
    free(mem);
    free(flat);
    return out;
}

static bool perr(FILE *err, const char *path, int line, const char *msg)
{
    if (err)
        fprintf(err, "%s:%d: error: %s\n", path, line, msg);
    return false;
}

static bool parse_int(const char **pp, int64_t *out)
{
    const char *p = *pp;
    if (!isdigit((unsigned char)*p))
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (errno)
        return false;
    *out = v;
    *pp = end;
    return true;
}

static bool attr_int(const char *attrs, const char *key, int64_t *out);

/* The string value of "key" in canonical attributes (no whitespace), unescaped;
 * NULL if absent or not a string. */
static char *attr_string(const char *attrs, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = attrs; (p = strchr(p, '"')) != NULL; p++) {
        if (strncmp(p + 1, key, kl) != 0 || p[1 + kl] != '"' || p[2 + kl] != ':')
            continue;
        const char *v = p + 3 + kl;
        if (*v != '"')
            return NULL;
        char *out = plan_xrealloc(NULL, strlen(v) + 1, 1);
        size_t n = 0;
        for (v++; *v && *v != '"'; v++) {
            if (*v == '\\' && v[1])
                v++;
            out[n++] = *v;
        }
        out[n] = 0;
        if (*v != '"' || n == 0) {
            free(out);
            return NULL;
        }
        return out;
    }
    return NULL;
}

/* Adds one line's time (seconds; fwd: its forward part, or < 0 when the
 * line gives only the total). False, reported, when a `layer` line names a
 * layer an earlier line gave another op or shape. */
static bool add_sample(plan_profile *pr, const char *path, int ln, const char *op, size_t oplen,
                       char *attrs, const int64_t *shape, int nshape, int64_t batch, double sec,
                       double fwd, FILE *err)
{
    char *layer = NULL, *layer_op = NULL;
    if (oplen == 9 && strncmp(op, "optimizer", 9) == 0)
        layer_op = attr_string(attrs, "op"); /* parse_line checked it */
    if (fwd >= 0) {
        layer = attr_string(attrs, "name");
        layer_op = attr_string(attrs, "op");
        if (!layer || !layer_op) {
            free(layer);
            free(layer_op);
            free(attrs);
            return perr(err, path, ln,
                        "a layer line needs the string attributes \"name\" and \"op\"");
        }
    }
    plan_profile_entry *e = NULL;
    for (int i = 0; i < pr->n; i++) {
        plan_profile_entry *x = &pr->e[i];
        if (strlen(x->op) == oplen && strncmp(x->op, op, oplen) == 0 &&
            strcmp(x->attrs, attrs) == 0 && x->nshape == nshape &&
            memcmp(x->shape, shape, sizeof(int64_t) * (size_t)nshape) == 0) {
            e = x;
            break;
        }
    }
    if (!e && layer) {
        const plan_profile_entry *same = plan_profile_find_layer(pr, layer);
        if (same) {
            char msg[256];
            snprintf(msg, sizeof msg,
                     "layer '%.80s' has another op or input shape here than on line %d", layer,
                     same->line);
            free(layer);
            free(layer_op);
            free(attrs);
            return perr(err, path, ln, msg);
        }
    }
    if (!e) {
        if (pr->n == pr->cap) {
            pr->cap = pr->cap ? 2 * pr->cap : 32;
            pr->e = plan_xrealloc(pr->e, (size_t)pr->cap, sizeof(plan_profile_entry));
        }
        e = &pr->e[pr->n++];
        memset(e, 0, sizeof *e);
        e->op = xstrndup(op, oplen);
        e->attrs = attrs;
        e->nshape = nshape;
        memcpy(e->shape, shape, sizeof(int64_t) * (size_t)nshape);
        e->layer = layer;
        e->layer_op = layer_op;
        e->line = ln;
    } else {
        free(attrs);
        free(layer);
        free(layer_op);
    }
    plan_timing *t = &e->timing;
    for (int i = 0; i < t->n; i++)
        if (t->batch[i] == batch) {
            /* several lines at one batch: keep a running mean (count in
			 * the low bits is not kept; the mean of two is enough here) */
            t->seconds[i] = (t->seconds[i] + sec) / 2;
            if (t->fwd)
                t->fwd[i] = (t->fwd[i] + fwd) / 2;
            return true;
        }
    t->batch = plan_xrealloc(t->batch, (size_t)(t->n + 1), sizeof(int64_t));
    t->seconds = plan_xrealloc(t->seconds, (size_t)(t->n + 1), sizeof(double));
    if (e->layer)
        t->fwd = plan_xrealloc(t->fwd, (size_t)(t->n + 1), sizeof(double));
    int i = t->n++;
    while (i > 0 && t->batch[i - 1] > batch) {
        t->batch[i] = t->batch[i - 1];
        t->seconds[i] = t->seconds[i - 1];
        if (t->fwd)
            t->fwd[i] = t->fwd[i - 1];
        i--;
    }
    t->batch[i] = batch;
    t->seconds[i] = sec;
    if (t->fwd)
        t->fwd[i] = fwd;
    return true;
}

static bool parse_line(plan_profile *pr, const char *path, int ln, const char *p, FILE *err)
{
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == 0 || *p == '\n' || *p == '\r' || *p == '#')
        return true;
    if (strncmp(p, "SUM(", 4) == 0 || strncmp(p, "sum:", 4) == 0)
        return true;
    const char *op = p;
    if (!isalpha((unsigned char)*p) && *p != '_')
        return perr(err, path, ln, "expected an op name");
    while (isalnum((unsigned char)*p) || *p == '_')
        p++;
    size_t oplen = (size_t)(p - op);
    if (*p != '{')
        return perr(err, path, ln, "expected '{' after the op name");
    const char *a0 = p;
    int depth = 0;
    bool instr = false;
    for (; *p && *p != '\n'; p++) {
        if (*p == '"' && p[-1] != '\\')
            instr = !instr;
        if (instr)
            continue;
        if (*p == '{' || *p == '[')
            depth++;
        else if (*p == '}' || *p == ']') {
            if (--depth == 0)
                break;
        }
    }
    if (*p != '}')
        return perr(err, path, ln, "unterminated attribute object");
    p++;
    size_t alen = (size_t)(p - a0);
    int64_t batch;
    if (*p != '[')
        return perr(err, path, ln, "expected '[batch]' after the attributes");
    p++;
    if (!parse_int(&p, &batch) || batch < 1 || *p != ']')
        return perr(err, path, ln, "batch size must be a positive integer in brackets");
    p++;
    int64_t shape[8];
    int nshape = 0;
    if (p[0] == '[' && p[1] == ']') {
        p += 2; /* no dimensions besides the batch */
    } else if (*p == '[') {
        p++;
        for (;;) {
            if (nshape == 8)
                return perr(err, path, ln, "input shape has more than 8 dimensions");
            if (!parse_int(&p, &shape[nshape]))
                return perr(err, path, ln, "expected an integer in the input shape");
            nshape++;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ']') {
                p++;
                break;
            }
            return perr(err, path, ln, "expected ',' or ']' in the input shape");
        }
    } else if (isdigit((unsigned char)*p)) {
        parse_int(&p, &shape[0]);
        nshape = 1;
    } else {
        return perr(err, path, ln, "expected the input shape after the batch size");
    }
    if (*p == 0 || *p == '\n' || *p == '\r')
        return perr(err, path, ln, "missing the average time (ms)");
    if (*p != ' ' && *p != '\t')
        return perr(err, path, ln, "expected whitespace before the time");
    double vals[4];
    int nv = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == 0 || *p == '\n')
            break;
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || (*end && !isspace((unsigned char)*end)))
            return perr(err, path, ln, "expected a time in milliseconds");
        if (nv < 4)
            vals[nv] = v;
        nv++;
        p = end;
    }
    bool layer = oplen == 5 && strncmp(op, "layer", 5) == 0;
    if (layer) {
        if (nv < 2)
            return perr(err, path, ln, "a layer line needs the forward and the backward time (ms)");
        if (nv != 2 && nv != 4)
            return perr(err, path, ln,
                        "a layer line has 2 or 4 times (fwd_ms bwd_ms [fwd_iqr bwd_iqr])");
        for (int i = 0; i < nv; i++)
            if (!(vals[i] >= 0) || !isfinite(vals[i]))
                return perr(err, path, ln, "time must be a finite number, not negative");
        return add_sample(pr, path, ln, op, oplen, canon_attrs(a0, alen), shape, nshape, batch,
                          (vals[0] + vals[1]) * 1e-3, vals[0] * 1e-3, err);
    }
    if (oplen == 9 && strncmp(op, "optimizer", 9) == 0) {
        char *attrs = canon_attrs(a0, alen), *name = attr_string(attrs, "op");
        int64_t params = 0;
        bool known = name && (strcmp(name, "sgd") == 0 || strcmp(name, "adam") == 0);
        free(name);
        if (!known || !attr_int(attrs, "params", &params) || params < 1) {
            free(attrs);
            return perr(err, path, ln,
                        "an optimizer line needs the attributes \"op\" (\"sgd\" or \"adam\") "
                        "and \"params\" (a positive integer)");
        }
        if (nv != 1 && nv != 2) {
            free(attrs);
            return perr(err, path, ln, "an optimizer line has 1 or 2 times (update_ms [iqr])");
        }
        if (!(vals[0] >= 0) || !isfinite(vals[0])) {
            free(attrs);
            return perr(err, path, ln, "time must be a finite number, not negative");
        }
        return add_sample(pr, path, ln, op, oplen, attrs, shape, nshape, batch, vals[0] * 1e-3, -1,
                          err);
    }
    if (nv == 0)
        return perr(err, path, ln, "missing the average time (ms)");
    if (nv > 4)
        return perr(err, path, ln, "too many columns (expected avg_ms [p50 p90 p99])");
    if (!(vals[0] >= 0))
        return perr(err, path, ln, "time must not be negative");
    return add_sample(pr, path, ln, op, oplen, canon_attrs(a0, alen), shape, nshape, batch,
                      vals[0] * 1e-3, -1, err);
}

bool plan_profile_parse(plan_profile *pr, const char *path, const char *text, FILE *err)
{
    bool ok = true;
    int ln = 1;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = xstrndup(p, len);
        if (!parse_line(pr, path, ln, line, err))
            ok = false;
        free(line);
        ln++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return ok;
}

bool plan_profile_read(plan_profile *pr, const char *path, FILE *err)
{
    /* The compiler's one file reader (ir/readfile.h): regular files only,
     * at most IR_FILE_MAX bytes, read errors reported. */
    char *buf, why[256];
    size_t n;
    if (!ir_file_read(path, IR_FILE_MAX, &buf, &n, why, sizeof why)) {
        if (err)
            fprintf(err, "%s: error: cannot read the profile: %s\n", path, why);
        return false;
    }
    if (memchr(buf, 0, n)) {
        if (err)
            fprintf(err, "%s: error: a profile is text; this file holds NUL bytes\n", path);
        free(buf);
        return false;
    }
    bool ok = plan_profile_parse(pr, path, buf, err);
    free(buf);
    free(pr->path);
    pr->path = xstrndup(path, strlen(path));
    return ok;
}

void plan_profile_free(plan_profile *pr)
{
    for (int i = 0; i < pr->n; i++) {
        free(pr->e[i].op);
        free(pr->e[i].attrs);
        free(pr->e[i].timing.batch);
        free(pr->e[i].timing.seconds);
        free(pr->e[i].timing.fwd);
        free(pr->e[i].layer);
        free(pr->e[i].layer_op);
    }
    free(pr->e);
    free(pr->path);
    memset(pr, 0, sizeof *pr);
}

const plan_profile_entry *plan_profile_find(const plan_profile *pr, const char *op,
                                            const char *attrs, const int64_t *shape, int nshape)
{
    char *ca = canon_attrs(attrs, strlen(attrs));
    const plan_profile_entry *hit = NULL;
    for (int i = 0; i < pr->n && !hit; i++) {
        const plan_profile_entry *e = &pr->e[i];
        if (strcmp(e->op, op) == 0 && strcmp(e->attrs, ca) == 0 && e->nshape == nshape &&
            memcmp(e->shape, shape, sizeof(int64_t) * (size_t)nshape) == 0)
            hit = e;
    }
    free(ca);
    return hit;
}

const plan_profile_entry *plan_profile_find_layer(const plan_profile *pr, const char *name)
{
    for (int i = 0; i < pr->n; i++)
        if (pr->e[i].layer && strcmp(pr->e[i].layer, name) == 0)
            return &pr->e[i];
    return NULL;
}

bool plan_profile_attr_pair(const plan_profile_entry *e, const char *key, int64_t out[2])
{
    if (plan_profile_attr(e, key, &out[0])) {
        out[1] = out[0];
        return true;
    }
    size_t kl = strlen(key);
    for (const char *p = e->attrs; (p = strchr(p, '"')) != NULL; p++)
        if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '"' && p[2 + kl] == ':' &&
            p[3 + kl] == '[') {
            long long a, b;
            if (sscanf(p + 4 + kl, "%lld,%lld]", &a, &b) != 2)
                return false;
            out[0] = a;
            out[1] = b;
            return true;
        }
    return false;
}

/* The integer (or boolean) attribute `key` of canonical attributes; false if
 * absent, not a number or out of range. */
static bool attr_int(const char *attrs, const char *key, int64_t *out)
{
    size_t kl = strlen(key);
    for (const char *p = attrs; (p = strchr(p, '"')) != NULL; p++) {
        if (strncmp(p + 1, key, kl) == 0 && p[1 + kl] == '"' && p[2 + kl] == ':') {
            const char *v = p + 3 + kl;
            if (strncmp(v, "true", 4) == 0) {
                *out = 1;
                return true;
            }
            if (strncmp(v, "false", 5) == 0) {
                *out = 0;
                return true;
            }
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (end == v || errno)
                return false;
            *out = x;
            return true;
        }
    }
    return false;
}

bool plan_profile_attr(const plan_profile_entry *e, const char *key, int64_t *out)
{
    return attr_int(e->attrs, key, out);
}

void plan_profile_slowest(double *v, int base, int steps, int copies)
{
    for (int t = 0; t < steps; t++) {
        double m = v[base + t];
        for (int c = 1; c < copies; c++) {
            double *x = &v[base + c * steps + t];
            m = *x > m ? *x : m;
            *x = 0;
        }
        v[base + t] = m;
    }
}
