/* cpu/pool.c: max and average pooling on oneDNN, global average pooling as a plain loop.
 * One cache entry per layer shape holds the forward and backward primitives on the
 * runtime's NCHW tensors (pooling reads each element about once, so reordering to a
 * blocked layout would cost more than it saves). Max pooling runs oneDNN's training
 * forward, whose workspace records each window's argmax; the forward keeps it for the same
 * layer's backward, which therefore never recomputes the argmax (a backward without a
 * forward over the same input recomputes it by running the forward first).
 *
 * Window geometry: oneDNN's output size is (H + pad_l + pad_r - k)/s + 1 rounded down. The
 * floor mode of the runtime (and PyTorch) is symmetric padding; ceil mode adds the right
 * padding that makes the last window fit. Padding is ignored by max (PyTorch's -inf) and
 * counted by average pooling with count_include_pad, which divides by kh*kw; PyTorch
 * clips that divisor to the padded image for a ceil-mode window that reaches past it, so
 * that one case (count_include_pad, ceil mode, extra right padding) runs the reference
 * kernels of ref_nn.c. */
#include "onednn.h"
#include "ref.h"

#include <stdlib.h>
#include <string.h>

typedef struct pool_entry {
    bool fallback;
    bool have_bwd;
    rt_dnnl_prim fwd, bwd;
    size_t ws_bytes; /* max pooling: the workspace (argmax) per forward */
    dnnl_dims_t strides, kernel, pad_l, pad_r;
    dnnl_alg_kind_t alg;
    dnnl_memory_desc_t x_md, y_md;
} pool_entry;

static void pool_destroy(void *p)
{
    pool_entry *e = p;
    rt_dnnl_free(&e->fwd);
    rt_dnnl_free(&e->bwd);
    free(e);
}

static pool_entry *pool_entry_for(const rt_pool_dims *d, const rt_pool2d_attrs *a, bool max,
                                  const char *op)
{
    /* Right padding that makes oneDNN's rounded-down size the runtime's output size. */
    int64_t pr_h = a->ph, pr_w = a->pw;
    if (a->ceil_mode) {
        pr_h = (d->OH - 1) * a->sh + a->kh - d->H - a->ph;
        pr_w = (d->OW - 1) * a->sw + a->kw - d->W - a->pw;
        pr_h = pr_h < a->ph ? a->ph : pr_h;
        pr_w = pr_w < a->pw ? a->pw : pr_w;
    }
    const dnnl_alg_kind_t alg = max              ? dnnl_pooling_max
                                : a->exclude_pad ? dnnl_pooling_avg_exclude_padding
                                                 : dnnl_pooling_avg_include_padding;
    rt_dnnl_key k = {
        {2, alg, d->N, d->C, d->H, d->W, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw, pr_h, pr_w}};
    pool_entry *e = rt_dnnl_find(&k);
    if (e)
        return e;
    e = rt_xcalloc(1, sizeof *e, op);
    rt_dnnl_insert(&k, e, pool_destroy);
    e->alg = alg;
    const bool clipped_divisor =
        alg == dnnl_pooling_avg_include_padding && (pr_h > a->ph || pr_w > a->pw);
    if (clipped_divisor || d->N * d->C * d->H * d->W > INT32_MAX) {
        e->fallback = true;
        return e;
    }
    e->x_md = rt_dnnl_plain(4, (int64_t[]){d->N, d->C, d->H, d->W});
    e->y_md = rt_dnnl_plain(4, (int64_t[]){d->N, d->C, d->OH, d->OW});
    memcpy(e->strides, (dnnl_dims_t){a->sh, a->sw}, 2 * sizeof(dnnl_dim_t));
    memcpy(e->kernel, (dnnl_dims_t){a->kh, a->kw}, 2 * sizeof(dnnl_dim_t));
    memcpy(e->pad_l, (dnnl_dims_t){a->ph, a->pw}, 2 * sizeof(dnnl_dim_t));
    memcpy(e->pad_r, (dnnl_dims_t){pr_h, pr_w}, 2 * sizeof(dnnl_dim_t));
    dnnl_pooling_desc_t pd;
    if (dnnl_pooling_forward_desc_init(&pd, dnnl_forward_training, alg, &e->x_md, &e->y_md,
                                       e->strides, e->kernel, e->pad_l, e->pad_r) != dnnl_success ||
        !rt_dnnl_make(&e->fwd, &pd, NULL, op)) {
        e->fallback = true;
        return e;
    }
    const dnnl_memory_desc_t *ws = rt_dnnl_md(&e->fwd, dnnl_query_workspace_md);
    e->ws_bytes = ws ? dnnl_memory_desc_get_size(ws) : 0;
    return e;
}

static void pool_make_bwd(pool_entry *e, const char *op)
{
    if (e->have_bwd || e->fallback)
        return;
    dnnl_pooling_desc_t bd;
    rt_dnnl_ok(dnnl_pooling_backward_desc_init(&bd, e->alg, &e->x_md, &e->y_md, e->strides,
                                               e->kernel, e->pad_l, e->pad_r),
               op, "describing the backward pooling");
    if (!rt_dnnl_make(&e->bwd, &bd, e->fwd.pd, op)) {
        e->fallback = true;
        return;
    }
    e->have_bwd = true;
}

/* Runs the forward into y; for max pooling the workspace goes to ws. pad: the scratchpad
 * (NULL: from the backend's scratch). */
static void pool_forward(pool_entry *e, const void *x, void *y, void *ws, void *pad, const char *op)
{
    if (!pad && e->fwd.scratch)
        pad = rt_dnnl_scratch(NULL, e->fwd.scratch);
    rt_dnnl_arg args[3] = {{DNNL_ARG_SRC, (void *)x}, {DNNL_ARG_DST, y}, {DNNL_ARG_WORKSPACE, ws}};
    rt_dnnl_run(&e->fwd, e->ws_bytes ? 3 : 2, args, pad, op);
}

static bool empty(const rt_pool_dims *d)
{
    return d->N * d->C * d->H * d->W == 0 || d->OH * d->OW == 0;
}

void rt_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    const char *op = "maxpool2d_fwd";
    rt_pool_dims d = rt_pool2d_check(op, x, a, y, "output");
    if (empty(&d))
        return;
    pool_entry *e = pool_entry_for(&d, a, true, op);
    if (e->fallback) {
        rt_ref_maxpool2d_fwd(x, a, y);
        return;
    }
    pool_forward(e, x->data, y->data, rt_dnnl_keep(e, x->data, e->ws_bytes), NULL, op);
}

void rt_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                      rt_tensor *dx)
{
    const char *op = "maxpool2d_bwd";
    rt_pool_dims d = rt_pool2d_check(op, x, a, dy, "output gradient");
    rt_check_f32(dx, x->numel, op, "input gradient");
    if (empty(&d)) {
        rt_tensor_zero(dx);
        return;
    }
    pool_entry *e = pool_entry_for(&d, a, true, op);
    pool_make_bwd(e, op);
    if (e->fallback) {
        rt_ref_maxpool2d_bwd(x, dy, a, dx);
        return;
    }
    void *ws = rt_dnnl_kept(e, x->data, e->ws_bytes);
    if (!ws) {
        /* No forward kept the argmax: run one (its output is not needed). */
        ws = rt_dnnl_keep(e, x->data, e->ws_bytes);
        const size_t ybytes = rt_dnnl_align((size_t)dy->numel * sizeof(float));
        char *y = rt_dnnl_scratch(NULL, ybytes + e->fwd.scratch);
        pool_forward(e, x->data, y, ws, e->fwd.scratch ? y + ybytes : NULL, op);
    }
    void *pad = rt_dnnl_scratch(NULL, e->bwd.scratch);
    rt_dnnl_arg args[3] = {
        {DNNL_ARG_DIFF_DST, dy->data}, {DNNL_ARG_DIFF_SRC, dx->data}, {DNNL_ARG_WORKSPACE, ws}};
    rt_dnnl_run(&e->bwd, 3, args, e->bwd.scratch ? pad : NULL, op);
}

void rt_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    const char *op = "avgpool2d_fwd";
    rt_pool_dims d = rt_pool2d_check(op, x, a, y, "output");
    if (empty(&d))
        return;
    pool_entry *e = pool_entry_for(&d, a, false, op);
    if (e->fallback) {
        rt_ref_avgpool2d_fwd(x, a, y);
        return;
    }
    pool_forward(e, x->data, y->data, NULL, NULL, op);
}

void rt_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx)
{
    const char *op = "avgpool2d_bwd";
    rt_pool_dims d = rt_pool2d_check(op, dx, a, dy, "output gradient");
    if (empty(&d)) {
        rt_tensor_zero(dx);
        return;
    }
    pool_entry *e = pool_entry_for(&d, a, false, op);
    pool_make_bwd(e, op);
    if (e->fallback) {
        rt_ref_avgpool2d_bwd(dy, a, dx);
        return;
    }
    void *pad = rt_dnnl_scratch(NULL, e->bwd.scratch);
    rt_dnnl_arg args[2] = {{DNNL_ARG_DIFF_DST, dy->data}, {DNNL_ARG_DIFF_SRC, dx->data}};
    rt_dnnl_run(&e->bwd, 2, args, e->bwd.scratch ? pad : NULL, op);
}

/* ---- global average pooling: one mean per plane ---------------------------------------- */

void rt_global_avgpool_fwd(const rt_tensor *x, rt_tensor *y)
{
    const char *op = "global_avgpool_fwd";
    rt_global_pool_check(op, x, "input", y, "output");
    const int64_t NC = x->shape[0] * x->shape[1], HW = x->shape[2] * x->shape[3];
    for (int64_t p = 0; p < NC; p++) {
        const float *plane = rt_f32(x) + p * HW;
        double s = 0.0;
        for (int64_t i = 0; i < HW; i++)
            s += plane[i];
        rt_f32(y)[p] = (float)(s / (double)HW);
    }
}

void rt_global_avgpool_bwd(const rt_tensor *dy, rt_tensor *dx)
{
    const char *op = "global_avgpool_bwd";
    rt_global_pool_check(op, dx, "input gradient", dy, "output gradient");
    const int64_t NC = dx->shape[0] * dx->shape[1], HW = dx->shape[2] * dx->shape[3];
    for (int64_t p = 0; p < NC; p++) {
        float v = rt_f32(dy)[p] / (float)HW;
        float *plane = rt_f32(dx) + p * HW;
        for (int64_t i = 0; i < HW; i++)
            plane[i] = v;
    }
}
