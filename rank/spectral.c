/* spectral.c: Rank Centrality (Negahban, Oh & Shah), the spectral method.
 *
 * The chain moves from item j to item i with probability f_ij / d_max, where f_ij is
 * the fraction of their games that i won and d_max the largest number of distinct
 * opponents; the rest of each row is a self-loop.  Under BTL its stationary
 * distribution is proportional to the scores.  We find it by iterating over the CSR
 * graph
 *     x'_i = stay_i x_i + pull_i sum_j f_ij x_j,
 * either the chain itself or, when every item has a loss, a faster iteration with the
 * same fixed point (see coefficient_rows).  Each update is a pull over row i's
 * opponents, so rows are independent and split across threads (balanced by entries,
 * not by rows, because degrees vary).  Threads meet at a barrier twice per iteration:
 * once after computing their rows, once after one of them has decided whether to
 * stop.  Rows are computed the same way whatever the split, so the result does not
 * depend on the thread count. */
#include "rank.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void rank_opts_default(rank_opts *o)
{
    o->tol = 1e-10;
    o->max_iter = 100000;
    o->threads = 2;
    o->rounds = 0;
    o->xi = RANK_DEFAULT_XI;
}

typedef struct part {
    double diff, max, sum;
} part;

typedef struct spec {
    const rank_graph *g;
    const rank_opts *o;
    double *frac;        /* f_ij per entry */
    double *stay, *pull; /* per item: weight of its own value and of the pull */
    double *out;         /* per item: sum_j f_ji, its rate of losing */
    double inv_dmax;
    int jacobi; /* every item has a loss: iterate per-row rates */
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
    double history[11]; /* recent steps, to estimate the contraction rate */
} spec;

typedef struct worker {
    spec *s;
    int t;
} worker;

/* First pass: fractions and loss rates. */
static void prepare_rows(spec *s, int32_t lo, int32_t hi)
{
    const rank_graph *g = s->g;
    for (int32_t i = lo; i < hi; i++) {
        double out = 0;
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
            double f = g->games[e] > 0 ? g->wins[e] / g->games[e] : 0;
            s->frac[e] = f;
            out += 1 - f;
        }
        s->out[i] = out;
    }
}

/* Second pass, once the mode is known: the coefficients of the update
 * x'_i = stay_i x_i + pull_i sum_j f_ij x_j.  The chain as specified has
 * stay_i = 1 - out_i / d_max and pull_i = 1 / d_max.  When every item has a loss we
 * use instead damped Jacobi on the balance equations out_i pi_i = sum_j f_ij pi_j:
 * stay_i = 1 - OMEGA, pull_i = OMEGA / out_i.  Its fixed points are exactly the
 * stationary distributions of the specified chain (the balance equations do not
 * depend on the normalisation), but each item moves at its own rate instead of the
 * slowest one's, which cuts the iterations several-fold on graphs with uneven degrees.
 * (Equivalently: power iteration on the chain's jump chain, x_i = y_i / out_i, made
 * lazy by 1 - OMEGA so that periodic graphs such as stars still converge.) */
#define OMEGA 0.9

static void coefficient_rows(spec *s, int32_t lo, int32_t hi)
{
    for (int32_t i = lo; i < hi; i++) {
        if (s->jacobi) {
            s->stay[i] = 1 - OMEGA;
            s->pull[i] = OMEGA / s->out[i];
        } else {
            double st = 1 - s->out[i] * s->inv_dmax;
            s->stay[i] = st > 0 ? st : 0;
            s->pull[i] = s->inv_dmax;
        }
    }
}

static void choose_mode(spec *s)
{
    s->jacobi = s->g->n > 1;
    for (int32_t i = 0; i < s->g->n; i++)
        if (!(s->out[i] > 0))
            s->jacobi = 0;
}

/* Coefficients and the starting point.  With per-row rates the start is the ratio of
 * "win rate" to "loss rate", a one-step estimate of the scores that is usually close
 * to the answer; otherwise uniform. */
static void start_rows(spec *s, int32_t lo, int32_t hi)
{
    coefficient_rows(s, lo, hi);
    const rank_graph *g = s->g;
    for (int32_t i = lo; i < hi; i++) {
        double deg = (double)(g->row[i + 1] - g->row[i]);
        s->x[i] = s->jacobi ? (deg - s->out[i]) / s->out[i] : 1.0 / g->n;
    }
}

static part iterate_rows(spec *s, int32_t lo, int32_t hi)
{
    const rank_graph *g = s->g;
    const double *x = s->x, *frac = s->frac;
    const int32_t *col = g->col;
    double *y = s->y;
    part p = {0, 0, 0};
    for (int32_t i = lo; i < hi; i++) {
        double acc = 0;
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++)
            acc += frac[e] * x[col[e]];
        double v = s->stay[i] * x[i] + s->pull[i] * acc;
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
    rank_report *r = &s->rep;
    r->iterations++;
    r->step = all.max > 0 ? all.diff / all.max : 0;
    memmove(s->history, s->history + 1, 10 * sizeof s->history[0]);
    s->history[10] = r->step;
    if (r->step <= s->o->tol) {
        r->converged = 1;
        s->stop = 1;
    } else if (r->iterations >= s->o->max_iter) {
        s->stop = 1;
    }
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
    if (pthread_barrier_wait(&s->barrier) == PTHREAD_BARRIER_SERIAL_THREAD)
        choose_mode(s);
    pthread_barrier_wait(&s->barrier);
    start_rows(s, lo, hi);
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

int rank_spectral(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep)
{
    spec s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.gate, NULL);
    pthread_cond_init(&s.gate_cv, NULL);
    s.g = g;
    s.o = o;
    int32_t n = g->n;
    memset(&s.rep, 0, sizeof s.rep);
    if (n == 0) {
        if (rep)
            *rep = s.rep;
        pthread_mutex_destroy(&s.gate);
        pthread_cond_destroy(&s.gate_cv);
        return 0;
    }
    int nthreads = o->threads < 1 ? 1 : o->threads;
    if (nthreads > n)
        nthreads = n;
    s.nthreads = nthreads;
    s.inv_dmax = g->max_degree > 0 ? 1.0 / g->max_degree : 0;
    s.frac = malloc(((size_t)g->nnz + 1) * sizeof *s.frac);
    s.stay = malloc((size_t)n * sizeof *s.stay);
    s.pull = malloc((size_t)n * sizeof *s.pull);
    s.out = malloc((size_t)n * sizeof *s.out);
    s.y = malloc((size_t)n * sizeof *s.y);
    s.bounds = malloc(((size_t)nthreads + 1) * sizeof *s.bounds);
    s.parts = calloc((size_t)nthreads, sizeof *s.parts);
    worker *ws = malloc((size_t)nthreads * sizeof *ws);
    pthread_t *tids = malloc((size_t)nthreads * sizeof *tids);
    int rc = -1;
    if (!s.frac || !s.stay || !s.pull || !s.out || !s.y || !s.bounds || !s.parts || !ws || !tids)
        goto done;
    s.x = score;
    split_rows(g, nthreads, s.bounds);

    if (nthreads == 1) {
        prepare_rows(&s, 0, n);
        choose_mode(&s);
        start_rows(&s, 0, n);
        while (!s.stop) {
            s.parts[0] = iterate_rows(&s, 0, n);
            finish_iteration(&s);
        }
    } else {
        if (pthread_barrier_init(&s.barrier, NULL, (unsigned)nthreads))
            goto done;
        s.gate_state = 0;
        int started = 0;
        for (int t = 1; t < nthreads; t++) {
            ws[t] = (worker){&s, t};
            if (pthread_create(&tids[t], NULL, run_worker, &ws[t]))
                break;
            started++;
        }
        /* The barrier counts every thread, so the workers wait at a gate until all of
     * them exist; if one could not start, the others are told to leave. */
        pthread_mutex_lock(&s.gate);
        s.gate_state = started == nthreads - 1 ? 1 : 2;
        pthread_cond_broadcast(&s.gate_cv);
        pthread_mutex_unlock(&s.gate);
        if (started != nthreads - 1) {
            for (int t = 1; t <= started; t++)
                pthread_join(tids[t], NULL);
            pthread_barrier_destroy(&s.barrier);
            goto done;
        }
        ws[0] = (worker){&s, 0};
        run_worker(&ws[0]);
        for (int t = 1; t < nthreads; t++)
            pthread_join(tids[t], NULL);
        pthread_barrier_destroy(&s.barrier);
    }

    /* The last iterate may sit in the scratch buffer; the chain keeps mass 1 up to
   * rounding, which the final normalisation removes. */
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += s.x[i];
    for (int32_t i = 0; i < n; i++)
        score[i] = sum > 0 ? s.x[i] / sum : 1.0 / n;
    {
        rank_report *r = &s.rep;
        double first = s.history[0], last = s.history[10];
        r->rate = 0;
        if (r->iterations > 10 && first > 0 && last > 0)
            r->rate = pow(last / first, 0.1);
        r->error_bound = r->rate < 1 ? r->step * r->rate / (1 - r->rate) : -1;
    }
    if (rep)
        *rep = s.rep;
    rc = 0;
done:
    if (s.x && s.x != score)
        free(s.x);
    else
        free(s.y);
    free(s.frac);
    free(s.stay);
    free(s.pull);
    free(s.out);
    free(s.bounds);
    free(s.parts);
    free(ws);
    free(tids);
    pthread_mutex_destroy(&s.gate);
    pthread_cond_destroy(&s.gate_cv);
    return rc;
}
