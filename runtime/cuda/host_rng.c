/* host_rng.c: the CPU backend's counter-based RNG, reused by the CUDA backend
 * so that GPU runs start from the very same weights. The initialisers become rt_host_*
 * and fill a pinned host twin that bridge.c copies to the device.
 * Compiled into burstrt_cuda only; the renamed functions are wrapped by the CUDA
 * backend (see cuda_internal.h). Nothing else of ../rng.c changes. */
#define rt_init_uniform         rt_host_init_uniform
#define rt_init_normal          rt_host_init_normal
#define rt_init_const           rt_host_init_const
#define rt_init_kaiming_uniform rt_host_init_kaiming_uniform
#include "../rng.c"
