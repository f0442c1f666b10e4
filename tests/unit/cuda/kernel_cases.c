/* kernel_cases.c: every kernel of libburstrt, run on small deterministic inputs through
 * the public API, so that the CUDA backend is checked against the CPU backend's results.
 * The same file builds twice:
 *   gen_kernel_ref (-DKC_CPU, linked with the CPU backend burstrt) writes every output
 *     to a reference file;
 *   test_cuda_kernels (linked with burstrt_cuda) runs the same cases on the GPU and
 *     compares each output with the reference (relative to the output's magnitude:
 *     1e-4 in f32; GEMM-based outputs 3e-2 when BURSTRT_COMPUTE_DTYPE is bf16/f16, and
 *     every output 3e-2 when BURSTRT_STORAGE=16 also stores activations in 16 bits).
 * The GPU machine has no BLAS or MPI to build the CPU backend, so the reference is
 * made here and carried there (scripts/gpu-check). Without a visible GPU the test
 * prints "no GPU visible: skipped" and exits 77, which ctest reports as skipped. */
#include "burstrt.h"
#include "internal.h" /* the loss scaler's options */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KC_CPU
static void put(rt_tensor *t, const void *h)
{
    memcpy(t->data, h, (size_t)t->numel * 4);
}
static void get(const rt_tensor *t, void *h)
{
    memcpy(h, t->data, (size_t)t->numel * 4);
}
#else
/* Proposed burstrt.h additions, implemented by burstrt_cuda (runtime/cuda/device.c). */
void rt_tensor_write(rt_tensor *t, const void *host);
void rt_tensor_read(const rt_tensor *t, void *host);
int rt_cuda_visible_devices(void);
static void put(rt_tensor *t, const void *h)
{
    rt_tensor_write(t, h);
}
static void get(const rt_tensor *t, void *h)
{
    rt_tensor_read(t, h);
}
#endif

#ifdef KC_CPU
#define KC_MODE "wb"
#else
#define KC_MODE "rb"
#endif

static FILE *ref;
static rt_pool *P;
static int failures, checked;
static double gemm_tol = 1e-4;

/* Activations and their gradients: f32, or 16 bits with BURSTRT_STORAGE=16 (the CPU
 * reference is f32 either way); parameters, their gradients and statistics stay f32. */
#define ACT rt_storage_dtype()

#define SHAPE(...) (int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8)

static rt_tensor *zeros(rt_dtype dt, const int64_t *shape, int ndim)
{
    return rt_tensor_new(P, dt, ndim, shape);
}

/* Uniform values in [lo, hi) keyed by `key` (i32 tensors: integers in [lo, hi)). */
static rt_tensor *rnd(rt_dtype dt, const int64_t *shape, int ndim, int key, float lo, float hi)
{
    rt_tensor *t = zeros(dt, shape, ndim);
    void *h = malloc((size_t)t->numel * 4 + 4);
    for (int64_t i = 0; i < t->numel; i++) {
        float u = rt_rand_uniform(7, (uint64_t)key, (uint64_t)i, 0, 0);
        if (dt != RT_I32) /* floats, stored as dt by put */
            ((float *)h)[i] = lo + (hi - lo) * u;
        else
            ((int32_t *)h)[i] = (int32_t)lo + (int32_t)(u * (hi - lo));
    }
    put(t, h);
    free(h);
    return t;
}

/* Writes (CPU) or compares (CUDA) n floats under `name`: with each = 0, relative to the
 * output's largest magnitude (at least 1); with each > 0, every value within `each` of
 * its own reference value, however small (what the max rule cannot see). */
static void check_floats(const char *name, const float *v, int64_t n, bool gemm, double each)
{
    char nm[64] = {0};
    snprintf(nm, sizeof nm, "%s", name);
#ifdef KC_CPU
    (void)gemm;
    (void)each;
    fwrite(nm, 1, sizeof nm, ref);
    fwrite(&n, sizeof n, 1, ref);
    fwrite(v, 4, (size_t)n, ref);
#else
    char rn[64];
    int64_t rnum;
    if (fread(rn, 1, sizeof rn, ref) != sizeof rn || fread(&rnum, sizeof rnum, 1, ref) != 1 ||
        strcmp(rn, nm) != 0 || rnum != n) {
        fprintf(stderr, "reference file out of step at '%s' (found '%.64s'): regenerate it\n", nm,
                rn);
        exit(1);
    }
    float *r = malloc((size_t)n * 4 + 4);
    if (fread(r, 4, (size_t)n, ref) != (size_t)n) {
        fprintf(stderr, "reference file truncated at '%s'\n", nm);
        exit(1);
    }
    double scale = 1.0, err = 0.0;
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(r[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)v[i] - r[i]) / (each > 0 ? fabs((double)r[i]) + 1e-30 : 1.0);
        if (!(e <= err)) { /* NaN counts as the worst error */
            err = isnan(e) ? INFINITY : e;
            worst = i;
        }
    }
    if (each > 0)
        scale = 1.0;
    /* 16-bit storage rounds every activation: the GEMM tolerance for all of them. */
    double tol = each > 0 ? each : gemm || rt_storage_dtype() != RT_F32 ? gemm_tol : 1e-4;
    bool ok = err / scale <= tol;
    printf("%-4s %-28s %8lld values  max error %.2e (relative %.2e, tolerance %.0e)\n",
           ok ? "ok" : "FAIL", nm, (long long)n, err, err / scale, tol);
    if (!ok) {
        printf("     worst at %lld: gpu %.9g cpu %.9g\n", (long long)worst, (double)v[worst],
               (double)r[worst]);
        failures++;
    }
    free(r);
#endif
    checked++;
}

static void check(const char *name, const rt_tensor *t, bool gemm)
{
    float *h = malloc((size_t)t->numel * 4 + 4);
    get(t, h);
    if (t->dtype == RT_I32)
        for (int64_t i = 0; i < t->numel; i++)
            h[i] = (float)((int32_t *)h)[i];
    check_floats(name, h, t->numel, gemm, 0);
    free(h);
}

/* check_floats' `each` rule on a tensor. */
static void check_each(const char *name, const rt_tensor *t, double each)
{
    float *h = malloc((size_t)t->numel * 4 + 4);
    get(t, h);
    check_floats(name, h, t->numel, false, each);
    free(h);
}

static void check_scalar(const char *name, double v, bool gemm)
{
    float f = (float)v;
    check_floats(name, &f, 1, gemm, 0);
}

/* ---- the cases ------------------------------------------------------------------------ */

static void conv_case(const char *name, int key, const int64_t *xs, const int64_t *ws, bool bias,
                      rt_conv2d_attrs a)
{
    rt_tensor *x = rnd(ACT, xs, 4, key, -1, 1), *w = rnd(RT_F32, ws, 4, key + 1, -0.5f, 0.5f);
    rt_tensor *b = bias ? rnd(RT_F32, SHAPE(ws[0]), key + 2, -0.5f, 0.5f) : NULL;
    int64_t OH = (xs[2] + 2 * a.ph - a.dh * (a.kh - 1) - 1) / a.sh + 1;
    int64_t OW = (xs[3] + 2 * a.pw - a.dw * (a.kw - 1) - 1) / a.sw + 1;
    rt_tensor *y = zeros(ACT, SHAPE(xs[0], ws[0], OH, OW));
    rt_conv2d_fwd(P, x, w, b, &a, y);
    char n[64];
    snprintf(n, sizeof n, "%s.y", name);
    check(n, y, true);
    rt_tensor *dy = rnd(ACT, y->shape, 4, key + 3, -1, 1);
    /* The parameter gradients are added to (from non-zero values), the input's written. */
    rt_tensor *dx = zeros(ACT, xs, 4), *dw = rnd(RT_F32, ws, 4, key + 4, -1, 1);
    rt_tensor *db = bias ? rnd(RT_F32, SHAPE(ws[0]), key + 5, -1, 1) : NULL;
    rt_conv2d_bwd(P, x, w, dy, &a, dx, dw, db);
    snprintf(n, sizeof n, "%s.dx", name);
    check(n, dx, true);
    snprintf(n, sizeof n, "%s.dw", name);
    check(n, dw, true);
    if (db) {
        snprintf(n, sizeof n, "%s.db", name);
        check(n, db, false);
    }
}

static void dense_cases(void)
{
    rt_tensor *x = rnd(ACT, SHAPE(2, 3, 16), 20, -1, 1), *w = rnd(RT_F32, SHAPE(10, 16), 21, -1, 1);
    rt_tensor *b = rnd(RT_F32, SHAPE(10), 22, -1, 1), *y = zeros(ACT, SHAPE(2, 3, 10));
    rt_linear_fwd(x, w, b, y);
    check("linear.y", y, true);
    rt_tensor *dy = rnd(ACT, SHAPE(2, 3, 10), 23, -1, 1);
    rt_tensor *dx = zeros(ACT, SHAPE(2, 3, 16)), *dw = rnd(RT_F32, SHAPE(10, 16), 90, -1, 1);
    rt_tensor *db = rnd(RT_F32, SHAPE(10), 91, -1, 1);
    rt_linear_bwd(x, w, dy, dx, dw, db);
    check("linear.dx", dx, true);
    check("linear.dw", dw, true);
    check("linear.db", db, false);

    rt_tensor *a = rnd(ACT, SHAPE(2, 5, 7), 24, -1, 1), *m = rnd(ACT, SHAPE(2, 7, 3), 25, -1, 1);
    rt_tensor *c = zeros(ACT, SHAPE(2, 5, 3));
    rt_matmul_fwd(a, m, c);
    check("matmul.c", c, true);
    rt_tensor *dc = rnd(ACT, SHAPE(2, 5, 3), 26, -1, 1);
    rt_tensor *da = zeros(ACT, SHAPE(2, 5, 7)), *dm = zeros(ACT, SHAPE(2, 7, 3));
    rt_matmul_bwd(a, m, dc, da, dm);
    check("matmul.da", da, true);
    check("matmul.db", dm, true);

    const int64_t N = 2, T = 6, D = 8;
    const int H = 2;
    rt_tensor *ax = rnd(ACT, SHAPE(N, T, D), 27, -1, 1);
    rt_tensor *wq = rnd(RT_F32, SHAPE(3 * D, D), 28, -0.5f, 0.5f),
              *bq = rnd(RT_F32, SHAPE(3 * D), 29, -0.1f, 0.1f);
    rt_tensor *wo = rnd(RT_F32, SHAPE(D, D), 30, -0.5f, 0.5f),
              *bo = rnd(RT_F32, SHAPE(D), 31, -0.1f, 0.1f);
    rt_tensor *saved = zeros(RT_F32, SHAPE(rt_attention_saved_size(N, T, D, H)));
    rt_tensor *ay = zeros(ACT, SHAPE(N, T, D));
    rt_attention_fwd(P, ax, wq, bq, wo, bo, H, saved, ay);
    check("attention.y", ay, true);
    rt_tensor *ady = rnd(ACT, SHAPE(N, T, D), 32, -1, 1);
    rt_tensor *adx = zeros(ACT, SHAPE(N, T, D)), *dwq = zeros(RT_F32, SHAPE(3 * D, D));
    rt_tensor *dbq = zeros(RT_F32, SHAPE(3 * D)), *dwo = zeros(RT_F32, SHAPE(D, D));
    rt_tensor *dbo = zeros(RT_F32, SHAPE(D));
    rt_attention_bwd(P, ax, wq, wo, H, saved, ady, adx, dwq, dbq, dwo, dbo);
    check("attention.dx", adx, true);
    check("attention.dw_qkv", dwq, true);
    check("attention.db_qkv", dbq, true);
    check("attention.dw_o", dwo, true);
    check("attention.db_o", dbo, true);
    rt_attention_ex_fwd(P, ax, wq, bq, wo, bo, H, false, saved, ay);
    check("attention_full.y", ay, true);
    rt_tensor_zero(dwq);
    rt_attention_bwd(P, ax, wq, wo, H, saved, ady, adx, dwq, NULL, NULL, NULL);
    check("attention_full.dx", adx, true);
    check("attention_full.dw_qkv", dwq, true);
}

static void elementwise_cases(void)
{
    rt_tensor *x = rnd(ACT, SHAPE(4, 33), 40, -3, 3), *dy = rnd(ACT, SHAPE(4, 33), 41, -1, 1);
    rt_tensor *y = zeros(ACT, SHAPE(4, 33)), *dx = zeros(ACT, SHAPE(4, 33));
    rt_relu_fwd(x, y);
    check("relu.y", y, false);
    rt_relu_bwd(x, dy, dx);
    check("relu.dx", dx, false);
    rt_tensor *gate = rnd(ACT, SHAPE(4, 3, 1, 1), 43, -2, 2),
              *dgate = zeros(ACT, SHAPE(4, 3, 1, 1));
    rt_tensor *x4 = rnd(ACT, SHAPE(4, 3, 3, 5), 44, -3, 3),
              *dy4 = rnd(ACT, SHAPE(4, 3, 3, 5), 45, -1, 1);
    rt_tensor *y4 = zeros(ACT, SHAPE(4, 3, 3, 5)), *dx4 = zeros(ACT, SHAPE(4, 3, 3, 5));
    rt_mul_fwd(x4, gate, y4);
    check("mul_gate.y", y4, false);
    rt_mul_bwd(x4, gate, dy4, dx4, dgate);
    check("mul_gate.dx", dx4, false);
    check("mul_gate.ds", dgate, false);
    rt_tensor *half = zeros(ACT, SHAPE(4, 1, 3, 5));
    rt_slice_fwd(x4, 1, 2, half);
    check("slice.y", half, false);
    rt_slice_bwd(half, 1, 2, dx4);
    check("slice.dx", dx4, false);
    rt_tensor *x8 = rnd(ACT, SHAPE(4, 33), 42, -8, 8); /* past both of relu6's bounds */
    rt_hardsigmoid_fwd(x8, y);
    check("hardsigmoid.y", y, false);
    rt_hardsigmoid_bwd(x8, dy, dx);
    check("hardsigmoid.dx", dx, false);
    rt_hardswish_fwd(x8, y);
    check("hardswish.y", y, false);
    rt_hardswish_bwd(x8, dy, dx);
    check("hardswish.dx", dx, false);
    rt_gelu_erf_fwd(x8, y);
    check("gelu_erf.y", y, false);
    rt_gelu_erf_bwd(x8, dy, dx);
    check("gelu_erf.dx", dx, false);
    rt_silu_fwd(x8, y);
    check("silu.y", y, false);
    rt_silu_bwd(x8, dy, dx);
    check("silu.dx", dx, false);
    rt_relu6_fwd(x8, y);
    check("relu6.y", y, false);
    rt_relu6_bwd(x8, dy, dx);
    check("relu6.dx", dx, false);
    rt_gelu_fwd(x, y);
    check("gelu.y", y, false);
    rt_gelu_bwd(x, dy, dx);
    check("gelu.dx", dx, false);
    rt_tanh_fwd(x, y);
    check("tanh.y", y, false);
    rt_tanh_bwd(x, dy, dx);
    check("tanh.dx", dx, false);
    rt_sigmoid_fwd(x, y);
    check("sigmoid.y", y, false);
    rt_sigmoid_bwd(x, dy, dx);
    check("sigmoid.dx", dx, false);
    rt_add_fwd(x, dy, y);
    check("add.y", y, false);
    rt_accumulate(y, x);
    check("accumulate", y, false);
    rt_dropout_fwd(x, 0.3f, 9, 3, 5, 2, y);
    check("dropout.y", y, false);
    rt_dropout_bwd(dy, 0.3f, 9, 3, 5, 2, dx);
    check("dropout.dx", dx, false);

    rt_tensor *c1 = rnd(ACT, SHAPE(2, 3, 4), 42, -1, 1), *c2 = rnd(ACT, SHAPE(2, 5, 4), 43, -1, 1);
    rt_tensor *cy = zeros(ACT, SHAPE(2, 8, 4));
    rt_concat_fwd(2, (const rt_tensor *const[]){c1, c2}, 1, cy);
    check("concat.y", cy, false);
    rt_tensor *cdy = rnd(ACT, SHAPE(2, 8, 4), 44, -1, 1);
    rt_tensor *d1 = zeros(ACT, SHAPE(2, 3, 4)), *d2 = zeros(ACT, SHAPE(2, 5, 4));
    rt_concat_bwd(cdy, 1, 2, (rt_tensor *const[]){d1, d2});
    check("concat.dx0", d1, false);
    check("concat.dx1", d2, false);

    rt_tensor *tx = rnd(ACT, SHAPE(2, 3, 4, 5), 45, -1, 1), *ty = zeros(ACT, SHAPE(2, 5, 4, 3));
    rt_transpose(tx, 1, 3, ty);
    check("transpose", ty, false);

    rt_tensor *sx = rnd(ACT, SHAPE(2, 6, 5), 46, -4, 4), *sy = zeros(ACT, SHAPE(2, 6, 5));
    rt_tensor *sdy = rnd(ACT, SHAPE(2, 6, 5), 47, -1, 1), *sdx = zeros(ACT, SHAPE(2, 6, 5));
    rt_softmax_fwd(sx, 1, sy);
    check("softmax.y", sy, false);
    rt_softmax_bwd(sy, sdy, 1, sdx);
    check("softmax.dx", sdx, false);
}

static void nn_cases(void)
{
    rt_tensor *x = rnd(ACT, SHAPE(2, 3, 7, 7), 60, -2, 2);
    rt_pool2d_attrs mp = {3, 3, 2, 2, 1, 1, 0, 0}, ap = {2, 2, 2, 2, 0, 0, 0, 0};
    rt_pool2d_attrs cp = {3, 3, 2, 2, 1, 1, 1, 1}; /* ceil mode, exclude padding */
    rt_tensor *my = zeros(ACT, SHAPE(2, 3, 4, 4)), *mdy = rnd(ACT, SHAPE(2, 3, 4, 4), 61, -1, 1);
    rt_tensor *dx = zeros(ACT, SHAPE(2, 3, 7, 7));
    rt_maxpool2d_fwd(x, &mp, my);
    check("maxpool.y", my, false);
    rt_maxpool2d_bwd(x, mdy, &mp, dx);
    check("maxpool.dx", dx, false);
    rt_tensor *ay = zeros(ACT, SHAPE(2, 3, 3, 3)), *ady = rnd(ACT, SHAPE(2, 3, 3, 3), 62, -1, 1);
    rt_avgpool2d_fwd(x, &ap, ay);
    check("avgpool.y", ay, false);
    rt_avgpool2d_bwd(ady, &ap, dx);
    check("avgpool.dx", dx, false);
    /* ceil mode on 8x8: (8 + 2 - 3 + 1) / 2 + 1 = 5 (floor mode: 4); the last window
     * hangs over the right padding, where exclude_pad changes the divisor. */
    rt_tensor *x8 = rnd(ACT, SHAPE(2, 3, 8, 8), 58, -2, 2), *dx8 = zeros(ACT, SHAPE(2, 3, 8, 8));
    rt_tensor *cy = zeros(ACT, SHAPE(2, 3, 5, 5)), *cdy = rnd(ACT, SHAPE(2, 3, 5, 5), 59, -1, 1);
    rt_avgpool2d_fwd(x8, &cp, cy);
    check("avgpool_ceil_exclude.y", cy, false);
    rt_avgpool2d_bwd(cdy, &cp, dx8);
    check("avgpool_ceil_exclude.dx", dx8, false);
    rt_maxpool2d_fwd(x8, &cp, cy);
    check("maxpool_ceil.y", cy, false);
    rt_maxpool2d_bwd(x8, cdy, &cp, dx8);
    check("maxpool_ceil.dx", dx8, false);
    rt_tensor *gy = zeros(ACT, SHAPE(2, 3)), *gdy = rnd(ACT, SHAPE(2, 3), 63, -1, 1);
    rt_global_avgpool_fwd(x, gy);
    check("global_avgpool.y", gy, false);
    rt_global_avgpool_bwd(gdy, dx);
    check("global_avgpool.dx", dx, false);

    rt_tensor *bx = rnd(ACT, SHAPE(4, 3, 5, 5), 64, -2, 3);
    rt_tensor *g = rnd(RT_F32, SHAPE(3), 65, 0.5f, 1.5f), *be = rnd(RT_F32, SHAPE(3), 66, -1, 1);
    rt_tensor *rm = rnd(RT_F32, SHAPE(3), 67, -1, 1), *rv = rnd(RT_F32, SHAPE(3), 68, 0.5f, 2);
    rt_tensor *saved = zeros(RT_F32, SHAPE(6)), *by = zeros(ACT, SHAPE(4, 3, 5, 5));
    rt_batchnorm2d_fwd(bx, g, be, rm, rv, 0.1f, 1e-5f, saved, by);
    check("batchnorm.y", by, false);
    check("batchnorm.saved", saved, false);
    check("batchnorm.running_mean", rm, false);
    check("batchnorm.running_var", rv, false);
    rt_tensor *bdy = rnd(ACT, SHAPE(4, 3, 5, 5), 69, -1, 1), *bdx = zeros(ACT, SHAPE(4, 3, 5, 5));
    rt_tensor *dg = zeros(RT_F32, SHAPE(3)), *db = zeros(RT_F32, SHAPE(3));
    rt_batchnorm2d_bwd(bx, g, saved, bdy, bdx, dg, db);
    check("batchnorm.dx", bdx, false);
    check("batchnorm.dgamma", dg, false);
    check("batchnorm.dbeta", db, false);
    rt_batchnorm2d_infer(bx, g, be, rm, rv, 1e-5f, by);
    check("batchnorm.infer", by, false);
    /* SyncBN over a one-rank set: the code path of the all-reduced statistics. */
    rt_comm *one = rt_comm_new(1, (int[]){0});
    rt_batchnorm2d_sync_fwd(one, bx, g, be, rm, rv, 0.1f, 1e-5f, saved, by);
    check("batchnorm_sync.y", by, false);
    check("batchnorm_sync.running_var", rv, false);
    rt_batchnorm2d_sync_bwd(one, bx, g, saved, bdy, bdx, dg, db);
    check("batchnorm_sync.dx", bdx, false);
    check("batchnorm_sync.dgamma", dg, false);

    rt_tensor *lx = rnd(ACT, SHAPE(2, 5, 12), 70, -2, 2);
    rt_tensor *lg = rnd(RT_F32, SHAPE(12), 71, 0.5f, 1.5f), *lb = rnd(RT_F32, SHAPE(12), 72, -1, 1);
    rt_tensor *ls = zeros(RT_F32, SHAPE(20)), *ly = zeros(ACT, SHAPE(2, 5, 12));
    rt_layernorm_fwd(lx, lg, lb, 1e-5f, ls, ly);
    check("layernorm.y", ly, false);
    rt_tensor *ldy = rnd(ACT, SHAPE(2, 5, 12), 73, -1, 1), *ldx = zeros(ACT, SHAPE(2, 5, 12));
    rt_tensor *ldg = zeros(RT_F32, SHAPE(12)), *ldb = zeros(RT_F32, SHAPE(12));
    rt_layernorm_bwd(lx, lg, ls, ldy, ldx, ldg, ldb);
    check("layernorm.dx", ldx, false);
    check("layernorm.dgamma", ldg, false);
    check("layernorm.dbeta", ldb, false);

    rt_tensor *tok = rnd(RT_I32, SHAPE(2, 6), 74, 0, 11);
    rt_tensor *ew = rnd(RT_F32, SHAPE(11, 8), 75, -1, 1), *ep = rnd(RT_F32, SHAPE(7, 8), 76, -1, 1);
    rt_tensor *ey = zeros(ACT, SHAPE(2, 6, 8)), *edy = rnd(ACT, SHAPE(2, 6, 8), 77, -1, 1);
    rt_tensor *edw = zeros(RT_F32, SHAPE(11, 8)), *edp = zeros(RT_F32, SHAPE(7, 8));
    rt_embedding_fwd(tok, ew, ep, ey);
    check("embedding.y", ey, false);
    rt_embedding_bwd(tok, edy, edw, edp);
    check("embedding.dw", edw, false);
    check("embedding.dpos", edp, false);

    rt_tensor *vx = rnd(ACT, SHAPE(3, 5, 8), 180, -2, 2), *vt = rnd(RT_F32, SHAPE(8), 181, -1, 1);
    rt_tensor *vp = rnd(RT_F32, SHAPE(6, 8), 182, -1, 1), *vy = zeros(ACT, SHAPE(3, 6, 8));
    rt_tensor *vdy = rnd(ACT, SHAPE(3, 6, 8), 183, -1, 1), *vdx = zeros(ACT, SHAPE(3, 5, 8));
    rt_tensor *vdt = zeros(RT_F32, SHAPE(8)), *vdp = zeros(RT_F32, SHAPE(6, 8));
    rt_tokens_fwd(vx, 1, vt, vp, vy);
    check("tokens.y", vy, false);
    rt_tokens_bwd(vdy, 1, vdx, vdt, vdp);
    check("tokens.dx", vdx, false);
    check("tokens.dcls", vdt, false);
    check("tokens.dpos", vdp, false);

    rt_tensor *z = rnd(ACT, SHAPE(6, 5), 78, -3, 3), *lab = rnd(RT_I32, SHAPE(6), 79, 0, 5);
    rt_tensor *dz = zeros(ACT, SHAPE(6, 5));
    check_scalar("cross_entropy.loss", rt_cross_entropy_fwd(z, lab, 10), false);
    rt_cross_entropy_bwd(z, lab, 10, dz);
    check("cross_entropy.dlogits", dz, false);
    /* The foreground's loss gradient under a fixed loss scale of 65536 over a global count
     * of 65536 (GPT-2's 8 x 1024 tokens, times 8): softmax - onehot itself, each entry to
     * its own precision. Scaled after it was stored in f16, the probabilities (down to
     * 5e-5 here) would have been 1e-9 there, stored as 0. */
    rt_tensor *zs = rnd(ACT, SHAPE(4, 50), 80, -3, 3), *labs = rnd(RT_I32, SHAPE(4), 81, 0, 50);
    rt_tensor *dzs = zeros(ACT, SHAPE(4, 50));
    rt_opts_g.loss_scale = RT_LOSS_SCALE_FIXED;
    rt_opts_g.loss_scale_init = 65536;
    rt_loss_scaler_configure();
    rt_cross_entropy_bwd_scaled(zs, labs, 65536, dzs);
    rt_opts_g.loss_scale = RT_LOSS_SCALE_DEFAULT;
    rt_loss_scaler_configure();
    check_each("cross_entropy.dlogits_scaled", dzs, 1e-2);
    check_scalar("correct_count", (double)rt_correct_count(z, lab), false);
}

static void optim_init_data_cases(void)
{
    rt_comm *world = rt_comm_new(1, (int[]){0});
    rt_params *ps = rt_params_new(P), *pa = rt_params_new(P);
    rt_param *w = rt_param_new(ps, "w", world, 2, (int64_t[]){5, 7});
    rt_param *v = rt_param_new(pa, "v", world, 1, (int64_t[]){9});
    rt_init_kaiming_uniform(w->value, 7, 3, 11, 0);
    check("init.kaiming_uniform", w->value, false);
    rt_init_normal(v->value, 0.5f, 0.02f, 3, 12, 1);
    check("init.normal", v->value, false);
    rt_sgd sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = true};
    rt_adam adam = {
        .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    for (int step = 0; step < 3; step++) {
        rt_params_zero_grad(ps);
        rt_params_zero_grad(pa);
        rt_tensor *g = rnd(RT_F32, SHAPE(5, 7), 80 + step, -1, 1);
        rt_tensor *h = rnd(RT_F32, SHAPE(9), 90 + step, -1, 1);
        rt_tensor_copy(w->grad, g); /* (parameter gradients: f32 whatever stores activations) */
        rt_tensor_copy(v->grad, h);
        rt_params_allreduce_grads(ps);
        rt_sgd_step(ps, &sgd);
        rt_adam_step(pa, &adam);
    }
    check("sgd.w", w->value, false);
    check("adam.w", v->value, false);
    rt_tensor *u = zeros(RT_F32, SHAPE(4, 4)), *k = zeros(RT_F32, SHAPE(3));
    rt_init_uniform(u, 0.25f, 5, 13, 2);
    check("init.uniform", u, false);
    rt_init_const(k, 1.5f);
    check("init.const", k, false);

    rt_options o;
    memset(&o, 0, sizeof o);
    o.data = RT_DATA_SYNTHETIC;
    o.seed = 3;
    rt_data *d = rt_data_open(&o, 1, (int64_t[]){12}, RT_F32, 0, 5, 1);
    rt_tensor *dx = zeros(ACT, SHAPE(4, 12)), *dl = zeros(RT_I32, SHAPE(4));
    rt_data_batch(d, 2, 8, 2, 6, dx, dl);
    check("data.x", dx, false);
    check("data.labels", dl, false);
    rt_data_close(d);
    /* tokens with several labels per sample, from the test set */
    rt_data *dt = rt_data_open(&o, 1, (int64_t[]){6}, RT_I32, 37, 11, 6);
    rt_tensor *tx = zeros(RT_I32, SHAPE(3, 6)), *tl = zeros(RT_I32, SHAPE(3, 6));
    rt_data_test_batch(dt, 4, 3, tx, tl);
    check("data.test_tokens", tx, false);
    check("data.test_labels", tl, false);
    rt_data_close(dt);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s REFERENCE-FILE\n", argv[0]);
        return 2;
    }
#ifndef KC_CPU
    if (rt_cuda_visible_devices() == 0) {
        printf("no GPU visible: skipped\n");
        return 77;
    }
    const char *dt = getenv("BURSTRT_COMPUTE_DTYPE");
    if (dt && (!strcmp(dt, "bf16") || !strcmp(dt, "f16")))
        gemm_tol = 3e-2;
    (void)rt_storage_dtype(); /* starts the device, which settles the compute dtype (ACT) */
#endif
    ref = fopen(argv[1], KC_MODE);
    if (!ref) {
        perror(argv[1]);
        return 1;
    }
    P = rt_pool_new();
    conv_case("conv2d", 1, (int64_t[]){3, 4, 9, 9}, (int64_t[]){6, 4, 3, 3}, true,
              (rt_conv2d_attrs){3, 3, 2, 2, 1, 1, 1, 1, 1});
    conv_case("conv2d_groups_dilation", 5, (int64_t[]){2, 4, 8, 8}, (int64_t[]){6, 2, 3, 3}, false,
              (rt_conv2d_attrs){3, 3, 1, 1, 2, 2, 2, 2, 2});
    conv_case("conv2d_1x1", 9, (int64_t[]){2, 8, 5, 5}, (int64_t[]){4, 8, 1, 1}, true,
              (rt_conv2d_attrs){1, 1, 1, 1, 0, 0, 1, 1, 1});
    dense_cases();
    elementwise_cases();
    nn_cases();
    optim_init_data_cases();
    rt_pool_free(P);
    rt_finalize();
    fclose(ref);
#ifdef KC_CPU
    printf("wrote %d reference outputs to %s\n", checked, argv[1]);
    return 0;
#else
    printf("%d outputs compared, %d failed\n", checked, failures);
    return failures ? 1 : 0;
#endif
}
