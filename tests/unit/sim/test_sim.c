/*
 * test_sim.c: a plan's timeline played on the engine (sim/play.c).
 *   - --ideal reproduces the timeline: on every example job (every
 *     strategy, all-reduce blocking and overlapped) the first iteration
 *     takes the timeline's time to 1e-9, and on chains without all-reduces
 *     every iteration does; on random graphs no iteration is slower than
 *     the timeline;
 *   - background slices made by hand: slices that fit in a rank's idle
 *     window leave the foreground untouched and are counted; a slice longer
 *     than the window delays the foreground by what does not fit, never by
 *     more than the slice; slices at the end of the program run there;
 *   - contention: with the timeline's program but links shared, a run is
 *     never faster than its transfers alone would let it be (a one-node
 *     plan without launches reproduces the timeline: nothing is shared);
 *   - jitter: the same seed gives the same run, another seed another.
 *
 * Usage: sim_test_sim EXAMPLES_JOBS_DIR
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../planner/check.h"
#include "../planner/random_problem.h"
#include "frontend.h"
#include "passes.h"
#include "plan.h"
#include "sim.h"

static bool play(const plan_timeline *tl, sim_options *o, sim_result *r)
{
    char err[256];
    if (!sim_play(tl, o, r, err, sizeof err)) {
        fprintf(stderr, "sim_play: %s\n", err);
        check_failures++;
        return false;
    }
    return true;
}

static void test_examples(const char *dir)
{
    DIR *dd = opendir(dir);
    CHECK(dd != NULL);
    if (!dd)
        return;
    struct dirent *de;
    int nplans = 0;
    while ((de = readdir(dd))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".burst") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        arena *a = arena_new();
        diag_ctx d;
        diag_init(&d, stderr);
        ir_module *m = fe_compile(a, path, &d);
        pass_options opt = {.strategy = "burst"};
        pass_ctx ctx = {.m = m, .opt = &opt, .d = &d, .job = -1};
        pass_plan_input in;
        if (!m || !pass_select_job(&ctx) || !pass_plan_build(m, ctx.job, &opt, &in, &d)) {
            check_failures++;
            arena_free(a);
            continue;
        }
        for (int ov = 0; ov < 2; ov++) {
            in.p.ar_overlap = ov;
            for (int s = 0; s < PS_COUNT; s++) {
                plan_result r;
                plan_timeline tl;
                char err[512];
                if (!plan_solve(&in.p, (plan_strategy)s, &r, err, sizeof err))
                    continue;
                CHECK(plan_timeline_build(&in.p, &r, &tl, err, sizeof err));
                sim_options o = {.iterations = 5, .ideal = true};
                sim_result sr;
                if (play(&tl, &o, &sr)) {
                    nplans++;
                    CHECK_NEAR(sr.iter_time[0], tl.time, 1e-9);
                    for (int i = 0; i < 5; i++)
                        CHECK(sr.iter_time[i] <= tl.time * (1 + 1e-9));
                    if (!ov && r.nconcurrent == 0)
                        CHECK(sr.mean <= r.time * (1 + 1e-9));
                    sim_result_free(&sr);
                }
                /* the contended run finishes and counts every sample */
                o.ideal = false;
                if (play(&tl, &o, &sr)) {
                    CHECK(sr.mean > 0 && isfinite(sr.mean));
                    CHECK_NEAR(sr.fg_samples_per_s * sr.total, 5.0 * in.p.batch, 1e-9);
                    sim_result_free(&sr);
                }
                plan_timeline_free(&tl);
                plan_result_free(&r);
            }
        }
        pass_plan_input_free(&in);
        arena_free(a);
    }
    closedir(dd);
    CHECK(nplans >= 40);
}

static int nchain_steady;

static void test_random(void)
{
    for (int it = 0; it < 600; it++) {
        inst in;
        memset(&in, 0, sizeof in);
        int gpn = irand(1, 6);
        random_cluster(&in, irand(1, 3) * gpn, gpn);
        bool chain = it % 2 == 0;
        if (chain)
            make_chain(&in, irand(1, 8));
        else
            make_concurrent(&in, irand(3, 10));
        in.p.ar_overlap = it % 3 == 0;
        int G = in.p.cluster.gpus, kmax = (int64_t)G < in.p.batch ? G : (int)in.p.batch;
        int k[MAXL], first[MAXL];
        for (int l = 0; l < in.p.nlayers; l++) {
            k[l] = irand(1, kmax);
            first[l] = irand(0, G - k[l]);
        }
        plan_result r;
        char err[256];
        plan_timeline tl;
        if (!plan_evaluate(&in.p, k, first, &r, err, sizeof err) ||
            !plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
            check_failures++;
            continue;
        }
        sim_options o = {.iterations = 4, .ideal = true};
        sim_result sr;
        if (play(&tl, &o, &sr)) {
            CHECK_NEAR(sr.iter_time[0], tl.time, 1e-9);
            /* A blocking all-reduce holds its ranks while the ranks of the
             * first layer, their gradient received (split-phase: the
             * reshard's gradient goes back before the all-reduce starts),
             * begin the next iteration: later iterations may be shorter. */
            bool ar = false;
            for (int l = 0; l < in.p.nlayers; l++)
                ar |= r.layer[l].k > 1 && in.p.layers[l].params > 0;
            nchain_steady += chain && !ar;
            for (int i = 0; i < 4; i++) {
                if (chain && !ar)
                    CHECK_NEAR(sr.iter_time[i], tl.time, 1e-9);
                CHECK(sr.iter_time[i] <= tl.time * (1 + 1e-9));
            }
            sim_result_free(&sr);
        }
        o.ideal = false;
        o.jitter = 0.1;
        o.seed = 3;
        sim_result a, b, c;
        if (play(&tl, &o, &a) && play(&tl, &o, &b)) {
            CHECK(a.total == b.total);
            o.seed = 4;
            if (play(&tl, &o, &c)) {
                CHECK(c.total != a.total);
                sim_result_free(&c);
            }
            sim_result_free(&a);
            sim_result_free(&b);
        }
        plan_timeline_free(&tl);
        plan_result_free(&r);
    }
}

/* Two layers: l0 on ranks 0..1, l1 on rank 0. Rank 1 sends half of l0's
 * output to rank 0, then has nothing to do until the gradient comes back:
 * it waits at the loss sum (its step 3, after l0, the reshard's start and
 * its wait) for l1's forward, then at the wait for the gradient's reshard
 * (step 5, after its start) for l1's backward. */
static void test_background(void)
{
    inst in;
    memset(&in, 0, sizeof in);
    random_cluster(&in, 2, 2);
    in.p.batch = 8;
    add_edge(&in, 0, 1);
    finish(&in, 2);
    in.layers[0].params = 1e4;
    in.layers[1].params = 0;
    int k[2] = {2, 1}, first[2] = {0, 0};
    plan_result r;
    plan_timeline tl;
    char err[256];
    if (!plan_evaluate(&in.p, k, first, &r, err, sizeof err) ||
        !plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
        check_failures++;
        return;
    }
    int64_t n1;
    const plan_tl_step *s1 = plan_tl_prog(&tl, 1, &n1);
    CHECK(n1 == 9);
    CHECK(tl.op[s1[3].op].kind == PTL_LOSS_SUM && tl.op[s1[4].op].kind == PTL_RESHARD_BWD &&
          tl.op[s1[5].op].kind == PTL_WAIT && tl.op[s1[5].op].of == s1[4].op);
    /* rank 1 is idle from reaching the loss sum until the gradient arrives */
    double w_loss = s1[3].end - s1[3].arrive, w_grad = s1[5].start - s1[5].arrive;
    CHECK(w_loss > 0 && w_grad > 0);
    const int N = 6;
    sim_options o = {.iterations = N, .ideal = true};
    sim_result base;
    if (!play(&tl, &o, &base))
        return;

    /* three slices that fit in the first window, one in the second */
    sim_bg_slice fit[4] = {{1, 3, w_loss / 4, 2, 0, 1e-3},
                           {1, 3, w_loss / 4, 2, 0, 1e-3},
                           {1, 3, w_loss / 4, 2, 0, 1e-3},
                           {1, 5, w_grad / 2, 5, 1, 4e-3}};
    o.bg = fit;
    o.nbg = 4;
    sim_result sr;
    if (play(&tl, &o, &sr)) {
        for (int i = 0; i < N; i++)
            CHECK_NEAR(sr.iter_time[i], base.iter_time[i], 1e-12);
        CHECK_NEAR(sr.bg_samples, N * 11.0, 1e-12);
        CHECK_NEAR(sr.bg_busy[1] * sr.total, N * (0.75 * w_loss + 0.5 * w_grad), 1e-9);
        CHECK(sr.bg_busy[0] == 0);
        CHECK_NEAR(sr.bg_samples_per_s, N * 11.0 / sr.total, 1e-9);
        /* the foreground's one-GPU time per iteration, the slices' gpu_s */
        double one = plan_one_gpu_time(&in.p);
        CHECK_NEAR(base.gpu_equivalents, N * one / base.total, 1e-9);
        CHECK_NEAR(sr.gpu_equivalents, (N * one + N * 7e-3) / sr.total, 1e-9);
        sim_result_free(&sr);
    }
    /* one slice longer than the wait for the gradient, anchored there:
	 * rank 1's next kernel (l0's backward) waits for the slice, so the
	 * iteration grows by what does not fit, at most the slice */
    double D = w_grad + 0.5 * r.layer[0].bwd;
    sim_bg_slice longer = {1, 5, D, 1, 0, 0};
    o.bg = &longer;
    o.nbg = 1;
    if (play(&tl, &o, &sr)) {
        /* the slice starts when rank 1 reaches step 5 (with nothing queued):
		 * it ends D later; the reshard itself runs beside it (another
		 * stream), then l0's backward waits for the slice */
        double grow = sr.iter_time[0] - base.iter_time[0];
        double want = fmax(0, s1[5].arrive + D - s1[5].end);
        CHECK_NEAR(grow, want, 1e-9);
        CHECK(grow <= D);
        CHECK(sr.bg_samples == N);
        sim_result_free(&sr);
    }
    /* at the end of rank 1's program: after its all-reduce, which ends the
     * iteration; the last iteration's slice runs after the run's end and is
     * not counted */
    sim_bg_slice at_end = {1, 9, 1e-6, 1, 0, 2e-3};
    o.bg = &at_end;
    if (play(&tl, &o, &sr)) {
        CHECK(sr.bg_samples == N - 1);
        CHECK_NEAR(sr.gpu_equivalents, (N * plan_one_gpu_time(&in.p) + (N - 1) * 2e-3) / sr.total,
                   1e-9);
        sim_result_free(&sr);
    }
    /* more background work than the GPU has time for: 4 slices of a whole
     * iteration each, every iteration. The queue grows; what runs after the
     * foreground's last iteration is not the run's: no samples, and the GPU
     * is never more than 100% busy. */
    double Ti = base.iter_time[0];
    sim_bg_slice heavy[4] = {
        {1, 3, Ti, 1, 0, 0}, {1, 3, Ti, 1, 0, 0}, {1, 3, Ti, 1, 0, 0}, {1, 3, Ti, 1, 0, 0}};
    o.bg = heavy;
    o.nbg = 4;
    if (play(&tl, &o, &sr)) {
        CHECK(sr.fg_busy[1] + sr.bg_busy[1] <= 1 + 1e-9);
        CHECK(sr.bg_busy[1] > 0.5);
        /* a slice ends no later than the run: at most total / Ti of them */
        CHECK(sr.bg_samples <= floor(sr.total / Ti + 1e-9));
        CHECK(sr.bg_samples >= N - 1);
        CHECK_NEAR(sr.bg_samples_per_s * sr.total, sr.bg_samples, 1e-9);
        sim_result_free(&sr);
    }
    /* out of range */
    sim_bg_slice bad = {1, 10, 1e-6, 1, 0, 0};
    o.bg = &bad;
    CHECK(!sim_play(&tl, &o, &sr, err, sizeof err));
    sim_bg_slice bad_gpu_s = {1, 3, 1e-6, 1, 0, -1};
    o.bg = &bad_gpu_s;
    CHECK(!sim_play(&tl, &o, &sr, err, sizeof err));
    sim_result_free(&base);
    plan_timeline_free(&tl);
    plan_result_free(&r);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sim_test_sim EXAMPLES_JOBS_DIR\n");
        return 2;
    }
    test_background();
    test_random();
    printf("random plans: %d chains without all-reduces, every iteration the timeline's\n",
           nchain_steady);
    CHECK(nchain_steady >= 30);
    test_examples(argv[1]);
    return check_done("sim/test_sim");
}
