/*
 * ops_comm.c: shape inference and costs of the ops that passes insert into a
 * planned graph (communication between rank sets). ops.c hands every opcode
 * it does not handle itself to the functions here.
 *
 *   reshard(x) from:[ranks] to:[ranks]   moves the sample ranges of x from
 *       the ranks that computed it to the ranks of its consumer (and the
 *       gradient back in backward); the value is x, re-split.
 *   allreduce(x) ranks:[ranks] elems:E   sums the E gradient elements of the
 *       parameters of op x over its ranks after backward; the value is x
 *       (a marker with no users), so that the op sits next to its layer.
 */
#include "ir.h"

static bool rank_list_ok(const ir_op *op, const char *key, diag_ctx *d)
{
    const ir_attr *a = ir_op_attr(op, key);
    if (!a || a->u.list.n < 1) {
        diag_error(d, op->loc, "%s: '%s' needs at least one rank", ir_op_info_of(op->opcode)->name,
                   key);
        return false;
    }
    for (int i = 0; i < a->u.list.n; i++)
        if (a->u.list.v[i] < 0 || (i && a->u.list.v[i] <= a->u.list.v[i - 1])) {
            diag_error(d, op->loc, "%s: '%s' must list ranks in ascending order",
                       ir_op_info_of(op->opcode)->name, key);
            return false;
        }
    return true;
}

bool ir_infer_extra(const ir_graph *g, ir_op *op, diag_ctx *d)
{
    switch (op->opcode) {
    case OP_RESHARD:
        if (!rank_list_ok(op, "from", d) || !rank_list_ok(op, "to", d))
            return false;
        op->type = g->ops[op->inputs[0]].type;
        return true;
    case OP_ALLREDUCE:
        if (!rank_list_ok(op, "ranks", d))
            return false;
        if (ir_attr_int(op, "elems") < 0) {
            diag_error(d, op->loc, "allreduce: 'elems' must not be negative");
            return false;
        }
        op->type = g->ops[op->inputs[0]].type;
        return true;
    default: ice("no shape inference for op '%s'", ir_op_info_of(op->opcode)->name);
    }
}

/* Communication does no arithmetic worth counting; what it moves is in the
 * elements: a reshard reads and writes the value (forward) and its gradient
 * (backward); an all-reduce reads and writes its gradients twice (ring). */
ir_cost ir_op_cost_extra(const ir_graph *g, const ir_op *op, ir_cost dflt)
{
    (void)g;
    ir_cost k = {0};
    switch (op->opcode) {
    case OP_RESHARD:
        k.fwd_read = k.fwd_written = dflt.fwd_written;
        k.bwd_read = k.bwd_written = dflt.fwd_written;
        return k;
    case OP_ALLREDUCE:
        k.bwd_flops = 0;
        return k; /* per sample nothing; the bytes are 2 x elems per iteration */
    default: ice("no cost for op '%s'", ir_op_info_of(op->opcode)->name);
    }
}
