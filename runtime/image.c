/* image.c: the decoders and the resampling of image.h. JPEG: libjpeg-turbo's libjpeg API
 * (the library Pillow links on Debian, with the same defaults: the accurate integer DCT
 * and fancy upsampling), its errors caught by a setjmp error manager and its warnings (a
 * truncated file, corrupt data) treated as errors; only the rows and the iMCU columns of
 * a region are decoded when the caller asks for one (jpeg_crop_scanline,
 * jpeg_skip_scanlines, and no decoding past the region's last row). PNG: libpng's
 * simplified API, which reports every error as text. Resampling: Pillow 9's
 * ImagingResample for 8-bit images transcribed (a horizontal then a vertical pass of a
 * triangle filter widened by the scale when shrinking, coefficients normalised in double
 * and rounded to 22 fractional bits), so that results agree with torchvision's bit for
 * bit; tests/e2e/images_vs_torchvision.py holds them to it. */
#include "image.h"
#include "file_error.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef IMG_HAVE_JPEG
#include <jpeglib.h>
#include <setjmp.h>
#endif
#ifdef IMG_HAVE_PNG
#include <png.h>
#endif

#ifdef IMG_HAVE_JPEG
/* libjpeg's error manager: an error or a warning longjmps back with its message. */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf back;
    char msg[JMSG_LENGTH_MAX];
} jpeg_errors;
#endif

struct img_decoder {
#ifdef IMG_HAVE_JPEG
    struct jpeg_decompress_struct jpeg;
    jpeg_errors jerr;
    bool jpeg_ready;
#endif
    img_u8 rgb; /* a colour image on its way to one channel */
};

img_decoder *img_decoder_new(void)
{
    img_decoder *d = calloc(1, sizeof *d);
    return d;
}

void img_decoder_free(img_decoder *d)
{
    if (!d)
        return;
#ifdef IMG_HAVE_JPEG
    if (d->jpeg_ready)
        jpeg_destroy_decompress(&d->jpeg);
#endif
    img_free(&d->rgb);
    free(d);
}

void img_free(img_u8 *im)
{
    free(im->px);
    memset(im, 0, sizeof *im);
}

/* Room for w x h x c pixels; false when out of memory. */
static bool reserve(img_u8 *im, int w, int h, int c)
{
    size_t need = (size_t)w * (size_t)h * (size_t)c;
    if (need > im->cap) {
        unsigned char *p = realloc(im->px, need ? need : 1);
        if (!p)
            return false;
        im->px = p;
        im->cap = need;
    }
    im->w = w;
    im->h = h;
    im->c = c;
    return true;
}

bool img_can_decode(const char *format)
{
#ifdef IMG_HAVE_JPEG
    if (!strcmp(format, "jpeg"))
        return true;
#endif
#ifdef IMG_HAVE_PNG
    if (!strcmp(format, "png"))
        return true;
#endif
    (void)format;
    return false;
}

const char *img_format(const unsigned char *buf, size_t len)
{
    if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        return "jpeg";
    if (len >= 8 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8))
        return "png";
    return NULL;
}

static bool unsupported(const unsigned char *buf, size_t len, const char *path, char *err,
                        size_t errlen)
{
    const char *f = img_format(buf, len);
    if (!f)
        return file_error(err, errlen, path, "not a JPEG or PNG file");
    return file_error(err, errlen, path,
                      "a %s file, but this runtime was built without %s (install %s and rebuild; "
                      "scripts/install-deps)",
                      f, !strcmp(f, "jpeg") ? "libjpeg-turbo" : "libpng",
                      !strcmp(f, "jpeg") ? "libjpeg62-turbo-dev" : "libpng-dev");
}

__attribute__((unused)) static bool check_size(int w, int h, const char *path, char *err,
                                               size_t errlen)
{
    if (w <= 0 || h <= 0)
        return file_error(err, errlen, path, "an image of %d x %d pixels", w, h);
    if ((uint64_t)w * (uint64_t)h > IMG_MAX_PIXELS)
        return file_error(err, errlen, path, "%d x %d pixels, more than the %d accepted", w, h,
                          IMG_MAX_PIXELS);
    return true;
}

#ifdef IMG_HAVE_JPEG
static void jpeg_fail(j_common_ptr j)
{
    jpeg_errors *e = (jpeg_errors *)j->err;
    (*j->err->format_message)(j, e->msg);
    longjmp(e->back, 1);
}

/* Level -1 is a warning (corrupt or truncated data): an error here, as TurboJPEG's
 * TJFLAG_STOPONWARNING makes it; the others are trace messages. */
static void jpeg_message(j_common_ptr j, int level)
{
    if (level < 0)
        jpeg_fail(j);
}

/* The decompressor, created once per decoder (libjpeg allocates nothing that can fail
 * before its error manager is in place). */
static void jpeg_init(img_decoder *d)
{
    if (d->jpeg_ready)
        return;
    d->jpeg.err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = jpeg_fail;
    d->jerr.pub.emit_message = jpeg_message;
    jpeg_create_decompress(&d->jpeg);
    d->jpeg_ready = true;
}

/* Whether the file ends with its EOI marker (0xFF 0xD9, trailing bytes allowed as libjpeg
 * allows them up to 4 KiB): only then is a region decoded without reading the rest, so
 * that a truncated file stays an error whichever crop meets it. */
static bool jpeg_complete(const unsigned char *buf, size_t len)
{
    size_t stop = len > 4096 ? len - 4096 : 0;
    for (size_t i = len; i >= stop + 2; i--)
        if (buf[i - 2] == 0xff && buf[i - 1] == 0xd9)
            return true;
    return false;
}

/* The JPEG's header: its size and colour space. */
static bool jpeg_header(img_decoder *d, const unsigned char *buf, size_t len, const char *path,
                        char *err, size_t errlen)
{
    jpeg_init(d);
    struct jpeg_decompress_struct *j = &d->jpeg;
    if (len > (size_t)1 << 31)
        return file_error(err, errlen, path, "a JPEG file of more than 2 GiB");
    if (setjmp(d->jerr.back)) {
        jpeg_abort_decompress(j);
        return file_error(err, errlen, path, "corrupt JPEG: %s", d->jerr.msg);
    }
    jpeg_mem_src(j, buf, (unsigned long)len);
    jpeg_read_header(j, TRUE);
    return true;
}
#endif

bool img_probe(img_decoder *d, const unsigned char *buf, size_t len, const char *path, int *w,
               int *h, char *err, size_t errlen)
{
    const char *f = img_format(buf, len);
    (void)d;
    (void)f;
#ifdef IMG_HAVE_JPEG
    if (f && !strcmp(f, "jpeg")) {
        if (!jpeg_header(d, buf, len, path, err, errlen))
            return false;
        *w = d->jpeg.image_width > INT32_MAX ? 0 : (int)d->jpeg.image_width;
        *h = d->jpeg.image_height > INT32_MAX ? 0 : (int)d->jpeg.image_height;
        jpeg_abort_decompress(&d->jpeg);
        return check_size(*w, *h, path, err, errlen);
    }
#endif
#ifdef IMG_HAVE_PNG
    if (f && !strcmp(f, "png")) {
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory(&im, buf, len)) {
            file_error(err, errlen, path, "corrupt PNG: %s", im.message);
            png_image_free(&im);
            return false;
        }
        *w = (int)(im.width > INT32_MAX ? 0 : im.width);
        *h = (int)(im.height > INT32_MAX ? 0 : im.height);
        png_image_free(&im);
        return check_size(*w, *h, path, err, errlen);
    }
#endif
    *w = *h = 0;
    return unsupported(buf, len, path, err, errlen);
}

/* in (RGB) to one channel as Pillow's convert("L") does (ITU-R 601-2 luma, 16-bit fixed
 * point). */
__attribute__((unused)) static void rgb_to_gray(const img_u8 *in, img_u8 *out)
{
    size_t n = (size_t)in->w * (size_t)in->h;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = in->px + 3 * i;
        out->px[i] = (unsigned char)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
    }
}

#ifdef IMG_HAVE_JPEG
#define JPEG_EDGE 4

/* The JPEG in buf at the smallest scale whose image is at least 1/shrink of the original,
 * among 1/2, 1/4 and 1/8: libjpeg-turbo's SIMD code has those reduced IDCTs, while 7/8
 * ... 3/8 take its plain C ones, slower than decoding the whole image (tests/bench/data,
 * BENCH_FULL_SCALE). With a region, only its rows and the iMCU columns that hold it. */
static bool jpeg_decode(img_decoder *d, const unsigned char *buf, size_t len, const char *path,
                        int channels, double shrink, const int *region, int pad, img_u8 *out,
                        int win[4], char *err, size_t errlen)
{
    if (!jpeg_header(d, buf, len, path, err, errlen))
        return false;
    struct jpeg_decompress_struct *j = &d->jpeg;
    int w = j->image_width > INT32_MAX ? 0 : (int)j->image_width;
    int h = j->image_height > INT32_MAX ? 0 : (int)j->image_height;
    if (!check_size(w, h, path, err, errlen)) {
        jpeg_abort_decompress(j);
        return false;
    }
    if (setjmp(d->jerr.back)) {
        jpeg_abort_decompress(j);
        return file_error(err, errlen, path, "corrupt JPEG: %s", d->jerr.msg);
    }
    unsigned denom = 1;
    for (unsigned k = 8; k >= 2 && denom == 1; k /= 2)
        if (shrink >= k)
            denom = k;
    j->scale_num = 1;
    j->scale_denom = denom;
    /* One channel: a grey file directly, a colour one through RGB as Pillow does. */
    bool direct = channels == 3 || j->jpeg_color_space == JCS_GRAYSCALE;
    int dc = direct ? channels : 3;
    j->out_color_space = dc == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(j);
    int sw = (int)j->output_width, sh = (int)j->output_height, y0 = 0, y1 = sh, keep0 = 0,
        keep = -1;
    JDIMENSION x0 = 0, cw = (JDIMENSION)sw;
    if (region && jpeg_complete(buf, len)) {
        /* The region at this scale, widened by pad pixels and clipped to the image; libjpeg
         * widens the columns further, to whole iMCUs. */
        int rx0 = (int)floor((double)region[0] * sw / w) - pad;
        int rx1 = (int)ceil((double)region[2] * sw / w) + pad;
        int ry0 = (int)floor((double)region[1] * sh / h) - pad;
        int ry1 = (int)ceil((double)region[3] * sh / h) + pad;
        rx0 = rx0 < 0 ? 0 : rx0;
        ry0 = ry0 < 0 ? 0 : ry0;
        rx1 = rx1 > sw ? sw : rx1;
        ry1 = ry1 > sh ? sh : ry1;
        if (rx1 > rx0 && ry1 > ry0) {
            if (rx0 > 0 || rx1 < sw) {
                /* libjpeg upsamples a cropped chroma plane as if it ended at the crop's
                 * edges: the outermost columns of its output differ from the whole decode's
                 * but for the image's own edges, so decode JPEG_EDGE more on each side and
                 * drop them (test_image). */
                x0 = (JDIMENSION)(rx0 > JPEG_EDGE ? rx0 - JPEG_EDGE : 0);
                cw = (JDIMENSION)(rx1 + JPEG_EDGE < sw ? rx1 + JPEG_EDGE : sw) - x0;
                jpeg_crop_scanline(j, &x0, &cw);
                keep0 = rx0 - (int)x0;
                keep = rx1 - rx0;
            }
            y0 = ry0;
            y1 = ry1;
            if (y0 > 0 && jpeg_skip_scanlines(j, (JDIMENSION)y0) != (JDIMENSION)y0) {
                /* not reached: the memory source never suspends */
                jpeg_abort_decompress(j);
                return file_error(err, errlen, path, "corrupt JPEG: cannot skip to row %d", y0);
            }
        }
    }
    if (keep < 0)
        keep = (int)cw;
    img_u8 *dst = direct ? out : &d->rgb;
    if (!reserve(dst, (int)cw, y1 - y0, dc) || (!direct && !reserve(out, keep, y1 - y0, 1))) {
        jpeg_abort_decompress(j);
        return file_error(err, errlen, path, "out of memory for %d x %d pixels", (int)cw, y1 - y0);
    }
    while ((int)j->output_scanline < y1) {
        JSAMPROW row = dst->px + (size_t)((int)j->output_scanline - y0) * cw * (size_t)dc;
        if (jpeg_read_scanlines(j, &row, 1) != 1) {
            jpeg_abort_decompress(j);
            return file_error(err, errlen, path, "corrupt JPEG: no scanline %d",
                              (int)j->output_scanline);
        }
    }
    if (keep != (int)cw) {
        /* The kept columns of each row moved together (rows only move down in memory). */
        for (int y = 0; y < y1 - y0; y++)
            memmove(dst->px + (size_t)y * (size_t)keep * (size_t)dc,
                    dst->px + ((size_t)y * cw + (size_t)keep0) * (size_t)dc,
                    (size_t)keep * (size_t)dc);
        dst->w = keep;
        x0 += (JDIMENSION)keep0;
    }
    /* Reading to EOI checks the rest of a whole image, as TurboJPEG did; a region stops. */
    if (y1 == sh)
        jpeg_finish_decompress(j);
    else
        jpeg_abort_decompress(j);
    if (!direct)
        rgb_to_gray(dst, out);
    win[0] = (int)x0;
    win[1] = y0;
    win[2] = sw;
    win[3] = sh;
    return true;
}
#endif

bool img_decode(img_decoder *d, const unsigned char *buf, size_t len, const char *path,
                int channels, double shrink, img_u8 *out, char *err, size_t errlen)
{
    int win[4];
    return img_decode_region(d, buf, len, path, channels, shrink, NULL, 0, out, win, err, errlen);
}

bool img_decode_region(img_decoder *d, const unsigned char *buf, size_t len, const char *path,
                       int channels, double shrink, const int region[4], int pad, img_u8 *out,
                       int win[4], char *err, size_t errlen)
{
    const char *f = img_format(buf, len);
    (void)f; /* a build without either library (the CUDA backend's core) reads no format */
    (void)shrink;
    (void)channels;
    (void)region;
    (void)pad;
#ifdef IMG_HAVE_JPEG
    if (f && !strcmp(f, "jpeg"))
        return jpeg_decode(d, buf, len, path, channels, shrink, region, pad, out, win, err, errlen);
#endif
    int w, h;
    if (!img_probe(d, buf, len, path, &w, &h, err, errlen))
        return false;
    win[0] = win[1] = 0;
    win[2] = w;
    win[3] = h;
    (void)out;
#ifdef IMG_HAVE_PNG
    if (!strcmp(f, "png")) {
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory(&im, buf, len)) {
            file_error(err, errlen, path, "corrupt PNG: %s", im.message);
            png_image_free(&im);
            return false;
        }
        bool color = im.format & PNG_FORMAT_FLAG_COLOR, alpha = im.format & PNG_FORMAT_FLAG_ALPHA;
        /* Read as stored (8 bits), then drop alpha and change channels as Pillow's
         * convert() does: alpha is dropped, not composited. */
        im.format =
            (color ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY) | (alpha ? PNG_FORMAT_FLAG_ALPHA : 0);
        int sc = (int)PNG_IMAGE_PIXEL_CHANNELS(im.format);
        img_u8 *raw = &d->rgb;
        if (!reserve(raw, w, h, sc) || !reserve(out, w, h, channels)) {
            png_image_free(&im);
            return file_error(err, errlen, path, "out of memory for %d x %d pixels", w, h);
        }
        if (!png_image_finish_read(&im, NULL, raw->px, 0, NULL)) {
            file_error(err, errlen, path, "corrupt PNG: %s", im.message);
            png_image_free(&im);
            return false;
        }
        png_image_free(&im);
        size_t n = (size_t)w * (size_t)h;
        int cc = color ? 3 : 1;
        for (size_t i = 0; i < n; i++) {
            const unsigned char *p = raw->px + (size_t)sc * i;
            unsigned char *o = out->px + (size_t)channels * i;
            if (channels == cc)
                memcpy(o, p, (size_t)cc);
            else if (channels == 3)
                o[0] = o[1] = o[2] = p[0];
            else
                o[0] = (unsigned char)((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
        }
        return true;
    }
#endif
    return unsupported(buf, len, path, err, errlen);
}

/* ---- Pillow's resampling --------------------------------------------------------------- */

#define PRECISION_BITS (32 - 8 - 2)

static double triangle(double x)
{
    if (x < 0.0)
        x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc: for each output pixel, the first
 * input pixel and how many, and their fixed-point weights (ksize per output pixel). */
static int coeffs(int in_size, double in0, double in1, int out_size, int **bounds_out,
                  int32_t **kk_out)
{
    double scale = (in1 - in0) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *kk = malloc((size_t)out_size * (size_t)ksize * sizeof *kk);
    int *bounds = malloc((size_t)out_size * 2 * sizeof *bounds);
    int32_t *ik = malloc((size_t)out_size * (size_t)ksize * sizeof *ik);
    if (!kk || !bounds || !ik)
        abort(); /* a few kilobytes for any image this runtime accepts */
    for (int xx = 0; xx < out_size; xx++) {
        double center = in0 + (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double *k = &kk[(size_t)xx * (size_t)ksize];
        int x = 0;
        for (; x < xmax; x++) {
            double w = triangle((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0)
                k[x] /= ww;
        for (; x < ksize; x++)
            k[x] = 0;
        bounds[xx * 2] = xmin;
        bounds[xx * 2 + 1] = xmax;
    }
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++)
        ik[i] = kk[i] < 0 ? (int32_t)(-0.5 + kk[i] * (1 << PRECISION_BITS))
                          : (int32_t)(0.5 + kk[i] * (1 << PRECISION_BITS));
    free(kk);
    *bounds_out = bounds;
    *kk_out = ik;
    return ksize;
}

static unsigned char clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void img_resize(const img_u8 *in, const double box[4], int ow, int oh, img_u8 *out, img_u8 *tmp)
{
    img_resize_at(in, 0, 0, in->w, in->h, box, ow, oh, out, tmp);
}

void img_resize_at(const img_u8 *in, int ox, int oy, int fw, int fh, const double box[4], int ow,
                   int oh, img_u8 *out, img_u8 *tmp)
{
    int c = in->c;
    bool whole = ox == 0 && oy == 0 && in->w == fw && in->h == fh;
    /* A part of the image always takes the horizontal pass, exact where the whole image
     * would skip it (one tap of weight 1 per pixel). */
    bool need_h = !whole || ow != fw || box[0] != 0 || box[2] != ow;
    bool need_v = oh != fh || box[1] != 0 || box[3] != oh;
    int *bh, *bv;
    int32_t *kh, *kv;
    int ksh = coeffs(fw, box[0], box[2], ow, &bh, &kh);
    int ksv = coeffs(fh, box[1], box[3], oh, &bv, &kv);
    int yfirst = bv[0], ylast = bv[oh * 2 - 2] + bv[oh * 2 - 1];
    const img_u8 *src = in;
    if (!need_h && !need_v) {
        if (!reserve(out, in->w, in->h, c))
            abort();
        memcpy(out->px, in->px, (size_t)in->w * (size_t)in->h * (size_t)c);
        goto done;
    }
    if (need_h) {
        assert(yfirst >= oy && ylast <= oy + in->h);
        for (int i = 0; i < oh; i++)
            bv[i * 2] -= yfirst;
        for (int i = 0; i < ow; i++) {
            bh[i * 2] -= ox;
            assert(bh[i * 2] >= 0 && bh[i * 2] + bh[i * 2 + 1] <= in->w);
        }
        img_u8 *dst = need_v ? tmp : out;
        if (!reserve(dst, ow, ylast - yfirst, c))
            abort();
        for (int yy = 0; yy < ylast - yfirst; yy++) {
            const unsigned char *row =
                in->px + (size_t)(yy + yfirst - oy) * (size_t)in->w * (size_t)c;
            unsigned char *o = dst->px + (size_t)yy * (size_t)ow * (size_t)c;
            /* The channels of a pixel side by side: one pass over its taps. */
            for (int xx = 0; xx < ow; xx++) {
                int xmin = bh[xx * 2], xmax = bh[xx * 2 + 1];
                const int32_t *k = &kh[(size_t)xx * (size_t)ksh];
                const unsigned char *p = row + (size_t)xmin * (size_t)c;
                if (c == 3) {
                    int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                    for (int x = 0; x < xmax; x++) {
                        s0 += p[3 * x] * k[x];
                        s1 += p[3 * x + 1] * k[x];
                        s2 += p[3 * x + 2] * k[x];
                    }
                    o[3 * xx] = clip8(s0);
                    o[3 * xx + 1] = clip8(s1);
                    o[3 * xx + 2] = clip8(s2);
                    continue;
                }
                for (int ch = 0; ch < c; ch++) {
                    int32_t ss = 1 << (PRECISION_BITS - 1);
                    for (int x = 0; x < xmax; x++)
                        ss += p[(size_t)x * (size_t)c + (size_t)ch] * k[x];
                    o[(size_t)xx * (size_t)c + (size_t)ch] = clip8(ss);
                }
            }
        }
        src = dst;
    }
    if (need_v) {
        if (!reserve(out, ow, oh, c))
            abort();
        size_t rowlen = (size_t)src->w * (size_t)c;
        /* Row by row of taps into a row of sums (the same integer sums as Pillow's
         * column by column, in an order that vectorises). */
        int32_t *acc = malloc(rowlen * sizeof *acc);
        if (!acc)
            abort();
        for (int yy = 0; yy < oh; yy++) {
            int ymin = bv[yy * 2], ymax = bv[yy * 2 + 1];
            const int32_t *k = &kv[(size_t)yy * (size_t)ksv];
            unsigned char *o = out->px + (size_t)yy * rowlen;
            for (size_t xx = 0; xx < rowlen; xx++)
                acc[xx] = 1 << (PRECISION_BITS - 1);
            for (int y = 0; y < ymax; y++) {
                const unsigned char *r = src->px + (size_t)(y + ymin) * rowlen;
                int32_t ky = k[y];
                for (size_t xx = 0; xx < rowlen; xx++)
                    acc[xx] += r[xx] * ky;
            }
            for (size_t xx = 0; xx < rowlen; xx++)
                o[xx] = clip8(acc[xx]);
        }
        free(acc);
    }
done:
    free(bh);
    free(bv);
    free(kh);
    free(kv);
}

void img_to_chw(const img_u8 *in, int x0, int y0, int w, int h, bool flip, const float *mean,
                const float *std, float *out)
{
    int c = in->c;
    for (int ch = 0; ch < c; ch++) {
        /* A byte's value, computed once: the same float as per pixel. */
        float lut[256], m = mean[ch], s = std[ch];
        for (int v = 0; v < 256; v++)
            lut[v] = ((float)v * (1.0f / 255.0f) - m) / s;
        for (int y = 0; y < h; y++) {
            const unsigned char *row =
                in->px + ((size_t)(y0 + y) * (size_t)in->w + (size_t)x0) * (size_t)c + (size_t)ch;
            float *o = out + ((size_t)ch * (size_t)h + (size_t)y) * (size_t)w;
            if (flip)
                for (int x = 0; x < w; x++)
                    o[x] = lut[row[(size_t)(w - 1 - x) * (size_t)c]];
            else
                for (int x = 0; x < w; x++)
                    o[x] = lut[row[(size_t)x * (size_t)c]];
        }
    }
}
