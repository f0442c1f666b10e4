/* optim.c: parameters and what updates them. An rt_params set lists the parameters
 * and buffers this rank holds, each tagged with the rank set of its layer; it zeroes
 * gradients, all-reduces them within each rank set (so every replica sees the
 * full-batch gradient, since each rank's loss is already divided by the global batch),
 * and applies SGD or Adam with PyTorch's exact update rules. Optimizer state is made
 * on first use and is what checkpoint.c saves alongside the values. */
#include "internal.h"

#include <math.h>
#include <string.h>

struct rt_params {
    rt_pool *pool;
    rt_param **items;
    int n, cap;
    int64_t adam_t; /* Adam steps taken */
};

rt_params *rt_params_new(rt_pool *pool)
{
    rt_params *ps = rt_pool_alloc(pool, sizeof *ps);
    ps->pool = pool;
    return ps;
}

static rt_param *add(rt_params *ps, const char *name, const rt_comm *comm, int ndim,
                     const int64_t *shape, bool trainable)
{
    if (!comm || !rt_comm_member(comm))
        rt_fatal("param_new", "parameter '%s' registered on a rank outside its rank set", name);
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 64;
        rt_param **items = rt_pool_alloc(ps->pool, (size_t)cap * sizeof *items);
        if (ps->n)
            memcpy(items, ps->items, (size_t)ps->n * sizeof *items);
        ps->items = items;
        ps->cap = cap;
    }
    rt_param *p = rt_pool_alloc(ps->pool, sizeof *p);
    p->name = name;
    p->comm = comm;
    p->value = rt_tensor_new(ps->pool, RT_F32, ndim, shape);
    p->grad = trainable ? rt_tensor_new(ps->pool, RT_F32, ndim, shape) : NULL;
    ps->items[ps->n++] = p;
    return p;
}

rt_param *rt_param_new(rt_params *ps, const char *name, const rt_comm *comm, int ndim,
                       const int64_t *shape)
{
    return add(ps, name, comm, ndim, shape, true);
}

rt_param *rt_buffer_new(rt_params *ps, const char *name, const rt_comm *comm, int ndim,
                        const int64_t *shape)
{
    return add(ps, name, comm, ndim, shape, false);
}

int rt_params_count(const rt_params *ps)
{
    return ps->n;
}
rt_param *rt_params_at(const rt_params *ps, int i)
{
    return ps->items[i];
}
int64_t rt_params_adam_step(const rt_params *ps)
{
    return ps->adam_t;
}
void rt_params_set_adam_step(rt_params *ps, int64_t t)
{
    ps->adam_t = t;
}

void rt_params_zero_grad(rt_params *ps)
{
    for (int i = 0; i < ps->n; i++)
        if (ps->items[i]->grad)
            rt_tensor_zero(ps->items[i]->grad);
}

void rt_params_allreduce_grads(rt_params *ps)
{
    for (int i = 0; i < ps->n; i++) {
        rt_param *p = ps->items[i];
        if (p->grad)
            rt_allreduce_sum(p->comm, rt_f32(p->grad), p->grad->numel);
    }
}

rt_tensor *rt_param_state(rt_params *ps, rt_param *p, int k)
{
    if (!p->state[k])
        p->state[k] = rt_tensor_new(ps->pool, RT_F32, p->value->ndim, p->value->shape);
    return p->state[k];
}

void rt_sgd_step(rt_params *ps, const rt_sgd *cfg)
{
    const float lr = cfg->lr, mom = cfg->momentum, wd = cfg->weight_decay;
    for (int i = 0; i < ps->n; i++) {
        rt_param *p = ps->items[i];
        if (!p->grad)
            continue;
        float *w = rt_f32(p->value), *g = rt_f32(p->grad);
        const int64_t n = p->value->numel;
        if (mom == 0.0f) {
            for (int64_t j = 0; j < n; j++)
                w[j] -= lr * (g[j] + wd * w[j]);
            continue;
        }
        /* A parameter whose buffer does not exist yet takes its first step. */
        bool first = p->state[0] == NULL;
        float *buf = rt_f32(rt_param_state(ps, p, 0));
        for (int64_t j = 0; j < n; j++) {
            float d = g[j] + wd * w[j];
            buf[j] = first ? d : mom * buf[j] + d;
            float upd = cfg->nesterov ? d + mom * buf[j] : buf[j];
            w[j] -= lr * upd;
        }
    }
}

void rt_adam_step(rt_params *ps, const rt_adam *cfg)
{
    ps->adam_t++;
    const double t = (double)ps->adam_t;
    const float b1 = cfg->beta1, b2 = cfg->beta2, wd = cfg->weight_decay;
    const float bc1 = (float)(1.0 - pow(cfg->beta1, t));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(cfg->beta2, t));
    const float step = cfg->lr / bc1;
    for (int i = 0; i < ps->n; i++) {
        rt_param *p = ps->items[i];
        if (!p->grad)
            continue;
        float *w = rt_f32(p->value), *g = rt_f32(p->grad);
        float *m = rt_f32(rt_param_state(ps, p, 0)), *v = rt_f32(rt_param_state(ps, p, 1));
        const int64_t n = p->value->numel;
        for (int64_t j = 0; j < n; j++) {
            float d = g[j] + wd * w[j];
            m[j] = b1 * m[j] + (1.0f - b1) * d;
            v[j] = b2 * v[j] + (1.0f - b2) * d * d;
            w[j] -= step * m[j] / (sqrtf(v[j]) / bc2_sqrt + cfg->eps);
        }
    }
}
