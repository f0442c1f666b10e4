/*
 * ops_comm.c: shape inference and costs of the ops that passes insert into a
 * planned graph (communication between rank sets). ops.c hands every opcode
 * it does not handle itself to the functions here.
 */
#include "ir.h"

bool ir_infer_extra(const ir_graph *g, ir_op *op, diag_ctx *d)
{
	(void)g;
	(void)d;
	ice("no shape inference for op '%s'", ir_op_info_of(op->opcode)->name);
}

ir_cost ir_op_cost_extra(const ir_graph *g, const ir_op *op, ir_cost dflt)
{
	(void)g;
	(void)dflt;
	ice("no cost for op '%s'", ir_op_info_of(op->opcode)->name);
}
