/*
 * codegen.h: the internal header of codegen/, the last stage of burstc.
 *
 * Code generation is one analysis and a writer per output language. lower.c
 * walks the planned IR of a job once and builds a cg_program: the program as
 * data, independent of how it is printed. It holds the rank sets, the
 * variables (every tensor and parameter of this rank's shard, with shapes),
 * and three bodies: setup (communicators, tensors, parameters), forward and
 * backward, each a tree of statements: runtime calls with typed arguments,
 * rank-set guards, graph segments. op_calls.c says which runtime calls each
 * op makes (ops.def's codegen column). write_c.c prints a cg_program as a C
 * program that links libburstrt; llvm_emit.c builds the same data as an LLVM
 * module (with debug info that points at the .burst source) and
 * llvm_target.c writes it as LLVM IR text or an object file. Only the
 * llvm_*.c files include llvm-c/.
 */
#ifndef BURSTC_CODEGEN_H
#define BURSTC_CODEGEN_H

#include "ir.h"

/* A size in a shape: k, or k times this rank's shard of a rank set, or the
 * result of a runtime call (that returns a size). */
typedef struct cg_size {
    int64_t k;
    int set;                    /* >= 0: k * (this rank's samples of rank set `set`) */
    const struct cg_call *call; /* non-NULL: the call's result */
} cg_size;

typedef enum cg_arg_kind {
    CA_NULL,        /* no tensor */
    CA_VAR,         /* a tensor variable (var) */
    CA_PARAM,       /* a parameter's value, or its gradient (grad) */
    CA_PARAM_DATA,  /* the float data of a parameter's gradient */
    CA_PARAM_NUMEL, /* the element count of a parameter's gradient */
    CA_INT,         /* i */
    CA_F32,         /* r, as a float */
    CA_BOOL,        /* i (0 or 1) */
    CA_STR,         /* s */
    CA_COMM,        /* the communicator of rank set `set` */
    CA_SHARD_FIRST, /* this rank's first sample in rank set `set` */
    CA_SHARD_SIZE,  /* this rank's number of samples in rank set `set` */
    CA_SHARD_END,   /* first + size */
    CA_TEST_FIRST,  /* step x the global batch + first: a test batch's shard */
    CA_BATCH,       /* the global batch, times i */
    CA_POOL,        /* the step function's memory pool */
    CA_DATA,        /* the data source */
    CA_SEED,        /* the run's seed */
    CA_STEP,        /* the step number */
    CA_CONST,       /* a constant struct `s` of n integers (vals), passed by address */
    CA_ARRAY,       /* an array of n tensors (vars; -1: none), const when is_const */
} cg_arg_kind;

typedef struct cg_arg {
    cg_arg_kind kind;
    int var; /* CA_VAR, CA_PARAM* */
    bool grad;
    int set;
    int64_t i;
    double r;
    const char *s;
    int n;
    const int64_t *vals;
    const int *vars;
    bool is_const;
} cg_arg;

/* Where a call's result goes. */
typedef enum cg_result {
    CR_NONE,
    CR_LOSS,    /* added to the step's loss */
    CR_CORRECT, /* added to the count of correct predictions */
} cg_result;

typedef struct cg_call {
    const char *fn; /* the runtime function (runtime/burstrt.h) */
    int nargs;
    cg_arg *args;
    cg_result result;
} cg_call;

typedef enum cg_cond_kind {
    CC_MEMBER,  /* this rank is in rank set `set` */
    CC_TRAIN,   /* a training step (not evaluation) */
    CC_CORRECT, /* the caller counts correct predictions */
    CC_EXISTS,  /* tensor variable `var` exists on this rank */
    CC_UNIT,    /* a background step's unit argument is op `var` (cg_lower_background) */
} cg_cond_kind;

typedef struct cg_cond {
    cg_cond_kind kind;
    int set, var;
} cg_cond;

typedef struct cg_block {
    int n, cap;
    struct cg_stmt *s;
} cg_block;

typedef enum cg_stmt_kind {
    CS_CALL,    /* a runtime call */
    CS_IF,      /* then if the condition holds, else orelse */
    CS_SCOPE,   /* a nested scope: one op's part of a graph segment */
    CS_SEGMENT, /* a graph segment (see lower.c): body, captured and replayed on GPUs */
    CS_NEW,     /* allocate tensor variable var (its var says shape and rank set) */
    CS_VIEW,    /* var = a view of tensor src (-1: none) with var's shape */
    CS_PARAM,   /* create parameter var (its var says name, shape, rank set) */
} cg_stmt_kind;

typedef struct cg_stmt {
    cg_stmt_kind kind;
    int op;              /* the op it belongs to (its source location), -1: none */
    const char *comment; /* what it is, for a reader of the output; may be NULL */
    cg_call call;        /* CS_CALL */
    cg_cond cond;        /* CS_IF */
    cg_block body;       /* CS_IF (then), CS_SCOPE, CS_SEGMENT */
    cg_block orelse;     /* CS_IF */
    int seg, set;        /* CS_SEGMENT: its number, its rank set */
    bool forward;        /* CS_SEGMENT: in forward (else backward) */
    int var, src;        /* CS_NEW, CS_VIEW, CS_PARAM */
} cg_stmt;

typedef enum cg_var_kind { CV_TENSOR, CV_PARAM } cg_var_kind;

/* A variable of the program: one tensor or parameter of this rank. */
typedef struct cg_var {
    const char *name; /* an identifier, unique in the program */
    cg_var_kind kind;
    int op;  /* the op it belongs to */
    int set; /* the rank set whose members hold it */
    ir_elem elem;
    int rank;
    cg_size dim[IR_MAX_RANK];
    const char *param_name; /* CV_PARAM: the op's name and its own ("fc1.weight") */
    bool buffer;            /* CV_PARAM: state without a gradient (running statistics) */
    bool own;               /* CV_TENSOR: an op's own f32 buffer (saved statistics), not an
                               activation: never stored in 16 bits (rt_storage_dtype) */
    const char *comment;
} cg_var;

typedef struct cg_rankset {
    int n;
    const int *ranks;
} cg_rankset;

/* A job's training program, as data. */
typedef struct cg_program {
    const ir_module *m;
    const ir_job *job;
    const ir_graph *g;
    int world; /* ranks of the job's cluster */
    int nsets;
    cg_rankset *sets;
    int *set_of; /* per op: the rank set it runs on */
    int nvars, vars_cap;
    cg_var *vars;
    int nsegs;
    cg_block setup, forward, backward;
    /* What the driver (main) needs: the data the job reads. */
    int sample_input, label_input; /* ops */
    int64_t classes, vocab, labels_per_sample;
    bool fmnist;      /* Fashion-MNIST (background copies of its model read it too) */
    const char *data; /* the job's source, as --data spells it (the program's default) */
    /* A background job's program (cg_lower_background): names start with pre, every
     * op runs on this rank alone (rt_comm_self), forward and backward run one op per
     * call, guarded by CC_UNIT. */
    bool bg;
    bool bg_fmnist;  /* it reads the foreground's Fashion-MNIST (else synthetic samples) */
    int bg_job;      /* its index in the job's background list */
    const char *pre; /* "bgK_"; "" for the foreground */
} cg_program;

/* How a program is built: the command's options (NULL: the defaults). */
typedef struct cg_options {
    /* Every reshard one blocking rt_reshard each way, at the reshard op's place in
     * graph order: the order before split-phase resharding, kept to measure it against
     * (burstc build --blocking-reshard). */
    bool blocking_reshard;
} cg_options;

/* lower.c */

/* Builds job `job`'s program from its planned graph (every op carries the
 * rank set that runs it; ops without one run on every rank). Reports what
 * the runtime cannot do through d and returns NULL. Allocated in a. */
cg_program *cg_lower(arena *a, const ir_module *m, int job, const cg_options *o, diag_ctx *d);
/* The one-rank training program of job `job`'s background job k (its model at its
 * batch, the job's optimizer), for the executor of GPU multiplexing (docs/runtime.md,
 * "Background work"): unit i < n is op i's forward, unit n + k op n-1-k's backward. */
cg_program *cg_lower_background(arena *a, const ir_module *m, int job, int k, diag_ctx *d);
/* The programs of job `job`'s background jobs that have copies in its interleave
 * section (job->interleave), each once, in the order of the job's background list:
 * *out gets the array (allocated in a). Returns how many, or -1 (reported through d). */
int cg_lower_backgrounds(arena *a, const ir_module *m, int job, cg_program ***out, diag_ctx *d);

/* program.c: building a cg_program. */

cg_stmt *cg_add(arena *a, cg_block *b, cg_stmt_kind kind, int op, const char *comment);
/* A call statement fn(args...) appended to b. */
cg_stmt *cg_add_call(arena *a, cg_block *b, int op, const char *fn, const cg_arg *args, int nargs);
#define CG_CALL(a, b, op, fn, ...)                     \
    cg_add_call(a, b, op, fn, (cg_arg[]){__VA_ARGS__}, \
                (int)(sizeof((cg_arg[]){__VA_ARGS__}) / sizeof(cg_arg)))
/* A call as a value (for a size), not a statement. */
const cg_call *cg_call_value(arena *a, const char *fn, const cg_arg *args, int nargs);
int cg_var_add(arena *a, cg_program *p, const cg_var *v);

static inline cg_arg cg_null(void)
{
    return (cg_arg){.kind = CA_NULL};
}
/* A tensor variable, or no tensor for var -1. */
static inline cg_arg cg_var_arg(int var)
{
    return var < 0 ? cg_null() : (cg_arg){.kind = CA_VAR, .var = var};
}
static inline cg_arg cg_param(int var, bool grad)
{
    return var < 0 ? cg_null() : (cg_arg){.kind = CA_PARAM, .var = var, .grad = grad};
}
static inline cg_arg cg_int(int64_t i)
{
    return (cg_arg){.kind = CA_INT, .i = i};
}
static inline cg_arg cg_f32(double r)
{
    return (cg_arg){.kind = CA_F32, .r = r};
}
static inline cg_arg cg_bool(bool b)
{
    return (cg_arg){.kind = CA_BOOL, .i = b};
}
static inline cg_arg cg_str(const char *s)
{
    return (cg_arg){.kind = CA_STR, .s = s};
}
static inline cg_arg cg_set_arg(cg_arg_kind kind, int set)
{
    return (cg_arg){.kind = kind, .set = set};
}
static inline cg_arg cg_plain(cg_arg_kind kind)
{
    return (cg_arg){.kind = kind};
}

/* op_calls.c: the runtime calls of each op (ops.def's codegen column). */

/* What lower.c knows of op i when it asks for the op's calls. */
typedef struct cg_op_env {
    arena *a;
    cg_program *p;
    int op;
    int set;     /* its rank set */
    int layer;   /* its number among the model's own ops: keys weights and dropout masks */
    int y, dy;   /* its value and gradient variables (-1: none) */
    int *x;      /* per operand: the operand's value variable */
    int *dx;     /* per operand: where the operand's gradient goes (-1: nowhere) */
    int *params; /* its parameters' variables, in the op's order (ir_op_param_list) */
    const ir_param *pinfo; /* and what they are */
    int nparams;
    int tied; /* a linear layer tied to an embedding: the embedding's weight, else -1 */
    bool first_loss;
    bool y_view;    /* flatten, reshape: y is a view of x[0] (lower.c made it) */
    bool dy_view;   /* flatten, reshape: dy is a view of dx[0] (lower.c made it) */
    int reshard_id; /* a split-phase reshard: its forward's id (the backward's is one
                       more); -1: one blocking rt_reshard each way */
} cg_op_env;

/* What an op contributes to the program: statements for setup (its extra
 * tensors), forward and backward (inside its rank-set guard), and whether
 * its forward and backward may run inside a graph segment. */
typedef struct cg_op_code {
    cg_block setup, views, fwd, bwd;
    /* An allreduce with complete = %w: its completion before w's backward. A split-phase
     * reshard: fwd and bwd start its two exchanges, wait and bwd_wait complete them. */
    cg_block wait, bwd_wait;
    bool graphable;
    bool trains; /* its backward writes parameter gradients (its own or a tied one) */
} cg_op_code;

void cg_op_calls(const cg_op_env *env, cg_op_code *out);

/* write_c.c */

/* Prints p as a C program that links libburstrt, with the programs of the
 * background jobs that have copies (cg_lower_background) before its own code. */
void cg_write_c(FILE *out, const cg_program *p, cg_program *const *bgs, int nbgs);

/* c_target.c */

/* Writes the C program for job `job` of m to out: cg_lower() then
 * cg_write_c(). Returns false (after reporting through d) when the plan
 * cannot be a program. */
bool cg_emit_c(FILE *out, const ir_module *m, int job, const cg_options *o, diag_ctx *d);

/* llvm_emit.c */

struct LLVMOpaqueContext;
struct LLVMOpaqueModule;
/* Builds p as an LLVM module in context cx: the C writer's program, with a
 * compile unit for the job's file, a subprogram per function and every
 * layer's statements at the layer's line; the background programs bgs
 * (cg_lower_backgrounds) go into the same module, as the C writer prints
 * them before the foreground's code. Scratch memory comes from a. */
struct LLVMOpaqueModule *cg_llvm_build(arena *a, struct LLVMOpaqueContext *cx, const cg_program *p,
                                       cg_program *const *bgs, int nbgs, const char *producer,
                                       bool optimized);

/* llvm_target.c */

typedef enum cg_llvm_kind {
    CG_LLVM_IR,  /* textual LLVM IR (.ll) */
    CG_LLVM_OBJ, /* an object file for the target */
} cg_llvm_kind;

typedef struct cg_llvm_options {
    cg_llvm_kind kind;
    const char *triple;   /* the target; NULL: the host */
    int opt_level;        /* 0-3: LLVM's default<ON> pipeline and code generation level */
    bool verify;          /* LLVMVerifyModule (Debug builds always verify) */
    const char *producer; /* the compile unit's producer ("burstc 0.1.0") */
    cg_options cg;        /* what the program is, as for C */
} cg_llvm_options;

/* The LLVM writer is a module of its own (burstc-llvm.so, llvm_emit.c and
 * llvm_target.c, the only code that links libLLVM), so that the commands
 * that write no LLVM do not pay for loading it: relocating libLLVM-14 takes
 * about 20 ms of every process. llvm_load.c loads it on first use and calls
 * it through this table, which the module exports as cg_llvm_module. */
#define CG_LLVM_ABI 1 /* bumped whenever this table or the options change */
typedef struct cg_llvm_entry {
    int abi;
    bool (*check_target)(const char *triple, diag_ctx *d);
    bool (*emit)(FILE *out, const ir_module *m, int job, const cg_llvm_options *o, diag_ctx *d);
} cg_llvm_entry;

/* llvm_load.c */

/* False (reported through d) when LLVM knows no target for triple (NULL:
 * the host's), or the LLVM writer cannot be loaded. */
bool cg_llvm_check_target(const char *triple, diag_ctx *d);

/* Writes job `job`'s program to out as o asks: cg_lower(), cg_llvm_build(),
 * verification, optimisation, then text or object code. Returns false
 * (after reporting through d) when the plan cannot be a program, the
 * target cannot be built for or the LLVM writer cannot be loaded; out then
 * holds nothing of it. */
bool cg_emit_llvm(FILE *out, const ir_module *m, int job, const cg_llvm_options *o, diag_ctx *d);

#endif
