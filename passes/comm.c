/*
 * comm.c: pass "comm", which makes communication explicit in the planned IR.
 *
 * After pass "plan" every op carries the ranks that run it. Wherever a value
 * is consumed on a different rank set than the one that produced it, this
 * pass inserts a `reshard` op (from the producer's ranks to the consumer's);
 * after every layer with parameters on more than one rank it adds an
 * `allreduce` of the gradient among those ranks, placed where the planner's
 * overlap assumption puts it: it starts as soon as the layer's backward has
 * written the gradients (start = the layer) and hides behind the backward of
 * the layers before it, to be complete before the optimizer step (complete =
 * none; docs/plan.md, "Overlap"). Without --overlap-allreduce the planner
 * prices every all-reduce as if it were waited for at once, an upper bound
 * of the same placement, so the placement does not change. Codegen turns both
 * into runtime calls, so the IR, not codegen, says what moves where. A graph
 * that already holds communication ops (a planned dump read back) is left
 * alone. The ops themselves are in ir/ops.def; each runs on its own rank set
 * (the consumer's for a reshard, the layer's for an allreduce).
 */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool has_comm(const ir_graph *g)
{
    for (int i = 0; i < g->nops; i++)
        if (ir_op_class_of(&g->ops[i]) == OC_COMM)
            return true;
    return false;
}

static bool same_ranks(const ir_plan *a, const ir_plan *b)
{
    return a->nranks == b->nranks &&
           memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->nranks) == 0;
}

bool pass_comm(pass_ctx *ctx)
{
    ir_module *m = ctx->m;
    ir_graph *g = m->graphs[m->jobs[ctx->job].graph];
    if (has_comm(g))
        return true;
    ir_graph ng = {.name = g->name, .loc = g->loc};
    int *map = plan_xcalloc((size_t)g->nops, sizeof(int));
    bool ok = true;
    for (int i = 0; i < g->nops && ok; i++) {
        const ir_op *op = &g->ops[i];
        int *ins = plan_xcalloc((size_t)op->ninputs + 1, sizeof(int));
        for (int q = 0; q < op->ninputs; q++) {
            const ir_op *src = &g->ops[op->inputs[q]];
            ins[q] = map[op->inputs[q]];
            if (!op->plan.nranks || !src->plan.nranks || same_ranks(&src->plan, &op->plan))
                continue;
            const char *name = arena_printf(m->arena, "%s.to.%s", src->name, op->name);
            if (ir_op_find(&ng, name) >= 0) {
                ins[q] = ir_op_find(&ng, name);
                continue;
            }
            int id = ir_op_add(m, &ng, OP_RESHARD, name, &ins[q], 1, NULL, 0, op->loc);
            ng.ops[id].plan = op->plan;
            ok &= ir_op_check(m, &ng, id, ctx->d);
            ins[q] = id;
        }
        int id = ir_op_add(m, &ng, op->opcode, op->name, ins, op->ninputs, NULL, 0, op->loc);
        free(ins);
        ir_op *nop = &ng.ops[id];
        nop->a = op->a;
        ir_op_map_refs(nop, map);
        nop->type = op->type;
        nop->plan = op->plan;
        map[i] = id;
        if (op->plan.nranks > 1 && ir_op_params(g, op) > 0) {
            const char *name = arena_printf(m->arena, "%s.grad", op->name);
            ir_attr place[2] = {{.key = "start", .kind = AK_REF, .u.ref = id},
                                {.key = "complete", .kind = AK_REF, .u.ref = -1}};
            int ar = ir_op_add(m, &ng, OP_ALLREDUCE, name, &id, 1, place, 2, op->loc);
            ng.ops[ar].plan = op->plan;
            ok &= ir_op_check(m, &ng, ar, ctx->d);
        }
    }
    free(map);
    if (ok) {
        g->ops = ng.ops;
        g->nops = ng.nops;
        g->cap = ng.cap;
        g->index = ng.index;
        g->index_cap = ng.index_cap;
    }
    return ok;
}
