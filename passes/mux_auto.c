/*
 * mux_auto.c: `amplification = auto` with background jobs, the plan with
 * the highest predicted cluster throughput under the job's one limit
 * (docs/plan.md, "amplification = auto").
 *
 * IR-independent (plan.h). Two stages. First a parametric search on the
 * frontier's price (plan_auto_search): with rho the background's samples
 * per GPU-second of its own work, a plan of time T and GPU-seconds S leaves
 * G T - S GPU-seconds idle, worth about rho (G T - S) background samples,
 * so its cluster throughput is about f = rho G + (B - rho S) / T. The ratio
 * (B - rho S) / T is linear-fractional: Dinkelbach's iterations maximise it
 * with one planner call each, the plan minimising q T + rho S at the
 * current ratio q (plan_solve_weighted at price rho / q), and the maximum
 * over the planner's plans is a vertex of the frontier (the lower convex
 * hull of (S, T)). The constraint, the foreground's time at most the limit,
 * is met by walking the hull: when an iteration's plan is over the limit,
 * the search bisects the hull between the last plan within it and that one
 * (the price at which both cost the same, as frontier.c does) to the
 * slowest vertex within the limit; when q <= 0 (the background is worth
 * more per GPU-second than the foreground) the optimum is the slowest
 * vertex within the limit too. Then the exact stage (plan_mux_auto): the
 * interleave pass's own prediction (plan_interleave, with every window, slice
 * and the slowdown's budget) of the few best vertices by the estimate, the
 * fastest plan, and for burst the plans of dp, deeppool (at the limits its
 * own auto tries) and pow2, which burst's search space holds: the one with
 * the highest predicted cluster throughput and its foreground with
 * background within the limit is the choice, so burst + mux is never below
 * the other strategies' multiplexing under the same limit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* The relative margin by which a plan must be below a hull segment to be a
 * new vertex, and by which a ratio must grow for Dinkelbach to go on. */
#define AUTO_EPS   1e-9
/* At most this many planner calls in one search. */
#define AUTO_CALLS 96

static double score(double B, int G, double rho, double T, double S)
{
    return T > 0 ? rho * G + (B - rho * S) / T : 0;
}

/* Records the vertex unless already there; returns its index or -1 when full. */
static int visit(plan_auto_vertex *v, int *n, int maxv, double tw, double gw, double T, double S,
                 double B, int G, double rho, double limit)
{
    for (int i = 0; i < *n; i++)
        if (v[i].time == T && v[i].gpu_seconds == S)
            return i;
    if (*n >= maxv)
        return -1;
    plan_auto_vertex *x = &v[(*n)++];
    x->time_weight = tw;
    x->gpu_weight = gw;
    x->time = T;
    x->gpu_seconds = S;
    x->feasible = T <= limit * (1 + 1e-12);
    x->score = x->feasible ? score(B, G, rho, T, S) : (T > 0 ? B / T : 0);
    return *n - 1;
}

static int by_score(const void *a, const void *b)
{
    const plan_auto_vertex *x = a, *y = b;
    if (x->feasible != y->feasible)
        return x->feasible ? -1 : 1;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->time > y->time) - (x->time < y->time);
}

/* The slowest vertex within the limit on the hull between vertices a
 * (within it) and b (over it, cheaper): bisection by the price at which two
 * vertices cost the same. Returns its index in v. */
static int walk(plan_auto_oracle *f, void *ctx, plan_auto_vertex *v, int *n, int maxv, int *calls,
                int a, int b, double batch, int G, double rho, double limit)
{
    while (*calls < AUTO_CALLS) {
        plan_auto_vertex A = v[a], Bv = v[b];
        if (!(A.gpu_seconds > Bv.gpu_seconds) || !(Bv.time > A.time))
            break;
        double lam = (Bv.time - A.time) / (A.gpu_seconds - Bv.gpu_seconds), T, S;
        if (!f(ctx, 1, lam, &T, &S))
            break;
        (*calls)++;
        double val = T + lam * S, va = A.time + lam * A.gpu_seconds;
        if (!(val < va - AUTO_EPS * fabs(va)))
            break; /* a and b are adjacent vertices */
        int m = visit(v, n, maxv, 1, lam, T, S, batch, G, rho, limit);
        if (m < 0)
            break;
        if (v[m].feasible)
            a = m;
        else
            b = m;
    }
    return a;
}

int plan_auto_search(plan_auto_oracle *f, void *ctx, double batch, int G, double rho, double limit,
                     plan_auto_vertex *v, int maxv)
{
    int n = 0, calls = 0;
    double T, S;
    if (maxv < 1 || !f(ctx, 1, 0, &T, &S))
        return 0;
    calls++;
    int a = visit(v, &n, maxv, 1, 0, T, S, batch, G, rho, limit); /* the fastest */
    if (!v[a].feasible || !(rho > 0)) {
        qsort(v, (size_t)n, sizeof *v, by_score);
        return n;
    }
    /* cur: the best vertex within the limit so far (its index in v). The
     * subproblem of an iteration is min q T + rho S over the plans within
     * the limit: the planner's plan when it is within it, else (the sum is
     * unimodal along the hull) the slowest vertex within the limit, found
     * once by walking the hull between cur and that plan. */
    int cur = a, slow = -1;
    while (calls < AUTO_CALLS) {
        double q = (batch - rho * v[cur].gpu_seconds) / v[cur].time;
        double tw = q > 0 ? 1 : 1e-9, gw = q > 0 ? rho / q : 1;
        if (!f(ctx, tw, gw, &T, &S))
            break;
        calls++;
        int b = visit(v, &n, maxv, tw, gw, T, S, batch, G, rho, limit);
        if (b < 0)
            break;
        if (!v[b].feasible) {
            if (slow < 0)
                slow = walk(f, ctx, v, &n, maxv, &calls, cur, b, batch, G, rho, limit);
            b = slow;
        }
        /* Dinkelbach: the new plan's ratio is at least q; stop when it
         * does not grow. */
        double qb = (batch - rho * v[b].gpu_seconds) / v[b].time;
        if (b == cur || !(qb > q + AUTO_EPS * fabs(q)))
            break;
        cur = b;
    }
    qsort(v, (size_t)n, sizeof *v, by_score);
    return n;
}

/* The background's samples per GPU-second of its own work: copies on one
 * rank take turns a whole step each, so a GPU-second of background is
 * sum(batch) / sum(step) samples. */
static double background_rate(const plan_bg_job *jobs, int njobs)
{
    double samples = 0, secs = 0;
    for (int j = 0; j < njobs; j++) {
        double step = 0;
        for (int u = 0; u < jobs[j].nunits; u++)
            step += jobs[j].unit[u];
        if (!(step > 0) || !isfinite(step))
            continue;
        samples += (double)jobs[j].batch;
        secs += step;
    }
    return secs > 0 ? samples / secs : 0;
}

/* The oracle over a real problem: the plan of strategy s at the weights,
 * its timeline time (the schedule the runtime follows, as the limit is). */
typedef struct oracle_ctx {
    const plan_problem *p;
    plan_strategy s;
} oracle_ctx;

static bool timeline_time(const plan_problem *p, const plan_result *r, double *T)
{
    plan_timeline tl;
    char e[256];
    if (!plan_timeline_build(p, r, &tl, e, sizeof e))
        return false;
    *T = tl.time;
    plan_timeline_free(&tl);
    return true;
}

static bool real_oracle(void *vctx, double tw, double gw, double *T, double *S)
{
    oracle_ctx *c = vctx;
    plan_result r;
    char e[512];
    if (!plan_solve_weighted(c->p, c->s, tw, gw, &r, e, sizeof e))
        return false;
    bool ok = timeline_time(c->p, &r, T);
    *S = r.gpu_seconds;
    plan_result_free(&r);
    return ok;
}

/* One candidate of the exact stage: its plan, its multiplexing, and where
 * it came from. */
typedef struct cand {
    plan_result r;
    plan_mux_result mx;
    char from[96];
} cand;

typedef struct cands {
    cand *c;
    int n, cap;
} cands;

/* Interleaves r and keeps it as a candidate (takes r). */
static void add_cand(cands *cs, const plan_problem *p, plan_result *r, const plan_bg_job *jobs,
                     int njobs, const plan_mux_options *o, const char *from)
{
    plan_mux_result mx;
    char e[512];
    if (!plan_mux_plan(p, r, jobs, njobs, o, &mx, e, sizeof e)) {
        plan_result_free(r);
        return;
    }
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 16;
        cs->c = plan_xrealloc(cs->c, (size_t)cs->cap, sizeof *cs->c);
    }
    cand *c = &cs->c[cs->n++];
    c->r = *r;
    c->mx = mx;
    snprintf(c->from, sizeof c->from, "%s", from);
}

/* DeepPool's own knob, the amplification limit of its greedy filter: the
 * limits its auto tries (0: none). */
static const double dp_limits[] = {1, 1.25, 1.5, 2, 3, 4, 6, 8, 0};

static void add_deeppool(cands *cs, const plan_problem *p, const plan_bg_job *jobs, int njobs,
                         const plan_mux_options *o)
{
    for (size_t i = 0; i < sizeof dp_limits / sizeof dp_limits[0]; i++) {
        plan_problem q = *p;
        q.amp_limit = dp_limits[i];
        plan_result r;
        char e[512], from[96];
        if (!plan_solve(&q, PS_DEEPPOOL, &r, e, sizeof e))
            continue;
        if (dp_limits[i] > 0)
            snprintf(from, sizeof from, "deeppool's plan at limit %g", dp_limits[i]);
        else
            snprintf(from, sizeof from, "deeppool's plan without a limit");
        add_cand(cs, p, &r, jobs, njobs, o, from);
    }
}

/* The parametric search over strategy s's frontier, then its best few
 * vertices and its fastest plan as candidates. */
static void add_frontier(cands *cs, const plan_problem *p, plan_strategy s, const plan_bg_job *jobs,
                         int njobs, const plan_mux_options *o, int *nvisited)
{
    oracle_ctx oc = {p, s};
    plan_auto_vertex v[AUTO_CALLS + 1];
    double limit = o->time_limit > 0 ? o->time_limit : INFINITY;
    int n = plan_auto_search(real_oracle, &oc, (double)p->batch, p->cluster.gpus,
                             background_rate(jobs, njobs), limit, v, AUTO_CALLS + 1);
    if (nvisited)
        *nvisited = n;
    bool fastest = false;
    for (int i = 0; i < n; i++) {
        bool is_fast = v[i].time_weight == 1 && v[i].gpu_weight == 0;
        if (i >= PLAN_AUTO_EXACT && (!is_fast || fastest))
            continue;
        fastest = fastest || is_fast;
        plan_result r;
        char e[512], from[96];
        if (!plan_solve_weighted(p, s, v[i].time_weight, v[i].gpu_weight, &r, e, sizeof e))
            continue;
        if (is_fast)
            snprintf(from, sizeof from, "%s's fastest plan", plan_strategy_name(s));
        else
            snprintf(from, sizeof from, "%s's frontier vertex at price %.4g", plan_strategy_name(s),
                     v[i].gpu_weight / v[i].time_weight);
        add_cand(cs, p, &r, jobs, njobs, o, from);
    }
}

bool plan_mux_plan(const plan_problem *p, const plan_result *r, const plan_bg_job *jobs, int njobs,
                   const plan_mux_options *o, plan_mux_result *out, char *err, size_t errlen)
{
    plan_timeline tl;
    memset(out, 0, sizeof *out);
    if (!plan_timeline_build(p, r, &tl, err, errlen))
        return false;
    bool ok = plan_interleave(&tl, r, jobs, njobs, o, out, err, errlen);
    plan_timeline_free(&tl);
    return ok;
}

bool plan_mux_at_price(const plan_problem *p, plan_strategy s, double price,
                       const plan_bg_job *jobs, int njobs, const plan_mux_options *o,
                       plan_result *r, plan_mux_result *mx, char *err, size_t errlen)
{
    plan_problem q = *p;
    q.gpu_budget = 0;
    bool ok = isinf(price) ? plan_solve_weighted(&q, s, 1e-9, 1, r, err, errlen)
                           : plan_solve_weighted(&q, s, 1, price, r, err, errlen);
    if (!ok)
        return false;
    if (!plan_mux_plan(&q, r, jobs, njobs, o, mx, err, errlen)) {
        plan_result_free(r);
        return false;
    }
    return true;
}

bool plan_mux_auto(const plan_problem *p, plan_strategy s, const plan_bg_job *jobs, int njobs,
                   const plan_mux_options *o, plan_result *out, plan_mux_result *mux, char *why,
                   size_t whylen, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = 0;
    if (mux)
        memset(mux, 0, sizeof *mux);
    plan_problem q = *p;
    q.amp_limit = 0;
    q.gpu_budget = 0;
    q.price = 0;
    cands cs = {0};
    int nvisited = 0;
    if (s == PS_DP || s == PS_BURST) {
        plan_result r;
        char e[512];
        if (plan_solve(&q, PS_DP, &r, e, sizeof e))
            add_cand(&cs, &q, &r, jobs, njobs, o, "dp's plan");
        else if (s == PS_DP)
            snprintf(err, errlen, "%s", e);
    }
    if (s == PS_DEEPPOOL || s == PS_BURST)
        add_deeppool(&cs, &q, jobs, njobs, o);
    if (s == PS_POW2 || s == PS_BURST)
        add_frontier(&cs, &q, PS_POW2, jobs, njobs, o, s == PS_POW2 ? &nvisited : NULL);
    if (s == PS_BURST)
        add_frontier(&cs, &q, PS_BURST, jobs, njobs, o, &nvisited);
    /* The choice: within the limit with background, the highest cluster
     * throughput, ties to the faster foreground; when none is within it,
     * the fastest foreground. */
    int best = -1;
    for (int i = 0; i < cs.n; i++) {
        const plan_mux_result *x = &cs.c[i].mx;
        bool in = x->fg_time_bg <= x->time_limit * (1 + 1e-9);
        if (best < 0) {
            best = i;
            continue;
        }
        const plan_mux_result *y = &cs.c[best].mx;
        bool bin = y->fg_time_bg <= y->time_limit * (1 + 1e-9);
        bool better;
        if (in != bin)
            better = in;
        else if (in)
            better = x->cluster_samples_per_s > y->cluster_samples_per_s * (1 + 1e-9) ||
                     (x->cluster_samples_per_s >= y->cluster_samples_per_s * (1 - 1e-9) &&
                      x->fg_time_bg < y->fg_time_bg);
        else
            better = x->fg_time_bg < y->fg_time_bg;
        if (better)
            best = i;
    }
    if (best < 0) {
        if (!(errlen && err[0]))
            snprintf(err, errlen, "no %s plan to multiplex", plan_strategy_name(s));
        free(cs.c);
        return false;
    }
    cand *c = &cs.c[best];
    const plan_mux_result *x = &c->mx;
    int ndp = 0, ndeep = 0, npow2 = 0, nburst = 0;
    for (int i = 0; i < cs.n; i++) {
        const char *w = cs.c[i].from;
        ndp += strncmp(w, "dp's", 4) == 0;
        ndeep += strncmp(w, "deeppool's", 10) == 0;
        npow2 += strncmp(w, "pow2's", 6) == 0;
        nburst += strncmp(w, "burst's", 7) == 0;
    }
    char list[200] = "", *e = list;
    const char *sep = "";
    if (ndp)
        e += snprintf(e, sizeof list - (size_t)(e - list), "%sdp's plan", sep), sep = ", ";
    if (ndeep)
        e += snprintf(e, sizeof list - (size_t)(e - list), "%sdeeppool's at %d limits", sep, ndeep),
            sep = ", ";
    if (npow2)
        e += snprintf(e, sizeof list - (size_t)(e - list), "%s%d of pow2's frontier", sep, npow2),
            sep = ", ";
    if (nburst)
        e += snprintf(e, sizeof list - (size_t)(e - list), "%s%d of burst's frontier", sep, nburst);
    char met[64] = "";
    if (s == PS_POW2 || s == PS_BURST)
        snprintf(met, sizeof met, " (%d plan%s the search met)", nvisited,
                 nvisited == 1 ? "" : "s");
    snprintf(why, whylen,
             "amplification = auto: %s, the highest predicted cluster throughput of %d "
             "candidates (%s%s, each interleaved), %.1f samples/s (fg %.1f + bg %.1f; %.3f "
             "GPU-equivalents), with the foreground at %.4f ms, within %g x the fastest plan's "
             "%.4f ms",
             c->from, cs.n, list, met, x->cluster_samples_per_s, x->fg_samples_per_s,
             x->bg_samples_per_s, x->gpu_equivalents, x->fg_time_bg * 1e3, o->slowdown,
             o->time_ref * 1e3);
    *out = c->r;
    out->strategy = s;
    if (s != PS_DEEPPOOL)
        out->own_time = out->own_gpu_seconds = 0;
    if (mux)
        *mux = c->mx;
    else
        plan_mux_result_free(&c->mx);
    for (int i = 0; i < cs.n; i++)
        if (i != best) {
            plan_result_free(&cs.c[i].r);
            plan_mux_result_free(&cs.c[i].mx);
        }
    free(cs.c);
    return true;
}

void plan_mux_point_free(plan_mux_point *x)
{
    plan_result_free(&x->r);
    plan_mux_result_free(&x->mux);
}

/* Keeps (takes) r and its multiplexing as the next point unless a point
 * of the same time and GPU-seconds is there; false when full. */
static void result_copy(plan_result *to, const plan_result *from)
{
    *to = *from;
    to->layer = plan_xcalloc((size_t)from->nlayers + 1, sizeof *to->layer);
    if (from->nlayers > 0)
        memcpy(to->layer, from->layer, (size_t)from->nlayers * sizeof *to->layer);
}

static bool add_point(plan_mux_point *pts, int *n, int maxpts, const plan_problem *p,
                      plan_result *r, const plan_bg_job *jobs, int njobs, const plan_mux_options *o,
                      const char *from, double price, bool vertex)
{
    for (int i = 0; i < *n; i++)
        if (pts[i].r.time == r->time && pts[i].r.gpu_seconds == r->gpu_seconds) {
            plan_result_free(r);
            return true;
        }
    if (*n >= maxpts) {
        plan_result_free(r);
        return false;
    }
    plan_mux_point *x = &pts[*n];
    memset(x, 0, sizeof *x);
    char e[512];
    if (!plan_mux_plan(p, r, jobs, njobs, o, &x->mux, e, sizeof e)) {
        plan_result_free(r);
        return true;
    }
    x->r = *r;
    x->r.strategy = PS_BURST;
    snprintf(x->from, sizeof x->from, "%s", from);
    x->price = price;
    x->vertex = vertex;
    (*n)++;
    return true;
}

int plan_mux_frontier_hull(const plan_problem *p, const plan_bg_job *jobs, int njobs,
                           const plan_mux_options *o, plan_mux_point *pts, int maxpts,
                           plan_point *hull, int *nhull)
{
    plan_problem q = *p;
    q.gpu_budget = 0;
    q.price = 0;
    plan_point own[64];
    plan_result plans[64];
    if (!hull)
        hull = own;
    int nh = plan_frontier_plans(&q, hull, plans, 64), n = 0;
    if (nhull)
        *nhull = nh;
    char e[512], from[96];
    for (int i = 0; i < nh; i++) {
        plan_result r = plans[i];
        plans[i].layer = NULL;
        snprintf(from, sizeof from, "burst's frontier vertex at price %.4g", hull[i].price);
        plan_result copy;
        result_copy(&copy, &r);
        int before = n;
        if (!add_point(pts, &n, maxpts, &q, &r, jobs, njobs, o, from, hull[i].price, true)) {
            plan_result_free(&copy);
            break;
        }
        if (n == before || pts[n - 1].mux.fg_time_bg <= pts[n - 1].mux.fg_time) {
            plan_result_free(&copy); /* the same plan as a row before, or nothing slowed */
            continue;
        }
        /* The same plan with the foreground unslowed. */
        plan_mux_options fit = *o;
        fit.fit_only = true;
        if (n >= maxpts) {
            plan_result_free(&copy);
            break;
        }
        plan_mux_point *x = &pts[n];
        memset(x, 0, sizeof *x);
        if (!plan_mux_plan(&q, &copy, jobs, njobs, &fit, &x->mux, e, sizeof e)) {
            plan_result_free(&copy);
            continue;
        }
        x->r = copy;
        x->r.strategy = PS_BURST;
        snprintf(x->from, sizeof x->from, "burst's frontier vertex at price %.4g, slices that fit",
                 hull[i].price);
        x->price = hull[i].price;
        x->vertex = x->fit_only = true;
        n++;
    }
    for (int i = 0; i < nh; i++)
        plan_result_free(&plans[i]); /* those left when the rows are full */
    /* The other strategies' plans, which burst's search space holds. */
    plan_result r;
    if (plan_solve(&q, PS_DP, &r, e, sizeof e))
        add_point(pts, &n, maxpts, &q, &r, jobs, njobs, o, "dp's plan", -1, false);
    for (size_t i = 0; i < sizeof dp_limits / sizeof dp_limits[0]; i++) {
        plan_problem d = q;
        d.amp_limit = dp_limits[i];
        if (!plan_solve(&d, PS_DEEPPOOL, &r, e, sizeof e))
            continue;
        if (dp_limits[i] > 0)
            snprintf(from, sizeof from, "deeppool's plan at limit %g", dp_limits[i]);
        else
            snprintf(from, sizeof from, "deeppool's plan without a limit");
        add_point(pts, &n, maxpts, &q, &r, jobs, njobs, o, from, -1, false);
    }
    /* Pareto: no other point at least as high in both foreground and
     * cluster samples/s and higher in one. */
    for (int i = 0; i < n; i++) {
        const plan_mux_result *a = &pts[i].mux;
        pts[i].pareto = true;
        for (int j = 0; j < n && pts[i].pareto; j++) {
            const plan_mux_result *b = &pts[j].mux;
            if (j != i && b->fg_samples_per_s >= a->fg_samples_per_s &&
                b->cluster_samples_per_s >= a->cluster_samples_per_s &&
                (b->fg_samples_per_s > a->fg_samples_per_s ||
                 b->cluster_samples_per_s > a->cluster_samples_per_s))
                pts[i].pareto = false;
        }
    }
    return n;
}

int plan_mux_frontier(const plan_problem *p, const plan_bg_job *jobs, int njobs,
                      const plan_mux_options *o, plan_mux_point *pts, int maxpts)
{
    return plan_mux_frontier_hull(p, jobs, njobs, o, pts, maxpts, NULL, NULL);
}
