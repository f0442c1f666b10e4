/*
 * load.c: reading a Burst program, imports included.
 *
 * The first stage of the front end: it reads the root file, parses it
 * (grammar/) and follows every `import "path"` (relative to the importing
 * file) depth first, so a program's files come out dependencies first. A
 * file is read once however often it is imported (files are told apart by
 * their real path); an import that leads back to a file still being read is
 * a cyclic import, and an import of a file that cannot be read is an error
 * at the import.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "frontend.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct fe_loader {
    arena *arena;
    diag_ctx *diag;
    fe_program *prog;
    int nknown, known_cap;
    const char **known; /* real paths of files read or being read */
    bool *done;         /* per known path: finished (false: on the stack) */
    int done_cap;
    ir_names index; /* real path -> its index in known */
    int depth;
} fe_loader;

/* The directory part of path, with its trailing '/', or "" for none. */
static const char *fe_dirname(arena *a, const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? arena_strndup(a, path, (size_t)(slash - path) + 1) : "";
}

static const char *fe_real_path(arena *a, const char *path)
{
    char buf[PATH_MAX];
    if (realpath(path, buf))
        return arena_strdup(a, buf);
    return arena_strdup(a, path);
}

static void fe_load_file(fe_loader *ld, const src_file *src);

/* Follows one import item of the file src. */
static void fe_load_import(fe_loader *ld, const src_file *src, fe_item *it)
{
    const char *path =
        it->path[0] == '/'
            ? it->path
            : arena_printf(ld->arena, "%s%s", fe_dirname(ld->arena, src->path), it->path);
    const char *real = fe_real_path(ld->arena, path);
    int i = ir_names_get(&ld->index, real);
    if (i >= 0) {
        if (!ld->done[i])
            diag_error(ld->diag, it->loc, "cyclic import of '%s'", it->path);
        return;
    }
    if (ld->depth >= 200) {
        diag_error(ld->diag, it->loc, "imports nest too deeply (200 levels)");
        return;
    }
    const char *why;
    src_file *f = src_file_read(ld->arena, path, &why);
    if (!f) {
        diag_error(ld->diag, it->loc, "cannot import '%s': %s", it->path, why);
        return;
    }
    fe_load_file(ld, f);
    it->imported = ld->prog->files[ld->prog->nfiles - 1];
}

static void fe_load_file(fe_loader *ld, const src_file *src)
{
    int me = ld->nknown;
    arena_grow(ld->arena, (void **)&ld->known, &ld->known_cap, me + 1, sizeof *ld->known);
    arena_grow(ld->arena, (void **)&ld->done, &ld->done_cap, me + 1, sizeof *ld->done);
    ld->known[me] = fe_real_path(ld->arena, src->path);
    ir_names_set(ld->arena, &ld->index, ld->known[me], me);
    ld->done[me] = false;
    ld->nknown++;

    int before = ld->diag->nerrors;
    fe_file *f = fe_parse(ld->arena, src, ld->diag);
    if (!f->items && ld->diag->nerrors == before)
        diag_error(ld->diag, (src_loc){src, 1, 1},
                   "'%s' is empty: expected a model, gpu, cluster, job, block, let or import",
                   src->path);
    ld->depth++;
    for (fe_item *it = f->items; it; it = it->next)
        if (it->kind == IT_IMPORT)
            fe_load_import(ld, src, it);
    ld->depth--;
    ld->done[me] = true;
    fe_program *p = ld->prog;
    arena_grow(ld->arena, (void **)&p->files, &p->cap, p->nfiles + 1, sizeof *p->files);
    p->files[p->nfiles++] = f;
}

fe_program *fe_load(arena *a, const char *path, const char *text, diag_ctx *d)
{
    src_file *src;
    if (text) {
        src = src_file_from_string(a, path, text, strlen(text));
    } else {
        const char *why;
        src = src_file_read(a, path, &why);
        if (!src) {
            diag_error(d, (src_loc){0}, "cannot read '%s': %s", path, why);
            return NULL;
        }
    }
    fe_loader ld = {.arena = a, .diag = d};
    ld.prog = arena_alloc(a, sizeof *ld.prog);
    fe_load_file(&ld, src);
    return ld.prog;
}

ir_module *fe_compile(arena *a, const char *path, diag_ctx *d)
{
    fe_program *p = fe_load(a, path, NULL, d);
    return p ? fe_lower(a, p, d) : NULL;
}

ir_module *fe_compile_string(arena *a, const char *path, const char *text, diag_ctx *d)
{
    fe_program *p = fe_load(a, path, text, d);
    return p ? fe_lower(a, p, d) : NULL;
}
