/* comm_nccl.c: the CUDA backend's transport (device.h) over NCCL. Every rank set of more
 * than one rank gets an NCCL communicator, bootstrapped by broadcasting an ncclUniqueId
 * over the set's MPI communicator (rankset.c makes it); a world-wide one carries
 * resharding. A reshard plan (rt_reshard_plan) becomes ncclSend/ncclRecv in one group,
 * local ranges device copies: a blocking rt_reshard's on the current stream, as are
 * blocking all-reduces (rt_allreduce_sum); a split-phase one's (rt_reshard_start) on the
 * communication stream below, after an event on the compute stream, and its wait makes
 * the compute stream wait for an event after it. A gradient
 * all-reduce started during the backward (grad_start) goes to a dedicated
 * communication stream instead, after an event that marks the gradient written on the
 * compute stream, so it runs while the backward goes on; an event recorded after it
 * on the communication stream is what the compute stream waits for where the gradient
 * must be complete (grad_wait_one, the IR's `complete`) or before the optimizer
 * (grad_wait, all of them). The host never blocks on it: the stream order carries the
 * dependency. Every rank starts the same all-reduces in the same order, so each
 * communicator sees its collectives in one order on every rank. nccl_poll checks the communicators' asynchronous errors while
 * the host waits for the stream and, on an error, aborts every communicator and ends the
 * job with a message naming the rank, the op and NCCL's error string; a peer that dies
 * without an NCCL error is caught by the watchdog, so every rank exits within the step
 * timeout. Built with BURSTRT_NO_NCCL (the single-GPU check build, scripts/gpu-check),
 * only one-rank worlds are accepted and no NCCL symbol is referenced. */
#include "../mpi_glue.h"
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef BURSTRT_NO_NCCL
#include <nccl.h>
#endif

#ifndef BURSTRT_NO_NCCL
/* The world's communicator; each set's is its c->transport. */
static ncclComm_t world_nccl;

static void abort_all(void)
{
    for (rt_comm *c = rt_comm_list(); c; c = c->next)
        if (c->transport) {
            ncclCommAbort((ncclComm_t)c->transport);
            c->transport = NULL;
        }
    if (world_nccl) {
        ncclCommAbort(world_nccl);
        world_nccl = NULL;
    }
}

static void nccl_check(ncclResult_t r, const char *op, const char *what)
{
    if (r != ncclSuccess && r != ncclInProgress) {
        const char *last = ncclGetLastError(NULL);
        /* Abort first: the other ranks' NCCL kernels then fail instead of waiting. */
        abort_all();
        rt_fatal(op, "NCCL error %s in %s%s%s", ncclGetErrorString(r), what,
                 last && *last ? ": " : "", last ? last : "");
    }
}
#define NCCL(call, op) nccl_check((call), (op), #call)

static void poll_one(ncclComm_t c, const char *op)
{
    ncclResult_t async = ncclSuccess;
    if (c && ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress)
        nccl_check(async, op, "an asynchronous NCCL operation (a peer rank failed?)");
}

/* A new NCCL communicator for `n` ranks, where this one is `index`, over `mc`. */
static ncclComm_t nccl_new(MPI_Comm mc, int n, int index, const char *op)
{
    ncclUniqueId id;
    if (index == 0)
        NCCL(ncclGetUniqueId(&id), op);
    rt_mpi_check(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc), op);
    ncclComm_t c;
    NCCL(ncclCommInitRank(&c, n, id, index), op);
    return c;
}
#endif

/* Polls every communicator's asynchronous error; fatal (after ncclCommAbort on all) on the
 * first. rt_cuda_sync runs it while it waits (a hook nccl_start registers). */
static void nccl_poll(const char *op)
{
#ifndef BURSTRT_NO_NCCL
    for (rt_comm *c = rt_comm_list(); c; c = c->next)
        poll_one((ncclComm_t)c->transport, op);
    poll_one(world_nccl, op);
#else
    (void)op;
#endif
}

static void nccl_start(void)
{
    rt_cuda_ensure();
    rt_cuda_on_wait(nccl_poll);
#ifndef BURSTRT_NO_NCCL
    if (rt_opts_g.world_size > 1)
        world_nccl = nccl_new(MPI_COMM_WORLD, rt_opts_g.world_size, rt_opts_g.rank, "comm_init");
#else
    if (rt_opts_g.world_size > 1)
        rt_fatal("comm_init",
                 "this build has no NCCL (BURSTRT_NO_NCCL) and runs one rank, "
                 "launched with %d",
                 rt_opts_g.world_size);
#endif
}

#ifndef BURSTRT_NO_NCCL
/* A gradient all-reduce started this step, and the event after it on comm_stream. */
typedef struct started {
    const rt_comm *c;
    const float *grad;
    cudaEvent_t done;
} started;

static cudaStream_t comm_stream; /* the started all-reduces, in the order started */
static cudaEvent_t written;      /* the compute stream has written the gradient */
static started *starts;          /* this step's; their events are kept for the next */
static int nstarts, capstarts;

static cudaEvent_t new_event(const char *op)
{
    cudaEvent_t e;
    RT_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), op);
    return e;
}

/* The communication stream (made on first use), after the compute stream's work so far:
 * what goes on it next reads what the compute stream has written. */
static cudaStream_t comm_after_compute(const char *op)
{
    if (!comm_stream) {
        int lo, hi;
        RT_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi), op);
        RT_CUDA(cudaStreamCreateWithPriority(&comm_stream, cudaStreamNonBlocking, hi), op);
        written = new_event(op);
    }
    RT_CUDA(cudaEventRecord(written, rt_cuda_g.cur), op);
    RT_CUDA(cudaStreamWaitEvent(comm_stream, written, 0), op);
    return comm_stream;
}

static void grad_start(const rt_comm *c, float *grad, int64_t n)
{
    const char *op = "grad_allreduce";
    rt_cuda_not_capturing(op);
    if (nstarts == capstarts) {
        int cap = capstarts ? 2 * capstarts : 16;
        started *ns = realloc(starts, (size_t)cap * sizeof *ns);
        if (!ns)
            rt_fatal(op, "out of memory");
        for (int i = capstarts; i < cap; i++)
            ns[i].done = new_event(op);
        starts = ns;
        capstarts = cap;
    }
    started *s = &starts[nstarts++];
    s->c = c;
    s->grad = grad;
    NCCL(ncclAllReduce(grad, grad, (size_t)n, ncclFloat32, ncclSum, (ncclComm_t)c->transport,
                       comm_after_compute(op)),
         op);
    RT_CUDA(cudaEventRecord(s->done, comm_stream), op);
}

static void grad_wait_one(const rt_comm *c, float *grad)
{
    for (int i = nstarts - 1; i >= 0; i--)
        if (starts[i].c == c && starts[i].grad == grad) {
            RT_CUDA(cudaStreamWaitEvent(rt_cuda_g.cur, starts[i].done, 0), "grad_allreduce");
            return;
        }
}

static void grad_wait(void)
{
    /* comm_stream runs them in order: the last one's event covers all. */
    if (nstarts > 0)
        RT_CUDA(cudaStreamWaitEvent(rt_cuda_g.cur, starts[nstarts - 1].done, 0), "grad_allreduce");
    nstarts = 0;
}

/* A started reshard: the event after its transfers on comm_stream. Handles are kept on
 * a free list with their events for the next steps' reshards. */
typedef struct flight {
    cudaEvent_t done;
    struct flight *next;
} flight;

static flight *spare;

static void flights_free(void)
{
    while (spare) {
        flight *f = spare;
        spare = f->next;
        cudaEventDestroy(f->done);
        free(f);
    }
}

static void grads_free(void)
{
    if (comm_stream) {
        cudaStreamSynchronize(comm_stream);
        cudaStreamDestroy(comm_stream);
        cudaEventDestroy(written);
    }
    for (int i = 0; i < capstarts; i++)
        cudaEventDestroy(starts[i].done);
    free(starts);
    starts = NULL;
    comm_stream = NULL;
    nstarts = capstarts = 0;
    flights_free();
}
#endif

static void nccl_stop(void)
{
#ifndef BURSTRT_NO_NCCL
    grads_free();
    if (world_nccl)
        ncclCommDestroy(world_nccl);
    world_nccl = NULL;
#endif
}

static void nccl_open(rt_comm *c)
{
#ifndef BURSTRT_NO_NCCL
    if (c->index >= 0 && c->n > 1 && rt_mpi_running())
        c->transport = nccl_new(rt_comm_mpi(c), c->n, c->index, "comm_new");
#else
    (void)c;
#endif
}

static void nccl_close(rt_comm *c)
{
#ifndef BURSTRT_NO_NCCL
    if (c->transport)
        ncclCommDestroy((ncclComm_t)c->transport);
    c->transport = NULL;
#else
    (void)c;
#endif
}

static void nccl_allreduce(const rt_comm *c, void *data, int64_t n, bool f64, const char *op)
{
    rt_cuda_not_capturing(op);
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclAllReduce(data, data, (size_t)n, f64 ? ncclFloat64 : ncclFloat32, ncclSum,
                       (ncclComm_t)c->transport, rt_cuda_g.cur),
         op);
#else
    (void)data;
    (void)n;
    (void)f64;
    rt_fatal(op, "a %d-rank set in a build without NCCL", c->n);
#endif
}

/* A reshard plan's sends and receives as one NCCL group, and its local ranges as device
 * copies, on `stream`. */
static void enqueue_exchange(const rt_transfers *t, const void *src, void *dst, size_t row,
                             cudaStream_t stream)
{
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclGroupStart(), "reshard");
#endif
    for (int i = 0; i < t->n; i++) {
        const rt_xfer *x = &t->x[i];
        const size_t bytes = (size_t)x->count * row;
        /* Only a producer has a source and only a consumer a destination. */
        const char *from =
            x->dir == RT_XFER_RECV ? NULL : (const char *)src + (size_t)(x->first - t->src0) * row;
        char *to = x->dir == RT_XFER_SEND ? NULL : (char *)dst + (size_t)(x->first - t->dst0) * row;
        if (x->dir == RT_XFER_COPY) {
            RT_CUDA(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream), "reshard");
            continue;
        }
#ifndef BURSTRT_NO_NCCL
        if (x->dir == RT_XFER_RECV)
            NCCL(ncclRecv(to, bytes, ncclChar, x->peer, world_nccl, stream), "reshard");
        else
            NCCL(ncclSend(from, bytes, ncclChar, x->peer, world_nccl, stream), "reshard");
#else
        rt_fatal("reshard", "a transfer between ranks in a build without NCCL");
#endif
    }
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclGroupEnd(), "reshard");
#endif
}

/* The transfers go to the communication stream, after the compute stream has written
 * the source; the wait makes the compute stream wait for them (an event), so the host
 * never blocks and kernels queued in between overlap the transfers. A blocking reshard
 * (tag 0) stays on the compute stream, in its order. NCCL matches a pair's sends and
 * receives in the order they are enqueued, hence the rule of burstrt.h: two ranks start
 * the reshards between them in the same order. Without NCCL (one rank) there are only
 * copies, on the compute stream. */
static void *nccl_exchange_start(const rt_transfers *t, const void *src, void *dst, size_t row,
                                 int tag)
{
    rt_cuda_not_capturing("reshard");
#ifndef BURSTRT_NO_NCCL
    if (tag == 0 || t->n == 0) {
        enqueue_exchange(t, src, dst, row, rt_cuda_g.cur);
        return NULL;
    }
    enqueue_exchange(t, src, dst, row, comm_after_compute("reshard"));
    flight *f = spare;
    if (f) {
        spare = f->next;
    } else {
        f = rt_xcalloc(1, sizeof *f, "reshard");
        f->done = new_event("reshard");
    }
    RT_CUDA(cudaEventRecord(f->done, comm_stream), "reshard");
    return f;
#else
    (void)tag;
    enqueue_exchange(t, src, dst, row, rt_cuda_g.cur);
    return NULL;
#endif
}

static void nccl_exchange_wait(void *handle)
{
#ifndef BURSTRT_NO_NCCL
    flight *f = handle;
    RT_CUDA(cudaStreamWaitEvent(rt_cuda_g.cur, f->done, 0), "reshard");
    f->next = spare;
    spare = f;
#else
    (void)handle;
#endif
}

static void nccl_group(bool begin)
{
#ifndef BURSTRT_NO_NCCL
    if (begin)
        NCCL(ncclGroupStart(), "allreduce");
    else
        NCCL(ncclGroupEnd(), "allreduce");
#else
    (void)begin;
#endif
}

const rt_transport rt_net = {
    .start = nccl_start,
    .stop = nccl_stop,
    .open = nccl_open,
    .close = nccl_close,
    .allreduce = nccl_allreduce,
    .exchange_start = nccl_exchange_start,
    .exchange_wait = nccl_exchange_wait,
    .group = nccl_group,
#ifndef BURSTRT_NO_NCCL
    .grad_start = grad_start,
    .grad_wait = grad_wait,
    .grad_wait_one = grad_wait_one,
#endif
};
