/* test_kernels.c: every CPU kernel of libburstrt against a naive double-precision
 * reference (forward) and against finite differences (backward), plus the properties
 * burst parallelism relies on: dropout masks independent of how the batch is sharded
 * and cross-entropy partial losses that sum to the full-batch loss. */
#include "check.h"

static rt_pool *P;

static rt_tensor *T(int nd, int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t s[4] = {a, b, c, d};
    return rt_tensor_new(P, RT_F32, nd, s);
}

static rt_tensor *like(const rt_tensor *t)
{
    return rt_tensor_new(P, t->dtype, t->ndim, t->shape);
}

static double *dalloc(int64_t n)
{
    return calloc((size_t)n, sizeof(double));
}

/* ---- conv2d ------------------------------------------------------------------------ */

typedef struct {
    rt_tensor *x, *w, *b, *y, *dy, *dx, *dw, *db;
    rt_conv2d_attrs a;
} conv_ctx;

static void conv_f(void *p)
{
    conv_ctx *c = p;
    rt_conv2d_fwd(P, c->x, c->w, c->b, &c->a, c->y);
}
static void conv_b(void *p)
{
    conv_ctx *c = p;
    rt_conv2d_bwd(P, c->x, c->w, c->dy, &c->a, c->dx, c->dw, c->db);
}

static void test_conv(int N, int C, int H, int W, int K, rt_conv2d_attrs a, bool bias)
{
    conv_ctx c = {.a = a};
    int64_t OH = (H + 2 * a.ph - a.dh * (a.kh - 1) - 1) / a.sh + 1;
    int64_t OW = (W + 2 * a.pw - a.dw * (a.kw - 1) - 1) / a.sw + 1;
    c.x = T(4, N, C, H, W);
    c.w = T(4, K, C / a.groups, a.kh, a.kw);
    c.b = bias ? T(1, K, 0, 0, 0) : NULL;
    c.y = T(4, N, K, OH, OW);
    fill(c.x);
    fill(c.w);
    if (bias)
        fill(c.b);
    conv_f(&c);
    double *ref = dalloc(c.y->numel);
    int Cg = C / a.groups, Kg = K / a.groups;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double s = bias ? rt_f32(c.b)[k] : 0.0;
                    int g = k / Kg;
                    for (int ci = 0; ci < Cg; ci++)
                        for (int i = 0; i < a.kh; i++)
                            for (int j = 0; j < a.kw; j++) {
                                int ih = oh * a.sh - a.ph + i * a.dh,
                                    iw = ow * a.sw - a.pw + j * a.dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                s +=
                                    (double)rt_f32(c.x)[((n * C + g * Cg + ci) * H + ih) * W + iw] *
                                    rt_f32(c.w)[((k * Cg + ci) * a.kh + i) * a.kw + j];
                            }
                    ref[((n * K + k) * OH + oh) * OW + ow] = s;
                }
    CHECK_CLOSE("conv2d_fwd", rt_f32(c.y), ref, c.y->numel, 1e-4, 1e-4);
    free(ref);
    c.dy = like(c.y);
    c.dx = like(c.x);
    c.dw = like(c.w);
    c.db = bias ? like(c.b) : NULL;
    gvar v[3] = {{c.x, c.dx, "x"}, {c.w, c.dw, "w"}, {c.b, c.db, "b"}};
    gradcheck("conv2d", conv_f, conv_b, &c, c.y, c.dy, v, bias ? 3 : 2);
}

/* ---- linear, matmul --------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *w, *b, *y, *dy, *dx, *dw, *db;
} lin_ctx;
static void lin_f(void *p)
{
    lin_ctx *c = p;
    rt_linear_fwd(c->x, c->w, c->b, c->y);
}
static void lin_b(void *p)
{
    lin_ctx *c = p;
    rt_linear_bwd(c->x, c->w, c->dy, c->dx, c->dw, c->db);
}

static void test_linear(bool bias)
{
    lin_ctx c;
    c.x = T(3, 2, 3, 5, 0);
    c.w = T(2, 4, 5, 0, 0);
    c.b = bias ? T(1, 4, 0, 0, 0) : NULL;
    c.y = T(3, 2, 3, 4, 0);
    fill(c.x);
    fill(c.w);
    if (bias)
        fill(c.b);
    lin_f(&c);
    double ref[24];
    for (int m = 0; m < 6; m++)
        for (int o = 0; o < 4; o++) {
            double s = bias ? rt_f32(c.b)[o] : 0.0;
            for (int i = 0; i < 5; i++)
                s += (double)rt_f32(c.x)[m * 5 + i] * rt_f32(c.w)[o * 5 + i];
            ref[m * 4 + o] = s;
        }
    CHECK_CLOSE("linear_fwd", rt_f32(c.y), ref, 24, 1e-5, 1e-5);
    c.dy = like(c.y);
    c.dx = like(c.x);
    c.dw = like(c.w);
    c.db = bias ? like(c.b) : NULL;
    gvar v[3] = {{c.x, c.dx, "x"}, {c.w, c.dw, "w"}, {c.b, c.db, "b"}};
    gradcheck("linear", lin_f, lin_b, &c, c.y, c.dy, v, bias ? 3 : 2);
}

typedef struct {
    rt_tensor *a, *b, *c, *dc, *da, *db;
} mm_ctx;
static void mm_f(void *p)
{
    mm_ctx *c = p;
    rt_matmul_fwd(c->a, c->b, c->c);
}
static void mm_b(void *p)
{
    mm_ctx *c = p;
    rt_matmul_bwd(c->a, c->b, c->dc, c->da, c->db);
}

static void test_matmul(void)
{
    mm_ctx c;
    c.a = T(3, 2, 3, 4, 0);
    c.b = T(3, 2, 4, 5, 0);
    c.c = T(3, 2, 3, 5, 0);
    fill(c.a);
    fill(c.b);
    mm_f(&c);
    double ref[30];
    for (int bb = 0; bb < 2; bb++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                double s = 0;
                for (int k = 0; k < 4; k++)
                    s += (double)rt_f32(c.a)[(bb * 3 + i) * 4 + k] *
                         rt_f32(c.b)[(bb * 4 + k) * 5 + j];
                ref[(bb * 3 + i) * 5 + j] = s;
            }
    CHECK_CLOSE("matmul_fwd", rt_f32(c.c), ref, 30, 1e-5, 1e-5);
    c.dc = like(c.c);
    c.da = like(c.a);
    c.db = like(c.b);
    gvar v[2] = {{c.a, c.da, "a"}, {c.b, c.db, "b"}};
    gradcheck("matmul", mm_f, mm_b, &c, c.c, c.dc, v, 2);
}

/* ---- activations ---------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *y, *dy, *dx;
    int which; /* 0 relu, 1 gelu, 2 tanh, 3 sigmoid, 4 relu6, 5 hardsigmoid, 6 hardswish, 7 silu,
                 8 gelu_erf */
} act_ctx;
static void (*const act_fwd[])(const rt_tensor *, rt_tensor *) = {
    rt_relu_fwd,        rt_gelu_fwd,      rt_tanh_fwd, rt_sigmoid_fwd, rt_relu6_fwd,
    rt_hardsigmoid_fwd, rt_hardswish_fwd, rt_silu_fwd, rt_gelu_erf_fwd};
static void (*const act_bwd[])(const rt_tensor *, const rt_tensor *, rt_tensor *) = {
    rt_relu_bwd,        rt_gelu_bwd,      rt_tanh_bwd, rt_sigmoid_bwd, rt_relu6_bwd,
    rt_hardsigmoid_bwd, rt_hardswish_bwd, rt_silu_bwd, rt_gelu_erf_bwd};
static const char *const act_name[] = {"relu",        "gelu",      "tanh", "sigmoid", "relu6",
                                       "hardsigmoid", "hardswish", "silu", "gelu_erf"};
static void act_f(void *p)
{
    act_ctx *c = p;
    act_fwd[c->which](c->x, c->y);
}
static void act_b(void *p)
{
    act_ctx *c = p;
    act_bwd[c->which](c->x, c->dy, c->dx);
}

static void test_activations(void)
{
    for (int which = 0; which < 9; which++) {
        act_ctx c = {.which = which};
        c.x = T(2, 4, 25, 0, 0);
        fill(c.x);
        for (int64_t i = 0; i < c.x->numel; i++) { /* keep the kinks out of reach of eps */
            if (which >= 4)
                rt_f32(c.x)[i] *= 10.0f; /* relu6 and the hard ones: past both bounds */
            float v = rt_f32(c.x)[i];
            if (fabsf(v) < 0.05f || fabsf(v - 6.0f) < 0.05f || fabsf(fabsf(v) - 3.0f) < 0.05f)
                rt_f32(c.x)[i] = v + 0.3f;
        }
        c.y = like(c.x);
        act_f(&c);
        double ref[100];
        for (int i = 0; i < 100; i++) {
            double v = rt_f32(c.x)[i];
            ref[i] =
                which == 1
                    ? 0.5 * v *
                          (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)))
                : which == 2 ? tanh(v)
                : which == 3 ? 1 / (1 + exp(-v))
                : which == 4 ? fmin(fmax(v, 0), 6)
                : which == 5 ? fmin(fmax(v + 3, 0), 6) / 6
                : which == 6 ? v * fmin(fmax(v + 3, 0), 6) / 6
                : which == 7 ? v / (1 + exp(-v))
                : which == 8 ? 0.5 * v * (1 + erf(v / sqrt(2)))
                             : (v > 0 ? v : 0);
        }
        CHECK_CLOSE(act_name[which], rt_f32(c.y), ref, 100, 1e-6, 1e-5);
        c.dy = like(c.y);
        c.dx = like(c.x);
        gvar v[1] = {{c.x, c.dx, "x"}};
        gradcheck(act_name[which], act_f, act_b, &c, c.y, c.dy, v, 1);
    }
}

/* ---- mul: of one shape, and by a gate per sample and channel ------------------------------- */

typedef struct {
    rt_tensor *x, *s, *y, *dy, *dx, *ds;
} mul_ctx;
static void mul_f(void *p)
{
    mul_ctx *c = p;
    rt_mul_fwd(c->x, c->s, c->y);
}
static void mul_b(void *p)
{
    mul_ctx *c = p;
    rt_mul_bwd(c->x, c->s, c->dy, c->dx, c->ds);
}

static void test_mul(void)
{
    for (int gate = 0; gate < 2; gate++) {
        mul_ctx c;
        c.x = T(4, 2, 3, 4, 5);
        c.s = gate ? T(4, 2, 3, 1, 1) : T(4, 2, 3, 4, 5);
        fill(c.x);
        fill(c.s);
        c.y = like(c.x);
        mul_f(&c);
        double ref[120];
        for (int i = 0; i < 120; i++)
            ref[i] = (double)rt_f32(c.x)[i] * rt_f32(c.s)[gate ? i / 20 : i];
        CHECK_CLOSE(gate ? "mul gate" : "mul", rt_f32(c.y), ref, 120, 1e-7, 1e-6);
        c.dy = like(c.y);
        c.dx = like(c.x);
        c.ds = like(c.s);
        gvar v[2] = {{c.x, c.dx, "x"}, {c.s, c.ds, "s"}};
        gradcheck(gate ? "mul gate" : "mul", mul_f, mul_b, &c, c.y, c.dy, v, 2);
    }
}

/* ---- slice: the channel split of shufflenet_v2 ------------------------------------------- */

typedef struct {
    rt_tensor *x, *y, *dy, *dx;
    int axis, start;
} slice_ctx;
static void slice_f(void *p)
{
    slice_ctx *c = p;
    rt_slice_fwd(c->x, c->axis, c->start, c->y);
}
static void slice_b(void *p)
{
    slice_ctx *c = p;
    rt_slice_bwd(c->dy, c->axis, c->start, c->dx);
}

static void test_slice(void)
{
    for (int axis = 1; axis < 4; axis++) {
        slice_ctx c = {.axis = axis, .start = 1};
        c.x = T(4, 2, 4, 3, 5);
        fill(c.x);
        int64_t ys[4] = {2, 4, 3, 5};
        ys[axis] = 2; /* elements 1 and 2 */
        c.y = rt_tensor_new(P, RT_F32, 4, ys);
        slice_f(&c);
        double ref[120];
        int64_t n = 0;
        for (int64_t a = 0; a < 2; a++)
            for (int64_t b = 0; b < 4; b++)
                for (int64_t h = 0; h < 3; h++)
                    for (int64_t w = 0; w < 5; w++) {
                        int64_t at[4] = {a, b, h, w};
                        if (at[axis] >= 1 && at[axis] < 3)
                            ref[n++] = rt_f32(c.x)[((a * 4 + b) * 3 + h) * 5 + w];
                    }
        CHECK_CLOSE("slice", rt_f32(c.y), ref, n, 1e-30, 0.0);
        c.dy = like(c.y);
        c.dx = like(c.x);
        gvar v[1] = {{c.x, c.dx, "x"}};
        gradcheck("slice", slice_f, slice_b, &c, c.y, c.dy, v, 1);
    }
}

/* ---- tokens: a class token first, positions on every row ---------------------------------- */

typedef struct {
    rt_tensor *x, *tok, *pos, *y, *dy, *dx, *dtok, *dpos;
    int cls;
} tokens_ctx;
static void tokens_f(void *p)
{
    tokens_ctx *c = p;
    rt_tokens_fwd(c->x, c->cls, c->tok, c->pos, c->y);
}
static void tokens_b(void *p)
{
    tokens_ctx *c = p;
    rt_tokens_bwd(c->dy, c->cls, c->dx, c->dtok, c->dpos);
}

static void test_tokens(void)
{
    enum { N = 3, TT = 4, D = 5 };
    for (int form = 0; form < 3; form++) { /* class token and positions, either alone */
        tokens_ctx c = {0};
        c.cls = form != 2;
        const int64_t rows = TT + c.cls;
        c.x = T(3, N, TT, D, 1);
        c.y = T(3, N, rows, D, 1);
        fill(c.x);
        if (c.cls) {
            c.tok = T(1, D, 1, 1, 1);
            fill(c.tok);
        }
        if (form != 1) {
            c.pos = T(2, rows, D, 1, 1);
            fill(c.pos);
        }
        tokens_f(&c);
        double ref[N * (TT + 1) * D];
        for (int64_t n = 0; n < N; n++)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t k = 0; k < D; k++)
                    ref[(n * rows + r) * D + k] =
                        (r < c.cls ? (double)rt_f32(c.tok)[k]
                                   : (double)rt_f32(c.x)[(n * TT + r - c.cls) * D + k]) +
                        (c.pos ? (double)rt_f32(c.pos)[r * D + k] : 0.0);
        const char *name = form == 0 ? "tokens" : form == 1 ? "tokens cls" : "tokens positions";
        CHECK_CLOSE(name, rt_f32(c.y), ref, N * rows * D, 1e-7, 1e-6);
        c.dy = like(c.y);
        c.dx = like(c.x);
        gvar v[3] = {{c.x, c.dx, "x"}};
        int nv = 1;
        if (c.tok) {
            c.dtok = like(c.tok);
            v[nv++] = (gvar){c.tok, c.dtok, "class token"};
        }
        if (c.pos) {
            c.dpos = like(c.pos);
            v[nv++] = (gvar){c.pos, c.dpos, "positions"};
        }
        gradcheck(name, tokens_f, tokens_b, &c, c.y, c.dy, v, nv);
    }
}

/* ---- pooling ----------------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *y, *dy, *dx;
    rt_pool2d_attrs a;
    int which; /* 0 max, 1 avg, 2 global */
} pool_ctx;
static void pool_f(void *p)
{
    pool_ctx *c = p;
    if (c->which == 0)
        rt_maxpool2d_fwd(c->x, &c->a, c->y);
    else if (c->which == 1)
        rt_avgpool2d_fwd(c->x, &c->a, c->y);
    else
        rt_global_avgpool_fwd(c->x, c->y);
}
static void pool_b(void *p)
{
    pool_ctx *c = p;
    if (c->which == 0)
        rt_maxpool2d_bwd(c->x, c->dy, &c->a, c->dx);
    else if (c->which == 1)
        rt_avgpool2d_bwd(c->dy, &c->a, c->dx);
    else
        rt_global_avgpool_bwd(c->dy, c->dx);
}

static void test_pools(rt_pool2d_attrs a)
{
    /* Even sizes for the 2x2/stride-2 windows, which take the runtime's fast path. */
    const bool even =
        a.kh == 2 && a.kw == 2 && a.sh == 2 && a.sw == 2 && a.ph == 0 && a.pw == 0 && !a.ceil_mode;
    const int N = 2, C = 3, H = even ? 8 : 7, W = 6;
    int OH = (H + 2 * a.ph - a.kh + (a.ceil_mode ? a.sh - 1 : 0)) / a.sh + 1;
    int OW = (W + 2 * a.pw - a.kw + (a.ceil_mode ? a.sw - 1 : 0)) / a.sw + 1;
    if (a.ceil_mode && (OH - 1) * a.sh >= H + a.ph)
        OH--;
    if (a.ceil_mode && (OW - 1) * a.sw >= W + a.pw)
        OW--;
    for (int which = 0; which < 3; which++) {
        pool_ctx c = {.a = a, .which = which};
        c.x = T(4, N, C, H, W);
        /* Distinct values 0.05 apart so finite differences never flip an argmax. */
        for (int64_t i = 0; i < c.x->numel; i++)
            rt_f32(c.x)[i] = 0.05f * (float)((i * 37) % c.x->numel) - 3.0f;
        c.y = which == 2 ? T(2, N, C, 0, 0) : T(4, N, C, OH, OW);
        pool_f(&c);
        double *ref = dalloc(c.y->numel);
        for (int p = 0; p < N * C; p++) {
            const float *pl = rt_f32(c.x) + p * H * W;
            if (which == 2) {
                double s = 0;
                for (int i = 0; i < H * W; i++)
                    s += pl[i];
                ref[p] = s / (H * W);
                continue;
            }
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double mx = -INFINITY, s = 0;
                    int real = 0, padded = 0; /* pixels: in the image / in the padded image */
                    for (int i = 0; i < a.kh; i++)
                        for (int j = 0; j < a.kw; j++) {
                            int h = oh * a.sh - a.ph + i, w = ow * a.sw - a.pw + j;
                            padded += h < H + a.ph && w < W + a.pw;
                            if (h < 0 || h >= H || w < 0 || w >= W)
                                continue;
                            real++;
                            mx = pl[h * W + w] > mx ? pl[h * W + w] : mx;
                            s += pl[h * W + w];
                        }
                    ref[(p * OH + oh) * OW + ow] =
                        which == 0 ? mx : s / (a.exclude_pad ? real : padded);
                }
        }
        const char *names[] = {"maxpool2d", "avgpool2d", "global_avgpool"};
        CHECK_CLOSE(names[which], rt_f32(c.y), ref, c.y->numel, 1e-5, 1e-5);
        free(ref);
        c.dy = like(c.y);
        c.dx = like(c.x);
        gvar v[1] = {{c.x, c.dx, "x"}};
        gradcheck(names[which], pool_f, pool_b, &c, c.y, c.dy, v, 1);
    }
}

/* ---- normalisation ----------------------------------------------------------------------- */

/* Test-time batchnorm by hand: one training step over x = {1, 2, 3, 6} (one channel) moves
 * the running statistics from (0, 1) by momentum 0.1 towards the batch's mean 3 and
 * unbiased variance 14/3: (0.3, 1.3666667). Inference then normalises a test batch with
 * those, not with its own statistics: y = (x - 0.3) / sqrt(1.3666667 + 1e-5) * 2 + 0.5. */
static void test_batchnorm_eval(void)
{
    rt_tensor *x = T(4, 4, 1, 1, 1), *y = like(x), *g = T(1, 1, 0, 0, 0), *b = like(g);
    rt_tensor *rm = like(g), *rv = like(g), *saved = T(1, 2, 0, 0, 0);
    const float train[4] = {1, 2, 3, 6}, test[4] = {0.3f, 1.3f, -0.7f, 2.3f};
    rt_f32(g)[0] = 2.0f;
    rt_f32(b)[0] = 0.5f;
    rt_f32(rm)[0] = 0.0f;
    rt_f32(rv)[0] = 1.0f;
    memcpy(rt_f32(x), train, sizeof train);
    rt_batchnorm2d_fwd(x, g, b, rm, rv, 0.1f, 1e-5f, saved, y);
    CHECK(fabs(rt_f32(rm)[0] - 0.3) < 1e-6 && fabs(rt_f32(rv)[0] - 1.3666667) < 1e-6,
          "batchnorm running statistics %.7g %.7g, expected 0.3 1.3666667", rt_f32(rm)[0],
          rt_f32(rv)[0]);
    memcpy(rt_f32(x), test, sizeof test);
    rt_batchnorm2d_infer(x, g, b, rm, rv, 1e-5f, y);
    const double want[4] = {0.5, 2.2107915865544427, -1.210791586554443, 3.921583173108886};
    CHECK_CLOSE("batchnorm2d_infer by hand", rt_f32(y), want, 4, 1e-6, 1e-6);
}

typedef struct {
    rt_tensor *x, *g, *b, *saved, *y, *dy, *dx, *dg, *db;
    int which; /* 0 batchnorm, 1 layernorm */
} norm_ctx;
static void norm_f(void *p)
{
    norm_ctx *c = p;
    if (c->which == 0)
        rt_batchnorm2d_fwd(c->x, c->g, c->b, NULL, NULL, 0.1f, 1e-5f, c->saved, c->y);
    else
        rt_layernorm_fwd(c->x, c->g, c->b, 1e-5f, c->saved, c->y);
}
static void norm_b(void *p)
{
    norm_ctx *c = p;
    if (c->which == 0)
        rt_batchnorm2d_bwd(c->x, c->g, c->saved, c->dy, c->dx, c->dg, c->db);
    else
        rt_layernorm_bwd(c->x, c->g, c->saved, c->dy, c->dx, c->dg, c->db);
}

static void test_norms(void)
{
    /* batchnorm: x[3,2,2,3] */
    norm_ctx c = {.which = 0};
    c.x = T(4, 3, 2, 2, 3);
    c.g = T(1, 2, 0, 0, 0);
    c.b = T(1, 2, 0, 0, 0);
    c.saved = T(1, 4, 0, 0, 0);
    c.y = like(c.x);
    fill(c.x);
    fill(c.g);
    fill(c.b);
    rt_tensor *rm = T(1, 2, 0, 0, 0), *rv = T(1, 2, 0, 0, 0);
    rt_init_const(rv, 1.0f);
    rt_batchnorm2d_fwd(c.x, c.g, c.b, rm, rv, 0.1f, 1e-5f, c.saved, c.y);
    double ref[36], rm_ref[2], rv_ref[2];
    for (int ch = 0; ch < 2; ch++) {
        double s = 0, ss = 0;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 6; i++)
                s += rt_f32(c.x)[(n * 2 + ch) * 6 + i];
        double mu = s / 18;
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 6; i++)
                ss += pow(rt_f32(c.x)[(n * 2 + ch) * 6 + i] - mu, 2);
        for (int n = 0; n < 3; n++)
            for (int i = 0; i < 6; i++)
                ref[(n * 2 + ch) * 6 + i] = (rt_f32(c.x)[(n * 2 + ch) * 6 + i] - mu) /
                                                sqrt(ss / 18 + 1e-5) * rt_f32(c.g)[ch] +
                                            rt_f32(c.b)[ch];
        rm_ref[ch] = 0.1 * mu;
        rv_ref[ch] = 0.9 + 0.1 * ss / 17;
    }
    CHECK_CLOSE("batchnorm2d_fwd", rt_f32(c.y), ref, 36, 1e-5, 1e-4);
    CHECK_CLOSE("batchnorm2d running mean", rt_f32(rm), rm_ref, 2, 1e-6, 1e-5);
    CHECK_CLOSE("batchnorm2d running var", rt_f32(rv), rv_ref, 2, 1e-6, 1e-5);
    rt_tensor *yi = like(c.x);
    rt_batchnorm2d_infer(c.x, c.g, c.b, rm, rv, 1e-5f, yi);
    for (int n = 0; n < 3; n++)
        for (int ch = 0; ch < 2; ch++)
            for (int i = 0; i < 6; i++)
                ref[(n * 2 + ch) * 6 + i] = (rt_f32(c.x)[(n * 2 + ch) * 6 + i] - rm_ref[ch]) /
                                                sqrt(rv_ref[ch] + 1e-5) * rt_f32(c.g)[ch] +
                                            rt_f32(c.b)[ch];
    CHECK_CLOSE("batchnorm2d_infer", rt_f32(yi), ref, 36, 1e-5, 1e-4);
    c.dy = like(c.y);
    c.dx = like(c.x);
    c.dg = like(c.g);
    c.db = like(c.b);
    gvar v[3] = {{c.x, c.dx, "x"}, {c.g, c.dg, "gamma"}, {c.b, c.db, "beta"}};
    gradcheck("batchnorm2d", norm_f, norm_b, &c, c.y, c.dy, v, 3);

    /* layernorm: x[2,3,5] */
    norm_ctx l = {.which = 1};
    l.x = T(3, 2, 3, 5, 0);
    l.g = T(1, 5, 0, 0, 0);
    l.b = T(1, 5, 0, 0, 0);
    l.saved = T(1, 12, 0, 0, 0);
    l.y = like(l.x);
    fill(l.x);
    fill(l.g);
    fill(l.b);
    norm_f(&l);
    double lref[30];
    for (int m = 0; m < 6; m++) {
        double s = 0, ss = 0;
        for (int i = 0; i < 5; i++)
            s += rt_f32(l.x)[m * 5 + i];
        double mu = s / 5;
        for (int i = 0; i < 5; i++)
            ss += pow(rt_f32(l.x)[m * 5 + i] - mu, 2);
        for (int i = 0; i < 5; i++)
            lref[m * 5 + i] = (rt_f32(l.x)[m * 5 + i] - mu) / sqrt(ss / 5 + 1e-5) * rt_f32(l.g)[i] +
                              rt_f32(l.b)[i];
    }
    CHECK_CLOSE("layernorm_fwd", rt_f32(l.y), lref, 30, 1e-5, 1e-4);
    l.dy = like(l.y);
    l.dx = like(l.x);
    l.dg = like(l.g);
    l.db = like(l.b);
    gvar lv[3] = {{l.x, l.dx, "x"}, {l.g, l.dg, "gamma"}, {l.b, l.db, "beta"}};
    gradcheck("layernorm", norm_f, norm_b, &l, l.y, l.dy, lv, 3);
}

/* ---- dropout: the mask depends on the global sample, not on the shard ------------------- */

static void test_dropout(void)
{
    const float p = 0.3f;
    rt_tensor *x = T(2, 8, 500, 0, 0), *y = like(x);
    fill(x);
    rt_dropout_fwd(x, p, 7, 3, 5, 100, y);
    int64_t zeros = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        float v = rt_f32(y)[i];
        if (v == 0.0f)
            zeros++;
        else
            CHECK(fabsf(v - rt_f32(x)[i] / (1 - p)) < 1e-6f, "dropout scales kept values");
    }
    double frac = (double)zeros / (double)x->numel;
    CHECK(fabs(frac - p) < 0.03, "dropout drops %.3f of the elements, expected %.3f", frac, p);
    /* The same global samples split as [3) + [5): bitwise the same output. */
    rt_tensor *xa = rt_tensor_slice(P, x, 0, 3), *ya = T(2, 3, 500, 0, 0);
    rt_tensor *xb = rt_tensor_slice(P, x, 3, 8), *yb = T(2, 5, 500, 0, 0);
    rt_dropout_fwd(xa, p, 7, 3, 5, 100, ya);
    rt_dropout_fwd(xb, p, 7, 3, 5, 103, yb);
    CHECK(memcmp(ya->data, y->data, 1500 * 4) == 0 &&
              memcmp(yb->data, rt_f32(y) + 1500, 2500 * 4) == 0,
          "dropout mask changes when the batch is sharded");
    /* Another step or layer gives another mask; backward applies the same mask. */
    rt_tensor *y2 = like(x), *dx = like(x);
    rt_dropout_fwd(x, p, 7, 4, 5, 100, y2);
    CHECK(memcmp(y2->data, y->data, (size_t)x->numel * 4) != 0, "dropout mask ignores the step");
    rt_dropout_bwd(x, p, 7, 3, 5, 100, dx);
    CHECK(memcmp(dx->data, y->data, (size_t)x->numel * 4) == 0,
          "dropout backward uses another mask than forward");
}

/* ---- add, concat, transpose, softmax ----------------------------------------------------- */

typedef struct {
    rt_tensor *x, *y, *dy, *dx;
    int axis;
} sm_ctx;
static void sm_f(void *p)
{
    sm_ctx *c = p;
    rt_softmax_fwd(c->x, c->axis, c->y);
}
static void sm_b(void *p)
{
    sm_ctx *c = p;
    rt_softmax_bwd(c->y, c->dy, c->axis, c->dx);
}

static void test_shape_ops(void)
{
    rt_tensor *a = T(2, 3, 4, 0, 0), *b = like(a), *s = like(a);
    fill(a);
    fill(b);
    rt_add_fwd(a, b, s);
    double ref[240];
    for (int i = 0; i < 12; i++)
        ref[i] = (double)rt_f32(a)[i] + rt_f32(b)[i];
    CHECK_CLOSE("add_fwd", rt_f32(s), ref, 12, 1e-7, 1e-7);
    rt_accumulate(s, a);
    for (int i = 0; i < 12; i++)
        ref[i] += rt_f32(a)[i];
    CHECK_CLOSE("accumulate", rt_f32(s), ref, 12, 1e-6, 1e-6);

    /* concat along axis 1 of [2,1,3], [2,2,3], [2,3,3] -> [2,6,3] */
    rt_tensor *p0 = T(3, 2, 1, 3, 0), *p1 = T(3, 2, 2, 3, 0), *p2 = T(3, 2, 3, 3, 0);
    rt_tensor *cat = T(3, 2, 6, 3, 0);
    fill(p0);
    fill(p1);
    fill(p2);
    const rt_tensor *parts[3] = {p0, p1, p2};
    rt_concat_fwd(3, parts, 1, cat);
    for (int n = 0; n < 2; n++)
        for (int r = 0; r < 6; r++)
            for (int k = 0; k < 3; k++) {
                const rt_tensor *src = r < 1 ? p0 : r < 3 ? p1 : p2;
                int rr = r < 1 ? r : r < 3 ? r - 1 : r - 3;
                ref[(n * 6 + r) * 3 + k] = rt_f32(src)[(n * src->shape[1] + rr) * 3 + k];
            }
    CHECK_CLOSE("concat_fwd", rt_f32(cat), ref, 36, 0, 1e-7);
    rt_tensor *d0 = like(p0), *d1 = like(p1), *d2 = like(p2);
    rt_tensor *const grads[3] = {d0, d1, d2};
    rt_concat_bwd(cat, 1, 3, grads);
    CHECK(!memcmp(d0->data, p0->data, 24) && !memcmp(d1->data, p1->data, 48) &&
              !memcmp(d2->data, p2->data, 72),
          "concat_bwd does not split the gradient back");

    /* transpose of axes 1 and 3 of [2,3,4,5] */
    rt_tensor *x = T(4, 2, 3, 4, 5), *y = T(4, 2, 5, 4, 3), *back = like(x);
    fill(x);
    rt_transpose(x, 1, 3, y);
    int bad = 0;
    for (int n = 0; n < 2; n++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++)
                    bad += rt_f32(y)[((n * 5 + k) * 4 + j) * 3 + i] !=
                           rt_f32(x)[((n * 3 + i) * 4 + j) * 5 + k];
    CHECK(bad == 0, "transpose misplaces %d elements", bad);
    rt_transpose(y, 3, 1, back);
    CHECK(!memcmp(back->data, x->data, (size_t)x->numel * 4), "transpose twice is not identity");

    /* softmax along the middle axis of [2,4,3] */
    sm_ctx c = {.axis = 1};
    c.x = T(3, 2, 4, 3, 0);
    fill(c.x);
    rt_f32(c.x)[0] = 80.0f; /* stability: exp(80) overflows nothing after the shift */
    c.y = like(c.x);
    sm_f(&c);
    for (int n = 0; n < 2; n++)
        for (int k = 0; k < 3; k++) {
            double mx = -1e30, z = 0;
            for (int i = 0; i < 4; i++)
                mx = fmax(mx, rt_f32(c.x)[(n * 4 + i) * 3 + k]);
            for (int i = 0; i < 4; i++)
                z += exp(rt_f32(c.x)[(n * 4 + i) * 3 + k] - mx);
            for (int i = 0; i < 4; i++)
                ref[(n * 4 + i) * 3 + k] = exp(rt_f32(c.x)[(n * 4 + i) * 3 + k] - mx) / z;
        }
    CHECK_CLOSE("softmax_fwd", rt_f32(c.y), ref, 24, 1e-7, 1e-5);
    rt_f32(c.x)[0] = 0.5f;
    c.dy = like(c.y);
    c.dx = like(c.x);
    gvar v[1] = {{c.x, c.dx, "x"}};
    gradcheck("softmax", sm_f, sm_b, &c, c.y, c.dy, v, 1);
}

/* ---- embedding ---------------------------------------------------------------------------- */

typedef struct {
    rt_tensor *tok, *w, *pos, *y, *dy, *dw, *dpos;
} emb_ctx;
static void emb_f(void *p)
{
    emb_ctx *c = p;
    rt_embedding_fwd(c->tok, c->w, c->pos, c->y);
}
static void emb_b(void *p)
{
    emb_ctx *c = p;
    rt_embedding_bwd(c->tok, c->dy, c->dw, c->dpos);
}

static void test_embedding(void)
{
    emb_ctx c;
    int64_t ts[2] = {2, 3};
    c.tok = rt_tensor_new(P, RT_I32, 2, ts);
    int32_t toks[6] = {4, 0, 4, 2, 1, 3};
    memcpy(c.tok->data, toks, sizeof toks);
    c.w = T(2, 5, 4, 0, 0);
    c.pos = T(2, 6, 4, 0, 0);
    c.y = T(3, 2, 3, 4, 0);
    fill(c.w);
    fill(c.pos);
    emb_f(&c);
    double ref[24];
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 4; k++)
            ref[i * 4 + k] = (double)rt_f32(c.w)[toks[i] * 4 + k] + rt_f32(c.pos)[(i % 3) * 4 + k];
    CHECK_CLOSE("embedding_fwd", rt_f32(c.y), ref, 24, 1e-7, 1e-6);
    c.dy = like(c.y);
    c.dw = like(c.w);
    c.dpos = like(c.pos);
    gvar v[2] = {{c.w, c.dw, "table"}, {c.pos, c.dpos, "positions"}};
    gradcheck("embedding", emb_f, emb_b, &c, c.y, c.dy, v, 2);
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *wqkv, *bqkv, *wo, *bo, *saved, *y, *dy, *dx, *dwqkv, *dbqkv, *dwo, *dbo;
    int heads;
    bool causal;
} attn_ctx;
static void attn_f(void *p)
{
    attn_ctx *c = p;
    if (c->causal)
        rt_attention_fwd(P, c->x, c->wqkv, c->bqkv, c->wo, c->bo, c->heads, c->saved, c->y);
    else
        rt_attention_ex_fwd(P, c->x, c->wqkv, c->bqkv, c->wo, c->bo, c->heads, false, c->saved,
                            c->y);
}
static void attn_b(void *p)
{
    attn_ctx *c = p;
    rt_attention_bwd(P, c->x, c->wqkv, c->wo, c->heads, c->saved, c->dy, c->dx, c->dwqkv, c->dbqkv,
                     c->dwo, c->dbo);
}

static void test_attention(bool causal)
{
    const int N = 2, Tn = 4, D = 6, H = 2, hd = 3;
    attn_ctx c = {.heads = H, .causal = causal};
    c.x = T(3, N, Tn, D, 0);
    c.wqkv = T(2, 3 * D, D, 0, 0);
    c.bqkv = T(1, 3 * D, 0, 0, 0);
    c.wo = T(2, D, D, 0, 0);
    c.bo = T(1, D, 0, 0, 0);
    c.saved = T(1, rt_attention_saved_size(N, Tn, D, H), 0, 0, 0);
    c.y = like(c.x);
    fill(c.x);
    fill(c.wqkv);
    fill(c.bqkv);
    fill(c.wo);
    fill(c.bo);
    attn_f(&c);
    double qkv[2 * 4 * 18], merged[48], ref[48];
    for (int m = 0; m < N * Tn; m++)
        for (int o = 0; o < 3 * D; o++) {
            double s = rt_f32(c.bqkv)[o];
            for (int i = 0; i < D; i++)
                s += (double)rt_f32(c.x)[m * D + i] * rt_f32(c.wqkv)[o * D + i];
            qkv[m * 3 * D + o] = s;
        }
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tn; i++) {
                double sc[4], mx = -1e30, z = 0;
                const int last = causal ? i : Tn - 1;
                for (int j = 0; j <= last; j++) {
                    double s = 0;
                    for (int k = 0; k < hd; k++)
                        s += qkv[(n * Tn + i) * 18 + h * hd + k] *
                             qkv[(n * Tn + j) * 18 + D + h * hd + k];
                    sc[j] = s / sqrt(hd);
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j <= last; j++)
                    z += (sc[j] = exp(sc[j] - mx));
                for (int k = 0; k < hd; k++) {
                    double o = 0;
                    for (int j = 0; j <= last; j++)
                        o += sc[j] / z * qkv[(n * Tn + j) * 18 + 2 * D + h * hd + k];
                    merged[(n * Tn + i) * D + h * hd + k] = o;
                }
            }
    for (int m = 0; m < N * Tn; m++)
        for (int o = 0; o < D; o++) {
            double s = rt_f32(c.bo)[o];
            for (int i = 0; i < D; i++)
                s += merged[m * D + i] * rt_f32(c.wo)[o * D + i];
            ref[m * D + o] = s;
        }
    CHECK_CLOSE(causal ? "attention_fwd" : "attention_fwd (not causal)", rt_f32(c.y), ref, 48, 1e-5,
                1e-4);
    c.dy = like(c.y);
    c.dx = like(c.x);
    c.dwqkv = like(c.wqkv);
    c.dbqkv = like(c.bqkv);
    c.dwo = like(c.wo);
    c.dbo = like(c.bo);
    gvar v[5] = {{c.x, c.dx, "x"},
                 {c.wqkv, c.dwqkv, "w_qkv"},
                 {c.bqkv, c.dbqkv, "b_qkv"},
                 {c.wo, c.dwo, "w_o"},
                 {c.bo, c.dbo, "b_o"}};
    gradcheck(causal ? "attention" : "attention (not causal)", attn_f, attn_b, &c, c.y, c.dy, v, 5);
}

/* ---- cross entropy -------------------------------------------------------------------------- */

static void test_cross_entropy(void)
{
    const int M = 6, C = 5;
    rt_tensor *z = T(2, M, C, 0, 0), *dz = like(z);
    int64_t ls[1] = {M};
    rt_tensor *lab = rt_tensor_new(P, RT_I32, 1, ls);
    fill(z);
    for (int m = 0; m < M; m++)
        rt_i32(lab)[m] = (m * 3) % C;
    double ref = 0;
    for (int m = 0; m < M; m++) {
        double s = 0;
        for (int c = 0; c < C; c++)
            s += exp(rt_f32(z)[m * C + c]);
        ref += log(s) - rt_f32(z)[m * C + rt_i32(lab)[m]];
    }
    ref /= M;
    double loss = rt_cross_entropy_fwd(z, lab, M);
    CHECK(fabs(loss - ref) < 1e-6, "cross_entropy %.8f, reference %.8f", loss, ref);
    /* Two shards of the same global batch: partial losses sum to the full loss. */
    double parts =
        rt_cross_entropy_fwd(rt_tensor_slice(P, z, 0, 2), rt_tensor_slice(P, lab, 0, 2), M) +
        rt_cross_entropy_fwd(rt_tensor_slice(P, z, 2, 6), rt_tensor_slice(P, lab, 2, 6), M);
    CHECK(fabs(parts - ref) < 1e-6, "shard losses sum to %.8f, full batch %.8f", parts, ref);
    /* dlogits against finite differences of the loss. */
    rt_cross_entropy_bwd(z, lab, M, dz);
    double worst = 0;
    for (int i = 0; i < M * C; i++) {
        float save = rt_f32(z)[i];
        rt_f32(z)[i] = save + 1e-2f;
        double lp = rt_cross_entropy_fwd(z, lab, M);
        rt_f32(z)[i] = save - 1e-2f;
        double lm = rt_cross_entropy_fwd(z, lab, M);
        rt_f32(z)[i] = save;
        double fd = (lp - lm) / 2e-2;
        worst = fmax(worst, fabs(fd - rt_f32(dz)[i]) / (1e-4 + 1e-2 * fabs(fd)));
    }
    CHECK(worst <= 1.0, "cross_entropy gradient differs from finite differences (%.3g)", worst);
    /* Over tokens: logits [2,3,5] with labels [2,3] are the same 6 rows. */
    rt_tensor *z3 = rt_tensor_view(P, z, 3, (int64_t[]){2, 3, C});
    rt_tensor *l3 = rt_tensor_view(P, lab, 2, (int64_t[]){2, 3});
    CHECK(fabs(rt_cross_entropy_fwd(z3, l3, M) - ref) < 1e-6, "cross entropy over tokens");
    CHECK(rt_correct_count(z, lab) >= 0 && rt_correct_count(z, lab) <= M, "correct_count range");
}

int main(void)
{
    P = rt_pool_new();
    test_conv(2, 3, 7, 6, 4, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    test_conv(2, 4, 8, 7, 6, (rt_conv2d_attrs){3, 2, 2, 1, 1, 0, 2, 1, 2}, true);
    test_conv(1, 3, 5, 5, 4, (rt_conv2d_attrs){1, 1, 1, 1, 0, 0, 1, 1, 1}, false);
    test_conv(2, 2, 9, 9, 3, (rt_conv2d_attrs){5, 5, 3, 2, 2, 1, 1, 1, 1}, false);
    /* Chunking of samples per GEMM: batched 1x1, one sample per GEMM (with and without
     * im2col), and a last chunk smaller than the others. */
    test_conv(2, 3, 5, 5, 4, (rt_conv2d_attrs){1, 1, 1, 1, 0, 0, 1, 1, 1}, true);
    test_conv(3, 2, 34, 33, 3, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    test_conv(2, 2, 32, 32, 3, (rt_conv2d_attrs){1, 1, 1, 1, 0, 0, 1, 1, 1}, true);
    test_conv(3, 2, 20, 20, 2, (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1}, true);
    test_linear(true);
    test_linear(false);
    test_matmul();
    test_activations();
    test_mul();
    test_tokens();
    test_slice();
    test_pools((rt_pool2d_attrs){3, 2, 2, 2, 1, 1, 0, 0});
    test_pools((rt_pool2d_attrs){2, 2, 2, 2, 0, 0, 0, 0}); /* unpadded: the fast max path */
    test_pools((rt_pool2d_attrs){3, 3, 2, 1, 0, 0, 0, 0});
    test_pools((rt_pool2d_attrs){3, 3, 2, 2, 1, 1, .ceil_mode = 1, .exclude_pad = 0});
    test_pools((rt_pool2d_attrs){2, 2, 2, 2, 0, 0, .ceil_mode = 1,
                                 .exclude_pad = 0}); /* 7 -> 4: an edge window */
    test_pools((rt_pool2d_attrs){3, 2, 2, 2, 1, 1, .ceil_mode = 0, .exclude_pad = 1});
    test_pools((rt_pool2d_attrs){3, 3, 2, 2, 1, 0, .ceil_mode = 1, .exclude_pad = 1});
    test_norms();
    test_batchnorm_eval();
    test_dropout();
    test_shape_ops();
    test_embedding();
    test_attention(true);
    test_attention(false);
    test_cross_entropy();
    rt_pool_free(P);
    if (check_failures) {
        fprintf(stderr, "test_kernels: %d checks failed\n", check_failures);
        return 1;
    }
    printf("test_kernels: all checks passed\n");
    return 0;
}
