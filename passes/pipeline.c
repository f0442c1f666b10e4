/*
 * pipeline.c: the one table of passes and the straight line that runs them.
 *
 * Order matters and is the order below. `--stop-after=PASS` ends the line
 * after PASS, `--dump-after=PASS` prints the module there; `burstc --help`
 * lists this table. In debug builds the verifier runs after every pass and a
 * failure is an internal error: passes must leave valid IR behind.
 */
#include "passes.h"

#include <string.h>

/* Checks the module as the verifier sees it; the first pass of every
 * compilation, so that hand-edited IR is rejected before any planning. */
static bool pass_verify(pass_ctx *ctx)
{
    return ir_verify(ctx->m, ctx->d);
}

const pass pass_table[] = {
    {"verify", "check the module: names, operands, attributes, types, rank sets", false,
     pass_verify},
    {"plan", "burst planner: GPU count and ranks of every layer of the job", true, pass_plan},
    {"comm", "make communication explicit: reshard and allreduce ops with rank sets", true,
     pass_comm},
    {"schedule", "each rank's order of work: split-phase exchanges, the program codegen emits",
     true, pass_schedule},
    {"interleave", "multiplexing: the job's background jobs in the plan's idle time", true,
     pass_interleave},
};
const int pass_count = (int)(sizeof pass_table / sizeof pass_table[0]);

int pass_find(const char *name)
{
    for (int i = 0; i < pass_count; i++)
        if (strcmp(pass_table[i].name, name) == 0)
            return i;
    return -1;
}

bool pass_options_job_field(pass_options *o, const char *key, const char *text, char *msg, size_t n)
{
    int k = ir_job_field_find(key);
    if (k < 0)
        ice("no job field '%s'", key);
    if (!ir_job_set_text(NULL, &o->job_fields, k, text, msg, n))
        return false;
    o->job_given[k] = true;
    return true;
}

/* The command line's overrides are written into the module itself, once,
 * so that every later pass, the printed IR and the generated program agree
 * on them: job fields (--batch, --amplification) through the job table, and
 * --gpus as a cluster of that many GPUs that keeps its nodes' size: G GPUs
 * within one node shrink the node; more must fill whole nodes. */
static bool apply_overrides(pass_ctx *ctx)
{
    ir_job *j = &ctx->m->jobs[ctx->job];
    for (int k = 0; k < IR_JOB_NFIELDS; k++)
        if (ctx->opt->job_given[k])
            ir_job_copy_field(j, &ctx->opt->job_fields, k);
    int g = ctx->opt->gpus;
    if (g <= 0)
        return true;
    ir_cluster c = ctx->m->clusters[j->cluster];
    if (g <= c.gpus_per_node) {
        c.nodes = 1;
        c.gpus_per_node = g;
    } else if (g % c.gpus_per_node == 0) {
        c.nodes = g / c.gpus_per_node;
    } else {
        diag_error(ctx->d, (src_loc){0},
                   "--gpus %d does not fill whole nodes of %d GPUs of cluster '%s'", g,
                   c.gpus_per_node, c.name);
        return false;
    }
    c.name = arena_printf(ctx->m->arena, "%s_%d", c.name, g);
    j->cluster = ir_cluster_add(ctx->m, &c);
    return true;
}

bool pass_select_job(pass_ctx *ctx)
{
    ctx->job = -1;
    if (ctx->opt->job) {
        for (int i = 0; i < ctx->m->njobs; i++)
            if (strcmp(ctx->m->jobs[i].name, ctx->opt->job) == 0)
                ctx->job = i;
        if (ctx->job < 0) {
            diag_error(ctx->d, (src_loc){0}, "no job named '%s' in the input", ctx->opt->job);
            return false;
        }
        return apply_overrides(ctx);
    }
    if (ctx->m->njobs > 0)
        ctx->job = ctx->m->njobs - 1; /* the job of the file given, declared after its imports */
    return ctx->job < 0 || apply_overrides(ctx);
}

bool pass_run_pipeline(pass_ctx *ctx, const char *stop_after, const char *dump_after, FILE *dump)
{
    for (int i = 0; i < pass_count; i++) {
        const pass *p = &pass_table[i];
        if (p->needs_job && ctx->job < 0)
            continue;
        int before = ctx->d->nerrors;
        if (!p->run(ctx) || ctx->d->nerrors != before)
            return false;
#ifdef BURSTC_DEBUG
        if (!ir_verify(ctx->m, ctx->d))
            ice("the module is invalid after pass '%s'", p->name);
#endif
        if (dump_after && (strcmp(dump_after, "all") == 0 || strcmp(dump_after, p->name) == 0)) {
            fprintf(dump, "; after %s\n", p->name);
            ir_print_module(dump, ctx->m);
        }
        if (stop_after && strcmp(stop_after, p->name) == 0)
            break;
    }
    return true;
}
