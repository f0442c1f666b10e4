/* rank.h: the one internal header of the ranking engine (rank/).
 *
 * burstc ranks items from noisy pairwise comparisons under the Bradley-Terry-Luce
 * model: item i beats item j with probability w_i / (w_i + w_j).  The pipeline is
 *   comparisons (file or generator) -> rank_data -> rank_graph (CSR) -> scores -> top K.
 * Methods: Rank Centrality (the spectral method), Spectral MLE (spectral start plus
 * coordinate-wise MLE refinement) and plain maximum likelihood (Hunter's MM).
 * Scores are always BTL weights normalised to sum to 1.
 *
 * Sections below list what each file exports. */
#ifndef BURSTC_RANK_H
#define BURSTC_RANK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- data.c: comparison records and the name table ---- */

/* One record: item a beat item b a_wins times and lost to it b_wins times.  A file
 * line gives (winner, loser, count, 0); the generator gives both counts of a pair. */
typedef struct rank_data {
    int32_t n;    /* number of items, ids 0..n-1 */
    char **names; /* names[id], or NULL when items are anonymous (generated); the
                     strings live in the table's text blocks */
    size_t names_cap;
    size_t m, cap; /* records */
    int32_t *a, *b;
    int64_t *a_wins;
    int64_t *b_wins; /* NULL while every b_wins is 0 (always, for a file) */
    /* name -> id hash table (open addressing, power-of-two size, keyed by seed) */
    struct rank_name_slot *slots;
    size_t nslots; /* 2^slot_bits */
    int slot_bits;
    uint64_t seed;
    struct rank_text_block *text;
} rank_data;

void rank_data_init(rank_data *d);
void rank_data_free(rank_data *d);
/* Returns the id of NAME (len bytes, no NUL inside), adding it when new; -1 when out
 * of memory or when there are more than INT32_MAX - 1 items. */
int32_t rank_data_intern(rank_data *d, const char *name, size_t len);
/* rank_data_intern for COUNT names at once (ids[i] for name[i]), in order, so new
 * names get ids by first appearance; faster than one at a time on large tables.
 * Returns 0, or -1 when out of memory. */
int rank_data_intern_many(rank_data *d, const char *const *name, const size_t *len, int32_t *ids,
                          size_t count);
/* Makes room for EXTRA more records; returns 0, or -1 when out of memory. */
int rank_data_reserve(rank_data *d, size_t extra);
/* Appends a record; returns 0, or -1 when out of memory. */
int rank_data_add(rank_data *d, int32_t a, int32_t b, int64_t a_wins, int64_t b_wins);
/* b_wins of record R. */
static inline int64_t rank_data_b_wins(const rank_data *d, size_t r)
{
    return d->b_wins ? d->b_wins[r] : 0;
}
/* Name of an item: its string, or "item<ID>" written into buf for anonymous data. */
const char *rank_item_name(const rank_data *d, int32_t id, char *buf, size_t len);

/* ---- parse.c: the comparison file format ---- */

/* The longest line read; a longer one (what a binary file or /dev/zero looks like)
 * is an error that stops reading. */
#define RANK_MAX_LINE (1 << 20)

typedef struct rank_read_opts {
    FILE *err;          /* where diagnostics go */
    int quiet;          /* no warnings (errors are still reported) */
    int64_t show;       /* errors, and warnings, shown; the rest are counted in a note */
    int64_t max_errors; /* stop reading after this many errors (0: never) */
    int threads;        /* a large regular file is read in this many parts at once */
} rank_read_opts;
/* 20 shown, stop after 1000 errors, one thread. */
void rank_read_opts_default(rank_read_opts *o, FILE *err);

typedef struct rank_read_stats {
    int64_t bytes, lines, errors, warnings;
} rank_read_stats;

/* Opens PATH for rank_read_fd ("-" is standard input, descriptor 0), refusing a
 * directory; anything else is read as a stream.  Opening never blocks: a FIFO gets
 * FIFO_WAIT_MS for a writer to send data (or close), then is an error.  Returns the
 * descriptor, or -1 after printing "burstc rank: error: ..." to ERR. */
#define RANK_FIFO_WAIT_MS 10000
int rank_open_input(const char *path, int fifo_wait_ms, FILE *err);
/* Reads lines "winner,loser[,count]" from FD (named FNAME in messages) until end of
 * file.  Blank lines and lines starting with '#' are skipped; spaces around fields are
 * trimmed; a UTF-8 byte-order mark at the start is skipped.  Malformed lines are
 * errors ("FNAME:LINE: error: ..."), self-comparisons warnings (the line is skipped).
 * Returns the number of errors (0 on success); -1 on a read or memory failure, after
 * printing a message.  ST (optional) gets what was read. */
int64_t rank_read_fd(int fd, const char *fname, rank_data *d, const rank_read_opts *o,
                     rank_read_stats *st);
/* The same from a stdio stream, with the default options. */
int64_t rank_parse(FILE *f, const char *fname, rank_data *d, FILE *err);

/* ---- text.c: names in messages, text and JSON ---- */

/* Bytes of a name shown in a message before it is cut short with "...". */
#define RANK_NAME_SHOWN 200

/* Length of the valid UTF-8 sequence at S (1 to 4), or 0 when it is not one. */
size_t rank_utf8_len(const char *s, size_t len);
/* Writes S for a terminal: control characters (C0, DEL, C1) and bytes that are not
 * UTF-8 as \xHH; at most MAX bytes of S then "..." (0: no limit). */
void rank_put_escaped(FILE *f, const char *s, size_t len, size_t max);
/* Writes S as a JSON string; bytes that are not UTF-8 become U+FFFD. */
void rank_put_json(FILE *f, const char *s, size_t len);

/* ---- graph.c: the comparison graph in CSR form ---- */

/* Symmetric CSR: for every compared pair {i,j} row i holds j and row j holds i.
 * wins[e] is how often the row item beat the column item (plus the regularisation),
 * games[e] how often they met (plus twice the regularisation). */
typedef struct rank_graph {
    int32_t n;
    int64_t nnz;  /* directed entries = 2 x compared pairs */
    int64_t *row; /* n + 1 offsets */
    int32_t *col;
    double *wins, *games;
    int32_t max_degree; /* largest number of distinct opponents: d_max */
    double comparisons; /* total observed comparisons, regularisation excluded */
} rank_graph;

/* Aggregates records into G on up to THREADS threads (the result does not depend on
 * it); EPS >= 0 pseudo-wins are added in each direction of every compared pair.
 * Returns 0, or -1 when out of memory. */
int rank_graph_build(rank_graph *g, const rank_data *d, double eps, int threads);
void rank_graph_free(rank_graph *g);

/* Connected components of the undirected comparison graph: comp[i] gets a component
 * number, numbered by decreasing size (0 = largest; ties by smallest member).
 * sizes (optional) gets a malloc'ed array of sizes.  Returns the number of components,
 * or -1 when out of memory. */
int32_t rank_components(const rank_graph *g, int32_t *comp, int64_t **sizes);

/* Restricts D to the items with comp[id] == which; old_id (optional) gets a malloc'ed
 * map from new ids to old ids.  Returns 0, or -1 when out of memory. */
int rank_data_restrict(const rank_data *d, const int32_t *comp, int32_t which, rank_data *out,
                       int32_t **old_id);

/* Strongly connected components of the win graph, which has an edge from j to i
 * when j lost to i (the moves of the Rank Centrality chain).  cls[i] gets the
 * component of item i; closed (optional) gets a malloc'ed flag per component: 1 when
 * no member ever lost to an item outside it.  Returns the number of components, or -1
 * when out of memory.  Iterative, O(n + entries). */
int32_t rank_win_components(const rank_graph *g, int32_t *cls, char **closed);

/* How far a graph is from strongly connected in the "who beat whom" sense.  A closed
 * group is a component of the win graph whose members never lost to anyone outside
 * it; the spectral scores are positive exactly on the closed groups, and unique
 * exactly when there is one (a strongly connected graph is one closed group). */
#define RANK_GROUPS_SHOWN 3
typedef struct rank_strength {
    int strongly_connected;
    int64_t never_win, never_lose;             /* items with no win / no loss */
    int32_t first_never_win, first_never_lose; /* an example of each, or -1 */
    int64_t groups;                            /* closed groups */
    int64_t in_groups;                         /* items in closed groups */
    int groups_not_single;                     /* some closed group has 2+ items */
    int32_t group_first[RANK_GROUPS_SHOWN];    /* first member of the first groups, or -1 */
    int64_t group_size[RANK_GROUPS_SHOWN];     /* (groups ordered by first member) */
} rank_strength;
/* On up to THREADS threads.  Returns 0, or -1 when out of memory. */
int rank_check_strength(const rank_graph *g, int threads, rank_strength *s);

/* ---- par.c: phases on a few threads ---- */

/* Runs fn(arg, p) for every part p in 0..parts-1 on up to THREADS threads (the
 * caller's among them), and returns when all are done. */
void rank_parallel(int parts, int threads, void (*fn)(void *arg, int part), void *arg);

/* ---- spectral.c: Rank Centrality ---- */

typedef struct rank_opts {
    double tol; /* converged when both the last step and the estimated remaining error
                   are at most tol * max_i pi_i */
    int64_t max_iter;
    int threads; /* row-parallel threads, >= 1 */
    int rounds;  /* Spectral MLE refinement rounds; 0 = ceil(log2 n) */
    double xi;   /* Spectral MLE replacement threshold scale c (see mle.c) */
    /* Optional: rank_check_strength's result for the graph being ranked, which saves
     * rank_spectral from finding the closed groups again. */
    const struct rank_strength *strength;
} rank_opts;

/* The default iteration limit, and the work (iterations x (entries + items)) that a
 * default run may spend on a large graph: about a minute of CPU.  A hostile input
 * (a path of 10^6 items mixes in ~10^12 iterations) must not run for hours. */
#define RANK_MAX_ITER    100000
#define RANK_WORK_BUDGET 1e10
/* min(RANK_MAX_ITER, RANK_WORK_BUDGET / (entries + items)), at least 100. */
int64_t rank_default_max_iter(const rank_graph *g);

/* The constant in front of Spectral MLE's thresholds; the paper leaves it open. */
#define RANK_DEFAULT_XI 0.1
void rank_opts_default(rank_opts *o);

typedef struct rank_report {
    int64_t iterations;
    double step;        /* last max_i |pi'_i - pi_i| / max_i pi_i */
    double rate;        /* observed contraction of the step per iteration */
    double error_bound; /* step * rate / (1 - rate): estimated remaining error; -1 when
                           it cannot be estimated (one step, or no contraction) */
    int converged;      /* step and error_bound <= tol */
    int stalled;        /* stopped because the step no longer shrank, at the limit of double
                    precision, before reaching tol */
} rank_report;

/* Steps kept to estimate the contraction rate (the rate spans RANK_HISTORY - 1). */
#define RANK_HISTORY 11
/* The convergence rule every iterative method shares: records STEP (relative to the
 * largest score) in R and HISTORY (RANK_HISTORY values, zeroed at the start) and
 * returns 1 when the iteration should stop: converged, or stalled. */
int rank_track_step(rank_report *r, double *history, double step, double tol);

/* rank_spectral's result when the win graph has several closed groups (items or
 * groups that never lose to the rest): the stationary distribution is not unique. */
#define RANK_NOT_UNIQUE (-2)

/* Stationary distribution of the Rank Centrality chain: from j to i with probability
 * (wins_ij / games_ij) / d_max, the rest a self-loop.  score gets n values summing to 1,
 * zero outside the closed group.  Returns 0, RANK_NOT_UNIQUE, or -1 when out of memory
 * or threads cannot start. */
int rank_spectral(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep);

/* ---- mle.c: maximum likelihood ---- */

/* Spectral MLE: rank_spectral, then o->rounds rounds of thresholded coordinate-wise
 * MLE replacement (Chen & Suh 2015).  Needs every item to have a win and a loss. */
int rank_spectral_mle(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep);
/* Maximum likelihood by Hunter's MM algorithm.  Needs a strongly connected graph. */
int rank_mle(const rank_graph *g, const rank_opts *o, double *score, rank_report *rep);

/* ---- topk.c: top K, ties and metrics ---- */

/* order gets all n ids by decreasing score, ties by increasing id. Returns 0 or -1. */
int rank_order(const double *score, int32_t n, int32_t *order);
/* The first COUNT entries of rank_order's order (all n when COUNT >= n), without
 * sorting everything when COUNT is small.  Returns 0 or -1. */
int rank_top(const double *score, int32_t n, int32_t count, int32_t *order);
/* 1 when the K-th and (K+1)-th largest scores are equal up to a relative 1e-12. */
int rank_boundary_tie(const double *score, const int32_t *order, int32_t n, int32_t k);
/* Exact top-K recovery: 1 when the estimated top K equals the true top K and neither
 * side has a tie at the boundary; 0 otherwise; -1 when out of memory. */
int rank_topk_success(const double *est, const double *truth, int32_t n, int32_t k);
/* l-infinity error of the normalised scores: both scaled to sum 1, then
 * max_i |est_i - truth_i| / max_i truth_i. */
double rank_linf_error(const double *est, const double *truth, int32_t n);

/* ---- btl.c: random numbers and the BTL data generator ---- */

typedef struct rank_rng {
    uint64_t s[4];
} rank_rng;
void rank_rng_seed(rank_rng *r, uint64_t seed);
uint64_t rank_rng_next(rank_rng *r);
double rank_rng_uniform(rank_rng *r); /* in [0, 1) */

/* Scores with top-K separation Delta_K = (w_K - w_{K+1}) / w_max exactly: w_max = 1,
 * w_K = 0.5 + delta, w_{K+1} = 0.5, the other top items uniform in [0.5 + delta, 1],
 * the other bottom items uniform in [0.25, 0.5]; then shuffled over the ids.  With
 * K = 1: w_K = 1, w_{K+1} = 1 - delta, the others uniform in [w_{K+1}/2, w_{K+1}].
 * Needs 1 <= k < n and 0 < delta <= 0.5 (delta < 1 when k = 1). */
void rank_btl_scores(int32_t n, int32_t k, double delta, rank_rng *r, double *w);
/* Erdos-Renyi comparison graph G(n, p), L comparisons per compared pair, outcomes
 * drawn from BTL(w).  Appends one record per compared pair to D (anonymous items).
 * Returns 0, or -1 when out of memory. */
int rank_btl_generate(const double *w, int32_t n, double p, int64_t L, rank_rng *r, rank_data *d);

/* ---- simulate.c: Monte Carlo trials ---- */

enum { RANK_SPECTRAL, RANK_SPECTRAL_MLE, RANK_MLE, RANK_NMETHODS };
extern const char *const rank_method_names[RANK_NMETHODS];
/* Returns the method for NAME, or -1. */
int rank_method_parse(const char *name);
/* Runs METHOD on G. */
int rank_run_method(int method, const rank_graph *g, const rank_opts *o, double *score,
                    rank_report *rep);

typedef struct rank_sim_params {
    int32_t n, k;
    double delta, p;
    int64_t L;
    double eps; /* regularisation used by every method */
} rank_sim_params;

typedef struct rank_sim_result {
    int64_t trials;
    int64_t success[RANK_NMETHODS];                       /* exact top-K recoveries */
    double err_sum[RANK_NMETHODS], err_sq[RANK_NMETHODS]; /* l-inf error moments */
    int64_t skipped; /* trials whose graph was disconnected or had an item without
                          a win or a loss; they count as failures, error 1 */
    double samples;  /* mean number of comparisons per trial */
} rank_sim_result;

/* Runs TRIALS independent trials (trial t uses seed mix(seed, t), so the result does
 * not depend on the thread count), spread over o->threads threads.  methods[m] != 0
 * selects a method.  Returns 0, or -1 when out of memory. */
int rank_simulate(const rank_sim_params *p, int64_t trials, uint64_t seed, const int *methods,
                  const rank_opts *o, rank_sim_result *res);

/* 95% intervals: Wilson score interval for a success rate, normal interval for a mean. */
void rank_wilson(int64_t successes, int64_t trials, double *lo, double *hi);
void rank_mean_ci(double sum, double sumsq, int64_t count, double *mean, double *half);

#endif
