/* conv.cu: the CUDA backend's own conv2d (rt_cuda_own_*, own.h: the reference of the cuDNN
 * path in dnn.c, and what runs where cuDNN is absent or declines a shape), an explicit
 * im2col lowering onto cuBLAS. For a chunk of
 * samples, im2col writes the columns [nb, C*kh*kw, OH*OW]; one strided-batched GEMM per
 * group multiplies the weights [K/g, C/g*kh*kw] (stride 0: shared by all samples) with
 * each sample's columns straight into y [N, K, OH*OW], so no transpose is needed. 1x1
 * convolutions with stride 1 and no padding use x itself as the columns. Backward:
 * dcol = W^T dy (batched over samples) and col2im as a gather (one thread per input
 * element, no atomics, deterministic); dW is one GEMM per chunk (batched over groups),
 * dy^T [K, nb*P] times the columns laid out sample-inside-channel [C*kh*kw, nb*P],
 * so the sum over the chunk's samples and pixels is the GEMM's own inner dimension; db
 * sums dy per channel. The chunk keeps the columns (and in backward the permuted dy)
 * under 64 Mi elements each (256 MiB in f32). Activations (x, y and their gradients) are
 * f32, bf16 or f16 (act.cuh), and so are the columns and the permuted dy; dcol is f32, so
 * col2im sums unrounded products and rounds once. Weights, biases and their gradients
 * are f32. */
#include "act.cuh"

#define COL_ELEMS ((int64_t)64 << 20)

typedef struct {
    int64_t N, C, H, W, K, OH, OW, G, Cg, Kg, ckk;
    int kh, kw, sh, sw, ph, pw, dh, dw;
} conv_dims;

/* The shared argument rules (shapes.c), plus the attributes the kernels read. */
static conv_dims conv_check(const char *op, const rt_tensor *x, const rt_tensor *w,
                            const rt_conv2d_attrs *a, const rt_tensor *y, const char *yname,
                            rt_conv_dims *shared)
{
    rt_conv_dims s = rt_conv2d_check(op, x, w, a, y, yname);
    if (shared)
        *shared = s;
    conv_dims d;
    d.N = s.N, d.C = s.C, d.H = s.H, d.W = s.W, d.K = s.K, d.OH = s.OH, d.OW = s.OW;
    d.G = s.G, d.Cg = s.Cg, d.Kg = s.Kg, d.ckk = s.ckk;
    d.kh = a->kh, d.kw = a->kw, d.sh = a->sh, d.sw = a->sw, d.ph = a->ph, d.pw = a->pw;
    d.dh = a->dh, d.dw = a->dw;
    return d;
}

static bool is_pointwise(const conv_dims &d)
{
    return d.kh == 1 && d.kw == 1 && d.sh == 1 && d.sw == 1 && d.ph == 0 && d.pw == 0;
}

/* Samples per chunk: the columns of a chunk, and in backward (bwd) also its permuted
 * output gradient, stay under COL_ELEMS each. */
static int64_t chunk_samples(const conv_dims &d, bool bwd)
{
    int64_t rows = d.C * d.kh * d.kw;
    if (bwd && d.K > rows)
        rows = d.K;
    int64_t per = rows * d.OH * d.OW;
    int64_t nb = per ? COL_ELEMS / per : d.N;
    return nb < 1 ? 1 : nb > d.N ? d.N : nb;
}

/* The input element that column entry (kernel tap k, j; output pixel oh, ow) of image
 * plane xc [H, W] reads, or 0 in the padding. */
template <typename T>
__device__ __forceinline__ float col_at(const T *xc, const conv_dims &d, int64_t k, int64_t j,
                                        int64_t oh, int64_t ow)
{
    int64_t h = oh * d.sh - d.ph + k * d.dh, w = ow * d.sw - d.pw + j * d.dw;
    return h >= 0 && h < d.H && w >= 0 && w < d.W ? rt_ld(xc + h * d.W + w) : 0.0f;
}

/* col [nb, C, kh, kw, OH, OW] from x [nb, C, H, W]. */
template <typename T> __global__ void im2col_k(const T *x, T *col, conv_dims d, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t ow = i % d.OW, r = i / d.OW;
        int64_t oh = r % d.OH;
        r /= d.OH;
        int64_t j = r % d.kw;
        r /= d.kw;
        int64_t k = r % d.kh;
        r /= d.kh; /* r = sample * C + c */
        rt_st(col + i, col_at(x + r * d.H * d.W, d, k, j, oh, ow));
    }
}

/* The same columns laid out [C, kh, kw, nb, OH, OW]: each row holds one (c, k, j) for
 * every sample of the chunk, the weight gradient's inner dimension. */
template <typename T>
__global__ void im2col_t_k(const T *x, T *col, conv_dims d, int64_t nb, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t ow = i % d.OW, r = i / d.OW;
        int64_t oh = r % d.OH;
        r /= d.OH;
        int64_t s = r % nb;
        r /= nb;
        int64_t j = r % d.kw;
        r /= d.kw;
        int64_t k = r % d.kh;
        const int64_t c = r / d.kh;
        rt_st(col + i, col_at(x + (s * d.C + c) * d.H * d.W, d, k, j, oh, ow));
    }
}

/* dyt [K, nb, P] from dy [nb, K, P] (a copy: the same type both sides). */
template <typename T>
__global__ void dy_t_k(const T *dy, T *dyt, int64_t nb, int64_t K, int64_t P, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t p = i % P, r = i / P;
        int64_t s = r % nb, k = r / nb;
        dyt[i] = dy[(s * K + k) * P + p];
    }
}

/* dx [nb, C, H, W] = sum of the (f32) dcol entries that read each input element, rounded
 * once to dx's type. */
template <typename T> __global__ void col2im_k(const float *dcol, T *dx, conv_dims d, int64_t n)
{
    RT_FOR(i, n)
    {
        int64_t w = i % d.W, r = i / d.W;
        int64_t h = r % d.H;
        r /= d.H; /* r = sample * C + c */
        float s = 0.0f;
        for (int k = 0; k < d.kh; k++) {
            int64_t th = h + d.ph - k * d.dh;
            if (th < 0 || th % d.sh)
                continue;
            int64_t oh = th / d.sh;
            if (oh >= d.OH)
                continue;
            for (int j = 0; j < d.kw; j++) {
                int64_t tw = w + d.pw - j * d.dw;
                if (tw < 0 || tw % d.sw)
                    continue;
                int64_t ow = tw / d.sw;
                if (ow >= d.OW)
                    continue;
                s += dcol[(((r * d.kh + k) * d.kw + j) * d.OH + oh) * d.OW + ow];
            }
        }
        rt_st(dx + i, s);
    }
}

/* db[k] += sum over samples and pixels of dy[n, k, :]: one block per channel. */
template <typename T>
__global__ void conv_bias_grad_k(const T *dy, int64_t N, int64_t K, int64_t P, float *db)
{
    const int64_t k = blockIdx.x;
    float s = 0.0f;
    for (int64_t n = 0; n < N; n++)
        for (int64_t p = threadIdx.x; p < P; p += blockDim.x)
            s += rt_ld(dy + (n * K + k) * P + p);
    s = rt_block_sum(s);
    if (threadIdx.x == 0)
        db[k] += s;
}

/* y[n, k, p] += b[k] */
template <typename T>
__global__ void conv_add_bias_k(T *y, const float *b, int64_t K, int64_t P, int64_t n)
{
    RT_FOR(i, n) rt_st(y + i, rt_ld(y + i) + b[(i / P) % K]);
}

/* The columns of samples [n0, n0+nb), in x's type: x itself for pointwise convolutions. */
template <typename T>
static const T *columns(const char *op, const conv_dims &d, const T *x, int64_t n0, int64_t nb)
{
    const T *xs = x + n0 * d.C * d.H * d.W;
    if (is_pointwise(d))
        return xs;
    const int64_t n = nb * d.C * d.kh * d.kw * d.OH * d.OW;
    T *col = (T *)rt_cuda_scratch(RT_SCRATCH_C, (size_t)n * sizeof(T), op);
    im2col_k<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>(xs, col, d, n);
    rt_cuda_launched(op);
    return col;
}

/* Forward without the bias, activations of type T (dtype dt); w f32. */
template <typename T>
static void conv_fwd(const char *op, const conv_dims &d, rt_dtype dt, const T *x, const float *w,
                     T *y)
{
    const int64_t P = d.OH * d.OW, nbmax = chunk_samples(d, false);
    for (int64_t n0 = 0; n0 < d.N; n0 += nbmax) {
        const int64_t nb = d.N - n0 < nbmax ? d.N - n0 : nbmax;
        const T *col = columns(op, d, x, n0, nb);
        for (int64_t g = 0; g < d.G; g++)
            rt_cuda_gemm(op, false, false, d.Kg, P, d.ckk, 1.0f, w + g * d.Kg * d.ckk, RT_F32,
                         d.ckk, 0, col + g * d.ckk * P, dt, P, d.C * d.kh * d.kw * P, 0.0f,
                         y + (n0 * d.K + g * d.Kg) * P, dt, P, d.K * P, nb);
    }
}

extern "C" void rt_cuda_conv_add_bias(rt_tensor *y, const rt_tensor *b, const char *op)
{
    const int64_t K = y->shape[1], P = y->shape[2] * y->shape[3];
    if (y->numel == 0)
        return;
    RT_ACT_DISPATCH(y->dtype, T,
                    conv_add_bias_k<<<rt_cuda_blocks(y->numel), 256, 0, RT_FG>>>(
                        rt_act<T>(y), rt_f32(b), K, P, y->numel));
    rt_cuda_launched(op);
}

extern "C" void rt_cuda_conv_bias_grad(const rt_tensor *dy, rt_tensor *db, const char *op)
{
    const int64_t N = dy->shape[0], K = dy->shape[1], P = dy->shape[2] * dy->shape[3];
    if (K == 0)
        return;
    RT_ACT_DISPATCH(
        dy->dtype, T,
        conv_bias_grad_k<<<(unsigned)K, 256, 0, RT_FG>>>(rt_act<T>(dy), N, K, P, rt_f32(db)));
    rt_cuda_launched(op);
}

extern "C" void rt_cuda_own_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w,
                                       const rt_tensor *b, const rt_conv2d_attrs *a, rt_tensor *y)
{
    (void)pool;
    const char *op = "conv2d_fwd";
    conv_dims d = conv_check(op, x, w, a, y, "output", NULL);
    if (b)
        rt_check_f32(b, d.K, op, "bias");
    RT_ACT_DISPATCH(x->dtype, T, conv_fwd(op, d, x->dtype, rt_act<T>(x), rt_f32(w), rt_act<T>(y)));
    if (b)
        rt_cuda_conv_add_bias(y, b, op);
}

/* Backward but for the bias, activations of type T (dtype dt); w and dw f32. */
template <typename T>
static void conv_bwd(const char *op, const conv_dims &d, rt_dtype dt, const T *x, const float *w,
                     const T *dy, T *dx, float *dw)
{
    const int64_t P = d.OH * d.OW, nbmax = chunk_samples(d, true);
    const int64_t colstride = d.C * d.kh * d.kw * P;
    for (int64_t n0 = 0; n0 < d.N; n0 += nbmax) {
        const int64_t nb = d.N - n0 < nbmax ? d.N - n0 : nbmax;
        const T *dys = dy + n0 * d.K * P;
        if (dw && P) {
            /* dW_g [Kg, ckk] += dyt_g [Kg, nb*P] colt_g [ckk, nb*P]^T, every group in one
             * strided-batched GEMM. */
            const int64_t ncol = nb * colstride, ndy = nb * d.K * P, inner = nb * P;
            T *colt = (T *)rt_cuda_scratch(RT_SCRATCH_C, (size_t)ncol * sizeof(T), op);
            T *dyt = (T *)rt_cuda_scratch(RT_SCRATCH_D, (size_t)ndy * sizeof(T), op);
            im2col_t_k<<<rt_cuda_blocks(ncol), 256, 0, RT_FG>>>(x + n0 * d.C * d.H * d.W, colt, d,
                                                                nb, ncol);
            rt_cuda_launched(op);
            dy_t_k<<<rt_cuda_blocks(ndy), 256, 0, RT_FG>>>(dys, dyt, nb, d.K, P, ndy);
            rt_cuda_launched(op);
            rt_cuda_gemm(op, false, true, d.Kg, d.ckk, inner, 1.0f, dyt, dt, inner, d.Kg * inner,
                         colt, dt, inner, d.ckk * inner, 1.0f, dw, RT_F32, d.ckk, d.Kg * d.ckk,
                         d.G);
        }
        if (dx) {
            /* Pointwise: dcol is dx itself. Otherwise dcol (f32) reuses the column buffer
             * (dW above has consumed it; the stream orders the two). */
            T *dxs = dx + n0 * d.C * d.H * d.W;
            const bool pointwise = is_pointwise(d);
            void *dcol = pointwise ? (void *)dxs
                                   : rt_cuda_scratch(RT_SCRATCH_C,
                                                     (size_t)(nb * colstride) * sizeof(float), op);
            const rt_dtype dcdt = pointwise ? dt : RT_F32;
            const size_t dcsize = rt_dtype_size(dcdt);
            for (int64_t g = 0; g < d.G; g++)
                rt_cuda_gemm(op, true, false, d.ckk, P, d.Kg, 1.0f, w + g * d.Kg * d.ckk, RT_F32,
                             d.ckk, 0, dys + g * d.Kg * P, dt, P, d.K * P, 0.0f,
                             (char *)dcol + (size_t)(g * d.ckk * P) * dcsize, dcdt, P, colstride,
                             nb);
            if (!pointwise) {
                const int64_t n = nb * d.C * d.H * d.W;
                col2im_k<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>((const float *)dcol, dxs, d, n);
                rt_cuda_launched(op);
            }
        }
    }
}

extern "C" void rt_cuda_own_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w,
                                       const rt_tensor *dy, const rt_conv2d_attrs *a, rt_tensor *dx,
                                       rt_tensor *dw, rt_tensor *db)
{
    (void)pool;
    const char *op = "conv2d_bwd";
    rt_conv_dims sd;
    conv_dims d = conv_check(op, x, w, a, dy, "output gradient", &sd);
    rt_conv2d_bwd_check(op, x, w, &sd, dx, dw, db);
    RT_ACT_DISPATCH(x->dtype, T,
                    conv_bwd(op, d, x->dtype, rt_act<T>(x), rt_f32(w), rt_act<T>(dy),
                             dx ? rt_act<T>(dx) : (T *)NULL, dw ? rt_f32(dw) : NULL));
    if (db)
        rt_cuda_conv_bias_grad(dy, db, op);
}
