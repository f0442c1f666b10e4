/* test_npy.c: the .npy reader (runtime/npy.c) and the npy data source. Headers of
 * versions 1, 2 and 3, every dtype it takes, Python 2's long suffix, a scalar; hostile
 * headers (no magic, an unknown version, a length past the cap or the file, a shape whose
 * product overflows, a dimension of 2^63, too many dimensions, a NUL, unknown, duplicate
 * and missing keys, big-endian and Fortran arrays, structured dtypes) and files (data
 * truncated, trailing bytes, a FIFO that must not block, a directory). Then the source:
 * the Fashion-MNIST training set written as u8 .npy gives exactly fmnist's batches (same
 * shuffle, same pixels, any shard); f16, bf16 and f32 inputs convert exactly; token
 * inputs and [N, T] targets; and each mismatch with the model (element count, dtype,
 * label count, a label or token out of range, a float label) is a fatal error naming
 * the file, found when the source is opened. */
#include "check.h"
#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FMNIST "/usr/share/datasets/fashion-mnist"

static rt_pool *P;
static char dir[] = "/tmp/burstrt-test-npy-XXXXXX";

/* A .npy file: version `major`, dict `dict` (padded as numpy pads: to 64 bytes with a
 * newline), then n bytes of data. */
static void write_npy(const char *path, int major, const char *dict, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = (pre + len + 1 + 63) / 64 * 64, hlen = total - pre;
    unsigned char *b = calloc(1, total + n);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < (major == 1 ? 2u : 4u); i++)
        b[8 + i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + pre, dict, len);
    memset(b + pre + len, ' ', hlen - len - 1);
    b[total - 1] = '\n';
    if (n)
        memcpy(b + total, data, n);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, total + n, f);
    fclose(f);
    free(b);
}

static const char *at(const char *name)
{
    static char bufs[4][512];
    static int k;
    char *p = bufs[k++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void expect_parse_error(const unsigned char *b, size_t n, const char *what)
{
    npy_header h;
    char err[600] = "";
    CHECK(!npy_parse_header(b, n, "t.npy", &h, err, sizeof err), "'%s': should fail", what);
    CHECK(!strncmp(err, "t.npy: ", 7) && strstr(err, what),
          "error '%s' should name the file and '%s'", err, what);
}

/* A header of version 1 with dict `dict`, exactly (no padding). */
static void expect_dict_error(const char *dict, const char *what)
{
    unsigned char b[512];
    size_t len = strlen(dict);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)len;
    b[9] = (unsigned char)(len >> 8);
    memcpy(b + 10, dict, len);
    expect_parse_error(b, 10 + len, what);
}

static void expect_open_error(const char *path, const char *what)
{
    npy_array a;
    char err[1400] = "";
    CHECK(!npy_open(path, &a, err, sizeof err), "%s: opening should fail", path);
    CHECK(strstr(err, path) && strstr(err, what), "error '%s' should name %s and '%s'", err, path,
          what);
}

static void test_headers(void)
{
    npy_header h;
    char err[600];
    unsigned char b[256];
    /* Versions 1, 2 and 3, keys in any order, a long suffix. */
    for (int major = 1; major <= 3; major++) {
        write_npy(at("v.npy"), major,
                  "{'shape': (3L, 2), 'fortran_order': False, \"descr\": '<f4', }", NULL, 0);
        FILE *f = fopen(at("v.npy"), "rb");
        size_t n = fread(b, 1, sizeof b, f);
        fclose(f);
        bool ok = npy_parse_header(b, n, "v.npy", &h, err, sizeof err);
        CHECK(ok && h.dtype == NPY_F32 && h.ndim == 2 && h.shape[0] == 3 && h.shape[1] == 2 &&
                  h.numel == 6 && h.nbytes == 24 && h.data_offset % 64 == 0,
              "version %d: %s", major, ok ? "wrong fields" : err);
    }
    static const struct {
        const char *descr;
        npy_dtype dt;
    } dts[] = {{"|u1", NPY_U8},  {"<u2", NPY_U16},  {"<i4", NPY_I32}, {"<i8", NPY_I64},
               {"<f2", NPY_F16}, {"<V2", NPY_BF16}, {"<f4", NPY_F32}};
    for (size_t i = 0; i < sizeof dts / sizeof *dts; i++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (5,), }",
                 dts[i].descr);
        write_npy(at("d.npy"), 1, dict, NULL, 0);
        FILE *f = fopen(at("d.npy"), "rb");
        size_t n = fread(b, 1, sizeof b, f);
        fclose(f);
        CHECK(npy_parse_header(b, n, "d.npy", &h, err, sizeof err) && h.dtype == dts[i].dt &&
                  h.nbytes == 5 * npy_dtype_size(dts[i].dt),
              "dtype %s", dts[i].descr);
    }
    write_npy(at("s.npy"), 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (), }", NULL, 0);
    FILE *f = fopen(at("s.npy"), "rb");
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    CHECK(npy_parse_header(b, n, "s.npy", &h, err, sizeof err) && h.ndim == 0 && h.numel == 1,
          "a scalar (Fortran order does not matter): %s", err);

    expect_parse_error((const unsigned char *)"PK\3\4hello!", 10, "not a .npy file");
    expect_parse_error((const unsigned char *)"\x93NUMPY", 6, "not a .npy file");
    expect_parse_error((const unsigned char *)"\x93NUMPY\x04\x00\x10\x00", 10, "version 4.0");
    expect_parse_error((const unsigned char *)"\x93NUMPY\x02\x00\x10\x00", 10,
                       "ends inside the .npy header length");
    expect_parse_error((const unsigned char *)"\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12,
                       "more than the 65536 accepted");
    expect_parse_error((const unsigned char *)"\x93NUMPY\x01\x00\x40\x00{'descr'", 17,
                       "truncated: the .npy header claims 64 bytes");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                      "4294967296), }",
                      "overflows 64 bits");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807,), }",
                      "overflows 64 bits of bytes");
    expect_dict_error(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
        "dimension 1 of the .npy header's shape overflows");
    char many[512] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (int i = 0; i < 33; i++)
        strcat(many, "1,");
    strcat(many, "), }");
    expect_dict_error(many, "more than 32 dimensions");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
                      "other than non-negative integers");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                      "unknown key 'x'");
    expect_dict_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                      "names 'descr' twice");
    expect_dict_error("{'descr': '<f4', 'shape': (2,)}", "lacks 'fortran_order'");
    expect_dict_error("{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", "big-endian");
    expect_dict_error("{'descr': '<f8', 'fortran_order': False, 'shape': (2,)}",
                      "dtype '<f8' is not one");
    expect_dict_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
                      "not a simple dtype string");
    expect_dict_error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", "Fortran order");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
                      "text after its dict");
    expect_dict_error("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
                      "not True or False");
    unsigned char nul[] = "\x93NUMPY\x01\x00\x04\x00{\0}\n";
    expect_parse_error(nul, 14, "NUL byte");

    /* Files: the data's length, special files. */
    float six[6] = {1, 2, 3, 4, 5, 6};
    const char *d23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    write_npy(at("ok.npy"), 1, d23, six, sizeof six);
    npy_array a;
    CHECK(npy_open(at("ok.npy"), &a, err, sizeof err) && a.h.numel == 6 &&
              !memcmp(a.data, six, sizeof six),
          "a good file: %s", err);
    npy_close(&a);
    write_npy(at("short.npy"), 1, d23, six, sizeof six - 1);
    expect_open_error(at("short.npy"), "truncated: the header ([2, 3] f32) promises 24 bytes");
    write_npy(at("long.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", six,
              sizeof six);
    expect_open_error(at("long.npy"), "4 bytes after the 20 bytes of data");
    expect_open_error(at("missing.npy"), "cannot open");
    expect_open_error(dir, "not a regular file (a directory)");
    mkfifo(at("fifo.npy"), 0600);
    expect_open_error(at("fifo.npy"), "not a regular file");
    remove(at("fifo.npy"));
    const char *names[] = {"v.npy", "d.npy", "s.npy", "ok.npy", "short.npy", "long.npy"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        remove(at(names[i]));
}

/* rt_data_open of npy:x,y in a child; it must exit non-zero naming `what`. */
static void expect_source_error(const char *x, const char *y, int ndim, const int64_t *shape,
                                rt_dtype in, int64_t vocab, int64_t classes, int64_t per,
                                const char *what)
{
    int fds[2];
    if (pipe(fds) != 0)
        return;
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        rt_options o = {.data = RT_DATA_NPY, .seed = 1};
        snprintf(o.data_path, sizeof o.data_path, "%s,%s", x, y);
        rt_data_open(&o, ndim, shape, in, vocab, classes, per);
        _exit(0);
    }
    close(fds[1]);
    char msg[2048] = "";
    size_t len = 0;
    ssize_t n;
    while (len < sizeof msg - 1 && (n = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0)
        len += (size_t)n;
    msg[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0, "opening %s,%s should fail", x, y);
    CHECK(strstr(msg, what) != NULL, "error '%s' should mention '%s'", msg, what);
}

/* The Fashion-MNIST training set as npy: fmnist's batches, bit for bit. */
static void test_fmnist_equal(void)
{
    int nd;
    int64_t dims[4];
    char err[1024];
    uint8_t *img = rt_idx_read(FMNIST "/train-images-idx3-ubyte.gz", &nd, dims, err, sizeof err);
    uint8_t *lab = rt_idx_read(FMNIST "/train-labels-idx1-ubyte.gz", &nd, dims, err, sizeof err);
    CHECK(img && lab, "Fashion-MNIST: %s", err);
    if (!img || !lab)
        return;
    write_npy(at("fx.npy"), 1,
              "{'descr': '|u1', 'fortran_order': False, 'shape': (60000, 28, 28), }", img,
              60000 * 784);
    int64_t *l64 = malloc(60000 * sizeof *l64);
    for (int i = 0; i < 60000; i++)
        l64[i] = lab[i];
    write_npy(at("fy.npy"), 2, "{'descr': '<i8', 'fortran_order': False, 'shape': (60000,), }", l64,
              60000 * sizeof *l64);
    free(l64);
    free(img);
    free(lab);
    rt_options fo = {.data = RT_DATA_FMNIST, .seed = 4}, no = {.data = RT_DATA_NPY, .seed = 4};
    strcpy(fo.data_path, FMNIST);
    snprintf(no.data_path, sizeof no.data_path, "%s,%s", at("fx.npy"), at("fy.npy"));
    const int64_t shape[] = {1, 28, 28};
    rt_data *f = rt_data_open(&fo, 3, shape, RT_F32, 0, 10, 1);
    rt_data *n = rt_data_open(&no, 3, shape, RT_F32, 0, 10, 1);
    CHECK(rt_data_train_count(n) == 60000 && rt_data_test_count(n) == 0, "npy counts");
    const int64_t B = 250;
    rt_tensor *x1 = rt_tensor_new(P, RT_F32, 4, (int64_t[]){B, 1, 28, 28});
    rt_tensor *x2 = rt_tensor_new(P, RT_F32, 4, (int64_t[]){B, 1, 28, 28});
    rt_tensor *y1 = rt_tensor_new(P, RT_I32, 1, (int64_t[]){B});
    rt_tensor *y2 = rt_tensor_new(P, RT_I32, 1, (int64_t[]){B});
    int differ = 0;
    /* Steps of epoch 0, the straddle into epoch 1 (60000 = 240 * 250), epoch 2. */
    for (int64_t step = 0; step < 500; step += 13) {
        rt_data_batch(f, step, B, 0, B, x1, y1);
        rt_data_batch(n, step, B, 0, B, x2, y2);
        differ += memcmp(x1->data, x2->data, (size_t)x1->numel * 4) != 0 ||
                  memcmp(y1->data, y2->data, (size_t)B * 4) != 0;
    }
    CHECK(differ == 0, "%d of 39 batches of the npy arrays differ from fmnist's", differ);
    rt_tensor *xs = rt_tensor_new(P, RT_F32, 4, (int64_t[]){50, 1, 28, 28});
    rt_tensor *ys = rt_tensor_new(P, RT_I32, 1, (int64_t[]){50});
    rt_data_batch(n, 241, B, 100, 150, xs, ys);
    rt_data_batch(f, 241, B, 0, B, x1, y1);
    CHECK(!memcmp(xs->data, rt_f32(x1) + 100 * 784, 50 * 784 * 4) &&
              !memcmp(ys->data, rt_i32(y1) + 100, 50 * 4),
          "an npy shard differs from fmnist's samples at its positions");
    rt_data_close(f);
    rt_data_close(n);
    /* The same arrays for a flat [784] input (the count of elements is what must match). */
    rt_data *flat = rt_data_open(&no, 1, (int64_t[]){784}, RT_F32, 0, 10, 1);
    rt_data_close(flat);
    expect_source_error(at("fx.npy"), at("fy.npy"), 3, (int64_t[]){3, 28, 28}, RT_F32, 0, 10, 1,
                        "fx.npy: samples of 784 elements ([60000, 28, 28] u8), but the model's "
                        "input takes [3, 28, 28] (2352 elements)");
    expect_source_error(at("fx.npy"), at("fy.npy"), 3, shape, RT_F32, 0, 5, 1,
                        "fy.npy: label 9 of sample 0 is outside [0, 5)");
    remove(at("fx.npy"));
    remove(at("fy.npy"));
}

static uint16_t to_f16(float f)
{
    /* exact for the small integers and halves used here */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (f == 0)
        return 0;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    return (uint16_t)((u >> 16 & 0x8000) | (uint32_t)e << 10 | (u >> 13 & 0x3ff));
}

static void test_dtypes(void)
{
    const float want[6] = {0, 0.5f, -1.5f, 2, 3.25f, -8};
    uint16_t h[6], bf[6];
    for (int i = 0; i < 6; i++) {
        uint32_t u;
        memcpy(&u, &want[i], 4);
        h[i] = to_f16(want[i]);
        bf[i] = (uint16_t)(u >> 16);
    }
    int32_t y[3] = {0, 2, 1};
    write_npy(at("y.npy"), 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", y, 12);
    const struct {
        const char *descr;
        const void *data;
        size_t n;
    } xs[] = {{"<f2", h, 12}, {"<V2", bf, 12}, {"<f4", want, 24}};
    rt_tensor *x = rt_tensor_new(P, RT_F32, 2, (int64_t[]){3, 2});
    rt_tensor *l = rt_tensor_new(P, RT_I32, 1, (int64_t[]){3});
    for (size_t k = 0; k < 3; k++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3, 2), }",
                 xs[k].descr);
        write_npy(at("x.npy"), 3, dict, xs[k].data, xs[k].n);
        rt_options o = {.data = RT_DATA_NPY, .seed = 9};
        snprintf(o.data_path, sizeof o.data_path, "%s,%s", at("x.npy"), at("y.npy"));
        rt_data *d = rt_data_open(&o, 1, (int64_t[]){2}, RT_F32, 0, 3, 1);
        rt_data_batch(d, 0, 3, 0, 3, x, l);
        /* Each row must be the row its label names (y[r] = the row's index in the file). */
        int bad = 0;
        for (int i = 0; i < 3; i++) {
            int r = rt_i32(l)[i] == 0 ? 0 : rt_i32(l)[i] == 2 ? 1 : 2;
            bad += memcmp(rt_f32(x) + 2 * i, want + 2 * r, 8) != 0;
        }
        CHECK(bad == 0, "%s inputs: %d rows differ from the file's", xs[k].descr, bad);
        rt_data_close(d);
    }
    /* Wrong kinds of inputs and labels. */
    int64_t i64[6] = {1, 2, 3, 4, 5, 6};
    write_npy(at("xi.npy"), 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }", i64,
              48);
    expect_source_error(at("xi.npy"), at("y.npy"), 1, (int64_t[]){2}, RT_F32, 0, 3, 1,
                        "xi.npy: i64 values cannot be the model's float inputs");
    expect_source_error(at("x.npy"), at("x.npy"), 1, (int64_t[]){2}, RT_F32, 0, 3, 1,
                        "x.npy: labels of shape [3, 2] f32, but the model takes one label per "
                        "sample ([3])");
    write_npy(at("yf.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", want,
              12);
    expect_source_error(at("x.npy"), at("yf.npy"), 1, (int64_t[]){2}, RT_F32, 0, 3, 1,
                        "yf.npy: labels are f32, not integers");
    write_npy(at("y2.npy"), 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", y, 8);
    expect_source_error(at("x.npy"), at("y2.npy"), 1, (int64_t[]){2}, RT_F32, 0, 3, 1,
                        "y2.npy: 2 labels ([2] i32) for the 3 samples of");
    write_npy(at("empty.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2), }",
              NULL, 0);
    expect_source_error(at("empty.npy"), at("y.npy"), 1, (int64_t[]){2}, RT_F32, 0, 3, 1,
                        "empty.npy: the array ([0, 2] f32) holds no samples");
    expect_source_error(at("nothere.npy"), at("y.npy"), 1, (int64_t[]){2}, RT_F32, 0, 3, 1,
                        "nothere.npy: cannot open");

    /* Tokens: [N, T] inputs and targets, ids checked against the vocabulary. */
    uint16_t tok[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t tgt[2 * 4] = {2, 3, 4, 5, 6, 7, 8, 9};
    write_npy(at("tx.npy"), 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (2, 4), }", tok,
              sizeof tok);
    write_npy(at("ty.npy"), 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 4), }", tgt,
              sizeof tgt);
    rt_options o = {.data = RT_DATA_NPY, .seed = 2};
    snprintf(o.data_path, sizeof o.data_path, "%s,%s", at("tx.npy"), at("ty.npy"));
    rt_data *d = rt_data_open(&o, 1, (int64_t[]){4}, RT_I32, 10, 10, 4);
    rt_tensor *tx = rt_tensor_new(P, RT_I32, 2, (int64_t[]){2, 4});
    rt_tensor *ty = rt_tensor_new(P, RT_I32, 2, (int64_t[]){2, 4});
    rt_data_batch(d, 0, 2, 0, 2, tx, ty);
    int bad = 0;
    for (int i = 0; i < 8; i++)
        bad +=
            rt_i32(ty)[i] != rt_i32(tx)[i] + 1 || (i % 4 && rt_i32(tx)[i] != rt_i32(tx)[i - 1] + 1);
    CHECK(bad == 0, "token rows and their targets do not match the files");
    rt_data_close(d);
    expect_source_error(at("tx.npy"), at("ty.npy"), 1, (int64_t[]){4}, RT_I32, 8, 10, 4,
                        "tx.npy: token 8 of sample 1 is outside [0, 8)");
    expect_source_error(at("tx.npy"), at("ty.npy"), 1, (int64_t[]){4}, RT_I32, 10, 10, 3,
                        "ty.npy: labels of shape [2, 4] i64, but the model takes 3 per sample");
    const char *names[] = {"x.npy",  "y.npy",     "xi.npy", "yf.npy",
                           "y2.npy", "empty.npy", "tx.npy", "ty.npy"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        remove(at(names[i]));
}

/* Token files: windows of T + 1 tokens, inputs the first T and labels the next T; the
 * training offsets seeded, the test windows consecutive; ids and length checked. */
static void test_tokens(void)
{
    uint16_t t16[100];
    uint32_t t32[100];
    for (int i = 0; i < 100; i++)
        t16[i] = (uint16_t)(t32[i] = (uint32_t)(i * 7 % 50));
    FILE *f = fopen(at("t.bin"), "wb");
    fwrite(t16, 2, 100, f);
    fclose(f);
    f = fopen(at("t32.bin"), "wb");
    fwrite(t32, 4, 100, f);
    fclose(f);
    rt_tensor *x = rt_tensor_new(P, RT_I32, 2, (int64_t[]){4, 8});
    rt_tensor *y = rt_tensor_new(P, RT_I32, 2, (int64_t[]){4, 8});
    rt_tensor *x2 = rt_tensor_new(P, RT_I32, 2, (int64_t[]){2, 8});
    for (int k = 0; k < 2; k++) {
        rt_options o = {.data = k ? RT_DATA_TOKENS32 : RT_DATA_TOKENS,
                        .seed = 5,
                        .eval_set = true,
                        .eval_data = k ? RT_DATA_TOKENS32 : RT_DATA_TOKENS};
        snprintf(o.data_path, sizeof o.data_path, "%s", at(k ? "t32.bin" : "t.bin"));
        snprintf(o.eval_path, sizeof o.eval_path, "%s", at(k ? "t32.bin" : "t.bin"));
        rt_data *d = rt_data_open(&o, 1, (int64_t[]){8}, RT_I32, 50, 50, 8);
        CHECK(rt_data_train_count(d) == 12 && rt_data_test_count(d) == 12, "token counts");
        int bad = 0, offsets[8];
        for (int step = 0; step < 2; step++) {
            rt_data_batch(d, step, 4, 0, 4, x, y);
            for (int i = 0; i < 4; i++) {
                /* the window's offset: where its first token sits in the file */
                int off = -1;
                for (int o0 = 0; o0 + 9 <= 100 && off < 0; o0++) {
                    bool m = true;
                    for (int e = 0; e < 8 && m; e++)
                        m = rt_i32(x)[8 * i + e] == (int32_t)t32[o0 + e] &&
                            rt_i32(y)[8 * i + e] == (int32_t)t32[o0 + e + 1];
                    if (m)
                        off = o0;
                }
                bad += off < 0;
                offsets[step * 4 + i] = off;
            }
        }
        int distinct = 0;
        for (int i = 0; i < 8; i++) {
            bool seen = false;
            for (int j = 0; j < i; j++)
                seen = seen || offsets[j] == offsets[i];
            distinct += !seen;
        }
        CHECK(bad == 0 && distinct >= 6,
              "tokens%s: %d windows not in the file, %d distinct offsets", k ? "32" : "", bad,
              distinct);
        rt_data_batch(d, 1, 4, 2, 4, x2, NULL);
        CHECK(!memcmp(rt_i32(x2), rt_i32(x) + 16, 2 * 8 * 4), "a token shard differs");
        rt_data_test_batch(d, 3, 4, x, y);
        CHECK(rt_i32(x)[0] == (int32_t)t32[24] && rt_i32(y)[7] == (int32_t)t32[32],
              "test window 3 does not start at token 24");
        rt_data_close(d);
    }
    /* a short file, an odd length, an id past the vocabulary */
    rt_options o = {.data = RT_DATA_TOKENS, .seed = 1};
    snprintf(o.data_path, sizeof o.data_path, "%s", at("t.bin"));
    int fds[2];
    const struct {
        int64_t t, vocab;
        const char *what;
    } cases[] = {{100, 50, "100 tokens, shorter than one window of T + 1 = 101"},
                 {8, 30, "token 35 at position 5 is not below the vocabulary of 30"}};
    for (size_t c = 0; c < 2 && pipe(fds) == 0; c++) {
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 2);
            rt_data_open(&o, 1, (int64_t[]){cases[c].t}, RT_I32, cases[c].vocab, cases[c].vocab,
                         cases[c].t);
            _exit(0);
        }
        close(fds[1]);
        char msg[2048] = "";
        ssize_t n = read(fds[0], msg, sizeof msg - 1);
        msg[n > 0 ? n : 0] = 0;
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) && strstr(msg, "t.bin") &&
                  strstr(msg, cases[c].what),
              "token error '%s' should name the file and say '%s'", msg, cases[c].what);
    }
    remove(at("t.bin"));
    remove(at("t32.bin"));
}

int main(void)
{
    alarm(50); /* a reader that blocks (on a FIFO, say) fails here, not at ctest's timeout */
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    P = rt_pool_new();
    test_headers();
    test_dtypes();
    test_tokens();
    test_fmnist_equal();
    rmdir(dir);
    rt_pool_free(P);
    if (check_failures) {
        fprintf(stderr, "test_npy: %d checks failed\n", check_failures);
        return 1;
    }
    printf("test_npy: all checks passed\n");
    return 0;
}
