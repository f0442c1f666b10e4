/* shape_rules.h: the output-size rules of the sliding-window ops (conv2d, max and average
 * pooling) as static inline functions with overflow checks. The runtime's argument checks
 * (shapes.c) use them, and the compiler's shape inference can include this header without
 * linking the runtime, so that the plan and the kernels agree on every output extent.
 * Self-contained on purpose: C17 and the standard headers below only, no runtime types, no
 * MPI, nothing to link. */
#ifndef BURSTRT_SHAPE_RULES_H
#define BURSTRT_SHAPE_RULES_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    RT_WINDOW_OK,
    RT_WINDOW_BAD_ARGUMENT, /* input < 0, kernel, stride or dilation < 1, or pad < 0 */
    RT_WINDOW_TOO_LARGE,    /* the dilated window does not fit the padded input */
    RT_WINDOW_OVERFLOW,     /* an intermediate size does not fit in 64 bits */
} rt_window_status;

/* The output extent of a window of `kernel` taps `dilation` apart, moved by `stride` over an
 * input of `in` padded by `pad` on both sides: floor((in + 2 pad - dilation (kernel - 1) - 1)
 * / stride) + 1. In ceil mode (pooling) the division rounds up, and, as in PyTorch's
 * pooling_output_shape, a last window that would start in the right padding is dropped. */
static inline rt_window_status rt_window_extent(int64_t in, int64_t kernel, int64_t stride,
                                                int64_t pad, int64_t dilation, bool ceil_mode,
                                                int64_t *out)
{
    if (in < 0 || kernel < 1 || stride < 1 || dilation < 1 || pad < 0)
        return RT_WINDOW_BAD_ARGUMENT;
    int64_t span, padded, last;
    if (__builtin_mul_overflow(dilation, kernel - 1, &span) ||
        __builtin_add_overflow(span, 1, &span) || __builtin_mul_overflow(pad, 2, &padded) ||
        __builtin_add_overflow(in, padded, &padded))
        return RT_WINDOW_OVERFLOW;
    if (padded < span)
        return RT_WINDOW_TOO_LARGE;
    const int64_t room = padded - span; /* how far the window can move */
    int64_t steps = room / stride + (ceil_mode && room % stride != 0);
    /* In ceil mode the last window must start inside the image or its left padding. */
    if (ceil_mode && (__builtin_mul_overflow(steps, stride, &last) || last >= in + pad))
        steps--;
    *out = steps + 1;
    return RT_WINDOW_OK;
}

/* Pooling pads at most half a kernel (PyTorch's rule): a window that lies wholly in the
 * padding would have nothing to take the maximum or average of. */
static inline bool rt_pool_pad_ok(int64_t kernel, int64_t pad)
{
    return pad >= 0 && pad <= kernel / 2;
}

/* What a status means, for messages. */
static inline const char *rt_window_problem(rt_window_status s)
{
    switch (s) {
    case RT_WINDOW_OK: return "fits";
    case RT_WINDOW_BAD_ARGUMENT:
        return "kernel, stride and dilation must be positive and padding non-negative";
    case RT_WINDOW_TOO_LARGE: return "the window is larger than the padded input";
    case RT_WINDOW_OVERFLOW: return "the sizes overflow 64 bits";
    }
    return "unknown";
}

#endif
