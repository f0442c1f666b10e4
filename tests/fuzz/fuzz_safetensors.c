/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors reader (runtime/safetensors.c).
 *
 * Any byte string must be either a file whose every tensor lies inside the input, or an
 * error message naming the file: never a crash, a hang or a sanitizer report. An accepted
 * file must also find each of its tensors by name, convert its float tensors, and write
 * out and read back to the same names, dtypes, shapes and bytes.
 */
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char err[512];
    st_file f;
    if (!st_parse(data, size, "fuzz.safetensors", &f, err, sizeof err)) {
        if (strncmp(err, "fuzz.safetensors: ", 18) != 0)
            abort(); /* every error names the file */
        return 0;
    }
    const unsigned char *end = data + size;
    for (int k = 0; k < f.ntensors; k++) {
        const st_tensor *t = &f.tensors[k];
        const unsigned char *p = t->data;
        if (p < data || p > end || (uint64_t)(end - p) < t->end - t->begin)
            abort();
        if (st_find(&f, t->name) != t)
            abort();
        if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64) {
            float *out = malloc((size_t)t->numel * sizeof *out + 1);
            if (!out || !st_to_f32(t, out))
                abort();
            free(out);
        }
    }
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/fuzz-safetensors-%d", (int)getpid());
    if (st_write(path, f.tensors, f.ntensors, f.meta, f.nmeta, err, sizeof err)) {
        st_file g;
        if (!st_open(path, &g, err, sizeof err) || g.ntensors != f.ntensors || g.nmeta != f.nmeta)
            abort();
        for (int k = 0; k < f.ntensors; k++) {
            const st_tensor *a = &f.tensors[k], *b = &g.tensors[k];
            if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim ||
                a->numel != b->numel || memcmp(a->data, b->data, (size_t)(a->end - a->begin)) != 0)
                abort();
        }
        st_close(&g);
        unlink(path);
    }
    st_close(&f);
    return 0;
}
