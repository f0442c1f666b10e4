/* file_error.h: the one way the self-contained readers (npy.c, image.c,
 * imagefolder.c) report a bad file: "PATH: why" in the caller's buffer, and
 * false, so a check reads `return file_error(err, errlen, path, "...", ...);`.
 * Header-only, so each reader still compiles alone (its fuzz target). */
#ifndef BURSTRT_FILE_ERROR_H
#define BURSTRT_FILE_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static inline bool file_error(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static inline bool file_error(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", path, why);
    return false;
}

#endif
