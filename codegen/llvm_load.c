/*
 * llvm_load.c: the LLVM writer, loaded when a command first needs it.
 *
 * llvm_emit.c and llvm_target.c are built as burstc-llvm.so beside the
 * burstc executable; only that module links libLLVM, so `burstc plan`,
 * `sim`, `stats` and a C build never load it. The module resolves the rest
 * of the compiler (lowering, the IR, diagnostics) from the executable,
 * which exports its symbols. BURSTC_LLVM_MODULE names another file.
 */
#include "codegen.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODULE_NAME "burstc-llvm.so"

static const cg_llvm_entry *entry;

/* dir/burstc-llvm.so for the directory of the running executable. */
static bool module_path(char *out, size_t n)
{
    const char *env = getenv("BURSTC_LLVM_MODULE");
    if (env && *env)
        return (size_t)snprintf(out, n, "%s", env) < n;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return false;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = 0;
    return (size_t)snprintf(out, n, "%s/" MODULE_NAME, exe) < n;
}

static bool load(diag_ctx *d)
{
    if (entry)
        return true;
    char path[PATH_MAX];
    if (!module_path(path, sizeof path)) {
        diag_error(d, (src_loc){0},
                   "cannot find the LLVM code generator " MODULE_NAME
                   " (no path to this executable; set BURSTC_LLVM_MODULE)");
        return false;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        diag_error(d, (src_loc){0}, "cannot load the LLVM code generator: %s", dlerror());
        return false;
    }
    const cg_llvm_entry *e = dlsym(h, "cg_llvm_module");
    if (!e || e->abi != CG_LLVM_ABI) {
        diag_error(d, (src_loc){0},
                   "%s is not this burstc's LLVM code generator (%s); rebuild burstc", path,
                   e ? "another version" : "no cg_llvm_module in it");
        dlclose(h);
        return false;
    }
    entry = e; /* kept loaded until exit */
    return true;
}

bool cg_llvm_check_target(const char *triple, diag_ctx *d)
{
    return load(d) && entry->check_target(triple, d);
}

bool cg_emit_llvm(FILE *out, const ir_module *m, int job, const cg_llvm_options *o, diag_ctx *d)
{
    return load(d) && entry->emit(out, m, job, o, d);
}
