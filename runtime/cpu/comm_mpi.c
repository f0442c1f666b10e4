/* comm_mpi.c: the CPU backend's transport (device.h) over MPI. All-reduces run on each
 * rank set's MPI communicator (rankset.c makes it); the gradients' all-reduces, started
 * while the backward runs and bucketed, are grad_mpi.c's. A reshard
 * plan (rt_reshard_plan) is carried out with non-blocking point-to-point calls on a
 * private duplicate of MPI_COMM_WORLD, so it never matches other traffic, and local
 * ranges are copied; the calls are posted when the reshard starts and waited for when it
 * is waited for (rt_reshard_start / rt_reshard_wait; rt_reshard does both at once), with
 * the reshard's own tag, so reshards in flight together never match each other's
 * messages whatever order each rank starts them in. MPI errors return to us (MPI_ERRORS_RETURN) and become fatal
 * errors that name the rank, the op and the MPI error string. */
#include "../mpi_glue.h"
#include "cpu.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm reshard_comm = MPI_COMM_NULL;
static int tag_ub = 32767; /* the least MPI_TAG_UB the standard allows */

static void mpi_start(void)
{
    rt_mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &reshard_comm), "comm_init");
    int *ub = NULL, flag = 0;
    rt_mpi_check(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag), "comm_init");
    if (flag && ub)
        tag_ub = *ub;
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

/* The outstanding requests of one started reshard, on the list of those in flight (which
 * progress tests between ops: Open MPI moves a message only inside MPI calls, and a
 * rank that computes while its peer waits would otherwise hold the peer up). Messages over
 * 1 GiB are split into 1 GiB pieces (MPI counts are int); pieces of one pair and one tag
 * match in order (MPI is non-overtaking), and each reshard in flight has its own tag. */
typedef struct flight {
    MPI_Request *req;
    int n, cap;
    bool done; /* every request completed (they are MPI_REQUEST_NULL now) */
    struct flight *next;
} flight;

static flight *in_flight;

#define PIECE ((size_t)1 << 30)

static void post(flight *f, bool recv, char *buf, size_t bytes, int peer, int tag)
{
    for (size_t off = 0; off < bytes; off += PIECE) {
        int len = (int)(bytes - off < PIECE ? bytes - off : PIECE);
        if (f->n == f->cap) {
            f->cap = f->cap ? 2 * f->cap : 16;
            MPI_Request *nr = realloc(f->req, (size_t)f->cap * sizeof *nr);
            if (!nr)
                rt_fatal("reshard", "out of memory");
            f->req = nr;
        }
        MPI_Request *r = &f->req[f->n++];
        if (recv)
            rt_mpi_check(MPI_Irecv(buf + off, len, MPI_BYTE, peer, tag, reshard_comm, r),
                         "reshard");
        else
            rt_mpi_check(MPI_Isend(buf + off, len, MPI_BYTE, peer, tag, reshard_comm, r),
                         "reshard");
    }
}

/* Receives are posted first, then sends; local ranges are copied at once (the source is
 * written and the destination not yet read). */
static void *mpi_exchange_start(const rt_transfers *t, const void *src, void *dst, size_t row,
                                int tag)
{
    if (tag < 0 || tag > tag_ub)
        rt_fatal("reshard", "tag %d is beyond this MPI's largest tag %d", tag, tag_ub);
    flight *f = rt_xcalloc(1, sizeof *f, "reshard");
    for (int i = 0; i < t->n; i++) {
        const rt_xfer *x = &t->x[i];
        const size_t bytes = (size_t)x->count * row;
        /* Only a producer has a source and only a consumer a destination. */
        char *from =
            x->dir == RT_XFER_RECV ? NULL : (char *)src + (size_t)(x->first - t->src0) * row;
        char *to = x->dir == RT_XFER_SEND ? NULL : (char *)dst + (size_t)(x->first - t->dst0) * row;
        if (x->dir == RT_XFER_RECV)
            post(f, true, to, bytes, x->peer, tag);
        else if (x->dir == RT_XFER_SEND)
            post(f, false, from, bytes, x->peer, tag);
        else
            memmove(to, from, bytes);
    }
    if (f->n == 0) {
        free(f);
        return NULL;
    }
    f->next = in_flight;
    in_flight = f;
    return f;
}

static void mpi_exchange_wait(void *handle)
{
    flight *f = handle;
    if (!f->done)
        rt_mpi_wait(f->n, f->req, "reshard");
    flight **p = &in_flight;
    while (*p != f)
        p = &(*p)->next;
    *p = f->next;
    free(f->req);
    free(f);
}

/* Between ops: the started reshards' requests and the gradients' all-reduces are tested.
 * A background slice run inside rt_mpi_wait comes here too; testing the requests that
 * wait polls, in place, only completes them sooner (they become MPI_REQUEST_NULL). */
static void mpi_progress(void)
{
    for (flight *f = in_flight; f; f = f->next)
        if (!f->done) {
            int done = 0;
            rt_mpi_check(MPI_Testall(f->n, f->req, &done, MPI_STATUSES_IGNORE), "reshard");
            f->done = done;
        }
    rt_grad_mpi_progress();
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
    .exchange_start = mpi_exchange_start,
    .exchange_wait = mpi_exchange_wait,
    .group = mpi_group,
    .grad_start = rt_grad_mpi_start,
    .grad_wait = rt_grad_mpi_wait,
    .grad_wait_one = rt_grad_mpi_wait_one,
    .progress = mpi_progress,
};
