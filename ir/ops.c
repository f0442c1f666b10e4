/*
 * ops.c: what each op of ops.def means.
 *
 * For every op: the table entry (name, arity, attribute spec parsed from the
 * spec string once), shape inference with a clear error on mismatch, and the
 * per-sample cost (parameters, FLOPs and elements moved) that the cost model
 * and `burstc stats` use. docs/ir.md writes the same formulas out; keep them
 * in step.
 */
#include "ir.h"
#include "../runtime/shape_rules.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int min_in, max_in;
    const char *spec;
} op_table[OP_COUNT] = {
#define OP(e, name, min_in, max_in, attrs) [e] = {name, min_in, max_in, attrs},
#include "ops.def"
#undef OP
};

#define MAX_ATTRS 8
static ir_attr_spec spec_store[OP_COUNT][MAX_ATTRS];
static char spec_text[OP_COUNT][160];
static ir_op_info info_store[OP_COUNT];
static bool info_ready;

static ir_attr_kind parse_kind(const char *t, const char *op)
{
    if (strcmp(t, "i") == 0)
        return AK_INT;
    if (strcmp(t, "i2") == 0)
        return AK_PAIR;
    if (strcmp(t, "il") == 0)
        return AK_LIST;
    if (strcmp(t, "f") == 0)
        return AK_REAL;
    if (strcmp(t, "b") == 0)
        return AK_BOOL;
    if (strcmp(t, "r") == 0)
        return AK_REF;
    ice("ops.def: bad attribute type '%s' in %s", t, op);
}

/* Splits each spec string of ops.def ("key:type[=default] ...") once. */
static void init_info(void)
{
    for (int op = 0; op < OP_COUNT; op++) {
        ir_op_info *info = &info_store[op];
        info->name = op_table[op].name;
        info->min_inputs = op_table[op].min_in;
        info->max_inputs = op_table[op].max_in;
        info->attrs = spec_store[op];
        if (strlen(op_table[op].spec) >= sizeof spec_text[op])
            ice("ops.def: spec of %s too long", info->name);
        strcpy(spec_text[op], op_table[op].spec);
        char *save = NULL;
        for (char *tok = strtok_r(spec_text[op], " ", &save); tok;
             tok = strtok_r(NULL, " ", &save)) {
            if (info->nattrs == MAX_ATTRS)
                ice("ops.def: too many attributes for %s", info->name);
            ir_attr_spec *s = &spec_store[op][info->nattrs++];
            char *colon = strchr(tok, ':');
            if (!colon)
                ice("ops.def: bad spec '%s' for %s", tok, info->name);
            *colon = 0;
            s->key = tok;
            char *eq = strchr(colon + 1, '=');
            if (eq) {
                *eq = 0;
                s->dflt = eq + 1;
            }
            s->required = !eq;
            s->kind = parse_kind(colon + 1, info->name);
        }
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

typedef struct infer_ctx {
    const ir_graph *g;
    ir_op *op;
    diag_ctx *d;
    const char *opname;
} infer_ctx;

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

static const int64_t *pair(const ir_op *op, const char *key)
{
    const ir_attr *a = ir_op_attr(op, key);
    if (!a || a->kind != AK_PAIR)
        ice("%s: no pair attribute %s", op->name, key);
    return a->u.pair;
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

static bool infer_conv2d(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 4, "[N,C,H,W]"))
        return false;
    const ir_type *x = IN(0);
    int64_t k = ir_attr_int(op, "channels"), groups = ir_attr_int(op, "groups");
    const int64_t *ks = pair(op, "kernel"), *st = pair(op, "stride"), *pd = pair(op, "pad"),
                  *dl = pair(op, "dilation");
    if (!positive(c, "channels", k) || !positive(c, "kernel", ks[0]) ||
        !positive(c, "kernel", ks[1]) || !positive(c, "stride", st[0]) ||
        !positive(c, "stride", st[1]) || !nonneg(c, "pad", pd[0]) || !nonneg(c, "pad", pd[1]) ||
        !positive(c, "dilation", dl[0]) || !positive(c, "dilation", dl[1]) ||
        !positive(c, "groups", groups))
        return false;
    if (x->dim[1] % groups || k % groups)
        return fail(
            c,
            "groups=%lld must divide both the input channels (%lld) and the output channels (%lld)",
            (long long)groups, (long long)x->dim[1], (long long)k);
    int64_t oh, ow;
    if (!window(c, x->dim[2], ks[0], st[0], pd[0], dl[0], false, "height", &oh) ||
        !window(c, x->dim[3], ks[1], st[1], pd[1], dl[1], false, "width", &ow))
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
    int64_t out = ir_attr_int(op, "out");
    if (!positive(c, "out", out))
        return false;
    int tie = ir_op_attr(op, "tie")->u.ref;
    if (tie >= 0) {
        const ir_op *e = &g->ops[tie];
        if (e->opcode != OP_EMBEDDING)
            return fail(c, "'tie' must name an embedding layer, '%s' is a %s", e->name,
                        ir_op_info_of(e->opcode)->name);
        if (ir_attr_int(e, "vocab") != out || ir_attr_int(e, "dim") != x->dim[x->rank - 1])
            return fail(c, "tied weight of '%s' is [%lld,%lld], this layer needs [%lld,%lld]",
                        e->name, (long long)ir_attr_int(e, "vocab"),
                        (long long)ir_attr_int(e, "dim"), (long long)out,
                        (long long)x->dim[x->rank - 1]);
    }
    op->type = *x;
    op->type.dim[x->rank - 1] = out;
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

static bool infer_same(infer_ctx *c)
{
    if (!want_float(c, 0))
        return false;
    c->op->type = c->g->ops[c->op->inputs[0]].type;
    return true;
}

static bool infer_pool(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 4, "[N,C,H,W]"))
        return false;
    const ir_type *x = IN(0);
    /* Left out, the stride is the kernel (as in PyTorch): ops.def's
     * `stride:i2=kernel`. Written out, it must be positive, as conv2d's. */
    const int64_t *ks = pair(op, "kernel"), *pd = pair(op, "pad"), *st = pair(op, "stride");
    if (!positive(c, "kernel", ks[0]) || !positive(c, "kernel", ks[1]) ||
        !positive(c, "stride", st[0]) || !positive(c, "stride", st[1]) ||
        !nonneg(c, "pad", pd[0]) || !nonneg(c, "pad", pd[1]))
        return false;
    if (!rt_pool_pad_ok(ks[0], pd[0]) || !rt_pool_pad_ok(ks[1], pd[1]))
        return fail(c, "pad must be at most half the kernel");
    bool ceil_mode = ir_attr_int(op, "ceil") != 0;
    int64_t oh, ow;
    if (!window(c, x->dim[2], ks[0], st[0], pd[0], 1, ceil_mode, "height", &oh) ||
        !window(c, x->dim[3], ks[1], st[1], pd[1], 1, ceil_mode, "width", &ow))
        return false;
    op->type = (ir_type){EL_F32, 4, {IR_BATCH, x->dim[1], oh, ow}};
    return true;
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
    if (ir_attr_real(c->op, "eps") <= 0)
        return fail(c, "attribute 'eps' must be positive");
    double mom = ir_attr_real(c->op, "momentum");
    if (mom < 0 || mom > 1)
        return fail(c, "attribute 'momentum' must be in [0, 1]");
    return infer_same(c);
}

static bool infer_layernorm(infer_ctx *c)
{
    if (ir_attr_real(c->op, "eps") <= 0)
        return fail(c, "attribute 'eps' must be positive");
    if (c->g->ops[c->op->inputs[0]].type.rank < 2)
        return fail(c, "shape mismatch: expected an input [N,...,features]");
    return infer_same(c);
}

static bool infer_dropout(infer_ctx *c)
{
    double p = ir_attr_real(c->op, "p");
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
    ir_attr *aa = (ir_attr *)ir_op_attr(op, "axis");
    int axis = 0;
    if (!axis_of(c, "axis", aa->u.i, x->rank, &axis))
        return false;
    aa->u.i = axis;
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
    const ir_attr *sh = ir_op_attr(op, "shape");
    if (sh->u.list.n < 1 || sh->u.list.n > IR_MAX_RANK - 1)
        return fail(c, "attribute 'shape' must list 1 to %d dimensions (the batch is implied)",
                    IR_MAX_RANK - 1);
    int64_t total = ir_type_elems_per_sample(IN(0)), known = 1;
    int infer_at = -1;
    ir_type t = {IN(0)->elem, sh->u.list.n + 1, {IR_BATCH, 0}};
    for (int i = 0; i < sh->u.list.n; i++) {
        int64_t v = sh->u.list.v[i];
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
    ir_attr *da = (ir_attr *)ir_op_attr(op, "dims");
    int rank = IN(0)->rank, a = 0, b = 0;
    if (!axis_of(c, "dims", da->u.pair[0], rank, &a) ||
        !axis_of(c, "dims", da->u.pair[1], rank, &b))
        return false;
    da->u.pair[0] = a;
    da->u.pair[1] = b;
    op->type = *IN(0);
    op->type.dim[a] = IN(0)->dim[b];
    op->type.dim[b] = IN(0)->dim[a];
    return true;
}

static bool infer_softmax(infer_ctx *c)
{
    ir_attr *aa = (ir_attr *)ir_op_attr(c->op, "axis");
    int axis = 0;
    if (!axis_of(c, "axis", aa->u.i, c->g->ops[c->op->inputs[0]].type.rank, &axis))
        return false;
    aa->u.i = axis;
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
    int64_t vocab = ir_attr_int(op, "vocab"), dim = ir_attr_int(op, "dim"),
            pos = ir_attr_int(op, "positions");
    if (!positive(c, "vocab", vocab) || !positive(c, "dim", dim) || !nonneg(c, "positions", pos))
        return false;
    if (pos > 0 && x->dim[1] > pos)
        return fail(c, "sequence length %lld exceeds positions=%lld", (long long)x->dim[1],
                    (long long)pos);
    op->type = (ir_type){EL_F32, 3, {IR_BATCH, x->dim[1], dim}};
    return true;
}

static bool infer_attention(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    if (!want_rank(c, 0, 3, "[N,T,D]"))
        return false;
    int64_t heads = ir_attr_int(op, "heads"), d = IN(0)->dim[2];
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

static bool infer_op(infer_ctx *c)
{
    const ir_graph *g = c->g;
    ir_op *op = c->op;
    switch (op->opcode) {
    case OP_INPUT: return true;
    case OP_CONV2D: return infer_conv2d(c);
    case OP_LINEAR: return infer_linear(c);
    case OP_MATMUL: return infer_matmul(c);
    case OP_RELU:
    case OP_GELU: return infer_same(c);
    case OP_MAXPOOL2D:
    case OP_AVGPOOL2D: return infer_pool(c);
    case OP_GLOBALAVGPOOL: return infer_global_avgpool(c);
    case OP_BATCHNORM2D: return infer_batchnorm2d(c);
    case OP_LAYERNORM: return infer_layernorm(c);
    case OP_DROPOUT: return infer_dropout(c);
    case OP_ADD: return infer_add(c);
    case OP_CONCAT: return infer_concat(c);
    case OP_FLATTEN: return infer_flatten(c);
    case OP_RESHAPE: return infer_reshape(c);
    case OP_TRANSPOSE: return infer_transpose(c);
    case OP_SOFTMAX: return infer_softmax(c);
    case OP_EMBEDDING: return infer_embedding(c);
    case OP_ATTENTION: return infer_attention(c);
    case OP_CROSSENTROPY: return infer_cross_entropy(c);
    default: return ir_infer_extra(g, op, c->d);
    }
}

/* What holds for every value, whatever its op: a shape that starts with the
 * batch, dimensions from 1 to 2^40, at most 2^40 elements per sample, and at
 * most 2^40 parameters per op. The errors name the layer: these limits are
 * usually reached by a typo far from where they show. */
bool ir_infer(const ir_graph *g, ir_op *op, diag_ctx *d)
{
    infer_ctx c = {g, op, d, ir_op_info_of(op->opcode)->name};
    if (!infer_op(&c))
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

/* ---- costs (per sample) ---- */

ir_cost ir_op_cost(const ir_graph *g, const ir_op *op)
{
    ir_cost k = {0};
    double out = (double)ir_type_elems_per_sample(&op->type);
    double in = op->ninputs ? (double)ir_type_elems_per_sample(IN(0)) : 0;
    double in_all = 0;
    for (int i = 0; i < op->ninputs; i++)
        in_all += (double)ir_type_elems_per_sample(IN(i));
    /* The default: an elementwise op that reads its inputs and writes its
	 * output, and whose backward reads the output gradient and writes the
	 * input gradients. */
    k.fwd_read = in_all;
    k.fwd_written = out;
    k.bwd_read = out;
    k.bwd_written = in_all;

    switch (op->opcode) {
    case OP_INPUT:
        k.fwd_read = k.bwd_read = k.bwd_written = 0;
        k.fwd_written = out;
        break;
    case OP_CONV2D: {
        int64_t cin = IN(0)->dim[1], groups = ir_attr_int(op, "groups");
        const int64_t *ks = pair(op, "kernel");
        double macs_per_out = (double)(cin / groups) * (double)ks[0] * (double)ks[1];
        bool bias = ir_attr_int(op, "bias") != 0;
        k.fwd_flops = 2 * macs_per_out * out + (bias ? out : 0);
        k.bwd_flops = 4 * macs_per_out * out + (bias ? out : 0);
        k.bwd_read = out + in; /* dY and the saved input (for dW) */
        k.saved = in;
        break;
    }
    case OP_LINEAR: {
        int64_t fin = IN(0)->dim[IN(0)->rank - 1], fout = ir_attr_int(op, "out");
        double rows = in / (double)fin;
        bool bias = ir_attr_int(op, "bias") != 0;
        k.fwd_flops = 2 * rows * (double)fin * (double)fout + (bias ? out : 0);
        k.bwd_flops = 4 * rows * (double)fin * (double)fout + (bias ? out : 0);
        k.bwd_read = out + in;
        k.saved = in;
        break;
    }
    case OP_MATMUL: {
        const ir_type *a = IN(0), *b = IN(1);
        double kdim = (double)a->dim[a->rank - 1];
        k.fwd_flops = 2 * out * kdim;
        k.bwd_flops = 4 * out * kdim;
        (void)b;
        k.bwd_read = out + in_all;
        k.saved = in_all;
        break;
    }
    case OP_RELU:
        k.fwd_flops = out;
        k.bwd_flops = out;
        k.bwd_read = 2 * out;
        k.saved = out;
        break;
    case OP_GELU:
        k.fwd_flops = 8 * out; /* tanh approximation: ~8 FLOPs per element */
        k.bwd_flops = 14 * out;
        k.bwd_read = 2 * out;
        k.saved = in;
        break;
    case OP_MAXPOOL2D:
    case OP_AVGPOOL2D: {
        const int64_t *ks = pair(op, "kernel");
        double window = (double)ks[0] * (double)ks[1];
        k.fwd_flops = out * window;
        k.bwd_flops = op->opcode == OP_MAXPOOL2D ? out : out * window;
        k.bwd_read = op->opcode == OP_MAXPOOL2D ? 2 * out : out;
        k.saved = op->opcode == OP_MAXPOOL2D ? out : 0; /* argmax indices */
        break;
    }
    case OP_GLOBALAVGPOOL:
        k.fwd_flops = in;
        k.bwd_flops = in;
        break;
    case OP_BATCHNORM2D:
        k.fwd_flops = 8 * out; /* mean, variance, normalise, scale and shift */
        k.bwd_flops = 12 * out;
        k.fwd_read = 2 * in; /* one pass for the statistics, one to normalise */
        k.bwd_read = 2 * out + in;
        k.saved = in;
        break;
    case OP_LAYERNORM:
        k.fwd_flops = 8 * out;
        k.bwd_flops = 12 * out;
        k.fwd_read = 2 * in;
        k.bwd_read = 2 * out + in;
        k.saved = in;
        break;
    case OP_DROPOUT:
        k.fwd_flops = 2 * out; /* draw and scale */
        k.bwd_flops = out;
        k.saved = out / 4; /* a byte-sized mask; counted in elements of 4 bytes */
        break;
    case OP_ADD:
        k.fwd_flops = out;
        k.bwd_flops = 0; /* the gradient passes through to both inputs */
        break;
    case OP_CONCAT:
    case OP_TRANSPOSE: break; /* pure data movement */
    case OP_FLATTEN:
    case OP_RESHAPE:
        k.fwd_read = k.fwd_written = k.bwd_read = k.bwd_written = 0; /* views */
        break;
    case OP_SOFTMAX:
        k.fwd_flops = 5 * out;
        k.bwd_flops = 4 * out;
        k.bwd_read = 2 * out;
        k.saved = out;
        break;
    case OP_EMBEDDING: {
        int64_t pos = ir_attr_int(op, "positions");
        k.fwd_flops = pos ? out : 0;       /* adding the positional row */
        k.bwd_flops = pos ? 2 * out : out; /* scatter-add into the tables */
        k.fwd_read = in + (pos ? 2 : 1) * out;
        k.bwd_read = out + in;
        k.bwd_written = (pos ? 2 : 1) * out;
        k.saved = in;
        break;
    }
    case OP_ATTENTION: {
        double t = (double)IN(0)->dim[1], d = (double)IN(0)->dim[2];
        double h = (double)ir_attr_int(op, "heads");
        double proj = 2 * t * d * 3 * d + 2 * t * d * d; /* qkv and output projections */
        double scores = 2 * t * t * d * 2;               /* q k^T and probs v, over all heads */
        double soft = 5 * h * t * t;
        k.fwd_flops = proj + scores + soft;
        k.bwd_flops = 2 * proj + 2 * scores + 4 * h * t * t;
        k.fwd_read = in + 3 * t * d + 2 * h * t * t + t * d;
        k.fwd_written = 3 * t * d + h * t * t + 2 * t * d;
        k.bwd_read = out + k.fwd_written;
        k.bwd_written = in + 3 * t * d + h * t * t;
        k.saved = in + 3 * t * d + h * t * t + t * d;
        break;
    }
    case OP_CROSSENTROPY:
        k.fwd_flops = 5 * in; /* max, exp, sum, log, pick */
        k.bwd_flops = 2 * in;
        k.fwd_read = in_all;
        k.bwd_read = in + (double)ir_type_elems_per_sample(IN(1));
        k.bwd_written = in;
        k.saved = in;
        break;
    default: return ir_op_cost_extra(g, op, k);
    }
    int64_t params = ir_op_params(g, op);
    k.params = params > 0 ? params : 0;
    return k;
}

/* ---- parameters ---- */

/* *acc = *acc * f, false once past IR_MAX_PARAMS (or int64). */
static bool mul_to(int64_t *acc, int64_t f)
{
    return !__builtin_mul_overflow(*acc, f, acc) && *acc <= IR_MAX_PARAMS;
}

int64_t ir_op_params(const ir_graph *g, const ir_op *op)
{
    int64_t p = 1, extra = 0;
    bool ok = true;
    switch (op->opcode) {
    case OP_CONV2D: {
        const int64_t *ks = pair(op, "kernel");
        int64_t cout = ir_attr_int(op, "channels");
        ok = mul_to(&p, cout) && mul_to(&p, IN(0)->dim[1] / ir_attr_int(op, "groups")) &&
             mul_to(&p, ks[0]) && mul_to(&p, ks[1]);
        extra = ir_attr_int(op, "bias") ? cout : 0;
        break;
    }
    case OP_LINEAR: {
        int64_t fout = ir_attr_int(op, "out");
        if (ir_op_attr(op, "tie")->u.ref >= 0)
            p = 0; /* the weight is the embedding's, counted there */
        else
            ok = mul_to(&p, IN(0)->dim[IN(0)->rank - 1]) && mul_to(&p, fout);
        extra = ir_attr_int(op, "bias") ? fout : 0;
        break;
    }
    case OP_BATCHNORM2D: ok = mul_to(&p, 2) && mul_to(&p, IN(0)->dim[1]); break;
    case OP_LAYERNORM: ok = mul_to(&p, 2) && mul_to(&p, IN(0)->dim[IN(0)->rank - 1]); break;
    case OP_EMBEDDING: {
        int64_t rows = ir_attr_int(op, "vocab");
        ok = !__builtin_add_overflow(rows, ir_attr_int(op, "positions"), &rows) &&
             mul_to(&p, rows) && mul_to(&p, ir_attr_int(op, "dim"));
        break;
    }
    case OP_ATTENTION: {
        int64_t d = IN(0)->dim[2];
        ok = mul_to(&p, 4) && mul_to(&p, d) && mul_to(&p, d);
        extra = 4 * d; /* d <= 2^40 */
        break;
    }
    default: return 0;
    }
    if (!ok || __builtin_add_overflow(p, extra, &p) || p > IR_MAX_PARAMS)
        return -1;
    return p;
}
