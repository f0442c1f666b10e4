/*
 * arena.c: the one allocator of the compiler.
 *
 * A compilation allocates everything (AST, IR, strings) from one arena and
 * frees it in one call at exit, so no pass ever frees a node. Blocks grow
 * geometrically; allocations are zeroed and aligned for any type.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct arena_block {
    struct arena_block *next;
    size_t size, used;
    _Alignas(max_align_t) unsigned char data[];
} arena_block;

struct arena {
    arena_block *head;
    size_t next_size;
};

void out_of_memory(size_t bytes)
{
    fprintf(stderr, "burstc: out of memory (%zu bytes)\n", bytes);
    exit(2);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        out_of_memory(n);
    return p;
}

arena *arena_new(void)
{
    arena *a = xmalloc(sizeof *a);
    a->head = NULL;
    a->next_size = 64 * 1024;
    return a;
}

void arena_free(arena *a)
{
    if (!a)
        return;
    arena_block *b = a->head;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(a);
}

void *arena_alloc(arena *a, size_t size)
{
    const size_t align = _Alignof(max_align_t);
    size = (size + align - 1) & ~(align - 1);
    if (size == 0)
        size = align;
    arena_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t bsize = a->next_size;
        while (bsize < size)
            bsize *= 2;
        if (a->next_size < 16 * 1024 * 1024)
            a->next_size *= 2;
        b = xmalloc(sizeof *b + bsize);
        b->size = bsize;
        b->used = 0;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *arena_strdup(arena *a, const char *s)
{
    return arena_strndup(a, s, strlen(s));
}

char *arena_printf(arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        ice("vsnprintf failed");
    char *p = arena_alloc(a, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void arena_grow(arena *a, void **items, int *cap, int need, size_t elem_size)
{
    if (need <= *cap)
        return;
    int ncap = *cap ? *cap : 8;
    while (ncap < need) {
        if (ncap > (1 << 29))
            ice("table too large");
        ncap *= 2;
    }
    void *p = arena_alloc(a, (size_t)ncap * elem_size);
    if (*cap)
        memcpy(p, *items, (size_t)*cap * elem_size);
    *items = p;
    *cap = ncap;
}
