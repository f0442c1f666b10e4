/* internal.h: what the files of libburstrt share and the public header does not show:
 * the process-wide runtime state (rank, options, watchdog), shape-check helpers used by
 * every kernel, and the hooks between core.c, trace.c, comm_mpi.c and checkpoint.c.
 * Sections list the file that defines each group. */
#ifndef BURSTRT_INTERNAL_H
#define BURSTRT_INTERNAL_H

#include "burstrt.h"

/* core.c */
extern rt_options rt_opts_g;
void *rt_xmalloc(size_t n, const char *op);
void *rt_xcalloc(size_t n, size_t size, const char *op);
/* Zeroed memory owned (and freed) by the pool. */
void *rt_pool_alloc(rt_pool *pool, size_t bytes);
/* Fatal error unless t is non-NULL, f32/i32 as asked, and has `ndim` dims (ndim<0: any). */
void rt_check(const rt_tensor *t, rt_dtype dt, int ndim, const char *op, const char *what);
void rt_check_numel(const rt_tensor *t, int64_t numel, const char *op, const char *what);
/* Name of the op currently on the trace stack (for watchdog messages). */
const char *rt_current_op(void);

/* cpu/device.c: makes OpenBLAS use the kernels this CPU supports when it fell back
 * to generic ones (re-executes the program once, before MPI starts). */
void rt_blas_select(char **argv);

/* cpu/conv.c: samples per GEMM of conv2d (the benchmark mirrors the lowering with it) */
#define RT_CONV_COLUMNS 1024
int64_t rt_conv2d_chunk(int64_t N, int64_t ohw);

/* trace.c */
void rt_trace_init(void);
void rt_trace_write_and_free(const char *path);
void rt_trace_record_step(int64_t step, double t0, double t1);

/* shapes.c: the argument rules of every kernel, shared by the backends (fatal on a
 * mismatch, naming op, argument and shapes); they return the sizes kernels loop over. */
typedef struct rt_conv_dims {
    int64_t N, C, H, W, K, OH, OW, G, Cg, Kg, ohw, ckk; /* ckk = C/groups * kh * kw */
} rt_conv_dims;
typedef struct rt_pool_dims {
    int64_t N, C, H, W, OH, OW;
} rt_pool_dims;
typedef struct rt_attn_dims {
    int64_t N, T, D, H, hd;
} rt_attn_dims;
int64_t rt_dims_prod(const int64_t *shape, int from, int to);
/* t is an f32 tensor of numel elements. */
void rt_check_f32(const rt_tensor *t, int64_t numel, const char *op, const char *what);
void rt_same_numel(const char *op, const rt_tensor *a, const char *an, const rt_tensor *b,
                   const char *bn);
void rt_dropout_check(const char *op, const rt_tensor *x, float p, const rt_tensor *y);
/* y (output, or output gradient) must be [N, K, OH, OW]. */
rt_conv_dims rt_conv2d_check(const char *op, const rt_tensor *x, const rt_tensor *w,
                             const rt_conv2d_attrs *a, const rt_tensor *y, const char *yname);
void rt_conv2d_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w,
                         const rt_conv_dims *d, const rt_tensor *dx, const rt_tensor *dw,
                         const rt_tensor *db);
/* x (input, or input gradient) [N,C,H,W]; y (output, or output gradient) [N,C,OH,OW]. */
rt_pool_dims rt_pool2d_check(const char *op, const rt_tensor *x, const rt_pool2d_attrs *a,
                             const rt_tensor *y, const char *yname);
void rt_global_pool_check(const char *op, const rt_tensor *x, const char *xname, const rt_tensor *y,
                          const char *yname);
/* Returns C; saved may be NULL (inference). */
int64_t rt_batchnorm_check(const char *op, const rt_comm *comm, const rt_tensor *x,
                           const rt_tensor *gamma, const rt_tensor *saved, const rt_tensor *y,
                           const char *yname);
void rt_layernorm_dims(const char *op, const rt_tensor *x, const rt_tensor *gamma,
                       const rt_tensor *saved, int64_t *M, int64_t *D);
void rt_concat_check(const char *op, const rt_tensor *y, int n, const rt_tensor *const *xs,
                     int axis);
/* Orders the axes (*a0 < *a1) and checks y is x with them swapped. */
void rt_transpose_check(const char *op, const rt_tensor *x, int *a0, int *a1, const rt_tensor *y);
void rt_softmax_dims(const char *op, const rt_tensor *x, int axis, int64_t *outer, int64_t *dim,
                     int64_t *inner);
void rt_linear_dims(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t *M, int64_t *in,
                    int64_t *out);
void rt_linear_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t M,
                         int64_t out, const rt_tensor *dy, const rt_tensor *dx, const rt_tensor *dw,
                         const rt_tensor *db);
void rt_matmul_dims(const char *op, const rt_tensor *a, const rt_tensor *b, int64_t *B, int64_t *m,
                    int64_t *k, int64_t *n);
rt_attn_dims rt_attention_check(const char *op, const rt_tensor *x, const rt_tensor *w_qkv,
                                const rt_tensor *w_o, int heads, const rt_tensor *saved);
void rt_attention_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w_qkv,
                            const rt_tensor *w_o, const rt_attn_dims *d, const rt_tensor *dy,
                            const rt_tensor *dx, const rt_tensor *dw_qkv, const rt_tensor *db_qkv,
                            const rt_tensor *dw_o, const rt_tensor *db_o);
void rt_embedding_dims(const char *op, const rt_tensor *tokens, const rt_tensor *w,
                       const rt_tensor *pos, const rt_tensor *y, int64_t *NT, int64_t *T,
                       int64_t *D);
void rt_cross_entropy_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t global_count, int64_t *M, int64_t *C);
void rt_correct_count_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t *M, int64_t *C);

/* ranks.c: a checked, malloc'd copy of a rank set (distinct ranks of the world);
 * *index gets this rank's place in it, or -1. */
int *rt_rank_set_copy(int n, const int *world_ranks, int *index);

/* comm_mpi.c */
void rt_comm_free_all(void);
/* Sum-all-reduce of doubles in place within the set (no-op for NULL, one rank
 * or non-members): the statistics of batch normalisation over a rank set. */
void rt_allreduce_sum_f64(const rt_comm *c, double *data, int64_t n);
void rt_comm_world_init(void);

/* checkpoint.c */
void rt_checkpoint_maybe_save(int64_t step);

/* optim.c: the Adam step count that checkpoints carry */
int64_t rt_params_adam_step(const rt_params *ps);
void rt_params_set_adam_step(rt_params *ps, int64_t t);
int rt_params_count(const rt_params *ps);
rt_param *rt_params_at(const rt_params *ps, int i);
/* Optimizer state k of p, made (zero) on first use. */
rt_tensor *rt_param_state(rt_params *ps, rt_param *p, int k);

#endif
