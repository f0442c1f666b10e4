/*
 * passes.h: the internal header of passes/.
 *
 * A pass takes a module and rewrites it in place (planning writes rank sets
 * into ops, communication insertion adds ops). Every pass has the same
 * signature and is listed once in pipeline.c's table; the pipeline runs them
 * in a straight line and, in debug builds, verifies the module after each.
 * Analyses are plain function calls, never hidden caches.
 */
#ifndef BURSTC_PASSES_H
#define BURSTC_PASSES_H

#include "ir.h"

/* What a compilation asks of the passes; filled from the command line. */
typedef struct pass_options {
    const char *job;      /* job name; NULL: the module's only (or first) job */
    const char *strategy; /* "burst" (default), "deeppool", "pow2" or "dp" */
    const char *profile;  /* measured profile table (--profile), or NULL */
    int gpus;             /* > 0: the job's cluster becomes one of this many GPUs */
    /* Job fields given on the command line (--batch, --amplification), set
     * through the job table (ir_job_set_text): job_given[k] says field k was. */
    ir_job job_fields;
    bool job_given[IR_JOB_NFIELDS];
    bool overlap_allreduce; /* the planner assumes each all-reduce overlaps backward */
    /* --preempt-delay: seconds the foreground waits for a running background
     * kernel on a GPU (plan_mux_options.preempt); 0: slices finish first. */
    double preempt_delay;
} pass_options;

typedef struct pass_ctx {
    ir_module *m;
    const pass_options *opt;
    diag_ctx *d;
    int job; /* index of the job being compiled, -1 if none */
} pass_ctx;

typedef struct pass {
    const char *name;
    const char *help; /* one line for --help */
    bool needs_job;   /* skipped (with no error) for a module without a job */
    bool (*run)(pass_ctx *ctx);
} pass;

/* pipeline.c */

extern const pass pass_table[];
extern const int pass_count;
/* Returns the index of the pass called name, or -1. */
int pass_find(const char *name);
/* Sets job field `key` of the overrides from text as the command line writes
 * it, through the job table; false with the table's message in msg. */
bool pass_options_job_field(pass_options *o, const char *key, const char *text, char *msg,
                            size_t n);
/* Picks ctx->job from opt->job (an error if the name is unknown) and writes
 * the command line's overrides (opt->gpus, opt->job_fields) into that job,
 * once: every later pass, every dump and the program see what is planned. */
bool pass_select_job(pass_ctx *ctx);
/* Runs the table in order up to and including stop_after (NULL: all),
 * printing the module to dump after the pass called dump_after ("all": after
 * each). Returns false when a pass reported user errors. */
bool pass_run_pipeline(pass_ctx *ctx, const char *stop_after, const char *dump_after, FILE *dump);

#include "plan.h"

/* plan_layer.c: an IR op as the planner sees it. */

/* One layer's per-sample costs from ir_op_cost. */
void pass_plan_layer(const ir_graph *g, const ir_op *op, plan_layer *l);
/* Whether the job's "GPU" is a CPU core, which the CPU backend runs: the
 * device called cpu (examples/clusters/cpu.burst). */
bool pass_gpu_is_cpu(const ir_gpu *gpu);

/* plan_ir.c: the planner (plan.h) on an IR job, and pass "plan". */

typedef struct pass_plan_input {
    plan_problem p;
    int graph;         /* the job's model */
    int *op_of_layer;  /* layer -> op id */
    int *layer_of_op;  /* op id -> layer, -1 for inputs */
    plan_profile prof; /* --profile, if any */
    int nmeasured;     /* layers with a measured table */
    int ndata;         /* measured inputs (p.data) */
} pass_plan_input;

/* Builds the planning problem of job as the module holds it (the options add
 * a profile and the all-reduce assumption); errors go through d. */
bool pass_plan_build(ir_module *m, int job, const pass_options *opt, pass_plan_input *in,
                     diag_ctx *d);
void pass_plan_input_free(pass_plan_input *in);
/* "profile FILE: measured times for N of M layers[, K inputs][, the
 * optimizer's update]" and a blank line: what a plan made with --profile
 * took from it. */
void pass_plan_profile_summary(const pass_plan_input *in, const char *path, FILE *out);
/* The measured table of a profile for op, or NULL. */
const plan_timing *pass_plan_profile_match(const plan_profile *pr, const ir_graph *g,
                                           const ir_op *op);
/* Writes a plan's rank sets into the job's ops. */
void pass_plan_apply(ir_module *m, const pass_plan_input *in, const plan_result *r);
bool pass_plan(pass_ctx *ctx); /* pass "plan" */

/* The job's graph without its reshard and allreduce ops (a planned dump),
 * a new graph in m's arena (not in m's list): what the planning problem is
 * made of; every op keeps its ranks. */
ir_graph *pass_plan_strip_comm(ir_module *m, const ir_graph *g);
/* The planning problem of a planned job (its ops carry ranks; reshard and
 * allreduce ops are skipped) and its plan as the rank sets say, evaluated.
 * False with an error through d when a layer's ranks are missing or not a
 * contiguous range. res is zeroed on failure (safe to free). */
bool pass_plan_placed(ir_module *m, int job, const pass_options *opt, pass_plan_input *in,
                      plan_result *res, diag_ctx *d);

/* comm.c: pass "comm": reshard and allreduce ops where the plan moves data. */

bool pass_comm(pass_ctx *ctx);

/* schedule_ir.c: pass "schedule": every rank's order of work (schedule.c's
 * order) as the job's schedule section. */

bool pass_schedule(pass_ctx *ctx);

/* bg_jobs.c: the job's background jobs and multiplexing options; interleave_ir.c:
 * pass "interleave": the background jobs in its plan's idle time (plan.h's
 * plan_interleave), written to ir_job.interleave. */

typedef struct pass_bg_jobs {
    int n;
    plan_bg_job *jobs; /* one per entry of the job's background list */
} pass_bg_jobs;
/* The job's background jobs, their units priced on the foreground's device
 * (fg: the job's planning problem). */
void pass_bg_jobs_build(const ir_module *m, const ir_job *j, const plan_problem *fg,
                        pass_bg_jobs *out);
void pass_bg_jobs_free(pass_bg_jobs *b);
/* The job's multiplexing options: slowdown (the job's, else
 * IR_SLOWDOWN_DEFAULT), whether its device is a CPU core, and with p (the
 * job's planning problem; NULL: none) and background jobs the one time limit
 * every strategy's plan is held to (plan_mux_init over p; amplification =
 * auto: over p without a limit). False with a message in d when no strategy
 * plans p. */
bool pass_mux_options(const ir_module *m, const ir_job *j, const pass_options *opt,
                      const plan_problem *p, plan_mux_options *o, diag_ctx *d);
/* Whether an IR interleave section holds exactly the copies (jobs, ranks,
 * cuts) a placement made. */
bool pass_same_copies(const ir_interleave *il, const plan_mux_result *x);
bool pass_interleave(pass_ctx *ctx);

#endif
