/* optim.c: parameters and what updates them. An rt_params set lists the parameters
 * and buffers this rank holds, each tagged with the rank set of its layer; it zeroes
 * gradients, all-reduces them within each rank set (so every replica sees the
 * full-batch gradient, since each rank's loss is already divided by the global batch),
 * and applies SGD or Adam with PyTorch's exact update rules: the loops over parameters
 * and the step counts live here, the per-element updates in each backend's kernels
 * (rt_sgd_update, rt_adam_update). Optimizer state is made on first use and is what
 * checkpoint.c saves alongside the values. */
#include "internal.h"

#include <math.h>
#include <string.h>

struct rt_params {
    rt_pool *pool;
    rt_param **items;
    int n, cap;
    int64_t adam_t;      /* Adam steps taken */
    rt_tensor *overflow; /* loss scaling's inf/nan flag (i32 [1]), made on first use */
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
    rt_grads_wait();
    for (int i = 0; i < ps->n; i++)
        if (ps->items[i]->grad)
            rt_tensor_zero(ps->items[i]->grad);
}

void rt_params_allreduce_grads(rt_params *ps)
{
    if (!rt_net.grad_start) { /* the backend's all-reduces, grouped (NCCL) */
        rt_net.group(true);
        for (int i = 0; i < ps->n; i++)
            if (ps->items[i]->grad)
                rt_allreduce_sum(ps->items[i]->comm, rt_f32(ps->items[i]->grad),
                                 ps->items[i]->grad->numel);
        rt_net.group(false);
        return;
    }
    for (int i = 0; i < ps->n; i++) {
        rt_param *p = ps->items[i];
        if (p->grad)
            rt_grad_allreduce_start(p->comm, rt_f32(p->grad), p->grad->numel);
    }
    rt_grads_wait();
}

/* Whether gradient all-reduces have been started and not yet waited for. */
static bool grads_pending;

void rt_grad_allreduce_start(const rt_comm *c, float *grad, int64_t n)
{
    if (!rt_comm_member(c) || rt_comm_size(c) == 1 || n == 0)
        return;
    if (!rt_net.grad_start) {
        rt_allreduce_sum(c, grad, n);
        return;
    }
    rt_net.grad_start(c, grad, n);
    grads_pending = true;
}

void rt_grad_allreduce_wait(const rt_comm *c, float *grad)
{
    /* Not started here (a non-member, one rank) or summed when started (no grad_start):
     * nothing to wait for. A background copy never waits for the foreground's. */
    if (!rt_comm_member(c) || rt_comm_size(c) == 1 || !rt_net.grad_start || !grads_pending ||
        rt_bg_running())
        return;
    if (!rt_net.grad_wait_one) {
        rt_grads_wait();
        return;
    }
    rt_trace_push("grad_allreduce.wait_one");
    rt_wait_begin("allreduce");
    rt_net.grad_wait_one(c, grad);
    rt_wait_end();
    rt_trace_pop();
}

void rt_grads_wait(void)
{
    /* A background copy's optimizer (inside a slice, inside one of the foreground's
     * waits) has no all-reduces of its own (one rank): it must not send the foreground's
     * open buckets early, which would cut this rank's buckets unlike its peers'. */
    if (!grads_pending || rt_bg_running())
        return;
    grads_pending = false;
    rt_trace_push("grad_allreduce.wait");
    rt_wait_begin("allreduce");
    rt_net.grad_wait();
    rt_wait_end();
    rt_trace_pop();
}

int32_t *rt_params_overflow_flag(rt_params *ps)
{
    if (!ps->overflow)
        ps->overflow = rt_tensor_new(ps->pool, RT_I32, 1, (int64_t[]){1});
    return rt_i32(ps->overflow);
}

rt_tensor *rt_param_state(rt_params *ps, rt_param *p, int k)
{
    if (!p->state[k])
        p->state[k] = rt_tensor_new(ps->pool, RT_F32, p->value->ndim, p->value->shape);
    return p->state[k];
}

void rt_sgd_step(rt_params *ps, const rt_sgd *cfg)
{
    rt_grads_wait();
    rt_trace_push("optimizer.step"); /* burstc profile times the update apart */
    for (int i = 0; i < ps->n; i++) {
        rt_param *p = ps->items[i];
        if (!p->grad)
            continue;
        /* A new momentum buffer is zero, which gives PyTorch's first step (buf = g). */
        float *buf = cfg->momentum != 0.0f ? rt_f32(rt_param_state(ps, p, 0)) : NULL;
        rt_sgd_update(rt_f32(p->value), rt_f32(p->grad), buf, p->value->numel, cfg->lr,
                      cfg->momentum, cfg->weight_decay, cfg->nesterov);
    }
    rt_trace_pop();
}

void rt_adam_step(rt_params *ps, const rt_adam *cfg)
{
    rt_grads_wait();
    rt_trace_push("optimizer.step");
    ps->adam_t++;
    const double t = (double)ps->adam_t;
    const float bc1 = (float)(1.0 - pow(cfg->beta1, t));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(cfg->beta2, t));
    for (int i = 0; i < ps->n; i++) {
        rt_param *p = ps->items[i];
        if (!p->grad)
            continue;
        rt_adam_update(rt_f32(p->value), rt_f32(p->grad), rt_f32(rt_param_state(ps, p, 0)),
                       rt_f32(rt_param_state(ps, p, 1)), p->value->numel, cfg->lr / bc1, cfg->beta1,
                       cfg->beta2, cfg->eps, cfg->weight_decay, bc2_sqrt);
    }
    rt_trace_pop();
}
