/* cpu/elementwise.c: the memory-bound ops on the CPU: relu, gelu (tanh approximation), tanh, sigmoid,
 * add and gradient accumulation, dropout with the counter-based mask, concat,
 * transpose of two axes, softmax along an axis, and the optimizers' per-element updates.
 * Each is a plain loop over contiguous memory; shapes are checked once per call, never
 * per element. */
#include "../internal.h"

#include <math.h>
#include <string.h>

void rt_relu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("relu_fwd", x, "input", y, "output");
    const float *xp = rt_f32(x);
    float *yp = rt_f32(y);
    for (int64_t i = 0; i < x->numel; i++)
        yp[i] = xp[i] > 0.0f ? xp[i] : 0.0f;
}

void rt_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu_bwd", x, "input", dx, "input gradient");
    const float *xp = rt_f32(x), *g = rt_f32(dy);
    float *o = rt_f32(dx);
    for (int64_t i = 0; i < x->numel; i++)
        o[i] = xp[i] > 0.0f ? g[i] : 0.0f;
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void rt_gelu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("gelu_fwd", x, "input", y, "output");
    const float *xp = rt_f32(x);
    float *yp = rt_f32(y);
    for (int64_t i = 0; i < x->numel; i++) {
        float v = xp[i];
        yp[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + GELU_A * v * v * v)));
    }
}

void rt_gelu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("gelu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("gelu_bwd", x, "input", dx, "input gradient");
    const float *xp = rt_f32(x), *g = rt_f32(dy);
    float *o = rt_f32(dx);
    for (int64_t i = 0; i < x->numel; i++) {
        float v = xp[i];
        float t = tanhf(GELU_C * (v + GELU_A * v * v * v));
        float d =
            0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
        o[i] = g[i] * d;
    }
}

void rt_tanh_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("tanh_fwd", x, "input", y, "output");
    const float *xp = rt_f32(x);
    float *yp = rt_f32(y);
    for (int64_t i = 0; i < x->numel; i++)
        yp[i] = tanhf(xp[i]);
}

void rt_tanh_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("tanh_bwd", x, "input", dy, "output gradient");
    rt_same_numel("tanh_bwd", x, "input", dx, "input gradient");
    const float *xp = rt_f32(x), *g = rt_f32(dy);
    float *o = rt_f32(dx);
    for (int64_t i = 0; i < x->numel; i++) {
        float t = tanhf(xp[i]);
        o[i] = g[i] * (1.0f - t * t);
    }
}

/* 1 / (1 + e^-x), written so that neither branch overflows. */
static float sigmoid(float v)
{
    if (v >= 0.0f)
        return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}

void rt_sigmoid_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("sigmoid_fwd", x, "input", y, "output");
    const float *xp = rt_f32(x);
    float *yp = rt_f32(y);
    for (int64_t i = 0; i < x->numel; i++)
        yp[i] = sigmoid(xp[i]);
}

void rt_sigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("sigmoid_bwd", x, "input", dy, "output gradient");
    rt_same_numel("sigmoid_bwd", x, "input", dx, "input gradient");
    const float *xp = rt_f32(x), *g = rt_f32(dy);
    float *o = rt_f32(dx);
    for (int64_t i = 0; i < x->numel; i++) {
        float s = sigmoid(xp[i]);
        o[i] = g[i] * s * (1.0f - s);
    }
}

void rt_add_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *y)
{
    rt_same_numel("add", a, "a", b, "b");
    rt_same_numel("add", a, "a", y, "output");
    const float *ap = rt_f32(a), *bp = rt_f32(b);
    float *yp = rt_f32(y);
    for (int64_t i = 0; i < a->numel; i++)
        yp[i] = ap[i] + bp[i];
}

void rt_accumulate(rt_tensor *dst, const rt_tensor *src)
{
    rt_same_numel("accumulate", dst, "destination", src, "source");
    float *d = rt_f32(dst);
    const float *s = rt_f32(src);
    for (int64_t i = 0; i < dst->numel; i++)
        d[i] += s[i];
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

/* PyTorch SGD; a zero momentum buffer gives buf = d, exactly the first-step rule. */
void rt_sgd_update(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
                   float weight_decay, bool nesterov)
{
    for (int64_t j = 0; j < n; j++) {
        float d = g[j] + weight_decay * w[j];
        if (buf) {
            buf[j] = momentum * buf[j] + d;
            d = nesterov ? d + momentum * buf[j] : buf[j];
        }
        w[j] -= lr * d;
    }
}

void rt_adam_update(float *w, const float *g, float *m, float *v, int64_t n, float step,
                    float beta1, float beta2, float eps, float weight_decay, float bc2_sqrt)
{
    for (int64_t j = 0; j < n; j++) {
        float d = g[j] + weight_decay * w[j];
        m[j] = beta1 * m[j] + (1.0f - beta1) * d;
        v[j] = beta2 * v[j] + (1.0f - beta2) * d * d;
        w[j] -= step * m[j] / (sqrtf(v[j]) / bc2_sqrt + eps);
    }
}
