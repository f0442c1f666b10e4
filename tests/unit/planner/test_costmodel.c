/*
 * test_costmodel.c: the compute model's device rules on hand-computed cases:
 * ranks sharing a node's cores (plan_core_share, and its effect on a plan's
 * time, its layers' times and its timeline; branches side by side only
 * within the cores), and a class's own curve and
 * bandwidth (plan_cluster.cls_*).
 */
#include <string.h>

#include "check.h"
#include "plan.h"

static void core_share(void)
{
    plan_cluster c = {.gpus = 8, .gpus_per_node = 4, .cores = 2};
    /* Up to 2 ranks on a node: a core each. */
    CHECK_NEAR(plan_core_share(&c, 0, 1), 1, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 0, 2), 1, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 2, 2), 1, 1e-15);
    /* 3 and 4 ranks on 2 cores: 3/2 and 2 times as long. */
    CHECK_NEAR(plan_core_share(&c, 0, 3), 1.5, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 1, 3), 1.5, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 0, 4), 2, 1e-15);
    /* Across nodes the busiest node counts: 2 + 2 on ranks 2..5; 3 + 3 on
	 * 1..6; 1 + 4 + 1 would need three nodes, 3..6 is 1 + 3. */
    CHECK_NEAR(plan_core_share(&c, 2, 4), 1, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 1, 6), 1.5, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 3, 4), 1.5, 1e-15);
    CHECK_NEAR(plan_core_share(&c, 0, 8), 2, 1e-15);
    c.gpus = 12;
    CHECK_NEAR(plan_core_share(&c, 3, 6), 2, 1e-15); /* 1 + 4 + 1 */
    /* A core per rank, or no count given: never slower. */
    c.cores = 4;
    CHECK_NEAR(plan_core_share(&c, 0, 8), 1, 1e-15);
    c.cores = 0;
    CHECK_NEAR(plan_core_share(&c, 0, 8), 1, 1e-15);
    c.cores = 3;
    CHECK_NEAR(plan_core_share(&c, 0, 4), 4.0 / 3, 1e-15);
}

/* One layer of 1 GFLOP forward and 2 backward per sample, no bytes, a curve
 * at 100% with no half work: t = FLOPs / peak exactly. */
static plan_problem one_layer(plan_layer *l, int G, int cores)
{
    memset(l, 0, sizeof *l);
    l->name = "a";
    l->cls = PC_CONV;
    l->fwd_flops = 1e9;
    l->bwd_flops = 2e9;
    l->params = 1000;
    plan_problem p = {0};
    p.cluster = (plan_cluster){.gpus = G,
                               .gpus_per_node = G,
                               .intra_alpha = 1e-6,
                               .intra_bw = 1e9,
                               .peak_flops = 1e11,
                               .mem_bw = 1e12,
                               .umax = 1,
                               .whalf = 0,
                               .cores = cores};
    p.nlayers = 1;
    p.layers = l;
    p.batch = 8;
    p.dtype_bytes = 4;
    return p;
}

static void shared_plan(void)
{
    plan_layer l;
    plan_problem p = one_layer(&l, 4, 2);
    char err[256];
    plan_result r;
    int k = 4, first = 0;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    /* 2 samples per rank: 20 ms forward, 40 ms backward alone; 4 ranks on
	 * 2 cores take twice that. All-reduce of 4000 bytes on 4 ranks: ring
	 * 2 * 3/4 * 4000 / 1e9 + 6 us = 12 us, tree 4 us + 8 us = 12 us. */
    CHECK_NEAR(r.layer[0].fwd, 0.040, 1e-12);
    CHECK_NEAR(r.layer[0].bwd, 0.080, 1e-12);
    CHECK_NEAR(r.layer[0].allreduce, 12e-6, 1e-9);
    CHECK_NEAR(r.time, 0.120 + 12e-6, 1e-12);
    CHECK_NEAR(r.gpu_seconds, 4 * (0.120 + 12e-6), 1e-12);
    /* Amplification is about compute, not where it runs: 4 x 60 ms over
	 * 240 ms on one rank. */
    CHECK_NEAR(r.layer[0].amplification, 1, 1e-12);
    /* The timeline plays the same durations. */
    plan_timeline tl;
    CHECK(plan_timeline_build(&p, &r, &tl, err, sizeof err));
    CHECK_NEAR(tl.time, r.time, 1e-12);
    plan_timeline_free(&tl);
    plan_result_free(&r);

    /* On two of the ranks, a core each: 40 + 80 ms, all-reduce 2 * 1/2 *
	 * 4000 / 1e9 + 2 us = 6 us. */
    k = 2;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.time, 0.120 + 6e-6, 1e-12);
    plan_result_free(&r);

    /* So the fastest plan keeps this layer on at most 2 ranks; with a core
	 * per rank it takes all 4. */
    CHECK(plan_solve(&p, PS_BURST, &r, err, sizeof err));
    CHECK(r.layer[0].k <= 2);
    CHECK_NEAR(r.time, 0.120 + 6e-6, 1e-12);
    plan_result_free(&r);
    p.cluster.cores = 0;
    CHECK(plan_solve(&p, PS_BURST, &r, err, sizeof err));
    CHECK(r.layer[0].k == 4);
    CHECK_NEAR(r.time, 0.060 + 12e-6, 1e-12);
    plan_result_free(&r);

    /* Three ranks from rank 1 (shards 3, 3, 2): 3 ranks on 2 cores, 1.5 x
	 * the 3-sample shard's 30 + 60 ms. */
    p.cluster.cores = 2;
    k = 3;
    first = 1;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.layer[0].fwd, 0.045, 1e-12);
    CHECK_NEAR(r.layer[0].bwd, 0.090, 1e-12);
    plan_result_free(&r);

    /* A slice of 1 ms (plan_step_wait): 4 processes on 2 cores, so every
	 * message step waits 1 ms more, on 4 ranks or 2. On 4 the all-reduce is
	 * the tree, 4 x 1.001 ms + 8000 B / 1e9 = 4.012 ms (the ring: 6.012);
	 * the loss sum 4 tree steps x 1 ms. */
    p.cluster.slice = 1e-3;
    k = 4;
    first = 0;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.layer[0].allreduce, 4.012e-3, 1e-12);
    CHECK_NEAR(r.time, 0.120 + 4.012e-3 + 4e-3, 1e-12);
    CHECK(plan_timeline_build(&p, &r, &tl, err, sizeof err));
    CHECK_NEAR(tl.time, r.time, 1e-12);
    plan_timeline_free(&tl);
    plan_result_free(&r);
    /* On 2 of the 4: ring, 2 x 1.001 ms + 4000 B / 1e9; the loss sum is
	 * still every rank's. */
    k = 2;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.time, 0.120 + 2.006e-3 + 4e-3, 1e-12);
    plan_result_free(&r);
}

/* A block of two branches: a -> b -> d and a -> c -> d, b on ranks 0..1 and
 * c on 2..3, each 40 ms (1 GFLOP per sample, 4 samples at 1e11 FLOP/s); a
 * and d views, moves free (alpha 0, no bytes). Side by side the block takes
 * 40 ms; on a node of 2 cores the two branches would put 4 ranks on them,
 * so they run one after the other: 80 ms. */
static void branches_on_shared_cores(void)
{
    plan_layer l[4];
    memset(l, 0, sizeof l);
    const char *names[4] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        l[i].name = names[i];
        l[i].cls = PC_CONV;
    }
    l[1].fwd_flops = l[2].fwd_flops = 1e9;
    plan_edge e[4] = {{0, 1, 0}, {0, 2, 0}, {1, 3, 0}, {2, 3, 0}};
    plan_problem p = {0};
    p.cluster = (plan_cluster){.gpus = 4,
                               .gpus_per_node = 4,
                               .intra_bw = 1e9,
                               .peak_flops = 1e11,
                               .mem_bw = 1e12,
                               .umax = 1};
    p.nlayers = 4;
    p.layers = l;
    p.nedges = 4;
    p.edges = e;
    p.batch = 8;
    p.dtype_bytes = 4;
    int k[4] = {4, 2, 2, 4}, first[4] = {0, 0, 2, 0};
    char err[256];
    plan_result r;
    CHECK(plan_evaluate(&p, k, first, &r, err, sizeof err));
    CHECK_NEAR(r.time, 0.040, 1e-12);
    CHECK(r.nconcurrent == 1);
    plan_result_free(&r);
    p.cluster.cores = 2;
    CHECK(plan_evaluate(&p, k, first, &r, err, sizeof err));
    CHECK_NEAR(r.time, 0.080, 1e-12);
    CHECK(r.nconcurrent == 0);
    plan_result_free(&r);
    /* The planner finds no faster plan either: every layer of b and c on
	 * 2 ranks at best (4 ranks cost as much, shared), in sequence. */
    CHECK(plan_solve(&p, PS_BURST, &r, err, sizeof err));
    CHECK_NEAR(r.time, 0.080, 1e-12);
    CHECK(r.nconcurrent == 0);
    plan_result_free(&r);
    /* With 4 cores it runs them side by side. */
    p.cluster.cores = 4;
    CHECK(plan_solve(&p, PS_BURST, &r, err, sizeof err));
    CHECK_NEAR(r.time, 0.040, 1e-12);
    plan_result_free(&r);
}

static void class_curves(void)
{
    plan_cluster c = {.gpus = 1,
                      .gpus_per_node = 1,
                      .peak_flops = 1e11,
                      .mem_bw = 1e9,
                      .launch = 1e-6,
                      .umax = 0.5,
                      .whalf = 0};
    /* An elementwise layer: 1000 elements read + written per sample, no
	 * FLOPs, batch 10, 4-byte floats: 40 kB. Device-wide: 40 us + launch. */
    plan_layer e = {.name = "relu", .cls = PC_OTHER, .fwd_elems = 1000, .bwd_elems = 1500};
    double f, b;
    plan_layer_time_analytic(&c, 4, &e, 10, &f, &b);
    CHECK_NEAR(f, 1e-6 + 40e-6, 1e-12);
    CHECK_NEAR(b, 1e-6 + 60e-6, 1e-12);
    /* Its class's own bandwidth, 10 GB/s: 4 us + launch. */
    c.cls_bw[PC_OTHER] = 1e10;
    plan_layer_time_analytic(&c, 4, &e, 10, &f, &b);
    CHECK_NEAR(f, 1e-6 + 4e-6, 1e-12);
    /* Pooling keeps the device-wide bandwidth, its own curve: 1e6 FLOPs
	 * per sample at 10% of 1e11, w / (w + 1e7) of it at w = 1e7 FLOPs:
	 * 1e7 / (1e11 * 0.1 * 0.5) = 2 ms. */
    plan_layer pl = {.name = "pool", .cls = PC_POOL, .fwd_flops = 1e6, .fwd_elems = 1};
    c.cls_umax[PC_POOL] = 0.1;
    c.cls_whalf[PC_POOL] = 1e7;
    plan_layer_time_analytic(&c, 4, &pl, 10, &f, &b);
    CHECK_NEAR(f, 1e-6 + 2e-3, 1e-12);
    /* Without it, the device-wide curve (50%, no half work): 0.2 ms. */
    c.cls_umax[PC_POOL] = 0;
    plan_layer_time_analytic(&c, 4, &pl, 10, &f, &b);
    CHECK_NEAR(f, 1e-6 + 0.2e-3, 1e-12);
}

/* A synchronised batch norm: its statistics' all-reduces are inside its
 * forward and backward on several ranks, and absent on one. */
static void sync_batchnorm(void)
{
    plan_layer l;
    plan_problem p = one_layer(&l, 4, 0);
    l.params = 0;              /* no gradient all-reduce: only the statistics' */
    l.sync_stats = 2 * 62 + 1; /* 62 channels: 125 f64 = 1000 bytes per rank */
    char err[256];
    plan_result r;
    int k = 1, first = 0;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.layer[0].fwd, 0.080, 1e-12);
    CHECK_NEAR(r.time, 0.240, 1e-12);
    plan_result_free(&r);
    /* On 2 ranks, the CPU backend's exchange: forward all-gathers 2 x 1000
     * bytes, ring 2 * 1/2 * 2000 / 1e9 + 2 us = 4 us (tree: 2 us + 4 us);
     * backward 1000 bytes, 1 + 2 = 3 us. */
    p.cluster.sync_gather = true;
    k = 2;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.layer[0].fwd, 0.040 + 4e-6, 1e-12);
    CHECK_NEAR(r.layer[0].bwd, 0.080 + 3e-6, 1e-12);
    CHECK_NEAR(r.time, 0.120 + 7e-6, 1e-12);
    CHECK_NEAR(r.gpu_seconds, 2 * (0.120 + 7e-6), 1e-12);
    plan_timeline tl;
    CHECK(plan_timeline_build(&p, &r, &tl, err, sizeof err));
    CHECK_NEAR(tl.time, r.time, 1e-12);
    plan_timeline_free(&tl);
    plan_result_free(&r);
    /* The CUDA backend's: the sums (63 f64, 504 bytes: 0.504 + 2 us), then the
     * squared deviations (62 f64, 496 bytes: 0.496 + 2 us). */
    p.cluster.sync_gather = false;
    CHECK(plan_evaluate(&p, &k, &first, &r, err, sizeof err));
    CHECK_NEAR(r.layer[0].fwd, 0.040 + 5e-6, 1e-12);
    CHECK_NEAR(r.layer[0].bwd, 0.080 + 3e-6, 1e-12);
    plan_result_free(&r);
    /* The planner sees them: with a 50 ms latency one rank (240 ms) beats 2
     * (120 + 2 x 100 ms) and 4 (60 + 2 x 200 ms, the tree); without the
     * statistics 4 ranks win. */
    p.cluster.intra_alpha = 0.05;
    CHECK(plan_solve(&p, PS_BURST, &r, err, sizeof err));
    CHECK(r.layer[0].k == 1);
    plan_result_free(&r);
    l.sync_stats = 0;
    CHECK(plan_solve(&p, PS_BURST, &r, err, sizeof err));
    CHECK(r.layer[0].k == 4);
    plan_result_free(&r);
}

int main(void)
{
    core_share();
    shared_plan();
    sync_batchnorm();
    branches_on_shared_cores();
    class_curves();
    return check_done("test_costmodel");
}
