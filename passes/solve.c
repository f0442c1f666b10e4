/*
 * solve.c: the planner's one entry, above its three searches.
 *
 * plan_solve() hands a problem to the search its strategy and objective ask
 * for: DeepPool's own (deeppool.c), the fastest hull plan within a GPU budget
 * (frontier.c), or the DP over time + price x GPU-seconds (planner.c), and for
 * burst the best, by its schedule, of the DP's plan and pow2's and dp's where
 * burst's space holds them. The searches never call it, so none of them calls
 * another back.
 */
#include "plan.h"

/* A copy of r that owns its own layer table. */
static plan_result copy_result(const plan_result *r)
{
    plan_result c = *r;
    c.layer = plan_xcalloc((size_t)r->nlayers, sizeof *c.layer);
    for (int l = 0; l < r->nlayers; l++)
        c.layer[l] = r->layer[l];
    return c;
}

bool plan_solve_known(const plan_problem *p, plan_strategy s, const plan_result *const *known,
                      plan_result *out, char *err, size_t errlen)
{
    if (s == PS_DEEPPOOL) {
        /* DeepPool's own search (deeppool.c), priced by its schedule */
        if (!plan_deeppool(p, out, err, errlen))
            return false;
        if (!plan_tie_layers(p, out, err, errlen) || !plan_price_schedule(p, out, err, errlen)) {
            plan_result_free(out);
            return false;
        }
        return true;
    }
    if (p->gpu_budget > 0 && s != PS_DP)
        return plan_solve_budget(p, s, out, err, errlen);
    if (!plan_solve_weighted(p, s, 1, p->price, out, err, errlen))
        return false;
    /* The DP minimises the evaluator's time, which charges branches side by side
     * max(forward + backward) where the loss barrier makes it max(forward) +
     * max(backward); so a plan of pow2's or dp's, which burst's space holds, can have
     * the better schedule. burst returns the best of the three by what it reports. */
    for (plan_strategy t = PS_DP; s == PS_BURST && t < PS_BURST; t++) {
        plan_result r;
        char e[512];
        if (t == PS_DEEPPOOL)
            continue;
        if (known && known[t])
            r = copy_result(known[t]);
        else if (!plan_solve_weighted(p, t, 1, p->price, &r, e, sizeof e))
            continue;
        if (plan_burst_holds(p, &r) && r.objective < out->objective * (1 - 1e-12)) {
            plan_result_free(out);
            *out = r;
            out->strategy = PS_BURST;
        } else {
            plan_result_free(&r);
        }
    }
    return true;
}

bool plan_solve(const plan_problem *p, plan_strategy s, plan_result *out, char *err, size_t errlen)
{
    return plan_solve_known(p, s, NULL, out, err, errlen);
}
