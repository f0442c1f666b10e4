/* image.h: decoding and transforming the images of `--data images:DIR` (docs/runtime.md,
 * "Data"): JPEG through libjpeg-turbo's libjpeg API, PNG through libpng's simplified
 * API, and the resampling of Pillow (bilinear, with its antialiasing support and its
 * fixed-point rounding), so that a crop resized here has the pixels torchvision's
 * transforms give on the same file. Self-contained (C, POSIX and the two libraries), so
 * that the fuzz target compiles it alone. Errors go to the caller's buffer, naming the
 * file; nothing here exits, and a corrupt or truncated file is an error (libjpeg's
 * warnings included), never an abort. Built without the libraries (IMG_HAVE_JPEG,
 * IMG_HAVE_PNG unset), decoding such a file is an error that says so. */
#ifndef BURSTRT_IMAGE_H
#define BURSTRT_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Pillow's limit against decompression bombs (twice its warning threshold). */
#define IMG_MAX_PIXELS 178956970

/* 8-bit pixels, row-major, c channels interleaved (1: gray, 3: RGB). */
typedef struct img_u8 {
    int w, h, c;
    unsigned char *px;
    size_t cap; /* bytes allocated for px (reused between images) */
} img_u8;

typedef struct img_decoder img_decoder;
img_decoder *img_decoder_new(void);
void img_decoder_free(img_decoder *d);

/* Whether this build decodes JPEG and PNG, and the format of a file by its first bytes
 * ("jpeg", "png", or NULL). */
bool img_can_decode(const char *format);
const char *img_format(const unsigned char *buf, size_t len);

/* The size of the image in buf without decoding it. */
bool img_probe(img_decoder *d, const unsigned char *buf, size_t len, const char *path, int *w,
               int *h, char *err, size_t errlen);
/* Decodes buf into out as `channels` (1: as Pillow's convert("L"), 3: convert("RGB")).
 * A JPEG may be decoded at a reduced scale 1/k (k <= shrink, libjpeg's DCT scaling);
 * out's w and h say what was decoded. */
bool img_decode(img_decoder *d, const unsigned char *buf, size_t len, const char *path,
                int channels, double shrink, img_u8 *out, char *err, size_t errlen);
/* img_decode of what covers region {x0, y0, x1, y1} (the file's pixels) widened by pad
 * pixels of the decoded scale on each side: out holds pixels [win[0], win[0] + out->w) x
 * [win[1], win[1] + out->h) of the decoded image, which is win[2] x win[3], the same
 * pixels as decoding the whole image at that scale. A JPEG is decoded only there (whole
 * iMCU columns, and no rows below; a file without its EOI marker is read whole, so that
 * truncation stays an error), a PNG whole (win {0, 0, w, h}). */
bool img_decode_region(img_decoder *d, const unsigned char *buf, size_t len, const char *path,
                       int channels, double shrink, const int region[4], int pad, img_u8 *out,
                       int win[4], char *err, size_t errlen);

/* Pillow's Image.resize((ow, oh), BILINEAR, box) of in's region box = {x0, y0, x1, y1}
 * into out. tmp is scratch (both grown as needed). */
void img_resize(const img_u8 *in, const double box[4], int ow, int oh, img_u8 *out, img_u8 *tmp);
/* img_resize of an fw x fh image of which in holds pixels [ox, ox + in->w) x [oy, oy +
 * in->h) (ox, oy may be negative: in then holds pixels outside the image too, never
 * read); in must hold every pixel the filter reads (box widened by its support). */
void img_resize_at(const img_u8 *in, int ox, int oy, int fw, int fh, const double box[4], int ow,
                   int oh, img_u8 *out, img_u8 *tmp);
void img_free(img_u8 *im);

/* Pixels [x0, x0+w) x [y0, y0+h) of in (inside it), mirrored left-right when flip, as
 * channel-major floats (p/255 - mean[c]) / std[c]. */
void img_to_chw(const img_u8 *in, int x0, int y0, int w, int h, bool flip, const float *mean,
                const float *std, float *out);

#endif

/* ---- imagefolder.c: the ImageFolder layout and one sample's transform ---------------- */

/* DIR/CLASS/.../FILE: classes are DIR's subdirectories in sorted (byte) order, each
 * class's files those of its tree (symbolic links followed, at most IMG_MAX_DEPTH deep)
 * with an image extension, sorted by directory then name: torchvision's ImageFolder.
 * Files of other extensions are skipped as it skips them; .bmp, .ppm, .pgm, .tif, .tiff
 * and .webp files, which it would read, are an error here. */
#define IMG_MAX_DEPTH 32
typedef struct img_folder {
    int nclasses;
    char **classes;  /* names, sorted */
    int64_t n;       /* files */
    char **paths;    /* DIR/CLASS/.../FILE, sorted as above within each class */
    int32_t *labels; /* class index of each file */
} img_folder;

/* Scans dir; false with "PATH: cause" in err (no classes, an empty class, an image of a
 * format this reader lacks, an unreadable directory). */
bool img_folder_scan(const char *dir, img_folder *f, char *err, size_t errlen);
void img_folder_free(img_folder *f);

/* One decoding thread's state (reused between samples). */
typedef struct img_worker {
    img_decoder *dec;
    img_u8 full, tmp, out;
    unsigned char *buf;
    size_t cap;
    bool full_scale; /* never decode a JPEG at a reduced scale (tests: exact crops) */
} img_worker;
void img_worker_init(img_worker *w);
void img_worker_free(img_worker *w);

/* Uniforms in [0,1) that one training transform consumes: RandomResizedCrop's 10 tries
 * of (scale, log-ratio), its offsets, the flip. */
#define IMG_DRAWS 23

/* Reads and transforms the image at path into out (c x h x w floats, normalised): with
 * draws u (IMG_DRAWS of them), torchvision's RandomResizedCrop((h, w), scale (0.08, 1),
 * ratio (3/4, 4/3)) and RandomHorizontalFlip; without (u NULL), Resize(max(h, w)) of the
 * shorter side and CenterCrop((h, w)). crop, when not NULL, receives the crop in the
 * original image's pixels (top, left, height, width) and the flip. */
bool img_sample(img_worker *w, const char *path, int c, int h, int wd, const float *u,
                const float *mean, const float *std, float *out, int crop[5], char *err,
                size_t errlen);
