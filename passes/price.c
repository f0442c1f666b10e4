/*
 * price.c: what one layer and one edge of a plan cost, at the ranks they run
 * on. The planner's DP (planner.c) and the evaluator (evaluate.c) both price
 * through these functions, so the time the DP optimises and the time a plan
 * reports are the same numbers.
 *
 * A layer on k ranks from rank o costs its forward and backward at the
 * largest shard ceil(B/k) plus its gradient all-reduce among those ranks
 * (across nodes when o .. o+k-1 spans a node boundary). An edge u -> v costs
 * the resharding of the activations forward and of their gradient backward
 * between the two rank sets (both directions move the same samples, so one
 * count serves both). With p->ar_overlap, an all-reduce hides behind the
 * backward of earlier layers instead (docs/plan.md, "Overlap"). Reshard
 * counts are remembered: by count pair when both sets start at rank 0 (every
 * plan without concurrent branches), else in a hash keyed by the counts, the
 * first set's offset within its node and the distance between the sets (a
 * shift by whole nodes changes nothing).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void plan_pricer_init(plan_pricer *pr, const plan_problem *p, const int *counts, int ncounts)
{
    memset(pr, 0, sizeof *pr);
    pr->p = p;
    pr->G = p->cluster.gpus;
    pr->gpn = p->cluster.gpus_per_node > 0 ? p->cluster.gpus_per_node : 1;
    pr->kmax = (int64_t)pr->G < p->batch ? pr->G : (int)p->batch;
    int n = p->nlayers;
    pr->nin = plan_xcalloc((size_t)n + 2, sizeof(int));
    for (int e = 0; e < p->nedges; e++)
        pr->nin[p->edges[e].to]++;
    if (p->ar_overlap) {
        /* The backward of every layer before l runs after l's: l's gradient
		 * all-reduce hides behind at least their backward at one sample per
		 * GPU (a bound that does not depend on G, so more GPUs never make a
		 * plan look worse). */
        pr->bwd1 = plan_xcalloc((size_t)n + 2, sizeof(double));
        pr->hide = plan_xcalloc((size_t)n + 2, sizeof(double));
        for (int l = 0; l < n; l++) {
            double f, b;
            plan_layer_time(p, &p->layers[l], 1, &f, &b);
            pr->bwd1[l] = b;
            pr->hide[l + 1] = pr->hide[l] + b;
        }
    }
    pr->kidx = plan_xcalloc((size_t)pr->kmax + 1, sizeof(int));
    for (int k = 0; k <= pr->kmax; k++)
        pr->kidx[k] = -1;
    for (int i = 0; i < ncounts; i++)
        if (counts[i] >= 1 && counts[i] <= pr->kmax)
            pr->kidx[counts[i]] = 0;
    for (int k = 1; k <= pr->kmax; k++)
        if (pr->kidx[k] == 0)
            pr->kidx[k] = pr->nk++;
    pr->rs0 = plan_xcalloc((size_t)pr->nk * pr->nk, sizeof(plan_reshard));
    pr->rs0_done = plan_xcalloc((size_t)pr->nk * pr->nk, 1);
}

void plan_pricer_free(plan_pricer *pr)
{
    free(pr->nin);
    free(pr->bwd1);
    free(pr->hide);
    free(pr->kidx);
    free(pr->rs0);
    free(pr->rs0_done);
    free(pr->hkey);
    free(pr->hval);
    free(pr->small);
    free(pr->small_done);
    memset(pr, 0, sizeof *pr);
}

static uint64_t key_hash(const plan_reshard_key *k)
{
    uint64_t h = (uint64_t)(uint32_t)k->k1 * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uint32_t)k->k2 * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)(uint32_t)k->r1 * 0x165667B19E3779F9ull;
    h ^= (uint64_t)(uint32_t)k->d * 0x27D4EB2F165667C5ull;
    return h ^ (h >> 29);
}

/* Counts at offsets, by (k1, k2, r1 within its node, r2 - start of r1's
 * node): a shift by whole nodes changes nothing. */
static const plan_reshard *reshard_hashed(plan_pricer *pr, int k1, int r1, int k2, int r2)
{
    int base = r1 - r1 % pr->gpn;
    plan_reshard_key key = {k1, k2, r1 - base, r2 - base};
    if (2 * (pr->hn + 1) > pr->hcap) {
        size_t cap = pr->hcap ? 2 * pr->hcap : 1024;
        plan_reshard_key *nk = plan_xcalloc(cap, sizeof *nk);
        plan_reshard *nv = plan_xcalloc(cap, sizeof *nv);
        for (size_t i = 0; i < pr->hcap; i++)
            if (pr->hkey[i].k1) {
                size_t j = (size_t)key_hash(&pr->hkey[i]) & (cap - 1);
                while (nk[j].k1)
                    j = (j + 1) & (cap - 1);
                nk[j] = pr->hkey[i];
                nv[j] = pr->hval[i];
            }
        free(pr->hkey);
        free(pr->hval);
        pr->hkey = nk;
        pr->hval = nv;
        pr->hcap = cap;
    }
    size_t j = (size_t)key_hash(&key) & (pr->hcap - 1);
    while (pr->hkey[j].k1 && memcmp(&pr->hkey[j], &key, sizeof key) != 0)
        j = (j + 1) & (pr->hcap - 1);
    if (!pr->hkey[j].k1) {
        pr->hkey[j] = key;
        pr->hval[j] = plan_reshard_count(pr->p->batch, pr->gpn, r1, k1, r2, k2);
        pr->hn++;
    }
    return &pr->hval[j];
}

enum { SMALL = 9 }; /* ranks and counts below this: a dense memo */

const plan_reshard *plan_price_reshard(plan_pricer *pr, int k1, int r1, int k2, int r2)
{
    if (k1 < SMALL && k2 < SMALL && r1 < SMALL && r2 < SMALL && r1 >= 0 && r2 >= 0) {
        if (!pr->small) {
            pr->small = plan_xcalloc((size_t)SMALL * SMALL * SMALL * SMALL, sizeof(plan_reshard));
            pr->small_done = plan_xcalloc((size_t)SMALL * SMALL * SMALL * SMALL, 1);
        }
        size_t i = (((size_t)k1 * SMALL + (size_t)r1) * SMALL + (size_t)k2) * SMALL + (size_t)r2;
        if (!pr->small_done[i]) {
            pr->small[i] = plan_reshard_count(pr->p->batch, pr->gpn, r1, k1, r2, k2);
            pr->small_done[i] = 1;
        }
        return &pr->small[i];
    }
    if (r1 == 0 && r2 == 0 && k1 <= pr->kmax && k2 <= pr->kmax && pr->kidx[k1] >= 0 &&
        pr->kidx[k2] >= 0) {
        int a = k1 < k2 ? k1 : k2, b = k1 < k2 ? k2 : k1; /* symmetric at rank 0 */
        size_t i = (size_t)pr->kidx[a] * pr->nk + pr->kidx[b];
        if (!pr->rs0_done[i]) {
            pr->rs0[i] = plan_reshard_count(pr->p->batch, pr->gpn, 0, a, 0, b);
            pr->rs0_done[i] = 1;
        }
        return &pr->rs0[i];
    }
    return reshard_hashed(pr, k1, r1, k2, r2);
}

double plan_price_allreduce(const plan_pricer *pr, int l, int k, int o)
{
    return plan_allreduce_time(&pr->p->cluster, o, k, pr->p->layers[l].params * pr->p->dtype_bytes);
}

void plan_layer_sync_time(const plan_cluster *c, const plan_layer *l, int o, int k, double *fwd,
                          double *bwd)
{
    *fwd = *bwd = 0;
    if (k <= 1 || !(l->sync_stats > 0))
        return;
    if (c->sync_gather)
        *fwd = plan_allreduce_time(c, o, k, 8.0 * k * l->sync_stats);
    else /* sync_stats = 2C + 1: C + 1 sums (and the count), then C */
        *fwd = plan_allreduce_time(c, o, k, 8.0 * (l->sync_stats + 1) / 2) +
               plan_allreduce_time(c, o, k, 8.0 * (l->sync_stats - 1) / 2);
    *bwd = plan_allreduce_time(c, o, k, 8.0 * l->sync_stats);
}

void plan_price_node(const plan_pricer *pr, int l, int k, int o, double fwd, double bwd,
                     double *time, double *gpu, double *exposed)
{
    double ar = plan_price_allreduce(pr, l, k, o), ex = ar, sf, sb;
    if (pr->p->ar_overlap)
        ex = pr->nin[l] != 1 ? fmax(0, ar - pr->hide[l]) : 0; /* one input: on its edge */
    plan_layer_sync_time(&pr->p->cluster, &pr->p->layers[l], o, k, &sf, &sb);
    *time = (fwd + bwd) * plan_core_share(&pr->p->cluster, o, k) + sf + sb + ex;
    *gpu = *time * k;
    if (exposed)
        *exposed = ex;
}

void plan_price_edge(plan_pricer *pr, int e, int ku, int ou, double bwd_u, int kv, int ov,
                     double *time, double *gpu, double *reshard, double *exposed)
{
    const plan_problem *p = pr->p;
    const plan_edge *pe = &p->edges[e];
    double r = 0, ex = 0;
    if (ku != kv || ou != ov) {
        const plan_reshard *rs = plan_price_reshard(pr, ku, ou, kv, ov);
        r = 2 * plan_reshard_time(&p->cluster, rs, pe->elems * p->dtype_bytes);
    }
    if (p->ar_overlap && pr->nin[pe->to] == 1)
        ex = fmax(0, plan_price_allreduce(pr, pe->to, kv, ov) -
                         bwd_u * plan_core_share(&p->cluster, ou, ku) - pr->hide[pe->to] +
                         pr->bwd1[pe->from]);
    *time = r + ex;
    *gpu = r * (ku > kv ? ku : kv) + ex * kv;
    if (reshard)
        *reshard = r;
    if (exposed)
        *exposed = ex;
}

void plan_price_edge_table(plan_pricer *pr, int e, int nu, const int *ku, const int *fu,
                           const double *bwd_u, int nv, const int *kv, const int *fv, double alpha,
                           double beta, double *S, double *T)
{
    const plan_problem *p = pr->p;
    const plan_edge *pe = &p->edges[e];
    const plan_cluster *cl = &p->cluster;
    double bps = pe->elems * p->dtype_bytes;
    bool ex_on = p->ar_overlap && pr->nin[pe->to] == 1;
    double hide = ex_on ? pr->hide[pe->to] - pr->bwd1[pe->from] : 0;
    for (int i = 0; i < nu; i++) {
        for (int j = 0; j < nv; j++) {
            double r = 0, ex = 0;
            if (ku[i] != kv[j] || fu[i] != fv[j]) {
                const plan_reshard *rs = plan_price_reshard(pr, ku[i], fu[i], kv[j], fv[j]);
                r = 2 * plan_reshard_time(cl, rs, bps);
            }
            if (ex_on)
                ex = fmax(0, plan_price_allreduce(pr, pe->to, kv[j], fv[j]) -
                                 bwd_u[i] * plan_core_share(cl, fu[i], ku[i]) - hide);
            double t = r + ex, g = r * (ku[i] > kv[j] ? ku[i] : kv[j]) + ex * kv[j];
            S[i * nv + j] = alpha * t + beta * g;
            if (T != S)
                T[i * nv + j] = t;
        }
    }
}
