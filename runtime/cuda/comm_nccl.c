/* comm_nccl.c: communication of the CUDA backend. Every rank set of the plan gets an
 * MPI communicator (MPI_Comm_split, as the CPU backend) and, when it has more than one
 * rank, an NCCL communicator bootstrapped by broadcasting an ncclUniqueId over that MPI
 * communicator. Gradient all-reduce is ncclAllReduce on the set's communicator;
 * resharding moves each overlapping sample range with ncclSend/ncclRecv on a
 * world-wide NCCL communicator inside one group call (local ranges are device copies).
 * All of it is enqueued on the foreground stream. NCCL communicators are created
 * non-blocking-safe: rt_nccl_poll checks their asynchronous errors while the host
 * waits for the stream, and on an error aborts every communicator and ends the job
 * with a message naming the rank, the op and NCCL's error string; a peer that dies
 * without an NCCL error is caught by the watchdog (core.c), so every rank exits within
 * the step timeout. The loss sum and barriers are host values and stay on MPI.
 * Built with BURSTRT_NO_NCCL (the single-GPU check build, scripts/gpu-check), only
 * one-rank worlds are accepted and no NCCL symbol is referenced. */
#include "cuda_internal.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef BURSTRT_NO_NCCL
#include <nccl.h>
#endif

struct rt_comm {
    int n;
    int *ranks;    /* world ranks, in set order */
    int index;     /* this rank's index in ranks, or -1 */
    MPI_Comm comm; /* MPI_COMM_NULL on non-members */
#ifndef BURSTRT_NO_NCCL
    ncclComm_t nccl; /* NULL on non-members and one-rank sets */
#endif
    rt_comm *next;
};

static rt_comm *all_comms;
#ifndef BURSTRT_NO_NCCL
static ncclComm_t world_nccl; /* resharding between any two ranks */
#endif

static void mpi_check(int err, const char *op)
{
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err, msg, &len);
        rt_fatal(op, "MPI error: %s", msg);
    }
}

#ifndef BURSTRT_NO_NCCL
static void abort_all(void)
{
    for (rt_comm *c = all_comms; c; c = c->next)
        if (c->nccl) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
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
    mpi_check(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, mc), op);
    ncclComm_t c;
    NCCL(ncclCommInitRank(&c, n, id, index), op);
    return c;
}
#endif

void rt_nccl_poll(const char *op)
{
#ifndef BURSTRT_NO_NCCL
    for (rt_comm *c = all_comms; c; c = c->next)
        poll_one(c->nccl, op);
    poll_one(world_nccl, op);
#else
    (void)op;
#endif
}

void rt_nccl_group_begin(void)
{
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclGroupStart(), "allreduce");
#endif
}

void rt_nccl_group_end(const char *op)
{
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclGroupEnd(), op);
#else
    (void)op;
#endif
}

void rt_comm_world_init(void)
{
    rt_cuda_ensure();
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
#ifndef BURSTRT_NO_NCCL
    if (c->index >= 0 && n > 1)
        c->nccl = nccl_new(c->comm, n, c->index, "comm_new");
#endif
    c->next = all_comms;
    all_comms = c;
    return c;
}

void rt_comm_free_all(void)
{
    while (all_comms) {
        rt_comm *c = all_comms;
        all_comms = c->next;
#ifndef BURSTRT_NO_NCCL
        if (c->nccl)
            ncclCommDestroy(c->nccl);
#endif
        if (c->comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->comm);
        free(c->ranks);
        free(c);
    }
#ifndef BURSTRT_NO_NCCL
    if (world_nccl)
        ncclCommDestroy(world_nccl);
    world_nccl = NULL;
#endif
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
    rt_cuda_not_capturing("allreduce");
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclAllReduce(data, data, (size_t)n, ncclFloat32, ncclSum, c->nccl, rt_cuda_g.cur),
         "allreduce");
#else
    (void)data;
    rt_fatal("allreduce", "a %d-rank set in a build without NCCL", c->n);
#endif
}

void rt_cuda_allreduce_f64(const rt_comm *c, double *data, int64_t n, const char *op)
{
    if (!c || c->index < 0 || c->n == 1 || n == 0)
        return;
    rt_cuda_not_capturing(op);
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclAllReduce(data, data, (size_t)n, ncclFloat64, ncclSum, c->nccl, rt_cuda_g.cur), op);
#else
    (void)data;
    rt_fatal(op, "a %d-rank set in a build without NCCL", c->n);
#endif
}

/* Host doubles, as internal.h promises (the CPU backend's SyncBN uses it). */
void rt_allreduce_sum_f64(const rt_comm *c, double *data, int64_t n)
{
    if (!c || c->index < 0 || c->n == 1 || n == 0)
        return;
    if (n > INT_MAX)
        rt_fatal("allreduce", "%lld doubles exceed the MPI count limit", (long long)n);
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
    rt_cuda_sync("barrier");
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

void rt_reshard(const rt_tensor *src, const rt_comm *from, rt_tensor *dst, const rt_comm *to,
                int64_t B, int64_t per_sample)
{
    int pi = from->index, ci = to->index;
    if (pi < 0 && ci < 0)
        return;
    rt_cuda_not_capturing("reshard");
    int64_t ps = 0, pe = 0, cs = 0, ce = 0;
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
    const size_t row = (size_t)per_sample * 4;
    bool remote = false;
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclGroupStart(), "reshard");
#endif
    if (ci >= 0) {
        for (int p = 0; p < from->n; p++) {
            int64_t s, e;
            rt_shard(B, from->n, p, &s, &e);
            int64_t lo = s > cs ? s : cs, hi = e < ce ? e : ce;
            if (lo >= hi || from->ranks[p] == rt_opts_g.rank)
                continue;
            remote = true;
#ifndef BURSTRT_NO_NCCL
            NCCL(ncclRecv((char *)dst->data + (size_t)(lo - cs) * row, (size_t)(hi - lo) * row,
                          ncclChar, from->ranks[p], world_nccl, rt_cuda_g.cur),
                 "reshard");
#endif
        }
    }
    if (pi >= 0) {
        for (int c = 0; c < to->n; c++) {
            int64_t s, e;
            rt_shard(B, to->n, c, &s, &e);
            int64_t lo = s > ps ? s : ps, hi = e < pe ? e : pe;
            if (lo >= hi)
                continue;
            const char *from_ptr = (const char *)src->data + (size_t)(lo - ps) * row;
            size_t bytes = (size_t)(hi - lo) * row;
            if (to->ranks[c] == rt_opts_g.rank) {
                RT_CUDA(cudaMemcpyAsync((char *)dst->data + (size_t)(lo - cs) * row, from_ptr,
                                        bytes, cudaMemcpyDeviceToDevice, rt_cuda_g.cur),
                        "reshard");
                continue;
            }
            remote = true;
#ifndef BURSTRT_NO_NCCL
            NCCL(ncclSend(from_ptr, bytes, ncclChar, to->ranks[c], world_nccl, rt_cuda_g.cur),
                 "reshard");
#endif
        }
    }
#ifndef BURSTRT_NO_NCCL
    NCCL(ncclGroupEnd(), "reshard");
    (void)remote;
#else
    if (remote)
        rt_fatal("reshard", "a transfer between ranks in a build without NCCL");
#endif
}
