/*
 * costmodel.c: how long one layer's forward and backward pass take on one GPU.
 *
 * The analytic model is a roofline with a utilisation curve: a kernel doing w
 * FLOPs reaches u(w) = umax * w / (w + whalf) of the GPU's peak for the job's
 * dtype, and moves its bytes at mem_eff of the memory bandwidth (both per
 * class of layer: convolutions, matrix products, the rest);
 * it takes the longer of the two plus a launch overhead per kernel. The
 * bytes are the activations (per sample, times the batch) and the weights. A measured
 * table (profile.c) replaces the model for the layers it covers; its total is
 * split into forward and backward in the analytic model's proportion, unless
 * the table gives the forward part too (burstc profile's `layer` lines). The
 * planner (planner.c) calls this for every candidate per-GPU batch.
 */
#include <math.h>

#include "plan.h"

/*
 * Fitted by `costmodel_accuracy --fit` (tests/bench/planner/): a grid search
 * over umax, whalf, gamma and mem_eff per class, and over the launch overhead,
 * minimising median + 0.25 x p90 of |predicted/measured - 1| over the 867
 * (layer, batch 1..128) samples of the DeepPool A100 per-layer timings in
 * data/profiles/deeppool-a100/, with the A100's TF32 peak (156 TFLOP/s;
 * PyTorch runs those convolutions and matrix products as TF32), 1555 GB/s and
 * a 2 us launch overhead (the fitted launch: give an A100 `launch = 2 us` to
 * reproduce the calibration). docs/plan.md has the resulting accuracy table.
 */
plan_util plan_util_curve[PC_COUNT] = {
    [PC_CONV] = {0.536, 1e10, 0.6, 0.30},
    [PC_LINEAR] = {0.253, 1e8, 1.2, 1.00},
    [PC_OTHER] = {0.050, 5.62e10, 0.4, 0.30},
    /* Pooling was fitted with the rest (PC_OTHER); its own class lets a
	 * device with measured curves (examples/clusters/cpu.burst) tell them apart. */
    [PC_POOL] = {0.050, 5.62e10, 0.4, 0.30},
};

static double kernel_group_time(const plan_cluster *c, plan_class cls, double flops, double bytes,
                                int nk)
{
    if (flops <= 0 && bytes <= 0)
        return 0; /* a view (flatten, reshape): no kernel at all */
    if (nk < 1)
        nk = 1;
    double t = nk * c->launch;
    double tc = 0, tm = 0;
    plan_util own = {c->umax, c->whalf, 1.0, 1.0};
    if (c->cls_umax[cls] > 0)
        own = (plan_util){c->cls_umax[cls], c->cls_whalf[cls], 1.0, 1.0};
    const plan_util *u = own.umax > 0 ? &own : &plan_util_curve[cls];
    if (flops > 0 && c->peak_flops > 0) {
        double w = flops / nk;
        double util = u->umax * pow(w / (w + u->whalf), u->gamma);
        tc = flops / (c->peak_flops * util);
    }
    if (bytes > 0 && c->cls_bw[cls] > 0)
        tm = bytes / c->cls_bw[cls];
    else if (bytes > 0 && c->mem_bw > 0)
        tm = bytes / (c->mem_bw * u->mem_eff);
    return t + fmax(tc, tm);
}

void plan_layer_time_analytic(const plan_cluster *c, int dtype_bytes, const plan_layer *l,
                              int64_t b, double *fwd, double *bwd)
{
    double n = (double)b;
    /* Weights are read once per pass whatever the batch: forward reads
	 * them, backward reads them (input gradient) and writes their gradient. */
    *fwd = kernel_group_time(c, l->cls, l->fwd_flops * n,
                             (l->fwd_elems * n + l->params) * dtype_bytes, l->fwd_kernels);
    *bwd = kernel_group_time(c, l->cls, l->bwd_flops * n,
                             (l->bwd_elems * n + 2 * l->params) * dtype_bytes, l->bwd_kernels);
}

double plan_core_share(const plan_cluster *c, int first, int k)
{
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
    if (c->cores <= 0 || c->cores >= gpn || k <= c->cores)
        return 1;
    /* The most ranks on one node: the first node's part, else a whole node
	 * (or the rest when the ranks end in the second node). */
    int head = gpn - first % gpn, most = k < head ? k : head;
    if (k - most > most)
        most = k - most < gpn ? k - most : gpn;
    return most > c->cores ? (double)most / c->cores : 1;
}

/* One column of a table (the totals or the forward parts) at batch b. */
static double column_at(const plan_timing *t, const double *v, int64_t b)
{
    if (t->n == 0)
        return 0;
    if (b <= t->batch[0])
        return v[0];
    for (int i = 1; i < t->n; i++) {
        if (b <= t->batch[i]) {
            double x0 = (double)t->batch[i - 1], x1 = (double)t->batch[i];
            double f = ((double)b - x0) / (x1 - x0);
            return v[i - 1] + f * (v[i] - v[i - 1]);
        }
    }
    return v[t->n - 1] * (double)b / (double)t->batch[t->n - 1];
}

double plan_timing_at(const plan_timing *t, int64_t b)
{
    return column_at(t, t->seconds, b);
}

double plan_layer_data_time(const plan_problem *p, const plan_layer *l, int64_t b)
{
    double t = 0;
    for (int i = 0; i < l->ndata; i++)
        t += column_at(p->data[l->data_first + i], p->data[l->data_first + i]->fwd, b);
    return t;
}

double plan_layer_update_time(const plan_problem *p, const plan_layer *l, int64_t b)
{
    if (!p->update || !(p->update_params > 0))
        return 0;
    return l->params / p->update_params * plan_timing_at(p->update, b);
}

void plan_layer_time(const plan_problem *p, const plan_layer *l, int64_t b, double *fwd,
                     double *bwd)
{
    plan_layer_time_analytic(&p->cluster, p->dtype_bytes, l, b, fwd, bwd);
    if (l->measured && l->measured->n > 0 && l->measured->fwd) {
        /* a `layer` line of burstc profile: both passes measured */
        *fwd = column_at(l->measured, l->measured->fwd, b);
        *bwd = fmax(0, plan_timing_at(l->measured, b) - *fwd);
    } else if (l->measured && l->measured->n > 0) {
        double total = plan_timing_at(l->measured, b);
        double sum = *fwd + *bwd;
        double ffrac = sum > 0 ? *fwd / sum : 1.0 / 3.0;
        *fwd = total * ffrac;
        *bwd = total - *fwd;
    }
    *fwd += plan_layer_data_time(p, l, b);
    *bwd += plan_layer_update_time(p, l, b);
}
