/* device.c: the device hooks of burstrt.h on the CPU backend, where there is one memory
 * and one stream: the compute precision is recorded (kernels stay f32), graph segments
 * always run their body, and tensor copies are memcpy. The CUDA backend implements the
 * same functions in runtime/cuda/device.c. */
#include "../internal.h"

#include <string.h>

static rt_compute_dtype compute_dtype = RT_COMPUTE_F32;

void rt_set_compute_dtype(rt_compute_dtype dt) { compute_dtype = dt; }
rt_compute_dtype rt_get_compute_dtype(void) { return compute_dtype; }

bool rt_graph_begin(int segment)
{
    if (segment < 0 || segment > 1023)
        rt_fatal("graph", "segment %d outside 0..1023", segment);
    return true;
}

void rt_graph_end(int segment) { (void)segment; }
void rt_device_sync(void) {}
void rt_use_background_stream(bool on) { (void)on; }
void rt_tensor_write(rt_tensor *t, const void *host) { memcpy(t->data, host, (size_t)t->numel * 4); }
void rt_tensor_read(const rt_tensor *t, void *host) { memcpy(host, t->data, (size_t)t->numel * 4); }
