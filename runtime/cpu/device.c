/* device.c: the device hooks of burstrt.h on the CPU backend, where there is one memory
 * and one stream: the compute precision is recorded (kernels stay f32), graph segments
 * always run their body, and tensor copies are memcpy. The CUDA backend implements the
 * same functions in runtime/cuda/device.c. */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);

/* OpenBLAS picks its kernels from the CPU model when it loads. Virtual machines often
 * hide the model, and OpenBLAS then falls back to its generic SSE3 kernels
 * ("Prescott"): on the development machine, an AVX-512 Xeon, sgemm ran at 30 GFLOP/s
 * instead of 143. Where that happened and the CPU has AVX-512 (or AVX2), the program
 * sets OPENBLAS_CORETYPE and re-executes itself once, before MPI starts, so the
 * environment reaches OpenBLAS's loader. OPENBLAS_CORETYPE set by the user is kept;
 * BURSTRT_BLAS_KEEP=1 turns this off. */
void rt_blas_select(char **argv)
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

static rt_compute_dtype compute_dtype = RT_COMPUTE_F32;

void rt_set_compute_dtype(rt_compute_dtype dt)
{
    compute_dtype = dt;
}
rt_compute_dtype rt_get_compute_dtype(void)
{
    return compute_dtype;
}

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
void rt_device_sync(void)
{
}
void rt_use_background_stream(bool on)
{
    (void)on;
}
void rt_tensor_write(rt_tensor *t, const void *host)
{
    memcpy(t->data, host, (size_t)t->numel * 4);
}
void rt_tensor_read(const rt_tensor *t, void *host)
{
    memcpy(host, t->data, (size_t)t->numel * 4);
}
