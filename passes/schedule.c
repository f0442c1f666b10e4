/*
 * schedule.c: the order of work of one training iteration of a placed plan,
 * the one source of truth for what every rank runs (docs/ir.md, "Schedule").
 *
 * The schedule is one list of entries in an order every rank follows: each
 * rank runs the entries it takes part in, in list order (a layer's forward
 * and backward on its ranks; both phases of a reshard on the ranks that send
 * or receive samples in it; an all-reduce's start and wait on the layer's
 * ranks; the loss sum on every rank). This file gives the rule's order;
 * listsched.c reorders it with the planner's durations (plan_schedule_make
 * in timeline.c), and three readers follow that and nothing else: the schedule pass (schedule_ir.c) writes it into the IR as each
 * rank's program, codegen emits that program, and the timeline
 * (timeline.c) that the simulator, the interleave pass and the planner's
 * price play is built from it.
 *
 * The order is the split-phase one (docs/runtime.md). Forward: the layers in
 * order; before a layer the waits of the reshards that deliver its inputs
 * (in input order), after it the starts of the reshards of its value (in
 * the order of their consumers, then input order). Then the loss sum.
 * Backward, over the program's points in reverse (each reshard sits right
 * before its consumer, in input order, as the comm pass inserts it): a
 * reshard's gradient exchange starts right after its consumer's backward and
 * is waited for right before the next point in backward order that touches
 * its operand's gradient: the operand's previous user (a layer reading it on
 * the same ranks, or another reshard of it), else the operand's own
 * backward. A layer with parameters on more than one rank starts its
 * gradient all-reduce right after its backward; every all-reduce is waited
 * for at the end, before the optimizer's step. Nothing between a start and
 * its wait reads or writes the buffers in flight, and the contributions to
 * a gradient are still added in one fixed order (backward order), so the
 * program computes bit for bit what a blocking one does.
 *
 * Edges between layers with the same count and first rank move nothing and
 * have no entries. Data (inputs) are not layers of the planning problem: the
 * schedule pass adds the exchanges of input data that the IR holds. Linear
 * in the layers and edges.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

const char *plan_sched_kind_name(plan_sched_kind k)
{
    switch (k) {
    case PSK_FWD: return "fwd";
    case PSK_BWD: return "bwd";
    case PSK_START: return "start";
    case PSK_WAIT: return "wait";
    case PSK_START_BWD: return "start.bwd";
    case PSK_WAIT_BWD: return "wait.bwd";
    case PSK_AR_START: return "start";
    case PSK_AR_WAIT: return "wait";
    case PSK_LOSS: return "loss";
    }
    return "?";
}

bool plan_edge_moves(const plan_problem *p, const plan_result *r, int e)
{
    const plan_layer_result *lu = &r->layer[p->edges[e].from], *lv = &r->layer[p->edges[e].to];
    return lu->k != lv->k || lu->first != lv->first;
}

void plan_schedule_free(plan_schedule *s)
{
    free(s->e);
    memset(s, 0, sizeof *s);
}

void plan_schedule_build(const plan_problem *p, const plan_result *r, plan_schedule *s)
{
    bool *moves = plan_xcalloc((size_t)p->nedges + 1, sizeof(bool));
    bool *ar = plan_xcalloc((size_t)p->nlayers + 1, sizeof(bool));
    for (int e = 0; e < p->nedges; e++)
        moves[e] = plan_edge_moves(p, r, e);
    for (int l = 0; l < p->nlayers; l++)
        ar[l] = r->layer[l].k > 1 && p->layers[l].params > 0;
    plan_sched_graph g = {p->nlayers, p->nedges, p->edges, moves, ar};
    plan_schedule_order(&g, s);
    free(moves);
    free(ar);
}

void plan_schedule_order(const plan_sched_graph *p, plan_schedule *s)
{
    int n = p->nlayers, ne = p->nedges;
    memset(s, 0, sizeof *s);
    /* Edges into each layer in edge order (the IR's input order). */
    int *in0 = plan_xcalloc((size_t)n + 2, sizeof(int));
    int *ine = plan_xcalloc((size_t)ne + 1, sizeof(int));
    for (int e = 0; e < ne; e++)
        in0[p->edges[e].to + 2]++;
    for (int v = 0; v < n; v++)
        in0[v + 2] += in0[v + 1];
    for (int e = 0; e < ne; e++)
        ine[in0[p->edges[e].to + 1]++] = e;
    /* The reshards in program order: by consumer, then input order. */
    int *rs = plan_xcalloc((size_t)ne + 1, sizeof(int)), nr = 0;
    int *rs_of_edge = plan_xcalloc((size_t)ne + 1, sizeof(int));
    for (int e = 0; e < ne; e++)
        rs_of_edge[e] = -1;
    for (int v = 0; v < n; v++)
        for (int q = in0[v]; q < in0[v + 1]; q++)
            if (p->moves[ine[q]]) {
                rs_of_edge[ine[q]] = nr;
                rs[nr++] = ine[q];
            }
    /* Program points: the reshards into layer v (in order), then v; at[x] is
     * the layer v at point x, or ~i for reshard rs[i]. */
    int *pos_l = plan_xcalloc((size_t)n + 1, sizeof(int));
    int *at = plan_xcalloc((size_t)(n + nr) + 1, sizeof(int));
    for (int v = 0, i = 0, x = 0; v < n; v++) {
        for (; i < nr && p->edges[rs[i]].to == v; i++)
            at[x++] = ~i;
        pos_l[v] = x;
        at[x++] = v;
    }
    /* The backward wait of each reshard: the point of its operand's previous
     * user, else the operand's own. Users reading on the same ranks are the
     * edges that move nothing. Lists per point, in program order. */
    int np = n + nr;
    int *last_user = plan_xcalloc((size_t)n + 1, sizeof(int));
    for (int u = 0; u < n; u++)
        last_user[u] = -1;
    int *bw_head = plan_xcalloc((size_t)np + 1, sizeof(int));
    int *bw_next = plan_xcalloc((size_t)nr + 1, sizeof(int));
    int *bw_pt = plan_xcalloc((size_t)nr + 1, sizeof(int));
    for (int x = 0; x < np; x++) {
        if (at[x] < 0) {
            int i = ~at[x], u = p->edges[rs[i]].from;
            bw_pt[i] = last_user[u] >= 0 ? last_user[u] : pos_l[u];
            last_user[u] = x;
            continue;
        }
        int v = at[x];
        for (int q = in0[v]; q < in0[v + 1]; q++)
            if (rs_of_edge[ine[q]] < 0)
                last_user[p->edges[ine[q]].from] = x;
    }
    for (int x = 0; x < np; x++)
        bw_head[x] = -1;
    for (int i = nr - 1; i >= 0; i--) {
        bw_next[i] = bw_head[bw_pt[i]];
        bw_head[bw_pt[i]] = i;
    }
    /* Forward starts per producer, in program order. */
    int *fs_head = plan_xcalloc((size_t)n + 1, sizeof(int));
    int *fs_next = plan_xcalloc((size_t)nr + 1, sizeof(int));
    for (int v = 0; v < n; v++)
        fs_head[v] = -1;
    for (int i = nr - 1; i >= 0; i--) {
        int u = p->edges[rs[i]].from;
        fs_next[i] = fs_head[u];
        fs_head[u] = i;
    }

    int nar = 0;
    for (int v = 0; v < n; v++)
        nar += p->allreduce[v];
    s->e = plan_xcalloc((size_t)(2 * n + 4 * nr + 2 * nar + 1), sizeof(plan_sched_entry));
#define PUT(kd, l, ed) (s->e[s->n++] = (plan_sched_entry){(kd), (l), (ed)})
    for (int v = 0, i = 0; v < n; v++) {
        for (; i < nr && p->edges[rs[i]].to == v; i++)
            PUT(PSK_WAIT, v, rs[i]);
        PUT(PSK_FWD, v, -1);
        for (int j = fs_head[v]; j >= 0; j = fs_next[j])
            PUT(PSK_START, p->edges[rs[j]].to, rs[j]);
    }
    PUT(PSK_LOSS, -1, -1);
    int *ar_order = plan_xcalloc((size_t)nar + 1, sizeof(int)), nao = 0;
    for (int x = np - 1; x >= 0; x--) {
        for (int j = bw_head[x]; j >= 0; j = bw_next[j])
            PUT(PSK_WAIT_BWD, p->edges[rs[j]].to, rs[j]);
        if (at[x] < 0)
            continue;
        int v = at[x];
        PUT(PSK_BWD, v, -1);
        /* The reshards into v are the points right before it. */
        int first_in = x;
        while (first_in > 0 && at[first_in - 1] < 0)
            first_in--;
        for (int y = first_in; y < x; y++)
            PUT(PSK_START_BWD, v, rs[~at[y]]);
        if (p->allreduce[v]) {
            PUT(PSK_AR_START, v, -1);
            ar_order[nao++] = v;
        }
    }
    for (int i = 0; i < nao; i++)
        PUT(PSK_AR_WAIT, ar_order[i], -1);
#undef PUT
    free(ar_order);
    free(rs);
    free(pos_l);
    free(at);
    free(last_user);
    free(bw_head);
    free(bw_next);
    free(bw_pt);
    free(in0);
    free(ine);
    free(rs_of_edge);
    free(fs_head);
    free(fs_next);
}
