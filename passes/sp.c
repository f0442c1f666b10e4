/*
 * sp.c: the series-parallel decomposition of a plan's layer graph.
 *
 * The layer graph, between a virtual source (before every layer without
 * inputs) and a virtual sink (after every layer without users), is reduced
 * by two rules until one edge source -> sink is left: *series* -- a layer
 * with one edge in and one edge out is absorbed into an edge between its
 * neighbours; *parallel* -- two edges with the same ends become one. Each
 * reduction makes a node of the decomposition tree; the planner's DP
 * (planner.c) and its evaluator run over that tree. A graph that does not
 * reduce to one edge is not series-parallel.
 *
 * The reduction is a worklist over layers in topological order, with a hash
 * of the live edges by their ends, so it takes time linear in the graph and
 * folds a chain from the source (every table of a chain has one row). Tree
 * nodes are numbered children first, so a loop over ids visits children
 * before parents: nothing here or in the planner recurses over the tree.
 * Nested parallel nodes with the same ends are one block with a list of
 * branches (the planner may run any grouping of them concurrently).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct xedge {
    int u, v, tn;
    bool live;
} xedge;

/* Edge lists of one vertex: ids into the edge table, dead ones skipped. */
typedef struct elist {
    int n, cap;
    int *e;
} elist;

typedef struct reducer {
    plan_sp *sp;
    xedge *x;
    int nx, capx, nlive;
    elist *in, *out;
    int *nin, *nout; /* live degrees */
    int64_t *hkey;   /* (u, v) -> slot; value hval: the live edge or -1 */
    int *hval;
    size_t hmask;
    int *work, nwork, capwork;
    bool *queued;
} reducer;

static void elist_push(elist *l, int e)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 2;
        l->e = plan_xrealloc(l->e, (size_t)l->cap, sizeof(int));
    }
    l->e[l->n++] = e;
}

static int tn_new(plan_sp *sp, plan_tnode t)
{
    if (sp->ntn == sp->captn) {
        sp->captn = sp->captn ? 2 * sp->captn : 64;
        sp->tn = plan_xrealloc(sp->tn, (size_t)sp->captn, sizeof(plan_tnode));
    }
    sp->tn[sp->ntn] = t;
    return sp->ntn++;
}

static size_t slot_of(reducer *r, int u, int v)
{
    int64_t key = (int64_t)u * ((int64_t)1 << 32) + v;
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & r->hmask;
    while (r->hkey[i] != -1 && r->hkey[i] != key)
        i = (i + 1) & r->hmask;
    r->hkey[i] = key;
    return i;
}

static void push_work(reducer *r, int m)
{
    if (r->queued[m])
        return;
    r->queued[m] = true;
    if (r->nwork == r->capwork) {
        r->capwork = r->capwork ? 2 * r->capwork : 64;
        r->work = plan_xrealloc(r->work, (size_t)r->capwork, sizeof(int));
    }
    r->work[r->nwork++] = m;
}

/* Adds an edge u -> v for tree node tn; an edge with the same ends becomes
 * their parallel composition (and u, v lose one degree each). */
static void add_edge(reducer *r, int u, int v, int tn)
{
    size_t s = slot_of(r, u, v);
    int old = r->hval[s];
    if (old >= 0) {
        xedge *x = &r->x[old];
        plan_tnode a = r->sp->tn[x->tn], b = r->sp->tn[tn];
        x->tn = tn_new(r->sp, (plan_tnode){PLAN_TN_PARALLEL, u, v, -1, x->tn, tn, -1,
                                           a.interior || b.interior});
        push_work(r, v);
        push_work(r, u);
        return;
    }
    if (r->nx == r->capx) {
        r->capx *= 2;
        r->x = plan_xrealloc(r->x, (size_t)r->capx, sizeof(xedge));
    }
    r->x[r->nx] = (xedge){u, v, tn, true};
    r->hval[s] = r->nx;
    elist_push(&r->out[u], r->nx);
    elist_push(&r->in[v], r->nx);
    r->nout[u]++;
    r->nin[v]++;
    r->nx++;
    r->nlive++;
}

static int live_edge(reducer *r, elist *l)
{
    for (int i = 0; i < l->n; i++)
        if (r->x[l->e[i]].live)
            return l->e[i];
    return -1;
}

static void kill_edge(reducer *r, int e)
{
    xedge *x = &r->x[e];
    x->live = false;
    r->nout[x->u]--;
    r->nin[x->v]--;
    r->hval[slot_of(r, x->u, x->v)] = -1;
    r->nlive--;
}

bool plan_sp_build(const plan_problem *p, plan_sp *sp)
{
    memset(sp, 0, sizeof *sp);
    int n = p->nlayers, S = n, T = n + 1, nv = n + 2;
    sp->n = n;
    sp->root = -1;
    reducer r = {.sp = sp};
    r.capx = p->nedges + 2 * n + 4;
    r.x = plan_xcalloc((size_t)r.capx, sizeof(xedge));
    r.in = plan_xcalloc((size_t)nv, sizeof(elist));
    r.out = plan_xcalloc((size_t)nv, sizeof(elist));
    r.nin = plan_xcalloc((size_t)nv, sizeof(int));
    r.nout = plan_xcalloc((size_t)nv, sizeof(int));
    r.queued = plan_xcalloc((size_t)nv, sizeof(bool));
    size_t hs = 16;
    while (hs < 2 * ((size_t)p->nedges + 2 * (size_t)n + 4))
        hs *= 2;
    r.hmask = hs - 1;
    r.hkey = plan_xcalloc(hs, sizeof(int64_t));
    r.hval = plan_xcalloc(hs, sizeof(int));
    for (size_t i = 0; i < hs; i++) {
        r.hkey[i] = -1;
        r.hval[i] = -1;
    }
    int *indeg = plan_xcalloc((size_t)nv, sizeof(int)),
        *outdeg = plan_xcalloc((size_t)nv, sizeof(int));
    for (int e = 0; e < p->nedges; e++) {
        outdeg[p->edges[e].from]++;
        indeg[p->edges[e].to]++;
    }
    for (int l = 0; l < n; l++)
        if (indeg[l] == 0)
            add_edge(&r, S, l, tn_new(sp, (plan_tnode){PLAN_TN_LEAF, S, l, -1, -1, -1, -1, false}));
    for (int e = 0; e < p->nedges; e++) {
        int u = p->edges[e].from, v = p->edges[e].to;
        add_edge(&r, u, v, tn_new(sp, (plan_tnode){PLAN_TN_LEAF, u, v, e, -1, -1, -1, false}));
    }
    for (int l = 0; l < n; l++)
        if (outdeg[l] == 0)
            add_edge(&r, l, T, tn_new(sp, (plan_tnode){PLAN_TN_LEAF, l, T, -1, -1, -1, -1, false}));
    free(indeg);
    free(outdeg);
    /* Layers in topological order (popped lowest first); a layer whose
	 * degrees drop is pushed again. */
    for (int l = n - 1; l >= 0; l--)
        push_work(&r, l);
    while (r.nwork > 0) {
        int m = r.work[--r.nwork];
        r.queued[m] = false;
        if (m >= n || r.nin[m] != 1 || r.nout[m] != 1)
            continue;
        int e1 = live_edge(&r, &r.in[m]), e2 = live_edge(&r, &r.out[m]);
        int u = r.x[e1].u, v = r.x[e2].v;
        int t = tn_new(sp, (plan_tnode){PLAN_TN_SERIES, u, v, -1, r.x[e1].tn, r.x[e2].tn, m, true});
        kill_edge(&r, e1);
        kill_edge(&r, e2);
        free(r.in[m].e);
        free(r.out[m].e);
        r.in[m] = r.out[m] = (elist){0, 0, NULL};
        add_edge(&r, u, v, t);
    }
    /* Parallel nodes with the same ends form one block: its branches are
	 * the non-parallel nodes below, in a list (concatenation is O(1)). */
    sp->kid_head = plan_xcalloc((size_t)sp->ntn, sizeof(int));
    sp->kid_next = plan_xcalloc((size_t)sp->ntn, sizeof(int));
    sp->nkids = plan_xcalloc((size_t)sp->ntn, sizeof(int));
    sp->absorbed = plan_xcalloc((size_t)sp->ntn, sizeof(bool));
    int *tail = plan_xcalloc((size_t)sp->ntn, sizeof(int));
    for (int t = 0; t < sp->ntn; t++) {
        sp->kid_next[t] = -1;
        sp->kid_head[t] = tail[t] = -1;
        const plan_tnode *T = &sp->tn[t];
        if (T->kind != PLAN_TN_PARALLEL)
            continue;
        int side[2] = {T->a, T->b};
        for (int q = 0; q < 2; q++) {
            int x = side[q], h = x, tl = x, nk = 1;
            if (sp->tn[x].kind == PLAN_TN_PARALLEL) {
                sp->absorbed[x] = true;
                h = sp->kid_head[x];
                tl = tail[x];
                nk = sp->nkids[x];
            }
            if (sp->kid_head[t] < 0)
                sp->kid_head[t] = h;
            else
                sp->kid_next[tail[t]] = h;
            tail[t] = tl;
            sp->nkids[t] += nk;
        }
    }
    free(tail);
    bool ok = false;
    if (r.nlive == 1) {
        int e = live_edge(&r, &r.out[S]);
        ok = e >= 0 && r.x[e].v == T;
        if (ok)
            sp->root = r.x[e].tn;
    }
    for (int v = 0; v < nv; v++) {
        free(r.in[v].e);
        free(r.out[v].e);
    }
    free(r.in);
    free(r.out);
    free(r.nin);
    free(r.nout);
    free(r.queued);
    free(r.hkey);
    free(r.hval);
    free(r.work);
    free(r.x);
    return ok;
}

void plan_sp_free(plan_sp *sp)
{
    free(sp->tn);
    free(sp->kid_head);
    free(sp->kid_next);
    free(sp->nkids);
    free(sp->absorbed);
    memset(sp, 0, sizeof *sp);
}
