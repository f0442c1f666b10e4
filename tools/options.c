/*
 * options.c: command-line options the burstc commands share.
 *
 * `burstc`, `burstc plan` and `burstc build` all plan a job, so they take the
 * same planning options with the same spelling (`--gpus 8` or `--gpus=8`), the
 * same checks and the same messages, prefixed by the command's name.
 */
#include "tools.h"

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

int tool_pass_option(const char *cmd, int argc, char **argv, int *i, pass_options *o)
{
    const char *v;
    char *end;
    if ((v = tool_opt_value(cmd, argc, argv, i, "--job"))) {
        o->job = v;
    } else if ((v = tool_opt_value(cmd, argc, argv, i, "--profile"))) {
        o->profile = v;
    } else if ((v = tool_opt_value(cmd, argc, argv, i, "--amplification"))) {
        o->amplification = strtod(v, &end);
        if (*end || !(o->amplification >= 1)) {
            fprintf(stderr, "%s: error: --amplification must be a number >= 1, got '%s'\n", cmd, v);
            return -1;
        }
    } else if ((v = tool_opt_value(cmd, argc, argv, i, "--slowdown"))) {
        o->slowdown = strtod(v, &end);
        if (end == v || *end || !(o->slowdown >= 1 && o->slowdown <= IR_MAX_SLOWDOWN)) {
            fprintf(stderr, "%s: error: --slowdown must be a number from 1 to 100, got '%s'\n", cmd,
                    v);
            return -1;
        }
    } else if ((v = tool_opt_value(cmd, argc, argv, i, "--gpus"))) {
        long g = strtol(v, &end, 10);
        if (*end || g < 1 || g > (1L << 20)) {
            fprintf(stderr, "%s: error: --gpus must be a positive integer, got '%s'\n", cmd, v);
            return -1;
        }
        o->gpus = (int)g;
    } else if ((v = tool_opt_value(cmd, argc, argv, i, "--batch"))) {
        long long b = strtoll(v, &end, 10);
        if (*end || b < 1 || b > IR_MAX_BATCH) {
            fprintf(stderr, "%s: error: --batch must be an integer from 1 to 2^31, got '%s'\n", cmd,
                    v);
            return -1;
        }
        o->batch = b;
    } else {
        return 0;
    }
    return 1;
}
