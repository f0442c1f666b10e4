/*
 * build.c: constructing IR modules.
 *
 * The front end's lowering and the IR reader both build modules through these
 * functions, so both get the same checks: ir_op_check() validates an op's
 * arity and attributes against ops.def, fills in defaults in canonical order
 * (which is what makes printed IR stable) and infers its result type.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

ir_module *ir_module_new(arena *a)
{
    ir_module *m = arena_alloc(a, sizeof *m);
    m->arena = a;
    return m;
}

ir_graph *ir_graph_add(ir_module *m, const char *name, src_loc loc)
{
    arena_grow(m->arena, (void **)&m->graphs, &m->graphs_cap, m->ngraphs + 1, sizeof *m->graphs);
    ir_graph *g = arena_alloc(m->arena, sizeof *g);
    g->name = arena_strdup(m->arena, name);
    g->loc = loc;
    if (ir_names_get(&m->graph_names, g->name) < 0)
        ir_names_set(m->arena, &m->graph_names, g->name, m->ngraphs);
    m->graphs[m->ngraphs++] = g;
    return g;
}

int ir_graph_find(const ir_module *m, const char *name)
{
    return ir_names_get(&m->graph_names, name);
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Adds op id to the name index, growing it to keep it at most half full.
 * With several ops of one name (only in invalid IR) the first stays found. */
static void index_add(arena *a, ir_graph *g, int id)
{
    if (2 * (g->nops + 1) > g->index_cap) {
        int cap = g->index_cap ? 2 * g->index_cap : 16;
        int *index = arena_alloc(a, sizeof(int) * (size_t)cap);
        memset(index, 0xff, sizeof(int) * (size_t)cap);
        g->index = index;
        g->index_cap = cap;
        for (int i = 0; i < id; i++) {
            uint32_t h = name_hash(g->ops[i].name) & (uint32_t)(cap - 1);
            while (index[h] >= 0 && strcmp(g->ops[index[h]].name, g->ops[i].name) != 0)
                h = (h + 1) & (uint32_t)(cap - 1);
            if (index[h] < 0)
                index[h] = i;
        }
    }
    uint32_t h = name_hash(g->ops[id].name) & (uint32_t)(g->index_cap - 1);
    while (g->index[h] >= 0) {
        if (strcmp(g->ops[g->index[h]].name, g->ops[id].name) == 0)
            return;
        h = (h + 1) & (uint32_t)(g->index_cap - 1);
    }
    g->index[h] = id;
}

int ir_op_add(ir_module *m, ir_graph *g, ir_opcode opcode, const char *name, const int *inputs,
              int ninputs, const ir_attr *attrs, int nattrs, src_loc loc)
{
    arena_grow(m->arena, (void **)&g->ops, &g->cap, g->nops + 1, sizeof *g->ops);
    ir_op *op = &g->ops[g->nops];
    memset(op, 0, sizeof *op);
    op->opcode = opcode;
    op->name = arena_strdup(m->arena, name);
    op->ninputs = ninputs;
    op->inputs = arena_alloc(m->arena, sizeof(int) * (size_t)(ninputs ? ninputs : 1));
    if (ninputs)
        memcpy(op->inputs, inputs, sizeof(int) * (size_t)ninputs);
    ir_attr *given = arena_alloc(m->arena, sizeof(ir_attr) * (size_t)(nattrs ? nattrs : 1));
    for (int i = 0; i < nattrs; i++) {
        given[i] = attrs[i];
        given[i].key = arena_strdup(m->arena, attrs[i].key);
        if (attrs[i].kind == AK_LIST) {
            int n = attrs[i].u.list.n;
            given[i].u.list.v = arena_alloc(m->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
            if (n)
                memcpy(given[i].u.list.v, attrs[i].u.list.v, sizeof(int64_t) * (size_t)n);
        }
    }
    op->given = given;
    op->ngiven = nattrs;
    op->loc = loc;
    index_add(m->arena, g, g->nops);
    return g->nops++;
}

int ir_op_find(const ir_graph *g, const char *name)
{
    if (!g->index_cap)
        return -1;
    uint32_t h = name_hash(name) & (uint32_t)(g->index_cap - 1);
    while (g->index[h] >= 0) {
        if (strcmp(g->ops[g->index[h]].name, name) == 0)
            return g->index[h];
        h = (h + 1) & (uint32_t)(g->index_cap - 1);
    }
    return -1;
}

/* Where attribute k of op's spec lives in op->a. */
static void *attr_slot(const ir_op *op, int k)
{
    const ir_op_info *info = ir_op_info_of(op->opcode);
    if (k < 0 || k >= info->nattrs)
        ice("%s has no attribute %d", info->name, k);
    return (char *)&op->a + info->attrs[k].offset;
}

ir_attr ir_attr_get(const ir_op *op, int k)
{
    const ir_attr_spec *sp = &ir_op_info_of(op->opcode)->attrs[k];
    const void *v = attr_slot(op, k);
    ir_attr a = {.key = sp->key, .kind = sp->kind};
    switch (sp->kind) {
    case AK_INT: a.u.i = *(const int64_t *)v; break;
    case AK_BOOL: a.u.i = *(const bool *)v; break;
    case AK_PAIR: memcpy(a.u.pair, v, sizeof a.u.pair); break;
    case AK_LIST: a.u.list = *(const ir_int_list *)v; break;
    case AK_REAL: a.u.real = *(const double *)v; break;
    case AK_REF: a.u.ref = *(const int *)v; break;
    }
    return a;
}

void ir_attr_set(ir_op *op, int k, const ir_attr *a)
{
    void *v = attr_slot(op, k);
    switch (ir_op_info_of(op->opcode)->attrs[k].kind) {
    case AK_INT: *(int64_t *)v = a->u.i; break;
    case AK_BOOL: *(bool *)v = a->u.i != 0; break;
    case AK_PAIR: memcpy(v, a->u.pair, sizeof a->u.pair); break;
    case AK_LIST: *(ir_int_list *)v = a->u.list; break;
    case AK_REAL: *(double *)v = a->u.real; break;
    case AK_REF: *(int *)v = a->u.ref; break;
    }
}

void ir_op_map_refs(ir_op *op, const int *map)
{
    const ir_op_info *info = ir_op_info_of(op->opcode);
    for (int k = 0; k < info->nattrs; k++)
        if (info->attrs[k].kind == AK_REF) {
            int *ref = attr_slot(op, k);
            if (*ref >= 0)
                *ref = map[*ref];
        }
}

static const char *kind_name(ir_attr_kind k)
{
    switch (k) {
    case AK_INT: return "an integer";
    case AK_PAIR: return "an integer or a pair [a, b]";
    case AK_LIST: return "a list of integers";
    case AK_REAL: return "a number";
    case AK_BOOL: return "0 or 1";
    case AK_REF: return "a layer name";
    }
    return "?";
}

/* Converts a given value to the kind the spec wants; false if it can't. */
static bool convert(ir_attr *out, const ir_attr *in, ir_attr_kind want)
{
    out->key = in->key;
    out->kind = want;
    switch (want) {
    case AK_INT:
        if (in->kind != AK_INT && in->kind != AK_BOOL)
            return false;
        out->u.i = in->u.i;
        return true;
    case AK_BOOL:
        if ((in->kind != AK_INT && in->kind != AK_BOOL) || (in->u.i != 0 && in->u.i != 1))
            return false;
        out->u.i = in->u.i;
        return true;
    case AK_PAIR:
        if (in->kind == AK_INT) {
            out->u.pair[0] = out->u.pair[1] = in->u.i;
            return true;
        }
        if (in->kind == AK_PAIR) {
            out->u.pair[0] = in->u.pair[0];
            out->u.pair[1] = in->u.pair[1];
            return true;
        }
        if (in->kind == AK_LIST && in->u.list.n == 2) {
            out->u.pair[0] = in->u.list.v[0];
            out->u.pair[1] = in->u.list.v[1];
            return true;
        }
        return false;
    case AK_LIST:
        if (in->kind == AK_LIST) {
            out->u.list = in->u.list;
            return true;
        }
        return false;
    case AK_REAL:
        if (in->kind == AK_REAL) {
            out->u.real = in->u.real;
            return true;
        }
        if (in->kind == AK_INT) {
            out->u.real = (double)in->u.i;
            return true;
        }
        return false;
    case AK_REF:
        if (in->kind != AK_REF)
            return false;
        out->u.ref = in->u.ref;
        return true;
    }
    return false;
}

bool ir_op_check(ir_module *m, ir_graph *g, int id, diag_ctx *d)
{
    ir_op *op = &g->ops[id];
    const ir_op_info *info = ir_op_info_of(op->opcode);
    bool ok = true;

    if (op->ninputs < info->min_inputs ||
        (info->max_inputs >= 0 && op->ninputs > info->max_inputs)) {
        if (info->min_inputs == info->max_inputs)
            diag_error(d, op->loc, "%s takes %d input%s, got %d", info->name, info->min_inputs,
                       info->min_inputs == 1 ? "" : "s", op->ninputs);
        else
            diag_error(d, op->loc, "%s takes at least %d input%s, got %d", info->name,
                       info->min_inputs, info->min_inputs == 1 ? "" : "s", op->ninputs);
        ok = false;
    }
    for (int i = 0; i < op->ninputs; i++)
        if (op->inputs[i] < 0 || op->inputs[i] >= id)
            ice("op %s uses input %d that does not precede it", op->name, op->inputs[i]);

    ir_attr *canon =
        arena_alloc(m->arena, sizeof(ir_attr) * (size_t)(info->nattrs ? info->nattrs : 1));
    bool *seen = arena_alloc(m->arena, (size_t)(info->nattrs + 1));
    for (int i = 0; i < op->ngiven; i++) {
        const ir_attr *a = &op->given[i];
        int s = 0;
        while (s < info->nattrs && strcmp(info->attrs[s].key, a->key) != 0)
            s++;
        if (s == info->nattrs) {
            if (info->nattrs == 0)
                diag_error(d, op->loc, "%s takes no attributes, got '%s'", info->name, a->key);
            else
                diag_error(d, op->loc, "unknown attribute '%s' for %s", a->key, info->name);
            ok = false;
            continue;
        }
        if (seen[s]) {
            diag_error(d, op->loc, "attribute '%s' given twice", a->key);
            ok = false;
            continue;
        }
        seen[s] = true;
        if (!convert(&canon[s], a, info->attrs[s].kind)) {
            diag_error(d, op->loc, "attribute '%s' of %s must be %s", a->key, info->name,
                       kind_name(info->attrs[s].kind));
            ok = false;
        }
        canon[s].key = info->attrs[s].key;
    }
    for (int s = 0; s < info->nattrs; s++) {
        if (seen[s])
            continue;
        const ir_attr_spec *sp = &info->attrs[s];
        if (!sp->dflt) {
            diag_error(d, op->loc, "missing attribute '%s' for %s", sp->key, info->name);
            ok = false;
            continue;
        }
        canon[s].key = sp->key;
        canon[s].kind = sp->kind;
        int from = 0;
        while (from < s && strcmp(info->attrs[from].key, sp->dflt) != 0)
            from++;
        if (from < s) {
            /* The default is an earlier attribute's value. */
            canon[s].u = canon[from].u;
            continue;
        }
        switch (sp->kind) {
        case AK_INT:
        case AK_BOOL: canon[s].u.i = strtoll(sp->dflt, NULL, 10); break;
        case AK_PAIR: canon[s].u.pair[0] = canon[s].u.pair[1] = strtoll(sp->dflt, NULL, 10); break;
        case AK_REAL: canon[s].u.real = strtod(sp->dflt, NULL); break;
        case AK_REF: canon[s].u.ref = -1; break;
        case AK_LIST:
            canon[s].u.list.n = 0;
            canon[s].u.list.v = NULL;
            break;
        }
    }
    if (!ok)
        return false;
    for (int s = 0; s < info->nattrs; s++) {
        if (canon[s].kind == AK_REF && canon[s].u.ref >= id)
            ice("op %s refers to a later op", op->name);
        ir_attr_set(op, s, &canon[s]);
    }
    op->given = NULL;
    op->ngiven = 0;
    if (op->opcode == OP_INPUT && op->type.rank < 1)
        ice("input %s has no type", op->name);
    return ir_infer(g, op, d); /* for an input: checks the declared type */
}

/* Records name -> id in t unless an earlier item has the name (lookups find
 * the first, as a walk in order would). */
static void index_name(arena *a, ir_names *t, const char *name, int id)
{
    if (ir_names_get(t, name) < 0)
        ir_names_set(a, t, name, id);
}

int ir_gpu_add(ir_module *m, const ir_gpu *gpu)
{
    arena_grow(m->arena, (void **)&m->gpus, &m->gpus_cap, m->ngpus + 1, sizeof *m->gpus);
    m->gpus[m->ngpus] = *gpu;
    index_name(m->arena, &m->gpu_names, gpu->name, m->ngpus);
    return m->ngpus++;
}

int ir_cluster_add(ir_module *m, const ir_cluster *c)
{
    arena_grow(m->arena, (void **)&m->clusters, &m->clusters_cap, m->nclusters + 1,
               sizeof *m->clusters);
    m->clusters[m->nclusters] = *c;
    index_name(m->arena, &m->cluster_names, c->name, m->nclusters);
    return m->nclusters++;
}

int ir_job_add(ir_module *m, const ir_job *j)
{
    arena_grow(m->arena, (void **)&m->jobs, &m->jobs_cap, m->njobs + 1, sizeof *m->jobs);
    m->jobs[m->njobs] = *j;
    index_name(m->arena, &m->job_names, j->name, m->njobs);
    return m->njobs++;
}

int ir_gpu_find(const ir_module *m, const char *name)
{
    return ir_names_get(&m->gpu_names, name);
}

int ir_cluster_find(const ir_module *m, const char *name)
{
    return ir_names_get(&m->cluster_names, name);
}

int ir_job_find(const ir_module *m, const char *name)
{
    return ir_names_get(&m->job_names, name);
}
