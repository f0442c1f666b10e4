/*
 * fuzz_image.c: libFuzzer target for the image decoders (runtime/image.c: JPEG through
 * libjpeg-turbo, PNG through libpng) and the resampling behind --data images:DIR.
 *
 * Any byte string must decode or give an error naming the file (libjpeg's and libpng's
 * errors and warnings caught): never a crash, an abort, a hang or a sanitizer report. A
 * decoded image has the size the header promised (or its reduced-scale size), and
 * resizes and crops into an output of the model's shape.
 */
#include "image.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static img_decoder *dec;
    static img_u8 im, out, tmp;
    if (!dec)
        dec = img_decoder_new();
    char err[1400];
    int w, h;
    if (!img_probe(dec, data, size, "fuzz.img", &w, &h, err, sizeof err)) {
        if (strncmp(err, "fuzz.img: ", 10) != 0)
            abort();
        return 0;
    }
    if ((long long)w * h > 1 << 22) /* keep units fast; the limit itself is checked above */
        return 0;
    for (int c = 1; c <= 3; c += 2) {
        double shrink = size % 2 ? 4 : 1;
        if (!img_decode(dec, data, size, "fuzz.img", c, shrink, &im, err, sizeof err)) {
            if (strncmp(err, "fuzz.img: ", 10) != 0)
                abort();
            continue;
        }
        if (im.c != c || im.w <= 0 || im.h <= 0 || im.w > w || im.h > h)
            abort();
        double box[4] = {0, 0, im.w, im.h};
        img_resize(&im, box, 7, 5, &out, &tmp);
        if (out.w != 7 || out.h != 5 || out.c != c)
            abort();
        float px[3 * 5 * 4], mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
        img_to_chw(&out, 1, 0, 4, 5, true, mean, std, px);
    }
    return 0;
}
