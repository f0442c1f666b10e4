/*
 * solve.c: the planner's one entry, above its three searches.
 *
 * plan_solve() hands a problem to the search its strategy and objective ask
 * for: DeepPool's own (deeppool.c), the fastest hull plan within a GPU budget
 * (frontier.c), or the DP over time + price x GPU-seconds (planner.c). The
 * searches never call it, so none of them calls another back.
 */
#include "plan.h"

bool plan_solve(const plan_problem *p, plan_strategy s, plan_result *out, char *err, size_t errlen)
{
    if (s == PS_DEEPPOOL) {
        /* DeepPool's own search (deeppool.c), priced by its schedule */
        if (!plan_deeppool(p, out, err, errlen))
            return false;
        if (!plan_price_schedule(p, out, err, errlen)) {
            plan_result_free(out);
            return false;
        }
        return true;
    }
    if (p->gpu_budget > 0 && s != PS_DP)
        return plan_solve_budget(p, s, out, err, errlen);
    return plan_solve_weighted(p, s, 1, p->price, out, err, errlen);
}
