/*
 * fuzz_image.c: libFuzzer target for the image decoders (runtime/image.c: JPEG through
 * libjpeg-turbo, PNG through libpng) and the resampling behind --data images:DIR.
 *
 * Any byte string must decode or give an error naming the file (libjpeg's and libpng's
 * errors and warnings caught): never a crash, an abort, a hang or a sanitizer report. A
 * decoded image has the size the header promised (or its reduced-scale size), and
 * resizes and crops into an output of the model's shape. A region's decode (the training
 * transform's crop) gives a window inside the image that covers the region, resampled
 * as the training transform does.
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
        /* A region from the input's last bytes (the crop), at the same shrink. */
        unsigned v = size >= 4 ? (unsigned)data[size - 1] << 8 | data[size - 2] : 0;
        int rw = 1 + (int)(v % (unsigned)w), rh = 1 + (int)((v >> 4) % (unsigned)h);
        int r[4] = {(int)(v % (unsigned)(w - rw + 1)), (int)((v >> 8) % (unsigned)(h - rh + 1))};
        r[2] = r[0] + rw;
        r[3] = r[1] + rh;
        int win[4], pad = shrink >= 2 ? 3 : 0;
        if (!img_decode_region(dec, data, size, "fuzz.img", c, shrink, r, pad, &im, win, err,
                               sizeof err)) {
            if (strncmp(err, "fuzz.img: ", 10) != 0)
                abort();
            continue;
        }
        if (im.c != c || win[0] < 0 || win[1] < 0 || win[0] + im.w > win[2] ||
            win[1] + im.h > win[3] || win[2] > w || win[3] > h)
            abort();
        if (win[2] == w && win[3] == h) { /* full scale */
            double crop[4] = {0, 0, rw, rh};
            if (win[0] > r[0] || win[1] > r[1] || win[0] + im.w < r[2] || win[1] + im.h < r[3])
                abort();
            img_resize_at(&im, win[0] - r[0], win[1] - r[1], rw, rh, crop, 7, 5, &out, &tmp);
            if (out.w != 7 || out.h != 5 || out.c != c)
                abort();
        }
    }
    return 0;
}
