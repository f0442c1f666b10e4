/* test_trials.c: the tuner's trials against synthetic runners with known truth.
 *
 * 1. A BTL comparison model with a known top-1 gap Delta: run i's metric is
 *    w_i x exp(Gumbel), so i beats j with probability w_i / (w_i + w_j)
 *    exactly. Over 200 seeded repetitions the tuner must find the best with
 *    probability >= 0.95, and the comparisons it makes must be of the order
 *    of the bound n log n / Delta^2 at the true Delta.
 * 2. A timing model of a shared machine: true throughputs, multiplicative
 *    noise and a slow drift of the machine's speed over the run index. The
 *    tuner must find the best with probability >= 0.95; the naive method
 *    (time each candidate r times, take the means) at the same number of
 *    runs is measured beside it, in blocks (r runs of one candidate after
 *    the other) and round robin, and printed (docs/tune.md reports them).
 * 3. Failures and limits: a candidate whose runs fail is ranked last with
 *    its message; every candidate failing ranks nothing; the comparison limit
 *    and the graph's pair count are as reported.
 * Every number is computed from fixed seeds; nothing depends on timing. */
#include "../rank/check.h"
#include "rank.h"
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REPS 200
#define PI   3.14159265358979323846

static double normal(rank_rng *r)
{
    double u = rank_rng_uniform(r), v = rank_rng_uniform(r);
    return sqrt(-2 * log(1 - u)) * cos(2 * PI * v);
}

/* ---- 1. the BTL model ---- */

typedef struct btl_model {
    int n;
    double w[16];
    rank_rng rng;
} btl_model;

static bool btl_run(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                    size_t errlen)
{
    (void)seed, (void)slot, (void)err, (void)errlen;
    btl_model *m = ctx;
    double u = rank_rng_uniform(&m->rng);
    double gumbel = -log(-log(u > 0 ? u : 1e-300));
    out->fg = m->w[cand] * exp(gumbel);
    out->bg = 0;
    return true;
}

static int argmax(const double *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

static void test_btl(int n, double delta, double *success, double *mean_cmp, double *bound)
{
    int ok = 0;
    double cmps = 0;
    for (int rep = 0; rep < REPS; rep++) {
        btl_model m = {.n = n};
        rank_rng_seed(&m.rng, 1000 + (uint64_t)rep);
        rank_btl_scores(n, 1, delta, &m.rng, m.w);
        tune_options o;
        tune_options_default(&o);
        o.seed = 77 + (uint64_t)rep;
        tune_runner r = {.ctx = &m, .run = btl_run};
        tune_result res;
        char err[256];
        CHECK(tune_run(n, m.w, &r, &o, &res, err, sizeof err));
        CHECK(res.separated);
        ok += res.ranked == n && res.order[0] == argmax(m.w, n);
        cmps += (double)res.comparisons;
        CHECK(res.comparisons == res.nlog);
        CHECK(res.runs == 2 * res.comparisons);
        tune_result_free(&res);
    }
    *success = (double)ok / REPS;
    *mean_cmp = cmps / REPS;
    *bound = tune_sample_size(1, n, delta);
}

/* ---- 2. timings on a drifting machine ---- */

typedef struct timing_model {
    int n;
    double thr[16];
    double sigma, drift, period, phase;
    int64_t t; /* runs so far: the machine's clock */
    rank_rng rng;
} timing_model;

static double timing_sample(timing_model *m, int cand)
{
    double d = 1 + m->drift * sin(2 * PI * (double)m->t / m->period + m->phase);
    m->t++;
    return m->thr[cand] * d * exp(m->sigma * normal(&m->rng) - m->sigma * m->sigma / 2);
}

static bool timing_run(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                       size_t errlen)
{
    (void)seed, (void)slot, (void)err, (void)errlen;
    out->fg = timing_sample(ctx, cand);
    out->bg = 0;
    return true;
}

static double drift_period = 60;

static void timing_init(timing_model *m, int rep)
{
    static const double thr[8] = {100, 97, 95, 92, 90, 88, 85, 80};
    memset(m, 0, sizeof *m);
    m->n = 8;
    rank_rng_seed(&m->rng, 5000 + (uint64_t)rep);
    /* ids shuffled so the best is not always item 0 */
    int perm[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 7; i > 0; i--) {
        int k = (int)(rank_rng_uniform(&m->rng) * (i + 1));
        int t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
    for (int i = 0; i < 8; i++)
        m->thr[perm[i]] = thr[i];
    m->sigma = 0.03;
    m->drift = 0.15;
    m->period = drift_period;
    m->phase = 2 * PI * rank_rng_uniform(&m->rng);
}

static void test_timing(double *tuner, double *blocked, double *robin, double *mean_runs)
{
    int ok = 0, ok_blocked = 0, ok_robin = 0;
    double runs = 0;
    for (int rep = 0; rep < REPS; rep++) {
        timing_model m;
        timing_init(&m, rep);
        int n = m.n, best = argmax(m.thr, n);
        /* the cost model's prediction: right on average, 5% off each */
        double pred[8];
        for (int i = 0; i < n; i++)
            pred[i] = m.thr[i] * exp(0.05 * normal(&m.rng));
        tune_options o;
        tune_options_default(&o);
        o.seed = 99 + (uint64_t)rep;
        tune_runner r = {.ctx = &m, .run = timing_run};
        tune_result res;
        char err[256];
        CHECK(tune_run(n, pred, &r, &o, &res, err, sizeof err));
        ok += res.ranked == n && res.order[0] == best;
        runs += (double)res.runs;
        int64_t per = res.runs / n > 0 ? res.runs / n : 1;
        tune_result_free(&res);

        /* the naive way, same number of runs, same kind of machine */
        double mean[8] = {0};
        timing_init(&m, rep);
        for (int i = 0; i < n; i++)
            for (int64_t k = 0; k < per; k++)
                mean[i] += timing_sample(&m, i);
        ok_blocked += argmax(mean, n) == best;
        memset(mean, 0, sizeof mean);
        timing_init(&m, rep);
        for (int64_t k = 0; k < per; k++)
            for (int i = 0; i < n; i++)
                mean[i] += timing_sample(&m, i);
        ok_robin += argmax(mean, n) == best;
    }
    *tuner = (double)ok / REPS;
    *blocked = (double)ok_blocked / REPS;
    *robin = (double)ok_robin / REPS;
    *mean_runs = runs / REPS;
}

/* ---- 3. failures and limits ---- */

typedef struct failing {
    timing_model m;
    int bad; /* this candidate's runs fail; -1: all fail */
} failing;

static bool failing_run(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                        size_t errlen)
{
    failing *f = ctx;
    if (f->bad < 0 || cand == f->bad) {
        snprintf(err, errlen, "run: exit status 137: killed");
        return false;
    }
    return timing_run(&f->m, cand, seed, slot, out, err, errlen);
}

/* A clock that advances 1 s each time it is read. */
static double fake_now;
static double fake_clock(void)
{
    fake_now += 1;
    return fake_now;
}

static void test_failures(void)
{
    char err[256];
    tune_result res;
    tune_options o;
    tune_options_default(&o);
    failing f;
    timing_init(&f.m, 1);
    int best = argmax(f.m.thr, 8);
    f.bad = best;
    tune_runner r = {.ctx = &f, .run = failing_run};
    CHECK(tune_run(8, f.m.thr, &r, &o, &res, err, sizeof err));
    CHECK(res.ranked == 7);
    CHECK(res.order[7] == best);
    CHECK(res.failure[best] && strstr(res.failure[best], "exit status 137"));
    CHECK(res.score[best] == 0);
    CHECK(res.separated);
    /* the best of the others wins */
    double thr[8];
    memcpy(thr, f.m.thr, sizeof thr);
    thr[best] = 0;
    CHECK(res.order[0] == argmax(thr, 8));
    tune_result_free(&res);

    f.bad = -1;
    CHECK(tune_run(8, f.m.thr, &r, &o, &res, err, sizeof err));
    CHECK(res.ranked == 0);
    CHECK(res.comparisons == 0);
    CHECK(res.stop && !strcmp(res.stop, "every candidate failed"));
    CHECK(res.runs >= 8); /* every candidate was tried */
    for (int i = 0; i < 8; i++)
        CHECK(res.failure[i] != NULL);
    tune_result_free(&res);

    /* a budget that the first trial does not fit in: nothing ranked, and why */
    f.bad = 99;
    o.now = fake_clock;
    o.budget_s = 0.5;
    CHECK(tune_run(8, f.m.thr, &r, &o, &res, err, sizeof err));
    CHECK(res.ranked == 0 && res.comparisons == 0 && res.runs == 0);
    CHECK(res.stop && !strcmp(res.stop, "budget too small for one trial"));
    tune_result_free(&res);
    /* a budget of a few trials: the next trial must fit, at the mean time so far */
    fake_now = 0;
    o.budget_s = 10.5;
    CHECK(tune_run(8, f.m.thr, &r, &o, &res, err, sizeof err));
    /* the clock is read at the start and before every trial: before trial k + 1
     * (k done) k + 1 s have passed, at a mean of (k + 1) / k s per trial; the
     * tenth would end at 10 + 10/9 > 10.5 s, so nine are made */
    CHECK(res.comparisons == 9);
    CHECK(res.ranked == 8 && !res.separated && !strcmp(res.stop, "budget"));
    tune_result_free(&res);
    o.now = NULL;
    o.budget_s = 0;

    /* a comparison limit: exactly that many, not separated */
    timing_init(&f.m, 2);
    f.bad = 99;
    o.max_comparisons = 5;
    CHECK(tune_run(8, f.m.thr, &r, &o, &res, err, sizeof err));
    CHECK(res.comparisons == 5);
    CHECK(res.runs == 10);
    CHECK(!res.separated);
    CHECK(res.ranked == 8);
    CHECK(res.stop && !strcmp(res.stop, "comparison limit"));
    int64_t w = 0, l = 0;
    for (int i = 0; i < 8; i++)
        w += res.wins[i], l += res.losses[i];
    CHECK(w == 5 && l == 5);
    tune_result_free(&res);

    /* two candidates: p = 1 and one pair */
    o.max_comparisons = 0;
    double two[2] = {10, 9};
    timing_init(&f.m, 3);
    f.m.thr[0] = 10, f.m.thr[1] = 9;
    CHECK(tune_run(2, two, &r, &o, &res, err, sizeof err));
    CHECK(res.p == 1 && res.edges == 1);
    CHECK(res.order[0] == 0);
    tune_result_free(&res);

    /* one candidate: ranked, nothing compared */
    CHECK(tune_run(1, two, &r, &o, &res, err, sizeof err));
    CHECK(res.ranked == 1 && res.comparisons == 0 && res.order[0] == 0);
    tune_result_free(&res);

    CHECK_NEAR(tune_sample_size(1, 8, 0.5), 8 * log(8.0) / 0.25, 1e-12);
}

int main(void)
{
    static const double deltas[] = {0.2, 0.4};
    for (int k = 0; k < 2; k++) {
        double succ, cmp, bound;
        test_btl(8, deltas[k], &succ, &cmp, &bound);
        printf("BTL n=8 Delta=%.2f: top-1 success %.3f over %d seeds, mean comparisons %.1f, "
               "bound n log n / Delta^2 = %.1f (ratio %.2f)\n",
               deltas[k], succ, REPS, cmp, bound, cmp / bound);
        CHECK(succ >= 0.95);
        /* the sample size follows the bound c n log n / Delta^2 at the true Delta
         * (the estimate of Delta is shrunk by the pseudo-wins: a little above it) */
        tune_options o;
        tune_options_default(&o);
        CHECK(cmp >= 0.5 * o.c * bound && cmp <= 2.5 * o.c * bound);
    }
    static const double periods[] = {60, 12};
    for (int k = 0; k < 2; k++) {
        double tuner, blocked, robin, runs;
        drift_period = periods[k];
        test_timing(&tuner, &blocked, &robin, &runs);
        printf("drifting machine, 8 candidates (best 3%% ahead), noise 3%%, drift +-15%% with a "
               "period of %g runs:\n  tuner %.3f, naive blocked %.3f, naive round robin %.3f "
               "(top-1 success over %d seeds; %.1f runs each on average)\n",
               periods[k], tuner, blocked, robin, REPS, runs);
        CHECK(tuner >= 0.95);
    }
    drift_period = 60;
    test_failures();
    return check_done("tune/test_trials");
}
