/*
 * frontend.h: the internal header of frontend/, the Burst language front end.
 *
 * The front end turns .burst files into an ir_module: load.c reads a file and
 * everything it imports (each file once, cycles reported) into a program of
 * syntax trees (ast.h, built by grammar/); dump.c prints those trees for
 * `--emit=ast`; eval.c evaluates constant expressions (integers with
 * overflow checks, reals, units) and funnels every message through one
 * de-duplicating reporter, so an error inside a block expanded a hundred
 * times is printed once; model.c expands blocks and loops and lowers models
 * into IR graphs, after count.c has counted what a block call would cost
 * (so that 2^30 ops from 30 lines is an error at once); decl.c lowers
 * gpus, clusters and jobs and drives the whole.
 * Every error is reported and checking goes on; nothing here stops at the
 * first one.
 */
#ifndef BURSTC_FRONTEND_H
#define BURSTC_FRONTEND_H

#include "ast.h"

/* The public interface, used by tools/main.c. */

/* The parsed files: the one named and, before it, all it imports. */
typedef struct fe_program {
    int nfiles, cap;
    fe_file **files; /* dependencies first; the root file last */
} fe_program;

/* Reads path (or, when text is not NULL, takes text as its contents) and all
 * it imports. Syntax and import errors go through d; returns NULL only when
 * the root file cannot be read. */
fe_program *fe_load(arena *a, const char *path, const char *text, diag_ctx *d);
/* Prints the syntax trees of a program, after imports and before expansion. */
void fe_dump_program(FILE *out, const fe_program *p);
/* `--emit=ast`: fe_load + fe_dump_program; false if there were errors (the
 * trees are printed all the same, as far as they parsed). */
bool fe_dump_ast(FILE *out, arena *a, const char *path, diag_ctx *d);
/* Checks a program and lowers it into a module; errors go through d. */
ir_module *fe_lower(arena *a, const fe_program *p, diag_ctx *d);
/* fe_load + fe_lower. Returns NULL, or a module; check d->nerrors. */
ir_module *fe_compile(arena *a, const char *path, diag_ctx *d);
ir_module *fe_compile_string(arena *a, const char *path, const char *text, diag_ctx *d);

/* The most ops one model may expand to. */
#define FE_MAX_OPS   100000
/* The most statements and loop iterations the expansion of one model may
 * run (10 per op at the op limit): nested loops whose bodies make no ops
 * (`for` 40 deep of 2 iterations each) end in an error, not in 2^40 steps. */
#define FE_MAX_STEPS (10 * FE_MAX_OPS)
/* The most expression terms (literals, names, operators, list items) the
 * expansion of one model may evaluate (10 per op at the op limit): a block
 * with a long constant list, called many times over, ends in an error, not
 * in gigabytes of copies of it. */
#define FE_MAX_TERMS (10 * FE_MAX_OPS)
/* How deeply the lowering of a model may recurse: blocks within blocks (at
 * most 64), loops within loops and calls within calls, all counted together.
 * Each of those is bounded on its own too (FE_MAX_NEST), but a block may
 * expand another 64 times over. */
#define FE_MAX_DEPTH 1000

/* eval.c: values, units, constant expressions, reporting. */

typedef enum fe_val_kind {
    V_ERR,    /* evaluation failed; already reported */
    V_INT,    /* i */
    V_REAL,   /* r */
    V_BOOL,   /* i */
    V_QTY,    /* r in SI units (bytes, bytes/s, s, FLOP/s), dim */
    V_STR,    /* s */
    V_LIST,   /* n, items */
    V_AT,     /* items[0] @ items[1] */
    V_TENSOR, /* op: an op id of the graph being built; -2: poisoned */
    V_NAME,   /* s: an identifier that names no constant (job fields) */
    V_CALL,   /* expr: a call, left for the caller (job optimizer) */
    V_BLOCK,  /* s: a block's name */
} fe_val_kind;

typedef enum fe_dim { DIM_BYTES, DIM_RATE, DIM_TIME, DIM_FLOPS } fe_dim;

typedef struct fe_val {
    fe_val_kind kind;
    int64_t i;
    double r;
    fe_dim dim;
    const char *s;
    int n;
    struct fe_val *items;
    int op;
    const fe_expr *expr;
    src_loc loc;
} fe_val;

/* What a name is bound to in a scope. */
typedef enum fe_bind_kind { B_VALUE, B_BLOCK } fe_bind_kind;

typedef struct fe_scope fe_scope;

typedef struct fe_binding {
    const char *name;
    fe_bind_kind kind;
    fe_val val;            /* B_VALUE: a constant or a tensor */
    const fe_block *block; /* B_BLOCK */
    fe_scope *def_scope;   /* B_BLOCK: where it was defined */
    bool expanding;        /* B_BLOCK: being expanded now (recursion) */
    bool counting;         /* B_BLOCK: being counted now (count.c) */
    src_loc loc;           /* the definition */
    struct fe_binding *next;
} fe_binding;

struct fe_scope {
    fe_scope *parent;
    fe_binding *bindings; /* newest first */
    int nbound, table_cap;
    int nlayers;        /* of nbound, the layers (the blocks defined here cannot see them) */
    fe_binding **table; /* once there are more than a few: the same, oldest first */
    ir_names index;     /* ... and name -> the newest of that name in table */
    bool boundary;      /* a block body: outer tensors are not visible */
    bool loop;          /* a loop iteration: assignments update outer names */
    const char *prefix; /* IR names here are prefix + name + suffix */
    const char *suffix; /* NULL in a loop iteration until needed (model.c) */
    int64_t iter;       /* a loop iteration: its index */
};

typedef struct fe_names fe_names;

typedef struct fe_ctx {
    arena *arena;
    diag_ctx *diag;
    ir_module *module;
    fe_scope *global;  /* top-level lets and blocks */
    bool last_printed; /* whether the last error was shown (for notes) */
    ir_names seen;     /* messages already shown, for de-duplication */
    ir_names sites;    /* places and texts of errors reported (fe_error) */
    int64_t failures;  /* calls of fe_error and failed op checks, shown or not */
    /* Lowering of the current model (model.c). */
    ir_graph *graph;
    int64_t nops;
    int64_t steps;          /* statements run and loop iterations, against FE_MAX_STEPS */
    int64_t terms;          /* expression terms evaluated, against FE_MAX_TERMS */
    bool too_many_ops;      /* the model passed FE_MAX_OPS or FE_MAX_STEPS: stop */
    int depth;              /* block expansion depth */
    int nest;               /* recursion depth of the lowering (FE_MAX_DEPTH) */
    struct fe_names *names; /* IR names used in the graph */
    /* Counting a block call's ops without expanding it (count.c). */
    int quiet;                   /* > 0: fe_error reports nothing and counts quiet_errors */
    int64_t quiet_errors;        /* errors that quiet kept back */
    ir_names count_memo;         /* block binding and parameter values -> a slot of count_vals */
    struct fe_count *count_vals; /* the counts of each remembered body */
    int count_n, count_cap;      /* count_vals used, allocated */
    int64_t count_steps;         /* statements and iterations the counting walked, this model */
    int64_t count_terms;         /* expression terms it evaluated, this model */
    int count_nest;              /* recursion depth of the walk (FE_MAX_DEPTH) */
    int count_depth;             /* blocks within blocks in the walk (64, as in the expansion) */
} fe_ctx;

/* Reports an error, once per place and text: the copies of a block or loop
 * body made by an expansion stay quiet after the first. */
void fe_error(fe_ctx *c, src_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* True the first time it is called with these arguments: a caller about to
 * report `what` about name at loc works out a costly message (a suggestion)
 * only once, however many copies of the body an expansion makes. */
bool fe_once(fe_ctx *c, src_loc loc, const char *what, const char *name);
void fe_note(fe_ctx *c, src_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Runs ir_op_check with its messages de-duplicated like fe_error's. */
bool fe_op_check(fe_ctx *c, int id);

fe_binding *fe_lookup(fe_scope *s, const char *name);
fe_binding *fe_lookup_local(fe_scope *s, const char *name);
fe_binding *fe_bind(fe_ctx *c, fe_scope *s, const char *name, src_loc loc);
/* fe_bind for a layer (a tensor, or a poisoned one): counted in s->nlayers. */
fe_binding *fe_bind_layer(fe_ctx *c, fe_scope *s, const char *name, src_loc loc, fe_val v);
/* The closest of a set of names to name, or NULL if none is close. */
const char *fe_closest(const char *name, const char *const *cands, int n);
/* "; did you mean 'x'?" for an undefined name, or "". */
const char *fe_suggest_name(fe_ctx *c, fe_scope *s, const char *name);

/* Evaluates e in scope s. Names that are bound to nothing become V_NAME when
 * names_ok, else an "undefined name" error; calls become V_CALL when
 * calls_ok. Errors are reported; the result is then V_ERR. */
fe_val fe_eval(fe_ctx *c, fe_scope *s, const fe_expr *e, bool names_ok, bool calls_ok);
/* An integer (V_INT or V_BOOL) or an error naming what: false on error. */
bool fe_eval_int(fe_ctx *c, fe_scope *s, const fe_expr *e, const char *what, int64_t *out);
const char *fe_val_desc(const fe_val *v);
const char *fe_dim_name(fe_dim d);

/* block.c */

/* The named arguments of a call, for finding one by name or a repeat:
 * searched in place when few, through a table when many, so that a call or
 * a block with a hundred thousand named arguments costs linear time. */
typedef struct fe_named {
    const fe_arg *args;
    int n;
    const fe_arg **arr; /* when n > FE_FEW: the named arguments in order */
    ir_names index;     /* key -> first in arr */
} fe_named;

void fe_named_init(fe_ctx *c, fe_named *l, const fe_arg *args);
/* The first argument named key, or NULL. */
const fe_arg *fe_named_get(const fe_named *l, const char *key);

/* The same for a block's parameters. */
typedef struct fe_params {
    const fe_param *params;
    const fe_param **arr;
    ir_names index;
} fe_params;

void fe_params_init(fe_ctx *c, fe_params *t, const fe_param *params);
/* The first parameter (or input) named name, or NULL. */
const fe_param *fe_params_get(const fe_params *t, const char *name);

/* Binds a block definition in s, after checking it. */
void fe_define_block(fe_ctx *c, fe_scope *s, const fe_block *b);

/* model.c */

void fe_lower_model(fe_ctx *c, const fe_item *model);

/* count.c */

/* What expanding a block call costs: the ops it makes, the steps it runs
 * (statements and loop iterations) and the expression terms it evaluates,
 * as FE_MAX_OPS, FE_MAX_STEPS and FE_MAX_TERMS count them. */
typedef struct fe_count {
    int64_t ops, steps, terms;
} fe_count;

/* ops of a count that is not known: an error on the way (the expansion
 * reports it), recursion, or a walk that ran FE_MAX_STEPS. */
#define FE_COUNT_UNKNOWN (-1)
/* A count of at least INT64_MAX: the sums saturate there. */
#define FE_COUNT_HUGE    INT64_MAX

/* What expanding block b with the parameters bound in bs (by
 * fe_expand_block, inputs included) would cost, without expanding it; the
 * count of a body is remembered per block and parameter values. Reports
 * nothing. */
fe_count fe_count_expansion(fe_ctx *c, fe_binding *b, fe_scope *bs);

/* decl.c */

void fe_lower_gpu(fe_ctx *c, const fe_item *it);
void fe_lower_cluster(fe_ctx *c, const fe_item *it);
void fe_lower_job(fe_ctx *c, const fe_item *it);

#endif
