/* cpu/ref_conv.c: the reference conv2d of the CPU backend (conv.c runs oneDNN; the tests
 * check it against this one, and it serves the shapes oneDNN has no implementation for):
 * forward and backward lowered to OpenBLAS sgemm via im2col. Per group: col[C/g*kh*kw, OH*OW] = im2col(x); y = W col (+ b).
 * Backward: db += row sums of dy; dW += dy col^T; dcol = W^T dy, dx = col2im(dcol).
 * Samples are processed in chunks whose columns sit side by side in one col matrix
 * (about RT_CONV_COLUMNS columns per GEMM), so late layers with small images still get
 * wide, efficient GEMMs; a chunk of one sample writes y directly, and a 1x1 stride-1
 * unpadded convolution then uses x itself as col. im2col copies whole
 * contiguous output rows (memcpy when the stride is 1) so the lowering stays a small
 * fraction of the GEMM time; tests/bench/runtime/bench_conv measures that fraction. */
#include "ref.h"

#include <cblas.h>
#include <string.h>

typedef rt_conv_dims conv_dims;

/* 1x1, stride 1, no padding: the columns are x itself. */
static bool is_direct(const rt_conv2d_attrs *a)
{
    return a->kh == 1 && a->kw == 1 && a->sh == 1 && a->sw == 1 && a->ph == 0 && a->pw == 0;
}

/* x: [Cg,H,W] of one sample and group -> col [Cg*kh*kw, OH*OW], rows `ld` floats apart
 * (ld > OH*OW when several samples share one col matrix side by side). */
static void im2col(const float *x, const conv_dims *d, const rt_conv2d_attrs *a, float *col,
                   int64_t ld)
{
    for (int64_t c = 0; c < d->Cg; c++) {
        const float *xc = x + c * d->H * d->W;
        for (int ki = 0; ki < a->kh; ki++) {
            for (int kj = 0; kj < a->kw; kj++) {
                float *row = col + ((c * a->kh + ki) * a->kw + kj) * ld;
                /* Output columns whose input column lies inside the image. */
                int64_t off = (int64_t)kj * a->dw - a->pw;
                int64_t lo = off >= 0 ? 0 : (-off + a->sw - 1) / a->sw;
                int64_t hi = (d->W - off + a->sw - 1) / a->sw;
                if (hi > d->OW)
                    hi = d->OW;
                if (hi < 0)
                    hi = 0;
                if (lo > hi)
                    lo = hi;
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    float *r = row + oh * d->OW;
                    int64_t ih = oh * a->sh - a->ph + (int64_t)ki * a->dh;
                    if (ih < 0 || ih >= d->H) {
                        memset(r, 0, (size_t)d->OW * sizeof(float));
                        continue;
                    }
                    const float *xr = xc + ih * d->W;
                    for (int64_t ow = 0; ow < lo; ow++)
                        r[ow] = 0.0f;
                    if (a->sw == 1) {
                        if (hi > lo)
                            memcpy(r + lo, xr + lo + off, (size_t)(hi - lo) * sizeof(float));
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++)
                            r[ow] = xr[ow * a->sw + off];
                    }
                    for (int64_t ow = hi; ow < d->OW; ow++)
                        r[ow] = 0.0f;
                }
            }
        }
    }
}

/* Adds col [Cg*kh*kw, OH*OW] (rows `ld` apart) back into dx [Cg,H,W] (dx zeroed by the
 * caller). */
static void col2im(const float *col, const conv_dims *d, const rt_conv2d_attrs *a, float *dx,
                   int64_t ld)
{
    for (int64_t c = 0; c < d->Cg; c++) {
        float *xc = dx + c * d->H * d->W;
        for (int ki = 0; ki < a->kh; ki++) {
            for (int kj = 0; kj < a->kw; kj++) {
                const float *row = col + ((c * a->kh + ki) * a->kw + kj) * ld;
                int64_t off = (int64_t)kj * a->dw - a->pw;
                int64_t lo = off >= 0 ? 0 : (-off + a->sw - 1) / a->sw;
                int64_t hi = (d->W - off + a->sw - 1) / a->sw;
                if (hi > d->OW)
                    hi = d->OW;
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    int64_t ih = oh * a->sh - a->ph + (int64_t)ki * a->dh;
                    if (ih < 0 || ih >= d->H)
                        continue;
                    const float *r = row + oh * d->OW;
                    float *xr = xc + ih * d->W;
                    if (a->sw == 1) {
                        for (int64_t ow = lo; ow < hi; ow++)
                            xr[ow + off] += r[ow];
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++)
                            xr[ow * a->sw + off] += r[ow];
                    }
                }
            }
        }
    }
}

int64_t rt_conv2d_chunk(int64_t N, int64_t ohw)
{
    int64_t nc = ohw >= RT_CONV_COLUMNS ? 1 : RT_CONV_COLUMNS / ohw;
    return nc < 1 ? 1 : nc > N ? (N > 0 ? N : 1) : nc;
}

void rt_ref_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                       const rt_conv2d_attrs *a, rt_tensor *y)
{
    const char *op = "conv2d_fwd";
    conv_dims d = rt_conv2d_check(op, x, w, a, y, "output");
    if (b)
        rt_check_f32(b, d.K, op, "bias");
    /* nc samples share one GEMM: col [ckk, nc*ohw] and out [Kg, nc*ohw]. With nc = 1
     * the GEMM writes y directly, and a 1x1 convolution reads x directly. */
    const int64_t nc = rt_conv2d_chunk(d.N, d.ohw), cols = nc * d.ohw;
    const bool direct = is_direct(a) && nc == 1;
    float *col = NULL, *out = NULL;
    if (!direct) {
        col = rt_pool_scratch(pool, (size_t)(d.ckk * cols + (nc > 1 ? d.Kg * cols : 0)));
        out = col + d.ckk * cols;
    }
    const float *wp = rt_f32(w);
    for (int64_t n0 = 0; n0 < d.N; n0 += nc) {
        const int64_t m = d.N - n0 < nc ? d.N - n0 : nc, mcols = m * d.ohw;
        for (int g = 0; g < a->groups; g++) {
            const float *src = rt_f32(x) + (n0 * d.C + g * d.Cg) * d.H * d.W;
            if (!direct) {
                for (int64_t i = 0; i < m; i++)
                    im2col(rt_f32(x) + ((n0 + i) * d.C + g * d.Cg) * d.H * d.W, &d, a,
                           col + i * d.ohw, mcols);
                src = col;
            }
            float *dst = nc == 1 ? rt_f32(y) + (n0 * d.K + g * d.Kg) * d.ohw : out;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)d.Kg, (int)mcols,
                        (int)d.ckk, 1.0f, wp + g * d.Kg * d.ckk, (int)d.ckk, src, (int)mcols, 0.0f,
                        dst, (int)mcols);
            /* Scatter [Kg, m, ohw] into y [m, K, ohw] adding the bias on the way. */
            for (int64_t i = 0; i < m; i++) {
                for (int64_t k = 0; k < d.Kg; k++) {
                    float *yr = rt_f32(y) + ((n0 + i) * d.K + g * d.Kg + k) * d.ohw;
                    const float *o = dst + k * mcols + i * d.ohw;
                    const float bv = b ? rt_f32(b)[g * d.Kg + k] : 0.0f;
                    if (nc == 1) {
                        if (b)
                            for (int64_t j = 0; j < d.ohw; j++)
                                yr[j] += bv;
                    } else {
                        for (int64_t j = 0; j < d.ohw; j++)
                            yr[j] = o[j] + bv;
                    }
                }
            }
        }
    }
}

void rt_ref_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                       const rt_conv2d_attrs *a, rt_tensor *dx, rt_tensor *dw, rt_tensor *db)
{
    const char *op = "conv2d_bwd";
    conv_dims d = rt_conv2d_check(op, x, w, a, dy, "output gradient");
    rt_conv2d_bwd_check(op, x, w, &d, dx, dw, db);
    const int64_t nc = rt_conv2d_chunk(d.N, d.ohw), cols = nc * d.ohw;
    const bool direct = is_direct(a) && nc == 1;
    /* col and dcol [ckk, nc*ohw]; gdy [Kg, nc*ohw] gathers dy when nc > 1. */
    float *col = rt_pool_scratch(pool, (size_t)(2 * d.ckk * cols + (nc > 1 ? d.Kg * cols : 0)));
    float *dcol = col + d.ckk * cols, *gdy = dcol + d.ckk * cols;
    const float *wp = rt_f32(w);
    if (dx)
        rt_tensor_zero(dx);
    if (db) {
        for (int64_t n = 0; n < d.N; n++)
            for (int64_t k = 0; k < d.K; k++) {
                const float *r = rt_f32(dy) + (n * d.K + k) * d.ohw;
                float s = 0.0f;
                for (int64_t i = 0; i < d.ohw; i++)
                    s += r[i];
                rt_f32(db)[k] += s;
            }
    }
    for (int64_t n0 = 0; n0 < d.N; n0 += nc) {
        const int64_t m = d.N - n0 < nc ? d.N - n0 : nc, mcols = m * d.ohw;
        for (int g = 0; g < a->groups; g++) {
            const float *dyg = rt_f32(dy) + (n0 * d.K + g * d.Kg) * d.ohw;
            if (nc > 1) {
                for (int64_t i = 0; i < m; i++)
                    for (int64_t k = 0; k < d.Kg; k++)
                        memcpy(gdy + k * mcols + i * d.ohw,
                               rt_f32(dy) + ((n0 + i) * d.K + g * d.Kg + k) * d.ohw,
                               (size_t)d.ohw * sizeof(float));
                dyg = gdy;
            }
            if (dw) {
                const float *src = rt_f32(x) + (n0 * d.C + g * d.Cg) * d.H * d.W;
                if (!direct) {
                    for (int64_t i = 0; i < m; i++)
                        im2col(rt_f32(x) + ((n0 + i) * d.C + g * d.Cg) * d.H * d.W, &d, a,
                               col + i * d.ohw, mcols);
                    src = col;
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)d.Kg, (int)d.ckk,
                            (int)mcols, 1.0f, dyg, (int)mcols, src, (int)mcols, 1.0f,
                            rt_f32(dw) + g * d.Kg * d.ckk, (int)d.ckk);
            }
            if (dx) {
                float *dxg = rt_f32(dx) + (n0 * d.C + g * d.Cg) * d.H * d.W;
                float *dst = direct ? dxg : dcol;
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)d.ckk, (int)mcols,
                            (int)d.Kg, 1.0f, wp + g * d.Kg * d.ckk, (int)d.ckk, dyg, (int)mcols,
                            0.0f, dst, (int)mcols);
                if (!direct)
                    for (int64_t i = 0; i < m; i++)
                        col2im(dcol + i * d.ohw, &d, a,
                               rt_f32(dx) + ((n0 + i) * d.C + g * d.Cg) * d.H * d.W, mcols);
            }
        }
    }
}
