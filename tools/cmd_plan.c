/*
 * cmd_plan.c: `burstc plan JOB.burst`, the burst planner at the command line.
 *
 * Reads a job (Burst source or IR), builds the planning problem
 * (passes/plan_ir.c), plans it with the dp, deeppool, pow2 and burst
 * strategies, all priced by the same cost model (passes/planner.c; deeppool is
 * DeepPool's own planner, passes/deeppool.c, whose own estimate is shown next
 * to burstc's pricing), and prints a table of the layers of one plan and a
 * side-by-side summary; or, with --frontier, the
 * Pareto frontier of iteration time against GPU-seconds. --json and --trace
 * write a plan export and a Chrome trace (passes/plan_out.c), each
 * atomically. docs/plan.md
 * documents every option and number.
 */
#include "passes.h"
#include "plan.h"
#include "tools.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char plan_usage[] =
    "usage: burstc plan [options] JOB.burst|JOB.ir\n"
    "\n"
    "Plans a training job: how many GPUs each layer uses and which ones. Prints a\n"
    "table of the layers, then predicted iteration time, samples/s and GPU-seconds\n"
    "per iteration for dp, deeppool, pow2 and burst side by side, all priced by\n"
    "burstc's cost model (deeppool: DeepPool's own planner, its own estimate too),\n"
    "then multiplexing: the job's background jobs in each plan's idle time, with\n"
    "foreground and background samples/s, cluster throughput and idle %.\n"
    "\n"
    "  --strategy S         dp, deeppool, pow2, burst or all: whose layer table to\n"
    "                       print (default: burst's table and the summary of all;\n"
    "                       S: its table and its summary line; all: every table)\n"
    "  --amplification X    per-layer amplification limit, X >= 1 (default: the job's;\n"
    "                       auto: with background jobs, every strategy's plan with\n"
    "                       the highest predicted cluster throughput under the one\n"
    "                       limit, burst's over its whole frontier, printed with why)\n"
    "  --slowdown X         bound on the foreground's time with background work over\n"
    "                       its time without, >= 1 (default: the job's, else 1.1)\n"
    "  --gpu-budget X       global limit: GPU-seconds per iteration at most X times\n"
    "                       the one-GPU time of the iteration (the fastest plan\n"
    "                       of the frontier within it)\n"
    "  --frontier           print the Pareto frontier (time vs GPU-seconds) instead:\n"
    "                       every plan optimal for some price on GPU-time, from the\n"
    "                       fastest to the cheapest; with background jobs also each\n"
    "                       one's multiplexing (fg, bg, cluster samples/s, copies),\n"
    "                       and dp's and deeppool's plans beside them; with --json\n"
    "                       FILE, those rows as JSON\n"
    "  --preempt-delay T    multiplexing on a GPU: the foreground waits at most T\n"
    "                       (e.g. 20us) for a running background kernel, which\n"
    "                       yields at thread-block granularity; the rest of a slice\n"
    "                       runs in later idle windows (default 0: a running slice\n"
    "                       finishes first; docs/plan.md, \"The sharing model\")\n"
    "  --overlap-allreduce  assume each gradient all-reduce overlaps the backward of\n"
    "                       earlier layers (default: it runs after its layer's\n"
    "                       backward and is waited for, as the runtime does now)\n"
    "  --profile FILE       measured per-layer times (DeepPool format) in place of\n"
    "                       the analytic model for the layers they cover\n"
    "  --json FILE          write the plans (every strategy) as JSON (with\n"
    "                       --frontier: the frontier's rows)\n"
    "  --trace FILE         write the predicted per-GPU timeline of the shown plan\n"
    "                       as a Chrome trace (opens in Perfetto), with its\n"
    "                       background slices on their own track\n"
    "  --job NAME           the job to plan (default: the last in the file)\n"
    "  --gpus G             plan for G GPUs instead of the cluster's\n"
    "  --batch B            plan for a global batch of B instead of the job's\n"
    "  --slowdown X         the job's bound on its slowdown by background work (X >= 1)\n"
    "  --help               show this help\n"
    "\n"
    "exit status: 0 success, 1 errors in the input or no plan fits, 2 internal error\n";

/* "0..7", or "3" for one rank */
static void ranks_str(const plan_layer_result *lr, char *buf, size_t n)
{
    if (lr->k == 1)
        snprintf(buf, n, "%d", lr->first);
    else
        snprintf(buf, n, "%d..%d", lr->first, lr->first + lr->k - 1);
}

static void print_table(FILE *out, const plan_problem *p, const plan_result *r)
{
    fprintf(out, "%s plan: %d GPUs (%d per node), global batch %lld%s\n",
            plan_strategy_name(r->strategy), p->cluster.gpus, p->cluster.gpus_per_node,
            (long long)p->batch, r->exact ? "" : " (not series-parallel: heuristic)");
    fprintf(out, "%-24s %5s %-12s %6s %9s %9s %9s %9s %6s %9s\n", "layer", "gpus", "ranks", "batch",
            "fwd ms", "bwd ms", "reshard", "allred", "amp", "mem MiB");
    for (int l = 0; l < r->nlayers; l++) {
        const plan_layer_result *lr = &r->layer[l];
        char rk[64];
        ranks_str(lr, rk, sizeof rk);
        fprintf(out, "%-24.24s %5d %-12.12s %6lld %9.4f %9.4f %9.4f %9.4f %6.2f %9.1f\n",
                p->layers[l].name, lr->k, rk, (long long)lr->shard, lr->fwd * 1e3, lr->bwd * 1e3,
                lr->reshard * 1e3, lr->ar_exposed * 1e3, lr->amplification,
                lr->mem_bytes / (1024.0 * 1024));
    }
    fprintf(out, "(reshard: forward + backward into the layer; allred: %s)\n\n",
            p->ar_overlap ? "all-reduce time not hidden behind backward"
                          : "all-reduce after the layer's backward, not overlapped");
}

static void print_summary(FILE *out, const plan_problem *p, plan_result *const *rs, int n,
                          const plan_result *dp)
{
    (void)p;
    bool own = false;
    fprintf(out, "%-9s %12s %12s %14s %10s %12s %10s %10s\n", "strategy", "iter ms", "samples/s",
            "GPU-s/iter", "vs dp", "x-node MB", "peak GiB", "own ms");
    for (int i = 0; i < n; i++) {
        const plan_result *r = rs[i];
        char ownms[32] = "-";
        if (r->strategy == PS_DEEPPOOL) {
            snprintf(ownms, sizeof ownms, "%.4f", r->own_time * 1e3);
            own = true;
        }
        fprintf(out, "%-9s %12.4f %12.1f %14.6f %9.2fx %12.2f %10.2f %10s\n",
                plan_strategy_name(r->strategy), r->time * 1e3, r->samples_per_s, r->gpu_seconds,
                dp && r->time > 0 ? dp->time / r->time : 1.0, r->cross_node_bytes / 1e6,
                r->peak_mem / (1024.0 * 1024 * 1024), ownms);
    }
    for (int i = 0; i < n; i++)
        if (rs[i]->found_by != rs[i]->strategy)
            fprintf(out, "(%s: %s's plan, which %s's search space holds, is the best it found)\n",
                    plan_strategy_name(rs[i]->strategy), plan_strategy_name(rs[i]->found_by),
                    plan_strategy_name(rs[i]->strategy));
    for (int i = 0; own && i < n; i++)
        if (rs[i]->strategy == PS_DEEPPOOL)
            fprintf(out,
                    "(every column but the last is burstc's pricing; own ms: DeepPool's own "
                    "estimate of its plan, %.6f GPU-s/iter by its count)\n",
                    rs[i]->own_gpu_seconds);
}

/* The plan's background jobs interleaved (passes/interleave.c). */
static bool mux_of(const plan_problem *p, const plan_result *r, const pass_bg_jobs *bg,
                   const plan_mux_options *mo, plan_mux_result *out, char *err, size_t n)
{
    plan_timeline tl;
    if (!plan_timeline_build(p, r, &tl, err, n))
        return false;
    bool ok = plan_interleave(&tl, r, bg->jobs, bg->n, mo, out, err, n);
    plan_timeline_free(&tl);
    return ok;
}

/* Under the multiplexing table: per strategy, every background job that
 * some GPU refused, on how many GPUs, and the first refusal's reason; then
 * what would admit a job refused for an op longer than the budget. */
static void print_refusals(FILE *out, const ir_module *m, const ir_job *j, plan_result *const *rs,
                           const plan_mux_result *const *mx, int n, int G)
{
    bool head = false, long_op = false;
    for (int i = 0; i < n; i++) {
        const plan_mux_result *x = mx[i];
        for (int b = 0; x && b < j->nbackground; b++) {
            int refused = 0, first = -1;
            for (int f = 0; f < x->nrefusals; f++)
                if (x->refusals[f].job == b) {
                    refused++;
                    if (first < 0)
                        first = f;
                }
            if (refused == 0)
                continue;
            if (!head) {
                fprintf(out, "\nwhere a background job got no copy:\n");
                head = true;
            }
            fprintf(out, "  %s: %s @ %lld: no copy on %d of %d GPUs (rank %d: %s)\n",
                    plan_strategy_name(rs[i]->strategy), m->graphs[j->background[b].graph]->name,
                    (long long)j->background[b].batch, refused, G, x->refusals[first].rank,
                    x->refusals[first].why);
            long_op = long_op || strstr(x->refusals[first].why, "a slice cannot split an op");
        }
    }
    if (long_op)
        fprintf(out, "(an op longer than the budget: preemptive sharing, --preempt-delay T with T "
                     "under the budget, admits it; so does a larger --slowdown)\n");
}

static void print_mux(FILE *out, const ir_module *m, const ir_job *j, const plan_mux_options *mo,
                      const plan_problem *p, plan_result *const *rs,
                      const plan_mux_result *const *mx, int n, const plan_result *dp)
{
    fprintf(out,
            "\nmultiplexing (%s; foreground with background at most %.4f ms, %g x the "
            "fastest plan's %.4f ms, for every strategy; background: ",
            mo->cpu ? "CPU cores" : "GPUs", mo->time_limit * 1e3, mo->slowdown, mo->time_ref * 1e3);
    for (int b = 0; b < j->nbackground; b++)
        fprintf(out, "%s%s @ %lld", b ? ", " : "", m->graphs[j->background[b].graph]->name,
                (long long)j->background[b].batch);
    fprintf(out, "%s):\n", j->nbackground ? "" : "none");
    fprintf(out, "%-9s %12s %12s %12s %12s %9s %8s %8s %8s %7s %9s\n", "strategy", "fg iter ms",
            "fg smp/s", "bg smp/s", "cluster/s", "vs dp", "gpu-eq", "idle %", "idle bg", "copies",
            "slice ms");
    for (int i = 0; i < n; i++) {
        if (!mx[i]) {
            fprintf(out, "%-9s %12s\n", plan_strategy_name(rs[i]->strategy), "-");
            continue;
        }
        const plan_mux_result *x = mx[i];
        fprintf(out, "%-9s %12.4f %12.1f %12.1f %12.1f %8.2fx %8.3f %7.1f%% %7.1f%% %7d %9.3f\n",
                plan_strategy_name(rs[i]->strategy), x->fg_time_bg * 1e3, x->fg_samples_per_s,
                x->bg_samples_per_s, x->cluster_samples_per_s,
                dp && dp->samples_per_s > 0 ? x->cluster_samples_per_s / dp->samples_per_s : 1.0,
                x->gpu_equivalents, x->idle * 100, x->idle_bg * 100, x->ncopies,
                x->slice_bound * 1e3);
    }
    fprintf(out, "(cluster/s: foreground + background samples/s; vs dp: over dp's samples/s "
                 "without background; gpu-eq: every job's samples/s over its samples/s alone "
                 "on one GPU, summed)\n");
    print_refusals(out, m, j, rs, mx, n, p->cluster.gpus);
}

/* At most this many rows in --frontier's multiplexing table: the 64
 * vertices plan_frontier gives and the other strategies' plans. */
#define MUX_POINTS 160

/* --frontier with background jobs: every vertex, then dp's and deeppool's
 * plans (burst's search space holds them), with their multiplexing. */
static void print_mux_frontier(FILE *out, const ir_module *m, const ir_job *j,
                               const plan_mux_options *mo, const plan_mux_point *pts, int n)
{
    fprintf(out,
            "\nmultiplexing along the frontier (foreground with background at most %.4f ms, %g x "
            "the fastest plan's %.4f ms; background: ",
            mo->time_limit * 1e3, mo->slowdown, mo->time_ref * 1e3);
    for (int b = 0; b < j->nbackground; b++)
        fprintf(out, "%s%s @ %lld", b ? ", " : "", m->graphs[j->background[b].graph]->name,
                (long long)j->background[b].batch);
    fprintf(out, "):\n");
    fprintf(out, "%-18s %10s %12s %11s %10s %10s %11s %8s %7s %7s\n", "plan", "iter ms",
            "GPU-s/iter", "fg iter ms", "fg smp/s", "bg smp/s", "cluster/s", "gpu-eq", "copies",
            "pareto");
    for (int i = 0; i < n; i++) {
        const plan_mux_point *x = &pts[i];
        char name[40];
        const char *lim = strstr(x->from, "limit ");
        if (x->vertex)
            snprintf(name, sizeof name, "price %.4g%s", x->price, x->fit_only ? " fit" : "");
        else if (strncmp(x->from, "dp's", 4) == 0)
            snprintf(name, sizeof name, "dp");
        else if (lim)
            snprintf(name, sizeof name, "deeppool @%s", lim + 6);
        else
            snprintf(name, sizeof name, "deeppool @none");
        fprintf(out, "%-18s %10.4f %12.6f %11.4f %10.1f %10.1f %11.1f %8.3f %7d %7s\n", name,
                x->r.time * 1e3, x->r.gpu_seconds, x->mux.fg_time_bg * 1e3, x->mux.fg_samples_per_s,
                x->mux.bg_samples_per_s, x->mux.cluster_samples_per_s, x->mux.gpu_equivalents,
                x->mux.ncopies, x->pareto ? "yes" : "-");
    }
    fprintf(out,
            "(price: a vertex of the frontier above; fit: the same plan with slices only "
            "where they fit whole, the foreground unslowed; dp, deeppool @L: their plans, which "
            "burst's search space holds; pareto: no other row has both fg and cluster "
            "samples/s as high)\n");
}

int cmd_plan(int argc, char **argv)
{
    tool_args ta = {.cmd = "burstc plan",
                    .usage = plan_usage,
                    .takes =
                        TOOL_TAKES_STRATEGY | TOOL_TAKES_ALL | TOOL_TAKES_JSON | TOOL_TAKES_TRACE};
    bool frontier = false;
    double gpu_budget = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        char *end;
        int r;
        if (strcmp(argv[i], "--frontier") == 0) {
            frontier = true;
        } else if ((v = tool_opt_value("burstc plan", argc, argv, &i, "--gpu-budget"))) {
            gpu_budget = strtod(v, &end);
            if (end == v || *end || !(gpu_budget > 0) || isinf(gpu_budget)) {
                fprintf(stderr,
                        "burstc plan: error: --gpu-budget must be a positive number, got '%s'\n",
                        v);
                return 1;
            }
        } else if ((r = tool_arg(&ta, argc, argv, &i)) != TOOL_ARG_TAKEN) {
            return r == TOOL_ARG_HELP ? 0 : 1;
        }
    }
    if (!tool_args_done(&ta))
        return 1;
    const char *input = ta.input, *strategy = ta.strategy, *json = ta.json, *trace = ta.trace;
    plan_strategy shown = ta.shown;
    bool all = ta.all;
    pass_options popt = ta.popt;

    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    pass_plan_input in = {0};
    plan_result res[PS_COUNT];
    bool have[PS_COUNT] = {false};
    plan_mux_result mux[PS_COUNT];
    bool have_mux[PS_COUNT] = {false};
    pass_bg_jobs bg = {0};
    ir_module *m = load_input(a, input, &d);
    if (!m || d.nerrors)
        goto done;
    pass_ctx ctx = {.m = m, .opt = &popt, .d = &d};
    if (!pass_select_job(&ctx))
        goto done;
    if (ctx.job < 0) {
        fprintf(stderr, "burstc plan: error: '%s' has no job to plan\n", input);
        goto done;
    }
    if (!ir_verify(m, &d) || !pass_plan_build(m, ctx.job, &popt, &in, &d))
        goto done;
    in.p.gpu_budget = gpu_budget;
    const ir_job *job = &m->jobs[ctx.job];
    plan_mux_options mo;
    if (!pass_mux_options(m, job, &popt, &in.p, &mo, &d))
        goto done;
    pass_bg_jobs_build(m, job, &in.p, &bg);
    char err[1024];
    /* amplification = auto with background jobs: every strategy's plan is
     * its own auto choice under the one limit (plan_mux_auto); without
     * background jobs, the fastest plan (no limit), as pass plan does. */
    bool autom = job->amplification == IR_AMP_AUTO && !frontier && !(gpu_budget > 0);
    bool auto_mux = autom && bg.n > 0;
    if (autom && !auto_mux)
        printf("amplification = auto: no background jobs, the fastest plan (no limit)\n\n");
    if (autom)
        in.p.amp_limit = 0;
    if (popt.profile)
        pass_plan_profile_summary(&in, popt.profile, stdout);

    if (frontier) {
        if (job->amplification == IR_AMP_AUTO)
            in.p.amp_limit = 0;
        /* With background jobs or --json the multiplexing goes along the
         * frontier, which it gives: it is solved once. */
        plan_point pts[64];
        plan_mux_point *mp = NULL;
        int n = 0, nm = 0;
        if (bg.n > 0 || json) {
            mp = plan_xcalloc(MUX_POINTS, sizeof *mp);
            nm = plan_mux_frontier_hull(&in.p, bg.jobs, bg.n, &mo, mp, MUX_POINTS, pts, &n);
        } else {
            n = plan_frontier(&in.p, pts, 64);
        }
        printf("Pareto frontier of burst plans: %d GPUs, global batch %lld\n", in.p.cluster.gpus,
               (long long)in.p.batch);
        printf("%14s %12s %12s %14s %12s\n", "price", "iter ms", "samples/s", "GPU-s/iter",
               "x one GPU");
        double one = plan_one_gpu_time(&in.p);
        for (int i = 0; i < n; i++)
            printf("%14.6g %12.4f %12.1f %14.6f %12.4f\n", pts[i].price, pts[i].time * 1e3,
                   (double)in.p.batch / pts[i].time, pts[i].gpu_seconds, pts[i].gpu_seconds / one);
        if (mp) {
            int nw = nm;
            if (bg.n > 0)
                print_mux_frontier(stdout, m, job, &mo, mp, nm);
            else
                for (nw = 0; nw < nm && mp[nw].vertex;)
                    nw++; /* no background: the vertices only */
            bool ok = true;
            if (json) {
                out_file o;
                ok = out_open(&o, json);
                if (ok && !plan_write_frontier_json(&in.p, mp, nw, mo.slowdown, o.fp)) {
                    out_abort(&o);
                    ok = false;
                } else if (ok) {
                    ok = out_commit(&o);
                }
            }
            for (int i = 0; i < nm; i++)
                plan_mux_point_free(&mp[i]);
            free(mp);
            if (!ok)
                goto done;
        }
        status = 0;
        goto done;
    }

    for (int s = 0; s < PS_COUNT; s++) {
        /* Only what is printed or written is solved (dp for "vs dp"). */
        if (strategy && !all && s != (int)shown && s != PS_DP && !json)
            continue;
        char why[1024];
        /* burst comes last: it takes dp's and pow2's plans, where solved, as candidates */
        const plan_result *known[PS_COUNT];
        for (int t = 0; t < PS_COUNT; t++)
            known[t] = have[t] ? &res[t] : NULL;
        bool ok = auto_mux
                      ? plan_mux_auto(&in.p, (plan_strategy)s, bg.jobs, bg.n, &mo, &res[s], &mux[s],
                                      why, sizeof why, err, sizeof err)
                      : plan_solve_known(&in.p, (plan_strategy)s, known, &res[s], err, sizeof err);
        if (!ok) {
            if (s == (int)shown || all) {
                diag_error(&d, m->jobs[ctx.job].loc, "%s plan: %s",
                           plan_strategy_name((plan_strategy)s), err);
                goto done;
            }
            fprintf(stderr, "burstc plan: note: no %s plan: %s\n",
                    plan_strategy_name((plan_strategy)s), err);
            continue;
        }
        have[s] = true;
        if (auto_mux) {
            have_mux[s] = true;
            if (s == (int)shown)
                printf("%s\n\n", why);
        }
    }
    plan_result *list[PS_COUNT];
    int nl = 0;
    for (int s = 0; s < PS_COUNT; s++) {
        if (!have[s])
            continue;
        if (all || s == (int)shown)
            print_table(stdout, &in.p, &res[s]);
        if (all || !strategy || s == (int)shown)
            list[nl++] = &res[s];
    }
    print_summary(stdout, &in.p, list, nl, have[PS_DP] ? &res[PS_DP] : NULL);
    const plan_mux_result *mlist[PS_COUNT];
    for (int i = 0; i < nl; i++) {
        int s = (int)list[i]->strategy;
        if (have_mux[s] || mux_of(&in.p, &res[s], &bg, &mo, &mux[s], err, sizeof err))
            have_mux[s] = true;
        else
            fprintf(stderr, "burstc plan: note: no multiplexing for the %s plan: %s\n",
                    plan_strategy_name((plan_strategy)s), err);
        mlist[i] = have_mux[s] ? &mux[s] : NULL;
    }
    print_mux(stdout, m, job, &mo, &in.p, list, mlist, nl, have[PS_DP] ? &res[PS_DP] : NULL);

    if (json) {
        out_file o;
        const plan_result *jl[PS_COUNT];
        const plan_mux_result *jm[PS_COUNT];
        int nj = 0;
        for (int s = 0; s < PS_COUNT; s++)
            if (have[s]) {
                if (!have_mux[s] && mux_of(&in.p, &res[s], &bg, &mo, &mux[s], err, sizeof err))
                    have_mux[s] = true;
                jm[nj] = have_mux[s] ? &mux[s] : NULL;
                jl[nj++] = &res[s];
            }
        if (!out_open(&o, json))
            goto done;
        if (!plan_write_json(&in.p, jl, jm, nj, mo.slowdown, o.fp)) {
            out_abort(&o);
            goto done;
        }
        if (!out_commit(&o))
            goto done;
    }
    if (trace) {
        out_file o;
        if (!out_open(&o, trace))
            goto done;
        int ranks_shown;
        if (!plan_write_trace(&in.p, &res[shown],
                              have_mux[shown] && mux[shown].ncopies ? &mux[shown] : NULL,
                              PLAN_TRACE_RANKS, &ranks_shown, o.fp, err, sizeof err)) {
            fprintf(stderr, "burstc plan: error: --trace: %s\n", err);
            out_abort(&o);
            goto done;
        }
        if (!out_commit(&o))
            goto done;
        if (ranks_shown < in.p.cluster.gpus)
            printf("(trace: %d of %d ranks, the lowest and an even sample of the rest)\n",
                   ranks_shown, in.p.cluster.gpus);
    }
    status = 0;
done:
    for (int s = 0; s < PS_COUNT; s++) {
        if (have[s])
            plan_result_free(&res[s]);
        if (have_mux[s])
            plan_mux_result_free(&mux[s]);
    }
    pass_bg_jobs_free(&bg);
    pass_plan_input_free(&in);
    if (d.nerrors > 0)
        status = 1;
    diag_summary(&d);
    arena_free(a);
    return status;
}
