/* test_graph.c: the name table, the CSR builder and the connectivity checks.
 *
 * Builds small graphs by hand and checks the merged entries, d_max, the component
 * numbering (largest first), restriction to a component, and the strong-connectivity
 * diagnosis that decides whether maximum likelihood is defined. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>
#include <string.h>

/* Finds the entry of row i for opponent j, or -1. */
static int64_t entry(const rank_graph *g, int32_t i, int32_t j)
{
    for (int64_t e = g->row[i]; e < g->row[i + 1]; e++)
        if (g->col[e] == j)
            return e;
    return -1;
}

int main(void)
{
    /* Names: the same string maps to the same id across table growth. */
    {
        rank_data d;
        rank_data_init(&d);
        char buf[32];
        for (int i = 0; i < 5000; i++) {
            snprintf(buf, sizeof buf, "player %d", i);
            CHECK(rank_data_intern(&d, buf, strlen(buf)) == i);
        }
        for (int i = 0; i < 5000; i += 7) {
            snprintf(buf, sizeof buf, "player %d", i);
            CHECK(rank_data_intern(&d, buf, strlen(buf)) == i);
        }
        CHECK(d.n == 5000);
        CHECK(strcmp(d.names[4321], "player 4321") == 0);
        /* Names are compared by length too: a prefix is a different item. */
        CHECK(rank_data_intern(&d, "player 12", 8) == 1);
        CHECK(rank_data_intern(&d, "zzz-extra", 3) == 5000);
        CHECK(d.n == 5001 && strcmp(rank_item_name(&d, d.n - 1, buf, sizeof buf), "zzz") == 0);
        rank_data_free(&d);
        rank_data anon;
        rank_data_init(&anon);
        anon.n = 3;
        CHECK(strcmp(rank_item_name(&anon, 2, buf, sizeof buf), "item2") == 0);
    }

    /* Duplicates merge; both directions carry consistent counts; d_max counts distinct
   * opponents, not records. */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 4;
        rank_data_add(&d, 0, 1, 2, 0);
        rank_data_add(&d, 1, 0, 5, 0);
        rank_data_add(&d, 0, 1, 1, 1);
        rank_data_add(&d, 2, 0, 1, 0);
        rank_data_add(&d, 3, 3, 9, 9); /* a self-record carries nothing and is dropped */
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        CHECK(g.nnz == 4);
        CHECK(g.max_degree == 2);
        CHECK_NEAR(g.comparisons, 10, 0);
        int64_t e01 = entry(&g, 0, 1), e10 = entry(&g, 1, 0);
        CHECK(e01 >= 0 && e10 >= 0);
        if (e01 >= 0 && e10 >= 0) {
            CHECK_NEAR(g.wins[e01], 3, 0);
            CHECK_NEAR(g.wins[e10], 6, 0);
            CHECK_NEAR(g.games[e01], 9, 0);
            CHECK_NEAR(g.games[e10], 9, 0);
        }
        CHECK(g.row[4] - g.row[3] == 0);
        rank_graph_free(&g);

        /* Regularisation adds eps to each direction of every compared pair only. */
        CHECK(rank_graph_build(&g, &d, 0.5, 1) == 0);
        e01 = entry(&g, 0, 1);
        CHECK(e01 >= 0);
        if (e01 >= 0) {
            CHECK_NEAR(g.wins[e01], 3.5, 0);
            CHECK_NEAR(g.games[e01], 10, 0);
        }
        CHECK(entry(&g, 1, 2) < 0);
        CHECK_NEAR(g.comparisons, 10, 0);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* Components: {0,1} {2,3,4} {5}: numbered by size, then by smallest member. */
    {
        rank_data d;
        rank_data_init(&d);
        const char *names[] = {"a", "b", "c", "d", "e", "f"};
        for (int i = 0; i < 6; i++)
            rank_data_intern(&d, names[i], 1);
        rank_data_add(&d, 0, 1, 1, 1);
        rank_data_add(&d, 2, 3, 1, 0);
        rank_data_add(&d, 4, 3, 1, 1);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        int32_t comp[6];
        int64_t *sizes = NULL;
        CHECK(rank_components(&g, comp, &sizes) == 3);
        CHECK(comp[2] == 0 && comp[3] == 0 && comp[4] == 0);
        CHECK(comp[0] == 1 && comp[1] == 1);
        CHECK(comp[5] == 2);
        CHECK(sizes && sizes[0] == 3 && sizes[1] == 2 && sizes[2] == 1);
        free(sizes);

        rank_data sub;
        int32_t *old = NULL;
        CHECK(rank_data_restrict(&d, comp, 0, &sub, &old) == 0);
        CHECK(sub.n == 3 && sub.m == 2);
        CHECK(strcmp(sub.names[0], "c") == 0 && strcmp(sub.names[2], "e") == 0);
        CHECK(old && old[0] == 2 && old[1] == 3 && old[2] == 4);
        free(old);

        /* Within {c, d, e}: c beat d once, d and e split two games.  c never loses; every
     * item has a win. */
        rank_graph sg;
        CHECK(rank_graph_build(&sg, &sub, 0, 1) == 0);
        rank_strength st;
        CHECK(rank_check_strength(&sg, 1, &st) == 0);
        CHECK(!st.strongly_connected);
        CHECK(st.never_lose == 1 && st.first_never_lose == 0);
        CHECK(st.never_win == 0 && st.first_never_win == -1);
        rank_graph_free(&sg);

        /* With a prior every pair has wins both ways. */
        CHECK(rank_graph_build(&sg, &sub, 0.1, 1) == 0);
        CHECK(rank_check_strength(&sg, 1, &st) == 0);
        CHECK(st.strongly_connected && st.never_lose == 0 && st.never_win == 0);
        rank_graph_free(&sg);
        rank_data_free(&sub);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* Strongly connected without any never-win item can still fail: two groups where
   * one always beats the other. */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 4;
        rank_data_add(&d, 0, 1, 1, 1);
        rank_data_add(&d, 2, 3, 1, 1);
        rank_data_add(&d, 0, 2, 4, 0);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_strength st;
        CHECK(rank_check_strength(&g, 1, &st) == 0);
        CHECK(!st.strongly_connected && st.never_win == 0 && st.never_lose == 0);
        /* {0, 1} never loses to {2, 3}: one closed group of 2, the first member 0. */
        CHECK(st.groups == 1 && st.in_groups == 2 && st.groups_not_single);
        CHECK(st.group_first[0] == 0 && st.group_size[0] == 2);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* Closed groups: two items that never lose (0 and 1) above a cycle {2, 3, 4};
     * then a group {5, 6} that never loses to the cycle either. */
    {
        rank_data d;
        rank_data_init(&d);
        d.n = 7;
        rank_data_add(&d, 2, 3, 1, 0); /* 2 beat 3, 3 beat 4, 4 beat 2 */
        rank_data_add(&d, 3, 4, 1, 0);
        rank_data_add(&d, 4, 2, 1, 0);
        rank_data_add(&d, 0, 2, 2, 0);
        rank_data_add(&d, 1, 3, 1, 0);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        int32_t cls[7];
        char *closed = NULL;
        CHECK(rank_win_components(&g, cls, &closed) == 5); /* 0, 1, {2,3,4}, 5, 6 */
        CHECK(cls[2] == cls[3] && cls[3] == cls[4] && cls[0] != cls[1] && cls[0] != cls[2]);
        CHECK(closed && closed[cls[0]] && closed[cls[1]] && !closed[cls[2]]);
        free(closed);
        rank_strength st;
        CHECK(rank_check_strength(&g, 2, &st) == 0);
        /* 5 and 6 were never compared: each is a component, and a closed group. */
        CHECK(!st.strongly_connected && st.groups == 4 && !st.groups_not_single);
        CHECK(st.group_first[0] == 0 && st.group_first[1] == 1 && st.group_first[2] == 5);
        CHECK(st.never_lose == 4 && st.first_never_lose == 0);
        CHECK(st.never_win == 2 && st.first_never_win == 5);
        rank_graph_free(&g);
        rank_data_add(&d, 5, 6, 1, 1);
        rank_data_add(&d, 5, 2, 1, 0);
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        CHECK(rank_check_strength(&g, 1, &st) == 0);
        CHECK(st.groups == 3 && st.groups_not_single && st.in_groups == 4);
        CHECK(st.group_first[2] == 5 && st.group_size[2] == 2 && st.group_size[0] == 1);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* A path of 10^6 items, each beaten by the next: 10^6 components, found without
     * recursion (a recursive search would need a million stack frames). */
    {
        int32_t n = 1000000;
        rank_data d;
        rank_data_init(&d);
        d.n = n;
        for (int32_t i = 0; i + 1 < n; i++)
            rank_data_add(&d, i + 1, i, 1, 0);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 2) == 0);
        int32_t *cls = malloc((size_t)n * sizeof *cls);
        char *closed = NULL;
        CHECK(cls && rank_win_components(&g, cls, &closed) == n);
        int ok = 1;
        for (int32_t i = 0; cls && closed && i < n; i++)
            ok &= closed[cls[i]] == (i == n - 1);
        CHECK(ok);
        free(cls);
        free(closed);
        rank_strength st;
        CHECK(rank_check_strength(&g, 2, &st) == 0);
        CHECK(st.groups == 1 && st.group_first[0] == n - 1 && st.in_groups == 1);
        rank_graph_free(&g);
        /* Back edges make it one component: strongly connected. */
        for (int32_t i = 0; i + 1 < n; i++)
            rank_data_add(&d, i, i + 1, 1, 0);
        CHECK(rank_graph_build(&g, &d, 0, 2) == 0);
        CHECK(rank_check_strength(&g, 2, &st) == 0);
        CHECK(st.strongly_connected && st.groups == 1 && st.in_groups == n);
        rank_graph_free(&g);
        rank_data_free(&d);
    }

    /* Building in parts gives the same graph, entry for entry, on any thread count. */
    {
        rank_rng r;
        rank_rng_seed(&r, 99);
        rank_data d;
        rank_data_init(&d);
        d.n = 30000;
        for (int k = 0; k < 700000; k++) {
            int32_t a = (int32_t)(rank_rng_next(&r) % 30000),
                    b = (int32_t)(rank_rng_next(&r) % 30000);
            rank_data_add(&d, a, b, (int64_t)(rank_rng_next(&r) % 5),
                          (int64_t)(rank_rng_next(&r) % 3));
        }
        rank_graph g1, g;
        CHECK(rank_graph_build(&g1, &d, 0.25, 1) == 0);
        for (int threads = 2; threads <= 5; threads++) {
            CHECK(rank_graph_build(&g, &d, 0.25, threads) == 0);
            CHECK(g.nnz == g1.nnz && g.max_degree == g1.max_degree &&
                  g.comparisons == g1.comparisons);
            CHECK(memcmp(g.row, g1.row, ((size_t)g.n + 1) * sizeof *g.row) == 0);
            CHECK(memcmp(g.col, g1.col, (size_t)g.nnz * sizeof *g.col) == 0);
            CHECK(memcmp(g.wins, g1.wins, (size_t)g.nnz * sizeof *g.wins) == 0);
            CHECK(memcmp(g.games, g1.games, (size_t)g.nnz * sizeof *g.games) == 0);
            rank_graph_free(&g);
        }
        /* And every entry is right: wins and games summed over the records. */
        double wins = 0, games = 0;
        for (int64_t e = 0; e < g1.nnz; e++) {
            wins += g1.wins[e] - 0.25;
            games += g1.games[e] - 0.5;
        }
        double total = 0;
        for (size_t k = 0; k < d.m; k++)
            if (d.a[k] != d.b[k])
                total += (double)(d.a_wins[k] + rank_data_b_wins(&d, k));
        CHECK_NEAR(wins, total, 1e-3);
        CHECK_NEAR(games, 2 * total, 1e-3);
        CHECK_NEAR(g1.comparisons, total, 0);
        rank_graph_free(&g1);
        rank_data_free(&d);
    }
    return check_done("test_graph");
}
