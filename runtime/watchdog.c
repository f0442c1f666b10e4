/* watchdog.c: every rank publishes its progress, and a thread per rank ends the whole job
 * when progress stops, naming the rank that stopped. The thread runs from the start of
 * rt_init (before MPI starts) to rt_finalize.
 *
 * Progress: the main thread records a progress event at every phase change (start-up, a
 * step, between steps, evaluation, checkpoint save or load, rt_finalize), every traced op
 * and every wait for communication, with the time, the step, the op and whether it is
 * waiting. The records of the ranks of one node live in one shared-memory window (the
 * progress board), so a rank can read where its peers stand without their cooperation:
 * a rank stopped by a signal, sleeping or looping keeps its last record.
 *
 * Firing: when this rank is watched (anything but the time between steps, where long
 * evaluations are allowed unless they call rt_progress; waits for communication are
 * always watched) and has made no progress for the limit (--step-timeout, or three times
 * the slowest step), the thread looks at the board. A rank that is not waiting and has
 * made no progress for the limit is the one that stopped: the message names it (it may be
 * this rank). If some rank not waiting still makes progress, this rank waits for it and
 * the watchdog waits too. If every rank waits, or a rank has already finished, the message
 * says so. Every message is one write(2) and the job ends with MPI_Abort. */
#include "mpi_glue.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OP_LEN 48

/* One rank's record. Written only by that rank's main thread; read by any rank's
 * watchdog under the sequence counter (odd while a write is under way). */
typedef struct {
    _Atomic uint32_t seq;
    _Atomic int32_t state; /* 0: not started, 1: running, 2: in rt_finalize */
    _Atomic int32_t world_rank;
    _Atomic int32_t phase;
    _Atomic int32_t waiting; /* depth of waits for communication */
    _Atomic int64_t step;
    _Atomic int64_t t_us;    /* CLOCK_MONOTONIC (one clock per node) of the last progress */
    _Atomic int64_t beat_us; /* the watchdog thread's last tick: its process runs */
    char op[OP_LEN];         /* the traced op it is in, or "" */
    char wait[OP_LEN];       /* the communication call it waits in, or "" */
} record;

/* A reader's copy. */
typedef struct {
    int state, world_rank, phase, waiting;
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
    MPI_Win win;
    bool have_win;
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

static _Noreturn void fire(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void fire(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rt_message("watchdog",
               "%s; aborting the job (if ranks are legitimately this slow, raise "
               "--step-timeout)",
               msg);
    if (atomic_load(&wd.mpi_ready))
        MPI_Abort(MPI_COMM_WORLD, 3);
    _exit(3);
}

/* A process whose watchdog thread has not ticked for this long (or half the limit) is not
 * running: stopped by a signal, or gone. Ticks come every 200 ms. */
#define STOPPED_US 2000000
/* A gap between this thread's own ticks beyond this: the process was not running. */
#define PAUSED_US  1000000

/* This rank has made no progress for longer than the limit: find out why and end the job,
 * or return when it waits for a rank that still makes progress. A rank is the cause when
 * its process has stopped running (its watchdog thread no longer ticks: stopped or killed,
 * whether or not it was waiting) or when it is not waiting and has made no progress for
 * the limit (hung, or looping outside the runtime). */
static void check_peers(const snapshot *me, int64_t now, int64_t limit)
{
    char here[200];
    where(me, here, sizeof here);
    const double mine = (double)(now - me->t_us) * 1e-6;
    if (!me->waiting)
        fire("rank %d (this rank) stopped making progress %.1f s ago, %s", rt_opts_g.rank, mine,
             here);
    record *board = atomic_load(&wd.board);
    if (!board)
        fire("no progress for %.1f s %s; a peer rank (not visible from here: no shared memory "
             "with it) has probably died or hung",
             mine, here);
    /* Half the limit, at least: a busy machine may delay a tick by a second or two. */
    const int64_t stopped_us = limit / 2 > STOPPED_US ? limit / 2 : STOPPED_US;
    int culprit = -1, finished = -1, fresh = 0;
    bool culprit_gone = false;
    snapshot worst = {0}, s;
    char waits[600] = "";
    size_t wl = 0;
    for (int i = 0; i < wd.nboard; i++) {
        read_record(&board[i], &s);
        if (s.world_rank == rt_opts_g.rank || s.state == 0)
            continue;
        const bool gone = s.state == 1 && now - s.beat_us > stopped_us;
        const bool stuck = s.state == 1 && !s.waiting && now - s.t_us > limit;
        if (s.state == 2 && finished < 0)
            finished = s.world_rank;
        if (gone || stuck) {
            /* A stopped process outranks a stuck one; among equals, the oldest progress. */
            if (culprit < 0 || (gone && !culprit_gone) ||
                (gone == culprit_gone && s.t_us < worst.t_us)) {
                culprit = s.world_rank;
                culprit_gone = gone;
                worst = s;
            }
        } else if (s.state == 1 && !s.waiting) {
            fresh++;
        } else if (s.state == 1 && wl < sizeof waits - 100) {
            char w[200];
            where(&s, w, sizeof w);
            wl += (size_t)snprintf(waits + wl, sizeof waits - wl, "%srank %d %s", wl ? "; " : "",
                                   s.world_rank, w);
        }
    }
    if (culprit >= 0) {
        char there[200], gone[96] = "";
        where(&worst, there, sizeof there);
        if (culprit_gone)
            snprintf(gone, sizeof gone, " (its process has not run for %.1f s: stopped or killed)",
                     (double)(now - worst.beat_us) * 1e-6);
        fire("rank %d stopped making progress %.1f s ago, %s%s; this rank waits for it %s", culprit,
             (double)(now - worst.t_us) * 1e-6, there, gone, here);
    }
    if (fresh)
        return; /* a rank is still working: this one waits for it */
    if (finished >= 0)
        fire("rank %d has finished (rt_finalize) while this rank waits %s: the ranks ran "
             "different numbers of steps or communication calls",
             finished, here);
    fire("no progress for %.1f s: this rank waits %s, and every other rank on this node waits "
         "too (%s); a rank on another node stopped, or the ranks wait in different "
         "communication calls",
         mine, here, wl ? waits : "none");
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wd.mu);
    while (!wd.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
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
        if (last_beat && now - last_beat > PAUSED_US) {
            /* This process did not run (the job was suspended, SIGSTOP then SIGCONT, or
             * starved): that time is no lack of progress. If it alone was stopped, its
             * peers have ended the job already. */
            atomic_fetch_add(&r->t_us, now - last_beat);
            continue;
        }
        snapshot me;
        read_record(r, &me);
        bool watched = me.phase != RT_PHASE_BETWEEN || me.waiting;
        if (!limit || !watched || now - me.t_us <= limit)
            continue;
        if (!atomic_load(&wd.mpi_ready))
            fire("MPI did not start within %.1f s: a rank did not start, or stopped before "
                 "MPI_Init finished",
                 (double)(now - me.t_us) * 1e-6);
        check_peers(&me, now, limit);
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
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
    atomic_store(&wd.own.state, 1);
    atomic_store(&wd.own.beat_us, now_us());
    rt_watchdog_limit(early_limit(argv));
    rt_progress_phase(RT_PHASE_START, -1);
    wd.stop = false;
    if (pthread_create(&wd.thread, NULL, watchdog_main, NULL) != 0)
        rt_fatal("init", "cannot start the watchdog thread");
    wd.running = true;
}

/* The node's progress board: a shared-memory window over the ranks of this node, one
 * record each, this rank's own record copied in. Without one (a one-rank world, or MPI
 * cannot share memory) the watchdog only knows this rank. */
void rt_watchdog_board(void)
{
    atomic_store(&wd.own.world_rank, rt_opts_g.rank);
    atomic_store(&wd.mpi_ready, true);
    if (rt_opts_g.world_size < 2)
        return;
    rt_wait_begin("start-up");
    int local = 0;
    void *base = NULL;
    wd.node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rt_opts_g.rank, MPI_INFO_NULL,
                            &wd.node) != MPI_SUCCESS ||
        MPI_Comm_size(wd.node, &wd.nboard) != MPI_SUCCESS ||
        MPI_Comm_rank(wd.node, &local) != MPI_SUCCESS ||
        MPI_Win_allocate_shared((MPI_Aint)sizeof(record), (int)sizeof(record), MPI_INFO_NULL,
                                wd.node, &base, &wd.win) != MPI_SUCCESS) {
        if (wd.node != MPI_COMM_NULL)
            MPI_Comm_free(&wd.node);
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
        atomic_store(&mine->state, 1);
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
    atomic_store(&r->state, 2);
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
    if (wd.have_win) {
        memcpy((void *)&wd.own, (const void *)atomic_load(&wd.me), sizeof wd.own);
        atomic_store(&wd.me, &wd.own);
        atomic_store(&wd.board, NULL);
        MPI_Win_free(&wd.win);
        MPI_Comm_free(&wd.node);
        wd.have_win = false;
    }
}
