/* data.c: training and test data for generated programs. Three sources share one
 * interface: a synthetic one (inputs and labels are counter-based random functions of
 * (seed, global sample index), so every rank sees what rank 0 would for the same
 * sample), Fashion-MNIST read from Debian's gzipped IDX files with zlib, pixels
 * scaled to [0,1] (x/255, no mean/std normalisation), and NumPy arrays (npy.c: X
 * [N, ...] and Y [N] or [N, T], memory-mapped; u8 inputs scaled as fmnist's, so the
 * Fashion-MNIST arrays saved as .npy give fmnist's batches bit for bit). The training stream is an endless
 * sequence of epochs, each a seeded permutation of the training set; global batch
 * `step` is stream positions [step*B, step*B + B), and a rank copies only the samples
 * of its shard. Files are checked completely when opened, so a missing or malformed
 * file is a fatal error (path + cause) before the first step. */
#include "internal.h"
#include "image.h"
#include "npy.h"
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* A data set read from files: npy arrays, an image folder, or a token file. */
typedef struct {
    rt_data_kind kind;
    int64_t n;
    npy_array x, y;
    img_folder folder;
    const unsigned char *tokens; /* the token file, mapped */
    void *map;
    size_t map_len;
    uint64_t ntokens;
    int width; /* bytes per token: 2 or 4 */
} dataset;

struct rt_data {
    rt_data_kind kind;
    int64_t per_sample, vocab, classes, labels_per_sample;
    rt_dtype in_dtype;
    uint64_t seed;
    /* fmnist */
    uint8_t *train_x, *train_y, *test_x, *test_y;
    int64_t ntrain, ntest;
    int32_t *perm;
    int64_t perm_epoch;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    /* npy and images: the training set, and --eval-data's test set (kind 0: none) */
    dataset train_set, test_set;
    int nworkers;        /* --data-workers */
    img_worker *workers; /* nworkers of them, one per loader thread */
    rt_loader *loader;   /* for image sets */
    int64_t *rows;       /* stream_rows: samples, then epochs */
    int64_t rows_cap;
    bool skip_bad;   /* --skip-bad-data */
    int64_t skipped; /* bad image rows met so far (zeroed) */
    char first_bad[RT_LOADER_ERR];
    float mean[3], std[3];
    bool augment;
};

/* ---- reading IDX files, raw or gzipped ------------------------------------------------ */

/* The bytes of a file, decompressed when it is gzip (RFC 1952: every member's CRC-32 and
 * length are checked by zlib, several members are read one after another). Errors go to
 * `err` with the path and exactly what is wrong. */
typedef struct {
    int fd;
    const char *path;
    bool gz, eof, member_done;
    z_stream z;
    unsigned char in[1 << 16];
    char *err;
    size_t errlen;
} source;

static bool fail(source *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(source *s, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(s->err, s->errlen, "%s: %s", s->path, why);
    return false;
}

/* More input; false on a read error (reported). At the end of the file, s->eof. */
static bool refill(source *s)
{
    ssize_t n;
    do
        n = read(s->fd, s->in, sizeof s->in);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return fail(s, "read error: %s", strerror(errno));
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)n;
    s->eof = n == 0;
    return true;
}

/* Reads up to n bytes into out; *got says how many. Fewer than n only at the end of the
 * data (a complete last gzip member, or the end of a raw file). */
static bool src_read(source *s, unsigned char *out, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        if (s->z.avail_in == 0 && !s->eof && !refill(s))
            return false;
        if (!s->gz) {
            if (s->z.avail_in == 0)
                return true; /* end of the file */
            size_t k = n - *got < s->z.avail_in ? n - *got : s->z.avail_in;
            memcpy(out + *got, s->z.next_in, k);
            s->z.next_in += k;
            s->z.avail_in -= (uInt)k;
            *got += k;
            continue;
        }
        if (s->member_done) {
            /* After a member: the end of the file, or the next member. */
            if (s->z.avail_in == 0 && s->eof)
                return true;
            if (s->z.avail_in == 0)
                continue;
            if (s->z.next_in[0] != 0x1f)
                return fail(s, "not gzip data after the end of the gzip stream (trailing garbage)");
            inflateReset(&s->z);
            s->member_done = false;
        }
        if (s->z.avail_in == 0 && s->eof)
            return fail(s, "truncated: the gzip stream ends inside its compressed data or before "
                           "its CRC-32 and length trailer");
        size_t want = n - *got < (1u << 30) ? n - *got : (1u << 30);
        s->z.next_out = out + *got;
        s->z.avail_out = (uInt)want;
        int r = inflate(&s->z, Z_NO_FLUSH);
        *got += want - s->z.avail_out;
        if (r == Z_STREAM_END) {
            s->member_done = true;
        } else if (r == Z_DATA_ERROR) {
            const char *m = s->z.msg ? s->z.msg : "invalid data";
            if (!strcmp(m, "incorrect data check"))
                return fail(s, "corrupt gzip data: the CRC-32 of the data does not match its "
                               "trailer");
            if (!strcmp(m, "incorrect length check"))
                return fail(s, "corrupt gzip data: the length in the trailer does not match the "
                               "data");
            if (!strcmp(m, "incorrect header check") || !strcmp(m, "unknown compression method"))
                return fail(s, "corrupt gzip header (%s)", m);
            return fail(s, "corrupt gzip data (%s)", m);
        } else if (r == Z_MEM_ERROR) {
            return fail(s, "out of memory decompressing");
        } else if (r != Z_OK && r != Z_BUF_ERROR) {
            return fail(s, "cannot decompress (zlib error %d)", r);
        }
    }
    return true;
}

/* Exactly n bytes, or an error naming `what` and how much there was. */
static bool src_exact(source *s, unsigned char *out, size_t n, const char *what)
{
    size_t got;
    if (!src_read(s, out, n, &got))
        return false;
    if (got < n)
        return fail(s, "truncated: %s", what);
    return true;
}

uint8_t *rt_idx_read(const char *path, int *ndims, int64_t dims[4], char *err, size_t errlen)
{
    /* Non-blocking, so a FIFO fails the regular-file check instead of waiting for a writer. */
    source *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    *s = (source){.fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC),
                  .path = path,
                  .err = err,
                  .errlen = errlen};
    uint8_t *data = NULL;
    bool z_ready = false;
    struct stat st;
    if (s->fd < 0) {
        fail(s, "cannot open: %s", strerror(errno));
        goto out;
    }
    if (fstat(s->fd, &st) != 0) {
        fail(s, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        fail(s, "not a regular file (%s)",
             S_ISDIR(st.st_mode)    ? "a directory"
             : S_ISFIFO(st.st_mode) ? "a FIFO"
             : S_ISCHR(st.st_mode)  ? "a character device"
             : S_ISBLK(st.st_mode)  ? "a block device"
             : S_ISSOCK(st.st_mode) ? "a socket"
                                    : "not a file");
        goto out;
    }
    fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK);
    if (!refill(s))
        goto out;
    s->gz = s->z.avail_in >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (s->gz) {
        if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {
            fail(s, "cannot start zlib");
            goto out;
        }
        z_ready = true;
    }
    unsigned char head[4];
    size_t got;
    if (!src_read(s, head, 4, &got))
        goto out;
    if (got < 4) {
        fail(s, "too short for an IDX header (%zu bytes of data)", got);
        goto out;
    }
    if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] < 1 || head[3] > 4) {
        fail(s,
             "not an unsigned-byte IDX file (header %02x %02x %02x %02x, expected "
             "00 00 08 01..04)",
             head[0], head[1], head[2], head[3]);
        goto out;
    }
    *ndims = head[3];
    uint64_t total = 1;
    bool too_big = false;
    char shape[128] = "";
    for (int i = 0; i < *ndims; i++) {
        unsigned char b[4];
        if (!src_exact(s, b, 4, "the IDX header ends inside its dimensions"))
            goto out;
        dims[i] = ((int64_t)b[0] << 24) | ((int64_t)b[1] << 16) | ((int64_t)b[2] << 8) | b[3];
        size_t len = strlen(shape);
        snprintf(shape + len, sizeof shape - len, "%s%lld", i ? " x " : "", (long long)dims[i]);
        if (dims[i] == 0) {
            fail(s, "dimension %d of the IDX header is 0", i + 1);
            goto out;
        }
        too_big = too_big || __builtin_mul_overflow(total, (uint64_t)dims[i], &total) ||
                  total > ((uint64_t)1 << 32);
    }
    if (too_big) {
        fail(s, "the IDX header promises %s bytes, more than the 4 GiB this reader accepts", shape);
        goto out;
    }
    /* Grown as data arrive, so a header that lies costs no more memory than the file. */
    size_t cap = total < ((size_t)1 << 20) ? (size_t)total : ((size_t)1 << 20), have = 0;
    data = malloc(cap ? cap : 1);
    while (data && have < total) {
        if (have == cap) {
            size_t ncap = cap * 2 < total ? cap * 2 : (size_t)total;
            uint8_t *nd = realloc(data, ncap);
            if (!nd) {
                free(data);
                data = NULL;
                break;
            }
            data = nd;
            cap = ncap;
        }
        if (!src_read(s, data + have, cap - have, &got))
            goto fail_data;
        have += got;
        if (got == 0)
            break;
    }
    if (!data) {
        fail(s, "out of memory for %llu bytes", (unsigned long long)total);
        goto out;
    }
    if (have < total) {
        fail(s, "truncated: the header (%s) promises %llu bytes of data, the file holds %zu", shape,
             (unsigned long long)total, have);
        goto fail_data;
    }
    unsigned char extra;
    if (!src_read(s, &extra, 1, &got))
        goto fail_data;
    if (got) {
        fail(s, "trailing data after the %llu bytes the header (%s) promises",
             (unsigned long long)total, shape);
        goto fail_data;
    }
    goto out;
fail_data:
    free(data);
    data = NULL;
out:
    if (z_ready)
        inflateEnd(&s->z);
    if (s->fd >= 0)
        close(s->fd);
    free(s);
    return data;
}

static uint8_t *load(const char *dir, const char *name, int want_ndims, int64_t *count,
                     int64_t *row)
{
    char path[1024], err[1400];
    int nd;
    int64_t dims[4];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rt_progress_tick();
    uint8_t *d = rt_idx_read(path, &nd, dims, err, sizeof err);
    if (!d)
        rt_fatal("data", "%s", err);
    if (nd != want_ndims || (nd == 3 && (dims[1] != 28 || dims[2] != 28))) {
        char shape[96] = "";
        for (int i = 0; i < nd; i++) {
            size_t len = strlen(shape);
            snprintf(shape + len, sizeof shape - len, "%s%lld", i ? "," : "", (long long)dims[i]);
        }
        free(d);
        rt_fatal("data", "%s/%s: expected %s, found [%s]", dir, name,
                 want_ndims == 3 ? "[n,28,28] images" : "[n] labels", shape);
    }
    *count = dims[0];
    *row = nd == 3 ? 784 : 1;
    return d;
}

static void open_fmnist(rt_data *d, const char *dir)
{
    int64_t n1, n2, r;
    d->train_x = load(dir, "train-images-idx3-ubyte.gz", 3, &n1, &r);
    d->train_y = load(dir, "train-labels-idx1-ubyte.gz", 1, &n2, &r);
    if (n1 != n2)
        rt_fatal("data", "%s: %lld training images but %lld labels", dir, (long long)n1,
                 (long long)n2);
    d->ntrain = n1;
    d->test_x = load(dir, "t10k-images-idx3-ubyte.gz", 3, &n1, &r);
    d->test_y = load(dir, "t10k-labels-idx1-ubyte.gz", 1, &n2, &r);
    if (n1 != n2)
        rt_fatal("data", "%s: %lld test images but %lld labels", dir, (long long)n1, (long long)n2);
    d->ntest = n1;
    for (int64_t i = 0; i < d->ntrain; i++)
        if (d->train_y[i] > 9)
            rt_fatal("data",
                     "%s/train-labels-idx1-ubyte.gz: label %d of sample %lld is not "
                     "0..9",
                     dir, d->train_y[i], (long long)i);
    for (int64_t i = 0; i < d->ntest; i++)
        if (d->test_y[i] > 9)
            rt_fatal("data",
                     "%s/t10k-labels-idx1-ubyte.gz: label %d of sample %lld is not "
                     "0..9",
                     dir, d->test_y[i], (long long)i);
    d->perm = rt_xmalloc((size_t)d->ntrain * sizeof(int32_t), "data");
    d->perm_epoch = -1;
}

/* ---- NumPy arrays ---------------------------------------------------------------- */

/* Element i of an integer array (u8, u16, i32, i64), as int64. */
static int64_t npy_int(const npy_array *a, uint64_t i)
{
    const unsigned char *p = a->data + i * npy_dtype_size(a->h.dtype);
    switch (a->h.dtype) {
    case NPY_U8: return p[0];
    case NPY_U16: return (int64_t)p[0] | (int64_t)p[1] << 8;
    case NPY_I32: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case NPY_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    default: rt_fatal("data", "internal: npy_int on a float array");
    }
}

static bool npy_is_int(npy_dtype dt)
{
    return dt == NPY_U8 || dt == NPY_U16 || dt == NPY_I32 || dt == NPY_I64;
}

/* "[1, 28, 28]" */
static void shape_text(int ndim, const int64_t *shape, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap)
        snprintf(out + n, cap - n, "]");
}

/* Every value of integer array a (named path, `what`) in [0, limit). */
static void check_range(const npy_array *a, const char *path, int64_t limit, int64_t per_sample,
                        const char *what)
{
    for (uint64_t i = 0; i < a->h.numel; i++) {
        if ((i & 0xfffff) == 0)
            rt_progress_tick();
        int64_t v = npy_int(a, i);
        if (v < 0 || v >= limit)
            rt_fatal("data", "%s: %s %lld of sample %llu is outside [0, %lld)", path, what,
                     (long long)v, (unsigned long long)(i / (uint64_t)per_sample),
                     (long long)limit);
    }
}

/* Opens "X.npy,Y.npy" and checks it against the model's input and labels, so that every
 * problem is reported before the first step. */
static void open_npy(rt_data *d, const char *spec, npy_array *x, npy_array *y, int64_t *count)
{
    char xpath[1024], err[1400], have[300], want[300];
    const char *comma = strchr(spec, ',');
    if (!comma || (size_t)(comma - spec) >= sizeof xpath)
        rt_fatal("data", "npy: expected X.npy,Y.npy, got '%s'", spec);
    memcpy(xpath, spec, (size_t)(comma - spec));
    xpath[comma - spec] = 0;
    const char *ypath = comma + 1;
    rt_progress_tick();
    if (!npy_open(xpath, x, err, sizeof err))
        rt_fatal("data", "%s", err);
    if (!npy_open(ypath, y, err, sizeof err))
        rt_fatal("data", "%s", err);
    npy_describe(&x->h, have, sizeof have);
    shape_text(d->ndim, d->shape, want, sizeof want);
    if (x->h.ndim < 1 || x->h.shape[0] == 0)
        rt_fatal("data", "%s: the array (%s) holds no samples", xpath, have);
    int64_t n = x->h.shape[0];
    if (n > INT32_MAX)
        rt_fatal("data", "%s: %lld samples, more than the %d this reader shuffles", xpath,
                 (long long)n, INT32_MAX);
    if (x->h.numel / (uint64_t)n != (uint64_t)d->per_sample)
        rt_fatal("data",
                 "%s: samples of %llu elements (%s), but the model's input takes %s (%lld "
                 "elements)",
                 xpath, (unsigned long long)(x->h.numel / (uint64_t)n), have, want,
                 (long long)d->per_sample);
    if (d->in_dtype == RT_I32) {
        if (!npy_is_int(x->h.dtype))
            rt_fatal("data",
                     "%s: %s values cannot be the model's token inputs (u8, u16, i32 or i64 "
                     "can)",
                     xpath, npy_dtype_name(x->h.dtype));
        check_range(x, xpath, d->vocab, d->per_sample, "token");
    } else if (npy_is_int(x->h.dtype) && x->h.dtype != NPY_U8) {
        rt_fatal("data",
                 "%s: %s values cannot be the model's float inputs (u8, f16, bf16 or f32 can)",
                 xpath, npy_dtype_name(x->h.dtype));
    }
    npy_describe(&y->h, have, sizeof have);
    int64_t t = d->labels_per_sample;
    bool shape_ok = y->h.ndim >= 1 && y->h.shape[0] == n &&
                    ((y->h.ndim == 1 && t == 1) || (y->h.ndim == 2 && y->h.shape[1] == t));
    if (!shape_ok) {
        if (y->h.ndim >= 1 && y->h.shape[0] != n)
            rt_fatal("data", "%s: %lld labels (%s) for the %lld samples of %s", ypath,
                     (long long)y->h.shape[0], have, (long long)n, xpath);
        if (t == 1)
            rt_fatal("data",
                     "%s: labels of shape %s, but the model takes one label per sample ([%lld])",
                     ypath, have, (long long)n);
        rt_fatal("data",
                 "%s: labels of shape %s, but the model takes %lld per sample ([%lld, %lld])",
                 ypath, have, (long long)t, (long long)n, (long long)t);
    }
    if (!npy_is_int(y->h.dtype))
        rt_fatal("data", "%s: labels are %s, not integers (u8, u16, i32 or i64)", ypath,
                 npy_dtype_name(y->h.dtype));
    check_range(y, ypath, d->classes, t, "label");
    *count = n;
}

/* Row `row` of inputs a into out (per_sample elements): floats (u8 scaled by 1/255 as
 * fmnist's pixels are) or int32 tokens. */
static void npy_row(const rt_data *d, const npy_array *a, int64_t row, void *out)
{
    uint64_t e0 = (uint64_t)row * (uint64_t)d->per_sample;
    if (d->in_dtype == RT_I32) {
        int32_t *o = out;
        for (int64_t e = 0; e < d->per_sample; e++)
            o[e] = (int32_t)npy_int(a, e0 + (uint64_t)e);
        return;
    }
    float *o = out;
    const unsigned char *p = a->data + e0 * npy_dtype_size(a->h.dtype);
    switch (a->h.dtype) {
    case NPY_U8:
        for (int64_t e = 0; e < d->per_sample; e++)
            o[e] = (float)p[e] * (1.0f / 255.0f);
        break;
    case NPY_F16:
    case NPY_BF16:
        for (int64_t e = 0; e < d->per_sample; e++) {
            uint16_t h = (uint16_t)(p[2 * e] | p[2 * e + 1] << 8);
            o[e] = a->h.dtype == NPY_F16 ? st_f16_to_f32(h) : st_bf16_to_f32(h);
        }
        break;
    case NPY_F32: memcpy(o, p, (size_t)d->per_sample * sizeof(float)); break;
    default: rt_fatal("data", "internal: npy_row on dtype %d", (int)a->h.dtype);
    }
}

/* ---- image folders ---------------------------------------------------------------- */

static void open_images(rt_data *d, const char *dir, dataset *set)
{
    char err[1400], want[300];
    shape_text(d->ndim, d->shape, want, sizeof want);
    if (d->ndim != 3 || (d->shape[0] != 1 && d->shape[0] != 3) || d->in_dtype == RT_I32)
        rt_fatal("data", "%s: images feed f32 [C, H, W] inputs with C 1 or 3, not %s", dir, want);
    if (d->labels_per_sample != 1)
        rt_fatal("data", "%s: images have one label each, the model takes %lld", dir,
                 (long long)d->labels_per_sample);
    if (d->shape[1] > 65536 || d->shape[2] > 65536)
        rt_fatal("data", "%s: an input of %s is larger than images are made here", dir, want);
    rt_progress_tick();
    if (!img_folder_scan(dir, &set->folder, err, sizeof err))
        rt_fatal("data", "%s", err);
    if (set->folder.nclasses > d->classes)
        rt_fatal("data", "%s: %d class folders, but the model has %lld classes", dir,
                 set->folder.nclasses, (long long)d->classes);
    if (set->folder.n > INT32_MAX)
        rt_fatal("data", "%s: %lld images, more than the %d this reader shuffles", dir,
                 (long long)set->folder.n, INT32_MAX);
    set->n = set->folder.n;
    set->kind = RT_DATA_IMAGES;
}

/* Sample idx of set into row x (per_sample floats) and its label; the training transform
 * when `train` (its draws keyed by (seed, epoch, sample)). A bad image ends the run. */
static bool image_sample(const rt_data *d, img_worker *w, const dataset *set, int64_t idx,
                         int64_t epoch, bool train, float *x, char *err, size_t errlen)
{
    float u[IMG_DRAWS];
    for (int k = 0; train && k < IMG_DRAWS; k++)
        u[k] = rt_rand_uniform(d->seed, 0x1a6e, (uint64_t)epoch, (uint64_t)idx, (uint64_t)k);
    return img_sample(w, set->folder.paths[idx], (int)d->shape[0], (int)d->shape[1],
                      (int)d->shape[2], train ? u : NULL, d->mean, d->std, x, NULL, err, errlen);
}

/* The label of sample idx (its pixels come from the loader, load_images). */
static void image_row(const dataset *set, int64_t idx, int32_t *label)
{
    if (label)
        *label = set->folder.labels[idx];
}

/* The loader's decoding function: worker k's decoder, the set of the stream, the training
 * transform on the training stream unless --augment off. */
static bool decode_image(void *ctx, int k, uint64_t stream, int64_t idx, int64_t epoch, float *out,
                         char *err, size_t errlen)
{
    const rt_data *d = ctx;
    const dataset *set = stream == 0 ? &d->train_set : &d->test_set;
    return image_sample(d, &d->workers[k], set, idx, epoch, stream == 0 && d->augment, out, err,
                        errlen);
}

static void ensure_perm(rt_data *d, int64_t epoch);

/* The samples (and their epochs) at positions [g0, g0 + count) of a stream, in d->rows. */
static void stream_rows(rt_data *d, uint64_t stream, int64_t g0, int64_t count)
{
    if (count > d->rows_cap) {
        free(d->rows);
        d->rows = rt_xmalloc((size_t)count * 2 * sizeof *d->rows, "data");
        d->rows_cap = count;
    }
    int64_t *idx = d->rows, *epoch = d->rows + d->rows_cap;
    for (int64_t i = 0; i < count; i++) {
        int64_t g = g0 + i;
        if (stream == 0) {
            ensure_perm(d, g / d->ntrain);
            idx[i] = d->perm[g % d->ntrain];
            epoch[i] = g / d->ntrain;
        } else {
            idx[i] = g;
            epoch[i] = 0;
        }
    }
}

/* The pixels of a batch's image rows from the loader: decoded by --data-workers threads
 * (the same pixels as one thread, since a sample's transform depends on (seed, epoch,
 * sample) alone), while the previous step computed when the batch was announced. The
 * first bad image in row order ends the run; with --skip-bad-data its row stays zero
 * (the mean after normalisation), its label is kept (the rank that holds the labels
 * never decodes), and the count is reported by rt_data_close. */
static void load_images(rt_data *d, uint64_t stream, int64_t g0, int64_t count, float *x)
{
    char err[RT_LOADER_ERR];
    int64_t bad_row;
    if (!d->loader) /* on the ranks that hold the inputs, once */
        d->loader = rt_loader_new(d->nworkers, d->per_sample, decode_image, d);
    stream_rows(d, stream, g0, count);
    int64_t nbad = rt_loader_get(d->loader, stream, g0, count, d->rows, d->rows + d->rows_cap, x,
                                 &bad_row, err, sizeof err);
    if (nbad && !d->skip_bad)
        rt_fatal("data", "%s", err);
    if (nbad && d->skipped == 0) {
        snprintf(d->first_bad, sizeof d->first_bad, "%s", err);
        rt_message("data", "skipping a bad image (--skip-bad-data): %s", err);
    }
    d->skipped += nbad;
}

/* Announces the next RT_LOADER_AHEAD training batches of this shard, `stride` apart. */
static void prefetch_images(rt_data *d, int64_t g0, int64_t count, int64_t stride)
{
    for (int a = 1; a <= RT_LOADER_AHEAD; a++) {
        int64_t g;
        if (__builtin_mul_overflow(stride, a, &g) || __builtin_add_overflow(g, g0, &g) ||
            g > INT64_MAX - count)
            return;
        stream_rows(d, 0, g, count);
        rt_loader_prefetch(d->loader, 0, g, count, d->rows, d->rows + d->rows_cap);
    }
}

/* Sample idx of a file data set into row i of hx / hl. */
static void file_row(rt_data *d, const dataset *set, int64_t idx, int64_t epoch, bool train,
                     int64_t i, void *hx, int32_t *hl)
{
    if (set->kind == RT_DATA_IMAGES) {
        (void)epoch;
        (void)train;
        image_row(set, idx, hl ? hl + i : NULL);
        return;
    }
    if (hx)
        npy_row(d, &set->x, idx,
                d->in_dtype == RT_I32 ? (void *)((int32_t *)hx + i * d->per_sample)
                                      : (void *)((float *)hx + i * d->per_sample));
    for (int64_t e = 0; hl && e < d->labels_per_sample; e++)
        hl[i * d->labels_per_sample + e] =
            (int32_t)npy_int(&set->y, (uint64_t)idx * (uint64_t)d->labels_per_sample + (uint64_t)e);
}

/* ---- token files ------------------------------------------------------------------- */

static uint32_t token_at(const dataset *set, uint64_t i)
{
    const unsigned char *p = set->tokens + i * (uint64_t)set->width;
    return set->width == 2
               ? (uint32_t)(p[0] | p[1] << 8)
               : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A flat file of little-endian token ids (nanoGPT's train.bin): mapped, every id checked
 * against the vocabulary, at least one window of T + 1 tokens. */
static void open_tokens(rt_data *d, const char *path, rt_data_kind kind, dataset *set)
{
    if (d->in_dtype != RT_I32 || d->ndim != 1 || d->labels_per_sample != d->per_sample)
        rt_fatal("data", "%s: token files feed a model of i32 [T] tokens and T labels", path);
    set->width = kind == RT_DATA_TOKENS ? 2 : 4;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        rt_fatal("data", "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        rt_fatal("data", "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size, t = (uint64_t)d->per_sample;
    if (size % (uint64_t)set->width) {
        close(fd);
        rt_fatal("data", "%s: %llu bytes, not a whole number of %d-byte tokens", path,
                 (unsigned long long)size, set->width);
    }
    set->ntokens = size / (uint64_t)set->width;
    if (set->ntokens < t + 1) {
        close(fd);
        rt_fatal("data", "%s: %llu tokens, shorter than one window of T + 1 = %llu", path,
                 (unsigned long long)set->ntokens, (unsigned long long)(t + 1));
    }
    set->map_len = (size_t)size;
    set->map = mmap(NULL, set->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (set->map == MAP_FAILED) {
        set->map = NULL;
        rt_fatal("data", "%s: cannot map: %s", path, strerror(errno));
    }
    set->tokens = set->map;
    for (uint64_t i = 0; i < set->ntokens; i++) {
        if ((i & 0xfffff) == 0)
            rt_progress_tick();
        uint32_t v = token_at(set, i);
        if ((int64_t)v >= d->vocab || (int64_t)v >= d->classes)
            rt_fatal("data", "%s: token %u at position %llu is not below the vocabulary of %lld",
                     path, v, (unsigned long long)i,
                     (long long)(d->vocab < d->classes ? d->vocab : d->classes));
    }
    /* An epoch: as many windows as the file holds end to end. */
    set->n = (int64_t)((set->ntokens - 1) / t);
    set->kind = RT_DATA_TOKENS;
}

/* Window g of the stream: tokens [o, o + T) as inputs and [o + 1, o + T + 1) as labels,
 * at offset o = a seeded hash of g (training, as nanoGPT's random offsets) or g * T (the
 * test set's consecutive windows). */
static void token_row(const rt_data *d, const dataset *set, int64_t g, bool train, int64_t i,
                      int32_t *hx, int32_t *hl)
{
    uint64_t t = (uint64_t)d->per_sample, span = set->ntokens - t;
    uint64_t o =
        train ? rt_hash64(rt_hash64(d->seed ^ 0x70c3a5ull) ^ (uint64_t)g) % span : (uint64_t)g * t;
    for (uint64_t e = 0; e < t; e++) {
        if (hx)
            hx[(uint64_t)i * t + e] = (int32_t)token_at(set, o + e);
        if (hl)
            hl[(uint64_t)i * t + e] = (int32_t)token_at(set, o + e + 1);
    }
}

static void open_set(rt_data *d, rt_data_kind kind, const char *path, dataset *set)
{
    if (kind == RT_DATA_IMAGES) {
        open_images(d, path, set);
    } else if (kind == RT_DATA_TOKENS || kind == RT_DATA_TOKENS32) {
        open_tokens(d, path, kind, set);
    } else {
        open_npy(d, path, &set->x, &set->y, &set->n);
        set->kind = RT_DATA_NPY;
    }
}

static void close_set(dataset *set)
{
    npy_close(&set->x);
    npy_close(&set->y);
    img_folder_free(&set->folder);
    if (set->map)
        munmap(set->map, set->map_len);
}

rt_data *rt_data_open(const rt_options *o, int ndim, const int64_t *sample_shape, rt_dtype in_dtype,
                      int64_t input_vocab, int64_t num_classes, int64_t labels_per_sample)
{
    rt_data *d = rt_xcalloc(1, sizeof *d, "data");
    d->kind = o->data;
    d->seed = o->seed;
    if (in_dtype != RT_F32 && in_dtype != RT_I32)
        rt_fatal("data", "inputs are f32 or i32 tokens, not dtype %d", (int)in_dtype);
    /* Float inputs are stored as activations are (the host fills them as floats). */
    d->in_dtype = in_dtype == RT_F32 ? rt_storage_dtype() : in_dtype;
    d->vocab = input_vocab;
    d->classes = num_classes;
    d->labels_per_sample = labels_per_sample;
    d->per_sample = 1;
    if (ndim < 0 || ndim > RT_MAX_DIMS)
        rt_fatal("data", "a sample of %d dimensions", ndim);
    d->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        d->per_sample *= sample_shape[i];
        d->shape[i] = sample_shape[i];
    }
    if (num_classes <= 0 || labels_per_sample <= 0)
        rt_fatal("data", "need at least one class and one label per sample");
    if (in_dtype == RT_I32 && input_vocab <= 0)
        rt_fatal("data", "token inputs need a vocabulary size");
    if (d->kind == RT_DATA_FMNIST) {
        if (in_dtype != RT_F32 || d->per_sample != 784 || num_classes != 10 ||
            labels_per_sample != 1)
            rt_fatal("data",
                     "fmnist provides f32 [1,28,28] images with 10 classes, but the "
                     "model's input has %lld elements per sample and %lld classes",
                     (long long)d->per_sample, (long long)num_classes);
        open_fmnist(d, o->data_path);
    } else if (d->kind == RT_DATA_NPY || d->kind == RT_DATA_IMAGES || d->kind == RT_DATA_TOKENS ||
               d->kind == RT_DATA_TOKENS32) {
        open_set(d, d->kind, o->data_path, &d->train_set);
        d->ntrain = d->train_set.n;
        d->ntest = 0;
        /* Token windows are drawn at hashed offsets, not shuffled. */
        if (d->train_set.kind != RT_DATA_TOKENS)
            d->perm = rt_xmalloc((size_t)d->ntrain * sizeof(int32_t), "data");
        d->perm_epoch = -1;
    } else {
        d->ntrain = 60000;
        d->ntest = 1000;
    }
    if (o->eval_set) {
        open_set(d, o->eval_data, o->eval_path, &d->test_set);
        d->ntest = d->test_set.n;
        const img_folder *a = &d->train_set.folder, *b = &d->test_set.folder;
        if (d->train_set.kind == RT_DATA_IMAGES && d->test_set.kind == RT_DATA_IMAGES) {
            bool same = a->nclasses == b->nclasses;
            for (int c = 0; same && c < a->nclasses; c++)
                same = !strcmp(a->classes[c], b->classes[c]);
            if (!same)
                rt_fatal("data", "%s: its class folders are not those of %s (%d and %d classes)",
                         o->eval_path, o->data_path, b->nclasses, a->nclasses);
        }
    }
    /* Images: torchvision's usual normalisation, ImageNet's for colour. */
    int ch = d->ndim > 0 ? (int)d->shape[0] : 1;
    static const float imagenet_mean[3] = {0.485f, 0.456f, 0.406f},
                       imagenet_std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        d->mean[c] = o->nmean == 3   ? o->mean[c]
                     : o->nmean == 1 ? o->mean[0]
                     : ch == 3       ? imagenet_mean[c]
                                     : 0.0f;
        d->std[c] = o->nstd == 3   ? o->std[c]
                    : o->nstd == 1 ? o->std[0]
                    : ch == 3      ? imagenet_std[c]
                                   : 1.0f;
    }
    if ((o->nmean == 3 || o->nstd == 3) && ch != 3)
        rt_fatal("data", "--mean and --std give 3 channels, the model's images have %d", ch);
    d->augment = o->augment;
    d->skip_bad = o->skip_bad_data;
    d->nworkers = o->data_workers > 0 ? o->data_workers : o->threads > 0 ? o->threads : 1;
    if (d->train_set.kind == RT_DATA_IMAGES || d->test_set.kind == RT_DATA_IMAGES) {
        d->workers = rt_xcalloc((size_t)d->nworkers, sizeof *d->workers, "data");
        for (int k = 0; k < d->nworkers; k++)
            img_worker_init(&d->workers[k]);
    } else {
        d->nworkers = 1;
    }
    return d;
}

void rt_data_close(rt_data *d)
{
    if (!d)
        return;
    if (d->skipped)
        rt_message("data",
                   "skipped %lld bad image sample%s (--skip-bad-data: inputs zeroed, labels "
                   "kept); the first: %s",
                   (long long)d->skipped, d->skipped == 1 ? "" : "s", d->first_bad);
    free(d->train_x);
    free(d->train_y);
    free(d->test_x);
    free(d->test_y);
    free(d->perm);
    rt_loader_free(d->loader); /* its threads use the sets and the workers */
    close_set(&d->train_set);
    close_set(&d->test_set);
    free(d->rows);
    for (int k = 0; d->workers && k < d->nworkers; k++)
        img_worker_free(&d->workers[k]);
    free(d->workers);
    free(d);
}

int64_t rt_data_test_count(const rt_data *d)
{
    return d->ntest;
}
int64_t rt_data_train_count(const rt_data *d)
{
    return d->ntrain;
}

static void ensure_perm(rt_data *d, int64_t epoch)
{
    if (d->perm_epoch == epoch)
        return;
    for (int64_t i = 0; i < d->ntrain; i++)
        d->perm[i] = (int32_t)i;
    for (int64_t i = d->ntrain - 1; i > 0; i--) {
        int64_t j = (int64_t)(rt_hash64(rt_hash64(d->seed ^ 0x5bd1e995ull) ^
                                        rt_hash64((uint64_t)epoch * 0x100000001ull + (uint64_t)i)) %
                              (uint64_t)(i + 1));
        int32_t t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    d->perm_epoch = epoch;
}

/* Synthetic sample `g` of stream `stream` (0 train, 1 test) into row `i` of x/labels. */
static void synth(const rt_data *d, uint64_t stream, int64_t g, int64_t i, void *x, int32_t *labels)
{
    for (int64_t e = 0; x && e < d->per_sample; e++) {
        float u = rt_rand_uniform(d->seed, 0xda7a + stream, (uint64_t)g, 0, (uint64_t)e);
        if (d->in_dtype != RT_I32) /* x is a float view of an f32 or 16-bit batch */
            ((float *)x)[i * d->per_sample + e] = u;
        else
            ((int32_t *)x)[i * d->per_sample + e] =
                (int32_t)(u * (float)d->vocab) % (int32_t)d->vocab;
    }
    for (int64_t e = 0; labels && e < d->labels_per_sample; e++) {
        float u = rt_rand_uniform(d->seed, 0xda7a + stream, (uint64_t)g, 1, (uint64_t)e);
        labels[i * d->labels_per_sample + e] =
            (int32_t)(u * (float)d->classes) % (int32_t)d->classes;
    }
}

static void check_out(const rt_data *d, int64_t count, const rt_tensor *x, const rt_tensor *labels)
{
    if (x) {
        rt_check(x, d->in_dtype, -1, "data", "input batch");
        rt_check_numel(x, count * d->per_sample, "data", "input batch");
    }
    if (labels) {
        rt_check(labels, RT_I32, -1, "data", "label batch");
        rt_check_numel(labels, count * d->labels_per_sample, "data", "label batch");
    }
}

/* Fills rows 0..count-1 of x and labels with samples of stream `stream`: row i is
 * training-stream position g0 + i (the epoch's permutation picks the sample) or test
 * sample g0 + i. Synthetic samples are made on the device where the backend can. */
static void fill(rt_data *d, uint64_t stream, int64_t g0, int64_t count, int64_t stride,
                 rt_tensor *x, rt_tensor *labels)
{
    if (d->kind == RT_DATA_SYNTHETIC && rt_dev.synth) {
        rt_synth_keys k = {.seed = d->seed,
                           .stream = stream,
                           .g0 = g0,
                           .count = count,
                           .per_sample = d->per_sample,
                           .labels_per_sample = d->labels_per_sample,
                           .vocab = d->vocab,
                           .classes = d->classes,
                           .in_dtype = d->in_dtype};
        rt_dev.synth(&k, x ? x->data : NULL, labels ? rt_i32(labels) : NULL);
        return;
    }
    void *hx = x ? rt_host_view(x, false, "data") : NULL;
    int32_t *hl = labels ? rt_host_view(labels, false, "data") : NULL;
    const dataset *pset = stream == 0 ? &d->train_set : &d->test_set;
    bool images = hx && pset->kind == RT_DATA_IMAGES;
    if (images)
        load_images(d, stream, g0, count, hx);
    for (int64_t i = 0; i < count; i++) {
        int64_t g = g0 + i;
        if (d->kind == RT_DATA_SYNTHETIC) {
            synth(d, stream, g, i, hx, hl);
            continue;
        }
        if (stream == 1 && d->test_set.kind == RT_DATA_TOKENS) {
            token_row(d, &d->test_set, g, false, i, hx, hl);
            continue;
        }
        if (stream == 0 && d->train_set.kind == RT_DATA_TOKENS) {
            token_row(d, &d->train_set, g, true, i, hx, hl);
            continue;
        }
        if (stream == 1 && d->test_set.kind) {
            file_row(d, &d->test_set, g, 0, false, i, images ? NULL : hx, hl);
            continue;
        }
        if (stream == 0 && d->train_set.kind) {
            ensure_perm(d, g / d->ntrain);
            int64_t epoch = g / d->ntrain, idx = d->perm[g % d->ntrain];
            file_row(d, &d->train_set, idx, epoch, d->augment, i, images ? NULL : hx, hl);
            continue;
        }
        const uint8_t *px, *py;
        if (stream == 0) {
            ensure_perm(d, g / d->ntrain);
            int64_t idx = d->perm[g % d->ntrain];
            px = d->train_x + idx * 784;
            py = d->train_y + idx;
        } else {
            px = d->test_x + g * 784;
            py = d->test_y + g;
        }
        if (hx) {
            float *out = (float *)hx + i * 784;
            for (int e = 0; e < 784; e++)
                out[e] = (float)px[e] * (1.0f / 255.0f);
        }
        if (hl)
            hl[i] = *py;
    }
    if (x)
        rt_host_done(x, hx, true, "data");
    if (labels)
        rt_host_done(labels, hl, true, "data");
    if (images && stride > 0)
        prefetch_images(d, g0, count, stride);
}

void rt_data_batch(rt_data *d, int64_t step, int64_t B, int64_t s0, int64_t s1, rt_tensor *x,
                   rt_tensor *labels)
{
    if (s0 < 0 || s1 < s0 || s1 > B)
        rt_fatal("data", "shard [%lld,%lld) outside the batch of %lld", (long long)s0,
                 (long long)s1, (long long)B);
    int64_t first;
    if (step < 0 || __builtin_mul_overflow(step, B, &first) || first > INT64_MAX - B)
        rt_fatal("data", "batch %lld of %lld samples is outside the stream", (long long)step,
                 (long long)B);
    check_out(d, s1 - s0, x, labels);
    fill(d, 0, first + s0, s1 - s0, B, x, labels);
}

void rt_data_test_batch(rt_data *d, int64_t first, int64_t count, rt_tensor *x, rt_tensor *labels)
{
    if (first < 0 || count < 0 || count > d->ntest || first > d->ntest - count)
        rt_fatal("data", "test samples [%lld,%lld) outside the test set of %lld", (long long)first,
                 (long long)(first + count), (long long)d->ntest);
    check_out(d, count, x, labels);
    fill(d, 1, first, count, 0, x, labels);
}
