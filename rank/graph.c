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

/* Building runs in parts (rank_parallel).  Part p owns a share of the records: it
 * counts their entries per row, and then scatters them, each row's entries from part
 * p going after those from parts before it, so every row lists its entries in record
 * order whatever the number of parts.  Then part p owns a range of rows (balanced by
 * entries) and merges their repeated pairs.  The graph does not depend on the number
 * of parts. */
#define BUILD_PARTS_MAX 16
#define BUILD_PART_MIN  100000 /* records per part, below which one part does */

typedef struct build {
    rank_graph *g;
    const rank_data *d;
    int parts;
    /* count[p][i + 1]: entries of row i from part p's records; then the place of the
     * next of them */
    int64_t *count[BUILD_PARTS_MAX];
    int32_t lo[BUILD_PARTS_MAX + 1]; /* in the merge, part p owns rows lo[p] .. lo[p+1]-1 */
    int64_t *len;                    /* entries of each row after merging */
    double total[BUILD_PARTS_MAX];   /* comparisons in part p's records */
    int failed;
} build;

static void records_of(const build *b, int p, size_t *lo, size_t *hi)
{
    size_t m = b->d->m, share = m / (size_t)b->parts;
    *lo = share * (size_t)p;
    *hi = p + 1 == b->parts ? m : share * (size_t)(p + 1);
}

static void count_part(void *arg, int p)
{
    build *b = arg;
    const rank_data *d = b->d;
    size_t lo, hi;
    records_of(b, p, &lo, &hi);
    int64_t *c = b->count[p];
    for (size_t r = lo; r < hi; r++) {
        if (d->a[r] == d->b[r])
            continue;
        c[d->a[r] + 1]++;
        c[d->b[r] + 1]++;
    }
}

static void scatter_part(void *arg, int p)
{
    build *b = arg;
    const rank_data *d = b->d;
    rank_graph *g = b->g;
    size_t lo, hi;
    records_of(b, p, &lo, &hi);
    int64_t *fill = b->count[p] + 1;
    double total = 0;
    for (size_t r = lo; r < hi; r++) {
        int32_t a = d->a[r], c = d->b[r];
        if (a == c)
            continue;
        double aw = (double)d->a_wins[r], cw = (double)rank_data_b_wins(d, r);
        int64_t ea = fill[a]++, ec = fill[c]++;
        g->col[ea] = c;
        g->wins[ea] = aw;
        g->games[ea] = aw + cw;
        g->col[ec] = a;
        g->wins[ec] = cw;
        g->games[ec] = aw + cw;
        total += aw + cw;
    }
    b->total[p] = total;
}

/* Merges repeated pairs, each row in place at its start.  pos[j] is where opponent j
 * was written; a value before the current row's start is stale. */
static void merge_part(void *arg, int p)
{
    build *b = arg;
    rank_graph *g = b->g;
    int64_t *pos = malloc(((size_t)g->n + 1) * sizeof *pos);
    if (!pos) {
        b->failed = 1;
        return;
    }
    for (int32_t j = 0; j < g->n; j++)
        pos[j] = -1;
    for (int32_t i = b->lo[p]; i < b->lo[p + 1]; i++) {
        int64_t begin = g->row[i], end = g->row[i + 1], w = begin;
        for (int64_t e = begin; e < end; e++) {
            int32_t j = g->col[e];
            if (pos[j] >= begin) {
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
        b->len[i] = w - begin;
    }
    free(pos);
}

int rank_graph_build(rank_graph *g, const rank_data *d, double eps, int threads)
{
    memset(g, 0, sizeof *g);
    int32_t n = d->n;
    g->n = n;
    build b;
    memset(&b, 0, sizeof b);
    b.g = g;
    b.d = d;
    b.parts = threads < 1 ? 1 : threads > BUILD_PARTS_MAX ? BUILD_PARTS_MAX : threads;
    if (d->m / BUILD_PART_MIN < (size_t)b.parts)
        b.parts = d->m / BUILD_PART_MIN > 0 ? (int)(d->m / BUILD_PART_MIN) : 1;
    if (d->m > (SIZE_MAX / 2) / sizeof(double))
        return -1;
    size_t cap = d->m * 2;
    g->row = malloc(((size_t)n + 1) * sizeof *g->row);
    g->col = malloc((cap ? cap : 1) * sizeof *g->col);
    g->wins = malloc((cap ? cap : 1) * sizeof *g->wins);
    g->games = malloc((cap ? cap : 1) * sizeof *g->games);
    b.len = malloc(((size_t)n + 1) * sizeof *b.len);
    int ok = g->row && g->col && g->wins && g->games && b.len;
    for (int p = 0; p < b.parts && ok; p++)
        ok = (b.count[p] = calloc((size_t)n + 1, sizeof *b.count[p])) != NULL;
    if (!ok)
        goto oom;

    rank_parallel(b.parts, threads, count_part, &b);
    /* Row offsets, and where each part's entries of each row start. */
    int64_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        g->row[i] = at;
        for (int p = 0; p < b.parts; p++) {
            int64_t k = b.count[p][i + 1];
            b.count[p][i + 1] = at;
            at += k;
        }
    }
    g->row[n] = at;
    rank_parallel(b.parts, threads, scatter_part, &b);
    for (int p = 0; p < b.parts; p++) {
        free(b.count[p]);
        b.count[p] = NULL;
    }
    /* Rows split by entries, so each part merges about as much. */
    b.lo[0] = 0;
    int32_t i = 0;
    for (int p = 1; p < b.parts; p++) {
        int64_t target = g->row[n] / b.parts * p;
        while (i < n && g->row[i] < target)
            i++;
        b.lo[p] = i;
    }
    b.lo[b.parts] = n;
    rank_parallel(b.parts, threads, merge_part, &b);
    if (b.failed)
        goto oom;
    double total = 0;
    for (int p = 0; p < b.parts; p++)
        total += b.total[p];
    g->comparisons = total;

    /* Close the gaps the merging left, in row order: rows only move down. */
    int64_t w = 0;
    int32_t dmax = 0;
    for (int32_t r = 0; r < n; r++) {
        int64_t from = g->row[r], len = b.len[r];
        g->row[r] = w;
        if (from != w) {
            memmove(g->col + w, g->col + from, (size_t)len * sizeof *g->col);
            memmove(g->wins + w, g->wins + from, (size_t)len * sizeof *g->wins);
            memmove(g->games + w, g->games + from, (size_t)len * sizeof *g->games);
        }
        if (eps > 0)
            for (int64_t e = w; e < w + len; e++) {
                g->wins[e] += eps;
                g->games[e] += 2 * eps;
            }
        w += len;
        if (len > dmax)
            dmax = (int32_t)len;
    }
    g->row[n] = w;
    g->nnz = w;
    g->max_degree = dmax;
    free(b.len);
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
    for (int p = 0; p < b.parts; p++)
        free(b.count[p]);
    free(b.len);
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
        if (rank_data_add(out, map[d->a[r]], map[d->b[r]], d->a_wins[r], rank_data_b_wins(d, r)))
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

/* The win graph has an edge from j to i when j lost to i at least once (with the
 * regularisation, every compared pair both ways): the moves of the Rank Centrality
 * chain.  Its strongly connected components are found by Tarjan's algorithm, made
 * iterative with an explicit stack (a path of 10^6 items must not overflow the C
 * stack), in O(n + entries). */
static int lost(const rank_graph *g, int64_t e)
{
    return g->games[e] - g->wins[e] > 0;
}

int32_t rank_win_components(const rank_graph *g, int32_t *cls, char **closed)
{
    int32_t n = g->n;
    if (closed)
        *closed = NULL;
    int32_t *index = malloc(((size_t)n + 1) * sizeof *index);
    int32_t *low = malloc(((size_t)n + 1) * sizeof *low);
    int32_t *stack = malloc(((size_t)n + 1) * sizeof *stack);
    int32_t *call = malloc(((size_t)n + 1) * sizeof *call);
    int64_t *next = malloc(((size_t)n + 1) * sizeof *next); /* next entry of call[k] */
    int32_t count = -1;
    if (!index || !low || !stack || !call || !next)
        goto done;
    for (int32_t i = 0; i < n; i++) {
        index[i] = -1;
        cls[i] = -1;
    }
    int32_t counter = 0, sp = 0;
    count = 0;
    for (int32_t root = 0; root < n; root++) {
        if (index[root] >= 0)
            continue;
        int32_t depth = 0;
        call[depth] = root;
        next[depth++] = g->row[root];
        index[root] = low[root] = counter++;
        stack[sp++] = root;
        while (depth > 0) {
            int32_t v = call[depth - 1];
            int64_t e = next[depth - 1], end = g->row[v + 1];
            int descended = 0;
            for (; e < end; e++) {
                if (!lost(g, e))
                    continue;
                int32_t w = g->col[e];
                if (index[w] < 0) {
                    next[depth - 1] = e + 1;
                    call[depth] = w;
                    next[depth++] = g->row[w];
                    index[w] = low[w] = counter++;
                    stack[sp++] = w;
                    descended = 1;
                    break;
                }
                if (cls[w] < 0 && index[w] < low[v]) /* w is still on the stack */
                    low[v] = index[w];
            }
            if (descended)
                continue;
            if (low[v] == index[v]) {
                int32_t w;
                do {
                    w = stack[--sp];
                    cls[w] = count;
                } while (w != v);
                count++;
            }
            depth--;
            if (depth > 0 && low[v] < low[call[depth - 1]])
                low[call[depth - 1]] = low[v];
        }
    }
    if (closed) {
        *closed = malloc((size_t)count + 1);
        if (!*closed) {
            count = -1;
            goto done;
        }
        memset(*closed, 1, (size_t)count);
        for (int32_t j = 0; j < n; j++)
            for (int64_t e = g->row[j]; e < g->row[j + 1]; e++)
                if (lost(g, e) && cls[g->col[e]] != cls[j])
                    (*closed)[cls[j]] = 0;
    }
done:
    free(index);
    free(low);
    free(stack);
    free(call);
    free(next);
    return count;
}

/* The two halves of the quick test: part 0 follows wins (i beat j) from item 0 and
 * finds the items without a win, part 1 follows losses and finds the items without
 * a loss.  The graph is strongly connected when both searches reach every item. */
typedef struct reach_job {
    const rank_graph *g;
    int64_t reached[2], never[2];
    int32_t first_never[2];
    int failed;
} reach_job;

static void reach_part(void *arg, int part)
{
    reach_job *j = arg;
    const rank_graph *g = j->g;
    int32_t n = g->n;
    j->reached[part] = 0;
    j->never[part] = 0;
    j->first_never[part] = -1;
    for (int32_t i = 0; i < n; i++) {
        int any = 0;
        for (int64_t e = g->row[i]; e < g->row[i + 1] && !any; e++)
            any = part == 0 ? g->wins[e] > 0 : lost(g, e);
        if (!any) {
            if (j->first_never[part] < 0)
                j->first_never[part] = i;
            j->never[part]++;
        }
    }
    if (n == 0 || j->never[part])
        return; /* an item without a win (or loss) cannot be reached that way */
    char *seen = calloc((size_t)n, 1);
    int32_t *queue = malloc((size_t)n * sizeof *queue);
    if (!seen || !queue) {
        j->failed = 1;
        free(seen);
        free(queue);
        return;
    }
    int64_t head = 0, tail = 0;
    queue[tail++] = 0;
    seen[0] = 1;
    while (head < tail) {
        int32_t i = queue[head++];
        for (int64_t e = g->row[i]; e < g->row[i + 1]; e++) {
            int32_t k = g->col[e];
            if (!seen[k] && (part == 0 ? g->wins[e] > 0 : lost(g, e))) {
                seen[k] = 1;
                queue[tail++] = k;
            }
        }
    }
    j->reached[part] = tail;
    free(seen);
    free(queue);
}

int rank_check_strength(const rank_graph *g, int threads, rank_strength *s)
{
    memset(s, 0, sizeof *s);
    for (int k = 0; k < RANK_GROUPS_SHOWN; k++)
        s->group_first[k] = -1;
    reach_job j = {.g = g};
    /* A thread costs more than the search on small graphs. */
    rank_parallel(2, g->nnz < 100000 ? 1 : threads, reach_part, &j);
    if (j.failed)
        return -1;
    s->never_win = j.never[0];
    s->first_never_win = j.first_never[0];
    s->never_lose = j.never[1];
    s->first_never_lose = j.first_never[1];
    if (g->n > 1 && j.reached[0] == g->n && j.reached[1] == g->n) {
        s->strongly_connected = 1;
        s->groups = 1;
        s->in_groups = g->n;
        s->group_first[0] = 0;
        s->group_size[0] = g->n;
        return 0;
    }
    if (g->n <= 1) {
        s->strongly_connected = 1;
        s->groups = g->n;
        s->in_groups = g->n;
        s->group_first[0] = g->n ? 0 : -1;
        s->group_size[0] = g->n;
        return 0;
    }
    int32_t *cls = malloc((size_t)g->n * sizeof *cls);
    char *closed = NULL;
    int32_t count = cls ? rank_win_components(g, cls, &closed) : -1;
    if (count < 0) {
        free(cls);
        return -1;
    }
    s->strongly_connected = count == 1;
    /* Groups are listed by their first member, so by first appearance in a file. */
    int64_t *size = calloc((size_t)count, sizeof *size);
    int32_t *slot = malloc((size_t)count * sizeof *slot);
    if (!size || !slot) {
        free(size);
        free(slot);
        free(cls);
        free(closed);
        return -1;
    }
    for (int32_t c = 0; c < count; c++)
        slot[c] = -1;
    for (int32_t i = 0; i < g->n; i++) {
        int32_t c = cls[i];
        if (!closed[c])
            continue;
        size[c]++;
        s->in_groups++;
        if (slot[c] < 0) {
            slot[c] = (int32_t)(s->groups < INT32_MAX ? s->groups : INT32_MAX);
            if (s->groups < RANK_GROUPS_SHOWN)
                s->group_first[s->groups] = i;
            s->groups++;
        }
    }
    for (int32_t c = 0; c < count; c++)
        if (closed[c] && slot[c] < RANK_GROUPS_SHOWN)
            s->group_size[slot[c]] = size[c];
    for (int32_t c = 0; c < count; c++)
        if (closed[c] && size[c] > 1)
            s->groups_not_single = 1;
    free(size);
    free(slot);
    free(cls);
    free(closed);
    return 0;
}
