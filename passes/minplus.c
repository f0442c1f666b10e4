/*
 * minplus.c: the planner's inner loop, one row of a min-plus product.
 *
 * The DP (planner.c) combines two tables through a middle layer:
 * r[i][j] = min over m of A[i][m] + cost(m) + B[m][j]. For each (i, m) this
 * loop folds row m of B into the running minimum of row i and remembers
 * which m gave it. It is where a plan of a large model spends most of its
 * time, so it is written for the vector units: with GCC/Clang vector types
 * (two doubles at a time anywhere; on x86-64 four with AVX2 or eight with
 * AVX-512, picked once from what the CPU has).
 */
#include "plan.h"

/* Compilers do not vectorise the argmin on their own: one body, expanded
 * for each vector width W (V: W doubles, L: W 64-bit lanes). */
#define MIN_PLUS_BODY(V, L, W)                               \
    int j = 0;                                               \
    V vb, vm;                                                \
    for (int q = 0; q < W; q++)                              \
        vb[q] = base, vm[q] = m;                             \
    for (; j + W <= n; j += W) {                             \
        V x = *(const V *)&row[j] + vb;                      \
        V b = *(const V *)&best[j];                          \
        V bm = *(const V *)&bestm[j];                        \
        L lt = x < b;                                        \
        *(V *)&best[j] = (V)(((L)x & lt) | ((L)b & ~lt));    \
        *(V *)&bestm[j] = (V)(((L)vm & lt) | ((L)bm & ~lt)); \
    }                                                        \
    for (; j < n; j++) {                                     \
        double x = base + row[j];                            \
        if (x < best[j]) {                                   \
            best[j] = x;                                     \
            bestm[j] = m;                                    \
        }                                                    \
    }

#if defined(__GNUC__)
typedef double v2d __attribute__((vector_size(16), aligned(8), may_alias));
typedef long long v2l __attribute__((vector_size(16), aligned(8), may_alias));

static void min_plus_row2(double *restrict best, double *restrict bestm, const double *restrict row,
                          double base, double m, int n)
{
    MIN_PLUS_BODY(v2d, v2l, 2)
}

#if defined(__x86_64__)
#define MIN_PLUS_X86 1
typedef double v4d __attribute__((vector_size(32), aligned(8), may_alias));
typedef long long v4l __attribute__((vector_size(32), aligned(8), may_alias));
typedef double v8d __attribute__((vector_size(64), aligned(8), may_alias));
typedef long long v8l __attribute__((vector_size(64), aligned(8), may_alias));

__attribute__((target("avx2"))) static void min_plus_row4(double *restrict best,
                                                          double *restrict bestm,
                                                          const double *restrict row, double base,
                                                          double m, int n)
{
    MIN_PLUS_BODY(v4d, v4l, 4)
}

__attribute__((target("avx512f"))) static void min_plus_row8(double *restrict best,
                                                             double *restrict bestm,
                                                             const double *restrict row,
                                                             double base, double m, int n)
{
    MIN_PLUS_BODY(v8d, v8l, 8)
}
#endif
#else
static void min_plus_row2(double *restrict best, double *restrict bestm, const double *restrict row,
                          double base, double m, int n)
{
    for (int j = 0; j < n; j++) {
        double x = base + row[j];
        if (x < best[j]) {
            best[j] = x;
            bestm[j] = m;
        }
    }
}
#endif

plan_min_plus_fn *plan_min_plus(void)
{
    static plan_min_plus_fn *picked;
    if (picked)
        return picked;
#if defined(MIN_PLUS_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return picked = min_plus_row8;
    if (__builtin_cpu_supports("avx2"))
        return picked = min_plus_row4;
#endif
    return picked = min_plus_row2;
}
