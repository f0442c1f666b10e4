/* npy.c: the .npy reader (npy.h): the header's dict literal parsed by hand (no Python
 * evaluation, every length bounded), the file's length checked against the header, the
 * data memory-mapped. data.c turns its rows into batches. */
#include "npy.h"
#include "file_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [NPY_U8] = {"u8", 1},   [NPY_U16] = {"u16", 2}, [NPY_I32] = {"i32", 4},
    [NPY_I64] = {"i64", 8}, [NPY_F16] = {"f16", 2}, [NPY_BF16] = {"bf16", 2},
    [NPY_F32] = {"f32", 4},
};

const char *npy_dtype_name(npy_dtype dt)
{
    return dtypes[dt].name;
}

size_t npy_dtype_size(npy_dtype dt)
{
    return dtypes[dt].size;
}

/* The dict's text, [p, end). */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes ('...' or "..."), at most cap-1 bytes. */
static bool string(cursor *c, char *out, size_t cap)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[n] = 0;
    return true;
}

static bool word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool parse_dtype(const char *descr, npy_dtype *dt)
{
    static const struct {
        const char *descr;
        npy_dtype dt;
    } known[] = {
        {"|u1", NPY_U8},  {"<u1", NPY_U8},  {"<u2", NPY_U16},  {"<i4", NPY_I32},  {"<i8", NPY_I64},
        {"<f2", NPY_F16}, {"<f4", NPY_F32}, {"<V2", NPY_BF16}, {"|V2", NPY_BF16},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(descr, known[i].descr)) {
            *dt = known[i].dt;
            return true;
        }
    return false;
}

bool npy_parse_header(const unsigned char *buf, size_t len, const char *path, npy_header *h,
                      char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return file_error(err, errlen, path, "not a .npy file (it does not begin with \\x93NUMPY)");
    unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return file_error(err, errlen, path,
                          ".npy format version %u.%u (this reader takes 1.0 to 3.0)", major, minor);
    size_t start = major == 1 ? 10 : 12;
    if (len < start)
        return file_error(err, errlen, path,
                          "truncated: the file ends inside the .npy header length");
    uint32_t hlen = major == 1 ? (uint32_t)buf[8] | (uint32_t)buf[9] << 8
                               : (uint32_t)buf[8] | (uint32_t)buf[9] << 8 |
                                     (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
    if (hlen > NPY_HEADER_MAX)
        return file_error(err, errlen, path,
                          "the .npy header claims %u bytes, more than the %d accepted",
                          (unsigned)hlen, NPY_HEADER_MAX);
    if (len - start < hlen)
        return file_error(
            err, errlen, path,
            "truncated: the .npy header claims %u bytes, the file holds %zu after the "
            "length field",
            (unsigned)hlen, len - start);
    h->data_offset = start + hlen;
    cursor c = {(const char *)buf + start, (const char *)buf + start + hlen};
    for (const char *q = c.p; q < c.end; q++)
        if (*q == 0)
            return file_error(err, errlen, path, "the .npy header holds a NUL byte");
    bool seen_descr = false, seen_order = false, seen_shape = false, fortran = false;
    char descr[32] = "";
    if (!eat(&c, '{'))
        return file_error(err, errlen, path, "the .npy header is not a dict ('{' expected)");
    while (!eat(&c, '}')) {
        char key[32];
        if (!string(&c, key, sizeof key) || !eat(&c, ':'))
            return file_error(err, errlen, path,
                              "the .npy header's dict is malformed (a quoted key "
                              "and ':' expected)");
        if (!strcmp(key, "descr")) {
            if (seen_descr)
                return file_error(err, errlen, path, "the .npy header names 'descr' twice");
            seen_descr = true;
            if (!string(&c, descr, sizeof descr))
                return file_error(err, errlen, path,
                                  "the .npy header's 'descr' is not a simple dtype string (a "
                                  "structured array?)");
        } else if (!strcmp(key, "fortran_order")) {
            if (seen_order)
                return file_error(err, errlen, path, "the .npy header names 'fortran_order' twice");
            seen_order = true;
            if (word(&c, "True"))
                fortran = true;
            else if (!word(&c, "False"))
                return file_error(err, errlen, path,
                                  "the .npy header's 'fortran_order' is not True "
                                  "or False");
        } else if (!strcmp(key, "shape")) {
            if (seen_shape)
                return file_error(err, errlen, path, "the .npy header names 'shape' twice");
            seen_shape = true;
            if (!eat(&c, '('))
                return file_error(err, errlen, path, "the .npy header's 'shape' is not a tuple");
            while (!eat(&c, ')')) {
                skip_space(&c);
                if (c.p >= c.end || *c.p < '0' || *c.p > '9')
                    return file_error(err, errlen, path,
                                      "the .npy header's 'shape' holds something other than "
                                      "non-negative integers");
                if (h->ndim == NPY_MAX_DIMS)
                    return file_error(err, errlen, path,
                                      "the .npy array has more than %d dimensions", NPY_MAX_DIMS);
                int64_t v = 0;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    int digit = *c.p++ - '0';
                    if (v > (INT64_MAX - digit) / 10)
                        return file_error(
                            err, errlen, path,
                            "dimension %d of the .npy header's shape overflows 64 bits",
                            h->ndim + 1);
                    v = v * 10 + digit;
                }
                if (c.p < c.end && *c.p == 'L') /* Python 2's longs, in old files */
                    c.p++;
                h->shape[h->ndim++] = v;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')'))
                        return file_error(
                            err, errlen, path,
                            "the .npy header's 'shape' is malformed (',' or ')' expected)");
                    break;
                }
            }
        } else {
            return file_error(err, errlen, path, "the .npy header has an unknown key '%s'", key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return file_error(err, errlen, path,
                                  "the .npy header's dict is malformed (',' or '}' expected)");
            break;
        }
    }
    skip_space(&c);
    if (c.p != c.end)
        return file_error(err, errlen, path, "the .npy header has text after its dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return file_error(err, errlen, path, "the .npy header lacks '%s'",
                          !seen_descr   ? "descr"
                          : !seen_order ? "fortran_order"
                                        : "shape");
    if (!parse_dtype(descr, &h->dtype)) {
        if (descr[0] == '>')
            return file_error(err, errlen, path,
                              "the array is big-endian ('%s'); save it little-endian, e.g. with "
                              "a.astype(a.dtype.newbyteorder('<'))",
                              descr);
        return file_error(err, errlen, path,
                          "dtype '%s' is not one this reader takes (uint8, float16, bfloat16, "
                          "float32 inputs; uint8, uint16, int32, int64 labels and tokens)",
                          descr);
    }
    if (fortran && h->ndim > 1)
        return file_error(err, errlen, path,
                          "the array is in Fortran order; save it in C order "
                          "(numpy.ascontiguousarray)");
    h->numel = 1;
    for (int i = 0; i < h->ndim; i++)
        if (__builtin_mul_overflow(h->numel, (uint64_t)h->shape[i], &h->numel))
            return file_error(err, errlen, path, "the .npy header's shape overflows 64 bits");
    if (__builtin_mul_overflow(h->numel, (uint64_t)npy_dtype_size(h->dtype), &h->nbytes) ||
        h->nbytes > (uint64_t)INT64_MAX - h->data_offset)
        return file_error(err, errlen, path, "the .npy header's shape overflows 64 bits of bytes");
    return true;
}

void npy_describe(const npy_header *h, char *out, size_t cap)
{
    size_t n = 0;
    n += (size_t)snprintf(out + n, cap - n, "[");
    for (int i = 0; i < h->ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? ", " : "", (long long)h->shape[i]);
    if (n < cap)
        snprintf(out + n, cap - n, "] %s", npy_dtype_name(h->dtype));
}

bool npy_open(const char *path, npy_array *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    /* Non-blocking, so a FIFO fails the regular-file check instead of waiting for a writer. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return file_error(err, errlen, path, "cannot open: %s", strerror(errno));
    struct stat st;
    bool ok = false;
    if (fstat(fd, &st) != 0) {
        file_error(err, errlen, path, "cannot stat: %s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        file_error(err, errlen, path, "not a regular file (%s)",
                   S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, device or socket");
        goto out;
    }
    unsigned char head[12 + NPY_HEADER_MAX];
    size_t want = (uint64_t)st.st_size < sizeof head ? (size_t)st.st_size : sizeof head, got = 0;
    while (got < want) {
        ssize_t r = pread(fd, head + got, want - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            file_error(err, errlen, path, "read error: %s", strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (!npy_parse_header(head, got, path, &a->h, err, errlen))
        goto out;
    uint64_t size = (uint64_t)st.st_size, end = a->h.data_offset + a->h.nbytes;
    char what[300];
    npy_describe(&a->h, what, sizeof what);
    if (size < end) {
        file_error(err, errlen, path,
                   "truncated: the header (%s) promises %llu bytes of data, the file holds %llu",
                   what, (unsigned long long)a->h.nbytes,
                   (unsigned long long)(size - a->h.data_offset));
        goto out;
    }
    if (size > end) {
        file_error(err, errlen, path,
                   "%llu bytes after the %llu bytes of data the header (%s) promises",
                   (unsigned long long)(size - end), (unsigned long long)a->h.nbytes, what);
        goto out;
    }
    if (size > SIZE_MAX) {
        file_error(err, errlen, path, "too large to map");
        goto out;
    }
    a->map_len = (size_t)size;
    a->map = mmap(NULL, a->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (a->map == MAP_FAILED) {
        a->map = NULL;
        file_error(err, errlen, path, "cannot map %llu bytes: %s", (unsigned long long)size,
                   strerror(errno));
        goto out;
    }
    a->data = (const unsigned char *)a->map + a->h.data_offset;
    ok = true;
out:
    close(fd);
    return ok;
}

void npy_close(npy_array *a)
{
    if (a->map)
        munmap(a->map, a->map_len);
    memset(a, 0, sizeof *a);
}
