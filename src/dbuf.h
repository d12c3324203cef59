/* dbuf.h - a growable byte buffer, the one every module appends to (response
 * bodies, a plugin's output, encoded JSON, a watch's partial line, file
 * contents), and reading a whole file into one.
 *
 * A buffer that holds anything is NUL-terminated after its len bytes, so
 * text can be read as a C string. Zero-initialised is empty, and grows with
 * realloc; a buffer given `alloc` (a lua_Alloc: a Lua state's allocator,
 * lbox.h) grows and is freed with it instead, so that what it holds is
 * charged where that allocator charges it (a task's memory budget). */
#ifndef LUAOP_DBUF_H
#define LUAOP_DBUF_H

#include <stddef.h>

typedef struct dbuf {
    char *data; /* NULL until something is reserved */
    size_t len;
    size_t cap; /* bytes allocated, the NUL's included */
    void *(*alloc)(void *ud, void *ptr, size_t osize, size_t nsize); /* NULL: realloc */
    void *alloc_ud;
} dbuf;

/* Room for `more` bytes past len (and the NUL): 0, or -1 when out of
 * memory (b unchanged). Grows by doubling, from 256 bytes. */
int dbuf_reserve(dbuf *b, size_t more);

/* Append n bytes: 0, or -1 when out of memory (b unchanged). */
int dbuf_append(dbuf *b, const void *p, size_t n);

/* Append printf-formatted text. 0, or -1 when out of memory. */
int dbuf_printf(dbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget the contents, keep the memory. */
void dbuf_clear(dbuf *b);

/* Free the memory; b is empty again. */
void dbuf_free(dbuf *b);

/* Append the whole file at path, at most max bytes of it: 0, or a positive
 * errno (ENOENT, EACCES, EISDIR, ...; EFBIG when it is larger than max;
 * ENOMEM). On error b holds what it held before. */
int dbuf_read_file(dbuf *b, const char *path, size_t max);

#endif
