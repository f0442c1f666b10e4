/*
 * emit_c.c: planned IR in, one C training program out.
 *
 * The program is straight-line calls into libburstrt (runtime/burstrt.h):
 * set up one communicator per distinct rank set of the plan, allocate every
 * tensor for this rank's shard once, then per iteration load the data, run the
 * forward of every layer, the loss, the backward in reverse order, all-reduce
 * the gradients within each layer's rank set and step the optimizer. Every
 * layer is guarded by its rank set's membership. Where a layer's rank set
 * differs from its producer's, the comm pass put a reshard op between them:
 * the activations move (sample ranges between ranks) in forward and their
 * gradients come back in backward. Shapes per sample are compile-time
 * constants; the shard sizes follow from the rank set and the global batch at
 * startup.
 *
 * Gradients of a value with one consumer are written in place by that
 * consumer; with several consumers (residual adds, branches) each writes its
 * own buffer and the contributions are summed into the value's gradient.
 */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

typedef struct rankset {
    int n;
    const int *ranks;
} rankset;

typedef struct emitter {
    FILE *out;
    const ir_module *m;
    const ir_job *job;
    const ir_graph *g;
    diag_ctx *d;
    arena *a;
    int world;
    int nsets;
    rankset *sets;
    int *set_of;       /* per op: index into sets */
    int *uses;         /* per op: number of operand slots using it */
    bool *direct;      /* per op and operand (op * MAXIN + j): gradient written in place */
    bool *accum;       /* per op: its gradient is a sum of contributions */
    bool *has_grad;    /* per op: has a gradient tensor */
    int *allreduce_of; /* per op: the allreduce op that syncs its parameters, or -1 */
    int *layer;        /* per op: its number among the model's own ops (layer_id) */
    int *set_slot;     /* open-addressing table of set indices, by rank list */
    int set_slots;     /* its size, a power of two */
    int sample_input, label_input;
    int64_t classes, vocab, labels_per_sample;
    int first_loss;
    bool fmnist;      /* the job's data is Fashion-MNIST (else synthetic) */
    int seg, seg_set; /* the open graph segment and its rank set (-1: none) */
    int nsegs;
    /* A background model (emit_background): its names start with pre, every op runs on
     * this rank alone, and forward/backward run one unit (op) per call. */
    bool bg;
    const char *pre; /* "" for the foreground */
} emitter;

#define MAX_SEGMENTS 1024 /* rt_graph_begin's ids */

#define MAXIN  64
#define W(...) fprintf(e->out, __VA_ARGS__)

static const ir_op *OP(const emitter *e, int i)
{
    return &e->g->ops[i];
}

/* The layer's number among the model's own ops (communication inserted by
 * passes does not count), which keys its initial weights and dropout masks:
 * every plan of a model starts from the same weights and draws the same
 * masks, so plans can be compared loss for loss. */
static int layer_id(const emitter *e, int i)
{
    return e->layer[i];
}

/* A C identifier for op i: its index and its name with dots made underscores. */
static const char *cname(emitter *e, int i)
{
    const char *n = OP(e, i)->name;
    char *s = arena_printf(e->a, "%sL%d_%s", e->pre, i, n);
    for (char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            *p = '_';
    return s;
}

/* The value v is, seen through any reshards in between. */
static int source_of(const emitter *e, int v)
{
    while (OP(e, v)->opcode == OP_RESHARD)
        v = OP(e, v)->inputs[0];
    return v;
}

/* The index of the rank set (n, ranks), added if new: a hash lookup, so a
 * graph of a hundred thousand ops on as many rank sets stays linear. */
static int set_index(emitter *e, int n, const int *ranks)
{
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++)
        h = (h ^ (uint32_t)ranks[k]) * 1099511628211ull;
    uint64_t mask = (uint64_t)e->set_slots - 1;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        int s = e->set_slot[i];
        if (s < 0) {
            e->set_slot[i] = e->nsets;
            e->sets[e->nsets] = (rankset){n, ranks};
            return e->nsets++;
        }
        if (e->sets[s].n == n && memcmp(e->sets[s].ranks, ranks, sizeof(int) * (size_t)n) == 0)
            return s;
    }
}

/* The C expression of operand j of op i (on op i's ranks: analyse() checked). */
static const char *operand(emitter *e, int i, int j)
{
    return arena_printf(e->a, "y_%s", cname(e, OP(e, i)->inputs[j]));
}

/* The C expression of the gradient buffer operand j of op i writes, or NULL. */
static const char *grad_target(emitter *e, int i, int j)
{
    int p = OP(e, i)->inputs[j];
    if (!e->has_grad[p])
        return "NULL";
    if (e->direct[i * MAXIN + j])
        return arena_printf(e->a, "dy_%s", cname(e, p));
    return arena_printf(e->a, "%sg%d_%d", e->pre, i, j);
}

static void shape_literal(emitter *e, const ir_type *t, const char *batch)
{
    W("(int64_t[]){%s", batch);
    for (int k = 1; k < t->rank; k++)
        W(", %lld", (long long)t->dim[k]);
    W("}");
}

/* Parameters of op i, as (suffix, shape) pairs; returns how many. */
typedef struct param_desc {
    const char *suffix;
    int ndim;
    int64_t dim[4];
    bool buffer;
} param_desc;
static int params_of(emitter *e, int i, param_desc *pd);

static bool analyse(emitter *e)
{
    const ir_graph *g = e->g;
    const ir_cluster *cl = &e->m->clusters[e->job->cluster];
    e->world = cl->nodes * cl->gpus_per_node;
    int n = g->nops;
    e->sets = arena_alloc(e->a, sizeof *e->sets * (size_t)(n + 1));
    e->set_of = arena_alloc(e->a, sizeof(int) * (size_t)n);
    e->uses = arena_alloc(e->a, sizeof(int) * (size_t)n);
    e->direct = arena_alloc(e->a, (size_t)n * MAXIN);
    e->accum = arena_alloc(e->a, (size_t)n);
    e->has_grad = arena_alloc(e->a, (size_t)n);
    e->allreduce_of = arena_alloc(e->a, sizeof(int) * (size_t)n);
    e->layer = arena_alloc(e->a, sizeof(int) * (size_t)(n + 1));
    for (int i = 0, id = 0; i < n; i++) {
        e->allreduce_of[i] = -1;
        e->layer[i] = id;
        id += OP(e, i)->opcode != OP_RESHARD && OP(e, i)->opcode != OP_ALLREDUCE;
    }
    /* At most n + 1 sets: a table of twice that, rounded up to a power of two. */
    e->set_slots = 4;
    while (e->set_slots < 2 * (n + 1))
        e->set_slots *= 2;
    e->set_slot = arena_alloc(e->a, sizeof(int) * (size_t)e->set_slots);
    memset(e->set_slot, 0xff, sizeof(int) * (size_t)e->set_slots);
    e->sample_input = e->label_input = e->first_loss = -1;

    int *all = arena_alloc(e->a, sizeof(int) * (size_t)e->world);
    for (int r = 0; r < e->world; r++)
        all[r] = r;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const ir_op *op = OP(e, i);
        if (op->ninputs > MAXIN) {
            diag_error(e->d, op->loc, "'%s' has more than %d operands", op->name, MAXIN);
            return false;
        }
        if (e->bg) {
            /* A background copy runs every op (communication too: one-rank no-ops) on
             * its own rank. */
            e->set_of[i] = set_index(e, 1, all);
            if (op->opcode == OP_ALLREDUCE) {
                e->allreduce_of[op->inputs[0]] = i;
                continue;
            }
        } else if (op->opcode == OP_RESHARD || op->opcode == OP_ALLREDUCE) {
            /* Communication runs on the rank list it names: the consumer's
			 * set for a reshard, the layer's for an all-reduce. */
            const ir_attr *ra = ir_op_attr(op, op->opcode == OP_RESHARD ? "to" : "ranks");
            int *rk = arena_alloc(e->a, sizeof(int) * (size_t)ra->u.list.n);
            bool bad = false;
            for (int k = 0; k < ra->u.list.n; k++) {
                rk[k] = (int)ra->u.list.v[k];
                bad |= ra->u.list.v[k] >= e->world;
            }
            if (bad) {
                diag_error(e->d, op->loc, "'%s' names a rank outside the cluster of %d", op->name,
                           e->world);
                return false;
            }
            e->set_of[i] = set_index(e, ra->u.list.n, rk);
            if (op->opcode == OP_ALLREDUCE) {
                e->allreduce_of[op->inputs[0]] = i;
                continue; /* a marker: no data, no gradient, not a use */
            }
        } else if (op->plan.nranks) {
            if (op->plan.ranks[op->plan.nranks - 1] >= e->world) {
                diag_error(e->d, op->loc, "'%s' is planned on rank %d, but the cluster has %d",
                           op->name, op->plan.ranks[op->plan.nranks - 1], e->world);
                ok = false;
            }
            if (op->plan.nranks > e->job->batch) {
                diag_error(e->d, op->loc, "'%s' runs on %d ranks, more than the batch of %lld",
                           op->name, op->plan.nranks, (long long)e->job->batch);
                ok = false;
            }
            e->set_of[i] = set_index(e, op->plan.nranks, op->plan.ranks);
        } else {
            e->set_of[i] =
                set_index(e, e->world < e->job->batch ? e->world : (int)e->job->batch, all);
        }
        for (int j = 0; j < op->ninputs; j++) {
            e->uses[op->inputs[j]]++;
            if (OP(e, op->inputs[j])->opcode == OP_CROSSENTROPY) {
                diag_error(e->d, op->loc,
                           "'%s' uses a loss as an input; a loss must be a final value", op->name);
                ok = false;
            }
        }
        e->has_grad[i] =
            op->opcode != OP_INPUT && op->opcode != OP_CROSSENTROPY && op->type.elem == EL_F32;

        /* What the runtime does not implement is an error here, not at run time. */
        if (op->type.rank > 6) {
            diag_error(e->d, op->loc, "'%s': the runtime supports at most 6 dimensions", op->name);
            ok = false;
        }
        /* The program sizes tensors as batch x elements per sample (in
         * int64, and in bytes): a value of the whole batch must fit. */
        int64_t elems = ir_type_elems_per_sample(&op->type), total;
        if (elems < 0 || __builtin_mul_overflow(elems, e->job->batch, &total) ||
            total > ((int64_t)1 << 60)) {
            diag_error(e->d, op->loc,
                       "'%s': %lld samples of %lld elements are more than 2^60 elements, more than "
                       "the program can hold",
                       op->name, (long long)e->job->batch, (long long)elems);
            ok = false;
        }
        if (op->opcode == OP_CROSSENTROPY) {
            if (e->first_loss < 0)
                e->first_loss = i;
            int lab = source_of(e, op->inputs[1]);
            const ir_type *lt = &OP(e, op->inputs[0])->type;
            if (OP(e, lab)->opcode != OP_INPUT) {
                diag_error(e->d, op->loc, "'%s': labels must come from an input", op->name);
                ok = false;
            } else if (e->label_input >= 0 && e->label_input != lab) {
                diag_error(e->d, op->loc, "'%s': every loss must use the same labels input",
                           op->name);
                ok = false;
            }
            e->label_input = lab;
            e->classes = lt->dim[lt->rank - 1];
            e->labels_per_sample = ir_type_elems_per_sample(&OP(e, op->inputs[1])->type);
        }
        if (op->opcode == OP_LINEAR && ir_op_attr(op, "tie")->u.ref >= 0) {
            int t = ir_op_attr(op, "tie")->u.ref;
            if (op->plan.nranks && OP(e, t)->plan.nranks &&
                set_index(e, op->plan.nranks, op->plan.ranks) != e->set_of[t]) {
                diag_error(e->d, op->loc,
                           "'%s' ties its weight to '%s', so both must run on the same ranks",
                           op->name, OP(e, t)->name);
                ok = false;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (OP(e, i)->opcode == OP_INPUT && i != e->label_input) {
            /* Without a loss no input is the labels yet: "needs a loss" below says why. */
            if (e->sample_input >= 0 && e->first_loss >= 0) {
                diag_error(
                    e->d, OP(e, i)->loc,
                    "the runtime's data sources feed one input and one labels input; '%s' is a third",
                    OP(e, i)->name);
                ok = false;
            }
            e->sample_input = i;
        }
    if (e->first_loss < 0 || e->sample_input < 0) {
        diag_error(e->d, e->g->loc,
                   "model '%s' needs an input and a cross_entropy loss to be trained", e->g->name);
        return false;
    }
    if (OP(e, e->sample_input)->type.elem == EL_I32)
        for (int i = 0; i < n; i++)
            if (OP(e, i)->opcode == OP_EMBEDDING &&
                source_of(e, OP(e, i)->inputs[0]) == e->sample_input)
                e->vocab = ir_attr_int(OP(e, i), "vocab");
    const char *data = e->job->data ? e->job->data : "synthetic";
    e->fmnist = strcmp(data, "fmnist") == 0;
    if (!e->fmnist && strcmp(data, "synthetic") != 0) {
        diag_error(e->d, e->job->loc,
                   "job '%s': the runtime reads data = synthetic or fmnist, not '%s'", e->job->name,
                   data);
        ok = false;
    }
    if (!ok)
        return false;

    for (int i = 0; i < n; i++) {
        const ir_op *op = OP(e, i);
        for (int j = 0; j < op->ninputs; j++) {
            int p = op->inputs[j];
            if (op->opcode == OP_ALLREDUCE)
                break;
            if (op->opcode != OP_RESHARD && e->set_of[p] != e->set_of[i]) {
                /* Moving data between rank sets is the comm pass's job. */
                diag_error(e->d, op->loc,
                           "'%s' on %d rank%s reads '%s' from other ranks without a reshard op "
                           "(run the comm pass)",
                           op->name, e->sets[e->set_of[i]].n,
                           e->sets[e->set_of[i]].n == 1 ? "" : "s", OP(e, p)->name);
                return false;
            }
            if (!e->has_grad[p])
                continue;
            if (e->uses[p] == 1 && (e->set_of[p] == e->set_of[i] || op->opcode == OP_RESHARD))
                e->direct[i * MAXIN + j] = true;
            else
                e->accum[p] = true;
        }
    }
    /* Gradients are summed by the allreduce ops the IR holds, and only by
     * them (docs/ir.md): a layer whose parameters live on several ranks
     * without one would train replicas that drift apart. */
    for (int i = 0; i < n; i++) {
        param_desc pd[8];
        const ir_op *op = OP(e, i);
        if (op->opcode == OP_RESHARD || op->opcode == OP_ALLREDUCE || e->allreduce_of[i] >= 0 ||
            e->sets[e->set_of[i]].n < 2 || params_of(e, i, pd) == 0)
            continue;
        diag_error(e->d, op->loc,
                   "'%s' has parameters on %d ranks, but no allreduce op sums their gradients "
                   "(run the comm pass)",
                   op->name, e->sets[e->set_of[i]].n);
        return false;
    }
    return true;
}

static void emit_header(emitter *e)
{
    const ir_job *j = e->job;
    W("/*\n * Generated by burstc from job '%s': model '%s' on cluster '%s' (%d rank%s),\n"
      " * global batch %lld, %s. Do not edit: change the .burst file and rebuild.\n *\n"
      " * The plan, one line per layer: the ranks that run it.\n",
      j->name, e->g->name, e->m->clusters[j->cluster].name, e->world, e->world == 1 ? "" : "s",
      (long long)j->batch, j->optimizer == OPT_ADAM ? "Adam" : "SGD");
    for (int i = 0; i < e->g->nops; i++) {
        const rankset *s = &e->sets[e->set_of[i]];
        W(" *   %-28s %-14s %2d rank%s [%d..%d]\n", OP(e, i)->name,
          ir_op_info_of(OP(e, i)->opcode)->name, s->n, s->n == 1 ? " " : "s", s->ranks[0],
          s->ranks[s->n - 1]);
    }
    W(" */\n#include <stdbool.h>\n#include <stdio.h>\n#include <string.h>\n\n#include \"burstrt.h\"\n\n");
}

static void emit_defines(emitter *e)
{
    const ir_job *j = e->job;
    W("#define WORLD %d\n#define BATCH ((int64_t)%lld)\n#define NSETS %d\n\n", e->world,
      (long long)j->batch, e->nsets);
    for (int s = 0; s < e->nsets; s++) {
        W("static const int set%d_ranks[%d] = {", s, e->sets[s].n);
        for (int k = 0; k < e->sets[s].n; k++)
            W("%s%d", k ? ", " : "", e->sets[s].ranks[k]);
        W("};\n");
    }
    W("static rt_comm *comm[NSETS];\n");
    W("static int64_t s0[NSETS], nb[NSETS];   /* this rank's first sample and shard size per set */\n\n");
}

static int params_of(emitter *e, int i, param_desc *pd)
{
    const ir_op *op = OP(e, i);
    const ir_type *x = op->ninputs ? &OP(e, op->inputs[0])->type : NULL;
    int n = 0;
    switch (op->opcode) {
    case OP_CONV2D: {
        const int64_t *k = ir_op_attr(op, "kernel")->u.pair;
        int64_t cout = ir_attr_int(op, "channels"), cin = x->dim[1] / ir_attr_int(op, "groups");
        pd[n++] = (param_desc){"weight", 4, {cout, cin, k[0], k[1]}, false};
        if (ir_attr_int(op, "bias"))
            pd[n++] = (param_desc){"bias", 1, {cout}, false};
        break;
    }
    case OP_LINEAR: {
        int64_t in = x->dim[x->rank - 1], out = ir_attr_int(op, "out");
        if (ir_op_attr(op, "tie")->u.ref < 0)
            pd[n++] = (param_desc){"weight", 2, {out, in}, false};
        if (ir_attr_int(op, "bias"))
            pd[n++] = (param_desc){"bias", 1, {out}, false};
        break;
    }
    case OP_BATCHNORM2D:
        pd[n++] = (param_desc){"weight", 1, {x->dim[1]}, false};
        pd[n++] = (param_desc){"bias", 1, {x->dim[1]}, false};
        pd[n++] = (param_desc){"running_mean", 1, {x->dim[1]}, true};
        pd[n++] = (param_desc){"running_var", 1, {x->dim[1]}, true};
        break;
    case OP_LAYERNORM:
        pd[n++] = (param_desc){"weight", 1, {x->dim[x->rank - 1]}, false};
        pd[n++] = (param_desc){"bias", 1, {x->dim[x->rank - 1]}, false};
        break;
    case OP_EMBEDDING:
        pd[n++] =
            (param_desc){"weight", 2, {ir_attr_int(op, "vocab"), ir_attr_int(op, "dim")}, false};
        if (ir_attr_int(op, "positions"))
            pd[n++] = (param_desc){
                "pos", 2, {ir_attr_int(op, "positions"), ir_attr_int(op, "dim")}, false};
        break;
    case OP_ATTENTION: {
        int64_t d = x->dim[2];
        pd[n++] = (param_desc){"w_qkv", 2, {3 * d, d}, false};
        pd[n++] = (param_desc){"b_qkv", 1, {3 * d}, false};
        pd[n++] = (param_desc){"w_o", 2, {d, d}, false};
        pd[n++] = (param_desc){"b_o", 1, {d}, false};
        break;
    }
    default: break;
    }
    return n;
}

static int64_t fan_in(const emitter *e, int i)
{
    const ir_op *op = OP(e, i);
    const ir_type *x = &OP(e, op->inputs[0])->type;
    switch (op->opcode) {
    case OP_CONV2D: {
        const int64_t *k = ir_op_attr(op, "kernel")->u.pair;
        return x->dim[1] / ir_attr_int(op, "groups") * k[0] * k[1];
    }
    case OP_LINEAR: return x->dim[x->rank - 1];
    case OP_ATTENTION: return x->dim[2];
    default: return 1;
    }
}

static void emit_globals(emitter *e)
{
    for (int i = 0; i < e->g->nops; i++) {
        const ir_op *op = OP(e, i);
        const char *c = cname(e, i);
        if (op->opcode == OP_ALLREDUCE)
            continue;
        W("/* %s */\n", op->name);
        if (op->opcode != OP_CROSSENTROPY)
            W("static rt_tensor *y_%s;\n", c);
        if (e->has_grad[i])
            W("static rt_tensor *dy_%s;\n", c);
        for (int j = 0; j < op->ninputs; j++)
            if (e->has_grad[op->inputs[j]] && !e->direct[i * MAXIN + j])
                W("static rt_tensor *%sg%d_%d;   /* gradient for operand %d, summed into its producer's */\n",
                  e->pre, i, j, j + 1);
        param_desc pd[8];
        int np = params_of(e, i, pd);
        for (int k = 0; k < np; k++)
            W("static rt_param *p_%s_%s;\n", c, pd[k].suffix);
        if (op->opcode == OP_BATCHNORM2D || op->opcode == OP_LAYERNORM ||
            op->opcode == OP_ATTENTION)
            W("static rt_tensor *saved_%s;\n", c);
        if (op->opcode == OP_MATMUL)
            W("static rt_tensor *a3_%s, *b3_%s, *c3_%s, *dc3_%s, *da3_%s, *db3_%s;\n", c, c, c, c,
              c, c);
    }
    W("\n");
}

/* A tensor for op i's shard: [nb[set], dims of t...]. */
static void emit_new(emitter *e, const char *var, const ir_type *t, int set)
{
    W("\t\t%s = rt_tensor_new(pool, %s, %d, ", var, t->elem == EL_I32 ? "RT_I32" : "RT_F32",
      t->rank);
    shape_literal(e, t, arena_printf(e->a, "nb[%d]", set));
    W(");\n");
}

static void emit_view3(emitter *e, const char *var, const char *src, const ir_type *t, int set)
{
    int64_t mid = 1;
    for (int k = 1; k < t->rank - 2; k++)
        mid *= t->dim[k];
    W("\t\t%s = %s ? rt_tensor_view(pool, %s, 3, (int64_t[]){nb[%d] * %lld, %lld, %lld}) : NULL;\n",
      var, src, src, set, (long long)mid, (long long)t->dim[t->rank - 2],
      (long long)t->dim[t->rank - 1]);
}

static void emit_setup(emitter *e)
{
    W("/* Communicators, shards, tensors and parameters: once, before the first step. */\n");
    W("static void setup(rt_pool *pool, rt_params *ps, uint64_t seed)\n{\n\t(void)seed;\n");
    for (int s = 0; s < e->nsets; s++) {
        if (e->bg)
            W("\tcomm[%d] = rt_comm_self();   /* this rank alone */\n", s);
        else
            W("\tcomm[%d] = rt_comm_new(%d, set%d_ranks);\n", s, e->sets[s].n, s);
        W("\t{\n\t\tint64_t end;\n\t\trt_comm_shard(comm[%d], BATCH, &s0[%d], &end);\n\t\tnb[%d] = end - s0[%d];\n\t}\n",
          s, s, s, s);
    }
    for (int i = 0; i < e->g->nops; i++) {
        const ir_op *op = OP(e, i);
        const char *c = cname(e, i);
        int s = e->set_of[i];
        if (op->opcode == OP_ALLREDUCE)
            continue;
        if (op->opcode == OP_RESHARD && e->has_grad[op->inputs[0]] && !e->direct[i * MAXIN]) {
            /* The gradient of a reshard lands on the producer's ranks. */
            W("\tif (rt_comm_member(comm[%d]))\n\t", e->set_of[op->inputs[0]]);
            emit_new(e, arena_printf(e->a, "%sg%d_0", e->pre, i), &OP(e, op->inputs[0])->type,
                     e->set_of[op->inputs[0]]);
        }
        W("\tif (rt_comm_member(comm[%d])) {   /* %s */\n", s, op->name);
        if (op->opcode != OP_CROSSENTROPY)
            emit_new(e, arena_printf(e->a, "y_%s", c), &op->type, s);
        if (e->has_grad[i])
            emit_new(e, arena_printf(e->a, "dy_%s", c), &op->type, s);
        for (int j = 0; j < op->ninputs && op->opcode != OP_RESHARD; j++)
            if (e->has_grad[op->inputs[j]] && !e->direct[i * MAXIN + j])
                emit_new(e, arena_printf(e->a, "%sg%d_%d", e->pre, i, j),
                         &OP(e, op->inputs[j])->type, s);
        param_desc pd[8];
        int np = params_of(e, i, pd);
        for (int k = 0; k < np; k++) {
            W("\t\tp_%s_%s = rt_%s_new(ps, \"%s.%s\", comm[%d], %d, (int64_t[]){", c, pd[k].suffix,
              pd[k].buffer ? "buffer" : "param", op->name, pd[k].suffix, s, pd[k].ndim);
            for (int q = 0; q < pd[k].ndim; q++)
                W("%s%lld", q ? ", " : "", (long long)pd[k].dim[q]);
            W("});\n");
            const char *v = arena_printf(e->a, "p_%s_%s->value", c, pd[k].suffix);
            switch (op->opcode) {
            case OP_CONV2D:
            case OP_LINEAR:
            case OP_ATTENTION:
                W("\t\trt_init_kaiming_uniform(%s, %lld, seed, %d, %d);\n", v,
                  (long long)fan_in(e, i), layer_id(e, i), k);
                break;
            case OP_EMBEDDING:
                W("\t\trt_init_normal(%s, 0.0f, 0.02f, seed, %d, %d);\n", v, layer_id(e, i), k);
                break;
            case OP_BATCHNORM2D:
            case OP_LAYERNORM:
                W("\t\trt_init_const(%s, %s);\n", v,
                  strcmp(pd[k].suffix, "weight") == 0 || strcmp(pd[k].suffix, "running_var") == 0
                      ? "1.0f"
                      : "0.0f");
                break;
            default: break;
            }
        }
        if (op->opcode == OP_BATCHNORM2D)
            W("\t\tsaved_%s = rt_tensor_new(pool, RT_F32, 1, (int64_t[]){%lld});\n", c,
              (long long)(2 * op->type.dim[1]));
        if (op->opcode == OP_LAYERNORM) {
            int64_t rows = ir_type_elems_per_sample(&op->type) / op->type.dim[op->type.rank - 1];
            W("\t\tsaved_%s = rt_tensor_new(pool, RT_F32, 1, (int64_t[]){2 * nb[%d] * %lld});\n", c,
              s, (long long)rows);
        }
        if (op->opcode == OP_ATTENTION)
            W("\t\tsaved_%s = rt_tensor_new(pool, RT_F32, 1, (int64_t[]){rt_attention_saved_size(nb[%d], %lld, "
              "%lld, %lld)});\n",
              c, s, (long long)op->type.dim[1], (long long)op->type.dim[2],
              (long long)ir_attr_int(op, "heads"));
        W("\t}\n");
    }
    /* The matmul views, once every tensor exists. */
    for (int i = 0; i < e->g->nops; i++) {
        const ir_op *op = OP(e, i);
        if (op->opcode != OP_MATMUL)
            continue;
        const char *c = cname(e, i);
        int s = e->set_of[i];
        W("\tif (rt_comm_member(comm[%d])) {\n", s);
        emit_view3(e, arena_printf(e->a, "a3_%s", c), operand(e, i, 0), &OP(e, op->inputs[0])->type,
                   s);
        emit_view3(e, arena_printf(e->a, "b3_%s", c), operand(e, i, 1), &OP(e, op->inputs[1])->type,
                   s);
        emit_view3(e, arena_printf(e->a, "c3_%s", c), arena_printf(e->a, "y_%s", c), &op->type, s);
        emit_view3(e, arena_printf(e->a, "dc3_%s", c), arena_printf(e->a, "dy_%s", c), &op->type,
                   s);
        emit_view3(e, arena_printf(e->a, "da3_%s", c), grad_target(e, i, 0),
                   &OP(e, op->inputs[0])->type, s);
        emit_view3(e, arena_printf(e->a, "db3_%s", c), grad_target(e, i, 1),
                   &OP(e, op->inputs[1])->type, s);
        W("\t}\n");
    }
    W("}\n\n");
}

static void emit_conv_attrs(emitter *e, const ir_op *op)
{
    const int64_t *k = ir_op_attr(op, "kernel")->u.pair, *st = ir_op_attr(op, "stride")->u.pair,
                  *pd = ir_op_attr(op, "pad")->u.pair, *dl = ir_op_attr(op, "dilation")->u.pair;
    W("\t\tstatic const rt_conv2d_attrs a = {%lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld, %lld};\n",
      (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)pd[0],
      (long long)pd[1], (long long)dl[0], (long long)dl[1], (long long)ir_attr_int(op, "groups"));
}

static void emit_pool_attrs(emitter *e, const ir_op *op)
{
    const int64_t *k = ir_op_attr(op, "kernel")->u.pair, *st = ir_op_attr(op, "stride")->u.pair,
                  *pd = ir_op_attr(op, "pad")->u.pair;
    int exclude_pad = op->opcode == OP_AVGPOOL2D && !ir_attr_int(op, "count_pad");
    W("\t\tstatic const rt_pool2d_attrs a = {%lld, %lld, %lld, %lld, %lld, %lld, %d, %d};\n",
      (long long)k[0], (long long)k[1], (long long)st[0], (long long)st[1], (long long)pd[0],
      (long long)pd[1], (int)ir_attr_int(op, "ceil"), exclude_pad);
}

static const char *param(emitter *e, int i, const char *suffix, const char *field)
{
    const ir_op *op = OP(e, i);
    if (op->opcode == OP_LINEAR && strcmp(suffix, "weight") == 0 &&
        ir_op_attr(op, "tie")->u.ref >= 0)
        return arena_printf(e->a, "p_%s_weight->%s", cname(e, ir_op_attr(op, "tie")->u.ref), field);
    return arena_printf(e->a, "p_%s_%s->%s", cname(e, i), suffix, field);
}

static const char *opt_param(emitter *e, int i, const char *suffix, const char *field, bool present)
{
    return present ? param(e, i, suffix, field) : "NULL";
}

static void emit_forward_op(emitter *e, int i)
{
    const ir_op *op = OP(e, i);
    const char *c = cname(e, i), *x = op->ninputs ? operand(e, i, 0) : NULL;
    const char *y = arena_printf(e->a, "y_%s", c);
    switch (op->opcode) {
    case OP_INPUT:
        W("\t\tif (train)\n\t\t\trt_data_batch(data, step, BATCH, s0[%d], s0[%d] + nb[%d], %s, %s);\n",
          e->set_of[i], e->set_of[i], e->set_of[i], i == e->sample_input ? y : "NULL",
          i == e->label_input ? y : "NULL");
        W("\t\telse\n\t\t\trt_data_test_batch(data, step * BATCH + s0[%d], nb[%d], %s, %s);\n",
          e->set_of[i], e->set_of[i], i == e->sample_input ? y : "NULL",
          i == e->label_input ? y : "NULL");
        break;
    case OP_CONV2D:
        emit_conv_attrs(e, op);
        W("\t\trt_conv2d_fwd(pool, %s, %s, %s, &a, %s);\n", x, param(e, i, "weight", "value"),
          opt_param(e, i, "bias", "value", ir_attr_int(op, "bias")), y);
        break;
    case OP_LINEAR:
        W("\t\trt_linear_fwd(%s, %s, %s, %s);\n", x, param(e, i, "weight", "value"),
          opt_param(e, i, "bias", "value", ir_attr_int(op, "bias")), y);
        break;
    case OP_MATMUL: W("\t\trt_matmul_fwd(a3_%s, b3_%s, c3_%s);\n", c, c, c); break;
    case OP_RELU: W("\t\trt_relu_fwd(%s, %s);\n", x, y); break;
    case OP_GELU: W("\t\trt_gelu_fwd(%s, %s);\n", x, y); break;
    case OP_TANH: W("\t\trt_tanh_fwd(%s, %s);\n", x, y); break;
    case OP_SIGMOID: W("\t\trt_sigmoid_fwd(%s, %s);\n", x, y); break;
    case OP_MAXPOOL2D:
        emit_pool_attrs(e, op);
        W("\t\trt_maxpool2d_fwd(%s, &a, %s);\n", x, y);
        break;
    case OP_AVGPOOL2D:
        emit_pool_attrs(e, op);
        W("\t\trt_avgpool2d_fwd(%s, &a, %s);\n", x, y);
        break;
    case OP_GLOBALAVGPOOL: W("\t\trt_global_avgpool_fwd(%s, %s);\n", x, y); break;
    case OP_BATCHNORM2D: /* evaluation normalises with the running statistics */
        W("\t\tif (train)\n\t\t\trt_batchnorm2d_sync_fwd(comm[%d], %s, %s, %s, %s, %s, (float)%.9g, "
          "(float)%.9g, saved_%s, %s);\n",
          e->set_of[i], x, param(e, i, "weight", "value"), param(e, i, "bias", "value"),
          param(e, i, "running_mean", "value"), param(e, i, "running_var", "value"),
          ir_attr_real(op, "momentum"), ir_attr_real(op, "eps"), c, y);
        W("\t\telse\n\t\t\trt_batchnorm2d_infer(%s, %s, %s, %s, %s, (float)%.9g, %s);\n", x,
          param(e, i, "weight", "value"), param(e, i, "bias", "value"),
          param(e, i, "running_mean", "value"), param(e, i, "running_var", "value"),
          ir_attr_real(op, "eps"), y);
        break;
    case OP_LAYERNORM:
        W("\t\trt_layernorm_fwd(%s, %s, %s, (float)%.9g, saved_%s, %s);\n", x,
          param(e, i, "weight", "value"), param(e, i, "bias", "value"), ir_attr_real(op, "eps"), c,
          y);
        break;
    case OP_DROPOUT:
        W("\t\tif (train)\n\t\t\trt_dropout_fwd(%s, (float)%.9g, seed, step, %d, s0[%d], %s);\n\t\telse\n\t\t\trt_tensor_copy(%s, %s);\n",
          x, ir_attr_real(op, "p"), layer_id(e, i), e->set_of[i], y, y, x);
        break;
    case OP_ADD: W("\t\trt_add_fwd(%s, %s, %s);\n", x, operand(e, i, 1), y); break;
    case OP_CONCAT:
        W("\t\tconst rt_tensor *xs[] = {");
        for (int j = 0; j < op->ninputs; j++)
            W("%s%s", j ? ", " : "", operand(e, i, j));
        W("};\n\t\trt_concat_fwd(%d, xs, %lld, %s);\n", op->ninputs,
          (long long)ir_attr_int(op, "axis"), y);
        break;
    case OP_FLATTEN:
    case OP_RESHAPE: W("\t\trt_tensor_copy(%s, %s);\n", y, x); break;
    case OP_TRANSPOSE: {
        const int64_t *dm = ir_op_attr(op, "dims")->u.pair;
        W("\t\trt_transpose(%s, %lld, %lld, %s);\n", x, (long long)dm[0], (long long)dm[1], y);
        break;
    }
    case OP_SOFTMAX:
        W("\t\trt_softmax_fwd(%s, %lld, %s);\n", x, (long long)ir_attr_int(op, "axis"), y);
        break;
    case OP_EMBEDDING:
        W("\t\trt_embedding_fwd(%s, %s, %s, %s);\n", x, param(e, i, "weight", "value"),
          opt_param(e, i, "pos", "value", ir_attr_int(op, "positions") > 0), y);
        break;
    case OP_ATTENTION:
        W("\t\trt_attention_ex_fwd(pool, %s, %s, %s, %s, %s, %lld, %s, saved_%s, %s);\n", x,
          param(e, i, "w_qkv", "value"), param(e, i, "b_qkv", "value"), param(e, i, "w_o", "value"),
          param(e, i, "b_o", "value"), (long long)ir_attr_int(op, "heads"),
          ir_attr_int(op, "causal") ? "true" : "false", c, y);
        break;
    case OP_CROSSENTROPY:
        W("\t\tloss += rt_cross_entropy_fwd(%s, %s, BATCH * %lld);\n", x, operand(e, i, 1),
          (long long)e->labels_per_sample);
        if (i == e->first_loss)
            W("\t\tif (correct)\n\t\t\t*correct += rt_correct_count(%s, %s);\n", x,
              operand(e, i, 1));
        break;
    default: ice("no C code for op %s", ir_op_info_of(op->opcode)->name);
    }
}

/* Graph segments: runs of layers on one rank set with no communication, no
 * data loading and no host synchronisation between them. The CUDA backend
 * captures each as a CUDA graph after warm-up and replays it; on the CPU the
 * body simply runs. Evaluation (train false) always runs eagerly. */
static bool graphable(const emitter *e, int i)
{
    const ir_op *op = OP(e, i);
    switch (op->opcode) {
    case OP_INPUT:
    case OP_CROSSENTROPY:
    case OP_RESHARD:
    case OP_ALLREDUCE: return false; /* data loading, a loss read back by the host, communication */
    case OP_BATCHNORM2D:
        return e->sets[e->set_of[i]].n == 1; /* SyncBN all-reduces its statistics */
    default: break;
    }
    if (e->bg)
        return false; /* a background step runs unit by unit (emit_background) */
    return e->nsegs < MAX_SEGMENTS || e->seg >= 0;
}

static void seg_close(emitter *e, bool fwd)
{
    if (e->seg < 0)
        return;
    W("\t}\n\tif (rt_comm_member(comm[%d])%s)\n\t\trt_graph_end(%d);\n", e->seg_set,
      fwd ? " && train" : "", e->seg);
    e->seg = -1;
}

static void seg_open(emitter *e, int set, bool fwd)
{
    e->seg = e->nsegs++;
    e->seg_set = set;
    W("\n\t/* graph segment %d: a CUDA graph after warm-up on GPUs */\n", e->seg);
    W("\tif (rt_comm_member(comm[%d]) && (%srt_graph_begin(%d))) {\n", set, fwd ? "!train || " : "",
      e->seg);
}

/* Writes what emit() writes for op i, one tab deeper, as a block of its own
 * inside the open segment. */
static void emit_in_segment(emitter *e, int i, void (*emit)(emitter *, int), const char *suffix)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *saved = e->out, *mem = open_memstream(&buf, &len);
    if (!mem)
        ice("open_memstream failed");
    e->out = mem;
    emit(e, i);
    fclose(mem);
    e->out = saved;
    W("\t\t{   /* %s on %d rank%s */\n", OP(e, i)->name, e->sets[e->set_of[i]].n,
      e->sets[e->set_of[i]].n == 1 ? "" : "s");
    W("\t\t\trt_trace_push(\"%s%s\");\n", OP(e, i)->name, suffix);
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        W("\t%.*s\n", (int)n, line);
        line = nl ? nl + 1 : NULL;
    }
    W("\t\t\trt_trace_pop();\n\t\t}\n");
    free(buf);
}

/* Op i's part of forward(). */
static void emit_forward_one(emitter *e, int i)
{
    const ir_op *op = OP(e, i);
    int s = e->set_of[i];
    bool g = graphable(e, i);
    if (e->seg >= 0 && (!g || e->seg_set != s))
        seg_close(e, true);
    if (g) {
        if (e->seg < 0)
            seg_open(e, s, true);
        emit_in_segment(e, i, emit_forward_op, "");
        return;
    }
    W("\n\t/* %s = %s on %d rank%s */\n", op->name, ir_op_info_of(op->opcode)->name, e->sets[s].n,
      e->sets[s].n == 1 ? "" : "s");
    if (op->opcode == OP_RESHARD) {
        int p = op->inputs[0];
        W("\trt_trace_push(\"%s\");\n", op->name);
        W("\trt_reshard(y_%s, comm[%d], y_%s, comm[%d], BATCH, %lld);   /* %d -> %d ranks */\n",
          cname(e, p), e->set_of[p], cname(e, i), s, (long long)ir_type_elems_per_sample(&op->type),
          e->sets[e->set_of[p]].n, e->sets[s].n);
        W("\trt_trace_pop();\n");
        return;
    }
    W("\tif (rt_comm_member(comm[%d])) {\n", s);
    W("\t\trt_trace_push(\"%s\");\n", op->name);
    emit_forward_op(e, i);
    W("\t\trt_trace_pop();\n\t}\n");
}

/* A background model's forward and backward run one op per call (`unit`): its
 * step's units are the slices' pieces (emit_background). */
static void unit_open(emitter *e, int i)
{
    if (e->bg)
        W("\tif (unit == %d) {\n", i);
}

static void unit_close(emitter *e)
{
    if (e->bg)
        W("\t}\n");
}

static void emit_forward(emitter *e)
{
    W("/* One forward pass over global batch `step` (a test batch when !train).\n"
      " * Returns this rank's part of the loss; the job's loss is the sum over ranks. */\n");
    W("static double forward(rt_pool *pool, rt_data *data, uint64_t seed, int64_t step, bool train, int64_t *correct%s)\n{\n",
      e->bg ? ", int unit" : "");
    W("\tdouble loss = 0;\n\t(void)pool;\n\t(void)seed;\n");
    for (int i = 0; i < e->g->nops; i++) {
        if (OP(e, i)->opcode == OP_ALLREDUCE)
            continue;
        unit_open(e, i);
        emit_forward_one(e, i);
        unit_close(e);
    }
    seg_close(e, true);
    W("\treturn loss;\n}\n\n");
}

static void emit_backward_op(emitter *e, int i)
{
    const ir_op *op = OP(e, i);
    const char *c = cname(e, i), *x = op->ninputs ? operand(e, i, 0) : NULL;
    const char *y = arena_printf(e->a, "y_%s", c), *dy = arena_printf(e->a, "dy_%s", c);
    const char *dx = op->ninputs ? grad_target(e, i, 0) : "NULL";
    switch (op->opcode) {
    case OP_CONV2D:
        emit_conv_attrs(e, op);
        W("\t\trt_conv2d_bwd(pool, %s, %s, %s, &a, %s, %s, %s);\n", x,
          param(e, i, "weight", "value"), dy, dx, param(e, i, "weight", "grad"),
          opt_param(e, i, "bias", "grad", ir_attr_int(op, "bias")));
        break;
    case OP_LINEAR:
        W("\t\trt_linear_bwd(%s, %s, %s, %s, %s, %s);\n", x, param(e, i, "weight", "value"), dy, dx,
          param(e, i, "weight", "grad"), opt_param(e, i, "bias", "grad", ir_attr_int(op, "bias")));
        break;
    case OP_MATMUL:
        W("\t\trt_matmul_bwd(a3_%s, b3_%s, dc3_%s, da3_%s, db3_%s);\n", c, c, c, c, c);
        break;
    case OP_RELU: W("\t\trt_relu_bwd(%s, %s, %s);\n", x, dy, dx); break;
    case OP_GELU: W("\t\trt_gelu_bwd(%s, %s, %s);\n", x, dy, dx); break;
    case OP_TANH: W("\t\trt_tanh_bwd(%s, %s, %s);\n", x, dy, dx); break;
    case OP_SIGMOID: W("\t\trt_sigmoid_bwd(%s, %s, %s);\n", x, dy, dx); break;
    case OP_MAXPOOL2D:
        emit_pool_attrs(e, op);
        W("\t\trt_maxpool2d_bwd(%s, %s, &a, %s);\n", x, dy, dx);
        break;
    case OP_AVGPOOL2D:
        emit_pool_attrs(e, op);
        W("\t\trt_avgpool2d_bwd(%s, &a, %s);\n", dy, dx);
        break;
    case OP_GLOBALAVGPOOL: W("\t\trt_global_avgpool_bwd(%s, %s);\n", dy, dx); break;
    case OP_BATCHNORM2D:
        W("\t\trt_batchnorm2d_sync_bwd(comm[%d], %s, %s, saved_%s, %s, %s, %s, %s);\n",
          e->set_of[i], x, param(e, i, "weight", "value"), c, dy, dx, param(e, i, "weight", "grad"),
          param(e, i, "bias", "grad"));
        break;
    case OP_LAYERNORM:
        W("\t\trt_layernorm_bwd(%s, %s, saved_%s, %s, %s, %s, %s);\n", x,
          param(e, i, "weight", "value"), c, dy, dx, param(e, i, "weight", "grad"),
          param(e, i, "bias", "grad"));
        break;
    case OP_DROPOUT:
        W("\t\trt_dropout_bwd(%s, (float)%.9g, seed, step, %d, s0[%d], %s);\n", dy,
          ir_attr_real(op, "p"), layer_id(e, i), e->set_of[i], dx);
        break;
    case OP_ADD: {
        const char *db = grad_target(e, i, 1);
        if (strcmp(dx, "NULL") != 0)
            W("\t\trt_tensor_copy(%s, %s);\n", dx, dy);
        if (strcmp(db, "NULL") != 0)
            W("\t\trt_tensor_copy(%s, %s);\n", db, dy);
        break;
    }
    case OP_CONCAT:
        W("\t\trt_tensor *dxs[] = {");
        for (int j = 0; j < op->ninputs; j++)
            W("%s%s", j ? ", " : "", grad_target(e, i, j));
        W("};\n\t\trt_concat_bwd(%s, %lld, %d, dxs);\n", dy, (long long)ir_attr_int(op, "axis"),
          op->ninputs);
        break;
    case OP_FLATTEN:
    case OP_RESHAPE:
        if (strcmp(dx, "NULL") != 0)
            W("\t\trt_tensor_copy(%s, %s);\n", dx, dy);
        break;
    case OP_TRANSPOSE: {
        const int64_t *dm = ir_op_attr(op, "dims")->u.pair;
        if (strcmp(dx, "NULL") != 0)
            W("\t\trt_transpose(%s, %lld, %lld, %s);\n", dy, (long long)dm[0], (long long)dm[1],
              dx);
        break;
    }
    case OP_SOFTMAX:
        W("\t\trt_softmax_bwd(%s, %s, %lld, %s);\n", y, dy, (long long)ir_attr_int(op, "axis"), dx);
        break;
    case OP_EMBEDDING:
        W("\t\trt_embedding_bwd(%s, %s, %s, %s);\n", x, dy, param(e, i, "weight", "grad"),
          opt_param(e, i, "pos", "grad", ir_attr_int(op, "positions") > 0));
        break;
    case OP_ATTENTION:
        W("\t\trt_attention_bwd(pool, %s, %s, %s, %lld, saved_%s, %s, %s, %s, %s, %s, %s);\n", x,
          param(e, i, "w_qkv", "value"), param(e, i, "w_o", "value"),
          (long long)ir_attr_int(op, "heads"), c, dy, dx, param(e, i, "w_qkv", "grad"),
          param(e, i, "b_qkv", "grad"), param(e, i, "w_o", "grad"), param(e, i, "b_o", "grad"));
        break;
    case OP_CROSSENTROPY:
        W("\t\trt_cross_entropy_bwd(%s, %s, BATCH * %lld, %s);\n", x, operand(e, i, 1),
          (long long)e->labels_per_sample, dx);
        break;
    default: ice("no C code for the backward of %s", ir_op_info_of(op->opcode)->name);
    }
}

/* The rank set of the allreduce op that the IR holds for op i's gradients,
 * or -1 for none: it runs right after op i's backward (where the IR holds it,
 * directly after op i: the verifier checks that), over the op's `ranks`. */
static int allreduce_set(emitter *e, int i)
{
    return e->allreduce_of[i] >= 0 ? e->set_of[e->allreduce_of[i]] : -1;
}

static void emit_allreduce(emitter *e, int i)
{
    param_desc pd[8];
    int np = params_of(e, i, pd), s = allreduce_set(e, i);
    if (s < 0)
        return;
    W("\tif (rt_comm_member(comm[%d])) {   /* all-reduce of %s's gradients over %d ranks */\n", s,
      OP(e, i)->name, e->sets[s].n);
    W("\t\trt_trace_push(\"%s.allreduce\");\n", OP(e, i)->name);
    for (int k = 0; k < np; k++)
        if (!pd[k].buffer)
            W("\t\trt_allreduce_sum(comm[%d], rt_f32(p_%s_%s->grad), p_%s_%s->grad->numel);\n", s,
              cname(e, i), pd[k].suffix, cname(e, i), pd[k].suffix);
    W("\t\trt_trace_pop();\n\t}\n");
}

/* Op i's part of backward(). */
static void emit_backward_one(emitter *e, int i)
{
    const ir_op *op = OP(e, i);
    if (op->opcode == OP_INPUT || (!e->has_grad[i] && op->opcode != OP_CROSSENTROPY))
        return;
    if (op->opcode == OP_RESHARD) {
        int p = op->inputs[0];
        if (!e->has_grad[p])
            return;
        seg_close(e, false);
        W("\n\t/* %s: the gradient goes back, %d -> %d ranks */\n", op->name,
          e->sets[e->set_of[i]].n, e->sets[e->set_of[p]].n);
        W("\trt_trace_push(\"%s.bwd\");\n", op->name);
        W("\trt_reshard(dy_%s, comm[%d], %s, comm[%d], BATCH, %lld);\n", cname(e, i), e->set_of[i],
          grad_target(e, i, 0), e->set_of[p], (long long)ir_type_elems_per_sample(&op->type));
        W("\trt_trace_pop();\n");
        if (!e->direct[i * MAXIN])
            W("\tif (rt_comm_member(comm[%d]))\n\t\trt_accumulate(dy_%s, %sg%d_0);\n", e->set_of[p],
              cname(e, p), e->pre, i);
        return;
    }
    bool any = false;
    for (int j = 0; j < op->ninputs; j++)
        any |= e->has_grad[op->inputs[j]];
    bool has_params = op->opcode == OP_CONV2D || op->opcode == OP_LINEAR ||
                      op->opcode == OP_BATCHNORM2D || op->opcode == OP_LAYERNORM ||
                      op->opcode == OP_EMBEDDING || op->opcode == OP_ATTENTION;
    if (!any && !has_params)
        return;
    int s = e->set_of[i];
    bool g = graphable(e, i);
    if (e->seg >= 0 && (!g || e->seg_set != s))
        seg_close(e, false);
    if (g) {
        if (e->seg < 0)
            seg_open(e, s, false);
        emit_in_segment(e, i, emit_backward_op, ".bwd");
    } else {
        W("\n\t/* %s: backward on %d rank%s */\n", op->name, e->sets[s].n,
          e->sets[s].n == 1 ? "" : "s");
        W("\tif (rt_comm_member(comm[%d])) {\n\t\trt_trace_push(\"%s.bwd\");\n", s, op->name);
        emit_backward_op(e, i);
        W("\t\trt_trace_pop();\n");
    }
    /* Contributions to gradients on the same ranks: kernels, so they stay
     * inside the segment (or the member block). */
    for (int j = 0; j < op->ninputs; j++) {
        int p = op->inputs[j];
        if (!e->has_grad[p] || e->direct[i * MAXIN + j])
            continue;
        W("\t\trt_accumulate(dy_%s, %sg%d_%d);\n", cname(e, p), e->pre, i, j);
    }
    if (!g)
        W("\t}\n");
    if (allreduce_set(e, i) >= 0)
        seg_close(e, false);
    emit_allreduce(e, i);
}

static void emit_backward(emitter *e)
{
    W("/* The backward pass, in reverse order; parameter gradients accumulate\n"
      " * into this rank's rt_params, all-reduced afterwards. */\n");
    W("static void backward(rt_pool *pool, uint64_t seed, int64_t step%s)\n{\n\t(void)pool;\n\t(void)seed;\n\t(void)step;\n",
      e->bg ? ", int unit" : "");
    /* A background step zeroes them in its first backward unit. */
    unit_open(e, e->g->nops - 1);
    for (int i = 0; i < e->g->nops; i++)
        if (e->accum[i])
            W("\tif (y_%s)\n\t\trt_tensor_zero(dy_%s);   /* summed from %d uses */\n", cname(e, i),
              cname(e, i), e->uses[i]);
    unit_close(e);
    for (int i = e->g->nops - 1; i >= 0; i--) {
        unit_open(e, i);
        emit_backward_one(e, i);
        unit_close(e);
    }
    seg_close(e, false);
    W("}\n\n");
}

/* ---- background models (GPU multiplexing, issue 12) ----
 *
 * Every background job with a copy in the interleave pass's result
 * (job->interleave) becomes a one-rank training program of its model at its
 * batch, emitted by this same emitter in background mode: its names start
 * with bgK_ (the macros below rename the few names the foreground's code also
 * uses), all its ops run on rt_comm_self(), and forward/backward run one op
 * per call. bgK_unit(u) runs unit u of the step: u < n the forward of op u,
 * u = n + k the backward of op n-1-k (docs/runtime.md); the runtime's
 * executor runs unit 2n, the optimizer update, and cuts the units into the
 * plan's slices. */

static const char *const renamed[] = {"comm", "s0", "nb", "setup", "forward", "backward"};

/* The data source of a background model: the foreground's Fashion-MNIST when
 * the model reads 28x28 images into 10 classes, else synthetic samples. */
static bool reads_fmnist(const emitter *b, const emitter *fg)
{
    const ir_type *xt = &OP(b, b->sample_input)->type;
    bool shape = (xt->rank == 4 && xt->dim[1] == 1 && xt->dim[2] == 28 && xt->dim[3] == 28) ||
                 (xt->rank == 2 && xt->dim[1] == 784);
    return fg->fmnist && shape && xt->elem == EL_F32 && b->classes == 10 &&
           b->labels_per_sample == 1;
}

static bool emit_background_model(emitter *fg, int k)
{
    const ir_job *j = fg->job;
    const ir_background *bj = &j->background[k];
    ir_job job = *j;
    job.graph = bj->graph;
    job.batch = bj->batch;
    job.nbackground = 0;
    job.interleave = NULL;
    emitter b = {.out = fg->out,
                 .m = fg->m,
                 .job = &job,
                 .g = fg->m->graphs[bj->graph],
                 .d = fg->d,
                 .a = fg->a,
                 .seg = -1,
                 .bg = true,
                 .pre = arena_printf(fg->a, "bg%d_", k)};
    if (!analyse(&b))
        return false;
    b.world = 1;
    emitter *e = &b;
    const char *pre = b.pre;
    int n = b.g->nops;
    W("/* ---- background job %d: model '%s' at batch %lld, a one-rank training step in %d\n"
      " * units (forward of each op, backward of each op in reverse, the update) ---- */\n",
      k, b.g->name, (long long)bj->batch, 2 * n + 1);
    for (size_t r = 0; r < sizeof renamed / sizeof *renamed; r++)
        W("#define %s %s%s\n", renamed[r], pre, renamed[r]);
    W("#define BATCH ((int64_t)%lld)\n#define NSETS %d\n\n", (long long)bj->batch, b.nsets);
    W("static rt_comm *comm[NSETS];\nstatic int64_t s0[NSETS], nb[NSETS];\n\n");
    emit_globals(e);
    emit_setup(e);
    emit_forward(e);
    emit_backward(e);
    W("static double %sunit(int u, rt_pool *pool, rt_data *data, uint64_t seed, int64_t step)\n{\n",
      pre);
    W("\tif (u < %d)\n\t\treturn forward(pool, data, seed, step, true, NULL, u);\n", n);
    W("\tbackward(pool, seed, step, %d - u);\n\treturn 0;\n}\n", 2 * n - 1);
    for (size_t r = 0; r < sizeof renamed / sizeof *renamed; r++)
        W("#undef %s\n", renamed[r]);
    W("#undef BATCH\n#undef NSETS\n\n");
    const ir_type *xt = &OP(e, b.sample_input)->type;
    W("static const int64_t %ssample_shape[] = {", pre);
    for (int q = 1; q < xt->rank; q++)
        W("%s%lld", q > 1 ? ", " : "", (long long)xt->dim[q]);
    W("};\n");
    W("static const rt_bg_model %smodel = {\n", pre);
    W("\t.name = \"%s\",\n\t.batch = %lld,\n\t.nunits = %d,\n", b.g->name, (long long)bj->batch,
      2 * n + 1);
    W("\t.data = %s,\n", reads_fmnist(&b, fg) ? "RT_DATA_FMNIST" : "RT_DATA_SYNTHETIC");
    W("\t.ndim = %d,\n\t.sample_shape = %ssample_shape,\n\t.in_dtype = %s,\n", xt->rank - 1, pre,
      xt->elem == EL_I32 ? "RT_I32" : "RT_F32");
    W("\t.vocab = %lld,\n\t.classes = %lld,\n\t.labels_per_sample = %lld,\n", (long long)b.vocab,
      (long long)b.classes, (long long)b.labels_per_sample);
    /* The foreground job's optimizer and hyper-parameters. */
    if (j->optimizer == OPT_ADAM)
        W("\t.adam = true,\n\t.adam_cfg = {(float)%.9g, 0.9f, 0.999f, 1e-8f, (float)%.9g},\n",
          j->lr, j->weight_decay);
    else
        W("\t.sgd = {(float)%.9g, (float)%.9g, (float)%.9g, false},\n", j->lr, j->momentum,
          j->weight_decay);
    W("\t.setup = %ssetup,\n\t.unit = %sunit,\n};\n\n", pre, pre);
    return true;
}

/* The background models of the placed copies, before the foreground's code. */
static bool emit_background(emitter *fg)
{
    const ir_interleave *il = fg->job->interleave;
    if (!il)
        return true;
    bool *done = arena_alloc(fg->a, (size_t)(fg->job->nbackground + 1));
    for (int c = 0; c < il->ncopies; c++) {
        int k = il->copies[c].job;
        if (k < 0 || k >= fg->job->nbackground)
            ice("background copy of job %d of %d", k, fg->job->nbackground);
        if (done[k])
            continue;
        done[k] = true;
        if (!emit_background_model(fg, k))
            return false;
    }
    return true;
}

/* main()'s placing of every copy: each rank sets up the copies it hosts. */
static void emit_background_copies(emitter *e)
{
    const ir_interleave *il = e->job->interleave;
    if (!il || il->ncopies == 0)
        return;
    double slowdown = e->job->slowdown > 0 ? e->job->slowdown : IR_SLOWDOWN_DEFAULT;
    W("\t/* Background copies (the interleave pass): model, rank, seed, slices. */\n");
    for (int c = 0; c < il->ncopies; c++) {
        const ir_bg_copy *cp = &il->copies[c];
        W("\trt_bg_add(&bg%d_model, %d, %lluu, %d, (const int[]){", cp->job, cp->rank,
          (unsigned long long)cp->seed, cp->nslices);
        for (int s = 0; s <= cp->nslices; s++)
            W("%s%d", s ? ", " : "", cp->cut[s]);
        W("}, %.9g);\n", slowdown);
    }
}

static void emit_main(emitter *e)
{
    const ir_job *j = e->job;
    const ir_type *xt = &OP(e, e->sample_input)->type;
    W("int main(int argc, char **argv)\n{\n");
    W("\trt_set_defaults(%lld, %s);   /* the job's iterations and data */\n",
      (long long)j->iterations, e->fmnist ? "RT_DATA_FMNIST" : "RT_DATA_SYNTHETIC");
    W("\tconst rt_options *o = rt_init(&argc, &argv, \"%s\");\n", j->name);
    W("\trt_check_world_size(WORLD);\n");
    if (j->dtype == DT_BF16 || j->dtype == DT_F16)
        W("\trt_set_compute_dtype(%s);   /* the job's dtype: GEMM inputs in 16 bits on GPUs */\n",
          j->dtype == DT_BF16 ? "RT_COMPUTE_BF16" : "RT_COMPUTE_F16");
    W("\trt_pool *pool = rt_pool_new();\n\trt_params *ps = rt_params_new(pool);\n");
    W("\tsetup(pool, ps, o->seed);\n");
    W("\trt_data *data = rt_data_open(o, %d, (int64_t[]){", xt->rank - 1);
    for (int k = 1; k < xt->rank; k++)
        W("%s%lld", k > 1 ? ", " : "", (long long)xt->dim[k]);
    W("}, %s, %lld, %lld, %lld);\n", xt->elem == EL_I32 ? "RT_I32" : "RT_F32", (long long)e->vocab,
      (long long)e->classes, (long long)e->labels_per_sample);
    if (j->optimizer == OPT_ADAM)
        W("\tconst rt_adam opt = {(float)%.9g, 0.9f, 0.999f, 1e-8f, (float)%.9g};\n", j->lr,
          j->weight_decay);
    else
        W("\tconst rt_sgd opt = {(float)%.9g, (float)%.9g, (float)%.9g, false};\n", j->lr,
          j->momentum, j->weight_decay);
    emit_background_copies(e);
    W("\tint64_t first = rt_checkpoint_attach(ps);\n");
    W("\tdouble t0 = rt_now();\n");
    W("\tfor (int64_t step = first; step < o->iterations; step++) {\n");
    W("\t\trt_step_begin(step);\n");
    W("\t\tdouble loss = rt_world_sum(forward(pool, data, o->seed, step, true, NULL));\n");
    W("\t\trt_params_zero_grad(ps);\n");
    W("\t\tbackward(pool, o->seed, step);\n");
    W("\t\trt_%s_step(ps, &opt);\n", j->optimizer == OPT_ADAM ? "adam" : "sgd");
    W("\t\trt_step_end(step);\n");
    W("\t\trt_report_loss(step, loss);\n");
    W("\t}\n");
    W("\tdouble elapsed = rt_now() - t0;\n");
    if (j->interleave && j->interleave->ncopies > 0)
        W("\trt_bg_finish(elapsed);   /* background samples/s, measured slowdown */\n");
    W("\tint64_t steps = o->iterations > first ? o->iterations - first : 0;\n");
    W("\tif (o->rank == 0 && steps > 0)\n\t\tprintf(\"throughput %%.1f samples/s (%%lld steps of %%lld samples in %%.3f s)\\n\",\n"
      "\t\t       (double)(steps * BATCH) / elapsed, (long long)steps, (long long)BATCH, elapsed);\n");
    W("\tint64_t tests = rt_data_test_count(data) / BATCH, correct = 0;\n");
    W("\tfor (int64_t t = 0; t < tests; t++) {\n\t\trt_progress();\n\t\tforward(pool, data, o->seed, t, false, &correct);\n\t}\n");
    W("\tdouble total = rt_world_sum((double)correct);\n");
    W("\tif (o->rank == 0 && tests > 0)\n\t\tprintf(\"test accuracy %%.4f (%%lld samples)\\n\", total / (double)(tests * BATCH),\n"
      "\t\t       (long long)(tests * BATCH));\n");
    W("\trt_data_close(data);\n\trt_pool_free(pool);\n\trt_finalize();\n\treturn 0;\n}\n");
}

bool cg_emit_c(FILE *out, const ir_module *m, int job, diag_ctx *d)
{
    arena *a = arena_new();
    emitter e = {.out = out,
                 .m = m,
                 .job = &m->jobs[job],
                 .g = m->graphs[m->jobs[job].graph],
                 .d = d,
                 .a = a,
                 .seg = -1,
                 .pre = ""};
    bool ok = analyse(&e);
    if (ok) {
        emit_header(&e);
        ok = emit_background(&e);
    }
    if (ok) {
        emit_defines(&e);
        emit_globals(&e);
        emit_setup(&e);
        emit_forward(&e);
        emit_backward(&e);
        emit_main(&e);
    }
    arena_free(a);
    return ok;
}
