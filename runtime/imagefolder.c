/* imagefolder.c: the ImageFolder layout of `--data images:DIR` (image.h), and the
 * transform of one sample: torchvision's RandomResizedCrop + RandomHorizontalFlip for
 * training (its get_params transcribed, with the caller's counter-based draws in place
 * of torch's generator, so a sample's crop is a function of (seed, epoch, sample)), or
 * Resize + CenterCrop, then ToTensor and Normalize. Self-contained like image.c. */
#include "image.h"
#include "file_error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A growing list of strings. */
typedef struct {
    char **s;
    int64_t n, cap;
} strlist;

static bool push(strlist *l, const char *s)
{
    if (l->n == l->cap) {
        int64_t nc = l->cap ? l->cap * 2 : 64;
        char **p = realloc(l->s, (size_t)nc * sizeof *p);
        if (!p)
            return false;
        l->s = p;
        l->cap = nc;
    }
    if (!(l->s[l->n] = strdup(s)))
        return false;
    l->n++;
    return true;
}

static void strlist_free(strlist *l)
{
    for (int64_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    memset(l, 0, sizeof *l);
}

/* 1: an image this reader decodes, -1: one torchvision reads and this does not, 0: other. */
static int image_kind(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot)
        return 0;
    static const char *const ours[] = {".jpg", ".jpeg", ".png"};
    static const char *const theirs[] = {".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp"};
    for (size_t i = 0; i < sizeof ours / sizeof *ours; i++)
        if (!strcasecmp(dot, ours[i]))
            return 1;
    for (size_t i = 0; i < sizeof theirs / sizeof *theirs; i++)
        if (!strcasecmp(dot, theirs[i]))
            return -1;
    return 0;
}

/* The entries of dir (not . and ..), sorted; subdirectories and files apart. */
static bool list_dir(const char *dir, strlist *dirs, strlist *files, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return file_error(err, errlen, dir, "cannot open the directory: %s", strerror(errno));
    struct dirent *e;
    char path[4096];
    bool ok = true;
    while (ok && (errno = 0, e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) {
            ok = file_error(err, errlen, dir, "a path longer than %zu bytes inside", sizeof path);
            break;
        }
        struct stat st;
        if (stat(path, &st) != 0) /* follows links, as torchvision's is_dir and walk do */
            continue;             /* a dangling link: os.walk skips it too */
        if (S_ISDIR(st.st_mode))
            ok = push(dirs, e->d_name);
        else if (files)
            ok = push(files, e->d_name);
        if (!ok)
            file_error(err, errlen, dir, "out of memory listing the directory");
    }
    if (ok && errno)
        ok = file_error(err, errlen, dir, "cannot read the directory: %s", strerror(errno));
    closedir(d);
    /* (An empty list has no array: qsort must not see its NULL.) */
    if (dirs->n > 1)
        qsort(dirs->s, (size_t)dirs->n, sizeof *dirs->s, by_name);
    if (files && files->n > 1)
        qsort(files->s, (size_t)files->n, sizeof *files->s, by_name);
    return ok;
}

/* The images under dir (depth levels below the class folder), pushed as paths; their
 * directory's length goes to dirlen (same index), for the sort below. */
static bool walk(const char *dir, int depth, strlist *out, strlist *dirlen, char *err,
                 size_t errlen)
{
    if (depth > IMG_MAX_DEPTH)
        return file_error(err, errlen, dir, "directories nested more than %d deep (a link loop?)",
                          IMG_MAX_DEPTH);
    strlist dirs = {0}, files = {0};
    bool ok = list_dir(dir, &dirs, &files, err, errlen);
    char path[4096], num[32];
    snprintf(num, sizeof num, "%zu", strlen(dir));
    for (int64_t i = 0; ok && i < files.n; i++) {
        int k = image_kind(files.s[i]);
        snprintf(path, sizeof path, "%s/%s", dir, files.s[i]);
        if (k < 0)
            ok =
                file_error(err, errlen, path,
                           "torchvision would read this image, but this reader takes only JPEG and "
                           "PNG files");
        else if (k > 0 && (!push(out, path) || !push(dirlen, num)))
            ok = file_error(err, errlen, dir, "out of memory");
    }
    for (int64_t i = 0; ok && i < dirs.n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dirs.s[i]);
        ok = walk(path, depth + 1, out, dirlen, err, errlen);
    }
    strlist_free(&dirs);
    strlist_free(&files);
    return ok;
}

/* sorted(os.walk(class_dir)), then sorted(fnames): by directory path, then file name. */
typedef struct {
    char *path;
    size_t dirlen;
} entry;

static int by_walk_order(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    size_t n = a->dirlen < b->dirlen ? a->dirlen : b->dirlen;
    int r = memcmp(a->path, b->path, n);
    if (r)
        return r;
    if (a->dirlen != b->dirlen)
        return a->dirlen < b->dirlen ? -1 : 1;
    return strcmp(a->path + a->dirlen + 1, b->path + b->dirlen + 1);
}

static bool sort_class(strlist *paths, strlist *dirlen, int64_t from, char *err, size_t errlen,
                       const char *dir)
{
    int64_t n = paths->n - from;
    entry *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    if (!e)
        return file_error(err, errlen, dir, "out of memory");
    for (int64_t i = 0; i < n; i++)
        e[i] = (entry){paths->s[from + i], (size_t)strtoull(dirlen->s[from + i], NULL, 10)};
    qsort(e, (size_t)n, sizeof *e, by_walk_order);
    for (int64_t i = 0; i < n; i++)
        paths->s[from + i] = e[i].path;
    free(e);
    return true;
}

bool img_folder_scan(const char *dir, img_folder *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    strlist classes = {0}, paths = {0}, dirlen = {0};
    int32_t *labels = NULL;
    int64_t cap = 0;
    bool ok = list_dir(dir, &classes, NULL, err, errlen);
    if (ok && classes.n == 0)
        ok = file_error(err, errlen, dir, "no class folders (expected DIR/CLASS/IMAGE files)");
    if (ok && classes.n > INT32_MAX)
        ok = file_error(err, errlen, dir, "too many classes");
    for (int64_t c = 0; ok && c < classes.n; c++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, classes.s[c]);
        int64_t before = paths.n;
        ok = walk(path, 0, &paths, &dirlen, err, errlen) &&
             sort_class(&paths, &dirlen, before, err, errlen, path);
        if (ok && paths.n == before)
            ok = file_error(err, errlen, path,
                            "an empty class folder (no .jpg, .jpeg or .png files)");
        if (ok && paths.n > cap) {
            cap = paths.n * 2;
            int32_t *nl = realloc(labels, (size_t)cap * sizeof *nl);
            if (!nl)
                ok = file_error(err, errlen, dir, "out of memory");
            else
                labels = nl;
        }
        for (int64_t i = before; ok && i < paths.n; i++)
            labels[i] = (int32_t)c;
    }
    strlist_free(&dirlen);
    if (!ok) {
        strlist_free(&classes);
        strlist_free(&paths);
        free(labels);
        return false;
    }
    f->nclasses = (int)classes.n;
    f->classes = classes.s;
    f->n = paths.n;
    f->paths = paths.s;
    f->labels = labels;
    return true;
}

void img_folder_free(img_folder *f)
{
    for (int i = 0; i < f->nclasses; i++)
        free(f->classes[i]);
    for (int64_t i = 0; i < f->n; i++)
        free(f->paths[i]);
    free(f->classes);
    free(f->paths);
    free(f->labels);
    memset(f, 0, sizeof *f);
}

void img_worker_init(img_worker *w)
{
    memset(w, 0, sizeof *w);
    w->dec = img_decoder_new();
}

void img_worker_free(img_worker *w)
{
    img_decoder_free(w->dec);
    img_free(&w->full);
    img_free(&w->tmp);
    img_free(&w->out);
    free(w->buf);
    memset(w, 0, sizeof *w);
}

/* The whole file into w->buf; *len its size. */
static bool slurp(img_worker *w, const char *path, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return file_error(err, errlen, path, "cannot open: %s", strerror(errno));
    struct stat st;
    bool ok = true;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ok = file_error(err, errlen, path, "not a regular file");
    } else if (st.st_size > ((off_t)1 << 30)) {
        ok = file_error(err, errlen, path, "an image file of more than 1 GiB");
    } else {
        size_t n = (size_t)st.st_size;
        if (n + 1 > w->cap) {
            unsigned char *b = realloc(w->buf, n + 1);
            if (!b)
                ok = file_error(err, errlen, path, "out of memory for %zu bytes", n);
            else {
                w->buf = b;
                w->cap = n + 1;
            }
        }
        size_t got = 0;
        while (ok && got < n) {
            ssize_t r = pread(fd, w->buf + got, n - got, (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                ok = file_error(err, errlen, path, "read error: %s",
                                r < 0 ? strerror(errno) : "short");
            else
                got += (size_t)r;
        }
        *len = got;
    }
    close(fd);
    return ok;
}

/* Python's round() of k/2 (half to even). */
static int half_even(int k)
{
    int q = k / 2;
    return k % 2 == 0 || q % 2 == 0 ? q : q + 1;
}

bool img_sample(img_worker *w, const char *path, int c, int h, int wd, const float *u,
                const float *mean, const float *std, float *out, int crop[5], char *err,
                size_t errlen)
{
    size_t len = 0;
    int iw, ih;
    if (!slurp(w, path, &len, err, errlen) ||
        !img_probe(w->dec, w->buf, len, path, &iw, &ih, err, errlen))
        return false;
    if (u) {
        /* torchvision 0.14 RandomResizedCrop.get_params */
        double area = (double)ih * iw, lr0 = log(3.0 / 4.0), lr1 = log(4.0 / 3.0);
        int ci = 0, cj = 0, chh = 0, cww = 0;
        bool found = false;
        for (int t = 0; t < 10 && !found; t++) {
            double target = area * (0.08 + (1.0 - 0.08) * u[2 * t]);
            double ar = exp(lr0 + (lr1 - lr0) * u[2 * t + 1]);
            int cw = (int)nearbyint(sqrt(target * ar)), chx = (int)nearbyint(sqrt(target / ar));
            if (cw > 0 && cw <= iw && chx > 0 && chx <= ih) {
                ci = (int)(u[20] * (ih - chx + 1));
                cj = (int)(u[21] * (iw - cw + 1));
                chh = chx;
                cww = cw;
                found = true;
            }
        }
        if (!found) { /* the central crop of the ratio's nearest bound */
            double in_ratio = (double)iw / ih;
            if (in_ratio < 3.0 / 4.0) {
                cww = iw;
                chh = (int)nearbyint(cww / (3.0 / 4.0));
            } else if (in_ratio > 4.0 / 3.0) {
                chh = ih;
                cww = (int)nearbyint(chh * (4.0 / 3.0));
            } else {
                cww = iw;
                chh = ih;
            }
            ci = (ih - chh) / 2;
            cj = (iw - cww) / 2;
        }
        bool flip = u[22] < 0.5f;
        /* Decode at the smallest scale that keeps the crop at least the output's size, and
         * only the part of the image the resampling reads: the crop at full scale, the
         * crop's box and the filter's support (at most its scale, in the decoded pixels)
         * at a reduced one. */
        double shrink = fmin((double)cww / wd, (double)chh / h);
        shrink = shrink < 1 || w->full_scale ? 1 : shrink;
        int region[4] = {cj, ci, cj + cww, ci + chh}, win[4];
        int pad = shrink >= 2 ? (int)ceil(fmax((double)cww / wd, (double)chh / h)) + 2 : 0;
        if (!img_decode_region(w->dec, w->buf, len, path, c, shrink, region, pad, &w->full, win,
                               err, errlen))
            return false;
        if (win[2] == iw && win[3] == ih) {
            /* Pillow: crop to integers, then resize the whole crop, whose pixel (0, 0) is
             * the decoded part's (cj - win[0], ci - win[1]). */
            double whole[4] = {0, 0, cww, chh};
            img_resize_at(&w->full, win[0] - cj, win[1] - ci, cww, chh, whole, wd, h, &w->out,
                          &w->tmp);
        } else {
            double sx = (double)win[2] / iw, sy = (double)win[3] / ih;
            double box[4] = {cj * sx, ci * sy, (cj + cww) * sx, (ci + chh) * sy};
            img_resize_at(&w->full, win[0], win[1], win[2], win[3], box, wd, h, &w->out, &w->tmp);
        }
        img_u8 t = w->full;
        w->full = w->out;
        w->out = t;
        img_to_chw(&w->full, 0, 0, wd, h, flip, mean, std, out);
        if (crop) {
            crop[0] = ci;
            crop[1] = cj;
            crop[2] = chh;
            crop[3] = cww;
            crop[4] = flip;
        }
        return true;
    }
    if (!img_decode(w->dec, w->buf, len, path, c, 1, &w->full, err, errlen))
        return false;
    /* torchvision 0.14 Resize(size) with one number: the shorter side to size, the longer
     * int(size * long / short); unchanged when that is the image's size. */
    int size = h > wd ? h : wd, nw, nh;
    if (iw <= ih) {
        nw = size;
        nh = (int)((double)size * ih / iw);
    } else {
        nh = size;
        nw = (int)((double)size * iw / ih);
    }
    const img_u8 *src = &w->full;
    if (nw != iw || nh != ih) {
        double whole[4] = {0, 0, iw, ih};
        img_resize(&w->full, whole, nw, nh, &w->out, &w->tmp);
        src = &w->out;
    }
    int top = half_even(nh - h), left = half_even(nw - wd);
    img_to_chw(src, left, top, wd, h, false, mean, std, out);
    if (crop) {
        crop[0] = top;
        crop[1] = left;
        crop[2] = h;
        crop[3] = wd;
        crop[4] = 0;
    }
    return true;
}
