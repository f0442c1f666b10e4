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

/* Subcommands: argv[0] is the subcommand's name. Each returns the exit status. */
int cmd_stats(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_rank(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_profile(int argc, char **argv);

#endif
