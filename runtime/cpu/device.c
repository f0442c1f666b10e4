/* device.c: the CPU backend's device (device.h): host memory, one stream, nothing to
 * wait for. Tensors are one aligned allocation each (so the sanitizers and valgrind see
 * every tensor's bounds), copies are memcpy, graph segments always run their body. Set-up:
 * the threads of a rank (oneDNN through OpenMP, the runtime's OpenMP loops and OpenBLAS
 * all use --threads of them, by default the rank's share of its CPUs, see auto_threads)
 * and, before MPI starts, OpenBLAS's kernels (see cpu_start); the oneDNN state
 * (onednn.c) is released at the end. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, malloc_usable_size */
#include "../mpi_glue.h"
#include "onednn.h"

#include <errno.h>
#include <malloc.h>
#include <omp.h>
#include <sched.h>
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

/* The CPUs this rank may use without oversubscribing the other ranks of its node: each
 * CPU of its affinity mask counts 1/k, k the number of the node's ranks whose masks hold
 * it (so 4 unbound ranks on 2 cores get half a CPU each, one rank 2, ranks bound to cores
 * of their own 1 each). Collective over the world. */
static double cpu_share(void)
{
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) {
        CPU_ZERO(&mine);
        CPU_SET(0, &mine);
    }
    MPI_Comm node;
    int n = 1;
    rt_mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                 "threads");
    rt_mpi_check(MPI_Comm_size(node, &n), "threads");
    cpu_set_t *all = rt_xcalloc((size_t)n, sizeof *all, "threads");
    rt_mpi_check(
        MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node),
        "threads");
    MPI_Comm_free(&node);
    double share = 0.0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &mine))
            continue;
        int users = 0;
        for (int r = 0; r < n; r++)
            users += CPU_ISSET(cpu, &all[r]) != 0;
        share += 1.0 / users;
    }
    free(all);
    return share;
}

/* OMP_NUM_THREADS when it is one positive number (OpenMP's own list form and garbage
 * count as unset), else 0. */
static int omp_num_threads_env(void)
{
    const char *v = getenv("OMP_NUM_THREADS");
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return !errno && *end == 0 && n > 0 && n <= 4096 ? (int)n : 0;
}

/* --threads, else OMP_NUM_THREADS, else the rank's share of CPUs rounded down (at least
 * 1). When the threads of the node's ranks outnumber its CPUs, waits for other ranks
 * sleep instead of spinning (comm_mpi.c), so that the rank being waited for gets the CPU. */
static void cpu_init(const rt_options *o)
{
    const double share = cpu_share();
    const int env = omp_num_threads_env();
    const int threads = o->threads > 0 ? o->threads
                        : env > 0      ? env
                        : share < 1.0  ? 1
                                       : (int)(share + 1e-9);
    rt_mpi_wait_sleeps = threads > share + 1e-9;
    rt_opts_g.threads = threads;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
}

static void cpu_finalize(void)
{
    rt_dnnl_finalize();
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
    if (!p)
        return;
    rt_dnnl_forget(p, malloc_usable_size(p)); /* what forwards kept for this memory */
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
    .scale_check = rt_cpu_scale_check,
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
