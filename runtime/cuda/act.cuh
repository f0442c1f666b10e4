/* act.cuh: the CUDA kernels' access to activations, which are stored as f32, bf16 or
 * f16 (rt_storage_dtype; BURSTRT_STORAGE=16). A kernel that reads or writes
 * activations or their gradients is a template on their element type T; it loads with
 * rt_ld (to f32), computes in f32 and stores with rt_st (rounded to nearest even).
 * Parameters, their gradients, statistics and `saved` buffers stay f32. A launcher
 * picks the instantiation from the tensor's dtype with RT_ACT_DISPATCH. Only .cu files
 * include this. */
#ifndef BURSTRT_CUDA_ACT_CUH
#define BURSTRT_CUDA_ACT_CUH

#include "cuda_internal.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float rt_ld(const float *p)
{
    return *p;
}
__device__ __forceinline__ float rt_ld(const __nv_bfloat16 *p)
{
    return __bfloat162float(*p);
}
__device__ __forceinline__ float rt_ld(const __half *p)
{
    return __half2float(*p);
}
__device__ __forceinline__ void rt_st(float *p, float v)
{
    *p = v;
}
__device__ __forceinline__ void rt_st(__nv_bfloat16 *p, float v)
{
    *p = __float2bfloat16(v);
}
__device__ __forceinline__ void rt_st(__half *p, float v)
{
    *p = __float2half(v);
}

/* A tensor's data as T (host side, for launchers). */
template <typename T> static inline T *rt_act(const rt_tensor *t)
{
    return (T *)t->data;
}

/* A storage dtype as CUDA's library type (cudaDataType_t, which cuBLAS takes). */
static inline cudaDataType_t rt_cuda_type(rt_dtype dt)
{
    return dt == RT_BF16 ? CUDA_R_16BF : dt == RT_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* Runs the statements that follow with T the element type of dtype dt:
 *   RT_ACT_DISPATCH(x->dtype, T, kernel<T><<<...>>>(rt_act<T>(x), ...));
 * f32 for RT_F32 (and anything else: the shared shape checks have already rejected
 * other dtypes). */
#define RT_ACT_DISPATCH(dt, T, ...)         \
    do {                                    \
        switch (dt) {                       \
        case RT_BF16: {                     \
            typedef __nv_bfloat16 T;        \
            __VA_ARGS__;                    \
            break;                          \
        }                                   \
        case RT_F16: {                      \
            typedef __half T;               \
            __VA_ARGS__;                    \
            break;                          \
        }                                   \
        default: {                          \
            typedef float T;                \
            __VA_ARGS__;                    \
            break;                          \
        }                                   \
        }                                   \
    } while (0)

#endif
