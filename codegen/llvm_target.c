/*
 * llvm_target.c: from a job to LLVM IR text or an object file.
 *
 * emit() (cg_emit_llvm, through llvm_load.c) runs the shared analysis (cg_lower, and cg_lower_backgrounds
 * for the background jobs with copies), has llvm_emit.c build the module,
 * verifies it (always in Debug builds, else on request), runs LLVM's
 * optimisation pipeline at the chosen -O level and writes the module
 * as text or, through the target machine, as an object file. The target is
 * the host's unless a triple names another; the CPU is the generic one of
 * the target, as the C path's `cc -O2` builds for, so a program built on one
 * node runs on the others. Everything is written to memory first: the
 * caller's file gets all of it or nothing.
 */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

static void init_targets(void)
{
    static bool done;
    if (done)
        return;
    LLVMInitializeAllTargetInfos();
    LLVMInitializeAllTargets();
    LLVMInitializeAllTargetMCs();
    LLVMInitializeAllAsmPrinters();
    done = true;
}

static const char *opt_pipeline(int level)
{
    switch (level) {
    case 1: return "default<O1>";
    case 2: return "default<O2>";
    case 3: return "default<O3>";
    default: return NULL;
    }
}

/* The target machine for triple (NULL: the host), or NULL after reporting. */
static LLVMTargetMachineRef target_machine(const char *triple, int opt_level, diag_ctx *d)
{
    init_targets();
    char *host = NULL;
    if (!triple || !*triple)
        triple = host = LLVMGetDefaultTargetTriple();
    char *norm = LLVMNormalizeTargetTriple(triple);
    LLVMTargetRef t;
    char *err = NULL;
    LLVMTargetMachineRef tm = NULL;
    if (LLVMGetTargetFromTriple(norm, &t, &err)) {
        diag_error(d, (src_loc){0}, "unknown target triple '%s': %s", triple,
                   err ? err : "no such target");
    } else {
        LLVMCodeGenOptLevel lv = opt_level <= 0   ? LLVMCodeGenLevelNone
                                 : opt_level == 1 ? LLVMCodeGenLevelLess
                                 : opt_level == 2 ? LLVMCodeGenLevelDefault
                                                  : LLVMCodeGenLevelAggressive;
        tm = LLVMCreateTargetMachine(t, norm, "", "", lv, LLVMRelocPIC, LLVMCodeModelDefault);
        if (!tm)
            diag_error(d, (src_loc){0}, "LLVM cannot make a target machine for '%s'", triple);
    }
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(norm);
    LLVMDisposeMessage(host);
    return tm;
}

static bool check_target(const char *triple, diag_ctx *d)
{
    LLVMTargetMachineRef tm = target_machine(triple, 0, d);
    if (!tm)
        return false;
    LLVMDisposeTargetMachine(tm);
    return true;
}

static void verify(LLVMModuleRef mod)
{
    char *msg = NULL;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg))
        ice("the LLVM module of the program does not verify:\n%s", msg ? msg : "");
    LLVMDisposeMessage(msg);
}

static bool write_all(FILE *out, const char *data, size_t n)
{
    return fwrite(data, 1, n, out) == n;
}

static bool emit(FILE *out, const ir_module *m, int job, const cg_llvm_options *o, diag_ctx *d)
{
    LLVMTargetMachineRef tm = target_machine(o->triple, o->opt_level, d);
    if (!tm)
        return false;
    arena *a = arena_new();
    cg_program *p = cg_lower(a, m, job, &o->cg, d);
    cg_program **bgs = NULL;
    int nbgs = p ? cg_lower_backgrounds(a, m, job, &bgs, d) : -1;
    bool ok = false;
    if (nbgs < 0)
        goto done_arena;
    LLVMContextRef cx = LLVMContextCreate();
    LLVMModuleRef mod =
        cg_llvm_build(a, cx, p, bgs, nbgs, o->producer ? o->producer : "burstc", o->opt_level > 0);
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, layout);
    LLVMDisposeTargetData(layout);
#ifdef BURSTC_DEBUG
    verify(mod);
#else
    if (o->verify)
        verify(mod);
#endif
    const char *pipeline = opt_pipeline(o->opt_level);
    if (pipeline) {
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMErrorRef e = LLVMRunPasses(mod, pipeline, tm, po);
        LLVMDisposePassBuilderOptions(po);
        if (e) {
            char *msg = LLVMGetErrorMessage(e);
            ice("LLVM's %s pipeline failed: %s", pipeline, msg);
        }
#ifdef BURSTC_DEBUG
        verify(mod);
#else
        if (o->verify)
            verify(mod);
#endif
    }
    if (o->kind == CG_LLVM_IR) {
        char *text = LLVMPrintModuleToString(mod);
        ok = write_all(out, text, strlen(text));
        LLVMDisposeMessage(text);
    } else {
        char *err = NULL;
        LLVMMemoryBufferRef buf = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err, &buf)) {
            diag_error(d, (src_loc){0}, "LLVM cannot emit an object file for this target: %s",
                       err ? err : "");
            LLVMDisposeMessage(err);
            goto done_module;
        }
        ok = write_all(out, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
        LLVMDisposeMemoryBuffer(buf);
    }
    if (!ok)
        diag_error(d, (src_loc){0}, "writing the program failed");
done_module:
    LLVMDisposeModule(mod);
    LLVMContextDispose(cx);
done_arena:
    arena_free(a);
    LLVMDisposeTargetMachine(tm);
    return ok;
}

/* What llvm_load.c looks up. */
__attribute__((visibility("default")))
const cg_llvm_entry cg_llvm_module = {CG_LLVM_ABI, check_target, emit};
