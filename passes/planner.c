/*
 * planner.c: the burst planner: how many GPUs each layer uses, and which.
 *
 * Every layer gets a candidate list of GPU counts (dp: all GPUs; pow2:
 * powers of two; burst: any count 1..min(G, B), above B = 64 pruned to the
 * smallest count per largest shard and the powers of two), filtered by the
 * amplification limit and the per-GPU memory. Over the series-parallel
 * decomposition of the layer graph (sp.c) a DP finds the plan with the least
 * objective  time_weight x time + gpu_weight x GPU-seconds.
 *
 * Placement is part of the search. Every layer runs on the lowest ranks of
 * a *window* of GPUs: the whole cluster, or, inside a block whose branches
 * run concurrently, the part of its window that a group of branches gets
 * (the first group from the window's first rank, the next from where it
 * ends). A DP state is a tree node with its window and the first ranks of
 * its two end layers, and every layer and edge is priced where it runs
 * (price.c): resharding across a node boundary, all-reduces spanning nodes.
 * A block's branches are scheduled by a subset DP over series-parallel
 * schedules: any grouping may run one group after another on the same
 * window, or two groups side by side on a split of it. Which splits are
 * searched: every split and any nesting inside windows of at most
 * EXACT_GPUS (8) GPUs; on more GPUs, at most two groups side by side per
 * block, the first one a power of two of whole nodes wide -- and,
 * separately, the exact search on the first 8 GPUs, so that more GPUs never
 * give a worse plan. docs/plan.md has the model, what the
 * search covers and what it does not.
 *
 * Nothing recurses over the graph: the states the root needs are listed
 * parents first, computed in tree order (children have lower ids) and their
 * values freed once their last reader is done; the plan is read out of the
 * argmins with an explicit stack. The reported time of a plan is the
 * evaluator's (evaluate.c). Graphs that do not reduce use a heuristic
 * (iterated conditional modes from several starts, everything in sequence).
 * The deeppool strategy is DeepPool's own search (deeppool.c), not this DP.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

enum {
    EXACT_GPUS = 8,              /* windows searched exhaustively */
    EDGE_CACHE_BYTES = 64 << 20, /* edge tables kept for edges that repeat */
    MAXB = PLAN_MAX_CONCURRENT,  /* branches of a block that may run concurrently */
    PRUNE_BATCH = 64,            /* above this batch, equivalent counts are pruned */
};

/* A layer's candidates: GPU counts, and in the exact search also the first
 * rank (absolute); in the coarse search a layer runs from its window's
 * first rank. */
typedef struct lay {
    int nc;
    int *k, *first;
    double *tf, *tb, *amp, *mem;
} lay;

/* A DP table over the candidates of a component's two ends: values until the
 * last reader is done, argmins until the plan is read out. t aliases s when
 * the objective is the time alone. */
typedef struct table {
    double *s; /* [cu][cv] objective */
    double *t; /* [cu][cv] time */
    void *arg; /* series: candidate of the middle layer; block: see E_* */
    int argw;  /* bytes per arg: 1, 2 or 4 */
} table;

/* A node of the decomposition tree in a window (o, w), with its end layers'
 * first ranks ou, ov (normalised: see norm_key). */
typedef struct skey {
    int t, o, w, ou, ov;
} skey;

/* An entry of a block's subset DP: branches `mask` in window (o + orel, w);
 * nest: may split into concurrent groups again. */
typedef struct ekey {
    int mask, orel, w, nest;
} ekey;

typedef struct eentry {
    ekey key;
    int state; /* a single branch: its state */
    table tb;  /* several branches: values, and args when nest */
    bool computed;
} eentry;

typedef struct state {
    skey key;
    int refs;       /* readers that have not yet read the values */
    int dep0, ndep; /* the states it reads, in c->deps */
    table tb;
    eentry *e; /* blocks: the subset DP's entries */
    int ne, cape;
    int *eh; /* their index by key: open addressing, ehmask + 1 slots, -1 empty */
    int ehmask;
} state;

/* Block args: kind in the low 2 bits (E_ONE: all branches of the mask in
 * sequence; E_SEQ: group g then the rest, same window; E_CONC: group g on
 * the first s GPUs, the rest beside it), g in the next 6, s above. */
enum { E_ONE, E_SEQ, E_CONC };

/* An edge table by its key (edges between equal layers share it). */
typedef struct edgekey {
    int lu, lv, ou, ov;           /* candidate lists (ids), first ranks of the ends */
    double elems, params_v, hide; /* activation size; with overlap: v's parameters, hidden time */
} edgekey;

typedef struct ecache {
    edgekey key;
    double *s, *t;
} ecache;

typedef struct ctx {
    const plan_problem *p;
    plan_strategy s;
    double alpha, beta; /* objective weights of time and GPU-seconds */
    bool need_t;        /* the objective is not the time alone */
    int n, G, gpn;
    lay *L; /* n + 2: virtual source n, sink n + 1 */
    plan_pricer pr;
    plan_sp sp;
    plan_tnode *tn;
    int ntn, root;
    int *kmax_in;          /* per tree node: the largest count of a layer inside */
    bool *conc_in;         /* per tree node: a block inside may run branches concurrently */
    bool *rest_u, *rest_v; /* per tree node: its table is read at that end only in its window */
    bool concurrency;      /* burst */
    bool exact;            /* splits: every width and any nesting; else the coarse set */
    int root_w;
    state *st;
    int nst, capst;
    int *hval; /* state hash */
    size_t hmask;
    int *deps, ndeps, capdeps;
    double *scr[3][2]; /* leaf tables built when read: s, t */
    size_t scrn[3];
    int *fscr[2]; /* first ranks of the candidates of a leaf's ends */
    int *list_id; /* per layer: the first layer with the same candidates */
    int *nobj0;   /* heuristic: per layer, where its candidates' objectives start */
    ecache *ec;   /* edge tables by edgekey */
    size_t nec, eccap, ecbytes;
    int *kc, *first; /* the plan read out: candidate index and first rank */
    int nconc;
} ctx;

static const char *strategy_names[PS_COUNT] = {"dp", "deeppool", "pow2", "burst"};

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
    case PS_POW2: return (k & (k - 1)) == 0;
    default: return true;
    }
}

/* The amplification limit: k ranks may spend at most amp_limit times the layer's
 * one-GPU time t1 (k = 1 always passes). */
static bool amp_ok(const plan_problem *p, const plan_layer *ly, int k, double t1)
{
    if (!(p->amp_limit > 0) || k == 1)
        return true;
    double f, b;
    plan_layer_time(p, ly, plan_shard(p->batch, k), &f, &b);
    return !(k * (f + b) > p->amp_limit * t1 * (1 + 1e-12));
}

/* Above a batch of PRUNE_BATCH, burst keeps of the counts with one largest shard the
 * smallest and the powers of two (make_candidates). */
static bool burst_prunes(const plan_problem *p, int k)
{
    return p->batch > PRUNE_BATCH && k > 1 && (k & (k - 1)) != 0 &&
           plan_shard(p->batch, k) == plan_shard(p->batch, k - 1);
}

bool plan_burst_holds(const plan_problem *p, const plan_result *r)
{
    if (r->nlayers != p->nlayers)
        return false;
    for (int l = 0; l < r->nlayers; l++) {
        const plan_layer *ly = &p->layers[l];
        int k = r->layer[l].k;
        if (r->layer[l].first != 0 || burst_prunes(p, k))
            return false;
        double f1, b1;
        plan_layer_time(p, ly, p->batch, &f1, &b1);
        if (!amp_ok(p, ly, k, f1 + b1))
            return false;
    }
    return true;
}

/* Whether every layer of q keeps within the amplification limit. */
static bool amp_within(const plan_problem *p, const plan_result *q)
{
    for (int l = 0; l < q->nlayers; l++)
        if (p->amp_limit > 0 && q->layer[l].amplification > p->amp_limit * (1 + 1e-12))
            return false;
    return true;
}

bool plan_tie_layers(const plan_problem *p, plan_result *r, char *err, size_t errlen)
{
    int n = r->nlayers;
    int *k = plan_xcalloc((size_t)n, sizeof(int)), *first = plan_xcalloc((size_t)n, sizeof(int));
    for (int l = 0; l < n; l++) {
        k[l] = r->layer[l].k;
        first[l] = r->layer[l].first;
    }
    plan_result best = {0};
    bool moved = false, ok = true;
    /* Either layer of a pair may move onto the other's ranks: the head onto the
     * embedding's can amplify the head past the limit, the embedding onto the head's
     * may not. The plan within the limit, then the lower objective. */
    for (int l = 0; l < n && ok; l++) {
        int t = p->layers[l].ties_to - 1;
        if (t < 0 || (k[l] == k[t] && first[l] == first[t]))
            continue;
        int side = -1;
        plan_result q[2];
        bool fits[2] = {false, false};
        for (int s = 0; s < 2; s++) {
            int from = s ? t : l, to = s ? l : t;
            int save[2] = {k[from], first[from]};
            k[from] = k[to];
            first[from] = first[to];
            fits[s] = plan_evaluate(p, k, first, &q[s], err, errlen);
            k[from] = save[0];
            first[from] = save[1];
            if (fits[s] && (side < 0 || (amp_within(p, &q[s]) && !amp_within(p, &q[side])) ||
                            (amp_within(p, &q[s]) == amp_within(p, &q[side]) &&
                             q[s].objective < q[side].objective)))
                side = s;
        }
        for (int s = 0; s < 2; s++)
            if (fits[s] && s != side)
                plan_result_free(&q[s]);
        if (side < 0) {
            ok = false;
            break;
        }
        if (side == 0) {
            k[l] = k[t];
            first[l] = first[t];
        } else {
            k[t] = k[l];
            first[t] = first[l];
        }
        if (moved)
            plan_result_free(&best);
        best = q[side];
        moved = true;
    }
    free(k);
    free(first);
    if (!ok || !moved) {
        if (moved)
            plan_result_free(&best);
        return ok;
    }
    best.strategy = r->strategy;
    best.found_by = r->found_by;
    best.exact = r->exact;
    best.own_time = r->own_time;
    best.own_gpu_seconds = r->own_gpu_seconds;
    plan_result_free(r);
    *r = best;
    return true;
}

static void lay_alloc(lay *L, int nc)
{
    L->nc = nc;
    L->k = plan_xcalloc((size_t)nc, sizeof(int));
    L->first = plan_xcalloc((size_t)nc, sizeof(int));
    L->tf = plan_xcalloc((size_t)nc, sizeof(double));
    L->tb = plan_xcalloc((size_t)nc, sizeof(double));
    L->amp = plan_xcalloc((size_t)nc, sizeof(double));
    L->mem = plan_xcalloc((size_t)nc, sizeof(double));
}

static bool make_candidates(ctx *c, char *err, size_t errlen)
{
    const plan_problem *p = c->p;
    int kmax = (int64_t)c->G < p->batch ? c->G : (int)p->batch;
    int *tmp = plan_xcalloc((size_t)kmax + 1, sizeof(int));
    for (int l = 0; l < c->n; l++) {
        const plan_layer *ly = &p->layers[l];
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
            /* Counts with the same largest shard compute equally fast; above
			 * a batch of 64 keep the smallest and the powers of two (their
			 * aligned splits reshard cheaply), which keeps the tables small
			 * at the price of plans where a larger equivalent count would
			 * have matched a neighbour's split. */
            if (p->batch > PRUNE_BATCH && sh == last && (k & (k - 1)) != 0)
                continue;
            last = sh;
            double m = layer_mem(p, ly, sh);
            if (m < minmem)
                minmem = m;
            if (p->cluster.mem_bytes > 0 && m > p->cluster.mem_bytes)
                continue;
            if (c->s != PS_DP && !amp_ok(p, ly, k, t1))
                continue;
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
        lay *L = &c->L[l];
        lay_alloc(L, nc);
        for (int i = 0; i < nc; i++) {
            int k = tmp[i];
            int64_t sh = plan_shard(p->batch, k);
            L->k[i] = k;
            plan_layer_time(p, ly, sh, &L->tf[i], &L->tb[i]);
            L->amp[i] = t1 > 0 ? k * (L->tf[i] + L->tb[i]) / t1 : 1;
            L->mem[i] = layer_mem(p, ly, sh);
        }
    }
    free(tmp);
    for (int v = c->n; v < c->n + 2; v++)
        lay_alloc(&c->L[v], 1);
    return true;
}

/* ---- costs: price.c at the candidates ---- */

/* A candidate's first rank: its own in the exact search, else the first
 * rank o of the window it runs in. */
static int first_of(const ctx *c, const lay *L, int ci, int o)
{
    return c->exact ? L->first[ci] : o;
}

static void node_cost(ctx *c, int l, int ci, int o, double *t, double *g)
{
    if (l >= c->n) {
        *t = *g = 0;
        return;
    }
    const lay *L = &c->L[l];
    plan_price_node(&c->pr, l, L->k[ci], first_of(c, L, ci, o), L->tf[ci], L->tb[ci], t, g, NULL);
}

static void edge_cost(ctx *c, int e, int cu, int ou, int cv, int ov, double *t, double *g)
{
    if (e < 0) {
        *t = *g = 0;
        return;
    }
    const plan_edge *pe = &c->p->edges[e];
    const lay *U = &c->L[pe->from], *V = &c->L[pe->to];
    plan_price_edge(&c->pr, e, U->k[cu], first_of(c, U, cu, ou), U->tb[cu], V->k[cv],
                    first_of(c, V, cv, ov), t, g, NULL, NULL);
}

/* Whether candidate ci of a layer may run in the window (o, w). */
static bool in_window(const ctx *c, const lay *L, int ci, int o, int w)
{
    if (!c->exact)
        return L->k[ci] <= w;
    return L->first[ci] >= o && L->first[ci] + L->k[ci] <= o + w;
}

/*
 * Where a state's table is read. An end of node t that is the middle layer
 * of an ancestor reached without leaving t's window (through series nodes
 * and blocks whose branches do not run side by side) is read only at its
 * candidates in that window, which is t's (compute_series skips the
 * others); the branches of a block that may run them side by side are read
 * whole. In the coarse search only nodes with such a block inside keep
 * their window in their key (norm_key), so only theirs are restricted.
 */
static bool end_restricted(const ctx *c, int t, bool v_end)
{
    const plan_tnode *T = &c->tn[t];
    if ((v_end ? T->v : T->u) >= c->n || !(c->exact || c->conc_in[t]))
        return false;
    return v_end ? c->rest_v[t] : c->rest_u[t];
}

/* The end candidates a block's subset DP is computed at: those its table
 * is read at (all, or those in the window o, w). */
typedef struct domain {
    int *u, *v;
    int nu, nv;
} domain;

static void domain_list(const ctx *c, int l, bool rest, int o, int w, int **out, int *n)
{
    const lay *L = &c->L[l];
    *out = plan_xrealloc(NULL, (size_t)L->nc, sizeof(int));
    *n = 0;
    for (int i = 0; i < L->nc; i++)
        if (!rest || in_window(c, L, i, o, w))
            (*out)[(*n)++] = i;
}

static void domain_of(const ctx *c, int t, int o, int w, domain *d)
{
    domain_list(c, c->tn[t].u, end_restricted(c, t, false), o, w, &d->u, &d->nu);
    domain_list(c, c->tn[t].v, end_restricted(c, t, true), o, w, &d->v, &d->nv);
}

static void domain_free(domain *d)
{
    free(d->u);
    free(d->v);
}

/* ---- tables ---- */

static void table_alloc(ctx *c, table *tb, int nu, int nv, int maxarg)
{
    /* every entry is written before it is read; no need to clear */
    size_t n = (size_t)nu * nv;
    tb->s = plan_xrealloc(NULL, n, sizeof(double));
    tb->t = c->need_t ? plan_xrealloc(NULL, n, sizeof(double)) : tb->s;
    tb->argw = maxarg < 256 ? 1 : maxarg < 65536 ? 2 : 4;
    tb->arg = maxarg > 0 ? plan_xrealloc(NULL, (size_t)tb->argw * n, 1) : NULL;
}

static void table_free_values(table *tb)
{
    if (tb->t != tb->s)
        free(tb->t);
    free(tb->s);
    tb->s = tb->t = NULL;
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

/* Entries from..to-1 of a table infinite (never read), with args 0. */
static void table_fill_inf(table *tb, size_t from, size_t to)
{
    for (size_t x = from; x < to; x++)
        tb->s[x] = INFINITY;
    if (tb->t != tb->s)
        for (size_t x = from; x < to; x++)
            tb->t[x] = INFINITY;
    if (tb->arg && to > from)
        memset((char *)tb->arg + from * (size_t)tb->argw, 0, (to - from) * (size_t)tb->argw);
}

static int arg_get(const table *tb, size_t i)
{
    if (tb->argw == 1)
        return ((const unsigned char *)tb->arg)[i];
    if (tb->argw == 2)
        return ((const uint16_t *)tb->arg)[i];
    return ((const int32_t *)tb->arg)[i];
}

/* ---- states ---- */

/*
 * The key a state is stored under. A node without layers inside does not
 * depend on its window; one without a block inside that may split only on
 * its width up to the largest count inside; a virtual end has no ranks; and a
 * shift of every rank by whole nodes changes no cost.
 */
static skey norm_key(ctx *c, int t, int o, int w, int ou, int ov)
{
    const plan_tnode *T = &c->tn[t];
    if (c->exact) /* ranks are in the candidates, and absolute */
        return T->interior ? (skey){t, o, w, 0, 0} : (skey){t, 0, 0, 0, 0};
    if (T->u >= c->n)
        ou = o;
    if (T->v >= c->n)
        ov = o;
    if (!T->interior) {
        o = ou;
        w = 0;
    } else if (!c->conc_in[t] && w > c->kmax_in[t]) {
        w = c->kmax_in[t];
    }
    int lo = o < ou ? o : ou;
    if (ov < lo)
        lo = ov;
    int shift = lo - lo % c->gpn;
    return (skey){t, o - shift, w, ou - shift, ov - shift};
}

static uint64_t skey_hash(const skey *k)
{
    uint64_t h = (uint64_t)(uint32_t)k->t * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uint32_t)k->o * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)(uint32_t)k->w * 0x165667B19E3779F9ull;
    h ^= (uint64_t)(uint32_t)k->ou * 0x27D4EB2F165667C5ull;
    h ^= (uint64_t)(uint32_t)k->ov * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

static size_t state_slot(ctx *c, const skey *k)
{
    size_t i = (size_t)skey_hash(k) & c->hmask;
    while (c->hval[i] >= 0 && memcmp(&c->st[c->hval[i]].key, k, sizeof *k) != 0)
        i = (i + 1) & c->hmask;
    return i;
}

static int state_find(ctx *c, int t, int o, int w, int ou, int ov)
{
    skey k = norm_key(c, t, o, w, ou, ov);
    return c->hval[state_slot(c, &k)];
}

/* The state of node t in a window with its ends at ou, ov, made (with no
 * values) if new; counts one more reader. */
static int state_need(ctx *c, int t, int o, int w, int ou, int ov)
{
    skey k = norm_key(c, t, o, w, ou, ov);
    size_t i = state_slot(c, &k);
    if (c->hval[i] >= 0) {
        c->st[c->hval[i]].refs++;
        return c->hval[i];
    }
    if (c->nst == c->capst) {
        c->capst *= 2;
        c->st = plan_xrealloc(c->st, (size_t)c->capst, sizeof(state));
    }
    if (2 * (size_t)(c->nst + 1) > c->hmask) {
        size_t n = 2 * (c->hmask + 1);
        free(c->hval);
        c->hval = plan_xrealloc(NULL, n, sizeof(int));
        c->hmask = n - 1;
        for (size_t q = 0; q < n; q++)
            c->hval[q] = -1;
        for (int q = 0; q < c->nst; q++)
            c->hval[state_slot(c, &c->st[q].key)] = q;
        i = state_slot(c, &k);
    }
    memset(&c->st[c->nst], 0, sizeof(state));
    c->st[c->nst].key = k;
    c->st[c->nst].refs = 1;
    c->hval[i] = c->nst;
    return c->nst++;
}

static void dep_push(ctx *c, int q)
{
    if (c->ndeps == c->capdeps) {
        c->capdeps = c->capdeps ? 2 * c->capdeps : 256;
        c->deps = plan_xrealloc(c->deps, (size_t)c->capdeps, sizeof(int));
    }
    c->deps[c->ndeps++] = q;
}

/* A child of a node: a state (pushed as a dependency) unless it is a leaf. */
static void need_child(ctx *c, int t, int o, int w, int ou, int ov)
{
    if (c->tn[t].kind != PLAN_TN_LEAF)
        dep_push(c, state_need(c, t, o, w, ou, ov));
}

/* ---- blocks: the subset DP over a block's branches ---- */

typedef struct block {
    int nb;        /* branches with layers */
    int br[MAXB];  /* their tree nodes */
    int leaves[2]; /* branches without layers (edges u -> v), at most 2 */
    int nleaves;
    bool concurrent; /* its branches may run concurrently */
} block;

static void block_of(ctx *c, int t, block *B)
{
    memset(B, 0, sizeof *B);
    int m = 0;
    for (int x = c->sp.kid_head[t]; x >= 0; x = c->sp.kid_next[x])
        m += c->tn[x].interior;
    B->concurrent = c->concurrency && m >= 2 && m <= MAXB;
    for (int x = c->sp.kid_head[t]; x >= 0; x = c->sp.kid_next[x]) {
        if (c->tn[x].interior) {
            if (B->nb < MAXB)
                B->br[B->nb] = x;
            B->nb++;
        } else if (B->nleaves < 2) {
            B->leaves[B->nleaves++] = x;
        }
    }
}

/* The widths a window of w GPUs from rank o may give its first concurrent
 * group: any in the exact search; whole nodes, a power of two of them, in
 * the coarse one (smaller groups come from the exact search on the first
 * EXACT_GPUS). None when the window puts more ranks on a node than it has
 * cores: groups side by side there would share the cores (evaluate.c). */
static bool split_ok(ctx *c, int s, int o, int w)
{
    if (s < 1 || s >= w || plan_core_share(&c->p->cluster, o, w) > 1)
        return false;
    if (c->exact)
        return true;
    return s % c->gpn == 0 && ((s / c->gpn) & (s / c->gpn - 1)) == 0;
}

/* The next width after s that split_ok accepts, or w. */
static int next_split(ctx *c, int s, int w)
{
    if (c->exact)
        return s + 1;
    int x = c->gpn; /* the next node count times a power of two */
    while (x <= s)
        x *= 2;
    return x < w ? x : w;
}

static size_t entry_slot(const state *S, const ekey *k)
{
    uint64_t h = (uint64_t)(uint32_t)k->mask * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uint32_t)k->orel * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)(uint32_t)k->w * 0x165667B19E3779F9ull;
    h ^= (uint64_t)(uint32_t)k->nest * 0x27D4EB2F165667C5ull;
    size_t i = (size_t)(h ^ (h >> 29)) & (size_t)S->ehmask;
    while (S->eh[i] >= 0 && memcmp(&S->e[S->eh[i]].key, k, sizeof *k) != 0)
        i = (i + 1) & (size_t)S->ehmask;
    return i;
}

static int entry_find(state *S, ekey k)
{
    return S->eh ? S->eh[entry_slot(S, &k)] : -1;
}

static int entry_add(state *S, ekey k)
{
    if (S->ne == S->cape) {
        S->cape = S->cape ? 2 * S->cape : 8;
        S->e = plan_xrealloc(S->e, (size_t)S->cape, sizeof(eentry));
    }
    if (2 * (size_t)(S->ne + 1) > (size_t)S->ehmask + 1) {
        size_t n = S->eh ? 2 * ((size_t)S->ehmask + 1) : 16;
        free(S->eh);
        S->eh = plan_xrealloc(NULL, n, sizeof(int));
        S->ehmask = (int)(n - 1);
        for (size_t q = 0; q < n; q++)
            S->eh[q] = -1;
        for (int q = 0; q < S->ne; q++)
            S->eh[entry_slot(S, &S->e[q].key)] = q;
    }
    memset(&S->e[S->ne], 0, sizeof(eentry));
    S->e[S->ne].key = k;
    S->e[S->ne].state = -1;
    S->eh[entry_slot(S, &k)] = S->ne;
    return S->ne++;
}

/* Lists the subset DP's entries of block state q reachable from (mask, o,
 * w, nest) and requests the branch states they read. The recursion is over
 * the mask, which shrinks at every step: at most MAXB deep. */
static int block_request(ctx *c, int q, const block *B, int mask, int o, int w, bool nest)
{
    state *S = &c->st[q];
    ekey k = {mask, o - S->key.o, w, nest};
    int i = entry_find(S, k);
    if (i >= 0)
        return i;
    i = entry_add(S, k);
    if ((mask & (mask - 1)) == 0) {
        int b = __builtin_ctz((unsigned)mask);
        int st = state_need(c, B->br[b], o, w, c->st[q].key.ou, c->st[q].key.ov);
        dep_push(c, st);
        c->st[q].e[i].state = st;
        return i;
    }
    int low = mask & -mask;
    for (int g = (mask - 1) & mask; g > 0; g = (g - 1) & mask) {
        if (g & low)
            block_request(c, q, B, g, o, w, nest);
        block_request(c, q, B, mask & ~g, o, w, nest);
        if (!nest)
            continue;
        for (int s = next_split(c, 0, w); s < w; s = next_split(c, s, w)) {
            if (!split_ok(c, s, o, w))
                continue;
            block_request(c, q, B, g, o, s, c->exact);
            block_request(c, q, B, mask & ~g, o + s, w - s, c->exact);
        }
    }
    return i;
}

static table entry_values(const state *S, int i)
{
    return S->e[i].tb;
}

/* Computes the entries requested above (children first: the recursion
 * mirrors block_request). */
static int block_compute(ctx *c, int q, const block *B, int mask, int o, int w, bool nest,
                         const domain *d)
{
    state *S = &c->st[q];
    int i = entry_find(S, (ekey){mask, o - S->key.o, w, nest});
    if (S->e[i].computed)
        return i;
    int low = mask & -mask;
    int n = d->nu * d->nv;
    table r;
    if (S->e[i].state >= 0) {
        /* a single branch: its state's table at the domain */
        table A = c->st[S->e[i].state].tb;
        int nvf = c->L[c->tn[S->key.t].v].nc;
        table_alloc(c, &r, d->nu, d->nv, 0);
        for (int a = 0; a < d->nu; a++)
            for (int b = 0; b < d->nv; b++) {
                size_t x = (size_t)a * d->nv + b, y = (size_t)d->u[a] * nvf + d->v[b];
                r.s[x] = A.s[y];
                if (c->need_t)
                    r.t[x] = A.t[y];
            }
        S->e[i].tb = r;
        S->e[i].computed = true;
        return i;
    }
    /* a single group in sequence first: every seq split of it is a sum */
    int idx[MAXB], ni = 0;
    for (int g = (mask - 1) & mask; g > 0; g = (g - 1) & mask) {
        if (g & low)
            block_compute(c, q, B, g, o, w, nest, d);
        block_compute(c, q, B, mask & ~g, o, w, nest, d);
        if (!nest)
            continue;
        for (int s = next_split(c, 0, w); s < w; s = next_split(c, s, w)) {
            if (!split_ok(c, s, o, w))
                continue;
            block_compute(c, q, B, g, o, s, c->exact, d);
            block_compute(c, q, B, mask & ~g, o + s, w - s, c->exact, d);
        }
    }
    S = &c->st[q]; /* entries may have grown */
    i = entry_find(S, (ekey){mask, o - S->key.o, w, nest});
    table_alloc(c, &r, d->nu, d->nv, nest ? 1 << 30 : 0);
    /* all of them one after the other */
    for (int b = 0; b < B->nb && b < MAXB; b++)
        if (mask >> b & 1)
            idx[ni++] = entry_find(S, (ekey){1 << b, o - S->key.o, w, nest});
    for (int x = 0; x < n; x++) {
        r.s[x] = 0;
        if (c->need_t)
            r.t[x] = 0;
    }
    for (int a = 0; a < ni; a++) {
        table A = entry_values(S, idx[a]);
        for (int x = 0; x < n; x++) {
            r.s[x] += A.s[x];
            if (c->need_t)
                r.t[x] += A.t[x];
        }
    }
    if (nest) {
        /* the splits, folded in by the vector loops (minplus.c); args are
         * 4 bytes wide here (maxarg above) */
        int32_t *arg = r.arg;
        for (int x = 0; x < n; x++)
            arg[x] = E_ONE;
        plan_split_fn *seq = plan_block_split(false), *conc = plan_block_split(true);
        double *rt = c->need_t ? r.t : NULL, al = c->alpha;
        for (int g = (mask - 1) & mask; g > 0; g = (g - 1) & mask) {
            int h = mask & ~g;
            if (g & low) {
                table A = entry_values(S, entry_find(S, (ekey){g, o - S->key.o, w, nest}));
                table Bv = entry_values(S, entry_find(S, (ekey){h, o - S->key.o, w, nest}));
                seq(r.s, rt, arg, A.s, A.t, Bv.s, Bv.t, al, E_SEQ | g << 2, n);
            }
            for (int s = next_split(c, 0, w); s < w; s = next_split(c, s, w)) {
                if (!split_ok(c, s, o, w))
                    continue;
                table A = entry_values(S, entry_find(S, (ekey){g, o - S->key.o, s, c->exact}));
                table Bv =
                    entry_values(S, entry_find(S, (ekey){h, o + s - S->key.o, w - s, c->exact}));
                conc(r.s, rt, arg, A.s, A.t, Bv.s, Bv.t, al, E_CONC | g << 2 | s << 8, n);
            }
        }
    }
    S->e[i].tb = r;
    S->e[i].computed = true;
    return i;
}

/* ---- the DP ---- */

/*
 * Edge tables: a model built from repeated blocks has many edges between
 * layers with the same candidates, activation size and first ranks, whose
 * tables are equal; they are built once (up to EDGE_CACHE_BYTES).
 */
static uint64_t edgekey_hash(const edgekey *k)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Ids of equal candidate lists (counts, first ranks, backward times). */
static void intern_lists(ctx *c)
{
    c->list_id = plan_xcalloc((size_t)c->n + 2, sizeof(int));
    size_t cap = 64;
    while (cap < 2 * ((size_t)c->n + 2))
        cap *= 2;
    int *slot = plan_xrealloc(NULL, cap, sizeof(int));
    for (size_t i = 0; i < cap; i++)
        slot[i] = -1;
    for (int l = 0; l < c->n + 2; l++) {
        const lay *L = &c->L[l];
        uint64_t h = 1469598103934665603ull;
        for (int i = 0; i < L->nc; i++) {
            uint64_t x = (uint64_t)L->k[i] * 31 + (uint64_t)L->first[i];
            double tb = L->tb[i];
            uint64_t y;
            memcpy(&y, &tb, sizeof y);
            h = (h ^ x) * 1099511628211ull;
            h = (h ^ y) * 1099511628211ull;
        }
        size_t q = (size_t)(h ^ (h >> 29)) & (cap - 1);
        for (;; q = (q + 1) & (cap - 1)) {
            if (slot[q] < 0) {
                slot[q] = l;
                c->list_id[l] = l;
                break;
            }
            const lay *M = &c->L[slot[q]];
            if (M->nc == L->nc && memcmp(M->k, L->k, sizeof(int) * (size_t)L->nc) == 0 &&
                memcmp(M->first, L->first, sizeof(int) * (size_t)L->nc) == 0 &&
                memcmp(M->tb, L->tb, sizeof(double) * (size_t)L->nc) == 0) {
                c->list_id[l] = slot[q];
                break;
            }
        }
    }
    free(slot);
}

static table edge_values(ctx *c, const plan_tnode *T, int ou, int ov, double *s, double *t)
{
    const lay *U = &c->L[T->u], *V = &c->L[T->v];
    int *fu = c->fscr[0], *fv = c->fscr[1];
    for (int i = 0; i < U->nc; i++)
        fu[i] = first_of(c, U, i, ou);
    for (int j = 0; j < V->nc; j++)
        fv[j] = first_of(c, V, j, ov);
    plan_price_edge_table(&c->pr, T->edge, U->nc, U->k, fu, U->tb, V->nc, V->k, fv, c->alpha,
                          c->beta, s, t);
    return (table){s, t, NULL, 0};
}

/* The edge table of leaf T from the cache, made if new (NULL s when the
 * cache is full). */
static table cached_edge(ctx *c, const plan_tnode *T, int ou, int ov)
{
    const plan_problem *p = c->p;
    const plan_edge *pe = &p->edges[T->edge];
    edgekey k;
    memset(&k, 0, sizeof k); /* padding too: the key is hashed as bytes */
    k.lu = c->list_id[T->u];
    k.lv = c->list_id[T->v];
    if (!c->exact) {
        /* a shift by whole nodes changes no cost: price at the shifted ranks */
        int lo = ou < ov ? ou : ov, shift = lo - lo % c->gpn;
        ou -= shift;
        ov -= shift;
        k.ou = ou;
        k.ov = ov;
    }
    k.elems = pe->elems;
    if (p->ar_overlap && c->pr.nin[T->v] == 1) {
        k.params_v = p->layers[T->v].params;
        k.hide = c->pr.hide[T->v] - c->pr.bwd1[T->u];
    }
    if (2 * (c->nec + 1) > c->eccap) {
        size_t cap = c->eccap ? 2 * c->eccap : 256;
        ecache *ne = plan_xcalloc(cap, sizeof *ne);
        for (size_t i = 0; i < c->eccap; i++)
            if (c->ec[i].s) {
                size_t j = (size_t)edgekey_hash(&c->ec[i].key) & (cap - 1);
                while (ne[j].s)
                    j = (j + 1) & (cap - 1);
                ne[j] = c->ec[i];
            }
        free(c->ec);
        c->ec = ne;
        c->eccap = cap;
    }
    size_t j = (size_t)edgekey_hash(&k) & (c->eccap - 1);
    while (c->ec[j].s && memcmp(&c->ec[j].key, &k, sizeof k) != 0)
        j = (j + 1) & (c->eccap - 1);
    if (c->ec[j].s)
        return (table){c->ec[j].s, c->ec[j].t, NULL, 0};
    size_t n = (size_t)c->L[T->u].nc * c->L[T->v].nc;
    size_t bytes = n * sizeof(double) * (c->need_t ? 2 : 1);
    if (c->ecbytes + bytes > EDGE_CACHE_BYTES)
        return (table){NULL, NULL, NULL, 0};
    c->ecbytes += bytes;
    double *s = plan_xrealloc(NULL, n, sizeof(double)),
           *t = c->need_t ? plan_xrealloc(NULL, n, sizeof(double)) : s;
    c->ec[j] = (ecache){k, s, t};
    c->nec++;
    return edge_values(c, T, ou, ov, s, t);
}

/* The values of child t (ends at ou, ov; window o, w): its state's table, or
 * for a leaf its edge costs (cached, or built into scratch buffer `which`). */
static table child(ctx *c, int t, int o, int w, int ou, int ov, int which)
{
    const plan_tnode *T = &c->tn[t];
    if (T->kind != PLAN_TN_LEAF)
        return c->st[state_find(c, t, o, w, ou, ov)].tb;
    if (T->edge >= 0) {
        table r = cached_edge(c, T, ou, ov);
        if (r.s)
            return r;
    }
    int nu = c->L[T->u].nc, nv = c->L[T->v].nc;
    size_t n = (size_t)nu * nv;
    if (n > c->scrn[which]) {
        for (int q = 0; q < 2; q++) {
            free(c->scr[which][q]);
            c->scr[which][q] = plan_xrealloc(NULL, n, sizeof(double));
        }
        c->scrn[which] = n;
    }
    table r = {c->scr[which][0], c->need_t ? c->scr[which][1] : c->scr[which][0], NULL, 0};
    if (T->edge < 0) {
        for (size_t x = 0; x < n; x++)
            r.s[x] = r.t[x] = 0;
        return r;
    }
    return edge_values(c, T, ou, ov, r.s, r.t);
}

/* Lists the states that state q reads (its children in their windows). */
static void request(ctx *c, int q)
{
    skey k = c->st[q].key;
    const plan_tnode *T = &c->tn[k.t];
    c->st[q].dep0 = c->ndeps;
    if (T->kind == PLAN_TN_SERIES) {
        need_child(c, T->a, k.o, k.w, k.ou, k.o);
        need_child(c, T->b, k.o, k.w, k.o, k.ov);
    } else if (T->kind == PLAN_TN_PARALLEL) {
        block B;
        block_of(c, k.t, &B);
        if (B.concurrent)
            block_request(c, q, &B, (1 << B.nb) - 1, k.o, k.w, true);
        else
            for (int x = c->sp.kid_head[k.t]; x >= 0; x = c->sp.kid_next[x])
                if (c->tn[x].interior)
                    need_child(c, x, k.o, k.w, k.ou, k.ov);
    }
    c->st[q].ndep = c->ndeps - c->st[q].dep0;
}

static void compute_series(ctx *c, int q)
{
    skey k = c->st[q].key;
    const plan_tnode *T = &c->tn[k.t];
    int nu = c->L[T->u].nc, nv = c->L[T->v].nc;
    table A = child(c, T->a, k.o, k.w, k.ou, k.o, 0), B = child(c, T->b, k.o, k.w, k.o, k.ov, 1);
    const lay *M = &c->L[T->mid];
    int nm = M->nc;
    table r;
    table_alloc(c, &r, nu, nv, nm);
    double *nt = plan_xrealloc(NULL, (size_t)nm, sizeof(double)),
           *nb = plan_xrealloc(NULL, (size_t)nm, sizeof(double));
    int *mw = plan_xrealloc(NULL, (size_t)nm, sizeof(int)), nmw = 0; /* those in the window */
    for (int m = 0; m < nm; m++) {
        double g;
        node_cost(c, T->mid, m, k.o, &nt[m], &g);
        nb[m] = c->alpha * nt[m] + c->beta * g;
        if (in_window(c, M, m, k.o, k.w))
            mw[nmw++] = m;
    }
    /* Min-plus product through the middle layer: the objective and its
	 * argmin in a tight loop, then the time of the argmin. */
    plan_min_plus_fn *mpr = plan_min_plus();
    double *best = plan_xrealloc(NULL, (size_t)nv, sizeof(double)),
           *bestm = plan_xrealloc(NULL, (size_t)nv, sizeof(double));
    /* the rows and columns read (end_restricted): the rows in the window,
     * the columns from the first in it to the last; the others infinite */
    bool ru = end_restricted(c, k.t, false);
    int j0 = 0, j1 = nv;
    if (end_restricted(c, k.t, true)) {
        j0 = nv, j1 = 0;
        for (int j = 0; j < nv; j++)
            if (in_window(c, &c->L[T->v], j, k.o, k.w)) {
                j0 = j < j0 ? j : j0;
                j1 = j + 1;
            }
        j0 = j0 < j1 ? j0 : j1;
    }
    for (int i = 0; i < nu; i++) {
        size_t x0 = (size_t)i * nv;
        if (ru && !in_window(c, &c->L[T->u], i, k.o, k.w)) {
            table_fill_inf(&r, x0, x0 + nv);
            continue;
        }
        table_fill_inf(&r, x0, x0 + j0);
        table_fill_inf(&r, x0 + j1, x0 + nv);
        for (int j = j0; j < j1; j++) {
            best[j] = INFINITY;
            bestm[j] = 0;
        }
        for (int y = 0; y < nmw; y++) {
            int m = mw[y];
            double a = A.s[i * nm + m];
            if (a != INFINITY)
                mpr(best + j0, bestm + j0, &B.s[m * nv + j0], a + nb[m], (double)m, j1 - j0);
        }
        for (int j = j0; j < j1; j++)
            r.s[x0 + j] = best[j];
        if (r.argw == 1)
            for (int j = j0; j < j1; j++)
                ((unsigned char *)r.arg)[x0 + j] = (unsigned char)bestm[j];
        else
            for (int j = j0; j < j1; j++)
                arg_set(&r, x0 + j, (int)bestm[j]);
        if (c->need_t)
            for (int j = j0; j < j1; j++) {
                int m = (int)bestm[j];
                r.t[x0 + j] =
                    best[j] == INFINITY ? INFINITY : A.t[i * nm + m] + nt[m] + B.t[m * nv + j];
            }
    }
    free(nt);
    free(nb);
    free(mw);
    free(best);
    free(bestm);
    c->st[q].tb = r;
}

static void compute_block(ctx *c, int q)
{
    skey k = c->st[q].key;
    const plan_tnode *T = &c->tn[k.t];
    int nu = c->L[T->u].nc, nv = c->L[T->v].nc, n = nu * nv;
    block B;
    block_of(c, k.t, &B);
    table r;
    table_alloc(c, &r, nu, nv, 0);
    for (int x = 0; x < n; x++)
        r.s[x] = r.t[x] = 0;
    for (int y = c->sp.kid_head[k.t]; y >= 0; y = c->sp.kid_next[y]) {
        if (B.concurrent && c->tn[y].interior)
            continue;
        table A = child(c, y, k.o, k.w, k.ou, k.ov, 0);
        for (int x = 0; x < n; x++) {
            r.s[x] += A.s[x];
            if (c->need_t)
                r.t[x] += A.t[x];
        }
    }
    if (B.concurrent) {
        domain d;
        domain_of(c, k.t, k.o, k.w, &d);
        int e = block_compute(c, q, &B, (1 << B.nb) - 1, k.o, k.w, true, &d);
        state *S = &c->st[q];
        table E = S->e[e].tb;
        /* the table outside the domain is never read: infinite */
        bool *in = plan_xcalloc((size_t)n, sizeof(bool));
        for (int a = 0; a < d.nu; a++)
            for (int b = 0; b < d.nv; b++) {
                size_t x = (size_t)d.u[a] * nv + d.v[b], y = (size_t)a * d.nv + b;
                in[x] = true;
                r.s[x] += E.s[y];
                if (c->need_t)
                    r.t[x] += E.t[y];
            }
        for (int x = 0; x < n; x++)
            if (!in[x])
                r.s[x] = r.t[x] = INFINITY;
        free(in);
        domain_free(&d);
        /* the subset DP's values are not read again; its args are */
        for (int i = 0; i < S->ne; i++)
            table_free_values(&S->e[i].tb);
    }
    c->st[q].tb = r;
}

/*
 * The DP: every state the root needs, parents before children (a parent's
 * request lists its children); then the states in tree order, children
 * (lower ids) first, each computed from its children's values, which are
 * freed as soon as their last reader is done. Returns the root's table.
 */
static table *solve(ctx *c)
{
    c->capst = 64;
    c->st = plan_xrealloc(NULL, (size_t)c->capst, sizeof(state));
    c->hmask = 127;
    c->hval = plan_xrealloc(NULL, 128, sizeof(int));
    for (int i = 0; i < 128; i++)
        c->hval[i] = -1;
    state_need(c, c->root, 0, c->root_w, 0, 0);
    for (int q = 0; q < c->nst; q++)
        request(c, q);
    int *start = plan_xcalloc((size_t)c->ntn + 1, sizeof(int)),
        *order = plan_xcalloc((size_t)c->nst, sizeof(int));
    for (int q = 0; q < c->nst; q++)
        start[c->st[q].key.t + 1]++;
    for (int t = 0; t < c->ntn; t++)
        start[t + 1] += start[t];
    for (int q = 0; q < c->nst; q++)
        order[start[c->st[q].key.t]++] = q;
    for (int x = 0; x < c->nst; x++) {
        int q = order[x];
        if (c->tn[c->st[q].key.t].kind == PLAN_TN_SERIES)
            compute_series(c, q);
        else
            compute_block(c, q);
        for (int d = 0; d < c->st[q].ndep; d++) {
            state *ch = &c->st[c->deps[c->st[q].dep0 + d]];
            if (--ch->refs == 0)
                table_free_values(&ch->tb);
        }
    }
    free(start);
    free(order);
    return &c->st[0].tb;
}

/* ---- reading the plan out ---- */

typedef struct frame {
    int t, o, w, ou, ov, i, j;
} frame;

typedef struct fstack {
    frame *f;
    int n, cap;
} fstack;

static void fpush(fstack *s, frame f)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->f = plan_xrealloc(s->f, (size_t)s->cap, sizeof(frame));
    }
    s->f[s->n++] = f;
}

/* The branches of a block entry for ends (i, j), with their windows
 * (recursion over shrinking masks: at most MAXB deep). */
static void block_read(ctx *c, state *S, const block *B, int mask, int o, int w, bool nest,
                       const frame *f, size_t x, fstack *out)
{
    int e = entry_find(S, (ekey){mask, o - S->key.o, w, nest});
    int a = E_ONE;
    if (S->e[e].state < 0 && nest)
        a = arg_get(&S->e[e].tb, x);
    int kind = a & 3, g = a >> 2 & 63, s = a >> 8;
    if (kind == E_ONE) {
        for (int b = 0; b < B->nb; b++)
            if (mask >> b & 1)
                fpush(out, (frame){B->br[b], o, w, f->ou, f->ov, f->i, f->j});
    } else if (kind == E_SEQ) {
        block_read(c, S, B, g, o, w, nest, f, x, out);
        block_read(c, S, B, mask & ~g, o, w, nest, f, x, out);
    } else {
        c->nconc++;
        block_read(c, S, B, g, o, s, c->exact, f, x, out);
        block_read(c, S, B, mask & ~g, o + s, w - s, c->exact, f, x, out);
    }
}

/* Reads every layer's candidate (kc) and first rank (first) out of the
 * argmins, from the root down, with an explicit stack. */
static void reconstruct(ctx *c)
{
    fstack s = {0};
    fpush(&s, (frame){c->root, 0, c->root_w, 0, 0, 0, 0});
    while (s.n > 0) {
        frame f = s.f[--s.n];
        const plan_tnode *T = &c->tn[f.t];
        if (T->kind == PLAN_TN_LEAF)
            continue;
        if (T->kind == PLAN_TN_SERIES) {
            const table *r = &c->st[state_find(c, f.t, f.o, f.w, f.ou, f.ov)].tb;
            int m = arg_get(r, (size_t)f.i * c->L[T->v].nc + f.j);
            c->kc[T->mid] = m;
            c->first[T->mid] = first_of(c, &c->L[T->mid], m, f.o);
            fpush(&s, (frame){T->a, f.o, f.w, f.ou, f.o, f.i, m});
            fpush(&s, (frame){T->b, f.o, f.w, f.o, f.ov, m, f.j});
            continue;
        }
        block B;
        block_of(c, f.t, &B);
        if (!B.concurrent) {
            for (int x = c->sp.kid_head[f.t]; x >= 0; x = c->sp.kid_next[x])
                if (c->tn[x].interior)
                    fpush(&s, (frame){x, f.o, f.w, f.ou, f.ov, f.i, f.j});
            continue;
        }
        state *S = &c->st[state_find(c, f.t, f.o, f.w, f.ou, f.ov)];
        /* entries are keyed relative to the state's normalised window */
        int shift = f.o - S->key.o;
        frame g = f;
        g.o -= shift, g.ou -= shift, g.ov -= shift;
        /* the entries are over the domain (compute_block): f's ends in it
         * (a finite value is read there, and outside it is infinite) */
        domain d;
        domain_of(c, f.t, S->key.o, S->key.w, &d);
        int a = 0, b = 0;
        while (a < d.nu - 1 && d.u[a] != f.i)
            a++;
        while (b < d.nv - 1 && d.v[b] != f.j)
            b++;
        size_t x = (size_t)a * d.nv + b;
        domain_free(&d);
        int before = s.n;
        block_read(c, S, &B, (1 << B.nb) - 1, g.o, g.w, true, &g, x, &s);
        for (int x = before; x < s.n; x++) {
            s.f[x].o += shift;
            s.f[x].ou += shift;
            s.f[x].ov += shift;
        }
    }
    free(s.f);
}

/* ---- the heuristic for other DAGs (everything in sequence, from rank 0) ---- */

static double obj(ctx *c, double t, double g)
{
    return c->alpha * t + c->beta * g;
}

static double total_cost(ctx *c, const int *kc)
{
    double v = 0, a, b;
    for (int l = 0; l < c->n; l++) {
        node_cost(c, l, kc[l], 0, &a, &b);
        v += obj(c, a, b);
    }
    for (int e = 0; e < c->p->nedges; e++) {
        edge_cost(c, e, kc[c->p->edges[e].from], 0, kc[c->p->edges[e].to], 0, &a, &b);
        v += obj(c, a, b);
    }
    return v;
}

/* Iterated conditional modes: each layer in turn takes its best count given
 * its neighbours' until nothing changes. */
static void icm(ctx *c, int *kc, const int *inc_start, const int *inc, double *const *etab,
                const double *nobj)
{
    const plan_problem *p = c->p;
    for (int sweep = 0; sweep < 50; sweep++) {
        bool changed = false;
        for (int l = 0; l < c->n; l++) {
            int best = kc[l];
            double bestv = INFINITY;
            for (int ci = 0; ci < c->L[l].nc; ci++) {
                double a, b, v = nobj[c->nobj0[l] + ci];
                for (int q = inc_start[l]; q < inc_start[l + 1]; q++) {
                    int e = inc[q];
                    const plan_edge *pe = &p->edges[e];
                    int cu = pe->to == l ? kc[pe->from] : ci, cv = pe->to == l ? ci : kc[pe->to];
                    if (etab[e]) {
                        v += etab[e][(size_t)cu * c->L[pe->to].nc + cv];
                        continue;
                    }
                    edge_cost(c, e, cu, 0, cv, 0, &a, &b);
                    v += obj(c, a, b);
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
    int *kc = plan_xcalloc((size_t)n, sizeof(int)), *best = c->kc;
    int *inc_start = plan_xcalloc((size_t)n + 2, sizeof(int)),
        *inc = plan_xcalloc((size_t)p->nedges * 2 + 1, sizeof(int));
    for (int e = 0; e < p->nedges; e++) {
        inc_start[p->edges[e].from + 1]++;
        inc_start[p->edges[e].to + 1]++;
    }
    for (int l = 0; l < n; l++)
        inc_start[l + 1] += inc_start[l];
    int *fill = plan_xcalloc((size_t)n + 1, sizeof(int));
    for (int e = 0; e < p->nedges; e++) {
        int u = p->edges[e].from, v = p->edges[e].to;
        inc[inc_start[u] + fill[u]++] = e;
        inc[inc_start[v] + fill[v]++] = e;
    }
    free(fill);
    /* Edge tables (shared between equal edges) and node objectives, looked
	 * up in every sweep of every start. */
    double **etab = plan_xcalloc((size_t)p->nedges + 1, sizeof(double *));
    for (int e = 0; e < p->nedges; e++) {
        plan_tnode T = {PLAN_TN_LEAF, p->edges[e].from, p->edges[e].to, e, -1, -1, -1, false};
        etab[e] = cached_edge(c, &T, 0, 0).s;
    }
    c->nobj0 = plan_xcalloc((size_t)n + 1, sizeof(int));
    for (int l = 0; l < n; l++)
        c->nobj0[l + 1] = c->nobj0[l] + c->L[l].nc;
    double *nobj = plan_xcalloc((size_t)c->nobj0[n] + 1, sizeof(double));
    for (int l = 0; l < n; l++)
        for (int ci = 0; ci < c->L[l].nc; ci++) {
            double a, b;
            node_cost(c, l, ci, 0, &a, &b);
            nobj[c->nobj0[l] + ci] = obj(c, a, b);
        }
    /* the distinct counts of all candidates, ascending */
    int ng = 0, *glist = plan_xcalloc((size_t)c->G + 2, sizeof(int));
    bool *seen = plan_xcalloc((size_t)c->G + 2, sizeof(bool));
    for (int l = 0; l < n; l++)
        for (int i = 0; i < c->L[l].nc; i++)
            seen[c->L[l].k[i]] = true;
    for (int k = 1; k <= c->G; k++)
        if (seen[k])
            glist[ng++] = k;
    free(seen);
    double bestv = INFINITY;
    /* Starts: each layer's cheapest count alone, then up to 16 uniform
	 * counts spread over the candidates; ICM from each, keep the best. */
    int nuni = ng < 16 ? ng : 16;
    for (int s = 0; s <= nuni; s++) {
        int kw = s == 0 ? 0 : glist[(int)((long)(s - 1) * (ng - 1) / (nuni > 1 ? nuni - 1 : 1))];
        for (int l = 0; l < n; l++) {
            const lay *L = &c->L[l];
            int pick = 0;
            if (s == 0) {
                double bv = INFINITY, a, b;
                for (int ci = 0; ci < L->nc; ci++) {
                    node_cost(c, l, ci, 0, &a, &b);
                    if (obj(c, a, b) < bv) {
                        bv = obj(c, a, b);
                        pick = ci;
                    }
                }
            } else {
                for (int ci = 0; ci < L->nc && L->k[ci] <= kw; ci++)
                    pick = ci;
            }
            kc[l] = pick;
        }
        icm(c, kc, inc_start, inc, etab, nobj);
        double v = total_cost(c, kc);
        if (v < bestv) {
            bestv = v;
            memcpy(best, kc, (size_t)n * sizeof(int));
        }
    }
    free(glist);
    free(inc_start);
    free(inc);
    free(kc);
    free(etab);
    free(nobj);
    free(c->nobj0);
    c->nobj0 = NULL;
}

/* ---- driver ---- */

static void ctx_free(ctx *c)
{
    if (c->L)
        for (int l = 0; l < c->n + 2; l++) {
            free(c->L[l].k);
            free(c->L[l].first);
            free(c->L[l].tf);
            free(c->L[l].tb);
            free(c->L[l].amp);
            free(c->L[l].mem);
        }
    free(c->L);
    plan_pricer_free(&c->pr);
    for (int q = 0; q < c->nst; q++) {
        table_free_values(&c->st[q].tb);
        free(c->st[q].tb.arg);
        for (int i = 0; i < c->st[q].ne; i++) {
            table_free_values(&c->st[q].e[i].tb);
            free(c->st[q].e[i].tb.arg);
        }
        free(c->st[q].e);
        free(c->st[q].eh);
    }
    free(c->st);
    free(c->hval);
    free(c->deps);
    for (int w = 0; w < 3; w++)
        for (int q = 0; q < 2; q++)
            free(c->scr[w][q]);
    plan_sp_free(&c->sp);
    for (size_t i = 0; i < c->eccap; i++)
        if (c->ec[i].s) {
            if (c->ec[i].t != c->ec[i].s)
                free(c->ec[i].t);
            free(c->ec[i].s);
        }
    free(c->ec);
    free(c->list_id);
    free(c->fscr[0]);
    free(c->fscr[1]);
    free(c->kmax_in);
    free(c->conc_in);
    free(c->rest_u);
    free(c->rest_v);
    free(c->kc);
    free(c->first);
    memset(c, 0, sizeof *c);
}

/* Candidates, pricing and the decomposition; false (err) if a layer has no
 * candidate. */
/* The exact search: every count up to the window, at every first rank in
 * it. False if a layer has no count that fits the window. */
static bool expand_ranks(ctx *c, int w)
{
    for (int l = 0; l < c->n; l++) {
        lay *L = &c->L[l], X;
        int nc = 0;
        for (int i = 0; i < L->nc; i++)
            if (L->k[i] <= w)
                nc += w - L->k[i] + 1;
        if (nc == 0)
            return false;
        lay_alloc(&X, nc);
        nc = 0;
        for (int i = 0; i < L->nc; i++)
            for (int f = 0; L->k[i] <= w && f + L->k[i] <= w; f++, nc++) {
                X.k[nc] = L->k[i];
                X.first[nc] = f;
                X.tf[nc] = L->tf[i];
                X.tb[nc] = L->tb[i];
                X.amp[nc] = L->amp[i];
                X.mem[nc] = L->mem[i];
            }
        free(L->k);
        free(L->first);
        free(L->tf);
        free(L->tb);
        free(L->amp);
        free(L->mem);
        *L = X;
    }
    return true;
}

/* Candidates, pricing and the decomposition, for a search in a root window
 * of w GPUs (exact: with first ranks); false (err) if a layer has no
 * candidate. */
static bool ctx_init(ctx *c, const plan_problem *p, plan_strategy s, double alpha, double beta,
                     int w, bool exact, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->s = s;
    c->alpha = alpha;
    c->beta = beta;
    c->need_t = !(alpha == 1 && beta == 0);
    c->n = p->nlayers;
    c->G = p->cluster.gpus;
    c->gpn = p->cluster.gpus_per_node > 0 ? p->cluster.gpus_per_node : 1;
    c->concurrency = s == PS_BURST;
    c->L = plan_xcalloc((size_t)c->n + 2, sizeof(lay));
    c->kc = plan_xcalloc((size_t)c->n + 2, sizeof(int));
    c->first = plan_xcalloc((size_t)c->n + 2, sizeof(int));
    c->root_w = w;
    c->exact = exact;
    if (!make_candidates(c, err, errlen))
        return false;
    if (exact && !expand_ranks(c, w)) {
        snprintf(err, errlen, "a layer needs more than %d GPUs", w);
        return false;
    }
    int nk = 0, *ks = plan_xcalloc((size_t)c->G + 2, sizeof(int));
    bool *seen = plan_xcalloc((size_t)c->G + 2, sizeof(bool));
    for (int l = 0; l < c->n; l++)
        for (int i = 0; i < c->L[l].nc; i++)
            if (!seen[c->L[l].k[i]]) {
                seen[c->L[l].k[i]] = true;
                ks[nk++] = c->L[l].k[i];
            }
    plan_pricer_init(&c->pr, p, ks, nk);
    free(ks);
    int maxnc = 1;
    for (int l = 0; l < c->n; l++)
        maxnc = c->L[l].nc > maxnc ? c->L[l].nc : maxnc;
    c->fscr[0] = plan_xcalloc((size_t)maxnc, sizeof(int));
    c->fscr[1] = plan_xcalloc((size_t)maxnc, sizeof(int));
    intern_lists(c);
    free(seen);
    bool sp = plan_sp_build(p, &c->sp);
    c->tn = c->sp.tn;
    c->ntn = c->sp.ntn;
    c->root = sp ? c->sp.root : -1;
    c->kmax_in = plan_xcalloc((size_t)c->ntn + 1, sizeof(int));
    c->conc_in = plan_xcalloc((size_t)c->ntn + 1, sizeof(bool));
    for (int t = 0; t < c->ntn; t++) {
        const plan_tnode *T = &c->tn[t];
        if (T->kind == PLAN_TN_SERIES) {
            const lay *M = &c->L[T->mid];
            int k = M->k[M->nc - 1];
            k = k > c->kmax_in[T->a] ? k : c->kmax_in[T->a];
            c->kmax_in[t] = k > c->kmax_in[T->b] ? k : c->kmax_in[T->b];
            c->conc_in[t] = c->conc_in[T->a] || c->conc_in[T->b];
        } else if (T->kind == PLAN_TN_PARALLEL) {
            int m = 0;
            for (int x = c->sp.kid_head[t]; x >= 0; x = c->sp.kid_next[x]) {
                m += c->tn[x].interior;
                if (c->kmax_in[x] > c->kmax_in[t])
                    c->kmax_in[t] = c->kmax_in[x];
                c->conc_in[t] |= c->conc_in[x];
            }
            c->conc_in[t] |= c->concurrency && m >= 2 && m <= MAXB;
        }
    }
    /* which ends are read only in the node's window (end_restricted):
     * parents first (children have lower ids) */
    c->rest_u = plan_xcalloc((size_t)c->ntn + 1, sizeof(bool));
    c->rest_v = plan_xcalloc((size_t)c->ntn + 1, sizeof(bool));
    for (int t = c->ntn - 1; t >= 0; t--) {
        const plan_tnode *T = &c->tn[t];
        if (T->kind == PLAN_TN_SERIES) {
            c->rest_u[T->a] = c->rest_u[t];
            c->rest_v[T->a] = true;
            c->rest_u[T->b] = true;
            c->rest_v[T->b] = c->rest_v[t];
        } else if (T->kind == PLAN_TN_PARALLEL) {
            block B;
            block_of(c, t, &B);
            for (int x = c->sp.kid_head[t]; x >= 0; x = c->sp.kid_next[x]) {
                c->rest_u[x] = !B.concurrent && c->rest_u[t];
                c->rest_v[x] = !B.concurrent && c->rest_v[t];
            }
        }
    }
    return true;
}

/* Runs the search; fills kc and first. False if no plan fits (an infinite
 * optimum). */
static bool run(ctx *c)
{
    if (c->root < 0) {
        heuristic(c);
        return true;
    }
    table *r = solve(c);
    if (r->s[0] == INFINITY)
        return false;
    reconstruct(c);
    return true;
}

/* The plan in c as counts and first ranks, evaluated and placed. */
static bool finish(ctx *c, plan_result *out, char *err, size_t errlen)
{
    int *k = plan_xcalloc((size_t)c->n + 1, sizeof(int));
    for (int l = 0; l < c->n; l++)
        k[l] = c->L[l].k[c->kc[l]];
    bool ok = plan_evaluate(c->p, k, c->first, out, err, errlen);
    free(k);
    if (!ok)
        return false;
    out->strategy = c->s;
    out->found_by = c->s;
    out->objective = c->alpha * out->time + c->beta * out->gpu_seconds;
    return true;
}

/*
 * A lower bound of the objective of any plan on at most w GPUs: every layer
 * at its cheapest count up to w with no communication, a block's branches
 * as if concurrent when they may be. INFINITY if a layer has no count up
 * to w.
 */
static double bound_within(ctx *c, int w)
{
    double *tmin = plan_xcalloc((size_t)c->n + 2, sizeof(double)), gsum = 0;
    for (int l = 0; l < c->n; l++) {
        const lay *L = &c->L[l];
        double t = INFINITY, g = INFINITY;
        for (int i = 0; i < L->nc && L->k[i] <= w; i++) {
            double x = L->tf[i] + L->tb[i];
            t = fmin(t, x);
            g = fmin(g, x * L->k[i]);
        }
        if (t == INFINITY) {
            free(tmin);
            return INFINITY;
        }
        tmin[l] = t;
        gsum += g;
    }
    double T = 0;
    if (c->root < 0) {
        for (int l = 0; l < c->n; l++)
            T += tmin[l];
    } else {
        double *v = plan_xcalloc((size_t)c->ntn + 1, sizeof(double));
        for (int t = 0; t < c->ntn; t++) {
            const plan_tnode *N = &c->tn[t];
            if (N->kind == PLAN_TN_SERIES) {
                v[t] = v[N->a] + tmin[N->mid] + v[N->b];
            } else if (N->kind == PLAN_TN_PARALLEL && !c->sp.absorbed[t]) {
                block B;
                block_of(c, t, &B);
                for (int x = c->sp.kid_head[t]; x >= 0; x = c->sp.kid_next[x])
                    v[t] = B.concurrent ? fmax(v[t], v[x]) : v[t] + v[x];
            }
        }
        T = v[c->root];
        free(v);
    }
    free(tmin);
    return c->alpha * T + c->beta * gsum;
}

/* One search in a root window of w GPUs; out gets the plan, or keeps the
 * better of it and the plan already there (have). *bound: a lower bound of
 * any plan on EXACT_GPUS GPUs (coarse search only). */
static bool search_one(const plan_problem *p, plan_strategy s, double alpha, double beta, int w,
                       bool exact, plan_result *out, bool have, double *bound, char *err,
                       size_t errlen)
{
    ctx c;
    plan_result r;
    bool ok = ctx_init(&c, p, s, alpha, beta, w, exact, err, errlen);
    if (ok && bound)
        *bound = bound_within(&c, EXACT_GPUS);
    ok = ok && run(&c) && finish(&c, &r, err, errlen);
    ctx_free(&c);
    if (!ok)
        return have;
    if (have && !(r.objective < out->objective)) {
        plan_result_free(&r);
        return true;
    }
    if (have)
        plan_result_free(out);
    *out = r;
    return true;
}

/* dp and pow2: their plans from rank 0. burst: the exact search on up to
 * EXACT_GPUS GPUs and, on more, the coarse search on all of them; the better
 * plan. Running the exact search on the first EXACT_GPUS of a larger
 * cluster too makes the space for G GPUs include the one for G - 1; it is
 * skipped when no plan on EXACT_GPUS GPUs can beat the coarse one. */
static bool search(const plan_problem *p, plan_strategy s, double alpha, double beta,
                   plan_result *out, char *err, size_t errlen)
{
    int G = p->cluster.gpus;
    bool ok = false;
    double bound = -INFINITY;
    if (s != PS_BURST || G > EXACT_GPUS)
        ok = search_one(p, s, alpha, beta, G, false, out, ok, &bound, err, errlen);
    if (s == PS_BURST && !(ok && bound >= out->objective)) {
        char err2[512];
        bool ok2 = search_one(p, s, alpha, beta, G < EXACT_GPUS ? G : EXACT_GPUS, true, out, ok,
                              NULL, ok ? err2 : err, ok ? sizeof err2 : errlen);
        ok = ok || ok2;
    }
    if (!ok && !err[0])
        snprintf(err, errlen, "no plan fits");
    return ok;
}

/* The busiest rank's memory must fit too (the DP checked single layers). */
static bool check_memory(const plan_problem *p, plan_result *out, char *err, size_t errlen)
{
    if (!(p->cluster.mem_bytes > 0) || out->peak_mem <= p->cluster.mem_bytes)
        return true;
    int big = 0;
    double bigb = -1;
    for (int l = 0; l < out->nlayers; l++) {
        const plan_layer_result *lr = &out->layer[l];
        if (out->peak_mem_rank >= lr->first && out->peak_mem_rank < lr->first + lr->k &&
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

bool plan_solve_weighted(const plan_problem *p, plan_strategy s, double time_weight,
                         double gpu_weight, plan_result *out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    memset(out, 0, sizeof *out);
    if (!search(p, s, time_weight, gpu_weight, out, err, errlen))
        return false;
    if (!plan_tie_layers(p, out, err, errlen)) {
        plan_result_free(out);
        return false;
    }
    if (!check_memory(p, out, err, errlen))
        return false;
    /* The DP's objective is the evaluator's; the plan is reported at what
     * its schedule achieves. */
    if (!plan_price_schedule(p, out, err, errlen)) {
        plan_result_free(out);
        return false;
    }
    out->objective = time_weight * out->time + gpu_weight * out->gpu_seconds;
    return true;
}

void plan_result_free(plan_result *r)
{
    free(r->layer);
    memset(r, 0, sizeof *r);
}

bool plan_is_series_parallel(const plan_problem *p)
{
    plan_sp sp;
    bool ok = plan_sp_build(p, &sp);
    plan_sp_free(&sp);
    return ok;
}
