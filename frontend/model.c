/*
 * model.c: expanding and lowering a model into an IR graph.
 *
 * Runs a model's statements in order: inputs and layers become IR ops
 * (ir_op_add, then ir_op_check for attributes and shapes), `let`s bind
 * constants, `for` loops run their body once per iteration and blocks are
 * expanded at every call, like macros with their own scope. IR names follow
 * the structure of the source so that they stay unique and readable:
 *
 *   h = conv2d(x, ...)                  %h
 *   h = convrelu(x, c = 64)  (a block)  %h.<name inside the block>, and %h
 *                                       for the op its `return` makes
 *   for i in 0..3 { h = relu(h) }       %h.0, %h.1, %h.2
 *   h = relu(conv2d(x, ...))            %h.conv2d (the nested call), %h
 *
 * In a loop body, assigning a name bound outside the loop updates it (the
 * loop carries it to the next iteration); other names are local to one
 * iteration. A value whose op failed its checks is "poisoned" (op -2): its
 * users are skipped silently, so one mistake makes one message.
 */
#include "frontend.h"

#include <string.h>

#define FE_POISON (-2)

/* IR names in use in the current graph: an open-addressing hash set, and
 * for each name that was wanted twice the next suffix to try, so that the
 * thousandth op wanting one name does not try the 999 taken before it. */
struct fe_names {
    int cap, n;
    const char **slot;
    ir_names next; /* wanted name -> the next k of "%s_%d" to try */
};

static uint64_t fe_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool fe_names_has(const fe_names *t, const char *s)
{
    if (!t->cap)
        return false;
    for (uint64_t i = fe_hash(s) & (uint64_t)(t->cap - 1);; i = (i + 1) & (uint64_t)(t->cap - 1)) {
        if (!t->slot[i])
            return false;
        if (strcmp(t->slot[i], s) == 0)
            return true;
    }
}

static void fe_names_add(arena *a, fe_names *t, const char *s)
{
    if (2 * (t->n + 1) > t->cap) {
        fe_names old = *t;
        t->cap = old.cap ? 2 * old.cap : 16;
        t->slot = arena_alloc(a, sizeof *t->slot * (size_t)t->cap);
        t->n = 0;
        for (int i = 0; i < old.cap; i++)
            if (old.slot[i])
                fe_names_add(a, t, old.slot[i]);
    }
    uint64_t i = fe_hash(s) & (uint64_t)(t->cap - 1);
    while (t->slot[i])
        i = (i + 1) & (uint64_t)(t->cap - 1);
    t->slot[i] = s;
    t->n++;
}

/* The IR name for want, made unique in the graph with a _2, _3... suffix. */
static const char *fe_unique(fe_ctx *c, const char *want)
{
    const char *name = want;
    if (fe_names_has(c->names, name)) {
        int k = ir_names_get(&c->names->next, want);
        for (k = k < 2 ? 2 : k;; k++) {
            name = arena_printf(c->arena, "%s_%d", want, k);
            if (!fe_names_has(c->names, name))
                break;
        }
        ir_names_set(c->arena, &c->names->next, want, k + 1);
    }
    fe_names_add(c->arena, c->names, name);
    return name;
}

/* The suffix of IR names made in scope s: ".0.2" in the third iteration of
 * a loop in the first of another. Made when a name needs it, not at every
 * iteration: most iterations of a long loop name one op or none. */
static const char *fe_suffix(fe_ctx *c, fe_scope *s)
{
    if (!s->suffix)
        s->suffix = arena_printf(c->arena, "%s.%lld", fe_suffix(c, s->parent), (long long)s->iter);
    return s->suffix;
}

static const char *fe_ir_name(fe_ctx *c, fe_scope *s, const char *name)
{
    return arena_printf(c->arena, "%s%s%s", s->prefix, name, fe_suffix(c, s));
}

static fe_val fe_tensor(int op, src_loc loc)
{
    return (fe_val){.kind = V_TENSOR, .op = op, .loc = loc};
}

/* Counts one more statement or loop iteration; false once the expansion has
 * run too long. */
static bool fe_count_step(fe_ctx *c, src_loc loc)
{
    if (c->too_many_ops)
        return false;
    if (++c->steps > FE_MAX_STEPS) {
        fe_error(c, loc,
                 "model '%s' runs more than %d statements and loop iterations to expand (loops "
                 "nest too many times over)",
                 c->graph->name, FE_MAX_STEPS);
        c->too_many_ops = true;
        return false;
    }
    return true;
}

/* Counts one more op; false once the model is too large. */
static bool fe_count_op(fe_ctx *c, src_loc loc)
{
    if (c->too_many_ops)
        return false;
    if (++c->nops > FE_MAX_OPS) {
        fe_error(c, loc, "model '%s' expands to more than %d ops", c->graph->name, FE_MAX_OPS);
        c->too_many_ops = true;
        return false;
    }
    return true;
}

static fe_val fe_lower_call(fe_ctx *c, fe_scope *s, const fe_expr *call, const char *irname);

/* Enters one more level of the lowering's recursion; false (reported once)
 * past FE_MAX_DEPTH. Every true is matched by fe_leave(). */
static bool fe_enter(fe_ctx *c, src_loc loc)
{
    if (c->nest >= FE_MAX_DEPTH) {
        fe_error(c, loc, "blocks, loops and calls nest more than %d levels deep", FE_MAX_DEPTH);
        return false;
    }
    c->nest++;
    return true;
}

static void fe_leave(fe_ctx *c)
{
    c->nest--;
}

/* A tensor argument: a name bound to a layer, or a nested call. */
static fe_val fe_tensor_arg(fe_ctx *c, fe_scope *s, const fe_expr *e, const char *irname, int k)
{
    if (e->kind == EX_CALL)
        return fe_lower_call(c, s, e, arena_printf(c->arena, "%s.%s", irname, e->s));
    if (e->kind == EX_NAME) {
        fe_binding *b = fe_lookup(s, e->s);
        if (b && b->kind == B_VALUE && b->val.kind == V_TENSOR)
            return fe_tensor(b->val.op, e->loc);
        if (b && b->kind == B_VALUE && b->val.kind == V_ERR)
            return fe_tensor(FE_POISON, e->loc);
        if (!b) {
            fe_binding *outer = NULL;
            for (fe_scope *o = s; o && !outer; o = o->parent)
                outer = fe_lookup_local(o, e->s);
            if (outer && outer->kind == B_VALUE && outer->val.kind == V_TENSOR)
                fe_error(c, e->loc,
                         "'%s' is a layer outside this block; pass it to the block as an input",
                         e->s);
            else if (fe_once(c, e->loc, "undefined", e->s))
                fe_error(c, e->loc, "undefined name '%s'%s", e->s, fe_suggest_name(c, s, e->s));
            return (fe_val){.kind = V_ERR};
        }
        fe_error(c, e->loc, "input %d must be a layer, but '%s' is %s", k + 1, e->s,
                 b->kind == B_BLOCK ? "a block" : fe_val_desc(&b->val));
        return (fe_val){.kind = V_ERR};
    }
    fe_val v = fe_eval(c, s, e, false, false);
    if (v.kind != V_ERR)
        fe_error(c, e->loc, "input %d must be a layer, not %s", k + 1, fe_val_desc(&v));
    return (fe_val){.kind = V_ERR};
}

/* key = value of an op call as an IR attribute. */
static bool fe_attr_value(fe_ctx *c, fe_scope *s, const fe_arg *a, ir_attr *out)
{
    out->key = a->key;
    fe_val v;
    if (a->value->kind == EX_NAME && strcmp(a->value->s, "none") == 0 && !fe_lookup(s, "none")) {
        out->kind = AK_REF;
        out->u.ref = -1;
        return true;
    }
    v = fe_eval(c, s, a->value, false, false);
    switch (v.kind) {
    case V_ERR: return false;
    case V_INT:
        out->kind = AK_INT;
        out->u.i = v.i;
        return true;
    case V_BOOL:
        out->kind = AK_BOOL;
        out->u.i = v.i;
        return true;
    case V_REAL:
        out->kind = AK_REAL;
        out->u.real = v.r;
        return true;
    case V_TENSOR:
        if (v.op < 0)
            return false;
        out->kind = AK_REF;
        out->u.ref = v.op;
        return true;
    case V_LIST:
        out->kind = AK_LIST;
        out->u.list.n = v.n;
        out->u.list.v = arena_alloc(c->arena, sizeof(int64_t) * (size_t)(v.n ? v.n : 1));
        for (int i = 0; i < v.n; i++) {
            const fe_val *it = &v.items[i];
            if (it->kind != V_INT) {
                fe_error(c, it->loc, "attribute '%s' must be a list of integers, not of %s", a->key,
                         fe_val_desc(it));
                return false;
            } else {
                out->u.list.v[i] = it->i;
            }
        }
        return true;
    default:
        fe_error(c, a->value->loc, "attribute '%s' cannot be %s", a->key, fe_val_desc(&v));
        return false;
    }
}

static const char *const *fe_op_names(fe_ctx *c, int *n)
{
    const char **names = arena_alloc(c->arena, sizeof *names * OP_COUNT);
    for (int i = 0; i < OP_COUNT; i++)
        names[i] = ir_op_info_of((ir_opcode)i)->name;
    *n = OP_COUNT;
    return names;
}

static fe_val fe_expand_block(fe_ctx *c, fe_scope *s, const fe_expr *call, fe_binding *b,
                              const char *irname);

/* An op call or a block call, whose result is named irname (before
 * uniquing). */
static fe_val fe_lower_call_in(fe_ctx *c, fe_scope *s, const fe_expr *call, const char *irname);

static fe_val fe_lower_call(fe_ctx *c, fe_scope *s, const fe_expr *call, const char *irname)
{
    if (c->too_many_ops)
        return fe_tensor(FE_POISON, call->loc);
    if (!fe_enter(c, call->loc))
        return (fe_val){.kind = V_ERR};
    fe_val v = fe_lower_call_in(c, s, call, irname);
    fe_leave(c);
    return v;
}

static fe_val fe_lower_call_in(fe_ctx *c, fe_scope *s, const fe_expr *call, const char *irname)
{
    ir_opcode opc = ir_op_lookup(call->s);
    if (opc == OP_COUNT || opc == OP_INPUT) {
        fe_binding *b = fe_lookup(s, call->s);
        if (b && b->kind == B_BLOCK)
            return fe_expand_block(c, s, call, b, irname);
        if (opc == OP_INPUT) {
            fe_error(c, call->loc,
                     "inputs are declared as 'input NAME: f32[batch, ...]', not called");
            return (fe_val){.kind = V_ERR};
        }
        if (!fe_once(c, call->loc, "unknown op", call->s))
            return (fe_val){.kind = V_ERR}; /* reported for an earlier copy */
        int nops;
        const char *const *ops = fe_op_names(c, &nops);
        const char *near = fe_closest(call->s, ops, nops);
        if (!near) {
            /* Blocks in scope are candidates too. */
            const char *sugg = fe_suggest_name(c, s, call->s);
            fe_error(c, call->loc, "unknown op '%s'%s", call->s, sugg);
        } else {
            fe_error(c, call->loc, "unknown op '%s'; did you mean '%s'?", call->s, near);
        }
        return (fe_val){.kind = V_ERR};
    }
    if (ir_op_info_of(opc)->cls == OC_COMM) {
        fe_error(c, call->loc,
                 "'%s' is communication that the planner inserts; a model cannot call it", call->s);
        return (fe_val){.kind = V_ERR};
    }

    int nin = 0, nattr = 0;
    for (const fe_arg *a = call->args; a; a = a->next)
        a->key ? nattr++ : nin++;
    int *inputs = arena_alloc(c->arena, sizeof(int) * (size_t)(nin ? nin : 1));
    ir_attr *attrs = arena_alloc(c->arena, sizeof(ir_attr) * (size_t)(nattr ? nattr : 1));
    bool ok = true, poisoned = false;
    nin = nattr = 0;
    for (const fe_arg *a = call->args; a; a = a->next) {
        if (a->key)
            continue;
        fe_val v = fe_tensor_arg(c, s, a->value, irname, nin);
        if (v.kind == V_ERR)
            ok = false;
        else if (v.op < 0)
            poisoned = true;
        inputs[nin++] = v.op;
    }
    fe_named named;
    fe_named_init(c, &named, call->args);
    for (const fe_arg *a = call->args; a; a = a->next) {
        if (!a->key)
            continue;
        if (fe_named_get(&named, a->key) != a) {
            fe_error(c, a->loc, "attribute '%s' given twice", a->key);
            ok = false;
        }
        if (!fe_attr_value(c, s, a, &attrs[nattr]))
            ok = false;
        else
            nattr++;
    }
    if (!ok || poisoned || !fe_count_op(c, call->loc))
        return fe_tensor(FE_POISON, call->loc);
    int id = ir_op_add(c->module, c->graph, opc, fe_unique(c, irname), inputs, nin, attrs, nattr,
                       call->loc);
    if (!fe_op_check(c, id))
        return fe_tensor(FE_POISON, call->loc);
    return fe_tensor(id, call->loc);
}

static void fe_run(fe_ctx *c, fe_scope *s, const fe_stmt *body, fe_val *ret, const char *ret_name);

/* Reports that the call of block name would take the model past a limit:
 * verb n more of noun, where the model has used have. */
static void fe_count_over(fe_ctx *c, const fe_expr *call, const char *name, const char *verb,
                          const char *noun, int64_t n, int64_t have, int limit)
{
    int64_t total;
    if (n == FE_COUNT_HUGE || __builtin_add_overflow(n, have, &total))
        fe_error(c, call->loc,
                 "block '%s' would %s 2^63 %s or more here; the limit of model '%s' is %d", name,
                 verb, noun, c->graph->name, limit);
    else
        fe_error(c, call->loc,
                 "block '%s' would %s %lld %s here, which takes model '%s' to %lld, more than its "
                 "limit of %d",
                 name, verb, (long long)n, noun, c->graph->name, (long long)total, limit);
}

/* Whether expanding block b, its parameters bound in bs, keeps the model
 * within its limits of ops, steps and terms; if not, reports the call with
 * the count it would reach and stops the model's expansion, before any of
 * that work is done. */
static bool fe_count_fits(fe_ctx *c, const fe_expr *call, fe_binding *b, fe_scope *bs)
{
    fe_count n = fe_count_expansion(c, b, bs);
    const char *name = b->block->name;
    if (n.ops == FE_COUNT_UNKNOWN)
        return true; /* the expansion reports why, within its caps */
    if (n.ops > FE_MAX_OPS - c->nops)
        fe_count_over(c, call, name, "expand to", "ops", n.ops, c->nops, FE_MAX_OPS);
    else if (n.steps > FE_MAX_STEPS - c->steps)
        fe_count_over(c, call, name, "run", "statements and loop iterations", n.steps, c->steps,
                      FE_MAX_STEPS);
    else if (n.terms > FE_MAX_TERMS - c->terms)
        fe_count_over(c, call, name, "evaluate", "expression terms", n.terms, c->terms,
                      FE_MAX_TERMS);
    else
        return true;
    fe_note(c, b->block->loc, "'%s' is defined here", name);
    c->too_many_ops = true;
    return false;
}

static fe_val fe_expand_block(fe_ctx *c, fe_scope *s, const fe_expr *call, fe_binding *b,
                              const char *irname)
{
    const fe_block *blk = b->block;
    if (b->expanding) {
        fe_error(c, call->loc, "block '%s' calls itself", blk->name);
        return (fe_val){.kind = V_ERR};
    }
    fe_scope *bs = arena_alloc(c->arena, sizeof *bs);
    bs->parent = b->def_scope;
    bs->boundary = true;
    bs->prefix = arena_printf(c->arena, "%s.", irname);
    bs->suffix = "";

    /* Inputs: the positional arguments, evaluated in the caller's scope. */
    int want = blk->has_inputs ? 0 : 1, got = 0;
    for (const fe_param *p = blk->params; p; p = p->next)
        want += p->is_input;
    for (const fe_arg *a = call->args; a; a = a->next)
        got += !a->key;
    bool ok = true, poisoned = false;
    if (want != got) {
        fe_error(c, call->loc, "block '%s' takes %d input%s, got %d", blk->name, want,
                 want == 1 ? "" : "s", got);
        fe_note(c, blk->loc, "'%s' is defined here", blk->name);
        ok = false;
    }
    const fe_param *p = blk->params;
    int k = 0;
    for (const fe_arg *a = call->args; a && ok; a = a->next) {
        if (a->key)
            continue;
        fe_val v = fe_tensor_arg(c, s, a->value, irname, k);
        if (v.kind == V_ERR)
            ok = false;
        else if (v.op < 0)
            poisoned = true;
        const char *name = "in";
        src_loc loc = blk->loc;
        if (blk->has_inputs) {
            while (p && !p->is_input)
                p = p->next;
            name = p->name;
            loc = p->loc;
            p = p->next;
        }
        fe_bind_layer(c, bs, name, loc, v);
        k++;
    }
    /* Parameters: named arguments (in the caller's scope), else defaults
	 * (in the block's scope, so they may use earlier parameters). */
    fe_named named;
    fe_named_init(c, &named, call->args);
    fe_params params;
    fe_params_init(c, &params, blk->params);
    for (const fe_arg *a = call->args; a; a = a->next) {
        if (!a->key)
            continue;
        const fe_param *q = fe_params_get(&params, a->key);
        if (!q || q->is_input) {
            fe_error(c, a->loc, "block '%s' has no parameter '%s'", blk->name, a->key);
            fe_note(c, blk->loc, "'%s' is defined here", blk->name);
            ok = false;
        }
        if (fe_named_get(&named, a->key) != a) {
            fe_error(c, a->loc, "parameter '%s' given twice", a->key);
            ok = false;
        }
    }
    for (const fe_param *q = blk->params; q; q = q->next) {
        if (q->is_input)
            continue;
        const fe_arg *a = fe_named_get(&named, q->name);
        fe_val v;
        if (a) {
            v = fe_eval(c, s, a->value, false, false);
        } else if (q->dflt) {
            v = fe_eval(c, bs, q->dflt, false, false);
        } else {
            fe_error(c, call->loc, "missing parameter '%s' of block '%s'", q->name, blk->name);
            fe_note(c, q->loc, "'%s' is declared here", q->name);
            ok = false;
            continue;
        }
        if (v.kind == V_ERR)
            ok = false;
        fe_binding *pb = fe_bind(c, bs, q->name, q->loc);
        pb->kind = B_VALUE;
        pb->val = v;
    }
    if (!ok)
        return (fe_val){.kind = V_ERR};
    if (poisoned)
        return fe_tensor(FE_POISON, call->loc);
    /* A call outside any block: is it within the op limit? (The calls inside
     * it are counted with it.) */
    if (c->depth == 0 && !fe_count_fits(c, call, b, bs))
        return fe_tensor(FE_POISON, call->loc);
    if (++c->depth > 64) {
        c->depth--;
        fe_error(c, call->loc, "blocks nest more than 64 deep");
        return (fe_val){.kind = V_ERR};
    }
    b->expanding = true;
    fe_val ret = {.kind = V_ERR};
    bool has_ret = false;
    fe_run(c, bs, blk->body, &ret, irname);
    for (const fe_stmt *st = blk->body; st; st = st->next)
        has_ret |= st->kind == ST_RETURN;
    b->expanding = false;
    c->depth--;
    if (!has_ret)
        return (fe_val){.kind = V_ERR}; /* reported where it was defined */
    if (ret.kind == V_ERR)
        return fe_tensor(FE_POISON, call->loc);
    return ret;
}

static void fe_redefinition(fe_ctx *c, src_loc loc, const fe_binding *old, const char *name)
{
    fe_error(c, loc, "redefinition of '%s'", name);
    fe_note(c, old->loc, "'%s' was defined here", name);
}

/* input NAME: ELEM[batch, d1, ...] */
static void fe_lower_input(fe_ctx *c, fe_scope *s, const fe_stmt *st)
{
    ir_type t = {0};
    bool ok = true;
    if (strcmp(st->elem, "f32") == 0) {
        t.elem = EL_F32;
    } else if (strcmp(st->elem, "i32") == 0) {
        t.elem = EL_I32;
    } else {
        fe_error(c, st->elem_loc, "unknown element type '%s' (f32 or i32)", st->elem);
        ok = false;
    }
    int rank = 0;
    for (const fe_expr *d = st->dims; d; d = d->next, rank++) {
        if (rank >= IR_MAX_RANK) {
            fe_error(c, d->loc, "an input has at most %d dimensions", IR_MAX_RANK);
            ok = false;
            break;
        }
        bool is_batch = d->kind == EX_NAME && strcmp(d->s, "batch") == 0 && !fe_lookup(s, "batch");
        if (rank == 0) {
            if (!is_batch) {
                fe_error(c, d->loc, "the first dimension of an input must be 'batch'");
                ok = false;
            }
            t.dim[0] = IR_BATCH;
            continue;
        }
        if (is_batch) {
            fe_error(c, d->loc, "'batch' can only be the first dimension");
            ok = false;
            continue;
        }
        int64_t v;
        if (!fe_eval_int(c, s, d, "a dimension", &v)) {
            ok = false;
        } else if (v <= 0 || v > IR_MAX_DIM) {
            fe_error(c, d->loc, "dimension %d is %lld; it must be from 1 to 2^40", rank,
                     (long long)v);
            ok = false;
        } else {
            t.dim[rank] = v;
        }
    }
    if (rank == 0) {
        fe_error(c, st->loc, "input '%s' needs a shape, at least [batch]", st->name);
        ok = false;
    }
    t.rank = rank;
    fe_binding *b = fe_bind_layer(c, s, st->name, st->name_loc, fe_tensor(FE_POISON, st->loc));
    if (!ok || !fe_count_op(c, st->loc))
        return;
    int id =
        ir_op_add(c->module, c->graph, OP_INPUT, fe_unique(c, st->name), NULL, 0, NULL, 0, st->loc);
    c->graph->ops[id].type = t;
    b->val = fe_tensor(fe_op_check(c, id) ? id : FE_POISON, st->loc);
}

/* NAME = call | NAME = name */
static void fe_lower_assign(fe_ctx *c, fe_scope *s, const fe_stmt *st)
{
    fe_binding *target = fe_lookup_local(s, st->name);
    if (target) {
        fe_redefinition(c, st->name_loc, target, st->name);
        return;
    }
    /* In a loop, a layer bound outside the loop is updated. */
    for (fe_scope *o = s; o->loop && !target; o = o->parent) {
        fe_binding *b = fe_lookup_local(o->parent, st->name);
        if (b && b->kind == B_VALUE && (b->val.kind == V_TENSOR || b->val.kind == V_ERR))
            target = b;
        else if (b) {
            fe_error(c, st->name_loc, "cannot assign a layer to '%s', which is not a layer",
                     st->name);
            fe_note(c, b->loc, "'%s' was defined here", st->name);
            return;
        }
    }
    const fe_expr *e = st->value;
    fe_val v;
    if (!e || e->kind == EX_ERROR) {
        v = fe_tensor(FE_POISON, st->loc); /* a syntax error, reported */
    } else if (e->kind == EX_CALL) {
        v = fe_lower_call(c, s, e, fe_ir_name(c, s, st->name));
    } else if (e->kind == EX_NAME) {
        v = fe_tensor_arg(c, s, e, st->name, 0);
    } else {
        fe_error(c, e->loc,
                 "the right side of '=' must be a layer (a call such as relu(h), or a name); "
                 "constants are written 'let %s = ...'",
                 st->name);
        v = (fe_val){.kind = V_ERR};
    }
    if (v.kind == V_ERR)
        v = fe_tensor(FE_POISON, st->loc);
    if (!target)
        target = fe_bind_layer(c, s, st->name, st->name_loc, v);
    target->val = v;
}

/* for NAME in lo .. hi { body } */
static void fe_lower_for(fe_ctx *c, fe_scope *s, const fe_stmt *st, fe_val *ret,
                         const char *ret_name)
{
    int64_t lo, hi, n;
    bool ok = fe_eval_int(c, s, st->lo, "a loop bound", &lo);
    ok &= fe_eval_int(c, s, st->hi, "a loop bound", &hi);
    if (!ok)
        return;
    if (__builtin_sub_overflow(hi, lo, &n) || n > FE_MAX_OPS) {
        fe_error(c, st->loc, "loop from %lld to %lld runs too many times (the limit is %d)",
                 (long long)lo, (long long)hi, FE_MAX_OPS);
        return;
    }
    /* An iteration that fails stops the loop: the next ones would mostly
     * repeat its errors (reported once anyway), at the cost of running. */
    int64_t failures = c->failures;
    for (int64_t i = lo; i < hi && c->failures == failures && fe_count_step(c, st->loc); i++) {
        fe_scope *it = arena_alloc(c->arena, sizeof *it);
        it->parent = s;
        it->loop = true;
        it->prefix = s->prefix;
        it->iter = i; /* it->suffix: made by fe_suffix() when needed */
        fe_binding *var = fe_bind(c, it, st->name, st->name_loc);
        var->kind = B_VALUE;
        var->val = (fe_val){.kind = V_INT, .i = i, .loc = st->name_loc};
        fe_run(c, it, st->body, ret, ret_name);
    }
}

static void fe_run_in(fe_ctx *c, fe_scope *s, const fe_stmt *body, fe_val *ret,
                      const char *ret_name);

/* Runs statements in scope s; ret is non-NULL in a block's body. */
static void fe_run(fe_ctx *c, fe_scope *s, const fe_stmt *body, fe_val *ret, const char *ret_name)
{
    if (!body || !fe_enter(c, body->loc))
        return;
    fe_run_in(c, s, body, ret, ret_name);
    fe_leave(c);
}

static void fe_run_in(fe_ctx *c, fe_scope *s, const fe_stmt *body, fe_val *ret,
                      const char *ret_name)
{
    for (const fe_stmt *st = body; st && fe_count_step(c, st->loc); st = st->next) {
        switch (st->kind) {
        case ST_INPUT:
            if (ret || s->loop) {
                fe_error(c, st->loc, "inputs are declared at the top level of a model, not in %s",
                         s->loop ? "a loop" : "a block");
                break;
            }
            if (fe_lookup_local(s, st->name)) {
                fe_redefinition(c, st->name_loc, fe_lookup_local(s, st->name), st->name);
                break;
            }
            fe_lower_input(c, s, st);
            break;
        case ST_LET: {
            fe_binding *old = fe_lookup_local(s, st->name);
            if (old) {
                fe_redefinition(c, st->name_loc, old, st->name);
                break;
            }
            fe_val v = fe_eval(c, s, st->value, false, false);
            fe_binding *b = fe_bind(c, s, st->name, st->name_loc);
            b->kind = B_VALUE;
            b->val = v;
            break;
        }
        case ST_ASSIGN: fe_lower_assign(c, s, st); break;
        case ST_WEIGHTS:
            if (ret || s->loop) {
                fe_error(c, st->loc,
                         "a weights section belongs at the top level of a model, not in %s",
                         s->loop ? "a loop" : "a block");
                break;
            }
            /* Checked once the model is complete: a target may name a later layer. */
            for (const fe_wmap *w = st->wmaps; w; w = w->next)
                ir_weight_add(c->module, c->graph, w->source, w->target, w->loc, w->target_loc);
            break;
        case ST_FOR: fe_lower_for(c, s, st, ret, ret_name); break;
        case ST_BLOCK: fe_define_block(c, s, st->block); break;
        case ST_RETURN:
            if (!ret) {
                fe_error(c, st->loc, "'return' is only allowed in a block");
                break;
            }
            if (s->loop) {
                fe_error(c, st->loc, "'return' cannot be inside a loop");
                break;
            }
            if (st->value->kind == EX_ERROR)
                *ret = fe_tensor(FE_POISON, st->loc);
            else if (st->value->kind == EX_CALL)
                *ret = fe_lower_call(c, s, st->value, ret_name);
            else
                *ret = fe_tensor_arg(c, s, st->value, ret_name, 0);
            return;
        }
    }
}

void fe_lower_model(fe_ctx *c, const fe_item *model)
{
    c->graph = ir_graph_add(c->module, model->name, model->loc);
    c->nops = 0;
    c->steps = 0;
    c->too_many_ops = false;
    c->terms = 0;
    c->count_steps = 0;
    c->count_terms = 0;
    c->names = arena_alloc(c->arena, sizeof *c->names);
    fe_scope *s = arena_alloc(c->arena, sizeof *s);
    s->parent = c->global;
    s->prefix = "";
    s->suffix = "";
    fe_run(c, s, model->body, NULL, NULL);
    if (!model->body)
        fe_error(c, model->name_loc, "model '%s' has no layers", model->name);
    if (!ir_weights_check(c->graph, c->diag))
        c->failures++;
    c->graph = NULL;
}
