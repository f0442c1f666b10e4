/*
 * llvm_emit.c: a cg_program built as an LLVM module, with debug info.
 *
 * The LLVM writer beside write_c.c: the same program (lower.c decided it),
 * the same runtime calls, rank-set guards, tables and driver, built through
 * the LLVM C API instead of printed as C. The module has file-scope globals
 * for every tensor and parameter, <job>_setup, <job>_forward and
 * <job>_backward (one step) and main. A job with background copies (GPU
 * multiplexing) has, before them, each background job's one-rank program
 * (<job>_bgK_setup, _forward, _backward with the unit argument, _unit) and
 * its rt_bg_model table bgK_model, which main hands to rt_bg_add per copy.
 * Debug info points at the .burst source: a compile unit for the job's
 * file, a subprogram per function, and every layer's statements carry the
 * DILocation of the layer's definition, so a debugger's
 * `break vgg16.burst:24` stops in that layer's step.
 *
 * LLVM sees only declarations of libburstrt's functions, so their C
 * prototypes are spelled here once more (rt_sigs); the ctest
 * `codegen.llvm_abi` holds the table to runtime/burstrt.h as clang reads it.
 * llvm_target.c turns the module into text or an object file.
 */
#include "codegen.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Core.h>
#include <llvm-c/DebugInfo.h>

/* A runtime function's C prototype: the result, then each parameter.
 * v void, p a pointer, i int (and enums), l int64_t or uint64_t,
 * f float, d double, b bool. */
typedef struct rt_sig {
    const char *name, *sig;
} rt_sig;

static const rt_sig rt_sigs[] = {
    {"rt_accumulate", "vpp"},
    {"rt_adam_step", "vpp"},
    {"rt_add_fwd", "vppp"},
    {"rt_allreduce_sum", "vppl"},
    {"rt_attention_bwd", "vppppippppppp"},
    {"rt_attention_ex_fwd", "vppppppibpp"},
    {"rt_attention_saved_size", "lllli"},
    {"rt_avgpool2d_bwd", "vppp"},
    {"rt_avgpool2d_fwd", "vppp"},
    {"rt_batchnorm2d_infer", "vpppppfp"},
    {"rt_batchnorm2d_sync_bwd", "vpppppppp"},
    {"rt_batchnorm2d_sync_fwd", "vppppppffpp"},
    {"rt_bg_add", "vpilipd"},
    {"rt_bg_finish", "vd"},
    {"rt_buffer_new", "ppppip"},
    {"rt_check_launch", "vi"},
    {"rt_check_world_size", "vi"},
    {"rt_checkpoint_attach", "lp"},
    {"rt_comm_member", "bp"},
    {"rt_comm_new", "pip"},
    {"rt_comm_self", "p"},
    {"rt_comm_shard", "vplpp"},
    {"rt_concat_bwd", "vpiip"},
    {"rt_concat_fwd", "vipip"},
    {"rt_conv2d_bwd", "vpppppppp"},
    {"rt_conv2d_fwd", "vpppppp"},
    {"rt_correct_count", "lpp"},
    {"rt_cross_entropy_bwd", "vpplp"},
    {"rt_cross_entropy_bwd_scaled", "vpplp"},
    {"rt_cross_entropy_fwd", "dppl"},
    {"rt_data_batch", "vpllllpp"},
    {"rt_data_close", "vp"},
    {"rt_data_open", "ppipilll"},
    {"rt_data_test_batch", "vpllpp"},
    {"rt_data_test_count", "lp"},
    {"rt_dropout_bwd", "vpfllilp"},
    {"rt_dropout_fwd", "vpfllilp"},
    {"rt_embedding_bwd", "vpppp"},
    {"rt_embedding_fwd", "vpppp"},
    {"rt_finalize", "v"},
    {"rt_gelu_bwd", "vppp"},
    {"rt_gelu_erf_bwd", "vppp"},
    {"rt_gelu_erf_fwd", "vpp"},
    {"rt_gelu_fwd", "vpp"},
    {"rt_global_avgpool_bwd", "vpp"},
    {"rt_global_avgpool_fwd", "vpp"},
    {"rt_grad_allreduce_start", "vppl"},
    {"rt_grad_allreduce_wait", "vpp"},
    {"rt_grads_wait", "v"},
    {"rt_graph_begin", "bi"},
    {"rt_graph_end", "vi"},
    {"rt_hardsigmoid_bwd", "vppp"},
    {"rt_hardsigmoid_fwd", "vpp"},
    {"rt_hardswish_bwd", "vppp"},
    {"rt_hardswish_fwd", "vpp"},
    {"rt_init", "pppp"},
    {"rt_init_const", "vpf"},
    {"rt_init_kaiming_uniform", "vpllii"},
    {"rt_init_normal", "vpfflii"},
    {"rt_layernorm_bwd", "vppppppp"},
    {"rt_layernorm_fwd", "vpppfpp"},
    {"rt_linear_bwd", "vpppppp"},
    {"rt_linear_fwd", "vpppp"},
    {"rt_loss_scale_unscale", "bp"},
    {"rt_matmul_bwd", "vppppp"},
    {"rt_matmul_fwd", "vppp"},
    {"rt_maxpool2d_bwd", "vpppp"},
    {"rt_maxpool2d_fwd", "vppp"},
    {"rt_mul_bwd", "vppppp"},
    {"rt_mul_fwd", "vppp"},
    {"rt_now", "d"},
    {"rt_param_new", "ppppip"},
    {"rt_params_new", "pp"},
    {"rt_params_zero_grad", "vp"},
    {"rt_pool_free", "vp"},
    {"rt_pool_new", "p"},
    {"rt_progress", "v"},
    {"rt_relu6_bwd", "vppp"},
    {"rt_relu6_fwd", "vpp"},
    {"rt_relu_bwd", "vppp"},
    {"rt_relu_fwd", "vpp"},
    {"rt_report_loss", "vld"},
    {"rt_reshard", "vppppll"},
    {"rt_reshard_start", "vippppll"},
    {"rt_reshard_wait", "vi"},
    {"rt_set_compute_dtype", "vi"},
    {"rt_set_defaults", "vlp"},
    {"rt_sgd_step", "vpp"},
    {"rt_sigmoid_bwd", "vppp"},
    {"rt_sigmoid_fwd", "vpp"},
    {"rt_silu_bwd", "vppp"},
    {"rt_silu_fwd", "vpp"},
    {"rt_slice_bwd", "vpiip"},
    {"rt_slice_fwd", "vpiip"},
    {"rt_softmax_bwd", "vppip"},
    {"rt_softmax_fwd", "vpip"},
    {"rt_step_begin", "vl"},
    {"rt_step_end", "vl"},
    {"rt_storage_dtype", "i"},
    {"rt_tanh_bwd", "vppp"},
    {"rt_tanh_fwd", "vpp"},
    {"rt_tensor_copy", "vpp"},
    {"rt_tensor_new", "ppiip"},
    {"rt_tensor_view", "pppip"},
    {"rt_tensor_zero", "vp"},
    {"rt_tokens_bwd", "vpippp"},
    {"rt_tokens_fwd", "vpippp"},
    {"rt_trace_pop", "v"},
    {"rt_trace_push", "vp"},
    {"rt_transpose", "vpiip"},
    {"rt_weight_name", "vpp"},
    {"rt_world_sum", "dd"},
};

/* Field numbers of the runtime's structs that the program reads (burstrt.h;
 * build_types() spells the structs, codegen.llvm_abi holds them to it). */
enum { TENSOR_NUMEL = 3, TENSOR_DATA = 4 };
enum { PARAM_VALUE = 1, PARAM_GRAD = 2 };
enum { OPT_ITERATIONS = 0, OPT_SEED = 3, OPT_RANK = 22 };

/* Enum values of burstrt.h. */
enum { RT_F32_ = 0, RT_I32_ = 1, RT_DATA_SYNTHETIC_ = 0, RT_DATA_FMNIST_ = 1 };
enum { RT_COMPUTE_BF16_ = 1, RT_COMPUTE_F16_ = 2 };

typedef struct di_file {
    const src_file *src;
    LLVMMetadataRef file;
} di_file;

typedef struct lw {
    arena *a;
    const cg_program *p;
    LLVMContextRef cx;
    LLVMModuleRef mod;
    LLVMBuilderRef b, entry_b; /* entry_b: allocas, at the top of the entry block */
    LLVMTypeRef t_void, t_i1, t_i8, t_i32, t_i64, t_f32, t_f64, t_ptr;
    LLVMTypeRef t_tensor, t_param, t_options, t_sgd, t_adam, t_bg_model;
    LLVMValueRef *globals;                 /* per cg_var: its rt_tensor * or rt_param * */
    LLVMValueRef comm, s0, nb, *set_ranks; /* of p */
    LLVMValueRef *bg_models; /* per background job of the foreground: its rt_bg_model, or NULL */
    LLVMValueRef *fns;       /* per rt_sigs entry: its declaration, once used */
    LLVMValueRef printf_fn;
    /* The function being built and its parameters (NULL where it has none). */
    LLVMValueRef fn, pool, ps, data, seed, step, train, correct, loss;
    LLVMValueRef unit;      /* a background program's forward and backward: the unit to run */
    LLVMBasicBlockRef body; /* the block after the entry block */
    /* Per rank: the int64_t[rank] that shapes are passed in (the runtime
     * copies a shape before it returns, so one array serves every call). */
    LLVMValueRef shapes[IR_MAX_RANK + 1];
    int nconst;
    /* Debug info. */
    LLVMDIBuilderRef di;
    LLVMMetadataRef cu, job_file, sp, sp_type;
    int job_line;
    di_file *files;
    int nfiles, files_cap;
    LLVMMetadataRef *block_files; /* per files entry: its scope in the current function */
} lw;

static const rt_sig *sig_of(const char *fn, int *index)
{
    int lo = 0, hi = (int)(sizeof rt_sigs / sizeof rt_sigs[0]) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(fn, rt_sigs[mid].name);
        if (c == 0) {
            *index = mid;
            return &rt_sigs[mid];
        }
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    ice("the LLVM writer knows no prototype for runtime function '%s' (add it to rt_sigs)", fn);
}

static LLVMTypeRef type_of(const lw *w, char c)
{
    switch (c) {
    case 'v': return w->t_void;
    case 'p': return w->t_ptr;
    case 'i': return w->t_i32;
    case 'l': return w->t_i64;
    case 'f': return w->t_f32;
    case 'd': return w->t_f64;
    case 'b': return w->t_i1;
    }
    ice("bad prototype letter '%c'", c);
}

/* A bool crosses the C ABI zero-extended, as clang declares it. */
static void add_zeroext(lw *w, LLVMValueRef fn_or_call, unsigned index, bool call)
{
    unsigned kind = LLVMGetEnumAttributeKindForName("zeroext", 7);
    LLVMAttributeRef at = LLVMCreateEnumAttribute(w->cx, kind, 0);
    if (call)
        LLVMAddCallSiteAttribute(fn_or_call, index, at);
    else
        LLVMAddAttributeAtIndex(fn_or_call, index, at);
}

static LLVMValueRef runtime_fn(lw *w, const char *name, LLVMTypeRef *fty, const char **sigp)
{
    int k;
    const rt_sig *s = sig_of(name, &k);
    size_t n = strlen(s->sig) - 1;
    LLVMTypeRef params[16];
    if (n > 16)
        ice("runtime function '%s' has too many parameters", name);
    for (size_t q = 0; q < n; q++)
        params[q] = type_of(w, s->sig[q + 1]);
    *fty = LLVMFunctionType(type_of(w, s->sig[0]), params, (unsigned)n, 0);
    *sigp = s->sig;
    if (!w->fns[k]) {
        w->fns[k] = LLVMAddFunction(w->mod, name, *fty);
        for (size_t q = 0; q <= n; q++)
            if (s->sig[q] == 'b')
                add_zeroext(w, w->fns[k], q == 0 ? LLVMAttributeReturnIndex : (unsigned)q, false);
    }
    return w->fns[k];
}

/* A call of runtime function `name`; args already of the prototype's types. */
static LLVMValueRef call_rt(lw *w, const char *name, LLVMValueRef *args, int nargs)
{
    LLVMTypeRef fty;
    const char *sig;
    LLVMValueRef fn = runtime_fn(w, name, &fty, &sig);
    if ((size_t)nargs != strlen(sig) - 1)
        ice("%s takes %zu arguments, the program passes %d", name, strlen(sig) - 1, nargs);
    LLVMValueRef c = LLVMBuildCall2(w->b, fty, fn, args, (unsigned)nargs, "");
    for (int q = 0; q <= nargs; q++)
        if (sig[q] == 'b')
            add_zeroext(w, c, q == 0 ? LLVMAttributeReturnIndex : (unsigned)q, true);
    return c;
}

#define CALL(w, name, ...)                          \
    call_rt(w, name, (LLVMValueRef[]){__VA_ARGS__}, \
            (int)(sizeof((LLVMValueRef[]){__VA_ARGS__}) / sizeof(LLVMValueRef)))
#define CALL0(w, name) call_rt(w, name, NULL, 0)

static LLVMValueRef i32c(const lw *w, int64_t v)
{
    return LLVMConstInt(w->t_i32, (unsigned long long)v, 1);
}
static LLVMValueRef i64c(const lw *w, int64_t v)
{
    return LLVMConstInt(w->t_i64, (unsigned long long)v, 1);
}
static LLVMValueRef null_ptr(const lw *w)
{
    return LLVMConstNull(w->t_ptr);
}

/* A float as the C writer spells it: `(float)%.9g`, read back as a double
 * and rounded to float, so both programs hold the same bits. */
static LLVMValueRef f32c(const lw *w, double r)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", r);
    return LLVMConstReal(w->t_f32, (double)(float)strtod(buf, NULL));
}

/* A double as the C writer spells it: `%.9g`. */
static LLVMValueRef f64c(const lw *w, double r)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.9g", r);
    return LLVMConstReal(w->t_f64, strtod(buf, NULL));
}

static LLVMValueRef private_global(lw *w, LLVMValueRef init, const char *name)
{
    LLVMValueRef g = LLVMAddGlobal(w->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    return g;
}

/* A pointer (i8 *) to the first element of a global array. */
static LLVMValueRef global_ptr(lw *w, LLVMValueRef g)
{
    LLVMValueRef zero = i32c(w, 0);
    LLVMValueRef idx[] = {zero, zero};
    LLVMValueRef p = LLVMConstInBoundsGEP2(LLVMGlobalGetValueType(g), g, idx, 2);
    return LLVMConstBitCast(p, w->t_ptr);
}

static LLVMValueRef string_ptr(lw *w, const char *s)
{
    LLVMValueRef init = LLVMConstStringInContext(w->cx, s, (unsigned)strlen(s), 0);
    return global_ptr(w, private_global(w, init, ".str"));
}

/* A block not yet in the function: place() appends it when its code
 * starts, so the blocks read in the order of the program. */
static LLVMBasicBlockRef new_block(lw *w, const char *name)
{
    return LLVMCreateBasicBlockInContext(w->cx, name);
}

static void place(lw *w, LLVMBasicBlockRef bb)
{
    LLVMAppendExistingBasicBlock(w->fn, bb);
    LLVMPositionBuilderAtEnd(w->b, bb);
}

static LLVMValueRef entry_alloca(lw *w, LLVMTypeRef t, const char *name)
{
    return LLVMBuildAlloca(w->entry_b, t, name);
}

static LLVMValueRef load(lw *w, LLVMTypeRef t, LLVMValueRef ptr, const char *name)
{
    return LLVMBuildLoad2(w->b, t, ptr, name);
}

/* Element k of a global array of type elem. */
static LLVMValueRef array_elem(lw *w, LLVMValueRef g, int k)
{
    LLVMValueRef idx[] = {i32c(w, 0), i32c(w, k)};
    return LLVMBuildInBoundsGEP2(w->b, LLVMGlobalGetValueType(g), g, idx, 2, "");
}

static LLVMValueRef comm_of(lw *w, int set)
{
    return load(w, w->t_ptr, array_elem(w, w->comm, set), "comm");
}
static LLVMValueRef s0_of(lw *w, int set)
{
    return load(w, w->t_i64, array_elem(w, w->s0, set), "s0");
}
static LLVMValueRef nb_of(lw *w, int set)
{
    return load(w, w->t_i64, array_elem(w, w->nb, set), "nb");
}
static LLVMValueRef var_of(lw *w, int v)
{
    return load(w, w->t_ptr, w->globals[v], w->p->vars[v].name);
}

/* Field `field` of the struct of type st that ptr (i8 *) points to. */
static LLVMValueRef field(lw *w, LLVMTypeRef st, LLVMValueRef ptr, unsigned fld, LLVMTypeRef ft)
{
    LLVMValueRef sp = LLVMBuildBitCast(w->b, ptr, LLVMPointerType(st, 0), "");
    return load(w, ft, LLVMBuildStructGEP2(w->b, st, sp, fld, ""), "");
}

static LLVMValueRef batch(lw *w, int64_t times)
{
    int64_t b = w->p->job->batch, v;
    if (__builtin_mul_overflow(b, times, &v))
        ice("the global batch times %lld overflows", (long long)times);
    return i64c(w, v);
}

static LLVMValueRef call_value(lw *w, const cg_call *c);

static LLVMValueRef size_value(lw *w, const cg_size *z)
{
    if (z->call)
        return call_value(w, z->call);
    if (z->set < 0)
        return i64c(w, z->k);
    LLVMValueRef n = nb_of(w, z->set);
    return z->k == 1 ? n : LLVMBuildMul(w->b, n, i64c(w, z->k), "");
}

/* The address of an int64_t[rank] holding v's shape. */
static LLVMValueRef shape_of(lw *w, const cg_var *v)
{
    if (v->rank < 1 || v->rank > IR_MAX_RANK)
        ice("variable %s has rank %d", v->name, v->rank);
    LLVMTypeRef at = LLVMArrayType(w->t_i64, (unsigned)v->rank);
    if (!w->shapes[v->rank])
        w->shapes[v->rank] = entry_alloca(w, at, "shape");
    LLVMValueRef arr = w->shapes[v->rank];
    for (int k = 0; k < v->rank; k++) {
        LLVMValueRef idx[] = {i32c(w, 0), i32c(w, k)};
        LLVMBuildStore(w->b, size_value(w, &v->dim[k]),
                       LLVMBuildInBoundsGEP2(w->b, at, arr, idx, 2, ""));
    }
    return LLVMBuildBitCast(w->b, arr, w->t_ptr, "");
}

/* `cond ? then() : NULL` for a pointer, where then() must not run unless cond. */
static LLVMValueRef ptr_if(lw *w, LLVMValueRef cond, LLVMValueRef (*then)(lw *, const void *),
                           const void *arg)
{
    LLVMBasicBlockRef from = LLVMGetInsertBlock(w->b);
    LLVMBasicBlockRef yes = new_block(w, "then");
    LLVMBasicBlockRef join = new_block(w, "join");
    LLVMBuildCondBr(w->b, cond, yes, join);
    place(w, yes);
    LLVMValueRef v = then(w, arg);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(w->b);
    LLVMBuildBr(w->b, join);
    place(w, join);
    LLVMValueRef phi = LLVMBuildPhi(w->b, w->t_ptr, "");
    LLVMValueRef vals[] = {null_ptr(w), v};
    LLVMBasicBlockRef from_blocks[] = {from, yes_end};
    LLVMAddIncoming(phi, vals, from_blocks, 2);
    return phi;
}

/* One argument, as the prototype's letter t wants it. */
static LLVMValueRef arg_value(lw *w, const cg_arg *a, char t)
{
    switch (a->kind) {
    case CA_NULL: return null_ptr(w);
    case CA_VAR: return var_of(w, a->var);
    case CA_PARAM:
        return field(w, w->t_param, var_of(w, a->var), a->grad ? PARAM_GRAD : PARAM_VALUE,
                     w->t_ptr);
    case CA_PARAM_DATA: {
        LLVMValueRef g = field(w, w->t_param, var_of(w, a->var), PARAM_GRAD, w->t_ptr);
        return field(w, w->t_tensor, g, TENSOR_DATA, w->t_ptr);
    }
    case CA_PARAM_NUMEL: {
        LLVMValueRef g = field(w, w->t_param, var_of(w, a->var), PARAM_GRAD, w->t_ptr);
        return field(w, w->t_tensor, g, TENSOR_NUMEL, w->t_i64);
    }
    case CA_INT:
        if (t == 'i' && (a->i < INT_MIN || a->i > INT_MAX))
            ice("integer argument %lld does not fit an int", (long long)a->i);
        return t == 'i' ? i32c(w, a->i) : i64c(w, a->i);
    case CA_F32: return f32c(w, a->r);
    case CA_BOOL: return LLVMConstInt(w->t_i1, a->i != 0, 0);
    case CA_STR: return string_ptr(w, a->s);
    case CA_COMM: return comm_of(w, a->set);
    case CA_SHARD_FIRST: return s0_of(w, a->set);
    case CA_SHARD_SIZE: return nb_of(w, a->set);
    case CA_SHARD_END: return LLVMBuildAdd(w->b, s0_of(w, a->set), nb_of(w, a->set), "");
    case CA_TEST_FIRST:
        return LLVMBuildAdd(w->b, LLVMBuildMul(w->b, w->step, batch(w, 1), ""), s0_of(w, a->set),
                            "");
    case CA_BATCH: return batch(w, a->i);
    case CA_POOL: return w->pool;
    case CA_DATA: return w->data;
    case CA_SEED: return w->seed;
    case CA_STEP: return w->step;
    case CA_CONST: {
        /* rt_conv2d_attrs, rt_pool2d_attrs: structs of ints only. */
        LLVMValueRef *vals = arena_alloc(w->a, sizeof *vals * (size_t)(a->n ? a->n : 1));
        for (int q = 0; q < a->n; q++) {
            if (a->vals[q] < INT_MIN || a->vals[q] > INT_MAX)
                ice("attribute %lld of %s does not fit an int", (long long)a->vals[q], a->s);
            vals[q] = i32c(w, a->vals[q]);
        }
        LLVMValueRef init = LLVMConstArray(w->t_i32, vals, (unsigned)a->n);
        char name[32];
        snprintf(name, sizeof name, "attrs%d", w->nconst++);
        return global_ptr(w, private_global(w, init, name));
    }
    case CA_ARRAY: {
        LLVMTypeRef at = LLVMArrayType(w->t_ptr, (unsigned)a->n);
        LLVMValueRef arr = entry_alloca(w, at, "xs");
        for (int q = 0; q < a->n; q++) {
            LLVMValueRef idx[] = {i32c(w, 0), i32c(w, q)};
            LLVMValueRef v = a->vars[q] < 0 ? null_ptr(w) : var_of(w, a->vars[q]);
            LLVMBuildStore(w->b, v, LLVMBuildInBoundsGEP2(w->b, at, arr, idx, 2, ""));
        }
        return LLVMBuildBitCast(w->b, arr, w->t_ptr, "");
    }
    }
    ice("bad argument kind %d", a->kind);
}

static LLVMValueRef call_value(lw *w, const cg_call *c)
{
    int k;
    const char *sig = sig_of(c->fn, &k)->sig;
    if ((size_t)c->nargs != strlen(sig) - 1)
        ice("%s takes %zu arguments, the program passes %d", c->fn, strlen(sig) - 1, c->nargs);
    LLVMValueRef *args = arena_alloc(w->a, sizeof *args * (size_t)(c->nargs ? c->nargs : 1));
    for (int q = 0; q < c->nargs; q++)
        args[q] = arg_value(w, &c->args[q], sig[q + 1]);
    return call_rt(w, c->fn, args, c->nargs);
}

/* ---- debug info ---------------------------------------------------------- */

static LLVMMetadataRef di_file_of(lw *w, const src_file *src, int *index)
{
    for (int k = w->nfiles - 1; k >= 0; k--)
        if (w->files[k].src == src) {
            *index = k;
            return w->files[k].file;
        }
    const char *path = src ? src->path : "<unknown>";
    char dir[4096];
    if (path[0] == '/' || !getcwd(dir, sizeof dir))
        snprintf(dir, sizeof dir, "%s", "");
    int before = w->files_cap;
    arena_grow(w->a, (void **)&w->files, &w->files_cap, w->nfiles + 1, sizeof *w->files);
    if (w->files_cap != before) {
        LLVMMetadataRef *nb = arena_alloc(w->a, sizeof *nb * (size_t)w->files_cap);
        if (w->block_files)
            memcpy(nb, w->block_files, sizeof *nb * (size_t)w->nfiles);
        w->block_files = nb;
    }
    LLVMMetadataRef f = LLVMDIBuilderCreateFile(w->di, path, strlen(path), dir, strlen(dir));
    w->files[w->nfiles] = (di_file){src, f};
    w->block_files[w->nfiles] = NULL;
    *index = w->nfiles++;
    return f;
}

/* Where op's statements are: its line in its file (a lexical block file
 * when that is not the job's file), or the job's line. */
static void set_location(lw *w, int op)
{
    const src_loc *l = op >= 0 ? &w->p->g->ops[op].loc : NULL;
    LLVMMetadataRef scope = w->sp;
    unsigned line = (unsigned)w->job_line, col = 0;
    if (l && l->file && l->line > 0) {
        int k;
        LLVMMetadataRef f = di_file_of(w, l->file, &k);
        if (f != w->job_file) {
            if (!w->block_files[k])
                w->block_files[k] = LLVMDIBuilderCreateLexicalBlockFile(w->di, w->sp, f, 0);
            scope = w->block_files[k];
        }
        line = (unsigned)l->line;
        col = l->col > 0 ? (unsigned)l->col : 0;
    }
    LLVMSetCurrentDebugLocation2(w->b,
                                 LLVMDIBuilderCreateDebugLocation(w->cx, line, col, scope, NULL));
}

static void begin_debug(lw *w, const char *producer, bool optimized)
{
    const src_loc *jl = &w->p->job->loc;
    int k;
    w->di = LLVMCreateDIBuilder(w->mod);
    w->job_file = di_file_of(w, jl->file, &k);
    w->job_line = jl->line > 0 ? jl->line : 0;
    w->cu = LLVMDIBuilderCreateCompileUnit(w->di, LLVMDWARFSourceLanguageC, w->job_file, producer,
                                           strlen(producer), optimized, "", 0, 0, "", 0,
                                           LLVMDWARFEmissionFull, 0, 0, 0, "", 0, "", 0);
    w->sp_type = LLVMDIBuilderCreateSubroutineType(w->di, w->job_file, NULL, 0, LLVMDIFlagZero);
    LLVMAddModuleFlag(w->mod, LLVMModuleFlagBehaviorWarning, "Dwarf Version", 13,
                      LLVMValueAsMetadata(i32c(w, 4)));
    LLVMAddModuleFlag(w->mod, LLVMModuleFlagBehaviorWarning, "Debug Info Version", 18,
                      LLVMValueAsMetadata(i32c(w, LLVMDebugMetadataVersion())));
}

/* ---- statements ---------------------------------------------------------- */

static void build_block(lw *w, const cg_block *b);

static LLVMValueRef cond_value(lw *w, const cg_cond *c)
{
    switch (c->kind) {
    case CC_MEMBER: return CALL(w, "rt_comm_member", comm_of(w, c->set));
    case CC_TRAIN: return w->train;
    case CC_CORRECT: return LLVMBuildIsNotNull(w->b, w->correct, "");
    case CC_EXISTS: return LLVMBuildIsNotNull(w->b, var_of(w, c->var), "");
    case CC_UNIT:
        if (!w->unit)
            break; /* only a background program's step functions have one */
        return LLVMBuildICmp(w->b, LLVMIntEQ, w->unit, i32c(w, c->var), "");
    }
    ice("bad condition kind %d", c->kind);
}

/* if (cond) then else orelse; either block may be NULL. */
static void build_if(lw *w, LLVMValueRef cond, const cg_block *then, const cg_block *orelse)
{
    LLVMBasicBlockRef yes = new_block(w, "then");
    LLVMBasicBlockRef no = orelse && orelse->n ? new_block(w, "else") : NULL;
    LLVMBasicBlockRef join = new_block(w, "join");
    LLVMBuildCondBr(w->b, cond, yes, no ? no : join);
    place(w, yes);
    if (then)
        build_block(w, then);
    LLVMBuildBr(w->b, join);
    if (no) {
        place(w, no);
        build_block(w, orelse);
        LLVMBuildBr(w->b, join);
    }
    place(w, join);
}

/* a && b(), with b built only where a holds. */
static LLVMValueRef and_then(lw *w, LLVMValueRef a, LLVMValueRef (*b)(lw *, const void *),
                             const void *arg)
{
    LLVMBasicBlockRef from = LLVMGetInsertBlock(w->b);
    LLVMBasicBlockRef yes = new_block(w, "and");
    LLVMBasicBlockRef join = new_block(w, "join");
    LLVMBuildCondBr(w->b, a, yes, join);
    place(w, yes);
    LLVMValueRef v = b(w, arg);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(w->b);
    LLVMBuildBr(w->b, join);
    place(w, join);
    LLVMValueRef phi = LLVMBuildPhi(w->b, w->t_i1, "");
    LLVMValueRef vals[] = {LLVMConstInt(w->t_i1, 0, 0), v};
    LLVMBasicBlockRef blocks[] = {from, yes_end};
    LLVMAddIncoming(phi, vals, blocks, 2);
    return phi;
}

/* For a forward segment: !train || rt_graph_begin(seg); backward: the call. */
static LLVMValueRef segment_begins(lw *w, const void *sp)
{
    const cg_stmt *s = sp;
    if (!s->forward)
        return CALL(w, "rt_graph_begin", i32c(w, s->seg));
    LLVMBasicBlockRef from = LLVMGetInsertBlock(w->b);
    LLVMBasicBlockRef yes = new_block(w, "train");
    LLVMBasicBlockRef join = new_block(w, "join");
    LLVMBuildCondBr(w->b, w->train, yes, join);
    place(w, yes);
    LLVMValueRef v = CALL(w, "rt_graph_begin", i32c(w, s->seg));
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(w->b);
    LLVMBuildBr(w->b, join);
    place(w, join);
    LLVMValueRef phi = LLVMBuildPhi(w->b, w->t_i1, "");
    LLVMValueRef vals[] = {LLVMConstInt(w->t_i1, 1, 0), v};
    LLVMBasicBlockRef blocks[] = {from, yes_end};
    LLVMAddIncoming(phi, vals, blocks, 2);
    return phi;
}

static LLVMValueRef view_of(lw *w, const void *sp)
{
    const cg_stmt *s = sp;
    const cg_var *v = &w->p->vars[s->var];
    return CALL(w, "rt_tensor_view", w->pool, var_of(w, s->src), i32c(w, v->rank), shape_of(w, v));
}

static void build_stmt(lw *w, const cg_stmt *s)
{
    /* Layers' statements in a step carry the layer's line; setup and the
     * driver carry the job's. */
    set_location(w, w->step ? s->op : -1);
    const cg_var *v = s->var >= 0 ? &w->p->vars[s->var] : NULL;
    switch (s->kind) {
    case CS_CALL: {
        LLVMValueRef r = call_value(w, &s->call);
        if (s->call.result == CR_LOSS) {
            LLVMValueRef sum = LLVMBuildFAdd(w->b, load(w, w->t_f64, w->loss, "loss"), r, "");
            LLVMBuildStore(w->b, sum, w->loss);
        } else if (s->call.result == CR_CORRECT) {
            LLVMValueRef sum = LLVMBuildAdd(w->b, load(w, w->t_i64, w->correct, "correct"), r, "");
            LLVMBuildStore(w->b, sum, w->correct);
        }
        break;
    }
    case CS_IF: build_if(w, cond_value(w, &s->cond), &s->body, &s->orelse); break;
    case CS_SCOPE: build_block(w, &s->body); break;
    case CS_SEGMENT: {
        LLVMValueRef member = CALL(w, "rt_comm_member", comm_of(w, s->set));
        build_if(w, and_then(w, member, segment_begins, s), &s->body, NULL);
        set_location(w, s->op);
        LLVMValueRef end = CALL(w, "rt_comm_member", comm_of(w, s->set));
        if (s->forward)
            end = LLVMBuildAnd(w->b, end, w->train, "");
        LLVMBasicBlockRef yes = new_block(w, "end");
        LLVMBasicBlockRef join = new_block(w, "join");
        LLVMBuildCondBr(w->b, end, yes, join);
        place(w, yes);
        CALL(w, "rt_graph_end", i32c(w, s->seg));
        LLVMBuildBr(w->b, join);
        place(w, join);
        break;
    }
    case CS_NEW:
        LLVMBuildStore(w->b,
                       CALL(w, "rt_tensor_new", w->pool,
                            v->elem == EL_I32 ? i32c(w, RT_I32_)
                            : v->own          ? i32c(w, RT_F32_)
                                              : CALL0(w, "rt_storage_dtype"),
                            i32c(w, v->rank), shape_of(w, v)),
                       w->globals[s->var]);
        break;
    case CS_VIEW: {
        LLVMValueRef val = null_ptr(w);
        if (s->src >= 0)
            val = ptr_if(w, LLVMBuildIsNotNull(w->b, var_of(w, s->src), ""), view_of, s);
        LLVMBuildStore(w->b, val, w->globals[s->var]);
        break;
    }
    case CS_PARAM:
        LLVMBuildStore(w->b,
                       CALL(w, v->buffer ? "rt_buffer_new" : "rt_param_new", w->ps,
                            string_ptr(w, v->param_name), comm_of(w, v->set), i32c(w, v->rank),
                            shape_of(w, v)),
                       w->globals[s->var]);
        break;
    }
}

static void build_block(lw *w, const cg_block *b)
{
    for (int k = 0; k < b->n; k++)
        build_stmt(w, &b->s[k]);
}

/* ---- functions ----------------------------------------------------------- */

/* Starts function `name` (internal unless it is main) with a subprogram
 * and an entry block; returns it. */
static LLVMValueRef begin_fn(lw *w, const char *name, LLVMTypeRef fty, bool internal)
{
    w->fn = LLVMAddFunction(w->mod, name, fty);
    if (internal) {
        /* Kept out of main, so profiles and backtraces show each step function. */
        LLVMSetLinkage(w->fn, LLVMInternalLinkage);
        unsigned ni = LLVMGetEnumAttributeKindForName("noinline", 8);
        LLVMAddAttributeAtIndex(w->fn, LLVMAttributeFunctionIndex,
                                LLVMCreateEnumAttribute(w->cx, ni, 0));
    }
    /* Unwind tables: debuggers and profilers walk the stack through them. */
    unsigned uw = LLVMGetEnumAttributeKindForName("uwtable", 7);
    LLVMAddAttributeAtIndex(w->fn, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(w->cx, uw, 0));
    w->sp = LLVMDIBuilderCreateFunction(w->di, w->job_file, name, strlen(name), "", 0, w->job_file,
                                        (unsigned)w->job_line, w->sp_type, internal, 1,
                                        (unsigned)w->job_line, LLVMDIFlagPrototyped, 0);
    LLVMSetSubprogram(w->fn, w->sp);
    for (int k = 0; k < w->nfiles; k++)
        w->block_files[k] = NULL;
    /* The entry block holds the allocas; the code starts in the next one. */
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(w->cx, w->fn, "entry");
    LLVMPositionBuilderAtEnd(w->entry_b, entry);
    w->body = new_block(w, "body");
    place(w, w->body);
    memset(w->shapes, 0, sizeof w->shapes);
    w->pool = w->ps = w->data = w->seed = w->step = w->train = w->correct = w->loss = NULL;
    w->unit = NULL;
    set_location(w, -1);
    return w->fn;
}

/* Closes the entry block (its allocas are all there now). */
static void end_fn(lw *w)
{
    LLVMBuildBr(w->entry_b, w->body);
}

static const char *fn_name(lw *w, const char *what)
{
    /* Named after the job (an identifier in the language; kept to one), and
     * a background program's after its number too. */
    char *n = arena_printf(w->a, "%s_%s%s", w->p->job->name, w->p->pre, what);
    for (char *c = n; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            *c = '_';
    return n;
}

static LLVMValueRef build_setup(lw *w)
{
    const cg_program *p = w->p;
    LLVMTypeRef params[] = {w->t_ptr, w->t_ptr, w->t_i64};
    LLVMValueRef fn =
        begin_fn(w, fn_name(w, "setup"), LLVMFunctionType(w->t_void, params, 3, 0), true);
    w->pool = LLVMGetParam(fn, 0);
    w->ps = LLVMGetParam(fn, 1);
    w->seed = LLVMGetParam(fn, 2);
    LLVMValueRef end = entry_alloca(w, w->t_i64, "end");
    for (int s = 0; s < p->nsets; s++) {
        /* A background program runs on this rank alone. */
        LLVMValueRef c =
            p->bg ? CALL0(w, "rt_comm_self")
                  : CALL(w, "rt_comm_new", i32c(w, p->sets[s].n), global_ptr(w, w->set_ranks[s]));
        LLVMBuildStore(w->b, c, array_elem(w, w->comm, s));
        LLVMValueRef s0p = array_elem(w, w->s0, s);
        CALL(w, "rt_comm_shard", c, batch(w, 1), LLVMBuildBitCast(w->b, s0p, w->t_ptr, ""),
             LLVMBuildBitCast(w->b, end, w->t_ptr, ""));
        LLVMValueRef nb =
            LLVMBuildSub(w->b, load(w, w->t_i64, end, "end"), load(w, w->t_i64, s0p, "s0"), "");
        LLVMBuildStore(w->b, nb, array_elem(w, w->nb, s));
    }
    build_block(w, &p->setup);
    set_location(w, -1);
    LLVMBuildRetVoid(w->b);
    end_fn(w);
    return fn;
}

/* forward(pool, data, seed, step, train, correct[, unit]): a background
 * program's runs unit `unit` only. */
static LLVMValueRef build_forward(lw *w)
{
    LLVMTypeRef params[] = {w->t_ptr, w->t_ptr, w->t_i64, w->t_i64, w->t_i1, w->t_ptr, w->t_i32};
    unsigned np = w->p->bg ? 7 : 6;
    LLVMValueRef fn =
        begin_fn(w, fn_name(w, "forward"), LLVMFunctionType(w->t_f64, params, np, 0), true);
    if (w->p->bg) {
        w->unit = LLVMGetParam(fn, 6);
        LLVMSetValueName2(w->unit, "unit", 4);
    }
    w->pool = LLVMGetParam(fn, 0);
    w->data = LLVMGetParam(fn, 1);
    w->seed = LLVMGetParam(fn, 2);
    w->step = LLVMGetParam(fn, 3);
    w->train = LLVMGetParam(fn, 4);
    LLVMValueRef correct = LLVMGetParam(fn, 5);
    w->correct = LLVMBuildBitCast(w->b, correct, LLVMPointerType(w->t_i64, 0), "correct");
    w->loss = entry_alloca(w, w->t_f64, "loss");
    LLVMBuildStore(w->b, LLVMConstReal(w->t_f64, 0), w->loss);
    build_block(w, &w->p->forward);
    set_location(w, -1);
    LLVMBuildRet(w->b, load(w, w->t_f64, w->loss, "loss"));
    end_fn(w);
    return fn;
}

/* backward(pool, seed, step[, unit]). */
static LLVMValueRef build_backward(lw *w)
{
    LLVMTypeRef params[] = {w->t_ptr, w->t_i64, w->t_i64, w->t_i32};
    unsigned np = w->p->bg ? 4 : 3;
    LLVMValueRef fn =
        begin_fn(w, fn_name(w, "backward"), LLVMFunctionType(w->t_void, params, np, 0), true);
    if (w->p->bg) {
        w->unit = LLVMGetParam(fn, 3);
        LLVMSetValueName2(w->unit, "unit", 4);
    }
    w->pool = LLVMGetParam(fn, 0);
    w->seed = LLVMGetParam(fn, 1);
    w->step = LLVMGetParam(fn, 2);
    build_block(w, &w->p->backward);
    set_location(w, -1);
    LLVMBuildRetVoid(w->b);
    end_fn(w);
    return fn;
}

static LLVMValueRef call_own(lw *w, LLVMValueRef fn, LLVMValueRef *args, unsigned n)
{
    return LLVMBuildCall2(w->b, LLVMGlobalGetValueType(fn), fn, args, n, "");
}

static void build_globals(lw *w);

/* ---- background programs (GPU multiplexing, issue 12) ----
 *
 * The C writer's write_background(): each background job with a copy is a
 * one-rank program of its model at its batch (cg_lower_background), with
 * globals and step functions of its own (every op on rt_comm_self(); forward
 * and backward take the unit to run), <job>_bgK_unit(u, pool, data, seed,
 * step) that runs unit u (u < n: forward of op u; else the backward of op
 * 2n-1-u), and the table bgK_model (runtime/burstrt.h, rt_bg_model) that
 * main hands to rt_bg_add for each copy. The runtime's executor
 * (runtime/background.c) runs unit 2n, the update, and the slices. */

static LLVMValueRef build_unit(lw *w, LLVMValueRef forward, LLVMValueRef backward)
{
    int n = w->p->g->nops;
    LLVMTypeRef params[] = {w->t_i32, w->t_ptr, w->t_ptr, w->t_i64, w->t_i64};
    LLVMValueRef fn =
        begin_fn(w, fn_name(w, "unit"), LLVMFunctionType(w->t_f64, params, 5, 0), true);
    LLVMValueRef u = LLVMGetParam(fn, 0), pool = LLVMGetParam(fn, 1), data = LLVMGetParam(fn, 2),
                 seed = LLVMGetParam(fn, 3), step = LLVMGetParam(fn, 4);
    LLVMSetValueName2(u, "u", 1);
    LLVMBasicBlockRef fwd = new_block(w, "forward");
    LLVMBasicBlockRef bwd = new_block(w, "backward");
    LLVMBuildCondBr(w->b, LLVMBuildICmp(w->b, LLVMIntSLT, u, i32c(w, n), ""), fwd, bwd);
    place(w, fwd);
    LLVMValueRef loss = call_own(
        w, forward,
        (LLVMValueRef[]){pool, data, seed, step, LLVMConstInt(w->t_i1, 1, 0), null_ptr(w), u}, 7);
    LLVMBuildRet(w->b, loss);
    place(w, bwd);
    call_own(w, backward,
             (LLVMValueRef[]){pool, seed, step, LLVMBuildSub(w->b, i32c(w, 2 * n - 1), u, "")}, 4);
    LLVMBuildRet(w->b, LLVMConstReal(w->t_f64, 0));
    end_fn(w);
    return fn;
}

/* The rt_bg_model of background program b, with its setup and unit functions. */
static LLVMValueRef model_table(lw *w, const cg_program *b, LLVMValueRef setup, LLVMValueRef unit)
{
    const ir_job *j = b->job;
    const ir_type *xt = &b->g->ops[b->sample_input].type;
    int n = b->g->nops, ndim = xt->rank - 1;
    LLVMValueRef shape = null_ptr(w);
    if (ndim > 0) {
        LLVMValueRef *dims = arena_alloc(w->a, sizeof *dims * (size_t)ndim);
        for (int q = 0; q < ndim; q++)
            dims[q] = i64c(w, xt->dim[q + 1]);
        LLVMValueRef g = private_global(w, LLVMConstArray(w->t_i64, dims, (unsigned)ndim),
                                        arena_printf(w->a, "%ssample_shape", b->pre));
        shape = global_ptr(w, g);
    }
    /* The foreground job's optimizer and hyper-parameters; the other one zero. */
    bool adam = j->optimizer == OPT_ADAM;
    LLVMValueRef sgd = LLVMConstNull(w->t_sgd), adam_cfg = LLVMConstNull(w->t_adam);
    if (adam) {
        LLVMValueRef f[] = {f32c(w, j->lr), f32c(w, 0.9), f32c(w, 0.999), f32c(w, 1e-8),
                            f32c(w, j->weight_decay)};
        adam_cfg = LLVMConstNamedStruct(w->t_adam, f, 5);
    } else {
        LLVMValueRef f[] = {f32c(w, j->lr), f32c(w, j->momentum), f32c(w, j->weight_decay),
                            LLVMConstInt(w->t_i8, 0, 0)};
        sgd = LLVMConstNamedStruct(w->t_sgd, f, 4);
    }
    LLVMValueRef f[] = {
        string_ptr(w, b->g->name),
        i64c(w, j->batch),
        i32c(w, 2 * n + 1),
        i32c(w, b->bg_fmnist ? RT_DATA_FMNIST_ : RT_DATA_SYNTHETIC_),
        i32c(w, ndim),
        shape,
        i32c(w, xt->elem == EL_I32 ? RT_I32_ : RT_F32_),
        i64c(w, b->vocab),
        i64c(w, b->classes),
        i64c(w, b->labels_per_sample),
        LLVMConstInt(w->t_i8, adam, 0),
        sgd,
        adam_cfg,
        LLVMConstBitCast(setup, w->t_ptr),
        LLVMConstBitCast(unit, w->t_ptr),
    };
    LLVMValueRef g = LLVMAddGlobal(w->mod, w->t_bg_model, arena_printf(w->a, "%smodel", b->pre));
    LLVMSetInitializer(g, LLVMConstNamedStruct(w->t_bg_model, f, sizeof f / sizeof *f));
    LLVMSetLinkage(g, LLVMInternalLinkage);
    LLVMSetGlobalConstant(g, 1);
    return g;
}

/* Background program b in the module: its globals, step functions and table
 * (in w->bg_models). The foreground's state in w is kept. */
static void build_background(lw *w, const cg_program *b)
{
    lw fg = *w;
    w->p = b;
    build_globals(w);
    LLVMValueRef setup = build_setup(w);
    LLVMValueRef forward = build_forward(w);
    LLVMValueRef backward = build_backward(w);
    LLVMValueRef unit = build_unit(w, forward, backward);
    fg.bg_models[b->bg_job] = model_table(w, b, setup, unit);
    /* Back to the foreground; what the module shares (declarations, debug
     * files, numbering) stays as the background left it. */
    w->p = fg.p;
    w->globals = fg.globals;
    w->comm = fg.comm;
    w->s0 = fg.s0;
    w->nb = fg.nb;
    w->set_ranks = fg.set_ranks;
}

/* main()'s placing of every copy: rt_bg_add(&bgK_model, rank, seed, nslices,
 * cut, slowdown) on every rank; the rank that hosts a copy sets it up. */
static void add_copies(lw *w)
{
    const ir_job *j = w->p->job;
    const ir_interleave *il = j->interleave;
    if (!il || il->ncopies == 0)
        return;
    double slowdown = j->slowdown > 0 ? j->slowdown : IR_SLOWDOWN_DEFAULT;
    for (int c = 0; c < il->ncopies; c++) {
        const ir_bg_copy *cp = &il->copies[c];
        if (cp->job < 0 || cp->job >= j->nbackground || !w->bg_models[cp->job])
            ice("background copy %d of job %d has no program", c, cp->job);
        LLVMValueRef *cut = arena_alloc(w->a, sizeof *cut * (size_t)(cp->nslices + 1));
        for (int q = 0; q <= cp->nslices; q++)
            cut[q] = i32c(w, cp->cut[q]);
        LLVMValueRef cuts =
            private_global(w, LLVMConstArray(w->t_i32, cut, (unsigned)(cp->nslices + 1)), "cut");
        CALL(w, "rt_bg_add", LLVMConstBitCast(w->bg_models[cp->job], w->t_ptr), i32c(w, cp->rank),
             LLVMConstInt(w->t_i64, cp->seed, 0), i32c(w, cp->nslices), global_ptr(w, cuts),
             f64c(w, slowdown));
    }
}

static void print(lw *w, const char *fmt, LLVMValueRef *args, unsigned n)
{
    LLVMValueRef all[8] = {string_ptr(w, fmt)};
    for (unsigned k = 0; k < n; k++)
        all[k + 1] = args[k];
    LLVMBuildCall2(w->b, LLVMGlobalGetValueType(w->printf_fn), w->printf_fn, all, n + 1, "");
}

/* The driver: the C writer's main(), the same calls in the same order. */
static void build_main(lw *w, LLVMValueRef setup, LLVMValueRef forward, LLVMValueRef backward)
{
    const cg_program *p = w->p;
    const ir_job *j = p->job;
    const ir_type *xt = &p->g->ops[p->sample_input].type;
    LLVMTypeRef params[] = {w->t_i32, LLVMPointerType(w->t_ptr, 0)};
    LLVMValueRef fn = begin_fn(w, "main", LLVMFunctionType(w->t_i32, params, 2, 0), false);
    LLVMValueRef argc = entry_alloca(w, w->t_i32, "argc");
    LLVMValueRef argv = entry_alloca(w, LLVMPointerType(w->t_ptr, 0), "argv");
    LLVMBuildStore(w->b, LLVMGetParam(fn, 0), argc);
    LLVMBuildStore(w->b, LLVMGetParam(fn, 1), argv);
    CALL(w, "rt_set_defaults", i64c(w, j->iterations), string_ptr(w, p->data));
    LLVMValueRef o = CALL(w, "rt_init", LLVMBuildBitCast(w->b, argc, w->t_ptr, ""),
                          LLVMBuildBitCast(w->b, argv, w->t_ptr, ""), string_ptr(w, j->name));
    CALL(w, "rt_check_world_size", i32c(w, p->world));
    CALL(w, "rt_check_launch", i32c(w, p->m->clusters[j->cluster].gpus_per_node));
    for (int i = 0; i < p->g->nweights; i++)
        CALL(w, "rt_weight_name", string_ptr(w, p->g->weights[i].source),
             string_ptr(w, p->g->weights[i].target));
    if (j->dtype == DT_BF16 || j->dtype == DT_F16)
        CALL(w, "rt_set_compute_dtype",
             i32c(w, j->dtype == DT_BF16 ? RT_COMPUTE_BF16_ : RT_COMPUTE_F16_));
    LLVMValueRef pool = CALL0(w, "rt_pool_new");
    LLVMValueRef ps = CALL(w, "rt_params_new", pool);
    LLVMValueRef seed = field(w, w->t_options, o, OPT_SEED, w->t_i64);
    call_own(w, setup, (LLVMValueRef[]){pool, ps, seed}, 3);

    LLVMTypeRef shape_t = LLVMArrayType(w->t_i64, (unsigned)(xt->rank > 1 ? xt->rank - 1 : 1));
    LLVMValueRef shape = entry_alloca(w, shape_t, "sample_shape");
    for (int k = 1; k < xt->rank; k++) {
        LLVMValueRef idx[] = {i32c(w, 0), i32c(w, k - 1)};
        LLVMBuildStore(w->b, i64c(w, xt->dim[k]),
                       LLVMBuildInBoundsGEP2(w->b, shape_t, shape, idx, 2, ""));
    }
    LLVMValueRef data = CALL(w, "rt_data_open", o, i32c(w, xt->rank - 1),
                             LLVMBuildBitCast(w->b, shape, w->t_ptr, ""),
                             i32c(w, xt->elem == EL_I32 ? RT_I32_ : RT_F32_), i64c(w, p->vocab),
                             i64c(w, p->classes), i64c(w, p->labels_per_sample));
    LLVMValueRef opt;
    if (j->optimizer == OPT_ADAM) {
        LLVMValueRef f[] = {f32c(w, j->lr), f32c(w, 0.9), f32c(w, 0.999), f32c(w, 1e-8),
                            f32c(w, j->weight_decay)};
        opt = private_global(w, LLVMConstNamedStruct(w->t_adam, f, 5), "opt");
    } else {
        LLVMValueRef f[] = {f32c(w, j->lr), f32c(w, j->momentum), f32c(w, j->weight_decay),
                            LLVMConstInt(w->t_i8, 0, 0)};
        opt = private_global(w, LLVMConstNamedStruct(w->t_sgd, f, 4), "opt");
    }
    opt = LLVMConstBitCast(opt, w->t_ptr);
    add_copies(w);
    LLVMValueRef first = CALL(w, "rt_checkpoint_attach", ps);
    LLVMValueRef t0 = CALL0(w, "rt_now");

    /* for (step = first; step < o->iterations; step++) */
    LLVMValueRef stepv = entry_alloca(w, w->t_i64, "step");
    LLVMBuildStore(w->b, first, stepv);
    LLVMBasicBlockRef head = new_block(w, "steps");
    LLVMBasicBlockRef body = new_block(w, "step");
    LLVMBasicBlockRef done = new_block(w, "trained");
    LLVMBuildBr(w->b, head);
    place(w, head);
    LLVMValueRef step = load(w, w->t_i64, stepv, "step");
    LLVMValueRef iters = field(w, w->t_options, o, OPT_ITERATIONS, w->t_i64);
    LLVMBuildCondBr(w->b, LLVMBuildICmp(w->b, LLVMIntSLT, step, iters, ""), body, done);
    place(w, body);
    CALL(w, "rt_step_begin", step);
    LLVMValueRef l = call_own(
        w, forward,
        (LLVMValueRef[]){pool, data, seed, step, LLVMConstInt(w->t_i1, 1, 0), null_ptr(w)}, 6);
    LLVMValueRef loss = CALL(w, "rt_world_sum", l);
    CALL(w, "rt_params_zero_grad", ps);
    call_own(w, backward, (LLVMValueRef[]){pool, seed, step}, 3);
    /* if (rt_loss_scale_unscale(ps)) the optimizer's step (false: skip it) */
    LLVMBasicBlockRef update = new_block(w, "update");
    LLVMBasicBlockRef stepped = new_block(w, "stepped");
    LLVMBuildCondBr(w->b, CALL(w, "rt_loss_scale_unscale", ps), update, stepped);
    place(w, update);
    CALL(w, j->optimizer == OPT_ADAM ? "rt_adam_step" : "rt_sgd_step", ps, opt);
    LLVMBuildBr(w->b, stepped);
    place(w, stepped);
    CALL(w, "rt_step_end", step);
    CALL(w, "rt_report_loss", step, loss);
    LLVMBuildStore(w->b, LLVMBuildAdd(w->b, step, i64c(w, 1), ""), stepv);
    LLVMBuildBr(w->b, head);

    place(w, done);
    LLVMValueRef elapsed = LLVMBuildFSub(w->b, CALL0(w, "rt_now"), t0, "elapsed");
    if (j->interleave && j->interleave->ncopies > 0)
        CALL(w, "rt_bg_finish", elapsed); /* background samples/s, measured slowdown */
    iters = field(w, w->t_options, o, OPT_ITERATIONS, w->t_i64);
    LLVMValueRef steps = LLVMBuildSelect(w->b, LLVMBuildICmp(w->b, LLVMIntSGT, iters, first, ""),
                                         LLVMBuildSub(w->b, iters, first, ""), i64c(w, 0), "steps");
    LLVMValueRef rank0 = LLVMBuildICmp(
        w->b, LLVMIntEQ, field(w, w->t_options, o, OPT_RANK, w->t_i32), i32c(w, 0), "");
    LLVMValueRef say =
        LLVMBuildAnd(w->b, rank0, LLVMBuildICmp(w->b, LLVMIntSGT, steps, i64c(w, 0), ""), "");
    LLVMBasicBlockRef yes = new_block(w, "throughput");
    LLVMBasicBlockRef test = new_block(w, "test");
    LLVMBuildCondBr(w->b, say, yes, test);
    place(w, yes);
    LLVMValueRef samples =
        LLVMBuildSIToFP(w->b, LLVMBuildMul(w->b, steps, batch(w, 1), ""), w->t_f64, "");
    print(w, "throughput %.1f samples/s (%lld steps of %lld samples in %.3f s)\n",
          (LLVMValueRef[]){LLVMBuildFDiv(w->b, samples, elapsed, ""), steps, batch(w, 1), elapsed},
          4);
    LLVMBuildBr(w->b, test);

    /* for (t = 0; t < tests; t++) forward(..., t, false, &correct) */
    place(w, test);
    LLVMValueRef tests =
        LLVMBuildSDiv(w->b, CALL(w, "rt_data_test_count", data), batch(w, 1), "tests");
    LLVMValueRef correct = entry_alloca(w, w->t_i64, "correct");
    LLVMValueRef tv = entry_alloca(w, w->t_i64, "t");
    LLVMBuildStore(w->b, i64c(w, 0), correct);
    LLVMBuildStore(w->b, i64c(w, 0), tv);
    LLVMBasicBlockRef thead = new_block(w, "tests");
    LLVMBasicBlockRef tbody = new_block(w, "test_batch");
    LLVMBasicBlockRef tdone = new_block(w, "tested");
    LLVMBuildBr(w->b, thead);
    place(w, thead);
    LLVMValueRef t = load(w, w->t_i64, tv, "t");
    LLVMBuildCondBr(w->b, LLVMBuildICmp(w->b, LLVMIntSLT, t, tests, ""), tbody, tdone);
    place(w, tbody);
    CALL0(w, "rt_progress");
    call_own(w, forward,
             (LLVMValueRef[]){pool, data, seed, t, LLVMConstInt(w->t_i1, 0, 0),
                              LLVMBuildBitCast(w->b, correct, w->t_ptr, "")},
             6);
    LLVMBuildStore(w->b, LLVMBuildAdd(w->b, t, i64c(w, 1), ""), tv);
    LLVMBuildBr(w->b, thead);

    place(w, tdone);
    LLVMValueRef total =
        CALL(w, "rt_world_sum",
             LLVMBuildSIToFP(w->b, load(w, w->t_i64, correct, "correct"), w->t_f64, ""));
    rank0 = LLVMBuildICmp(w->b, LLVMIntEQ, field(w, w->t_options, o, OPT_RANK, w->t_i32),
                          i32c(w, 0), "");
    say = LLVMBuildAnd(w->b, rank0, LLVMBuildICmp(w->b, LLVMIntSGT, tests, i64c(w, 0), ""), "");
    yes = new_block(w, "accuracy");
    LLVMBasicBlockRef fin = new_block(w, "finish");
    LLVMBuildCondBr(w->b, say, yes, fin);
    place(w, yes);
    LLVMValueRef tested = LLVMBuildMul(w->b, tests, batch(w, 1), "");
    /* The fraction of correct labels: per token for a language model. */
    LLVMValueRef labels = LLVMBuildMul(w->b, tested, i64c(w, p->labels_per_sample), "");
    print(w, "test accuracy %.4f (%lld samples)\n",
          (LLVMValueRef[]){
              LLVMBuildFDiv(w->b, total, LLVMBuildSIToFP(w->b, labels, w->t_f64, ""), ""), tested},
          2);
    LLVMBuildBr(w->b, fin);
    place(w, fin);
    CALL(w, "rt_data_close", data);
    CALL(w, "rt_pool_free", pool);
    CALL0(w, "rt_finalize");
    LLVMBuildRet(w->b, i32c(w, 0));
    end_fn(w);
}

/* ---- the module ---------------------------------------------------------- */

static void build_types(lw *w)
{
    LLVMContextRef cx = w->cx;
    w->t_void = LLVMVoidTypeInContext(cx);
    w->t_i1 = LLVMInt1TypeInContext(cx);
    w->t_i8 = LLVMInt8TypeInContext(cx);
    w->t_i32 = LLVMInt32TypeInContext(cx);
    w->t_i64 = LLVMInt64TypeInContext(cx);
    w->t_f32 = LLVMFloatTypeInContext(cx);
    w->t_f64 = LLVMDoubleTypeInContext(cx);
    w->t_ptr = LLVMPointerType(w->t_i8, 0);
    /* burstrt.h's structs, as far as the program reads them. */
    w->t_tensor = LLVMStructCreateNamed(cx, "rt_tensor");
    LLVMTypeRef tf[] = {w->t_i32, w->t_i32, LLVMArrayType(w->t_i64, 6), w->t_i64, w->t_ptr};
    LLVMStructSetBody(w->t_tensor, tf, 5, 0);
    w->t_param = LLVMStructCreateNamed(cx, "rt_param");
    LLVMTypeRef pf[] = {w->t_ptr, w->t_ptr, w->t_ptr, LLVMArrayType(w->t_ptr, 2), w->t_ptr};
    LLVMStructSetBody(w->t_param, pf, 5, 0);
    w->t_options = LLVMStructCreateNamed(cx, "rt_options");
    LLVMTypeRef path = LLVMArrayType(w->t_i8, 512), data_path = LLVMArrayType(w->t_i8, 1024);
    LLVMTypeRef f3 = LLVMArrayType(w->t_f32, 3);
    /* iterations, data, data_path, seed, trace_path, checkpoint_dir,
     * checkpoint_every, resume, init_path, init_partial, save_weights, threads,
     * step_timeout, bucket_mb, no_overlap, background, slowdown, loss_scale,
     * loss_scale_init, loss_scale_growth, loss_scale_backoff, loss_scale_interval, rank,
     * world_size, allow_mismatched_launch, eval_data, eval_path, eval_set, augment, nmean,
     * nstd, mean, std, data_workers, skip_bad_data */
    LLVMTypeRef of[] = {w->t_i64, w->t_i32, data_path, w->t_i64, path,     path,      w->t_i64,
                        w->t_i8,  path,     w->t_i8,   path,     w->t_i32, w->t_f64,  w->t_f64,
                        w->t_i8,  w->t_i8,  w->t_f64,  w->t_i32, w->t_f64, w->t_f64,  w->t_f64,
                        w->t_i64, w->t_i32, w->t_i32,  w->t_i8,  w->t_i32, data_path, w->t_i8,
                        w->t_i8,  w->t_i32, w->t_i32,  f3,       f3,       w->t_i32,  w->t_i8};
    LLVMStructSetBody(w->t_options, of, 35, 0);
    w->t_sgd = LLVMStructCreateNamed(cx, "rt_sgd");
    LLVMTypeRef sf[] = {w->t_f32, w->t_f32, w->t_f32, w->t_i8};
    LLVMStructSetBody(w->t_sgd, sf, 4, 0);
    w->t_adam = LLVMStructCreateNamed(cx, "rt_adam");
    LLVMTypeRef af[] = {w->t_f32, w->t_f32, w->t_f32, w->t_f32, w->t_f32};
    LLVMStructSetBody(w->t_adam, af, 5, 0);
    /* name, batch, nunits, data, ndim, sample_shape, in_dtype, vocab, classes,
     * labels_per_sample, adam, sgd, adam_cfg, setup, unit */
    w->t_bg_model = LLVMStructCreateNamed(cx, "rt_bg_model");
    LLVMTypeRef bf[] = {w->t_ptr, w->t_i64, w->t_i32,  w->t_i32, w->t_i32,
                        w->t_ptr, w->t_i32, w->t_i64,  w->t_i64, w->t_i64,
                        w->t_i8,  w->t_sgd, w->t_adam, w->t_ptr, w->t_ptr};
    LLVMStructSetBody(w->t_bg_model, bf, 15, 0);
}

/* p's tensors, parameters, communicators and shards; a background
 * program's names start with its prefix. */
static void build_globals(lw *w)
{
    const cg_program *p = w->p;
    w->globals = arena_alloc(w->a, sizeof *w->globals * (size_t)(p->nvars ? p->nvars : 1));
    for (int k = 0; k < p->nvars; k++) {
        LLVMValueRef g = LLVMAddGlobal(w->mod, w->t_ptr, p->vars[k].name);
        LLVMSetInitializer(g, null_ptr(w));
        LLVMSetLinkage(g, LLVMInternalLinkage);
        w->globals[k] = g;
    }
    int n = p->nsets ? p->nsets : 1;
    LLVMTypeRef ct = LLVMArrayType(w->t_ptr, (unsigned)n),
                it = LLVMArrayType(w->t_i64, (unsigned)n);
    w->comm = LLVMAddGlobal(w->mod, ct, arena_printf(w->a, "%scomm", p->pre));
    LLVMSetInitializer(w->comm, LLVMConstNull(ct));
    w->s0 = LLVMAddGlobal(w->mod, it, arena_printf(w->a, "%ss0", p->pre));
    LLVMSetInitializer(w->s0, LLVMConstNull(it));
    w->nb = LLVMAddGlobal(w->mod, it, arena_printf(w->a, "%snb", p->pre));
    LLVMSetInitializer(w->nb, LLVMConstNull(it));
    LLVMSetLinkage(w->comm, LLVMInternalLinkage);
    LLVMSetLinkage(w->s0, LLVMInternalLinkage);
    LLVMSetLinkage(w->nb, LLVMInternalLinkage);
    w->set_ranks = arena_alloc(w->a, sizeof *w->set_ranks * (size_t)n);
    for (int s = 0; s < p->nsets && !p->bg; s++) {
        LLVMValueRef *r = arena_alloc(w->a, sizeof *r * (size_t)p->sets[s].n);
        for (int k = 0; k < p->sets[s].n; k++)
            r[k] = i32c(w, p->sets[s].ranks[k]);
        char name[32];
        snprintf(name, sizeof name, "set%d_ranks", s);
        w->set_ranks[s] =
            private_global(w, LLVMConstArray(w->t_i32, r, (unsigned)p->sets[s].n), name);
    }
}

struct LLVMOpaqueModule *cg_llvm_build(arena *a, struct LLVMOpaqueContext *cx, const cg_program *p,
                                       cg_program *const *bgs, int nbgs, const char *producer,
                                       bool optimized)
{
    lw w = {.a = a, .p = p, .cx = cx};
    const char *file = p->job->loc.file ? p->job->loc.file->path : p->job->name;
    w.mod = LLVMModuleCreateWithNameInContext(file, cx);
    LLVMSetSourceFileName(w.mod, file, strlen(file));
    w.b = LLVMCreateBuilderInContext(cx);
    w.entry_b = LLVMCreateBuilderInContext(cx);
    w.fns = arena_alloc(w.a, sizeof rt_sigs / sizeof rt_sigs[0] * sizeof *w.fns);
    build_types(&w);
    begin_debug(&w, producer, optimized);
    LLVMTypeRef pf[] = {w.t_ptr};
    w.printf_fn = LLVMAddFunction(w.mod, "printf", LLVMFunctionType(w.t_i32, pf, 1, 1));
    /* The background programs first, as the C writer prints them. */
    w.bg_models = arena_alloc(a, sizeof *w.bg_models * (size_t)(p->job->nbackground + 1));
    for (int k = 0; k <= p->job->nbackground; k++)
        w.bg_models[k] = NULL;
    for (int k = 0; k < nbgs; k++) {
        if (bgs[k]->bg_job < 0 || bgs[k]->bg_job >= p->job->nbackground)
            ice("background program %d is of background job %d", k, bgs[k]->bg_job);
        build_background(&w, bgs[k]);
    }
    build_globals(&w);
    LLVMValueRef setup = build_setup(&w);
    LLVMValueRef forward = build_forward(&w);
    LLVMValueRef backward = build_backward(&w);
    build_main(&w, setup, forward, backward);
    LLVMDIBuilderFinalize(w.di);
    LLVMDisposeDIBuilder(w.di);
    LLVMDisposeBuilder(w.b);
    LLVMDisposeBuilder(w.entry_b);
    return w.mod;
}
