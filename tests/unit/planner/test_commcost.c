/*
 * test_commcost.c: the communication model (commcost.c) on hand-computed cases.
 */
#include <string.h>

#include "check.h"
#include "plan.h"

/* The reference: owners of every sample, counted one by one. */
static plan_reshard naive(int64_t B, int gpn, int r1, int k1, int r2, int k2)
{
    enum { MAXR = 64 };
    double send[MAXR] = {0}, recv[MAXR] = {0}, nout[MAXR] = {0}, nin[MAXR] = {0};
    int msgs_s[MAXR] = {0}, msgs_r[MAXR] = {0};
    int last_s[MAXR][MAXR];
    memset(last_s, 0, sizeof last_s);
    plan_reshard r = {0, 0, 0, 0};
    for (int64_t x = 0; x < B; x++) {
        int s = -1, d = -1;
        for (int i = 0; i < k1; i++) {
            int64_t lo = i * (B / k1) + (i < B % k1 ? i : B % k1), hi = lo + B / k1 + (i < B % k1);
            if (x >= lo && x < hi)
                s = r1 + i;
        }
        for (int i = 0; i < k2; i++) {
            int64_t lo = i * (B / k2) + (i < B % k2 ? i : B % k2), hi = lo + B / k2 + (i < B % k2);
            if (x >= lo && x < hi)
                d = r2 + i;
        }
        if (s == d)
            continue;
        send[s]++;
        recv[d]++;
        if (!last_s[s][d]) {
            last_s[s][d] = 1;
            msgs_s[s]++;
            msgs_r[d]++;
        }
        if (s / gpn != d / gpn) {
            nout[s / gpn]++;
            nin[d / gpn]++;
            r.cross_samples++;
        }
    }
    for (int i = 0; i < MAXR; i++) {
        r.gpu_samples = fmax(r.gpu_samples, fmax(send[i], recv[i]));
        r.node_samples = fmax(r.node_samples, fmax(nout[i], nin[i]));
        if (msgs_s[i] > r.gpu_msgs)
            r.gpu_msgs = msgs_s[i];
        if (msgs_r[i] > r.gpu_msgs)
            r.gpu_msgs = msgs_r[i];
    }
    return r;
}

int main(void)
{
    /* The boundary walk against the sample-by-sample reference. */
    unsigned seed = 12345;
    for (int t = 0; t < 3000; t++) {
        seed = seed * 1103515245u + 12345u;
        int64_t B = 1 + (seed >> 8) % 40;
        int k1 = 1 + (int)((seed >> 3) % 16), k2 = 1 + (int)((seed >> 13) % 16);
        if (k1 > B)
            k1 = (int)B;
        if (k2 > B)
            k2 = (int)B;
        int r1 = (int)((seed >> 17) % 17), r2 = (int)((seed >> 23) % 17),
            gpn = 1 + (int)((seed >> 27) % 8);
        plan_reshard a = plan_reshard_count(B, gpn, r1, k1, r2, k2),
                     b = naive(B, gpn, r1, k1, r2, k2);
        if (a.gpu_samples != b.gpu_samples || a.gpu_msgs != b.gpu_msgs ||
            a.node_samples != b.node_samples || a.cross_samples != b.cross_samples) {
            fprintf(stderr, "B=%lld gpn=%d %d+%d -> %d+%d: walk %g %d %g %g, naive %g %d %g %g\n",
                    (long long)B, gpn, r1, k1, r2, k2, a.gpu_samples, a.gpu_msgs, a.node_samples,
                    a.cross_samples, b.gpu_samples, b.gpu_msgs, b.node_samples, b.cross_samples);
            check_failures++;
            break;
        }
    }

    /* B=8 from 2 ranks to 4: rank 1 holds [4,8), keeps none, sends 2 to
	 * rank 2 and 2 to rank 3, and receives [2,4) from rank 0. */
    plan_reshard r = plan_reshard_count(8, 2, 0, 2, 0, 4);
    CHECK(r.gpu_samples == 4);
    CHECK(r.gpu_msgs == 2);
    CHECK(r.node_samples == 4);
    CHECK(r.cross_samples == 4);
    /* Same sets: nothing moves. */
    r = plan_reshard_count(8, 2, 0, 4, 0, 4);
    CHECK(r.gpu_samples == 0 && r.cross_samples == 0);
    /* Uneven: B=10 over 4 ranks is 3,3,2,2; over 1 rank everything goes to 0. */
    CHECK(plan_shard(10, 4) == 3);
    r = plan_reshard_count(10, 8, 0, 4, 0, 1);
    CHECK(r.gpu_samples == 7); /* rank 0 receives 10 - 3 */
    CHECK(r.gpu_msgs == 3);
    CHECK(r.node_samples == 0);
    /* Shifted sets (a concurrent branch): 4 ranks at 0 to 4 ranks at 4, one node of 8. */
    r = plan_reshard_count(8, 8, 0, 4, 4, 4);
    CHECK(r.gpu_samples == 2 && r.gpu_msgs == 1 && r.cross_samples == 0);
    r = plan_reshard_count(8, 4, 0, 4, 4, 4);
    CHECK(r.cross_samples == 8 && r.node_samples == 8);

    plan_cluster c = {.gpus = 16,
                      .gpus_per_node = 8,
                      .intra_alpha = 1e-6,
                      .intra_bw = 100e9,
                      .inter_alpha = 10e-6,
                      .inter_bw = 10e9};
    plan_reshard r2 = {.gpu_samples = 4, .gpu_msgs = 2, .node_samples = 0};
    CHECK_NEAR(plan_reshard_time(&c, &r2, 1e6), 2e-6 + 4e6 / 100e9, 1e-12);
    r2.node_samples = 4;
    CHECK_NEAR(plan_reshard_time(&c, &r2, 1e6), 10e-6 + 4e6 / 10e9, 1e-12);
    /* All-reduce: ring 2(k-1)/k bytes/bw + 2(k-1) alpha vs tree 2 log2(k) alpha + 2 bytes/bw. */
    double big = 1e9, ring = 2.0 * 7 / 8 * big / 100e9 + 14 * 1e-6;
    CHECK_NEAR(plan_allreduce_time(&c, 0, 8, big), ring, 1e-12);
    double small = 8, tree = 2.0 * 3 * 1e-6 + 2 * small / 100e9;
    CHECK_NEAR(plan_allreduce_time(&c, 0, 8, small), tree, 1e-12);
    /* Across nodes the network sets both terms. */
    CHECK_NEAR(plan_allreduce_time(&c, 0, 16, big), 2.0 * 15 / 16 * big / 10e9 + 30 * 10e-6, 1e-12);
    CHECK(plan_allreduce_time(&c, 0, 1, big) == 0);

    /* Ranks sharing cores: 4 ranks on a node of 2 cores, slice 1 ms. Every
     * message step waits 1 ms more (plan_step_wait). 8 bytes among 4: ring
     * 6 x 1.001 ms + 12 B / 1 GB/s, tree 4 x 1.001 ms + 16 B / 1 GB/s: the tree. */
    plan_cluster s = {.gpus = 4,
                      .gpus_per_node = 4,
                      .intra_alpha = 1e-6,
                      .intra_bw = 1e9,
                      .cores = 2,
                      .slice = 1e-3};
    CHECK_NEAR(plan_step_wait(&s), 1e-3, 1e-15);
    plan_allreduce_algo a = plan_allreduce_choice(&s, 0, 4, 8);
    CHECK(a.tree && a.steps == 4);
    CHECK_NEAR(a.alpha, 1.001e-3, 1e-15);
    CHECK_NEAR(a.time, 4 * 1.001e-3 + 16e-9, 1e-15);
    /* Between two ranks of the four (the node still holds 4 processes):
     * ring and tree take 2 steps, the ring moves 8 B, the tree 16 B. */
    CHECK_NEAR(plan_allreduce_time(&s, 0, 2, 8), 2 * 1.001e-3 + 8e-9, 1e-15);
    /* The loss sum: 4 tree steps of the wait, its alpha-beta part unpriced. */
    CHECK_NEAR(plan_loss_sum_time(&s), 4e-3, 1e-15);
    /* A reshard: 1 message of 2 samples of 1 kB from rank 0 to rank 1. */
    plan_reshard r3 = plan_reshard_count(4, 4, 0, 1, 0, 2);
    CHECK(r3.gpu_msgs == 1 && r3.gpu_samples == 2);
    CHECK_NEAR(plan_reshard_time(&s, &r3, 1e3), 1.001e-3 + 2e3 / 1e9, 1e-15);
    /* A core per rank (cores 4, or 0: a GPU): no wait, whatever the slice. */
    s.cores = 4;
    CHECK(plan_step_wait(&s) == 0 && plan_loss_sum_time(&s) == 0);
    CHECK_NEAR(plan_allreduce_time(&s, 0, 4, 8), 4e-6 + 16e-9, 1e-15);
    s.cores = 0;
    CHECK(plan_step_wait(&s) == 0);
    return check_done("test_comm");
}
