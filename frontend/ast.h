/*
 * ast.h: the syntax tree of the Burst language.
 *
 * grammar/burst.y builds these nodes while it parses one file; frontend/
 * resolves imports, checks names, expands blocks and loops and lowers the
 * result into the IR (ir/ir.h). The tree mirrors the source closely (it is
 * what `burstc --emit=ast` prints): nothing is evaluated or resolved here.
 * Every node carries the src_loc of its first token. Sequences are singly
 * linked through `next`, in source order. Everything lives in the
 * compilation's arena.
 */
#ifndef BURSTC_FE_AST_H
#define BURSTC_FE_AST_H

#include "../ir/ir.h"

typedef enum fe_expr_kind {
    EX_INT,    /* i: an integer literal */
    EX_REAL,   /* r: a real literal */
    EX_QTY,    /* r and unit: a number with a unit, `80 GiB`, `300 GB/s` */
    EX_STR,    /* s: a string literal */
    EX_BOOL,   /* i: true (1) or false (0) */
    EX_NAME,   /* s: an identifier (`in` included) */
    EX_NEG,    /* lhs: unary minus */
    EX_BINARY, /* op ('+', '-', '*', '/', '%', '@'), lhs, rhs */
    EX_CALL,   /* s: callee; args */
    EX_LIST,   /* items: `[a, b, ...]` */
    EX_ERROR,  /* what stood here nested too deeply; already reported */
} fe_expr_kind;

/* How deeply expressions, and loops and blocks, may nest in the source. The
 * parser checks it (an error at the node that passes it), so that every walk
 * over the tree (evaluation, lowering, --emit=ast) recurses a bounded number
 * of levels. A chain of left-associative operators (`1 + 2 + ... + n`) does
 * not nest: the walks follow its left spine in a loop. */
#define FE_MAX_NEST      256
/* Loops and blocks nest less: every name lookup walks the scopes they open,
 * so their depth multiplies the cost of every statement run (and no model
 * nests loops more than a few deep). */
#define FE_MAX_STMT_NEST 32

typedef struct fe_expr fe_expr;
typedef struct fe_arg fe_arg;

/* One argument of a call: positional (key NULL) or `key = value`. */
struct fe_arg {
    const char *key;
    fe_expr *value;
    src_loc loc;
    fe_arg *next;
};

struct fe_expr {
    fe_expr_kind kind;
    src_loc loc;
    int64_t i;          /* EX_INT, EX_BOOL */
    double r;           /* EX_REAL, EX_QTY */
    const char *s;      /* EX_STR, EX_NAME, EX_CALL */
    const char *unit;   /* EX_QTY */
    int op;             /* EX_BINARY */
    fe_expr *lhs, *rhs; /* EX_NEG (lhs), EX_BINARY */
    fe_arg *args;       /* EX_CALL */
    fe_expr *items;     /* EX_LIST, linked through next */
    fe_expr *next;      /* the next item of an enclosing list */
    int nest;           /* levels of recursion a walk over it needs (FE_MAX_NEST) */
};

/* A parameter of a block: a tensor input (is_input) or an integer parameter
 * with an optional default. */
typedef struct fe_param {
    const char *name;
    bool is_input;
    fe_expr *dflt; /* NULL: required */
    src_loc loc;
    struct fe_param *next;
} fe_param;

typedef struct fe_stmt fe_stmt;

/* `block name(in1, in2; p, q = 3) { ... return e }`; without ';' every
 * parameter is an integer parameter and the block's one input is `in`. */
typedef struct fe_block {
    const char *name;
    src_loc loc;
    bool has_inputs; /* written with ';': no implicit `in` */
    fe_param *params;
    fe_stmt *body;
    int nest; /* loops and blocks nested in it, itself included */
} fe_block;

typedef enum fe_stmt_kind {
    ST_INPUT,   /* name, elem, dims: `input x: f32[batch, 3, 224, 224]` */
    ST_LET,     /* name, value: `let c = 64` */
    ST_ASSIGN,  /* name, value: `h = conv2d(x, ...)` or `h = other` */
    ST_FOR,     /* name (the variable), lo, hi, body: `for i in 0..n { }` */
    ST_BLOCK,   /* block */
    ST_RETURN,  /* value */
    ST_WEIGHTS, /* wmaps: `weights { "fc.weight" = "fc.weight^T" ... }` */
} fe_stmt_kind;

/* One entry of a weights section: a tensor's name in a weights file and the
 * parameter it starts (ir/weights.c). */
typedef struct fe_wmap {
    const char *source, *target;
    src_loc loc, target_loc;
    struct fe_wmap *next;
} fe_wmap;

struct fe_stmt {
    fe_stmt_kind kind;
    src_loc loc;
    const char *name;
    src_loc name_loc;
    const char *elem; /* ST_INPUT */
    src_loc elem_loc;
    fe_expr *dims;    /* ST_INPUT, linked through next */
    fe_expr *value;   /* ST_LET, ST_ASSIGN, ST_RETURN */
    fe_expr *lo, *hi; /* ST_FOR: lo inclusive, hi exclusive */
    fe_stmt *body;    /* ST_FOR */
    fe_block *block;  /* ST_BLOCK */
    fe_wmap *wmaps;   /* ST_WEIGHTS */
    fe_stmt *next;
    int nest; /* ST_FOR, ST_BLOCK: loops and blocks nested in it, itself included */
};

/* One `key = value` (or `key sub = value`, as in `flops bf16 = 312 TFLOPS`)
 * of a gpu, cluster or job. */
typedef struct fe_field {
    const char *key;
    const char *sub; /* NULL unless `key sub = value` */
    fe_expr *value;
    src_loc loc;
    struct fe_field *next;
} fe_field;

typedef enum fe_item_kind {
    IT_IMPORT,  /* path */
    IT_MODEL,   /* name, body */
    IT_GPU,     /* name, fields */
    IT_CLUSTER, /* name, fields */
    IT_JOB,     /* name, fields */
    IT_BLOCK,   /* block: shared by every model */
    IT_LET,     /* name, value: a constant shared by every model */
} fe_item_kind;

typedef struct fe_file fe_file;

typedef struct fe_item {
    fe_item_kind kind;
    src_loc loc;
    const char *name; /* IT_MODEL, IT_GPU, IT_CLUSTER, IT_JOB, IT_LET */
    src_loc name_loc;
    const char *path;  /* IT_IMPORT, as written */
    fe_file *imported; /* IT_IMPORT: set by the front end; NULL if it failed
			       or the file was already imported */
    fe_stmt *body;     /* IT_MODEL */
    fe_field *fields;  /* IT_GPU, IT_CLUSTER, IT_JOB */
    fe_block *block;   /* IT_BLOCK */
    fe_expr *value;    /* IT_LET */
    struct fe_item *next;
} fe_item;

struct fe_file {
    const src_file *src;
    fe_item *items;
};

/* grammar/burst.y: parses one file. Syntax errors go through d; the tree of
 * whatever parsed is returned even then (never NULL). */
fe_file *fe_parse(arena *a, const src_file *src, diag_ctx *d);

#endif
