/* nn.cu: the remaining layer kernels of the CUDA backend: max/average/global pooling,
 * batchnorm (max/average pooling and batchnorm as rt_cuda_own_*, own.h: the reference of
 * the cuDNN paths in dnn.c, and what runs where cuDNN is absent or declines; SyncBN over
 * several ranks always runs here) (training mode, statistics over this shard's N,H,W or, SyncBN, over the
 * layer's rank set; running statistics as PyTorch), layernorm over the last dimension, token + positional embedding, the
 * cross-entropy loss (divided by the GLOBAL row count, as the CPU backend) and the
 * argmax hit count. Activations and their gradients are f32, bf16 or f16 (act.cuh);
 * parameters, their gradients and statistics are f32. Reductions run one block per
 * channel or row, with the two-pass mean/variance of the CPU backend; backward passes
 * whose outputs overlap (pooling windows, embedding rows) accumulate with f32 atomics,
 * except the 16-bit pooling gradients: there each input pixel gathers, in f32, from the
 * windows that cover it (a 16-bit atomic add would round at every add). Tokens and
 * labels live on the device, so out-of-range values are caught by the kernels: they
 * record the first bad value in a device flag that the host checks when it next waits
 * for the device (cross entropy's loss, the end of a step) and reports as a fatal error. */
#include "act.cuh"

/* ---- device-side input errors ---------------------------------------------------------- */

struct bad_input {
    int kind; /* 0 none, 1 token, 2 label */
    int value;
    long long where, limit;
};
__device__ bad_input dev_bad;

__device__ void report_bad(int kind, int value, int64_t where, int64_t limit)
{
    if (atomicCAS(&dev_bad.kind, 0, kind) == 0) {
        dev_bad.value = value;
        dev_bad.where = where;
        dev_bad.limit = limit;
    }
}

extern "C" void rt_cuda_check_inputs(const char *op)
{
    if (!rt_cuda_g.ready)
        return;
    bad_input b;
    RT_CUDA(cudaMemcpyFromSymbol(&b, dev_bad, sizeof b), op);
    if (b.kind == 1)
        rt_fatal("embedding", "token %d at position %lld outside the vocabulary of %lld", b.value,
                 b.where, b.limit);
    if (b.kind == 2)
        rt_fatal("cross_entropy", "label %d of row %lld outside 0..%lld", b.value, b.where,
                 b.limit - 1);
}

#define LAUNCH(op, kernel, blocks, threads, ...)                    \
    do {                                                            \
        if ((blocks) > 0) {                                         \
            kernel<<<(blocks), (threads), 0, RT_FG>>>(__VA_ARGS__); \
            rt_cuda_launched(op);                                   \
        }                                                           \
    } while (0)

/* ---- pooling ------------------------------------------------------------------------------ */

typedef struct {
    int64_t N, C, H, W, OH, OW;
    int kh, kw, sh, sw, ph, pw, exclude_pad;
} pool_dims;

/* The shared argument rules (shapes.c), plus the attributes the kernels read. */
static pool_dims pool_check(const char *op, const rt_tensor *x, const rt_pool2d_attrs *a,
                            const rt_tensor *y, const char *yname)
{
    rt_pool_dims s = rt_pool2d_check(op, x, a, y, yname);
    pool_dims d = {s.N,   s.C,   s.H,   s.W,   s.OH,  s.OW,          a->kh,
                   a->kw, a->sh, a->sw, a->ph, a->pw, a->exclude_pad};
    return d;
}

/* Index in the plane of the window's maximum (first maximum, NaN wins, as PyTorch),
 * or -1 for a window entirely in the padding. */
template <typename T>
__device__ int64_t window_argmax(const T *plane, const pool_dims &d, int64_t oh, int64_t ow)
{
    int64_t h0 = oh * d.sh - d.ph, w0 = ow * d.sw - d.pw;
    int64_t hs = h0 < 0 ? 0 : h0, he = h0 + d.kh < d.H ? h0 + d.kh : d.H;
    int64_t ws = w0 < 0 ? 0 : w0, we = w0 + d.kw < d.W ? w0 + d.kw : d.W;
    if (hs >= he || ws >= we)
        return -1;
    int64_t best = hs * d.W + ws;
    float mx = rt_ld(plane + best);
    for (int64_t h = hs; h < he; h++)
        for (int64_t w = ws; w < we; w++) {
            float v = rt_ld(plane + h * d.W + w);
            if (v > mx || v != v) {
                mx = v;
                best = h * d.W + w;
            }
        }
    return best;
}

/* The average's divisor, as PyTorch: the window clipped to the padded image
 * (count_include_pad) or the real pixels (exclude_pad). Also returns the clipped
 * window [hs,he) x [ws,we). */
__device__ float avg_window(const pool_dims &d, int64_t oh, int64_t ow, int64_t *hs, int64_t *he,
                            int64_t *ws, int64_t *we)
{
    int64_t h0 = oh * d.sh - d.ph, w0 = ow * d.sw - d.pw;
    *hs = h0 < 0 ? 0 : h0;
    *he = h0 + d.kh < d.H ? h0 + d.kh : d.H;
    *ws = w0 < 0 ? 0 : w0;
    *we = w0 + d.kw < d.W ? w0 + d.kw : d.W;
    if (d.exclude_pad)
        return (float)((*he - *hs) * (*we - *ws));
    int64_t hp = h0 + d.kh < d.H + d.ph ? h0 + d.kh : d.H + d.ph;
    int64_t wp = w0 + d.kw < d.W + d.pw ? w0 + d.kw : d.W + d.pw;
    return (float)((hp - h0) * (wp - w0));
}

/* The output rows (or columns) [*lo, *hi] whose windows cover input row (column) h:
 * those with o*s - p <= h < o*s - p + k. Empty when *lo > *hi. */
__device__ void covering(int64_t h, int64_t k, int64_t s, int64_t p, int64_t out, int64_t *lo,
                         int64_t *hi)
{
    int64_t a = h + p - k + 1, b = h + p;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = b / s < out - 1 ? b / s : out - 1;
}

template <typename T> __global__ void maxpool_fwd_k(const T *x, T *y, pool_dims d, int64_t n)
{
    RT_FOR(o, n)
    {
        int64_t ow = o % d.OW, oh = (o / d.OW) % d.OH, nc = o / (d.OW * d.OH);
        const T *plane = x + nc * d.H * d.W;
        int64_t b = window_argmax(plane, d, oh, ow);
        rt_st(y + o, b < 0 ? -INFINITY : rt_ld(plane + b));
    }
}

/* f32: each window adds its gradient to its maximum's pixel (dx zeroed first). */
__global__ void maxpool_bwd_k(const float *x, const float *dy, float *dx, pool_dims d, int64_t n)
{
    RT_FOR(o, n)
    {
        int64_t ow = o % d.OW, oh = (o / d.OW) % d.OH, nc = o / (d.OW * d.OH);
        int64_t b = window_argmax(x + nc * d.H * d.W, d, oh, ow);
        if (b >= 0)
            atomicAdd(dx + nc * d.H * d.W + b, dy[o]);
    }
}

/* 16 bits: each input pixel i (of n) sums, in f32, the gradients of the windows that
 * cover it and whose maximum it is, and is stored rounded once. */
template <typename T>
__global__ void maxpool_bwd_gather_k(const T *x, const T *dy, T *dx, pool_dims d, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t w = i % d.W, h = (i / d.W) % d.H, nc = i / (d.W * d.H);
        const T *plane = x + nc * d.H * d.W, *g = dy + nc * d.OH * d.OW;
        int64_t oh0, oh1, ow0, ow1;
        covering(h, d.kh, d.sh, d.ph, d.OH, &oh0, &oh1);
        covering(w, d.kw, d.sw, d.pw, d.OW, &ow0, &ow1);
        float s = 0.0f;
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++)
                if (window_argmax(plane, d, oh, ow) == h * d.W + w)
                    s += rt_ld(g + oh * d.OW + ow);
        rt_st(dx + i, s);
    }
}

template <typename T> __global__ void avgpool_fwd_k(const T *x, T *y, pool_dims d, int64_t n)
{
    RT_FOR(o, n)
    {
        int64_t ow = o % d.OW, oh = (o / d.OW) % d.OH, nc = o / (d.OW * d.OH);
        const T *plane = x + nc * d.H * d.W;
        int64_t hs, he, ws, we;
        float div = avg_window(d, oh, ow, &hs, &he, &ws, &we);
        float s = 0.0f;
        for (int64_t h = hs; h < he; h++)
            for (int64_t w = ws; w < we; w++)
                s += rt_ld(plane + h * d.W + w);
        rt_st(y + o, s / div);
    }
}

/* f32: each window spreads its share over its pixels (dx zeroed first). */
__global__ void avgpool_bwd_k(const float *dy, float *dx, pool_dims d, int64_t n)
{
    RT_FOR(o, n)
    {
        int64_t ow = o % d.OW, oh = (o / d.OW) % d.OH, nc = o / (d.OW * d.OH);
        float *plane = dx + nc * d.H * d.W;
        int64_t hs, he, ws, we;
        float g = dy[o] / avg_window(d, oh, ow, &hs, &he, &ws, &we);
        for (int64_t h = hs; h < he; h++)
            for (int64_t w = ws; w < we; w++)
                atomicAdd(plane + h * d.W + w, g);
    }
}

/* 16 bits: each input pixel i (of n) sums, in f32, the shares of the windows that
 * cover it, and is stored rounded once. */
template <typename T>
__global__ void avgpool_bwd_gather_k(const T *dy, T *dx, pool_dims d, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t w = i % d.W, h = (i / d.W) % d.H, nc = i / (d.W * d.H);
        const T *g = dy + nc * d.OH * d.OW;
        int64_t oh0, oh1, ow0, ow1, hs, he, ws, we;
        covering(h, d.kh, d.sh, d.ph, d.OH, &oh0, &oh1);
        covering(w, d.kw, d.sw, d.pw, d.OW, &ow0, &ow1);
        float s = 0.0f;
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++)
                s += rt_ld(g + oh * d.OW + ow) / avg_window(d, oh, ow, &hs, &he, &ws, &we);
        rt_st(dx + i, s);
    }
}

extern "C" void rt_cuda_own_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a,
                                          rt_tensor *y)
{
    pool_dims d = pool_check("maxpool2d_fwd", x, a, y, "output");
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH("maxpool2d_fwd", maxpool_fwd_k<T>, rt_cuda_blocks(y->numel), 256,
                           rt_act<T>(x), rt_act<T>(y), d, y->numel));
}

extern "C" void rt_cuda_own_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy,
                                          const rt_pool2d_attrs *a, rt_tensor *dx)
{
    pool_dims d = pool_check("maxpool2d_bwd", x, a, dy, "output gradient");
    rt_check_act(dx, x->numel, "maxpool2d_bwd", "input gradient");
    if (x->dtype == RT_F32) {
        rt_tensor_zero(dx);
        LAUNCH("maxpool2d_bwd", maxpool_bwd_k, rt_cuda_blocks(dy->numel), 256, rt_f32(x),
               rt_f32(dy), rt_f32(dx), d, dy->numel);
        return;
    }
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH("maxpool2d_bwd", maxpool_bwd_gather_k<T>, rt_cuda_blocks(dx->numel), 256,
                           rt_act<T>(x), rt_act<T>(dy), rt_act<T>(dx), d, dx->numel));
}

extern "C" void rt_cuda_own_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a,
                                          rt_tensor *y)
{
    pool_dims d = pool_check("avgpool2d_fwd", x, a, y, "output");
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH("avgpool2d_fwd", avgpool_fwd_k<T>, rt_cuda_blocks(y->numel), 256,
                           rt_act<T>(x), rt_act<T>(y), d, y->numel));
}

extern "C" void rt_cuda_own_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a,
                                          rt_tensor *dx)
{
    pool_dims d = pool_check("avgpool2d_bwd", dx, a, dy, "output gradient");
    if (dx->dtype == RT_F32) {
        rt_tensor_zero(dx);
        LAUNCH("avgpool2d_bwd", avgpool_bwd_k, rt_cuda_blocks(dy->numel), 256, rt_f32(dy),
               rt_f32(dx), d, dy->numel);
        return;
    }
    RT_ACT_DISPATCH(dx->dtype, T,
                    LAUNCH("avgpool2d_bwd", avgpool_bwd_gather_k<T>, rt_cuda_blocks(dx->numel), 256,
                           rt_act<T>(dy), rt_act<T>(dx), d, dx->numel));
}

template <typename T> __global__ void gap_fwd_k(const T *x, T *y, int64_t HW)
{
    const T *p = x + blockIdx.x * HW;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < HW; i += blockDim.x)
        s += rt_ld(p + i);
    s = rt_block_sum(s);
    if (threadIdx.x == 0)
        rt_st(y + blockIdx.x, s / (float)HW);
}

template <typename T> __global__ void gap_bwd_k(const T *dy, T *dx, int64_t HW, int64_t n)
{
    RT_FOR(i, n) rt_st(dx + i, rt_ld(dy + i / HW) / (float)HW);
}

extern "C" void rt_global_avgpool_fwd(const rt_tensor *x, rt_tensor *y)
{
    const char *op = "global_avgpool_fwd";
    rt_global_pool_check(op, x, "input", y, "output");
    const int64_t HW = x->shape[2] * x->shape[3];
    RT_ACT_DISPATCH(
        x->dtype, T,
        LAUNCH(op, gap_fwd_k<T>, (unsigned)y->numel, 256, rt_act<T>(x), rt_act<T>(y), HW));
}

extern "C" void rt_global_avgpool_bwd(const rt_tensor *dy, rt_tensor *dx)
{
    const char *op = "global_avgpool_bwd";
    rt_global_pool_check(op, dx, "input gradient", dy, "output gradient");
    const int64_t HW = dx->shape[2] * dx->shape[3];
    RT_ACT_DISPATCH(dx->dtype, T,
                    LAUNCH(op, gap_bwd_k<T>, rt_cuda_blocks(dx->numel), 256, rt_act<T>(dy),
                           rt_act<T>(dx), HW, dx->numel));
}

/* ---- batchnorm --------------------------------------------------------------------------- */

/* As the CPU backend: per-channel sums in double over this shard, all-reduced over the
 * layer's rank set for SyncBN (on the device, ncclFloat64), so a plan on any ranks
 * computes what one rank computes. One block per channel c over the N planes of HW. */

__device__ __forceinline__ double block_sum_d(double v)
{
    __shared__ double part_d[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        part_d[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? part_d[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* sums[c] = sum of x over channel c; sums[C] = the element count (block 0). */
template <typename T>
__global__ void bn_sum_k(const T *x, int64_t N, int64_t C, int64_t HW, double *sums)
{
    const int64_t c = blockIdx.x;
    double s = 0.0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = threadIdx.x; i < HW; i += blockDim.x)
            s += rt_ld(x + (n * C + c) * HW + i);
    s = block_sum_d(s);
    if (threadIdx.x == 0) {
        sums[c] = s;
        if (c == 0)
            sums[C] = (double)(N * HW);
    }
}

/* sq[c] = sum of (x - mean)^2, mean = sums[c] / sums[C] (the set's mean). */
template <typename T>
__global__ void bn_sq_k(const T *x, int64_t N, int64_t C, int64_t HW, const double *sums,
                        double *sq)
{
    const int64_t c = blockIdx.x;
    const double mu = sums[c] / sums[C];
    double s = 0.0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = threadIdx.x; i < HW; i += blockDim.x) {
            double d = rt_ld(x + (n * C + c) * HW + i) - mu;
            s += d * d;
        }
    s = block_sum_d(s);
    if (threadIdx.x == 0)
        sq[c] = s;
}

__global__ void bn_finish_k(const double *sums, const double *sq, int64_t C, float eps,
                            float momentum, float *mean, float *invstd, float *rmean, float *rvar)
{
    RT_FOR(c, C)
    {
        const double count = sums[C], mu = sums[c] / count, var = sq[c] / count;
        mean[c] = (float)mu;
        invstd[c] = (float)(1.0 / sqrt(var + eps));
        if (rmean)
            rmean[c] = (1.0f - momentum) * rmean[c] + momentum * (float)mu;
        if (rvar) {
            double unbiased = count > 1 ? sq[c] / (count - 1) : var;
            rvar[c] = (1.0f - momentum) * rvar[c] + momentum * (float)unbiased;
        }
    }
}

template <typename T>
__global__ void bn_apply_k(const T *x, const float *mean, const float *invstd, const float *gamma,
                           const float *beta, T *y, int64_t C, int64_t HW, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t c = (i / HW) % C;
        const float sc = gamma[c] * invstd[c], sh = beta[c] - mean[c] * sc;
        rt_st(y + i, rt_ld(x + i) * sc + sh);
    }
}

/* Per channel: red[c] = sum dy, red[C + c] = sum dy * xhat, red[2C] = the count;
 * this shard's parts go into dgamma and dbeta (the gradient all-reduce adds the rest). */
template <typename T>
__global__ void bn_bwd_reduce_k(const T *x, const T *dy, const float *mean, const float *invstd,
                                int64_t N, int64_t C, int64_t HW, double *red, float *dgamma,
                                float *dbeta)
{
    const int64_t c = blockIdx.x;
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = threadIdx.x; i < HW; i += blockDim.x) {
            int64_t k = (n * C + c) * HW + i;
            const float g = rt_ld(dy + k);
            sdy += g;
            sdyx += g * (rt_ld(x + k) - mean[c]);
        }
    sdy = block_sum_d(sdy);
    sdyx = block_sum_d(sdyx) * invstd[c];
    if (threadIdx.x == 0) {
        red[c] = sdy;
        red[C + c] = sdyx;
        if (c == 0)
            red[2 * C] = (double)(N * HW);
        if (dgamma)
            dgamma[c] += (float)sdyx;
        if (dbeta)
            dbeta[c] += (float)sdy;
    }
}

template <typename T>
__global__ void bn_bwd_dx_k(const T *x, const T *dy, const float *mean, const float *invstd,
                            const float *gamma, const double *red, T *dx, int64_t C, int64_t HW,
                            int64_t n)
{
    const double count = red[2 * C];
    RT_FOR(i, n)
    {
        int64_t c = (i / HW) % C;
        const float mdy = (float)(red[c] / count), mdyx = (float)(red[C + c] / count);
        float xhat = (rt_ld(x + i) - mean[c]) * invstd[c];
        rt_st(dx + i, gamma[c] * invstd[c] * (rt_ld(dy + i) - mdy - xhat * mdyx));
    }
}

static void batchnorm_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                          const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                          float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    const char *op = "batchnorm2d_fwd";
    const int64_t C =
        rt_batchnorm_fwd_check(op, comm, x, gamma, beta, running_mean, running_var, saved, y);
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
    if (C == 0)
        return;
    double *sums = (double *)rt_cuda_scratch(RT_SCRATCH_RED, (size_t)(2 * C + 1) * 8, op);
    double *sq = sums + C + 1;
    float *mean = rt_f32(saved), *invstd = mean + C;
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, bn_sum_k<T>, (unsigned)C, 256, rt_act<T>(x), N, C, HW, sums));
    rt_allreduce_f64(comm, sums, C + 1, op);
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, bn_sq_k<T>, (unsigned)C, 256, rt_act<T>(x), N, C, HW, sums, sq));
    rt_allreduce_f64(comm, sq, C, op);
    LAUNCH(op, bn_finish_k, rt_cuda_blocks(C), 256, sums, sq, C, eps, momentum, mean, invstd,
           running_mean ? rt_f32(running_mean) : NULL, running_var ? rt_f32(running_var) : NULL);
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, bn_apply_k<T>, rt_cuda_blocks(x->numel), 256, rt_act<T>(x), mean,
                           invstd, rt_f32(gamma), rt_f32(beta), rt_act<T>(y), C, HW, x->numel));
}

static void batchnorm_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                          const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                          rt_tensor *dgamma, rt_tensor *dbeta)
{
    const char *op = "batchnorm2d_bwd";
    const int64_t C = rt_batchnorm_bwd_check(op, comm, x, gamma, saved, dy, dx, dgamma, dbeta);
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
    if (C == 0)
        return;
    const float *mean = rt_f32(saved), *invstd = mean + C;
    double *red = (double *)rt_cuda_scratch(RT_SCRATCH_RED, (size_t)(2 * C + 1) * 8, op);
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, bn_bwd_reduce_k<T>, (unsigned)C, 256, rt_act<T>(x), rt_act<T>(dy),
                           mean, invstd, N, C, HW, red, dgamma ? rt_f32(dgamma) : NULL,
                           dbeta ? rt_f32(dbeta) : NULL));
    if (dx) {
        rt_allreduce_f64(comm, red, 2 * C + 1, op);
        RT_ACT_DISPATCH(x->dtype, T,
                        LAUNCH(op, bn_bwd_dx_k<T>, rt_cuda_blocks(x->numel), 256, rt_act<T>(x),
                               rt_act<T>(dy), mean, invstd, rt_f32(gamma), red, rt_act<T>(dx), C,
                               HW, x->numel));
    }
}

extern "C" void rt_cuda_own_batchnorm2d_fwd(const rt_tensor *x, const rt_tensor *gamma,
                                            const rt_tensor *beta, rt_tensor *running_mean,
                                            rt_tensor *running_var, float momentum, float eps,
                                            rt_tensor *saved, rt_tensor *y)
{
    batchnorm_fwd(NULL, x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}

extern "C" void rt_cuda_own_batchnorm2d_bwd(const rt_tensor *x, const rt_tensor *gamma,
                                            const rt_tensor *saved, const rt_tensor *dy,
                                            rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta)
{
    batchnorm_bwd(NULL, x, gamma, saved, dy, dx, dgamma, dbeta);
}

extern "C" void rt_cuda_own_batchnorm2d_sync_fwd(const rt_comm *comm, const rt_tensor *x,
                                                 const rt_tensor *gamma, const rt_tensor *beta,
                                                 rt_tensor *running_mean, rt_tensor *running_var,
                                                 float momentum, float eps, rt_tensor *saved,
                                                 rt_tensor *y)
{
    batchnorm_fwd(comm, x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}

extern "C" void rt_cuda_own_batchnorm2d_sync_bwd(const rt_comm *comm, const rt_tensor *x,
                                                 const rt_tensor *gamma, const rt_tensor *saved,
                                                 const rt_tensor *dy, rt_tensor *dx,
                                                 rt_tensor *dgamma, rt_tensor *dbeta)
{
    batchnorm_bwd(comm, x, gamma, saved, dy, dx, dgamma, dbeta);
}

template <typename T>
__global__ void bn_infer_k(const T *x, const float *rm, const float *rv, const float *gamma,
                           const float *beta, float eps, T *y, int64_t C, int64_t HW, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t c = (i / HW) % C;
        rt_st(y + i, (rt_ld(x + i) - rm[c]) * rsqrtf(rv[c] + eps) * gamma[c] + beta[c]);
    }
}

extern "C" void rt_cuda_own_batchnorm2d_infer(const rt_tensor *x, const rt_tensor *gamma,
                                              const rt_tensor *beta, const rt_tensor *running_mean,
                                              const rt_tensor *running_var, float eps, rt_tensor *y)
{
    const char *op = "batchnorm2d_infer";
    const int64_t C =
        rt_batchnorm_fwd_check(op, NULL, x, gamma, beta, running_mean, running_var, NULL, y);
    rt_check(running_mean, RT_F32, -1, op, "running mean");
    rt_check(running_var, RT_F32, -1, op, "running variance");
    const int64_t HW = x->shape[2] * x->shape[3];
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, bn_infer_k<T>, rt_cuda_blocks(x->numel), 256, rt_act<T>(x),
                           rt_f32(running_mean), rt_f32(running_var), rt_f32(gamma), rt_f32(beta),
                           eps, rt_act<T>(y), C, HW, x->numel));
}

/* ---- layernorm --------------------------------------------------------------------------- */

template <typename T>
__global__ void ln_fwd_k(const T *x, const float *g, const float *b, float eps, int64_t D,
                         float *mean, float *rstd, T *y)
{
    const int64_t m = blockIdx.x;
    const T *p = x + m * D;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
        s += rt_ld(p + i);
    const float mu = rt_block_sum(s) / (float)D;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        const float v = rt_ld(p + i);
        ss += (v - mu) * (v - mu);
    }
    const float r = rsqrtf(rt_block_sum(ss) / (float)D + eps);
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
        rt_st(y + m * D + i, (rt_ld(p + i) - mu) * r * g[i] + b[i]);
    if (threadIdx.x == 0) {
        mean[m] = mu;
        rstd[m] = r;
    }
}

template <typename T>
__global__ void ln_bwd_dx_k(const T *x, const float *g, const float *mean, const float *rstd,
                            const T *dy, int64_t D, T *dx)
{
    const int64_t m = blockIdx.x;
    const T *p = x + m * D, *gy = dy + m * D;
    float a = 0.0f, b = 0.0f;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        float xhat = (rt_ld(p + i) - mean[m]) * rstd[m];
        const float gi = rt_ld(gy + i);
        a += gi * g[i];
        b += gi * g[i] * xhat;
    }
    const float ma = rt_block_sum(a) / (float)D, mb = rt_block_sum(b) / (float)D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        float xhat = (rt_ld(p + i) - mean[m]) * rstd[m];
        rt_st(dx + m * D + i, rstd[m] * (rt_ld(gy + i) * g[i] - ma - xhat * mb));
    }
}

/* Block (x: 256 columns, y: LN_ROWS rows, striding by the grid's y): partial column sums
 * of dy*xhat and dy, added atomically into dgamma and dbeta. A thread per column over all
 * rows would leave most of the GPU idle for GPT-2's 8192 rows of 768. */
#define LN_ROWS 128

template <typename T>
__global__ void ln_bwd_params_k(const T *x, const float *mean, const float *rstd, const T *dy,
                                int64_t M, int64_t D, float *dg, float *db)
{
    const int64_t d = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (d >= D)
        return;
    float sg = 0.0f, sb = 0.0f;
    for (int64_t m0 = blockIdx.y * (int64_t)LN_ROWS; m0 < M; m0 += (int64_t)gridDim.y * LN_ROWS) {
        const int64_t m1 = m0 + LN_ROWS < M ? m0 + LN_ROWS : M;
        for (int64_t m = m0; m < m1; m++) {
            float gy = rt_ld(dy + m * D + d);
            sg += gy * (rt_ld(x + m * D + d) - mean[m]) * rstd[m];
            sb += gy;
        }
    }
    if (dg)
        atomicAdd(dg + d, sg);
    if (db)
        atomicAdd(db + d, sb);
}

extern "C" void rt_layernorm_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                                 float eps, rt_tensor *saved, rt_tensor *y)
{
    const char *op = "layernorm_fwd";
    int64_t M, D;
    rt_layernorm_dims(op, x, gamma, saved, &M, &D);
    rt_check_f32(beta, D, op, "beta");
    rt_check_act(y, x->numel, op, "output");
    RT_ACT_DISPATCH(x->dtype, T,
                    LAUNCH(op, ln_fwd_k<T>, (unsigned)M, 256, rt_act<T>(x), rt_f32(gamma),
                           rt_f32(beta), eps, D, rt_f32(saved), rt_f32(saved) + M, rt_act<T>(y)));
}

extern "C" void rt_layernorm_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                                 const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma,
                                 rt_tensor *dbeta)
{
    const char *op = "layernorm_bwd";
    int64_t M, D;
    rt_layernorm_dims(op, x, gamma, saved, &M, &D);
    rt_check_act(dy, x->numel, op, "output gradient");
    rt_norm_grads_check(op, D, dgamma, dbeta);
    if (dx)
        rt_check_act(dx, x->numel, op, "input gradient");
    const float *mean = rt_f32(saved), *rstd = mean + M;
    if (dx) {
        RT_ACT_DISPATCH(x->dtype, T,
                        LAUNCH(op, ln_bwd_dx_k<T>, (unsigned)M, 256, rt_act<T>(x), rt_f32(gamma),
                               mean, rstd, rt_act<T>(dy), D, rt_act<T>(dx)));
    }
    if ((dgamma || dbeta) && M > 0 && D > 0) {
        dim3 grid((unsigned)((D + 255) / 256), rt_cuda_grid_y((M + LN_ROWS - 1) / LN_ROWS));
        RT_ACT_DISPATCH(x->dtype, T,
                        ln_bwd_params_k<T><<<grid, 256, 0, RT_FG>>>(
                            rt_act<T>(x), mean, rstd, rt_act<T>(dy), M, D,
                            dgamma ? rt_f32(dgamma) : NULL, dbeta ? rt_f32(dbeta) : NULL));
        rt_cuda_launched(op);
    }
}

/* ---- embedding --------------------------------------------------------------------------- */

template <typename A>
__global__ void emb_fwd_k(const int32_t *tok, const float *w, const float *pos, A *y, int64_t V,
                          int64_t T, int64_t D, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t r = i / D, k = i - r * D;
        int32_t t = tok[r];
        if (t < 0 || t >= V) {
            report_bad(1, t, r, V);
            rt_st(y + i, 0.0f);
            continue;
        }
        rt_st(y + i, w[(int64_t)t * D + k] + (pos ? pos[(r % T) * D + k] : 0.0f));
    }
}

template <typename A>
__global__ void emb_bwd_k(const int32_t *tok, const A *dy, float *dw, float *dpos, int64_t V,
                          int64_t T, int64_t D, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t r = i / D, k = i - r * D;
        int32_t t = tok[r];
        if (t < 0 || t >= V) {
            report_bad(1, t, r, V);
            continue;
        }
        const float g = rt_ld(dy + i);
        if (dw)
            atomicAdd(dw + (int64_t)t * D + k, g);
        if (dpos)
            atomicAdd(dpos + (r % T) * D + k, g);
    }
}

extern "C" void rt_embedding_fwd(const rt_tensor *tokens, const rt_tensor *w, const rt_tensor *pos,
                                 rt_tensor *y)
{
    int64_t NT, T, D;
    rt_embedding_dims("embedding_fwd", tokens, w, pos, y, &NT, &T, &D);
    RT_ACT_DISPATCH(y->dtype, A,
                    LAUNCH("embedding_fwd", emb_fwd_k<A>, rt_cuda_blocks(NT * D), 256,
                           rt_i32(tokens), rt_f32(w), pos ? rt_f32(pos) : NULL, rt_act<A>(y),
                           w->shape[0], T, D, NT * D));
}

extern "C" void rt_embedding_bwd(const rt_tensor *tokens, const rt_tensor *dy, rt_tensor *dw,
                                 rt_tensor *dpos)
{
    int64_t NT, T, D;
    rt_embedding_dims("embedding_bwd", tokens, dw, dpos, dy, &NT, &T, &D);
    RT_ACT_DISPATCH(dy->dtype, A,
                    LAUNCH("embedding_bwd", emb_bwd_k<A>, rt_cuda_blocks(NT * D), 256,
                           rt_i32(tokens), rt_act<A>(dy), rt_f32(dw), dpos ? rt_f32(dpos) : NULL,
                           dw->shape[0], T, D, NT * D));
}

/* ---- tokens ----------------------------------------------------------------------------- */

/* y [N,rows,D]: the class token in row 0 (cls), x's rows after it, plus the positions. */
template <typename A>
__global__ void tokens_fwd_k(const A *x, const float *tok, const float *pos, A *y, int64_t T,
                             int64_t D, int cls, int64_t n)
{
    const int64_t per = (T + cls) * D;
    RT_FOR(i, n)
    {
        int64_t s = i / per, j = i - s * per, r = j / D, k = j - r * D;
        float v = r < cls ? tok[k] : rt_ld(x + s * T * D + (r - cls) * D + k);
        rt_st(y + i, v + (pos ? pos[j] : 0.0f));
    }
}

template <typename A>
__global__ void tokens_dx_k(const A *dy, A *dx, int64_t T, int64_t D, int cls, int64_t n)
{
    const int64_t per = T * D;
    RT_FOR(i, n)
    {
        int64_t s = i / per, j = i - s * per;
        rt_st(dx + i, rt_ld(dy + s * (per + cls * D) + cls * D + j));
    }
}

/* d[j] += the sum over the N samples of dy's element j of a sample (of per): one thread per j,
 * so the sum is in a fixed order. */
template <typename A>
__global__ void tokens_sum_k(const A *dy, float *d, int64_t N, int64_t per, int64_t n)
{
    RT_FOR(j, n)
    {
        float acc = 0.0f;
        for (int64_t s = 0; s < N; s++)
            acc += rt_ld(dy + s * per + j);
        d[j] += acc;
    }
}

extern "C" void rt_tokens_fwd(const rt_tensor *x, int cls, const rt_tensor *tok,
                              const rt_tensor *pos, rt_tensor *y)
{
    int64_t N, T, D;
    rt_tokens_dims("tokens_fwd", x, cls, tok, pos, y, &N, &T, &D);
    if (cls && !tok)
        rt_fatal("tokens_fwd", "cls without a class token");
    RT_ACT_DISPATCH(y->dtype, A,
                    LAUNCH("tokens_fwd", tokens_fwd_k<A>, rt_cuda_blocks(y->numel), 256,
                           rt_act<A>(x), tok ? rt_f32(tok) : NULL, pos ? rt_f32(pos) : NULL,
                           rt_act<A>(y), T, D, cls, y->numel));
}

extern "C" void rt_tokens_bwd(const rt_tensor *dy, int cls, rt_tensor *dx, rt_tensor *dtok,
                              rt_tensor *dpos)
{
    int64_t N, T, D;
    rt_tokens_dims("tokens_bwd", dx, cls, dtok, dpos, dy, &N, &T, &D);
    const int64_t per = (T + cls) * D;
    RT_ACT_DISPATCH(dy->dtype, A, {
        if (dx)
            LAUNCH("tokens_bwd", tokens_dx_k<A>, rt_cuda_blocks(dx->numel), 256, rt_act<A>(dy),
                   rt_act<A>(dx), T, D, cls, dx->numel);
        if (dtok)
            LAUNCH("tokens_bwd", tokens_sum_k<A>, rt_cuda_blocks(D), 256, rt_act<A>(dy),
                   rt_f32(dtok), N, per, D);
        if (dpos)
            LAUNCH("tokens_bwd", tokens_sum_k<A>, rt_cuda_blocks(per), 256, rt_act<A>(dy),
                   rt_f32(dpos), N, per, per);
    });
}

/* ---- loss ------------------------------------------------------------------------------- */

/* One block per row: loss[m] = log sum exp(z - max) + max - z[label]; with dz != NULL
 * also writes (softmax - onehot) * inv. */
template <typename T>
__global__ void ce_k(const T *z, const int32_t *labels, int64_t C, float inv, float *loss, T *dz)
{
    const int64_t m = blockIdx.x;
    const T *row = z + m * C;
    float mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        mx = fmaxf(mx, rt_ld(row + c));
    mx = rt_block_max(mx);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        s += expf(rt_ld(row + c) - mx);
    s = rt_block_sum(s);
    int32_t lab = labels[m];
    bool ok = lab >= 0 && lab < C;
    if (!ok && threadIdx.x == 0)
        report_bad(2, lab, m, C);
    if (loss && threadIdx.x == 0)
        loss[m] = ok ? logf(s) + mx - rt_ld(row + lab) : 0.0f;
    if (dz) {
        const float is = 1.0f / s;
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            rt_st(dz + m * C + c,
                  (expf(rt_ld(row + c) - mx) * is - (c == lab ? 1.0f : 0.0f)) * inv);
    }
}

extern "C" double rt_cross_entropy_fwd(const rt_tensor *logits, const rt_tensor *labels,
                                       int64_t global_count)
{
    const char *op = "cross_entropy_fwd";
    int64_t M, C;
    rt_cross_entropy_dims(op, logits, labels, global_count, &M, &C);
    if (M == 0)
        return 0.0;
    rt_cuda_not_capturing(op);
    float *loss = (float *)rt_cuda_scratch(RT_SCRATCH_RED, (size_t)M * 4, op);
    RT_ACT_DISPATCH(logits->dtype, T,
                    LAUNCH(op, ce_k<T>, (unsigned)M, 256, rt_act<T>(logits), rt_i32(labels), C,
                           0.0f, loss, (T *)NULL));
    float *h = (float *)rt_cuda_host_staging((size_t)M * 4, op);
    rt_dev.copy(h, loss, (size_t)M * 4, RT_COPY_D2H, op);
    rt_cuda_check_inputs(op);
    double total = 0.0; /* summed on the host in double, in row order, as the CPU */
    for (int64_t m = 0; m < M; m++)
        total += h[m];
    return total / (double)global_count;
}

/* dlogits = (softmax - onehot) / global_count * scale, rounded once to its dtype (a 16-bit
 * gradient scaled after it was stored would have lost what underflowed). */
static void cross_entropy_bwd(const rt_tensor *logits, const rt_tensor *labels,
                              int64_t global_count, float scale, rt_tensor *dlogits)
{
    const char *op = "cross_entropy_bwd";
    int64_t M, C;
    rt_cross_entropy_dims(op, logits, labels, global_count, &M, &C);
    rt_check_act(dlogits, logits->numel, op, "logits gradient");
    RT_ACT_DISPATCH(logits->dtype, T,
                    LAUNCH(op, ce_k<T>, (unsigned)M, 256, rt_act<T>(logits), rt_i32(labels), C,
                           rt_cross_entropy_factor(global_count, scale), NULL, rt_act<T>(dlogits)));
}

extern "C" void rt_cross_entropy_bwd(const rt_tensor *logits, const rt_tensor *labels,
                                     int64_t global_count, rt_tensor *dlogits)
{
    cross_entropy_bwd(logits, labels, global_count, 1.0f, dlogits);
}

extern "C" void rt_cross_entropy_bwd_scaled(const rt_tensor *logits, const rt_tensor *labels,
                                            int64_t global_count, rt_tensor *dlogits)
{
    cross_entropy_bwd(logits, labels, global_count, (float)rt_loss_scale(), dlogits);
}

template <typename T>
__global__ void correct_k(const T *z, const int32_t *labels, int64_t M, int64_t C,
                          unsigned long long *hits)
{
    RT_FOR(m, M)
    {
        const T *row = z + m * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (rt_ld(row + c) > rt_ld(row + best))
                best = c;
        if (best == labels[m])
            atomicAdd(hits, 1ull);
    }
}

extern "C" int64_t rt_correct_count(const rt_tensor *logits, const rt_tensor *labels)
{
    const char *op = "correct_count";
    int64_t M, C;
    rt_correct_count_dims(op, logits, labels, &M, &C);
    rt_cuda_not_capturing(op);
    unsigned long long *d = (unsigned long long *)rt_cuda_scratch(RT_SCRATCH_RED, 8, op);
    RT_CUDA(cudaMemsetAsync(d, 0, 8, RT_FG), op);
    RT_ACT_DISPATCH(logits->dtype, T,
                    LAUNCH(op, correct_k<T>, rt_cuda_blocks(M), 256, rt_act<T>(logits),
                           rt_i32(labels), M, C, d));
    unsigned long long h = 0;
    rt_dev.copy(&h, d, 8, RT_COPY_D2H, op);
    return (int64_t)h;
}
