/*
 * net.c: what a reshard and an all-reduce put on the cluster's links
 * (docs/sim.md, "Communication"), with the same rules as the planner's
 * communication model (passes/commcost.c), so that a transfer alone on its
 * links takes exactly the planner's time.
 *
 *   - A reshard's messages come from the timeline (the runtime's shard
 *     rule). Every message loads its sender's port out and its receiver's
 *     port in; one between nodes also loads the sender's node's interface
 *     out and the receiver's node's in. commcost.c's time is the busiest
 *     GPU's and the busiest node's bytes over their bandwidths plus latency
 *     terms; the simulator keeps those latency terms as the transfer's
 *     latency (sim_latency_for) and lets the bandwidth part be shared.
 *   - An all-reduce is commcost.c's choice, ring or tree: a ring of k GPUs
 *     is 2(k-1) steps, each moving bytes/k over every link of the ring; a
 *     tree (two, as NCCL's double binary tree) moves every byte over every
 *     link twice, up and down. Either way every port of the k GPUs, and
 *     every node interface when the ranks span nodes, carries the
 *     algorithm's link bytes each way; the steps' latency is its latency.
 *     The steps are played as one transfer of those bytes: its rate is its
 *     bottleneck's fair share, as each step's would be.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

int sim_reshard_loads(const plan_cluster *c, const plan_tl_pair *pairs, int npairs,
                      double bytes_per_sample, sim_load **out)
{
    int G = c->gpus, gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    /* Up to four loads per message, then summed by link (first come,
	 * first listed). */
    sim_load *l = plan_xcalloc(4 * (size_t)npairs + 1, sizeof(sim_load));
    int n = 0;
    for (int i = 0; i < npairs; i++) {
        double b = (double)pairs[i].samples * bytes_per_sample;
        int s = pairs[i].src, d = pairs[i].dst;
        if (!(b > 0))
            continue;
        l[n++] = (sim_load){sim_link_gpu_out(s), b};
        l[n++] = (sim_load){sim_link_gpu_in(d), b};
        if (s / gpn != d / gpn) {
            l[n++] = (sim_load){sim_link_nic_out(G, s / gpn), b};
            l[n++] = (sim_load){sim_link_nic_in(G, d / gpn), b};
        }
    }

    int nl = 2 * G + 2 * ((G + gpn - 1) / gpn);
    double *acc = plan_xcalloc((size_t)nl, sizeof(double));
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (acc[l[i].link] == 0)
            l[m++].link = l[i].link; /* first time: keep its slot (m <= i) */
        acc[l[i].link] += l[i].bytes;
    }
    for (int i = 0; i < m; i++) {
        l[i].bytes = acc[l[i].link];
        acc[l[i].link] = 0;
    }
    free(acc);
    *out = l;
    return m;
}

int sim_allreduce_loads(const plan_cluster *c, int first, int k, double bytes, sim_load **out,
                        double *latency)
{
    plan_allreduce_algo a = plan_allreduce_choice(c, first, k, bytes);
    int G = c->gpus, gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    int n0 = first / gpn, n1 = (first + k - 1) / gpn;
    bool multi = n0 != n1;
    int n = 2 * k + (multi ? 2 * (n1 - n0 + 1) : 0), m = 0;
    sim_load *l = plan_xcalloc((size_t)n, sizeof(sim_load));
    if (k > 1 && a.link_bytes > 0) {
        for (int g = first; g < first + k; g++) {
            l[m++] = (sim_load){sim_link_gpu_out(g), a.link_bytes};
            l[m++] = (sim_load){sim_link_gpu_in(g), a.link_bytes};
        }
        for (int nd = n0; multi && nd <= n1; nd++) {
            l[m++] = (sim_load){sim_link_nic_out(G, nd), a.link_bytes};
            l[m++] = (sim_load){sim_link_nic_in(G, nd), a.link_bytes};
        }
    }
    *latency = a.steps * a.alpha;
    *out = l;
    return m;
}

double sim_latency_for(const plan_cluster *c, const sim_load *loads, int nloads, double model)
{
    double t = 0;
    for (int i = 0; i < nloads; i++) {
        double cap = loads[i].link < 2 * c->gpus ? c->intra_bw : c->inter_bw;
        if (cap > 0)
            t = fmax(t, loads[i].bytes / cap);
    }
    return fmax(0, model - t);
}
