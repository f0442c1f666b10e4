/*
 * sim.h: the internal header of sim/, the cluster simulator (docs/sim.md).
 *
 * engine.c is a discrete-event engine with the cluster's resources: every
 * GPU's compute stream (foreground before background, at kernel and slice
 * boundaries), its communication stream (collectives one at a time, each
 * starting when all its ranks are there), and the links (each GPU's port in
 * and out, each node's network interface in and out) whose bandwidth
 * concurrent transfers share max-min fairly. net.c turns a reshard and an
 * all-reduce into loads on those links. play.c plays the timeline of a plan
 * (passes/timeline.c) on the engine for a number of iterations, with the
 * hosts that launch the kernels, background slices and noise; report.c
 * prints and writes what it measured; trace.c writes a Chrome trace.
 */
#ifndef BURSTC_SIM_H
#define BURSTC_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"

/* engine.c */

typedef struct sim_engine sim_engine;

/* Bytes a transfer moves over one link. Links of G GPUs in nodes of gpn:
 * GPU g's port out 2g and in 2g + 1; node n's network interface out
 * 2G + 2n and in 2G + 2n + 1 (sim_link_* below). */
typedef struct sim_load {
    int link;
    double bytes;
} sim_load;

static inline int sim_link_gpu_out(int g)
{
    return 2 * g;
}
static inline int sim_link_gpu_in(int g)
{
    return 2 * g + 1;
}
static inline int sim_link_nic_out(int G, int n)
{
    return 2 * G + 2 * n;
}
static inline int sim_link_nic_in(int G, int n)
{
    return 2 * G + 2 * n + 1;
}

/* What the engine tells its user. Every function may be NULL. */
typedef struct sim_hooks {
    void *ctx;
    /* A timer set with sim_timer fired. */
    void (*timer)(void *ctx, int kind, int a, int b);
    /* A collective finished: its ranks' communication streams have moved on. */
    void (*coll_done)(void *ctx, int coll, double start, double end);
    /* A transfer started with sim_transfer finished. */
    void (*transfer_done)(void *ctx, int64_t tag, double start, double end);
    /* A background slice finished on gpu. */
    void (*slice_done)(void *ctx, int gpu, int64_t tag, double start, double end);
    /* For traces: a kernel (foreground, or a background slice when bg) ran
	 * on gpu from start to end; a transfer's bandwidth phase used link. */
    void (*kernel)(void *ctx, int gpu, bool bg, int64_t tag, double start, double end);
    void (*link_use)(void *ctx, int link, int64_t tag, double bytes, double start, double end);
} sim_hooks;

typedef struct sim_config {
    int gpus, gpus_per_node;
    double intra_bw, inter_bw; /* bytes/s per direction of a GPU port, of a node's interface */
    double jitter;             /* every duration x exp(jitter z - jitter^2 / 2), z ~ N(0, 1) */
    uint64_t seed;
} sim_config;

sim_engine *sim_engine_new(const sim_config *c, const sim_hooks *h);
void sim_engine_free(sim_engine *e);
double sim_now(const sim_engine *e);
/* Runs events until none is left. */
void sim_run(sim_engine *e);
/* Calls hooks.timer(kind, a, b) at time t (>= now). */
void sim_timer(sim_engine *e, double t, int kind, int a, int b);
/* A factor of the noise model (1 without jitter), for durations the user
 * times itself (host launches). */
double sim_noise(sim_engine *e);

/* Compute streams. A foreground kernel goes after the GPU's queued
 * foreground kernels, not before not_before (its launch) and not before a
 * background slice running now ends; returns its end. A background slice
 * runs when no foreground kernel is queued, in the order given. */
double sim_kernel(sim_engine *e, int gpu, double not_before, double dur, int64_t tag);
void sim_slice(sim_engine *e, int gpu, double dur, int64_t tag);
/* When the GPU's queued foreground kernels are done (<= now: idle). */
double sim_fg_end(const sim_engine *e, int gpu);

/* Transfers: bytes over links (loads), after `latency` seconds; with no
 * loads (or no bytes) it takes only the latency. Concurrent transfers share
 * a link's bandwidth max-min fairly; a transfer progresses at the same
 * rate on all its links, its rate in bytes/s on its most loaded one. The
 * loads are borrowed until the transfer is done. */
void sim_transfer(sim_engine *e, const sim_load *loads, int nloads, double latency, int64_t tag);

/* Collectives on the communication streams: nparts ranks (borrowed) take
 * part; it starts when every one of them has arrived and has no earlier
 * collective pending, as one transfer; then every rank's stream moves on.
 * Defined once, played any number of times (one at a time). */
int sim_coll_new(sim_engine *e, int nparts, const int *parts, const sim_load *loads, int nloads,
                 double latency, int64_t tag);
void sim_coll_arrive(sim_engine *e, int coll, int rank);

/* Totals. */
typedef struct sim_totals {
    int64_t events;
    double *fg_busy, *bg_busy; /* per GPU, seconds */
    double *link_bytes;        /* per link */
    int nlinks;
} sim_totals;
const sim_totals *sim_engine_totals(const sim_engine *e);

/* net.c: what reshards and all-reduces put on the links. */

/* A reshard's messages (bytes_per_sample x samples each) as per-link
 * bytes: each GPU's port out and in, each node's interface out and in for
 * messages between nodes. Returns how many loads (caller frees *out). */
int sim_reshard_loads(const plan_cluster *c, const plan_tl_pair *pairs, int npairs,
                      double bytes_per_sample, sim_load **out);
/* An all-reduce of bytes among k ranks from first, with commcost.c's
 * choice of ring or tree: every port of the k GPUs carries the algorithm's
 * link bytes each way, and every node's interface too when the ranks span
 * nodes. *latency gets the steps' latency. Returns how many loads. */
int sim_allreduce_loads(const plan_cluster *c, int first, int k, double bytes, sim_load **out,
                        double *latency);
/* The latency that makes a transfer of these loads, alone on its links,
 * take exactly `model` seconds (model minus its slowest link's time, or 0). */
double sim_latency_for(const plan_cluster *c, const sim_load *loads, int nloads, double model);

/* play.c: a plan's timeline played on the engine. */

/* A slice of background work on a rank: dur seconds of compute that
 * becomes ready when the rank's program reaches its anchor (a step of the
 * rank's timeline program; the program's length: the end of the iteration)
 * in every iteration, and completes `samples` samples of background job
 * `job` when done. gpu_s: the seconds those samples take the job alone on
 * one GPU (samples x its step time / its batch), what the slice adds to
 * the run's gpu_equivalents. */
typedef struct sim_bg_slice {
    int rank, step;
    double dur, samples;
    int job;
    double gpu_s;
} sim_bg_slice;

typedef struct sim_options {
    int iterations;
    bool ideal;    /* no contention: the timeline's durations, no host launches */
    double jitter; /* multiplicative noise on every duration (sim_config) */
    uint64_t seed;
    const sim_bg_slice *bg; /* background slices of one iteration, any order */
    int nbg;
    FILE *trace;    /* Chrome trace (trace.c), or NULL */
    int trace_gpus; /* at most this many GPUs (and their links) in the trace */
} sim_options;

typedef struct sim_result {
    int iterations;
    double *iter_time;     /* per iteration: the last rank's end minus the previous one's */
    double total;          /* when the last iteration ended */
    double mean, p50, p99; /* of iter_time */
    double timeline;       /* the ideal timeline's iteration time */
    double fg_samples_per_s, bg_samples_per_s;
    double bg_samples;
    /* Every job's samples/s over its samples/s alone on one GPU of the
     * cluster, summed: (iterations x plan_one_gpu_time + the completed
     * slices' gpu_s) / total. Work in dedicated GPUs, at most G. */
    double gpu_equivalents;
    int G;
    double *fg_busy, *bg_busy;            /* per GPU: fraction of total */
    double port_util_mean, port_util_max; /* bytes over capacity x total, GPU ports (each way) */
    double nic_util_mean, nic_util_max;   /* the same for node interfaces (0 on one node) */
    int nnics;
    int64_t events;
    int trace_gpus; /* GPUs the trace shows */
} sim_result;

/* Plays iterations of tl's program on its cluster. False with a message
 * when the options are out of range. */
bool sim_play(const plan_timeline *tl, const sim_options *o, sim_result *out, char *err,
              size_t errlen);
void sim_result_free(sim_result *r);

/* report.c: what `burstc sim` prints and writes. */

typedef struct sim_report_info {
    const char *job, *model, *strategy;
    double analytic; /* the planner's evaluator's time of the plan */
    const sim_options *options;
    bool overlap; /* ar_overlap */
    /* The interleave pass's prediction for the background slices played
     * (passes/interleave.c), or NULL when none were. */
    const plan_mux_result *mux;
} sim_report_info;

/* The table: iteration time (mean, p50, p99) beside the timeline's and the
 * planner's; samples/s; per-GPU busy % (every GPU up to 16, else mean, min,
 * max); link utilisation. */
void sim_print_table(FILE *out, const plan_problem *p, const sim_report_info *info,
                     const sim_result *r);
/* The same as JSON (docs/sim.md has the fields); false if a write failed. */
bool sim_write_json(FILE *out, const plan_problem *p, const sim_report_info *info,
                    const sim_result *r);

/* trace.c: the Chrome trace of a run (one process per shown GPU with its
 * compute and communication streams, one per node with its links). */

typedef struct sim_trace sim_trace;
sim_trace *sim_trace_open(FILE *out, const plan_timeline *tl, int max_gpus, int *shown);
void sim_trace_kernel(sim_trace *t, int gpu, bool bg, int64_t tag, double start, double end);
void sim_trace_coll(sim_trace *t, int op, double start, double end);
void sim_trace_link(sim_trace *t, int link, int op, double bytes, double start, double end);
/* Closes the JSON; false if a write failed. */
bool sim_trace_close(sim_trace *t);

#endif
