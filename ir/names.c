/*
 * names.c: string-keyed tables, the one hash table of ir/ and frontend/.
 *
 * Names are looked up everywhere (graphs, gpus, clusters and jobs of a
 * module; constants and layers in the front end's scopes), and inputs may
 * hold a hundred thousand of them, so every lookup is a hash probe, never a
 * walk over a list. Open addressing with linear probing, at most half full;
 * keys are borrowed (they live in the compilation's arena).
 */
#include "ir.h"

#include <string.h>

static uint64_t names_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int ir_names_get(const ir_names *t, const char *key)
{
    if (!t->cap)
        return -1;
    uint64_t mask = (uint64_t)t->cap - 1;
    for (uint64_t i = names_hash(key) & mask; t->key[i]; i = (i + 1) & mask)
        if (strcmp(t->key[i], key) == 0)
            return t->val[i];
    return -1;
}

void ir_names_set(arena *a, ir_names *t, const char *key, int val)
{
    if (2 * (t->n + 1) > t->cap) {
        ir_names old = *t;
        if (old.cap > (1 << 29))
            ice("name table too large");
        t->cap = old.cap ? 2 * old.cap : 64;
        t->key = arena_alloc(a, sizeof *t->key * (size_t)t->cap);
        t->val = arena_alloc(a, sizeof *t->val * (size_t)t->cap);
        t->n = 0;
        for (int i = 0; i < old.cap; i++)
            if (old.key[i])
                ir_names_set(a, t, old.key[i], old.val[i]);
    }
    uint64_t mask = (uint64_t)t->cap - 1, i = names_hash(key) & mask;
    for (; t->key[i]; i = (i + 1) & mask)
        if (strcmp(t->key[i], key) == 0) {
            t->val[i] = val;
            return;
        }
    t->key[i] = key;
    t->val[i] = val;
    t->n++;
}
