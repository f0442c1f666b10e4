/*
 * timeline.c: one training iteration of a placed plan as every rank's
 * program, with the planner's durations, and its ideal schedule.
 *
 * The programs are the plan's schedule (plan_schedule_make below: the rule
 * of schedule.c, reordered by the list scheduler, listsched.c, with these
 * durations), the order the schedule pass writes into the IR and codegen
 * emits: every entry one op (a reshard's
 * or an all-reduce's start the communication itself, its wait a PTL_WAIT
 * naming it), each rank running the ops it takes part in. A rank runs the
 * layers it is in, takes part in the reshards it sends or receives samples
 * in, and skips the rest. Every duration is the planner's cost model:
 * compute from costmodel.c at the largest shard (and each rank's own shard
 * recorded beside it), reshards and all-reduces from commcost.c, exactly the
 * numbers evaluate.c adds up.
 *
 * The ideal schedule (no contention) walks the ops in order: a compute op
 * starts on a rank when the rank's previous op is done and takes the layer's
 * time; a communication op starts when every rank taking part has posted it
 * (and its communication stream is free: exchanges run in the order they are
 * posted). A reshard's start does not hold the rank, its wait holds it until
 * the exchange is over; an all-reduce holds its ranks from its start unless
 * ar_overlap; the sum of the loss takes plan_loss_sum_time (0 unless ranks
 * share cores) on every rank. One pass, linear in the steps.
 *
 * Ranks that play the same role (take part in the same ops, with the same
 * own shard times) start every op at the same moment: by induction over the
 * ops, their compute and communication streams are free at the same times.
 * So the timeline keeps one program, schedule and list of windows per role,
 * not per rank; GPT-2 XL's plan on 4,096 GPUs has a handful of roles, not
 * 4,096 programs of ~1,500 steps.
 * From it come every rank's idle windows, each anchored at the program
 * point where it ends. The simulator (sim/) plays the same programs; the
 * interleave pass puts background work into the windows. docs/sim.md has
 * how this schedule relates to plan_evaluate's time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

int plan_reshard_pairs(int64_t B, int r1, int k1, int r2, int k2, plan_tl_pair *pairs)
{
    /* The walk of plan_reshard_count (commcost.c) over the merged shard
	 * boundaries of both splits. */
    int64_t q1 = B / k1, m1 = B % k1, q2 = B / k2, m2 = B % k2;
    int i = 0, j = 0, n = 0;
    int64_t pos = 0, e1 = q1 + (m1 > 0), e2 = q2 + (m2 > 0);
    while (pos < B) {
        int64_t end = e1 < e2 ? e1 : e2;
        if (end > pos && r1 + i != r2 + j) {
            if (pairs)
                pairs[n] = (plan_tl_pair){r1 + i, r2 + j, end - pos};
            n++;
        }
        pos = end;
        if (end == e1) {
            i++;
            e1 += q1 + (i < m1);
        }
        if (end == e2) {
            j++;
            e2 += q2 + (j < m2);
        }
    }
    return n;
}

const char *plan_tl_kind_name(plan_tl_kind k)
{
    switch (k) {
    case PTL_FWD: return "forward";
    case PTL_BWD: return "backward";
    case PTL_ALLREDUCE: return "allreduce";
    case PTL_RESHARD_FWD: return "reshard";
    case PTL_RESHARD_BWD: return "reshard.bwd";
    case PTL_LOSS_SUM: return "loss.sum";
    case PTL_WAIT: return "wait";
    }
    return "?";
}

const char *plan_tl_wait_name(plan_tl_wait w)
{
    switch (w) {
    case PTW_PEER: return "peer";
    case PTW_COMM: return "comm";
    case PTW_SHARD: return "shard";
    case PTW_END: return "end";
    }
    return "?";
}

void plan_tl_op_name(const plan_timeline *tl, int op, char *buf, size_t n)
{
    const plan_tl_op *o = &tl->op[op];
    const plan_problem *p = tl->p;
    switch (o->kind) {
    case PTL_FWD: snprintf(buf, n, "%s", p->layers[o->layer].name); break;
    case PTL_BWD: snprintf(buf, n, "%s.bwd", p->layers[o->layer].name); break;
    case PTL_ALLREDUCE: snprintf(buf, n, "%s.allreduce", p->layers[o->layer].name); break;
    case PTL_RESHARD_FWD:
    case PTL_RESHARD_BWD:
        snprintf(buf, n, "%s.to.%s%s", p->layers[p->edges[o->edge].from].name,
                 p->layers[o->layer].name, o->kind == PTL_RESHARD_BWD ? ".bwd" : "");
        break;
    case PTL_LOSS_SUM: snprintf(buf, n, "loss.sum"); break;
    case PTL_WAIT: {
        char of[256];
        plan_tl_op_name(tl, o->of, of, sizeof of);
        snprintf(buf, n, "%s.wait", of);
        break;
    }
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static bool is_compute(plan_tl_kind k)
{
    return k == PTL_FWD || k == PTL_BWD;
}

void plan_timeline_free(plan_timeline *tl)
{
    free(tl->op);
    free(tl->pair);
    free(tl->part);
    free(tl->prog0);
    free(tl->step);
    free(tl->win);
    free(tl->win0);
    free(tl->cls);
    free(tl->rep);
    free(tl->csize);
    free(tl->cpart);
    memset(tl, 0, sizeof *tl);
}

plan_tl_step *plan_tl_prog(const plan_timeline *tl, int g, int64_t *n)
{
    int c = tl->cls[g];
    *n = tl->prog0[c + 1] - tl->prog0[c];
    return &tl->step[tl->prog0[c]];
}

const plan_tl_window *plan_tl_windows(const plan_timeline *tl, int g, int64_t *n)
{
    int c = tl->cls[g];
    *n = tl->win0[c + 1] - tl->win0[c];
    return &tl->win[tl->win0[c]];
}

/* A compute op's ranks are its layer's, in shard order: the first B mod k
 * shards are one sample larger, the rest take their own (shorter) time. */
static int small_from(const plan_timeline *tl, const plan_tl_op *o)
{
    return is_compute(o->kind) && tl->p->batch % o->k ? (int)(tl->p->batch % o->k) : o->nparts;
}

/* Rank ranges already seen (first, k): open addressing over the ops. */
typedef struct range_slot {
    int64_t key; /* first * (G + 1) + k + 1; 0: empty */
    int split;   /* the roles were split by it: 1 by taking part, 2 also by shard side */
    int64_t cpart0;
    int ncparts; /* -1: its roles not listed yet */
} range_slot;

static range_slot *range_find(range_slot *t, int64_t mask, int64_t key)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    for (int64_t i = (int64_t)(h >> 20) & mask;; i = (i + 1) & mask) {
        if (t[i].key == key || t[i].key == 0) {
            if (t[i].key == 0)
                t[i] = (range_slot){key, 0, 0, -1};
            return &t[i];
        }
    }
}

/* An op's ranks are a range (its layer's, or all of them for the loss sum). */
static bool is_range(plan_tl_kind k)
{
    return k == PTL_FWD || k == PTL_BWD || k == PTL_ALLREDUCE || k == PTL_LOSS_SUM;
}

/* The roles (plan_timeline's cls): partition refinement by the ops' rank
 * sets. Every rank starts in one role; each set splits every role into the
 * ranks in it (those with the larger shard apart from the others) and the
 * rest. The result depends only on the family of sets, so each distinct set
 * is applied once: a layer's backward and all-reduce have its forward's
 * ranges, most layers of a large plan share one range, a reshard's gradient
 * has its forward's ranks, a wait its op's, and the loss sum (all ranks)
 * splits nothing. Linear in the ranks of the distinct sets; ids are fresh at
 * every split and renumbered at the end by first rank. */
static void make_roles(plan_timeline *tl, bool share)
{
    int G = tl->G;
    tl->cls = plan_xcalloc((size_t)G, sizeof(int));
    int64_t mask = 1;
    while (mask < 2 * (int64_t)tl->nops + 2)
        mask <<= 1;
    range_slot *ranges = plan_xcalloc((size_t)mask, sizeof(range_slot));
    mask--;
    int nid = 1;
    if (!share) {
        for (int g = 0; g < G; g++)
            tl->cls[g] = g;
        nid = G;
    } else {
        const plan_problem *p = tl->p;
        bool *edge_done = plan_xcalloc((size_t)p->nedges + 1, sizeof(bool));
        int64_t cap = 2 * (int64_t)G + 2;
        int *stamp = malloc(sizeof(int) * (size_t)cap), *to = malloc(sizeof(int) * (size_t)cap);
        if (!stamp || !to)
            plan_xcalloc(SIZE_MAX / 2, 2); /* the allocator's out-of-memory exit */
        for (int64_t i = 0; i < cap; i++)
            stamp[i] = -1;
        for (int x = 0; x < tl->nops; x++) {
            const plan_tl_op *o = &tl->op[x];
            if (o->kind == PTL_WAIT)
                continue;
            int m = small_from(tl, o);
            if (is_range(o->kind)) {
                int need = m < o->nparts ? 2 : 1;
                if (need == 1 && o->first == 0 && o->k == G)
                    continue;
                range_slot *rs = range_find(ranges, mask, (int64_t)o->first * (G + 1) + o->k + 1);
                if (rs->split >= need)
                    continue;
                rs->split = need;
            } else {
                if (edge_done[o->edge])
                    continue;
                edge_done[o->edge] = true;
            }
            for (int i = 0; i < o->nparts; i++) {
                int g = tl->part[o->part0 + i];
                int64_t key = 2 * (int64_t)tl->cls[g] + (i >= m);
                if (stamp[key] != x) {
                    stamp[key] = x;
                    if (2 * (int64_t)nid + 2 > cap) {
                        int64_t nc = 2 * cap;
                        stamp = realloc(stamp, sizeof(int) * (size_t)nc);
                        to = realloc(to, sizeof(int) * (size_t)nc);
                        if (!stamp || !to)
                            plan_xcalloc(SIZE_MAX / 2, 2);
                        for (int64_t j = cap; j < nc; j++)
                            stamp[j] = -1;
                        cap = nc;
                    }
                    to[key] = nid++;
                }
                tl->cls[g] = to[key];
            }
        }
        /* Renumber by first rank. */
        for (int64_t i = 0; i < cap; i++)
            stamp[i] = -1;
        int n = 0;
        for (int g = 0; g < G; g++) {
            int c = tl->cls[g];
            if (stamp[c] < 0)
                stamp[c] = n++;
            tl->cls[g] = stamp[c];
        }
        nid = n;
        free(stamp);
        free(to);
        free(edge_done);
    }
    tl->ncls = nid;
    tl->rep = plan_xcalloc((size_t)nid, sizeof(int));
    tl->csize = plan_xcalloc((size_t)nid, sizeof(int));
    for (int g = G - 1; g >= 0; g--) {
        tl->rep[tl->cls[g]] = g;
        tl->csize[tl->cls[g]]++;
    }
    /* Each op's roles, in the order of their first ranks taking part; a
     * range's list is made once, a wait's is its op's. */
    int64_t cap_c = 0;
    for (int x = 0; x < tl->nops; x++)
        cap_c += tl->op[x].nparts < nid ? tl->op[x].nparts : nid;
    tl->cpart = plan_xcalloc((size_t)cap_c + 1, sizeof(int));
    int *seen = malloc(sizeof(int) * (size_t)nid);
    if (!seen)
        plan_xcalloc(SIZE_MAX / 2, 2);
    for (int c = 0; c < nid; c++)
        seen[c] = -1;
    int64_t nc = 0;
    for (int x = 0; x < tl->nops; x++) {
        plan_tl_op *o = &tl->op[x];
        o->cpart0 = nc;
        range_slot *rs = NULL;
        const plan_tl_op *same = o->kind == PTL_WAIT ? &tl->op[o->of] : NULL;
        if (!same && is_range(o->kind)) {
            rs = range_find(ranges, mask, (int64_t)o->first * (G + 1) + o->k + 1);
            if (rs->ncparts >= 0) {
                memcpy(&tl->cpart[nc], &tl->cpart[rs->cpart0], sizeof(int) * (size_t)rs->ncparts);
                nc += rs->ncparts;
                o->ncparts = rs->ncparts;
                continue;
            }
        }
        if (same) {
            memcpy(&tl->cpart[nc], &tl->cpart[same->cpart0], sizeof(int) * (size_t)same->ncparts);
            nc += same->ncparts;
        } else {
            for (int i = 0; i < o->nparts; i++) {
                int c = tl->cls[tl->part[o->part0 + i]];
                if (seen[c] != x) {
                    seen[c] = x;
                    tl->cpart[nc++] = c;
                }
            }
        }
        o->ncparts = (int)(nc - o->cpart0);
        if (rs) {
            rs->cpart0 = o->cpart0;
            rs->ncparts = o->ncparts;
        }
    }
    tl->ncparts = nc;
    free(seen);
    free(ranges);
}

/* The ops in the schedule's order (schedule.c): each entry one op, a start
 * the reshard or all-reduce itself, its wait a PTL_WAIT that names it. */
static void make_ops(plan_timeline *tl, const plan_schedule *sc)
{
    const plan_problem *p = tl->p;
    int *fwd_of = plan_xcalloc((size_t)p->nedges + 1, sizeof(int));
    int *bwd_of = plan_xcalloc((size_t)p->nedges + 1, sizeof(int));
    int *ar_of = plan_xcalloc((size_t)p->nlayers + 1, sizeof(int));
    int no = 0;
    for (int i = 0; i < sc->n; i++) {
        const plan_sched_entry *e = &sc->e[i];
        plan_tl_op o = {.layer = e->layer, .edge = -1, .of = -1};
        switch (e->kind) {
        case PSK_FWD: o.kind = PTL_FWD; break;
        case PSK_BWD: o.kind = PTL_BWD; break;
        case PSK_LOSS: o.kind = PTL_LOSS_SUM; break;
        case PSK_START:
            o.kind = PTL_RESHARD_FWD;
            o.edge = e->edge;
            fwd_of[e->edge] = no;
            break;
        case PSK_START_BWD:
            o.kind = PTL_RESHARD_BWD;
            o.edge = e->edge;
            bwd_of[e->edge] = no;
            break;
        case PSK_AR_START:
            o.kind = PTL_ALLREDUCE;
            ar_of[e->layer] = no;
            break;
        case PSK_WAIT:
        case PSK_WAIT_BWD:
        case PSK_AR_WAIT:
            o.kind = PTL_WAIT;
            o.edge = e->edge;
            o.of = e->kind == PSK_WAIT       ? fwd_of[e->edge]
                   : e->kind == PSK_WAIT_BWD ? bwd_of[e->edge]
                                             : ar_of[e->layer];
            break;
        }
        tl->op[no++] = o;
    }
    tl->nops = no;
    free(fwd_of);
    free(bwd_of);
    free(ar_of);
}

static bool plan_fits(const plan_problem *p, const plan_result *r, char *err, size_t errlen)
{
    int n = p->nlayers, G = p->cluster.gpus;
    int64_t kmax = (int64_t)G < p->batch ? G : p->batch;
    if (G < 1 || r->nlayers != n) {
        snprintf(err, errlen, "the plan has %d layers, the problem %d", r->nlayers, n);
        return false;
    }
    for (int l = 0; l < n; l++) {
        const plan_layer_result *lr = &r->layer[l];
        if (lr->k < 1 || lr->k > kmax || lr->first < 0 || lr->first > G - lr->k) {
            snprintf(err, errlen,
                     "layer '%s': %d GPUs from rank %d do not fit %d GPUs and batch %lld",
                     p->layers[l].name, lr->k, lr->first, G, (long long)p->batch);
            return false;
        }
    }
    return true;
}

/* The timeline of order sc of r's placement of p (which fits), its ranks in
 * shared roles or not; with schedule false its ops and programs only, not
 * their ideal schedule. */
static bool from_schedule(const plan_problem *p, const plan_result *r, const plan_schedule *sc_,
                          bool share, bool schedule, plan_timeline *tl, char *err, size_t errlen)
{
    memset(tl, 0, sizeof *tl);
    tl->p = p;
    int G = p->cluster.gpus;
    tl->G = G;
    const plan_schedule sc = *sc_;
    /* Count messages and steps before allocating any of them. */
    int64_t npairs = 0, nsteps = 0, nlisted = G; /* the ranks' list, then reshards' */
    for (int i = 0; i < sc.n; i++) {
        const plan_sched_entry *e = &sc.e[i];
        if (e->kind == PSK_LOSS) {
            nsteps += G;
        } else if (e->edge >= 0) {
            const plan_layer_result *lu = &r->layer[p->edges[e->edge].from],
                                    *lv = &r->layer[e->layer];
            if (e->kind == PSK_START || e->kind == PSK_START_BWD) {
                npairs += plan_reshard_pairs(p->batch, lu->first, lu->k, lv->first, lv->k, NULL);
                nlisted += (int64_t)lu->k + lv->k;
            }
            nsteps += (int64_t)lu->k + lv->k; /* at most */
        } else {
            nsteps += r->layer[e->layer].k;
        }
    }
    if (nsteps > PLAN_TL_MAX_STEPS || sc.n > (1 << 30) || npairs > (1 << 30)) {
        snprintf(err, errlen,
                 "the timeline of this plan has up to %lld (rank, op) steps, more than the %lld "
                 "the simulator holds",
                 (long long)nsteps, (long long)PLAN_TL_MAX_STEPS);
        return false;
    }
    tl->op = plan_xcalloc((size_t)sc.n + 1, sizeof(plan_tl_op));
    tl->pair = plan_xcalloc((size_t)npairs + 1, sizeof(plan_tl_pair));
    /* tl->part starts with every rank in order: a range's ranks (a layer's,
     * or all for the loss sum) are a slice of it, and a wait's are its op's,
     * so only reshards list their own. */
    tl->part = plan_xcalloc((size_t)nlisted + 1, sizeof(int));
    for (int g = 0; g < G; g++)
        tl->part[g] = g;
    make_ops(tl, &sc);

    /* Durations, messages and the ranks taking part, op by op. */
    int *mark = plan_xcalloc((size_t)G, sizeof(int));
    for (int g = 0; g < G; g++)
        mark[g] = -1;
    int64_t np = G;
    const plan_cluster *c = &p->cluster;
    for (int x = 0; x < tl->nops; x++) {
        plan_tl_op *o = &tl->op[x];
        o->part0 = np;
        if (o->kind == PTL_WAIT) {
            /* The ranks of the op it waits for. */
            const plan_tl_op *w = &tl->op[o->of];
            o->first = w->first;
            o->k = w->k;
            o->part0 = w->part0;
            o->nparts = w->nparts;
            continue;
        } else if (o->kind == PTL_LOSS_SUM) {
            o->first = 0;
            o->k = G;
            o->bytes = 8;
            o->dur = plan_loss_sum_time(c);
            o->part0 = 0;
            o->nparts = G;
            continue;
        } else if (o->kind == PTL_RESHARD_FWD || o->kind == PTL_RESHARD_BWD) {
            const plan_edge *pe = &p->edges[o->edge];
            const plan_layer_result *lu = &r->layer[pe->from], *lv = &r->layer[pe->to];
            o->bytes = pe->elems * p->dtype_bytes;
            plan_reshard rs =
                plan_reshard_count(p->batch, c->gpus_per_node, lu->first, lu->k, lv->first, lv->k);
            o->dur = plan_reshard_time(c, &rs, o->bytes);
            o->async = true;
            o->pair0 = tl->npairs;
            o->npairs = plan_reshard_pairs(p->batch, lu->first, lu->k, lv->first, lv->k,
                                           &tl->pair[tl->npairs]);
            tl->npairs += o->npairs;
            for (int i = 0; i < o->npairs; i++) {
                plan_tl_pair *pr = &tl->pair[o->pair0 + i];
                if (o->kind == PTL_RESHARD_BWD) {
                    int t = pr->src;
                    pr->src = pr->dst;
                    pr->dst = t;
                }
                int ends[2] = {pr->src, pr->dst};
                for (int q = 0; q < 2; q++)
                    if (mark[ends[q]] != x) {
                        mark[ends[q]] = x;
                        tl->part[np++] = ends[q];
                    }
            }
            /* Any order would do (every rank runs the ops in program
			 * order); ascending reads best in traces and tests. */
            qsort(&tl->part[o->part0], (size_t)(np - o->part0), sizeof(int), cmp_int);
        } else {
            const plan_layer_result *lr = &r->layer[o->layer];
            o->first = lr->first;
            o->k = lr->k;
            if (o->kind == PTL_FWD)
                o->dur = lr->fwd;
            else if (o->kind == PTL_BWD)
                o->dur = lr->bwd;
            else {
                o->bytes = p->layers[o->layer].params * p->dtype_bytes;
                o->dur = plan_allreduce_time(c, lr->first, lr->k, o->bytes);
                o->async = p->ar_overlap;
            }
            o->part0 = lr->first;
            o->nparts = lr->k;
            continue;
        }
        o->nparts = (int)(np - o->part0);
    }
    tl->nparts = np;
    free(mark);

    make_roles(tl, share);

    /* Every role's program: the ops it takes part in, in order. */
    int nc = tl->ncls;
    tl->prog0 = plan_xcalloc((size_t)nc + 2, sizeof(int64_t));
    for (int64_t i = 0; i < tl->ncparts; i++)
        tl->prog0[tl->cpart[i] + 2]++;
    for (int c = 0; c < nc; c++)
        tl->prog0[c + 2] += tl->prog0[c + 1];
    tl->step = plan_xcalloc((size_t)tl->ncparts + 1, sizeof(plan_tl_step));
    for (int x = 0; x < tl->nops; x++) {
        const plan_tl_op *o = &tl->op[x];
        /* Own shard times: shard i of a split over k has q + 1 samples for
		 * i < B mod k, else q; the ranks of a compute op are listed in
		 * shard order, and a role's ranks are all on one side. */
        int m = small_from(tl, o);
        double small = o->dur;
        if (m < o->nparts) {
            double f, b;
            plan_layer_time(p, &p->layers[o->layer], p->batch / o->k, &f, &b);
            /* The analytic curve is not monotone in the batch at tiny work
			 * for every class (gamma > 1); the evaluator's rule, the
			 * largest shard sets the time, bounds every shard. */
            double share_ = plan_core_share(&p->cluster, o->first, o->k), sf, sb;
            plan_layer_sync_time(&p->cluster, &p->layers[o->layer], o->first, o->k, &sf, &sb);
            small = fmin(o->kind == PTL_FWD ? f * share_ + sf : b * share_ + sb, o->dur);
        }
        for (int i = 0; i < o->ncparts; i++) {
            int c = tl->cpart[o->cpart0 + i];
            plan_tl_step *s = &tl->step[tl->prog0[c + 1]++];
            s->op = x;
            s->own = tl->rep[c] - o->first >= m && m < o->nparts ? small : o->dur;
        }
    }
    if (schedule)
        plan_timeline_schedule(tl);
    return true;
}

/* plan_schedule_make's order into s and, when tl is not NULL, its timeline
 * into tl: the list scheduler's order, or the rule's where that plays
 * faster (a greedy choice may miss; the rule's order is never beaten). */
static bool make(const plan_problem *p, const plan_result *r, bool share, plan_schedule *s,
                 plan_timeline *tl, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!plan_fits(p, r, err, errlen))
        return false;
    plan_schedule_build(p, r, s);
    plan_timeline t0, t1;
    if (!from_schedule(p, r, s, share, true, &t0, err, errlen)) {
        plan_timeline_free(&t0);
        plan_schedule_free(s);
        return false;
    }
    plan_schedule rule = {s->n, plan_xcalloc((size_t)s->n + 1, sizeof(plan_sched_entry))};
    memcpy(rule.e, s->e, sizeof(plan_sched_entry) * (size_t)s->n);
    plan_schedule_list(&t0, s);
    /* The same ops, reordered: the build cannot fail. */
    from_schedule(p, r, s, share, true, &t1, err, errlen);
    if (t0.time < t1.time) {
        plan_schedule_free(s);
        *s = rule;
        plan_timeline_free(&t1);
        t1 = t0;
    } else {
        plan_schedule_free(&rule);
        plan_timeline_free(&t0);
    }
    if (tl)
        *tl = t1;
    else
        plan_timeline_free(&t1);
    return true;
}

bool plan_schedule_make(const plan_problem *p, const plan_result *r, plan_schedule *s, char *err,
                        size_t errlen)
{
    return make(p, r, true, s, NULL, err, errlen);
}

bool plan_timeline_build(const plan_problem *p, const plan_result *r, plan_timeline *tl, char *err,
                         size_t errlen)
{
    return plan_timeline_build_roles(p, r, true, tl, err, errlen);
}

bool plan_timeline_build_roles(const plan_problem *p, const plan_result *r, bool share,
                               plan_timeline *tl, char *err, size_t errlen)
{
    memset(tl, 0, sizeof *tl);
    tl->p = p;
    tl->G = p->cluster.gpus;
    plan_schedule sc;
    if (!make(p, r, share, &sc, tl, err, errlen))
        return false;
    plan_schedule_free(&sc);
    return true;
}

bool plan_price_schedule(const plan_problem *p, plan_result *r, char *err, size_t errlen)
{
    plan_timeline tl;
    if (!plan_timeline_build(p, r, &tl, err, errlen))
        return false;
    r->eval_time = r->time;
    r->time = tl.time;
    r->objective = r->time + p->price * r->gpu_seconds;
    r->samples_per_s = r->time > 0 ? (double)p->batch / r->time : 0;
    plan_timeline_free(&tl);
    return true;
}

bool plan_timeline_of_schedule(const plan_problem *p, const plan_result *r, const plan_schedule *s,
                               plan_timeline *tl, char *err, size_t errlen)
{
    memset(tl, 0, sizeof *tl);
    if (!plan_fits(p, r, err, errlen))
        return false;
    return from_schedule(p, r, s, true, true, tl, err, errlen);
}

/* A rank's idle windows from its scheduled steps (see plan_tl_window). */
static int64_t rank_windows(const plan_timeline *tl, int c, plan_tl_window *w)
{
    int64_t n = 0, s0 = tl->prog0[c], s1 = tl->prog0[c + 1];
    int g = tl->rep[c];
    double t = 0; /* the rank's compute is busy until t */
#define WIN(st, a, b, y)                                                                        \
    do {                                                                                        \
        if ((b) > (a)) {                                                                        \
            if (w)                                                                              \
                w[n] = (plan_tl_window){                                                        \
                    g, (int)(st), (st) < s1 - s0 ? tl->step[s0 + (st)].op : -1, (y), (a), (b)}; \
            n++;                                                                                \
        }                                                                                       \
    } while (0)
    for (int64_t j = 0; j < s1 - s0; j++) {
        const plan_tl_step *s = &tl->step[s0 + j];
        const plan_tl_op *o = &tl->op[s->op];
        if (is_compute(o->kind)) {
            WIN(j, t, s->start, PTW_PEER);
            WIN(j + 1, s->start + s->own, s->end, PTW_SHARD);
            t = s->end;
        } else if (o->kind == PTL_WAIT) {
            /* Waiting for peers to start the exchange, then for its data. */
            double st = fmax(t, s->start);
            WIN(j, t, st, PTW_PEER);
            WIN(j, st, s->end, PTW_COMM);
            t = fmax(t, s->end);
        } else if (!o->async) {
            WIN(j, t, s->start, PTW_PEER);
            WIN(j, s->start, s->end, PTW_COMM);
            t = s->end;
        }
    }
    WIN(s1 - s0, t, tl->time, PTW_END);
#undef WIN
    return n;
}

void plan_timeline_schedule(plan_timeline *tl)
{
    int G = tl->ncls; /* the roles: each rank of one has its schedule */
    double *cpu = plan_xcalloc((size_t)G, sizeof(double)); /* the rank's program may go on */
    double *cs = plan_xcalloc((size_t)G, sizeof(double));  /* its communication stream is free */
    int64_t *cur = plan_xcalloc((size_t)G, sizeof(int64_t));
    for (int g = 0; g < G; g++)
        cur[g] = tl->prog0[g];
    for (int x = 0; x < tl->nops; x++) {
        plan_tl_op *o = &tl->op[x];
        const int *pp = &tl->cpart[o->cpart0];
        if (is_compute(o->kind)) {
            o->start = INFINITY;
            o->end = 0;
            for (int i = 0; i < o->ncparts; i++) {
                int g = pp[i];
                plan_tl_step *s = &tl->step[cur[g]++];
                s->arrive = s->start = cpu[g];
                s->end = cpu[g] + o->dur;
                cpu[g] = s->end;
                if (tl->bg_shard)
                    cpu[g] = fmax(cpu[g], s->start + s->own + tl->bg_shard[cur[g] - 1]);
                o->start = fmin(o->start, s->start);
                o->end = fmax(o->end, s->end);
            }
            if (o->ncparts == 0)
                o->start = 0;
            continue;
        }
        if (o->kind == PTL_WAIT) {
            /* Each rank goes on once the exchange is over (and the background
             * work placed in its wait is done). */
            const plan_tl_op *w = &tl->op[o->of];
            o->start = w->start;
            o->end = w->end;
            for (int i = 0; i < o->ncparts; i++) {
                int g = pp[i];
                int64_t si = cur[g]++;
                plan_tl_step *s = &tl->step[si];
                s->arrive = cpu[g];
                s->start = w->start;
                s->end = w->end;
                double go = cpu[g] + (tl->bg_peer ? tl->bg_peer[si] : 0);
                if (tl->bg_comm && tl->bg_comm[si] > 0)
                    go = fmax(go, w->start) + tl->bg_comm[si];
                cpu[g] = fmax(cpu[g], fmax(w->end, go));
            }
            continue;
        }
        /* Communication: once every rank taking part is there and its
		 * communication stream is free. */
        double t = 0;
        for (int i = 0; i < o->ncparts; i++) {
            int g = pp[i];
            tl->step[cur[g]].arrive = cpu[g];
            double ready = cpu[g] + (tl->bg_peer ? tl->bg_peer[cur[g]] : 0);
            t = fmax(t, fmax(ready, cs[g]));
        }
        o->start = t;
        o->end = t + o->dur;
        for (int i = 0; i < o->ncparts; i++) {
            int g = pp[i];
            plan_tl_step *s = &tl->step[cur[g]++];
            s->start = o->start;
            s->end = o->end;
            cs[g] = o->end;
            if (!o->async)
                cpu[g] = fmax(o->end, o->start + (tl->bg_comm ? tl->bg_comm[cur[g] - 1] : 0));
        }
    }
    double T = 0;
    for (int g = 0; g < G; g++)
        T = fmax(T, fmax(cpu[g] + (tl->bg_end ? tl->bg_end[g] : 0), cs[g]));
    tl->time = T;
    free(cpu);
    free(cs);
    free(cur);

    free(tl->win);
    free(tl->win0);
    tl->win0 = plan_xcalloc((size_t)G + 1, sizeof(int64_t));
    for (int g = 0; g < G; g++)
        tl->win0[g + 1] = tl->win0[g] + rank_windows(tl, g, NULL);
    tl->nwin = tl->win0[G];
    tl->win = plan_xcalloc((size_t)tl->nwin, sizeof(plan_tl_window));
    for (int g = 0; g < G; g++)
        rank_windows(tl, g, &tl->win[tl->win0[g]]);
}
