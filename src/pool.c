/* pool.c - small allocations kept apart from the malloc heap (pool.h).
 *
 * Hand-written: what it needs is the one property malloc lacks (blocks of
 * a kind kept together, and their pages given back whole), in some 150
 * lines; a general allocator library (mimalloc, jemalloc) measured no
 * better here than glibc's malloc for the cache (docs/benchmarks.md). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#include "pool.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define POOL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define POOL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POOL_POISON(p, n) ((void)(p), (void)(n))
#define POOL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define POOL_CHUNK ((size_t)64 * 1024) /* a mapped chunk's size */
#define POOL_ALIGN alignof(max_align_t)
#define POOL_KEEP ((size_t)16 * 1024) /* an emptied current chunk keeps this much resident */

struct pool_chunk {
    pool_chunk *prev, *next; /* pool.all */
    size_t live;             /* blocks not yet freed */
    size_t used;             /* bytes bumped, this header included */
    size_t size;             /* bytes mapped (or malloc'd: big) */
    int big;                 /* one block, malloc's */
};

/* What precedes every block: its chunk and its size (16 bytes: blocks
 * stay aligned, as chunks and sizes are rounded to POOL_ALIGN). */
typedef struct pool_head {
    pool_chunk *chunk;
    size_t size; /* the block's, rounded */
} pool_head;

#define POOL_HEADER (((sizeof(pool_chunk) + POOL_ALIGN - 1) / POOL_ALIGN) * POOL_ALIGN)

static size_t pool_round(size_t n)
{
    return (n + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
}

static void pool_link(pool *p, pool_chunk *c)
{
    c->prev = NULL;
    c->next = p->all;
    if (p->all)
        p->all->prev = c;
    p->all = c;
    p->chunks++;
}

static void pool_unmap(pool *p, pool_chunk *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        p->all = c->next;
    if (c->next)
        c->next->prev = c->prev;
    p->chunks--;
    if (c->big) {
        free(c);
    } else {
        POOL_UNPOISON(c, c->size); /* (the shadow of an address someone else may map next) */
        munmap(c, c->size);
    }
}

static pool_chunk *pool_map(pool *p)
{
    pool_chunk *c = mmap(NULL, POOL_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (c == MAP_FAILED)
        return NULL;
    c->live = 0;
    c->used = POOL_HEADER;
    c->size = POOL_CHUNK;
    c->big = 0;
    POOL_POISON((char *)c + POOL_HEADER, POOL_CHUNK - POOL_HEADER);
    pool_link(p, c);
    return c;
}

/* A block of n bytes (rounded) and its head bumped in *cur, a new chunk
 * mapped when it has no room. */
static pool_head *pool_bump(pool *p, pool_chunk **cur, size_t n)
{
    pool_chunk *c = *cur;
    size_t need = sizeof(pool_head) + n;

    if (c == NULL || c->size - c->used < need) {
        pool_chunk *fresh = pool_map(p);
        if (fresh == NULL)
            return NULL;
        if (c != NULL && c->live == 0)
            pool_unmap(p, c); /* (full and empty: nothing holds it) */
        *cur = c = fresh;
    }
    pool_head *h = (pool_head *)((char *)c + c->used);
    POOL_UNPOISON(h, need);
    c->used += need;
    c->live++;
    h->chunk = c;
    h->size = n;
    return h;
}

void *pool_alloc(pool *p, size_t n)
{
    pool_head *h;

    if (n > (POOL_CHUNK - POOL_HEADER) / 4) {
        if (n > SIZE_MAX - POOL_HEADER - sizeof *h)
            return NULL;
        pool_chunk *c = malloc(POOL_HEADER + sizeof *h + n);
        if (c == NULL)
            return NULL;
        c->live = 1;
        c->size = c->used = POOL_HEADER + sizeof *h + n;
        c->big = 1;
        pool_link(p, c);
        h = (pool_head *)((char *)c + POOL_HEADER);
        h->chunk = c;
        h->size = n;
    }
    else if ((h = pool_bump(p, &p->fresh, pool_round(n))) == NULL)
        return NULL;
    memset(h + 1, 0, n);
    return h + 1;
}

void pool_free(pool *p, void *ptr)
{
    if (ptr == NULL)
        return;
    pool_head *h = (pool_head *)ptr - 1;
    pool_chunk *c = h->chunk;

    if (c->big) {
        pool_unmap(p, c);
        return;
    }
    POOL_POISON(h, sizeof *h + h->size);
    if (--c->live > 0)
        return;
    if (c != p->fresh && c != p->settled) {
        pool_unmap(p, c);
        return;
    }
    /* a current chunk, empty: bumped from its start again, and most of
     * what it had touched given back */
    if (c->used > POOL_KEEP)
        madvise((char *)c + POOL_KEEP, c->size - POOL_KEEP, MADV_DONTNEED);
    c->used = POOL_HEADER;
    POOL_POISON((char *)c + POOL_HEADER, c->size - POOL_HEADER);
}

void *pool_settle(pool *p, void *ptr, size_t n)
{
    pool_head *h = (pool_head *)ptr - 1;

    if (h->chunk->big || h->chunk == p->settled)
        return ptr;
    pool_head *to = pool_bump(p, &p->settled, pool_round(n));
    if (to == NULL)
        return ptr;
    memcpy(to + 1, ptr, n);
    pool_free(p, ptr);
    return to + 1;
}

void pool_clear(pool *p)
{
    while (p->all)
        pool_unmap(p, p->all);
    p->fresh = p->settled = NULL;
}

size_t pool_chunks(const pool *p)
{
    return p->chunks;
}
