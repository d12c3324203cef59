/* pool.h - small allocations kept apart from the malloc heap, in chunks
 * given back whole.
 *
 * A work queue holds an item for each key it was given until the key's
 * work is done. During a sync that is every object at once, each item
 * allocated between the strings the cache keeps; freed, they left holes
 * that malloc_trim cannot give back (it returns whole pages only): some
 * 90 B of resident memory for each cached object (docs/benchmarks.md,
 * "Metadata only"). A pool takes its blocks from chunks it maps itself, and
 * unmaps a chunk once its last block is freed.
 *
 * A block is a bump in the pool's current chunk; a freed block's room is
 * not used again until its chunk is empty, so a block that lives long pins
 * its chunk. pool_settle moves such a block into a second current chunk
 * that takes settled blocks only: long-lived blocks end up packed
 * together. (The work queue settles an item when it starts to wait out a
 * delay: a requeue, a backoff.)
 *
 * Not thread-safe: a pool is its owner's, on one thread. */
#ifndef LUAOP_POOL_H
#define LUAOP_POOL_H

#include <stddef.h>

typedef struct pool_chunk pool_chunk;

/* Zero-initialise (or {0}) before use. */
typedef struct pool {
    pool_chunk *fresh;   /* where pool_alloc bumps */
    pool_chunk *settled; /* where pool_settle bumps */
    pool_chunk *all;     /* every mapped chunk, linked */
    size_t chunks;       /* how many */
} pool;

/* n bytes, zeroed, aligned for any type; NULL when out of memory. A block
 * larger than a chunk's quarter is malloc's. */
void *pool_alloc(pool *p, size_t n);

/* Free a block of p (NULL: nothing). */
void pool_free(pool *p, void *ptr);

/* The block ptr of n bytes, in the settled chunk: ptr itself when it is
 * there already (or malloc's, or no room could be had), else a copy of
 * its n bytes there, ptr freed. */
void *pool_settle(pool *p, void *ptr, size_t n);

/* Unmap every chunk: the blocks still in them are gone (those malloc
 * holds are the caller's to pool_free first). */
void pool_clear(pool *p);

/* How many chunks p has mapped now. */
size_t pool_chunks(const pool *p);

#endif
