/* device.c: the CUDA backend's device (device.h). It picks this rank's GPU, makes the
 * two streams (the foreground iteration runs on the highest-priority stream; the
 * lowest-priority one is reserved for background work, so the GPU scheduler prefers the
 * foreground job's kernels), the cuBLAS handle, device memory for the shared pools
 * (tensor.c carves tensors out of 64 MiB chunks), the scratch and staging buffers of
 * the kernels, and the CUDA graphs that replay the steady-state iteration. Around the
 * shared step and trace code it adds what a GPU needs: the step number in device memory
 * (graphs read it), a stream sync at the end of each step (so step times and the
 * watchdog see GPU work, and NCCL errors surface), NVTX ranges for every traced op. */
#include "cuda_internal.h"

#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rt_cuda_state rt_cuda_g;

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
     * never finishes, but its communicator reports the failure asynchronously. The wait
     * is marked for the watchdog: NCCL kernels may be waiting for another rank. */
    cudaError_t e = cudaStreamQuery(rt_cuda_g.cur);
    if (e != cudaSuccess) {
        rt_wait_begin("device");
        for (;;) {
            if (e == cudaSuccess)
                break;
            if (e != cudaErrorNotReady)
                rt_cuda_check(e, op, "stream work");
            rt_nccl_poll(op);
            /* The host waits for the foreground's stream (a peer's NCCL transfer, or
             * kernels): a background slice may run beside it on the low-priority stream
             * (then poll again at once), else sleep a little. */
            if (rt_cuda_g.cur != rt_cuda_g.fg || !rt_bg_idle()) {
                struct timespec ts = {0, 20000}; /* 20 us: short against any step */
                nanosleep(&ts, NULL);
            }
            e = cudaStreamQuery(rt_cuda_g.cur);
        }
        rt_wait_end();
    }
    /* The foreground's stream is drained and the host has not queued more: an idle
     * window, where background slices may run within the step's allowance (background.c;
     * each is complete before the foreground continues). */
    if (rt_cuda_g.cur == rt_cuda_g.fg)
        rt_bg_fill();
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
    /* A cuBLAS handle per side, each with its own workspace: 32 MiB, NVIDIA's
     * recommendation for Hopper; an explicit workspace keeps cuBLAS from allocating while
     * a graph is captured. Its default math, with split-K reductions kept in f32 where the
     * output is 16-bit (16-bit storage): the f32 accumulation docs/cuda.md promises. */
    const size_t ws = (size_t)32 << 20;
    for (int s = 0; s < 2; s++) {
        RT_CUBLAS(cublasCreate(&rt_cuda_g.blas_side[s]), "init");
        RT_CUBLAS(
            cublasSetMathMode(rt_cuda_g.blas_side[s],
                              (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
            "init");
        RT_CUBLAS(cublasSetStream(rt_cuda_g.blas_side[s], s ? rt_cuda_g.bg : rt_cuda_g.fg), "init");
        RT_CUDA(cudaMalloc(&rt_cuda_g.blas_workspace[s], ws), "init");
        RT_CUBLAS(cublasSetWorkspace(rt_cuda_g.blas_side[s], rt_cuda_g.blas_workspace[s], ws),
                  "init");
    }
    RT_CUDA(cudaMalloc((void **)&rt_cuda_g.d_step, sizeof(int64_t)), "init");
    /* Plain cudaMemset runs on the legacy stream, which the non-blocking streams do not
     * wait for: zero on the stream that will read it. */
    RT_CUDA(cudaMemsetAsync(rt_cuda_g.d_step, 0, sizeof(int64_t), rt_cuda_g.cur), "init");
    const char *dt = getenv("BURSTRT_COMPUTE_DTYPE");
    if (dt && !strcmp(dt, "bf16"))
        rt_set_compute_dtype(RT_COMPUTE_BF16);
    else if (dt && !strcmp(dt, "f16"))
        rt_set_compute_dtype(RT_COMPUTE_F16);
    else if (dt && *dt && strcmp(dt, "f32"))
        rt_fatal("init", "BURSTRT_COMPUTE_DTYPE must be f32, bf16 or f16, got '%s'", dt);
    rt_cuda_g.ready = true;
}

/* Background work inside a foreground program: kernels, copies and cuBLAS calls go to
 * the low-priority stream, with the background side's handles and scratch buffers, until
 * switched back. Switching to it does not wait for the foreground's stream: the slice
 * reads and writes nothing of the foreground's, and runs beside whatever foreground
 * work is in flight. Switching back waits for the slice, so that one slice at a time
 * runs and its measured time is the GPU's. */
static void cuda_background(bool on)
{
    rt_cuda_ensure();
    cudaStream_t want = on ? rt_cuda_g.bg : rt_cuda_g.fg;
    if (want == rt_cuda_g.cur)
        return;
    if (!on)
        rt_cuda_sync("background_stream"); /* the background's stream: no slice runs */
    rt_cuda_g.cur = want;
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

/* One set per side (rt_cuda_side): a background slice may run while foreground kernels
 * that use the foreground's buffers are still in flight. */
static struct {
    void *p;
    size_t bytes;
} scratch[2][RT_SCRATCH_COUNT], staging[2];

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
    int side = rt_cuda_side();
    if (bytes > scratch[side][slot].bytes) {
        rt_cuda_sync(op); /* refuses during capture: the buffer must not move */
        release_device(scratch[side][slot].p);
        size_t want = bytes + bytes / 4; /* slack: shards differ by a sample */
        RT_CUDA(cudaMalloc(&scratch[side][slot].p, want), op);
        scratch[side][slot].bytes = want;
    }
    return scratch[side][slot].p;
}

void *rt_cuda_host_staging(size_t bytes, const char *op)
{
    rt_cuda_ensure();
    int side = rt_cuda_side();
    if (bytes > staging[side].bytes) {
        rt_cuda_sync(op);
        if (staging[side].p)
            cudaFreeHost(staging[side].p);
        RT_CUDA(cudaMallocHost(&staging[side].p, bytes), op);
        staging[side].bytes = bytes;
    }
    return staging[side].p;
}

/* ---- device memory ------------------------------------------------------------------ */

static void *cuda_alloc(size_t bytes, const char *op)
{
    rt_cuda_ensure();
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        rt_fatal(op, "out of device memory allocating %zu bytes (%zu of %zu MiB free): %s", bytes,
                 fr >> 20, tot >> 20, cudaGetErrorString(e));
    }
    /* Plain cudaMemset runs on the legacy stream, which the non-blocking streams do not
     * wait for: zero on the stream that will use the memory. */
    RT_CUDA(cudaMemsetAsync(p, 0, bytes, rt_cuda_g.cur), op);
    return p;
}

static void cuda_copy(void *dst, const void *src, size_t bytes, rt_copy_kind kind, const char *op)
{
    if (bytes == 0)
        return;
    if (kind == RT_COPY_D2D) {
        RT_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, rt_cuda_g.cur), op);
        return;
    }
    rt_cuda_not_capturing(op);
    RT_CUDA(cudaMemcpyAsync(dst, src, bytes,
                            kind == RT_COPY_H2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                            rt_cuda_g.cur),
            op);
    rt_cuda_sync(op);
}

static void cuda_zero(void *p, size_t bytes, const char *op)
{
    RT_CUDA(cudaMemsetAsync(p, 0, bytes, rt_cuda_g.cur), op);
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

/* ---- start, end, steps, traced ops ------------------------------------------------------ */

static void cuda_start(char **argv)
{
    (void)argv;
}

static void cuda_init(const rt_options *o)
{
    (void)o; /* --threads sets BLAS threads, and there is no host BLAS here */
    rt_cuda_ensure();
}

static void cuda_sync(const char *op)
{
    rt_cuda_sync(op);
}

static void cuda_finalize(void)
{
    /* (rt_finalize has waited already when MPI ran; a program without rt_init has not.) */
    if (rt_cuda_g.ready && capturing < 0)
        rt_cuda_sync("finalize");
    for (int s = 0; s < MAX_SEGMENTS; s++)
        if (seg[s].exec) {
            cudaGraphExecDestroy(seg[s].exec);
            seg[s].exec = NULL;
            seg[s].runs = 0;
        }
    graphs_exist = false;
    while (retired_list) {
        retired *r = retired_list;
        retired_list = r->next;
        cudaFree(r->p);
        free(r);
    }
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < RT_SCRATCH_COUNT; i++) {
            cudaFree(scratch[s][i].p);
            scratch[s][i].p = NULL;
            scratch[s][i].bytes = 0;
        }
        if (staging[s].p)
            cudaFreeHost(staging[s].p);
        staging[s].p = NULL;
        staging[s].bytes = 0;
    }
    if (rt_cuda_g.ready) {
        rt_cuda_dnn_finalize();
        for (int s = 0; s < 2; s++) {
            cublasDestroy(rt_cuda_g.blas_side[s]);
            cudaFree(rt_cuda_g.blas_workspace[s]);
        }
        cudaFree(rt_cuda_g.d_step);
        cudaStreamDestroy(rt_cuda_g.fg);
        cudaStreamDestroy(rt_cuda_g.bg);
        rt_cuda_g.ready = false;
    }
}

static void cuda_step_begin(int64_t step)
{
    rt_cuda_ensure();
    rt_cuda_g.step = step;
    /* From pageable memory: staged before the call returns, so `step` may go. */
    RT_CUDA(cudaMemcpyAsync(rt_cuda_g.d_step, &step, sizeof step, cudaMemcpyHostToDevice,
                            rt_cuda_g.cur),
            "step");
}

static void cuda_step_end(int64_t step)
{
    (void)step;
    rt_cuda_sync("step");
    rt_cuda_check_inputs("step");
}

static void cuda_op_begin(const char *name)
{
    nvtxRangePushA(name);
}

static void cuda_op_end(const char *name)
{
    (void)name;
    /* With --trace, times must be GPU times: wait for the op's kernels (not possible,
     * and not needed, while a graph is captured or replayed). */
    if (rt_opts_g.trace_path[0] && rt_cuda_g.ready && capturing < 0)
        rt_cuda_sync("trace");
    nvtxRangePop();
}

/* BURSTRT_STORAGE=16: activations and their gradients in the 16-bit compute dtype
 * (act.cuh; tensor.c's rt_storage_dtype asks); unset or f32: f32 storage, with GEMM
 * inputs rounded in scratch. Read once, after the device has started (which applies
 * BURSTRT_COMPUTE_DTYPE), so that the first tensor is stored as the later ones. */
static bool cuda_store16(void)
{
    static int on = -1;
    if (on < 0) {
        rt_cuda_ensure();
        const char *v = getenv("BURSTRT_STORAGE");
        if (v && *v && strcmp(v, "16") && strcmp(v, "f32"))
            rt_fatal("init", "BURSTRT_STORAGE must be 16 or f32, got '%s'", v);
        on = v && !strcmp(v, "16");
    }
    return on;
}

const rt_device rt_dev = {
    .name = "cuda",
    .host_memory = false,
    .chunk_bytes = (size_t)64 << 20, /* one cudaMalloc per 64 MiB, not one per tensor */
    .start = cuda_start,
    .init = cuda_init,
    .finalize = cuda_finalize,
    .alloc = cuda_alloc,
    .free = release_device,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .background = cuda_background,
    .step_begin = cuda_step_begin,
    .step_end = cuda_step_end,
    .op_begin = cuda_op_begin,
    .op_end = cuda_op_end,
    .scale_check = rt_cuda_scale_check,
    .synth = rt_cuda_synth,
    .store16 = cuda_store16,
};
