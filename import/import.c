/*
 * import.c: `burstc import` from start to end: read, link, infer, match,
 * write. Each step runs only when the ones before it succeeded.
 */
#include "import.h"

#include <string.h>

/* "path/to/resnet-50.onnx" -> "resnet_50" */
static const char *model_name(arena *a, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        n = (size_t)(dot - base);
    if (n > 64)
        n = 64;
    char *s = arena_alloc(a, n + 3), *o = s;
    if (n == 0 || (base[0] >= '0' && base[0] <= '9'))
        *o++ = 'm';
    for (size_t k = 0; k < n; k++) {
        char c = base[k];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        *o++ = ok ? c : '_';
    }
    *o = 0;
    return imp_reserved(s) ? arena_printf(a, "%s_onnx", s) : s;
}

static bool valid_name(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

char *imp_onnx_to_burst(arena *a, const imp_options *o, FILE *err, imp_summary *sum)
{
    if (o->name && (!valid_name(o->name) || imp_reserved(o->name))) {
        fprintf(err,
                "burstc import: error: --name '%s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)\n",
                o->name);
        return NULL;
    }
    imp_graph *g = imp_read_onnx(a, o->path, err, o->weights != NULL);
    if (!g || !imp_link(g) || !imp_infer(g))
        return NULL;
    imp_model m = {
        .a = a, .name = o->name ? o->name : model_name(a, o->path), .weights = o->weights};
    if (!imp_match(g, &m, o->loss))
        return NULL;
    if (sum)
        *sum = m.sum;
    char *text = imp_write(a, g, &m, o->path);
    if (o->weights && !imp_write_weights(g, &m, o->weights))
        return NULL;
    return text;
}
