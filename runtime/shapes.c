/* shapes.c: the argument rules of every kernel, written once for all backends. Each
 * check reads the tensors' host-side headers (never their data), rejects what the kernel
 * cannot compute with a fatal error naming the op, the argument and both shapes, and
 * returns the derived sizes the kernel loops over; so a CPU kernel and its CUDA
 * counterpart accept exactly the same calls. The window formulas of conv2d and pooling come
 * from shape_rules.h, which the compiler's shape inference can share. Checks that read
 * tensor data (token ids, labels) stay with the backends. */
#include "internal.h"
#include "shape_rules.h"

int64_t rt_dims_prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= shape[i];
    return p;
}

void rt_check_f32(const rt_tensor *t, int64_t numel, const char *op, const char *what)
{
    rt_check(t, RT_F32, -1, op, what);
    rt_check_numel(t, numel, op, what);
}

void rt_check_act(const rt_tensor *t, int64_t numel, const char *op, const char *what)
{
    rt_check(t, rt_storage_dtype(), -1, op, what);
    rt_check_numel(t, numel, op, what);
}

void rt_same_numel(const char *op, const rt_tensor *a, const char *an, const rt_tensor *b,
                   const char *bn)
{
    rt_check(a, rt_storage_dtype(), -1, op, an);
    rt_check(b, rt_storage_dtype(), -1, op, bn);
    if (a->numel != b->numel)
        rt_fatal(op, "%s has %lld elements, %s has %lld", an, (long long)a->numel, bn,
                 (long long)b->numel);
}

void rt_dropout_check(const char *op, const rt_tensor *x, float p, const rt_tensor *y)
{
    rt_same_numel(op, x, "input", y, "output");
    if (!(p >= 0.0f && p <= 1.0f))
        rt_fatal(op, "probability %g outside [0,1]", (double)p);
}

void rt_slice_check(const char *op, const rt_tensor *x, int axis, int start, const rt_tensor *y,
                    int64_t *outer, int64_t *xlen, int64_t *ylen, int64_t *inner)
{
    rt_check(x, rt_storage_dtype(), -1, op, "input");
    rt_check(y, rt_storage_dtype(), -1, op, "output");
    if (axis < 1 || axis >= x->ndim || x->ndim != y->ndim)
        rt_fatal(op, "axis %d of a %d-d input and a %d-d output", axis, x->ndim, y->ndim);
    *outer = *inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i != axis && x->shape[i] != y->shape[i])
            rt_fatal(op, "input and output differ on axis %d (%lld and %lld)", i,
                     (long long)x->shape[i], (long long)y->shape[i]);
        if (i < axis)
            *outer *= x->shape[i];
        else if (i > axis)
            *inner *= x->shape[i];
    }
    *xlen = x->shape[axis];
    *ylen = y->shape[axis];
    if (start < 0 || start + *ylen > *xlen)
        rt_fatal(op, "elements %d..%lld of an axis of %lld", start, (long long)(start + *ylen),
                 (long long)*xlen);
}

int64_t rt_mul_check(const char *op, const rt_tensor *x, const rt_tensor *s, const rt_tensor *y,
                     const char *yname)
{
    rt_same_numel(op, x, "input", y, yname);
    rt_check(s, rt_storage_dtype(), -1, op, "scale");
    if (s->numel == x->numel)
        return 1;
    if (x->ndim < 2 || s->numel != x->shape[0] * x->shape[1] || s->numel == 0)
        rt_fatal(op,
                 "scale has %lld elements; input [%lld,%lld,...] takes %lld or one per sample "
                 "and channel",
                 (long long)s->numel, (long long)x->shape[0],
                 (long long)(x->ndim > 1 ? x->shape[1] : 1), (long long)x->numel);
    return x->numel / s->numel;
}

/* ---- sliding windows ------------------------------------------------------------------- */

static int64_t extent(const char *op, const char *axis, int64_t in, int64_t k, int64_t s, int64_t p,
                      int64_t dil, bool ceil_mode)
{
    int64_t out = 0;
    rt_window_status st = rt_window_extent(in, k, s, p, dil, ceil_mode, &out);
    if (st != RT_WINDOW_OK)
        rt_fatal(op, "%s: %s (input %lld, kernel %lld, stride %lld, padding %lld, dilation %lld)",
                 axis, rt_window_problem(st), (long long)in, (long long)k, (long long)s,
                 (long long)p, (long long)dil);
    return out;
}

static void check_nchw(const char *op, const rt_tensor *y, const char *what, int64_t N, int64_t C,
                       int64_t H, int64_t W)
{
    rt_check(y, rt_storage_dtype(), 4, op, what);
    if (y->shape[0] != N || y->shape[1] != C || y->shape[2] != H || y->shape[3] != W)
        rt_fatal(op, "%s shape [%lld,%lld,%lld,%lld], expected [%lld,%lld,%lld,%lld]", what,
                 (long long)y->shape[0], (long long)y->shape[1], (long long)y->shape[2],
                 (long long)y->shape[3], (long long)N, (long long)C, (long long)H, (long long)W);
}

rt_conv_dims rt_conv2d_check(const char *op, const rt_tensor *x, const rt_tensor *w,
                             const rt_conv2d_attrs *a, const rt_tensor *y, const char *yname)
{
    rt_check(x, rt_storage_dtype(), 4, op, "input");
    rt_check(w, RT_F32, 4, op, "weight");
    rt_conv_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3]};
    d.K = w->shape[0];
    d.G = a->groups;
    if (d.G <= 0 || d.C % d.G || d.K % d.G)
        rt_fatal(op, "groups=%d must divide channels %lld and filters %lld", a->groups,
                 (long long)d.C, (long long)d.K);
    d.Cg = d.C / d.G;
    d.Kg = d.K / d.G;
    d.OH = extent(op, "height", d.H, a->kh, a->sh, a->ph, a->dh, false);
    d.OW = extent(op, "width", d.W, a->kw, a->sw, a->pw, a->dw, false);
    if (w->shape[1] != d.Cg || w->shape[2] != a->kh || w->shape[3] != a->kw)
        rt_fatal(op,
                 "weight shape [%lld,%lld,%lld,%lld] does not match C/groups=%lld, "
                 "kernel %dx%d",
                 (long long)w->shape[0], (long long)w->shape[1], (long long)w->shape[2],
                 (long long)w->shape[3], (long long)d.Cg, a->kh, a->kw);
    check_nchw(op, y, yname, d.N, d.K, d.OH, d.OW);
    d.ohw = d.OH * d.OW;
    d.ckk = d.Cg * a->kh * a->kw;
    return d;
}

void rt_conv2d_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w,
                         const rt_conv_dims *d, const rt_tensor *dx, const rt_tensor *dw,
                         const rt_tensor *db)
{
    if (dx)
        rt_check_act(dx, x->numel, op, "input gradient");
    if (dw)
        rt_check_f32(dw, w->numel, op, "weight gradient");
    if (db)
        rt_check_f32(db, d->K, op, "bias gradient");
}

rt_pool_dims rt_pool2d_check(const char *op, const rt_tensor *x, const rt_pool2d_attrs *a,
                             const rt_tensor *y, const char *yname)
{
    rt_check(x, rt_storage_dtype(), 4, op, "input");
    rt_pool_dims d = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3]};
    d.OH = extent(op, "height", d.H, a->kh, a->sh, a->ph, 1, a->ceil_mode);
    d.OW = extent(op, "width", d.W, a->kw, a->sw, a->pw, 1, a->ceil_mode);
    if (!rt_pool_pad_ok(a->kh, a->ph) || !rt_pool_pad_ok(a->kw, a->pw))
        rt_fatal(op, "padding %dx%d exceeds half the %dx%d kernel", a->ph, a->pw, a->kh, a->kw);
    check_nchw(op, y, yname, d.N, d.C, d.OH, d.OW);
    return d;
}

void rt_global_pool_check(const char *op, const rt_tensor *x, const char *xname, const rt_tensor *y,
                          const char *yname)
{
    rt_check(x, rt_storage_dtype(), 4, op, xname);
    rt_check_act(y, x->shape[0] * x->shape[1], op, yname);
}

/* ---- normalisation --------------------------------------------------------------------- */

int64_t rt_batchnorm_check(const char *op, const rt_comm *comm, const rt_tensor *x,
                           const rt_tensor *gamma, const rt_tensor *saved, const rt_tensor *y,
                           const char *yname)
{
    rt_check(x, rt_storage_dtype(), 4, op, "input");
    const int64_t C = x->shape[1];
    rt_check_f32(gamma, C, op, "gamma");
    if (saved)
        rt_check_f32(saved, 2 * C, op, "saved");
    rt_check_act(y, x->numel, op, yname);
    /* With a rank set, an empty shard is fine: the set's count is what divides; inference
     * (no saved statistics) normalises with the running ones, and an empty shard is fine
     * too. */
    if (!comm && saved && x->shape[0] * x->shape[2] * x->shape[3] == 0)
        rt_fatal(op, "empty batch: batchnorm needs at least one sample");
    return C;
}

int64_t rt_batchnorm_fwd_check(const char *op, const rt_comm *comm, const rt_tensor *x,
                               const rt_tensor *gamma, const rt_tensor *beta,
                               const rt_tensor *running_mean, const rt_tensor *running_var,
                               const rt_tensor *saved, const rt_tensor *y)
{
    const int64_t C = rt_batchnorm_check(op, comm, x, gamma, saved, y, "output");
    rt_check_f32(beta, C, op, "beta");
    if (running_mean)
        rt_check_f32(running_mean, C, op, "running mean");
    if (running_var)
        rt_check_f32(running_var, C, op, "running variance");
    return C;
}

void rt_norm_grads_check(const char *op, int64_t n, const rt_tensor *dgamma, const rt_tensor *dbeta)
{
    if (dgamma)
        rt_check_f32(dgamma, n, op, "gamma gradient");
    if (dbeta)
        rt_check_f32(dbeta, n, op, "beta gradient");
}

int64_t rt_batchnorm_bwd_check(const char *op, const rt_comm *comm, const rt_tensor *x,
                               const rt_tensor *gamma, const rt_tensor *saved, const rt_tensor *dy,
                               const rt_tensor *dx, const rt_tensor *dgamma, const rt_tensor *dbeta)
{
    const int64_t C = rt_batchnorm_check(op, comm, x, gamma, saved, dy, "output gradient");
    if (dx)
        rt_check_act(dx, x->numel, op, "input gradient");
    rt_norm_grads_check(op, C, dgamma, dbeta);
    return C;
}

void rt_layernorm_dims(const char *op, const rt_tensor *x, const rt_tensor *gamma,
                       const rt_tensor *saved, int64_t *M, int64_t *D)
{
    rt_check(x, rt_storage_dtype(), -1, op, "input");
    if (x->ndim < 1 || x->shape[x->ndim - 1] == 0)
        rt_fatal(op, "input has no features to normalise (last dimension empty)");
    *D = x->shape[x->ndim - 1];
    *M = x->numel / *D;
    rt_check_f32(gamma, *D, op, "gamma");
    rt_check_f32(saved, 2 * *M, op, "saved");
}

/* ---- GEMM-shaped ops ------------------------------------------------------------------- */

void rt_linear_dims(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t *M, int64_t *in,
                    int64_t *out)
{
    rt_check(x, rt_storage_dtype(), -1, op, "input");
    rt_check(w, RT_F32, 2, op, "weight");
    *out = w->shape[0];
    *in = w->shape[1];
    if (x->ndim < 1 || *in <= 0 || x->shape[x->ndim - 1] != *in)
        rt_fatal(op, "input's last dimension %lld does not match weight in-features %lld",
                 (long long)(x->ndim ? x->shape[x->ndim - 1] : 0), (long long)*in);
    *M = x->numel / *in;
}

void rt_linear_fwd_check(const char *op, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                         const rt_tensor *y, int64_t *M, int64_t *in, int64_t *out)
{
    rt_linear_dims(op, x, w, M, in, out);
    if (b)
        rt_check_f32(b, *out, op, "bias");
    rt_check_act(y, *M * *out, op, "output");
}

void rt_linear_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t M,
                         int64_t out, const rt_tensor *dy, const rt_tensor *dx, const rt_tensor *dw,
                         const rt_tensor *db)
{
    rt_check_act(dy, M * out, op, "output gradient");
    if (dx)
        rt_check_act(dx, x->numel, op, "input gradient");
    if (dw)
        rt_check_f32(dw, w->numel, op, "weight gradient");
    if (db)
        rt_check_f32(db, out, op, "bias gradient");
}

void rt_matmul_bwd_check(const char *op, const rt_tensor *a, const rt_tensor *b,
                         const rt_tensor *dc, const rt_tensor *da, const rt_tensor *db, int64_t *B,
                         int64_t *m, int64_t *k, int64_t *n)
{
    rt_matmul_dims(op, a, b, B, m, k, n);
    rt_check_act(dc, *B * *m * *n, op, "c gradient");
    if (da)
        rt_check_act(da, a->numel, op, "a gradient");
    if (db)
        rt_check_act(db, b->numel, op, "b gradient");
}

void rt_matmul_dims(const char *op, const rt_tensor *a, const rt_tensor *b, int64_t *B, int64_t *m,
                    int64_t *k, int64_t *n)
{
    rt_check(a, rt_storage_dtype(), 3, op, "a");
    rt_check(b, rt_storage_dtype(), 3, op, "b");
    *B = a->shape[0];
    *m = a->shape[1];
    *k = a->shape[2];
    *n = b->shape[2];
    if (b->shape[0] != *B || b->shape[1] != *k)
        rt_fatal(op, "a [%lld,%lld,%lld] and b [%lld,%lld,%lld] do not multiply", (long long)*B,
                 (long long)*m, (long long)*k, (long long)b->shape[0], (long long)b->shape[1],
                 (long long)b->shape[2]);
}

int64_t rt_attention_saved_size(int64_t N, int64_t T, int64_t D, int heads)
{
    return N * T * 3 * D + N * heads * T * T + N * T * D;
}

rt_attn_dims rt_attention_check(const char *op, const rt_tensor *x, const rt_tensor *w_qkv,
                                const rt_tensor *w_o, int heads, const rt_tensor *saved)
{
    rt_check(x, rt_storage_dtype(), 3, op, "input");
    rt_attn_dims d = {x->shape[0], x->shape[1], x->shape[2], heads, 0};
    if (heads <= 0 || d.D % heads)
        rt_fatal(op, "heads=%d must divide the model dimension %lld", heads, (long long)d.D);
    d.hd = d.D / heads;
    rt_check(w_qkv, RT_F32, 2, op, "w_qkv");
    if (w_qkv->shape[0] != 3 * d.D || w_qkv->shape[1] != d.D)
        rt_fatal(op, "w_qkv must be [%lld,%lld]", (long long)(3 * d.D), (long long)d.D);
    rt_check(w_o, RT_F32, 2, op, "w_o");
    if (w_o->shape[0] != d.D || w_o->shape[1] != d.D)
        rt_fatal(op, "w_o must be [%lld,%lld]", (long long)d.D, (long long)d.D);
    rt_check_f32(saved, rt_attention_saved_size(d.N, d.T, d.D, heads), op, "saved");
    return d;
}

void rt_attention_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w_qkv,
                            const rt_tensor *w_o, const rt_attn_dims *d, const rt_tensor *dy,
                            const rt_tensor *dx, const rt_tensor *dw_qkv, const rt_tensor *db_qkv,
                            const rt_tensor *dw_o, const rt_tensor *db_o)
{
    rt_check_act(dy, x->numel, op, "output gradient");
    if (dx)
        rt_check_act(dx, x->numel, op, "input gradient");
    if (dw_qkv)
        rt_check_f32(dw_qkv, w_qkv->numel, op, "w_qkv gradient");
    if (db_qkv)
        rt_check_f32(db_qkv, 3 * d->D, op, "b_qkv gradient");
    if (dw_o)
        rt_check_f32(dw_o, w_o->numel, op, "w_o gradient");
    if (db_o)
        rt_check_f32(db_o, d->D, op, "b_o gradient");
}

/* ---- layout ops ------------------------------------------------------------------------ */

rt_concat_dims rt_concat_check(const char *op, const rt_tensor *y, int n,
                               const rt_tensor *const *xs, int axis)
{
    rt_check(y, rt_storage_dtype(), -1, op, "concatenation");
    if (axis < 0 || axis >= y->ndim)
        rt_fatal(op, "axis %d outside 0..%d", axis, y->ndim - 1);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const rt_tensor *x = xs[i];
        if (!x)
            rt_fatal(op, "part %d is NULL: every part's size is needed", i);
        rt_check(x, rt_storage_dtype(), y->ndim, op, "part");
        for (int k = 0; k < y->ndim; k++)
            if (k != axis && x->shape[k] != y->shape[k])
                rt_fatal(op, "part %d differs from the result in dimension %d", i, k);
        total += x->shape[axis];
    }
    if (total != y->shape[axis])
        rt_fatal(op, "parts add up to %lld along axis %d, result has %lld", (long long)total, axis,
                 (long long)y->shape[axis]);
    rt_concat_dims d = {rt_dims_prod(y->shape, 0, axis), rt_dims_prod(y->shape, axis + 1, y->ndim),
                        0};
    d.row = y->shape[axis] * d.inner;
    return d;
}

void rt_transpose_check(const char *op, const rt_tensor *x, int *a0, int *a1, const rt_tensor *y)
{
    rt_check(x, rt_storage_dtype(), -1, op, "input");
    rt_check(y, rt_storage_dtype(), x->ndim, op, "output");
    if (*a0 > *a1) {
        int t = *a0;
        *a0 = *a1;
        *a1 = t;
    }
    if (*a0 < 0 || *a1 >= x->ndim)
        rt_fatal(op, "axes %d,%d outside 0..%d", *a0, *a1, x->ndim - 1);
    for (int k = 0; k < x->ndim; k++) {
        int src = k == *a0 ? *a1 : k == *a1 ? *a0 : k;
        if (y->shape[k] != x->shape[src])
            rt_fatal(op, "output dimension %d is %lld, expected %lld", k, (long long)y->shape[k],
                     (long long)x->shape[src]);
    }
}

void rt_softmax_dims(const char *op, const rt_tensor *x, int axis, int64_t *outer, int64_t *dim,
                     int64_t *inner)
{
    rt_check(x, rt_storage_dtype(), -1, op, "input");
    if (axis < 0 || axis >= x->ndim)
        rt_fatal(op, "axis %d outside 0..%d", axis, x->ndim - 1);
    *outer = rt_dims_prod(x->shape, 0, axis);
    *dim = x->shape[axis];
    *inner = rt_dims_prod(x->shape, axis + 1, x->ndim);
}

void rt_softmax_bwd_check(const char *op, const rt_tensor *y, const rt_tensor *dy, int axis,
                          const rt_tensor *dx, int64_t *outer, int64_t *dim, int64_t *inner)
{
    rt_softmax_dims(op, y, axis, outer, dim, inner);
    rt_same_numel(op, y, "output", dy, "output gradient");
    rt_same_numel(op, y, "output", dx, "input gradient");
}

/* ---- embedding and loss ---------------------------------------------------------------- */

void rt_embedding_dims(const char *op, const rt_tensor *tokens, const rt_tensor *w,
                       const rt_tensor *pos, const rt_tensor *y, int64_t *NT, int64_t *T,
                       int64_t *D)
{
    rt_check(tokens, RT_I32, -1, op, "tokens");
    rt_check(w, RT_F32, 2, op, "table");
    *D = w->shape[1];
    *NT = tokens->numel;
    *T = tokens->ndim >= 2 ? tokens->shape[tokens->ndim - 1] : tokens->numel;
    rt_check_act(y, *NT * *D, op, "output");
    if (pos) {
        rt_check(pos, RT_F32, 2, op, "positional table");
        if (pos->shape[1] != *D || pos->shape[0] < *T)
            rt_fatal(op, "positional table [%lld,%lld] too small for %lld positions of %lld",
                     (long long)pos->shape[0], (long long)pos->shape[1], (long long)*T,
                     (long long)*D);
    }
}

void rt_tokens_dims(const char *op, const rt_tensor *x, int cls, const rt_tensor *tok,
                    const rt_tensor *pos, const rt_tensor *y, int64_t *N, int64_t *T, int64_t *D)
{
    rt_check(y, rt_storage_dtype(), 3, op, "output");
    *N = y->shape[0];
    *D = y->shape[2];
    if (cls != 0 && cls != 1)
        rt_fatal(op, "cls is %d, not 0 or 1", cls);
    if (y->shape[1] <= cls)
        rt_fatal(op, "output of %lld rows per sample holds no input row", (long long)y->shape[1]);
    *T = y->shape[1] - cls;
    if (tok) {
        rt_check(tok, RT_F32, 1, op, "class token");
        if (!cls || tok->shape[0] != *D)
            rt_fatal(op, "class token of %lld for rows of %lld%s", (long long)tok->shape[0],
                     (long long)*D, cls ? "" : " without cls");
    }
    if (pos) {
        rt_check(pos, RT_F32, 2, op, "positions");
        if (pos->shape[0] != y->shape[1] || pos->shape[1] != *D)
            rt_fatal(op, "positions [%lld,%lld] for %lld rows of %lld", (long long)pos->shape[0],
                     (long long)pos->shape[1], (long long)y->shape[1], (long long)*D);
    }
    if (x)
        rt_check_act(x, *N * *T * *D, op, "input");
}

static void rows_of(const char *op, const rt_tensor *logits, const rt_tensor *labels, int64_t *M,
                    int64_t *C)
{
    rt_check(logits, rt_storage_dtype(), -1, op, "logits");
    rt_check(labels, RT_I32, -1, op, "labels");
    *C = logits->ndim ? logits->shape[logits->ndim - 1] : 0;
    if (*C <= 0)
        rt_fatal(op, "logits have no classes");
    *M = logits->numel / *C;
    rt_check_numel(labels, *M, op, "labels");
}

void rt_cross_entropy_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t global_count, int64_t *M, int64_t *C)
{
    rows_of(op, logits, labels, M, C);
    if (global_count < *M || global_count <= 0)
        rt_fatal(op, "global row count %lld is smaller than this shard's %lld rows",
                 (long long)global_count, (long long)*M);
}

float rt_cross_entropy_factor(int64_t global_count, float scale)
{
    return 1.0f / (float)global_count * scale;
}

void rt_correct_count_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t *M, int64_t *C)
{
    rows_of(op, logits, labels, M, C);
}
