/* convert.cu: element-type conversion between f32, bf16 and f16 on the device (convert.h),
 * for host C code that holds data in one type and needs it in another: dnn.c rounds an f32
 * weight to the activations' 16-bit type for cuDNN and adds a 16-bit weight gradient into
 * the f32 one. One thread per element (grid-stride) on the current stream. */
#include "act.cuh"
#include "convert.h"

template <typename S, typename D> __global__ void convert_k(const S *s, D *d, int64_t n)
{
    RT_FOR(i, n) rt_st(d + i, rt_ld(s + i));
}

template <typename S> __global__ void add_into_f32_k(float *d, const S *s, int64_t n)
{
    RT_FOR(i, n) d[i] += rt_ld(s + i);
}

extern "C" void rt_cuda_convert(const void *src, rt_dtype sdt, void *dst, rt_dtype ddt, int64_t n,
                                const char *op)
{
    if (n <= 0)
        return;
    RT_ACT_DISPATCH(
        sdt, S,
        RT_ACT_DISPATCH(
            ddt, D, convert_k<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>((const S *)src, (D *)dst, n)));
    rt_cuda_launched(op);
}

extern "C" void rt_cuda_add_into_f32(float *dst, const void *src, rt_dtype sdt, int64_t n,
                                     const char *op)
{
    if (n <= 0)
        return;
    RT_ACT_DISPATCH(sdt, S,
                    add_into_f32_k<<<rt_cuda_blocks(n), 256, 0, RT_FG>>>(dst, (const S *)src, n));
    rt_cuda_launched(op);
}
