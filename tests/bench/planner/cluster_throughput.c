/*
 * cluster_throughput.c: predicted cluster throughput with multiplexing (a
 * benchmark, not a test; docs/plan.md, "Multiplexing").
 *
 *   cluster_throughput [REPO_ROOT] [BG_MODEL BG_BATCH] [SLOWDOWN]
 *
 * VGG-16, WRN-101-2 and Inception-v3 at DeepPool's global batches (16, 16,
 * 32) on 1, 2, 4 and 8 A100s on one node (DeepPool's own setting), then 16,
 * 32 and 64 (the planner benchmarks' cluster: 8 per node, NVLink
 * 300 GB/s, 200 Gb/s between nodes), per-layer times from DeepPool's A100
 * profiles (data/profiles/deeppool-a100) where they exist. Per strategy
 * (dp, deeppool, burst), without background (the fastest plan, by its
 * timeline: the schedule the runtime follows) and with a
 * background job (default ResNet-50 at 32 per GPU; its units priced by the
 * analytic model) interleaved by the interleave pass, each strategy's plan
 * the one `amplification = auto` chooses (plan_mux_auto: the highest
 * predicted cluster throughput with the foreground within the slowdown,
 * default 1.1, of the fastest plan of any strategy: plan_mux_init). Prints the predicted cluster throughput
 * (foreground + background samples/s) over dp's without background, and
 * burst+mux over deeppool+mux.
 */
#define _DEFAULT_SOURCE /* mkstemps */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_job.h"
#include "frontend.h"
#include "passes.h"
#include "plan.h"

#ifndef REPO_ROOT
#define REPO_ROOT "."
#endif

typedef struct row {
    double tp[6]; /* dp, dp+mux, deeppool, deeppool+mux, burst, burst+mux: samples/s */
    double fg[6], bg[6];
    char ch_dp[16], ch_burst[16]; /* what auto chose (chosen) */
    bool have[6];
    double
        geq[6]; /* gpu_equivalents: every job's samples/s over its samples/s on one GPU, summed */
} row;

/* A module with the foreground model and the background model, an A100
 * cluster of G GPUs and a job; the job index, or -1. */
static int load(arena *a, ir_module **mp, const char *root, const char *model, const char *bg,
                int64_t bgb, int G, int64_t B, diag_ctx *d)
{
    char path[] = "/tmp/burstc_cluster_throughput_XXXXXX.burst";
    int fd = mkstemps(path, 6);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    fprintf(f, "import \"%s/examples/models/%s.burst\"\n", root, model);
    if (strcmp(bg, model) != 0)
        fprintf(f, "import \"%s/examples/models/%s.burst\"\n", root, bg);
    fclose(f);
    ir_module *m = fe_compile(a, path, d);
    unlink(path);
    if (!m || d->nerrors)
        return -1;
    ir_background *b = arena_alloc(a, sizeof *b);
    b->graph = ir_graph_find(m, bg);
    b->batch = bgb;
    ir_job j = bench_a100_job(m, model, G, B);
    j.nbackground = 1;
    j.background = b;
    if (j.graph < 0 || b->graph < 0)
        return -1;
    *mp = m;
    return ir_job_add(m, &j);
}

/* The candidate plan_mux_auto chose, from its reason: "dp", "dp'" and
 * deeppool's limit, "pow2" or "burst" and "fast" or the vertex's price. */
static void chosen(const char *why, char *buf, size_t n)
{
    const char *w = strstr(why, "auto: ");
    w = w ? w + 6 : why;
    double v;
    if (strncmp(w, "dp's", 4) == 0)
        snprintf(buf, n, "dp");
    else if (strncmp(w, "deeppool's plan at limit ", 25) == 0)
        snprintf(buf, n, "dp'%g", atof(w + 25));
    else if (strncmp(w, "deeppool's", 10) == 0)
        snprintf(buf, n, "dp'-");
    else if (strstr(w, "fastest") && strstr(w, "fastest") < strstr(w, ","))
        snprintf(buf, n, "%.1sF", w);
    else if (strstr(w, "price ") && sscanf(strstr(w, "price ") + 6, "%lf", &v) == 1)
        snprintf(buf, n, "%.1sv%.2g", w, v);
    else
        snprintf(buf, n, "?");
}

static bool measure(const char *root, const char *model, const char *profile, int64_t B, int G,
                    const char *bgm, int64_t bgb, double slowdown, row *out)
{
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    ir_module *m;
    int job = load(a, &m, root, model, bgm, bgb, G, B, &d);
    bool ok = false;
    pass_plan_input in = {0};
    pass_bg_jobs bg = {0};
    char prof[4096];
    snprintf(prof, sizeof prof, "%s/data/profiles/deeppool-a100/%s", root, profile);
    pass_options opt = {.profile = prof};
    if (job < 0 || !pass_plan_build(m, job, &opt, &in, &d))
        goto out;
    plan_mux_options mo;
    pass_mux_options(m, &m->jobs[job], NULL, NULL, &mo, &d);
    mo.slowdown = slowdown;
    char e0[512];
    in.p.amp_limit = 0;
    if (!plan_mux_init(&in.p, &mo, e0, sizeof e0)) {
        fprintf(stderr, "%s G=%d: %s\n", model, G, e0);
        goto out;
    }
    pass_bg_jobs_build(m, &m->jobs[job], &in.p, &bg);
    static const plan_strategy st[3] = {PS_DP, PS_DEEPPOOL, PS_BURST};
    for (int i = 0; i < 3; i++) {
        plan_result r;
        char err[512], why[640];
        in.p.amp_limit = 0;
        if (!plan_solve(&in.p, st[i], &r, err, sizeof err)) {
            fprintf(stderr, "%s G=%d %s: %s\n", model, G, plan_strategy_name(st[i]), err);
            continue;
        }
        /* Without background: the plan without a limit, by its timeline
         * (the schedule the runtime follows; the evaluator's time can be
         * shorter for branches side by side). */
        plan_timeline tl;
        if (!plan_timeline_build(&in.p, &r, &tl, err, sizeof err)) {
            fprintf(stderr, "%s G=%d %s: %s\n", model, G, plan_strategy_name(st[i]), err);
            plan_result_free(&r);
            continue;
        }
        out->tp[2 * i] = out->fg[2 * i] = (double)B / tl.time;
        out->geq[2 * i] = plan_one_gpu_time(&in.p) / tl.time;
        out->bg[2 * i] = 0;
        plan_timeline_free(&tl);
        plan_result_free(&r);
        plan_mux_result x;
        if (!plan_mux_auto(&in.p, st[i], bg.jobs, bg.n, &mo, &r, &x, why, sizeof why, err,
                           sizeof err)) {
            fprintf(stderr, "%s G=%d %s auto: %s\n", model, G, plan_strategy_name(st[i]), err);
            goto out;
        }
        if (i > 0)
            chosen(why, i == 1 ? out->ch_dp : out->ch_burst, sizeof out->ch_dp);
        double fg = x.fg_samples_per_s, bgr = x.bg_samples_per_s;
        out->geq[2 * i + 1] = x.gpu_equivalents;
        plan_mux_result_free(&x);
        plan_result_free(&r);
        out->have[2 * i] = out->have[2 * i + 1] = true;
        out->fg[2 * i + 1] = fg;
        out->bg[2 * i + 1] = bgr;
        out->tp[2 * i + 1] = fg + bgr;
    }
    ok = out->have[0] && out->have[4];
out:
    pass_bg_jobs_free(&bg);
    pass_plan_input_free(&in);
    arena_free(a);
    return ok;
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : REPO_ROOT;
    const char *bgm = argc > 3 ? argv[2] : "resnet50";
    int64_t bgb = argc > 3 ? atoll(argv[3]) : 32;
    double slowdown = argc > 4 ? atof(argv[4]) : 1.1;
    static const struct {
        const char *model, *title, *profile;
        int64_t B;
    } jobs[] = {{"vgg16", "VGG-16", "vggLayerGpuProfileA100.txt", 16},
                {"wide_resnet101_2", "WRN-101-2", "wrnLayerGpuProfileA100V2.txt", 16},
                {"inception_v3", "Inception-v3", "inceptionLayerGpuProfileA100V2.txt", 32}};
    static const int Gs[] = {1, 2, 4, 8, 16, 32, 64}; /* DeepPool's 1-8 on one node, then more */
    printf(
        "Predicted cluster throughput (foreground + background samples/s) over dp without\n"
        "background; background %s @ %lld per GPU, slowdown %g; A100 profiles.\n"
        "Rows 'geq': gpu_equivalents, every job's samples/s over its samples/s alone on one\n"
        "GPU, summed (work in dedicated GPUs, at most G; first column: dp's), and their ratio.\n\n",
        bgm, (long long)bgb, slowdown);
    printf("%-13s %4s %4s %-4s %9s %7s %7s %8s %8s %7s %8s %6s %6s %9s\n", "model", "B", "GPUs", "",
           "dp smp/s", "dp", "dp+mux", "deeppool", "dp'+mux", "burst", "burst+mx", "auto", "auto",
           "burst+mx/");
    printf("%-13s %4s %4s %-4s %9s %7s %7s %8s %8s %7s %8s %6s %6s %9s\n", "", "", "", "", "", "",
           "", "", "", "", "", "dp'", "burst", "dp'+mx");
    int fails = 0;
    for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++)
        for (size_t g = 0; g < sizeof Gs / sizeof Gs[0]; g++) {
            row r;
            memset(&r, 0, sizeof r);
            if (!measure(root, jobs[j].model, jobs[j].profile, jobs[j].B, Gs[g], bgm, bgb, slowdown,
                         &r)) {
                printf("%-13s %4lld %4d  (failed)\n", jobs[j].title, (long long)jobs[j].B, Gs[g]);
                fails++;
                continue;
            }
            const char *l1 = r.have[2] ? r.ch_dp : "-", *l2 = r.ch_burst;
            for (int e = 0; e < 2; e++) {
                char c[6][16];
                for (int k = 0; k < 6; k++) {
                    if (!r.have[k])
                        snprintf(c[k], sizeof c[k], "-");
                    else if (e)
                        snprintf(c[k], sizeof c[k], "%.2f", r.geq[k]);
                    else
                        snprintf(c[k], sizeof c[k], "%.2fx", r.tp[k] / r.tp[0]);
                }
                char ratio[16] = "-";
                if (r.have[3])
                    snprintf(ratio, sizeof ratio, "%.2fx",
                             e ? r.geq[5] / r.geq[3] : r.tp[5] / r.tp[3]);
                char base[16];
                snprintf(base, sizeof base, "%.1f", e ? r.geq[0] : r.tp[0]);
                printf("%-13s %4lld %4d %-4s %9s %7s %7s %8s %8s %7s %8s %6s %6s %9s\n",
                       e ? "" : jobs[j].title, (long long)jobs[j].B, Gs[g], e ? "geq" : "", base,
                       c[0], c[1], c[2], c[3], c[4], c[5], e ? "" : l1, e ? "" : l2, ratio);
            }
        }
    printf("\n(dp' = deeppool, '-' where its planner cannot search the graph; auto: the\n"
           "plan auto chose (dp: dp's; dp'L: deeppool's at limit L; pF, bF: pow2's, burst's\n"
           "fastest; pvX, bvX: their frontier vertex at price X); x: over dp's samples/s\n"
           "without background; geq: gpu_equivalents)\n");
    return fails ? 1 : 0;
}
