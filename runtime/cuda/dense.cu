/* dense.cu: GEMM-shaped work on cuBLAS: the row-major GEMM helper every op uses
 * (conv.cu too), linear, batched matmul and GPT-2 causal self-attention (cuBLAS
 * strided-batched GEMMs over heads plus own causal softmax kernels), with the same
 * saved-tensor layout as the CPU backend (qkv, probabilities, merged heads).
 * Mixed precision: with the compute dtype set to bf16 or f16 (rt_set_compute_dtype or
 * BURSTRT_COMPUTE_DTYPE), GEMM inputs are multiplied in that type on tensor cores with
 * f32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F); f32 inputs (weights, `saved`,
 * f32 activations) are rounded to it in scratch buffers first, so the f32 master
 * weights are the stored weights. Activations are f32, or bf16 / f16 with
 * BURSTRT_STORAGE=16 (act.cuh); parameters, their gradients and `saved` stay f32, and
 * each GEMM writes its output in the output's own type. In f32 mode GEMMs are strict f32
 * (no TF32), which is what the CPU backend's results are compared against. */
#include "act.cuh"
#include "convert.h"

#include <limits.h>

/* Elements a strided-batched operand spans: `rows` rows of `cols` at leading dimension
 * ld, `batch` times `stride` apart. */
static int64_t span(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch)
{
    if (rows == 0 || cols == 0 || batch == 0)
        return 0;
    return (batch - 1) * stride + (rows - 1) * ld + cols;
}

/* What cuBLAS reads for the input operand p (dtype dt, n elements): p itself when it is
 * in the multiplication's dtype mdt already, else its copy rounded to mdt (16 bits) in
 * scratch slot. */
static const void *operand(int slot, const void *p, rt_dtype dt, rt_dtype mdt, int64_t n,
                           const char *op)
{
    if (dt == mdt)
        return p;
    void *buf = rt_cuda_scratch(slot, (size_t)n * rt_dtype_size(mdt), op);
    rt_cuda_convert(p, RT_F32, buf, mdt, n, op);
    return buf;
}

/* An operand is f32 or in the multiplication's dtype mdt (f32 mode: f32 only). */
static void check_operand(const char *op, const char *what, rt_dtype dt, rt_dtype mdt)
{
    if (dt != RT_F32 && dt != mdt)
        rt_fatal(op, "GEMM %s is %s, but the compute dtype is %s", what, rt_dtype_name(dt),
                 rt_dtype_name(mdt));
}

static int as_int(int64_t v, const char *op, const char *what)
{
    if (v < 0 || v > INT_MAX)
        rt_fatal(op, "GEMM %s %lld exceeds cuBLAS's int range", what, (long long)v);
    return (int)v;
}

extern "C" void rt_cuda_gemm(const char *op, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             float alpha, const void *A, rt_dtype adt, int64_t lda, int64_t strideA,
                             const void *B, rt_dtype bdt, int64_t ldb, int64_t strideB, float beta,
                             void *C, rt_dtype cdt, int64_t ldc, int64_t strideC, int64_t batch)
{
    const rt_compute_dtype compute = rt_get_compute_dtype();
    const rt_dtype mdt = compute == RT_COMPUTE_BF16  ? RT_BF16
                         : compute == RT_COMPUTE_F16 ? RT_F16
                                                     : RT_F32;
    check_operand(op, "A", adt, mdt);
    check_operand(op, "B", bdt, mdt);
    check_operand(op, "C", cdt, mdt);
    if (m == 0 || n == 0 || batch == 0)
        return;
    rt_cuda_ensure();
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap operands. */
    const cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int im = as_int(n, op, "n"), in = as_int(m, op, "m"), ik = as_int(k, op, "k");
    const int ilda = as_int(ldb, op, "ldb"), ildb = as_int(lda, op, "lda");
    const int ildc = as_int(ldc, op, "ldc"), ib = as_int(batch, op, "batch");
    const cudaDataType_t in_t = rt_cuda_type(mdt);
    const void *pa = B, *pb = A;
    /* With k = 0 nothing is read (C = beta C). B (row-major) is [k,n] or [n,k] when tb;
     * A is [m,k] or [k,m] when ta. */
    if (k > 0) {
        pa = operand(RT_SCRATCH_A, B, bdt, mdt, span(tb ? n : k, tb ? k : n, ldb, strideB, batch),
                     op);
        pb = operand(RT_SCRATCH_B, A, adt, mdt, span(ta ? k : m, ta ? m : k, lda, strideA, batch),
                     op);
    }
    RT_CUBLAS(cublasGemmStridedBatchedEx(rt_cuda_blas(), opA, opB, im, in, ik, &alpha, pa, in_t,
                                         ilda, strideB, pb, in_t, ildb, strideA, &beta, C,
                                         rt_cuda_type(cdt), ildc, strideC, ib, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              op);
}

/* ---- bias ---------------------------------------------------------------------------- */

#define BIAS_ROWS 256

/* Block (x: 256 columns, y: BIAS_ROWS rows, striding by the grid's y when the rows need
 * more blocks than it has): partial column sums, added atomically. */
template <typename T> __global__ void bias_grad_k(const T *dy, int64_t rows, int64_t n, float *db)
{
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= n)
        return;
    float s = 0.0f;
    for (int64_t r0 = blockIdx.y * (int64_t)BIAS_ROWS; r0 < rows;
         r0 += (int64_t)gridDim.y * BIAS_ROWS) {
        const int64_t r1 = r0 + BIAS_ROWS < rows ? r0 + BIAS_ROWS : rows;
        for (int64_t r = r0; r < r1; r++)
            s += rt_ld(dy + r * n + c);
    }
    atomicAdd(db + c, s);
}

template <typename T> __global__ void add_bias_k(T *y, const float *b, int64_t n, int64_t total)
{
    RT_FOR(i, total) rt_st(y + i, rt_ld(y + i) + b[i % n]);
}

extern "C" void rt_cuda_bias_grad(const char *op, const void *dy, rt_dtype dt, int64_t rows,
                                  int64_t n, float *db)
{
    if (rows == 0 || n == 0)
        return;
    dim3 grid((unsigned)((n + 255) / 256), rt_cuda_grid_y((rows + BIAS_ROWS - 1) / BIAS_ROWS));
    RT_ACT_DISPATCH(dt, T, bias_grad_k<<<grid, 256, 0, RT_FG>>>((const T *)dy, rows, n, db));
    rt_cuda_launched(op);
}

extern "C" void rt_cuda_add_bias(const char *op, void *y, rt_dtype dt, const float *b, int64_t rows,
                                 int64_t n)
{
    if (rows * n == 0)
        return;
    RT_ACT_DISPATCH(
        dt, T, add_bias_k<<<rt_cuda_blocks(rows * n), 256, 0, RT_FG>>>((T *)y, b, n, rows * n));
    rt_cuda_launched(op);
}

/* ---- linear ------------------------------------------------------------------------------ */

/* y[M,out] = x[M,in] w[out,in]^T + b; x and y hold xdt and ydt (activations, or attention's
 * f32 intermediates), w and b are f32. */
static void linear(const char *op, const void *x, rt_dtype xdt, const float *w, const float *b,
                   int64_t M, int64_t in, int64_t out, void *y, rt_dtype ydt)
{
    rt_cuda_gemm(op, false, true, M, out, in, 1.0f, x, xdt, in, 0, w, RT_F32, in, 0, 0.0f, y, ydt,
                 out, 0, 1);
    if (b)
        rt_cuda_add_bias(op, y, ydt, b, M, out);
}

/* dx (dxdt) = dy w; dw += dy^T x; db += column sums of dy. x and dy hold xdt and dydt;
 * w, dw and db are f32. */
static void linear_bwd(const char *op, const void *x, rt_dtype xdt, const float *w, const void *dy,
                       rt_dtype dydt, int64_t M, int64_t in, int64_t out, void *dx, rt_dtype dxdt,
                       float *dw, float *db)
{
    if (dx)
        rt_cuda_gemm(op, false, false, M, in, out, 1.0f, dy, dydt, out, 0, w, RT_F32, in, 0, 0.0f,
                     dx, dxdt, in, 0, 1);
    if (dw)
        rt_cuda_gemm(op, true, false, out, in, M, 1.0f, dy, dydt, out, 0, x, xdt, in, 0, 1.0f, dw,
                     RT_F32, in, 0, 1);
    if (db)
        rt_cuda_bias_grad(op, dy, dydt, M, out, db);
}

extern "C" void rt_linear_fwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                              rt_tensor *y)
{
    const char *op = "linear_fwd";
    int64_t M, in, out;
    rt_linear_fwd_check(op, x, w, b, y, &M, &in, &out);
    linear(op, x->data, x->dtype, rt_f32(w), b ? rt_f32(b) : NULL, M, in, out, y->data, y->dtype);
}

extern "C" void rt_linear_bwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                              rt_tensor *dx, rt_tensor *dw, rt_tensor *db)
{
    const char *op = "linear_bwd";
    int64_t M, in, out;
    rt_linear_dims(op, x, w, &M, &in, &out);
    rt_linear_bwd_check(op, x, w, M, out, dy, dx, dw, db);
    linear_bwd(op, x->data, x->dtype, rt_f32(w), dy->data, dy->dtype, M, in, out,
               dx ? dx->data : NULL, dx ? dx->dtype : RT_F32, dw ? rt_f32(dw) : NULL,
               db ? rt_f32(db) : NULL);
}

/* ---- matmul -------------------------------------------------------------------------------- */

extern "C" void rt_matmul_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *c)
{
    const char *op = "matmul_fwd";
    int64_t B, m, k, n;
    rt_matmul_dims(op, a, b, &B, &m, &k, &n);
    rt_check_act(c, B * m * n, op, "c");
    rt_cuda_gemm(op, false, false, m, n, k, 1.0f, a->data, a->dtype, k, m * k, b->data, b->dtype, n,
                 k * n, 0.0f, c->data, c->dtype, n, m * n, B);
}

extern "C" void rt_matmul_bwd(const rt_tensor *a, const rt_tensor *b, const rt_tensor *dc,
                              rt_tensor *da, rt_tensor *db)
{
    const char *op = "matmul_bwd";
    int64_t B, m, k, n;
    rt_matmul_bwd_check(op, a, b, dc, da, db, &B, &m, &k, &n);
    if (da) {
        rt_cuda_gemm(op, false, true, m, k, n, 1.0f, dc->data, dc->dtype, n, m * n, b->data,
                     b->dtype, n, k * n, 0.0f, da->data, da->dtype, k, m * k, B);
    }
    if (db) {
        rt_cuda_gemm(op, true, false, k, n, m, 1.0f, a->data, a->dtype, k, m * k, dc->data,
                     dc->dtype, n, m * n, 0.0f, db->data, db->dtype, n, k * n, B);
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
    rt_check_act(y, x->numel, op, "output");
    const int64_t NT = d.N * d.T, T = d.T, D = d.D, hd = d.hd, H = d.H;
    /* saved is f32 whatever the activations' dtype: qkv, P and merged are f32 GEMM outputs,
     * which the GEMMs that read them round to a 16-bit compute dtype as they do weights. */
    float *qkv = rt_f32(saved), *P = qkv + NT * 3 * D, *merged = P + d.N * H * T * T;
    linear(op, x->data, x->dtype, rt_f32(w_qkv), b_qkv ? rt_f32(b_qkv) : NULL, NT, D, 3 * D, qkv,
           RT_F32);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t n = 0; n < d.N; n++) {
        const float *q = qkv + n * T * 3 * D, *k = q + D, *v = q + 2 * D;
        float *p = P + n * H * T * T;
        rt_cuda_gemm(op, false, true, T, T, hd, scale, q, RT_F32, 3 * D, hd, k, RT_F32, 3 * D, hd,
                     0.0f, p, RT_F32, T, T * T, H);
        attn_softmax_k<<<(unsigned)(H * T), 256, 0, RT_FG>>>(p, T, causal);
        rt_cuda_launched(op);
        rt_cuda_gemm(op, false, false, T, hd, T, 1.0f, p, RT_F32, T, T * T, v, RT_F32, 3 * D, hd,
                     0.0f, merged + n * T * D, RT_F32, D, hd, H);
    }
    linear(op, merged, RT_F32, rt_f32(w_o), b_o ? rt_f32(b_o) : NULL, NT, D, D, y->data, y->dtype);
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
    /* The gradients of the intermediates are f32 like the intermediates themselves. */
    float *dmerged = rt_pool_scratch(pool, (size_t)(NT * D + NT * 3 * D + H * T * T));
    float *dqkv = dmerged + NT * D, *dP = dqkv + NT * 3 * D;
    linear_bwd(op, merged, RT_F32, rt_f32(w_o), dy->data, dy->dtype, NT, D, D, dmerged, RT_F32,
               dw_o ? rt_f32(dw_o) : NULL, db_o ? rt_f32(db_o) : NULL);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t n = 0; n < d.N; n++) {
        const float *q = qkv + n * T * 3 * D, *k = q + D, *v = q + 2 * D;
        float *dq = dqkv + n * T * 3 * D, *dk = dq + D, *dv = dq + 2 * D;
        const float *p = P + n * H * T * T, *dO = dmerged + n * T * D;
        /* dP = dO V^T; dV = P^T dO */
        rt_cuda_gemm(op, false, true, T, T, hd, 1.0f, dO, RT_F32, D, hd, v, RT_F32, 3 * D, hd, 0.0f,
                     dP, RT_F32, T, T * T, H);
        rt_cuda_gemm(op, true, false, T, hd, T, 1.0f, p, RT_F32, T, T * T, dO, RT_F32, D, hd, 0.0f,
                     dv, RT_F32, 3 * D, hd, H);
        attn_softmax_bwd_k<<<(unsigned)(H * T), 256, 0, RT_FG>>>(p, dP, T, scale);
        rt_cuda_launched(op);
        /* dQ = dS K; dK = dS^T Q */
        rt_cuda_gemm(op, false, false, T, hd, T, 1.0f, dP, RT_F32, T, T * T, k, RT_F32, 3 * D, hd,
                     0.0f, dq, RT_F32, 3 * D, hd, H);
        rt_cuda_gemm(op, true, false, T, hd, T, 1.0f, dP, RT_F32, T, T * T, q, RT_F32, 3 * D, hd,
                     0.0f, dk, RT_F32, 3 * D, hd, H);
    }
    linear_bwd(op, x->data, x->dtype, rt_f32(w_qkv), dqkv, RT_F32, NT, D, 3 * D,
               dx ? dx->data : NULL, dx ? dx->dtype : RT_F32, dw_qkv ? rt_f32(dw_qkv) : NULL,
               db_qkv ? rt_f32(db_qkv) : NULL);
}
