/*
 * commcost.c: the alpha-beta communication model of the planner.
 *
 * A message of n bytes over a link costs alpha + n / bandwidth. Resharding
 * moves sample ranges between two rank sets; its time is bounded by the
 * busiest GPU (on the intra-node link) and by the busiest node's network
 * link. A gradient all-reduce among k ranks is a ring or a tree, whichever is
 * cheaper. Where a node's ranks outnumber its cores, every message step also
 * waits for the peer's turn on a core (plan_step_wait), and the loss sum costs
 * its steps of that (plan_loss_sum_time). planner.c calls these for every pair
 * of candidate GPU counts.
 */
#include <math.h>

#include "plan.h"

int64_t plan_shard(int64_t B, int k)
{
    return (B + k - 1) / k;
}

plan_reshard plan_reshard_count(int64_t B, int gpn, int r1, int k1, int r2, int k2)
{
    plan_reshard out = {0, 0, 0, 0};
    if (gpn < 1)
        gpn = 1;
    /* Walk the merged boundaries of both splits. Source and destination ranks
	 * only increase along the walk, so per-rank and per-node sums close as
	 * soon as the rank (node) changes. Shard i of a split of B over k has
	 * q + 1 samples for i < B mod k, else q. */
    int64_t q1 = B / k1, m1 = B % k1, q2 = B / k2, m2 = B % k2;
    int i = 0, j = 0;
    int64_t pos = 0, e1 = q1 + (m1 > 0), e2 = q2 + (m2 > 0);
    int64_t send = 0, recv = 0, nsend = 0, nrecv = 0;
    int msend = 0, mrecv = 0;
    int s = r1, d = r2, sn = r1 / gpn, dn = r2 / gpn, snext = (sn + 1) * gpn,
        dnext = (dn + 1) * gpn;
    double gmax = 0, nmax = 0, cross = 0;
    int msgmax = 0;
    while (pos < B) {
        int64_t end = e1 < e2 ? e1 : e2;
        int64_t len = end - pos;
        if (len > 0 && s != d) {
            send += len;
            recv += len;
            msend++;
            mrecv++;
            if (sn != dn) {
                nsend += len;
                nrecv += len;
                cross += (double)len;
            }
        }
        pos = end;
        if (end == e1) {
            if ((double)send > gmax)
                gmax = (double)send;
            if (msend > msgmax)
                msgmax = msend;
            send = 0;
            msend = 0;
            i++;
            s++;
            e1 += q1 + (i < m1);
            if (s == snext || i == k1) {
                if ((double)nsend > nmax)
                    nmax = (double)nsend;
                nsend = 0;
                sn++;
                snext += gpn;
            }
        }
        if (end == e2) {
            if ((double)recv > gmax)
                gmax = (double)recv;
            if (mrecv > msgmax)
                msgmax = mrecv;
            recv = 0;
            mrecv = 0;
            j++;
            d++;
            e2 += q2 + (j < m2);
            if (d == dnext || j == k2) {
                if ((double)nrecv > nmax)
                    nmax = (double)nrecv;
                nrecv = 0;
                dn++;
                dnext += gpn;
            }
        }
    }
    out.gpu_samples = gmax;
    out.gpu_msgs = msgmax;
    out.node_samples = nmax;
    out.cross_samples = cross;
    return out;
}

double plan_reshard_time(const plan_cluster *c, const plan_reshard *r, double bytes_per_sample)
{
    if (r->gpu_samples <= 0)
        return 0;
    double t = r->gpu_msgs * (c->intra_alpha + plan_step_wait(c)) +
               r->gpu_samples * bytes_per_sample / c->intra_bw;
    if (r->node_samples > 0) {
        double tn =
            c->inter_alpha + plan_step_wait(c) + r->node_samples * bytes_per_sample / c->inter_bw;
        if (tn > t)
            t = tn;
    }
    return t;
}

plan_allreduce_algo plan_allreduce_choice(const plan_cluster *c, int first, int k, double bytes)
{
    plan_allreduce_algo a = {false, 0, 0, 0, 0, 0};
    if (k <= 1 || bytes <= 0)
        return a;
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    bool multi = first / gpn != (first + k - 1) / gpn;
    /* On nodes of shared cores every step also waits for the peer's turn. */
    a.alpha = (multi ? c->inter_alpha : c->intra_alpha) + plan_step_wait(c);
    a.bw = multi ? fmin(c->inter_bw, c->intra_bw) : c->intra_bw;
    double ring_bytes = 2.0 * (k - 1) / k * bytes, tree_bytes = 2.0 * bytes;
    double ring = ring_bytes / a.bw + 2.0 * (k - 1) * a.alpha;
    double tree = 2.0 * ceil(log2((double)k)) * a.alpha + tree_bytes / a.bw;
    a.tree = !(ring < tree);
    a.steps = a.tree ? 2 * (int)ceil(log2((double)k)) : 2 * (k - 1);
    a.link_bytes = a.tree ? tree_bytes : ring_bytes;
    a.time = a.tree ? tree : ring;
    return a;
}

double plan_allreduce_time(const plan_cluster *c, int first, int k, double bytes)
{
    return plan_allreduce_choice(c, first, k, bytes).time;
}

double plan_step_wait(const plan_cluster *c)
{
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    return c->cores > 0 && gpn > c->cores ? c->slice : 0;
}

double plan_loss_sum_time(const plan_cluster *c)
{
    double w = plan_step_wait(c);
    if (!(w > 0) || c->gpus <= 1)
        return 0;
    return plan_allreduce_choice(c, 0, c->gpus, 8).steps * w;
}
