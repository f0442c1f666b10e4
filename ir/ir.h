/*
 * ir.h: the internal header of ir/, the heart of burstc.
 *
 * The IR is what every stage after the front end reads and writes: a module of
 * model graphs (one op per layer, in topological order, values named after
 * the layers), the GPUs and clusters they may run on, and the training jobs
 * that pair them. Values are small integer handles into per-graph tables, so
 * dumps have stable names and rewrites are cheap. The batch dimension of every
 * shape is symbolic (printed `N`): a model is planned for many batch sizes,
 * and all costs are given per sample.
 *
 * The IR has a text form (docs/ir.md) that print.c writes and read.c reads
 * back; verify.c checks a module. Everything is allocated from one arena per
 * compilation and freed at once.
 */
#ifndef BURSTC_IR_H
#define BURSTC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* arena.c: one arena per compilation; nothing is freed one by one. */

typedef struct arena arena;
arena *arena_new(void);
void arena_free(arena *a);
void *arena_alloc(arena *a, size_t size); /* zeroed, aligned for any type */
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
/* Out of memory outside the arena (a scratch array of the size of the input): the
 * convention of every compiler layer (docs/hacking.md), "burstc: out of memory (N
 * bytes)" and exit status 2. */
_Noreturn void out_of_memory(size_t bytes);
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Grows *items (of *cap elements of elem_size) to hold at least need elements. */
void arena_grow(arena *a, void **items, int *cap, int need, size_t elem_size);

/* diag.c: user errors with file:line:col, the source line and a caret. */

typedef struct src_file {
    const char *path;
    const char *text; /* whole file, NUL-terminated */
    size_t len;
    arena *arena;  /* where the line index below lives */
    size_t *marks; /* built on first use: where lines 1, 65, 129, ... start */
    size_t nmarks;
} src_file;

typedef struct src_loc {
    const src_file *file; /* NULL: no location known */
    int line, col;        /* 1-based */
} src_loc;

typedef struct diag_ctx {
    FILE *out; /* where messages go (stderr); NULL: count them only */
    int nerrors;
    int max_errors; /* stop printing after this many (0: no limit) */
} diag_ctx;

void diag_init(diag_ctx *d, FILE *out);
void diag_error(diag_ctx *d, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_verror(diag_ctx *d, src_loc loc, const char *fmt, va_list ap);
void diag_note(diag_ctx *d, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_warning(diag_ctx *d, src_loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The closing count ("3 errors generated."), when there were errors. */
void diag_summary(const diag_ctx *d);
/* Reads a whole file into the arena through ir_file_read() (readfile.h: only
 * regular files, at most IR_FILE_MAX bytes); on failure returns NULL and sets
 * *why to what is wrong ("it is a directory", "No such file or directory"). */
src_file *src_file_read(arena *a, const char *path, const char **why);
src_file *src_file_from_string(arena *a, const char *path, const char *text, size_t len);
/* The text of line `line` (1-based) of f, without its newline, in O(1) amortised
 * time per call; NULL when the file has no such line. */
const char *src_line(const src_file *f, int line, size_t *len);

/* ice.c: internal compiler errors: a bug in burstc, not in the input. Exit
 * status 2. */
_Noreturn void ice_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define ice(...) ice_at(__FILE__, __LINE__, __VA_ARGS__)

/* ops.c: the op table (ops.def): per-op attributes, shape inference,
 * parameters and costs. */

typedef enum ir_opcode {
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) OP_##E,
#include "ops.def"
#undef OP
    OP_COUNT
} ir_opcode;

/* What an op is to the passes (ops.def's class column). */
typedef enum ir_op_class {
    OC_INPUT, /* data fed by the program */
    OC_CONV,  /* convolutions: the planner's conv utilisation curve */
    OC_GEMM,  /* GEMM-shaped layers: the planner's GEMM curve */
    OC_OTHER, /* everything else the planner prices */
    OC_COMM,  /* communication the comm pass inserts (reshard, allreduce) */
} ir_op_class;

typedef enum ir_elem { EL_F32, EL_I32 } ir_elem; /* element type of a value */
typedef enum ir_dtype {
    DT_F32,
    DT_TF32,
    DT_F16,
    DT_BF16,
    DT_COUNT
} ir_dtype; /* job compute type */

#define IR_MAX_RANK 8
#define IR_BATCH    (-1) /* the symbolic batch dimension, always dimension 0 */

/* Limits that the front end, the IR reader and the verifier check the same
 * way (docs/language.md, docs/ir.md). They keep every size computation of
 * the compiler inside int64 and every value something a GPU could hold:
 * with batch <= 2^31 and 4-byte elements, a tensor of IR_MAX_ELEMS elements
 * per sample has at most 2^73 bytes, which doubles hold exactly enough and
 * which checked int64 products reject. */
#define IR_MAX_DIM        ((int64_t)1 << 40) /* one dimension of a shape */
#define IR_MAX_ELEMS      ((int64_t)1 << 40) /* elements per sample of one value */
#define IR_MAX_PARAMS     ((int64_t)1 << 40) /* trainable parameters of one op */
#define IR_MAX_BATCH      ((int64_t)1 << 31) /* a job's or a background job's batch */
#define IR_MAX_ITERATIONS ((int64_t)1 << 40)
#define IR_MAX_GPUS       1000000 /* GPUs of one cluster (nodes * gpus_per_node) */

typedef struct ir_type {
    ir_elem elem;
    int rank;
    int64_t dim[IR_MAX_RANK]; /* dim[0] == IR_BATCH */
} ir_type;

typedef enum ir_attr_kind { AK_INT, AK_PAIR, AK_LIST, AK_REAL, AK_BOOL, AK_REF } ir_attr_kind;

typedef struct ir_int_list {
    int n;
    int64_t *v;
} ir_int_list;

/* Each op's attributes as a struct of typed members (ops.def's A() column):
 * ir_attrs_conv2d has `int64_t channels; int64_t kernel[2]; ...`. */
#define IR_ATTR_MEMBER_INT(key)  int64_t key;
#define IR_ATTR_MEMBER_BOOL(key) bool key;
#define IR_ATTR_MEMBER_PAIR(key) int64_t key[2];
#define IR_ATTR_MEMBER_REAL(key) double key;
#define IR_ATTR_MEMBER_LIST(key) ir_int_list key;
#define IR_ATTR_MEMBER_REF(key)  int key; /* an op id, or -1 for none */
#define A(key, kind, dflt)       IR_ATTR_MEMBER_##kind(key)
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) \
    typedef struct ir_attrs_##name {                                          \
        char unused_; /* a struct may not be empty */                         \
        attrs                                                                 \
    } ir_attrs_##name;
#include "ops.def"
#undef OP
#undef A

/* The attributes of an op: the member named after its opcode's name. */
typedef union ir_op_attrs {
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) ir_attrs_##name name;
#include "ops.def"
#undef OP
} ir_op_attrs;

/* One attribute of an op's spec (ops.def): walked by the builder, the
 * reader, the printer and the verifier, which know attributes by key. */
typedef struct ir_attr_spec {
    const char *key;
    ir_attr_kind kind;
    const char *dflt; /* default as text (a value or an earlier key); NULL: required */
    size_t offset;    /* of the value in ir_op_attrs */
} ir_attr_spec;

typedef struct ir_op_info {
    const char *name;
    int min_inputs, max_inputs; /* max -1: any number */
    ir_op_class cls;
    int nattrs;
    const ir_attr_spec *attrs;
} ir_op_info;

const ir_op_info *ir_op_info_of(ir_opcode op);
/* Returns OP_COUNT when name is not an op. */
ir_opcode ir_op_lookup(const char *name);
/* Classes of layers whose kernels a device runs at different speeds: the
 * planner's classes (passes/plan.h plan_class). A `gpu` may give each its
 * own utilisation curve and memory bandwidth (`efficiency conv = ...`). */
typedef enum ir_kclass { KC_CONV, KC_GEMM, KC_POOL, KC_OTHER, KC_COUNT } ir_kclass;

const char *ir_dtype_name(ir_dtype dt);
bool ir_dtype_lookup(const char *name, ir_dtype *out);
/* conv, gemm, pool, other. */
const char *ir_kclass_name(ir_kclass k);
bool ir_kclass_lookup(const char *name, ir_kclass *out);
int ir_dtype_size(ir_dtype dt);
const char *ir_elem_name(ir_elem el);

/* One attribute value tagged with its kind: how the front end and the
 * reader hand attributes (by key, in any order, partial) to ir_op_add(), and
 * how ir_attr_get() reads one generically. */
typedef struct ir_attr {
    const char *key;
    ir_attr_kind kind;
    union {
        int64_t i;        /* AK_INT, AK_BOOL */
        int64_t pair[2];  /* AK_PAIR */
        ir_int_list list; /* AK_LIST */
        double real;      /* AK_REAL */
        int ref;          /* AK_REF: an op id, or -1 for none */
    } u;
} ir_attr;

/* Costs of one op, per sample of the batch unless noted. Elements, not bytes:
 * the cost model multiplies by the job's dtype size. */
typedef struct ir_cost {
    int64_t params;     /* trainable parameters (not per sample) */
    double fwd_flops;   /* forward FLOPs (multiply-add = 2) */
    double bwd_flops;   /* backward: gradients of inputs and of weights */
    double fwd_read;    /* activation elements read in forward */
    double fwd_written; /* activation elements written in forward */
    double bwd_read;    /* elements read in backward */
    double bwd_written; /* elements written in backward */
    double saved;       /* elements kept from forward for backward */
    int fwd_kernels;    /* kernels launched in forward (per iteration, not per sample) */
    int bwd_kernels;    /* and in backward */
} ir_cost;

/* How a parameter tensor starts (the runtime's rt_init_* functions). */
typedef enum ir_param_init {
    PI_KAIMING, /* uniform in +-1/sqrt(fan_in) (PyTorch's default for conv and linear) */
    PI_NORMAL,  /* normal, standard deviation 0.02 (GPT-2's embeddings) */
    PI_ONE,
    PI_ZERO,
} ir_param_init;

/* One parameter tensor of an op (ops.def's params column). */
#define IR_MAX_OP_PARAMS 4
typedef struct ir_param {
    const char *name; /* the op's name for it: "weight", "bias", "running_mean", ... */
    int ndim;
    int64_t dim[4];
    bool buffer; /* state that is not trained (running statistics): no gradient */
    ir_param_init init;
    int64_t fan_in; /* PI_KAIMING */
} ir_param;

/* Planner decisions attached to an op (absent before planning). */
typedef struct ir_plan {
    int nranks; /* 0: not planned */
    int *ranks; /* world ranks that run the op, ascending */
} ir_plan;

typedef struct ir_op {
    ir_opcode opcode;
    const char *name; /* unique within the graph; the value's name */
    int ninputs;
    int *inputs;   /* op ids of earlier ops */
    ir_op_attrs a; /* its attributes: ir_<name>_attrs(op) (ops.def) */
    /* The attributes as given to ir_op_add() (by key, in any order, partial),
     * until ir_op_check() has checked them into a. */
    int ngiven;
    const ir_attr *given;
    ir_type type; /* the result */
    ir_plan plan;
    src_loc loc; /* where it was written (.burst or .ir) */
} ir_op;

_Noreturn void ir_attrs_mismatch(const ir_op *op, const char *want);

/* ir_conv2d_attrs(op), ir_linear_attrs(op), ...: the typed attributes of an
 * op of that opcode (an internal error for any other). */
#define OP(E, name, min_in, max_in, cls, infer, params, cost, codegen, attrs) \
    static inline const ir_attrs_##name *ir_##name##_attrs(const ir_op *op)   \
    {                                                                         \
        if (op->opcode != OP_##E)                                             \
            ir_attrs_mismatch(op, #name);                                     \
        return &op->a.name;                                                   \
    }
#include "ops.def"
#undef OP

static inline ir_op_class ir_op_class_of(const ir_op *op)
{
    return ir_op_info_of(op->opcode)->cls;
}

/* One entry of a model's weights table (docs/language.md, "Weights"): a
 * tensor of a weights file (a PyTorch state_dict key) and the parameter or
 * buffer it starts, written "layer.param", "layer.param@R" (rows from R on)
 * or either with "^T" (the tensor is the parameter's 2-d transpose). */
typedef struct ir_weight {
    const char *source; /* the tensor's name in the file */
    const char *target; /* as written */
    const char *layer;  /* the op's name: target up to its last '.' */
    const char *param;  /* the op's parameter, or "num_batches_tracked" */
    int64_t row0;       /* -1: the whole parameter */
    bool transposed;
    src_loc loc, target_loc;
} ir_weight;

typedef struct ir_graph {
    const char *name;
    src_loc loc;
    int nops, cap;
    ir_op *ops;    /* topological order: inputs precede users */
    int *index;    /* open-addressing hash of op names to ids (-1: empty) */
    int index_cap; /* a power of two, at least twice nops */
    int nweights, weights_cap;
    ir_weight *weights; /* in source order; names, not op ids, so rewrites keep it */
} ir_graph;

/* Link characteristics in SI units. */
typedef struct ir_link {
    double bandwidth; /* bytes/s, per direction */
    double latency;   /* seconds */
} ir_link;

/* One class's curve on a device; 0 fields: the device-wide ones. */
typedef struct ir_curve {
    double efficiency, half_work; /* both or neither */
    double bandwidth;             /* bytes/s the class's kernels reach */
} ir_curve;

typedef struct ir_gpu {
    const char *name;
    src_loc loc;
    double flops[DT_COUNT]; /* peak FLOP/s per dtype; 0: unsupported */
    double mem_bandwidth;   /* bytes/s */
    double mem_bytes;       /* capacity */
    double launch;          /* kernel launch overhead, seconds */
    /* The utilisation curve of its kernels, when measured for this device: a
	 * kernel of w FLOPs reaches efficiency * w / (w + half_work) of the peak.
	 * 0: the curve calibrated on the A100 (passes/costmodel.c). */
    double efficiency;
    double half_work; /* FLOPs */
    ir_curve cls[KC_COUNT];
} ir_gpu;

typedef struct ir_cluster {
    const char *name;
    src_loc loc;
    int gpu; /* index into module gpus */
    int nodes;
    int gpus_per_node;
    /* The physical cores a node's ranks share (a CPU cluster whose ranks
	 * outnumber its cores); 0: every rank has its own device. */
    int cores;
    /* Seconds a message step waits on a node whose ranks outnumber its
	 * cores (the scheduler's slice; passes/plan.h, plan_step_wait);
	 * has_slice false: PLAN_SLICE_DEFAULT. */
    double slice;
    bool has_slice;
    ir_link intra; /* inside a node (NVLink, PCIe) */
    ir_link inter; /* between nodes, per node (network) */
} ir_cluster;

typedef enum ir_optim { OPT_SGD, OPT_ADAM } ir_optim;

typedef struct ir_background {
    int graph; /* index into module graphs */
    int64_t batch;
} ir_background;

typedef struct ir_job {
    const char *name;
    src_loc loc;
    int graph; /* the foreground model */
    int cluster;
    int64_t batch; /* global batch B */
    ir_dtype dtype;
    ir_optim optimizer;
    double lr, momentum, weight_decay;
    double amplification; /* limit; 0: none; IR_AMP_AUTO: chosen by throughput */
    int64_t iterations;
    const char *data; /* "synthetic" or a dataset name/path */
    int nbackground;
    ir_background *background;
    /* Bound on the foreground's iteration time with background work over its time
     * without (job field `slowdown`, --slowdown): at least 1, IR_SLOWDOWN_DEFAULT
     * unless written (ir_job_defaults), checked by the verifier. */
    double slowdown;
    /* The interleave pass's result; NULL until it runs (or when nothing is placed and
     * nothing refused). */
    struct ir_interleave *interleave;
    /* The schedule pass's result: every rank's order of work; NULL until it runs. */
    struct ir_schedule *schedule;
} ir_job;

#define IR_SLOWDOWN_DEFAULT 1.1

/* One background copy placed by the interleave pass (passes/interleave.c): an
 * independent one-GPU training job of background[job]'s model at its batch, on one
 * rank of the foreground's cluster. Its training step is the sequence of units
 * 0 .. 2n, n = the background graph's op count: unit i < n is op i's forward, unit
 * n + k is op n-1-k's backward, unit 2n the optimizer update. The step is cut into
 * nslices slices: slice s runs units cut[s] .. cut[s+1]-1; cut[0] = 0 and
 * cut[nslices] = 2n + 1. */
typedef struct ir_bg_copy {
    int job;      /* index into the job's background list */
    int rank;     /* the foreground rank (GPU) that hosts it */
    int64_t seed; /* its weights' and data's seed */
    int nslices;
    int *cut;              /* nslices + 1 unit indices, strictly increasing */
    double steps_per_iter; /* predicted background steps per foreground iteration */
    src_loc loc;           /* where it was read (IR text); none when a pass made it */
} ir_bg_copy;

/* A rank that could host a copy of background[job] but does not, and why. */
typedef struct ir_bg_refusal {
    int job, rank;
    const char *why; /* e.g. "needs 12.3 GiB beside the foreground's 70.1 GiB of 80 GiB" */
    src_loc loc;
} ir_bg_refusal;

typedef struct ir_interleave {
    double slice_bound; /* seconds: no slice predicted longer, but one op's alone */
    double fg_time;     /* predicted foreground iteration time without background, s */
    double fg_time_bg;  /* ... with it (fg_time_bg <= slowdown * fg_time) */
    int ncopies;
    ir_bg_copy *copies; /* in rank order, then job order */
    int nrefusals;
    ir_bg_refusal *refusals;
    src_loc loc; /* the section's `interleave JOB {` in IR text */
} ir_interleave;

/* One entry of a rank's schedule (docs/ir.md, "Schedule"): what the rank does
 * next. Compute: the forward or the backward of a non-input, non-comm op.
 * Communication is split-phase: SK_START posts a reshard's forward exchange
 * (its operand's samples to the reshard's ranks) or an allreduce, SK_WAIT
 * completes it; SK_START_BWD / SK_WAIT_BWD do the same for a reshard's
 * backward (the gradient back to the operand's ranks). SK_LOSS is the sum of
 * the loss over every rank, a blocking collective between forward and
 * backward. */
typedef enum ir_sched_kind {
    SK_FWD,
    SK_BWD,
    SK_START,
    SK_WAIT,
    SK_START_BWD,
    SK_WAIT_BWD,
    SK_LOSS,
    SK_COUNT
} ir_sched_kind;

typedef struct ir_sched_entry {
    ir_sched_kind kind;
    int op; /* the op (an id in the job's graph); -1 for SK_LOSS */
    src_loc loc;
} ir_sched_entry;

/* The program that every rank of `ranks` runs (ranks that play the same role
 * share one). */
typedef struct ir_sched_prog {
    ir_plan ranks;
    int n;
    ir_sched_entry *e;
    src_loc loc;
} ir_sched_prog;

typedef struct ir_schedule {
    int nprogs;
    ir_sched_prog *progs; /* by first rank; every rank of the cluster in exactly one */
    src_loc loc;          /* the section's `schedule JOB {` in IR text */
} ir_schedule;

/* "fwd", "bwd", "start", "wait", "start.bwd", "wait.bwd", "loss". */
const char *ir_sched_kind_name(ir_sched_kind k);
bool ir_sched_kind_lookup(const char *name, ir_sched_kind *out);
/* The ranks that send or receive samples when reshard `to` moves a batch of B
 * samples split over the ranks of `from` (shard i on from->ranks[i], the first
 * B mod k shards one sample larger, the runtime's rule) to the same split over
 * to's ranks: every rank that holds a piece of a sample range on one side that
 * another rank holds on the other. Writes them ascending to out (room for
 * from->nranks + to->nranks) and returns how many. */
int ir_reshard_ranks(int64_t B, const ir_plan *from, const ir_plan *to, int *out);

#define IR_AMP_AUTO (-1.0)

/* names.c: a table from names to small integers (ids, indices). */
typedef struct ir_names {
    int cap, n;
    const char **key; /* borrowed: the caller keeps the strings alive */
    int *val;
} ir_names;
int ir_names_get(const ir_names *t, const char *key);               /* -1 if absent */
void ir_names_set(arena *a, ir_names *t, const char *key, int val); /* adds or replaces */

typedef struct ir_module {
    arena *arena;
    ir_names graph_names, gpu_names, cluster_names, job_names; /* first of each name */
    int ngraphs, graphs_cap;
    ir_graph **graphs;
    int ngpus, gpus_cap;
    ir_gpu *gpus;
    int nclusters, clusters_cap;
    ir_cluster *clusters;
    int njobs, jobs_cap;
    ir_job *jobs;
} ir_module;

/* job.c: the one table of job fields; the front end, the reader, the
 * printer, the command line and the verifier all go through it. */

typedef enum ir_job_kind {
    JK_MODEL,         /* a model's name */
    JK_CLUSTER,       /* a cluster's name */
    JK_INT,           /* an integer from min to max */
    JK_REAL,          /* a finite number >= min (0 or 1) */
    JK_DTYPE,         /* f32, tf32, f16, bf16 */
    JK_OPTIMIZER,     /* sgd, adam */
    JK_AMPLIFICATION, /* a number >= 1, auto or none */
    JK_DATA,          /* synthetic, fmnist or a dataset file */
    JK_BACKGROUND,    /* [model @ batch, ...], each batch from min to max */
} ir_job_kind;

typedef struct ir_job_field {
    const char *key;
    size_t offset; /* of its value in ir_job */
    ir_job_kind kind;
    const char *dflt; /* its default as the IR writes it; NULL: required */
    int64_t min, max; /* JK_INT and JK_BACKGROUND's batches; JK_REAL: min only */
    bool setting;     /* in Burst source: a setting of the optimizer, sgd(lr = ...) */
    const char *doc;  /* one line: what it means */
} ir_job_field;

#define IR_JOB_NFIELDS 13
extern const ir_job_field ir_job_fields[IR_JOB_NFIELDS]; /* in the order the IR prints them */
int ir_job_field_find(const char *key);                  /* -1 if no field has the key */
void ir_job_defaults(ir_job *j); /* every field at its default; required ones unset */
/* Sets field k of j from a value as written (an integer, a number, a name or
 * a string, or text from the command line): converts and checks it, and on
 * failure leaves j alone, writes the message to msg and returns false. */
bool ir_job_set_int(ir_job *j, int k, int64_t v, char *msg, size_t n);
bool ir_job_set_real(ir_job *j, int k, double v, char *msg, size_t n);
bool ir_job_set_name(const ir_module *m, ir_job *j, int k, const char *name, char *msg, size_t n);
bool ir_job_set_text(const ir_module *m, ir_job *j, int k, const char *text, char *msg, size_t n);
void ir_job_copy_field(ir_job *dst, const ir_job *src, int k); /* field k of src into dst */
bool ir_job_background_batch_ok(int64_t batch, char *msg, size_t n);
/* "'<key>' must be <what the field holds>": a value of the wrong kind. */
bool ir_job_kind_error(int k, char *msg, size_t n);
/* Reports (at loc) every required field that given[] says was not written. */
bool ir_job_check_required(const ir_job *j, const bool *given, src_loc loc, diag_ctx *d);
/* Every field of j by the rules above, reported at the job. */
bool ir_job_check(const ir_module *m, const ir_job *j, diag_ctx *d);
void ir_job_print(FILE *out, const ir_module *m, const ir_job *j);

/* build.c: constructing modules. */

ir_module *ir_module_new(arena *a);
ir_graph *ir_graph_add(ir_module *m, const char *name, src_loc loc);
int ir_graph_find(const ir_module *m, const char *name); /* -1 if absent */
/* Appends an op; inputs and attrs are copied. Returns its id. Attributes may be
 * partial and in any order: ir_op_check() checks them into op->a. */
int ir_op_add(ir_module *m, ir_graph *g, ir_opcode opcode, const char *name, const int *inputs,
              int ninputs, const ir_attr *attrs, int nattrs, src_loc loc);
int ir_op_find(const ir_graph *g, const char *name); /* -1 if absent */
/* Checks arity and attributes (unknown key, wrong kind, missing required,
 * out of range), fills in defaults, then infers the result type. Reports
 * every problem through d at the op's location; returns false on any error.
 * For OP_INPUT the caller sets op->type first. */
bool ir_op_check(ir_module *m, ir_graph *g, int id, diag_ctx *d);
/* Attribute k of op's spec, read or written generically (by kind and offset). */
ir_attr ir_attr_get(const ir_op *op, int k);
void ir_attr_set(ir_op *op, int k, const ir_attr *v);
/* Renumbers op's references to other ops (REF attributes) through map. */
void ir_op_map_refs(ir_op *op, const int *map);
int ir_gpu_add(ir_module *m, const ir_gpu *gpu);
int ir_cluster_add(ir_module *m, const ir_cluster *c);
int ir_job_add(ir_module *m, const ir_job *j);
int ir_gpu_find(const ir_module *m, const char *name);
int ir_cluster_find(const ir_module *m, const char *name);
int ir_job_find(const ir_module *m, const char *name);

/* ops.c */

/* Infers op's result type from its inputs; on mismatch reports through d and
 * returns false. */
bool ir_infer(const ir_graph *g, ir_op *op, diag_ctx *d);
ir_cost ir_op_cost(const ir_graph *g, const ir_op *op);
/* op's parameter tensors (inputs inferred), in the op's order; returns how
 * many (at most IR_MAX_OP_PARAMS). */
int ir_op_param_list(const ir_graph *g, const ir_op *op, ir_param *out);
/* Trainable parameters of op (the elements of its non-buffer parameters), or
 * -1 when they pass IR_MAX_PARAMS; ir_op_cost() reports the same count. */
int64_t ir_op_params(const ir_graph *g, const ir_op *op);
int64_t ir_type_elems_per_sample(const ir_type *t); /* product of dims 1.., -1 past the limit */
void ir_type_to_str(const ir_type *t, char *buf, size_t n);
bool ir_type_equal(const ir_type *a, const ir_type *b);

/* print_value.c: a real in the shortest form that reads back exactly; a
 * string quoted. */
void ir_print_real(FILE *out, double v);
void ir_print_string(FILE *out, const char *s);

/* weights.c: a graph's weights table. ir_weight_add() splits the target;
 * ir_weights_check() checks the table against the graph's ops (every
 * target a parameter of a layer, each tensor and each target once) once
 * the graph is complete; errors at the entries, through d. */
void ir_weight_add(ir_module *m, ir_graph *g, const char *source, const char *target, src_loc loc,
                   src_loc target_loc);
bool ir_weights_check(const ir_graph *g, diag_ctx *d);
/* Whether s can be a name in the table (printable ASCII, no '"' or '\\'):
 * what a Burst string holds. */
bool ir_weight_name_ok(const char *s);

/* print.c */

void ir_print_type(FILE *out, const ir_type *t);
void ir_print_op(FILE *out, const ir_graph *g, const ir_op *op);
void ir_print_graph(FILE *out, const ir_module *m, const ir_graph *g);
void ir_print_module(FILE *out, const ir_module *m);
/* A job's schedule section (j->schedule, not NULL), as ir_print_module writes it. */
void ir_print_schedule(FILE *out, const ir_module *m, const ir_job *j);
/* A job's interleave section (j->interleave, not NULL), as ir_print_module writes it. */
void ir_print_interleave(FILE *out, const ir_module *m, const ir_job *j);
/* The module's text in a malloc'd string (the caller frees it); *len gets its length. */
char *ir_print_module_to_string(const ir_module *m, size_t *len);

/* read.c: the text form back into a module; errors go through d. */

ir_module *ir_read(arena *a, const src_file *f, diag_ctx *d);

/* verify.c: structural checks of a whole module (after a reader or a pass). */

bool ir_verify(const ir_module *m, diag_ctx *d);

/* schedule.c: a job's schedule (j->schedule, not NULL) against its planned
 * graph: coverage, order within each program, and that the programs played
 * together cannot deadlock (docs/ir.md, "Schedule"). */
bool ir_verify_schedule(const ir_module *m, const ir_job *j, diag_ctx *d);

#endif
