/*
 * print.c: the IR's text form, as docs/ir.md describes it.
 *
 * The output is what `--emit=ir` and `--dump-after` show and what read.c reads
 * back: printing, reading and printing again gives identical text. Attributes
 * are printed in canonical (spec) order with defaults filled in, and real
 * numbers in the shortest form that reads back to the same double.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

void ir_print_type(FILE *out, const ir_type *t)
{
    char buf[256];
    ir_type_to_str(t, buf, sizeof buf);
    fputs(buf, out);
}

static void print_attr(FILE *out, const ir_graph *g, const ir_attr *a)
{
    fprintf(out, "%s = ", a->key);
    switch (a->kind) {
    case AK_INT:
    case AK_BOOL: fprintf(out, "%lld", (long long)a->u.i); break;
    case AK_PAIR:
        fprintf(out, "[%lld, %lld]", (long long)a->u.pair[0], (long long)a->u.pair[1]);
        break;
    case AK_LIST:
        fputc('[', out);
        for (int i = 0; i < a->u.list.n; i++)
            fprintf(out, "%s%lld", i ? ", " : "", (long long)a->u.list.v[i]);
        fputc(']', out);
        break;
    case AK_REAL: ir_print_real(out, a->u.real); break;
    case AK_REF:
        if (a->u.ref < 0)
            fputs("none", out);
        else
            fprintf(out, "%%%s", g->ops[a->u.ref].name);
        break;
    }
}

/* Rank sets print as ascending runs: [0..7] or [0..3, 8..11, 16]. */
static void print_ranks(FILE *out, const ir_plan *p)
{
    fputs(" @[", out);
    for (int i = 0; i < p->nranks;) {
        int j = i;
        while (j + 1 < p->nranks && p->ranks[j + 1] == p->ranks[j] + 1)
            j++;
        if (i)
            fputs(", ", out);
        if (j > i)
            fprintf(out, "%d..%d", p->ranks[i], p->ranks[j]);
        else
            fprintf(out, "%d", p->ranks[i]);
        i = j + 1;
    }
    fputc(']', out);
}

void ir_print_op(FILE *out, const ir_graph *g, const ir_op *op)
{
    fprintf(out, "  %%%s = %s", op->name, ir_op_info_of(op->opcode)->name);
    for (int i = 0; i < op->ninputs; i++)
        fprintf(out, "%s %%%s", i ? "," : "", g->ops[op->inputs[i]].name);
    const ir_op_info *info = ir_op_info_of(op->opcode);
    if (info->nattrs) {
        fputs(" {", out);
        for (int k = 0; k < info->nattrs; k++) {
            if (k)
                fputs(", ", out);
            ir_attr a = ir_attr_get(op, k);
            print_attr(out, g, &a);
        }
        fputc('}', out);
    }
    fputs(" : ", out);
    ir_print_type(out, &op->type);
    if (op->plan.nranks)
        print_ranks(out, &op->plan);
    fputc('\n', out);
}

void ir_print_graph(FILE *out, const ir_module *m, const ir_graph *g)
{
    (void)m;
    fprintf(out, "graph %s {\n", g->name);
    for (int i = 0; i < g->nops; i++)
        ir_print_op(out, g, &g->ops[i]);
    for (int i = 0; i < g->nweights; i++) {
        fputs("  weight ", out);
        ir_print_string(out, g->weights[i].source);
        fputs(" = ", out);
        ir_print_string(out, g->weights[i].target);
        fputc('\n', out);
    }
    fputs("}\n", out);
}

static void print_link(FILE *out, const char *name, const ir_link *l)
{
    fprintf(out, ", %s.bandwidth = ", name);
    ir_print_real(out, l->bandwidth);
    fprintf(out, ", %s.latency = ", name);
    ir_print_real(out, l->latency);
}

void ir_print_module(FILE *out, const ir_module *m)
{
    fputs("; burstc IR (the format is docs/ir.md)\n", out);
    for (int i = 0; i < m->ngraphs; i++) {
        fputc('\n', out);
        ir_print_graph(out, m, m->graphs[i]);
    }
    if (m->ngpus || m->nclusters || m->njobs)
        fputc('\n', out);
    for (int i = 0; i < m->ngpus; i++) {
        const ir_gpu *gp = &m->gpus[i];
        fprintf(out, "gpu %s {", gp->name);
        for (int d = 0; d < DT_COUNT; d++) {
            fprintf(out, "%sflops.%s = ", d ? ", " : "", ir_dtype_name((ir_dtype)d));
            ir_print_real(out, gp->flops[d]);
        }
        fputs(", bandwidth = ", out);
        ir_print_real(out, gp->mem_bandwidth);
        fputs(", memory = ", out);
        ir_print_real(out, gp->mem_bytes);
        fputs(", launch = ", out);
        ir_print_real(out, gp->launch);
        if (gp->efficiency > 0) {
            fputs(", efficiency = ", out);
            ir_print_real(out, gp->efficiency);
            fputs(", half_work = ", out);
            ir_print_real(out, gp->half_work);
        }
        for (int k = 0; k < KC_COUNT; k++) {
            const ir_curve *cv = &gp->cls[k];
            const char *cn = ir_kclass_name((ir_kclass)k);
            if (cv->efficiency > 0) {
                fprintf(out, ", efficiency.%s = ", cn);
                ir_print_real(out, cv->efficiency);
                fprintf(out, ", half_work.%s = ", cn);
                ir_print_real(out, cv->half_work);
            }
            if (cv->bandwidth > 0) {
                fprintf(out, ", bandwidth.%s = ", cn);
                ir_print_real(out, cv->bandwidth);
            }
        }
        fputs("}\n", out);
    }
    for (int i = 0; i < m->nclusters; i++) {
        const ir_cluster *c = &m->clusters[i];
        fprintf(out, "cluster %s {gpu = %s, nodes = %d, gpus_per_node = %d", c->name,
                m->gpus[c->gpu].name, c->nodes, c->gpus_per_node);
        if (c->cores > 0)
            fprintf(out, ", cores = %d", c->cores);
        if (c->has_slice) {
            fputs(", slice = ", out);
            ir_print_real(out, c->slice);
        }
        print_link(out, "intra", &c->intra);
        print_link(out, "inter", &c->inter);
        fputs("}\n", out);
    }
    for (int i = 0; i < m->njobs; i++)
        ir_job_print(out, m, &m->jobs[i]);
    for (int i = 0; i < m->njobs; i++)
        if (m->jobs[i].schedule)
            ir_print_schedule(out, m, &m->jobs[i]);
    for (int i = 0; i < m->njobs; i++)
        if (m->jobs[i].interleave)
            ir_print_interleave(out, m, &m->jobs[i]);
}

/* The schedule pass's result (docs/ir.md, "Schedule"), one line per program:
 *   schedule JOB {
 *     @[0..1]: fwd %fc1, start %fc1.to.fc2, ..., loss, ..., wait %fc1.grad
 *   }
 */
void ir_print_schedule(FILE *out, const ir_module *m, const ir_job *j)
{
    const ir_schedule *sc = j->schedule;
    const ir_graph *g = m->graphs[j->graph];
    fprintf(out, "\nschedule %s {\n", j->name);
    for (int p = 0; p < sc->nprogs; p++) {
        const ir_sched_prog *pr = &sc->progs[p];
        fputc(' ', out);
        print_ranks(out, &pr->ranks);
        fputc(':', out);
        for (int i = 0; i < pr->n; i++) {
            const ir_sched_entry *e = &pr->e[i];
            fprintf(out, "%s %s", i ? "," : "", ir_sched_kind_name(e->kind));
            if (e->kind != SK_LOSS)
                fprintf(out, " %%%s", g->ops[e->op].name);
        }
        fputc('\n', out);
    }
    fputs("}\n", out);
}

/* The interleave pass's result (docs/ir.md, "Background work"):
 *   interleave JOB {
 *     slice_bound = S, fg_time = T, fg_time_bg = T2
 *     copy BG @ RANK {seed = N, steps_per_iter = X, cut = [0, ..., 2n+1]} ; model @ batch
 *     refusal BG @ RANK "why"
 *   }
 * BG is the index into the job's background list; the comment names it. */
void ir_print_interleave(FILE *out, const ir_module *m, const ir_job *j)
{
    const ir_interleave *il = j->interleave;
    fprintf(out, "\ninterleave %s {\n  slice_bound = ", j->name);
    ir_print_real(out, il->slice_bound);
    fputs(", fg_time = ", out);
    ir_print_real(out, il->fg_time);
    fputs(", fg_time_bg = ", out);
    ir_print_real(out, il->fg_time_bg);
    fputc('\n', out);
    for (int c = 0; c < il->ncopies; c++) {
        const ir_bg_copy *cp = &il->copies[c];
        fprintf(out, "  copy %d @ %d {seed = %lld, steps_per_iter = ", cp->job, cp->rank,
                (long long)cp->seed);
        ir_print_real(out, cp->steps_per_iter);
        fputs(", cut = [", out);
        for (int s = 0; s <= cp->nslices; s++)
            fprintf(out, "%s%d", s ? ", " : "", cp->cut[s]);
        fputs("]}", out);
        if (cp->job >= 0 && cp->job < j->nbackground)
            fprintf(out, " ; %s @ %lld", m->graphs[j->background[cp->job].graph]->name,
                    (long long)j->background[cp->job].batch);
        fputc('\n', out);
    }
    for (int r = 0; r < il->nrefusals; r++) {
        const ir_bg_refusal *rf = &il->refusals[r];
        fprintf(out, "  refusal %d @ %d ", rf->job, rf->rank);
        ir_print_string(out, rf->why ? rf->why : "");
        fputc('\n', out);
    }
    fputs("}\n", out);
}

char *ir_print_module_to_string(const ir_module *m, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        ice("open_memstream failed");
    ir_print_module(f, m);
    fclose(f);
    if (len)
        *len = n;
    return buf;
}
