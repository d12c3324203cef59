/* dbuf_test.c - src/dbuf.c: growth, the NUL after the bytes, clearing, and
 * reading files (missing, a directory, empty, too large, appended). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbuf.h"
#include "tap.h"

static char dir[] = "/tmp/dbuf_test.XXXXXX";

static const char *path(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void write_file(const char *name, const char *data, size_t n)
{
    FILE *f = fopen(path(name), "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* An allocator as a Lua state's (lua_Alloc), counting what it holds. */
static long held, calls;

static void *count_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    calls++;
    held += (long)nsize - (ptr ? (long)osize : 0);
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

int main(void)
{
    dbuf b = {0};
    char big[10000];
    int e;

    if (mkdtemp(dir) == NULL)
        return 2;
    TAP_OK(dbuf_append(&b, "ab", 2) == 0 && b.len == 2 && strcmp(b.data, "ab") == 0,
           "append keeps the bytes, NUL-terminated");
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    TAP_OK(dbuf_append(&b, big, sizeof big) == 0 && b.len == 2 + sizeof big && b.cap > b.len &&
               b.data[b.len] == '\0' && memcmp(b.data + 2, big, sizeof big) == 0,
           "append grows past its first 256 bytes and keeps the NUL after the last");
    TAP_OK(dbuf_append(&b, "", 0) == 0 && b.len == 2 + sizeof big, "appending nothing changes nothing");
    size_t cap = b.cap;
    TAP_OK(dbuf_reserve(&b, SIZE_MAX - 8) == -1 && b.cap == cap && b.len == 2 + sizeof big,
           "a reservation that cannot be met fails and leaves the buffer as it was");
    dbuf_clear(&b);
    TAP_OK(b.len == 0 && b.cap == cap && b.data[0] == '\0', "clear forgets the bytes, keeps the memory");
    dbuf_free(&b);
    TAP_OK(b.data == NULL && b.len == 0 && b.cap == 0, "free leaves an empty buffer");
    dbuf_free(&b);
    TAP_OK(b.data == NULL, "freeing twice is safe");

    dbuf a = {0};
    a.alloc = count_alloc;
    TAP_OK(dbuf_append(&a, big, sizeof big) == 0 && dbuf_append(&a, big, sizeof big) == 0 && held == (long)a.cap &&
               calls > 1 && memcmp(a.data + sizeof big, big, sizeof big) == 0,
           "a buffer given an allocator grows with it only, and the allocator's sizes are the buffer's");
    dbuf_free(&a);
    TAP_OK(held == 0 && a.data == NULL && a.cap == 0, "and is freed with it, to the last byte");

    write_file("f", "hello\n", 6);
    TAP_OK(dbuf_read_file(&b, path("f"), 100) == 0 && b.len == 6 && strcmp(b.data, "hello\n") == 0,
           "read_file reads a whole file");
    TAP_OK(dbuf_read_file(&b, path("f"), 100) == 0 && b.len == 12 && strcmp(b.data, "hello\nhello\n") == 0,
           "read_file appends to what the buffer holds");
    TAP_OK(dbuf_read_file(&b, path("missing"), 100) == ENOENT && b.len == 12, "a missing file is ENOENT");
    TAP_OK(dbuf_read_file(&b, dir, 100) == EISDIR && b.len == 12 && strcmp(b.data, "hello\nhello\n") == 0,
           "a directory is EISDIR, and the buffer keeps what it held");
    write_file("big", big, sizeof big);
    e = dbuf_read_file(&b, path("big"), sizeof big - 1);
    TAP_OK(e == EFBIG && b.len == 12 && b.data[12] == '\0', "a file larger than the limit is EFBIG, nothing kept");
    dbuf_clear(&b);
    TAP_OK(dbuf_read_file(&b, path("big"), sizeof big) == 0 && b.len == sizeof big &&
               memcmp(b.data, big, sizeof big) == 0,
           "a file exactly at the limit is read");
    write_file("empty", "", 0);
    dbuf_free(&b);
    TAP_OK(dbuf_read_file(&b, path("empty"), 100) == 0 && b.len == 0, "an empty file reads as nothing");
    dbuf_free(&b);
    unlink(path("f"));
    unlink(path("big"));
    unlink(path("empty"));
    rmdir(dir);
    return tap_done();
}
