/* fuzz/json.c - libFuzzer harness: JSON decode, and the encode round trip.
 *
 * Any input: decode must return a value or an error, never crash (ASan
 * and UBSan watch), and leave the Lua stack as it found it. A value that
 * decodes must encode (all decoded values are encodable) to a text that
 * decodes again and encodes to the same text. The same input goes through
 * json_decode_page and json_peek too, and through json_scan_string and
 * the shard filters (shard.h): where the scanner claims a string at
 * metadata.namespace of a text that decodes, the decoded object has that
 * very string there (the filter never drops on a value the decoder would
 * read otherwise). And through json_scan_member and the cache's cut
 * (json_scan_cut, metadata.managedFields out): the cut text is never
 * longer than the object, and of a text that decodes it decodes to the
 * same value without metadata.managedFields. json_check (the decoder's
 * walk building nothing) takes exactly what json_decode takes, failing
 * with the same message. All of it runs inside a C function
 * called with lua_pcall, as luaop's binding calls the codec: an error
 * raised where the codec promises to return one (it raises only when out
 * of memory) is a finding too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "../src/json.h"
#include "../src/shard.h"

static lua_State *fuzz_L;

static void fuzz_die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz/json: %s: %s\n", what, detail);
    abort();
}

static int fuzz_body(lua_State *L)
{
    const char *s = lua_touserdata(L, 1);
    size_t size = (size_t)lua_tointeger(L, 2);
    char err[200];
    int top;

    static const char *const nspath[] = {"metadata", "namespace"};
    const char *ns = NULL;
    size_t nslen = 0;
    int scanned = json_scan_string(s, size, nspath, 2, &ns, &nslen);
    static const shard_range half = {0, UINT64_MAX / 2};
    shard_set set = {1, (shard_range *)&half};

    (void)shard_item_kept(s, size, &set);
    (void)shard_event_kept(&set, s, size);
    lua_settop(L, 0);
    top = lua_gettop(L);
    {
        /* json_check takes exactly what json_decode takes, pushing nothing */
        char cerr[200];
        int checked = json_check(L, s, size, cerr, sizeof cerr);
        if (lua_gettop(L) != top)
            fuzz_die("json_check left the stack changed", "");
        if (checked != json_decode(L, s, size, err, sizeof err))
            fuzz_die("json_check and json_decode disagree", checked ? err : cerr);
        if (checked)
            lua_pop(L, 1);
        else if (strcmp(cerr, err) != 0)
            fuzz_die("json_check and json_decode fail differently", cerr);
    }
    if (json_decode(L, s, size, err, sizeof err)) {
        dbuf once = {0}, twice = {0};
        if (scanned == 1) {
            size_t dlen = 0;
            const char *d = NULL;
            if (lua_type(L, -1) == LUA_TTABLE && lua_getfield(L, -1, "metadata") == LUA_TTABLE &&
                lua_getfield(L, -1, "namespace") == LUA_TSTRING)
                d = lua_tolstring(L, -1, &dlen);
            if (d == NULL || dlen != nslen || memcmp(d, ns, nslen) != 0)
                fuzz_die("the scanner read another metadata.namespace than the decoder", "");
            lua_settop(L, top + 1);
        }
        if (!json_encode(L, -1, &once, err, sizeof err))
            fuzz_die("a decoded value does not encode", err);
        lua_pop(L, 1);
        if (!json_decode(L, once.data, once.len, err, sizeof err))
            fuzz_die("an encoded value does not decode", err);
        if (!json_encode(L, -1, &twice, err, sizeof err))
            fuzz_die("a value decoded twice does not encode", err);
        if (once.len != twice.len || memcmp(once.data, twice.data, once.len) != 0)
            fuzz_die("the round trip changed the text", once.data ? once.data : "");
        lua_pop(L, 1);
        dbuf_free(&once);
        dbuf_free(&twice);
    }
    if (lua_gettop(L) != top)
        fuzz_die("decode left the stack changed", "");
    {
        static const json_cut mf[] = {{"managedFields", NULL, 0, 0}};
        static const json_cut md[] = {{"metadata", mf, 1, 0}};
        static const json_cut cut[] = {{NULL, md, 1, 0}};
        const char *v, *why, *e;
        size_t vlen;
        char *buf = malloc(size ? size : 1), *w = buf;

        if (buf == NULL)
            fuzz_die("out of memory", "");
        if (json_scan_member(s, size, "object", &v, &vlen) == 1 && (v < s || v + vlen > s + size))
            fuzz_die("json_scan_member's value is outside the text", "");
        e = json_scan_cut(s, s + size, cut, &w, &why);
        if (e != NULL && (e > s + size || w - buf > e - s))
            fuzz_die("the cut text is longer than the object", "");
        if (e != NULL && json_decode(L, s, size, err, sizeof err)) {
            dbuf a = {0}, b = {0};
            if (lua_type(L, -1) == LUA_TTABLE && lua_getfield(L, -1, "metadata") == LUA_TTABLE) {
                lua_pushnil(L);
                lua_setfield(L, -2, "managedFields");
            }
            lua_settop(L, top + 1);
            if (!json_encode(L, -1, &a, err, sizeof err))
                fuzz_die("a decoded value does not encode", err);
            lua_pop(L, 1);
            if (!json_decode(L, buf, (size_t)(w - buf), err, sizeof err))
                fuzz_die("the cut text of a text that decodes does not decode", err);
            if (!json_encode(L, -1, &b, err, sizeof err))
                fuzz_die("a decoded cut text does not encode", err);
            lua_pop(L, 1);
            if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
                fuzz_die("the cut text decodes to another value", b.data ? b.data : "");
            dbuf_free(&a);
            dbuf_free(&b);
        }
        /* a keep cut (a trimmed cache's): never longer, and of a text
         * that decodes, a text that decodes */
        {
            static const json_cut kept[] = {{"b", NULL, 0, 1}};
            static const json_cut top_keep[] = {{"metadata", mf, 1, 0}, {"kind", NULL, 0, 0},
                                                {"spec", kept, 1, 1}, {"status", NULL, 0, 0}};
            static const json_cut keep = {NULL, top_keep, 4, 1};
            w = buf;
            e = json_scan_cut(s, s + size, &keep, &w, &why);
            if (e != NULL && (e > s + size || w - buf > e - s))
                fuzz_die("the kept text is longer than the object", "");
            if (e != NULL && json_decode(L, s, size, err, sizeof err)) {
                lua_pop(L, 1);
                if (!json_decode(L, buf, (size_t)(w - buf), err, sizeof err))
                    fuzz_die("the kept text of a text that decodes does not decode", err);
                lua_pop(L, 1);
            }
        }
        free(buf);
    }
    if (lua_gettop(L) != top)
        fuzz_die("the cut left the stack changed", "");
    if (json_decode_page(L, s, size, "items", err, sizeof err))
        lua_pop(L, 2);
    if (lua_gettop(L) != top)
        fuzz_die("decode_page left the stack changed", "");
    const char *keys[] = {"metadata", "name"};
    if (json_peek(L, s, size, keys, 2, err, sizeof err))
        lua_pop(L, 1);
    if (lua_gettop(L) != top)
        fuzz_die("peek left the stack changed", "");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lua_State *L = fuzz_L;

    if (L == NULL)
        L = fuzz_L = luaL_newstate();
    lua_pushcfunction(L, fuzz_body);
    lua_pushlightuserdata(L, (void *)data);
    lua_pushinteger(L, (lua_Integer)size);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK)
        fuzz_die("the codec raised", lua_tostring(L, -1) ? lua_tostring(L, -1) : "(not a string)");
    lua_gc(L, LUA_GCSTEP, 0);
    return 0;
}
