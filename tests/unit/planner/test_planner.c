/*
 * test_planner.c: the planner's DP against brute-force enumeration on random
 * chains and series-parallel graphs (the optimum must be equal), the
 * heuristic's gap on other DAGs, and known cases: perfect scaling with free
 * communication (burst equals dp), no amplification allowance (one GPU per
 * layer), memory errors, the frontier, pow2 never beating burst.
 */
#include <string.h>

#include "check.h"
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

#define MAXL 8

typedef struct inst {
    plan_problem p;
    plan_layer layers[MAXL];
    plan_edge edges[4 * MAXL];
} inst;

static void random_layer(plan_layer *l, int i)
{
    static char names[MAXL][16];
    snprintf(names[i], sizeof names[i], "l%d", i);
    l->name = names[i];
    l->cls = (plan_class)irand(0, 2);
    l->fwd_flops = pow(10, 6 + 3 * urand());
    l->bwd_flops = 2 * l->fwd_flops;
    l->fwd_elems = pow(10, 3 + 3 * urand());
    l->bwd_elems = 2 * l->fwd_elems;
    l->params = urand() < 0.3 ? 0 : pow(10, 3 + 5 * urand());
    l->saved = l->fwd_elems / 2;
    l->fwd_kernels = 1;
    l->bwd_kernels = 2;
}

static void random_cluster(inst *in)
{
    plan_cluster *c = &in->p.cluster;
    c->gpus = irand(1, 8);
    static const int gpn[] = {1, 2, 4, 8};
    c->gpus_per_node = gpn[irand(0, 3)];
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
    in->edges[in->p.nedges++] = (plan_edge){u, v, pow(10, 3 + 3 * urand())};
}

static void finish(inst *in, int n)
{
    in->p.nlayers = n;
    in->p.layers = in->layers;
    in->p.edges = in->edges;
    for (int i = 0; i < n; i++)
        random_layer(&in->layers[i], i);
}

static void make_chain(inst *in)
{
    memset(in, 0, sizeof *in);
    random_cluster(in);
    int n = irand(1, 6);
    for (int i = 0; i + 1 < n; i++)
        add_edge(in, i, i + 1);
    finish(in, n);
}

/* A series of units; a unit is a layer or a block fork -> {branches} -> join
 * where a branch is empty (a direct edge), a layer, a chain of two layers or
 * (once) a nested block. Layers are numbered in creation order, which is
 * topological. */
static int gen_seq(inst *in, int *next, int budget, int entry, int depth);

static int gen_block(inst *in, int *next, int budget, int entry, int depth)
{
    /* entry is the fork; returns the join */
    int nb = irand(2, 3);
    int ends[3], nends = 0;
    int left = budget - 1; /* keep one layer for the join */
    for (int b = 0; b < nb; b++) {
        int use = left > 0 ? irand(0, left < 3 ? left : 3) : 0;
        if (use == 0) {
            ends[nends++] = entry;
            continue;
        }
        int before = *next;
        int last = gen_seq(in, next, use, entry, depth + 1);
        left -= *next - before;
        ends[nends++] = last;
    }
    int join = (*next)++;
    for (int i = 0; i < nends; i++)
        add_edge(in, ends[i], join);
    return join;
}

static int gen_seq(inst *in, int *next, int budget, int entry, int depth)
{
    int cur = entry, used = 0;
    while (used < budget) {
        int before = *next;
        if (budget - used >= 3 && depth < 2 && urand() < 0.5 && cur >= 0) {
            cur = gen_block(in, next, budget - used - 0, cur, depth);
        } else {
            int l = (*next)++;
            if (cur >= 0)
                add_edge(in, cur, l);
            cur = l;
        }
        used += *next - before;
    }
    return cur;
}

static void make_sp(inst *in)
{
    memset(in, 0, sizeof *in);
    random_cluster(in);
    int next = 0;
    gen_seq(in, &next, irand(3, 6), -1, 0);
    /* drop duplicate edges (an empty branch twice) */
    int m = 0;
    for (int e = 0; e < in->p.nedges; e++) {
        bool dup = false;
        for (int f = 0; f < m; f++)
            if (in->edges[f].from == in->edges[e].from && in->edges[f].to == in->edges[e].to)
                dup = true;
        if (!dup)
            in->edges[m++] = in->edges[e];
    }
    in->p.nedges = m;
    finish(in, next);
}

static void make_dag(inst *in)
{
    memset(in, 0, sizeof *in);
    random_cluster(in);
    int n = irand(4, 6);
    for (int v = 1; v < n; v++)
        for (int u = 0; u < v; u++)
            if (urand() < 0.45)
                add_edge(in, u, v);
    finish(in, n);
}

static int n_checked, n_sp, n_conc;

static void compare(inst *in, plan_strategy s, const char *what, int idx)
{
    plan_result r;
    char err[256];
    bool ok = plan_solve(&in->p, s, &r, err, sizeof err);
    double bf = plan_brute_force(&in->p, s);
    if (!ok) {
        CHECK(bf == INFINITY);
        return;
    }
    double got = plan_objective(&in->p, &r);
    if (!(fabs(got - bf) <= 1e-9 * fmax(got, bf))) {
        fprintf(stderr, "%s #%d (%s): dp %.12g brute force %.12g (G=%d B=%lld n=%d)\n", what, idx,
                plan_strategy_name(s), got, bf, in->p.cluster.gpus, (long long)in->p.batch,
                in->p.nlayers);
        check_failures++;
    }
    n_checked++;
    n_sp += r.exact;
    n_conc += r.nconcurrent > 0;
    plan_result_free(&r);
}

static void test_random(void)
{
    inst in;
    for (int i = 0; i < 150; i++) {
        make_chain(&in);
        in.p.price = urand() < 0.5 ? 0 : pow(10, -6 + 4 * urand());
        for (int s = 0; s < PS_COUNT; s++)
            if (s != PS_DEEPPOOL) /* DeepPool's greedy search, test_deeppool.c */
                compare(&in, (plan_strategy)s, "chain", i);
    }
    for (int i = 0; i < 200; i++) {
        make_sp(&in);
        CHECK(plan_is_series_parallel(&in.p));
        in.p.price = 0;
        compare(&in, PS_BURST, "series-parallel", i);
        compare(&in, PS_POW2, "series-parallel", i);
    }
    printf("DP = brute force on %d instances (%d series-parallel, %d with concurrent branches)\n",
           n_checked, n_sp, n_conc);
    CHECK(n_checked >= 200);
    CHECK(n_conc > 0);

    /* The heuristic on DAGs that are not series-parallel: report the gap. */
    int ndag = 0, nexact = 0;
    double worst = 0, sum = 0;
    for (int i = 0; i < 400 && ndag < 100; i++) {
        make_dag(&in);
        if (plan_is_series_parallel(&in.p))
            continue;
        plan_result r;
        char err[256];
        if (!plan_solve(&in.p, PS_BURST, &r, err, sizeof err))
            continue;
        double got = plan_objective(&in.p, &r), bf = plan_brute_force(&in.p, PS_BURST);
        CHECK(!r.exact);
        CHECK(got >= bf * (1 - 1e-12));
        double gap = got / bf - 1;
        if (gap > worst)
            worst = gap;
        sum += gap;
        nexact += gap < 1e-9;
        ndag++;
        plan_result_free(&r);
    }
    printf(
        "heuristic on %d non-series-parallel DAGs: optimal on %d, mean gap %.3f%%, worst gap %.3f%%\n",
        ndag, nexact, 100 * sum / (ndag ? ndag : 1), 100 * worst);
    CHECK(ndag >= 50);
    CHECK(worst < 0.25);
}

static void vgg_like(inst *in, int G, int64_t B)
{
    memset(in, 0, sizeof *in);
    plan_cluster *c = &in->p.cluster;
    c->gpus = G;
    c->gpus_per_node = 8;
    c->intra_alpha = 5e-6;
    c->intra_bw = 150e9;
    c->inter_alpha = 20e-6;
    c->inter_bw = 25e9;
    c->peak_flops = 156e12;
    c->mem_bw = 1.5e12;
    c->launch = 5e-6;
    in->p.batch = B;
    in->p.dtype_bytes = 4;
    in->p.optimizer_states = 1;
    int n = 6;
    for (int i = 0; i < n; i++) {
        random_layer(&in->layers[i], i);
        in->layers[i].cls = i < 4 ? PC_CONV : PC_LINEAR;
        in->layers[i].fwd_flops = i < 4 ? 3e9 / (i + 1) : 2e8;
        in->layers[i].bwd_flops = 2 * in->layers[i].fwd_flops;
        in->layers[i].params = i < 4 ? 1e5 * (i + 1) : 1e8;
        if (i + 1 < n)
            add_edge(in, i, i + 1);
    }
    in->p.nlayers = n;
    in->p.layers = in->layers;
    in->p.edges = in->edges;
}

static void test_known(void)
{
    inst in;
    char err[256];
    /* Perfect scaling, free communication: burst is dp. */
    plan_util saved[PC_COUNT];
    memcpy(saved, plan_util_curve, sizeof saved);
    for (int i = 0; i < PC_COUNT; i++)
        plan_util_curve[i] = (plan_util){1, 0, 1, 1};
    vgg_like(&in, 8, 64);
    in.p.cluster.launch = 0;
    in.p.cluster.mem_bw = 1e30;
    in.p.cluster.intra_alpha = in.p.cluster.inter_alpha = 0;
    in.p.cluster.intra_bw = in.p.cluster.inter_bw = 1e30;
    for (int i = 0; i < in.p.nlayers; i++)
        in.layers[i].params = 0;
    plan_result dp, burst;
    CHECK(plan_solve(&in.p, PS_DP, &dp, err, sizeof err));
    CHECK(plan_solve(&in.p, PS_BURST, &burst, err, sizeof err));
    CHECK_NEAR(burst.time, dp.time, 1e-12);
    for (int l = 0; l < burst.nlayers; l++)
        CHECK(burst.layer[l].k == 8 && dp.layer[l].k == 8);
    plan_result_free(&dp);
    plan_result_free(&burst);
    memcpy(plan_util_curve, saved, sizeof saved);

    /* No amplification allowance: one GPU per layer. */
    vgg_like(&in, 8, 64);
    in.p.amp_limit = 1.0;
    for (int s = PS_POW2; s <= PS_BURST; s++) {
        plan_result r;
        CHECK(plan_solve(&in.p, (plan_strategy)s, &r, err, sizeof err));
        for (int l = 0; l < r.nlayers; l++)
            CHECK(r.layer[l].k == 1);
        plan_result_free(&r);
    }

    /* dp uses all GPUs; with G > B it uses B. */
    vgg_like(&in, 16, 12);
    plan_result r;
    CHECK(plan_solve(&in.p, PS_DP, &r, err, sizeof err));
    for (int l = 0; l < r.nlayers; l++)
        CHECK(r.layer[l].k == 12 && r.layer[l].shard == 1);
    CHECK_NEAR(r.gpu_seconds, 12 * r.time, 1e-9);
    plan_result_free(&r);

    /* Burst is never slower than pow2 at the same limit, on any layout. */
    for (int i = 0; i < 40; i++) {
        vgg_like(&in, irand(2, 64), irand(8, 256));
        in.p.amp_limit = urand() < 0.3 ? 0 : 1.2 + 2 * urand();
        plan_result a, b;
        CHECK(plan_solve(&in.p, PS_POW2, &a, err, sizeof err));
        CHECK(plan_solve(&in.p, PS_BURST, &b, err, sizeof err));
        CHECK(b.time <= a.time * (1 + 1e-12));
        for (int l = 0; l < b.nlayers; l++)
            if (in.p.amp_limit > 0)
                CHECK(b.layer[l].amplification <= in.p.amp_limit * (1 + 1e-9));
        plan_result_free(&a);
        plan_result_free(&b);
    }

    /* Memory: a layer that cannot fit is named with its bytes. */
    vgg_like(&in, 8, 64);
    in.p.cluster.mem_bytes = 1e9;
    in.layers[4].params = 1e9; /* 4 GB of weights, x3 with gradients and momentum */
    in.layers[4].saved = 0;
    CHECK(!plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    CHECK(strstr(err, "layer 'l4'") && strstr(err, "12000000000 bytes"));
    /* Each layer fits alone, but not all of them on one rank. */
    vgg_like(&in, 8, 64);
    in.p.cluster.mem_bytes = 2.5e9;
    for (int i = 0; i < in.p.nlayers; i++) {
        in.layers[i].params = 5e7; /* 600 MB each with gradients and momentum */
        in.layers[i].saved = 0;
    }
    CHECK(!plan_solve(&in.p, PS_DP, &r, err, sizeof err));
    CHECK(strstr(err, "rank 0 needs 3600000000 bytes") != NULL);

    /* The frontier: sorted by time, GPU-seconds falling, ends at the
	 * unconstrained optimum. */
    vgg_like(&in, 32, 256);
    plan_point pts[64];
    int np = plan_frontier(&in.p, pts, 64);
    CHECK(np >= 2);
    for (int i = 1; i < np; i++)
        CHECK(pts[i].time >= pts[i - 1].time && pts[i].gpu_seconds < pts[i - 1].gpu_seconds);
    CHECK(plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    CHECK_NEAR(pts[0].time, r.time, 1e-12);
    plan_result_free(&r);

    /* Global GPU-time budget: the plan respects it. */
    in.p.gpu_budget = 1.5;
    CHECK(plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    double one = 0, f, b;
    for (int l = 0; l < in.p.nlayers; l++) {
        plan_layer_time(&in.p, &in.layers[l], in.p.batch, &f, &b);
        one += f + b;
    }
    CHECK(r.gpu_seconds <= 1.5 * one * (1 + 1e-9));
    plan_result_free(&r);
}

int main(void)
{
    test_random();
    test_known();
    return check_done("test_planner");
}
