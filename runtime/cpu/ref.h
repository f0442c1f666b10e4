/* ref.h: the reference kernels of the CPU backend. Production kernels of the ops below run
 * on oneDNN (conv2d, pooling, relu/relu6/gelu, the GEMMs of linear) or on vectorised f32 loops
 * (batchnorm, 2x2 max pooling, relu's backward); these are the plain implementations they replaced, kept so that the tests
 * can check every production path against them on random shapes (tests/unit/runtime/
 * test_onednn.c), and used in production only where oneDNN has no implementation for an
 * attribute combination. Same arguments and semantics as the public kernels of burstrt.h;
 * batchnorm takes the rank set (NULL: this shard's statistics). */
#ifndef BURSTRT_CPU_REF_H
#define BURSTRT_CPU_REF_H

#include "cpu.h"

/* ref_conv.c: im2col + OpenBLAS sgemm */
void rt_ref_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                       const rt_conv2d_attrs *a, rt_tensor *y);
void rt_ref_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                       const rt_conv2d_attrs *a, rt_tensor *dx, rt_tensor *dw, rt_tensor *db);

/* ref_nn.c */
void rt_ref_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y);
void rt_ref_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                          rt_tensor *dx);
void rt_ref_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y);
void rt_ref_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx);
void rt_ref_batchnorm2d_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                            const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                            float momentum, float eps, rt_tensor *saved, rt_tensor *y);
void rt_ref_batchnorm2d_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                            const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                            rt_tensor *dgamma, rt_tensor *dbeta);
void rt_ref_relu_fwd(const rt_tensor *x, rt_tensor *y);
void rt_ref_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
void rt_ref_relu6_fwd(const rt_tensor *x, rt_tensor *y);
void rt_ref_relu6_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
void rt_ref_gelu_fwd(const rt_tensor *x, rt_tensor *y);
void rt_ref_gelu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
void rt_ref_gelu_erf_fwd(const rt_tensor *x, rt_tensor *y);
void rt_ref_gelu_erf_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx);
void rt_ref_linear_fwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b, rt_tensor *y);
void rt_ref_linear_bwd(const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy, rt_tensor *dx,
                       rt_tensor *dw, rt_tensor *db);

#endif
