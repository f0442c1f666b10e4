/*
 * main.c: the burstc command.
 *
 * `burstc [options] FILE` compiles: it reads Burst source (or IR text, for a
 * `.ir` file), runs the pass pipeline and emits what --emit asks for.
 * Subcommands (`burstc stats`, `burstc plan`, `burstc tune`, `burstc rank`, `burstc import`) live in their own
 * files. Exit status: 0 on success, 1 on user errors, 2 on internal errors.
 */
#include "codegen.h"
#include "frontend.h"
#include "passes.h"
#include "tools.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: burstc [options] FILE            compile a .burst (or .ir) file\n"
    "       burstc stats [options] FILE      parameters, FLOPs and activations per layer (burstc stats --help)\n"
    "       burstc plan [options] JOB.burst  plan a job (burstc plan --help)\n"
    "       burstc build [options] JOB.burst -o PROG   build a job's training program (burstc build --help)\n"
    "       burstc sim [options] JOB.burst   simulate a planned job on its cluster (burstc sim --help)\n"
    "       burstc tune [options] JOB.burst  choose a plan from head-to-head runs (burstc tune --help)\n"
    "       burstc rank [options] FILE       top-K ranking from comparisons (burstc rank --help)\n"
    "       burstc import [options] MODEL.onnx   an ONNX model as Burst source (burstc import --help)\n"
    "       burstc export CKPT_DIR -o FILE.safetensors --job JOB.burst   a checkpoint's weights\n"
    "                       (safetensors, or ONNX with --format onnx; burstc export --help)\n"
    "       burstc profile [options] JOB.burst   measure per-layer times here (burstc profile --help)\n"
    "\n"
    "options:\n"
    "  --emit=ast|ir|c|llvm|obj\n"
    "                       what to write: the parsed syntax tree, the IR (default), or the\n"
    "                       job's training program as C, LLVM IR (text) or an object file,\n"
    "                       as burstc build --emit writes it (burstc build links a program)\n"
    "  -O0|-O1|-O2|-O3      LLVM's optimisation level for --emit=llvm|obj (default -O0)\n"
    "  --triple T           LLVM's target triple for --emit=llvm|obj (default: the host)\n"
    "  --verify             run LLVM's verifier on the module (Debug builds always do)\n"
    "  --blocking-reshard   for --emit=c|llvm|obj: each reshard one blocking exchange at its\n"
    "                       place in graph order (the order before split-phase resharding)\n"
    "  --stop-after=PASS    stop the pipeline after PASS (parse, lower, or a pass below)\n"
    "  --dump-after=PASS    print the IR to standard error after PASS ('all': after every pass)\n"
    "  --job NAME           the job to compile when the input holds several (default: the last)\n"
    "  --strategy S         planning strategy: burst (default), deeppool, pow2 or dp\n"
    "  --amplification X    override the job's amplification limit\n"
    "  --profile FILE       measured per-layer times to use in place of the cost model\n"
    "  --gpus G             plan for G GPUs (whole nodes of the job's cluster) instead of its size\n"
    "  --batch B            plan for a global batch of B instead of the job's\n"
    "  --slowdown X         the job's bound on its slowdown by background work (X >= 1;\n"
    "                       default: the job's, else 1.1)\n"
    "  --preempt-delay T    multiplexing on a GPU: the foreground waits at most T\n"
    "                       (e.g. 20us) for a running background kernel, which\n"
    "                       yields at thread-block granularity; the rest of a slice\n"
    "                       runs in later idle windows (default 0: a running slice\n"
    "                       finishes first; docs/plan.md, \"The sharing model\")\n"
    "  --overlap-allreduce  plan as if each gradient all-reduce overlaps backward\n"
    "  -o FILE              write the output to FILE (atomically; default: standard output)\n"
    "  --help               show this help and exit\n"
    "  --version            show the version and exit\n"
    "\n"
    "FILE ending in .ir is read as IR text (the format --emit=ir writes, docs/ir.md);\n"
    "anything else as Burst source (docs/language.md). '-' is not accepted: name a file.\n"
    "--emit=llvm|obj loads the LLVM writer, burstc-llvm.so beside burstc (or the file\n"
    "the environment's BURSTC_LLVM_MODULE names).\n"
    "\n"
    "exit status: 0 success, 1 errors in the input, 2 internal compiler error\n";

static void print_passes(FILE *out)
{
    fputs("\npasses, in order:\n  parse                read the source into a syntax tree\n"
          "  lower                check it and lower it to IR\n",
          out);
    for (int i = 0; i < pass_count; i++)
        fprintf(out, "  %-20s %s\n", pass_table[i].name, pass_table[i].help);
}

static int compile_main(int argc, char **argv)
{
    const char *emit = "ir", *stop_after = NULL, *dump_after = NULL, *output = "-", *input = NULL;
    pass_options popt = {.strategy = "burst"};
    /* --emit=llvm|obj: burstc build's defaults (-O0, the host). */
    cg_llvm_options lopt = {.opt_level = 0, .producer = "burstc " BURSTC_VERSION};
    bool llvm_opts = false; /* an LLVM option was given */
    for (int i = 1; i < argc; i++) {
        const char *v;
        const char *a = argv[i];
        int shared;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            print_passes(stdout);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("burstc %s\n", BURSTC_VERSION);
            return 0;
        } else if ((v = tool_opt_value("burstc", argc, argv, &i, "--emit"))) {
            emit = v;
        } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) {
            lopt.opt_level = a[2] - '0';
            llvm_opts = true;
        } else if ((v = tool_opt_value("burstc", argc, argv, &i, "--triple"))) {
            lopt.triple = v;
            llvm_opts = true;
        } else if (strcmp(a, "--verify") == 0) {
            lopt.verify = true;
            llvm_opts = true;
        } else if (strcmp(a, "--blocking-reshard") == 0) {
            lopt.cg.blocking_reshard = true;
        } else if ((v = tool_opt_value("burstc", argc, argv, &i, "--stop-after"))) {
            stop_after = v;
        } else if ((v = tool_opt_value("burstc", argc, argv, &i, "--dump-after"))) {
            dump_after = v;
        } else if ((v = tool_opt_value("burstc", argc, argv, &i, "--strategy"))) {
            popt.strategy = v;
        } else if ((shared = tool_pass_option("burstc", argc, argv, &i, &popt)) != 0) {
            if (shared < 0)
                return 1;
        } else if ((v = tool_opt_value("burstc", argc, argv, &i, "-o"))) {
            output = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "burstc: error: unknown option '%s' (see burstc --help)\n", argv[i]);
            return 1;
        } else if (input) {
            fprintf(stderr, "burstc: error: more than one input file ('%s' and '%s')\n", input,
                    argv[i]);
            return 1;
        } else {
            input = argv[i];
        }
    }
    if (!input) {
        fputs("burstc: error: no input file\n", stderr);
        fputs(usage, stderr);
        return 1;
    }
    bool program = strcmp(emit, "c") == 0 || strcmp(emit, "llvm") == 0 || strcmp(emit, "obj") == 0;
    bool llvm = program && strcmp(emit, "c") != 0;
    if (strcmp(emit, "ast") != 0 && strcmp(emit, "ir") != 0 && !program) {
        fprintf(stderr,
                "burstc: error: unknown --emit kind '%s' (expected ast, ir, c, llvm or obj)\n",
                emit);
        return 1;
    }
    if (llvm_opts && !llvm) {
        fputs("burstc: error: -O, --triple and --verify apply to --emit=llvm and --emit=obj\n",
              stderr);
        return 1;
    }
    plan_strategy strategy;
    if (!plan_strategy_lookup(popt.strategy, &strategy)) {
        fprintf(stderr,
                "burstc: error: unknown strategy '%s' (expected burst, deeppool, pow2 or dp)\n",
                popt.strategy);
        return 1;
    }
    for (int k = 0; k < 2; k++) {
        const char *p = k ? dump_after : stop_after;
        if (p && strcmp(p, "parse") && strcmp(p, "lower") && pass_find(p) < 0 &&
            !(k && strcmp(p, "all") == 0)) {
            fprintf(stderr, "burstc: error: unknown pass '%s' (burstc --help lists them)\n", p);
            return 1;
        }
    }
    if (stop_after && strcmp(stop_after, "parse") == 0) {
        emit = "ast";
        llvm = program = false;
    }

    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    out_file out;
    if (llvm && !cg_llvm_check_target(lopt.triple, &d))
        goto done;
    if (strcmp(emit, "ast") == 0) {
        if (tool_is_ir_file(input)) {
            fputs("burstc: error: --emit=ast needs Burst source, not IR\n", stderr);
            goto done;
        }
        if (!out_open(&out, output))
            goto done;
        if (!fe_dump_ast(out.fp, a, input, &d)) {
            out_abort(&out);
            goto done;
        }
        status = out_commit(&out) ? 0 : 1;
        goto done;
    }
    ir_module *m = load_input(a, input, &d);
    if (!m || d.nerrors)
        goto done;
    if (dump_after && strcmp(dump_after, "lower") == 0)
        ir_print_module(stderr, m);
    bool frontend_only = stop_after && strcmp(stop_after, "lower") == 0;
    pass_ctx ctx = {.m = m, .opt = &popt, .d = &d, .job = -1};
    if (!frontend_only &&
        (!pass_select_job(&ctx) || !pass_run_pipeline(&ctx, stop_after, dump_after, stderr)))
        goto done;
    if (program) {
        if (frontend_only || ctx.job < 0) {
            fprintf(stderr, "burstc: error: --emit=%s needs a job (and the planning passes)\n",
                    emit);
            goto done;
        }
        if (llvm) {
            lopt.kind = strcmp(emit, "obj") == 0 ? CG_LLVM_OBJ : CG_LLVM_IR;
            status = out_write_llvm_program(output, m, ctx.job, &lopt, &d) ? 0 : 1;
        } else {
            status = out_write_c_program(output, m, ctx.job, &lopt.cg, &d) ? 0 : 1;
        }
        goto done;
    }
    if (!out_open(&out, output))
        goto done;
    ir_print_module(out.fp, m);
    status = out_commit(&out) ? 0 : 1;
done:
    if (d.nerrors > 0)
        status = 1;
    diag_summary(&d);
    arena_free(a);
    return status;
}

int main(int argc, char **argv)
{
    if (argc >= 2) {
        if (strcmp(argv[1], "stats") == 0)
            return cmd_stats(argc - 1, argv + 1);
        if (strcmp(argv[1], "plan") == 0)
            return cmd_plan(argc - 1, argv + 1);
        if (strcmp(argv[1], "build") == 0)
            return cmd_build(argc - 1, argv + 1);
        if (strcmp(argv[1], "sim") == 0)
            return cmd_sim(argc - 1, argv + 1);
        if (strcmp(argv[1], "tune") == 0)
            return cmd_tune(argc - 1, argv + 1);
        if (strcmp(argv[1], "rank") == 0)
            return cmd_rank(argc - 1, argv + 1);
        if (strcmp(argv[1], "import") == 0)
            return cmd_import(argc - 1, argv + 1);
        if (strcmp(argv[1], "export") == 0)
            return cmd_export(argc - 1, argv + 1);
        if (strcmp(argv[1], "profile") == 0)
            return cmd_profile(argc - 1, argv + 1);
    }
    return compile_main(argc, argv);
}
