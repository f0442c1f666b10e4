/* host_data.c: the CPU backend's data sources (synthetic, Fashion-MNIST),
 * reused by the CUDA backend so that GPU runs read the very same samples. The batch
 * functions become rt_host_* and fill a pinned host twin that bridge.c copies to the
 * device; synthetic batches are instead hashed on the device from the keys that
 * rt_host_data_synthetic (below) hands out.
 * Compiled into burstrt_cuda only; the renamed functions are wrapped by the CUDA
 * backend (see cuda_internal.h). Nothing else of ../data.c changes. */
#define rt_data_batch      rt_host_data_batch
#define rt_data_test_batch rt_host_data_test_batch
#include "../data.c"

#include "cuda_internal.h"

/* The CUDA backend generates synthetic batches on the device (elementwise.cu) from the
 * same keys as synth() above, instead of hashing millions of values on the host every
 * step; this hands it the keys after data.c's own checks. It reads struct rt_data, so
 * it lives in this file. */
bool rt_host_data_synthetic(const rt_data *d, bool test, int64_t a, int64_t b, int64_t s0,
                            int64_t s1, const rt_tensor *x, const rt_tensor *labels,
                            rt_synth_keys *k)
{
    if (d->kind != RT_DATA_SYNTHETIC)
        return false;
    int64_t g0, count;
    if (test) {
        if (a < 0 || b < 0 || a + b > d->ntest)
            rt_fatal("data", "test samples [%lld,%lld) outside the test set of %lld", (long long)a,
                     (long long)(a + b), (long long)d->ntest);
        g0 = a;
        count = b;
    } else {
        if (s0 < 0 || s1 < s0 || s1 > b)
            rt_fatal("data", "shard [%lld,%lld) outside the batch of %lld", (long long)s0,
                     (long long)s1, (long long)b);
        g0 = a * b + s0;
        count = s1 - s0;
    }
    check_out(d, count, x, labels);
    *k = (rt_synth_keys){.seed = d->seed,
                         .stream = test ? 1 : 0,
                         .g0 = g0,
                         .count = count,
                         .per_sample = d->per_sample,
                         .labels_per_sample = d->labels_per_sample,
                         .vocab = d->vocab,
                         .classes = d->classes,
                         .in_dtype = d->in_dtype};
    return true;
}
