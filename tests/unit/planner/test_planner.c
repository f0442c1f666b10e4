/*
 * test_planner.c: properties of the planner that hold on any problem, and
 * known cases. More GPUs never give a worse plan (monotone in G, on chains
 * and on graphs with concurrent branches, across one and several nodes);
 * the frontier runs from the fastest plan to the cheapest (whose GPU-seconds
 * are checked against enumeration) through convex hull vertices only, and
 * --gpu-budget finds the fastest of them within any budget the cheapest plan
 * meets; perfect scaling with free communication (burst equals dp); no
 * amplification allowance (one GPU per layer); memory errors; pow2 never
 * beating burst; a tied head on its embedding's ranks. test_bruteforce.c compares
 * plans with the enumerated optimum.
 */
#include "check.h"
#include "random_problem.h"

/* More GPUs never make the plan worse: the plan for G - 1 GPUs is a plan on
 * G (the same ranks), so the one found for G must be at least as fast. */
static void test_monotone(void)
{
    inst in;
    char err[256];
    int checked = 0, conc = 0;
    double worst = 0;
    for (int i = 0; i < 120; i++) {
        memset(&in, 0, sizeof in);
        int gpn = irand(2, 6), Gmax = irand(3, 20);
        random_cluster(&in, 1, gpn);
        in.p.batch = irand(4, 48);
        if (i % 3 == 0)
            make_chain(&in, irand(2, 8));
        else
            make_concurrent(&in, irand(3, 9));
        in.p.ar_overlap = i % 4 == 3;
        double prev = INFINITY;
        for (int G = 1; G <= Gmax; G++) {
            in.p.cluster.gpus = G;
            plan_result r;
            if (!plan_solve_weighted(&in.p, PS_BURST, 1, in.p.price, &r, err, sizeof err)) {
                fprintf(stderr, "monotone #%d G=%d: %s\n", i, G, err);
                check_failures++;
                break;
            }
            if (r.eval_time > prev * (1 + 1e-12)) {
                fprintf(stderr, "monotone #%d: %d GPUs %.9g ms, %d GPUs %.9g ms\n", i, G - 1,
                        prev * 1e3, G, r.eval_time * 1e3);
                check_failures++;
                double w = r.eval_time / prev - 1;
                if (w > worst)
                    worst = w;
            }
            conc += r.nconcurrent > 0;
            prev = r.eval_time;
            checked++;
            plan_result_free(&r);
        }
    }
    printf("monotone in G: %d plans (%d with concurrent branches), worst increase %.4f%%\n",
           checked, conc, 100 * worst);
    CHECK(checked > 500 && conc > 0);
}

/* The least GPU-seconds of any plan, by enumeration of counts from rank 0
 * (GPU-seconds do not depend on where a layer runs... except through the
 * links; so every first rank too). */
static double min_gpu_seconds(const plan_problem *p)
{
    int n = p->nlayers, G = p->cluster.gpus, kmax = (int64_t)G < p->batch ? G : (int)p->batch;
    int k[MAXL], first[MAXL];
    for (int l = 0; l < n; l++)
        k[l] = 1, first[l] = 0;
    plan_evaluator *ev = plan_evaluator_new(p);
    double best = INFINITY;
    for (;;) {
        double t, g;
        bool amp = true;
        for (int l = 0; l < n && p->amp_limit > 0; l++) {
            double f, b, f1, b1;
            plan_layer_time(p, &p->layers[l], (p->batch + k[l] - 1) / k[l], &f, &b);
            plan_layer_time(p, &p->layers[l], p->batch, &f1, &b1);
            amp &= k[l] == 1 || k[l] * (f + b) <= p->amp_limit * (f1 + b1) * (1 + 1e-12);
        }
        if (amp && plan_evaluator_run(ev, k, first, &t, &g) && g < best)
            best = g;
        int l = 0;
        while (l < n) {
            if (++first[l] + k[l] <= G)
                break;
            first[l] = 0;
            if (++k[l] <= kmax)
                break;
            k[l] = 1;
            l++;
        }
        if (l == n)
            break;
    }
    plan_evaluator_free(ev);
    return best;
}

static void test_frontier(void)
{
    inst in;
    char err[512];
    int checked = 0, budgets = 0;
    for (int i = 0; i < 60; i++) {
        memset(&in, 0, sizeof in);
        int G = irand(2, 6);
        random_cluster(&in, G, irand(1, G));
        if (i % 2)
            make_chain(&in, irand(2, 4));
        else
            make_concurrent(&in, irand(2, 4));
        plan_point pts[64];
        int np = plan_frontier(&in.p, pts, 64);
        CHECK(np >= 1);
        plan_result fast;
        CHECK(plan_solve_weighted(&in.p, PS_BURST, 1, in.p.price, &fast, err, sizeof err));
        /* From the fastest plan (of the DP's objective, which the frontier is the hull of)... */
        CHECK_NEAR(pts[0].time, fast.eval_time, 1e-12);
        /* ...to the cheapest, which no plan undercuts... */
        CHECK_NEAR(pts[np - 1].gpu_seconds, min_gpu_seconds(&in.p), 1e-9);
        /* ...sorted, each faster point costlier, and convex (every vertex
		 * below the segment of its neighbours). */
        for (int j = 1; j < np; j++)
            CHECK(pts[j].time > pts[j - 1].time && pts[j].gpu_seconds < pts[j - 1].gpu_seconds);
        for (int j = 1; j + 1 < np; j++) {
            double x = (pts[j].gpu_seconds - pts[j + 1].gpu_seconds) /
                       (pts[j - 1].gpu_seconds - pts[j + 1].gpu_seconds);
            double line = pts[j + 1].time + x * (pts[j - 1].time - pts[j + 1].time);
            CHECK(pts[j].time <= line * (1 + 1e-9));
        }
        /* A budget between the cheapest and the fastest plan gets the
		 * fastest frontier point within it; below the cheapest, none. */
        double one = plan_one_gpu_time(&in.p);
        for (int b = 0; b < 4; b++) {
            double lo = pts[np - 1].gpu_seconds / one, hi = fast.gpu_seconds / one;
            double x = b == 0 ? lo : b == 1 ? hi : lo + (hi - lo) * urand();
            in.p.gpu_budget = x;
            plan_result r;
            bool ok = plan_solve(&in.p, PS_BURST, &r, err, sizeof err);
            CHECK(ok);
            if (ok) {
                CHECK(r.gpu_seconds <= x * one * (1 + 1e-9));
                double want = INFINITY;
                for (int j = 0; j < np; j++)
                    if (pts[j].gpu_seconds <= x * one * (1 + 1e-12) && pts[j].time < want)
                        want = pts[j].time;
                CHECK_NEAR(r.eval_time, want, 1e-9);
                plan_result_free(&r);
                budgets++;
            }
            in.p.gpu_budget = 0;
        }
        in.p.gpu_budget = pts[np - 1].gpu_seconds / one * (1 - 1e-6);
        plan_result r;
        CHECK(!plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
        CHECK(strstr(err, "the cheapest plan needs") != NULL);
        in.p.gpu_budget = 0;
        plan_result_free(&fast);
        checked++;
    }
    printf("frontier: %d problems, %d budgets\n", checked, budgets);

    /* The budget is printed as given. */
    memset(&in, 0, sizeof in);
    random_cluster(&in, 4, 4);
    in.p.amp_limit = 0;
    make_chain(&in, 3);
    for (int l = 0; l < 3; l++)
        in.layers[l].fwd_kernels = in.layers[l].bwd_kernels = 1000; /* launch-bound: 1 GPU */
    in.p.gpu_budget = 1.001;
    plan_result r;
    if (plan_solve(&in.p, PS_BURST, &r, err, sizeof err)) {
        CHECK(r.gpu_seconds <= 1.001 * plan_one_gpu_time(&in.p) * (1 + 1e-9));
        plan_result_free(&r);
    }
    in.p.gpu_budget = 0.5;
    CHECK(!plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    CHECK(strstr(err, "budget of 0.5 x") != NULL);
    in.p.gpu_budget = 0.999;
    CHECK(!plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    CHECK(strstr(err, "budget of 0.999 x") != NULL);
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
        random_layer(in, i);
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

    /* burst's plan is the best schedule of its DP's plan and of pow2's and dp's, which its
     * space holds (dp's where its counts survive burst's pruning): never slower than either,
     * and on branches side by side sometimes one of theirs (the DP's objective is not the
     * schedule's). */
    int taken = 0, held = 0;
    for (int i = 0; i < 300; i++) {
        memset(&in, 0, sizeof in);
        int gpn = irand(2, 6);
        random_cluster(&in, irand(1, 2) * gpn, gpn);
        in.p.batch = irand(2, 96);
        make_shape(&in, i % 3);
        plan_result b, x;
        if (!plan_solve(&in.p, PS_BURST, &b, err, sizeof err))
            continue;
        CHECK(b.strategy == PS_BURST);
        CHECK(b.found_by == PS_BURST || b.found_by == PS_POW2 || b.found_by == PS_DP);
        taken += b.found_by != PS_BURST;
        for (int s = PS_DP; s < PS_BURST; s++) {
            if (s == PS_DEEPPOOL || !plan_solve(&in.p, (plan_strategy)s, &x, err, sizeof err))
                continue;
            if (plan_burst_holds(&in.p, &x)) {
                held++;
                CHECK(b.time <= x.time * (1 + 1e-12));
            }
            plan_result_free(&x);
        }
        plan_result_free(&b);
    }
    printf("burst's plan one of pow2's or dp's in %d of 300 problems (%d such plans held)\n", taken,
           held);
    CHECK(taken > 0 && held > 300);

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

    /* The frontier of a chain: from the fastest plan to all layers on one
	 * GPU (the cheapest: every layer scales sublinearly). */
    vgg_like(&in, 32, 256);
    plan_point pts[64];
    int np = plan_frontier(&in.p, pts, 64);
    CHECK(np >= 2);
    CHECK(plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    CHECK_NEAR(pts[0].time, r.time, 1e-12);
    plan_result_free(&r);
    CHECK_NEAR(pts[np - 1].gpu_seconds, plan_one_gpu_time(&in.p), 1e-9);
    /* the one-GPU plan fits a budget of exactly 1 */
    in.p.gpu_budget = 1;
    CHECK(plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    for (int l = 0; l < r.nlayers; l++)
        CHECK(r.layer[l].k == 1);
    plan_result_free(&r);
    in.p.gpu_budget = 1.5;
    CHECK(plan_solve(&in.p, PS_BURST, &r, err, sizeof err));
    CHECK(r.gpu_seconds <= 1.5 * plan_one_gpu_time(&in.p) * (1 + 1e-9));
    plan_result_free(&r);
}

/* A head tied to an embedding (ties_to) runs on the embedding's ranks in every
 * strategy's plan, including those whose untied plan put the two apart, and a tied
 * plan keeps the amplification limit wherever the untied one did. */
static void test_tied(void)
{
    inst in;
    char err[256];
    int apart = 0, plans = 0;
    for (int i = 0; i < 80; i++) {
        memset(&in, 0, sizeof in);
        random_cluster(&in, irand(2, 8), irand(2, 4));
        in.p.batch = irand(4, 32);
        make_chain(&in, irand(3, 9));
        int head = in.p.nlayers - 1;
        for (int s = 0; s < PS_COUNT; s++) {
            plan_result free_r, tied_r;
            in.layers[head].ties_to = 0;
            if (!plan_solve(&in.p, (plan_strategy)s, &free_r, err, sizeof err))
                continue;
            in.layers[head].ties_to = 1;
            if (!plan_solve(&in.p, (plan_strategy)s, &tied_r, err, sizeof err)) {
                fprintf(stderr, "tied #%d %s: %s\n", i, plan_strategy_name((plan_strategy)s), err);
                check_failures++;
                plan_result_free(&free_r);
                continue;
            }
            plans++;
            const plan_layer_result *e = &tied_r.layer[0], *h = &tied_r.layer[head];
            CHECK(e->k == h->k && e->first == h->first);
            bool was_apart = free_r.layer[0].k != free_r.layer[head].k ||
                             free_r.layer[0].first != free_r.layer[head].first;
            apart += was_apart;
            if (!was_apart)
                CHECK_NEAR(tied_r.time, free_r.time, 1e-12 * free_r.time);
            bool free_amp = true, tied_amp = true;
            for (int l = 0; l < tied_r.nlayers && in.p.amp_limit > 0; l++) {
                free_amp &= free_r.layer[l].amplification <= in.p.amp_limit * (1 + 1e-9);
                tied_amp &= tied_r.layer[l].amplification <= in.p.amp_limit * (1 + 1e-9);
            }
            CHECK(tied_amp || !free_amp);
            plan_result_free(&free_r);
            plan_result_free(&tied_r);
        }
    }
    CHECK(apart > 10 && plans > 100);
    printf("tied: %d plans, %d of them tied where the untied plan had the pair apart\n", plans,
           apart);
}

int main(void)
{
    test_monotone();
    test_frontier();
    test_known();
    test_tied();
    return check_done("test_planner");
}
