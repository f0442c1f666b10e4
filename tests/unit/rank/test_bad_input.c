/* test_bad_input.c: what the library does with bad data.
 *
 * The parser must name the line and the problem for every malformed line and keep
 * going; self-comparisons are warned about and skipped.  An item that never wins gets
 * a spectral score of exactly 0 (not NaN), and regularisation gives it a small positive
 * one and makes maximum likelihood finite. */
#include "check.h"
#include "rank.h"

#include <stdlib.h>
#include <string.h>

/* Parses TEXT; the diagnostics land in diag. */
static int64_t parse_text(const char *text, rank_data *d, char *diag, size_t len)
{
    FILE *in = fmemopen((void *)text, strlen(text), "r");
    FILE *err = fmemopen(diag, len, "w");
    memset(diag, 0, len);
    int64_t rc = rank_parse(in, "t.csv", d, err);
    fclose(in);
    fclose(err);
    return rc;
}

int main(void)
{
    char diag[4096];
    rank_data d;

    /* Good lines: comments, blanks, spaces, CRLF, counts, names with spaces. */
    rank_data_init(&d);
    CHECK(parse_text("# header comment\n\nalice,bob\n  bob , carol , 3\r\nmr x,alice,2\n", &d, diag,
                     sizeof diag) == 0);
    CHECK(diag[0] == '\0');
    CHECK(d.n == 4 && d.m == 3);
    CHECK(strcmp(d.names[3], "mr x") == 0);
    CHECK(d.a_wins[1] == 3 && rank_data_b_wins(&d, 1) == 0);
    rank_data_free(&d);

    /* Every kind of malformed line, each reported with its line number. */
    rank_data_init(&d);
    const char *bad = "a,b\n"
                      "justone\n"
                      "a,b,c,d\n"
                      ",b\n"
                      "a, \n"
                      "a,b,0\n"
                      "a,b,-2\n"
                      "a,b,1.5\n"
                      "a,b,99999999999999999999\n"
                      "a,a\n"
                      "a,b,\n";
    CHECK(parse_text(bad, &d, diag, sizeof diag) == 9);
    const char *want = "t.csv:2: error: 1 field; expected 'winner,loser[,count]'\n"
                       "t.csv:3: error: 4 fields; expected 'winner,loser[,count]'\n"
                       "t.csv:4: error: empty winner name\n"
                       "t.csv:5: error: empty loser name\n"
                       "t.csv:6: error: count '0' is not a positive integer\n"
                       "t.csv:7: error: count '-2' is not a positive integer\n"
                       "t.csv:8: error: count '1.5' is not a positive integer\n"
                       "t.csv:9: error: count '99999999999999999999' is too large\n"
                       "t.csv:10: warning: 'a' is compared with itself; line ignored\n"
                       "t.csv:11: error: count '' is not a positive integer\n";
    if (strcmp(diag, want) != 0)
        fprintf(stderr, "got:\n%s", diag);
    CHECK(strcmp(diag, want) == 0);
    rank_data_free(&d);

    /* Never-win item: spectral score exactly 0, no NaN; regularised: positive, last. */
    {
        rank_data_init(&d);
        d.n = 3;
        rank_data_add(&d, 0, 1, 3, 2);
        rank_data_add(&d, 1, 2, 4, 0);
        rank_data_add(&d, 0, 2, 5, 0);
        rank_graph g;
        CHECK(rank_graph_build(&g, &d, 0, 1) == 0);
        rank_strength st;
        CHECK(rank_check_strength(&g, 1, &st) == 0);
        CHECK(!st.strongly_connected && st.never_win == 1 && st.first_never_win == 2);
        rank_opts o;
        rank_opts_default(&o);
        o.tol = 1e-14;
        double s[3];
        rank_report rep;
        CHECK(rank_spectral(&g, &o, s, &rep) == 0);
        CHECK(s[2] < 1e-12 && s[2] >= 0);
        CHECK_NEAR(s[0] / s[1], 1.5, 1e-9);
        rank_graph_free(&g);

        CHECK(rank_graph_build(&g, &d, 0.5, 1) == 0);
        CHECK(rank_check_strength(&g, 1, &st) == 0);
        CHECK(st.strongly_connected);
        CHECK(rank_spectral(&g, &o, s, &rep) == 0);
        CHECK(s[2] > 0 && s[2] < s[1] && s[1] < s[0]);
        /* With the prior the MLE exists: check its optimality condition. */
        CHECK(rank_mle(&g, &o, s, &rep) == 0);
        CHECK(rep.converged);
        for (int32_t i = 0; i < 3; i++) {
            double wins = 0, expected = 0;
            for (int64_t e = g.row[i]; e < g.row[i + 1]; e++) {
                wins += g.wins[e];
                expected += g.games[e] * s[i] / (s[i] + s[g.col[e]]);
            }
            CHECK_NEAR(wins, expected, 1e-8);
            CHECK(s[i] > 0);
        }
        rank_graph_free(&g);
        rank_data_free(&d);
    }
    return check_done("test_bad_input");
}
