/* test_stationary.c: Rank Centrality's stationary distribution against closed forms.
 *
 * Small chains whose stationary distribution is known exactly: two items, data that
 * fit BTL exactly (detailed balance gives pi proportional to w), a tree (every chain on
 * a tree is reversible), and a non-reversible 3-cycle solved with the Markov chain tree
 * theorem.  Each is solved with 1, 2 and 3 threads, which must agree bit for bit
 * because every row is computed the same way whatever the split. */
#include "check.h"
#include "rank.h"

#include <string.h>

typedef struct rec {
    int32_t a, b;
    int64_t aw, bw;
} rec;

static void solve(int32_t n, const rec *r, size_t m, int threads, double *pi, rank_report *rep)
{
    rank_data d;
    rank_data_init(&d);
    d.n = n;
    for (size_t i = 0; i < m; i++)
        rank_data_add(&d, r[i].a, r[i].b, r[i].aw, r[i].bw);
    rank_graph g;
    CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
    rank_opts o;
    rank_opts_default(&o);
    o.tol = 1e-15;
    o.threads = threads;
    CHECK(rank_spectral(&g, &o, pi, rep) == 0);
    rank_graph_free(&g);
    rank_data_free(&d);
}

static void expect(int32_t n, const rec *r, size_t m, const double *want)
{
    double sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += want[i];
    double first[16];
    for (int threads = 1; threads <= 3; threads++) {
        double pi[16];
        rank_report rep;
        solve(n, r, m, threads, pi, &rep);
        CHECK(rep.converged);
        CHECK(rep.iterations > 0);
        CHECK(rep.step <= 1e-15);
        for (int32_t i = 0; i < n; i++)
            CHECK_NEAR(pi[i], want[i] / sum, 1e-12);
        if (threads == 1)
            memcpy(first, pi, (size_t)n * sizeof *pi);
        else
            CHECK(memcmp(first, pi, (size_t)n * sizeof *pi) == 0);
    }
}

int main(void)
{
    /* Two items: pi_a / pi_b = wins of a / wins of b. */
    rec two[] = {{0, 1, 3, 1}};
    expect(2, two, 1, (double[]){3, 1});

    /* Records for the same pair add up, in either orientation. */
    rec two_split[] = {{0, 1, 2, 0}, {1, 0, 1, 1}};
    expect(2, two_split, 2, (double[]){3, 1});

    /* Complete graph on 4 items with counts exactly proportional to w = (1, 2, 3, 4). */
    rec btl[] = {{0, 1, 1, 2}, {0, 2, 1, 3}, {0, 3, 1, 4},
                 {1, 2, 2, 3}, {1, 3, 2, 4}, {2, 3, 3, 4}};
    expect(4, btl, 6, (double[]){1, 2, 3, 4});

    /* A path a-b-c: pi_a/pi_b = 3/1, pi_b/pi_c = 1/4 whatever d_max is. */
    rec path[] = {{0, 1, 3, 1}, {1, 2, 1, 4}};
    expect(3, path, 2, (double[]){3, 1, 4});

    /* A star with four leaves: the centre has d_max = 4, the leaves many self-loops. */
    rec star[] = {{0, 1, 1, 1}, {0, 2, 2, 1}, {0, 3, 1, 3}, {0, 4, 5, 5}};
    expect(5, star, 4, (double[]){1, 1, 0.5, 3, 1});

    /* A 3-cycle that is not reversible: a beats b with fraction x, b beats c with y,
   * c beats a with z.  Tree theorem: pi_i is the sum over spanning trees directed into
   * i of the product of the rates (rate j->i = fraction of j-i games that i won). */
    double x = 0.75, y = 0.6, z = 0.2;
    rec cycle[] = {{0, 1, 3, 1}, {1, 2, 3, 2}, {2, 0, 1, 4}};
    double want[3] = {x * (1 - z) + (1 - y) * (1 - z) + x * y,
                      (1 - x) * y + z * y + (1 - z) * (1 - x),
                      z * (1 - y) + (1 - x) * (1 - y) + x * z};
    expect(3, cycle, 3, want);

    /* A symmetric 3-cycle (rock-paper-scissors) has the uniform distribution. */
    rec rps[] = {{0, 1, 2, 1}, {1, 2, 2, 1}, {2, 0, 2, 1}};
    expect(3, rps, 3, (double[]){1, 1, 1});

    /* One item: score 1, nothing to iterate on. */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 1;
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_opts o;
        rank_opts_default(&o);
        double pi[1] = {0};
        rank_report rep;
        CHECK(rank_spectral(&g, &o, pi, &rep) == 0);
        CHECK_NEAR(pi[0], 1, 0);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* An iteration limit is reported as such. */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 3;
        rank_data_add(&d, 0, 1, 3, 1);
        rank_data_add(&d, 1, 2, 1, 4);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_opts o;
        rank_opts_default(&o);
        o.max_iter = 3;
        double pi[3];
        rank_report rep;
        CHECK(rank_spectral(&g, &o, pi, &rep) == 0);
        CHECK(!rep.converged);
        CHECK(rep.iterations == 3);
        CHECK_NEAR(pi[0] + pi[1] + pi[2], 1, 1e-15);
        rank_graph_free(&g);
        rank_data_free(&d);
    }
    /* One closed group {0, 1} (they never lose to 2 or 3): unique, 0 outside it, and
     * inside it the two-item answer. */
    rec closed_pair[] = {{0, 1, 3, 1}, {0, 2, 1, 0}, {1, 3, 2, 0}, {2, 3, 1, 1}};
    expect(4, closed_pair, 4, (double[]){3, 1, 0, 0});
    {
        double pi[4];
        rank_report rep;
        solve(4, closed_pair, 4, 2, pi, &rep);
        CHECK(pi[2] == 0 && pi[3] == 0); /* exactly: those rows are not iterated */
    }

    /* A closed group of one: all the weight, exactly, without iterating. */
    {
        rec champ[] = {{0, 1, 2, 0}, {1, 2, 1, 1}, {0, 2, 1, 0}};
        double pi[3];
        rank_report rep;
        solve(3, champ, 3, 2, pi, &rep);
        CHECK(pi[0] == 1 && pi[1] == 0 && pi[2] == 0);
        CHECK(rep.converged && rep.iterations == 0);
    }

    /* Two closed groups: no unique answer, and rank_spectral says so (with or without
     * the caller's check). */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 4;
        rank_data_add(&d, 0, 2, 1, 0);
        rank_data_add(&d, 1, 3, 1, 0);
        rank_data_add(&d, 2, 3, 1, 1);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_opts o;
        rank_opts_default(&o);
        double pi[4];
        CHECK(rank_spectral(&g, &o, pi, NULL) == RANK_NOT_UNIQUE);
        rank_strength st;
        CHECK(rank_check_strength(&g, 1, &st) == 0 && st.groups == 2);
        o.strength = &st;
        CHECK(rank_spectral(&g, &o, pi, NULL) == RANK_NOT_UNIQUE);
        CHECK(rank_spectral_mle(&g, &o, pi, NULL) == RANK_NOT_UNIQUE);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* "Converged" means within tol: on a slowly mixing path (each item beats the next
     * 3 times in 5, so pi_i is proportional to (2/3)^i) the error against the closed
     * form is within the tolerance, not just the last step. */
    {
        enum { N = 60 };
        rec path60[N - 1];
        double want60[N], pi[N];
        for (int32_t i = 0; i + 1 < N; i++)
            path60[i] = (rec){i, i + 1, 3, 2};
        double w = 1, sum = 0;
        for (int32_t i = 0; i < N; i++, w *= 2.0 / 3)
            sum += want60[i] = w;
        for (int threads = 1; threads <= 2; threads++) {
            rank_data d;
            rank_data_init(&d);
            d.n = N;
            for (int32_t i = 0; i + 1 < N; i++)
                rank_data_add(&d, path60[i].a, path60[i].b, path60[i].aw, path60[i].bw);
            rank_graph g;
            CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
            rank_opts o;
            rank_opts_default(&o);
            o.threads = threads;
            rank_report rep;
            CHECK(rank_spectral(&g, &o, pi, &rep) == 0);
            CHECK(rep.converged && rep.error_bound >= 0 && rep.error_bound <= o.tol);
            CHECK(rep.iterations > 100); /* slow indeed */
            double err = 0;
            for (int32_t i = 0; i < N; i++)
                if (fabs(pi[i] - want60[i] / sum) > err)
                    err = fabs(pi[i] - want60[i] / sum);
            CHECK(err <= 2 * o.tol * want60[0] / sum);
            rank_graph_free(&g);
            rank_data_free(&d);
        }
    }
    /* The default iteration limit bounds the work on large graphs only. */
    {
        rank_graph g;
        memset(&g, 0, sizeof g);
        g.n = 500;
        g.nnz = 60000;
        CHECK(rank_default_max_iter(&g) == RANK_MAX_ITER);
        g.n = 1000000;
        g.nnz = 1999998; /* a path: ~10^12 iterations to mix */
        CHECK(rank_default_max_iter(&g) == 3333);
        g.nnz = 20002330; /* the benchmark graph: 27 iterations needed */
        CHECK(rank_default_max_iter(&g) == 476);
        g.nnz = (int64_t)1e12;
        CHECK(rank_default_max_iter(&g) == 100);
    }
    return check_done("test_stationary");
}
