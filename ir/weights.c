/*
 * weights.c: a model's weights table, the names its parameters have outside.
 *
 * A model imported from PyTorch keeps the names its tensors had there (the
 * state_dict keys, `layer1.0.conv1.weight`) beside Burst's own (`conv1.weight`,
 * `<layer>.<param>`): the front end lowers a model's `weights { ... }` section
 * (docs/language.md, "Weights") and the reader a graph's `weight` lines
 * (docs/ir.md) into this table, and codegen gives it to the program, whose
 * --init and --save-weights read and write files under those names. A target
 * is written as safetensors metadata writes one: `layer.param`,
 * `layer.param@R` (the tensor fills the parameter's rows from R on),
 * `...^T` (it is the parameter's 2-d transpose).
 */
#include "ir.h"
#include "../runtime/weight_target.h"

#include <stdlib.h>
#include <string.h>

bool ir_weight_name_ok(const char *s)
{
    for (; *s; s++)
        if (*s < 32 || *s > 126 || *s == '"' || *s == '\\')
            return false;
    return true;
}

/* "attn.w_qkv@16^T" -> layer "attn", param "w_qkv", row 16, transposed, as the runtime
 * reads it (weight_target.h); the layer is empty when the target has no '.' (reported by
 * the check). */
static void split_target(arena *a, const char *t, ir_weight *w)
{
    size_t n = st_parse_target(t, &w->row0, &w->transposed);
    size_t dot = n;
    while (dot > 0 && t[dot - 1] != '.')
        dot--;
    w->layer = dot ? arena_strndup(a, t, dot - 1) : "";
    w->param = arena_strndup(a, t + dot, n - dot);
}

void ir_weight_add(ir_module *m, ir_graph *g, const char *source, const char *target, src_loc loc,
                   src_loc target_loc)
{
    arena_grow(m->arena, (void **)&g->weights, &g->weights_cap, g->nweights + 1,
               sizeof *g->weights);
    ir_weight *w = &g->weights[g->nweights++];
    memset(w, 0, sizeof *w);
    w->source = arena_strdup(m->arena, source);
    w->target = arena_strdup(m->arena, target);
    w->loc = loc;
    w->target_loc = target_loc;
    split_target(m->arena, w->target, w);
}

/* The parameter w names, into p; false with the error reported. */
static bool resolve(const ir_graph *g, const ir_weight *w, diag_ctx *d, ir_param *p)
{
    int id = *w->layer && *w->param ? ir_op_find(g, w->layer) : -1;
    if (!*w->layer || !*w->param) {
        diag_error(d, w->target_loc,
                   "weights: target '%s' is not 'layer.param' (with '@ROW' or '^T' after it)",
                   w->target);
        return false;
    }
    if (id < 0) {
        diag_error(d, w->target_loc, "weights: '%s' names no layer of model '%s'", w->target,
                   g->name);
        return false;
    }
    const ir_op *op = &g->ops[id];
    ir_param ps[IR_MAX_OP_PARAMS];
    int n = ir_op_param_list(g, op, ps);
    bool stats = false;
    for (int k = 0; k < n; k++) {
        stats |= !strcmp(ps[k].name, "running_mean");
        if (!strcmp(ps[k].name, w->param)) {
            *p = ps[k];
            return true;
        }
    }
    /* torch's third BatchNorm buffer, a count the program keeps beside it */
    if (stats && !strcmp(w->param, "num_batches_tracked")) {
        if (w->row0 >= 0 || w->transposed) {
            diag_error(d, w->target_loc, "weights: '%s': a batch count takes no '@ROW' or '^T'",
                       w->target);
            return false;
        }
        *p = (ir_param){.name = "num_batches_tracked", .ndim = 0, .buffer = true};
        return true;
    }
    char list[512] = "";
    size_t o = 0;
    for (int k = 0; k < n && o < sizeof list; k++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", k ? ", " : "", ps[k].name);
    if (n)
        diag_error(d, w->target_loc,
                   "weights: layer '%s' (%s) has no parameter '%s'; its parameters are %s",
                   op->name, ir_op_info_of(op->opcode)->name, w->param, list);
    else
        diag_error(d, w->target_loc, "weights: layer '%s' (%s) has no parameters", op->name,
                   ir_op_info_of(op->opcode)->name);
    return false;
}

bool ir_weights_check(const ir_graph *g, diag_ctx *d)
{
    bool ok = true;
    arena *a = arena_new();
    ir_names sources = {0}, targets = {0};
    for (int i = 0; i < g->nweights; i++) {
        const ir_weight *w = &g->weights[i];
        if (!*w->source || !ir_weight_name_ok(w->source)) {
            diag_error(d, w->loc, "weights: a tensor name must be printable and not empty");
            ok = false;
        } else if (ir_names_get(&sources, w->source) >= 0) {
            diag_error(d, w->loc, "weights: tensor '%s' is mapped twice", w->source);
            diag_note(d, g->weights[ir_names_get(&sources, w->source)].loc, "'%s' was mapped here",
                      w->source);
            ok = false;
        } else {
            ir_names_set(a, &sources, w->source, i);
        }
        ir_param p;
        if (!resolve(g, w, d, &p)) {
            ok = false;
            continue;
        }
        if (w->transposed && p.ndim != 2) {
            diag_error(d, w->target_loc,
                       "weights: '%s': parameter '%s.%s' has %d dimensions; '^T' is for a 2-d one",
                       w->target, w->layer, w->param, p.ndim);
            ok = false;
            continue;
        }
        if (w->row0 >= 0 && (p.ndim < 1 || w->row0 >= p.dim[0])) {
            diag_error(d, w->target_loc, "weights: '%s': parameter '%s.%s' has %lld rows",
                       w->target, w->layer, w->param, (long long)(p.ndim ? p.dim[0] : 0));
            ok = false;
            continue;
        }
        /* One tensor per first row of a parameter. A whole parameter may have several
         * names (a tied weight: `"lm_head.weight" = "wte.weight"` beside wte's own). */
        const char *key = arena_printf(a, "%s.%s@%lld", w->layer, w->param, (long long)w->row0);
        int first = ir_names_get(&targets, key);
        bool alias = first >= 0 && w->row0 < 0 && !p.buffer;
        if (first >= 0 && !alias) {
            diag_error(d, w->target_loc, "weights: '%s' is the target of '%s' and of '%s'",
                       w->target, g->weights[first].source, w->source);
            diag_note(d, g->weights[first].target_loc, "'%s' is mapped to it here",
                      g->weights[first].source);
            ok = false;
            continue;
        }
        if (first < 0)
            ir_names_set(a, &targets, key, i);
    }
    arena_free(a);
    return ok;
}
