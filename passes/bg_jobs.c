/*
 * bg_jobs.c: a job's background jobs as the multiplexing planner sees them,
 * and its multiplexing options.
 *
 * Every op's forward and backward priced by costmodel.c on the job's GPU at
 * the background batch, with the job's dtype; the optimizer, the job's too,
 * as a memory-bound pass over parameters, gradients and optimizer state in
 * one fused kernel. Both the plan pass (plan_ir.c, for amplification = auto)
 * and the interleave pass (interleave_ir.c) use these; they call neither.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "plan.h"

void pass_bg_jobs_free(pass_bg_jobs *b)
{
    for (int i = 0; i < b->n; i++) {
        free((void *)b->jobs[i].unit);
        free((void *)b->jobs[i].op_name);
    }
    free(b->jobs);
    memset(b, 0, sizeof *b);
}

void pass_bg_jobs_build(const ir_module *m, const ir_job *j, const plan_problem *fg,
                        pass_bg_jobs *out)
{
    out->n = j->nbackground;
    out->jobs = plan_xcalloc((size_t)out->n, sizeof *out->jobs);
    for (int b = 0; b < j->nbackground; b++) {
        const ir_graph *g = m->graphs[j->background[b].graph];
        int64_t batch = j->background[b].batch;
        int n = g->nops;
        double *unit = plan_xcalloc((size_t)2 * n + 1, sizeof(double));
        const char **names = plan_xcalloc((size_t)n + 1, sizeof(char *));
        plan_problem q = {.cluster = fg->cluster,
                          .batch = batch,
                          .dtype_bytes = fg->dtype_bytes,
                          .optimizer_states = fg->optimizer_states};
        q.cluster.gpus = 1;
        double params = 0, mem = 0;
        int with_params = 0;
        for (int i = 0; i < n; i++) {
            const ir_op *op = &g->ops[i];
            names[i] = op->name;
            if (op->opcode == OP_INPUT)
                continue;
            plan_layer l;
            pass_plan_layer(g, op, &l);
            double f, bw;
            plan_layer_time(&q, &l, batch, &f, &bw);
            unit[i] = f;
            unit[2 * n - 1 - i] = bw;
            params += l.params;
            with_params += l.params > 0;
            mem += l.params * q.dtype_bytes * (2.0 + q.optimizer_states) +
                   l.saved * (double)batch * q.dtype_bytes;
        }
        /* The optimizer: reads parameters, gradients and state, writes
         * parameters and state, as one fused multi-tensor kernel (PyTorch's
         * foreach optimizers; a slice is one graph piece anyway). */
        unit[2 * n] =
            params * q.dtype_bytes * (3.0 + 2 * q.optimizer_states) / fmax(fg->cluster.mem_bw, 1) +
            (with_params > 0) * fg->cluster.launch;
        out->jobs[b] = (plan_bg_job){.name = g->name,
                                     .nunits = 2 * n + 1,
                                     .unit = unit,
                                     .op_name = names,
                                     .mem_bytes = mem,
                                     .batch = batch};
    }
}

bool pass_mux_options(const ir_module *m, const ir_job *j, const pass_options *opt,
                      const plan_problem *p, plan_mux_options *o, diag_ctx *d)
{
    memset(o, 0, sizeof *o);
    /* --slowdown is already the job's (pass_select_job) */
    o->slowdown = j->slowdown > 0 ? j->slowdown : IR_SLOWDOWN_DEFAULT;
    o->cpu = pass_gpu_is_cpu(&m->gpus[m->clusters[j->cluster].gpu]);
    o->preempt = opt && !o->cpu ? opt->preempt_delay : 0;
    if (!p || j->nbackground == 0)
        return true;
    plan_problem q = *p;
    q.price = 0;
    if (j->amplification == IR_AMP_AUTO)
        q.amp_limit = 0;
    char err[512];
    if (!plan_mux_init(&q, o, err, sizeof err)) {
        diag_error(d, j->loc, "multiplexing: %s", err);
        return false;
    }
    return true;
}
