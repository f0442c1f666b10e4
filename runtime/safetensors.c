/* safetensors.c: the safetensors reader and writer (safetensors.h has the format and the
 * checks). The header's JSON is read by a parser of exactly the shape the format allows
 * (an object of tensor objects and one object of strings), so nothing nests deeper than
 * three levels and nothing is skipped unread: an unknown field is an error, as a reader
 * that ignored it could load a tensor wrongly. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads and writes tensor bytes as they are in memory: little-endian hosts only"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_NDTYPES] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},     [ST_U16] = {"U16", 2},
    [ST_I16] = {"I16", 2},   [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_U32] = {"U32", 4},
    [ST_I32] = {"I32", 4},   [ST_F32] = {"F32", 4}, [ST_U64] = {"U64", 8},   [ST_I64] = {"I64", 8},
    [ST_F64] = {"F64", 8},
};

const char *st_dtype_name(st_dtype dt)
{
    return (unsigned)dt < ST_NDTYPES ? dtypes[dt].name : "?";
}

size_t st_dtype_size(st_dtype dt)
{
    return (unsigned)dt < ST_NDTYPES ? dtypes[dt].size : 0;
}

bool st_dtype_from_name(const char *name, st_dtype *dt)
{
    for (int k = 0; k < ST_NDTYPES; k++)
        if (strcmp(dtypes[k].name, name) == 0) {
            *dt = (st_dtype)k;
            return true;
        }
    return false;
}

/* ---- 16-bit floats ------------------------------------------------------------------- */

float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0 && m == 0) {
        x = sign;
    } else if (e == 0) { /* subnormal: normalise the mantissa */
        e = 113;
        while (!(m & 0x400)) {
            m <<= 1;
            e--;
        }
        x = sign | (e << 23) | ((m & 0x3ff) << 13);
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);
    } else {
        x = sign | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t st_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t e = (x >> 23) & 0xff, m = x & 0x7fffff;
    if (e == 0xff)
        return (uint16_t)(sign | 0x7c00 | (m ? 0x200 | (m >> 13) : 0));
    int32_t E = (int32_t)e - 127 + 15;
    if (E >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (E <= 0) { /* a subnormal half, or zero */
        if (E < -10)
            return sign;
        m |= 0x800000;
        uint32_t shift = (uint32_t)(14 - E), h = m >> shift, rem = m & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)E << 10) | (m >> 13), rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is right, up to infinity */
    return (uint16_t)(sign | h);
}

float st_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t st_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* a NaN stays one */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

bool st_to_f32(const st_tensor *t, float *out)
{
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case ST_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case ST_F64: {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
            break;
        }
        case ST_F16:
        case ST_BF16: {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = t->dtype == ST_F16 ? st_f16_to_f32(h) : st_bf16_to_f32(h);
            break;
        }
        default: return false;
        }
    }
    return true;
}

/* ---- the header's JSON --------------------------------------------------------------- */

typedef struct parser {
    const char *s, *end, *start; /* the header */
    const char *path;
    char *err;
    size_t errlen;
    bool failed;
    char *out; /* the next free byte of the decoded strings */
} parser;

static void fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(parser *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    p->failed = true;
    if (!p->errlen)
        return;
    int n = snprintf(p->err, p->errlen, "%s: ", p->path);
    if (n < 0 || (size_t)n >= p->errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static void blanks(parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

/* Consumes c after blanks, or fails saying what was expected. */
static bool expect(parser *p, char c, const char *what)
{
    blanks(p);
    if (p->s < p->end && *p->s == c) {
        p->s++;
        return true;
    }
    fail(p, "header: expected %s at byte %ld of the header", what, (long)(p->s - p->start));
    return false;
}

static int hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static bool read_u4(parser *p, uint32_t *u)
{
    if (p->end - p->s < 4)
        return false;
    *u = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex(p->s[k]);
        if (h < 0)
            return false;
        *u = *u << 4 | (uint32_t)h;
    }
    p->s += 4;
    return true;
}

static void put_utf8(parser *p, uint32_t u)
{
    if (u < 0x80) {
        *p->out++ = (char)u;
    } else if (u < 0x800) {
        *p->out++ = (char)(0xc0 | u >> 6);
        *p->out++ = (char)(0x80 | (u & 0x3f));
    } else if (u < 0x10000) {
        *p->out++ = (char)(0xe0 | u >> 12);
        *p->out++ = (char)(0x80 | ((u >> 6) & 0x3f));
        *p->out++ = (char)(0x80 | (u & 0x3f));
    } else {
        *p->out++ = (char)(0xf0 | u >> 18);
        *p->out++ = (char)(0x80 | ((u >> 12) & 0x3f));
        *p->out++ = (char)(0x80 | ((u >> 6) & 0x3f));
        *p->out++ = (char)(0x80 | (u & 0x3f));
    }
}

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static int utf8_len(const unsigned char *s, ptrdiff_t n)
{
    if (s[0] < 0x80)
        return 1;
    int len = s[0] >= 0xc2 && s[0] <= 0xdf   ? 2
              : s[0] >= 0xe0 && s[0] <= 0xef ? 3
              : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                             : 0;
    if (!len || n < len)
        return 0;
    for (int k = 1; k < len; k++)
        if ((s[k] & 0xc0) != 0x80)
            return 0;
    /* overlong forms, UTF-16 surrogates, past U+10FFFF */
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0;
    return len;
}

/* A JSON string, decoded into the string buffer; NULL after an error. Decoded strings are
 * never longer than their source, so the buffer (the header's size plus a NUL per string)
 * cannot overflow. */
static const char *string(parser *p, const char *what)
{
    blanks(p);
    if (p->s >= p->end || *p->s != '"') {
        fail(p, "header: expected a string (%s)", what);
        return NULL;
    }
    p->s++;
    char *start = p->out;
    while (p->s < p->end && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s;
        if (c < 0x20) {
            fail(p, "header: a control character in a string (%s)", what);
            return NULL;
        }
        if (c != '\\') {
            int n = utf8_len((const unsigned char *)p->s, p->end - p->s);
            if (!n) {
                fail(p, "header: a string (%s) is not valid UTF-8", what);
                return NULL;
            }
            memcpy(p->out, p->s, (size_t)n);
            p->out += n;
            p->s += n;
            continue;
        }
        if (++p->s >= p->end)
            break;
        char e = *p->s++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            *p->out++ = to[simple - "\"\\/bfnrt"];
            continue;
        }
        uint32_t u, lo;
        if (e != 'u' || !read_u4(p, &u)) {
            fail(p, "header: a bad escape in a string (%s)", what);
            return NULL;
        }
        if (u >= 0xd800 && u <= 0xdbff) {
            if (p->end - p->s < 2 || p->s[0] != '\\' || p->s[1] != 'u' ||
                (p->s += 2, !read_u4(p, &lo)) || lo < 0xdc00 || lo > 0xdfff) {
                fail(p, "header: a lone UTF-16 surrogate in a string (%s)", what);
                return NULL;
            }
            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        } else if (u >= 0xdc00 && u <= 0xdfff) {
            fail(p, "header: a lone UTF-16 surrogate in a string (%s)", what);
            return NULL;
        }
        if (u == 0) {
            fail(p, "header: a NUL character in a string (%s)", what);
            return NULL;
        }
        put_utf8(p, u);
    }
    if (p->s >= p->end) {
        fail(p, "header: a string (%s) does not end", what);
        return NULL;
    }
    p->s++;
    if (p->out - start > ST_NAME_MAX) {
        fail(p, "header: a string (%s) of more than %d bytes", what, ST_NAME_MAX);
        return NULL;
    }
    *p->out++ = 0;
    return start;
}

/* A non-negative JSON integer (no sign, fraction or exponent) up to max. */
static bool integer(parser *p, uint64_t max, uint64_t *v, const char *what)
{
    blanks(p);
    if (p->s >= p->end || *p->s < '0' || *p->s > '9') {
        fail(p, "header: %s: expected a non-negative integer", what);
        return false;
    }
    uint64_t n = 0;
    const char *start = p->s;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9') {
        unsigned d = (unsigned)(*p->s - '0');
        if (n > (max - d) / 10) {
            fail(p, "header: %s: an integer larger than %llu", what, (unsigned long long)max);
            return false;
        }
        n = n * 10 + d;
        p->s++;
    }
    if (p->s < p->end && (*p->s == '.' || *p->s == 'e' || *p->s == 'E')) {
        fail(p, "header: %s: expected an integer", what);
        return false;
    }
    if (*start == '0' && p->s - start > 1) {
        fail(p, "header: %s: a number with a leading zero", what);
        return false;
    }
    *v = n;
    return true;
}

/* After an element of an array or object: true when another follows (a comma), false at
 * the closing bracket (consumed) or after an error. */
static bool more(parser *p, char close, const char *what)
{
    blanks(p);
    if (p->s < p->end && *p->s == ',') {
        p->s++;
        return true;
    }
    if (p->s < p->end && *p->s == close) {
        p->s++;
        return false;
    }
    fail(p, "header: expected ',' or '%c' in %s", close, what);
    return false;
}

static bool peek(parser *p, char c)
{
    blanks(p);
    if (p->s < p->end && *p->s == c) {
        p->s++;
        return true;
    }
    return false;
}

/* [d0, d1, ...] of at most ST_MAX_DIMS dimensions, each at most 2^62. */
static void shape(parser *p, st_tensor *t)
{
    if (!expect(p, '[', "'[' (shape)"))
        return;
    t->ndim = 0;
    if (peek(p, ']'))
        return;
    do {
        uint64_t d;
        if (!integer(p, (uint64_t)1 << 62, &d, t->name))
            return;
        if (t->ndim == ST_MAX_DIMS) {
            fail(p, "header: '%s' has more than %d dimensions", t->name, ST_MAX_DIMS);
            return;
        }
        t->shape[t->ndim++] = (int64_t)d;
    } while (more(p, ']', "a shape"));
}

static void offsets(parser *p, st_tensor *t)
{
    uint64_t v[2];
    if (!expect(p, '[', "'[' (data_offsets)") || !integer(p, UINT64_MAX, &v[0], t->name) ||
        !expect(p, ',', "',' between the two data_offsets") ||
        !integer(p, UINT64_MAX, &v[1], t->name) || !expect(p, ']', "']' after two data_offsets"))
        return;
    t->begin = v[0];
    t->end = v[1];
}

enum { HAVE_DTYPE = 1, HAVE_SHAPE = 2, HAVE_OFFSETS = 4 };

/* {"dtype": ..., "shape": ..., "data_offsets": ...}, each field once. */
static void tensor_info(parser *p, st_tensor *t)
{
    int have = 0;
    if (!expect(p, '{', "'{' (a tensor's fields)"))
        return;
    if (!peek(p, '}'))
        do {
            const char *key = string(p, "a field name");
            if (!key || !expect(p, ':', "':'"))
                return;
            int bit = strcmp(key, "dtype") == 0          ? HAVE_DTYPE
                      : strcmp(key, "shape") == 0        ? HAVE_SHAPE
                      : strcmp(key, "data_offsets") == 0 ? HAVE_OFFSETS
                                                         : 0;
            if (!bit) {
                fail(p, "header: '%s' has an unknown field '%s'", t->name, key);
                return;
            }
            if (have & bit) {
                fail(p, "header: '%s' has field '%s' twice", t->name, key);
                return;
            }
            have |= bit;
            p->out = (char *)key; /* the key's bytes are not kept */
            if (bit == HAVE_DTYPE) {
                const char *dt = string(p, "a dtype");
                if (!dt)
                    return;
                if (!st_dtype_from_name(dt, &t->dtype)) {
                    fail(p,
                         "'%s' has dtype '%s', which is not one of BOOL, U8, I8, U16, I16, "
                         "F16, BF16, U32, I32, F32, U64, I64, F64",
                         t->name, dt);
                    return;
                }
                p->out = (char *)dt;
            } else if (bit == HAVE_SHAPE) {
                shape(p, t);
            } else {
                offsets(p, t);
            }
            if (p->failed)
                return;
        } while (more(p, '}', "a tensor's fields"));
    if (p->failed)
        return;
    if (have != (HAVE_DTYPE | HAVE_SHAPE | HAVE_OFFSETS))
        fail(p, "header: '%s' lacks its %s", t->name,
             !(have & HAVE_DTYPE)   ? "dtype"
             : !(have & HAVE_SHAPE) ? "shape"
                                    : "data_offsets");
}

static void metadata(parser *p, st_file *f)
{
    if (!expect(p, '{', "'{' (__metadata__)") || peek(p, '}'))
        return;
    int cap = 0;
    do {
        const char *k = string(p, "a metadata key");
        if (!k || !expect(p, ':', "':'"))
            return;
        const char *v = string(p, "a metadata value");
        if (!v)
            return;
        if (f->nmeta == cap) {
            cap = cap ? 2 * cap : 8;
            st_meta *m = realloc(f->meta, (size_t)cap * sizeof *m);
            if (!m) {
                fail(p, "out of memory");
                return;
            }
            f->meta = m;
        }
        f->meta[f->nmeta++] = (st_meta){k, v};
    } while (more(p, '}', "__metadata__"));
}

/* ---- reading ------------------------------------------------------------------------- */

static const st_tensor *sort_base;

static int by_name(const void *a, const void *b)
{
    return strcmp(sort_base[*(const int *)a].name, sort_base[*(const int *)b].name);
}

static int by_offset(const void *a, const void *b)
{
    const st_tensor *x = &sort_base[*(const int *)a], *y = &sort_base[*(const int *)b];
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void empty(st_file *f)
{
    free(f->tensors);
    free(f->meta);
    free(f->strings);
    free(f->sorted);
    if (f->map)
        munmap(f->map, f->map_len);
    memset(f, 0, sizeof *f);
}

void st_close(st_file *f)
{
    empty(f);
}

/* Sizes and ranges: each tensor's bytes are numel * dtype size, overflow-checked, inside
 * the data; together they cover it exactly once. */
static void check_ranges(parser *p, st_file *f)
{
    for (int k = 0; k < f->ntensors && !p->failed; k++) {
        st_tensor *t = &f->tensors[k];
        uint64_t n = 1;
        for (int d = 0; d < t->ndim; d++)
            if (__builtin_mul_overflow(n, (uint64_t)t->shape[d], &n) || n > (uint64_t)INT64_MAX)
                fail(p, "'%s': its shape's size overflows", t->name);
        uint64_t bytes;
        if (p->failed)
            break;
        if (__builtin_mul_overflow(n, (uint64_t)st_dtype_size(t->dtype), &bytes))
            fail(p, "'%s': its size in bytes overflows", t->name);
        else if (t->begin > t->end || t->end > f->data_len)
            fail(p, "'%s': data_offsets [%llu, %llu] are not inside the %llu bytes of data",
                 t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)f->data_len);
        else if (t->end - t->begin != bytes)
            fail(p, "'%s': data_offsets [%llu, %llu] hold %llu bytes, its %s shape needs %llu",
                 t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)(t->end - t->begin), st_dtype_name(t->dtype),
                 (unsigned long long)bytes);
        t->numel = (int64_t)n;
    }
    if (p->failed)
        return;
    int *order = malloc(((size_t)f->ntensors + 1) * sizeof *order);
    if (!order) {
        fail(p, "out of memory");
        return;
    }
    for (int k = 0; k < f->ntensors; k++)
        order[k] = k;
    sort_base = f->tensors;
    qsort(order, (size_t)f->ntensors, sizeof *order, by_offset);
    uint64_t at = 0;
    const char *prev = NULL;
    for (int k = 0; k < f->ntensors && !p->failed; k++) {
        const st_tensor *t = &f->tensors[order[k]];
        if (t->begin < at)
            fail(p, "'%s' and '%s' overlap (data_offsets [%llu, ...] before %llu)", prev, t->name,
                 (unsigned long long)t->begin, (unsigned long long)at);
        else if (t->begin > at)
            fail(p, "bytes %llu to %llu of the data belong to no tensor (before '%s')",
                 (unsigned long long)at, (unsigned long long)t->begin, t->name);
        at = t->end;
        prev = t->name;
    }
    if (!p->failed && at != f->data_len)
        fail(p, "%llu bytes after the last tensor belong to no tensor",
             (unsigned long long)(f->data_len - at));
    free(order);
}

bool st_parse(const void *buf, size_t len, const char *path, st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    parser p = {.path = path, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    const unsigned char *b = buf;
    if (len < 8) {
        fail(&p, "%zu bytes: too short for a safetensors file (an 8-byte header length)", len);
        return false;
    }
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--)
        hlen = hlen << 8 | b[k];
    if (hlen > ST_HEADER_MAX) {
        fail(&p,
             "header length %llu is more than the %llu bytes a header may have (not a "
             "safetensors file?)",
             (unsigned long long)hlen, (unsigned long long)ST_HEADER_MAX);
        return false;
    }
    if (hlen > len - 8) {
        fail(&p, "header length %llu goes past the end of the file (%zu bytes): truncated?",
             (unsigned long long)hlen, len);
        return false;
    }
    if (hlen < 2) {
        fail(&p, "header length %llu: too short for a JSON object", (unsigned long long)hlen);
        return false;
    }
    const char *h = (const char *)b + 8;
    p.s = p.start = h;
    p.end = h + hlen;
    f->data_len = len - 8 - hlen;
    /* Every string decodes to at most its source's bytes plus a NUL. */
    f->strings = malloc((size_t)hlen + 1);
    if (!f->strings) {
        fail(&p, "out of memory");
        return false;
    }
    p.out = f->strings;
    int cap = 0;
    bool meta = false;
    if (expect(&p, '{', "'{' at the start of the header") && !peek(&p, '}'))
        do {
            const char *name = string(&p, "a tensor name");
            if (!name || !expect(&p, ':', "':' after a tensor name"))
                break;
            if (strcmp(name, "__metadata__") == 0) {
                if (meta) {
                    fail(&p, "header: __metadata__ twice");
                    break;
                }
                meta = true;
                p.out = (char *)name;
                metadata(&p, f);
                continue;
            }
            if (f->ntensors == cap) {
                if (cap > INT32_MAX / 4) {
                    fail(&p, "header: too many tensors");
                    break;
                }
                cap = cap ? 2 * cap : 16;
                st_tensor *t = realloc(f->tensors, (size_t)cap * sizeof *t);
                if (!t) {
                    fail(&p, "out of memory");
                    break;
                }
                f->tensors = t;
            }
            st_tensor *t = &f->tensors[f->ntensors++];
            memset(t, 0, sizeof *t);
            t->name = name;
            tensor_info(&p, t);
        } while (!p.failed && more(&p, '}', "the header"));
    if (!p.failed) {
        blanks(&p);
        if (p.s != p.end)
            fail(&p, "header: bytes after the header's JSON object (at byte %ld)", (long)(p.s - h));
    }
    if (!p.failed) {
        f->sorted = malloc(((size_t)f->ntensors + 1) * sizeof *f->sorted);
        if (!f->sorted)
            fail(&p, "out of memory");
    }
    if (!p.failed) {
        for (int k = 0; k < f->ntensors; k++)
            f->sorted[k] = k;
        sort_base = f->tensors;
        qsort(f->sorted, (size_t)f->ntensors, sizeof *f->sorted, by_name);
        for (int k = 1; k < f->ntensors && !p.failed; k++)
            if (strcmp(f->tensors[f->sorted[k]].name, f->tensors[f->sorted[k - 1]].name) == 0)
                fail(&p, "header: tensor '%s' twice", f->tensors[f->sorted[k]].name);
    }
    if (!p.failed)
        check_ranges(&p, f);
    if (p.failed) {
        empty(f);
        return false;
    }
    const unsigned char *data = b + 8 + hlen;
    for (int k = 0; k < f->ntensors; k++)
        f->tensors[k].data = data + f->tensors[k].begin;
    return true;
}

bool st_open(const char *path, st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return false;
    }
    size_t len = (size_t)st.st_size;
    void *map = NULL;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            snprintf(err, errlen, "%s: cannot map it: %s", path, strerror(errno));
            close(fd);
            return false;
        }
    }
    close(fd);
    if (!st_parse(map ? map : "", len, path, f, err, errlen)) {
        if (map)
            munmap(map, len);
        return false;
    }
    f->map = map;
    f->map_len = len;
    return true;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    int lo = 0, hi = f->ntensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const st_tensor *t = &f->tensors[f->sorted[mid]];
        int c = strcmp(name, t->name);
        if (c == 0)
            return t;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- writing ------------------------------------------------------------------------- */

/* The bytes of a tensor from its shape (checked in st_writer_begin). */
static uint64_t bytes_of(const st_tensor *t)
{
    uint64_t e = 1;
    for (int d = 0; d < t->ndim; d++)
        e *= (uint64_t)t->shape[d];
    return e * st_dtype_size(t->dtype);
}

typedef struct buf {
    char *s;
    size_t n, cap;
    bool oom;
} buf;

static void add(buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->oom = true;
            return;
        }
        b->s = t;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void addf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(buf *b, const char *fmt, ...)
{
    char t[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    add(b, t, n > 0 ? (size_t)n : 0);
}

static void add_string(buf *b, const char *s)
{
    add(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            add(b, e, 2);
        } else if (c < 0x20) {
            addf(b, "\\u%04x", c);
        } else {
            add(b, s, 1);
        }
    }
    add(b, "\"", 1);
}

static bool wfail(st_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool wfail(st_writer *w, const char *fmt, ...)
{
    if (!w->failed && w->errlen) {
        int n = snprintf(w->err, w->errlen, "%s: ", w->path);
        va_list ap;
        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < w->errlen)
            vsnprintf(w->err + n, w->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    w->failed = true;
    return false;
}

static bool valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        int k = utf8_len((const unsigned char *)s + i, (ptrdiff_t)(n - i));
        if (!k)
            return false;
        i += (size_t)k;
    }
    return true;
}

bool st_writer_begin(st_writer *w, const char *path, const st_tensor *t, int n, const st_meta *meta,
                     int nmeta, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->path = path;
    w->err = err;
    w->errlen = errlen;
    w->tensors = t;
    w->ntensors = n;
    if (errlen)
        err[0] = 0;
    buf h = {0};
    add(&h, "{", 1);
    if (nmeta > 0) {
        add(&h, "\"__metadata__\":{", 16);
        for (int k = 0; k < nmeta; k++) {
            if (!valid_utf8(meta[k].key) || !valid_utf8(meta[k].value)) {
                free(h.s);
                return wfail(w, "metadata '%s' is not valid UTF-8", meta[k].key);
            }
            if (k)
                add(&h, ",", 1);
            add_string(&h, meta[k].key);
            add(&h, ":", 1);
            add_string(&h, meta[k].value);
        }
        add(&h, "}", 1);
    }
    uint64_t at = 0;
    for (int k = 0; k < n; k++) {
        const st_tensor *x = &t[k];
        uint64_t e = 1, bytes;
        bool bad = !x->name[0] || strlen(x->name) > ST_NAME_MAX || !valid_utf8(x->name) ||
                   strcmp(x->name, "__metadata__") == 0 || (unsigned)x->dtype >= ST_NDTYPES ||
                   x->ndim < 0 || x->ndim > ST_MAX_DIMS;
        for (int d = 0; !bad && d < x->ndim; d++)
            bad = x->shape[d] < 0 || __builtin_mul_overflow(e, (uint64_t)x->shape[d], &e) ||
                  e > (uint64_t)INT64_MAX;
        if (bad || __builtin_mul_overflow(e, (uint64_t)st_dtype_size(x->dtype), &bytes) ||
            __builtin_add_overflow(at, bytes, &bytes)) {
            free(h.s);
            return wfail(w, "tensor %d ('%.200s'): a bad name, dtype or shape", k, x->name);
        }
        add(&h, nmeta > 0 || k ? "," : "", nmeta > 0 || k ? 1 : 0);
        add_string(&h, x->name);
        addf(&h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(x->dtype));
        for (int d = 0; d < x->ndim; d++)
            addf(&h, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        addf(&h, "],\"data_offsets\":[%llu,", (unsigned long long)at);
        addf(&h, "%llu]}", (unsigned long long)bytes);
        at = bytes;
    }
    add(&h, "}", 1);
    /* Padded with blanks to a multiple of 8, so that the data is aligned in a mapping. */
    while (!h.oom && h.n % 8)
        add(&h, " ", 1);
    if (h.oom) {
        free(h.s);
        return wfail(w, "out of memory");
    }
    if (h.n > ST_HEADER_MAX) {
        free(h.s);
        return wfail(w, "the header would be %zu bytes, more than the %llu a reader accepts", h.n,
                     (unsigned long long)ST_HEADER_MAX);
    }
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    if (!order) {
        free(h.s);
        return wfail(w, "out of memory");
    }
    for (int k = 0; k < n; k++)
        order[k] = k;
    sort_base = t;
    qsort(order, (size_t)n, sizeof *order, by_name);
    for (int k = 1; k < n; k++)
        if (strcmp(t[order[k]].name, t[order[k - 1]].name) == 0) {
            wfail(w, "tensor '%s' twice", t[order[k]].name);
            free(order);
            free(h.s);
            return false;
        }
    free(order);
    size_t plen = strlen(path);
    w->tmp = malloc(plen + 16);
    if (!w->tmp) {
        free(h.s);
        return wfail(w, "out of memory");
    }
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp-XXXXXX", 12);
    int fd = mkstemp(w->tmp);
    if (fd < 0) {
        free(h.s);
        wfail(w, "cannot create %s: %s", w->tmp, strerror(errno));
        free(w->tmp);
        w->tmp = NULL;
        return false;
    }
    fchmod(fd, 0644);
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        close(fd);
        free(h.s);
        wfail(w, "cannot write %s: %s", w->tmp, strerror(errno));
        st_writer_abort(w);
        return false;
    }
    w->fp = fp;
    unsigned char len8[8];
    for (int k = 0; k < 8; k++)
        len8[k] = (unsigned char)((uint64_t)h.n >> (8 * k));
    if (fwrite(len8, 1, 8, fp) != 8 || fwrite(h.s, 1, h.n, fp) != h.n) {
        free(h.s);
        wfail(w, "cannot write %s: %s", w->tmp, strerror(errno));
        st_writer_abort(w);
        return false;
    }
    free(h.s);
    w->next = 0;
    w->have = 0;
    return true;
}

bool st_writer_put(st_writer *w, const void *bytes, size_t n)
{
    if (w->failed)
        return false;
    const unsigned char *b = bytes;
    while (n > 0) {
        while (w->next < w->ntensors && w->have == (w->want = bytes_of(&w->tensors[w->next]))) {
            w->next++;
            w->have = 0;
        }
        if (w->next >= w->ntensors)
            return wfail(w, "more bytes than the tensors hold");
        uint64_t room = w->want - w->have;
        size_t k = n < room ? n : (size_t)room;
        if (fwrite(b, 1, k, w->fp) != k)
            return wfail(w, "cannot write %s: %s", w->tmp, strerror(errno));
        w->have += k;
        b += k;
        n -= k;
    }
    return true;
}

static void sync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        strcpy(dir, ".");
    else if ((size_t)(slash - path) < sizeof dir) {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash == path ? 1 : slash - path] = 0;
    } else
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

bool st_writer_commit(st_writer *w)
{
    if (!w->failed) {
        while (w->next < w->ntensors && w->have == bytes_of(&w->tensors[w->next])) {
            w->next++;
            w->have = 0;
        }
        if (w->next < w->ntensors)
            wfail(w, "tensor '%s' is missing bytes", w->tensors[w->next].name);
    }
    FILE *fp = w->fp;
    w->fp = NULL;
    if (!w->failed && (fflush(fp) != 0 || fsync(fileno(fp)) != 0)) {
        wfail(w, "cannot write %s: %s", w->tmp, strerror(errno));
    }
    if (fp && fclose(fp) != 0 && !w->failed)
        wfail(w, "cannot write %s: %s", w->tmp, strerror(errno));
    if (!w->failed && rename(w->tmp, w->path) != 0)
        wfail(w, "cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
    if (w->failed) {
        unlink(w->tmp);
    } else {
        sync_dir_of(w->path);
    }
    free(w->tmp);
    w->tmp = NULL;
    return !w->failed;
}

void st_writer_abort(st_writer *w)
{
    if (w->fp)
        fclose(w->fp);
    w->fp = NULL;
    if (w->tmp) {
        unlink(w->tmp);
        free(w->tmp);
        w->tmp = NULL;
    }
    w->failed = true;
}

bool st_write(const char *path, const st_tensor *t, int n, const st_meta *meta, int nmeta,
              char *err, size_t errlen)
{
    st_writer w;
    if (!st_writer_begin(&w, path, t, n, meta, nmeta, err, errlen))
        return false;
    for (int k = 0; k < n; k++)
        if (!st_writer_put(&w, t[k].data, (size_t)bytes_of(&t[k]))) {
            st_writer_abort(&w);
            return false;
        }
    return st_writer_commit(&w);
}

void *st_from_param(const float *p, int64_t per_row, int64_t row0, bool transposed, st_dtype dtype,
                    int ndim, const int64_t *shape)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    const float *src = p + (row0 > 0 ? row0 * per_row : 0);
    float *f = malloc((size_t)(numel ? numel : 1) * 4);
    if (!f)
        return NULL;
    if (transposed) {
        int64_t R = shape[0], C = shape[1]; /* the parameter's is [C, R] */
        for (int64_t j = 0; j < R; j++)
            for (int64_t i = 0; i < C; i++)
                f[j * C + i] = src[i * R + j];
    } else {
        memcpy(f, src, (size_t)numel * 4);
    }
    if (dtype == ST_F32)
        return f;
    size_t es = st_dtype_size(dtype);
    uint8_t *out = malloc((size_t)(numel ? numel : 1) * es);
    for (int64_t i = 0; out && i < numel; i++) {
        if (dtype == ST_F16) {
            uint16_t h = st_f32_to_f16(f[i]);
            memcpy(out + i * 2, &h, 2);
        } else if (dtype == ST_BF16) {
            uint16_t h = st_f32_to_bf16(f[i]);
            memcpy(out + i * 2, &h, 2);
        } else {
            double d = f[i];
            memcpy(out + i * 8, &d, 8);
        }
    }
    free(f);
    return out;
}
