/* test_comm.c (mpirun -np 4): the shard rule, the common option parser (and the default
 * thread count: the node's ranks together take no more threads than it has CPUs), all-reduce
 * within rank sets, the world sum, resharding between rank sets of every kind (grow,
 * shrink, disjoint, overlapping, unordered, i32), checking that every consumer ends with
 * exactly the samples of its shard, split-phase reshards in flight together in orders that
 * differ by rank, and SyncBN over rank sets (uneven and empty shards, a
 * large offset) against the reference batchnorm of the whole batch on one rank, and the
 * wait for one started gradient all-reduce. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "check.h"
#include "cpu/ref.h"

#include <mpi.h>
#include <sched.h>

static rt_pool *P;

static float value(int64_t sample, int64_t e)
{
    return (float)(sample * 1000 + e);
}

static void check_reshard(int nf, const int *from_ranks, int nt, const int *to_ranks, int64_t B,
                          int64_t per, rt_dtype dt)
{
    rt_comm *from = rt_comm_new(nf, from_ranks), *to = rt_comm_new(nt, to_ranks);
    int64_t ps, pe, cs, ce;
    rt_comm_shard(from, B, &ps, &pe);
    rt_comm_shard(to, B, &cs, &ce);
    rt_tensor *src = NULL, *dst = NULL;
    if (rt_comm_member(from)) {
        src = rt_tensor_new(P, dt, 2, (int64_t[]){pe - ps, per});
        for (int64_t i = 0; i < pe - ps; i++)
            for (int64_t e = 0; e < per; e++) {
                if (dt == RT_F32)
                    rt_f32(src)[i * per + e] = value(ps + i, e);
                else
                    rt_i32(src)[i * per + e] = (int32_t)value(ps + i, e);
            }
    }
    if (rt_comm_member(to)) {
        dst = rt_tensor_new(P, dt, 2, (int64_t[]){ce - cs, per});
        for (int64_t i = 0; i < dst->numel; i++)
            rt_f32(dst)[i] = -1.0f;
    }
    rt_reshard(src, from, dst, to, B, per);
    if (dst) {
        int64_t bad = 0;
        for (int64_t i = 0; i < ce - cs; i++)
            for (int64_t e = 0; e < per; e++) {
                float got =
                    dt == RT_F32 ? rt_f32(dst)[i * per + e] : (float)rt_i32(dst)[i * per + e];
                bad += got != value(cs + i, e);
            }
        CHECK(bad == 0, "rank %d: reshard %d->%d ranks, B=%lld: %lld wrong elements", rt_rank(), nf,
              nt, (long long)B, (long long)bad);
    }
}

/* Split-phase reshards: several in flight at once between the same ranks (one large
 * enough to go by rendezvous, one from rank 2 alone, one with no transfer for some
 * ranks), started in an order that differs by rank and waited for in another, with a
 * blocking reshard between the same ranks while they are in flight, twice (ids are
 * reused once waited for). Every consumer must end with exactly its samples. */
#define NSPLIT 5
static float split_value(int k, int64_t sample, int64_t e, int64_t per)
{
    return (float)((sample * per + e) * NSPLIT + k);
}

static void check_split(void)
{
    static const struct {
        int nf, from[4], nt, to[4];
        int64_t B, per;
    } r[NSPLIT] = {
        {4, {0, 1, 2, 3}, 2, {2, 3}, 12, 3},      /* shrink onto {2,3} */
        {2, {0, 1}, 2, {2, 3}, 16, 65536},        /* disjoint, 2 MiB per rank */
        {1, {2}, 4, {3, 1, 0, 2}, 9, 5},          /* grow from one, unordered */
        {2, {3, 1}, 3, {0, 1, 2}, 7, 2},          /* overlapping */
        {4, {0, 1, 2, 3}, 4, {1, 0, 3, 2}, 8, 7}, /* pairs swap */
    };
    rt_comm *from[NSPLIT], *to[NSPLIT];
    rt_tensor *src[NSPLIT], *dst[NSPLIT];
    int64_t cs[NSPLIT], ce[NSPLIT];
    for (int k = 0; k < NSPLIT; k++) {
        from[k] = rt_comm_new(r[k].nf, r[k].from);
        to[k] = rt_comm_new(r[k].nt, r[k].to);
        int64_t ps, pe;
        rt_comm_shard(from[k], r[k].B, &ps, &pe);
        rt_comm_shard(to[k], r[k].B, &cs[k], &ce[k]);
        src[k] = dst[k] = NULL;
        if (rt_comm_member(from[k])) {
            src[k] = rt_tensor_new(P, RT_F32, 2, (int64_t[]){pe - ps, r[k].per});
            for (int64_t i = 0; i < pe - ps; i++)
                for (int64_t e = 0; e < r[k].per; e++)
                    rt_f32(src[k])[i * r[k].per + e] = split_value(k, ps + i, e, r[k].per);
        }
        if (rt_comm_member(to[k]))
            dst[k] = rt_tensor_new(P, RT_F32, 2, (int64_t[]){ce[k] - cs[k], r[k].per});
    }
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < NSPLIT; k++)
            if (dst[k])
                for (int64_t i = 0; i < dst[k]->numel; i++)
                    rt_f32(dst[k])[i] = -1.0f;
        const int me = rt_rank();
        for (int k = 0; k < NSPLIT; k++) {
            int s = (k * (me + 1) + round) % NSPLIT; /* 0,1,2,3,4 on rank 0; 0,2,4,1,3 ... */
            rt_reshard_start(s + 10 * round, src[s], from[s], dst[s], to[s], r[s].B, r[s].per);
        }
        /* A blocking reshard between the same pairs while those are in flight. */
        check_reshard(2, (int[]){0, 1}, 2, (int[]){1, 0}, 6, 3, RT_F32);
        for (int k = 0; k < NSPLIT; k++) {
            int s = (NSPLIT - 1 - k + me) % NSPLIT;
            rt_reshard_wait(s + 10 * round);
        }
        for (int k = 0; k < NSPLIT; k++) {
            if (!dst[k])
                continue;
            int64_t bad = 0, per = r[k].per;
            for (int64_t i = 0; i < ce[k] - cs[k]; i++)
                for (int64_t e = 0; e < per; e++)
                    bad += rt_f32(dst[k])[i * per + e] != split_value(k, cs[k] + i, e, per);
            CHECK(bad == 0, "rank %d: split reshard %d (round %d): %lld wrong elements", me, k,
                  round, (long long)bad);
        }
    }
}

/* Largest |a - b| / (1e-5 + 1e-4 |b|) over n values. */
static double worst(const float *a, const float *b, int64_t n)
{
    double w = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs((double)a[i] - b[i]) / (1e-5 + 1e-4 * fabs(b[i]));
        if (!(r <= w))
            w = r;
    }
    return w;
}

/* SyncBN of a batch of B samples over the k ranks of `ranks`: every member's output and
 * input gradient equal its rows of batchnorm of the whole batch on one rank, its saved and
 * running statistics equal the reference's (cpu/ref.h, double sums), and the parameter
 * gradients summed over the set equal the whole batch's. (The output is compared with the
 * one-rank kernel, test_onednn compares that with a double computation: the reference's
 * x*a + b form loses digits to cancellation at a large offset.) */
static void check_syncbn(int k, const int *ranks, int64_t B, float offset)
{
    const int64_t C = 3, H = 5, W = 4, per = C * H * W;
    rt_comm *c = rt_comm_new(k, ranks);
    int64_t s0, s1;
    rt_comm_shard(c, B, &s0, &s1);
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){B, C, H, W});
    rt_tensor *dy = rt_tensor_new(P, RT_F32, 4, (int64_t[]){B, C, H, W});
    for (int64_t i = 0; i < x->numel; i++) {
        rt_f32(x)[i] = offset + (float)((i * 7919) % 101) / 37.0f;
        rt_f32(dy)[i] = (float)((i * 104729) % 89) / 50.0f - 0.8f;
    }
    rt_tensor *g = rt_tensor_new(P, RT_F32, 1, &C), *b = rt_tensor_new(P, RT_F32, 1, &C);
    for (int64_t i = 0; i < C; i++) {
        rt_f32(g)[i] = 1.0f + 0.25f * (float)i;
        rt_f32(b)[i] = 0.5f - 0.5f * (float)i;
    }
    /* The reference: one rank, the whole batch. */
    rt_tensor *y_ref = rt_tensor_new(P, RT_F32, 4, x->shape),
              *dx_ref = rt_tensor_new(P, RT_F32, 4, x->shape);
    rt_tensor *rm_ref = rt_tensor_new(P, RT_F32, 1, &C), *rv_ref = rt_tensor_new(P, RT_F32, 1, &C);
    rt_tensor *saved_ref = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2 * C});
    rt_tensor *dg_ref = rt_tensor_new(P, RT_F32, 1, &C), *db_ref = rt_tensor_new(P, RT_F32, 1, &C);
    rt_init_const(rv_ref, 1.0f);
    rt_ref_batchnorm2d_fwd(NULL, x, g, b, rm_ref, rv_ref, 0.1f, 1e-5f, saved_ref, y_ref);
    rt_ref_batchnorm2d_bwd(NULL, x, g, saved_ref, dy, dx_ref, dg_ref, db_ref);
    rt_tensor *rm1 = rt_tensor_new(P, RT_F32, 1, &C), *rv1 = rt_tensor_new(P, RT_F32, 1, &C);
    rt_tensor *saved1 = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2 * C});
    rt_batchnorm2d_fwd(x, g, b, rm1, rv1, 0.1f, 1e-5f, saved1, y_ref);
    rt_batchnorm2d_bwd(x, g, saved1, dy, dx_ref, NULL, NULL);
    float dg[3] = {0}, db[3] = {0};
    if (rt_comm_member(c)) {
        rt_tensor *xs = rt_tensor_slice(P, x, s0, s1), *dys = rt_tensor_slice(P, dy, s0, s1);
        rt_tensor *ys = rt_tensor_new(P, RT_F32, 4, xs->shape),
                  *dxs = rt_tensor_new(P, RT_F32, 4, xs->shape);
        rt_tensor *rm = rt_tensor_new(P, RT_F32, 1, &C), *rv = rt_tensor_new(P, RT_F32, 1, &C);
        rt_tensor *saved = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2 * C});
        rt_tensor *tdg = rt_tensor_new(P, RT_F32, 1, &C), *tdb = rt_tensor_new(P, RT_F32, 1, &C);
        rt_init_const(rv, 1.0f);
        rt_batchnorm2d_sync_fwd(c, xs, g, b, rm, rv, 0.1f, 1e-5f, saved, ys);
        rt_batchnorm2d_sync_bwd(c, xs, g, saved, dys, dxs, tdg, tdb);
        const double wy = worst(rt_f32(ys), rt_f32(y_ref) + s0 * per, ys->numel);
        const double wdx = worst(rt_f32(dxs), rt_f32(dx_ref) + s0 * per, dxs->numel);
        const double ws = worst(rt_f32(saved), rt_f32(saved_ref), 2 * C);
        const double wr =
            worst(rt_f32(rm), rt_f32(rm_ref), C) + worst(rt_f32(rv), rt_f32(rv_ref), C);
        CHECK(wy <= 1 && wdx <= 1 && ws <= 1 && wr <= 1,
              "rank %d: SyncBN on %d ranks, B=%lld, offset %g differs from one rank: output %.3g, "
              "input gradient %.3g, statistics %.3g, running %.3g",
              rt_rank(), k, (long long)B, (double)offset, wy, wdx, ws, wr);
        memcpy(dg, rt_f32(tdg), sizeof dg);
        memcpy(db, rt_f32(tdb), sizeof db);
        rt_allreduce_sum(c, dg, C);
        rt_allreduce_sum(c, db, C);
        CHECK(worst(dg, rt_f32(dg_ref), C) <= 1 && worst(db, rt_f32(db_ref), C) <= 1,
              "rank %d: SyncBN parameter gradients summed over %d ranks differ from one rank's",
              rt_rank(), k);
    }
}

/* rt_grad_allreduce_wait, where the IR's allreduce says `complete`: the gradient waited
 * for holds its set's sum at once (whatever went out in its bucket with it, and however
 * the buckets were cut: ctest runs this with the default buckets, one per gradient and
 * --no-overlap), waiting twice is harmless, and the rest arrive with rt_grads_wait. The
 * sets overlap, as a plan's do; non-members keep their values. */
static void check_grad_wait(void)
{
    rt_comm *all = rt_comm_new(4, (int[]){0, 1, 2, 3}), *c13 = rt_comm_new(2, (int[]){1, 3});
    enum { N = 1000 };
    static float a[N], b[N], c[N];
    int r = rt_rank();
    for (int i = 0; i < N; i++) {
        a[i] = (float)(r + i);
        b[i] = (float)(10 * r + i);
        c[i] = (float)(100 * r + i);
    }
    rt_grad_allreduce_start(all, a, N);
    rt_grad_allreduce_start(c13, c, N);
    rt_grad_allreduce_start(all, b, N);
    rt_grad_allreduce_wait(all, a);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += a[i] != (float)(6 + 4 * i);
    CHECK(bad == 0, "rank %d: %d elements of the gradient waited for are not its sum", r, bad);
    rt_grad_allreduce_wait(all, a);
    rt_grad_allreduce_wait(c13, c); /* a non-member's call does nothing */
    rt_grads_wait();
    bad = 0;
    for (int i = 0; i < N; i++) {
        bad += a[i] != (float)(6 + 4 * i) || b[i] != (float)(60 + 4 * i);
        bad += c[i] != (rt_comm_member(c13) ? (float)(400 + 2 * i) : (float)(100 * r + i));
    }
    CHECK(bad == 0, "rank %d: %d elements wrong after rt_grads_wait", r, bad);
}

int main(int argc, char **argv)
{
    const rt_options *o = rt_init(&argc, &argv, "test_comm");
    rt_check_world_size(4);
    P = rt_pool_new();
    CHECK(o->iterations == 3 && o->seed == 5, "options: iterations %lld seed %llu",
          (long long)o->iterations, (unsigned long long)o->seed);
    /* The default threads: at least one each, and the ranks together no more than the CPUs
     * they may run on (or one each where there are fewer CPUs than ranks). */
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    sched_getaffinity(0, sizeof cpus, &cpus);
    double threads = rt_world_sum(o->threads), ncpu = CPU_COUNT(&cpus);
    CHECK(o->threads >= 1 && threads <= (ncpu > 4 ? ncpu : 4),
          "rank %d: %d threads, %g on the node's 4 ranks with %g CPUs", rt_rank(), o->threads,
          threads, ncpu);

    /* The shard rule: 10 over 4 is 3,3,2,2; 3 over 4 leaves the last rank empty. */
    int64_t expect[4][2] = {{0, 3}, {3, 6}, {6, 8}, {8, 10}};
    for (int i = 0; i < 4; i++) {
        int64_t s, e;
        rt_shard(10, 4, i, &s, &e);
        CHECK(s == expect[i][0] && e == expect[i][1], "shard %d of 10/4 is [%lld,%lld)", i,
              (long long)s, (long long)e);
    }
    int64_t s, e;
    rt_shard(3, 4, 3, &s, &e);
    CHECK(s == 3 && e == 3, "last shard of 3/4 should be empty");

    /* All-reduce within {1,3}; others keep their data. */
    rt_comm *c13 = rt_comm_new(2, (int[]){3, 1});
    float buf[5];
    for (int i = 0; i < 5; i++)
        buf[i] = (float)(rt_rank() * 10 + i);
    rt_allreduce_sum(c13, buf, 5);
    for (int i = 0; i < 5; i++) {
        float want = rt_comm_member(c13) ? (float)(10 + i + 30 + i) : (float)(rt_rank() * 10 + i);
        CHECK(buf[i] == want, "rank %d: allreduce element %d = %g, want %g", rt_rank(), i,
              (double)buf[i], (double)want);
    }
    CHECK(rt_comm_index(c13) == (rt_rank() == 3   ? 0
                                 : rt_rank() == 1 ? 1
                                                  : -1),
          "comm index follows the set's order");
    double total = rt_world_sum(rt_rank() + 0.5);
    CHECK(total == 8.0, "world sum %g", total);

    int all[4] = {0, 1, 2, 3};
    check_reshard(4, all, 2, (int[]){1, 2}, 7, 3, RT_F32);               /* shrink */
    check_reshard(1, (int[]){2}, 4, all, 9, 5, RT_F32);                  /* grow from one */
    check_reshard(2, (int[]){0, 1}, 2, (int[]){2, 3}, 5, 4, RT_F32);     /* disjoint */
    check_reshard(2, (int[]){1, 0}, 3, (int[]){1, 3, 0}, 11, 2, RT_F32); /* unordered */
    check_reshard(4, all, 4, (int[]){3, 2, 1, 0}, 6, 1, RT_I32);         /* reversed, labels */
    check_reshard(3, (int[]){0, 1, 2}, 4, all, 2, 6, RT_F32); /* fewer samples than ranks */
    check_reshard(4, all, 1, (int[]){0}, 13, 3, RT_F32);      /* gather to one */
    check_split();

    check_syncbn(4, all, 10, 0.0f);             /* shards of 3, 3, 2, 2 */
    check_syncbn(3, (int[]){2, 0, 3}, 2, 0.0f); /* one shard empty */
    check_syncbn(2, (int[]){1, 3}, 7, 1000.0f); /* a large offset */
    check_syncbn(1, (int[]){2}, 5, 0.0f);       /* one rank */
    check_grad_wait();

    rt_pool_free(P);
    int failed = (int)rt_world_sum(check_failures);
    if (rt_rank() == 0)
        printf("test_comm: %s\n", failed ? "FAILED" : "all checks passed");
    rt_finalize();
    return failed ? 1 : 0;
}
