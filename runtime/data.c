/* data.c: training and test data for generated programs. Two sources share one
 * interface: a synthetic one (inputs and labels are counter-based random functions of
 * (seed, global sample index), so every rank sees what rank 0 would for the same
 * sample), and Fashion-MNIST read from Debian's gzipped IDX files with zlib, pixels
 * scaled to [0,1] (x/255, no mean/std normalisation). The training stream is an endless
 * sequence of epochs, each a seeded permutation of the training set; global batch
 * `step` is stream positions [step*B, step*B + B), and a rank copies only the samples
 * of its shard. Files are checked completely when opened, so a missing or malformed
 * file is a fatal error (path + cause) before the first step. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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
};

uint8_t *rt_idx_read(const char *path, int *ndims, int64_t dims[4], char *err, size_t errlen)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
        return NULL;
    }
    unsigned char head[4];
    uint8_t *data = NULL;
    if (gzread(f, head, 4) != 4) {
        snprintf(err, errlen, "%s: too short for an IDX header", path);
        goto fail;
    }
    if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] < 1 || head[3] > 4) {
        snprintf(err, errlen,
                 "%s: not an unsigned-byte IDX file (header %02x %02x %02x %02x, expected "
                 "00 00 08 01..04)",
                 path, head[0], head[1], head[2], head[3]);
        goto fail;
    }
    *ndims = head[3];
    int64_t total = 1;
    for (int i = 0; i < *ndims; i++) {
        unsigned char b[4];
        if (gzread(f, b, 4) != 4) {
            snprintf(err, errlen, "%s: truncated IDX header", path);
            goto fail;
        }
        dims[i] = ((int64_t)b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
        total *= dims[i];
        if (dims[i] <= 0 || total > ((int64_t)1 << 32)) {
            snprintf(err, errlen, "%s: implausible dimension %lld", path, (long long)dims[i]);
            goto fail;
        }
    }
    data = malloc((size_t)total);
    if (!data) {
        snprintf(err, errlen, "%s: out of memory for %lld bytes", path, (long long)total);
        goto fail;
    }
    int64_t got = 0;
    while (got < total) {
        int chunk = total - got > (1 << 30) ? (1 << 30) : (int)(total - got);
        int r = gzread(f, data + got, (unsigned)chunk);
        if (r <= 0)
            break;
        got += r;
    }
    if (got != total) {
        snprintf(err, errlen, "%s: truncated: header promises %lld bytes of data, found %lld", path,
                 (long long)total, (long long)got);
        goto fail;
    }
    unsigned char extra;
    if (gzread(f, &extra, 1) != 0) {
        snprintf(err, errlen, "%s: trailing data after %lld bytes", path, (long long)total);
        goto fail;
    }
    gzclose(f);
    return data;
fail:
    free(data);
    gzclose(f);
    return NULL;
}

static uint8_t *load(const char *dir, const char *name, int want_ndims, int64_t *count,
                     int64_t *row)
{
    char path[1024], err[1400];
    int nd;
    int64_t dims[4];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *d = rt_idx_read(path, &nd, dims, err, sizeof err);
    if (!d)
        rt_fatal("data", "%s", err);
    if (nd != want_ndims || (nd == 3 && (dims[1] != 28 || dims[2] != 28))) {
        free(d);
        rt_fatal("data", "%s/%s: expected %s, found %d dimensions", dir, name,
                 want_ndims == 3 ? "[n,28,28] images" : "[n] labels", nd);
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

rt_data *rt_data_open(const rt_options *o, int ndim, const int64_t *sample_shape, rt_dtype in_dtype,
                      int64_t input_vocab, int64_t num_classes, int64_t labels_per_sample)
{
    rt_data *d = rt_xcalloc(1, sizeof *d, "data");
    d->kind = o->data;
    d->seed = o->seed;
    d->in_dtype = in_dtype;
    d->vocab = input_vocab;
    d->classes = num_classes;
    d->labels_per_sample = labels_per_sample;
    d->per_sample = 1;
    for (int i = 0; i < ndim; i++)
        d->per_sample *= sample_shape[i];
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
        open_fmnist(d, o->data_dir);
    } else {
        d->ntrain = 60000;
        d->ntest = 1000;
    }
    return d;
}

void rt_data_close(rt_data *d)
{
    if (!d)
        return;
    free(d->train_x);
    free(d->train_y);
    free(d->test_x);
    free(d->test_y);
    free(d->perm);
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
        if (d->in_dtype == RT_F32)
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
static void fill(rt_data *d, uint64_t stream, int64_t g0, int64_t count, rt_tensor *x,
                 rt_tensor *labels)
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
    for (int64_t i = 0; i < count; i++) {
        int64_t g = g0 + i;
        if (d->kind == RT_DATA_SYNTHETIC) {
            synth(d, stream, g, i, hx, hl);
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
}

void rt_data_batch(rt_data *d, int64_t step, int64_t B, int64_t s0, int64_t s1, rt_tensor *x,
                   rt_tensor *labels)
{
    if (s0 < 0 || s1 < s0 || s1 > B)
        rt_fatal("data", "shard [%lld,%lld) outside the batch of %lld", (long long)s0,
                 (long long)s1, (long long)B);
    check_out(d, s1 - s0, x, labels);
    fill(d, 0, step * B + s0, s1 - s0, x, labels);
}

void rt_data_test_batch(rt_data *d, int64_t first, int64_t count, rt_tensor *x, rt_tensor *labels)
{
    if (first < 0 || count < 0 || first + count > d->ntest)
        rt_fatal("data", "test samples [%lld,%lld) outside the test set of %lld", (long long)first,
                 (long long)(first + count), (long long)d->ntest);
    check_out(d, count, x, labels);
    fill(d, 1, first, count, x, labels);
}
