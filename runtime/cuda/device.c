/* device.c: the CUDA backend's device (device.h), the top of runtime/cuda/. Over the
 * context (context.c: the GPU, its streams, handles, scratch buffers) it gives the shared
 * runtime device memory for the pools (tensor.c carves tensors out of 64 MiB chunks), the
 * switch to the background's low-priority stream, and the CUDA graphs that replay the
 * steady-state iteration, and it hands the kernels' hooks (elementwise.cu, nn.cu) to the
 * shared code through the rt_dev table. Around the
 * shared step and trace code it adds what a GPU needs: the step number in device memory
 * (graphs read it), a stream sync at the end of each step (so step times and the
 * watchdog see GPU work, and NCCL errors surface), NVTX ranges for every traced op. */
#include "cuda_internal.h"

#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    rt_cuda_g.graphs_exist = true;
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
    rt_cuda_g.graphs_exist = false;
    rt_cuda_release_context();
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
    .free = rt_cuda_release,
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
