/* cuda_internal.h: what the files of the CUDA backend of libburstrt (burstrt_cuda)
 * share. The backend implements the same burstrt.h API as the CPU backend, so a
 * generated program compiles unchanged against either library; tensors' data point to
 * device memory here. The backend-neutral host code of the CPU backend (option parser,
 * watchdog, timers, data sources, RNG, checkpoint format, parameter registry) is
 * compiled into this library too, with the few functions that touch tensor memory
 * renamed to rt_host_* (see CMakeLists.txt); the files here wrap those with device
 * copies. Only runtime/cuda/ includes CUDA headers; .c files here are host C, .cu
 * files hold the kernels and expose C launchers. Sections name the defining file. */
#ifndef BURSTRT_CUDA_INTERNAL_H
#define BURSTRT_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
/* burstrt.h spells C11's _Noreturn; C++ (the .cu files) says [[noreturn]]. */
#define _Noreturn [[noreturn]]
extern "C" {
#endif

#include "internal.h"

/* ---- device.c ------------------------------------------------------------------ */

typedef struct {
    int device;               /* CUDA device ordinal this rank uses */
    cudaStream_t fg, bg;      /* highest-priority foreground, lowest-priority background */
    cudaStream_t cur;         /* where work goes now: fg, or bg after rt_use_background_stream */
    cublasHandle_t blas;      /* bound to cur */
    rt_compute_dtype compute; /* GEMM input precision */
    int64_t step;             /* the step of the current iteration (rt_step_begin) */
    int64_t *d_step;          /* device copy of step: graphs read it (dropout keys) */
    void *blas_workspace;     /* cuBLAS's workspace, ours so graph capture never allocates */
    bool ready;               /* rt_cuda_ensure ran */
} rt_cuda_state;
extern rt_cuda_state rt_cuda_g;

/* Makes the device, streams and cuBLAS handle on first use (rt_init calls it; tests
 * that never call rt_init get it lazily from the first tensor). */
void rt_cuda_ensure(void);
/* Fatal error naming op and the CUDA / cuBLAS error string. */
void rt_cuda_check(cudaError_t err, const char *op, const char *what);
void rt_cublas_check(cublasStatus_t st, const char *op, const char *what);
#define RT_CUDA(call, op)   rt_cuda_check((call), (op), #call)
#define RT_CUBLAS(call, op) rt_cublas_check((call), (op), #call)
/* After a kernel launch: reports launch errors (bad configuration) at once. */
void rt_cuda_launched(const char *op);
/* Fatal when the current stream is being captured into a graph: op synchronises
 * with the host or talks to NCCL, which a graph segment must not contain. */
void rt_cuda_not_capturing(const char *op);
/* Waits for the current stream while polling NCCL for asynchronous errors, so a
 * failed peer ends this rank instead of hanging it. */
void rt_cuda_sync(const char *op);
/* Device scratch buffers kept by the runtime (not a pool), one per slot, grown on
 * demand; valid until the next request of the same slot. */
enum { RT_SCRATCH_A, RT_SCRATCH_B, RT_SCRATCH_C, RT_SCRATCH_RED, RT_SCRATCH_COUNT };
void *rt_cuda_scratch(int slot, size_t bytes, const char *op);
/* Pinned host staging buffer of at least `bytes` (data batches, init, checkpoints). */
void *rt_cuda_host_staging(size_t bytes, const char *op);
void rt_cuda_h2d(void *dst, const void *src, size_t bytes, const char *op);
void rt_cuda_d2h(void *dst, const void *src, size_t bytes, const char *op);

/* Number of visible CUDA devices, 0 when none or when the driver is missing (never
 * fatal: the GPU tests use it to skip). */
int rt_cuda_visible_devices(void);

/* nn.cu: fatal error if a kernel met an out-of-range token or label since the start. */
void rt_cuda_check_inputs(const char *op);

/* ---- host_data.c: synthetic batches on the device ------------------------------ */

/* What data.c's synth() hashes, for samples g0 .. g0+count-1 of `stream` (0: training
 * stream, 1: test set). */
typedef struct {
    uint64_t seed, stream;
    int64_t g0, count, per_sample, labels_per_sample, vocab, classes;
    rt_dtype in_dtype;
} rt_synth_keys;
/* For a synthetic source: runs data.c's range and shape checks for a training batch
 * (test = false: a = step, b = B) or a test batch (a = first, b = count), fills k and
 * returns true. Returns false for file-backed sources. */
bool rt_host_data_synthetic(const rt_data *d, bool test, int64_t a, int64_t b, int64_t s0,
                            int64_t s1, const rt_tensor *x, const rt_tensor *labels,
                            rt_synth_keys *k);
/* elementwise.cu: fills x (numel count*per_sample, or NULL) and labels (or NULL). */
void rt_cuda_synth(const rt_synth_keys *k, void *x, int32_t *labels);

/* ---- comm_nccl.c --------------------------------------------------------------- */

/* Polls every communicator's asynchronous error; fatal (after ncclCommAbort on all)
 * on the first. */
void rt_nccl_poll(const char *op);
/* Sum-all-reduce of n doubles in DEVICE memory within the set, on the current stream
 * (no-op for NULL, one-rank sets and non-members): SyncBN statistics. */
void rt_cuda_allreduce_f64(const rt_comm *c, double *data, int64_t n, const char *op);
/* Starts/ends an NCCL group (no-op without NCCL) so many all-reduces go out as one. */
void rt_nccl_group_begin(void);
void rt_nccl_group_end(const char *op);

/* ---- kernels: launchers in *.cu, extern "C" ------------------------------------ */

/* Grid size for n elements at 256 threads, capped (kernels use grid-stride loops). */
static inline unsigned rt_cuda_blocks(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* dense.cu: row-major batched GEMM, C = alpha*op(A) op(B) + beta*C, C [m,n];
 * A is [m,k] (or [k,m] when ta), B is [k,n] (or [n,k] when tb). Inputs are rounded to
 * the compute dtype with f32 accumulation; f32 in and out. */
void rt_cuda_gemm(const char *op, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
                  int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC,
                  int64_t batch);
/* sum over rows: db[n] += sum_i dy[i, n] (bias gradients). */
void rt_cuda_bias_grad(const char *op, const float *dy, int64_t rows, int64_t n, float *db);
/* y[i, n] += b[n]. */
void rt_cuda_add_bias(const char *op, float *y, const float *b, int64_t rows, int64_t n);

/* optim.cu */
void rt_cuda_sgd(float *w, const float *g, float *buf, int64_t n, float lr, float mom, float wd,
                 bool nesterov);
void rt_cuda_adam(float *w, const float *g, float *m, float *v, int64_t n, float step, float b1,
                  float b2, float eps, float wd, float bc2_sqrt);
void rt_cuda_fill(float *p, int64_t n, float value);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
/* Grid-stride loop over [0, n): kernels are launched with rt_cuda_blocks(n) blocks. */
#define RT_FOR(i, n)                                                          \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)
/* The same splitmix64 finaliser as rng.c, so device dropout masks equal the CPU's. */
__device__ __forceinline__ uint64_t rt_dev_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* Block-wide sum of one float per thread (blockDim.x a multiple of 32, <= 1024). */
__device__ __forceinline__ float rt_block_sum(float v)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float rt_block_max(float v)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
#define RT_FG rt_cuda_g.cur
#endif
#endif
