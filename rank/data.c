/* data.c: comparison records and the table that maps item names to ids.
 *
 * Both the file reader and the BTL generator fill a rank_data; graph.c turns it into
 * the CSR comparison graph.  Items are named by arbitrary strings, so names go through
 * an open-addressing hash table.  At 10^6 names and 3 x 10^7 lookups (the benchmark
 * file) the table is what reading costs, and what it costs is cache misses, so:
 *   - a slot holds the hash's high half, the id and a pointer to the string: a probe
 *     touches the slot and, on a tag match, the string, and nothing else; the home
 *     slot comes from the same high bits, so growing the table touches no string;
 *   - strings live in large blocks that never move, so names[] and slots point into
 *     them directly;
 *   - rank_data_intern_many resolves a batch of names in passes (hash and prefetch the
 *     slots, probe and prefetch the strings, compare), so that the misses of a batch
 *     overlap instead of following one another;
 *   - the hash is keyed with a random seed, so crafted names cannot make every lookup
 *     probe the same chain. */
#include "rank.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct rank_name_slot {
    uint32_t tag; /* high half of the hash */
    int32_t id;   /* -1 = empty */
    const char *s;
};

struct rank_text_block {
    struct rank_text_block *next;
    size_t used, cap;
    char text[];
};

#define TEXT_BLOCK (1u << 20)

void rank_data_init(rank_data *d)
{
    memset(d, 0, sizeof *d);
}

void rank_data_free(rank_data *d)
{
    for (struct rank_text_block *b = d->text, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(d->names);
    free(d->a);
    free(d->b);
    free(d->a_wins);
    free(d->b_wins);
    free(d->slots);
    rank_data_init(d);
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Eight bytes at a time, then the murmur3 finaliser; keyed by the table's seed. */
static uint64_t hash_name(uint64_t seed, const char *s, size_t len)
{
    uint64_t h = seed ^ ((uint64_t)len * 0x9e3779b97f4a7c15ULL);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        s += 8;
        len -= 8;
    }
    if (len) {
        uint64_t w = 0;
        memcpy(&w, s, len);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    return mix(h);
}

static uint64_t random_seed(void)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed)
        return seed;
    /* No entropy yet (early boot): ids never depend on the seed, only the probe
     * lengths an attacker could aim for do. */
    return mix((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&seed);
}

static int equal(const char *stored, const char *name, size_t len)
{
    return memcmp(stored, name, len) == 0 && stored[len] == '\0';
}

/* A name's home slot is given by the top bits of its hash, which the tag (the top
 * 32 bits) holds: so growing the table moves slots by their tags alone, without
 * touching (or hashing again) a single string.  Tables stay below 2^32 slots because
 * ids are below 2^31 and the load at most 1/2. */
static size_t home(uint64_t h, int bits)
{
    return (size_t)(h >> (64 - bits));
}

/* Doubles the slot array (load factor <= 1/2 keeps probe sequences short) and
 * reinserts every slot. */
static int grow_slots(rank_data *d)
{
    if (d->nslots == 0) {
        d->seed = random_seed();
        d->slot_bits = 9;
    }
    int bits = d->slot_bits + 1;
    if (bits > 32)
        return -1;
    size_t ns = (size_t)1 << bits;
    struct rank_name_slot *slots = malloc(ns * sizeof *slots);
    if (!slots)
        return -1;
    for (size_t k = 0; k < ns; k++)
        slots[k].id = -1;
    for (size_t j = 0; j < d->nslots; j++) {
        if (d->slots[j].id < 0)
            continue;
        size_t k = (size_t)(d->slots[j].tag >> (32 - bits));
        while (slots[k].id >= 0)
            k = (k + 1) & (ns - 1);
        slots[k] = d->slots[j];
    }
    free(d->slots);
    d->slots = slots;
    d->nslots = ns;
    d->slot_bits = bits;
    return 0;
}

/* Copies a name into the text blocks; NULL when out of memory. */
static char *store_text(rank_data *d, const char *name, size_t len)
{
    struct rank_text_block *b = d->text;
    if (!b || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > TEXT_BLOCK ? len + 1 : TEXT_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        /* A block made for one long name goes behind the current one, which may
         * still have room. */
        if (d->text && cap > TEXT_BLOCK) {
            b->next = d->text->next;
            d->text->next = b;
        } else {
            b->next = d->text;
            d->text = b;
        }
    }
    char *copy = b->text + b->used;
    memcpy(copy, name, len);
    copy[len] = '\0';
    b->used += len + 1;
    return copy;
}

/* The lookup and insertion proper, with the hash already known. */
static int32_t intern_hashed(rank_data *d, const char *name, size_t len, uint64_t h)
{
    if (d->nslots == 0 || (size_t)d->n * 2 >= d->nslots) {
        int fresh = d->nslots == 0;
        if (grow_slots(d))
            return -1;
        if (fresh) /* the seed was just chosen */
            h = hash_name(d->seed, name, len);
    }
    uint32_t tag = (uint32_t)(h >> 32);
    size_t mask = d->nslots - 1, k = home(h, d->slot_bits);
    for (; d->slots[k].id >= 0; k = (k + 1) & mask)
        if (d->slots[k].tag == tag && equal(d->slots[k].s, name, len))
            return d->slots[k].id;
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
    char *copy = store_text(d, name, len);
    if (!copy)
        return -1;
    d->names[d->n] = copy;
    d->slots[k] = (struct rank_name_slot){tag, d->n, copy};
    return d->n++;
}

int32_t rank_data_intern(rank_data *d, const char *name, size_t len)
{
    if (d->nslots == 0 && grow_slots(d))
        return -1;
    return intern_hashed(d, name, len, hash_name(d->seed, name, len));
}

/* Name i of a batch repeats name i - 1 or i - 2 (files often list one item's games
 * together, so one of a line's two names is often the previous line's): returns
 * which, or 0. */
static int repeats(const char *const *name, const size_t *len, size_t i, size_t first)
{
    for (size_t back = 1; back <= 2 && i >= first + back; back++)
        if (len[i - back] == len[i] && memcmp(name[i - back], name[i], len[i]) == 0)
            return (int)back;
    return 0;
}

int rank_data_intern_many(rank_data *d, const char *const *name, const size_t *len, int32_t *id,
                          size_t count)
{
    enum { BATCH = 256 };
    uint64_t h[BATCH];
    const char *cand[BATCH];
    int32_t cand_id[BATCH];
    unsigned char rep[BATCH];
    if (d->nslots == 0 && grow_slots(d))
        return -1;
    for (size_t base = 0; base < count; base += BATCH) {
        size_t c = count - base < BATCH ? count - base : BATCH;
        /* Grow first, so the prefetched slots are the ones probed below. */
        while ((size_t)(d->n + (int64_t)c) * 2 >= d->nslots)
            if (grow_slots(d))
                return -1;
        struct rank_name_slot *slots = d->slots;
        size_t mask = d->nslots - 1;
        for (size_t i = 0; i < c; i++) {
            rep[i] = (unsigned char)repeats(name, len, base + i, base);
            if (rep[i])
                continue;
            h[i] = hash_name(d->seed, name[base + i], len[base + i]);
            __builtin_prefetch(&slots[home(h[i], d->slot_bits)]);
        }
        /* A tag match is almost surely the name: fetch its string for the compare. */
        for (size_t i = 0; i < c; i++) {
            cand[i] = NULL;
            if (rep[i])
                continue;
            uint32_t tag = (uint32_t)(h[i] >> 32);
            for (size_t k = home(h[i], d->slot_bits); slots[k].id >= 0; k = (k + 1) & mask) {
                if (slots[k].tag == tag) {
                    cand[i] = slots[k].s;
                    cand_id[i] = slots[k].id;
                    __builtin_prefetch(cand[i]);
                    break;
                }
            }
        }
        /* In order, so that new names get ids by first appearance; a name new in
         * this batch may have been added by an earlier entry of it. */
        for (size_t i = 0; i < c; i++) {
            const char *s = name[base + i];
            size_t l = len[base + i];
            if (rep[i]) {
                id[base + i] = id[base + i - rep[i]];
            } else if (cand[i] && equal(cand[i], s, l)) {
                id[base + i] = cand_id[i];
            } else {
                int32_t v = intern_hashed(d, s, l, h[i]);
                if (v < 0)
                    return -1;
                id[base + i] = v;
            }
        }
    }
    return 0;
}

int rank_data_reserve(rank_data *d, size_t extra)
{
    if (extra <= d->cap - d->m)
        return 0;
    if (d->m > SIZE_MAX / 2 - extra)
        return -1;
    size_t nc = d->cap ? d->cap : 1024;
    while (nc < d->m + extra)
        nc *= 2;
    if (nc > SIZE_MAX / sizeof(int64_t))
        return -1;
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
    if (d->b_wins) {
        int64_t *nbw = realloc(d->b_wins, nc * sizeof *nbw);
        if (!nbw)
            return -1;
        d->b_wins = nbw;
    }
    d->cap = nc;
    return 0;
}

int rank_data_add(rank_data *d, int32_t a, int32_t b, int64_t a_wins, int64_t b_wins)
{
    if (d->m == d->cap && rank_data_reserve(d, 1))
        return -1;
    if (b_wins && !d->b_wins) {
        /* The first record with wins both ways: until now they were all 0. */
        d->b_wins = calloc(d->cap, sizeof *d->b_wins);
        if (!d->b_wins)
            return -1;
    }
    d->a[d->m] = a;
    d->b[d->m] = b;
    d->a_wins[d->m] = a_wins;
    if (d->b_wins)
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
