/*
 * place.c: what a placed plan does to each GPU and to the network.
 *
 * The planner chooses every layer's ranks (first .. first + k - 1: the
 * lowest ranks of the window it runs in, see planner.c); here the bytes that
 * cross between nodes per iteration are counted (resharding both ways, plus
 * the network share of ring all-reduces) and the busiest GPU's memory is
 * summed over the layers it runs. The JSON export and the Chrome trace of a
 * plan are in plan_out.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void plan_place(const plan_problem *p, plan_result *r)
{
    int G = p->cluster.gpus, gpn = p->cluster.gpus_per_node > 0 ? p->cluster.gpus_per_node : 1;
    /* Per-rank memory as a difference array: linear in layers + ranks. */
    double *mem = plan_xcalloc((size_t)G + 1, sizeof(double));
    r->cross_node_bytes = 0;
    for (int l = 0; l < r->nlayers; l++) {
        plan_layer_result *lr = &r->layer[l];
        int off = lr->first;
        mem[off] += lr->mem_bytes;
        mem[off + lr->k] -= lr->mem_bytes;
        int nn = (off + lr->k - 1) / gpn - off / gpn + 1;
        if (nn > 1)
            r->cross_node_bytes +=
                nn * 2.0 * (lr->k - 1) / lr->k * p->layers[l].params * p->dtype_bytes;
    }
    /* Consecutive edges of a long chain repeat the same pair of rank sets. */
    int last[4] = {-1, -1, -1, -1};
    double cross = 0;
    for (int e = 0; e < p->nedges; e++) {
        const plan_layer_result *a = &r->layer[p->edges[e].from], *b = &r->layer[p->edges[e].to];
        if (a->first != last[0] || a->k != last[1] || b->first != last[2] || b->k != last[3]) {
            plan_reshard rs = plan_reshard_count(p->batch, gpn, a->first, a->k, b->first, b->k);
            cross = rs.cross_samples;
            last[0] = a->first, last[1] = a->k, last[2] = b->first, last[3] = b->k;
        }
        r->cross_node_bytes += 2.0 * cross * p->edges[e].elems * p->dtype_bytes;
    }
    r->peak_mem = 0;
    r->peak_mem_rank = 0;
    double run = 0;
    for (int g = 0; g < G; g++) {
        run += mem[g];
        if (run > r->peak_mem) {
            r->peak_mem = run;
            r->peak_mem_rank = g;
        }
    }
    free(mem);
}
