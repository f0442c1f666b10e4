/* elementwise.cu: the memory-bound ops of the CUDA backend: relu, relu6, gelu (tanh
 * approximation and exact), tanh, sigmoid, add and gradient accumulation, dropout, concat, transpose, softmax
 * along an axis, the optimizers' per-element updates and loss scaling's multiply and
 * inf/nan check. One thread per element (grid-stride). Activations are f32, bf16 or f16
 * (act.cuh), computed in f32 and stored rounded; parameters and optimizer state are f32.
 * With f32 activations every result equals the CPU backend's up to float rounding of
 * the transcendental functions. Dropout keys its mask exactly as the CPU
 * backend, so a GPU run drops the same elements; its step key comes from device memory
 * (rt_step_begin) so that a captured CUDA graph uses the current step when replayed. */
#include "act.cuh"

/* ---- relu, gelu, add ---------------------------------------------------------------- */

template <typename T> __global__ void relu_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(y + i, v > 0.0f ? v : 0.0f);
    }
}
template <typename T> __global__ void relu_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n) rt_st(dx + i, rt_ld(x + i) > 0.0f ? rt_ld(dy + i) : 0.0f);
}

/* min(max(x, 0), 6); the gradient passes where 0 < x < 6, as PyTorch's and the CPU's. */
template <typename T> __global__ void relu6_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(y + i, v > 0.0f ? (v < 6.0f ? v : 6.0f) : 0.0f);
    }
}
template <typename T> __global__ void relu6_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(dx + i, v > 0.0f && v < 6.0f ? rt_ld(dy + i) : 0.0f);
    }
}

/* hardsigmoid and hardswish with PyTorch's gradients, as the CPU backend. */
template <typename T> __global__ void hardsigmoid_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n) rt_st(y + i, fminf(fmaxf(rt_ld(x + i) + 3.0f, 0.0f), 6.0f) / 6.0f);
}
template <typename T> __global__ void hardsigmoid_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(dx + i, v > -3.0f && v < 3.0f ? rt_ld(dy + i) / 6.0f : 0.0f);
    }
}
template <typename T> __global__ void hardswish_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(y + i, v * (fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f));
    }
}
template <typename T> __global__ void hardswish_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i), g = rt_ld(dy + i);
        rt_st(dx + i, v < -3.0f ? 0.0f : v <= 3.0f ? g * (v / 3.0f + 0.5f) : g);
    }
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

template <typename T> __global__ void gelu_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(y + i, 0.5f * v * (1.0f + tanhf(GELU_C * (v + GELU_A * v * v * v))));
    }
}
template <typename T> __global__ void gelu_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i), t = tanhf(GELU_C * (v + GELU_A * v * v * v));
        float dt = (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
        rt_st(dx + i, rt_ld(dy + i) * (0.5f * (1.0f + t) + 0.5f * v * dt));
    }
}
template <typename T> __global__ void gelu_erf_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(y + i, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
    }
}
template <typename T> __global__ void gelu_erf_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i), cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
        rt_st(dx + i, rt_ld(dy + i) * (cdf + v * pdf));
    }
}
template <typename T> __global__ void tanh_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n) rt_st(y + i, tanhf(rt_ld(x + i)));
}
template <typename T> __global__ void tanh_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float t = tanhf(rt_ld(x + i));
        rt_st(dx + i, rt_ld(dy + i) * (1.0f - t * t));
    }
}
/* 1 / (1 + e^-x), written so that neither branch overflows (as the CPU backend). */
__device__ float sigmoid_d(float v)
{
    if (v >= 0.0f)
        return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}
template <typename T> __global__ void sigmoid_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n) rt_st(y + i, sigmoid_d(rt_ld(x + i)));
}
template <typename T> __global__ void sigmoid_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float s = sigmoid_d(rt_ld(x + i));
        rt_st(dx + i, rt_ld(dy + i) * s * (1.0f - s));
    }
}
template <typename T> __global__ void silu_fwd_k(const T *x, T *y, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i);
        rt_st(y + i, v * sigmoid_d(v));
    }
}
template <typename T> __global__ void silu_bwd_k(const T *x, const T *dy, T *dx, int64_t n)
{
    RT_FOR(i, n)
    {
        float v = rt_ld(x + i), s = sigmoid_d(v);
        rt_st(dx + i, rt_ld(dy + i) * s * (1.0f + v * (1.0f - s)));
    }
}
template <typename T> __global__ void add_k(const T *a, const T *b, T *y, int64_t n)
{
    RT_FOR(i, n) rt_st(y + i, rt_ld(a + i) + rt_ld(b + i));
}
template <typename T> __global__ void acc_k(T *d, const T *s, int64_t n)
{
    RT_FOR(i, n) rt_st(d + i, rt_ld(d + i) + rt_ld(s + i));
}

/* y = x s with one s per inner elements of x (1: of x's size). */
template <typename T> __global__ void mul_k(const T *x, const T *s, T *y, int64_t n, int64_t inner)
{
    RT_FOR(i, n) rt_st(y + i, rt_ld(x + i) * rt_ld(s + i / inner));
}
/* ds[r] = sum of dy x over its inner elements: one thread per r (gates are small). */
template <typename T>
__global__ void mul_ds_k(const T *x, const T *dy, T *ds, int64_t rows, int64_t inner)
{
    RT_FOR(r, rows)
    {
        float acc = 0.0f;
        for (int64_t i = 0; i < inner; i++)
            acc += rt_ld(dy + r * inner + i) * rt_ld(x + r * inner + i);
        rt_st(ds + r, acc);
    }
}

/* y[o, j, i] = x[o, start + j, i] (forward); dx gets dy there and zeros elsewhere (back). */
template <typename T>
__global__ void slice_k(const T *x, T *y, int64_t n, int64_t xlen, int64_t ylen, int64_t inner,
                        int64_t start)
{
    RT_FOR(k, n)
    {
        int64_t i = k % inner, j = (k / inner) % ylen, o = k / (inner * ylen);
        y[k] = x[(o * xlen + start + j) * inner + i];
    }
}
template <typename T>
__global__ void unslice_k(const T *dy, T *dx, int64_t n, int64_t xlen, int64_t ylen, int64_t inner,
                          int64_t start)
{
    RT_FOR(k, n)
    {
        int64_t i = k % inner, j = (k / inner) % xlen, o = k / (inner * xlen);
        j -= start;
        if (j >= 0 && j < ylen)
            dx[k] = dy[(o * ylen + j) * inner + i];
        else
            rt_st(dx + k, 0.0f);
    }
}

#define LAUNCH(op, kernel, n, ...)                                     \
    do {                                                               \
        if ((n) > 0) {                                                 \
            kernel<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>(__VA_ARGS__); \
            rt_cuda_launched(op);                                      \
        }                                                              \
    } while (0)

/* y = f(x) and dx = dy * f'(x), in the dtype of x (which y, dy and dx share). */
#define LAUNCH_FWD(op, kernel, x, y) \
    RT_ACT_DISPATCH((x)->dtype, T,   \
                    LAUNCH(op, kernel<T>, (x)->numel, rt_act<T>(x), rt_act<T>(y), (x)->numel))
#define LAUNCH_BWD(op, kernel, x, dy, dx) \
    RT_ACT_DISPATCH(                      \
        (x)->dtype, T,                    \
        LAUNCH(op, kernel<T>, (x)->numel, rt_act<T>(x), rt_act<T>(dy), rt_act<T>(dx), (x)->numel))

extern "C" void rt_cuda_own_relu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("relu_fwd", x, "input", y, "output");
    LAUNCH_FWD("relu_fwd", relu_fwd_k, x, y);
}
extern "C" void rt_cuda_own_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("relu_bwd", relu_bwd_k, x, dy, dx);
}
extern "C" void rt_relu6_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("relu6_fwd", x, "input", y, "output");
    LAUNCH_FWD("relu6_fwd", relu6_fwd_k, x, y);
}
extern "C" void rt_relu6_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("relu6_bwd", x, "input", dy, "output gradient");
    rt_same_numel("relu6_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("relu6_bwd", relu6_bwd_k, x, dy, dx);
}
extern "C" void rt_hardsigmoid_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("hardsigmoid_fwd", x, "input", y, "output");
    LAUNCH_FWD("hardsigmoid_fwd", hardsigmoid_fwd_k, x, y);
}
extern "C" void rt_hardsigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("hardsigmoid_bwd", x, "input", dy, "output gradient");
    rt_same_numel("hardsigmoid_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("hardsigmoid_bwd", hardsigmoid_bwd_k, x, dy, dx);
}
extern "C" void rt_hardswish_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("hardswish_fwd", x, "input", y, "output");
    LAUNCH_FWD("hardswish_fwd", hardswish_fwd_k, x, y);
}
extern "C" void rt_hardswish_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("hardswish_bwd", x, "input", dy, "output gradient");
    rt_same_numel("hardswish_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("hardswish_bwd", hardswish_bwd_k, x, dy, dx);
}
extern "C" void rt_gelu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("gelu_fwd", x, "input", y, "output");
    LAUNCH_FWD("gelu_fwd", gelu_fwd_k, x, y);
}
extern "C" void rt_gelu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("gelu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("gelu_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("gelu_bwd", gelu_bwd_k, x, dy, dx);
}
extern "C" void rt_gelu_erf_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("gelu_erf_fwd", x, "input", y, "output");
    LAUNCH_FWD("gelu_erf_fwd", gelu_erf_fwd_k, x, y);
}
extern "C" void rt_gelu_erf_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("gelu_erf_bwd", x, "input", dy, "output gradient");
    rt_same_numel("gelu_erf_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("gelu_erf_bwd", gelu_erf_bwd_k, x, dy, dx);
}
extern "C" void rt_tanh_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("tanh_fwd", x, "input", y, "output");
    LAUNCH_FWD("tanh_fwd", tanh_fwd_k, x, y);
}
extern "C" void rt_tanh_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("tanh_bwd", x, "input", dy, "output gradient");
    rt_same_numel("tanh_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("tanh_bwd", tanh_bwd_k, x, dy, dx);
}
extern "C" void rt_silu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("silu_fwd", x, "input", y, "output");
    LAUNCH_FWD("silu_fwd", silu_fwd_k, x, y);
}
extern "C" void rt_silu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("silu_bwd", x, "input", dy, "output gradient");
    rt_same_numel("silu_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("silu_bwd", silu_bwd_k, x, dy, dx);
}
extern "C" void rt_sigmoid_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_same_numel("sigmoid_fwd", x, "input", y, "output");
    LAUNCH_FWD("sigmoid_fwd", sigmoid_fwd_k, x, y);
}
extern "C" void rt_sigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_same_numel("sigmoid_bwd", x, "input", dy, "output gradient");
    rt_same_numel("sigmoid_bwd", x, "input", dx, "input gradient");
    LAUNCH_BWD("sigmoid_bwd", sigmoid_bwd_k, x, dy, dx);
}
extern "C" void rt_add_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *y)
{
    rt_same_numel("add", a, "a", b, "b");
    rt_same_numel("add", a, "a", y, "output");
    RT_ACT_DISPATCH(
        a->dtype, T,
        LAUNCH("add", add_k<T>, a->numel, rt_act<T>(a), rt_act<T>(b), rt_act<T>(y), a->numel));
}
extern "C" void rt_mul_fwd(const rt_tensor *x, const rt_tensor *s, rt_tensor *y)
{
    const int64_t inner = rt_mul_check("mul_fwd", x, s, y, "output");
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH("mul_fwd", mul_k<T>, x->numel, rt_act<T>(x), rt_act<T>(s), rt_act<T>(y),
                           x->numel, inner));
}
extern "C" void rt_mul_bwd(const rt_tensor *x, const rt_tensor *s, const rt_tensor *dy,
                           rt_tensor *dx, rt_tensor *ds)
{
    const int64_t inner = rt_mul_check("mul_bwd", x, s, dy, "output gradient");
    if (dx) {
        rt_same_numel("mul_bwd", x, "input", dx, "input gradient");
        RT_ACT_DISPATCH(x->dtype, T,
                        LAUNCH("mul_bwd", mul_k<T>, x->numel, rt_act<T>(dy), rt_act<T>(s),
                               rt_act<T>(dx), x->numel, inner));
    }
    if (ds) {
        rt_same_numel("mul_bwd", s, "scale", ds, "scale gradient");
        RT_ACT_DISPATCH(x->dtype, T,
                        LAUNCH("mul_bwd", mul_ds_k<T>, s->numel, rt_act<T>(x), rt_act<T>(dy),
                               rt_act<T>(ds), s->numel, inner));
    }
}
extern "C" void rt_slice_fwd(const rt_tensor *x, int axis, int start, rt_tensor *y)
{
    int64_t outer, xlen, ylen, inner;
    rt_slice_check("slice_fwd", x, axis, start, y, &outer, &xlen, &ylen, &inner);
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH("slice_fwd", slice_k<T>, y->numel, rt_act<T>(x), rt_act<T>(y), y->numel,
                           xlen, ylen, inner, (int64_t)start));
}
extern "C" void rt_slice_bwd(const rt_tensor *dy, int axis, int start, rt_tensor *dx)
{
    int64_t outer, xlen, ylen, inner;
    rt_slice_check("slice_bwd", dx, axis, start, dy, &outer, &xlen, &ylen, &inner);
    RT_ACT_DISPATCH(dx->dtype, T,
                    LAUNCH("slice_bwd", unslice_k<T>, dx->numel, rt_act<T>(dy), rt_act<T>(dx),
                           dx->numel, xlen, ylen, inner, (int64_t)start));
}
extern "C" void rt_accumulate(rt_tensor *dst, const rt_tensor *src)
{
    rt_same_numel("accumulate", dst, "destination", src, "source");
    RT_ACT_DISPATCH(
        dst->dtype, T,
        LAUNCH("accumulate", acc_k<T>, dst->numel, rt_act<T>(dst), rt_act<T>(src), dst->numel));
}

/* ---- dropout ------------------------------------------------------------------------------ */

/* step = *d_step + step_delta: the generated program passes the current step, whose
 * difference to rt_step_begin's step is 0 in practice; a graph replays with the new
 * step read from device memory. */
template <typename T>
__global__ void dropout_k(const T *x, T *y, int64_t n, int64_t per, float p, float scale,
                          uint64_t seed, const int64_t *d_step, int64_t step_delta, uint64_t layer,
                          int64_t sample0)
{
    const uint64_t step = (uint64_t)(*d_step + step_delta);
    const uint64_t k0 = rt_dev_hash64(rt_dev_hash64(rt_dev_hash64(seed) ^ step) ^ layer);
    RT_FOR(i, n)
    {
        int64_t s = i / per, e = i - s * per;
        uint64_t k = rt_dev_hash64(k0 ^ (uint64_t)(sample0 + s));
        float u = (float)(rt_dev_hash64(k ^ (uint64_t)e) >> 40) * (1.0f / 16777216.0f);
        rt_st(y + i, u >= p ? rt_ld(x + i) * scale : 0.0f);
    }
}

static void dropout(const char *op, const rt_tensor *in, float p, uint64_t seed, int64_t step,
                    int layer_id, int64_t sample0, rt_tensor *out)
{
    rt_dropout_check(op, in, p, out);
    if (in->numel == 0)
        return;
    if (p >= 1.0f) {
        RT_CUDA(cudaMemsetAsync(out->data, 0, (size_t)in->numel * rt_dtype_size(out->dtype), RT_FG),
                op);
        return;
    }
    const int64_t N = in->ndim ? in->shape[0] : 1, per = N ? in->numel / N : 1;
    RT_ACT_DISPATCH(in->dtype, T,
                    LAUNCH(op, dropout_k<T>, in->numel, rt_act<T>(in), rt_act<T>(out), in->numel,
                           per, p, 1.0f / (1.0f - p), seed, rt_cuda_g.d_step, step - rt_cuda_g.step,
                           (uint64_t)layer_id, sample0));
}

extern "C" void rt_dropout_fwd(const rt_tensor *x, float p, uint64_t seed, int64_t step,
                               int layer_id, int64_t sample0, rt_tensor *y)
{
    dropout("dropout_fwd", x, p, seed, step, layer_id, sample0, y);
}
extern "C" void rt_dropout_bwd(const rt_tensor *dy, float p, uint64_t seed, int64_t step,
                               int layer_id, int64_t sample0, rt_tensor *dx)
{
    dropout("dropout_bwd", dy, p, seed, step, layer_id, sample0, dx);
}

/* ---- synthetic data ------------------------------------------------------------------- */

/* rt_rand_uniform(seed, a, b, c, d) of rng.c, on the device. */
__device__ __forceinline__ float dev_rand(uint64_t seed, uint64_t a, uint64_t b, uint64_t c,
                                          uint64_t d)
{
    uint64_t h = rt_dev_hash64(rt_dev_hash64(rt_dev_hash64(rt_dev_hash64(seed) ^ a) ^ b) ^ c);
    return (float)(rt_dev_hash64(h ^ d) >> 40) * (1.0f / 16777216.0f);
}

/* Element e of sample i of the batch: data.c's synth() for global sample g0 + i; into
 * xf (f32 or 16-bit samples, rounded) or, when xf is NULL, xi (tokens). */
template <typename T> __global__ void synth_x_k(rt_synth_keys k, T *xf, int32_t *xi, int64_t n)
{
    RT_FOR(j, n)
    {
        int64_t i = j / k.per_sample, e = j - i * k.per_sample;
        float u = dev_rand(k.seed, 0xda7a + k.stream, (uint64_t)(k.g0 + i), 0, (uint64_t)e);
        if (xf)
            rt_st(xf + j, u);
        else
            xi[j] = (int32_t)(u * (float)k.vocab) % (int32_t)k.vocab;
    }
}

__global__ void synth_labels_k(rt_synth_keys k, int32_t *labels, int64_t n)
{
    RT_FOR(j, n)
    {
        int64_t i = j / k.labels_per_sample, e = j - i * k.labels_per_sample;
        float u = dev_rand(k.seed, 0xda7a + k.stream, (uint64_t)(k.g0 + i), 1, (uint64_t)e);
        labels[j] = (int32_t)(u * (float)k.classes) % (int32_t)k.classes;
    }
}

extern "C" void rt_cuda_synth(const rt_synth_keys *k, void *x, int32_t *labels)
{
    rt_cuda_not_capturing("data");
    const int64_t nx = k->count * k->per_sample, nl = k->count * k->labels_per_sample;
    if (x && k->in_dtype == RT_I32)
        LAUNCH("data", synth_x_k<float>, nx, *k, (float *)NULL, (int32_t *)x, nx);
    else if (x)
        RT_ACT_DISPATCH(k->in_dtype, T,
                        LAUNCH("data", synth_x_k<T>, nx, *k, (T *)x, (int32_t *)NULL, nx));
    if (labels)
        LAUNCH("data", synth_labels_k, nl, *k, labels, nl);
}

/* ---- concat, transpose ------------------------------------------------------------------ */

/* A part of `chunk` contiguous elements (of es bytes) per outer index, from rows of
 * `spitch` elements to rows of `dpitch` elements: one 2-D copy. */
static void copy_part(const char *op, void *dst, int64_t dpitch, const void *src, int64_t spitch,
                      int64_t chunk, int64_t outer, size_t es)
{
    if (chunk == 0 || outer == 0)
        return;
    RT_CUDA(cudaMemcpy2DAsync(dst, (size_t)dpitch * es, src, (size_t)spitch * es,
                              (size_t)chunk * es, (size_t)outer, cudaMemcpyDeviceToDevice, RT_FG),
            op);
}

extern "C" void rt_concat_fwd(int n, const rt_tensor *const *xs, int axis, rt_tensor *y)
{
    const char *op = "concat_fwd";
    const rt_concat_dims d = rt_concat_check(op, y, n, xs, axis);
    const int64_t outer = d.outer, inner = d.inner, yrow = d.row;
    const size_t es = rt_dtype_size(y->dtype);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const int64_t chunk = xs[i]->shape[axis] * inner;
        copy_part(op, (char *)y->data + off * es, yrow, xs[i]->data, chunk, chunk, outer, es);
        off += chunk;
    }
}

extern "C" void rt_concat_bwd(const rt_tensor *dy, int axis, int n, rt_tensor *const *dxs)
{
    const char *op = "concat_bwd";
    const rt_concat_dims d = rt_concat_check(op, dy, n, (const rt_tensor *const *)dxs, axis);
    const int64_t outer = d.outer, inner = d.inner, yrow = d.row;
    const size_t es = rt_dtype_size(dy->dtype);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const int64_t chunk = dxs[i]->shape[axis] * inner;
        copy_part(op, dxs[i]->data, chunk, (const char *)dy->data + off * es, yrow, chunk, outer,
                  es);
        off += chunk;
    }
}

/* x viewed as [A, I, Bm, J, C] -> y [A, J, Bm, I, C]; one thread per output element,
 * moved as it is (no conversion). */
template <typename T>
__global__ void transpose_k(const T *x, T *y, int64_t n, int64_t I, int64_t Bm, int64_t J,
                            int64_t C)
{
    RT_FOR(o, n)
    {
        int64_t c = o % C, r = o / C;
        int64_t i = r % I;
        r /= I;
        int64_t b = r % Bm;
        r /= Bm;
        int64_t j = r % J, a = r / J;
        y[o] = x[(((a * I + i) * Bm + b) * J + j) * C + c];
    }
}

extern "C" void rt_transpose(const rt_tensor *x, int a0, int a1, rt_tensor *y)
{
    const char *op = "transpose";
    rt_transpose_check(op, x, &a0, &a1, y);
    const int64_t I = x->shape[a0], Bm = rt_dims_prod(x->shape, a0 + 1, a1), J = x->shape[a1];
    const int64_t C = rt_dims_prod(x->shape, a1 + 1, x->ndim);
    if (a0 == a1) {
        rt_tensor_copy(y, x);
        return;
    }
    RT_ACT_DISPATCH(
        x->dtype, T,
        LAUNCH(op, transpose_k<T>, x->numel, rt_act<T>(x), rt_act<T>(y), x->numel, I, Bm, J, C));
}

/* ---- softmax along an axis --------------------------------------------------------------- */

/* One thread per (outer, inner) line of `dim` elements, stride `inner`: softmax over a
 * non-last axis has strided lines; the last axis (inner = 1) is the common case of
 * attention-like use and still reads whole lines per thread, which is fine for the
 * short lines models here use (the attention op has its own row kernel). The
 * exponentials are computed again for the output rather than kept in y, which in
 * 16 bits would round them twice. */
template <typename T>
__global__ void softmax_fwd_k(const T *x, T *y, int64_t lines, int64_t dim, int64_t inner)
{
    RT_FOR(l, lines)
    {
        int64_t o = l / inner, in = l - o * inner;
        const T *xs = x + o * dim * inner + in;
        T *ys = y + o * dim * inner + in;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t d = 0; d < dim; d++)
            mx = fmaxf(mx, rt_ld(xs + d * inner));
        for (int64_t d = 0; d < dim; d++)
            sum += expf(rt_ld(xs + d * inner) - mx);
        float inv = 1.0f / sum;
        for (int64_t d = 0; d < dim; d++)
            rt_st(ys + d * inner, expf(rt_ld(xs + d * inner) - mx) * inv);
    }
}

template <typename T>
__global__ void softmax_bwd_k(const T *y, const T *dy, T *dx, int64_t lines, int64_t dim,
                              int64_t inner)
{
    RT_FOR(l, lines)
    {
        int64_t o = l / inner, in = l - o * inner, base = o * dim * inner + in;
        float dot = 0.0f;
        for (int64_t d = 0; d < dim; d++)
            dot += rt_ld(y + base + d * inner) * rt_ld(dy + base + d * inner);
        for (int64_t d = 0; d < dim; d++)
            rt_st(dx + base + d * inner,
                  rt_ld(y + base + d * inner) * (rt_ld(dy + base + d * inner) - dot));
    }
}

extern "C" void rt_softmax_fwd(const rt_tensor *x, int axis, rt_tensor *y)
{
    const char *op = "softmax_fwd";
    int64_t outer, dim, inner;
    rt_softmax_dims(op, x, axis, &outer, &dim, &inner);
    rt_same_numel(op, x, "input", y, "output");
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, softmax_fwd_k<T>, outer * inner, rt_act<T>(x), rt_act<T>(y),
                           outer * inner, dim, inner));
}

extern "C" void rt_softmax_bwd(const rt_tensor *y, const rt_tensor *dy, int axis, rt_tensor *dx)
{
    const char *op = "softmax_bwd";
    int64_t outer, dim, inner;
    rt_softmax_bwd_check(op, y, dy, axis, dx, &outer, &dim, &inner);
    RT_ACT_DISPATCH(y->dtype, T,
                    LAUNCH(op, softmax_bwd_k<T>, outer * inner, rt_act<T>(y), rt_act<T>(dy),
                           rt_act<T>(dx), outer * inner, dim, inner));
}

/* ---- optimizers ---------------------------------------------------------------------------- */

/* PyTorch SGD. A zero momentum buffer gives buf = d, exactly the first-step rule, so no
 * first-step flag is needed (and a graph of the update would stay valid). */
__global__ void sgd_k(float *w, const float *g, float *buf, int64_t n, float lr, float mom,
                      float wd, bool nesterov)
{
    RT_FOR(j, n)
    {
        float d = g[j] + wd * w[j];
        if (buf) {
            float b = mom * buf[j] + d;
            buf[j] = b;
            d = nesterov ? d + mom * b : b;
        }
        w[j] -= lr * d;
    }
}

__global__ void adam_k(float *w, const float *g, float *m, float *v, int64_t n, float step,
                       float b1, float b2, float eps, float wd, float bc2_sqrt)
{
    RT_FOR(j, n)
    {
        float d = g[j] + wd * w[j];
        float mj = b1 * m[j] + (1.0f - b1) * d, vj = b2 * v[j] + (1.0f - b2) * d * d;
        m[j] = mj;
        v[j] = vj;
        w[j] -= step * mj / (sqrtf(vj) / bc2_sqrt + eps);
    }
}

extern "C" void rt_sgd_update(float *w, const float *g, float *buf, int64_t n, float lr, float mom,
                              float wd, bool nesterov)
{
    LAUNCH("sgd", sgd_k, n, w, g, buf, n, lr, mom, wd, nesterov);
}

extern "C" void rt_adam_update(float *w, const float *g, float *m, float *v, int64_t n, float step,
                               float b1, float b2, float eps, float wd, float bc2_sqrt)
{
    LAUNCH("adam", adam_k, n, w, g, m, v, n, step, b1, b2, eps, wd, bc2_sqrt);
}

/* ---- loss scaling (the device's scale_check, loss_scale.c) -------------------------------- */

/* Threads that meet an inf or nan all write the same 1: no atomics needed. */
__global__ void scale_check_k(float *x, int64_t n, float s, int32_t *found)
{
    RT_FOR(j, n)
    {
        float v = x[j];
        if (found && !isfinite(v))
            *found = 1;
        x[j] = v * s;
    }
}

extern "C" void rt_cuda_scale_check(float *x, int64_t n, float s, int32_t *found, const char *op)
{
    LAUNCH(op, scale_check_k, n, x, n, s, found);
}
