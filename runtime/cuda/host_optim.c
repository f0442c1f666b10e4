/* host_optim.c: the CPU backend's parameter registry, reused by the CUDA
 * backend (its tensors come from the device pool through rt_tensor_new). The host
 * optimizer loops and the per-parameter all-reduce become rt_host_* and are unused:
 * bridge.c runs the optimizers on the device and all-reduces in one NCCL group.
 * Compiled into burstrt_cuda only; the renamed functions are wrapped by the CUDA
 * backend (see cuda_internal.h). Nothing else of ../optim.c changes. */
#define rt_sgd_step               rt_host_sgd_step
#define rt_adam_step              rt_host_adam_step
#define rt_params_allreduce_grads rt_host_params_allreduce_grads
#include "../optim.c"
