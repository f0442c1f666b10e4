/* cmd_rank.c: the `burstc rank` subcommand, the command-line face of the ranking
 * library in rank/.
 *
 *   burstc rank FILE -k K [--method spectral|spectral-mle|mle] [--all] [--json|--csv]
 *   burstc rank --simulate n=500,k=10,delta=0.1,p=0.25,L=20 --trials T --seed S
 *
 * It reads comparisons, checks that a ranking is meaningful (connected graph; for
 * maximum likelihood, every item with a win and a loss), ranks, and prints.  Problems
 * with options are "burstc rank: error: ...", problems with the data name the file;
 * both exit with status 1.  docs/rank.md documents every option. */
#include "rank.h"
#include "tools.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { FMT_TEXT, FMT_JSON, FMT_CSV };

typedef struct cli {
    const char *file;
    int64_t k; /* 0 = not given */
    int method;
    int all, format, largest, quiet;
    double eps;
    rank_opts o;
    const char *simulate;
    int64_t trials;
    uint64_t seed;
    int methods[RANK_NMETHODS];
    int methods_given;
} cli;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "burstc rank: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'burstc rank --help'.\n");
    return 1;
}

static void print_help(void)
{
    puts("usage: burstc rank FILE -k K [options]\n"
         "       burstc rank --simulate n=N,k=K,delta=D,p=P,L=L [--trials T] [--seed S]\n"
         "\n"
         "Ranks items from pairwise comparisons (lines 'winner,loser[,count]') under the\n"
         "Bradley-Terry-Luce model and prints the top K with their scores.\n"
         "\n"
         "  -k K                  number of top items to print\n"
         "  --all                 print every item\n"
         "  --method M            spectral (default), spectral-mle or mle\n"
         "  --json, --csv         output format (default: text)\n"
         "  --regularize EPS      add EPS pseudo-wins each way to every compared pair\n"
         "  --largest-component   rank within the largest connected component\n"
         "  --tol T               convergence tolerance (default 1e-10)\n"
         "  --max-iter N          iteration limit (default 100000)\n"
         "  --rounds R            Spectral MLE refinement rounds (default ceil(log2 n))\n"
         "  --xi C                Spectral MLE threshold constant (default 0.1)\n"
         "  --threads N           threads (default 2)\n"
         "  --quiet               no convergence report, no warnings\n"
         "  --simulate SPEC       Monte Carlo trials on generated BTL data\n"
         "  --trials T            number of trials (default 100)\n"
         "  --seed S              random seed (default 1)\n"
         "  --methods LIST        methods to simulate, comma-separated (default: all)\n"
         "  -h, --help            this text");
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_f64(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Matches "--name VALUE" and "--name=VALUE"; advances *i past the value. */
static int option_value(int argc, char **argv, int *i, const char *name, const char **val,
                        int *missing)
{
    size_t len = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, len) != 0)
        return 0;
    if (a[len] == '=') {
        *val = a + len + 1;
        return 1;
    }
    if (a[len] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        *missing = 1;
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

static int parse_methods(cli *c, const char *list)
{
    memset(c->methods, 0, sizeof c->methods);
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int found = -1;
        for (int m = 0; m < RANK_NMETHODS; m++)
            if (strlen(rank_method_names[m]) == len && strncmp(p, rank_method_names[m], len) == 0)
                found = m;
        if (found < 0)
            return -1;
        c->methods[found] = 1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int parse_args(cli *c, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    rank_opts_default(&c->o);
    c->method = RANK_SPECTRAL;
    c->trials = 100;
    c->seed = 1;
    for (int m = 0; m < RANK_NMETHODS; m++)
        c->methods[m] = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int missing = 0;
        int64_t iv;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_help();
            return 2;
        } else if (strcmp(a, "--all") == 0) {
            c->all = 1;
        } else if (strcmp(a, "--json") == 0) {
            c->format = FMT_JSON;
        } else if (strcmp(a, "--csv") == 0) {
            c->format = FMT_CSV;
        } else if (strcmp(a, "--text") == 0) {
            c->format = FMT_TEXT;
        } else if (strcmp(a, "--largest-component") == 0) {
            c->largest = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            c->quiet = 1;
        } else if (option_value(argc, argv, &i, "-k", &v, &missing) ||
                   option_value(argc, argv, &i, "--top", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_i64(v, 1, INT32_MAX, &c->k))
                return usage_error("-k '%s' is not a positive integer", v);
        } else if (option_value(argc, argv, &i, "--method", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            c->method = rank_method_parse(v);
            if (c->method < 0)
                return usage_error("unknown method '%s' (expected spectral, spectral-mle or mle)",
                                   v);
        } else if (option_value(argc, argv, &i, "--methods", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_methods(c, v))
                return usage_error(
                    "bad method list '%s' (expected names from spectral, spectral-mle, mle)", v);
            c->methods_given = 1;
        } else if (option_value(argc, argv, &i, "--regularize", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_f64(v, &c->eps) || c->eps < 0)
                return usage_error("--regularize '%s' is not a non-negative number", v);
        } else if (option_value(argc, argv, &i, "--tol", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_f64(v, &c->o.tol) || !(c->o.tol > 0))
                return usage_error("--tol '%s' is not a positive number", v);
        } else if (option_value(argc, argv, &i, "--max-iter", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_i64(v, 1, INT64_MAX, &c->o.max_iter))
                return usage_error("--max-iter '%s' is not a positive integer", v);
        } else if (option_value(argc, argv, &i, "--rounds", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_i64(v, 1, 1000, &iv))
                return usage_error("--rounds '%s' is not an integer in 1..1000", v);
            c->o.rounds = (int)iv;
        } else if (option_value(argc, argv, &i, "--xi", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_f64(v, &c->o.xi) || c->o.xi < 0)
                return usage_error("--xi '%s' is not a non-negative number", v);
        } else if (option_value(argc, argv, &i, "--threads", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_i64(v, 1, 256, &iv))
                return usage_error("--threads '%s' is not an integer in 1..256", v);
            c->o.threads = (int)iv;
        } else if (option_value(argc, argv, &i, "--simulate", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            c->simulate = v;
        } else if (option_value(argc, argv, &i, "--trials", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_i64(v, 1, INT32_MAX, &c->trials))
                return usage_error("--trials '%s' is not a positive integer", v);
        } else if (option_value(argc, argv, &i, "--seed", &v, &missing)) {
            if (missing)
                return usage_error("%s needs a value", a);
            if (parse_i64(v, 0, INT64_MAX, &iv))
                return usage_error("--seed '%s' is not a non-negative integer", v);
            c->seed = (uint64_t)iv;
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("unknown option '%s'", a);
        } else if (c->file) {
            return usage_error("more than one input file ('%s')", a);
        } else {
            c->file = a;
        }
    }
    if (c->simulate) {
        if (c->file)
            return usage_error("--simulate takes no input file ('%s')", c->file);
        return 0;
    }
    if (!c->file)
        return usage_error("%s", "no input file (use '-' for standard input)");
    if (!c->k && !c->all)
        return usage_error("%s", "-k K is required (or --all)");
    return 0;
}

/* ---- output ---- */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, "\",\n\r") && s[0] != ' ' && (s[0] == '\0' || s[strlen(s) - 1] != ' ')) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* Writes a convergence report in words, for the text header and for warnings. */
static void describe_report(char *buf, size_t len, int method, const rank_report *r)
{
    int n = snprintf(buf, len, "%s after %lld iteration%s (step %.2e",
                     r->converged ? "converged" : "NOT converged", (long long)r->iterations,
                     r->iterations == 1 ? "" : "s", r->step);
    if (n < 0 || (size_t)n >= len)
        return;
    if (r->error_bound >= 0 && r->iterations > 10)
        n += snprintf(buf + n, len - (size_t)n, ", estimated error %.2e)", r->error_bound);
    else
        n += snprintf(buf + n, len - (size_t)n, ")");
    if (method == RANK_SPECTRAL_MLE && n > 0 && (size_t)n < len)
        snprintf(buf + n, len - (size_t)n, " then MLE refinement");
}

static void print_ranking(const cli *c, const rank_data *d, const rank_graph *g,
                          const double *score, const int32_t *order, int32_t count,
                          const rank_report *rep)
{
    char buf[32], words[200];
    describe_report(words, sizeof words, c->method, rep);
    const char *mname = rank_method_names[c->method];
    if (c->format == FMT_TEXT) {
        if (!c->quiet)
            printf("# %s: %ld items, %.0f comparisons; %s\n", mname, (long)g->n, g->comparisons,
                   words);
        printf("%-6s %-16s %s\n", "rank", "score", "item");
        for (int32_t r = 0; r < count; r++)
            printf("%-6ld %-16.10g %s\n", (long)r + 1, score[order[r]],
                   rank_item_name(d, order[r], buf, sizeof buf));
    } else if (c->format == FMT_CSV) {
        printf("rank,item,score\n");
        for (int32_t r = 0; r < count; r++) {
            printf("%ld,", (long)r + 1);
            csv_field(stdout, rank_item_name(d, order[r], buf, sizeof buf));
            printf(",%.17g\n", score[order[r]]);
        }
    } else {
        printf("{\n  \"method\": \"%s\",\n  \"items\": %ld,\n  \"comparisons\": %.0f,\n", mname,
               (long)g->n, g->comparisons);
        printf("  \"convergence\": {\"iterations\": %lld, \"step\": %.6g, \"converged\": %s",
               (long long)rep->iterations, rep->step, rep->converged ? "true" : "false");
        if (rep->error_bound >= 0 && rep->iterations > 10)
            printf(", \"error_bound\": %.6g", rep->error_bound);
        printf("},\n  \"ranking\": [");
        for (int32_t r = 0; r < count; r++) {
            printf("%s\n    {\"rank\": %ld, \"item\": ", r ? "," : "", (long)r + 1);
            json_string(stdout, rank_item_name(d, order[r], buf, sizeof buf));
            printf(", \"score\": %.17g}", score[order[r]]);
        }
        printf("\n  ]\n}\n");
    }
}

/* Names the components of a disconnected graph: sizes and a few members each. */
static void report_components(const rank_data *d, const char *fname, int32_t nc,
                              const int32_t *comp, const int64_t *sizes)
{
    char buf[32];
    fprintf(stderr, "%s: error: the comparison graph is not connected: %ld components\n", fname,
            (long)nc);
    int32_t shown = nc < 10 ? nc : 10;
    for (int32_t c = 0; c < shown; c++) {
        fprintf(stderr, "  component %ld: %lld item%s (", (long)c + 1, (long long)sizes[c],
                sizes[c] == 1 ? "" : "s");
        int listed = 0;
        for (int32_t i = 0; i < d->n && listed < 5; i++) {
            if (comp[i] != c)
                continue;
            fprintf(stderr, "%s'%s'", listed ? ", " : "", rank_item_name(d, i, buf, sizeof buf));
            listed++;
        }
        fprintf(stderr, "%s)\n", sizes[c] > 5 ? ", ..." : "");
    }
    if (nc > shown)
        fprintf(stderr, "  ... and %ld more components\n", (long)(nc - shown));
    fprintf(stderr,
            "%s: note: items in different components cannot be compared; use "
            "--largest-component to rank within the largest\n",
            fname);
}

/* Rounds scores to 10 x tol of the largest: the iteration only pins them down that
 * far, so digits beyond it are noise, and items equal to that accuracy should tie
 * (and be ordered by first appearance) rather than be ordered by rounding error.
 * A loose --tol must not erase the output's resolution, hence the cap. */
static void snap_scores(double *score, int32_t n, double tol)
{
    double max = 0;
    for (int32_t i = 0; i < n; i++)
        if (score[i] > max)
            max = score[i];
    double q = 10 * (tol < 1e-7 ? tol : 1e-7) * max;
    if (!(q > 0))
        return;
    for (int32_t i = 0; i < n; i++)
        score[i] = nearbyint(score[i] / q) * q;
}

static int run_file(cli *c)
{
    FILE *f = stdin;
    const char *fname = strcmp(c->file, "-") == 0 ? "<stdin>" : c->file;
    if (f != NULL && strcmp(c->file, "-") != 0) {
        f = fopen(c->file, "r");
        if (!f) {
            fprintf(stderr, "burstc rank: error: cannot open '%s': %s\n", c->file, strerror(errno));
            return 1;
        }
    }
    rank_data d, sub;
    rank_data_init(&d);
    rank_data_init(&sub);
    rank_graph g;
    memset(&g, 0, sizeof g);
    int32_t *comp = NULL, *order = NULL;
    int64_t *sizes = NULL;
    double *score = NULL;
    int status = 1;
    int64_t errors = rank_parse(f, fname, &d, stderr);
    if (f != stdin)
        fclose(f);
    if (errors) {
        if (errors > 0)
            fprintf(stderr, "%s: %lld error%s; nothing ranked\n", fname, (long long)errors,
                    errors == 1 ? "" : "s");
        goto done;
    }
    if (d.m == 0) {
        fprintf(stderr, "%s: error: no comparisons\n", fname);
        goto done;
    }
    if (rank_graph_build(&g, &d, c->eps))
        goto oom;
    comp = malloc((size_t)d.n * sizeof *comp);
    if (!comp)
        goto oom;
    int32_t nc = rank_components(&g, comp, &sizes);
    if (nc < 0)
        goto oom;
    rank_data *use = &d;
    if (nc > 1) {
        if (!c->largest) {
            report_components(&d, fname, nc, comp, sizes);
            goto done;
        }
        if (!c->quiet)
            fprintf(stderr,
                    "%s: warning: the comparison graph has %ld components; ranking the "
                    "largest (%lld of %ld items)\n",
                    fname, (long)nc, (long long)sizes[0], (long)d.n);
        if (rank_data_restrict(&d, comp, 0, &sub, NULL))
            goto oom;
        rank_graph_free(&g);
        if (rank_graph_build(&g, &sub, c->eps))
            goto oom;
        use = &sub;
    }
    rank_strength st;
    if (rank_check_strength(&g, &st))
        goto oom;
    if (!st.strongly_connected) {
        char b1[32], b2[32];
        int fatal = c->method != RANK_SPECTRAL;
        const char *kind = fatal ? "error" : "warning";
        if (st.never_win)
            fprintf(stderr, "%s: %s: %lld item%s never win%s (e.g. '%s')\n", fname, kind,
                    (long long)st.never_win, st.never_win == 1 ? "" : "s",
                    st.never_win == 1 ? "s" : "",
                    rank_item_name(use, st.first_never_win, b1, sizeof b1));
        if (st.never_lose)
            fprintf(stderr, "%s: %s: %lld item%s never lose%s (e.g. '%s')\n", fname, kind,
                    (long long)st.never_lose, st.never_lose == 1 ? "" : "s",
                    st.never_lose == 1 ? "s" : "",
                    rank_item_name(use, st.first_never_lose, b2, sizeof b2));
        if (!st.never_win && !st.never_lose)
            fprintf(stderr, "%s: %s: some group of items never beats the others\n", fname, kind);
        if (fatal) {
            fprintf(stderr,
                    "%s: note: maximum-likelihood scores do not exist for such data; use "
                    "--regularize EPS (e.g. 0.5) or --method spectral\n",
                    fname);
            goto done;
        }
        if (!c->quiet)
            fprintf(
                stderr,
                "%s: note: the spectral scores put all weight on the items that the "
                "others never beat; use --regularize EPS (e.g. 0.5) to give every pair a prior\n",
                fname);
    }
    int32_t n = g.n;
    if (!c->all && c->k > n) {
        fprintf(stderr, "%s: error: -k %lld is larger than the number of items (%ld)\n", fname,
                (long long)c->k, (long)n);
        goto done;
    }
    score = malloc((size_t)n * sizeof *score);
    order = malloc((size_t)n * sizeof *order);
    if (!score || !order)
        goto oom;
    rank_report rep;
    if (rank_run_method(c->method, &g, &c->o, score, &rep))
        goto oom;
    snap_scores(score, n, c->o.tol);
    if (rank_order(score, n, order))
        goto oom;
    if (!rep.converged && !c->quiet)
        fprintf(stderr,
                "%s: warning: %s did not converge in %lld iterations (step %.2e > tol %.2e); "
                "raise --max-iter or --tol\n",
                fname, rank_method_names[c->method], (long long)rep.iterations, rep.step, c->o.tol);
    int32_t count = c->all ? n : (int32_t)c->k;
    if (!c->all && !c->quiet && rank_boundary_tie(score, order, n, count)) {
        char b1[32], b2[32];
        fprintf(stderr,
                "%s: warning: '%s' and '%s' tie at rank %ld (score %.10g); the top %ld "
                "is not unique\n",
                fname, rank_item_name(use, order[count - 1], b1, sizeof b1),
                rank_item_name(use, order[count], b2, sizeof b2), (long)count, score[order[count]],
                (long)count);
    }
    print_ranking(c, use, &g, score, order, count, &rep);
    status = 0;
    goto done;
oom:
    fprintf(stderr, "burstc rank: error: out of memory\n");
done:
    rank_data_free(&d);
    rank_data_free(&sub);
    rank_graph_free(&g);
    free(comp);
    free(sizes);
    free(score);
    free(order);
    return status;
}

/* ---- --simulate ---- */

static int parse_spec(const char *spec, rank_sim_params *p)
{
    p->n = 500;
    p->k = 10;
    p->delta = 0.1;
    p->p = 0.25;
    p->L = 20;
    char *copy = strdup(spec);
    if (!copy)
        return usage_error("%s", "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            rc = usage_error("--simulate: '%s' is not KEY=VALUE", kv);
            break;
        }
        *eq = '\0';
        const char *key = kv, *val = eq + 1;
        int64_t iv;
        double dv;
        if (strcmp(key, "n") == 0) {
            if (parse_i64(val, 2, INT32_MAX - 1, &iv)) {
                rc = usage_error("--simulate: n='%s' is not an integer >= 2", val);
                break;
            }
            p->n = (int32_t)iv;
        } else if (strcmp(key, "k") == 0) {
            if (parse_i64(val, 1, INT32_MAX - 1, &iv)) {
                rc = usage_error("--simulate: k='%s' is not a positive integer", val);
                break;
            }
            p->k = (int32_t)iv;
        } else if (strcmp(key, "delta") == 0) {
            if (parse_f64(val, &dv) || !(dv > 0) || !(dv < 1)) {
                rc = usage_error("--simulate: delta='%s' is not in (0, 1)", val);
                break;
            }
            p->delta = dv;
        } else if (strcmp(key, "p") == 0) {
            if (parse_f64(val, &dv) || !(dv > 0) || !(dv <= 1)) {
                rc = usage_error("--simulate: p='%s' is not in (0, 1]", val);
                break;
            }
            p->p = dv;
        } else if (strcmp(key, "L") == 0) {
            if (parse_i64(val, 1, 1000000000, &iv)) {
                rc = usage_error("--simulate: L='%s' is not a positive integer", val);
                break;
            }
            p->L = iv;
        } else {
            rc = usage_error("--simulate: unknown key '%s' (expected n, k, delta, p, L)", key);
            break;
        }
    }
    free(copy);
    if (rc)
        return rc;
    if (p->k >= p->n) {
        fprintf(stderr, "burstc rank: error: --simulate: k=%ld must be smaller than n=%ld\n",
                (long)p->k, (long)p->n);
        return 1;
    }
    if (p->k > 1 && p->delta > 0.5) {
        fprintf(stderr, "burstc rank: error: --simulate: delta=%g must be at most 0.5 when k > 1\n",
                p->delta);
        return 1;
    }
    return 0;
}

static int run_simulate(cli *c)
{
    rank_sim_params p;
    memset(&p, 0, sizeof p);
    int rc = parse_spec(c->simulate, &p);
    if (rc)
        return rc;
    p.eps = c->eps;
    rank_sim_result res;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rank_simulate(&p, c->trials, c->seed, c->methods, &c->o, &res)) {
        fprintf(stderr, "burstc rank: error: out of memory\n");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (c->format == FMT_TEXT) {
        printf("# simulate n=%ld k=%ld delta=%g p=%g L=%lld: %lld trials, seed %llu, "
               "%.0f comparisons per trial on average, %.1f s\n",
               (long)p.n, (long)p.k, p.delta, p.p, (long long)p.L, (long long)res.trials,
               (unsigned long long)c->seed, res.samples, secs);
        if (res.skipped)
            printf("# %lld trials had a disconnected graph or an item without a win or a loss; "
                   "counted as failures with error 1\n",
                   (long long)res.skipped);
        printf("%-14s %-8s %-18s %-10s %s\n", "method", "success", "95% CI", "linf_error",
               "95% CI");
    } else if (c->format == FMT_CSV) {
        printf("method,n,k,delta,p,L,trials,samples,success,success_lo,success_hi,linf_error,"
               "linf_lo,linf_hi,skipped\n");
    } else {
        printf("{\n  \"n\": %ld, \"k\": %ld, \"delta\": %.17g, \"p\": %.17g, \"L\": %lld,\n"
               "  \"trials\": %lld, \"seed\": %llu, \"samples\": %.17g, \"skipped\": %lld,\n"
               "  \"methods\": [",
               (long)p.n, (long)p.k, p.delta, p.p, (long long)p.L, (long long)res.trials,
               (unsigned long long)c->seed, res.samples, (long long)res.skipped);
    }
    int first = 1;
    for (int m = 0; m < RANK_NMETHODS; m++) {
        if (!c->methods[m])
            continue;
        double lo, hi, mean, half;
        rank_wilson(res.success[m], res.trials, &lo, &hi);
        rank_mean_ci(res.err_sum[m], res.err_sq[m], res.trials, &mean, &half);
        double rate = (double)res.success[m] / (double)res.trials;
        double elo = half >= 0 ? mean - half : mean, ehi = half >= 0 ? mean + half : mean;
        if (c->format == FMT_TEXT) {
            char ci[64], eci[64];
            snprintf(ci, sizeof ci, "[%.4f, %.4f]", lo, hi);
            if (half >= 0)
                snprintf(eci, sizeof eci, "[%.5f, %.5f]", elo, ehi);
            else
                snprintf(eci, sizeof eci, "n/a (1 trial)");
            printf("%-14s %-8.4f %-18s %-10.5f %s\n", rank_method_names[m], rate, ci, mean, eci);
        } else if (c->format == FMT_CSV) {
            printf(
                "%s,%ld,%ld,%.17g,%.17g,%lld,%lld,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%lld\n",
                rank_method_names[m], (long)p.n, (long)p.k, p.delta, p.p, (long long)p.L,
                (long long)res.trials, res.samples, rate, lo, hi, mean, elo, ehi,
                (long long)res.skipped);
        } else {
            printf(
                "%s\n    {\"method\": \"%s\", \"success\": %.17g, \"success_ci\": [%.17g, %.17g], "
                "\"linf_error\": %.17g, \"linf_ci\": [%.17g, %.17g]}",
                first ? "" : ",", rank_method_names[m], rate, lo, hi, mean, elo, ehi);
        }
        first = 0;
    }
    if (c->format == FMT_JSON)
        printf("\n  ]\n}\n");
    return 0;
}

int cmd_rank(int argc, char **argv)
{
    cli c;
    int rc = parse_args(&c, argc, argv);
    if (rc == 2)
        return 0;
    if (rc)
        return rc;
    rc = c.simulate ? run_simulate(&c) : run_file(&c);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "burstc rank: error: writing output failed: %s\n", strerror(errno));
        return 1;
    }
    return rc;
}
