/* context.c: the CUDA backend's context, the floor of runtime/cuda/. It picks this rank's
 * GPU and makes the two streams (the foreground iteration runs on the highest-priority
 * stream; the lowest-priority one is reserved for background work, so the GPU scheduler
 * prefers the foreground job's kernels), the cuBLAS handles, the step's device copy and
 * the kernels' scratch and staging buffers; it checks errors and waits for the stream.
 * Every other file of the backend builds on it, and it calls none of them: what must
 * happen while it waits (NCCL's error poll) or when it is released (cuDNN's handles) is
 * registered with it as a hook. */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

rt_cuda_state rt_cuda_g;

/* ---- hooks of the files above ----------------------------------------------------- */

/* comm_nccl.c's error poll and dnn.c's release register here, so that the context calls
 * nothing above it. Registering twice is registering once. */
#define MAX_HOOKS 4
static void (*wait_hooks[MAX_HOOKS])(const char *op);
static void (*finalize_hooks[MAX_HOOKS])(void);

void rt_cuda_on_wait(void (*poll)(const char *op))
{
    int i = 0;
    while (i < MAX_HOOKS && wait_hooks[i] && wait_hooks[i] != poll)
        i++;
    if (i == MAX_HOOKS)
        rt_fatal("init", "more than %d CUDA wait hooks", MAX_HOOKS);
    wait_hooks[i] = poll;
}

void rt_cuda_on_finalize(void (*release)(void))
{
    int i = 0;
    while (i < MAX_HOOKS && finalize_hooks[i] && finalize_hooks[i] != release)
        i++;
    if (i == MAX_HOOKS)
        rt_fatal("init", "more than %d CUDA finalize hooks", MAX_HOOKS);
    finalize_hooks[i] = release;
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
            for (int i = 0; i < MAX_HOOKS && wait_hooks[i]; i++)
                wait_hooks[i](op);
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

/* ---- scratch and staging -------------------------------------------------------- */

/* A scratch buffer is never freed while a graph might still reference it: buffers
 * outgrown after the first capture are retired and freed at finalize. */
typedef struct retired {
    void *p;
    struct retired *next;
} retired;
static retired *retired_list;

/* One set per side (rt_cuda_side): a background slice may run while foreground kernels
 * that use the foreground's buffers are still in flight. */
static struct {
    void *p;
    size_t bytes;
} scratch[2][RT_SCRATCH_COUNT], staging[2];

void rt_cuda_release(void *p)
{
    if (!p)
        return;
    if (!rt_cuda_g.graphs_exist) {
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
        rt_cuda_release(scratch[side][slot].p);
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

void rt_cuda_release_context(void)
{
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
        for (int i = 0; i < MAX_HOOKS && finalize_hooks[i]; i++)
            finalize_hooks[i]();
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
