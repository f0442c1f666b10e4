/* device.h: the boundary between libburstrt's shared code and a backend, in the manner of
 * QBE's targets: two structs of hooks that each backend (cpu/, cuda/) defines once. The
 * shared code (options, errors, watchdog, steps, pools and tensors, trace, data,
 * checkpoints, optimizer loops, loss scaling, RNG, rank sets and the reshard plan, argument
 * checks) is compiled once and linked into every backend's library; it reaches device
 * memory, streams and the interconnect only through these hooks (and loss scaling's one
 * kernel, scale_check, which shared code calls). Other kernels are not hooks: each
 * backend defines the kernel functions of burstrt.h (and rt_sgd_update / rt_adam_update of
 * internal.h) itself, and the test cuda.api_complete keeps both libraries complete. */
#ifndef BURSTRT_DEVICE_H
#define BURSTRT_DEVICE_H

#include "burstrt.h"

typedef enum { RT_COPY_H2D, RT_COPY_D2H, RT_COPY_D2D } rt_copy_kind;

/* The keys of a batch of synthetic samples (data.c): samples g0 .. g0+count-1 of stream
 * `stream` (0 training, 1 test), hashed exactly as data.c does on the host. */
typedef struct rt_synth_keys {
    uint64_t seed, stream;
    int64_t g0, count, per_sample, labels_per_sample, vocab, classes;
    rt_dtype in_dtype;
} rt_synth_keys;

/* Memory, streams and the rhythm of a step. */
typedef struct rt_device {
    const char *name;
    bool host_memory;   /* tensors' data are host memory (no staging for host code) */
    size_t chunk_bytes; /* pools carve tensors out of allocations this large; 0: one
                           allocation per tensor */
    /* Before MPI starts (it may re-execute the program), after the options, and last. */
    void (*start)(char **argv);
    void (*init)(const rt_options *o);
    void (*finalize)(void);
    /* Device memory: zero-filled, 64-byte aligned; free(NULL) does nothing. */
    void *(*alloc)(size_t bytes, const char *op);
    void (*free)(void *p);
    /* H2D and D2H copies are complete on return; D2D and zero are ordered with kernels. */
    void (*copy)(void *dst, const void *src, size_t bytes, rt_copy_kind kind, const char *op);
    void (*zero)(void *p, size_t bytes, const char *op);
    /* Waits for this rank's queued device work. */
    void (*sync)(const char *op);
    /* Routes work to the low-priority (background) stream or back to the foreground one. */
    void (*background)(bool on);
    /* Around every step and every traced op (rt_trace_push/pop). */
    void (*step_begin)(int64_t step);
    void (*step_end)(int64_t step);
    void (*op_begin)(const char *name);
    void (*op_end)(const char *name);
    /* Loss scaling (loss_scale.c), ordered with kernels: x[0..n) *= s in place; when found
     * is not NULL (device memory, one int32), first sets *found to 1 if any element is
     * inf or nan (else leaves it). Only f32 gradients are scaled this way; the loss
     * gradient is scaled where it is made (rt_cross_entropy_bwd_scaled). */
    void (*scale_check)(float *x, int64_t n, float s, int32_t *found, const char *op);
    /* Optional (NULL: never): true when activations are stored in the 16-bit compute
     * dtype. rt_storage_dtype asks it on every call (every tensor and shape check), so
     * it reads its setting once and answers from that. */
    bool (*store16)(void);
    /* Optional (NULL: the host computes them): synthetic samples made on the device. */
    void (*synth)(const rt_synth_keys *k, void *x, int32_t *labels);
} rt_device;

/* Moving data between ranks. MPI starts the processes and carries host values (the loss,
 * barriers, rank-set creation) for every backend; a transport carries device data. */
struct rt_transfers;
typedef struct rt_transport {
    void (*start)(void); /* after rt_device.init */
    void (*stop)(void);
    /* A new rank set (on every rank, members or not) and its release. */
    void (*open)(rt_comm *c);
    void (*close)(rt_comm *c);
    /* Sum-all-reduce in place of n floats (f64: doubles) in device memory within the set;
     * called on members of sets of two or more ranks only. */
    void (*allreduce)(const rt_comm *c, void *data, int64_t n, bool f64, const char *op);
    /* Carries out a reshard plan in two halves: exchange_start posts its transfers (`row`
     * bytes per sample, src/dst this rank's shards; `tag`, from 0 to RT_RESHARD_TAGS - 1,
     * tells apart the reshards in flight at once) and returns the backend's handle of
     * them, or NULL when nothing is left to wait for; exchange_wait completes them and
     * releases the handle. The plan t is not used after exchange_start returns. */
    void *(*exchange_start)(const struct rt_transfers *t, const void *src, void *dst, size_t row,
                            int tag);
    void (*exchange_wait)(void *handle);
    /* Brackets many all-reduces that may go out as one (NCCL groups). */
    void (*group)(bool begin);
    /* Optional (NULL: gradients are all-reduced at once, blocking): starts the
     * sum-all-reduce of a gradient (n floats, members of sets of two or more ranks only),
     * completed by grad_wait. grad_wait_one completes one started gradient (NULL:
     * grad_wait completes all). */
    void (*grad_start)(const rt_comm *c, float *data, int64_t n);
    void (*grad_wait)(void);
    void (*grad_wait_one)(const rt_comm *c, float *data);
    /* Optional: lets started all-reduces and reshards advance (called between ops). */
    void (*progress)(void);
} rt_transport;

/* Defined by the backend linked into the library (cpu/device.c, cuda/device.c and
 * cpu/comm_mpi.c, cuda/comm_nccl.c). */
extern const rt_device rt_dev;
extern const rt_transport rt_net;

#endif
