/* cpu.h: what the CPU backend's files share beyond internal.h. */
#ifndef BURSTRT_CPU_H
#define BURSTRT_CPU_H

#include "../internal.h"

/* The runtime's own loops (batchnorm, the optimizers, ...) are compiled for the baseline
 * x86-64 and again for AVX2 and AVX-512; the loader picks the best the CPU runs (GCC's
 * function multi-versioning), so they vectorise on the machine they run on. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RT_VECTOR __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define RT_VECTOR
#endif

/* device.c: the threads of the node's ranks outnumber its CPUs (set by rt_init). */
extern bool rt_cpu_oversubscribed;

/* ref_conv.c: samples per GEMM of the reference conv2d (bench_conv mirrors its lowering) */
#define RT_CONV_COLUMNS 1024
int64_t rt_conv2d_chunk(int64_t N, int64_t ohw);

#endif
