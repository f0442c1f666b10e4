/* test_topk.c: ordering, boundary ties, the metrics, and recovery with plenty of data.
 *
 * With a huge number of comparisons per pair every method must return exactly the
 * true top K; this is the end-to-end check that generator, graph and solvers agree on
 * which way "i beat j" points. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>
#include <string.h>

int main(void)
{
    /* Order: by score, ties by id. */
    {
        double s[5] = {0.1, 0.3, 0.3, 0.2, 0.1};
        int32_t o[5];
        CHECK(rank_order(s, 5, o) == 0);
        CHECK(o[0] == 1 && o[1] == 2 && o[2] == 3 && o[3] == 0 && o[4] == 4);
        CHECK(rank_boundary_tie(s, o, 5, 1)); /* 0.3 = 0.3 at the boundary of the top 1 */
        CHECK(!rank_boundary_tie(s, o, 5, 2));
        CHECK(!rank_boundary_tie(s, o, 5, 3));
        CHECK(rank_boundary_tie(s, o, 5, 4));
        CHECK(!rank_boundary_tie(s, o, 5, 5)); /* nothing beyond all items */
    }

    /* The top of the order without sorting everything: the same prefix, ties by id,
     * for every count (the heap for small counts, the sort for large ones). */
    {
        enum { N = 5000 };
        static double s[N];
        static int32_t full[N], top[N];
        rank_rng r;
        rank_rng_seed(&r, 5);
        for (int32_t i = 0; i < N; i++)
            s[i] = (double)(rank_rng_next(&r) % 700); /* many ties */
        CHECK(rank_order(s, N, full) == 0);
        int32_t counts[] = {1, 2, 3, 10, 101, 1000, 1249, 1250, 4999, 5000};
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            CHECK(rank_top(s, N, counts[c], top) == 0);
            CHECK(memcmp(top, full, (size_t)counts[c] * sizeof *top) == 0);
        }
    }

    /* Success: same set (order inside does not matter), no tie at the boundary. */
    {
        double truth[5] = {5, 4, 3, 2, 1};
        double good[5] = {4, 5, 1, 2, 3};
        double wrong[5] = {5, 1, 3, 4, 2};
        double tied[5] = {5, 4, 3, 3, 1};
        CHECK(rank_topk_success(good, truth, 5, 2) == 1);
        CHECK(rank_topk_success(wrong, truth, 5, 2) == 0);
        CHECK(rank_topk_success(tied, truth, 5, 3) == 0);
        CHECK(rank_topk_success(tied, truth, 5, 2) == 1);
        /* A tie in the truth makes the question ill-posed: also a failure. */
        CHECK(rank_topk_success(truth, tied, 5, 3) == 0);
    }

    /* l-infinity error after both sides are scaled to sum 1, relative to max truth. */
    {
        double truth[4] = {4, 3, 2, 1}; /* normalised: .4 .3 .2 .1 */
        double est[4] = {8, 6, 4, 2};   /* the same up to scale */
        CHECK_NEAR(rank_linf_error(est, truth, 4), 0, 1e-15);
        double off[4] = {0.5, 0.2, 0.2, 0.1};
        CHECK_NEAR(rank_linf_error(off, truth, 4), 0.1 / 0.4, 1e-15);
        double zero[4] = {0, 0, 0, 0}; /* no estimate at all: error 1, never NaN */
        CHECK_NEAR(rank_linf_error(zero, truth, 4), 1, 1e-15);
    }

    /* Huge L: the true top K, by every method, on several seeds. */
    for (uint64_t seed = 1; seed <= 4; seed++) {
        rank_rng r;
        rank_rng_seed(&r, seed);
        int32_t n = 60, k = 6;
        double w[60], est[60];
        rank_btl_scores(n, k, 0.1, &r, w);
        rank_data d;
        rank_data_init(&d);
        CHECK(rank_btl_generate(w, n, 0.5, 20000, &r, &d) == 0);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_opts o;
        rank_opts_default(&o);
        for (int m = 0; m < RANK_NMETHODS; m++) {
            rank_report rep;
            CHECK(rank_run_method(m, &g, &o, est, &rep) == 0);
            CHECK(rep.converged);
            CHECK(rank_topk_success(est, w, n, k) == 1);
            double err = rank_linf_error(est, w, n);
            if (!(err < 0.03))
                fprintf(stderr, "method %s seed %d: error %g\n", rank_method_names[m], (int)seed,
                        err);
            CHECK(err < 0.03);
        }
        rank_graph_free(&g);
        rank_data_free(&d);
    }
    return check_done("test_topk");
}
