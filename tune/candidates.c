/*
 * candidates.c: the plans the tuner compares.
 *
 * A cost model ranks plans well enough to shortlist them, not to pick the
 * winner among close ones. The shortlist: every strategy (dp, deeppool, pow2,
 * burst) at the job's amplification limit and at a ladder of other limits,
 * and the burst plans of the Pareto frontier (time against GPU-seconds).
 * Settings that give the same plan (every layer on the same ranks) are one
 * candidate; the first setting found names it.
 *
 * A job with background jobs is tuned for its cluster throughput: every plan
 * whose idle time takes copies of the background jobs (the interleave
 * pass's placement, plan_interleave) is two candidates, packed and unpacked,
 * since packing buys background samples with foreground time and only a
 * measurement says which is worth more here.
 */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Limits tried besides the job's; 0 means none. */
static const double amp_ladder[] = {1.5, 2, 3, 4, 0};

#define MAX_FRONTIER 64

static bool same_plan(const plan_result *a, const plan_result *b)
{
    if (a->nlayers != b->nlayers)
        return false;
    for (int l = 0; l < a->nlayers; l++)
        if (a->layer[l].k != b->layer[l].k || a->layer[l].first != b->layer[l].first)
            return false;
    return true;
}

typedef struct pool {
    tune_candidate *c;
    int n, cap;
    char why[1024]; /* why the first plan was dropped */
} pool;

/* Adds a solved plan unless an equal one is there (then it counts as an alias)
 * or it does not fit in a GPU's memory (deeppool's own search does not ask). */
static void add(pool *pl, const plan_problem *p, plan_result *r, const char *name, plan_strategy s,
                double amp, double price)
{
    if (p->cluster.mem_bytes > 0 && r->peak_mem > p->cluster.mem_bytes) {
        if (!pl->why[0])
            snprintf(pl->why, sizeof pl->why,
                     "%s plan: needs %.0f bytes on rank %d, more than a GPU's %.0f", name,
                     r->peak_mem, r->peak_mem_rank, p->cluster.mem_bytes);
        plan_result_free(r);
        return;
    }
    for (int i = 0; i < pl->n; i++)
        if (same_plan(&pl->c[i].plan, r)) {
            pl->c[i].aliases++;
            plan_result_free(r);
            return;
        }
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? 2 * pl->cap : 16;
        pl->c = plan_xrealloc(pl->c, (size_t)pl->cap, sizeof *pl->c);
    }
    tune_candidate *c = &pl->c[pl->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->strategy = s;
    c->amp_limit = amp;
    c->price = price;
    c->plan = *r;
}

static void amp_name(char *buf, size_t n, plan_strategy s, double amp)
{
    if (s == PS_DP)
        snprintf(buf, n, "dp");
    else if (amp > 0)
        snprintf(buf, n, "%s amp=%g", plan_strategy_name(s), amp);
    else
        snprintf(buf, n, "%s amp=none", plan_strategy_name(s));
}

static int by_time(const void *x, const void *y)
{
    const tune_candidate *a = x, *b = y;
    if (a->plan.time != b->plan.time)
        return a->plan.time < b->plan.time ? -1 : 1;
    return strcmp(a->name, b->name);
}

double tune_candidate_metric(const tune_candidate *c, tune_metric m)
{
    return tune_metric_value(m, &c->pred);
}

static void predict_unpacked(tune_candidate *c)
{
    c->packed = false;
    c->pred_time = c->plan.time;
    c->pred = (tune_sample){.fg = c->plan.samples_per_s, .bg = 0};
}

/* The interleave pass's placement of c's plan (passes/interleave_ir.c):
 * under the job's one time limit (plan_mux_init). */
static bool place(const plan_problem *p, const tune_background *bg, const tune_candidate *c,
                  plan_mux_result *out, char *err, size_t errlen)
{
    plan_timeline tl;
    char e[512];
    if (!plan_timeline_build(p, &c->plan, &tl, e, sizeof e)) {
        snprintf(err, errlen, "candidate '%s': %s", c->name, e);
        return false;
    }
    bool ok = plan_interleave(&tl, &c->plan, bg->jobs, bg->njobs, &bg->mux, out, e, sizeof e);
    if (!ok)
        snprintf(err, errlen, "candidate '%s': interleave: %s", c->name, e);
    plan_timeline_free(&tl);
    return ok;
}

/* The packed twin of unpacked candidate u with its placement x (shares u's
 * plan and takes x: the caller decides who owns them). */
static tune_candidate packed_of(const tune_candidate *u, const plan_mux_result *x)
{
    tune_candidate c = *u;
    c.packed = true;
    c.pred_time = x->fg_time_bg;
    c.pred = (tune_sample){.fg = x->fg_samples_per_s, .bg = x->bg_samples_per_s};
    c.mux = *x;
    /* "+bg" names it; a name cut at 64 bytes keeps the suffix. */
    snprintf(c.name, sizeof c.name, "%.*s +bg", (int)sizeof c.name - 5, u->name);
    return c;
}

static void copy_plan(plan_result *dst, const plan_result *src)
{
    *dst = *src;
    dst->layer = plan_xcalloc((size_t)src->nlayers, sizeof *dst->layer);
    memcpy(dst->layer, src->layer, sizeof *dst->layer * (size_t)src->nlayers);
}

typedef struct keyed {
    int i;
    double key;
} keyed;

static int by_key(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return a->i - b->i;
}

/* With background jobs: places every distinct plan's copies, then keeps
 * plans (defaults first, then by the better predicted variant) and their
 * variants up to max. Takes pl's plans. */
static int select_variants(const plan_problem *p, const tune_background *bg, tune_metric metric,
                           tune_candidate *pl, int n, int defaults, int max, tune_candidate **out,
                           int *distinct, char *err, size_t errlen)
{
    plan_mux_result *mux = plan_xcalloc((size_t)n, sizeof *mux);
    keyed *order = plan_xcalloc((size_t)n, sizeof *order);
    int kept = 0, variants = 0;
    tune_candidate *c = NULL;
    for (int i = 0; i < n; i++) {
        predict_unpacked(&pl[i]);
        if (!place(p, bg, &pl[i], &mux[i], err, errlen)) {
            for (int k = 0; k < i; k++)
                plan_mux_result_free(&mux[k]);
            goto done;
        }
        pl[i].copies = mux[i].ncopies;
        tune_candidate packed = packed_of(&pl[i], &mux[i]);
        double k0 = tune_candidate_metric(&pl[i], metric);
        double k1 = mux[i].ncopies ? tune_candidate_metric(&packed, metric) : k0;
        order[i] = (keyed){i, fmax(k0, k1)};
        variants += mux[i].ncopies ? 2 : 1;
    }
    *distinct = variants;
    qsort(order, (size_t)defaults, sizeof *order, by_key);
    qsort(order + defaults, (size_t)(n - defaults), sizeof *order, by_key);
    c = plan_xcalloc((size_t)(max < variants ? max : variants), sizeof *c);
    for (int o = 0; o < n; o++) {
        int i = order[o].i;
        bool room = kept < max;
        if (!room || mux[i].ncopies == 0) {
            if (room)
                c[kept++] = pl[i];
            else
                plan_result_free(&pl[i].plan);
            plan_mux_result_free(&mux[i]);
            continue;
        }
        tune_candidate packed = packed_of(&pl[i], &mux[i]);
        bool packed_first =
            tune_candidate_metric(&packed, metric) > tune_candidate_metric(&pl[i], metric);
        if (kept + 2 <= max) {
            copy_plan(&packed.plan, &pl[i].plan);
            c[kept++] = pl[i];
            c[kept++] = packed;
        } else if (packed_first) {
            c[kept++] = packed; /* takes the plan */
        } else {
            c[kept++] = pl[i];
            plan_mux_result_free(&mux[i]);
        }
    }
    /* Best predicted first; ties keep the order above. */
    keyed *k = plan_xcalloc((size_t)kept, sizeof *k);
    for (int i = 0; i < kept; i++)
        k[i] = (keyed){i, tune_candidate_metric(&c[i], metric)};
    qsort(k, (size_t)kept, sizeof *k, by_key);
    *out = plan_xcalloc((size_t)kept, sizeof **out);
    for (int i = 0; i < kept; i++)
        (*out)[i] = c[k[i].i];
    free(k);
    free(c);
    c = *out;
done:
    free(mux);
    free(order);
    if (!c)
        for (int i = 0; i < n; i++)
            plan_result_free(&pl[i].plan);
    free(pl);
    return kept;
}

int tune_candidates(const plan_problem *p0, const tune_background *bg, tune_metric metric, int max,
                    tune_candidate **out, int *distinct, char *err, size_t errlen)
{
    *out = NULL;
    *distinct = 0;
    if (max < 1)
        max = 1;
    plan_problem p = *p0;
    pool pl = {0};
    char name[64], why[1024] = "";
    /* The job's own setting of every strategy first: those are kept. */
    int defaults = 0;
    for (int s = 0; s < PS_COUNT; s++) {
        plan_result r;
        char e[512];
        if (!plan_solve(&p, (plan_strategy)s, &r, e, sizeof e)) {
            if (!why[0])
                snprintf(why, sizeof why, "%s plan: %s", plan_strategy_name((plan_strategy)s), e);
            continue;
        }
        amp_name(name, sizeof name, (plan_strategy)s, p.amp_limit);
        add(&pl, &p, &r, name, (plan_strategy)s, p.amp_limit, 0);
    }
    defaults = pl.n;
    for (size_t a = 0; a < sizeof amp_ladder / sizeof amp_ladder[0]; a++) {
        double amp = amp_ladder[a];
        if (amp == p0->amp_limit || (amp <= 0 && p0->amp_limit <= 0))
            continue;
        p.amp_limit = amp;
        for (int s = PS_DEEPPOOL; s < PS_COUNT; s++) {
            plan_result r;
            char e[512];
            if (!plan_solve(&p, (plan_strategy)s, &r, e, sizeof e))
                continue;
            amp_name(name, sizeof name, (plan_strategy)s, amp);
            add(&pl, &p, &r, name, (plan_strategy)s, amp, 0);
        }
    }
    p.amp_limit = p0->amp_limit;
    plan_point pts[MAX_FRONTIER];
    int npts = plan_frontier(&p, pts, MAX_FRONTIER);
    for (int i = 0; i < npts; i++) {
        plan_problem q = p;
        q.price = pts[i].price;
        q.gpu_budget = 0;
        plan_result r;
        char e[512];
        if (!plan_solve(&q, PS_BURST, &r, e, sizeof e))
            continue;
        snprintf(name, sizeof name, "burst frontier %d", i + 1);
        add(&pl, &q, &r, name, PS_BURST, p.amp_limit, pts[i].price);
    }
    *distinct = pl.n;
    if (pl.n == 0) {
        snprintf(err, errlen, "%s", why[0] ? why : pl.why[0] ? pl.why : "no plan fits");
        free(pl.c);
        return 0;
    }
    if (bg && bg->njobs > 0)
        return select_variants(p0, bg, metric, pl.c, pl.n, defaults, max, out, distinct, err,
                               errlen);
    for (int i = 0; i < pl.n; i++)
        predict_unpacked(&pl.c[i]);
    /* Keep the defaults (up to max), then the fastest of the rest. */
    int keep_defaults = defaults < max ? defaults : max;
    if (pl.n > keep_defaults)
        qsort(pl.c + defaults, (size_t)(pl.n - defaults), sizeof *pl.c, by_time);
    if (keep_defaults < defaults) {
        qsort(pl.c, (size_t)defaults, sizeof *pl.c, by_time);
        for (int i = keep_defaults; i < defaults; i++)
            plan_result_free(&pl.c[i].plan);
        memmove(pl.c + keep_defaults, pl.c + defaults, sizeof *pl.c * (size_t)(pl.n - defaults));
        pl.n -= defaults - keep_defaults;
    }
    int kept = pl.n < max ? pl.n : max;
    for (int i = kept; i < pl.n; i++)
        plan_result_free(&pl.c[i].plan);
    qsort(pl.c, (size_t)kept, sizeof *pl.c, by_time);
    *out = pl.c;
    return kept;
}

void tune_candidates_free(tune_candidate *c, int n)
{
    for (int i = 0; i < n; i++) {
        plan_result_free(&c[i].plan);
        if (c[i].packed)
            plan_mux_result_free(&c[i].mux);
    }
    free(c);
}
