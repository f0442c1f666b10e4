/* dense.cu: GEMM-shaped work on cuBLAS: the row-major GEMM helper every op uses
 * (conv.cu too), linear, batched matmul and GPT-2 causal self-attention (cuBLAS
 * strided-batched GEMMs over heads plus own causal softmax kernels), with the same
 * saved-tensor layout as the CPU backend (qkv, probabilities, merged heads).
 * Mixed precision: with the compute dtype set to bf16 or f16 (rt_set_compute_dtype or
 * BURSTRT_COMPUTE_DTYPE), GEMM inputs are rounded to that type in scratch buffers and
 * multiplied on tensor cores with f32 accumulation and f32 outputs (cublasGemmEx,
 * CUBLAS_COMPUTE_32F); weights, activations and optimizer state stay f32, so the f32
 * master weights are the stored weights. In f32 mode GEMMs are strict f32 (no TF32),
 * which is what the CPU backend's results are compared against. */
#include "cuda_internal.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits.h>

__global__ void to_bf16_k(const float *x, __nv_bfloat16 *y, int64_t n)
{
    RT_FOR(i, n) y[i] = __float2bfloat16(x[i]);
}
__global__ void to_f16_k(const float *x, __half *y, int64_t n)
{
    RT_FOR(i, n) y[i] = __float2half(x[i]);
}

/* Elements a strided-batched operand spans: `rows` rows of `cols` at leading dimension
 * ld, `batch` times `stride` apart. */
static int64_t span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch)
{
    if (rows == 0 || cols == 0 || batch == 0)
        return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

static const void *lowered(int slot, const float *p, int64_t n, const char *op)
{
    const rt_compute_dtype dt = rt_get_compute_dtype();
    void *buf = rt_cuda_scratch(slot, (size_t)n * 2, op);
    if (dt == RT_COMPUTE_BF16)
        to_bf16_k<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>(p, (__nv_bfloat16 *)buf, n);
    else
        to_f16_k<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>(p, (__half *)buf, n);
    rt_cuda_launched(op);
    return buf;
}

static int as_int(int64_t v, const char *op, const char *what)
{
    if (v < 0 || v > INT_MAX)
        rt_fatal(op, "GEMM %s %lld exceeds cuBLAS's int range", what, (long long)v);
    return (int)v;
}

extern "C" void rt_cuda_gemm(const char *op, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const float *A, int64_t lda, int64_t strideA,
                             const float *B, int64_t ldb, int64_t strideB, float beta, float *C,
                             int64_t ldc, int64_t strideC, int64_t batch)
{
    if (m == 0 || n == 0 || batch == 0)
        return;
    rt_cuda_ensure();
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap operands. */
    const cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int im = as_int(n, op, "n"), in = as_int(m, op, "m"), ik = as_int(k, op, "k");
    const int ilda = as_int(ldb, op, "ldb"), ildb = as_int(lda, op, "lda");
    const int ildc = as_int(ldc, op, "ldc"), ib = as_int(batch, op, "batch");
    cudaDataType_t in_t = CUDA_R_32F;
    const void *pa = B, *pb = A;
    const rt_compute_dtype compute = rt_get_compute_dtype();
    if (compute != RT_COMPUTE_F32 && k > 0) {
        in_t = compute == RT_COMPUTE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
        /* B (row-major) is [k,n] or [n,k] when tb; A is [m,k] or [k,m] when ta. */
        pa = lowered(RT_SCRATCH_A, B, span(tb ? n : k, tb ? k : n, ldb, strideB, batch), op);
        pb = lowered(RT_SCRATCH_B, A, span(ta ? k : m, ta ? m : k, lda, strideA, batch), op);
    }
    RT_CUBLAS(cublasGemmStridedBatchedEx(rt_cuda_blas(), opA, opB, im, in, ik, &alpha, pa, in_t,
                                         ilda, strideB, pb, in_t, ildb, strideA, &beta, C,
                                         CUDA_R_32F, ildc, strideC, ib, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              op);
}

/* ---- bias ---------------------------------------------------------------------------- */

#define BIAS_ROWS 256

/* Block (x: 256 columns, y: BIAS_ROWS rows): partial column sums, added atomically. */
__global__ void bias_grad_k(const float *dy, int64_t rows, int64_t n, float *db)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= n)
        return;
    int64_t r0 = blockIdx.y * (int64_t)BIAS_ROWS,
            r1 = r0 + BIAS_ROWS < rows ? r0 + BIAS_ROWS : rows;
    float s = 0.0f;
    for (int64_t r = r0; r < r1; r++)
        s += dy[r * n + c];
    atomicAdd(db + c, s);
}

__global__ void add_bias_k(float *y, const float *b, int64_t n, int64_t total)
{
    RT_FOR(i, total) y[i] += b[i % n];
}

extern "C" void rt_cuda_bias_grad(const char *op, const float *dy, int64_t rows, int64_t n,
                                  float *db)
{
    if (rows == 0 || n == 0)
        return;
    dim3 grid((unsigned)((n + 255) / 256), (unsigned)((rows + BIAS_ROWS - 1) / BIAS_ROWS));
    bias_grad_k<<<grid, 256, 0, RT_FG>>>(dy, rows, n, db);
    rt_cuda_launched(op);
}

extern "C" void rt_cuda_add_bias(const char *op, float *y, const float *b, int64_t rows, int64_t n)
{
    if (rows * n == 0)
        return;
    add_bias_k<<<rt_cuda_blocks(rows * n), 256, 0, RT_FG>>>(y, b, n, rows * n);
    rt_cuda_launched(op);
}

/* ---- linear ------------------------------------------------------------------------------ */

/* y[M,out] = x[M,in] w[out,in]^T + b */
static void linear(const char *op, const float *x, const float *w, const float *b, int64_t M,
                   int64_t in, int64_t out, float *y)
{
    rt_cuda_gemm(op, false, true, M, out, in, 1.0f, x, in, 0, w, in, 0, 0.0f, y, out, 0, 1);
    if (b)
        rt_cuda_add_bias(op, y, b, M, out);
}

static void linear_bwd(const char *op, const float *x, const float *w, const float *dy, int64_t M,
                       int64_t in, int64_t out, float *dx, float *dw, float *db)
{
    if (dx)
        rt_cuda_gemm(op, false, false, M, in, out, 1.0f, dy, out, 0, w, in, 0, 0.0f, dx, in, 0, 1);
    if (dw)
        rt_cuda_gemm(op, true, false, out, in, M, 1.0f, dy, out, 0, x, in, 0, 1.0f, dw, in, 0, 1);
    if (db)
        rt_cuda_bias_grad(op, dy, M, out, db);
}

extern "C" void rt_linear_fwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                              rt_tensor *y)
{
    const char *op = "linear_fwd";
    int64_t M, in, out;
    rt_linear_fwd_check(op, x, w, b, y, &M, &in, &out);
    linear(op, rt_f32(x), rt_f32(w), b ? rt_f32(b) : NULL, M, in, out, rt_f32(y));
}

extern "C" void rt_linear_bwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                              rt_tensor *dx, rt_tensor *dw, rt_tensor *db)
{
    const char *op = "linear_bwd";
    int64_t M, in, out;
    rt_linear_dims(op, x, w, &M, &in, &out);
    rt_linear_bwd_check(op, x, w, M, out, dy, dx, dw, db);
    linear_bwd(op, rt_f32(x), rt_f32(w), rt_f32(dy), M, in, out, dx ? rt_f32(dx) : NULL,
               dw ? rt_f32(dw) : NULL, db ? rt_f32(db) : NULL);
}

/* ---- matmul -------------------------------------------------------------------------------- */

extern "C" void rt_matmul_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *c)
{
    const char *op = "matmul_fwd";
    int64_t B, m, k, n;
    rt_matmul_dims(op, a, b, &B, &m, &k, &n);
    rt_check_f32(c, B * m * n, op, "c");
    rt_cuda_gemm(op, false, false, m, n, k, 1.0f, rt_f32(a), k, m * k, rt_f32(b), n, k * n, 0.0f,
                 rt_f32(c), n, m * n, B);
}

extern "C" void rt_matmul_bwd(const rt_tensor *a, const rt_tensor *b, const rt_tensor *dc,
                              rt_tensor *da, rt_tensor *db)
{
    const char *op = "matmul_bwd";
    int64_t B, m, k, n;
    rt_matmul_bwd_check(op, a, b, dc, da, db, &B, &m, &k, &n);
    if (da) {
        rt_cuda_gemm(op, false, true, m, k, n, 1.0f, rt_f32(dc), n, m * n, rt_f32(b), n, k * n,
                     0.0f, rt_f32(da), k, m * k, B);
    }
    if (db) {
        rt_cuda_gemm(op, true, false, k, n, m, 1.0f, rt_f32(a), k, m * k, rt_f32(dc), n, m * n,
                     0.0f, rt_f32(db), n, k * n, B);
    }
}

/* ---- attention ----------------------------------------------------------------------------- */

/* One block per row r of P [rows, T] (row i = r % T of its head): softmax in place;
 * causal: entries j > i set to 0. */
__global__ void attn_softmax_k(float *P, int64_t T, bool causal)
{
    const int64_t r = blockIdx.x, i = causal ? r % T : T - 1;
    float *row = P + r * T;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
        mx = fmaxf(mx, row[j]);
    mx = rt_block_max(mx);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
        float e = expf(row[j] - mx);
        row[j] = e;
        s += e;
    }
    const float inv = 1.0f / rt_block_sum(s);
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
        row[j] = j <= i ? row[j] * inv : 0.0f;
}

/* dS = P * (dP - sum_j dP P) * scale, in place in dP. Masked entries have P = 0, so
 * the same kernel serves causal and full attention. */
__global__ void attn_softmax_bwd_k(const float *P, float *dP, int64_t T, float scale)
{
    const int64_t r = blockIdx.x;
    const float *p = P + r * T;
    float *d = dP + r * T;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
        dot += d[j] * p[j];
    dot = rt_block_sum(dot);
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x)
        d[j] = p[j] * (d[j] - dot) * scale;
}

extern "C" void rt_attention_ex_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                                    const rt_tensor *b_qkv, const rt_tensor *w_o,
                                    const rt_tensor *b_o, int heads, bool causal, rt_tensor *saved,
                                    rt_tensor *y)
{
    (void)pool;
    const char *op = "attention_fwd";
    rt_attn_dims d = rt_attention_check(op, x, w_qkv, w_o, heads, saved);
    rt_check_f32(y, x->numel, op, "output");
    const int64_t NT = d.N * d.T, T = d.T, D = d.D, hd = d.hd, H = d.H;
    float *qkv = rt_f32(saved), *P = qkv + NT * 3 * D, *merged = P + d.N * H * T * T;
    linear(op, rt_f32(x), rt_f32(w_qkv), b_qkv ? rt_f32(b_qkv) : NULL, NT, D, 3 * D, qkv);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t n = 0; n < d.N; n++) {
        const float *q = qkv + n * T * 3 * D, *k = q + D, *v = q + 2 * D;
        float *p = P + n * H * T * T;
        rt_cuda_gemm(op, false, true, T, T, hd, scale, q, 3 * D, hd, k, 3 * D, hd, 0.0f, p, T,
                     T * T, H);
        attn_softmax_k<<<(unsigned)(H * T), 256, 0, RT_FG>>>(p, T, causal);
        rt_cuda_launched(op);
        rt_cuda_gemm(op, false, false, T, hd, T, 1.0f, p, T, T * T, v, 3 * D, hd, 0.0f,
                     merged + n * T * D, D, hd, H);
    }
    linear(op, merged, rt_f32(w_o), b_o ? rt_f32(b_o) : NULL, NT, D, D, rt_f32(y));
}

extern "C" void rt_attention_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                                 const rt_tensor *b_qkv, const rt_tensor *w_o, const rt_tensor *b_o,
                                 int heads, rt_tensor *saved, rt_tensor *y)
{
    rt_attention_ex_fwd(pool, x, w_qkv, b_qkv, w_o, b_o, heads, true, saved, y);
}

extern "C" void rt_attention_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                                 const rt_tensor *w_o, int heads, const rt_tensor *saved,
                                 const rt_tensor *dy, rt_tensor *dx, rt_tensor *dw_qkv,
                                 rt_tensor *db_qkv, rt_tensor *dw_o, rt_tensor *db_o)
{
    const char *op = "attention_bwd";
    rt_attn_dims d = rt_attention_check(op, x, w_qkv, w_o, heads, saved);
    rt_attention_bwd_check(op, x, w_qkv, w_o, &d, dy, dx, dw_qkv, db_qkv, dw_o, db_o);
    const int64_t NT = d.N * d.T, T = d.T, D = d.D, hd = d.hd, H = d.H;
    const float *qkv = rt_f32(saved), *P = qkv + NT * 3 * D, *merged = P + d.N * H * T * T;
    float *dmerged = rt_pool_scratch(pool, (size_t)(NT * D + NT * 3 * D + H * T * T));
    float *dqkv = dmerged + NT * D, *dP = dqkv + NT * 3 * D;
    linear_bwd(op, merged, rt_f32(w_o), rt_f32(dy), NT, D, D, dmerged, dw_o ? rt_f32(dw_o) : NULL,
               db_o ? rt_f32(db_o) : NULL);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t n = 0; n < d.N; n++) {
        const float *q = qkv + n * T * 3 * D, *k = q + D, *v = q + 2 * D;
        float *dq = dqkv + n * T * 3 * D, *dk = dq + D, *dv = dq + 2 * D;
        const float *p = P + n * H * T * T, *dO = dmerged + n * T * D;
        /* dP = dO V^T; dV = P^T dO */
        rt_cuda_gemm(op, false, true, T, T, hd, 1.0f, dO, D, hd, v, 3 * D, hd, 0.0f, dP, T, T * T,
                     H);
        rt_cuda_gemm(op, true, false, T, hd, T, 1.0f, p, T, T * T, dO, D, hd, 0.0f, dv, 3 * D, hd,
                     H);
        attn_softmax_bwd_k<<<(unsigned)(H * T), 256, 0, RT_FG>>>(p, dP, T, scale);
        rt_cuda_launched(op);
        /* dQ = dS K; dK = dS^T Q */
        rt_cuda_gemm(op, false, false, T, hd, T, 1.0f, dP, T, T * T, k, 3 * D, hd, 0.0f, dq, 3 * D,
                     hd, H);
        rt_cuda_gemm(op, true, false, T, hd, T, 1.0f, dP, T, T * T, q, 3 * D, hd, 0.0f, dk, 3 * D,
                     hd, H);
    }
    linear_bwd(op, rt_f32(x), rt_f32(w_qkv), dqkv, NT, D, 3 * D, dx ? rt_f32(dx) : NULL,
               dw_qkv ? rt_f32(dw_qkv) : NULL, db_qkv ? rt_f32(db_qkv) : NULL);
}
