/*
 * graph.c: the ONNX graph as the importer holds it: values by name, who
 * makes and who reads each one, and an order to visit the nodes in.
 *
 * ONNX asks for nodes in topological order but files do not always keep the
 * promise, so the order is computed: the file's own when it is one (the
 * usual case, and the output then follows the file), otherwise Kahn's
 * algorithm taking the earliest ready node first. A cycle is an error that
 * names a node on it and the value that closes it. Everything here is linear
 * in the size of the graph (a hash table of names, counting sorts, a heap).
 */
#include "import.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Names come from the file: control characters are shown as '?', so a
 * hostile name cannot drive the terminal. */
static void put_clean(FILE *out, const char *s)
{
    for (; *s; s++)
        fputc((unsigned char)*s < 32 || *s == 127 ? '?' : *s, out);
}

void imp_error(imp_graph *g, int node, const char *fmt, ...)
{
    g->nerrors++;
    if (g->nerrors > IMP_MAX_ERRORS) {
        if (g->nerrors == IMP_MAX_ERRORS + 1)
            fprintf(g->err, "%s: error: too many errors, stopping\n", g->path);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(g->err, "%s: error: ", g->path);
    if (node >= 0) {
        const imp_node *n = &g->nodes[node];
        fprintf(g->err, "node %d of %d, ", node + 1, g->nnodes);
        if (*n->name) {
            fputc('\'', g->err);
            put_clean(g->err, n->name);
            fputs("' ", g->err);
        }
        fputc('(', g->err);
        put_clean(g->err, n->op);
        fputs("): ", g->err);
    }
    put_clean(g->err, msg);
    fputc('\n', g->err);
}

const imp_attr *imp_attr_get(const imp_node *n, const char *name)
{
    for (int k = 0; k < n->nattrs; k++)
        if (strcmp(n->attrs[k].name, name) == 0)
            return &n->attrs[k];
    return NULL;
}

int64_t imp_attr_int(const imp_node *n, const char *name, int64_t dflt)
{
    const imp_attr *a = imp_attr_get(n, name);
    return a && a->kind == IA_INT ? a->i : dflt;
}

double imp_attr_float(const imp_node *n, const char *name, double dflt)
{
    const imp_attr *a = imp_attr_get(n, name);
    return a && a->kind == IA_FLOAT ? a->f : dflt;
}

/* ---- values by name ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void rehash(imp_graph *g, int cap)
{
    g->hash = arena_alloc(g->a, sizeof *g->hash * (size_t)cap);
    memset(g->hash, -1, sizeof *g->hash * (size_t)cap);
    g->hash_cap = cap;
    for (int id = 0; id < g->nvalues; id++) {
        size_t h = hash_str(g->values[id].name) & (size_t)(cap - 1);
        while (g->hash[h] >= 0)
            h = (h + 1) & (size_t)(cap - 1);
        g->hash[h] = id;
    }
}

int imp_value_find(const imp_graph *g, const char *name)
{
    if (!g->hash_cap)
        return -1;
    size_t h = hash_str(name) & (size_t)(g->hash_cap - 1);
    for (; g->hash[h] >= 0; h = (h + 1) & (size_t)(g->hash_cap - 1))
        if (strcmp(g->values[g->hash[h]].name, name) == 0)
            return g->hash[h];
    return -1;
}

int imp_value_add(imp_graph *g, const char *name, imp_vkind kind, int node)
{
    int old = imp_value_find(g, name);
    if (old >= 0) {
        const imp_value *o = &g->values[old];
        char what[64];
        if (o->kind == VK_NODE)
            snprintf(what, sizeof what, "an output of node %d", o->node + 1);
        else
            snprintf(what, sizeof what, "%s",
                     o->kind == VK_INPUT ? "a graph input" : "an initializer");
        if (kind == VK_NODE)
            imp_error(g, node, "its output '%s' is %s already", name, what);
        else
            imp_error(g, -1, "'%s' is defined twice (it is %s already)", name, what);
        return -1;
    }
    arena_grow(g->a, (void **)&g->values, &g->values_cap, g->nvalues + 1, sizeof *g->values);
    int id = g->nvalues++;
    imp_value *v = &g->values[id];
    memset(v, 0, sizeof *v);
    v->name = arena_strdup(g->a, name);
    v->kind = kind;
    v->node = -1;
    v->layer = -1;
    if (2 * g->nvalues > g->hash_cap)
        rehash(g, g->hash_cap ? 2 * g->hash_cap : 64);
    else {
        size_t h = hash_str(v->name) & (size_t)(g->hash_cap - 1);
        while (g->hash[h] >= 0)
            h = (h + 1) & (size_t)(g->hash_cap - 1);
        g->hash[h] = id;
    }
    return id;
}

/* ---- users and order ---- */

static void fill_users(imp_graph *g)
{
    for (int k = 0; k < g->nnodes; k++)
        for (int j = 0; j < g->nodes[k].nin; j++)
            if (g->nodes[k].in[j] >= 0)
                g->values[g->nodes[k].in[j]].nusers++;
    for (int id = 0; id < g->nvalues; id++) {
        imp_value *v = &g->values[id];
        v->users = arena_alloc(g->a, sizeof *v->users * (size_t)(v->nusers + 1));
        v->nusers = 0;
    }
    for (int k = 0; k < g->nnodes; k++)
        for (int j = 0; j < g->nodes[k].nin; j++)
            if (g->nodes[k].in[j] >= 0) {
                imp_value *v = &g->values[g->nodes[k].in[j]];
                v->users[v->nusers++] = k;
            }
}

/* A min-heap of node ids, so Kahn's algorithm keeps the file's order where it can. */
typedef struct heap {
    int n;
    int *a;
} heap;

static void heap_push(heap *h, int x)
{
    int i = h->n++;
    h->a[i] = x;
    while (i > 0 && h->a[(i - 1) / 2] > h->a[i]) {
        int p = (i - 1) / 2, t = h->a[p];
        h->a[p] = h->a[i];
        h->a[i] = t;
        i = p;
    }
}

static int heap_pop(heap *h)
{
    int top = h->a[0];
    h->a[0] = h->a[--h->n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->a[l] < h->a[m])
            m = l;
        if (r < h->n && h->a[r] < h->a[m])
            m = r;
        if (m == i)
            break;
        int t = h->a[m];
        h->a[m] = h->a[i];
        h->a[i] = t;
        i = m;
    }
    return top;
}

/* Names a node on a cycle among the nodes left unordered (left[k] true):
 * walking from any of them to a producer that is left too must come back to
 * a node already seen. */
static void report_cycle(imp_graph *g, const bool *left)
{
    int *seen = calloc((size_t)g->nnodes, sizeof *seen);
    if (!seen)
        out_of_memory((size_t)g->nnodes * sizeof *seen);
    int k = 0;
    while (!left[k])
        k++;
    int via = -1;
    for (int step = 1; !seen[k]; step++) {
        seen[k] = step;
        int next = -1;
        for (int j = 0; j < g->nodes[k].nin && next < 0; j++) {
            int v = g->nodes[k].in[j];
            if (v >= 0 && g->values[v].kind == VK_NODE && left[g->values[v].node]) {
                next = g->values[v].node;
                via = v;
            }
        }
        if (next < 0)
            ice("a node left unordered has no producer left");
        k = next;
    }
    imp_error(g, k, "it is on a cycle, through its output '%s'", g->values[via].name);
    free(seen);
}

bool imp_link(imp_graph *g)
{
    fill_users(g);
    g->order = arena_alloc(g->a, sizeof *g->order * (size_t)(g->nnodes + 1));
    bool sorted = true;
    for (int k = 0; k < g->nnodes && sorted; k++)
        for (int j = 0; j < g->nodes[k].nin && sorted; j++) {
            int v = g->nodes[k].in[j];
            sorted = v < 0 || g->values[v].kind != VK_NODE || g->values[v].node < k;
        }
    if (sorted) {
        for (int k = 0; k < g->nnodes; k++)
            g->order[k] = k;
        return true;
    }
    int *waiting = calloc((size_t)g->nnodes + 1, sizeof *waiting);
    bool *left = calloc((size_t)g->nnodes + 1, sizeof *left);
    heap h = {0, calloc((size_t)g->nnodes + 1, sizeof *h.a)};
    if (!waiting || !left || !h.a)
        out_of_memory(((size_t)g->nnodes + 1) * (sizeof *waiting + sizeof *left + sizeof *h.a));
    for (int k = 0; k < g->nnodes; k++) {
        left[k] = true;
        for (int j = 0; j < g->nodes[k].nin; j++) {
            int v = g->nodes[k].in[j];
            if (v >= 0 && g->values[v].kind == VK_NODE)
                waiting[k]++;
        }
        if (waiting[k] == 0)
            heap_push(&h, k);
    }
    int n = 0;
    while (h.n > 0) {
        int k = heap_pop(&h);
        g->order[n++] = k;
        left[k] = false;
        for (int j = 0; j < g->nodes[k].nout; j++) {
            int v = g->nodes[k].out[j];
            if (v < 0)
                continue;
            for (int u = 0; u < g->values[v].nusers; u++)
                if (--waiting[g->values[v].users[u]] == 0)
                    heap_push(&h, g->values[v].users[u]);
        }
    }
    if (n < g->nnodes)
        report_cycle(g, left);
    free(waiting);
    free(left);
    free(h.a);
    return n == g->nnodes;
}

/* ---- queries the patterns and the lowering share ---- */

static const imp_value *val(const imp_graph *g, int v)
{
    return &g->values[v];
}

int64_t imp_elems(const imp_shape *s)
{
    int64_t p = 1;
    for (int k = 0; k < s->rank; k++)
        p *= s->d[k].n ? -1 : s->d[k].c;
    return p;
}

int imp_producer(const imp_graph *g, int v)
{
    return v >= 0 && val(g, v)->kind == VK_NODE ? val(g, v)->node : -1;
}

bool imp_is_op(const imp_graph *g, int node, const char *op)
{
    return node >= 0 && strcmp(g->nodes[node].op, op) == 0;
}

int imp_single_user(const imp_graph *g, int v)
{
    return v >= 0 && val(g, v)->nusers == 1 ? val(g, v)->users[0] : -1;
}

bool imp_is_act(const imp_graph *g, int v)
{
    return v >= 0 && val(g, v)->act;
}

/* The one element of a constant, or NAN. */
double imp_scalar(const imp_graph *g, int v)
{
    if (v < 0 || val(g, v)->act || !val(g, v)->data || val(g, v)->data->n != 1)
        return NAN;
    const imp_data *d = val(g, v)->data;
    return d->real ? d->r[0] : d->i[0].n ? NAN : (double)d->i[0].c;
}

/* For a binary node with an activation on one side: that side, and the other. */
bool imp_split_act(const imp_graph *g, int node, int *act, int *other)
{
    const imp_node *n = &g->nodes[node];
    if (n->nin != 2 || n->in[0] < 0 || n->in[1] < 0)
        return false;
    bool a0 = imp_is_act(g, n->in[0]), a1 = imp_is_act(g, n->in[1]);
    if (a0 == a1)
        return false;
    *act = a0 ? n->in[0] : n->in[1];
    *other = a0 ? n->in[1] : n->in[0];
    return true;
}

/* The other input of a binary node that reads v, or -1. */
int imp_other_of(const imp_graph *g, int node, int v)
{
    const imp_node *n = &g->nodes[node];
    if (n->nin != 2)
        return -1;
    return n->in[0] == v ? n->in[1] : n->in[1] == v ? n->in[0] : -1;
}

/* The initializer that v is a view of (through Identity, Transpose, Cast,
 * Reshape, Squeeze, Unsqueeze, Flatten), or -1. */
int imp_init_of(const imp_graph *g, int v)
{
    for (int steps = 0; v >= 0 && steps < 16; steps++) {
        if (val(g, v)->act)
            return -1;
        if (val(g, v)->kind == VK_INIT)
            return v;
        int p = imp_producer(g, v);
        if (p < 0)
            return -1;
        const char *op = g->nodes[p].op;
        if (strcmp(op, "Identity") && strcmp(op, "Transpose") && strcmp(op, "Cast") &&
            strcmp(op, "Reshape") && strcmp(op, "Squeeze") && strcmp(op, "Unsqueeze") &&
            strcmp(op, "Flatten"))
            return -1;
        v = g->nodes[p].in[0];
    }
    return -1;
}

int imp_transposes_to_init(const imp_graph *g, int v)
{
    int n = 0;
    for (int steps = 0; v >= 0 && steps < 16 && val(g, v)->kind != VK_INIT; steps++) {
        int p = imp_producer(g, v);
        if (p < 0)
            return n;
        n += strcmp(g->nodes[p].op, "Transpose") == 0;
        v = g->nodes[p].in[0];
    }
    return n;
}

/* A bias of `features` elements: an initializer view of shape [f], [1,f], .... */
bool imp_is_bias(const imp_graph *g, int v, int64_t features)
{
    if (imp_init_of(g, v) < 0 || !val(g, v)->known)
        return false;
    const imp_shape *s = &val(g, v)->shape;
    return s->rank >= 1 && s->d[s->rank - 1].c == features && !s->d[s->rank - 1].n &&
           imp_elems(s) == features;
}
