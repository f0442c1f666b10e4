/* bench_kernels.c: the memory-bound kernels of the CPU backend that the per-op comparison
 * with PyTorch singled out (docs/runtime.md, "Per op"): max pooling forward and backward
 * and ReLU's backward, on the shapes of the two networks the CPU benchmarks train (the
 * Fashion-MNIST CNN at batch 64, the small ResNet at batch 32), the production kernels
 * (rt_*) beside the reference kernels (rt_ref_*). Max pooling's backward runs right after
 * the forward of the same input, as in a training step (the argmax the forward kept is
 * used). One thread; times are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
 * median and minimum of interleaved runs after one warm-up, in ms per call. Not a test:
 * run it by hand, before and after a change to those kernels.
 *   usage: bench_kernels [repeats]   (default 21) */
#include "bench_time.h"
#include "burstrt.h"
#include "cpu/ref.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAXREPS 256

/* Median and minimum of v[0..n) in ms (v is sorted). */
static void report(const char *what, const char *shape, double *prod, double *ref, int n)
{
    qsort(prod, (size_t)n, sizeof *prod, cmp);
    qsort(ref, (size_t)n, sizeof *ref, cmp);
    printf("%-18s %-16s | %9.3f %9.3f | %9.3f %9.3f\n", what, shape, 1e3 * prod[n / 2],
           1e3 * prod[0], 1e3 * ref[n / 2], 1e3 * ref[0]);
}

static void bench_pool(rt_pool *P, int N, int C, int HW, int reps)
{
    rt_pool2d_attrs a = {2, 2, 2, 2, 0, 0, 0, 0};
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_tensor *y = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW / 2, HW / 2});
    rt_tensor *dy = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW / 2, HW / 2});
    rt_tensor *dx = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_init_uniform(x, 1.0f, 1, 0, 0);
    rt_init_uniform(dy, 1.0f, 1, 1, 0);
    double f[2][MAXREPS], b[2][MAXREPS];
    for (int r = -1; r < reps; r++) {
        double t0 = cpu_now();
        rt_maxpool2d_fwd(x, &a, y);
        double t1 = cpu_now();
        rt_maxpool2d_bwd(x, dy, &a, dx);
        double t2 = cpu_now();
        rt_ref_maxpool2d_fwd(x, &a, y);
        double t3 = cpu_now();
        rt_ref_maxpool2d_bwd(x, dy, &a, dx);
        double t4 = cpu_now();
        if (r >= 0) {
            f[0][r] = t1 - t0, b[0][r] = t2 - t1;
            f[1][r] = t3 - t2, b[1][r] = t4 - t3;
        }
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%dx%dx%d", N, C, HW, HW);
    report("maxpool2x2 fwd", shape, f[0], f[1], reps);
    report("maxpool2x2 bwd", shape, b[0], b[1], reps);
}

static void bench_relu(rt_pool *P, int N, int C, int HW, int reps)
{
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_tensor *dy = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_tensor *dx = rt_tensor_new(P, RT_F32, 4, (int64_t[]){N, C, HW, HW});
    rt_init_uniform(x, 1.0f, 1, 0, 0);
    rt_init_uniform(dy, 1.0f, 1, 1, 0);
    double t[2][MAXREPS];
    for (int r = -1; r < reps; r++) {
        double t0 = cpu_now();
        rt_relu_bwd(x, dy, dx);
        double t1 = cpu_now();
        rt_ref_relu_bwd(x, dy, dx);
        double t2 = cpu_now();
        if (r >= 0)
            t[0][r] = t1 - t0, t[1][r] = t2 - t1;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%dx%dx%d", N, C, HW, HW);
    report("relu bwd", shape, t[0], t[1], reps);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 21;
    reps = reps < 1 ? 1 : reps > MAXREPS ? MAXREPS : reps;
    omp_set_num_threads(1);
    rt_pool *P = rt_pool_new();
    printf("1 thread, thread CPU time, ms per call, median and minimum of %d\n", reps);
    printf("%-18s %-16s | %9s %9s | %9s %9s\n", "kernel", "NxCxHxW", "rt med", "rt min", "ref med",
           "ref min");
    bench_pool(P, 64, 32, 28, reps); /* fmnist pool1 */
    bench_pool(P, 64, 64, 14, reps); /* fmnist pool2 */
    bench_pool(P, 32, 64, 28, reps); /* resnet pool */
    bench_relu(P, 64, 32, 28, reps); /* fmnist relu1 */
    bench_relu(P, 64, 64, 14, reps); /* fmnist relu2 */
    bench_relu(P, 32, 32, 28, reps); /* resnet, each of ~12 */
    rt_pool_free(P);
    rt_finalize();
    return 0;
}
