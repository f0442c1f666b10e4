/*
 * cmd_build.c: `burstc build JOB.burst -o PROG`, from a job to a program.
 *
 * Runs the pipeline (planning with the chosen strategy), generates the program
 * (codegen/: lower.c, then llvm_emit.c for object code straight from LLVM, or
 * write_c.c for C that the system's MPI C compiler compiles) and links it with
 * the MPI C compiler against libburstrt. The program is written under a
 * temporary name and renamed when the link succeeded, so a failed build leaves
 * nothing.
 */
#include "codegen.h"
#include "passes.h"
#include "tools.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char build_usage[] =
    "usage: burstc build [options] JOB.burst -o PROG\n"
    "\n"
    "Plans the job, generates its program (object code from LLVM, or C) and links it\n"
    "against libburstrt.\n"
    "Run the result with `mpirun -np G PROG [--iterations N] [--data synthetic|fmnist]\n"
    "[--seed S] [--trace FILE] [--checkpoint-dir DIR] [--resume]` (PROG --help lists all).\n"
    "\n"
    "  -o PROG              the program to write (default: the job's name)\n"
    "  --target=cpu|cuda    the runtime to link: the CPU backend (default: oneDNN + MPI)\n"
    "                       or the CUDA backend (cuBLAS, cuDNN if built with it, NCCL)\n"
    "  --codegen=llvm|c     how the program is generated: object code through LLVM with\n"
    "                       debug info that points at the .burst file (default, for\n"
    "                       every job, background copies included), or C compiled by\n"
    "                       the MPI C compiler (BURSTC_CC)\n"
    "  --emit=c|llvm|obj    write the C source, the LLVM IR (text) or the object file to\n"
    "                       -o instead of a linked program\n"
    "  -O0|-O1|-O2|-O3      LLVM's optimisation level (default -O0: the program is calls\n"
    "                       into libburstrt, whose kernels are optimised already)\n"
    "  --triple T           LLVM's target triple for --emit=llvm|obj (default: the host)\n"
    "  --verify             run LLVM's verifier on the module (Debug builds always do)\n"
    "  --blocking-reshard   each reshard one blocking exchange at its place in graph order\n"
    "                       (the order before split-phase resharding, to measure against)\n"
    "  --job NAME           the job to build when the input holds several\n"
    "  --strategy S         burst (default), deeppool, pow2 or dp\n"
    "  --amplification X    override the job's amplification limit\n"
    "  --gpus G             plan for G ranks instead of the cluster's size\n"
    "  --profile FILE       measured per-layer times for the planner\n"
    "  --batch B            plan for a global batch of B instead of the job's\n"
    "  --slowdown X         the job's bound on its slowdown by background work (X >= 1)\n"
    "  --preempt-delay T    multiplexing on a GPU: the foreground waits at most T\n"
    "                       (e.g. 20us) for a running background kernel, which\n"
    "                       yields at thread-block granularity; the rest of a slice\n"
    "                       runs in later idle windows (default 0: a running slice\n"
    "                       finishes first; docs/plan.md, \"The sharing model\")\n"
    "  --overlap-allreduce  plan as if each gradient all-reduce overlaps backward\n"
    "  --help               show this help\n"
    "\n"
    "environment: BURSTC_CC (default mpicc) compiles the program; BURSTC_CFLAGS adds flags;\n"
    "  BURSTC_LLVM_MODULE: the LLVM writer (default: burstc-llvm.so beside burstc).\n";

/* Runs argv, waits, and returns its exit status (or -1 if it did not start). */
static int run(char **argv)
{
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
    if (err) {
        fprintf(stderr, "burstc build: error: cannot run '%s': %s\n", argv[0], strerror(err));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Compiles the C source, or links the object file, csrc into the program. */
static bool compile_program(const char *csrc, const char *output, bool cuda)
{
    const char *cc = getenv("BURSTC_CC");
    if (!cc || !*cc)
        cc = "mpicc";
    size_t n = strlen(output) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return false;
    snprintf(tmp, n, "%s.tmpXXXXXX", output);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fprintf(stderr, "burstc build: error: cannot write '%s': %s\n", output, strerror(errno));
        free(tmp);
        return false;
    }
    close(fd);
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)cc;
    argv[argc++] = "-O2";
    argv[argc++] = "-std=c17";
    char *extra = NULL;
    const char *env_flags = getenv("BURSTC_CFLAGS");
    char *flags_copy = strdup(BURSTRT_EXTRA_FLAGS " ");
    size_t elen = strlen(flags_copy) + (env_flags ? strlen(env_flags) : 0) + 2;
    extra = malloc(elen);
    snprintf(extra, elen, "%s%s", flags_copy, env_flags ? env_flags : "");
    free(flags_copy);
    char *save = NULL;
    for (char *t = strtok_r(extra, " ", &save); t && argc < 40; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc++] = "-I" BURSTRT_INCLUDE_DIR;
    argv[argc++] = (char *)csrc;
#ifdef BURSTRT_CUDA_LIBRARY
    if (cuda) {
        argv[argc++] = BURSTRT_CUDA_LIBRARY;
        argv[argc++] = "-L" BURSTRT_CUDA_LIBDIR;
        argv[argc++] = "-Wl,-rpath," BURSTRT_CUDA_LIBDIR;
        argv[argc++] = "-lcudart";
        argv[argc++] = "-lcublas";
        argv[argc++] = "-lnccl";
#ifdef BURSTRT_CUDA_CUDNN_LIB
        argv[argc++] = BURSTRT_CUDA_CUDNN_LIB;
#endif
        argv[argc++] = "-lstdc++";
    }
#endif
    if (!cuda) {
        argv[argc++] = BURSTRT_LIBRARY;
        argv[argc++] = BURSTRT_DNNL;
        argv[argc++] = BURSTRT_OPENMP;
        argv[argc++] = BURSTRT_BLAS;
    }
    char *image_libs = strdup(BURSTRT_IMAGE_LINK " ");
    save = NULL;
    for (char *t = strtok_r(image_libs, " ", &save); t && argc < 56; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc++] = "-lz";
    argv[argc++] = "-lpthread";
    argv[argc++] = "-lm";
    argv[argc++] = "-o";
    argv[argc++] = tmp;
    argv[argc] = NULL;
    int st = run(argv);
    bool ok = st == 0;
    if (!ok && st >= 0)
        fprintf(stderr,
                "burstc build: error: %s failed (exit status %d) on the generated program\n", cc,
                st);
    if (ok && rename(tmp, output) != 0) {
        fprintf(stderr, "burstc build: error: cannot write '%s': %s\n", output, strerror(errno));
        ok = false;
    }
    if (!ok)
        unlink(tmp);
    free(extra);
    free(image_libs);
    free(tmp);
    return ok;
}

int cmd_build(int argc, char **argv)
{
    tool_args ta = {.cmd = "burstc build", .usage = build_usage, .takes = TOOL_TAKES_STRATEGY};
    const char *output = NULL, *emit = NULL;
    bool cuda = false, llvm = true;
    /* -O0 by default: the program is glue between runtime calls (the kernels
     * are libburstrt's, compiled once), so LLVM's pipelines cost build time
     * and buy no training speed (docs/build.md has the numbers). */
    cg_llvm_options lopt = {.opt_level = 0, .producer = "burstc " BURSTC_VERSION};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int r;
        if ((v = tool_opt_value("burstc build", argc, argv, &i, "--emit"))) {
            if (strcmp(v, "c") != 0 && strcmp(v, "llvm") != 0 && strcmp(v, "obj") != 0) {
                fprintf(stderr,
                        "burstc build: error: unknown --emit kind '%s' (expected c, llvm or obj)\n",
                        v);
                return 1;
            }
            emit = v;
        } else if ((v = tool_opt_value("burstc build", argc, argv, &i, "--codegen"))) {
            if (strcmp(v, "c") != 0 && strcmp(v, "llvm") != 0) {
                fprintf(stderr,
                        "burstc build: error: unknown code generator '%s' (expected llvm or c)\n",
                        v);
                return 1;
            }
            llvm = strcmp(v, "llvm") == 0;
        } else if ((v = tool_opt_value("burstc build", argc, argv, &i, "--triple"))) {
            lopt.triple = v;
        } else if (strcmp(a, "--verify") == 0) {
            lopt.verify = true;
        } else if (strcmp(a, "--blocking-reshard") == 0) {
            lopt.cg.blocking_reshard = true;
        } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) {
            lopt.opt_level = a[2] - '0';
        } else if ((v = tool_opt_value("burstc build", argc, argv, &i, "--target"))) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                fprintf(stderr, "burstc build: error: unknown target '%s' (expected cpu or cuda)\n",
                        v);
                return 1;
            }
            cuda = strcmp(v, "cuda") == 0;
#ifndef BURSTRT_CUDA_LIBRARY
            if (cuda) {
                fputs("burstc build: error: this burstc was built without the CUDA backend "
                      "(CMake found no nvcc)\n",
                      stderr);
                return 1;
            }
#endif
        } else if ((v = tool_opt_value("burstc build", argc, argv, &i, "-o"))) {
            output = v;
        } else if ((r = tool_arg(&ta, argc, argv, &i)) != TOOL_ARG_TAKEN) {
            return r == TOOL_ARG_HELP ? 0 : 1;
        }
    }
    if (!tool_args_done(&ta))
        return 1;
    const char *input = ta.input;
    pass_options popt = ta.popt;
    if (emit)
        llvm = strcmp(emit, "c") != 0;
    if (lopt.triple && (!emit || !llvm)) {
        fputs("burstc build: error: --triple applies to --emit=llvm and --emit=obj (a linked "
              "program is built for this machine)\n",
              stderr);
        return 1;
    }
    arena *ar = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    if (llvm && !cg_llvm_check_target(lopt.triple, &d))
        goto done;
    ir_module *m = load_input(ar, input, &d);
    if (!m || d.nerrors)
        goto done;
    pass_ctx ctx = {.m = m, .opt = &popt, .d = &d};
    if (!pass_select_job(&ctx) || !pass_run_pipeline(&ctx, NULL, NULL, NULL))
        goto done;
    if (ctx.job < 0) {
        fprintf(stderr, "burstc build: error: %s holds no job to build\n", input);
        goto done;
    }
    if (!output)
        output = emit ? "-" : m->jobs[ctx.job].name;
    if (emit && !llvm) {
        status = out_write_c_program(output, m, ctx.job, &lopt.cg, &d) ? 0 : 1;
        goto done;
    }
    if (emit) {
        lopt.kind = strcmp(emit, "obj") == 0 ? CG_LLVM_OBJ : CG_LLVM_IR;
        status = out_write_llvm_program(output, m, ctx.job, &lopt, &d) ? 0 : 1;
        goto done;
    }
    /* The source goes to a private temporary folder, removed afterwards. */
    char dir[] = "/tmp/burstc-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "burstc build: error: cannot create a temporary folder: %s\n",
                strerror(errno));
        goto done;
    }
    char csrc[sizeof dir + 16];
    snprintf(csrc, sizeof csrc, "%s/program.%s", dir, llvm ? "o" : "c");
    FILE *f = fopen(csrc, "w");
    lopt.kind = CG_LLVM_OBJ;
    bool ok = f && (llvm ? cg_emit_llvm(f, m, ctx.job, &lopt, &d)
                         : cg_emit_c(f, m, ctx.job, &lopt.cg, &d));
    if (f && fclose(f) != 0)
        ok = false;
    if (ok)
        status = compile_program(csrc, output, cuda) ? 0 : 1;
    unlink(csrc);
    rmdir(dir);
done:
    diag_summary(&d);
    arena_free(ar);
    return status;
}
