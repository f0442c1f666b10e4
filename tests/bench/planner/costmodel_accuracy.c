/*
 * costmodel_accuracy.c: how well the analytic cost model (passes/costmodel.c)
 * predicts the measured A100 per-layer times of DeepPool, and the fit of its
 * constants. Not a test: a benchmark that prints tables.
 *
 *   costmodel_accuracy [DIR] [--fit]
 *
 * DIR defaults to data/profiles/deeppool-a100 in the source tree (the
 * vendored copy); when it is absent the program says so and exits 1. Every profile entry with an
 * IR equivalent (conv2d, linear, maxPool2d, avgPool2d, adAvgPool2d, ReLU2d,
 * flatten) becomes a one-op graph built with the IR builder; ir_op_check
 * infers its type and pass_plan_layer() takes its costs from ir_op_cost.
 * Composite blocks (ResnetBottleneck, TransBlockA/B, prep, prepOut) are
 * skipped and counted. Each (entry, batch) is one sample: predicted
 * forward+backward against the measured average.
 *
 * --fit runs a grid search over the launch overhead, the memory efficiency
 * and, per class, the utilisation curve's umax and whalf, minimising
 * median + 0.25 x 90th percentile of |predicted/measured - 1|, and prints the
 * constants to bake into costmodel.c.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "plan.h"

#ifndef DEEPPOOL_DIR
#define DEEPPOOL_DIR "data/profiles/deeppool-a100"
#endif

typedef struct sample {
    int model;
    plan_layer layer;
    int64_t batch;
    double measured;
} sample;

static sample *S;
static int nS, capS;
static char models[16][64];
static int nmodels;
static int skipped[16], used_entries[16];

static plan_cluster a100 = {
    .gpus = 1,
    .gpus_per_node = 1,
    .peak_flops = 156e12,
    .mem_bw = 1555e9,
    .mem_bytes = 40e9,
    .launch = 2e-6,
};

static ir_attr iattr(const char *k, int64_t v)
{
    ir_attr a = {.key = k, .kind = AK_INT};
    a.u.i = v;
    return a;
}

static ir_attr pattr(const char *k, int64_t v)
{
    ir_attr a = {.key = k, .kind = AK_PAIR};
    a.u.pair[0] = a.u.pair[1] = v;
    return a;
}

static ir_attr pattr2(const char *k, const int64_t v[2])
{
    ir_attr a = {.key = k, .kind = AK_PAIR};
    a.u.pair[0] = v[0];
    a.u.pair[1] = v[1];
    return a;
}

/* Builds input + op; returns false for entries without an IR equivalent. */
static bool entry_layer(const plan_profile_entry *e, plan_layer *out)
{
    ir_opcode opc;
    ir_attr at[8];
    int na = 0;
    int64_t v;
    int64_t get[3];
    if (strcmp(e->op, "conv2d") == 0) {
        int64_t k[2], pd[2], st[2];
        if (!plan_profile_attr(e, "out_channels", &v) ||
            !plan_profile_attr_pair(e, "kernel_size", k) ||
            !plan_profile_attr_pair(e, "padding", pd) || !plan_profile_attr_pair(e, "stride", st))
            return false;
        opc = OP_CONV2D;
        at[na++] = iattr("channels", v);
        at[na++] = pattr2("kernel", k);
        at[na++] = pattr2("pad", pd);
        at[na++] = pattr2("stride", st);
    } else if (strcmp(e->op, "maxPool2d") == 0 || strcmp(e->op, "avgPool2d") == 0) {
        if (!plan_profile_attr(e, "kernel_size", &get[0]) ||
            !plan_profile_attr(e, "padding", &get[1]) || !plan_profile_attr(e, "stride", &get[2]))
            return false;
        opc = e->op[0] == 'm' ? OP_MAXPOOL2D : OP_AVGPOOL2D;
        at[na++] = pattr("kernel", get[0]);
        at[na++] = pattr("pad", get[1]);
        at[na++] = pattr("stride", get[2]);
    } else if (strcmp(e->op, "linear") == 0) {
        if (!plan_profile_attr(e, "out_features", &v))
            return false;
        opc = OP_LINEAR;
        at[na++] = iattr("out", v);
        int64_t b = 1;
        plan_profile_attr(e, "bias", &b);
        ir_attr ba = {.key = "bias", .kind = AK_BOOL};
        ba.u.i = b;
        at[na++] = ba;
    } else if (strcmp(e->op, "adAvgPool2d") == 0) {
        opc = OP_GLOBALAVGPOOL;
    } else if (strcmp(e->op, "ReLU2d") == 0) {
        opc = OP_RELU;
    } else if (strcmp(e->op, "flatten") == 0) {
        opc = OP_FLATTEN;
    } else {
        return false;
    }
    arena *a = arena_new();
    ir_module *m = ir_module_new(a);
    ir_graph *g = ir_graph_add(m, "g", (src_loc){0});
    diag_ctx d;
    diag_init(&d, stderr);
    int x = ir_op_add(m, g, OP_INPUT, "x", NULL, 0, NULL, 0, (src_loc){0});
    g->ops[x].type.elem = EL_F32;
    g->ops[x].type.rank = e->nshape + 1;
    g->ops[x].type.dim[0] = IR_BATCH;
    for (int i = 0; i < e->nshape; i++)
        g->ops[x].type.dim[i + 1] = e->shape[i];
    bool ok = ir_op_check(m, g, x, &d);
    int y = ir_op_add(m, g, opc, "y", &x, 1, at, na, (src_loc){0});
    ok = ok && ir_op_check(m, g, y, &d);
    if (ok) {
        pass_plan_layer(g, &g->ops[y], out);
        out->name = NULL;
    }
    arena_free(a);
    return ok;
}

static void load_model(const char *dir, const char *file)
{
    char path[8192];
    snprintf(path, sizeof path, "%.4000s/%.1000s", dir, file);
    plan_profile pr = {0};
    if (!plan_profile_read(&pr, path, stderr)) {
        plan_profile_free(&pr);
        return;
    }
    int mi = nmodels++;
    snprintf(models[mi], sizeof models[mi], "%.*s", (int)strcspn(file, "L"), file);
    for (int i = 0; i < pr.n; i++) {
        plan_layer l;
        if (!entry_layer(&pr.e[i], &l)) {
            skipped[mi]++;
            continue;
        }
        used_entries[mi]++;
        for (int b = 0; b < pr.e[i].timing.n; b++) {
            if (nS == capS) {
                capS = capS ? 2 * capS : 1024;
                S = realloc(S, sizeof(sample) * (size_t)capS);
            }
            S[nS++] = (sample){mi, l, pr.e[i].timing.batch[b], pr.e[i].timing.seconds[b]};
        }
    }
    plan_profile_free(&pr);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double q)
{
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmpd);
    int i = (int)ceil(q * n) - 1;
    return v[i < 0 ? 0 : i];
}

static double err_of(const sample *s)
{
    double f, b;
    plan_layer_time_analytic(&a100, 4, &s->layer, s->batch, &f, &b);
    return fabs((f + b) / s->measured - 1);
}

/* Errors of the samples matching model (-1: any) and class (-1: conv and linear, -2: any). */
static int collect(double *v, int model, int cls)
{
    int n = 0;
    for (int i = 0; i < nS; i++) {
        if (model >= 0 && S[i].model != model)
            continue;
        if (cls == -1 && (S[i].layer.cls == PC_OTHER || S[i].layer.cls == PC_POOL))
            continue;
        if (cls >= 0 && (int)S[i].layer.cls != cls)
            continue;
        v[n++] = err_of(&S[i]);
    }
    return n;
}

static double objective(double *v, int cls)
{
    int n = collect(v, -1, cls);
    double med = pct(v, n, 0.5), p90 = pct(v, n, 0.9);
    return med + 0.25 * p90;
}

static void fit(double *v)
{
    static const double launches[] = {1e-6, 2e-6, 4e-6, 8e-6, 12e-6};
    double best_total = INFINITY, best_launch = 0;
    plan_util best_u[PC_COUNT];
    for (size_t li = 0; li < sizeof launches / sizeof launches[0]; li++) {
        a100.launch = launches[li];
        double total = 0;
        plan_util u[PC_COUNT];
        for (int c = 0; c < PC_COUNT; c++) {
            double bc = INFINITY;
            for (int i = 0; i <= 24; i++) {
                double umax = 0.05 * pow(20.0, i / 24.0);
                for (int j = 0; j <= 24; j++) {
                    double whalf = pow(10, 5 + 6.0 * j / 24);
                    for (int k = 0; k <= 8; k++)
                        for (int gi = 0; gi < 5; gi++) {
                            plan_util_curve[c] =
                                (plan_util){umax, whalf, 0.4 + 0.2 * gi, 0.2 + 0.1 * k};
                            double o = objective(v, c);
                            if (o < bc) {
                                bc = o;
                                u[c] = plan_util_curve[c];
                            }
                        }
                }
            }
            plan_util_curve[c] = u[c];
            total += bc;
        }
        if (total < best_total) {
            best_total = total;
            best_launch = a100.launch;
            memcpy(best_u, u, sizeof u);
        }
    }
    a100.launch = best_launch;
    memcpy(plan_util_curve, best_u, sizeof best_u);
    printf("fitted: launch %.0f us\n", best_launch * 1e6);
    static const char *cn[PC_COUNT] = {"PC_CONV", "PC_LINEAR", "PC_OTHER", "PC_POOL"};
    for (int c = 0; c < PC_COUNT; c++)
        printf("\t[%s] = { %.3f, %.3g, %.1f, %.2f },\n", cn[c], best_u[c].umax, best_u[c].whalf,
               best_u[c].gamma, best_u[c].mem_eff);
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *dir = DEEPPOOL_DIR;
    bool dofit = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fit") == 0)
            dofit = true;
        else if (strncmp(argv[i], "--launch=", 9) == 0)
            a100.launch = atof(argv[i] + 9) * 1e-6;
        else
            dir = argv[i];
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "costmodel_accuracy: cannot open %s\n", dir);
        return 1;
    }
    char names[16][1024];
    int nf = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nf < 16) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".txt") == 0)
            snprintf(names[nf++], sizeof names[0], "%s", de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nf, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < nf; i++)
        load_model(dir, names[i]);
    double *v = malloc(sizeof(double) * (size_t)(nS ? nS : 1));
    if (dofit)
        fit(v);
    printf("A100 (TF32 peak %.0f TFLOP/s, %.0f GB/s, launch %.0f us)\n", a100.peak_flops / 1e12,
           a100.mem_bw / 1e9, a100.launch * 1e6);
    printf("|predicted/measured - 1| of forward+backward per layer and batch size (1..128)\n\n");
    printf("%-10s %7s %7s | %8s %9s %9s | %8s %9s %9s\n", "model", "entries", "skipped", "conv+lin",
           "median", "p90", "all", "median", "p90");
    for (int mi = -1; mi < nmodels; mi++) {
        int n1 = collect(v, mi, -1);
        double med1 = pct(v, n1, 0.5), p901 = pct(v, n1, 0.9);
        int n2 = collect(v, mi, -2);
        double med2 = pct(v, n2, 0.5), p902 = pct(v, n2, 0.9);
        int ent = 0, sk = 0;
        for (int j = 0; j < nmodels; j++)
            if (mi < 0 || j == mi) {
                ent += used_entries[j];
                sk += skipped[j];
            }
        printf("%-10s %7d %7d | %8d %8.1f%% %8.1f%% | %8d %8.1f%% %8.1f%%\n",
               mi < 0 ? "all" : models[mi], ent, sk, n1, 100 * med1, 100 * p901, n2, 100 * med2,
               100 * p902);
    }
    printf("\nper class (all models):\n");
    static const char *cn[PC_COUNT] = {"conv", "linear", "other"};
    for (int c = 0; c < PC_COUNT; c++) {
        int n = collect(v, -1, c);
        printf("%-8s samples %5d  median %6.1f%%  p90 %6.1f%%\n", cn[c], n, 100 * pct(v, n, 0.5),
               100 * pct(v, n, 0.9));
    }
    free(v);
    free(S);
    return 0;
}
