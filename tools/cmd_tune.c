/*
 * cmd_tune.c: `burstc tune JOB.burst`, the autotuner at the command line.
 *
 * Plans the job as `burstc plan` does, shortlists distinct candidate plans
 * (tune/candidates.c), runs them head to head (tune/trials.c) with a runner
 * (the simulator in process, tune/simrun.c; or, here, real programs: each
 * candidate's planned IR built by `burstc build` and launched with mpirun or
 * $BURSTC_LAUNCH), ranks them with rank/'s spectral method, prints the
 * table and writes the winner as planned IR (-o), which `burstc build`
 * builds as it is. docs/tune.md documents every option and number.
 */
#include "passes.h"
#include "plan.h"
#include "rank.h"
#include "tools.h"
#include "tune.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char tune_usage[] =
    "usage: burstc tune [options] JOB.burst|JOB.ir\n"
    "\n"
    "Chooses among candidate plans of a job by running them head to head: the\n"
    "distinct plans of dp, deeppool, pow2 and burst at several amplification\n"
    "limits and the burst plans of the Pareto frontier; for a job with background\n"
    "jobs each plan with its background copies packed into its idle time (+bg) and\n"
    "without. Pairs of them run back to back (random order, same seed), the one\n"
    "with the higher throughput wins a comparison; the pairs and their number\n"
    "follow the sample-size bound n log n / Delta^2 of spectral ranking; the\n"
    "ranking is Rank Centrality's (burstc rank). Prints the ranking and writes the\n"
    "winner as planned IR, with its interleave section for a job with background.\n"
    "\n"
    "  --candidates N       compare at most N candidates (2 to 64; default 8); a plan\n"
    "                       packed and unpacked are two\n"
    "  --budget T           wall-clock budget: 90s, 10m, 1h, 500ms or seconds\n"
    "                       (default 10m); no trial starts that would not fit\n"
    "  --max-comparisons N  stop after N comparisons (default: no limit)\n"
    "  --runner R           exec (default): build every candidate with burstc build\n"
    "                       and run it with mpirun ($BURSTC_LAUNCH); sim: the\n"
    "                       simulator with --jitter, in process\n"
    "  --steps N            measured iterations per run (1 to 100000; default 10)\n"
    "  --warmup N           iterations before them, not measured (0 to 100000; default\n"
    "                       2, for a job with background jobs 4)\n"
    "  --jitter X           sim: noise on every duration, as burstc sim --jitter\n"
    "                       (0 to 10; default 0.05)\n"
    "  --seed N             seed of the pairs, orders and trial seeds (default 1)\n"
    "  --method M           spectral (Rank Centrality, default) or spectral-mle\n"
    "  --metric M           fg: the job's samples/s; cluster: plus the background\n"
    "                       jobs' samples/s (default: cluster for a job with\n"
    "                       background jobs, else fg)\n"
    "  --c X                the constant of the bound c n log n / Delta^2 (0 to 100;\n"
    "                       default 2.5)\n"
    "  --data D             exec: the programs' --data (default: the job's)\n"
    "  --run-timeout S      exec: a run taking longer fails (default 300)\n"
    "  -o FILE              write the winner as planned IR (burstc build FILE)\n"
    "  --json FILE          write candidates, trials and ranking as JSON\n"
    "  --comparisons FILE   write every comparison as a line winner,loser\n"
    "                       (burstc rank reads it)\n"
    "  --job NAME           the job to tune (default: the last in the file)\n"
    "  --amplification X    the job's amplification limit (others are tried too)\n"
    "  --slowdown X         the job's bound on its slowdown by background work\n"
    "  --profile FILE       measured per-layer times for the planner\n"
    "  --gpus G             plan for G GPUs instead of the cluster's\n"
    "  --batch B            plan for a global batch of B instead of the job's\n"
    "  --help               show this help\n"
    "\n"
    "environment: BURSTC_LAUNCH, the launcher of --runner exec, a command line\n"
    "where {np} stands for the rank count (default 'mpirun -np {np}'), e.g.\n"
    "'srun --ntasks={np}' or 'mpirun --oversubscribe -np {np}'.\n"
    "\n"
    "exit status: 0 a ranking (failed candidates are ranked last), 1 errors in\n"
    "the input or nothing could be ranked, 2 internal error\n";

/* --warmup for a job with background jobs, unless given. */
#define BG_WARMUP 4

#define ERR(...) fprintf(stderr, "burstc tune: error: " __VA_ARGS__)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

/* "90s", "10m", "1h", "500ms", "2.5" (seconds). */
static bool parse_duration(const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || !(x > 0) || isinf(x))
        return false;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        *out = x;
    else if (!strcmp(end, "ms"))
        *out = x / 1e3;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        *out = x * 60;
    else if (!strcmp(end, "h"))
        *out = x * 3600;
    else
        return false;
    return *out <= 1e7;
}

/* ---- planned IR of a candidate ---- */

/* The reason an unpacked candidate's section gives for a copy it leaves out. */
#define UNPACKED_WHY "left out: burstc tune's candidate without background packing"

/* A job with background jobs gets the interleave pass's section: a packed
 * candidate as placed (it must be the placement the tuner predicted), an
 * unpacked one with no copies (each left-out copy a refusal saying so), so
 * that `burstc build` runs exactly the candidate. The pass's notes on ranks
 * it refused are the tuner's business, not printed for every candidate. */
static bool interleave_candidate(pass_ctx *ctx, const tune_candidate *c)
{
    ir_job *j = &ctx->m->jobs[ctx->job];
    if (j->nbackground == 0)
        return true;
    char *notes = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&notes, &len);
    if (!mem)
        ice("open_memstream failed");
    FILE *out = ctx->d->out;
    int before = ctx->d->nerrors;
    j->interleave = NULL; /* a section in an unplanned input is some other plan's */
    ctx->d->out = mem;
    bool ok = pass_interleave(ctx);
    ctx->d->out = out;
    fclose(mem);
    if (ctx->d->nerrors > before && out)
        fwrite(notes, 1, len, out); /* errors: everything it said */
    free(notes);
    if (!ok || ctx->d->nerrors > before)
        return false;
    ir_interleave *il = j->interleave;
    if (!il)
        ice("tune: the interleave pass wrote no section for job '%s'", j->name);
    if (c->packed) {
        if (!pass_same_copies(il, &c->mux))
            ice("tune: candidate '%s': the interleave pass placed %d copies, the tuner %d", c->name,
                il->ncopies, c->mux.ncopies);
        return true;
    }
    int nref = il->nrefusals + il->ncopies;
    ir_bg_refusal *ref = arena_alloc(ctx->m->arena, sizeof *ref * (size_t)(nref + 1));
    memcpy(ref, il->refusals, sizeof *ref * (size_t)il->nrefusals);
    for (int k = 0; k < il->ncopies; k++)
        ref[il->nrefusals + k] =
            (ir_bg_refusal){il->copies[k].job, il->copies[k].rank, UNPACKED_WHY, (src_loc){0}};
    il->refusals = ref;
    il->nrefusals = nref;
    il->ncopies = 0;
    il->fg_time_bg = il->fg_time;
    return true;
}

/* Loads the input again, puts the candidate's plan into the job's ops, makes
 * its communication explicit and, with background jobs, writes its interleave
 * section: what `burstc --emit=ir` writes for it. */
static bool write_plan_ir(const char *input, const pass_options *popt, const tune_candidate *c,
                          FILE *out)
{
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    bool ok = false;
    pass_plan_input in = {0};
    ir_module *m = load_input(a, input, &d);
    if (!m || d.nerrors)
        goto done;
    pass_ctx ctx = {.m = m, .opt = popt, .d = &d};
    if (!pass_select_job(&ctx) || ctx.job < 0 || !ir_verify(m, &d) ||
        !pass_plan_build(m, ctx.job, popt, &in, &d))
        goto done;
    if (in.p.nlayers != c->plan.nlayers) {
        ice("tune: candidate has %d layers, the job %d", c->plan.nlayers, in.p.nlayers);
    }
    pass_plan_apply(m, &in, &c->plan);
    if (!pass_comm(&ctx) || !interleave_candidate(&ctx, c))
        goto done;
    ir_print_module(out, m);
    ok = !ferror(out);
done:
    pass_plan_input_free(&in);
    diag_summary(&d);
    arena_free(a);
    return ok;
}

/* ---- the exec runner ---- */

typedef struct exec_runner {
    const tune_candidate *c;
    int n, G;
    int64_t batch;
    int warmup, steps;
    const char *data;
    double run_timeout;
    char *dir;        /* the working folder (removed at the end) */
    char **prog;      /* per candidate: the built program, NULL if its build failed */
    char **build_err; /* per candidate: why the build failed */
    char **launch;    /* the launcher's words, {np} replaced */
    int nlaunch;
    /* Per candidate: runs of a packed candidate whose program printed no
     * background report (counted as 0 background samples/s), and runs with
     * lines that began like one but did not read. */
    int64_t *no_report, *malformed;
} exec_runner;

static char *xstrdup(const char *s)
{
    char *r = strdup(s);
    if (!r) {
        fputs("burstc: out of memory\n", stderr);
        exit(2);
    }
    return r;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    if (!s) {
        fputs("burstc: out of memory\n", stderr);
        exit(2);
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* The last non-empty line of a log file, for messages. */
static void last_line(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        size_t k = strlen(line);
        while (k && (line[k - 1] == '\n' || line[k - 1] == '\r'))
            line[--k] = 0;
        if (k)
            snprintf(buf, n, "%s", line);
    }
    fclose(f);
}

/* The process group of the run in progress: an interrupt of burstc tune
 * stops it too (it has its own group so that a timeout reaches mpirun's
 * children, and so the terminal's signals do not). */
static volatile sig_atomic_t child_group;
/* Every file the exec runner may leave in its folder, and the folder: made
 * before the first build so that the handler only calls unlink and rmdir. */
static char **cleanup_path;
static int ncleanup;
static char *cleanup_dir;

static void cleanup_files(void)
{
    for (int i = 0; i < ncleanup; i++)
        unlink(cleanup_path[i]);
    if (cleanup_dir)
        rmdir(cleanup_dir);
}

static void on_signal(int sig)
{
    /* The run is killed and waited for, so that it writes nothing into the
     * folder after it was emptied; further signals wait (sa_mask). */
    if (child_group > 0) {
        kill(-(pid_t)child_group, SIGKILL);
        waitpid((pid_t)child_group, NULL, 0);
    }
    cleanup_files();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Runs argv with stdout and stderr to log, in its own process group, for at
 * most timeout seconds. Returns the exit status, 128 + signal, -1 if it did
 * not start, -2 when it timed out (then it was killed). */
static int spawn_wait(char **argv, const char *log, double timeout, char *why, size_t whylen)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    pid_t pid;
    int e = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (e) {
        snprintf(why, whylen, "cannot run '%s': %s", argv[0], strerror(e));
        return -1;
    }
    child_group = pid;
    double t0 = now_s();
    int status, sig = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            child_group = 0;
            snprintf(why, whylen, "waiting for '%s': %s", argv[0], strerror(errno));
            return -1;
        }
        double t = now_s() - t0;
        if (!sig && t > timeout) {
            sig = SIGTERM;
            kill(-pid, SIGTERM);
        } else if (sig == SIGTERM && t > timeout + 5) {
            sig = SIGKILL;
            kill(-pid, SIGKILL);
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    child_group = 0;
    if (sig) {
        snprintf(why, whylen, "it ran longer than %g s and was stopped", timeout);
        return -2;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Samples/s of rank 0's iterations after the warm-up, from the runtime's
 * Chrome trace (one "iteration" event per step and rank). */
static bool trace_throughput(const char *path, int warmup, int steps, int64_t batch, double *out,
                             char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(why, whylen, "no trace was written (%s)", strerror(errno));
        return false;
    }
    char line[1024];
    int k = 0;
    double start = 0, end = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "\"name\":\"iteration\"") || !strstr(line, "\"pid\":0,"))
            continue;
        const char *ts = strstr(line, "\"ts\":"), *dur = strstr(line, "\"dur\":");
        if (!ts || !dur)
            continue;
        double t = strtod(ts + 5, NULL), d = strtod(dur + 6, NULL);
        if (k == warmup)
            start = t;
        if (k >= warmup)
            end = t + d;
        k++;
    }
    fclose(f);
    if (k < warmup + steps || !(end > start)) {
        snprintf(why, whylen, "the trace holds %d of %d iterations", k, warmup + steps);
        return false;
    }
    *out = (double)steps * (double)batch / ((end - start) * 1e-6);
    return true;
}

static bool exec_run(void *ctx, int cand, uint64_t seed, int slot, tune_sample *out, char *err,
                     size_t errlen)
{
    (void)slot;
    exec_runner *x = ctx;
    if (!x->prog[cand]) {
        snprintf(err, errlen, "%s", x->build_err[cand]);
        return false;
    }
    char *trace = xprintf("%s/trace-%d.json", x->dir, cand);
    char *log = xprintf("%s/run-%d.log", x->dir, cand);
    char iters[32], seeds[32];
    snprintf(iters, sizeof iters, "%d", x->warmup + x->steps);
    snprintf(seeds, sizeof seeds, "%llu", (unsigned long long)(seed % 1000000007ULL + 1));
    char *argv[64];
    int argc = 0;
    for (int i = 0; i < x->nlaunch; i++)
        argv[argc++] = x->launch[i];
    argv[argc++] = x->prog[cand];
    argv[argc++] = "--iterations";
    argv[argc++] = iters;
    argv[argc++] = "--seed";
    argv[argc++] = seeds;
    argv[argc++] = "--trace";
    argv[argc++] = trace;
    if (x->data) {
        argv[argc++] = "--data";
        argv[argc++] = (char *)x->data;
    }
    argv[argc] = NULL;
    unlink(trace);
    char why[512] = "";
    int rc = spawn_wait(argv, log, x->run_timeout, why, sizeof why);
    bool ok = false;
    if (rc == 0) {
        ok = trace_throughput(trace, x->warmup, x->steps, x->batch, &out->fg, why, sizeof why);
        if (!ok)
            snprintf(err, errlen, "run: %s", why);
        /* Background samples/s: the program's own report (rank 0, at exit). */
        tune_program_report rep = {0};
        FILE *f = ok ? fopen(log, "r") : NULL;
        if (f) {
            if (!tune_read_report(f, &rep))
                memset(&rep, 0, sizeof rep);
            fclose(f);
        }
        out->bg = rep.bg_samples_per_s;
        if (ok && x->c[cand].packed && rep.nbg == 0)
            x->no_report[cand]++;
        if (ok && rep.malformed)
            x->malformed[cand]++;
    } else {
        char tail[400];
        last_line(log, tail, sizeof tail);
        if (rc == -1 || rc == -2)
            snprintf(err, errlen, "run: %s%s%s", why, tail[0] ? ": " : "", tail);
        else
            snprintf(err, errlen, "run: exit status %d%s%s", rc, tail[0] ? ": " : "", tail);
    }
    unlink(trace);
    free(trace);
    free(log);
    return ok;
}

/* Splits BURSTC_LAUNCH into words, {np} replaced by G. */
static bool exec_launcher(exec_runner *x)
{
    const char *spec = getenv("BURSTC_LAUNCH");
    if (!spec || !*spec)
        spec = "mpirun -np {np}";
    char *copy = xstrdup(spec);
    x->launch = plan_xcalloc(40, sizeof *x->launch);
    for (char *w = strtok(copy, " \t"); w; w = strtok(NULL, " \t")) {
        if (x->nlaunch == 40) {
            ERR("BURSTC_LAUNCH has more than 40 words\n");
            free(copy);
            return false;
        }
        char *at = strstr(w, "{np}");
        if (at)
            x->launch[x->nlaunch++] = xprintf("%.*s%d%s", (int)(at - w), w, x->G, at + 4);
        else
            x->launch[x->nlaunch++] = xstrdup(w);
    }
    free(copy);
    if (x->nlaunch == 0) {
        ERR("BURSTC_LAUNCH is empty\n");
        return false;
    }
    return true;
}

static void exec_free(exec_runner *x)
{
    for (int i = 0; i < x->n; i++) {
        if (x->prog && x->prog[i]) {
            unlink(x->prog[i]);
            free(x->prog[i]);
        }
        if (x->build_err)
            free(x->build_err[i]);
    }
    free(x->prog);
    free(x->build_err);
    free(x->no_report);
    free(x->malformed);
    for (int i = 0; i < x->nlaunch; i++)
        free(x->launch[i]);
    free(x->launch);
    if (x->dir) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        cleanup_files();
        for (int i = 0; i < ncleanup; i++)
            free(cleanup_path[i]);
        free(cleanup_path);
        cleanup_path = NULL;
        ncleanup = 0;
        cleanup_dir = NULL;
        free(x->dir);
    }
}

/* Writes and builds every candidate; a failed build is the candidate's
 * failure, reported when it is first compared. */
static bool exec_prepare(exec_runner *x, const char *input, const pass_options *popt,
                         const tune_candidate *c)
{
    const char *tmp = getenv("TMPDIR");
    char *tmpl = xprintf("%s/burstc-tune-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmpl)) {
        ERR("cannot make a working folder '%s': %s\n", tmpl, strerror(errno));
        free(tmpl);
        return false;
    }
    x->dir = tmpl;
    /* Only files this command makes live there. */
    static const char *const leaves[] = {"cand-%d", "cand-%d.ir", "build-%d.log", "run-%d.log",
                                         "trace-%d.json"};
    const int nleaves = (int)(sizeof leaves / sizeof leaves[0]);
    cleanup_path = plan_xcalloc((size_t)x->n * (size_t)nleaves, sizeof *cleanup_path);
    for (int i = 0; i < x->n; i++)
        for (int k = 0; k < nleaves; k++) {
            char leaf[64];
            snprintf(leaf, sizeof leaf, leaves[k], i);
            cleanup_path[ncleanup++] = xprintf("%s/%s", x->dir, leaf);
        }
    cleanup_dir = x->dir;
    catch_signals();
    x->prog = plan_xcalloc((size_t)x->n, sizeof *x->prog);
    x->build_err = plan_xcalloc((size_t)x->n, sizeof *x->build_err);
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
        ERR("cannot find the burstc executable (/proc/self/exe)\n");
        return false;
    }
    self[k] = 0;
    for (int i = 0; i < x->n; i++) {
        char *ir = xprintf("%s/cand-%d.ir", x->dir, i);
        char *prog = xprintf("%s/cand-%d", x->dir, i);
        char *log = xprintf("%s/build-%d.log", x->dir, i);
        printf("building %d/%d: %s\n", i + 1, x->n, c[i].name);
        fflush(stdout);
        out_file o;
        bool written = out_open(&o, ir);
        if (written && !write_plan_ir(input, popt, &c[i], o.fp)) {
            out_abort(&o);
            written = false;
        }
        if (!written || !out_commit(&o)) {
            x->build_err[i] = xprintf("build: its planned IR could not be written");
        } else {
            char *argv[] = {self, "build", ir, "-o", prog, NULL};
            char why[512] = "", tail[400];
            int rc = spawn_wait(argv, log, 600, why, sizeof why);
            last_line(log, tail, sizeof tail);
            if (rc == 0 && access(prog, X_OK) == 0) {
                x->prog[i] = prog;
                prog = NULL;
            } else if (rc == -1 || rc == -2) {
                x->build_err[i] = xprintf("build: %s", why);
            } else {
                x->build_err[i] = xprintf("build: burstc build exited with status %d%s%s", rc,
                                          tail[0] ? ": " : "", tail);
            }
        }
        free(ir);
        free(prog);
        free(log);
    }
    return true;
}

/* ---- output ---- */

typedef struct tune_report {
    const char *job, *model, *runner, *input;
    const plan_problem *p;
    const tune_candidate *c;
    int n, distinct;
    const tune_options *o;
    const tune_result *r;
    int warmup, steps;
    double jitter, budget;
    const char *launch;
    bool background; /* the job has background jobs */
    /* exec: per candidate, runs without a background report though copies
     * were planned, and runs with malformed report lines; else NULL */
    const int64_t *no_report, *malformed;
} tune_report;

static const char *stop_text(const tune_result *r)
{
    if (r->separated)
        return "separated: the comparisons reached the bound at the estimated Delta";
    return r->stop;
}

static void print_ranking(const tune_report *t)
{
    const tune_result *r = t->r;
    if (t->background)
        printf("\n%-4s %-24s %8s %6s %6s %10s %10s %14s\n", "rank", "candidate", "score", "wins",
               "losses", "mean fg/s", "mean bg/s",
               t->o->metric == TUNE_METRIC_CLUSTER ? "pred cluster/s" : "pred fg/s");
    else
        printf("\n%-4s %-24s %8s %6s %6s %14s %14s\n", "rank", "candidate", "score", "wins",
               "losses", "mean samples/s", "predicted");
    for (int i = 0; i < r->n; i++) {
        int id = r->order[i];
        const tune_candidate *c = &t->c[id];
        char mean[32] = "-", fg[32] = "-", bg[32] = "-", score[32] = "-";
        if (r->metric_runs[id]) {
            double k = (double)r->metric_runs[id];
            snprintf(mean, sizeof mean, "%.1f", r->metric_sum[id] / k);
            snprintf(fg, sizeof fg, "%.1f", r->fg_sum[id] / k);
            snprintf(bg, sizeof bg, "%.1f", r->bg_sum[id] / k);
        }
        if (!r->failure[id] && r->ranked)
            snprintf(score, sizeof score, "%.4f", r->score[id]);
        if (t->background)
            printf("%4d %-24.24s %8s %6lld %6lld %10s %10s %14.1f\n", i + 1, c->name, score,
                   (long long)r->wins[id], (long long)r->losses[id], fg, bg,
                   tune_candidate_metric(c, t->o->metric));
        else
            printf("%4d %-24.24s %8s %6lld %6lld %14s %14.1f\n", i + 1, c->name, score,
                   (long long)r->wins[id], (long long)r->losses[id], mean, c->plan.samples_per_s);
        if (r->failure[id]) {
            printf("     failed: ");
            rank_put_escaped(stdout, r->failure[id], strlen(r->failure[id]), 300);
            printf("\n");
        }
        if (t->no_report && t->no_report[id])
            printf("     note: %lld of %lld runs printed no background report though %d "
                   "copies were planned: counted as 0 background samples/s\n",
                   (long long)t->no_report[id], (long long)r->metric_runs[id], c->copies);
        if (t->malformed && t->malformed[id])
            printf("     note: %lld of %lld runs printed background lines that do not read as "
                   "the runtime's report: not counted\n",
                   (long long)t->malformed[id], (long long)r->metric_runs[id]);
    }
}

static void json_str(FILE *f, const char *s)
{
    rank_put_json(f, s, strlen(s));
}

static bool write_json(FILE *f, const tune_report *t)
{
    const tune_result *r = t->r;
    fprintf(f, "{\n  \"job\": ");
    json_str(f, t->job);
    fprintf(f, ",\n  \"model\": ");
    json_str(f, t->model);
    fprintf(f,
            ",\n  \"gpus\": %d,\n  \"batch\": %lld,\n  \"runner\": \"%s\",\n  \"method\": \"%s\",\n"
            "  \"metric\": \"%s\",\n  \"background\": %s,\n  \"warmup\": %d,\n  \"steps\": %d,\n",
            t->p->cluster.gpus, (long long)t->p->batch, t->runner, rank_method_names[t->o->method],
            t->o->metric == TUNE_METRIC_CLUSTER ? "cluster" : "fg",
            t->background ? "true" : "false", t->warmup, t->steps);
    if (!strcmp(t->runner, "sim"))
        fprintf(f, "  \"jitter\": %.17g,\n", t->jitter);
    fprintf(f,
            "  \"seed\": %llu,\n  \"budget_s\": %.17g,\n  \"distinct_plans\": %d,\n"
            "  \"c\": %.17g,\n  \"p\": %.17g,\n  \"pairs\": %d,\n  \"L\": %lld,\n"
            "  \"rounds\": %lld,\n  \"comparisons\": %lld,\n  \"runs\": %lld,\n"
            "  \"delta_predicted\": %.17g,\n  \"delta_estimated\": %.17g,\n"
            "  \"target_comparisons\": %.17g,\n  \"separated\": %s,\n  \"stop\": ",
            (unsigned long long)t->o->seed, t->budget, t->distinct, t->o->c, r->p, r->edges,
            (long long)r->L, (long long)r->rounds, (long long)r->comparisons, (long long)r->runs,
            r->delta0, r->delta, r->target, r->separated ? "true" : "false");
    json_str(f, r->stop ? r->stop : "");
    fprintf(f, ",\n  \"wall_s\": %.17g,\n  \"ranked\": %d,\n  \"winner\": ", r->wall_s, r->ranked);
    if (r->ranked)
        json_str(f, t->c[r->order[0]].name);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"candidates\": [\n");
    for (int i = 0; i < r->n; i++) {
        int id = r->order[i];
        const tune_candidate *c = &t->c[id];
        fprintf(f, "    {\"rank\": %d, \"id\": %d, \"name\": ", i + 1, id);
        json_str(f, c->name);
        fprintf(f,
                ", \"strategy\": \"%s\", \"amplification\": %.17g, \"price\": %.17g, "
                "\"aliases\": %d, \"predicted_s\": %.17g, \"predicted_samples_per_s\": %.17g, "
                "\"gpu_seconds\": %.17g, \"score\": %.17g, \"wins\": %lld, \"losses\": %lld, "
                "\"runs\": %lld, \"packed\": %s, \"copies\": %d, "
                "\"predicted_fg_samples_per_s\": %.17g, \"predicted_bg_samples_per_s\": %.17g, "
                "\"predicted_metric\": %.17g, \"mean_metric\": ",
                plan_strategy_name(c->strategy), c->amp_limit > 0 ? c->amp_limit : 0, c->price,
                c->aliases, c->pred_time, c->pred.fg, c->plan.gpu_seconds, r->score[id],
                (long long)r->wins[id], (long long)r->losses[id], (long long)r->metric_runs[id],
                c->packed ? "true" : "false", c->packed ? c->copies : 0, c->pred.fg, c->pred.bg,
                tune_candidate_metric(c, t->o->metric));
        if (r->metric_runs[id])
            fprintf(f, "%.17g, \"mean_fg\": %.17g, \"mean_bg\": %.17g",
                    r->metric_sum[id] / (double)r->metric_runs[id],
                    r->fg_sum[id] / (double)r->metric_runs[id],
                    r->bg_sum[id] / (double)r->metric_runs[id]);
        else
            fputs("null, \"mean_fg\": null, \"mean_bg\": null", f);
        fprintf(f, ", \"runs_without_background_report\": %lld",
                t->no_report ? (long long)t->no_report[id] : 0LL);
        fputs(", \"failure\": ", f);
        if (r->failure[id])
            json_str(f, r->failure[id]);
        else
            fputs("null", f);
        fputs(", \"gpus_per_layer\": [", f);
        for (int l = 0; l < c->plan.nlayers; l++)
            fprintf(f, "%s%d", l ? ", " : "", c->plan.layer[l].k);
        fputs("], \"first_rank_per_layer\": [", f);
        for (int l = 0; l < c->plan.nlayers; l++)
            fprintf(f, "%s%d", l ? ", " : "", c->plan.layer[l].first);
        fprintf(f, "]}%s\n", i + 1 < r->n ? "," : "");
    }
    fprintf(f, "  ],\n  \"trials\": [\n");
    for (int64_t k = 0; k < r->nlog; k++) {
        const tune_comparison *cp = &r->log[k];
        fprintf(f,
                "    {\"winner\": %d, \"loser\": %d, \"first\": %d, \"winner_metric\": %.17g, "
                "\"loser_metric\": %.17g}%s\n",
                cp->winner, cp->loser, cp->first, cp->winner_metric, cp->loser_metric,
                k + 1 < r->nlog ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return !ferror(f);
}

static bool write_comparisons(FILE *f, const tune_report *t)
{
    fprintf(f, "# burstc tune: job %s, %lld comparisons (winner,loser)\n", t->job,
            (long long)t->r->nlog);
    for (int64_t k = 0; k < t->r->nlog; k++)
        fprintf(f, "%s,%s\n", t->c[t->r->log[k].winner].name, t->c[t->r->log[k].loser].name);
    return !ferror(f);
}

/* The candidates of a job with background jobs: each plan packed (+bg, the
 * interleave pass's copies) and unpacked, with the predictions of burstc
 * plan's multiplexing table. */
static void print_background_candidates(const ir_module *m, const ir_job *job,
                                        const tune_background *tb, const tune_candidate *c, int n,
                                        int distinct, long max)
{
    printf("\ncandidates: %d of %d distinct (plans with and without background packing; "
           "--candidates %ld)\n",
           n, distinct, max);
    printf("background: ");
    for (int b = 0; b < job->nbackground; b++)
        printf("%s%s @ %lld", b ? ", " : "", m->graphs[job->background[b].graph]->name,
               (long long)job->background[b].batch);
    printf(" (slowdown %g, %s)\n", tb->mux.slowdown, tb->mux.cpu ? "CPU cores" : "GPUs");
    printf("%3s  %-24s %12s %10s %10s %10s %11s %6s\n", "#", "plan", "predicted ms", "fg smp/s",
           "bg smp/s", "cluster/s", "GPU-s/iter", "copies");
    for (int i = 0; i < n; i++)
        printf("%3d  %-24.24s %12.4f %10.1f %10.1f %10.1f %11.6f %6d%s%s\n", i + 1, c[i].name,
               c[i].pred_time * 1e3, c[i].pred.fg, c[i].pred.bg,
               tune_metric_value(TUNE_METRIC_CLUSTER, &c[i].pred), c[i].plan.gpu_seconds,
               c[i].packed ? c[i].copies : 0,
               c[i].copies == 0 ? "  (no copy fits its idle time)" : "",
               c[i].aliases ? "  (+ same plan from other settings)" : "");
    printf("(predicted ms: the foreground's iteration time with its copies; cluster/s: fg + bg "
           "samples/s)\n");
}

/* ---- the command ---- */

int cmd_tune(int argc, char **argv)
{
    tool_args ta = {.cmd = "burstc tune", .usage = tune_usage, .takes = TOOL_TAKES_JSON};
    const char *output = NULL, *cmpfile = NULL, *data = NULL;
    const char *runner = "exec";
    long ncand = 8, steps = 10, warmup = 2;
    double budget = 600, jitter = 0.05, run_timeout = 300;
    tune_options to;
    tune_options_default(&to);
    bool metric_set = false, warmup_set = false;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r;
        long x;
        if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--candidates"))) {
            if (!parse_long(v, 2, TUNE_MAX_CANDIDATES, &ncand)) {
                ERR("--candidates must be an integer from 2 to %d, got '%s'\n", TUNE_MAX_CANDIDATES,
                    v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--budget"))) {
            if (!parse_duration(v, &budget)) {
                ERR("--budget must be a positive duration such as 90s, 10m, 1h or 500ms, got "
                    "'%s'\n",
                    v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--max-comparisons"))) {
            if (!parse_long(v, 1, 1000000000, &x)) {
                ERR("--max-comparisons must be an integer from 1 to 10^9, got '%s'\n", v);
                return 1;
            }
            to.max_comparisons = x;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--runner"))) {
            if (strcmp(v, "exec") && strcmp(v, "sim")) {
                ERR("unknown runner '%s' (expected exec or sim)\n", v);
                return 1;
            }
            runner = v;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--steps"))) {
            if (!parse_long(v, 1, 100000, &steps)) {
                ERR("--steps must be an integer from 1 to 100000, got '%s'\n", v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--warmup"))) {
            if (!parse_long(v, 0, 100000, &warmup)) {
                ERR("--warmup must be an integer from 0 to 100000, got '%s'\n", v);
                return 1;
            }
            warmup_set = true;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--jitter"))) {
            char *end;
            jitter = strtod(v, &end);
            if (end == v || *end || !(jitter >= 0 && jitter <= 10)) {
                ERR("--jitter must be a number from 0 to 10, got '%s'\n", v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--c"))) {
            char *end;
            to.c = strtod(v, &end);
            if (end == v || *end || !(to.c > 0 && to.c <= 100)) {
                ERR("--c must be a positive number up to 100, got '%s'\n", v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--run-timeout"))) {
            if (!parse_duration(v, &run_timeout)) {
                ERR("--run-timeout must be a positive duration, got '%s'\n", v);
                return 1;
            }
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--seed"))) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (end == v || *end || v[0] == '-' || errno) {
                ERR("--seed must be a non-negative integer, got '%s'\n", v);
                return 1;
            }
            to.seed = s;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--method"))) {
            int mth = rank_method_parse(v);
            if (mth != RANK_SPECTRAL && mth != RANK_SPECTRAL_MLE) {
                ERR("unknown method '%s' (expected spectral or spectral-mle)\n", v);
                return 1;
            }
            to.method = mth;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--metric"))) {
            if (!strcmp(v, "fg"))
                to.metric = TUNE_METRIC_FG;
            else if (!strcmp(v, "cluster"))
                to.metric = TUNE_METRIC_CLUSTER;
            else {
                ERR("unknown metric '%s' (expected fg or cluster)\n", v);
                return 1;
            }
            metric_set = true;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--data"))) {
            data = v;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "-o"))) {
            output = v;
        } else if ((v = tool_opt_value("burstc tune", argc, argv, &i, "--comparisons"))) {
            cmpfile = v;
        } else if ((r = tool_arg(&ta, argc, argv, &i)) != TOOL_ARG_TAKEN) {
            return r == TOOL_ARG_HELP ? 0 : 1;
        }
    }
    if (!tool_args_done(&ta))
        return 1;
    const char *input = ta.input, *json = ta.json;
    pass_options popt = ta.popt;
    /* --json was checked by tool_args_done; -o and --comparisons are tune's own. */
    const char *outs[3] = {output, json, cmpfile}, *onames[3] = {"-o", "--json", "--comparisons"};
    for (int k = 0; k < 3; k++)
        if (outs[k] && !strcmp(outs[k], "-")) {
            ERR("%s needs a file name: the table goes to standard output\n", onames[k]);
            return 1;
        }
    if (data && strcmp(runner, "exec")) {
        ERR("--data applies to --runner exec only\n");
        return 1;
    }
    double t_start = now_s();
    to.budget_s = budget;
    to.now = now_s;
    /* Outputs are opened before the trials, so a bad path costs no runs. */
    out_file outf[3];
    bool opened[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
        if (!outs[k])
            continue;
        if (!out_open(&outf[k], outs[k])) {
            for (int q = 0; q < k; q++)
                if (opened[q])
                    out_abort(&outf[q]);
            return 1;
        }
        opened[k] = true;
    }

    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    pass_plan_input in = {0};
    tune_candidate *cand = NULL;
    int ncands = 0, distinct = 0;
    tune_sim_runner sr = {0};
    pass_bg_jobs bgj = {0};
    tune_background tb = {0};
    exec_runner xr = {0};
    bool have_sr = false, have_xr = false, have_res = false;
    tune_result res;
    char err[1024];
    ir_module *m = load_input(a, input, &d);
    if (!m || d.nerrors)
        goto done;
    pass_ctx ctx = {.m = m, .opt = &popt, .d = &d};
    if (!pass_select_job(&ctx))
        goto done;
    if (ctx.job < 0) {
        ERR("'%s' has no job to tune\n", input);
        goto done;
    }
    const ir_job *job = &m->jobs[ctx.job];
    if (!ir_verify(m, &d) || !pass_plan_build(m, ctx.job, &popt, &in, &d))
        goto done;
    for (int l = 0; l < in.p.nlayers; l++)
        if (m->graphs[job->graph]->ops[in.op_of_layer[l]].plan.nranks > 0) {
            ERR("'%s' is already planned (its ops carry ranks): tune the job's source\n", input);
            goto done;
        }
    /* A job with background jobs: candidates with and without packing, and
     * by default the cluster throughput decides. */
    if (job->nbackground > 0) {
        pass_bg_jobs_build(m, job, &in.p, &bgj);
        tb.jobs = bgj.jobs;
        tb.njobs = bgj.n;
        if (!pass_mux_options(m, job, &popt, &in.p, &tb.mux, &d))
            goto done;
        if (!metric_set)
            to.metric = TUNE_METRIC_CLUSTER;
        /* The runtime's guard runs a program's first step and the three
         * after it without background work (runtime/background.c): the
         * measured steps start after them. */
        if (!warmup_set)
            warmup = BG_WARMUP;
    }
    ncands = tune_candidates(&in.p, &tb, to.metric, (int)ncand, &cand, &distinct, err, sizeof err);
    if (ncands == 0) {
        diag_error(&d, job->loc, "no candidate plan: %s", err);
        goto done;
    }
    printf("tune: job %s (model %s), %d GPUs (%d per node), global batch %lld\n", job->name,
           m->graphs[job->graph]->name, in.p.cluster.gpus, in.p.cluster.gpus_per_node,
           (long long)in.p.batch);
    const char *launch = getenv("BURSTC_LAUNCH");
    if (!launch || !*launch)
        launch = "mpirun -np {np}";
    if (!strcmp(runner, "sim"))
        printf("runner sim (jitter %g)", jitter);
    else
        printf("runner exec (%s)", launch);
    printf(", %ld warm-up + %ld measured iterations per run, metric %s, method %s\n", warmup, steps,
           to.metric == TUNE_METRIC_CLUSTER ? "cluster samples/s" : "samples/s",
           rank_method_names[to.method]);
    if (job->nbackground == 0) {
        printf("\ncandidates: %d of %d distinct plans (--candidates %ld)\n", ncands, distinct,
               ncand);
        printf("%3s  %-24s %12s %12s %12s\n", "#", "plan", "predicted ms", "samples/s",
               "GPU-s/iter");
        for (int i = 0; i < ncands; i++)
            printf("%3d  %-24.24s %12.4f %12.1f %12.6f%s\n", i + 1, cand[i].name,
                   cand[i].plan.time * 1e3, cand[i].plan.samples_per_s, cand[i].plan.gpu_seconds,
                   cand[i].aliases ? "  (+ same plan from other settings)" : "");
    } else {
        print_background_candidates(m, job, &tb, cand, ncands, distinct, ncand);
    }
    fflush(stdout);
    if (ncands < 2)
        printf("(one distinct plan: nothing to compare)\n");

    tune_runner tr;
    if (!strcmp(runner, "sim")) {
        if (!tune_sim_runner_init(&sr, &in.p, &tb, cand, ncands, (int)warmup, (int)steps, jitter,
                                  err, sizeof err)) {
            ERR("%s\n", err);
            goto done;
        }
        have_sr = true;
        tr = (tune_runner){.ctx = &sr, .run = tune_sim_run};
    } else {
        /* One trial is two runs of warm-up + steps iterations; by the model's
         * times the fastest pair takes at least this long. */
        double t2 = cand[0].pred_time + cand[ncands > 1 ? 1 : 0].pred_time;
        double trial = (double)(warmup + steps) * t2;
        if (ncands >= 2 && budget < trial) {
            ERR("--budget %gs is too small for one trial: a trial runs two candidates for %ld "
                "iterations each, at least %.3g s by the model's times\n",
                budget, warmup + steps, trial);
            goto done;
        }
        xr = (exec_runner){.c = cand,
                           .n = ncands,
                           .G = in.p.cluster.gpus,
                           .batch = in.p.batch,
                           .warmup = (int)warmup,
                           .steps = (int)steps,
                           .data = data,
                           .run_timeout = run_timeout,
                           .no_report = plan_xcalloc((size_t)ncands, sizeof *xr.no_report),
                           .malformed = plan_xcalloc((size_t)ncands, sizeof *xr.malformed)};
        have_xr = true;
        if (!exec_launcher(&xr))
            goto done;
        if (ncands >= 2 && !exec_prepare(&xr, input, &popt, cand))
            goto done;
        tr = (tune_runner){.ctx = &xr, .run = exec_run};
    }
    double *pred = plan_xcalloc((size_t)ncands, sizeof *pred);
    for (int i = 0; i < ncands; i++)
        pred[i] = tune_candidate_metric(&cand[i], to.metric);
    /* The budget is the command's: what planning and builds took is spent. */
    to.budget_s = fmax(budget - (now_s() - t_start), 1e-9);
    if (!tune_run(ncands, pred, &tr, &to, &res, err, sizeof err)) {
        free(pred);
        fprintf(stderr, "burstc tune: internal error: %s\n", err);
        status = 2;
        goto done;
    }
    free(pred);
    have_res = true;
    tune_report rep = {.job = job->name,
                       .model = m->graphs[job->graph]->name,
                       .runner = runner,
                       .input = input,
                       .p = &in.p,
                       .c = cand,
                       .n = ncands,
                       .distinct = distinct,
                       .o = &to,
                       .r = &res,
                       .warmup = (int)warmup,
                       .steps = (int)steps,
                       .jitter = jitter,
                       .budget = budget,
                       .launch = launch,
                       .background = job->nbackground > 0,
                       .no_report = have_xr ? xr.no_report : NULL,
                       .malformed = have_xr ? xr.malformed : NULL};
    if (ncands >= 2) {
        printf("\ntrials: comparison graph G(n=%d, p=%.2f) with %d pairs; Delta %.3f by the "
               "model, %.3f by the comparisons;\n",
               ncands, res.p, res.edges, res.delta0, res.delta);
        printf("bound c n log n / Delta^2 = %.1f comparisons (c %g); made %lld in %lld round%s "
               "(%lld runs), %.1f s\n",
               res.target, to.c, (long long)res.comparisons, (long long)res.rounds,
               res.rounds == 1 ? "" : "s", (long long)res.runs, res.wall_s);
        printf("stopped: %s\n", stop_text(&res));
    }
    print_ranking(&rep);
    fflush(stdout); /* the table before the messages that follow it */
    if (res.ranked == 0) {
        ERR("nothing could be ranked: %s\n", res.stop);
    } else {
        const tune_candidate *w = &cand[res.order[0]];
        if (!res.separated && ncands >= 2)
            printf("winner: %s (not separated: more comparisons would be needed to be sure)\n",
                   w->name);
        else
            printf("winner: %s\n", w->name);
        int failed = 0;
        for (int i = 0; i < ncands; i++)
            failed += res.failure[i] != NULL;
        fflush(stdout);
        if (failed)
            fprintf(stderr,
                    "burstc tune: warning: %d of %d candidates failed and are ranked last\n",
                    failed, ncands);
    }
    bool ok = true;
    /* -o only with a winner; the JSON and the comparisons either way. */
    for (int k = 0; k < 3; k++) {
        if (!opened[k])
            continue;
        if (k == 0 && res.ranked == 0) {
            out_abort(&outf[k]);
            opened[k] = false;
            continue;
        }
        bool w = k == 0   ? write_plan_ir(input, &popt, &cand[res.order[0]], outf[k].fp)
                 : k == 1 ? write_json(outf[k].fp, &rep)
                          : write_comparisons(outf[k].fp, &rep);
        opened[k] = false;
        if (w && ok)
            w = out_commit(&outf[k]);
        else
            out_abort(&outf[k]);
        ok = ok && w;
        if (k == 0 && w) {
            const tune_candidate *wc = &cand[res.order[0]];
            printf("written: %s (burstc build %s)", output, output);
            if (job->nbackground > 0 && wc->packed)
                printf(", with its %d background cop%s", wc->copies, wc->copies == 1 ? "y" : "ies");
            else if (job->nbackground > 0)
                printf(", without background copies");
            printf("\n");
        }
    }
    status = ok && res.ranked > 0 ? 0 : 1;
done:
    for (int k = 0; k < 3; k++)
        if (opened[k])
            out_abort(&outf[k]);
    if (have_res)
        tune_result_free(&res);
    if (have_sr)
        tune_sim_runner_free(&sr);
    if (have_xr)
        exec_free(&xr);
    if (cand)
        tune_candidates_free(cand, ncands);
    pass_bg_jobs_free(&bgj);
    pass_plan_input_free(&in);
    if (d.nerrors > 0)
        status = 1;
    diag_summary(&d);
    arena_free(a);
    return status;
}
