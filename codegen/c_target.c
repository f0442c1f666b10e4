/*
 * c_target.c: from a job to the C text of its training program.
 *
 * cg_emit_c() runs the shared analysis (cg_lower, and cg_lower_backgrounds for
 * the background jobs with copies) and has write_c.c print the result, as
 * llvm_target.c does for LLVM: the drivers sit above the lowering and the
 * writers, which never call each other.
 */
#include "codegen.h"

bool cg_emit_c(FILE *out, const ir_module *m, int job, const cg_options *o, diag_ctx *d)
{
    arena *a = arena_new();
    cg_program *p = cg_lower(a, m, job, o, d);
    cg_program **bgs = NULL;
    int nbgs = p ? cg_lower_backgrounds(a, m, job, &bgs, d) : -1;
    bool ok = nbgs >= 0;
    if (ok)
        cg_write_c(out, p, bgs, nbgs);
    arena_free(a);
    return ok;
}
