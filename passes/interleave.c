/*
 * interleave.c: multiplexing, background training jobs in the idle time of
 * a burst plan (docs/plan.md, "Multiplexing").
 *
 * This file is IR-independent (plan.h): from a plan's timeline
 * (timeline.c, the one every rank's program and its ideal schedule come
 * from, shared with the simulator) it takes every rank's idle windows: the
 * rank is outside the running layer's rank set or waits on a peer (PTW_PEER),
 * its own communication moves data (PTW_COMM; not on a CPU core, whose
 * communication progresses only while the core polls it), its shard is done
 * before the layer's largest (PTW_SHARD), or it is done with the iteration
 * (PTW_END). Each background job gets a copy on every rank whose memory
 * holds it beside the foreground's peak there and the copies placed before
 * it; its training step is cut into slices no longer than the slice bound,
 * and the slices are packed, in order, into the rank's windows.
 *
 * The sharing model (what a background slice costs the foreground): the
 * rank's compute runs one thing at a time, and a slice is not preempted. On
 * a GPU the background runs on a low-priority stream in graph pieces of one
 * slice: the foreground's kernels overtake queued background work, but a
 * piece already running finishes first (the GPU's block scheduler favours
 * the high-priority stream only for blocks not yet issued; charging the
 * whole rest of the slice is the conservative bound). On a CPU core a rank
 * runs slices between MPI polls, so a message or the next layer waits for
 * the slice in progress. So a slice that fits its window costs the
 * foreground nothing, and one that overruns the window's end delays the
 * rank's next op by the overrun; timeline.c's schedule with the background
 * work in its windows (bg_peer, bg_comm, bg_shard, bg_end) propagates that
 * delay through every dependency, and its iteration time is the predicted
 * foreground time with background. Concurrent execution (a background
 * kernel sharing the SMs with a foreground one) is not modelled: the pass
 * never plans it.
 *
 * The limit on the foreground's time with background is the options'
 * time_limit (plan_mux_init: slowdown x the fastest plan of any strategy,
 * one limit for every strategy's plan of a job), else slowdown x the plan's
 * own time; the budget is the limit less the plan's time. The slice bound is
 * min(default, budget): a slice that starts just before the foreground needs
 * the device delays it by at most the budget. Default: 0.5 ms on a GPU; 2 ms on a CPU
 * core, where one layer of even the small test models often takes more than
 * 0.5 ms and the poll between slices costs a few microseconds. A slice never
 * splits a unit (one op's forward or backward, or the optimizer update): a
 * unit longer than the bound is a slice of its own, a long slice, placed only
 * in a window that holds it whole (it never overruns one), so that it costs
 * the foreground nothing in the prediction and, started just before the
 * foreground needs the device, delays it by at most its length. A unit longer
 * than the budget itself cannot be admitted: the job is refused on that
 * device.
 *
 * Placement tries slices cut at bound / 1, 2, 4 and 8 (finer slices fit
 * shorter windows) and windows allowed to overrun their end by 0, 1/8, 1/4,
 * 1/2 or the whole slice bound, keeps every combination whose predicted
 * foreground time is within the limit, and chooses the one with the
 * highest predicted cluster throughput (foreground + background samples/s;
 * the try without overruns never slows the foreground, so the result is
 * never below the foreground's throughput alone; fit_only keeps only those
 * tries). Linear in windows + placed slices + steps per try.
 *
 * The pass "interleave" over the IR is interleave_ir.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

int plan_mux_cut(const double *unit, int nunits, double bound, int *cut)
{
    int n = 0;
    double acc = 0;
    cut[0] = 0;
    for (int u = 0; u < nunits; u++) {
        bool alone = !(unit[u] <= bound); /* a long unit: a slice of its own */
        if (u > cut[n] && (alone || acc + unit[u] > bound)) {
            cut[++n] = u;
            acc = 0;
        }
        acc += unit[u];
        if (alone && u + 1 < nunits) {
            cut[++n] = u + 1;
            acc = 0;
        }
    }
    cut[++n] = nunits;
    return n;
}

int64_t plan_mux_seed(int job, int rank)
{
    /* splitmix64 of the pair: deterministic and well spread. */
    uint64_t z = ((uint64_t)(uint32_t)job << 32 | (uint32_t)rank) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    int64_t s = (int64_t)(z & 0x7fffffff);
    return s ? s : 1;
}

void plan_rank_memory(const plan_problem *p, const plan_result *r, double *out)
{
    int G = p->cluster.gpus;
    double *diff = plan_xcalloc((size_t)G + 1, sizeof(double));
    for (int l = 0; l < r->nlayers; l++) {
        diff[r->layer[l].first] += r->layer[l].mem_bytes;
        diff[r->layer[l].first + r->layer[l].k] -= r->layer[l].mem_bytes;
    }
    double run = 0;
    for (int g = 0; g < G; g++) {
        run += diff[g];
        out[g] = run;
    }
    free(diff);
}

void plan_mux_result_free(plan_mux_result *r)
{
    for (int c = 0; c < r->ncopies; c++) {
        free(r->copies[c].cut);
        free(r->copies[c].dur);
    }
    free(r->copies);
    free(r->refusals);
    free(r->slices);
    memset(r, 0, sizeof *r);
}

/* "12.30 GiB", "3.10 MiB", "20.0 KiB", "512 B". */
static void fmt_bytes(double v, char *buf, size_t n)
{
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else if (v >= 1024.0 * 1024)
        snprintf(buf, n, "%.2f MiB", v / (1024.0 * 1024));
    else if (v >= 1024)
        snprintf(buf, n, "%.1f KiB", v / 1024);
    else
        snprintf(buf, n, "%.0f B", v);
}

static void unit_name(const plan_bg_job *j, int u, char *buf, size_t n)
{
    int ops = (j->nunits - 1) / 2;
    if (u == 2 * ops) {
        snprintf(buf, n, "its optimizer update");
        return;
    }
    int op = u < ops ? u : 2 * ops - 1 - u;
    if (j->op_name)
        snprintf(buf, n, "the %s of '%s'", u < ops ? "forward" : "backward", j->op_name[op]);
    else
        snprintf(buf, n, "the %s of op %d", u < ops ? "forward" : "backward", op);
}

static void refuse(plan_mux_result *out, int *cap, int job, int rank, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void refuse(plan_mux_result *out, int *cap, int job, int rank, const char *fmt, ...)
{
    if (out->nrefusals == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        out->refusals = plan_xrealloc(out->refusals, (size_t)*cap, sizeof *out->refusals);
    }
    plan_mux_refusal *f = &out->refusals[out->nrefusals++];
    f->job = job;
    f->rank = rank;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->why, sizeof f->why, fmt, ap);
    va_end(ap);
}

/* One placement try: every copy's slices at the cut, windows allowed to
 * overrun by at most theta. */
typedef struct try_st {
    plan_timeline *tl;
    const plan_mux_options *o;
    const plan_bg_job *jobs;
    double bound;    /* the slice bound: a longer slice (one long unit) never overruns */
    double pre;      /* > 0: preemptive sharing, the foreground waits at most this (o->preempt) */
    double min_room; /* preemptive: a slice that does not fit starts only in this much room */
    plan_mux_copy *copies;
    int ncopies;
    int64_t *cop0; /* rank g's copies: copies[cop0[g] .. cop0[g + 1]) */
    int64_t nsteps;
    double *bg_peer, *bg_comm, *bg_shard, *bg_end; /* the timeline's arrays */
    double *placed;                                /* per copy: slices placed */
    plan_mux_slice *slices;
    int64_t nslices, cap;
} try_st;

static bool usable(const try_st *t, const plan_tl_window *w)
{
    return !(t->o->cpu && w->why == PTW_COMM);
}

/* Places the slices; returns the predicted foreground time with them. */
static double place(try_st *t, double theta, bool record)
{
    plan_timeline *tl = t->tl;
    int G = tl->G;
    memset(t->bg_peer, 0, sizeof(double) * (size_t)t->nsteps);
    memset(t->bg_comm, 0, sizeof(double) * (size_t)t->nsteps);
    memset(t->bg_shard, 0, sizeof(double) * (size_t)t->nsteps);
    memset(t->bg_end, 0, sizeof(double) * (size_t)tl->ncls);
    memset(t->placed, 0, sizeof(double) * (size_t)(t->ncopies ? t->ncopies : 1));
    t->nslices = 0;
    for (int g = 0; g < G; g++) {
        int64_t c0 = t->cop0[g], nc = t->cop0[g + 1] - c0;
        if (nc == 0)
            continue;
        int64_t cur = 0; /* the copy whose step runs */
        int *pos = plan_xcalloc((size_t)nc, sizeof(int));
        double *rem = plan_xcalloc((size_t)nc, sizeof(double)); /* preempted: the rest of a slice */
        /* Every rank of a role has its windows and its copies (memory is
         * the layers' it runs): the placement is the same for each, and
         * the role's first rank writes its background into the role's
         * steps. */
        int role = tl->cls[g];
        bool first = tl->rep[role] == g;
        for (int64_t w = tl->win0[role]; w < tl->win0[role + 1]; w++) {
            const plan_tl_window *win = &tl->win[w];
            if (!usable(t, win))
                continue;
            double L = win->end - win->start, used = 0;
            /* Preemptive sharing: a slice runs to the window's end, the
             * foreground waits for its running blocks (at most pre), and
             * the rest of it runs in the rank's next windows. */
            while (t->pre > 0 && t->nslices < PLAN_MUX_MAX_SLICES) {
                double room = L - used;
                if (!(room > L * 1e-9))
                    break;
                plan_mux_copy *c = &t->copies[c0 + cur];
                double d = rem[cur] > 0 ? rem[cur] : c->dur[pos[cur]];
                bool whole = d <= room * (1 + 1e-12);
                if (!whole && room < t->min_room)
                    break;
                if (record) {
                    if (t->nslices == t->cap) {
                        t->cap = t->cap ? 2 * t->cap : 256;
                        t->slices = plan_xrealloc(t->slices, (size_t)t->cap, sizeof *t->slices);
                    }
                    t->slices[t->nslices] = (plan_mux_slice){(int)(c0 + cur),
                                                             pos[cur],
                                                             g,
                                                             win->step,
                                                             win->why,
                                                             win->start + used,
                                                             whole ? d : room,
                                                             whole && pos[cur] == c->nslices - 1};
                }
                t->nslices++;
                if (!whole) {
                    rem[cur] = d - room;
                    used = L + fmin(t->pre, rem[cur]);
                    break;
                }
                used += d;
                rem[cur] = 0;
                t->placed[c0 + cur] += 1;
                if (++pos[cur] == c->nslices) {
                    pos[cur] = 0;
                    cur = (cur + 1) % nc;
                }
            }
            for (; !(t->pre > 0);) {
                plan_mux_copy *c = &t->copies[c0 + cur];
                double d = c->dur[pos[cur]];
                bool fits = used + d <= L * (1 + 1e-12);
                bool over = !fits && used < L * (1 - 1e-9) && used + d - L <= theta &&
                            d <= t->bound * (1 + 1e-12);
                if (!(fits || over) || t->nslices >= PLAN_MUX_MAX_SLICES)
                    break;
                if (record) {
                    if (t->nslices == t->cap) {
                        t->cap = t->cap ? 2 * t->cap : 256;
                        t->slices = plan_xrealloc(t->slices, (size_t)t->cap, sizeof *t->slices);
                    }
                    t->slices[t->nslices] = (plan_mux_slice){
                        (int)(c0 + cur), pos[cur],          g, win->step,
                        win->why,        win->start + used, d, pos[cur] == c->nslices - 1};
                }
                t->nslices++;
                used += d;
                t->placed[c0 + cur] += 1;
                if (++pos[cur] == c->nslices) {
                    pos[cur] = 0;
                    cur = (cur + 1) % nc;
                }
                if (over)
                    break;
            }
            if (used <= 0 || !first)
                continue;
            int64_t s = tl->prog0[role] + win->step;
            switch (win->why) {
            case PTW_PEER: t->bg_peer[s] += used; break;
            case PTW_COMM: t->bg_comm[s] += used; break;
            case PTW_SHARD: t->bg_shard[s - 1] += used; break;
            case PTW_END: t->bg_end[role] += used; break;
            }
        }
        free(pos);
        free(rem);
    }
    tl->bg_peer = t->bg_peer;
    tl->bg_comm = t->bg_comm;
    tl->bg_shard = t->bg_shard;
    tl->bg_end = t->bg_end;
    /* plan_timeline_schedule recomputes the windows too: keep the ones
     * without background. */
    plan_tl_window *win = tl->win;
    int64_t *win0 = tl->win0, nwin = tl->nwin;
    tl->win = NULL;
    tl->win0 = NULL;
    plan_timeline_schedule(tl);
    double T = tl->time;
    free(tl->win);
    free(tl->win0);
    tl->win = win;
    tl->win0 = win0;
    tl->nwin = nwin;
    tl->bg_peer = tl->bg_comm = tl->bg_shard = tl->bg_end = NULL;
    return T;
}

static double bg_rate(const try_st *t, double T)
{
    double s = 0;
    for (int c = 0; c < t->ncopies; c++) {
        const plan_mux_copy *cp = &t->copies[c];
        s += t->placed[c] / cp->nslices * (double)t->jobs[cp->job].batch;
    }
    return T > 0 ? s / T : 0;
}

/* Cuts every copy at bound (a unit longer than it a slice of its own). */
static void cut_copies(try_st *t, double bound)
{
    for (int c = 0; c < t->ncopies; c++) {
        plan_mux_copy *cp = &t->copies[c];
        const plan_bg_job *j = &t->jobs[cp->job];
        cp->nslices = plan_mux_cut(j->unit, j->nunits, bound, cp->cut);
        for (int s = 0; s < cp->nslices; s++) {
            double d = 0;
            for (int u = cp->cut[s]; u < cp->cut[s + 1]; u++)
                d += j->unit[u];
            cp->dur[s] = d;
        }
    }
}

double plan_bg_step_time(const plan_bg_job *b)
{
    double step = 0;
    for (int u = 0; u < b->nunits; u++)
        step += b->unit[u];
    return step;
}

bool plan_interleave(plan_timeline *tl, const plan_result *r, const plan_bg_job *jobs, int njobs,
                     const plan_mux_options *o, plan_mux_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const plan_problem *p = tl->p;
    int G = tl->G;
    if (!(o->slowdown >= 1) || !isfinite(o->slowdown)) {
        snprintf(err, errlen, "the slowdown must be a finite number >= 1, not %g", o->slowdown);
        return false;
    }
    for (int j = 0; j < njobs; j++)
        if (jobs[j].nunits < 1 || jobs[j].nunits % 2 == 0 || jobs[j].batch < 1 ||
            !(jobs[j].mem_bytes >= 0)) {
            snprintf(err, errlen, "background job %d ('%s') is malformed", j,
                     jobs[j].name ? jobs[j].name : "?");
            return false;
        }
    double T0 = tl->time;
    out->fg_time = out->fg_time_bg = T0;
    double dflt = o->slice_bound > 0 ? o->slice_bound
                  : o->cpu           ? PLAN_MUX_SLICE_CPU
                                     : PLAN_MUX_SLICE_GPU;
    double limit_t = o->time_limit > 0 ? o->time_limit : o->slowdown * T0;
    out->time_limit = limit_t;
    double budget = limit_t - T0;
    double bound = fmin(dflt, budget);
    double pre = !o->cpu && o->preempt > 0 ? o->preempt : 0;
    out->slice_bound = bound > 0 ? bound : dflt;
    out->cut_div = 1;
    double idle = 0;
    int refcap = 0;
    for (int c = 0; c < tl->ncls; c++)
        for (int64_t w = tl->win0[c]; w < tl->win0[c + 1]; w++)
            if (!(o->cpu && tl->win[w].why == PTW_COMM))
                idle += tl->csize[c] * (tl->win[w].end - tl->win[w].start);
    out->idle = T0 > 0 ? idle / (G * T0) : 0;
    out->idle_bg = out->idle;
    out->fg_samples_per_s = T0 > 0 ? (double)p->batch / T0 : 0;
    out->cluster_samples_per_s = out->fg_samples_per_s;
    double one = plan_one_gpu_time(p);
    out->gpu_equivalents = T0 > 0 ? one / T0 : 0;
    if (njobs == 0)
        return true;

    /* Which jobs can be sliced at all. */
    bool *sliceable = plan_xcalloc((size_t)njobs, sizeof(bool));
    char(*why)[400] = plan_xcalloc((size_t)njobs, sizeof *why);
    for (int j = 0; j < njobs; j++) {
        const plan_bg_job *b = &jobs[j];
        double step = 0, longest = 0;
        int lu = 0;
        for (int u = 0; u < b->nunits; u++) {
            step += b->unit[u];
            if (b->unit[u] > longest) {
                longest = b->unit[u];
                lu = u;
            }
        }
        char un[120];
        unit_name(b, lu, un, sizeof un);
        if (!(bound > 0) && o->time_limit > 0)
            snprintf(why[j], sizeof why[j],
                     "the plan alone takes %.3f ms, not under the limit %.3f ms (%g x the fastest "
                     "plan's %.3f ms): no time to lose to background work",
                     T0 * 1e3, limit_t * 1e3, o->slowdown, o->time_ref * 1e3);
        else if (!(bound > 0))
            snprintf(why[j], sizeof why[j],
                     "a slowdown of %g leaves the foreground no time to lose to background work",
                     o->slowdown);
        else if (!(step > 0) || !isfinite(step))
            snprintf(why[j], sizeof why[j], "its step takes no time in the cost model");
        else if (pre > 0 && pre > budget)
            snprintf(why[j], sizeof why[j],
                     "the preemption delay %.3f ms is longer than the slowdown's budget %.3f ms "
                     "(the limit %.3f ms less the iteration's %.3f ms)",
                     pre * 1e3, budget * 1e3, limit_t * 1e3, T0 * 1e3);
        else if (!(pre > 0) && longest > budget)
            snprintf(why[j], sizeof why[j],
                     "%s takes %.3f ms, longer than the slowdown's budget %.3f ms (the limit "
                     "%.3f ms less the iteration's %.3f ms; a slice cannot split an op)",
                     un, longest * 1e3, budget * 1e3, limit_t * 1e3, T0 * 1e3);
        else
            sliceable[j] = true;
    }

    /* Copies where memory holds them, in rank order then job order. */
    double *fgmem = plan_xcalloc((size_t)G, sizeof(double));
    plan_rank_memory(p, r, fgmem);
    double cap = p->cluster.mem_bytes;
    int copycap = 0;
    int64_t *cop0 = plan_xcalloc((size_t)G + 1, sizeof(int64_t));
    for (int g = 0; g < G; g++) {
        double used = fgmem[g], others = 0;
        for (int j = 0; j < njobs; j++) {
            if (cap > 0 && used + jobs[j].mem_bytes > cap) {
                char a[32], b[32], c[32], e[32];
                fmt_bytes(jobs[j].mem_bytes, a, sizeof a);
                fmt_bytes(fgmem[g], b, sizeof b);
                fmt_bytes(others, c, sizeof c);
                fmt_bytes(cap, e, sizeof e);
                if (others > 0)
                    refuse(out, &refcap, j, g,
                           "needs %s beside the foreground's %s and %s of other background "
                           "copies, of %s",
                           a, b, c, e);
                else
                    refuse(out, &refcap, j, g, "needs %s beside the foreground's %s of %s", a, b,
                           e);
                continue;
            }
            if (!sliceable[j]) {
                refuse(out, &refcap, j, g, "%s", why[j]);
                continue;
            }
            used += jobs[j].mem_bytes;
            others += jobs[j].mem_bytes;
            if (out->ncopies == copycap) {
                copycap = copycap ? 2 * copycap : 16;
                out->copies = plan_xrealloc(out->copies, (size_t)copycap, sizeof *out->copies);
            }
            plan_mux_copy *c = &out->copies[out->ncopies++];
            memset(c, 0, sizeof *c);
            c->job = j;
            c->rank = g;
            c->seed = plan_mux_seed(j, g);
            c->cut = plan_xcalloc((size_t)jobs[j].nunits + 1, sizeof(int));
            c->dur = plan_xcalloc((size_t)jobs[j].nunits, sizeof(double));
        }
        cop0[g + 1] = out->ncopies;
    }
    free(sliceable);
    free(why);
    free(fgmem);

    try_st t = {.tl = tl,
                .o = o,
                .jobs = jobs,
                .bound = bound,
                .pre = pre,
                .copies = out->copies,
                .ncopies = out->ncopies,
                .cop0 = cop0};
    t.nsteps = tl->prog0[tl->ncls];
    t.bg_peer = plan_xcalloc((size_t)t.nsteps, sizeof(double));
    t.bg_comm = plan_xcalloc((size_t)t.nsteps, sizeof(double));
    t.bg_shard = plan_xcalloc((size_t)t.nsteps, sizeof(double));
    t.bg_end = plan_xcalloc((size_t)tl->ncls, sizeof(double));
    t.placed = plan_xcalloc((size_t)out->ncopies + 1, sizeof(double));

    /* The tries: cut at bound / div, overrun up to theta. */
    static const int divs[] = {1, 2, 4, 8};
    static const double thetas[] = {0, 0.125, 0.25, 0.5, 1};
    double best = -1, bestT = T0, best_theta = 0, best_pre = 0, best_room = 0;
    int best_div = 1;
    static const double pre_rooms[] = {0, 1, 2, 4, 8, 32};
    enum { NPRE = sizeof pre_rooms / sizeof pre_rooms[0] };
    double limit = limit_t * (1 - 1e-12);
    for (size_t di = 0; di < sizeof divs / sizeof divs[0] && out->ncopies > 0; di++) {
        /* Finer cuts until one would leave a unit no longer than the bound on
         * its own (long units are alone at every cut). */
        double b = bound / divs[di];
        bool ok = true;
        for (int c = 0; c < out->ncopies && ok; c++) {
            const plan_bg_job *j = &jobs[out->copies[c].job];
            for (int u = 0; u < j->nunits && ok; u++)
                ok = j->unit[u] <= b || j->unit[u] > bound;
        }
        if (!ok)
            break;
        cut_copies(&t, b);
        /* Preemptive (at the first cut): first the tries of the least room
         * in which a slice that does not fit is started (preempted at the
         * window's end), 0, 1, 2, 4, 8, 32 x the delay; then the
         * non-preemptive ones, whose overruns preemption only shortens. */
        int npre = pre > 0 && di == 0 && !o->fit_only ? NPRE : 0;
        int ntries = npre + (o->fit_only ? 1 : (int)(sizeof thetas / sizeof thetas[0]));
        for (int ti = 0; ti < ntries; ti++) {
            double th = ti < npre ? 0 : thetas[ti - npre] * bound;
            t.pre = ti < npre ? pre : 0;
            t.min_room = ti < npre ? pre * pre_rooms[ti] : 0;
            double T = place(&t, th, false);
            if (T > limit && T > T0)
                continue;
            /* The objective: cluster throughput, foreground + background. */
            double rate = bg_rate(&t, T) + (double)p->batch / T;
            if (rate > best * (1 + 1e-9) || (rate >= best && T < bestT)) {
                best = rate;
                bestT = T;
                best_div = divs[di];
                best_theta = th;
                best_pre = t.pre;
                best_room = t.min_room;
            }
        }
    }
    /* The chosen try, recorded. */
    if (out->ncopies > 0) {
        cut_copies(&t, bound / best_div);
        t.pre = best_pre;
        t.min_room = best_room;
        double T = place(&t, best_theta, true);
        out->fg_time_bg = fmax(T, T0);
        out->cut_div = best_div;
        out->overrun = best_theta;
        out->preempt = best_pre;
    }
    /* Copies that got no slice: refused, and taken out. */
    int keep = 0;
    double work = 0;
    int *newidx = plan_xcalloc((size_t)out->ncopies + 1, sizeof(int));
    for (int c = 0; c < out->ncopies; c++) {
        plan_mux_copy *cp = &out->copies[c];
        if (t.placed[c] == 0) {
            double shortest = INFINITY;
            for (int s = 0; s < cp->nslices; s++)
                shortest = fmin(shortest, cp->dur[s]);
            refuse(out, &refcap, cp->job, cp->rank,
                   "no idle window on this rank holds a slice (the shortest takes %.3f ms)",
                   shortest * 1e3);
            free(cp->cut);
            free(cp->dur);
            newidx[c] = -1;
            continue;
        }
        cp->steps_per_iter = t.placed[c] / cp->nslices;
        newidx[c] = keep;
        out->copies[keep++] = *cp;
    }
    out->ncopies = keep;
    /* (a preempted piece of a copy that completed no slice goes with it) */
    int64_t nkept = 0;
    for (int64_t s = 0; s < t.nslices; s++) {
        if (newidx[t.slices[s].copy] < 0)
            continue;
        t.slices[s].copy = newidx[t.slices[s].copy];
        work += t.slices[s].dur;
        t.slices[nkept++] = t.slices[s];
    }
    t.nslices = nkept;
    free(newidx);
    out->slices = t.slices;
    out->nslices = t.nslices;
    /* Refusals in rank order, then job order (stable: insertion sort by key
     * would be quadratic; a counting pass by rank keeps it linear). */
    if (out->nrefusals > 1) {
        int64_t *cnt = plan_xcalloc((size_t)G + 1, sizeof(int64_t));
        for (int i = 0; i < out->nrefusals; i++)
            cnt[out->refusals[i].rank + 1]++;
        for (int g = 0; g < G; g++)
            cnt[g + 1] += cnt[g];
        plan_mux_refusal *sorted = plan_xcalloc((size_t)out->nrefusals, sizeof *sorted);
        for (int i = 0; i < out->nrefusals; i++)
            sorted[cnt[out->refusals[i].rank]++] = out->refusals[i];
        /* Within a rank: by job (at most njobs entries per rank, and each job
         * at most once, so a short insertion sort). */
        for (int i = 1; i < out->nrefusals; i++) {
            plan_mux_refusal x = sorted[i];
            int k = i - 1;
            while (k >= 0 && sorted[k].rank == x.rank && sorted[k].job > x.job) {
                sorted[k + 1] = sorted[k];
                k--;
            }
            sorted[k + 1] = x;
        }
        free(out->refusals);
        out->refusals = sorted;
        free(cnt);
    }
    double Tb = out->fg_time_bg;
    out->fg_samples_per_s = Tb > 0 ? (double)p->batch / Tb : 0;
    out->bg_samples_per_s = 0;
    double bg_gpu = 0; /* the copies' steps per iteration in seconds of a dedicated GPU */
    for (int c = 0; c < out->ncopies; c++) {
        const plan_bg_job *b = &jobs[out->copies[c].job];
        double step = plan_bg_step_time(b);
        out->bg_samples_per_s += out->copies[c].steps_per_iter * (double)b->batch;
        bg_gpu += out->copies[c].steps_per_iter * step;
    }
    out->gpu_equivalents = Tb > 0 ? (one + bg_gpu) / Tb : 0;
    out->bg_samples_per_s = Tb > 0 ? out->bg_samples_per_s / Tb : 0;
    out->cluster_samples_per_s = out->fg_samples_per_s + out->bg_samples_per_s;
    /* Idle with background: the windows' time stretched to Tb, less the work. */
    out->idle_bg = Tb > 0 ? fmax(0, (idle + G * (Tb - T0) - work) / (G * Tb)) : 0;
    /* Leave tl as it was: the schedule without background. */
    plan_timeline_schedule(tl);
    free(t.bg_peer);
    free(t.bg_comm);
    free(t.bg_shard);
    free(t.bg_end);
    free(t.placed);
    free(cop0);
    (void)err;
    return true;
}

bool plan_mux_init(const plan_problem *p, plan_mux_options *o, char *err, size_t errlen)
{
    double fastest = INFINITY;
    char e[512] = "";
    /* Every plan_solve plan is priced by its timeline (plan_price_schedule): its time is
     * the timeline's. burst comes last and takes the plans solved before it as candidates
     * instead of solving them again. */
    plan_result r[PS_COUNT];
    const plan_result *known[PS_COUNT] = {NULL};
    for (int s = 0; s < PS_COUNT; s++) {
        if (!plan_solve_known(p, (plan_strategy)s, known, &r[s], e, sizeof e))
            continue;
        fastest = fmin(fastest, r[s].time);
        known[s] = &r[s];
    }
    for (int s = 0; s < PS_COUNT; s++)
        if (known[s])
            plan_result_free(&r[s]);
    if (!isfinite(fastest)) {
        snprintf(err, errlen, "%s", e[0] ? e : "no strategy's plan has a timeline");
        return false;
    }
    o->time_ref = fastest;
    o->time_limit = o->slowdown * fastest;
    return true;
}
