/* mlp_program.h: a hand-written stand-in for what burstc's code generator emits for a
 * 3-layer MLP under a burst plan: layer 1 (linear+relu+dropout) on rank set c1, layer 2
 * (linear+relu) on c2, layer 3 (linear + cross entropy) on c3, with resharding of the
 * activations forward and of their gradients backward wherever consecutive rank sets
 * differ, gradient all-reduce within each set and SGD, with the calls of loss scaling
 * (no-ops unless it is on). Used by test_mlp_burst (burst plan vs one rank),
 * test_checkpoint (resume vs uninterrupted) and test_loss_scale_mpi (scaled vs not). */
#ifndef RT_TEST_MLP_PROGRAM_H
#define RT_TEST_MLP_PROGRAM_H

#include "burstrt.h"

enum { MLP_IN = 20, MLP_H1 = 16, MLP_H2 = 12, MLP_OUT = 5 };

typedef struct {
    int64_t B;
    const rt_comm *c1, *c2, *c3;
    rt_params *ps;
    rt_param *w1, *b1, *w2, *b2, *w3, *b3;
    /* per layer: this rank's shard of the activations and gradients */
    rt_tensor *x1, *h1, *a1, *d1, *dd1, *da1, *dh1;
    rt_tensor *x2, *h2, *a2, *dx2, *da2, *dh2;
    rt_tensor *x3, *lab, *z3, *dz3, *dx3;
    int64_t s1, s2, s3; /* first global sample of each layer's shard */
} mlp;

/* An activation (or its gradient): f32, or 16 bits where the backend stores them so. */
static rt_tensor *mlp_t(rt_pool *P, int64_t n, int64_t k)
{
    return rt_tensor_new(P, rt_storage_dtype(), 2, (int64_t[]){n, k});
}

static void mlp_build(mlp *m, rt_pool *P, const rt_comm *c1, const rt_comm *c2, const rt_comm *c3,
                      int64_t B, uint64_t seed)
{
    int64_t e;
    m->B = B;
    m->c1 = c1;
    m->c2 = c2;
    m->c3 = c3;
    m->ps = rt_params_new(P);
    if (rt_comm_member(c1)) {
        rt_comm_shard(c1, B, &m->s1, &e);
        int64_t n = e - m->s1;
        m->w1 = rt_param_new(m->ps, "fc1.weight", c1, 2, (int64_t[]){MLP_H1, MLP_IN});
        m->b1 = rt_param_new(m->ps, "fc1.bias", c1, 1, (int64_t[]){MLP_H1});
        rt_init_kaiming_uniform(m->w1->value, MLP_IN, seed, 1, 0);
        rt_init_kaiming_uniform(m->b1->value, MLP_IN, seed, 1, 1);
        m->x1 = mlp_t(P, n, MLP_IN);
        m->h1 = mlp_t(P, n, MLP_H1);
        m->a1 = mlp_t(P, n, MLP_H1);
        m->d1 = mlp_t(P, n, MLP_H1);
        m->dd1 = mlp_t(P, n, MLP_H1);
        m->da1 = mlp_t(P, n, MLP_H1);
        m->dh1 = mlp_t(P, n, MLP_H1);
    }
    if (rt_comm_member(c2)) {
        rt_comm_shard(c2, B, &m->s2, &e);
        int64_t n = e - m->s2;
        m->w2 = rt_param_new(m->ps, "fc2.weight", c2, 2, (int64_t[]){MLP_H2, MLP_H1});
        m->b2 = rt_param_new(m->ps, "fc2.bias", c2, 1, (int64_t[]){MLP_H2});
        rt_init_kaiming_uniform(m->w2->value, MLP_H1, seed, 2, 0);
        rt_init_kaiming_uniform(m->b2->value, MLP_H1, seed, 2, 1);
        m->x2 = mlp_t(P, n, MLP_H1);
        m->h2 = mlp_t(P, n, MLP_H2);
        m->a2 = mlp_t(P, n, MLP_H2);
        m->dx2 = mlp_t(P, n, MLP_H1);
        m->da2 = mlp_t(P, n, MLP_H2);
        m->dh2 = mlp_t(P, n, MLP_H2);
    }
    if (rt_comm_member(c3)) {
        rt_comm_shard(c3, B, &m->s3, &e);
        int64_t n = e - m->s3;
        m->w3 = rt_param_new(m->ps, "fc3.weight", c3, 2, (int64_t[]){MLP_OUT, MLP_H2});
        m->b3 = rt_param_new(m->ps, "fc3.bias", c3, 1, (int64_t[]){MLP_OUT});
        rt_init_kaiming_uniform(m->w3->value, MLP_H2, seed, 3, 0);
        rt_init_kaiming_uniform(m->b3->value, MLP_H2, seed, 3, 1);
        m->x3 = mlp_t(P, n, MLP_H2);
        m->lab = rt_tensor_new(P, RT_I32, 1, (int64_t[]){n});
        m->z3 = mlp_t(P, n, MLP_OUT);
        m->dz3 = mlp_t(P, n, MLP_OUT);
        m->dx3 = mlp_t(P, n, MLP_H2);
    }
}

/* One training iteration; returns the job's loss (sum of the ranks' partial losses). */
static double mlp_step(mlp *m, rt_data *data, int64_t step, uint64_t seed, const rt_sgd *opt)
{
    const int64_t B = m->B;
    double local_loss = 0.0;
    rt_step_begin(step);
    rt_params_zero_grad(m->ps);
    /* forward */
    if (rt_comm_member(m->c1)) {
        rt_trace_push("fc1.fwd");
        rt_data_batch(data, step, B, m->s1, m->s1 + m->x1->shape[0], m->x1, NULL);
        rt_linear_fwd(m->x1, m->w1->value, m->b1->value, m->h1);
        rt_relu_fwd(m->h1, m->a1);
        rt_dropout_fwd(m->a1, 0.2f, seed, step, 1, m->s1, m->d1);
        rt_trace_pop();
    }
    rt_trace_push("reshard.fc1-fc2");
    rt_reshard(m->d1, m->c1, m->x2, m->c2, B, MLP_H1);
    rt_trace_pop();
    if (rt_comm_member(m->c2)) {
        rt_trace_push("fc2.fwd");
        rt_linear_fwd(m->x2, m->w2->value, m->b2->value, m->h2);
        rt_relu_fwd(m->h2, m->a2);
        rt_trace_pop();
    }
    rt_reshard(m->a2, m->c2, m->x3, m->c3, B, MLP_H2);
    if (rt_comm_member(m->c3)) {
        rt_trace_push("fc3.fwd+loss+bwd");
        rt_data_batch(data, step, B, m->s3, m->s3 + m->x3->shape[0], NULL, m->lab);
        rt_linear_fwd(m->x3, m->w3->value, m->b3->value, m->z3);
        local_loss = rt_cross_entropy_fwd(m->z3, m->lab, B);
        /* as generated programs: times the loss scale, which is 1 unless scaling is on */
        rt_cross_entropy_bwd_scaled(m->z3, m->lab, B, m->dz3);
        rt_linear_bwd(m->x3, m->w3->value, m->dz3, m->dx3, m->w3->grad, m->b3->grad);
        /* as generated programs do: each layer's all-reduces start after its backward */
        rt_grad_allreduce_start(m->c3, rt_f32(m->w3->grad), m->w3->grad->numel);
        rt_grad_allreduce_start(m->c3, rt_f32(m->b3->grad), m->b3->grad->numel);
        rt_trace_pop();
    }
    double loss = rt_world_sum(local_loss);
    /* backward */
    rt_reshard(m->dx3, m->c3, m->da2, m->c2, B, MLP_H2);
    if (rt_comm_member(m->c2)) {
        rt_relu_bwd(m->h2, m->da2, m->dh2);
        rt_linear_bwd(m->x2, m->w2->value, m->dh2, m->dx2, m->w2->grad, m->b2->grad);
        rt_grad_allreduce_start(m->c2, rt_f32(m->w2->grad), m->w2->grad->numel);
        rt_grad_allreduce_start(m->c2, rt_f32(m->b2->grad), m->b2->grad->numel);
    }
    rt_reshard(m->dx2, m->c2, m->dd1, m->c1, B, MLP_H1);
    if (rt_comm_member(m->c1)) {
        rt_dropout_bwd(m->dd1, 0.2f, seed, step, 1, m->s1, m->da1);
        rt_relu_bwd(m->h1, m->da1, m->dh1);
        rt_linear_bwd(m->x1, m->w1->value, m->dh1, NULL, m->w1->grad, m->b1->grad);
        rt_grad_allreduce_start(m->c1, rt_f32(m->w1->grad), m->w1->grad->numel);
        rt_grad_allreduce_start(m->c1, rt_f32(m->b1->grad), m->b1->grad->numel);
    }
    rt_trace_push("allreduce+sgd");
    if (rt_loss_scale_unscale(m->ps)) /* completes the all-reduces first */
        rt_sgd_step(m->ps, opt);
    rt_trace_pop();
    rt_step_end(step);
    return loss;
}

#endif
