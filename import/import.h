/*
 * import.h: the internal header of import/, `burstc import`: ONNX models in,
 * readable Burst source out.
 *
 * The importer is a small compiler of its own. onnx.c reads the file (through
 * ir/'s file reader), checks its protobuf structure, decodes it with the
 * protobuf-c bindings generated from Debian's onnx.proto and copies what the
 * importer needs into an imp_graph: names, op types, attributes, initializer
 * shapes, small constants; never the weights. It is the only file that sees
 * protobuf-c. graph.c links values to the nodes that make and use them and
 * orders the nodes (dangling names and cycles are errors); shape.c infers
 * every value's static shape, the batch kept symbolic, and folds the small
 * integer tensors that exports compute shapes with; match.c finds the
 * patterns that exporters spell out op by op (attention, layer norm, GELU,
 * linear layers, embeddings) and maps every node to a Burst layer; write.c
 * prints the model. An error names the node, its op type and its position,
 * and nothing is written.
 */
#ifndef BURSTC_IMPORT_H
#define BURSTC_IMPORT_H

#include "ir.h"

/* The public interface, used by tools/cmd_import.c. */

typedef struct imp_options {
    const char *path;    /* the .onnx file */
    const char *name;    /* the model's name; NULL: from the file name */
    bool loss;           /* add labels and a cross-entropy loss per classifier output */
    const char *weights; /* also write the initializers to this safetensors file, or NULL */
} imp_options;

/* What the initializers of the model became (elements, not bytes). */
typedef struct imp_summary {
    int64_t init_elems, ninits; /* every initializer */
    int64_t params;             /* trainable parameters: what `burstc stats` counts */
    int64_t stats;              /* BatchNorm running means and variances */
    int64_t consts;             /* constants: shape tensors, masks, scales */
    int64_t unused;             /* initializers no node reads */
    int64_t shared;             /* parameters counted again by a second layer that reads them */
    int nlayers;
} imp_summary;

/* Reads o->path and returns the Burst source (arena memory, NUL-terminated),
 * or NULL after printing every error to err as `PATH: error: ...`. */
char *imp_onnx_to_burst(arena *a, const imp_options *o, FILE *err, imp_summary *sum);

/* One trained tensor for imp_onnx_set_weights: the initializer's name and its bytes in
 * the initializer's own data type (what `burstc import --weights` wrote it as). */
typedef struct imp_weight {
    const char *name;
    const void *data;
    size_t bytes;
} imp_weight;
/* The ONNX model at path with the initializers w[0..n) set to the given bytes (as
 * raw_data), packed into *out (malloc'd, *out_len bytes). False, with the reason in err,
 * when the file is no model or an initializer is missing or of another size. */
bool imp_onnx_set_weights(const char *path, const imp_weight *w, int n, unsigned char **out,
                          size_t *out_len, char *err, size_t errlen);

/* ---- inside import/ ---- */

#define IMP_MAX_RANK   IR_MAX_RANK
#define IMP_MAX_NODES  1000000            /* nodes of one graph */
#define IMP_MAX_DEPTH  64                 /* nesting of protobuf messages */
#define IMP_FOLD_MAX   4096               /* elements of a tensor whose contents are kept */
#define IMP_MAX_DIM    ((int64_t)1 << 40) /* one dimension, and elements per sample */
#define IMP_MAX_ERRORS 20
/* The largest ONNX file read: 2 GiB, protobuf's limit on one message (exports of
 * the larger torchvision models are 0.5 GB, over the 256 MiB of source files). */
#define IMP_FILE_MAX   (((size_t)2 << 30) - 1)

/* ONNX's TensorProto.DataType codes that the importer distinguishes. */
enum {
    IMP_FLOAT = 1,
    IMP_UINT8 = 2,
    IMP_INT8 = 3,
    IMP_INT16 = 5,
    IMP_INT32 = 6,
    IMP_INT64 = 7,
    IMP_BOOL = 9,
    IMP_FLOAT16 = 10,
    IMP_DOUBLE = 11,
    IMP_BFLOAT16 = 16,
};

/* One dimension: c * batch^n with n 0 or 1. The batch is symbolic from the
 * start, whatever the export wrote for it, so the shapes that feed it through
 * Shape, Gather and Concat keep it symbolic too. A dimension with the batch
 * merged in is (c / in) x batch x in in row-major order; in, which
 * imp_dim_eq ignores, is 0 when not known (the batch outermost, in = c). It
 * tells where a reshape at a traced batch puts the batch back. */
typedef struct imp_dim {
    int64_t c;
    int n;
    int64_t in;
} imp_dim;

typedef struct imp_shape {
    int rank;
    imp_dim d[IMP_MAX_RANK];
} imp_shape;

/* Contents of a small tensor, row-major: integers (possibly symbolic) or reals. */
typedef struct imp_data {
    int64_t n;
    bool real;
    imp_dim *i; /* !real */
    double *r;  /* real */
} imp_data;

typedef struct imp_tensor {
    int dtype;
    int rank;
    int64_t dims[IMP_MAX_RANK];
    int64_t elems;
    imp_data *data; /* NULL when larger than IMP_FOLD_MAX or stored outside the file */
} imp_tensor;

typedef enum imp_attr_kind {
    IA_INT,
    IA_FLOAT,
    IA_INTS,
    IA_FLOATS,
    IA_STRING,
    IA_TENSOR,
    IA_OTHER
} imp_attr_kind;

typedef struct imp_attr {
    const char *name;
    imp_attr_kind kind;
    int64_t i;      /* IA_INT */
    double f;       /* IA_FLOAT */
    int n;          /* IA_INTS, IA_FLOATS */
    int64_t *ints;  /* IA_INTS */
    double *floats; /* IA_FLOATS */
    const char *s;  /* IA_STRING */
    imp_tensor *t;  /* IA_TENSOR */
} imp_attr;

typedef enum imp_vkind { VK_INPUT, VK_INIT, VK_NODE } imp_vkind;

/* What an initializer turned out to be. */
typedef enum imp_role { ROLE_UNUSED, ROLE_PARAM, ROLE_STATS, ROLE_CONST } imp_role;

typedef struct imp_value {
    const char *name;
    imp_vkind kind;
    int node, slot; /* VK_NODE: the producer and which of its outputs */
    int dtype;
    bool known; /* shape inferred (false after an error upstream) */
    imp_shape shape;
    bool act;       /* computed from a graph input at run time */
    imp_data *data; /* contents, when known and small */
    int64_t elems;  /* VK_INIT: elements */
    int nusers;
    int *users; /* nodes that read it, once per read */
    /* match.c */
    imp_role role;
    int layer;  /* the Burst layer that holds this value's elements (-1: none) */
    int shares; /* VK_INIT: further layers that read it as their parameter */
    /* match.c, VK_INIT of ROLE_PARAM and ROLE_STATS: the Burst parameter of `layer` it is
     * ("weight", "running_mean", ...); whether it is that parameter's 2-d transpose (a
     * linear weight stored [in, out]); and, for one of three projections fused into one
     * (attention's q, k, v), the first of the parameter's rows it fills (else -1). */
    const char *pname;
    bool transposed;
    int64_t row0;
    /* match.c: the state_dict's other name for a tied weight (an embedding's table that a
     * head reads as its weight: GPT-2's lm_head.weight beside wte.weight), or NULL. */
    const char *alias;
    /* onnx.c, VK_INIT when the weights are kept: the contents, little-endian */
    const uint8_t *bytes;
    size_t nbytes;
} imp_value;

typedef struct imp_node {
    const char *name; /* may be "" */
    const char *op;
    int nin, nout;
    int *in, *out; /* value ids; -1: an optional input left out */
    int nattrs;
    imp_attr *attrs;
    int group; /* fuse.c: the pattern that took it, -1 if none */
    bool live; /* match.c: a graph output reads what it computes */
} imp_node;

typedef struct imp_graph {
    arena *a;
    const char *path;
    FILE *err;
    int nerrors;
    int64_t ir_version;
    int64_t opset;
    const char *producer, *producer_version, *graph_name;
    int nnodes;
    imp_node *nodes; /* in file order */
    int *order;      /* the nodes in a topological order */
    int nvalues, values_cap;
    imp_value *values;
    int *hash; /* open addressing over value names; -1: empty */
    int hash_cap;
    int ninputs, noutputs, ninits;
    int *inputs;             /* graph inputs that are not initializers */
    int *outputs;            /* graph outputs */
    const char *batch_param; /* the export's name of the batch, or NULL */
    int64_t batch_export;    /* the export's value of the batch, 0 if symbolic */
    bool keep_weights;       /* onnx.c keeps every initializer's contents (--weights) */
    int ngroups, groups_cap;
    struct imp_group *groups; /* fuse.c: the patterns found */
} imp_graph;

/* Errors: `PATH: error: node 12 of 300, 'name' (Op): message`. */
void imp_error(imp_graph *g, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The attribute called name of node n, or NULL. */
const imp_attr *imp_attr_get(const imp_node *n, const char *name);
int64_t imp_attr_int(const imp_node *n, const char *name, int64_t dflt);
double imp_attr_float(const imp_node *n, const char *name, double dflt);

/* onnx.c */

/* Reads and decodes path into a graph; NULL after errors. */
imp_graph *imp_read_onnx(arena *a, const char *path, FILE *err, bool keep_weights);

/* graph.c */

/* Adds a value (made by node, for VK_NODE); ids are dense. Returns -1
 * (reported) if name is taken. */
int imp_value_add(imp_graph *g, const char *name, imp_vkind kind, int node);
int imp_value_find(const imp_graph *g, const char *name);
/* Links inputs to producers, fills users, orders the nodes; false after errors. */
bool imp_link(imp_graph *g);
/* Queries that fuse.c and match.c share. Value and node ids may be -1. */
int imp_producer(const imp_graph *g, int v); /* the node that computes v, or -1 */
bool imp_is_op(const imp_graph *g, int node, const char *op);
int imp_single_user(const imp_graph *g, int v); /* v's one reader, or -1 */
bool imp_is_act(const imp_graph *g, int v);
double imp_scalar(const imp_graph *g, int v); /* a one-element constant's value, or NAN */
/* For a binary node with an activation on exactly one side: that side, and the other. */
bool imp_split_act(const imp_graph *g, int node, int *act, int *other);
int imp_other_of(const imp_graph *g, int node, int v); /* the other input of a binary node */
/* The initializer that v is (a view of: Identity, Transpose, Cast, Reshape, ...), or -1. */
int imp_init_of(const imp_graph *g, int v);
/* How many Transposes lie between v and the initializer it is a view of. */
int imp_transposes_to_init(const imp_graph *g, int v);
/* Whether v is an initializer view of `features` elements shaped [f], [1,f], .... */
bool imp_is_bias(const imp_graph *g, int v, int64_t features);
int64_t imp_elems(const imp_shape *s); /* negative when s holds the batch */

/* shape.c */

/* Shapes, activity and small contents of every value; false after errors. */
bool imp_infer(imp_graph *g);
bool imp_dim_eq(imp_dim a, imp_dim b);
/* "N", "64", "2N" into buf. */
const char *imp_dim_str(imp_dim d, char *buf, size_t n);
/* "[N,3,224,224]" into buf. */
const char *imp_shape_str(const imp_shape *s, char *buf, size_t n);
/* Elements of s, the batch taken as 1: -1 past IMP_MAX_DIM. */
int64_t imp_elems_checked(const imp_shape *s);
/* Elements per sample of a shape whose first dimension is the batch: -1 if
 * it is not, or if the product passes IMP_MAX_DIM. */
int64_t imp_per_sample(const imp_shape *s);

/* fuse.c */

typedef enum imp_gkind {
    IMP_G_ATTENTION,
    IMP_G_LAYERNORM,
    IMP_G_GELU,
    IMP_G_LINEAR,
    IMP_G_EMBEDDING,
    IMP_G_TOKENS,
    IMP_G_SILU
} imp_gkind;

/* A pattern that becomes one Burst layer, emitted at its last node. */
typedef struct imp_group {
    imp_gkind kind;
    int x;     /* the activation it reads (the ids, for an embedding) */
    int out;   /* the value it computes */
    int last;  /* the node that computes out */
    int first; /* the node that names it when its nodes share no scope */
    int nnodes;
    int *nodes;
    int64_t heads;     /* attention */
    bool causal;       /* attention: a mask was applied to the scores */
    double eps;        /* layernorm */
    const char *form;  /* gelu: "erf" or "tanh" */
    int64_t features;  /* linear: out */
    int64_t positions; /* embedding: rows of the position table (0: none) */
    int w, b;          /* linear: weight, bias (-1: none); layernorm: scale, bias;
                          embedding: table, position table (-1: none);
                          tokens: class token, positions (-1: none) */
    int params[8];     /* attention: weights and biases of the projections */
    bool out_in;       /* attention: the output projection's weight is stored [out, in] (Gemm
                          with transB, nn.MultiheadAttention's out_proj) */
    int nparams;
} imp_group;

/* Finds the patterns; the nodes of each get its index in n->group. */
void imp_fuse(imp_graph *g);

/* match.c: the Burst model, layers in order. */

typedef struct imp_layer {
    const char *name; /* a unique Burst identifier */
    const char *op;   /* "input", a Burst op, or "" for a label input */
    int nargs;
    int *args;         /* layer ids */
    const char *attrs; /* ", channels = 64, kernel = 3", or "" */
    imp_shape shape;   /* the layer's type; dimension 0 is the batch */
    bool i32;
    const char *note; /* a comment written above the layer, or NULL */
    int suffix;       /* the next _N to try for another layer wanting this name */
    bool dropped;     /* left out after all (a final softmax the loss applies) */
} imp_layer;

typedef struct imp_model {
    arena *a;
    const char *name;
    const char *weights; /* the --weights file, or NULL */
    int nlayers, cap;
    imp_layer *layers;
    int *hash; /* layer names */
    int hash_cap;
    imp_summary sum;
    int nnotes;
    const char **notes; /* lines for the header comment */
} imp_model;

/* Maps the graph to layers; false after errors. */
bool imp_match(imp_graph *g, imp_model *m, bool loss);
/* Words a name may not be: the language's keywords, `none` and `batch`. */
bool imp_reserved(const char *s);
/* A valid, unused Burst identifier made from s (the model's own names). */
const char *imp_unique_name(imp_model *m, const char *s);

/* write.c */

char *imp_write(arena *a, const imp_graph *g, const imp_model *m, const char *file_name);

/* weights.c */

/* One tensor of the model's state under its ONNX name: what became of initializer `value`
 * (-1: a BatchNorm's num_batches_tracked, which ONNX does not keep) and the Burst
 * parameter it starts, as a weights section and the safetensors metadata write it
 * (`layer.param`, `layer.param@R`, `...^T`; NULL when the initializer has none). */
typedef struct imp_wmap {
    int value;
    const char *name, *target;
} imp_wmap;
/* The model's tensors in graph order, into *out (the graph's arena); returns how many. */
int imp_weight_map(const imp_graph *g, const imp_model *m, imp_wmap **out);

/* Writes the parameters' and BatchNorm statistics' initializers to path as safetensors
 * (atomically), under their ONNX names, with the Burst parameter each one is in the
 * file's metadata; false after printing the error. */
bool imp_write_weights(const imp_graph *g, const imp_model *m, const char *path);

#endif
