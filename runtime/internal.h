/* internal.h: what the files of libburstrt share and the public header does not show.
 * The shared code (this folder, compiled once into both libraries) talks to its backend
 * through device.h; a backend's own files (cpu/, cuda/) see this header and their own.
 * Sections name the file that defines each group. */
#ifndef BURSTRT_INTERNAL_H
#define BURSTRT_INTERNAL_H

#include "burstrt.h"
#include "device.h"

/* base.c: this rank's state, messages and errors, allocation, argument checks, the clock
 * (rt_fatal and rt_now are declared in burstrt.h, rt_message below) */
extern rt_options rt_opts_g;
void *rt_xmalloc(size_t n, const char *op);
void *rt_xcalloc(size_t n, size_t size, const char *op);
/* Fatal error unless t is non-NULL, of dtype dt, and has `ndim` dims (ndim<0: any). */
void rt_check(const rt_tensor *t, rt_dtype dt, int ndim, const char *op, const char *what);
/* "f32", "i32", "bf16" or "f16". */
const char *rt_dtype_name(rt_dtype dt);
void rt_check_numel(const rt_tensor *t, int64_t numel, const char *op, const char *what);
/* True between MPI_Init and MPI_Finalize (rt_init .. rt_finalize; core.c sets it). */
bool rt_mpi_running(void);
void rt_set_mpi_running(bool running);

/* core.c: the start and end of a run, the steps */
/* Ends every rank before training (--help, wrong world size): all ranks call it. */
_Noreturn void rt_exit_early(int status);

/* guard.c: the slowdown guard, a state machine over step times (its rules are there). */
#define GUARD_SETTLE     2 /* unmeasured steps without background before a window, at least */
#define GUARD_SETTLE_MAX 8 /* ... and at most (after-effects that last make it longer) */
#define GUARD_WINDOW     8 /* measured steps without background: a baseline window */
#define GUARD_SLIDE      8 /* steps a window may slide on while after-effects fade */
#define GUARD_PROBE_MAX  (GUARD_SETTLE_MAX + GUARD_WINDOW + GUARD_SLIDE)
#define GUARD_EARLY      3     /* windows GUARD_EARLY_GAP steps with background apart */
#define GUARD_EARLY_GAP  16    /* steps with background between the first windows, or ... */
#define GUARD_REPROBE    64    /* ... after, while the machine's speed holds */
#define GUARD_GAP_MIN    8     /* steps with background before a stale baseline ends a gap */
#define GUARD_STALE      4     /* steps with background that tell a stale baseline */
#define GUARD_Z          1.645 /* one-sided 95%: after-effects, a stale baseline */
typedef struct rt_guard {
    double bound;        /* the slowdown bound, >= 1 */
    int64_t begun, seen; /* steps begun, ended (the warm-up included) */
    int step_kind;       /* the step now running: warm-up, probe (no background), background */
    bool bg_step;        /* ... and whether it may run background work */
    int kinds[4];        /* the kinds of the steps begun and not yet ended, by step % 4 */
    int probes[4];       /* ... and the probe each belongs to */
    int nwin;            /* windows completed */
    double base;         /* the last window's mean step */
    double base_var;     /* ... and its steps' relative variance */
    double recent[3];    /* the last 3 windows' (a ring) */
    double steer;        /* the baseline steered by: base, or the median of recent if less */
    double aimf;         /* the aim, a multiple of base (the confidence bound's steering) */
    double allow;        /* seconds of background work the next step may hold */
    /* the schedule: a gap of steps with background work, then a probe without */
    bool probing;                    /* the next step begun is a probe's */
    bool probe_open;                 /* the probe's window is not closed yet */
    int probe_id;                    /* probes begun */
    int settle;                      /* settling steps before a window now */
    int clean;                       /* windows in a row that needed no more settling */
    double probe_t[GUARD_PROBE_MAX]; /* the probe's steps ended so far (the world's means) */
    int probe_n;
    int64_t gap_begun, gap_len; /* steps begun in the gap, and how many it has */
    double stale[GUARD_STALE];  /* the gap's last steps over the steering baseline (a ring) */
    int stale_n;
    bool stale_cut;   /* a stale baseline ended this segment's gap ... */
    int64_t cut_n;    /* ... after this many of its steps, */
    double cut_t;     /* ... which took these seconds */
    double shared[3]; /* what rt_guard_step_time asks the ranks to average */
    double seg_t;     /* the segment now running: seconds and steps since the last window */
    int64_t seg_n;
    double sum_t, sum_w;  /* closed segments: seconds; steps x baseline */
    double w2, w2r, w2r2; /* ... and their weights' squares times 1, r, r^2 (r = t / w) */
    int nseg;
    double var; /* the windows' relative step-to-step variance, summed, and how many */
    int nvar;
    /* totals for the exit report */
    double t_bg, used;        /* seconds of the steps with background work; of it */
    double ratio;             /* sum over steps with background of seconds / baseline */
    int64_t n_bg, n_fg, over; /* steps with background / window steps; steps over the bound */
    int64_t stale_gaps;       /* gaps a stale baseline ended early */
} rt_guard;
void rt_guard_init(rt_guard *g, double bound);
/* A step begins: whether it may run background work. */
bool rt_guard_step_begin(rt_guard *g);
/* It ended after `seconds` (from the end of the step before): returns how many numbers
 * of g->shared the ranks must replace by their mean over the ranks before
 * rt_guard_step_end (1; one rank: none). The next step may begin before that. */
int rt_guard_step_time(rt_guard *g, double seconds);
/* The step of the last rt_guard_step_time: `used` of its seconds were background
 * slices; `want`: the shortest slice left out for not fitting in the allowance (0: none). */
void rt_guard_step_end(rt_guard *g, double used, double want);
/* The foreground's slowdown measured so far (see guard.c), its standard error and the
 * one-sided 95% upper confidence bound the guard steers to the bound; false while
 * nothing is measured. */
bool rt_guard_estimate(const rt_guard *g, double *slowdown, double *se, double *upper);

/* idle.c: the waits' way to the background executor, which registers as the filler. */
typedef struct rt_idle_filler {
    bool (*ready)(void);               /* slices may run now */
    bool (*run_one)(void);             /* runs one slice if one fits; whether it ran one */
    bool (*running)(void);             /* a slice runs now */
    int (*share)(double *out);         /* rt_bg_share */
    void (*shared)(const double *sum); /* rt_bg_shared */
} rt_idle_filler;
void rt_idle_register(const rt_idle_filler *f);
/* Whether this rank has background slices it may run now (inside a step with background
 * work, allowance left). */
bool rt_bg_ready(void);
/* This rank waits for peers: runs one background slice when rt_bg_ready(); returns
 * whether it ran one (then the caller polls again at once, else it may sleep). Waits
 * poll with it between tests of their requests (comm_mpi.c, rankset.c). */
bool rt_bg_idle(void);
/* Whether a background slice is running on this rank now. */
bool rt_bg_running(void);
/* The device is idle and the foreground waits for whatever runs now (a GPU backend's
 * sync point): runs the slices that fit in what is left of the step's allowance. */
void rt_bg_fill(void);
/* The numbers this rank adds to a world sum (rt_world_sum) now: RT_BG_SHARE of them
 * inside a step of a program with background copies, with --background on or off (the
 * guard's of the step before, or zeros), else none (returns the count); rt_bg_shared
 * takes their sums over the world. */
#define RT_BG_SHARE 3
int rt_bg_share(double *out);
void rt_bg_shared(const double *sum);

/* background.c: the background executor (rt_bg_add), run under the guard. */
/* The step hooks of the guard (core.c). */
void rt_bg_step_begin(int64_t step);
void rt_bg_step_end(int64_t step, double seconds);
/* Every copy of this rank into the round of step R (DIR/step-R/rank-R.ckpt.bg-MODEL:
 * its parameters, optimizer state and completed steps), and back on --resume. */
void rt_bg_checkpoint_save(const char *dir, int64_t round_step);
void rt_bg_checkpoint_load(const char *dir, int64_t round_step);
/* Frees every copy (rt_finalize). */
void rt_bg_free(void);

/* options.c */
/* Parses the program's options into rt_opts_g; fatal on a bad one. False after --help
 * (printed by rank 0): the caller ends every rank. */
bool rt_parse_options(int argc, char **argv, const char *program);

/* Writes "burstrt: rank R: OP: message" and a newline to stderr with one write(2), so
 * that the lines of ranks sharing a terminal never interleave. */
void rt_message(const char *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* watchdog.c: progress of every rank, and a thread that ends the job when it stops. */
typedef enum {
    RT_PHASE_START,   /* rt_init to the first step */
    RT_PHASE_STEP,    /* rt_step_begin to rt_step_end */
    RT_PHASE_BETWEEN, /* after a step: not watched (evaluation may take long) */
    RT_PHASE_EVAL,    /* between steps after rt_progress: watched */
    RT_PHASE_SAVE,    /* writing a checkpoint */
    RT_PHASE_LOAD,    /* reading a checkpoint */
    RT_PHASE_FINISH,  /* rt_finalize */
} rt_phase;
/* Starts the thread (first thing in rt_init, before MPI). */
void rt_watchdog_start(char **argv);
/* Right before MPI_Init: exits if a peer of this node is ending the job already. */
void rt_watchdog_before_mpi(void);
/* After MPI_Init: the node's shared progress board (collective over the world). */
void rt_watchdog_board(void);
/* The limit: the time a watched rank may go without progress (0 = off). */
void rt_watchdog_limit(double seconds);
/* --step-timeout's largest value, in seconds (about 32 years): its microseconds fit int64. */
#define RT_STEP_TIMEOUT_MAX 1e9
/* rt_finalize began; then the thread ends and the board is freed (collective). */
void rt_watchdog_finishing(void);
void rt_watchdog_stop(void);
/* Progress events: a phase change, a traced op (name "" outside ops), anything else. */
void rt_progress_phase(rt_phase phase, int64_t step);
void rt_progress_op(const char *name);
void rt_progress_tick(void);
rt_phase rt_progress_now(int64_t *step);

/* nodes.c: where every rank runs, and heartbeats between nodes for the watchdog. */
typedef struct {
    int32_t phase, waiting; /* the sender's rt_phase and depth of waits */
    int32_t working;        /* its node's ranks that still make progress (not waiting) */
    int32_t pad;
    int64_t step;
    char op[48], wait[48]; /* the sender's op and the call it waits in */
} rt_node_beat;
/* rt_nodes_setup (after MPI_Init): mpi_glue.h. */
/* Nodes known (0 before set-up), this rank's node, a rank's node, a node's rank count,
 * host name and ranks ("2-3, 6"). */
int rt_nodes_count(void);
int rt_nodes_self(void);
int rt_nodes_of_rank(int rank);
int rt_nodes_size(int node);
const char *rt_nodes_host(int node);
const char *rt_nodes_host_of_rank(int rank);
void rt_nodes_ranks(int node, char *out, size_t cap);
/* rt_check_launch's test (core.c ends the job): whether the launch puts every planned
 * node of gpus_per_node ranks on one host of its own; when not, rank 0 has printed the
 * mapping that would, and the result is whether --allow-mismatched-launch lets it run. */
bool rt_nodes_launch_ok(int gpus_per_node);
/* The watchdog thread's tick: reads the heartbeats that arrived, sends this rank's when
 * due (once a second). */
void rt_nodes_beat(int64_t now_us, const rt_node_beat *mine);
/* When this node last heard from another (CLOCK_MONOTONIC; the end of set-up if never),
 * from which rank, and what it said; false for this node or without heartbeats. */
bool rt_nodes_heard(int node, int64_t *heard_us, int *rank, rt_node_beat *last);
/* After the watchdog thread has ended. */
void rt_nodes_stop(void);
/* Brackets a wait for other ranks (or the device): watched in every phase. */
void rt_wait_begin(const char *what);
void rt_wait_end(void);

/* tensor.c: pools, tensors and host access to tensor data */
/* Zeroed host memory owned (and freed) by the pool. */
void *rt_pool_alloc(rt_pool *pool, size_t bytes);
/* Host access for code that computes on the host (data, initialisers, checkpoints): t's
 * data itself where the backend's tensors live in host memory, else a host copy, filled
 * from the device when `read`. rt_host_done copies it back when `write` and frees it. */
void *rt_host_view(const rt_tensor *t, bool read, const char *op);
void rt_host_done(const rt_tensor *t, void *host, bool write, const char *op);

/* trace.c */
/* Fatal unless rank 0 can write --trace's file (checked at start). */
void rt_trace_check_path(void);
void rt_trace_init(void);
void rt_trace_write_and_free(const char *path);
void rt_trace_record_step(int64_t step, double t0, double t1);
/* Events recorded from now on go to track `tid` (0: the foreground); a track's name is
 * written once into the trace (thread_name metadata). */
void rt_trace_track(int tid, const char *name);
/* Records a complete event on track tid. */
void rt_trace_event(int tid, const char *name, double t0, double t1);
/* Names track tid (once) without moving where events go. */
void rt_trace_name_track(int tid, const char *name);
/* The tracks of the data loader's workers (after the background copies' 1..64). */
#define RT_TRACE_DATA_TID    65
#define RT_TRACE_DATA_TRACKS 16

/* loader.c: the pool of decoding threads and the prefetch queue of image batches. fn
 * decodes sample idx of stream `stream`, epoch `epoch`, into out (row_floats floats) on worker `worker`;
 * false with the cause (naming the file) in err. */
#define RT_LOADER_ERR         1400
#define RT_LOADER_MAX_WORKERS 256
#define RT_LOADER_AHEAD       2 /* training batches decoded ahead of the one asked for */
typedef bool (*rt_loader_fn)(void *ctx, int worker, uint64_t stream, int64_t idx, int64_t epoch,
                             float *out, char *err, size_t errlen);
typedef struct rt_loader rt_loader;
rt_loader *rt_loader_new(int nworkers, int64_t row_floats, rt_loader_fn fn, void *ctx);
void rt_loader_free(rt_loader *l);
/* Announces batch (stream, g0, count), rows idx[i] of epoch[i]: decoded in the background
 * if a slot is free. */
void rt_loader_prefetch(rt_loader *l, uint64_t stream, int64_t g0, int64_t count,
                        const int64_t *idx, const int64_t *epoch);
/* The batch's rows into out (count x row_floats), from the queue or decoded now. Returns
 * how many rows failed (zeroed); the first of them in *bad_row and its cause in err. */
int64_t rt_loader_get(rt_loader *l, uint64_t stream, int64_t g0, int64_t count, const int64_t *idx,
                      const int64_t *epoch, float *out, int64_t *bad_row, char *err, size_t errlen);
/* Name of the op currently on the trace stack (for watchdog messages). */
const char *rt_current_op(void);

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
/* t is an f32 tensor of numel elements (parameters, their gradients, statistics). */
void rt_check_f32(const rt_tensor *t, int64_t numel, const char *op, const char *what);
/* t is an activation (or its gradient) of numel elements: its dtype is rt_storage_dtype(). */
void rt_check_act(const rt_tensor *t, int64_t numel, const char *op, const char *what);
/* a and b are activations of equal element counts. */
void rt_same_numel(const char *op, const rt_tensor *a, const char *an, const rt_tensor *b,
                   const char *bn);
void rt_dropout_check(const char *op, const rt_tensor *x, float p, const rt_tensor *y);
/* mul's operands: s of x's size, or of one value per sample and channel of x [N,C,...];
 * y (output or its gradient) of x's size. Returns how many elements of x each s covers. */
/* slice's operands: x (or dx) and y (or dy) alike but on axis, where y's
 * [start, start + len) lies inside x's. Sets the rows before the axis, the lengths of
 * x's and y's axis and the elements after it. */
void rt_slice_check(const char *op, const rt_tensor *x, int axis, int start, const rt_tensor *y,
                    int64_t *outer, int64_t *xlen, int64_t *ylen, int64_t *inner);
int64_t rt_mul_check(const char *op, const rt_tensor *x, const rt_tensor *s, const rt_tensor *y,
                     const char *yname);
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
int64_t rt_batchnorm_fwd_check(const char *op, const rt_comm *comm, const rt_tensor *x,
                               const rt_tensor *gamma, const rt_tensor *beta,
                               const rt_tensor *running_mean, const rt_tensor *running_var,
                               const rt_tensor *saved, const rt_tensor *y);
int64_t rt_batchnorm_bwd_check(const char *op, const rt_comm *comm, const rt_tensor *x,
                               const rt_tensor *gamma, const rt_tensor *saved, const rt_tensor *dy,
                               const rt_tensor *dx, const rt_tensor *dgamma,
                               const rt_tensor *dbeta);
/* A normalisation's parameter gradients, where asked for: f32, n elements each. */
void rt_norm_grads_check(const char *op, int64_t n, const rt_tensor *dgamma,
                         const rt_tensor *dbeta);
void rt_layernorm_dims(const char *op, const rt_tensor *x, const rt_tensor *gamma,
                       const rt_tensor *saved, int64_t *M, int64_t *D);
/* A concatenation seen as [outer, parts along the axis, inner]: row = elements of y per
 * outer index. */
typedef struct rt_concat_dims {
    int64_t outer, inner, row;
} rt_concat_dims;
rt_concat_dims rt_concat_check(const char *op, const rt_tensor *y, int n,
                               const rt_tensor *const *xs, int axis);
/* Orders the axes (*a0 < *a1) and checks y is x with them swapped. */
void rt_transpose_check(const char *op, const rt_tensor *x, int *a0, int *a1, const rt_tensor *y);
void rt_softmax_dims(const char *op, const rt_tensor *x, int axis, int64_t *outer, int64_t *dim,
                     int64_t *inner);
void rt_softmax_bwd_check(const char *op, const rt_tensor *y, const rt_tensor *dy, int axis,
                          const rt_tensor *dx, int64_t *outer, int64_t *dim, int64_t *inner);
void rt_linear_dims(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t *M, int64_t *in,
                    int64_t *out);
void rt_linear_fwd_check(const char *op, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                         const rt_tensor *y, int64_t *M, int64_t *in, int64_t *out);
void rt_linear_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w, int64_t M,
                         int64_t out, const rt_tensor *dy, const rt_tensor *dx, const rt_tensor *dw,
                         const rt_tensor *db);
void rt_matmul_dims(const char *op, const rt_tensor *a, const rt_tensor *b, int64_t *B, int64_t *m,
                    int64_t *k, int64_t *n);
void rt_matmul_bwd_check(const char *op, const rt_tensor *a, const rt_tensor *b,
                         const rt_tensor *dc, const rt_tensor *da, const rt_tensor *db, int64_t *B,
                         int64_t *m, int64_t *k, int64_t *n);
rt_attn_dims rt_attention_check(const char *op, const rt_tensor *x, const rt_tensor *w_qkv,
                                const rt_tensor *w_o, int heads, const rt_tensor *saved);
void rt_attention_bwd_check(const char *op, const rt_tensor *x, const rt_tensor *w_qkv,
                            const rt_tensor *w_o, const rt_attn_dims *d, const rt_tensor *dy,
                            const rt_tensor *dx, const rt_tensor *dw_qkv, const rt_tensor *db_qkv,
                            const rt_tensor *dw_o, const rt_tensor *db_o);
void rt_embedding_dims(const char *op, const rt_tensor *tokens, const rt_tensor *w,
                       const rt_tensor *pos, const rt_tensor *y, int64_t *NT, int64_t *T,
                       int64_t *D);
/* tokens' operands: y (or dy) [N,T+cls,D], x (or dx, may be NULL) [N,T,D], the class token
 * tok [D] (cls only) and positions pos [T+cls,D], either NULL; fills N, T (of x) and D. */
void rt_tokens_dims(const char *op, const rt_tensor *x, int cls, const rt_tensor *tok,
                    const rt_tensor *pos, const rt_tensor *y, int64_t *N, int64_t *T, int64_t *D);
void rt_cross_entropy_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t global_count, int64_t *M, int64_t *C);
/* The factor of the loss gradient: (softmax - onehot) times 1/global_count times the
 * loss scale, as both backends round it (scaling by a power of two is exact, so the
 * scaled gradient is the unscaled one times S, bit for bit, unless it overflows). */
float rt_cross_entropy_factor(int64_t global_count, float scale);
void rt_correct_count_dims(const char *op, const rt_tensor *logits, const rt_tensor *labels,
                           int64_t *M, int64_t *C);

/* rankset.c: rank sets, the shard rule and the reshard plan */
struct rt_comm {
    int n;                   /* ranks in the set */
    int *ranks;              /* world ranks, in set order */
    int index;               /* this rank's index in ranks, or -1 */
    struct rt_comm_mpi *mpi; /* the set's MPI communicator (mpi_glue.h) */
    void *transport;         /* the backend's state of the set (an NCCL communicator) */
    rt_comm *next;
};
/* Sum-all-reduce of doubles within the set (no-op for NULL, one rank or non-members):
 * the statistics of batch normalisation over a rank set, in device memory. */
void rt_allreduce_f64(const rt_comm *c, double *data, int64_t n, const char *op);
void rt_comm_free_all(void);
/* Every rank set made so far (follow ->next). */
rt_comm *rt_comm_list(void);

/* What one rank sends, receives and copies in a reshard: the sample ranges where its
 * shard in one set meets another rank's shard in the other, receives first (in the
 * producers' order), then sends and local copies (in the consumers' order). */
typedef enum { RT_XFER_RECV, RT_XFER_SEND, RT_XFER_COPY } rt_xfer_dir;
typedef struct rt_xfer {
    rt_xfer_dir dir;
    int peer;      /* world rank of the other side (this rank for a copy) */
    int64_t first; /* first global sample */
    int64_t count; /* samples */
} rt_xfer;
typedef struct rt_transfers {
    bool producer, consumer; /* this rank is in the source / destination set */
    int64_t src0, src1;      /* its samples [src0, src1) in the source set */
    int64_t dst0, dst1;      /* and in the destination set */
    int n;
    rt_xfer *x; /* malloc'd; rt_transfers_free */
} rt_transfers;
/* The transfers of this rank for moving a global batch of B samples from `from` to `to`;
 * false (and nothing to free) when this rank is in neither set. */
bool rt_reshard_plan(const rt_comm *from, const rt_comm *to, int64_t B, rt_transfers *t);
void rt_transfers_free(rt_transfers *t);
/* The ids of split-phase reshards (rt_reshard_start) are below RT_RESHARD_IDS; the
 * transport's tag of id is id + 1, tag 0 is the blocking rt_reshard's. */
#define RT_RESHARD_IDS  (1 << 24)
#define RT_RESHARD_TAGS (RT_RESHARD_IDS + 1)
/* At the end: a split-phase reshard started and never waited for is a fatal error. */
void rt_reshards_free(void);

/* loss_scale.c: the foreground's loss scaler (PyTorch's GradScaler) */
typedef struct rt_loss_scaler {
    bool on;      /* gradients are scaled */
    bool dynamic; /* the scale adapts (else it is fixed) */
    double scale; /* S, a value an f32 holds */
    double growth, backoff;
    int64_t interval;
    int64_t clean;   /* steps without an overflow since the scale last changed */
    int64_t skipped; /* steps skipped in this run */
} rt_loss_scaler;
/* The scaler, set from the options on first use (--loss-scale; the default follows the
 * compute dtype, rt_set_compute_dtype). */
rt_loss_scaler *rt_loss_scaler_get(void);
/* Sets it from the options again (tests change rt_opts_g between cases). */
void rt_loss_scaler_configure(void);
/* One step's outcome, GradScaler.update: on an overflow the scale is multiplied by the
 * backoff factor, after `interval` clean steps in a row by the growth factor (where the
 * result is finite in f32); a fixed scale never changes. */
void rt_loss_scaler_update(rt_loss_scaler *s, bool overflow);
/* Rank 0 says the scale at the end and how many steps were skipped (rt_finalize), when
 * loss scaling was on. */
void rt_loss_scale_report(void);

/* weights.c: --init, --init-partial, --save-weights */
/* Checks at start that rank 0 can write --save-weights' file. */
void rt_weights_check_output(void);
/* Loads --init into ps (every rank its own parameters); rt_checkpoint_attach calls it
 * before a --resume restores the checkpoint over it. */
void rt_weights_attach(rt_params *ps);
/* Writes --save-weights when next_step reaches --iterations (all ranks call it). */
void rt_weights_maybe_save(int64_t next_step);
void rt_weights_free(void);

/* checkpoint.c */
/* Makes --checkpoint-dir (and its parents) and checks that this rank can write there. */
void rt_checkpoint_check_dir(void);
void rt_checkpoint_maybe_save(int64_t step);
/* More files of a round, written by those above (background.c: its copies'): save runs
 * after this rank's own file and before the round is committed, load after the round's
 * file is read back on --resume. Registering again replaces them. */
void rt_checkpoint_also(void (*save)(const char *dir, int64_t round_step),
                        void (*load)(const char *dir, int64_t round_step));
/* This rank's file DIR/step-R/rank-R.ckptSUFFIX of the round of step R: ps with the
 * given step and seed in its header, and the loss scaler's state (ls NULL: none), through
 * a temporary file, durable on return. */
void rt_checkpoint_write(const char *dir, int64_t round_step, const char *suffix,
                         const rt_params *ps, int64_t step, uint64_t seed,
                         const rt_loss_scaler *ls);
/* Loads such a file into ps after checking every field (step: the header's must be
 * this; -1: any, and a missing file returns -1); returns the header's step. A dynamic
 * scaler ls continues from the file's scale and clean-step count when the file has one
 * (NULL: the file's are not used). */
int64_t rt_checkpoint_read(const char *dir, int64_t round_step, const char *suffix, rt_params *ps,
                           int64_t step, uint64_t seed, rt_loss_scaler *ls);

/* optim.c: the Adam step count that checkpoints carry */
int64_t rt_params_adam_step(const rt_params *ps);
void rt_params_set_adam_step(rt_params *ps, int64_t t);
int rt_params_count(const rt_params *ps);
rt_param *rt_params_at(const rt_params *ps, int i);
/* The params set's overflow flag for loss scaling: one device int32, made on first use. */
int32_t *rt_params_overflow_flag(rt_params *ps);
/* Optimizer state k of p, made (zero) on first use. */
rt_tensor *rt_param_state(rt_params *ps, rt_param *p, int k);

/* Each backend's kernels for the optimizers' per-element updates (PyTorch's rules; buf is
 * NULL without momentum; a zero buffer gives the first step's update). */
void rt_sgd_update(float *w, const float *g, float *buf, int64_t n, float lr, float momentum,
                   float weight_decay, bool nesterov);
void rt_adam_update(float *w, const float *g, float *m, float *v, int64_t n, float step,
                    float beta1, float beta2, float eps, float weight_decay, float bc2_sqrt);

#endif
