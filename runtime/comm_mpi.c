/* comm_mpi.c: communication of the CPU backend over MPI. A plan's rank sets become
 * rt_comm objects, each with its own MPI communicator made once at startup by
 * MPI_Comm_split (collective over the world). Gradients are sum-all-reduced within a
 * set; activations and their gradients move between sets by rt_reshard, which sends
 * each overlapping sample range from its producer to its consumer with non-blocking
 * point-to-point calls on a private duplicate of MPI_COMM_WORLD (so it never matches
 * other traffic) and copies locally when one rank is both. MPI errors return to us
 * (MPI_ERRORS_RETURN) and become fatal errors that name the rank, the op and the MPI
 * error string. */
#include "internal.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rt_comm {
    int n;
    int *ranks;    /* world ranks, in set order */
    int index;     /* this rank's index in ranks, or -1 */
    MPI_Comm comm; /* MPI_COMM_NULL on non-members */
    rt_comm *next;
};

static rt_comm *all_comms;
static MPI_Comm reshard_comm = MPI_COMM_NULL;

static void mpi_check(int err, const char *op)
{
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        rt_fatal(op, "MPI error: %s", msg);
    }
}

void rt_comm_world_init(void)
{
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &reshard_comm), "comm_init");
}

rt_comm *rt_comm_new(int n, const int *world_ranks)
{
    rt_comm *c = rt_xcalloc(1, sizeof *c, "comm_new");
    c->n = n;
    c->ranks = rt_rank_set_copy(n, world_ranks, &c->index);
    c->comm = MPI_COMM_NULL;
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised)
        mpi_check(
            MPI_Comm_split(MPI_COMM_WORLD, c->index >= 0 ? 0 : MPI_UNDEFINED, c->index, &c->comm),
            "comm_new");
    c->next = all_comms;
    all_comms = c;
    return c;
}

void rt_comm_free_all(void)
{
    while (all_comms) {
        rt_comm *c = all_comms;
        all_comms = c->next;
        if (c->comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->comm);
        free(c->ranks);
        free(c);
    }
    if (reshard_comm != MPI_COMM_NULL)
        MPI_Comm_free(&reshard_comm);
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

void rt_allreduce_sum(const rt_comm *c, float *data, int64_t n)
{
    if (c->index < 0 || c->n == 1 || n == 0)
        return;
    for (int64_t off = 0; off < n; off += INT_MAX / 2) {
        int64_t chunk = n - off < INT_MAX / 2 ? n - off : INT_MAX / 2;
        mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + off, (int)chunk, MPI_FLOAT, MPI_SUM, c->comm),
                  "allreduce");
    }
}

void rt_allreduce_sum_f64(const rt_comm *c, double *data, int64_t n)
{
    if (!c || c->index < 0 || c->n == 1 || n == 0)
        return;
    if (n > INT_MAX)
        rt_fatal("batchnorm", "too many statistics to all-reduce (%lld)", (long long)n);
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, data, (int)n, MPI_DOUBLE, MPI_SUM, c->comm), "allreduce");
}

double rt_world_sum(double local)
{
    double total = local;
    if (rt_opts_g.world_size > 1)
        mpi_check(MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                  "world_sum");
    return total;
}

void rt_barrier(void)
{
    mpi_check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
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

/* Outstanding requests of one reshard. Messages over 1 GiB are split into 1 GiB pieces
 * (MPI counts are int); pieces of one pair match in order (MPI is non-overtaking). */
typedef struct {
    MPI_Request *req;
    int n, cap;
} reqs;

#define PIECE ((size_t)1 << 30)

static void post(reqs *rq, bool recv, char *buf, size_t bytes, int peer)
{
    for (size_t off = 0; off < bytes; off += PIECE) {
        int len = (int)(bytes - off < PIECE ? bytes - off : PIECE);
        if (rq->n == rq->cap) {
            rq->cap = rq->cap ? 2 * rq->cap : 16;
            MPI_Request *nr = realloc(rq->req, (size_t)rq->cap * sizeof *nr);
            if (!nr)
                rt_fatal("reshard", "out of memory");
            rq->req = nr;
        }
        MPI_Request *r = &rq->req[rq->n++];
        if (recv)
            mpi_check(MPI_Irecv(buf + off, len, MPI_BYTE, peer, 7, reshard_comm, r), "reshard");
        else
            mpi_check(MPI_Isend(buf + off, len, MPI_BYTE, peer, 7, reshard_comm, r), "reshard");
    }
}

void rt_reshard(const rt_tensor *src, const rt_comm *from, rt_tensor *dst, const rt_comm *to,
                int64_t B, int64_t per_sample)
{
    int pi = from->index, ci = to->index;
    if (pi < 0 && ci < 0)
        return;
    int64_t ps = 0, pe = 0, cs = 0, ce = 0;
    size_t es = 4;
    if (pi >= 0) {
        if (!src)
            rt_fatal("reshard", "producer rank has no source tensor");
        rt_shard(B, from->n, pi, &ps, &pe);
        check_shard(src, pe - ps, per_sample, "source");
    }
    if (ci >= 0) {
        if (!dst)
            rt_fatal("reshard", "consumer rank has no destination tensor");
        rt_shard(B, to->n, ci, &cs, &ce);
        check_shard(dst, ce - cs, per_sample, "destination");
        if (pi >= 0 && src->dtype != dst->dtype)
            rt_fatal("reshard", "source and destination dtypes differ");
    }
    reqs rq = {0};
    const size_t row = (size_t)per_sample * es;
    if (ci >= 0) {
        for (int p = 0; p < from->n; p++) {
            int64_t s, e;
            rt_shard(B, from->n, p, &s, &e);
            int64_t lo = s > cs ? s : cs, hi = e < ce ? e : ce;
            if (lo >= hi || from->ranks[p] == rt_opts_g.rank)
                continue;
            post(&rq, true, (char *)dst->data + (size_t)(lo - cs) * row, (size_t)(hi - lo) * row,
                 from->ranks[p]);
        }
    }
    if (pi >= 0) {
        for (int c = 0; c < to->n; c++) {
            int64_t s, e;
            rt_shard(B, to->n, c, &s, &e);
            int64_t lo = s > ps ? s : ps, hi = e < pe ? e : pe;
            if (lo >= hi)
                continue;
            char *from_ptr = (char *)src->data + (size_t)(lo - ps) * row;
            size_t bytes = (size_t)(hi - lo) * row;
            if (to->ranks[c] == rt_opts_g.rank)
                memmove((char *)dst->data + (size_t)(lo - cs) * row, from_ptr, bytes);
            else
                post(&rq, false, from_ptr, bytes, to->ranks[c]);
        }
    }
    int nreq = rq.n;
    MPI_Request *req = rq.req;
    if (nreq > 0)
        mpi_check(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE), "reshard");
    free(req);
}
