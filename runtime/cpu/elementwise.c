/* cpu/elementwise.c: the memory-bound ops on the CPU: relu, relu6, gelu (tanh approximation and exact),
 * tanh and sigmoid on oneDNN's eltwise primitives (relu's and relu6's backward as plain loops); add and
 * gradient accumulation, dropout with the counter-based mask, concat, transpose of two axes,
 * softmax along an axis, the optimizers' per-element updates and loss scaling's multiply
 * and inf/nan check as plain loops over contiguous memory, written without branches in the
 * loop bodies (selects, and one loop per case of the optimizers' options) so that the
 * compiler vectorises them (RT_VECTOR: also for AVX2 and AVX-512, chosen at load time).
 * Shapes are checked once per call, never per element. */
#include "onednn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- activations on oneDNN's eltwise primitives ------------------------------------------ */

/* One entry per (function, its alpha and beta, element count): forward and backward, made on
 * first use. The tensors are flat: the functions are elementwise, so any layout is the same. */
typedef struct eltwise_entry {
    rt_dnnl_prim fwd, bwd;
    bool have_fwd, have_bwd;
} eltwise_entry;

static void eltwise_destroy(void *p)
{
    eltwise_entry *e = p;
    rt_dnnl_free(&e->fwd);
    rt_dnnl_free(&e->bwd);
    free(e);
}

static eltwise_entry *eltwise_for(dnnl_alg_kind_t alg, float alpha, float beta, int64_t n, bool bwd,
                                  const char *op)
{
    uint32_t ab[2];
    memcpy(&ab[0], &alpha, sizeof ab[0]);
    memcpy(&ab[1], &beta, sizeof ab[1]);
    rt_dnnl_key k = {{3, alg, n, ab[0], ab[1]}};
    eltwise_entry *e = rt_dnnl_find(&k);
    if (!e) {
        e = rt_xcalloc(1, sizeof *e, op);
        rt_dnnl_insert(&k, e, eltwise_destroy);
    }
    dnnl_memory_desc_t md = rt_dnnl_plain(1, &n);
    if (!e->have_fwd) {
        dnnl_eltwise_desc_t fd;
        rt_dnnl_ok(
            dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &md, alpha, beta), op,
            "describing an eltwise forward");
        if (!rt_dnnl_make(&e->fwd, &fd, NULL, op))
            rt_fatal(op, "oneDNN: no eltwise forward implementation");
        e->have_fwd = true;
    }
    if (bwd && !e->have_bwd) {
        dnnl_eltwise_desc_t bd;
        rt_dnnl_ok(dnnl_eltwise_backward_desc_init(&bd, alg, &md, &md, alpha, beta), op,
                   "describing an eltwise backward");
        if (!rt_dnnl_make(&e->bwd, &bd, e->fwd.pd, op))
            rt_fatal(op, "oneDNN: no eltwise backward implementation");
        e->have_bwd = true;
    }
    return e;
}

static void eltwise_fwd_ab(dnnl_alg_kind_t alg, float alpha, float beta, const char *op,
                           const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel(op, x, "input", y, "output");
    if (x->numel == 0)
        return;
    eltwise_entry *e = eltwise_for(alg, alpha, beta, x->numel, false, op);
    rt_dnnl_arg args[2] = {{DNNL_ARG_SRC, x->data}, {DNNL_ARG_DST, y->data}};
    rt_dnnl_run(&e->fwd, 2, args, e->fwd.scratch ? rt_dnnl_scratch(NULL, e->fwd.scratch) : NULL,
                op);
}

static void eltwise_fwd(dnnl_alg_kind_t alg, const char *op, const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd_ab(alg, 0.0f, 0.0f, op, x, y);
}

/* dx = f'(x) dy */
static void eltwise_bwd(dnnl_alg_kind_t alg, const char *op, const rt_tensor *x,
                        const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel(op, x, "input", dy, "output gradient");
    rt_same_numel(op, x, "input", dx, "input gradient");
    if (x->numel == 0)
        return;
    eltwise_entry *e = eltwise_for(alg, 0.0f, 0.0f, x->numel, true, op);
    rt_dnnl_arg args[3] = {
        {DNNL_ARG_SRC, x->data}, {DNNL_ARG_DIFF_DST, dy->data}, {DNNL_ARG_DIFF_SRC, dx->data}};
    rt_dnnl_run(&e->bwd, 3, args, e->bwd.scratch ? rt_dnnl_scratch(NULL, e->bwd.scratch) : NULL,
                op);
}

void rt_relu_fwd(const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd(dnnl_eltwise_relu, "relu_fwd", x, y);
}

/* ReLU's backward is a select per element: a plain loop that the compiler vectorises
 * (compare, mask) runs faster than oneDNN's eltwise backward on flat f32, which is
 * memory-bound the same way but pays a primitive call per layer. */
#define RELU_CHUNK ((int64_t)1 << 14)

RT_VECTOR static void relu_bwd_range(const float *x, const float *dy, float *dx, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

void rt_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu_bwd", x, "input", dx, "input gradient");
    const int64_t n = x->numel, chunks = (n + RELU_CHUNK - 1) / RELU_CHUNK;
    const float *xs = rt_f32(x), *g = rt_f32(dy);
    float *d = rt_f32(dx);
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * RELU_CHUNK;
        relu_bwd_range(xs + at, g + at, d + at, n - at < RELU_CHUNK ? n - at : RELU_CHUNK);
    }
}

/* ReLU6 is oneDNN's clip to [0, 6] forward. Its backward is a select, as relu's, on
 * 0 < x < 6: PyTorch's hardtanh backward passes no gradient at either bound, where oneDNN's
 * clip passes it at the upper one. */
void rt_relu6_fwd(const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd_ab(dnnl_eltwise_clip, 0.0f, 6.0f, "relu6_fwd", x, y);
}

RT_VECTOR static void relu6_bwd_range(const float *x, const float *dy, float *dx, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dx[i] = x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f;
}

void rt_relu6_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu6_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu6_bwd", x, "input", dx, "input gradient");
    const int64_t n = x->numel, chunks = (n + RELU_CHUNK - 1) / RELU_CHUNK;
    const float *xs = rt_f32(x), *g = rt_f32(dy);
    float *d = rt_f32(dx);
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * RELU_CHUNK;
        relu6_bwd_range(xs + at, g + at, d + at, n - at < RELU_CHUNK ? n - at : RELU_CHUNK);
    }
}

/* hardsigmoid and hardswish as PyTorch computes them (plain loops: oneDNN 2.6 has no
 * hardsigmoid, and its hardswish backward differs from PyTorch's at x = 3). */
RT_VECTOR static void hard_range(bool swish, bool bwd, const float *x, const float *dy, float *y,
                                 int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], r = fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
        if (!bwd)
            y[i] = swish ? v * r : r;
        else if (!swish)
            y[i] = v > -3.0f && v < 3.0f ? dy[i] / 6.0f : 0.0f;
        else
            y[i] = v < -3.0f ? 0.0f : v <= 3.0f ? dy[i] * (v / 3.0f + 0.5f) : dy[i];
    }
}

static void hard(const char *op, bool swish, bool bwd, const rt_tensor *x, const rt_tensor *dy,
                 rt_tensor *y)
{
    rt_same_numel(op, x, "input", y, bwd ? "input gradient" : "output");
    if (bwd)
        rt_same_numel(op, x, "input", dy, "output gradient");
    const int64_t n = x->numel, chunks = (n + RELU_CHUNK - 1) / RELU_CHUNK;
    const float *xs = rt_f32(x), *g = bwd ? rt_f32(dy) : NULL;
    float *o = rt_f32(y);
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * RELU_CHUNK, m = n - at < RELU_CHUNK ? n - at : RELU_CHUNK;
        hard_range(swish, bwd, xs + at, g ? g + at : NULL, o + at, m);
    }
}

/* SiLU x sigmoid(x) (plain loops), the sigmoid written so that neither branch overflows. */
RT_VECTOR static void silu_range(bool bwd, const float *x, const float *dy, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], e = expf(-fabsf(v)), s = v >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
        y[i] = bwd ? dy[i] * s * (1.0f + v * (1.0f - s)) : v * s;
    }
}

static void silu(const char *op, bool bwd, const rt_tensor *x, const rt_tensor *dy, rt_tensor *y)
{
    rt_same_numel(op, x, "input", y, bwd ? "input gradient" : "output");
    if (bwd)
        rt_same_numel(op, x, "input", dy, "output gradient");
    const int64_t n = x->numel, chunks = (n + RELU_CHUNK - 1) / RELU_CHUNK;
    const float *xs = rt_f32(x), *g = bwd ? rt_f32(dy) : NULL;
    float *o = rt_f32(y);
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * RELU_CHUNK, m = n - at < RELU_CHUNK ? n - at : RELU_CHUNK;
        silu_range(bwd, xs + at, g ? g + at : NULL, o + at, m);
    }
}

void rt_silu_fwd(const rt_tensor *x, rt_tensor *y)
{
    silu("silu_fwd", false, x, NULL, y);
}

void rt_silu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    silu("silu_bwd", true, x, dy, dx);
}

void rt_hardsigmoid_fwd(const rt_tensor *x, rt_tensor *y)
{
    hard("hardsigmoid_fwd", false, false, x, NULL, y);
}

void rt_hardsigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    hard("hardsigmoid_bwd", false, true, x, dy, dx);
}

void rt_hardswish_fwd(const rt_tensor *x, rt_tensor *y)
{
    hard("hardswish_fwd", true, false, x, NULL, y);
}

void rt_hardswish_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    hard("hardswish_bwd", true, true, x, dy, dx);
}

/* GELU, tanh approximation (GPT-2): oneDNN's gelu_tanh is the same formula. */
void rt_gelu_fwd(const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd(dnnl_eltwise_gelu_tanh, "gelu_fwd", x, y);
}

void rt_gelu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    eltwise_bwd(dnnl_eltwise_gelu_tanh, "gelu_bwd", x, dy, dx);
}

/* GELU, exact: x Phi(x) (torch's nn.GELU, approximate='none'); oneDNN's gelu_erf. */
void rt_gelu_erf_fwd(const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd(dnnl_eltwise_gelu_erf, "gelu_erf_fwd", x, y);
}

void rt_gelu_erf_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    eltwise_bwd(dnnl_eltwise_gelu_erf, "gelu_erf_bwd", x, dy, dx);
}

void rt_tanh_fwd(const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd(dnnl_eltwise_tanh, "tanh_fwd", x, y);
}

void rt_tanh_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    eltwise_bwd(dnnl_eltwise_tanh, "tanh_bwd", x, dy, dx);
}

void rt_sigmoid_fwd(const rt_tensor *x, rt_tensor *y)
{
    eltwise_fwd(dnnl_eltwise_logistic, "sigmoid_fwd", x, y);
}

void rt_sigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    eltwise_bwd(dnnl_eltwise_logistic, "sigmoid_bwd", x, dy, dx);
}

/* ---- the plain loops ----------------------------------------------------------------------- */

/* Elementwise loops over chunks of CHUNK elements, threaded when there are many. */
#define CHUNK ((int64_t)1 << 14)

RT_VECTOR static void add_range(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

static void add(const float *a, const float *b, float *y, int64_t n)
{
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * CHUNK;
        add_range(a + at, b + at, y + at, n - at < CHUNK ? n - at : CHUNK);
    }
}

void rt_add_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *y)
{
    rt_same_numel("add", a, "a", b, "b");
    rt_same_numel("add", a, "a", y, "output");
    add(rt_f32(a), rt_f32(b), rt_f32(y), a->numel);
}

/* y = x s, s of x's size or one per sample and channel (inner elements each). */
RT_VECTOR static void mul_rows(const float *x, const float *s, float *y, int64_t rows,
                               int64_t inner)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < inner; i++)
            y[r * inner + i] = x[r * inner + i] * s[r];
}

void rt_mul_fwd(const rt_tensor *x, const rt_tensor *s, rt_tensor *y)
{
    const int64_t inner = rt_mul_check("mul_fwd", x, s, y, "output");
    mul_rows(rt_f32(x), rt_f32(s), rt_f32(y), s->numel, inner);
}

void rt_mul_bwd(const rt_tensor *x, const rt_tensor *s, const rt_tensor *dy, rt_tensor *dx,
                rt_tensor *ds)
{
    const int64_t inner = rt_mul_check("mul_bwd", x, s, dy, "output gradient");
    if (dx) {
        rt_same_numel("mul_bwd", x, "input", dx, "input gradient");
        mul_rows(rt_f32(dy), rt_f32(s), rt_f32(dx), s->numel, inner);
    }
    if (ds) {
        rt_same_numel("mul_bwd", s, "scale", ds, "scale gradient");
        const float *g = rt_f32(dy), *xs = rt_f32(x);
        float *d = rt_f32(ds);
        for (int64_t r = 0; r < s->numel; r++) {
            double acc = 0.0;
            for (int64_t i = 0; i < inner; i++)
                acc += (double)g[r * inner + i] * xs[r * inner + i];
            d[r] = (float)acc;
        }
    }
}

void rt_slice_fwd(const rt_tensor *x, int axis, int start, rt_tensor *y)
{
    int64_t outer, xlen, ylen, inner;
    rt_slice_check("slice_fwd", x, axis, start, y, &outer, &xlen, &ylen, &inner);
    const float *xs = rt_f32(x);
    float *ys = rt_f32(y);
    for (int64_t o = 0; o < outer; o++)
        memcpy(ys + o * ylen * inner, xs + (o * xlen + start) * inner,
               sizeof(float) * (size_t)(ylen * inner));
}

void rt_slice_bwd(const rt_tensor *dy, int axis, int start, rt_tensor *dx)
{
    int64_t outer, xlen, ylen, inner;
    rt_slice_check("slice_bwd", dx, axis, start, dy, &outer, &xlen, &ylen, &inner);
    const float *g = rt_f32(dy);
    float *d = rt_f32(dx);
    memset(d, 0, sizeof(float) * (size_t)dx->numel);
    for (int64_t o = 0; o < outer; o++)
        memcpy(d + (o * xlen + start) * inner, g + o * ylen * inner,
               sizeof(float) * (size_t)(ylen * inner));
}

void rt_accumulate(rt_tensor *dst, const rt_tensor *src)
{
    rt_same_numel("accumulate", dst, "destination", src, "source");
    add(rt_f32(dst), rt_f32(src), rt_f32(dst), dst->numel);
}

/* ---- dropout ------------------------------------------------------------------------- */

static void dropout(const char *op, const rt_tensor *in, float p, uint64_t seed, int64_t step,
                    int layer_id, int64_t sample0, rt_tensor *out)
{
    rt_dropout_check(op, in, p, out);
    const float *x = rt_f32(in);
    float *y = rt_f32(out);
    if (p >= 1.0f) {
        memset(y, 0, (size_t)in->numel * sizeof(float));
        return;
    }
    const float scale = 1.0f / (1.0f - p);
    const int64_t N = in->ndim ? in->shape[0] : 1, per = N ? in->numel / N : 0;
#pragma omp parallel for schedule(static) if (N > 1 && in->numel >= 4 * CHUNK)
    for (int64_t n = 0; n < N; n++) {
        /* Same keys, same order as rt_rand_uniform(seed, step, layer, sample, e). */
        uint64_t k =
            rt_hash64(rt_hash64(rt_hash64(rt_hash64(seed) ^ (uint64_t)step) ^ (uint64_t)layer_id) ^
                      (uint64_t)(sample0 + n));
        const float *xs = x + n * per;
        float *ys = y + n * per;
        for (int64_t e = 0; e < per; e++) {
            float u = (float)(rt_hash64(k ^ (uint64_t)e) >> 40) * (1.0f / 16777216.0f);
            ys[e] = u >= p ? xs[e] * scale : 0.0f;
        }
    }
}

void rt_dropout_fwd(const rt_tensor *x, float p, uint64_t seed, int64_t step, int layer_id,
                    int64_t sample0, rt_tensor *y)
{
    dropout("dropout_fwd", x, p, seed, step, layer_id, sample0, y);
}

void rt_dropout_bwd(const rt_tensor *dy, float p, uint64_t seed, int64_t step, int layer_id,
                    int64_t sample0, rt_tensor *dx)
{
    dropout("dropout_bwd", dy, p, seed, step, layer_id, sample0, dx);
}

/* ---- concat, transpose, softmax --------------------------------------------------------- */

void rt_concat_fwd(int n, const rt_tensor *const *xs, int axis, rt_tensor *y)
{
    const char *op = "concat_fwd";
    const rt_concat_dims d = rt_concat_check(op, y, n, xs, axis);
    const int64_t outer = d.outer, inner = d.inner, yrow = d.row;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const int64_t chunk = xs[i]->shape[axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(rt_f32(y) + o * yrow + off, rt_f32(xs[i]) + o * chunk,
                   (size_t)chunk * sizeof(float));
        off += chunk;
    }
}

void rt_concat_bwd(const rt_tensor *dy, int axis, int n, rt_tensor *const *dxs)
{
    const char *op = "concat_bwd";
    const rt_concat_dims d = rt_concat_check(op, dy, n, (const rt_tensor *const *)dxs, axis);
    const int64_t outer = d.outer, inner = d.inner, yrow = d.row;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const int64_t chunk = dxs[i]->shape[axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(rt_f32(dxs[i]) + o * chunk, rt_f32(dy) + o * yrow + off,
                   (size_t)chunk * sizeof(float));
        off += chunk;
    }
}

void rt_transpose(const rt_tensor *x, int a0, int a1, rt_tensor *y)
{
    const char *op = "transpose";
    rt_transpose_check(op, x, &a0, &a1, y);
    /* x viewed as [A, I, Bm, J, C] -> y [A, J, Bm, I, C]. */
    const int64_t A = rt_dims_prod(x->shape, 0, a0), I = x->shape[a0],
                  Bm = rt_dims_prod(x->shape, a0 + 1, a1);
    const int64_t J = x->shape[a1], C = rt_dims_prod(x->shape, a1 + 1, x->ndim);
    const float *xp = rt_f32(x);
    float *yp = rt_f32(y);
    for (int64_t a = 0; a < A; a++)
        for (int64_t j = 0; j < J; j++)
            for (int64_t b = 0; b < Bm; b++)
                for (int64_t i = 0; i < I; i++) {
                    const float *s = xp + (((a * I + i) * Bm + b) * J + j) * C;
                    float *d = yp + (((a * J + j) * Bm + b) * I + i) * C;
                    if (C == 1)
                        *d = *s;
                    else
                        memcpy(d, s, (size_t)C * sizeof(float));
                }
}

void rt_softmax_fwd(const rt_tensor *x, int axis, rt_tensor *y)
{
    const char *op = "softmax_fwd";
    int64_t outer, dim, inner;
    rt_softmax_dims(op, x, axis, &outer, &dim, &inner);
    rt_same_numel(op, x, "input", y, "output");
#pragma omp parallel for schedule(static) if (outer > 1 && x->numel >= 4 * CHUNK)
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t c = 0; c < inner; c++) {
            const float *xs = rt_f32(x) + o * dim * inner + c;
            float *ys = rt_f32(y) + o * dim * inner + c;
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t k = 0; k < dim; k++)
                mx = xs[k * inner] > mx ? xs[k * inner] : mx;
            for (int64_t k = 0; k < dim; k++) {
                ys[k * inner] = expf(xs[k * inner] - mx);
                sum += ys[k * inner];
            }
            float inv = 1.0f / sum;
            for (int64_t k = 0; k < dim; k++)
                ys[k * inner] *= inv;
        }
    }
}

void rt_softmax_bwd(const rt_tensor *y, const rt_tensor *dy, int axis, rt_tensor *dx)
{
    const char *op = "softmax_bwd";
    int64_t outer, dim, inner;
    rt_softmax_bwd_check(op, y, dy, axis, dx, &outer, &dim, &inner);
#pragma omp parallel for schedule(static) if (outer > 1 && y->numel >= 4 * CHUNK)
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t c = 0; c < inner; c++) {
            const size_t base = (size_t)(o * dim * inner + c);
            const float *ys = rt_f32(y) + base, *gs = rt_f32(dy) + base;
            float *ds = rt_f32(dx) + base, dot = 0.0f;
            for (int64_t k = 0; k < dim; k++)
                dot += ys[k * inner] * gs[k * inner];
            for (int64_t k = 0; k < dim; k++)
                ds[k * inner] = ys[k * inner] * (gs[k * inner] - dot);
        }
    }
}

/* ---- optimizers ------------------------------------------------------------------------ */

/* PyTorch SGD; a zero momentum buffer gives buf = d, exactly the first-step rule. One loop
 * per case, so that no loop body branches. */
RT_VECTOR static void sgd_plain(float *restrict w, const float *restrict g, int64_t n, float lr,
                                float weight_decay)
{
    for (int64_t j = 0; j < n; j++)
        w[j] -= lr * (g[j] + weight_decay * w[j]);
}

RT_VECTOR static void sgd_momentum(float *restrict w, const float *restrict g, float *restrict buf,
                                   int64_t n, float lr, float momentum, float weight_decay,
                                   bool nesterov)
{
    /* nesterov is loop-invariant: the compiler makes one loop of each case. */
    for (int64_t j = 0; j < n; j++) {
        const float d = g[j] + weight_decay * w[j];
        const float b = momentum * buf[j] + d;
        buf[j] = b;
        w[j] -= lr * (nesterov ? d + momentum * b : b);
    }
}

/* The updates run over chunks of CHUNK elements, threaded when there are many. */
void rt_sgd_update(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
                   float weight_decay, bool nesterov)
{
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * CHUNK, len = n - at < CHUNK ? n - at : CHUNK;
        if (buf)
            sgd_momentum(w + at, g + at, buf + at, len, lr, momentum, weight_decay, nesterov);
        else
            sgd_plain(w + at, g + at, len, lr, weight_decay);
    }
}

RT_VECTOR static void adam_range(float *restrict w, const float *restrict g, float *restrict m,
                                 float *restrict v, int64_t n, float step, float beta1, float beta2,
                                 float eps, float weight_decay, float bc2_sqrt)
{
    for (int64_t j = 0; j < n; j++) {
        const float d = g[j] + weight_decay * w[j];
        m[j] = beta1 * m[j] + (1.0f - beta1) * d;
        v[j] = beta2 * v[j] + (1.0f - beta2) * d * d;
        w[j] -= step * m[j] / (sqrtf(v[j]) / bc2_sqrt + eps);
    }
}

void rt_adam_update(float *w, const float *g, float *m, float *v, int64_t n, float step,
                    float beta1, float beta2, float eps, float weight_decay, float bc2_sqrt)
{
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * CHUNK, len = n - at < CHUNK ? n - at : CHUNK;
        adam_range(w + at, g + at, m + at, v + at, len, step, beta1, beta2, eps, weight_decay,
                   bc2_sqrt);
    }
}

/* ---- loss scaling (the device's scale_check, loss_scale.c) ------------------------------ */

/* Whether any x is inf or nan (all exponent bits set), tested on the bits so that the
 * loop is an integer OR that vectorises. */
RT_VECTOR static int scale_range(float *restrict x, int64_t n, float s)
{
    uint32_t bad = 0;
    for (int64_t j = 0; j < n; j++) {
        uint32_t u;
        memcpy(&u, &x[j], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
        x[j] *= s;
    }
    return bad != 0;
}

void rt_cpu_scale_check(float *x, int64_t n, float s, int32_t *found, const char *op)
{
    (void)op;
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (chunks >= 4)
    for (int64_t t = 0; t < chunks; t++) {
        const int64_t at = t * CHUNK, len = n - at < CHUNK ? n - at : CHUNK;
        bad |= scale_range(x + at, len, s);
    }
    if (found && bad)
        *found = 1;
}
