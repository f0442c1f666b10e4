/*
 * cmd_profile.c: `burstc profile JOB.burst`, per-layer times measured on this
 * machine, written as a profile that `burstc plan --profile` reads.
 *
 * For every per-GPU batch the planner can choose (the powers of two up to the
 * job's batch, and the batch itself; or --batches), it builds the job as a
 * one-rank program at that batch, through `burstc build` itself (cmd_build(),
 * in this process), and runs it on this machine's backend with warm-up steps
 * and timed steps, pinned to the first CPUs this process may use. The runs go
 * in rounds: every round runs every batch's program once, so that a stretch
 * of seconds in which the machine is slow (another process, a virtual
 * machine's host) spoils one run of each batch, not every sample of one. It
 * reads the Chrome trace that every generated program writes with --trace:
 * each layer's forward span is called after the layer and its backward span
 * NAME.bwd (codegen/lower.c); an input's span is the time its data takes to
 * arrive; the optimizer's update is the span optimizer.step (runtime/optim.c).
 * With --concurrent N each round runs N copies at once and keeps, at each
 * timed step, the slowest copy's time of every column (the ranks of a
 * synchronous plan wait for the slowest). The medians over the timed steps of
 * all rounds and their interquartile
 * ranges become `layer` lines and one `optimizer` line per batch
 * (passes/profile.c, docs/plan.md):
 *
 *   layer{"name":"conv1","op":"conv2d"}[8][1,28,28]  fwd_ms  bwd_ms  fwd_iqr  bwd_iqr
 *   layer{"name":"x","op":"input"}[8][]  fwd_ms  0  fwd_iqr  0
 *   optimizer{"op":"sgd","params":431080}[8][]  ms  iqr
 *
 * A batch whose one-rank plan does not fit the GPU's memory is skipped with a
 * note. The profile is written to a temporary file and renamed at the end.
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include "passes.h"
#include "plan.h"
#include "readfile.h"
#include "tools.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char profile_usage[] =
    "usage: burstc profile [options] JOB.burst\n"
    "\n"
    "Measures every layer's forward and backward time on this machine at each per-GPU\n"
    "batch the planner can choose, the time its inputs' data take and the optimizer's\n"
    "update, and writes a profile for `burstc plan --profile` (docs/plan.md, \"Measured\n"
    "profiles\"). Each batch is a one-rank program of the job built as `burstc build\n"
    "--gpus 1 --batch B` builds it, run on synthetic data (or the job's, --data) in\n"
    "rounds (each round runs every batch once: warm-up steps, then timed steps); a\n"
    "layer's time is the median over the timed steps of all rounds.\n"
    "\n"
    "  -o PROFILE           where to write the profile (default: JOBNAME.profile);\n"
    "                       written atomically, '-' for standard output\n"
    "  --batches LIST       per-GPU batches to measure, e.g. 1,2,4,8 (default: the\n"
    "                       powers of two below the job's batch, and the batch)\n"
    "  --target=cpu|cuda    the backend to measure: the CPU (default: wall clock,\n"
    "                       the program pinned to the first CPUs this process may use)\n"
    "                       or the GPU (each op waited for; CUDA graphs off)\n"
    "  --threads N          CPU threads of the program (default 1: one rank per core,\n"
    "                       as the `cpu` device of examples/clusters/cpu.burst)\n"
    "  --rounds N           rounds of runs (default 3)\n"
    "  --concurrent N       run N copies of each program at once, each on its own\n"
    "                       --threads CPUs, and keep at each step the slowest copy's\n"
    "                       times: the layers' times with N ranks sharing the\n"
    "                       machine, as a plan of N ranks per node waits for its\n"
    "                       slowest rank (default 1)\n"
    "  --data D             the data the programs train on: synthetic (default),\n"
    "                       job (the job's own), or fmnist[:DIR], npy:X.npy,Y.npy,\n"
    "                       images:DIR or tokens[32]:FILE as the program's --data\n"
    "                       takes it; the inputs' lines measure its arrival\n"
    "                       (a dataset's runs also evaluate its test set after\n"
    "                       their steps, untimed)\n"
    "  --warmup N           untimed steps at the start of each run (default 2)\n"
    "  --repeat N           timed steps of each run (default 5)\n"
    "  --job NAME           the job to profile when the file holds several\n"
    "  --help               show this help\n"
    "\n"
    "exit status: 0 success, 1 errors in the input or a run that failed, 2 internal error\n";

#define MAX_BATCHES    64
#define MAX_STEPS      100000
#define MAX_ROUNDS     100
#define MAX_CONCURRENT 64

typedef struct layer_info {
    const char *name;
    const char *op;
    int nshape;
    const int64_t *shape; /* per sample: the first input's dims without the batch */
} layer_info;

typedef struct profile_run {
    const char *input, *job_name, *target, *optimizer;
    bool cuda;
    const char *data; /* the programs' --data (NULL: the job's own, the program's default) */
    int threads, warmup, repeat, rounds, concurrent;
    int samples; /* room per batch: rounds x repeat, x concurrent while a round's copies are read */
    char dir[32];  /* private temporary folder */
    double params; /* the model's trainable parameters */
    int nlayers;
    layer_info *layers;
    int *by_name; /* layer indices sorted by name */
} profile_run;

/* One batch's measurements: per layer and timed step (all rounds) the summed
 * durations (ms) of its forward and backward spans, [layer * samples + step];
 * per timed step the optimizer's update and the time outside the spans (read
 * as the whole step, then less the spans: outside_spans). */
typedef struct batch_run {
    int64_t batch;
    enum { B_SKIPPED, B_BUILT } state;
    int done; /* timed steps recorded so far */
    double *fwd, *bwd, *opt, *iter;
    bool has_opt;
} batch_run;

/* --batches: a comma-separated list of integers 1..2^31, sorted, duplicates
 * dropped. False (reported) on anything else. */
static bool parse_batches(const char *s, int64_t *out, int *n)
{
    *n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 1 || v > IR_MAX_BATCH || (*end && *end != ',')) {
            fprintf(stderr,
                    "burstc profile: error: --batches takes integers from 1 to 2^31 separated "
                    "by commas, got '%s'\n",
                    s);
            return false;
        }
        bool dup = false;
        for (int i = 0; i < *n; i++)
            dup |= out[i] == v;
        if (!dup) {
            if (*n == MAX_BATCHES) {
                fprintf(stderr, "burstc profile: error: --batches lists more than %d batches\n",
                        MAX_BATCHES);
                return false;
            }
            int i = (*n)++;
            while (i > 0 && out[i - 1] > v) {
                out[i] = out[i - 1];
                i--;
            }
            out[i] = v;
        }
        if (!*end)
            return true;
        p = end + 1;
    }
}

static bool parse_count(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "burstc profile: error: %s must be an integer from %d to %d, got '%s'\n",
                opt, lo, hi, v);
        return false;
    }
    *out = (int)x;
    return true;
}

static const profile_run *sort_run;

static int by_name_cmp(const void *a, const void *b)
{
    return strcmp(sort_run->layers[*(const int *)a].name, sort_run->layers[*(const int *)b].name);
}

/* The layer called name (n bytes), or -1. */
static int layer_index(const profile_run *r, const char *name, size_t n)
{
    int lo = 0, hi = r->nlayers - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const char *s = r->layers[r->by_name[mid]].name;
        int c = strncmp(s, name, n);
        if (c == 0 && s[n] != 0)
            c = 1;
        if (c == 0)
            return r->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Whether the one-rank plan of the job at batch b fits the GPU's memory;
 * why gets the planner's reason when it does not. The job is read afresh:
 * pass_select_job writes the overrides (one GPU, the batch) into the module. */
static bool fits_one_gpu(const profile_run *r, int64_t b, char *why, size_t n, diag_ctx *d)
{
    char batch[32];
    snprintf(batch, sizeof batch, "%lld", (long long)b);
    pass_options o = {.strategy = "dp", .gpus = 1, .job = r->job_name};
    if (!pass_options_job_field(&o, "batch", batch, why, n))
        return false;
    arena *a = arena_new();
    ir_module *m = load_input(a, r->input, d);
    pass_ctx ctx = {.m = m, .opt = &o, .d = d, .job = -1};
    pass_plan_input in = {0};
    bool ok = false;
    if (!m || d->nerrors || !pass_select_job(&ctx) || ctx.job < 0 ||
        !pass_plan_build(m, ctx.job, &o, &in, d)) {
        snprintf(why, n, "the job cannot be planned at this batch");
    } else {
        plan_result res;
        ok = plan_solve(&in.p, PS_DP, &res, why, n);
        if (ok)
            plan_result_free(&res);
    }
    pass_plan_input_free(&in);
    arena_free(a);
    return ok;
}

/* Builds the one-rank program at batch b with `burstc build` (in this process). */
static bool build_at(const profile_run *r, int64_t b, const char *prog)
{
    char batch[32], target[32];
    snprintf(batch, sizeof batch, "%lld", (long long)b);
    snprintf(target, sizeof target, "--target=%s", r->target);
    char *argv[] = {"build",      (char *)r->input,
                    "--job",      (char *)r->job_name,
                    "--gpus",     "1",
                    "--batch",    batch,
                    "--strategy", "dp",
                    target,       "-o",
                    (char *)prog, NULL};
    return cmd_build((int)(sizeof argv / sizeof argv[0]) - 1, argv) == 0;
}

/* Starts copy `copy` of the program, pinned to CPUs copy * r->threads ..
 * (copy + 1) * r->threads - 1 of this process's affinity mask, output to
 * log. Returns its pid, or -1 (reported). */
static pid_t start_program(const profile_run *r, const char *prog, const char *trace,
                           const char *log, int copy)
{
    char iters[32], threads[32];
    snprintf(iters, sizeof iters, "%d", r->warmup + r->repeat);
    snprintf(threads, sizeof threads, "%d", r->threads);
    /* the foreground alone: background copies would share its core; the job's own
     * data when asked (the program's default), else synthetic batches (the last two) */
    char *argv[] = {(char *)prog,    "--iterations",
                    iters,           "--trace",
                    (char *)trace,   "--threads",
                    threads,         "--step-timeout",
                    "600",           "--background",
                    "off",           r->data ? "--data" : NULL,
                    (char *)r->data, NULL};
    cpu_set_t mine, pin;
    CPU_ZERO(&pin);
    int seen = 0, chosen = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        for (int c = 0; c < CPU_SETSIZE && chosen < r->threads; c++)
            if (CPU_ISSET(c, &mine) && seen++ >= copy * r->threads) {
                CPU_SET(c, &pin);
                chosen++;
            }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "burstc profile: error: cannot start '%s': %s\n", prog, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        if (chosen > 0)
            (void)sched_setaffinity(0, sizeof pin, &pin);
        setenv("OMP_NUM_THREADS", threads, 1);
        setenv("OMP_PROC_BIND", "true", 1);
        setenv("OPENBLAS_NUM_THREADS", threads, 1);
        if (r->cuda)
            setenv("BURSTRT_GRAPHS", "0", 1); /* per-op spans on every step */
        execv(prog, argv);
        fprintf(stderr, "cannot run '%s': %s\n", prog, strerror(errno));
        _exit(127);
    }
    return pid;
}

/* Waits for a program; its exit status (128 + signal), or -1. */
static int wait_program(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The last lines of a run's log, for a failure's message. */
static void print_log_tail(const char *log, char *text, size_t cap)
{
    text[0] = 0;
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)cap - 1 ? size - ((long)cap - 1) : 0;
    fseek(f, from, SEEK_SET);
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = 0;
    fclose(f);
    fprintf(stderr, "%s%s", text, n && text[n - 1] != '\n' ? "\n" : "");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (sorted in place), linear between samples. */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double at = q * (n - 1);
    int i = (int)at;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + (at - i) * (v[i + 1] - v[i]);
}

/* Finds `"key":` in line and returns what follows, or NULL. */
static const char *json_field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? p + strlen(key) : NULL;
}

/* Reads a run's trace into br's samples from br->done on: per layer and
 * timed step the summed durations (ms) of its forward (fwd) and backward
 * (bwd) spans, the optimizer's update and the step's time. False (reported)
 * when the trace is unreadable or misses a layer. */
static bool read_trace(const profile_run *r, const char *path, batch_run *br)
{
    char *text, why[256];
    size_t len;
    if (!ir_file_read(path, (size_t)1 << 31, &text, &len, why, sizeof why)) {
        fprintf(stderr, "burstc profile: error: cannot read the program's trace %s: %s\n", path,
                why);
        return false;
    }
    int R = r->repeat, S = r->samples, step = 0;
    bool *seen = calloc((size_t)r->nlayers + 1, sizeof *seen);
    if (!seen) {
        free(text);
        fputs("burstc profile: error: out of memory\n", stderr);
        return false;
    }
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        const char *name = json_field(line, "\"name\":\"");
        const char *dur = json_field(line, "\"dur\":");
        /* the foreground's spans only (tid 0; background copies have their own) */
        if (name && dur && strstr(line, "\"ph\":\"X\"") && strstr(line, "\"tid\":0,")) {
            const char *q = strchr(name, '"');
            size_t n = q ? (size_t)(q - name) : 0;
            double ms = strtod(dur, NULL) * 1e-3;
            int t = step - r->warmup;
            size_t at = (size_t)br->done + (size_t)t;
            if (n == 9 && strncmp(name, "iteration", 9) == 0) {
                if (t >= 0 && t < R)
                    br->iter[at] = ms;
                step++;
            } else if (t >= 0 && t < R) {
                bool back = n > 4 && strncmp(name + n - 4, ".bwd", 4) == 0;
                int l = layer_index(r, name, back ? n - 4 : n);
                if (l >= 0) {
                    (back ? br->bwd : br->fwd)[(size_t)l * (size_t)S + at] += ms;
                    if (!back)
                        seen[l] = true;
                } else if (n == 14 && strncmp(name, "optimizer.step", 14) == 0) {
                    br->opt[at] += ms;
                    seen[r->nlayers] = true;
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    bool ok = step >= r->warmup + R;
    if (!ok)
        fprintf(stderr,
                "burstc profile: error: the program's trace %s holds %d steps, expected %d\n", path,
                step, r->warmup + R);
    for (int l = 0; ok && l < r->nlayers; l++)
        if (!seen[l]) {
            fprintf(stderr,
                    "burstc profile: error: the program's trace has no span for layer '%s'\n",
                    r->layers[l].name);
            ok = false;
        }
    br->has_opt |= seen[r->nlayers];
    free(seen);
    return ok;
}

/* A layer name as a JSON string's contents. */
static void put_json_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if ((unsigned char)*s >= 32)
            fputc(*s, f);
    }
}

static void batch_prog(const profile_run *r, const batch_run *br, char *prog, size_t n)
{
    snprintf(prog, n, "%s/prog-%lld", r->dir, (long long)br->batch);
}

/* Turns the whole step's times of the run read at br's samples from..from+R into
 * what the step spent outside its layers' spans and the optimizer's update (the
 * loss's sum, zeroing gradients): per copy, before copies are folded and before
 * the quantiles sort the columns. */
static void outside_spans(const profile_run *r, batch_run *br, int from)
{
    size_t stride = (size_t)r->samples;
    for (size_t t = (size_t)from; t < (size_t)from + (size_t)r->repeat; t++) {
        br->iter[t] -= br->opt[t];
        for (int l = 0; l < r->nlayers; l++)
            br->iter[t] -= br->fwd[(size_t)l * stride + t] + br->bwd[(size_t)l * stride + t];
    }
}

/* One round's --concurrent copies as the ranks of one synchronous step: at each
 * timed step, every layer's forward and backward, the optimizer's update and the
 * time outside them take the slowest copy's time, which is what a plan whose ranks
 * share the machine waits for (one core slower than the other, or one copy
 * preempted, holds every rank at the next exchange). */
static void slowest_copy(const profile_run *r, batch_run *br, int base, int n)
{
    size_t stride = (size_t)r->samples;
    for (int l = 0; l < r->nlayers; l++) {
        plan_profile_slowest(br->fwd + (size_t)l * stride, base, r->repeat, n);
        plan_profile_slowest(br->bwd + (size_t)l * stride, base, r->repeat, n);
    }
    plan_profile_slowest(br->opt, base, r->repeat, n);
    plan_profile_slowest(br->iter, base, r->repeat, n);
    br->done = base + r->repeat;
}

/* Runs batch br's program once (one round; --concurrent copies at once, each
 * on its own CPUs) and adds its timed steps (with copies, the slowest copy's). 1: done, 0: skipped
 * with a note (out of GPU memory), -1: failed (reported). */
static int run_batch(const profile_run *r, batch_run *br, int round)
{
    char prog[64], trace[MAX_CONCURRENT][64], log[MAX_CONCURRENT][64];
    pid_t pid[MAX_CONCURRENT];
    batch_prog(r, br, prog, sizeof prog);
    long long b = (long long)br->batch;
    fprintf(stderr, "burstc profile: round %d of %d, batch %lld: running %d + %d steps%s\n",
            round + 1, r->rounds, b, r->warmup, r->repeat,
            r->concurrent > 1 ? " in each copy" : "");
    int started = 0;
    for (int c = 0; c < r->concurrent; c++) {
        snprintf(trace[c], sizeof trace[c], "%s/trace-%d.json", r->dir, c);
        snprintf(log[c], sizeof log[c], "%s/run-%d.log", r->dir, c);
        if ((pid[c] = start_program(r, prog, trace[c], log[c], c)) < 0)
            break;
        started++;
    }
    int failed = -1, st = 0, got = 1;
    for (int c = 0; c < started; c++) {
        int s = wait_program(pid[c]);
        if (s != 0 && failed < 0) {
            failed = c;
            st = s;
        }
    }
    if (started < r->concurrent)
        got = -1;
    if (failed >= 0) {
        char tail[2048];
        fprintf(stderr, "burstc profile: the program at batch %lld failed (exit status %d):\n", b,
                st);
        print_log_tail(log[failed], tail, sizeof tail);
        got = -1;
        if (strstr(tail, "out of memory")) {
            fprintf(stderr, "burstc profile: note: batch %lld skipped: out of memory\n", b);
            got = 0;
        }
    }
    const int base = br->done;
    for (int c = 0; c < started; c++) {
        unlink(log[c]);
        if (got == 1 && read_trace(r, trace[c], br)) {
            outside_spans(r, br, br->done);
            br->done += r->repeat;
        } else if (got == 1)
            got = -1;
        unlink(trace[c]);
    }
    if (got == 1 && started > 1)
        slowest_copy(r, br, base, started);
    return got;
}

/* Writes batch br's lines: the medians and interquartile ranges over all
 * its timed steps. */
static void write_batch(const profile_run *r, batch_run *br, FILE *out)
{
    int S = br->done;
    size_t stride = (size_t)r->samples;
    double sum = 0, rest = quantile(br->iter, S, 0.5);
    for (int l = 0; l < r->nlayers; l++) {
        double *f = br->fwd + (size_t)l * stride, *g = br->bwd + (size_t)l * stride;
        double fm = quantile(f, S, 0.5), fi = quantile(f, S, 0.75) - quantile(f, S, 0.25);
        double bm = quantile(g, S, 0.5), bi = quantile(g, S, 0.75) - quantile(g, S, 0.25);
        const layer_info *li = &r->layers[l];
        fputs("layer{\"name\":\"", out);
        put_json_string(out, li->name);
        fprintf(out, "\",\"op\":\"%s\"}[%lld][", li->op, (long long)br->batch);
        for (int k = 0; k < li->nshape; k++)
            fprintf(out, "%s%lld", k ? "," : "", (long long)li->shape[k]);
        fprintf(out, "]  %.6f %.6f %.6f %.6f\n", fm, bm, fi, bi);
        sum += fm + bm;
    }
    double om = 0;
    if (br->has_opt) {
        om = quantile(br->opt, S, 0.5);
        double oi = quantile(br->opt, S, 0.75) - quantile(br->opt, S, 0.25);
        fprintf(out, "optimizer{\"op\":\"%s\",\"params\":%.0f}[%lld][]  %.6f %.6f\n", r->optimizer,
                r->params, (long long)br->batch, om, oi);
    }
    fprintf(out,
            "# batch %lld: the layers' medians sum to %.6f ms, the optimizer's update takes "
            "%.6f ms; a step spends %.6f ms (median) outside them (the loss's sum, zeroing "
            "gradients)\n",
            (long long)br->batch, sum, om, rest);
}

static bool runs_have_opt(const batch_run *runs, int nb)
{
    bool any = false;
    for (int k = 0; k < nb; k++)
        any |= runs[k].state == B_BUILT && runs[k].has_opt;
    return any;
}

/* n1 * n2 * n3 doubles, or NULL (reported) when that overflows or memory is short. */
static double *alloc_cells(size_t n1, size_t n2, size_t n3)
{
    size_t cells, bytes;
    if (__builtin_mul_overflow(n1, n2, &cells) || __builtin_mul_overflow(cells, n3, &cells) ||
        __builtin_mul_overflow(cells ? cells : 1, sizeof(double), &bytes)) {
        fputs("burstc profile: error: too many samples to keep (fewer --rounds or --repeat)\n",
              stderr);
        return NULL;
    }
    double *v = calloc(1, bytes);
    if (!v)
        fputs("burstc profile: error: out of memory\n", stderr);
    return v;
}

int cmd_profile(int argc, char **argv)
{
    const char *output = NULL, *batches_arg = NULL;
    profile_run r = {.target = "cpu",
                     .threads = 1,
                     .warmup = 2,
                     .repeat = 5,
                     .rounds = 3,
                     .concurrent = 1,
                     .data = "synthetic"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(profile_usage, stdout);
            return 0;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "-o"))) {
            output = v;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--batches"))) {
            batches_arg = v;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--target"))) {
            if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0) {
                fprintf(stderr,
                        "burstc profile: error: unknown target '%s' (expected cpu or cuda)\n", v);
                return 1;
            }
            r.target = v;
            r.cuda = strcmp(v, "cuda") == 0;
#ifndef BURSTRT_CUDA_LIBRARY
            if (r.cuda) {
                fputs("burstc profile: error: this burstc was built without the CUDA backend "
                      "(CMake found no nvcc)\n",
                      stderr);
                return 1;
            }
#endif
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--threads"))) {
            if (!parse_count("--threads", v, 1, 1024, &r.threads))
                return 1;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--rounds"))) {
            if (!parse_count("--rounds", v, 1, MAX_ROUNDS, &r.rounds))
                return 1;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--concurrent"))) {
            if (!parse_count("--concurrent", v, 1, MAX_CONCURRENT, &r.concurrent))
                return 1;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--data"))) {
            /* The program checks a path's files itself, naming them. */
            bool path = (strncmp(v, "fmnist:", 7) == 0 && v[7] != 0) ||
                        (strncmp(v, "npy:", 4) == 0 && v[4] != 0) ||
                        (strncmp(v, "images:", 7) == 0 && v[7] != 0) ||
                        (strncmp(v, "tokens:", 7) == 0 && v[7] != 0) ||
                        (strncmp(v, "tokens32:", 9) == 0 && v[9] != 0);
            if (strcmp(v, "synthetic") != 0 && strcmp(v, "job") != 0 && strcmp(v, "fmnist") != 0 &&
                !path) {
                fprintf(stderr,
                        "burstc profile: error: unknown --data '%s' (expected synthetic, job, "
                        "fmnist, fmnist:DIR, npy:X.npy,Y.npy, images:DIR or tokens[32]:FILE)\n",
                        v);
                return 1;
            }
            r.data = strcmp(v, "job") == 0 ? NULL : v;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--warmup"))) {
            if (!parse_count("--warmup", v, 0, MAX_STEPS, &r.warmup))
                return 1;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--repeat"))) {
            if (!parse_count("--repeat", v, 1, MAX_STEPS, &r.repeat))
                return 1;
        } else if ((v = tool_opt_value("burstc profile", argc, argv, &i, "--job"))) {
            r.job_name = v;
        } else if (!tool_input_arg("burstc profile", a, &r.input)) {
            return 1;
        }
    }
    if (!r.input) {
        fputs("burstc profile: error: no input file\n", stderr);
        fputs(profile_usage, stderr);
        return 1;
    }
    int64_t batches[MAX_BATCHES];
    int nb = 0;
    if (batches_arg && !parse_batches(batches_arg, batches, &nb))
        return 1;

    arena *ar = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1, done = 0;
    bool have_dir = false, have_out = false;
    out_file out;
    batch_run runs[MAX_BATCHES] = {0};
    ir_module *m = load_input(ar, r.input, &d);
    if (!m || d.nerrors)
        goto end;
    pass_options popt = {.strategy = "dp", .job = r.job_name};
    pass_ctx ctx = {.m = m, .opt = &popt, .d = &d, .job = -1};
    if (!pass_select_job(&ctx))
        goto end;
    if (ctx.job < 0) {
        fprintf(stderr, "burstc profile: error: '%s' holds no job to profile\n", r.input);
        goto end;
    }
    const ir_job *job = &m->jobs[ctx.job];
    const ir_graph *g = m->graphs[job->graph];
    r.job_name = job->name;
    r.optimizer = job->optimizer == OPT_ADAM ? "adam" : "sgd";
    if (!batches_arg)
        for (int64_t b = 1; nb < MAX_BATCHES; b *= 2) {
            batches[nb++] = b < job->batch ? b : job->batch;
            if (b >= job->batch)
                break;
        }
    r.layers = calloc((size_t)g->nops, sizeof *r.layers);
    r.by_name = calloc((size_t)g->nops, sizeof *r.by_name);
    if (!r.layers || !r.by_name) {
        fputs("burstc profile: error: out of memory\n", stderr);
        goto end;
    }
    /* Every op is measured, the inputs too: an input's span is the time its
     * data take to arrive, which the planner charges where it is consumed. */
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        layer_info *li = &r.layers[r.nlayers];
        li->name = op->name;
        li->op = ir_op_info_of(op->opcode)->name;
        if (op->ninputs) {
            const ir_type *t = &g->ops[op->inputs[0]].type;
            li->nshape = t->rank - 1;
            li->shape = t->dim + 1;
        }
        int64_t n = ir_op_params(g, op);
        r.params += n > 0 ? (double)n : 0;
        r.by_name[r.nlayers] = r.nlayers;
        r.nlayers++;
    }
    sort_run = &r;
    qsort(r.by_name, (size_t)r.nlayers, sizeof *r.by_name, by_name_cmp);

    /* The output is opened first, so that an unwritable -o fails at once
     * and not after minutes of measuring. */
    if (!output) {
        size_t n = strlen(r.job_name) + 16;
        char *def = arena_alloc(ar, n);
        snprintf(def, n, "%s.profile", r.job_name);
        output = def;
    }
    if (!out_open(&out, output))
        goto end;
    have_out = true;
    strcpy(r.dir, "/tmp/burstc-profile-XXXXXX");
    if (!mkdtemp(r.dir)) {
        fprintf(stderr, "burstc profile: error: cannot create a temporary folder: %s\n",
                strerror(errno));
        goto end;
    }
    have_dir = true;
    r.samples = r.rounds * r.repeat; /* at most MAX_ROUNDS x MAX_STEPS ... */
    if (__builtin_mul_overflow(r.samples, r.concurrent, &r.samples)) {
        fputs("burstc profile: error: too many samples to keep (fewer --rounds, --repeat or "
              "--concurrent)\n",
              stderr);
        goto end;
    }
    for (int k = 0; k < nb; k++) {
        batch_run *br = &runs[k];
        br->batch = batches[k];
        if (!(br->fwd = alloc_cells((size_t)r.nlayers, (size_t)r.samples, 1)) ||
            !(br->bwd = alloc_cells((size_t)r.nlayers, (size_t)r.samples, 1)) ||
            !(br->opt = alloc_cells((size_t)r.samples, 1, 1)) ||
            !(br->iter = alloc_cells((size_t)r.samples, 1, 1)))
            goto end;
    }
    fprintf(out.fp,
            "# burstc profile of job %s (model %s) from %s: target %s, %d thread%s pinned, "
            "%d round%s of %d warm-up + %d timed steps per batch, %d cop%s at once, data %s\n"
            "# layer{\"name\",\"op\"}[per-GPU batch][input shape per sample]  fwd_ms bwd_ms "
            "(medians)  fwd_iqr bwd_iqr (interquartile ranges)\n"
            "# optimizer{\"op\",\"params\"}[per-GPU batch][]  update_ms (median)  iqr\n",
            r.job_name, g->name, r.input, r.target, r.threads, r.threads == 1 ? "" : "s", r.rounds,
            r.rounds == 1 ? "" : "s", r.warmup, r.repeat, r.concurrent,
            r.concurrent == 1 ? "y" : "ies", r.data ? r.data : "the job's");
    for (int k = 0; k < nb; k++) {
        char why[1024], prog[64];
        batch_run *br = &runs[k];
        if (!fits_one_gpu(&r, br->batch, why, sizeof why, &d)) {
            if (d.nerrors)
                goto end;
            fprintf(stderr, "burstc profile: note: batch %lld skipped: %s\n", (long long)br->batch,
                    why);
            fprintf(out.fp, "# batch %lld skipped: %s\n", (long long)br->batch, why);
            continue;
        }
        fprintf(stderr, "burstc profile: batch %lld: building\n", (long long)br->batch);
        batch_prog(&r, br, prog, sizeof prog);
        if (!build_at(&r, br->batch, prog)) {
            fprintf(stderr, "burstc profile: error: building the program at batch %lld failed\n",
                    (long long)br->batch);
            goto end;
        }
        br->state = B_BUILT;
    }
    for (int round = 0; round < r.rounds; round++)
        for (int k = 0; k < nb; k++) {
            batch_run *br = &runs[k];
            if (br->state != B_BUILT)
                continue;
            int got = run_batch(&r, br, round);
            if (got < 0)
                goto end;
            if (got == 0) {
                fprintf(out.fp, "# batch %lld skipped: out of memory\n", (long long)br->batch);
                br->state = B_SKIPPED;
            }
        }
    for (int k = 0; k < nb; k++)
        if (runs[k].state == B_BUILT) {
            write_batch(&r, &runs[k], out.fp);
            done++;
        }
    if (done == 0) {
        fprintf(stderr, "burstc profile: error: no batch could be measured; nothing written\n");
        goto end;
    }
    have_out = false;
    if (!out_commit(&out))
        goto end;
    int ninputs = 0;
    for (int l = 0; l < r.nlayers; l++)
        ninputs += strcmp(r.layers[l].op, "input") == 0;
    fprintf(stderr, "burstc profile: %d layers, %d input%s%s at %d batch%s written to %s\n",
            r.nlayers - ninputs, ninputs, ninputs == 1 ? "" : "s",
            runs_have_opt(runs, nb) ? " and the optimizer's update" : "", done,
            done == 1 ? "" : "es", output);
    status = 0;
end:
    if (have_out)
        out_abort(&out);
    for (int k = 0; k < nb; k++) {
        char prog[64];
        if (have_dir) {
            batch_prog(&r, &runs[k], prog, sizeof prog);
            unlink(prog);
        }
        free(runs[k].fwd);
        free(runs[k].bwd);
        free(runs[k].opt);
        free(runs[k].iter);
    }
    if (have_dir)
        rmdir(r.dir);
    free(r.layers);
    free(r.by_name);
    if (d.nerrors > 0)
        status = 1;
    diag_summary(&d);
    arena_free(ar);
    return status;
}
