/*
 * bench_job.h: the planner benchmarks' shared setup: a model from
 * examples/models/ paired with an A100 cluster of G GPUs (8 per node, NVLink
 * 300 GB/s @ 2 us inside a node, 200 Gb/s @ 5 us between nodes) in a job of
 * global batch B, then built into a planning problem by pass_plan_build.
 */
#ifndef BENCH_JOB_H
#define BENCH_JOB_H

#include <string.h>
#include <time.h>

#include "frontend.h"
#include "passes.h"
#include "plan.h"

/* CPU time of the process: the machine is shared, wall time is noise. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Adds an A100 cluster of G GPUs to m and returns a job of model MODEL on it at
 * global batch B (not yet added: callers may set more fields). */
static inline ir_job bench_a100_job(ir_module *m, const char *model, int G, int64_t B)
{
    ir_gpu gpu = {
        .name = "a100", .mem_bandwidth = 1555e9, .mem_bytes = 80.0 * (1ull << 30), .launch = 2e-6};
    gpu.flops[DT_F32] = 19.5e12;
    gpu.flops[DT_TF32] = 156e12;
    gpu.flops[DT_F16] = gpu.flops[DT_BF16] = 312e12;
    int gi = ir_gpu_add(m, &gpu);
    int gpn = G < 8 ? G : 8;
    ir_cluster cl = {.name = "bench",
                     .gpu = gi,
                     .nodes = (G + gpn - 1) / gpn,
                     .gpus_per_node = gpn,
                     .intra = {300e9, 2e-6},
                     .inter = {25e9, 5e-6}};
    return (ir_job){.name = "bench",
                    .graph = ir_graph_find(m, model),
                    .cluster = ir_cluster_add(m, &cl),
                    .batch = B,
                    .dtype = DT_TF32,
                    .optimizer = OPT_SGD,
                    .lr = 0.01,
                    .momentum = 0.9,
                    .iterations = 1,
                    .data = "synthetic",
                    .slowdown = IR_SLOWDOWN_DEFAULT};
}

/* Loads examples/models/NAME.burst into a fresh module with an A100 cluster
 * and a job; returns the job index or -1. */
static inline int bench_job(arena *a, ir_module **mp, const char *root, const char *model, int G,
                            int64_t B, diag_ctx *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/models/%s.burst", root, model);
    ir_module *m = fe_compile(a, path, d);
    if (!m || d->nerrors)
        return -1;
    ir_job j = bench_a100_job(m, model, G, B);
    if (j.graph < 0) {
        fprintf(stderr, "no model '%s' in %s\n", model, path);
        return -1;
    }
    *mp = m;
    return ir_job_add(m, &j);
}

#endif
