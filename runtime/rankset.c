/* rankset.c: rank sets and the rules of moving samples between them, shared by every
 * backend. A plan's rank set becomes an rt_comm with its own MPI communicator (made once at
 * startup by MPI_Comm_split, collective over the world) plus whatever the backend's
 * transport keeps per set. A global batch splits over a set by rt_shard (the compiler's
 * planner uses the same rule); rt_reshard_plan works out, once for all backends, which
 * sample ranges this rank receives, sends and copies when a batch moves from one set to
 * another, and the transport (cpu/comm_mpi.c, cuda/comm_nccl.c) only carries them. Host
 * values (the loss, barriers) go over MPI for every backend. */
#include "mpi_glue.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static rt_comm *all_comms;

void rt_mpi_check(int err, const char *op)
{
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        rt_fatal(op, "MPI error: %s", msg);
    }
}

bool rt_mpi_wait_sleeps;

/* MPI's own wait polls without pause, which is right while every rank has a CPU of its
 * own; when the node's ranks outnumber its CPUs, a polling rank takes CPU time from the
 * rank it waits for (Open MPI's yield when oversubscribed does not stop that on Linux:
 * the yielding rank stays runnable and is soon scheduled again). */
void rt_mpi_wait(int n, MPI_Request *req, const char *op)
{
    if (!rt_mpi_wait_sleeps && !rt_bg_ready()) {
        rt_mpi_check(MPI_Waitall(n, req, MPI_STATUSES_IGNORE), op);
        return;
    }
    long pause = 1000;
    for (int polls = 0;; polls++) {
        int done = 0;
        rt_mpi_check(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE), op);
        if (done)
            return;
        if (rt_bg_idle() || polls < 64 || !rt_mpi_wait_sleeps)
            continue;
        struct timespec ts = {0, pause};
        nanosleep(&ts, NULL);
        pause = pause < 100000 ? 2 * pause : 100000;
    }
}

void rt_shard(int64_t B, int k, int index, int64_t *start, int64_t *end)
{
    if (k <= 0 || index < 0 || index >= k || B < 0)
        rt_fatal("shard", "invalid shard %d of %d for batch %lld", index, k, (long long)B);
    int64_t base = B / k, extra = B % k;
    *start = index * base + (index < extra ? index : extra);
    *end = *start + base + (index < extra ? 1 : 0);
}

/* A checked, malloc'd copy of a rank set (distinct ranks of the world); *index gets this
 * rank's place in it, or -1. */
static int *rank_set_copy(int n, const int *world_ranks, int *index)
{
    int size = rt_opts_g.world_size, me = rt_opts_g.rank;
    if (n <= 0)
        rt_fatal("comm_new", "empty rank set");
    int *ranks = rt_xmalloc((size_t)n * sizeof(int), "comm_new");
    *index = -1;
    for (int i = 0; i < n; i++) {
        if (world_ranks[i] < 0 || world_ranks[i] >= size)
            rt_fatal("comm_new", "rank %d in a rank set is outside the world of %d ranks",
                     world_ranks[i], size);
        for (int j = 0; j < i; j++)
            if (world_ranks[j] == world_ranks[i])
                rt_fatal("comm_new", "rank %d appears twice in a rank set", world_ranks[i]);
        ranks[i] = world_ranks[i];
        if (world_ranks[i] == me)
            *index = i;
    }
    return ranks;
}

rt_comm *rt_comm_new(int n, const int *world_ranks)
{
    rt_comm *c = rt_xcalloc(1, sizeof *c, "comm_new");
    c->n = n;
    c->ranks = rank_set_copy(n, world_ranks, &c->index);
    c->mpi = rt_xcalloc(1, sizeof *c->mpi, "comm_new");
    c->mpi->comm = MPI_COMM_NULL;
    rt_wait_begin("comm_new");
    if (rt_mpi_running())
        rt_mpi_check(MPI_Comm_split(MPI_COMM_WORLD, c->index >= 0 ? 0 : MPI_UNDEFINED, c->index,
                                    &c->mpi->comm),
                     "comm_new");
    rt_net.open(c);
    rt_wait_end();
    c->next = all_comms;
    all_comms = c;
    return c;
}

rt_comm *rt_comm_self(void)
{
    for (rt_comm *c = all_comms; c; c = c->next)
        if (c->n == 1 && c->index == 0 && c->mpi->comm == MPI_COMM_NULL && !c->transport)
            return c;
    /* Made without MPI_Comm_split (not collective): a one-rank set never communicates. */
    rt_comm *c = rt_xcalloc(1, sizeof *c, "comm_self");
    c->n = 1;
    c->ranks = rt_xmalloc(sizeof(int), "comm_self");
    c->ranks[0] = rt_opts_g.rank;
    c->index = 0;
    c->mpi = rt_xcalloc(1, sizeof *c->mpi, "comm_self");
    c->mpi->comm = MPI_COMM_NULL;
    c->next = all_comms;
    all_comms = c;
    return c;
}

void rt_comm_free_all(void)
{
    while (all_comms) {
        rt_comm *c = all_comms;
        all_comms = c->next;
        rt_net.close(c);
        if (c->mpi->comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->mpi->comm);
        free(c->mpi);
        free(c->ranks);
        free(c);
    }
}

rt_comm *rt_comm_list(void)
{
    return all_comms;
}

bool rt_comm_member(const rt_comm *c)
{
    return c->index >= 0;
}
int rt_comm_index(const rt_comm *c)
{
    return c->index;
}
int rt_comm_size(const rt_comm *c)
{
    return c->n;
}

void rt_comm_shard(const rt_comm *c, int64_t B, int64_t *start, int64_t *end)
{
    if (c->index < 0) {
        *start = *end = 0;
        return;
    }
    rt_shard(B, c->n, c->index, start, end);
}

/* ---- collectives ------------------------------------------------------------------------- */

void rt_allreduce_sum(const rt_comm *c, float *data, int64_t n)
{
    if (c->index < 0 || c->n == 1 || n == 0)
        return;
    rt_wait_begin("allreduce");
    rt_net.allreduce(c, data, n, false, "allreduce");
    rt_wait_end();
}

void rt_allreduce_f64(const rt_comm *c, double *data, int64_t n, const char *op)
{
    if (!c || c->index < 0 || c->n == 1 || n == 0)
        return;
    rt_wait_begin("allreduce");
    rt_net.allreduce(c, data, n, true, op);
    rt_wait_end();
}

double rt_world_sum(double local)
{
    if (rt_opts_g.world_size == 1)
        return local;
    rt_wait_begin("world_sum");
    /* Non-blocking in every run (not only with background work), so that the sum is made
     * by the same algorithm, in the same order, with background work on or off. Ranks that
     * finished their part of the step early run background slices. The guard's numbers
     * ride along (background.c). */
    double in[1 + RT_BG_SHARE] = {local}, out[1 + RT_BG_SHARE];
    int n = 1 + rt_bg_share(in + 1);
    MPI_Request req;
    rt_mpi_check(MPI_Iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req),
                 "world_sum");
    rt_mpi_wait(1, &req, "world_sum");
    rt_wait_end();
    if (n > 1)
        rt_bg_shared(out + 1);
    return out[0];
}

void rt_barrier(void)
{
    rt_wait_begin("barrier");
    rt_dev.sync("barrier");
    rt_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    rt_wait_end();
}

/* ---- resharding ------------------------------------------------------------------------ */

static void add(rt_transfers *t, int *cap, rt_xfer_dir dir, int peer, int64_t lo, int64_t hi)
{
    if (t->n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        rt_xfer *nx = realloc(t->x, (size_t)*cap * sizeof *nx);
        if (!nx)
            rt_fatal("reshard", "out of memory");
        t->x = nx;
    }
    t->x[t->n++] = (rt_xfer){dir, peer, lo, hi - lo};
}

bool rt_reshard_plan(const rt_comm *from, const rt_comm *to, int64_t B, rt_transfers *t)
{
    *t = (rt_transfers){.producer = from->index >= 0, .consumer = to->index >= 0};
    if (!t->producer && !t->consumer)
        return false;
    const int me = rt_opts_g.rank;
    int cap = 0;
    if (t->producer)
        rt_shard(B, from->n, from->index, &t->src0, &t->src1);
    if (t->consumer) {
        rt_shard(B, to->n, to->index, &t->dst0, &t->dst1);
        for (int p = 0; p < from->n; p++) {
            int64_t s, e;
            rt_shard(B, from->n, p, &s, &e);
            int64_t lo = s > t->dst0 ? s : t->dst0, hi = e < t->dst1 ? e : t->dst1;
            if (lo < hi && from->ranks[p] != me)
                add(t, &cap, RT_XFER_RECV, from->ranks[p], lo, hi);
        }
    }
    if (t->producer)
        for (int c = 0; c < to->n; c++) {
            int64_t s, e;
            rt_shard(B, to->n, c, &s, &e);
            int64_t lo = s > t->src0 ? s : t->src0, hi = e < t->src1 ? e : t->src1;
            if (lo < hi)
                add(t, &cap, to->ranks[c] == me ? RT_XFER_COPY : RT_XFER_SEND, to->ranks[c], lo,
                    hi);
        }
    return true;
}

void rt_transfers_free(rt_transfers *t)
{
    free(t->x);
    t->x = NULL;
    t->n = 0;
}

static void check_shard(const rt_tensor *t, int64_t count, int64_t per_sample, const char *what)
{
    if (t->ndim < 1 || t->shape[0] != count || t->numel != count * per_sample)
        rt_fatal("reshard",
                 "%s has shape[0]=%lld and %lld elements, expected %lld samples "
                 "of %lld elements",
                 what, (long long)(t->ndim ? t->shape[0] : -1), (long long)t->numel,
                 (long long)count, (long long)per_sample);
}

/* Checks a reshard's tensors against this rank's plan and posts it with `tag`: the
 * transport's handle, or NULL when this rank has nothing to wait for. */
static void *reshard_post(const char *op, const rt_tensor *src, const rt_comm *from, rt_tensor *dst,
                          const rt_comm *to, int64_t B, int64_t per_sample, int tag)
{
    rt_transfers t;
    if (!rt_reshard_plan(from, to, B, &t))
        return NULL;
    if (t.producer) {
        if (!src)
            rt_fatal(op, "producer rank has no source tensor");
        check_shard(src, t.src1 - t.src0, per_sample, "source");
    }
    if (t.consumer) {
        if (!dst)
            rt_fatal(op, "consumer rank has no destination tensor");
        check_shard(dst, t.dst1 - t.dst0, per_sample, "destination");
        if (t.producer && src->dtype != dst->dtype)
            rt_fatal(op, "source and destination dtypes differ");
    }
    /* Every rank stores activations alike (rt_storage_dtype), so both sides agree on a
     * row's bytes. */
    const size_t elem = rt_dtype_size(src ? src->dtype : dst ? dst->dtype : RT_F32);
    void *h = rt_net.exchange_start(&t, src ? src->data : NULL, dst ? dst->data : NULL,
                                    (size_t)per_sample * elem, tag);
    rt_transfers_free(&t);
    return h;
}

static void reshard_complete(void *h)
{
    if (!h)
        return;
    rt_wait_begin("reshard");
    rt_net.exchange_wait(h);
    rt_wait_end();
}

void rt_reshard(const rt_tensor *src, const rt_comm *from, rt_tensor *dst, const rt_comm *to,
                int64_t B, int64_t per_sample)
{
    reshard_complete(reshard_post("reshard", src, from, dst, to, B, per_sample, 0));
}

/* The split-phase reshards, by id: started (on every rank that calls the start, members
 * of its sets or not, so that a wait without a start is caught everywhere) and the
 * transport's handle. */
typedef struct {
    bool started;
    void *handle;
} flight;

static flight *flights;
static int nflights;

void rt_reshard_start(int id, const rt_tensor *src, const rt_comm *from, rt_tensor *dst,
                      const rt_comm *to, int64_t B, int64_t per_sample)
{
    if (id < 0 || id >= RT_RESHARD_IDS)
        rt_fatal("reshard_start", "reshard id %d is outside [0, %d)", id, RT_RESHARD_IDS);
    if (id >= nflights) {
        int n = nflights ? nflights : 16;
        while (n <= id)
            n *= 2;
        flight *nf = realloc(flights, (size_t)n * sizeof *nf);
        if (!nf)
            rt_fatal("reshard_start", "out of memory");
        memset(nf + nflights, 0, (size_t)(n - nflights) * sizeof *nf);
        flights = nf;
        nflights = n;
    }
    flight *f = &flights[id];
    if (f->started)
        rt_fatal("reshard_start", "reshard %d started again before its wait", id);
    f->handle = reshard_post("reshard_start", src, from, dst, to, B, per_sample, id + 1);
    f->started = true;
}

void rt_reshard_wait(int id)
{
    if (id < 0 || id >= nflights || !flights[id].started)
        rt_fatal("reshard_wait", "reshard %d was not started", id);
    flight *f = &flights[id];
    f->started = false;
    reshard_complete(f->handle);
    f->handle = NULL;
}

void rt_reshards_free(void)
{
    for (int i = 0; i < nflights; i++)
        if (flights[i].started)
            rt_fatal("reshard", "reshard %d was started and never waited for", i);
    free(flights);
    flights = NULL;
    nflights = 0;
}
