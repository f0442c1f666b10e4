/* own.h: the CUDA backend's own kernels of the ops that dnn.c runs on cuDNN when the
 * backend is built with it (BURSTRT_CUDNN): conv2d (conv.cu), max/average pooling,
 * batchnorm (nn.cu) and relu (elementwise.cu). Same arguments and semantics as the public
 * kernels of burstrt.h. dnn.c falls back to them where cuDNN declines a shape or an
 * attribute (ceil-mode pooling, SyncBN over several ranks, ...), and the GPU test
 * test_cuda_cudnn checks the cuDNN paths against them. Plain C: tests include it. */
#ifndef BURSTRT_CUDA_OWN_H
#define BURSTRT_CUDA_OWN_H

#include "burstrt.h"

#ifdef __cplusplus
extern "C" {
#endif

void rt_cuda_own_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w,
                            const rt_tensor *b, const rt_conv2d_attrs *a, rt_tensor *y);
void rt_cuda_own_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w,
                            const rt_tensor *dy, const rt_conv2d_attrs *a, rt_tensor *dx,
                            rt_tensor *dw, rt_tensor *db);
void rt_cuda_own_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y);
void rt_cuda_own_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                               rt_tensor *dx);
void rt_cuda_own_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y);
void rt_cuda_own_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx);
void rt_cuda_own_batchnorm2d_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                                 rt_tensor *running_mean, rt_tensor *running_var, float momentum,
                                 float eps, rt_tensor *saved, rt_tensor *y);
void rt_cuda_own_batchnorm2d_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                                 const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma,
                                 rt_tensor *dbeta);
void rt_cuda_own_batchnorm2d_sync_fwd(const rt_comm *comm, const rt_tensor *x,
                                      const rt_tensor *gamma, const rt_tensor *beta,
                                      rt_tensor *running_mean, rt_tensor *running_var,
                                      float momentum, float eps, rt_tensor *saved, rt_tensor *y);
void rt_cuda_own_batchnorm2d_sync_bwd(const rt_comm *comm, const rt_tensor *x,
                                      const rt_tensor *gamma, const rt_tensor *saved,
                                      const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma,
                                      rt_tensor *dbeta);
void rt_cuda_own_batchnorm2d_infer(const rt_tensor *x, const rt_tensor *gamma,
                                   const rt_tensor *beta, const rt_tensor *running_mean,
                                   const rt_tensor *running_var, float eps, rt_tensor *y);
/* conv.cu: a convolution's bias, y [N,K,H,W] += b[K], and its gradient, db[K] += the sum
 * of dy over N, H, W (in f32), for activations of any storage dtype; the caller has
 * checked the shapes. The own conv2d adds its bias with them, and dnn.c does with 16-bit
 * activations in place of cuDNN's calls. */
void rt_cuda_conv_add_bias(rt_tensor *y, const rt_tensor *b, const char *op);
void rt_cuda_conv_bias_grad(const rt_tensor *dy, rt_tensor *db, const char *op);
void rt_cuda_own_relu_fwd(const rt_tensor *x, rt_tensor *y);
void rt_cuda_own_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);

/* True when this library runs those ops on cuDNN (built with it). */
bool rt_cuda_has_cudnn(void);

#ifdef __cplusplus
}
#endif
#endif
