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
 *
 * The splits of a block's subset DP (planner.c) are the other inner loop:
 * for every entry x of two tables, the two groups side by side or one after
 * the other, folded into the running minimum. The same vector widths; the
 * file is compiled without floating-point contraction (CMakeLists.txt), so
 * every width gives the scalar loop's values bit for bit (AVX-512 has
 * fused multiply-adds, which would round once where the scalar code rounds
 * twice).
 */
#include <math.h>

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

/* The split on entries x0..n-1, one at a time (the vector loops' tail, and
 * the whole loop without vector types). */
static inline void split_tail(double *restrict rs, double *restrict rt, int32_t *restrict arg,
                              const double *as, const double *at, const double *bs,
                              const double *bt, double al, int32_t code, int x0, int n, bool conc)
{
    for (int x = x0; x < n; x++) {
        double t, v;
        if (conc) {
            if (as[x] == INFINITY || bs[x] == INFINITY)
                continue;
            t = at[x] > bt[x] ? at[x] : bt[x];
            v = al * t + (as[x] - al * at[x]) + (bs[x] - al * bt[x]);
        } else {
            v = as[x] + bs[x];
            t = at[x] + bt[x];
        }
        if (v < rs[x]) {
            rs[x] = v;
            if (rt)
                rt[x] = t;
            arg[x] = code;
        }
    }
}

/* One split folded into r (plan_split_fn), W entries at a time (V: W
 * doubles, L: W 64-bit lanes, I: W 32-bit lanes for the args). */
#define SPLIT_BODY(V, L, I, W, CONC)                                    \
    int x = 0;                                                          \
    V va, vinf;                                                         \
    I vc;                                                               \
    for (int q = 0; q < W; q++)                                         \
        va[q] = al, vinf[q] = INFINITY, vc[q] = code;                   \
    for (; x + W <= n; x += W) {                                        \
        V a_s = *(const V *)&as[x], a_t = *(const V *)&at[x];           \
        V b_s = *(const V *)&bs[x], b_t = *(const V *)&bt[x];           \
        V r_s = *(const V *)&rs[x], t, v;                               \
        L ok;                                                           \
        if (CONC) {                                                     \
            L gt = a_t > b_t;                                           \
            t = (V)(((L)a_t & gt) | ((L)b_t & ~gt));                    \
            v = va * t + (a_s - va * a_t) + (b_s - va * b_t);           \
            ok = (a_s != vinf) & (b_s != vinf) & (v < r_s);             \
        } else {                                                        \
            v = a_s + b_s;                                              \
            t = a_t + b_t;                                              \
            ok = v < r_s;                                               \
        }                                                               \
        *(V *)&rs[x] = (V)(((L)v & ok) | ((L)r_s & ~ok));               \
        if (rt) {                                                       \
            V r_t = *(const V *)&rt[x];                                 \
            *(V *)&rt[x] = (V)(((L)t & ok) | ((L)r_t & ~ok));           \
        }                                                               \
        I m = __builtin_convertvector(ok, I), ra = *(const I *)&arg[x]; \
        *(I *)&arg[x] = (vc & m) | (ra & ~m);                           \
    }                                                                   \
    split_tail(rs, rt, arg, as, at, bs, bt, al, code, x, n, CONC);

/* The side-by-side and the in-sequence split for one vector width. */
#define SPLIT_FNS(ATTR, SUF, V, L, I, W)                                                          \
    ATTR static void split_conc##SUF(double *restrict rs, double *restrict rt,                    \
                                     int32_t *restrict arg, const double *as, const double *at,   \
                                     const double *bs, const double *bt, double al, int32_t code, \
                                     int n){SPLIT_BODY(                                           \
        V, L, I, W,                                                                               \
        true)} ATTR static void split_seq##SUF(double *restrict rs, double *restrict rt,          \
                                               int32_t *restrict arg, const double *as,           \
                                               const double *at, const double *bs,                \
                                               const double *bt, double al, int32_t code, int n)  \
    {                                                                                             \
        SPLIT_BODY(V, L, I, W, false)                                                             \
    }

#if defined(__GNUC__)
typedef double v2d __attribute__((vector_size(16), aligned(8), may_alias));
typedef long long v2l __attribute__((vector_size(16), aligned(8), may_alias));
typedef int32_t v2i __attribute__((vector_size(8), aligned(4), may_alias));

static void min_plus_row2(double *restrict best, double *restrict bestm, const double *restrict row,
                          double base, double m,
                          int n){MIN_PLUS_BODY(v2d, v2l, 2)} SPLIT_FNS(, 2, v2d, v2l, v2i, 2)

#if defined(__x86_64__)
#define MIN_PLUS_X86 1
    typedef double v4d __attribute__((vector_size(32), aligned(8), may_alias));
typedef long long v4l __attribute__((vector_size(32), aligned(8), may_alias));
typedef double v8d __attribute__((vector_size(64), aligned(8), may_alias));
typedef long long v8l __attribute__((vector_size(64), aligned(8), may_alias));
typedef int32_t v4i __attribute__((vector_size(16), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4), may_alias));

__attribute__((target("avx2"))) static void
min_plus_row4(double *restrict best, double *restrict bestm, const double *restrict row,
              double base, double m, int n){
    MIN_PLUS_BODY(v4d, v4l, 4)} SPLIT_FNS(__attribute__((target("avx2"))), 4, v4d, v4l, v4i, 4)

    __attribute__((target("avx512f"))) static void min_plus_row8(
        double *restrict best, double *restrict bestm, const double *restrict row, double base,
        double m, int n){MIN_PLUS_BODY(v8d, v8l, 8)} SPLIT_FNS(__attribute__((target("avx512f"))),
                                                               8, v8d, v8l, v8i, 8)
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

static void split_conc2(double *restrict rs, double *restrict rt, int32_t *restrict arg,
                        const double *as, const double *at, const double *bs, const double *bt,
                        double al, int32_t code, int n)
{
    split_tail(rs, rt, arg, as, at, bs, bt, al, code, 0, n, true);
}

static void split_seq2(double *restrict rs, double *restrict rt, int32_t *restrict arg,
                       const double *as, const double *at, const double *bs, const double *bt,
                       double al, int32_t code, int n)
{
    split_tail(rs, rt, arg, as, at, bs, bt, al, code, 0, n, false);
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

plan_split_fn *plan_block_split(bool conc)
{
    static plan_split_fn *picked[2];
    if (picked[conc])
        return picked[conc];
#if defined(MIN_PLUS_X86)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return picked[conc] = conc ? split_conc8 : split_seq8;
    if (__builtin_cpu_supports("avx2"))
        return picked[conc] = conc ? split_conc4 : split_seq4;
#endif
    return picked[conc] = conc ? split_conc2 : split_seq2;
}
