/*
 * plan_layer.c: an IR op as the planner sees it, the floor of the IR passes.
 *
 * pass_plan_layer() gives an op's per-sample costs (ir_op_cost) and how
 * DeepPool's planner sees it; pass_gpu_is_cpu() tells the CPU backend's
 * device. The plan pass (plan_ir.c) and the background jobs (bg_jobs.c) both
 * build on these, and these call neither.
 */
#include <string.h>

#include "passes.h"
#include "plan.h"

/* How DeepPool's planner sees an op (the strategy deeppool, passes/deeppool.c):
 * its layer kind and the shapes its rules read. Dropout and the loss are not
 * layers of DeepPool's model descriptions. */
static void dp_layer(const ir_graph *g, const ir_op *op, plan_dp_layer *v)
{
    memset(v, 0, sizeof *v);
    switch (op->opcode) {
    case OP_CONV2D: v->kind = PDK_CONV2D; break;
    case OP_MAXPOOL2D: v->kind = PDK_MAXPOOL; break;
    case OP_AVGPOOL2D: v->kind = PDK_AVGPOOL; break;
    case OP_GLOBALAVGPOOL: v->kind = PDK_ADAVGPOOL; break;
    case OP_RELU: v->kind = PDK_RELU; break;
    case OP_FLATTEN: v->kind = PDK_FLATTEN; break;
    case OP_LINEAR: v->kind = PDK_LINEAR; break;
    case OP_CONCAT: v->kind = PDK_CONCAT; break;
    case OP_BATCHNORM2D: v->kind = PDK_BATCHNORM; break;
    case OP_DROPOUT:
    case OP_CROSSENTROPY: v->kind = PDK_ABSENT; break;
    default: v->kind = PDK_GENERIC; break;
    }
    const ir_type *in = op->ninputs ? &g->ops[op->inputs[0]].type : NULL;
    if (in && in->rank == 4) {
        v->c = in->dim[1];
        v->h = in->dim[2];
        v->w = in->dim[3];
    }
    if (op->type.rank == 4) {
        v->oh = op->type.dim[2];
        v->ow = op->type.dim[3];
    }
    if (op->opcode == OP_CONV2D) {
        const int64_t *k = ir_conv2d_attrs(op)->kernel;
        v->kernel[0] = k[0];
        v->kernel[1] = k[1];
        v->kernel_pair = k[0] != k[1];
    }
    if (op->opcode == OP_LINEAR && in && in->rank >= 2) {
        v->in_features = in->dim[in->rank - 1];
        v->out_features = ir_linear_attrs(op)->out;
    }
}

void pass_plan_layer(const ir_graph *g, const ir_op *op, plan_layer *l)
{
    ir_cost c = ir_op_cost(g, op);
    memset(l, 0, sizeof *l);
    l->name = op->name;
    switch (ir_op_class_of(op)) {
    case OC_CONV: l->cls = PC_CONV; break;
    case OC_GEMM: l->cls = PC_LINEAR; break;
    default:
        l->cls = op->opcode == OP_MAXPOOL2D || op->opcode == OP_AVGPOOL2D ||
                         op->opcode == OP_GLOBALAVGPOOL
                     ? PC_POOL
                     : PC_OTHER;
        break;
    }
    l->fwd_flops = c.fwd_flops;
    l->bwd_flops = c.bwd_flops;
    l->fwd_elems = c.fwd_read + c.fwd_written;
    l->bwd_elems = c.bwd_read + c.bwd_written;
    l->params = (double)c.params;
    l->saved = c.saved;
    const ir_type *in = op->ninputs ? &g->ops[op->inputs[0]].type : NULL;
    if (op->opcode == OP_BATCHNORM2D && in && in->rank == 4)
        l->sync_stats = 2.0 * (double)in->dim[1] + 1.0;
    l->fwd_kernels = c.fwd_kernels;
    l->bwd_kernels = c.bwd_kernels;
    dp_layer(g, op, &l->dp);
}

/* An IR pair as the profiles write it: `3`, or `[1,7]` when the two differ. */
bool pass_gpu_is_cpu(const ir_gpu *gpu)
{
    return strcmp(gpu->name, "cpu") == 0;
}
