/*
 * planner_time.c: how long the burst planner takes (a benchmark, not a test).
 *
 *   planner_time [REPO_ROOT]
 *
 * For VGG-16, ResNet-50, GPT-2 and GPT-2 XL from examples/models/, on G in
 * {8, 64, 512, 4096} A100s and global batch B in {32, 256, 1024}: the median
 * wall time of plan_solve(burst) over several runs (problem building not
 * included), and the layer count and candidate counts that drive it.
 *
 *   planner_time --cold [REPO_ROOT]
 *
 * The first burst solve of the process against the next ones (CPU time and
 * minor page faults of each), for VGG-16 and GPT-2 XL at G=4096, B=1024: what
 * a user's one-shot `burstc plan` pays and a warm loop does not
 * (tests/bench/planner/cold_start.py times whole processes).
 */
#include <sys/resource.h>
#include <math.h>
#include <stdlib.h>

#include "bench_job.h"

#ifndef REPO_ROOT
#define REPO_ROOT "."
#endif

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *root = REPO_ROOT;
    static const char *models[] = {"vgg16", "resnet50", "gpt2", "gpt2_xl"};
    static const int Gs[] = {8, 64, 512, 4096};
    static const int64_t Bs[] = {32, 256, 1024};
    /* --only MODEL G B: plan one case 20 times (for a profiler) */
    if (argc == 5 && strcmp(argv[1], "--only") == 0) {
        arena *a = arena_new();
        diag_ctx d;
        diag_init(&d, stderr);
        ir_module *m = NULL;
        int job = bench_job(a, &m, root, argv[2], atoi(argv[3]), atoll(argv[4]), &d);
        pass_plan_input in;
        if (job < 0 || !pass_plan_build(m, job, NULL, &in, &d))
            return 1;
        double t0 = now_s();
        for (int i = 0; i < 20; i++) {
            plan_result r;
            char err[512];
            if (!plan_solve(&in.p, PS_BURST, &r, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            plan_result_free(&r);
        }
        printf("%.3f ms per plan\n", (now_s() - t0) / 20 * 1e3);

        pass_plan_input_free(&in);
        arena_free(a);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--cold") == 0) {
        if (argc > 2)
            root = argv[2];
        static const char *cold[] = {"vgg16", "gpt2_xl"};
        printf("%-10s %12s %12s %12s %12s\n", "model", "first ms", "first minflt", "next ms",
               "next minflt");
        for (int mi = 0; mi < 2; mi++) {
            arena *a = arena_new();
            diag_ctx d;
            diag_init(&d, stderr);
            ir_module *m = NULL;
            int job = bench_job(a, &m, root, cold[mi], 4096, 1024, &d);
            pass_plan_input in;
            if (job < 0 || !pass_plan_build(m, job, NULL, &in, &d))
                return 1;
            double t[6];
            long flt[6];
            for (int r = 0; r < 6; r++) {
                struct rusage u0, u1;
                getrusage(RUSAGE_SELF, &u0);
                double t0 = now_s();
                plan_result res;
                char err[512];
                if (!plan_solve(&in.p, PS_BURST, &res, err, sizeof err)) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
                t[r] = now_s() - t0;
                getrusage(RUSAGE_SELF, &u1);
                flt[r] = u1.ru_minflt - u0.ru_minflt;
                plan_result_free(&res);
            }
            qsort(t + 1, 5, sizeof t[0], cmpd);
            printf("%-10s %12.2f %12ld %12.2f %12ld\n", cold[mi], 1e3 * t[0], flt[0], 1e3 * t[3],
                   flt[3]);
            pass_plan_input_free(&in);
            arena_free(a);
        }
        return 0;
    }
    if (argc > 1)
        root = argv[1];
    printf("burst planner CPU time, median of up to 7 runs (ms); layers; sp: series-parallel;\n"
           "mem: the job does not fit the GPUs' memory (an error)\n\n");
    printf("%-10s %6s", "model", "layers");
    for (int gi = 0; gi < 4; gi++)
        for (int bi = 0; bi < 3; bi++) {
            char h[32];
            snprintf(h, sizeof h, "G%d/B%lld", Gs[gi], (long long)Bs[bi]);
            printf(" %11s", h);
        }
    printf("\n");
    for (int mi = 0; mi < 4; mi++) {
        int nl = -1;
        bool sp = false;
        double ms[4][3];
        for (int gi = 0; gi < 4; gi++)
            for (int bi = 0; bi < 3; bi++) {
                arena *a = arena_new();
                diag_ctx d;
                diag_init(&d, stderr);
                ir_module *m = NULL;
                int job = bench_job(a, &m, root, models[mi], Gs[gi], Bs[bi], &d);
                ms[gi][bi] = NAN;
                pass_plan_input in;
                if (job < 0 || !pass_plan_build(m, job, NULL, &in, &d)) {
                    arena_free(a);
                    continue;
                }
                nl = in.p.nlayers;
                sp = plan_is_series_parallel(&in.p);
                double t[7];
                int runs = 0;
                double spent = 0;
                while (runs < 7 && (runs < 3 || spent < 2.0)) {
                    plan_result r;
                    char err[512];
                    double t0 = now_s();
                    bool ok = plan_solve(&in.p, PS_BURST, &r, err, sizeof err);
                    t[runs] = now_s() - t0;
                    spent += t[runs];
                    runs++;
                    if (!ok) {
                        fprintf(stderr, "%s G=%d B=%lld: %s\n", models[mi], Gs[gi],
                                (long long)Bs[bi], err);
                        t[0] = NAN;
                        runs = 1;
                        break;
                    }
                    plan_result_free(&r);
                }
                qsort(t, (size_t)runs, sizeof t[0], cmpd);
                ms[gi][bi] = 1e3 * t[runs / 2];
                pass_plan_input_free(&in);
                arena_free(a);
            }
        printf("%-10s %4d%s", models[mi], nl, sp ? "sp" : "  ");
        for (int gi = 0; gi < 4; gi++)
            for (int bi = 0; bi < 3; bi++)
                if (isnan(ms[gi][bi]))
                    printf(" %11s", "mem");
                else
                    printf(" %11.2f", ms[gi][bi]);
        printf("\n");
        fflush(stdout);
    }
    return 0;
}
