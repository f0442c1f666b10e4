/*
 * tune.h: the internal header of tune/, the autotuner (docs/tune.md).
 *
 * The planner predicts; the tuner measures. candidates.c turns one planning
 * problem into a handful of distinct plans (strategies x amplification
 * limits x points of the Pareto frontier). trials.c runs them head to head:
 * pairs drawn from a random comparison graph (each pair with probability p,
 * repeated L times), as many comparisons as the sample-size bound
 * n log n / Delta^2 asks for with Delta estimated from the predicted times
 * and then from the comparisons seen so far, ranked by rank/'s spectral
 * method. A runner (a callback) does one timed run of a candidate: the
 * simulator (simrun.c), a real program (tools/cmd_tune.c) or a synthetic
 * model (the unit tests).
 */
#ifndef BURSTC_TUNE_H
#define BURSTC_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "plan.h"
#include "sim.h"

/* trials.c: the metric (candidates.c orders by its prediction) */

/* What one run measured, in samples/s. */
typedef struct tune_sample {
    double fg; /* the tuned (foreground) job */
    double bg; /* background jobs packed beside it, summed; 0 without */
} tune_sample;

/* The metric a trial compares: foreground throughput, or cluster
 * throughput (foreground + background samples/s, as burstc plan adds them). */
typedef enum tune_metric { TUNE_METRIC_FG, TUNE_METRIC_CLUSTER } tune_metric;
double tune_metric_value(tune_metric m, const tune_sample *s);
const char *tune_metric_name(tune_metric m);

/* candidates.c */

typedef struct tune_candidate {
    char name[64];          /* "burst amp=2", "dp", "burst frontier 3", "dp +bg" */
    plan_strategy strategy; /* the strategy that found the plan */
    double amp_limit;       /* the per-layer limit it was planned under; <= 0: none */
    double price;           /* frontier points: the price on GPU-time; else 0 */
    int aliases;            /* other (strategy, limit, point) settings giving the same plan */
    plan_result plan;       /* counts and ranks, predicted time (plan.time) */
    /* Background packing (a job with background jobs): packed candidates run
     * the copies the interleave pass places (mux); the same plan unpacked runs
     * none. A plan whose placement holds no copy is one unpacked candidate. */
    bool packed;
    int copies;          /* packed: copies placed; unpacked: copies the plan would take */
    double pred_time;    /* predicted foreground iteration time: plan.time, packed mux.fg_time_bg */
    tune_sample pred;    /* predicted samples/s: plan's (bg 0), packed the mux's fg and bg */
    plan_mux_result mux; /* packed: the placement (the sim runner plays its slices) */
} tune_candidate;

/* The job's background jobs and the interleave pass's options, for packing. */
typedef struct tune_background {
    const plan_bg_job *jobs;
    int njobs;
    plan_mux_options mux; /* with the job's one time limit (pass_mux_options) */
} tune_background;

/* The distinct plans of p among dp, deeppool, pow2 and burst at the job's
 * amplification limit and at the ladder of other limits, and the burst
 * plans of the Pareto frontier; with background jobs (bg not NULL, njobs >
 * 0) every plan whose placement holds copies twice: packed and unpacked.
 * Keeps at most max: each strategy's plan at the job's limit first, then
 * the rest by predicted metric (both variants of a plan together while they
 * fit, the better predicted first); the kept ones sorted by predicted time
 * (without background jobs) or predicted metric, best first. *distinct
 * gets how many distinct candidates there were. Returns how many were kept
 * (0: no plan fits, or a placement failed; err says why). */
#define TUNE_MAX_CANDIDATES 64
int tune_candidates(const plan_problem *p, const tune_background *bg, tune_metric metric, int max,
                    tune_candidate **out, int *distinct, char *err, size_t errlen);
void tune_candidates_free(tune_candidate *c, int n);
/* The candidate's predicted value of the metric. */
double tune_candidate_metric(const tune_candidate *c, tune_metric m);

/* trials.c */

/* One timed run of candidate `cand`. `seed` is the trial's (both runs of a
 * trial get the same); `slot` is 0 for the first run of the pair, 1 for the
 * second. False with a message in err when the run failed: the candidate
 * is then reported and ranked last. */
typedef struct tune_runner {
    void *ctx;
    bool (*run)(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                size_t errlen);
} tune_runner;

typedef struct tune_options {
    int method;              /* RANK_SPECTRAL (default) or RANK_SPECTRAL_MLE */
    tune_metric metric;      /* default TUNE_METRIC_FG */
    double c;                /* the bound's constant: S = c n log n / Delta^2 */
    double delta_min;        /* Delta estimates are kept in [delta_min, 1] */
    double eps;              /* pseudo-wins each way of every pair of the graph */
    int min_rounds;          /* rounds over the graph before a stop for separation */
    double p_scale;          /* edge probability p = min(1, p_scale log n / n); 0: 4 */
    int64_t max_comparisons; /* 0: no limit */
    double budget_s;         /* wall-clock seconds; 0: no limit */
    double (*now)(void);     /* the clock for budget_s (seconds) */
    uint64_t seed;
    /* Called after every comparison (may be NULL). */
    void (*progress)(void *ctx, int64_t comparisons, double target);
    void *progress_ctx;
} tune_options;

/* c 2.5, p_scale 4, delta_min 0.02, eps 0.5, two rounds, no limits, seed 1, spectral, fg. */
void tune_options_default(tune_options *o);

/* The bound: c n log n / Delta^2 comparisons. */
double tune_sample_size(double c, int n, double delta);

/* One comparison: a and b ran back to back (first ran first), a won. */
typedef struct tune_comparison {
    int winner, loser, first;
    double winner_metric, loser_metric;
} tune_comparison;

typedef struct tune_result {
    int n;
    double p;       /* edge probability of the comparison graph */
    int edges;      /* its pairs (redrawn over the rest when a candidate fails) */
    int64_t L;      /* rounds the last estimate asked for */
    int64_t rounds; /* rounds started */
    int64_t comparisons, runs;
    double delta0;    /* Delta from the predicted throughputs */
    double delta;     /* Delta from the last ranking */
    double target;    /* comparisons the bound asks for at delta */
    bool separated;   /* stopped because the comparisons reached the target */
    const char *stop; /* why the trials ended */
    double wall_s;
    int ranked;     /* candidates ranked (not failed) */
    double *score;  /* per candidate, summing to 1 over the ranked; failed: 0 */
    int32_t *order; /* best first; failed candidates last */
    int64_t *wins, *losses;
    double *metric_sum;      /* per candidate over its successful runs */
    double *fg_sum, *bg_sum; /* the same for the sample's two parts */
    int64_t *metric_runs;
    char **failure; /* per candidate: NULL, or why it failed (malloc'ed) */
    tune_comparison *log;
    int64_t nlog;
} tune_result;

/* Runs trials among n candidates whose predicted throughputs are pred
 * (samples/s) until the top-1 is separated, the budget is spent or every
 * candidate but one failed, then ranks them. False (err) only for
 * out-of-memory or bad arguments; a run that ranked nothing has
 * res->ranked == 0 and a reason in res->stop. */
bool tune_run(int n, const double *pred, const tune_runner *r, const tune_options *o,
              tune_result *res, char *err, size_t errlen);
void tune_result_free(tune_result *res);

/* simrun.c: the simulator as a runner. */

typedef struct tune_sim_runner {
    int n;
    plan_timeline *tl; /* per candidate */
    sim_bg_slice **bg; /* per candidate: its background slices of one iteration (packed) */
    int *nbg;
    int64_t batch;
    int warmup, steps;
    double jitter;
} tune_sim_runner;

/* Builds every candidate's timeline and, for packed candidates, the slices
 * of their placement (bg: the jobs the placement names); false with a
 * message. */
bool tune_sim_runner_init(tune_sim_runner *s, const plan_problem *p, const tune_background *bg,
                          const tune_candidate *c, int n, int warmup, int steps, double jitter,
                          char *err, size_t errlen);
void tune_sim_runner_free(tune_sim_runner *s);
/* The tune_runner callback: sim_play of warmup + steps iterations with the
 * jitter seeded by (seed, slot); foreground samples/s over the steps after
 * warm-up, background samples/s the simulator's over the whole run. */
bool tune_sim_run(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                  size_t errlen);

/* report.c: a generated program's background report (runtime/background.c):
 * "background MODEL: N cop(y|ies), S steps, X samples/s" per background
 * model, printed by rank 0 at exit. */

typedef struct tune_program_report {
    int nbg;                 /* report lines read */
    double bg_samples_per_s; /* the sum of their samples/s */
    bool bg_off;             /* "background off" */
    int malformed;           /* lines that begin "background " but do not read */
} tune_program_report;

/* Judges one line (without its newline; len bytes, no NUL needed) and adds
 * it to r; true when it begins like a report line (read or malformed). */
bool tune_report_line(const char *line, size_t len, tune_program_report *r);
/* Reads a program's whole output (lines of any length and bytes) into r,
 * zeroed first; false only when reading fails. */
bool tune_read_report(FILE *f, tune_program_report *r);

/* A 64-bit mix of two values (splitmix64), for seeds. */
uint64_t tune_mix(uint64_t a, uint64_t b);

#endif
