/*
 * report.c: what `burstc sim` prints (a table) and writes (--json) about a
 * run of sim_play. Nothing here simulates; tools/cmd_sim.c calls these.
 */
#include <math.h>
#include <stdlib.h>

#include "sim.h"

typedef struct stat3 {
    double mean, min, max;
} stat3;

static stat3 stats(const double *v, int n)
{
    stat3 s = {0, INFINITY, -INFINITY};
    for (int i = 0; i < n; i++) {
        s.mean += v[i] / n;
        s.min = fmin(s.min, v[i]);
        s.max = fmax(s.max, v[i]);
    }
    if (n == 0)
        s.min = s.max = 0;
    return s;
}

void sim_print_table(FILE *out, const plan_problem *p, const sim_report_info *info,
                     const sim_result *r)
{
    const sim_options *o = info->options;
    fprintf(out, "sim: job %s (model %s), %s plan, %d GPUs (%d per node), global batch %lld\n",
            info->job, info->model, info->strategy, p->cluster.gpus, p->cluster.gpus_per_node,
            (long long)p->batch);
    fprintf(out, "%d iterations%s%s", r->iterations, o->ideal ? ", ideal (no contention)" : "",
            info->overlap ? ", all-reduce overlapped with backward" : "");
    if (o->jitter > 0)
        fprintf(out, ", jitter %g (seed %llu)", o->jitter, (unsigned long long)o->seed);
    fprintf(out, "\n\n");
    fprintf(out, "%-22s %12s %12s %12s\n", "time per iteration", "mean ms", "p50 ms", "p99 ms");
    fprintf(out, "%-22s %12.4f %12.4f %12.4f\n", "simulated", r->mean * 1e3, r->p50 * 1e3,
            r->p99 * 1e3);
    fprintf(out, "%-22s %12.4f\n", "timeline (ideal)", r->timeline * 1e3);
    fprintf(out, "%-22s %12.4f\n", "planner", info->analytic * 1e3);
    if (info->mux)
        fprintf(out, "%-22s %12.4f\n", "interleave (with bg)", info->mux->fg_time_bg * 1e3);
    fputc('\n', out);
    fprintf(out, "%-22s %12s%s\n", "throughput", "samples/s", info->mux ? "    predicted" : "");
    if (info->mux) {
        const plan_mux_result *x = info->mux;
        fprintf(out, "%-22s %12.1f %12.1f\n", "foreground", r->fg_samples_per_s,
                x->fg_samples_per_s);
        fprintf(out, "%-22s %12.1f %12.1f\n", "background", r->bg_samples_per_s,
                x->bg_samples_per_s);
        fprintf(out, "%-22s %12.1f %12.1f\n", "cluster", r->fg_samples_per_s + r->bg_samples_per_s,
                x->cluster_samples_per_s);
        fprintf(out, "%-22s %12.3f %12.3f\n\n", "GPU-equivalents", r->gpu_equivalents,
                x->gpu_equivalents);
    } else {
        fprintf(out, "%-22s %12.1f\n", "foreground", r->fg_samples_per_s);
        fprintf(out, "%-22s %12.1f\n", "background", r->bg_samples_per_s);
        fprintf(out, "%-22s %12.1f\n", "cluster", r->fg_samples_per_s + r->bg_samples_per_s);
        fprintf(out, "%-22s %12.3f\n\n", "GPU-equivalents", r->gpu_equivalents);
    }
    int G = r->G;
    stat3 f = stats(r->fg_busy, G), b = stats(r->bg_busy, G);
    fprintf(out, "%-22s %12s %12s\n", "GPU busy %", "foreground", "background");
    fprintf(out, "%-22s %12.2f %12.2f\n", "mean", 100 * f.mean, 100 * b.mean);
    fprintf(out, "%-22s %12.2f %12.2f\n", "min", 100 * f.min, 100 * b.min);
    fprintf(out, "%-22s %12.2f %12.2f\n", "max", 100 * f.max, 100 * b.max);
    if (G <= 16)
        for (int g = 0; g < G; g++)
            fprintf(out, "GPU %-18d %12.2f %12.2f\n", g, 100 * r->fg_busy[g], 100 * r->bg_busy[g]);
    else
        fprintf(out, "(%d GPUs: every GPU's numbers are in --json)\n", G);
    fprintf(out, "\n%-22s %12s %12s\n", "link utilisation %", "mean", "max");
    fprintf(out, "%-22s %12.2f %12.2f\n", "GPU ports (each way)", 100 * r->port_util_mean,
            100 * r->port_util_max);
    if (r->nnics > 0)
        fprintf(out, "%-22s %12.2f %12.2f\n", "node networks", 100 * r->nic_util_mean,
                100 * r->nic_util_max);
    else
        fprintf(out, "%-22s %12s %12s\n", "node networks", "-", "-");
    fprintf(out, "\n%lld events\n", (long long)r->events);
}

bool sim_write_json(FILE *out, const plan_problem *p, const sim_report_info *info,
                    const sim_result *r)
{
    const sim_options *o = info->options;
    int G = r->G;
    stat3 f = stats(r->fg_busy, G), b = stats(r->bg_busy, G);
    fprintf(out, "{\n  \"job\": ");
    plan_json_string(out, info->job);
    fprintf(out, ",\n  \"model\": ");
    plan_json_string(out, info->model);
    fprintf(out, ",\n  \"strategy\": ");
    plan_json_string(out, info->strategy);
    fprintf(
        out,
        ",\n  \"gpus\": %d,\n  \"gpus_per_node\": %d,\n  \"batch\": %lld,\n  \"iterations\": %d,\n"
        "  \"ideal\": %s,\n  \"overlap_allreduce\": %s,\n  \"jitter\": %.9g,\n  \"seed\": %llu,\n"
        "  \"background_slices\": %d,\n",
        p->cluster.gpus, p->cluster.gpus_per_node, (long long)p->batch, r->iterations,
        o->ideal ? "true" : "false", info->overlap ? "true" : "false", o->jitter,
        (unsigned long long)o->seed, o->nbg);
    fprintf(out, "  \"iteration_s\": [");
    for (int i = 0; i < r->iterations; i++)
        fprintf(out, "%s%.9g", i ? ", " : "", r->iter_time[i]);
    fprintf(
        out,
        "],\n  \"mean_s\": %.9g,\n  \"p50_s\": %.9g,\n  \"p99_s\": %.9g,\n  \"timeline_s\": %.9g,\n"
        "  \"planner_s\": %.9g,\n  \"total_s\": %.9g,\n",
        r->mean, r->p50, r->p99, r->timeline, info->analytic, r->total);
    fprintf(out,
            "  \"fg_samples_per_s\": %.9g,\n  \"bg_samples_per_s\": %.9g,\n"
            "  \"cluster_samples_per_s\": %.9g,\n  \"gpu_equivalents\": %.9g,\n",
            r->fg_samples_per_s, r->bg_samples_per_s, r->fg_samples_per_s + r->bg_samples_per_s,
            r->gpu_equivalents);
    if (info->mux)
        fprintf(out,
                "  \"interleave\": {\"copies\": %d, \"slices_per_iter\": %lld, \"slice_bound_s\": "
                "%.9g, \"fg_time_s\": %.9g, \"fg_time_bg_s\": %.9g, \"fg_samples_per_s\": %.9g, "
                "\"bg_samples_per_s\": %.9g, \"gpu_equivalents\": %.9g},\n",
                info->mux->ncopies, (long long)info->mux->nslices, info->mux->slice_bound,
                info->mux->fg_time, info->mux->fg_time_bg, info->mux->fg_samples_per_s,
                info->mux->bg_samples_per_s, info->mux->gpu_equivalents);
    fprintf(out,
            "  \"gpu_busy\": {\"fg_mean\": %.9g, \"fg_min\": %.9g, \"fg_max\": %.9g, "
            "\"bg_mean\": %.9g, \"bg_min\": %.9g, \"bg_max\": %.9g,\n    \"fg\": [",
            f.mean, f.min, f.max, b.mean, b.min, b.max);
    for (int g = 0; g < G; g++)
        fprintf(out, "%s%.6g", g ? ", " : "", r->fg_busy[g]);
    fprintf(out, "],\n    \"bg\": [");
    for (int g = 0; g < G; g++)
        fprintf(out, "%s%.6g", g ? ", " : "", r->bg_busy[g]);
    fprintf(out,
            "]},\n  \"links\": {\"port_util_mean\": %.9g, \"port_util_max\": %.9g, "
            "\"nic_util_mean\": %.9g, \"nic_util_max\": %.9g, \"nodes\": %d},\n",
            r->port_util_mean, r->port_util_max, r->nic_util_mean, r->nic_util_max, r->nnics);
    fprintf(out, "  \"events\": %lld\n}\n", (long long)r->events);
    return !ferror(out);
}
