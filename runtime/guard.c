/* guard.c: the slowdown guard of GPU multiplexing (issue 12), a state machine over
 * step times with no clock and no MPI of its own, so that tests can drive it with made-up
 * steps. background.c feeds it every foreground step.
 *
 * Probes. The first step is a warm-up (neither measured nor given background work); the
 * next GUARD_PROBES steps run without background work, then one step in every
 * GUARD_EARLY_GAP + 1 until GUARD_KEEP probes are in, then one in every GUARD_REPROBE + 1.
 * The baseline, the step time without background work, is the median of the last
 * GUARD_KEEP probes: the first steps of a run are often slower (first touches of memory,
 * caches, a peer's start-up), and a median of later probes forgets them. The schedule is
 * a function of the step count alone, so every rank of a job probes in the same steps
 * and no rank's probe is slowed by a peer's background work.
 *
 * The allowance. Each step with background work may spend `allow` seconds in it (in
 * waits and at sync points alike); a slice runs only if what the step spent plus a
 * moving average of the slice's measured times fits (background.c). After each such
 * step the allowance follows the step time t towards the aim, baseline x (1 + GUARD_MARGIN x (bound - 1)) — the bound less a
 * tenth of its budget for noise — as an integral controller:
 *   t above the aim: allow = max(0, min(allow, used) + GAIN x (aim - t)): first down to
 *     what the step used (an allowance the waits never filled says nothing), then less;
 *     one step far over the bound empties it at once.
 *   t at or below: allow = min(allow + GAIN x (aim - t), used + max(budget, want)),
 *     budget = (bound - 1) x baseline, want = the shortest slice that was left out for
 *     not fitting: it grows while the steps have room, but never past what was used by
 *     more than one budget (or one such slice: a slice measured longer than the budget
 *     still gets its turn when the steps have room), so that it does not wind up while
 *     the waits hold less than it allows.
 * When background work costs the foreground its own length (one GPU, whose only idle
 * time is the host's sync points; ranks that share cores), the step settles at the aim;
 * when it is free (a peer's wait on a GPU of its own), the allowance grows with what the
 * waits hold. DeepPool's runtime pauses the background for whole steps instead; pauses
 * made one rank's baseline out of steps in which its peers still ran background work.
 */
#include "internal.h"

#include <string.h>

#define GAIN 0.5 /* of the error, per step */

static double median(const double *v, int n)
{
    double s[GUARD_KEEP];
    memcpy(s, v, sizeof(double) * (size_t)n);
    for (int i = 1; i < n; i++) /* insertion sort: n <= GUARD_KEEP */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

void rt_guard_init(rt_guard *g, double bound)
{
    memset(g, 0, sizeof *g);
    g->bound = bound > 1 ? bound : 1;
}

/* The step time the allowance steers to. */
static double aim(const rt_guard *g)
{
    return g->baseline * (1 + GUARD_MARGIN * (g->bound - 1));
}

bool rt_guard_step_begin(rt_guard *g)
{
    bool bg;
    if (g->seen == 0 || g->nprobe < GUARD_PROBES)
        bg = false; /* warm-up, first probes */
    else
        bg = g->since_probe < (g->nprobe < GUARD_KEEP ? GUARD_EARLY_GAP : GUARD_REPROBE);
    g->bg_step = bg;
    return bg;
}

void rt_guard_step_end(rt_guard *g, double seconds, double used, double want)
{
    if (g->seen++ == 0)
        return; /* the warm-up step */
    if (!g->bg_step) {
        g->n_fg++;
        g->probe[g->nprobe % GUARD_KEEP] = seconds;
        g->nprobe++;
        g->since_probe = 0;
        g->baseline = median(g->probe, g->nprobe < GUARD_KEEP ? g->nprobe : GUARD_KEEP);
        if (g->nprobe == GUARD_PROBES)
            g->allow = aim(g) - g->baseline; /* the first steps with background */
        return;
    }
    g->since_probe++;
    g->t_bg += seconds;
    g->n_bg++;
    g->used += used;
    g->ratio += seconds / g->baseline;
    if (seconds > g->bound * g->baseline)
        g->over++;
    double err = aim(g) - seconds;
    if (err < 0) {
        double a = (g->allow < used ? g->allow : used) + GAIN * err;
        g->allow = a > 0 ? a : 0;
    } else {
        double budget = (g->bound - 1) * g->baseline;
        double a = g->allow + GAIN * err, cap = used + (want > budget ? want : budget);
        g->allow = a < cap ? a : cap;
    }
}
