/*
 * vgg_quality.c: plan quality for VGG-16 with the measured A100 profiles (a
 * benchmark, not a test).
 *
 *   vgg_quality [REPO_ROOT] [PROFILE]
 *
 * VGG-16 at global batch 32 on 8, 16 and 32 A100s (NVLink 300 GB/s within 8,
 * 200 Gb/s between nodes), per-layer times from DeepPool's
 * vggLayerGpuProfileA100.txt where they exist (the analytic model elsewhere):
 * predicted iteration time and GPU-seconds per iteration for dp, deeppool
 * (DeepPool's own planner: burstc's pricing of its plan, and its own
 * estimate), pow2 and burst at amplification limits 1.5, 2.0, 2.5 and none,
 * and whether burst is never slower than pow2 at the same limit (it cannot
 * be: its candidates include pow2's).
 */
#include <stdlib.h>

#include "bench_job.h"

#ifndef REPO_ROOT
#define REPO_ROOT "."
#endif

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : REPO_ROOT;
    char prof[4096];
    snprintf(prof, sizeof prof, "%s",
             argc > 2 ? argv[2]
                      : REPO_ROOT "/data/profiles/deeppool-a100/vggLayerGpuProfileA100.txt");
    FILE *f = fopen(prof, "r");
    if (!f) {
        printf("vgg_quality: %s is absent; nothing to measure\n", prof);
        return 0;
    }
    fclose(f);
    static const int Gs[] = {8, 16, 32};
    static const double amps[] = {1.5, 2.0, 2.5, 0};
    bool never_slower = true;
    printf("VGG-16, global batch 32, A100 profiles; time ms / GPU-s per iteration, as burstc's\n"
           "cost model prices each plan (deeppool: also DeepPool's own estimate)\n\n");
    printf("%4s %-10s %5s %10s %12s %8s %6s %10s %12s\n", "G", "strategy", "amp", "iter ms",
           "GPU-s/iter", "vs dp", "conc", "own ms", "own GPU-s");
    for (int gi = 0; gi < 3; gi++) {
        arena *a = arena_new();
        diag_ctx d;
        diag_init(&d, stderr);
        ir_module *m = NULL;
        int job = bench_job(a, &m, root, "vgg16", Gs[gi], 32, &d);
        pass_options opt = {.profile = prof};
        pass_plan_input in;
        if (job < 0 || !pass_plan_build(m, job, &opt, &in, &d)) {
            arena_free(a);
            return 1;
        }
        if (gi == 0)
            printf("(measured tables for %d of %d layers)\n", in.nmeasured, in.p.nlayers);
        char err[512];
        plan_result dp;
        if (!plan_solve(&in.p, PS_DP, &dp, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        printf("%4d %-10s %5s %10.3f %12.5f %7.2fx %6s\n", Gs[gi], "dp", "-", dp.time * 1e3,
               dp.gpu_seconds, 1.0, "");
        for (int ai = 0; ai < 4; ai++) {
            in.p.amp_limit = amps[ai];
            char amp[16] = "none";
            if (amps[ai] > 0)
                snprintf(amp, sizeof amp, "%.1f", amps[ai]);
            static const plan_strategy ss[3] = {PS_DEEPPOOL, PS_POW2, PS_BURST};
            plan_result r[3];
            for (int i = 0; i < 3; i++) {
                if (!plan_solve(&in.p, ss[i], &r[i], err, sizeof err)) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
                printf("%4d %-10s %5s %10.3f %12.5f %7.2fx %6d", Gs[gi], plan_strategy_name(ss[i]),
                       amp, r[i].time * 1e3, r[i].gpu_seconds, dp.time / r[i].time,
                       r[i].nconcurrent);
                if (ss[i] == PS_DEEPPOOL)
                    printf(" %10.3f %12.5f", r[i].own_time * 1e3, r[i].own_gpu_seconds);
                printf("\n");
            }
            if (r[2].time > r[1].time * (1 + 1e-12))
                never_slower = false;
            for (int i = 0; i < 3; i++)
                plan_result_free(&r[i]);
        }
        plan_result_free(&dp);
        pass_plan_input_free(&in);
        arena_free(a);
    }
    printf("\nburst never slower than pow2 at the same limit: %s\n", never_slower ? "yes" : "NO");
    return never_slower ? 0 : 1;
}
