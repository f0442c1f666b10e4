/* weight_target.h: a tensor's target in a model's name mapping (its weights section, the
 * metadata of a safetensors file; docs/runtime.md, "Weights in and out"), as every side
 * reads it: the compiler's weights table (ir/weights.c), the runtime's --init and
 * --save-weights (weights.c) and `burstc export` (tools/cmd_export.c). "conv1.weight" is a
 * whole parameter, "attn.w_qkv@16" its rows from 16 on, a trailing "^T" the tensor
 * transposed. Static inline functions, as shape_rules.h: the compiler includes this header
 * without linking the runtime. Self-contained on purpose: C17 and the standard headers
 * below only. */
#ifndef BURSTRT_WEIGHT_TARGET_H
#define BURSTRT_WEIGHT_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* "attn.w_qkv@16^T" -> 10, the length of the parameter's name at the start of s
 * ("attn.w_qkv"), *row0 16 (-1: the whole parameter), *transposed. A row is '@' and
 * decimal digits after the last '.'; anything else is part of the name. */
static inline size_t st_parse_target(const char *s, int64_t *row0, bool *transposed)
{
    size_t n = strlen(s);
    *transposed = n > 2 && s[n - 2] == '^' && s[n - 1] == 'T';
    if (*transposed)
        n -= 2;
    *row0 = -1;
    for (size_t k = n; k-- > 0 && s[k] != '.';)
        if (s[k] == '@') {
            char *end;
            long long r = strtoll(s + k + 1, &end, 10);
            if (k + 1 < n && s[k + 1] >= '0' && s[k + 1] <= '9' && end == s + n) {
                *row0 = r;
                n = k;
            }
            break;
        }
    return n;
}

/* The shape of the tensor that target maps, from its parameter's [pndim]pshape: the whole
 * parameter, or its rows from the target's row on up to where the next row block of the
 * same parameter among targets[0..ntargets) starts (or to its end), then transposed where
 * the target says. Returns its number of dimensions. */
static inline int st_target_shape(const char *target, const char *const *targets, int ntargets,
                                  int pndim, const int64_t *pshape, int64_t *shape)
{
    int64_t row0, r;
    bool transposed, t;
    size_t n = st_parse_target(target, &row0, &transposed);
    memcpy(shape, pshape, sizeof *shape * (size_t)pndim);
    if (row0 >= 0) {
        int64_t end = pndim ? pshape[0] : 1;
        for (int k = 0; k < ntargets; k++)
            if (st_parse_target(targets[k], &r, &t) == n && !memcmp(targets[k], target, n) &&
                r > row0 && r < end)
                end = r;
        shape[0] = end - row0;
    }
    if (transposed && pndim == 2) {
        int64_t rows = shape[0];
        shape[0] = shape[1];
        shape[1] = rows;
    }
    return pndim;
}

#endif
