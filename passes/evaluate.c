/*
 * evaluate.c: the time and GPU-seconds of a given plan -- every layer's GPU
 * count and first rank -- with the planner's cost model (price.c).
 *
 * This is the definition of a plan's time that everything else is measured
 * against: plan_solve reports it for the plan its DP returns, and the
 * brute-force test enumerates counts and ranks and calls it. The rules:
 *   - layers and edges cost what price.c says at their ranks;
 *   - along a chain (a series composition) times add up;
 *   - the branches of a block (several paths between the same two layers)
 *     run in the best series-parallel schedule their ranks allow: two groups
 *     of branches may run concurrently (time: the longer) when no rank is in
 *     both, else one after the other (time: the sum). With more than six
 *     branches with layers, a block runs them one after the other;
 *   - a graph that is not series-parallel runs everything in sequence;
 *   - GPU-seconds are the sum over layers and edges in every case.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

enum { MAXB = PLAN_MAX_CONCURRENT };

/* A block whose branches may run concurrently: its branches and, per
 * branch, the layers inside it (for the rank sets). */
typedef struct eblock {
    int t, nb;
    int branch[MAXB];
    int lstart[MAXB + 1]; /* into ev->blayers */
} eblock;

struct plan_evaluator {
    const plan_problem *p;
    plan_pricer pr;
    plan_sp sp;
    bool is_sp;
    int n, kmax, G;
    double *t1;      /* one-GPU time per layer */
    double *cf, *cb; /* cached compute [l * (kmax + 1) + k], or NULL */
    double *nt, *ng; /* per layer: time, GPU-seconds */
    double *fw, *bw; /* per layer: compute at the plan's count */
    double *et, *eg; /* per edge */
    double *vt, *vg; /* per tree node */
    int *block_of;   /* tree node -> index into blocks, or -1 */
    eblock *blocks;
    int nblocks;
    int *blayers, nbl;
    int nconc; /* blocks whose best schedule runs branches concurrently */
    int runs;
    int *ivs, nivs;
};

static void compute_time(plan_evaluator *ev, int l, int k, double *f, double *b)
{
    if (ev->cf) {
        size_t i = (size_t)l * (ev->kmax + 1) + k;
        if (ev->cf[i] < 0)
            plan_layer_time(ev->p, &ev->p->layers[l], plan_shard(ev->p->batch, k), &ev->cf[i],
                            &ev->cb[i]);
        *f = ev->cf[i];
        *b = ev->cb[i];
        return;
    }
    plan_layer_time(ev->p, &ev->p->layers[l], plan_shard(ev->p->batch, k), f, b);
}

plan_evaluator *plan_evaluator_new(const plan_problem *p)
{
    plan_evaluator *ev = plan_xcalloc(1, sizeof *ev);
    ev->p = p;
    ev->n = p->nlayers;
    ev->G = p->cluster.gpus;
    ev->kmax = (int64_t)ev->G < p->batch ? ev->G : (int)p->batch;
    plan_pricer_init(&ev->pr, p, NULL, 0);
    ev->t1 = plan_xcalloc((size_t)ev->n + 1, sizeof(double));
    for (int l = 0; l < ev->n; l++) {
        double f, b;
        plan_layer_time(p, &p->layers[l], p->batch, &f, &b);
        ev->t1[l] = f + b;
    }
    ev->nt = plan_xcalloc((size_t)ev->n + 2, sizeof(double));
    ev->ng = plan_xcalloc((size_t)ev->n + 2, sizeof(double));
    ev->fw = plan_xcalloc((size_t)ev->n + 2, sizeof(double));
    ev->bw = plan_xcalloc((size_t)ev->n + 2, sizeof(double));
    ev->et = plan_xcalloc((size_t)p->nedges + 1, sizeof(double));
    ev->eg = plan_xcalloc((size_t)p->nedges + 1, sizeof(double));
    ev->is_sp = plan_sp_build(p, &ev->sp);
    if (!ev->is_sp)
        return ev;
    const plan_sp *sp = &ev->sp;
    ev->vt = plan_xcalloc((size_t)sp->ntn, sizeof(double));
    ev->vg = plan_xcalloc((size_t)sp->ntn, sizeof(double));
    ev->block_of = plan_xcalloc((size_t)sp->ntn, sizeof(int));
    /* Blocks with 2..MAXB branches that have layers, and the layers of each
	 * branch (walked with a stack: no recursion over the graph). */
    int nblk = 0;
    for (int t = 0; t < sp->ntn; t++) {
        ev->block_of[t] = -1;
        if (sp->tn[t].kind != PLAN_TN_PARALLEL || sp->absorbed[t])
            continue;
        int m = 0;
        for (int x = sp->kid_head[t]; x >= 0; x = sp->kid_next[x])
            m += sp->tn[x].interior;
        if (m >= 2 && m <= MAXB)
            ev->block_of[t] = nblk++;
    }
    ev->blocks = plan_xcalloc((size_t)nblk, sizeof(eblock));
    int cap = 64, *stack = plan_xcalloc((size_t)sp->ntn + 1, sizeof(int));
    ev->blayers = plan_xcalloc((size_t)cap, sizeof(int));
    for (int t = 0; t < sp->ntn; t++) {
        if (ev->block_of[t] < 0)
            continue;
        eblock *B = &ev->blocks[ev->nblocks++];
        B->t = t;
        for (int x = sp->kid_head[t]; x >= 0; x = sp->kid_next[x]) {
            if (!sp->tn[x].interior)
                continue;
            B->lstart[B->nb] = ev->nbl;
            B->branch[B->nb++] = x;
            int ns = 0;
            stack[ns++] = x;
            while (ns > 0) {
                int y = stack[--ns];
                const plan_tnode *T = &sp->tn[y];
                if (T->kind == PLAN_TN_LEAF)
                    continue;
                if (T->kind == PLAN_TN_SERIES) {
                    if (ev->nbl == cap) {
                        cap *= 2;
                        ev->blayers = plan_xrealloc(ev->blayers, (size_t)cap, sizeof(int));
                    }
                    ev->blayers[ev->nbl++] = T->mid;
                    stack[ns++] = T->a;
                    stack[ns++] = T->b;
                } else {
                    for (int z = sp->kid_head[y]; z >= 0; z = sp->kid_next[z])
                        stack[ns++] = z;
                }
            }
        }
        B->lstart[B->nb] = ev->nbl;
    }
    free(stack);
    ev->ivs = plan_xcalloc(2 * (size_t)ev->nbl + 2, sizeof(int));
    return ev;
}

void plan_evaluator_free(plan_evaluator *ev)
{
    if (!ev)
        return;
    plan_pricer_free(&ev->pr);
    plan_sp_free(&ev->sp);
    free(ev->t1);
    free(ev->cf);
    free(ev->cb);
    free(ev->nt);
    free(ev->ng);
    free(ev->fw);
    free(ev->bw);
    free(ev->et);
    free(ev->eg);
    free(ev->vt);
    free(ev->vg);
    free(ev->block_of);
    free(ev->blocks);
    free(ev->blayers);
    free(ev->ivs);
    free(ev);
}

static int cmp_int2(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Whether the rank sets of branches i and j of block B intersect. */
static bool branches_overlap(plan_evaluator *ev, const eblock *B, int i, int j, const int *k,
                             const int *first)
{
    /* Every interval of i against every interval of j, as a sweep over the
	 * sorted starts of both. */
    int n = 0;
    for (int q = 0; q < 2; q++) {
        int b = q ? j : i;
        for (int x = B->lstart[b]; x < B->lstart[b + 1]; x++) {
            int l = ev->blayers[x];
            ev->ivs[2 * n] = first[l];
            ev->ivs[2 * n + 1] = q ? -(first[l] + k[l]) : first[l] + k[l];
            n++;
        }
    }
    qsort(ev->ivs, (size_t)n, 2 * sizeof(int), cmp_int2);
    int end[2] = {-1, -1}; /* furthest end seen so far, per branch */
    for (int x = 0; x < n; x++) {
        int s = ev->ivs[2 * x], e = ev->ivs[2 * x + 1], q = e < 0;
        if (q)
            e = -e;
        if (end[!q] > s)
            return true;
        if (e > end[q])
            end[q] = e;
    }
    return false;
}

/* The best series-parallel schedule of a block's branches (subset DP over
 * at most MAXB branches); returns the time, counts concurrent use. */
static double block_time(plan_evaluator *ev, const eblock *B, const int *k, const int *first,
                         bool *used_conc)
{
    int m = B->nb, full = (1 << m) - 1;
    bool ov[MAXB][MAXB];
    for (int i = 0; i < m; i++)
        for (int j = i + 1; j < m; j++)
            ov[i][j] = ov[j][i] = branches_overlap(ev, B, i, j, k, first);
    /* Each branch's lowest and highest rank: groups side by side must not
	 * put more ranks on a node than it has cores (plan_core_share). */
    int lo[MAXB], hi[MAXB];
    for (int i = 0; i < m; i++) {
        lo[i] = ev->G;
        hi[i] = -1;
        for (int x = B->lstart[i]; x < B->lstart[i + 1]; x++) {
            int l = ev->blayers[x];
            lo[i] = first[l] < lo[i] ? first[l] : lo[i];
            hi[i] = first[l] + k[l] - 1 > hi[i] ? first[l] + k[l] - 1 : hi[i];
        }
    }
    double E[1 << MAXB];
    bool conc[1 << MAXB];
    for (int M = 1; M <= full; M++) {
        int low = M & -M;
        if (M == low) {
            int b = __builtin_ctz((unsigned)M);
            E[M] = ev->vt[B->branch[b]];
            conc[M] = false;
            continue;
        }
        E[M] = INFINITY;
        /* g holds M's lowest branch; h = M \ g is not empty. */
        for (int g = (M - 1) & M; g > 0; g = (g - 1) & M) {
            if (!(g & low))
                continue;
            int h = M & ~g;
            double s = E[g] + E[h];
            if (s < E[M]) {
                E[M] = s;
                conc[M] = conc[g] || conc[h];
            }
            bool disjoint = true;
            int a = ev->G, z = -1;
            for (int i = 0; i < m; i++) {
                for (int j = 0; j < m && disjoint; j++)
                    if ((g >> i & 1) && (h >> j & 1) && ov[i][j])
                        disjoint = false;
                if ((M >> i & 1) && hi[i] >= lo[i]) {
                    a = lo[i] < a ? lo[i] : a;
                    z = hi[i] > z ? hi[i] : z;
                }
            }
            if (disjoint && z >= a && plan_core_share(&ev->p->cluster, a, z - a + 1) > 1)
                disjoint = false;
            if (disjoint && fmax(E[g], E[h]) < E[M]) {
                E[M] = fmax(E[g], E[h]);
                conc[M] = true;
            }
        }
    }
    *used_conc = conc[full];
    return E[full];
}

bool plan_evaluator_run(plan_evaluator *ev, const int *k, const int *first, double *time,
                        double *gpu_seconds)
{
    const plan_problem *p = ev->p;
    for (int l = 0; l < ev->n; l++)
        if (k[l] < 1 || k[l] > ev->kmax || first[l] < 0 || first[l] + k[l] > ev->G)
            return false;
    /* Evaluated more than once (a brute force): remember compute times. */
    if (++ev->runs == 2 && (double)ev->n * (ev->kmax + 1) <= 1e6) {
        size_t m = (size_t)ev->n * (ev->kmax + 1);
        ev->cf = plan_xcalloc(m, sizeof(double));
        ev->cb = plan_xcalloc(m, sizeof(double));
        for (size_t i = 0; i < m; i++)
            ev->cf[i] = -1;
    }
    double G = 0, T = 0;
    for (int l = 0; l < ev->n; l++) {
        compute_time(ev, l, k[l], &ev->fw[l], &ev->bw[l]);
        plan_price_node(&ev->pr, l, k[l], first[l], ev->fw[l], ev->bw[l], &ev->nt[l], &ev->ng[l],
                        NULL);
        G += ev->ng[l];
        T += ev->nt[l];
    }
    for (int e = 0; e < p->nedges; e++) {
        int u = p->edges[e].from, v = p->edges[e].to;
        plan_price_edge(&ev->pr, e, k[u], first[u], ev->bw[u], k[v], first[v], &ev->et[e],
                        &ev->eg[e], NULL, NULL);
        G += ev->eg[e];
        T += ev->et[e];
    }
    ev->nconc = 0;
    if (ev->is_sp) {
        const plan_sp *sp = &ev->sp;
        for (int t = 0; t < sp->ntn; t++) {
            const plan_tnode *T = &sp->tn[t];
            if (T->kind == PLAN_TN_LEAF) {
                ev->vt[t] = T->edge >= 0 ? ev->et[T->edge] : 0;
            } else if (T->kind == PLAN_TN_SERIES) {
                ev->vt[t] = ev->vt[T->a] + ev->nt[T->mid] + ev->vt[T->b];
            } else if (!sp->absorbed[t]) {
                double s = 0;
                for (int x = sp->kid_head[t]; x >= 0; x = sp->kid_next[x])
                    if (!sp->tn[x].interior || ev->block_of[t] < 0)
                        s += ev->vt[x];
                if (ev->block_of[t] >= 0) {
                    bool used;
                    s += block_time(ev, &ev->blocks[ev->block_of[t]], k, first, &used);
                    ev->nconc += used;
                }
                ev->vt[t] = s;
            }
        }
        T = ev->vt[sp->root];
    }
    /* Every rank joins the loss sum between the forward and the backward. */
    T += plan_loss_sum_time(&ev->p->cluster);
    *time = T;
    *gpu_seconds = G;
    return true;
}

static double layer_mem(const plan_problem *p, const plan_layer *l, int64_t shard)
{
    return l->params * p->dtype_bytes * (2.0 + p->optimizer_states) +
           l->saved * (double)shard * p->dtype_bytes;
}

bool plan_evaluate(const plan_problem *p, const int *k, const int *first, plan_result *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int n = p->nlayers;
    int *zero = first ? NULL : plan_xcalloc((size_t)n + 1, sizeof(int));
    if (!first)
        first = zero;
    plan_evaluator *ev = plan_evaluator_new(p);
    double T, Gs;
    if (!plan_evaluator_run(ev, k, first, &T, &Gs)) {
        int kmax = ev->kmax, bad = 0;
        while (bad < n && k[bad] >= 1 && k[bad] <= kmax && first[bad] >= 0 &&
               first[bad] + k[bad] <= ev->G)
            bad++;
        snprintf(err, errlen, "layer '%s': %d GPUs from rank %d do not fit %d GPUs and batch %lld",
                 bad < n ? p->layers[bad].name : "?", bad < n ? k[bad] : 0,
                 bad < n ? first[bad] : 0, ev->G, (long long)p->batch);
        plan_evaluator_free(ev);
        free(zero);
        return false;
    }
    out->nlayers = n;
    out->layer = plan_xcalloc((size_t)n + 1, sizeof(plan_layer_result));
    out->exact = ev->is_sp;
    out->nconcurrent = ev->nconc;
    out->time = T;
    out->gpu_seconds = Gs;
    out->objective = T + p->price * Gs;
    out->samples_per_s = T > 0 ? (double)p->batch / T : 0;
    for (int l = 0; l < n; l++) {
        plan_layer_result *lr = &out->layer[l];
        lr->k = k[l];
        lr->first = first[l];
        lr->shard = plan_shard(p->batch, k[l]);
        lr->allreduce = plan_price_allreduce(&ev->pr, l, k[l], first[l]);
        double t, g, ex;
        plan_price_node(&ev->pr, l, k[l], first[l], ev->fw[l], ev->bw[l], &t, &g, &ex);
        lr->ar_exposed = ex;
        /* Amplification compares compute alone; the layer's times are what
		 * it takes at its ranks, with their node's cores shared. */
        lr->amplification = ev->t1[l] > 0 ? k[l] * (ev->fw[l] + ev->bw[l]) / ev->t1[l] : 1;
        double share = plan_core_share(&p->cluster, first[l], k[l]), sf, sb;
        plan_layer_sync_time(&p->cluster, &p->layers[l], first[l], k[l], &sf, &sb);
        lr->fwd = ev->fw[l] * share + sf;
        lr->bwd = ev->bw[l] * share + sb;
        lr->data = plan_layer_data_time(p, &p->layers[l], lr->shard) * share;
        lr->update = plan_layer_update_time(p, &p->layers[l], lr->shard) * share;
        lr->mem_bytes = layer_mem(p, &p->layers[l], lr->shard);
    }
    for (int e = 0; e < p->nedges; e++) {
        int u = p->edges[e].from, v = p->edges[e].to;
        double t, g, r, ex;
        plan_price_edge(&ev->pr, e, k[u], first[u], ev->bw[u], k[v], first[v], &t, &g, &r, &ex);
        out->layer[v].reshard += r;
        if (p->ar_overlap && ev->pr.nin[v] == 1)
            out->layer[v].ar_exposed = ex;
    }
    plan_evaluator_free(ev);
    free(zero);
    plan_place(p, out);
    return true;
}
