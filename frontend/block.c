/*
 * block.c: block definitions, and finding a call's arguments and a block's
 * parameters by name.
 *
 * Both the expansion (model.c) and the count that comes before it (count.c)
 * define the blocks they meet and look up arguments by name; they share
 * these, which call nothing above eval.c's scopes and messages. The lookups
 * search in place when a list is short and through a table when it is long,
 * so a call with a hundred thousand named arguments costs linear time.
 */
#include "frontend.h"

#include <string.h>

#define FE_FEW 16

void fe_named_init(fe_ctx *c, fe_named *l, const fe_arg *args)
{
    *l = (fe_named){.args = args};
    for (const fe_arg *a = args; a; a = a->next)
        l->n += a->key != NULL;
    if (l->n <= FE_FEW)
        return;
    l->arr = arena_alloc(c->arena, sizeof *l->arr * (size_t)l->n);
    int k = 0;
    for (const fe_arg *a = args; a; a = a->next)
        if (a->key) {
            l->arr[k] = a;
            if (ir_names_get(&l->index, a->key) < 0)
                ir_names_set(c->arena, &l->index, a->key, k);
            k++;
        }
}

const fe_arg *fe_named_get(const fe_named *l, const char *key)
{
    if (l->arr) {
        int k = ir_names_get(&l->index, key);
        return k < 0 ? NULL : l->arr[k];
    }
    for (const fe_arg *a = l->args; a; a = a->next)
        if (a->key && strcmp(a->key, key) == 0)
            return a;
    return NULL;
}

void fe_params_init(fe_ctx *c, fe_params *t, const fe_param *params)
{
    *t = (fe_params){.params = params};
    int n = 0;
    for (const fe_param *p = params; p; p = p->next)
        n++;
    if (n <= FE_FEW)
        return;
    t->arr = arena_alloc(c->arena, sizeof *t->arr * (size_t)n);
    n = 0;
    for (const fe_param *p = params; p; p = p->next, n++) {
        t->arr[n] = p;
        if (ir_names_get(&t->index, p->name) < 0)
            ir_names_set(c->arena, &t->index, p->name, n);
    }
}

const fe_param *fe_params_get(const fe_params *t, const char *name)
{
    if (t->arr) {
        int k = ir_names_get(&t->index, name);
        return k < 0 ? NULL : t->arr[k];
    }
    for (const fe_param *p = t->params; p; p = p->next)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

void fe_define_block(fe_ctx *c, fe_scope *s, const fe_block *b)
{
    fe_binding *old = fe_lookup_local(s, b->name);
    if (old) {
        fe_error(c, b->loc, "redefinition of '%s'", b->name);
        fe_note(c, old->loc, "'%s' was defined here", b->name);
        return;
    }
    if (ir_op_lookup(b->name) != OP_COUNT) {
        fe_error(c, b->loc, "block '%s' has the name of an op", b->name);
        return;
    }
    fe_params params;
    fe_params_init(c, &params, b->params);
    for (const fe_param *p = b->params; p; p = p->next) {
        if (!b->has_inputs && strcmp(p->name, "in") == 0)
            fe_error(c, p->loc, "'in' is the block's input; it cannot be a parameter");
        if (p->is_input && p->dflt)
            fe_error(c, p->dflt->loc, "input '%s' cannot have a default", p->name);
        const fe_param *q = fe_params_get(&params, p->name);
        if (q != p) {
            fe_error(c, p->loc, "parameter '%s' declared twice", p->name);
            fe_note(c, q->loc, "first declared here");
        }
    }
    const fe_stmt *last = NULL;
    for (const fe_stmt *st = b->body; st; st = st->next) {
        if (last && last->kind == ST_RETURN)
            fe_error(c, st->loc, "statement after 'return'");
        last = st;
    }
    if (!last || last->kind != ST_RETURN)
        fe_error(c, b->loc, "block '%s' has no 'return' at its end", b->name);
    fe_binding *nb = fe_bind(c, s, b->name, b->loc);
    nb->kind = B_BLOCK;
    nb->block = b;
    nb->def_scope = s;
}
