/* test_cuda_graphs.c: CUDA graph segments (rt_graph_begin/rt_graph_end) replay the
 * right work. A segment computes dropout(relu(linear(x))), whose dropout mask depends
 * on the step; the first run is eager, the second captured, the rest replayed. Every
 * step's output must equal an eager computation of the same step outside any segment,
 * which fails if a replay kept the step of the capture, and the segment must have been
 * replayed STEPS - 2 times. Skips (77) without a GPU. */
#include "burstrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rt_cuda_visible_devices(void);
bool rt_graph_begin(int segment);
void rt_graph_end(int segment);
void rt_tensor_write(rt_tensor *t, const void *host);
void rt_tensor_read(const rt_tensor *t, void *host);

enum { N = 8, IN = 32, OUT = 48, STEPS = 6 };

static void body(const rt_tensor *x, const rt_tensor *w, rt_tensor *h, rt_tensor *y, int64_t step)
{
    rt_linear_fwd(x, w, NULL, h);
    rt_relu_fwd(h, h);
    rt_dropout_fwd(h, 0.5f, 11, step, 3, 0, y);
}

int main(int argc, char **argv)
{
    if (rt_cuda_visible_devices() == 0) {
        printf("no GPU visible: skipped\n");
        return 77;
    }
    rt_init(&argc, &argv, "test_cuda_graphs");
    rt_pool *P = rt_pool_new();
    rt_tensor *x = rt_tensor_new(P, RT_F32, 2, (int64_t[]){N, IN});
    rt_tensor *w = rt_tensor_new(P, RT_F32, 2, (int64_t[]){OUT, IN});
    rt_tensor *h = rt_tensor_new(P, RT_F32, 2, (int64_t[]){N, OUT});
    rt_tensor *y = rt_tensor_new(P, RT_F32, 2, (int64_t[]){N, OUT});
    rt_tensor *y2 = rt_tensor_new(P, RT_F32, 2, (int64_t[]){N, OUT});
    rt_init_uniform(x, 1.0f, 1, 1, 0);
    rt_init_uniform(w, 0.5f, 1, 2, 0);
    static float a[N * OUT], b[N * OUT];
    int failures = 0, replays = 0;
    for (int64_t s = 0; s < STEPS; s++) {
        rt_step_begin(s);
        if (rt_graph_begin(0))
            body(x, w, h, y, s);
        else
            replays++;
        rt_graph_end(0);
        body(x, w, h, y2, s);
        rt_step_end(s);
        rt_tensor_read(y, a);
        rt_tensor_read(y2, b);
        if (memcmp(a, b, sizeof a) != 0) {
            printf("FAIL step %lld: graph output differs from eager output\n", (long long)s);
            failures++;
        }
    }
    if (replays != STEPS - 2) {
        printf("FAIL: %d replays, expected %d (eager, capture, then replays)\n", replays,
               STEPS - 2);
        failures++;
    }
    rt_pool_free(P);
    rt_finalize();
    if (!failures)
        printf("test_cuda_graphs: %d replays equal eager runs\n", replays);
    return failures ? 1 : 0;
}
