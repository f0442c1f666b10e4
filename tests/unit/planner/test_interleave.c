/*
 * test_interleave.c: the interleave pass's core (passes/interleave.c).
 *
 *   - cutting: greedy slices no longer than the bound, the fewest of them;
 *     a unit longer than the bound is reported;
 *   - a hand-computed timeline: two layers on two GPUs (layer 0 on rank 0,
 *     layer 1 on rank 1, reshards of no time) with durations set by hand,
 *     so that every idle window is known: rank 0 waits 2 ms at the loss sum
 *     (layer 1's forward) and 4 ms at the backward reshard (layer 1's
 *     backward); rank 1 waits 1 ms for its input and 2 ms at the end (layer
 *     0's backward). A background step of exactly 1 ms fills them: 6 steps
 *     on rank 0, 3 on rank 1, no delay, and the predicted samples/s follow;
 *   - memory: a rank whose foreground leaves no room refuses the copy with
 *     the message the IR and `burstc plan` show;
 *   - seeds: deterministic and distinct;
 *   - property, over many random small plans and background jobs: the
 *     predicted foreground time with background never exceeds slowdown x
 *     the time without (nor falls below it), the cluster throughput never
 *     falls below the foreground's alone, no slice is longer than the bound, every copy fits the device's memory, and the timeline is left
 *     as it was.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "plan.h"
#include "random_problem.h"

static void test_cut(void)
{
    double u[] = {0.2, 0.3, 0.4, 0.1, 0.5};
    int cut[6];
    int n = plan_mux_cut(u, 5, 1.0, cut);
    CHECK(n == 2);
    CHECK(cut[0] == 0 && cut[1] == 4 && cut[2] == 5);
    n = plan_mux_cut(u, 5, 0.5, cut);
    CHECK(n == 3);
    CHECK(cut[0] == 0 && cut[1] == 2 && cut[2] == 4 && cut[3] == 5);
    /* A unit longer than the bound is a slice of its own, wherever it is. */
    n = plan_mux_cut(u, 5, 0.45, cut);
    CHECK(n == 5);
    for (int i = 0; i <= 5 && i <= n; i++)
        CHECK(cut[i] == i);
    double l[] = {0.2, 0.9, 0.1, 0.1};
    n = plan_mux_cut(l, 4, 0.5, cut);
    CHECK(n == 3 && cut[0] == 0 && cut[1] == 1 && cut[2] == 2 && cut[3] == 4);
    n = plan_mux_cut(l + 1, 3, 0.5, cut); /* long first */
    CHECK(n == 2 && cut[0] == 0 && cut[1] == 1 && cut[2] == 3);
    n = plan_mux_cut(l, 2, 0.5, cut); /* long last */
    CHECK(n == 2 && cut[0] == 0 && cut[1] == 1 && cut[2] == 2);
    double z[] = {0, 0, 0.3, 0};
    n = plan_mux_cut(z, 4, 0.3, cut);
    CHECK(n == 1 && cut[0] == 0 && cut[1] == 4);
}

/* Layer 0 on rank 0, layer 1 on rank 1, batch 8 on 2 GPUs, no parameters
 * (no all-reduce), every duration set by hand: f0 = 1 ms, f1 = 2 ms, b1 =
 * 4 ms, b0 = 2 ms, reshards 0. */
static void hand_timeline(inst *in, plan_result *r, plan_timeline *tl)
{
    memset(in, 0, sizeof *in);
    random_cluster(in, 2, 2);
    in->p.batch = 8;
    in->p.amp_limit = 0;
    in->p.cluster.mem_bytes = 10.0 * 1024 * 1024 * 1024;
    add_edge(in, 0, 1);
    finish(in, 2);
    in->layers[0].params = in->layers[1].params = 0;
    int k[2] = {1, 1}, first[2] = {0, 1};
    char err[256];
    if (!plan_evaluate(&in->p, k, first, r, err, sizeof err)) {
        fprintf(stderr, "evaluate: %s\n", err);
        exit(1);
    }
    if (!plan_timeline_build(&in->p, r, tl, err, sizeof err)) {
        fprintf(stderr, "timeline: %s\n", err);
        exit(1);
    }
    /* F0, F0->F1 (start, wait), F1, loss, B1, F0->F1 (bwd: start, wait), B0 */
    static const plan_tl_kind want[] = {PTL_FWD, PTL_RESHARD_FWD, PTL_WAIT, PTL_FWD, PTL_LOSS_SUM,
                                        PTL_BWD, PTL_RESHARD_BWD, PTL_WAIT, PTL_BWD};
    CHECK(tl->nops == 9);
    for (int x = 0; x < 9 && x < tl->nops; x++)
        CHECK(tl->op[x].kind == want[x]);
    double dur[9] = {1e-3, 0, 0, 2e-3, 0, 4e-3, 0, 0, 2e-3};
    for (int x = 0; x < 9; x++)
        tl->op[x].dur = dur[x];
    for (int64_t s = 0; s < tl->prog0[tl->ncls]; s++)
        tl->step[s].own = tl->op[tl->step[s].op].dur;
    plan_timeline_schedule(tl);
    CHECK_NEAR(tl->time, 9e-3, 1e-12);
}

static void test_hand(void)
{
    inst in;
    plan_result r;
    plan_timeline tl;
    hand_timeline(&in, &r, &tl);
    /* The windows, by hand. */
    int64_t nw0, nw1;
    const plan_tl_window *w = plan_tl_windows(&tl, 0, &nw0);
    plan_tl_windows(&tl, 1, &nw1);
    CHECK(tl.ncls == 2 && nw0 == 2 && nw1 == 2);
    CHECK(w[0].rank == 0 && w[0].why == PTW_PEER && w[0].op == 4); /* the loss sum */
    CHECK_NEAR(w[0].start, 1e-3, 1e-12);
    CHECK_NEAR(w[0].end, 3e-3, 1e-12);
    CHECK(w[1].rank == 0 && w[1].why == PTW_PEER && w[1].op == 7); /* the gradient's wait */
    CHECK_NEAR(w[1].start, 3e-3, 1e-12);
    CHECK_NEAR(w[1].end, 7e-3, 1e-12);
    CHECK(w[2].rank == 1 && w[2].why == PTW_PEER && w[2].op == 2 && w[2].start == 0);
    CHECK_NEAR(w[2].end, 1e-3, 1e-12);
    CHECK(w[3].rank == 1 && w[3].why == PTW_END && w[3].op == -1);
    CHECK_NEAR(w[3].start, 7e-3, 1e-12);
    CHECK_NEAR(w[3].end, 9e-3, 1e-12);

    /* One background op: forward 0.3 ms, backward 0.6 ms, optimizer 0.1 ms:
     * with a 1 ms bound, one slice of 1 ms (halving the bound cannot split
     * the 0.6 ms backward). */
    double units[3] = {0.3e-3, 0.6e-3, 0.1e-3};
    const char *names[1] = {"fc"};
    plan_bg_job job = {.name = "bg",
                       .nunits = 3,
                       .unit = units,
                       .op_name = names,
                       .mem_bytes = 2.0 * 1024 * 1024 * 1024,
                       .batch = 4};
    plan_mux_options o = {.slowdown = 1.2, .slice_bound = 1e-3}; /* budget 1.8 ms */
    plan_mux_result x;
    char err[256];
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK_NEAR(x.slice_bound, 1e-3, 1e-12);
    CHECK_NEAR(x.fg_time, 9e-3, 1e-12);
    CHECK_NEAR(x.fg_time_bg, 9e-3, 1e-12);
    CHECK(x.ncopies == 2 && x.nrefusals == 0);
    if (x.ncopies == 2) {
        CHECK(x.copies[0].rank == 0 && x.copies[1].rank == 1);
        CHECK(x.copies[0].nslices == 1 && x.copies[0].cut[0] == 0 && x.copies[0].cut[1] == 3);
        CHECK_NEAR(x.copies[0].steps_per_iter, 6, 1e-12);
        CHECK_NEAR(x.copies[1].steps_per_iter, 3, 1e-12);
        CHECK(x.copies[0].seed == plan_mux_seed(0, 0) && x.copies[1].seed == plan_mux_seed(0, 1));
    }
    CHECK(x.nslices == 9);
    /* Rank 0's slices start at 1, 2 (the loss sum's window), 3, 4, 5, 6 ms. */
    for (int i = 0; i < 6 && i < x.nslices; i++) {
        CHECK(x.slices[i].rank == 0);
        CHECK_NEAR(x.slices[i].start, (1 + i) * 1e-3, 1e-9);
        CHECK(x.slices[i].step == (i < 2 ? 3 : 5)); /* anchors: rank 0's steps 3 and 5 */
    }
    /* 9 steps of 4 samples per 9 ms; the foreground's 8 per 9 ms. */
    CHECK_NEAR(x.bg_samples_per_s, 9 * 4 / 9e-3, 1e-9);
    CHECK_NEAR(x.fg_samples_per_s, 8 / 9e-3, 1e-9);
    CHECK_NEAR(x.cluster_samples_per_s, 8 / 9e-3 + 4000, 1e-9);
    /* Idle: 2 + 4 ms on rank 0, 1 + 2 ms on rank 1, of 2 x 9 ms; all used. */
    CHECK_NEAR(x.idle, 9.0 / 18, 1e-9);
    CHECK_NEAR(x.idle_bg, 0, 1e-9);
    CHECK_NEAR(tl.time, 9e-3, 1e-12); /* left as it was */
    /* Work in dedicated GPUs: the foreground's one-GPU time and 9 background
     * steps of 1 ms per 9 ms iteration. */
    CHECK_NEAR(x.gpu_equivalents, (plan_one_gpu_time(&in.p) + 9e-3) / 9e-3, 1e-9);
    CHECK_NEAR(x.time_limit, 1.2 * 9e-3, 1e-15);
    plan_mux_result_free(&x);

    /* The one limit of every strategy (plan_mux_init): 9.5 ms leaves 0.5 ms,
     * shorter than the 0.6 ms backward; 8.5 ms is under the plan itself. */
    o.time_ref = 9.5e-3 / 1.2;
    o.time_limit = 9.5e-3;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0 && x.nrefusals == 2);
    CHECK(x.nrefusals < 1 ||
          strstr(x.refusals[0].why, "the backward of 'fc' takes 0.600 ms, longer than the "
                                    "slowdown's budget 0.500 ms (the limit 9.500 ms less the "
                                    "iteration's 9.000 ms") != NULL);
    CHECK_NEAR(x.gpu_equivalents, plan_one_gpu_time(&in.p) / 9e-3, 1e-9);
    plan_mux_result_free(&x);
    o.time_ref = 8.5e-3 / 1.2;
    o.time_limit = 8.5e-3;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0 && x.nrefusals == 2);
    CHECK(x.nrefusals < 1 ||
          strstr(x.refusals[0].why, "the plan alone takes 9.000 ms, not under the limit 8.500 ms "
                                    "(1.2 x the fastest plan's 7.083 ms)") != NULL);
    CHECK_NEAR(x.fg_time_bg, 9e-3, 1e-12);
    plan_mux_result_free(&x);
    o.time_limit = o.time_ref = 0;

    /* Overruns: a step of one 1.5 ms slice (its 1.2 ms backward cannot be
     * split). Fitting slices only: 1 + 2 on rank 0, 0 + 1 on rank 1, 9 ms.
     * Overruns of up to 0.75 ms (the fourth try) add one slice at the end
     * of rank 0's backward window and one in rank 1's first window, each
     * 0.5 ms over: rank 1 joins the forward reshard at 1.5 ms, rank 0 at
     * 1 + 2 x 1.5 = 8 ms the backward one, and the iteration ends at 10 ms,
     * within 1.2 x 9. Overruns of up to 1.5 ms would take 12 ms: refused. */
    double units2[3] = {0.2e-3, 1.2e-3, 0.1e-3};
    plan_bg_job job2 = job;
    job2.unit = units2;
    o.slice_bound = 1.5e-3;
    CHECK(plan_interleave(&tl, &r, &job2, 1, &o, &x, err, sizeof err));
    CHECK_NEAR(x.fg_time_bg, 10e-3, 1e-9);
    CHECK_NEAR(x.overrun, 0.75e-3, 1e-9);
    CHECK(x.ncopies == 2 && x.nslices == 6);
    if (x.ncopies == 2) {
        CHECK_NEAR(x.copies[0].steps_per_iter, 4, 1e-12);
        CHECK_NEAR(x.copies[1].steps_per_iter, 2, 1e-12);
    }
    CHECK_NEAR(x.bg_samples_per_s, 6 * 4 / 10e-3, 1e-9);
    CHECK_NEAR(x.fg_samples_per_s, 8 / 10e-3, 1e-9);
    plan_mux_result_free(&x);
    o.slice_bound = 1e-3;

    /* A slowdown of 1 leaves no budget: every rank refuses, with why. */
    o.slowdown = 1;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0 && x.nrefusals == 2);
    CHECK(x.nrefusals < 1 || strstr(x.refusals[0].why, "no time") != NULL);
    CHECK_NEAR(x.fg_time_bg, x.fg_time, 1e-12);
    plan_mux_result_free(&x);

    /* Memory: 9 GiB of foreground on rank 0 leaves no room for 2 GiB of a
     * 10 GiB device; rank 1 (1 GiB) has room. */
    r.layer[0].mem_bytes = 9.0 * 1024 * 1024 * 1024;
    r.layer[1].mem_bytes = 1.0 * 1024 * 1024 * 1024;
    o.slowdown = 1.2;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 1 && x.copies[0].rank == 1);
    CHECK(x.nrefusals == 1);
    if (x.nrefusals == 1) {
        CHECK(x.refusals[0].rank == 0 && x.refusals[0].job == 0);
        CHECK(strcmp(x.refusals[0].why,
                     "needs 2.00 GiB beside the foreground's 9.00 GiB of 10.00 GiB") == 0);
    }
    CHECK_NEAR(x.bg_samples_per_s, 3 * 4 / 9e-3, 1e-9);
    plan_mux_result_free(&x);

    /* A unit longer than the bound (1 ms) but within the budget (1.8 ms): a
     * long slice, placed only where a window holds it whole. Units 0, 1.5
     * and 0 ms: slices [0] [1.5] [0]. Rank 0's windows 1-3 and 3-7 ms hold
     * long slices at 1, 3 and 4.5 ms (the next one, at 2.5 and 6 ms, would
     * overrun: never tried, although overruns of up to 1 ms are within the
     * slowdown); 4 + 6 slices. Rank 1's 0-1 ms holds only the first zero
     * slice, 7-9 ms one long one and two zero ones: 1 + 3. */
    double units3[3] = {0, 1.5e-3, 0};
    plan_bg_job job3 = job;
    job3.unit = units3;
    r.layer[0].mem_bytes = r.layer[1].mem_bytes = 0;
    CHECK(plan_interleave(&tl, &r, &job3, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 2 && x.nrefusals == 0 && x.nslices == 14);
    CHECK_NEAR(x.fg_time_bg, 9e-3, 1e-12);
    if (x.ncopies == 2) {
        CHECK(x.copies[0].nslices == 3 && x.copies[0].cut[1] == 1 && x.copies[0].cut[2] == 2);
        CHECK_NEAR(x.copies[0].steps_per_iter, 10.0 / 3, 1e-12);
        CHECK_NEAR(x.copies[1].steps_per_iter, 4.0 / 3, 1e-12);
    }
    static const double long_at[4] = {1e-3, 3e-3, 4.5e-3, 7e-3};
    int nlong = 0;
    for (int64_t i = 0; i < x.nslices; i++)
        if (x.slices[i].dur > 0) {
            CHECK(nlong < 4);
            if (nlong < 4)
                CHECK_NEAR(x.slices[i].start, long_at[nlong], 1e-12);
            nlong++;
        }
    CHECK(nlong == 4);
    CHECK_NEAR(x.bg_samples_per_s, 14.0 / 3 * 4 / 9e-3, 1e-9);
    plan_mux_result_free(&x);

    /* A unit longer than the budget: refused everywhere, naming it. */
    units3[1] = 2e-3;
    CHECK(plan_interleave(&tl, &r, &job3, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0 && x.nrefusals == 2);
    CHECK(x.nrefusals < 1 ||
          strstr(x.refusals[0].why, "the backward of 'fc' takes 2.000 ms, longer than the "
                                    "slowdown's budget 1.800 ms (the limit 10.800 ms less the "
                                    "iteration's 9.000 ms") != NULL);
    plan_mux_result_free(&x);
    plan_timeline_free(&tl);
    plan_result_free(&r);
}

/* Preemptive sharing (o.preempt) on the hand timeline: a 5 ms backward,
 * longer than every window and than the budget (0.9 ms at slowdown 1.1),
 * refuses the job without preemption; with a delay of 0.05 ms it runs in
 * pieces. Cut at 0.5 ms: slices 0.5, 5 and 0.5 ms. Rank 0: its 2 ms window
 * (the loss sum) takes 0.5 and 1.5 ms of the long slice, preempted: it
 * reaches the loss sum at 3.05 ms; rank 1's 1 ms window 0.5 and 0.5 ms,
 * preempted: it receives layer 0's output at 1.05 ms (the reshard is
 * split-phase: rank 0's send does not wait for it), so the loss sum is at
 * 3.05 ms. Rank 0's 4 ms window the other 3.5 ms and the last 0.5: one step;
 * its backward 7.05 to 9.05 ms. Rank 1's end window from 7.05 ms: 2 ms more,
 * preempted: 9.1 ms. Rank 1 completes one slice of three. */
static void test_preempt(void)
{
    inst in;
    plan_result r;
    plan_timeline tl;
    hand_timeline(&in, &r, &tl);
    double units[3] = {0.5e-3, 5e-3, 0.5e-3};
    const char *names[1] = {"fc"};
    plan_bg_job job = {
        .name = "bg", .nunits = 3, .unit = units, .op_name = names, .mem_bytes = 0, .batch = 4};
    plan_mux_options o = {.slowdown = 1.1};
    plan_mux_result x;
    char err[256];
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0 && x.nrefusals == 2);
    if (x.nrefusals > 0)
        CHECK(strstr(x.refusals[0].why, "the backward of 'fc' takes 5.000 ms, longer than the "
                                        "slowdown's budget 0.900 ms") != NULL);
    plan_mux_result_free(&x);

    o.preempt = 0.05e-3;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 2 && x.nrefusals == 0);
    CHECK_NEAR(x.preempt, 0.05e-3, 1e-15);
    CHECK_NEAR(x.fg_time_bg, 9.1e-3, 1e-12);
    if (x.ncopies == 2) {
        CHECK_NEAR(x.copies[0].steps_per_iter, 1, 1e-12);
        CHECK_NEAR(x.copies[1].steps_per_iter, 1.0 / 3, 1e-12);
    }
    CHECK_NEAR(x.bg_samples_per_s, (4 + 4.0 / 3) / 9.1e-3, 1e-6);
    /* Pieces: none longer than its window, none outside the iteration. */
    for (int64_t k = 0; k < x.nslices; k++)
        CHECK(x.slices[k].dur <= 4e-3 * (1 + 1e-12));
    CHECK_NEAR(tl.time, 9e-3, 1e-12);
    plan_mux_result_free(&x);

    /* On a CPU core there is no preemption: refused as before. */
    o.cpu = true;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0);
    plan_mux_result_free(&x);
    o.cpu = false;

    /* A delay longer than the budget refuses the job, saying so. */
    o.preempt = 1e-3;
    CHECK(plan_interleave(&tl, &r, &job, 1, &o, &x, err, sizeof err));
    CHECK(x.ncopies == 0 && x.nrefusals == 2);
    if (x.nrefusals > 0)
        CHECK(strstr(x.refusals[0].why, "the preemption delay 1.000 ms is longer than the "
                                        "slowdown's budget 0.900 ms") != NULL);
    plan_mux_result_free(&x);
    plan_timeline_free(&tl);
    plan_result_free(&r);
}

static void test_seeds(void)
{
    CHECK(plan_mux_seed(0, 0) == plan_mux_seed(0, 0));
    int64_t seen[64];
    int n = 0;
    for (int j = 0; j < 4; j++)
        for (int g = 0; g < 16; g++) {
            int64_t s = plan_mux_seed(j, g);
            CHECK(s >= 1 && s <= 0x7fffffff);
            for (int i = 0; i < n; i++)
                CHECK(seen[i] != s);
            seen[n++] = s;
        }
}

/* Random plans, random background jobs, random slowdowns. */
static void test_property(void)
{
    int placed = 0, delayed = 0, longs = 0, long_placed = 0;
    for (int it = 0; it < 400; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int G = irand(1, 8);
        random_cluster(&in, G, irand(1, 2) == 1 ? G : (G + 1) / 2);
        int n = irand(2, 8);
        if (urand() < 0.5 || n < 4)
            make_chain(&in, n);
        else
            make_concurrent(&in, n);
        in.p.cluster.mem_bytes = urand() < 0.5 ? 0 : pow(10, 6 + 3 * urand());
        plan_result r;
        char err[512];
        if (!plan_solve(&in.p, urand() < 0.5 ? PS_BURST : PS_DEEPPOOL, &r, err, sizeof err) &&
            !plan_solve(&in.p, PS_BURST, &r, err, sizeof err))
            continue;
        plan_timeline tl;
        if (!plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
            plan_result_free(&r);
            continue;
        }
        double T0 = tl.time;
        int nj = irand(1, 3);
        plan_bg_job jobs[3];
        double units[3][9];
        for (int j = 0; j < nj; j++) {
            int ops = irand(1, 4);
            for (int u = 0; u < 2 * ops + 1; u++)
                units[j][u] = urand() < 0.1 ? 0 : T0 * pow(10, -3 + 2.5 * urand());
            jobs[j] = (plan_bg_job){.name = "bg",
                                    .nunits = 2 * ops + 1,
                                    .unit = units[j],
                                    .mem_bytes = pow(10, 5 + 3 * urand()),
                                    .batch = irand(1, 64)};
        }
        plan_mux_options o = {.slowdown = 1 + urand() * (urand() < 0.2 ? 0 : 1),
                              .cpu = urand() < 0.3};
        /* A third of the time preemptive sharing, its delay up to the
         * iteration's tenth. */
        if (urand() < 0.3)
            o.preempt = T0 * 0.1 * urand();
        /* Half the time a common limit, sometimes under the plan itself. */
        if (urand() < 0.5) {
            o.time_ref = T0 * (0.8 + 0.4 * urand());
            o.time_limit = o.slowdown * o.time_ref;
        }
        double limit = o.time_limit > 0 ? o.time_limit : o.slowdown * T0;
        plan_mux_result x;
        CHECK(plan_interleave(&tl, &r, jobs, nj, &o, &x, err, sizeof err));
        CHECK(x.fg_time == T0);
        CHECK(x.fg_time_bg >= T0);
        CHECK(x.fg_time_bg <= fmax(T0, limit) * (1 + 1e-9));
        CHECK(limit > T0 || x.ncopies == 0);
        /* The background's part of gpu_equivalents: its work, at most the
         * G GPUs of the iteration with background. */
        double fg_eq = plan_one_gpu_time(&in.p) / x.fg_time_bg;
        CHECK(x.gpu_equivalents >= fg_eq * (1 - 1e-9));
        CHECK(x.gpu_equivalents - fg_eq <= G * (1 + 1e-9));
        CHECK(x.ncopies == 0 || x.gpu_equivalents > fg_eq);
        CHECK(tl.time == T0);
        /* Never below the foreground alone: the try without overruns is one. */
        CHECK(x.cluster_samples_per_s >= (double)in.p.batch / T0 * (1 - 1e-9));
        CHECK(x.slice_bound <= (o.cpu ? PLAN_MUX_SLICE_CPU : PLAN_MUX_SLICE_GPU));
        double *mem = calloc((size_t)G, sizeof(double));
        plan_rank_memory(&in.p, &r, mem);
        for (int c = 0; c < x.ncopies; c++) {
            const plan_mux_copy *cp = &x.copies[c];
            CHECK(cp->steps_per_iter > 0);
            CHECK(cp->cut[0] == 0 && cp->cut[cp->nslices] == jobs[cp->job].nunits);
            for (int s = 0; s < cp->nslices; s++) {
                CHECK(cp->cut[s] < cp->cut[s + 1]);
                /* Longer than the bound: one unit, within the budget. */
                if (cp->dur[s] > x.slice_bound * (1 + 1e-12)) {
                    CHECK(cp->cut[s + 1] == cp->cut[s] + 1);
                    /* (preemptive: the delay, not the unit, is what the
                     * budget bounds) */
                    CHECK(cp->dur[s] <= (limit - T0) * (1 + 1e-12) || (o.preempt > 0 && !o.cpu));
                    longs++;
                }
            }
            if (c > 0)
                CHECK(x.copies[c - 1].rank < cp->rank ||
                      (x.copies[c - 1].rank == cp->rank && x.copies[c - 1].job < cp->job));
            mem[cp->rank] += jobs[cp->job].mem_bytes;
            if (in.p.cluster.mem_bytes > 0)
                CHECK(mem[cp->rank] <= in.p.cluster.mem_bytes);
        }
        free(mem);
        /* Every (rank, job) is a copy or a refusal, never both. */
        CHECK(x.ncopies + x.nrefusals == G * nj);
        for (int64_t s = 0; s < x.nslices; s++) {
            CHECK(x.slices[s].copy >= 0 && x.slices[s].copy < x.ncopies);
            CHECK(x.slices[s].rank == x.copies[x.slices[s].copy].rank);
            if (o.cpu)
                CHECK(x.slices[s].why != PTW_COMM);
            /* A long slice lies inside a window of its rank. */
            if (x.slices[s].dur > x.slice_bound * (1 + 1e-12)) {
                bool inside = false;
                int64_t nw;
                const plan_tl_window *wins = plan_tl_windows(&tl, x.slices[s].rank, &nw);
                for (int64_t w = 0; w < nw && !inside; w++)
                    inside = wins[w].start <= x.slices[s].start + 1e-15 &&
                             x.slices[s].start + x.slices[s].dur <=
                                 wins[w].end + 1e-12 * (1 + wins[w].end);
                CHECK(inside);
                long_placed++;
            }
        }
        placed += x.ncopies > 0;
        delayed += x.fg_time_bg > T0;
        plan_mux_result_free(&x);
        plan_timeline_free(&tl);
        plan_result_free(&r);
    }
    /* The property is not vacuous: copies were placed, and some tries used
     * the slowdown budget. */
    CHECK(placed > 50);
    CHECK(delayed > 5);
    CHECK(longs > 5 && long_placed > 5);
    printf("property: %d of 400 plans hosted background copies, %d used the slowdown budget, "
           "%d copies had long slices, %d long slices placed\n",
           placed, delayed, longs, long_placed);
}

int main(void)
{
    test_cut();
    test_hand();
    test_preempt();
    test_seeds();
    test_property();
    return check_done("test_interleave");
}
