/* image_tool.c: one image through the runtime's decoder and transforms, for
 * tests/e2e/images_vs_torchvision.py to compare with torchvision on the same file.
 *
 *   image_tool eval|train|train-full PATH C H W [SEED [SAMPLE [COUNT]]]
 *
 * eval: Resize + CenterCrop; train: the training transform with the draws the runtime
 * makes for (SEED, epoch 0, SAMPLE), train-full the same without reduced-scale JPEG
 * decoding. For each of COUNT samples (SAMPLE, SAMPLE+1, ...), prints the crop "top left
 * height width flip" on one line and, after all of them, writes the C x H x W floats of
 * each (mean 0, std 1) to stdout as raw little-endian f32. Errors: the message, exit 1. */
#include "burstrt.h"
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr,
                "usage: image_tool eval|train|train-full PATH C H W [SEED [SAMPLE [COUNT]]]\n");
        return 2;
    }
    const char *mode = argv[1], *path = argv[2];
    int c = atoi(argv[3]), h = atoi(argv[4]), w = atoi(argv[5]);
    uint64_t seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 1;
    uint64_t sample = argc > 7 ? strtoull(argv[7], NULL, 10) : 0;
    long count = argc > 8 ? atol(argv[8]) : 1;
    bool train = strncmp(mode, "train", 5) == 0;
    img_worker wk;
    img_worker_init(&wk);
    wk.full_scale = !strcmp(mode, "train-full");
    const float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    size_t n = (size_t)c * (size_t)h * (size_t)w;
    float *out = malloc(n * sizeof *out * (size_t)count);
    char err[1400];
    for (long s = 0; s < count; s++) {
        float u[IMG_DRAWS];
        for (int k = 0; k < IMG_DRAWS; k++)
            u[k] = rt_rand_uniform(seed, 0x1a6e, 0, sample + (uint64_t)s, (uint64_t)k);
        int crop[5];
        if (!img_sample(&wk, path, c, h, w, train ? u : NULL, mean, std, out + n * (size_t)s, crop,
                        err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        fprintf(stderr, "%d %d %d %d %d\n", crop[0], crop[1], crop[2], crop[3], crop[4]);
    }
    fwrite(out, sizeof *out, n * (size_t)count, stdout);
    free(out);
    img_worker_free(&wk);
    return 0;
}
