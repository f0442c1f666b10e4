/* comm_mpi.c: the CPU backend's transport (device.h) over MPI. All-reduces run on each
 * rank set's MPI communicator (rankset.c makes it); the gradients' all-reduces, started
 * while the backward runs and bucketed, are grad_mpi.c's. A reshard
 * plan (rt_reshard_plan) is carried out with non-blocking point-to-point calls on a
 * private duplicate of MPI_COMM_WORLD, so it never matches other traffic, and local
 * ranges are copied. MPI errors return to us (MPI_ERRORS_RETURN) and become fatal
 * errors that name the rank, the op and the MPI error string. */
#include "../mpi_glue.h"
#include "cpu.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm reshard_comm = MPI_COMM_NULL;

static void mpi_start(void)
{
    rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &reshard_comm), "comm_init");
}

static void mpi_stop(void)
{
    if (reshard_comm != MPI_COMM_NULL)
        MPI_Comm_free(&reshard_comm);
    rt_grad_buckets_free();
}

/* A rank set's MPI communicator (rankset.c) is all this transport needs. */
static void mpi_open(rt_comm *c)
{
    (void)c;
}

static void mpi_close(rt_comm *c)
{
    (void)c;
}

static void allreduce_now(const rt_comm *c, void *data, int64_t n, bool f64, const char *op)
{
    const size_t size = f64 ? 8 : 4;
    for (int64_t off = 0; off < n; off += INT_MAX / 2) {
        int64_t chunk = n - off < INT_MAX / 2 ? n - off : INT_MAX / 2;
        MPI_Request req;
        rt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, (char *)data + (size_t)off * size, (int)chunk,
                                    f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, rt_comm_mpi(c), &req),
                     op);
        rt_mpi_wait(1, &req, op);
    }
}

static void mpi_allreduce(const rt_comm *c, void *data, int64_t n, bool f64, const char *op)
{
    allreduce_now(c, data, n, f64, op);
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
            rt_mpi_check(MPI_Irecv(buf + off, len, MPI_BYTE, peer, 7, reshard_comm, r), "reshard");
        else
            rt_mpi_check(MPI_Isend(buf + off, len, MPI_BYTE, peer, 7, reshard_comm, r), "reshard");
    }
}

static void mpi_exchange(const rt_transfers *t, const void *src, void *dst, size_t row)
{
    reqs rq = {0};
    for (int i = 0; i < t->n; i++) {
        const rt_xfer *x = &t->x[i];
        const size_t bytes = (size_t)x->count * row;
        /* Only a producer has a source and only a consumer a destination. */
        char *from =
            x->dir == RT_XFER_RECV ? NULL : (char *)src + (size_t)(x->first - t->src0) * row;
        char *to = x->dir == RT_XFER_SEND ? NULL : (char *)dst + (size_t)(x->first - t->dst0) * row;
        if (x->dir == RT_XFER_RECV)
            post(&rq, true, to, bytes, x->peer);
        else if (x->dir == RT_XFER_SEND)
            post(&rq, false, from, bytes, x->peer);
        else
            memmove(to, from, bytes);
    }
    if (rq.n > 0)
        rt_mpi_wait(rq.n, rq.req, "reshard");
    free(rq.req);
}

static void mpi_group(bool begin)
{
    (void)begin;
}

const rt_transport rt_net = {
    .start = mpi_start,
    .stop = mpi_stop,
    .open = mpi_open,
    .close = mpi_close,
    .allreduce = mpi_allreduce,
    .exchange = mpi_exchange,
    .group = mpi_group,
    .grad_start = rt_grad_mpi_start,
    .grad_wait = rt_grad_mpi_wait,
    .grad_progress = rt_grad_mpi_progress,
    .grad_wait_one = rt_grad_mpi_wait_one,
};
