/*
 * onnx.c: an ONNX file into an imp_graph; the only file that sees protobuf-c.
 *
 * Input is hostile until proven otherwise, so reading goes in three steps.
 * First the file is read whole through ir/'s reader (regular files only,
 * capped). Then its wire structure is walked, guided by the descriptors that
 * protoc-c generated from onnx.proto: every tag and varint well formed, every
 * length inside the message that holds it, and messages nested at most
 * IMP_MAX_DEPTH deep. protobuf-c 1.4 decodes nested messages by recursion
 * without a limit, so a few kilobytes of nested attribute graphs would
 * otherwise overflow the stack; the walk also turns "a 2 GB length in a
 * 100-byte file" into a message with the byte offset. The walk only checks
 * structure; the decoding itself is protobuf-c's, through an allocator with
 * a budget, so a small file that decodes into billions of empty nodes is an
 * error rather than the machine's memory. Last, what the importer needs is
 * copied into the arena: names, op types, attributes, shapes and the
 * contents of small tensors; weights are never copied.
 */
#include "import.h"
#include "readfile.h"

#include "onnx/onnx.pb-c.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the wire walk ---- */

typedef struct walk {
    const uint8_t *base;
    char msg[256];
} walk;

static bool walk_fail(walk *w, const uint8_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool walk_fail(walk *w, const uint8_t *at, const char *fmt, ...)
{
    int n = snprintf(w->msg, sizeof w->msg, "at byte %zu: ", (size_t)(at - w->base));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg + n, sizeof w->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Checks the fields of one message of type desc in [p, end). */
static bool walk_message(walk *w, const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                         const uint8_t *end, int depth)
{
    while (p < end) {
        const uint8_t *field_at = p;
        uint64_t tag, v;
        if (!varint(&p, end, &tag))
            return walk_fail(w, field_at, "a field's tag runs past the end of its message");
        uint64_t id = tag >> 3;
        if (id == 0 || id > 536870911)
            return walk_fail(w, field_at, "field number %llu is not a protobuf field number",
                             (unsigned long long)id);
        switch (tag & 7) {
        case 0:
            if (!varint(&p, end, &v))
                return walk_fail(w, field_at, "field %llu: its number runs past the end",
                                 (unsigned long long)id);
            break;
        case 1:
        case 5: {
            size_t k = (tag & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < k)
                return walk_fail(w, field_at, "field %llu: %zu bytes needed, %zu left",
                                 (unsigned long long)id, k, (size_t)(end - p));
            p += k;
            break;
        }
        case 2: {
            const uint8_t *len_at = p;
            if (!varint(&p, end, &v))
                return walk_fail(w, field_at, "field %llu: its length runs past the end",
                                 (unsigned long long)id);
            if (v > (uint64_t)(end - p))
                return walk_fail(w, len_at,
                                 "field %llu claims %llu bytes, but only %zu remain (a truncated "
                                 "or corrupt file)",
                                 (unsigned long long)id, (unsigned long long)v, (size_t)(end - p));
            const ProtobufCFieldDescriptor *f =
                desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned)id) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth + 1 > IMP_MAX_DEPTH)
                    return walk_fail(
                        w, field_at, "messages nested more than %d deep (%s inside %s ...)",
                        IMP_MAX_DEPTH,
                        ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name,
                        desc->short_name);
                if (!walk_message(w, f->descriptor, p, p + v, depth + 1))
                    return false;
            }
            p += v;
            break;
        }
        default:
            return walk_fail(w, field_at, "field %llu has wire type %d, which ONNX never uses",
                             (unsigned long long)id, (int)(tag & 7));
        }
    }
    return true;
}

/* ---- an allocator with a budget, for protobuf-c ---- */

typedef struct budget {
    size_t used, limit;
    bool exceeded;
} budget;

static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (b->limit - b->used < 16 || size > b->limit - b->used - 16) {
        b->exceeded = true;
        return NULL;
    }
    unsigned char *p = malloc(size + 16);
    if (!p)
        return NULL;
    memcpy(p, &size, sizeof size);
    b->used += size + 16;
    return p + 16;
}

static void budget_free(void *data, void *ptr)
{
    budget *b = data;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - 16;
    size_t size;
    memcpy(&size, p, sizeof size);
    b->used -= size + 16;
    free(p);
}

/* ---- copying what the importer needs ---- */

typedef struct reader {
    imp_graph *g;
    budget mem;
} reader;

static const char *str(imp_graph *g, const char *s)
{
    return arena_strdup(g->a, s ? s : "");
}

static int dtype_size(int dtype)
{
    switch (dtype) {
    case IMP_FLOAT:
    case IMP_INT32: return 4;
    case IMP_INT64:
    case IMP_DOUBLE: return 8;
    case IMP_UINT8:
    case IMP_INT8:
    case IMP_BOOL: return 1;
    case IMP_INT16:
    case IMP_FLOAT16:
    case IMP_BFLOAT16: return 2;
    default: return 0;
    }
}

static double half_to_double(uint16_t h, bool bf16)
{
    if (bf16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? m / 1024.0 * (1.0 / 16384) : (1 + m / 1024.0) * (double)(1 << e) / 32768;
    if (e == 31)
        v = m ? 0.0 / 0.0 : 1.0 / 0.0;
    return (h & 0x8000) ? -v : v;
}

/* The contents of a small tensor, from raw_data or the typed fields; false
 * (reported as about what) when they do not match its shape. */
static bool tensor_data(imp_graph *g, const Onnx__TensorProto *t, imp_tensor *out, const char *what)
{
    int64_t n = out->elems;
    int size = dtype_size(out->dtype);
    bool real = out->dtype == IMP_FLOAT || out->dtype == IMP_DOUBLE || out->dtype == IMP_FLOAT16 ||
                out->dtype == IMP_BFLOAT16;
    if (size == 0 || n > IMP_FOLD_MAX ||
        (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return true;
    imp_data *d = arena_alloc(g->a, sizeof *d);
    d->n = n;
    d->real = real;
    if (real)
        d->r = arena_alloc(g->a, sizeof *d->r * (size_t)(n ? n : 1));
    else
        d->i = arena_alloc(g->a, sizeof *d->i * (size_t)(n ? n : 1));
    if (t->has_raw_data && t->raw_data.len > 0) {
        if (t->raw_data.len != (size_t)n * (size_t)size) {
            imp_error(g, -1, "%s: its raw data holds %zu bytes, its shape needs %lld", what,
                      t->raw_data.len, (long long)(n * size));
            return false;
        }
        const uint8_t *p = t->raw_data.data;
        for (int64_t k = 0; k < n; k++, p += size) {
            switch (out->dtype) {
            case IMP_FLOAT: {
                float f;
                memcpy(&f, p, 4);
                d->r[k] = f;
                break;
            }
            case IMP_DOUBLE: memcpy(&d->r[k], p, 8); break;
            case IMP_FLOAT16:
            case IMP_BFLOAT16: {
                uint16_t h;
                memcpy(&h, p, 2);
                d->r[k] = half_to_double(h, out->dtype == IMP_BFLOAT16);
                break;
            }
            case IMP_INT64: memcpy(&d->i[k].c, p, 8); break;
            case IMP_INT32: {
                int32_t v;
                memcpy(&v, p, 4);
                d->i[k].c = v;
                break;
            }
            case IMP_INT16: {
                int16_t v;
                memcpy(&v, p, 2);
                d->i[k].c = v;
                break;
            }
            case IMP_INT8: d->i[k].c = (int8_t)*p; break;
            default: d->i[k].c = *p; break;
            }
        }
        out->data = d;
        return true;
    }
    size_t have;
    switch (out->dtype) {
    case IMP_FLOAT: have = t->n_float_data; break;
    case IMP_DOUBLE: have = t->n_double_data; break;
    case IMP_INT64: have = t->n_int64_data; break;
    default: have = t->n_int32_data; break; /* int32, int16, int8, uint8, bool, halves */
    }
    if (have != (size_t)n) {
        if (have == 0 && !(t->has_raw_data))
            return true; /* no data at all: a tensor whose shape is all that matters */
        imp_error(g, -1, "%s: it holds %zu values, its shape needs %lld", what, have, (long long)n);
        return false;
    }
    for (int64_t k = 0; k < n; k++) {
        switch (out->dtype) {
        case IMP_FLOAT: d->r[k] = t->float_data[k]; break;
        case IMP_DOUBLE: d->r[k] = t->double_data[k]; break;
        case IMP_INT64: d->i[k].c = t->int64_data[k]; break;
        case IMP_FLOAT16:
        case IMP_BFLOAT16:
            d->r[k] = half_to_double((uint16_t)t->int32_data[k], out->dtype == IMP_BFLOAT16);
            break;
        default: d->i[k].c = t->int32_data[k]; break;
        }
    }
    out->data = d;
    return true;
}

static imp_tensor *tensor(imp_graph *g, const Onnx__TensorProto *t, const char *what)
{
    imp_tensor *out = arena_alloc(g->a, sizeof *out);
    out->dtype = t->has_data_type ? t->data_type : 0;
    if (t->n_dims > IMP_MAX_RANK) {
        imp_error(g, -1, "%s has %zu dimensions; burstc handles at most %d", what, t->n_dims,
                  IMP_MAX_RANK);
        return NULL;
    }
    out->rank = (int)t->n_dims;
    out->elems = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        int64_t v = t->dims[k];
        if (v < 0 || v > IMP_MAX_DIM) {
            imp_error(g, -1, "%s: dimension %zu is %lld", what, k, (long long)v);
            return NULL;
        }
        out->dims[k] = v;
        if (__builtin_mul_overflow(out->elems, v, &out->elems) || out->elems > IMP_MAX_DIM) {
            imp_error(g, -1, "%s has more than 2^40 elements", what);
            return NULL;
        }
    }
    if (t->segment) {
        imp_error(g, -1, "%s is stored in segments, which burstc import does not read", what);
        return NULL;
    }
    if (!tensor_data(g, t, out, what))
        return NULL;
    return out;
}

static bool attribute(imp_graph *g, const Onnx__AttributeProto *p, imp_attr *a, const char *node)
{
    a->name = str(g, p->name);
    a->kind = IA_OTHER;
    char what[300];
    snprintf(what, sizeof what, "attribute '%.100s' of node '%.100s'", a->name, node);
    switch (p->type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        a->kind = IA_INT;
        a->i = p->i;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        a->kind = IA_FLOAT;
        a->f = p->f;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        if (p->n_ints > IMP_FOLD_MAX)
            break; /* no attribute of an op the importer reads is this long */
        a->kind = IA_INTS;
        a->n = (int)p->n_ints;
        a->ints = arena_alloc(g->a, sizeof *a->ints * (p->n_ints + 1));
        memcpy(a->ints, p->ints, sizeof *a->ints * p->n_ints);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        if (p->n_floats > IMP_FOLD_MAX)
            break;
        a->kind = IA_FLOATS;
        a->n = (int)p->n_floats;
        a->floats = arena_alloc(g->a, sizeof *a->floats * (p->n_floats + 1));
        for (size_t k = 0; k < p->n_floats; k++)
            a->floats[k] = p->floats[k];
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        a->kind = IA_STRING;
        a->s = arena_strndup(g->a, p->has_s ? (const char *)p->s.data : "",
                             p->has_s ? strnlen((const char *)p->s.data, p->s.len) : 0);
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        if (!p->t) {
            imp_error(g, -1, "%s is a tensor without one", what);
            return false;
        }
        a->kind = IA_TENSOR;
        a->t = tensor(g, p->t, what);
        return a->t != NULL;
    default: break; /* graphs, sparse tensors, types: ops that carry them are not supported */
    }
    return true;
}

/* The element type and shape of a graph input. */
static bool input_type(imp_graph *g, const Onnx__ValueInfoProto *vi, imp_value *v)
{
    const Onnx__TypeProto *t = vi->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type) {
        imp_error(g, -1, "graph input '%s' is not a tensor", v->name);
        return false;
    }
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    v->dtype = tt->has_elem_type ? tt->elem_type : 0;
    if (!tt->shape) {
        imp_error(g, -1, "graph input '%s' has no shape; burstc needs static shapes", v->name);
        return false;
    }
    if (tt->shape->n_dim > IMP_MAX_RANK || tt->shape->n_dim == 0) {
        imp_error(g, -1, "graph input '%s' has %zu dimensions; burstc handles 1 to %d", v->name,
                  tt->shape->n_dim, IMP_MAX_RANK);
        return false;
    }
    v->shape.rank = (int)tt->shape->n_dim;
    bool ok = true;
    for (size_t k = 0; k < tt->shape->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        bool has_value = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        const char *param = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                ? d->dim_param
                                : NULL;
        if (k == 0) {
            /* The batch: symbolic in the export, or the value it was exported at. */
            if (has_value && (d->dim_value < 1 || d->dim_value > IMP_MAX_DIM)) {
                imp_error(g, -1, "graph input '%s': batch dimension %lld", v->name,
                          (long long)d->dim_value);
                ok = false;
            } else {
                const char *name = param && *param ? param : "?";
                char mine[64], before[64];
                if (has_value)
                    snprintf(mine, sizeof mine, "%lld", (long long)d->dim_value);
                else
                    snprintf(mine, sizeof mine, "'%.50s'", name);
                if (g->batch_param)
                    snprintf(before, sizeof before, "'%.50s'", g->batch_param);
                else
                    snprintf(before, sizeof before, "%lld", (long long)g->batch_export);
                bool clash =
                    has_value
                        ? g->batch_param || (g->batch_export && g->batch_export != d->dim_value)
                        : g->batch_export || (g->batch_param && strcmp(g->batch_param, name));
                if (clash) {
                    imp_error(g, -1,
                              "graph inputs disagree on the batch (their first dimension): '%s' "
                              "has %s, an earlier input %s",
                              v->name, mine, before);
                    ok = false;
                } else if (has_value) {
                    g->batch_export = d->dim_value;
                } else {
                    g->batch_param = str(g, name);
                }
            }
            v->shape.d[0] = (imp_dim){1, 1, 0};
            continue;
        }
        if (!has_value) {
            imp_error(g, -1,
                      "graph input '%s': dimension %zu is %s%s%s; burstc needs static shapes "
                      "except the batch (the first dimension): export with fixed sizes",
                      v->name, k, param ? "'" : "unknown", param ? param : "", param ? "'" : "");
            ok = false;
            continue;
        }
        if (d->dim_value < 1 || d->dim_value > IMP_MAX_DIM) {
            imp_error(g, -1, "graph input '%s': dimension %zu is %lld", v->name, k,
                      (long long)d->dim_value);
            ok = false;
            continue;
        }
        v->shape.d[k] = (imp_dim){d->dim_value, 0, 0};
    }
    if (ok && imp_elems_checked(&v->shape) < 0) {
        imp_error(g, -1, "graph input '%s' has more than 2^40 elements per sample", v->name);
        ok = false;
    }
    v->known = ok;
    return ok;
}

/* An initializer's contents as little-endian bytes of its dtype (for --weights), from
 * raw_data or the typed fields; false (reported) when they are elsewhere or do not match
 * its shape. */
static bool keep_bytes(imp_graph *g, const Onnx__TensorProto *t, imp_value *v, const char *what)
{
    int size = dtype_size(v->dtype);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        imp_error(g, -1,
                  "%s is stored outside the file (external data); --weights reads "
                  "weights kept inside the ONNX file",
                  what);
        return false;
    }
    if (size == 0) {
        imp_error(g, -1, "%s has ONNX data type %d, which --weights does not write", what,
                  v->dtype);
        return false;
    }
    size_t n = (size_t)v->elems, bytes = n * (size_t)size; /* both capped by IMP_MAX_DIM */
    uint8_t *out = arena_alloc(g->a, bytes ? bytes : 1);
    if (t->has_raw_data && t->raw_data.len > 0) {
        if (t->raw_data.len != bytes) {
            imp_error(g, -1, "%s: its raw data holds %zu bytes, its shape needs %zu", what,
                      t->raw_data.len, bytes);
            return false;
        }
        memcpy(out, t->raw_data.data, bytes);
    } else {
        size_t have;
        switch (v->dtype) {
        case IMP_FLOAT: have = t->n_float_data; break;
        case IMP_DOUBLE: have = t->n_double_data; break;
        case IMP_INT64: have = t->n_int64_data; break;
        default: have = t->n_int32_data; break; /* int32, int16, int8, uint8, bool, halves */
        }
        if (have != n) {
            imp_error(g, -1, "%s: it holds %zu values, its shape needs %zu", what, have, n);
            return false;
        }
        for (size_t k = 0; k < n; k++) {
            uint8_t *p = out + k * (size_t)size;
            switch (v->dtype) {
            case IMP_FLOAT: memcpy(p, &t->float_data[k], 4); break;
            case IMP_DOUBLE: memcpy(p, &t->double_data[k], 8); break;
            case IMP_INT64: memcpy(p, &t->int64_data[k], 8); break;
            case IMP_INT32: memcpy(p, &t->int32_data[k], 4); break;
            case IMP_INT16:
            case IMP_FLOAT16:
            case IMP_BFLOAT16: {
                uint16_t h = (uint16_t)t->int32_data[k];
                memcpy(p, &h, 2);
                break;
            }
            default: *p = (uint8_t)t->int32_data[k]; break;
            }
        }
    }
    v->bytes = out;
    v->nbytes = bytes;
    return true;
}

static bool read_graph(imp_graph *g, const Onnx__GraphProto *gp)
{
    g->graph_name = str(g, gp->name);
    if (gp->n_node > IMP_MAX_NODES) {
        imp_error(g, -1, "the graph has %zu nodes; burstc import reads at most %d", gp->n_node,
                  IMP_MAX_NODES);
        return false;
    }
    if (gp->n_sparse_initializer > 0) {
        imp_error(g, -1, "the graph has sparse initializers, which burstc import does not read");
        return false;
    }
    bool ok = true;
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *t = gp->initializer[k];
        if (!t->name || !*t->name) {
            imp_error(g, -1, "initializer %zu has no name", k);
            ok = false;
            continue;
        }
        char what[200];
        snprintf(what, sizeof what, "initializer '%.150s'", t->name);
        imp_tensor *tt = tensor(g, t, what);
        int id = imp_value_add(g, t->name, VK_INIT, -1);
        if (!tt || id < 0) {
            ok = false;
            continue;
        }
        imp_value *v = &g->values[id];
        v->dtype = tt->dtype;
        v->known = true;
        v->shape.rank = tt->rank;
        for (int d = 0; d < tt->rank; d++)
            v->shape.d[d] = (imp_dim){tt->dims[d], 0, 0};
        v->elems = tt->elems;
        v->data = tt->data;
        if (g->keep_weights && !keep_bytes(g, t, v, what))
            ok = false;
        g->ninits++;
    }
    g->inputs = arena_alloc(g->a, sizeof *g->inputs * (gp->n_input + 1));
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *vi = gp->input[k];
        if (!vi->name || !*vi->name) {
            imp_error(g, -1, "graph input %zu has no name", k);
            ok = false;
            continue;
        }
        int known = imp_value_find(g, vi->name);
        if (known >= 0 && g->values[known].kind == VK_INIT)
            continue; /* an initializer listed as an input too (IR version 3 and older) */
        int id = imp_value_add(g, vi->name, VK_INPUT, -1);
        if (id < 0 || !input_type(g, vi, &g->values[id])) {
            ok = false;
            continue;
        }
        g->inputs[g->ninputs++] = id;
    }
    g->nodes = arena_alloc(g->a, sizeof *g->nodes * (gp->n_node + 1));
    g->nnodes = (int)gp->n_node;
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        imp_node *n = &g->nodes[k];
        n->name = str(g, np->name);
        n->op = str(g, np->op_type);
        n->group = -1;
        const char *domain = np->domain ? np->domain : "";
        if (*domain && strcmp(domain, "ai.onnx") != 0) {
            imp_error(g, (int)k, "the op is from domain '%s'; burstc import reads ONNX's own ops",
                      domain);
            ok = false;
        }
        n->nin = (int)np->n_input;
        n->nout = (int)np->n_output;
        n->in = arena_alloc(g->a, sizeof *n->in * (np->n_input + 1));
        n->out = arena_alloc(g->a, sizeof *n->out * (np->n_output + 1));
        n->nattrs = (int)np->n_attribute;
        n->attrs = arena_alloc(g->a, sizeof *n->attrs * (np->n_attribute + 1));
        for (size_t j = 0; j < np->n_attribute; j++)
            if (!attribute(g, np->attribute[j], &n->attrs[j], n->name))
                ok = false;
        for (size_t j = 0; j < np->n_output; j++) {
            const char *o = np->output[j];
            if (!o || !*o) {
                n->out[j] = -1;
                continue;
            }
            int id = imp_value_add(g, o, VK_NODE, (int)k);
            if (id < 0) {
                ok = false;
                n->out[j] = -1;
                continue;
            }
            g->values[id].node = (int)k;
            g->values[id].slot = (int)j;
            n->out[j] = id;
        }
    }
    /* Now every name has a value: resolve the inputs. */
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        imp_node *n = &g->nodes[k];
        for (size_t j = 0; j < np->n_input; j++) {
            const char *name = np->input[j];
            if (!name || !*name) {
                n->in[j] = -1;
                continue;
            }
            n->in[j] = imp_value_find(g, name);
            if (n->in[j] < 0) {
                imp_error(g, (int)k,
                          "input %zu, '%s', is no graph input, initializer or output of a node",
                          j + 1, name);
                ok = false;
            }
        }
    }
    g->outputs = arena_alloc(g->a, sizeof *g->outputs * (gp->n_output + 1));
    for (size_t k = 0; k < gp->n_output; k++) {
        const char *name = gp->output[k]->name;
        int id = name ? imp_value_find(g, name) : -1;
        if (id < 0) {
            imp_error(g, -1, "graph output '%s' is made by no node", name ? name : "");
            ok = false;
            continue;
        }
        g->outputs[g->noutputs++] = id;
    }
    if (gp->n_output == 0) {
        imp_error(g, -1, "the graph has no outputs");
        ok = false;
    }
    return ok;
}

/* The model's header: versions and the opset of ONNX's own domain. */
static bool read_model(imp_graph *g, const Onnx__ModelProto *mp)
{
    if (!mp->graph) {
        imp_error(g, -1, "not an ONNX model: it has no graph (is it an ONNX file?)");
        return false;
    }
    if (!mp->has_ir_version) {
        imp_error(g, -1, "not an ONNX model: it has no IR version (is it an ONNX file?)");
        return false;
    }
    g->ir_version = mp->ir_version;
    g->producer = str(g, mp->producer_name);
    g->producer_version = str(g, mp->producer_version);
    g->opset = -1;
    for (size_t k = 0; k < mp->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[k];
        const char *dom = o->domain ? o->domain : "";
        if ((!*dom || strcmp(dom, "ai.onnx") == 0) && o->has_version)
            g->opset = o->version;
    }
    if (g->opset < 0) {
        imp_error(g, -1, "the model imports no opset of ONNX's own domain");
        return false;
    }
    if (g->opset < 7 || g->opset > 20) {
        imp_error(g, -1, "opset %lld: burstc import reads opsets 7 to 20 (tested: 13 to 17)",
                  (long long)g->opset);
        return false;
    }
    if (mp->n_functions > 0) {
        imp_error(g, -1, "the model defines functions, which burstc import does not read");
        return false;
    }
    return read_graph(g, mp->graph);
}

imp_graph *imp_read_onnx(arena *a, const char *path, FILE *err, bool keep_weights)
{
    imp_graph *g = arena_alloc(a, sizeof *g);
    g->a = a;
    g->keep_weights = keep_weights;
    g->path = arena_strdup(a, path);
    g->err = err;
    /* ONNX files are often larger than a source file: the cap is protobuf's
     * own limit on one message. */
    char *buf, why[256];
    size_t len;
    if (!ir_file_read(path, IMP_FILE_MAX, &buf, &len, why, sizeof why)) {
        imp_error(g, -1, "cannot read it: %s", why);
        return NULL;
    }
    if (len == 0) {
        imp_error(g, -1, "the file is empty, not an ONNX model");
        free(buf);
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)buf;
    walk w = {.base = data};
    if (!walk_message(&w, &onnx__model_proto__descriptor, data, data + len, 0)) {
        imp_error(g, -1, "not a valid ONNX model: %s", w.msg);
        free(buf);
        return NULL;
    }
    /* protobuf-c copies strings and byte fields, and a message costs more
	 * than its bytes; anything far beyond that is a file built to exhaust
	 * memory. */
    reader r = {.g = g, .mem = {.limit = 4 * len + ((size_t)256 << 20)}};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &r.mem};
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&alloc, len, data);
    free(buf);
    if (!mp) {
        if (r.mem.exceeded)
            imp_error(g, -1, "decoding it needs more than %zu MiB; is it a real model?",
                      r.mem.limit >> 20);
        else
            imp_error(g, -1, "not a valid ONNX model: protobuf-c cannot decode it");
        return NULL;
    }
    bool ok = read_model(g, mp);
    onnx__model_proto__free_unpacked(mp, &alloc);
    return ok && g->nerrors == 0 ? g : NULL;
}

/* ---- weights back into a model (burstc export --format onnx) ---- */

/* Bytes per element of the ONNX data types a weight can have; 0 for others. */
static size_t weight_elem_size(int32_t dt)
{
    switch (dt) {
    case 1: return 4;  /* FLOAT */
    case 10: return 2; /* FLOAT16 */
    case 16: return 2; /* BFLOAT16 */
    case 11: return 8; /* DOUBLE */
    default: return 0;
    }
}

bool imp_onnx_set_weights(const char *path, const imp_weight *w, int n, unsigned char **out,
                          size_t *out_len, char *err, size_t errlen)
{
    char *buf, why[256];
    size_t len;
    *out = NULL;
    if (!ir_file_read(path, IMP_FILE_MAX, &buf, &len, why, sizeof why)) {
        snprintf(err, errlen, "%s: cannot read it: %s", path, why);
        return false;
    }
    const uint8_t *data = (const uint8_t *)buf;
    walk wk = {.base = data};
    if (len == 0 || !walk_message(&wk, &onnx__model_proto__descriptor, data, data + len, 0)) {
        snprintf(err, errlen, "%s: not a valid ONNX model%s%s", path, len ? ": " : "",
                 len ? wk.msg : "");
        free(buf);
        return false;
    }
    budget mem = {.limit = 4 * len + ((size_t)256 << 20)};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &mem};
    Onnx__ModelProto *mp = onnx__model_proto__unpack(&alloc, len, data);
    free(buf);
    if (!mp || !mp->graph) {
        snprintf(err, errlen, "%s: not a valid ONNX model: protobuf-c cannot decode it", path);
        if (mp)
            onnx__model_proto__free_unpacked(mp, &alloc);
        return false;
    }
    Onnx__GraphProto *g = mp->graph;
    /* The initializers' own fields, put back before protobuf-c frees what it made. */
    typedef struct saved {
        Onnx__TensorProto *t;
        ProtobufCBinaryData raw;
        protobuf_c_boolean has_raw;
        size_t nf, nd;
    } saved;
    saved *keep = calloc((size_t)n + 1, sizeof *keep);
    int nkeep = 0;
    bool ok = keep != NULL;
    if (!ok)
        snprintf(err, errlen, "out of memory");
    for (int i = 0; ok && i < n; i++) {
        Onnx__TensorProto *t = NULL;
        for (size_t k = 0; k < g->n_initializer && !t; k++)
            if (g->initializer[k]->name && !strcmp(g->initializer[k]->name, w[i].name))
                t = g->initializer[k];
        if (!t) {
            snprintf(err, errlen, "%s has no initializer '%s'", path, w[i].name);
            ok = false;
            break;
        }
        size_t es = weight_elem_size(t->data_type), numel = 1;
        for (size_t d = 0; d < t->n_dims; d++)
            numel = t->dims[d] < 0 || (t->dims[d] && numel > SIZE_MAX / 8 / (size_t)t->dims[d])
                        ? SIZE_MAX / 8
                        : numel * (size_t)t->dims[d];
        if (!es || t->n_external_data || numel * es != w[i].bytes) {
            snprintf(err, errlen,
                     "initializer '%s' of %s (data type %d, %zu elements%s) does not take the "
                     "%zu bytes of the trained tensor",
                     w[i].name, path, (int)t->data_type, numel,
                     t->n_external_data ? ", stored outside the file" : "", w[i].bytes);
            ok = false;
            break;
        }
        keep[nkeep++] = (saved){t, t->raw_data, t->has_raw_data, t->n_float_data, t->n_double_data};
        t->raw_data.data = (uint8_t *)w[i].data;
        t->raw_data.len = w[i].bytes;
        t->has_raw_data = 1;
        t->n_float_data = 0;
        t->n_double_data = 0;
    }
    if (ok) {
        *out_len = onnx__model_proto__get_packed_size(mp);
        *out = malloc(*out_len ? *out_len : 1);
        if (!*out) {
            snprintf(err, errlen, "out of memory");
            ok = false;
        } else {
            onnx__model_proto__pack(mp, *out);
        }
    }
    for (int i = 0; i < nkeep; i++) {
        keep[i].t->raw_data = keep[i].raw;
        keep[i].t->has_raw_data = keep[i].has_raw;
        keep[i].t->n_float_data = keep[i].nf;
        keep[i].t->n_double_data = keep[i].nd;
    }
    free(keep);
    onnx__model_proto__free_unpacked(mp, &alloc);
    return ok;
}
