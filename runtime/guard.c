/* guard.c: the slowdown guard of GPU multiplexing (issues 12 and 40), a state machine
 * over step times with no clock and no MPI of its own, so that tests can drive it with
 * made-up steps and made-up ranks. background.c feeds it every foreground step (the time
 * from the end of the previous step to the end of this one, so that what runs between
 * steps counts as a throughput measure sees it) and replaces it by its mean over the
 * ranks, which comes on the next step's loss sum: a step may begin before the one before
 * it has ended here, and everything the guard decides follows from the world's means, so
 * that every rank decides the same.
 *
 * Probes and gaps. The first step is a warm-up. Then, in turn, a probe: steps without
 * background work, of which the first `settle` (at least GUARD_SETTLE) are not measured
 * (a peer may still finish a slice of the step before, caches and the scheduler still
 * hold the background's traces) and the last GUARD_WINDOW are a window; and a gap of
 * steps with background work, GUARD_EARLY_GAP long until GUARD_EARLY windows are in,
 * GUARD_REPROBE after. A window's mean step is a baseline. After-effects that outlast the
 * settling show as a window whose first half is slower than its second by more than one
 * standard error of the halves' own spread: the window slides on by a step (up to
 * GUARD_SLIDE), and later probes settle a step longer (up to GUARD_SETTLE_MAX; four clean
 * windows in a row take one back). The machine's speed is re-measured early when it
 * moves: a baseline more than 3% and 3 standard errors from the one before shortens the
 * next gap to GUARD_EARLY_GAP, and a gap ends at once (after GUARD_GAP_MIN steps) when the
 * median of its last GUARD_STALE steps over the steering baseline says the baseline is
 * stale: below 1 by more than their noise, background work and all (the machine sped
 * up), or above the aim by as much (it slowed down). A stale baseline's last steps may
 * not raise the allowance either: a step with background work that is faster than the
 * baseline by more than its noise shows the machine's room, not the bound's.
 *
 * The measured slowdown. The steps between the ends of two windows (a segment: steps
 * with background work, then the next probe) are compared with the mean of the two
 * windows' baselines (where a stale baseline cut the gap, the old one up to the steps
 * that told it and the new one after), the steps after the last window with that
 * window's: the slowdown is the sum of the segments' times over the sum of their steps
 * times their baselines, what a `--background off` run of the same machine would take.
 * Its uncertainty is the spread of the segments' ratios (batch means: steps close in
 * time are not independent, segments nearly are), never less than what the windows' own
 * step-to-step spread allows; the upper confidence bound (one-sided 95%) adds Student's t
 * for the segments' degrees of freedom times it, or the normal's where the floor rules.
 *
 * Steering. Each step with background work may spend `allow` seconds in it (in waits
 * and at sync points alike); a slice runs only if what the step spent plus a moving
 * average of the slice's measured times fits (background.c). After each such step the
 * allowance follows the step time t towards the aim, the steering baseline times `aimf`,
 * as an integral controller:
 *   t above the aim: allow = max(0, min(allow, used) + GAIN x (aim - t)): first down to
 *     what the step used (an allowance the waits never filled says nothing), then less;
 *     one step far over the bound empties it at once.
 *   t at or below: allow = min(allow + GAIN x (aim - t), used + max(budget, want)),
 *     budget = (bound - 1) x baseline, want = the shortest slice that was left out for
 *     not fitting: it grows while the steps have room, but never past what was used by
 *     more than one budget (or one such slice), so that it does not wind up while the
 *     waits hold less than it allows.
 * aimf starts at half the bound's budget and, at the end of every window, moves by
 * GAIN_AIM times the distance of the segment just measured from the bound less the
 * confidence bound's margin: the upper bound of the slowdown is what is steered to the
 * bound, so a noisy machine, few segments or an uncertain baseline cost background
 * throughput, not foreground speed, and what the aim cannot see (a peer's slice that
 * runs into the next step, the settling steps' after-effects) is measured and paid for.
 * DeepPool's runtime pauses the background for whole steps instead; pauses made one
 * rank's baseline out of steps in which its peers still ran background work.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

#define GAIN         0.5 /* of the error, per step */
#define GAIN_AIM     0.5 /* of a segment's distance from its target, per window */
#define GUARD_Z_FADE 1.0 /* after-effects: the halves of a window apart by one standard error */

enum { WARM, PROBE, BG }; /* the kinds of step */

void rt_guard_init(rt_guard *g, double bound)
{
    memset(g, 0, sizeof *g);
    g->bound = bound > 1 ? bound : 1;
    g->aimf = 1 + 0.5 * (g->bound - 1);
    g->settle = GUARD_SETTLE;
    g->probing = g->probe_open = true; /* the first probe follows the warm-up */
    g->probe_id = 1;
}

bool rt_guard_step_begin(rt_guard *g)
{
    int k;
    if (g->begun == 0) {
        k = WARM;
    } else if (g->probing) {
        k = PROBE;
    } else if (g->gap_begun < g->gap_len) {
        k = BG;
        g->gap_begun++;
    } else {
        g->probing = g->probe_open = true;
        g->probe_id++;
        g->probe_n = 0;
        k = PROBE;
    }
    g->kinds[g->begun % 4] = k;
    g->probes[g->begun % 4] = g->probe_id;
    g->begun++;
    g->step_kind = k;
    g->bg_step = k == BG;
    return g->bg_step;
}

int rt_guard_step_time(rt_guard *g, double seconds)
{
    g->shared[0] = seconds;
    return 1; /* every step's: the world's mean is what the guard keeps */
}

/* One-sided 95% quantiles of Student's t with df degrees of freedom. */
static double t95(int df)
{
    static const double q[] = {6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860,
                               1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753, 1.746,
                               1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711,
                               1.708, 1.706, 1.703, 1.701, 1.699, 1.697};
    if (df < 1)
        return q[0];
    if (df <= 30)
        return q[df - 1];
    return GUARD_Z + (q[29] - GUARD_Z) * 30.0 / (double)df;
}

/* The slowdown over the closed segments of c, its standard error (the spread of the
 * segments' ratios, never less than the floor the windows' step-to-step spread
 * allows: a baseline of two windows holds 2 x GUARD_WINDOW steps, and nseg segments
 * share nseg + 1 windows) and the upper confidence bound: Student's t over the
 * segments where their spread is the error, the normal's where the floor is. */
static void summary(const rt_guard *c, double *s, double *se, double *upper)
{
    *s = c->sum_t / c->sum_w;
    double e = 0, fl = 0;
    if (c->nseg >= 2) {
        double v = c->w2r2 - 2 * *s * c->w2r + *s * *s * c->w2, w = c->sum_w;
        e = v > 0 ? sqrt(v / (w * w) * (double)c->nseg / (double)(c->nseg - 1)) : 0;
    }
    if (c->nvar >= 1)
        fl = sqrt(c->var / (double)c->nvar / (double)(GUARD_WINDOW * (c->nseg + 1)));
    *se = e > fl ? e : fl;
    *upper = *s + (e > fl ? t95(c->nseg - 1) : GUARD_Z) * *se;
}

/* A segment of t seconds against w, its steps times their baselines. */
static void add_segment(rt_guard *g, double t, double w)
{
    double r = t / w;
    g->sum_t += t;
    g->sum_w += w;
    g->w2 += w * w;
    g->w2r += w * w * r;
    g->w2r2 += w * w * r * r;
    g->nseg++;
}

static double median3(double a, double b, double c)
{
    return a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
}

static double median4(const double *x)
{
    double a = x[0] < x[1] ? x[0] : x[1], b = x[0] < x[1] ? x[1] : x[0];
    double c = x[2] < x[3] ? x[2] : x[3], d = x[2] < x[3] ? x[3] : x[2];
    double lo = a > c ? a : c, hi = b < d ? b : d; /* the middle two */
    return 0.5 * (lo + hi);
}

/* The steps' relative step-to-step spread the windows saw. */
static double sigma(const rt_guard *g)
{
    return g->nvar > 0 ? sqrt(g->var / (double)g->nvar) : 0;
}

/* The probe's last GUARD_WINDOW steps, x, are a window: mean *m, relative variance *v.
 * Whether its first half is slower than its second by more than noise explains
 * (one-sided 95%, against the halves' own spread): the background's after-effects
 * have not faded yet. */
static bool fading(const double *x, double *m, double *v)
{
    const int h = GUARD_WINDOW / 2;
    double m1 = 0, m2 = 0;
    for (int i = 0; i < h; i++) {
        m1 += x[i] / h;
        m2 += x[h + i] / h;
    }
    *m = 0.5 * (m1 + m2);
    double all = 0, within = 0;
    for (int i = 0; i < GUARD_WINDOW; i++) {
        double d = x[i] - *m, dw = x[i] - (i < h ? m1 : m2);
        all += d * d;
        within += dw * dw;
    }
    *v = *m > 0 ? all / (GUARD_WINDOW - 1.0) / (*m * *m) : 0;
    double vw = *m > 0 ? within / (GUARD_WINDOW - 2.0) / (*m * *m) : 0;
    double d = *m > 0 ? (m1 - m2) / *m : 0;
    return d > 0 && d * d > GUARD_Z_FADE * GUARD_Z_FADE * vw * 4.0 / GUARD_WINDOW;
}

/* A window closed after n steps of its probe: mean step m, relative variance v. */
static void window_end(rt_guard *g, double m, double v, int n)
{
    int slid = n - g->settle - GUARD_WINDOW;
    if (slid > 0) { /* after-effects outlasted the settling: settle longer from now on */
        g->settle += g->settle < GUARD_SETTLE_MAX;
        g->clean = 0;
    } else if (++g->clean >= 4 && g->settle > GUARD_SETTLE) {
        g->settle--;
        g->clean = 0;
    }
    g->var += v;
    g->nvar++;
    g->n_fg += GUARD_WINDOW;
    const double prev = g->base, prev_v = g->base_var;
    if (g->nwin > 0) {
        /* the segment's steps against what the machine ran at: the two windows' mean,
         * or, where a stale baseline cut the gap short, the old one before the steps
         * that told it and the new one after */
        double w = g->stale_cut ? (double)g->cut_n * prev + (double)(g->seg_n - g->cut_n) * m
                                : (double)g->seg_n * 0.5 * (prev + m);
        double r = g->seg_t / w, s, se, up;
        add_segment(g, g->seg_t, w);
        summary(g, &s, &se, &up);
        double a = g->aimf + GAIN_AIM * (g->bound - (up - s) - r);
        g->aimf = a < 1 ? 1 : a > g->bound ? g->bound : a;
    }
    g->base = m;
    g->base_var = v;
    g->recent[g->nwin % 3] = m;
    g->nwin++;
    g->steer = m;
    if (g->nwin >= 3) {
        double md = median3(g->recent[0], g->recent[1], g->recent[2]);
        g->steer = md < m ? md : m;
    }
    g->seg_t = 0;
    g->seg_n = 0;
    g->stale_n = 0;
    g->stale_cut = false;
    g->probing = g->probe_open = false;
    g->gap_begun = 0;
    /* a baseline that moved by more than its noise: the machine's speed drifts, so
     * the next window comes early */
    bool moved = g->nwin > 1 && fabs(m / prev - 1) > 0.03 &&
                 fabs(m / prev - 1) > 3 * sqrt((v + prev_v) / GUARD_WINDOW);
    g->gap_len = g->nwin < GUARD_EARLY || moved ? GUARD_EARLY_GAP : GUARD_REPROBE;
    if (g->nwin == 1)
        g->allow = (g->aimf - 1) * g->steer; /* the first steps with background */
}

static void probe_step(rt_guard *g, double t)
{
    g->probe_t[g->probe_n++] = t;
    const int n = g->probe_n;
    if (n < g->settle + GUARD_WINDOW)
        return;
    double m, v;
    bool slide = fading(g->probe_t + n - GUARD_WINDOW, &m, &v);
    if (slide && n < GUARD_PROBE_MAX)
        return; /* the oldest step settles; the window slides on */
    window_end(g, m, v, n);
}

/* A step with background work of t seconds, `used` of them in it on this rank. */
static void bg_step(rt_guard *g, double t, double used, double want)
{
    g->t_bg += t;
    g->n_bg++;
    g->used += used;
    g->ratio += t / g->base;
    if (t > g->bound * g->base)
        g->over++;
    const double r = t / g->steer, sig = sigma(g);
    /* A stale baseline: the gap's last GUARD_STALE steps (their median, so that one
     * spike does not tell it), background work and all, faster than it by more than
     * their noise (the median of 4 has 1.2 times the spread of their mean) (the machine sped up), or slower than
     * the aim by as much (it slowed down, or the background costs more than the
     * allowance can take back at once): the gap ends and a window measures the machine
     * again. Step times are the world's means, so every rank decides the same. */
    g->stale[g->stale_n++ % GUARD_STALE] = r;
    if (g->stale_n >= GUARD_STALE && g->gap_begun >= GUARD_GAP_MIN && g->gap_len > g->gap_begun) {
        double q = median4(g->stale), thr = 1.2 * GUARD_Z * sig / 2 + 0.01;
        if (q < 1 - thr || q > g->aimf + thr) {
            g->gap_len = g->gap_begun;
            g->stale_cut = true;
            g->cut_n = g->seg_n > GUARD_STALE ? g->seg_n - GUARD_STALE : 0;
            g->stale_gaps++;
        }
    }
    const double aim = g->aimf * g->steer;
    double err = aim - t;
    if (err < 0) {
        double a = (g->allow < used ? g->allow : used) + GAIN * err;
        g->allow = a > 0 ? a : 0;
    } else if (r >= 1 - GUARD_Z * sig) {
        double budget = (g->bound - 1) * g->steer;
        double a = g->allow + GAIN * err, cap = used + (want > budget ? want : budget);
        g->allow = a < cap ? a : cap;
    } /* else faster than the baseline with background work in it: the room the aim
       * shows may be the machine's, not the bound's, so the allowance holds */
}

void rt_guard_step_end(rt_guard *g, double used, double want)
{
    const double t = g->shared[0];
    const int k = g->kinds[g->seen % 4], id = g->probes[g->seen % 4];
    g->seen++;
    if (k == WARM)
        return;
    if (g->nwin > 0) { /* every step after the first window is in a segment */
        g->seg_t += t;
        g->seg_n++;
    }
    if (k == PROBE) {
        if (g->probe_open && id == g->probe_id)
            probe_step(g, t);
        return; /* (a probe's step that ended after its window closed: a settling one) */
    }
    bg_step(g, t, used, want);
}

bool rt_guard_estimate(const rt_guard *g, double *slowdown, double *se, double *upper)
{
    if (g->nwin == 0 || (g->nseg == 0 && g->seg_n == 0))
        return false;
    rt_guard c = *g; /* the steps after the last window: against its baseline */
    if (c.seg_n > 0)
        add_segment(&c, c.seg_t, (double)c.seg_n * c.base);
    summary(&c, slowdown, se, upper);
    return true;
}
