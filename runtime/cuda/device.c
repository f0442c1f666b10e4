/* device.c: the process-wide part of the CUDA backend. It picks this rank's GPU, makes
 * the two streams (the foreground iteration runs on the highest-priority stream; the
 * lowest-priority one is reserved for background work, so the GPU scheduler prefers
 * the foreground job's kernels), the cuBLAS handle, the device memory pool behind
 * rt_pool / rt_tensor_new, and the CUDA graphs that replay the steady-state iteration.
 * The option parser, watchdog, timers and steps are the CPU backend's (core.c and
 * trace.c compiled with their memory functions renamed rt_host_*); the wrappers here
 * add what a GPU needs around them: device selection after MPI_Init, a stream sync at
 * the end of each step (so step times and the watchdog see GPU work, and NCCL errors
 * surface), NVTX ranges for every rt_trace_push. */
#include "cuda_internal.h"

#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rt_cuda_state rt_cuda_g;

/* The host parts compiled from ../core.c and ../trace.c under other names. */
const rt_options *rt_host_init(int *argc, char ***argv, const char *program);
void rt_host_finalize(void);
void rt_host_step_begin(int64_t step);
void rt_host_step_end(int64_t step);
void rt_host_trace_push(const char *name);
void rt_host_trace_pop(void);

/* core.c sets BLAS threads; this library has no BLAS, so --threads only affects nothing
 * here (documented in docs/cuda.md). */
void openblas_set_num_threads(int num_threads);
void openblas_set_num_threads(int num_threads)
{
    (void)num_threads;
}
/* GEMMs run in cuBLAS: there is no OpenBLAS to choose kernels for. */
void rt_blas_select(char **argv)
{
    (void)argv;
}

/* ---- errors ------------------------------------------------------------------- */

void rt_cuda_check(cudaError_t err, const char *op, const char *what)
{
    if (err != cudaSuccess)
        rt_fatal(op, "CUDA error %s (%s) in %s", cudaGetErrorName(err), cudaGetErrorString(err),
                 what);
}

void rt_cublas_check(cublasStatus_t st, const char *op, const char *what)
{
    if (st != CUBLAS_STATUS_SUCCESS)
        rt_fatal(op, "cuBLAS error %s (%s) in %s", cublasGetStatusName(st),
                 cublasGetStatusString(st), what);
}

void rt_cuda_launched(const char *op)
{
    rt_cuda_check(cudaGetLastError(), op, "kernel launch");
}

void rt_cuda_not_capturing(const char *op)
{
    if (!rt_cuda_g.ready)
        return;
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    RT_CUDA(cudaStreamIsCapturing(rt_cuda_g.cur, &st), op);
    if (st != cudaStreamCaptureStatusNone)
        rt_fatal(op, "cannot run inside a graph segment (it synchronises with the host or "
                     "communicates); move it between rt_graph_end and rt_graph_begin");
}

void rt_cuda_sync(const char *op)
{
    if (!rt_cuda_g.ready)
        return;
    rt_cuda_not_capturing(op);
    /* Polling instead of cudaStreamSynchronize: an NCCL kernel waiting for a dead peer
     * never finishes, but its communicator reports the failure asynchronously. */
    for (;;) {
        cudaError_t e = cudaStreamQuery(rt_cuda_g.cur);
        if (e == cudaSuccess)
            return;
        if (e != cudaErrorNotReady)
            rt_cuda_check(e, op, "stream work");
        rt_nccl_poll(op);
        struct timespec ts = {0, 20000}; /* 20 us: short against any step */
        nanosleep(&ts, NULL);
    }
}

void rt_device_sync(void)
{
    rt_cuda_sync("device_sync");
}

/* ---- device, streams, handles -------------------------------------------------- */

/* One process per GPU: the node-local rank picks the device (mpirun exports it); a
 * program started without mpirun (one rank) uses device 0, or CUDA_VISIBLE_DEVICES. */
static int local_rank(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                          "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return rt_opts_g.rank;
}

int rt_cuda_visible_devices(void)
{
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

void rt_cuda_ensure(void)
{
    if (rt_cuda_g.ready)
        return;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
        rt_fatal("init",
                 "no CUDA device visible (%s); this program was built with "
                 "--target=cuda",
                 e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
    rt_cuda_g.device = local_rank() % count;
    RT_CUDA(cudaSetDevice(rt_cuda_g.device), "init");
    int lo = 0, hi = 0;
    /* CUDA numbers priorities so that the greatest priority is the lowest number. */
    RT_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi), "init");
    RT_CUDA(cudaStreamCreateWithPriority(&rt_cuda_g.fg, cudaStreamNonBlocking, hi), "init");
    RT_CUDA(cudaStreamCreateWithPriority(&rt_cuda_g.bg, cudaStreamNonBlocking, lo), "init");
    /* A program that is itself a background job (BURSTRT_BACKGROUND=1) runs all its
     * work at low priority. */
    const char *bgenv = getenv("BURSTRT_BACKGROUND");
    rt_cuda_g.cur = bgenv && !strcmp(bgenv, "1") ? rt_cuda_g.bg : rt_cuda_g.fg;
    RT_CUBLAS(cublasCreate(&rt_cuda_g.blas), "init");
    RT_CUBLAS(cublasSetStream(rt_cuda_g.blas, rt_cuda_g.cur), "init");
    /* 32 MiB, NVIDIA's recommendation for Hopper; an explicit workspace keeps cuBLAS
     * from allocating while a graph is captured. */
    const size_t ws = (size_t)32 << 20;
    RT_CUDA(cudaMalloc(&rt_cuda_g.blas_workspace, ws), "init");
    RT_CUBLAS(cublasSetWorkspace(rt_cuda_g.blas, rt_cuda_g.blas_workspace, ws), "init");
    RT_CUDA(cudaMalloc((void **)&rt_cuda_g.d_step, sizeof(int64_t)), "init");
    /* Plain cudaMemset runs on the legacy stream, which the non-blocking streams do not
     * wait for: zero on the stream that will read it. */
    RT_CUDA(cudaMemsetAsync(rt_cuda_g.d_step, 0, sizeof(int64_t), rt_cuda_g.cur), "init");
    const char *dt = getenv("BURSTRT_COMPUTE_DTYPE");
    if (dt && !strcmp(dt, "bf16"))
        rt_cuda_g.compute = RT_COMPUTE_BF16;
    else if (dt && !strcmp(dt, "f16"))
        rt_cuda_g.compute = RT_COMPUTE_F16;
    else if (dt && *dt && strcmp(dt, "f32"))
        rt_fatal("init", "BURSTRT_COMPUTE_DTYPE must be f32, bf16 or f16, got '%s'", dt);
    rt_cuda_g.ready = true;
}

/* Background work inside a foreground program: kernels, copies and cuBLAS calls go to
 * the low-priority stream until switched back; the two streams are not ordered with
 * respect to each other, so the switch waits for the work issued so far. */
void rt_use_background_stream(bool on)
{
    rt_cuda_ensure();
    cudaStream_t want = on ? rt_cuda_g.bg : rt_cuda_g.fg;
    if (want == rt_cuda_g.cur)
        return;
    rt_cuda_sync("background_stream");
    rt_cuda_g.cur = want;
    RT_CUBLAS(cublasSetStream(rt_cuda_g.blas, want), "background_stream");
}

void rt_set_compute_dtype(rt_compute_dtype dt)
{
    if (dt != RT_COMPUTE_F32 && dt != RT_COMPUTE_BF16 && dt != RT_COMPUTE_F16)
        rt_fatal("set_compute_dtype", "unknown compute dtype %d", (int)dt);
    rt_cuda_g.compute = dt;
}

rt_compute_dtype rt_get_compute_dtype(void)
{
    return rt_cuda_g.compute;
}

/* ---- scratch and staging -------------------------------------------------------- */

/* A scratch buffer is never freed while a graph might still reference it: buffers
 * outgrown after the first capture are retired and freed at finalize. */
typedef struct retired {
    void *p;
    struct retired *next;
} retired;
static retired *retired_list;
static bool graphs_exist;

static struct {
    void *p;
    size_t bytes;
} scratch[RT_SCRATCH_COUNT], staging;

static void release_device(void *p)
{
    if (!p)
        return;
    if (!graphs_exist) {
        cudaFree(p);
        return;
    }
    retired *r = rt_xmalloc(sizeof *r, "scratch");
    r->p = p;
    r->next = retired_list;
    retired_list = r;
}

void *rt_cuda_scratch(int slot, size_t bytes, const char *op)
{
    rt_cuda_ensure();
    if (bytes > scratch[slot].bytes) {
        rt_cuda_sync(op); /* refuses during capture: the buffer must not move */
        release_device(scratch[slot].p);
        size_t want = bytes + bytes / 4; /* slack: shards differ by a sample */
        RT_CUDA(cudaMalloc(&scratch[slot].p, want), op);
        scratch[slot].bytes = want;
    }
    return scratch[slot].p;
}

void *rt_cuda_host_staging(size_t bytes, const char *op)
{
    rt_cuda_ensure();
    if (bytes > staging.bytes) {
        rt_cuda_sync(op);
        if (staging.p)
            cudaFreeHost(staging.p);
        RT_CUDA(cudaMallocHost(&staging.p, bytes), op);
        staging.bytes = bytes;
    }
    return staging.p;
}

void rt_cuda_h2d(void *dst, const void *src, size_t bytes, const char *op)
{
    rt_cuda_not_capturing(op);
    RT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, rt_cuda_g.cur), op);
    /* The source is the shared staging buffer: it must be consumed before reuse. */
    rt_cuda_sync(op);
}

void rt_cuda_d2h(void *dst, const void *src, size_t bytes, const char *op)
{
    rt_cuda_not_capturing(op);
    RT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, rt_cuda_g.cur), op);
    rt_cuda_sync(op);
}

/* ---- the device memory pool ---------------------------------------------------------- */

/* Tensors are bump-allocated from large device chunks (one cudaMalloc per 64 MiB
 * instead of one per tensor; generated programs allocate everything once, before the
 * loop) and released together by rt_pool_free. Host blocks hold tensor headers and
 * what optim.c keeps in the pool. */
#define CHUNK_BYTES ((size_t)64 << 20)
#define ALIGN       256

typedef struct chunk {
    char *base;
    size_t used, cap;
    struct chunk *next;
} chunk;

struct rt_pool {
    chunk *chunks;
    void **host;
    size_t nhost, caphost;
    void *scratch;
    size_t scratch_bytes;
};

rt_pool *rt_pool_new(void)
{
    rt_cuda_ensure();
    return rt_xcalloc(1, sizeof(rt_pool), "pool");
}

void rt_pool_free(rt_pool *p)
{
    if (!p)
        return;
    rt_cuda_sync("pool_free");
    while (p->chunks) {
        chunk *c = p->chunks;
        p->chunks = c->next;
        cudaFree(c->base);
        free(c);
    }
    for (size_t i = 0; i < p->nhost; i++)
        free(p->host[i]);
    free(p->host);
    release_device(p->scratch);
    free(p);
}

void *rt_pool_alloc(rt_pool *p, size_t bytes)
{
    if (p->nhost == p->caphost) {
        p->caphost = p->caphost ? 2 * p->caphost : 64;
        void **nh = realloc(p->host, p->caphost * sizeof *nh);
        if (!nh)
            rt_fatal("pool", "out of host memory");
        p->host = nh;
    }
    return p->host[p->nhost++] = rt_xcalloc(1, bytes, "pool");
}

static void *device_alloc(rt_pool *p, size_t bytes, const char *op)
{
    bytes = (bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (bytes == 0)
        bytes = ALIGN;
    chunk *c = p->chunks;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = bytes > CHUNK_BYTES ? bytes : CHUNK_BYTES;
        c = rt_xcalloc(1, sizeof *c, op);
        cudaError_t e = cudaMalloc((void **)&c->base, cap);
        if (e != cudaSuccess) {
            size_t fr = 0, tot = 0;
            cudaMemGetInfo(&fr, &tot);
            rt_fatal(op, "out of device memory allocating %zu bytes (%zu of %zu MiB free): %s", cap,
                     fr >> 20, tot >> 20, cudaGetErrorString(e));
        }
        RT_CUDA(cudaMemsetAsync(c->base, 0, cap, rt_cuda_g.cur), op);
        c->cap = cap;
        c->next = p->chunks;
        p->chunks = c;
    }
    void *r = c->base + c->used;
    c->used += bytes;
    return r;
}

static rt_tensor *tensor_header(rt_pool *p, rt_dtype dt, int ndim, const int64_t *shape,
                                const char *op)
{
    if (ndim < 0 || ndim > RT_MAX_DIMS)
        rt_fatal(op, "tensor rank %d outside 0..%d", ndim, RT_MAX_DIMS);
    rt_tensor *t = rt_pool_alloc(p, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            rt_fatal(op, "negative dimension %lld", (long long)shape[i]);
        t->shape[i] = shape[i];
        t->numel *= shape[i];
    }
    return t;
}

rt_tensor *rt_tensor_new(rt_pool *p, rt_dtype dt, int ndim, const int64_t *shape)
{
    rt_tensor *t = tensor_header(p, dt, ndim, shape, "tensor_new");
    t->data = device_alloc(p, (size_t)t->numel * 4, "tensor_new");
    return t;
}

rt_tensor *rt_tensor_view(rt_pool *p, rt_tensor *src, int ndim, const int64_t *shape)
{
    rt_tensor *t = tensor_header(p, src->dtype, ndim, shape, "tensor_view");
    if (t->numel != src->numel)
        rt_fatal("tensor_view", "view has %lld elements, source %lld", (long long)t->numel,
                 (long long)src->numel);
    t->data = src->data;
    return t;
}

rt_tensor *rt_tensor_slice(rt_pool *p, rt_tensor *src, int64_t s0, int64_t s1)
{
    if (src->ndim < 1 || s0 < 0 || s1 < s0 || s1 > src->shape[0])
        rt_fatal("tensor_slice", "samples [%lld,%lld) outside a tensor of %lld", (long long)s0,
                 (long long)s1, (long long)(src->ndim ? src->shape[0] : 0));
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, src->shape, sizeof shape);
    shape[0] = s1 - s0;
    rt_tensor *t = tensor_header(p, src->dtype, src->ndim, shape, "tensor_slice");
    t->data = (char *)src->data + (size_t)(s0 * rt_tensor_per_sample(src)) * 4;
    return t;
}

float *rt_pool_scratch(rt_pool *p, size_t n)
{
    if (n * 4 > p->scratch_bytes) {
        rt_cuda_sync("scratch");
        release_device(p->scratch);
        RT_CUDA(cudaMalloc(&p->scratch, n * 4), "scratch");
        p->scratch_bytes = n * 4;
    }
    return p->scratch;
}

void rt_tensor_zero(rt_tensor *t)
{
    RT_CUDA(cudaMemsetAsync(t->data, 0, (size_t)t->numel * 4, rt_cuda_g.cur), "zero");
}

void rt_tensor_copy(rt_tensor *dst, const rt_tensor *src)
{
    if (dst->numel != src->numel || dst->dtype != src->dtype)
        rt_fatal("copy", "size or dtype mismatch (%lld vs %lld elements)", (long long)dst->numel,
                 (long long)src->numel);
    RT_CUDA(cudaMemcpyAsync(dst->data, src->data, (size_t)src->numel * 4, cudaMemcpyDeviceToDevice,
                            rt_cuda_g.cur),
            "copy");
}

void rt_tensor_write(rt_tensor *t, const void *host)
{
    rt_cuda_not_capturing("tensor_write");
    RT_CUDA(
        cudaMemcpyAsync(t->data, host, (size_t)t->numel * 4, cudaMemcpyHostToDevice, rt_cuda_g.cur),
        "tensor_write");
    rt_cuda_sync("tensor_write");
}

void rt_tensor_read(const rt_tensor *t, void *host)
{
    rt_cuda_d2h(host, t->data, (size_t)t->numel * 4, "tensor_read");
}

/* ---- CUDA graphs of the steady-state iteration ---------------------------------------- */

/* A segment is a stretch of the iteration without host synchronisation or NCCL calls
 * (the generated program brackets it with rt_graph_begin/end). Its first run is eager
 * (warm-up: scratch buffers and cuBLAS workspaces reach their final size), its second
 * run is captured and then launched, later runs replay the graph. Kernels whose
 * arguments change per step (dropout's step key) read the step from device memory,
 * which rt_step_begin updates outside every graph. BURSTRT_GRAPHS=0 turns graphs off. */
#define MAX_SEGMENTS 1024

static struct {
    int runs;
    cudaGraphExec_t exec;
} seg[MAX_SEGMENTS];
static int capturing = -1;
static int graphs_enabled = -1;

bool rt_graph_begin(int s)
{
    rt_cuda_ensure();
    if (s < 0 || s >= MAX_SEGMENTS)
        rt_fatal("graph", "segment %d outside 0..%d", s, MAX_SEGMENTS - 1);
    if (capturing >= 0)
        rt_fatal("graph", "segment %d begins inside segment %d", s, capturing);
    if (graphs_enabled < 0) {
        const char *v = getenv("BURSTRT_GRAPHS");
        graphs_enabled = !(v && !strcmp(v, "0"));
    }
    if (!graphs_enabled || seg[s].runs++ < 1)
        return true;
    if (seg[s].exec) {
        RT_CUDA(cudaGraphLaunch(seg[s].exec, rt_cuda_g.cur), "graph replay");
        return false;
    }
    graphs_exist = true;
    RT_CUDA(cudaStreamBeginCapture(rt_cuda_g.cur, cudaStreamCaptureModeThreadLocal),
            "graph capture");
    capturing = s;
    return true;
}

void rt_graph_end(int s)
{
    if (capturing < 0)
        return; /* an eager run or a replay */
    if (capturing != s)
        rt_fatal("graph", "segment %d ends while segment %d is being captured", s, capturing);
    cudaGraph_t g;
    capturing = -1;
    RT_CUDA(cudaStreamEndCapture(rt_cuda_g.cur, &g), "graph capture");
    RT_CUDA(cudaGraphInstantiate(&seg[s].exec, g, 0), "graph instantiate");
    RT_CUDA(cudaGraphDestroy(g), "graph capture");
    /* Capturing recorded the work without running it. */
    RT_CUDA(cudaGraphLaunch(seg[s].exec, rt_cuda_g.cur), "graph replay");
}

/* ---- init, steps, trace ---------------------------------------------------------------- */

const rt_options *rt_init(int *argc, char ***argv, const char *program)
{
    /* rt_host_init calls rt_comm_world_init, which selects the device (after MPI_Init,
     * so the rank is known) before NCCL needs it. */
    const rt_options *o = rt_host_init(argc, argv, program);
    rt_cuda_ensure();
    return o;
}

void rt_finalize(void)
{
    if (rt_cuda_g.ready && capturing < 0)
        rt_cuda_sync("finalize");
    rt_host_finalize();
    for (int s = 0; s < MAX_SEGMENTS; s++)
        if (seg[s].exec) {
            cudaGraphExecDestroy(seg[s].exec);
            seg[s].exec = NULL;
            seg[s].runs = 0;
        }
    while (retired_list) {
        retired *r = retired_list;
        retired_list = r->next;
        cudaFree(r->p);
        free(r);
    }
    for (int i = 0; i < RT_SCRATCH_COUNT; i++) {
        cudaFree(scratch[i].p);
        scratch[i].p = NULL;
        scratch[i].bytes = 0;
    }
    if (staging.p)
        cudaFreeHost(staging.p);
    staging.p = NULL;
    staging.bytes = 0;
    if (rt_cuda_g.ready) {
        cublasDestroy(rt_cuda_g.blas);
        cudaFree(rt_cuda_g.blas_workspace);
        cudaFree(rt_cuda_g.d_step);
        cudaStreamDestroy(rt_cuda_g.fg);
        cudaStreamDestroy(rt_cuda_g.bg);
        rt_cuda_g.ready = false;
    }
}

void rt_step_begin(int64_t step)
{
    rt_cuda_ensure();
    rt_cuda_g.step = step;
    RT_CUDA(cudaMemcpyAsync(rt_cuda_g.d_step, &step, sizeof step, cudaMemcpyHostToDevice,
                            rt_cuda_g.cur),
            "step");
    rt_host_step_begin(step);
}

void rt_step_end(int64_t step)
{
    rt_cuda_sync("step");
    rt_cuda_check_inputs("step");
    rt_host_step_end(step);
}

void rt_trace_push(const char *name)
{
    nvtxRangePushA(name);
    rt_host_trace_push(name);
}

void rt_trace_pop(void)
{
    /* With --trace, times must be GPU times: wait for the op's kernels (not possible,
     * and not needed, while a graph is captured or replayed). */
    if (rt_opts_g.trace_path[0] && rt_cuda_g.ready && capturing < 0)
        rt_cuda_sync("trace");
    rt_host_trace_pop();
    nvtxRangePop();
}
