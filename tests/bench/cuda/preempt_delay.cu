/*
 * preempt_delay.cu: how long a low-priority kernel delays a high-priority
 * one on this GPU: the parameter `--preempt-delay` of the interleave pass
 * (docs/plan.md, "The sharing model"), measured by scripts/gpu-check's
 * section 7. Standalone (CUDA runtime only), not a test.
 *
 * A background kernel on the lowest-priority stream fills every SM with
 * blocks that each spin for B microseconds (a huge grid, so new blocks keep
 * being issued until the host raises a stop flag). While it runs, a
 * foreground kernel on the highest-priority stream is launched and waited
 * for from the host; the same launch on an idle GPU is the baseline. The
 * block scheduler gives the foreground the SMs as the running background
 * blocks finish, so the delay (with background minus idle) should grow
 * with B and stay below it; a kernel-end model would give the whole
 * background kernel. Two foregrounds: one block (a small layer) and four
 * blocks per SM (a kernel that needs the whole GPU).
 *
 *   usage: preempt_delay [trials (default 30)]
 *
 * Prints a table: B, foreground, idle and with-background latency (median,
 * p90, microseconds), delay = median difference.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                 \
    do {                                                                      \
        cudaError_t e_ = (x);                                                 \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "preempt_delay: %s:%d: %s\n", __FILE__, __LINE__, \
                    cudaGetErrorString(e_));                                  \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

__device__ static unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Each block spins for ns nanoseconds unless the host said stop; the first
 * block to run tells the host it runs. */
__global__ void background(volatile int *stop, volatile int *started, unsigned long long ns)
{
    if (*stop)
        return;
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *started = 1;
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns && !*stop)
        ;
}

__global__ void foreground(float *x)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    x[i] = x[i] * 0.5f + 1.0f;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static double p90(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[(v.size() * 9) / 10 < v.size() ? (v.size() * 9) / 10 : v.size() - 1];
}

/* Host-side latency of one foreground launch until its stream is done (us). */
static double fg_latency(cudaStream_t hi, int blocks, float *x)
{
    auto t0 = std::chrono::steady_clock::now();
    foreground<<<blocks, 256, 0, hi>>>(x);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(hi));
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

int main(int argc, char **argv)
{
    int trials = argc > 1 ? atoi(argv[1]) : 30;
    if (trials < 3 || trials > 10000) {
        fprintf(stderr, "usage: preempt_delay [trials, 3..10000]\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int lo_prio, hi_prio;
    CK(cudaDeviceGetStreamPriorityRange(&lo_prio, &hi_prio));
    cudaStream_t lo, hi;
    CK(cudaStreamCreateWithPriority(&lo, cudaStreamNonBlocking, lo_prio));
    CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, hi_prio));
    int *flags; /* [0] stop, [1] started: mapped host memory */
    CK(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped));
    int *dflags;
    CK(cudaHostGetDevicePointer(&dflags, flags, 0));
    int wide = 4 * prop.multiProcessorCount;
    float *x;
    CK(cudaMalloc(&x, (size_t)wide * 256 * sizeof(float)));
    CK(cudaMemset(x, 0, (size_t)wide * 256 * sizeof(float)));
    for (int i = 0; i < 20; i++) /* warm up */
        fg_latency(hi, wide, x);

    printf("preempt_delay: %s, %d SMs, stream priorities %d (low) .. %d (high), %d trials\n",
           prop.name, prop.multiProcessorCount, lo_prio, hi_prio, trials);
    printf("%10s %12s %12s %12s %12s %12s %12s\n", "block us", "foreground", "idle med", "idle p90",
           "bg med", "bg p90", "delay us");
    static const double block_us[] = {5, 20, 100, 500};
    static const int bg_blocks = 1 << 24; /* never all issued: the host stops it */
    for (double b : block_us) {
        for (int f = 0; f < 2; f++) {
            int fb = f ? wide : 1;
            std::vector<double> idle, with;
            for (int t = 0; t < trials; t++)
                idle.push_back(fg_latency(hi, fb, x));
            for (int t = 0; t < trials; t++) {
                flags[0] = 0;
                flags[1] = 0;
                background<<<bg_blocks, 256, 0, lo>>>(dflags, dflags + 1,
                                                      (unsigned long long)(b * 1e3));
                CK(cudaGetLastError());
                auto w0 = std::chrono::steady_clock::now();
                while (!((volatile int *)flags)[1]) {
                    if (std::chrono::steady_clock::now() - w0 > std::chrono::seconds(5)) {
                        fprintf(stderr, "preempt_delay: the background kernel never started\n");
                        return 1;
                    }
                }
                /* let the SMs fill with background blocks at different ages */
                auto s0 = std::chrono::steady_clock::now();
                while (
                    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s0)
                        .count() < 3 * b + 50)
                    ;
                with.push_back(fg_latency(hi, fb, x));
                ((volatile int *)flags)[0] = 1;
                CK(cudaStreamSynchronize(lo));
            }
            printf("%10.0f %12s %12.1f %12.1f %12.1f %12.1f %12.1f\n", b, f ? "wide" : "1 block",
                   median(idle), p90(idle), median(with), p90(with), median(with) - median(idle));
        }
    }
    printf("(latency: launch until the high-priority stream is done, host clock; delay: median "
           "with background minus idle; burstc's --preempt-delay is the delay of the background's "
           "own block time)\n");
    CK(cudaFree(x));
    CK(cudaFreeHost(flags));
    CK(cudaStreamDestroy(lo));
    CK(cudaStreamDestroy(hi));
    return 0;
}
