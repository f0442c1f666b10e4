/*
 * schedule_ir.c: pass "schedule", which writes every rank's order of work
 * into the IR (ir_job.schedule; docs/ir.md, "Schedule").
 *
 * It runs after "comm": the planned graph's layers, the edges between them
 * (through the reshards the comm pass inserted) and its allreduce ops are
 * what schedule.c's order needs; that one order (plan_schedule_make's, the
 * list scheduler's with the planner's durations, when the job's planning
 * problem is the graph's), the same the timeline plays, is projected onto
 * every rank (the entries the rank takes part in,
 * as the verifier counts them), and ranks whose projections are equal share
 * one program. Two things the planning problem does not hold are added
 * here: the exchanges of input data (a reshard whose operand is an input:
 * started before the first entry, waited for right before its consumer's
 * forward; data have no gradient) and the IR's placement of allreduces
 * (started right after the backward of its `start`, or a reshard's start of
 * its gradient's exchange when `start` is a reshard, waited for right before
 * the backward of its `complete`; the comm pass starts each after its own
 * layer and leaves every one to the optimizer's step, at the end). A job
 * that already has a schedule (IR read back) keeps it. Codegen emits the
 * programs; nothing else decides the order.
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct sched_item {
    ir_sched_kind kind;
    int op; /* -1: the loss sum */
} sched_item;

static bool is_compute(const ir_op *op)
{
    ir_op_class k = ir_op_class_of(op);
    return k != OC_INPUT && k != OC_COMM;
}

/* FNV-1a over a rank's entry indices. */
static uint64_t hash_list(const int *x, int64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)x[i];
        h *= 1099511628211ull;
    }
    return h ^ (uint64_t)n;
}

typedef struct rank_key {
    uint64_t h;
    int rank;
    const int *list;
    int64_t n;
} rank_key;

static int cmp_key(const void *a, const void *b)
{
    const rank_key *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    int c = memcmp(x->list, y->list, sizeof(int) * (size_t)x->n);
    if (c)
        return c;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static bool same_list(const rank_key *x, const rank_key *y)
{
    return x->h == y->h && x->n == y->n &&
           memcmp(x->list, y->list, sizeof(int) * (size_t)x->n) == 0;
}

static int cmp_prog(const void *a, const void *b)
{
    const ir_sched_prog *x = a, *y = b;
    return (x->ranks.ranks[0] > y->ranks.ranks[0]) - (x->ranks.ranks[0] < y->ranks.ranks[0]);
}

/* The global order as IR entries: schedule.c's order over the graph's layers,
 * with the input exchanges and the IR's allreduce completions put in. */
/* The list scheduler's order (plan_schedule_make) of the job as planned,
 * when its planning problem is the graph's: the same layers and edges, the
 * same reshards and allreduces, the IR's allreduces placed as the comm pass
 * places them. False otherwise (ranks that are not ranges, a hand-placed
 * allreduce): then schedule.c's rule's order, which needs no durations. */
static bool timed_order(pass_ctx *ctx, const ir_graph *g, const plan_sched_graph *sg,
                        plan_schedule *s)
{
    for (int i = 0; i < g->nops; i++) {
        const ir_op *op = &g->ops[i];
        if (op->opcode == OP_ALLREDUCE && (ir_allreduce_attrs(op)->complete >= 0 ||
                                           ir_allreduce_attrs(op)->start != op->inputs[0]))
            return false;
    }
    diag_ctx quiet;
    diag_init(&quiet, NULL);
    pass_plan_input in;
    plan_result r;
    bool ok = pass_plan_placed(ctx->m, ctx->job, ctx->opt, &in, &r, &quiet);
    const plan_problem *p = &in.p;
    ok = ok && p->nlayers == sg->nlayers && p->nedges == sg->nedges;
    for (int e = 0; ok && e < sg->nedges; e++)
        ok = p->edges[e].from == sg->edges[e].from && p->edges[e].to == sg->edges[e].to &&
             plan_edge_moves(p, &r, e) == sg->moves[e];
    for (int l = 0; ok && l < sg->nlayers; l++)
        ok = (r.layer[l].k > 1 && p->layers[l].params > 0) == sg->allreduce[l];
    char err[512];
    ok = ok && plan_schedule_make(p, &r, s, err, sizeof err);
    if (r.layer)
        plan_result_free(&r);
    pass_plan_input_free(&in);
    return ok;
}

static sched_item *global_order(pass_ctx *ctx, const ir_graph *g, int *count)
{
    int n = g->nops;
    int *layer_of = plan_xcalloc((size_t)n + 1, sizeof(int));
    int *op_of = plan_xcalloc((size_t)n + 1, sizeof(int));
    int nl = 0;
    for (int i = 0; i < n; i++) {
        layer_of[i] = -1;
        if (is_compute(&g->ops[i])) {
            op_of[nl] = i;
            layer_of[i] = nl++;
        }
    }
    int cap = 0;
    for (int i = 0; i < n; i++)
        cap += g->ops[i].ninputs;
    plan_edge *edges = plan_xcalloc((size_t)cap + 1, sizeof(plan_edge));
    bool *moves = plan_xcalloc((size_t)cap + 1, sizeof(bool));
    int *reshard_of = plan_xcalloc((size_t)cap + 1, sizeof(int));
    bool *ar = plan_xcalloc((size_t)nl + 1, sizeof(bool));
    int *ar_op = plan_xcalloc((size_t)nl + 1, sizeof(int));
    int ne = 0;
    for (int v = 0; v < nl; v++) {
        const ir_op *op = &g->ops[op_of[v]];
        int first = ne;
        for (int q = 0; q < op->ninputs; q++) {
            int src = op->inputs[q], r = -1;
            if (g->ops[src].opcode == OP_RESHARD) {
                r = src;
                src = g->ops[src].inputs[0];
            }
            int u = layer_of[src];
            if (u < 0)
                continue; /* data: below */
            int e = first;
            while (e < ne && edges[e].from != u)
                e++;
            if (e < ne)
                continue; /* the same value twice: one transfer */
            edges[ne] = (plan_edge){u, v, 0};
            moves[ne] = r >= 0;
            reshard_of[ne++] = r;
        }
    }
    /* Each allreduce's placement: started after the backward of `start`,
     * complete before the backward of `complete` (-1: the optimizer's step);
     * lists per op, in graph order. */
    int *start_at = plan_xcalloc((size_t)n + 1, sizeof(int));
    int *complete_at = plan_xcalloc((size_t)n + 1, sizeof(int));
    int *start_next = plan_xcalloc((size_t)n + 1, sizeof(int));
    int *complete_next = plan_xcalloc((size_t)n + 1, sizeof(int));
    for (int i = 0; i < n; i++)
        start_at[i] = complete_at[i] = -1;
    for (int i = n - 1; i >= 0; i--) {
        const ir_op *op = &g->ops[i];
        if (op->opcode != OP_ALLREDUCE)
            continue;
        int l = layer_of[op->inputs[0]];
        const ir_attrs_allreduce *at = ir_allreduce_attrs(op);
        ar[l] = true;
        ar_op[l] = i;
        start_next[i] = start_at[at->start];
        start_at[at->start] = i;
        if (at->complete >= 0) {
            complete_next[i] = complete_at[at->complete];
            complete_at[at->complete] = i;
        }
    }
    plan_sched_graph sg = {nl, ne, edges, moves, ar};
    plan_schedule s;
    if (!timed_order(ctx, g, &sg, &s))
        plan_schedule_order(&sg, &s);

    /* Input exchanges: started first, waited for before their consumer. */
    int nin = 0;
    for (int i = 0; i < n; i++)
        nin += g->ops[i].opcode == OP_RESHARD && g->ops[g->ops[i].inputs[0]].opcode == OP_INPUT;
    sched_item *out = plan_xcalloc((size_t)s.n + 2 * (size_t)nin + 1, sizeof(sched_item));
    int no = 0;
    bool *started = plan_xcalloc((size_t)n + 1, sizeof(bool)), flushed = false;
#define AR_START(a) (started[a] = true, out[no++] = (sched_item){SK_START, (a)})
    for (int i = 0; i < n; i++)
        if (g->ops[i].opcode == OP_RESHARD && g->ops[g->ops[i].inputs[0]].opcode == OP_INPUT)
            out[no++] = (sched_item){SK_START, i};
    for (int x = 0; x < s.n; x++) {
        const plan_sched_entry *e = &s.e[x];
        switch (e->kind) {
        case PSK_FWD: {
            const ir_op *op = &g->ops[op_of[e->layer]];
            for (int q = 0; q < op->ninputs; q++) {
                int r = op->inputs[q];
                bool dup = false;
                for (int y = 0; y < q; y++)
                    dup |= op->inputs[y] == r;
                if (!dup && g->ops[r].opcode == OP_RESHARD &&
                    g->ops[g->ops[r].inputs[0]].opcode == OP_INPUT)
                    out[no++] = (sched_item){SK_WAIT, r};
            }
            out[no++] = (sched_item){SK_FWD, op_of[e->layer]};
            break;
        }
        case PSK_BWD: {
            int v = op_of[e->layer];
            for (int a = complete_at[v]; a >= 0; a = complete_next[a])
                out[no++] = (sched_item){SK_WAIT, a};
            out[no++] = (sched_item){SK_BWD, v};
            /* Allreduces the IR starts after this backward, not their layer's. */
            for (int a = start_at[v]; a >= 0; a = start_next[a])
                if (g->ops[a].inputs[0] != v)
                    AR_START(a);
            break;
        }
        case PSK_START: out[no++] = (sched_item){SK_START, reshard_of[e->edge]}; break;
        case PSK_WAIT: out[no++] = (sched_item){SK_WAIT, reshard_of[e->edge]}; break;
        case PSK_START_BWD: {
            int r = reshard_of[e->edge];
            out[no++] = (sched_item){SK_START_BWD, r};
            for (int a = start_at[r]; a >= 0; a = start_next[a])
                AR_START(a);
            break;
        }
        case PSK_WAIT_BWD: out[no++] = (sched_item){SK_WAIT_BWD, reshard_of[e->edge]}; break;
        case PSK_AR_START:
            if (ir_allreduce_attrs(&g->ops[ar_op[e->layer]])->start == op_of[e->layer])
                AR_START(ar_op[e->layer]);
            break;
        case PSK_AR_WAIT:
            /* Allreduces started after the backward of an op that has none (an
             * input, an input's exchange) start at its end. */
            for (int a = 0; a < n && !flushed; a++)
                if (g->ops[a].opcode == OP_ALLREDUCE && !started[a])
                    AR_START(a);
            flushed = true;
            if (ir_allreduce_attrs(&g->ops[ar_op[e->layer]])->complete < 0)
                out[no++] = (sched_item){SK_WAIT, ar_op[e->layer]};
            break;
        case PSK_LOSS: out[no++] = (sched_item){SK_LOSS, -1}; break;
        }
    }
#undef AR_START
    free(started);
    plan_schedule_free(&s);
    free(layer_of);
    free(op_of);
    free(edges);
    free(moves);
    free(reshard_of);
    free(ar);
    free(ar_op);
    free(start_at);
    free(complete_at);
    free(start_next);
    free(complete_next);
    *count = no;
    return out;
}

bool pass_schedule(pass_ctx *ctx)
{
    ir_module *m = ctx->m;
    ir_job *j = &m->jobs[ctx->job];
    if (j->schedule)
        return true;
    const ir_graph *g = m->graphs[j->graph];
    const ir_cluster *cl = &m->clusters[j->cluster];
    int world = cl->nodes * cl->gpus_per_node;
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].opcode != OP_INPUT && g->ops[i].plan.nranks == 0) {
            diag_error(ctx->d, g->ops[i].loc, "'%s' has no ranks: the job is not planned",
                       g->ops[i].name);
            return false;
        }
    int ne = 0;
    sched_item *it = global_order(ctx, g, &ne);

    /* Who takes part in each entry (the verifier's rule). */
    int64_t *p0 = plan_xcalloc((size_t)ne + 1, sizeof(int64_t));
    int *tmp = plan_xcalloc(4 * (size_t)world + 4, sizeof(int)); /* before duplicates go */
    int64_t total = 0;
    for (int x = 0; x < ne; x++) {
        p0[x] = total;
        const ir_op *op = it[x].op >= 0 ? &g->ops[it[x].op] : NULL;
        if (!op)
            total += world;
        else if (op->opcode == OP_RESHARD)
            total += ir_reshard_ranks(j->batch, &g->ops[op->inputs[0]].plan, &op->plan, tmp);
        else
            total += op->plan.nranks;
    }
    p0[ne] = total;
    int *part = plan_xcalloc((size_t)total + 1, sizeof(int));
    int64_t *cnt = plan_xcalloc((size_t)world + 1, sizeof(int64_t));
    for (int x = 0; x < ne; x++) {
        const ir_op *op = it[x].op >= 0 ? &g->ops[it[x].op] : NULL;
        int *dst = &part[p0[x]];
        if (!op)
            for (int r = 0; r < world; r++)
                dst[r] = r;
        else if (op->opcode == OP_RESHARD)
            memcpy(dst, tmp,
                   sizeof(int) * (size_t)ir_reshard_ranks(j->batch, &g->ops[op->inputs[0]].plan,
                                                          &op->plan, tmp));
        else
            memcpy(dst, op->plan.ranks, sizeof(int) * (size_t)op->plan.nranks);
        for (int64_t q = p0[x]; q < p0[x + 1]; q++)
            cnt[part[q]]++;
    }
    /* Each rank's list of entry indices, in order. */
    int64_t *l0 = plan_xcalloc((size_t)world + 1, sizeof(int64_t));
    for (int r = 0; r < world; r++)
        l0[r + 1] = l0[r] + cnt[r];
    int *list = plan_xcalloc((size_t)total + 1, sizeof(int));
    int64_t *fill = plan_xcalloc((size_t)world + 1, sizeof(int64_t));
    memcpy(fill, l0, sizeof(int64_t) * (size_t)world);
    for (int x = 0; x < ne; x++)
        for (int64_t q = p0[x]; q < p0[x + 1]; q++)
            list[fill[part[q]]++] = x;
    /* Ranks with equal lists share a program. */
    rank_key *keys = plan_xcalloc((size_t)world, sizeof(rank_key));
    for (int r = 0; r < world; r++)
        keys[r] = (rank_key){hash_list(&list[l0[r]], l0[r + 1] - l0[r]), r, &list[l0[r]],
                             l0[r + 1] - l0[r]};
    qsort(keys, (size_t)world, sizeof(rank_key), cmp_key);
    int nprogs = 0;
    for (int r = 0; r < world; r++)
        nprogs += r == 0 || !same_list(&keys[r - 1], &keys[r]);
    ir_schedule *sc = arena_alloc(m->arena, sizeof *sc);
    *sc = (ir_schedule){.nprogs = nprogs,
                        .progs = arena_alloc(m->arena, sizeof(ir_sched_prog) * (size_t)nprogs),
                        .loc = j->loc};
    for (int r = 0, p = 0; r < world; p++) {
        int e = r;
        while (e + 1 < world && same_list(&keys[e], &keys[e + 1]))
            e++;
        ir_sched_prog *pr = &sc->progs[p];
        pr->ranks.nranks = e - r + 1;
        pr->ranks.ranks = arena_alloc(m->arena, sizeof(int) * (size_t)(e - r + 1));
        for (int q = r; q <= e; q++)
            pr->ranks.ranks[q - r] = keys[q].rank; /* ascending: cmp_key's last key */
        pr->n = (int)keys[r].n;
        pr->e = arena_alloc(m->arena, sizeof(ir_sched_entry) * (size_t)(pr->n + 1));
        pr->loc = j->loc;
        for (int i = 0; i < pr->n; i++) {
            const sched_item *si = &it[keys[r].list[i]];
            pr->e[i] =
                (ir_sched_entry){si->kind, si->op, si->op >= 0 ? g->ops[si->op].loc : j->loc};
        }
        r = e + 1;
    }
    qsort(sc->progs, (size_t)nprogs, sizeof(ir_sched_prog), cmp_prog);
    free(keys);
    free(it);
    free(p0);
    free(tmp);
    free(part);
    free(cnt);
    free(l0);
    free(list);
    free(fill);
    j->schedule = sc;
    return true;
}
