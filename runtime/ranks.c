/* ranks.c: the rules about rank sets and shards that every backend shares: how a global
 * batch splits over the ranks of a set (the compiler's planner uses the same rule), and
 * what a valid rank set is. Compiled into both the CPU and the CUDA runtime. */
#include "internal.h"

void rt_shard(int64_t B, int k, int index, int64_t *start, int64_t *end)
{
    if (k <= 0 || index < 0 || index >= k || B < 0)
        rt_fatal("shard", "invalid shard %d of %d for batch %lld", index, k, (long long)B);
    int64_t base = B / k, extra = B % k;
    *start = index * base + (index < extra ? index : extra);
    *end = *start + base + (index < extra ? 1 : 0);
}

int *rt_rank_set_copy(int n, const int *world_ranks, int *index)
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
