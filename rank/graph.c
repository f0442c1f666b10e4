/* graph.c: the comparison graph in CSR form, and its connectivity checks.
 *
 * Every method walks, for each item, the opponents it met and the outcomes, so the
 * records are aggregated once into a symmetric CSR matrix: row i lists each distinct
 * opponent j once with the wins of i over j and the number of games between them.
 * Building is O(records + n) with no sort: entries are bucketed by row, then
 * duplicates of a pair are merged in place using a "where did j land in this row"
 * marker.  The checks here decide whether a ranking is meaningful: a disconnected graph
 * has no common scale, and an item that never wins (or never loses) has a BTL score of
 * 0 (or infinity) under maximum likelihood. */
#include "rank.h"

#include <stdlib.h>
#include <string.h>

void rank_graph_free(rank_graph *g)
{
    free(g->row);
    free(g->col);
    free(g->wins);
    free(g->games);
    memset(g, 0, sizeof *g);
}

int rank_graph_build(rank_graph *g, const rank_data *d, double eps)
{
    memset(g, 0, sizeof *g);
    int32_t n = d->n;
    g->n = n;
    g->row = calloc((size_t)n + 1, sizeof *g->row);
    size_t cap = d->m * 2;
    g->col = malloc((cap ? cap : 1) * sizeof *g->col);
    g->wins = malloc((cap ? cap : 1) * sizeof *g->wins);
    g->games = malloc((cap ? cap : 1) * sizeof *g->games);
    int64_t *fill = malloc(((size_t)n + 1) * sizeof *fill);
    if (!g->row || !g->col || !g->wins || !g->games || !fill)
        goto oom;

    double total = 0;
    for (size_t r = 0; r < d->m; r++) {
        if (d->a[r] == d->b[r])
            continue;
        g->row[d->a[r] + 1]++;
        g->row[d->b[r] + 1]++;
    }
    for (int32_t i = 0; i < n; i++)
        g->row[i + 1] += g->row[i];
    memcpy(fill, g->row, ((size_t)n + 1) * sizeof *fill);
    for (size_t r = 0; r < d->m; r++) {
        int32_t a = d->a[r], b = d->b[r];
        if (a == b)
            continue;
        double aw = (double)d->a_wins[r], bw = (double)d->b_wins[r];
        int64_t ea = fill[a]++, eb = fill[b]++;
        g->col[ea] = b;
        g->wins[ea] = aw;
        g->games[ea] = aw + bw;
        g->col[eb] = a;
        g->wins[eb] = bw;
        g->games[eb] = aw + bw;
        total += aw + bw;
    }
    g->comparisons = total;

    /* Merge repeated pairs in place.  pos[j] is where opponent j was written; a value
   * below the start of the current output row is stale from an earlier row. */
    int64_t *pos = fill;
    for (int32_t j = 0; j < n; j++)
        pos[j] = -1;
    int64_t w = 0;
    int32_t dmax = 0;
    for (int32_t i = 0; i < n; i++) {
        int64_t begin = g->row[i], end = g->row[i + 1], out_start = w;
        for (int64_t e = begin; e < end; e++) {
            int32_t j = g->col[e];
            if (pos[j] >= out_start) {
                g->wins[pos[j]] += g->wins[e];
                g->games[pos[j]] += g->games[e];
            } else {
                pos[j] = w;
                g->col[w] = j;
                g->wins[w] = g->wins[e];
                g->games[w] = g->games[e];
                w++;
            }
        }
        g->row[i] = out_start;
        if (w - out_start > dmax)
            dmax = (int32_t)(w - out_start);
    }
    g->row[n] = w;
    g->nnz = w;
    g->max_degree = dmax;
    free(fill);
    for (int64_t e = 0; e < w; e++) {
        g->wins[e] += eps;
        g->games[e] += 2 * eps;
    }
    if (w > 0 && (size_t)w < cap) {
        /* Shrinking can only fail by keeping the larger block, which is still valid. */
        int32_t *c = realloc(g->col, (size_t)w * sizeof *c);
        if (c)
            g->col = c;
        double *x = realloc(g->wins, (size_t)w * sizeof *x);
        if (x)
            g->wins = x;
        double *y = realloc(g->games, (size_t)w * sizeof *y);
        if (y)
            g->games = y;
    }
    return 0;
oom:
    free(fill);
    rank_graph_free(g);
    return -1;
}

typedef struct comp_size {
    int64_t size;
    int32_t first;
} comp_size;

static int by_size_desc(const void *x, const void *y)
{
    const comp_size *a = x, *b = y;
    if (a->size != b->size)
        return a->size > b->size ? -1 : 1;
    return (a->first > b->first) - (a->first < b->first);
}

int32_t rank_components(const rank_graph *g, int32_t *comp, int64_t **sizes)
{
    int32_t n = g->n;
    int32_t *queue = malloc(((size_t)n + 1) * sizeof *queue);
    comp_size *cs = malloc(((size_t)n + 1) * sizeof *cs);
    int32_t *renum = malloc(((size_t)n + 1) * sizeof *renum);
    if (!queue || !cs || !renum) {
        free(queue);
        free(cs);
        free(renum);
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        comp[i] = -1;
    int32_t nc = 0;
    for (int32_t s = 0; s < n; s++) {
        if (comp[s] >= 0)
            continue;
        int64_t head = 0, tail = 0;
        queue[tail++] = s;
        comp[s] = nc;
        while (head < tail) {
            int32_t i = queue[head++];
            for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
                int32_t j = g->col[e];
                if (comp[j] < 0) {
                    comp[j] = nc;
                    queue[tail++] = j;
                }
            }
        }
        cs[nc].size = tail;
        cs[nc].first = s;
        nc++;
    }
    qsort(cs, (size_t)nc, sizeof *cs, by_size_desc);
    /* Components were found in order of their smallest member, so first maps back. */
    for (int32_t c = 0; c < nc; c++)
        renum[comp[cs[c].first]] = c;
    for (int32_t i = 0; i < n; i++)
        comp[i] = renum[comp[i]];
    if (sizes) {
        *sizes = malloc(((size_t)nc + 1) * sizeof **sizes);
        if (*sizes)
            for (int32_t c = 0; c < nc; c++)
                (*sizes)[c] = cs[c].size;
    }
    free(queue);
    free(cs);
    free(renum);
    if (sizes && !*sizes)
        return -1;
    return nc;
}

int rank_data_restrict(const rank_data *d, const int32_t *comp, int32_t which, rank_data *out,
                       int32_t **old_id)
{
    rank_data_init(out);
    int32_t *map = malloc(((size_t)d->n + 1) * sizeof *map);
    int32_t *back = malloc(((size_t)d->n + 1) * sizeof *back);
    if (!map || !back)
        goto oom;
    int32_t k = 0;
    for (int32_t i = 0; i < d->n; i++) {
        if (comp[i] != which) {
            map[i] = -1;
            continue;
        }
        if (d->names) {
            int32_t id = rank_data_intern(out, d->names[i], strlen(d->names[i]));
            if (id < 0)
                goto oom;
        } else {
            out->n++;
        }
        back[k] = i;
        map[i] = k++;
    }
    for (size_t r = 0; r < d->m; r++) {
        if (map[d->a[r]] < 0)
            continue;
        if (rank_data_add(out, map[d->a[r]], map[d->b[r]], d->a_wins[r], d->b_wins[r]))
            goto oom;
    }
    free(map);
    if (old_id)
        *old_id = back;
    else
        free(back);
    return 0;
oom:
    free(map);
    free(back);
    rank_data_free(out);
    return -1;
}

/* Marks every item reachable from item 0 along entries whose outcome count (wins when
 * forward, losses otherwise) is positive; returns how many were reached. */
static int64_t reach(const rank_graph *g, int forward, char *seen, int32_t *queue)
{
    memset(seen, 0, (size_t)g->n);
    int64_t head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int32_t i = queue[head++];
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
            double c = forward ? g->wins[e] : g->games[e] - g->wins[e];
            int32_t j = g->col[e];
            if (c > 0 && !seen[j]) {
                seen[j] = 1;
                queue[tail++] = j;
            }
        }
    }
    return tail;
}

int rank_check_strength(const rank_graph *g, rank_strength *s)
{
    memset(s, 0, sizeof *s);
    s->first_never_win = s->first_never_lose = -1;
    for (int32_t i = 0; i < g->n; i++) {
        double w = 0, l = 0;
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
            w += g->wins[e];
            l += g->games[e] - g->wins[e];
        }
        if (!(w > 0)) {
            if (s->first_never_win < 0)
                s->first_never_win = i;
            s->never_win++;
        }
        if (!(l > 0)) {
            if (s->first_never_lose < 0)
                s->first_never_lose = i;
            s->never_lose++;
        }
    }
    if (g->n <= 1) {
        s->strongly_connected = 1;
        return 0;
    }
    char *seen = malloc((size_t)g->n);
    int32_t *queue = malloc((size_t)g->n * sizeof *queue);
    if (!seen || !queue) {
        free(seen);
        free(queue);
        return -1;
    }
    s->strongly_connected = reach(g, 1, seen, queue) == g->n && reach(g, 0, seen, queue) == g->n;
    free(seen);
    free(queue);
    return 0;
}
