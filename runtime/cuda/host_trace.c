/* host_trace.c: the CPU backend's timers and Chrome trace writer, reused by
 * the CUDA backend; rt_trace_push/pop become rt_host_trace_push/pop, which device.c
 * wraps with NVTX ranges (and a stream sync under --trace, so times are GPU times).
 * Compiled into burstrt_cuda only; the renamed functions are wrapped by the CUDA
 * backend (see cuda_internal.h). Nothing else of ../trace.c changes. */
#define rt_trace_push rt_host_trace_push
#define rt_trace_pop  rt_host_trace_pop
#include "../trace.c"
