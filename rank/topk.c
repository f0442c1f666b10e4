/* topk.c: turning scores into a top-K answer, and the two metrics of the experiments.
 *
 * Ordering is total and deterministic (ties broken by id) so output is reproducible,
 * but a tie at the K-th place means the data do not single out a top-K set: the
 * metric counts it as a failure and the command warns about it. */
#include "rank.h"

#include <math.h>
#include <stdlib.h>

typedef struct keyed {
    double score;
    int32_t id;
} keyed;

static int by_score_desc(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

int rank_order(const double *score, int32_t n, int32_t *order)
{
    keyed *k = malloc(((size_t)n + 1) * sizeof *k);
    if (!k)
        return -1;
    for (int32_t i = 0; i < n; i++)
        k[i] = (keyed){score[i], i};
    qsort(k, (size_t)n, sizeof *k, by_score_desc);
    for (int32_t i = 0; i < n; i++)
        order[i] = k[i].id;
    free(k);
    return 0;
}

/* Is a ranked before b: higher score, then smaller id. */
static int before(const double *score, int32_t a, int32_t b)
{
    return score[a] > score[b] || (score[a] == score[b] && a < b);
}

/* Restores the heap below position i: the root is the last of the kept items. */
static void sift_down(const double *score, int32_t *heap, int32_t m, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, last = i;
        if (l < m && before(score, heap[last], heap[l]))
            last = l;
        if (r < m && before(score, heap[last], heap[r]))
            last = r;
        if (last == i)
            return;
        int32_t t = heap[i];
        heap[i] = heap[last];
        heap[last] = t;
        i = last;
    }
}

int rank_top(const double *score, int32_t n, int32_t count, int32_t *order)
{
    if (count >= n / 4)
        return rank_order(score, n, order);
    /* A heap of the best COUNT so far, the last of them at the root: O(n log count)
     * instead of sorting all n scores. */
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (m < count) {
            int32_t j = m++;
            order[j] = i;
            while (j > 0 && before(score, order[(j - 1) / 2], order[j])) {
                int32_t t = order[j];
                order[j] = order[(j - 1) / 2];
                order[(j - 1) / 2] = t;
                j = (j - 1) / 2;
            }
        } else if (m > 0 && before(score, i, order[0])) {
            order[0] = i;
            sift_down(score, order, m, 0);
        }
    }
    /* Pop the last one to the end, repeatedly: a heapsort of the kept items. */
    for (int32_t end = m - 1; end > 0; end--) {
        int32_t t = order[0];
        order[0] = order[end];
        order[end] = t;
        sift_down(score, order, end, 0);
    }
    return 0;
}

int rank_boundary_tie(const double *score, const int32_t *order, int32_t n, int32_t k)
{
    if (k <= 0 || k >= n)
        return 0;
    double a = score[order[k - 1]], b = score[order[k]];
    double scale = fabs(score[order[0]]);
    return fabs(a - b) <= 1e-12 * scale;
}

int rank_topk_success(const double *est, const double *truth, int32_t n, int32_t k)
{
    int32_t *oe = malloc(((size_t)n + 1) * sizeof *oe);
    int32_t *ot = malloc(((size_t)n + 1) * sizeof *ot);
    char *in_true = calloc((size_t)n + 1, 1);
    int ok = -1;
    if (!oe || !ot || !in_true || rank_order(est, n, oe) || rank_order(truth, n, ot))
        goto done;
    ok = 0;
    if (rank_boundary_tie(est, oe, n, k) || rank_boundary_tie(truth, ot, n, k))
        goto done;
    for (int32_t i = 0; i < k; i++)
        in_true[ot[i]] = 1;
    ok = 1;
    for (int32_t i = 0; i < k; i++)
        if (!in_true[oe[i]])
            ok = 0;
done:
    free(oe);
    free(ot);
    free(in_true);
    return ok;
}

double rank_linf_error(const double *est, const double *truth, int32_t n)
{
    double se = 0, st = 0, tmax = 0;
    for (int32_t i = 0; i < n; i++) {
        se += est[i];
        st += truth[i];
    }
    for (int32_t i = 0; i < n; i++)
        if (truth[i] / st > tmax)
            tmax = truth[i] / st;
    double err = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = fabs((se > 0 ? est[i] / se : 0) - truth[i] / st);
        if (d > err)
            err = d;
    }
    return tmax > 0 ? err / tmax : 0;
}
