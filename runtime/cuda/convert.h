/* convert.h: element-type conversion on the device (convert.cu), for host C files of the
 * CUDA backend (dnn.c) that cannot instantiate act.cuh's templates: f32, bf16 and f16 in
 * any pair. Both launch one kernel on the current stream, so they may sit inside a
 * captured CUDA graph. */
#ifndef BURSTRT_CUDA_CONVERT_H
#define BURSTRT_CUDA_CONVERT_H

#include "burstrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = src[i] for i < n, read as sdt and stored as ddt (rounded to nearest even). */
void rt_cuda_convert(const void *src, rt_dtype sdt, void *dst, rt_dtype ddt, int64_t n,
                     const char *op);
/* dst[i] += src[i] for i < n, src read as sdt, the sum in f32. */
void rt_cuda_add_into_f32(float *dst, const void *src, rt_dtype sdt, int64_t n, const char *op);

#ifdef __cplusplus
}
#endif

#endif
