/*
 * test_mux_auto.c: amplification = auto with background jobs
 * (passes/mux_auto.c).
 *
 *   - the parametric search on hand-computed frontiers given by an oracle
 *     over a table of (time, GPU-seconds) points: the optimum of the
 *     estimate rho G + (B - rho S) / T is the vertex the hand computation
 *     gives, reached by Dinkelbach's iterations; a limit below it binds and
 *     the search walks the hull to the slowest vertex within it; no
 *     background: the fastest plan;
 *   - property, over random convex frontiers with points inside the hull:
 *     the search's best equals the best vertex within the limit by brute
 *     force, and without a limit no point of the table, vertex or not, is
 *     better (the optimum is a vertex);
 *   - plan_mux_auto on random small problems with random background jobs:
 *     burst's choice is within the limit and its cluster throughput is at
 *     least that of dp's, deeppool's and pow2's choices and of burst's
 *     fastest plan, all under the same limit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plan.h"
#include "random_problem.h"

typedef struct table {
    int n;
    double T[64], S[64];
    int calls;
} table;

/* The point least in tw T + gw S; ties to the faster. */
static bool table_oracle(void *ctx, double tw, double gw, double *T, double *S)
{
    table *t = ctx;
    t->calls++;
    int best = -1;
    double bv = INFINITY;
    for (int i = 0; i < t->n; i++) {
        double v = tw * t->T[i] + gw * t->S[i];
        if (best < 0 || v < bv * (1 - 1e-12) || (v <= bv * (1 + 1e-12) && t->T[i] < t->T[best])) {
            best = i;
            bv = v;
        }
    }
    if (best < 0)
        return false;
    *T = t->T[best];
    *S = t->S[best];
    return true;
}

static double est(double B, int G, double rho, double T, double S)
{
    return rho * G + (B - rho * S) / T;
}

static void test_hand(void)
{
    /* Four vertices of a convex frontier, seconds: slopes dS/dT -2, -1,
     * -1/8. B 16, G 8, rho 3 samples per GPU-second: (B - rho S) / T is
     * -8, -1, 1, 0.6875, so (4, 4) is best: 24 + 1 = 25 samples/s (B/T =
     * 4 foreground, 3 x (8 - 4/4) = 21 background). */
    table t = {4, {1, 2, 4, 8}, {8, 6, 4, 3.5}, 0};
    plan_auto_vertex v[16];
    int n = plan_auto_search(table_oracle, &t, 16, 8, 3, INFINITY, v, 16);
    CHECK(n >= 2);
    CHECK(v[0].time == 4 && v[0].gpu_seconds == 4 && v[0].feasible);
    CHECK(fabs(v[0].score - 25) < 1e-12);
    /* fastest, cheapest (q = -8 < 0), then (4, 4) twice: four calls. */
    CHECK(t.calls == 4);

    /* A point inside the hull is never met: (3, 5.5) is above the segment
     * (2, 6)-(4, 4), and its ratio -0.17 is below (4, 4)'s anyway. */
    t = (table){5, {1, 2, 3, 4, 8}, {8, 6, 5.5, 4, 3.5}, 0};
    n = plan_auto_search(table_oracle, &t, 16, 8, 3, INFINITY, v, 16);
    CHECK(v[0].time == 4 && v[0].gpu_seconds == 4);
    for (int i = 0; i < n; i++)
        CHECK(v[i].time != 3);

    /* A limit of 3 s binds: (4, 4) and (8, 3.5) are over it; the walk from
     * (1, 8) towards the cheapest meets (4, 4) (price 14/9), then (2, 6)
     * (price 3/4), and stops at price 1 where (2, 6) and (4, 4) tie: the
     * best within the limit is (2, 6), 24 - 1 = 23. */
    t = (table){4, {1, 2, 4, 8}, {8, 6, 4, 3.5}, 0};
    n = plan_auto_search(table_oracle, &t, 16, 8, 3, 3, v, 16);
    CHECK(v[0].time == 2 && v[0].gpu_seconds == 6 && v[0].feasible);
    CHECK(fabs(v[0].score - 23) < 1e-12);
    for (int i = 1; i < n; i++)
        CHECK(!v[i].feasible || v[i].score <= v[0].score);
    /* At the limit exactly: (4, 4) is within it. */
    n = plan_auto_search(table_oracle, &t, 16, 8, 3, 4, v, 16);
    CHECK(v[0].time == 4 && v[0].feasible);

    /* The background worth less: rho 1, (B - S) / T = 8, 5, 3, 1.56: the
     * fastest plan, and Dinkelbach stops at once. */
    t.calls = 0;
    n = plan_auto_search(table_oracle, &t, 16, 8, 1, INFINITY, v, 16);
    CHECK(v[0].time == 1 && fabs(v[0].score - (8 + 8)) < 1e-12);
    CHECK(t.calls == 2);
    /* No background: only the fastest. */
    t.calls = 0;
    n = plan_auto_search(table_oracle, &t, 16, 8, 0, INFINITY, v, 16);
    CHECK(n == 1 && v[0].time == 1 && t.calls == 1);
    /* The fastest over the limit: it alone, not within. */
    n = plan_auto_search(table_oracle, &t, 16, 8, 3, 0.5, v, 16);
    CHECK(n == 1 && !v[0].feasible);
}

static void test_property(void)
{
    int binds = 0, inner = 0;
    for (int it = 0; it < 2000; it++) {
        table t = {0};
        int nv = irand(1, 12);
        double T = 0.5 + urand(), S = 5 + 20 * urand(), slope = -(1 + 10 * urand());
        bool vertex[64] = {false};
        for (int i = 0; i < nv; i++) {
            t.T[t.n] = T;
            t.S[t.n] = S;
            vertex[t.n++] = true;
            double dT = 0.1 + 2 * urand();
            slope *= 0.2 + 0.7 * urand();
            T += dT;
            S += slope * dT;
            if (S <= 0.1)
                break;
        }
        /* Points inside the hull: a vertex moved up and right (where the
         * background is worth more per GPU-second than the foreground, one
         * of them may be better: slower, more idle; the search keeps to the
         * frontier). */
        int nin = irand(0, 6);
        for (int i = 0; i < nin && nv > 0; i++) {
            int a = irand(0, t.n - 1);
            if (!vertex[a])
                continue;
            t.T[t.n] = t.T[a] * (1 + 0.3 * urand());
            t.S[t.n] = t.S[a] * (1 + 0.3 * urand()) + 1e-3;
            t.n++;
        }
        double B = irand(1, 64), rho = urand() < 0.1 ? 0 : pow(10, -1 + 2 * urand());
        int G = irand(1, 32);
        double limit = urand() < 0.3 ? INFINITY : t.T[0] * (1 + 3 * urand());
        plan_auto_vertex v[128];
        int n = plan_auto_search(table_oracle, &t, B, G, rho, limit, v, 128);
        CHECK(n >= 1);
        /* Brute force over the vertices within the limit. */
        double best = -INFINITY;
        int bi = -1;
        for (int i = 0; i < t.n; i++)
            if (vertex[i] && t.T[i] <= limit) {
                double e = rho > 0 ? est(B, G, rho, t.T[i], t.S[i]) : B / t.T[i];
                if (e > best) {
                    best = e;
                    bi = i;
                }
            }
        CHECK(bi >= 0 && v[0].feasible);
        CHECK(fabs(v[0].score - best) <= 1e-9 * fabs(best));
        if (bi >= 0 && !isinf(limit)) {
            /* Does the limit bind: a vertex over it would be better? */
            for (int i = 0; i < t.n; i++)
                if (vertex[i] && t.T[i] > limit && est(B, G, rho, t.T[i], t.S[i]) > best) {
                    binds++;
                    break;
                }
        }
        if (isinf(limit) && rho > 0 && best > rho * G) {
            /* The optimum is a vertex: no point of the table beats it
             * (the ratio at the optimum is positive). */
            for (int i = 0; i < t.n; i++)
                CHECK(est(B, G, rho, t.T[i], t.S[i]) <= best * (1 + 1e-12) + 1e-12);
            inner += t.n > nv;
        }
    }
    /* The cases covered what they are meant to. */
    CHECK(binds > 100);
    CHECK(inner > 100);
}

/* Burst's choice is at least every other strategy's under the one limit. */
static void test_never_loses(void)
{
    int cases = 0, with_bg = 0, not_fastest = 0;
    for (int it = 0; it < 60; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int G = irand(2, 8);
        random_cluster(&in, G, irand(1, 2) == 1 ? G : (G + 1) / 2);
        int n = irand(2, 7);
        if (urand() < 0.5 || n < 4)
            make_chain(&in, n);
        else
            make_concurrent(&in, n);
        in.p.cluster.mem_bytes = 0;
        in.p.amp_limit = 0; /* auto ignores the limit */
        plan_result f;
        char err[512];
        if (!plan_solve(&in.p, PS_BURST, &f, err, sizeof err))
            continue;
        plan_timeline tl;
        if (!plan_timeline_build(&in.p, &f, &tl, err, sizeof err)) {
            plan_result_free(&f);
            continue;
        }
        double T0 = tl.time;
        plan_timeline_free(&tl);
        random_bg bgr;
        random_bg_jobs(&bgr, T0);
        int nj = bgr.n;
        plan_bg_job *jobs = bgr.jobs;
        plan_mux_options o = {.slowdown = 1 + urand()};
        if (!plan_mux_init(&in.p, &o, err, sizeof err)) {
            plan_result_free(&f);
            continue;
        }
        double tp[PS_COUNT] = {0};
        bool have[PS_COUNT] = {false};
        for (int s = 0; s < PS_COUNT; s++) {
            plan_result r;
            plan_mux_result x;
            char why[1024];
            if (!plan_mux_auto(&in.p, (plan_strategy)s, jobs, nj, &o, &r, &x, why, sizeof why, err,
                               sizeof err))
                continue;
            CHECK(r.strategy == (plan_strategy)s);
            CHECK(strncmp(why, "amplification = auto: ", 22) == 0);
            CHECK(x.fg_time_bg <= o.time_limit * (1 + 1e-9) || x.ncopies == 0);
            have[s] = true;
            tp[s] = x.cluster_samples_per_s;
            if (s == PS_BURST) {
                with_bg += x.ncopies > 0;
                not_fastest += strstr(why, "burst's fastest plan") == NULL;
            }
            plan_mux_result_free(&x);
            plan_result_free(&r);
        }
        CHECK(have[PS_BURST]);
        for (int s = 0; s < PS_COUNT; s++)
            if (have[s])
                CHECK(tp[PS_BURST] >= tp[s] * (1 - 1e-9));
        /* and burst's fastest plan with the background */
        CHECK(plan_timeline_build(&in.p, &f, &tl, err, sizeof err));
        plan_mux_result x;
        CHECK(plan_interleave(&tl, &f, jobs, nj, &o, &x, err, sizeof err));
        CHECK(tp[PS_BURST] >= x.cluster_samples_per_s * (1 - 1e-9));
        plan_mux_result_free(&x);
        plan_timeline_free(&tl);
        plan_result_free(&f);
        cases++;
    }
    CHECK(cases > 40);
    CHECK(with_bg > 10);
    CHECK(not_fastest > 0);
}

/* Is (fg, cluster) weakly dominated, within slack, by a row of the
 * frontier (only its vertices: vertices_only; only its Pareto rows:
 * pareto_only)? */
static bool dominated(const plan_mux_point *pts, int n, double fg, double cl, double slack,
                      bool vertices_only, bool pareto_only)
{
    for (int i = 0; i < n; i++) {
        if ((vertices_only && !pts[i].vertex) || (pareto_only && !pts[i].pareto))
            continue;
        if (pts[i].mux.fg_samples_per_s >= fg * (1 - slack) &&
            pts[i].mux.cluster_samples_per_s >= cl * (1 - slack))
            return true;
    }
    return false;
}

/* Every dp + mux and deeppool + mux point (deeppool at each limit of its
 * auto), made here on its own, is weakly dominated in foreground and
 * cluster samples/s, within 0.5%, by a Pareto row of burst's multiplexing
 * frontier (burstc plan --frontier's rows) under the same limit; how many
 * the frontier's vertices alone dominate is printed. */
static void test_domination(void)
{
    int plans = 0, misses = 0, by_vertex = 0, problems = 0, fit_rows = 0;
    static const double lims[] = {1, 1.25, 1.5, 2, 3, 4, 6, 8, 0};
    for (int it = 0; plans < 300 && it < 2000; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int G = irand(2, 8);
        random_cluster(&in, G, irand(1, 2) == 1 ? G : (G + 1) / 2);
        int n = irand(2, 7);
        if (urand() < 0.5 || n < 4)
            make_chain(&in, n);
        else
            make_concurrent(&in, n);
        in.p.cluster.mem_bytes = 0;
        in.p.amp_limit = 0;
        char err[512];
        plan_result f;
        if (!plan_solve(&in.p, PS_BURST, &f, err, sizeof err))
            continue;
        double T0 = f.time;
        plan_result_free(&f);
        random_bg bgr;
        random_bg_jobs(&bgr, T0);
        int nj = bgr.n;
        plan_bg_job *jobs = bgr.jobs;
        plan_mux_options o = {.slowdown = 1 + urand()};
        if (!plan_mux_init(&in.p, &o, err, sizeof err))
            continue;
        plan_mux_point pts[160];
        int np = plan_mux_frontier(&in.p, jobs, nj, &o, pts, 160);
        CHECK(np >= 1 && pts[0].vertex);
        problems++;
        /* A vertex's fit row never slows the foreground and follows its vertex. */
        for (int i = 0; i < np; i++)
            if (pts[i].fit_only) {
                CHECK(i > 0 && pts[i - 1].vertex && !pts[i - 1].fit_only &&
                      pts[i - 1].price == pts[i].price);
                CHECK(pts[i].mux.fg_time_bg <= pts[i].mux.fg_time * (1 + 1e-12));
                CHECK(pts[i].mux.cluster_samples_per_s >= pts[i].mux.fg_samples_per_s);
                fit_rows++;
            }
        /* Every row off the Pareto set is dominated by one on it. */
        for (int i = 0; i < np; i++)
            CHECK(pts[i].pareto || dominated(pts, np, pts[i].mux.fg_samples_per_s,
                                             pts[i].mux.cluster_samples_per_s, 0, false, true));
        for (int k = -1; k < (int)(sizeof lims / sizeof lims[0]); k++) {
            plan_problem q = in.p;
            plan_result r;
            bool ok = k < 0 ? plan_solve(&q, PS_DP, &r, err, sizeof err)
                            : (q.amp_limit = lims[k], plan_deeppool(&q, &r, err, sizeof err));
            if (!ok)
                continue;
            plan_mux_result x;
            if (plan_mux_plan(&in.p, &r, jobs, nj, &o, &x, err, sizeof err)) {
                plans++;
                double fg = x.fg_samples_per_s, cl = x.cluster_samples_per_s;
                misses += !dominated(pts, np, fg, cl, 0.005, false, true);
                by_vertex += dominated(pts, np, fg, cl, 0.005, true, false);
                plan_mux_result_free(&x);
            }
            plan_result_free(&r);
        }
        for (int i = 0; i < np; i++)
            plan_mux_point_free(&pts[i]);
    }
    printf("domination: %d dp and deeppool plans of %d problems: %d dominated by a Pareto row, "
           "%d by a vertex of burst's frontier alone (%d fit rows)\n",
           plans, problems, plans - misses, by_vertex, fit_rows);
    CHECK(plans >= 300);
    CHECK(fit_rows > 0);
    CHECK(misses == 0);
}

int main(void)
{
    test_hand();
    test_property();
    test_never_loses();
    test_domination();
    return check_done("test_mux_auto");
}
