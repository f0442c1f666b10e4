/*
 * listsched.c: the list scheduler, which orders one iteration's entries by
 * readiness and critical path with the planner's durations (docs/plan.md,
 * "The schedule").
 *
 * schedule.c's rule gives one valid order (graph order forward, its reverse
 * backward); its timeline (timeline.c) gives every entry's ranks and
 * durations. This file reorders those entries into the order that the
 * ideal schedule plays fastest as far as a greedy choice sees it: it plays
 * the timeline's own rules (a compute op runs on each of its ranks when the
 * rank's previous op is done; an exchange or all-reduce starts when every
 * rank taking part has reached it and its communication stream is free; a
 * reshard's start does not hold the rank, its wait does) while it builds
 * the list, and at every step appends, of the entries whose predecessors
 * are all in the list, the one that can start earliest, ties to the longest
 * path to the iteration's end (then to the rule's order). Starts are not
 * choices: a reshard's start (either way) goes right after its producer,
 * those of one producer longest path first, and a layer's all-reduce
 * starts right after its backward's exchanges (where the IR's allreduce
 * says it starts, docs/ir.md); the waits and the compute are. So a fork rank
 * posts branch B's reshard before it runs all of branch A, and the backward
 * runs each branch's gradient as soon as it is there.
 *
 * What must stay before what (the dependences, from the rule's order):
 *   - forward: a layer after the waits of the reshards into it and after
 *     its producers on the same ranks; a reshard's start after its
 *     producer, its wait after its start; the loss sum after every forward;
 *   - backward: every entry after the loss sum; a reshard's gradient start
 *     after its consumer's backward, its wait after its start; the
 *     contributions to one gradient (a consumer's backward on the
 *     producer's ranks, a gradient exchange's wait, which adds it) in the
 *     rule's order, one after the other, and the producer's backward after
 *     the last: the sums are added in one fixed order, so the program
 *     computes bit for bit what the rule's order computes; an all-reduce's
 *     start after its layer's backward; the all-reduces' waits last, in the
 *     order they started (the optimizer's step).
 * The result is one list that every rank follows, so every pair of ranks
 * posts its exchanges in one order (the verifier's no-deadlock proof holds
 * for any such list). Ranks that play one role (timeline.c) are one: they
 * run the same ops with the same durations. Quadratic in the entries ready
 * at once, linear in the roles each one takes part in.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct dep_lists {
    int *head, *next, *to, n, cap;
} dep_lists;

static void add_dep(dep_lists *d, int from, int to, int *indeg)
{
    if (from < 0 || from == to)
        return;
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 256;
        d->next = plan_xrealloc(d->next, (size_t)d->cap, sizeof(int));
        d->to = plan_xrealloc(d->to, (size_t)d->cap, sizeof(int));
    }
    d->to[d->n] = to;
    d->next[d->n] = d->head[from];
    d->head[from] = d->n++;
    indeg[to]++;
}

void plan_schedule_list(const plan_timeline *tl, plan_schedule *s)
{
    const plan_problem *p = tl->p;
    int n = s->n, nl = p->nlayers, ne = p->nedges, G = tl->ncls;
    if (n != tl->nops || n < 2)
        return;
    int *fwd_at = plan_xcalloc((size_t)nl + 1, sizeof(int));
    int *bwd_at = plan_xcalloc((size_t)nl + 1, sizeof(int));
    int *start_at = plan_xcalloc((size_t)ne + 1, sizeof(int));
    int *wait_at = plan_xcalloc((size_t)ne + 1, sizeof(int));
    int *sbwd_at = plan_xcalloc((size_t)ne + 1, sizeof(int));
    int *touch = plan_xcalloc((size_t)nl + 1, sizeof(int)); /* last contribution so far */
    for (int l = 0; l < nl; l++)
        fwd_at[l] = bwd_at[l] = touch[l] = -1;
    for (int e = 0; e < ne; e++)
        start_at[e] = wait_at[e] = sbwd_at[e] = -1;
    int loss_at = -1;
    for (int x = 0; x < n; x++) {
        const plan_sched_entry *en = &s->e[x];
        switch (en->kind) {
        case PSK_FWD: fwd_at[en->layer] = x; break;
        case PSK_BWD: bwd_at[en->layer] = x; break;
        case PSK_START: start_at[en->edge] = x; break;
        case PSK_WAIT: wait_at[en->edge] = x; break;
        case PSK_START_BWD: sbwd_at[en->edge] = x; break;
        case PSK_LOSS: loss_at = x; break;
        default: break;
        }
    }
    /* The edges into each layer. */
    int *in0 = plan_xcalloc((size_t)nl + 2, sizeof(int));
    int *ine = plan_xcalloc((size_t)ne + 1, sizeof(int));
    for (int e = 0; e < ne; e++)
        in0[p->edges[e].to + 2]++;
    for (int v = 0; v < nl; v++)
        in0[v + 2] += in0[v + 1];
    for (int e = 0; e < ne; e++)
        ine[in0[p->edges[e].to + 1]++] = e;

    dep_lists d = {plan_xcalloc((size_t)n, sizeof(int)), NULL, NULL, 0, 0};
    for (int x = 0; x < n; x++)
        d.head[x] = -1;
    int *indeg = plan_xcalloc((size_t)n, sizeof(int));
    bool *last = plan_xcalloc((size_t)n, sizeof(bool)); /* all-reduce waits: at the end */
    for (int x = 0; x < n; x++) {
        const plan_sched_entry *en = &s->e[x];
        switch (en->kind) {
        case PSK_FWD:
            for (int q = in0[en->layer]; q < in0[en->layer + 1]; q++) {
                int e = ine[q];
                add_dep(&d, start_at[e] >= 0 ? wait_at[e] : fwd_at[p->edges[e].from], x, indeg);
            }
            break;
        case PSK_START: add_dep(&d, fwd_at[p->edges[en->edge].from], x, indeg); break;
        case PSK_WAIT: add_dep(&d, start_at[en->edge], x, indeg); break;
        case PSK_LOSS:
            for (int l = 0; l < nl; l++)
                add_dep(&d, fwd_at[l], x, indeg);
            break;
        case PSK_BWD:
            add_dep(&d, loss_at, x, indeg);
            add_dep(&d, touch[en->layer], x, indeg);
            /* Its contributions to its producers' gradients on its ranks. */
            for (int q = in0[en->layer]; q < in0[en->layer + 1]; q++) {
                int e = ine[q], u = p->edges[e].from;
                if (start_at[e] < 0) {
                    add_dep(&d, touch[u], x, indeg);
                    touch[u] = x;
                }
            }
            break;
        case PSK_START_BWD: add_dep(&d, bwd_at[en->layer], x, indeg); break;
        case PSK_WAIT_BWD: {
            int u = p->edges[en->edge].from;
            add_dep(&d, sbwd_at[en->edge], x, indeg);
            add_dep(&d, touch[u], x, indeg);
            touch[u] = x;
            break;
        }
        case PSK_AR_START: add_dep(&d, bwd_at[en->layer], x, indeg); break;
        case PSK_AR_WAIT: last[x] = true; break;
        }
    }

    /* The longest path from each entry to the end (the rule's order is a
     * topological one: every dependence points forward in it). */
    double *bl = plan_xcalloc((size_t)n, sizeof(double));
    for (int x = n - 1; x >= 0; x--) {
        const plan_tl_op *o = &tl->op[x];
        double m = 0;
        for (int a = d.head[x]; a >= 0; a = d.next[a])
            m = fmax(m, bl[d.to[a]]);
        bl[x] = m + (o->kind == PTL_WAIT ? 0 : o->dur);
    }

    double *cpu = plan_xcalloc((size_t)G + 1, sizeof(double));
    double *cs = plan_xcalloc((size_t)G + 1, sizeof(double));
    double *end = plan_xcalloc((size_t)n, sizeof(double));
    int *ready = plan_xcalloc((size_t)n, sizeof(int)), nready = 0;
    int *order = plan_xcalloc((size_t)n, sizeof(int)), no = 0;
    for (int x = 0; x < n; x++)
        if (indeg[x] == 0 && !last[x])
            ready[nready++] = x;
    while (nready > 0) {
        int best = 0;
        if (nready > 1) {
            double best_t = INFINITY;
            int best_c = 3;
            for (int i = 0; i < nready; i++) {
                int x = ready[i];
                const plan_tl_op *o = &tl->op[x];
                const int *pp = &tl->cpart[o->cpart0];
                /* Starts right after their producer, the all-reduce after
                 * the layer's gradient exchanges. */
                int c = o->kind == PTL_RESHARD_FWD || o->kind == PTL_RESHARD_BWD ? 0
                        : o->kind == PTL_ALLREDUCE                               ? 1
                                                                                 : 2;
                double t = 0;
                if (c < 2)
                    t = -1;
                else if (o->kind == PTL_WAIT)
                    t = end[o->of];
                else if (o->kind == PTL_FWD || o->kind == PTL_BWD)
                    for (int q = 0; q < o->ncparts; q++)
                        t = fmax(t, cpu[pp[q]]);
                else
                    for (int q = 0; q < o->ncparts; q++)
                        t = fmax(t, fmax(cpu[pp[q]], cs[pp[q]]));
                int b = ready[best];
                if (c < best_c ||
                    (c == best_c && (t < best_t || (t == best_t && (bl[x] > bl[b] ||
                                                                    (bl[x] == bl[b] && x < b)))))) {
                    best = i;
                    best_t = t;
                    best_c = c;
                }
            }
        }
        int x = ready[best];
        ready[best] = ready[--nready];
        order[no++] = x;
        /* Play it as plan_timeline_schedule does. */
        const plan_tl_op *o = &tl->op[x];
        const int *pp = &tl->cpart[o->cpart0];
        if (o->kind == PTL_FWD || o->kind == PTL_BWD) {
            for (int q = 0; q < o->ncparts; q++)
                cpu[pp[q]] += o->dur;
        } else if (o->kind == PTL_WAIT) {
            for (int q = 0; q < o->ncparts; q++)
                cpu[pp[q]] = fmax(cpu[pp[q]], end[o->of]);
        } else {
            double t = 0;
            for (int q = 0; q < o->ncparts; q++)
                t = fmax(t, fmax(cpu[pp[q]], cs[pp[q]]));
            end[x] = t + o->dur;
            for (int q = 0; q < o->ncparts; q++) {
                cs[pp[q]] = end[x];
                if (!o->async)
                    cpu[pp[q]] = end[x];
            }
        }
        for (int a = d.head[x]; a >= 0; a = d.next[a])
            if (--indeg[d.to[a]] == 0 && !last[d.to[a]])
                ready[nready++] = d.to[a];
    }
    /* The all-reduces' waits, in the order of their starts. */
    int *ar_wait = plan_xcalloc((size_t)nl + 1, sizeof(int));
    for (int x = 0; x < n; x++)
        if (last[x])
            ar_wait[s->e[x].layer] = x;
    for (int i = 0, m = no; i < m; i++)
        if (s->e[order[i]].kind == PSK_AR_START)
            order[no++] = ar_wait[s->e[order[i]].layer];
    if (no != n) {
        fprintf(stderr,
                "burstc: internal error: %s:%d: the list schedule placed %d of %d entries\n",
                __FILE__, __LINE__, no, n);
        exit(2);
    }
    plan_sched_entry *ne2 = plan_xcalloc((size_t)n + 1, sizeof(plan_sched_entry));
    for (int i = 0; i < n; i++)
        ne2[i] = s->e[order[i]];
    free(s->e);
    s->e = ne2;

    free(ar_wait);
    free(cpu);
    free(cs);
    free(end);
    free(ready);
    free(order);
    free(bl);
    free(last);
    free(indeg);
    free(d.head);
    free(d.next);
    free(d.to);
    free(in0);
    free(ine);
    free(fwd_at);
    free(bwd_at);
    free(start_at);
    free(wait_at);
    free(sbwd_at);
    free(touch);
}
