/* host_core.c: the CPU backend's core.c (options, fatal errors, watchdog,
 * steps) reused by the CUDA backend. Its host memory pool becomes rt_host_pool, and
 * rt_init, rt_finalize and the step hooks become rt_host_*, which device.c wraps with
 * device selection, stream synchronisation and the device memory pool.
 * Compiled into burstrt_cuda only; the renamed functions are wrapped by the CUDA
 * backend (see cuda_internal.h). Nothing else of ../core.c changes. */
#define rt_pool         rt_host_pool
#define rt_pool_new     rt_host_pool_new
#define rt_pool_free    rt_host_pool_free
#define rt_tensor_new   rt_host_tensor_new
#define rt_tensor_view  rt_host_tensor_view
#define rt_tensor_slice rt_host_tensor_slice
#define rt_pool_alloc   rt_host_pool_alloc
#define rt_pool_scratch rt_host_pool_scratch
#define rt_tensor_zero  rt_host_tensor_zero
#define rt_tensor_copy  rt_host_tensor_copy
#define rt_init         rt_host_init
#define rt_finalize     rt_host_finalize
#define rt_step_begin   rt_host_step_begin
#define rt_step_end     rt_host_step_end
#include "../core.c"
