/* loader.c: the parallel prefetching loader behind data.c's image batches (docs/runtime.md,
 * "Data"). A pool of --data-workers threads decodes rows of batches held in a few slots;
 * data.c asks for a batch (rt_loader_get) and, for the training stream, announces the
 * next ones (rt_loader_prefetch), which the pool decodes while the step computes. Which
 * sample a row holds is decided by the caller (its index and epoch), and a row's pixels
 * are a function of them alone, so the rows come out the same whichever thread decodes
 * them, in whatever order, and whether or not they were prefetched. A prefetched batch
 * that is never asked for (a resumed run, a test pass between steps) is dropped. A row
 * that fails is zeroed and reported with the batch that holds it, when it is asked for,
 * so an error stops the run at the step that needs the image, not earlier. The threads
 * never call rt_fatal or allocate; each worker's span of a batch goes to its own
 * --trace track when the batch is handed over, saying whether it had been announced. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 4 /* the batch being handed over, RT_LOADER_AHEAD prefetched, one spare */

typedef enum { SLOT_FREE, SLOT_QUEUED, SLOT_CANCELLED } slot_state;

typedef struct {
    slot_state state;
    uint64_t stream;
    int64_t g0, count, cap;
    int64_t seq; /* workers take rows from the queued slot of the lowest seq */
    int64_t *idx, *epoch;
    float *x;
    int64_t next_row; /* the next row a worker takes */
    int64_t busy;     /* rows being decoded now */
    int64_t done;     /* rows finished */
    int64_t nbad, bad_row;
    char err[RT_LOADER_ERR];
    double *t0, *t1; /* per worker: its first start and last end on this batch (0: none) */
} slot;

struct rt_loader {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    pthread_t *th;
    struct worker_arg *args;
    int nworkers, nthreads;
    bool stop;
    int64_t row_floats, next_seq, min_seq;
    rt_loader_fn fn;
    void *ctx;
    slot slots[SLOTS];
};

typedef struct worker_arg {
    rt_loader *l;
    int k;
} worker_arg;

/* Names of the trace tracks; the trace is written after the loaders are gone. */
static char track_names[RT_TRACE_DATA_TRACKS][32];

/* The queued slot of the lowest seq with a row left to take, or NULL. */
static slot *next_work(rt_loader *l)
{
    slot *best = NULL;
    for (int i = 0; i < SLOTS; i++) {
        slot *s = &l->slots[i];
        if (s->state == SLOT_QUEUED && s->next_row < s->count && (!best || s->seq < best->seq))
            best = s;
    }
    return best;
}

static void *worker_main(void *p)
{
    worker_arg *a = p;
    rt_loader *l = a->l;
    int k = a->k;
    char err[RT_LOADER_ERR];
    pthread_mutex_lock(&l->mu);
    for (;;) {
        slot *s = NULL;
        while (!l->stop && !(s = next_work(l)))
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stop)
            break;
        int64_t r = s->next_row++;
        s->busy++;
        int64_t idx = s->idx[r], epoch = s->epoch[r];
        uint64_t stream = s->stream;
        float *out = s->x + r * l->row_floats;
        pthread_mutex_unlock(&l->mu);
        double t0 = rt_now();
        bool ok = l->fn(l->ctx, k, stream, idx, epoch, out, err, sizeof err);
        if (!ok)
            memset(out, 0, (size_t)l->row_floats * sizeof *out);
        double t1 = rt_now();
        pthread_mutex_lock(&l->mu);
        if (s->t0[k] == 0)
            s->t0[k] = t0;
        s->t1[k] = t1;
        if (!ok) {
            if (s->nbad++ == 0 || r < s->bad_row) {
                s->bad_row = r;
                memcpy(s->err, err, sizeof s->err);
            }
        }
        s->busy--;
        s->done++;
        if (s->state == SLOT_CANCELLED && s->busy == 0)
            s->state = SLOT_FREE;
        pthread_cond_broadcast(&l->done);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

rt_loader *rt_loader_new(int nworkers, int64_t row_floats, rt_loader_fn fn, void *ctx)
{
    if (nworkers < 1 || nworkers > RT_LOADER_MAX_WORKERS)
        rt_fatal("data", "--data-workers %d is outside 1..%d", nworkers, RT_LOADER_MAX_WORKERS);
    rt_loader *l = rt_xcalloc(1, sizeof *l, "data");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    l->nworkers = nworkers;
    l->row_floats = row_floats;
    l->fn = fn;
    l->ctx = ctx;
    for (int i = 0; i < SLOTS; i++) {
        l->slots[i].t0 = rt_xcalloc((size_t)nworkers * 2, sizeof(double), "data");
        l->slots[i].t1 = l->slots[i].t0 + nworkers;
    }
    l->th = rt_xcalloc((size_t)nworkers, sizeof *l->th, "data");
    l->args = rt_xcalloc((size_t)nworkers, sizeof *l->args, "data");
    for (int k = 0; k < RT_TRACE_DATA_TRACKS && k < nworkers; k++) {
        if (!track_names[k][0])
            snprintf(track_names[k], sizeof track_names[k], "data worker %d", k);
        rt_trace_name_track(RT_TRACE_DATA_TID + k, track_names[k]);
    }
    for (int k = 0; k < nworkers; k++) {
        l->args[k] = (worker_arg){l, k};
        if (pthread_create(&l->th[k], NULL, worker_main, &l->args[k]) != 0)
            rt_fatal("data", "cannot start data worker %d of %d", k + 1, nworkers);
        l->nthreads++;
    }
    return l;
}

void rt_loader_free(rt_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    for (int k = 0; k < l->nthreads; k++)
        pthread_join(l->th[k], NULL);
    for (int i = 0; i < SLOTS; i++) {
        free(l->slots[i].idx);
        free(l->slots[i].x);
        free(l->slots[i].t0);
    }
    free(l->th);
    free(l->args);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->done);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static slot *find(rt_loader *l, uint64_t stream, int64_t g0, int64_t count)
{
    for (int i = 0; i < SLOTS; i++) {
        slot *s = &l->slots[i];
        if (s->state == SLOT_QUEUED && s->stream == stream && s->g0 == g0 && s->count == count)
            return s;
    }
    return NULL;
}

/* Stops handing out rows of s; it is free once the rows being decoded are done. */
static void cancel(slot *s)
{
    s->state = s->busy ? SLOT_CANCELLED : SLOT_FREE;
}

/* A free slot set up for the batch, or NULL when none is free (called with mu held).
 * Its buffers are grown here, on the calling thread. */
static slot *claim(rt_loader *l, uint64_t stream, int64_t g0, int64_t count, const int64_t *idx,
                   const int64_t *epoch, int64_t seq)
{
    slot *s = NULL;
    for (int i = 0; i < SLOTS && !s; i++)
        if (l->slots[i].state == SLOT_FREE)
            s = &l->slots[i];
    if (!s)
        return NULL;
    if (count > s->cap) {
        free(s->idx);
        free(s->x);
        s->idx = rt_xmalloc((size_t)count * 2 * sizeof *s->idx, "data");
        size_t bytes;
        if (__builtin_mul_overflow((size_t)count, (size_t)l->row_floats * sizeof(float), &bytes))
            rt_fatal("data", "a batch of %lld rows is too large to stage", (long long)count);
        s->x = rt_xmalloc(bytes, "data");
        s->cap = count;
    }
    s->epoch = s->idx + s->cap;
    memcpy(s->idx, idx, (size_t)count * sizeof *idx);
    memcpy(s->epoch, epoch, (size_t)count * sizeof *epoch);
    s->stream = stream;
    s->g0 = g0;
    s->count = count;
    s->seq = seq;
    s->next_row = s->busy = s->done = s->nbad = 0;
    s->bad_row = -1;
    s->err[0] = 0;
    memset(s->t0, 0, (size_t)l->nworkers * 2 * sizeof *s->t0);
    s->state = SLOT_QUEUED;
    pthread_cond_broadcast(&l->work);
    return s;
}

void rt_loader_prefetch(rt_loader *l, uint64_t stream, int64_t g0, int64_t count,
                        const int64_t *idx, const int64_t *epoch)
{
    pthread_mutex_lock(&l->mu);
    if (!find(l, stream, g0, count))
        claim(l, stream, g0, count, idx, epoch, l->next_seq++); /* none free: not now */
    pthread_mutex_unlock(&l->mu);
}

int64_t rt_loader_get(rt_loader *l, uint64_t stream, int64_t g0, int64_t count, const int64_t *idx,
                      const int64_t *epoch, float *out, int64_t *bad_row, char *err, size_t errlen)
{
    pthread_mutex_lock(&l->mu);
    slot *s = find(l, stream, g0, count);
    bool announced = s != NULL;
    if (s) {
        /* What was queued before it on its stream will not be asked for. */
        for (int i = 0; i < SLOTS; i++) {
            slot *o = &l->slots[i];
            if (o != s && o->state == SLOT_QUEUED && o->stream == stream && o->seq < s->seq)
                cancel(o);
        }
    } else {
        /* Not announced: decoded first, before any prefetched batch. */
        while (!(s = claim(l, stream, g0, count, idx, epoch, --l->min_seq))) {
            slot *victim = NULL;
            for (int i = 0; i < SLOTS; i++) {
                slot *o = &l->slots[i];
                if (o->state == SLOT_QUEUED && (!victim || o->seq > victim->seq))
                    victim = o;
            }
            if (victim)
                cancel(victim);
            else
                pthread_cond_wait(&l->done, &l->mu);
        }
    }
    while (s->done < s->count)
        pthread_cond_wait(&l->done, &l->mu);
    memcpy(out, s->x, (size_t)count * (size_t)l->row_floats * sizeof *out);
    int64_t nbad = s->nbad;
    *bad_row = s->bad_row;
    snprintf(err, errlen, "%s", s->err);
    for (int k = 0; k < l->nworkers; k++)
        if (s->t0[k] != 0)
            rt_trace_event(RT_TRACE_DATA_TID + k % RT_TRACE_DATA_TRACKS,
                           s->stream != 0 ? "decode test batch"
                           : announced    ? "decode training batch (prefetched)"
                                          : "decode training batch",
                           s->t0[k], s->t1[k]);
    s->state = SLOT_FREE;
    pthread_mutex_unlock(&l->mu);
    return nbad;
}
