/* dnn.c: conv2d, max/average pooling, batchnorm and relu of the CUDA backend on cuDNN,
 * when the backend is built with it (BURSTRT_CUDNN: CMake finds cuDNN, option
 * BURSTRT_CUDNN); without it every function here calls the backend's own kernel (own.h).
 *
 * cuDNN's descriptor API (cudnn_cnn.h, cudnn_ops.h: deprecated in cuDNN 9 in favour of the
 * graph API, still complete, and what PyTorch 2 itself calls). One cache entry per layer
 * shape holds the descriptors and, for convolutions, the algorithms chosen once from
 * cuDNN's heuristics (the first deterministic one whose workspace fits 512 MiB, or with
 * BURSTRT_CUDNN_ALGOS=any the first that fits, deterministic or not, as PyTorch's default;
 * BURSTRT_CUDNN_VERBOSE=1 has rank 0 name the choices; the f32 compute dtype forbids
 * TF32, bf16/f16 allow tensor-core math); workspaces come from the
 * backend's scratch buffers, grown in the eager run so that graph capture never allocates.
 * Everything runs on the current stream (foreground or background). Parameter gradients
 * accumulate: cuDNN's beta = 1 with f32 activations.
 *
 * Activations are f32, bf16 or f16 (act.cuh). With 16-bit ones, cuDNN runs the
 * convolutions and batch norm: descriptors take the tensor's dtype (the cache keys on it),
 * convolutions accumulate in f32, and parameters, their gradients and the batch-norm
 * statistics stay f32. cuDNN takes a convolution's filter in the data's type, so the weight
 * is rounded into scratch on every call (convert.h) and the weight gradient comes out in 16
 * bits and is added to the f32 one; the bias and its gradient go through the own kernels in
 * f32 (conv.cu). 16-bit pooling and relu run on the own kernels: memory-bound, and no
 * reliance on cuDNN's 16-bit support of those legacy calls.
 *
 * What stays on the own kernels: ceil-mode pooling whose output cuDNN's floor rule does not
 * give; SyncBN over a rank set of several ranks (its statistics are all-reduced between the
 * passes); batchnorm with one of the two running buffers missing or a single value per
 * channel; GELU (cuDNN's descriptor API has no tanh-approximated GELU); tensors over 2^31
 * elements. Max-pool backward runs cuDNN's forward again into scratch first: cuDNN's
 * backward reads the forward's output, which the runtime's API does not pass. */
#include "cuda_internal.h"
#include "convert.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef BURSTRT_CUDNN

bool rt_cuda_has_cudnn(void)
{
    return false;
}
void rt_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                   const rt_conv2d_attrs *a, rt_tensor *y)
{
    rt_cuda_own_conv2d_fwd(pool, x, w, b, a, y);
}
void rt_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                   const rt_conv2d_attrs *a, rt_tensor *dx, rt_tensor *dw, rt_tensor *db)
{
    rt_cuda_own_conv2d_bwd(pool, x, w, dy, a, dx, dw, db);
}
void rt_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    rt_cuda_own_maxpool2d_fwd(x, a, y);
}
void rt_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                      rt_tensor *dx)
{
    rt_cuda_own_maxpool2d_bwd(x, dy, a, dx);
}
void rt_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    rt_cuda_own_avgpool2d_fwd(x, a, y);
}
void rt_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx)
{
    rt_cuda_own_avgpool2d_bwd(dy, a, dx);
}
void rt_batchnorm2d_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                        rt_tensor *running_mean, rt_tensor *running_var, float momentum, float eps,
                        rt_tensor *saved, rt_tensor *y)
{
    rt_cuda_own_batchnorm2d_fwd(x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}
void rt_batchnorm2d_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                        const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta)
{
    rt_cuda_own_batchnorm2d_bwd(x, gamma, saved, dy, dx, dgamma, dbeta);
}
void rt_batchnorm2d_sync_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                             float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    rt_cuda_own_batchnorm2d_sync_fwd(comm, x, gamma, beta, running_mean, running_var, momentum, eps,
                                     saved, y);
}
void rt_batchnorm2d_sync_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                             rt_tensor *dgamma, rt_tensor *dbeta)
{
    rt_cuda_own_batchnorm2d_sync_bwd(comm, x, gamma, saved, dy, dx, dgamma, dbeta);
}
void rt_batchnorm2d_infer(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                          const rt_tensor *running_mean, const rt_tensor *running_var, float eps,
                          rt_tensor *y)
{
    rt_cuda_own_batchnorm2d_infer(x, gamma, beta, running_mean, running_var, eps, y);
}
void rt_relu_fwd(const rt_tensor *x, rt_tensor *y)
{
    rt_cuda_own_relu_fwd(x, y);
}
void rt_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    rt_cuda_own_relu_bwd(x, dy, dx);
}

#else

#include <cudnn.h>

#define WORKSPACE_LIMIT ((size_t)512 << 20)

static cudnnHandle_t handles[2]; /* per side (rt_cuda_side): each bound to its stream */
static cudnnActivationDescriptor_t relu_desc;
static const float one = 1.0f, zero = 0.0f;

bool rt_cuda_has_cudnn(void)
{
    return true;
}

static void ok(cudnnStatus_t s, const char *op, const char *what)
{
    if (s != CUDNN_STATUS_SUCCESS)
        rt_fatal(op, "cuDNN: %s failed: %s", what, cudnnGetErrorString(s));
}
#define DNN(call, op)   ok((call), (op), #call)

static void dnn_release(void);

/* The handle of the side work goes to now, bound to its stream. */
static cudnnHandle_t dnn(const char *op)
{
    rt_cuda_ensure();
    rt_cuda_on_finalize(dnn_release);
    if (!relu_desc) {
        DNN(cudnnCreateActivationDescriptor(&relu_desc), op);
        DNN(cudnnSetActivationDescriptor(relu_desc, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN,
                                         0.0),
            op);
    }
    cudnnHandle_t *h = &handles[rt_cuda_side()];
    if (!*h) {
        DNN(cudnnCreate(h), op);
        DNN(cudnnSetStream(*h, rt_cuda_g.cur), op);
    }
    return *h;
}

/* BURSTRT_CUDNN_ALGOS: deterministic (default) or any. */
static bool any_algorithm(void)
{
    static int any = -1;
    if (any < 0) {
        const char *v = getenv("BURSTRT_CUDNN_ALGOS");
        if (v && strcmp(v, "any") && strcmp(v, "deterministic"))
            rt_fatal("cudnn", "BURSTRT_CUDNN_ALGOS must be deterministic or any, got '%s'", v);
        any = v && !strcmp(v, "any");
    }
    return any;
}

/* An algorithm the configuration allows: it works, its workspace fits, and it is
 * deterministic unless BURSTRT_CUDNN_ALGOS=any. */
static bool allowed(cudnnStatus_t status, cudnnDeterminism_t det, size_t memory)
{
    return status == CUDNN_STATUS_SUCCESS && memory <= WORKSPACE_LIMIT &&
           (det == CUDNN_DETERMINISTIC || any_algorithm());
}

/* BURSTRT_CUDNN_VERBOSE=1: rank 0 names each convolution shape's algorithms. */
static bool verbose(void)
{
    const char *v = getenv("BURSTRT_CUDNN_VERBOSE");
    return v && !strcmp(v, "1") && rt_opts_g.rank == 0;
}

static void say_conv(const rt_conv_dims *d, const rt_conv2d_attrs *a, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say_conv(const rt_conv_dims *d, const rt_conv2d_attrs *a, const char *fmt, ...)
{
    if (!verbose())
        return;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    rt_message("cudnn",
               "conv %lldx%lldx%lldx%lld -> %lld channels, %dx%d stride %d,%d pad %d,%d "
               "groups %d: %s",
               (long long)d->N, (long long)d->C, (long long)d->H, (long long)d->W, (long long)d->K,
               a->kh, a->kw, a->sh, a->sw, a->ph, a->pw, a->groups, what);
}

static bool fits_int(int64_t v)
{
    return v >= 0 && v <= INT32_MAX;
}

/* cuDNN's name for an activation dtype. */
static cudnnDataType_t dnn_type(rt_dtype dt)
{
    return dt == RT_BF16 ? CUDNN_DATA_BFLOAT16 : dt == RT_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

static cudnnTensorDescriptor_t tensor4(int64_t n, int64_t c, int64_t h, int64_t w, rt_dtype dt,
                                       const char *op)
{
    cudnnTensorDescriptor_t t;
    DNN(cudnnCreateTensorDescriptor(&t), op);
    DNN(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, dnn_type(dt), (int)n, (int)c, (int)h,
                                   (int)w),
        op);
    return t;
}

/* ---- the cache: one entry per layer shape ------------------------------------------------ */

enum { KEY_LEN = 20 };
typedef struct entry {
    int64_t key[KEY_LEN];
    bool usable; /* false: cuDNN declined; the own kernel runs */
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnPoolingDescriptor_t pool;
    bool have_bwd;
    cudnnConvolutionFwdAlgo_t fwd_algo;
    cudnnConvolutionBwdDataAlgo_t bwd_data_algo;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo;
    size_t fwd_ws, bwd_ws;
    struct entry *next;
} entry;
static entry *entries;

static entry *find(const int64_t *key)
{
    for (entry *e = entries; e; e = e->next)
        if (!memcmp(e->key, key, sizeof e->key))
            return e;
    return NULL;
}

static entry *add(const int64_t *key, const char *op)
{
    entry *e = rt_xcalloc(1, sizeof *e, op);
    rt_cuda_on_finalize(dnn_release);
    memcpy(e->key, key, sizeof e->key);
    e->next = entries;
    entries = e;
    return e;
}

/* Releases the cuDNN handles and descriptors: the context's finalize hook, registered at
 * the first handle. */
static void dnn_release(void)
{
    while (entries) {
        entry *e = entries;
        entries = e->next;
        if (e->x)
            cudnnDestroyTensorDescriptor(e->x);
        if (e->y)
            cudnnDestroyTensorDescriptor(e->y);
        if (e->b)
            cudnnDestroyTensorDescriptor(e->b);
        if (e->w)
            cudnnDestroyFilterDescriptor(e->w);
        if (e->conv)
            cudnnDestroyConvolutionDescriptor(e->conv);
        if (e->pool)
            cudnnDestroyPoolingDescriptor(e->pool);
        free(e);
    }
    if (relu_desc)
        cudnnDestroyActivationDescriptor(relu_desc);
    relu_desc = NULL;
    for (int s = 0; s < 2; s++) {
        if (handles[s])
            cudnnDestroy(handles[s]);
        handles[s] = NULL;
    }
}

/* ---- conv2d -------------------------------------------------------------------------------- */

/* dt: the activations' dtype, which the filter and bias descriptors share (f32
 * accumulation whatever it is). */
static entry *conv_entry(const rt_conv_dims *d, const rt_conv2d_attrs *a, rt_dtype dt,
                         const char *op)
{
    const rt_compute_dtype cdt = rt_get_compute_dtype();
    const int64_t key[KEY_LEN] = {1,     d->N,  d->C,  d->H,  d->W,  d->K,      a->kh, a->kw, a->sh,
                                  a->sw, a->ph, a->pw, a->dh, a->dw, a->groups, cdt,   dt};
    entry *e = find(key);
    if (e)
        return e;
    e = add(key, op);
    cudnnHandle_t h = dnn(op);
    if (!fits_int(d->N * d->C * d->H * d->W) || !fits_int(d->N * d->K * d->OH * d->OW) ||
        d->N * d->C * d->K == 0 || d->OH * d->OW == 0) {
        say_conv(d, a, "empty, or a tensor over 2^31 elements: own kernels");
        return e;
    }
    e->x = tensor4(d->N, d->C, d->H, d->W, dt, op);
    e->y = tensor4(d->N, d->K, d->OH, d->OW, dt, op);
    e->b = tensor4(1, d->K, 1, 1, dt, op);
    DNN(cudnnCreateFilterDescriptor(&e->w), op);
    DNN(cudnnSetFilter4dDescriptor(e->w, dnn_type(dt), CUDNN_TENSOR_NCHW, (int)d->K, (int)d->Cg,
                                   a->kh, a->kw),
        op);
    DNN(cudnnCreateConvolutionDescriptor(&e->conv), op);
    DNN(cudnnSetConvolution2dDescriptor(e->conv, a->ph, a->pw, a->sh, a->sw, a->dh, a->dw,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        op);
    DNN(cudnnSetConvolutionGroupCount(e->conv, a->groups), op);
    /* f32: exact FMA math (no TF32); bf16/f16 compute: tensor cores (TF32) allowed; 16-bit
     * data: tensor cores. */
    const cudnnMathType_t math = dt != RT_F32            ? CUDNN_TENSOR_OP_MATH
                                 : cdt == RT_COMPUTE_F32 ? CUDNN_FMA_MATH
                                                         : CUDNN_DEFAULT_MATH;
    DNN(cudnnSetConvolutionMathType(e->conv, math), op);
    int n, c, hh, w;
    DNN(cudnnGetConvolution2dForwardOutputDim(e->conv, e->x, e->w, &n, &c, &hh, &w), op);
    if (n != d->N || c != d->K || hh != d->OH || w != d->OW) {
        say_conv(d, a, "cuDNN's output shape differs: own kernels");
        return e;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    DNN(cudnnGetConvolutionForwardAlgorithm_v7(h, e->x, e->w, e->conv, e->y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf),
        op);
    for (int i = 0; i < got; i++)
        if (allowed(perf[i].status, perf[i].determinism, perf[i].memory)) {
            e->fwd_algo = perf[i].algo;
            e->fwd_ws = perf[i].memory;
            e->usable = true;
            break;
        }
    if (e->usable)
        say_conv(d, a, "forward algorithm %d (of %d offered), workspace %zu B", (int)e->fwd_algo,
                 got, e->fwd_ws);
    else
        say_conv(d, a, "no forward algorithm allowed (of %d): own kernels", got);
    return e;
}

static void conv_make_bwd(entry *e, const rt_conv_dims *d, const rt_conv2d_attrs *a, const char *op)
{
    if (e->have_bwd || !e->usable)
        return;
    cudnnHandle_t h = dnn(op);
    cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t fperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int got = 0;
    bool data = false, filter = false;
    DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
            h, e->w, e->y, e->conv, e->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dperf),
        op);
    for (int i = 0; i < got && !data; i++)
        if (allowed(dperf[i].status, dperf[i].determinism, dperf[i].memory)) {
            e->bwd_data_algo = dperf[i].algo;
            e->bwd_ws = dperf[i].memory;
            data = true;
        }
    DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, e->x, e->y, e->conv, e->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, fperf),
        op);
    for (int i = 0; i < got && !filter; i++)
        if (allowed(fperf[i].status, fperf[i].determinism, fperf[i].memory)) {
            e->bwd_filter_algo = fperf[i].algo;
            if (fperf[i].memory > e->bwd_ws)
                e->bwd_ws = fperf[i].memory;
            filter = true;
        }
    e->usable = data && filter;
    e->have_bwd = true;
    if (e->usable)
        say_conv(d, a, "backward data algorithm %d, filter algorithm %d, workspace %zu B",
                 (int)e->bwd_data_algo, (int)e->bwd_filter_algo, e->bwd_ws);
    else
        say_conv(d, a, "no backward %s algorithm allowed: own kernels", data ? "filter" : "data");
}

/* The f32 weight rounded to the activations' 16-bit dt in scratch: cuDNN takes the filter
 * in the data's type. Made on every call, on the current stream, so that a captured graph
 * rounds the weights its replay finds. */
static const void *weight16(const rt_tensor *w, rt_dtype dt, const char *op)
{
    void *p = rt_cuda_scratch(RT_SCRATCH_W16, (size_t)w->numel * rt_dtype_size(dt), op);
    rt_cuda_convert(w->data, RT_F32, p, dt, w->numel, op);
    return p;
}

void rt_conv2d_fwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                   const rt_conv2d_attrs *a, rt_tensor *y)
{
    const char *op = "conv2d_fwd";
    rt_conv_dims d = rt_conv2d_check(op, x, w, a, y, "output");
    if (b)
        rt_check_f32(b, d.K, op, "bias");
    entry *e = conv_entry(&d, a, x->dtype, op);
    if (!e->usable) {
        rt_cuda_own_conv2d_fwd(pool, x, w, b, a, y);
        return;
    }
    cudnnHandle_t h = dnn(op);
    const bool f32 = x->dtype == RT_F32;
    const void *wd = f32 ? w->data : weight16(w, x->dtype, op);
    void *ws = e->fwd_ws ? rt_cuda_scratch(RT_SCRATCH_DNN, e->fwd_ws, op) : NULL;
    DNN(cudnnConvolutionForward(h, &one, e->x, x->data, e->w, wd, e->conv, e->fwd_algo, ws,
                                e->fwd_ws, &zero, e->y, y->data),
        op);
    if (b && f32)
        DNN(cudnnAddTensor(h, &one, e->b, b->data, &one, e->y, y->data), op);
    else if (b) /* 16 bits: the own kernel adds the f32 bias (no 16-bit copy of it) */
        rt_cuda_conv_add_bias(y, b, op);
}

void rt_conv2d_bwd(rt_pool *pool, const rt_tensor *x, const rt_tensor *w, const rt_tensor *dy,
                   const rt_conv2d_attrs *a, rt_tensor *dx, rt_tensor *dw, rt_tensor *db)
{
    const char *op = "conv2d_bwd";
    rt_conv_dims d = rt_conv2d_check(op, x, w, a, dy, "output gradient");
    rt_conv2d_bwd_check(op, x, w, &d, dx, dw, db);
    const rt_dtype dt = x->dtype;
    entry *e = conv_entry(&d, a, dt, op);
    conv_make_bwd(e, &d, a, op);
    if (!e->usable) {
        rt_cuda_own_conv2d_bwd(pool, x, w, dy, a, dx, dw, db);
        return;
    }
    cudnnHandle_t h = dnn(op);
    /* f32: cuDNN accumulates into the parameter gradients (beta 1). 16 bits: it writes the
     * weight gradient in the data's type to scratch (beta 0), which is added to the f32 one,
     * and the own kernel sums the bias gradient in f32. */
    const bool f32 = dt == RT_F32;
    const void *wd = f32 || !dx ? w->data : weight16(w, dt, op);
    void *gw = dw && !f32
                   ? rt_cuda_scratch(RT_SCRATCH_DW16, (size_t)w->numel * rt_dtype_size(dt), op)
               : dw ? dw->data
                    : NULL;
    void *ws = e->bwd_ws ? rt_cuda_scratch(RT_SCRATCH_DNN, e->bwd_ws, op) : NULL;
    if (dx)
        DNN(cudnnConvolutionBackwardData(h, &one, e->w, wd, e->y, dy->data, e->conv,
                                         e->bwd_data_algo, ws, e->bwd_ws, &zero, e->x, dx->data),
            op);
    if (dw) {
        DNN(cudnnConvolutionBackwardFilter(h, &one, e->x, x->data, e->y, dy->data, e->conv,
                                           e->bwd_filter_algo, ws, e->bwd_ws, f32 ? &one : &zero,
                                           e->w, gw),
            op);
        if (!f32)
            rt_cuda_add_into_f32(rt_f32(dw), gw, dt, w->numel, op);
    }
    if (db && f32)
        DNN(cudnnConvolutionBackwardBias(h, &one, e->y, dy->data, &one, e->b, db->data), op);
    else if (db)
        rt_cuda_conv_bias_grad(dy, db, op);
}

/* ---- pooling ------------------------------------------------------------------------------- */

/* NULL for 16-bit data, which the own kernels pool (memory-bound, and no reliance on
 * cuDNN's 16-bit support of its legacy pooling calls); f32 entries only. */
static entry *pool_entry(const rt_pool_dims *d, const rt_pool2d_attrs *a, bool max, rt_dtype dt,
                         const char *op)
{
    if (dt != RT_F32)
        return NULL;
    const int64_t key[KEY_LEN] = {2,     max,   d->N,  d->C,  d->H,  d->W,         a->kh,
                                  a->kw, a->sh, a->sw, a->ph, a->pw, a->ceil_mode, a->exclude_pad};
    entry *e = find(key);
    if (e)
        return e;
    e = add(key, op);
    dnn(op);
    if (!fits_int(d->N * d->C * d->H * d->W) || d->N * d->C == 0 || d->OH * d->OW == 0)
        return e;
    e->x = tensor4(d->N, d->C, d->H, d->W, RT_F32, op);
    e->y = tensor4(d->N, d->C, d->OH, d->OW, RT_F32, op);
    DNN(cudnnCreatePoolingDescriptor(&e->pool), op);
    const cudnnPoolingMode_t mode = max              ? CUDNN_POOLING_MAX
                                    : a->exclude_pad ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                                     : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    DNN(cudnnSetPooling2dDescriptor(e->pool, mode, CUDNN_PROPAGATE_NAN, a->kh, a->kw, a->ph, a->pw,
                                    a->sh, a->sw),
        op);
    /* cuDNN rounds the output size down: a ceil-mode layer whose size differs stays own. */
    int n, c, hh, w;
    DNN(cudnnGetPooling2dForwardOutputDim(e->pool, e->x, &n, &c, &hh, &w), op);
    e->usable = n == d->N && c == d->C && hh == d->OH && w == d->OW;
    return e;
}

void rt_maxpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    const char *op = "maxpool2d_fwd";
    rt_pool_dims d = rt_pool2d_check(op, x, a, y, "output");
    entry *e = pool_entry(&d, a, true, x->dtype, op);
    if (!e || !e->usable) {
        rt_cuda_own_maxpool2d_fwd(x, a, y);
        return;
    }
    DNN(cudnnPoolingForward(dnn(op), e->pool, &one, e->x, x->data, &zero, e->y, y->data), op);
}

void rt_maxpool2d_bwd(const rt_tensor *x, const rt_tensor *dy, const rt_pool2d_attrs *a,
                      rt_tensor *dx)
{
    const char *op = "maxpool2d_bwd";
    rt_pool_dims d = rt_pool2d_check(op, x, a, dy, "output gradient");
    rt_check_act(dx, x->numel, op, "input gradient");
    entry *e = pool_entry(&d, a, true, x->dtype, op);
    if (!e || !e->usable) {
        rt_cuda_own_maxpool2d_bwd(x, dy, a, dx);
        return;
    }
    cudnnHandle_t h = dnn(op);
    void *y = rt_cuda_scratch(RT_SCRATCH_DNN2, (size_t)dy->numel * rt_dtype_size(dy->dtype), op);
    DNN(cudnnPoolingForward(h, e->pool, &one, e->x, x->data, &zero, e->y, y), op);
    DNN(cudnnPoolingBackward(h, e->pool, &one, e->y, y, e->y, dy->data, e->x, x->data, &zero, e->x,
                             dx->data),
        op);
}

void rt_avgpool2d_fwd(const rt_tensor *x, const rt_pool2d_attrs *a, rt_tensor *y)
{
    const char *op = "avgpool2d_fwd";
    rt_pool_dims d = rt_pool2d_check(op, x, a, y, "output");
    entry *e = pool_entry(&d, a, false, x->dtype, op);
    if (!e || !e->usable) {
        rt_cuda_own_avgpool2d_fwd(x, a, y);
        return;
    }
    DNN(cudnnPoolingForward(dnn(op), e->pool, &one, e->x, x->data, &zero, e->y, y->data), op);
}

void rt_avgpool2d_bwd(const rt_tensor *dy, const rt_pool2d_attrs *a, rt_tensor *dx)
{
    const char *op = "avgpool2d_bwd";
    rt_pool_dims d = rt_pool2d_check(op, dx, a, dy, "output gradient");
    entry *e = pool_entry(&d, a, false, dy->dtype, op);
    if (!e || !e->usable) {
        rt_cuda_own_avgpool2d_bwd(dy, a, dx);
        return;
    }
    /* Average pooling's backward reads neither y nor x; cuDNN still takes them. */
    DNN(cudnnPoolingBackward(dnn(op), e->pool, &one, e->y, dy->data, e->y, dy->data, e->x, dx->data,
                             &zero, e->x, dx->data),
        op);
}

/* ---- batchnorm ------------------------------------------------------------------------------- */

/* x's dtype for the data; the derived descriptor of the parameters and statistics is f32
 * for all three (cuDNN's rule for 16-bit data). */
static entry *bn_entry(const rt_tensor *x, const char *op)
{
    const int64_t key[KEY_LEN] = {3, x->shape[0], x->shape[1], x->shape[2], x->shape[3], x->dtype};
    entry *e = find(key);
    if (e)
        return e;
    e = add(key, op);
    dnn(op);
    /* cuDNN's unbiased running variance divides by count - 1. */
    if (!fits_int(x->numel) || x->shape[0] * x->shape[2] * x->shape[3] < 2 || x->shape[1] == 0)
        return e;
    e->x = tensor4(x->shape[0], x->shape[1], x->shape[2], x->shape[3], x->dtype, op);
    DNN(cudnnCreateTensorDescriptor(&e->b), op);
    DNN(cudnnDeriveBNTensorDescriptor(e->b, e->x, CUDNN_BATCHNORM_SPATIAL), op);
    e->usable = true;
    return e;
}

/* The one-rank path of cuDNN: comm is NULL or a set of one rank, and both running buffers
 * (or neither) are given. */
static bool bn_local(const rt_comm *comm, const rt_tensor *rm, const rt_tensor *rv)
{
    return (!comm || rt_comm_size(comm) == 1) && !rm == !rv;
}

static void bn_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                   const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                   float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    const char *op = "batchnorm2d_fwd";
    const int64_t C =
        rt_batchnorm_fwd_check(op, comm, x, gamma, beta, running_mean, running_var, saved, y);
    entry *e = bn_local(comm, running_mean, running_var) && saved ? bn_entry(x, op) : NULL;
    if (!e || !e->usable) {
        rt_cuda_own_batchnorm2d_sync_fwd(comm, x, gamma, beta, running_mean, running_var, momentum,
                                         eps, saved, y);
        return;
    }
    float *mean = rt_f32(saved);
    DNN(cudnnBatchNormalizationForwardTraining(
            dnn(op), CUDNN_BATCHNORM_SPATIAL, &one, &zero, e->x, x->data, e->x, y->data, e->b,
            gamma->data, beta->data, momentum, running_mean ? running_mean->data : NULL,
            running_var ? running_var->data : NULL, eps, mean, mean + C),
        op);
}

static void bn_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                   const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma,
                   rt_tensor *dbeta)
{
    const char *op = "batchnorm2d_bwd";
    const int64_t C = rt_batchnorm_bwd_check(op, comm, x, gamma, saved, dy, dx, dgamma, dbeta);
    /* cuDNN writes both parameter gradients or none: with one of them alone the own kernel
     * runs. */
    entry *e = bn_local(comm, NULL, NULL) && !dgamma == !dbeta ? bn_entry(x, op) : NULL;
    if (!e || !e->usable) {
        rt_cuda_own_batchnorm2d_sync_bwd(comm, x, gamma, saved, dy, dx, dgamma, dbeta);
        return;
    }
    /* What the caller does not want goes to scratch: dx (in x's dtype, after the f32 pair,
     * at a 256-byte boundary as every cudaMalloc'd buffer starts, for cuDNN's vector loads),
     * or both parameter gradients (overwritten there; the caller's accumulate, beta 1). */
    const size_t pair = (2 * (size_t)C * sizeof(float) + 255) & ~(size_t)255;
    float *tmp = rt_cuda_scratch(RT_SCRATCH_DNN2,
                                 pair + (dx ? 0 : (size_t)x->numel * rt_dtype_size(x->dtype)), op);
    void *pdx = dx ? dx->data : (char *)tmp + pair;
    float *pg = dgamma ? rt_f32(dgamma) : tmp, *pb = dgamma ? rt_f32(dbeta) : tmp + C;
    const float *mean = rt_f32(saved);
    DNN(cudnnBatchNormalizationBackward(dnn(op), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one,
                                        dgamma ? &one : &zero, e->x, x->data, e->x, dy->data, e->x,
                                        pdx, e->b, gamma->data, pg, pb, 1e-5, mean, mean + C),
        op);
}

void rt_batchnorm2d_fwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                        rt_tensor *running_mean, rt_tensor *running_var, float momentum, float eps,
                        rt_tensor *saved, rt_tensor *y)
{
    bn_fwd(NULL, x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}

void rt_batchnorm2d_bwd(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *saved,
                        const rt_tensor *dy, rt_tensor *dx, rt_tensor *dgamma, rt_tensor *dbeta)
{
    bn_bwd(NULL, x, gamma, saved, dy, dx, dgamma, dbeta);
}

void rt_batchnorm2d_sync_fwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *beta, rt_tensor *running_mean, rt_tensor *running_var,
                             float momentum, float eps, rt_tensor *saved, rt_tensor *y)
{
    bn_fwd(comm, x, gamma, beta, running_mean, running_var, momentum, eps, saved, y);
}

void rt_batchnorm2d_sync_bwd(const rt_comm *comm, const rt_tensor *x, const rt_tensor *gamma,
                             const rt_tensor *saved, const rt_tensor *dy, rt_tensor *dx,
                             rt_tensor *dgamma, rt_tensor *dbeta)
{
    bn_bwd(comm, x, gamma, saved, dy, dx, dgamma, dbeta);
}

void rt_batchnorm2d_infer(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta,
                          const rt_tensor *running_mean, const rt_tensor *running_var, float eps,
                          rt_tensor *y)
{
    const char *op = "batchnorm2d_infer";
    rt_check(running_mean, RT_F32, -1, op, "running mean");
    rt_check(running_var, RT_F32, -1, op, "running variance");
    rt_batchnorm_fwd_check(op, NULL, x, gamma, beta, running_mean, running_var, NULL, y);
    entry *e = x->numel ? bn_entry(x, op) : NULL;
    if (!e || !e->usable) {
        rt_cuda_own_batchnorm2d_infer(x, gamma, beta, running_mean, running_var, eps, y);
        return;
    }
    DNN(cudnnBatchNormalizationForwardInference(
            dnn(op), CUDNN_BATCHNORM_SPATIAL, &one, &zero, e->x, x->data, e->x, y->data, e->b,
            gamma->data, beta->data, running_mean->data, running_var->data, eps),
        op);
}

/* ---- relu ---------------------------------------------------------------------------------- */

/* NULL for 16-bit data, which the own kernels take (as pool_entry). */
static entry *flat_entry(int64_t n, rt_dtype dt, const char *op)
{
    if (dt != RT_F32)
        return NULL;
    const int64_t key[KEY_LEN] = {4, n};
    entry *e = find(key);
    if (e)
        return e;
    e = add(key, op);
    dnn(op);
    if (n == 0 || !fits_int(n))
        return e;
    e->x = tensor4(1, 1, 1, n, RT_F32, op);
    e->usable = true;
    return e;
}

void rt_relu_fwd(const rt_tensor *x, rt_tensor *y)
{
    const char *op = "relu_fwd";
    rt_same_numel(op, x, "input", y, "output");
    entry *e = flat_entry(x->numel, x->dtype, op);
    if (!e || !e->usable) {
        rt_cuda_own_relu_fwd(x, y);
        return;
    }
    DNN(cudnnActivationForward(dnn(op), relu_desc, &one, e->x, x->data, &zero, e->x, y->data), op);
}

/* cuDNN's backward takes the forward's output y; for relu, y > 0 exactly where x > 0, so x
 * serves as y. */
void rt_relu_bwd(const rt_tensor *x, const rt_tensor *dy, rt_tensor *dx)
{
    const char *op = "relu_bwd";
    rt_same_numel(op, x, "input", dy, "output gradient");
    rt_same_numel(op, x, "input", dx, "input gradient");
    entry *e = flat_entry(x->numel, x->dtype, op);
    if (!e || !e->usable) {
        rt_cuda_own_relu_bwd(x, dy, dx);
        return;
    }
    DNN(cudnnActivationBackward(dnn(op), relu_desc, &one, e->x, x->data, e->x, dy->data, e->x,
                                x->data, &zero, e->x, dx->data),
        op);
}

#endif
