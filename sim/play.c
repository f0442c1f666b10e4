/*
 * play.c: plays a plan's timeline (passes/timeline.c) on the engine for a
 * number of iterations (docs/sim.md, "Playing a plan").
 *
 * Every rank runs its timeline program again and again, as the generated
 * program does, with nothing between iterations but its own order. Its
 * host walks the program: a compute op is a kernel, launched by the host
 * (n_k x the GPU's launch overhead of host time, one launch after the
 * other) and run by the GPU after the kernels before it: the host does not
 * wait for kernels, only at communication. A communication op waits until
 * the GPU has finished the kernels before it (the data), then joins the
 * collective on the rank's communication stream; a blocking one (every
 * reshard, the loss sum, an all-reduce unless ar_overlap) holds the host
 * until it is done, an overlapped all-reduce does not. At the end of its
 * program a rank waits for its kernels and collectives (the optimizer step
 * needs the gradients) and starts again.
 *
 * Durations: a kernel takes its rank's own shard's compute time minus its
 * launches; reshards and all-reduces move the bytes net.c puts on the links
 * after the latency that makes them, alone, take the planner's time; the
 * loss sum is an all-reduce of 8 bytes over every rank. With --ideal every
 * op takes the timeline's duration (compute at the layer's largest shard,
 * launches included; communication its model time, the loss sum plan_loss_sum_time) and
 * no link is shared: the run reproduces the timeline's ideal schedule.
 *
 * Background slices become ready on their rank's compute stream when the
 * rank's host reaches their anchor, every iteration; they run at low
 * priority (engine.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum { T_ARRIVE, T_ASYNC, T_END };
enum { W_NONE, W_COMM, W_END, W_DONE };

typedef struct rank_st {
    int64_t pc;  /* the next step, relative to the rank's program */
    int64_t bgp; /* the next background slice to release, into bg order */
    int iter;
    int wait, wait_op;
    int pending_async;
    double host; /* the host is free from then on */
} rank_st;

typedef struct player {
    const plan_timeline *tl;
    const plan_problem *p;
    const sim_options *o;
    sim_engine *e;
    rank_st *r;
    int *coll_of_op, *op_of_coll;
    int *done;        /* per op: how many times its collective completed (one per iteration) */
    sim_load **loads; /* per op */
    double *launch;   /* per op: host time of its launches */
    int *bg_order;    /* background slices by rank, then anchor */
    int64_t *bg0;     /* rank g's: bg_order[bg0[g] .. bg0[g + 1]) */
    double *iter_end;
    /* Background work counts while the foreground runs: a slice that ends
     * after the last rank's last iteration (slices queued behind others run
     * on once the foreground is done) adds no samples, and its time past
     * that end is taken out of the GPU's busy time (bg_after). */
    int ranks_done;
    double *bg_after;
    double bg_samples, bg_gpu_s;
    sim_trace *trace;
} player;

static void advance(player *pl, int g);

static void on_timer(void *ctx, int kind, int g, int op)
{
    player *pl = ctx;
    if (kind == T_ARRIVE || kind == T_ASYNC)
        sim_coll_arrive(pl->e, pl->coll_of_op[op], g);
    else
        advance(pl, g);
}

static void on_coll(void *ctx, int cl, double start, double end)
{
    player *pl = ctx;
    const plan_timeline *tl = pl->tl;
    int op = pl->op_of_coll[cl];
    const plan_tl_op *o = &tl->op[op];
    if (pl->trace)
        sim_trace_coll(pl->trace, op, start, end);
    pl->done[op]++;
    for (int i = 0; i < o->nparts; i++) {
        int g = tl->part[o->part0 + i];
        rank_st *s = &pl->r[g];
        if (o->async) {
            s->pending_async--;
            if (s->wait == W_END && s->pending_async == 0)
                advance(pl, g);
            else if (s->wait == W_COMM && s->wait_op == op) { /* at the op's PTL_WAIT */
                s->wait = W_NONE;
                s->pc++;
                s->host = fmax(s->host, end);
                advance(pl, g);
            }
        } else if (s->wait == W_COMM && s->wait_op == op) {
            s->wait = W_NONE;
            s->pc++;
            s->host = fmax(s->host, end);
            advance(pl, g);
        }
    }
}

static void on_slice(void *ctx, int gpu, int64_t tag, double start, double end)
{
    player *pl = ctx;
    if (pl->ranks_done == pl->tl->G) {
        double T = pl->iter_end[pl->o->iterations - 1];
        if (end > T) {
            pl->bg_after[gpu] += end - fmax(start, T);
            return;
        }
    }
    pl->bg_samples += pl->o->bg[tag].samples;
    pl->bg_gpu_s += pl->o->bg[tag].gpu_s;
}

static void on_kernel(void *ctx, int gpu, bool bg, int64_t tag, double start, double end)
{
    player *pl = ctx;
    if (pl->trace)
        sim_trace_kernel(pl->trace, gpu, bg, tag, start, end);
}

static void on_link(void *ctx, int link, int64_t tag, double bytes, double start, double end)
{
    player *pl = ctx;
    if (pl->trace)
        sim_trace_link(pl->trace, link, (int)tag, bytes, start, end);
}

/* The rank's host goes on until it must wait. */
static void advance(player *pl, int g)
{
    const plan_timeline *tl = pl->tl;
    const sim_options *o = pl->o;
    sim_engine *e = pl->e;
    rank_st *s = &pl->r[g];
    int64_t len;
    const plan_tl_step *prog = plan_tl_prog(tl, g, &len);
    double now = sim_now(e);
    for (;;) {
        while (s->bgp < pl->bg0[g + 1] && o->bg[pl->bg_order[s->bgp]].step <= s->pc) {
            int b = pl->bg_order[s->bgp++];
            sim_slice(e, g, o->bg[b].dur, b);
        }
        if (s->pc == len) {
            double t = sim_fg_end(e, g);
            if (s->pending_async > 0 || t > now) {
                if (s->pending_async == 0)
                    sim_timer(e, t, T_END, g, 0);
                s->wait = W_END;
                return;
            }
            s->wait = W_NONE;
            if (now > pl->iter_end[s->iter])
                pl->iter_end[s->iter] = now;
            if (++s->iter == o->iterations) {
                pl->ranks_done++;
                s->wait = W_DONE;
                return;
            }
            s->pc = 0;
            s->bgp = pl->bg0[g];
            s->host = fmax(s->host, now);
            continue;
        }
        const plan_tl_step *st = &prog[s->pc];
        const plan_tl_op *op = &tl->op[st->op];
        if (op->kind == PTL_FWD || op->kind == PTL_BWD) {
            s->pc++;
            double dur = o->ideal ? op->dur : fmax(0, st->own - pl->launch[st->op]);
            if (!((o->ideal ? op->dur : st->own) > 0))
                continue; /* a view: no kernel at all */
            double nb = now;
            if (!o->ideal) {
                s->host = fmax(s->host, now) + pl->launch[st->op] * sim_noise(e);
                nb = s->host;
            }
            sim_kernel(e, g, nb, dur, st->op);
            continue;
        }
        if (op->kind == PTL_WAIT) {
            if (pl->done[op->of] > s->iter) { /* already complete */
                s->pc++;
                continue;
            }
            s->wait = W_COMM;
            s->wait_op = op->of;
            return;
        }
        double t = sim_fg_end(e, g);
        if (op->async) {
            s->pc++;
            s->pending_async++;
            if (t > now)
                sim_timer(e, t, T_ASYNC, g, st->op);
            else
                sim_coll_arrive(e, pl->coll_of_op[st->op], g);
            continue;
        }
        s->wait = W_COMM;
        s->wait_op = st->op;
        if (t > now)
            sim_timer(e, t, T_ARRIVE, g, st->op);
        else
            sim_coll_arrive(e, pl->coll_of_op[st->op], g);
        return;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bg_key {
    int rank, step, index;
} bg_key;

static int cmp_bg(const void *a, const void *b)
{
    const bg_key *x = a, *y = b;
    if (x->rank != y->rank)
        return (x->rank > y->rank) - (x->rank < y->rank);
    if (x->step != y->step)
        return (x->step > y->step) - (x->step < y->step);
    return (x->index > y->index) - (x->index < y->index);
}

void sim_result_free(sim_result *r)
{
    free(r->iter_time);
    free(r->fg_busy);
    free(r->bg_busy);
    memset(r, 0, sizeof *r);
}

bool sim_play(const plan_timeline *tl, const sim_options *o, sim_result *out, char *err,
              size_t errlen)
{
    memset(out, 0, sizeof *out);
    const plan_problem *p = tl->p;
    const plan_cluster *c = &p->cluster;
    int G = tl->G;
    if (o->iterations < 1) {
        snprintf(err, errlen, "the number of iterations must be at least 1");
        return false;
    }
    if (!(o->jitter >= 0) || o->jitter > 10) {
        snprintf(err, errlen, "the jitter must be from 0 to 10");
        return false;
    }
    for (int i = 0; i < o->nbg; i++) {
        const sim_bg_slice *b = &o->bg[i];
        if (b->rank < 0 || b->rank >= G || b->step < 0 ||
            b->step > tl->prog0[tl->cls[b->rank] + 1] - tl->prog0[tl->cls[b->rank]] ||
            !(b->dur >= 0) || !isfinite(b->dur) || !(b->samples >= 0) || !(b->gpu_s >= 0) ||
            !isfinite(b->gpu_s)) {
            snprintf(err, errlen, "background slice %d: rank %d, anchor %d, %g s is out of range",
                     i, b->rank, b->step, b->dur);
            return false;
        }
    }
    player pl = {.tl = tl, .p = p, .o = o};
    sim_config cfg = {.gpus = G,
                      .gpus_per_node = c->gpus_per_node,
                      .intra_bw = c->intra_bw,
                      .inter_bw = c->inter_bw,
                      .jitter = o->jitter,
                      .seed = o->seed};
    sim_hooks h = {.ctx = &pl,
                   .timer = on_timer,
                   .coll_done = on_coll,
                   .slice_done = on_slice,
                   .kernel = o->trace ? on_kernel : NULL,
                   .link_use = o->trace ? on_link : NULL};
    pl.e = sim_engine_new(&cfg, &h);
    if (o->trace)
        pl.trace = sim_trace_open(o->trace, tl, o->trace_gpus, &out->trace_gpus);

    /* One collective per communication op, with its loads. */
    pl.coll_of_op = plan_xcalloc((size_t)tl->nops, sizeof(int));
    pl.op_of_coll = plan_xcalloc((size_t)tl->nops, sizeof(int));
    pl.loads = plan_xcalloc((size_t)tl->nops, sizeof(sim_load *));
    pl.launch = plan_xcalloc((size_t)tl->nops, sizeof(double));
    pl.done = plan_xcalloc((size_t)tl->nops, sizeof(int));
    for (int x = 0; x < tl->nops; x++) {
        const plan_tl_op *op = &tl->op[x];
        pl.coll_of_op[x] = -1;
        if (op->kind == PTL_WAIT)
            continue;
        if (op->kind == PTL_FWD || op->kind == PTL_BWD) {
            const plan_layer *l = &p->layers[op->layer];
            int nk = op->kind == PTL_FWD ? l->fwd_kernels : l->bwd_kernels;
            pl.launch[x] = (nk > 0 ? nk : 1) * c->launch;
            continue;
        }
        int n = 0;
        double lat = op->dur;
        if (!o->ideal) {
            if (op->kind == PTL_RESHARD_FWD || op->kind == PTL_RESHARD_BWD) {
                n = sim_reshard_loads(c, &tl->pair[op->pair0], op->npairs, op->bytes, &pl.loads[x]);
                lat = sim_latency_for(c, pl.loads[x], n, op->dur);
            } else {
                n = sim_allreduce_loads(c, op->first, op->k, op->bytes, &pl.loads[x], &lat);
            }
        }
        int cl = sim_coll_new(pl.e, op->nparts, &tl->part[op->part0], pl.loads[x], n, lat, x);
        pl.coll_of_op[x] = cl;
        pl.op_of_coll[cl] = x;
    }
    /* Background slices by rank and anchor. */
    bg_key *keys = plan_xcalloc((size_t)o->nbg, sizeof(bg_key));
    pl.bg_order = plan_xcalloc((size_t)o->nbg, sizeof(int));
    pl.bg0 = plan_xcalloc((size_t)G + 1, sizeof(int64_t));
    for (int i = 0; i < o->nbg; i++) {
        keys[i] = (bg_key){o->bg[i].rank, o->bg[i].step, i};
        pl.bg0[o->bg[i].rank + 1]++;
    }
    for (int g = 0; g < G; g++)
        pl.bg0[g + 1] += pl.bg0[g];
    qsort(keys, (size_t)o->nbg, sizeof(bg_key), cmp_bg);
    for (int i = 0; i < o->nbg; i++)
        pl.bg_order[i] = keys[i].index;
    free(keys);

    pl.r = plan_xcalloc((size_t)G, sizeof(rank_st));
    pl.iter_end = plan_xcalloc((size_t)o->iterations, sizeof(double));
    pl.bg_after = plan_xcalloc((size_t)G, sizeof(double));
    for (int g = 0; g < G; g++) {
        pl.r[g].bgp = pl.bg0[g];
        advance(&pl, g);
    }
    sim_run(pl.e);
    bool ok = true;
    /* A rank that never finished is the timeline's bug (a wait nobody satisfies), not
     * the input's: an internal error, exit 2, as the engine reports its misuse. */
    for (int g = 0; g < G; g++)
        if (pl.r[g].wait != W_DONE) {
            fprintf(stderr,
                    "burstc: internal error: simulator: rank %d stopped at step %lld of "
                    "iteration %d\n",
                    g, (long long)pl.r[g].pc, pl.r[g].iter);
            exit(2);
        }

    /* What was measured. */
    const sim_totals *tot = sim_engine_totals(pl.e);
    int N = o->iterations;
    out->iterations = N;
    out->G = G;
    out->timeline = tl->time;
    out->iter_time = plan_xcalloc((size_t)N, sizeof(double));
    for (int i = 0; i < N; i++)
        out->iter_time[i] = pl.iter_end[i] - (i ? pl.iter_end[i - 1] : 0);
    out->total = pl.iter_end[N - 1];
    double *sorted = plan_xcalloc((size_t)N, sizeof(double)), sum = 0;
    for (int i = 0; i < N; i++) {
        sorted[i] = out->iter_time[i];
        sum += sorted[i];
    }
    qsort(sorted, (size_t)N, sizeof(double), cmp_double);
    out->mean = sum / N;
    out->p50 = N % 2 ? sorted[N / 2] : (sorted[N / 2 - 1] + sorted[N / 2]) / 2;
    out->p99 = sorted[(int)ceil(0.99 * N) - 1];
    free(sorted);
    double T = out->total > 0 ? out->total : 1;
    out->fg_samples_per_s = (double)p->batch * N / T;
    out->bg_samples = pl.bg_samples;
    out->bg_samples_per_s = pl.bg_samples / T;
    out->gpu_equivalents = (N * plan_one_gpu_time(p) + pl.bg_gpu_s) / T;
    out->fg_busy = plan_xcalloc((size_t)G, sizeof(double));
    out->bg_busy = plan_xcalloc((size_t)G, sizeof(double));
    for (int g = 0; g < G; g++) {
        out->fg_busy[g] = tot->fg_busy[g] / T;
        out->bg_busy[g] = fmax(0, tot->bg_busy[g] - pl.bg_after[g]) / T;
    }
    for (int l = 0; l < tot->nlinks; l++) {
        bool port = l < 2 * G;
        double cap = port ? c->intra_bw : c->inter_bw;
        double u = cap > 0 ? tot->link_bytes[l] / (cap * T) : 0;
        if (port) {
            out->port_util_mean += u / (2.0 * G);
            out->port_util_max = fmax(out->port_util_max, u);
        } else {
            out->nnics = (tot->nlinks - 2 * G) / 2;
            out->nic_util_mean += u / (tot->nlinks - 2.0 * G);
            out->nic_util_max = fmax(out->nic_util_max, u);
        }
    }
    if (out->nnics <= 1) {
        out->nnics = 0;
        out->nic_util_mean = out->nic_util_max = 0;
    }
    out->events = tot->events;

    if (pl.trace && !sim_trace_close(pl.trace) && ok) {
        snprintf(err, errlen, "writing the trace failed");
        ok = false;
    }
    for (int x = 0; x < tl->nops; x++)
        free(pl.loads[x]);
    free(pl.loads);
    free(pl.coll_of_op);
    free(pl.op_of_coll);
    free(pl.done);
    free(pl.launch);
    free(pl.bg_order);
    free(pl.bg0);
    free(pl.r);
    free(pl.iter_end);
    free(pl.bg_after);
    sim_engine_free(pl.e);
    if (!ok)
        sim_result_free(out);
    return ok;
}
