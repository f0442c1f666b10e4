/* host_checkpoint.c: the CPU backend's checkpoint format, reused by
 * the CUDA backend so that checkpoints are interchangeable between backends. Save and
 * load become rt_host_*; bridge.c points the parameters at host copies around them,
 * and owns attach / maybe_save (which must call the wrapped versions).
 * Compiled into burstrt_cuda only; the renamed functions are wrapped by the CUDA
 * backend (see cuda_internal.h). Nothing else of ../checkpoint.c changes. */
#define rt_checkpoint_save       rt_host_checkpoint_save
#define rt_checkpoint_load       rt_host_checkpoint_load
#define rt_checkpoint_attach     rt_host_checkpoint_attach
#define rt_checkpoint_maybe_save rt_host_checkpoint_maybe_save
#include "../checkpoint.c"
