/* test_guard.c: the slowdown guard of GPU multiplexing (runtime/guard.c) driven by
 * made-up steps and made-up ranks, no clock and no MPI. A hand-worked run (the schedule
 * of settling steps, windows and steps with background work, the first allowance, the
 * controller's steps, the aim's move at a window's end, the measured slowdown and its
 * error); then simulated worlds, each run twice on the same machine noise, with the
 * guard and with background work off, so that the true slowdown is known: background
 * after-effects that reach the steps after (the baseline must not hold them; also
 * ones that outlast the settling steps), a machine that drifts faster or slower over the
 * run or whose speed jumps in a gap, ranks that share cores (also with an outside load
 * that comes and goes) (background
 * work on one rank costs its peers, ranks' own step ends differ; the ranks' means handed to
 * the guard a step late, as in a run of several ranks), spikes, and a grid of
 * costs, waits, slice lengths and bounds. In every one the true slowdown is within the
 * bound, the guard's measured slowdown within 0.02 of it, and the background gets a
 * share of what the bound leaves. Set GUARD_VERBOSE=1 to print every world's numbers. */
#include "check.h"
#include "internal.h"

#include <stdlib.h>

static uint64_t lcg = 88172645463325252ull;
static double noise(void) /* uniform in [-1, 1) */
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 4503599627370496.0 - 1.0;
}

/* ---- a hand-worked run ----------------------------------------------------------------- */

/* One rank: the step's time in, what the controller sees out. */
static bool one(rt_guard *g, double t, double used, double want)
{
    bool bg = rt_guard_step_begin(g);
    CHECK(rt_guard_step_time(g, t) >= 0, "shared count");
    rt_guard_step_end(g, used, want);
    return bg;
}

static void test_schedule(void)
{
    rt_guard g;
    rt_guard_init(&g, 1.1);
    /* warm-up 0, settling 1-2, window 3-10, 16 with background, settling, window,
     * 16, settling, window (3 windows in), then 64 with background between them */
    char got[200], want[200];
    int n = 0;
    for (int64_t i = 0; i < 140; i++) {
        got[i] = one(&g, 0.01, 0, 0) ? 'b' : '.';
        n++;
    }
    got[n] = 0;
    int k = 0;
    want[k++] = '.';
    for (int w = 0; w < 5 && k < 140; w++) {
        for (int i = 0; i < GUARD_SETTLE + GUARD_WINDOW && k < 140; i++)
            want[k++] = '.';
        int gap = w + 1 < GUARD_EARLY ? GUARD_EARLY_GAP : GUARD_REPROBE;
        for (int i = 0; i < gap && k < 140; i++)
            want[k++] = 'b';
    }
    want[k] = 0;
    CHECK(!strcmp(got, want), "schedule\n got  %s\n want %s", got, want);
    CHECK(g.nwin == 4, "%d windows in 140 steps, want 4", g.nwin);
    CHECK(GUARD_SETTLE == 2 && GUARD_WINDOW == 8 && GUARD_EARLY == 3 && GUARD_EARLY_GAP == 16 &&
              GUARD_REPROBE == 64,
          "the schedule's constants changed: update this test and docs/runtime.md");
}

static void test_hand(void)
{
    rt_guard g;
    rt_guard_init(&g, 1.1);
    CHECK(fabs(g.aimf - 1.05) < 1e-15, "the first aim %g, want half the budget, 1.05", g.aimf);
    /* warm-up (ignored), 2 settling steps, a window of 8 at 10 ms (one of them 12, one 8) */
    CHECK(!one(&g, 0.5, 0, 0), "warm-up runs background");
    one(&g, 0.030, 0, 0);
    one(&g, 0.020, 0, 0);
    const double win[8] = {0.010, 0.012, 0.010, 0.008, 0.010, 0.010, 0.010, 0.010};
    for (int i = 0; i < 8; i++)
        CHECK(!one(&g, win[i], 0, 0), "window step %d runs background", i);
    CHECK(fabs(g.base - 0.010) < 1e-15, "baseline %g, want the window's mean 0.010", g.base);
    CHECK(g.nwin == 1 && g.nseg == 0, "windows %d, segments %d", g.nwin, g.nseg);
    /* the first allowance: 0.05 x 10 ms */
    CHECK(fabs(g.allow - 0.0005) < 1e-15, "first allowance %g, want 0.0005", g.allow);
    CHECK(!rt_guard_estimate(&g, &(double){0}, &(double){0}, &(double){0}),
          "an estimate before any step "
          "with background");
    /* aim 10.5 ms. Used 0.4, step 10.4: 0.1 under, allow + 0.05 */
    CHECK(one(&g, 0.0104, 0.0004, 0), "the step after the window runs background");
    CHECK(fabs(g.allow - 0.00055) < 1e-12, "allowance %g, want 0.00055", g.allow);
    /* used 0.6, step 11.5: 1.0 over the aim: min(0.55, 0.6) - 0.5 = 0.05; over the bound */
    one(&g, 0.0115, 0.0006, 0);
    CHECK(fabs(g.allow - 0.00005) < 1e-12, "allowance %g, want 0.00005", g.allow);
    CHECK(g.over == 1, "11.5 ms is over the bound of 11 (%lld)", (long long)g.over);
    /* a step that used nothing at 9.5: + 0.5 but capped at 0 + the budget 1.0 ms */
    one(&g, 0.0095, 0, 0);
    CHECK(fabs(g.allow - 0.00055) < 1e-12, "allowance %g, want 0.00055", g.allow);
    one(&g, 0.0095, 0, 0);
    CHECK(fabs(g.allow - 0.001) < 1e-12, "allowance %g, want the cap 0 + 1.0 ms", g.allow);
    /* a 1.5 ms slice, longer than the budget, left out: the cap is its length */
    one(&g, 0.0095, 0, 0.0015);
    CHECK(fabs(g.allow - 0.0015) < 1e-12, "allowance %g, want 0.0015", g.allow);
    /* the rest of the 16 at 10.5 ms, then settling at 10.4 and a window of 8 at 9.6 */
    for (int i = 5; i < 16; i++)
        CHECK(one(&g, 0.0105, 0.0005, 0), "step %d of the gap runs background", i);
    double bg_sum = 0.0104 + 0.0115 + 3 * 0.0095 + 11 * 0.0105;
    CHECK(fabs(g.t_bg - bg_sum) < 1e-12, "background steps' seconds %g, want %g", g.t_bg, bg_sum);
    one(&g, 0.0104, 0, 0);
    one(&g, 0.0104, 0, 0);
    for (int i = 0; i < 8; i++)
        one(&g, 0.0096, 0, 0);
    /* the segment: 16 + 2 + 8 steps against (10 + 9.6) / 2 ms */
    double seg = bg_sum + 2 * 0.0104 + 8 * 0.0096, b = 0.0098, r = seg / (26 * b);
    CHECK(g.nseg == 1 && fabs(g.sum_t - seg) < 1e-12 && fabs(g.sum_w - 26 * b) < 1e-12,
          "segment %d: %g s over %g, want %g over %g", g.nseg, g.sum_t, g.sum_w, seg, 26 * b);
    CHECK(fabs(g.base - 0.0096) < 1e-12, "baseline %g, want the last window's 0.0096", g.base);
    /* the error: one segment has no spread, so the floor: the windows' relative
     * variance (the first window: 2 of 8 steps 20% off, the second none) over 8 x 2 */
    double var1 = (0.04 + 0.04) / 7.0, se = sqrt((var1 + 0) / 2 / 16.0);
    double sd = 0, e = 0;
    CHECK(rt_guard_estimate(&g, &sd, &e, &(double){0}), "no estimate after a segment");
    CHECK(fabs(sd - r) < 1e-12 && fabs(e - se) < 1e-12, "estimate %g +- %g, want %g +- %g", sd, e,
          r, se);
    /* the aim moves by half of bound - 1.645 x se - r */
    double aimf = 1.05 + 0.5 * (1.1 - GUARD_Z * se - r);
    CHECK(fabs(g.aimf - aimf) < 1e-12, "aim %g, want %g", g.aimf, aimf);
    /* 3 more steps with background at 10 ms: the open segment joins the estimate
     * against the last baseline, and the spread of the two segments counts */
    for (int i = 0; i < 3; i++)
        one(&g, 0.010, 0, 0);
    double w1 = 26 * b, w2 = 3 * 0.0096, r2 = 0.030 / w2, s = (seg + 0.030) / (w1 + w2);
    double v =
        (w1 * w1 * (r - s) * (r - s) + w2 * w2 * (r2 - s) * (r2 - s)) / ((w1 + w2) * (w1 + w2)) * 2;
    double fl = sqrt((var1 + 0) / 2 / (8.0 * 3));
    CHECK(rt_guard_estimate(&g, &sd, &e, &(double){0}), "no estimate");
    CHECK(fabs(sd - s) < 1e-12 && fabs(e - (sqrt(v) > fl ? sqrt(v) : fl)) < 1e-12,
          "estimate %g +- %g, want %g +- %g", sd, e, s, sqrt(v) > fl ? sqrt(v) : fl);
    CHECK(g.n_bg == 19 && g.n_fg == 16 && g.nwin == 2, "steps %lld with, %lld window, %d windows",
          (long long)g.n_bg, (long long)g.n_fg, g.nwin);
}

/* ---- simulated worlds ------------------------------------------------------------------ */

/* A world: `ranks` ranks, the first `hosts` of them with background copies. The
 * machine's step is base x (1 + drift x i / n), with noise (uniform `jitter`, and a step
 * twice as long with probability `spike`). Each rank has `idle` seconds of free wait;
 * background work beyond it costs the world's step `cost` x its length per rank (ranks
 * sharing cores: a slice takes a peer's core), and runs past the wait only where sync
 * points let it (`fill`), else a slice that starts in the wait may overrun it by the
 * rest of one slice. `after` of what the background cost a step lands in the next one,
 * and `decay` of that in the one after, and so on (a peer's slice that runs into the
 * next step, caches, the scheduler). Each rank's own step end differs from the world's
 * by up to `skew` x base (summing to zero over the ranks). With `lag` the ranks' means
 * come one step late, as background.c hands them over (in the next step's loss sum): the
 * next step begins, and runs its background work, before the guard's step ends. */
typedef struct {
    int ranks, hosts;
    double base, drift, jitter, spike;
    double jump; /* the machine's step times this from step jump_at on (0: none) */
    int64_t jump_at;
    double load, period; /* an outside load that comes and goes: steps this much longer
                          * for runs of 0.5-1.5 x period steps, then as long without */
    double idle, cost, slice;
    bool fill;
    double after, decay, skew;
    bool lag;
} world;

typedef struct {
    double on, off;          /* seconds after the first window, with the guard / background off */
    double est, se;          /* the guard's measured slowdown and its error (rank 0) */
    double upper;            /* ... and its upper confidence bound */
    double used;             /* background seconds a step with it, per host */
    double bias;             /* mean over the windows of (window mean / the same steps off) - 1 */
    double bg_share;         /* steps with background / all steps */
    int nwin, settle, stale; /* windows, settling steps at the end, gaps cut short */
} outcome;

#define MAXR  8
#define STEPS 400 /* steps a world runs: the benchmark's */

/* The mean of the last GUARD_WINDOW probe steps ended, with background off: the
 * window that just closed, as a run without background work would have taken it. */
static double window_off(const double *poff, int64_t npoff)
{
    double s = 0;
    for (int j = 1; j <= GUARD_WINDOW; j++)
        s += poff[(npoff - j) % GUARD_PROBE_MAX];
    return s / GUARD_WINDOW;
}

static outcome simulate(const world *m, double bound, int64_t n)
{
    outcome o = {0};
    rt_guard g[MAXR];
    for (int r = 0; r < m->ranks; r++)
        rt_guard_init(&g[r], bound);
    double pending = 0, bias = 0;
    double poff[GUARD_PROBE_MAX] = {0}; /* the probe steps' times with background off (a ring) */
    int64_t npoff = 0;
    int64_t nbg = 0, load_next = 0;
    int nwin = 0;
    bool loaded = true;
    /* the step whose end the guards wait for (lag): its means, and what the hosts used */
    double late[3] = {0, 0, 0}, late_used = 0, late_want = 0;
    int late_n = -1;
    for (int64_t i = 0; i <= n; i++) {
        bool bg = false;
        for (int r = 0; r < m->ranks && i < n; r++) {
            bool b = rt_guard_step_begin(&g[r]);
            CHECK(r == 0 || b == bg, "step %lld: rank %d disagrees on background", (long long)i, r);
            if (r == 0)
                bg = b;
        }
        int before = g[0].nwin;
        if (late_n >= 0) { /* the step before ends in the guards now */
            for (int r = 0; r < m->ranks; r++) {
                for (int j = 0; j < late_n; j++)
                    g[r].shared[j] = late[j];
                rt_guard_step_end(&g[r], r < m->hosts ? late_used : 0,
                                  r < m->hosts ? late_want : 0);
            }
            late_n = -1;
        }
        if (g[0].nwin > before) {
            bias += g[0].base / window_off(poff, npoff) - 1;
            nwin++;
        }
        if (i == n)
            break;
        double base = m->base * (1 + m->drift * (double)i / (double)n);
        if (m->jump > 0 && i >= m->jump_at)
            base *= m->jump;
        if (m->load > 0) {
            if (i >= load_next) {
                loaded = !loaded;
                load_next = i + (int64_t)(m->period * (1.0 + 0.5 * noise()));
            }
            if (loaded)
                base *= m->load;
        }
        double off = base * (1 + m->jitter * noise());
        if (noise() < 2 * m->spike - 1)
            off *= 2;
        /* every host's guard is the same: one host's slices stand for all */
        double used = 0, want = 0, slice = m->slice * m->base;
        if (bg) {
            while (used + slice <= g[0].allow && (m->fill || used < m->idle * m->base))
                used += slice;
            if ((m->fill || used < m->idle * m->base) && used < g[0].allow)
                want = slice;
        }
        double over = used > m->idle * m->base ? used - m->idle * m->base : 0;
        double paid = m->cost * over * m->hosts;
        double t = off + paid + pending;
        pending = m->after * paid + m->decay * pending;
        double skew[MAXR], mean = 0;
        for (int r = 0; r < m->ranks; r++)
            mean += (skew[r] = m->skew * m->base * noise()) / m->ranks;
        double shared[3] = {0, 0, 0};
        int ns = 0;
        if (!bg && i > 0)
            poff[npoff++ % GUARD_PROBE_MAX] = off;
        for (int r = 0; r < m->ranks; r++) {
            int k = rt_guard_step_time(&g[r], t + skew[r] - mean);
            CHECK(r == 0 || k == ns, "rank %d shares %d numbers, rank 0 %d", r, k, ns);
            ns = k;
            for (int j = 0; j < k; j++)
                shared[j] += g[r].shared[j] / m->ranks;
        }
        memcpy(late, shared, sizeof late);
        late_n = ns;
        late_used = used;
        late_want = want;
        before = g[0].nwin;
        if (!m->lag) {
            for (int r = 0; r < m->ranks; r++) {
                for (int j = 0; j < ns; j++)
                    g[r].shared[j] = shared[j];
                rt_guard_step_end(&g[r], r < m->hosts ? used : 0, r < m->hosts ? want : 0);
            }
            late_n = -1;
        }
        if (g[0].nwin > before) {
            bias += g[0].base / window_off(poff, npoff) - 1;
            nwin++;
        }
        if (i >= 1 + GUARD_SETTLE + GUARD_WINDOW) { /* the steps after the first window */
            o.on += t;
            o.off += off;
        }
        if (bg) {
            o.used += used;
            nbg++;
        }
        for (int r = 1; r < m->ranks; r++) /* what guards share; hosts' allowances */
            CHECK(g[r].aimf == g[0].aimf && g[r].steer == g[0].steer &&
                      (r >= m->hosts || g[r].allow == g[0].allow),
                  "step %lld: rank %d's guard differs from rank 0's", (long long)i, r);
    }
    CHECK(rt_guard_estimate(&g[0], &o.est, &o.se, &o.upper), "no estimate");
    o.nwin = g[0].nwin;
    o.settle = g[0].settle;
    o.stale = (int)g[0].stale_gaps;
    o.used = nbg ? o.used / (double)nbg : 0;
    o.bias = nwin ? bias / nwin : 0;
    o.bg_share = (double)nbg / (double)n;
    return o;
}

/* Every world's promise: the true slowdown within the bound, the guard's own within 0.02
 * of it (see below), its upper bound not below the truth by more than 0.01; `room` the
 * background seconds a step the bound leaves, of which it gets at least `share` (less a
 * slice). */
static void check_world(const char *what, const world *m, double bound, double room, double share,
                        bool spiky)
{
    outcome o = simulate(m, bound, STEPS);
    double truth = o.on / o.off;
    if (getenv("GUARD_VERBOSE"))
        fprintf(stderr,
                "%-44s true %.4f est %.4f +- %.4f (ucb %.4f) bias %+.4f bg %.4f of room %.4f; "
                "%d windows, settling %d, %d gaps cut\n",
                what, truth, o.est, o.se, o.upper, o.bias, o.used, room, o.nwin, o.settle, o.stale);
    CHECK(truth <= bound, "%s: true slowdown %.4f over the bound %.2f", what, truth, bound);
    /* within 0.02, or 2.5 of its own errors where spikes leave the baseline's few
     * dozen steps less sure than that; which quiet worlds must not (their error is the
     * segments' spread: mostly the aim's climb from half the budget) */
    double tol = 2.5 * o.se > 0.02 ? 2.5 * o.se : 0.02;
    CHECK(fabs(o.est - truth) <= tol, "%s: measured %.4f +- %.4f, true %.4f", what, o.est, o.se,
          truth);
    CHECK(spiky || o.se < 0.005 + 0.08 * (bound - 1), "%s: an error of %.4f in a quiet world", what,
          o.se);
    CHECK(o.est + GUARD_Z * o.se >= truth - 0.01, "%s: upper bound %.4f below the truth %.4f", what,
          o.est + GUARD_Z * o.se, truth);
    double want = share * room - m->slice * m->base;
    CHECK(o.used >= want, "%s: background %.4f a step, want %.4f or more", what, o.used, want);
}

/* Background after-effects: half (then a third of that, ...) of what a step's
 * background cost lands in the next steps. A baseline from steps right after background
 * work holds them; the settling steps leave them out. */
static void test_after_effects(void)
{
    for (int a = 0; a < 3; a++) {
        world m = {.ranks = 1,
                   .hosts = 1,
                   .base = 0.01,
                   .jitter = 0.01,
                   .idle = 0,
                   .cost = 1,
                   .slice = 0.01,
                   .fill = true,
                   .after = a ? 1.0 : 0.5,
                   .decay = a == 2 ? 0.75 : 0.3};
        outcome o = simulate(&m, 1.1, STEPS);
        double truth = o.on / o.off;
        if (getenv("GUARD_VERBOSE"))
            fprintf(stderr, "after-effects %.1f, decay %.2f: bias %+.5f true %.4f est %.4f\n",
                    m.after, m.decay, o.bias, truth, o.est);
        CHECK(fabs(o.bias) < (m.decay > 0.5 ? 0.005 : 0.003),
              "after-effects %.1f, decay %.2f: the windows' baseline is %+.2f%% off "
              "the steps without background",
              m.after, m.decay, 100 * o.bias);
        char what[64];
        snprintf(what, sizeof what, "after-effects %.1f, decay %.2f", m.after, m.decay);
        check_world(what, &m, 1.1, 0.1 * m.base / (1 + m.after / (1 - m.decay)), 0.3, false);
    }
}

/* The machine drifts 20% faster or slower over the run: with 3% noise, with a spike
 * (a step twice as long) in 200 steps, and one in 50. */
static void test_drift(void)
{
    const double drifts[] = {-0.2, 0, 0.2};
    const double spikes[] = {0, 0.005, 0.02};
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 3; s++) {
            world m = {.ranks = 1,
                       .hosts = 1,
                       .base = 0.01,
                       .drift = drifts[d],
                       .jitter = 0.03,
                       .spike = spikes[s],
                       .idle = 0,
                       .cost = 1,
                       .slice = 0.02,
                       .fill = true};
            char what[64];
            snprintf(what, sizeof what, "drift %+.1f, spikes %.3f", m.drift, m.spike);
            check_world(what, &m, 1.1, 0.1 * m.base * (1 + (d ? 0 : m.drift)), 0.3, s > 0);
        }
    /* The machine's speed jumps in the middle of a gap between windows (another job's
     * build ends or starts): 30% faster, or 40% slower, from step 140 on, just after a
     * window. A baseline from before the jump is stale until a window measures it again
     * (main's guard before issue 40's second half let the first run 1.104 slower). */
    const double jumps[] = {0.7, 1.4};
    for (int j = 0; j < 2; j++) {
        world m = {.ranks = 1,
                   .hosts = 1,
                   .base = 0.01,
                   .jitter = 0.03,
                   .jump = jumps[j],
                   .jump_at = 140,
                   .idle = 0,
                   .cost = 1,
                   .slice = 0.02,
                   .fill = true};
        char what[64];
        snprintf(what, sizeof what, "speed jumps x %.1f at step 140", m.jump);
        check_world(what, &m, 1.1, 0.1 * m.base * (j ? 1 : m.jump), 0.3, false);
    }
}

/* 4 ranks on 2 cores, 2 of them with copies: no wait is free (the core goes to the
 * peer), each host's work costs the world's step half its length, a peer's slice runs
 * into the next step, the ranks' own step ends differ by 2%. Each also with the means
 * one step late, as a run of several ranks hands them to the guard. */
static void test_shared_cores(void)
{
    for (int lag = 0; lag < 2; lag++)
        for (int h = 1; h <= 4; h *= 2) {
            world m = {.ranks = 4,
                       .hosts = h > 2 ? 2 : h,
                       .base = 0.01,
                       .jitter = 0.03,
                       .spike = 0.005,
                       .idle = 0,
                       .cost = 0.5,
                       .slice = 0.03,
                       .fill = true,
                       .after = 0.3,
                       .decay = 0.3,
                       .skew = 0.02,
                       .lag = lag};
            if (h == 4)
                m.hosts = 3;
            char what[64];
            snprintf(what, sizeof what, "4 ranks on 2 cores, %d hosts%s", m.hosts,
                     lag ? ", means a step late" : "");
            check_world(what, &m, 1.1,
                        0.1 * m.base / (m.cost * m.hosts * (1 + m.after / (1 - m.decay))), 0.3,
                        true);
        }
    /* ... and an outside load (other jobs' builds and tests on the same 2 cores) that
     * makes steps 1.5 times longer for runs of 20-60 steps and then leaves for as long,
     * with the background's after-effects lasting longer (decay 0.6) */
    for (int lag = 0; lag < 2; lag++) {
        world m = {.ranks = 4,
                   .hosts = 2,
                   .base = 0.01,
                   .jitter = 0.05,
                   .spike = 0.01,
                   .load = 1.5,
                   .period = 40,
                   .idle = 0,
                   .cost = 0.5,
                   .slice = 0.03,
                   .fill = true,
                   .after = 0.5,
                   .decay = 0.6,
                   .skew = 0.02,
                   .lag = lag};
        char what[80];
        snprintf(what, sizeof what, "4 ranks on 2 cores, outside load%s",
                 lag ? ", means a step late" : "");
        check_world(what, &m, 1.1,
                    0.1 * m.base / (m.cost * m.hosts * (1 + m.after / (1 - m.decay))), 0.2, true);
    }
    /* a step late, quiet: 4 ranks with free waits, and one drifting 20% slower */
    for (int d = 0; d < 2; d++) {
        world m = {.ranks = 4,
                   .hosts = 2,
                   .base = 0.01,
                   .drift = d ? 0.2 : 0,
                   .jitter = 0.01,
                   .idle = 0.05,
                   .cost = 1,
                   .slice = 0.01,
                   .fill = true,
                   .skew = 0.02,
                   .lag = true};
        char what[64];
        snprintf(what, sizeof what, "4 ranks, means a step late, drift %+.1f", m.drift);
        check_world(what, &m, 1.1, 0.05 * m.base + 0.1 * m.base / m.hosts, 0.3, false);
    }
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
                        if (costs[c] == 0 && fill)
                            continue; /* free work beyond the waits is no GPU's */
                        double bound = bounds[b];
                        world m = {.ranks = 1,
                                   .hosts = 1,
                                   .base = 1.0,
                                   .jitter = 0.03,
                                   .idle = idles[d],
                                   .cost = costs[c],
                                   .slice = slices[e],
                                   .fill = fill};
                        /* what the bound leaves: the free wait, and at sync points
                         * the budget's worth of paid work past it */
                        double room = m.idle;
                        if (fill)
                            room += (bound - 1) / m.cost;
                        char what[96];
                        snprintf(what, sizeof what, "bound %g, cost %g, idle %g, slice %g, %s",
                                 bound, m.cost, m.idle, m.slice, fill ? "sync points" : "waits");
                        check_world(what, &m, bound, room, 0.3, false);
                        cases++;
                    }
    CHECK(cases == 252, "%d cases, want 252", cases);
}

int main(void)
{
    test_schedule();
    test_hand();
    test_after_effects();
    test_drift();
    test_shared_cores();
    test_grid();
    if (check_failures) {
        fprintf(stderr, "%d failure(s)\n", check_failures);
        return 1;
    }
    puts("guard: ok");
    return 0;
}
