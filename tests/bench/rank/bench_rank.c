/* bench_rank.c: timing and memory of `burstc rank`'s engine at scale (not a test).
 *
 *   bench_rank gen FILE N PAIRS L SEED   write a BTL comparison file: an Erdos-Renyi
 *                                        graph with about PAIRS pairs, L games each,
 *                                        one line "winner,loser,count" per direction
 *   bench_rank run FILE K [RUNS [EPS [THREADS]]]
 *                                        read FILE, build the graph (EPS pseudo-wins
 *                                        each way per pair, default 0) and check it on
 *                                        THREADS threads (default 2), then rank it with
 *                                        the spectral method on 1 and 2 threads
 *
 * `run` prints a table: median and min of RUNS spectral solves per thread count, the
 * ratio against the 1-thread median, and the read, build and check times once.  Peak memory
 * is the process's maximum resident set size (getrusage), so run `gen` and `run` as
 * separate processes: the number then covers parse + graph + solve only. */
#include "rank.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU time of this process: on a shared machine it shows what the serial phases cost
 * when wall time is inflated by other jobs. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double peak_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int gen(const char *file, int32_t n, double pairs, int64_t L, uint64_t seed)
{
    rank_rng r;
    rank_rng_seed(&r, seed);
    double *w = malloc((size_t)n * sizeof *w);
    if (!w)
        return 1;
    int32_t k = n > 1000 ? 100 : n / 10;
    rank_btl_scores(n, k, 0.1, &r, w);
    double p = pairs / ((double)n * (n - 1) / 2);
    rank_data d;
    rank_data_init(&d);
    double t0 = now();
    if (rank_btl_generate(w, n, p > 1 ? 1 : p, L, &r, &d)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    double t1 = now();
    FILE *f = fopen(file, "w");
    if (!f) {
        perror(file);
        return 1;
    }
    int64_t comparisons = 0;
    for (size_t i = 0; i < d.m; i++) {
        if (d.a_wins[i])
            fprintf(f, "i%ld,i%ld,%lld\n", (long)d.a[i], (long)d.b[i], (long long)d.a_wins[i]);
        if (rank_data_b_wins(&d, i))
            fprintf(f, "i%ld,i%ld,%lld\n", (long)d.b[i], (long)d.a[i],
                    (long long)rank_data_b_wins(&d, i));
        comparisons += d.a_wins[i] + rank_data_b_wins(&d, i);
    }
    if (fclose(f)) {
        perror(file);
        return 1;
    }
    /* The true scores, for checking a ranking against the truth afterwards. */
    char truth[4096];
    snprintf(truth, sizeof truth, "%s.truth", file);
    f = fopen(truth, "w");
    if (f) {
        for (int32_t i = 0; i < n; i++)
            fprintf(f, "i%ld,%.17g\n", (long)i, w[i]);
        fclose(f);
    }
    printf("generated n=%ld pairs=%zu comparisons=%lld (p=%.3g, L=%lld) in %.2f s\n", (long)n, d.m,
           (long long)comparisons, p, (long long)L, t1 - t0);
    rank_data_free(&d);
    free(w);
    return 0;
}

static int run(const char *file, int32_t k, int runs, double eps, int threads)
{
    int fd = rank_open_input(file, RANK_FIFO_WAIT_MS, stderr);
    if (fd < 0)
        return 1;
    rank_data d;
    rank_data_init(&d);
    rank_read_opts ro;
    rank_read_opts_default(&ro, stderr);
    ro.threads = threads;
    double t0 = now(), c0 = cpu_now();
    int64_t errors = rank_read_fd(fd, file, &d, &ro, NULL);
    close(fd);
    double t1 = now(), c1 = cpu_now();
    if (errors)
        return 1;
    rank_graph g;
    if (rank_graph_build(&g, &d, eps, threads))
        return 1;
    double t2 = now(), c2 = cpu_now();
    int32_t *comp = malloc((size_t)g.n * sizeof *comp);
    int32_t nc = comp ? rank_components(&g, comp, NULL) : -1;
    rank_strength st;
    rank_check_strength(&g, threads, &st);
    double t3 = now(), c3 = cpu_now();
    printf(
        "file %s (eps %g): %ld items, %.0f comparisons, %lld CSR entries, d_max %ld, %ld component(s), "
        "%s\n",
        file, eps, (long)g.n, g.comparisons, (long long)g.nnz, (long)g.max_degree, (long)nc,
        st.strongly_connected ? "strongly connected" : "NOT strongly connected");
    printf("%d thread%s: wall: read %.2f s   build CSR %.2f s   checks %.2f s\n", threads,
           threads == 1 ? "" : "s", t1 - t0, t2 - t1, t3 - t2);
    printf("cpu:  read %.2f s   build CSR %.2f s   checks %.2f s\n", c1 - c0, c2 - c1, c3 - c2);
    double *score = malloc((size_t)g.n * sizeof *score);
    int32_t *order = malloc((size_t)g.n * sizeof *order);
    double *times = malloc((size_t)runs * sizeof *times);
    if (!score || !order || !times)
        return 1;
    printf("%-8s %-10s %-10s %-10s %-10s %-10s %s\n", "threads", "median_s", "min_s", "vs_1thr",
           "iters", "top-K_s", "cpu_s/run");
    double base = 0;
    for (int threads = 1; threads <= 2; threads++) {
        rank_opts o;
        rank_opts_default(&o);
        o.threads = threads;
        rank_report rep;
        double tk = 0, cpu = 0;
        for (int r = 0; r < runs; r++) {
            double a = now(), ca = cpu_now();
            o.strength = &st;
            if (rank_spectral(&g, &o, score, &rep) != 0) {
                fprintf(stderr, "%s: the spectral scores are not unique (use EPS > 0)\n", file);
                return 1;
            }
            double b = now();
            rank_top(score, g.n, k + 1 < g.n ? k + 1 : g.n, order);
            tk = now() - b;
            times[r] = b - a + tk;
            cpu += cpu_now() - ca;
        }
        qsort(times, (size_t)runs, sizeof *times, cmp_double);
        double med = times[runs / 2];
        if (threads == 1)
            base = med;
        printf("%-8d %-10.3f %-10.3f %-10.2f %-10lld %-10.3f %.3f\n", threads, med, times[0],
               base / med, (long long)rep.iterations, tk, cpu / runs);
        if (threads == 2) {
            printf("convergence: %s, step %.2e, rate %.4f, estimated error %.2e\n",
                   rep.converged ? "converged" : "NOT converged", rep.step, rep.rate,
                   rep.error_bound);
            char buf[32];
            printf("top %ld:", (long)k);
            for (int32_t i = 0; i < k && i < 5; i++)
                printf(" %s", rank_item_name(&d, order[i], buf, sizeof buf));
            printf("%s\n", k > 5 ? " ..." : "");
        }
    }
    printf("peak RSS %.0f MiB\n", peak_mib());
    free(score);
    free(order);
    free(times);
    free(comp);
    rank_graph_free(&g);
    rank_data_free(&d);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 7 && strcmp(argv[1], "gen") == 0)
        return gen(argv[2], (int32_t)atol(argv[3]), atof(argv[4]), atoll(argv[5]),
                   (uint64_t)atoll(argv[6]));
    if (argc >= 4 && strcmp(argv[1], "run") == 0)
        return run(argv[2], (int32_t)atol(argv[3]), argc >= 5 ? atoi(argv[4]) : 3,
                   argc >= 6 ? atof(argv[5]) : 0, argc >= 7 ? atoi(argv[6]) : 2);
    fprintf(
        stderr,
        "usage: bench_rank gen FILE N PAIRS L SEED | bench_rank run FILE K [RUNS [EPS [THREADS]]]\n");
    return 2;
}
