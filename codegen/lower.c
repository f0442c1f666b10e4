/*
 * lower.c: a planned job in, its training program as data (cg_program) out.
 *
 * One walk over the planned graph decides everything a writer needs. The
 * program sets up one communicator per distinct rank set of the plan and
 * allocates every tensor of this rank's shard once; per iteration it loads
 * the data, runs the forward of every layer, the loss, the backward in
 * reverse order, sums the gradients where the IR's allreduce ops say and
 * steps the optimizer. Every layer is guarded by its rank set's membership.
 * Where a layer's rank set differs from its producer's, the comm pass put a
 * reshard op between them: the activations move (sample ranges between
 * ranks) in forward and their gradients come back in backward. The order of
 * forward and backward is the job's schedule (the schedule pass's, docs/ir.md
 * "Schedule"): split-phase reshards started and waited for where it says,
 * the same order on every rank (merge_programs); with --blocking-reshard (and
 * in background programs) every op runs in IR order with blocking reshards. Everything
 * communication does is read from the ops' rank sets (op->plan): the IR's
 * comm ops carry nothing else. Shapes per sample are constants; shard sizes
 * follow from the rank set and the global batch at startup.
 *
 * Gradients of a value with one consumer are written in place by that
 * consumer; with several consumers (residual adds, branches) the first to run
 * its backward (the last in the graph) writes the value's gradient and each
 * later one writes its own buffer, added to it: no zeroing, no copy. An add
 * passes its gradient on: an operand whose only consumer it is (same rank
 * set, same type) shares the add's gradient tensor instead of a copy of it.
 * Flatten and reshape are views: of the operand's value, and their gradient
 * of the operand's gradient where they alone write it.
 *
 * Graph segments: runs of layers on one rank set with no communication, no
 * data loading and no host synchronisation between them. The CUDA backend
 * captures each as a CUDA graph after warm-up and replays it; on the CPU the
 * body simply runs. Evaluation always runs eagerly.
 */
#include "codegen.h"

#include <string.h>

#define MAX_SEGMENTS 1024      /* rt_graph_begin's ids */
#define MAXIN        64        /* operands of one op */
#define RESHARD_IDS  (1 << 24) /* rt_reshard_start's ids (burstrt.h) */

typedef struct lowerer {
    arena *a;
    cg_program *p;
    const ir_graph *g;
    const ir_job *job;
    diag_ctx *d;
    int n;             /* ops */
    int *uses;         /* per op: number of operand slots using it */
    bool *direct;      /* per op and operand (op * MAXIN + j): gradient written in place */
    bool *accum;       /* per op: its gradient is a sum of contributions */
    bool *zero;        /* per op: summed, and no contribution writes it first: zeroed */
    int *pass;         /* per op: the add whose gradient tensor it shares, or -1 */
    bool *y_view;      /* per op (flatten, reshape): its value is a view of its operand's */
    bool *dy_view;     /* per op (flatten, reshape): its gradient is a view of its operand's */
    bool *has_grad;    /* per op: has a gradient tensor */
    int *allreduce_of; /* per op: the allreduce op that sums its gradients, or -1 */
    /* Per op: the first allreduce whose placement names it as start (complete), or
     * -1; per allreduce: the next one naming the same op. Later layers first. */
    int *starts_at, *next_start, *completes_at, *next_complete;
    int *layer;    /* per op: its number among the model's own ops */
    int *set_slot; /* open-addressing table of set indices, by rank list */
    int set_slots; /* its size, a power of two */
    int first_loss;
    int *y, *dy;      /* per op: value and gradient variables (-1: none) */
    int *gbuf;        /* per op and operand: its own gradient buffer (-1: none) */
    int *params;      /* per op: IR_MAX_OP_PARAMS parameter variables */
    ir_param *pinfo;  /* per op: IR_MAX_OP_PARAMS parameters */
    int *nparams;     /* per op */
    cg_op_code *code; /* per op: its calls */
    cg_stmt *seg;     /* the open graph segment, or NULL */
    /* Split-phase reshards: the program follows the job's schedule (build_scheduled). */
    bool split;
    int *reshard_id; /* per op: a split reshard's forward id, else -1 */
} lowerer;

static const ir_op *OP(const lowerer *L, int i)
{
    return &L->g->ops[i];
}

static bool is_comm(const lowerer *L, int i)
{
    return ir_op_class_of(OP(L, i)) == OC_COMM;
}

/* A C identifier for op i: its index and its name with dots made underscores. */
static const char *cname(lowerer *L, int i)
{
    char *s = arena_printf(L->a, "%sL%d_%s", L->p->pre, i, OP(L, i)->name);
    for (char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
              *q == '_'))
            *q = '_';
    return s;
}

/* The value v is, seen through any reshards in between. */
static int source_of(const lowerer *L, int v)
{
    while (OP(L, v)->opcode == OP_RESHARD)
        v = OP(L, v)->inputs[0];
    return v;
}

/* The index of the rank set (n, ranks), added if new: a hash lookup, so a
 * graph of a hundred thousand ops on as many rank sets stays linear. */
static int set_index(lowerer *L, int n, const int *ranks)
{
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++)
        h = (h ^ (uint32_t)ranks[k]) * 1099511628211ull;
    uint64_t mask = (uint64_t)L->set_slots - 1;
    cg_program *p = L->p;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        int s = L->set_slot[i];
        if (s < 0) {
            L->set_slot[i] = p->nsets;
            p->sets[p->nsets] = (cg_rankset){n, ranks};
            return p->nsets++;
        }
        if (p->sets[s].n == n && memcmp(p->sets[s].ranks, ranks, sizeof(int) * (size_t)n) == 0)
            return s;
    }
}

static int set_size(const lowerer *L, int i)
{
    return L->p->sets[L->p->set_of[i]].n;
}

static const char *plural(int n)
{
    return n == 1 ? "" : "s";
}

/* ---- analysis: rank sets, gradients, what the runtime cannot do ---- */

static void *zalloc(lowerer *L, size_t n, size_t size)
{
    return arena_alloc(L->a, n * size);
}

/* The data the job reads: one sample input, one labels input. */
static bool analyse_data(lowerer *L)
{
    cg_program *p = L->p;
    bool ok = true;
    for (int i = 0; i < L->n; i++)
        if (OP(L, i)->opcode == OP_INPUT && i != p->label_input) {
            /* Without a loss no input is the labels yet: "needs a loss" below says why. */
            if (p->sample_input >= 0 && L->first_loss >= 0) {
                diag_error(
                    L->d, OP(L, i)->loc,
                    "the runtime's data sources feed one input and one labels input; '%s' is a third",
                    OP(L, i)->name);
                ok = false;
            }
            p->sample_input = i;
        }
    if (L->first_loss < 0 || p->sample_input < 0) {
        diag_error(L->d, L->g->loc,
                   "model '%s' needs an input and a cross_entropy loss to be trained", L->g->name);
        return false;
    }
    if (OP(L, p->sample_input)->type.elem == EL_I32)
        for (int i = 0; i < L->n; i++)
            if (OP(L, i)->opcode == OP_EMBEDDING &&
                source_of(L, OP(L, i)->inputs[0]) == p->sample_input)
                p->vocab = ir_embedding_attrs(OP(L, i))->vocab;
    const char *data = L->job->data ? L->job->data : "synthetic";
    p->data = data;
    p->fmnist = strcmp(data, "fmnist") == 0;
    /* The runtime checks the files when the program starts; here only the source's name. */
    if (!p->fmnist && strcmp(data, "synthetic") != 0 && strncmp(data, "fmnist:", 7) != 0 &&
        strncmp(data, "npy:", 4) != 0 && strncmp(data, "images:", 7) != 0 &&
        strncmp(data, "tokens:", 7) != 0 && strncmp(data, "tokens32:", 9) != 0) {
        diag_error(L->d, L->job->loc,
                   "job '%s': data = \"%s\" names no source the runtime reads (synthetic, "
                   "fmnist, \"fmnist:DIR\", \"npy:X.npy,Y.npy\", \"images:DIR\" or "
                   "\"tokens[32]:FILE\")",
                   L->job->name, data);
        ok = false;
    }
    return ok;
}

/* The rank sets of every op and what the program checks before it exists. */
static bool analyse_ops(lowerer *L)
{
    cg_program *p = L->p;
    int n = L->n;
    int *all = zalloc(L, (size_t)p->world, sizeof(int));
    for (int r = 0; r < p->world; r++)
        all[r] = r;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const ir_op *op = OP(L, i);
        if (op->ninputs > MAXIN) {
            diag_error(L->d, op->loc, "'%s' has more than %d operands", op->name, MAXIN);
            return false;
        }
        if (p->bg) {
            /* A background copy runs every op (communication too: one-rank no-ops) on
             * its own rank. */
            p->set_of[i] = set_index(L, 1, all);
        } else if (op->plan.nranks) {
            if (op->plan.ranks[op->plan.nranks - 1] >= p->world) {
                diag_error(L->d, op->loc, "'%s' is planned on rank %d, but the cluster has %d",
                           op->name, op->plan.ranks[op->plan.nranks - 1], p->world);
                ok = false;
            }
            if (!is_comm(L, i) && op->plan.nranks > L->job->batch) {
                diag_error(L->d, op->loc, "'%s' runs on %d ranks, more than the batch of %lld",
                           op->name, op->plan.nranks, (long long)L->job->batch);
                ok = false;
            }
            p->set_of[i] = set_index(L, op->plan.nranks, op->plan.ranks);
        } else if (is_comm(L, i)) {
            ice("comm op '%s' without a rank set passed the verifier", op->name);
        } else {
            p->set_of[i] =
                set_index(L, p->world < L->job->batch ? p->world : (int)L->job->batch, all);
        }
        if (op->opcode == OP_ALLREDUCE) {
            L->allreduce_of[op->inputs[0]] = i;
            const ir_attrs_allreduce *at = ir_allreduce_attrs(op);
            if (at->start < 0 || at->start >= i || at->complete >= at->start)
                ice("allreduce '%s' with a placement the verifier refuses", op->name);
            L->next_start[i] = L->starts_at[at->start];
            L->starts_at[at->start] = i;
            if (at->complete >= 0) {
                L->next_complete[i] = L->completes_at[at->complete];
                L->completes_at[at->complete] = i;
            }
            continue; /* sums gradients: no data, no gradient, not a use */
        }
        for (int j = 0; j < op->ninputs; j++) {
            L->uses[op->inputs[j]]++;
            if (OP(L, op->inputs[j])->opcode == OP_CROSSENTROPY) {
                diag_error(L->d, op->loc,
                           "'%s' uses a loss as an input; a loss must be a final value", op->name);
                ok = false;
            }
        }
        L->has_grad[i] =
            op->opcode != OP_INPUT && op->opcode != OP_CROSSENTROPY && op->type.elem == EL_F32;

        /* What the runtime does not implement is an error here, not at run time. */
        if (op->type.rank > 6) {
            diag_error(L->d, op->loc, "'%s': the runtime supports at most 6 dimensions", op->name);
            ok = false;
        }
        /* The program sizes tensors as batch x elements per sample (in
         * int64, and in bytes): a value of the whole batch must fit. */
        int64_t elems = ir_type_elems_per_sample(&op->type), total;
        if (elems < 0 || __builtin_mul_overflow(elems, L->job->batch, &total) ||
            total > ((int64_t)1 << 60)) {
            diag_error(L->d, op->loc,
                       "'%s': %lld samples of %lld elements are more than 2^60 elements, more than "
                       "the program can hold",
                       op->name, (long long)L->job->batch, (long long)elems);
            ok = false;
        }
        if (op->opcode == OP_CROSSENTROPY) {
            if (L->first_loss < 0)
                L->first_loss = i;
            int lab = source_of(L, op->inputs[1]);
            const ir_type *lt = &OP(L, op->inputs[0])->type;
            if (OP(L, lab)->opcode != OP_INPUT) {
                diag_error(L->d, op->loc, "'%s': labels must come from an input", op->name);
                ok = false;
            } else if (p->label_input >= 0 && p->label_input != lab) {
                diag_error(L->d, op->loc, "'%s': every loss must use the same labels input",
                           op->name);
                ok = false;
            }
            p->label_input = lab;
            p->classes = lt->dim[lt->rank - 1];
            p->labels_per_sample = ir_type_elems_per_sample(&OP(L, op->inputs[1])->type);
        }
        int tie = op->opcode == OP_LINEAR ? ir_linear_attrs(op)->tie : -1;
        if (tie >= 0 && op->plan.nranks && OP(L, tie)->plan.nranks &&
            p->set_of[i] != p->set_of[tie]) {
            diag_error(L->d, op->loc,
                       "'%s' ties its weight to '%s', so both must run on the same ranks", op->name,
                       OP(L, tie)->name);
            ok = false;
        }
    }
    return analyse_data(L) && ok;
}

/* A summed gradient is written, not added to, by its first contribution: the
 * consumer whose backward runs first (backward runs in reverse graph order)
 * among those that write one, on the value's ranks (or a reshard, whose
 * backward brings the gradient to them). Every backward kernel overwrites
 * its operands' gradients whole. Without such a consumer the sum starts
 * from zero. */
static void choose_first_writers(lowerer *L)
{
    const cg_program *p = L->p;
    for (int q = 0; q < L->n; q++)
        L->zero[q] = L->accum[q];
    for (int i = L->n - 1; i >= 0; i--) {
        const ir_op *op = OP(L, i);
        if (op->opcode == OP_ALLREDUCE || (!L->has_grad[i] && op->opcode != OP_CROSSENTROPY))
            continue;
        for (int j = 0; j < op->ninputs; j++) {
            int q = op->inputs[j];
            if (!L->zero[q] || (p->set_of[q] != p->set_of[i] && op->opcode != OP_RESHARD))
                continue;
            L->direct[i * MAXIN + j] = true;
            L->zero[q] = false;
        }
    }
}

/* An add's backward is the identity twice: an operand whose gradient it
 * alone writes, of the add's type, shares the add's gradient tensor. That
 * tensor is complete before the add's backward runs (its consumers ran
 * first) and nothing writes it later (the operand's only consumer is the
 * add), so the operand's backward reads what a copy would hold. */
static void choose_pass_through(lowerer *L)
{
    for (int i = 0; i < L->n; i++) {
        const ir_op *op = OP(L, i);
        if (op->opcode != OP_ADD || !L->has_grad[i])
            continue;
        for (int j = 0; j < op->ninputs; j++) {
            int q = op->inputs[j];
            if (L->has_grad[q] && L->uses[q] == 1 && L->direct[i * MAXIN + j] &&
                L->p->set_of[q] == L->p->set_of[i] && ir_type_equal(&OP(L, q)->type, &op->type))
                L->pass[q] = i;
        }
    }
}

/* Flatten and reshape keep the elements in order: their value is a view of
 * the operand's (which nothing writes after the operand's forward). Their
 * gradient is a view of the operand's where they alone write that (one use,
 * in place) and own theirs (not an add's they pass through to): the
 * operand's gradient is then exactly theirs, complete when their backward
 * would have copied it. */
static void choose_views(lowerer *L)
{
    for (int i = 0; i < L->n; i++) {
        const ir_op *op = OP(L, i);
        if (op->opcode != OP_FLATTEN && op->opcode != OP_RESHAPE)
            continue;
        int q = op->inputs[0];
        if (L->p->set_of[q] != L->p->set_of[i] || OP(L, q)->type.elem != op->type.elem)
            continue;
        L->y_view[i] = true;
        L->dy_view[i] = L->has_grad[i] && L->has_grad[q] && L->uses[q] == 1 &&
                        L->direct[i * MAXIN] && L->pass[i] < 0;
    }
}

/* Where each gradient goes, and that the communication is explicit. */
static bool analyse_grads(lowerer *L)
{
    cg_program *p = L->p;
    for (int i = 0; i < L->n; i++) {
        const ir_op *op = OP(L, i);
        if (op->opcode == OP_ALLREDUCE)
            continue;
        for (int j = 0; j < op->ninputs; j++) {
            int q = op->inputs[j];
            if (op->opcode != OP_RESHARD && p->set_of[q] != p->set_of[i]) {
                /* Moving data between rank sets is the comm pass's job. */
                diag_error(L->d, op->loc,
                           "'%s' on %d rank%s reads '%s' from other ranks without a reshard op "
                           "(run the comm pass)",
                           op->name, set_size(L, i), plural(set_size(L, i)), OP(L, q)->name);
                return false;
            }
            if (!L->has_grad[q])
                continue;
            if (L->uses[q] == 1 && (p->set_of[q] == p->set_of[i] || op->opcode == OP_RESHARD))
                L->direct[i * MAXIN + j] = true;
            else
                L->accum[q] = true;
        }
    }
    choose_first_writers(L);
    choose_pass_through(L);
    choose_views(L);
    /* Gradients are summed by the allreduce ops the IR holds, and only by
     * them (docs/ir.md): a layer whose parameters live on several ranks
     * without one would train replicas that drift apart. */
    for (int i = 0; i < L->n; i++) {
        const ir_op *op = OP(L, i);
        ir_param ps[IR_MAX_OP_PARAMS];
        if (is_comm(L, i) || L->allreduce_of[i] >= 0 || set_size(L, i) < 2 ||
            ir_op_param_list(L->g, op, ps) == 0)
            continue;
        diag_error(L->d, op->loc,
                   "'%s' has parameters on %d ranks, but no allreduce op sums their gradients "
                   "(run the comm pass)",
                   op->name, set_size(L, i));
        return false;
    }
    return true;
}

/* The runtime's ids of the split-phase reshards (two per reshard, forward and
 * backward), in graph order, the same on every rank. */
static bool number_reshards(lowerer *L)
{
    int next_id = 0;
    for (int i = 0; i < L->n; i++) {
        const ir_op *op = OP(L, i);
        if (op->opcode != OP_RESHARD)
            continue;
        if (next_id > RESHARD_IDS - 2) {
            diag_error(L->d, op->loc, "more than %d reshards: the runtime numbers fewer",
                       RESHARD_IDS / 2);
            return false;
        }
        L->reshard_id[i] = next_id;
        next_id += 2;
    }
    return true;
}

/* ---- variables and each op's calls ---- */

/* A tensor of op i's shard on rank set `set`: [its samples, dims of t...]. */
static int tensor(lowerer *L, int i, const char *name, const ir_type *t, int set,
                  const char *comment)
{
    cg_var v = {.name = name,
                .kind = CV_TENSOR,
                .op = i,
                .set = set,
                .elem = t->elem,
                .rank = t->rank,
                .comment = comment};
    v.dim[0] = (cg_size){1, set, NULL};
    for (int k = 1; k < t->rank; k++)
        v.dim[k] = (cg_size){t->dim[k], -1, NULL};
    return cg_var_add(L->a, L->p, &v);
}

/* Op i's gradient tensor: its own, or that of the add it passes through to
 * (made here when the operand comes first). */
static int grad_var(lowerer *L, int i)
{
    int r = i;
    while (L->pass[r] >= 0)
        r = L->pass[r];
    if (L->dy[r] < 0)
        L->dy[r] = tensor(L, r, arena_printf(L->a, "dy_%s", cname(L, r)), &OP(L, r)->type,
                          L->p->set_of[r], NULL);
    return L->dy[r];
}

static void make_vars(lowerer *L, int i)
{
    const ir_op *op = OP(L, i);
    cg_program *p = L->p;
    const char *c = cname(L, i);
    int s = p->set_of[i];
    if (op->opcode == OP_ALLREDUCE)
        return;
    if (op->opcode != OP_CROSSENTROPY)
        L->y[i] = tensor(L, i, arena_printf(L->a, "y_%s", c), &op->type, s, NULL);
    if (L->has_grad[i])
        L->dy[i] = grad_var(L, i);
    for (int j = 0; j < op->ninputs; j++) {
        int q = op->inputs[j];
        if (!L->has_grad[q] || L->direct[i * MAXIN + j])
            continue;
        /* The gradient of a reshard lands on the producer's ranks. */
        int at = op->opcode == OP_RESHARD ? p->set_of[q] : s;
        L->gbuf[i * MAXIN + j] = tensor(
            L, i, arena_printf(L->a, "%sg%d_%d", p->pre, i, j), &OP(L, q)->type, at,
            arena_printf(L->a, "gradient for operand %d, summed into its producer's", j + 1));
    }
    ir_param *ps = &L->pinfo[i * IR_MAX_OP_PARAMS];
    L->nparams[i] = ir_op_param_list(L->g, op, ps);
    for (int k = 0; k < L->nparams[i]; k++) {
        cg_var v = {.name = arena_printf(L->a, "p_%s_%s", c, ps[k].name),
                    .kind = CV_PARAM,
                    .op = i,
                    .set = s,
                    .elem = EL_F32,
                    .rank = ps[k].ndim,
                    .param_name = arena_printf(L->a, "%s.%s", op->name, ps[k].name),
                    .buffer = ps[k].buffer};
        for (int q = 0; q < ps[k].ndim; q++)
            v.dim[q] = (cg_size){ps[k].dim[q], -1, NULL};
        L->params[i * IR_MAX_OP_PARAMS + k] = cg_var_add(L->a, p, &v);
    }
}

/* Where operand j's gradient goes: in place into the producer's, or op i's
 * own buffer; -1 when the producer has none. */
static int grad_target(const lowerer *L, int i, int j)
{
    int q = OP(L, i)->inputs[j];
    if (!L->has_grad[q])
        return -1;
    return L->direct[i * MAXIN + j] ? L->dy[q] : L->gbuf[i * MAXIN + j];
}

static void make_calls(lowerer *L, int i)
{
    const ir_op *op = OP(L, i);
    int *x = zalloc(L, (size_t)op->ninputs + 1, sizeof(int));
    int *dx = zalloc(L, (size_t)op->ninputs + 1, sizeof(int));
    for (int j = 0; j < op->ninputs; j++) {
        x[j] = L->y[op->inputs[j]];
        dx[j] = grad_target(L, i, j);
    }
    /* An allreduce sums its layer's parameters. */
    int owner = op->opcode == OP_ALLREDUCE ? op->inputs[0] : i;
    int tie = op->opcode == OP_LINEAR ? ir_linear_attrs(op)->tie : -1;
    cg_op_env env = {.a = L->a,
                     .p = L->p,
                     .op = i,
                     .set = L->p->set_of[i],
                     .layer = L->layer[i],
                     .y = L->y[i],
                     .dy = L->dy[i],
                     .x = x,
                     .dx = dx,
                     .params = &L->params[owner * IR_MAX_OP_PARAMS],
                     .pinfo = &L->pinfo[owner * IR_MAX_OP_PARAMS],
                     .nparams = L->nparams[owner],
                     .tied = tie >= 0 ? L->params[tie * IR_MAX_OP_PARAMS] : -1,
                     .first_loss = i == L->first_loss,
                     .y_view = L->y_view[i],
                     .dy_view = L->dy_view[i],
                     .reshard_id = L->reshard_id[i]};
    cg_op_calls(&env, &L->code[i]);
}

/* ---- the three bodies ---- */

static void append(lowerer *L, cg_block *to, const cg_block *from)
{
    for (int k = 0; k < from->n; k++) {
        cg_stmt *s = cg_add(L->a, to, from->s[k].kind, from->s[k].op, from->s[k].comment);
        *s = from->s[k];
    }
}

static cg_block *guard(lowerer *L, cg_block *b, int op, int set, const char *comment)
{
    cg_stmt *s = cg_add(L->a, b, CS_IF, op, comment);
    s->cond = (cg_cond){CC_MEMBER, set, -1};
    return &s->body;
}

static void trace(lowerer *L, cg_block *b, int op, const char *fn, const char *name)
{
    if (name)
        CG_CALL(L->a, b, op, fn, cg_str(name));
    else
        cg_add_call(L->a, b, op, fn, NULL, 0);
}

/* op i's calls from `calls`, between a trace region's push and pop. */
static void traced(lowerer *L, cg_block *b, int i, const char *suffix, const cg_block *calls)
{
    trace(L, b, i, "rt_trace_push", arena_printf(L->a, "%s%s", OP(L, i)->name, suffix));
    append(L, b, calls);
    trace(L, b, i, "rt_trace_pop", NULL);
}

static const char *init_fn[] = {[PI_KAIMING] = "rt_init_kaiming_uniform",
                                [PI_NORMAL] = "rt_init_normal",
                                [PI_ONE] = "rt_init_const",
                                [PI_ZERO] = "rt_init_const"};

static void build_setup(lowerer *L)
{
    cg_program *p = L->p;
    for (int i = 0; i < L->n; i++) {
        const ir_op *op = OP(L, i);
        if (op->opcode == OP_ALLREDUCE)
            continue;
        int s = p->set_of[i];
        if (op->opcode == OP_RESHARD && L->gbuf[i * MAXIN] >= 0) {
            int from = p->set_of[op->inputs[0]];
            cg_add(L->a, guard(L, &p->setup, i, from, NULL), CS_NEW, i, NULL)->var =
                L->gbuf[i * MAXIN];
        }
        cg_block *b = guard(L, &p->setup, i, s, op->name);
        if (L->y[i] >= 0 && !L->y_view[i])
            cg_add(L->a, b, CS_NEW, i, NULL)->var = L->y[i];
        if (L->dy[i] >= 0 && L->pass[i] < 0 && !L->dy_view[i])
            cg_add(L->a, b, CS_NEW, i, NULL)->var = L->dy[i];
        for (int j = 0; j < op->ninputs && op->opcode != OP_RESHARD; j++)
            if (L->gbuf[i * MAXIN + j] >= 0)
                cg_add(L->a, b, CS_NEW, i, NULL)->var = L->gbuf[i * MAXIN + j];
        for (int k = 0; k < L->nparams[i]; k++) {
            const ir_param *ps = &L->pinfo[i * IR_MAX_OP_PARAMS + k];
            int v = L->params[i * IR_MAX_OP_PARAMS + k];
            cg_add(L->a, b, CS_PARAM, i, NULL)->var = v;
            /* Every plan of a model starts from the same weights: the draw
             * is keyed by (seed, layer, parameter). */
            cg_arg value = cg_param(v, false), seed = cg_plain(CA_SEED),
                   layer = cg_int(L->layer[i]);
            switch (ps->init) {
            case PI_KAIMING:
                CG_CALL(L->a, b, i, init_fn[ps->init], value, cg_int(ps->fan_in), seed, layer,
                        cg_int(k));
                break;
            case PI_NORMAL:
                CG_CALL(L->a, b, i, init_fn[ps->init], value, cg_f32(0), cg_f32(0.02), seed, layer,
                        cg_int(k));
                break;
            case PI_ONE:
            case PI_ZERO:
                CG_CALL(L->a, b, i, init_fn[ps->init], value, cg_f32(ps->init == PI_ONE));
                break;
            }
        }
        append(L, b, &L->code[i].setup);
    }
    /* Views, once every tensor exists; in graph order, so that a view's
     * source that is a view itself exists too. */
    for (int i = 0; i < L->n; i++) {
        if (!L->y_view[i] && !L->dy_view[i] && !L->code[i].views.n)
            continue;
        cg_block *b = guard(L, &p->setup, i, p->set_of[i], NULL);
        int q = OP(L, i)->inputs[0];
        if (L->y_view[i]) {
            cg_stmt *s = cg_add(L->a, b, CS_VIEW, i, NULL);
            s->var = L->y[i];
            s->src = L->y[q];
        }
        if (L->dy_view[i]) {
            cg_stmt *s = cg_add(L->a, b, CS_VIEW, i, NULL);
            s->var = L->dy[i];
            s->src = L->dy[q];
        }
        append(L, b, &L->code[i].views);
    }
}

static bool graphable(const lowerer *L, int i)
{
    /* A background step runs op by op (cg_lower_background). */
    return !L->p->bg && L->code[i].graphable && (L->p->nsegs < MAX_SEGMENTS || L->seg);
}

/* Where op i's statements go: b, or in a background program the body of
 * `if (unit == i)` appended to b. */
static cg_block *unit_block(lowerer *L, cg_block *b, int i)
{
    if (!L->p->bg)
        return b;
    cg_stmt *s = cg_add(L->a, b, CS_IF, i, NULL);
    s->cond = (cg_cond){CC_UNIT, -1, i};
    return &s->body;
}

/* Drops the unit's `if` again when nothing went into it. */
static void unit_done(cg_block *b, const cg_block *ub)
{
    if (ub != b && ub->n == 0)
        b->n--;
}

/* The block that ops of rank set `set` go into: the open segment, or a new one. */
static cg_block *segment(lowerer *L, cg_block *b, int set, bool forward)
{
    if (L->seg && L->seg->set == set)
        return &L->seg->body;
    cg_stmt *s = cg_add(L->a, b, CS_SEGMENT, -1, NULL);
    s->seg = L->p->nsegs++;
    s->set = set;
    s->forward = forward;
    L->seg = s;
    return &s->body;
}

/* Op i's part of forward(). */
static void forward_op(lowerer *L, cg_block *b, int i)
{
    cg_program *p = L->p;
    const ir_op *op = OP(L, i);
    int s = p->set_of[i], n = set_size(L, i);
    if (graphable(L, i)) {
        cg_block *in = segment(L, b, s, true);
        cg_stmt *sc = cg_add(L->a, in, CS_SCOPE, i,
                             arena_printf(L->a, "%s on %d rank%s", op->name, n, plural(n)));
        traced(L, &sc->body, i, "", &L->code[i].fwd);
        return;
    }
    L->seg = NULL;
    const char *what = arena_printf(L->a, "%s = %s on %d rank%s", op->name,
                                    ir_op_info_of(op->opcode)->name, n, plural(n));
    if (op->opcode == OP_RESHARD) {
        /* Every rank of either set takes part: no membership guard. */
        cg_block tmp = {0};
        traced(L, &tmp, i, "", &L->code[i].fwd);
        tmp.s[0].comment = what;
        append(L, b, &tmp);
        return;
    }
    traced(L, guard(L, b, i, s, what), i, "", &L->code[i].fwd);
}

/* Contributions of op i to its operands' gradients that went to its own buffers. */
static void accumulate(lowerer *L, cg_block *b, int i)
{
    const ir_op *op = OP(L, i);
    for (int j = 0; j < op->ninputs; j++)
        if (L->gbuf[i * MAXIN + j] >= 0)
            CG_CALL(L->a, b, i, "rt_accumulate", cg_var_arg(L->dy[op->inputs[j]]),
                    cg_var_arg(L->gbuf[i * MAXIN + j]));
}

/* One half of a split-phase reshard r: its forward's or its backward's start or wait,
 * on every rank (the runtime skips ranks in neither set), in a trace region of its own
 * (a wait's region is the time this rank waits for its peers). A backward wait adds the
 * gradient to the operand's when r has a buffer of its own. */
static void reshard_half(lowerer *L, cg_block *b, int r, bool forward, bool start)
{
    cg_program *p = L->p;
    const ir_op *op = OP(L, r);
    int q = op->inputs[0], n = set_size(L, r), m = p->sets[p->set_of[q]].n;
    L->seg = NULL;
    const cg_block *calls = forward ? (start ? &L->code[r].fwd : &L->code[r].wait)
                                    : (start ? &L->code[r].bwd : &L->code[r].bwd_wait);
    cg_block tmp = {0};
    traced(L, &tmp, r, forward ? (start ? ".start" : "") : (start ? ".bwd.start" : ".bwd"), calls);
    tmp.s[0].comment = forward
                           ? arena_printf(L->a, "%s = reshard %d -> %d ranks: %s", op->name, m, n,
                                          start ? "start" : "wait")
                           : arena_printf(L->a, "%s: the gradient goes back, %d -> %d ranks: %s",
                                          op->name, n, m, start ? "start" : "wait");
    append(L, b, &tmp);
    if (!forward && !start && L->gbuf[r * MAXIN] >= 0) /* else written in place */
        accumulate(L, guard(L, b, r, p->set_of[q], NULL), r);
}

static void backward_op(lowerer *L, cg_block *b, int i);

static void build_forward(lowerer *L)
{
    cg_block *b = &L->p->forward;
    L->seg = NULL;
    for (int i = 0; i < L->n; i++) {
        if (OP(L, i)->opcode == OP_ALLREDUCE)
            continue;
        cg_block *ub = unit_block(L, b, i);
        forward_op(L, ub, i);
        unit_done(b, ub);
    }
}

/* Op i's part of backward(). */
static void backward_op(lowerer *L, cg_block *b, int i)
{
    cg_program *p = L->p;
    const ir_op *op = OP(L, i);
    int s = p->set_of[i], n = set_size(L, i);
    if (op->opcode == OP_INPUT || (!L->has_grad[i] && op->opcode != OP_CROSSENTROPY))
        return;
    if (op->opcode == OP_RESHARD) {
        int q = op->inputs[0];
        if (!L->has_grad[q])
            return;
        L->seg = NULL;
        cg_block tmp = {0};
        traced(L, &tmp, i, ".bwd", &L->code[i].bwd);
        tmp.s[0].comment = arena_printf(L->a, "%s: the gradient goes back, %d -> %d ranks",
                                        op->name, n, p->sets[p->set_of[q]].n);
        append(L, b, &tmp);
        if (L->gbuf[i * MAXIN] >= 0) /* else written in place */
            accumulate(L, guard(L, b, i, p->set_of[q], NULL), i);
        return;
    }
    bool any = false;
    for (int j = 0; j < op->ninputs; j++)
        any |= L->has_grad[op->inputs[j]];
    if (!any && !L->code[i].trains)
        return;
    if (graphable(L, i)) {
        cg_block *in = segment(L, b, s, false);
        cg_stmt *sc = cg_add(L->a, in, CS_SCOPE, i,
                             arena_printf(L->a, "%s on %d rank%s", op->name, n, plural(n)));
        traced(L, &sc->body, i, ".bwd", &L->code[i].bwd);
        /* Contributions to gradients on the same ranks are kernels: they
         * stay inside the segment. */
        accumulate(L, in, i);
    } else {
        L->seg = NULL;
        cg_block *in = guard(
            L, b, i, s, arena_printf(L->a, "%s: backward on %d rank%s", op->name, n, plural(n)));
        traced(L, in, i, ".bwd", &L->code[i].bwd);
        accumulate(L, in, i);
    }
}

/* Allreduce ar's start (its bwd calls) or its completion (its wait calls), on
 * the members of its rank set, at the point of the backward where the IR's
 * placement puts it. */
static void allreduce_point(lowerer *L, cg_block *b, int ar, bool start)
{
    L->seg = NULL;
    const char *layer = OP(L, OP(L, ar)->inputs[0])->name;
    int m = set_size(L, ar);
    cg_block *in = guard(L, b, ar, L->p->set_of[ar],
                         arena_printf(L->a, "%s of %s's gradients over %d rank%s",
                                      start ? "start the all-reduce" : "complete the all-reduce",
                                      layer, m, plural(m)));
    trace(L, in, ar, "rt_trace_push",
          arena_printf(L->a, "%s.allreduce%s", layer, start ? "" : ".wait"));
    append(L, in, start ? &L->code[ar].bwd : &L->code[ar].wait);
    trace(L, in, ar, "rt_trace_pop", NULL);
}

/* The allreduces whose placement names op i: completed before its backward
 * (complete = i) or started after it (start = i), later layers first. */
static void allreduces_at(lowerer *L, cg_block *b, int i, bool start)
{
    for (int ar = start ? L->starts_at[i] : L->completes_at[i]; ar >= 0;
         ar = start ? L->next_start[ar] : L->next_complete[ar])
        allreduce_point(L, b, ar, start);
}

/* The gradients that are sums and that no contribution writes first: zeroed
 * at the start of backward (a background step: in its first backward unit). */
static void zero_sums(lowerer *L, cg_block *b)
{
    cg_block *ub = unit_block(L, b, L->n - 1);
    for (int i = 0; i < L->n; i++)
        if (L->zero[i]) {
            cg_stmt *s =
                cg_add(L->a, ub, CS_IF, i,
                       arena_printf(L->a, "%s: summed from %d uses", OP(L, i)->name, L->uses[i]));
            s->cond = (cg_cond){CC_EXISTS, -1, L->y[i]};
            CG_CALL(L->a, &s->body, i, "rt_tensor_zero", cg_var_arg(L->dy[i]));
        }
    unit_done(b, ub);
}

static void build_backward(lowerer *L)
{
    cg_program *p = L->p;
    cg_block *b = &p->backward;
    L->seg = NULL;
    zero_sums(L, b);
    cg_block *ub;
    for (int i = L->n - 1; i >= 0; i--) {
        ub = unit_block(L, b, i);
        allreduces_at(L, ub, i, false);
        backward_op(L, ub, i);
        allreduces_at(L, ub, i, true);
        unit_done(b, ub);
    }
}

/* One order of the schedule's entries that every program follows: the programs
 * merged (each entry is one (kind, op), listed by every program whose ranks take
 * part in it), ready entries in the order they become ready. NULL with an error
 * when the programs order some two entries both ways. */
static const ir_sched_entry **merge_programs(lowerer *L, const ir_schedule *sc, int *count)
{
    size_t nslot = (size_t)SK_COUNT * (size_t)(L->n + 1), total = 0;
    for (int p = 0; p < sc->nprogs; p++)
        total += (size_t)sc->progs[p].n;
    int *listed = zalloc(L, nslot, sizeof(int)); /* programs that list the slot */
    int *at_head = zalloc(L, nslot, sizeof(int));
    int *occ = zalloc(L, nslot, sizeof(int)); /* first occurrence, -1: none */
    int *occ_next = zalloc(L, total + 1, sizeof(int));
    int *occ_prog = zalloc(L, total + 1, sizeof(int));
    int *cur = zalloc(L, (size_t)sc->nprogs + 1, sizeof(int));
    int *queue = zalloc(L, total + 1, sizeof(int));
    const ir_sched_entry **out = zalloc(L, total + 1, sizeof *out);
    const ir_sched_entry **rep = zalloc(L, nslot, sizeof *rep);
#define ESLOT(e) ((size_t)(e)->kind * (size_t)(L->n + 1) + (size_t)((e)->op < 0 ? L->n : (e)->op))
    for (size_t i = 0; i < nslot; i++)
        occ[i] = -1;
    int nocc = 0, distinct = 0;
    for (int p = sc->nprogs - 1; p >= 0; p--)
        for (int i = 0; i < sc->progs[p].n; i++) {
            size_t k = ESLOT(&sc->progs[p].e[i]);
            distinct += listed[k]++ == 0;
            rep[k] = &sc->progs[p].e[i];
            occ_prog[nocc] = p;
            occ_next[nocc] = occ[k];
            occ[k] = nocc++;
        }
    int qh = 0, qt = 0;
    for (int p = 0; p < sc->nprogs; p++)
        if (sc->progs[p].n > 0) {
            size_t k = ESLOT(&sc->progs[p].e[0]);
            if (++at_head[k] == listed[k])
                queue[qt++] = (int)k;
        }
    int no = 0;
    while (qh < qt) {
        size_t k = (size_t)queue[qh++];
        out[no++] = rep[k];
        for (int o = occ[k]; o >= 0; o = occ_next[o]) {
            int p = occ_prog[o];
            if (++cur[p] < sc->progs[p].n) {
                size_t k2 = ESLOT(&sc->progs[p].e[cur[p]]);
                if (++at_head[k2] == listed[k2])
                    queue[qt++] = (int)k2;
            }
        }
    }
#undef ESLOT
    if (no < distinct) {
        diag_error(L->d, sc->loc,
                   "schedule '%s': the programs order some entries both ways; the generated "
                   "program runs one order on every rank",
                   L->job->name);
        return NULL;
    }
    *count = no;
    return out;
}

/* The entry's code: compute, a reshard's half, an allreduce's start or completion. */
static void scheduled_entry(lowerer *L, cg_block *b, const ir_sched_entry *e)
{
    const ir_op *op = OP(L, e->op);
    bool start = e->kind == SK_START || e->kind == SK_START_BWD;
    switch (e->kind) {
    case SK_FWD: forward_op(L, b, e->op); break;
    case SK_BWD: backward_op(L, b, e->op); break;
    case SK_START:
    case SK_WAIT:
        if (op->opcode == OP_RESHARD)
            reshard_half(L, b, e->op, true, start);
        else if (start || ir_allreduce_attrs(op)->complete >= 0)
            allreduce_point(L, b, e->op, start);
        /* else the optimizer's step completes it */
        break;
    case SK_START_BWD:
    case SK_WAIT_BWD:
        if (L->has_grad[op->inputs[0]])
            reshard_half(L, b, e->op, false, start);
        break;
    case SK_LOSS:
    case SK_COUNT: break;
    }
}

/* Forward and backward in the job's schedule (the schedule pass's, or one read
 * back): every rank runs the entries it takes part in, in the programs' order. */
static bool build_scheduled(lowerer *L)
{
    const ir_schedule *sc = L->job->schedule;
    if (!sc) {
        diag_error(L->d, L->job->loc,
                   "job '%s' has no schedule: run the 'schedule' pass before code generation, or "
                   "use --blocking-reshard",
                   L->job->name);
        return false;
    }
    int n = 0;
    const ir_sched_entry **order = merge_programs(L, sc, &n);
    if (!order)
        return false;
    cg_block *b = &L->p->forward;
    L->seg = NULL;
    /* Inputs have no entries: their data are loaded before the first one. */
    for (int op = 0; op < L->n; op++)
        if (OP(L, op)->opcode == OP_INPUT)
            forward_op(L, b, op);
    int i = 0;
    for (; i < n && order[i]->kind != SK_LOSS; i++)
        scheduled_entry(L, b, order[i]);
    b = &L->p->backward;
    L->seg = NULL;
    zero_sums(L, b);
    for (i++; i < n; i++)
        scheduled_entry(L, b, order[i]);
    return true;
}

static cg_program *lower(arena *a, const ir_module *m, const ir_job *job, int bg_job,
                         const cg_options *o, diag_ctx *d)
{
    lowerer L = {.a = a, .d = d, .job = job, .g = m->graphs[job->graph]};
    /* A background copy runs on one rank: its reshards are copies, blocking. */
    L.split = bg_job < 0 && !(o && o->blocking_reshard);
    cg_program *p = arena_alloc(a, sizeof *p);
    L.p = p;
    L.n = L.g->nops;
    const ir_cluster *cl = &m->clusters[L.job->cluster];
    *p = (cg_program){.m = m,
                      .job = L.job,
                      .g = L.g,
                      .world = cl->nodes * cl->gpus_per_node,
                      .bg = bg_job >= 0,
                      .bg_job = bg_job,
                      .pre = bg_job >= 0 ? arena_printf(a, "bg%d_", bg_job) : ""};
    p->sample_input = p->label_input = L.first_loss = -1;
    size_t n = (size_t)L.n;
    p->sets = zalloc(&L, n + 1, sizeof *p->sets);
    p->set_of = zalloc(&L, n + 1, sizeof(int));
    L.uses = zalloc(&L, n + 1, sizeof(int));
    L.direct = zalloc(&L, (n + 1) * MAXIN, sizeof(bool));
    L.accum = zalloc(&L, n + 1, sizeof(bool));
    L.zero = zalloc(&L, n + 1, sizeof(bool));
    L.pass = zalloc(&L, n + 1, sizeof(int));
    L.y_view = zalloc(&L, n + 1, sizeof(bool));
    L.dy_view = zalloc(&L, n + 1, sizeof(bool));
    L.has_grad = zalloc(&L, n + 1, sizeof(bool));
    L.allreduce_of = zalloc(&L, n + 1, sizeof(int));
    L.starts_at = zalloc(&L, n + 1, sizeof(int));
    L.next_start = zalloc(&L, n + 1, sizeof(int));
    L.completes_at = zalloc(&L, n + 1, sizeof(int));
    L.next_complete = zalloc(&L, n + 1, sizeof(int));
    L.layer = zalloc(&L, n + 1, sizeof(int));
    L.y = zalloc(&L, n + 1, sizeof(int));
    L.dy = zalloc(&L, n + 1, sizeof(int));
    L.gbuf = zalloc(&L, (n + 1) * MAXIN, sizeof(int));
    L.params = zalloc(&L, (n + 1) * IR_MAX_OP_PARAMS, sizeof(int));
    L.pinfo = zalloc(&L, (n + 1) * IR_MAX_OP_PARAMS, sizeof(ir_param));
    L.nparams = zalloc(&L, n + 1, sizeof(int));
    L.code = zalloc(&L, n + 1, sizeof(cg_op_code));
    L.reshard_id = zalloc(&L, n + 1, sizeof(int));
    for (size_t i = 0; i <= n; i++)
        L.reshard_id[i] = -1;
    for (int i = 0, id = 0; i < L.n; i++) {
        L.allreduce_of[i] = L.y[i] = L.dy[i] = L.pass[i] = -1;
        L.starts_at[i] = L.next_start[i] = L.completes_at[i] = L.next_complete[i] = -1;
        for (int j = 0; j < MAXIN; j++)
            L.gbuf[(size_t)i * MAXIN + j] = -1;
        /* Communication inserted by passes does not count: every plan of a
         * model keys its weights and dropout masks the same way. */
        L.layer[i] = id;
        id += !is_comm(&L, i);
    }
    /* At most n + 1 sets: a table of twice that, rounded up to a power of two. */
    L.set_slots = 4;
    while ((size_t)L.set_slots < 2 * (n + 1))
        L.set_slots *= 2;
    L.set_slot = zalloc(&L, (size_t)L.set_slots, sizeof(int));
    memset(L.set_slot, 0xff, sizeof(int) * (size_t)L.set_slots);

    if (!analyse_ops(&L) || !analyse_grads(&L) || (L.split && !number_reshards(&L)))
        return NULL;
    for (int i = 0; i < L.n; i++) {
        make_vars(&L, i);
        make_calls(&L, i);
    }
    build_setup(&L);
    if (L.split) {
        if (!build_scheduled(&L))
            return NULL;
    } else {
        build_forward(&L);
        build_backward(&L);
    }
    return p;
}

cg_program *cg_lower(arena *a, const ir_module *m, int job, const cg_options *o, diag_ctx *d)
{
    return lower(a, m, &m->jobs[job], -1, o, d);
}

/* Whether background program b reads the foreground's Fashion-MNIST: when its model reads
 * 28x28 images into 10 classes and the foreground reads them; else synthetic samples. */
static bool reads_fmnist(const cg_program *b)
{
    const ir_type *xt = &b->g->ops[b->sample_input].type;
    bool shape = (xt->rank == 4 && xt->dim[1] == 1 && xt->dim[2] == 28 && xt->dim[3] == 28) ||
                 (xt->rank == 2 && xt->dim[1] == 784);
    return b->fmnist && shape && xt->elem == EL_F32 && b->classes == 10 &&
           b->labels_per_sample == 1;
}

cg_program *cg_lower_background(arena *a, const ir_module *m, int job, int k, diag_ctx *d)
{
    const ir_job *j = &m->jobs[job];
    if (k < 0 || k >= j->nbackground)
        ice("background job %d of %d", k, j->nbackground);
    /* The foreground job's fields (cluster, optimizer, data) with the background
     * job's model and batch. */
    ir_job *bj = arena_alloc(a, sizeof *bj);
    *bj = *j;
    bj->graph = j->background[k].graph;
    bj->batch = j->background[k].batch;
    bj->nbackground = 0;
    bj->background = NULL;
    bj->interleave = NULL;
    cg_program *p = lower(a, m, bj, k, NULL, d);
    if (p) {
        p->world = 1;
        p->bg_fmnist = reads_fmnist(p);
    }
    return p;
}

int cg_lower_backgrounds(arena *a, const ir_module *m, int job, cg_program ***out, diag_ctx *d)
{
    const ir_job *j = &m->jobs[job];
    const ir_interleave *il = j->interleave;
    cg_program **bgs = arena_alloc(a, sizeof *bgs * (size_t)(j->nbackground + 1));
    int nbgs = 0;
    for (int k = 0; il && k < j->nbackground; k++) {
        bool placed = false;
        for (int c = 0; c < il->ncopies && !placed; c++)
            placed = il->copies[c].job == k;
        if (placed && !(bgs[nbgs++] = cg_lower_background(a, m, job, k, d)))
            return -1;
    }
    *out = bgs;
    return nbgs;
}
