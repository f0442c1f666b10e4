/*
 * test_large.c: the largest inputs the language allows (100,000 ops) plan,
 * in seconds and without deep recursion: a chain, a loop of residual blocks
 * (series-parallel, tables with two free ends) and a loop whose skip edges
 * make the graph not series-parallel (the heuristic). Generated here, not
 * checked in. The chain of identical layers has a known optimum: every layer
 * at the count that is cheapest alone, no resharding at all.
 */
#include <string.h>
#include <time.h>

#include "check.h"
#include "plan.h"

enum { N = 100000 };

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cluster(plan_problem *p, int G, int64_t B)
{
    memset(p, 0, sizeof *p);
    plan_cluster *c = &p->cluster;
    c->gpus = G;
    c->gpus_per_node = 8;
    c->intra_alpha = 2e-6;
    c->intra_bw = 300e9;
    c->inter_alpha = 5e-6;
    c->inter_bw = 25e9;
    c->peak_flops = 156e12;
    c->mem_bw = 1.5e12;
    c->launch = 2e-6;
    p->batch = B;
    p->dtype_bytes = 4;
    p->optimizer_states = 1;
}

/* Convolution-sized layers (they scale to many GPUs), every third with
 * weights. */
static void layer(plan_layer *l, int i)
{
    memset(l, 0, sizeof *l);
    l->name = "l";
    l->cls = i % 3 == 0 ? PC_CONV : PC_OTHER;
    l->fwd_flops = i % 3 == 0 ? 4e9 : 4e7;
    l->bwd_flops = 2 * l->fwd_flops;
    l->fwd_elems = 4e5;
    l->bwd_elems = 8e5;
    l->params = i % 3 == 0 ? 65536 : 0;
    l->saved = 2e5;
    l->fwd_kernels = 1;
    l->bwd_kernels = 2;
}

/* Plans p, checks that the reported time is the evaluator's time of the
 * returned counts and ranks, and prints the CPU time. */
static bool plan_and_check(const plan_problem *p, const char *what, plan_result *r)
{
    char err[512];
    double t0 = cpu_s();
    bool ok = plan_solve(p, PS_BURST, r, err, sizeof err);
    double t1 = cpu_s();
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", what, err);
        return false;
    }
    int *k = calloc((size_t)p->nlayers, sizeof(int)),
        *first = calloc((size_t)p->nlayers, sizeof(int));
    for (int l = 0; l < p->nlayers; l++) {
        k[l] = r->layer[l].k;
        first[l] = r->layer[l].first;
    }
    plan_result e;
    CHECK(plan_evaluate(p, k, first, &e, err, sizeof err));
    CHECK_NEAR(e.time, r->time, 1e-9);
    CHECK_NEAR(e.gpu_seconds, r->gpu_seconds, 1e-9);
    plan_result_free(&e);
    free(k);
    free(first);
    printf("%s: %d layers, %d edges, %s, planned in %.2f s CPU (%.3f ms per iteration)\n", what,
           p->nlayers, p->nedges, r->exact ? "series-parallel" : "heuristic", t1 - t0,
           r->time * 1e3);
    return true;
}

int main(void)
{
    plan_problem p;
    plan_layer *ls = calloc(N, sizeof(plan_layer));
    plan_edge *es = calloc(2 * N, sizeof(plan_edge));
    plan_result r;

    /* A chain of identical layers on 64 GPUs. */
    cluster(&p, 64, 256);
    for (int i = 0; i < N; i++) {
        layer(&ls[i], 0);
        if (i > 0)
            es[i - 1] = (plan_edge){i - 1, i, 2e5};
    }
    p.layers = ls;
    p.nlayers = N;
    p.edges = es;
    p.nedges = N - 1;
    if (plan_and_check(&p, "chain", &r)) {
        /* The optimum: each layer alone at its best count, all equal. */
        plan_problem one = p;
        one.nlayers = 1;
        one.nedges = 0;
        double best = INFINITY;
        for (int k = 1; k <= 64; k++) {
            plan_result e;
            char err[256];
            if (plan_evaluate(&one, &k, NULL, &e, err, sizeof err) && e.time < best)
                best = e.time;
            plan_result_free(&e);
        }
        CHECK_NEAR(r.time, N * best, 1e-9);
        for (int l = 1; l < N; l++)
            if (r.layer[l].k != r.layer[0].k) {
                CHECK(r.layer[l].k == r.layer[0].k);
                break;
            }
        plan_result_free(&r);
    }

    /* A loop of residual blocks: x -> a -> b -> c -> add(x, c). */
    cluster(&p, 16, 128);
    int ne = 0;
    for (int i = 0; i < N; i++) {
        layer(&ls[i], i);
        if (i > 0)
            es[ne++] = (plan_edge){i - 1, i, 2e5};
        if (i % 4 == 0 && i >= 4)
            es[ne++] = (plan_edge){i - 4, i, 2e5};
    }
    p.layers = ls;
    p.edges = es;
    p.nlayers = N;
    p.nedges = ne;
    CHECK(plan_is_series_parallel(&p));
    if (plan_and_check(&p, "residual loop", &r))
        plan_result_free(&r);

    /* Every layer also reads the one two before it: not series-parallel. */
    cluster(&p, 16, 128);
    ne = 0;
    for (int i = 0; i < N; i++) {
        if (i > 0)
            es[ne++] = (plan_edge){i - 1, i, 2e5};
        if (i > 1)
            es[ne++] = (plan_edge){i - 2, i, 1e5};
    }
    p.layers = ls;
    p.edges = es;
    p.nlayers = N;
    p.nedges = ne;
    CHECK(!plan_is_series_parallel(&p));
    if (plan_and_check(&p, "skip-two loop", &r))
        plan_result_free(&r);

    free(ls);
    free(es);
    return check_done("test_large");
}
