/* watchdog.c: every rank publishes its progress, and a thread per rank ends the whole job
 * when progress stops, naming the rank that stopped. The thread runs from the start of
 * rt_init (before MPI starts) to rt_finalize.
 *
 * Progress: the main thread records a progress event at every phase change (start-up, a
 * step, between steps, evaluation, checkpoint save or load, rt_finalize), every traced op
 * and every wait for communication, with the time, the step, the op and whether it is
 * waiting. The records of the ranks of one node live in one shared-memory segment (the
 * progress board), so a rank can read where its peers stand without their cooperation:
 * a rank stopped by a signal, sleeping or looping keeps its last record, and its process
 * id says whether it still runs (/proc). The board exists before MPI starts when the
 * launcher says where a rank is (its job, its node-local rank and the node's count: Open
 * MPI, Slurm, MPICH's hydra): a POSIX shared-memory object named after the job and the
 * host. Otherwise it is made after MPI_Init, from MPI's shared-memory split.
 *
 * Firing: when this rank is watched (anything but the time between steps, where long
 * evaluations are allowed unless they call rt_progress; waits for communication are
 * always watched) and has made no progress for the limit (--step-timeout, or three times
 * the slowest step), the thread looks at the board. A rank whose process is stopped or
 * gone, or that is not waiting and has made no progress for the limit, is the one that
 * stopped: the message names it (it may be this rank). If some rank not waiting still
 * makes progress, this rank waits for it and the watchdog waits too. When every rank of
 * the node waits, the heartbeats of the other nodes (nodes.c, sent from this thread) name
 * a node that went silent, or say that a rank there still works. If every rank waits,
 * or a rank has already finished, the message says so. Every message is one write(2).
 * After MPI_Init the job ends with MPI_Abort; before, the rank marks itself as ending
 * the job on the board, kills the node's ranks whose processes are stopped, and exits:
 * mpirun's own way of ending the job continues a stopped process (SIGCONT, then SIGTERM a
 * second later), and a process that runs into MPI_Init while mpirun tears down can hang
 * mpirun for good (Open MPI 4.1.4 with PMIx 4.2.2, issue 31). A rank that starts, or is
 * continued, while a peer ends the job exits before it reaches MPI_Init.
 *
 * Time in which this process did not run (the job suspended with ^Z, a debugger's
 * breakpoint) is not lack of progress. It is told from time in which the process was
 * runnable but starved (a loaded machine, which is lack of progress) by the watchdog
 * thread's run-queue time (/proc/thread-self/schedstat). */
#include "mpi_glue.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define OP_LEN 48

/* One rank's record. Written only by that rank's main thread; read by any rank's
 * watchdog under the sequence counter (odd while a write is under way). */
typedef struct {
    _Atomic uint32_t seq;
    _Atomic int32_t state; /* REC_NONE ... REC_ENDING */
    _Atomic int32_t world_rank;
    _Atomic int32_t pid;
    _Atomic int32_t phase;
    _Atomic int32_t waiting; /* depth of waits for communication */
    _Atomic int64_t step;
    _Atomic int64_t t_us;    /* CLOCK_MONOTONIC (one clock per node) of the last progress */
    _Atomic int64_t beat_us; /* the watchdog thread's last tick: its process runs */
    char op[OP_LEN];         /* the traced op it is in, or "" */
    char wait[OP_LEN];       /* the communication call it waits in, or "" */
} record;

enum {
    REC_NONE,    /* not started (a slot of the early board nobody has taken yet) */
    REC_RUNNING, /* from rt_init */
    REC_FINISH,  /* in rt_finalize */
    REC_ENDING,  /* its watchdog fired: it is ending the job */
};

/* A reader's copy. */
typedef struct {
    int state, world_rank, pid, phase, waiting;
    int64_t step, t_us, beat_us;
    char op[OP_LEN], wait[OP_LEN];
} snapshot;

static struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running, stop;
    _Atomic int64_t limit_us; /* 0: off */
    _Atomic bool mpi_ready;   /* MPI_Abort may be called */
    record own;               /* this rank's record when there is no board */
    record *_Atomic me;
    record *_Atomic board; /* the node's records, one per node-local rank */
    int nboard;
    MPI_Comm node;
    bool have_node;
    MPI_Win win;
    bool have_win;
    /* The early board (a POSIX shared-memory object, before MPI starts). */
    record *early;
    int early_n, early_local; /* its slots, and this rank's */
    char early_name[64];
    bool early_named; /* early_name still names it (unlinked once every rank is in) */
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .me = &wd.own};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- this rank's record --------------------------------------------------------------- */

static void set_name(char *dst, const char *src)
{
    size_t n = strlen(src);
    n = n < OP_LEN - 1 ? n : OP_LEN - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* A progress event: optionally a new phase and step, op name, or wait. */
static void publish(int phase, int64_t step, const char *op, const char *wait, int wait_delta)
{
    record *r = atomic_load(&wd.me);
    atomic_fetch_add_explicit(&r->seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    if (phase >= 0) {
        atomic_store_explicit(&r->phase, phase, memory_order_relaxed);
        atomic_store_explicit(&r->step, step, memory_order_relaxed);
    }
    if (op)
        set_name(r->op, op);
    if (wait)
        set_name(r->wait, wait);
    if (wait_delta)
        atomic_fetch_add_explicit(&r->waiting, wait_delta, memory_order_relaxed);
    atomic_store_explicit(&r->t_us, now_us(), memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_fetch_add_explicit(&r->seq, 1, memory_order_relaxed);
}

void rt_progress_phase(rt_phase phase, int64_t step)
{
    publish((int)phase, step, "", NULL, 0);
}

void rt_progress_op(const char *name)
{
    publish(-1, 0, name, NULL, 0);
}

void rt_progress_tick(void)
{
    publish(-1, 0, NULL, NULL, 0);
}

void rt_wait_begin(const char *what)
{
    record *r = atomic_load(&wd.me);
    publish(-1, 0, NULL, atomic_load(&r->waiting) == 0 ? what : NULL, 1);
}

void rt_wait_end(void)
{
    record *r = atomic_load(&wd.me);
    publish(-1, 0, NULL, atomic_load(&r->waiting) == 1 ? "" : NULL, -1);
}

rt_phase rt_progress_now(int64_t *step)
{
    record *r = atomic_load(&wd.me);
    *step = atomic_load(&r->step);
    return (rt_phase)atomic_load(&r->phase);
}

void rt_watchdog_limit(double seconds)
{
    /* Clamped: a double beyond int64's range would convert to anything. */
    if (seconds > RT_STEP_TIMEOUT_MAX)
        seconds = RT_STEP_TIMEOUT_MAX;
    atomic_store(&wd.limit_us, seconds > 0 ? (int64_t)(seconds * 1e6) : 0);
}

static void read_record(record *r, snapshot *s)
{
    for (int tries = 0; tries < 100; tries++) {
        uint32_t a = atomic_load_explicit(&r->seq, memory_order_acquire);
        s->state = atomic_load_explicit(&r->state, memory_order_relaxed);
        s->world_rank = atomic_load_explicit(&r->world_rank, memory_order_relaxed);
        s->pid = atomic_load_explicit(&r->pid, memory_order_relaxed);
        s->phase = atomic_load_explicit(&r->phase, memory_order_relaxed);
        s->waiting = atomic_load_explicit(&r->waiting, memory_order_relaxed);
        s->step = atomic_load_explicit(&r->step, memory_order_relaxed);
        s->t_us = atomic_load_explicit(&r->t_us, memory_order_relaxed);
        s->beat_us = atomic_load_explicit(&r->beat_us, memory_order_relaxed);
        memcpy(s->op, r->op, OP_LEN);
        memcpy(s->wait, r->wait, OP_LEN);
        atomic_thread_fence(memory_order_acquire);
        if (!(a & 1) && a == atomic_load_explicit(&r->seq, memory_order_relaxed))
            break;
    }
    s->op[OP_LEN - 1] = 0;
    s->wait[OP_LEN - 1] = 0;
}

static const char *env_first(const char *const *names, int n);
static bool parse_int(const char *v, int lo, int hi, int *out);

/* ---- the processes of the node's ranks ------------------------------------------------ */

/* How a local process stands, from /proc/PID/stat: 'R', 'S', 'D' (running or able to),
 * 'T' (stopped by a signal), 't' (stopped by a debugger), 'Z' or 'X' (exited), 'G' (no
 * such process), or 0 when it cannot be told (no pid, no /proc, another pid namespace). */
static char proc_state(int pid)
{
    if (pid <= 0)
        return 0;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 'G' : 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *paren = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

static bool proc_stopped(char st)
{
    return st == 'T' || st == 't';
}

static bool proc_gone(char st)
{
    return st == 'Z' || st == 'X' || st == 'G';
}

/* Why a process does not run, as words, for a peer's message. */
static const char *proc_why(char st)
{
    return st == 'T'       ? "stopped"
           : st == 't'     ? "stopped by a debugger"
           : proc_gone(st) ? "exited or killed"
                           : "stopped or killed";
}

/* ---- messages ------------------------------------------------------------------------- */

/* Where a rank stands, as words: "at step 3 in 'conv1.fwd'". */
static void where(const snapshot *s, char *out, size_t cap)
{
    char what[96];
    switch ((rt_phase)s->phase) {
    case RT_PHASE_START: snprintf(what, sizeof what, "in start-up (before the first step)"); break;
    case RT_PHASE_STEP: snprintf(what, sizeof what, "at step %lld", (long long)s->step); break;
    case RT_PHASE_BETWEEN:
        snprintf(what, sizeof what, "between steps (after step %lld)", (long long)s->step);
        break;
    case RT_PHASE_EVAL:
        snprintf(what, sizeof what, "in a phase outside the steps (after step %lld)",
                 (long long)s->step);
        break;
    case RT_PHASE_SAVE:
        snprintf(what, sizeof what, "saving the checkpoint after step %lld", (long long)s->step);
        break;
    case RT_PHASE_LOAD: snprintf(what, sizeof what, "loading a checkpoint"); break;
    case RT_PHASE_FINISH: snprintf(what, sizeof what, "in rt_finalize"); break;
    }
    int n = snprintf(out, cap, "%s", what);
    if (s->op[0] && n >= 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, " in '%s'", s->op);
    if (s->waiting && s->wait[0] && n >= 0 && (size_t)n < cap)
        snprintf(out + n, cap - (size_t)n, " (waiting in %s)", s->wait);
}

static void say(const char *fmt, va_list ap)
{
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    rt_message("watchdog",
               "%s; aborting the job (if ranks are legitimately this slow, raise "
               "--step-timeout)",
               msg);
}

/* Ends the process if MPI_Abort has not within this long: an abort that waits for a
 * launcher that no longer answers must not keep the rank alive. */
#define ABORT_GRACE_S 10

static void *abort_guard(void *arg)
{
    (void)arg;
    sleep(ABORT_GRACE_S);
    _exit(3);
}

static _Noreturn void fire(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* After MPI_Init: the message, then MPI_Abort. */
static _Noreturn void fire(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    atomic_store(&atomic_load(&wd.me)->state, REC_ENDING);
    pthread_t guard;
    if (pthread_create(&guard, NULL, abort_guard, NULL) == 0)
        pthread_detach(guard);
    if (atomic_load(&wd.mpi_ready))
        MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

/* ---- a launcher that does not end the job --------------------------------------------- */

/* Killing the stopped ranks first is not enough: under load, Open MPI 4.1.4's mpirun still
 * deadlocks now and then in PMIx_server_finalize after every rank of the job has exited
 * (startup_stop.py: 1 run of 30, mpirun's main thread waiting in PMIx_server_finalize, its
 * PMIx thread on a mutex). So the rank that ends the job in start-up leaves a small
 * process behind. If the launcher (this rank's parent: mpirun, or orted on another node)
 * still runs LAUNCHER_GRACE_S after the fork, the job's ranks are long gone and the
 * launcher is stuck: the process says so on the launcher's standard error and ends it
 * (SIGTERM, then SIGKILL). It is started only under Open MPI's launchers, it holds none of
 * the job's files or sockets (mpirun waits for a rank's output pipes to close), and it makes
 * only fork-safe calls (the watchdog forks from a threaded process). */
#define LAUNCHER_GRACE_S 6

/* Field 22 of /proc/PID/stat (the start time, in clock ticks since boot) and the state, with
 * open and read only; false when the process is gone. */
static bool launcher_stat(const char *path, unsigned long long *start, char *state)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return false;
    *state = p[2];
    p += 2; /* field 3, the state */
    for (int field = 3; field < 22; field++) {
        while (*p && *p != ' ')
            p++;
        if (!*p)
            return false;
        p++;
    }
    unsigned long long v = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (unsigned long long)(*p - '0');
    *start = v;
    return true;
}

/* "/proc/" PID TAIL into out (cap >= 48), without stdio. */
static void proc_path(char *out, int pid, const char *tail)
{
    char digits[16];
    int n = 0;
    do
        digits[n++] = (char)('0' + pid % 10);
    while ((pid /= 10) > 0);
    size_t k = 0;
    for (const char *c = "/proc/"; *c; c++)
        out[k++] = *c;
    while (n > 0)
        out[k++] = digits[--n];
    for (const char *c = tail; *c && k < 46; c++)
        out[k++] = *c;
    out[k] = 0;
}

static void nap_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* Whether the launcher that started this process is still the process at pid. */
static bool launcher_alive(const char *stat_path, unsigned long long start)
{
    unsigned long long now;
    char st;
    return launcher_stat(stat_path, &now, &st) && now == start && st != 'Z' && st != 'X';
}

static void leave_launcher_backstop(void)
{
    static const char *const launchers[] = {"mpirun", "mpiexec", "orterun",
                                            "orted",  "prterun", "prted"};
    const int launcher = (int)getppid();
    char stat_path[48], comm_path[48], err_path[48], comm[32] = "";
    proc_path(stat_path, launcher, "/stat");
    proc_path(comm_path, launcher, "/comm");
    proc_path(err_path, launcher, "/fd/2");
    int fd = open(comm_path, O_RDONLY | O_CLOEXEC);
    if (launcher <= 1 || fd < 0)
        return;
    ssize_t n = read(fd, comm, sizeof comm - 1);
    close(fd);
    comm[n > 0 ? n : 0] = 0;
    if (n > 0 && comm[n - 1] == '\n')
        comm[n - 1] = 0;
    bool known = false;
    for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++)
        known |= !strcmp(comm, launchers[i]);
    unsigned long long start;
    char st;
    if (!known || !launcher_stat(stat_path, &start, &st))
        return;
    char msg[256];
    int len = snprintf(msg, sizeof msg,
                       "burstrt: watchdog: %s (pid %d) still runs %d s after a rank ended the "
                       "job in start-up (an Open MPI/PMIx hang in finalize); ending it\n",
                       comm, launcher, LAUNCHER_GRACE_S);
    if (len < 0 || len >= (int)sizeof msg)
        return;
    pid_t p = fork();
    if (p != 0)
        return; /* this rank goes on to exit; a failed fork leaves the launcher to itself */
    setsid();   /* out of the process group that the launcher signals */
    int null = open("/dev/null", O_RDWR);
    for (int i = 0; i < 3 && null >= 0; i++)
        dup2(null, i);
    for (int i = 3; i < 4096; i++)
        close(i);
    for (int i = 0; i < LAUNCHER_GRACE_S * 5; i++) {
        if (!launcher_alive(stat_path, start))
            _exit(0);
        nap_ms(200);
    }
    int err = open(err_path, O_WRONLY | O_APPEND | O_NOCTTY);
    if (err >= 0) {
        ssize_t w = write(err, msg, (size_t)len);
        (void)w;
        close(err);
    }
    kill(launcher, SIGTERM);
    for (int i = 0; i < 10; i++) {
        nap_ms(200);
        if (!launcher_alive(stat_path, start))
            _exit(0);
    }
    kill(launcher, SIGKILL);
    _exit(0);
}

static _Noreturn void fire_early(const int *kill_pids, const int *kill_ranks, int nkill,
                                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Before MPI_Init has finished: the message; this rank marked as ending the job, so that
 * a peer that starts or is continued now exits before MPI_Init; the stopped processes of
 * the node's ranks killed, each named (mpirun would continue them first: see the top, and
 * which exit mpirun reports first is a race, so the line says how such a rank ended);
 * exit. */
static _Noreturn void fire_early(const int *kill_pids, const int *kill_ranks, int nkill,
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say(fmt, ap);
    va_end(ap);
    atomic_store(&atomic_load(&wd.me)->state, REC_ENDING);
    for (int i = 0; i < nkill; i++)
        if (proc_state(kill_pids[i]) == 'T' && kill(kill_pids[i], SIGKILL) == 0)
            rt_message("watchdog",
                       "killed rank %d's stopped process (PID %d), which the launcher would "
                       "continue into MPI_Init",
                       kill_ranks[i], kill_pids[i]);
    leave_launcher_backstop();
    _exit(3);
}

/* A process whose watchdog thread has not ticked for this long (or half the limit) is not
 * running, when /proc cannot tell: stopped by a signal, or gone. Ticks come every 200 ms. */
#define STOPPED_US 2000000
#define TICK_US    200000
/* Time this process did not run, beyond which a gap between ticks is a pause. */
#define PAUSED_US  1000000

/* Whether a peer's process no longer runs: its state in /proc when that can be read (a
 * peer starved on a loaded machine is not stopped), else its watchdog's last tick. */
static bool peer_gone(const snapshot *s, int64_t now, int64_t stopped_us, char *st)
{
    *st = proc_state(s->pid);
    if (*st)
        return proc_stopped(*st) || proc_gone(*st);
    return now - s->beat_us > stopped_us;
}

/* How long lack of progress by running processes is waited for: the limit, but in
 * start-up (before the first step) at least STARTUP_PATIENCE_US, since a loaded machine
 * makes MPI_Init, the set-up collectives and data loading slow, not stuck. A stopped or
 * gone process is a fault at the limit in any phase. */
#define STARTUP_PATIENCE_US 60000000

static int64_t patience(int phase, int64_t limit)
{
    return phase == RT_PHASE_START && limit < STARTUP_PATIENCE_US ? STARTUP_PATIENCE_US : limit;
}

/* A node that has sent no heartbeat for this long (or half the limit, if longer) has
 * stopped or is gone: heartbeats come every second (nodes.c). */
#define SILENT_US 5000000

/* What a heartbeat said about its sender, as words (where() of a snapshot). */
static void beat_where(const rt_node_beat *b, char *out, size_t cap)
{
    snapshot s = {.phase = b->phase, .waiting = b->waiting, .step = b->step};
    memcpy(s.op, b->op, OP_LEN);
    memcpy(s.wait, b->wait, OP_LEN);
    s.op[OP_LEN - 1] = s.wait[OP_LEN - 1] = 0;
    where(&s, out, cap);
}

/* Every rank of this node waits: what the other nodes' heartbeats say. A node silent for
 * silent_us is the cause (every process of it stopped or gone) and the job ends naming
 * it; a node that has finished is named too. Returns true while a rank of another node
 * still makes progress (this rank waits for it); else false, with where each other node's
 * rank last said it waits in out ("" without heartbeats). */
static bool check_nodes(const char *here, int64_t now, int64_t silent_us, char *out, size_t cap)
{
    const int nodes = rt_nodes_count();
    int64_t heard_us;
    int from;
    rt_node_beat b;
    size_t n = 0;
    bool working = false;
    out[0] = 0;
    for (int i = 0; i < nodes; i++) {
        if (!rt_nodes_heard(i, &heard_us, &from, &b))
            continue;
        char ranks[120], there[200] = "";
        rt_nodes_ranks(i, ranks, sizeof ranks);
        if (from >= 0)
            beat_where(&b, there, sizeof there);
        const double silent = (double)(now - heard_us) * 1e-6;
        if (now - heard_us > silent_us) {
            if (from >= 0 && b.phase == RT_PHASE_FINISH)
                fire("node %s (ranks %s) has finished (rt_finalize) while this rank waits %s: "
                     "the ranks ran different numbers of steps or communication calls",
                     rt_nodes_host(i), ranks, here);
            char last[260] = "it has sent none since start-up";
            if (from >= 0)
                snprintf(last, sizeof last, "its last said rank %d was %s", from, there);
            fire("node %s (ranks %s) has sent no heartbeat for %.1f s: its ranks stopped or "
                 "were killed, or the host is down; %s; this rank waits for it %s",
                 rt_nodes_host(i), ranks, silent, last, here);
        }
        working |= from >= 0 && b.working > 0;
        if (from >= 0 && n < cap - 100)
            n += (size_t)snprintf(out + n, cap - n, "%snode %s: rank %d %s", n ? "; " : "",
                                  rt_nodes_host(i), from, there);
    }
    return working;
}

/* This rank has made no progress for longer than the limit: find out why and end the job,
 * or return while it waits for a rank that still makes progress (or, in start-up, while
 * every process it can see runs). A rank is the cause when its process has stopped
 * running (stopped or killed, whether or not it was waiting), when it is not waiting and
 * has made no progress for the limit (hung, or looping outside the runtime), or when its
 * node's heartbeats stopped arriving (every process of that node stopped or gone). */
static void check_peers(const snapshot *me, int64_t now, int64_t limit)
{
    char here[200];
    where(me, here, sizeof here);
    const int64_t waited = now - me->t_us;
    const double mine = (double)waited * 1e-6;
    const bool impatient = waited > patience(me->phase, limit);
    if (!me->waiting) {
        if (impatient)
            fire("rank %d (this rank) stopped making progress %.1f s ago, %s", rt_opts_g.rank, mine,
                 here);
        return;
    }
    record *board = atomic_load(&wd.board);
    int nboard = wd.nboard;
    if (!board && wd.early) { /* in rt_watchdog_board: the early board holds the node */
        board = wd.early;
        nboard = wd.early_n;
    }
    if (!board) {
        if (impatient)
            fire("no progress for %.1f s %s; a peer rank (not visible from here: no shared "
                 "memory with it) has probably died or hung",
                 mine, here);
        return;
    }
    /* Half the limit, at least: a busy machine may delay a tick by a second or two. */
    const int64_t stopped_us = limit / 2 > STOPPED_US ? limit / 2 : STOPPED_US;
    int culprit = -1, finished = -1, fresh = 0;
    bool culprit_gone = false;
    char culprit_st = 0;
    int64_t culprit_age = 0, culprit_run = 0;
    snapshot worst = {0}, s;
    char waits[600] = "";
    size_t wl = 0;
    /* Among candidates, a stopped process outranks a stuck one; then the oldest progress. */
#define CONSIDER(snap, gone_, st_, age_, run_)                   \
    do {                                                         \
        if (culprit < 0 || ((gone_) && !culprit_gone) ||         \
            ((gone_) == culprit_gone && (age_) > culprit_age)) { \
            culprit = (snap).world_rank;                         \
            culprit_gone = (gone_);                              \
            culprit_st = (st_);                                  \
            culprit_age = (age_);                                \
            culprit_run = (run_);                                \
            worst = (snap);                                      \
        }                                                        \
    } while (0)
    for (int i = 0; board && i < nboard; i++) {
        read_record(&board[i], &s);
        if (s.world_rank == rt_opts_g.rank || s.state == REC_NONE)
            continue;
        /* A rank ending the job (its watchdog fired) is the messenger, not the cause. */
        if (s.state == REC_ENDING)
            continue;
        char st = 0;
        const bool live = s.state == REC_RUNNING;
        const bool gone = live && peer_gone(&s, now, stopped_us, &st);
        const bool stuck = live && !s.waiting && now - s.t_us > patience(s.phase, limit);
        if (s.state == REC_FINISH && finished < 0)
            finished = s.world_rank;
        if (gone || stuck) {
            CONSIDER(s, gone, st, now - s.t_us, now - s.beat_us);
        } else if (live && (!s.waiting || now - s.t_us < stopped_us)) {
            /* Working, or it began its wait just now: the wait it joined may be the one
             * that completes this rank's (the last rank into a collective). */
            fresh++;
        } else if (live && wl < sizeof waits - 100) {
            char w[200];
            where(&s, w, sizeof w);
            wl += (size_t)snprintf(waits + wl, sizeof waits - wl, "%srank %d %s", wl ? "; " : "",
                                   s.world_rank, w);
        }
    }
#undef CONSIDER
    if (culprit >= 0) {
        char there[200], gone[120] = "";
        where(&worst, there, sizeof there);
        if (culprit_gone)
            snprintf(gone, sizeof gone, " (its process has not run for %.1f s: %s)",
                     (double)culprit_run * 1e-6, proc_why(culprit_st));
        fire("rank %d stopped making progress %.1f s ago, %s%s; this rank waits for it %s", culprit,
             (double)culprit_age * 1e-6, there, gone, here);
    }
    if (fresh)
        return; /* a rank is still working: this one waits for it */
    char elsewhere[600] = "";
    if (check_nodes(here, now, stopped_us > SILENT_US ? stopped_us : SILENT_US, elsewhere,
                    sizeof elsewhere) ||
        !impatient)
        return; /* a rank of another node is still working, or start-up is slow */
    if (finished >= 0)
        fire("rank %d has finished (rt_finalize) while this rank waits %s: the ranks ran "
             "different numbers of steps or communication calls",
             finished, here);
    if (elsewhere[0])
        fire("no progress for %.1f s: this rank waits %s, every other rank on this node waits "
             "too (%s), and every other node's ranks run and wait (%s); the ranks wait in "
             "different communication calls",
             mine, here, wl ? waits : "none", elsewhere);
    fire("no progress for %.1f s: this rank waits %s, and every other rank on this node waits "
         "too (%s); a rank on another node stopped, or the ranks wait in different "
         "communication calls",
         mine, here, wl ? waits : "none");
}

/* The processes of this node's ranks that have not reached the runtime yet: this
 * process's siblings (the same parent, mpirun's or the node daemon's, and the same
 * program) that hold no slot of the early board. Their pids go to out; returns how many,
 * or -1 when /proc cannot be read. */
static int unboarded_siblings(int *out, int cap)
{
    char self[512], path[64], exe[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    DIR *d = n > 0 ? opendir("/proc") : NULL;
    if (!d)
        return -1;
    self[n] = 0;
    const int parent = (int)getppid(), me = (int)getpid();
    int found = 0;
    for (struct dirent *e; (e = readdir(d)) && found < cap;) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == me)
            continue;
        char buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        const char *paren = k > 0 ? (buf[k] = 0, strrchr(buf, ')')) : NULL;
        int ppid = 0;
        char st;
        if (!paren || sscanf(paren + 1, " %c %d", &st, &ppid) != 2 || ppid != parent)
            continue;
        snprintf(path, sizeof path, "/proc/%d/exe", pid);
        ssize_t m = readlink(path, exe, sizeof exe - 1);
        if (m != n || memcmp(exe, self, (size_t)n) != 0)
            continue;
        bool boarded = false;
        for (int i = 0; i < wd.early_n && !boarded; i++)
            boarded = atomic_load(&wd.early[i].pid) == pid;
        if (!boarded)
            out[found++] = pid;
    }
    closedir(d);
    return found;
}

/* A sibling's rank, from the launcher's variables in its environment, or -1. */
static int environ_rank(int pid)
{
    char path[64], buf[16384];
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    static const char *const vars[] = {
        "OMPI_COMM_WORLD_RANK=", "PMIX_RANK=", "PMI_RANK=", "SLURM_PROCID="};
    for (const char *v = buf; v < buf + n; v += strlen(v) + 1)
        for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
            if (!strncmp(v, vars[i], strlen(vars[i])))
                return atoi(v + strlen(vars[i]));
    return -1;
}

/* How many ranks the launcher started in all, or 0 if it does not say. */
static int launch_world_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS",
                                       "SLURM_NTASKS", "PMI_SIZE"};
    int n;
    return parse_int(env_first(vars, 4), 1, 1 << 24, &n) ? n : 0;
}

/* Start-up has lasted the limit and MPI has not started. With the early board, a rank of
 * this node whose process is stopped or gone (on the board, or a sibling not yet on it)
 * is named and the job ends; so it does when a local rank has no process. When every
 * process of this node runs, this returns, up to STARTUP_PATIENCE_US; then the job ends
 * with what can be said. */
static void check_start(int64_t waited)
{
    const double secs = (double)waited * 1e-6;
    if (!wd.early)
        fire_early(NULL, NULL, 0,
                   "MPI did not start within %.1f s: a rank did not start, or stopped before "
                   "MPI_Init finished",
                   secs);
    char named[600] = "";
    size_t nl = 0;
    int pids[64], ranks[64], npids = 0, missing = 0, sib[64];
    snapshot s;
    for (int i = 0; i < wd.early_n && nl < sizeof named - 120; i++) {
        if (i == wd.early_local)
            continue;
        read_record(&wd.early[i], &s);
        char st = proc_state(s.pid);
        if (s.state == REC_NONE) {
            missing++;
        } else if (s.state == REC_RUNNING && (proc_stopped(st) || proc_gone(st))) {
            nl += (size_t)snprintf(named + nl, sizeof named - nl, "%srank %d's process is %s",
                                   nl ? "; " : "", s.world_rank, proc_why(st));
            if (npids < 64) {
                ranks[npids] = s.world_rank;
                pids[npids++] = s.pid;
            }
        }
    }
    int nsib = missing ? unboarded_siblings(sib, 64) : 0, running = 0;
    for (int i = 0; i < nsib && nl < sizeof named - 120; i++) {
        char st = proc_state(sib[i]);
        if (proc_stopped(st) || proc_gone(st)) {
            nl += (size_t)snprintf(named + nl, sizeof named - nl,
                                   "%srank %d's process (not yet in the runtime) is %s",
                                   nl ? "; " : "", environ_rank(sib[i]), proc_why(st));
            if (npids < 64) {
                ranks[npids] = environ_rank(sib[i]);
                pids[npids++] = sib[i];
            }
        } else {
            running++;
        }
    }
    if (nl)
        fire_early(pids, ranks, npids, "MPI did not start within %.1f s: %s", secs, named);
    if (nsib >= 0 && running < missing)
        fire_early(NULL, NULL, 0,
                   "MPI did not start within %.1f s: %d of this node's %d ranks ha%s no process "
                   "(it exited, or the launcher did not start it)",
                   secs, missing - running, wd.early_n, missing - running == 1 ? "s" : "ve");
    /* Every process of this node runs: MPI_Init is slow (a loaded machine), or a rank of
     * another node, which nobody here can see, holds it up. Either way, wait. */
    const bool one_node = launch_world_size() == wd.early_n;
    if (waited < STARTUP_PATIENCE_US)
        return;
    if (missing)
        fire_early(NULL, NULL, 0,
                   "MPI did not start within %.1f s: %d of this node's %d ranks run but have not "
                   "reached the runtime",
                   secs, missing, wd.early_n);
    fire_early(NULL, NULL, 0,
               "MPI did not start within %.1f s: every rank of this node runs and waits in "
               "MPI_Init; %s",
               secs,
               one_node ? "MPI_Init itself does not finish"
                        : "a rank on another node did not start, or stopped before MPI_Init "
                          "finished");
}

/* A peer has fired before MPI started: this rank exits too, before it reaches MPI_Init or
 * while it is in it (see the top). From rt_init and from the watchdog thread. */
static void leave_if_ending(void)
{
    if (!wd.early || atomic_load(&wd.mpi_ready))
        return;
    snapshot s;
    for (int i = 0; i < wd.early_n; i++) {
        if (i == wd.early_local)
            continue;
        read_record(&wd.early[i], &s);
        if (s.state == REC_ENDING) {
            rt_message("watchdog",
                       "rank %d is ending the job (its watchdog fired in start-up); this rank "
                       "exits before MPI starts",
                       s.world_rank);
            atomic_store(&atomic_load(&wd.me)->state, REC_ENDING);
            _exit(3);
        }
    }
}

/* This thread's time on a CPU and waiting for one (microseconds), or -1. */
static int64_t runnable_us(void)
{
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    unsigned long long run, wait;
    if (sscanf(buf, "%llu %llu", &run, &wait) != 2)
        return -1;
    return (int64_t)((run + wait) / 1000);
}

/* This rank's heartbeat to the other nodes (nodes.c): where it stands, and how many of
 * its node's ranks still make progress (running, not waiting, within the limit). */
static void beat(const snapshot *me, int64_t now, int64_t limit)
{
    if (rt_nodes_count() < 2)
        return;
    rt_node_beat b = {.phase = me->phase, .waiting = me->waiting, .step = me->step};
    memcpy(b.op, me->op, OP_LEN);
    memcpy(b.wait, me->wait, OP_LEN);
    record *board = atomic_load(&wd.board);
    snapshot s;
    for (int i = 0; board && i < wd.nboard; i++) {
        read_record(&board[i], &s);
        b.working += s.state == REC_RUNNING && !s.waiting && (!limit || now - s.t_us <= limit);
    }
    if (!board)
        b.working = !me->waiting && (!limit || now - me->t_us <= limit);
    rt_nodes_beat(now, &b);
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    int64_t last_runnable = runnable_us();
    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_US * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&wd.cv, &wd.mu, &ts);
        if (wd.stop)
            break;
        const int64_t limit = atomic_load(&wd.limit_us), now = now_us();
        record *r = atomic_load(&wd.me);
        const int64_t last_beat = atomic_exchange(&r->beat_us, now);
        const int64_t runnable = runnable_us();
        if (last_beat && now - last_beat > PAUSED_US) {
            /* A gap between ticks: time this thread was neither on a CPU, nor waiting for
             * one, nor in its wait of a tick is time the process did not run (the job was
             * suspended, SIGSTOP then SIGCONT, or held at a breakpoint), which is no lack
             * of progress. If it alone was stopped, its peers have ended the job already.
             * Time spent runnable but starved counts. Without schedstat, the whole gap is
             * taken as a pause, as before. */
            int64_t paused = now - last_beat;
            if (runnable >= 0 && last_runnable >= 0)
                paused -= (runnable - last_runnable) + TICK_US;
            if (paused > PAUSED_US) {
                atomic_fetch_add(&r->t_us, paused);
                last_runnable = runnable;
                leave_if_ending();
                continue;
            }
        }
        last_runnable = runnable;
        leave_if_ending();
        snapshot me;
        read_record(r, &me);
        beat(&me, now, limit);
        bool watched = me.phase != RT_PHASE_BETWEEN || me.waiting;
        if (!limit || !watched || now - me.t_us <= limit)
            continue;
        if (!atomic_load(&wd.mpi_ready))
            check_start(now - me.t_us);
        check_peers(&me, now, limit);
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

/* ---- the early board ------------------------------------------------------------------ */

static const char *env_first(const char *const *names, int n)
{
    for (int i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return NULL;
}

static bool parse_int(const char *v, int lo, int hi, int *out)
{
    if (!v)
        return false;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return false;
    *out = (int)x;
    return true;
}

/* Slurm's tasks on node `node` from SLURM_STEP_TASKS_PER_NODE ("2(x3),1": 2, 2, 2, 1). */
static bool slurm_node_tasks(const char *spec, int node, int *out)
{
    for (const char *p = spec; p && *p;) {
        char *end;
        long tasks = strtol(p, &end, 10), times = 1;
        if (end == p || tasks < 1)
            return false;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x')
                return false;
            times = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || times < 1)
                return false;
            p = end + 1;
        }
        if (node < times) {
            *out = (int)tasks;
            return true;
        }
        node -= (int)times;
        if (*p == ',')
            p++;
        else if (*p)
            return false;
    }
    return false;
}

/* The launcher's word on this rank: a key naming the job (the same on every rank of it),
 * this rank's index among the node's ranks and their count. False for launchers that do
 * not say. */
static bool launch_env(char *key, size_t cap, int *local, int *nlocal)
{
    static const char *const ompi_local[] = {"OMPI_COMM_WORLD_LOCAL_RANK"};
    static const char *const ompi_size[] = {"OMPI_COMM_WORLD_LOCAL_SIZE"};
    static const char *const hydra_local[] = {"MPI_LOCALRANKID"};
    static const char *const hydra_size[] = {"MPI_LOCALNRANKS"};
    const int max = 1 << 16;
    bool ok = (parse_int(env_first(ompi_local, 1), 0, max, local) &&
               parse_int(env_first(ompi_size, 1), 1, max, nlocal)) ||
              (parse_int(env_first(hydra_local, 1), 0, max, local) &&
               parse_int(env_first(hydra_size, 1), 1, max, nlocal));
    int node;
    if (!ok && parse_int(getenv("SLURM_LOCALID"), 0, max, local) &&
        parse_int(getenv("SLURM_NODEID"), 0, 1 << 24, &node))
        ok = slurm_node_tasks(getenv("SLURM_STEP_TASKS_PER_NODE"), node, nlocal);
    if (!ok || *local >= *nlocal)
        return false;
    /* What identifies the job: PMIx's namespace (Open MPI, Slurm with PMIx), Open MPI's
     * random per-job key, Slurm's job and step, hydra's PMI namespace. */
    static const char *const ids[] = {"PMIX_NAMESPACE", "OMPI_MCA_orte_precondition_transports",
                                      "SLURM_JOB_ID",   "SLURM_STEP_ID",
                                      "PMI_KVSNAME",    "PMI_ID"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        const char *v = getenv(ids[i]);
        if (v && n < cap)
            n += (size_t)snprintf(key + n, cap - n, "%s=%s;", ids[i], v);
    }
    return n > 0 && n < cap;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Opens the node's early board and takes this rank's slot, when the launcher says where
 * the rank is. The object is named after the user, the host (emulated hosts may share a
 * /dev/shm) and the job. Any failure leaves no early board: the board is then made after
 * MPI_Init. */
static void early_board_open(void)
{
    char key[1024];
    int local, nlocal;
    struct utsname u;
    if (!launch_env(key, sizeof key, &local, &nlocal) || uname(&u) != 0)
        return;
    uint64_t h = fnv1a(u.nodename, fnv1a(key, 1469598103934665603ull));
    snprintf(wd.early_name, sizeof wd.early_name, "/burstrt.%u.%016llx", (unsigned)getuid(),
             (unsigned long long)h);
    int fd = shm_open(wd.early_name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    const off_t want = (off_t)nlocal * (off_t)sizeof(record);
    struct stat st;
    /* Every rank extends it to the same size (zeros); another size is not this job's. */
    if (fstat(fd, &st) != 0 || (st.st_size != 0 && st.st_size != want) ||
        (st.st_size == 0 && ftruncate(fd, want) != 0)) {
        close(fd);
        return;
    }
    void *m = mmap(NULL, (size_t)want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return;
    record *slots = m, *mine = &slots[local];
    int other = atomic_load(&mine->pid);
    if (other && other != getpid() && !proc_gone(proc_state(other))) {
        munmap(m, (size_t)want); /* a live process holds this slot: the launcher's word is wrong */
        return;
    }
    memcpy((void *)mine, (const void *)&wd.own, sizeof *mine);
    atomic_store(&mine->pid, getpid());
    atomic_store(&mine->state, REC_RUNNING);
    wd.early = slots;
    wd.early_n = nlocal;
    wd.early_local = local;
    wd.early_named = true;
    atomic_store(&wd.me, mine);
}

static void early_board_close(void)
{
    if (!wd.early)
        return;
    if (wd.early_named)
        shm_unlink(wd.early_name);
    munmap((void *)wd.early, (size_t)wd.early_n * sizeof(record));
    wd.early = NULL;
    wd.early_named = false;
}

/* Removes the early boards of this user's jobs that ended in start-up (their names are
 * never unlinked: a rank that started late must still find that the job is ending): every
 * slot's process is gone, or nobody took a slot for an hour. */
static void early_board_sweep(void)
{
    char prefix[32];
    int np = snprintf(prefix, sizeof prefix, "burstrt.%u.", (unsigned)getuid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, (size_t)np) != 0 || !strcmp(e->d_name, wd.early_name + 1))
            continue;
        char name[300];
        snprintf(name, sizeof name, "/%s", e->d_name);
        int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 ||
            st.st_size % (off_t)sizeof(record) != 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
            continue;
        bool live = false, any = false;
        for (off_t i = 0; i < st.st_size / (off_t)sizeof(record) && !live; i++) {
            int pid = atomic_load(&((record *)m)[i].pid);
            any |= pid != 0;
            live = pid != 0 && !proc_gone(proc_state(pid));
        }
        munmap(m, (size_t)st.st_size);
        if (!live && (any || time(NULL) - st.st_mtime > 3600))
            shm_unlink(name);
    }
    closedir(d);
}

/* ---- start and stop ------------------------------------------------------------------- */

/* The limit before the options are parsed: --step-timeout read early from argv (the
 * parser checks it properly later; rt_watchdog_limit clamps it), else the default. */
static double early_limit(char **argv)
{
    double t = rt_opts_g.step_timeout;
    for (int i = 1; argv && argv[i]; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--step-timeout"))
            v = argv[i + 1];
        else if (!strncmp(argv[i], "--step-timeout=", 15))
            v = argv[i] + 15;
        if (v) {
            char *end;
            double x = strtod(v, &end);
            if (end != v && !*end && x >= 0)
                t = x;
        }
    }
    return t;
}

void rt_watchdog_start(char **argv)
{
    atomic_store(&wd.me, &wd.own);
    atomic_store(&wd.own.state, REC_RUNNING);
    atomic_store(&wd.own.world_rank, rt_opts_g.rank);
    atomic_store(&wd.own.pid, getpid());
    atomic_store(&wd.own.beat_us, now_us());
    rt_watchdog_limit(early_limit(argv));
    rt_progress_phase(RT_PHASE_START, -1);
    early_board_open();
    leave_if_ending();
    wd.stop = false;
    if (pthread_create(&wd.thread, NULL, watchdog_main, NULL) != 0)
        rt_fatal("init", "cannot start the watchdog thread");
    wd.running = true;
}

void rt_watchdog_before_mpi(void)
{
    leave_if_ending();
}

/* The node's progress board after MPI_Init: the early board when MPI agrees with the
 * launcher about the node's ranks, else a shared-memory window over the ranks of this
 * node, one record each, this rank's own record copied in. Without either (a one-rank
 * world, or MPI cannot share memory) the watchdog only knows this rank. */
static void make_board(void);

void rt_watchdog_board(void)
{
    make_board();
    if (wd.have_node) {
        rt_wait_begin("start-up");
        rt_nodes_setup(wd.node);
        rt_wait_end();
    }
}

static void make_board(void)
{
    atomic_store(&wd.own.world_rank, rt_opts_g.rank);
    atomic_store(&atomic_load(&wd.me)->world_rank, rt_opts_g.rank);
    atomic_store(&wd.mpi_ready, true);
    if (rt_opts_g.world_size < 2) {
        early_board_close();
        atomic_store(&wd.me, &wd.own);
        return;
    }
    rt_wait_begin("start-up");
    int local = 0;
    wd.node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt_opts_g.rank, MPI_INFO_NULL,
                            &wd.node) != MPI_SUCCESS) {
        rt_wait_end();
        return;
    }
    wd.have_node = true;
    if (MPI_Comm_size(wd.node, &wd.nboard) != MPI_SUCCESS ||
        MPI_Comm_rank(wd.node, &local) != MPI_SUCCESS) {
        rt_wait_end();
        return;
    }
    /* Every rank keeps the early board, or none: the same answer on the whole node. */
    int keep = wd.early && wd.early_n == wd.nboard && wd.early_local == local, all = 0;
    if (MPI_Allreduce(&keep, &all, 1, MPI_INT, MPI_MIN, wd.node) != MPI_SUCCESS)
        all = 0;
    if (all) {
        /* Every slot is taken now: the name can go (the mapping stays). */
        if (local == 0) {
            shm_unlink(wd.early_name);
            early_board_sweep();
        }
        wd.early_named = false;
        atomic_store(&wd.board, wd.early);
        rt_wait_end();
        return;
    }
    if (wd.early) {
        memcpy((void *)&wd.own, (const void *)atomic_load(&wd.me), sizeof wd.own);
        atomic_store(&wd.me, &wd.own);
        early_board_close();
    }
    void *base = NULL;
    if (MPI_Win_allocate_shared((MPI_Aint)sizeof(record), (int)sizeof(record), MPI_INFO_NULL,
                                wd.node, &base, &wd.win) != MPI_SUCCESS) {
        rt_wait_end();
        return;
    }
    wd.have_win = true;
    MPI_Aint size;
    int unit;
    void *first = NULL;
    if (MPI_Win_shared_query(wd.win, 0, &size, &unit, &first) == MPI_SUCCESS && first) {
        record *mine = (record *)first + local;
        memcpy((void *)mine, (const void *)&wd.own, sizeof *mine);
        atomic_store(&mine->state, REC_RUNNING);
        atomic_store(&mine->beat_us, now_us());
        atomic_store(&wd.me, mine); /* only this thread writes records */
        /* Every record is filled before anyone reads the board. */
        if (MPI_Barrier(wd.node) == MPI_SUCCESS)
            atomic_store(&wd.board, (record *)first);
    }
    rt_wait_end();
}

void rt_watchdog_finishing(void)
{
    record *r = atomic_load(&wd.me);
    atomic_store(&r->state, REC_FINISH);
    rt_progress_phase(RT_PHASE_FINISH, atomic_load(&r->step));
}

void rt_watchdog_stop(void)
{
    if (wd.running) {
        pthread_mutex_lock(&wd.mu);
        wd.stop = true;
        pthread_cond_signal(&wd.cv);
        pthread_mutex_unlock(&wd.mu);
        pthread_join(wd.thread, NULL);
        wd.running = false;
    }
    rt_nodes_stop();
    if (wd.have_win || wd.early) {
        memcpy((void *)&wd.own, (const void *)atomic_load(&wd.me), sizeof wd.own);
        atomic_store(&wd.me, &wd.own);
        atomic_store(&wd.board, NULL);
    }
    if (wd.have_win) {
        MPI_Win_free(&wd.win);
        wd.have_win = false;
    }
    early_board_close();
    if (wd.have_node) {
        MPI_Comm_free(&wd.node);
        wd.have_node = false;
    }
}
