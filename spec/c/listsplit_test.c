/* listsplit_test.c - src/listsplit.c: a list's items and envelope the same
 * however its answer is cut into chunks, and each malformed answer stopped
 * with its reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbuf.h"
#include "listsplit.h"
#include "tap.h"

static int refuse_after = -1;

/* each item on a line of its own */
static int collect(const char *item, size_t len, void *ud)
{
    dbuf *out = ud;
    if (refuse_after == 0)
        return 1;
    if (refuse_after > 0)
        refuse_after--;
    return dbuf_append(out, item, len) || dbuf_append(out, "\n", 1);
}

/* Split body in chunks of `chunk` bytes: the items (lines), the envelope,
 * the result of the feeds and finish. */
static enum listsplit_error split(const char *body, size_t len, size_t chunk, dbuf *items, dbuf *env)
{
    listsplit s;
    enum listsplit_error r = LISTSPLIT_OK;

    listsplit_init(&s);
    dbuf_clear(items);
    dbuf_clear(env);
    for (size_t at = 0; at < len && r == LISTSPLIT_OK; at += chunk)
        r = listsplit_feed(&s, body + at, len - at < chunk ? len - at : chunk, collect, items);
    if (r == LISTSPLIT_OK)
        r = listsplit_finish(&s);
    if (r == LISTSPLIT_OK) {
        size_t n;
        const char *e = listsplit_envelope(&s, &n);
        dbuf_append(env, e, n);
    }
    listsplit_free(&s);
    return r;
}

/* Every chunk size from 1 to the whole body gives these items and this
 * envelope. */
static int same_every_cut(const char *body, const char *items, const char *env)
{
    dbuf got = {0}, genv = {0};
    size_t len = strlen(body);
    int ok = 1;

    for (size_t chunk = 1; chunk <= len && ok; chunk++) {
        enum listsplit_error r = split(body, len, chunk, &got, &genv);
        ok = r == LISTSPLIT_OK && strcmp(got.data ? got.data : "", items) == 0 &&
             strcmp(genv.data ? genv.data : "", env) == 0;
        if (!ok)
            printf("# chunk %zu: result %d, items <%s>, envelope <%s>\n", chunk, (int)r, got.data ? got.data : "",
                   genv.data ? genv.data : "");
    }
    dbuf_free(&got);
    dbuf_free(&genv);
    return ok;
}

/* Every chunk size stops with err. */
static int fails_every_cut(const char *body, enum listsplit_error err)
{
    dbuf got = {0}, genv = {0};
    size_t len = strlen(body);
    int ok = 1;

    for (size_t chunk = 1; chunk <= len && ok; chunk++) {
        enum listsplit_error r = split(body, len, chunk, &got, &genv);
        ok = r == err;
        if (!ok)
            printf("# chunk %zu: result %d, not %d\n", chunk, (int)r, (int)err);
    }
    if (len == 0)
        ok = split(body, 0, 1, &got, &genv) == err;
    dbuf_free(&got);
    dbuf_free(&genv);
    return ok;
}

int main(void)
{
    TAP_OK(same_every_cut("{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"},"
                          "\"items\":[{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"}\\\"{[\"}},"
                          "{\"metadata\":{\"name\":\"b\"}}]}",
                          "{\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"}\\\"{[\"}}\n"
                          "{\"metadata\":{\"name\":\"b\"}}\n",
                          "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"},"
                          "\"items\":[]}"),
           "an API server's list: each item whole (braces and quotes in strings too), the envelope with items []");
    TAP_OK(same_every_cut("{ \"items\" : [ {\"a\":1} ,\n {\"b\":[1,{\"c\":2}]} ] , \"metadata\" : {\"continue\":\"\"} }\n",
                          "{\"a\":1}\n{\"b\":[1,{\"c\":2}]}\n",
                          "{ \"items\" : [] , \"metadata\" : {\"continue\":\"\"} }"),
           "whitespace anywhere, the envelope after the items");
    TAP_OK(same_every_cut("{\"items\":[],\"metadata\":{}}", "", "{\"items\":[],\"metadata\":{}}"), "no items");
    TAP_OK(fails_every_cut("{\"kind\":\"Status\",\"code\":500,\"message\":\"a Status with 200\"}",
                           LISTSPLIT_MALFORMED), "no items array (a Status): malformed, not an empty list");
    TAP_OK(fails_every_cut("{\"metadata\":{},\"items\":null}", LISTSPLIT_MALFORMED), "items null: malformed");
    TAP_OK(fails_every_cut("{\"metadata\":{},\"items\":\"oops\"}", LISTSPLIT_MALFORMED),
           "items a string: malformed");
    TAP_OK(fails_every_cut("{\"metadata\":{},\"items\":{\"a\":{}}}", LISTSPLIT_MALFORMED),
           "items an object: malformed");
    TAP_OK(same_every_cut("{\"metadata\":{\"items\":[{\"x\":1}]},\"items\":[{\"y\":2}]}", "{\"y\":2}\n",
                          "{\"metadata\":{\"items\":[{\"x\":1}]},\"items\":[]}"),
           "only the top level's items are items");
    TAP_OK(same_every_cut("{\"note\":\"\\\"items\\\":[\",\"items\":[{\"z\":\"a\\\\\"},{}]}",
                          "{\"z\":\"a\\\\\"}\n{}\n", "{\"note\":\"\\\"items\\\":[\",\"items\":[]}"),
           "a string that reads \"items\": not a key; a backslash before a quote; an empty item");

    TAP_OK(fails_every_cut("[1,2]", LISTSPLIT_MALFORMED), "an array: malformed");
    TAP_OK(fails_every_cut("{\"items\":[1]}", LISTSPLIT_MALFORMED), "an item that is not an object: malformed");
    TAP_OK(fails_every_cut("{\"items\":[{\"a\":1}{\"b\":2}]}", LISTSPLIT_MALFORMED), "items without a comma: malformed");
    TAP_OK(fails_every_cut("{\"items\":[{\"a\":1},]}", LISTSPLIT_MALFORMED), "a trailing comma: malformed");
    TAP_OK(fails_every_cut("{\"items\":[,{\"a\":1}]}", LISTSPLIT_MALFORMED), "a leading comma: malformed");
    TAP_OK(fails_every_cut("{\"items\":[]} x", LISTSPLIT_MALFORMED), "bytes after the end: malformed");
    TAP_OK(fails_every_cut("{\"items\":[{\"a\":1}", LISTSPLIT_MALFORMED), "an answer cut short: malformed");
    TAP_OK(fails_every_cut("{\"items\":[{\"a\":[1}]]}", LISTSPLIT_MALFORMED),
           "an item that ends with a bracket, not its brace: malformed");
    TAP_OK(fails_every_cut("{\"items\":[{\"a\":\"}", LISTSPLIT_MALFORMED), "an answer cut in a string: malformed");
    TAP_OK(fails_every_cut("", LISTSPLIT_MALFORMED), "an empty answer: malformed");

    {
        /* an item of 17 MiB, fed in 64 KiB chunks */
        size_t n = 17u * 1024 * 1024, chunk = 64 * 1024;
        char *big = malloc(n);
        dbuf items = {0}, env = {0};
        memcpy(big, "{\"items\":[{\"s\":\"", 16);
        memset(big + 16, 'x', n - 16);
        TAP_OK(split(big, n, chunk, &items, &env) == LISTSPLIT_TOO_LARGE, "an item over 16 MiB: too large");
        memset(big, ' ', n);
        memcpy(big, "{\"metadata\":{\"s\":\"", 18);
        TAP_OK(split(big, n, chunk, &items, &env) == LISTSPLIT_TOO_LARGE, "an envelope over 1 MiB: too large");
        free(big);
        dbuf_free(&items);
        dbuf_free(&env);
    }
    {
        dbuf items = {0}, env = {0};
        const char *body = "{\"items\":[{\"a\":1},{\"b\":2},{\"c\":3}]}";
        refuse_after = 1;
        TAP_OK(split(body, strlen(body), 4, &items, &env) == LISTSPLIT_REFUSED &&
                   strcmp(items.data, "{\"a\":1}\n") == 0,
               "an item its callback refuses stops the split, the items before it handed over");
        refuse_after = -1;
        dbuf_free(&items);
        dbuf_free(&env);
    }
    return tap_done();
}
