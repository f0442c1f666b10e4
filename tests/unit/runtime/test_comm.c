/* test_comm.c (mpirun -np 4): the shard rule, the common option parser, all-reduce within
 * rank sets, the world sum and resharding between rank sets of every kind (grow,
 * shrink, disjoint, overlapping, unordered, i32), checking that every consumer ends with
 * exactly the samples of its shard. */
#include "check.h"

#include <mpi.h>

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

int main(int argc, char **argv)
{
    const rt_options *o = rt_init(&argc, &argv, "test_comm");
    rt_check_world_size(4);
    P = rt_pool_new();
    CHECK(o->iterations == 3 && o->seed == 5 && o->threads == 1,
          "options: iterations %lld seed %llu", (long long)o->iterations,
          (unsigned long long)o->seed);

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

    rt_pool_free(P);
    int failed = (int)rt_world_sum(check_failures);
    if (rt_rank() == 0)
        printf("test_comm: %s\n", failed ? "FAILED" : "all checks passed");
    rt_finalize();
    return failed ? 1 : 0;
}
