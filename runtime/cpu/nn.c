/* cpu/nn.c: token + positional embedding, a vision transformer's tokens (class token and
 * positions) and the cross-entropy loss on the CPU. The loss divides by the GLOBAL row count so
 * that per-rank gradients are slices of the full-batch gradient; its loops are branch-free (selects, not branches) so that they vectorise. */
#include "../internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- embedding ------------------------------------------------------------------------- */

/* The shapes (shared with the CUDA backend), then the token ids, which only a
 * backend with host data can read cheaply. */
static void embedding_check(const char *op, const rt_tensor *tokens, const rt_tensor *w,
                            const rt_tensor *pos, const rt_tensor *y, int64_t *NT, int64_t *T,
                            int64_t *D)
{
    rt_embedding_dims(op, tokens, w, pos, y, NT, T, D);
    const int32_t *tok = rt_i32(tokens);
    for (int64_t i = 0; i < *NT; i++)
        if (tok[i] < 0 || tok[i] >= w->shape[0])
            rt_fatal(op, "token %d at position %lld outside the vocabulary of %lld", tok[i],
                     (long long)i, (long long)w->shape[0]);
}

void rt_embedding_fwd(const rt_tensor *tokens, const rt_tensor *w, const rt_tensor *pos,
                      rt_tensor *y)
{
    int64_t NT, T, D;
    embedding_check("embedding_fwd", tokens, w, pos, y, &NT, &T, &D);
    for (int64_t i = 0; i < NT; i++) {
        const float *row = rt_f32(w) + (int64_t)rt_i32(tokens)[i] * D;
        float *out = rt_f32(y) + i * D;
        if (pos) {
            const float *pr = rt_f32(pos) + (i % T) * D;
            for (int64_t k = 0; k < D; k++)
                out[k] = row[k] + pr[k];
        } else {
            memcpy(out, row, (size_t)D * sizeof(float));
        }
    }
}

void rt_embedding_bwd(const rt_tensor *tokens, const rt_tensor *dy, rt_tensor *dw, rt_tensor *dpos)
{
    int64_t NT, T, D;
    embedding_check("embedding_bwd", tokens, dw, dpos, dy, &NT, &T, &D);
    for (int64_t i = 0; i < NT; i++) {
        const float *g = rt_f32(dy) + i * D;
        float *row = rt_f32(dw) + (int64_t)rt_i32(tokens)[i] * D;
        for (int64_t k = 0; k < D; k++)
            row[k] += g[k];
        if (dpos) {
            float *pr = rt_f32(dpos) + (i % T) * D;
            for (int64_t k = 0; k < D; k++)
                pr[k] += g[k];
        }
    }
}

/* ---- tokens ---------------------------------------------------------------------------- */

void rt_tokens_fwd(const rt_tensor *x, int cls, const rt_tensor *tok, const rt_tensor *pos,
                   rt_tensor *y)
{
    int64_t N, T, D;
    rt_tokens_dims("tokens_fwd", x, cls, tok, pos, y, &N, &T, &D);
    if (cls && !tok)
        rt_fatal("tokens_fwd", "cls without a class token");
    const int64_t rows = T + cls;
    for (int64_t n = 0; n < N; n++) {
        float *out = rt_f32(y) + n * rows * D;
        if (cls)
            memcpy(out, rt_f32(tok), (size_t)D * sizeof(float));
        memcpy(out + cls * D, rt_f32(x) + n * T * D, (size_t)(T * D) * sizeof(float));
        if (pos)
            for (int64_t i = 0; i < rows * D; i++)
                out[i] += rt_f32(pos)[i];
    }
}

void rt_tokens_bwd(const rt_tensor *dy, int cls, rt_tensor *dx, rt_tensor *dtok, rt_tensor *dpos)
{
    int64_t N, T, D;
    rt_tokens_dims("tokens_bwd", dx, cls, dtok, dpos, dy, &N, &T, &D);
    const int64_t rows = T + cls;
    for (int64_t n = 0; n < N; n++) {
        const float *g = rt_f32(dy) + n * rows * D;
        if (dx)
            memcpy(rt_f32(dx) + n * T * D, g + cls * D, (size_t)(T * D) * sizeof(float));
        if (dtok)
            for (int64_t k = 0; k < D; k++)
                rt_f32(dtok)[k] += g[k];
        if (dpos)
            for (int64_t i = 0; i < rows * D; i++)
                rt_f32(dpos)[i] += g[i];
    }
}

/* Rows are spread over the rank's threads when there are this many values (a language
 * model's vocabulary; a classifier's few classes stay on one thread). */
#define PARALLEL_MIN ((int64_t)1 << 16)

/* ---- loss ------------------------------------------------------------------------------ */

/* The labels are in host memory here: check their range (the CUDA backend does it on the
 * device). */
static void labels_in_range(const char *op, const rt_tensor *labels, int64_t M, int64_t C)
{
    for (int64_t m = 0; m < M; m++)
        if (rt_i32(labels)[m] < 0 || rt_i32(labels)[m] >= C)
            rt_fatal(op, "label %d of row %lld outside 0..%lld", rt_i32(labels)[m], (long long)m,
                     (long long)(C - 1));
}

double rt_cross_entropy_fwd(const rt_tensor *logits, const rt_tensor *labels, int64_t global_count)
{
    int64_t M, C;
    rt_cross_entropy_dims("cross_entropy_fwd", logits, labels, global_count, &M, &C);
    labels_in_range("cross_entropy_fwd", labels, M, C);
    double total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (M > 1 && M * C >= PARALLEL_MIN)
    for (int64_t m = 0; m < M; m++) {
        const float *z = rt_f32(logits) + m * C;
        float mx = z[0];
        for (int64_t c = 1; c < C; c++)
            mx = z[c] > mx ? z[c] : mx;
        double s = 0.0;
        for (int64_t c = 0; c < C; c++)
            s += exp((double)(z[c] - mx));
        total += log(s) + mx - z[rt_i32(labels)[m]];
    }
    return total / (double)global_count;
}

/* dlogits = (softmax - onehot) / global_count * scale, one rounding per element. */
static void cross_entropy_bwd(const rt_tensor *logits, const rt_tensor *labels,
                              int64_t global_count, float scale, rt_tensor *dlogits)
{
    const char *op = "cross_entropy_bwd";
    int64_t M, C;
    rt_cross_entropy_dims(op, logits, labels, global_count, &M, &C);
    labels_in_range(op, labels, M, C);
    rt_check_act(dlogits, logits->numel, op, "logits gradient");
    const float inv = rt_cross_entropy_factor(global_count, scale);
#pragma omp parallel for schedule(static) if (M > 1 && M * C >= PARALLEL_MIN)
    for (int64_t m = 0; m < M; m++) {
        const float *z = rt_f32(logits) + m * C;
        float *d = rt_f32(dlogits) + m * C;
        float mx = z[0], s = 0.0f;
        for (int64_t c = 1; c < C; c++)
            mx = z[c] > mx ? z[c] : mx;
        for (int64_t c = 0; c < C; c++) {
            d[c] = expf(z[c] - mx);
            s += d[c];
        }
        const float k = inv / s;
        for (int64_t c = 0; c < C; c++)
            d[c] *= k;
        d[rt_i32(labels)[m]] -= inv;
    }
}

void rt_cross_entropy_bwd(const rt_tensor *logits, const rt_tensor *labels, int64_t global_count,
                          rt_tensor *dlogits)
{
    cross_entropy_bwd(logits, labels, global_count, 1.0f, dlogits);
}

void rt_cross_entropy_bwd_scaled(const rt_tensor *logits, const rt_tensor *labels,
                                 int64_t global_count, rt_tensor *dlogits)
{
    cross_entropy_bwd(logits, labels, global_count, (float)rt_loss_scale(), dlogits);
}

int64_t rt_correct_count(const rt_tensor *logits, const rt_tensor *labels)
{
    int64_t M, C;
    rt_correct_count_dims("correct_count", logits, labels, &M, &C);
    labels_in_range("correct_count", labels, M, C);
    int64_t ok = 0;
    for (int64_t m = 0; m < M; m++) {
        const float *z = rt_f32(logits) + m * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++)
            if (z[c] > z[best])
                best = c;
        ok += best == rt_i32(labels)[m];
    }
    return ok;
}
