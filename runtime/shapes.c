/* shapes.c: the argument checks that every backend's kernels share: dimensions are
 * read from the tensors' host-side shapes, validated, and derived sizes returned, so a
 * CPU kernel and its CUDA counterpart reject the same calls with the same messages.
 * Checks that read tensor data (token ids, labels) stay with the CPU kernels, whose
 * data is in host memory. Compiled into both the CPU and the CUDA runtime. */
#include "internal.h"

int64_t rt_dims_prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++)
        p *= shape[i];
    return p;
}

void rt_concat_check(const char *op, const rt_tensor *y, int n, const rt_tensor *const *xs,
                     int axis)
{
    rt_check(y, RT_F32, -1, op, "concatenation");
    if (axis < 0 || axis >= y->ndim)
        rt_fatal(op, "axis %d outside 0..%d", axis, y->ndim - 1);
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        const rt_tensor *x = xs[i];
        if (!x)
            continue;
        rt_check(x, RT_F32, y->ndim, op, "part");
        for (int k = 0; k < y->ndim; k++)
            if (k != axis && x->shape[k] != y->shape[k])
                rt_fatal(op, "part %d differs from the result in dimension %d", i, k);
        total += x->shape[axis];
    }
    if (total > y->shape[axis])
        rt_fatal(op, "parts add up to %lld along axis %d, result has %lld", (long long)total, axis,
                 (long long)y->shape[axis]);
}

void rt_transpose_check(const char *op, const rt_tensor *x, int *a0, int *a1, const rt_tensor *y)
{
    rt_check(x, RT_F32, -1, op, "input");
    rt_check(y, RT_F32, x->ndim, op, "output");
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
    rt_check(x, RT_F32, -1, op, "input");
    if (axis < 0 || axis >= x->ndim)
        rt_fatal(op, "axis %d outside 0..%d", axis, x->ndim - 1);
    *outer = rt_dims_prod(x->shape, 0, axis);
    *dim = x->shape[axis];
    *inner = rt_dims_prod(x->shape, axis + 1, x->ndim);
}

void rt_linear_dims(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t *M, int64_t *in,
                    int64_t *out)
{
    rt_check(x, RT_F32, -1, op, "input");
    rt_check(w, RT_F32, 2, op, "weight");
    *out = w->shape[0];
    *in = w->shape[1];
    if (x->ndim < 1 || *in <= 0 || x->shape[x->ndim - 1] != *in)
        rt_fatal(op, "input's last dimension %lld does not match weight in-features %lld",
                 (long long)(x->ndim ? x->shape[x->ndim - 1] : 0), (long long)*in);
    *M = x->numel / *in;
}

void rt_matmul_dims(const char *op, const rt_tensor *a, const rt_tensor *b, int64_t *B, int64_t *m,
                    int64_t *k, int64_t *n)
{
    rt_check(a, RT_F32, 3, op, "a");
    rt_check(b, RT_F32, 3, op, "b");
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
    rt_check(x, RT_F32, 3, op, "input");
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
    rt_check(saved, RT_F32, -1, op, "saved");
    rt_check_numel(saved, rt_attention_saved_size(d.N, d.T, d.D, heads), op, "saved");
    return d;
}

void rt_embedding_dims(const char *op, const rt_tensor *tokens, const rt_tensor *w,
                       const rt_tensor *pos, const rt_tensor *y, int64_t *NT, int64_t *T,
                       int64_t *D)
{
    rt_check(tokens, RT_I32, -1, op, "tokens");
    rt_check(w, RT_F32, 2, op, "table");
    *D = w->shape[1];
    *NT = tokens->numel;
    *T = tokens->ndim >= 2 ? tokens->shape[tokens->ndim - 1] : tokens->numel;
    rt_check_numel(y, *NT * *D, op, "output");
    if (pos) {
        rt_check(pos, RT_F32, 2, op, "positional table");
        if (pos->shape[1] != *D || pos->shape[0] < *T)
            rt_fatal(op, "positional table [%lld,%lld] too small for %lld positions of %lld",
                     (long long)pos->shape[0], (long long)pos->shape[1], (long long)*T,
                     (long long)*D);
    }
}

void rt_cross_entropy_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t global_count, int64_t *M, int64_t *C)
{
    rt_check(logits, RT_F32, -1, op, "logits");
    rt_check(labels, RT_I32, -1, op, "labels");
    *C = logits->ndim ? logits->shape[logits->ndim - 1] : 0;
    if (*C <= 0)
        rt_fatal(op, "logits have no classes");
    *M = logits->numel / *C;
    rt_check_numel(labels, *M, op, "labels");
    if (global_count < *M || global_count <= 0)
        rt_fatal(op, "global row count %lld is smaller than this shard's %lld rows",
                 (long long)global_count, (long long)*M);
}
