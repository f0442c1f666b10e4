/* spectral.c: Rank Centrality (Negahban, Oh & Shah), the spectral method.
 *
 * The chain moves from item j to item i with probability f_ij / d_max, where f_ij is
 * the fraction of their games that i won and d_max the largest number of distinct
 * opponents; the rest of each row is a self-loop.  Under BTL its stationary
 * distribution is proportional to the scores.  It satisfies the balance equations
 * out_i pi_i = sum_j f_ij pi_j (out_i = sum_j f_ji), which we solve by damped Jacobi
 * over the CSR graph:
 *     x'_i = (1 - OMEGA) x_i + (OMEGA / out_i) sum_j f_ij x_j.
 * Each update is a pull over row i's opponents, so rows are independent and split
 * across threads (balanced by entries, not by rows, because degrees vary).  Threads
 * meet at a barrier twice per iteration: once after computing their rows, once after
 * one of them has decided whether to stop.  Rows are computed the same way whatever
 * the split, so the result does not depend on the thread count.
 *
 * When the win graph is not strongly connected, the stationary distribution lives on
 * its closed groups (components no member of which ever lost to an outsider).  With
 * one closed group it is unique: zero outside the group, and inside it the
 * stationary distribution of the chain restricted to the group, which Jacobi finds
 * with the other rows held at zero.  With two or more it is not unique, and
 * rank_spectral says so instead of picking one. */
#include "rank.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void rank_opts_default(rank_opts *o)
{
    o->tol = 1e-10;
    o->max_iter = RANK_MAX_ITER;
    o->threads = 2;
    o->rounds = 0;
    o->xi = RANK_DEFAULT_XI;
    o->strength = NULL;
}

int64_t rank_default_max_iter(const rank_graph *g)
{
    double per = (double)g->nnz + (double)g->n + 1;
    double fit = RANK_WORK_BUDGET / per;
    if (fit >= RANK_MAX_ITER)
        return RANK_MAX_ITER;
    return fit < 100 ? 100 : (int64_t)fit;
}

/* Below this relative step, double precision is all that is left to gain. */
#define PRECISION_FLOOR 1e-13

int rank_track_step(rank_report *r, double *history, double step, double tol)
{
    r->iterations++;
    r->step = step;
    int have = r->iterations < RANK_HISTORY ? (int)r->iterations : RANK_HISTORY;
    memmove(history, history + 1, (RANK_HISTORY - 1) * sizeof *history);
    history[RANK_HISTORY - 1] = step;
    /* Contraction rate: geometric mean of the step ratios over the recent history. */
    double first = history[RANK_HISTORY - have];
    if (step == 0 || first == 0) {
        r->rate = 0;
        r->error_bound = 0;
    } else if (have >= 2) {
        r->rate = pow(step / first, 1.0 / (have - 1));
        r->error_bound = r->rate < 1 ? step * r->rate / (1 - r->rate) : -1;
    } else {
        r->rate = 0;
        r->error_bound = -1; /* not known after one step */
    }
    if (step <= tol && r->error_bound >= 0 && r->error_bound <= tol) {
        r->converged = 1;
        return 1;
    }
    if (have == RANK_HISTORY && step <= PRECISION_FLOOR && step >= first) {
        /* No progress in RANK_HISTORY - 1 steps: what moves is rounding noise, so the
         * step itself bounds the error; converged if that meets tol. */
        r->converged = step <= tol;
        r->stalled = !r->converged;
        return 1;
    }
    return 0;
}

#define OMEGA 0.9

typedef struct part {
    double diff, max, sum;
} part;

typedef struct spec {
    const rank_graph *g;
    const rank_opts *o;
    const char *active; /* rows of the closed group, or NULL for all */
    double *frac;       /* f_ij per entry */
    double *pull;       /* per item: OMEGA / out_i, 0 for rows held at zero */
    double *out;        /* per item: sum_j f_ji, its rate of losing */
    double *x, *y;
    int32_t *bounds; /* thread t owns rows bounds[t] .. bounds[t+1]-1 */
    part *parts;
    int nthreads;
    int stop;
    pthread_barrier_t barrier;
    pthread_mutex_t gate; /* start gate: 0 wait, 1 go, 2 leave */
    pthread_cond_t gate_cv;
    int gate_state;
    rank_report rep;
    double history[RANK_HISTORY];
} spec;

typedef struct worker {
    spec *s;
    int t;
} worker;

/* Fractions, loss rates, coefficients and the start: the ratio of each item's "win
 * rate" to its "loss rate", a one-step estimate of the scores that is usually close
 * to the answer.  (Jacobi is power iteration on the chain's jump chain, x_i = y_i /
 * out_i, made lazy by 1 - OMEGA so that periodic graphs such as stars converge; its
 * fixed points are the stationary distributions of the chain as specified, since the
 * balance equations do not involve d_max, but each item moves at its own rate instead
 * of the slowest one's, which cuts the iterations several-fold.) */
static void prepare_rows(spec *s, int32_t lo, int32_t hi)
{
    const rank_graph *g = s->g;
    for (int32_t i = lo; i < hi; i++) {
        double out = 0;
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
            double f = g->games[e] > 0 ? g->wins[e] / g->games[e] : 0;
            s->frac[e] = f;
            if (g->games[e] > 0)
                out += 1 - f;
        }
        s->out[i] = out;
        int on = (!s->active || s->active[i]) && out > 0;
        s->pull[i] = on ? OMEGA / out : 0;
        double deg = (double)(g->row[i + 1] - g->row[i]);
        s->x[i] = on ? (deg - out) / out : 0;
    }
}

static part iterate_rows(spec *s, int32_t lo, int32_t hi)
{
    const rank_graph *g = s->g;
    const double *x = s->x, *frac = s->frac, *pull = s->pull;
    const int32_t *col = g->col;
    const int64_t *row = g->row;
    double *y = s->y;
    part p = {0, 0, 0};
    for (int32_t i = lo; i < hi; i++) {
        double v = 0;
        if (pull[i] > 0) {
            double acc = 0;
            for (int64_t e = row[i]; e < row[i + 1]; e++)
                acc += frac[e] * x[col[e]];
            v = (1 - OMEGA) * x[i] + pull[i] * acc;
        }
        y[i] = v;
        double d = fabs(v - x[i]);
        if (d > p.diff)
            p.diff = d;
        if (v > p.max)
            p.max = v;
        p.sum += v;
    }
    return p;
}

/* Thread 0's part of an iteration: combine, record, decide, swap. */
static void finish_iteration(spec *s)
{
    part all = {0, 0, 0};
    for (int t = 0; t < s->nthreads; t++) {
        if (s->parts[t].diff > all.diff)
            all.diff = s->parts[t].diff;
        if (s->parts[t].max > all.max)
            all.max = s->parts[t].max;
        all.sum += s->parts[t].sum;
    }
    double *tmp = s->x;
    s->x = s->y;
    s->y = tmp;
    double step = all.max > 0 ? all.diff / all.max : 0;
    if (rank_track_step(&s->rep, s->history, step, s->o->tol) ||
        s->rep.iterations >= s->o->max_iter)
        s->stop = 1;
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    spec *s = w->s;
    int32_t lo = s->bounds[w->t], hi = s->bounds[w->t + 1];
    if (w->t > 0) {
        pthread_mutex_lock(&s->gate);
        while (s->gate_state == 0)
            pthread_cond_wait(&s->gate_cv, &s->gate);
        int leave = s->gate_state == 2;
        pthread_mutex_unlock(&s->gate);
        if (leave)
            return NULL;
    }
    prepare_rows(s, lo, hi);
    pthread_barrier_wait(&s->barrier);
    while (!s->stop) {
        s->parts[w->t] = iterate_rows(s, lo, hi);
        if (pthread_barrier_wait(&s->barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
            finish_iteration(s);
        pthread_barrier_wait(&s->barrier);
    }
    return NULL;
}

/* Splits rows so that each thread gets about the same number of entries plus rows. */
static void split_rows(const rank_graph *g, int nthreads, int32_t *bounds)
{
    double total = (double)g->nnz + g->n;
    int32_t i = 0;
    bounds[0] = 0;
    for (int t = 1; t < nthreads; t++) {
        double target = total * t / nthreads;
        while (i < g->n && (double)g->row[i] + i < target)
            i++;
        bounds[t] = i;
    }
    bounds[nthreads] = g->n;
}

/* Runs the iteration on 1 or more threads; returns 0, or -1 when threads cannot start. */
static int iterate(spec *s)
{
    int32_t n = s->g->n;
    if (s->nthreads == 1) {
        prepare_rows(s, 0, n);
        while (!s->stop) {
            s->parts[0] = iterate_rows(s, 0, n);
            finish_iteration(s);
        }
        return 0;
    }
    int nthreads = s->nthreads;
    worker *ws = malloc((size_t)nthreads * sizeof *ws);
    pthread_t *tids = malloc((size_t)nthreads * sizeof *tids);
    if (!ws || !tids || pthread_barrier_init(&s->barrier, NULL, (unsigned)nthreads)) {
        free(ws);
        free(tids);
        return -1;
    }
    int started = 0;
    for (int t = 1; t < nthreads; t++) {
        ws[t] = (worker){s, t};
        if (pthread_create(&tids[t], NULL, run_worker, &ws[t]))
            break;
        started++;
    }
    /* The barrier counts every thread, so the workers wait at a gate until all of
     * them exist; if one could not start, the others are told to leave. */
    pthread_mutex_lock(&s->gate);
    s->gate_state = started == nthreads - 1 ? 1 : 2;
    pthread_cond_broadcast(&s->gate_cv);
    pthread_mutex_unlock(&s->gate);
    int rc = 0;
    if (started == nthreads - 1) {
        ws[0] = (worker){s, 0};
        run_worker(&ws[0]);
    } else {
        rc = -1;
    }
    for (int t = 1; t <= started; t++)
        pthread_join(tids[t], NULL);
    pthread_barrier_destroy(&s->barrier);
    free(ws);
    free(tids);
    return rc;
}

/* Marks the rows of the one closed group in *active; returns 0, RANK_NOT_UNIQUE when
 * there are several groups, or -1 when out of memory. */
static int closed_group(const rank_graph *g, char **active)
{
    int32_t *cls = malloc(((size_t)g->n + 1) * sizeof *cls);
    char *closed = NULL;
    int32_t count = cls ? rank_win_components(g, cls, &closed) : -1;
    if (count < 0) {
        free(cls);
        return -1;
    }
    int32_t groups = 0;
    for (int32_t c = 0; c < count; c++)
        groups += closed[c];
    int rc = groups > 1 ? RANK_NOT_UNIQUE : 0;
    if (rc == 0) {
        *active = malloc((size_t)g->n + 1);
        if (!*active)
            rc = -1;
        else
            for (int32_t i = 0; i < g->n; i++)
                (*active)[i] = closed[cls[i]];
    }
    free(cls);
    free(closed);
    return rc;
}

int rank_spectral(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep)
{
    int32_t n = g->n;
    spec s;
    memset(&s, 0, sizeof s);
    if (rep)
        memset(rep, 0, sizeof *rep);
    if (n == 0)
        return 0;
    if (n == 1) {
        score[0] = 1;
        if (rep)
            rep->converged = 1;
        return 0;
    }
    s.g = g;
    s.o = o;
    char *active = NULL;
    const rank_strength *st = o->strength;
    if (st && !st->strongly_connected && st->groups > 1)
        return RANK_NOT_UNIQUE;
    if (!st || !st->strongly_connected) {
        int rc = closed_group(g, &active);
        if (rc)
            return rc;
        s.active = active;
    }
    int nthreads = o->threads < 1 ? 1 : o->threads;
    if (nthreads > n)
        nthreads = n;
    s.nthreads = nthreads;
    pthread_mutex_init(&s.gate, NULL);
    pthread_cond_init(&s.gate_cv, NULL);
    s.frac = malloc(((size_t)g->nnz + 1) * sizeof *s.frac);
    s.pull = malloc((size_t)n * sizeof *s.pull);
    s.out = malloc((size_t)n * sizeof *s.out);
    s.y = malloc((size_t)n * sizeof *s.y);
    s.bounds = malloc(((size_t)nthreads + 1) * sizeof *s.bounds);
    s.parts = calloc((size_t)nthreads, sizeof *s.parts);
    s.x = score;
    int rc = -1;
    if (!s.frac || !s.pull || !s.out || !s.y || !s.bounds || !s.parts)
        goto done;
    split_rows(g, nthreads, s.bounds);
    if (iterate(&s))
        goto done;
    /* The last iterate may sit in the scratch buffer; Jacobi does not keep the sum,
     * so normalise.  A closed group of one item has no loss to pull on: it gets all
     * the weight, exactly. */
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += s.x[i];
    int32_t lone = -1;
    for (int32_t i = 0; i < n && !(sum > 0); i++)
        if (!active || active[i])
            lone = i;
    for (int32_t i = 0; i < n; i++)
        score[i] = sum > 0 ? s.x[i] / sum : (i == lone ? 1 : 0);
    if (!(sum > 0)) {
        s.rep.iterations = 0;
        s.rep.step = s.rep.rate = s.rep.error_bound = 0;
        s.rep.converged = 1;
        s.rep.stalled = 0;
    }
    if (rep)
        *rep = s.rep;
    rc = 0;
done:
    if (s.x && s.x != score)
        free(s.x);
    else
        free(s.y);
    free(active);
    free(s.frac);
    free(s.pull);
    free(s.out);
    free(s.bounds);
    free(s.parts);
    pthread_mutex_destroy(&s.gate);
    pthread_cond_destroy(&s.gate_cv);
    return rc;
}
