/* bridge.c: the CPU backend's host code applied to device tensors. Data batches (of
 * Fashion-MNIST; synthetic ones are hashed on the device from the same keys), weight
 * initialisation and checkpoints are computed on the host by the very code of
 * the CPU backend (data.c, rng.c, checkpoint.c, compiled here with those functions
 * renamed rt_host_*), so a CUDA run reads the same samples, starts from the same
 * weights and writes the same checkpoint format as a CPU run; the wrappers here only
 * stage tensors through pinned host memory. The optimizers and the gradient
 * all-reduce run on the device (optim.cu, one NCCL group for all gradients). */
#include "cuda_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rt_host_data_batch(rt_data *d, int64_t step, int64_t B, int64_t s0, int64_t s1, rt_tensor *x,
                        rt_tensor *labels);
void rt_host_data_test_batch(rt_data *d, int64_t first, int64_t count, rt_tensor *x,
                             rt_tensor *labels);
void rt_host_init_uniform(rt_tensor *t, float bound, uint64_t seed, int layer_id, int param_index);
void rt_host_init_normal(rt_tensor *t, float mean, float std, uint64_t seed, int layer_id,
                         int param_index);
void rt_host_init_kaiming_uniform(rt_tensor *t, int64_t fan_in, uint64_t seed, int layer_id,
                                  int param_index);
void rt_host_checkpoint_save(const char *dir, const rt_params *ps, int64_t next_step);
int64_t rt_host_checkpoint_load(const char *dir, rt_params *ps);

/* A host tensor with t's header whose data live in `mem`. */
static rt_tensor host_twin(const rt_tensor *t, void *mem)
{
    rt_tensor h = *t;
    h.data = mem;
    return h;
}

/* ---- data ------------------------------------------------------------------------ */

static void batch_through_host(rt_data *d, bool test, int64_t a, int64_t b, int64_t c, int64_t e,
                               rt_tensor *x, rt_tensor *labels)
{
    rt_synth_keys k;
    if (rt_host_data_synthetic(d, test, a, b, c, e, x, labels, &k)) {
        rt_cuda_synth(&k, x ? x->data : NULL, labels ? rt_i32(labels) : NULL);
        return;
    }
    size_t xb = x ? (size_t)x->numel * 4 : 0, lb = labels ? (size_t)labels->numel * 4 : 0;
    char *h = rt_cuda_host_staging(xb + lb, "data");
    rt_tensor hx, hl;
    if (x)
        hx = host_twin(x, h);
    if (labels)
        hl = host_twin(labels, h + xb);
    if (test)
        rt_host_data_test_batch(d, a, b, x ? &hx : NULL, labels ? &hl : NULL);
    else
        rt_host_data_batch(d, a, b, c, e, x ? &hx : NULL, labels ? &hl : NULL);
    if (x)
        rt_cuda_h2d(x->data, h, xb, "data");
    if (labels)
        rt_cuda_h2d(labels->data, h + xb, lb, "data");
}

void rt_data_batch(rt_data *d, int64_t step, int64_t B, int64_t s0, int64_t s1, rt_tensor *x,
                   rt_tensor *labels)
{
    batch_through_host(d, false, step, B, s0, s1, x, labels);
}

void rt_data_test_batch(rt_data *d, int64_t first, int64_t count, rt_tensor *x, rt_tensor *labels)
{
    batch_through_host(d, true, first, count, 0, 0, x, labels);
}

/* ---- initialisation ------------------------------------------------------------------ */

#define INIT_THROUGH_HOST(t, call)                                           \
    do {                                                                     \
        rt_check((t), RT_F32, -1, "init", "tensor");                         \
        size_t bytes_ = (size_t)(t)->numel * 4;                              \
        rt_tensor h_ = host_twin((t), rt_cuda_host_staging(bytes_, "init")); \
        call;                                                                \
        rt_cuda_h2d((t)->data, h_.data, bytes_, "init");                     \
    } while (0)

void rt_init_uniform(rt_tensor *t, float bound, uint64_t seed, int layer_id, int param_index)
{
    INIT_THROUGH_HOST(t, rt_host_init_uniform(&h_, bound, seed, layer_id, param_index));
}

void rt_init_normal(rt_tensor *t, float mean, float std, uint64_t seed, int layer_id,
                    int param_index)
{
    INIT_THROUGH_HOST(t, rt_host_init_normal(&h_, mean, std, seed, layer_id, param_index));
}

void rt_init_kaiming_uniform(rt_tensor *t, int64_t fan_in, uint64_t seed, int layer_id,
                             int param_index)
{
    INIT_THROUGH_HOST(t, rt_host_init_kaiming_uniform(&h_, fan_in, seed, layer_id, param_index));
}

void rt_init_const(rt_tensor *t, float value)
{
    rt_check(t, RT_F32, -1, "init", "tensor");
    rt_cuda_fill(rt_f32(t), t->numel, value);
}

/* ---- checkpoints --------------------------------------------------------------------- */

/* checkpoint.c reads and writes p->value->data and p->state[k]->data; for the duration
 * of a save or load those point at host copies. */
typedef struct {
    rt_tensor *t;
    void *dev, *host;
} swapped;

static swapped *swap_to_host(const rt_params *ps, int *count, bool copy)
{
    int n = rt_params_count(ps), k = 0;
    swapped *sw = rt_xcalloc((size_t)n * 3 + 1, sizeof *sw, "checkpoint");
    for (int i = 0; i < n; i++) {
        rt_param *p = rt_params_at(ps, i);
        rt_tensor *ts[3] = {p->value, p->state[0], p->state[1]};
        for (int j = 0; j < 3; j++) {
            if (!ts[j])
                continue;
            size_t bytes = (size_t)ts[j]->numel * 4;
            /* Zeroed: a load leaves state the file does not hold untouched, and that
             * must reach the device as zeros. */
            sw[k] = (swapped){ts[j], ts[j]->data, rt_xcalloc(1, bytes, "checkpoint")};
            if (copy)
                rt_cuda_d2h(sw[k].host, sw[k].dev, bytes, "checkpoint");
            ts[j]->data = sw[k].host;
            k++;
        }
    }
    *count = k;
    return sw;
}

static void swap_back(swapped *sw, int k, bool copy)
{
    for (int i = 0; i < k; i++) {
        sw[i].t->data = sw[i].dev;
        if (copy)
            rt_cuda_h2d(sw[i].dev, sw[i].host, (size_t)sw[i].t->numel * 4, "checkpoint");
        free(sw[i].host);
    }
    free(sw);
}

void rt_checkpoint_save(const char *dir, const rt_params *ps, int64_t next_step)
{
    int k;
    swapped *sw = swap_to_host(ps, &k, true);
    rt_host_checkpoint_save(dir, ps, next_step);
    swap_back(sw, k, false);
}

int64_t rt_checkpoint_load(const char *dir, rt_params *ps)
{
    /* checkpoint.c makes missing optimizer state with rt_param_state while loading;
     * make it (on the device) beforehand so every tensor it writes is a host copy. A
     * zero SGD buffer gives exactly the first-step update, so making it early is
     * harmless (optim.cu does not special-case the first step). */
    for (int i = 0; i < rt_params_count(ps); i++) {
        rt_param *p = rt_params_at(ps, i);
        if (p->grad) {
            rt_param_state(ps, p, 0);
            rt_param_state(ps, p, 1);
        }
    }
    int k;
    swapped *sw = swap_to_host(ps, &k, false);
    int64_t step = rt_host_checkpoint_load(dir, ps);
    swap_back(sw, k, true);
    return step;
}

static rt_params *attached;

int64_t rt_checkpoint_attach(rt_params *ps)
{
    attached = ps;
    if (rt_opts_g.resume)
        return rt_checkpoint_load(rt_opts_g.checkpoint_dir, ps);
    return 0;
}

void rt_checkpoint_maybe_save(int64_t step)
{
    if (!attached || rt_opts_g.checkpoint_every <= 0)
        return;
    if ((step + 1) % rt_opts_g.checkpoint_every == 0)
        rt_checkpoint_save(rt_opts_g.checkpoint_dir, attached, step + 1);
}

/* ---- optimizers and gradient all-reduce ---------------------------------------------- */

void rt_params_allreduce_grads(rt_params *ps)
{
    rt_nccl_group_begin();
    for (int i = 0; i < rt_params_count(ps); i++) {
        rt_param *p = rt_params_at(ps, i);
        if (p->grad)
            rt_allreduce_sum(p->comm, rt_f32(p->grad), p->grad->numel);
    }
    rt_nccl_group_end("allreduce");
}

void rt_sgd_step(rt_params *ps, const rt_sgd *cfg)
{
    for (int i = 0; i < rt_params_count(ps); i++) {
        rt_param *p = rt_params_at(ps, i);
        if (!p->grad)
            continue;
        float *buf = cfg->momentum != 0.0f ? rt_f32(rt_param_state(ps, p, 0)) : NULL;
        rt_cuda_sgd(rt_f32(p->value), rt_f32(p->grad), buf, p->value->numel, cfg->lr, cfg->momentum,
                    cfg->weight_decay, cfg->nesterov);
    }
}

void rt_adam_step(rt_params *ps, const rt_adam *cfg)
{
    int64_t t = rt_params_adam_step(ps) + 1;
    rt_params_set_adam_step(ps, t);
    const float bc1 = (float)(1.0 - pow(cfg->beta1, (double)t));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(cfg->beta2, (double)t));
    for (int i = 0; i < rt_params_count(ps); i++) {
        rt_param *p = rt_params_at(ps, i);
        if (!p->grad)
            continue;
        rt_cuda_adam(rt_f32(p->value), rt_f32(p->grad), rt_f32(rt_param_state(ps, p, 0)),
                     rt_f32(rt_param_state(ps, p, 1)), p->value->numel, cfg->lr / bc1, cfg->beta1,
                     cfg->beta2, cfg->eps, cfg->weight_decay, bc2_sqrt);
    }
}
