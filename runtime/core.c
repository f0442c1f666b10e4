/* core.c: the top of libburstrt's shared code, its life cycle: the start and end of a run (rt_init: MPI, options, the backend,
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
    rt_set_mpi_running(true);
    MPI_Comm_rank(MPI_COMM_WORLD, &rt_opts_g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rt_opts_g.world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rt_watchdog_board();
    if (!rt_parse_options(*argc, *argv, program ? program : (*argv)[0]))
        rt_exit_early(0); /* --help */
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
    if (!rt_mpi_running()) {
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
    rt_set_mpi_running(false);
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

void rt_check_launch(int gpus_per_node)
{
    if (!rt_nodes_launch_ok(gpus_per_node))
        rt_exit_early(2);
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
