/* mle.c: maximum-likelihood scoring under BTL, alone and as Spectral MLE's refinement.
 *
 * The log-likelihood of scores w = exp(theta) is
 *     sum over pairs of  wins_ij log s(theta_i - theta_j) + wins_ji log s(theta_j - theta_i)
 * with s the logistic function; it is concave in theta, and finite at its maximum
 * exactly when the "who beat whom" graph is strongly connected (the caller checks).
 *
 * Spectral MLE (Chen & Suh, ICML 2015) starts from Rank Centrality and then, for a few
 * rounds, computes for every item the MLE of its own score with all others fixed
 * (a one-dimensional concave problem, solved by safeguarded Newton on theta_i) and
 * replaces the current score by it when the two differ by more than a threshold that
 * halves every round: large deviations left by the spectral step get fixed first.
 * We use all comparisons in both stages; the paper splits them into two independent
 * halves only to make its proof work.
 *
 * Plain MLE uses Hunter's MM update w_i <- W_i / sum_j n_ij / (w_i + w_j), applied in
 * place item after item (cyclic), which increases the likelihood at every step. */
#include "rank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* g(t) = wins_i - sum_e games_e s(t - theta_j): the derivative of item i's
 * log-likelihood in its own log-score t; h gets -g'(t).  With w_j = exp(theta_j)
 * precomputed, s(t - theta_j) = e^t / (e^t + w_j) costs a division, not an exp. */
static double coord_grad(const rank_graph *g, const double *w, int32_t i, double wins, double t,
                         double *h)
{
    double et = exp(t), s = wins, hh = 0;
    for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
        double p = et / (et + w[g->col[e]]);
        s -= g->games[e] * p;
        hh += g->games[e] * p * (1 - p);
    }
    *h = hh;
    return s;
}

/* The coordinate-wise MLE of theta_i, starting from t0; returns 0, or -1 when it is
 * infinite (item i has no win or no loss).  Newton on a concave function, safeguarded:
 * every evaluation tightens a bracket around the root of the decreasing g, steps are
 * at most 2 in log-score, and a step that leaves the bracket bisects it instead. */
static int coord_mle(const rank_graph *g, const double *w, int32_t i, double t0, double *out)
{
    double wins = 0, games = 0;
    for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
        wins += g->wins[e];
        games += g->games[e];
    }
    if (!(wins > 0) || !(wins < games))
        return -1;
    double t = t0, lo = -INFINITY, hi = INFINITY;
    for (int k = 0; k < 200; k++) {
        double h;
        double gr = coord_grad(g, w, i, wins, t, &h);
        if (gr == 0)
            break;
        if (gr > 0)
            lo = t;
        else
            hi = t;
        double step = h > 0 ? gr / h : (gr > 0 ? 2 : -2);
        if (step > 2)
            step = 2;
        if (step < -2)
            step = -2;
        double next = t + step;
        if (next == t)
            break; /* the step is below the resolution of t */
        if (!(next > lo && next < hi))
            next = 0.5 * (lo + hi);
        double moved = fabs(next - t);
        t = next;
        if (moved < 1e-12 * (1 + fabs(t)))
            break;
    }
    *out = t;
    return 0;
}

static void normalise(double *w, int32_t n)
{
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += w[i];
    for (int32_t i = 0; i < n; i++)
        w[i] = sum > 0 ? w[i] / sum : 1.0 / n;
}

int rank_spectral_mle(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep)
{
    int32_t n = g->n;
    int rc = rank_spectral(g, o, score, rep);
    if (rc)
        return rc;
    if (n < 2 || g->nnz == 0)
        return 0;
    double *cur = malloc((size_t)n * sizeof *cur); /* scores scaled to max 1 */
    double *next = malloc((size_t)n * sizeof *next);
    if (!cur || !next) {
        free(cur);
        free(next);
        return -1;
    }
    /* Thresholds are on scores scaled to a largest score of 1, as in the paper:
   * xi_t = c (xi_min + 2^-t (xi_max - xi_min)) with xi_max = sqrt(log n / (n p)) the
   * order of the spectral method's entrywise error and xi_min = sqrt(log n / (n p L))
   * the MLE's; p and L are estimated from the graph, c is o->xi (the paper proves
   * its result for some constant and does not give one). */
    double p = (double)g->nnz / ((double)n * (n - 1));
    double L = g->comparisons > 0 ? g->comparisons / (0.5 * (double)g->nnz) : 1;
    double xi_max = o->xi * sqrt(log((double)n) / (n * p));
    double xi_min = o->xi * sqrt(log((double)n) / (n * p * L));
    int rounds = o->rounds > 0 ? o->rounds : (int)ceil(log2((double)n));
    for (int r = 0; r < rounds; r++) {
        double wmax = 0;
        for (int32_t i = 0; i < n; i++)
            if (score[i] > wmax)
                wmax = score[i];
        if (!(wmax > 0))
            break;
        for (int32_t i = 0; i < n; i++)
            cur[i] = score[i] / wmax;
        double xi = xi_min + ldexp(xi_max - xi_min, -r);
        for (int32_t i = 0; i < n; i++) {
            double t;
            next[i] = cur[i];
            double t0 = cur[i] > 0 ? log(cur[i]) : -30;
            if (coord_mle(g, cur, i, t0, &t) == 0 && fabs(exp(t) - next[i]) > xi)
                next[i] = exp(t);
        }
        memcpy(score, next, (size_t)n * sizeof *score);
        normalise(score, n);
    }
    free(cur);
    free(next);
    return 0;
}

int rank_mle(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep)
{
    int32_t n = g->n;
    rank_report r;
    memset(&r, 0, sizeof r);
    double *wins = malloc(((size_t)n + 1) * sizeof *wins);
    if (!wins)
        return -1;
    for (int32_t i = 0; i < n; i++) {
        wins[i] = 0;
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++)
            wins[i] += g->wins[e];
        score[i] = 1.0 / n;
    }
    double history[RANK_HISTORY] = {0};
    while (r.iterations < o->max_iter) {
        double diff = 0, wmax = 0, sum = 0;
        for (int32_t i = 0; i < n; i++) {
            double den = 0;
            for (int64_t e = g->row[i]; e < g->row[i + 1]; e++)
                den += g->games[e] / (score[i] + score[g->col[e]]);
            double v = den > 0 ? wins[i] / den : score[i];
            if (fabs(v - score[i]) > diff)
                diff = fabs(v - score[i]);
            score[i] = v;
            if (v > wmax)
                wmax = v;
            sum += v;
        }
        /* Rescaling does not change the likelihood; it keeps the numbers near 1/n. */
        if (sum > 0)
            for (int32_t i = 0; i < n; i++)
                score[i] /= sum;
        if (rank_track_step(&r, history, wmax > 0 ? diff / wmax : 0, o->tol))
            break;
    }
    normalise(score, n);
    if (rep)
        *rep = r;
    free(wins);
    return 0;
}
