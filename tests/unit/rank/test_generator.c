/* test_generator.c: BTL scores, the Erdos-Renyi generator, confidence intervals and
 * the Monte Carlo driver.
 *
 * Checks the exact separation Delta_K, the number of drawn pairs and the empirical win
 * rate against their expectations (within 5 standard deviations, deterministic seeds),
 * reproducibility, and that a simulation does not depend on the thread count. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

int main(void)
{
    rank_rng r;
    rank_rng_seed(&r, 99);

    /* Separation is exact, the range is as documented, ids are shuffled. */
    for (int32_t k = 1; k <= 10; k += 9) {
        double w[500], sorted[500];
        rank_btl_scores(500, k, 0.1, &r, w);
        memcpy(sorted, w, sizeof w);
        qsort(sorted, 500, sizeof *sorted, cmp_desc);
        CHECK_NEAR(sorted[0], 1, 0);
        CHECK_NEAR((sorted[k - 1] - sorted[k]) / sorted[0], 0.1, 1e-15);
        CHECK(sorted[499] >= sorted[k] / 2);
        int first_k_are_top = 1;
        for (int i = 0; i < k; i++)
            first_k_are_top &= w[i] >= sorted[k - 1];
        CHECK(k == 1 || !first_k_are_top);
    }

    /* Pair count ~ Binomial(n(n-1)/2, p); records are distinct pairs i < j with L games. */
    {
        int32_t n = 400;
        double p = 0.05, w[400];
        for (int i = 0; i < n; i++)
            w[i] = 1;
        rank_data d;
        rank_data_init(&d);
        CHECK(rank_btl_generate(w, n, p, 3, &r, &d) == 0);
        double N = n * (n - 1) / 2.0, mean = N * p, sd = sqrt(N * p * (1 - p));
        CHECK(fabs((double)d.m - mean) < 5 * sd);
        CHECK(d.n == n);
        int ok = 1;
        for (size_t i = 0; i < d.m; i++) {
            ok &= d.a[i] < d.b[i] && d.a_wins[i] + rank_data_b_wins(&d, i) == 3;
            if (i)
                ok &= d.a[i - 1] < d.a[i] || (d.a[i - 1] == d.a[i] && d.b[i - 1] < d.b[i]);
        }
        CHECK(ok);
        rank_data_free(&d);

        /* p = 1 gives every pair exactly once. */
        rank_data_init(&d);
        CHECK(rank_btl_generate(w, 30, 1.0, 1, &r, &d) == 0);
        CHECK(d.m == 30 * 29 / 2);
        rank_data_free(&d);
    }

    /* Win rate of a 3:1 pair: P(a wins) = 0.75. */
    {
        double w[2] = {3, 1};
        rank_data d;
        rank_data_init(&d);
        CHECK(rank_btl_generate(w, 2, 1.0, 100000, &r, &d) == 0);
        CHECK(d.m == 1);
        if (d.m == 1) {
            double sd = sqrt(100000 * 0.75 * 0.25);
            CHECK(fabs((double)d.a_wins[0] - 75000) < 5 * sd);
        }
        rank_data_free(&d);
    }

    /* Same seed, same data. */
    {
        double w[50];
        for (int i = 0; i < 50; i++)
            w[i] = 1 + i;
        rank_data d1, d2;
        rank_data_init(&d1);
        rank_data_init(&d2);
        rank_rng r1, r2;
        rank_rng_seed(&r1, 5);
        rank_rng_seed(&r2, 5);
        rank_btl_generate(w, 50, 0.2, 4, &r1, &d1);
        rank_btl_generate(w, 50, 0.2, 4, &r2, &d2);
        CHECK(d1.m == d2.m && d1.m > 0);
        if (d1.m == d2.m)
            CHECK(memcmp(d1.a_wins, d2.a_wins, d1.m * sizeof *d1.a_wins) == 0 &&
                  memcmp(d1.b, d2.b, d1.m * sizeof *d1.b) == 0);
        rank_data_free(&d1);
        rank_data_free(&d2);
    }

    /* Wilson interval and normal interval against hand-computed values. */
    {
        double lo, hi;
        rank_wilson(50, 100, &lo, &hi);
        CHECK_NEAR(lo, 0.40383153, 1e-7);
        CHECK_NEAR(hi, 0.59616847, 1e-7);
        rank_wilson(100, 100, &lo, &hi);
        CHECK_NEAR(hi, 1, 1e-15);
        CHECK_NEAR(lo, 0.96300650, 1e-7);
        double mean, half;
        rank_mean_ci(6, 14, 3, &mean, &half); /* values 1, 2, 3: sd 1 */
        CHECK_NEAR(mean, 2, 1e-15);
        CHECK_NEAR(half, 1.959963984540054 / sqrt(3), 1e-12);
        rank_mean_ci(2, 4, 1, &mean, &half);
        CHECK(half < 0);
    }

    /* Simulation: identical for 1 and 2 threads; all methods succeed with ample data. */
    {
        rank_sim_params p = {.n = 40, .k = 4, .delta = 0.3, .p = 0.5, .L = 200, .eps = 0};
        int methods[RANK_NMETHODS] = {1, 1, 1};
        rank_opts o;
        rank_opts_default(&o);
        rank_sim_result a, b;
        o.threads = 1;
        CHECK(rank_simulate(&p, 12, 3, methods, &o, &a) == 0);
        o.threads = 2;
        CHECK(rank_simulate(&p, 12, 3, methods, &o, &b) == 0);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK(a.trials == 12 && a.skipped == 0);
        for (int m = 0; m < RANK_NMETHODS; m++) {
            CHECK(a.success[m] == 12);
            CHECK(a.err_sum[m] / 12 < 0.1);
        }
        CHECK(fabs(a.samples - 40 * 39 / 2.0 * 0.5 * 200) < 0.2 * 40 * 39 / 2.0 * 0.5 * 200);

        /* Hopeless data: success is rare, and never reported as NaN. */
        rank_sim_params hard = {.n = 100, .k = 10, .delta = 0.05, .p = 0.1, .L = 1, .eps = 1};
        CHECK(rank_simulate(&hard, 8, 3, methods, &o, &a) == 0);
        for (int m = 0; m < RANK_NMETHODS; m++) {
            CHECK(a.success[m] <= 2);
            CHECK(a.err_sum[m] == a.err_sum[m]);
        }
    }
    return check_done("test_generator");
}
