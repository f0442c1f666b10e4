/*
 * vgg_quality.c: plan quality for VGG-16 with the measured A100 profiles (a
 * benchmark, not a test).
 *
 *   vgg_quality [REPO_ROOT] [PROFILE]
 *
 * VGG-16 at global batch 32 on 8, 16 and 32 A100s (NVLink 300 GB/s within 8,
 * 200 Gb/s between nodes), per-layer times from DeepPool's
 * vggLayerGpuProfileA100.txt where they exist (the analytic model elsewhere):
 * predicted iteration time and GPU-seconds per iteration for dp, deeppool and
 * burst at amplification limits 1.5, 2.0 and 2.5, and whether burst is never
 * slower than deeppool at the same limit.
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
    static const double amps[] = {1.5, 2.0, 2.5};
    bool never_slower = true;
    printf("VGG-16, global batch 32, A100 profiles; time ms / GPU-s per iteration\n\n");
    printf("%4s %-10s %5s %10s %12s %8s %6s\n", "G", "strategy", "amp", "iter ms", "GPU-s/iter",
           "vs dp", "conc");
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
        for (int ai = 0; ai < 3; ai++) {
            in.p.amp_limit = amps[ai];
            plan_result dpl, bu;
            if (!plan_solve(&in.p, PS_DEEPPOOL, &dpl, err, sizeof err) ||
                !plan_solve(&in.p, PS_BURST, &bu, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            printf("%4d %-10s %5.1f %10.3f %12.5f %7.2fx %6s\n", Gs[gi], "deeppool", amps[ai],
                   dpl.time * 1e3, dpl.gpu_seconds, dp.time / dpl.time, "");
            printf("%4d %-10s %5.1f %10.3f %12.5f %7.2fx %6d\n", Gs[gi], "burst", amps[ai],
                   bu.time * 1e3, bu.gpu_seconds, dp.time / bu.time, bu.nconcurrent);
            if (bu.time > dpl.time * (1 + 1e-12))
                never_slower = false;
            plan_result_free(&dpl);
            plan_result_free(&bu);
        }
        plan_result_free(&dp);
        pass_plan_input_free(&in);
        arena_free(a);
    }
    printf("\nburst never slower than deeppool at the same limit: %s\n",
           never_slower ? "yes" : "NO");
    return never_slower ? 0 : 1;
}
