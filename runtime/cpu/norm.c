/* cpu/norm.c: batch normalisation (training and inference) and layer normalisation on the
 * CPU, as vectorised f32 loops threaded over channels (OpenMP, the rank's thread count).
 *
 * Batchnorm's statistics take two passes, the numerically sound way, each accumulating a
 * plane of H*W values in 16 independent f32 lanes (vector registers) and adding the
 * planes' partial sums in double: the mean, from the values shifted by the channel's first
 * value (so that a large common offset does not swamp the f32 sums), then the squared
 * deviations from the mean rounded to f32, corrected by the rounding (sum (x - m)^2 =
 * sum (x - m32)^2 - n (m - m32)^2); never E[x^2] - E[x]^2, which cancels. The output is
 * (x - m32) * gamma * invstd + (beta - (m - m32) * gamma * invstd), exact near the mean.
 * With SyncBN each rank computes its shard's mean and squared deviations so, and one
 * all-reduce (used as an all-gather) gives every rank every shard's, merged in rank order
 * with Chan's formula: one collective per forward, the same statistics on every rank, and
 * what one rank computes up to rounding. Without other ranks (comm NULL or a
 * one-rank set) the passes of a channel run back to back, so that the later ones find it
 * in the cache.
 *
 * oneDNN's batch normalisation is not used: on the runtime's NCHW tensors it runs its
 * generic kernel (ncsp_bnorm), five to seven times slower than these loops on the
 * development machine; its fast kernels need a blocked layout (two reorders per call would
 * cost more than they save); and SyncBN needs its sums between the passes. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 16 f32 lanes: one AVX-512 register, two AVX2 ones, four SSE ones (GCC/Clang vector
 * extensions, so the reductions keep their partial sums in registers). */
#define LANES 16
typedef float lanes __attribute__((vector_size(LANES * sizeof(float))));

/* Values of a vector of lanes are loaded with memcpy (no alignment needed) and summed
 * across the lanes in double; macros, since a function passing a 64-byte vector would
 * depend on the ABI of the clone it is called from. */
#define LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define TOTAL(s, v)                        \
    do {                                   \
        for (int j_ = 0; j_ < LANES; j_++) \
            (s) += (v)[j_];                \
    } while (0)

/* Sum of p - k over p[0..n). */
RT_VECTOR static double plane_sum(const float *restrict p, int64_t n, float k)
{
    lanes acc = {0}, v;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        LOAD(v, p + i);
        acc += v - k;
    }
    float tail = 0.0f;
    for (; i < n; i++)
        tail += p[i] - k;
    double s = tail;
    TOTAL(s, acc);
    return s;
}

/* Sum of (p - m)^2 over p[0..n). */
RT_VECTOR static double plane_ssd(const float *restrict p, int64_t n, float m)
{
    lanes acc = {0}, v;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        LOAD(v, p + i);
        v -= m;
        acc += v * v;
    }
    float tail = 0.0f;
    for (; i < n; i++)
        tail += (p[i] - m) * (p[i] - m);
    double s = tail;
    TOTAL(s, acc);
    return s;
}

/* Sums of g and of g * (p - m) over [0..n). */
RT_VECTOR static void plane_dot(const float *restrict p, const float *restrict g, int64_t n,
                                float m, double *sg, double *sgx)
{
    lanes a = {0}, b = {0}, gv, pv;
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        LOAD(gv, g + i);
        LOAD(pv, p + i);
        a += gv;
        b += gv * (pv - m);
    }
    float ta = 0.0f, tb = 0.0f;
    for (; i < n; i++) {
        ta += g[i];
        tb += g[i] * (p[i] - m);
    }
    double s1 = ta, s2 = tb;
    TOTAL(s1, a);
    TOTAL(s2, b);
    *sg += s1;
    *sgx += s2;
}

/* q = (p - m) * sc + sh */
RT_VECTOR static void plane_affine(const float *restrict p, float *restrict q, int64_t n, float m,
                                   float sc, float sh)
{
    for (int64_t i = 0; i < n; i++)
        q[i] = (p[i] - m) * sc + sh;
}

/* d = k * (g - mdy - (p - m) * invstd * mdyx) */
RT_VECTOR static void plane_dx(const float *restrict p, const float *restrict g, float *restrict d,
                               int64_t n, float m, float invstd, float k, float mdy, float mdyx)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = k * (g[i] - mdy - (p[i] - m) * invstd * mdyx);
}

/* Enough work per channel to be worth a thread. */
static bool parallel(int64_t C, int64_t per_channel)
{
    return C > 1 && per_channel * C >= 32768;
}

/* One batchnorm call: the tensors and the per-channel sums the passes share. */
typedef struct bn_call {
    int64_t N, C, HW;
    const float *x, *dy, *gamma, *beta;
    float *y, *dx, *mean, *invstd, *running_mean, *running_var, *dgamma, *dbeta;
    float momentum, eps;
    double *sums, *mean64; /* [C+1] (or [2C+1] backward), [C] */
} bn_call;

/* The passes over one channel. */
static void bn_sum(const bn_call *b, int64_t c)
{
    const float shift = b->N > 0 && b->HW > 0 ? b->x[c * b->HW] : 0.0f;
    double s = 0.0;
    for (int64_t n = 0; n < b->N; n++)
        s += plane_sum(b->x + (n * b->C + c) * b->HW, b->HW, shift);
    b->sums[c] = s + (double)shift * (double)(b->N * b->HW);
}

static void bn_mean(const bn_call *b, int64_t c, double count)
{
    b->mean64[c] = b->sums[c] / count;
    b->mean[c] = (float)b->mean64[c];
}

/* sums[c]: the sum of squared deviations from mean64 over this shard, from those from the
 * f32 mean less the rounding's share: sum (x - m)^2 = sum (x - m32)^2 - n (m - m32)^2. */
static void bn_ssd(const bn_call *b, int64_t c)
{
    double ss = 0.0;
    for (int64_t n = 0; n < b->N; n++)
        ss += plane_ssd(b->x + (n * b->C + c) * b->HW, b->HW, b->mean[c]);
    const double off = b->mean64[c] - (double)b->mean[c];
    ss -= (double)(b->N * b->HW) * off * off;
    b->sums[c] = ss > 0.0 ? ss : 0.0;
}

/* From mean64 and sums[c] = the sum of squared deviations over count values. */
static void bn_apply(const bn_call *b, int64_t c, double count)
{
    const double off = b->mean64[c] - (double)b->mean[c]; /* the f32 mean's rounding */
    const double m2 = b->sums[c];
    const double var = m2 / count;
    b->invstd[c] = (float)(1.0 / sqrt(var + b->eps));
    const float mo = b->momentum;
    if (b->running_mean)
        b->running_mean[c] = (1.0f - mo) * b->running_mean[c] + mo * b->mean[c];
    if (b->running_var) {
        const double unbiased = count > 1 ? m2 / (count - 1) : var;
        b->running_var[c] = (1.0f - mo) * b->running_var[c] + mo * (float)unbiased;
    }
    /* y = (x - mean32) sc + (beta - off sc): the shift makes up for the f32 mean. */
    const float sc = b->gamma[c] * b->invstd[c];
    const float sh = (float)(b->beta[c] - off * sc);
    for (int64_t n = 0; n < b->N; n++)
        plane_affine(b->x + (n * b->C + c) * b->HW, b->y + (n * b->C + c) * b->HW, b->HW,
                     b->mean[c], sc, sh);
}

/* Sums of dy and dy * xhat; this shard's part of dgamma and dbeta. */
static void bn_dsum(const bn_call *b, int64_t c)
{
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t n = 0; n < b->N; n++)
        plane_dot(b->x + (n * b->C + c) * b->HW, b->dy + (n * b->C + c) * b->HW, b->HW, b->mean[c],
                  &sdy, &sdyx);
    sdyx *= b->invstd[c];
    /* The parameter gradients take this shard's part; the gradient all-reduce over the
     * layer's ranks adds the others. */
    if (b->dgamma)
        b->dgamma[c] += (float)sdyx;
    if (b->dbeta)
        b->dbeta[c] += (float)sdy;
    b->sums[c] = sdy;
    b->sums[b->C + c] = sdyx;
}

static void bn_dx(const bn_call *b, int64_t c, double count)
{
    const float k = b->gamma[c] * b->invstd[c];
    const float mdy = (float)(b->sums[c] / count), mdyx = (float)(b->sums[b->C + c] / count);
    for (int64_t n = 0; n < b->N; n++)
        plane_dx(b->x + (n * b->C + c) * b->HW, b->dy + (n * b->C + c) * b->HW,
                 b->dx + (n * b->C + c) * b->HW, b->HW, b->mean[c], b->invstd[c], k, mdy, mdyx);
}

/* No other rank's sums are needed. */
static bool local(const rt_comm *comm)
{
    return !comm || rt_comm_size(comm) == 1;
}

static void batchnorm_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                          const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                          float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    const char *op = "batchnorm2d_fwd";
    const int64_t C =
        rt_batchnorm_fwd_check(op, comm, x, gamma, beta, running_mean, running_var, saved, y);
    if (!saved)
        rt_fatal(op, "no tensor for the saved statistics (training needs one)");
    bn_call b = {.N = x->shape[0],
                 .C = C,
                 .HW = x->shape[2] * x->shape[3],
                 .x = rt_f32(x),
                 .gamma = rt_f32(gamma),
                 .beta = rt_f32(beta),
                 .y = rt_f32(y),
                 .mean = rt_f32(saved),
                 .invstd = rt_f32(saved) + C,
                 .running_mean = running_mean ? rt_f32(running_mean) : NULL,
                 .running_var = running_var ? rt_f32(running_var) : NULL,
                 .momentum = momentum,
                 .eps = eps};
    /* sums[c]: sum of x, then of (x - mean)^2; sums[C]: the element count. */
    b.sums = rt_xcalloc((size_t)C + 1, sizeof(double), op);
    b.mean64 = rt_xcalloc((size_t)C + 1, sizeof(double), op);
    const bool par = parallel(C, b.N * b.HW);
    if (local(comm)) {
        const double count = (double)(b.N * b.HW);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t c = 0; c < C; c++) {
            bn_sum(&b, c);
            bn_mean(&b, c, count);
            bn_ssd(&b, c);
            bn_apply(&b, c, count);
        }
    } else {
        /* Each rank's count, mean and squared deviations per channel, in its slot of an
         * all-reduced array (an all-gather: the other slots are zero), merged in rank order
         * with Chan's formula, so every rank computes the same statistics. */
        const int k = rt_comm_size(comm), me = rt_comm_index(comm);
        const int64_t slot = 2 * C + 1;
        const double mine = (double)(b.N * b.HW);
        double *all = rt_xcalloc((size_t)k * (size_t)slot, sizeof(double), op);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t c = 0; c < C; c++) {
            bn_sum(&b, c);
            bn_mean(&b, c, mine > 0 ? mine : 1.0);
            bn_ssd(&b, c);
            all[me * slot + 1 + c] = b.mean64[c];
            all[me * slot + 1 + C + c] = b.sums[c];
        }
        all[me * slot] = mine;
        rt_allreduce_f64(comm, all, k * slot, op);
        double count = 0.0;
        for (int r = 0; r < k; r++)
            count += all[r * slot];
        if (count == 0)
            rt_fatal(op, "empty batch: batchnorm needs at least one sample");
        for (int64_t c = 0; c < C; c++) {
            double n = 0.0, m = 0.0, m2 = 0.0;
            for (int r = 0; r < k; r++) {
                const double nr = all[r * slot];
                if (nr == 0)
                    continue;
                const double d = all[r * slot + 1 + c] - m, t = n + nr;
                m += d * nr / t;
                m2 += all[r * slot + 1 + C + c] + d * d * n * nr / t;
                n = t;
            }
            b.mean64[c] = m;
            b.mean[c] = (float)m;
            b.sums[c] = m2;
        }
        free(all);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t c = 0; c < C; c++)
            bn_apply(&b, c, count);
    }
    free(b.mean64);
    free(b.sums);
}

static void batchnorm_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                          const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                          rt_tensor *dgamma, rt_tensor *dbeta)
{
    const char *op = "batchnorm2d_bwd";
    const int64_t C = rt_batchnorm_bwd_check(op, comm, x, gamma, saved, dy, dx, dgamma, dbeta);
    bn_call b = {.N = x->shape[0],
                 .C = C,
                 .HW = x->shape[2] * x->shape[3],
                 .x = rt_f32(x),
                 .dy = rt_f32(dy),
                 .gamma = rt_f32(gamma),
                 .dx = dx ? rt_f32(dx) : NULL,
                 .mean = rt_f32(saved),
                 .invstd = rt_f32(saved) + C,
                 .dgamma = dgamma ? rt_f32(dgamma) : NULL,
                 .dbeta = dbeta ? rt_f32(dbeta) : NULL};
    /* sums: sum(dy) per channel, sum(dy * xhat) per channel, the count. */
    b.sums = rt_xcalloc(2 * (size_t)C + 1, sizeof(double), op);
    const bool par = parallel(C, b.N * b.HW);
    if (local(comm)) {
        const double count = (double)(b.N * b.HW);
#pragma omp parallel for schedule(static) if (par)
        for (int64_t c = 0; c < C; c++) {
            bn_dsum(&b, c);
            if (b.dx)
                bn_dx(&b, c, count);
        }
    } else {
#pragma omp parallel for schedule(static) if (par)
        for (int64_t c = 0; c < C; c++)
            bn_dsum(&b, c);
        b.sums[2 * C] = (double)(b.N * b.HW);
        if (dx) {
            rt_allreduce_f64(comm, b.sums, 2 * C + 1, op);
            const double count = b.sums[2 * C];
#pragma omp parallel for schedule(static) if (par)
            for (int64_t c = 0; c < C; c++)
                bn_dx(&b, c, count);
        }
    }
    free(b.sums);
}

void rt_batchnorm2d_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                        rt_tensor *running_mean, rt_tensor *running_var, float momentum, float eps,
                        rt_tensor *saved, rt_tensor *y)
{
    batchnorm_fwd(NULL, x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}

void rt_batchnorm2d_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                        const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta)
{
    batchnorm_bwd(NULL, x, gamma, saved, dy, dx, dgamma, dbeta);
}

void rt_batchnorm2d_sync_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                             float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    batchnorm_fwd(comm, x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}

void rt_batchnorm2d_sync_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                             rt_tensor *dgamma, rt_tensor *dbeta)
{
    batchnorm_bwd(comm, x, gamma, saved, dy, dx, dgamma, dbeta);
}

void rt_batchnorm2d_infer(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                          const rt_tensor *running_mean, const rt_tensor *running_var, float eps,
                          rt_tensor *y)
{
    const char *op = "batchnorm2d_infer";
    rt_check(running_mean, RT_F32, -1, op, "running mean");
    rt_check(running_var, RT_F32, -1, op, "running variance");
    const int64_t C =
        rt_batchnorm_fwd_check(op, NULL, x, gamma, beta, running_mean, running_var, NULL, y);
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
#pragma omp parallel for schedule(static) if (parallel(C, N * HW))
    for (int64_t c = 0; c < C; c++) {
        const float sc = rt_f32(gamma)[c] / sqrtf(rt_f32(running_var)[c] + eps);
        for (int64_t n = 0; n < N; n++)
            plane_affine(rt_f32(x) + (n * C + c) * HW, rt_f32(y) + (n * C + c) * HW, HW,
                         rt_f32(running_mean)[c], sc, rt_f32(beta)[c]);
    }
}

void rt_layernorm_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta, float eps,
                      rt_tensor *saved, rt_tensor *y)
{
    const char *op = "layernorm_fwd";
    int64_t M, D;
    rt_layernorm_dims(op, x, gamma, saved, &M, &D);
    rt_check_f32(beta, D, op, "beta");
    rt_check_act(y, x->numel, op, "output");
    float *mean = rt_f32(saved), *rstd = mean + M;
    const float *g = rt_f32(gamma), *b = rt_f32(beta);
    for (int64_t m = 0; m < M; m++) {
        const float *p = rt_f32(x) + m * D;
        float *q = rt_f32(y) + m * D;
        double s = 0.0, ss = 0.0;
        for (int64_t i = 0; i < D; i++)
            s += p[i];
        double mu = s / (double)D;
        for (int64_t i = 0; i < D; i++)
            ss += (p[i] - mu) * (p[i] - mu);
        float r = (float)(1.0 / sqrt(ss / (double)D + eps));
        mean[m] = (float)mu;
        rstd[m] = r;
        for (int64_t i = 0; i < D; i++)
            q[i] = (p[i] - mean[m]) * r * g[i] + b[i];
    }
}

void rt_layernorm_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                      const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta)
{
    const char *op = "layernorm_bwd";
    int64_t M, D;
    rt_layernorm_dims(op, x, gamma, saved, &M, &D);
    rt_norm_grads_check(op, D, dgamma, dbeta);
    rt_check_act(dy, x->numel, op, "output gradient");
    if (dx)
        rt_check_act(dx, x->numel, op, "input gradient");
    const float *mean = rt_f32(saved), *rstd = mean + M, *g = rt_f32(gamma);
    for (int64_t m = 0; m < M; m++) {
        const float *p = rt_f32(x) + m * D, *gy = rt_f32(dy) + m * D;
        double a = 0.0, bsum = 0.0;
        for (int64_t i = 0; i < D; i++) {
            float xhat = (p[i] - mean[m]) * rstd[m];
            float gg = gy[i] * g[i];
            a += gg;
            bsum += gg * xhat;
            if (dgamma)
                rt_f32(dgamma)[i] += gy[i] * xhat;
            if (dbeta)
                rt_f32(dbeta)[i] += gy[i];
        }
        if (!dx)
            continue;
        const float ma = (float)(a / (double)D), mb = (float)(bsum / (double)D);
        float *d = rt_f32(dx) + m * D;
        for (int64_t i = 0; i < D; i++) {
            float xhat = (p[i] - mean[m]) * rstd[m];
            d[i] = rstd[m] * (gy[i] * g[i] - ma - xhat * mb);
        }
    }
}
