/*
 * interleave_ir.c: pass "interleave" (after plan and comm; docs/plan.md,
 * "Multiplexing"). Places the job's background jobs (bg_jobs.c builds them
 * from the IR) in the planned job's idle windows (interleave.c) and writes
 * ir_job.interleave; refusals are printed as notes. A job read back with a
 * section keeps it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "plan.h"

bool pass_same_copies(const ir_interleave *il, const plan_mux_result *x)
{
    if (il->ncopies != x->ncopies)
        return false;
    for (int c = 0; c < x->ncopies; c++) {
        const ir_bg_copy *a = &il->copies[c];
        const plan_mux_copy *b = &x->copies[c];
        if (a->job != b->job || a->rank != b->rank || a->nslices != b->nslices)
            return false;
        for (int s = 0; s <= b->nslices; s++)
            if (a->cut[s] != b->cut[s])
                return false;
    }
    return true;
}

/* At most this many refusals of one background job are printed (the IR
 * holds them all). */
#define REFUSALS_SHOWN 4

bool pass_interleave(pass_ctx *ctx)
{
    ir_module *m = ctx->m;
    ir_job *j = &m->jobs[ctx->job];
    if (j->nbackground == 0 || j->interleave)
        return true; /* nothing to place, or read back from a dump */
    pass_plan_input in;
    plan_result r;
    if (!pass_plan_placed(m, ctx->job, ctx->opt, &in, &r, ctx->d)) {
        pass_plan_input_free(&in);
        return false;
    }
    bool ok = false;
    char err[512];
    plan_timeline tl;
    pass_bg_jobs bg = {0};
    plan_mux_result mr;
    bool have_mr = false;
    if (!plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
        diag_error(ctx->d, j->loc, "interleave: %s", err);
        goto out_r;
    }
    /* The limit is against the fastest plan of any strategy (docs/plan.md). */
    plan_mux_options mo;
    if (!pass_mux_options(m, j, ctx->opt, &in.p, &mo, ctx->d))
        goto out_tl;
    pass_bg_jobs_build(m, j, &in.p, &bg);
    if (!plan_interleave(&tl, &r, bg.jobs, bg.n, &mo, &mr, err, sizeof err)) {
        diag_error(ctx->d, j->loc, "interleave: %s", err);
        goto out_tl;
    }
    have_mr = true;
    ir_interleave *il = arena_alloc(m->arena, sizeof *il);
    il->slice_bound = mr.slice_bound;
    il->fg_time = mr.fg_time;
    il->fg_time_bg = mr.fg_time_bg;
    il->ncopies = mr.ncopies;
    il->copies = arena_alloc(m->arena, sizeof *il->copies * (size_t)(mr.ncopies + 1));
    for (int c = 0; c < mr.ncopies; c++) {
        const plan_mux_copy *cp = &mr.copies[c];
        ir_bg_copy *ic = &il->copies[c];
        ic->job = cp->job;
        ic->rank = cp->rank;
        ic->seed = cp->seed;
        ic->nslices = cp->nslices;
        ic->cut = arena_alloc(m->arena, sizeof(int) * (size_t)(cp->nslices + 1));
        memcpy(ic->cut, cp->cut, sizeof(int) * (size_t)(cp->nslices + 1));
        ic->steps_per_iter = cp->steps_per_iter;
    }
    il->nrefusals = mr.nrefusals;
    il->refusals = arena_alloc(m->arena, sizeof *il->refusals * (size_t)(mr.nrefusals + 1));
    for (int f = 0; f < mr.nrefusals; f++)
        il->refusals[f] = (ir_bg_refusal){mr.refusals[f].job, mr.refusals[f].rank,
                                          arena_strdup(m->arena, mr.refusals[f].why), (src_loc){0}};
    j->interleave = il;
    /* Refusals are printed (a few per background job; the IR has them all). */
    if (ctx->d->out)
        for (int b = 0; b < j->nbackground; b++) {
            int shown = 0, total = 0;
            for (int f = 0; f < mr.nrefusals; f++) {
                if (mr.refusals[f].job != b)
                    continue;
                if (shown < REFUSALS_SHOWN) {
                    diag_note(ctx->d, j->loc, "background %s @ %lld: no copy on rank %d: %s",
                              m->graphs[j->background[b].graph]->name,
                              (long long)j->background[b].batch, mr.refusals[f].rank,
                              mr.refusals[f].why);
                    shown++;
                }
                total++;
            }
            if (total > shown)
                diag_note(ctx->d, j->loc,
                          "background %s @ %lld: %d more ranks refused (see the "
                          "interleave section of the IR)",
                          m->graphs[j->background[b].graph]->name,
                          (long long)j->background[b].batch, total - shown);
        }
    ok = true;
out_tl:
    if (have_mr)
        plan_mux_result_free(&mr);
    pass_bg_jobs_free(&bg);
    plan_timeline_free(&tl);
out_r:
    plan_result_free(&r);
    pass_plan_input_free(&in);
    return ok;
}
