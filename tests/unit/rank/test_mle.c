/* test_mle.c: maximum likelihood and Spectral MLE.
 *
 * When the counts are exactly proportional to BTL probabilities, the MLE is the true
 * score vector, so both methods must return it.  On noisy data the MLE must satisfy
 * its optimality condition: each item's wins equal its expected wins. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>

int main(void)
{
    /* Exact data: w = (1, 2, 3, 4) with counts w_i : w_j on every pair. */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 4;
        int64_t w[4] = {1, 2, 3, 4};
        for (int i = 0; i < 4; i++)
            for (int j = i + 1; j < 4; j++)
                rank_data_add(&d, i, j, w[i], w[j]);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_opts o;
        rank_opts_default(&o);
        o.tol = 1e-14;
        double s[4];
        rank_report rep;
        CHECK(rank_mle(&g, &o, s, &rep) == 0);
        CHECK(rep.converged);
        for (int i = 0; i < 4; i++)
            CHECK_NEAR(s[i], w[i] / 10.0, 1e-10);
        CHECK(rank_spectral_mle(&g, &o, s, &rep) == 0);
        for (int i = 0; i < 4; i++)
            CHECK_NEAR(s[i], w[i] / 10.0, 1e-10);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* Noisy data: MLE stationarity W_i = sum_j n_ij w_i / (w_i + w_j). */
    {
        rank_rng r;
        rank_rng_seed(&r, 7);
        int32_t n = 80;
        double w[80], s[80], sm[80];
        rank_btl_scores(n, 5, 0.2, &r, w);
        rank_data d;
        rank_data_init(&d);
        CHECK(rank_btl_generate(w, n, 0.3, 10, &r, &d) == 0);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_strength st;
        CHECK(rank_check_strength(&g, 1, &st) == 0);
        CHECK(st.strongly_connected);
        rank_opts o;
        rank_opts_default(&o);
        o.tol = 1e-13;
        rank_report rep;
        CHECK(rank_mle(&g, &o, s, &rep) == 0);
        CHECK(rep.converged);
        double worst = 0;
        for (int32_t i = 0; i < n; i++) {
            double wins = 0, expected = 0;
            for (int64_t e = g.row[i]; e < g.row[i + 1]; e++) {
                wins += g.wins[e];
                expected += g.games[e] * s[i] / (s[i] + s[g.col[e]]);
            }
            if (fabs(wins - expected) > worst)
                worst = fabs(wins - expected);
        }
        CHECK_NEAR(worst, 0, 1e-6);

        /* Spectral MLE lands between the spectral start and the MLE: it must be at least
     * as close to the MLE as the spectral scores are, in the l-infinity sense. */
        double sp[80];
        CHECK(rank_spectral(&g, &o, sp, NULL) == 0);
        CHECK(rank_spectral_mle(&g, &o, sm, NULL) == 0);
        double sum = 0;
        for (int32_t i = 0; i < n; i++)
            sum += sm[i];
        CHECK_NEAR(sum, 1, 1e-12);
        CHECK(rank_linf_error(sm, s, n) <= rank_linf_error(sp, s, n) + 1e-12);
        rank_graph_free(&g);
        rank_data_free(&d);
    }
    return check_done("test_mle");
}
