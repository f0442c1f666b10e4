/* test_shapes.c: the shared argument rules. rt_window_extent (shape_rules.h) against a
 * brute-force count of window positions for every small input, kernel, stride, padding and
 * dilation, in floor and ceil mode; its overflow and argument errors; and the kernels'
 * checks (shapes.c), which must refuse what the formula refuses with a message naming the
 * op and the cause: a zero kernel height or width, a window larger than the padded input
 * (which a truncating division once let through at stride 3), pooling padding over half a
 * kernel, a normalisation's parameter gradient of the wrong size or dtype. */
#include "check.h"
#include "shape_rules.h"

#include <limits.h>

/* Window positions o >= 0 by their definition: in floor mode the whole dilated window lies
 * in the padded input; in ceil mode a window may hang over the right edge, as long as it
 * starts inside the image or its left padding and covers some of the padded input. */
static int64_t brute_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode)
{
    const int64_t span = d * (k - 1) + 1, padded = in + 2 * p;
    if (padded < span)
        return -1;
    int64_t n = 0;
    for (int64_t o = 0; o * s < padded; o++) {
        bool fits = o * s + span <= padded;
        bool hangs = ceil_mode && o * s < padded - span + s && o * s < in + p;
        if (fits || hangs)
            n++;
    }
    return n;
}

static void test_formula(void)
{
    int checked = 0;
    for (int64_t in = 0; in <= 12; in++)
        for (int64_t k = 1; k <= 5; k++)
            for (int64_t s = 1; s <= 4; s++)
                for (int64_t p = 0; p <= 3; p++)
                    for (int64_t d = 1; d <= 3; d++)
                        for (int c = 0; c < 2; c++) {
                            /* Ceil mode is pooling's: no dilation, at most half a kernel of
                             * padding (rt_pool_pad_ok). */
                            if (c && (d != 1 || !rt_pool_pad_ok(k, p)))
                                continue;
                            int64_t want = brute_extent(in, k, s, p, d, c), got = -7;
                            rt_window_status st = rt_window_extent(in, k, s, p, d, c, &got);
                            if (want < 0)
                                CHECK(st == RT_WINDOW_TOO_LARGE,
                                      "in %lld k %lld s %lld p %lld d %lld ceil %d: status %d, "
                                      "expected too large",
                                      (long long)in, (long long)k, (long long)s, (long long)p,
                                      (long long)d, c, (int)st);
                            else
                                CHECK(st == RT_WINDOW_OK && got == want,
                                      "in %lld k %lld s %lld p %lld d %lld ceil %d: %lld "
                                      "(status %d), expected %lld",
                                      (long long)in, (long long)k, (long long)s, (long long)p,
                                      (long long)d, c, (long long)got, (int)st, (long long)want);
                            checked++;
                        }
    /* PyTorch's documented examples: VGG's 2x2 pool of 7 floors to 3 and ceils to 4; a
     * ResNet stem 7x7/2 pad 3 conv of 224 gives 112. */
    int64_t o = 0;
    CHECK(rt_window_extent(7, 2, 2, 0, 1, false, &o) == RT_WINDOW_OK && o == 3, "floor pool");
    CHECK(rt_window_extent(7, 2, 2, 0, 1, true, &o) == RT_WINDOW_OK && o == 4, "ceil pool");
    CHECK(rt_window_extent(224, 7, 2, 3, 1, false, &o) == RT_WINDOW_OK && o == 112, "stem");
    /* Errors, never a wrapped-around size. */
    CHECK(rt_window_extent(INT64_MAX, 3, 1, INT64_MAX / 2, 1, false, &o) == RT_WINDOW_OVERFLOW,
          "padding overflow");
    CHECK(rt_window_extent(5, INT64_MAX, 1, 0, 2, false, &o) == RT_WINDOW_OVERFLOW,
          "dilated kernel overflow");
    CHECK(rt_window_extent(INT64_MAX - 1, 1, 1, 0, 1, false, &o) == RT_WINDOW_OK &&
              o == INT64_MAX - 1,
          "largest input");
    CHECK(rt_window_extent(INT64_MAX - 2, 2, INT64_MAX, 1, 1, true, &o) == RT_WINDOW_OK && o == 1,
          "ceil mode with a huge stride");
    CHECK(rt_window_extent(5, 0, 1, 0, 1, false, &o) == RT_WINDOW_BAD_ARGUMENT, "zero kernel");
    CHECK(rt_window_extent(5, 3, 0, 0, 1, false, &o) == RT_WINDOW_BAD_ARGUMENT, "zero stride");
    CHECK(rt_window_extent(5, 3, 1, -1, 1, false, &o) == RT_WINDOW_BAD_ARGUMENT, "negative pad");
    CHECK(rt_window_extent(-1, 3, 1, 0, 1, false, &o) == RT_WINDOW_BAD_ARGUMENT, "negative input");
    CHECK(rt_pool_pad_ok(3, 1) && !rt_pool_pad_ok(3, 2) && rt_pool_pad_ok(4, 2), "pool padding");
    printf("test_shapes: the window formula equals the brute-force count in %d cases\n", checked);
}

/* ---- the kernels refuse what the formula refuses -------------------------------------- */

typedef struct {
    int64_t H, W;
    rt_conv2d_attrs conv;
    rt_pool2d_attrs pool;
    int64_t OH, OW; /* the output the caller made */
} call;

static void run_conv(void *ctx)
{
    call *c = ctx;
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){1, 2, c->H, c->W});
    rt_tensor *w = rt_tensor_new(P, RT_F32, 4, (int64_t[]){3, 2, c->conv.kh, c->conv.kw});
    rt_tensor *y = rt_tensor_new(P, RT_F32, 4, (int64_t[]){1, 3, c->OH, c->OW});
    rt_conv2d_fwd(P, x, w, NULL, &c->conv, y);
}

static void run_maxpool(void *ctx)
{
    call *c = ctx;
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){1, 2, c->H, c->W});
    rt_tensor *y = rt_tensor_new(P, RT_F32, 4, (int64_t[]){1, 2, c->OH, c->OW});
    rt_maxpool2d_fwd(x, &c->pool, y);
}

/* Batch norm's backward with a gamma gradient of C + 1 floats (C = 2). */
static void run_batchnorm_bwd(void *ctx)
{
    (void)ctx;
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){2, 2, 3, 3});
    rt_tensor *dy = rt_tensor_new(P, RT_F32, 4, (int64_t[]){2, 2, 3, 3});
    rt_tensor *g = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2});
    rt_tensor *saved = rt_tensor_new(P, RT_F32, 1, (int64_t[]){4});
    rt_tensor *dg = rt_tensor_new(P, RT_F32, 1, (int64_t[]){3});
    rt_tensor *db = rt_tensor_new(P, RT_F32, 1, (int64_t[]){2});
    rt_batchnorm2d_bwd(x, g, saved, dy, NULL, dg, db);
}

/* Layer norm's backward with an i32 beta gradient. */
static void run_layernorm_bwd(void *ctx)
{
    (void)ctx;
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_F32, 2, (int64_t[]){3, 4});
    rt_tensor *dy = rt_tensor_new(P, RT_F32, 2, (int64_t[]){3, 4});
    rt_tensor *g = rt_tensor_new(P, RT_F32, 1, (int64_t[]){4});
    rt_tensor *saved = rt_tensor_new(P, RT_F32, 1, (int64_t[]){6});
    rt_tensor *db = rt_tensor_new(P, RT_I32, 1, (int64_t[]){4});
    rt_layernorm_bwd(x, g, saved, dy, NULL, NULL, db);
}

static void test_kernel_checks(void)
{
    call c = {.H = 5, .W = 5, .conv = {0, 3, 1, 1, 0, 0, 1, 1, 1}, .OH = 5, .OW = 3};
    expect_fatal("conv2d, kernel height 0", run_conv, &c,
                 "conv2d_fwd: height: kernel, stride and dilation must be positive");
    c.conv = (rt_conv2d_attrs){3, 0, 1, 1, 0, 0, 1, 1, 1};
    expect_fatal("conv2d, kernel width 0", run_conv, &c,
                 "conv2d_fwd: width: kernel, stride and dilation must be positive");
    /* (1 - 3) / 3 truncates to 0: a 3x3 window on a 1x1 image looked like one output. */
    c = (call){.H = 1, .W = 1, .conv = {3, 3, 3, 3, 0, 0, 1, 1, 1}, .OH = 1, .OW = 1};
    expect_fatal("conv2d, window larger than the input", run_conv, &c,
                 "conv2d_fwd: height: the window is larger than the padded input (input 1, "
                 "kernel 3, stride 3, padding 0, dilation 1)");
    c = (call){.H = 6, .W = 6, .conv = {3, 3, 1, 1, 1, 1, 1, 1, 1}, .OH = 6, .OW = 5};
    expect_fatal("conv2d, wrong output", run_conv, &c,
                 "conv2d_fwd: output shape [1,3,6,5], expected [1,3,6,6]");

    c = (call){.H = 5, .W = 5, .pool = {3, 3, 1, 1, 2, 2, 0, 0}, .OH = 7, .OW = 7};
    expect_fatal("maxpool, padding over half the kernel", run_maxpool, &c,
                 "maxpool2d_fwd: padding 2x2 exceeds half the 3x3 kernel");
    c = (call){.H = 5, .W = 5, .pool = {2, 0, 2, 2, 0, 0, 0, 0}, .OH = 2, .OW = 2};
    expect_fatal("maxpool, kernel width 0", run_maxpool, &c,
                 "maxpool2d_fwd: width: kernel, stride and dilation must be positive");
    c = (call){.H = 7, .W = 7, .pool = {2, 2, 2, 2, 0, 0, 1, 0}, .OH = 3, .OW = 3};
    expect_fatal("maxpool, floor-sized output in ceil mode", run_maxpool, &c,
                 "maxpool2d_fwd: output shape [1,2,3,3], expected [1,2,4,4]");

    /* The parameter gradients a normalisation adds into: f32, one per channel or feature. */
    expect_fatal("batchnorm, gamma gradient of the wrong size", run_batchnorm_bwd, NULL,
                 "batchnorm2d_bwd: gamma gradient has 3 elements, expected 2");
    expect_fatal("layernorm, i32 beta gradient", run_layernorm_bwd, NULL,
                 "layernorm_bwd: beta gradient has dtype i32, expected f32");
}

int main(void)
{
    test_formula();
    test_kernel_checks();
    printf("test_shapes: %s\n", check_failures ? "FAILED" : "all passed");
    return check_failures ? 1 : 0;
}
