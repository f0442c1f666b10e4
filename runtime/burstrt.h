/* burstrt.h: the one public header of libburstrt, the runtime that burstc's generated
 * host programs link against. A generated program is straight-line C: it calls rt_init,
 * creates one rt_comm per distinct rank set of the plan, allocates every tensor once
 * from an rt_pool, registers parameters in an rt_params set, and then for each
 * iteration calls the forward kernels, the loss, the backward kernels, resharding
 * between layers whose rank sets differ, the gradient all-reduce and the optimizer,
 * each layer guarded by rt_comm_member() of its rank set. See docs/runtime.md for the
 * semantics (sharding, loss scaling, batchnorm statistics, dropout RNG, init,
 * checkpoints, faults).
 *
 * Conventions: f32 tensors are NCHW (batch first), row-major and contiguous. Forward
 * kernels overwrite their output. Backward kernels overwrite the input gradient dx
 * (which may be NULL when not needed) and ACCUMULATE into parameter gradients (dw, db,
 * dgamma, ...), which rt_params_zero_grad clears once per step. A kernel run on a
 * rank's shard computes exactly what the one-rank run computes for those samples,
 * provided batchnorm uses the synchronised statistics (rt_batchnorm2d_sync_*). */
#ifndef BURSTRT_H
#define BURSTRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tensors and memory ------------------------------------------------------ */

/* Element types. RT_BF16 and RT_F16 (2 bytes) hold activations and their gradients
 * where the backend stores them in 16 bits (rt_storage_dtype); parameters, their
 * gradients and optimizer state are always RT_F32. */
typedef enum { RT_F32, RT_I32, RT_BF16, RT_F16 } rt_dtype;
/* Bytes per element: 4 for RT_F32 and RT_I32, 2 for RT_BF16 and RT_F16. */
size_t rt_dtype_size(rt_dtype dt);

#define RT_MAX_DIMS 6

typedef struct rt_tensor {
    rt_dtype dtype;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    int64_t numel;
    void *data; /* float * for RT_F32, int32_t * for RT_I32, 16-bit words for RT_BF16 and
                   RT_F16 (IEEE binary16); 64-byte aligned */
} rt_tensor;

static inline float *rt_f32(const rt_tensor *t)
{
    return (float *)t->data;
}
static inline int32_t *rt_i32(const rt_tensor *t)
{
    return (int32_t *)t->data;
}

/* A pool owns every tensor, parameter and scratch buffer made from it; rt_pool_free
 * releases all of them at once. */
typedef struct rt_pool rt_pool;
rt_pool *rt_pool_new(void);
void rt_pool_free(rt_pool *pool);
/* Zero-filled tensor of the given shape. */
rt_tensor *rt_tensor_new(rt_pool *pool, rt_dtype dtype, int ndim, const int64_t *shape);
/* A view sharing t's data with another shape of the same element count (flatten,
 * reshape): no copy. */
rt_tensor *rt_tensor_view(rt_pool *pool, rt_tensor *t, int ndim, const int64_t *shape);
/* A view of samples [s0, s1) of t (along dimension 0), sharing t's data. */
rt_tensor *rt_tensor_slice(rt_pool *pool, rt_tensor *t, int64_t s0, int64_t s1);
/* Scratch memory owned by the pool, valid until the next rt_pool_scratch call. */
float *rt_pool_scratch(rt_pool *pool, size_t nfloats);
void rt_tensor_zero(rt_tensor *t);
void rt_tensor_copy(rt_tensor *dst, const rt_tensor *src);
/* Elements per sample: numel / shape[0]. */
int64_t rt_tensor_per_sample(const rt_tensor *t);

/* ---- program options, init, errors ------------------------------------------ */

/* --data: synthetic, fmnist[:DIR], npy:X.npy,Y.npy, images:DIR, tokens[32]:FILE
 * (docs/runtime.md, "Data"). */
typedef enum {
    RT_DATA_SYNTHETIC,
    RT_DATA_FMNIST,
    RT_DATA_NPY,
    RT_DATA_IMAGES,
    RT_DATA_TOKENS,  /* tokens:FILE, uint16 ids */
    RT_DATA_TOKENS32 /* tokens32:FILE, uint32 ids */
} rt_data_kind;

/* --loss-scale: the job's default (dynamic when it computes in f16, else off), off,
 * dynamic (PyTorch's GradScaler), or a fixed scale. */
typedef enum {
    RT_LOSS_SCALE_DEFAULT,
    RT_LOSS_SCALE_OFF,
    RT_LOSS_SCALE_DYNAMIC,
    RT_LOSS_SCALE_FIXED
} rt_loss_scale_mode;

typedef struct rt_options {
    int64_t iterations;            /* --iterations N (default 10, or rt_set_defaults') */
    rt_data_kind data;             /* --data SOURCE (default synthetic, or the job's) */
    char data_path[1024];          /* the source's files: fmnist's directory (default
                                 /usr/share/datasets/fashion-mnist), npy's "X.npy,Y.npy" */
    uint64_t seed;                 /* --seed S (default 1) */
    char trace_path[512];          /* --trace FILE ("" = off) */
    char checkpoint_dir[512];      /* --checkpoint-dir DIR ("" = off) */
    int64_t checkpoint_every;      /* --checkpoint-every N (0 = never) */
    bool resume;                   /* --resume */
    char init_path[512];           /* --init FILE.safetensors ("" = the program's own init) */
    bool init_partial;             /* --init-partial: load what fits, list the rest */
    char save_weights[512];        /* --save-weights FILE.safetensors ("" = off) */
    int threads;                   /* --threads N: threads per rank for oneDNN and BLAS (default
                                 0 = auto: the rank's CPUs shared among the node's ranks;
                                 rt_init writes the number chosen) */
    double step_timeout;           /* --step-timeout SEC: watchdog deadline per step (default 20;
                                  grows to 3x the slowest completed step; 0 = off) */
    double bucket_mb;              /* --bucket-mb MB: gradient all-reduce bucket (default 25) */
    bool no_overlap;               /* --no-overlap: all-reduce the gradients after the backward */
    bool background;               /* --background on|off (default on) */
    double slowdown;               /* --slowdown X: the background guard's bound (0: the job's) */
    rt_loss_scale_mode loss_scale; /* --loss-scale dynamic|off|S */
    double loss_scale_init;        /* dynamic: --loss-scale-init S (65536); fixed: S */
    double loss_scale_growth;      /* --loss-scale-growth X (default 2) */
    double loss_scale_backoff;     /* --loss-scale-backoff X (default 0.5) */
    int64_t loss_scale_interval;   /* --loss-scale-interval N (default 2000) */
    int rank, world_size;          /* filled by rt_init */
    bool allow_mismatched_launch;  /* --allow-mismatched-launch (see rt_check_launch) */
    rt_data_kind eval_data;        /* --eval-data SOURCE (npy or images), when eval_set */
    char eval_path[1024];
    bool eval_set;
    bool augment;    /* --augment on|off: images' training transform (default on) */
    int nmean, nstd; /* --mean M[,M,M], --std S[,S,S] (0: the default of the channels) */
    float mean[3], std[3];
    int data_workers;   /* --data-workers N: image decoding threads (0: the rank's --threads) */
    bool skip_bad_data; /* --skip-bad-data: a bad image mid-run is counted, not fatal */
} rt_options;

/* The defaults of --iterations and --data (the job's: a source as --data spells it,
 * checked when rt_init parses the options), set before rt_init. */
void rt_set_defaults(int64_t iterations, const char *data);
/* Initialises MPI, parses the common options (exits 0 after --help; a bad option is a
 * fatal error naming it), sets BLAS threads, starts the watchdog. Returns the parsed
 * options; the generated program reads them. */
const rt_options *rt_init(int *argc, char ***argv, const char *program);
/* Writes the trace (if --trace), stops the watchdog, frees comms, finalises MPI.
 * Without rt_init (single-process use) it only frees the comms. */
void rt_finalize(void);
/* Exits non-zero on every rank with "plan needs N ranks, launched with M". */
void rt_check_world_size(int needed);
/* The plan puts gpus_per_node ranks on each node, in rank order. Where the launch put
 * them differently (ranks of one planned node on two hosts, or two planned nodes on one
 * host) rank 0 says so with the mpirun/srun mapping that matches, and every rank exits
 * with status 2; with --allow-mismatched-launch it is a warning. After rt_init. */
void rt_check_launch(int gpus_per_node);
int rt_rank(void);
int rt_world_size(void);
/* Prints "burstrt: rank R: OP: message" and aborts the whole job (exit status 1). */
_Noreturn void rt_fatal(const char *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- device: precision, graphs, streams (no-ops on the CPU backend) ---------- */

/* The precision of GEMM inputs (accumulation f32): the job's dtype on the CUDA backend;
 * the CPU backend computes in f32 whatever is set. */
typedef enum { RT_COMPUTE_F32, RT_COMPUTE_BF16, RT_COMPUTE_F16 } rt_compute_dtype;
void rt_set_compute_dtype(rt_compute_dtype dt);
rt_compute_dtype rt_get_compute_dtype(void);
/* The dtype of activations and their gradients (the tensors a program makes for its
 * ops' values and gradients, and the input batch when it is not tokens): RT_F32, or
 * the 16-bit compute dtype where the backend stores activations in 16 bits (the CUDA
 * backend with BURSTRT_STORAGE=16). It follows the compute dtype, so set that before
 * making tensors (generated programs do it right after rt_init). */
rt_dtype rt_storage_dtype(void);
/* A graph segment (ids 0..1023) is a stretch of a training step without host
 * synchronisation or communication: `if (rt_graph_begin(k)) { ...kernels... }
 * rt_graph_end(k);`. On the CUDA backend its first run is eager, its second captured,
 * later ones replay the graph (rt_graph_begin returns false: skip the body). On the
 * CPU backend rt_graph_begin always returns true. */
bool rt_graph_begin(int segment);
void rt_graph_end(int segment);
/* Waits for this rank's device work (CPU: nothing to wait for). */
void rt_device_sync(void);
/* Routes kernels to the low-priority stream reserved for background work (on) or back
 * to the foreground stream (off). */
void rt_use_background_stream(bool on);
/* Copies numel * 4 bytes between a tensor (device memory on CUDA) and the host. */
void rt_tensor_write(rt_tensor *t, const void *host);
void rt_tensor_read(const rt_tensor *t, void *host);

/* ---- steps, timers, trace ---------------------------------------------------- */

/* Marks the start of iteration `step`: re-arms the watchdog, starts the iteration timer. */
void rt_step_begin(int64_t step);
/* Ends the iteration: records its time, writes a checkpoint if one is due, and disarms
 * the watchdog until the next rt_step_begin (evaluation between or after steps is not
 * timed out unless it calls rt_progress). */
void rt_step_end(int64_t step);
/* Re-arms the watchdog for one more step-length period: call it once per batch of a
 * long phase outside the training steps (e.g. test-set evaluation) to have that phase
 * watched too. */
void rt_progress(void);
/* Times the op between push and pop (nestable); recorded in the per-op table and, with
 * --trace, as a Chrome trace event. `name` must outlive the run (a string literal). */
void rt_trace_push(const char *name);
void rt_trace_pop(void);
double rt_now(void); /* seconds, monotonic */
/* Rank 0 prints "step S loss L" (L with 9 significant digits) to stdout, the line
 * end-to-end tests compare between runs. */
void rt_report_loss(int64_t step, double loss);
/* Prints per-op mean times and the mean iteration time of this rank to stderr. */
void rt_timers_report(void);

/* ---- communication ------------------------------------------------------------ */

/* Samples [*start, *end) of a batch of B split over k ranks: as even as possible, the
 * first B % k ranks get one more. The compiler uses the same rule. */
void rt_shard(int64_t B, int k, int index, int64_t *start, int64_t *end);

/* A rank set (ordered list of world ranks) with its MPI communicator. Create every
 * rank set once, on every rank, in the same order (collective over the world). */
typedef struct rt_comm rt_comm;
rt_comm *rt_comm_new(int nranks, const int *world_ranks);
bool rt_comm_member(const rt_comm *c);
int rt_comm_index(const rt_comm *c); /* this rank's index in the set, or -1 */
int rt_comm_size(const rt_comm *c);
/* This rank's samples of a global batch B in this rank set (0,0 for non-members). */
void rt_comm_shard(const rt_comm *c, int64_t B, int64_t *start, int64_t *end);
/* Sum-all-reduce in place within the set (no-op for a one-rank set or non-members). */
void rt_allreduce_sum(const rt_comm *c, float *data, int64_t n);
/* The one-rank set of this rank alone, made without communication (a background copy's
 * layers run on it): member, index 0, all-reduces are no-ops. */
rt_comm *rt_comm_self(void);
/* Sum of a scalar over all world ranks (the total loss: non-members pass 0). Collective.
 * Inside a step of a program with background copies it also carries the slowdown guard's
 * numbers, with --background on and off alike (docs/runtime.md, "The guard"). */
double rt_world_sum(double local);
void rt_barrier(void);
/* Moves sample ranges of a global batch of B samples (each `per_sample` elements of
 * src's dtype) from the producer set to the consumer set, so that each consumer ends
 * with its contiguous shard. src: this rank's shard on producers (else NULL); dst: this
 * rank's shard on consumers (else NULL). Ranks in neither set return at once. Every
 * rank of both sets must call it in the same program order. */
void rt_reshard(const rt_tensor *src, const rt_comm *from, rt_tensor *dst, const rt_comm *to,
                int64_t B, int64_t per_sample);
/* rt_reshard in two halves, so that the transfer runs while this rank computes other ops
 * (a fork's ranks do not make another branch's ranks wait for their own branch): start
 * posts it, right after src is written; wait completes it, right before dst is read. `id`
 * names the reshard, the same number on every rank of both sets (the compiler numbers its
 * reshard call sites 0, 1, ...; below 2^24); at most one reshard per id is in flight.
 * Between the two calls src must not be written, nor dst read or written. Ranks in neither
 * set return at once from both; every rank of either set calls both. On the CPU backend
 * reshards in flight at once may be started and waited for in any order, different on
 * different ranks (each id has its own MPI tag); on CUDA (NCCL has no tags) two ranks
 * must start the reshards between them in the same order, as a generated program does. */
void rt_reshard_start(int id, const rt_tensor *src, const rt_comm *from, rt_tensor *dst,
                      const rt_comm *to, int64_t B, int64_t per_sample);
void rt_reshard_wait(int id);

/* ---- parameters, initialisation, optimizers ----------------------------------- */

typedef struct rt_param {
    const char *name;
    rt_tensor *value, *grad; /* grad is NULL for buffers (batchnorm running stats) */
    rt_tensor *state[2];     /* optimizer state (SGD: momentum; Adam: m, v), lazily made */
    const rt_comm *comm;     /* rank set holding it; gradients are all-reduced there */
} rt_param;

typedef struct rt_params rt_params;
rt_params *rt_params_new(rt_pool *pool);
/* Registers a trainable parameter (value + grad, zero) held by this rank. Register on
 * member ranks only, in the same order on every member. */
rt_param *rt_param_new(rt_params *ps, const char *name, const rt_comm *comm, int ndim,
                       const int64_t *shape);
/* Registers a non-trained buffer (checkpointed, not all-reduced, not updated). */
rt_param *rt_buffer_new(rt_params *ps, const char *name, const rt_comm *comm, int ndim,
                        const int64_t *shape);
void rt_params_zero_grad(rt_params *ps);
/* All-reduces every parameter gradient within its rank set (starts them all, waits). */
void rt_params_allreduce_grads(rt_params *ps);
/* Starts the sum-all-reduce of a gradient of n floats within the set, as soon as the
 * backward has finished writing it; it runs while the backward goes on (gradients go out
 * in buckets of --bucket-mb, in the order they are started; every member of the set
 * starts the same gradients in the same order). The gradient must not be touched until
 * rt_grads_wait, which the optimizer steps, rt_params_zero_grad and checkpoints call
 * themselves. No-op on non-members and one-rank sets. */
void rt_grad_allreduce_start(const rt_comm *c, float *grad, int64_t n);
/* Completes every started gradient all-reduce (the sums are in place afterwards). */
void rt_grads_wait(void);
/* Completes the all-reduce of one started gradient (and whatever went out with it in
 * its bucket) before the optimizer would: where the IR's allreduce says `complete`.
 * Every member of the set calls it at the same point of the program, after starting
 * the gradient. No-op on non-members, one-rank sets and gradients already complete. */
void rt_grad_allreduce_wait(const rt_comm *c, float *grad);

/* A layer id that is stable across plans: a 31-bit hash of the layer's name in the
 * model. Layer ids key initialisation and dropout masks, so they must not depend on
 * the plan (e.g. on IR indices that shift when reshard/allreduce ops are inserted),
 * or a burst plan and the one-rank run start from different weights. */
int rt_layer_key(const char *name);

/* Deterministic init keyed by (seed, layer_id, param_index): every rank holding the
 * layer gets identical values. Kaiming-uniform as PyTorch's defaults for conv/linear:
 * weight and bias both U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
void rt_init_uniform(rt_tensor *t, float bound, uint64_t seed, int layer_id, int param_index);
void rt_init_normal(rt_tensor *t, float mean, float std, uint64_t seed, int layer_id,
                    int param_index);
void rt_init_const(rt_tensor *t, float value);
void rt_init_kaiming_uniform(rt_tensor *t, int64_t fan_in, uint64_t seed, int layer_id,
                             int param_index);

typedef struct rt_sgd {
    float lr, momentum, weight_decay;
    bool nesterov;
} rt_sgd;
/* PyTorch torch.optim.SGD: g += wd*w; buf = momentum*buf + g (buf = g at the first
 * step); g = nesterov ? g + momentum*buf : buf; w -= lr*g. */
void rt_sgd_step(rt_params *ps, const rt_sgd *cfg);

typedef struct rt_adam {
    float lr, beta1, beta2, eps, weight_decay;
} rt_adam;
/* PyTorch torch.optim.Adam (L2 weight decay, bias correction); the step count lives
 * in the params set and is checkpointed. */
void rt_adam_step(rt_params *ps, const rt_adam *cfg);

/* ---- loss scaling (f16; docs/runtime.md, "Loss scaling (f16)") ---------------------- */

/* The loss gradient is scaled where it is made: rt_cross_entropy_bwd_scaled (below). */
/* After the backward pass, on every rank (collective over the world): completes the
 * gradient all-reduces, divides every gradient of ps by S and checks them for inf and
 * nan. The verdict is combined over the world, so every rank decides alike: false when
 * any rank's gradients overflowed; the caller then skips the optimizer step (parameters
 * and optimizer state stay as they are). The dynamic scale backs off on an overflow and
 * grows after --loss-scale-interval clean steps in a row. Without loss scaling: true. */
bool rt_loss_scale_unscale(rt_params *ps);
/* The loss scale S of the next step (1 when loss scaling is off). */
double rt_loss_scale(void);

/* ---- kernels: f32, NCHW ------------------------------------------------------- */

typedef struct rt_conv2d_attrs {
    int kh, kw, sh, sw, ph, pw, dh, dw, groups;
} rt_conv2d_attrs;
/* x[N,C,H,W], w[K,C/groups,kh,kw], b[K] or NULL -> y[N,K,OH,OW]. */
void rt_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                   const rt_conv2d_attrs *a, rt_tensor *y);
void rt_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                   const rt_conv2d_attrs *a, rt_tensor *dx, rt_tensor *dw, rt_tensor *db);

/* x[..., in] -> y[..., out], w[out,in], b[out] or NULL. */
void rt_linear_fwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b, rt_tensor *y);
void rt_linear_bwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy, rt_tensor *dx,
                   rt_tensor *dw, rt_tensor *db);

/* a[B,m,k] x b[B,k,n] -> c[B,m,n] (3-d tensors; B may be 1). */
void rt_matmul_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *c);
void rt_matmul_bwd(const rt_tensor *a, const rt_tensor *b, const rt_tensor *dc, rt_tensor *da,
                   rt_tensor *db);

void rt_relu_fwd(const rt_tensor *x, rt_tensor *y);
void rt_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
/* ReLU6 (torch's relu6 and hardtanh(0, 6), ONNX's Clip to [0, 6]): min(max(x, 0), 6); the
 * gradient passes where 0 < x < 6, as PyTorch's. */
void rt_relu6_fwd(const rt_tensor *x, rt_tensor *y);
void rt_relu6_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
/* torch's hardsigmoid relu6(x + 3) / 6 (ONNX's HardSigmoid with alpha 1/6, beta 1/2) and
 * hardswish x relu6(x + 3) / 6, with PyTorch's gradients: hardsigmoid's 1/6 where
 * -3 < x < 3, hardswish's 0 below -3, x/3 + 1/2 up to 3 and 1 above. */
void rt_hardsigmoid_fwd(const rt_tensor *x, rt_tensor *y);
void rt_hardsigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
void rt_hardswish_fwd(const rt_tensor *x, rt_tensor *y);
void rt_hardswish_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
/* GELU, tanh approximation (GPT-2). */
void rt_gelu_fwd(const rt_tensor *x, rt_tensor *y);
void rt_gelu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
/* GELU, exact: x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (torch's nn.GELU); the backward
 * dy (Phi(x) + x phi(x)). */
void rt_gelu_erf_fwd(const rt_tensor *x, rt_tensor *y);
void rt_gelu_erf_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
/* tanh and the logistic sigmoid; the backward recomputes y from x. */
void rt_tanh_fwd(const rt_tensor *x, rt_tensor *y);
void rt_tanh_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
void rt_sigmoid_fwd(const rt_tensor *x, rt_tensor *y);
void rt_sigmoid_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
/* SiLU (swish) x sigmoid(x), torch's nn.SiLU; the backward dy s (1 + x (1 - s)). */
void rt_silu_fwd(const rt_tensor *x, rt_tensor *y);
void rt_silu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);

typedef struct rt_pool2d_attrs {
    int kh, kw, sh, sw, ph, pw;
    int ceil_mode;   /* 0 (default): OH = floor((H + 2ph - kh)/sh) + 1; 1: ceil, as PyTorch */
    int exclude_pad; /* avgpool: 0 (default) = count_include_pad=1; 1: divide by the
                        number of real pixels in the window */
} rt_pool2d_attrs;
/* Padding counts as -inf; a NaN in the window propagates. */
void rt_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y);
void rt_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                      rt_tensor *dx);
/* Divides by the window size clipped to the padded image (count_include_pad=1, the
 * PyTorch default: kh*kw except for ceil-mode edge windows) or, with exclude_pad, by
 * the real pixels in the window. */
void rt_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y);
void rt_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx);
/* [N,C,H,W] -> [N,C]. */
void rt_global_avgpool_fwd(const rt_tensor *x, rt_tensor *y);
void rt_global_avgpool_bwd(const rt_tensor *dy, rt_tensor *dx);

/* Training-mode batchnorm over (N,H,W). With comm NULL the statistics are those of THIS
 * SHARD (like DDP without SyncBN); with the layer's rank set they are those of the whole
 * global batch across the set (SyncBN): two all-reduces of C doubles in forward (mean,
 * then variance) and one of 2C in backward, so a plan on any ranks computes what one
 * rank computes. saved: f32 [2*C] (mean, invstd) written by forward and read by
 * backward. running_mean/var (or NULL) are updated with momentum using the unbiased
 * batch variance, as PyTorch. Backward accumulates this shard's part of dgamma/dbeta
 * (the gradient all-reduce sums the parts) and writes dx from the set's sums. */
void rt_batchnorm2d_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                        rt_tensor *running_mean, rt_tensor *running_var, float momentum, float eps,
                        rt_tensor *saved, rt_tensor *y);
void rt_batchnorm2d_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                        const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta);
void rt_batchnorm2d_sync_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                             float momentum, float eps, rt_tensor *saved, rt_tensor *y);
void rt_batchnorm2d_sync_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                             rt_tensor *dgamma, rt_tensor *dbeta);
void rt_batchnorm2d_infer(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                          const rt_tensor *running_mean, const rt_tensor *running_var, float eps,
                          rt_tensor *y);
/* Layernorm over the last dimension D; saved: f32 [2*rows] (mean, rstd). */
void rt_layernorm_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta, float eps,
                      rt_tensor *saved, rt_tensor *y);
void rt_layernorm_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                      const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta);

/* Inverted dropout: y = x * mask / (1-p). The mask bit of element e of global sample
 * (sample0 + i) is a pure function of (seed, step, layer_id, global sample, e), so it
 * does not depend on which rank holds the sample. Backward recomputes the mask. */
void rt_dropout_fwd(const rt_tensor *x, float p, uint64_t seed, int64_t step, int layer_id,
                    int64_t sample0, rt_tensor *y);
void rt_dropout_bwd(const rt_tensor *dy, float p, uint64_t seed, int64_t step, int layer_id,
                    int64_t sample0, rt_tensor *dx);

/* y = a + b (same shape); dst += src (gradient fan-in). */
void rt_add_fwd(const rt_tensor *a, const rt_tensor *b, rt_tensor *y);
/* y = x * s, with s of x's size or one value per sample and channel of x [N,C,...] (a
 * squeeze-and-excitation gate, [N,C] or [N,C,1,...]): y[n,c,i] = x[n,c,i] s[n,c]. The
 * backward writes dx = dy s and ds = dy x (summed over i); either may be NULL. */
void rt_mul_fwd(const rt_tensor *x, const rt_tensor *s, rt_tensor *y);
void rt_mul_bwd(const rt_tensor *x, const rt_tensor *s, const rt_tensor *dy, rt_tensor *dx,
                rt_tensor *ds);
void rt_accumulate(rt_tensor *dst, const rt_tensor *src);
/* Concatenation of n inputs along axis; backward splits dy into the dxs (NULL skipped). */
void rt_concat_fwd(int n, const rt_tensor *const *xs, int axis, rt_tensor *y);
void rt_concat_bwd(const rt_tensor *dy, int axis, int n, rt_tensor *const *dxs);
/* Swaps axes a0 and a1 (any axes; the compiler only uses non-batch ones). Backward of
 * a transpose is the same transpose applied to dy. */
void rt_transpose(const rt_tensor *x, int a0, int a1, rt_tensor *y);
/* y = the elements start..start+y.shape[axis]-1 of x along axis (not the batch); the
 * backward writes dy there and zeros elsewhere of dx. */
void rt_slice_fwd(const rt_tensor *x, int axis, int start, rt_tensor *y);
void rt_slice_bwd(const rt_tensor *dy, int axis, int start, rt_tensor *dx);
/* Numerically stable softmax along axis. */
void rt_softmax_fwd(const rt_tensor *x, int axis, rt_tensor *y);
void rt_softmax_bwd(const rt_tensor *y, const rt_tensor *dy, int axis, rt_tensor *dx);

/* tokens i32 [N,T] -> y[N,T,D] = w[token] (+ pos[t] when pos != NULL, pos [P,D], P>=T). */
void rt_embedding_fwd(const rt_tensor *tokens, const rt_tensor *w, const rt_tensor *pos,
                      rt_tensor *y);
void rt_embedding_bwd(const rt_tensor *tokens, const rt_tensor *dy, rt_tensor *dw, rt_tensor *dpos);

/* A vision transformer's tokens: x[N,T,D] -> y[N,T+cls,D]; with cls (0 or 1) the class token
 * tok [D] is put first in every sample, and pos [T+cls,D] (NULL: none) is added to every row.
 * The backward writes dx and adds the sums over the samples to dtok and dpos; any of the three
 * may be NULL. */
void rt_tokens_fwd(const rt_tensor *x, int cls, const rt_tensor *tok, const rt_tensor *pos,
                   rt_tensor *y);
void rt_tokens_bwd(const rt_tensor *dy, int cls, rt_tensor *dx, rt_tensor *dtok, rt_tensor *dpos);

/* GPT-2 causal self-attention, x[N,T,D] -> y[N,T,D]; w_qkv[3D,D], b_qkv[3D],
 * w_o[D,D], b_o[D]. saved: f32 tensor of rt_attention_saved_size() elements, written
 * by forward (qkv, probabilities, merged heads) and read by backward. */
int64_t rt_attention_saved_size(int64_t N, int64_t T, int64_t D, int heads);
void rt_attention_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                      const rt_tensor *b_qkv, const rt_tensor *w_o, const rt_tensor *b_o, int heads,
                      rt_tensor *saved, rt_tensor *y);
/* The same with the mask chosen: causal = false lets every query see every key (the IR's
 * attention{causal = 0}). rt_attention_bwd serves both. */
void rt_attention_ex_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                         const rt_tensor *b_qkv, const rt_tensor *w_o, const rt_tensor *b_o,
                         int heads, bool causal, rt_tensor *saved, rt_tensor *y);
void rt_attention_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w_qkv,
                      const rt_tensor *w_o, int heads, const rt_tensor *saved, const rt_tensor *dy,
                      rt_tensor *dx, rt_tensor *dw_qkv, rt_tensor *db_qkv, rt_tensor *dw_o,
                      rt_tensor *db_o);

/* Cross entropy of logits [M,C] (or [N,T,V], M = N*T) against i32 labels [M]. Returns
 * this shard's PARTIAL loss sum(-log p[label]) / global_count, where global_count is
 * the number of rows of the GLOBAL batch (B, or B*T over tokens); the job's loss is
 * the sum over ranks (rt_world_sum). Backward writes dlogits = (softmax - onehot) /
 * global_count, so each rank's gradients are its slice of the full-batch gradient. */
double rt_cross_entropy_fwd(const rt_tensor *logits, const rt_tensor *labels, int64_t global_count);
void rt_cross_entropy_bwd(const rt_tensor *logits, const rt_tensor *labels, int64_t global_count,
                          rt_tensor *dlogits);
/* The foreground job's loss gradient: rt_cross_entropy_bwd's times the loss scale S
 * (rt_loss_scale(); 1 when loss scaling is off), so that the backward pass computes S
 * times every gradient and small gradients survive 16-bit arithmetic. The product is
 * formed before dlogits is stored, and rounded once: scaled afterwards, a 16-bit loss
 * gradient would already have lost what underflowed (a vocabulary's worth of tiny
 * probabilities divided by the global count). */
void rt_cross_entropy_bwd_scaled(const rt_tensor *logits, const rt_tensor *labels,
                                 int64_t global_count, rt_tensor *dlogits);
/* Number of rows whose argmax equals the label. */
int64_t rt_correct_count(const rt_tensor *logits, const rt_tensor *labels);

/* ---- data ---------------------------------------------------------------------- */

typedef struct rt_data rt_data;
/* Opens the data source chosen by --data. The input of one sample has shape
 * sample_shape (f32 images, or i32 tokens in [0, input_vocab) when in_dtype is
 * RT_I32); labels are i32 in [0, num_classes), labels_per_sample per sample (1 for
 * classification, T for language models). fmnist requires sample shape [1,28,28] or
 * [784], 10 classes; a missing or malformed file is a fatal error naming the path. */
rt_data *rt_data_open(const rt_options *o, int ndim, const int64_t *sample_shape, rt_dtype in_dtype,
                      int64_t input_vocab, int64_t num_classes, int64_t labels_per_sample);
void rt_data_close(rt_data *d);
/* Fills x and labels with samples [s0, s1) of global batch number `step` (batch size
 * B). The same global sample gets the same data on every rank. x or labels may be
 * NULL (the first layer needs the inputs, the loss layer the labels). */
void rt_data_batch(rt_data *d, int64_t step, int64_t B, int64_t s0, int64_t s1, rt_tensor *x,
                   rt_tensor *labels);
/* The test set (fmnist: t10k; synthetic: a fixed 1000-sample set). */
int64_t rt_data_test_count(const rt_data *d);
void rt_data_test_batch(rt_data *d, int64_t first, int64_t count, rt_tensor *x, rt_tensor *labels);
int64_t rt_data_train_count(const rt_data *d);

/* Reads an IDX file (optionally gzipped) into a malloc'd byte array; returns NULL and
 * writes the reason into err (with the path) on failure. dims receives the sizes. */
uint8_t *rt_idx_read(const char *path, int *ndims, int64_t dims[4], char *err, size_t errlen);

/* ---- checkpoints --------------------------------------------------------------- */

/* Writes this rank's parameters, buffers, optimizer state and the step (the next
 * iteration to run) to DIR/rank-R.ckpt via a temporary file + rename. rt_step_end
 * calls it every --checkpoint-every steps when rt_checkpoint_attach was called. */
void rt_checkpoint_save(const char *dir, const rt_params *ps, int64_t next_step);
/* Restores into ps; returns the next step to run. All ranks must agree on the step
 * (fatal otherwise). A missing file is fatal. */
int64_t rt_checkpoint_load(const char *dir, rt_params *ps);
/* Lets rt_step_end checkpoint ps per the options; with --resume, loads it and returns
 * the first step to run (else 0). */
int64_t rt_checkpoint_attach(rt_params *ps);

/* ---- weights in and out (--init, --save-weights) ------------------------------------- */

/* One entry of the model's weights table (its `weights` section, docs/language.md):
 * tensor `source` of a weights file (a PyTorch state_dict key) starts parameter `target`
 * ("layer.param", "layer.param@R", either with "^T"). Generated programs call it once per
 * entry, in the table's order, before rt_checkpoint_attach; the strings must outlive the
 * run (literals). --init reads a tensor that the file's metadata does not map by it, and
 * --save-weights without --init writes these names. */
void rt_weight_name(const char *source, const char *target);

/* ---- background work (GPU multiplexing) ------------------------------------------ */

/* A background job's model as the generated program gives it to the runtime: an
 * independent one-rank training job of `batch` samples per step, its step split into
 * units (docs/runtime.md): unit i < n is op i's forward, unit n + k op n-1-k's backward,
 * unit 2n (done by the runtime) the optimizer update, n = (nunits - 1) / 2. */
typedef struct rt_bg_model {
    const char *name; /* the model, for reports and the trace */
    int64_t batch;
    int nunits;
    /* Its data: the sample shape etc. as rt_data_open takes them, and the source
     * (the foreground's dataset when the model reads it, else synthetic). */
    rt_data_kind data;
    int ndim;
    const int64_t *sample_shape;
    rt_dtype in_dtype;
    int64_t vocab, classes, labels_per_sample;
    bool adam;
    rt_sgd sgd;
    rt_adam adam_cfg;
    /* Makes the copy's tensors and parameters (into the copy's pool and parameter set,
     * weights from `seed`); on this rank there is at most one copy of a model. */
    void (*setup)(rt_pool *pool, rt_params *ps, uint64_t seed);
    /* Runs unit u < nunits - 1 of step `step`; returns the unit's part of the loss. */
    double (*unit)(int u, rt_pool *pool, rt_data *data, uint64_t seed, int64_t step);
} rt_bg_model;

/* Places a copy of m on world rank `rank` with its seed and its step cut into nslices
 * slices (slice s runs units cut[s] .. cut[s+1]-1; cut[0] = 0, cut[nslices] = nunits).
 * Call it on every rank for every copy of the plan, after rt_init; the rank that hosts
 * the copy sets it up (unless --background off). A rank runs its copies' slices while it
 * waits for peers inside a training step (rt_step_begin .. rt_step_end), under the
 * slowdown guard: `slowdown` is the job's bound (0: 1.1; --slowdown overrides). */
void rt_bg_add(const rt_bg_model *m, int rank, uint64_t seed, int nslices, const int *cut,
               double slowdown);
/* Whether background work is on (--background on|off, default on). */
bool rt_bg_enabled(void);
/* Ends background work (collective over the world): every rank's copies stop, rank 0
 * prints per background job its steps and samples/s over the `elapsed` seconds of
 * training, and the foreground's measured slowdown. The generated program calls it
 * after its training loop, before evaluation. */
void rt_bg_finish(double elapsed);

/* ---- counter-based RNG (exposed for tests and data) ----------------------------- */

uint64_t rt_hash64(uint64_t x);
/* A uniform float in [0,1) that is a pure function of its five keys. */
float rt_rand_uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d);

#ifdef __cplusplus
}
#endif
#endif
