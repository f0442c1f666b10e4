/*
 * write.c: the imported model as Burst source.
 *
 * A header comment says where the model came from and what became of every
 * initializer (how many elements are trainable parameters, BatchNorm
 * statistics, constants or unused), then one `model` with the inputs first
 * and one statement per layer, in the graph's order, with the attributes
 * that differ from the defaults, then the `weights` section: the name each
 * parameter and buffer has in the file. The text is built in memory; the caller
 * writes it only when everything succeeded.
 */
#include "import.h"

#include <stdlib.h>
#include <string.h>

/* 138357544 -> "138,357,544" */
static const char *grouped(int64_t v, char *buf, size_t n)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    size_t len = strlen(raw), o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        buf[o++] = raw[i];
        if ((len - i - 1) % 3 == 0 && i + 1 < len && raw[i] != '-')
            buf[o++] = ',';
    }
    buf[o] = 0;
    return buf;
}

/* A name or string from the file, safe inside a // comment. */
static const char *printable(const imp_graph *g, const char *s)
{
    size_t n = strlen(s);
    if (n > 400)
        n = 400;
    char *o = arena_alloc(g->a, n + 1);
    for (size_t k = 0; k < n; k++)
        o[k] = s[k] >= 32 && s[k] < 127 ? s[k] : '?';
    return o;
}

static void put_type(FILE *out, const imp_layer *l)
{
    fprintf(out, "%s[batch", l->i32 ? "i32" : "f32");
    for (int d = 1; d < l->shape.rank; d++)
        fprintf(out, ", %lld", (long long)l->shape.d[d].c);
    fputc(']', out);
}

char *imp_write(arena *a, const imp_graph *g, const imp_model *m, const char *file_name)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        ice("open_memstream failed");
    const imp_summary *s = &m->sum;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    fprintf(out, "// %s: imported from %s by `burstc import`.\n", m->name, printable(g, file_name));
    fprintf(out, "// ONNX IR version %lld, opset %lld", (long long)g->ir_version,
            (long long)g->opset);
    if (*g->producer)
        fprintf(out, ", made by %s %s", printable(g, g->producer),
                printable(g, g->producer_version));
    fprintf(out, ".\n");
    if (g->batch_param)
        fprintf(out, "// The batch is the inputs' first dimension ('%s' in the file).\n",
                printable(g, g->batch_param));
    else
        fprintf(out,
                "// The batch is the inputs' first dimension (the file was exported at %lld).\n",
                (long long)g->batch_export);
    if (m->weights)
        fprintf(out, "// Initializers: %s elements in %lld tensors; weights in %s.\n",
                grouped(s->init_elems, b1, sizeof b1), (long long)s->ninits,
                printable(g, m->weights));
    else
        fprintf(out, "// Initializers: %s elements in %lld tensors; weights are not copied.\n",
                grouped(s->init_elems, b1, sizeof b1), (long long)s->ninits);
    fprintf(out, "//   %s trainable parameters (what `burstc stats` counts)\n",
            grouped(s->params + s->shared, b2, sizeof b2));
    if (s->shared)
        fprintf(out, "//     of which %s counted again: a tensor read by two layers\n",
                grouped(s->shared, b3, sizeof b3));
    fprintf(out, "//   %s BatchNorm running means and variances (updated, not trained)\n",
            grouped(s->stats, b3, sizeof b3));
    fprintf(out, "//   %s in constants (shapes, masks, scales); %s unused\n",
            grouped(s->consts, b4, sizeof b4), grouped(s->unused, b5, sizeof b5));
    for (int k = 0; k < m->nnotes; k++)
        fprintf(out, "// Note: %s.\n", printable(g, m->notes[k]));
    fprintf(out, "\nmodel %s {\n", m->name);
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < m->nlayers; k++) {
            const imp_layer *l = &m->layers[k];
            bool input = strcmp(l->op, "input") == 0;
            if (input != (pass == 0) || l->dropped)
                continue;
            if (l->note)
                fprintf(out, "  // %s\n", printable(g, l->note));
            if (input) {
                fprintf(out, "  input %s: ", l->name);
                put_type(out, l);
                fputc('\n', out);
                continue;
            }
            fprintf(out, "  %s = %s(", l->name, l->op);
            for (int i = 0; i < l->nargs; i++)
                fprintf(out, "%s%s", i ? ", " : "", m->layers[l->args[i]].name);
            fprintf(out, "%s)\n", l->attrs);
        }
    imp_wmap *w;
    int nw = imp_weight_map(g, m, &w);
    if (nw)
        fprintf(out, "\n  // The tensors' names in the ONNX file (PyTorch's state_dict keys).\n"
                     "  weights {\n");
    for (int k = 0; k < nw; k++) {
        if (!w[k].target)
            continue;
        if (w[k].value >= 0 && strcmp(w[k].name, g->values[w[k].value].name))
            fprintf(out, "    // a tied weight: the state_dict's other name for '%s'\n",
                    printable(g, g->values[w[k].value].name));
        if (ir_weight_name_ok(w[k].name))
            fprintf(out, "    \"%s\" = \"%s\"\n", w[k].name, w[k].target);
        else
            fprintf(out, "    // '%s' (%s) left out: a Burst string cannot hold its name\n",
                    printable(g, w[k].name), w[k].target);
    }
    if (nw)
        fprintf(out, "  }\n");
    fprintf(out, "}\n");
    if (fclose(out) != 0)
        ice("writing to memory failed");
    char *copy = arena_strndup(a, text, len);
    free(text);
    return copy;
}
