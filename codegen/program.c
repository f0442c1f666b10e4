/*
 * program.c: building a cg_program, the program as data (codegen.h).
 *
 * Blocks of statements, calls with their arguments and variables, all in
 * the compilation's arena. lower.c and op_calls.c build with these; the
 * writers only read.
 */
#include "codegen.h"

#include <string.h>

cg_stmt *cg_add(arena *a, cg_block *b, cg_stmt_kind kind, int op, const char *comment)
{
    arena_grow(a, (void **)&b->s, &b->cap, b->n + 1, sizeof *b->s);
    cg_stmt *s = &b->s[b->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->op = op;
    s->comment = comment;
    s->var = s->src = s->seg = s->set = -1;
    return s;
}

static void set_call(arena *a, cg_call *c, const char *fn, const cg_arg *args, int nargs)
{
    c->fn = fn;
    c->nargs = nargs;
    c->args = arena_alloc(a, sizeof *c->args * (size_t)(nargs ? nargs : 1));
    if (nargs)
        memcpy(c->args, args, sizeof *c->args * (size_t)nargs);
}

cg_stmt *cg_add_call(arena *a, cg_block *b, int op, const char *fn, const cg_arg *args, int nargs)
{
    cg_stmt *s = cg_add(a, b, CS_CALL, op, NULL);
    set_call(a, &s->call, fn, args, nargs);
    return s;
}

const cg_call *cg_call_value(arena *a, const char *fn, const cg_arg *args, int nargs)
{
    cg_call *c = arena_alloc(a, sizeof *c);
    set_call(a, c, fn, args, nargs);
    return c;
}

int cg_var_add(arena *a, cg_program *p, const cg_var *v)
{
    arena_grow(a, (void **)&p->vars, &p->vars_cap, p->nvars + 1, sizeof *p->vars);
    p->vars[p->nvars] = *v;
    return p->nvars++;
}
