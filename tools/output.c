/*
 * output.c: atomic output files for every command that writes one.
 *
 * Output goes to a temporary file beside the target and is renamed over it
 * only when everything was written, so an error or a crash never leaves a
 * half-written plan, IR dump or trace behind.
 */
#include "codegen.h"
#include "tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool out_open(out_file *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    if (strcmp(path, "-") == 0) {
        o->fp = stdout;
        return true;
    }
    size_t n = strlen(path) + 16;
    o->tmp = plan_xrealloc(NULL, n, 1);
    snprintf(o->tmp, n, "%s.tmpXXXXXX", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        fprintf(stderr, "burstc: error: cannot write '%s': %s\n", path, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        return false;
    }
    /* mkstemp makes the file 0600; an output is made as any other file the
     * user creates, with the permissions the umask leaves. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    o->fp = fdopen(fd, "w");
    if (!o->fp) {
        fprintf(stderr, "burstc: error: cannot write '%s': %s\n", path, strerror(errno));
        close(fd);
        unlink(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
        return false;
    }
    return true;
}

bool out_commit(out_file *o)
{
    if (o->fp == stdout) {
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "burstc: error: writing to standard output failed\n");
            return false;
        }
        return true;
    }
    bool ok = !ferror(o->fp);
    int err = errno;
    if (fclose(o->fp) != 0) {
        ok = false;
        err = errno;
    }
    o->fp = NULL;
    if (ok && rename(o->tmp, o->path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        fprintf(stderr, "burstc: error: cannot write '%s': %s\n", o->path, strerror(err));
        unlink(o->tmp);
    }
    free(o->tmp);
    o->tmp = NULL;
    return ok;
}

void out_abort(out_file *o)
{
    if (o->fp && o->fp != stdout) {
        fclose(o->fp);
        unlink(o->tmp);
    }
    o->fp = NULL;
    free(o->tmp);
    o->tmp = NULL;
}

bool out_write_c_program(const char *path, const ir_module *m, int job, const cg_options *o,
                         diag_ctx *d)
{
    out_file out;
    if (!out_open(&out, path))
        return false;
    if (!cg_emit_c(out.fp, m, job, o, d)) {
        out_abort(&out);
        return false;
    }
    return out_commit(&out);
}

bool out_write_llvm_program(const char *path, const ir_module *m, int job, const cg_llvm_options *o,
                            diag_ctx *d)
{
    out_file out;
    if (!out_open(&out, path))
        return false;
    if (!cg_emit_llvm(out.fp, m, job, o, d)) {
        out_abort(&out);
        return false;
    }
    return out_commit(&out);
}
