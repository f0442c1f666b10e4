/* tensor.c: pools and tensors, once for every backend. A pool owns everything a program
 * allocates from it: host blocks (tensor headers, parameter records) and device memory,
 * which the backend hands out through rt_dev.alloc, either one allocation per tensor (the
 * CPU, where the sanitizers then see each tensor's bounds) or carved from large chunks (the
 * GPU, one cudaMalloc per 64 MiB); rt_pool_free releases all of it at once. Views and
 * slices share their source's memory. Host code that fills or reads tensors (data,
 * initialisers, checkpoints) goes through rt_host_view, which stages device memory through
 * a host copy where the backend's memory is not the host's. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct rt_pool {
    void **host; /* host blocks, freed with free() */
    size_t nhost, caphost;
    void **dev; /* device allocations (tensors, or chunks) */
    size_t ndev, capdev;
    char *chunk; /* the chunk tensors are carved from now */
    size_t chunk_used, chunk_cap;
    void *scratch;
    size_t scratch_bytes;
};

static void own(void ***list, size_t *n, size_t *cap, void *p)
{
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        void **nl = realloc(*list, nc * sizeof *nl);
        if (!nl)
            rt_fatal("pool", "out of memory");
        *list = nl;
        *cap = nc;
    }
    (*list)[(*n)++] = p;
}

rt_pool *rt_pool_new(void)
{
    return rt_xcalloc(1, sizeof(rt_pool), "pool");
}

void rt_pool_free(rt_pool *p)
{
    if (!p)
        return;
    if (p->ndev || p->scratch)
        rt_dev.sync("pool_free");
    for (size_t i = 0; i < p->ndev; i++)
        rt_dev.free(p->dev[i]);
    for (size_t i = 0; i < p->nhost; i++)
        free(p->host[i]);
    rt_dev.free(p->scratch);
    free(p->dev);
    free(p->host);
    free(p);
}

void *rt_pool_alloc(rt_pool *p, size_t bytes)
{
    void *b = rt_xcalloc(1, bytes, "pool");
    own(&p->host, &p->nhost, &p->caphost, b);
    return b;
}

static void *device_alloc(rt_pool *p, size_t bytes, const char *op)
{
    const size_t align = 256; /* 64 would do for the CPU; 256 suits every GPU load */
    if (bytes > SIZE_MAX - align)
        rt_fatal(op, "cannot allocate %zu bytes", bytes);
    bytes = bytes ? (bytes + align - 1) / align * align : align;
    if (!rt_dev.chunk_bytes) {
        void *d = rt_dev.alloc(bytes, op);
        own(&p->dev, &p->ndev, &p->capdev, d);
        return d;
    }
    if (!p->chunk || p->chunk_cap - p->chunk_used < bytes) {
        size_t cap = bytes > rt_dev.chunk_bytes ? bytes : rt_dev.chunk_bytes;
        p->chunk = rt_dev.alloc(cap, op);
        own(&p->dev, &p->ndev, &p->capdev, p->chunk);
        p->chunk_used = 0;
        p->chunk_cap = cap;
    }
    void *r = p->chunk + p->chunk_used;
    p->chunk_used += bytes;
    return r;
}

size_t rt_dtype_size(rt_dtype dt)
{
    return dt == RT_BF16 || dt == RT_F16 ? 2 : 4;
}

/* A tensor's bytes (tensor_header bounds numel by INT64_MAX / 4). */
static size_t bytes_of(const rt_tensor *t)
{
    return (size_t)t->numel * rt_dtype_size(t->dtype);
}

static rt_tensor *tensor_header(rt_pool *p, rt_dtype dt, int ndim, const int64_t *shape,
                                const char *op)
{
    if (ndim < 0 || ndim > RT_MAX_DIMS)
        rt_fatal(op, "tensor rank %d outside 0..%d", ndim, RT_MAX_DIMS);
    if (dt != RT_F32 && dt != RT_I32 && dt != RT_BF16 && dt != RT_F16)
        rt_fatal(op, "unknown dtype %d", (int)dt);
    rt_tensor *t = rt_pool_alloc(p, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            rt_fatal(op, "negative dimension %lld", (long long)shape[i]);
        if (__builtin_mul_overflow(t->numel, shape[i], &t->numel) || t->numel > INT64_MAX / 4)
            rt_fatal(op, "a tensor of dimension %d = %lld is too large", i, (long long)shape[i]);
        t->shape[i] = shape[i];
    }
    return t;
}

rt_tensor *rt_tensor_new(rt_pool *p, rt_dtype dt, int ndim, const int64_t *shape)
{
    rt_progress_tick(); /* start-up makes many; each is progress for the watchdog */
    rt_tensor *t = tensor_header(p, dt, ndim, shape, "tensor_new");
    t->data = device_alloc(p, bytes_of(t), "tensor_new");
    return t;
}

rt_tensor *rt_tensor_view(rt_pool *p, rt_tensor *src, int ndim, const int64_t *shape)
{
    rt_tensor *t = tensor_header(p, src->dtype, ndim, shape, "tensor_view");
    if (t->numel != src->numel)
        rt_fatal("tensor_view", "view has %lld elements, source %lld", (long long)t->numel,
                 (long long)src->numel);
    t->data = src->data;
    return t;
}

rt_tensor *rt_tensor_slice(rt_pool *p, rt_tensor *src, int64_t s0, int64_t s1)
{
    if (src->ndim < 1 || s0 < 0 || s1 < s0 || s1 > src->shape[0])
        rt_fatal("tensor_slice", "samples [%lld,%lld) outside a tensor of %lld", (long long)s0,
                 (long long)s1, (long long)(src->ndim ? src->shape[0] : 0));
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, src->shape, sizeof shape);
    shape[0] = s1 - s0;
    rt_tensor *t = tensor_header(p, src->dtype, src->ndim, shape, "tensor_slice");
    t->data =
        (char *)src->data + (size_t)(s0 * rt_tensor_per_sample(src)) * rt_dtype_size(src->dtype);
    return t;
}

float *rt_pool_scratch(rt_pool *p, size_t n)
{
    if (n > SIZE_MAX / 4)
        rt_fatal("scratch", "cannot allocate %zu floats", n);
    if (n * 4 > p->scratch_bytes) {
        rt_dev.sync("scratch"); /* queued work may still use the old buffer */
        rt_dev.free(p->scratch);
        p->scratch = NULL;
        p->scratch = rt_dev.alloc(n * 4, "scratch");
        p->scratch_bytes = n * 4;
    }
    return p->scratch;
}

int64_t rt_tensor_per_sample(const rt_tensor *t)
{
    return t->ndim == 0 || t->shape[0] == 0 ? 0 : t->numel / t->shape[0];
}

/* ---- copies ------------------------------------------------------------------------------ */

void rt_tensor_zero(rt_tensor *t)
{
    rt_dev.zero(t->data, bytes_of(t), "zero");
}

void rt_tensor_copy(rt_tensor *dst, const rt_tensor *src)
{
    if (dst->numel != src->numel || dst->dtype != src->dtype)
        rt_fatal("copy", "size or dtype mismatch (%lld vs %lld elements)", (long long)dst->numel,
                 (long long)src->numel);
    rt_dev.copy(dst->data, src->data, bytes_of(src), RT_COPY_D2D, "copy");
}

/* ---- 16-bit elements on the host: round to nearest even, as the CUDA conversions ----- */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN (quiet) */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static uint16_t to_f16(float f)
{
    const uint32_t u = f32_bits(f), a = u & 0x7fffffffu;
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (a >= 0x477ff000u)      /* 65520 and above (inf too) round to inf */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) {           /* normal in f16: 2^-14 and above */
        uint32_t r = a - 0x38000000u; /* rebias the exponent, 127 - 15 = 112 */
        return sign | (uint16_t)((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
    }
    /* Subnormal in f16: a multiple of 2^-24, m * 2^(e-150) = (m >> (126-e)) units. */
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
    if (e == 0 || shift > 24)
        return sign; /* below half of 2^-24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return sign | (uint16_t)q;
}

static float from_bf16(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

static float from_f16(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

/* n floats from / to a 16-bit dtype's elements. */
static void narrow(uint16_t *dst, const float *src, int64_t n, rt_dtype dt)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = dt == RT_BF16 ? to_bf16(src[i]) : to_f16(src[i]);
}
static void widen(float *dst, const uint16_t *src, int64_t n, rt_dtype dt)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = dt == RT_BF16 ? from_bf16(src[i]) : from_f16(src[i]);
}

static bool is16(const rt_tensor *t)
{
    return rt_dtype_size(t->dtype) == 2;
}

/* A 16-bit tensor from / to floats on the host, through a staging copy of its words (on
 * either kind of memory). */
static void write16(const rt_tensor *t, const float *src, const char *op)
{
    uint16_t *w = rt_xmalloc(bytes_of(t), op);
    narrow(w, src, t->numel, t->dtype);
    rt_dev.copy(t->data, w, bytes_of(t), RT_COPY_H2D, op);
    free(w);
}

static void read16(const rt_tensor *t, float *dst, const char *op)
{
    uint16_t *w = rt_xmalloc(bytes_of(t), op);
    rt_dev.copy(w, t->data, bytes_of(t), RT_COPY_D2H, op);
    widen(dst, w, t->numel, t->dtype);
    free(w);
}

/* The host sees a 16-bit tensor as floats, converted each way. */
void rt_tensor_write(rt_tensor *t, const void *host)
{
    if (is16(t))
        write16(t, host, "tensor_write");
    else
        rt_dev.copy(t->data, host, bytes_of(t), RT_COPY_H2D, "tensor_write");
}

void rt_tensor_read(const rt_tensor *t, void *host)
{
    if (is16(t))
        read16(t, host, "tensor_read");
    else
        rt_dev.copy(host, t->data, bytes_of(t), RT_COPY_D2H, "tensor_read");
}

void *rt_host_view(const rt_tensor *t, bool read, const char *op)
{
    if (!is16(t)) {
        if (rt_dev.host_memory)
            return t->data;
        void *h = rt_xmalloc(bytes_of(t), op);
        if (read)
            rt_dev.copy(h, t->data, bytes_of(t), RT_COPY_D2H, op);
        return h;
    }
    float *h = rt_xmalloc((size_t)t->numel * sizeof(float), op);
    if (read)
        read16(t, h, op);
    return h;
}

void rt_host_done(const rt_tensor *t, void *host, bool write, const char *op)
{
    if (!is16(t)) {
        if (rt_dev.host_memory)
            return;
        if (write)
            rt_dev.copy(t->data, host, bytes_of(t), RT_COPY_H2D, op);
        free(host);
        return;
    }
    if (write)
        write16(t, host, op);
    free(host);
}

/* ---- the device's public hooks ---------------------------------------------------------- */

static rt_compute_dtype compute_dtype = RT_COMPUTE_F32;

void rt_set_compute_dtype(rt_compute_dtype dt)
{
    if (dt != RT_COMPUTE_F32 && dt != RT_COMPUTE_BF16 && dt != RT_COMPUTE_F16)
        rt_fatal("set_compute_dtype", "unknown compute dtype %d", (int)dt);
    compute_dtype = dt;
}

rt_compute_dtype rt_get_compute_dtype(void)
{
    return compute_dtype;
}

rt_dtype rt_storage_dtype(void)
{
    /* The device is asked first: starting it may settle the compute dtype. */
    if (!rt_dev.store16 || !rt_dev.store16() || compute_dtype == RT_COMPUTE_F32)
        return RT_F32;
    return compute_dtype == RT_COMPUTE_BF16 ? RT_BF16 : RT_F16;
}

void rt_device_sync(void)
{
    rt_dev.sync("device_sync");
}

void rt_use_background_stream(bool on)
{
    rt_dev.background(on);
}
