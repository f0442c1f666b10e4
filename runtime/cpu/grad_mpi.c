/* grad_mpi.c: the CPU transport's gradient all-reduce, overlapped with the backward pass
 * (device.h's grad_start / grad_wait / grad_progress / grad_wait_one; comm_mpi.c points
 * at them). A gradient that the backward has finished is copied into its rank set's open
 * bucket; when the bucket holds --bucket-mb megabytes (the first bucket of a step at most
 * 1 MB, as PyTorch DDP does, so the last layers' gradients leave early) it goes out as
 * one MPI_Iallreduce on the set's communicator and a new bucket opens. A gradient that
 * reaches the limit by itself is all-reduced where it lies, with no copy in or out (the
 * open bucket's smaller gradients go out first, as they are): fmnist's fc1, 1.6 MB, would
 * otherwise be copied twice a step. Between ops the
 * started all-reduces are tested (OpenMPI advances non-blocking collectives only inside
 * MPI calls); rt_grads_wait sends the open buckets, waits for all of them and copies the
 * sums back. rt_grad_allreduce_wait (where the IR's allreduce says `complete`) does that
 * for the one bucket that holds a gradient. Every member of a set starts the same
 * gradients in the same order, so all members cut the same buckets. With --no-overlap
 * nothing goes out before the wait, which then sends one bucket per set: the all-reduce
 * after the backward. */
#include "../mpi_glue.h"
#include "cpu.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* A gradient in a bucket: where its sum goes back to. */
typedef struct part {
    float *grad;
    int64_t at, n; /* its floats in the bucket */
} part;

typedef struct bucket {
    const rt_comm *c;
    float *buf;
    float *direct;     /* the one gradient all-reduced in place, or NULL: buf holds the parts */
    int64_t fill, cap; /* floats used and allocated */
    part *parts;
    int nparts, capparts;
    MPI_Request *req; /* one per piece of at most INT_MAX / 2 floats (MPI counts are int) */
    int nreq, capreq;
    bool sent;
} bucket;

/* The buckets of the current step, in the order they opened; their buffers are kept
 * for the next steps, which cut the same buckets. */
static bucket *buckets;
static int nbuckets, capbuckets;
/* rt_grad_mpi_wait is waiting on copies of the buckets' requests: the background slices
 * that run inside that wait (comm_mpi.c's polling wait) must not test, and so free, the
 * originals under it. */
static bool waiting;

static void *grow(void *p, int *cap, size_t size)
{
    int n = *cap ? 2 * *cap : 8;
    if (n < *cap)
        rt_fatal("grad_allreduce", "too many gradients");
    void *q = realloc(p, (size_t)n * size);
    if (!q)
        rt_fatal("grad_allreduce", "out of memory");
    *cap = n;
    return q;
}

static void add_part(bucket *b, float *grad, int64_t at, int64_t n)
{
    if (b->nparts == b->capparts)
        b->parts = grow(b->parts, &b->capparts, sizeof *b->parts);
    b->parts[b->nparts++] = (part){grad, at, n};
}

/* Copies a finished bucket's sums back to its gradients (none when it was one
 * gradient all-reduced in place). */
static void copy_back(const bucket *b)
{
    for (int p = 0; p < b->nparts && !b->direct; p++)
        memcpy(b->parts[p].grad, b->buf + b->parts[p].at, (size_t)b->parts[p].n * sizeof(float));
}

static void send_bucket(bucket *b)
{
    b->sent = true;
    for (int64_t off = 0; off < b->fill; off += INT_MAX / 2) {
        int64_t chunk = b->fill - off < INT_MAX / 2 ? b->fill - off : INT_MAX / 2;
        if (b->nreq == b->capreq)
            b->req = grow(b->req, &b->capreq, sizeof *b->req);
        rt_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, (b->direct ? b->direct : b->buf) + off,
                                    (int)chunk, MPI_FLOAT, MPI_SUM, rt_comm_mpi(b->c),
                                    &b->req[b->nreq++]),
                     "grad_allreduce");
    }
}

/* The open (unsent) bucket of set c, or a new one. */
static bucket *open_bucket(const rt_comm *c, bool *first)
{
    *first = true;
    for (int i = 0; i < nbuckets; i++)
        if (buckets[i].c == c) {
            *first = false;
            if (!buckets[i].sent)
                return &buckets[i];
        }
    if (nbuckets == capbuckets) {
        int old = capbuckets;
        buckets = grow(buckets, &capbuckets, sizeof *buckets);
        memset(buckets + old, 0, (size_t)(capbuckets - old) * sizeof *buckets);
    }
    bucket *b = &buckets[nbuckets++];
    b->c = c;
    b->fill = 0;
    b->nparts = b->nreq = 0;
    b->sent = false;
    b->direct = NULL;
    return b;
}

void rt_grad_mpi_start(const rt_comm *c, float *grad, int64_t n)
{
    bool first;
    bucket *b = open_bucket(c, &first);
    if (n > INT64_MAX / 4 - b->fill)
        rt_fatal("grad_allreduce", "gradient of %lld floats is too large", (long long)n);
    double limit = rt_opts_g.bucket_mb * 1e6;
    if (first && limit > 1e6)
        limit = 1e6;
    if (!rt_opts_g.no_overlap && (double)n * sizeof(float) >= limit) {
        if (b->fill > 0) { /* the smaller gradients before it go out as they are */
            send_bucket(b);
            b = open_bucket(c, &first);
        }
        add_part(b, grad, 0, n);
        b->fill = n;
        b->direct = grad;
        send_bucket(b);
        return;
    }
    if (b->fill + n > b->cap) {
        int64_t cap = b->fill + n > 2 * b->cap ? b->fill + n : 2 * b->cap;
        float *nb = realloc(b->buf, (size_t)cap * sizeof(float));
        if (!nb)
            rt_fatal("grad_allreduce", "out of memory for a bucket of %lld floats", (long long)cap);
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->fill, grad, (size_t)n * sizeof(float));
    add_part(b, grad, b->fill, n);
    b->fill += n;
    if (rt_opts_g.no_overlap)
        return;
    if ((double)b->fill * sizeof(float) >= limit)
        send_bucket(b);
}

void rt_grad_mpi_progress(void)
{
    if (waiting)
        return;
    for (int i = 0; i < nbuckets; i++) {
        bucket *b = &buckets[i];
        if (b->sent && b->nreq > 0) {
            int done = 0;
            rt_mpi_check(MPI_Testall(b->nreq, b->req, &done, MPI_STATUSES_IGNORE),
                         "grad_allreduce");
            if (done)
                b->nreq = 0;
        }
    }
}

void rt_grad_mpi_wait(void)
{
    /* Sets in the order of their first bucket: a rank in several sets waits for them
     * all at once, so no order of completion can deadlock. */
    int nreq = 0;
    for (int i = 0; i < nbuckets; i++) {
        if (!buckets[i].sent)
            send_bucket(&buckets[i]);
        nreq += buckets[i].nreq;
    }
    MPI_Request *req = rt_xmalloc((size_t)(nreq ? nreq : 1) * sizeof *req, "grad_allreduce");
    int k = 0;
    for (int i = 0; i < nbuckets; i++)
        for (int r = 0; r < buckets[i].nreq; r++)
            req[k++] = buckets[i].req[r];
    if (nreq > 0) {
        waiting = true;
        rt_mpi_wait(nreq, req, "grad_allreduce");
        waiting = false;
    }
    free(req);
    for (int i = 0; i < nbuckets; i++) {
        bucket *b = &buckets[i];
        copy_back(b);
        b->fill = 0;
        b->nparts = b->nreq = 0;
        b->sent = false;
        b->c = NULL;
        b->direct = NULL;
    }
    nbuckets = 0;
}

void rt_grad_mpi_wait_one(const rt_comm *c, float *grad)
{
    bucket *b = NULL;
    for (int i = 0; i < nbuckets && !b; i++)
        for (int p = 0; p < buckets[i].nparts && buckets[i].c == c; p++)
            if (buckets[i].parts[p].grad == grad) {
                b = &buckets[i];
                break;
            }
    if (!b) /* complete already, or never started on this rank */
        return;
    if (!b->sent)
        send_bucket(b);
    if (b->nreq > 0) {
        waiting = true;
        rt_mpi_wait(b->nreq, b->req, "grad_allreduce");
        waiting = false;
        b->nreq = 0;
    }
    /* The bucket stays in the step's list, sent and empty: the set's next gradients
     * open a new one, as its peers' do, and rt_grad_mpi_wait copies nothing twice. */
    copy_back(b);
    b->nparts = 0;
}

void rt_grad_buckets_free(void)
{
    for (int i = 0; i < capbuckets; i++) {
        free(buckets[i].buf);
        free(buckets[i].parts);
        free(buckets[i].req);
    }
    free(buckets);
    buckets = NULL;
    nbuckets = capbuckets = 0;
}
