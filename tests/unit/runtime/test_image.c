/* test_image.c: the region decoding and the windowed resampling behind the training
 * transform (runtime/image.c). JPEGs written here with libjpeg (4:2:0 at quality 90 as
 * Pillow writes them, 4:2:2, 4:4:4, grey, progressive, restart markers, odd sizes) are
 * decoded whole and by region, for crops at the edges and inside, at full and reduced
 * scales: the region's window must hold the whole decode's pixels exactly and cover the
 * region widened by its pad. img_resize_at of a window must equal img_resize of the whole
 * image (the reduced-scale box) or of the cut crop (full scale) bit for bit
 * (e2e.images_vs_torchvision then holds the whole training transform to torchvision's
 * pixels). A file without its EOI marker is read whole, so a truncated JPEG stays an
 * error whatever the region; a file corrupt inside its scan is an error. */
#include "check.h"
#include "image.h"

#include <jpeglib.h>

/* A w x h JPEG of smooth colour fields with noise (grey when c is 1), in *buf. */
static size_t make_jpeg(int w, int h, int c, int hs, int vs, bool progressive, int restart,
                        unsigned char **buf)
{
    struct jpeg_compress_struct j;
    struct jpeg_error_mgr e;
    j.err = jpeg_std_error(&e);
    jpeg_create_compress(&j);
    unsigned long len = 0;
    *buf = NULL;
    jpeg_mem_dest(&j, buf, &len);
    j.image_width = (JDIMENSION)w;
    j.image_height = (JDIMENSION)h;
    j.input_components = c;
    j.in_color_space = c == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&j);
    jpeg_set_quality(&j, 90, TRUE);
    if (c == 3) {
        j.comp_info[0].h_samp_factor = hs;
        j.comp_info[0].v_samp_factor = vs;
    }
    if (progressive)
        jpeg_simple_progression(&j);
    j.restart_in_rows = restart;
    jpeg_start_compress(&j, TRUE);
    unsigned char *row = malloc((size_t)w * (size_t)c);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c; k++) {
                double v =
                    127 + 100 * sin(0.031 * x * (k + 1) + 0.017 * y * (3 - k)) + 24 * frand();
                row[x * c + k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        JSAMPROW r = row;
        jpeg_write_scanlines(&j, &r, 1);
    }
    jpeg_finish_compress(&j);
    jpeg_destroy_compress(&j);
    free(row);
    return len;
}

/* The region decode of r against the whole decode at the same shrink, and their
 * resampling to ow x oh. */
static void region_equal(img_decoder *d, const char *name, const unsigned char *buf, size_t len,
                         int c, double shrink, const int r[4], int pad, int ow, int oh)
{
    img_u8 whole = {0}, part = {0};
    char err[512];
    int win[4];
    bool ok = img_decode(d, buf, len, name, c, shrink, &whole, err, sizeof err) &&
              img_decode_region(d, buf, len, name, c, shrink, r, pad, &part, win, err, sizeof err);
    CHECK(ok, "%s: %s", name, err);
    if (!ok)
        return;
    CHECK(win[2] == whole.w && win[3] == whole.h && part.c == whole.c,
          "%s: window of a %d x %d image, decoded %d x %d", name, win[2], win[3], whole.w, whole.h);
    CHECK(win[0] >= 0 && win[1] >= 0 && win[0] + part.w <= whole.w && win[1] + part.h <= whole.h,
          "%s: window %d,%d %d x %d outside the image", name, win[0], win[1], part.w, part.h);
    /* The region at the decoded scale, widened by pad, lies inside the window. */
    int fw = 0, fh = 0;
    img_probe(d, buf, len, name, &fw, &fh, err, sizeof err);
    int x0 = (int)floor((double)r[0] * whole.w / fw) - pad,
        x1 = (int)ceil((double)r[2] * whole.w / fw) + pad;
    int y0 = (int)floor((double)r[1] * whole.h / fh) - pad,
        y1 = (int)ceil((double)r[3] * whole.h / fh) + pad;
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > whole.w ? whole.w : x1;
    y1 = y1 > whole.h ? whole.h : y1;
    CHECK(win[0] <= x0 && win[1] <= y0 && win[0] + part.w >= x1 && win[1] + part.h >= y1,
          "%s: window %d,%d %d x %d misses the region %d,%d-%d,%d", name, win[0], win[1], part.w,
          part.h, x0, y0, x1, y1);
    long bad = 0;
    for (int y = 0; y < part.h; y++)
        bad +=
            memcmp(part.px + (size_t)y * (size_t)part.w * (size_t)c,
                   whole.px + ((size_t)(win[1] + y) * (size_t)whole.w + (size_t)win[0]) * (size_t)c,
                   (size_t)part.w * (size_t)c) != 0;
    CHECK(bad == 0,
          "%s: region %d,%d-%d,%d at shrink %g: %ld of %d rows differ from the whole "
          "decode",
          name, r[0], r[1], r[2], r[3], shrink, bad, part.h);

    /* Resampling the window as the training transform does equals resampling the whole. */
    img_u8 a = {0}, b = {0}, t = {0}, cut = {0};
    if (win[2] == fw && win[3] == fh) {
        /* Full scale: the crop cut out, then resized whole. */
        int cw = r[2] - r[0], ch = r[3] - r[1];
        cut.w = cw;
        cut.h = ch;
        cut.c = c;
        cut.px = malloc((size_t)cw * (size_t)ch * (size_t)c);
        for (int y = 0; y < ch; y++)
            memcpy(cut.px + (size_t)y * (size_t)cw * (size_t)c,
                   whole.px + ((size_t)(r[1] + y) * (size_t)whole.w + (size_t)r[0]) * (size_t)c,
                   (size_t)cw * (size_t)c);
        double box[4] = {0, 0, cw, ch};
        img_resize(&cut, box, ow, oh, &a, &t);
        img_resize_at(&part, win[0] - r[0], win[1] - r[1], cw, ch, box, ow, oh, &b, &t);
    } else {
        double s = (double)win[2] / fw, q = (double)win[3] / fh;
        double box[4] = {r[0] * s, r[1] * q, r[2] * s, r[3] * q};
        img_resize(&whole, box, ow, oh, &a, &t);
        img_resize_at(&part, win[0], win[1], win[2], win[3], box, ow, oh, &b, &t);
    }
    CHECK(a.w == b.w && a.h == b.h && !memcmp(a.px, b.px, (size_t)ow * (size_t)oh * (size_t)c),
          "%s: resampling region %d,%d-%d,%d's window differs from the whole image's", name, r[0],
          r[1], r[2], r[3]);
    img_free(&a);
    img_free(&b);
    img_free(&t);
    img_free(&cut);
    img_free(&whole);
    img_free(&part);
}

int main(void)
{
    img_decoder *d = img_decoder_new();
    struct {
        int w, h, c, hs, vs;
        bool progressive;
        int restart;
    } kinds[] = {
        {500, 375, 3, 2, 2, false, 0}, /* Pillow's 4:2:0 */
        {501, 377, 3, 2, 2, false, 0}, /* partial iMCUs at the right and the bottom */
        {333, 250, 3, 2, 1, false, 0}, /* 4:2:2 */
        {320, 241, 3, 1, 1, false, 0}, /* 4:4:4 */
        {301, 203, 1, 1, 1, false, 0}, /* grey */
        {400, 300, 3, 2, 2, true, 0},  /* progressive */
        {400, 300, 3, 2, 2, false, 2}, /* restart markers every 2 iMCU rows */
    };
    int regions = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        unsigned char *buf;
        size_t len = make_jpeg(kinds[k].w, kinds[k].h, kinds[k].c, kinds[k].hs, kinds[k].vs,
                               kinds[k].progressive, kinds[k].restart, &buf);
        int w = kinds[k].w, h = kinds[k].h;
        char name[64];
        snprintf(name, sizeof name, "%dx%dx%d-%d%d%s%s.jpg", w, h, kinds[k].c, kinds[k].hs,
                 kinds[k].vs, kinds[k].progressive ? "-prog" : "", kinds[k].restart ? "-rst" : "");
        for (int c = 1; c <= 3; c += 2) {
            /* Fixed crops (corners, edges, one pixel, the whole image), then random ones. */
            int fixed[][4] = {{0, 0, w, h},
                              {0, 0, 17, 9},
                              {w - 5, h - 3, w, h},
                              {1, 1, 2, 2},
                              {15, 7, 16, 8},
                              {16, 8, 17, 9},
                              {w / 3, 0, w / 2, h},
                              {0, h / 3, w, h / 2 + 1},
                              {31, 47, w - 33, h - 17}};
            for (int i = 0; i < 9 + 12; i++) {
                int r[4];
                if (i < 9) {
                    memcpy(r, fixed[i], sizeof r);
                } else {
                    int cw = 1 + (int)((frand() + 1) / 2 * (w - 1)),
                        ch = 1 + (int)((frand() + 1) / 2 * (h - 1));
                    r[0] = (int)((frand() + 1) / 2 * (w - cw + 1));
                    r[1] = (int)((frand() + 1) / 2 * (h - ch + 1));
                    r[0] = r[0] > w - cw ? w - cw : r[0];
                    r[1] = r[1] > h - ch ? h - ch : r[1];
                    r[2] = r[0] + cw;
                    r[3] = r[1] + ch;
                }
                double shrinks[] = {1, 2, 3.5, 4, 8, 9};
                for (int s = 0; s < 6; s++) {
                    /* imagefolder.c's pad: the filter's support and 2 */
                    int ow = 37, oh = 29;
                    int pad = shrinks[s] >= 2 ? (int)ceil(fmax((double)(r[2] - r[0]) / ow,
                                                               (double)(r[3] - r[1]) / oh)) +
                                                    2
                                              : 0;
                    region_equal(d, name, buf, len, c, shrinks[s], r, pad, ow, oh);
                    regions++;
                }
            }
        }
        /* Without its EOI marker (truncated), the file is read whole: an error even for a
         * region in its first rows. */
        img_u8 im = {0};
        char err[512];
        int win[4], r[4] = {0, 0, 16, 16};
        bool ok =
            img_decode_region(d, buf, len * 2 / 3, name, 3, 1, r, 0, &im, win, err, sizeof err);
        CHECK(!ok && strstr(err, name) && strstr(err, "corrupt JPEG"),
              "%s truncated: decoded a region (%s)", name, ok ? "no error" : err);
        /* A full-length file corrupt inside the region (bytes of the scan overwritten). */
        unsigned char *bad = malloc(len);
        memcpy(bad, buf, len);
        for (size_t i = len / 2; i < len / 2 + 400; i++)
            bad[i] = (unsigned char)(i * 7);
        int all[4] = {0, 0, w, h};
        ok = img_decode_region(d, bad, len, name, 3, 1, all, 0, &im, win, err, sizeof err);
        CHECK(!ok && strstr(err, name), "%s corrupt: decoded (%s)", name, ok ? "no error" : err);
        free(bad);
        img_free(&im);
        free(buf);
    }
    img_decoder_free(d);
    printf("%d regions decoded and resampled\n", regions);
    if (check_failures)
        fprintf(stderr, "%d failures\n", check_failures);
    return check_failures ? 1 : 0;
}
