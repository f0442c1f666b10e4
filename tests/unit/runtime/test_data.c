/* test_data.c: the IDX reader on Debian's real Fashion-MNIST files, clear errors for
 * missing, truncated and foreign files, special files (a FIFO must not block, a
 * directory, /dev/zero), damaged gzip files (a flipped CRC-32 or length, corrupt
 * compressed data, a missing trailer, trailing garbage), impossible headers (a count of
 * 2^31-1 images, a zero dimension), raw and multi-member files; the per-epoch shuffle (a
 * permutation: every label histogram of an epoch equals the file's), shard independence
 * (a rank's shard holds exactly the samples rank 0 would see at those positions), and the
 * synthetic source. */
#include "check.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#define FMNIST "/usr/share/datasets/fashion-mnist"

static rt_pool *P;

static rt_tensor *like_i32(rt_pool *pool, int64_t n, int64_t k)
{
    return rt_tensor_new(pool, RT_I32, 2, (int64_t[]){n, k});
}

static void expect_idx_error(const char *path, const char *what)
{
    int nd;
    int64_t dims[4];
    char err[1024] = "";
    uint8_t *d = rt_idx_read(path, &nd, dims, err, sizeof err);
    CHECK(d == NULL, "%s: reading should fail", path);
    free(d);
    CHECK(strstr(err, path) && strstr(err, what), "%s: error '%s' should name the path and '%s'",
          path, err, what);
}

static void write_gz(const char *path, const unsigned char *bytes, size_t n)
{
    gzFile f = gzopen(path, "wb");
    gzwrite(f, bytes, (unsigned)n);
    gzclose(f);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b = malloc(1 << 20);
    *n = f ? fread(b, 1, 1 << 20, f) : 0;
    if (f)
        fclose(f);
    return b;
}

static void spill(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
}

/* A valid label file of `count` labels 0..9, raw bytes. */
static unsigned char *labels_idx(int count, size_t *n)
{
    unsigned char *b = malloc(8 + (size_t)count);
    memcpy(b,
           (unsigned char[]){0, 0, 8, 1, 0, 0, (unsigned char)(count >> 8), (unsigned char)count},
           8);
    for (int i = 0; i < count; i++)
        b[8 + i] = (unsigned char)(rt_hash64((uint64_t)i) % 10);
    *n = 8 + (size_t)count;
    return b;
}

/* Each kind of damage to a gzipped IDX file, and the special files, must be refused with a
 * message that says what is wrong (never "truncated" for a damaged but complete file). */
static void test_damaged_files(const char *dir)
{
    char path[256], gz[256];
    size_t n, zn;
    unsigned char *raw = labels_idx(3000, &n);
    snprintf(gz, sizeof gz, "%s/good.gz", dir);
    write_gz(gz, raw, n);
    int nd;
    int64_t dims[4];
    char err[1024];
    uint8_t *ok = rt_idx_read(gz, &nd, dims, err, sizeof err);
    CHECK(ok && nd == 1 && dims[0] == 3000 && !memcmp(ok, raw + 8, 3000), "good file: %s",
          ok ? "wrong content" : err);
    free(ok);
    unsigned char *z = slurp(gz, &zn);

    snprintf(path, sizeof path, "%s/crc.gz", dir);
    z[zn - 8] ^= 1;
    spill(path, z, zn);
    expect_idx_error(path, "the CRC-32 of the data does not match its trailer");
    z[zn - 8] ^= 1;
    z[zn - 2] ^= 1;
    spill(path, z, zn);
    expect_idx_error(path, "the length in the trailer does not match the data");
    z[zn - 2] ^= 1;
    spill(path, z, zn - 8);
    expect_idx_error(path, "before its CRC-32 and length trailer");
    spill(path, z, zn / 2);
    expect_idx_error(path, "truncated: the gzip stream ends inside its compressed data");
    for (size_t i = 12; i < zn - 8; i += 7)
        z[i] ^= 0x55;
    spill(path, z, zn);
    expect_idx_error(path, "corrupt gzip data");
    free(z);

    /* Trailing garbage after a complete stream; two members in a row are fine. */
    z = slurp(gz, &zn);
    memcpy(z + zn, "garbage", 7);
    spill(path, z, zn + 7);
    expect_idx_error(path, "trailing garbage");
    FILE *f = fopen(path, "wb");
    fwrite(z, 1, zn, f);
    fclose(f);
    gzFile g = gzopen(path, "ab"); /* a second member with more labels: too many bytes */
    gzwrite(g, raw + 8, 5);
    gzclose(g);
    expect_idx_error(path, "trailing data after the 3000 bytes the header (3000) promises");
    f = fopen(path, "wb");
    gzFile g1 = gzdopen(dup(fileno(f)), "wb");
    gzwrite(g1, raw, 1000);
    gzclose(g1);
    fclose(f);
    g = gzopen(path, "ab");
    gzwrite(g, raw + 1000, (unsigned)(n - 1000));
    gzclose(g);
    ok = rt_idx_read(path, &nd, dims, err, sizeof err);
    CHECK(ok && dims[0] == 3000 && !memcmp(ok, raw + 8, 3000), "two gzip members: %s",
          ok ? "wrong content" : err);
    free(ok);
    free(z);

    /* Uncompressed IDX is read as such. */
    spill(path, raw, n);
    ok = rt_idx_read(path, &nd, dims, err, sizeof err);
    CHECK(ok && dims[0] == 3000 && !memcmp(ok, raw + 8, 3000), "raw file: %s",
          ok ? "content" : err);
    free(ok);
    spill(path, raw, n - 1);
    expect_idx_error(
        path, "truncated: the header (3000) promises 3000 bytes of data, the file holds 2999");

    /* Headers that cannot be: 2^31-1 images of 28x28 (named as a whole), a zero dimension. */
    unsigned char huge[16] = {0, 0, 8, 3, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 28, 0, 0, 0, 28};
    write_gz(path, huge, sizeof huge);
    expect_idx_error(path,
                     "the IDX header promises 2147483647 x 28 x 28 bytes, more than the 4 GiB");
    unsigned char empty[12] = {0, 0, 8, 2, 0, 0, 0, 5, 0, 0, 0, 0};
    write_gz(path, empty, sizeof empty);
    expect_idx_error(path, "dimension 2 of the IDX header is 0");
    unsigned char many[8] = {0, 0, 8, 1, 0x7f, 0xff, 0xff, 0xff};
    write_gz(path, many, sizeof many);
    expect_idx_error(path, "promises 2147483647 bytes of data, the file holds 0");
    remove(path);
    remove(gz);
    free(raw);

    /* Special files: refused at once, never read or waited on. */
    snprintf(path, sizeof path, "%s/fifo", dir);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    expect_idx_error(path, "not a regular file (a FIFO)");
    remove(path);
    expect_idx_error(dir, "not a regular file (a directory)");
    expect_idx_error("/dev/zero", "not a regular file (a character device)");
}

/* Runs rt_data_open on `dir` in a child; it must exit non-zero naming `what`. */
static void expect_open_fails(const char *dir, const char *what)
{
    int fds[2];
    if (pipe(fds) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        rt_options o = {.data = RT_DATA_FMNIST, .seed = 1};
        snprintf(o.data_path, sizeof o.data_path, "%s", dir);
        rt_data_open(&o, 3, (int64_t[]){1, 28, 28}, RT_F32, 0, 10, 1);
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
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0, "opening %s should fail", dir);
    CHECK(strstr(msg, what) != NULL, "error for %s: '%s' should mention '%s'", dir, msg, what);
}

int main(void)
{
    alarm(50); /* a reader that blocks (on a FIFO, say) fails here, not at ctest's timeout */
    P = rt_pool_new();
    int nd;
    int64_t dims[4];
    char err[1024];
    uint8_t *lab = rt_idx_read(FMNIST "/train-labels-idx1-ubyte.gz", &nd, dims, err, sizeof err);
    CHECK(lab && nd == 1 && dims[0] == 60000, "train labels: %s", lab ? "bad shape" : err);
    uint8_t *img = rt_idx_read(FMNIST "/t10k-images-idx3-ubyte.gz", &nd, dims, err, sizeof err);
    CHECK(img && nd == 3 && dims[0] == 10000 && dims[1] == 28 && dims[2] == 28, "test images: %s",
          img ? "bad shape" : err);
    free(img);
    if (lab)
        CHECK(lab[0] == 9 && lab[1] == 0, "first training labels %d %d, expected 9 0", lab[0],
              lab[1]);

    /* Broken files: missing, foreign, truncated. */
    char dir[] = "/tmp/burstrt-test-data-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/missing.gz", dir);
    expect_idx_error(path, "cannot open");
    snprintf(path, sizeof path, "%s/foreign.gz", dir);
    write_gz(path, (const unsigned char *)"PK\3\4hello", 9);
    expect_idx_error(path, "not an unsigned-byte IDX file");
    snprintf(path, sizeof path, "%s/truncated.gz", dir);
    unsigned char trunc[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 10, 1, 2, 3, 4, 5};
    write_gz(path, trunc, sizeof trunc);
    expect_idx_error(path, "truncated");
    expect_open_fails(dir, "train-images-idx3-ubyte.gz: cannot open");
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    write_gz(path, trunc, sizeof trunc);
    expect_open_fails(dir, "train-images-idx3-ubyte.gz: truncated");
    unsigned char flat[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5};
    write_gz(path, flat, sizeof flat);
    expect_open_fails(dir, "train-images-idx3-ubyte.gz: expected [n,28,28] images");
    remove(path);
    snprintf(path, sizeof path, "%s/foreign.gz", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/truncated.gz", dir);
    remove(path);
    test_damaged_files(dir);
    rmdir(dir);

    /* The real data source: a shard equals rank 0's view of the same positions. */
    rt_options o = {.data = RT_DATA_FMNIST, .seed = 3};
    strcpy(o.data_path, FMNIST);
    rt_data *d = rt_data_open(&o, 3, (int64_t[]){1, 28, 28}, RT_F32, 0, 10, 1);
    CHECK(rt_data_train_count(d) == 60000 && rt_data_test_count(d) == 10000, "counts");
    const int64_t B = 8;
    rt_tensor *x = rt_tensor_new(P, RT_F32, 4, (int64_t[]){B, 1, 28, 28});
    rt_tensor *y = rt_tensor_new(P, RT_I32, 1, (int64_t[]){B});
    rt_tensor *xs = rt_tensor_new(P, RT_F32, 4, (int64_t[]){3, 1, 28, 28});
    rt_tensor *ys = rt_tensor_new(P, RT_I32, 1, (int64_t[]){3});
    rt_data_batch(d, 7, B, 0, B, x, y);
    rt_data_batch(d, 7, B, 5, 8, xs, ys);
    CHECK(!memcmp(xs->data, rt_f32(x) + 5 * 784, 3 * 784 * 4) &&
              !memcmp(ys->data, rt_i32(y) + 5, 3 * 4),
          "a shard differs from the same samples of the whole batch");
    float lo = 1, hi = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        lo = fminf(lo, rt_f32(x)[i]);
        hi = fmaxf(hi, rt_f32(x)[i]);
    }
    CHECK(lo >= 0.0f && hi <= 1.0f && hi > 0.5f, "pixels in [%g, %g], expected within [0,1]",
          (double)lo, (double)hi);
    /* Epoch 1 (steps 60..119 at B=1000) is a permutation: label histogram as in the file. */
    rt_tensor *yb = rt_tensor_new(P, RT_I32, 1, (int64_t[]){1000});
    int64_t hist[10] = {0}, file_hist[10] = {0};
    for (int64_t s = 60; s < 120; s++) {
        rt_data_batch(d, s, 1000, 0, 1000, NULL, yb);
        for (int i = 0; i < 1000; i++)
            hist[rt_i32(yb)[i]]++;
    }
    for (int i = 0; lab && i < 60000; i++)
        file_hist[lab[i]]++;
    CHECK(!memcmp(hist, file_hist, sizeof hist), "an epoch is not a permutation of the data");
    rt_data_batch(d, 0, 1000, 0, 1000, NULL, yb);
    int same = 0;
    for (int i = 0; lab && i < 1000; i++)
        same += rt_i32(yb)[i] == lab[i];
    CHECK(same < 300, "training data is not shuffled (%d of 1000 labels in file order)", same);
    rt_data_test_batch(d, 0, 3, xs, ys);
    CHECK(rt_i32(ys)[0] == 9, "first test label %d, expected 9", rt_i32(ys)[0]);
    rt_data_close(d);
    free(lab);

    /* Synthetic tokens and labels: deterministic per global sample, in range. */
    rt_options so = {.data = RT_DATA_SYNTHETIC, .seed = 3};
    rt_data *sd = rt_data_open(&so, 1, (int64_t[]){6}, RT_I32, 50, 50, 6);
    rt_tensor *tok = rt_tensor_new(P, RT_I32, 2, (int64_t[]){4, 6}), *tl = like_i32(P, 4, 6);
    rt_tensor *tok2 = rt_tensor_new(P, RT_I32, 2, (int64_t[]){1, 6}), *tl2 = like_i32(P, 1, 6);
    rt_data_batch(sd, 2, 4, 0, 4, tok, tl);
    rt_data_batch(sd, 2, 4, 3, 4, tok2, tl2);
    CHECK(!memcmp(tok2->data, rt_i32(tok) + 18, 24) && !memcmp(tl2->data, rt_i32(tl) + 18, 24),
          "synthetic shard differs from the whole batch");
    int out = 0;
    for (int i = 0; i < 24; i++)
        out +=
            rt_i32(tok)[i] < 0 || rt_i32(tok)[i] >= 50 || rt_i32(tl)[i] < 0 || rt_i32(tl)[i] >= 50;
    CHECK(out == 0, "synthetic tokens out of range");
    rt_data_close(sd);

    rt_pool_free(P);
    if (check_failures) {
        fprintf(stderr, "test_data: %d checks failed\n", check_failures);
        return 1;
    }
    printf("test_data: all checks passed\n");
    return 0;
}
