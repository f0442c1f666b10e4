/*
 * cmd_stats.c: `burstc stats FILE`, the size of a model at a glance.
 *
 * For every graph in the input: one line per layer with its output type,
 * trainable parameters, forward FLOPs and activation bytes (the layer's
 * output, in f32), then the totals. Numbers come from ir_op_cost(), the same
 * formulas the cost model plans with (docs/ir.md), so a parameter count that
 * matches the reference implementation is also a check of those formulas.
 */
#include "tools.h"

#include <stdlib.h>
#include <string.h>

static const char stats_usage[] =
    "usage: burstc stats [--batch B] [--model NAME] [--totals] FILE\n"
    "\n"
    "Prints, per layer of every model in FILE (.burst or .ir): the output type,\n"
    "trainable parameters, forward FLOPs and activation bytes (f32), then totals.\n"
    "\n"
    "  --batch B      FLOPs and activations for a batch of B samples (default 1)\n"
    "  --model NAME   only the model called NAME\n"
    "  --totals       only the totals line of each model\n"
    "  --help         show this help\n";

/* 138357544 -> "138,357,544" */
static const char *grouped(int64_t v, char *buf, size_t n)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? -v : v));
    size_t len = strlen(raw), o = 0;
    if (v < 0 && o + 1 < n)
        buf[o++] = '-';
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        buf[o++] = raw[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len)
            buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

static const char *human(double v, const char *unit, char *buf, size_t n)
{
    const char *pre[] = {"", "K", "M", "G", "T", "P", "E"};
    int k = 0;
    while (v >= 1000 && k < 6) {
        v /= 1000;
        k++;
    }
    snprintf(buf, n, "%.3g %s%s", v, pre[k], unit);
    return buf;
}

static void print_graph(const ir_graph *g, int64_t batch, bool totals_only)
{
    int64_t params = 0;
    double flops = 0, act = 0;
    char b1[48], b2[48], b3[48], ty[128];
    if (!totals_only)
        printf("%-28s %-14s %-22s %14s %12s %12s\n", "layer", "op", "output", "params", "fwd FLOPs",
               "activations");
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        ir_cost c = ir_op_cost(g, op);
        double f = c.fwd_flops * (double)batch;
        double a = (double)ir_type_elems_per_sample(&op->type) * 4.0 * (double)batch;
        params += c.params;
        flops += f;
        act += a;
        if (totals_only)
            continue;
        ir_type_to_str(&op->type, ty, sizeof ty);
        printf("%-28s %-14s %-22s %14s %12s %12s\n", op->name, ir_op_info_of(op->opcode)->name, ty,
               grouped(c.params, b1, sizeof b1), human(f, "FLOP", b2, sizeof b2),
               human(a, "B", b3, sizeof b3));
    }
    printf("%s: %d layers, %s parameters, %s forward, %s activations (batch %lld)\n", g->name,
           g->nops, grouped(params, b1, sizeof b1), human(flops, "FLOP", b2, sizeof b2),
           human(act, "B", b3, sizeof b3), (long long)batch);
}

int cmd_stats(int argc, char **argv)
{
    const char *input = NULL, *model = NULL;
    int64_t batch = 1;
    bool totals_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            fputs(stats_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--totals") == 0) {
            totals_only = true;
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            char *end;
            batch = strtoll(argv[++i], &end, 10);
            if (*end || batch < 1 || batch > IR_MAX_BATCH) {
                fprintf(
                    stderr,
                    "burstc stats: error: --batch must be an integer from 1 to 2^31, got '%s'\n",
                    argv[i]);
                return 1;
            }
        } else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "burstc stats: error: unknown option '%s' (see burstc stats --help)\n",
                    argv[i]);
            return 1;
        } else if (input) {
            fprintf(stderr, "burstc stats: error: more than one input file\n");
            return 1;
        } else {
            input = argv[i];
        }
    }
    if (!input) {
        fputs("burstc stats: error: no input file\n", stderr);
        return 1;
    }
    arena *a = arena_new();
    diag_ctx d;
    diag_init(&d, stderr);
    int status = 1;
    ir_module *m = load_input(a, input, &d);
    if (m && d.nerrors == 0) {
        int shown = 0;
        for (int i = 0; i < m->ngraphs; i++) {
            if (model && strcmp(model, m->graphs[i]->name) != 0)
                continue;
            if (shown++ && !totals_only)
                putchar('\n');
            print_graph(m->graphs[i], batch, totals_only);
        }
        if (model && !shown)
            fprintf(stderr, "burstc stats: error: no model named '%s' in %s\n", model, input);
        else
            status = 0;
    }
    diag_summary(&d);
    arena_free(a);
    return status;
}
