/* cuda_internal.h: what the files of the CUDA backend of libburstrt (burstrt_cuda)
 * share. The backend implements the same burstrt.h API as the CPU backend, so a
 * generated program compiles unchanged against either library; tensors' data point to
 * device memory here. The shared code (options, watchdog, steps, pools and tensors,
 * trace, data, checkpoints, optimizer loops, RNG, rank sets, argument checks) is the
 * same objects as in the CPU library; it reaches this backend through the hooks of
 * device.h, defined in device.c and comm_nccl.c, over the context of context.c, which
 * every file here uses and which calls none of them (comm_nccl.c and dnn.c register
 * hooks with it). Only runtime/cuda/ includes CUDA headers; .c files here are host C,
 * .cu files hold the kernels and expose C launchers. Sections name the defining file. */
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
#include "own.h"

/* ---- context.c ----------------------------------------------------------------- */

typedef struct {
    int device;                  /* CUDA device ordinal this rank uses */
    cudaStream_t fg, bg;         /* highest-priority foreground, lowest-priority background */
    cudaStream_t cur;            /* where work goes now: fg, or bg after rt_use_background_stream */
    int64_t step;                /* the step of the current iteration (rt_step_begin) */
    int64_t *d_step;             /* device copy of step: graphs read it (dropout keys) */
    cublasHandle_t blas_side[2]; /* per side (rt_cuda_side), each bound to its stream */
    void *blas_workspace[2];     /* cuBLAS's workspaces, ours so graph capture never allocates */
    bool ready;                  /* rt_cuda_ensure ran */
    bool graphs_exist;           /* device.c captured a graph: freed memory is retired */
} rt_cuda_state;
extern rt_cuda_state rt_cuda_g;

/* Which side's handles, workspaces and scratch buffers the work issued now uses: 0 the
 * foreground's, 1 the background's. Background slices run on the low-priority stream
 * beside foreground kernels still in flight (device.c), so the two sides share none. */
static inline int rt_cuda_side(void)
{
    return rt_cuda_g.cur == rt_cuda_g.bg;
}
/* The cuBLAS handle for work issued now. */
static inline cublasHandle_t rt_cuda_blas(void)
{
    return rt_cuda_g.blas_side[rt_cuda_side()];
}

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
enum {
    RT_SCRATCH_A,
    RT_SCRATCH_B,
    RT_SCRATCH_C,
    RT_SCRATCH_RED,
    RT_SCRATCH_D,    /* conv.cu: the permuted output gradient of a weight gradient */
    RT_SCRATCH_DNN,  /* cuDNN's workspaces (dnn.c) */
    RT_SCRATCH_DNN2, /* dnn.c's temporaries (a max-pool output, unwanted gradients) */
    RT_SCRATCH_W16,  /* dnn.c: a weight's 16-bit copy (16-bit activations, act.cuh) */
    RT_SCRATCH_DW16, /* dnn.c: a weight gradient in 16 bits, before it is added to the f32 one */
    RT_SCRATCH_COUNT
};
void *rt_cuda_scratch(int slot, size_t bytes, const char *op);
/* Pinned host staging buffer of at least `bytes` (the loss read back per row). */
void *rt_cuda_host_staging(size_t bytes, const char *op);

/* Frees device memory (the device's free hook): at once, or at the release of the
 * context once a graph exists, since a graph may still reference it. */
void rt_cuda_release(void *p);
/* Frees the scratch and staging buffers, runs the finalize hooks, destroys the handles
 * and streams (device.c's finalize, after its graphs). */
void rt_cuda_release_context(void);
/* Hooks of the files above the context: poll(op) runs while rt_cuda_sync waits (NCCL's
 * asynchronous errors), release() at rt_cuda_release_context before the streams go
 * (cuDNN's handles). Registering the same function twice registers it once. */
void rt_cuda_on_wait(void (*poll)(const char *op));
void rt_cuda_on_finalize(void (*release)(void));

/* Number of visible CUDA devices, 0 when none or when the driver is missing (never
 * fatal: the GPU tests use it to skip). */
int rt_cuda_visible_devices(void);

/* nn.cu: fatal error if a kernel met an out-of-range token or label since the start. */
void rt_cuda_check_inputs(const char *op);

/* ---- kernels: launchers in *.cu, extern "C" ------------------------------------ */

/* elementwise.cu: synthetic samples made on the device from data.c's keys (the device's
 * synth hook): fills x (count*per_sample elements of k->in_dtype: f32, i32 tokens or a
 * 16-bit storage dtype; or NULL) and labels (or NULL). */
void rt_cuda_synth(const rt_synth_keys *k, void *x, int32_t *labels);

/* elementwise.cu: the device's scale_check (device.h): x *= s, *found = 1 on inf/nan. */
void rt_cuda_scale_check(float *x, int64_t n, float s, int32_t *found, const char *op);

/* A grid's y size for `blocks` blocks of rows: CUDA allows at most 65535 there, so the
 * kernels that take it stride by gridDim.y. */
static inline unsigned rt_cuda_grid_y(int64_t blocks)
{
    return (unsigned)(blocks < 65535 ? blocks : 65535);
}

/* Grid size for n elements at 256 threads, capped (kernels use grid-stride loops). */
static inline unsigned rt_cuda_blocks(int64_t n)
{
    int64_t b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* dense.cu: row-major batched GEMM, C = alpha*op(A) op(B) + beta*C, C [m,n];
 * A is [m,k] (or [k,m] when ta), B is [k,n] (or [n,k] when tb). Each operand has its
 * dtype (f32, or the 16-bit compute dtype: act.cuh); accumulation is f32. With a
 * 16-bit compute dtype, f32 inputs are rounded to it first; in f32 mode every operand
 * must be f32 (strict f32). */
void rt_cuda_gemm(const char *op, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const void *A, rt_dtype adt, int64_t lda, int64_t strideA, const void *B,
                  rt_dtype bdt, int64_t ldb, int64_t strideB, float beta, void *C, rt_dtype cdt,
                  int64_t ldc, int64_t strideC, int64_t batch);
/* sum over rows: db[n] += sum_i dy[i, n] (bias gradients); dy holds dt. */
void rt_cuda_bias_grad(const char *op, const void *dy, rt_dtype dt, int64_t rows, int64_t n,
                       float *db);
/* y[i, n] += b[n]; y holds dt. */
void rt_cuda_add_bias(const char *op, void *y, rt_dtype dt, const float *b, int64_t rows,
                      int64_t n);

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
