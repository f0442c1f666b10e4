/* simulate.c: Monte Carlo trials of every method on generated BTL data.
 *
 * This is the engine of `burstc rank --simulate` and of the published-experiment
 * scripts.  Trials are independent, so they, not rows, are spread over the threads:
 * each solve runs single-threaded, which for n in the hundreds is far cheaper than
 * synchronising threads every iteration.  Trial t always draws from its own seed, and
 * per-trial results are summed in trial order afterwards, so the output is the same
 * for any number of threads. */
#include "rank.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

const char *const rank_method_names[RANK_NMETHODS] = {"spectral", "spectral-mle", "mle"};

int rank_method_parse(const char *name)
{
    for (int m = 0; m < RANK_NMETHODS; m++)
        if (strcmp(name, rank_method_names[m]) == 0)
            return m;
    return -1;
}

int rank_run_method(int method, const rank_graph *g, const rank_opts *o, double *score,
                    rank_report *rep)
{
    switch (method) {
    case RANK_SPECTRAL: return rank_spectral(g, o, score, rep);
    case RANK_SPECTRAL_MLE: return rank_spectral_mle(g, o, score, rep);
    case RANK_MLE: return rank_mle(g, o, score, rep);
    default: return -1;
    }
}

/* Per trial: success and error of each method, and whether the data were unusable. */
typedef struct trial_out {
    char success[RANK_NMETHODS];
    double err[RANK_NMETHODS];
    char skipped;
    double samples;
} trial_out;

typedef struct sim {
    const rank_sim_params *p;
    uint64_t seed;
    const int *methods;
    rank_opts o; /* with threads = 1 */
    int64_t trials, next;
    trial_out *out;
    pthread_mutex_t lock;
    int failed;
} sim;

static int run_trial(sim *s, int64_t t, trial_out *out)
{
    const rank_sim_params *p = s->p;
    rank_rng r;
    rank_rng_seed(&r, s->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1)));
    double *w = malloc((size_t)p->n * sizeof *w);
    double *est = malloc((size_t)p->n * sizeof *est);
    int32_t *comp = malloc((size_t)p->n * sizeof *comp);
    rank_data d;
    rank_data_init(&d);
    rank_graph g;
    memset(&g, 0, sizeof g);
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (!w || !est || !comp)
        goto done;
    rank_btl_scores(p->n, p->k, p->delta, &r, w);
    if (rank_btl_generate(w, p->n, p->p, p->L, &r, &d))
        goto done;
    if (rank_graph_build(&g, &d, p->eps, 1))
        goto done;
    out->samples = g.comparisons;
    int32_t nc = rank_components(&g, comp, NULL);
    rank_strength st;
    if (nc < 0 || rank_check_strength(&g, 1, &st))
        goto done;
    if (nc != 1 || !st.strongly_connected) {
        out->skipped = 1;
        for (int m = 0; m < RANK_NMETHODS; m++)
            out->err[m] = 1;
        rc = 0;
        goto done;
    }
    rank_opts o = s->o;
    o.strength = &st;
    for (int m = 0; m < RANK_NMETHODS; m++) {
        if (!s->methods[m])
            continue;
        if (rank_run_method(m, &g, &o, est, NULL))
            goto done;
        int ok = rank_topk_success(est, w, p->n, p->k);
        if (ok < 0)
            goto done;
        out->success[m] = (char)ok;
        out->err[m] = rank_linf_error(est, w, p->n);
    }
    rc = 0;
done:
    free(w);
    free(est);
    free(comp);
    rank_data_free(&d);
    rank_graph_free(&g);
    return rc;
}

static void *sim_worker(void *arg)
{
    sim *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int64_t t = s->failed ? s->trials : s->next++;
        pthread_mutex_unlock(&s->lock);
        if (t >= s->trials)
            return NULL;
        if (run_trial(s, t, &s->out[t])) {
            pthread_mutex_lock(&s->lock);
            s->failed = 1;
            pthread_mutex_unlock(&s->lock);
        }
    }
}

int rank_simulate(const rank_sim_params *p, int64_t trials, uint64_t seed, const int *methods,
                  const rank_opts *o, rank_sim_result *res)
{
    memset(res, 0, sizeof *res);
    sim s;
    memset(&s, 0, sizeof s);
    s.p = p;
    s.seed = seed;
    s.methods = methods;
    s.o = *o;
    s.o.threads = 1;
    s.trials = trials;
    s.out = calloc((size_t)trials + 1, sizeof *s.out);
    if (!s.out)
        return -1;
    pthread_mutex_init(&s.lock, NULL);
    int nthreads = o->threads < 1 ? 1 : o->threads;
    if (nthreads > trials)
        nthreads = trials > 0 ? (int)trials : 1;
    pthread_t *tids = malloc((size_t)nthreads * sizeof *tids);
    int started = 0;
    if (tids)
        for (int t = 1; t < nthreads; t++) {
            if (pthread_create(&tids[t], NULL, sim_worker, &s))
                break;
            started++;
        }
    /* Whatever threads could start share the work; this one always takes part. */
    sim_worker(&s);
    for (int t = 1; t <= started; t++)
        pthread_join(tids[t], NULL);
    free(tids);
    pthread_mutex_destroy(&s.lock);
    int rc = s.failed ? -1 : 0;
    res->trials = trials;
    double samples = 0;
    for (int64_t t = 0; t < trials; t++) {
        trial_out *x = &s.out[t];
        res->skipped += x->skipped;
        samples += x->samples;
        for (int m = 0; m < RANK_NMETHODS; m++) {
            res->success[m] += x->success[m];
            res->err_sum[m] += x->err[m];
            res->err_sq[m] += x->err[m] * x->err[m];
        }
    }
    res->samples = trials > 0 ? samples / (double)trials : 0;
    free(s.out);
    return rc;
}

void rank_wilson(int64_t successes, int64_t trials, double *lo, double *hi)
{
    if (trials <= 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    const double z = 1.959963984540054;
    double t = (double)trials, ph = (double)successes / t;
    double den = 1 + z * z / t;
    double center = (ph + z * z / (2 * t)) / den;
    double half = z * sqrt(ph * (1 - ph) / t + z * z / (4 * t * t)) / den;
    *lo = center - half < 0 ? 0 : center - half;
    *hi = center + half > 1 ? 1 : center + half;
}

void rank_mean_ci(double sum, double sumsq, int64_t count, double *mean, double *half)
{
    *mean = count > 0 ? sum / (double)count : 0;
    if (count < 2) {
        *half = -1;
        return;
    }
    double c = (double)count;
    double var = (sumsq - c * *mean * *mean) / (c - 1);
    *half = 1.959963984540054 * sqrt(var > 0 ? var / c : 0);
}
