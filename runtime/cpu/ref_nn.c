/* cpu/ref_nn.c: the reference kernels of the CPU backend for the ops that run elsewhere in
 * production: max and average pooling and relu/gelu (oneDNN or own vectorised loops: pool.c,
 * elementwise.c),
 * batchnorm in training mode (the vectorised f32 kernels of norm.c) and linear (oneDNN's
 * sgemm: dense.c). Plain loops, reductions in double; the tests check every production
 * path against these on random shapes, and the production kernels fall back to them for
 * the few attribute combinations oneDNN does not implement. */
#include "ref.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- pooling ------------------------------------------------------------------------ */

static void pool_dims(const char *op, const rt_tensor *x, const rt_pool2d_attrs *a,
                      const rt_tensor *y, const char *yname, int64_t *N, int64_t *C, int64_t *H,
                      int64_t *W, int64_t *OH, int64_t *OW)
{
    rt_pool_dims d = rt_pool2d_check(op, x, a, y, yname);
    *N = d.N, *C = d.C, *H = d.H, *W = d.W, *OH = d.OH, *OW = d.OW;
}

/* The window's maximum as PyTorch picks it: an element replaces the current one when it
 * is larger or NaN (so NaN propagates). Written as selects, not branches: with random
 * data a branch per element mispredicts half the time and costs far more than the loads. */
#define MAX_STEP(v, idx)                        \
    do {                                        \
        const float v_ = (v);                   \
        const bool take_ = v_ > mx || v_ != v_; \
        mx = take_ ? v_ : mx;                   \
        best = take_ ? (idx) : best;            \
    } while (0)

/* Index (in the H*W plane) of the window's maximum, or -1 if the window is empty. */
static inline int64_t window_argmax(const float *plane, int64_t H, int64_t W, int64_t h0,
                                    int64_t w0, const rt_pool2d_attrs *a)
{
    int64_t hs = h0 < 0 ? 0 : h0, he = h0 + a->kh < H ? h0 + a->kh : H;
    int64_t ws = w0 < 0 ? 0 : w0, we = w0 + a->kw < W ? w0 + a->kw : W;
    if (hs >= he || ws >= we)
        return -1;
    int64_t best = hs * W + ws;
    float mx = plane[best];
    for (int64_t h = hs; h < he; h++)
        for (int64_t w = ws; w < we; w++)
            MAX_STEP(plane[h * W + w], h * W + w);
    return best;
}

/* Unpadded windows always lie inside the image (floor mode): no clipping needed. */
static inline int64_t window_argmax_inside(const float *plane, int64_t W, int64_t h0, int64_t w0,
                                           int kh, int kw)
{
    int64_t best = h0 * W + w0;
    float mx = plane[best];
    for (int i = 0; i < kh; i++) {
        const float *row = plane + (h0 + i) * W + w0;
        for (int j = 0; j < kw; j++)
            MAX_STEP(row[j], (h0 + i) * W + w0 + j);
    }
    return best;
}

/* The 2x2, stride-2 window without padding (VGG, the small CNNs): the offset
 * (0..3, row-major in the window) of its maximum, by the same rule as MAX_STEP. */
static inline int argmax2x2(const float *r0, const float *r1, int64_t w)
{
    float mx = r0[w];
    int best = 0;
    const float v[3] = {r0[w + 1], r1[w], r1[w + 1]};
    for (int k = 0; k < 3; k++)
        if (v[k] > mx || v[k] != v[k]) {
            mx = v[k];
            best = k + 1;
        }
    return best;
}

static bool is_2x2(const rt_pool2d_attrs *a, int64_t H, int64_t W)
{
    return a->kh == 2 && a->kw == 2 && a->sh == 2 && a->sw == 2 && a->ph == 0 && a->pw == 0 &&
           !a->ceil_mode && H % 2 == 0 && W % 2 == 0;
}

void rt_ref_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    int64_t N, C, H, W, OH, OW;
    pool_dims("maxpool2d_fwd", x, a, y, "output", &N, &C, &H, &W, &OH, &OW);
    if (is_2x2(a, H, W)) {
        for (int64_t p = 0; p < N * C; p++)
            for (int64_t oh = 0; oh < OH; oh++) {
                const float *r0 = rt_f32(x) + (p * H + 2 * oh) * W, *r1 = r0 + W;
                float *out = rt_f32(y) + (p * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) {
                    int k = argmax2x2(r0, r1, 2 * ow);
                    out[ow] = (k < 2 ? r0 : r1)[2 * ow + (k & 1)];
                }
            }
        return;
    }
    if (a->ph == 0 && a->pw == 0 && !a->ceil_mode) {
        for (int64_t p = 0; p < N * C; p++) {
            const float *plane = rt_f32(x) + p * H * W;
            float *out = rt_f32(y) + p * OH * OW;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++)
                    out[oh * OW + ow] =
                        plane[window_argmax_inside(plane, W, oh * a->sh, ow * a->sw, a->kh, a->kw)];
        }
        return;
    }
    for (int64_t p = 0; p < N * C; p++) {
        const float *plane = rt_f32(x) + p * H * W;
        float *out = rt_f32(y) + p * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t i = window_argmax(plane, H, W, oh * a->sh - a->ph, ow * a->sw - a->pw, a);
                out[oh * OW + ow] = i < 0 ? -INFINITY : plane[i];
            }
    }
}

void rt_ref_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                          rt_tensor *dx)
{
    int64_t N, C, H, W, OH, OW;
    pool_dims("maxpool2d_bwd", x, a, dy, "output gradient", &N, &C, &H, &W, &OH, &OW);
    rt_check_act(dx, x->numel, "maxpool2d_bwd", "input gradient");
    if (is_2x2(a, H, W)) {
        /* Every input element is in exactly one window: write all four, no zeroing pass. */
        for (int64_t p = 0; p < N * C; p++)
            for (int64_t oh = 0; oh < OH; oh++) {
                const float *r0 = rt_f32(x) + (p * H + 2 * oh) * W, *r1 = r0 + W;
                const float *g = rt_f32(dy) + (p * OH + oh) * OW;
                float *d0 = rt_f32(dx) + (p * H + 2 * oh) * W, *d1 = d0 + W;
                for (int64_t ow = 0; ow < OW; ow++) {
                    int k = argmax2x2(r0, r1, 2 * ow);
                    d0[2 * ow] = k == 0 ? g[ow] : 0.0f;
                    d0[2 * ow + 1] = k == 1 ? g[ow] : 0.0f;
                    d1[2 * ow] = k == 2 ? g[ow] : 0.0f;
                    d1[2 * ow + 1] = k == 3 ? g[ow] : 0.0f;
                }
            }
        return;
    }
    rt_tensor_zero(dx);
    const bool inside = a->ph == 0 && a->pw == 0 && !a->ceil_mode;
    for (int64_t p = 0; p < N * C; p++) {
        const float *plane = rt_f32(x) + p * H * W, *g = rt_f32(dy) + p * OH * OW;
        float *d = rt_f32(dx) + p * H * W;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t i =
                    inside ? window_argmax_inside(plane, W, oh * a->sh, ow * a->sw, a->kh, a->kw)
                           : window_argmax(plane, H, W, oh * a->sh - a->ph, ow * a->sw - a->pw, a);
                if (i >= 0)
                    d[i] += g[oh * OW + ow];
            }
    }
}

/* Divisor of the average over the window starting at (h0, w0), as PyTorch computes it. */
static inline float avg_divisor(const rt_pool2d_attrs *a, int64_t H, int64_t W, int64_t h0,
                                int64_t w0, int64_t hs, int64_t he, int64_t ws, int64_t we)
{
    if (a->exclude_pad)
        return (float)((he - hs) * (we - ws));
    int64_t hp = h0 + a->kh < H + a->ph ? h0 + a->kh : H + a->ph;
    int64_t wp = w0 + a->kw < W + a->pw ? w0 + a->kw : W + a->pw;
    return (float)((hp - h0) * (wp - w0));
}

void rt_ref_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    int64_t N, C, H, W, OH, OW;
    pool_dims("avgpool2d_fwd", x, a, y, "output", &N, &C, &H, &W, &OH, &OW);
    for (int64_t p = 0; p < N * C; p++) {
        const float *plane = rt_f32(x) + p * H * W;
        float *out = rt_f32(y) + p * OH * OW;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * a->sh - a->ph;
            int64_t hs = h0 < 0 ? 0 : h0, he = h0 + a->kh < H ? h0 + a->kh : H;
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * a->sw - a->pw;
                int64_t ws = w0 < 0 ? 0 : w0, we = w0 + a->kw < W ? w0 + a->kw : W;
                float s = 0.0f;
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++)
                        s += plane[h * W + w];
                out[oh * OW + ow] = s / avg_divisor(a, H, W, h0, w0, hs, he, ws, we);
            }
        }
    }
}

void rt_ref_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx)
{
    int64_t N, C, H, W, OH, OW;
    pool_dims("avgpool2d_bwd", dx, a, dy, "output gradient", &N, &C, &H, &W, &OH, &OW);
    rt_tensor_zero(dx);
    for (int64_t p = 0; p < N * C; p++) {
        const float *g = rt_f32(dy) + p * OH * OW;
        float *d = rt_f32(dx) + p * H * W;
        for (int64_t oh = 0; oh < OH; oh++) {
            int64_t h0 = oh * a->sh - a->ph;
            int64_t hs = h0 < 0 ? 0 : h0, he = h0 + a->kh < H ? h0 + a->kh : H;
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t w0 = ow * a->sw - a->pw;
                int64_t ws = w0 < 0 ? 0 : w0, we = w0 + a->kw < W ? w0 + a->kw : W;
                float v = g[oh * OW + ow] / avg_divisor(a, H, W, h0, w0, hs, he, ws, we);
                for (int64_t h = hs; h < he; h++)
                    for (int64_t w = ws; w < we; w++)
                        d[h * W + w] += v;
            }
        }
    }
}

/* ---- normalisation --------------------------------------------------------------------- */

/* Batch normalisation in training mode. The statistics are sums over the
 * shard, all-reduced over comm when there is one (SyncBN); doubles keep the
 * sums of large batches exact enough that a plan on many ranks matches one. */
void rt_ref_batchnorm2d_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                            const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                            float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    const char *op = "batchnorm2d_fwd";
    const int64_t C =
        rt_batchnorm_fwd_check(op, comm, x, gamma, beta, running_mean, running_var, saved, y);
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
    /* sums[c]: sum of x, then of (x - mean)^2; sums[C]: the element count. */
    double *sums = rt_xcalloc((size_t)C + 1, sizeof(double), op);
    for (int64_t c = 0; c < C; c++)
        for (int64_t n = 0; n < N; n++) {
            const float *p = rt_f32(x) + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; i++)
                sums[c] += p[i];
        }
    sums[C] = (double)(N * HW);
    rt_allreduce_f64(comm, sums, C + 1, op);
    const double count = sums[C];
    if (count == 0)
        rt_fatal(op, "empty batch: batchnorm needs at least one sample");
    float *mean = rt_f32(saved), *invstd = mean + C;
    double *mu = rt_xcalloc((size_t)C, sizeof(double), op);
    for (int64_t c = 0; c < C; c++) {
        mu[c] = sums[c] / count;
        double ss = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const float *p = rt_f32(x) + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; i++) {
                double dv = p[i] - mu[c];
                ss += dv * dv;
            }
        }
        sums[c] = ss;
    }
    rt_allreduce_f64(comm, sums, C, op);
    for (int64_t c = 0; c < C; c++) {
        double var = sums[c] / count;
        mean[c] = (float)mu[c];
        invstd[c] = (float)(1.0 / sqrt(var + eps));
        if (running_mean)
            rt_f32(running_mean)[c] =
                (1.0f - momentum) * rt_f32(running_mean)[c] + momentum * (float)mu[c];
        if (running_var) {
            double unbiased = count > 1 ? sums[c] / (count - 1) : var;
            rt_f32(running_var)[c] =
                (1.0f - momentum) * rt_f32(running_var)[c] + momentum * (float)unbiased;
        }
        const float sc = rt_f32(gamma)[c] * invstd[c];
        const float sh = rt_f32(beta)[c] - mean[c] * sc;
        for (int64_t n = 0; n < N; n++) {
            const float *p = rt_f32(x) + (n * C + c) * HW;
            float *q = rt_f32(y) + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; i++)
                q[i] = p[i] * sc + sh;
        }
    }
    free(mu);
    free(sums);
}

void rt_ref_batchnorm2d_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                            const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                            rt_tensor *dgamma, rt_tensor *dbeta)
{
    const char *op = "batchnorm2d_bwd";
    const int64_t C = rt_batchnorm_bwd_check(op, comm, x, gamma, saved, dy, dx, dgamma, dbeta);
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
    const float *mean = rt_f32(saved), *invstd = mean + C;
    /* sums: sum(dy) per channel, sum(dy * xhat) per channel, the count. */
    double *sums = rt_xcalloc(2 * (size_t)C + 1, sizeof(double), op);
    for (int64_t c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (int64_t n = 0; n < N; n++) {
            const float *p = rt_f32(x) + (n * C + c) * HW, *g = rt_f32(dy) + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; i++) {
                sdy += g[i];
                sdyx += g[i] * (p[i] - mean[c]);
            }
        }
        sdyx *= invstd[c];
        /* The parameter gradients take this shard's part; the gradient
         * all-reduce over the layer's ranks adds the others. */
        if (dgamma)
            rt_f32(dgamma)[c] += (float)sdyx;
        if (dbeta)
            rt_f32(dbeta)[c] += (float)sdy;
        sums[c] = sdy;
        sums[C + c] = sdyx;
    }
    sums[2 * C] = (double)(N * HW);
    if (dx) {
        rt_allreduce_f64(comm, sums, 2 * C + 1, op);
        const double count = sums[2 * C];
        for (int64_t c = 0; c < C; c++) {
            const float k = rt_f32(gamma)[c] * invstd[c];
            const float mdy = (float)(sums[c] / count), mdyx = (float)(sums[C + c] / count);
            for (int64_t n = 0; n < N; n++) {
                const float *p = rt_f32(x) + (n * C + c) * HW, *g = rt_f32(dy) + (n * C + c) * HW;
                float *d = rt_f32(dx) + (n * C + c) * HW;
                for (int64_t i = 0; i < HW; i++) {
                    float xhat = (p[i] - mean[c]) * invstd[c];
                    d[i] = k * (g[i] - mdy - xhat * mdyx);
                }
            }
        }
    }
    free(sums);
}

/* ---- activations ------------------------------------------------------------------------ */

void rt_ref_relu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("relu_fwd", x, "input", y, "output");
    for (int64_t i = 0; i < x->numel; i++)
        rt_f32(y)[i] = rt_f32(x)[i] > 0.0f ? rt_f32(x)[i] : 0.0f;
}

void rt_ref_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu_bwd", x, "input", dx, "input gradient");
    for (int64_t i = 0; i < x->numel; i++)
        rt_f32(dx)[i] = rt_f32(x)[i] > 0.0f ? rt_f32(dy)[i] : 0.0f;
}

void rt_ref_relu6_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("relu6_fwd", x, "input", y, "output");
    for (int64_t i = 0; i < x->numel; i++)
        rt_f32(y)[i] = fminf(fmaxf(rt_f32(x)[i], 0.0f), 6.0f);
}

/* PyTorch's hardtanh backward: no gradient at either bound. */
void rt_ref_relu6_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu6_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu6_bwd", x, "input", dx, "input gradient");
    for (int64_t i = 0; i < x->numel; i++) {
        float v = rt_f32(x)[i];
        rt_f32(dx)[i] = v <= 0.0f || v >= 6.0f ? 0.0f : rt_f32(dy)[i];
    }
}

#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_A 0.044715

void rt_ref_gelu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("gelu_fwd", x, "input", y, "output");
    for (int64_t i = 0; i < x->numel; i++) {
        double v = rt_f32(x)[i];
        rt_f32(y)[i] = (float)(0.5 * v * (1.0 + tanh(GELU_C * (v + GELU_A * v * v * v))));
    }
}

void rt_ref_gelu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("gelu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("gelu_bwd", x, "input", dx, "input gradient");
    for (int64_t i = 0; i < x->numel; i++) {
        double v = rt_f32(x)[i];
        double t = tanh(GELU_C * (v + GELU_A * v * v * v));
        double d =
            0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * GELU_A * v * v);
        rt_f32(dx)[i] = (float)(rt_f32(dy)[i] * d);
    }
}

/* x Phi(x) in double, and its derivative Phi(x) + x phi(x). */
void rt_ref_gelu_erf_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("gelu_erf_fwd", x, "input", y, "output");
    for (int64_t i = 0; i < x->numel; i++) {
        double v = rt_f32(x)[i];
        rt_f32(y)[i] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
    }
}

void rt_ref_gelu_erf_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("gelu_erf_bwd", x, "input", dy, "output gradient");
    rt_same_numel("gelu_erf_bwd", x, "input", dx, "input gradient");
    for (int64_t i = 0; i < x->numel; i++) {
        double v = rt_f32(x)[i];
        double d = 0.5 * (1.0 + erf(v / sqrt(2.0))) +
                   v * exp(-0.5 * v * v) / sqrt(2.0 * 3.14159265358979323846);
        rt_f32(dx)[i] = (float)(rt_f32(dy)[i] * d);
    }
}

/* ---- linear ----------------------------------------------------------------------------- */

void rt_ref_linear_fwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b, rt_tensor *y)
{
    int64_t M, in, out;
    rt_linear_fwd_check("linear_fwd", x, w, b, y, &M, &in, &out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)out, (int)in, 1.0f, rt_f32(x),
                (int)in, rt_f32(w), (int)in, 0.0f, rt_f32(y), (int)out);
    if (b)
        for (int64_t m = 0; m < M; m++)
            for (int64_t o = 0; o < out; o++)
                rt_f32(y)[m * out + o] += rt_f32(b)[o];
}

void rt_ref_linear_bwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy, rt_tensor *dx,
                       rt_tensor *dw, rt_tensor *db)
{
    int64_t M, in, out;
    rt_linear_dims("linear_bwd", x, w, &M, &in, &out);
    rt_linear_bwd_check("linear_bwd", x, w, M, out, dy, dx, dw, db);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)in, (int)out, 1.0f,
                    rt_f32(dy), (int)out, rt_f32(w), (int)in, 0.0f, rt_f32(dx), (int)in);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out, (int)in, (int)M, 1.0f,
                    rt_f32(dy), (int)out, rt_f32(x), (int)in, 1.0f, rt_f32(dw), (int)in);
    if (db)
        for (int64_t m = 0; m < M; m++)
            for (int64_t o = 0; o < out; o++)
                rt_f32(db)[o] += rt_f32(dy)[m * out + o];
}
