/* test_rankset.c: the reshard plan (rt_reshard_plan), without MPI. For random pairs of
 * rank sets of a world of up to 8 ranks and random batch sizes, the plans of all ranks are
 * made (each as if it were that rank) and checked against each other and the shard rule:
 * every send has exactly one matching receive at its peer (same samples), a rank in both
 * sets copies what it keeps, every consumer's receives and copies tile its shard exactly,
 * every producer's sends and copies tile its shard exactly, receives come first in the
 * producers' order, and ranks in neither set have no plan. */
#include "check.h"
#include "internal.h"

#define WORLD 8

typedef struct {
    bool any;
    rt_transfers t;
} rank_plan;

/* Marks samples [first, first+count) in `cover` (relative to `base`); false on overlap or
 * outside [base, end). */
static bool mark(int *cover, int64_t base, int64_t end, int64_t first, int64_t count)
{
    if (first < base || first + count > end || count <= 0)
        return false;
    for (int64_t s = first; s < first + count; s++)
        if (cover[s - base]++)
            return false;
    return true;
}

static void random_set(int *ranks, int *n)
{
    int perm[WORLD];
    for (int i = 0; i < WORLD; i++)
        perm[i] = i;
    for (int i = WORLD - 1; i > 0; i--) {
        int j = (int)(rt_hash64(test_rng++) % (uint64_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    *n = 1 + (int)(rt_hash64(test_rng++) % WORLD);
    for (int i = 0; i < *n; i++)
        ranks[i] = perm[i];
}

static void check_case(const int *fr, int nf, const int *tr, int nt, int64_t B)
{
    rank_plan plans[WORLD];
    rt_opts_g.world_size = WORLD;
    for (int r = 0; r < WORLD; r++) {
        rt_opts_g.rank = r;
        rt_comm *from = rt_comm_new(nf, fr), *to = rt_comm_new(nt, tr);
        plans[r].any = rt_reshard_plan(from, to, B, &plans[r].t);
        CHECK(plans[r].any == (from->index >= 0 || to->index >= 0), "rank %d: plan %d", r,
              plans[r].any);
        rt_comm_free_all();
    }
    int *cover = calloc((size_t)B + 1, sizeof(int));
    for (int r = 0; r < WORLD; r++) {
        const rt_transfers *t = &plans[r].t;
        if (!plans[r].any)
            continue;
        /* The consumer side: receives and copies tile the shard. */
        if (t->consumer) {
            memset(cover, 0, ((size_t)B + 1) * sizeof(int));
            for (int i = 0; i < t->n; i++)
                if (t->x[i].dir != RT_XFER_SEND)
                    CHECK(mark(cover, t->dst0, t->dst1, t->x[i].first, t->x[i].count),
                          "rank %d: receive/copy [%lld,+%lld) overlaps or leaves [%lld,%lld)", r,
                          (long long)t->x[i].first, (long long)t->x[i].count, (long long)t->dst0,
                          (long long)t->dst1);
            for (int64_t s = t->dst0; s < t->dst1; s++)
                CHECK(cover[s - t->dst0] == 1, "rank %d: sample %lld of its shard never arrives", r,
                      (long long)s);
        }
        if (t->producer) {
            memset(cover, 0, ((size_t)B + 1) * sizeof(int));
            for (int i = 0; i < t->n; i++)
                if (t->x[i].dir != RT_XFER_RECV)
                    CHECK(mark(cover, t->src0, t->src1, t->x[i].first, t->x[i].count),
                          "rank %d: send/copy outside or twice", r);
            for (int64_t s = t->src0; s < t->src1; s++)
                CHECK(cover[s - t->src0] == 1, "rank %d: sample %lld of its shard is never sent", r,
                      (long long)s);
        }
        bool seen_send = false;
        for (int i = 0; i < t->n; i++) {
            const rt_xfer *x = &t->x[i];
            if (x->dir == RT_XFER_RECV)
                CHECK(!seen_send, "rank %d: a receive after a send", r);
            else
                seen_send = true;
            CHECK((x->dir == RT_XFER_COPY) == (x->peer == r), "rank %d: copy/peer mismatch", r);
            if (x->dir == RT_XFER_COPY)
                continue;
            /* The peer's plan holds the mirror image, exactly once. */
            rt_xfer_dir want = x->dir == RT_XFER_SEND ? RT_XFER_RECV : RT_XFER_SEND;
            int found = 0;
            const rt_transfers *o = &plans[x->peer].t;
            for (int j = 0; plans[x->peer].any && j < o->n; j++)
                if (o->x[j].dir == want && o->x[j].peer == r && o->x[j].first == x->first &&
                    o->x[j].count == x->count)
                    found++;
            CHECK(found == 1, "rank %d: %s of [%lld,+%lld) with rank %d matched %d times", r,
                  x->dir == RT_XFER_SEND ? "send" : "receive", (long long)x->first,
                  (long long)x->count, x->peer, found);
        }
    }
    free(cover);
    for (int r = 0; r < WORLD; r++)
        if (plans[r].any)
            rt_transfers_free(&plans[r].t);
}

int main(void)
{
    int fr[WORLD], tr[WORLD], nf, nt, cases = 0;
    /* The patterns of test_comm, then random ones. */
    check_case((int[]){0, 1, 2, 3}, 4, (int[]){0, 1}, 2, 10);
    check_case((int[]){0, 1}, 2, (int[]){2, 3}, 2, 7);
    check_case((int[]){3, 1}, 2, (int[]){1, 3, 0}, 3, 5);
    check_case((int[]){0, 1, 2, 3}, 4, (int[]){0}, 1, 3); /* B < k: empty shards */
    for (int i = 0; i < 400; i++) {
        random_set(fr, &nf);
        random_set(tr, &nt);
        check_case(fr, nf, tr, nt, (int64_t)(rt_hash64(test_rng++) % 40));
        cases++;
    }
    printf("test_rankset: %d random reshard plans consistent across all ranks: %s\n", cases,
           check_failures ? "FAILED" : "passed");
    return check_failures ? 1 : 0;
}
