/*
 * deeppool.c: the strategy deeppool, DeepPool's own planner as a baseline.
 *
 * DeepPool (github.com/DeepPoolML/DeepPool) plans with searchBestSplitsV3 of
 * its parallelizationPlanner.py (class CostSim). This file makes the same
 * decisions on a plan_problem: the same candidates (per-GPU batch B/2^s on
 * int(B/b) GPUs), the same layer times, communication rules and constants,
 * the same greedy, order-dependent amplification filter inside a DP that
 * follows DeepPool's walk over the layers (searchLinear), and the same
 * handling of branches (searchBranch: each branch searched on its own for
 * every configuration of the layer it starts at, the join taking the slowest
 * branch). The rules are DeepPool's, quirks included; docs/plan.md lists each
 * with the function it comes from. Times are in microseconds here, as there.
 *
 * The resulting GPU counts are then priced by burstc's own cost model
 * (plan_evaluate: lowest ranks, the same yardstick as every other strategy);
 * DeepPool's own estimate of its plan (searchBestSplitsV3's backward pass with
 * its "GPU packing" of side branches) is kept next to it in own_time and
 * own_gpu_seconds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* DeepPool's constants: CostSim's NET_BANDWIDTH as its A100 evaluation sets
 * it (2.66e5 bytes per microsecond: 266 GB/s) and NET_LATENCY (40 us). */
#define DP_BW        2.66e5
#define DP_LATENCY   40.0
/* calcInputXfer multiplies transfers into a ReLU, flatten or batch norm by
 * this, so that the count changes elsewhere. */
#define DP_STEEP     1000.0
/* Layers whose unsplit time is at most this many microseconds are not
 * filtered by amplification. */
#define DP_AMP_FLOOR 300.0
/* The search's "nothing yet" values (searchLinear, searchBranch). */
#define DP_NONE_TIME 99999999999.0
#define DP_NONE_AMP  999999.0
/* Bounds on the work of a search over user structure: DeepPool re-searches
 * every branch for each configuration of the layer it starts at, so nested
 * branches multiply. */
#define DP_MAX_DEPTH 64
#define DP_MAX_STEPS 5e7

/* DeepPool's layer names (CostSim's Conv2d, ReLU, ... and the generic one). */
enum {
    K_GENERIC,
    K_CONV2D,
    K_MAXPOOL,
    K_AVGPOOL,
    K_ADAVGPOOL,
    K_RELU2D,
    K_RELU1D,
    K_RELU,
    K_FLATTEN,
    K_LINEAR,
    K_CONCAT,
    K_BATCHNORM
};

typedef struct dlay {
    int kind;
    int rep;            /* this layer, or for an absent op the layer whose GPUs it takes */
    int nprev, nnext;   /* in DeepPool's graph (absent ops contracted) */
    int *prev;          /* in the op's input order */
    double *pelems;     /* per-sample elements on each incoming edge */
    int *next;          /* ascending */
    double npt;         /* noParallelTime: time of the whole batch on one GPU, with sync */
    double *gpu, *sync; /* per configuration */
    double *cum, *lt;   /* the table t: cumulative time, the layer's own time (NAN: none) */
    int *from;          /* chain: the previous layer's configuration; join: the start's */
    int *plist;         /* joins: [configuration][prev] the configuration of each prev */
    int start;          /* joins: the layer the branches start at */
    int best;           /* chosen configuration, -1 before */
} dlay;

typedef struct dctx {
    const plan_problem *p;
    int n, nc;  /* layers, configurations */
    int64_t *b; /* per configuration: per-GPU batch */
    int *k;     /* and GPUs */
    double limit;
    bool profiled; /* a measured profile is in use */
    dlay *L;
    double steps;
    int depth;
    char *err;
    size_t errlen;
    bool failed;
} dctx;

static int fail(dctx *c, const char *msg, int layer)
{
    if (!c->failed) {
        if (layer >= 0)
            snprintf(c->err, c->errlen,
                     "DeepPool's planner cannot search this graph: %s (layer '%s')", msg,
                     c->p->layers[layer].name);
        else
            snprintf(c->err, c->errlen, "DeepPool's planner cannot search this graph: %s", msg);
    }
    c->failed = true;
    return -1;
}

static bool is2d(int k)
{
    return k == K_CONV2D || k == K_MAXPOOL || k == K_AVGPOOL || k == K_ADAVGPOOL || k == K_RELU2D ||
           k == K_CONCAT;
}

/* ---- DeepPool's layer times (benchGpuTime, calcSyncTime) ---- */

/* benchGpuTime: the profile's average at exactly this per-GPU batch, 1 us
 * when the profile has no such entry. Without a profile, burstc's analytic
 * time stands in for the profile DeepPool would have measured. */
static double bench_us(const dctx *c, const plan_layer *l, int64_t b)
{
    double t = 0;
    if (c->profiled) {
        const plan_timing *m = l->measured;
        for (int i = 0; m && i < m->n; i++)
            if (m->batch[i] == b) {
                /* DeepPool takes the file's milliseconds times 1000. The
				 * reader kept seconds; the decimal it read is recovered
				 * to the digit, so that this time is DeepPool's to the last
				 * bit and ties (its rules make some exact) break as there. */
                char ms[40];
                snprintf(ms, sizeof ms, "%.12g", m->seconds[i] * 1e3);
                t = strtod(ms, NULL) * 1000;
            }
    } else {
        double f, bw;
        plan_layer_time_analytic(&c->p->cluster, c->p->dtype_bytes, l, b, &f, &bw);
        t = (f + bw) * 1e6;
    }
    return t > 0 ? t : 1;
}

/* calcConv2dSyncTime and calcLinearSyncTime. */
static double sync_us(const dctx *c, const dlay *d, const plan_layer *l, int64_t b)
{
    const plan_dp_layer *v = &l->dp;
    if (d->kind == K_CONV2D) {
        /* The "filter count" is the config slot that holds the output width,
		 * and a square kernel counts one side only. */
        double kw = (double)v->kernel[0], kh = v->kernel_pair ? (double)v->kernel[1] : 1;
        double params = kw * kh * (double)v->ow + kw * kh;
        return params * 4 / DP_BW;
    }
    if (d->kind == K_LINEAR) {
        if (b == c->p->batch)
            return 0;
        double in = (double)v->in_features, out = (double)v->out_features;
        return (in * out + out) * 4 / DP_BW;
    }
    return 0;
}

/* ---- DeepPool's activation transfer (calcInputXfer) ---- */

/* Microseconds to move the activation from src (configuration cs) into dst
 * (configuration cd), forward and backward; q is src's position among dst's
 * inputs. shared: the samples both sides keep need not move (DeepPool's
 * noGpuOverlap = false). */
static double xfer_us(const dctx *c, int src, int dst, int q, int cs, int cd, bool shared)
{
    const dlay *S = &c->L[src], *D = &c->L[dst];
    double s = (double)c->b[cs], d = (double)c->b[cd], m = s < d ? s : d;
    double bytes;
    if (is2d(S->kind) && (is2d(D->kind) || D->kind == K_FLATTEN)) {
        /* calc2dActivationTime: "channels" are the source's config slot 4
		 * if it has one (a conv2d: its output width), else slot 3. Which
		 * side keeps its samples is guessed from the per-GPU batches. */
        const plan_dp_layer *sv = &c->p->layers[src].dp, *dv = &c->p->layers[dst].dp;
        double ch = S->kind == K_CONV2D ? (double)sv->ow : (double)sv->c;
        double as = (double)sv->oh * (double)sv->ow * ch, ad = (double)dv->h * (double)dv->w * ch;
        double ac = (double)(sv->oh < dv->h ? sv->oh : dv->h) *
                    (double)(sv->ow < dv->w ? sv->ow : dv->w) * ch;
        double common = shared ? 4 * m * ac : 0;
        double eg = 4 * s * as - (d > s ? 0 : common), in = 4 * d * ad - (d < s ? 0 : common);
        bytes = eg > in ? eg : in;
    } else {
        /* calcLinearActivationTime and calcGeneralActivationTime: the same
		 * sums over per-sample features (no filter split). */
        double a = D->pelems[q], bb = D->nprev ? D->pelems[0] : a;
        double common = shared ? 4 * m * (a < bb ? a : bb) : 0;
        double eg = 4 * s * a - common, in = 4 * d * bb - common;
        bytes = eg > in ? eg : in;
    }
    double t = bytes / DP_BW;
    t += t > 0 ? DP_LATENCY : 0;
    t = 2 * t;
    if (D->kind == K_RELU2D || D->kind == K_RELU1D || D->kind == K_FLATTEN ||
        D->kind == K_BATCHNORM)
        t *= DP_STEEP;
    return t;
}

/* ---- the search (searchLinear, searchBranch) ---- */

static double amplification(const dctx *c, const dlay *P, int cs)
{
    double plt = P->lt[cs];
    return plt > 0 && P->npt > DP_AMP_FLOOR ? plt * c->k[cs] / P->npt : 1;
}

/* A layer whose predecessor's table is fixed at one configuration: the first
 * layer of the model (pre < 0) or of a branch. */
static void table_start(dctx *c, int l, int pre, int pcfg)
{
    dlay *L = &c->L[l];
    for (int i = 0; i < c->nc; i++) {
        double cum = 0, act = 0;
        if (pre >= 0) {
            cum = c->L[pre].cum[pcfg];
            act = xfer_us(c, pre, l, 0, pcfg, i, true);
        }
        double lt = act + L->gpu[i] + L->sync[i];
        L->cum[i] = cum + lt;
        L->lt[i] = lt;
        L->from[i] = pcfg;
    }
}

/* The DP step with the amplification filter: for every configuration, the
 * previous layer's configuration in DeepPool's order (fewest GPUs first)
 * that lowers the cumulative time and whose amplification is under the limit
 * or under that of the last one accepted. */
static void table_chain(dctx *c, int l)
{
    dlay *L = &c->L[l];
    int pl = L->prev[0];
    const dlay *P = &c->L[pl];
    for (int i = 0; i < c->nc; i++) {
        double best = DP_NONE_TIME, bestlt = NAN, bestamp = DP_NONE_AMP;
        int from = -1;
        for (int j = 0; j < c->nc; j++) {
            if (isnan(P->lt[j]))
                continue;
            double act = xfer_us(c, pl, l, 0, j, i, true);
            double amp = amplification(c, P, j);
            double lt = act + L->gpu[i] + L->sync[i];
            if (P->cum[j] + lt < best && (amp < c->limit || amp < bestamp)) {
                best = P->cum[j] + lt;
                bestlt = lt;
                bestamp = amp;
                from = j;
            }
        }
        L->cum[i] = best;
        L->lt[i] = bestlt;
        L->from[i] = from;
    }
    c->steps += (double)c->nc * c->nc;
}

static int search_branch(dctx *c, int start);

/* searchLinear: walks from start along single successors, searching forks as
 * they come, until a join (returned without a table) or the last layer. */
static int search_linear(dctx *c, int pre, int pcfg, int start)
{
    int l = start;
    for (;;) {
        if (c->L[l].nprev > 1)
            return l;
        if (l == start)
            table_start(c, l, pre, pcfg);
        else
            table_chain(c, l);
        if (c->steps > DP_MAX_STEPS)
            return fail(c, "its branches are nested too deeply for its search", l);
        while (c->L[l].nnext > 1) {
            l = search_branch(c, l);
            if (l < 0)
                return -1;
        }
        if (c->L[l].nnext == 0)
            return l;
        l = c->L[l].next[0];
    }
}

/* searchBranch: for every configuration of start (only its chosen one once
 * that is known), each branch is searched on its own; the join's time is the
 * slowest branch's, its own time the sum of the transfers into it. */
static int search_branch(dctx *c, int start)
{
    if (++c->depth > DP_MAX_DEPTH)
        return fail(c, "branches nested more than 64 deep", start);
    dlay *S = &c->L[start];
    int join = -1;
    int nc = c->nc;
    double *bt = plan_xcalloc((size_t)nc, sizeof(double)),
           *blt = plan_xcalloc((size_t)nc, sizeof(double));
    int *bsc = plan_xcalloc((size_t)nc, sizeof(int)), *bpl = NULL;
    bool *have = plan_xcalloc((size_t)nc, sizeof(bool));
    int *pl = NULL;
    for (int sc = 0; sc < nc; sc++) {
        if (S->best >= 0 ? sc != S->best : isnan(S->lt[sc]))
            continue;
        for (int i = 0; i < S->nnext; i++) {
            int e = search_linear(c, start, sc, S->next[i]);
            if (e < 0)
                goto out;
            if (join < 0)
                join = e;
            else if (e != join)
                join = fail(c, "the branches of a fork end at different layers", start);
            if (join < 0)
                goto out;
        }
        dlay *J = &c->L[join];
        /* Each branch is a chain into the join, which takes nothing else. */
        if (J->nprev != S->nnext) {
            join = fail(c, "a fork's branches do not meet at one join of their own", start);
            goto out;
        }
        if (!bpl) {
            bpl = plan_xcalloc((size_t)nc * (size_t)J->nprev, sizeof(int));
            pl = plan_xcalloc((size_t)J->nprev, sizeof(int));
        }
        for (int jc = 0; jc < nc; jc++) {
            double maxbest = 0, sumact = 0;
            for (int q = 0; q < J->nprev; q++) {
                const dlay *P = &c->L[J->prev[q]];
                double best = DP_NONE_TIME, bestact = 0, bestamp = DP_NONE_AMP;
                int from = -1;
                for (int j = 0; j < nc; j++) {
                    if (isnan(P->lt[j]))
                        continue;
                    double act = xfer_us(c, J->prev[q], join, q, j, jc, true);
                    double amp = amplification(c, P, j);
                    double tot = P->cum[j] + act + J->gpu[jc] + J->sync[jc];
                    if (tot < best && (amp < c->limit || amp < bestamp)) {
                        best = tot;
                        bestact = act;
                        bestamp = amp;
                        from = j;
                    }
                }
                maxbest = maxbest > best ? maxbest : best;
                sumact += bestact;
                pl[q] = from;
            }
            c->steps += (double)nc * J->nprev;
            if (!have[jc] || maxbest < bt[jc]) {
                have[jc] = true;
                bt[jc] = maxbest;
                blt[jc] = sumact + J->gpu[jc] + J->sync[jc];
                bsc[jc] = sc;
                memcpy(&bpl[(size_t)jc * J->nprev], pl, sizeof(int) * (size_t)J->nprev);
            }
        }
    }
    if (join < 0) {
        join = fail(c, "no configuration of a fork can be searched", start);
        goto out;
    }
    dlay *J = &c->L[join];
    for (int jc = 0; jc < nc; jc++) {
        J->cum[jc] = have[jc] ? bt[jc] : DP_NONE_TIME;
        J->lt[jc] = have[jc] ? blt[jc] : NAN;
        J->from[jc] = have[jc] ? bsc[jc] : -1;
    }
    free(J->plist);
    J->plist = bpl;
    bpl = NULL;
    J->start = start;
out:
    free(bt);
    free(blt);
    free(bsc);
    free(bpl);
    free(have);
    free(pl);
    c->depth--;
    return join;
}

/* ---- DeepPool's own estimate (searchBestSplitsV3's backward pass) ---- */

typedef struct walk {
    double gpu_us;    /* GPU-microseconds */
    int max_gpus;     /* GPUs the walked part needs (side branches packed) */
    double start_adj; /* the extra transfer into a branch without shared samples */
    double overtime;  /* side branches that had to run after the main one */
} walk;

typedef struct branch_time {
    double t;
    int gpus, id;
    double adj;
} branch_time;

static int branch_cmp(const void *a, const void *b)
{
    const branch_time *x = a, *y = b; /* descending, as Python's sort(reverse=True) */
    if (x->t != y->t)
        return x->t < y->t ? 1 : -1;
    if (x->gpus != y->gpus)
        return x->gpus < y->gpus ? 1 : -1;
    if (x->id != y->id)
        return x->id < y->id ? 1 : -1;
    return x->adj < y->adj ? 1 : x->adj > y->adj ? -1 : 0;
}

static walk backward_linear(dctx *c, int l, int cfg, int stop);

/* backwardBranch: the branches of a join, then DeepPool's "GPU packing": the
 * longest branch sets the block's time; each other branch runs on GPUs of its
 * own (paying the transfers that no longer overlap) unless that costs more
 * than its amplification limit allows, in which case it runs after. */
static walk backward_branch(dctx *c, int join, const int *plist)
{
    dlay *J = &c->L[join];
    int start = J->start;
    double block_start = c->L[start].cum[c->L[start].best];
    walk r = {0, 0, 0, 0};
    branch_time *bl = plan_xcalloc((size_t)J->nprev, sizeof(branch_time));
    int total = 0;
    for (int q = 0; q < J->nprev; q++) {
        int pl = J->prev[q], pc = plist[q];
        walk w = backward_linear(c, pl, pc, start);
        double end_adj = xfer_us(c, pl, join, q, pc, J->best, false) -
                         xfer_us(c, pl, join, q, pc, J->best, true);
        r.gpu_us += w.gpu_us;
        bl[q] = (branch_time){c->L[pl].cum[pc] - block_start + w.overtime, w.max_gpus, pl,
                              w.start_adj + end_adj};
        total += w.max_gpus;
    }
    qsort(bl, (size_t)J->nprev, sizeof *bl, branch_cmp);
    double maxt = bl[0].t;
    double *ready = plan_xcalloc((size_t)total + (size_t)J->nprev + 1, sizeof(double));
    int nready = 0;
    for (int i = 0; i < J->nprev; i++) {
        double t = bl[i].t, adj = bl[i].adj;
        if (i >= 1) {
            double amp = t > 0 ? (adj + t) / t : 1;
            if (c->p->cluster.gpus == 1 || maxt < adj || amp > c->limit) {
                maxt += t;
                r.overtime += t;
            } else {
                t += adj;
                if (t > maxt) {
                    r.overtime += t - maxt;
                    maxt = t;
                    r.gpu_us += adj * bl[i].gpus;
                }
            }
        }
        int assigned = 0, n0 = nready;
        for (int g = 0; g < n0; g++) {
            if (ready[g] + t <= maxt) {
                ready[g] += t;
                assigned++;
            }
            if (assigned >= bl[i].gpus)
                break;
        }
        for (int g = assigned; g < bl[i].gpus; g++)
            ready[nready++] = t;
    }
    int kj = c->k[J->best];
    r.gpu_us += J->lt[J->best] * kj;
    r.max_gpus = nready > kj ? nready : kj;
    free(ready);
    free(bl);
    return r;
}

/* backwardLinear: from layer l at configuration cfg back to stop (exclusive)
 * or the first layer, choosing every layer's configuration. */
static walk backward_linear(dctx *c, int l, int cfg, int stop)
{
    walk r = {0, 0, 0, 0};
    for (;;) {
        dlay *L = &c->L[l];
        L->best = cfg;
        if (l == stop)
            return r;
        r.gpu_us += L->lt[cfg] * c->k[cfg];
        if (c->k[cfg] > r.max_gpus)
            r.max_gpus = c->k[cfg];
        if (L->nprev == 0)
            return r;
        if (L->nprev > 1) {
            int sc = L->from[cfg];
            int *plist = plan_xcalloc((size_t)L->nprev, sizeof(int));
            memcpy(plist, &L->plist[(size_t)cfg * L->nprev], sizeof(int) * (size_t)L->nprev);
            int start = L->start;
            c->L[start].best = sc;
            if (search_branch(c, start) < 0) { /* the branches' tables for this start */
                free(plist);
                return r;
            }
            walk b = backward_branch(c, l, plist);
            free(plist);
            r.gpu_us += b.gpu_us;
            if (b.max_gpus > r.max_gpus)
                r.max_gpus = b.max_gpus;
            r.overtime += b.overtime;
            l = start;
            cfg = sc;
        } else {
            int pc = L->from[cfg];
            if (L->prev[0] == stop)
                r.start_adj = xfer_us(c, stop, l, 0, pc, L->best, false) -
                              xfer_us(c, stop, l, 0, pc, L->best, true);
            l = L->prev[0];
            cfg = pc;
        }
        if (cfg < 0) {
            fail(c, "its search found no configuration within its rules", l);
            return r;
        }
    }
}

/* ---- DeepPool's graph and the driver ---- */

static int dp_kind(plan_dp_kind k)
{
    switch (k) {
    case PDK_CONV2D: return K_CONV2D;
    case PDK_MAXPOOL: return K_MAXPOOL;
    case PDK_AVGPOOL: return K_AVGPOOL;
    case PDK_ADAVGPOOL: return K_ADAVGPOOL;
    case PDK_FLATTEN: return K_FLATTEN;
    case PDK_LINEAR: return K_LINEAR;
    case PDK_CONCAT: return K_CONCAT;
    case PDK_BATCHNORM: return K_BATCHNORM;
    default: return K_GENERIC;
    }
}

/* DeepPool's layer graph: absent ops (dropout, the loss) merged into their
 * first input; ReLUs named after their first input as CostSim.ReLU does. */
static void build_graph(dctx *c)
{
    const plan_problem *p = c->p;
    int n = c->n;
    int *first = plan_xcalloc((size_t)n, sizeof(int));
    for (int l = 0; l < n; l++)
        first[l] = -1;
    for (int e = 0; e < p->nedges; e++)
        if (first[p->edges[e].to] < 0)
            first[p->edges[e].to] = p->edges[e].from;
    for (int l = 0; l < n; l++) {
        dlay *L = &c->L[l];
        L->rep = l;
        if (p->layers[l].dp.kind == PDK_ABSENT && first[l] >= 0)
            L->rep = c->L[first[l]].rep;
    }
    int *cnt_in = plan_xcalloc((size_t)n, sizeof(int)),
        *cnt_out = plan_xcalloc((size_t)n, sizeof(int));
    for (int e = 0; e < p->nedges; e++) {
        int v = p->edges[e].to;
        if (c->L[v].rep != v)
            continue;
        cnt_in[v]++;
        cnt_out[c->L[p->edges[e].from].rep]++;
    }
    for (int l = 0; l < n; l++) {
        c->L[l].prev = plan_xcalloc((size_t)cnt_in[l], sizeof(int));
        c->L[l].pelems = plan_xcalloc((size_t)cnt_in[l], sizeof(double));
        c->L[l].next = plan_xcalloc((size_t)cnt_out[l], sizeof(int));
    }
    for (int e = 0; e < p->nedges; e++) {
        int v = p->edges[e].to, u = c->L[p->edges[e].from].rep;
        if (c->L[v].rep != v)
            continue;
        dlay *V = &c->L[v], *U = &c->L[u];
        bool dup = false;
        for (int q = 0; q < V->nprev; q++)
            dup |= V->prev[q] == u;
        if (dup)
            continue; /* the same value twice (through a dropout): one transfer */
        V->prev[V->nprev] = u;
        V->pelems[V->nprev++] = p->edges[e].elems;
        U->next[U->nnext++] = v;
    }
    /* Successors ascending: the order in which DeepPool's layers were made. */
    for (int l = 0; l < n; l++) {
        dlay *L = &c->L[l];
        for (int i = 1; i < L->nnext; i++)
            for (int j = i; j > 0 && L->next[j] < L->next[j - 1]; j--) {
                int t = L->next[j];
                L->next[j] = L->next[j - 1];
                L->next[j - 1] = t;
            }
    }
    for (int l = 0; l < n; l++) {
        dlay *L = &c->L[l];
        L->kind = dp_kind(p->layers[l].dp.kind);
        if (p->layers[l].dp.kind == PDK_RELU) {
            int k = L->nprev ? c->L[L->prev[0]].kind : K_GENERIC;
            L->kind = k == K_CONV2D || k == K_MAXPOOL || k == K_AVGPOOL || k == K_ADAVGPOOL ||
                              k == K_CONCAT
                          ? K_RELU2D
                      : k == K_LINEAR ? K_RELU1D
                                      : K_RELU;
        }
    }
    free(first);
    free(cnt_in);
    free(cnt_out);
}

static void ctx_free(dctx *c)
{
    for (int l = 0; c->L && l < c->n; l++) {
        dlay *L = &c->L[l];
        free(L->prev);
        free(L->pelems);
        free(L->next);
        free(L->gpu);
        free(L->sync);
        free(L->cum);
        free(L->lt);
        free(L->from);
        free(L->plist);
    }
    free(c->L);
    free(c->b);
    free(c->k);
}

/* The search and DeepPool's estimate: counts per layer, or false. */
static bool search(dctx *c, int *counts, double *own_t, double *own_g)
{
    const plan_problem *p = c->p;
    c->L = plan_xcalloc((size_t)c->n, sizeof(dlay));
    build_graph(c);
    int source = -1, nsources = 0;
    for (int l = 0; l < c->n; l++) {
        dlay *L = &c->L[l];
        L->best = -1;
        L->start = -1;
        L->gpu = plan_xcalloc((size_t)c->nc, sizeof(double));
        L->sync = plan_xcalloc((size_t)c->nc, sizeof(double));
        L->cum = plan_xcalloc((size_t)c->nc, sizeof(double));
        L->lt = plan_xcalloc((size_t)c->nc, sizeof(double));
        L->from = plan_xcalloc((size_t)c->nc, sizeof(int));
        for (int i = 0; i < c->nc; i++) {
            L->gpu[i] = bench_us(c, &p->layers[l], c->b[i]);
            L->sync[i] = sync_us(c, L, &p->layers[l], c->b[i]);
            L->lt[i] = NAN;
        }
        /* noParallelTime: configuration 0 is the whole batch on one GPU. */
        L->npt = L->gpu[0] + L->sync[0];
        if (L->rep == l && L->nprev == 0) {
            nsources++;
            if (source < 0)
                source = l;
        }
    }
    if (nsources != 1)
        return fail(c, "it starts from one first layer, and this graph has several", -1), false;
    int final = search_linear(c, -1, -1, source);
    if (final < 0)
        return false;
    if (c->L[final].nprev > 1 && c->L[final].start < 0)
        return fail(c, "a join that no fork opened", final), false;
    /* The last layer's configuration: the fastest, with no filter. */
    int last = -1;
    double bestt = DP_NONE_TIME;
    for (int i = 0; i < c->nc; i++)
        if (!isnan(c->L[final].lt[i]) && c->L[final].cum[i] < bestt) {
            bestt = c->L[final].cum[i];
            last = i;
        }
    if (last < 0)
        return fail(c, "its search found no configuration within its rules", final), false;
    walk w = backward_linear(c, final, last, -1);
    if (c->failed)
        return false;
    double final_us = 0;
    for (int l = 0; l < c->n; l++) {
        dlay *L = &c->L[l];
        if (L->rep != l)
            continue;
        if (L->best < 0)
            return fail(c, "its walk from the first to the last layer misses a layer", l), false;
        if (L->cum[L->best] > final_us)
            final_us = L->cum[L->best];
    }
    for (int l = 0; l < c->n; l++)
        counts[l] = c->k[c->L[c->L[l].rep].best];
    /* searchBestSplitsV3's result: the last finish plus the side branches
	 * that ran after their main branch; GPU time with each join's own
	 * time counted as its backward pass counts it. */
    *own_t = (final_us + w.overtime) * 1e-6;
    *own_g = w.gpu_us * 1e-6;
    return true;
}

bool plan_deeppool(const plan_problem *p, plan_result *out, char *err, size_t errlen)
{
    dctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.n = p->nlayers;
    c.err = err;
    c.errlen = errlen;
    c.limit = p->amp_limit > 0 ? p->amp_limit : INFINITY;
    for (int l = 0; l < p->nlayers; l++)
        c.profiled |= p->layers[l].measured != NULL;
    /* listConfigOptions: per-GPU batch int(B / 2^s) for s = 0 ..
	 * int(log2 G), on calcGpusNeeded = int(B / b) GPUs; burstc drops the
	 * counts above G that DeepPool allows when B is not a power of two. */
    int G = p->cluster.gpus, S = 0;
    while (S < 62 && (2LL << S) <= G)
        S++;
    c.b = plan_xcalloc((size_t)S + 1, sizeof(int64_t));
    c.k = plan_xcalloc((size_t)S + 1, sizeof(int));
    for (int s = 0; s <= S; s++) {
        int64_t b = p->batch >> s;
        if (b < 1 || p->batch / b > G)
            continue;
        c.b[c.nc] = b;
        c.k[c.nc++] = (int)(p->batch / b);
    }
    int *counts = plan_xcalloc((size_t)c.n + 1, sizeof(int));
    double own_t = 0, own_g = 0;
    bool ok = c.nc > 0;
    if (!ok)
        snprintf(err, errlen, "DeepPool's planner has no configuration for global batch %lld",
                 (long long)p->batch);
    else if (c.n > 0)
        ok = search(&c, counts, &own_t, &own_g);
    ctx_free(&c);
    if (ok && plan_evaluate(p, counts, NULL, out, err, errlen)) {
        out->strategy = PS_DEEPPOOL;
        out->found_by = PS_DEEPPOOL;
        out->own_time = own_t;
        out->own_gpu_seconds = own_g;
    } else {
        ok = false;
    }
    free(counts);
    return ok;
}
