/*
 * random_problem.h: random planning problems for the planner's tests: layers
 * with costs over three orders of magnitude, clusters of one or two nodes,
 * chains, series-parallel graphs with blocks whose branches can run
 * concurrently, and DAGs that are not series-parallel. Layers are numbered
 * in topological order.
 */
#ifndef PLANNER_RANDOM_PROBLEM_H
#define PLANNER_RANDOM_PROBLEM_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"

static unsigned long long rng_state = 88172645463325252ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int irand(int lo, int hi)
{
    return lo + (int)(urand() * (hi - lo + 1));
}

#define MAXL 12

typedef struct inst {
    plan_problem p;
    plan_layer layers[MAXL];
    plan_edge edges[4 * MAXL];
    char names[MAXL][16];
} inst;

static void random_layer(inst *in, int i)
{
    plan_layer *l = &in->layers[i];
    snprintf(in->names[i], sizeof in->names[i], "l%d", i);
    l->name = in->names[i];
    l->cls = (plan_class)irand(0, 2);
    l->fwd_flops = pow(10, 6 + 3 * urand());
    l->bwd_flops = 2 * l->fwd_flops;
    l->fwd_elems = pow(10, 3 + 3 * urand());
    l->bwd_elems = 2 * l->fwd_elems;
    l->params = urand() < 0.3 ? 0 : pow(10, 3 + 5 * urand());
    l->saved = l->fwd_elems / 2;
    l->fwd_kernels = 1;
    l->bwd_kernels = 2;
    l->measured = NULL;
}

/* G GPUs in nodes of gpn. */
static void random_cluster(inst *in, int G, int gpn)
{
    plan_cluster *c = &in->p.cluster;
    c->gpus = G;
    c->gpus_per_node = gpn;
    c->intra_alpha = 1e-6 * (1 + 9 * urand());
    c->intra_bw = pow(10, 10 + 1.5 * urand());
    c->inter_alpha = 1e-5 * (1 + 9 * urand());
    c->inter_bw = pow(10, 9 + 1.5 * urand());
    c->peak_flops = 1e13;
    c->mem_bw = 1e12;
    c->launch = 5e-6;
    in->p.batch = irand(1, 16);
    in->p.dtype_bytes = 4;
    in->p.optimizer_states = 1;
    in->p.amp_limit = urand() < 0.5 ? 0 : 1 + 2 * urand();
}

static void add_edge(inst *in, int u, int v)
{
    for (int e = 0; e < in->p.nedges; e++)
        if (in->edges[e].from == u && in->edges[e].to == v)
            return;
    in->edges[in->p.nedges++] = (plan_edge){u, v, pow(10, 3 + 3 * urand())};
}

static void finish(inst *in, int n)
{
    in->p.nlayers = n;
    in->p.layers = in->layers;
    in->p.edges = in->edges;
    for (int i = 0; i < n; i++)
        random_layer(in, i);
}

static inline void make_chain(inst *in, int n)
{
    for (int i = 0; i + 1 < n; i++)
        add_edge(in, i, i + 1);
    finish(in, n);
}

/*
 * A series-parallel graph of n layers (n >= 2) with at least one block of
 * two or more branches that have layers: optional layers before, a fork
 * (or none: the branches start at the graph's inputs), 2 or 3 branches of
 * one or two layers (one may be empty: a skip edge), a join (or none), then
 * optional layers after.
 */
static inline void make_concurrent(inst *in, int n)
{
    int next = 0, pre = -1;
    int budget = n;
    bool fork = budget >= 3 && urand() < 0.7;
    if (fork) {
        if (budget >= 5 && urand() < 0.3) {
            pre = next++;
            budget--;
        }
        int f = next++;
        if (pre >= 0)
            add_edge(in, pre, f);
        pre = f;
        budget--;
    }
    bool join = budget >= 3 && urand() < 0.7;
    int for_branches = budget - join;
    int nb = for_branches >= 3 && urand() < 0.4 ? 3 : 2;
    int ends[3];
    int left = for_branches;
    for (int b = 0; b < nb; b++) {
        int want = b == nb - 1 ? left : (left - (nb - 1 - b) >= 2 && urand() < 0.3 ? 2 : 1);
        if (want > 2)
            want = 2;
        int first = next, last = -1;
        for (int i = 0; i < want; i++) {
            int l = next++;
            if (last >= 0)
                add_edge(in, last, l);
            last = l;
        }
        if (pre >= 0)
            add_edge(in, pre, first);
        ends[b] = last;
        left -= want;
    }
    /* layers left over: a chain after the join */
    int tail = -1;
    if (join) {
        tail = next++;
        for (int b = 0; b < nb; b++)
            add_edge(in, ends[b], tail);
        if (fork && urand() < 0.3)
            add_edge(in, pre, tail); /* a skip edge beside the branches */
    }
    while (next < n) {
        int l = next++;
        if (tail >= 0)
            add_edge(in, tail, l);
        else
            for (int b = 0; b < nb; b++)
                add_edge(in, ends[b], l);
        tail = l;
    }
    finish(in, n);
}

static inline void make_dag(inst *in, int n)
{
    for (int v = 1; v < n; v++)
        for (int u = 0; u < v; u++)
            if (urand() < 0.45)
                add_edge(in, u, v);
    finish(in, n);
}

/* One of the three shapes in turn (shape 0, 1, 2: a chain of 1-8 layers, concurrent
 * branches of 3-10, a DAG of 2-7). */
static inline void make_shape(inst *in, int shape)
{
    if (shape == 0)
        make_chain(in, irand(1, 8));
    else if (shape == 1)
        make_concurrent(in, irand(3, 10));
    else
        make_dag(in, irand(2, 7));
}

/* Random background jobs for the multiplexing tests: one or two, each of 1-4
 * ops (a unit per op forward and backward, and the update), every unit from
 * 1e-3 to 1e-1 of the foreground's time T0, batch 1-64. */
typedef struct random_bg {
    int n;
    plan_bg_job jobs[2];
    double units[2][9];
} random_bg;

static inline void random_bg_jobs(random_bg *b, double T0)
{
    b->n = irand(1, 2);
    for (int j = 0; j < b->n; j++) {
        int ops = irand(1, 4);
        for (int u = 0; u < 2 * ops + 1; u++)
            b->units[j][u] = T0 * pow(10, -3 + 2 * urand());
        b->jobs[j] = (plan_bg_job){
            .name = "bg", .nunits = 2 * ops + 1, .unit = b->units[j], .batch = irand(1, 64)};
    }
}

#endif
