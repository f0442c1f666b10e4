/*
 * compile_time.c: how long the front half of burstc takes per model.
 *
 * For each model: parse, check, expand, lower, verify and print its IR (what
 * `burstc FILE` does), ten times, and report the median. The baseline in the
 * same run is reading the printed IR back (`burstc FILE.ir`), the cheapest
 * way to get the same module. The target: GPT-2 XL (48 blocks) under 50 ms.
 *
 *   build/release/tests/bench_compile_time [MODEL.burst ...]
 */
#include "frontend.h"
#include "ir.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RUNS 10

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int bench(const char *path)
{
    double t_src[RUNS], t_ir[RUNS];
    int nops = 0;
    size_t len = 0;
    char *text = NULL;
    for (int r = 0; r < RUNS; r++) {
        arena *a = arena_new();
        diag_ctx d;
        diag_init(&d, stderr);
        double t0 = now();
        ir_module *m = fe_compile(a, path, &d);
        if (!m || d.nerrors || !ir_verify(m, &d)) {
            fprintf(stderr, "%s: does not compile\n", path);
            arena_free(a);
            return 1;
        }
        free(text);
        text = ir_print_module_to_string(m, &len);
        t_src[r] = now() - t0;
        nops = 0;
        for (int g = 0; g < m->ngraphs; g++)
            nops += m->graphs[g]->nops;
        arena_free(a);
    }
    for (int r = 0; r < RUNS; r++) {
        arena *a = arena_new();
        diag_ctx d;
        diag_init(&d, stderr);
        double t0 = now();
        src_file *f = src_file_from_string(a, "bench.ir", text, len);
        ir_module *m = ir_read(a, f, &d);
        size_t l2;
        char *again = ir_print_module_to_string(m, &l2);
        t_ir[r] = now() - t0;
        if (d.nerrors || l2 != len || memcmp(again, text, len) != 0) {
            fprintf(stderr, "%s: the IR does not read back identically\n", path);
            free(again);
            arena_free(a);
            free(text);
            return 1;
        }
        free(again);
        arena_free(a);
    }
    double ms_src = 1e3 * median(t_src, RUNS), ms_ir = 1e3 * median(t_ir, RUNS);
    const char *base = strrchr(path, '/');
    printf("%-28s %7d %12.2f %12.2f %8.2fx %10.0f\n", base ? base + 1 : path, nops, ms_src, ms_ir,
           ms_src / ms_ir, nops / ms_src);
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    static const char *defaults[] = {
        "examples/models/fmnist_cnn.burst",       "examples/models/vgg16.burst",
        "examples/models/resnet50.burst",         "examples/models/inception_v3.burst",
        "examples/models/wide_resnet101_2.burst", "examples/models/gpt2.burst",
        "examples/models/gpt2_xl.burst"};
    printf(
        "front end (parse, check, lower, verify, print) vs IR reader (read, print): median of %d runs\n",
        RUNS);
    printf("%-28s %7s %12s %12s %9s %10s\n", "model", "ops", "source ms", "IR ms", "ratio",
           "ops/ms");
    int bad = 0;
    if (argc > 1)
        for (int i = 1; i < argc; i++)
            bad |= bench(argv[i]);
    else
        for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
            bad |= bench(defaults[i]);
    return bad;
}
