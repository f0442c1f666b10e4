/* test_safetensors.c: the safetensors reader and writer (runtime/safetensors.c). A file
 * written with every dtype, a scalar, an empty tensor, metadata and a name that needs
 * escapes reads back field for field and byte for byte; the header is padded to 8 bytes
 * and starts with the metadata, as the reference writer's. A write that fails (a missing
 * directory, bytes missing) leaves no file and keeps the old one. Every hostile header is
 * an error with the expected message, never a crash: lengths past the end and past the cap
 * (2 GiB), overlapping, out-of-range, unequal and uncovered byte ranges, unknown dtypes and
 * fields, duplicate names, overflowing shapes, bad JSON, bad UTF-8 and lone surrogates,
 * too many dimensions, and a truncated copy of a good file at every length. The 16-bit
 * conversions round to nearest even and keep infinities, NaNs and subnormals. */
#include "check.h"
#include "safetensors.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>

static char dir[] = "/tmp/burstrt-test-st-XXXXXX";
static char err[512];

/* A file image: the 8-byte length, the header, then `data` bytes of zeros. */
static unsigned char *image(const char *header, size_t data, size_t *len)
{
    size_t h = strlen(header);
    *len = 8 + h + data;
    unsigned char *b = calloc(*len + 1, 1);
    for (int k = 0; k < 8; k++)
        b[k] = (unsigned char)((uint64_t)h >> (8 * k));
    memcpy(b + 8, header, h);
    return b;
}

/* The header must be rejected with a message containing want. */
static void bad(const char *header, size_t data, const char *want)
{
    size_t len;
    unsigned char *b = image(header, data, &len);
    st_file f;
    bool ok = st_parse(b, len, "x.safetensors", &f, err, sizeof err);
    CHECK(!ok, "accepted: %s", header);
    CHECK(ok || strstr(err, want), "for %s: got '%s', want '%s'", header, err, want);
    CHECK(ok || strncmp(err, "x.safetensors: ", 15) == 0, "error names no file: %s", err);
    if (ok)
        st_close(&f);
    free(b);
}

static void good(const char *header, size_t data, int ntensors)
{
    size_t len;
    unsigned char *b = image(header, data, &len);
    st_file f;
    bool ok = st_parse(b, len, "x.safetensors", &f, err, sizeof err);
    CHECK(ok, "rejected %s: %s", header, err);
    CHECK(!ok || f.ntensors == ntensors, "%s: %d tensors", header, ok ? f.ntensors : -1);
    if (ok)
        st_close(&f);
    free(b);
}

static void test_hostile(void)
{
    size_t len;
    st_file f;
    /* Header lengths: past the end, past the cap, 2 GiB, all ones; too short. */
    unsigned char *b = image("{}", 0, &len);
    b[0] = 200;
    CHECK(!st_parse(b, len, "x.safetensors", &f, err, sizeof err) &&
              strstr(err, "header length 200 goes past the end of the file (10 bytes)"),
          "%s", err);
    uint64_t lens[] = {(uint64_t)2 << 30, ST_HEADER_MAX + 1, UINT64_MAX};
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < 8; j++)
            b[j] = (unsigned char)(lens[k] >> (8 * j));
        CHECK(!st_parse(b, len, "x.safetensors", &f, err, sizeof err) &&
                  strstr(err, "more than the 104857600 bytes a header may have"),
              "%s", err);
    }
    CHECK(!st_parse(b, 5, "x.safetensors", &f, err, sizeof err) && strstr(err, "too short"), "%s",
          err);
    free(b);

    good("{}", 0, 0);
    good("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}   ", 8, 1);
    good(
        "{\"__metadata__\":{\"format\":\"pt\"},\"s\":{\"dtype\":\"I64\",\"shape\":[],"
        "\"data_offsets\":[0,8]},\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[8,8]}}",
        8, 2);
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        12, "'a' and 'b' overlap");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
        "'a': data_offsets [0, 8] are not inside the 4 bytes of data");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
        "are not inside the 8 bytes");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}", 8,
        "are not inside");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
        "hold 8 bytes, its F32 shape needs 12");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
        "bytes 0 to 4 of the data belong to no tensor");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8,
        "4 bytes after the last tensor belong to no tensor");
    bad("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
        "'a' has dtype 'F8_E4M3', which is not one of");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
        "'a' has an unknown field 'x'");
    bad("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
        "'a' has field 'dtype' twice");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "'a' lacks its data_offsets");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
        0, "tensor 'a' twice");
    bad("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4611686018427387904],"
        "\"data_offsets\":[0,0]}}",
        0, "'a': its shape's size overflows");
    bad("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", 0,
        "'a': its size in bytes overflows");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
        "expected a non-negative integer");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", 0,
        "expected an integer");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,0]}}", 0,
        "an integer larger than");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
        "\"data_offsets\":[0,4]}}",
        4, "'a' has more than 16 dimensions");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "expected ','");
    bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}}", 4,
        "bytes after the header's JSON object");
    bad("[1,2]", 0, "expected '{' at the start of the header at byte 0");
    bad("{\"a\xff\":{}}", 0, "is not valid UTF-8");
    bad("{\"\\ud800\":{}}", 0, "a lone UTF-16 surrogate");
    bad("{\"\\u0000\":{}}", 0, "a NUL character");
    bad("{\"a\\q\":{}}", 0, "a bad escape");
    bad("{\"a\n\":{}}", 0, "a control character");
    bad("{\"a", 0, "does not end");
    bad("{\"__metadata__\":{\"k\":1}}", 0, "expected a string (a metadata value)");
    bad("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "__metadata__ twice");
    /* A name decoded from escapes (two surrogates: one four-byte character). */
    {
        size_t n;
        unsigned char *g = image("{\"w\\u00e9\\ud83d\\ude00\\\"\":{\"dtype\":\"U8\",\"shape\":[1],"
                                 "\"data_offsets\":[0,1]}}",
                                 1, &n);
        CHECK(st_parse(g, n, "x.safetensors", &f, err, sizeof err), "%s", err);
        CHECK(f.ntensors == 1 && strcmp(f.tensors[0].name, "w\xc3\xa9\xf0\x9f\x98\x80\"") == 0,
              "decoded name");
        st_close(&f);
        free(g);
    }
}

static void test_f16(void)
{
    /* Every half converts to f32 and back unchanged (NaNs stay NaNs). */
    int bad16 = 0, badbf = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_f16_to_f32((uint16_t)h);
        uint16_t back = st_f32_to_f16(f);
        if (isnan(f) ? !isnan(st_f16_to_f32(back)) : back != h)
            bad16++;
        float g = st_bf16_to_f32((uint16_t)h);
        uint16_t gb = st_f32_to_bf16(g);
        if (isnan(g) ? !isnan(st_bf16_to_f32(gb)) : gb != h)
            badbf++;
    }
    CHECK(bad16 == 0 && badbf == 0, "%d halves and %d bfloat16s do not round-trip", bad16, badbf);
    CHECK(st_f16_to_f32(0x3c00) == 1.0f && st_f16_to_f32(0xc000) == -2.0f, "half values");
    CHECK(st_f16_to_f32(0x0001) == ldexpf(1, -24), "smallest subnormal half");
    CHECK(st_f32_to_f16(65520.0f) == 0x7c00 && st_f32_to_f16(65519.0f) == 0x7bff, "overflow");
    /* Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10. */
    CHECK(st_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00, "tie to even (down)");
    CHECK(st_f32_to_f16(1.0f + 3 * ldexpf(1, -11)) == 0x3c02, "tie to even (up)");
    CHECK(st_f32_to_f16(ldexpf(1, -25)) == 0 && st_f32_to_f16(ldexpf(1.5f, -25)) == 1,
          "subnormal rounding");
    CHECK(st_f32_to_bf16(1.0f + ldexpf(1, -8)) == 0x3f80 &&
              st_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)) == 0x3f82,
          "bfloat16 ties to even");
}

static char *path(const char *leaf)
{
    static char p[4][200];
    static int next;
    char *s = p[next++ % 4];
    snprintf(s, 200, "%s/%s", dir, leaf);
    return s;
}

static void test_round_trip(void)
{
    float w[6] = {1, -2, 3.5f, 0, 1e-30f, -7};
    int64_t step = 42;
    uint16_t h[3] = {0x3c00, 0x8001, 0x7bff}, bf[2] = {0x3f80, 0xc2f7};
    double d[2] = {3.25, -1e300};
    int32_t i32[2] = {-5, 7};
    uint8_t u8[3] = {1, 2, 255};
    st_tensor t[] = {
        {.name = "layer1.0.conv1.weight",
         .dtype = ST_F32,
         .ndim = 3,
         .shape = {1, 2, 3},
         .data = w},
        {.name = "bn1.num_batches_tracked", .dtype = ST_I64, .ndim = 0, .data = &step},
        {.name = "half", .dtype = ST_F16, .ndim = 1, .shape = {3}, .data = h},
        {.name = "bf", .dtype = ST_BF16, .ndim = 2, .shape = {2, 1}, .data = bf},
        {.name = "empty", .dtype = ST_F32, .ndim = 2, .shape = {0, 5}, .data = w},
        {.name = "d", .dtype = ST_F64, .ndim = 1, .shape = {2}, .data = d},
        {.name = "i", .dtype = ST_I32, .ndim = 1, .shape = {2}, .data = i32},
        {.name = "quote\"back\\slash\ttab", .dtype = ST_U8, .ndim = 1, .shape = {3}, .data = u8},
    };
    int n = (int)(sizeof t / sizeof t[0]);
    st_meta meta[] = {{"format", "pt"}, {"source", "burstc \"test\""}};
    const char *p = path("w.safetensors");
    CHECK(st_write(p, t, n, meta, 2, err, sizeof err), "write: %s", err);
    st_file f;
    CHECK(st_open(p, &f, err, sizeof err), "read back: %s", err);
    CHECK(f.ntensors == n && f.nmeta == 2, "%d tensors, %d metadata", f.ntensors, f.nmeta);
    for (int k = 0; k < n && k < f.ntensors; k++) {
        const st_tensor *r = st_find(&f, t[k].name);
        CHECK(r && r == &f.tensors[k], "'%s' not found in order", t[k].name);
        if (!r)
            continue;
        CHECK(r->dtype == t[k].dtype && r->ndim == t[k].ndim, "'%s': dtype or rank", r->name);
        int64_t e = 1;
        for (int q = 0; q < t[k].ndim; q++) {
            CHECK(r->shape[q] == t[k].shape[q], "'%s': dim %d", r->name, q);
            e *= t[k].shape[q];
        }
        CHECK(r->numel == e, "'%s': numel %lld", r->name, (long long)r->numel);
        CHECK(memcmp(r->data, t[k].data, (size_t)e * st_dtype_size(r->dtype)) == 0,
              "'%s': bytes differ", r->name);
    }
    CHECK(st_find(&f, "nope") == NULL, "a missing name is found");
    CHECK(f.nmeta == 2 && strcmp(f.meta[1].key, "source") == 0 &&
              strcmp(f.meta[1].value, "burstc \"test\"") == 0,
          "metadata");
    float hf[3], bff[2];
    CHECK(st_to_f32(&f.tensors[2], hf) && hf[0] == 1.0f && hf[2] == 65504.0f, "F16 to f32");
    CHECK(st_to_f32(&f.tensors[3], bff) && bff[0] == 1.0f && bff[1] == -123.5f, "BF16 to f32");
    CHECK(!st_to_f32(&f.tensors[1], hf), "I64 is not converted to f32");
    st_close(&f);
    /* The layout the reference writer uses: metadata first, the header padded to 8. */
    FILE *fp = fopen(p, "rb");
    unsigned char head[24];
    CHECK(fp && fread(head, 1, 24, fp) == 24, "read the head");
    if (fp)
        fclose(fp);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--)
        hl = hl << 8 | head[k];
    CHECK(hl % 8 == 0 && memcmp(head + 8, "{\"__metadata__\"", 15) == 0, "header layout");

    /* A failed write leaves the old file as it was and no temporary. */
    CHECK(!st_write(path("nodir/w.safetensors"), t, n, NULL, 0, err, sizeof err) &&
              strstr(err, "nodir/w.safetensors: cannot create"),
          "write into a missing directory: %s", err);
    st_writer wr;
    CHECK(st_writer_begin(&wr, p, t, 1, NULL, 0, err, sizeof err), "%s", err);
    CHECK(st_writer_put(&wr, w, 8), "a first part");
    CHECK(!st_writer_commit(&wr) && strstr(err, "'layer1.0.conv1.weight' is missing bytes"),
          "commit with bytes missing: %s", err);
    CHECK(st_writer_begin(&wr, p, t, 1, NULL, 0, err, sizeof err), "%s", err);
    CHECK(!st_writer_put(&wr, w, 28) && strstr(err, "more bytes than the tensors hold"), "%s", err);
    st_writer_abort(&wr);
    CHECK(st_open(p, &f, err, sizeof err) && f.ntensors == n, "the old file is intact: %s", err);
    st_close(&f);
    st_tensor dup[2] = {t[0], t[0]};
    CHECK(!st_write(p, dup, 2, NULL, 0, err, sizeof err) && strstr(err, "twice"), "%s", err);
    st_tensor neg = t[0];
    neg.shape[1] = -2;
    CHECK(!st_write(p, &neg, 1, NULL, 0, err, sizeof err) &&
              strstr(err, "bad name, dtype or shape"),
          "%s", err);
    int left = 0;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp > /dev/null", dir);
    left = system(cmd) == 0;
    CHECK(!left, "a temporary file was left in %s", dir);

    /* Every truncation of a good file is an error, never a crash. */
    fp = fopen(p, "rb");
    unsigned char whole[4096];
    size_t len = fp ? fread(whole, 1, sizeof whole, fp) : 0;
    if (fp)
        fclose(fp);
    CHECK(len > 100 && len < sizeof whole, "file of %zu bytes", len);
    int accepted = 0;
    for (size_t k = 0; k < len; k++) {
        unsigned char *cut = malloc(k + 1);
        memcpy(cut, whole, k);
        if (st_parse(cut, k, "cut", &f, err, sizeof err)) {
            accepted++;
            st_close(&f);
        }
        free(cut);
    }
    CHECK(accepted == 0, "%d truncations accepted", accepted);
    CHECK(!st_open(dir, &f, err, sizeof err) && strstr(err, "not a regular file"), "%s", err);
    CHECK(!st_open(path("missing"), &f, err, sizeof err) && strstr(err, "No such file"), "%s", err);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_hostile();
    test_f16();
    test_round_trip();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("test_safetensors: %s\n", check_failures ? "FAILED" : "all checks passed");
    return check_failures != 0;
}
