/* shard.c - FNV-1a 64 and sets of hash ranges (see shard.h). */

#include "shard.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"

uint64_t shard_hash(const void *p, size_t len)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL; /* the offset basis */
    size_t i;

    for (i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL; /* the FNV prime */
    }
    return h;
}

static int shard_range_cmp(const void *a, const void *b)
{
    const shard_range *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int shard_set_assign(shard_set *s, const shard_range *r, size_t n)
{
    shard_range *c = NULL;
    size_t i, k = 0;

    if (n > SHARD_MAX_RANGES)
        return -1;
    for (i = 0; i < n; i++)
        if (r[i].lo > r[i].last)
            return -1;
    if (n > 0) {
        c = malloc(n * sizeof *c);
        if (c == NULL)
            return -1;
        memcpy(c, r, n * sizeof *c);
        qsort(c, n, sizeof *c, shard_range_cmp);
        /* merge what overlaps or touches: [a, b] and [b + 1, c] are one */
        for (i = 1; i < n; i++) {
            if (c[k].last == UINT64_MAX || c[i].lo <= c[k].last + 1) {
                if (c[i].last > c[k].last)
                    c[k].last = c[i].last;
            } else {
                c[++k] = c[i];
            }
        }
        k++;
    }
    free(s->r);
    s->r = c;
    s->n = k;
    return 0;
}

int shard_set_contains(const shard_set *s, uint64_t h)
{
    size_t lo = 0, hi = s->n;

    /* the last range whose lo <= h */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->r[mid].lo <= h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && h <= s->r[lo - 1].last;
}

void shard_set_clear(shard_set *s)
{
    free(s->r);
    s->r = NULL;
    s->n = 0;
}

/* Whether the object at text, of which path leads to its namespace, is
 * certainly outside s. */
static int shard_outside(const shard_set *s, const char *text, size_t n, const char *const *path, int npath)
{
    const char *ns;
    size_t len;

    return json_scan_string(text, n, path, npath, &ns, &len) == 1 && !shard_set_contains(s, shard_hash(ns, len));
}

int shard_item_kept(const char *item, size_t n, void *set)
{
    static const char *const path[] = {"metadata", "namespace"};

    return !shard_outside(set, item, n, path, 2);
}

int shard_event_kept(const shard_set *s, const char *line, size_t n)
{
    static const char *const type[] = {"type"}, *const path[] = {"object", "metadata", "namespace"};
    const char *end = line + n, *q, *at, *why, *t;
    size_t tlen;

    q = json_scan_skip(line, end, &at, &why);
    if (q == NULL)
        return 1;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
        q++;
    if (q != end || json_scan_string(line, n, type, 1, &t, &tlen) != 1)
        return 1;
    if (!((tlen == 5 && memcmp(t, "ADDED", 5) == 0) || (tlen == 8 && memcmp(t, "MODIFIED", 8) == 0) ||
          (tlen == 7 && memcmp(t, "DELETED", 7) == 0)))
        return 1;
    return !shard_outside(s, line, n, path, 3);
}
