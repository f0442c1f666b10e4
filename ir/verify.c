/*
 * verify.c: structural checks of a whole module.
 *
 * Runs after the reader and, in debug builds, between passes: names are
 * unique, every operand (and every op an attribute names) precedes its user,
 * its recorded type is the one inference gives (and
 * within the limits of ir.h), plan rank sets are ascending and inside the
 * job's cluster, gpus and clusters are within the limits that the front end
 * and the reader enforce, and every job field keeps the job table's rules
 * (job.c), with the front end's messages. Once a graph's communication is explicit
 * (it holds reshard or allreduce ops), the communication must be the program
 * (docs/ir.md): a reshard moves its operand from the operand's ranks to its
 * own, which are its users' ranks, and every layer with parameters on more
 * than one rank is followed directly by the one allreduce that sums its
 * gradients over exactly its ranks. A pass that breaks any of these is a bug, which is why the
 * pipeline turns verifier errors after a pass into ice(). Every check is
 * linear in the size of the module: names go through hash tables.
 */
#include "ir.h"

#include <math.h>
#include <string.h>

static int64_t cluster_gpus(const ir_cluster *c)
{
    return (int64_t)c->nodes * c->gpus_per_node;
}

/* How many ranks each graph may use: the largest cluster of the jobs that
 * train it, else of any cluster; 0 when the module has none (no bound). One
 * pass over the jobs for all graphs. */
static int64_t *graph_worlds(const ir_module *m, arena *tmp)
{
    int64_t any = 0;
    for (int i = 0; i < m->nclusters; i++)
        if (cluster_gpus(&m->clusters[i]) > any)
            any = cluster_gpus(&m->clusters[i]);
    int64_t *w = arena_alloc(tmp, sizeof *w * (size_t)(m->ngraphs + 1));
    bool *used = arena_alloc(tmp, (size_t)(m->ngraphs + 1));
    for (int i = 0; i < m->njobs; i++) {
        const ir_job *j = &m->jobs[i];
        if (j->graph < 0 || j->graph >= m->ngraphs || j->cluster < 0 || j->cluster >= m->nclusters)
            continue;
        used[j->graph] = true;
        if (cluster_gpus(&m->clusters[j->cluster]) > w[j->graph])
            w[j->graph] = cluster_gpus(&m->clusters[j->cluster]);
    }
    for (int g = 0; g < m->ngraphs; g++)
        if (!used[g])
            w[g] = any;
    return w;
}

static bool same_plan(const ir_plan *a, const ir_plan *b)
{
    if (a->nranks != b->nranks)
        return false;
    for (int k = 0; k < a->nranks; k++)
        if (a->ranks[k] != b->ranks[k])
            return false;
    return true;
}

/* "[0, 1, 2]" for messages (at most the first 8 ranks). */
static const char *plan_text(arena *a, const ir_plan *p)
{
    char *s = "[";
    for (int k = 0; k < p->nranks && k < 8; k++)
        s = arena_printf(a, "%s%s%d", s, k ? ", " : "", p->ranks[k]);
    return arena_printf(a, "%s%s]", s, p->nranks > 8 ? ", ..." : "");
}

/* Whether two rank sets share a rank (both ascending). */
static bool overlap(const ir_plan *a, const ir_plan *b)
{
    for (int i = 0, j = 0; i < a->nranks && j < b->nranks;) {
        if (a->ranks[i] == b->ranks[j])
            return true;
        if (a->ranks[i] < b->ranks[j])
            i++;
        else
            j++;
    }
    return false;
}

/* Where allreduce i runs in the backward (docs/ir.md, "Communication"): it
 * starts after the backward of `start`, its layer or an op before it (the
 * backward runs the ops in reverse, so an earlier op's backward comes
 * later), and is complete before the backward of `complete`, an op before
 * `start`, or before the optimizer (`none`). Both are points in the
 * program of the all-reduce's own ranks, so each names an op with a backward
 * of its own (not another allreduce) that some of those ranks run. */
static void verify_placement(const ir_graph *g, int i, arena *tmp, diag_ctx *d)
{
    const ir_op *op = &g->ops[i];
    const ir_attrs_allreduce *a = ir_allreduce_attrs(op);
    const char *what[2] = {"start", "complete"};
    int at[2] = {a->start, a->complete};
    if (at[0] < 0) {
        diag_error(d, op->loc,
                   "allreduce '%%%s' needs a start: the op after whose backward it begins "
                   "(normally its layer, start = %%%s)",
                   op->name, g->ops[op->inputs[0]].name);
        return;
    }
    if (at[0] > op->inputs[0]) {
        diag_error(d, op->loc,
                   "allreduce '%%%s' starts after the backward of '%%%s', before its layer "
                   "'%%%s' has computed the gradients (start must be the layer or an op before it)",
                   op->name, g->ops[at[0]].name, g->ops[op->inputs[0]].name);
        return;
    }
    for (int k = 0; k < 2; k++) {
        if (at[k] < 0)
            continue;
        const ir_op *u = &g->ops[at[k]];
        if (u->opcode == OP_ALLREDUCE) {
            diag_error(d, op->loc,
                       "allreduce '%%%s': %s names allreduce '%%%s', which has no backward of its "
                       "own; name a layer",
                       op->name, what[k], u->name);
            return;
        }
        if (u->plan.nranks && !overlap(&u->plan, &op->plan)) {
            diag_error(d, op->loc,
                       "allreduce '%%%s': %s '%%%s' runs on %s, none of the all-reduce's ranks %s, "
                       "so its backward is no point in their program",
                       op->name, what[k], u->name, plan_text(tmp, &u->plan),
                       plan_text(tmp, &op->plan));
            return;
        }
    }
    if (at[1] >= at[0])
        diag_error(
            d, op->loc,
            "allreduce '%%%s' must be complete before the backward of '%%%s', which does not "
            "come after its start '%%%s' in the backward (complete names an op before "
            "start, or none: before the optimizer)",
            op->name, g->ops[at[1]].name, g->ops[at[0]].name);
}

/* The checks of explicit communication; see the file's comment. A comm op's
 * rank set is where it runs (infer_comm() made sure it has one): a reshard
 * delivers to its own ranks, an allreduce sums over its own ranks, and those
 * must be the ranks of its users and of its layer. */
static void verify_comm(const ir_graph *g, arena *tmp, diag_ctx *d)
{
    int *reduced_by = arena_alloc(tmp, sizeof(int) * (size_t)(g->nops ? g->nops : 1));
    for (int i = 0; i < g->nops; i++)
        reduced_by[i] = -1;
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        if (op->opcode != OP_ALLREDUCE || op->ninputs < 1 || op->inputs[0] < 0 ||
            op->inputs[0] >= i)
            continue;
        const ir_op *x = &g->ops[op->inputs[0]];
        if (ir_op_params(g, x) <= 0) {
            diag_error(d, op->loc,
                       "allreduce '%%%s' sums the gradients of '%%%s', which has no parameters",
                       op->name, x->name);
            continue;
        }
        if (reduced_by[op->inputs[0]] >= 0) {
            diag_error(d, op->loc,
                       "allreduce '%%%s': the gradients of '%%%s' are already summed by '%%%s'",
                       op->name, x->name, g->ops[reduced_by[op->inputs[0]]].name);
            continue;
        }
        reduced_by[op->inputs[0]] = i;
        if (op->inputs[0] != i - 1)
            diag_error(d, op->loc,
                       "allreduce '%%%s' must directly follow '%%%s', the layer whose gradients it "
                       "sums (it runs right after that layer's backward)",
                       op->name, x->name);
        if (x->plan.nranks && !same_plan(&op->plan, &x->plan))
            diag_error(d, op->loc,
                       "allreduce '%%%s' must run on the ranks of '%%%s', %s, which hold its "
                       "parameters",
                       op->name, x->name, plan_text(tmp, &x->plan));
        verify_placement(g, i, tmp, d);
    }
    /* Users of a reshard run where it delivers; every layer whose replicas
     * would drift apart has its all-reduce. */
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        if (op->opcode == OP_ALLREDUCE)
            continue;
        for (int k = 0; k < op->ninputs; k++) {
            int p = op->inputs[k];
            if (p < 0 || p >= i || g->ops[p].opcode != OP_RESHARD)
                continue;
            if (op->plan.nranks && !same_plan(&g->ops[p].plan, &op->plan))
                diag_error(d, op->loc,
                           "'%%%s' runs on %s, but reshard '%%%s' delivers its operand %d to other "
                           "ranks",
                           op->name, plan_text(tmp, &op->plan), g->ops[p].name, k + 1);
        }
        if (op->plan.nranks > 1 && reduced_by[i] < 0 && ir_op_params(g, op) > 0)
            diag_error(d, op->loc,
                       "'%%%s' has parameters on %d ranks, but no allreduce sums their gradients "
                       "(the replicas would drift apart); the comm pass puts one right after it",
                       op->name, op->plan.nranks);
    }
}

static void verify_graph(const ir_module *m, int gi, int64_t gpus, arena *tmp, diag_ctx *d)
{
    const ir_graph *g = m->graphs[gi];
    ir_names names = {0};
    bool comm = false;
    int before = d->nerrors;
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        const ir_op_info *info = ir_op_info_of(op->opcode);
        comm |= info->cls == OC_COMM;
        if (ir_names_get(&names, op->name) >= 0)
            diag_error(d, op->loc, "value '%%%s' is defined twice", op->name);
        else
            ir_names_set(tmp, &names, op->name, i);
        bool operands_ok = true;
        for (int k = 0; k < op->ninputs; k++)
            if (op->inputs[k] < 0 || op->inputs[k] >= i) {
                diag_error(d, op->loc, "operand %d of '%%%s' does not precede it", k + 1, op->name);
                operands_ok = false;
            }
        if (op->ninputs < info->min_inputs ||
            (info->max_inputs >= 0 && op->ninputs > info->max_inputs)) {
            diag_error(d, op->loc, "'%%%s': %s has a wrong number of operands (%d)", op->name,
                       info->name, op->ninputs);
            operands_ok = false;
        }
        bool refs_ok = true;
        for (int k = 0; k < info->nattrs; k++)
            if (info->attrs[k].kind == AK_REF && ir_attr_get(op, k).u.ref >= i) {
                diag_error(d, op->loc,
                           "'%%%s': attribute '%s' names an op that does not precede it", op->name,
                           info->attrs[k].key);
                refs_ok = false;
            }
        if (!refs_ok)
            continue;
        if (op->type.rank < 1 || op->type.rank > IR_MAX_RANK || op->type.dim[0] != IR_BATCH) {
            diag_error(d, op->loc, "'%%%s': a type must start with the batch dimension N",
                       op->name);
            continue;
        }
        if (operands_ok) {
            ir_op copy = *op;
            int before = d->nerrors;
            if (ir_infer(g, &copy, d) && !ir_type_equal(&copy.type, &op->type)) {
                char a[128], b[128];
                ir_type_to_str(&op->type, a, sizeof a);
                ir_type_to_str(&copy.type, b, sizeof b);
                diag_error(d, op->loc, "'%%%s' has type %s, but %s gives %s", op->name, a,
                           info->name, b);
            } else if (d->nerrors != before) {
                continue;
            }
        }
        for (int k = 0; k < op->plan.nranks; k++) {
            int rk = op->plan.ranks[k];
            if (rk < 0 || (gpus && rk >= gpus) || (k && rk <= op->plan.ranks[k - 1])) {
                diag_error(d, op->loc, "'%%%s': bad rank set (ranks must ascend and be below %lld)",
                           op->name, (long long)gpus);
                break;
            }
        }
    }
    if (comm && d->nerrors == before)
        verify_comm(g, tmp, d); /* on well-formed ops only */
}

/* A job's interleave section (docs/ir.md, "Background work"): the background
 * job indices and ranks name real ones; every copy's cut starts at unit 0,
 * rises strictly and ends at 2n + 1 (n: the background graph's op count);
 * copies come in rank order, then job order, one per (rank, job), and no
 * refusal names a (rank, job) that has a copy; the times are finite,
 * positive, and the foreground's predicted time with background is within
 * the job's slowdown of its time without (relative slack 1e-9). */
static void verify_interleave(const ir_module *m, const ir_job *j, diag_ctx *d)
{
    const ir_interleave *il = j->interleave;
    src_loc at = il->loc.file ? il->loc : j->loc;
    int64_t G = cluster_gpus(&m->clusters[j->cluster]);
    double slow = j->slowdown > 0 ? j->slowdown : IR_SLOWDOWN_DEFAULT;
    if (!(il->slice_bound > 0 && isfinite(il->slice_bound) && il->fg_time > 0 &&
          isfinite(il->fg_time) && isfinite(il->fg_time_bg) && il->fg_time_bg >= il->fg_time))
        diag_error(d, at,
                   "interleave '%s': slice_bound and fg_time must be positive and finite, and "
                   "fg_time_bg at least fg_time",
                   j->name);
    else if (il->fg_time_bg > slow * il->fg_time * (1 + 1e-9))
        diag_error(d, at,
                   "interleave '%s': the foreground's predicted time with background, %g s, is "
                   "more than the slowdown %g times its time without, %g s",
                   j->name, il->fg_time_bg, slow, il->fg_time);
    for (int c = 0; c < il->ncopies; c++) {
        const ir_bg_copy *cp = &il->copies[c];
        src_loc cl = cp->loc.file ? cp->loc : at;
        if (cp->job < 0 || cp->job >= j->nbackground) {
            diag_error(d, cl, "interleave '%s': copy of background job %d, but the job has %d",
                       j->name, cp->job, j->nbackground);
            continue;
        }
        if (cp->rank < 0 || cp->rank >= G) {
            diag_error(d, cl, "interleave '%s': copy on rank %d, outside the cluster of %lld",
                       j->name, cp->rank, (long long)G);
            continue;
        }
        if (c > 0) {
            const ir_bg_copy *pr = &il->copies[c - 1];
            if (pr->rank > cp->rank || (pr->rank == cp->rank && pr->job >= cp->job))
                diag_error(d, cl,
                           "interleave '%s': copies must be in rank order, then job order, one "
                           "per rank and job",
                           j->name);
        }
        if (cp->seed < 0 || !(cp->steps_per_iter >= 0) || !isfinite(cp->steps_per_iter)) {
            diag_error(d, cl,
                       "interleave '%s': a copy's seed and steps_per_iter must be "
                       "non-negative and finite",
                       j->name);
            continue;
        }
        int64_t units = 2 * (int64_t)m->graphs[j->background[cp->job].graph]->nops + 1;
        bool ok = cp->nslices >= 1 && cp->cut && cp->cut[0] == 0 && cp->cut[cp->nslices] == units;
        for (int s = 0; ok && s < cp->nslices; s++)
            ok = cp->cut[s] < cp->cut[s + 1];
        if (!ok)
            diag_error(d, cl,
                       "interleave '%s': the cut of a copy of '%s' must rise strictly from 0 to "
                       "%lld (2 x its %d ops + 1)",
                       j->name, m->graphs[j->background[cp->job].graph]->name, (long long)units,
                       m->graphs[j->background[cp->job].graph]->nops);
    }
    for (int f = 0; f < il->nrefusals; f++) {
        const ir_bg_refusal *rf = &il->refusals[f];
        src_loc fl = rf->loc.file ? rf->loc : at;
        if (rf->job < 0 || rf->job >= j->nbackground || rf->rank < 0 || rf->rank >= G) {
            diag_error(d, fl,
                       "interleave '%s': refusal of background job %d on rank %d, but the job "
                       "has %d background jobs and %lld ranks",
                       j->name, rf->job, rf->rank, j->nbackground, (long long)G);
            continue;
        }
        /* Copies are sorted: a binary search finds a copy of the same (rank, job). */
        int lo = 0, hi = il->ncopies;
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            const ir_bg_copy *cp = &il->copies[mid];
            if (cp->rank < rf->rank || (cp->rank == rf->rank && cp->job < rf->job))
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < il->ncopies && il->copies[lo].rank == rf->rank && il->copies[lo].job == rf->job)
            diag_error(d, fl, "interleave '%s': rank %d both hosts and refuses background job %d",
                       j->name, rf->rank, rf->job);
    }
}

bool ir_verify(const ir_module *m, diag_ctx *d)
{
    int before = d->nerrors;
    arena *tmp = arena_new();
    ir_names graphs = {0};
    int64_t *worlds = graph_worlds(m, tmp);
    for (int i = 0; i < m->ngraphs; i++) {
        if (ir_names_get(&graphs, m->graphs[i]->name) >= 0)
            diag_error(d, m->graphs[i]->loc, "graph '%s' is defined twice", m->graphs[i]->name);
        else
            ir_names_set(tmp, &graphs, m->graphs[i]->name, i);
        verify_graph(m, i, worlds[i], tmp, d);
    }
    for (int i = 0; i < m->ngpus; i++) {
        const ir_gpu *g = &m->gpus[i];
        if (!(g->mem_bytes > 0 && isfinite(g->mem_bytes) && g->mem_bandwidth > 0 &&
              isfinite(g->mem_bandwidth)))
            diag_error(d, g->loc, "gpu '%s' needs a positive, finite memory and bandwidth",
                       g->name);
    }
    for (int i = 0; i < m->nclusters; i++) {
        const ir_cluster *c = &m->clusters[i];
        if (c->gpu < 0 || c->gpu >= m->ngpus || c->nodes < 1 || c->gpus_per_node < 1 ||
            cluster_gpus(c) > IR_MAX_GPUS)
            diag_error(d, c->loc, "cluster '%s' is malformed", c->name);
    }
    for (int i = 0; i < m->njobs; i++) {
        int before_job = d->nerrors;
        ir_job_check(m, &m->jobs[i], d); /* job.c: the front end's and the reader's rules */
        if (d->nerrors == before_job && m->jobs[i].interleave)
            verify_interleave(m, &m->jobs[i], d);
        if (d->nerrors == before && m->jobs[i].schedule)
            ir_verify_schedule(m, &m->jobs[i], d);
    }
    arena_free(tmp);
    return d->nerrors == before;
}
