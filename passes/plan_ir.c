/*
 * plan_ir.c: the planner's bridge to the IR, and pass "plan".
 *
 * pass_plan_build() turns a job of an ir_module into a plan_problem: one
 * layer per op (inputs excepted) with the op's per-sample costs (ir_op_cost),
 * one edge per data dependency, the cluster and GPU of the job, and measured
 * times from a --profile table for the ops it covers. Pass "plan" runs the
 * planner and writes every op's rank set; pass "comm" (comm.c) then makes
 * the communication that those rank sets imply explicit. Both run after
 * "verify" in pipeline.c.
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "plan.h"

static void pair_json(char *buf, size_t n, const int64_t *v)
{
    if (v[0] == v[1])
        snprintf(buf, n, "%lld", (long long)v[0]);
    else
        snprintf(buf, n, "[%lld,%lld]", (long long)v[0], (long long)v[1]);
}

/* The DeepPool profile names and attributes of an op; false for ops the
 * profiles do not describe (or shapes they cannot express). */
static bool profile_key(const ir_graph *g, const ir_op *op, const char **name, char *attrs,
                        size_t n, int64_t *shape, int *nshape)
{
    const ir_type *in = op->ninputs ? &g->ops[op->inputs[0]].type : NULL;
    if (!in)
        return false;
    *nshape = in->rank - 1;
    for (int i = 1; i < in->rank; i++)
        shape[i - 1] = in->dim[i];
    attrs[0] = 0;
    switch (op->opcode) {
    case OP_CONV2D: {
        const ir_attrs_conv2d *a = ir_conv2d_attrs(op);
        const int64_t *k = a->kernel, *s = a->stride, *p = a->pad, *d = a->dilation;
        if (d[0] != 1 || d[1] != 1 || a->groups != 1)
            return false;
        char ks[48], ps[48], ss[48];
        pair_json(ks, sizeof ks, k);
        pair_json(ps, sizeof ps, p);
        pair_json(ss, sizeof ss, s);
        *name = "conv2d";
        snprintf(
            attrs, n,
            "{\"in_channels\":%lld,\"kernel_size\":%s,\"out_channels\":%lld,\"padding\":%s,\"stride\":%s}",
            (long long)in->dim[1], ks, (long long)a->channels, ps, ss);
        return true;
    }
    case OP_MAXPOOL2D:
    case OP_AVGPOOL2D: {
        bool max = op->opcode == OP_MAXPOOL2D;
        const int64_t *k = max ? ir_maxpool2d_attrs(op)->kernel : ir_avgpool2d_attrs(op)->kernel,
                      *s = max ? ir_maxpool2d_attrs(op)->stride : ir_avgpool2d_attrs(op)->stride,
                      *p = max ? ir_maxpool2d_attrs(op)->pad : ir_avgpool2d_attrs(op)->pad;
        if (k[0] != k[1] || s[0] != s[1] || p[0] != p[1])
            return false;
        *name = max ? "maxPool2d" : "avgPool2d";
        snprintf(attrs, n, "{\"kernel_size\":%lld,\"padding\":%lld,\"stride\":%lld}",
                 (long long)k[0], (long long)p[0], (long long)(s[0] ? s[0] : k[0]));
        return true;
    }
    case OP_LINEAR:
        if (in->rank != 2)
            return false;
        *name = "linear";
        snprintf(attrs, n, "{\"bias\":%s,\"in_features\":%lld,\"out_features\":%lld}",
                 ir_linear_attrs(op)->bias ? "true" : "false", (long long)in->dim[1],
                 (long long)ir_linear_attrs(op)->out);
        return true;
    case OP_GLOBALAVGPOOL:
        *name = "adAvgPool2d";
        snprintf(attrs, n, "{\"output_height\":1,\"output_width\":1}");
        return true;
    case OP_FLATTEN:
        *name = "flatten";
        snprintf(attrs, n, "{\"kernel_size\":1}");
        return true;
    default: return false;
    }
}

const plan_timing *pass_plan_profile_match(const plan_profile *pr, const ir_graph *g,
                                           const ir_op *op)
{
    const char *name;
    char attrs[512];
    int64_t shape[IR_MAX_RANK];
    int nshape;
    if (!pr || !profile_key(g, op, &name, attrs, sizeof attrs, shape, &nshape))
        return NULL;
    const plan_profile_entry *e = plan_profile_find(pr, name, attrs, shape, nshape);
    return e ? &e->timing : NULL;
}

/* The per-sample shape of op's first input as a profile writes it: "[1,28,28]". */
static void shape_text(char *buf, size_t n, const int64_t *dims, int ndims)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndims && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* A `layer` line (burstc profile) names a layer of this model: it must be
 * the same op on the same input shape, else the profile is of another model
 * (or of an older version of this one). */
static bool layer_line_fits(const plan_profile *pr, const plan_profile_entry *le, const ir_graph *g,
                            const ir_op *op, diag_ctx *d)
{
    const char *opname = ir_op_info_of(op->opcode)->name;
    const ir_type *in = op->ninputs ? &g->ops[op->inputs[0]].type : NULL;
    int nshape = in ? in->rank - 1 : 0;
    bool same = strcmp(le->layer_op, opname) == 0 && le->nshape == nshape &&
                (nshape == 0 || memcmp(le->shape, in->dim + 1, sizeof(int64_t) * nshape) == 0);
    if (same)
        return true;
    char want[160], got[160];
    shape_text(want, sizeof want, nshape > 0 ? in->dim + 1 : NULL, nshape);
    shape_text(got, sizeof got, le->shape, le->nshape);
    fprintf(d->out,
            "%s:%d: error: layer '%s' is %s on %s in the profile but %s on %s in model '%s' "
            "(a profile of another model?)\n",
            pr->path ? pr->path : "profile", le->line, le->layer, le->layer_op, got, opname, want,
            g->name);
    d->nerrors++;
    return false;
}

/* Every `layer` line must name a layer of the model: the first that does
 * not is reported (with how many others do not either). */
static bool profile_layers_known(const plan_profile *pr, const ir_graph *g, diag_ctx *d)
{
    const plan_profile_entry *first = NULL;
    int unknown = 0;
    for (int i = 0; i < pr->n; i++) {
        const plan_profile_entry *e = &pr->e[i];
        if (!e->layer)
            continue;
        if (ir_op_find(g, e->layer) >= 0)
            continue;
        if (!first)
            first = e;
        unknown++;
    }
    if (!first)
        return true;
    char more[64] = "";
    if (unknown > 1)
        snprintf(more, sizeof more, " (and %d more)", unknown - 1);
    fprintf(d->out,
            "%s:%d: error: layer '%s'%s of the profile is not a layer of model '%s' (a profile "
            "of another model?)\n",
            pr->path ? pr->path : "profile", first->line, first->layer, more, g->name);
    d->nerrors++;
    return false;
}

/* The measured inputs: an input's data arrive where the layer that consumes
 * it first runs (pass_plan_apply puts the input there), before its forward. */
static bool profile_inputs(pass_plan_input *in, const ir_graph *g, diag_ctx *d)
{
    plan_problem *p = &in->p;
    /* charged[x]: input x has found its first consumer (ops are in order) */
    bool *charged = plan_xcalloc((size_t)g->nops + 1, sizeof *charged);
    bool ok = true;
    for (int l = 0; l < p->nlayers && ok; l++) {
        const ir_op *op = &g->ops[in->op_of_layer[l]];
        p->layers[l].data_first = in->ndata;
        p->layers[l].ndata = 0;
        for (int q = 0; q < op->ninputs && ok; q++) {
            int x = op->inputs[q];
            const ir_op *xo = &g->ops[x];
            if (xo->opcode != OP_INPUT || charged[x])
                continue;
            charged[x] = true;
            const plan_profile_entry *le = plan_profile_find_layer(&in->prof, xo->name);
            if (!le)
                continue;
            if (!(ok = layer_line_fits(&in->prof, le, g, xo, d)))
                break;
            if (!p->data)
                p->data = plan_xcalloc((size_t)g->nops, sizeof *p->data);
            p->data[in->ndata++] = &le->timing;
            p->layers[l].ndata++;
        }
    }
    free(charged);
    return ok;
}

/* The measured optimizer's update: its lines must be of the job's optimizer. */
static bool profile_optimizer(pass_plan_input *in, const ir_job *j, diag_ctx *d)
{
    const char *want = j->optimizer == OPT_ADAM ? "adam" : "sgd";
    const plan_profile_entry *seen = NULL;
    for (int i = 0; i < in->prof.n; i++) {
        const plan_profile_entry *e = &in->prof.e[i];
        int64_t params;
        if (strcmp(e->op, "optimizer") != 0 || !plan_profile_attr(e, "params", &params))
            continue;
        const char *op = e->layer_op;
        if (strcmp(op, want) != 0) {
            fprintf(d->out,
                    "%s:%d: error: the profile measured the optimizer %s, but job '%s' trains "
                    "with %s (a profile of another job?)\n",
                    in->prof.path ? in->prof.path : "profile", e->line, op, j->name, want);
            d->nerrors++;
            return false;
        }
        if (seen) {
            fprintf(d->out,
                    "%s:%d: error: the optimizer updates another number of parameters here "
                    "than on line %d\n",
                    in->prof.path ? in->prof.path : "profile", e->line, seen->line);
            d->nerrors++;
            return false;
        }
        seen = e;
        in->p.update = &e->timing;
        in->p.update_params = (double)params;
    }
    return true;
}

void pass_plan_profile_summary(const pass_plan_input *in, const char *path, FILE *out)
{
    fprintf(out, "profile %s: measured times for %d of %d layers", path, in->nmeasured,
            in->p.nlayers);
    if (in->ndata)
        fprintf(out, ", %d input%s", in->ndata, in->ndata == 1 ? "" : "s");
    if (in->p.update)
        fputs(", the optimizer's update", out);
    fputs("\n\n", out);
}

void pass_plan_input_free(pass_plan_input *in)
{
    free(in->p.layers);
    free(in->p.edges);
    free(in->op_of_layer);
    free(in->layer_of_op);
    free(in->p.data);
    plan_profile_free(&in->prof);
    memset(in, 0, sizeof *in);
}

bool pass_plan_build(ir_module *m, int job, const pass_options *opt, pass_plan_input *in,
                     diag_ctx *d)
{
    memset(in, 0, sizeof *in);
    const ir_job *j = &m->jobs[job];
    const ir_cluster *cl = &m->clusters[j->cluster];
    const ir_gpu *gpu = &m->gpus[cl->gpu];
    ir_graph *g = m->graphs[j->graph];
    in->graph = j->graph;
    plan_problem *p = &in->p;
    p->cluster.gpus = cl->nodes * cl->gpus_per_node;
    p->cluster.gpus_per_node = cl->gpus_per_node;
    p->cluster.intra_alpha = cl->intra.latency;
    p->cluster.intra_bw = cl->intra.bandwidth;
    p->cluster.inter_alpha = cl->inter.latency;
    p->cluster.inter_bw = cl->inter.bandwidth;
    p->cluster.peak_flops = gpu->flops[j->dtype];
    p->cluster.mem_bw = gpu->mem_bandwidth;
    p->cluster.mem_bytes = gpu->mem_bytes;
    p->cluster.launch = gpu->launch;
    p->cluster.umax = gpu->efficiency;
    p->cluster.whalf = gpu->half_work;
    p->cluster.cores = cl->cores;
    p->cluster.slice = cl->has_slice ? cl->slice : PLAN_SLICE_DEFAULT;
    p->cluster.sync_gather = pass_gpu_is_cpu(gpu);
    static const plan_class cls_of[KC_COUNT] = {
        [KC_CONV] = PC_CONV, [KC_GEMM] = PC_LINEAR, [KC_POOL] = PC_POOL, [KC_OTHER] = PC_OTHER};
    for (int k = 0; k < KC_COUNT; k++) {
        p->cluster.cls_umax[cls_of[k]] = gpu->cls[k].efficiency;
        p->cluster.cls_whalf[cls_of[k]] = gpu->cls[k].half_work;
        p->cluster.cls_bw[cls_of[k]] = gpu->cls[k].bandwidth;
    }
    if (p->cluster.peak_flops <= 0) {
        diag_error(d, j->loc, "GPU '%s' has no FLOP rate for dtype %s", gpu->name,
                   ir_dtype_name(j->dtype));
        return false;
    }
    if (p->cluster.gpus > p->cluster.gpus_per_node && !(p->cluster.inter_bw > 0)) {
        diag_error(
            d, j->loc,
            "planning for %d GPUs needs %d nodes, but cluster '%s' has no network between nodes",
            p->cluster.gpus,
            (p->cluster.gpus + p->cluster.gpus_per_node - 1) / p->cluster.gpus_per_node, cl->name);
        return false;
    }
    if (!(p->cluster.intra_bw > 0) && p->cluster.gpus_per_node > 1) {
        diag_error(d, j->loc, "cluster '%s' has no link between the GPUs of a node", cl->name);
        return false;
    }
    p->batch = j->batch;
    p->dtype_bytes = ir_dtype_size(j->dtype);
    p->optimizer_states = j->optimizer == OPT_ADAM ? 2 : j->momentum > 0 ? 1 : 0;
    p->amp_limit = j->amplification > 0 ? j->amplification : 0; /* auto: no limit here */
    p->ar_overlap = opt && opt->overlap_allreduce;
    if (opt && opt->profile && !plan_profile_read(&in->prof, opt->profile, d->out)) {
        d->nerrors++;
        return false;
    }
    in->layer_of_op = plan_xcalloc((size_t)g->nops, sizeof(int));
    in->op_of_layer = plan_xcalloc((size_t)g->nops, sizeof(int));
    p->layers = plan_xcalloc((size_t)g->nops, sizeof(plan_layer));
    int n = 0;
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        if (ir_op_class_of(op) == OC_INPUT) {
            in->layer_of_op[i] = -1;
            continue;
        }
        in->layer_of_op[i] = n;
        in->op_of_layer[n] = i;
        pass_plan_layer(g, op, &p->layers[n]);
        if (op->opcode == OP_LINEAR && ir_linear_attrs(op)->tie >= 0)
            p->layers[n].ties_to = 1 + in->layer_of_op[ir_linear_attrs(op)->tie];
        if (in->prof.n) {
            const plan_profile_entry *le = plan_profile_find_layer(&in->prof, op->name);
            if (le && !layer_line_fits(&in->prof, le, g, op, d))
                return false;
            p->layers[n].measured = le ? &le->timing : pass_plan_profile_match(&in->prof, g, op);
            if (p->layers[n].measured)
                in->nmeasured++;
        }
        n++;
    }
    p->nlayers = n;
    if (!profile_layers_known(&in->prof, g, d) || !profile_inputs(in, g, d) ||
        !profile_optimizer(in, j, d))
        return false;
    int ne = 0, cap = 0;
    for (int i = 0; i < g->nops; i++)
        cap += g->ops[i].ninputs;
    p->edges = plan_xcalloc((size_t)cap, sizeof(plan_edge));
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        int v = in->layer_of_op[i], first_of_op = ne;
        if (v < 0)
            continue;
        for (int q = 0; q < op->ninputs; q++) {
            int u = in->layer_of_op[op->inputs[q]];
            if (u < 0)
                continue;
            double elems = (double)ir_type_elems_per_sample(&g->ops[op->inputs[q]].type);
            int e = first_of_op;
            while (e < ne && p->edges[e].from != u)
                e++;
            if (e < ne)
                continue; /* the same value twice: one transfer */
            p->edges[ne++] = (plan_edge){u, v, elems};
        }
    }
    p->nedges = ne;
    return true;
}

static plan_strategy strategy_of(const pass_options *opt)
{
    plan_strategy s = PS_BURST;
    if (opt && opt->strategy)
        plan_strategy_lookup(opt->strategy, &s);
    return s;
}

void pass_plan_apply(ir_module *m, const pass_plan_input *in, const plan_result *r)
{
    ir_graph *g = m->graphs[in->graph];
    for (int l = 0; l < r->nlayers; l++) {
        ir_op *op = &g->ops[in->op_of_layer[l]];
        op->plan.nranks = r->layer[l].k;
        op->plan.ranks = arena_alloc(m->arena, sizeof(int) * (size_t)r->layer[l].k);
        for (int i = 0; i < r->layer[l].k; i++)
            op->plan.ranks[i] = r->layer[l].first + i;
    }
    /* An input lives where its first consumer runs (that is where the data
	 * loader puts it). */
    for (int i = 0; i < g->nops; i++) {
        if (g->ops[i].opcode != OP_INPUT)
            continue;
        for (int c = i + 1; c < g->nops; c++) {
            const ir_op *u = &g->ops[c];
            bool uses = false;
            for (int q = 0; q < u->ninputs; q++)
                uses |= u->inputs[q] == i;
            if (uses && u->plan.nranks) {
                g->ops[i].plan = u->plan;
                break;
            }
        }
    }
}

/* A graph read back from a planned dump keeps its plan: every op already
 * has ranks (or communication was made explicit). */
static bool already_planned(const ir_graph *g)
{
    bool all = g->nops > 0;
    for (int i = 0; i < g->nops; i++) {
        if (ir_op_class_of(&g->ops[i]) == OC_COMM)
            return true;
        if (ir_op_class_of(&g->ops[i]) != OC_INPUT && g->ops[i].plan.nranks == 0)
            all = false;
    }
    return all;
}

ir_graph *pass_plan_strip_comm(ir_module *m, const ir_graph *g)
{
    ir_graph *ng = arena_alloc(m->arena, sizeof *ng);
    ng->name = g->name;
    ng->loc = g->loc;
    ng->nweights = ng->weights_cap = g->nweights;
    ng->weights = g->weights;
    int *map = arena_alloc(m->arena, sizeof(int) * (size_t)(g->nops ? g->nops : 1));
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        if (op->opcode == OP_RESHARD || op->opcode == OP_ALLREDUCE) {
            map[i] = op->ninputs ? map[op->inputs[0]] : -1;
            continue;
        }
        int *ins = arena_alloc(m->arena, sizeof(int) * (size_t)(op->ninputs + 1));
        for (int q = 0; q < op->ninputs; q++)
            ins[q] = map[op->inputs[q]];
        int id = ir_op_add(m, ng, op->opcode, op->name, ins, op->ninputs, NULL, 0, op->loc);
        ir_op *nop = &ng->ops[id];
        nop->a = op->a;
        ir_op_map_refs(nop, map);
        nop->type = op->type;
        nop->plan = op->plan;
        map[i] = id;
    }
    return ng;
}

bool pass_plan_placed(ir_module *m, int job, const pass_options *opt, pass_plan_input *in,
                      plan_result *res, diag_ctx *d)
{
    memset(res, 0, sizeof *res);
    const ir_job *j = &m->jobs[job];
    ir_graph *orig = m->graphs[j->graph];
    m->graphs[j->graph] = pass_plan_strip_comm(m, orig);
    bool ok = pass_plan_build(m, job, opt, in, d);
    const ir_graph *g = m->graphs[j->graph];
    int n = in->p.nlayers;
    int *k = plan_xcalloc((size_t)n + 1, sizeof(int)),
        *first = plan_xcalloc((size_t)n + 1, sizeof(int));
    for (int l = 0; l < n && ok; l++) {
        const ir_op *op = &g->ops[in->op_of_layer[l]];
        k[l] = op->plan.nranks;
        first[l] = k[l] ? op->plan.ranks[0] : 0;
        if (k[l] == 0) {
            diag_error(d, op->loc, "'%s' has no ranks: the job is not planned", op->name);
            ok = false;
        }
        for (int i = 1; ok && i < k[l]; i++)
            if (op->plan.ranks[i] != first[l] + i) {
                diag_error(d, op->loc,
                           "'%s' runs on ranks that are not a contiguous range; the cost model "
                           "prices ranges (first .. first + k - 1) only",
                           op->name);
                ok = false;
            }
    }
    char err[512];
    if (ok && !plan_evaluate(&in->p, k, first, res, err, sizeof err)) {
        diag_error(d, j->loc, "%s", err);
        ok = false;
    }
    free(k);
    free(first);
    m->graphs[j->graph] = orig;
    if (!ok)
        memset(res, 0, sizeof *res);
    return ok;
}

bool pass_plan(pass_ctx *ctx)
{
    if (already_planned(ctx->m->graphs[ctx->m->jobs[ctx->job].graph]))
        return true;
    pass_plan_input in;
    if (!pass_plan_build(ctx->m, ctx->job, ctx->opt, &in, ctx->d)) {
        pass_plan_input_free(&in);
        return false;
    }
    plan_result r;
    char err[512];
    const ir_job *j = &ctx->m->jobs[ctx->job];
    if (j->amplification == IR_AMP_AUTO && j->nbackground > 0) {
        /* The plan with the highest predicted cluster throughput under the
         * job's one limit (docs/plan.md, "amplification = auto"). */
        pass_bg_jobs bg;
        plan_mux_options mo;
        pass_bg_jobs_build(ctx->m, j, &in.p, &bg);
        char why[640];
        bool ok = pass_mux_options(ctx->m, j, ctx->opt, &in.p, &mo, ctx->d) &&
                  plan_mux_auto(&in.p, strategy_of(ctx->opt), bg.jobs, bg.n, &mo, &r, NULL, why,
                                sizeof why, err, sizeof err);
        pass_bg_jobs_free(&bg);
        if (!ok) {
            if (err[0])
                diag_error(ctx->d, j->loc, "%s", err);
            pass_plan_input_free(&in);
            return false;
        }
    } else if (!plan_solve(&in.p, strategy_of(ctx->opt), &r, err, sizeof err)) {
        diag_error(ctx->d, ctx->m->jobs[ctx->job].loc, "%s", err);
        pass_plan_input_free(&in);
        return false;
    }
    pass_plan_apply(ctx->m, &in, &r);
    plan_result_free(&r);
    pass_plan_input_free(&in);
    return true;
}
