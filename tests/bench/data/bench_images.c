/* bench_images.c: images/s of the runtime's training transform (decode, RandomResizedCrop
 * to H x W, flip, normalise) over an ImageFolder, for tests/bench/data/image_transform.py,
 * which runs torchvision's beside it. With WORKERS 0, img_sample on this thread; with
 * WORKERS N, the runtime's loader (runtime/loader.c: N decoding threads, batches of BATCH
 * in a shuffled order, the next two announced when one is handed over, as data.c does).
 *
 *   bench_images DIR H W ROUNDS [WORKERS [BATCH]]   prints per round: "images SECONDS" */
#include "burstrt.h"
#include "image.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    img_folder f;
    img_worker *w;
    int h, wd;
} bench;

static const float mean[3] = {0.485f, 0.456f, 0.406f}, std_[3] = {0.229f, 0.224f, 0.225f};

static bool decode(void *ctx, int k, uint64_t stream, int64_t idx, int64_t round, float *out,
                   char *err, size_t errlen)
{
    bench *b = ctx;
    (void)stream;
    float u[IMG_DRAWS];
    for (int i = 0; i < IMG_DRAWS; i++)
        u[i] = rt_rand_uniform(1, 0x1a6e, (uint64_t)round, (uint64_t)idx, (uint64_t)i);
    return img_sample(&b->w[k], b->f.paths[idx], 3, b->h, b->wd, u, mean, std_, out, NULL, err,
                      errlen);
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7) {
        fprintf(stderr, "usage: bench_images DIR H W ROUNDS [WORKERS [BATCH]]\n");
        return 2;
    }
    bench b = {.h = atoi(argv[2]), .wd = atoi(argv[3])};
    int rounds = atoi(argv[4]), workers = argc > 5 ? atoi(argv[5]) : 0;
    int64_t batch = argc > 6 ? atoi(argv[6]) : 32;
    char err[RT_LOADER_ERR];
    if (!img_folder_scan(argv[1], &b.f, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int nw = workers > 0 ? workers : 1;
    b.w = calloc((size_t)nw, sizeof *b.w);
    for (int k = 0; k < nw; k++) {
        img_worker_init(&b.w[k]);
        b.w[k].full_scale = getenv("BENCH_FULL_SCALE") != NULL; /* no reduced-scale decoding */
    }
    int64_t row = (int64_t)3 * b.h * b.wd, n = b.f.n;
    float *out = malloc((size_t)(row * batch) * sizeof *out);
    int64_t *idx = malloc((size_t)(n * 2) * sizeof *idx), *epoch = idx + n;
    rt_loader *l = workers > 0 ? rt_loader_new(workers, row, decode, &b) : NULL;
    for (int r = 0; r < rounds; r++) {
        /* A shuffled pass, as DataLoader's shuffle=True. */
        for (int64_t i = 0; i < n; i++) {
            idx[i] = i;
            epoch[i] = r;
        }
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(rt_hash64((uint64_t)r * 1000003u + (uint64_t)i) %
                                  (uint64_t)(i + 1)),
                    t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
        double t0 = rt_now();
        for (int64_t g = 0; g < n; g += batch) {
            int64_t cnt = n - g < batch ? n - g : batch, bad;
            if (l) {
                if (rt_loader_get(l, 0, g, cnt, idx + g, epoch + g, out, &bad, err, sizeof err)) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
                for (int64_t a = g + batch; a < n && a <= g + RT_LOADER_AHEAD * batch; a += batch)
                    rt_loader_prefetch(l, 0, a, n - a < batch ? n - a : batch, idx + a, epoch + a);
                continue;
            }
            for (int64_t i = 0; i < cnt; i++)
                if (!decode(&b, 0, 0, idx[g + i], r, out + i * row, err, sizeof err)) {
                    fprintf(stderr, "%s\n", err);
                    return 1;
                }
        }
        printf("%lld %.6f\n", (long long)n, rt_now() - t0);
        fflush(stdout);
    }
    rt_loader_free(l);
    free(idx);
    free(out);
    for (int k = 0; k < nw; k++)
        img_worker_free(&b.w[k]);
    free(b.w);
    img_folder_free(&b.f);
    return 0;
}
