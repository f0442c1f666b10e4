/* guard.c: the slowdown guard of GPU multiplexing (issues 12 and 40), a state machine
 * over step times with no clock and no MPI of its own, so that tests can drive it with
 * made-up steps and made-up ranks. background.c feeds it every foreground step (the time
 * from the end of the previous step to the end of this one, so that what runs between
 * steps counts as a throughput measure sees it) and averages over the ranks what the
 * guard asks to be shared; with several ranks those means come on the next step's loss
 * sum, so a step may begin before the one before it has ended here.
 *
 * Baseline windows. The first step is a warm-up. Then, in turn: GUARD_SETTLE steps
 * without background work and unmeasured (a peer may still finish a slice of the step
 * before, caches and the scheduler still hold the background's traces), GUARD_WINDOW
 * measured steps without background work (a window), and GUARD_EARLY_GAP steps with
 * background work until GUARD_EARLY windows are in, GUARD_REPROBE after. A window's
 * mean step is a baseline: a single probe step after background steps measured their
 * after-effects, and a median of single steps left out the spikes that a mean step, and
 * so a run's throughput, holds. The schedule is a function of the step count alone, so
 * every rank of a job is in the same kind of step.
 *
 * The measured slowdown. The steps between the ends of two windows (a segment: steps
 * with background work, then the next window's settling and its window) are compared
 * with the mean of the two windows' baselines, the steps after the last window with that
 * window's: the slowdown is the sum of the segments' times over the sum of their steps
 * times their baselines, what a `--background off` run of the same machine would take.
 * Drift of the machine's speed moves both sides. Its uncertainty is the spread of the
 * segments' ratios (batch means: steps close in time are not independent, segments
 * nearly are), and never less than what the windows' own step-to-step spread allows;
 * the upper confidence bound adds GUARD_Z of it.
 *
 * Steering. Each step with background work may spend `allow` seconds in it (in waits
 * and at sync points alike); a slice runs only if what the step spent plus a moving
 * average of the slice's measured times fits (background.c). After each such step the
 * allowance follows the step time t towards the aim, the last window's baseline times
 * `aimf`, as an integral controller:
 *   t above the aim: allow = max(0, min(allow, used) + GAIN x (aim - t)): first down to
 *     what the step used (an allowance the waits never filled says nothing), then less;
 *     one step far over the bound empties it at once.
 *   t at or below: allow = min(allow + GAIN x (aim - t), used + max(budget, want)),
 *     budget = (bound - 1) x baseline, want = the shortest slice that was left out for
 *     not fitting: it grows while the steps have room, but never past what was used by
 *     more than one budget (or one such slice), so that it does not wind up while the
 *     waits hold less than it allows.
 * aimf starts at half the bound's budget and, at the end of every window, moves by
 * GAIN_AIM times the distance of the segment just measured from bound - GUARD_Z x the
 * uncertainty: the upper bound of the slowdown is what is steered to the bound, so a
 * noisy machine or an uncertain baseline costs background throughput, not foreground
 * speed, and what the aim cannot see (a peer's slice that runs into the next step, the
 * settling steps' after-effects) is measured and paid for.
 * DeepPool's runtime pauses the background for whole steps instead; pauses made one
 * rank's baseline out of steps in which its peers still ran background work.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

#define GAIN     0.5 /* of the error, per step */
#define GAIN_AIM 0.5 /* of a segment's distance from its target, per window */

void rt_guard_init(rt_guard *g, double bound)
{
    memset(g, 0, sizeof *g);
    g->bound = bound > 1 ? bound : 1;
    g->aimf = 1 + 0.5 * (g->bound - 1);
}

/* The kind of step i (counting from 0, the warm-up) in the schedule: a function of the
 * step count alone, so that a step may begin before the step before it has ended in the
 * guard (background.c hands it the world's step times one step late). */
enum { WARM, SETTLE, WINDOW, BG };

static int kind_at(int64_t i)
{
    const int64_t probe = GUARD_SETTLE + GUARD_WINDOW;
    if (i == 0)
        return WARM;
    int64_t off = i - 1, gap = 0; /* the first window follows the warm-up at once */
    if (off >= probe) {
        off -= probe;
        const int64_t early = (int64_t)(GUARD_EARLY - 1) * (GUARD_EARLY_GAP + probe);
        gap = off < early ? GUARD_EARLY_GAP : GUARD_REPROBE;
        off = off < early ? off % (gap + probe) : (off - early) % (gap + probe);
    }
    if (off < gap)
        return BG;
    return off - gap < GUARD_SETTLE ? SETTLE : WINDOW;
}

bool rt_guard_step_begin(rt_guard *g)
{
    g->step_kind = kind_at(g->begun++);
    g->bg_step = g->step_kind == BG;
    return g->bg_step;
}

int rt_guard_step_time(rt_guard *g, double seconds)
{
    g->shared[0] = seconds;
    g->end_kind = g->step_kind;
    if (g->step_kind == BG)
        return 1; /* the controller needs the world's step now */
    if (g->step_kind == WINDOW) {
        g->win_t[g->win_n++] = seconds;
        if (g->win_n == GUARD_WINDOW) {
            double s = 0;
            for (int i = 0; i < GUARD_WINDOW; i++)
                s += g->win_t[i];
            double v = 0, mean = s / GUARD_WINDOW;
            for (int i = 0; i < GUARD_WINDOW && mean > 0; i++) {
                double d = g->win_t[i] / mean - 1;
                v += d * d / (GUARD_WINDOW - 1.0);
            }
            g->shared[0] = s;
            g->shared[1] = g->seg_t + seconds; /* the window's other steps are in seg_t */
            g->shared[2] = v;
            return 3; /* the window's and the segment's sums, the window's variance */
        }
    }
    return 0;
}

/* Standard error of the slowdown over the segments, without the floor. */
static double spread(const rt_guard *g, double s)
{
    if (g->nseg < 2)
        return 0;
    double v = g->w2r2 - 2 * s * g->w2r + s * s * g->w2;
    double w = g->sum_w;
    return v > 0 ? sqrt(v / (w * w) * (double)g->nseg / (double)(g->nseg - 1)) : 0;
}

/* The floor: a baseline of two windows holds 2 x GUARD_WINDOW steps of relative spread
 * sigma (the windows' mean sample variance); the segments share their windows, so nseg
 * of them hold nseg + 1. */
static double floor_se(const rt_guard *g, int nseg)
{
    if (g->nvar < 1)
        return 0;
    double sigma2 = g->var / (double)g->nvar;
    return sqrt(sigma2 / (double)(GUARD_WINDOW * (nseg + 1)));
}

/* A segment of n steps and t seconds against baseline b. */
static void add_segment(rt_guard *g, double t, int64_t n, double b)
{
    double w = (double)n * b, r = t / w;
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

static void window_end(rt_guard *g, double win_sum, double seg_sum, double var)
{
    double m = win_sum / GUARD_WINDOW;
    g->var += var;
    g->nvar++;
    if (g->nwin > 0) {
        double b = 0.5 * (g->base + m);
        double r = seg_sum / ((double)g->seg_n * b);
        add_segment(g, seg_sum, g->seg_n, b);
        double s = g->sum_t / g->sum_w, se = spread(g, s), fl = floor_se(g, g->nseg);
        se = se > fl ? se : fl;
        double a = g->aimf + GAIN_AIM * (g->bound - GUARD_Z * se - r);
        g->aimf = a < 1 ? 1 : a > g->bound ? g->bound : a;
    }
    g->base = m;
    g->recent[g->nwin % 3] = m;
    g->nwin++;
    g->steer = m;
    if (g->nwin >= 3) {
        double md = median3(g->recent[0], g->recent[1], g->recent[2]);
        g->steer = md < m ? md : m;
    }
    g->win_n = 0;
    g->seg_t = 0;
    g->seg_n = 0;
    if (g->nwin == 1)
        g->allow = (g->aimf - 1) * g->steer; /* the first steps with background */
}

void rt_guard_step_end(rt_guard *g, double used, double want)
{
    const double seconds = g->shared[0];
    const int k = g->end_kind;
    g->seen++;
    if (k == WARM)
        return;
    if (g->nwin > 0 && !(k == WINDOW && g->win_n == GUARD_WINDOW)) {
        g->seg_t += seconds;
        g->seg_n++;
    }
    if (k != BG) {
        if (k == WINDOW) {
            g->n_fg++;
            if (g->win_n == GUARD_WINDOW) {
                if (g->nwin > 0)
                    g->seg_n++; /* the window's last step; its time is in shared[1] */
                window_end(g, g->shared[0], g->shared[1], g->shared[2]);
            }
        }
        return;
    }
    g->t_bg += seconds;
    g->n_bg++;
    g->used += used;
    g->ratio += seconds / g->base;
    if (seconds > g->bound * g->base)
        g->over++;
    const double aim = g->aimf * g->steer;
    double err = aim - seconds;
    if (err < 0) {
        double a = (g->allow < used ? g->allow : used) + GAIN * err;
        g->allow = a > 0 ? a : 0;
    } else {
        double budget = (g->bound - 1) * g->steer;
        double a = g->allow + GAIN * err, cap = used + (want > budget ? want : budget);
        g->allow = a < cap ? a : cap;
    }
}

bool rt_guard_estimate(const rt_guard *g, double *slowdown, double *se)
{
    if (g->nwin == 0 || (g->nseg == 0 && g->seg_n == 0))
        return false;
    rt_guard c = *g; /* the steps after the last window: against its baseline */
    if (c.seg_n > 0)
        add_segment(&c, c.seg_t, c.seg_n, c.base);
    double s = c.sum_t / c.sum_w, e = spread(&c, s), fl = floor_se(&c, c.nseg);
    *slowdown = s;
    *se = e > fl ? e : fl;
    return true;
}
