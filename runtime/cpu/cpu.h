/* cpu.h: what the CPU backend's files share beyond internal.h. */
#ifndef BURSTRT_CPU_H
#define BURSTRT_CPU_H

#include "../internal.h"

#include <mpi.h>

/* The runtime's own loops (batchnorm, the optimizers, ...) are compiled for the baseline
 * x86-64 and again for AVX2 and AVX-512; the loader picks the best the CPU runs (GCC's
 * function multi-versioning), so they vectorise on the machine they run on. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RT_VECTOR       __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
/* Loops over short rows (pooling's 7 to 28 outputs): AVX-512's 16 lanes would leave most
 * of a row to the scalar epilogue, AVX2's 8 do not. */
#define RT_VECTOR_SHORT __attribute__((target_clones("default", "arch=x86-64-v3")))
#else
#define RT_VECTOR
#define RT_VECTOR_SHORT
#endif

/* grad_mpi.c: the gradient all-reduce overlapped with the backward (the transport's
 * grad_start, grad_wait, grad_progress), and its buffers' release. */
void rt_grad_mpi_start(const rt_comm *c, float *grad, int64_t n);
void rt_grad_mpi_wait(void);
void rt_grad_mpi_progress(void);
void rt_grad_mpi_wait_one(const rt_comm *c, float *grad);
void rt_grad_buckets_free(void);

/* elementwise.c: the device's scale_check (device.h). */
void rt_cpu_scale_check(float *x, int64_t n, float s, int32_t *found, const char *op);

/* ref_conv.c: samples per GEMM of the reference conv2d (bench_conv mirrors its lowering) */
#define RT_CONV_COLUMNS 1024
int64_t rt_conv2d_chunk(int64_t N, int64_t ohw);

#endif
