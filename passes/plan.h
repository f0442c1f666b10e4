/*
 * plan.h: the burst planner's own problem description, cost model and solver.
 *
 * This header is independent of the IR: a planning problem is a cluster, a
 * graph of layers with per-sample costs, and a global batch. passes/plan_ir.c
 * builds one from an ir_module job; the unit tests and benchmarks build them
 * directly. The planner decides how many GPUs every layer uses (any count
 * 1..min(G, B)), which ranks, and whether the branches of a series-parallel
 * block run concurrently on disjoint GPUs or one after the other.
 * docs/plan.md documents the formulas.
 */
#ifndef BURSTC_PLAN_H
#define BURSTC_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Classes of layers for the utilisation curve of the compute model. */
typedef enum plan_class { PC_CONV, PC_LINEAR, PC_OTHER, PC_POOL, PC_COUNT } plan_class;

typedef struct plan_cluster {
    int gpus; /* G */
    int gpus_per_node;
    double intra_alpha, intra_bw; /* seconds, bytes/s per direction */
    double inter_alpha, inter_bw; /* per node link */
    double peak_flops;            /* FLOP/s for the job's dtype */
    double mem_bw;                /* bytes/s */
    double mem_bytes;             /* capacity of one GPU; 0: unlimited */
    double launch;                /* seconds per kernel */
    /* This device's own utilisation curve (all classes); umax 0: the
	 * calibrated plan_util_curve. */
    double umax, whalf;
    /* Per class, overriding the above when > 0: its own curve (cls_umax,
	 * cls_whalf) and the memory bandwidth its kernels reach (cls_bw). */
    double cls_umax[PC_COUNT], cls_whalf[PC_COUNT], cls_bw[PC_COUNT];
    /* Physical cores of a node that its ranks share; 0: one per rank (a
	 * GPU). A layer with more ranks on a node than it has cores computes
	 * slower (plan_core_share). */
    int cores;
    /* Seconds a message step waits on a node whose ranks outnumber its
	 * cores (the peer must be scheduled first: about one scheduler time
	 * slice); plan_step_wait. plan_ir.c gives PLAN_SLICE_DEFAULT when the
	 * cluster does not say; hand-built problems: 0. */
    double slice;
    /* How a synchronised batch norm exchanges its forward statistics: the CPU
     * backend (the device called cpu) all-gathers every rank's in one
     * all-reduce of k(2C + 1) f64; the CUDA backend all-reduces sums twice
     * (C + 1, then C f64). plan_layer_sync_time. */
    bool sync_gather;
} plan_cluster;

/* The slice of a cluster that does not give one, in seconds: 4 ranks on
 * this 2-core machine, each computing 5 ms of CPU time then joining one
 * 8-byte MPI_Allreduce (a tree of 4 steps in this model), take 0.23 ms a
 * step longer (median of 3) than with no all-reduce; 0.23 ms / 4 steps
 * (docs/plan.md, "Ranks sharing cores"). */
#define PLAN_SLICE_DEFAULT 60e-6

/* How DeepPool's planner names a layer (passes/deeppool.c decides with it):
 * PDK_GENERIC is its catch-all layer (batch split, whole-tensor transfers, no
 * gradient sync); PDK_ABSENT is an op DeepPool's model descriptions leave out
 * of its layer graph (dropout, the loss), which runs with its input's GPUs. */
typedef enum plan_dp_kind {
    PDK_GENERIC,
    PDK_CONV2D,
    PDK_MAXPOOL,
    PDK_AVGPOOL,
    PDK_ADAVGPOOL,
    PDK_RELU,
    PDK_FLATTEN,
    PDK_LINEAR,
    PDK_CONCAT,
    PDK_BATCHNORM,
    PDK_ABSENT
} plan_dp_kind;

/* The shapes DeepPool's rules read; passes/plan_ir.c fills them, a problem
 * built by hand may leave them zero (a generic layer). */
typedef struct plan_dp_layer {
    plan_dp_kind kind;
    int64_t c, h, w;                   /* first input [C, H, W] (rank 3), else 0 */
    int64_t oh, ow;                    /* output [C, H, W]: its height and width */
    int64_t kernel[2];                 /* conv2d */
    bool kernel_pair;                  /* conv2d: not square (DeepPool's kernel_size tuple) */
    int64_t in_features, out_features; /* linear */
} plan_dp_layer;

/* A measured time table: total forward+backward seconds at batch sizes. */
typedef struct plan_timing {
    int n;
    int64_t *batch; /* ascending */
    double *seconds;
    double *fwd; /* the forward part of seconds (a `layer` line), or NULL */
} plan_timing;

typedef struct plan_layer {
    const char *name;
    plan_class cls;
    double fwd_flops, bwd_flops;  /* per sample */
    double fwd_elems, bwd_elems;  /* elements read+written per sample */
    double params;                /* trainable parameter elements */
    double saved;                 /* elements per sample kept for backward */
    int fwd_kernels, bwd_kernels; /* launches; 0 counts as 1 */
    /* batchnorm2d: 2C + 1, the f64 statistics per rank that its all-reduces
     * carry when it runs on several ranks (SyncBN, runtime/cpu/norm.c); else 0 */
    double sync_stats;
    const plan_timing *measured; /* optional: replaces the analytic model */
    /* The measured inputs (`burstc profile`) this layer consumes first: their
     * data arrive on its ranks before its forward, plan_problem.data[data_first
     * .. data_first + ndata). */
    int data_first, ndata;
    /* A head that uses an embedding's table as its weight (linear's tie): that layer's
     * index plus one, whose ranks this layer must share (plan_tie_layers); 0: none. */
    int ties_to;
    plan_dp_layer dp; /* how DeepPool sees it (strategy deeppool) */
} plan_layer;

/* A data dependency: per-sample activation elements from layer `from` to `to`
 * (the gradient flows back with the same size). */
typedef struct plan_edge {
    int from, to;
    double elems;
} plan_edge;

/* dp: every layer on all GPUs; deeppool: DeepPool's own planner
 * (deeppool.c), priced by burstc's model; pow2: burstc's DP over powers of
 * two; burst: burstc's DP over every count. */
typedef enum plan_strategy { PS_DP, PS_DEEPPOOL, PS_POW2, PS_BURST, PS_COUNT } plan_strategy;

typedef struct plan_problem {
    plan_cluster cluster;
    int nlayers;
    plan_layer *layers; /* topological order */
    int nedges;
    plan_edge *edges;     /* from < to */
    int64_t batch;        /* global batch B */
    int dtype_bytes;      /* activations, gradients, parameters */
    int optimizer_states; /* extra per-parameter tensors: SGD momentum 1, Adam 2 */
    double amp_limit;     /* per layer; <= 0: none */
    double gpu_budget;    /* global: GPU-seconds <= budget x one-GPU time; <= 0: none */
    double price;         /* Lagrangian price on GPU-seconds (seconds per GPU-second) */
    /* Whether a layer's gradient all-reduce overlaps the backward of the
	 * layers before it. false (the default) is what the runtime does today:
	 * each all-reduce runs, blocking, right after its layer's backward. */
    bool ar_overlap;
    const plan_timing **data; /* the measured inputs' tables (plan_layer.data_first) */
    /* The optimizer's update of update_params parameter elements, measured
     * per step at per-GPU batches (`burstc profile`'s optimizer lines), or
     * NULL: not modelled. A layer's share is in proportion to its parameters;
     * every rank of a layer updates the layer's whole parameters. */
    const plan_timing *update;
    double update_params;
} plan_problem;

/* Per-layer result and breakdown, all in seconds per iteration. */
typedef struct plan_layer_result {
    int k;             /* GPU count */
    int first;         /* ranks first .. first + k - 1 (after placement) */
    int64_t shard;     /* largest per-GPU batch */
    double fwd, bwd;   /* compute at the largest shard */
    double data;       /* of fwd: its inputs' data arriving (a measured profile's input lines) */
    double update;     /* of bwd: its share of the optimizer's update (a measured profile's) */
    double reshard;    /* forward + backward resharding into this layer */
    double allreduce;  /* gradient all-reduce (whole) */
    double ar_exposed; /* the part not hidden behind earlier backward */
    double amplification;
    double mem_bytes; /* per-GPU footprint of this layer */
} plan_layer_result;

typedef struct plan_result {
    plan_strategy strategy;
    /* The search whose plan this is: strategy, except for burst, whose space holds pow2's
     * plans (and dp's where its counts survive burst's pruning) and which returns the one
     * of them whose schedule is best (plan_solve) */
    plan_strategy found_by;
    int nlayers;
    plan_layer_result *layer;
    bool exact;         /* graph was series-parallel (DP, not the heuristic) */
    int nconcurrent;    /* blocks whose branches run concurrently */
    double objective;   /* time + price x GPU-seconds of this plan */
    double time;        /* predicted iteration time: the schedule's (plan_price_schedule:
                           its timeline's ideal time, what `burstc sim --ideal` plays) */
    double eval_time;   /* the evaluator's (plan_evaluate's) time, the DP's objective */
    double gpu_seconds; /* GPU-seconds per iteration */
    double samples_per_s;
    double cross_node_bytes; /* per iteration */
    double peak_mem;         /* busiest GPU, bytes */
    int peak_mem_rank;
    /* deeppool: DeepPool's own estimate of its plan (its cost model); the
     * fields above are burstc's pricing. 0 for the other strategies. */
    double own_time, own_gpu_seconds;
} plan_result;

/* Blocks with at most this many branches (with layers) may run them
 * concurrently; larger ones run them one after the other. */
#define PLAN_MAX_CONCURRENT 6

/* costmodel.c */

/* Per class: the utilisation curve u(w) = umax * (w / (w + whalf))^gamma,
 * w = FLOPs of one kernel, and the fraction of the memory bandwidth reached. */
typedef struct plan_util {
    double umax, whalf, gamma, mem_eff;
} plan_util;
extern plan_util plan_util_curve[PC_COUNT];

/* The part of plan_layer_time's forward that is its inputs' data arriving at batch b (a
 * measured profile's input lines; 0 without them). */
double plan_layer_data_time(const plan_problem *p, const plan_layer *l, int64_t b);
/* The part of plan_layer_time's backward that is the layer's share of the optimizer's
 * update at batch b (its parameters over the model's; 0 without a measured update). */
double plan_layer_update_time(const plan_problem *p, const plan_layer *l, int64_t b);
/* Forward and backward seconds of layer at per-GPU batch b: the analytic
 * model's or the measured profile's, with the measured inputs it consumes
 * first added to its forward and the measured optimizer's update of its
 * parameters to its backward. */
void plan_layer_time(const plan_problem *p, const plan_layer *l, int64_t b, double *fwd,
                     double *bwd);
/* How much slower a layer computes on k ranks from rank `first` than on
 * ranks of their own: max over the nodes it runs on of max(1, its ranks on
 * that node / the node's cores); 1 when the cluster gives every rank a core
 * (cores 0). The time-sliced ranks of a node share its cores evenly. */
double plan_core_share(const plan_cluster *c, int first, int k);
/* Analytic only (ignores l->measured). */
void plan_layer_time_analytic(const plan_cluster *c, int dtype_bytes, const plan_layer *l,
                              int64_t b, double *fwd, double *bwd);
/* Interpolates a measured table at batch b (linear; beyond the largest batch
 * proportional to b; below the smallest, the smallest's time). */
double plan_timing_at(const plan_timing *t, int64_t b);

/* commcost.c: the alpha-beta communication model. */
/* The extra latency of every message step of a collective or reshard: the
 * cluster's slice when its nodes hold more ranks than cores (cores > 0,
 * gpus_per_node > cores), else 0. Every rank of a node is a process there
 * whether or not it computes, so a step waits for its peer's turn on a core. */
double plan_step_wait(const plan_cluster *c);
/* The loss sum (every rank adds its loss, rt_world_sum, 8 bytes): the
 * all-reduce's steps x plan_step_wait; its alpha-beta time is not priced. */
double plan_loss_sum_time(const plan_cluster *c);

/* Seconds to all-reduce `bytes` among k ranks starting at rank `first`;
 * min of ring and tree. */
double plan_allreduce_time(const plan_cluster *c, int first, int k, double bytes);
/* The same choice spelled out (the simulator plays it over links): ring
 * (2(k-1) steps, 2(k-1)/k x bytes over every link) or tree (2 ceil(log2 k)
 * steps, 2 x bytes over every link); time = steps x alpha + link_bytes / bw,
 * with the network's alpha and min(network, intra-node) bandwidth when the
 * ranks span nodes. All zero for k <= 1 or no bytes. */
typedef struct plan_allreduce_algo {
    bool tree;
    int steps;
    double alpha, bw, link_bytes, time;
} plan_allreduce_algo;
plan_allreduce_algo plan_allreduce_choice(const plan_cluster *c, int first, int k, double bytes);
/* Moving sample ranges of a batch B split over k1 ranks from r1 to k2 ranks
 * from r2 (uneven splits: the first B mod k shards get one more). */
typedef struct plan_reshard {
    double gpu_samples;   /* most samples any one GPU sends or receives */
    int gpu_msgs;         /* most messages any one GPU sends or receives */
    double node_samples;  /* most samples any node sends or receives off-node */
    double cross_samples; /* total samples crossing between nodes */
} plan_reshard;
plan_reshard plan_reshard_count(int64_t B, int gpn, int r1, int k1, int r2, int k2);
double plan_reshard_time(const plan_cluster *c, const plan_reshard *r, double bytes_per_sample);
int64_t plan_shard(int64_t B, int k); /* the largest shard: ceil(B/k) */

/* price.c: what a layer and an edge cost at the ranks they run on; shared by
 * the planner's DP and the evaluator, so both see the same numbers. */

typedef struct plan_reshard_key {
    int k1, k2, r1, d;
} plan_reshard_key;

typedef struct plan_pricer {
    const plan_problem *p;
    int G, gpn, kmax;
    int *nin;            /* in-degree of each layer */
    double *bwd1, *hide; /* ar_overlap: backward at one sample, and its prefix sums */
    int *kidx, nk;       /* count -> index of the rank-0 memo, or -1 */
    plan_reshard *rs0;   /* [nk][nk] counts of both sets at rank 0 */
    unsigned char *rs0_done;
    plan_reshard_key *hkey; /* counts at other offsets */
    plan_reshard *hval;
    size_t hn, hcap;
    plan_reshard *small; /* counts and ranks below 9: dense, made when first needed */
    unsigned char *small_done;
} plan_pricer;

/* counts: the GPU counts the caller will price (memoised densely at rank 0). */
void plan_pricer_init(plan_pricer *pr, const plan_problem *p, const int *counts, int ncounts);
void plan_pricer_free(plan_pricer *pr);
/* Reshard counts between k1 ranks from r1 and k2 ranks from r2 (memoised). */
const plan_reshard *plan_price_reshard(plan_pricer *pr, int k1, int r1, int k2, int r2);
/* Gradient all-reduce of layer l among k ranks from rank o. */
double plan_price_allreduce(const plan_pricer *pr, int l, int k, int o);
/* The collectives inside layer l's forward and backward on k ranks from o:
 * a synchronised batch norm all-reduces its statistics in both (forward, on
 * the CPU backend (sync_gather): every rank's 2C + 1 in its slot, k(2C + 1)
 * f64; on the CUDA backend the sums, C + 1 f64, then the squared deviations,
 * C f64; backward: 2C + 1 f64 sums). 0 on one rank and for other layers. */
void plan_layer_sync_time(const plan_cluster *c, const plan_layer *l, int o, int k, double *fwd,
                          double *bwd);
/* Layer l on k ranks from o, with compute fwd + bwd at its shard: time (with
 * its cores' share, its collectives and the exposed all-reduce), GPU-seconds
 * and the exposed all-reduce (all of it unless ar_overlap). */
void plan_price_node(const plan_pricer *pr, int l, int k, int o, double fwd, double bwd,
                     double *time, double *gpu, double *exposed);
/* Edge e from its layer u (ku ranks from ou, backward bwd_u) to v (kv from
 * ov): resharding both ways, plus with ar_overlap v's exposed all-reduce
 * when u is v's only input. reshard and exposed may be NULL. */
void plan_price_edge(plan_pricer *pr, int e, int ku, int ou, double bwd_u, int kv, int ov,
                     double *time, double *gpu, double *reshard, double *exposed);

/* The same for every pair of end candidates at once (the DP's leaf tables):
 * S[i][j] = alpha x time + beta x GPU-seconds, T[i][j] = time (T may be S). */
void plan_price_edge_table(plan_pricer *pr, int e, int nu, const int *ku, const int *fu,
                           const double *bwd_u, int nv, const int *kv, const int *fv, double alpha,
                           double beta, double *S, double *T);

/* minplus.c */

/* best[j] = min(best[j], base + row[j]) for j < n, with bestm[j] = m where
 * it improves. */
typedef void plan_min_plus_fn(double *restrict best, double *restrict bestm,
                              const double *restrict row, double base, double m, int n);
/* The fastest version for this CPU. */
plan_min_plus_fn *plan_min_plus(void);
/* One split of a block's subset DP (planner.c) folded into its running
 * minimum (rs, rt) over n entries: where the split is lower, r takes it
 * and arg takes code. Side by side (conc): time max(at, bt), objective
 * al x time + (as - al x at) + (bs - al x bt), skipped where as or bs is
 * infinite; in sequence: as + bs, time at + bt. rt NULL: the objective is
 * the time alone (at and bt are as and bs). */
typedef void plan_split_fn(double *restrict rs, double *restrict rt, int32_t *restrict arg,
                           const double *as, const double *at, const double *bs, const double *bt,
                           double al, int32_t code, int n);
/* The fastest version for this CPU: conc, or in sequence. */
plan_split_fn *plan_block_split(bool conc);

/* solve.c */

/* Plans the problem with a strategy: the fastest plan (or, with p->price,
 * the lowest time + price x GPU-seconds; with p->gpu_budget, the fastest
 * within the budget) that the strategy's search space holds. Returns false
 * and writes a message into err (e.g. a layer that does not fit in memory)
 * when no plan exists. out->time is the evaluator's time of the plan. */
bool plan_solve(const plan_problem *p, plan_strategy s, plan_result *out, char *err, size_t errlen);
/* plan_solve, given plans already solved for the same problem: known[t] (NULL, or
 * known[t] NULL) is strategy t's plan_solve result, which burst then takes as a
 * candidate instead of solving t again. */
bool plan_solve_known(const plan_problem *p, plan_strategy s, const plan_result *const *known,
                      plan_result *out, char *err, size_t errlen);
/* Whether burst's search space holds plan r (every layer's count among burst's
 * candidates; r placed from rank 0, as dp's and pow2's plans are). */
bool plan_burst_holds(const plan_problem *p, const plan_result *r);
/* Moves each layer with ties_to onto its partner's ranks where a search placed them
 * apart (the searches do not couple two layers), priced again by plan_evaluate; the
 * strategy and the search stay r's. False with a message if that plan does not fit. */
bool plan_tie_layers(const plan_problem *p, plan_result *r, char *err, size_t errlen);

/* planner.c */

/* The same with the objective time_weight x time + gpu_weight x GPU-seconds
 * (gpu_budget ignored). */
bool plan_solve_weighted(const plan_problem *p, plan_strategy s, double time_weight,
                         double gpu_weight, plan_result *out, char *err, size_t errlen);
void plan_result_free(plan_result *r);
/* Whether the layer graph is series-parallel (the DP applies). */
bool plan_is_series_parallel(const plan_problem *p);

const char *plan_strategy_name(plan_strategy s);
bool plan_strategy_lookup(const char *name, plan_strategy *out);

/* deeppool.c */

/* DeepPool's planner (searchBestSplitsV3 of DeepPool's parallelizationPlanner.py)
 * on the problem: its per-layer GPU counts, priced by plan_evaluate; its own
 * estimate in own_time and own_gpu_seconds. False with a message in err when
 * DeepPool's search cannot handle the graph or the plan does not fit. */
bool plan_deeppool(const plan_problem *p, plan_result *out, char *err, size_t errlen);

/* evaluate.c: the time of a given plan (docs/plan.md, "Evaluation"). */

/* Evaluates counts k[l] at ranks first[l] .. first[l] + k[l] - 1 (first
 * NULL: every layer from rank 0), fills out (placed). False with a message
 * if a count or a rank is out of range. */
bool plan_evaluate(const plan_problem *p, const int *k, const int *first, plan_result *out,
                   char *err, size_t errlen);
/* The same, prepared once for many plans of one problem (brute force):
 * only time and GPU-seconds; false if out of range. */
typedef struct plan_evaluator plan_evaluator;
plan_evaluator *plan_evaluator_new(const plan_problem *p);
bool plan_evaluator_run(plan_evaluator *ev, const int *k, const int *first, double *time,
                        double *gpu_seconds);
void plan_evaluator_free(plan_evaluator *ev);

/* frontier.c */

/* One point of the Pareto frontier. */
typedef struct plan_point {
    double price, time, gpu_seconds;
} plan_point;
/* Every vertex of the lower convex hull of (GPU-seconds, time) over burst
 * plans: the fastest plan, the cheapest (least GPU-seconds) and every plan
 * that is optimal for some price in between. Returns how many (at most
 * maxpts) were written to pts, sorted by time. */
int plan_frontier(const plan_problem *p, plan_point *pts, int maxpts);
/* plan_frontier with the vertices' plans too: plans[i] is pts[i]'s (the
 * result of plan_solve_weighted at its price; free each). */
int plan_frontier_plans(const plan_problem *p, plan_point *pts, plan_result *plans, int maxpts);
/* The fastest hull plan with GPU-seconds <= cap (p->gpu_budget x the
 * one-GPU time); false with a message naming the cheapest plan otherwise. */
bool plan_solve_budget(const plan_problem *p, plan_strategy s, plan_result *out, char *err,
                       size_t errlen);
/* Sum over layers of forward + backward at the whole batch on one GPU. */
double plan_one_gpu_time(const plan_problem *p);

/* sp.c: the series-parallel decomposition of the layer graph (for the
 * planner and its evaluator). */

enum { PLAN_TN_LEAF, PLAN_TN_SERIES, PLAN_TN_PARALLEL };

typedef struct plan_tnode {
    int kind;      /* PLAN_TN_* */
    int u, v;      /* the component's ends (layer ids; n, n + 1: source, sink) */
    int edge;      /* LEAF: the problem's edge, -1 for a virtual one */
    int a, b;      /* SERIES, PARALLEL: children (ids below this node's) */
    int mid;       /* SERIES: the layer between a and b */
    bool interior; /* has layers inside */
} plan_tnode;

typedef struct plan_sp {
    int n; /* layers */
    int ntn, captn;
    plan_tnode *tn; /* children before parents */
    int root;       /* -1 when the graph is not series-parallel */
    /* Blocks: a parallel node not absorbed into a parallel parent with the
	 * same ends lists its branches (leaves and series nodes). */
    int *kid_head, *kid_next, *nkids;
    bool *absorbed;
} plan_sp;

/* Decomposes p's layer graph in linear time; false (root -1) if it is not
 * series-parallel. Free with plan_sp_free either way. */
bool plan_sp_build(const plan_problem *p, plan_sp *sp);
void plan_sp_free(plan_sp *sp);

/* schedule.c: the order of work of one iteration of a placed plan, the one
 * source of truth for every rank's program (docs/ir.md, "Schedule"): one
 * list that every rank follows, running the entries it takes part in. The
 * schedule pass writes it into the IR, codegen emits it, the timeline plays
 * it. */

typedef enum plan_sched_kind {
    PSK_FWD,       /* layer's forward */
    PSK_BWD,       /* layer's backward */
    PSK_START,     /* edge's reshard: its forward exchange is posted */
    PSK_WAIT,      /* ... and waited for */
    PSK_START_BWD, /* edge's reshard: its gradient's exchange back is posted */
    PSK_WAIT_BWD,  /* ... and waited for */
    PSK_AR_START,  /* layer's gradient all-reduce starts */
    PSK_AR_WAIT,   /* ... and is waited for */
    PSK_LOSS,      /* the loss summed over every rank */
} plan_sched_kind;

typedef struct plan_sched_entry {
    plan_sched_kind kind;
    int layer; /* FWD, BWD, AR_*: the layer; reshards: the edge's consumer; LOSS: -1 */
    int edge;  /* reshards: the problem's edge; else -1 */
} plan_sched_entry;

typedef struct plan_schedule {
    int n;
    plan_sched_entry *e; /* in order */
} plan_schedule;

/* Whether edge e moves data under r (its ends differ in count or first rank):
 * then a reshard carries it. */
bool plan_edge_moves(const plan_problem *p, const plan_result *r, int e);
/* What the order depends on: the layers (in topological order), the edges
 * between them (each layer's inputs in edge order, the IR's input order),
 * which edges a reshard carries and which layers all-reduce gradients. */
typedef struct plan_sched_graph {
    int nlayers, nedges;
    const plan_edge *edges; /* from < to */
    const bool *moves;      /* per edge */
    const bool *allreduce;  /* per layer */
} plan_sched_graph;
void plan_schedule_order(const plan_sched_graph *g, plan_schedule *s);
/* The schedule of r's placement of p (r's counts and first ranks must fit
 * p): an edge moves when its ends differ in count or first rank, a layer
 * with parameters on more than one rank all-reduces. */
void plan_schedule_build(const plan_problem *p, const plan_result *r, plan_schedule *s);
void plan_schedule_free(plan_schedule *s);
/* "fwd", "bwd", "start", "wait", "start.bwd", "wait.bwd", "loss": the IR's
 * names of the entries (ir.h, ir_sched_kind). */
const char *plan_sched_kind_name(plan_sched_kind k);

/* timeline.c: one iteration of a plan as every rank's program (the order
 * the generated program runs it in), with the planner's durations and the
 * ideal (contention-free) schedule. The simulator plays it; the interleave
 * pass places background work in its idle windows. docs/sim.md. */

typedef enum plan_tl_kind {
    PTL_FWD,         /* a layer's forward on each of its ranks */
    PTL_BWD,         /* its backward */
    PTL_ALLREDUCE,   /* its gradient all-reduce among its ranks */
    PTL_RESHARD_FWD, /* an edge's activations, producer's ranks -> consumer's */
    PTL_RESHARD_BWD, /* their gradient, consumer's ranks -> producer's */
    PTL_LOSS_SUM,    /* the loss summed over every rank (rt_world_sum) */
    PTL_WAIT,        /* the wait for a reshard or all-reduce (op `of`) started before */
} plan_tl_kind;

/* One message of a reshard: `samples` samples from rank src to rank dst. */
typedef struct plan_tl_pair {
    int src, dst;
    int64_t samples;
} plan_tl_pair;

typedef struct plan_tl_op {
    plan_tl_kind kind;
    int layer;         /* FWD, BWD, ALLREDUCE: the layer; RESHARD_*: the edge's consumer; else -1 */
    int edge;          /* RESHARD_*: the problem's edge; else -1 */
    int first, k;      /* FWD, BWD, ALLREDUCE: the layer's ranks; LOSS_SUM: 0, G */
    double dur;        /* the cost model's seconds (compute: at the largest shard) */
    double bytes;      /* RESHARD_*: bytes per sample; ALLREDUCE: gradient bytes; LOSS_SUM: 8 */
    bool async;        /* RESHARD_*, ALLREDUCE with ar_overlap: the rank's compute goes on
                          after the start and waits at the op's PTL_WAIT; else the start
                          holds it until the op is done */
    int of;            /* WAIT: the op it waits for (before it); else -1 */
    int pair0, npairs; /* RESHARD_*: its messages, tl->pair[pair0 ..] */
    int64_t part0;     /* the ranks that take part, tl->part[part0 .. part0 + nparts) */
    int nparts;
    int64_t cpart0; /* their roles, tl->cpart[cpart0 .. cpart0 + ncparts) */
    int ncparts;
    double start, end; /* ideal schedule: first start and last end over its ranks */
} plan_tl_op;

/* One op of one rank's program. */
typedef struct plan_tl_step {
    int op;
    double own;    /* compute: this rank's own shard's time, at most the op's dur (the
                     evaluator's rule: the largest shard sets the time); else dur */
    double arrive; /* ideal schedule: the rank reaches the op (its previous op is done) */
    double start;  /* it starts (communication: when every rank taking part has arrived) */
    double end;    /* the op is over for this rank (compute: start + dur, the largest shard) */
} plan_tl_step;

/* Why a rank's compute is idle in a window. */
typedef enum plan_tl_wait {
    PTW_PEER,  /* reached a communication op that has not started: a peer (or, outside
                  the layer's rank set, the data) is not there yet */
    PTW_COMM,  /* its own communication op is moving data */
    PTW_SHARD, /* its shard is done, the layer's largest is not */
    PTW_END,   /* done with the iteration, others are not */
} plan_tl_wait;

/* An interval in which a rank's compute is idle in the ideal schedule. Its
 * anchor is the program point where it ends: step (an index into the rank's
 * program) is the op the rank waits on or runs next; step == the program's
 * length (op -1) is the end of the iteration. */
typedef struct plan_tl_window {
    int rank; /* the first rank of the role (every rank of it has the window) */
    int step, op;
    plan_tl_wait why;
    double start, end;
} plan_tl_window;

typedef struct plan_timeline {
    const plan_problem *p;
    int G;
    int nops;
    plan_tl_op *op; /* in program order: forward, loss sum, backward */
    int npairs;
    plan_tl_pair *pair;
    int64_t nparts;
    int *part; /* every rank in order (ranges and the loss sum are slices of it), then each
                  reshard's ranks; a wait shares its op's */
    /* Roles: ranks whose programs are equal (the same ops, the same own shard
     * times) have the same ideal schedule, so they share one program, one
     * schedule and one list of windows. Rank g plays role cls[g]; role c's
     * first rank is rep[c], and it has csize[c] ranks. Roles are numbered in
     * the order of their first ranks. */
    int ncls;
    int *cls, *rep, *csize;
    int64_t ncparts;
    int *cpart;         /* the roles taking part in each op (plan_tl_op's cpart0) */
    int64_t *prog0;     /* role c's program: step[prog0[c] .. prog0[c + 1]) */
    plan_tl_step *step; /* nsteps = prog0[ncls] */
    double time;        /* the ideal schedule's iteration time */
    int64_t nwin;
    plan_tl_window *win; /* by role, then time */
    int64_t *win0;       /* role c's windows: win[win0[c] .. win0[c + 1]) */
    /* Background work in the idle windows, seconds (the interleave pass sets
     * these before plan_timeline_schedule and clears them after; NULL: none;
     * the caller owns them). Per step (an index into step, so per role): bg_peer
     * runs from the role's arrival at communication step s, bg_comm from the
     * start of communication step s, bg_shard from the end of its own shard of
     * compute step s; bg_end[c] after role c's last op. Slices are not
     * preempted: the rank takes its next op (a communication op: joins it)
     * only once that work is done. */
    double *bg_peer, *bg_comm, *bg_shard, *bg_end;
} plan_timeline;

/* The most steps (rank, op) a timeline may hold; a larger plan is refused. */
#define PLAN_TL_MAX_STEPS (1LL << 26)

/* The schedule every reader follows (the schedule pass, codegen, this
 * timeline): schedule.c's rule's order of r's placement of p, reordered by
 * the list scheduler (listsched.c) with the timeline's durations (the
 * rule's order where that plays faster). False
 * with a message as plan_timeline_build. */
bool plan_schedule_make(const plan_problem *p, const plan_result *r, plan_schedule *s, char *err,
                        size_t errlen);
/* Builds the timeline of a placed plan (r's counts and first ranks) and its
 * ideal schedule: its programs are plan_schedule_make's order. False with a message when a count or rank is out of range
 * or the timeline would exceed PLAN_TL_MAX_STEPS. */
bool plan_timeline_build(const plan_problem *p, const plan_result *r, plan_timeline *tl, char *err,
                         size_t errlen);
/* The same with every rank a role of its own (share false): the reference
 * that shared roles are tested against. */
bool plan_timeline_build_roles(const plan_problem *p, const plan_result *r, bool share,
                               plan_timeline *tl, char *err, size_t errlen);
/* Rank g's program, *n steps (its role's), and its windows, *n of them. */
plan_tl_step *plan_tl_prog(const plan_timeline *tl, int g, int64_t *n);
const plan_tl_window *plan_tl_windows(const plan_timeline *tl, int g, int64_t *n);
/* The timeline of a given order s of r's placement of p (tests: the rule's
 * order, plan_schedule_build); false with a message as plan_timeline_build. */
bool plan_timeline_of_schedule(const plan_problem *p, const plan_result *r, const plan_schedule *s,
                               plan_timeline *tl, char *err, size_t errlen);
/* Prices r by what its schedule achieves: time becomes the ideal time of
 * its timeline (plan_timeline_build), eval_time keeps the evaluator's;
 * samples_per_s follows, objective becomes time + p's price x GPU-seconds. False with a message (r as it was)
 * when the timeline cannot be built. docs/plan.md, "What the planner
 * reports". */
bool plan_price_schedule(const plan_problem *p, plan_result *r, char *err, size_t errlen);
/* Recomputes the ideal schedule (start, end, windows, time) from the ops'
 * dur and the steps' own, after a caller changed them. */
void plan_timeline_schedule(plan_timeline *tl);
void plan_timeline_free(plan_timeline *tl);
/* "conv1", "conv1.bwd", "conv1.allreduce", "pool2.to.f", "pool2.to.f.bwd",
 * "loss.sum": the op's name in traces (reshards as the comm pass names them). */
void plan_tl_op_name(const plan_timeline *tl, int op, char *buf, size_t n);
const char *plan_tl_kind_name(plan_tl_kind k);
const char *plan_tl_wait_name(plan_tl_wait w);
/* The messages of a reshard of B samples from k1 ranks at r1 to k2 ranks at
 * r2 under the runtime's shard rule (the first B mod k shards one sample
 * larger): every intersection of a source and a destination shard on
 * different ranks, in sample order. Writes them to pairs (NULL: only
 * counts) and returns how many (fewer than k1 + k2). */
int plan_reshard_pairs(int64_t B, int r1, int k1, int r2, int k2, plan_tl_pair *pairs);

/* listsched.c */

/* Reorders s, the schedule tl was built from (entry x is tl's op x, in
 * schedule.c's rule's order), by readiness and critical path with tl's
 * durations: the dependences of the rule's order kept (contributions to a
 * gradient in its order), the entry that can start first appended first.
 * docs/plan.md, "The schedule". */
void plan_schedule_list(const plan_timeline *tl, plan_schedule *s);

/* interleave.c: background jobs in a plan's idle windows (docs/plan.md,
 * "Multiplexing"). IR-independent: passes/interleave.c's pass builds these
 * from a job's background list, the unit tests and benchmarks by hand. */

/* One background job as the pass sees it: an independent one-GPU training
 * step of nunits units (a graph of n ops: units 0 .. n-1 the forwards, n ..
 * 2n-1 the backwards in reverse op order, 2n the optimizer; ir.h, ir_bg_copy),
 * each with its seconds on one device at the job's batch. */
typedef struct plan_bg_job {
    const char *name;           /* for messages */
    int nunits;                 /* 2n + 1 */
    const double *unit;         /* seconds of each unit */
    const char *const *op_name; /* n names (NULL: units are numbered in messages) */
    double mem_bytes;           /* parameters, gradients, optimizer state, activations */
    int64_t batch;              /* samples per step */
} plan_bg_job;
/* A step of the job alone on one GPU: the sum of its units (seconds). */
double plan_bg_step_time(const plan_bg_job *b);

/* Default slice bounds: on a GPU (the 0.5 ms) and on a CPU core. */
#define PLAN_MUX_SLICE_GPU 0.5e-3
#define PLAN_MUX_SLICE_CPU 2e-3

typedef struct plan_mux_options {
    double slowdown;    /* >= 1: foreground time with background / without */
    double slice_bound; /* seconds; <= 0: the device's default, at most the budget */
    bool cpu;           /* the device is a CPU core (its own communication is not idle time) */
    /* The one constraint every strategy's plan of a job is held to
     * (plan_mux_init): the foreground's time with background at most
     * time_limit = slowdown x time_ref, time_ref the fastest foreground time
     * any strategy plans for the job. <= 0: slowdown x the plan's own time. */
    double time_ref, time_limit;
    /* > 0 (a GPU only): preemptive sharing, as the hardware schedules a
     * low-priority stream: a running background kernel yields to the
     * foreground's at thread-block granularity, so the foreground waits at
     * most preempt seconds for it and the rest of the slice runs in the
     * rank's next idle windows. 0: a running slice finishes first (the
     * conservative model). docs/plan.md, "The sharing model". */
    double preempt;
    /* Only placements that never slow the foreground: every slice fits its
     * window whole (no overrun, no preemption). plan_mux_frontier's second
     * row of a vertex; auto never needs it (it is one of the tries). */
    bool fit_only;
} plan_mux_options;

/* One background slice placed in one iteration of the foreground. */
typedef struct plan_mux_slice {
    int copy, slice; /* the copy (index into copies) and its slice */
    int rank;
    int step; /* the window's anchor: a step of the rank's program (sim_bg_slice.step) */
    plan_tl_wait why;
    double start, dur; /* start in the ideal schedule without background */
    bool last;         /* completes a step of the copy */
} plan_mux_slice;

typedef struct plan_mux_copy {
    int job, rank;
    int64_t seed;
    int nslices;
    int *cut;    /* nslices + 1 unit indices */
    double *dur; /* seconds of each slice */
    double steps_per_iter;
} plan_mux_copy;

typedef struct plan_mux_refusal {
    int job, rank;
    char why[400];
} plan_mux_refusal;

typedef struct plan_mux_result plan_mux_result;
struct plan_mux_result {
    double slice_bound;      /* seconds */
    double fg_time;          /* ideal schedule, no background */
    double fg_time_bg;       /* with the placed slices (<= slowdown x fg_time) */
    double fg_samples_per_s; /* batch / fg_time_bg */
    double bg_samples_per_s; /* every copy's steps_per_iter x batch / fg_time_bg */
    double cluster_samples_per_s;
    double idle;       /* idle fraction of G x fg_time (the usable windows) */
    double idle_bg;    /* what is left idle of G x fg_time_bg with background */
    double overrun;    /* the largest overrun of a window allowed (seconds; 0: none) */
    double preempt;    /* the placement chosen is preemptive with this delay (seconds; 0: not) */
    double time_limit; /* the foreground's time with background at most this (seconds) */
    /* Every job's samples/s over its samples/s alone on one GPU of the
     * cluster, summed (the foreground's one-GPU time: plan_one_gpu_time; a
     * background job's: its step): work in dedicated GPUs, at most G. */
    double gpu_equivalents;
    int cut_div; /* slices were cut at slice_bound / cut_div */
    int ncopies;
    plan_mux_copy *copies; /* rank order, then job order */
    int nrefusals;
    plan_mux_refusal *refusals; /* rank order, then job order */
    int64_t nslices;
    plan_mux_slice *slices; /* by rank, then time */
};

/* The most slices placed in one iteration; placement stops there. */
#define PLAN_MUX_MAX_SLICES (1LL << 22)

/* Places copies of the background jobs into the idle windows of the plan r
 * (timeline tl of it, built by plan_timeline_build): a copy of every job on
 * every rank whose memory holds it beside the foreground's and the copies
 * before it (refusals say why not), each step cut into slices no longer than
 * the bound (a longer unit alone, placed only where a window holds it whole;
 * a unit longer than the slowdown's budget refuses the job), slices packed
 * into the windows in order. Predicts the
 * foreground's time with the slices (never more than slowdown x without)
 * and the background's samples/s. tl is rescheduled and left as it was.
 * False with a message when the options are out of range. */
bool plan_interleave(plan_timeline *tl, const plan_result *r, const plan_bg_job *jobs, int njobs,
                     const plan_mux_options *o, plan_mux_result *out, char *err, size_t errlen);
void plan_mux_result_free(plan_mux_result *r);
/* Cuts units into slices of at most bound seconds, greedily (the fewest
 * slices), a unit longer than bound a slice of its own: writes nslices + 1
 * cut points to cut (room for nunits + 1) and returns nslices. */
int plan_mux_cut(const double *unit, int nunits, double bound, int *cut);
/* The seed of the copy of background job `job` on `rank`: deterministic,
 * distinct for distinct pairs below 2^16 jobs, in 1 .. 2^31 - 1. */
int64_t plan_mux_seed(int job, int rank);
/* Per-rank foreground memory of a placed plan (bytes; out has G entries). */
void plan_rank_memory(const plan_problem *p, const plan_result *r, double *out);

/* The common setting of every strategy's multiplexing of a job: o's
 * slowdown and cpu as given, time_ref the fastest timeline time (the
 * schedule the runtime follows) of the plans dp, deeppool, pow2 and burst
 * give for p (a strategy without a plan is skipped), time_limit = slowdown x
 * time_ref. False with a message when no strategy plans p. */
bool plan_mux_init(const plan_problem *p, plan_mux_options *o, char *err, size_t errlen);

/* mux_auto.c: amplification = auto with background jobs (docs/plan.md,
 * "amplification = auto"). */

/* A plan the parametric search met: the weights that give it (time_weight x
 * time + gpu_weight x GPU-seconds is least there), its time and GPU-seconds,
 * whether its time is within the limit, and its estimated cluster samples/s
 * (within: rho G + (B - rho S) / T; over: B / T, no background). */
typedef struct plan_auto_vertex {
    double time_weight, gpu_weight;
    double time, gpu_seconds;
    double score;
    bool feasible;
} plan_auto_vertex;
/* The plan least in time_weight x time + gpu_weight x GPU-seconds: its time
 * and GPU-seconds; false when there is none. */
typedef bool plan_auto_oracle(void *ctx, double time_weight, double gpu_weight, double *time,
                              double *gpu_seconds);
/* The parametric search: Dinkelbach's iterations on the estimate rho G +
 * (B - rho S) / T (rho: background samples per GPU-second; B the batch, G
 * the GPUs) from the fastest plan, each a call of f, under time <= limit
 * (a walk of the hull to the slowest vertex within it when an iteration
 * leaves it). Writes the plans met to v (at most maxv, distinct), best
 * first (within the limit first, then by score); returns how many. */
int plan_auto_search(plan_auto_oracle *f, void *ctx, double batch, int G, double rho, double limit,
                     plan_auto_vertex *v, int maxv);
/* r's background jobs interleaved under o (its timeline, plan_interleave).
 * False with a message when the timeline cannot be built. */
bool plan_mux_plan(const plan_problem *p, const plan_result *r, const plan_bg_job *jobs, int njobs,
                   const plan_mux_options *o, plan_mux_result *out, char *err, size_t errlen);
/* The plan of strategy s least in time + price x GPU-seconds (price
 * INFINITY: the cheapest, as plan_frontier's last point) with its
 * multiplexing; p's budget is ignored, its amplification limit kept. */
bool plan_mux_at_price(const plan_problem *p, plan_strategy s, double price,
                       const plan_bg_job *jobs, int njobs, const plan_mux_options *o,
                       plan_result *r, plan_mux_result *mx, char *err, size_t errlen);
/* One row of `burstc plan --frontier` with background jobs. */
typedef struct plan_mux_point {
    char from[96]; /* "burst's frontier vertex at price 0.01", "dp's plan", ... */
    double price;  /* a vertex: its price (INFINITY: the cheapest); else -1 */
    bool vertex;   /* a vertex of burst's time vs GPU-seconds frontier */
    bool fit_only; /* the vertex's placement with slices only where they fit whole */
    bool pareto;   /* no other row is at least as high in foreground and cluster
                      * samples/s and higher in one */
    plan_result r; /* strategy burst */
    plan_mux_result mux;
} plan_mux_point;
/* The multiplexing trade-off: every vertex of burst's frontier (p's
 * amplification limit kept, fastest first), each followed, where it
 * differs, by its placement with fit_only (the foreground unslowed: a
 * vertex gives both the most cluster throughput within the limit and the
 * most that costs the foreground nothing), then the plans of dp and of
 * deeppool at the limits its auto tries, which burst's search space holds
 * (rows of the same time and GPU-seconds once), each with its background
 * interleaved under o; pareto set over all rows. Returns how many (at most
 * maxpts); free each with plan_mux_point_free. */
int plan_mux_frontier(const plan_problem *p, const plan_bg_job *jobs, int njobs,
                      const plan_mux_options *o, plan_mux_point *pts, int maxpts);
/* plan_mux_frontier that also gives the frontier it went along (hull, at
 * most 64 points: plan_frontier's for p's amplification limit). */
int plan_mux_frontier_hull(const plan_problem *p, const plan_bg_job *jobs, int njobs,
                           const plan_mux_options *o, plan_mux_point *pts, int maxpts,
                           plan_point *hull, int *nhull);
void plan_mux_point_free(plan_mux_point *x);
/* How many of the search's best vertices the exact stage interleaves
 * (besides the fastest plan). */
#define PLAN_AUTO_EXACT 4
/* amplification = auto: the plan of strategy s with the highest predicted
 * cluster throughput (plan_interleave's, fg + bg samples/s) whose
 * foreground with background is within o's time limit (plan_mux_init),
 * ties to the faster foreground; none within it: the fastest foreground.
 * Candidates: dp: its plan; deeppool: its plans at the limits 1, 1.25, 1.5,
 * 2, 3, 4, 6, 8 and none; pow2: its frontier (plan_auto_search's best
 * PLAN_AUTO_EXACT and its fastest plan); burst: its frontier the same way
 * and every candidate of the other three. p's amplification limit, budget
 * and price are ignored. Writes the plan to out (strategy s) and, when mux
 * is not NULL, its multiplexing; a one-line reason to why. False with a
 * message when s has no plan. */
bool plan_mux_auto(const plan_problem *p, plan_strategy s, const plan_bg_job *jobs, int njobs,
                   const plan_mux_options *o, plan_result *out, plan_mux_result *mux, char *why,
                   size_t whylen, char *err, size_t errlen);

/* place.c */

/* Fills cross_node_bytes and the peak memory of a plan whose layers have
 * their ranks (first, k). */
void plan_place(const plan_problem *p, plan_result *r);

/* plan_out.c */
/* s as a JSON string (NULL as ""): what the plan's and the simulator's JSON and traces write. */
void plan_json_string(FILE *out, const char *s);

/* Writes the predicted per-rank timeline (the ideal schedule of
 * plan_timeline_build) as a Chrome trace (JSON): per rank a compute, a
 * communication and an idle track, and with mux (may be NULL) a background
 * track of the slices placed (at their start without background), for at most max_ranks ranks
 * (plan_trace_ranks); *shown (may be NULL) gets how many. False with a
 * message when the timeline cannot be built or a write failed. */
bool plan_write_trace(const plan_problem *p, const plan_result *r, const plan_mux_result *mux,
                      int max_ranks, int *shown, FILE *out, char *err, size_t errlen);
/* How many ranks `burstc plan --trace` shows at most. */
#define PLAN_TRACE_RANKS 256
/* The ranks a trace of G ranks shows when it shows at most cap (>= 2): all
 * when G <= cap, else the lowest cap/2 and the rest sampled evenly up to
 * rank G - 1. Writes them ascending to ranks; returns how many. */
int plan_trace_ranks(int G, int cap, int *ranks);
/* Writes the plans as JSON (docs/plan.md has the fields); mux (may be NULL,
 * or hold NULLs) adds each plan's multiplexing under the slowdown. */
bool plan_write_json(const plan_problem *p, const plan_result *const *rs,
                     const plan_mux_result *const *mux, int nrs, double slowdown, FILE *out);

/* Writes the rows of plan_mux_frontier as JSON: {gpus, gpus_per_node,
 * batch, frontier: [{from, price (a vertex's; "inf" for the cheapest; null
 * off the frontier), vertex, fit_only, pareto, time_s, gpu_seconds, samples_per_s,
 * mux: {the keys of plan --json's mux}}]}. */
bool plan_write_frontier_json(const plan_problem *p, const plan_mux_point *pts, int n,
                              double slowdown, FILE *out);

/* profile.c: measured per-layer tables in the DeepPool text format. */

typedef struct plan_profile_entry {
    char *op;    /* e.g. "conv2d"; "layer" for a line of `burstc profile` */
    char *attrs; /* canonical JSON text of the attributes */
    int nshape;
    int64_t shape[8]; /* input shape without the batch */
    plan_timing timing;
    char *layer;    /* "layer" lines: the layer's name ... */
    char *layer_op; /* ... and its op (attributes "name", "op"); "optimizer"
                     * lines: the optimizer (attribute "op"); else NULL */
    int line;       /* the first line of the entry in the file */
} plan_profile_entry;

typedef struct plan_profile {
    int n, cap;
    plan_profile_entry *e;
    char *path; /* the file read (for messages), or NULL */
} plan_profile;

/* Reads FILE; malformed lines are reported as `FILE:LINE: error: ...` on err
 * and make it return false (all lines are checked). */
bool plan_profile_read(plan_profile *pr, const char *path, FILE *err);
bool plan_profile_parse(plan_profile *pr, const char *path, const char *text, FILE *err);
void plan_profile_free(plan_profile *pr);
/* Finds the entry for an op with attributes (JSON object text, any key
 * order) and input shape; NULL if none. */
const plan_profile_entry *plan_profile_find(const plan_profile *pr, const char *op,
                                            const char *attrs, const int64_t *shape, int nshape);
/* The entry of the `layer` lines for the layer called name; NULL if none. */
const plan_profile_entry *plan_profile_find_layer(const plan_profile *pr, const char *name);
/* The integer attribute `key` of an entry's JSON attributes; false if absent. */
bool plan_profile_attr(const plan_profile_entry *e, const char *key, int64_t *out);
/* The same for an integer or a pair `[a,b]` (non-square kernels). */
bool plan_profile_attr_pair(const plan_profile_entry *e, const char *key, int64_t out[2]);
/* `burstc profile --concurrent`: copies c = 0..copies-1 of one run left their
 * `steps` timed samples at v[base + c * steps ..]; v[base + t] becomes the
 * largest of the copies' sample t (the slowest rank of a synchronous step)
 * and the other copies' cells are cleared. */
void plan_profile_slowest(double *v, int base, int steps, int copies);

/* alloc.c: out of memory is "burstc: out of memory", exit 2; n * size is
 * checked for overflow; a zero size still allocates. */
void *plan_xcalloc(size_t n, size_t size); /* zero-filled */
void *plan_xrealloc(void *p, size_t n, size_t size);

#endif
