/*
 * verify.c: structural checks of a whole module.
 *
 * Runs after the reader and, in debug builds, between passes: names are
 * unique, every operand precedes its user, every op has the attributes of its
 * spec in canonical order, its recorded type is the one inference gives, plan
 * rank sets are ascending and inside the job's cluster, and jobs refer to
 * graphs and clusters that exist. A pass that breaks any of these is a bug,
 * which is why the pipeline turns verifier errors after a pass into ice().
 */
#include "ir.h"

#include <string.h>

static int max_gpus(const ir_module *m)
{
    int g = 0;
    for (int i = 0; i < m->nclusters; i++)
        if (m->clusters[i].nodes * m->clusters[i].gpus_per_node > g)
            g = m->clusters[i].nodes * m->clusters[i].gpus_per_node;
    return g;
}

static void verify_graph(const ir_module *m, const ir_graph *g, diag_ctx *d)
{
    int gpus = max_gpus(m);
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        const ir_op_info *info = ir_op_info_of(op->opcode);
        for (int j = 0; j < i; j++)
            if (strcmp(g->ops[j].name, op->name) == 0) {
                diag_error(d, op->loc, "value '%%%s' is defined twice", op->name);
                break;
            }
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
        bool attrs_ok = op->nattrs == info->nattrs;
        for (int k = 0; attrs_ok && k < op->nattrs; k++)
            attrs_ok = strcmp(op->attrs[k].key, info->attrs[k].key) == 0 &&
                       op->attrs[k].kind == info->attrs[k].kind &&
                       (op->attrs[k].kind != AK_REF || op->attrs[k].u.ref < i);
        if (!attrs_ok) {
            diag_error(d, op->loc, "'%%%s': attributes are not those of %s in canonical order",
                       op->name, info->name);
            continue;
        }
        if (op->type.rank < 1 || op->type.rank > IR_MAX_RANK || op->type.dim[0] != IR_BATCH) {
            diag_error(d, op->loc, "'%%%s': a type must start with the batch dimension N",
                       op->name);
            continue;
        }
        if (operands_ok && op->opcode != OP_INPUT) {
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
                diag_error(d, op->loc, "'%%%s': bad rank set (ranks must ascend and be below %d)",
                           op->name, gpus);
                break;
            }
        }
    }
}

bool ir_verify(const ir_module *m, diag_ctx *d)
{
    int before = d->nerrors;
    for (int i = 0; i < m->ngraphs; i++) {
        for (int j = 0; j < i; j++)
            if (strcmp(m->graphs[i]->name, m->graphs[j]->name) == 0)
                diag_error(d, m->graphs[i]->loc, "graph '%s' is defined twice", m->graphs[i]->name);
        verify_graph(m, m->graphs[i], d);
    }
    for (int i = 0; i < m->nclusters; i++) {
        const ir_cluster *c = &m->clusters[i];
        if (c->gpu < 0 || c->gpu >= m->ngpus || c->nodes < 1 || c->gpus_per_node < 1)
            diag_error(d, c->loc, "cluster '%s' is malformed", c->name);
    }
    for (int i = 0; i < m->njobs; i++) {
        const ir_job *j = &m->jobs[i];
        if (j->graph < 0 || j->graph >= m->ngraphs || j->cluster < 0 ||
            j->cluster >= m->nclusters || j->batch < 1)
            diag_error(d, j->loc, "job '%s' is malformed", j->name);
    }
    return d->nerrors == before;
}
