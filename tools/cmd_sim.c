/*
 * cmd_sim.c: `burstc sim JOB.burst|JOB.ir`, the cluster simulator at the
 * command line.
 *
 * Plans the job as `burstc plan` does (or, for IR that is already planned,
 * takes every op's ranks from it), builds the plan's timeline
 * (passes/timeline.c) and plays it for a number of iterations on the job's
 * cluster (sim/play.c): contention on links, collectives queued on their
 * streams, hosts launching kernels. Prints a table (sim/report.c), and with
 * --json and --trace writes the numbers and a Chrome trace, each
 * atomically. docs/sim.md documents every option and number.
 */
#include "passes.h"
#include "plan.h"
#include "sim.h"
#include "tools.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char sim_usage[] =
    "usage: burstc sim [options] JOB.burst|JOB.ir\n"
    "\n"
    "Simulates a planned training job on its cluster: plays the plan's iteration\n"
    "(every rank's program, as the generated program runs it) for N iterations\n"
    "with contention on links, collectives queued per GPU and kernel launches.\n"
    "Prints the iteration time (mean, p50, p99) beside the planner's, samples/s,\n"
    "per-GPU busy % and link utilisation.\n"
    "\n"
    "  --iterations N       iterations to play (default 20)\n"
    "  --strategy S         dp, deeppool, pow2 or burst (default burst)\n"
    "  --amplification X    per-layer amplification limit, X >= 1 (default: the job's)\n"
    "  --preempt-delay T    multiplexing on a GPU: the foreground waits at most T\n"
    "                       (e.g. 20us) for a running background kernel, which\n"
    "                       yields at thread-block granularity; the rest of a slice\n"
    "                       runs in later idle windows (default 0: a running slice\n"
    "                       finishes first; docs/plan.md, \"The sharing model\")\n"
    "  --overlap-allreduce  run each gradient all-reduce beside the backward of\n"
    "                       earlier layers (default: after its layer's backward,\n"
    "                       waited for, as the runtime does now)\n"
    "  --profile FILE       measured per-layer times (DeepPool format) in place of\n"
    "                       the analytic model for the layers they cover\n"
    "  --ideal              no contention and no host: every op takes the planner's\n"
    "                       time (reproduces the plan's ideal timeline)\n"
    "  --jitter X           multiply every duration by exp(X z - X^2/2), z ~ N(0,1)\n"
    "                       (X from 0 to 10; default 0)\n"
    "  --seed N             seed of the jitter (default 1)\n"
    "  --background on|off  play the job's background jobs in the plan's idle time,\n"
    "                       as the interleave pass places them (default on; an\n"
    "                       IR interleave section without copies plays none)\n"
    "  --json FILE          write the results as JSON\n"
    "  --trace FILE         write a Chrome trace (Perfetto): every shown GPU's\n"
    "                       streams and its node's links\n"
    "  --trace-gpus N       show at most N GPUs in the trace (default 32; the\n"
    "                       lowest ranks and an even sample of the rest)\n"
    "  --job NAME           the job to simulate (default: the last in the file)\n"
    "  --gpus G             plan for G GPUs instead of the cluster's\n"
    "  --batch B            plan for a global batch of B instead of the job's\n"
    "  --slowdown X         the job's bound on its slowdown by background work (X >= 1)\n"
    "  --help               show this help\n"
    "\n"
    "IR whose ops already carry ranks is simulated as planned (then --strategy,\n"
    "--amplification, --gpus and --batch do not apply).\n"
    "\n"
    "exit status: 0 success, 1 errors in the input or no plan fits, 2 internal error\n";

static bool parse_count(const char *v, long lo, long hi, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

/* 1: every layer carries ranks; 0: none does; -1: some do (an error). */
static int planned(const ir_graph *g)
{
    int with = 0, without = 0;
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        if (op->opcode == OP_RESHARD || op->opcode == OP_ALLREDUCE)
            with++;
        else if (op->opcode != OP_INPUT && op->plan.nranks > 0)
            with++;
        else if (op->opcode != OP_INPUT)
            without++;
    }
    return with && without ? -1 : with > 0;
}

int cmd_sim(int argc, char **argv)
{
    tool_args ta = {.cmd = "burstc sim",
                    .usage = sim_usage,
                    .takes = TOOL_TAKES_STRATEGY | TOOL_TAKES_JSON | TOOL_TAKES_TRACE};
    bool background = true;
    long iterations = 20, trace_gpus = 32;
    sim_options so = {.seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        if (strcmp(argv[i], "--ideal") == 0) {
            so.ideal = true;
        } else if ((v = tool_opt_value("burstc sim", argc, argv, &i, "--iterations"))) {
            if (!parse_count(v, 1, 1000000, &iterations)) {
                fprintf(stderr,
                        "burstc sim: error: --iterations must be an integer from 1 to 1000000, "
                        "got '%s'\n",
                        v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc sim", argc, argv, &i, "--trace-gpus"))) {
            if (!parse_count(v, 2, 100000, &trace_gpus)) {
                fprintf(stderr,
                        "burstc sim: error: --trace-gpus must be an integer from 2 to 100000, "
                        "got '%s'\n",
                        v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc sim", argc, argv, &i, "--jitter"))) {
            char *end;
            so.jitter = strtod(v, &end);
            if (end == v || *end || !(so.jitter >= 0 && so.jitter <= 10)) {
                fprintf(stderr,
                        "burstc sim: error: --jitter must be a number from 0 to 10, got '%s'\n", v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc sim", argc, argv, &i, "--seed"))) {
            char *end;
            unsigned long long s = strtoull(v, &end, 10);
            if (end == v || *end || v[0] == '-') {
                fprintf(stderr,
                        "burstc sim: error: --seed must be a non-negative integer, got '%s'\n", v);
                return 1;
            }
            so.seed = s;
        } else if ((v = tool_opt_value("burstc sim", argc, argv, &i, "--background"))) {
            if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
                fprintf(stderr, "burstc sim: error: --background must be on or off, got '%s'\n", v);
                return 1;
            }
            background = strcmp(v, "on") == 0;
        } else if ((r = tool_arg(&ta, argc, argv, &i)) != TOOL_ARG_TAKEN) {
            return r == TOOL_ARG_HELP ? 0 : 1;
        }
    }
    if (!tool_args_done(&ta))
        return 1;
    const char *input = ta.input, *json = ta.json, *trace = ta.trace, *strategy = ta.strategy;
    plan_strategy strat = ta.shown;
    pass_options popt = ta.popt;
    so.iterations = (int)iterations;
    so.trace_gpus = (int)trace_gpus;

    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    pass_plan_input in = {0};
    plan_result res;
    bool have_res = false, have_tl = false, have_run = false;
    plan_timeline tl;
    sim_result run;
    out_file tr = {0};
    pass_bg_jobs bg = {0};
    plan_mux_result mux;
    bool have_mux = false;
    sim_bg_slice *bgs = NULL;
    char err[1024];
    ir_module *m = load_input(a, input, &d);
    if (!m || d.nerrors)
        goto done;
    pass_ctx ctx = {.m = m, .opt = &popt, .d = &d};
    if (!pass_select_job(&ctx))
        goto done;
    if (ctx.job < 0) {
        fprintf(stderr, "burstc sim: error: '%s' has no job to simulate\n", input);
        goto done;
    }
    const ir_job *job = &m->jobs[ctx.job];
    int was_planned = planned(m->graphs[job->graph]);
    if (was_planned < 0) {
        diag_error(&d, job->loc,
                   "the IR of job '%s' is partly planned: some ops carry ranks, some do not",
                   job->name);
        goto done;
    }
    if (was_planned) {
        if (strategy || popt.gpus || popt.job_given[ir_job_field_find("batch")] ||
            popt.job_given[ir_job_field_find("amplification")]) {
            fprintf(stderr,
                    "burstc sim: error: '%s' is already planned (its ops carry ranks): "
                    "--strategy, --amplification, --gpus and --batch do not apply\n",
                    input);
            goto done;
        }
    }
    if (!ir_verify(m, &d))
        goto done;
    if (was_planned)
        m->graphs[job->graph] = pass_plan_strip_comm(m, m->graphs[job->graph]);
    if (!pass_plan_build(m, ctx.job, &popt, &in, &d))
        goto done;
    if (was_planned) {
        const ir_graph *g = m->graphs[job->graph];
        int n = in.p.nlayers;
        int *k = plan_xcalloc((size_t)n + 1, sizeof(int)),
            *first = plan_xcalloc((size_t)n + 1, sizeof(int));
        bool ok = true;
        for (int l = 0; l < n && ok; l++) {
            const ir_op *op = &g->ops[in.op_of_layer[l]];
            k[l] = op->plan.nranks;
            first[l] = op->plan.ranks[0];
            for (int i = 1; i < k[l]; i++)
                if (op->plan.ranks[i] != first[l] + i) {
                    diag_error(&d, op->loc,
                               "'%s' runs on ranks that are not a contiguous range; the "
                               "simulator prices ranges (first .. first + k - 1) only",
                               op->name);
                    ok = false;
                    break;
                }
        }
        ok = ok && plan_evaluate(&in.p, k, first, &res, err, sizeof err);
        free(k);
        free(first);
        if (!ok) {
            if (d.nerrors == 0)
                diag_error(&d, job->loc, "%s", err);
            goto done;
        }
        res.strategy = strat;
    } else if (job->amplification == IR_AMP_AUTO && job->nbackground > 0) {
        /* The plan the compile makes (the plan pass, plan_ir.c): the
         * strategy's auto choice under the job's one limit, so the run is
         * the program's whether its background is played or not. */
        pass_bg_jobs auto_bg = {0};
        plan_mux_options mo;
        char why[640];
        pass_bg_jobs_build(m, job, &in.p, &auto_bg);
        err[0] = 0;
        bool ok = pass_mux_options(m, job, &popt, &in.p, &mo, &d) &&
                  plan_mux_auto(&in.p, strat, auto_bg.jobs, auto_bg.n, &mo, &res, NULL, why,
                                sizeof why, err, sizeof err);
        pass_bg_jobs_free(&auto_bg);
        if (!ok) {
            if (err[0])
                diag_error(&d, job->loc, "%s plan: %s", plan_strategy_name(strat), err);
            goto done;
        }
    } else if (!plan_solve(&in.p, strat, &res, err, sizeof err)) {
        diag_error(&d, job->loc, "%s plan: %s", plan_strategy_name(strat), err);
        goto done;
    }
    have_res = true;
    if (!plan_timeline_build(&in.p, &res, &tl, err, sizeof err)) {
        diag_error(&d, job->loc, "%s", err);
        goto done;
    }
    have_tl = true;
    /* An interleave section without copies (nothing fit, or burstc tune's
     * candidate without packing) runs no background work: none is played. */
    bool no_copies = job->interleave && job->interleave->ncopies == 0;
    if (background && job->nbackground > 0 && !no_copies) {
        /* The interleave pass's placement (passes/interleave.c) of this plan. */
        plan_mux_options mo;
        if (!pass_mux_options(m, job, &popt, &in.p, &mo, &d))
            goto done;
        pass_bg_jobs_build(m, job, &in.p, &bg);
        if (!plan_interleave(&tl, &res, bg.jobs, bg.n, &mo, &mux, err, sizeof err)) {
            diag_error(&d, job->loc, "interleave: %s", err);
            goto done;
        }
        have_mux = true;
        if (job->interleave && !pass_same_copies(job->interleave, &mux)) {
            diag_error(&d, job->loc,
                       "the IR's interleave section of job '%s' is not what the interleave pass "
                       "places for this plan; the simulator plays the pass's placement (remove "
                       "the section, or use the pass's own dump)",
                       job->name);
            goto done;
        }
        bgs = calloc((size_t)mux.nslices + 1, sizeof *bgs);
        if (!bgs) {
            fprintf(stderr, "burstc: out of memory\n");
            exit(2);
        }
        for (int64_t i = 0; i < mux.nslices; i++) {
            const plan_mux_slice *sl = &mux.slices[i];
            const plan_mux_copy *cp = &mux.copies[sl->copy];
            /* Each slice completes 1/nslices of a step: over iterations the
             * copy's slices run in order, so the rate is the pass's. A piece
             * of a preempted slice (--preempt-delay) does its share. */
            double share = cp->dur[sl->slice] > 0 ? sl->dur / cp->dur[sl->slice] : 1;
            const plan_bg_job *b = &bg.jobs[cp->job];
            bgs[i] = (sim_bg_slice){sl->rank, sl->step,
                                    sl->dur,  (double)b->batch / cp->nslices * share,
                                    cp->job,  plan_bg_step_time(b) / cp->nslices * share};
        }
        so.bg = bgs;
        so.nbg = (int)mux.nslices;
    }
    if (trace) {
        if (!out_open(&tr, trace))
            goto done;
        so.trace = tr.fp;
    }
    if (!sim_play(&tl, &so, &run, err, sizeof err)) {
        fprintf(stderr, "burstc sim: error: %s\n", err);
        goto done;
    }
    have_run = true;
    sim_report_info info = {.job = job->name,
                            .model = m->graphs[job->graph]->name,
                            .strategy = was_planned ? "as planned" : plan_strategy_name(strat),
                            .analytic = res.time,
                            .options = &so,
                            .overlap = popt.overlap_allreduce,
                            .mux = have_mux ? &mux : NULL};
    if (popt.profile)
        pass_plan_profile_summary(&in, popt.profile, stdout);
    sim_print_table(stdout, &in.p, &info, &run);
    if (trace) {
        so.trace = NULL;
        if (!out_commit(&tr))
            goto done;
        if (run.trace_gpus < in.p.cluster.gpus)
            printf("trace: %d of %d GPUs shown (the lowest ranks and an even sample of the rest; "
                   "--trace-gpus N)\n",
                   run.trace_gpus, in.p.cluster.gpus);
    }
    if (json) {
        out_file o;
        if (!out_open(&o, json))
            goto done;
        if (!sim_write_json(o.fp, &in.p, &info, &run)) {
            out_abort(&o);
            goto done;
        }
        if (!out_commit(&o))
            goto done;
    }
    status = 0;
done:
    if (so.trace)
        out_abort(&tr);
    if (have_run)
        sim_result_free(&run);
    free(bgs);
    if (have_mux)
        plan_mux_result_free(&mux);
    pass_bg_jobs_free(&bg);
    if (have_tl)
        plan_timeline_free(&tl);
    if (have_res)
        plan_result_free(&res);
    pass_plan_input_free(&in);
    if (d.nerrors > 0)
        status = 1;
    diag_summary(&d);
    arena_free(a);
    return status;
}
