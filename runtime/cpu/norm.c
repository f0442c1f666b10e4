/* cpu/norm.c: batch normalisation (training and inference) and layer normalisation on the
 * CPU, as vectorised f32 loops threaded over channels (OpenMP, the rank's thread count).
 *
 * Batchnorm's statistics take two passes, the numerically sound way, each accumulating a
 * plane of H*W values in 16 independent f32 lanes (the vector registers) and adding the
 * planes' partial sums in double: the mean, from the values shifted by the channel's first
 * value (so that a large common offset does not swamp the f32 sums), then the squared
 * deviations from the mean rounded to f32, corrected by the rounding (sum (x - m)^2 =
 * sum (x - m32)^2 - n (m - m32)^2); never E[x^2] - E[x]^2, which cancels. The sums of
 * the rank set are all-reduced between the passes (SyncBN; a one-rank set or comm NULL
 * skips it): the same passes and all-reduces whatever the number of ranks, so that a plan
 * on many ranks computes what one rank computes, up to the order of the additions. The
 * output is (x - mean32) * gamma * invstd + (beta - (mean - mean32) * gamma * invstd), exact
 * near the mean. oneDNN's batch
 * normalisation is not used: on the runtime's NCHW tensors it runs its generic kernel
 * (ncsp_bnorm), five to seven times slower than these loops on the development machine;
 * its fast kernels need a blocked layout (two reorders per call would cost more than they
 * save); and SyncBN needs its sums between the passes. */
#include "cpu.h"

#include <math.h>
#include <stdlib.h>

#define LANES 16

/* Sum of p - k over p[0..n). */
RT_VECTOR static double plane_sum(const float *restrict p, int64_t n, float k)
{
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] += p[i + j] - k;
    float tail = 0.0f;
    for (; i < n; i++)
        tail += p[i] - k;
    double s = tail;
    for (int j = 0; j < LANES; j++)
        s += acc[j];
    return s;
}

/* Sum of (p - m)^2 over p[0..n). */
RT_VECTOR static double plane_ssd(const float *restrict p, int64_t n, float m)
{
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            const float d = p[i + j] - m;
            acc[j] += d * d;
        }
    float tail = 0.0f;
    for (; i < n; i++)
        tail += (p[i] - m) * (p[i] - m);
    double s = tail;
    for (int j = 0; j < LANES; j++)
        s += acc[j];
    return s;
}

/* Sums of g and of g * (p - m) over [0..n). */
RT_VECTOR static void plane_dot(const float *restrict p, const float *restrict g, int64_t n,
                                float m, double *sg, double *sgx)
{
    float a[LANES] = {0}, b[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            a[j] += g[i + j];
            b[j] += g[i + j] * (p[i + j] - m);
        }
    float ta = 0.0f, tb = 0.0f;
    for (; i < n; i++) {
        ta += g[i];
        tb += g[i] * (p[i] - m);
    }
    double s1 = ta, s2 = tb;
    for (int j = 0; j < LANES; j++) {
        s1 += a[j];
        s2 += b[j];
    }
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

static void batchnorm_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                          const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                          float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    const char *op = "batchnorm2d_fwd";
    const int64_t C =
        rt_batchnorm_fwd_check(op, comm, x, gamma, beta, running_mean, running_var, saved, y);
    if (!saved)
        rt_fatal(op, "no tensor for the saved statistics (training needs one)");
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
    const float *xp = rt_f32(x);
    /* sums[c]: sum of x, then of (x - mean)^2; sums[C]: the element count. */
    double *sums = rt_xcalloc((size_t)C + 1, sizeof(double), op);
#pragma omp parallel for schedule(static) if (parallel(C, N * HW))
    for (int64_t c = 0; c < C; c++) {
        const float shift = N > 0 && HW > 0 ? xp[c * HW] : 0.0f;
        double s = 0.0;
        for (int64_t n = 0; n < N; n++)
            s += plane_sum(xp + (n * C + c) * HW, HW, shift);
        sums[c] = s + (double)shift * (double)(N * HW);
    }
    sums[C] = (double)(N * HW);
    rt_allreduce_f64(comm, sums, C + 1, op);
    const double count = sums[C];
    if (count == 0)
        rt_fatal(op, "empty batch: batchnorm needs at least one sample");
    float *mean = rt_f32(saved), *invstd = mean + C;
    double *mean64 = rt_xcalloc((size_t)C, sizeof(double), op);
    for (int64_t c = 0; c < C; c++) {
        mean64[c] = sums[c] / count;
        mean[c] = (float)mean64[c];
    }
#pragma omp parallel for schedule(static) if (parallel(C, N * HW))
    for (int64_t c = 0; c < C; c++) {
        double ss = 0.0;
        for (int64_t n = 0; n < N; n++)
            ss += plane_ssd(xp + (n * C + c) * HW, HW, mean[c]);
        sums[c] = ss;
    }
    rt_allreduce_f64(comm, sums, C, op);
#pragma omp parallel for schedule(static) if (parallel(C, N * HW))
    for (int64_t c = 0; c < C; c++) {
        const double off = mean64[c] - (double)mean[c]; /* the f32 mean's rounding */
        double m2 = sums[c] - count * off * off;
        m2 = m2 > 0.0 ? m2 : 0.0;
        const double var = m2 / count;
        invstd[c] = (float)(1.0 / sqrt(var + eps));
        if (running_mean)
            rt_f32(running_mean)[c] =
                (1.0f - momentum) * rt_f32(running_mean)[c] + momentum * mean[c];
        if (running_var) {
            const double unbiased = count > 1 ? m2 / (count - 1) : var;
            rt_f32(running_var)[c] =
                (1.0f - momentum) * rt_f32(running_var)[c] + momentum * (float)unbiased;
        }
        /* y = (x - mean32) sc + (beta - off sc): the shift makes up for the f32 mean. */
        const float sc = rt_f32(gamma)[c] * invstd[c];
        const float sh = (float)(rt_f32(beta)[c] - off * sc);
        for (int64_t n = 0; n < N; n++)
            plane_affine(xp + (n * C + c) * HW, rt_f32(y) + (n * C + c) * HW, HW, mean[c], sc, sh);
    }
    free(mean64);
    free(sums);
}

static void batchnorm_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                          const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                          rt_tensor *dgamma, rt_tensor *dbeta)
{
    const char *op = "batchnorm2d_bwd";
    const int64_t C = rt_batchnorm_bwd_check(op, comm, x, gamma, saved, dy, dx);
    const int64_t N = x->shape[0], HW = x->shape[2] * x->shape[3];
    const float *mean = rt_f32(saved), *invstd = mean + C;
    const float *xp = rt_f32(x), *gp = rt_f32(dy);
    /* sums: sum(dy) per channel, sum(dy * xhat) per channel, the count. */
    double *sums = rt_xcalloc(2 * (size_t)C + 1, sizeof(double), op);
#pragma omp parallel for schedule(static) if (parallel(C, N * HW))
    for (int64_t c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        for (int64_t n = 0; n < N; n++)
            plane_dot(xp + (n * C + c) * HW, gp + (n * C + c) * HW, HW, mean[c], &sdy, &sdyx);
        sdyx *= invstd[c];
        /* The parameter gradients take this shard's part; the gradient all-reduce over the
         * layer's ranks adds the others. */
        if (dgamma)
            rt_f32(dgamma)[c] += (float)sdyx;
        if (dbeta)
            rt_f32(dbeta)[c] += (float)sdy;
        sums[c] = sdy;
        sums[C + c] = sdyx;
    }
    sums[2 * C] = (double)(N * HW);
    if (dx) {
        rt_allreduce_f64(comm, sums, 2 * C + 1, op);
        const double count = sums[2 * C];
#pragma omp parallel for schedule(static) if (parallel(C, N * HW))
        for (int64_t c = 0; c < C; c++) {
            const float k = rt_f32(gamma)[c] * invstd[c];
            const float mdy = (float)(sums[c] / count), mdyx = (float)(sums[C + c] / count);
            for (int64_t n = 0; n < N; n++)
                plane_dx(xp + (n * C + c) * HW, gp + (n * C + c) * HW,
                         rt_f32(dx) + (n * C + c) * HW, HW, mean[c], invstd[c], k, mdy, mdyx);
        }
    }
    free(sums);
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
    rt_check_f32(y, x->numel, op, "output");
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
    rt_check_f32(dy, x->numel, op, "output gradient");
    if (dx)
        rt_check_f32(dx, x->numel, op, "input gradient");
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
