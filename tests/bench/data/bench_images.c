/* bench_images.c: images/s of the runtime's training transform (decode, RandomResizedCrop
 * to H x W, flip, normalise) on one thread over an ImageFolder, for
 * tests/bench/data/image_transform.py, which runs torchvision's beside it.
 *
 *   bench_images DIR H W ROUNDS     prints one line per round: "images SECONDS" */
#include "burstrt.h"
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_images DIR H W ROUNDS\n");
        return 2;
    }
    int h = atoi(argv[2]), w = atoi(argv[3]), rounds = atoi(argv[4]);
    img_folder f;
    char err[1400];
    if (!img_folder_scan(argv[1], &f, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    img_worker wk;
    img_worker_init(&wk);
    float *out = malloc((size_t)3 * (size_t)h * (size_t)w * sizeof *out);
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (int64_t i = 0; i < f.n; i++) {
            float u[IMG_DRAWS];
            for (int k = 0; k < IMG_DRAWS; k++)
                u[k] = rt_rand_uniform(1, 0x1a6e, (uint64_t)r, (uint64_t)i, (uint64_t)k);
            if (!img_sample(&wk, f.paths[i], 3, h, w, u, mean, std, out, NULL, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
        }
        printf("%lld %.6f\n", (long long)f.n, now() - t0);
    }
    free(out);
    img_worker_free(&wk);
    img_folder_free(&f);
    return 0;
}
