/* bench_conv.c: conv2d forward + backward (dx, dw, db) of the CPU backend, oneDNN's direct
 * convolutions (rt_conv2d_*, what programs run) against the reference im2col + OpenBLAS
 * lowering it replaced (rt_ref_conv2d_*), in GFLOP/s (3 x 2*N*K*C/g*kh*kw*OH*OW per
 * forward+backward). Layers: the two networks the CPU benchmarks train (the Fashion-MNIST
 * CNN at batch 64, the small ResNet at batch 32) and the VGG-16 conv layers on a 56x56
 * input at batch 1, 2, 4, 8. One thread; times are the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: oneDNN and OpenBLAS with one thread run on it), so other load
 * on a shared machine disturbs them much less than wall time; median and minimum of
 * interleaved runs after one warm-up. Not a test: run it by hand.
 *   usage: bench_conv [repeats]   (default 5) */
#include "bench_time.h"
#include "burstrt.h"
#include "cpu/ref.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

typedef void (*conv_fn)(rt_pool *, const rt_tensor *, const rt_tensor *, const rt_tensor *,
                        const rt_conv2d_attrs *, rt_tensor *);
typedef void (*conv_bwd_fn)(rt_pool *, const rt_tensor *, const rt_tensor *, const rt_tensor *,
                            const rt_conv2d_attrs *, rt_tensor *, rt_tensor *, rt_tensor *);

/* Median and minimum seconds of fwd+bwd of one layer with the production kernels and with
 * the reference, interleaved. */
static void time_layer(rt_pool *P, int N, int C, int K, int HW, int k, int reps, double *dnn,
                       double *dnn_min, double *ref, double *ref_min)
{
    rt_conv2d_attrs a = {k, k, 1, 1, k / 2, k / 2, 1, 1, 1};
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_tensor *w = rt_tensor_new(P, RT_F32, 4, (int64_t[]){K, C, k, k});
    rt_tensor *b = rt_tensor_new(P, RT_F32, 1, (int64_t[]){K});
    rt_tensor *y = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, K, HW, HW});
    rt_tensor *dx = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_tensor *dw = rt_tensor_new(P, RT_F32, 4, (int64_t[]){K, C, k, k});
    rt_tensor *db = rt_tensor_new(P, RT_F32, 1, (int64_t[]){K});
    rt_init_uniform(x, 1.0f, 1, 0, 0);
    rt_init_uniform(w, 0.1f, 1, 1, 0);
    rt_init_uniform(y, 1.0f, 1, 2, 0); /* doubles as dy */
    conv_fn fwd[2] = {rt_conv2d_fwd, rt_ref_conv2d_fwd};
    conv_bwd_fn bwd[2] = {rt_conv2d_bwd, rt_ref_conv2d_bwd};
    double t[2][64];
    for (int r = -1; r < reps && r < 64; r++)
        for (int i = 0; i < 2; i++) {
            double t0 = cpu_now();
            fwd[i](P, x, w, b, &a, y);
            bwd[i](P, x, w, y, &a, dx, dw, db);
            if (r >= 0)
                t[i][r] = cpu_now() - t0;
        }
    int nr = reps < 64 ? reps : 64;
    *dnn = median(t[0], nr);
    *dnn_min = t[0][0]; /* sorted by median() */
    *ref = median(t[1], nr);
    *ref_min = t[1][0];
}

static double gflops(int N, int C, int K, int HW, int k, double s)
{
    return 3.0 * 2.0 * N * K * (double)C * k * k * HW * HW / s / 1e9;
}

int main(int argc, char **argv)
{
    /* The reference's OpenBLAS with the kernels of this CPU, as rt_init arranges for
     * programs (virtual machines that hide the CPU model otherwise get generic ones). */
    __builtin_cpu_init();
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2")) {
        setenv("OPENBLAS_CORETYPE", __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell", 1);
        execv("/proc/self/exe", argv);
    }
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1)
        reps = 1;
    openblas_set_num_threads(1);
    omp_set_num_threads(1);
    rt_pool *P = rt_pool_new();
    printf("conv2d fwd+bwd: oneDNN (production) vs im2col + OpenBLAS (reference), 1 thread, "
           "thread CPU time, median of %d\n",
           reps);
    printf("%-12s %5s %5s %4s %2s %3s | %10s %8s %10s %8s | %7s\n", "layer", "C", "K", "HW", "k",
           "N", "oneDNN ms", "GFLOP/s", "ref ms", "GFLOP/s", "speedup");
    static const struct {
        const char *name;
        int C, K, HW, k, N;
    } nets[] = {{"fmnist.conv1", 1, 32, 28, 3, 64}, {"fmnist.conv2", 32, 64, 14, 3, 64},
                {"resnet.stem", 1, 32, 28, 3, 32},  {"resnet.3x3", 32, 32, 28, 3, 32},
                {"resnet.5x5", 32, 32, 28, 5, 32},  {"resnet.r", 64, 64, 14, 3, 32}};
    double d, dm, rf, rm;
    for (size_t l = 0; l < sizeof nets / sizeof *nets; l++) {
        time_layer(P, nets[l].N, nets[l].C, nets[l].K, nets[l].HW, nets[l].k, reps, &d, &dm, &rf,
                   &rm);
        printf("%-12s %5d %5d %4d %2d %3d | %10.3f %8.1f %10.3f %8.1f | %6.2fx\n", nets[l].name,
               nets[l].C, nets[l].K, nets[l].HW, nets[l].k, nets[l].N, 1e3 * d,
               gflops(nets[l].N, nets[l].C, nets[l].K, nets[l].HW, nets[l].k, d), 1e3 * rf,
               gflops(nets[l].N, nets[l].C, nets[l].K, nets[l].HW, nets[l].k, rf), rf / d);
    }
    const int batches[4] = {1, 2, 4, 8};
    double sum_dnn[4] = {0}, sum_ref[4] = {0};
    for (size_t l = 0; l < sizeof layers / sizeof *layers; l++) {
        const layer *L = &layers[l];
        for (int bi = 0; bi < 4; bi++) {
            time_layer(P, batches[bi], L->C, L->K, L->HW, 3, reps, &d, &dm, &rf, &rm);
            sum_dnn[bi] += d * L->count;
            sum_ref[bi] += rf * L->count;
            printf("%-12s %5d %5d %4d %2d %3d | %10.3f %8.1f %10.3f %8.1f | %6.2fx\n", L->name,
                   L->C, L->K, L->HW, 3, batches[bi], 1e3 * d,
                   gflops(batches[bi], L->C, L->K, L->HW, 3, d), 1e3 * rf,
                   gflops(batches[bi], L->C, L->K, L->HW, 3, rf), rf / d);
        }
    }
    printf("\nwhole VGG-16 conv stack (13 layers, 56x56 input)\n");
    for (int bi = 0; bi < 4; bi++)
        printf("batch %d: oneDNN %.1f ms, reference %.1f ms, speedup %.2fx\n", batches[bi],
               1e3 * sum_dnn[bi], 1e3 * sum_ref[bi], sum_ref[bi] / sum_dnn[bi]);
    rt_pool_free(P);
    rt_finalize();
    return 0;
}
