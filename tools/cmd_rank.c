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
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { FMT_TEXT, FMT_JSON, FMT_CSV };

typedef struct cli {
    const char *file;
    int64_t k; /* 0 = not given */
    int method;
    int all, format, largest, quiet, verbose, max_iter_given;
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
         "  --max-iter N          iteration limit (default 100000, fewer on graphs with\n"
         "                        over 10^5 entries: about a minute of work at most)\n"
         "  --rounds R            Spectral MLE refinement rounds (default ceil(log2 n))\n"
         "  --xi C                Spectral MLE threshold constant (default 0.1)\n"
         "  --threads N           threads (default 2)\n"
         "  --quiet               no convergence report, no warnings\n"
         "  --verbose             time and size of each phase, on standard error\n"
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
        } else if (strcmp(a, "--verbose") == 0) {
            c->verbose = 1;
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
            c->max_iter_given = 1;
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

/* ---- messages ---- */

/* Names and file names come from the user's data: in messages they are escaped, so a
 * name cannot drive the terminal, and cut short when very long. */
static void say(const char *fname, const char *kind)
{
    rank_put_escaped(stderr, fname, strlen(fname), 0);
    fprintf(stderr, ": %s: ", kind);
}

static void say_name(const rank_data *d, int32_t id)
{
    char buf[32];
    const char *s = rank_item_name(d, id, buf, sizeof buf);
    fputc('\'', stderr);
    rank_put_escaped(stderr, s, strlen(s), RANK_NAME_SHOWN);
    fputc('\'', stderr);
}

/* --verbose: where the time goes: wall and CPU time, and memory first touched (page
 * faults, which on a fresh process are a large part of the cost). */
typedef struct clock_pair {
    double wall, cpu;
    long faults;
} clock_pair;

static clock_pair clock_now(void)
{
    struct timespec w, c;
    clock_gettime(CLOCK_MONOTONIC, &w);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (clock_pair){(double)w.tv_sec + 1e-9 * (double)w.tv_nsec,
                        (double)c.tv_sec + 1e-9 * (double)c.tv_nsec, ru.ru_minflt + ru.ru_majflt};
}

/* Prints one phase: "burstc rank: PHASE  1.23 s (cpu 2.34 s, +120 MiB)  what it did". */
static void phase(const cli *c, clock_pair *since, const char *name, const char *fmt, ...)
{
    clock_pair now = clock_now();
    if (c->verbose) {
        double mib = (double)(now.faults - since->faults) * (double)sysconf(_SC_PAGESIZE) / 1048576;
        fprintf(stderr, "burstc rank: %-6s %6.2f s (cpu %6.2f s, +%4.0f MiB)  ", name,
                now.wall - since->wall, now.cpu - since->cpu, mib);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    *since = now;
}

/* ---- output ---- */

/* The shortest decimal that reads back as the same double: scores are rounded to a
 * decimal grid, so this prints 0.3680555556, not 0.36805555559999997. */
static void print_score(double v)
{
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, stdout);
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

/* Writes a convergence report in words, for the text header. */
static void describe_report(char *buf, size_t len, int method, const rank_report *r)
{
    int n;
    if (r->stalled)
        n = snprintf(buf, len, "NOT converged: stalled after %lld iterations (step %.2e",
                     (long long)r->iterations, r->step);
    else
        n = snprintf(buf, len, "%s after %lld iteration%s (step %.2e",
                     r->converged ? "converged" : "NOT converged", (long long)r->iterations,
                     r->iterations == 1 ? "" : "s", r->step);
    if (n < 0 || (size_t)n >= len)
        return;
    if (r->error_bound >= 0 && r->step > 0)
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
        for (int32_t r = 0; r < count; r++) {
            printf("%-6ld %-16.10g ", (long)r + 1, score[order[r]]);
            const char *name = rank_item_name(d, order[r], buf, sizeof buf);
            rank_put_escaped(stdout, name, strlen(name), 0);
            putchar('\n');
        }
    } else if (c->format == FMT_CSV) {
        printf("rank,item,score\n");
        for (int32_t r = 0; r < count; r++) {
            printf("%ld,", (long)r + 1);
            csv_field(stdout, rank_item_name(d, order[r], buf, sizeof buf));
            putchar(',');
            print_score(score[order[r]]);
            putchar('\n');
        }
    } else {
        printf("{\n  \"method\": \"%s\",\n  \"items\": %ld,\n  \"comparisons\": %.0f,\n", mname,
               (long)g->n, g->comparisons);
        printf("  \"convergence\": {\"iterations\": %lld, \"step\": %.6g, \"converged\": %s",
               (long long)rep->iterations, rep->step, rep->converged ? "true" : "false");
        if (rep->error_bound >= 0)
            printf(", \"error_bound\": %.6g", rep->error_bound);
        printf("},\n  \"ranking\": [");
        for (int32_t r = 0; r < count; r++) {
            printf("%s\n    {\"rank\": %ld, \"item\": ", r ? "," : "", (long)r + 1);
            const char *name = rank_item_name(d, order[r], buf, sizeof buf);
            rank_put_json(stdout, name, strlen(name));
            printf(", \"score\": ");
            print_score(score[order[r]]);
            putchar('}');
        }
        printf("\n  ]\n}\n");
    }
}

/* Names the components of a disconnected graph: sizes and a few members each. */
static void report_components(const rank_data *d, const char *fname, int32_t nc,
                              const int32_t *comp, const int64_t *sizes)
{
    say(fname, "error");
    fprintf(stderr, "the comparison graph is not connected: %ld components\n", (long)nc);
    int32_t shown = nc < 10 ? nc : 10;
    for (int32_t c = 0; c < shown; c++) {
        fprintf(stderr, "  component %ld: %lld item%s (", (long)c + 1, (long long)sizes[c],
                sizes[c] == 1 ? "" : "s");
        int listed = 0;
        for (int32_t i = 0; i < d->n && listed < 5; i++) {
            if (comp[i] != c)
                continue;
            if (listed)
                fputs(", ", stderr);
            say_name(d, i);
            listed++;
        }
        fprintf(stderr, "%s)\n", sizes[c] > 5 ? ", ..." : "");
    }
    if (nc > shown)
        fprintf(stderr, "  ... and %ld more components\n", (long)(nc - shown));
    say(fname, "note");
    fputs("items in different components cannot be compared; use --largest-component to rank "
          "within the largest\n",
          stderr);
}

/* Explains a graph that is connected but not strongly connected.  Returns 1 when
 * that stops the ranking: maximum likelihood needs strong connectivity, and the
 * spectral scores are not unique with several closed groups. */
static int report_strength(const cli *c, const rank_data *d, const rank_graph *g, const char *fname,
                           const rank_strength *st)
{
    int mle = c->method != RANK_SPECTRAL;
    if (!mle && st->groups > 1) {
        say(fname, "error");
        if (!st->groups_not_single)
            fprintf(stderr, "the ranking is not unique: %lld items never lose (e.g. ",
                    (long long)st->groups);
        else
            fprintf(stderr,
                    "the ranking is not unique: %lld groups of items never lose to an item "
                    "outside their group (e.g. ",
                    (long long)st->groups);
        for (int k = 0; k < RANK_GROUPS_SHOWN && k < st->groups; k++) {
            if (k)
                fputs(", ", stderr);
            say_name(d, st->group_first[k]);
            if (st->groups_not_single)
                fprintf(stderr, " in a group of %lld", (long long)st->group_size[k]);
        }
        fputs(")\n", stderr);
        say(fname, "note");
        fputs("nothing in the data says how these compare with each other; use --regularize EPS "
              "(e.g. 0.5) to add EPS pseudo-wins each way to every compared pair\n",
              stderr);
        return 1;
    }
    if (!mle && c->quiet)
        return 0;
    const char *kind = mle ? "error" : "warning";
    if (st->never_win) {
        say(fname, kind);
        fprintf(stderr, "%lld item%s never win%s (e.g. ", (long long)st->never_win,
                st->never_win == 1 ? "" : "s", st->never_win == 1 ? "s" : "");
        say_name(d, st->first_never_win);
        fputs(")\n", stderr);
    }
    if (st->never_lose) {
        say(fname, kind);
        fprintf(stderr, "%lld item%s never lose%s (e.g. ", (long long)st->never_lose,
                st->never_lose == 1 ? "" : "s", st->never_lose == 1 ? "s" : "");
        say_name(d, st->first_never_lose);
        fputs(")\n", stderr);
    }
    if (!st->never_win && !st->never_lose) {
        say(fname, kind);
        fputs("some group of items never beats the others\n", stderr);
    }
    say(fname, "note");
    if (mle) {
        fputs("maximum-likelihood scores do not exist for such data; use --regularize EPS (e.g. "
              "0.5) or --method spectral\n",
              stderr);
        return 1;
    }
    int64_t rest = (int64_t)g->n - st->in_groups;
    if (st->in_groups == 1) {
        say_name(d, st->group_first[0]);
        fprintf(stderr, " never loses, so it gets all the weight and the other %lld item%s 0",
                (long long)rest, rest == 1 ? " scores" : "s score");
    } else {
        fprintf(stderr,
                "only the %lld items of the one group that never loses to the others (e.g. ",
                (long long)st->in_groups);
        say_name(d, st->group_first[0]);
        fprintf(stderr, ") get a positive score; the other %lld item%s 0", (long long)rest,
                rest == 1 ? " scores" : "s score");
    }
    fputs("; use --regularize EPS (e.g. 0.5) to give every pair a prior\n", stderr);
    return 0;
}

/* Rounds scores to the solver's accuracy, on a decimal grid: the largest power of
 * ten not above 10 x tol x the largest score.  The iteration pins scores down only
 * that far, so digits beyond it are noise, and items equal to that accuracy should
 * tie (and be ordered by first appearance) rather than be ordered by rounding error;
 * a decimal grid makes the printed digits those of the exact scores.  A loose --tol
 * must not erase the output's resolution, hence the cap on tol. */
static void snap_scores(double *score, int32_t n, double tol)
{
    double max = 0;
    for (int32_t i = 0; i < n; i++)
        if (score[i] > max)
            max = score[i];
    double q = 10 * (tol < 1e-7 ? tol : 1e-7) * max;
    if (!(q > 0) || !(q >= 1e-300))
        return;
    /* k / 10^e rather than k x 10^-e: 10^e is exact, so the result is the double
     * nearest the decimal. */
    double e = -floor(log10(q)), scale = pow(10, e);
    if (!isfinite(scale))
        return;
    for (int32_t i = 0; i < n; i++)
        score[i] = nearbyint(score[i] * scale) / scale;
}

static int run_file(cli *c)
{
    clock_pair start = clock_now(), t = start;
    const char *fname = strcmp(c->file, "-") == 0 ? "<stdin>" : c->file;
    int fd = rank_open_input(c->file, RANK_FIFO_WAIT_MS, stderr);
    if (fd < 0)
        return 1;
    rank_data d, sub;
    rank_data_init(&d);
    rank_data_init(&sub);
    rank_graph g;
    memset(&g, 0, sizeof g);
    int32_t *comp = NULL, *order = NULL;
    int64_t *sizes = NULL;
    double *score = NULL;
    int status = 1;
    rank_read_opts ro;
    rank_read_opts_default(&ro, stderr);
    ro.quiet = c->quiet;
    ro.threads = c->o.threads;
    rank_read_stats rs;
    int64_t errors = rank_read_fd(fd, fname, &d, &ro, &rs);
    if (fd != 0)
        close(fd);
    phase(c, &t, "read", "%lld bytes, %lld lines: %ld items, %zu comparison lines",
          (long long)rs.bytes, (long long)rs.lines, (long)d.n, d.m);
    if (errors) {
        if (errors > 0) {
            rank_put_escaped(stderr, fname, strlen(fname), 0);
            fprintf(stderr, ": %lld error%s; nothing ranked\n", (long long)errors,
                    errors == 1 ? "" : "s");
        }
        goto done;
    }
    if (d.m == 0) {
        say(fname, "error");
        fputs("no comparisons\n", stderr);
        goto done;
    }
    if (rank_graph_build(&g, &d, c->eps, c->o.threads))
        goto oom;
    phase(c, &t, "graph", "%lld entries (%lld pairs), d_max %ld", (long long)g.nnz,
          (long long)g.nnz / 2, (long)g.max_degree);
    rank_strength st;
    if (rank_check_strength(&g, c->o.threads, &st))
        goto oom;
    rank_data *use = &d;
    int32_t nc = 1;
    if (!st.strongly_connected) {
        /* Only then can the graph be disconnected. */
        comp = malloc((size_t)d.n * sizeof *comp);
        if (!comp)
            goto oom;
        nc = rank_components(&g, comp, &sizes);
        if (nc < 0)
            goto oom;
    }
    if (nc > 1) {
        if (!c->largest) {
            report_components(&d, fname, nc, comp, sizes);
            goto done;
        }
        if (!c->quiet) {
            say(fname, "warning");
            fprintf(stderr,
                    "the comparison graph has %ld components; ranking the largest (%lld of %ld "
                    "items)\n",
                    (long)nc, (long long)sizes[0], (long)d.n);
        }
        if (rank_data_restrict(&d, comp, 0, &sub, NULL))
            goto oom;
        rank_graph_free(&g);
        if (rank_graph_build(&g, &sub, c->eps, c->o.threads) ||
            rank_check_strength(&g, c->o.threads, &st))
            goto oom;
        use = &sub;
    }
    phase(c, &t, "check", "%ld component%s, %s", (long)nc, nc == 1 ? "" : "s",
          st.strongly_connected ? "strongly connected"
          : st.groups > 1       ? "several closed groups"
                                : "one closed group");
    if (!st.strongly_connected && report_strength(c, use, &g, fname, &st))
        goto done;
    int32_t n = g.n;
    if (!c->all && c->k > n) {
        say(fname, "error");
        fprintf(stderr, "-k %lld is larger than the number of items (%ld)\n", (long long)c->k,
                (long)n);
        goto done;
    }
    score = malloc((size_t)n * sizeof *score);
    order = malloc((size_t)n * sizeof *order);
    if (!score || !order)
        goto oom;
    rank_report rep;
    c->o.strength = &st;
    if (!c->max_iter_given)
        c->o.max_iter = rank_default_max_iter(&g);
    int rc = rank_run_method(c->method, &g, &c->o, score, &rep);
    if (rc == RANK_NOT_UNIQUE)
        ice("rank_spectral: several closed groups after the check found at most one");
    if (rc)
        goto oom;
    phase(c, &t, "solve", "%s, %lld iterations on %d thread%s", rank_method_names[c->method],
          (long long)rep.iterations, c->o.threads, c->o.threads == 1 ? "" : "s");
    snap_scores(score, n, c->o.tol);
    int32_t count = c->all ? n : (int32_t)c->k;
    /* One more than printed, to see a tie at the boundary. */
    if (rank_top(score, n, count < n ? count + 1 : n, order))
        goto oom;
    phase(c, &t, "order", "top %ld of %ld", (long)count, (long)n);
    if (!rep.converged && !c->quiet) {
        say(fname, "warning");
        if (rep.stalled)
            fprintf(stderr,
                    "%s stopped at step %.2e, the limit of double precision, above tol %.2e; "
                    "raise --tol\n",
                    rank_method_names[c->method], rep.step, c->o.tol);
        else
            fprintf(stderr,
                    "%s did not converge in %lld iterations (step %.2e, tol %.2e); raise "
                    "--max-iter or --tol\n",
                    rank_method_names[c->method], (long long)rep.iterations, rep.step, c->o.tol);
    }
    if (!c->all && !c->quiet && rank_boundary_tie(score, order, n, count)) {
        say(fname, "warning");
        say_name(use, order[count - 1]);
        fputs(" and ", stderr);
        say_name(use, order[count]);
        fprintf(stderr, " tie at rank %ld (score %.10g); the top %ld is not unique\n", (long)count,
                score[order[count]], (long)count);
    }
    print_ranking(c, use, &g, score, order, count, &rep);
    phase(c, &t, "print", "%ld line%s", (long)count, count == 1 ? "" : "s");
    if (c->verbose) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        clock_pair end = clock_now();
        fprintf(stderr, "burstc rank: total  %6.2f s (cpu %6.2f s)  peak memory %.0f MiB\n",
                end.wall - start.wall, end.cpu - start.cpu, (double)ru.ru_maxrss / 1024);
    }
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
