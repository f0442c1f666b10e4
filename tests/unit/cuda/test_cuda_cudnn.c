/* test_cuda_cudnn.c: the cuDNN paths of the CUDA backend (runtime/cuda/dnn.c) against the
 * backend's own kernels (runtime/cuda/own.h) on the GPU, on random shapes: conv2d forward
 * and backward with every combination of stride, padding, dilation, groups and bias (the
 * weight and bias gradients accumulated onto non-zero values), max and average pooling
 * (padding, count_include_pad, ceil mode, which falls back), batchnorm in training
 * (statistics, running buffers, output, all three gradients) and inference, and relu.
 * With BURSTRT_STORAGE=16 (and a bf16 or f16 compute dtype) the activations and their
 * gradients are 16-bit tensors, so both sides run their 16-bit code: cuDNN with 16-bit
 * descriptors and the own kernels' 16-bit instantiations (conv.cu's im2col and GEMMs),
 * compared to a 16-bit tolerance (below). Skips (77) without a GPU or when the library was
 * built without cuDNN. Never run on the development machine (no GPU there):
 * scripts/gpu-check runs it (ctest label gpu). */
#include "burstrt.h"
#include "cuda/own.h"
#include "shape_rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rt_cuda_visible_devices(void);
void rt_tensor_write(rt_tensor *t, const void *host);
void rt_tensor_read(const rt_tensor *t, void *host);

static rt_pool *P;
static int failures, cases;
static uint64_t rng = 99;

static int rnd(int lo, int hi)
{
    rng = rt_hash64(rng);
    return lo + (int)((rng >> 33) % (uint64_t)(hi - lo + 1));
}

/* An activation or its gradient: f32, or 16 bits with BURSTRT_STORAGE=16. */
static rt_tensor *T(int nd, const int64_t *shape)
{
    return rt_tensor_new(P, rt_storage_dtype(), nd, shape);
}

/* A parameter, its gradient or statistics: f32 always. */
static rt_tensor *F(int nd, const int64_t *shape)
{
    return rt_tensor_new(P, RT_F32, nd, shape);
}

static rt_tensor *like(const rt_tensor *t)
{
    return rt_tensor_new(P, t->dtype, t->ndim, t->shape);
}

static void fill(rt_tensor *t)
{
    float *h = malloc((size_t)t->numel * sizeof(float) + 4);
    for (int64_t i = 0; i < t->numel; i++) {
        rng = rt_hash64(rng);
        h[i] = (float)(rng >> 40) / 8388608.0f - 1.0f;
    }
    rt_tensor_write(t, h);
    free(h);
}

static rt_tensor *copy_of(const rt_tensor *t)
{
    rt_tensor *c = like(t);
    rt_tensor_copy(c, t);
    return c;
}

/* Fails unless a and b agree within atol + rtol |b| everywhere. A 16-bit result (or, with
 * rounded16, one made from a 16-bit intermediate: cuDNN's 16-bit weight gradient) may
 * differ by a unit in the last place of 16 bits where the two sides' f32 sums round
 * differently, and more after a cancellation (a bias added, a gradient added to its
 * start): then the tolerance is at least 2e-2 of the value and of the tensor's largest. */
static void same_as(const char *what, const rt_tensor *a, const rt_tensor *b, double atol,
                    double rtol, const char *shape, bool rounded16)
{
    float *ha = malloc((size_t)a->numel * sizeof(float) + 4);
    float *hb = malloc((size_t)b->numel * sizeof(float) + 4);
    rt_tensor_read(a, ha);
    rt_tensor_read(b, hb);
    if (a->dtype != RT_F32 || rounded16) {
        double big = 0.0;
        for (int64_t i = 0; i < b->numel; i++)
            big = fmax(big, fabs((double)hb[i]));
        atol = fmax(atol, 2e-2 * big);
        rtol = fmax(rtol, 2e-2);
    }
    double worst = 0.0;
    for (int64_t i = 0; i < a->numel; i++) {
        double r = fabs((double)ha[i] - hb[i]) / (atol + rtol * fabs(hb[i]));
        if (!(r <= worst))
            worst = r;
    }
    if (!(worst <= 1.0)) {
        printf("FAIL %s: cuDNN differs from the own kernel (ratio %.3g) in %s\n", what, worst,
               shape);
        failures++;
    }
    free(ha);
    free(hb);
}

static void same(const char *what, const rt_tensor *a, const rt_tensor *b, double atol, double rtol,
                 const char *shape)
{
    same_as(what, a, b, atol, rtol, shape, false);
}

static void conv_case(int N, int C, int H, int W, int K, rt_conv2d_attrs a, bool bias)
{
    int64_t OH, OW;
    if (rt_window_extent(H, a.kh, a.sh, a.ph, a.dh, false, &OH) != RT_WINDOW_OK ||
        rt_window_extent(W, a.kw, a.sw, a.pw, a.dw, false, &OW) != RT_WINDOW_OK)
        return;
    cases++;
    char shape[160];
    snprintf(shape, sizeof shape, "conv N%d C%d %dx%d K%d k%dx%d s%dx%d p%dx%d d%dx%d g%d bias%d",
             N, C, H, W, K, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.groups, bias);
    rt_tensor *x = T(4, (int64_t[]){N, C, H, W}),
              *w = F(4, (int64_t[]){K, C / a.groups, a.kh, a.kw});
    rt_tensor *b = bias ? F(1, (int64_t[]){K}) : NULL;
    rt_tensor *y = T(4, (int64_t[]){N, K, OH, OW}), *yr = like(y), *dy = like(y);
    fill(x);
    fill(w);
    fill(dy);
    if (b)
        fill(b);
    rt_conv2d_fwd(P, x, w, b, &a, y);
    rt_cuda_own_conv2d_fwd(P, x, w, b, &a, yr);
    same("conv2d forward", y, yr, 1e-4, 1e-4, shape);
    rt_tensor *dx = like(x), *dxr = like(x), *dw = like(w), *db = b ? like(b) : NULL;
    fill(dw);
    rt_tensor *dwr = copy_of(dw), *dbr = NULL;
    if (b) {
        fill(db);
        dbr = copy_of(db);
    }
    rt_conv2d_bwd(P, x, w, dy, &a, dx, dw, db);
    rt_cuda_own_conv2d_bwd(P, x, w, dy, &a, dxr, dwr, dbr);
    same("conv2d input gradient", dx, dxr, 1e-4, 1e-4, shape);
    /* The weight and bias gradients sum N·OH·OW products per element (1,568 for N8 14x14),
     * in an order cuDNN chooses: f32 rounding grows with that count (the H200 showed 1.7e-4
     * on N8 C32 14x14 K64 with 1e-4 allowed), so the tolerance is 1e-4 per 512 terms. */
    const double terms = (double)N * (double)OH * (double)OW;
    const double tol = 1e-4 * (terms > 512.0 ? terms / 512.0 : 1.0);
    same_as("conv2d weight gradient", dw, dwr, tol, tol, shape, x->dtype != RT_F32);
    if (b)
        same("conv2d bias gradient", db, dbr, tol, tol, shape);
}

static void pool_case(int N, int C, int H, int W, rt_pool2d_attrs a, bool max)
{
    int64_t OH, OW;
    if (!rt_pool_pad_ok(a.kh, a.ph) || !rt_pool_pad_ok(a.kw, a.pw) ||
        rt_window_extent(H, a.kh, a.sh, a.ph, 1, a.ceil_mode, &OH) != RT_WINDOW_OK ||
        rt_window_extent(W, a.kw, a.sw, a.pw, 1, a.ceil_mode, &OW) != RT_WINDOW_OK)
        return;
    cases++;
    char shape[160];
    snprintf(shape, sizeof shape, "%spool N%d C%d %dx%d k%dx%d s%dx%d p%dx%d ceil%d exclude%d",
             max ? "max" : "avg", N, C, H, W, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.ceil_mode,
             a.exclude_pad);
    rt_tensor *x = T(4, (int64_t[]){N, C, H, W}), *y = T(4, (int64_t[]){N, C, OH, OW});
    rt_tensor *yr = like(y), *dy = like(y), *dx = like(x), *dxr = like(x);
    fill(x);
    fill(dy);
    if (max) {
        rt_maxpool2d_fwd(x, &a, y);
        rt_cuda_own_maxpool2d_fwd(x, &a, yr);
        rt_maxpool2d_bwd(x, dy, &a, dx);
        rt_cuda_own_maxpool2d_bwd(x, dy, &a, dxr);
    } else {
        rt_avgpool2d_fwd(x, &a, y);
        rt_cuda_own_avgpool2d_fwd(x, &a, yr);
        rt_avgpool2d_bwd(dy, &a, dx);
        rt_cuda_own_avgpool2d_bwd(dy, &a, dxr);
    }
    same("pooling forward", y, yr, 1e-6, 1e-5, shape);
    same("pooling input gradient", dx, dxr, 1e-6, 1e-5, shape);
}

static void bn_case(int N, int C, int H, int W)
{
    cases++;
    char shape[80];
    snprintf(shape, sizeof shape, "batchnorm N%d C%d %dx%d", N, C, H, W);
    rt_tensor *x = T(4, (int64_t[]){N, C, H, W}), *y = like(x), *yr = like(x), *dy = like(x);
    /* 16-bit data: cuDNN's statistics and parameter gradients come from its 16-bit kernels. */
    const bool h = x->dtype != RT_F32;
    rt_tensor *g = F(1, (int64_t[]){C}), *b = like(g), *rm = like(g), *rv = like(g);
    rt_tensor *saved = F(1, (int64_t[]){2 * C}), *savedr = like(saved);
    fill(x);
    fill(dy);
    fill(g);
    fill(b);
    fill(rm);
    rt_init_const(rv, 1.0f);
    rt_tensor *rmr = copy_of(rm), *rvr = copy_of(rv);
    rt_batchnorm2d_fwd(x, g, b, rm, rv, 0.1f, 1e-5f, saved, y);
    rt_cuda_own_batchnorm2d_fwd(x, g, b, rmr, rvr, 0.1f, 1e-5f, savedr, yr);
    same_as("batchnorm statistics", saved, savedr, 1e-6, 1e-4, shape, h);
    same_as("batchnorm output", y, yr, 1e-5, 1e-4, shape, h);
    same_as("batchnorm running mean", rm, rmr, 1e-6, 1e-5, shape, h);
    same_as("batchnorm running variance", rv, rvr, 1e-6, 1e-5, shape, h);
    rt_tensor *dx = like(x), *dxr = like(x), *dg = like(g), *db = like(g);
    fill(dg);
    fill(db);
    rt_tensor *dgr = copy_of(dg), *dbr = copy_of(db);
    rt_batchnorm2d_bwd(x, g, saved, dy, dx, dg, db);
    rt_cuda_own_batchnorm2d_bwd(x, g, savedr, dy, dxr, dgr, dbr);
    same_as("batchnorm input gradient", dx, dxr, 1e-5, 1e-3, shape, h);
    same_as("batchnorm gamma gradient", dg, dgr, 1e-4, 1e-4, shape, h);
    same_as("batchnorm beta gradient", db, dbr, 1e-4, 1e-4, shape, h);
    rt_batchnorm2d_infer(x, g, b, rm, rv, 1e-5f, y);
    rt_cuda_own_batchnorm2d_infer(x, g, b, rm, rv, 1e-5f, yr);
    same_as("batchnorm inference", y, yr, 1e-5, 1e-4, shape, h);
}

static void relu_case(int64_t n)
{
    cases++;
    char shape[40];
    snprintf(shape, sizeof shape, "relu %lld elements", (long long)n);
    rt_tensor *x = T(1, &n), *y = like(x), *yr = like(x), *dy = like(x), *dx = like(x),
              *dxr = like(x);
    fill(x);
    fill(dy);
    rt_relu_fwd(x, y);
    rt_cuda_own_relu_fwd(x, yr);
    rt_relu_bwd(x, dy, dx);
    rt_cuda_own_relu_bwd(x, dy, dxr);
    same("relu forward", y, yr, 1e-30, 0.0, shape);
    same("relu backward", dx, dxr, 1e-30, 0.0, shape);
}

int main(int argc, char **argv)
{
    if (rt_cuda_visible_devices() == 0) {
        printf("no GPU visible: skipped\n");
        return 77;
    }
    if (!rt_cuda_has_cudnn()) {
        printf("built without cuDNN: skipped\n");
        return 77;
    }
    rt_init(&argc, &argv, "test_cuda_cudnn");
    P = rt_pool_new();
    conv_case(8, 1, 28, 28, 32, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    conv_case(8, 32, 14, 14, 64, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    conv_case(4, 32, 28, 28, 32, (rt_conv2d_attrs){5, 5, 1, 1, 2, 2, 1, 1, 1}, false);
    conv_case(3, 64, 9, 11, 64, (rt_conv2d_attrs){3, 3, 1, 1, 2, 2, 2, 2, 4}, true);
    conv_case(2, 32, 7, 7, 32, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 32}, true);
    for (int t = 0; t < 80; t++) {
        const int g = rnd(1, 3);
        rt_conv2d_attrs a = {rnd(1, 5), rnd(1, 5), rnd(1, 3), rnd(1, 3), 0,
                             0,         rnd(1, 3), rnd(1, 3), g};
        a.ph = rnd(0, 2);
        a.pw = rnd(0, 2);
        conv_case(rnd(1, 4), g * rnd(1, 12), rnd(1, 12), rnd(1, 12), g * rnd(1, 12), a, rnd(0, 1));
    }
    pool_case(8, 32, 28, 28, (rt_pool2d_attrs){2, 2, 2, 2, 0, 0, 0, 0}, true);
    for (int t = 0; t < 80; t++) {
        rt_pool2d_attrs a = {rnd(1, 4), rnd(1, 4), rnd(1, 3), rnd(1, 3),
                             0,         0,         rnd(0, 1), rnd(0, 1)};
        a.ph = rnd(0, a.kh / 2);
        a.pw = rnd(0, a.kw / 2);
        pool_case(rnd(1, 3), rnd(1, 20), rnd(1, 11), rnd(1, 11), a, t % 2 == 0);
    }
    bn_case(32, 32, 28, 28);
    for (int t = 0; t < 20; t++)
        bn_case(rnd(1, 5), rnd(1, 40), rnd(1, 13), rnd(2, 13));
    relu_case(1);
    relu_case(1000);
    relu_case(1 << 20);
    rt_device_sync();
    rt_pool_free(P);
    rt_finalize();
    if (failures) {
        printf("test_cuda_cudnn: %d of the checks of %d cases failed\n", failures, cases);
        return 1;
    }
    printf("test_cuda_cudnn: %d cases, all checks passed\n", cases);
    return 0;
}
