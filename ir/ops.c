/*
 * ops.c: what each op of ops.def means.
 *
 * The op table (ops.def) expanded into the name and attribute-spec tables
 * that the builder, reader, printer and verifier walk, and the functions its
 * columns name: shape inference with a clear error on mismatch (infer_*),
 * parameter tensors (params_*), and the per-sample costs (cost_*:
 * parameters, FLOPs, elements moved) that the cost model and `burstc stats`
 * use. docs/ir.md writes the same formulas out; keep them in step.
 */
#include "ir.h"
#include "../runtime/shape_rules.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the table ---- */

/* Each op's attribute specs, from its A() column: a function per op so that
 * the offsets can name the op's attribute struct (T). */
#define REQUIRED           NULL
#define A(key, kind, dflt) {#key, AK_##kind, dflt, offsetof(T, key)},
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) \
    static const ir_attr_spec *specs_##name(int *n)                           \
    {                                                                         \
        typedef ir_attrs_##name T;                                            \
        (void)sizeof(T); /* ops without attributes do not use it */           \
        static const ir_attr_spec s[] = {{NULL, AK_INT, NULL, 0}, attrs};     \
        *n = (int)(sizeof s / sizeof s[0]) - 1;                               \
        return s + 1;                                                         \
    }
#include "ops.def"
#undef OP
#undef A
#undef REQUIRED

typedef struct infer_ctx infer_ctx;
typedef struct cost_ctx cost_ctx;

/* The functions the table names, defined below. */
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs)      \
    static bool infer_##infer(infer_ctx *c);                                       \
    static int params_##params(const ir_graph *g, const ir_op *op, ir_param *out); \
    static void cost_##cost(const cost_ctx *c, ir_cost *k);
#include "ops.def"
#undef OP

static const struct {
    const char *name;
    int min_in, max_in;
    ir_op_class cls;
    const ir_attr_spec *(*specs)(int *n);
    bool (*infer)(infer_ctx *c);
    int (*params)(const ir_graph *g, const ir_op *op, ir_param *out);
    void (*cost)(const cost_ctx *c, ir_cost *k);
} op_table[OP_COUNT] = {
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) \
    [OP_##E] = {#name,        min_in,        max_in,          OC_##cls,       \
                specs_##name, infer_##infer, params_##params, cost_##cost},
#include "ops.def"
#undef OP
};

static ir_op_info info_store[OP_COUNT];
static bool info_ready;

static void init_info(void)
{
    for (int op = 0; op < OP_COUNT; op++) {
        ir_op_info *info = &info_store[op];
        info->name = op_table[op].name;
        info->min_inputs = op_table[op].min_in;
        info->max_inputs = op_table[op].max_in;
        info->cls = op_table[op].cls;
        info->attrs = op_table[op].specs(&info->nattrs);
        /* A default that names an attribute names an earlier one. */
        for (int k = 0; k < info->nattrs; k++)
            for (int j = k; info->attrs[k].dflt && j < info->nattrs; j++)
                if (strcmp(info->attrs[k].dflt, info->attrs[j].key) == 0)
                    ice("ops.def: %s's '%s' defaults to a later attribute", info->name,
                        info->attrs[k].key);
    }
    info_ready = true;
}

const ir_op_info *ir_op_info_of(ir_opcode op)
{
    if (!info_ready)
        init_info();
    if ((int)op < 0 || op >= OP_COUNT)
        ice("bad opcode %d", (int)op);
    return &info_store[op];
}

ir_opcode ir_op_lookup(const char *name)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (strcmp(op_table[op].name, name) == 0)
            return (ir_opcode)op;
    return OP_COUNT;
}

_Noreturn void ir_attrs_mismatch(const ir_op *op, const char *want)
{
    ice("'%s' is a %s, read as a %s", op->name, ir_op_info_of(op->opcode)->name, want);
}

static const char *const dtype_names[DT_COUNT] = {"f32", "tf32", "f16", "bf16"};
static const int dtype_sizes[DT_COUNT] = {4, 4, 2, 2};

const char *ir_dtype_name(ir_dtype dt)
{
    return dtype_names[dt];
}
int ir_dtype_size(ir_dtype dt)
{
    return dtype_sizes[dt];
}

bool ir_dtype_lookup(const char *name, ir_dtype *out)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(dtype_names[i], name) == 0) {
            *out = (ir_dtype)i;
            return true;
        }
    return false;
}

static const char *const kclass_names[KC_COUNT] = {"conv", "gemm", "pool", "other"};

const char *ir_kclass_name(ir_kclass k)
{
    return kclass_names[k];
}

bool ir_kclass_lookup(const char *name, ir_kclass *out)
{
    for (int i = 0; i < KC_COUNT; i++)
        if (strcmp(kclass_names[i], name) == 0) {
            *out = (ir_kclass)i;
            return true;
        }
    return false;
}

const char *ir_elem_name(ir_elem el)
{
    return el == EL_I32 ? "i32" : "f32";
}

int64_t ir_type_elems_per_sample(const ir_type *t)
{
    int64_t n = 1;
    for (int i = 1; i < t->rank; i++)
        if (t->dim[i] < 0 || __builtin_mul_overflow(n, t->dim[i], &n) || n > IR_MAX_ELEMS)
            return -1;
    return n;
}

void ir_type_to_str(const ir_type *t, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%s[", ir_elem_name(t->elem));
    for (int i = 0; i < t->rank && len < n; i++) {
        if (t->dim[i] == IR_BATCH)
            len += (size_t)snprintf(buf + len, n - len, "%sN", i ? "," : "");
        else
            len +=
                (size_t)snprintf(buf + len, n - len, "%s%lld", i ? "," : "", (long long)t->dim[i]);
    }
    if (len < n)
        snprintf(buf + len, n - len, "]");
}

/* ---- shape inference ---- */

#define IN(i)   (&g->ops[op->inputs[i]].type)
#define MAX_DIM IR_MAX_DIM

struct infer_ctx {
    const ir_graph *g;
    ir_op *op;
    diag_ctx *d;
    const char *opname;
};

static bool fail(infer_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(infer_ctx *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(c->d, c->op->loc, "%s: %s", c->opname, msg);
    return false;
}

static bool want_float(infer_ctx *c, int i)
{
    const ir_type *t = &c->g->ops[c->op->inputs[i]].type;
    if (t->elem != EL_F32) {
        char b[128];
        ir_type_to_str(t, b, sizeof b);
        return fail(c, "input %d must be f32, got %s", i + 1, b);
    }
    return true;
}

static bool want_rank(infer_ctx *c, int i, int rank, const char *layout)
{
    const ir_type *t = &c->g->ops[c->op->inputs[i]].type;
    if (t->rank != rank) {
        char b[128];
        ir_type_to_str(t, b, sizeof b);
        return fail(c, "shape mismatch: expected a %d-d input %s, got %s", rank, layout, b);
    }
    return want_float(c, i);
}

static bool positive(infer_ctx *c, const char *key, int64_t v)
{
    if (v <= 0)
        return fail(c, "attribute '%s' must be positive, got %lld", key, (long long)v);
    if (v > MAX_DIM)
        return fail(c, "attribute '%s' is too large (%lld)", key, (long long)v);
    return true;
}

static bool nonneg(infer_ctx *c, const char *key, int64_t v)
{
    if (v < 0)
        return fail(c, "attribute '%s' must not be negative, got %lld", key, (long long)v);
    if (v > MAX_DIM)
        return fail(c, "attribute '%s' is too large (%lld)", key, (long long)v);
    return true;
}

/* Both halves of a pair attribute. */
static bool positive2(infer_ctx *c, const char *key, const int64_t *v)
{
    return positive(c, key, v[0]) && positive(c, key, v[1]);
}

static bool nonneg2(infer_ctx *c, const char *key, const int64_t *v)
{
    return nonneg(c, key, v[0]) && nonneg(c, key, v[1]);
}

/* Output extent of a sliding window; false (with an error) if it is empty.
 * The formula is the runtime's (runtime/shape_rules.h), so that the planned
 * shapes are the ones the kernels compute; the compiler adds its own limit on
 * the window's span. */
static bool window(infer_ctx *c, int64_t in, int64_t k, int64_t s, int64_t p, int64_t dil,
                   bool ceil_mode, const char *axis, int64_t *out)
{
    int64_t span;
    if (__builtin_mul_overflow(dil, k - 1, &span) || span >= MAX_DIM)
        return fail(c, "the window (kernel %lld, dilation %lld) is too large", (long long)k,
                    (long long)dil);
    switch (rt_window_extent(in, k, s, p, dil, ceil_mode, out)) {
    case RT_WINDOW_OK: return true;
    case RT_WINDOW_TOO_LARGE:
        return fail(c, "shape mismatch: window of %lld does not fit the %s of %lld (padding %lld)",
                    (long long)span + 1, axis, (long long)in, (long long)p);
    default:
        ice("window rule on checked attributes: %lld %lld %lld %lld %lld", (long long)in,
            (long long)k, (long long)s, (long long)p, (long long)dil);
    }
}

/* An input's type is declared (the caller set it); ir_infer() checks it. */
static bool infer_input(infer_ctx *c)
{
    (void)c;
    return true;
}

static bool infer_conv2d(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 4, "[N,C,H,W]"))
        return false;
    const ir_type *x = IN(0);
    const ir_attrs_conv2d *a = ir_conv2d_attrs(op);
    int64_t k = a->channels, groups = a->groups;
    if (!positive(c, "channels", k) || !positive2(c, "kernel", a->kernel) ||
        !positive2(c, "stride", a->stride) || !nonneg2(c, "pad", a->pad) ||
        !positive2(c, "dilation", a->dilation) || !positive(c, "groups", groups))
        return false;
    if (x->dim[1] % groups || k % groups)
        return fail(
            c,
            "groups=%lld must divide both the input channels (%lld) and the output channels (%lld)",
            (long long)groups, (long long)x->dim[1], (long long)k);
    int64_t oh, ow;
    if (!window(c, x->dim[2], a->kernel[0], a->stride[0], a->pad[0], a->dilation[0], false,
                "height", &oh) ||
        !window(c, x->dim[3], a->kernel[1], a->stride[1], a->pad[1], a->dilation[1], false, "width",
                &ow))
        return false;
    op->type = (ir_type){EL_F32, 4, {IR_BATCH, k, oh, ow}};
    return true;
}

static bool infer_linear(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    const ir_type *x = IN(0);
    if (!want_float(c, 0))
        return false;
    if (x->rank < 2)
        return fail(c,
                    "shape mismatch: expected an input of at least 2 dimensions [N,...,features]");
    const ir_attrs_linear *a = ir_linear_attrs(op);
    if (!positive(c, "out", a->out))
        return false;
    if (a->tie >= 0) {
        const ir_op *e = &g->ops[a->tie];
        if (e->opcode != OP_EMBEDDING)
            return fail(c, "'tie' must name an embedding layer, '%s' is a %s", e->name,
                        ir_op_info_of(e->opcode)->name);
        const ir_attrs_embedding *ea = ir_embedding_attrs(e);
        if (ea->vocab != a->out || ea->dim != x->dim[x->rank - 1])
            return fail(c, "tied weight of '%s' is [%lld,%lld], this layer needs [%lld,%lld]",
                        e->name, (long long)ea->vocab, (long long)ea->dim, (long long)a->out,
                        (long long)x->dim[x->rank - 1]);
    }
    op->type = *x;
    op->type.dim[x->rank - 1] = a->out;
    return true;
}

static bool infer_matmul(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    const ir_type *a = IN(0), *b = IN(1);
    if (!want_float(c, 0) || !want_float(c, 1))
        return false;
    char sa[128], sb[128];
    ir_type_to_str(a, sa, sizeof sa);
    ir_type_to_str(b, sb, sizeof sb);
    if (a->rank < 3 || a->rank != b->rank)
        return fail(
            c,
            "shape mismatch: expected two inputs [N,...,m,k] and [N,...,k,n] of equal rank, got %s and %s",
            sa, sb);
    for (int i = 1; i < a->rank - 2; i++)
        if (a->dim[i] != b->dim[i])
            return fail(c, "shape mismatch: batch dimensions differ: %s and %s", sa, sb);
    if (a->dim[a->rank - 1] != b->dim[b->rank - 2])
        return fail(c, "shape mismatch: inner dimensions differ: %s and %s", sa, sb);
    op->type = *a;
    op->type.dim[a->rank - 1] = b->dim[b->rank - 1];
    return true;
}

/* Elementwise: the result is the (f32) input's type. */
static bool infer_same(infer_ctx *c)
{
    if (!want_float(c, 0))
        return false;
    c->op->type = c->g->ops[c->op->inputs[0]].type;
    return true;
}

/* Max and average pooling. Left out, the stride is the kernel (as in
 * PyTorch: ops.def's stride default); written out, it must be positive, as
 * conv2d's. */
static bool infer_pool(infer_ctx *c, const int64_t *ks, const int64_t *st, const int64_t *pd,
                       bool ceil_mode)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 4, "[N,C,H,W]"))
        return false;
    const ir_type *x = IN(0);
    if (!positive2(c, "kernel", ks) || !positive2(c, "stride", st) || !nonneg2(c, "pad", pd))
        return false;
    if (!rt_pool_pad_ok(ks[0], pd[0]) || !rt_pool_pad_ok(ks[1], pd[1]))
        return fail(c, "pad must be at most half the kernel");
    int64_t oh, ow;
    if (!window(c, x->dim[2], ks[0], st[0], pd[0], 1, ceil_mode, "height", &oh) ||
        !window(c, x->dim[3], ks[1], st[1], pd[1], 1, ceil_mode, "width", &ow))
        return false;
    op->type = (ir_type){EL_F32, 4, {IR_BATCH, x->dim[1], oh, ow}};
    return true;
}

static bool infer_maxpool2d(infer_ctx *c)
{
    const ir_attrs_maxpool2d *a = ir_maxpool2d_attrs(c->op);
    return infer_pool(c, a->kernel, a->stride, a->pad, a->ceil);
}

static bool infer_avgpool2d(infer_ctx *c)
{
    const ir_attrs_avgpool2d *a = ir_avgpool2d_attrs(c->op);
    return infer_pool(c, a->kernel, a->stride, a->pad, a->ceil);
}

static bool infer_global_avgpool(infer_ctx *c)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    if (!want_rank(c, 0, 4, "[N,C,H,W]"))
        return false;
    c->op->type = (ir_type){EL_F32, 2, {IR_BATCH, IN(0)->dim[1]}};
    return true;
}

static bool infer_batchnorm2d(infer_ctx *c)
{
    if (!want_rank(c, 0, 4, "[N,C,H,W]"))
        return false;
    const ir_attrs_batchnorm2d *a = ir_batchnorm2d_attrs(c->op);
    if (a->eps <= 0)
        return fail(c, "attribute 'eps' must be positive");
    if (a->momentum < 0 || a->momentum > 1)
        return fail(c, "attribute 'momentum' must be in [0, 1]");
    return infer_same(c);
}

static bool infer_layernorm(infer_ctx *c)
{
    if (ir_layernorm_attrs(c->op)->eps <= 0)
        return fail(c, "attribute 'eps' must be positive");
    if (c->g->ops[c->op->inputs[0]].type.rank < 2)
        return fail(c, "shape mismatch: expected an input [N,...,features]");
    return infer_same(c);
}

static bool infer_dropout(infer_ctx *c)
{
    double p = ir_dropout_attrs(c->op)->p;
    if (!(p >= 0 && p < 1))
        return fail(c, "attribute 'p' must be in [0, 1), got %g", p);
    return infer_same(c);
}

bool ir_type_equal(const ir_type *a, const ir_type *b)
{
    if (a->elem != b->elem || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return false;
    return true;
}

static bool infer_add(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_float(c, 0) || !want_float(c, 1))
        return false;
    if (!ir_type_equal(IN(0), IN(1))) {
        char sa[128], sb[128];
        ir_type_to_str(IN(0), sa, sizeof sa);
        ir_type_to_str(IN(1), sb, sizeof sb);
        return fail(c, "shape mismatch: %s and %s", sa, sb);
    }
    op->type = *IN(0);
    return true;
}

/* The product of two activations of one shape, or of x [N,C,...] and a gate of one value per
 * sample and channel, [N,C] or [N,C,1,...] (squeeze-and-excitation): the result is x's. */
static bool infer_mul(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_float(c, 0) || !want_float(c, 1))
        return false;
    const ir_type *x = IN(0), *s = IN(1);
    bool gate = x->rank >= 2 && (s->rank == 2 || s->rank == x->rank) && s->dim[1] == x->dim[1];
    for (int i = 2; i < s->rank && gate; i++)
        gate = s->dim[i] == 1;
    if (!ir_type_equal(x, s) && !gate) {
        char sa[128], sb[128];
        ir_type_to_str(x, sa, sizeof sa);
        ir_type_to_str(s, sb, sizeof sb);
        return fail(c,
                    "shape mismatch: %s and %s (the second must be of the first's shape, or "
                    "[N,C] or [N,C,1,...]: one value per sample and channel)",
                    sa, sb);
    }
    op->type = *x;
    return true;
}

/* Resolves a possibly negative axis of a rank-r tensor; axis 0 (the batch) is
 * never allowed because ranks split it. */
static bool axis_of(infer_ctx *c, const char *key, int64_t axis, int rank, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 1 || a >= rank)
        return fail(
            c,
            "attribute '%s' = %lld is out of range for a %d-d tensor (the batch axis 0 is not allowed)",
            key, (long long)axis, rank);
    *out = (int)a;
    return true;
}

static bool infer_concat(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    const ir_type *x = IN(0);
    int axis = 0;
    if (!axis_of(c, "axis", ir_concat_attrs(op)->axis, x->rank, &axis))
        return false;
    op->a.concat.axis = axis; /* canonical: non-negative */
    ir_type t = *x;
    for (int i = 0; i < op->ninputs; i++) {
        if (!want_float(c, i))
            return false;
        const ir_type *y = IN(i);
        bool ok = y->rank == x->rank;
        for (int k = 1; ok && k < x->rank; k++)
            ok = k == axis || y->dim[k] == x->dim[k];
        if (!ok) {
            char sa[128], sb[128];
            ir_type_to_str(x, sa, sizeof sa);
            ir_type_to_str(y, sb, sizeof sb);
            return fail(
                c, "shape mismatch: input %d is %s, input 1 is %s; they may differ only on axis %d",
                i + 1, sb, sa, axis);
        }
        if (i > 0 && (__builtin_add_overflow(t.dim[axis], y->dim[axis], &t.dim[axis]) ||
                      t.dim[axis] > MAX_DIM))
            return fail(c, "the concatenated axis %d is longer than 2^40", axis);
    }
    op->type = t;
    return true;
}

static bool infer_flatten(infer_ctx *c)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    if (!want_float(c, 0))
        return false;
    c->op->type = (ir_type){EL_F32, 2, {IR_BATCH, ir_type_elems_per_sample(IN(0))}};
    return true; /* the input's elements are at most 2^40: so is the one dimension */
}

static bool infer_reshape(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    const ir_int_list *sh = &ir_reshape_attrs(op)->shape;
    if (sh->n < 1 || sh->n > IR_MAX_RANK - 1)
        return fail(c, "attribute 'shape' must list 1 to %d dimensions (the batch is implied)",
                    IR_MAX_RANK - 1);
    int64_t total = ir_type_elems_per_sample(IN(0)), known = 1;
    int infer_at = -1;
    ir_type t = {IN(0)->elem, sh->n + 1, {IR_BATCH, 0}};
    for (int i = 0; i < sh->n; i++) {
        int64_t v = sh->v[i];
        if (v == -1 && infer_at < 0) {
            infer_at = i + 1;
            continue;
        }
        if (v <= 0 || v > MAX_DIM)
            return fail(c, "bad dimension %lld in 'shape'", (long long)v);
        t.dim[i + 1] = v;
        if (__builtin_mul_overflow(known, v, &known) || known > IR_MAX_ELEMS)
            return fail(c, "'shape' has more than 2^40 elements per sample");
    }
    if (infer_at > 0) {
        if (total % known)
            return fail(c, "shape mismatch: cannot reshape %lld elements per sample with -1",
                        (long long)total);
        t.dim[infer_at] = total / known;
    } else if (known != total) {
        return fail(c, "shape mismatch: 'shape' has %lld elements per sample, the input has %lld",
                    (long long)known, (long long)total);
    }
    op->type = t;
    return true;
}

static bool infer_transpose(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_float(c, 0))
        return false;
    const int64_t *dims = ir_transpose_attrs(op)->dims;
    int rank = IN(0)->rank, a = 0, b = 0;
    if (!axis_of(c, "dims", dims[0], rank, &a) || !axis_of(c, "dims", dims[1], rank, &b))
        return false;
    op->a.transpose.dims[0] = a; /* canonical: non-negative */
    op->a.transpose.dims[1] = b;
    op->type = *IN(0);
    op->type.dim[a] = IN(0)->dim[b];
    op->type.dim[b] = IN(0)->dim[a];
    return true;
}

/* Elements start..end-1 of one axis other than the batch (shufflenet's channel split). */
static bool infer_slice(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_float(c, 0))
        return false;
    const ir_attrs_slice *s = ir_slice_attrs(op);
    int a = 0;
    if (!axis_of(c, "axis", s->axis, IN(0)->rank, &a))
        return false;
    op->a.slice.axis = a; /* canonical: non-negative */
    if (s->start < 0 || s->end <= s->start || s->end > IN(0)->dim[a]) {
        char b[128];
        ir_type_to_str(IN(0), b, sizeof b);
        return fail(c, "start = %lld, end = %lld: needs 0 <= start < end <= %lld (axis %d of %s)",
                    (long long)s->start, (long long)s->end, (long long)IN(0)->dim[a], a, b);
    }
    op->type = *IN(0);
    op->type.dim[a] = s->end - s->start;
    return true;
}

static bool infer_softmax(infer_ctx *c)
{
    int axis = 0;
    if (!axis_of(c, "axis", ir_softmax_attrs(c->op)->axis, c->g->ops[c->op->inputs[0]].type.rank,
                 &axis))
        return false;
    c->op->a.softmax.axis = axis; /* canonical: non-negative */
    return infer_same(c);
}

static bool infer_embedding(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    const ir_type *x = IN(0);
    char b[128];
    ir_type_to_str(x, b, sizeof b);
    if (x->elem != EL_I32 || x->rank != 2)
        return fail(c, "expected token ids i32[N,T], got %s", b);
    const ir_attrs_embedding *a = ir_embedding_attrs(op);
    if (!positive(c, "vocab", a->vocab) || !positive(c, "dim", a->dim) ||
        !nonneg(c, "positions", a->positions))
        return false;
    if (a->positions > 0 && x->dim[1] > a->positions)
        return fail(c, "sequence length %lld exceeds positions=%lld", (long long)x->dim[1],
                    (long long)a->positions);
    op->type = (ir_type){EL_F32, 3, {IR_BATCH, x->dim[1], a->dim}};
    return true;
}

/* A vision transformer's tokens: x [N,T,D] with a learned class token put first (cls: T+1
 * rows out) and learned positions added to every row (positions). */
static bool infer_tokens(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 3, "[N,T,D]"))
        return false;
    const ir_attrs_tokens *a = ir_tokens_attrs(op);
    if (!a->cls && !a->positions)
        return fail(c, "cls = 0 and positions = 0 leave nothing to add");
    op->type = *IN(0);
    op->type.dim[1] += a->cls;
    return true;
}

static bool infer_attention(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 3, "[N,T,D]"))
        return false;
    int64_t heads = ir_attention_attrs(op)->heads, d = IN(0)->dim[2];
    if (!positive(c, "heads", heads))
        return false;
    if (d % heads)
        return fail(c, "heads=%lld must divide the model dimension %lld", (long long)heads,
                    (long long)d);
    op->type = *IN(0);
    return true;
}

static bool infer_cross_entropy(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    const ir_type *x = IN(0), *y = IN(1);
    char sx[128], sy[128];
    ir_type_to_str(x, sx, sizeof sx);
    ir_type_to_str(y, sy, sizeof sy);
    if (!want_float(c, 0))
        return false;
    if (x->rank < 2 || x->rank > 3)
        return fail(c, "expected logits f32[N,C] or f32[N,T,V], got %s", sx);
    bool ok = y->elem == EL_I32 && y->rank == x->rank - 1;
    for (int i = 1; ok && i < y->rank; i++)
        ok = y->dim[i] == x->dim[i];
    if (!ok)
        return fail(
            c,
            "shape mismatch: labels must be i32 with the logits' shape less the last dimension; "
            "got logits %s and labels %s",
            sx, sy);
    op->type = (ir_type){EL_F32, 1, {IR_BATCH, 0}};
    return true;
}

/* Communication moves or sums values of any type and runs where the plan
 * says: every comm op has a rank set (its `@[...]`). */
static bool infer_comm(infer_ctx *c)
{
    if (c->op->plan.nranks < 1)
        return fail(c, "'%%%s' needs the rank set it runs on (@[...])", c->op->name);
    c->op->type = c->g->ops[c->op->inputs[0]].type;
    return true;
}

/* What holds for every value, whatever its op: a shape that starts with the
 * batch, dimensions from 1 to 2^40, at most 2^40 elements per sample, and at
 * most 2^40 parameters per op. The errors name the layer: these limits are
 * usually reached by a typo far from where they show. */
bool ir_infer(const ir_graph *g, ir_op *op, diag_ctx *d)
{
    infer_ctx c = {g, op, d, ir_op_info_of(op->opcode)->name};
    if (!op_table[op->opcode].infer(&c))
        return false;
    const ir_type *t = &op->type;
    char ty[256];
    ir_type_to_str(t, ty, sizeof ty);
    if (t->rank < 1 || t->rank > IR_MAX_RANK || t->dim[0] != IR_BATCH)
        return fail(&c, "'%s' has type %s, which does not start with the batch N", op->name, ty);
    for (int i = 1; i < t->rank; i++)
        if (t->dim[i] < 1 || t->dim[i] > MAX_DIM)
            return fail(&c, "'%s' is %s: dimension %d is not from 1 to 2^40", op->name, ty, i);
    if (ir_type_elems_per_sample(t) < 0)
        return fail(&c, "'%s' is %s: more than 2^40 elements per sample", op->name, ty);
    if (ir_op_params(g, op) < 0)
        return fail(&c, "'%s' has more than 2^40 parameters", op->name);
    return true;
}

/* ---- parameters ---- */

static int params_none(const ir_graph *g, const ir_op *op, ir_param *out)
{
    (void)g, (void)op, (void)out;
    return 0;
}

/* Weights start uniform in +-1/sqrt(fan_in), biases too (PyTorch's conv and linear). */
static int params_conv2d(const ir_graph *g, const ir_op *op, ir_param *out)
{
    const ir_attrs_conv2d *a = ir_conv2d_attrs(op);
    int64_t cin = IN(0)->dim[1] / a->groups, fan_in = cin * a->kernel[0] * a->kernel[1];
    int n = 0;
    out[n++] = (ir_param){"weight", 4,          {a->channels, cin, a->kernel[0], a->kernel[1]},
                          false,    PI_KAIMING, fan_in};
    if (a->bias)
        out[n++] = (ir_param){"bias", 1, {a->channels}, false, PI_KAIMING, fan_in};
    return n;
}

/* A tied layer's weight is the embedding's, counted (and trained) there. */
static int params_linear(const ir_graph *g, const ir_op *op, ir_param *out)
{
    const ir_attrs_linear *a = ir_linear_attrs(op);
    int64_t in = IN(0)->dim[IN(0)->rank - 1];
    int n = 0;
    if (a->tie < 0)
        out[n++] = (ir_param){"weight", 2, {a->out, in}, false, PI_KAIMING, in};
    if (a->bias)
        out[n++] = (ir_param){"bias", 1, {a->out}, false, PI_KAIMING, in};
    return n;
}

static int params_batchnorm2d(const ir_graph *g, const ir_op *op, ir_param *out)
{
    int64_t ch = IN(0)->dim[1];
    out[0] = (ir_param){"weight", 1, {ch}, false, PI_ONE, 0};
    out[1] = (ir_param){"bias", 1, {ch}, false, PI_ZERO, 0};
    out[2] = (ir_param){"running_mean", 1, {ch}, true, PI_ZERO, 0};
    out[3] = (ir_param){"running_var", 1, {ch}, true, PI_ONE, 0};
    return 4;
}

static int params_layernorm(const ir_graph *g, const ir_op *op, ir_param *out)
{
    int64_t d = IN(0)->dim[IN(0)->rank - 1];
    out[0] = (ir_param){"weight", 1, {d}, false, PI_ONE, 0};
    out[1] = (ir_param){"bias", 1, {d}, false, PI_ZERO, 0};
    return 2;
}

static int params_embedding(const ir_graph *g, const ir_op *op, ir_param *out)
{
    (void)g;
    const ir_attrs_embedding *a = ir_embedding_attrs(op);
    int n = 0;
    out[n++] = (ir_param){"weight", 2, {a->vocab, a->dim}, false, PI_NORMAL, 0};
    if (a->positions)
        out[n++] = (ir_param){"pos", 2, {a->positions, a->dim}, false, PI_NORMAL, 0};
    return n;
}

/* torchvision's ViT: the class token starts at zero, the positions normal (std 0.02). */
static int params_tokens(const ir_graph *g, const ir_op *op, ir_param *out)
{
    const ir_attrs_tokens *a = ir_tokens_attrs(op);
    int64_t d = IN(0)->dim[2], rows = IN(0)->dim[1] + a->cls;
    int n = 0;
    if (a->cls)
        out[n++] = (ir_param){"cls", 1, {d}, false, PI_ZERO, 0};
    if (a->positions)
        out[n++] = (ir_param){"pos", 2, {rows, d}, false, PI_NORMAL, 0};
    return n;
}

/* GPT-2's fused QKV projection and the output projection (docs/ir.md). */
static int params_attention(const ir_graph *g, const ir_op *op, ir_param *out)
{
    int64_t d = IN(0)->dim[2];
    out[0] = (ir_param){"w_qkv", 2, {3 * d, d}, false, PI_KAIMING, d};
    out[1] = (ir_param){"b_qkv", 1, {3 * d}, false, PI_KAIMING, d};
    out[2] = (ir_param){"w_o", 2, {d, d}, false, PI_KAIMING, d};
    out[3] = (ir_param){"b_o", 1, {d}, false, PI_KAIMING, d};
    return 4;
}

int ir_op_param_list(const ir_graph *g, const ir_op *op, ir_param *out)
{
    return op_table[op->opcode].params(g, op, out);
}

int64_t ir_op_params(const ir_graph *g, const ir_op *op)
{
    ir_param ps[IR_MAX_OP_PARAMS];
    int n = ir_op_param_list(g, op, ps);
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        int64_t p = 1;
        for (int i = 0; i < ps[k].ndim && !ps[k].buffer; i++)
            if (__builtin_mul_overflow(p, ps[k].dim[i], &p) || p > IR_MAX_PARAMS)
                return -1;
        if (!ps[k].buffer && (__builtin_add_overflow(total, p, &total) || total > IR_MAX_PARAMS))
            return -1;
    }
    return total;
}

/* ---- costs (per sample) ---- */

struct cost_ctx {
    const ir_graph *g;
    const ir_op *op;
    double in;     /* elements per sample of the first input */
    double in_all; /* of all inputs */
    double out;    /* of the result */
};

/* The default, which cost_copy() keeps: an elementwise op that reads its
 * inputs and writes its output, and whose backward reads the output
 * gradient and writes the input gradients; no arithmetic worth counting. */
static void cost_copy(const cost_ctx *c, ir_cost *k)
{
    (void)c, (void)k;
}

static void cost_input(const cost_ctx *c, ir_cost *k)
{
    k->fwd_read = k->bwd_read = k->bwd_written = 0;
    k->fwd_written = c->out;
}

static void cost_conv2d(const cost_ctx *c, ir_cost *k)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    const ir_attrs_conv2d *a = ir_conv2d_attrs(op);
    double macs_per_out =
        (double)(IN(0)->dim[1] / a->groups) * (double)a->kernel[0] * (double)a->kernel[1];
    double out = c->out;
    k->fwd_flops = 2 * macs_per_out * out + (a->bias ? out : 0);
    k->bwd_flops = 4 * macs_per_out * out + (a->bias ? out : 0);
    k->bwd_read = out + c->in; /* dY and the saved input (for dW) */
    k->saved = c->in;
}

static void cost_linear(const cost_ctx *c, ir_cost *k)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    const ir_attrs_linear *a = ir_linear_attrs(op);
    int64_t fin = IN(0)->dim[IN(0)->rank - 1];
    double rows = c->in / (double)fin;
    k->fwd_flops = 2 * rows * (double)fin * (double)a->out + (a->bias ? c->out : 0);
    k->bwd_flops = 4 * rows * (double)fin * (double)a->out + (a->bias ? c->out : 0);
    k->bwd_read = c->out + c->in;
    k->saved = c->in;
}

static void cost_matmul(const cost_ctx *c, ir_cost *k)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    double kdim = (double)IN(0)->dim[IN(0)->rank - 1];
    k->fwd_flops = 2 * c->out * kdim;
    k->bwd_flops = 4 * c->out * kdim;
    k->bwd_read = c->out + c->in_all;
    k->saved = c->in_all;
}

static void cost_relu(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = c->out;
    k->bwd_flops = c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->out;
}

/* One multiply per element; the backward two (dx = dy s, ds = dy x, summed over the
 * positions a gate covers), reading dy and both inputs, which it keeps. */
static void cost_mul(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = c->out;
    k->bwd_flops = 2 * c->out;
    k->bwd_read = c->out + c->in_all;
    k->saved = c->in_all;
}

/* hardsigmoid relu6(x + 3) / 6 and hardswish x relu6(x + 3) / 6: an add, two compares,
 * a multiply (and one more for hardswish); the backward a select and a multiply-add. */
static void cost_hard(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 4 * c->out;
    k->bwd_flops = 3 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->in;
}

/* min(max(x, 0), 6): two compares; the backward a select on 0 < x < 6. */
static void cost_relu6(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 2 * c->out;
    k->bwd_flops = 2 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->in;
}

static void cost_gelu(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 8 * c->out; /* tanh approximation: ~8 FLOPs per element */
    k->bwd_flops = 14 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->in;
}

/* x Phi(x) = x (1 + erf(x / sqrt 2)) / 2: erf a polynomial and an exponential (~10 FLOPs);
 * the backward Phi(x) + x phi(x), phi one more exponential. */
static void cost_gelu_erf(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 10 * c->out;
    k->bwd_flops = 16 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->in;
}

/* tanh and sigmoid: an exponential, an add and a division; the backward
 * recomputes y from x, then dy * (1 - y^2) or dy * y * (1 - y). */
static void cost_sigmoidal(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 4 * c->out;
    k->bwd_flops = 4 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->in;
}

/* x sigmoid(x): a sigmoid and a multiply; the backward s (1 + x (1 - s)) times dy. */
static void cost_silu(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 5 * c->out;
    k->bwd_flops = 8 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->in;
}

static void cost_maxpool2d(const cost_ctx *c, ir_cost *k)
{
    const int64_t *ks = ir_maxpool2d_attrs(c->op)->kernel;
    k->fwd_flops = c->out * (double)ks[0] * (double)ks[1];
    k->bwd_flops = c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->out; /* argmax indices */
}

static void cost_avgpool2d(const cost_ctx *c, ir_cost *k)
{
    const int64_t *ks = ir_avgpool2d_attrs(c->op)->kernel;
    double window = (double)ks[0] * (double)ks[1];
    k->fwd_flops = c->out * window;
    k->bwd_flops = c->out * window;
    k->bwd_read = c->out;
}

static void cost_global_avgpool(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = c->in;
    k->bwd_flops = c->in;
}

/* Batch and layer normalisation: mean, variance, normalise, scale and shift. */
static void cost_norm(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 8 * c->out;
    k->bwd_flops = 12 * c->out;
    k->fwd_read = 2 * c->in; /* one pass for the statistics, one to normalise */
    k->bwd_read = 2 * c->out + c->in;
    k->saved = c->in;
}

static void cost_dropout(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 2 * c->out; /* draw and scale */
    k->bwd_flops = c->out;
    k->saved = c->out / 4; /* a byte-sized mask; counted in elements of 4 bytes */
}

static void cost_add(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = c->out;
    k->bwd_flops = 0; /* the gradient passes through to both inputs */
}

/* Flatten and reshape are views: nothing moves. */
static void cost_view(const cost_ctx *c, ir_cost *k)
{
    (void)c;
    k->fwd_read = k->fwd_written = k->bwd_read = k->bwd_written = 0;
}

static void cost_softmax(const cost_ctx *c, ir_cost *k)
{
    k->fwd_flops = 5 * c->out;
    k->bwd_flops = 4 * c->out;
    k->bwd_read = 2 * c->out;
    k->saved = c->out;
}

static void cost_embedding(const cost_ctx *c, ir_cost *k)
{
    bool pos = ir_embedding_attrs(c->op)->positions != 0;
    double out = c->out;
    k->fwd_flops = pos ? out : 0;       /* adding the positional row */
    k->bwd_flops = pos ? 2 * out : out; /* scatter-add into the tables */
    k->fwd_read = c->in + (pos ? 2 : 1) * out;
    k->bwd_read = out + c->in;
    k->bwd_written = (pos ? 2 : 1) * out;
    k->saved = c->in;
}

/* A copy with one add per element (positions); the backward passes dy on and sums it over
 * the samples into the tables. Nothing is kept. */
static void cost_tokens(const cost_ctx *c, ir_cost *k)
{
    bool pos = ir_tokens_attrs(c->op)->positions != 0;
    k->fwd_flops = pos ? c->out : 0;
    k->bwd_flops = c->out;
    k->fwd_read = c->in + (pos ? c->out : 0);
    k->bwd_read = c->out;
    k->bwd_written = c->in + c->out;
    k->saved = 0;
}

/* A handful of GEMMs and a softmax each way. */
static void cost_attention(const cost_ctx *c, ir_cost *k)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    double t = (double)IN(0)->dim[1], d = (double)IN(0)->dim[2];
    double h = (double)ir_attention_attrs(op)->heads, in = c->in;
    double proj = 2 * t * d * 3 * d + 2 * t * d * d; /* qkv and output projections */
    double scores = 2 * t * t * d * 2;               /* q k^T and probs v, over all heads */
    double soft = 5 * h * t * t;
    k->fwd_flops = proj + scores + soft;
    k->bwd_flops = 2 * proj + 2 * scores + 4 * h * t * t;
    k->fwd_read = in + 3 * t * d + 2 * h * t * t + t * d;
    k->fwd_written = 3 * t * d + h * t * t + 2 * t * d;
    k->bwd_read = c->out + k->fwd_written;
    k->bwd_written = in + 3 * t * d + h * t * t;
    k->saved = in + 3 * t * d + h * t * t + t * d;
    k->fwd_kernels = 5;
    k->bwd_kernels = 9;
}

static void cost_cross_entropy(const cost_ctx *c, ir_cost *k)
{
    const ir_graph *g = c->g;
    const ir_op *op = c->op;
    k->fwd_flops = 5 * c->in; /* max, exp, sum, log, pick */
    k->bwd_flops = 2 * c->in;
    k->fwd_read = c->in_all;
    k->bwd_read = c->in + (double)ir_type_elems_per_sample(IN(1));
    k->bwd_written = c->in;
    k->saved = c->in;
}

/* Communication does no arithmetic worth counting; what it moves is in the
 * elements: a reshard reads and writes the value (forward) and its gradient
 * (backward); an all-reduce moves 2 x its layer's parameters per iteration,
 * nothing per sample. */
static void cost_reshard(const cost_ctx *c, ir_cost *k)
{
    *k = (ir_cost){0};
    k->fwd_read = k->fwd_written = c->out;
    k->bwd_read = k->bwd_written = c->out;
}

static void cost_allreduce(const cost_ctx *c, ir_cost *k)
{
    (void)c;
    *k = (ir_cost){0};
}

ir_cost ir_op_cost(const ir_graph *g, const ir_op *op)
{
    cost_ctx c = {g, op, 0, 0, (double)ir_type_elems_per_sample(&op->type)};
    if (op->ninputs)
        c.in = (double)ir_type_elems_per_sample(IN(0));
    for (int i = 0; i < op->ninputs; i++)
        c.in_all += (double)ir_type_elems_per_sample(IN(i));
    int64_t params = ir_op_params(g, op);
    ir_cost k = {.params = params > 0 ? params : 0,
                 .fwd_read = c.in_all,
                 .fwd_written = c.out,
                 .bwd_read = c.out,
                 .bwd_written = c.in_all,
                 .fwd_kernels = 1,
                 .bwd_kernels = params > 0 ? 2 : 1}; /* input and weight gradients */
    op_table[op->opcode].cost(&c, &k);
    return k;
}
