/*
 * match.c: from ONNX nodes to Burst layers.
 *
 * After fuse.c has found its patterns, one walk over the ordered,
 * shape-inferred graph emits one layer per pattern or per node; nodes that
 * compute only from constants and initializers (shape arithmetic,
 * transposed weights, masks) emit nothing. Layers are named after the ONNX
 * nodes, or after the scope a pattern's nodes share.
 *
 * Reshapes, flattens, squeezes and casts of activations are views: they
 * emit nothing until a layer needs the value in that shape, and then one
 * `reshape` or `flatten`. Every initializer is accounted for: a trainable
 * parameter of exactly one layer (or tied, for a language-model head that
 * shares its embedding's table), BatchNorm running statistics, a constant,
 * or unused; and the written model's parameter count is the parameters'.
 */
#include "import.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct mctx {
    imp_graph *g;
    imp_model *m;
    int notes_cap;
    /* Layers per name scope, counting those below it: names drop the op type
	 * of a scope that holds one layer ("/layer1/conv1/Conv" -> layer1_conv1). */
    int scope_cap, scope_n;
    const char **scope_key;
    int *scope_count;
    bool loss; /* add labels and a loss per classifier output */
} mctx;

static imp_value *val(mctx *c, int v)
{
    return &c->g->values[v];
}

/* ---- names ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* A Burst identifier from an ONNX name: torch's scopes ("/layer1/layer1.0/conv1/Conv")
 * lose the components that the next one repeats ("layer1" before "layer1.0"),
 * other characters become '_'. */
static char *clean_name(arena *a, const char *s)
{
    size_t n = strlen(s);
    if (n > 200)
        s += n - 200, n = 200;
    char *buf = arena_alloc(a, n + 8), *o = buf;
    const char *p = s;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        const char *next = *e ? e + 1 : e;
        size_t len = (size_t)(e - p);
        bool redundant = len > 0 && strncmp(next, p, len) == 0 && next[len] == '.';
        if (!redundant && len > 0) {
            if (o > buf && o[-1] != '_')
                *o++ = '_';
            for (const char *q = p; q < e; q++) {
                bool ok = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                          (*q >= '0' && *q <= '9');
                char ch = ok ? *q : '_';
                if (ch == '_' && o > buf && o[-1] == '_')
                    continue;
                *o++ = ch;
            }
        }
        p = e;
    }
    while (o > buf && o[-1] == '_')
        o--;
    *o = 0;
    char *start = buf;
    while (*start == '_')
        start++;
    if (*start >= '0' && *start <= '9')
        return arena_printf(a, "n%s", start);
    return start;
}

static const char *const reserved[] = {"model",  "gpu",  "cluster", "job",  "import",
                                       "input",  "let",  "block",   "for",  "in",
                                       "return", "true", "false",   "none", "batch"};

static int name_find(const imp_model *m, const char *s)
{
    if (!m->hash_cap)
        return -1;
    for (size_t h = hash_str(s) & (size_t)(m->hash_cap - 1); m->hash[h] >= 0;
         h = (h + 1) & (size_t)(m->hash_cap - 1))
        if (strcmp(m->layers[m->hash[h]].name, s) == 0)
            return m->hash[h];
    return -1;
}

static void name_insert(imp_model *m, int id)
{
    if (2 * (m->nlayers + 1) > m->hash_cap) {
        int cap = m->hash_cap ? 2 * m->hash_cap : 256;
        m->hash = arena_alloc(m->a, sizeof *m->hash * (size_t)cap);
        memset(m->hash, -1, sizeof *m->hash * (size_t)cap);
        m->hash_cap = cap;
        for (int k = 0; k < m->nlayers; k++)
            if (k != id) {
                size_t h = hash_str(m->layers[k].name) & (size_t)(cap - 1);
                while (m->hash[h] >= 0)
                    h = (h + 1) & (size_t)(cap - 1);
                m->hash[h] = k;
            }
    }
    size_t h = hash_str(m->layers[id].name) & (size_t)(m->hash_cap - 1);
    while (m->hash[h] >= 0)
        h = (h + 1) & (size_t)(m->hash_cap - 1);
    m->hash[h] = id;
}

bool imp_reserved(const char *s)
{
    for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
        if (strcmp(s, reserved[k]) == 0)
            return true;
    return false;
}

const char *imp_unique_name(imp_model *m, const char *s)
{
    char base[300];
    snprintf(base, sizeof base, "%s", *s ? s : "layer");
    for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
        if (strcmp(base, reserved[k]) == 0)
            strcat(base, "_");
    int holder = name_find(m, base);
    if (holder < 0)
        return arena_strdup(m->a, base);
    /* The first holder of a name remembers the next suffix to try, so a
	 * thousand nodes called "x" cost a thousand lookups, not half a million. */
    imp_layer *h = &m->layers[holder];
    char buf[340];
    for (int k = h->suffix > 2 ? h->suffix : 2;; k++) {
        snprintf(buf, sizeof buf, "%s_%d", base, k);
        if (name_find(m, buf) < 0) {
            h->suffix = k + 1;
            return arena_strdup(m->a, buf);
        }
    }
}

/* Scopes: a table from scope strings to counts. */
static size_t scope_hash(const char *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < len; k++)
        h = (h ^ (unsigned char)key[k]) * 1099511628211ull;
    return (size_t)h;
}

static int *scope_slot(mctx *c, const char *key, size_t len, bool add)
{
    if (add && 2 * (c->scope_n + 1) > c->scope_cap) {
        int old_cap = c->scope_cap;
        const char **old_key = c->scope_key;
        int *old_count = c->scope_count;
        c->scope_cap = old_cap ? 2 * old_cap : 1024;
        c->scope_key = arena_alloc(c->g->a, sizeof *c->scope_key * (size_t)c->scope_cap);
        c->scope_count = arena_alloc(c->g->a, sizeof *c->scope_count * (size_t)c->scope_cap);
        for (int i = 0; i < old_cap; i++)
            if (old_key[i]) {
                size_t j = scope_hash(old_key[i], strlen(old_key[i])) & (size_t)(c->scope_cap - 1);
                while (c->scope_key[j])
                    j = (j + 1) & (size_t)(c->scope_cap - 1);
                c->scope_key[j] = old_key[i];
                c->scope_count[j] = old_count[i];
            }
    }
    if (!c->scope_cap)
        return NULL;
    size_t mask = (size_t)c->scope_cap - 1, i = scope_hash(key, len) & mask;
    for (; c->scope_key[i]; i = (i + 1) & mask)
        if (strlen(c->scope_key[i]) == len && memcmp(c->scope_key[i], key, len) == 0)
            return &c->scope_count[i];
    if (!add)
        return NULL;
    c->scope_key[i] = arena_strndup(c->g->a, key, len);
    c->scope_count[i] = 0;
    c->scope_n++;
    return &c->scope_count[i];
}

/* Groups per exact scope: a group is named after its scope when it is the
 * only group there (the scope's other layers are its neighbours, named apart). */
static int *group_slot(mctx *c, const char *scope, size_t len, bool add)
{
    char *key = arena_alloc(c->g->a, len + 2);
    key[0] = '\x01';
    memcpy(key + 1, scope, len);
    return scope_slot(c, key, len + 1, add);
}

/* The scope of an ONNX name: everything before its last '/'. */
static size_t scope_len(const char *name)
{
    const char *slash = strrchr(name, '/');
    return slash ? (size_t)(slash - name) : 0;
}

/* Counts one layer-making unit in its scope and every scope above it. */
static void scope_count(mctx *c, const char *name, size_t len)
{
    if (len > 200)
        return;
    for (int depth = 0; len > 0 && depth < 16; depth++) {
        (*scope_slot(c, name, len, true))++;
        while (len > 0 && name[len - 1] != '/')
            len--;
        while (len > 0 && name[len - 1] == '/')
            len--;
    }
}

/* Longest common scope of a group's node names (whole components). */
static size_t common_scope(mctx *c, const imp_group *gr)
{
    const char *first = c->g->nodes[gr->nodes[0]].name;
    size_t len = scope_len(first);
    for (int k = 1; k < gr->nnodes; k++) {
        const char *s = c->g->nodes[gr->nodes[k]].name;
        size_t l = 0, sl = scope_len(s);
        while (l < len && l < sl && first[l] == s[l])
            l++;
        if (l < len && !(l == sl && first[l] == '/'))
            while (l > 0 && first[l - 1] != '/')
                l--;
        while (l > 0 && first[l - 1] == '/')
            l--;
        if (l < len)
            len = l;
    }
    return len;
}

/* The name of the layer a node (or its group) makes. */
static const char *layer_name(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const char *full = n->name;
    if (!*full)
        full = n->nout > 0 && n->out[0] >= 0 ? val(c, n->out[0])->name : n->op;
    if (n->group >= 0) {
        const imp_group *gr = &c->g->groups[n->group];
        size_t len = common_scope(c, gr);
        const char *base = c->g->nodes[gr->nodes[0]].name;
        if (len == 0) {
            base = c->g->nodes[gr->first].name;
            len = scope_len(base);
        }
        int *cnt = len ? group_slot(c, base, len, false) : NULL;
        if (len && cnt && *cnt == 1)
            return clean_name(c->g->a, arena_strndup(c->g->a, base, len));
        const char *first = c->g->nodes[gr->first].name;
        return clean_name(c->g->a, *first ? first : full);
    }
    size_t len = scope_len(full);
    int *cnt = len ? scope_slot(c, full, len, false) : NULL;
    if (cnt && *cnt == 1)
        return clean_name(c->g->a, arena_strndup(c->g->a, full, len));
    return clean_name(c->g->a, full);
}

/* ---- layers ---- */

static bool shape_eq(const imp_shape *a, const imp_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int k = 0; k < a->rank; k++)
        if (!imp_dim_eq(a->d[k], b->d[k]))
            return false;
    return true;
}

static int add_layer(mctx *c, const char *name, const char *op, const int *args, int nargs,
                     const char *attrs, const imp_shape *shape, bool i32)
{
    imp_model *m = c->m;
    if (imp_per_sample(shape) < 0)
        ice("layer '%s' has no batch first or too many elements", name);
    arena_grow(m->a, (void **)&m->layers, &m->cap, m->nlayers + 1, sizeof *m->layers);
    int id = m->nlayers;
    imp_layer *l = &m->layers[id];
    memset(l, 0, sizeof *l);
    l->name = imp_unique_name(m, name);
    l->op = op;
    l->nargs = nargs;
    l->args = arena_alloc(m->a, sizeof *l->args * (size_t)(nargs + 1));
    if (nargs)
        memcpy(l->args, args, sizeof *args * (size_t)nargs);
    l->attrs = arena_strdup(m->a, attrs ? attrs : "");
    l->shape = *shape;
    l->i32 = i32;
    name_insert(m, id);
    m->nlayers++;
    return id;
}

/* Text of attributes, built up as ", key = value". */
typedef struct attrs {
    char s[600];
    size_t n;
} attrs;

static void put(attrs *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(attrs *a, const char *fmt, ...)
{
    if (a->n >= sizeof a->s)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(a->s + a->n, sizeof a->s - a->n, fmt, ap);
    va_end(ap);
    if (k > 0)
        a->n += (size_t)k;
}

static void put_pair(attrs *a, const char *key, int64_t x, int64_t y, int64_t dflt)
{
    if (x == y && x == dflt)
        return;
    if (x == y)
        put(a, ", %s = %lld", key, (long long)x);
    else
        put(a, ", %s = [%lld, %lld]", key, (long long)x, (long long)y);
}

/* The shortest decimal that reads back as the same float32: ONNX's
 * attributes are float32, and 0.9f is meant as 0.9. */
static double decimal(double v)
{
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if ((float)strtod(buf, NULL) == (float)v)
            break;
    }
    return strtod(buf, NULL);
}

static void put_real(attrs *a, const char *key, double v, double dflt)
{
    if ((float)v == (float)dflt)
        return;
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if ((float)strtod(buf, NULL) == (float)v)
            break;
    }
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    put(a, ", %s = %s", key, buf);
}

/* The layer holding v in v's own shape, adding a reshape (or flatten) where
 * an earlier view changed it; -1 after an error (reported here or upstream). */
static int need(mctx *c, int v, int k)
{
    imp_value *x = val(c, v);
    if (x->layer < 0)
        return -1;
    const imp_layer *l = &c->m->layers[x->layer];
    if (l->i32 && k >= 0 && strcmp(c->g->nodes[k].op, "Gather") != 0) {
        imp_error(c->g, k,
                  "it reads '%s', integers; Burst reads integer inputs only as an embedding's "
                  "token ids",
                  x->name);
        return -1;
    }
    if (shape_eq(&l->shape, &x->shape))
        return x->layer;
    char b[256];
    int64_t ps = imp_per_sample(&x->shape);
    if (ps < 0) {
        imp_error(c->g, x->node,
                  "its output '%s' has shape %s: Burst keeps the batch as the first dimension of "
                  "every activation",
                  x->name, imp_shape_str(&x->shape, b, sizeof b));
        x->layer = -1;
        return -1;
    }
    attrs a = {0};
    const char *op = "flatten";
    if (x->shape.rank != 2) {
        op = "reshape";
        put(&a, ", shape = [");
        for (int d = 1; d < x->shape.rank; d++)
            put(&a, "%s%lld", d > 1 ? ", " : "", (long long)x->shape.d[d].c);
        put(&a, "]");
    }
    int arg = x->layer;
    const char *name = x->node >= 0 ? layer_name(c, x->node) : x->name;
    x->layer = add_layer(c, name, op, &arg, 1, a.s, &x->shape, l->i32);
    return x->layer;
}

/* An activation argument: v must be one. */
static int act_arg(mctx *c, int v, int k, const char *what)
{
    if (v < 0 || !imp_is_act(c->g, v)) {
        imp_error(c->g, k, "its %s is a constant; Burst computes layers of activations", what);
        return -1;
    }
    return need(c, v, k);
}

/* An activation argument of an elementwise op, in whatever shape its layer
 * has: a dropout between a global pool ([N,C]) and a flatten that ONNX sees
 * as [N,C,1,1] needs no reshape on either side. */
static int elementwise_arg(mctx *c, int v, int k)
{
    if (v < 0 || !imp_is_act(c->g, v) || val(c, v)->layer < 0)
        return act_arg(c, v, k, "input");
    if (c->m->layers[val(c, v)->layer].i32)
        return need(c, v, k); /* reported there */
    return val(c, v)->layer;
}

static void note(mctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(mctx *c, const char *fmt, ...)
{
    if (c->m->nnotes >= 64)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    arena_grow(c->m->a, (void **)&c->m->notes, &c->notes_cap, c->m->nnotes + 1,
               sizeof *c->m->notes);
    c->m->notes[c->m->nnotes++] = arena_strdup(c->m->a, buf);
}

/* Takes the initializer behind v as a trainable parameter of layer. Returns
 * the layer that held it already (a tie, or weights the export shared), or -1. */
static int take_param(mctx *c, int v, int layer, imp_role role)
{
    int i = imp_init_of(c->g, v);
    if (i < 0)
        ice("take_param: no initializer behind '%s'", val(c, v)->name);
    imp_value *p = val(c, i);
    if (p->role == ROLE_PARAM || p->role == ROLE_STATS)
        return p->layer;
    p->role = role;
    p->layer = layer;
    return -1;
}

/* A parameter that no tie explains: counted again, and said so. The first layer
 * that takes it records which of its Burst parameters (pname) it is: seen_in_out for
 * a weight that the op reads as [in, out] (MatMul, Gemm without transB), which Burst
 * holds as [out, in], and row0 >= 0 for one of several tensors fused into the rows of
 * one parameter. */
static void param_at(mctx *c, int v, int layer, imp_role role, const char *pname, bool seen_in_out,
                     int64_t row0)
{
    int old = take_param(c, v, layer, role);
    imp_value *p = val(c, imp_init_of(c->g, v));
    if (old < 0) {
        p->pname = pname;
        p->transposed = seen_in_out != (imp_transposes_to_init(c->g, v) % 2 == 1);
        p->row0 = row0;
        return;
    }
    c->m->sum.shared += p->elems;
    p->shares++;
}

static void param(mctx *c, int v, int layer, imp_role role, const char *pname)
{
    param_at(c, v, layer, role, pname, false, -1);
}

/* A weight input: it must be an initializer, or a view of one. */
static bool weight_ok(mctx *c, int k, int v, const char *what)
{
    if (v < 0)
        return true;
    if (imp_is_act(c->g, v) || imp_init_of(c->g, v) < 0) {
        imp_error(c->g, k, "its %s '%s' is %s, not an initializer", what, val(c, v)->name,
                  imp_is_act(c->g, v) ? "computed from the inputs" : "computed by other nodes");
        return false;
    }
    return true;
}

/* Pads: ONNX lists [begin..., end...]; Burst pads symmetrically. */
static bool sym_pads(mctx *c, int k, const imp_shape *x, const int64_t *kernel, int64_t *ph,
                     int64_t *pw)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_attr *pd = imp_attr_get(n, "pads"), *ap = imp_attr_get(n, "auto_pad"),
                   *st = imp_attr_get(n, "strides"), *dl = imp_attr_get(n, "dilations");
    int64_t p[4] = {0, 0, 0, 0};
    if (ap && ap->kind == IA_STRING && strncmp(ap->s, "SAME", 4) == 0) {
        for (int d = 0; d < 2; d++) {
            int64_t s = st ? st->ints[d] : 1, dil = dl ? dl->ints[d] : 1, in = x->d[2 + d].c;
            int64_t o = (in + s - 1) / s, span = dil * (kernel[d] - 1) + 1;
            int64_t total = (o - 1) * s + span - in;
            if (total < 0)
                total = 0;
            p[d] = strcmp(ap->s, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
            p[d + 2] = total - p[d];
        }
    } else if (pd && pd->kind == IA_INTS && pd->n == 4) {
        memcpy(p, pd->ints, sizeof p);
    }
    if (p[0] != p[2] || p[1] != p[3]) {
        imp_error(c->g, k,
                  "its padding is not symmetric (top %lld, left %lld, bottom %lld, right %lld); "
                  "Burst pads both sides alike",
                  (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
        return false;
    }
    *ph = p[0];
    *pw = p[1];
    return true;
}

static bool only_output(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    for (int o = 1; o < n->nout; o++)
        if (n->out[o] >= 0 && val(c, n->out[o])->nusers > 0) {
            imp_error(c->g, k, "its output %d ('%s') is read; Burst's layer has one output", o + 1,
                      val(c, n->out[o])->name);
            return false;
        }
    return true;
}

static void set_out(mctx *c, int k, int layer)
{
    c->g->values[c->g->nodes[k].out[0]].layer = layer;
}

static void lower_conv(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape, *w = &val(c, n->in[1])->shape;
    if (x->rank != 4)
        return (void)imp_error(c->g, k, "a %d-d convolution; Burst has conv2d only", x->rank - 2);
    if (!weight_ok(c, k, n->in[1], "weight") ||
        !weight_ok(c, k, n->nin > 2 ? n->in[2] : -1, "bias"))
        return;
    int64_t kernel[2] = {w->d[2].c, w->d[3].c}, ph, pw;
    if (!sym_pads(c, k, x, kernel, &ph, &pw))
        return;
    const imp_attr *st = imp_attr_get(n, "strides"), *dl = imp_attr_get(n, "dilations");
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    bool bias = n->nin > 2 && n->in[2] >= 0;
    attrs a = {0};
    put(&a, ", channels = %lld", (long long)w->d[0].c);
    put_pair(&a, "kernel", kernel[0], kernel[1], -1);
    put_pair(&a, "stride", st ? st->ints[0] : 1, st ? st->ints[1] : 1, 1);
    put_pair(&a, "pad", ph, pw, 0);
    put_pair(&a, "dilation", dl ? dl->ints[0] : 1, dl ? dl->ints[1] : 1, 1);
    int64_t groups = imp_attr_int(n, "group", 1);
    if (groups != 1)
        put(&a, ", groups = %lld", (long long)groups);
    if (!bias)
        put(&a, ", bias = 0");
    int l =
        add_layer(c, layer_name(c, k), "conv2d", &arg, 1, a.s, &val(c, n->out[0])->shape, false);
    param(c, n->in[1], l, ROLE_PARAM, "weight");
    if (bias)
        param(c, n->in[2], l, ROLE_PARAM, "bias");
    set_out(c, k, l);
}

/* "/transformer/h.0/attn/MatMul" -> "transformer.h.0.attn.weight": the name PyTorch gives
 * the weight of the module a node is in (its scope), or NULL outside any. */
static const char *scope_weight(mctx *c, const char *node)
{
    size_t len = scope_len(node), at = 0;
    while (at < len && node[at] == '/')
        at++;
    if (at == len || len > 400)
        return NULL;
    char *s = arena_printf(c->g->a, "%.*s.weight", (int)(len - at), node + at);
    for (char *p = s; *p; p++)
        if (*p == '/')
            *p = '.';
    return s;
}

/* The table t of an embedding is also head node k's weight: its state_dict name under
 * the module of whichever reader (the embedding's gather, the head) the export did not
 * name it after, where the scopes give exactly one such name the graph does not use. */
static void name_tie(mctx *c, imp_value *t, int k)
{
    const char *other = NULL;
    for (int u = -1; u < t->nusers; u++) {
        const char *s = scope_weight(c, c->g->nodes[u < 0 ? k : t->users[u]].name);
        if (!s || !strcmp(s, t->name) || (other && !strcmp(s, other)))
            continue;
        if (other)
            return; /* two candidates: no sure name */
        other = s;
    }
    if (other && imp_value_find(c->g, other) < 0 && ir_weight_name_ok(other))
        t->alias = other;
}

/* A linear layer: x by a weight of [in, out] as the op sees it (unless out_in: Gemm
 * with transB), an optional bias. */
static int emit_linear(mctx *c, int k, const char *name, int x, int w, int b, int64_t features,
                       int out, bool out_in)
{
    int arg = act_arg(c, x, k, "input");
    if (arg < 0)
        return -1;
    /* A weight that an embedding holds already is its table: a tied head. */
    imp_value *wi = val(c, imp_init_of(c->g, w));
    int tie = -1;
    if (wi->role == ROLE_PARAM && wi->layer >= 0 &&
        strcmp(c->m->layers[wi->layer].op, "embedding") == 0 && wi->shape.rank == 2 &&
        wi->shape.d[0].c == features)
        tie = wi->layer;
    attrs a = {0};
    put(&a, ", out = %lld", (long long)features);
    if (b < 0)
        put(&a, ", bias = 0");
    if (tie >= 0) {
        put(&a, ", tie = %s", c->m->layers[tie].name);
        name_tie(c, wi, k);
    }
    int l = add_layer(c, name, "linear", &arg, 1, a.s, &val(c, out)->shape, false);
    if (tie < 0)
        param_at(c, w, l, ROLE_PARAM, "weight", !out_in, -1);
    if (b >= 0)
        param(c, b, l, ROLE_PARAM, "bias");
    return l;
}

static void lower_gemm(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    if (imp_attr_int(n, "transA", 0))
        return (void)imp_error(c->g, k, "transA = 1: Burst's linear layers read [N, features]");
    if (!weight_ok(c, k, n->in[1], "weight") ||
        !weight_ok(c, k, n->nin > 2 ? n->in[2] : -1, "bias"))
        return;
    double alpha = imp_attr_float(n, "alpha", 1), beta = imp_attr_float(n, "beta", 1);
    bool bias = n->nin > 2 && n->in[2] >= 0;
    if (alpha != 1 || (bias && beta != 1))
        return (void)imp_error(c->g, k, "alpha and beta must be 1 for a linear layer");
    const imp_shape *w = &val(c, n->in[1])->shape;
    int64_t features = imp_attr_int(n, "transB", 0) ? w->d[0].c : w->d[1].c;
    if (bias && !imp_is_bias(c->g, n->in[2], features))
        return (void)imp_error(c->g, k, "its bias is not a vector of the %lld outputs",
                               (long long)features);
    int l = emit_linear(c, k, layer_name(c, k), n->in[0], n->in[1], bias ? n->in[2] : -1, features,
                        n->out[0], imp_attr_int(n, "transB", 0) != 0);
    if (l >= 0)
        set_out(c, k, l);
}

static void lower_pool(mctx *c, int k, bool max)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape;
    const imp_attr *ks = imp_attr_get(n, "kernel_shape"), *st = imp_attr_get(n, "strides"),
                   *dl = imp_attr_get(n, "dilations");
    if (x->rank != 4)
        return (void)imp_error(c->g, k, "a %d-d pool; Burst pools in 2-d", x->rank - 2);
    if (dl && dl->kind == IA_INTS && (dl->ints[0] != 1 || dl->ints[1] != 1))
        return (void)imp_error(c->g, k, "a dilated pool; Burst's pools are not dilated");
    if (max && imp_attr_int(n, "storage_order", 0) != 0)
        return (void)imp_error(c->g, k, "storage_order = 1 is not supported");
    if (!only_output(c, k))
        return;
    int64_t ph, pw, sh = st ? st->ints[0] : 1, sw = st ? st->ints[1] : 1;
    if (!sym_pads(c, k, x, ks->ints, &ph, &pw))
        return;
    /* torch writes avg_pool2d(count_include_pad=True) with padding as a Pad of
	 * zeros, then a pool without: one avgpool2d that counts the pads. */
    int src = n->in[0], pad = imp_producer(c->g, src);
    bool count_pad = imp_attr_int(n, "count_include_pad", 0) != 0;
    if (!max && imp_is_op(c->g, pad, "Pad") && val(c, src)->layer >= 0) {
        const imp_shape *px = &val(c, c->g->nodes[pad].in[0])->shape;
        ph += (x->d[2].c - px->d[2].c) / 2;
        pw += (x->d[3].c - px->d[3].c) / 2;
        src = c->g->nodes[pad].in[0];
        count_pad = true;
    }
    if (2 * ph > ks->ints[0] || 2 * pw > ks->ints[1])
        return (void)imp_error(c->g, k, "pads of more than half the window are not supported");
    int arg = act_arg(c, src, k, "input");
    if (arg < 0)
        return;
    if (ks->ints[0] == 1 && ks->ints[1] == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0) {
        note(c, "%s '%s' has a 1x1 window and stride 1: the identity, left out", n->op, n->name);
        set_out(c, k, arg);
        return;
    }
    attrs a = {0};
    put_pair(&a, "kernel", ks->ints[0], ks->ints[1], -1);
    if (!(sh == ks->ints[0] && sw == ks->ints[1]))
        put_pair(&a, "stride", sh, sw, -1);
    put_pair(&a, "pad", ph, pw, 0);
    if (imp_attr_int(n, "ceil_mode", 0))
        put(&a, ", ceil = 1");
    if (!max && !count_pad && (ph || pw))
        put(&a, ", count_pad = 0");
    int l = add_layer(c, layer_name(c, k), max ? "maxpool2d" : "avgpool2d", &arg, 1, a.s,
                      &val(c, n->out[0])->shape, false);
    set_out(c, k, l);
}

static void lower_batchnorm(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    for (int i = 1; i < 5; i++)
        if (!weight_ok(c, k, n->in[i], i < 3 ? "scale or bias" : "running statistic"))
            return;
    if (!only_output(c, k))
        return;
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    imp_shape s4 = val(c, n->in[0])->shape;
    if (s4.rank == 2 || s4.rank == 3) {
        /* Burst's batchnorm2d normalises [N,C,H,W] per channel: give it [N,C,L,1]. */
        attrs r = {0};
        put(&r, ", shape = [%lld, %lld, 1]", (long long)s4.d[1].c,
            (long long)(s4.rank == 3 ? s4.d[2].c : 1));
        s4.d[2] = s4.rank == 3 ? s4.d[2] : (imp_dim){1, 0, 0};
        s4.d[3] = (imp_dim){1, 0, 0};
        s4.rank = 4;
        arg = add_layer(c, layer_name(c, k), "reshape", &arg, 1, r.s, &s4, false);
    } else if (s4.rank != 4) {
        return (void)imp_error(c->g, k, "batch normalization of a %d-d input", s4.rank);
    }
    attrs a = {0};
    put_real(&a, "eps", imp_attr_float(n, "epsilon", 1e-5), 1e-5);
    /* ONNX keeps momentum of the old statistics, PyTorch and Burst of the new. */
    put_real(&a, "momentum", 1 - decimal(imp_attr_float(n, "momentum", 0.9)), 0.1);
    int l = add_layer(c, layer_name(c, k), "batchnorm2d", &arg, 1, a.s, &s4, false);
    param(c, n->in[1], l, ROLE_PARAM, "weight");
    param(c, n->in[2], l, ROLE_PARAM, "bias");
    param(c, n->in[3], l, ROLE_STATS, "running_mean");
    param(c, n->in[4], l, ROLE_STATS, "running_var");
    set_out(c, k, l);
}

static void lower_layernorm(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape;
    int64_t axis = imp_attr_int(n, "axis", -1);
    if (axis != -1 && axis != x->rank - 1)
        return (void)imp_error(c->g, k,
                               "it normalises over axes %lld.., Burst's layernorm over "
                               "the last one only",
                               (long long)axis);
    if (n->nin < 3 || n->in[2] < 0)
        return (void)imp_error(c->g, k, "it has no bias; Burst's layernorm has a scale and a bias");
    if (!weight_ok(c, k, n->in[1], "scale") || !weight_ok(c, k, n->in[2], "bias") ||
        !only_output(c, k))
        return;
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    attrs a = {0};
    put_real(&a, "eps", imp_attr_float(n, "epsilon", 1e-5), 1e-5);
    int l = add_layer(c, layer_name(c, k), "layernorm", &arg, 1, a.s, x, false);
    param(c, n->in[1], l, ROLE_PARAM, "weight");
    param(c, n->in[2], l, ROLE_PARAM, "bias");
    set_out(c, k, l);
}

static void lower_dropout(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    double p = imp_attr_float(n, "ratio", 0.5);
    if (n->nin > 1 && n->in[1] >= 0) {
        p = imp_scalar(c->g, n->in[1]);
        if (isnan(p))
            return (void)imp_error(c->g, k, "its ratio is computed at run time");
    }
    if (!(p >= 0 && p < 1))
        return (void)imp_error(c->g, k, "ratio %g; Burst's dropout takes 0 <= p < 1", p);
    if (!only_output(c, k))
        return;
    int arg = elementwise_arg(c, n->in[0], k);
    if (arg < 0)
        return;
    attrs a = {0};
    put_real(&a, "p", p, 0.5);
    set_out(
        c, k,
        add_layer(c, layer_name(c, k), "dropout", &arg, 1, a.s, &c->m->layers[arg].shape, false));
}

/* Softmax over one axis (before opset 13: over the flattened trailing axes,
 * which is the same for the last one). */
static void lower_softmax(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape;
    int64_t axis = imp_attr_int(n, "axis", c->g->opset >= 13 ? -1 : 1);
    if (axis < 0)
        axis += x->rank;
    if (axis < 1 || axis >= x->rank || (c->g->opset < 13 && axis != x->rank - 1))
        return (void)imp_error(c->g, k,
                               "softmax over axis %lld of %d; Burst's softmax takes one "
                               "axis other than the batch",
                               (long long)imp_attr_int(n, "axis", -1), x->rank);
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    attrs a = {0};
    if (axis != x->rank - 1)
        put(&a, ", axis = %lld", (long long)axis);
    set_out(c, k, add_layer(c, layer_name(c, k), "softmax", &arg, 1, a.s, x, false));
}

static void lower_add(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    int act, other;
    if (imp_split_act(c->g, k, &act, &other)) {
        char b[256];
        imp_error(c->g, k,
                  "it adds %s '%s' %s to an activation; Burst adds activations of one shape "
                  "(biases and position embeddings are taken by their linear or embedding layer)",
                  imp_init_of(c->g, other) >= 0 ? "the learned tensor" : "the constant",
                  val(c, other)->name, imp_shape_str(&val(c, other)->shape, b, sizeof b));
        return;
    }
    const imp_shape *a = &val(c, n->in[0])->shape, *b = &val(c, n->in[1])->shape;
    if (!shape_eq(a, b)) {
        char sa[256], sb[256];
        imp_error(c->g, k, "it broadcasts %s and %s; Burst adds activations of one shape",
                  imp_shape_str(a, sa, sizeof sa), imp_shape_str(b, sb, sizeof sb));
        return;
    }
    int args[2] = {need(c, n->in[0], k), need(c, n->in[1], k)};
    if (args[0] < 0 || args[1] < 0)
        return;
    set_out(c, k, add_layer(c, layer_name(c, k), "add", args, 2, "", a, false));
}

/* g is one value per sample and channel of x: [N,C,1,...] against [N,C,...]. */
static bool is_gate_of(const imp_shape *g, const imp_shape *x)
{
    if (x->rank < 3 || g->rank != x->rank || !imp_dim_eq(g->d[0], x->d[0]) ||
        !imp_dim_eq(g->d[1], x->d[1]))
        return false;
    for (int i = 2; i < g->rank; i++)
        if (g->d[i].n || g->d[i].c != 1)
            return false;
    return true;
}

/* Mul of two activations of one shape, or of an activation and its squeeze-and-excitation
 * gate ([N,C,1,1] times [N,C,H,W], either order): Burst's mul, the gate second. A Mul by a
 * constant or a learned tensor outside the fused patterns has no Burst op. */
static void lower_mul(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    int act, other;
    if (imp_split_act(c->g, k, &act, &other)) {
        char b[256];
        imp_error(c->g, k,
                  "it multiplies an activation by %s '%s' %s; Burst's mul takes two activations",
                  imp_init_of(c->g, other) >= 0 ? "the learned tensor" : "the constant",
                  val(c, other)->name, imp_shape_str(&val(c, other)->shape, b, sizeof b));
        return;
    }
    int x = n->in[0], s = n->in[1];
    const imp_shape *a = &val(c, x)->shape, *b = &val(c, s)->shape;
    if (!shape_eq(a, b) && !is_gate_of(b, a)) {
        if (!is_gate_of(a, b)) {
            char sa[256], sb[256];
            imp_error(c->g, k,
                      "it broadcasts %s and %s; Burst's mul takes two activations of one shape, "
                      "or [N,C,...] and one value per sample and channel [N,C,1,...]",
                      imp_shape_str(a, sa, sizeof sa), imp_shape_str(b, sb, sizeof sb));
            return;
        }
        x = n->in[1];
        s = n->in[0];
    }
    int args[2] = {need(c, x, k), need(c, s, k)};
    if (args[0] < 0 || args[1] < 0)
        return;
    set_out(c, k, add_layer(c, layer_name(c, k), "mul", args, 2, "", &val(c, x)->shape, false));
}

static void lower_concat(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *y = &val(c, n->out[0])->shape;
    int64_t axis = imp_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += y->rank;
    if (axis == 0)
        return (void)imp_error(c->g, k, "it concatenates along the batch");
    int *args = arena_alloc(c->g->a, sizeof *args * (size_t)(n->nin + 1)), na = 0;
    for (int i = 0; i < n->nin; i++) {
        if (n->in[i] < 0)
            continue;
        int l = act_arg(c, n->in[i], k, "input");
        if (l < 0)
            return;
        args[na++] = l;
    }
    attrs a = {0};
    if (axis != 1)
        put(&a, ", axis = %lld", (long long)axis);
    set_out(c, k, add_layer(c, layer_name(c, k), "concat", args, na, a.s, y, false));
}

/* "[0, 2, 3, 1]" */
static const char *perm_text(mctx *c, const int64_t *v, int n)
{
    char buf[8 * IMP_MAX_RANK + 4];
    size_t at = 0;
    buf[at++] = '[';
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%lld", i ? ", " : "", (long long)v[i]);
    snprintf(buf + at, sizeof buf - at, "]");
    return arena_strdup(c->m->a, buf);
}

/* Transpose: a swap of two axes after the batch is one `transpose`; any other permutation
 * that keeps the batch first (convnext's [N,C,H,W] -> [N,H,W,C] around its layer norms) is
 * a chain of them, one swap per axis put in place, in the order a selection sort makes. */
static void lower_transpose(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape;
    const imp_attr *p = imp_attr_get(n, "perm");
    if (p && p->n != x->rank)
        return (void)imp_error(c->g, k, "perm has %d axes, its input %d", p->n, x->rank);
    int64_t want[IMP_MAX_RANK] = {0};
    bool seen[IMP_MAX_RANK] = {false};
    for (int d = 0; d < x->rank; d++) {
        want[d] = p ? p->ints[d] : x->rank - 1 - d;
        if (want[d] < 0 || want[d] >= x->rank || seen[want[d]])
            return (void)imp_error(c->g, k, "perm is not a permutation of its %d axes", x->rank);
        seen[want[d]] = true;
    }
    if (want[0] != 0)
        return (void)imp_error(c->g, k,
                               "a permutation that moves the batch; Burst keeps the batch "
                               "as the first axis");
    int swaps[IMP_MAX_RANK][2], ns = 0;
    int64_t at[IMP_MAX_RANK]; /* at[d]: the input axis now at position d */
    for (int d = 0; d < x->rank; d++)
        at[d] = d;
    for (int d = 1; d < x->rank; d++) {
        int j = d;
        while (at[j] != want[d])
            j++;
        if (j == d)
            continue;
        int64_t t = at[d];
        at[d] = at[j];
        at[j] = t;
        swaps[ns][0] = d;
        swaps[ns++][1] = j;
    }
    int arg = ns ? act_arg(c, n->in[0], k, "input") : need(c, n->in[0], k);
    if (arg < 0 || ns == 0) {
        if (arg >= 0)
            set_out(c, k, arg);
        return;
    }
    imp_shape sh = *x;
    for (int i = 0; i < ns; i++) {
        imp_dim t = sh.d[swaps[i][0]];
        sh.d[swaps[i][0]] = sh.d[swaps[i][1]];
        sh.d[swaps[i][1]] = t;
        attrs a = {0};
        put(&a, ", dims = [%d, %d]", swaps[i][0], swaps[i][1]);
        arg = add_layer(c, layer_name(c, k), "transpose", &arg, 1, a.s,
                        i == ns - 1 ? &val(c, n->out[0])->shape : &sh, false);
        if (ns > 1 && i == 0)
            c->m->layers[arg].note = arena_printf(c->m->a, "permutation %s as %d swaps",
                                                  perm_text(c, want, x->rank), ns);
    }
    set_out(c, k, arg);
}

static void lower_matmul(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    if (!imp_is_act(c->g, n->in[0]) || !imp_is_act(c->g, n->in[1]))
        return (void)imp_error(c->g, k,
                               "a product of a constant and an activation in this "
                               "order; Burst's linear layers take the activation first");
    const imp_shape *a = &val(c, n->in[0])->shape, *b = &val(c, n->in[1])->shape;
    if (a->rank < 3 || a->rank != b->rank)
        return (void)imp_error(c->g, k,
                               "Burst's matmul multiplies [N,...,m,k] by [N,...,k,n] of "
                               "one rank");
    int args[2] = {need(c, n->in[0], k), need(c, n->in[1], k)};
    if (args[0] < 0 || args[1] < 0)
        return;
    set_out(
        c, k,
        add_layer(c, layer_name(c, k), "matmul", args, 2, "", &val(c, n->out[0])->shape, false));
}

static void lower_unary(mctx *c, int k, const char *op)
{
    const imp_node *n = &c->g->nodes[k];
    if (ir_op_lookup(op) == OP_COUNT)
        return (void)imp_error(c->g, k, "Burst's op table has no '%s' op yet", op);
    int arg = elementwise_arg(c, n->in[0], k);
    if (arg < 0)
        return;
    set_out(c, k, add_layer(c, layer_name(c, k), op, &arg, 1, "", &c->m->layers[arg].shape, false));
}

/* ReduceMean over the two spatial axes of [N,C,H,W] (torch's x.mean([2, 3]), as mnasnet and
 * shufflenet_v2 end) is global_avgpool; with keepdims its [N,C,1,1] is a view of Burst's
 * [N,C]. The axes are an attribute before opset 18, a constant input from it. */
static void lower_reduce_mean(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape;
    const imp_attr *a = imp_attr_get(n, "axes");
    const imp_data *d = n->nin > 1 && n->in[1] >= 0 ? val(c, n->in[1])->data : NULL;
    int64_t axes[2];
    int naxes = a && a->kind == IA_INTS ? a->n : d && !d->real ? (int)d->n : -1;
    for (int i = 0; i < naxes && i < 2; i++) {
        axes[i] = a && a->kind == IA_INTS ? a->ints[i] : d->i[i].n ? -99 : d->i[i].c;
        if (axes[i] < 0)
            axes[i] += x->rank;
    }
    bool spatial = x->rank == 4 && naxes == 2 &&
                   ((axes[0] == 2 && axes[1] == 3) || (axes[0] == 3 && axes[1] == 2));
    if (!spatial)
        return (void)imp_error(c->g, k,
                               "burstc maps ReduceMean by itself only over the spatial axes "
                               "[2, 3] of [N,C,H,W] (global_avgpool), and inside the patterns "
                               "it fuses (layer normalization)");
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    imp_shape s = {2, {x->d[0], x->d[1]}};
    set_out(c, k, add_layer(c, layer_name(c, k), "global_avgpool", &arg, 1, "", &s, false));
}

static void lower_view(mctx *c, int k);

/* One constant integer of input i of node n (a one-element list), or false. */
static bool const_int(mctx *c, const imp_node *n, int i, int64_t *out)
{
    if (n->nin <= i || n->in[i] < 0)
        return false;
    const imp_data *d = val(c, n->in[i])->data;
    if (!d || d->real || d->n != 1 || d->i[0].n)
        return false;
    *out = d->i[0].c;
    return true;
}

/* Slice of one axis other than the batch, step 1, its bounds constant (shufflenet_v2's
 * channel split, x[:, :C/2] and x[:, C/2:]): Burst's slice. The length is the inferred
 * shape's; the start is clamped as ONNX does. */
static void lower_slice(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape, *y = &val(c, n->out[0])->shape;
    int64_t start = 0, axis = 0, step = 1;
    bool ok = c->g->opset >= 10 && const_int(c, n, 1, &start) &&
              (n->nin <= 3 || n->in[3] < 0 || const_int(c, n, 3, &axis)) &&
              (n->nin <= 4 || n->in[4] < 0 || const_int(c, n, 4, &step));
    if (axis < 0)
        axis += x->rank;
    ok = ok && step == 1 && axis >= 1 && axis < x->rank && y->rank == x->rank && !x->d[axis].n;
    if (!ok)
        return (void)imp_error(c->g, k,
                               "burstc maps Slice by itself only on one axis other than the "
                               "batch, with step 1 and constant bounds");
    int64_t dim = x->d[axis].c;
    if (start < 0)
        start += dim;
    start = start < 0 ? 0 : start > dim ? dim : start;
    int64_t len = y->d[axis].c;
    if (len == dim)
        return lower_view(c, k);
    if (len <= 0)
        return (void)imp_error(c->g, k, "it takes no elements");
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    attrs a = {0};
    put(&a, ", axis = %lld, start = %lld, end = %lld", (long long)axis, (long long)start,
        (long long)(start + len));
    set_out(c, k, add_layer(c, layer_name(c, k), "slice", &arg, 1, a.s, y, false));
}

/* Gather of one constant index on an axis other than the batch (a vision transformer's class
 * token, x[:, 0]): a slice of that one row, which a view then drops when the index is a
 * scalar. */
static void lower_gather(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape;
    const imp_value *ix = n->nin == 2 && n->in[1] >= 0 ? val(c, n->in[1]) : NULL;
    int64_t axis = imp_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += x->rank;
    if (!imp_is_act(c->g, n->in[0]) || !ix || ix->act || !ix->data || ix->data->real ||
        ix->data->n != 1 || ix->data->i[0].n || axis < 1 || axis >= x->rank || x->d[axis].n)
        return (void)imp_error(c->g, k,
                               "a Gather that is neither an embedding lookup (a table of "
                               "[vocab, dim] indexed by token ids [N,T]) nor one constant index "
                               "on an axis other than the batch");
    int64_t i = ix->data->i[0].c, dim = x->d[axis].c;
    if (i < 0)
        i += dim;
    if (i < 0 || i >= dim)
        return (void)imp_error(c->g, k, "index %lld is outside axis %lld of %lld",
                               (long long)ix->data->i[0].c, (long long)axis, (long long)dim);
    int arg = act_arg(c, n->in[0], k, "input");
    if (arg < 0)
        return;
    imp_shape y = *x;
    y.d[axis] = (imp_dim){1, 0, 0};
    attrs a = {0};
    put(&a, ", axis = %lld, start = %lld, end = %lld", (long long)axis, (long long)i,
        (long long)(i + 1));
    set_out(c, k, add_layer(c, layer_name(c, k), "slice", &arg, 1, a.s, &y, false));
}

/* Clip to [0, 6] is relu6 (torch's ReLU6 and hardtanh(0, 6)), to [0, inf) relu. The bounds
 * are inputs from opset 11 (absent: unbounded), attributes before. */
static void lower_clip(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    double lo = imp_attr_float(n, "min", -INFINITY), hi = imp_attr_float(n, "max", INFINITY);
    if (c->g->opset >= 11) {
        lo = n->nin > 1 && n->in[1] >= 0 ? imp_scalar(c->g, n->in[1]) : -INFINITY;
        hi = n->nin > 2 && n->in[2] >= 0 ? imp_scalar(c->g, n->in[2]) : INFINITY;
        if (isnan(lo) || isnan(hi))
            return (void)imp_error(c->g, k, "its bounds are computed at run time");
    }
    if (lo == 0 && hi == 6)
        lower_unary(c, k, "relu6");
    else if (lo == 0 && hi == INFINITY)
        lower_unary(c, k, "relu");
    else
        imp_error(c->g, k,
                  "Clip to [%g, %g]; Burst has relu ([0, inf)) and relu6 ([0, 6]) and no "
                  "other bounds",
                  lo, hi);
}

/* Views: the output is the input's elements in another shape. */
static void lower_view(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    c->g->values[n->out[0]].layer = val(c, n->in[0])->layer;
}

/* A Pad of zeros around the spatial axes, read only by an AveragePool, is
 * that pool's padding (lower_pool takes it); a Pad of nothing is a view. */
static void lower_pad(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    const imp_shape *x = &val(c, n->in[0])->shape, *y = &val(c, n->out[0])->shape;
    bool same = shape_eq(x, y);
    const imp_attr *mode = imp_attr_get(n, "mode");
    double value =
        n->nin > 2 && n->in[2] >= 0 ? imp_scalar(c->g, n->in[2]) : imp_attr_float(n, "value", 0);
    int user = imp_single_user(c->g, n->out[0]);
    bool spatial_only = x->rank == 4 && imp_dim_eq(x->d[0], y->d[0]) &&
                        imp_dim_eq(x->d[1], y->d[1]) && (y->d[2].c - x->d[2].c) % 2 == 0 &&
                        (y->d[3].c - x->d[3].c) % 2 == 0 && y->d[2].c >= x->d[2].c &&
                        y->d[3].c >= x->d[3].c;
    const imp_attr *pa = imp_attr_get(n, "pads");
    imp_data *pd = n->nin > 1 && n->in[1] >= 0 ? val(c, n->in[1])->data : NULL;
    bool symmetric = true;
    for (int d = 0; d < x->rank && pd; d++)
        symmetric &= imp_dim_eq(pd->i[d], pd->i[d + x->rank]);
    for (int d = 0; pa && pa->kind == IA_INTS && d < pa->n / 2; d++)
        symmetric &= pa->ints[d] == pa->ints[d + pa->n / 2];
    if (same || ((!mode || strcmp(mode->s, "constant") == 0) && value == 0 && spatial_only &&
                 symmetric && imp_is_op(c->g, user, "AveragePool"))) {
        lower_view(c, k);
        return;
    }
    imp_error(c->g, k,
              "Burst pads only inside its layers: a Pad must be zeros around the "
              "spatial axes, alike on both sides, read by one AveragePool");
}

/* ---- groups ---- */

static void emit_group(mctx *c, imp_group *gr)
{
    const char *name = layer_name(c, gr->last);
    int x = act_arg(c, gr->x, gr->first, "input");
    if (x < 0)
        return;
    const imp_shape *out = &val(c, gr->out)->shape;
    attrs a = {0};
    int l = -1;
    switch (gr->kind) {
    case IMP_G_LINEAR:
        l = emit_linear(c, gr->first, name, gr->x, gr->w, gr->b, gr->features, gr->out, false);
        break;
    case IMP_G_GELU: {
        /* The erf form is torch's nn.GELU, exact: not the tanh form's gelu (up to 5e-4 apart). */
        const char *op = strcmp(gr->form, "erf") ? "gelu" : "gelu_erf";
        if (ir_op_lookup(op) == OP_COUNT)
            return;
        l = add_layer(c, name, op, &x, 1, "", out, false);
        c->m->layers[l].note =
            arena_printf(c->m->a, "GELU, %s form: %d ONNX nodes", gr->form, gr->nnodes);
        break;
    }
    case IMP_G_LAYERNORM:
        put_real(&a, "eps", gr->eps, 1e-5);
        l = add_layer(c, name, "layernorm", &x, 1, a.s, out, false);
        c->m->layers[l].note =
            arena_printf(c->m->a, "layer normalization spelled out in %d ONNX nodes", gr->nnodes);
        param(c, gr->w, l, ROLE_PARAM, "weight");
        param(c, gr->b, l, ROLE_PARAM, "bias");
        break;
    case IMP_G_ATTENTION:
        put(&a, ", heads = %lld", (long long)gr->heads);
        if (!gr->causal)
            put(&a, ", causal = 0");
        l = add_layer(c, name, "attention", &x, 1, a.s, out, false);
        c->m->layers[l].note = arena_printf(
            c->m->a, "attention: %d ONNX nodes (projections, heads, scores, %ssoftmax)", gr->nnodes,
            gr->causal ? "causal mask, " : "");
        /* q, k, v (fused: one projection) in w_qkv and b_qkv, then the output's. */
        for (int i = 0; i + 2 < gr->nparams; i += 2) {
            bool fused = gr->nparams == 4;
            int64_t row = fused ? -1 : (i / 2) * val(c, gr->x)->shape.d[2].c;
            param_at(c, gr->params[i], l, ROLE_PARAM, "w_qkv", true, row);
            param_at(c, gr->params[i + 1], l, ROLE_PARAM, "b_qkv", false, row);
        }
        param_at(c, gr->params[gr->nparams - 2], l, ROLE_PARAM, "w_o", !gr->out_in, -1);
        param(c, gr->params[gr->nparams - 1], l, ROLE_PARAM, "b_o");
        break;
    case IMP_G_SILU: l = add_layer(c, name, "silu", &x, 1, "", out, false); break;
    case IMP_G_TOKENS:
        if (gr->w < 0)
            put(&a, ", cls = 0");
        if (gr->b < 0)
            put(&a, ", positions = 0");
        l = add_layer(c, name, "tokens", &x, 1, a.s, out, false);
        c->m->layers[l].note = arena_printf(c->m->a, "%s%s%s", gr->w >= 0 ? "class token" : "",
                                            gr->w >= 0 && gr->b >= 0 ? " and " : "",
                                            gr->b >= 0 ? "learned positions" : "");
        if (gr->w >= 0)
            param(c, gr->w, l, ROLE_PARAM, "cls");
        if (gr->b >= 0)
            param(c, gr->b, l, ROLE_PARAM, "pos");
        break;
    case IMP_G_EMBEDDING: {
        const imp_shape *t = &val(c, gr->w)->shape;
        if (!c->m->layers[x].i32 || val(c, gr->x)->shape.rank != 2)
            return (void)imp_error(c->g, gr->first, "an embedding reads token ids i32[N,T]");
        put(&a, ", vocab = %lld, dim = %lld", (long long)t->d[0].c, (long long)t->d[1].c);
        if (gr->positions)
            put(&a, ", positions = %lld", (long long)gr->positions);
        l = add_layer(c, name, "embedding", &x, 1, a.s, out, false);
        param(c, gr->w, l, ROLE_PARAM, "weight");
        if (gr->b >= 0)
            param(c, gr->b, l, ROLE_PARAM, "pos");
        break;
    }
    }
    if (l >= 0)
        val(c, gr->out)->layer = l;
}

/* ---- nodes ---- */

static void lower_node(mctx *c, int k)
{
    const imp_node *n = &c->g->nodes[k];
    if (!n->live)
        return;
    if (n->group >= 0) {
        if (c->g->groups[n->group].last == k)
            emit_group(c, &c->g->groups[n->group]);
        return;
    }
    bool act = false;
    for (int o = 0; o < n->nout; o++)
        act |= n->out[o] >= 0 && val(c, n->out[o])->act;
    if (!act || n->nout == 0 || n->out[0] < 0)
        return; /* computed from constants only: shapes, weights, masks */
    for (int i = 0; i < n->nin; i++)
        if (n->in[i] >= 0 && val(c, n->in[i])->act && val(c, n->in[i])->layer < 0)
            return; /* its input failed; reported there */
    const char *op = n->op;
    if (!strcmp(op, "Conv"))
        lower_conv(c, k);
    else if (!strcmp(op, "Gemm"))
        lower_gemm(c, k);
    else if (!strcmp(op, "MatMul"))
        lower_matmul(c, k);
    else if (!strcmp(op, "Relu"))
        lower_unary(c, k, "relu");
    else if (!strcmp(op, "Gelu")) {
        const imp_attr *ap = imp_attr_get(&c->g->nodes[k], "approximate");
        lower_unary(c, k, ap && ap->s && !strcmp(ap->s, "tanh") ? "gelu" : "gelu_erf");
    } else if (!strcmp(op, "Tanh"))
        lower_unary(c, k, "tanh");
    else if (!strcmp(op, "Sigmoid"))
        lower_unary(c, k, "sigmoid");
    else if (!strcmp(op, "Clip"))
        lower_clip(c, k);
    else if (!strcmp(op, "HardSwish"))
        lower_unary(c, k, "hardswish");
    else if (!strcmp(op, "HardSigmoid")) {
        double al = imp_attr_float(n, "alpha", 0.2), be = imp_attr_float(n, "beta", 0.5);
        if (fabs(al - 1.0 / 6.0) > 1e-6 || be != 0.5)
            imp_error(c->g, k,
                      "alpha %g, beta %g; Burst's hardsigmoid is torch's (alpha 1/6, beta 1/2)", al,
                      be);
        else
            lower_unary(c, k, "hardsigmoid");
    } else if (!strcmp(op, "ReduceMean"))
        lower_reduce_mean(c, k);
    else if (!strcmp(op, "MaxPool"))
        lower_pool(c, k, true);
    else if (!strcmp(op, "AveragePool"))
        lower_pool(c, k, false);
    else if (!strcmp(op, "GlobalAveragePool")) {
        int arg = act_arg(c, n->in[0], k, "input");
        const imp_shape *x = &val(c, n->in[0])->shape;
        if (arg < 0)
            return;
        if (x->rank != 4)
            return (void)imp_error(c->g, k, "Burst's global_avgpool reads [N,C,H,W]");
        imp_shape s = {2, {x->d[0], x->d[1]}};
        set_out(c, k, add_layer(c, layer_name(c, k), "global_avgpool", &arg, 1, "", &s, false));
    } else if (!strcmp(op, "BatchNormalization"))
        lower_batchnorm(c, k);
    else if (!strcmp(op, "LayerNormalization"))
        lower_layernorm(c, k);
    else if (!strcmp(op, "Dropout"))
        lower_dropout(c, k);
    else if (!strcmp(op, "Softmax"))
        lower_softmax(c, k);
    else if (!strcmp(op, "Add"))
        lower_add(c, k);
    else if (!strcmp(op, "Mul"))
        lower_mul(c, k);
    else if (!strcmp(op, "Slice"))
        lower_slice(c, k);
    else if (!strcmp(op, "Concat"))
        lower_concat(c, k);
    else if (!strcmp(op, "Transpose"))
        lower_transpose(c, k);
    else if (!strcmp(op, "Flatten") || !strcmp(op, "Reshape") || !strcmp(op, "Squeeze") ||
             !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity") || !strcmp(op, "Cast")) {
        if (!imp_is_act(c->g, n->in[0]))
            return (void)imp_error(c->g, k, "it mixes a constant into an activation");
        lower_view(c, k);
    } else if (!strcmp(op, "Pad")) {
        lower_pad(c, k);
    } else if (!strcmp(op, "Gather")) {
        lower_gather(c, k);
    } else {
        imp_error(c->g, k,
                  "burstc maps %s only inside the patterns it fuses (attention, layer "
                  "normalization, GELU); here it computes on an activation by itself",
                  op);
    }
}

/* ---- the model ---- */

static void add_inputs(mctx *c)
{
    for (int i = 0; i < c->g->ninputs; i++) {
        imp_value *v = val(c, c->g->inputs[i]);
        bool used = false;
        for (int u = 0; u < v->nusers; u++)
            used |= c->g->nodes[v->users[u]].live;
        if (!used) {
            note(c, "graph input '%s' is read by no node the outputs need; left out", v->name);
            continue;
        }
        bool is_int = v->dtype == IMP_INT64 || v->dtype == IMP_INT32;
        bool is_float = v->dtype == IMP_FLOAT || v->dtype == IMP_DOUBLE ||
                        v->dtype == IMP_FLOAT16 || v->dtype == IMP_BFLOAT16;
        if (!is_int && !is_float) {
            imp_error(c->g, -1,
                      "graph input '%s' has element type %d; Burst's inputs are f32 or "
                      "i32 token ids",
                      v->name, v->dtype);
            continue;
        }
        v->layer =
            add_layer(c, clean_name(c->g->a, v->name), "input", NULL, 0, "", &v->shape, is_int);
    }
}

/* Labels and a cross-entropy loss for each classifier output: [N,C] or [N,T,V]. */
static void add_losses(mctx *c)
{
    int nclass = 0;
    for (int i = 0; i < c->g->noutputs; i++) {
        const imp_value *v = val(c, c->g->outputs[i]);
        nclass += v->act && v->layer >= 0 && (v->shape.rank == 2 || v->shape.rank == 3) &&
                  imp_per_sample(&v->shape) > 0;
    }
    /* Which layers others read (computed once: a file may have many outputs). */
    int nread = c->m->nlayers;
    bool *read = arena_alloc(c->g->a, sizeof *read * (size_t)(nread + 1));
    for (int j = 0; j < c->m->nlayers; j++)
        for (int a = 0; a < c->m->layers[j].nargs; a++)
            read[c->m->layers[j].args[a]] = true;
    for (int i = 0; i < c->g->noutputs; i++) {
        int id = c->g->outputs[i];
        imp_value *v = val(c, id);
        if (!v->act) {
            note(c, "graph output '%s' is a constant; left out", v->name);
            continue;
        }
        if (v->layer < 0)
            continue;
        int l = need(c, id, -1);
        if (l < 0 || !c->loss)
            continue;
        if (!((v->shape.rank == 2 || v->shape.rank == 3) && imp_per_sample(&v->shape) > 0)) {
            note(c, "graph output '%s' is not logits [N,C] or [N,T,V]: no loss added", v->name);
            continue;
        }
        /* cross_entropy applies the softmax itself: it reads the logits. */
        imp_layer *ol = &c->m->layers[l];
        if (l < nread && strcmp(ol->op, "softmax") == 0 && !*ol->attrs && !read[l]) {
            note(c, "the final softmax '%s' is left out: the loss applies it", ol->name);
            ol->dropped = true;
            l = ol->args[0];
        }
        const char *base = clean_name(c->g->a, v->name);
        const char *lname = nclass > 1 ? arena_printf(c->g->a, "%s_labels", base) : "labels";
        const char *loss = nclass > 1 ? arena_printf(c->g->a, "%s_loss", base) : "loss";
        imp_shape ls = v->shape;
        ls.rank--;
        int lab = add_layer(c, lname, "input", NULL, 0, "", &ls, true);
        c->m->layers[lab].note = "added: the labels of the loss below";
        int args[2] = {l, lab};
        imp_shape s = {1, {{1, 1, 0}}};
        int x = add_layer(c, loss, "cross_entropy", args, 2, "", &s, false);
        c->m->layers[x].note =
            arena_printf(c->m->a, "added: a cross-entropy loss on '%s'", c->m->layers[l].name);
    }
}

static void summarize(mctx *c)
{
    imp_summary *s = &c->m->sum;
    for (int id = 0; id < c->g->nvalues; id++) {
        imp_value *v = val(c, id);
        if (v->kind != VK_INIT)
            continue;
        if (v->role == ROLE_UNUSED && v->nusers > 0)
            v->role = ROLE_CONST;
        s->init_elems += v->elems;
        s->ninits++;
        if (v->shares)
            note(c,
                 "initializer '%s' is a parameter of %d layers, '%s' and others (did the export "
                 "merge equal tensors?); Burst counts it for each",
                 v->name, v->shares + 1, c->m->layers[v->layer].name);
        switch (v->role) {
        case ROLE_PARAM: s->params += v->elems; break;
        case ROLE_STATS: s->stats += v->elems; break;
        case ROLE_CONST: s->consts += v->elems; break;
        case ROLE_UNUSED: s->unused += v->elems; break;
        }
    }
    s->nlayers = c->m->nlayers;
}

/* Marks the nodes whose outputs the graph's outputs read. */
static int mark_live(imp_graph *g)
{
    int *stack = malloc(sizeof *stack * (size_t)(g->nnodes + 1)), n = 0, dead = 0;
    if (!stack)
        out_of_memory(sizeof *stack * (size_t)(g->nnodes + 1));
    for (int i = 0; i < g->noutputs; i++) {
        int p = imp_producer(g, g->outputs[i]);
        if (p >= 0 && !g->nodes[p].live) {
            g->nodes[p].live = true;
            stack[n++] = p;
        }
    }
    while (n > 0) {
        const imp_node *nd = &g->nodes[stack[--n]];
        for (int j = 0; j < nd->nin; j++) {
            int p = imp_producer(g, nd->in[j]);
            if (p >= 0 && !g->nodes[p].live) {
                g->nodes[p].live = true;
                stack[n++] = p;
            }
        }
    }
    free(stack);
    for (int k = 0; k < g->nnodes; k++)
        dead += !g->nodes[k].live && g->nodes[k].nout > 0 && g->nodes[k].out[0] >= 0 &&
                g->values[g->nodes[k].out[0]].act;
    return dead;
}

bool imp_match(imp_graph *g, imp_model *m, bool loss)
{
    mctx c = {.g = g, .m = m, .loss = loss};
    imp_fuse(g);
    int dead = mark_live(g);
    if (dead)
        note(&c, "%d node%s compute%s activations that no graph output reads; left out", dead,
             dead == 1 ? "" : "s", dead == 1 ? "s" : "");
    /* Scopes, for names: one count per layer-making unit. */
    for (int i = 0; i < g->nnodes; i++) {
        int k = g->order[i];
        const imp_node *n = &g->nodes[k];
        if (!n->live)
            continue;
        if (n->group >= 0) {
            const imp_group *gr = &g->groups[n->group];
            if (gr->last != k)
                continue;
            size_t len = common_scope(&c, gr);
            const char *base = len ? g->nodes[gr->nodes[0]].name : g->nodes[gr->first].name;
            len = len ? len : scope_len(base);
            scope_count(&c, base, len);
            if (len && len <= 200)
                (*group_slot(&c, base, len, true))++;
        } else if (n->nout > 0 && n->out[0] >= 0 && val(&c, n->out[0])->act) {
            scope_count(&c, n->name, scope_len(n->name));
        }
    }
    if (g->nerrors)
        return false;
    add_inputs(&c);
    for (int i = 0; i < g->nnodes; i++)
        lower_node(&c, g->order[i]);
    if (g->nerrors)
        return false;
    int computed = 0;
    for (int k = 0; k < m->nlayers; k++)
        computed += strcmp(m->layers[k].op, "input") != 0;
    if (computed == 0 && g->nerrors == 0)
        imp_error(g, -1, "no graph output is computed from the inputs: the model has no layers");
    add_losses(&c);
    if (m->nlayers > 100000)
        imp_error(g, -1, "the model has %d layers; burstc compiles models of at most 100,000",
                  m->nlayers);
    summarize(&c);
    return g->nerrors == 0;
}
