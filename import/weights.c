/*
 * weights.c: `burstc import --weights FILE`, the model's weights as safetensors.
 *
 * Every initializer that became a trainable parameter or a BatchNorm running
 * statistic is written under its ONNX name, with its ONNX dtype and shape: for
 * a PyTorch export in training mode those are the model's state_dict() keys, so
 * PyTorch reads the file back with load_state_dict. Constants (shape tensors,
 * masks) and unused initializers are no state and are left out. Each BatchNorm
 * whose statistics are named `P.running_mean` and `P.running_var` also gets
 * `P.num_batches_tracked` (I64, 0), the third buffer of torch's BatchNorm,
 * which ONNX does not keep, so that a strict load_state_dict of what a program
 * trains from this file finds every key.
 *
 * The file's metadata maps each tensor to the Burst parameter it starts
 * (`layer.param`, the name a generated program registers it under), written
 * `layer.param^T` when it is that parameter's transpose (a linear weight the
 * export stores [in, out]) and `layer.param@R` when it fills the parameter's
 * rows from R on (attention's q, k and v projections fused into w_qkv); a
 * program's --init reads this map (docs/runtime.md, "Weights in and out").
 * The same map, imp_weight_map(), is the source's `weights` section
 * (write.c), which the importer writes with or without --weights.
 */
#include "import.h"
#include "safetensors.h"

#include <stdlib.h>
#include <string.h>

static bool st_dtype_of(int onnx, st_dtype *dt)
{
    switch (onnx) {
    case IMP_FLOAT: *dt = ST_F32; return true;
    case IMP_FLOAT16: *dt = ST_F16; return true;
    case IMP_BFLOAT16: *dt = ST_BF16; return true;
    case IMP_DOUBLE: *dt = ST_F64; return true;
    case IMP_INT64: *dt = ST_I64; return true;
    case IMP_INT32: *dt = ST_I32; return true;
    case IMP_INT16: *dt = ST_I16; return true;
    case IMP_INT8: *dt = ST_I8; return true;
    case IMP_UINT8: *dt = ST_U8; return true;
    case IMP_BOOL: *dt = ST_BOOL; return true;
    default: return false;
    }
}

static bool ends_with(const char *s, const char *tail, size_t *stem)
{
    size_t n = strlen(s), t = strlen(tail);
    if (n < t || strcmp(s + n - t, tail) != 0)
        return false;
    *stem = n - t;
    return true;
}

int imp_weight_map(const imp_graph *g, const imp_model *m, imp_wmap **out)
{
    int cap = 3 * g->ninits + 1, n = 0;
    imp_wmap *w = arena_alloc(g->a, sizeof *w * (size_t)cap);
    for (int i = 0; i < g->nvalues; i++) {
        const imp_value *v = &g->values[i];
        if (v->kind != VK_INIT || (v->role != ROLE_PARAM && v->role != ROLE_STATS) || v->layer < 0)
            continue;
        const char *layer = m->layers[v->layer].name;
        w[n].value = i;
        w[n].name = v->name;
        w[n].target = !v->pname      ? NULL
                      : v->row0 >= 0 ? arena_printf(g->a, "%s.%s@%lld%s", layer, v->pname,
                                                    (long long)v->row0, v->transposed ? "^T" : "")
                                     : arena_printf(g->a, "%s.%s%s", layer, v->pname,
                                                    v->transposed ? "^T" : "");
        n++;
        if (v->alias && w[n - 1].target) { /* a tied weight: the same tensor, its other name */
            w[n] = w[n - 1];
            w[n].name = v->alias;
            n++;
        }
        size_t stem;
        if (v->pname && strcmp(v->pname, "running_mean") == 0 &&
            ends_with(v->name, "running_mean", &stem)) {
            const char *count = arena_printf(g->a, "%.*snum_batches_tracked", (int)stem, v->name);
            if (imp_value_find(g, count) >= 0)
                continue; /* a name the file uses for something else: left alone */
            w[n].value = -1;
            w[n].name = count;
            w[n].target = arena_printf(g->a, "%s.num_batches_tracked", layer);
            n++;
        }
    }
    *out = w;
    return n;
}

bool imp_write_weights(const imp_graph *g, const imp_model *m, const char *path)
{
    imp_wmap *w;
    int nw = imp_weight_map(g, m, &w), n = 0;
    st_tensor *ts = arena_alloc(g->a, sizeof *ts * (size_t)(nw + 1));
    st_meta *meta = arena_alloc(g->a, sizeof *meta * (size_t)(nw + 1));
    static const int64_t zero = 0;
    bool ok = true;
    for (int k = 0; k < nw; k++) {
        st_tensor *t = &ts[n];
        meta[n] = (st_meta){.key = w[k].name, .value = w[k].target};
        if (w[k].value < 0) {
            *t = (st_tensor){.name = w[k].name, .dtype = ST_I64, .ndim = 0, .data = &zero};
            n++;
            continue;
        }
        const imp_value *v = &g->values[w[k].value];
        if (!st_dtype_of(v->dtype, &t->dtype) || !v->bytes || !v->pname) {
            fprintf(g->err, "%s: error: initializer '%s' (ONNX data type %d) cannot be written\n",
                    g->path, v->name, v->dtype);
            ok = false;
            continue;
        }
        if (v->transposed && v->shape.rank != 2)
            ice("initializer '%s' is a transposed parameter of rank %d", v->name, v->shape.rank);
        t->name = w[k].name;
        t->ndim = v->shape.rank;
        for (int d = 0; d < t->ndim; d++)
            t->shape[d] = v->shape.d[d].c;
        t->data = v->bytes;
        n++;
    }
    if (!ok)
        return false;
    char err[512];
    if (!st_write(path, ts, n, meta, n, err, sizeof err)) {
        fprintf(g->err, "burstc import: error: %s\n", err);
        return false;
    }
    return true;
}
