/* test_onednn.c: every production path of the CPU backend that replaced a reference kernel
 * (oneDNN's convolutions, pooling, eltwise and sgemm; the vectorised batchnorm) against that
 * reference (runtime/cpu/ref.h) on random shapes: odd sizes, and every combination of
 * stride, padding, dilation, groups, bias, ceil mode and count_include_pad that the op
 * table allows; channel counts that take oneDNN's blocked layouts as well as small ones
 * that do not. Also what a forward keeps for its backward: a backward after the forward
 * of its own input, after the forward of another input of the same shape, and without a
 * forward, must all give the reference's gradients. Each case runs with one thread and
 * with two. */
#include "check.h"
#include "cpu/ref.h"
#include "shape_rules.h"

#include <omp.h>

static rt_pool *P;
static int cases;

static rt_tensor *T4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return rt_tensor_new(P, RT_F32, 4, (int64_t[]){a, b, c, d});
}

static rt_tensor *like(const rt_tensor *t)
{
    return rt_tensor_new(P, t->dtype, t->ndim, t->shape);
}

static int rnd(int lo, int hi) /* uniform in [lo, hi] */
{
    test_rng = rt_hash64(test_rng);
    return lo + (int)((test_rng >> 33) % (uint64_t)(hi - lo + 1));
}

/* Largest |a - b| / (atol + rtol |b|), b the reference (<= 1: close). */
static double worst(const rt_tensor *a, const rt_tensor *b, double atol, double rtol)
{
    double w = 0.0;
    for (int64_t i = 0; i < a->numel; i++) {
        double r = fabs((double)rt_f32(a)[i] - rt_f32(b)[i]) / (atol + rtol * fabs(rt_f32(b)[i]));
        if (!(r <= w))
            w = r;
    }
    return w;
}

#define SAME(what, a, b, atol, rtol, fmt, ...)                                             \
    do {                                                                                   \
        double w_ = worst((a), (b), (atol), (rtol));                                       \
        CHECK(w_ <= 1.0, "%s differs from the reference (ratio %.3g) in " fmt, (what), w_, \
              __VA_ARGS__);                                                                \
    } while (0)

/* ---- conv2d ------------------------------------------------------------------------------ */

static void conv_case(int N, int C, int H, int W, int K, rt_conv2d_attrs a, bool bias)
{
    int64_t OH, OW;
    if (rt_window_extent(H, a.kh, a.sh, a.ph, a.dh, false, &OH) != RT_WINDOW_OK ||
        rt_window_extent(W, a.kw, a.sw, a.pw, a.dw, false, &OW) != RT_WINDOW_OK)
        return;
    cases++;
    rt_tensor *x = T4(N, C, H, W), *x2 = like(x), *w = T4(K, C / a.groups, a.kh, a.kw);
    rt_tensor *b = bias ? rt_tensor_new(P, RT_F32, 1, (int64_t[]){K}) : NULL;
    rt_tensor *y = T4(N, K, OH, OW), *yr = like(y), *dy = like(y);
    fill(x);
    fill(x2);
    fill(w);
    fill(dy);
    if (b)
        fill(b);
    rt_ref_conv2d_fwd(P, x, w, b, &a, yr);
    rt_conv2d_fwd(P, x, w, b, &a, y);
#define CONV_ARGS N, C, H, W, K, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.groups, bias
    SAME("forward", y, yr, 1e-4, 1e-4,
         "conv N%d C%d %dx%d K%d k%dx%d s%dx%d p%dx%d d%dx%d g%d bias%d", CONV_ARGS);
    /* Reference gradients, accumulated onto non-zero dw and db as the API promises. */
    rt_tensor *dxr = like(x), *dwr = like(w), *dbr = b ? like(b) : NULL;
    rt_tensor *dx = like(x), *dw = like(w), *db = b ? like(b) : NULL;
    fill(dwr);
    rt_tensor_copy(dw, dwr);
    if (b) {
        fill(dbr);
        rt_tensor_copy(db, dbr);
    }
    rt_ref_conv2d_bwd(P, x, w, dy, &a, dxr, dwr, dbr);
    /* Another input of the same shape goes forward in between: the backward must still
     * use what the forward of x kept. */
    rt_conv2d_fwd(P, x2, w, b, &a, y);
    rt_conv2d_bwd(P, x, w, dy, &a, dx, dw, db);
    SAME("input gradient", dx, dxr, 1e-4, 1e-4,
         "conv N%d C%d %dx%d K%d k%dx%d s%dx%d p%dx%d d%dx%d g%d bias%d", CONV_ARGS);
    SAME("weight gradient", dw, dwr, 1e-4, 1e-4,
         "conv N%d C%d %dx%d K%d k%dx%d s%dx%d p%dx%d d%dx%d g%d bias%d", CONV_ARGS);
    if (b)
        SAME("bias gradient", db, dbr, 1e-4, 1e-4,
             "conv N%d C%d %dx%d K%d k%dx%d s%dx%d p%dx%d d%dx%d g%d bias%d", CONV_ARGS);
    /* The weight gradient alone, of an input no forward has seen. */
    rt_tensor *x3 = like(x);
    rt_tensor_copy(x3, x);
    rt_tensor *dw3 = like(w);
    rt_tensor_copy(dw3, dw);
    rt_conv2d_bwd(P, x3, w, dy, &a, NULL, dw3, NULL);
    rt_tensor *dw4 = like(w);
    rt_tensor_copy(dw4, dw);
    rt_ref_conv2d_bwd(P, x, w, dy, &a, NULL, dw4, NULL);
    SAME("weight gradient without a forward", dw3, dw4, 1e-4, 1e-4,
         "conv N%d C%d %dx%d K%d k%dx%d s%dx%d p%dx%d d%dx%d g%d bias%d", CONV_ARGS);
#undef CONV_ARGS
}

static void test_conv(void)
{
    /* The layers of the examples (blocked layouts), then random shapes. */
    conv_case(8, 1, 28, 28, 32, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    conv_case(8, 32, 14, 14, 64, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    conv_case(4, 32, 28, 28, 32, (rt_conv2d_attrs){5, 5, 1, 1, 2, 2, 1, 1, 1}, false);
    conv_case(3, 64, 9, 11, 48, (rt_conv2d_attrs){3, 3, 2, 2, 1, 1, 1, 1, 1}, false);
    conv_case(3, 64, 9, 11, 64, (rt_conv2d_attrs){3, 3, 1, 1, 2, 2, 2, 2, 4}, true);
    conv_case(2, 32, 7, 7, 32, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 32}, true);
    conv_case(5, 16, 13, 6, 32, (rt_conv2d_attrs){1, 1, 2, 1, 0, 0, 1, 1, 1}, true);
    for (int t = 0; t < 120; t++) {
        const int g = rnd(1, 3);
        const int C = g * rnd(1, t % 4 == 0 ? 24 : 5), K = g * rnd(1, t % 4 == 0 ? 24 : 5);
        rt_conv2d_attrs a = {rnd(1, 5), rnd(1, 5), rnd(1, 3), rnd(1, 3), 0,
                             0,         rnd(1, 3), rnd(1, 3), g};
        a.ph = rnd(0, 2);
        a.pw = rnd(0, 2);
        conv_case(rnd(1, 4), C, rnd(1, 12), rnd(1, 12), K, a, rnd(0, 1));
    }
}

/* ---- pooling ---------------------------------------------------------------------------- */

static void pool_case(int N, int C, int H, int W, rt_pool2d_attrs a, bool max)
{
    int64_t OH, OW;
    if (!rt_pool_pad_ok(a.kh, a.ph) || !rt_pool_pad_ok(a.kw, a.pw) ||
        rt_window_extent(H, a.kh, a.sh, a.ph, 1, a.ceil_mode, &OH) != RT_WINDOW_OK ||
        rt_window_extent(W, a.kw, a.sw, a.pw, 1, a.ceil_mode, &OW) != RT_WINDOW_OK)
        return;
    cases++;
    rt_tensor *x = T4(N, C, H, W), *x2 = like(x), *y = T4(N, C, OH, OW), *yr = like(y);
    rt_tensor *dy = like(y), *dx = like(x), *dxr = like(x);
    fill(x);
    fill(x2);
    fill(dy);
#define POOL_ARGS \
    max ? "max" : "avg", N, C, H, W, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.ceil_mode, a.exclude_pad
#define POOL_FMT "%spool N%d C%d %dx%d k%dx%d s%dx%d p%dx%d ceil%d exclude%d"
    if (max) {
        rt_ref_maxpool2d_fwd(x, &a, yr);
        rt_maxpool2d_fwd(x, &a, y);
        rt_ref_maxpool2d_bwd(x, dy, &a, dxr);
        rt_maxpool2d_fwd(x2, &a, y); /* another input's forward in between */
        fill(dx);                    /* the backward writes every element, zeros too */
        rt_maxpool2d_bwd(x, dy, &a, dx);
        SAME("input gradient", dx, dxr, 1e-6, 1e-6, POOL_FMT, POOL_ARGS);
        rt_maxpool2d_fwd(x, &a, y);
        SAME("forward", y, yr, 1e-6, 1e-6, POOL_FMT, POOL_ARGS);
        /* A backward without a forward of its input. */
        rt_tensor *x3 = like(x);
        rt_tensor_copy(x3, x);
        rt_maxpool2d_bwd(x3, dy, &a, dx);
        SAME("input gradient without a forward", dx, dxr, 1e-6, 1e-6, POOL_FMT, POOL_ARGS);
    } else {
        rt_ref_avgpool2d_fwd(x, &a, yr);
        rt_avgpool2d_fwd(x, &a, y);
        SAME("forward", y, yr, 1e-5, 1e-5, POOL_FMT, POOL_ARGS);
        rt_ref_avgpool2d_bwd(dy, &a, dxr);
        rt_avgpool2d_bwd(dy, &a, dx);
        SAME("input gradient", dx, dxr, 1e-5, 1e-5, POOL_FMT, POOL_ARGS);
    }
#undef POOL_ARGS
#undef POOL_FMT
}

/* Equal element by element, NaN equal to NaN. */
static bool same_or_nan(const rt_tensor *a, const rt_tensor *b)
{
    for (int64_t i = 0; i < a->numel; i++) {
        float u = rt_f32(a)[i], v = rt_f32(b)[i];
        if (!(u == v || (u != u && v != v)))
            return false;
    }
    return true;
}

/* NaNs in 2x2 windows: the maximum is NaN and the gradient goes to the window's last NaN,
 * as the reference (PyTorch's rule) has it, in every position of the window. */
static void pool_nan_case(void)
{
    rt_pool2d_attrs a = {2, 2, 2, 2, 0, 0, 0, 0};
    rt_tensor *x = T4(2, 3, 6, 20), *y = T4(2, 3, 3, 10), *yr = like(y), *dy = like(y);
    rt_tensor *dx = like(x), *dxr = like(x);
    fill(x);
    fill(dy);
    for (int k = 0; k < 40; k++)
        rt_f32(x)[rnd(0, (int)x->numel - 1)] = NAN;
    rt_ref_maxpool2d_fwd(x, &a, yr);
    rt_ref_maxpool2d_bwd(x, dy, &a, dxr);
    rt_maxpool2d_fwd(x, &a, y);
    rt_maxpool2d_bwd(x, dy, &a, dx);
    cases++;
    CHECK(same_or_nan(y, yr), "2x2 max pooling with NaNs: the forward differs from the reference");
    CHECK(same_or_nan(dx, dxr), "2x2 max pooling with NaNs: the input gradient differs");
}

static void test_pool(void)
{
    pool_case(8, 32, 28, 28, (rt_pool2d_attrs){2, 2, 2, 2, 0, 0, 0, 0}, true);
    pool_case(4, 64, 28, 28, (rt_pool2d_attrs){2, 2, 2, 2, 0, 0, 0, 0}, true);
    pool_case(3, 16, 15, 15, (rt_pool2d_attrs){3, 3, 2, 2, 1, 1, 1, 0}, true);
    pool_case(3, 16, 15, 15, (rt_pool2d_attrs){3, 3, 2, 2, 1, 1, 1, 0}, false);
    pool_case(3, 16, 15, 15, (rt_pool2d_attrs){3, 3, 2, 2, 1, 1, 1, 1}, false);
    for (int t = 0; t < 160; t++) {
        rt_pool2d_attrs a = {rnd(1, 4), rnd(1, 4), rnd(1, 3), rnd(1, 3),
                             0,         0,         rnd(0, 1), rnd(0, 1)};
        a.ph = rnd(0, a.kh / 2);
        a.pw = rnd(0, a.kw / 2);
        pool_case(rnd(1, 3), rnd(1, 20), rnd(1, 11), rnd(1, 11), a, t % 2 == 0);
    }
    /* 2x2, stride 2 (pool.c's own kernel where rows have at least 8 outputs, oneDNN
     * below): odd heights and widths, whose last row or column lies in no window, and ceil
     * mode, whose windows at an odd edge are partial. */
    for (int t = 0; t < 60; t++)
        pool_case(rnd(1, 3), rnd(1, 6), rnd(2, 21), rnd(2, 37),
                  (rt_pool2d_attrs){2, 2, 2, 2, 0, 0, rnd(0, 1), 0}, true);
    pool_nan_case();
}

/* ---- activations, batchnorm, linear ------------------------------------------------------ */

static void test_eltwise(void)
{
    const int64_t sizes[] = {1, 17, 1000, 65537};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t n = sizes[s];
        rt_tensor *x = rt_tensor_new(P, RT_F32, 1, &n), *dy = like(x);
        rt_tensor *y = like(x), *yr = like(x), *dx = like(x), *dxr = like(x);
        fill(x);
        fill(dy);
        for (int64_t i = 0; i < n; i++)
            rt_f32(x)[i] *= 6.0f; /* GELU's whole curve */
        rt_f32(x)[0] = 0.0f;      /* relu's kink: gradient 0 there, as PyTorch */
        rt_relu_fwd(x, y);
        rt_ref_relu_fwd(x, yr);
        SAME("relu forward", y, yr, 1e-30, 0.0, "%lld elements", (long long)n);
        rt_relu_bwd(x, dy, dx);
        rt_ref_relu_bwd(x, dy, dxr);
        SAME("relu backward", dx, dxr, 1e-30, 0.0, "%lld elements", (long long)n);
        rt_f32(x)[n - 1] = 6.0f; /* relu6's upper bound: gradient 0 there too */
        rt_relu6_fwd(x, y);
        rt_ref_relu6_fwd(x, yr);
        SAME("relu6 forward", y, yr, 1e-30, 0.0, "%lld elements", (long long)n);
        rt_relu6_bwd(x, dy, dx);
        rt_ref_relu6_bwd(x, dy, dxr);
        SAME("relu6 backward", dx, dxr, 1e-30, 0.0, "%lld elements", (long long)n);
        rt_gelu_fwd(x, y);
        rt_ref_gelu_fwd(x, yr);
        SAME("gelu forward", y, yr, 1e-6, 1e-5, "%lld elements", (long long)n);
        rt_gelu_bwd(x, dy, dx);
        rt_ref_gelu_bwd(x, dy, dxr);
        SAME("gelu backward", dx, dxr, 1e-6, 1e-5, "%lld elements", (long long)n);
        rt_gelu_erf_fwd(x, y);
        rt_ref_gelu_erf_fwd(x, yr);
        SAME("gelu_erf forward", y, yr, 1e-6, 1e-5, "%lld elements", (long long)n);
        rt_gelu_erf_bwd(x, dy, dx);
        rt_ref_gelu_erf_bwd(x, dy, dxr);
        SAME("gelu_erf backward", dx, dxr, 1e-6, 1e-5, "%lld elements", (long long)n);
        cases += 8;
    }
}

static void bn_case(int N, int C, int H, int W, float offset, float scale)
{
    cases++;
    rt_tensor *x = T4(N, C, H, W), *y = like(x), *yr = like(x), *dy = like(x);
    rt_tensor *g = rt_tensor_new(P, RT_F32, 1, (int64_t[]){C}), *b = like(g);
    rt_tensor *saved = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2 * C}), *savedr = like(saved);
    rt_tensor *rm = like(g), *rv = like(g), *rmr = like(g), *rvr = like(g);
    fill(x);
    fill(dy);
    fill(g);
    fill(b);
    fill(rm);
    fill(rv);
    for (int64_t i = 0; i < x->numel; i++)
        rt_f32(x)[i] = offset + scale * rt_f32(x)[i];
    rt_tensor_copy(rmr, rm);
    rt_tensor_copy(rvr, rv);
    rt_batchnorm2d_fwd(x, g, b, rm, rv, 0.1f, 1e-5f, saved, y);
    rt_ref_batchnorm2d_fwd(NULL, x, g, b, rmr, rvr, 0.1f, 1e-5f, savedr, yr);
    /* The statistics as PyTorch (double reference) has them, to 1e-5 relative. */
    SAME("batchnorm statistics", saved, savedr, 1e-7, 1e-5, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
    /* The output against a double computation (the reference's x*a + b form loses digits
     * to cancellation when the mean is large against the spread). */
    const int64_t HW = (int64_t)H * W, cnt = (int64_t)N * HW;
    for (int c = 0; c < C; c++) {
        double m = 0.0, v = 0.0;
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++)
                m += rt_f32(x)[(n * C + c) * HW + i];
        m /= (double)cnt;
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                double d = rt_f32(x)[(n * C + c) * HW + i] - m;
                v += d * d;
            }
        const double k = rt_f32(g)[c] / sqrt(v / (double)cnt + 1e-5);
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                const int64_t at = (n * C + c) * HW + i;
                rt_f32(yr)[at] = (float)((rt_f32(x)[at] - m) * k + rt_f32(b)[c]);
            }
    }
    SAME("batchnorm forward", y, yr, 1e-5, 1e-4, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
    SAME("batchnorm running mean", rm, rmr, 1e-7, 1e-5, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
    SAME("batchnorm running variance", rv, rvr, 1e-7, 1e-5, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
    rt_tensor *dx = like(x), *dxr = like(x), *dg = like(g), *dgr = like(g), *db = like(g),
              *dbr = like(g);
    fill(dg);
    fill(db);
    rt_tensor_copy(dgr, dg);
    rt_tensor_copy(dbr, db);
    rt_batchnorm2d_bwd(x, g, saved, dy, dx, dg, db);
    rt_ref_batchnorm2d_bwd(NULL, x, g, savedr, dy, dxr, dgr, dbr);
    SAME("batchnorm input gradient", dx, dxr, 1e-4, 1e-3, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
    SAME("batchnorm gamma gradient", dg, dgr, 1e-4, 1e-4, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
    SAME("batchnorm beta gradient", db, dbr, 1e-4, 1e-4, "N%d C%d %dx%d offset %g", N, C, H, W,
         (double)offset);
}

static void test_batchnorm(void)
{
    bn_case(32, 32, 28, 28, 0.0f, 1.0f); /* the small ResNet's layers */
    bn_case(16, 64, 14, 14, 0.5f, 2.0f);
    /* A large mean and a small spread: E[x^2] - E[x]^2 in f32 would lose every digit. */
    bn_case(8, 5, 9, 7, 1000.0f, 0.01f);
    for (int t = 0; t < 30; t++)
        bn_case(rnd(1, 5), rnd(1, 40), rnd(1, 13), rnd(1, 13), (float)rnd(-3, 3), 1.0f);
}

static void test_linear(void)
{
    for (int t = 0; t < 40; t++) {
        const int M = rnd(1, 70), in = rnd(1, 300), out = rnd(1, 140);
        const bool bias = rnd(0, 1);
        rt_tensor *x = rt_tensor_new(P, RT_F32, 2, (int64_t[]){M, in});
        rt_tensor *w = rt_tensor_new(P, RT_F32, 2, (int64_t[]){out, in});
        rt_tensor *b = bias ? rt_tensor_new(P, RT_F32, 1, (int64_t[]){out}) : NULL;
        rt_tensor *y = rt_tensor_new(P, RT_F32, 2, (int64_t[]){M, out}), *yr = like(y),
                  *dy = like(y);
        rt_tensor *dx = like(x), *dxr = like(x), *dw = like(w), *dwr = like(w);
        rt_tensor *db = b ? like(b) : NULL, *dbr = b ? like(b) : NULL;
        fill(x);
        fill(w);
        fill(dy);
        fill(dw);
        rt_tensor_copy(dwr, dw);
        if (b) {
            fill(b);
            fill(db);
            rt_tensor_copy(dbr, db);
        }
        rt_linear_fwd(x, w, b, y);
        rt_ref_linear_fwd(x, w, b, yr);
        SAME("linear forward", y, yr, 1e-4, 1e-4, "M%d in%d out%d", M, in, out);
        rt_linear_bwd(x, w, dy, dx, dw, db);
        rt_ref_linear_bwd(x, w, dy, dxr, dwr, dbr);
        SAME("linear input gradient", dx, dxr, 1e-4, 1e-4, "M%d in%d out%d", M, in, out);
        SAME("linear weight gradient", dw, dwr, 1e-4, 1e-4, "M%d in%d out%d", M, in, out);
        if (b)
            SAME("linear bias gradient", db, dbr, 1e-4, 1e-4, "M%d in%d out%d", M, in, out);
        cases++;
    }
}

int main(void)
{
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        test_rng = 12345 + (uint64_t)threads;
        P = rt_pool_new();
        test_conv();
        test_pool();
        test_eltwise();
        test_batchnorm();
        test_linear();
        rt_pool_free(P);
    }
    rt_finalize();
    if (check_failures) {
        fprintf(stderr, "test_onednn: %d checks failed\n", check_failures);
        return 1;
    }
    printf("test_onednn: %d cases, all checks passed\n", cases);
    return 0;
}
