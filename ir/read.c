/*
 * read.c: reading the IR's text form (docs/ir.md) back into a module.
 *
 * This is how a dump becomes an input again (`burstc x.ir`) and how every
 * pass can be tested as IR text in, IR text out. The reader is hand-written:
 * a small lexer over the whole file and a recursive-descent parser that builds
 * the module through build.c, so read IR gets exactly the checks the front
 * end's IR gets, and the declared type of every op is compared with the
 * inferred one. On a malformed line it reports and skips to the next line, so
 * one run shows every problem in the file.
 */
#include "ir.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum tok_kind { T_EOF, T_IDENT, T_VALUE, T_INT, T_REAL, T_STRING, T_PUNCT, T_BAD } tok_kind;

typedef struct token {
    tok_kind kind;
    const char *start;
    int len;
    src_loc loc;
    int64_t ival;
    double rval;
    char punct;
} token;

typedef struct reader {
    arena *a;
    const src_file *f;
    diag_ctx *d;
    const char *p, *end;
    int line, col;
    token tok;
    ir_module *m;
    int64_t nranks;     /* rank-set entries read so far, against RANKS_MAX */
    bool line_error;    /* an error was reported for the current statement */
    src_loc last_error; /* where the last error was: one message per place */
} reader;

static bool is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(int c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

static void advance_char(reader *r)
{
    if (*r->p == '\n') {
        r->line++;
        r->col = 1;
    } else {
        r->col++;
    }
    r->p++;
}

static void next(reader *r)
{
    for (;;) {
        while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r' || *r->p == '\n'))
            advance_char(r);
        if (r->p < r->end && *r->p == ';') {
            while (r->p < r->end && *r->p != '\n')
                advance_char(r);
            continue;
        }
        break;
    }
    token *t = &r->tok;
    memset(t, 0, sizeof *t);
    t->loc = (src_loc){r->f, r->line, r->col};
    t->start = r->p;
    if (r->p >= r->end) {
        t->kind = T_EOF;
        return;
    }
    int c = (unsigned char)*r->p;
    if (is_ident_start(c) || c == '%') {
        t->kind = c == '%' ? T_VALUE : T_IDENT;
        if (c == '%') {
            advance_char(r);
            t->start = r->p;
        }
        while (r->p < r->end && is_ident_char((unsigned char)*r->p))
            advance_char(r);
        t->len = (int)(r->p - t->start);
        if (t->kind == T_VALUE && t->len == 0)
            t->kind = T_BAD;
        return;
    }
    if ((c >= '0' && c <= '9') ||
        ((c == '-' || c == '+') && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9')) {
        const char *s = r->p;
        advance_char(r);
        bool real = false;
        while (r->p < r->end) {
            int ch = (unsigned char)*r->p;
            if (ch >= '0' && ch <= '9') {
                advance_char(r);
            } else if (ch == '.' && !(r->p + 1 < r->end && r->p[1] == '.')) {
                real = true;
                advance_char(r);
            } else if ((ch == 'e' || ch == 'E')) {
                real = true;
                advance_char(r);
                if (r->p < r->end && (*r->p == '-' || *r->p == '+'))
                    advance_char(r);
            } else {
                break;
            }
        }
        t->len = (int)(r->p - s);
        char buf[64];
        if (t->len >= (int)sizeof buf) {
            t->kind = T_BAD;
            return;
        }
        memcpy(buf, s, (size_t)t->len);
        buf[t->len] = 0;
        char *endp;
        errno = 0;
        if (real) {
            t->rval = strtod(buf, &endp);
            t->kind = *endp || errno == ERANGE || !isfinite(t->rval) ? T_BAD : T_REAL;
        } else {
            t->ival = strtoll(buf, &endp, 10);
            t->kind = *endp || errno == ERANGE ? T_BAD : T_INT;
        }
        return;
    }
    if (c == '"') {
        advance_char(r);
        t->start = r->p;
        while (r->p < r->end && *r->p != '"' && *r->p != '\n') {
            if (*r->p == '\\' && r->p + 1 < r->end)
                advance_char(r);
            advance_char(r);
        }
        t->len = (int)(r->p - t->start);
        if (r->p < r->end && *r->p == '"') {
            advance_char(r);
            t->kind = T_STRING;
        } else {
            t->kind = T_BAD;
        }
        return;
    }
    if (r->p + 1 < r->end && c == '.' && r->p[1] == '.') {
        advance_char(r);
        advance_char(r);
        t->kind = T_PUNCT;
        t->punct = '.'; /* '.' stands for the range operator '..' */
        t->len = 2;
        return;
    }
    if (strchr("{}[](),=:@", c)) {
        advance_char(r);
        t->kind = T_PUNCT;
        t->punct = (char)c;
        t->len = 1;
        return;
    }
    advance_char(r);
    t->kind = T_BAD;
    t->len = 1;
}

#define RANGE_OP '.'

static const char *describe(const token *t, char *buf, size_t n)
{
    switch (t->kind) {
    case T_EOF: return "end of file";
    case T_BAD:
        if (t->len == 1 && ((unsigned char)*t->start < 32 || (unsigned char)*t->start >= 127))
            snprintf(buf, n, "byte 0x%02x", (unsigned char)*t->start);
        else
            snprintf(buf, n, "'%.*s'", t->len > 40 ? 40 : t->len, t->start);
        return buf;
    case T_VALUE: snprintf(buf, n, "'%%%.*s'", t->len > 40 ? 40 : t->len, t->start); return buf;
    case T_PUNCT:
        if (t->punct == RANGE_OP)
            return "'..'";
        snprintf(buf, n, "'%c'", t->punct);
        return buf;
    default: snprintf(buf, n, "'%.*s'", t->len > 40 ? 40 : t->len, t->start); return buf;
    }
}

static void err_at(reader *r, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err_at(reader *r, src_loc loc, const char *fmt, ...)
{
    if (r->line_error || (loc.line == r->last_error.line && loc.col == r->last_error.col))
        return; /* one error per statement and per place: the rest would be noise */
    r->line_error = true;
    r->last_error = loc;
    va_list ap;
    va_start(ap, fmt);
    diag_verror(r->d, loc, fmt, ap);
    va_end(ap);
}

static void expected(reader *r, const char *what)
{
    char buf[64];
    if (r->tok.kind == T_BAD && r->tok.start < r->end &&
        (*r->tok.start == '-' || (*r->tok.start >= '0' && *r->tok.start <= '9')))
        err_at(r, r->tok.loc, "number out of range or malformed: %s",
               describe(&r->tok, buf, sizeof buf));
    else
        err_at(r, r->tok.loc, "expected %s, got %s", what, describe(&r->tok, buf, sizeof buf));
}

static bool is_punct(reader *r, char c)
{
    return r->tok.kind == T_PUNCT && r->tok.punct == c;
}

static bool eat(reader *r, char c)
{
    if (is_punct(r, c)) {
        next(r);
        return true;
    }
    return false;
}

static bool expect(reader *r, char c)
{
    if (eat(r, c))
        return true;
    char what[8];
    snprintf(what, sizeof what, "'%c'", c);
    expected(r, what);
    return false;
}

static bool is_word(reader *r, const char *w)
{
    return r->tok.kind == T_IDENT && (int)strlen(w) == r->tok.len &&
           memcmp(r->tok.start, w, (size_t)r->tok.len) == 0;
}

static char *tok_str(reader *r)
{
    return arena_strndup(r->a, r->tok.start, (size_t)r->tok.len);
}

/* Skips the rest of a malformed statement: to the next line for ops, past the
 * closing brace for one-line records. */
static void skip_line(reader *r, int line)
{
    while (r->tok.kind != T_EOF && r->tok.loc.line == line && !is_punct(r, '}'))
        next(r);
}

/* type := ELEM '[' dim (',' dim)* ']'    dim := 'N' | INT */
static bool parse_type(reader *r, ir_type *t)
{
    memset(t, 0, sizeof *t);
    if (is_word(r, "f32"))
        t->elem = EL_F32;
    else if (is_word(r, "i32"))
        t->elem = EL_I32;
    else {
        expected(r, "a type (f32[...] or i32[...])");
        return false;
    }
    next(r);
    if (!expect(r, '['))
        return false;
    do {
        if (t->rank == IR_MAX_RANK) {
            err_at(r, r->tok.loc, "too many dimensions (at most %d)", IR_MAX_RANK);
            return false;
        }
        if (t->rank == 0) {
            if (!is_word(r, "N")) {
                expected(r, "'N' (the batch dimension comes first)");
                return false;
            }
            t->dim[t->rank++] = IR_BATCH;
        } else {
            if (r->tok.kind != T_INT || r->tok.ival <= 0 || r->tok.ival > IR_MAX_DIM) {
                expected(r, "a dimension from 1 to 2^40");
                return false;
            }
            t->dim[t->rank++] = r->tok.ival;
        }
        next(r);
    } while (eat(r, ','));
    return expect(r, ']');
}

static int find_value(reader *r, ir_graph *g)
{
    char *name = tok_str(r);
    int id = ir_op_find(g, name);
    if (id < 0)
        err_at(r, r->tok.loc, "undefined value '%%%s'", name);
    return id;
}

/* attr := IDENT '=' (INT | REAL | '[' INT (',' INT)* ']' | '%'NAME | 'none') */
static bool parse_attr(reader *r, ir_graph *g, ir_attr *a)
{
    memset(a, 0, sizeof *a);
    if (r->tok.kind != T_IDENT) {
        expected(r, "an attribute name");
        return false;
    }
    a->key = tok_str(r);
    next(r);
    if (!expect(r, '='))
        return false;
    if (r->tok.kind == T_INT) {
        a->kind = AK_INT;
        a->u.i = r->tok.ival;
    } else if (r->tok.kind == T_REAL) {
        a->kind = AK_REAL;
        a->u.real = r->tok.rval;
    } else if (r->tok.kind == T_VALUE) {
        a->kind = AK_REF;
        a->u.ref = ir_op_find(g, tok_str(r));
        if (a->u.ref < 0) {
            err_at(r, r->tok.loc,
                   "attribute '%s' names '%%%s', which is not defined before it (an attribute "
                   "names an earlier op)",
                   a->key, tok_str(r));
            return false;
        }
    } else if (is_word(r, "none")) {
        a->kind = AK_REF;
        a->u.ref = -1;
    } else if (eat(r, '[')) {
        a->kind = AK_LIST;
        int cap = 0;
        do {
            if (r->tok.kind != T_INT) {
                expected(r, "an integer");
                return false;
            }
            arena_grow(r->a, (void **)&a->u.list.v, &cap, a->u.list.n + 1, sizeof(int64_t));
            a->u.list.v[a->u.list.n++] = r->tok.ival;
            next(r);
        } while (eat(r, ','));
        return expect(r, ']');
    } else {
        expected(r, "an attribute value");
        return false;
    }
    next(r);
    return true;
}

/* All rank sets of a file together hold at most this many ranks: a range
 * `0..999999` on every line of a large graph must not exhaust memory. */
#define RANKS_MAX ((int64_t)1 << 26)

/* ranks := '@' '[' range (',' range)* ']'    range := INT ['..' INT] */
static bool parse_ranks(reader *r, ir_plan *p)
{
    int cap = 0;
    if (!expect(r, '['))
        return false;
    do {
        if (r->tok.kind != T_INT || r->tok.ival < 0 || r->tok.ival >= IR_MAX_GPUS) {
            expected(r, "a rank");
            return false;
        }
        int64_t lo = r->tok.ival, hi = lo;
        src_loc at = r->tok.loc;
        next(r);
        if (eat(r, RANGE_OP)) {
            if (r->tok.kind != T_INT || r->tok.ival < lo || r->tok.ival >= IR_MAX_GPUS) {
                expected(r, "the last rank of the range");
                return false;
            }
            hi = r->tok.ival;
            next(r);
        }
        if (p->nranks && lo <= p->ranks[p->nranks - 1]) {
            err_at(r, at, "ranks must be listed in ascending order without repeats");
            return false;
        }
        r->nranks += hi - lo + 1;
        if (r->nranks > RANKS_MAX) {
            err_at(r, at, "the rank sets of this file list more than 2^26 ranks in all");
            return false;
        }
        for (int64_t k = lo; k <= hi; k++) {
            arena_grow(r->a, (void **)&p->ranks, &cap, p->nranks + 1, sizeof(int));
            p->ranks[p->nranks++] = (int)k;
        }
    } while (eat(r, ','));
    return expect(r, ']');
}

/* op := '%'NAME '=' OPNAME [operands] ['{' attrs '}'] ':' type ['@' ranks] */
static void parse_op(reader *r, ir_graph *g)
{
    int line = r->tok.loc.line;
    src_loc loc = r->tok.loc;
    r->line_error = false;
    if (r->tok.kind != T_VALUE) {
        expected(r, "an op ('%name = ...') or '}'");
        skip_line(r, line);
        if (r->tok.loc.line == line && !is_punct(r, '}'))
            next(r);
        return;
    }
    char *name = tok_str(r);
    next(r);
    if (!expect(r, '=')) {
        skip_line(r, line);
        return;
    }
    src_loc oploc = r->tok.loc;
    if (r->tok.kind != T_IDENT) {
        expected(r, "an op name");
        skip_line(r, line);
        return;
    }
    char *opname = tok_str(r);
    ir_opcode opc = ir_op_lookup(opname);
    if (opc == OP_COUNT) {
        err_at(r, oploc, "unknown op '%s'", opname);
        skip_line(r, line);
        return;
    }
    next(r);
    int *inputs = NULL, nin = 0, incap = 0;
    if (r->tok.kind == T_VALUE) {
        do {
            if (r->tok.kind != T_VALUE) {
                expected(r, "an operand ('%name')");
                skip_line(r, line);
                return;
            }
            int id = find_value(r, g);
            if (id < 0) {
                skip_line(r, line);
                return;
            }
            arena_grow(r->a, (void **)&inputs, &incap, nin + 1, sizeof *inputs);
            inputs[nin++] = id;
            next(r);
        } while (eat(r, ','));
    }
    ir_attr attrs[16];
    int nattrs = 0;
    if (eat(r, '{')) {
        if (!is_punct(r, '}')) {
            do {
                if (nattrs == 16) {
                    err_at(r, r->tok.loc, "too many attributes");
                    skip_line(r, line);
                    return;
                }
                if (!parse_attr(r, g, &attrs[nattrs++])) {
                    skip_line(r, line);
                    return;
                }
            } while (eat(r, ','));
        }
        if (!expect(r, '}')) {
            skip_line(r, line);
            return;
        }
    }
    ir_type declared;
    if (!expect(r, ':') || !parse_type(r, &declared)) {
        skip_line(r, line);
        return;
    }
    ir_plan plan = {0};
    if (eat(r, '@') && !parse_ranks(r, &plan)) {
        skip_line(r, line);
        return;
    }
    if (r->tok.loc.line == line && r->tok.kind != T_EOF && !is_punct(r, '}')) {
        expected(r, "the end of the line");
        skip_line(r, line);
        return;
    }
    if (ir_op_find(g, name) >= 0) {
        err_at(r, loc, "redefinition of '%%%s'", name);
        return;
    }
    int id = ir_op_add(r->m, g, opc, name, inputs, nin, attrs, nattrs, loc);
    ir_op *op = &g->ops[id];
    op->plan = plan;
    if (opc == OP_INPUT)
        op->type = declared;
    int before = r->d->nerrors;
    if (!ir_op_check(r->m, g, id, r->d)) {
        if (r->d->nerrors == before)
            err_at(r, loc, "invalid op '%%%s'", name);
        r->line_error = true;
        op->type = declared; /* keep going with what the text says */
        return;
    }
    if (!ir_type_equal(&declared, &op->type)) {
        char a[128], b[128];
        ir_type_to_str(&declared, a, sizeof a);
        ir_type_to_str(&op->type, b, sizeof b);
        err_at(r, loc, "type mismatch: '%%%s' is declared %s, but %s gives %s", name, a, opname, b);
    }
}

/* The current string token, with the printer's escapes undone. */
static char *unescape(reader *r)
{
    char *out = arena_alloc(r->a, (size_t)r->tok.len + 1);
    int n = 0;
    for (int i = 0; i < r->tok.len; i++) {
        if (r->tok.start[i] == '\\' && i + 1 < r->tok.len)
            i++;
        out[n++] = r->tok.start[i];
    }
    return out;
}

/* A string token (what names one), unescaped into *out, and the token after it;
 * false, having skipped the line, when there is none. */
static bool line_string(reader *r, int line, const char *what, char **out, src_loc *loc)
{
    *loc = r->tok.loc;
    if (r->tok.kind != T_STRING) {
        expected(r, what);
        skip_line(r, line);
        return false;
    }
    *out = unescape(r);
    next(r);
    return true;
}

/* weight := 'weight' STRING '=' STRING   (the weights table: ir/weights.c) */
static void parse_weight(reader *r, ir_graph *g)
{
    int line = r->tok.loc.line;
    r->line_error = false;
    next(r);
    char *source, *target;
    src_loc loc, target_loc;
    if (!line_string(r, line, "a tensor name (a string)", &source, &loc))
        return;
    if (!expect(r, '='))
        skip_line(r, line);
    else if (line_string(r, line, "a target ('layer.param', a string)", &target, &target_loc))
        ir_weight_add(r->m, g, source, target, loc, target_loc);
}

static void parse_graph(reader *r)
{
    src_loc loc = r->tok.loc;
    next(r);
    if (r->tok.kind != T_IDENT) {
        expected(r, "a graph name");
        return;
    }
    char *name = tok_str(r);
    if (ir_graph_find(r->m, name) >= 0)
        err_at(r, r->tok.loc, "redefinition of graph '%s'", name);
    ir_graph *g = ir_graph_add(r->m, name, loc);
    next(r);
    if (!expect(r, '{'))
        return;
    while (r->tok.kind != T_EOF && !is_punct(r, '}')) {
        if (is_word(r, "weight"))
            parse_weight(r, g);
        else
            parse_op(r, g);
    }
    r->line_error = false;
    ir_weights_check(g, r->d);
    if (r->tok.kind == T_EOF)
        err_at(r, r->tok.loc, "unexpected end of file: graph '%s' is not closed with '}'", name);
    else
        next(r);
}

/* A field of a gpu, cluster or job record: NAME '=' value. */
typedef struct field {
    char *key;
    src_loc loc;
    token val;
    char *str; /* identifier or string value */
    int nbg, bg_cap;
    struct bg_entry { /* background list: name @ batch */
        char *name;
        int64_t batch;
        src_loc name_loc, batch_loc;
    } * bg;
} field;

/* The current string token, unescaped, into f->str; advances. */
static bool parse_field_string(reader *r, field *f)
{
    memset(f, 0, sizeof *f);
    /* The printer escapes '"' and '\\' with a backslash. */
    f->str = unescape(r);
    next(r);
    return true;
}

static bool parse_field(reader *r, field *f)
{
    memset(f, 0, sizeof *f);
    if (r->tok.kind != T_IDENT) {
        expected(r, "a field name");
        return false;
    }
    f->key = tok_str(r);
    f->loc = r->tok.loc;
    next(r);
    if (!expect(r, '='))
        return false;
    f->val = r->tok;
    if (r->tok.kind == T_STRING) {
        f->str = unescape(r);
    } else if (r->tok.kind == T_IDENT) {
        f->str = tok_str(r);
    } else if (eat(r, '[')) {
        f->val.kind = T_PUNCT;
        while (r->tok.kind == T_IDENT) {
            arena_grow(r->a, (void **)&f->bg, &f->bg_cap, f->nbg + 1, sizeof *f->bg);
            struct bg_entry *e = &f->bg[f->nbg++];
            e->name_loc = r->tok.loc;
            e->name = tok_str(r);
            next(r);
            if (!expect(r, '@'))
                return false;
            if (r->tok.kind != T_INT) {
                expected(r, "a batch size");
                return false;
            }
            e->batch_loc = r->tok.loc;
            e->batch = r->tok.ival;
            next(r);
            if (!eat(r, ','))
                break;
        }
        return expect(r, ']');
    } else if (r->tok.kind != T_INT && r->tok.kind != T_REAL) {
        expected(r, "a value");
        return false;
    }
    next(r);
    return true;
}

static bool num(reader *r, const field *f, double *out, bool positive)
{
    if (f->val.kind != T_INT && f->val.kind != T_REAL) {
        err_at(r, f->val.loc, "'%s' must be a number", f->key);
        return false;
    }
    *out = f->val.kind == T_INT ? (double)f->val.ival : f->val.rval;
    if (*out < 0 || (positive && *out == 0)) {
        err_at(r, f->val.loc, "'%s' must be %s", f->key, positive ? "positive" : "non-negative");
        return false;
    }
    return true;
}

static bool integer(reader *r, const field *f, int64_t *out, int64_t max)
{
    if (f->val.kind != T_INT || f->val.ival <= 0 || f->val.ival > max) {
        err_at(r, f->val.loc, "'%s' must be an integer from 1 to %lld", f->key, (long long)max);
        return false;
    }
    *out = f->val.ival;
    return true;
}

/* Parses '{' field (',' field)* '}' and hands each field to apply(). */
static void parse_record(reader *r, const char *what, void *obj,
                         bool (*apply)(reader *, void *, const field *), uint64_t *seen_mask,
                         const char *const *keys)
{
    if (!expect(r, '{'))
        return;
    if (!is_punct(r, '}')) {
        do {
            field f;
            if (!parse_field(r, &f))
                goto skip;
            int k = 0;
            while (keys[k] && strcmp(keys[k], f.key) != 0)
                k++;
            if (!keys[k]) {
                err_at(r, f.loc, "unknown field '%s' in %s", f.key, what);
                continue;
            }
            if (*seen_mask & (1ull << k))
                err_at(r, f.loc, "field '%s' given twice", f.key);
            *seen_mask |= 1ull << k;
            r->line_error = false; /* one error per field, not per record */
            apply(r, obj, &f);
        } while (eat(r, ','));
    }
    if (expect(r, '}'))
        return;
skip:
    while (r->tok.kind != T_EOF && !is_punct(r, '}'))
        next(r);
    eat(r, '}');
}

static const char *const gpu_keys[] = {"flops.f32",        "flops.tf32",
                                       "flops.f16",        "flops.bf16",
                                       "bandwidth",        "memory",
                                       "launch",           "efficiency",
                                       "half_work",        "efficiency.conv",
                                       "half_work.conv",   "bandwidth.conv",
                                       "efficiency.gemm",  "half_work.gemm",
                                       "bandwidth.gemm",   "efficiency.pool",
                                       "half_work.pool",   "bandwidth.pool",
                                       "efficiency.other", "half_work.other",
                                       "bandwidth.other",  NULL};

static bool apply_gpu(reader *r, void *obj, const field *f)
{
    ir_gpu *g = obj;
    double v;
    if (strncmp(f->key, "flops.", 6) == 0) {
        ir_dtype dt;
        if (!ir_dtype_lookup(f->key + 6, &dt) || !num(r, f, &v, false))
            return false;
        g->flops[dt] = v;
        return true;
    }
    /* One class's curve: efficiency.conv, half_work.pool, bandwidth.other. */
    const char *dot = strchr(f->key, '.');
    ir_kclass kc = KC_COUNT;
    if (dot && !ir_kclass_lookup(dot + 1, &kc))
        return false;
    size_t klen = dot ? (size_t)(dot - f->key) : strlen(f->key);
    bool launch = strcmp(f->key, "launch") == 0, half = strncmp(f->key, "half_work", klen) == 0;
    if (!num(r, f, &v, !launch && !half))
        return false;
    if (strncmp(f->key, "efficiency", klen) == 0 && v > 1) {
        err_at(r, f->val.loc, "'%s' is a fraction of the peak, at most 1", f->key);
        return false;
    }
    if (dot) {
        ir_curve *cv = &g->cls[kc];
        *(half ? &cv->half_work : f->key[0] == 'e' ? &cv->efficiency : &cv->bandwidth) = v;
        return true;
    }
    if (strcmp(f->key, "efficiency") == 0) {
        g->efficiency = v;
    } else if (half)
        g->half_work = v;
    else if (strcmp(f->key, "bandwidth") == 0)
        g->mem_bandwidth = v;
    else if (strcmp(f->key, "memory") == 0)
        g->mem_bytes = v;
    else
        g->launch = v;
    return true;
}

static const char *const cluster_keys[] = {"gpu",           "nodes",
                                           "gpus_per_node", "intra.bandwidth",
                                           "intra.latency", "inter.bandwidth",
                                           "inter.latency", "cores",
                                           "slice",         NULL};

static bool apply_cluster(reader *r, void *obj, const field *f)
{
    ir_cluster *c = obj;
    double v;
    int64_t n;
    if (strcmp(f->key, "gpu") == 0) {
        c->gpu = f->str ? ir_gpu_find(r->m, f->str) : -1;
        if (c->gpu < 0)
            err_at(r, f->val.loc, "unknown gpu '%.*s'", f->val.len, f->val.start);
        return c->gpu >= 0;
    }
    if (strcmp(f->key, "nodes") == 0 || strcmp(f->key, "gpus_per_node") == 0) {
        if (!integer(r, f, &n, IR_MAX_GPUS))
            return false;
        *(f->key[0] == 'n' ? &c->nodes : &c->gpus_per_node) = (int)n;
        return true;
    }
    if (strcmp(f->key, "cores") == 0) {
        if (!integer(r, f, &n, IR_MAX_GPUS))
            return false;
        c->cores = (int)n;
        return true;
    }
    if (strcmp(f->key, "slice") == 0) {
        if (!num(r, f, &v, false))
            return false;
        c->slice = v;
        c->has_slice = true;
        return true;
    }
    /* A one-node cluster has no network (inter.bandwidth = 0), a node of one
     * gpu no link inside (intra.bandwidth = 0): parse_item checks the rest. */
    bool lat = strstr(f->key, "latency") != NULL, intra = strncmp(f->key, "intra", 5) == 0;
    if (!num(r, f, &v, false))
        return false;
    ir_link *l = intra ? &c->intra : &c->inter;
    *(lat ? &l->latency : &l->bandwidth) = v;
    return true;
}

/* The keys of ir_job_fields, for parse_record(). */
static const char *const *job_keys(void)
{
    static const char *keys[IR_JOB_NFIELDS + 1];
    for (int k = 0; k < IR_JOB_NFIELDS; k++)
        keys[k] = ir_job_fields[k].key;
    return keys;
}

/* A job's field through the job table (job.c): its conversions, rules and
 * messages are the front end's. */
static bool apply_job(reader *r, void *obj, const field *f)
{
    ir_job *j = obj;
    int k = ir_job_field_find(f->key);
    char msg[256];
    bool ok;
    if (ir_job_fields[k].kind == JK_BACKGROUND && f->val.kind == T_PUNCT) {
        j->background = arena_alloc(r->a, sizeof *j->background * (size_t)(f->nbg ? f->nbg : 1));
        ok = true;
        for (int b = 0; b < f->nbg; b++) {
            const struct bg_entry *e = &f->bg[b];
            int gid = ir_graph_find(r->m, e->name);
            r->line_error = false; /* every entry's problem */
            if (gid < 0) {
                err_at(r, e->name_loc, "unknown model '%s'", e->name);
                ok = false;
            } else if (!ir_job_background_batch_ok(e->batch, msg, sizeof msg)) {
                err_at(r, e->batch_loc, "%s", msg);
                ok = false;
            } else {
                j->background[j->nbackground++] = (ir_background){gid, e->batch};
            }
        }
        return ok;
    }
    switch (f->val.kind) {
    case T_INT: ok = ir_job_set_int(j, k, f->val.ival, msg, sizeof msg); break;
    case T_REAL: ok = ir_job_set_real(j, k, f->val.rval, msg, sizeof msg); break;
    case T_IDENT:
    case T_STRING: ok = ir_job_set_name(r->m, j, k, f->str, msg, sizeof msg); break;
    default: ok = ir_job_kind_error(k, msg, sizeof msg); break;
    }
    if (!ok)
        err_at(r, f->val.loc, "%s", msg);
    return ok;
}

/* A number field of an interleave section: NAME '=' (INT | REAL), finite. */
static bool il_real(reader *r, double *out)
{
    next(r);
    if (!expect(r, '='))
        return false;
    if (r->tok.kind != T_INT && r->tok.kind != T_REAL) {
        expected(r, "a number");
        return false;
    }
    *out = r->tok.kind == T_INT ? (double)r->tok.ival : r->tok.rval;
    next(r);
    return true;
}

/* BG '@' RANK, the head of a copy or a refusal line. */
static bool il_head(reader *r, int *job, int *rank)
{
    next(r);
    if (r->tok.kind != T_INT || r->tok.ival < 0 || r->tok.ival > INT32_MAX) {
        expected(r, "a background job index");
        return false;
    }
    *job = (int)r->tok.ival;
    next(r);
    if (!expect(r, '@'))
        return false;
    if (r->tok.kind != T_INT || r->tok.ival < 0 || r->tok.ival >= IR_MAX_GPUS) {
        expected(r, "a rank");
        return false;
    }
    *rank = (int)r->tok.ival;
    next(r);
    return true;
}

/* copy BG @ RANK {seed = INT, steps_per_iter = NUM, cut = [INT, ...]} */
static bool il_copy(reader *r, ir_bg_copy *c)
{
    if (!il_head(r, &c->job, &c->rank) || !expect(r, '{'))
        return false;
    bool seen[3] = {false, false, false};
    do {
        if (is_word(r, "seed") && !seen[0]) {
            seen[0] = true;
            next(r);
            if (!expect(r, '='))
                return false;
            if (r->tok.kind != T_INT || r->tok.ival < 0) {
                expected(r, "a non-negative integer seed");
                return false;
            }
            c->seed = r->tok.ival;
            next(r);
        } else if (is_word(r, "steps_per_iter") && !seen[1]) {
            seen[1] = true;
            if (!il_real(r, &c->steps_per_iter))
                return false;
        } else if (is_word(r, "cut") && !seen[2]) {
            seen[2] = true;
            next(r);
            if (!expect(r, '=') || !expect(r, '['))
                return false;
            int cap = 0, n = 0;
            do {
                if (r->tok.kind != T_INT || r->tok.ival < 0 || r->tok.ival > INT32_MAX) {
                    expected(r, "a unit index");
                    return false;
                }
                r->nranks++; /* cut points count against the same bound as rank sets */
                if (r->nranks > RANKS_MAX) {
                    err_at(r, r->tok.loc,
                           "the rank sets and cuts of this file list more than "
                           "2^26 entries in all");
                    return false;
                }
                arena_grow(r->a, (void **)&c->cut, &cap, n + 1, sizeof(int));
                c->cut[n++] = (int)r->tok.ival;
                next(r);
            } while (eat(r, ','));
            if (!expect(r, ']'))
                return false;
            c->nslices = n - 1;
        } else {
            expected(r, "'seed', 'steps_per_iter' or 'cut' (each once)");
            return false;
        }
    } while (eat(r, ','));
    if (!expect(r, '}'))
        return false;
    if (!seen[0] || !seen[1] || !seen[2]) {
        err_at(r, c->loc, "a copy needs 'seed', 'steps_per_iter' and 'cut'");
        return false;
    }
    return true;
}

/* interleave JOB '{' header-line (copy | refusal)* '}' (docs/ir.md). */
static void parse_interleave(reader *r)
{
    src_loc loc = r->tok.loc;
    next(r);
    if (r->tok.kind != T_IDENT) {
        expected(r, "a job name");
        return;
    }
    char *name = tok_str(r);
    int jid = ir_job_find(r->m, name);
    if (jid < 0)
        err_at(r, r->tok.loc, "unknown job '%s' (its interleave section must follow it)", name);
    else if (r->m->jobs[jid].interleave)
        err_at(r, r->tok.loc, "job '%s' has two interleave sections", name);
    next(r);
    if (!expect(r, '{'))
        return;
    ir_interleave *il = arena_alloc(r->a, sizeof *il);
    il->loc = loc;
    int ccap = 0, rcap = 0;
    bool seen[3] = {false, false, false};
    while (r->tok.kind != T_EOF && !is_punct(r, '}')) {
        int line = r->tok.loc.line;
        src_loc at = r->tok.loc;
        r->line_error = false;
        bool ok = true;
        if (is_word(r, "copy")) {
            ir_bg_copy c = {.loc = at};
            ok = il_copy(r, &c);
            if (ok) {
                arena_grow(r->a, (void **)&il->copies, &ccap, il->ncopies + 1, sizeof c);
                il->copies[il->ncopies++] = c;
            }
        } else if (is_word(r, "refusal")) {
            ir_bg_refusal f = {.loc = at};
            ok = il_head(r, &f.job, &f.rank);
            if (ok && r->tok.kind != T_STRING) {
                expected(r, "the reason, a string");
                ok = false;
            }
            if (ok) {
                field fl;
                ok = parse_field_string(r, &fl);
                f.why = fl.str;
                arena_grow(r->a, (void **)&il->refusals, &rcap, il->nrefusals + 1, sizeof f);
                il->refusals[il->nrefusals++] = f;
            }
        } else {
            do {
                static const char *const keys[] = {"slice_bound", "fg_time", "fg_time_bg"};
                int k = 0;
                while (k < 3 && !is_word(r, keys[k]))
                    k++;
                if (k == 3) {
                    expected(r, "'slice_bound', 'fg_time', 'fg_time_bg', 'copy', 'refusal' or '}'");
                    ok = false;
                    break;
                }
                if (seen[k])
                    err_at(r, r->tok.loc, "field '%s' given twice", keys[k]);
                seen[k] = true;
                double *dst = k == 0 ? &il->slice_bound : k == 1 ? &il->fg_time : &il->fg_time_bg;
                if (!il_real(r, dst)) {
                    ok = false;
                    break;
                }
            } while (eat(r, ','));
        }
        if (ok && r->tok.loc.line == line && r->tok.kind != T_EOF && !is_punct(r, '}')) {
            expected(r, "the end of the line");
            ok = false;
        }
        if (!ok) /* the whole line: a copy's own braces are on it */
            while (r->tok.kind != T_EOF && r->tok.loc.line == line)
                next(r);
    }
    r->line_error = false;
    if (r->tok.kind == T_EOF) {
        err_at(r, r->tok.loc, "unexpected end of file: interleave '%s' is not closed with '}'",
               name);
        return;
    }
    next(r);
    if (!(seen[0] && seen[1] && seen[2]))
        err_at(r, loc, "interleave '%s' needs 'slice_bound', 'fg_time' and 'fg_time_bg'", name);
    else if (jid >= 0 && !r->m->jobs[jid].interleave)
        r->m->jobs[jid].interleave = il;
}

/* entry := KIND '%'NAME | 'loss'   (KIND: fwd bwd start wait start.bwd wait.bwd) */
static bool sched_entry(reader *r, const ir_graph *g, ir_sched_entry *e)
{
    e->loc = r->tok.loc;
    e->op = -1;
    if (r->tok.kind != T_IDENT || !ir_sched_kind_lookup(tok_str(r), &e->kind)) {
        expected(r, "a schedule entry (fwd, bwd, start, wait, start.bwd, wait.bwd or loss)");
        return false;
    }
    next(r);
    if (e->kind == SK_LOSS)
        return true;
    if (r->tok.kind != T_VALUE) {
        expected(r, "the op it names ('%name')");
        return false;
    }
    if (g) {
        char *name = tok_str(r);
        e->op = ir_op_find(g, name);
        if (e->op < 0) {
            err_at(r, r->tok.loc, "undefined value '%%%s' in graph '%s'", name, g->name);
            return false;
        }
    }
    next(r);
    return true;
}

/* schedule JOB '{' (ranks ':' entry (',' entry)*)* '}' (docs/ir.md, "Schedule"). */
static void parse_schedule(reader *r)
{
    src_loc loc = r->tok.loc;
    next(r);
    if (r->tok.kind != T_IDENT) {
        expected(r, "a job name");
        return;
    }
    char *name = tok_str(r);
    int jid = ir_job_find(r->m, name);
    if (jid < 0)
        err_at(r, r->tok.loc, "unknown job '%s' (its schedule section must follow it)", name);
    else if (r->m->jobs[jid].schedule)
        err_at(r, r->tok.loc, "job '%s' has two schedule sections", name);
    const ir_graph *g = jid >= 0 ? r->m->graphs[r->m->jobs[jid].graph] : NULL;
    next(r);
    if (!expect(r, '{'))
        return;
    ir_schedule *sc = arena_alloc(r->a, sizeof *sc);
    sc->loc = loc;
    int pcap = 0;
    bool bad = false;
    while (r->tok.kind != T_EOF && !is_punct(r, '}')) {
        int line = r->tok.loc.line;
        r->line_error = false;
        ir_sched_prog pr = {.loc = r->tok.loc};
        int ecap = 0;
        bool ok = expect(r, '@') && parse_ranks(r, &pr.ranks) && expect(r, ':');
        while (ok) {
            ir_sched_entry e;
            ok = sched_entry(r, g, &e);
            if (ok) {
                arena_grow(r->a, (void **)&pr.e, &ecap, pr.n + 1, sizeof e);
                pr.e[pr.n++] = e;
            }
            if (!ok || !eat(r, ','))
                break;
        }
        if (ok && r->tok.loc.line == line && r->tok.kind != T_EOF && !is_punct(r, '}')) {
            expected(r, "',' or the end of the line");
            ok = false;
        }
        if (ok) {
            arena_grow(r->a, (void **)&sc->progs, &pcap, sc->nprogs + 1, sizeof pr);
            sc->progs[sc->nprogs++] = pr;
        } else {
            bad = true;
            while (r->tok.kind != T_EOF && r->tok.loc.line == line && !is_punct(r, '}'))
                next(r);
        }
    }
    r->line_error = false;
    if (r->tok.kind == T_EOF) {
        err_at(r, r->tok.loc, "unexpected end of file: schedule '%s' is not closed with '}'", name);
        return;
    }
    next(r);
    if (!bad && jid >= 0 && !r->m->jobs[jid].schedule)
        r->m->jobs[jid].schedule = sc;
}

static void parse_item(reader *r)
{
    r->line_error = false;
    src_loc loc = r->tok.loc;
    const char *what = is_word(r, "gpu")       ? "gpu"
                       : is_word(r, "cluster") ? "cluster"
                       : is_word(r, "job")     ? "job"
                                               : NULL;
    if (is_word(r, "graph")) {
        parse_graph(r);
        return;
    }
    if (is_word(r, "interleave")) {
        parse_interleave(r);
        return;
    }
    if (is_word(r, "schedule")) {
        parse_schedule(r);
        return;
    }
    if (!what) {
        /* Skip to the next line that starts with an item keyword, so that
		 * one unknown record gives one error. */
        expected(r, "'graph', 'gpu', 'cluster', 'job', 'schedule' or 'interleave'");
        next(r);
        while (r->tok.kind != T_EOF &&
               !(r->tok.loc.col == 1 &&
                 (is_word(r, "graph") || is_word(r, "gpu") || is_word(r, "cluster") ||
                  is_word(r, "job") || is_word(r, "schedule") || is_word(r, "interleave"))))
            next(r);
        return;
    }
    next(r);
    if (r->tok.kind != T_IDENT) {
        expected(r, "a name");
        return;
    }
    char *name = tok_str(r);
    src_loc nloc = r->tok.loc;
    next(r);
    uint64_t seen = 0;
    int before = r->d->nerrors;
    if (what[0] == 'g') {
        ir_gpu g = {.name = name, .loc = loc};
        parse_record(r, "gpu", &g, apply_gpu, &seen, gpu_keys);
        if (ir_gpu_find(r->m, name) >= 0)
            err_at(r, nloc, "redefinition of gpu '%s'", name);
        else if (r->d->nerrors == before &&
                 (seen & (1ull << 4 | 1ull << 5)) != (1ull << 4 | 1ull << 5))
            err_at(r, loc, "gpu '%s' needs 'bandwidth' and 'memory'", name);
        for (int k = 0; k < KC_COUNT && r->d->nerrors == before; k++)
            if (!(seen >> (9 + 3 * k) & 1) != !(seen >> (10 + 3 * k) & 1))
                err_at(r, loc, "gpu '%s' needs both 'efficiency.%s' and 'half_work.%s', or neither",
                       name, ir_kclass_name((ir_kclass)k), ir_kclass_name((ir_kclass)k));
        ir_gpu_add(r->m, &g);
    } else if (what[0] == 'c') {
        ir_cluster c = {.name = name, .loc = loc, .gpu = -1, .nodes = 1, .gpus_per_node = 1};
        parse_record(r, "cluster", &c, apply_cluster, &seen, cluster_keys);
        if (ir_cluster_find(r->m, name) >= 0)
            err_at(r, nloc, "redefinition of cluster '%s'", name);
        else if (r->d->nerrors == before && c.gpu < 0)
            err_at(r, loc, "cluster '%s' needs a 'gpu'", name);
        else if (r->d->nerrors == before && (int64_t)c.nodes * c.gpus_per_node > IR_MAX_GPUS)
            err_at(r, loc, "cluster '%s' has more than %d gpus", name, IR_MAX_GPUS);
        else if (r->d->nerrors == before && c.gpus_per_node > 1 && !(c.intra.bandwidth > 0))
            err_at(r, loc, "cluster '%s' has %d gpus per node and needs a positive intra.bandwidth",
                   name, c.gpus_per_node);
        else if (r->d->nerrors == before && c.nodes > 1 && !(c.inter.bandwidth > 0))
            err_at(r, loc, "cluster '%s' has %d nodes and needs a positive inter.bandwidth", name,
                   c.nodes);
        if (c.gpu >= 0)
            ir_cluster_add(r->m, &c);
    } else {
        ir_job j = {.name = name, .loc = loc};
        ir_job_defaults(&j);
        parse_record(r, "job", &j, apply_job, &seen, job_keys());
        bool given[IR_JOB_NFIELDS];
        for (int k = 0; k < IR_JOB_NFIELDS; k++)
            given[k] = seen & (1ull << k);
        if (r->d->nerrors == before)
            ir_job_check_required(&j, given, loc, r->d);
        if (j.graph >= 0 && j.cluster >= 0 && j.batch > 0)
            ir_job_add(r->m, &j);
    }
}

ir_module *ir_read(arena *a, const src_file *f, diag_ctx *d)
{
    reader r = {.a = a, .f = f, .d = d, .p = f->text, .end = f->text + f->len, .line = 1, .col = 1};
    r.m = ir_module_new(a);
    int before = d->nerrors;
    next(&r);
    /* No items at all is the empty module: what a Burst file of only blocks
     * and lets lowers to, and prints as. */
    while (r.tok.kind != T_EOF)
        parse_item(&r);
    if (d->nerrors == before)
        ir_verify(r.m, d);
    return r.m;
}
