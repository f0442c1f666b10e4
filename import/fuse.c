/*
 * fuse.c: the patterns that exporters spell out op by op and that Burst has
 * one op for.
 *
 * Attention (projections, split, heads, scores, mask, softmax, the output
 * projection: `attention`), layer normalization before opset 17 (ReduceMean,
 * Sub, Pow, ...: `layernorm`), GELU in its erf and tanh forms (`gelu`), a
 * MatMul by a weight and the Add of its bias (`linear`), and a token
 * embedding with its learned positions (`embedding`). Each pattern is found
 * from one anchor node by walks of bounded length, and claims its nodes only
 * if nothing outside reads what it computes inside; match.c then emits one
 * layer per pattern. A node belongs to at most one pattern, so the whole
 * search is linear in the graph.
 */
#include "import.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fctx {
    imp_graph *g;
} fctx;

static imp_value *val(fctx *c, int v)
{
    return &c->g->values[v];
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-3 * fabs(b);
}

static bool claimed(fctx *c, int node)
{
    return c->g->nodes[node].group >= 0;
}

/* ---- groups ---- */

static imp_group *new_group(fctx *c, imp_gkind kind, int x, int out, int first, const int *nodes,
                            int n)
{
    for (int k = 0; k < n; k++)
        if (claimed(c, nodes[k]))
            return NULL;
    arena_grow(c->g->a, (void **)&c->g->groups, &c->g->groups_cap, c->g->ngroups + 1,
               sizeof *c->g->groups);
    int id = c->g->ngroups++;
    imp_group *gr = &c->g->groups[id];
    memset(gr, 0, sizeof *gr);
    gr->kind = kind;
    gr->x = x;
    gr->out = out;
    gr->last = imp_producer(c->g, out);
    gr->first = first;
    gr->nodes = arena_alloc(c->g->a, sizeof *gr->nodes * (size_t)n);
    memcpy(gr->nodes, nodes, sizeof *nodes * (size_t)n);
    gr->nnodes = n;
    gr->b = -1;
    for (int k = 0; k < n; k++)
        c->g->nodes[nodes[k]].group = id;
    return gr;
}

/* True when every activation computed by the nodes, but out, is read only by them (or by a
 * Shape, which reads no values: nn.MultiheadAttention's export sizes its split from one). */
static bool closed(fctx *c, const int *nodes, int n, int out)
{
    for (int k = 0; k < n; k++) {
        const imp_node *nd = &c->g->nodes[nodes[k]];
        for (int o = 0; o < nd->nout; o++) {
            int v = nd->out[o];
            if (v < 0 || v == out || !val(c, v)->act)
                continue;
            for (int g = 0; g < c->g->noutputs; g++)
                if (c->g->outputs[g] == v)
                    return false;
            for (int u = 0; u < val(c, v)->nusers; u++) {
                bool inside = false;
                for (int j = 0; j < n && !inside; j++)
                    inside = nodes[j] == val(c, v)->users[u];
                inside |= imp_is_op(c->g, val(c, v)->users[u], "Shape");
                if (!inside)
                    return false;
            }
        }
    }
    return true;
}

/* ---- linear: MatMul by a weight, and the Add of its bias ---- */

static void find_linear(fctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    if (n->nin != 2 || !imp_is_act(c->g, n->in[0]) || imp_init_of(c->g, n->in[1]) < 0)
        return;
    const imp_shape *w = &val(c, n->in[1])->shape;
    if (w->rank != 2 || w->d[0].n || w->d[1].n)
        return;
    int out = n->out[0], nodes[2] = {k, -1}, nn = 1, bias = -1;
    int u = imp_single_user(c->g, out);
    if (imp_is_op(c->g, u, "Add") && !claimed(c, u)) {
        int b = imp_other_of(c->g, u, out);
        if (imp_is_bias(c->g, b, w->d[1].c)) {
            nodes[nn++] = u;
            bias = b;
            out = c->g->nodes[u].out[0];
        }
    }
    imp_group *gr = new_group(c, IMP_G_LINEAR, n->in[0], out, k, nodes, nn);
    if (gr) {
        gr->features = w->d[1].c;
        gr->w = n->in[1];
        gr->b = bias;
    }
}

/* ---- GELU, erf and tanh forms ---- */

/* From the Erf's or Tanh's output e: + 1, times x (or times 0.5x), times 0.5.
 * Adds the nodes to nodes[*nn]; returns the result, or -1. */
static int gelu_tail(fctx *c, int e, int x, int *nodes, int *nn)
{
    int a1 = imp_single_user(c->g, e);
    if (!imp_is_op(c->g, a1, "Add") || !near(imp_scalar(c->g, imp_other_of(c->g, a1, e)), 1.0))
        return -1;
    nodes[(*nn)++] = a1;
    int one_plus = c->g->nodes[a1].out[0];
    int m = imp_single_user(c->g, one_plus);
    if (!imp_is_op(c->g, m, "Mul"))
        return -1;
    nodes[(*nn)++] = m;
    int other = imp_other_of(c->g, m, one_plus);
    if (other == x) {
        int m2 = imp_single_user(c->g, c->g->nodes[m].out[0]);
        if (!imp_is_op(c->g, m2, "Mul") ||
            !near(imp_scalar(c->g, imp_other_of(c->g, m2, c->g->nodes[m].out[0])), 0.5))
            return -1;
        nodes[(*nn)++] = m2;
        return c->g->nodes[m2].out[0];
    }
    int h = imp_producer(c->g, other);
    if (!imp_is_op(c->g, h, "Mul") || imp_single_user(c->g, other) != m ||
        imp_other_of(c->g, h, x) < 0 || !near(imp_scalar(c->g, imp_other_of(c->g, h, x)), 0.5))
        return -1;
    nodes[(*nn)++] = h;
    return c->g->nodes[m].out[0];
}

static void find_gelu_erf(fctx *c, int k)
{
    const imp_node *e = &c->g->nodes[k];
    int pre = imp_producer(c->g, e->in[0]), x, cst;
    if (pre < 0 || imp_single_user(c->g, e->in[0]) != k || !imp_split_act(c->g, pre, &x, &cst))
        return;
    double s = imp_scalar(c->g, cst);
    if (!((imp_is_op(c->g, pre, "Div") && c->g->nodes[pre].in[0] == x && near(s, sqrt(2.0))) ||
          (imp_is_op(c->g, pre, "Mul") && near(s, sqrt(0.5)))))
        return;
    int nodes[8] = {pre, k}, nn = 2;
    int out = gelu_tail(c, e->out[0], x, nodes, &nn);
    if (out < 0 || !closed(c, nodes, nn, out))
        return;
    imp_group *gr = new_group(c, IMP_G_GELU, x, out, pre, nodes, nn);
    if (gr)
        gr->form = "erf";
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with x^3 as Pow(x, 3) or x*(x*x). */
static void find_gelu_tanh(fctx *c, int k)
{
    const imp_node *t = &c->g->nodes[k];
    int nodes[12] = {k}, nn = 1, x, cst, inner, cube, cube_cst;
    int m1 = imp_producer(c->g, t->in[0]);
    if (!imp_is_op(c->g, m1, "Mul") || imp_single_user(c->g, t->in[0]) != k ||
        !imp_split_act(c->g, m1, &inner, &cst) ||
        !near(imp_scalar(c->g, cst), sqrt(2.0 / 3.14159265358979323846)))
        return;
    nodes[nn++] = m1;
    int add = imp_producer(c->g, inner);
    if (!imp_is_op(c->g, add, "Add") || imp_single_user(c->g, inner) != m1)
        return;
    nodes[nn++] = add;
    for (int side = 0; side < 2; side++) {
        x = c->g->nodes[add].in[side];
        int scaled = c->g->nodes[add].in[1 - side];
        int m2 = imp_producer(c->g, scaled);
        if (!imp_is_op(c->g, m2, "Mul") || imp_single_user(c->g, scaled) != add ||
            !imp_split_act(c->g, m2, &cube, &cube_cst) ||
            !near(imp_scalar(c->g, cube_cst), 0.044715))
            continue;
        int p = imp_producer(c->g, cube), nn2 = nn;
        int nodes2[12];
        memcpy(nodes2, nodes, sizeof nodes);
        nodes2[nn2++] = m2;
        if (imp_single_user(c->g, cube) != m2)
            continue;
        if (imp_is_op(c->g, p, "Pow") && c->g->nodes[p].in[0] == x &&
            near(imp_scalar(c->g, c->g->nodes[p].in[1]), 3.0)) {
            nodes2[nn2++] = p;
        } else if (imp_is_op(c->g, p, "Mul") && imp_other_of(c->g, p, x) >= 0) {
            int sq = imp_other_of(c->g, p, x), ps = imp_producer(c->g, sq);
            if (!imp_is_op(c->g, ps, "Mul") || c->g->nodes[ps].in[0] != x ||
                c->g->nodes[ps].in[1] != x || imp_single_user(c->g, sq) != p)
                continue;
            nodes2[nn2++] = p;
            nodes2[nn2++] = ps;
        } else {
            continue;
        }
        int out = gelu_tail(c, t->out[0], x, nodes2, &nn2);
        if (out < 0 || !closed(c, nodes2, nn2, out))
            continue;
        imp_group *gr = new_group(c, IMP_G_GELU, x, out, nodes2[nn2 - 1], nodes2, nn2);
        if (gr)
            gr->form = "tanh";
        return;
    }
}

/* ---- SiLU: x * Sigmoid(x), as torch exports nn.SiLU (ONNX has no op for it) ---- */

static void find_silu(fctx *c, int k)
{
    int x = c->g->nodes[k].in[0], s = c->g->nodes[k].out[0], u = imp_single_user(c->g, s);
    if (!imp_is_act(c->g, x) || !imp_is_op(c->g, u, "Mul") || claimed(c, u) ||
        imp_other_of(c->g, u, s) != x)
        return;
    int nodes[2] = {k, u};
    new_group(c, IMP_G_SILU, x, c->g->nodes[u].out[0], k, nodes, 2);
}

/* ---- layer normalization spelled out (opsets before 17) ---- */

static bool last_axis_only(fctx *c, int node, int rank)
{
    const imp_attr *a = imp_attr_get(&c->g->nodes[node], "axes");
    int64_t ax;
    if (a && a->kind == IA_INTS && a->n == 1)
        ax = a->ints[0];
    else if (c->g->nodes[node].nin > 1 && val(c, c->g->nodes[node].in[1])->data &&
             val(c, c->g->nodes[node].in[1])->data->n == 1)
        ax = (int64_t)imp_scalar(c->g, c->g->nodes[node].in[1]);
    else
        return false;
    return (ax == -1 || ax == rank - 1) && imp_attr_int(&c->g->nodes[node], "keepdims", 1);
}

static void find_layernorm(fctx *c, int k)
{
    const imp_node *r1 = &c->g->nodes[k];
    int x = r1->in[0];
    if (!imp_is_act(c->g, x) || !last_axis_only(c, k, val(c, x)->shape.rank))
        return;
    int64_t d = val(c, x)->shape.d[val(c, x)->shape.rank - 1].c;
    int nodes[9] = {k}, nn = 1;
    int sub = imp_single_user(c->g, r1->out[0]);
    if (!imp_is_op(c->g, sub, "Sub") || c->g->nodes[sub].in[0] != x)
        return;
    nodes[nn++] = sub;
    int cen = c->g->nodes[sub].out[0];
    if (val(c, cen)->nusers != 2)
        return;
    int sq = -1, div = -1;
    for (int u = 0; u < 2; u++) {
        int n = val(c, cen)->users[u];
        if (imp_is_op(c->g, n, "Pow") && near(imp_scalar(c->g, c->g->nodes[n].in[1]), 2.0))
            sq = n;
        else if (imp_is_op(c->g, n, "Div") && c->g->nodes[n].in[0] == cen)
            div = n;
    }
    if (sq < 0 || div < 0)
        return;
    nodes[nn++] = sq;
    int r2 = imp_single_user(c->g, c->g->nodes[sq].out[0]);
    if (!imp_is_op(c->g, r2, "ReduceMean") || !last_axis_only(c, r2, val(c, x)->shape.rank))
        return;
    nodes[nn++] = r2;
    int add = imp_single_user(c->g, c->g->nodes[r2].out[0]);
    double eps = imp_is_op(c->g, add, "Add")
                     ? imp_scalar(c->g, imp_other_of(c->g, add, c->g->nodes[r2].out[0]))
                     : NAN;
    if (!(eps > 0))
        return;
    nodes[nn++] = add;
    int sqrt_n = imp_single_user(c->g, c->g->nodes[add].out[0]);
    if (!imp_is_op(c->g, sqrt_n, "Sqrt") ||
        imp_single_user(c->g, c->g->nodes[sqrt_n].out[0]) != div ||
        c->g->nodes[div].in[1] != c->g->nodes[sqrt_n].out[0])
        return;
    nodes[nn++] = sqrt_n;
    nodes[nn++] = div;
    int mul = imp_single_user(c->g, c->g->nodes[div].out[0]);
    if (!imp_is_op(c->g, mul, "Mul"))
        return;
    int scale = imp_other_of(c->g, mul, c->g->nodes[div].out[0]);
    int add2 = imp_single_user(c->g, c->g->nodes[mul].out[0]);
    int shift =
        imp_is_op(c->g, add2, "Add") ? imp_other_of(c->g, add2, c->g->nodes[mul].out[0]) : -1;
    if (!imp_is_bias(c->g, scale, d) || !imp_is_bias(c->g, shift, d)) {
        imp_error(c->g, k,
                  "layer normalization without a learned scale and bias; Burst's layernorm has "
                  "both");
        return;
    }
    nodes[nn++] = mul;
    nodes[nn++] = add2;
    int out = c->g->nodes[add2].out[0];
    if (!closed(c, nodes, nn, out))
        return;
    imp_group *gr = new_group(c, IMP_G_LAYERNORM, x, out, k, nodes, nn);
    if (gr) {
        gr->eps = eps;
        gr->w = scale;
        gr->b = shift;
    }
}

/* ---- token embeddings and their positions ---- */

/* True when the constant v holds 0, 1, ..., T-1 (shape [T] or [1,T]). */
static bool is_arange(fctx *c, int v, int64_t t)
{
    const imp_value *x = val(c, v);
    if (x->act || !x->data || x->data->real || x->data->n != t)
        return false;
    for (int64_t k = 0; k < t; k++)
        if (x->data->i[k].n || x->data->i[k].c != k)
            return false;
    return true;
}

static void find_embedding(fctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    int table = n->in[0], ids = n->in[1];
    if (imp_attr_int(n, "axis", 0) != 0 || imp_init_of(c->g, table) < 0 || !imp_is_act(c->g, ids))
        return;
    const imp_shape *ts = &val(c, table)->shape, *is = &val(c, ids)->shape;
    if (ts->rank != 2 || is->rank != 2)
        return;
    int nodes[2] = {k, -1}, nn = 1, out = n->out[0], pos = -1;
    int64_t t = is->d[1].c, d = ts->d[1].c, positions = 0;
    int add = imp_single_user(c->g, out);
    if (imp_is_op(c->g, add, "Add") && !claimed(c, add)) {
        int o = imp_other_of(c->g, add, out);
        const imp_shape *os = o >= 0 ? &val(c, o)->shape : NULL;
        int pg = imp_producer(c->g, o);
        if (o >= 0 && imp_init_of(c->g, o) >= 0 && imp_elems(os) == t * d &&
            os->d[os->rank - 1].c == d) {
            pos = o; /* learned positions, added directly (or folded by the export) */
            positions = t;
        } else if (imp_is_op(c->g, pg, "Gather") && !imp_is_act(c->g, o) &&
                   imp_init_of(c->g, c->g->nodes[pg].in[0]) >= 0 &&
                   val(c, c->g->nodes[pg].in[0])->shape.rank == 2 &&
                   val(c, c->g->nodes[pg].in[0])->shape.d[1].c == d &&
                   is_arange(c, c->g->nodes[pg].in[1], t)) {
            pos = c->g->nodes[pg].in[0];
            positions = val(c, pos)->shape.d[0].c;
        }
        if (pos >= 0) {
            nodes[nn++] = add;
            out = c->g->nodes[add].out[0];
        }
    }
    imp_group *gr = new_group(c, IMP_G_EMBEDDING, ids, out, k, nodes, nn);
    if (gr) {
        gr->w = table;
        gr->b = pos;
        gr->positions = positions;
    }
}

/* ---- a vision transformer's tokens: class token, positions ---- */

/* v is an initializer (a view of one) of [1,rows,d] or [rows,d]. */
static bool is_table(fctx *c, int v, int64_t rows, int64_t d)
{
    if (v < 0 || imp_is_act(c->g, v) || imp_init_of(c->g, v) < 0)
        return false;
    const imp_shape *s = &val(c, v)->shape;
    if (s->rank == 3 && (s->d[0].n || s->d[0].c != 1))
        return false;
    return (s->rank == 2 || s->rank == 3) && !s->d[s->rank - 2].n && s->d[s->rank - 2].c == rows &&
           !s->d[s->rank - 1].n && s->d[s->rank - 1].c == d;
}

/* torchvision's ViT: Concat on axis 1 of a learned [1,1,D] expanded to the batch and the
 * patches [N,T,D], then (or only) the Add of learned positions [1,T+1,D]. The anchor is the
 * Concat or, for positions alone, the Add. */
static void find_tokens(fctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    int nodes[2], nn = 0, x = -1, cls = -1, pos = -1, out = n->out[0];
    if (imp_is_op(c->g, k, "Concat")) {
        const imp_shape *y = &val(c, out)->shape;
        int64_t axis = imp_attr_int(n, "axis", 0);
        if (n->nin != 2 || y->rank != 3 || (axis != 1 && axis != -2))
            return;
        int e = imp_producer(c->g, n->in[0]);
        if (!imp_is_op(c->g, e, "Expand") || !imp_is_act(c->g, n->in[1]) ||
            !is_table(c, c->g->nodes[e].in[0], 1, y->d[2].c))
            return;
        cls = c->g->nodes[e].in[0];
        x = n->in[1];
        nodes[nn++] = k;
        int u = imp_single_user(c->g, out);
        if (imp_is_op(c->g, u, "Add") && !claimed(c, u) &&
            is_table(c, imp_other_of(c->g, u, out), y->d[1].c, y->d[2].c)) {
            pos = imp_other_of(c->g, u, out);
            nodes[nn++] = u;
            out = c->g->nodes[u].out[0];
        }
    } else {
        if (!imp_split_act(c->g, k, &x, &pos))
            return;
        const imp_shape *xs = &val(c, x)->shape;
        if (xs->rank != 3 || !xs->d[0].n || xs->d[1].c < 2 ||
            !is_table(c, pos, xs->d[1].c, xs->d[2].c))
            return;
        nodes[nn++] = k;
    }
    imp_group *gr = new_group(c, IMP_G_TOKENS, x, out, k, nodes, nn);
    if (gr) {
        gr->w = cls;
        gr->b = pos;
    }
}

/* ---- attention ---- */

/* A linear layer that a walk from attention reached: the value it computes,
 * the MatMul and the Add of its bias. */
typedef struct proj {
    int out, mm, add, x, w, b;
} proj;

/* Whether v is computed by MatMul(x, weight) + bias; fills p. */
static bool is_proj(fctx *c, int v, proj *p)
{
    int a = imp_producer(c->g, v), mm = a;
    p->add = -1;
    p->b = -1;
    if (imp_is_op(c->g, a, "Add")) {
        int act, other;
        if (!imp_split_act(c->g, a, &act, &other))
            return false;
        mm = imp_producer(c->g, act);
        p->add = a;
        p->b = other;
        if (imp_single_user(c->g, act) != a)
            return false;
    }
    if (!imp_is_op(c->g, mm, "MatMul") || !imp_is_act(c->g, c->g->nodes[mm].in[0]) ||
        imp_init_of(c->g, c->g->nodes[mm].in[1]) < 0)
        return false;
    const imp_shape *w = &val(c, c->g->nodes[mm].in[1])->shape;
    if (w->rank != 2 || (p->b >= 0 && !imp_is_bias(c->g, p->b, w->d[1].c)))
        return false;
    p->out = v;
    p->mm = mm;
    p->x = c->g->nodes[mm].in[0];
    p->w = c->g->nodes[mm].in[1];
    return true;
}

#define WALK_MAX 64

typedef struct region {
    int n;
    int nodes[4 * WALK_MAX + 16];
} region;

static void region_add(region *r, int node)
{
    for (int k = 0; k < r->n; k++)
        if (r->nodes[k] == node)
            return;
    if (r->n < (int)(sizeof r->nodes / sizeof r->nodes[0]))
        r->nodes[r->n++] = node;
}

/* Walks back from q, k or v through views and scalings to a projection. */
static bool walk_to_proj(fctx *c, int v, region *r, proj *p)
{
    for (int steps = 0; steps < WALK_MAX; steps++) {
        if (is_proj(c, v, p))
            return true;
        int n = imp_producer(c->g, v);
        if (n < 0)
            return false;
        const char *op = c->g->nodes[n].op;
        int act, other;
        if (!strcmp(op, "Transpose") || !strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
            !strcmp(op, "Unsqueeze") || !strcmp(op, "Cast") || !strcmp(op, "Split") ||
            !strcmp(op, "Slice") || !strcmp(op, "Identity")) {
            v = c->g->nodes[n].in[0];
        } else if (!strcmp(op, "Gather") && imp_is_act(c->g, c->g->nodes[n].in[0]) &&
                   !imp_is_act(c->g, c->g->nodes[n].in[1])) {
            v = c->g->nodes[n].in[0];
        } else if ((!strcmp(op, "Mul") || !strcmp(op, "Div")) &&
                   imp_split_act(c->g, n, &act, &other) && !isnan(imp_scalar(c->g, other))) {
            v = act;
        } else {
            return false;
        }
        region_add(r, n);
    }
    return false;
}

/* Node u is Gemm(o, W, b) with W stored [out, in] (transB), alpha = beta = 1: the output
 * projection of nn.MultiheadAttention, exported on [T*N, D]; fills p. */
static bool is_gemm_proj(fctx *c, int u, proj *p)
{
    if (!imp_is_op(c->g, u, "Gemm"))
        return false;
    const imp_node *n = &c->g->nodes[u];
    if (n->nin < 3 || n->in[2] < 0 || imp_attr_int(n, "transA", 0) ||
        !imp_attr_int(n, "transB", 0) || imp_attr_float(n, "alpha", 1) != 1 ||
        imp_attr_float(n, "beta", 1) != 1 || imp_init_of(c->g, n->in[1]) < 0)
        return false;
    const imp_shape *w = &val(c, n->in[1])->shape;
    if (w->rank != 2 || !imp_is_bias(c->g, n->in[2], w->d[0].c))
        return false;
    *p = (proj){.out = n->out[0], .mm = u, .add = -1, .x = n->in[0], .w = n->in[1], .b = n->in[2]};
    return true;
}

/* v's one reader other than Shapes (which read no values), or -1. */
static int value_user(fctx *c, int v)
{
    int found = -1;
    for (int u = 0; v >= 0 && u < val(c, v)->nusers; u++) {
        int k = val(c, v)->users[u];
        if (imp_is_op(c->g, k, "Shape"))
            continue;
        if (found >= 0)
            return -1;
        found = k;
    }
    return found;
}

/* Node k is a Transpose that swaps axes 0 and 1 of a 3-d activation. */
static bool is_swap01(fctx *c, int k)
{
    if (!imp_is_op(c->g, k, "Transpose"))
        return false;
    const imp_attr *p = imp_attr_get(&c->g->nodes[k], "perm");
    return p && p->kind == IA_INTS && p->n == 3 && p->ints[0] == 1 && p->ints[1] == 0 &&
           p->ints[2] == 2 && imp_is_act(c->g, c->g->nodes[k].in[0]);
}

static bool shape_same(const imp_shape *a, const imp_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (!imp_dim_eq(a->d[i], b->d[i]))
            return false;
    return true;
}

/* Why an attention-shaped softmax is not one Burst can fuse. */
static void attention_error(fctx *c, int k, const char *why)
{
    imp_error(c->g, k,
              "this softmax of q·kᵀ looks like attention, but %s; Burst's attention op "
              "is multi-head self-attention with biased q, k, v and output projections",
              why);
}

static void find_attention(fctx *c, int k)
{
    const imp_node *s = &c->g->nodes[k];
    if (!imp_is_act(c->g, s->in[0]))
        return;
    region r = {0};
    region_add(&r, k);
    bool masked = false;
    int v = s->in[0], m1 = -1;
    for (int steps = 0; steps < WALK_MAX && m1 < 0; steps++) {
        int n = imp_producer(c->g, v), act, other;
        if (n < 0 || imp_single_user(c->g, v) < 0)
            return;
        const char *op = c->g->nodes[n].op;
        if (!strcmp(op, "MatMul") && imp_is_act(c->g, c->g->nodes[n].in[0]) &&
            imp_is_act(c->g, c->g->nodes[n].in[1])) {
            m1 = n;
        } else if ((!strcmp(op, "Mul") || !strcmp(op, "Div")) &&
                   imp_split_act(c->g, n, &act, &other) && !isnan(imp_scalar(c->g, other))) {
            v = act;
        } else if (!strcmp(op, "Add") && imp_split_act(c->g, n, &act, &other)) {
            v = act; /* an additive mask */
            masked = true;
        } else if (!strcmp(op, "Where") && !imp_is_act(c->g, c->g->nodes[n].in[0]) &&
                   imp_is_act(c->g, c->g->nodes[n].in[1]) !=
                       imp_is_act(c->g, c->g->nodes[n].in[2])) {
            v = imp_is_act(c->g, c->g->nodes[n].in[1]) ? c->g->nodes[n].in[1]
                                                       : c->g->nodes[n].in[2];
            masked = true;
        } else if (!strcmp(op, "Cast")) {
            v = c->g->nodes[n].in[0];
        } else {
            return; /* not a softmax over attention scores */
        }
        region_add(&r, n);
    }
    if (m1 < 0)
        return;
    /* Forward: (dropout) then probabilities times v. */
    int p = s->out[0], m2 = -1;
    for (int steps = 0; steps < WALK_MAX && m2 < 0; steps++) {
        int u = imp_single_user(c->g, p);
        if (imp_is_op(c->g, u, "Dropout") || imp_is_op(c->g, u, "Cast")) {
            region_add(&r, u);
            p = c->g->nodes[u].out[0];
        } else if (imp_is_op(c->g, u, "MatMul") && c->g->nodes[u].in[0] == p &&
                   imp_is_act(c->g, c->g->nodes[u].in[1])) {
            m2 = u;
        } else {
            return attention_error(c, k, "its probabilities are not multiplied by v");
        }
    }
    if (m2 < 0)
        return;
    region_add(&r, m2);
    /* Forward: heads merged back, then the output projection. */
    int o = c->g->nodes[m2].out[0];
    proj outp = {0};
    bool found = false;
    for (int steps = 0; steps < WALK_MAX && !found; steps++) {
        int u = value_user(c, o);
        if (imp_is_op(c->g, u, "Transpose") || imp_is_op(c->g, u, "Reshape")) {
            region_add(&r, u);
            o = c->g->nodes[u].out[0];
            continue;
        }
        if (is_gemm_proj(c, u, &outp)) {
            found = true;
            break;
        }
        if (!imp_is_op(c->g, u, "MatMul"))
            return attention_error(c, k, "no output projection follows it");
        int after = imp_single_user(c->g, c->g->nodes[u].out[0]);
        int end = imp_is_op(c->g, after, "Add") ? c->g->nodes[after].out[0] : c->g->nodes[u].out[0];
        if (!is_proj(c, end, &outp) || outp.mm != u)
            return attention_error(c, k, "no output projection follows it");
        found = true;
    }
    if (!found)
        return;
    /* nn.MultiheadAttention computes on [T,N,D] (q, k, v and heads [N*H,T,D/H]; the output
     * projection on [T*N,D]): the batch goes back to its place before the result leaves. */
    int result = outp.out;
    for (int steps = 0; steps < WALK_MAX && val(c, result)->shape.rank != 3; steps++) {
        int u = value_user(c, result);
        if (!imp_is_op(c->g, u, "Reshape"))
            break;
        region_add(&r, u);
        result = c->g->nodes[u].out[0];
    }
    /* Backward: q, k and v to their projections. */
    proj qkv[3];
    int srcs[3] = {c->g->nodes[m1].in[0], c->g->nodes[m1].in[1], c->g->nodes[m2].in[1]};
    for (int i = 0; i < 3; i++)
        if (!walk_to_proj(c, srcs[i], &r, &qkv[i]))
            return attention_error(c, k, "q, k or v does not come from a linear projection");
    int x = qkv[0].x, seq_first = -1;
    if (is_swap01(c, imp_producer(c->g, x))) {
        seq_first = imp_producer(c->g, x);
        x = c->g->nodes[seq_first].in[0];
        int u = value_user(c, result);
        if (!is_swap01(c, u))
            return attention_error(c, k, "its input is [T,N,D] and its output stays so");
        region_add(&r, u);
        result = c->g->nodes[u].out[0];
    }
    const imp_shape *xs = &val(c, x)->shape;
    if (xs->rank != 3 || !xs->d[0].n || !shape_same(xs, &val(c, result)->shape))
        return attention_error(c, k, "its input is not [N,T,D], or its output not of that shape");
    int64_t d = xs->d[2].c;
    bool fused = qkv[0].out == qkv[1].out && qkv[1].out == qkv[2].out;
    bool separate = qkv[0].out != qkv[1].out && qkv[1].out != qkv[2].out &&
                    qkv[0].out != qkv[2].out && qkv[1].x == qkv[0].x && qkv[2].x == qkv[0].x;
    if (!fused && !separate)
        return attention_error(c, k, "q, k and v come from neither one projection nor three");
    int nproj = fused ? 1 : 3;
    for (int i = 0; i < nproj; i++) {
        const imp_shape *w = &val(c, qkv[i].w)->shape;
        if (w->d[0].c != d || w->d[1].c != (fused ? 3 * d : d))
            return attention_error(c, k, "the q, k, v projections are not D x 3D");
        if (qkv[i].b < 0)
            return attention_error(c, k, "the q, k, v projections have no bias");
    }
    const imp_shape *ow = &val(c, outp.w)->shape;
    if (ow->d[0].c != d || ow->d[1].c != d || outp.b < 0 || outp.x != o)
        return attention_error(c, k, "its output projection is not a D x D linear with a bias");
    const imp_shape *qs = &val(c, srcs[0])->shape;
    int64_t heads = 0;
    if (seq_first < 0 && qs->rank == 4 && !qs->d[1].n && qs->d[1].c >= 1 && d % qs->d[1].c == 0 &&
        qs->d[3].c * qs->d[1].c == d)
        heads = qs->d[1].c;
    else if (seq_first >= 0 && qs->rank == 3 && qs->d[0].n == 1 && qs->d[0].c >= 1 &&
             d % qs->d[0].c == 0 && qs->d[2].c * qs->d[0].c == d && imp_dim_eq(qs->d[1], xs->d[1]))
        heads = qs->d[0].c;
    if (!heads)
        return attention_error(c, k,
                               seq_first < 0 ? "its q is not [N,heads,T,D/heads]"
                                             : "its q is not [N*heads,T,D/heads]");
    if (seq_first >= 0)
        region_add(&r, seq_first);
    for (int i = 0; i < nproj; i++) {
        region_add(&r, qkv[i].mm);
        if (qkv[i].add >= 0)
            region_add(&r, qkv[i].add);
    }
    region_add(&r, outp.mm);
    if (outp.add >= 0)
        region_add(&r, outp.add);
    /* The weight transposes and mask arithmetic are not activations: they
	 * emit nothing, so they need not be claimed. Everything claimed must be
	 * read only inside. */
    int act_nodes[sizeof r.nodes / sizeof r.nodes[0]], na = 0;
    for (int i = 0; i < r.n; i++) {
        const imp_node *nd = &c->g->nodes[r.nodes[i]];
        if (nd->nout > 0 && nd->out[0] >= 0 && imp_is_act(c->g, nd->out[0]))
            act_nodes[na++] = r.nodes[i];
    }
    if (!closed(c, act_nodes, na, result))
        return attention_error(c, k, "something outside it reads a value computed inside");
    imp_group *gr = new_group(c, IMP_G_ATTENTION, x, result, qkv[0].mm, act_nodes, na);
    if (!gr)
        return attention_error(c, k, "part of it belongs to another pattern");
    gr->heads = heads;
    gr->out_in = outp.add < 0;
    gr->causal = masked;
    for (int i = 0; i < nproj; i++) {
        gr->params[gr->nparams++] = qkv[i].w;
        gr->params[gr->nparams++] = qkv[i].b;
    }
    gr->params[gr->nparams++] = outp.w;
    gr->params[gr->nparams++] = outp.b;
}

void imp_fuse(imp_graph *g)
{
    fctx c = {g};
    /* Attention first: it takes linear layers that the other patterns would. */
    for (int i = 0; i < g->nnodes; i++)
        if (imp_is_op(g, g->order[i], "Softmax"))
            find_attention(&c, g->order[i]);
    for (int i = 0; i < g->nnodes; i++) {
        int k = g->order[i];
        if (claimed(&c, k))
            continue;
        if (imp_is_op(g, k, "ReduceMean"))
            find_layernorm(&c, k);
        else if (imp_is_op(g, k, "Erf"))
            find_gelu_erf(&c, k);
        else if (imp_is_op(g, k, "Tanh"))
            find_gelu_tanh(&c, k);
        else if (imp_is_op(g, k, "Sigmoid"))
            find_silu(&c, k);
    }
    for (int i = 0; i < g->nnodes; i++) {
        int k = g->order[i];
        if (claimed(&c, k))
            continue;
        if (imp_is_op(g, k, "MatMul"))
            find_linear(&c, k);
        else if (imp_is_op(g, k, "Gather"))
            find_embedding(&c, k);
    }
    /* After the linear layers, which take their biases' Adds. */
    for (int i = 0; i < g->nnodes; i++) {
        int k = g->order[i];
        if (!claimed(&c, k) && (imp_is_op(g, k, "Concat") || imp_is_op(g, k, "Add")))
            find_tokens(&c, k);
    }
}
