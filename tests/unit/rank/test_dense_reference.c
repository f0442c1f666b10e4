/* test_dense_reference.c: the sparse, threaded Rank Centrality against a dense solve.
 *
 * On random instances (random graphs with random counts, some with regularisation) the
 * reference builds the full n x n transition matrix P and solves pi (P - I) = 0,
 * sum pi = 1 directly by Gaussian elimination with partial pivoting.  The power
 * iteration must give the same top K and scores within 1e-9. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>
#include <string.h>

/* Dense reference: P[i][j] = probability of moving from i to j. */
static void dense_stationary(const rank_data *d, double eps, double *pi)
{
    int32_t n = d->n;
    double *wins = calloc((size_t)n * n, sizeof *wins); /* wins[i*n+j]: i beat j */
    char *met = calloc((size_t)n * n, 1);
    double *A = calloc((size_t)n * n, sizeof *A);
    for (size_t r = 0; r < d->m; r++) {
        int32_t a = d->a[r], b = d->b[r];
        wins[(size_t)a * n + b] += (double)d->a_wins[r];
        wins[(size_t)b * n + a] += (double)rank_data_b_wins(d, r);
        met[(size_t)a * n + b] = met[(size_t)b * n + a] = 1;
    }
    int dmax = 0;
    for (int32_t i = 0; i < n; i++) {
        int deg = 0;
        for (int32_t j = 0; j < n; j++)
            deg += met[(size_t)i * n + j];
        if (deg > dmax)
            dmax = deg;
    }
    /* A = (P - I)^T, so that A pi = 0; row n-1 replaced by the normalisation. */
    for (int32_t i = 0; i < n; i++) {
        double out = 0;
        for (int32_t j = 0; j < n; j++) {
            if (!met[(size_t)i * n + j])
                continue;
            double wij = wins[(size_t)i * n + j] + eps, wji = wins[(size_t)j * n + i] + eps;
            double move = wji / (wij + wji) / dmax; /* i -> j in proportion to j's wins */
            A[(size_t)j * n + i] += move;
            out += move;
        }
        A[(size_t)i * n + i] -= out;
    }
    double *rhs = calloc((size_t)n, sizeof *rhs);
    for (int32_t j = 0; j < n; j++)
        A[(size_t)(n - 1) * n + j] = 1;
    rhs[n - 1] = 1;
    for (int32_t c = 0; c < n; c++) {
        int32_t p = c;
        for (int32_t r = c + 1; r < n; r++)
            if (fabs(A[(size_t)r * n + c]) > fabs(A[(size_t)p * n + c]))
                p = r;
        if (p != c) {
            for (int32_t j = 0; j < n; j++) {
                double t = A[(size_t)c * n + j];
                A[(size_t)c * n + j] = A[(size_t)p * n + j];
                A[(size_t)p * n + j] = t;
            }
            double t = rhs[c];
            rhs[c] = rhs[p];
            rhs[p] = t;
        }
        for (int32_t r = c + 1; r < n; r++) {
            double f = A[(size_t)r * n + c] / A[(size_t)c * n + c];
            if (f == 0)
                continue;
            for (int32_t j = c; j < n; j++)
                A[(size_t)r * n + j] -= f * A[(size_t)c * n + j];
            rhs[r] -= f * rhs[c];
        }
    }
    for (int32_t c = n - 1; c >= 0; c--) {
        double s = rhs[c];
        for (int32_t j = c + 1; j < n; j++)
            s -= A[(size_t)c * n + j] * pi[j];
        pi[c] = s / A[(size_t)c * n + c];
    }
    free(wins);
    free(met);
    free(A);
    free(rhs);
}

int main(void)
{
    const int32_t sizes[] = {5, 12, 40, 90, 200};
    rank_rng rng;
    rank_rng_seed(&rng, 2024);
    int instances = 0;
    for (int s = 0; s < 5; s++) {
        for (int rep = 0; rep < 4; rep++) {
            int32_t n = sizes[s];
            double eps = rep % 2 ? 0.5 : 0;
            rank_data d;
            rank_data_init(&d);
            d.n = n;
            /* A ring keeps the graph connected; random chords and counts do the rest.  Both
       * directions get at least one win so that the chain is irreducible without eps. */
            double density = rep < 2 ? 0.3 : 0.05;
            for (int32_t i = 0; i < n; i++) {
                for (int32_t j = i + 1; j < n; j++) {
                    int ring = j == i + 1 || (i == 0 && j == n - 1);
                    if (!ring && rank_rng_uniform(&rng) >= density)
                        continue;
                    int64_t a = 1 + (int64_t)(rank_rng_uniform(&rng) * 9);
                    int64_t b = 1 + (int64_t)(rank_rng_uniform(&rng) * 9);
                    /* Some pairs appear as several records, split across orientations. */
                    if (rank_rng_uniform(&rng) < 0.2) {
                        rank_data_add(&d, j, i, 0, 1);
                        a -= a > 1;
                    }
                    rank_data_add(&d, i, j, a, b);
                }
            }
            double *ref = malloc((size_t)n * sizeof *ref);
            double *pi = malloc((size_t)n * sizeof *pi);
            int32_t *o1 = malloc((size_t)n * sizeof *o1), *o2 = malloc((size_t)n * sizeof *o2);
            dense_stationary(&d, eps, ref);
            rank_graph g;
            CHECK(rank_graph_build(&g, &d, eps, 1) == 0);
            for (int threads = 1; threads <= 2; threads++) {
                rank_opts o;
                rank_opts_default(&o);
                o.tol = 1e-15;
                o.threads = threads;
                rank_report r;
                CHECK(rank_spectral(&g, &o, pi, &r) == 0);
                CHECK(r.converged);
                double maxdiff = 0;
                for (int32_t i = 0; i < n; i++)
                    if (fabs(pi[i] - ref[i]) > maxdiff)
                        maxdiff = fabs(pi[i] - ref[i]);
                CHECK_NEAR(maxdiff, 0, 1e-9);
                int32_t k = n >= 10 ? 5 : 2;
                CHECK(rank_order(pi, n, o1) == 0 && rank_order(ref, n, o2) == 0);
                /* The same set: every id of the sparse top K is among the reference's. */
                int same = 1;
                for (int32_t i = 0; i < k; i++) {
                    int found = 0;
                    for (int32_t j = 0; j < k; j++)
                        found |= o1[i] == o2[j];
                    same &= found;
                }
                CHECK(same);
            }
            instances++;
            rank_graph_free(&g);
            rank_data_free(&d);
            free(ref);
            free(pi);
            free(o1);
            free(o2);
        }
    }
    CHECK(instances == 20);
    return check_done("test_dense_reference");
}
