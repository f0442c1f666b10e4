/* safetensors.h: reading and writing safetensors files, the weight format of Hugging Face's
 * safetensors library and of PyTorch users (docs/runtime.md, "Weights in and out").
 *
 * A file is an 8-byte little-endian header length H, H bytes of JSON (an object whose keys
 * are tensor names, each {"dtype": "F32", "shape": [64, 3, 7, 7], "data_offsets": [B, E]},
 * and an optional "__metadata__" object of strings), then the tensors' raw little-endian
 * bytes; offsets count from the first byte after the header. This module is self-contained
 * (C and POSIX only, no other file of the runtime), so that both the runtime (--init,
 * --save-weights) and the compiler (`burstc import --weights`, `burstc export`) compile it:
 * the compiler never links the runtime. Errors are returned as text in the caller's buffer,
 * naming the file; nothing here exits.
 *
 * Reading checks everything before a byte of data is used: the header length is capped
 * (ST_HEADER_MAX) and inside the file, the header is JSON of the shape above (strings valid
 * UTF-8, no duplicate names, no unknown fields), dtypes are known, ranks at most
 * ST_MAX_DIMS, every size product is overflow-checked and equals its byte range, and the
 * ranges cover the data exactly once, without overlap, holes or trailing bytes (the rules
 * of the reference implementation). Writing goes to a temporary file in the same
 * directory, is synced and renamed into place, so a reader never sees half a file. */
#ifndef BURSTRT_SAFETENSORS_H
#define BURSTRT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weight_target.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_DIMS   16
#define ST_HEADER_MAX ((uint64_t)100 << 20) /* 100 MiB, the reference reader's cap */
#define ST_NAME_MAX   4096                  /* bytes of one tensor name or metadata string */

typedef enum st_dtype {
    ST_BOOL,
    ST_U8,
    ST_I8,
    ST_U16,
    ST_I16,
    ST_F16,
    ST_BF16,
    ST_U32,
    ST_I32,
    ST_F32,
    ST_U64,
    ST_I64,
    ST_F64,
    ST_NDTYPES
} st_dtype;

/* "F32", ... and bytes per element. */
const char *st_dtype_name(st_dtype dt);
size_t st_dtype_size(st_dtype dt);
/* The dtype called name; false when there is none. */
bool st_dtype_from_name(const char *name, st_dtype *dt);

typedef struct st_tensor {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end; /* byte range within the data */
    const void *data;    /* st_file: the bytes (unaligned in general); st_write: the source */
} st_tensor;

typedef struct st_meta {
    const char *key, *value;
} st_meta;

typedef struct st_file {
    int ntensors;
    st_tensor *tensors; /* in the header's order */
    int nmeta;
    st_meta *meta;
    uint64_t data_len;
    /* private */
    void *map;
    size_t map_len;
    char *strings; /* the names, decoded */
    int *sorted;   /* tensor indices sorted by name, for st_find */
} st_file;

/* Parses a whole file image (buf, len) into f; f's tensors point into buf, which must stay
 * alive while f is used. False, with the reason in err (prefixed by `path: `), on any
 * malformed input; f is then empty. */
bool st_parse(const void *buf, size_t len, const char *path, st_file *f, char *err, size_t errlen);
/* Maps the file at path read-only and parses it. */
bool st_open(const char *path, st_file *f, char *err, size_t errlen);
/* Frees what st_parse or st_open made (st_close of an empty st_file is fine). */
void st_close(st_file *f);
/* The tensor called name, or NULL (a binary search). */
const st_tensor *st_find(const st_file *f, const char *name);
/* Copies t's elements into out as float (F32, F16, BF16, F64); false for other dtypes. */
bool st_to_f32(const st_tensor *t, float *out);

/* A streaming writer: the header from the tensors' names, dtypes and shapes, then their
 * bytes in the same order (st_writer_put as many times as needed), then commit. */
typedef struct st_writer {
    const char *path;
    char *tmp;
    void *fp;
    int ntensors, next;
    const st_tensor *tensors;
    uint64_t want, have; /* bytes of the current tensor: its size, written so far */
    bool failed;
    char *err;
    size_t errlen;
} st_writer;

/* Starts the file: checks the tensors (names unique and non-empty, shapes' sizes
 * overflow-checked) and writes the header to path's temporary file. meta may be NULL. */
bool st_writer_begin(st_writer *w, const char *path, const st_tensor *t, int n, const st_meta *meta,
                     int nmeta, char *err, size_t errlen);
/* The next bytes of the tensors' data, in order. */
bool st_writer_put(st_writer *w, const void *bytes, size_t n);
/* Every tensor's bytes were put: sync, rename into place. False (temporary removed) if a
 * write failed or bytes are missing. */
bool st_writer_commit(st_writer *w);
/* Gives up: the temporary file is removed, path is untouched. */
void st_writer_abort(st_writer *w);
/* The whole file from tensors whose `data` holds their bytes. */
bool st_write(const char *path, const st_tensor *t, int n, const st_meta *meta, int nmeta,
              char *err, size_t errlen);

/* The bytes, in dtype, of a tensor of shape [ndim]shape cut from a parameter's float32
 * values p (rows of per_row elements): from row row0 on (row0 < 0: the start), the
 * tensor's [R, C] the parameter's [C, R] where transposed (a target's "@R" and "^T",
 * weight_target.h); what --save-weights and `burstc export` write. In malloc'd memory, NULL
 * when out of memory; the caller has checked that the tensor fits the parameter. */
void *st_from_param(const float *p, int64_t per_row, int64_t row0, bool transposed, st_dtype dtype,
                    int ndim, const int64_t *shape);

/* f32 <-> IEEE half and bfloat16, rounding to nearest even. */
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);
uint16_t st_f32_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif
