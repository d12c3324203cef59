/* shard.h - the hash space of sharded controllers (docs/sharding.md): the
 * 64-bit FNV-1a hash the API server's shardSelector uses (apimachinery's
 * sharding.HashField: FNV-1a 64 over the field's bytes), and a set of
 * ranges of it. A range is kept inclusive, [lo, last], so that the whole
 * space (the server's end 0x10000000000000000) fits in 64 bits. */
#ifndef LUAOP_SHARD_H
#define LUAOP_SHARD_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 of len bytes at p. */
uint64_t shard_hash(const void *p, size_t len);

typedef struct shard_range {
    uint64_t lo, last; /* lo <= last */
} shard_range;

/* At most this many ranges in a set (a ring of a few hundred virtual
 * nodes at most; more is refused). */
#define SHARD_MAX_RANGES 4096

typedef struct shard_set {
    size_t n;
    shard_range *r; /* sorted by lo, disjoint, not adjacent (merged) */
} shard_set;

/* Replace s's ranges with the n at r (any order, overlapping or adjacent
 * ones merged). 0; -1 when out of memory or n is over SHARD_MAX_RANGES
 * or a range has lo > last (s unchanged then). */
int shard_set_assign(shard_set *s, const shard_range *r, size_t n);

/* Whether hash h is in one of s's ranges. */
int shard_set_contains(const shard_set *s, uint64_t h);

void shard_set_clear(shard_set *s);

/* A sharded informer's filter, before anything is decoded (luaop filters
 * when the API server does not: docs/sharding.md). Each answers 0 only when
 * the text is certainly of an object outside s by its metadata.namespace
 * (a string written without escapes, hashed); anything else (no namespace,
 * a shape it cannot walk) is kept, to be decoded and judged in Lua.
 *
 * shard_item_kept: an object (an item of a LIST page); its ud is the set.
 * shard_event_kept: a watch event line, which must also be one JSON object
 * with nothing after it, of type ADDED, MODIFIED or DELETED (a BOOKMARK, an
 * ERROR or a broken line always goes on to Lua). */
int shard_item_kept(const char *item, size_t n, void *set);
int shard_event_kept(const shard_set *s, const char *line, size_t n);

#endif
