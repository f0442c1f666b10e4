/*
 * simrun.c: the cluster simulator as the tuner's runner (`--runner sim`).
 *
 * A run plays a candidate's timeline (passes/timeline.c) for warm-up plus
 * measured iterations on sim/'s engine with multiplicative jitter on every
 * duration, as `burstc sim --jitter` does, in process. Its throughput counts
 * only the iterations after the warm-up. Every run draws its own noise:
 * the trial's seed mixed with the run's slot in the pair, so the two runs of
 * a trial are as independent as two runs on a real machine. A packed
 * candidate plays its placement's background slices, as `burstc sim` plays
 * the interleave pass's; the simulator reports their samples/s.
 */
#include "tune.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tune_sim_runner_init(tune_sim_runner *s, const plan_problem *p, const tune_background *bg,
                          const tune_candidate *c, int n, int warmup, int steps, double jitter,
                          char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->tl = plan_xcalloc((size_t)n, sizeof *s->tl);
    s->bg = plan_xcalloc((size_t)n, sizeof *s->bg);
    s->nbg = plan_xcalloc((size_t)n, sizeof *s->nbg);
    for (int i = 0; i < n; i++) {
        char e[512];
        if (!plan_timeline_build(p, &c[i].plan, &s->tl[i], e, sizeof e)) {
            snprintf(err, errlen, "candidate '%s': %s", c[i].name, e);
            tune_sim_runner_free(s);
            return false;
        }
        s->n = i + 1;
        if (!c[i].packed)
            continue;
        const plan_mux_result *x = &c[i].mux;
        if (!bg || x->nslices > INT32_MAX) {
            snprintf(err, errlen, "candidate '%s': its background slices cannot be played",
                     c[i].name);
            tune_sim_runner_free(s);
            return false;
        }
        s->bg[i] = plan_xcalloc((size_t)x->nslices, sizeof *s->bg[i]);
        s->nbg[i] = (int)x->nslices;
        for (int64_t k = 0; k < x->nslices; k++) {
            const plan_mux_slice *sl = &x->slices[k];
            const plan_mux_copy *cp = &x->copies[sl->copy];
            /* A slice completes 1/nslices of a step of its copy (as burstc sim). */
            const plan_bg_job *b = &bg->jobs[cp->job];
            s->bg[i][k] = (sim_bg_slice){sl->rank, sl->step,
                                         sl->dur,  (double)b->batch / cp->nslices,
                                         cp->job,  plan_bg_step_time(b) / cp->nslices};
        }
    }
    s->batch = p->batch;
    s->warmup = warmup;
    s->steps = steps;
    s->jitter = jitter;
    return true;
}

void tune_sim_runner_free(tune_sim_runner *s)
{
    for (int i = 0; i < s->n; i++) {
        plan_timeline_free(&s->tl[i]);
        free(s->bg[i]);
    }
    free(s->tl);
    free(s->bg);
    free(s->nbg);
    memset(s, 0, sizeof *s);
}

bool tune_sim_run(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                  size_t errlen)
{
    tune_sim_runner *s = ctx;
    sim_options so = {.iterations = s->warmup + s->steps,
                      .jitter = s->jitter,
                      .seed = tune_mix(seed, (uint64_t)slot + 1),
                      .bg = s->bg[cand],
                      .nbg = s->nbg[cand],
                      .trace_gpus = 2};
    sim_result run;
    if (!sim_play(&s->tl[cand], &so, &run, err, errlen))
        return false;
    double t = 0;
    for (int i = s->warmup; i < run.iterations; i++)
        t += run.iter_time[i];
    out->fg = t > 0 ? (double)s->steps * (double)s->batch / t : 0;
    out->bg = run.bg_samples_per_s;
    sim_result_free(&run);
    if (!(out->fg > 0)) {
        snprintf(err, errlen, "the simulated run measured no time");
        return false;
    }
    return true;
}
