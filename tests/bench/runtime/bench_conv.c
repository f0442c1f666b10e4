/* bench_conv.c: how much the im2col lowering of conv2d costs over the GEMMs it feeds.
 * For each distinct conv layer of VGG-16 on 56x56 inputs (3x3, stride 1, pad 1; spatial
 * size halves after each block) and batch 1, 2, 4, 8, it times rt_conv2d_fwd +
 * rt_conv2d_bwd (dx, dw, db) against bare cblas_sgemm calls of exactly the GEMM shapes
 * the lowering uses (per chunk of rt_conv2d_chunk() samples, columns c = samples*OH*OW:
 * y[K,c] = W col, dW += dy col^T, dcol = W^T dy), median (and minimum) of
 * several interleaved runs, one BLAS thread, and prints the ratio (spg: samples per GEMM).
 * Times are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which OpenBLAS with
 * one thread runs entirely on, so other load on the machine disturbs them much less
 * than wall time. Not a test: run it by hand.
 *   usage: bench_conv [repeats]   (default 5) */
#include "burstrt.h"
#include "cpu/cpu.h" /* rt_conv2d_chunk: how many samples the lowering puts in one GEMM */

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void openblas_set_num_threads(int num_threads);

typedef struct {
    const char *name;
    int C, K, HW, count; /* count: how many VGG-16 layers have this shape */
} layer;

static const layer layers[] = {
    {"conv1_1", 3, 64, 56, 1},    {"conv1_2", 64, 64, 56, 1},    {"conv2_1", 64, 128, 28, 1},
    {"conv2_2", 128, 128, 28, 1}, {"conv3_1", 128, 256, 14, 1},  {"conv3_2/3", 256, 256, 14, 2},
    {"conv4_1", 256, 512, 7, 1},  {"conv4_2/3", 512, 512, 7, 2}, {"conv5_1/2/3", 512, 512, 3, 3},
};

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1)
        reps = 1;
    openblas_set_num_threads(1);
    rt_pool *P = rt_pool_new();
    rt_conv2d_attrs a = {3, 3, 1, 1, 1, 1, 1, 1, 1};
    const int batches[4] = {1, 2, 4, 8};
    double sum_conv[4] = {0}, sum_gemm[4] = {0}, min_conv[4] = {0}, min_gemm[4] = {0};
    printf("conv2d fwd+bwd (im2col + sgemm) vs bare sgemm of the same shapes, 1 thread, "
           "thread CPU time, median of %d\n",
           reps);
    printf("%-12s %5s %5s %4s %3s %3s | %10s %10s %8s | %8s\n", "layer", "C", "K", "HW", "N", "spg",
           "conv ms", "gemm ms", "overhead", "min-ovh");
    for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
        const layer *L = &layers[l];
        for (int bi = 0; bi < 4; bi++) {
            int N = batches[bi], HW = L->HW, ckk = L->C * 9, ohw = HW * HW;
            rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, L->C, HW, HW});
            rt_tensor *w = rt_tensor_new(P, RT_F32, 4, (int64_t[]){L->K, L->C, 3, 3});
            rt_tensor *b = rt_tensor_new(P, RT_F32, 1, (int64_t[]){L->K});
            rt_tensor *y = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, L->K, HW, HW});
            rt_tensor *dx = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, L->C, HW, HW});
            rt_tensor *dw = rt_tensor_new(P, RT_F32, 4, (int64_t[]){L->K, L->C, 3, 3});
            rt_tensor *db = rt_tensor_new(P, RT_F32, 1, (int64_t[]){L->K});
            rt_init_uniform(x, 1.0f, 1, 0, 0);
            rt_init_uniform(w, 0.1f, 1, 1, 0);
            rt_init_uniform(y, 1.0f, 1, 2, 0); /* doubles as dy */
            const int64_t nc = rt_conv2d_chunk(N, ohw);
            const size_t cols = (size_t)nc * (size_t)ohw;
            float *col = malloc((size_t)ckk * cols * sizeof(float));
            float *dcol = malloc((size_t)ckk * cols * sizeof(float));
            float *ytmp = malloc((size_t)L->K * cols * sizeof(float));
            for (size_t i = 0; i < (size_t)ckk * cols; i++)
                col[i] = (float)(i % 7) * 0.1f;
            for (size_t i = 0; i < (size_t)L->K * cols; i++)
                ytmp[i] = (float)(i % 5) * 0.1f;
            double tc[64], tg[64];
            for (int r = 0; r < reps && r < 64; r++) {
                double t0 = cpu_now();
                rt_conv2d_fwd(P, x, w, b, &a, y);
                rt_conv2d_bwd(P, x, w, y, &a, dx, dw, db);
                double t1 = cpu_now();
                for (int n0 = 0; n0 < N; n0 += (int)nc) {
                    int m = N - n0 < nc ? N - n0 : (int)nc, mc = m * ohw;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L->K, mc, ckk, 1.0f,
                                rt_f32(w), ckk, col, mc, 0.0f, ytmp, mc);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L->K, ckk, mc, 1.0f, ytmp,
                                mc, col, mc, 1.0f, rt_f32(dw), ckk);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, mc, L->K, 1.0f,
                                rt_f32(w), ckk, ytmp, mc, 0.0f, dcol, mc);
                }
                double t2 = cpu_now();
                tc[r] = t1 - t0;
                tg[r] = t2 - t1;
            }
            int nr = reps < 64 ? reps : 64;
            double mc = median(tc, nr), mg = median(tg, nr);
            double lc = tc[0], lg = tg[0]; /* sorted by median() */
            sum_conv[bi] += mc * L->count;
            sum_gemm[bi] += mg * L->count;
            min_conv[bi] += lc * L->count;
            min_gemm[bi] += lg * L->count;
            printf("%-12s %5d %5d %4d %3d %3lld | %10.3f %10.3f %7.1f%% | %7.1f%%\n", L->name, L->C,
                   L->K, HW, N, (long long)nc, 1e3 * mc, 1e3 * mg, 100.0 * (mc / mg - 1.0),
                   100.0 * (lc / lg - 1.0));
            free(col);
            free(dcol);
            free(ytmp);
        }
    }
    printf("\nwhole VGG-16 conv stack (13 layers, 56x56 input)\n");
    for (int bi = 0; bi < 4; bi++)
        printf("batch %d: conv %.1f ms, gemm %.1f ms, overhead %.1f%% (of the minima: %.1f%%)\n",
               batches[bi], 1e3 * sum_conv[bi], 1e3 * sum_gemm[bi],
               100.0 * (sum_conv[bi] / sum_gemm[bi] - 1.0),
               100.0 * (min_conv[bi] / min_gemm[bi] - 1.0));
    rt_pool_free(P);
    return 0;
}
