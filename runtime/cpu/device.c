/* device.c: the CPU backend's device (device.h): host memory, one stream, nothing to
 * wait for. Tensors are one aligned allocation each (so the sanitizers and valgrind see
 * every tensor's bounds), copies are memcpy, graph segments always run their body. The
 * backend's one piece of set-up is OpenBLAS: the thread count per rank (--threads) and,
 * before MPI starts, its kernels (see cpu_start). */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);
void openblas_set_num_threads(int num_threads);

/* OpenBLAS picks its kernels from the CPU model when it loads. Virtual machines often
 * hide the model, and OpenBLAS then falls back to its generic SSE3 kernels
 * ("Prescott"): on the development machine, an AVX-512 Xeon, sgemm ran at 30 GFLOP/s
 * instead of 143. Where that happened and the CPU has AVX-512 (or AVX2), the program
 * sets OPENBLAS_CORETYPE and re-executes itself once, before MPI starts, so the
 * environment reaches OpenBLAS's loader. OPENBLAS_CORETYPE set by the user is kept;
 * BURSTRT_BLAS_KEEP=1 turns this off. */
static void cpu_start(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv("BURSTRT_BLAS_KEEP"))
        return;
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        return; /* under valgrind: re-executing would leave it */
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0)
        return;
    __builtin_cpu_init();
    const char *want = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : NULL;
    if (!want)
        return;
    setenv("OPENBLAS_CORETYPE", want, 1);
    execv("/proc/self/exe", argv);
    /* Not re-executed (no /proc?): carry on with the generic kernels. */
}

static void cpu_init(const rt_options *o)
{
    openblas_set_num_threads(o->threads);
}

static void cpu_finalize(void)
{
}

static void *cpu_alloc(size_t bytes, const char *op)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
        rt_fatal(op, "out of memory allocating %zu bytes", bytes);
    memset(p, 0, rounded);
    return p;
}

static void cpu_free(void *p)
{
    free(p);
}

static void cpu_copy(void *dst, const void *src, size_t bytes, rt_copy_kind kind, const char *op)
{
    (void)kind;
    (void)op;
    memmove(dst, src, bytes);
}

static void cpu_zero(void *p, size_t bytes, const char *op)
{
    (void)op;
    memset(p, 0, bytes);
}

static void cpu_sync(const char *op)
{
    (void)op;
}

static void cpu_background(bool on)
{
    (void)on;
}

static void cpu_step(int64_t step)
{
    (void)step;
}

static void cpu_op(const char *name)
{
    (void)name;
}

const rt_device rt_dev = {
    .name = "cpu",
    .host_memory = true,
    .chunk_bytes = 0,
    .start = cpu_start,
    .init = cpu_init,
    .finalize = cpu_finalize,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .background = cpu_background,
    .step_begin = cpu_step,
    .step_end = cpu_step,
    .op_begin = cpu_op,
    .op_end = cpu_op,
    .synth = NULL,
};

/* CUDA graph segments have no CPU counterpart: the body always runs. */
bool rt_graph_begin(int segment)
{
    if (segment < 0 || segment > 1023)
        rt_fatal("graph", "segment %d outside 0..1023", segment);
    return true;
}

void rt_graph_end(int segment)
{
    (void)segment;
}
