/*
 * planner.c: the burst planner: how many GPUs each layer uses.
 *
 * Every layer gets a candidate list of GPU counts (dp: all GPUs; deeppool:
 * powers of two; burst: any count 1..min(G, B)), pruned to the smallest count
 * per largest shard, filtered by the amplification limit and the per-GPU
 * memory. The layer graph, between a virtual source and sink, is reduced to a
 * series-parallel decomposition tree (series: a node with one edge in and one
 * out; parallel: two edges with the same ends). Each tree node holds a table
 * [candidate of its first end][candidate of its last end] of the cheapest
 * interior; series composition is a min-plus product through the middle
 * layer, parallel composition is either sequential (sum: the branches share
 * GPUs) or concurrent (max: the branches run on disjoint GPUs, the GPU budget
 * split between them). The DP is exact for the objective
 *   time + price * GPU-seconds
 * when price is 0 (for any price on graphs without concurrent branches).
 * Graphs that do not reduce use a heuristic (iterated conditional modes from
 * several starts, branches in sequence) measured against brute force in
 * tests/unit/planner. docs/plan.md has the formulas.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* A DP table over the candidates of a component's two ends: values until
 * the last parent has read them, the argmins for as long as the plan is
 * being read out. */
typedef struct table {
    double *s;     /* [cu][cv] objective: t + price * g */
    double *t, *g; /* [cu][cv] time, GPU-seconds */
    void *arg; /* series: candidate of mid; parallel: 0 sequential, else budget level of a + 1 */
    int argw;  /* bytes per arg: 1, 2 or 4 */
} table;

/* A node of the decomposition tree at one GPU budget level. */
typedef struct state {
    int t, lev;
    int refs; /* parent states that have yet to read the values */
    table tb;
} state;

typedef struct lay {
    int nc;
    int *k;
    double *tf, *tb, *ar, *amp, *mem;
} lay;

typedef struct ctx {
    const plan_problem *p;
    plan_strategy s;
    double lambda;
    int n, G;
    lay *L;        /* n + 2: virtual source n, sink n + 1 */
    int *nin;      /* real in-degree */
    double *hide;  /* backward time of earlier layers an all-reduce surely hides behind */
    double *minb;  /* a layer's backward at the smallest shard */
    int *gidx, ng; /* k -> index of the reshard memo */
    plan_reshard *rs;
    unsigned char *rs_done;
    plan_sp sp;
    int ntn;
    plan_tnode *tn;
    int root;
    int nb, *bl, top;
    state *st; /* every (node, level) the root needs */
    int nst, capst;
    int *hkey, *hval; /* (node, level) -> state */
    size_t hmask;
    double *scr[2][3]; /* leaf tables built on the fly: s, t, g */
    size_t scrn[2];
    bool concurrency;
    int *kc, *off;       /* chosen candidate index and rank offset per layer */
    unsigned char *conc; /* per tree node: parallel branches run concurrently */
    int nconc;
} ctx;

static const char *strategy_names[PS_COUNT] = {"dp", "deeppool", "burst"};

const char *plan_strategy_name(plan_strategy s)
{
    return strategy_names[s];
}

bool plan_strategy_lookup(const char *name, plan_strategy *out)
{
    for (int i = 0; i < PS_COUNT; i++)
        if (strcmp(name, strategy_names[i]) == 0) {
            *out = (plan_strategy)i;
            return true;
        }
    return false;
}

static void *xcalloc(size_t n, size_t size)
{
    void *q = calloc(n ? n : 1, size ? size : 1);
    if (!q) {
        fprintf(stderr, "burstc: out of memory\n");
        exit(2);
    }
    return q;
}

/* ---- candidates ---- */

static double layer_mem(const plan_problem *p, const plan_layer *l, int64_t shard)
{
    return l->params * p->dtype_bytes * (2.0 + p->optimizer_states) +
           l->saved * (double)shard * p->dtype_bytes;
}

static bool allowed_count(plan_strategy s, int k, int kmax)
{
    switch (s) {
    case PS_DP: return k == kmax;
    case PS_DEEPPOOL: return (k & (k - 1)) == 0;
    default: return true;
    }
}

static bool make_candidates(ctx *c, char *err, size_t errlen)
{
    const plan_problem *p = c->p;
    int kmax = (int64_t)c->G < p->batch ? c->G : (int)p->batch;
    int *tmp = xcalloc((size_t)kmax + 1, sizeof(int));
    for (int l = 0; l < c->n; l++) {
        const plan_layer *ly = &p->layers[l];
        lay *L = &c->L[l];
        double f1, b1;
        plan_layer_time(p, ly, p->batch, &f1, &b1);
        double t1 = f1 + b1;
        int nc = 0;
        int64_t last = -1;
        double minmem = INFINITY;
        for (int k = 1; k <= kmax; k++) {
            if (!allowed_count(c->s, k, kmax))
                continue;
            int64_t sh = plan_shard(p->batch, k);
            /* Counts with the same largest shard compute equally fast:
			 * keep the smallest, and the powers of two, whose aligned
			 * splits reshard cheaply (so burst's candidates include
			 * deeppool's). */
            if (sh == last && (k & (k - 1)) != 0)
                continue;
            last = sh;
            double m = layer_mem(p, ly, sh);
            if (m < minmem)
                minmem = m;
            if (p->cluster.mem_bytes > 0 && m > p->cluster.mem_bytes)
                continue;
            if (c->s != PS_DP && p->amp_limit > 0 && k > 1) {
                double f, b;
                plan_layer_time(p, ly, sh, &f, &b);
                if (k * (f + b) > p->amp_limit * t1 * (1 + 1e-12))
                    continue;
            }
            tmp[nc++] = k;
        }
        if (nc == 0) {
            if (p->cluster.mem_bytes > 0 && minmem > p->cluster.mem_bytes)
                snprintf(
                    err, errlen,
                    "layer '%s' needs %.0f bytes per GPU (parameters, gradients, optimizer state and "
                    "saved activations) but a GPU has %.0f",
                    ly->name, minmem, p->cluster.mem_bytes);
            else
                snprintf(err, errlen, "layer '%s' has no GPU count within the limits", ly->name);
            free(tmp);
            return false;
        }
        L->nc = nc;
        L->k = xcalloc((size_t)nc, sizeof(int));
        L->tf = xcalloc((size_t)nc, sizeof(double));
        L->tb = xcalloc((size_t)nc, sizeof(double));
        L->ar = xcalloc((size_t)nc, sizeof(double));
        L->amp = xcalloc((size_t)nc, sizeof(double));
        L->mem = xcalloc((size_t)nc, sizeof(double));
        for (int i = 0; i < nc; i++) {
            int k = tmp[i];
            int64_t sh = plan_shard(p->batch, k);
            L->k[i] = k;
            plan_layer_time(p, ly, sh, &L->tf[i], &L->tb[i]);
            L->ar[i] = plan_allreduce_time(&p->cluster, 0, k, ly->params * p->dtype_bytes);
            L->amp[i] = t1 > 0 ? k * (L->tf[i] + L->tb[i]) / t1 : 1;
            L->mem[i] = layer_mem(p, ly, sh);
        }
    }
    free(tmp);
    for (int v = c->n; v < c->n + 2; v++) {
        lay *L = &c->L[v];
        L->nc = 1;
        L->k = xcalloc(1, sizeof(int));
        L->tf = xcalloc(1, sizeof(double));
        L->tb = xcalloc(1, sizeof(double));
        L->ar = xcalloc(1, sizeof(double));
        L->amp = xcalloc(1, sizeof(double));
        L->mem = xcalloc(1, sizeof(double));
    }
    return true;
}

/* ---- costs of one layer and one edge ---- */

static void node_cost(ctx *c, int l, int ci, double *t, double *g)
{
    if (l >= c->n) {
        *t = *g = 0;
        return;
    }
    const lay *L = &c->L[l];
    double x = L->tf[ci] + L->tb[ci];
    if (c->nin[l] != 1)
        x += fmax(0, L->ar[ci] - c->hide[l]);
    *t = x;
    *g = x * L->k[ci];
}

/* Both ways cost the same with both sets starting at rank 0. */
static const plan_reshard *reshard_of(ctx *c, int k1, int k2)
{
    if (k1 > k2) {
        int t = k1;
        k1 = k2;
        k2 = t;
    }
    size_t i = (size_t)c->gidx[k1] * c->ng + c->gidx[k2];
    if (!c->rs_done[i]) {
        c->rs[i] = plan_reshard_count(c->p->batch, c->p->cluster.gpus_per_node, 0, k1, 0, k2);
        c->rs_done[i] = 1;
    }
    return &c->rs[i];
}

static void edge_cost(ctx *c, int e, int cu, int cv, double *t, double *g)
{
    *t = *g = 0;
    if (e < 0)
        return;
    const plan_edge *pe = &c->p->edges[e];
    const lay *U = &c->L[pe->from], *V = &c->L[pe->to];
    int ku = U->k[cu], kv = V->k[cv];
    double r = 0;
    if (ku != kv) {
        double bps = pe->elems * c->p->dtype_bytes;
        r = 2 * plan_reshard_time(&c->p->cluster, reshard_of(c, ku, kv), bps);
    }
    double ex = 0;
    if (c->nin[pe->to] == 1)
        ex = fmax(0, V->ar[cv] - U->tb[cu] - c->hide[pe->to] + c->minb[pe->from]);
    *t = r + ex;
    *g = r * (ku > kv ? ku : kv) + ex * kv;
}

/* The same costs for ranks placed at offsets (concurrent branches): the
 * table above assumes every layer starts at rank 0; the plan's reported time
 * uses these. */
static void node_cost_at(ctx *c, int l, int ci, int off, double *t, double *g)
{
    node_cost(c, l, ci, t, g);
    if (l >= c->n || off == 0 || c->nin[l] == 1)
        return;
    const lay *L = &c->L[l];
    double ar = plan_allreduce_time(&c->p->cluster, off, L->k[ci],
                                    c->p->layers[l].params * c->p->dtype_bytes);
    double x = L->tf[ci] + L->tb[ci] + fmax(0, ar - c->hide[l]);
    *t = x;
    *g = x * L->k[ci];
}

static void edge_cost_at(ctx *c, int e, double *t, double *g, double *reshard, double *exposed)
{
    const plan_edge *pe = &c->p->edges[e];
    int cu = c->kc[pe->from], cv = c->kc[pe->to];
    const lay *U = &c->L[pe->from], *V = &c->L[pe->to];
    int ku = U->k[cu], kv = V->k[cv], ou = c->off[pe->from], ov = c->off[pe->to];
    double r = 0;
    if (ku != kv || ou != ov) {
        double bps = pe->elems * c->p->dtype_bytes;
        int gpn = c->p->cluster.gpus_per_node;
        plan_reshard f = plan_reshard_count(c->p->batch, gpn, ou, ku, ov, kv);
        plan_reshard b = plan_reshard_count(c->p->batch, gpn, ov, kv, ou, ku);
        r = plan_reshard_time(&c->p->cluster, &f, bps) + plan_reshard_time(&c->p->cluster, &b, bps);
    }
    double ex = 0;
    if (c->nin[pe->to] == 1) {
        double ar = plan_allreduce_time(&c->p->cluster, ov, kv,
                                        c->p->layers[pe->to].params * c->p->dtype_bytes);
        ex = fmax(0, ar - U->tb[cu] - c->hide[pe->to] + c->minb[pe->from]);
    }
    *t = r + ex;
    *g = r * (ku > kv ? ku : kv) + ex * kv;
    if (reshard)
        *reshard = r;
    if (exposed)
        *exposed = ex;
}

/* ---- series-parallel decomposition (sp.c) ---- */

static bool decompose(ctx *c)
{
    bool sp = plan_sp_build(c->p, &c->sp);
    c->ntn = c->sp.ntn;
    c->tn = c->sp.tn;
    c->root = c->sp.root;
    return sp;
}

/* ---- the DP over the tree ---- */

static void *xmalloc(size_t n)
{
    void *q = malloc(n ? n : 1);
    if (!q) {
        fprintf(stderr, "burstc: out of memory\n");
        exit(2);
    }
    return q;
}

static void table_alloc(table *tb, int nu, int nv, int maxarg)
{
    /* every entry is written by compute(); no need to clear */
    size_t n = (size_t)nu * nv;
    tb->s = xmalloc(sizeof(double) * n);
    tb->t = xmalloc(sizeof(double) * n);
    tb->g = xmalloc(sizeof(double) * n);
    tb->argw = maxarg < 256 ? 1 : maxarg < 65536 ? 2 : 4;
    tb->arg = xmalloc((size_t)tb->argw * n);
}

static void table_free_values(table *tb)
{
    free(tb->s);
    free(tb->t);
    free(tb->g);
    tb->s = tb->t = tb->g = NULL;
}

static void arg_set(table *tb, size_t i, int v)
{
    if (tb->argw == 1)
        ((unsigned char *)tb->arg)[i] = (unsigned char)v;
    else if (tb->argw == 2)
        ((uint16_t *)tb->arg)[i] = (uint16_t)v;
    else
        ((int32_t *)tb->arg)[i] = v;
}

static int arg_get(const table *tb, size_t i)
{
    if (tb->argw == 1)
        return ((const unsigned char *)tb->arg)[i];
    if (tb->argw == 2)
        return ((const uint16_t *)tb->arg)[i];
    return ((const int32_t *)tb->arg)[i];
}

/* best[j] = min(best[j], base + row[j]), remembering m where it improves:
 * the DP's inner loop. Two doubles at a time with GCC/Clang vector types
 * (compilers do not vectorise the argmin on their own). */
#if defined(__GNUC__)
typedef double v2d __attribute__((vector_size(16), aligned(8), may_alias));
typedef long long v2l __attribute__((vector_size(16), aligned(8), may_alias));
#endif

static void min_plus_row(double *restrict best, double *restrict bestm, const double *restrict row,
                         double base, double m, int n)
{
    int j = 0;
#if defined(__GNUC__)
    v2d vb = {base, base}, vm = {m, m};
    for (; j + 2 <= n; j += 2) {
        v2d x = *(const v2d *)&row[j] + vb;
        v2d b = *(const v2d *)&best[j];
        v2d bm = *(const v2d *)&bestm[j];
        v2l lt = x < b;
        *(v2d *)&best[j] = (v2d)(((v2l)x & lt) | ((v2l)b & ~lt));
        *(v2d *)&bestm[j] = (v2d)(((v2l)vm & lt) | ((v2l)bm & ~lt));
    }
#endif
    for (; j < n; j++) {
        double x = base + row[j];
        if (x < best[j]) {
            best[j] = x;
            bestm[j] = m;
        }
    }
}

/* The level a node's table is kept at: a component without layers inside
 * does not depend on the budget. */
static int level_of(ctx *c, int t, int lev)
{
    return c->tn[t].interior ? lev : c->top;
}

static int level_for_a_budget(ctx *c, int la, int lev)
{
    for (int q = c->nb - 1; q >= 1; q--)
        if (c->bl[la] + c->bl[q] <= c->bl[lev])
            return q;
    return -1;
}

static bool concurrent_ok(ctx *c, const plan_tnode *T)
{
    return c->concurrency && c->tn[T->a].interior && c->tn[T->b].interior;
}

static size_t state_slot(ctx *c, int t, int lev)
{
    uint64_t h = ((uint64_t)t * 64 + (uint64_t)lev) * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 24) & c->hmask;
    while (c->hkey[i] >= 0 && !(c->hkey[i] == t && c->st[c->hval[i]].lev == lev))
        i = (i + 1) & c->hmask;
    return i;
}

static int state_find(ctx *c, int t, int lev)
{
    size_t i = state_slot(c, t, level_of(c, t, lev));
    return c->hkey[i] >= 0 ? c->hval[i] : -1;
}

/* The state (t, lev), made (with no values) if new; counts one more reader. */
static int state_need(ctx *c, int t, int lev)
{
    lev = level_of(c, t, lev);
    size_t i = state_slot(c, t, lev);
    if (c->hkey[i] >= 0) {
        c->st[c->hval[i]].refs++;
        return c->hval[i];
    }
    if (c->nst == c->capst) {
        c->capst *= 2;
        c->st = realloc(c->st, (size_t)c->capst * sizeof(state));
        if (!c->st) {
            fprintf(stderr, "burstc: out of memory\n");
            exit(2);
        }
    }
    if (2 * (size_t)(c->nst + 1) > c->hmask) {
        size_t n = 2 * (c->hmask + 1);
        free(c->hkey);
        free(c->hval);
        c->hkey = xmalloc(n * sizeof(int));
        c->hval = xmalloc(n * sizeof(int));
        c->hmask = n - 1;
        for (size_t q = 0; q < n; q++)
            c->hkey[q] = -1;
        for (int q = 0; q < c->nst; q++) {
            size_t z = state_slot(c, c->st[q].t, c->st[q].lev);
            c->hkey[z] = c->st[q].t;
            c->hval[z] = q;
        }
        i = state_slot(c, t, lev);
    }
    c->st[c->nst] = (state){t, lev, 1, {0}};
    c->hkey[i] = t;
    c->hval[i] = c->nst;
    return c->nst++;
}

/* The states (t, lev) reads, in the order compute() reads them; leaves are
 * not states (their tables are built when read). Returns how many. */
static int deps(ctx *c, int t, int lev, int *dt, int *dl)
{
    const plan_tnode *T = &c->tn[t];
    int n = 0;
    if (T->kind == PLAN_TN_LEAF)
        return 0;
    dt[n] = T->a, dl[n++] = lev;
    dt[n] = T->b, dl[n++] = lev;
    if (T->kind == PLAN_TN_PARALLEL && concurrent_ok(c, T))
        for (int la = 1; la < c->nb && c->bl[la] < c->bl[lev]; la++) {
            int lb = level_for_a_budget(c, la, lev);
            if (lb < 0)
                continue;
            dt[n] = T->a, dl[n++] = la;
            dt[n] = T->b, dl[n++] = lb;
        }
    return n;
}

/* The values of child t at level lev: its state's table, or for a leaf a
 * table of edge costs built into scratch buffer `which`. */
static table child(ctx *c, int t, int lev, int which)
{
    const plan_tnode *T = &c->tn[t];
    if (T->kind != PLAN_TN_LEAF)
        return c->st[state_find(c, t, lev)].tb;
    int nu = c->L[T->u].nc, nv = c->L[T->v].nc;
    size_t n = (size_t)nu * nv;
    if (n > c->scrn[which]) {
        for (int q = 0; q < 3; q++) {
            free(c->scr[which][q]);
            c->scr[which][q] = xmalloc(n * sizeof(double));
        }
        c->scrn[which] = n;
    }
    table r = {c->scr[which][0], c->scr[which][1], c->scr[which][2], NULL, 0};
    for (int i = 0; i < nu; i++)
        for (int j = 0; j < nv; j++) {
            edge_cost(c, T->edge, i, j, &r.t[i * nv + j], &r.g[i * nv + j]);
            r.s[i * nv + j] = r.t[i * nv + j] + c->lambda * r.g[i * nv + j];
        }
    return r;
}

/* Computes the table of state q from its children's values. */
static void compute(ctx *c, int q)
{
    int t = c->st[q].t, lev = c->st[q].lev;
    plan_tnode *T = &c->tn[t];
    int nu = c->L[T->u].nc, nv = c->L[T->v].nc;
    table r;
    double lam = c->lambda;
    if (T->kind == PLAN_TN_SERIES) {
        table A = child(c, T->a, lev, 0), B = child(c, T->b, lev, 1);
        const lay *M = &c->L[T->mid];
        int nm = M->nc, budget = c->bl[lev];
        table_alloc(&r, nu, nv, nm);
        double *nt = xcalloc((size_t)nm, sizeof(double)), *ng = xcalloc((size_t)nm, sizeof(double));
        for (int m = 0; m < nm; m++)
            node_cost(c, T->mid, m, &nt[m], &ng[m]);
        /* Min-plus product through the middle layer: first the objective
		 * and its argmin in a tight loop, then time and GPU-seconds. */
        double *best = xcalloc((size_t)nv, sizeof(double)),
               *bestm = xcalloc((size_t)nv, sizeof(double));
        for (int i = 0; i < nu; i++) {
            for (int j = 0; j < nv; j++) {
                best[j] = INFINITY;
                bestm[j] = -1;
            }
            for (int m = 0; m < nm; m++) {
                double a = A.s[i * nm + m];
                if (a == INFINITY || M->k[m] > budget)
                    continue;
                min_plus_row(best, bestm, &B.s[m * nv], a + nt[m] + lam * ng[m], (double)m, nv);
            }
            for (int j = 0; j < nv; j++) {
                size_t x = (size_t)i * nv + j;
                int m = (int)bestm[j];
                r.s[x] = best[j];
                arg_set(&r, x, m < 0 ? 0 : m);
                if (m < 0) {
                    r.t[x] = INFINITY;
                    r.g[x] = 0;
                    continue;
                }
                r.t[x] = A.t[i * nm + m] + nt[m] + B.t[m * nv + j];
                r.g[x] = A.g[i * nm + m] + ng[m] + B.g[m * nv + j];
            }
        }
        free(nt);
        free(ng);
        free(best);
        free(bestm);
    } else {
        table A = child(c, T->a, lev, 0), B = child(c, T->b, lev, 1);
        table_alloc(&r, nu, nv, c->nb + 1);
        for (int i = 0; i < nu * nv; i++) {
            r.t[i] = A.t[i] + B.t[i];
            r.g[i] = A.g[i] + B.g[i];
            r.s[i] = A.s[i] + B.s[i];
            arg_set(&r, (size_t)i, 0);
        }
        for (int la = 1; concurrent_ok(c, T) && la < c->nb && c->bl[la] < c->bl[lev]; la++) {
            int lb = level_for_a_budget(c, la, lev);
            if (lb < 0)
                continue;
            table A2 = child(c, T->a, la, 0), B2 = child(c, T->b, lb, 1);
            for (int i = 0; i < nu * nv; i++) {
                double tt = fmax(A2.t[i], B2.t[i]), gg = A2.g[i] + B2.g[i];
                double ss = tt + lam * gg;
                if (ss < r.s[i]) {
                    r.t[i] = tt;
                    r.g[i] = gg;
                    r.s[i] = ss;
                    arg_set(&r, (size_t)i, la + 1);
                }
            }
        }
    }
    c->st[q].tb = r;
}

/*
 * The DP without recursion (the tree of a long chain is as deep as the
 * chain): first every state the root needs, parents before children, each
 * counting its readers; then the states in tree order (children have lower
 * ids), each computed from its children's values, which are freed as soon
 * as their last reader is done. Only the argmins stay.
 */
static table *solve(ctx *c)
{
    c->capst = 64;
    c->st = xmalloc((size_t)c->capst * sizeof(state));
    c->hmask = 127;
    c->hkey = xmalloc(128 * sizeof(int));
    c->hval = xmalloc(128 * sizeof(int));
    for (int i = 0; i < 128; i++)
        c->hkey[i] = -1;
    int ndep = 2 + 2 * c->nb, *dt = xcalloc((size_t)ndep, sizeof(int)),
        *dl = xcalloc((size_t)ndep, sizeof(int));
    state_need(c, c->root, c->top);
    for (int q = 0; q < c->nst; q++) {
        int nd = deps(c, c->st[q].t, c->st[q].lev, dt, dl);
        for (int d = 0; d < nd; d++)
            if (c->tn[dt[d]].kind != PLAN_TN_LEAF)
                state_need(c, dt[d], dl[d]);
    }
    int *start = xcalloc((size_t)c->ntn + 1, sizeof(int)),
        *order = xcalloc((size_t)c->nst, sizeof(int));
    for (int q = 0; q < c->nst; q++)
        start[c->st[q].t + 1]++;
    for (int t = 0; t < c->ntn; t++)
        start[t + 1] += start[t];
    for (int q = 0; q < c->nst; q++)
        order[start[c->st[q].t]++] = q;
    for (int x = 0; x < c->nst; x++) {
        int q = order[x];
        compute(c, q);
        int nd = deps(c, c->st[q].t, c->st[q].lev, dt, dl);
        for (int d = 0; d < nd; d++) {
            if (c->tn[dt[d]].kind == PLAN_TN_LEAF)
                continue;
            state *ch = &c->st[state_find(c, dt[d], dl[d])];
            if (--ch->refs == 0)
                table_free_values(&ch->tb);
        }
    }
    free(start);
    free(order);
    free(dt);
    free(dl);
    return &c->st[0].tb;
}

/* Reads the chosen candidates (kc), concurrent blocks (conc) and rank
 * offsets (off) out of the argmins, from the root down. */
static void reconstruct(ctx *c)
{
    int cap = 64, n = 0;
    int(*st)[4] = xcalloc((size_t)cap, sizeof *st); /* node, level, i, j */
    int *la_of = xcalloc((size_t)c->ntn, sizeof(int));
    st[n][0] = c->root, st[n][1] = c->top, st[n][2] = 0, st[n][3] = 0, n++;
    while (n > 0) {
        n--;
        int t = st[n][0], lev = level_of(c, t, st[n][1]), i = st[n][2], j = st[n][3];
        plan_tnode *T = &c->tn[t];
        if (T->kind == PLAN_TN_LEAF)
            continue;
        const table *r = &c->st[state_find(c, t, lev)].tb;
        size_t x = (size_t)i * c->L[T->v].nc + j;
        int ca[4] = {T->a, lev, i, j}, cb[4] = {T->b, lev, i, j};
        if (T->kind == PLAN_TN_SERIES) {
            int m = arg_get(r, x);
            c->kc[T->mid] = m;
            ca[3] = m;
            cb[2] = m;
        } else if (arg_get(r, x) > 0) {
            int la = arg_get(r, x) - 1;
            c->nconc++;
            c->conc[t] = 1;
            la_of[t] = la;
            ca[1] = la;
            cb[1] = level_for_a_budget(c, la, lev);
        }
        if (n + 2 > cap) {
            cap *= 2;
            st = realloc(st, (size_t)cap * sizeof *st);
            if (!st) {
                fprintf(stderr, "burstc: out of memory\n");
                exit(2);
            }
        }
        memcpy(st[n++], ca, sizeof ca);
        memcpy(st[n++], cb, sizeof cb);
    }
    /* A concurrent block's second branch starts after its sibling's budget;
	 * parents before children (ids descending). */
    int *add = xcalloc((size_t)c->ntn, sizeof(int));
    for (int t = c->ntn - 1; t >= 0; t--) {
        const plan_tnode *T = &c->tn[t];
        if (T->kind == PLAN_TN_LEAF)
            continue;
        if (T->kind == PLAN_TN_SERIES)
            c->off[T->mid] += add[t];
        add[T->a] += add[t];
        add[T->b] += add[t] + (c->conc[t] ? c->bl[la_of[t]] : 0);
    }
    free(add);
    free(la_of);
    free(st);
}

/* The chosen plan's time and GPU-seconds with its real rank offsets,
 * children before parents. */
static void placed_eval(ctx *c, double *time, double *gpu)
{
    double *vt = xcalloc((size_t)c->ntn, sizeof(double)),
           *vg = xcalloc((size_t)c->ntn, sizeof(double));
    for (int t = 0; t < c->ntn; t++) {
        const plan_tnode *T = &c->tn[t];
        if (T->kind == PLAN_TN_LEAF) {
            if (T->edge >= 0)
                edge_cost_at(c, T->edge, &vt[t], &vg[t], NULL, NULL);
            continue;
        }
        if (T->kind == PLAN_TN_SERIES) {
            double nt, ng;
            node_cost_at(c, T->mid, c->kc[T->mid], c->off[T->mid], &nt, &ng);
            vt[t] = vt[T->a] + nt + vt[T->b];
            vg[t] = vg[T->a] + ng + vg[T->b];
            continue;
        }
        vt[t] = c->conc[t] ? fmax(vt[T->a], vt[T->b]) : vt[T->a] + vt[T->b];
        vg[t] = vg[T->a] + vg[T->b];
    }
    *time = vt[c->root];
    *gpu = vg[c->root];
    free(vt);
    free(vg);
}

/* ---- the heuristic for other DAGs ---- */

static double total_cost(ctx *c, const int *kc, double *gout)
{
    double t = 0, g = 0, a, b;
    for (int l = 0; l < c->n; l++) {
        node_cost(c, l, kc[l], &a, &b);
        t += a;
        g += b;
    }
    for (int e = 0; e < c->p->nedges; e++) {
        edge_cost(c, e, kc[c->p->edges[e].from], kc[c->p->edges[e].to], &a, &b);
        t += a;
        g += b;
    }
    if (gout)
        *gout = g;
    return t;
}

static double scalar_cost(ctx *c, const int *kc)
{
    double g, t = total_cost(c, kc, &g);
    return t + c->lambda * g;
}

/* Iterated conditional modes: each layer in turn takes its best count given
 * its neighbours' until nothing changes. */
static void icm(ctx *c, int *kc, const int *inc_start, const int *inc)
{
    const plan_problem *p = c->p;
    for (int sweep = 0; sweep < 50; sweep++) {
        bool changed = false;
        for (int l = 0; l < c->n; l++) {
            int best = kc[l];
            double bestv = INFINITY;
            for (int ci = 0; ci < c->L[l].nc; ci++) {
                double a, b, v;
                node_cost(c, l, ci, &a, &b);
                v = a + c->lambda * b;
                for (int q = inc_start[l]; q < inc_start[l + 1]; q++) {
                    const plan_edge *pe = &p->edges[inc[q]];
                    if (pe->to == l)
                        edge_cost(c, inc[q], kc[pe->from], ci, &a, &b);
                    else
                        edge_cost(c, inc[q], ci, kc[pe->to], &a, &b);
                    v += a + c->lambda * b;
                }
                if (v < bestv - 1e-15) {
                    bestv = v;
                    best = ci;
                }
            }
            if (best != kc[l]) {
                kc[l] = best;
                changed = true;
            }
        }
        if (!changed)
            break;
    }
}

static void heuristic(ctx *c)
{
    const plan_problem *p = c->p;
    int n = c->n;
    int *kc = xcalloc((size_t)n, sizeof(int)), *best = c->kc;
    int *inc_start = xcalloc((size_t)n + 2, sizeof(int)),
        *inc = xcalloc((size_t)p->nedges * 2 + 1, sizeof(int));
    for (int e = 0; e < p->nedges; e++) {
        inc_start[p->edges[e].from + 1]++;
        inc_start[p->edges[e].to + 1]++;
    }
    for (int l = 0; l < n; l++)
        inc_start[l + 1] += inc_start[l];
    int *fill = xcalloc((size_t)n + 1, sizeof(int));
    for (int e = 0; e < p->nedges; e++) {
        int u = p->edges[e].from, v = p->edges[e].to;
        inc[inc_start[u] + fill[u]++] = e;
        inc[inc_start[v] + fill[v]++] = e;
    }
    free(fill);
    int *glist = xcalloc((size_t)c->ng + 1, sizeof(int));
    for (int k = 0; k <= c->G; k++)
        if (c->gidx[k] >= 0)
            glist[c->gidx[k]] = k;
    double bestv = INFINITY;
    /* Starts: each layer's cheapest count alone, then up to 16 uniform
	 * counts spread over the candidates; ICM from each, keep the best. */
    int nuni = c->ng < 16 ? c->ng : 16;
    for (int s = 0; s <= nuni; s++) {
        int kw = s == 0 ? 0 : glist[(int)((long)(s - 1) * (c->ng - 1) / (nuni > 1 ? nuni - 1 : 1))];
        for (int l = 0; l < n; l++) {
            const lay *L = &c->L[l];
            int pick = 0;
            if (s == 0) {
                double bv = INFINITY, a, b;
                for (int ci = 0; ci < L->nc; ci++) {
                    node_cost(c, l, ci, &a, &b);
                    if (a + c->lambda * b < bv) {
                        bv = a + c->lambda * b;
                        pick = ci;
                    }
                }
            } else {
                for (int ci = 0; ci < L->nc && L->k[ci] <= kw; ci++)
                    pick = ci;
            }
            kc[l] = pick;
        }
        icm(c, kc, inc_start, inc);
        double v = scalar_cost(c, kc);
        if (v < bestv) {
            bestv = v;
            memcpy(best, kc, (size_t)n * sizeof(int));
        }
    }
    free(glist);
    free(inc_start);
    free(inc);
    free(kc);
}

/* ---- driver ---- */

static void ctx_free(ctx *c)
{
    if (c->L)
        for (int l = 0; l < c->n + 2; l++) {
            free(c->L[l].k);
            free(c->L[l].tf);
            free(c->L[l].tb);
            free(c->L[l].ar);
            free(c->L[l].amp);
            free(c->L[l].mem);
        }
    free(c->L);
    free(c->nin);
    free(c->hide);
    free(c->minb);
    free(c->gidx);
    free(c->rs);
    free(c->rs_done);
    for (int q = 0; q < c->nst; q++) {
        table_free_values(&c->st[q].tb);
        free(c->st[q].tb.arg);
    }
    free(c->st);
    free(c->hkey);
    free(c->hval);
    for (int w = 0; w < 2; w++)
        for (int q = 0; q < 3; q++)
            free(c->scr[w][q]);
    plan_sp_free(&c->sp);
    free(c->bl);
    free(c->kc);
    free(c->off);
    free(c->conc);
}

static bool ctx_init(ctx *c, const plan_problem *p, plan_strategy s, const int *forced, char *err,
                     size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->s = s;
    c->lambda = p->price;
    c->n = p->nlayers;
    c->G = p->cluster.gpus;
    c->concurrency = s == PS_BURST;
    c->L = xcalloc((size_t)c->n + 2, sizeof(lay));
    c->nin = xcalloc((size_t)c->n + 2, sizeof(int));
    for (int e = 0; e < p->nedges; e++)
        c->nin[p->edges[e].to]++;
    if (forced) {
        for (int l = 0; l < c->n; l++) {
            const plan_layer *ly = &p->layers[l];
            lay *L = &c->L[l];
            int k = forced[l];
            int64_t sh = plan_shard(p->batch, k);
            double f1, b1;
            plan_layer_time(p, ly, p->batch, &f1, &b1);
            L->nc = 1;
            L->k = xcalloc(1, sizeof(int));
            L->tf = xcalloc(1, sizeof(double));
            L->tb = xcalloc(1, sizeof(double));
            L->ar = xcalloc(1, sizeof(double));
            L->amp = xcalloc(1, sizeof(double));
            L->mem = xcalloc(1, sizeof(double));
            L->k[0] = k;
            plan_layer_time(p, ly, sh, &L->tf[0], &L->tb[0]);
            L->ar[0] = plan_allreduce_time(&p->cluster, 0, k, ly->params * p->dtype_bytes);
            L->amp[0] = f1 + b1 > 0 ? k * (L->tf[0] + L->tb[0]) / (f1 + b1) : 1;
            L->mem[0] = layer_mem(p, ly, sh);
        }
        for (int v = c->n; v < c->n + 2; v++) {
            lay *L = &c->L[v];
            L->nc = 1;
            L->k = xcalloc(1, sizeof(int));
            L->tf = xcalloc(1, sizeof(double));
            L->tb = xcalloc(1, sizeof(double));
            L->ar = xcalloc(1, sizeof(double));
            L->amp = xcalloc(1, sizeof(double));
            L->mem = xcalloc(1, sizeof(double));
        }
    } else if (!make_candidates(c, err, errlen)) {
        return false;
    }
    /* The backward of every layer before l runs after l's: l's gradient
	 * all-reduce hides behind at least their shortest backward times. */
    c->hide = xcalloc((size_t)c->n + 2, sizeof(double));
    c->minb = xcalloc((size_t)c->n + 2, sizeof(double));
    int kmax = (int64_t)c->G < p->batch ? c->G : (int)p->batch;
    for (int l = 0; l < c->n; l++) {
        double f, b;
        plan_layer_time(p, &p->layers[l], plan_shard(p->batch, kmax), &f, &b);
        c->minb[l] = b;
        c->hide[l + 1] = c->hide[l] + b;
    }
    c->gidx = xcalloc((size_t)c->G + 1, sizeof(int));
    for (int k = 0; k <= c->G; k++)
        c->gidx[k] = -1;
    for (int l = 0; l < c->n; l++)
        for (int i = 0; i < c->L[l].nc; i++)
            c->gidx[c->L[l].k[i]] = 0;
    c->ng = 0;
    for (int k = 0; k <= c->G; k++)
        if (c->gidx[k] == 0)
            c->gidx[k] = c->ng++;
    c->rs = xcalloc((size_t)c->ng * c->ng, sizeof(plan_reshard));
    c->rs_done = xcalloc((size_t)c->ng * c->ng, 1);
    /* Budget levels for concurrent branches: every integer up to 16 GPUs
	 * (exact), else 17 geometric levels. */
    int nb = c->G <= 16 ? c->G + 1 : 18;
    c->bl = xcalloc((size_t)nb, sizeof(int));
    if (c->G <= 16) {
        for (int i = 0; i <= c->G; i++)
            c->bl[i] = i;
    } else {
        c->bl[0] = 0;
        for (int i = 1; i < nb; i++) {
            int v = (int)llround(pow((double)c->G, (double)(i - 1) / (nb - 2)));
            c->bl[i] = v > c->bl[i - 1] ? v : c->bl[i - 1] + 1;
        }
        c->bl[nb - 1] = c->G;
    }
    c->nb = nb;
    c->top = nb - 1;
    c->kc = xcalloc((size_t)c->n + 2, sizeof(int));
    c->off = xcalloc((size_t)c->n + 2, sizeof(int));
    return true;
}

/* Runs the optimisation on an initialised context; fills kc and off. */
static bool run(ctx *c)
{
    bool sp = decompose(c);
    if (sp) {
        c->conc = xcalloc((size_t)c->ntn, 1);
        table *r = solve(c);
        if (r->t[0] == INFINITY)
            return false;
        reconstruct(c);
    } else {
        heuristic(c);
    }
    return sp;
}

static void fill_result(ctx *c, bool sp, plan_result *out)
{
    const plan_problem *p = c->p;
    memset(out, 0, sizeof *out);
    out->strategy = c->s;
    out->nlayers = c->n;
    out->exact = sp;
    out->nconcurrent = c->nconc;
    out->layer = xcalloc((size_t)c->n, sizeof(plan_layer_result));
    out->offset = xcalloc((size_t)c->n, sizeof(int));
    double T = 0, Gs = 0;
    if (sp) {
        table *r = &c->st[0].tb;
        out->model_objective = r->t[0] + c->lambda * r->g[0];
        placed_eval(c, &T, &Gs);
    } else {
        T = total_cost(c, c->kc, &Gs);
        out->model_objective = T + c->lambda * Gs;
    }
    for (int l = 0; l < c->n; l++) {
        plan_layer_result *lr = &out->layer[l];
        const lay *L = &c->L[l];
        int ci = c->kc[l];
        lr->k = L->k[ci];
        lr->shard = plan_shard(p->batch, lr->k);
        lr->fwd = L->tf[ci];
        lr->bwd = L->tb[ci];
        lr->allreduce = plan_allreduce_time(&p->cluster, c->off[l], lr->k,
                                            p->layers[l].params * p->dtype_bytes);
        lr->ar_exposed = c->nin[l] != 1 ? fmax(0, lr->allreduce - c->hide[l]) : 0;
        lr->amplification = L->amp[ci];
        lr->mem_bytes = L->mem[ci];
        out->offset[l] = c->off[l];
    }
    for (int e = 0; e < p->nedges; e++) {
        const plan_edge *pe = &p->edges[e];
        double t, g, r, ex;
        edge_cost_at(c, e, &t, &g, &r, &ex);
        out->layer[pe->to].reshard += r;
        if (c->nin[pe->to] == 1)
            out->layer[pe->to].ar_exposed = ex;
    }
    out->time = T;
    out->gpu_seconds = Gs;
    out->samples_per_s = T > 0 ? (double)p->batch / T : 0;
}

static bool solve_at_price(const plan_problem *p, plan_strategy s, const int *forced,
                           plan_result *out, char *err, size_t errlen)
{
    ctx c;
    if (!ctx_init(&c, p, s, forced, err, errlen)) {
        ctx_free(&c);
        return false;
    }
    bool sp = run(&c);
    if (sp && c.st[0].tb.t[0] == INFINITY) {
        snprintf(err, errlen, "no plan fits the GPU budget");
        ctx_free(&c);
        return false;
    }
    fill_result(&c, sp, out);
    ctx_free(&c);
    if (out->nconcurrent > 0) {
        /* The DP priced concurrent branches as if they started at rank 0;
		 * placed, their resharding may cost more. Keep the better of this
		 * plan and the best plan with every branch in sequence. */
        ctx c2;
        if (ctx_init(&c2, p, s, forced, err, errlen)) {
            c2.concurrency = false;
            plan_result alt;
            bool sp2 = run(&c2);
            fill_result(&c2, sp2, &alt);
            alt.model_objective = out->model_objective;
            if (alt.time + p->price * alt.gpu_seconds < out->time + p->price * out->gpu_seconds) {
                plan_result_free(out);
                *out = alt;
            } else {
                plan_result_free(&alt);
            }
        }
        ctx_free(&c2);
    }
    plan_place(p, out);
    if (p->cluster.mem_bytes > 0 && out->peak_mem > p->cluster.mem_bytes) {
        int big = 0;
        double bigb = -1;
        for (int l = 0; l < out->nlayers; l++) {
            const plan_layer_result *lr = &out->layer[l];
            int r0 = lr->first;
            if (out->peak_mem_rank >= r0 && out->peak_mem_rank < r0 + lr->k &&
                lr->mem_bytes > bigb) {
                bigb = lr->mem_bytes;
                big = l;
            }
        }
        snprintf(
            err, errlen,
            "rank %d needs %.0f bytes but a GPU has %.0f; the largest share is layer '%s' with %.0f bytes",
            out->peak_mem_rank, out->peak_mem, p->cluster.mem_bytes, p->layers[big].name, bigb);
        plan_result_free(out);
        return false;
    }
    return true;
}

static double one_gpu_time(const plan_problem *p)
{
    double t = 0, f, b;
    for (int l = 0; l < p->nlayers; l++) {
        plan_layer_time(p, &p->layers[l], p->batch, &f, &b);
        t += f + b;
    }
    return t;
}

bool plan_solve(const plan_problem *p, plan_strategy s, plan_result *out, char *err, size_t errlen)
{
    if (p->gpu_budget > 0 && s != PS_DP) {
        /* Global GPU-time budget: the fastest point of the price sweep
		 * whose GPU-seconds fit. */
        double cap = p->gpu_budget * one_gpu_time(p);
        plan_problem q = *p;
        plan_result best;
        bool have = false;
        for (int i = 0; i <= 40; i++) {
            q.price = i == 0 ? 0 : pow(10.0, -6.0 + 7.0 * (i - 1) / 39.0);
            plan_result r;
            if (!solve_at_price(&q, s, NULL, &r, err, errlen))
                return false;
            bool fits = r.gpu_seconds <= cap * (1 + 1e-9);
            if (fits && (!have || r.time < best.time)) {
                if (have)
                    plan_result_free(&best);
                best = r;
                have = true;
            } else {
                plan_result_free(&r);
            }
            if (fits)
                break;
        }
        if (!have) {
            snprintf(err, errlen,
                     "no plan needs at most %.6g GPU-seconds per iteration (budget %.3g x %.6g s)",
                     cap, p->gpu_budget, one_gpu_time(p));
            return false;
        }
        *out = best;
        return true;
    }
    return solve_at_price(p, s, NULL, out, err, errlen);
}

bool plan_evaluate(const plan_problem *p, const int *k, plan_result *out, char *err, size_t errlen)
{
    return solve_at_price(p, PS_BURST, k, out, err, errlen);
}

void plan_result_free(plan_result *r)
{
    free(r->layer);
    free(r->offset);
    memset(r, 0, sizeof *r);
}

double plan_objective(const plan_problem *p, const plan_result *r)
{
    (void)p;
    return r->model_objective;
}

bool plan_is_series_parallel(const plan_problem *p)
{
    ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.n = p->nlayers;
    c.nin = xcalloc((size_t)c.n + 2, sizeof(int));
    for (int e = 0; e < p->nedges; e++)
        c.nin[p->edges[e].to]++;
    bool sp = decompose(&c);
    free(c.nin);
    plan_sp_free(&c.sp);
    return sp;
}

int plan_frontier(const plan_problem *p, plan_point *pts, int maxpts)
{
    plan_problem q = *p;
    q.gpu_budget = 0;
    int n = 0;
    char err[512];
    for (int i = 0; i <= 48; i++) {
        q.price = i == 0 ? 0 : pow(10.0, -7.0 + 8.0 * (i - 1) / 47.0);
        plan_result r;
        if (!solve_at_price(&q, PS_BURST, NULL, &r, err, sizeof err))
            break;
        plan_point pt = {q.price, r.time, r.gpu_seconds};
        plan_result_free(&r);
        bool dominated = false;
        for (int j = 0; j < n; j++)
            if (pts[j].time <= pt.time * (1 + 1e-12) &&
                pts[j].gpu_seconds <= pt.gpu_seconds * (1 + 1e-12))
                dominated = true;
        if (dominated)
            continue;
        int m = 0;
        for (int j = 0; j < n; j++)
            if (!(pt.time <= pts[j].time && pt.gpu_seconds <= pts[j].gpu_seconds))
                pts[m++] = pts[j];
        n = m;
        if (n < maxpts)
            pts[n++] = pt;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && pts[j].time < pts[j - 1].time; j--) {
            plan_point t = pts[j];
            pts[j] = pts[j - 1];
            pts[j - 1] = t;
        }
    return n;
}

/* ---- brute force (tests) ---- */

typedef struct bf_val {
    double t, g;
    int width;
    bool ok;
} bf_val;

/* Evaluates the tree for a fixed assignment and fixed parallel modes (bit
 * i of modes: parallel node number i runs concurrently), children first. */
static bf_val bf_eval(ctx *c, bf_val *v, unsigned long modes, const int *pidx)
{
    for (int t = 0; t < c->ntn; t++) {
        plan_tnode *T = &c->tn[t];
        bf_val r = {0, 0, 0, true};
        if (T->kind == PLAN_TN_LEAF) {
            edge_cost(c, T->edge, c->kc[T->u], c->kc[T->v], &r.t, &r.g);
            v[t] = r;
            continue;
        }
        bf_val a = v[T->a], b = v[T->b];
        r.ok = a.ok && b.ok;
        if (T->kind == PLAN_TN_SERIES) {
            double nt, ng;
            node_cost(c, T->mid, c->kc[T->mid], &nt, &ng);
            r.t = a.t + nt + b.t;
            r.g = a.g + ng + b.g;
            int k = c->L[T->mid].k[c->kc[T->mid]];
            r.width = a.width > k ? a.width : k;
            if (b.width > r.width)
                r.width = b.width;
            v[t] = r;
            continue;
        }
        bool conc = (modes >> pidx[t]) & 1;
        if (conc && !(c->tn[T->a].interior && c->tn[T->b].interior))
            r.ok = false;
        if (conc) {
            r.t = fmax(a.t, b.t);
            r.width = a.width + b.width;
        } else {
            r.t = a.t + b.t;
            r.width = a.width > b.width ? a.width : b.width;
        }
        r.g = a.g + b.g;
        v[t] = r;
    }
    return v[c->root];
}

double plan_brute_force(const plan_problem *p, plan_strategy s)
{
    ctx c;
    char err[256];
    if (!ctx_init(&c, p, s, NULL, err, sizeof err)) {
        ctx_free(&c);
        return INFINITY;
    }
    bool sp = decompose(&c);
    int *pidx = xcalloc((size_t)c.ntn + 1, sizeof(int));
    bf_val *vals = xcalloc((size_t)c.ntn + 1, sizeof(bf_val));
    int npar = 0;
    if (sp)
        for (int t = 0; t < c.ntn; t++)
            if (c.tn[t].kind == PLAN_TN_PARALLEL)
                pidx[t] = npar++;
    unsigned long nmodes = (sp && c.concurrency && npar < 20) ? 1ul << npar : 1;
    double best = INFINITY;
    for (int l = 0; l < c.n + 2; l++)
        c.kc[l] = 0;
    for (;;) {
        if (sp) {
            for (unsigned long m = 0; m < nmodes; m++) {
                bf_val v = bf_eval(&c, vals, m, pidx);
                if (v.ok && v.width <= c.G && v.t + c.lambda * v.g < best)
                    best = v.t + c.lambda * v.g;
            }
        } else {
            double v = scalar_cost(&c, c.kc);
            if (v < best)
                best = v;
        }
        int l = 0;
        while (l < c.n && ++c.kc[l] == c.L[l].nc)
            c.kc[l++] = 0;
        if (l == c.n)
            break;
    }
    free(pidx);
    free(vals);
    ctx_free(&c);
    return best;
}
