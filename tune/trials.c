/*
 * trials.c: head-to-head trials and their ranking.
 *
 * A trial runs two candidates back to back, in random order, with the same
 * seed; the one with the higher throughput wins: one comparison. Paired runs
 * see nearly the same load, so slow drift of a shared machine cancels in
 * the comparison where it would not in separately averaged timings.
 *
 * Which pairs meet follows the model of the ranking papers (Negahban, Oh &
 * Shah; Chen & Suh): an Erdos-Renyi comparison graph G(n, p), every edge
 * compared L times. The trials go round by round (every edge once per
 * round, in a fresh random order), so drift spreads evenly over the pairs
 * and the run can stop between any two trials. The number of comparisons is
 * the top-1 sample size c n log n / Delta^2: Delta (the gap between the best
 * and second score over the best) starts from the predicted throughputs and
 * is re-estimated from the spectral scores after every round; the trials
 * stop when they reach the bound at the current estimate (the top-1 is
 * separated), at the budget, or when fewer than two candidates still run.
 */
#include "tune.h"

#include "rank.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t tune_mix(uint64_t a, uint64_t b)
{
    uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double tune_metric_value(tune_metric m, const tune_sample *s)
{
    return m == TUNE_METRIC_CLUSTER ? s->fg + s->bg : s->fg;
}

const char *tune_metric_name(tune_metric m)
{
    return m == TUNE_METRIC_CLUSTER ? "cluster samples/s" : "samples/s";
}

void tune_options_default(tune_options *o)
{
    memset(o, 0, sizeof *o);
    o->method = RANK_SPECTRAL;
    o->metric = TUNE_METRIC_FG;
    o->c = 2.5;
    o->delta_min = 0.02;
    o->eps = 0.5;
    o->min_rounds = 2;
    o->seed = 1;
}

double tune_sample_size(double c, int n, double delta)
{
    if (n < 2)
        return 0;
    return c * n * log((double)n) / (delta * delta);
}

static double clamp_delta(double d, double lo)
{
    if (!(d >= lo))
        return lo;
    return d > 1 ? 1 : d;
}

/* The gap of the two largest of v[i] over alive items, over the largest. */
static double top_gap(const double *v, const bool *alive, int n)
{
    double a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!alive[i])
            continue;
        if (v[i] > a) {
            b = a;
            a = v[i];
        } else if (v[i] > b) {
            b = v[i];
        }
    }
    if (!(a > 0) || b == -INFINITY)
        return 0;
    return (a - b) / a;
}

typedef struct pair {
    int a, b;
} pair;

static int find(int *parent, int x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

/* Edges of a connected G(m, p) over the alive items (redrawn until
 * connected; the complete graph after 1000 tries). Returns the count. */
static int draw_graph(const bool *alive, int n, double p, rank_rng *rng, pair *edges, int *parent)
{
    for (int attempt = 0;; attempt++) {
        int ne = 0, comps = 0;
        for (int i = 0; i < n; i++) {
            parent[i] = i;
            comps += alive[i];
        }
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                if (!alive[i] || !alive[j])
                    continue;
                if (attempt < 1000 && p < 1 && rank_rng_uniform(rng) >= p)
                    continue;
                edges[ne++] = (pair){i, j};
                int x = find(parent, i), y = find(parent, j);
                if (x != y) {
                    parent[x] = y;
                    comps--;
                }
            }
        if (comps <= 1)
            return ne;
    }
}

/* Ranks the alive items from the logged comparisons among them, with eps
 * pseudo-wins both ways on every pair of the graph. score[] over all n
 * (0 for the others). 0, or -1 when the ranking failed. */
static int rank_alive(const tune_options *o, int n, const bool *alive, const pair *edges, int ne,
                      const tune_comparison *log, int64_t nlog, double *score)
{
    int *id = plan_xcalloc((size_t)n, sizeof *id);
    int32_t m = 0;
    for (int i = 0; i < n; i++)
        id[i] = alive[i] ? m++ : -1;
    rank_data d;
    rank_data_init(&d);
    d.n = m;
    int rc = -1;
    rank_graph g;
    bool have_g = false;
    double *s = plan_xcalloc((size_t)m, sizeof *s);
    for (int e = 0; e < ne; e++)
        if (rank_data_add(&d, id[edges[e].a], id[edges[e].b], 0, 0))
            goto out;
    for (int64_t k = 0; k < nlog; k++) {
        int a = id[log[k].winner], b = id[log[k].loser];
        if (a >= 0 && b >= 0 && rank_data_add(&d, a, b, 1, 0))
            goto out;
    }
    if (rank_graph_build(&g, &d, o->eps, 1))
        goto out;
    have_g = true;
    rank_opts ro;
    rank_opts_default(&ro);
    ro.threads = 1;
    rank_report rep;
    if (rank_run_method(o->method, &g, &ro, s, &rep) != 0)
        goto out;
    for (int i = 0; i < n; i++)
        score[i] = id[i] >= 0 ? s[id[i]] : 0;
    rc = 0;
out:
    if (have_g)
        rank_graph_free(&g);
    rank_data_free(&d);
    free(s);
    free(id);
    return rc;
}

static double elapsed(const tune_options *o, double t0)
{
    return o->now ? o->now() - t0 : 0;
}

bool tune_run(int n, const double *pred, const tune_runner *r, const tune_options *o,
              tune_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    if (n < 1 || n > 100000 || !r || !r->run) {
        snprintf(err, errlen, "tune_run: bad arguments");
        return false;
    }
    res->n = n;
    res->score = plan_xcalloc((size_t)n, sizeof *res->score);
    res->order = plan_xcalloc((size_t)n, sizeof *res->order);
    res->wins = plan_xcalloc((size_t)n, sizeof *res->wins);
    res->losses = plan_xcalloc((size_t)n, sizeof *res->losses);
    res->metric_sum = plan_xcalloc((size_t)n, sizeof *res->metric_sum);
    res->metric_runs = plan_xcalloc((size_t)n, sizeof *res->metric_runs);
    res->fg_sum = plan_xcalloc((size_t)n, sizeof *res->fg_sum);
    res->bg_sum = plan_xcalloc((size_t)n, sizeof *res->bg_sum);
    res->failure = plan_xcalloc((size_t)n, sizeof *res->failure);
    pair *edges = plan_xcalloc((size_t)n * (size_t)(n - 1) / 2 + 1, sizeof *edges);
    int *parent = plan_xcalloc((size_t)n, sizeof *parent);
    bool *alive = plan_xcalloc((size_t)n, sizeof *alive);
    int64_t logcap = 0;
    bool ok = false;
    for (int i = 0; i < n; i++)
        alive[i] = true;
    double t0 = o->now ? o->now() : 0;
    rank_rng rng;
    rank_rng_seed(&rng, tune_mix(o->seed, 0x7475));
    int nalive = n;
    res->delta0 = clamp_delta(top_gap(pred, alive, n), o->delta_min);
    res->delta = res->delta0;
    res->p = n <= 2 ? 1 : fmin(1, (o->p_scale > 0 ? o->p_scale : 4) * log((double)n) / n);
    res->edges = draw_graph(alive, n, res->p, &rng, edges, parent);
    res->target = tune_sample_size(o->c, n, res->delta);
    res->L = res->edges ? (int64_t)ceil(res->target / res->edges) : 0;
    res->stop = n < 2 ? "one candidate" : NULL;
    int64_t trial = 0;
    while (!res->stop) {
        if (nalive < 2) {
            res->stop = "fewer than two candidates still run";
            break;
        }
        res->rounds++;
        /* Fisher-Yates: a fresh order of the pairs every round. */
        for (int e = res->edges - 1; e > 0; e--) {
            int k = (int)(rank_rng_uniform(&rng) * (e + 1));
            pair t = edges[e];
            edges[e] = edges[k];
            edges[k] = t;
        }
        bool redraw = false;
        int64_t before = res->comparisons;
        for (int e = 0; e < res->edges && !res->stop && !redraw; e++) {
            if (o->max_comparisons > 0 && res->comparisons >= o->max_comparisons) {
                res->stop = "comparison limit";
                break;
            }
            if (o->budget_s > 0 && o->now) {
                double t = elapsed(o, t0);
                double per = trial ? t / (double)trial : 0;
                if (t + per > o->budget_s) {
                    res->stop = "budget";
                    break;
                }
            }
            int a = edges[e].a, b = edges[e].b;
            if (rank_rng_uniform(&rng) < 0.5) {
                int t = a;
                a = b;
                b = t;
            }
            uint64_t seed = tune_mix(o->seed, (uint64_t)trial++);
            int who[2] = {a, b};
            tune_sample smp[2];
            double val[2];
            /* Both run even when the first fails: the other then still shows
             * that it runs (a candidate never run is not ranked). */
            for (int s = 0; s < 2; s++) {
                char why[1024] = "";
                res->runs++;
                if (!r->run(r->ctx, who[s], seed, s, &smp[s], why, sizeof why)) {
                    const char *msg = why[0] ? why : "the run failed";
                    res->failure[who[s]] = plan_xcalloc(strlen(msg) + 1, 1);
                    memcpy(res->failure[who[s]], msg, strlen(msg));
                    alive[who[s]] = false;
                    nalive--;
                    redraw = true;
                    continue;
                }
                val[s] = tune_metric_value(o->metric, &smp[s]);
                res->metric_sum[who[s]] += val[s];
                res->fg_sum[who[s]] += smp[s].fg;
                res->bg_sum[who[s]] += smp[s].bg;
                res->metric_runs[who[s]]++;
            }
            if (redraw)
                break;
            int w = val[0] > val[1] || (val[0] == val[1] && rank_rng_uniform(&rng) < 0.5) ? 0 : 1;
            if (res->nlog == logcap) {
                logcap = logcap ? 2 * logcap : 256;
                res->log = plan_xrealloc(res->log, (size_t)logcap, sizeof *res->log);
            }
            res->log[res->nlog++] = (tune_comparison){.winner = who[w],
                                                      .loser = who[1 - w],
                                                      .first = who[0],
                                                      .winner_metric = val[w],
                                                      .loser_metric = val[1 - w]};
            res->wins[who[w]]++;
            res->losses[who[1 - w]]++;
            res->comparisons++;
            if (o->progress)
                o->progress(o->progress_ctx, res->comparisons, res->target);
        }
        if (redraw) {
            /* A candidate is out: the rest get a fresh graph, the data so far stays. */
            res->rounds--;
            if (nalive >= 2)
                res->edges = draw_graph(alive, n, res->p, &rng, edges, parent);
            continue;
        }
        if (res->stop) {
            if (res->comparisons == before)
                res->rounds--; /* stopped before this round compared anything */
            break;
        }
        if (rank_alive(o, n, alive, edges, res->edges, res->log, res->nlog, res->score))
            goto failed;
        res->delta = clamp_delta(top_gap(res->score, alive, n), o->delta_min);
        res->target = tune_sample_size(o->c, nalive, res->delta);
        res->L = (int64_t)ceil(res->target / res->edges);
        if (res->rounds >= o->min_rounds && (double)res->comparisons >= res->target) {
            res->separated = true;
            res->stop = "separated";
        }
    }
    /* The final ranking: alive candidates by score, then the failed ones. */
    int m = 0;
    int survivor = -1;
    for (int i = 0; i < n && nalive == 1; i++)
        if (alive[i])
            survivor = i;
    if (survivor >= 0 && (n == 1 || res->metric_runs[survivor] > 0)) {
        /* the last one running (it ran: a candidate never tried is not ranked) */
        for (int i = 0; i < n; i++)
            res->score[i] = i == survivor;
        m = 1;
    } else if (nalive >= 2 && res->comparisons > 0) {
        if (rank_alive(o, n, alive, edges, res->edges, res->log, res->nlog, res->score))
            goto failed;
        m = nalive;
    } else {
        for (int i = 0; i < n; i++)
            res->score[i] = 0;
        if (nalive >= 2 && !strcmp(res->stop, "budget"))
            res->stop = "budget too small for one trial";
        else if (nalive == 0)
            res->stop = "every candidate failed";
        else if (nalive == 1)
            res->stop = "every candidate but one failed, and that one did not run";
    }
    res->ranked = m;
    if (rank_order(res->score, n, res->order))
        goto failed;
    if (m > 0) {
        /* Failed candidates after the alive ones (rank_order puts zeros last already,
         * but an alive item never gets exactly 0 with eps > 0; keep the rule explicit). */
        int k = 0;
        int32_t *ord = plan_xcalloc((size_t)n, sizeof *ord);
        for (int i = 0; i < n; i++)
            if (alive[res->order[i]])
                ord[k++] = res->order[i];
        for (int i = 0; i < n; i++)
            if (!alive[res->order[i]])
                ord[k++] = res->order[i];
        memcpy(res->order, ord, sizeof *ord * (size_t)n);
        free(ord);
    }
    res->wall_s = elapsed(o, t0);
    ok = true;
    goto done;
failed:
    snprintf(err, errlen, "the ranking failed (out of memory, or its threads did not start)");
done:
    free(edges);
    free(parent);
    free(alive);
    if (!ok)
        tune_result_free(res);
    return ok;
}

void tune_result_free(tune_result *res)
{
    if (res->failure)
        for (int i = 0; i < res->n; i++)
            free(res->failure[i]);
    free(res->failure);
    free(res->score);
    free(res->order);
    free(res->wins);
    free(res->losses);
    free(res->metric_sum);
    free(res->metric_runs);
    free(res->fg_sum);
    free(res->bg_sum);
    free(res->log);
    memset(res, 0, sizeof *res);
}
