/* fuzz/listsplit.c - libFuzzer harness: a LIST's answer split into its
 * items as it arrives (src/listsplit.c).
 *
 * The input is an answer cut into chunks where the fuzzer says (its first
 * bytes give the chunk sizes), as the network delivers it. However it is
 * cut, the split must end the same as the whole answer's at once: the same
 * result, the same items (each beginning with '{' and ending with '}'),
 * the same envelope. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../src/dbuf.h"
#include "../src/listsplit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int collect(const char *item, size_t len, void *ud)
{
    if (len < 2 || item[0] != '{' || item[len - 1] != '}')
        abort();
    return dbuf_append(ud, item, len) || dbuf_append(ud, "\n", 1);
}

/* Split s (n bytes) in the chunks cuts[0..ncuts) and the rest. */
static enum listsplit_error split(const char *s, size_t n, const uint8_t *cuts, size_t ncuts, dbuf *items,
                                  dbuf *env)
{
    listsplit ls;
    enum listsplit_error r = LISTSPLIT_OK;
    size_t pos = 0;

    listsplit_init(&ls);
    for (size_t i = 0; i <= ncuts && r == LISTSPLIT_OK; i++) {
        size_t len = i == ncuts ? n - pos : cuts[i] % 64;
        if (len > n - pos)
            len = n - pos;
        r = listsplit_feed(&ls, s + pos, len, collect, items);
        pos += len;
    }
    if (r == LISTSPLIT_OK)
        r = listsplit_finish(&ls);
    if (r == LISTSPLIT_OK) {
        size_t len;
        const char *e = listsplit_envelope(&ls, &len);
        dbuf_append(env, e, len);
    }
    listsplit_free(&ls);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t ncuts = size > 0 ? data[0] % 8 : 0, off = 1 + ncuts;
    dbuf items1 = {0}, env1 = {0}, items2 = {0}, env2 = {0};

    if (size < off)
        return 0;
    const char *s = (const char *)data + off;
    size_t n = size - off;
    enum listsplit_error cut = split(s, n, data + 1, ncuts, &items1, &env1);
    enum listsplit_error whole = split(s, n, NULL, 0, &items2, &env2);
    if (cut != whole)
        abort();
    if (whole == LISTSPLIT_OK && (items1.len != items2.len || env1.len != env2.len ||
                                  (items1.len && memcmp(items1.data, items2.data, items1.len) != 0) ||
                                  (env1.len && memcmp(env1.data, env2.data, env1.len) != 0)))
        abort();
    dbuf_free(&items1);
    dbuf_free(&env1);
    dbuf_free(&items2);
    dbuf_free(&env2);
    return 0;
}
