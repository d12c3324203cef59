/* dbuf.c - a growable byte buffer (see dbuf.h). */
#include "dbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dbuf_reserve(dbuf *b, size_t more)
{
    size_t cap;
    char *p;

    if (more > (size_t)-1 / 2 - b->len)
        return -1;
    if (b->cap - b->len > more) /* room for the NUL too */
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap - b->len <= more)
        cap *= 2;
    if (b->alloc)
        p = b->alloc(b->alloc_ud, b->data, b->data ? b->cap : 0, cap);
    else
        p = realloc(b->data, cap);
    if (p == NULL)
        return -1;
    b->data = p;
    b->cap = cap;
    b->data[b->len] = '\0';
    return 0;
}

int dbuf_append(dbuf *b, const void *p, size_t n)
{
    if (dbuf_reserve(b, n) != 0)
        return -1;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int dbuf_printf(dbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || dbuf_reserve(b, (size_t)n) != 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void dbuf_clear(dbuf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void dbuf_free(dbuf *b)
{
    if (b->alloc && b->data)
        b->alloc(b->alloc_ud, b->data, b->cap, 0);
    else
        free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int dbuf_read_file(dbuf *b, const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    size_t start = b->len;
    int err = 0;

    if (f == NULL)
        return errno ? errno : EIO;
    for (;;) {
        if (dbuf_reserve(b, 4096) != 0) {
            err = ENOMEM;
            break;
        }
        size_t room = b->cap - b->len - 1;
        size_t r = fread(b->data + b->len, 1, room, f);
        if (r > max - (b->len - start)) {
            err = EFBIG;
            break;
        }
        b->len += r;
        if (r < room) {
            if (ferror(f))
                err = errno ? errno : EIO; /* EISDIR, say */
            break;
        }
    }
    fclose(f);
    if (err) {
        b->len = start;
    }
    if (b->data)
        b->data[b->len] = '\0';
    return err;
}
