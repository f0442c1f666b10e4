/* cpu/dense.c: the GEMM-shaped ops on the CPU, all through oneDNN's sgemm (dnnl_sgemm:
 * on the development machine 1.2-6x faster than OpenBLAS's for the shapes of the small
 * networks' linear layers, and never slower; both obey --threads): linear
 * (PyTorch weight layout [out, in], leading dims flattened), batched matmul, and
 * GPT-2's causal multi-head self-attention. Attention keeps qkv, the softmax
 * probabilities and the merged heads in a caller-owned `saved` tensor so backward
 * needs no recomputation; per (sample, head) it works on strided views of qkv (leading
 * dimension 3D), so heads are never copied out. */
#include "cpu.h"

#include <dnnl.h>
#include <math.h>
#include <string.h>

/* C[m,n] = alpha op(A) op(B) + beta C, row-major (op: transposed when ta / tb). */
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (m == 0 || n == 0)
        return;
    dnnl_status_t s =
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (s != dnnl_success)
        rt_fatal("sgemm", "oneDNN: sgemm %lldx%lldx%lld failed (status %d)", (long long)m,
                 (long long)n, (long long)k, (int)s);
}

static void add_colsum(const float *m, int64_t rows, int64_t cols, float *out)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *row = m + r * cols;
        for (int64_t c = 0; c < cols; c++)
            out[c] += row[c];
    }
}

static void add_bias_rows(float *m, int64_t rows, int64_t cols, const float *b)
{
    for (int64_t r = 0; r < rows; r++) {
        float *row = m + r * cols;
        for (int64_t c = 0; c < cols; c++)
            row[c] += b[c];
    }
}

/* y[M,out] = x[M,in] w[out,in]^T (+ b) */
static void linear(const float *x, const float *w, const float *b, int64_t M, int64_t in,
                   int64_t out, float *y)
{
    gemm(false, true, M, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    if (b)
        add_bias_rows(y, M, out, b);
}

static void linear_bwd(const float *x, const float *w, const float *dy, int64_t M, int64_t in,
                       int64_t out, float *dx, float *dw, float *db)
{
    if (dx)
        gemm(false, false, M, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
    if (dw)
        gemm(true, false, out, in, M, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db)
        add_colsum(dy, M, out, db);
}

void rt_linear_fwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b, rt_tensor *y)
{
    const char *op = "linear_fwd";
    int64_t M, in, out;
    rt_linear_fwd_check(op, x, w, b, y, &M, &in, &out);
    linear(rt_f32(x), rt_f32(w), b ? rt_f32(b) : NULL, M, in, out, rt_f32(y));
}

void rt_linear_bwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy, rt_tensor *dx,
                   rt_tensor *dw, rt_tensor *db)
{
    const char *op = "linear_bwd";
    int64_t M, in, out;
    rt_linear_dims(op, x, w, &M, &in, &out);
    rt_linear_bwd_check(op, x, w, M, out, dy, dx, dw, db);
    linear_bwd(rt_f32(x), rt_f32(w), rt_f32(dy), M, in, out, dx ? rt_f32(dx) : NULL,
               dw ? rt_f32(dw) : NULL, db ? rt_f32(db) : NULL);
}

void rt_matmul_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *c)
{
    const char *op = "matmul_fwd";
    int64_t B, m, k, n;
    rt_matmul_dims(op, a, b, &B, &m, &k, &n);
    rt_check_act(c, B * m * n, op, "c");
    for (int64_t i = 0; i < B; i++)
        gemm(false, false, m, n, k, 1.0f, rt_f32(a) + i * m * k, k, rt_f32(b) + i * k * n, n, 0.0f,
             rt_f32(c) + i * m * n, n);
}

void rt_matmul_bwd(const rt_tensor *a, const rt_tensor *b, const rt_tensor *dc, rt_tensor *da,
                   rt_tensor *db)
{
    const char *op = "matmul_bwd";
    int64_t B, m, k, n;
    rt_matmul_bwd_check(op, a, b, dc, da, db, &B, &m, &k, &n);
    for (int64_t i = 0; i < B; i++) {
        const float *dci = rt_f32(dc) + i * m * n;
        if (da)
            gemm(false, true, m, k, n, 1.0f, dci, n, rt_f32(b) + i * k * n, n, 0.0f,
                 rt_f32(da) + i * m * k, k);
        if (db)
            gemm(true, false, k, n, m, 1.0f, rt_f32(a) + i * m * k, k, dci, n, 0.0f,
                 rt_f32(db) + i * k * n, n);
    }
}

/* ---- attention ---------------------------------------------------------------------- */

void rt_attention_ex_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                         const rt_tensor *b_qkv, const rt_tensor *w_o, const rt_tensor *b_o,
                         int heads, bool causal, rt_tensor *saved, rt_tensor *y)
{
    (void)pool;
    const char *op = "attention_fwd";
    rt_attn_dims d = rt_attention_check(op, x, w_qkv, w_o, heads, saved);
    rt_check_act(y, x->numel, op, "output");
    const int64_t NT = d.N * d.T, T = d.T, D = d.D, hd = d.hd;
    float *qkv = rt_f32(saved), *P = qkv + NT * 3 * D, *merged = P + d.N * d.H * T * T;
    linear(rt_f32(x), rt_f32(w_qkv), b_qkv ? rt_f32(b_qkv) : NULL, NT, D, 3 * D, qkv);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t n = 0; n < d.N; n++) {
        for (int64_t h = 0; h < d.H; h++) {
            const float *q = qkv + n * T * 3 * D + h * hd, *k = q + D, *v = q + 2 * D;
            float *p = P + (n * d.H + h) * T * T;
            gemm(false, true, T, T, hd, scale, q, (3 * D), k, (3 * D), 0.0f, p, T);
            for (int64_t i = 0; i < T; i++) {
                const int64_t last = causal ? i : T - 1; /* keys this query may see */
                float *row = p + i * T, mx = row[0], sum = 0.0f;
                for (int64_t j = 1; j <= last; j++)
                    mx = row[j] > mx ? row[j] : mx;
                for (int64_t j = 0; j <= last; j++) {
                    row[j] = expf(row[j] - mx);
                    sum += row[j];
                }
                float inv = 1.0f / sum;
                for (int64_t j = 0; j <= last; j++)
                    row[j] *= inv;
                for (int64_t j = last + 1; j < T; j++)
                    row[j] = 0.0f;
            }
            gemm(false, false, T, hd, T, 1.0f, p, T, v, (3 * D), 0.0f, merged + n * T * D + h * hd,
                 D);
        }
    }
    linear(merged, rt_f32(w_o), b_o ? rt_f32(b_o) : NULL, NT, D, D, rt_f32(y));
}

void rt_attention_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                      const rt_tensor *b_qkv, const rt_tensor *w_o, const rt_tensor *b_o, int heads,
                      rt_tensor *saved, rt_tensor *y)
{
    rt_attention_ex_fwd(pool, x, w_qkv, b_qkv, w_o, b_o, heads, true, saved, y);
}

void rt_attention_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                      const rt_tensor *w_o, int heads, const rt_tensor *saved, const rt_tensor *dy,
                      rt_tensor *dx, rt_tensor *dw_qkv, rt_tensor *db_qkv, rt_tensor *dw_o,
                      rt_tensor *db_o)
{
    /* Masked probabilities are stored as 0, so the same backward serves both masks. */
    const char *op = "attention_bwd";
    rt_attn_dims d = rt_attention_check(op, x, w_qkv, w_o, heads, saved);
    rt_attention_bwd_check(op, x, w_qkv, w_o, &d, dy, dx, dw_qkv, db_qkv, dw_o, db_o);
    const int64_t NT = d.N * d.T, T = d.T, D = d.D, hd = d.hd;
    const float *qkv = rt_f32(saved), *P = qkv + NT * 3 * D, *merged = P + d.N * d.H * T * T;
    float *dmerged = rt_pool_scratch(pool, (size_t)(NT * D + NT * 3 * D + T * T));
    float *dqkv = dmerged + NT * D, *dP = dqkv + NT * 3 * D;
    linear_bwd(merged, rt_f32(w_o), rt_f32(dy), NT, D, D, dmerged, dw_o ? rt_f32(dw_o) : NULL,
               db_o ? rt_f32(db_o) : NULL);
    const float scale = 1.0f / sqrtf((float)hd);
    const int ld = (3 * D);
    for (int64_t n = 0; n < d.N; n++) {
        for (int64_t h = 0; h < d.H; h++) {
            const float *q = qkv + n * T * 3 * D + h * hd, *k = q + D, *v = q + 2 * D;
            float *dq = dqkv + n * T * 3 * D + h * hd, *dk = dq + D, *dv = dq + 2 * D;
            const float *p = P + (n * d.H + h) * T * T;
            const float *dO = dmerged + n * T * D + h * hd;
            /* dP = dO V^T; dV = P^T dO */
            gemm(false, true, T, T, hd, 1.0f, dO, D, v, ld, 0.0f, dP, T);
            gemm(true, false, T, hd, T, 1.0f, p, T, dO, D, 0.0f, dv, ld);
            /* dS = P * (dP - sum_j dP P) * scale; masked entries have P = 0 and get 0. */
            for (int64_t i = 0; i < T; i++) {
                const float *pr = p + i * T;
                float *dr = dP + i * T, dot = 0.0f;
                for (int64_t j = 0; j < T; j++)
                    dot += dr[j] * pr[j];
                for (int64_t j = 0; j < T; j++)
                    dr[j] = pr[j] * (dr[j] - dot) * scale;
            }
            /* dQ = dS K; dK = dS^T Q */
            gemm(false, false, T, hd, T, 1.0f, dP, T, k, ld, 0.0f, dq, ld);
            gemm(true, false, T, hd, T, 1.0f, dP, T, q, ld, 0.0f, dk, ld);
        }
    }
    linear_bwd(rt_f32(x), rt_f32(w_qkv), dqkv, NT, D, 3 * D, dx ? rt_f32(dx) : NULL,
               dw_qkv ? rt_f32(dw_qkv) : NULL, db_qkv ? rt_f32(db_qkv) : NULL);
}
