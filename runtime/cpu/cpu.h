/* cpu.h: what the CPU backend's files share beyond internal.h. */
#ifndef BURSTRT_CPU_H
#define BURSTRT_CPU_H

#include "../internal.h"

/* conv.c: samples per GEMM of conv2d (the benchmark mirrors the lowering with it) */
#define RT_CONV_COLUMNS 1024
int64_t rt_conv2d_chunk(int64_t N, int64_t ohw);

#endif
