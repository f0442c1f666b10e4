/*
 * count.c: how many ops a block call would make, computed without expanding it.
 *
 * Blocks are macros, so a block that calls another twice, thirty levels
 * deep, is 2^30 ops from 30 lines. The op limit (FE_MAX_OPS) stops such an
 * expansion only after it has done the work up to the limit, and the work
 * before that can be exponential in the nesting too (each level's name
 * bookkeeping, each level's failed copies). So before model.c expands a call
 * made outside any block, it asks this file for the call's op count and
 * reports the call, with the count it would reach, when that passes the
 * limit.
 *
 * The count walks the same statements as the expansion (model.c), with the
 * same scopes, lets, parameters, attributes and loops, but makes no ops and
 * names no tensors. It counts the three things the expansion is bounded in:
 * ops, steps (statements and loop iterations) and expression terms
 * evaluated. An op is 1 plus its nested calls; a block call is its inputs'
 * calls plus the count of its body, remembered per block, parameter values
 * and state of the scopes it sees. Each block body is therefore counted once
 * per distinct set of parameters, bottom up, and the sums are checked for
 * overflow (saturating at FE_COUNT_HUGE). Nothing is reported here: errors
 * stay quiet (c->quiet) and make the count unknown, so that the expansion,
 * which the caps bound, reports them in its own words. The walk itself runs
 * at most FE_MAX_STEPS steps and FE_MAX_TERMS terms per model: never more
 * than the expansion it stands for would.
 */
#include "frontend.h"

#include <stdlib.h>
#include <string.h>

static const fe_count fe_unknown = {FE_COUNT_UNKNOWN, FE_COUNT_UNKNOWN, FE_COUNT_UNKNOWN};

static bool fe_known(fe_count n)
{
    return n.ops != FE_COUNT_UNKNOWN;
}

static void fe_sat_add(int64_t *sum, int64_t b)
{
    if (__builtin_add_overflow(*sum, b, sum))
        *sum = FE_COUNT_HUGE;
}

/* Adds b to *sum, saturating at FE_COUNT_HUGE; unknown stays unknown. */
static void fe_count_add(fe_count *sum, fe_count b)
{
    if (!fe_known(*sum) || !fe_known(b)) {
        *sum = fe_unknown;
        return;
    }
    fe_sat_add(&sum->ops, b.ops);
    fe_sat_add(&sum->steps, b.steps);
    fe_sat_add(&sum->terms, b.terms);
}

/* Counts one more step of the walk; false once it has run as many as an
 * expansion may. */
static bool fe_walk_step(fe_ctx *c)
{
    return ++c->count_steps <= FE_MAX_STEPS;
}

/* Evaluates e quietly, adding the terms it took to n. */
static fe_val fe_count_eval(fe_ctx *c, fe_scope *s, const fe_expr *e, fe_count *n)
{
    int64_t t0 = c->count_terms;
    fe_val v = fe_eval(c, s, e, false, false);
    fe_sat_add(&n->terms, c->count_terms - t0);
    return v;
}

/* A key for a block binding, its parameter values and the scopes it sees.
 * Integers, reals and quantities are keyed by value; strings and lists by
 * where they live (values never change once made, so equal pointers mean
 * equal values, and a long list costs a short key). The scopes from the
 * block's definition outwards are keyed by how many names each holds that
 * the body can see (all but layers): a let or block bound after one call,
 * which may shadow a name the body uses, makes the next call a new key. */
typedef struct fe_key {
    char *s;
    size_t n, cap;
} fe_key;

static void fe_key_add(fe_key *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fe_key_add(fe_key *k, const char *fmt, ...)
{
    char tmp[96];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof tmp)
        ice("count key part too long");
    if (k->n + (size_t)len + 1 > k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 128;
        while (cap < k->n + (size_t)len + 1)
            cap *= 2;
        char *s = realloc(k->s, cap);
        if (!s)
            out_of_memory(cap);
        k->s = s;
        k->cap = cap;
    }
    memcpy(k->s + k->n, tmp, (size_t)len + 1);
    k->n += (size_t)len;
}

static void fe_key_val(fe_key *k, const fe_val *v)
{
    switch (v->kind) {
    case V_INT:
    case V_BOOL: fe_key_add(k, "i%lld,", (long long)v->i); break;
    case V_REAL: fe_key_add(k, "r%a,", v->r); break;
    case V_QTY: fe_key_add(k, "q%d:%a,", (int)v->dim, v->r); break;
    case V_AT:
    case V_LIST: fe_key_add(k, "l%d:%d:%p,", (int)v->kind, v->n, (const void *)v->items); break;
    default: fe_key_add(k, "k%d:%p:%d,", (int)v->kind, (const void *)v->s, v->op); break;
    }
}

static fe_count fe_count_call(fe_ctx *c, fe_scope *s, const fe_expr *call);
static fe_count fe_count_run(fe_ctx *c, fe_scope *s, const fe_stmt *body, bool in_block);

/* A tensor argument: a nested call makes ops, a name none; anything else is
 * an error the expansion reports. */
static fe_count fe_count_arg(fe_ctx *c, fe_scope *s, const fe_expr *e)
{
    if (e->kind == EX_CALL)
        return fe_count_call(c, s, e);
    return e->kind == EX_NAME ? (fe_count){0, 0, 0} : fe_unknown;
}

/* The count of block b's body, its parameters bound in bs. */
static fe_count fe_count_block(fe_ctx *c, fe_binding *b, fe_scope *bs)
{
    const fe_block *blk = b->block;
    if (b->counting || c->count_depth >= 64)
        return fe_unknown; /* recursion or too deep: the expansion says which */
    fe_key key = {0};
    fe_key_add(&key, "%p:", (const void *)b);
    for (const fe_scope *o = b->def_scope; o; o = o->parent)
        fe_key_add(&key, "%d,", o->nbound - o->nlayers);
    for (const fe_param *q = blk->params; q; q = q->next) {
        if (q->is_input)
            continue;
        fe_binding *pb = fe_lookup_local(bs, q->name);
        if (!pb || pb->kind != B_VALUE || pb->val.kind == V_ERR) {
            free(key.s);
            return fe_unknown;
        }
        fe_key_val(&key, &pb->val);
    }
    int slot = ir_names_get(&c->count_memo, key.s);
    if (slot >= 0) {
        free(key.s);
        return c->count_vals[slot];
    }
    fe_scope *body = arena_alloc(c->arena, sizeof *body);
    body->parent = bs;
    body->prefix = "";
    body->suffix = "";
    int64_t quiet_errors = c->quiet_errors;
    b->counting = true;
    c->count_depth++;
    fe_count n = fe_count_run(c, body, blk->body, true);
    c->count_depth--;
    b->counting = false;
    if (c->count_steps > FE_MAX_STEPS || c->count_terms > FE_MAX_TERMS) {
        free(key.s); /* cut short: not a count to remember */
        return fe_unknown;
    }
    if (c->quiet_errors != quiet_errors)
        n = fe_unknown; /* and so for every later call with these values */
    if (c->count_n == c->count_cap) {
        int cap = c->count_cap ? 2 * c->count_cap : 64;
        if (cap > (1 << 29))
            ice("count table too large");
        fe_count *vals = arena_alloc(c->arena, sizeof *vals * (size_t)cap);
        if (c->count_n)
            memcpy(vals, c->count_vals, sizeof *vals * (size_t)c->count_n);
        c->count_vals = vals;
        c->count_cap = cap;
    }
    c->count_vals[c->count_n] = n;
    ir_names_set(c->arena, &c->count_memo, arena_strdup(c->arena, key.s), c->count_n++);
    free(key.s);
    return n;
}

/* A block call: binds its inputs and parameters as fe_expand_block does,
 * then counts its body. */
static fe_count fe_count_block_call(fe_ctx *c, fe_scope *s, const fe_expr *call, fe_binding *b)
{
    const fe_block *blk = b->block;
    fe_scope *bs = arena_alloc(c->arena, sizeof *bs);
    bs->parent = b->def_scope;
    bs->boundary = true;
    bs->prefix = "";
    bs->suffix = "";
    fe_count n = {0, 0, 0};
    const fe_param *p = blk->params;
    for (const fe_arg *a = call->args; a && fe_known(n); a = a->next) {
        if (a->key)
            continue;
        fe_count_add(&n, fe_count_arg(c, s, a->value));
        const char *name = "in";
        if (blk->has_inputs) {
            while (p && !p->is_input)
                p = p->next;
            if (!p)
                return fe_unknown; /* too many inputs */
            name = p->name;
            p = p->next;
        }
        fe_bind_layer(c, bs, name, blk->loc, (fe_val){.kind = V_TENSOR, .op = -2});
    }
    fe_named named;
    fe_named_init(c, &named, call->args);
    for (const fe_param *q = blk->params; q && fe_known(n); q = q->next) {
        if (q->is_input)
            continue;
        const fe_arg *a = fe_named_get(&named, q->name);
        fe_val v;
        if (a)
            v = fe_count_eval(c, s, a->value, &n);
        else if (q->dflt)
            v = fe_count_eval(c, bs, q->dflt, &n);
        else
            return fe_unknown;
        if (v.kind == V_ERR)
            return fe_unknown;
        fe_binding *pb = fe_bind(c, bs, q->name, q->loc);
        pb->kind = B_VALUE;
        pb->val = v;
    }
    if (fe_known(n))
        fe_count_add(&n, fe_count_block(c, b, bs));
    return n;
}

/* An op call (1, its nested calls and its attributes' terms) or a block
 * call. */
static fe_count fe_count_call(fe_ctx *c, fe_scope *s, const fe_expr *call)
{
    if (c->count_nest >= FE_MAX_DEPTH)
        return fe_unknown;
    c->count_nest++;
    fe_count n = {1, 0, 0};
    ir_opcode opc = ir_op_lookup(call->s);
    if (opc == OP_COUNT || opc == OP_INPUT) {
        fe_binding *b = fe_lookup(s, call->s);
        n = b && b->kind == B_BLOCK ? fe_count_block_call(c, s, call, b) : fe_unknown;
    } else {
        for (const fe_arg *a = call->args; a && fe_known(n); a = a->next) {
            if (!a->key)
                fe_count_add(&n, fe_count_arg(c, s, a->value));
            else if (!(a->value->kind == EX_NAME && strcmp(a->value->s, "none") == 0 &&
                       !fe_lookup(s, "none")))
                fe_count_eval(c, s, a->value, &n); /* as fe_attr_value does */
        }
    }
    c->count_nest--;
    return n;
}

/* for NAME in lo .. hi { body }: every iteration, since the body may use
 * NAME in its parameters or bounds. */
static fe_count fe_count_for(fe_ctx *c, fe_scope *s, const fe_stmt *st)
{
    fe_count sum = {0, 0, 0};
    fe_val lo = fe_count_eval(c, s, st->lo, &sum), hi = fe_count_eval(c, s, st->hi, &sum);
    int64_t n;
    if ((lo.kind != V_INT && lo.kind != V_BOOL) || (hi.kind != V_INT && hi.kind != V_BOOL) ||
        __builtin_sub_overflow(hi.i, lo.i, &n) || n > FE_MAX_OPS)
        return fe_unknown;
    for (int64_t i = lo.i; i < hi.i && fe_known(sum); i++) {
        if (!fe_walk_step(c))
            return fe_unknown;
        fe_scope *it = arena_alloc(c->arena, sizeof *it);
        it->parent = s;
        it->loop = true;
        it->prefix = "";
        it->suffix = "";
        fe_binding *var = fe_bind(c, it, st->name, st->name_loc);
        var->kind = B_VALUE;
        var->val = (fe_val){.kind = V_INT, .i = i, .loc = st->name_loc};
        fe_sat_add(&sum.steps, 1); /* the iteration, as fe_lower_for counts it */
        fe_count_add(&sum, fe_count_run(c, it, st->body, false));
    }
    return sum;
}

/* The statements of a body, as fe_run_in runs them. */
static fe_count fe_count_run(fe_ctx *c, fe_scope *s, const fe_stmt *body, bool in_block)
{
    fe_count n = {0, 0, 0};
    for (const fe_stmt *st = body; st && fe_known(n); st = st->next) {
        if (!fe_walk_step(c))
            return fe_unknown;
        fe_sat_add(&n.steps, 1); /* the statement, as fe_run_in counts it */
        switch (st->kind) {
        case ST_INPUT:                      /* fall through */
        case ST_WEIGHTS: return fe_unknown; /* an error in a block or a loop */
        case ST_LET: {
            fe_val v = fe_count_eval(c, s, st->value, &n);
            fe_binding *b = fe_bind(c, s, st->name, st->name_loc);
            b->kind = B_VALUE;
            b->val = v;
            break;
        }
        case ST_ASSIGN: {
            if (!st->value || (st->value->kind != EX_CALL && st->value->kind != EX_NAME))
                return fe_unknown; /* an error */
            fe_count_add(&n, fe_count_arg(c, s, st->value));
            fe_bind_layer(c, s, st->name, st->name_loc, (fe_val){.kind = V_TENSOR, .op = -2});
            break;
        }
        case ST_FOR: fe_count_add(&n, fe_count_for(c, s, st)); break;
        case ST_BLOCK: fe_define_block(c, s, st->block); break;
        case ST_RETURN:
            if (!in_block || s->loop)
                return fe_unknown;
            fe_count_add(&n, fe_count_arg(c, s, st->value));
            return n;
        }
    }
    return n;
}

fe_count fe_count_expansion(fe_ctx *c, fe_binding *b, fe_scope *bs)
{
    if (c->count_steps > FE_MAX_STEPS || c->count_terms > FE_MAX_TERMS)
        return fe_unknown;
    int64_t quiet_errors = c->quiet_errors;
    c->quiet++;
    fe_count n = fe_count_block(c, b, bs);
    c->quiet--;
    return c->quiet_errors == quiet_errors ? n : fe_unknown;
}
