/*
 * fuzz_npy.c: libFuzzer target for the .npy reader (runtime/npy.c).
 *
 * Any byte string must be either a header whose numbers are consistent (the rank within
 * its limit, the product of the shape and the byte count as stated, the data's offset
 * inside the input's header) or an error message naming the file: never a crash, a hang
 * or a sanitizer report. The same bytes written to a file must open exactly when the
 * header parses and the file holds exactly the data it promises (tried for every header
 * that parses), and then every byte of the data must lie inside the mapping.
 */
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char err[1400];
    npy_header h;
    bool ok = npy_parse_header(data, size, "fuzz.npy", &h, err, sizeof err);
    if (!ok && strncmp(err, "fuzz.npy: ", 10) != 0)
        abort(); /* every error names the file */
    if (!ok)
        return 0;
    {
        if (h.ndim < 0 || h.ndim > NPY_MAX_DIMS || h.data_offset > size ||
            h.data_offset > 12 + NPY_HEADER_MAX)
            abort();
        uint64_t n = 1;
        for (int i = 0; i < h.ndim; i++)
            if (h.shape[i] < 0 || __builtin_mul_overflow(n, (uint64_t)h.shape[i], &n))
                abort();
        if (n != h.numel || h.nbytes != n * npy_dtype_size(h.dtype))
            abort();
        char text[300];
        npy_describe(&h, text, sizeof text);
    }
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/fuzz-npy-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    npy_array a;
    bool opened = npy_open(path, &a, err, sizeof err);
    if (opened != (ok && h.data_offset + h.nbytes == size))
        abort();
    if (opened) {
        volatile unsigned char sum = 0;
        for (uint64_t i = 0; i < a.h.nbytes; i++)
            sum ^= a.data[i];
        (void)sum;
        npy_close(&a);
    } else if (strncmp(err, path, strlen(path)) != 0) {
        abort();
    }
    unlink(path);
    return 0;
}
