/*
 * frontier.c: the trade-off between iteration time and GPU-seconds.
 *
 * The frontier is over the DP's own objective, the evaluator's time
 * (plan_result.eval_time; the plans themselves are reported at their
 * schedule's time). The planner's DP minimises time_weight x time + gpu_weight x GPU-seconds
 * (planner.c). Two plans bound the trade-off: the fastest (weights 1, 0) and
 * the cheapest, the one with the fewest GPU-seconds (weights ~0, 1; ties go
 * to the faster). Every plan that is optimal for some price in between is a
 * vertex of the lower convex hull of (GPU-seconds, time) over all plans;
 * they are found exactly, with no sweep of fixed prices: for two known
 * vertices A (faster) and B (cheaper), the price at which both cost the same,
 * (t_B - t_A) / (g_A - g_B), either yields a plan below the segment A-B -- a
 * new vertex, and both halves are searched again -- or A and B are adjacent.
 * A global GPU-time budget (`--gpu-budget X`: GPU-seconds at most X times the
 * one-GPU time) walks the same hull towards the budget: the fastest vertex
 * within it. A plan exists under the budget exactly when the cheapest plan
 * fits it. Plans strictly inside the hull (between two vertices) are not
 * reachable by any price; docs/plan.md says so.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* The weight of time when minimising GPU-seconds: only breaks ties. */
#define CHEAP_TIME_WEIGHT 1e-9
/* A plan must be below a hull segment by this much (relative) to count. */
#define HULL_EPS          1e-9

double plan_one_gpu_time(const plan_problem *p)
{
    double t = 0, f, b;
    for (int l = 0; l < p->nlayers; l++) {
        plan_layer_time(p, &p->layers[l], p->batch, &f, &b);
        t += f + b;
    }
    return t;
}

/* x as the shortest decimal that reads back as x (1.001 stays 1.001). */
static void shortest(char *buf, size_t n, double x)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

/* The plan at price lambda (seconds of time per GPU-second). */
static bool at_price(const plan_problem *p, plan_strategy s, double lambda, plan_result *r,
                     char *err, size_t errlen)
{
    if (isinf(lambda))
        return plan_solve_weighted(p, s, CHEAP_TIME_WEIGHT, 1, r, err, errlen);
    return plan_solve_weighted(p, s, 1, lambda, r, err, errlen);
}

/* The price at which A (faster) and B (cheaper) cost the same, or -1. */
static double crossing(double ta, double ga, double tb, double gb)
{
    if (!(ga > gb) || !(tb > ta))
        return -1;
    return (tb - ta) / (ga - gb);
}

static bool below(double t, double g, double lambda, double ta, double ga)
{
    double v = t + lambda * g, va = ta + lambda * ga;
    return v < va - HULL_EPS * fabs(va);
}

bool plan_solve_budget(const plan_problem *p, plan_strategy s, plan_result *out, char *err,
                       size_t errlen)
{
    plan_problem q = *p;
    q.gpu_budget = 0;
    double one = plan_one_gpu_time(p), cap = p->gpu_budget * one;
    double fits = cap * (1 + 1e-12);
    plan_result fast, cheap;
    if (!at_price(&q, s, 0, &fast, err, errlen))
        return false;
    if (fast.gpu_seconds <= fits) {
        *out = fast;
        return true;
    }
    if (!at_price(&q, s, INFINITY, &cheap, err, errlen)) {
        plan_result_free(&fast);
        return false;
    }
    if (cheap.gpu_seconds > fits) {
        char b[32];
        shortest(b, sizeof b, p->gpu_budget);
        snprintf(err, errlen,
                 "no plan fits a budget of %s x the one-GPU time (%.6g GPU-seconds per iteration): "
                 "the cheapest plan needs %.6g GPU-seconds (%.4f x)",
                 b, cap, cheap.gpu_seconds, cheap.gpu_seconds / one);
        plan_result_free(&fast);
        plan_result_free(&cheap);
        return false;
    }
    /* Walk the hull between fast (over the budget) and cheap (within it). */
    for (int it = 0; it < 200; it++) {
        double lambda =
            crossing(fast.eval_time, fast.gpu_seconds, cheap.eval_time, cheap.gpu_seconds);
        if (lambda <= 0)
            break;
        plan_result m;
        if (!at_price(&q, s, lambda, &m, err, errlen))
            break;
        if (!below(m.eval_time, m.gpu_seconds, lambda, fast.eval_time, fast.gpu_seconds)) {
            plan_result_free(&m);
            break;
        }
        if (m.gpu_seconds <= fits) {
            plan_result_free(&cheap);
            cheap = m;
        } else {
            plan_result_free(&fast);
            fast = m;
        }
    }
    plan_result_free(&fast);
    *out = cheap;
    return true;
}

typedef struct seg {
    plan_point a, b;
} seg;

/* A vertex found, with its plan. */
typedef struct vtx {
    plan_point pt;
    plan_result r;
} vtx;

static int cmp_time(const void *x, const void *y)
{
    const plan_point *a = &((const vtx *)x)->pt, *b = &((const vtx *)y)->pt;
    if (a->time != b->time)
        return a->time < b->time ? -1 : 1;
    return (a->gpu_seconds > b->gpu_seconds) - (a->gpu_seconds < b->gpu_seconds);
}

/* The vertices, their plans kept: a caller that needs the plans (the
 * multiplexing along the frontier) does not solve them again. */
int plan_frontier_plans(const plan_problem *p, plan_point *pts, plan_result *plans, int maxpts)
{
    plan_problem q = *p;
    q.gpu_budget = 0;
    char err[512];
    plan_result r;
    int n = 0;
    if (maxpts < 1 || !at_price(&q, PS_BURST, 0, &r, err, sizeof err))
        return 0;
    vtx *v = plan_xrealloc(NULL, (size_t)maxpts, sizeof *v);
    v[n++] = (vtx){{0, r.eval_time, r.gpu_seconds}, r};
    plan_point fast = v[0].pt;
    int cap = 16, ns = 0;
    seg *stack = plan_xrealloc(NULL, (size_t)cap, sizeof(seg));
    if (at_price(&q, PS_BURST, INFINITY, &r, err, sizeof err)) {
        plan_point cheap = {INFINITY, r.eval_time, r.gpu_seconds};
        if (cheap.gpu_seconds < fast.gpu_seconds * (1 - HULL_EPS) && n < maxpts) {
            v[n++] = (vtx){cheap, r};
            stack[ns++] = (seg){fast, cheap};
        } else {
            plan_result_free(&r);
        }
    }
    while (ns > 0 && n < maxpts) {
        seg sg = stack[--ns];
        double lambda = crossing(sg.a.time, sg.a.gpu_seconds, sg.b.time, sg.b.gpu_seconds);
        if (lambda <= 0 || !at_price(&q, PS_BURST, lambda, &r, err, sizeof err))
            continue;
        plan_point m = {lambda, r.eval_time, r.gpu_seconds};
        if (!below(m.time, m.gpu_seconds, lambda, sg.a.time, sg.a.gpu_seconds)) {
            plan_result_free(&r);
            continue;
        }
        v[n++] = (vtx){m, r};
        if (ns + 2 > cap) {
            cap *= 2;
            stack = plan_xrealloc(stack, (size_t)cap, sizeof(seg));
        }
        stack[ns++] = (seg){m, sg.b};
        stack[ns++] = (seg){sg.a, m};
    }
    free(stack);
    qsort(v, (size_t)n, sizeof *v, cmp_time);
    /* keep the non-dominated points: a plan optimal at a price is, but the
	 * fastest plan may tie with one that needs fewer GPU-seconds, and the
	 * DP's concurrent-branch objective is exact only at price 0 */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m == 0 || v[i].pt.gpu_seconds < pts[m - 1].gpu_seconds) {
            pts[m] = v[i].pt;
            if (plans)
                plans[m] = v[i].r;
            else
                plan_result_free(&v[i].r);
            m++;
        } else {
            plan_result_free(&v[i].r);
        }
    }
    free(v);
    return m;
}

int plan_frontier(const plan_problem *p, plan_point *pts, int maxpts)
{
    return plan_frontier_plans(p, pts, NULL, maxpts);
}
