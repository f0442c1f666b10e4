/*
 * options.c: command-line options the burstc commands share.
 *
 * `burstc`, `burstc plan` and `burstc build` all plan a job, so they take the
 * same planning options with the same spelling (`--gpus 8` or `--gpus=8`), the
 * same checks and the same messages, prefixed by the command's name. Options
 * that set a job's field go through the job table (ir/job.c); the pipeline
 * writes them into the job (passes/pipeline.c), once.
 */
#include "tools.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *tool_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != 0)
        return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: error: %s needs a value\n", cmd, name);
        exit(1);
    }
    return argv[++*i];
}

/* Options that set a field of the job, through the job table (ir/job.c):
 * the same conversions, rules and messages as the field in a .burst file. */
static const struct {
    const char *option, *field;
} job_options[] = {
    {"--batch", "batch"}, {"--amplification", "amplification"}, {"--slowdown", "slowdown"}};

int tool_pass_option(const char *cmd, int argc, char **argv, int *i, pass_options *o)
{
    const char *v;
    char *end;
    if (strcmp(argv[*i], "--overlap-allreduce") == 0) {
        o->overlap_allreduce = true;
        return 1;
    }
    if ((v = tool_opt_value(cmd, argc, argv, i, "--preempt-delay"))) {
        /* seconds, or with a unit: 20us, 0.02ms, 2e-5s */
        double x = strtod(v, &end), scale = 1;
        if (strcmp(end, "us") == 0)
            scale = 1e-6;
        else if (strcmp(end, "ms") == 0)
            scale = 1e-3;
        else if (*end && strcmp(end, "s") != 0)
            end = NULL;
        if (end == v || !end || !(x >= 0) || !isfinite(x) || x * scale > 1) {
            fprintf(stderr,
                    "%s: error: --preempt-delay must be a time from 0 to 1 s (e.g. 20us), got "
                    "'%s'\n",
                    cmd, v);
            return -1;
        }
        o->preempt_delay = x * scale;
        return 1;
    }
    if ((v = tool_opt_value(cmd, argc, argv, i, "--job"))) {
        o->job = v;
        return 1;
    }
    if ((v = tool_opt_value(cmd, argc, argv, i, "--profile"))) {
        o->profile = v;
        return 1;
    }
    if ((v = tool_opt_value(cmd, argc, argv, i, "--gpus"))) {
        long g = strtol(v, &end, 10);
        if (*end || g < 1 || g > IR_MAX_GPUS) {
            fprintf(stderr, "%s: error: --gpus must be a positive integer, got '%s'\n", cmd, v);
            return -1;
        }
        o->gpus = (int)g;
        return 1;
    }
    for (size_t n = 0; n < sizeof job_options / sizeof *job_options; n++) {
        if (!(v = tool_opt_value(cmd, argc, argv, i, job_options[n].option)))
            continue;
        char msg[256];
        if (!pass_options_job_field(o, job_options[n].field, v, msg, sizeof msg)) {
            fprintf(stderr, "%s: error: %s %s: %s\n", cmd, job_options[n].option, v, msg);
            return -1;
        }
        return 1;
    }
    return 0;
}

bool tool_input_arg(const char *cmd, const char *arg, const char **input)
{
    if (arg[0] == '-' && arg[1]) {
        fprintf(stderr, "%s: error: unknown option '%s' (see %s --help)\n", cmd, arg, cmd);
        return false;
    }
    if (*input) {
        fprintf(stderr, "%s: error: more than one input file ('%s' and '%s')\n", cmd, *input, arg);
        return false;
    }
    *input = arg;
    return true;
}

int tool_arg(tool_args *a, int argc, char **argv, int *i)
{
    const char *v;
    int shared;
    if (strcmp(argv[*i], "--help") == 0 || strcmp(argv[*i], "-h") == 0) {
        fputs(a->usage, stdout);
        return TOOL_ARG_HELP;
    }
    if ((a->takes & TOOL_TAKES_STRATEGY) &&
        (v = tool_opt_value(a->cmd, argc, argv, i, "--strategy"))) {
        a->strategy = v;
        return TOOL_ARG_TAKEN;
    }
    if ((a->takes & TOOL_TAKES_JSON) && (v = tool_opt_value(a->cmd, argc, argv, i, "--json"))) {
        a->json = v;
        return TOOL_ARG_TAKEN;
    }
    if ((a->takes & TOOL_TAKES_TRACE) && (v = tool_opt_value(a->cmd, argc, argv, i, "--trace"))) {
        a->trace = v;
        return TOOL_ARG_TAKEN;
    }
    if ((shared = tool_pass_option(a->cmd, argc, argv, i, &a->popt)) != 0)
        return shared < 0 ? TOOL_ARG_ERROR : TOOL_ARG_TAKEN;
    return tool_input_arg(a->cmd, argv[*i], &a->input) ? TOOL_ARG_TAKEN : TOOL_ARG_ERROR;
}

bool tool_args_done(tool_args *a)
{
    if (!a->input) {
        fprintf(stderr, "%s: error: no input file\n", a->cmd);
        fputs(a->usage, stderr);
        return false;
    }
    const char *outs[2] = {a->json, a->trace}, *names[2] = {"--json", "--trace"};
    for (int k = 0; k < 2; k++)
        if (outs[k] && strcmp(outs[k], "-") == 0) {
            fprintf(stderr, "%s: error: %s needs a file name: the table goes to standard output\n",
                    a->cmd, names[k]);
            return false;
        }
    a->shown = PS_BURST;
    a->all = (a->takes & TOOL_TAKES_ALL) && a->strategy && strcmp(a->strategy, "all") == 0;
    if (a->strategy && !a->all && !plan_strategy_lookup(a->strategy, &a->shown)) {
        fprintf(stderr, "%s: error: unknown strategy '%s' (expected %s)\n", a->cmd, a->strategy,
                (a->takes & TOOL_TAKES_ALL) ? "dp, deeppool, pow2, burst or all"
                                            : "dp, deeppool, pow2 or burst");
        return false;
    }
    a->popt.strategy = plan_strategy_name(a->shown);
    return true;
}
