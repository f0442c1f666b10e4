/* data.c: comparison records and the table that maps item names to ids.
 *
 * Both the file parser and the BTL generator fill a rank_data; graph.c turns it into
 * the CSR comparison graph.  Items are named by arbitrary strings, so names go through
 * an open-addressing hash table (FNV-1a, linear probing) that stores ids only: the
 * strings themselves live in names[], which is what output code needs anyway. */
#include "rank.h"

#include <stdlib.h>
#include <string.h>

void rank_data_init(rank_data *d)
{
    memset(d, 0, sizeof *d);
}

void rank_data_free(rank_data *d)
{
    if (d->names) {
        for (int32_t i = 0; i < d->n; i++)
            free(d->names[i]);
        free(d->names);
    }
    free(d->a);
    free(d->b);
    free(d->a_wins);
    free(d->b_wins);
    free(d->slots);
    rank_data_init(d);
}

static uint64_t hash_name(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* A slot keeps the hash's high half next to the id so that a probe past another name
 * rarely has to touch that name's string (a cache miss per probe at 10^6 names). */
static uint64_t slot_of(uint64_t h, int32_t id)
{
    return (h & 0xffffffff00000000ULL) | (uint64_t)(uint32_t)(id + 1);
}

/* Doubles the slot array and reinserts every name; keeps the load factor <= 1/2 so
 * probe sequences stay short. */
static int grow_slots(rank_data *d)
{
    size_t ns = d->nslots ? d->nslots * 2 : 1024;
    uint64_t *slots = calloc(ns, sizeof *slots);
    if (!slots)
        return -1;
    for (int32_t id = 0; id < d->n; id++) {
        uint64_t h = hash_name(d->names[id], strlen(d->names[id]));
        size_t k = (size_t)h & (ns - 1);
        while (slots[k])
            k = (k + 1) & (ns - 1);
        slots[k] = slot_of(h, id);
    }
    free(d->slots);
    d->slots = slots;
    d->nslots = ns;
    return 0;
}

int32_t rank_data_intern(rank_data *d, const char *name, size_t len)
{
    if (d->nslots == 0 || (size_t)d->n * 2 >= d->nslots) {
        if (grow_slots(d))
            return -1;
    }
    uint64_t h = hash_name(name, len);
    size_t k = (size_t)h & (d->nslots - 1);
    while (d->slots[k]) {
        uint64_t sl = d->slots[k];
        if ((sl >> 32) == (h >> 32)) {
            int32_t id = (int32_t)(uint32_t)(sl & 0xffffffffULL) - 1;
            const char *s = d->names[id];
            if (strncmp(s, name, len) == 0 && s[len] == '\0')
                return id;
        }
        k = (k + 1) & (d->nslots - 1);
    }
    if (d->n == INT32_MAX - 1)
        return -1;
    if ((size_t)d->n == d->names_cap) {
        size_t nc = d->names_cap ? d->names_cap * 2 : 256;
        char **nn = realloc(d->names, nc * sizeof *nn);
        if (!nn)
            return -1;
        d->names = nn;
        d->names_cap = nc;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, name, len);
    copy[len] = '\0';
    d->names[d->n] = copy;
    d->slots[k] = slot_of(h, d->n);
    return d->n++;
}

int rank_data_add(rank_data *d, int32_t a, int32_t b, int64_t a_wins, int64_t b_wins)
{
    if (d->m == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 1024;
        int32_t *na = realloc(d->a, nc * sizeof *na);
        if (!na)
            return -1;
        d->a = na;
        int32_t *nb = realloc(d->b, nc * sizeof *nb);
        if (!nb)
            return -1;
        d->b = nb;
        int64_t *naw = realloc(d->a_wins, nc * sizeof *naw);
        if (!naw)
            return -1;
        d->a_wins = naw;
        int64_t *nbw = realloc(d->b_wins, nc * sizeof *nbw);
        if (!nbw)
            return -1;
        d->b_wins = nbw;
        d->cap = nc;
    }
    d->a[d->m] = a;
    d->b[d->m] = b;
    d->a_wins[d->m] = a_wins;
    d->b_wins[d->m] = b_wins;
    d->m++;
    return 0;
}

const char *rank_item_name(const rank_data *d, int32_t id, char *buf, size_t len)
{
    if (d->names)
        return d->names[id];
    snprintf(buf, len, "item%ld", (long)id);
    return buf;
}
