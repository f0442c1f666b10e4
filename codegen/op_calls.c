/*
 * op_calls.c: the runtime calls each op makes, forward and backward.
 *
 * ops.def's codegen column names a lower_<kind>() here for every op; it
 * appends the op's calls to the blocks of a cg_op_code, with the variables
 * lower.c chose for the op's value, gradient, operands and parameters. An
 * op whose kernels follow the unary convention (rt_<name>_fwd(x, y),
 * rt_<name>_bwd(x, dy, dx)) needs no function of its own. Where the calls
 * go (guards, segments, the order of layers) is lower.c's business.
 */
#include "codegen.h"

#include <string.h>

typedef void lower_fn(const cg_op_env *e, cg_op_code *out);

#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) \
    static lower_fn lower_##codegen;
#include "ops.def"
#undef OP

static lower_fn *const lowerers[OP_COUNT] = {
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) \
    [OP_##E] = lower_##codegen,
#include "ops.def"
#undef OP
};

static const ir_op *op_of(const cg_op_env *e)
{
    return &e->p->g->ops[e->op];
}

/* The variable of the op's parameter called name (its own, or for a tied
 * linear layer's weight the embedding's), or -1 when it has none. */
static int param(const cg_op_env *e, const char *name)
{
    if (e->tied >= 0 && strcmp(name, "weight") == 0)
        return e->tied;
    for (int k = 0; k < e->nparams; k++)
        if (strcmp(e->pinfo[k].name, name) == 0)
            return e->params[k];
    return -1;
}

#define FWD(fn, ...) CG_CALL(e->a, &out->fwd, e->op, fn, __VA_ARGS__)
#define BWD(fn, ...) CG_CALL(e->a, &out->bwd, e->op, fn, __VA_ARGS__)
#define X(j)         cg_var_arg(e->x[j])
#define DX(j)        cg_var_arg(e->dx[j])
#define Y            cg_var_arg(e->y)
#define DY           cg_var_arg(e->dy)
#define P(name)      cg_param(param(e, name), false)
#define DP(name)     cg_param(param(e, name), true)
#define COMM         cg_set_arg(CA_COMM, e->set)
#define POOL         cg_plain(CA_POOL)
#define SEED         cg_plain(CA_SEED)
#define STEP         cg_plain(CA_STEP)

/* A constant struct of integers, passed by address. */
static cg_arg const_struct(const cg_op_env *e, const char *type, const int64_t *vals, int n)
{
    int64_t *v = arena_alloc(e->a, sizeof *v * (size_t)n);
    memcpy(v, vals, sizeof *v * (size_t)n);
    return (cg_arg){.kind = CA_CONST, .s = type, .n = n, .vals = v};
}

/* A tensor of the op's shard of its rank set, for its own use (saved statistics). */
static int scratch(const cg_op_env *e, cg_op_code *out, const char *prefix, cg_size size)
{
    const char *cname = e->p->vars[e->y].name + 2; /* "y_" + the op's C name */
    cg_var v = {.name = arena_printf(e->a, "%s_%s", prefix, cname),
                .kind = CV_TENSOR,
                .op = e->op,
                .set = e->set,
                .elem = EL_F32,
                .own = true,
                .rank = 1,
                .dim = {size}};
    int id = cg_var_add(e->a, e->p, &v);
    cg_add(e->a, &out->setup, CS_NEW, e->op, NULL)->var = id;
    return id;
}

static void lower_input(const cg_op_env *e, cg_op_code *out)
{
    cg_stmt *s = cg_add(e->a, &out->fwd, CS_IF, e->op, NULL);
    s->cond.kind = CC_TRAIN;
    bool sample = e->op == e->p->sample_input, label = e->op == e->p->label_input;
    CG_CALL(e->a, &s->body, e->op, "rt_data_batch", cg_plain(CA_DATA), STEP,
            (cg_arg){.kind = CA_BATCH, .i = 1}, cg_set_arg(CA_SHARD_FIRST, e->set),
            cg_set_arg(CA_SHARD_END, e->set), sample ? Y : cg_null(), label ? Y : cg_null());
    CG_CALL(e->a, &s->orelse, e->op, "rt_data_test_batch", cg_plain(CA_DATA),
            cg_set_arg(CA_TEST_FIRST, e->set), cg_set_arg(CA_SHARD_SIZE, e->set),
            sample ? Y : cg_null(), label ? Y : cg_null());
    out->graphable = false; /* data loading */
}

static cg_arg conv_attrs(const cg_op_env *e)
{
    const ir_attrs_conv2d *a = ir_conv2d_attrs(op_of(e));
    int64_t v[] = {a->kernel[0], a->kernel[1],   a->stride[0],   a->stride[1], a->pad[0],
                   a->pad[1],    a->dilation[0], a->dilation[1], a->groups};
    return const_struct(e, "rt_conv2d_attrs", v, 9);
}

static void lower_conv2d(const cg_op_env *e, cg_op_code *out)
{
    FWD("rt_conv2d_fwd", POOL, X(0), P("weight"), P("bias"), conv_attrs(e), Y);
    BWD("rt_conv2d_bwd", POOL, X(0), P("weight"), DY, conv_attrs(e), DX(0), DP("weight"),
        DP("bias"));
}

static void lower_linear(const cg_op_env *e, cg_op_code *out)
{
    FWD("rt_linear_fwd", X(0), P("weight"), P("bias"), Y);
    BWD("rt_linear_bwd", X(0), P("weight"), DY, DX(0), DP("weight"), DP("bias"));
    out->trains = true; /* a tied weight's gradient too */
}

/* Matmul works on 3-d views [N * ..., m, k] of its operands and result. */
static int view3(const cg_op_env *e, cg_op_code *out, const char *prefix, int src, const ir_type *t)
{
    int64_t mid = 1;
    for (int k = 1; k < t->rank - 2; k++)
        mid *= t->dim[k];
    const char *cname = e->p->vars[e->y].name + 2;
    cg_var v = {.name = arena_printf(e->a, "%s_%s", prefix, cname),
                .kind = CV_TENSOR,
                .op = e->op,
                .set = e->set,
                .elem = t->elem,
                .rank = 3,
                .dim = {{mid, e->set, NULL},
                        {t->dim[t->rank - 2], -1, NULL},
                        {t->dim[t->rank - 1], -1, NULL}}};
    int id = cg_var_add(e->a, e->p, &v);
    cg_stmt *s = cg_add(e->a, &out->views, CS_VIEW, e->op, NULL);
    s->var = id;
    s->src = src;
    return id;
}

static void lower_matmul(const cg_op_env *e, cg_op_code *out)
{
    const ir_graph *g = e->p->g;
    const ir_op *op = op_of(e);
    const ir_type *ta = &g->ops[op->inputs[0]].type, *tb = &g->ops[op->inputs[1]].type;
    int a3 = view3(e, out, "a3", e->x[0], ta), b3 = view3(e, out, "b3", e->x[1], tb);
    int c3 = view3(e, out, "c3", e->y, &op->type), dc3 = view3(e, out, "dc3", e->dy, &op->type);
    int da3 = view3(e, out, "da3", e->dx[0], ta), db3 = view3(e, out, "db3", e->dx[1], tb);
    FWD("rt_matmul_fwd", cg_var_arg(a3), cg_var_arg(b3), cg_var_arg(c3));
    BWD("rt_matmul_bwd", cg_var_arg(a3), cg_var_arg(b3), cg_var_arg(dc3), cg_var_arg(da3),
        cg_var_arg(db3));
}

/* rt_<name>_fwd(x, y) and rt_<name>_bwd(x, dy, dx): relu, relu6, hardsigmoid,
 * hardswish, silu, gelu, gelu_erf, tanh, sigmoid. */
static void lower_unary(const cg_op_env *e, cg_op_code *out)
{
    const char *name = ir_op_info_of(op_of(e)->opcode)->name;
    FWD(arena_printf(e->a, "rt_%s_fwd", name), X(0), Y);
    BWD(arena_printf(e->a, "rt_%s_bwd", name), X(0), DY, DX(0));
}

static cg_arg pool_attrs(const cg_op_env *e, const int64_t *k, const int64_t *st, const int64_t *pd,
                         bool ceil_mode, bool exclude_pad)
{
    int64_t v[] = {k[0], k[1], st[0], st[1], pd[0], pd[1], ceil_mode, exclude_pad};
    return const_struct(e, "rt_pool2d_attrs", v, 8);
}

static void lower_maxpool2d(const cg_op_env *e, cg_op_code *out)
{
    const ir_attrs_maxpool2d *a = ir_maxpool2d_attrs(op_of(e));
    cg_arg at = pool_attrs(e, a->kernel, a->stride, a->pad, a->ceil, false);
    FWD("rt_maxpool2d_fwd", X(0), at, Y);
    BWD("rt_maxpool2d_bwd", X(0), DY, at, DX(0));
}

static void lower_avgpool2d(const cg_op_env *e, cg_op_code *out)
{
    const ir_attrs_avgpool2d *a = ir_avgpool2d_attrs(op_of(e));
    cg_arg at = pool_attrs(e, a->kernel, a->stride, a->pad, a->ceil, !a->count_pad);
    FWD("rt_avgpool2d_fwd", X(0), at, Y);
    BWD("rt_avgpool2d_bwd", DY, at, DX(0));
}

static void lower_global_avgpool(const cg_op_env *e, cg_op_code *out)
{
    FWD("rt_global_avgpool_fwd", X(0), Y);
    BWD("rt_global_avgpool_bwd", DY, DX(0));
}

/* Synchronised batch normalisation: in a training step the statistics are
 * all-reduced over the rank set, so on more than one rank it communicates (no
 * graph segment); evaluation normalises with the running statistics. */
static void lower_batchnorm2d(const cg_op_env *e, cg_op_code *out)
{
    const ir_op *op = op_of(e);
    const ir_attrs_batchnorm2d *a = ir_batchnorm2d_attrs(op);
    int saved = scratch(e, out, "saved", (cg_size){2 * op->type.dim[1], -1, NULL});
    cg_stmt *s = cg_add(e->a, &out->fwd, CS_IF, e->op, NULL);
    s->cond.kind = CC_TRAIN;
    CG_CALL(e->a, &s->body, e->op, "rt_batchnorm2d_sync_fwd", COMM, X(0), P("weight"), P("bias"),
            P("running_mean"), P("running_var"), cg_f32(a->momentum), cg_f32(a->eps),
            cg_var_arg(saved), Y);
    CG_CALL(e->a, &s->orelse, e->op, "rt_batchnorm2d_infer", X(0), P("weight"), P("bias"),
            P("running_mean"), P("running_var"), cg_f32(a->eps), Y);
    BWD("rt_batchnorm2d_sync_bwd", COMM, X(0), P("weight"), cg_var_arg(saved), DY, DX(0),
        DP("weight"), DP("bias"));
    out->graphable = e->p->sets[e->set].n == 1;
}

static void lower_layernorm(const cg_op_env *e, cg_op_code *out)
{
    const ir_op *op = op_of(e);
    int64_t rows = ir_type_elems_per_sample(&op->type) / op->type.dim[op->type.rank - 1];
    int saved = scratch(e, out, "saved", (cg_size){2 * rows, e->set, NULL});
    FWD("rt_layernorm_fwd", X(0), P("weight"), P("bias"), cg_f32(ir_layernorm_attrs(op)->eps),
        cg_var_arg(saved), Y);
    BWD("rt_layernorm_bwd", X(0), P("weight"), cg_var_arg(saved), DY, DX(0), DP("weight"),
        DP("bias"));
}

/* The mask is drawn from (seed, step, layer, sample): every plan of a model
 * draws the same masks. Evaluation passes the input through. */
static void lower_dropout(const cg_op_env *e, cg_op_code *out)
{
    double p = ir_dropout_attrs(op_of(e))->p;
    cg_stmt *s = cg_add(e->a, &out->fwd, CS_IF, e->op, NULL);
    s->cond.kind = CC_TRAIN;
    CG_CALL(e->a, &s->body, e->op, "rt_dropout_fwd", X(0), cg_f32(p), SEED, STEP, cg_int(e->layer),
            cg_set_arg(CA_SHARD_FIRST, e->set), Y);
    CG_CALL(e->a, &s->orelse, e->op, "rt_tensor_copy", Y, X(0));
    BWD("rt_dropout_bwd", DY, cg_f32(p), SEED, STEP, cg_int(e->layer),
        cg_set_arg(CA_SHARD_FIRST, e->set), DX(0));
}

/* An operand's gradient that is the add's own tensor (lower.c passes it on)
 * needs no copy. */
static void lower_add(const cg_op_env *e, cg_op_code *out)
{
    FWD("rt_add_fwd", X(0), X(1), Y);
    for (int j = 0; j < 2; j++)
        if (e->dx[j] >= 0 && e->dx[j] != e->dy)
            BWD("rt_tensor_copy", DX(j), DY);
}

static void lower_mul(const cg_op_env *e, cg_op_code *out)
{
    FWD("rt_mul_fwd", X(0), X(1), Y);
    if (e->dx[0] >= 0 || e->dx[1] >= 0)
        BWD("rt_mul_bwd", X(0), X(1), DY, DX(0), DX(1));
}

static void lower_slice(const cg_op_env *e, cg_op_code *out)
{
    const ir_attrs_slice *a = ir_slice_attrs(op_of(e));
    FWD("rt_slice_fwd", X(0), cg_int(a->axis), cg_int(a->start), Y);
    if (e->dx[0] >= 0)
        BWD("rt_slice_bwd", DY, cg_int(a->axis), cg_int(a->start), DX(0));
}

static void lower_concat(const cg_op_env *e, cg_op_code *out)
{
    const ir_op *op = op_of(e);
    int n = op->ninputs;
    int64_t axis = ir_concat_attrs(op)->axis;
    cg_arg xs = {.kind = CA_ARRAY, .n = n, .vars = e->x, .is_const = true};
    cg_arg dxs = {.kind = CA_ARRAY, .n = n, .vars = e->dx};
    FWD("rt_concat_fwd", cg_int(n), xs, cg_int(axis), Y);
    BWD("rt_concat_bwd", DY, cg_int(axis), cg_int(n), dxs);
}

/* Flatten and reshape: the same elements under another shape; no copy where
 * lower.c made the value and the gradient views. */
static void lower_view(const cg_op_env *e, cg_op_code *out)
{
    if (!e->y_view)
        FWD("rt_tensor_copy", Y, X(0));
    if (e->dx[0] >= 0 && !e->dy_view)
        BWD("rt_tensor_copy", DX(0), DY);
}

static void lower_transpose(const cg_op_env *e, cg_op_code *out)
{
    const int64_t *d = ir_transpose_attrs(op_of(e))->dims;
    FWD("rt_transpose", X(0), cg_int(d[0]), cg_int(d[1]), Y);
    if (e->dx[0] >= 0)
        BWD("rt_transpose", DY, cg_int(d[0]), cg_int(d[1]), DX(0));
}

static void lower_softmax(const cg_op_env *e, cg_op_code *out)
{
    int64_t axis = ir_softmax_attrs(op_of(e))->axis;
    FWD("rt_softmax_fwd", X(0), cg_int(axis), Y);
    BWD("rt_softmax_bwd", Y, DY, cg_int(axis), DX(0));
}

static void lower_embedding(const cg_op_env *e, cg_op_code *out)
{
    FWD("rt_embedding_fwd", X(0), P("weight"), P("pos"), Y);
    BWD("rt_embedding_bwd", X(0), DY, DP("weight"), DP("pos"));
}

static void lower_tokens(const cg_op_env *e, cg_op_code *out)
{
    int cls = (int)ir_tokens_attrs(op_of(e))->cls;
    FWD("rt_tokens_fwd", X(0), cg_int(cls), P("cls"), P("pos"), Y);
    BWD("rt_tokens_bwd", DY, cg_int(cls), DX(0), DP("cls"), DP("pos"));
}

static void lower_attention(const cg_op_env *e, cg_op_code *out)
{
    const ir_op *op = op_of(e);
    const ir_attrs_attention *a = ir_attention_attrs(op);
    cg_arg size[] = {cg_set_arg(CA_SHARD_SIZE, e->set), cg_int(op->type.dim[1]),
                     cg_int(op->type.dim[2]), cg_int(a->heads)};
    int saved = scratch(e, out, "saved",
                        (cg_size){1, -1, cg_call_value(e->a, "rt_attention_saved_size", size, 4)});
    FWD("rt_attention_ex_fwd", POOL, X(0), P("w_qkv"), P("b_qkv"), P("w_o"), P("b_o"),
        cg_int(a->heads), cg_bool(a->causal), cg_var_arg(saved), Y);
    BWD("rt_attention_bwd", POOL, X(0), P("w_qkv"), P("w_o"), cg_int(a->heads), cg_var_arg(saved),
        DY, DX(0), DP("w_qkv"), DP("b_qkv"), DP("w_o"), DP("b_o"));
}

/* The loss of the step's shard (a mean over the global batch), read back by
 * the host: no graph segment. The first loss also counts correct answers. The
 * foreground's loss gradient is multiplied by the loss scale as it is made (a
 * no-op unless loss scaling is on: f16 jobs, --loss-scale); a background job's
 * is not. */
static void lower_cross_entropy(const cg_op_env *e, cg_op_code *out)
{
    cg_arg n = {.kind = CA_BATCH, .i = e->p->labels_per_sample};
    FWD("rt_cross_entropy_fwd", X(0), X(1), n)->call.result = CR_LOSS;
    if (e->first_loss) {
        cg_stmt *s = cg_add(e->a, &out->fwd, CS_IF, e->op, NULL);
        s->cond.kind = CC_CORRECT;
        CG_CALL(e->a, &s->body, e->op, "rt_correct_count", X(0), X(1))->call.result = CR_CORRECT;
    }
    BWD(e->p->bg ? "rt_cross_entropy_bwd" : "rt_cross_entropy_bwd_scaled", X(0), X(1), n, DX(0));
    out->graphable = false;
}

/* Sample ranges from the operand's rank set to the reshard's, and the
 * gradient back in backward (lower.c adds it to the operand's gradient):
 * split-phase, a start and a wait each way (lower.c puts them after the
 * producer and before the consumer), or one blocking call each way. */
static void lower_reshard(const cg_op_env *e, cg_op_code *out)
{
    int from = e->p->vars[e->x[0]].set;
    cg_arg elems = cg_int(ir_type_elems_per_sample(&op_of(e)->type));
    cg_arg batch = {.kind = CA_BATCH, .i = 1};
    out->graphable = false;
    if (e->reshard_id < 0) {
        FWD("rt_reshard", X(0), cg_set_arg(CA_COMM, from), Y, COMM, batch, elems);
        BWD("rt_reshard", DY, COMM, DX(0), cg_set_arg(CA_COMM, from), batch, elems);
        return;
    }
    cg_arg fid = cg_int(e->reshard_id), bid = cg_int(e->reshard_id + 1);
    FWD("rt_reshard_start", fid, X(0), cg_set_arg(CA_COMM, from), Y, COMM, batch, elems);
    CG_CALL(e->a, &out->wait, e->op, "rt_reshard_wait", fid);
    BWD("rt_reshard_start", bid, DY, COMM, DX(0), cg_set_arg(CA_COMM, from), batch, elems);
    CG_CALL(e->a, &out->bwd_wait, e->op, "rt_reshard_wait", bid);
}

/* The sum of the layer's parameter gradients over the rank set: bwd starts it (lower.c
 * puts it after the backward of the allreduce's `start`), and it runs while the backward
 * goes on; wait completes it (before the backward of `complete`), or, with complete =
 * none, the optimizer step does (runtime.md, "Gradient all-reduce"). For an allreduce,
 * env->params are its layer's parameters. */
static void lower_allreduce(const cg_op_env *e, cg_op_code *out)
{
    const ir_attrs_allreduce *at = ir_allreduce_attrs(op_of(e));
    for (int k = 0; k < e->nparams; k++) {
        int v = e->params[k];
        if (e->p->vars[v].buffer)
            continue;
        cg_arg grad = {.kind = CA_PARAM_DATA, .var = v};
        BWD("rt_grad_allreduce_start", COMM, grad, (cg_arg){.kind = CA_PARAM_NUMEL, .var = v});
        if (at->complete >= 0)
            CG_CALL(e->a, &out->wait, e->op, "rt_grad_allreduce_wait", COMM, grad);
    }
    out->graphable = false;
}

void cg_op_calls(const cg_op_env *e, cg_op_code *out)
{
    memset(out, 0, sizeof *out);
    out->graphable = true;
    out->trains = e->nparams > 0;
    lowerers[op_of(e)->opcode](e, out);
}
