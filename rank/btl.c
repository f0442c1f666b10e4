/* btl.c: random numbers and the Bradley-Terry-Luce data generator.
 *
 * The experiments of Negahban et al. and Chen & Suh draw an Erdos-Renyi comparison
 * graph G(n, p), compare each edge's two items L times with BTL outcomes, and control
 * the difficulty through the top-K separation Delta_K = (w_K - w_{K+1}) / w_max.
 * rank_btl_scores pins w_max, w_K and w_{K+1} so that Delta_K is exact rather than
 * approximately what a random draw happens to give.  The graph is drawn by skipping
 * over the n(n-1)/2 candidate pairs with geometric gaps (Batagelj & Brandes), so the
 * cost is proportional to the pairs drawn, which is what makes n = 10^6 possible.
 * xoshiro256** is the generator: fast, small state, and seedable per trial. */
#include "rank.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rank_rng_seed(rank_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rank_rng_next(rank_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rank_rng_uniform(rank_rng *r)
{
    return (double)(rank_rng_next(r) >> 11) * 0x1.0p-53;
}

void rank_btl_scores(int32_t n, int32_t k, double delta, rank_rng *r, double *w)
{
    /* Draw in sorted position order, then shuffle so that ids carry no information
   * (a tie-break by id must not favour the true top K). */
    /* With K = 1 the K-th score is w_max itself, so the gap moves below it. */
    double wk = k == 1 ? 1.0 : 0.5 + delta, wk1 = wk - delta;
    for (int32_t i = 0; i < n; i++) {
        if (i == 0)
            w[i] = 1.0;
        else if (i == k - 1)
            w[i] = wk;
        else if (i == k)
            w[i] = wk1;
        else if (i < k)
            w[i] = wk + (1 - wk) * rank_rng_uniform(r);
        else
            w[i] = 0.5 * wk1 + 0.5 * wk1 * rank_rng_uniform(r);
    }
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)(rank_rng_uniform(r) * (i + 1));
        double t = w[i];
        w[i] = w[j];
        w[j] = t;
    }
}

int rank_btl_generate(const double *w, int32_t n, double p, int64_t L, rank_rng *r, rank_data *d)
{
    if (d->n < n)
        d->n = n;
    if (n < 2 || !(p > 0))
        return 0;
    double log_q = p < 1 ? log1p(-p) : 0;
    int64_t i = 0, j = 0; /* next candidate pair is (i, j), i < j; j = i means "start" */
    for (;;) {
        /* Gap before the next selected pair: geometric with success probability p. */
        int64_t skip = 0;
        if (p < 1) {
            double u = 1 - rank_rng_uniform(r); /* in (0, 1] so the log is finite */
            double s = floor(log(u) / log_q);
            skip = s > 4e18 ? (int64_t)4e18 : (int64_t)s;
        }
        j += skip + 1;
        while (j >= n) {
            i++;
            if (i >= n - 1)
                return 0;
            j = i + 1 + (j - n);
        }
        double pij = w[i] / (w[i] + w[j]);
        int64_t wi = 0;
        for (int64_t l = 0; l < L; l++)
            wi += rank_rng_uniform(r) < pij;
        if (rank_data_add(d, (int32_t)i, (int32_t)j, wi, L - wi))
            return -1;
    }
}
