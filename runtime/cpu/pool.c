/* cpu/pool.c: max and average pooling on oneDNN, except max pooling's common 2x2, stride-2
 * window (an own kernel: max2x2_*), and global average pooling as a plain loop.
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

/* ---- the 2x2, stride-2 window without padding: an own kernel -------------------------- */

/* The common case (VGG, the small CNNs): every window lies inside the image and no two
 * overlap. oneDNN's NCHW pooling walks it one window at a time; this kernel reads two rows
 * and writes one, in loops the compiler vectorises (two-element interleaved loads, selects).
 * The forward keeps each window's argmax (0..3, row-major in the window; int32, as the
 * vectorised loop computes it: bytes would need packing that costs more than they save), so
 * the backward writes all four gradients of a window from it, zeros included, without
 * recomputing anything and without a zeroing pass. An odd last row or column (floor mode)
 * lies in no window: its gradient is zero. Rows of at least 8 outputs (one AVX2 vector,
 * the block below); shorter ones go to oneDNN (tests/bench/runtime/bench_kernels.c,
 * 64x64x14x14: 7 outputs a row). */
static bool own_2x2(const rt_pool_dims *d, const rt_pool2d_attrs *a)
{
    return a->kh == 2 && a->kw == 2 && a->sh == 2 && a->sw == 2 && a->ph == 0 && a->pw == 0 &&
           d->OH == d->H / 2 && d->OW == d->W / 2 && d->OW >= 8;
}

/* A row runs in blocks of 8 outputs, loops of a fixed length that `omp simd` turns into
 * straight-line selects; the last block starts at OW - 8 and overlaps the one before it
 * (OW >= 8, own_2x2), writing the same values again. A scalar epilogue for the rest of the
 * row compiled to compare-and-branch code whose branches follow the data: pool1 of the
 * Fashion-MNIST CNN (OW = 14, 6 outputs a row in the epilogue) took 0.35 ms a step forward
 * on random inputs (burstc profile's synthetic data) against 0.21 ms on the dataset's
 * images (their ReLU'd zeros tie), and 0.90 ms in bench_kernels; blocks: 0.12, 0.10-0.12
 * and 0.20-0.28 ms. Without `restrict` and the pragma GCC unrolled the block into the
 * same branches. */
#define ROW_BLOCK 8

static inline int64_t row_block(int64_t o0, int64_t OW)
{
    return o0 + ROW_BLOCK <= OW ? o0 : OW - ROW_BLOCK;
}

/* One output row: the maximum by PyTorch's rule (an element replaces the current one when
 * it is larger or NaN, in row-major order within the window) and its offset. Bitwise |, not
 * ||: no branch for the vectoriser to if-convert. */
RT_VECTOR_SHORT static void max2x2_row(const float *r0, const float *r1, float *out, int32_t *arg,
                                       int64_t OW)
{
    for (int64_t o0 = 0; o0 < OW; o0 += ROW_BLOCK) {
        const int64_t base = row_block(o0, OW);
        const float *restrict p0 = r0 + 2 * base, *restrict p1 = r1 + 2 * base;
        float *restrict y = out + base;
        int32_t *restrict g = arg + base;
#pragma omp simd
        for (int i = 0; i < ROW_BLOCK; i++) {
            const float a = p0[2 * i], b = p0[2 * i + 1], c = p1[2 * i], e = p1[2 * i + 1];
            float mx = a;
            int32_t k = 0;
            bool take = (b > mx) | (b != b);
            mx = take ? b : mx;
            k = take ? 1 : k;
            take = (c > mx) | (c != c);
            mx = take ? c : mx;
            k = take ? 2 : k;
            take = (e > mx) | (e != e);
            mx = take ? e : mx;
            k = take ? 3 : k;
            y[i] = mx;
            g[i] = k;
        }
    }
}

RT_VECTOR_SHORT static void max2x2_bwd_row(const int32_t *arg, const float *g, float *d0, float *d1,
                                           int64_t OW)
{
    for (int64_t o0 = 0; o0 < OW; o0 += ROW_BLOCK) {
        const int64_t base = row_block(o0, OW);
        const int32_t *restrict ka = arg + base;
        const float *restrict gv = g + base;
        float *restrict q0 = d0 + 2 * base, *restrict q1 = d1 + 2 * base;
#pragma omp simd
        for (int i = 0; i < ROW_BLOCK; i++) {
            const int32_t k = ka[i];
            const float v = gv[i];
            const float z0 = k == 0 ? v : 0.0f, z1 = k == 1 ? v : 0.0f, z2 = k == 2 ? v : 0.0f,
                        z3 = k == 3 ? v : 0.0f;
            q0[2 * i] = z0;
            q0[2 * i + 1] = z1;
            q1[2 * i] = z2;
            q1[2 * i + 1] = z3;
        }
    }
}

static void max2x2_fwd(const rt_pool_dims *d, const float *x, float *y, int32_t *arg)
{
    const int64_t planes = d->N * d->C, H = d->H, W = d->W, OH = d->OH, OW = d->OW;
#pragma omp parallel for schedule(static) if (planes * H * W >= ((int64_t)1 << 16))
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = x + (p * H + 2 * oh) * W;
            const int64_t o = (p * OH + oh) * OW;
            max2x2_row(r0, r0 + W, y + o, arg + o, OW);
        }
}

static void max2x2_bwd(const rt_pool_dims *d, const int32_t *arg, const float *dy, float *dx)
{
    const int64_t planes = d->N * d->C, H = d->H, W = d->W, OH = d->OH, OW = d->OW;
#pragma omp parallel for schedule(static) if (planes * H * W >= ((int64_t)1 << 16))
    for (int64_t p = 0; p < planes; p++) {
        float *plane = dx + p * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            float *d0 = plane + 2 * oh * W;
            const int64_t o = (p * OH + oh) * OW;
            max2x2_bwd_row(arg + o, dy + o, d0, d0 + W, OW);
            if (W % 2) {
                d0[W - 1] = 0.0f;
                d0[2 * W - 1] = 0.0f;
            }
        }
        if (H % 2)
            memset(plane + (H - 1) * W, 0, (size_t)W * sizeof(float));
    }
}

/* ---- oneDNN ---------------------------------------------------------------------------- */

typedef struct pool_entry {
    bool own; /* max pooling 2x2, stride 2, unpadded: max2x2_*() below */
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
    if (max && own_2x2(d, a)) {
        e->own = true;
        return e;
    }
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
    if (e->have_bwd || e->fallback || e->own)
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
    if (e->own) {
        max2x2_fwd(&d, rt_f32(x), rt_f32(y),
                   rt_dnnl_keep(e, x->data, (size_t)y->numel * sizeof(int32_t)));
        return;
    }
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
    rt_check_act(dx, x->numel, op, "input gradient");
    if (empty(&d)) {
        rt_tensor_zero(dx);
        return;
    }
    pool_entry *e = pool_entry_for(&d, a, true, op);
    pool_make_bwd(e, op);
    if (e->own) {
        const size_t bytes = (size_t)dy->numel * sizeof(int32_t);
        int32_t *arg = rt_dnnl_kept(e, x->data, bytes);
        if (!arg) {
            /* No forward kept the argmax: run one (its output is not needed). */
            arg = rt_dnnl_keep(e, x->data, bytes);
            float *y = rt_dnnl_scratch(NULL, rt_dnnl_align((size_t)dy->numel * sizeof(float)));
            max2x2_fwd(&d, rt_f32(x), y, arg);
        }
        max2x2_bwd(&d, arg, rt_f32(dy), rt_f32(dx));
        return;
    }
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
