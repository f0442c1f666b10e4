/* background.c: the background executor of GPU multiplexing (issue 12), shared by the
 * backends. The interleave pass places copies of background jobs on ranks and cuts each
 * copy's training step into slices; the generated program hands every copy to
 * rt_bg_add, and the rank that hosts one keeps its own pool, parameters, optimizer
 * state, step counter and data stream (the copy's seed keys its weights, its data order
 * and its synthetic samples, so a copy computes exactly what a one-rank run of its model
 * with that seed computes).
 *
 * When they run: only inside a foreground training step, only while this rank waits for
 * peers (a reshard, an all-reduce, the loss sum: the waits poll their requests and call
 * rt_bg_idle between polls, which reaches this file through the filler it registers with
 * idle.c) or for its GPU (cuda/device.c: beside the foreground's
 * kernels while the host polls their stream, and at the drained sync point,
 * rt_bg_fill), and only within the guard's allowance for the step (guard.c: probe steps
 * without background work give the baseline, and the allowance steers the step time to
 * just under bound x baseline). A rank outside the current layer's rank set skips the
 * layer and waits at its next exchange, so that idle time is a wait too. One call runs
 * one slice, of the first copy in round-robin order whose slice fits in what is left
 * of the allowance (by a moving average of its measured times; a slice left out makes
 * room for itself in the next allowance, guard.c), so the foreground is late by at most
 * one slice when its peer arrives.
 *
 * The foreground never reads anything the background writes: the copies have their own
 * pools (scratch memory included), parameters and data; so the foreground's parameters
 * and losses are bit-identical with --background on and off. */
#include "mpi_glue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_COPY 64 /* copies on one rank */

typedef struct copy {
    const rt_bg_model *m;
    uint64_t seed;
    int nslices;
    int *cut;
    char **slice_names; /* "bg MODEL slice S", for the trace */
    char *track;        /* "background MODEL (seed S)" */
    double *est;        /* each slice's seconds: a moving average (0: not run yet) */
    rt_pool *pool;
    rt_params *ps;
    rt_data *data;
    int64_t step; /* steps completed */
    int slice;    /* next slice of the current step */
    double loss;  /* the current step's loss so far */
    double busy;  /* seconds spent in its slices */
} copy;

static struct {
    copy c[MAX_COPY];
    int n;
    int turn; /* the copy whose slice runs next */
    double bound;
    bool copies;  /* the plan places copies (on some rank), --background on or off */
    bool planned; /* ... and --background is on */
    bool in_step, open, running, finished;
    rt_guard guard;
    double step_bg; /* seconds of background slices in the step now running */
    double want;    /* the shortest slice left out of it for not fitting (0: none) */
    int pending; /* numbers of the ended step the guard waits for the world's mean of (-1: none) */
    double pend_used, pend_want; /* that step's step_bg and want */
} bg = {.bound = 0, .pending = -1};

bool rt_bg_enabled(void)
{
    return rt_opts_g.background;
}

static char *dup_printf(const char *fmt, const char *s, long long v)
{
    char buf[256];
    snprintf(buf, sizeof buf, fmt, s, v);
    char *d = rt_xmalloc(strlen(buf) + 1, "background");
    strcpy(d, buf);
    return d;
}

static bool bg_ready(void);
static bool bg_run_one(void);
static bool bg_running(void);
static int bg_share(double *out);
static void bg_shared(const double *sum);

void rt_bg_add(const rt_bg_model *m, int rank, uint64_t seed, int nslices, const int *cut,
               double slowdown)
{
    const char *op = "background";
    if (!m || !m->unit || !m->setup || m->nunits < 1 || m->batch < 1)
        rt_fatal(op, "malformed background model");
    if (nslices < 1 || !cut || cut[0] != 0 || cut[nslices] != m->nunits)
        rt_fatal(op, "background '%s': the cut list must run from unit 0 to unit %d", m->name,
                 m->nunits);
    for (int s = 0; s < nslices; s++)
        if (cut[s] >= cut[s + 1])
            rt_fatal(op, "background '%s': slice %d is empty or reversed (units %d..%d)", m->name,
                     s, cut[s], cut[s + 1]);
    if (rank < 0 || rank >= rt_opts_g.world_size)
        rt_fatal(op, "background '%s' placed on rank %d of %d", m->name, rank,
                 rt_opts_g.world_size);
    /* Every rank of a program with copies, hosting one or not: the world sums carry the
     * guard's numbers on all of them (bg_share). */
    static const rt_idle_filler filler = {bg_ready, bg_run_one, bg_running, bg_share, bg_shared};
    rt_idle_register(&filler);
    rt_checkpoint_also(rt_bg_checkpoint_save, rt_bg_checkpoint_load);
    double b = rt_opts_g.slowdown > 0 ? rt_opts_g.slowdown : slowdown > 0 ? slowdown : 1.1;
    if (bg.bound == 0 || b < bg.bound)
        bg.bound = b;
    bg.copies = true;
    if (!rt_opts_g.background)
        return;
    bg.planned = true;
    if (rank != rt_opts_g.rank)
        return;
    for (int i = 0; i < bg.n; i++)
        if (bg.c[i].m == m)
            rt_fatal(op, "rank %d hosts two copies of background '%s'", rank, m->name);
    if (bg.n == MAX_COPY)
        rt_fatal(op, "more than %d background copies on rank %d", MAX_COPY, rank);
    copy *c = &bg.c[bg.n++];
    memset(c, 0, sizeof *c);
    c->m = m;
    c->seed = seed;
    c->nslices = nslices;
    c->cut = rt_xmalloc(sizeof(int) * (size_t)(nslices + 1), op);
    memcpy(c->cut, cut, sizeof(int) * (size_t)(nslices + 1));
    c->slice_names = rt_xcalloc((size_t)nslices, sizeof(char *), op);
    for (int s = 0; s < nslices; s++)
        c->slice_names[s] = dup_printf("bg %s slice %lld", m->name, s);
    c->track = dup_printf("background %s (seed %lld)", m->name, (long long)seed);
    c->est = rt_xcalloc((size_t)nslices, sizeof(double), op);
    c->pool = rt_pool_new();
    c->ps = rt_params_new(c->pool);
    /* Its own data stream: the options with the copy's seed and its model's source. */
    rt_options o = rt_opts_g;
    o.seed = seed;
    o.data = m->data;
    o.eval_set = false; /* the foreground's test set is not the copy's */
    c->data = rt_data_open(&o, m->ndim, m->sample_shape, m->in_dtype, m->vocab, m->classes,
                           m->labels_per_sample);
    m->setup(c->pool, c->ps, seed);
}

static bool bg_ready(void)
{
    return bg.n > 0 && bg.in_step && bg.open && !bg.running && bg.step_bg < bg.guard.allow;
}

/* Prints the copy's loss the way rt_report_loss prints the foreground's, tagged with the
 * model and the rank (one write per line: ranks share the terminal). */
static void report(const copy *c, double loss)
{
    char line[256];
    int n = snprintf(line, sizeof line, "bg %s rank %d step %lld loss %.9g\n", c->m->name,
                     rt_opts_g.rank, (long long)c->step, loss);
    fflush(stdout);
    if (n > 0 && write(STDOUT_FILENO, line, (size_t)n) < 0)
        return;
}

static void run_slice(copy *c, int tid)
{
    const rt_bg_model *m = c->m;
    const int s = c->slice;
    rt_trace_track(tid, c->track);
    rt_dev.background(true);
    double t0 = rt_now();
    if (s == 0) {
        rt_params_zero_grad(c->ps);
        c->loss = 0;
    }
    for (int u = c->cut[s]; u < c->cut[s + 1]; u++) {
        if (u < m->nunits - 1) {
            c->loss += m->unit(u, c->pool, c->data, c->seed, c->step);
        } else if (m->adam) {
            rt_adam_step(c->ps, &m->adam_cfg);
        } else {
            rt_sgd_step(c->ps, &m->sgd);
        }
    }
    rt_dev.background(false);
    double t1 = rt_now();
    c->busy += t1 - t0;
    c->est[s] = c->est[s] == 0 ? t1 - t0 : 0.5 * c->est[s] + 0.5 * (t1 - t0);
    bg.step_bg += t1 - t0;
    rt_trace_event(tid, c->slice_names[s], t0, t1);
    rt_trace_track(0, NULL);
    if (++c->slice == c->nslices) {
        report(c, c->loss);
        c->slice = 0;
        c->step++;
    }
}

static bool bg_running(void)
{
    return bg.running;
}

static bool bg_run_one(void)
{
    if (!bg_ready())
        return false;
    for (int k = 0; k < bg.n; k++) {
        int i = (bg.turn + k) % bg.n;
        copy *c = &bg.c[i];
        if (bg.step_bg + c->est[c->slice] > bg.guard.allow) {
            if (bg.want == 0 || c->est[c->slice] < bg.want)
                bg.want = c->est[c->slice];
            continue;
        }
        bg.turn = (i + 1) % bg.n;
        bg.running = true;
        run_slice(c, 1 + i);
        bg.running = false;
        return true;
    }
    return false;
}

/* ---- the guard --------------------------------------------------------------------------- */

void rt_bg_step_begin(int64_t step)
{
    (void)step;
    bg.in_step = true;
    bg.open = false;
    bg.step_bg = 0;
    bg.want = 0;
    if (!bg.planned || bg.finished)
        return;
    if (bg.guard.begun == 0) /* every copy added: the bound is final */
        rt_guard_init(&bg.guard, bg.bound);
    bool open = rt_guard_step_begin(&bg.guard);
    bg.open = bg.n > 0 && open;
}

/* The ended step's numbers, means over the world in hand: the guard's step ends. */
static void guard_step_end(const double *sum)
{
    for (int i = 0; i < bg.pending; i++)
        bg.guard.shared[i] = sum[i] / rt_opts_g.world_size;
    bg.pending = -1;
    rt_guard_step_end(&bg.guard, bg.pend_used, bg.pend_want);
}

static int bg_share(double *out)
{
    if (!bg.copies || !bg.in_step || bg.finished)
        return 0;
    for (int i = 0; i < RT_BG_SHARE; i++)
        out[i] = bg.pending > i ? bg.guard.shared[i] : 0;
    return RT_BG_SHARE;
}

static void bg_shared(const double *sum)
{
    if (bg.pending >= 0)
        guard_step_end(sum);
}

/* The same with a collective of its own, where no world sum came (collective: every
 * rank has the same step pending). */
static void guard_step_end_now(void)
{
    double v[RT_BG_SHARE] = {0}, sum[RT_BG_SHARE];
    for (int i = 0; i < bg.pending; i++)
        v[i] = bg.guard.shared[i];
    rt_mpi_check(MPI_Allreduce(v, sum, RT_BG_SHARE, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                 "background");
    guard_step_end(sum);
}

/* Every world sum in a step of a program with copies carries RT_BG_SHARE numbers, with
 * background work on or off (bg_share: zeros where there is nothing to share), so that
 * the two modes make the same collectives, and the guard's numbers ride on the first one
 * after the step that they describe: the step's loss sum, which every step makes. So the
 * guard adds no collective of its own: on 2 cores shared by 4 ranks an all-reduce a step
 * more, in the steps with background work alone, made those steps faster than the
 * windows and the runs with it faster than `--background off` runs (issue 40), which
 * measured how waits share cores, not what background work costs. The guard's step
 * ends one step late, after the next step's forward: the allowance follows the world's
 * step times from there. Its step time is the world's mean, so that every rank sees the
 * same steps (one rank's step ends where its last wait does: a rank that runs
 * background work in its waits, or one a peer's background work slows, would otherwise
 * steer by its own share of the iteration, and the ranks disagree). Every rank of a run
 * with copies runs the guard (rank 0 reports it), also one that hosts none. A step's
 * time runs from the end of the step before, so that what the program does between
 * steps is in it as it is in the run's throughput. */
void rt_bg_step_end(int64_t step, double seconds)
{
    (void)step;
    static double mark; /* the end of the previous step */
    bg.in_step = false;
    bg.open = false;
    if (!bg.planned || bg.finished)
        return;
    double now = rt_now();
    if (mark > 0)
        seconds = now - mark;
    mark = now;
    if (bg.pending >= 0) /* a step without a world sum (no generated program's) */
        guard_step_end_now();
    int n = rt_guard_step_time(&bg.guard, seconds);
    if (!rt_mpi_running() || rt_opts_g.world_size == 1) {
        rt_guard_step_end(&bg.guard, bg.step_bg, bg.want);
        return;
    }
    bg.pending = n;
    bg.pend_used = bg.step_bg;
    bg.pend_want = bg.want;
}

/* ---- the end ------------------------------------------------------------------------------ */

void rt_bg_finish(double elapsed)
{
    bg.in_step = bg.open = false;
    if (bg.pending >= 0 && !bg.finished) /* the last step's, after the training's time */
        guard_step_end_now();
    const int world = rt_opts_g.world_size;
    /* Per copy: steps and busy seconds; gathered by (model name) on rank 0. The names
     * travel as fixed-width records so that one gather carries everything. */
    enum { NAME = 64 };
    typedef struct {
        char name[NAME];
        double steps, batch, busy;
    } rec;
    int mine = bg.n;
    rec *out = rt_xcalloc((size_t)(mine ? mine : 1), sizeof(rec), "background");
    for (int i = 0; i < mine; i++) {
        snprintf(out[i].name, NAME, "%s", bg.c[i].m->name);
        out[i].steps = (double)bg.c[i].step;
        out[i].batch = (double)bg.c[i].m->batch;
        out[i].busy = bg.c[i].busy;
    }
    /* Background seconds, summed over the ranks with copies (HOSTS); the rest of the
     * report is rank 0's guard, whose steps every rank shares. */
    enum { USED, HOSTS, NSUM };
    const rt_guard *g = &bg.guard;
    double guard[NSUM] = {[USED] = g->used, [HOSTS] = mine > 0};
    double sums[NSUM] = {0};
    int *counts = rt_opts_g.rank == 0 ? rt_xcalloc((size_t)world, sizeof(int), "background") : NULL;
    int *offs = rt_opts_g.rank == 0 ? rt_xcalloc((size_t)world, sizeof(int), "background") : NULL;
    int bytes = mine * (int)sizeof(rec);
    rt_wait_begin("background");
    if (rt_mpi_running()) {
        rt_mpi_check(MPI_Reduce(guard, sums, NSUM, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
                     "background");
        rt_mpi_check(MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD),
                     "background");
    } else {
        memcpy(sums, guard, sizeof sums);
        if (counts)
            counts[0] = bytes;
    }
    int total = 0;
    if (counts)
        for (int r = 0; r < world; r++) {
            offs[r] = total;
            total += counts[r];
        }
    rec *all =
        rt_opts_g.rank == 0 ? rt_xcalloc((size_t)(total ? total : 1), 1, "background") : NULL;
    if (rt_mpi_running())
        rt_mpi_check(
            MPI_Gatherv(out, bytes, MPI_BYTE, all, counts, offs, MPI_BYTE, 0, MPI_COMM_WORLD),
            "background");
    else if (all)
        memcpy(all, out, (size_t)bytes);
    rt_wait_end();
    if (rt_opts_g.rank == 0 && rt_opts_g.background && sums[HOSTS] > 0) {
        int nrec = total / (int)sizeof(rec);
        bool *done = rt_xcalloc((size_t)(nrec ? nrec : 1), sizeof(bool), "background");
        for (int i = 0; i < nrec; i++) {
            if (done[i])
                continue;
            double steps = 0, samples = 0;
            int copies = 0;
            for (int j = i; j < nrec; j++)
                if (!done[j] && !strcmp(all[j].name, all[i].name)) {
                    done[j] = true;
                    copies++;
                    steps += all[j].steps;
                    samples += all[j].steps * all[j].batch;
                }
            printf("background %s: %d cop%s, %.0f steps, %.1f samples/s\n", all[i].name, copies,
                   copies == 1 ? "y" : "ies", steps, elapsed > 0 ? samples / elapsed : 0.0);
        }
        free(done);
        /* The slowdown against the baseline windows (guard.c), its standard error and
         * the upper confidence bound the guard steers to the bound; then the windows, the
         * baseline at the end, the steps with background work, their own mean over
         * their baseline, the background seconds such a step held on a rank with
         * copies, and how many of them took longer than bound x baseline. */
        double sd, se, up;
        if (rt_guard_estimate(g, &sd, &se, &up) && g->n_bg > 0) {
            printf("foreground slowdown %.3f +- %.3f (at most %.3f at 95%%; against %d windows "
                   "of %d steps without background work after %d settling, baseline %.3f ms at "
                   "the end, %lld gaps cut short by a changed machine speed; %lld "
                   "steps with it at %.3f of their baseline, background %.3f ms a step; bound "
                   "%.2f, %lld steps over it)\n",
                   sd, se, up, g->nwin, GUARD_WINDOW, g->settle, 1e3 * g->base,
                   (long long)g->stale_gaps, (long long)g->n_bg, g->ratio / (double)g->n_bg,
                   1e3 * sums[USED] / ((double)g->n_bg * sums[HOSTS]), bg.bound,
                   (long long)g->over);
        } else
            printf("foreground slowdown unmeasured (%lld steps with background, %d windows "
                   "without)\n",
                   (long long)g->n_bg, g->nwin);
        fflush(stdout);
    } else if (rt_opts_g.rank == 0 && !rt_opts_g.background) {
        printf("background off\n");
        fflush(stdout);
    }
    free(all);
    free(counts);
    free(offs);
    free(out);
    /* No more background work in this run (a step cut short stays unfinished). */
    bg.finished = true;
}

/* ---- checkpoints ----------------------------------------------------------------------- */

/* A copy's state at a step boundary of the foreground is its parameters and optimizer
 * state after its completed steps (the update is a step's last unit; gradients of a
 * step in progress are dropped and the step is redone after a resume). */
static void copy_suffix(const copy *c, char *out, size_t cap)
{
    snprintf(out, cap, ".bg-%s", c->m->name);
}

void rt_bg_checkpoint_save(const char *dir, int64_t round_step)
{
    for (int i = 0; i < bg.n; i++) {
        char suffix[96];
        copy_suffix(&bg.c[i], suffix, sizeof suffix);
        rt_checkpoint_write(dir, round_step, suffix, bg.c[i].ps, bg.c[i].step, bg.c[i].seed, NULL);
    }
}

void rt_bg_checkpoint_load(const char *dir, int64_t round_step)
{
    for (int i = 0; i < bg.n; i++) {
        copy *c = &bg.c[i];
        char suffix[96];
        copy_suffix(c, suffix, sizeof suffix);
        int64_t step = rt_checkpoint_read(dir, round_step, suffix, c->ps, -1, c->seed, NULL);
        if (step < 0) {
            rt_message("checkpoint",
                       "the round of step %lld holds no state of background '%s' (seed %llu): "
                       "it starts from its first step",
                       (long long)round_step, c->m->name, (unsigned long long)c->seed);
            continue;
        }
        c->step = step;
        c->slice = 0;
    }
}

void rt_bg_free(void)
{
    for (int i = 0; i < bg.n; i++) {
        copy *c = &bg.c[i];
        rt_data_close(c->data);
        rt_pool_free(c->pool);
        for (int s = 0; s < c->nslices; s++)
            free(c->slice_names[s]);
        free(c->slice_names);
        free(c->track);
        free(c->est);
        free(c->cut);
    }
    bg.n = 0;
}
