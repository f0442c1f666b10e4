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
    for (int i = 0; i < m->njobs; i++)
        ir_job_check(m, &m->jobs[i], d); /* job.c: the front end's and the reader's rules */
    arena_free(tmp);
    return d->nerrors == before;
}
