/*
 * compile_time.c: how long the front half of burstc takes per model.
 *
 * For each model: parse, check, expand, lower, verify and print its IR (what
 * `burstc FILE` does), ten times, and report the median. The baseline in the
 * same run is reading the printed IR back (`burstc FILE.ir`), the cheapest
 * way to get the same module. The target: GPT-2 XL (48 blocks) under 50 ms.
 *
 * With --scale, the same for generated inputs at the limits of the language
 * (a 100,000-op chain and loop, 100,000 top-level lets, models and jobs),
 * each at 1/8, 1/4, 1/2 and all of its size: time per item should stay flat
 * (linear time), and the largest legal input should take seconds at most.
 *
 *   build/release/tests/bench_compile_time [MODEL.burst ...]
 *   build/release/tests/bench_compile_time --scale [MAX]   (sizes up to MAX, default 100000)
 */
#include "frontend.h"
#include "ir.h"

#include <stdarg.h>
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

/* Times source -> IR text and IR text -> IR text for the file at path (or,
 * when source is not NULL, for that text), runs times each; the medians go
 * to *ms_src and *ms_ir. Returns the ops of the module, or -1 on errors. */
static int measure(const char *path, const char *source, int runs, double *ms_src, double *ms_ir)
{
    double t_src[RUNS], t_ir[RUNS];
    int nops = 0;
    size_t len = 0;
    char *text = NULL;
    for (int r = 0; r < runs; r++) {
        arena *a = arena_new();
        diag_ctx d;
        diag_init(&d, stderr);
        double t0 = now();
        ir_module *m = source ? fe_compile_string(a, path, source, &d) : fe_compile(a, path, &d);
        if (!m || d.nerrors || !ir_verify(m, &d)) {
            fprintf(stderr, "%s: does not compile\n", path);
            arena_free(a);
            return -1;
        }
        free(text);
        text = ir_print_module_to_string(m, &len);
        t_src[r] = now() - t0;
        nops = 0;
        for (int g = 0; g < m->ngraphs; g++)
            nops += m->graphs[g]->nops;
        arena_free(a);
    }
    for (int r = 0; r < runs; r++) {
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
            return -1;
        }
        free(again);
        arena_free(a);
    }
    *ms_src = 1e3 * median(t_src, runs);
    *ms_ir = 1e3 * median(t_ir, runs);
    free(text);
    return nops;
}

static int bench(const char *path)
{
    double ms_src, ms_ir;
    int nops = measure(path, NULL, RUNS, &ms_src, &ms_ir);
    if (nops < 0)
        return 1;
    const char *base = strrchr(path, '/');
    printf("%-28s %7d %12.2f %12.2f %8.2fx %10.0f\n", base ? base + 1 : path, nops, ms_src, ms_ir,
           ms_src / ms_ir, nops / ms_src);
    return 0;
}

/* A growing string for the generated inputs. */
typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    while (t->len + (size_t)n + 1 > t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1 << 16;
        t->s = realloc(t->s, t->cap);
        if (!t->s)
            abort();
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

#define HW                                                                 \
    "gpu g { flops f32 = 1 TFLOPS, memory = 1 GiB, bandwidth = 1 GB/s }\n" \
    "cluster c { gpu = g, gpus_per_node = 1 }\n"

/* The source of one generated input of n items. */
static void generate(text *t, const char *kind, int n)
{
    t->len = 0;
    if (strcmp(kind, "chain") == 0) {
        put(t, "model m {\n  input x: f32[batch, 4]\n  h0 = relu(x)\n");
        for (int i = 1; i < n - 1; i++) /* x and h0 .. h(n-2): n ops */
            put(t, "  h%d = relu(h%d)\n", i, i - 1);
        put(t, "}\n");
    } else if (strcmp(kind, "loop") == 0) {
        put(t, "model m {\n  input x: f32[batch, 4]\n  h = relu(x)\n");
        put(t, "  for i in 0..%d {\n    h = relu(h)\n  }\n}\n", n - 2);
    } else if (strcmp(kind, "lets") == 0) {
        for (int i = 0; i < n; i++)
            put(t, "let a%d = %d\n", i, i);
        put(t, "model m {\n  input x: f32[batch, a%d]\n}\n", n - 1);
    } else if (strcmp(kind, "models") == 0) {
        for (int i = 0; i < n; i++)
            put(t, "model m%d {\n  input x: f32[batch, 4]\n}\n", i);
    } else {
        put(t, HW);
        for (int i = 0; i < n; i++)
            put(t,
                "model m%d {\n  input x: f32[batch, 4]\n}\njob j%d { model = m%d, cluster = c, batch = 8 }\n",
                i, i, i);
    }
}

static int scale(int max)
{
    static const char *const kinds[] = {"chain", "loop", "lets", "models", "jobs"};
    static const char *const what[] = {"ops in a chain", "ops from one loop", "top-level lets",
                                       "models", "models and jobs"};
    printf(
        "generated inputs at the language's limits: median of 3 runs; us/item should stay flat\n");
    printf("%-7s %-18s %7s %12s %12s %9s %9s\n", "input", "items", "n", "source ms", "IR ms",
           "us/item", "x prev");
    text t = {0};
    int bad = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        double prev = 0;
        for (int n = 12500; n <= max; n *= 2) {
            generate(&t, kinds[k], n);
            double ms_src, ms_ir;
            if (measure(kinds[k], t.s, 3, &ms_src, &ms_ir) < 0) {
                bad = 1;
                continue;
            }
            printf("%-7s %-18s %7d %12.1f %12.1f %9.2f %9.2f\n", kinds[k], what[k], n, ms_src,
                   ms_ir, 1e3 * ms_src / n, prev > 0 ? ms_src / prev : 0.0);
            prev = ms_src;
        }
    }
    free(t.s);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--scale") == 0)
        return scale(argc > 2 ? atoi(argv[2]) : 100000);
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
