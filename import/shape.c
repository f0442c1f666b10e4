/*
 * shape.c: shape inference over the ONNX graph, with the batch symbolic.
 *
 * Every value gets a static shape whose dimensions are c or c * batch
 * (imp_dim), whatever the export wrote for the batch: a symbolic name or the
 * number it was traced at. Exports compute the shapes of their reshapes with
 * small integer tensors (Shape, Gather, Unsqueeze, Concat, Div, ...), so the
 * contents of every tensor of at most IMP_FOLD_MAX elements are computed
 * too, symbolic batch included; a Reshape whose target depends on something
 * else is a dynamic shape, and an error. A value is an activation when it is
 * computed from a graph input (Shape's output is not: it is metadata).
 *
 * Ops are inferred here if the importer maps them to Burst or needs them
 * inside a pattern (match.c); any other op type is an error naming the node.
 * An error poisons the node's outputs: their users are skipped without a
 * message, so each cause is reported once, and every cause in the file is.
 */
#include "import.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- dimensions ---- */

#define BIG ((int64_t)1 << 62)

bool imp_dim_eq(imp_dim a, imp_dim b)
{
    return a.c == b.c && a.n == b.n;
}

static bool is_one(imp_dim a)
{
    return a.c == 1 && a.n == 0;
}

const char *imp_dim_str(imp_dim d, char *buf, size_t n)
{
    if (d.n == 0)
        snprintf(buf, n, "%lld", (long long)d.c);
    else if (d.c == 1)
        snprintf(buf, n, "N");
    else
        snprintf(buf, n, "%lldN", (long long)d.c);
    return buf;
}

const char *imp_shape_str(const imp_shape *s, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int k = 0; k < s->rank && o < n; k++) {
        char d[32];
        o += (size_t)snprintf(buf + o, n - o, "%s%s", k ? "," : "",
                              imp_dim_str(s->d[k], d, sizeof d));
    }
    if (o < n)
        snprintf(buf + o, n - o, "]");
    return buf;
}

int64_t imp_per_sample(const imp_shape *s)
{
    if (s->rank < 1 || !(s->d[0].c == 1 && s->d[0].n == 1))
        return -1;
    int64_t p = 1;
    for (int k = 1; k < s->rank; k++) {
        if (s->d[k].n != 0 || __builtin_mul_overflow(p, s->d[k].c, &p) || p > IMP_MAX_DIM)
            return -1;
    }
    return p;
}

int64_t imp_elems_checked(const imp_shape *s)
{
    int64_t p = 1;
    for (int k = 0; k < s->rank; k++)
        if (__builtin_mul_overflow(p, s->d[k].c, &p) || p > IMP_MAX_DIM)
            return -1;
    return p;
}

static bool dmul(imp_dim a, imp_dim b, imp_dim *out)
{
    if (a.n + b.n > 1 || __builtin_mul_overflow(a.c, b.c, &out->c) || out->c > BIG || out->c < -BIG)
        return false;
    out->n = a.n + b.n;
    out->in = 0;
    return true;
}

static bool dadd(imp_dim a, imp_dim b, imp_dim *out)
{
    if (a.c == 0)
        a.n = b.n;
    if (b.c == 0)
        b.n = a.n;
    if (a.n != b.n || __builtin_add_overflow(a.c, b.c, &out->c) || out->c > BIG || out->c < -BIG)
        return false;
    out->n = out->c ? a.n : 0;
    return true;
}

/* a / b, truncating like C when both are plain numbers; symbolic only when exact. */
static bool ddiv(imp_dim a, imp_dim b, imp_dim *out)
{
    if (b.c == 0 || (b.c == -1 && a.c == INT64_MIN))
        return false;
    if (b.n == 0) {
        if (a.n && a.c % b.c)
            return false;
        *out = (imp_dim){a.c / b.c, a.n, 0};
        return true;
    }
    if (a.n == 1 && a.c % b.c == 0) {
        *out = (imp_dim){a.c / b.c, 0, 0};
        return true;
    }
    return false;
}

/* The number of elements of s; false if it passes 2^62 or holds the batch twice. */
static bool total(const imp_shape *s, imp_dim *out)
{
    imp_dim t = {1, 0, 0};
    for (int k = 0; k < s->rank; k++)
        if (!dmul(t, s->d[k], &t))
            return false;
    *out = t;
    return true;
}

/* ---- per node ---- */

typedef struct ictx {
    imp_graph *g;
    int k;
    imp_node *n;
} ictx;

static bool fail(ictx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(ictx *c, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    imp_error(c->g, c->k, "%s", msg);
    return false;
}

static imp_value *in(ictx *c, int i)
{
    return i < c->n->nin && c->n->in[i] >= 0 ? &c->g->values[c->n->in[i]] : NULL;
}

static const imp_shape *ish(ictx *c, int i)
{
    return &in(c, i)->shape;
}

static bool is_real_type(int dtype)
{
    return dtype == IMP_FLOAT || dtype == IMP_DOUBLE || dtype == IMP_FLOAT16 ||
           dtype == IMP_BFLOAT16;
}

static imp_data *new_data(ictx *c, int64_t n, bool real)
{
    imp_data *d = arena_alloc(c->g->a, sizeof *d);
    d->n = n;
    d->real = real;
    if (real)
        d->r = arena_alloc(c->g->a, sizeof *d->r * (size_t)(n ? n : 1));
    else
        d->i = arena_alloc(c->g->a, sizeof *d->i * (size_t)(n ? n : 1));
    return d;
}

/* Sets output i; data may be NULL. Checks the dimensions' range. */
static bool set_out(ictx *c, int i, int dtype, const imp_shape *s, imp_data *data)
{
    if (i >= c->n->nout || c->n->out[i] < 0)
        return true;
    for (int k = 0; k < s->rank; k++) {
        imp_dim d = s->d[k];
        if (d.c < 0 || d.c > IMP_MAX_DIM || (d.n && d.c == 0)) {
            char b[256];
            return fail(c, "output %d would have shape %s; dimensions must be 0 to 2^40", i + 1,
                        imp_shape_str(s, b, sizeof b));
        }
    }
    if (imp_elems_checked(s) < 0) {
        char b[256];
        return fail(c, "output %d would have shape %s: more than 2^40 elements (per sample)", i + 1,
                    imp_shape_str(s, b, sizeof b));
    }
    imp_value *v = &c->g->values[c->n->out[i]];
    v->dtype = dtype;
    v->shape = *s;
    v->known = true;
    v->data = data;
    return true;
}

/* The contents of input i as integers (reals are truncated), or NULL. */
static imp_data *ints(ictx *c, int i)
{
    imp_value *v = in(c, i);
    if (!v || !v->data)
        return NULL;
    if (!v->data->real)
        return v->data;
    imp_data *d = new_data(c, v->data->n, false);
    for (int64_t k = 0; k < d->n; k++) {
        double r = v->data->r[k];
        if (!(r > -9.2e18 && r < 9.2e18))
            return NULL;
        d->i[k] = (imp_dim){(int64_t)r, 0, 0};
    }
    return d;
}

/* Reads an axis list from attribute name (older opsets) or input i (newer). */
static bool axes_of(ictx *c, const char *name, int i, int64_t *axes, int *naxes, bool *given)
{
    const imp_attr *a = imp_attr_get(c->n, name);
    *given = false;
    *naxes = 0;
    if (a && a->kind == IA_INTS) {
        if (a->n > IMP_MAX_RANK)
            return fail(c, "attribute '%s' lists %d axes", name, a->n);
        for (int k = 0; k < a->n; k++)
            axes[k] = a->ints[k];
        *naxes = a->n;
        *given = true;
        return true;
    }
    if (in(c, i)) {
        imp_data *d = ints(c, i);
        if (!d)
            return fail(c, "its axes (input %d) are computed at run time; burstc needs them static",
                        i + 1);
        if (d->n > IMP_MAX_RANK)
            return fail(c, "input %d lists %lld axes", i + 1, (long long)d->n);
        for (int64_t k = 0; k < d->n; k++) {
            if (d->i[k].n)
                return fail(c, "an axis depends on the batch");
            axes[k] = d->i[k].c;
        }
        *naxes = (int)d->n;
        *given = true;
    }
    return true;
}

static bool norm_axis(ictx *c, int64_t axis, int rank, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return fail(c, "axis %lld is out of range for %d dimensions", (long long)axis, rank);
    *out = (int)a;
    return true;
}

/* ---- elementwise ---- */

static bool broadcast(ictx *c, const imp_shape *a, const imp_shape *b, imp_shape *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    out->rank = r;
    for (int k = 0; k < r; k++) {
        int ka = k - (r - a->rank), kb = k - (r - b->rank);
        imp_dim da = ka >= 0 ? a->d[ka] : (imp_dim){1, 0, 0};
        imp_dim db = kb >= 0 ? b->d[kb] : (imp_dim){1, 0, 0};
        if (imp_dim_eq(da, db) || is_one(db))
            out->d[k] = da;
        else if (is_one(da))
            out->d[k] = db;
        else {
            char sa[256], sb[256];
            return fail(c, "shapes %s and %s do not broadcast", imp_shape_str(a, sa, sizeof sa),
                        imp_shape_str(b, sb, sizeof sb));
        }
    }
    return true;
}

/* The flat index into s (broadcast to out) of the element at flat index k of out. */
static int64_t bindex(const imp_shape *s, const imp_shape *out, int64_t k)
{
    int64_t idx = 0, stride = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t od = out->d[d].c, pos = k % od;
        k /= od;
        int sd = d - (out->rank - s->rank);
        if (sd >= 0) {
            if (s->d[sd].c != 1)
                idx += pos * stride;
            stride *= s->d[sd].c;
        }
    }
    return idx;
}

static bool concrete(const imp_shape *s, int64_t *count)
{
    imp_dim t;
    if (!total(s, &t) || t.n || t.c > IMP_FOLD_MAX)
        return false;
    *count = t.c;
    return true;
}

/* Folds a binary or ternary op over inputs with known contents. */
static imp_data *fold_elementwise(ictx *c, const imp_shape *out, bool real_out)
{
    int64_t count;
    if (!concrete(out, &count))
        return NULL;
    int nin = c->n->nin;
    for (int i = 0; i < nin; i++)
        if (!in(c, i) || !in(c, i)->data)
            return NULL;
    const char *op = c->n->op;
    imp_data *d = new_data(c, count, real_out);
    for (int64_t k = 0; k < count; k++) {
        imp_data *a = in(c, 0)->data, *b = nin > 1 ? in(c, 1)->data : NULL;
        int64_t ia = bindex(ish(c, 0), out, k), ib = nin > 1 ? bindex(ish(c, 1), out, k) : 0;
        if (strcmp(op, "Where") == 0) {
            imp_data *x = in(c, 1)->data, *y = in(c, 2)->data;
            int64_t ix = bindex(ish(c, 1), out, k), iy = bindex(ish(c, 2), out, k);
            bool cond = a->real ? a->r[ia] != 0 : a->i[ia].c != 0;
            imp_data *src = cond ? x : y;
            int64_t is = cond ? ix : iy;
            if (src->real != real_out)
                return NULL;
            if (real_out)
                d->r[k] = src->r[is];
            else
                d->i[k] = src->i[is];
            continue;
        }
        if (a->real || (b && b->real)) {
            double x = a->real ? a->r[ia] : (double)a->i[ia].c;
            double y = b ? (b->real ? b->r[ib] : (double)b->i[ib].c) : 0;
            if ((!a->real && a->i[ia].n) || (b && !b->real && b->i[ib].n))
                return NULL;
            double r = strcmp(op, "Add") == 0       ? x + y
                       : strcmp(op, "Sub") == 0     ? x - y
                       : strcmp(op, "Mul") == 0     ? x * y
                       : strcmp(op, "Div") == 0     ? x / y
                       : strcmp(op, "Pow") == 0     ? pow(x, y)
                       : strcmp(op, "Equal") == 0   ? (double)(x == y)
                       : strcmp(op, "Less") == 0    ? (double)(x < y)
                       : strcmp(op, "Greater") == 0 ? (double)(x > y)
                                                    : NAN;
            if (real_out)
                d->r[k] = r;
            else
                d->i[k] = (imp_dim){(int64_t)r, 0, 0};
            continue;
        }
        imp_dim x = a->i[ia], y = b ? b->i[ib] : (imp_dim){0, 0, 0}, r = {0, 0, 0};
        bool ok = true;
        if (strcmp(op, "Add") == 0)
            ok = dadd(x, y, &r);
        else if (strcmp(op, "Sub") == 0)
            ok = dadd(x, (imp_dim){-y.c, y.n, 0}, &r);
        else if (strcmp(op, "Mul") == 0)
            ok = dmul(x, y, &r);
        else if (strcmp(op, "Div") == 0)
            ok = ddiv(x, y, &r);
        else if (strcmp(op, "Equal") == 0)
            r.c = imp_dim_eq(x, y);
        else if (strcmp(op, "Less") == 0 && !x.n && !y.n)
            r.c = x.c < y.c;
        else if (strcmp(op, "Greater") == 0 && !x.n && !y.n)
            r.c = x.c > y.c;
        else
            ok = false;
        if (!ok)
            return NULL;
        if (real_out)
            d->r[k] = (double)r.c;
        else
            d->i[k] = r;
    }
    return d;
}

static bool infer_binary(ictx *c)
{
    imp_shape s;
    if (!broadcast(c, ish(c, 0), ish(c, 1), &s))
        return false;
    const char *op = c->n->op;
    bool cmp = strcmp(op, "Equal") == 0 || strcmp(op, "Less") == 0 || strcmp(op, "Greater") == 0;
    int dtype = cmp ? IMP_BOOL : in(c, 0)->dtype;
    return set_out(c, 0, dtype, &s, fold_elementwise(c, &s, is_real_type(dtype)));
}

static bool infer_where(ictx *c)
{
    imp_shape s1, s;
    if (!broadcast(c, ish(c, 0), ish(c, 1), &s1) || !broadcast(c, &s1, ish(c, 2), &s))
        return false;
    int dtype = in(c, 1)->dtype;
    return set_out(c, 0, dtype, &s, fold_elementwise(c, &s, is_real_type(dtype)));
}

static bool infer_unary(ictx *c)
{
    imp_value *x = in(c, 0);
    const char *op = c->n->op;
    int dtype = x->dtype;
    if (strcmp(op, "Cast") == 0)
        dtype = (int)imp_attr_int(c->n, "to", x->dtype);
    imp_data *d = NULL;
    if (x->data) {
        bool real = is_real_type(dtype);
        d = new_data(c, x->data->n, real);
        for (int64_t k = 0; k < d->n && d; k++) {
            double r = x->data->real ? x->data->r[k] : (double)x->data->i[k].c;
            imp_dim i = x->data->real ? (imp_dim){(int64_t)r, 0, 0} : x->data->i[k];
            if (x->data->real && !(r > -9.2e18 && r < 9.2e18))
                i = (imp_dim){0, 0, 0};
            if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0) {
                if (real && !x->data->real && i.n)
                    d = NULL;
                else if (real)
                    d->r[k] = r;
                else
                    d->i[k] = dtype == IMP_BOOL ? (imp_dim){r != 0, 0, 0} : i;
            } else if (strcmp(op, "Neg") == 0) {
                if (real)
                    d->r[k] = -r;
                else
                    d->i[k] = (imp_dim){-i.c, i.n, 0};
            } else if (strcmp(op, "Sqrt") == 0 && real) {
                d->r[k] = sqrt(r);
            } else if (strcmp(op, "Reciprocal") == 0 && real) {
                d->r[k] = 1 / r;
            } else if (strcmp(op, "Not") == 0 && !real) {
                d->i[k] = (imp_dim){i.c == 0, 0, 0};
            } else {
                d = NULL;
            }
        }
    }
    if (!set_out(c, 0, dtype, &x->shape, d))
        return false;
    /* Dropout's mask. */
    return set_out(c, 1, IMP_BOOL, &x->shape, NULL);
}

/* ---- layers ---- */

/* Spatial output sizes of Conv and the pools. */
static bool window(ictx *c, const imp_shape *x, const int64_t *kernel, int nsp, imp_shape *out)
{
    const imp_attr *st = imp_attr_get(c->n, "strides"), *pd = imp_attr_get(c->n, "pads"),
                   *dl = imp_attr_get(c->n, "dilations"), *ap = imp_attr_get(c->n, "auto_pad");
    const char *auto_pad = ap && ap->kind == IA_STRING ? ap->s : "NOTSET";
    bool ceil_mode = imp_attr_int(c->n, "ceil_mode", 0) != 0;
    if ((st && (st->kind != IA_INTS || st->n != nsp)) ||
        (dl && (dl->kind != IA_INTS || dl->n != nsp)) ||
        (pd && (pd->kind != IA_INTS || pd->n != 2 * nsp)))
        return fail(c, "strides, dilations and pads must list %d, %d and %d numbers", nsp, nsp,
                    2 * nsp);
    for (int k = 0; k < nsp; k++) {
        imp_dim in_d = x->d[2 + k];
        if (in_d.n)
            return fail(c, "a spatial dimension depends on the batch");
        int64_t s = st ? st->ints[k] : 1, d = dl ? dl->ints[k] : 1;
        int64_t p0 = pd ? pd->ints[k] : 0, p1 = pd ? pd->ints[k + nsp] : 0;
        if (s < 1 || s > IMP_MAX_DIM || d < 1 || d > IMP_MAX_DIM || kernel[k] < 1 ||
            kernel[k] > IMP_MAX_DIM || p0 < 0 || p1 < 0 || p0 > IMP_MAX_DIM || p1 > IMP_MAX_DIM)
            return fail(c, "kernel, strides, dilations must be positive and pads not negative");
        int64_t span = d * (kernel[k] - 1) + 1, o;
        if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
            o = (in_d.c + s - 1) / s;
        } else if (strcmp(auto_pad, "VALID") == 0) {
            if (in_d.c < span)
                return fail(c, "the window does not fit the input");
            o = (in_d.c - span) / s + 1;
        } else if (strcmp(auto_pad, "NOTSET") == 0) {
            int64_t num = in_d.c + p0 + p1 - span;
            if (num < 0)
                return fail(c, "a window of %lld does not fit %lld (pads %lld, %lld)",
                            (long long)span, (long long)in_d.c, (long long)p0, (long long)p1);
            o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
            if (ceil_mode && (o - 1) * s >= in_d.c + p0)
                o--;
        } else {
            return fail(c, "auto_pad '%s' is not an ONNX setting", auto_pad);
        }
        out->d[2 + k] = (imp_dim){o, 0, 0};
    }
    return true;
}

static bool infer_conv(ictx *c)
{
    const imp_shape *x = ish(c, 0), *w = ish(c, 1);
    if (x->rank < 3 || w->rank != x->rank)
        return fail(c, "expected an input [N,C,...] and weights of the same rank");
    int64_t group = imp_attr_int(c->n, "group", 1);
    if (group < 1 || w->d[1].n || x->d[1].n || w->d[1].c * group != x->d[1].c)
        return fail(c, "the weights expect %lld input channels in %lld groups; the input has %lld",
                    (long long)w->d[1].c, (long long)group, (long long)x->d[1].c);
    int nsp = x->rank - 2;
    int64_t kernel[IMP_MAX_RANK];
    const imp_attr *ks = imp_attr_get(c->n, "kernel_shape");
    for (int k = 0; k < nsp; k++) {
        kernel[k] = w->d[2 + k].c;
        if (ks && ks->kind == IA_INTS && (ks->n != nsp || ks->ints[k] != kernel[k]))
            return fail(c, "kernel_shape disagrees with the weights");
    }
    imp_shape out = *x;
    out.d[1] = w->d[0];
    if (!window(c, x, kernel, nsp, &out))
        return false;
    if (in(c, 2) && (ish(c, 2)->rank != 1 || !imp_dim_eq(ish(c, 2)->d[0], w->d[0])))
        return fail(c, "the bias must be a vector of the output channels");
    return set_out(c, 0, in(c, 0)->dtype, &out, NULL);
}

static bool infer_pool(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    if (x->rank < 3)
        return fail(c, "expected an input [N,C,...]");
    int nsp = x->rank - 2;
    const imp_attr *ks = imp_attr_get(c->n, "kernel_shape");
    if (!ks || ks->kind != IA_INTS || ks->n != nsp)
        return fail(c, "kernel_shape must list %d numbers", nsp);
    imp_shape out = *x;
    if (!window(c, x, ks->ints, nsp, &out))
        return false;
    if (!set_out(c, 0, in(c, 0)->dtype, &out, NULL))
        return false;
    return set_out(c, 1, IMP_INT64, &out, NULL); /* MaxPool's indices */
}

static bool infer_global_pool(ictx *c)
{
    imp_shape out = *ish(c, 0);
    if (out.rank < 3)
        return fail(c, "expected an input [N,C,...]");
    for (int k = 2; k < out.rank; k++)
        out.d[k] = (imp_dim){1, 0, 0};
    return set_out(c, 0, in(c, 0)->dtype, &out, NULL);
}

static bool infer_batchnorm(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    if (x->rank < 2)
        return fail(c, "expected an input [N,C,...]");
    for (int i = 1; i < 5; i++)
        if (!in(c, i) || ish(c, i)->rank != 1 || !imp_dim_eq(ish(c, i)->d[0], x->d[1]))
            return fail(c, "scale, bias, mean and variance must be vectors of the %lld channels",
                        (long long)x->d[1].c);
    if (!set_out(c, 0, in(c, 0)->dtype, x, NULL))
        return false;
    for (int i = 1; i < c->n->nout; i++)
        if (!set_out(c, i, in(c, 0)->dtype, ish(c, 1), NULL))
            return false;
    return true;
}

static bool infer_layernorm(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int axis = 0;
    if (!norm_axis(c, imp_attr_int(c->n, "axis", -1), x->rank, &axis))
        return false;
    if (!set_out(c, 0, in(c, 0)->dtype, x, NULL))
        return false;
    imp_shape stat = *x;
    for (int k = axis; k < stat.rank; k++)
        stat.d[k] = (imp_dim){1, 0, 0};
    return set_out(c, 1, IMP_FLOAT, &stat, NULL) && set_out(c, 2, IMP_FLOAT, &stat, NULL);
}

static bool infer_gemm(ictx *c)
{
    const imp_shape *a = ish(c, 0), *b = ish(c, 1);
    if (a->rank != 2 || b->rank != 2)
        return fail(c, "expected two matrices");
    bool ta = imp_attr_int(c->n, "transA", 0), tb = imp_attr_int(c->n, "transB", 0);
    imp_dim m = a->d[ta ? 1 : 0], ka = a->d[ta ? 0 : 1], kb = b->d[tb ? 1 : 0],
            n = b->d[tb ? 0 : 1];
    if (!imp_dim_eq(ka, kb))
        return fail(c, "inner dimensions differ");
    imp_shape out = {2, {m, n}};
    return set_out(c, 0, in(c, 0)->dtype, &out, NULL);
}

static bool infer_matmul(ictx *c)
{
    imp_shape a = *ish(c, 0), b = *ish(c, 1);
    if (a.rank < 1 || b.rank < 1)
        return fail(c, "scalars cannot be multiplied as matrices");
    bool va = a.rank == 1, vb = b.rank == 1;
    if (va) {
        a.rank = 2;
        a.d[1] = a.d[0];
        a.d[0] = (imp_dim){1, 0, 0};
    }
    if (vb) {
        b.rank = 2;
        b.d[1] = (imp_dim){1, 0, 0};
    }
    if (!imp_dim_eq(a.d[a.rank - 1], b.d[b.rank - 2])) {
        char sa[256], sb[256];
        return fail(c, "inner dimensions differ: %s and %s", imp_shape_str(&a, sa, sizeof sa),
                    imp_shape_str(&b, sb, sizeof sb));
    }
    imp_shape ba = {a.rank - 2, {{0}}}, bb = {b.rank - 2, {{0}}}, out;
    memcpy(ba.d, a.d, sizeof *a.d * (size_t)ba.rank);
    memcpy(bb.d, b.d, sizeof *b.d * (size_t)bb.rank);
    if (!broadcast(c, &ba, &bb, &out))
        return false;
    if (!va)
        out.d[out.rank++] = a.d[a.rank - 2];
    if (!vb)
        out.d[out.rank++] = b.d[b.rank - 1];
    if (out.rank > IMP_MAX_RANK)
        return fail(c, "too many dimensions");
    return set_out(c, 0, in(c, 0)->dtype, &out, NULL);
}

/* ---- shapes and data movement ---- */

static bool infer_flatten(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int64_t axis = imp_attr_int(c->n, "axis", 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return fail(c, "axis %lld is out of range", (long long)imp_attr_int(c->n, "axis", 1));
    imp_shape out = {2, {{1, 0, 0}, {1, 0, 0}}};
    for (int k = 0; k < x->rank; k++)
        if (!dmul(out.d[k < axis ? 0 : 1], x->d[k], &out.d[k < axis ? 0 : 1]))
            return fail(c, "the result is too large");
    return set_out(c, 0, in(c, 0)->dtype, &out, in(c, 0)->data);
}

/* An export traced at batch b writes b where the batch goes: the first
 * dimension of a target shape that equals b is the batch. */
static bool batch_literal(const imp_graph *g, imp_shape *out, int infer_at)
{
    if (g->batch_export <= 0 || out->rank < 1 || infer_at == 0 || out->d[0].n ||
        out->d[0].c != g->batch_export)
        return false;
    out->d[0] = (imp_dim){1, 1, 0};
    return true;
}

/* An export traced at batch b writes the batch into the targets of reshapes that merge it with
 * other axes as numbers (nn.MultiheadAttention's [T, b*heads, D/heads] and [T*b, D]). With the
 * input's dimensions made numbers too, the batch is the factor b that starts after the
 * product A of the factors before it: it lands in the first target dimension j whose
 * preceding product divides A and whose product through j is a multiple of A*b, and there
 * it is batch x (t_j / b), with the part after it in that dimension. False when no target
 * dimension holds it whole. */
static bool batch_placed(const imp_graph *g, const imp_shape *x, imp_shape *out)
{
    const int64_t b = g->batch_export;
    if (b < 2)
        return false;
    int64_t before = 1;
    bool seen = false;
    for (int k = 0; k < x->rank && !seen; k++) {
        int64_t f = x->d[k].c;
        if (x->d[k].n) {
            int64_t in = x->d[k].in > 0 && f % x->d[k].in == 0 ? x->d[k].in : f;
            f /= in;
            seen = true;
        }
        if (__builtin_mul_overflow(before, f, &before) || before > BIG)
            return false;
    }
    int64_t ab, prev = 1, upto = 1;
    if (!seen || __builtin_mul_overflow(before, b, &ab))
        return false;
    for (int j = 0; j < out->rank; j++) {
        int64_t t = out->d[j].c;
        if (t < 0 || __builtin_mul_overflow(upto, t, &upto) || upto > BIG)
            return false;
        if (t > 1 && before % prev == 0 && upto % ab == 0) {
            out->d[j] = (imp_dim){t / b, 1, upto / ab};
            return true;
        }
        prev = upto;
    }
    return false;
}

static bool infer_reshape(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    imp_data *t = ints(c, 1);
    if (!t)
        return fail(c, "its target shape is computed at run time; burstc needs static shapes "
                       "(export with fixed input sizes)");
    if (t->n > IMP_MAX_RANK)
        return fail(c, "the target shape has %lld dimensions", (long long)t->n);
    bool allowzero = imp_attr_int(c->n, "allowzero", 0) != 0;
    imp_dim all;
    if (!total(x, &all))
        return fail(c, "the input is too large");
    imp_shape out = {(int)t->n, {{0}}};
    int infer_at = -1;
    bool has_batch = false;
    for (int k = 0; k < out.rank; k++) {
        imp_dim v = t->i[k];
        if (v.n == 0 && v.c == 0 && !allowzero) {
            if (k >= x->rank)
                return fail(c, "a 0 in the target copies dimension %d, which the input lacks", k);
            v = x->d[k];
        } else if (v.n == 0 && v.c == -1) {
            if (infer_at >= 0)
                return fail(c, "the target shape has two -1s");
            infer_at = k;
            continue;
        } else if (v.c < 0) {
            return fail(c, "dimension %lld in the target shape", (long long)v.c);
        }
        out.d[k] = v;
        has_batch |= v.n != 0;
    }
    if (all.n && !has_batch && !batch_literal(c->g, &out, infer_at) && infer_at < 0)
        batch_placed(c->g, x, &out);
    imp_dim known = {1, 0, 0};
    for (int k = 0; k < out.rank; k++)
        if (k != infer_at && !dmul(known, out.d[k], &known))
            return fail(c, "the target shape is too large");
    char sx[256], st[256];
    if (infer_at >= 0) {
        imp_dim q;
        if (known.c == 0 || !ddiv(all, known, &q) || known.c * q.c != all.c)
            return fail(c, "cannot reshape %s with a -1 in the target",
                        imp_shape_str(x, sx, sizeof sx));
        out.d[infer_at] = q;
    } else if (!imp_dim_eq(known, all)) {
        for (int k = 0; k < out.rank; k++)
            out.d[k] = t->i[k];
        return fail(c, "cannot reshape %s to %s", imp_shape_str(x, sx, sizeof sx),
                    imp_shape_str(&out, st, sizeof st));
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, in(c, 0)->data);
}

static bool infer_transpose(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    const imp_attr *p = imp_attr_get(c->n, "perm");
    int perm[IMP_MAX_RANK];
    bool used[IMP_MAX_RANK] = {0};
    if (p && (p->kind != IA_INTS || p->n != x->rank))
        return fail(c, "perm must list %d axes", x->rank);
    for (int k = 0; k < x->rank; k++) {
        int64_t a = p ? p->ints[k] : x->rank - 1 - k;
        if (a < 0 || a >= x->rank || used[a])
            return fail(c, "perm is not a permutation of the %d axes", x->rank);
        used[a] = true;
        perm[k] = (int)a;
    }
    imp_shape out = {x->rank, {{0}}};
    for (int k = 0; k < x->rank; k++)
        out.d[k] = x->d[perm[k]];
    imp_data *d = NULL, *src = in(c, 0)->data;
    int64_t count;
    if (src && concrete(x, &count)) {
        d = new_data(c, count, src->real);
        for (int64_t k = 0; k < count; k++) {
            /* k indexes out; find the source index. */
            int64_t rem = k, idx[IMP_MAX_RANK] = {0}, sidx = 0;
            for (int a = out.rank - 1; a >= 0; a--) {
                idx[perm[a]] = rem % out.d[a].c;
                rem /= out.d[a].c;
            }
            for (int a = 0; a < x->rank; a++)
                sidx = sidx * x->d[a].c + idx[a];
            if (src->real)
                d->r[k] = src->r[sidx];
            else
                d->i[k] = src->i[sidx];
        }
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, d);
}

static bool infer_concat(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int axis = 0;
    if (!norm_axis(c, imp_attr_int(c->n, "axis", 0), x->rank, &axis))
        return false;
    imp_shape out = *x;
    bool fold = true;
    for (int i = 1; i < c->n->nin; i++) {
        const imp_shape *y = ish(c, i);
        bool ok = y->rank == x->rank;
        for (int k = 0; ok && k < x->rank; k++)
            ok = k == axis || imp_dim_eq(y->d[k], x->d[k]);
        if (!ok) {
            char sa[256], sb[256];
            return fail(c, "input %d is %s, input 1 is %s: they may differ only on axis %d", i + 1,
                        imp_shape_str(y, sb, sizeof sb), imp_shape_str(x, sa, sizeof sa), axis);
        }
        if (!dadd(out.d[axis], y->d[axis], &out.d[axis]))
            return fail(c, "the result is too large");
    }
    int64_t count;
    for (int i = 0; i < c->n->nin; i++)
        fold &= in(c, i)->data != NULL;
    for (int i = 0; fold && i < c->n->nin; i++)
        fold &= in(c, i)->data->real == in(c, 0)->data->real;
    imp_data *d = NULL;
    if (fold && concrete(&out, &count)) {
        d = new_data(c, count, in(c, 0)->data->real);
        int64_t outer = 1, o = 0;
        for (int k = 0; k < axis; k++)
            outer *= out.d[k].c;
        for (int64_t b = 0; b < outer; b++)
            for (int i = 0; i < c->n->nin; i++) {
                imp_data *s = in(c, i)->data;
                int64_t chunk = outer ? s->n / outer : 0;
                for (int64_t e = 0; e < chunk; e++, o++) {
                    if (d->real)
                        d->r[o] = s->r[b * chunk + e];
                    else
                        d->i[o] = s->i[b * chunk + e];
                }
            }
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, d);
}

static bool infer_split(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int axis = 0;
    if (!norm_axis(c, imp_attr_int(c->n, "axis", 0), x->rank, &axis))
        return false;
    if (x->d[axis].n)
        return fail(c, "it splits the batch");
    int64_t sizes[IMP_FOLD_MAX];
    int nout = c->n->nout;
    if (nout > IMP_FOLD_MAX)
        return fail(c, "too many outputs");
    const imp_attr *sa = imp_attr_get(c->n, "split");
    imp_data *sd = in(c, 1) ? ints(c, 1) : NULL;
    if (in(c, 1) && !sd)
        return fail(c, "its split sizes are computed at run time");
    int64_t sum = 0;
    for (int k = 0; k < nout; k++) {
        if (sd && sd->n == nout && !sd->i[k].n)
            sizes[k] = sd->i[k].c;
        else if (sa && sa->kind == IA_INTS && sa->n == nout)
            sizes[k] = sa->ints[k];
        else if (!sd && !sa)
            sizes[k] = (x->d[axis].c + nout - 1) / nout; /* the last part may be smaller */
        else
            return fail(c, "its split sizes do not match its %d outputs", nout);
        if (!sd && !sa && k == nout - 1)
            sizes[k] = x->d[axis].c - sum;
        if (sizes[k] < 0 || sizes[k] > IMP_MAX_DIM)
            return fail(c, "split size %lld", (long long)sizes[k]);
        sum += sizes[k];
    }
    if (sum != x->d[axis].c)
        return fail(c, "split sizes add up to %lld, the axis has %lld", (long long)sum,
                    (long long)x->d[axis].c);
    for (int k = 0; k < nout; k++) {
        imp_shape out = *x;
        out.d[axis] = (imp_dim){sizes[k], 0, 0};
        if (!set_out(c, k, in(c, 0)->dtype, &out, NULL))
            return false;
    }
    return true;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static bool infer_slice(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int64_t starts[IMP_MAX_RANK], ends[IMP_MAX_RANK], axes[IMP_MAX_RANK], steps[IMP_MAX_RANK];
    imp_dim ends_sym[IMP_MAX_RANK];
    int n = 0;
    if (c->g->opset < 10) {
        const imp_attr *s = imp_attr_get(c->n, "starts"), *e = imp_attr_get(c->n, "ends"),
                       *a = imp_attr_get(c->n, "axes");
        if (!s || !e || s->kind != IA_INTS || e->kind != IA_INTS || s->n != e->n ||
            s->n > IMP_MAX_RANK)
            return fail(c, "starts and ends must list the same number of axes");
        n = s->n;
        for (int k = 0; k < n; k++) {
            starts[k] = s->ints[k];
            ends[k] = e->ints[k];
            ends_sym[k] = (imp_dim){ends[k], 0, 0};
            axes[k] = a && a->kind == IA_INTS && a->n == n ? a->ints[k] : k;
            steps[k] = 1;
        }
    } else {
        if (!in(c, 1) || !in(c, 2))
            return fail(c, "starts and ends are missing");
        imp_data *s = ints(c, 1), *e = ints(c, 2), *a = in(c, 3) ? ints(c, 3) : NULL,
                 *st = in(c, 4) ? ints(c, 4) : NULL;
        if (!s || !e || (in(c, 3) && !a) || (in(c, 4) && !st))
            return fail(c, "its starts, ends, axes or steps are computed at run time");
        if (s->n != e->n || s->n > IMP_MAX_RANK || (a && a->n != s->n) || (st && st->n != s->n))
            return fail(c, "starts, ends, axes and steps must list the same number of axes");
        n = (int)s->n;
        for (int k = 0; k < n; k++) {
            if (s->i[k].n || (a && a->i[k].n) || (st && st->i[k].n))
                return fail(c, "a start, axis or step depends on the batch");
            starts[k] = s->i[k].c;
            ends[k] = e->i[k].c;
            ends_sym[k] = e->i[k];
            axes[k] = a ? a->i[k].c : k;
            steps[k] = st ? st->i[k].c : 1;
        }
    }
    imp_shape out = *x;
    int64_t first[IMP_MAX_RANK] = {0}, step_of[IMP_MAX_RANK];
    for (int k = 0; k < x->rank; k++)
        step_of[k] = 1;
    for (int k = 0; k < n; k++) {
        int ax = 0;
        if (!norm_axis(c, axes[k], x->rank, &ax))
            return false;
        imp_dim dim = x->d[ax];
        if (steps[k] == 0)
            return fail(c, "a step of 0");
        if (ends_sym[k].n && !dim.n)
            return fail(c, "an end depends on the batch");
        if (dim.n) {
            /* The batch may only be kept whole. */
            if (starts[k] != 0 || steps[k] != 1 ||
                !(imp_dim_eq(ends_sym[k], dim) || (ends_sym[k].n == 0 && ends_sym[k].c >= BIG / 4)))
                return fail(c, "it slices the batch");
            continue;
        }
        int64_t d = dim.c, s = starts[k], e = ends[k], st = steps[k];
        if (s < 0)
            s += d;
        if (e < 0)
            e += d;
        int64_t len;
        if (st > 0) {
            s = clamp(s, 0, d);
            e = clamp(e, 0, d);
            len = e > s ? (e - s + st - 1) / st : 0;
        } else {
            s = clamp(s, -1, d - 1);
            e = clamp(e, -1, d - 1);
            len = s > e ? (s - e + (-st) - 1) / (-st) : 0;
        }
        out.d[ax] = (imp_dim){len, 0, 0};
        first[ax] = s;
        step_of[ax] = st;
    }
    imp_data *d = NULL, *src = in(c, 0)->data;
    int64_t count;
    if (src && concrete(&out, &count)) {
        d = new_data(c, count, src->real);
        for (int64_t k = 0; k < count; k++) {
            int64_t rem = k, sidx = 0, idx[IMP_MAX_RANK];
            for (int a = out.rank - 1; a >= 0; a--) {
                idx[a] = first[a] + (rem % out.d[a].c) * step_of[a];
                rem /= out.d[a].c;
            }
            for (int a = 0; a < x->rank; a++)
                sidx = sidx * x->d[a].c + idx[a];
            if (src->real)
                d->r[k] = src->r[sidx];
            else
                d->i[k] = src->i[sidx];
        }
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, d);
}

static bool infer_squeeze(ictx *c, bool un)
{
    const imp_shape *x = ish(c, 0);
    int64_t axes[IMP_MAX_RANK];
    int naxes;
    bool given;
    if (!axes_of(c, "axes", 1, axes, &naxes, &given))
        return false;
    imp_shape out = {0, {{0}}};
    if (un) {
        if (!given)
            return fail(c, "it names no axes");
        int rank = x->rank + naxes;
        if (rank > IMP_MAX_RANK)
            return fail(c, "the result would have %d dimensions", rank);
        bool at[IMP_MAX_RANK] = {0};
        for (int k = 0; k < naxes; k++) {
            int a = 0;
            if (!norm_axis(c, axes[k], rank, &a))
                return false;
            if (at[a])
                return fail(c, "axis %lld is named twice", (long long)axes[k]);
            at[a] = true;
        }
        out.rank = rank;
        for (int k = 0, j = 0; k < rank; k++)
            out.d[k] = at[k] ? (imp_dim){1, 0, 0} : x->d[j++];
    } else {
        bool drop[IMP_MAX_RANK] = {0};
        for (int k = 0; k < naxes; k++) {
            int a = 0;
            if (!norm_axis(c, axes[k], x->rank, &a))
                return false;
            if (!is_one(x->d[a]))
                return fail(c, "axis %d is not of size 1", a);
            drop[a] = true;
        }
        for (int k = 0; k < x->rank; k++)
            if (!(given ? drop[k] : is_one(x->d[k])))
                out.d[out.rank++] = x->d[k];
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, in(c, 0)->data);
}

static bool infer_gather(ictx *c)
{
    const imp_shape *x = ish(c, 0), *ix = ish(c, 1);
    int axis = 0;
    if (!norm_axis(c, imp_attr_int(c->n, "axis", 0), x->rank, &axis))
        return false;
    if (x->rank - 1 + ix->rank > IMP_MAX_RANK)
        return fail(c, "the result would have too many dimensions");
    imp_shape out = {0, {{0}}};
    for (int k = 0; k < axis; k++)
        out.d[out.rank++] = x->d[k];
    for (int k = 0; k < ix->rank; k++)
        out.d[out.rank++] = ix->d[k];
    for (int k = axis + 1; k < x->rank; k++)
        out.d[out.rank++] = x->d[k];
    imp_data *d = NULL, *src = in(c, 0)->data, *idx = ints(c, 1);
    int64_t count;
    if (src && idx && concrete(&out, &count) && !x->d[axis].n) {
        d = new_data(c, count, src->real);
        int64_t outer = 1, inner = 1, nidx = idx->n, dim = x->d[axis].c;
        for (int k = 0; k < axis; k++)
            outer *= x->d[k].c;
        for (int k = axis + 1; k < x->rank; k++)
            inner *= x->d[k].c;
        int64_t o = 0;
        for (int64_t b = 0; b < outer; b++)
            for (int64_t i = 0; i < nidx; i++) {
                int64_t j = idx->i[i].c < 0 ? idx->i[i].c + dim : idx->i[i].c;
                if (idx->i[i].n || j < 0 || j >= dim)
                    return fail(c, "index %lld is out of range for %lld", (long long)idx->i[i].c,
                                (long long)dim);
                for (int64_t e = 0; e < inner; e++, o++) {
                    int64_t s = (b * dim + j) * inner + e;
                    if (src->real)
                        d->r[o] = src->r[s];
                    else
                        d->i[o] = src->i[s];
                }
            }
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, d);
}

static bool infer_shape_op(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int64_t start = imp_attr_int(c->n, "start", 0), end = imp_attr_int(c->n, "end", x->rank);
    if (start < 0)
        start += x->rank;
    if (end < 0)
        end += x->rank;
    start = clamp(start, 0, x->rank);
    end = clamp(end, start, x->rank);
    imp_data *d = new_data(c, end - start, false);
    for (int64_t k = start; k < end; k++)
        d->i[k - start] = x->d[k];
    imp_shape out = {1, {{end - start, 0, 0}}};
    return set_out(c, 0, IMP_INT64, &out, d);
}

static bool infer_constant(ictx *c)
{
    const imp_attr *a = c->n->nattrs == 1 ? &c->n->attrs[0] : NULL;
    if (!a)
        return fail(c, "a Constant must have exactly one attribute");
    imp_shape s = {0, {{0}}};
    if (strcmp(a->name, "value") == 0 && a->kind == IA_TENSOR) {
        s.rank = a->t->rank;
        for (int k = 0; k < s.rank; k++)
            s.d[k] = (imp_dim){a->t->dims[k], 0, 0};
        return set_out(c, 0, a->t->dtype, &s, a->t->data);
    }
    if ((strcmp(a->name, "value_int") == 0 && a->kind == IA_INT) ||
        (strcmp(a->name, "value_float") == 0 && a->kind == IA_FLOAT)) {
        bool real = a->kind == IA_FLOAT;
        imp_data *d = new_data(c, 1, real);
        if (real)
            d->r[0] = a->f;
        else
            d->i[0] = (imp_dim){a->i, 0, 0};
        return set_out(c, 0, real ? IMP_FLOAT : IMP_INT64, &s, d);
    }
    if ((strcmp(a->name, "value_ints") == 0 && a->kind == IA_INTS) ||
        (strcmp(a->name, "value_floats") == 0 && a->kind == IA_FLOATS)) {
        bool real = a->kind == IA_FLOATS;
        imp_data *d = new_data(c, a->n, real);
        for (int k = 0; k < a->n; k++) {
            if (real)
                d->r[k] = a->floats[k];
            else
                d->i[k] = (imp_dim){a->ints[k], 0, 0};
        }
        s.rank = 1;
        s.d[0] = (imp_dim){a->n, 0, 0};
        return set_out(c, 0, real ? IMP_FLOAT : IMP_INT64, &s, d);
    }
    return fail(c, "attribute '%s' of a Constant is not read by burstc import", a->name);
}

static bool infer_constant_of_shape(ictx *c)
{
    imp_data *t = ints(c, 0);
    if (!t)
        return fail(c, "its shape is computed at run time");
    if (t->n > IMP_MAX_RANK)
        return fail(c, "the shape has %lld dimensions", (long long)t->n);
    imp_shape s = {(int)t->n, {{0}}};
    for (int k = 0; k < s.rank; k++)
        s.d[k] = t->i[k];
    const imp_attr *v = imp_attr_get(c->n, "value");
    int dtype = v && v->kind == IA_TENSOR ? v->t->dtype : IMP_FLOAT;
    imp_data *fill = v && v->kind == IA_TENSOR ? v->t->data : NULL;
    imp_data *d = NULL;
    int64_t count;
    if (concrete(&s, &count)) {
        bool real = is_real_type(dtype);
        d = new_data(c, count, real);
        for (int64_t k = 0; k < count; k++) {
            if (real)
                d->r[k] = fill && fill->n ? fill->r[0] : 0;
            else
                d->i[k] = fill && fill->n ? fill->i[0] : (imp_dim){0, 0, 0};
        }
    }
    return set_out(c, 0, dtype, &s, d);
}

static bool infer_range(ictx *c)
{
    imp_data *s = in(c, 0)->data, *l = in(c, 1)->data, *d = in(c, 2)->data;
    if (!s || !l || !d || s->n != 1 || l->n != 1 || d->n != 1)
        return fail(c, "its start, limit and delta are computed at run time");
    bool real = s->real || l->real || d->real;
    if ((!s->real && s->i[0].n) || (!l->real && l->i[0].n) || (!d->real && d->i[0].n))
        return fail(c, "it counts up to the batch; burstc needs static shapes");
    double start = s->real ? s->r[0] : (double)s->i[0].c,
           lim = l->real ? l->r[0] : (double)l->i[0].c,
           delta = d->real ? d->r[0] : (double)d->i[0].c;
    if (delta == 0 || !isfinite(start) || !isfinite(lim) || !isfinite(delta))
        return fail(c, "a range with delta %g from %g to %g", delta, start, lim);
    double len = ceil((lim - start) / delta);
    if (len < 0)
        len = 0;
    if (len > (double)IMP_MAX_DIM)
        return fail(c, "a range of %g elements", len);
    imp_shape out = {1, {{(int64_t)len, 0, 0}}};
    imp_data *v = NULL;
    if (len <= IMP_FOLD_MAX) {
        v = new_data(c, (int64_t)len, real);
        for (int64_t k = 0; k < v->n; k++) {
            if (real)
                v->r[k] = start + (double)k * delta;
            else
                v->i[k] = (imp_dim){(int64_t)start + k * (int64_t)delta, 0, 0};
        }
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, v);
}

static bool infer_reduce(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int64_t axes[IMP_MAX_RANK];
    int naxes;
    bool given;
    if (!axes_of(c, "axes", 1, axes, &naxes, &given))
        return false;
    bool keep = imp_attr_int(c->n, "keepdims", 1) != 0, red[IMP_MAX_RANK] = {0};
    for (int k = 0; k < naxes; k++) {
        int a = 0;
        if (!norm_axis(c, axes[k], x->rank, &a))
            return false;
        red[a] = true;
    }
    if (!given || naxes == 0) {
        if (imp_attr_int(c->n, "noop_with_empty_axes", 0))
            return set_out(c, 0, in(c, 0)->dtype, x, NULL);
        for (int k = 0; k < x->rank; k++)
            red[k] = true;
    }
    imp_shape out = {0, {{0}}};
    for (int k = 0; k < x->rank; k++) {
        if (!red[k])
            out.d[out.rank++] = x->d[k];
        else if (keep)
            out.d[out.rank++] = (imp_dim){1, 0, 0};
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, NULL);
}

static bool infer_expand(ictx *c)
{
    imp_data *t = ints(c, 1);
    if (!t)
        return fail(c, "its shape is computed at run time");
    if (t->n > IMP_MAX_RANK)
        return fail(c, "the shape has %lld dimensions", (long long)t->n);
    imp_shape s = {(int)t->n, {{0}}}, out;
    for (int k = 0; k < s.rank; k++)
        s.d[k] = t->i[k];
    /* Traced at batch b, a learned [1,...] expanded to the batch (a class token) is expanded
     * to b: that b is the batch, as in the first place of a reshape's target. */
    const imp_shape *x = ish(c, 0);
    if (s.rank >= 1 && x->rank == s.rank && is_one(x->d[0]) && c->g->batch_export > 1 &&
        !s.d[0].n && s.d[0].c == c->g->batch_export && !in(c, 0)->act)
        s.d[0] = (imp_dim){1, 1, 0};
    if (!broadcast(c, ish(c, 0), &s, &out))
        return false;
    return set_out(c, 0, in(c, 0)->dtype, &out,
                   fold_elementwise(c, &out, is_real_type(in(c, 0)->dtype)));
}

/* Pad: constant padding (only zeros before an AveragePool become Burst's). */
static bool infer_pad(ictx *c)
{
    const imp_shape *x = ish(c, 0);
    int64_t pads[2 * IMP_MAX_RANK];
    const imp_attr *pa = imp_attr_get(c->n, "pads");
    if (c->g->opset < 11 && pa && pa->kind == IA_INTS && pa->n == 2 * x->rank) {
        memcpy(pads, pa->ints, sizeof *pads * (size_t)pa->n);
    } else {
        imp_data *d = in(c, 1) ? ints(c, 1) : NULL;
        if (!d)
            return fail(c, "its pads are computed at run time (or missing)");
        if (d->n != 2 * x->rank || (in(c, 3) && c->g->opset >= 18))
            return fail(c, "its pads must list 2 x %d numbers (pads per axis are not supported)",
                        x->rank);
        for (int k = 0; k < 2 * x->rank; k++) {
            if (d->i[k].n)
                return fail(c, "a pad depends on the batch");
            pads[k] = d->i[k].c;
        }
    }
    imp_shape out = *x;
    for (int k = 0; k < x->rank; k++) {
        int64_t b = pads[k], e = pads[k + x->rank];
        if (b < -IMP_MAX_DIM || b > IMP_MAX_DIM || e < -IMP_MAX_DIM || e > IMP_MAX_DIM)
            return fail(c, "pad %lld, %lld", (long long)b, (long long)e);
        if ((b || e) && x->d[k].n)
            return fail(c, "it pads the batch");
        out.d[k].c += b + e;
        if (!x->d[k].n && out.d[k].c < 0)
            return fail(c, "it crops more than the axis holds");
    }
    return set_out(c, 0, in(c, 0)->dtype, &out, NULL);
}

/* ---- the table ---- */

typedef struct op_rule {
    const char *op;
    int min_in, max_in; /* inputs that must be known / may be given */
    bool (*infer)(ictx *c);
} op_rule;

static bool infer_unary_any(ictx *c)
{
    return infer_unary(c);
}

static bool infer_squeeze_op(ictx *c)
{
    return infer_squeeze(c, false);
}

static bool infer_unsqueeze_op(ictx *c)
{
    return infer_squeeze(c, true);
}

static const op_rule rules[] = {
    {"Conv", 2, 3, infer_conv},
    {"Gemm", 2, 3, infer_gemm},
    {"MatMul", 2, 2, infer_matmul},
    {"Relu", 1, 1, infer_unary_any},
    {"Gelu", 1, 1, infer_unary_any},
    {"Tanh", 1, 1, infer_unary_any},
    {"Sigmoid", 1, 1, infer_unary_any},
    {"Clip", 1, 3, infer_unary_any},
    {"HardSigmoid", 1, 1, infer_unary_any},
    {"HardSwish", 1, 1, infer_unary_any},
    {"MaxPool", 1, 1, infer_pool},
    {"AveragePool", 1, 1, infer_pool},
    {"GlobalAveragePool", 1, 1, infer_global_pool},
    {"BatchNormalization", 5, 5, infer_batchnorm},
    {"LayerNormalization", 1, 3, infer_layernorm},
    {"Dropout", 1, 3, infer_unary_any},
    {"Softmax", 1, 1, infer_unary_any},
    {"Add", 2, 2, infer_binary},
    {"Sub", 2, 2, infer_binary},
    {"Mul", 2, 2, infer_binary},
    {"Div", 2, 2, infer_binary},
    {"Pow", 2, 2, infer_binary},
    {"Equal", 2, 2, infer_binary},
    {"Less", 2, 2, infer_binary},
    {"Greater", 2, 2, infer_binary},
    {"Where", 3, 3, infer_where},
    {"Erf", 1, 1, infer_unary_any},
    {"Sqrt", 1, 1, infer_unary_any},
    {"Reciprocal", 1, 1, infer_unary_any},
    {"Neg", 1, 1, infer_unary_any},
    {"Not", 1, 1, infer_unary_any},
    {"Identity", 1, 1, infer_unary_any},
    {"Cast", 1, 1, infer_unary_any},
    {"Trilu", 1, 2, infer_unary_any},
    {"Concat", 1, -1, infer_concat},
    {"Flatten", 1, 1, infer_flatten},
    {"Reshape", 2, 2, infer_reshape},
    {"Transpose", 1, 1, infer_transpose},
    {"Split", 1, 2, infer_split},
    {"Slice", 1, 5, infer_slice},
    {"Squeeze", 1, 2, infer_squeeze_op},
    {"Unsqueeze", 1, 2, infer_unsqueeze_op},
    {"Gather", 2, 2, infer_gather},
    {"Shape", 1, 1, infer_shape_op},
    {"Constant", 0, 0, infer_constant},
    {"ConstantOfShape", 1, 1, infer_constant_of_shape},
    {"Range", 3, 3, infer_range},
    {"ReduceMean", 1, 2, infer_reduce},
    {"Expand", 2, 2, infer_expand},
    {"Pad", 1, 4, infer_pad},
};

static const op_rule *rule_of(const char *op)
{
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        if (strcmp(rules[k].op, op) == 0)
            return &rules[k];
    return NULL;
}

static bool infer_node(imp_graph *g, int k)
{
    imp_node *n = &g->nodes[k];
    ictx c = {g, k, n};
    const op_rule *r = rule_of(n->op);
    if (!r) {
        return fail(&c,
                    "op type '%s' is not supported by burstc import (`burstc import --help` "
                    "lists the ones it reads)",
                    n->op);
    }
    /* An unknown input was reported where it went wrong. */
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] >= 0 && !g->values[n->in[i]].known)
            return false;
    bool missing = n->nin < r->min_in;
    for (int i = 0; i < r->min_in && !missing; i++)
        missing = n->in[i] < 0;
    if (missing || (r->max_in >= 0 && n->nin > r->max_in)) {
        if (r->max_in == r->min_in)
            return fail(&c, "expected %d inputs, got %d", r->min_in, n->nin);
        if (r->max_in < 0)
            return fail(&c, "expected at least %d inputs, got %d", r->min_in, n->nin);
        return fail(&c, "expected %d to %d inputs, got %d", r->min_in, r->max_in, n->nin);
    }
    if (!r->infer(&c))
        return false;
    bool act = false;
    for (int i = 0; i < n->nin; i++)
        act |= n->in[i] >= 0 && g->values[n->in[i]].act;
    if (strcmp(n->op, "Shape") == 0)
        act = false;
    for (int i = 0; i < n->nout; i++)
        if (n->out[i] >= 0) {
            g->values[n->out[i]].act = act;
            if (act)
                g->values[n->out[i]].data = NULL;
        }
    return true;
}

bool imp_infer(imp_graph *g)
{
    for (int i = 0; i < g->ninputs; i++)
        g->values[g->inputs[i]].act = true;
    for (int k = 0; k < g->nnodes; k++)
        infer_node(g, g->order[k]);
    return g->nerrors == 0;
}
