/*
 * dump.c: `burstc --emit=ast`, the syntax trees of a program as text.
 *
 * One line per node, indented by depth, with the node's line:col, in the
 * order the files were read (imports first). Expressions print in a fully
 * parenthesised form so that precedence is visible. This is a debugging
 * view of what the parser built, before any checking or expansion.
 */
#include "frontend.h"

#include <stdlib.h>

static void fe_dump_expr(FILE *out, const fe_expr *e)
{
    switch (e->kind) {
    case EX_INT: fprintf(out, "%lld", (long long)e->i); break;
    case EX_REAL: fprintf(out, "%g", e->r); break;
    case EX_QTY: fprintf(out, "%g %s", e->r, e->unit); break;
    case EX_STR: fprintf(out, "\"%s\"", e->s); break;
    case EX_BOOL: fputs(e->i ? "true" : "false", out); break;
    case EX_NAME: fputs(e->s, out); break;
    case EX_NEG:
        fputs("(-", out);
        fe_dump_expr(out, e->lhs);
        fputc(')', out);
        break;
    case EX_BINARY: {
        /* ((a + b) + c): the left spine in a loop, as fe_eval walks it. */
        int n = 0;
        const fe_expr *x = e;
        for (; x->kind == EX_BINARY; x = x->lhs)
            n++;
        const fe_expr **spine = malloc(sizeof *spine * (size_t)n);
        if (!spine)
            out_of_memory(sizeof *spine * (size_t)n);
        x = e;
        for (int k = n - 1; k >= 0; k--, x = x->lhs) {
            spine[k] = x;
            fputc('(', out);
        }
        fe_dump_expr(out, x);
        for (int k = 0; k < n; k++) {
            fprintf(out, " %c ", spine[k]->op);
            fe_dump_expr(out, spine[k]->rhs);
            fputc(')', out);
        }
        free(spine);
        break;
    }
    case EX_ERROR: fputs("<error>", out); break;
    case EX_CALL:
        fprintf(out, "%s(", e->s);
        for (const fe_arg *a = e->args; a; a = a->next) {
            if (a != e->args)
                fputs(", ", out);
            if (a->key)
                fprintf(out, "%s = ", a->key);
            fe_dump_expr(out, a->value);
        }
        fputc(')', out);
        break;
    case EX_LIST:
        fputc('[', out);
        for (const fe_expr *i = e->items; i; i = i->next) {
            if (i != e->items)
                fputs(", ", out);
            fe_dump_expr(out, i);
        }
        fputc(']', out);
        break;
    }
}

static void fe_indent(FILE *out, int depth, src_loc loc)
{
    fprintf(out, "%*s%d:%d ", 2 * depth, "", loc.line, loc.col);
}

static void fe_dump_stmts(FILE *out, const fe_stmt *s, int depth);

static void fe_dump_block(FILE *out, const fe_block *b, int depth)
{
    fe_indent(out, depth, b->loc);
    fprintf(out, "block %s", b->name);
    if (!b->has_inputs)
        fputs(" input in", out);
    for (const fe_param *p = b->params; p; p = p->next) {
        fprintf(out, p->is_input ? " input %s" : " param %s", p->name);
        if (p->dflt) {
            fputs(" = ", out);
            fe_dump_expr(out, p->dflt);
        }
    }
    fputc('\n', out);
    fe_dump_stmts(out, b->body, depth + 1);
}

static void fe_dump_stmts(FILE *out, const fe_stmt *s, int depth)
{
    for (; s; s = s->next) {
        if (s->kind == ST_BLOCK) {
            fe_dump_block(out, s->block, depth);
            continue;
        }
        fe_indent(out, depth, s->loc);
        switch (s->kind) {
        case ST_INPUT:
            fprintf(out, "input %s : %s[", s->name, s->elem);
            for (const fe_expr *d = s->dims; d; d = d->next) {
                if (d != s->dims)
                    fputs(", ", out);
                fe_dump_expr(out, d);
            }
            fputs("]\n", out);
            break;
        case ST_LET:
            fprintf(out, "let %s = ", s->name);
            fe_dump_expr(out, s->value);
            fputc('\n', out);
            break;
        case ST_ASSIGN:
            fprintf(out, "assign %s = ", s->name);
            if (s->value)
                fe_dump_expr(out, s->value);
            else
                fputs("<syntax error>", out);
            fputc('\n', out);
            break;
        case ST_FOR:
            fprintf(out, "for %s in ", s->name);
            fe_dump_expr(out, s->lo);
            fputs(" .. ", out);
            fe_dump_expr(out, s->hi);
            fputc('\n', out);
            fe_dump_stmts(out, s->body, depth + 1);
            break;
        case ST_RETURN:
            fputs("return ", out);
            fe_dump_expr(out, s->value);
            fputc('\n', out);
            break;
        case ST_WEIGHTS:
            fputs("weights\n", out);
            for (const fe_wmap *w = s->wmaps; w; w = w->next) {
                fe_indent(out, depth + 1, w->loc);
                fprintf(out, "\"%s\" = \"%s\"\n", w->source, w->target);
            }
            break;
        case ST_BLOCK: break;
        }
    }
}

static const char *const fe_item_names[] = {
    [IT_IMPORT] = "import", [IT_MODEL] = "model", [IT_GPU] = "gpu", [IT_CLUSTER] = "cluster",
    [IT_JOB] = "job",       [IT_BLOCK] = "block", [IT_LET] = "let",
};

void fe_dump_program(FILE *out, const fe_program *p)
{
    for (int i = 0; i < p->nfiles; i++) {
        const fe_file *f = p->files[i];
        fprintf(out, "file \"%s\"\n", f->src->path);
        for (const fe_item *it = f->items; it; it = it->next) {
            switch (it->kind) {
            case IT_BLOCK: fe_dump_block(out, it->block, 1); break;
            case IT_IMPORT:
                fe_indent(out, 1, it->loc);
                fprintf(out, "import \"%s\"%s\n", it->path, it->imported ? "" : " (already read)");
                break;
            case IT_LET:
                fe_indent(out, 1, it->loc);
                fprintf(out, "let %s = ", it->name);
                fe_dump_expr(out, it->value);
                fputc('\n', out);
                break;
            case IT_MODEL:
                fe_indent(out, 1, it->loc);
                fprintf(out, "model %s\n", it->name);
                fe_dump_stmts(out, it->body, 2);
                break;
            case IT_GPU:
            case IT_CLUSTER:
            case IT_JOB:
                fe_indent(out, 1, it->loc);
                fprintf(out, "%s %s\n", fe_item_names[it->kind], it->name);
                for (const fe_field *fl = it->fields; fl; fl = fl->next) {
                    fe_indent(out, 2, fl->loc);
                    fprintf(out, fl->sub ? "%s %s = " : "%s%s = ", fl->key, fl->sub ? fl->sub : "");
                    fe_dump_expr(out, fl->value);
                    fputc('\n', out);
                }
                break;
            }
        }
    }
}

bool fe_dump_ast(FILE *out, arena *a, const char *path, diag_ctx *d)
{
    fe_program *p = fe_load(a, path, NULL, d);
    if (p)
        fe_dump_program(out, p);
    return p && d->nerrors == 0;
}
