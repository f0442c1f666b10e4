/*
 * eval.c: constant expressions, units, scopes and error reporting.
 *
 * Everything the front end computes at compile time goes through fe_eval():
 * integers (int64, every + - * / % checked for overflow and division by
 * zero), reals, quantities with units (converted to SI: bytes, bytes/s,
 * seconds, FLOP/s), lists, `a @ b` pairs, and names bound in scopes (block
 * parameters, loop variables, lets, tensors). Every message of the front end
 * goes through fe_error(), which prints each distinct message once: a block
 * expanded in a loop reports its error once, not once per copy.
 */
#include "frontend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shows a message unless the same text was shown before. */
static bool fe_emit(fe_ctx *c, const char *text, bool is_error)
{
    if (ir_names_get(&c->seen, text) >= 0)
        return false;
    ir_names_set(c->arena, &c->seen, text, 0);
    diag_ctx *d = c->diag;
    if (is_error)
        d->nerrors++;
    if (d->max_errors && d->nerrors > d->max_errors) {
        if (is_error && d->nerrors == d->max_errors + 1)
            fprintf(d->out, "burstc: error: too many errors, stopping\n");
        return false;
    }
    fputs(text, d->out);
    return true;
}

/* Formats through diag into memory, so that the text can be compared. */
static char *fe_format(fe_ctx *c, src_loc loc, bool note, const char *fmt, va_list ap)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        ice("open_memstream failed");
    diag_ctx tmp;
    diag_init(&tmp, mem);
    tmp.max_errors = 0;
    if (note) {
        va_list ap2;
        va_copy(ap2, ap);
        int n = vsnprintf(NULL, 0, fmt, ap2);
        va_end(ap2);
        char *msg = arena_alloc(c->arena, (size_t)n + 1);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        diag_note(&tmp, loc, "%s", msg);
    } else {
        diag_verror(&tmp, loc, fmt, ap);
    }
    fclose(mem);
    char *out = arena_strdup(c->arena, buf ? buf : "");
    free(buf);
    return out;
}

/* Whether key (a place and a message) was seen before; records it. The
 * copies of a block or loop body made by an expansion report an error once,
 * and the others cost a hash lookup, not the formatting of a message with
 * its source line. */
static bool fe_seen_key(fe_ctx *c, const char *key)
{
    if (ir_names_get(&c->sites, key) >= 0)
        return true;
    ir_names_set(c->arena, &c->sites, arena_strdup(c->arena, key), 0);
    return false;
}

bool fe_once(fe_ctx *c, src_loc loc, const char *what, const char *name)
{
    if (c->quiet) {
        /* Counting (count.c): the caller is about to report an error. It
         * is kept back, and recorded nowhere, so the expansion reports it. */
        c->quiet_errors++;
        return false;
    }
    char stack[256], *key = stack;
    size_t need = strlen(what) + strlen(name) + 64;
    if (need > sizeof stack && !(key = malloc(need)))
        out_of_memory(need);
    snprintf(key, need, "%p:%d:%d:%s:%s", (const void *)loc.file, loc.line, loc.col, what, name);
    bool seen = fe_seen_key(c, key);
    if (key != stack)
        free(key);
    return !seen;
}

void fe_error(fe_ctx *c, src_loc loc, const char *fmt, ...)
{
    if (c->quiet) {
        c->quiet_errors++; /* counting (count.c): the expansion reports it */
        c->last_printed = false;
        return;
    }
    c->failures++;
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char stack[512], *key = stack;
    size_t need = (size_t)n + 64;
    if (need > sizeof stack && !(key = malloc(need)))
        out_of_memory(need);
    int k = snprintf(key, need, "%p:%d:%d:", (const void *)loc.file, loc.line, loc.col);
    va_copy(ap2, ap);
    vsnprintf(key + k, need - (size_t)k, fmt, ap2);
    va_end(ap2);
    bool seen = fe_seen_key(c, key);
    if (key != stack)
        free(key);
    diag_ctx *d = c->diag;
    c->last_printed = false;
    if (seen) {
        va_end(ap);
        return;
    }
    if (d->max_errors && d->nerrors >= d->max_errors) {
        /* Not shown: counted, without formatting the source line. */
        if (++d->nerrors == d->max_errors + 1 && d->out)
            fprintf(d->out, "burstc: error: too many errors, stopping\n");
        va_end(ap);
        return;
    }
    char *text = fe_format(c, loc, false, fmt, ap);
    va_end(ap);
    c->last_printed = fe_emit(c, text, true);
}

void fe_note(fe_ctx *c, src_loc loc, const char *fmt, ...)
{
    if (!c->last_printed)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *text = fe_format(c, loc, true, fmt, ap);
    va_end(ap);
    fputs(text, c->diag->out);
}

bool fe_op_check(fe_ctx *c, int id)
{
    src_loc loc = c->graph->ops[id].loc;
    char key[64];
    snprintf(key, sizeof key, "%p:%d:%d:op check", (const void *)loc.file, loc.line, loc.col);
    if (ir_names_get(&c->sites, key) >= 0) {
        diag_ctx count; /* reported for an earlier copy: only the verdict */
        diag_init(&count, NULL);
        bool ok = ir_op_check(c->module, c->graph, id, &count);
        c->failures += !ok;
        return ok;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        ice("open_memstream failed");
    diag_ctx tmp;
    diag_init(&tmp, mem);
    tmp.max_errors = 0;
    bool ok = ir_op_check(c->module, c->graph, id, &tmp);
    fclose(mem);
    if (tmp.nerrors) {
        c->failures++;
        fe_seen_key(c, key);
        /* All of one op's messages count as one text: an op expanded
		 * many times reports them once. */
        char *text = arena_strdup(c->arena, buf ? buf : "");
        if (fe_emit(c, text, true))
            c->diag->nerrors += tmp.nerrors - 1;
        ok = false;
    }
    free(buf);
    return ok;
}

/* Scopes. */

/* A scope's bindings are a list (newest first) and, once there are more
 * than a few, a table from names to the newest binding of each. */
#define FE_SCOPE_LIST 8

fe_binding *fe_lookup_local(fe_scope *s, const char *name)
{
    if (s->nbound > FE_SCOPE_LIST) {
        int i = ir_names_get(&s->index, name);
        return i < 0 ? NULL : s->table[i];
    }
    for (fe_binding *b = s->bindings; b; b = b->next)
        if (strcmp(b->name, name) == 0)
            return b;
    return NULL;
}

fe_binding *fe_lookup(fe_scope *s, const char *name)
{
    bool crossed = false;
    for (; s; s = s->parent) {
        fe_binding *b = fe_lookup_local(s, name);
        if (b && !(crossed && b->kind == B_VALUE && b->val.kind == V_TENSOR))
            return b;
        if (s->boundary)
            crossed = true;
    }
    return NULL;
}

fe_binding *fe_bind(fe_ctx *c, fe_scope *s, const char *name, src_loc loc)
{
    fe_binding *b = arena_alloc(c->arena, sizeof *b);
    b->name = name;
    b->loc = loc;
    b->next = s->bindings;
    s->bindings = b;
    if (++s->nbound <= FE_SCOPE_LIST)
        return b;
    if (s->nbound == FE_SCOPE_LIST + 1) {
        /* From now on, a table: the list's bindings oldest first, so that
         * the newest of a name is the one indexed. */
        arena_grow(c->arena, (void **)&s->table, &s->table_cap, s->nbound, sizeof *s->table);
        int i = s->nbound;
        for (fe_binding *o = s->bindings; o; o = o->next)
            s->table[--i] = o;
        for (i = 0; i < s->nbound; i++)
            ir_names_set(c->arena, &s->index, s->table[i]->name, i);
        return b;
    }
    arena_grow(c->arena, (void **)&s->table, &s->table_cap, s->nbound, sizeof *s->table);
    s->table[s->nbound - 1] = b;
    ir_names_set(c->arena, &s->index, name, s->nbound - 1);
    return b;
}

fe_binding *fe_bind_layer(fe_ctx *c, fe_scope *s, const char *name, src_loc loc, fe_val v)
{
    fe_binding *b = fe_bind(c, s, name, loc);
    b->kind = B_VALUE;
    b->val = v;
    s->nlayers++;
    return b;
}

static int fe_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1000;
    int row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int prev = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cur = row[j];
            int best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev = cur;
        }
    }
    return row[lb];
}

const char *fe_closest(const char *name, const char *const *cands, int n)
{
    const char *best = NULL;
    int bestd = (int)strlen(name) / 3 + 1;
    if (bestd > 3)
        bestd = 3;
    size_t len = strlen(name);
    for (int i = 0; i < n; i++) {
        size_t cl = strlen(cands[i]);
        if ((cl > len ? cl - len : len - cl) > (size_t)bestd)
            continue; /* the distance is at least the difference in length */
        int d = fe_edit_distance(name, cands[i]);
        if (d <= bestd && (!best || d < bestd)) {
            best = cands[i];
            bestd = d;
        }
    }
    return best;
}

const char *fe_suggest_name(fe_ctx *c, fe_scope *s, const char *name)
{
    if (c->diag->max_errors && c->diag->nerrors >= c->diag->max_errors)
        return ""; /* nothing more is shown: no need to look */
    int n = 0, cap = 0;
    const char **cands = NULL;
    bool crossed = false;
    for (; s && n < 4096; s = s->parent) {
        for (fe_binding *b = s->bindings; b && n < 4096; b = b->next) { /* the 4096 nearest */
            if (crossed && b->kind == B_VALUE && b->val.kind == V_TENSOR)
                continue;
            arena_grow(c->arena, (void **)&cands, &cap, n + 1, sizeof *cands);
            cands[n++] = b->name;
        }
        if (s->boundary)
            crossed = true;
    }
    const char *best = fe_closest(name, cands, n);
    return best ? arena_printf(c->arena, "; did you mean '%s'?", best) : "";
}

/* Units. */

/* value * mul / div is the SI amount; dividing keeps `5 us` exactly 5e-06. */
typedef struct fe_unit {
    const char *name;
    fe_dim dim;
    double mul, div;
} fe_unit;

static const fe_unit fe_units[] = {
    {"B", DIM_BYTES, 1, 1},
    {"KB", DIM_BYTES, 1e3, 1},
    {"MB", DIM_BYTES, 1e6, 1},
    {"GB", DIM_BYTES, 1e9, 1},
    {"TB", DIM_BYTES, 1e12, 1},
    {"KiB", DIM_BYTES, 1024.0, 1},
    {"MiB", DIM_BYTES, 1048576.0, 1},
    {"GiB", DIM_BYTES, 1073741824.0, 1},
    {"TiB", DIM_BYTES, 1099511627776.0, 1},
    {"b", DIM_BYTES, 1, 8},
    {"Kb", DIM_BYTES, 1e3, 8},
    {"Mb", DIM_BYTES, 1e6, 8},
    {"Gb", DIM_BYTES, 1e9, 8},
    {"Tb", DIM_BYTES, 1e12, 8},
    {"s", DIM_TIME, 1, 1},
    {"ms", DIM_TIME, 1, 1e3},
    {"us", DIM_TIME, 1, 1e6},
    {"ns", DIM_TIME, 1, 1e9},
    {"FLOPS", DIM_FLOPS, 1, 1},
    {"KFLOPS", DIM_FLOPS, 1e3, 1},
    {"MFLOPS", DIM_FLOPS, 1e6, 1},
    {"GFLOPS", DIM_FLOPS, 1e9, 1},
    {"TFLOPS", DIM_FLOPS, 1e12, 1},
    {"PFLOPS", DIM_FLOPS, 1e15, 1},
};

const char *fe_dim_name(fe_dim d)
{
    switch (d) {
    case DIM_BYTES: return "a size (B, KB, MiB, GiB, ...)";
    case DIM_RATE: return "a bandwidth (GB/s, Gb/s, MiB/s, ...)";
    case DIM_TIME: return "a time (s, ms, us, ns)";
    case DIM_FLOPS: return "a compute rate (GFLOPS, TFLOPS, ...)";
    }
    return "?";
}

/* Converts `value unit` to SI; false for a unit that is not known. */
static bool fe_apply_unit(const char *unit, double value, double *out, fe_dim *dim)
{
    size_t n = strlen(unit);
    bool rate = n > 2 && strcmp(unit + n - 2, "/s") == 0;
    size_t base = rate ? n - 2 : n;
    for (size_t i = 0; i < sizeof fe_units / sizeof fe_units[0]; i++) {
        const fe_unit *u = &fe_units[i];
        if (strlen(u->name) != base || strncmp(u->name, unit, base) != 0)
            continue;
        if (rate && u->dim != DIM_BYTES)
            return false;
        *out = value * u->mul / u->div;
        *dim = rate ? DIM_RATE : u->dim;
        return true;
    }
    return false;
}

const char *fe_val_desc(const fe_val *v)
{
    switch (v->kind) {
    case V_ERR: return "an error";
    case V_INT: return "an integer";
    case V_REAL: return "a real number";
    case V_BOOL: return "a boolean";
    case V_QTY: return fe_dim_name(v->dim);
    case V_STR: return "a string";
    case V_LIST: return "a list";
    case V_AT: return "a pair 'a @ b'";
    case V_TENSOR: return "a layer";
    case V_NAME: return "a name";
    case V_CALL: return "a call";
    case V_BLOCK: return "a block";
    }
    return "?";
}

static fe_val fe_err(void)
{
    return (fe_val){.kind = V_ERR};
}

static bool fe_is_num(const fe_val *v)
{
    return v->kind == V_INT || v->kind == V_REAL || v->kind == V_BOOL;
}

static double fe_num(const fe_val *v)
{
    return v->kind == V_REAL ? v->r : (double)v->i;
}

/* Integer arithmetic, every overflow reported. */
static fe_val fe_int_op(fe_ctx *c, int op, int64_t a, int64_t b, src_loc loc)
{
    fe_val v = {.kind = V_INT, .loc = loc};
    bool ovf = false;
    switch (op) {
    case '+': ovf = __builtin_add_overflow(a, b, &v.i); break;
    case '-': ovf = __builtin_sub_overflow(a, b, &v.i); break;
    case '*': ovf = __builtin_mul_overflow(a, b, &v.i); break;
    case '/':
    case '%':
        if (b == 0) {
            fe_error(c, loc, "%s by zero", op == '/' ? "division" : "remainder");
            return fe_err();
        }
        if (a == INT64_MIN && b == -1) {
            ovf = true;
            break;
        }
        v.i = op == '/' ? a / b : a % b;
        break;
    }
    if (ovf) {
        fe_error(c, loc, "integer overflow in %lld %c %lld", (long long)a, op, (long long)b);
        return fe_err();
    }
    return v;
}

/* Reals overflow to infinity silently in C; here it is an error, as for
 * integers: an infinite value would print as IR that does not read back. */
static fe_val fe_finite(fe_ctx *c, fe_val v, double a, int op, double b, src_loc loc)
{
    if (isfinite(v.r))
        return v;
    fe_error(c, loc, "overflow in %g %c %g: the result is not a finite number", a, op, b);
    return fe_err();
}

static fe_val fe_binary(fe_ctx *c, int op, fe_val l, fe_val r, src_loc loc)
{
    if (l.kind == V_ERR || r.kind == V_ERR)
        return fe_err();
    if (op == '@') {
        fe_val v = {.kind = V_AT, .loc = l.loc, .n = 2};
        v.items = arena_alloc(c->arena, 2 * sizeof *v.items);
        v.items[0] = l;
        v.items[1] = r;
        return v;
    }
    if ((l.kind == V_INT || l.kind == V_BOOL) && (r.kind == V_INT || r.kind == V_BOOL))
        return fe_int_op(c, op, l.i, r.i, loc);
    fe_val v = {.kind = V_REAL, .loc = l.loc};
    if (fe_is_num(&l) && fe_is_num(&r)) {
        double a = fe_num(&l), b = fe_num(&r);
        if ((op == '/' || op == '%') && b == 0) {
            fe_error(c, loc, "division by zero");
            return fe_err();
        }
        v.r = op == '+'   ? a + b
              : op == '-' ? a - b
              : op == '*' ? a * b
              : op == '/' ? a / b
                          : fmod(a, b);
        return fe_finite(c, v, a, op, b, loc);
    }
    /* Quantities scale by numbers and add to quantities of their kind. */
    v.kind = V_QTY;
    if (l.kind == V_QTY && r.kind == V_QTY && l.dim == r.dim && (op == '+' || op == '-')) {
        v.dim = l.dim;
        v.r = op == '+' ? l.r + r.r : l.r - r.r;
        return fe_finite(c, v, l.r, op, r.r, loc);
    }
    if (l.kind == V_QTY && fe_is_num(&r) && (op == '*' || op == '/')) {
        if (op == '/' && fe_num(&r) == 0) {
            fe_error(c, loc, "division by zero");
            return fe_err();
        }
        v.dim = l.dim;
        v.r = op == '*' ? l.r * fe_num(&r) : l.r / fe_num(&r);
        return fe_finite(c, v, l.r, op, fe_num(&r), loc);
    }
    if (fe_is_num(&l) && r.kind == V_QTY && op == '*') {
        v.dim = r.dim;
        v.r = fe_num(&l) * r.r;
        return fe_finite(c, v, fe_num(&l), op, r.r, loc);
    }
    fe_error(c, loc, "cannot compute %s %c %s", fe_val_desc(&l), op, fe_val_desc(&r));
    return fe_err();
}

/* Counts one more term evaluated while a model is lowered; false once the
 * model has evaluated too many (FE_MAX_TERMS), or counting (count.c) has. */
static bool fe_count_term(fe_ctx *c, src_loc loc)
{
    if (!c->graph)
        return true; /* top-level lets, gpus, clusters, jobs: each once */
    if (c->quiet) {
        if (++c->count_terms <= FE_MAX_TERMS)
            return true;
        c->quiet_errors++;
        return false;
    }
    if (c->too_many_ops)
        return false;
    if (++c->terms > FE_MAX_TERMS) {
        fe_error(c, loc,
                 "model '%s' evaluates more than %d expression terms to expand (a block or loop "
                 "computes large constants too many times over)",
                 c->graph->name, FE_MAX_TERMS);
        c->too_many_ops = true;
        return false;
    }
    return true;
}

fe_val fe_eval(fe_ctx *c, fe_scope *s, const fe_expr *e, bool names_ok, bool calls_ok)
{
    fe_val v = {.loc = e->loc};
    if (!fe_count_term(c, e->loc))
        return fe_err();
    switch (e->kind) {
    case EX_INT:
        v.kind = V_INT;
        v.i = e->i;
        return v;
    case EX_REAL:
        v.kind = V_REAL;
        v.r = e->r;
        return v;
    case EX_BOOL:
        v.kind = V_BOOL;
        v.i = e->i;
        return v;
    case EX_STR:
        v.kind = V_STR;
        v.s = e->s;
        return v;
    case EX_QTY:
        v.kind = V_QTY;
        if (!fe_apply_unit(e->unit, e->r, &v.r, &v.dim)) {
            fe_error(c, e->loc,
                     "unknown unit '%.40s%s' (units: B KB MB GB TB KiB MiB GiB TiB, "
                     "b Kb Mb Gb Tb, any of those with /s, s ms us ns, FLOPS to PFLOPS)",
                     e->unit, strlen(e->unit) > 40 ? "..." : "");
            return fe_err();
        }
        return v;
    case EX_NAME: {
        fe_binding *b = s ? fe_lookup(s, e->s) : NULL;
        if (b && b->kind == B_VALUE) {
            v = b->val;
            v.loc = e->loc;
            return v;
        }
        if (b) {
            v.kind = V_BLOCK;
            v.s = e->s;
            return v;
        }
        if (names_ok) {
            v.kind = V_NAME;
            v.s = e->s;
            return v;
        }
        if (fe_once(c, e->loc, "undefined", e->s))
            fe_error(c, e->loc, "undefined name '%s'%s", e->s, fe_suggest_name(c, s, e->s));
        return fe_err();
    }
    case EX_NEG: {
        fe_val x = fe_eval(c, s, e->lhs, false, false);
        if (x.kind == V_INT || x.kind == V_BOOL) {
            if (x.i == INT64_MIN) {
                fe_error(c, e->loc, "integer overflow in -(%lld)", (long long)x.i);
                return fe_err();
            }
            x.kind = V_INT;
            x.i = -x.i;
            return x;
        }
        if (x.kind == V_REAL || x.kind == V_QTY) {
            x.r = -x.r;
            return x;
        }
        if (x.kind != V_ERR)
            fe_error(c, e->loc, "cannot negate %s", fe_val_desc(&x));
        return fe_err();
    }
    case EX_BINARY: {
        /* `1 + 2 + ... + n` nests to the left: follow that spine in a loop,
         * and recurse only into right operands (FE_MAX_NEST bounds those). */
        int n = 0;
        bool leaf_names = names_ok;
        const fe_expr *x = e;
        for (; x->kind == EX_BINARY; x = x->lhs, n++)
            leaf_names &= x->op == '@';
        const fe_expr **spine = malloc(sizeof *spine * (size_t)n);
        if (!spine)
            out_of_memory(sizeof *spine * (size_t)n);
        x = e;
        for (int k = n - 1; k >= 0; k--, x = x->lhs)
            spine[k] = x;
        fe_val acc = fe_eval(c, s, x, leaf_names, false);
        for (int k = 0; k < n; k++) {
            fe_val r = fe_eval(c, s, spine[k]->rhs, false, false);
            acc = fe_binary(c, spine[k]->op, acc, r, spine[k]->loc);
        }
        free(spine);
        return acc;
    }
    case EX_ERROR: return fe_err();
    case EX_CALL:
        if (calls_ok) {
            v.kind = V_CALL;
            v.expr = e;
            v.s = e->s;
            return v;
        }
        fe_error(c, e->loc, "a call to '%s' is not allowed here; a constant is expected", e->s);
        return fe_err();
    case EX_LIST: {
        int n = 0;
        for (const fe_expr *i = e->items; i; i = i->next)
            n++;
        v.kind = V_LIST;
        v.n = n;
        v.items = arena_alloc(c->arena, sizeof *v.items * (size_t)(n ? n : 1));
        n = 0;
        bool ok = true;
        for (const fe_expr *i = e->items; i; i = i->next) {
            v.items[n] = fe_eval(c, s, i, names_ok, calls_ok);
            ok &= v.items[n].kind != V_ERR;
            n++;
        }
        return ok ? v : fe_err();
    }
    }
    return fe_err();
}

bool fe_eval_int(fe_ctx *c, fe_scope *s, const fe_expr *e, const char *what, int64_t *out)
{
    fe_val v = fe_eval(c, s, e, false, false);
    if (v.kind == V_INT || v.kind == V_BOOL) {
        *out = v.i;
        return true;
    }
    if (v.kind != V_ERR)
        fe_error(c, e->loc, "%s must be an integer, not %s", what, fe_val_desc(&v));
    return false;
}
