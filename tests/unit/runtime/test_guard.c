/* test_guard.c: the slowdown guard of GPU multiplexing (runtime/guard.c) driven by
 * made-up steps, no clock. A hand-worked sequence (probes, the first allowance, the
 * controller's steps up and down); the probe schedule; a spike that empties the
 * allowance and the recovery; and, over a grid of simulated ranks — background work that
 * costs the foreground 0 to 1.5 times its length beyond the rank's free waits, with and
 * without sync points where it can run past them, slices of 1-15% of a step, 3% noise,
 * probes that start 30% slow — that the mean step with background stays within the
 * bound of the true step time, that the baseline finds the true step time, and that the
 * background gets at least half of what the bound leaves it. */
#include "check.h"
#include "internal.h"

static uint64_t lcg = 88172645463325252ull;
static double noise(void) /* uniform in [-1, 1) */
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 4503599627370496.0 - 1.0;
}

/* A rank: step time base (plus noise), `idle` seconds of it a free wait; background
 * work beyond the wait costs the foreground `cost` x its length, and runs past the wait
 * only where sync points let it (`fill`); else a slice that starts in the wait may
 * overrun it by the rest of one slice. */
typedef struct {
    double base, idle, cost, slice, jitter;
    bool fill;
} rank_model;

typedef struct {
    double t_bg, used;
    int64_t n_bg;
} run_stats;

static double step(rt_guard *g, const rank_model *m, int64_t i, double *used_out)
{
    bool bg = rt_guard_step_begin(g);
    double used = 0, want = 0;
    if (bg) {
        /* slices while they fit the allowance (the executor's rule, by the slice's
         * time), and in a wait only while it lasts */
        while (used + m->slice <= g->allow && (m->fill || used < m->idle))
            used += m->slice;
        if ((m->fill || used < m->idle) && used < g->allow)
            want = m->slice; /* left out for not fitting */
    }
    double over = used > m->idle ? used - m->idle : 0;
    double t = m->base * (1 + m->jitter * noise()) + m->cost * over;
    if (i < 6)
        t *= 1.3; /* the first steps of a run are slow */
    rt_guard_step_end(g, t, used, want);
    *used_out = used;
    return t;
}

static run_stats run(rt_guard *g, const rank_model *m, int64_t n, int64_t skip)
{
    run_stats s = {0};
    for (int64_t i = 0; i < n; i++) {
        double used;
        double t = step(g, m, i, &used);
        if (i >= skip && g->bg_step) {
            s.t_bg += t;
            s.used += used;
            s.n_bg++;
        }
    }
    return s;
}

static void test_hand(void)
{
    rt_guard g;
    rt_guard_init(&g, 1.1);
    /* warm-up and three probes at 10 ms: no background */
    const double probes[4] = {0.030, 0.012, 0.010, 0.010};
    for (int i = 0; i < 4; i++) {
        CHECK(!rt_guard_step_begin(&g), "step %d: background before the probes are in", i);
        rt_guard_step_end(&g, probes[i], 0, 0);
    }
    CHECK(fabs(g.baseline - 0.010) < 1e-15, "baseline %g, want the median 0.010", g.baseline);
    /* aim 10 x (1 + 0.9 x 0.1) = 10.9 ms: the first allowance 0.9 ms */
    CHECK(fabs(g.allow - 0.0009) < 1e-15, "first allowance %g, want 0.0009", g.allow);
    /* used 0.75 ms, step 10.75: 0.15 under the aim, allow + 0.075 */
    CHECK(rt_guard_step_begin(&g), "step 4 runs background");
    rt_guard_step_end(&g, 0.01075, 0.00075, 0);
    CHECK(fabs(g.allow - 0.000975) < 1e-12, "allowance %g, want 0.000975", g.allow);
    /* used 1.0 ms (a slice overran), step 11.0, the bound: 0.1 over the aim, so
     * min(allow, used) - 0.05 = 0.925 */
    CHECK(rt_guard_step_begin(&g), "step 5 runs background");
    rt_guard_step_end(&g, 0.011, 0.001, 0);
    CHECK(fabs(g.allow - 0.000925) < 1e-12, "allowance %g, want 0.000925", g.allow);
    CHECK(g.over == 0, "11.0 ms is the bound, not over it (%lld)", (long long)g.over);
    /* a step that used nothing, well under the aim: the growth stops at used + budget */
    CHECK(rt_guard_step_begin(&g), "step 6 runs background");
    rt_guard_step_end(&g, 0.0095, 0, 0);
    CHECK(fabs(g.allow - 0.001) < 1e-12, "allowance %g, want the cap 0 + 1.0 ms", g.allow);
    /* a spike: 30 ms with 1 ms of background empties it */
    CHECK(rt_guard_step_begin(&g), "step 7 runs background");
    rt_guard_step_end(&g, 0.030, 0.001, 0);
    CHECK(g.allow == 0, "allowance %g after a spike, want 0", g.allow);
    CHECK(g.over == 1, "the spike is over the bound (%lld)", (long long)g.over);
    /* and it comes back: 10 ms with nothing run gives 0.45 ms */
    CHECK(rt_guard_step_begin(&g), "step 8 runs background");
    rt_guard_step_end(&g, 0.010, 0, 0);
    CHECK(fabs(g.allow - 0.00045) < 1e-12, "allowance %g, want 0.00045", g.allow);
    /* a 1.5 ms slice, longer than the budget, left out three times: the cap is the
     * slice's length, not the budget, so it gets its turn */
    const double grown[3] = {0.0009, 0.00135, 0.0015};
    for (int i = 0; i < 3; i++) {
        CHECK(rt_guard_step_begin(&g), "step %d runs background", 9 + i);
        rt_guard_step_end(&g, 0.010, 0, 0.0015);
        CHECK(fabs(g.allow - grown[i]) < 1e-12, "allowance %g, want %g", g.allow, grown[i]);
    }
    /* the report's slowdown: the mean of step / baseline over the 8 steps with it */
    CHECK(fabs(g.ratio / (double)g.n_bg - 101.25 / 80) < 1e-12, "mean ratio %g, want %g",
          g.ratio / (double)g.n_bg, 101.25 / 80);
    CHECK(g.n_bg == 8 && g.n_fg == 3, "steps with / without background %lld / %lld",
          (long long)g.n_bg, (long long)g.n_fg);
}

/* The probes: 3 after the warm-up, then every 9th step until 7 are in, then every 65th. */
static void test_schedule(void)
{
    rt_guard g;
    rt_guard_init(&g, 1.1);
    int64_t probes[12];
    int np = 0;
    for (int64_t i = 0; i < 400; i++) {
        bool bg = rt_guard_step_begin(&g);
        if (i > 0 && !bg && np < 12)
            probes[np++] = i;
        rt_guard_step_end(&g, 0.01, 0, 0);
    }
    const int64_t want[12] = {1, 2, 3, 12, 21, 30, 39, 104, 169, 234, 299, 364};
    CHECK(np == 12, "%d probes in 400 steps, want 12 or more", np);
    for (int k = 0; k < np && k < 12; k++)
        CHECK(probes[k] == want[k], "probe %d at step %lld, want %lld", k, (long long)probes[k],
              (long long)want[k]);
}

static void test_grid(void)
{
    const double costs[] = {0, 0.5, 1.0, 1.5};
    const double idles[] = {0, 0.2, 0.6};
    const double slices[] = {0.01, 0.03, 0.08, 0.15};
    const double bounds[] = {1.05, 1.1, 1.5};
    int cases = 0;
    for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++)
        for (size_t c = 0; c < sizeof costs / sizeof *costs; c++)
            for (size_t d = 0; d < sizeof idles / sizeof *idles; d++)
                for (size_t e = 0; e < sizeof slices / sizeof *slices; e++)
                    for (int fill = 0; fill < 2; fill++) {
                        double bound = bounds[b], budget = bound - 1;
                        rank_model m = {1.0, idles[d], costs[c], slices[e], 0.03, fill};
                        if (costs[c] == 0 && fill)
                            continue; /* free work beyond the waits is no GPU's */
                        rt_guard g;
                        rt_guard_init(&g, bound);
                        run_stats s = run(&g, &m, 3000, 100);
                        double mean = s.t_bg / (double)s.n_bg, used = s.used / (double)s.n_bg;
                        char what[160];
                        snprintf(what, sizeof what,
                                 "bound %g, cost %g, idle %g, slice %g, %s: ", bound, m.cost,
                                 m.idle, m.slice, fill ? "sync points" : "waits only");
                        cases++;
                        CHECK(mean <= bound * m.base, "%smean step %.4f over the bound", what,
                              mean);
                        CHECK(fabs(g.baseline - m.base) < 0.035 * m.base, "%sbaseline %.4f", what,
                              g.baseline);
                        /* what the bound leaves: the free wait, and at sync points
                         * the budget's worth (less the margin) of paid work past it */
                        double room = m.idle;
                        if (fill)
                            room += GUARD_MARGIN * budget / m.cost;
                        double want = 0.5 * room - m.slice;
                        CHECK(used >= want, "%sbackground %.4f a step, want %.4f or more", what,
                              used, want);
                        /* a slice measured longer than the budget still runs */
                        CHECK(used > 0 || (!fill && m.idle == 0), "%sno background at all", what);
                    }
    CHECK(cases == 252, "%d cases, want 252", cases);
}

int main(void)
{
    test_hand();
    test_schedule();
    test_grid();
    if (check_failures) {
        fprintf(stderr, "%d failure(s)\n", check_failures);
        return 1;
    }
    puts("guard: ok");
    return 0;
}
