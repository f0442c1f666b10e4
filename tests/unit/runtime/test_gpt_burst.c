/* test_gpt_burst.c (mpirun -np 4): a one-block GPT-2 trained with Adam under a burst plan
 * must give the one-rank losses. Stage A (token + positional embedding, layernorm,
 * causal self-attention, residual) runs on all 4 ranks; stage B (layernorm, GELU MLP,
 * residual, LM head, cross entropy over tokens with the global B*T) runs on ranks
 * {2,1}. Activations go A -> B and their gradients B -> A by rt_reshard; i32 tokens and
 * labels come from the synthetic source per shard. This is the language-model shape of
 * a generated program (residual fan-out summed with rt_accumulate). */
#include "check.h"

#include <mpi.h>

enum { B = 6, T = 5, D = 8, H = 2, V = 11, F = 4 * D, STEPS = 5 };

typedef struct {
    const rt_comm *ca, *cb;
    rt_pool *P; /* owns the tensors and the kernels' scratch */
    rt_params *ps;
    int64_t a0, b0, na, nb;
    /* stage A */
    rt_param *wte, *wpe, *g1, *be1, *wqkv, *bqkv, *wo, *bo;
    rt_tensor *tok, *h0, *ln1, *s1, *att, *sat, *h1, *dh1, *datt, *dln1, *dh0;
    /* stage B */
    rt_param *g2, *be2, *wfc, *bfc, *wpr, *bpr, *whd;
    rt_tensor *x, *lab, *ln2, *s2, *f, *gf, *m, *h2, *z, *dz, *dh2, *dm, *dgf, *df, *dln2, *dx;
} gpt;

static rt_tensor *t3(rt_pool *P, int64_t n, int64_t k) /* [n, T, k] */
{
    return rt_tensor_new(P, RT_F32, 3, (int64_t[]){n, T, k});
}

static void build(gpt *g, rt_pool *P, const rt_comm *ca, const rt_comm *cb, uint64_t seed)
{
    int64_t e;
    g->ca = ca;
    g->cb = cb;
    g->P = P;
    g->ps = rt_params_new(P);
    if (rt_comm_member(ca)) {
        rt_comm_shard(ca, B, &g->a0, &e);
        int64_t n = g->na = e - g->a0;
        g->wte = rt_param_new(g->ps, "wte", ca, 2, (int64_t[]){V, D});
        g->wpe = rt_param_new(g->ps, "wpe", ca, 2, (int64_t[]){T, D});
        g->g1 = rt_param_new(g->ps, "ln1.g", ca, 1, (int64_t[]){D});
        g->be1 = rt_param_new(g->ps, "ln1.b", ca, 1, (int64_t[]){D});
        g->wqkv = rt_param_new(g->ps, "attn.wqkv", ca, 2, (int64_t[]){3 * D, D});
        g->bqkv = rt_param_new(g->ps, "attn.bqkv", ca, 1, (int64_t[]){3 * D});
        g->wo = rt_param_new(g->ps, "attn.wo", ca, 2, (int64_t[]){D, D});
        g->bo = rt_param_new(g->ps, "attn.bo", ca, 1, (int64_t[]){D});
        rt_init_normal(g->wte->value, 0, 0.5f, seed, 1, 0);
        rt_init_normal(g->wpe->value, 0, 0.1f, seed, 1, 1);
        rt_init_const(g->g1->value, 1.0f);
        rt_init_normal(g->wqkv->value, 0, 0.3f, seed, 2, 0);
        rt_init_normal(g->wo->value, 0, 0.3f, seed, 2, 1);
        g->tok = rt_tensor_new(P, RT_I32, 2, (int64_t[]){n, T});
        g->h0 = t3(P, n, D);
        g->ln1 = t3(P, n, D);
        g->s1 = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2 * n * T});
        g->att = t3(P, n, D);
        g->sat = rt_tensor_new(P, RT_F32, 1, (int64_t[]){rt_attention_saved_size(n, T, D, H)});
        g->h1 = t3(P, n, D);
        g->dh1 = t3(P, n, D);
        g->datt = t3(P, n, D);
        g->dln1 = t3(P, n, D);
        g->dh0 = t3(P, n, D);
    }
    if (rt_comm_member(cb)) {
        rt_comm_shard(cb, B, &g->b0, &e);
        int64_t n = g->nb = e - g->b0;
        g->g2 = rt_param_new(g->ps, "ln2.g", cb, 1, (int64_t[]){D});
        g->be2 = rt_param_new(g->ps, "ln2.b", cb, 1, (int64_t[]){D});
        g->wfc = rt_param_new(g->ps, "mlp.fc.w", cb, 2, (int64_t[]){F, D});
        g->bfc = rt_param_new(g->ps, "mlp.fc.b", cb, 1, (int64_t[]){F});
        g->wpr = rt_param_new(g->ps, "mlp.proj.w", cb, 2, (int64_t[]){D, F});
        g->bpr = rt_param_new(g->ps, "mlp.proj.b", cb, 1, (int64_t[]){D});
        g->whd = rt_param_new(g->ps, "head.w", cb, 2, (int64_t[]){V, D});
        rt_init_const(g->g2->value, 1.0f);
        rt_init_kaiming_uniform(g->wfc->value, D, seed, 3, 0);
        rt_init_kaiming_uniform(g->bfc->value, D, seed, 3, 1);
        rt_init_kaiming_uniform(g->wpr->value, F, seed, 4, 0);
        rt_init_kaiming_uniform(g->whd->value, D, seed, 5, 0);
        g->x = t3(P, n, D);
        g->lab = rt_tensor_new(P, RT_I32, 2, (int64_t[]){n, T});
        g->ln2 = t3(P, n, D);
        g->s2 = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2 * n * T});
        g->f = t3(P, n, F);
        g->gf = t3(P, n, F);
        g->m = t3(P, n, D);
        g->h2 = t3(P, n, D);
        g->z = t3(P, n, V);
        g->dz = t3(P, n, V);
        g->dh2 = t3(P, n, D);
        g->dm = t3(P, n, F);
        g->dgf = t3(P, n, F);
        g->df = t3(P, n, F);
        g->dln2 = t3(P, n, D);
        g->dx = t3(P, n, D);
    }
}

static double step(gpt *g, rt_data *data, int64_t s, const rt_adam *opt)
{
    double local = 0.0;
    rt_step_begin(s);
    rt_params_zero_grad(g->ps);
    if (rt_comm_member(g->ca)) {
        rt_data_batch(data, s, B, g->a0, g->a0 + g->na, g->tok, NULL);
        rt_embedding_fwd(g->tok, g->wte->value, g->wpe->value, g->h0);
        rt_layernorm_fwd(g->h0, g->g1->value, g->be1->value, 1e-5f, g->s1, g->ln1);
        rt_attention_fwd(g->P, g->ln1, g->wqkv->value, g->bqkv->value, g->wo->value, g->bo->value,
                         H, g->sat, g->att);
        rt_add_fwd(g->h0, g->att, g->h1);
    }
    rt_reshard(g->h1, g->ca, g->x, g->cb, B, T * D);
    if (rt_comm_member(g->cb)) {
        rt_data_batch(data, s, B, g->b0, g->b0 + g->nb, NULL, g->lab);
        rt_layernorm_fwd(g->x, g->g2->value, g->be2->value, 1e-5f, g->s2, g->ln2);
        rt_linear_fwd(g->ln2, g->wfc->value, g->bfc->value, g->f);
        rt_gelu_fwd(g->f, g->gf);
        rt_linear_fwd(g->gf, g->wpr->value, g->bpr->value, g->m);
        rt_add_fwd(g->x, g->m, g->h2);
        rt_linear_fwd(g->h2, g->whd->value, NULL, g->z);
        local = rt_cross_entropy_fwd(g->z, g->lab, (int64_t)B * T);
        rt_cross_entropy_bwd(g->z, g->lab, (int64_t)B * T, g->dz);
        rt_linear_bwd(g->h2, g->whd->value, g->dz, g->dh2, g->whd->grad, NULL);
        /* h2 = x + m: dx = dh2 (+ the MLP path below), dm = dh2 */
        rt_linear_bwd(g->gf, g->wpr->value, g->dh2, g->dgf, g->wpr->grad, g->bpr->grad);
        rt_gelu_bwd(g->f, g->dgf, g->df);
        rt_linear_bwd(g->ln2, g->wfc->value, g->df, g->dln2, g->wfc->grad, g->bfc->grad);
        rt_layernorm_bwd(g->x, g->g2->value, g->s2, g->dln2, g->dx, g->g2->grad, g->be2->grad);
        rt_accumulate(g->dx, g->dh2);
    }
    double loss = rt_world_sum(local);
    rt_reshard(g->dx, g->cb, g->dh1, g->ca, B, T * D);
    if (rt_comm_member(g->ca)) {
        /* h1 = h0 + att: dh0 = dh1 + d(att path) */
        rt_attention_bwd(g->P, g->ln1, g->wqkv->value, g->wo->value, H, g->sat, g->dh1, g->dln1,
                         g->wqkv->grad, g->bqkv->grad, g->wo->grad, g->bo->grad);
        rt_layernorm_bwd(g->h0, g->g1->value, g->s1, g->dln1, g->dh0, g->g1->grad, g->be1->grad);
        rt_accumulate(g->dh0, g->dh1);
        rt_embedding_bwd(g->tok, g->dh0, g->wte->grad, g->wpe->grad);
    }
    rt_params_allreduce_grads(g->ps);
    rt_adam_step(g->ps, opt);
    rt_step_end(s);
    return loss;
}

int main(int argc, char **argv)
{
    const rt_options *o = rt_init(&argc, &argv, "test_gpt_burst");
    rt_check_world_size(4);
    rt_pool *P = rt_pool_new();
    rt_data *d = rt_data_open(o, 1, (int64_t[]){T}, RT_I32, V, V, T);
    rt_comm *ca = rt_comm_new(4, (int[]){0, 1, 2, 3}), *cb = rt_comm_new(2, (int[]){2, 1});
    rt_comm *one = rt_comm_new(1, (int[]){0});
    rt_adam opt = {.lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0};
    gpt burst = {0}, ref = {0};
    build(&burst, P, ca, cb, o->seed);
    build(&ref, P, one, one, o->seed);
    double lb[STEPS], lr[STEPS];
    for (int s = 0; s < STEPS; s++)
        lb[s] = step(&burst, d, s, &opt);
    for (int s = 0; s < STEPS; s++)
        lr[s] = step(&ref, d, s, &opt);
    if (rt_rank() == 0)
        for (int s = 0; s < STEPS; s++) {
            double rel = fabs(lb[s] - lr[s]) / fabs(lr[s]);
            CHECK(rel <= 1e-5, "step %d: burst loss %.9f, one-rank loss %.9f", s, lb[s], lr[s]);
            printf("step %d  loss burst %.7f  one rank %.7f\n", s, lb[s], lr[s]);
        }
    if (rt_rank() == 0)
        CHECK(lb[STEPS - 1] < lb[0], "the loss does not decrease");
    rt_data_close(d);
    rt_pool_free(P);
    int failed = (int)rt_world_sum(check_failures);
    if (rt_rank() == 0)
        printf("test_gpt_burst: %s\n", failed ? "FAILED" : "burst plan equals the one-rank run");
    rt_finalize();
    return failed ? 1 : 0;
}
