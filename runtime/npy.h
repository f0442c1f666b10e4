/* npy.h: reading NumPy's .npy files, the arrays behind `--data npy:X.npy,Y.npy`
 * (docs/runtime.md, "Data").
 *
 * A file is the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), a little-endian
 * header length (2 bytes in version 1, 4 in versions 2 and 3), that many bytes of a Python
 * dict literal ({'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }),
 * then the array's bytes in C order. This module is self-contained (C and POSIX only), so
 * that its fuzz target compiles it alone. Errors are returned as text in the caller's
 * buffer, naming the file; nothing here exits.
 *
 * Reading checks everything before a byte of data is used: the header length is capped
 * (NPY_HEADER_MAX) and inside the file, the dict has exactly the three keys once each, the
 * dtype is one this reader converts (little-endian: u1, u2, i4, i8, f2, f4, and V2 as
 * bfloat16, which is how ml_dtypes' bfloat16 arrays are saved), the order is C, the rank
 * is at most NPY_MAX_DIMS, every size product is overflow-checked and the file holds
 * exactly the bytes the header promises. The data is memory-mapped read-only, so a rank
 * reads (pages in) only the rows it uses. */
#ifndef BURSTRT_NPY_H
#define BURSTRT_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS   32    /* NumPy's own limit (NPY_MAXDIMS) */
#define NPY_HEADER_MAX 65536 /* bytes of the dict; NumPy writes < 200 and reads 10,000 */

typedef enum npy_dtype { NPY_U8, NPY_U16, NPY_I32, NPY_I64, NPY_F16, NPY_BF16, NPY_F32 } npy_dtype;

/* "u8", "f32", ... and bytes per element. */
const char *npy_dtype_name(npy_dtype dt);
size_t npy_dtype_size(npy_dtype dt);

typedef struct npy_header {
    npy_dtype dtype;
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    uint64_t numel;       /* product of the shape (1 for a scalar) */
    uint64_t nbytes;      /* numel * the dtype's size */
    uint64_t data_offset; /* where the data begins: magic + length field + dict */
} npy_header;

/* Parses the header at the start of buf (len bytes: the whole file, or at least its
 * header). On failure returns false with "PATH: cause" in err. Does not look at the
 * data: the caller checks that data_offset + nbytes is the file's size. */
bool npy_parse_header(const unsigned char *buf, size_t len, const char *path, npy_header *h,
                      char *err, size_t errlen);

/* "[60000, 28, 28] u8", for messages. */
void npy_describe(const npy_header *h, char *out, size_t cap);

typedef struct npy_array {
    npy_header h;
    const unsigned char *data; /* h.nbytes bytes, in the mapping */
    void *map;
    size_t map_len;
} npy_array;

/* Opens path (a regular file: a FIFO or device is refused without blocking), checks the
 * header and the file's length, and maps it. False with "PATH: cause" in err. */
bool npy_open(const char *path, npy_array *a, char *err, size_t errlen);
void npy_close(npy_array *a);

#endif
