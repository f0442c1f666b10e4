/* bench_layers.c: achieved TFLOP/s of the CUDA backend per layer of VGG-16 (batch 32,
 * 224x224) and GPT-2 small (batch 8, 1024 tokens), forward + backward, next to cuBLAS
 * GEMM alone at the same shapes (the GEMMs an ideal lowering would run: for conv2d the
 * batched weight x columns product, the input-gradient product and one weight-gradient
 * product over all samples, without im2col/col2im; for attention the two projections
 * and the per-head score and value products). The ratio shows what the lowering and
 * the memory-bound kernels cost on top of the GEMMs. Uses BURSTRT_COMPUTE_DTYPE
 * (f32, bf16, f16). Not a test: scripts/gpu-check runs it; prints "no GPU visible:
 * skipped" and exits 77 without a GPU.
 *   usage: bench_cuda_layers [repeats (default 10)] [vgg|gpt2|all] */
#include "burstrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* From burstrt_cuda: the row-major GEMM helper every op uses, device count, sync. */
void rt_cuda_gemm(const char *op, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const void *A, rt_dtype adt, int64_t lda, int64_t strideA, const void *B,
                  rt_dtype bdt, int64_t ldb, int64_t strideB, float beta, void *C, rt_dtype cdt,
                  int64_t ldc, int64_t strideC, int64_t batch);
int rt_cuda_visible_devices(void);
void rt_device_sync(void);

static int repeats = 10;
static rt_pool *P;

static rt_tensor *T4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return rt_tensor_new(P, RT_F32, 4, (int64_t[]){a, b, c, d});
}
static rt_tensor *T3(int64_t a, int64_t b, int64_t c)
{
    return rt_tensor_new(P, RT_F32, 3, (int64_t[]){a, b, c});
}
static rt_tensor *T2(int64_t a, int64_t b)
{
    return rt_tensor_new(P, RT_F32, 2, (int64_t[]){a, b});
}
static rt_tensor *T1(int64_t a)
{
    return rt_tensor_new(P, RT_F32, 1, (int64_t[]){a});
}

typedef void (*run_fn)(void *ctx);

/* Mean seconds per call after two warm-up calls. */
static double timed(run_fn f, void *ctx)
{
    f(ctx);
    f(ctx);
    rt_device_sync();
    double t0 = rt_now();
    for (int i = 0; i < repeats; i++)
        f(ctx);
    rt_device_sync();
    return (rt_now() - t0) / repeats;
}

static void row(const char *layer, const char *shape, double flops, double t_rt, double t_gemm)
{
    printf("%-10s %-30s %8.3f ms %7.1f TFLOP/s   gemm %8.3f ms %7.1f TFLOP/s   %5.1f%%\n", layer,
           shape, 1e3 * t_rt, flops / t_rt / 1e12, 1e3 * t_gemm, flops / t_gemm / 1e12,
           100.0 * t_gemm / t_rt);
    fflush(stdout);
}

/* ---- conv2d ------------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *w, *b, *y, *dy, *dx, *dw, *db;
    rt_conv2d_attrs a;
    int64_t N, C, K, H, W, OH, OW;
} conv_ctx;

static void conv_rt(void *p)
{
    conv_ctx *c = p;
    rt_conv2d_fwd(P, c->x, c->w, c->b, &c->a, c->y);
    rt_conv2d_bwd(P, c->x, c->w, c->dy, &c->a, c->dx, c->dw, c->db);
}

static void conv_gemm(void *p)
{
    conv_ctx *c = p;
    const int64_t ckk = c->C * 9, HW = c->OH * c->OW;
    /* The columns are stood in for by x-sized reads of the dx buffer: only the shapes
     * matter for the time. dcol/col of [N, ckk, HW] would not fit for the first layers,
     * so the products read the same [ckk, HW] block for every sample (stride 0). */
    float *col = rt_pool_scratch(P, (size_t)(ckk * HW));
    rt_cuda_gemm("bench", false, false, c->K, HW, ckk, 1, rt_f32(c->w), RT_F32, ckk, 0, col, RT_F32,
                 HW, 0, 0, rt_f32(c->y), RT_F32, HW, c->K * HW, c->N);
    rt_cuda_gemm("bench", true, false, ckk, HW, c->K, 1, rt_f32(c->w), RT_F32, ckk, 0,
                 rt_f32(c->dy), RT_F32, HW, c->K * HW, 0, col, RT_F32, HW, 0, 1);
    rt_cuda_gemm("bench", false, true, c->K, ckk, HW, 1, rt_f32(c->dy), RT_F32, HW, c->K * HW, col,
                 RT_F32, HW, 0, 1, rt_f32(c->dw), RT_F32, ckk, 0, c->N);
}

static void bench_conv(const char *name, int64_t N, int64_t C, int64_t K, int64_t H)
{
    conv_ctx c = {.N = N, .C = C, .K = K, .H = H, .W = H, .OH = H, .OW = H};
    c.a = (rt_conv2d_attrs){3, 3, 1, 1, 1, 1, 1, 1, 1};
    rt_pool *outer = P;
    P = rt_pool_new();
    c.x = T4(N, C, H, H);
    c.w = T4(K, C, 3, 3);
    c.b = T1(K);
    c.y = T4(N, K, H, H);
    c.dy = T4(N, K, H, H);
    c.dx = T4(N, C, H, H);
    c.dw = T4(K, C, 3, 3);
    c.db = T1(K);
    double flops = 3.0 * 2.0 * N * K * H * H * C * 9;
    double t_rt = timed(conv_rt, &c), t_gemm = timed(conv_gemm, &c);
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld -> %lld", (long long)C, (long long)H,
             (long long)H, (long long)K);
    row(name, shape, flops, t_rt, t_gemm);
    rt_pool_free(P);
    P = outer;
}

/* ---- linear --------------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *w, *b, *y, *dy, *dx, *dw, *db;
    int64_t M, in, out;
} lin_ctx;

static void lin_rt(void *p)
{
    lin_ctx *l = p;
    rt_linear_fwd(l->x, l->w, l->b, l->y);
    rt_linear_bwd(l->x, l->w, l->dy, l->dx, l->dw, l->db);
}

static void lin_gemm(void *p)
{
    lin_ctx *l = p;
    rt_cuda_gemm("bench", false, true, l->M, l->out, l->in, 1, rt_f32(l->x), RT_F32, l->in, 0,
                 rt_f32(l->w), RT_F32, l->in, 0, 0, rt_f32(l->y), RT_F32, l->out, 0, 1);
    rt_cuda_gemm("bench", false, false, l->M, l->in, l->out, 1, rt_f32(l->dy), RT_F32, l->out, 0,
                 rt_f32(l->w), RT_F32, l->in, 0, 0, rt_f32(l->dx), RT_F32, l->in, 0, 1);
    rt_cuda_gemm("bench", true, false, l->out, l->in, l->M, 1, rt_f32(l->dy), RT_F32, l->out, 0,
                 rt_f32(l->x), RT_F32, l->in, 0, 1, rt_f32(l->dw), RT_F32, l->in, 0, 1);
}

static void bench_linear(const char *name, int64_t M, int64_t in, int64_t out, bool bias)
{
    rt_pool *outer = P;
    P = rt_pool_new();
    lin_ctx l = {.M = M, .in = in, .out = out};
    l.x = T2(M, in);
    l.w = T2(out, in);
    l.b = bias ? T1(out) : NULL;
    l.y = T2(M, out);
    l.dy = T2(M, out);
    l.dx = T2(M, in);
    l.dw = T2(out, in);
    l.db = bias ? T1(out) : NULL;
    double flops = 3.0 * 2.0 * M * in * out;
    double t_rt = timed(lin_rt, &l), t_gemm = timed(lin_gemm, &l);
    char shape[64];
    snprintf(shape, sizeof shape, "%lld x %lld -> %lld", (long long)M, (long long)in,
             (long long)out);
    row(name, shape, flops, t_rt, t_gemm);
    rt_pool_free(P);
    P = outer;
}

/* ---- attention -------------------------------------------------------------------------- */

typedef struct {
    rt_tensor *x, *wq, *bq, *wo, *bo, *saved, *y, *dy, *dx, *dwq, *dbq, *dwo, *dbo;
    int64_t N, T, D;
    int H;
} attn_ctx;

static void attn_rt(void *p)
{
    attn_ctx *a = p;
    rt_attention_fwd(P, a->x, a->wq, a->bq, a->wo, a->bo, a->H, a->saved, a->y);
    rt_attention_bwd(P, a->x, a->wq, a->wo, a->H, a->saved, a->dy, a->dx, a->dwq, a->dbq, a->dwo,
                     a->dbo);
}

static void attn_gemm(void *p)
{
    attn_ctx *a = p;
    const int64_t NT = a->N * a->T, D = a->D, T = a->T, hd = D / a->H;
    float *qkv = rt_f32(a->saved), *S = qkv + NT * 3 * D, *m = S + a->N * a->H * T * T;
    /* forward: qkv projection, scores, values, output projection; backward: twice each */
    for (int pass = 0; pass < 3; pass++) {
        rt_cuda_gemm("bench", false, true, NT, 3 * D, D, 1, rt_f32(a->x), RT_F32, D, 0,
                     rt_f32(a->wq), RT_F32, D, 0, 0, qkv, RT_F32, 3 * D, 0, 1);
        for (int64_t n = 0; n < a->N; n++) {
            float *q = qkv + n * T * 3 * D;
            rt_cuda_gemm("bench", false, true, T, T, hd, 1, q, RT_F32, 3 * D, hd, q + D, RT_F32,
                         3 * D, hd, 0, S + n * a->H * T * T, RT_F32, T, T * T, a->H);
            rt_cuda_gemm("bench", false, false, T, hd, T, 1, S + n * a->H * T * T, RT_F32, T, T * T,
                         q + 2 * D, RT_F32, 3 * D, hd, 0, m + n * T * D, RT_F32, D, hd, a->H);
        }
        rt_cuda_gemm("bench", false, true, NT, D, D, 1, m, RT_F32, D, 0, rt_f32(a->wo), RT_F32, D,
                     0, 0, rt_f32(a->y), RT_F32, D, 0, 1);
    }
}

static void bench_attention(int64_t N, int64_t T, int64_t D, int H)
{
    rt_pool *outer = P;
    P = rt_pool_new();
    attn_ctx a = {.N = N, .T = T, .D = D, .H = H};
    a.x = T3(N, T, D);
    a.wq = T2(3 * D, D);
    a.bq = T1(3 * D);
    a.wo = T2(D, D);
    a.bo = T1(D);
    a.saved = T1(rt_attention_saved_size(N, T, D, H));
    a.y = T3(N, T, D);
    a.dy = T3(N, T, D);
    a.dx = T3(N, T, D);
    a.dwq = T2(3 * D, D);
    a.dbq = T1(3 * D);
    a.dwo = T2(D, D);
    a.dbo = T1(D);
    double fwd = 2.0 * N * T * D * 3 * D + 2.0 * 2.0 * N * T * T * D + 2.0 * N * T * D * D;
    double t_rt = timed(attn_rt, &a), t_gemm = timed(attn_gemm, &a);
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld, %d heads", (long long)N, (long long)T,
             (long long)D, H);
    row("attention", shape, 3.0 * fwd, t_rt, t_gemm);
    rt_pool_free(P);
    P = outer;
}

int main(int argc, char **argv)
{
    if (rt_cuda_visible_devices() == 0) {
        printf("no GPU visible: skipped\n");
        return 77;
    }
    if (argc > 1)
        repeats = atoi(argv[1]) > 0 ? atoi(argv[1]) : 10;
    const char *which = argc > 2 ? argv[2] : "all";
    const char *dt = getenv("BURSTRT_COMPUTE_DTYPE");
    P = rt_pool_new();
    printf("forward + backward per layer, %d repeats, compute dtype %s; the last column is "
           "the share of the time cuBLAS alone needs\n",
           repeats, dt && *dt ? dt : "f32");
    if (!strcmp(which, "all") || !strcmp(which, "vgg")) {
        printf("VGG-16, batch 32\n");
        static const struct {
            const char *name;
            int64_t C, K, H;
        } v[] = {{"conv1_1", 3, 64, 224},    {"conv1_2", 64, 64, 224},  {"conv2_1", 64, 128, 112},
                 {"conv2_2", 128, 128, 112}, {"conv3_1", 128, 256, 56}, {"conv3_2", 256, 256, 56},
                 {"conv4_1", 256, 512, 28},  {"conv4_2", 512, 512, 28}, {"conv5_1", 512, 512, 14}};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++)
            bench_conv(v[i].name, 32, v[i].C, v[i].K, v[i].H);
        bench_linear("fc6", 32, 25088, 4096, true);
        bench_linear("fc7", 32, 4096, 4096, true);
        bench_linear("fc8", 32, 4096, 1000, true);
    }
    if (!strcmp(which, "all") || !strcmp(which, "gpt2")) {
        printf("GPT-2 small, batch 8 x 1024 tokens (per block, and the LM head)\n");
        bench_attention(8, 1024, 768, 12);
        bench_linear("mlp.fc", 8 * 1024, 768, 3072, true);
        bench_linear("mlp.proj", 8 * 1024, 3072, 768, true);
        bench_linear("lm_head", 8 * 1024, 768, 50257, false);
    }
    rt_pool_free(P);
    rt_finalize();
    return 0;
}
