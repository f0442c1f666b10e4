/* core.c: the process-wide part of libburstrt: the state of this rank, fatal errors that
 * name rank, op and cause, the start and end of a run (rt_init: MPI, options, the backend,
 * the watchdog; rt_finalize: trace, teardown, MPI_Finalize), the world-size check, and
 * the step hooks, which time each iteration, keep the watchdog's deadline and write
 * checkpoints when they are due. */
#include "internal.h"

#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

rt_options rt_opts_g = {.iterations = 10,
                        .seed = 1,
                        .threads = 0,
                        .step_timeout = 20.0,
                        .bucket_mb = 25.0,
                        .background = true,
                        .loss_scale_init = 65536.0,
                        .loss_scale_growth = 2.0,
                        .loss_scale_backoff = 0.5,
                        .loss_scale_interval = 2000,
                        .world_size = 1};
static bool mpi_started;

/* ---- errors ------------------------------------------------------------------- */

static void vmessage(const char *op, const char *fmt, va_list ap)
{
    char buf[4096];
    int n =
        snprintf(buf, sizeof buf, "burstrt: rank %d: %s: ", rt_opts_g.rank, op ? op : "runtime");
    if (n < 0)
        return;
    if ((size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf - 1 ? (size_t)n : sizeof buf - 5;
    if (len == sizeof buf - 5)
        memcpy(buf + len, "...", 3), len += 3; /* cut: still one line */
    buf[len++] = '\n';
    /* One write: up to PIPE_BUF bytes land in a pipe (mpirun's) in one piece. */
    fflush(stderr);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, buf + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

void rt_message(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(op, fmt, ap);
    va_end(ap);
}

_Noreturn void rt_fatal(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(op, fmt, ap);
    va_end(ap);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void *rt_xmalloc(size_t n, const char *op)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu bytes", n);
    return p;
}

void *rt_xcalloc(size_t n, size_t size, const char *op)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

const char *rt_dtype_name(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return "f32";
    case RT_I32: return "i32";
    case RT_BF16: return "bf16";
    case RT_F16: return "f16";
    }
    return "unknown";
}

void rt_check(const rt_tensor *t, rt_dtype dt, int ndim, const char *op, const char *what)
{
    if (!t)
        rt_fatal(op, "%s is NULL", what);
    if (t->dtype != dt)
        rt_fatal(op, "%s has dtype %s, expected %s", what, rt_dtype_name(t->dtype),
                 rt_dtype_name(dt));
    if (ndim >= 0 && t->ndim != ndim)
        rt_fatal(op, "%s has %d dimensions, expected %d", what, t->ndim, ndim);
}

void rt_check_numel(const rt_tensor *t, int64_t numel, const char *op, const char *what)
{
    if (t->numel != numel)
        rt_fatal(op, "%s has %lld elements, expected %lld", what, (long long)t->numel,
                 (long long)numel);
}

double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The step this rank is in, for the message of a rank that mpirun stops. */
static volatile int64_t current_step = -1;

/* Appends the decimal digits of v (async-signal-safe). */
static size_t put_int(char *buf, size_t at, int64_t v)
{
    char tmp[24];
    size_t n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-v) : (uint64_t)v;
    do
        tmp[n++] = (char)('0' + u % 10);
    while ((u /= 10) && n < sizeof tmp);
    if (v < 0)
        buf[at++] = '-';
    while (n)
        buf[at++] = tmp[--n];
    return at;
}

static size_t put_str(char *buf, size_t at, const char *s)
{
    while (*s)
        buf[at++] = *s++;
    return at;
}

/* When one rank dies, mpirun stops the others with SIGTERM: each says which rank it
 * is and the step it was in before it goes, so the job's output shows where every
 * rank stood. Only async-signal-safe calls here. */
static void on_terminate(int sig)
{
    char buf[256];
    size_t n = put_str(buf, 0, "burstrt: rank ");
    n = put_int(buf, n, rt_opts_g.rank);
    if (current_step < 0) {
        n = put_str(buf, n, ": stopped in start-up");
    } else {
        n = put_str(buf, n, ": stopped at step ");
        n = put_int(buf, n, current_step);
    }
    n = put_str(buf, n,
                ": the job was terminated (another rank failed, or mpirun was interrupted)\n");
    ssize_t w = write(STDERR_FILENO, buf, n);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static double step_limit(void);

/* BURSTRT_TEST_FAULT=stop-before-mpi@R or stop-in-startup@R: rank R stops (SIGSTOP) before
 * MPI_Init or at the end of rt_init, so that the tests can check what the watchdog of the
 * others says. */
static void test_fault(const char *where)
{
    const char *f = getenv("BURSTRT_TEST_FAULT");
    size_t n = strlen(where);
    if (f && !strncmp(f, where, n) && f[n] == '@' && atoi(f + n + 1) == rt_opts_g.rank) {
        rt_message("init", "BURSTRT_TEST_FAULT: stopping this rank (%s)", where);
        raise(SIGSTOP);
    }
}

bool rt_mpi_running(void)
{
    return mpi_started;
}

/* Leaves before the training starts (--help, a world of the wrong size): every rank
 * does the same, so the collective teardown is safe. */
_Noreturn void rt_exit_early(int status)
{
    rt_watchdog_stop();
    MPI_Finalize();
    exit(status);
}

/* Open MPI's nonblocking all-reduce (libnbc), which the gradient buckets use, picks by
 * default an algorithm that takes 2.3x the blocking MPI_Allreduce for fmnist's 1.7 MB
 * of gradients on 2 ranks; Rabenseifner's (3) costs what the blocking call does
 * (tests/bench/profile/allreduce_time.c, docs/runtime.md "Gradient all-reduce"). It is
 * chosen when every rank on this node has a CPU of its own (on ranks time-sliced on
 * fewer cores it measured mixed, and slower for small messages) and the user did not
 * choose. Read by MPI_Init; other MPIs ignore the variable. */
static void mpi_defaults(void)
{
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (local && atol(local) >= 1 && atol(local) <= cpus)
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 0);
}

const rt_options *rt_init(int *argc, char ***argv, const char *program)
{
    rt_dev.start(*argv);
    /* The launcher's rank, for messages before MPI knows it. */
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]) && (rt_opts_g.rank = atoi(getenv(vars[i]))) >= 0)
            break;
    /* Watched from here: a rank that stops during start-up ends the job too. */
    rt_watchdog_start(*argv);
    test_fault("stop-before-mpi");
    rt_watchdog_before_mpi();
    int provided;
    mpi_defaults();
    /* MPI_Init waits for the other ranks; its end is progress. */
    rt_wait_begin("MPI_Init");
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    rt_wait_end();
    mpi_started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rt_opts_g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt_opts_g.world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rt_watchdog_board();
    rt_parse_options(*argc, *argv, program ? program : (*argv)[0]);
    rt_watchdog_limit(rt_opts_g.step_timeout);
    /* Unwritable output paths are found now, not after training. */
    rt_checkpoint_check_dir();
    rt_trace_check_path();
    rt_weights_check_output();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_terminate;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    /* The device's set-up is collective too (cpu/device.c shares the node's CPUs among
     * its ranks): a rank blocked in it waits for its peers, it is not stuck itself. */
    rt_wait_begin("start-up");
    rt_dev.init(&rt_opts_g);
    rt_net.start();
    rt_trace_init();
    rt_wait_end();
    test_fault("stop-in-startup");
    return &rt_opts_g;
}

void rt_finalize(void)
{
    if (!mpi_started) {
        /* Used without rt_init (single-process tools and tests): free what exists. */
        rt_trace_write_and_free("");
        rt_bg_free();
        rt_reshards_free();
        rt_comm_free_all();
        rt_dev.finalize();
        return;
    }
    rt_grads_wait(); /* a program that started all-reduces and never stepped */
    rt_reshards_free();
    rt_loss_scale_report();
    rt_watchdog_finishing();
    rt_watchdog_limit(step_limit());
    rt_dev.sync("finalize");
    rt_wait_begin("rt_finalize");
    rt_trace_write_and_free(rt_opts_g.trace_path);
    MPI_Barrier(MPI_COMM_WORLD);
    rt_wait_end();
    rt_bg_free();
    rt_weights_free();
    rt_watchdog_stop();
    rt_comm_free_all();
    rt_net.stop();
    rt_dev.finalize();
    MPI_Finalize();
    mpi_started = false;
}

void rt_check_world_size(int needed)
{
    if (rt_opts_g.world_size != needed) {
        if (rt_opts_g.rank == 0) {
            char msg[160];
            int n = snprintf(msg, sizeof msg,
                             "burstrt: plan needs %d ranks, launched with %d (use mpirun -np %d)\n",
                             needed, rt_opts_g.world_size, needed);
            ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
            (void)w;
        }
        rt_exit_early(2);
    }
}

int rt_rank(void)
{
    return rt_opts_g.rank;
}
int rt_world_size(void)
{
    return rt_opts_g.world_size;
}

static double step_t0, slowest_step;

/* How long a watched rank may go without progress: --step-timeout, or three times the
 * slowest step so far when that is longer, so that a model whose steps legitimately take
 * long is not aborted once it has completed a step. */
static double step_limit(void)
{
    double t = rt_opts_g.step_timeout;
    return t > 0 && 3.0 * slowest_step > t ? 3.0 * slowest_step : t;
}

void rt_step_begin(int64_t step)
{
    rt_dev.step_begin(step);
    current_step = step;
    rt_progress_phase(RT_PHASE_STEP, step);
    step_t0 = rt_now();
    rt_bg_step_begin(step);
}

void rt_step_end(int64_t step)
{
    rt_dev.step_end(step);
    double t1 = rt_now();
    rt_bg_step_end(step, t1 - step_t0);
    if (t1 - step_t0 > slowest_step)
        slowest_step = t1 - step_t0;
    rt_watchdog_limit(step_limit());
    rt_trace_record_step(step, step_t0, t1);
    rt_checkpoint_maybe_save(step);
    rt_weights_maybe_save(step + 1);
    /* Not watched until the next step or rt_progress (waits for other ranks are): what
     * runs between steps (evaluation, reporting) may legitimately take long. */
    rt_progress_phase(RT_PHASE_BETWEEN, step);
}

void rt_progress(void)
{
    int64_t step;
    rt_phase ph = rt_progress_now(&step);
    rt_progress_phase(ph == RT_PHASE_BETWEEN ? RT_PHASE_EVAL : ph, step);
}
