/* fuzz/watch.c - libFuzzer harness: the watch stream's line framing.
 *
 * The input is a stream cut into chunks where the fuzzer says (its first
 * bytes give the chunk sizes), as the network delivers it. The lines the
 * framing queues must be exactly the stream split at '\n', each without
 * trailing '\r' and spaces, empty ones dropped, the last one kept without
 * its '\n' when the stream ends. The framing's own file is included for its
 * static functions. */
#include "../src/lbind_watch.c"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lbind_watch w;
    size_t ncuts = size > 0 ? data[0] % 8 : 0, off = 1 + ncuts;
    const char *s;
    size_t n;

    if (size < off)
        return 0;
    s = (const char *)data + off;
    n = size - off;
    memset(&w, 0, sizeof w);
    /* feed it in ncuts + 1 chunks */
    size_t pos = 0;
    for (size_t i = 0; i <= ncuts && pos <= n; i++) {
        size_t len = i == ncuts ? n - pos : (data[1 + i] % 64);
        if (len > n - pos)
            len = n - pos;
        if (lbind_watch_data(s + pos, len, &w) != 0)
            abort();
        pos += len;
    }
    if (w.partial.len > 0) { /* the stream ended: its last line */
        lbind_watch_line(&w, w.partial.data, w.partial.len);
        dbuf_clear(&w.partial);
    }
    /* the expected lines, from the whole stream at once */
    lbind_line *l = w.head;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n')
            continue;
        size_t end = i;
        while (end > start && (s[end - 1] == '\r' || s[end - 1] == ' '))
            end--;
        if (end > start) {
            if (l == NULL || l->len != end - start || memcmp(l->data, s + start, end - start) != 0)
                abort();
            l = l->next;
        }
        start = i + 1;
    }
    if (l != NULL)
        abort(); /* a line too many */
    lbind_watch_clear(&w);
    dbuf_free(&w.partial);
    return 0;
}
