/*
 * readfile.c: reading an input file whole, safely (readfile.h).
 *
 * The file is opened non-blocking, so that opening a FIFO with no writer
 * returns at once instead of waiting for one; fstat then tells what was
 * opened, and anything but a regular file is refused before a byte is read.
 * The size fstat reports is checked against the cap, and the read loop checks
 * it again, since a file may grow (or be a special file that reports size 0)
 * between the check and the read.
 */
#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode))
        return "it is a directory";
    if (S_ISFIFO(mode))
        return "it is a FIFO, not a regular file";
    if (S_ISCHR(mode))
        return "it is a character device, not a regular file";
    if (S_ISBLK(mode))
        return "it is a block device, not a regular file";
    if (S_ISSOCK(mode))
        return "it is a socket, not a regular file";
    return "it is not a regular file";
}

static void cap_text(char *why, size_t nwhy, size_t cap)
{
    if (cap % ((size_t)1 << 20) == 0)
        snprintf(why, nwhy, "it is larger than %zu MiB (the most burstc reads from one file)",
                 cap >> 20);
    else
        snprintf(why, nwhy, "it is larger than %zu bytes (the most burstc reads from one file)",
                 cap);
}

bool ir_file_read(const char *path, size_t cap, char **data, size_t *len, char *why, size_t nwhy)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, nwhy, "%s", strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, nwhy, "%s", strerror(errno));
        close(fd);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, nwhy, "%s", kind_of(st.st_mode));
        close(fd);
        return false;
    }
    if (st.st_size < 0 || (unsigned long long)st.st_size > cap) {
        cap_text(why, nwhy, cap);
        close(fd);
        return false;
    }
    /* A regular file never blocks; blocking mode makes a short read an
     * ordinary one. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    size_t size = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(why, nwhy, "out of memory (%zu bytes)", size + 1);
        close(fd);
        return false;
    }
    for (;;) {
        if (n == size) {
            /* It grew since fstat: read on, up to the cap and one byte past
             * it (to tell "exactly the cap" from "more"). */
            if (size > cap) {
                free(buf);
                close(fd);
                cap_text(why, nwhy, cap);
                return false;
            }
            size_t ns = size * 2 > cap + 1 ? cap + 1 : size * 2;
            char *nb = realloc(buf, ns + 1);
            if (!nb) {
                free(buf);
                close(fd);
                snprintf(why, nwhy, "out of memory (%zu bytes)", ns + 1);
                return false;
            }
            buf = nb;
            size = ns;
        }
        ssize_t got = read(fd, buf + n, size - n);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            snprintf(why, nwhy, "reading it failed: %s", strerror(errno));
            free(buf);
            close(fd);
            return false;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (n > cap) {
        free(buf);
        cap_text(why, nwhy, cap);
        return false;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return true;
}
