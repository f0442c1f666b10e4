/*
 * tools.h: the internal header of tools/, the burstc command.
 *
 * main.c parses the global options and dispatches subcommands; each
 * subcommand lives in its own cmd_*.c. Shared here, below both: loading an
 * input (Burst source or IR text, chosen by extension; input.c), writing
 * outputs atomically (output.c) and the options they share (options.c).
 */
#ifndef BURSTC_TOOLS_H
#define BURSTC_TOOLS_H

#include <stdbool.h>
#include <stdio.h>

#include "ir.h"
#include "passes.h"

/* input.c */

/* Reads FILE: `.ir` through the IR reader, anything else through the front
 * end. Errors go through d; returns NULL or a module with d->nerrors > 0 on
 * failure. */
ir_module *load_input(arena *a, const char *path, diag_ctx *d);
/* Whether path names IR text (ends in .ir) rather than Burst source. */
bool tool_is_ir_file(const char *path);

/* output.c */

/* An output file written to a temporary name and renamed into place on
 * commit, so a failed run never leaves a half-written file. A path of "-"
 * means standard output. */
typedef struct out_file {
    FILE *fp;
    const char *path;
    char *tmp;
} out_file;

bool out_open(out_file *o, const char *path);
/* Flushes, closes and renames; false (with a message) if any write failed. */
bool out_commit(out_file *o);
void out_abort(out_file *o);
struct cg_options;
/* Writes job `job`'s C program (codegen/, as o says; NULL: the defaults) to path
 * atomically; false on errors. */
bool out_write_c_program(const char *path, const ir_module *m, int job, const struct cg_options *o,
                         diag_ctx *d);
/* Writes its LLVM IR or object file (codegen/llvm_*.c, as o says) the same way. */
struct cg_llvm_options;
bool out_write_llvm_program(const char *path, const ir_module *m, int job,
                            const struct cg_llvm_options *o, diag_ctx *d);

/* options.c */

/* Matches --name=value or --name value at argv[*i], advancing *i past what it
 * used; NULL if argv[*i] is another option. A missing value exits with status 1. */
const char *tool_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name);
/* The planning options: --job, --profile, --gpus, --overlap-allreduce, and the
 * job fields --batch, --amplification and --slowdown. Returns 1 if argv[*i] was one of them,
 * 0 if not, -1 on a bad value (reported, as CMD: error). */
int tool_pass_option(const char *cmd, int argc, char **argv, int *i, pass_options *o);
/* An argument no option took: an unknown option, a second input file (both reported as
 * CMD: error, returning false), or the input, stored in *input. */
bool tool_input_arg(const char *cmd, const char *arg, const char **input);

/* The arguments of a command that plans one input (burstc plan, sim, tune,
 * build): the input, --help, the planning options (tool_pass_option) and, as
 * `takes` says, --strategy, --json FILE and --trace FILE. One loop for all of
 * them, so each spelling, check and message is written once. */
enum {
    TOOL_TAKES_STRATEGY = 1, /* --strategy dp|deeppool|pow2|burst */
    TOOL_TAKES_ALL = 2,      /* ... or all */
    TOOL_TAKES_JSON = 4,     /* --json FILE */
    TOOL_TAKES_TRACE = 8,    /* --trace FILE */
};
typedef struct tool_args {
    const char *cmd;   /* "burstc plan": the prefix of every message */
    const char *usage; /* --help's text, also shown after "no input file" */
    unsigned takes;    /* TOOL_TAKES_* */
    const char *input, *json, *trace;
    const char *strategy; /* as given; NULL if not */
    plan_strategy shown;  /* after tool_args_done: the strategy (burst by default) */
    bool all;             /* --strategy all */
    pass_options popt;    /* the planning options; popt.strategy set by tool_args_done */
} tool_args;
/* What tool_arg did with argv[*i]. */
enum { TOOL_ARG_TAKEN, TOOL_ARG_HELP, TOOL_ARG_ERROR };
/* Takes argv[*i] (advancing *i past an option's value): one of the options
 * above or the input. Call it after the command's own options, as the last
 * branch of the loop: what it does not know is an error (reported).
 * TOOL_ARG_HELP: the usage went to standard output, exit 0; TOOL_ARG_ERROR: exit 1. */
int tool_arg(tool_args *a, int argc, char **argv, int *i);
/* After the loop: checks that an input was given, that --json and --trace name
 * files (not "-": the table goes to standard output) and the strategy;
 * false (reported) if not. */
bool tool_args_done(tool_args *a);

/* Subcommands: argv[0] is the subcommand's name. Each returns the exit status. */
int cmd_stats(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_rank(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_profile(int argc, char **argv);

#endif
