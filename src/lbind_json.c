/* lbind_json.c - the Lua face of json.c: luaop.core.json.
 *
 *   json.decode(s)   -> value | nil, err    (malformed input is not misuse)
 *   json.peek(s, key) -> the value of s's member key | nil | nil, err
 *                        (the others skipped, not decoded)
 *   json.event(line) -> type, object, text | nothing  (a watch event, for a cache)
 *   json.encode(v)   -> string              (raises on a value JSON cannot hold)
 *   json.null        the value of JSON null
 *   json.hash(v)     -> the SHA-256 of encode(v), 64 hex digits (luaop.hash)
 *   json.array([t])  marks t (or a new table) as an array; returns it
 *   json.is_array(t) -> boolean */
#include "lbind.h"

#include <string.h>

#include <lauxlib.h>

#include "charge.h"
#include "json.h"
#include "lbox.h"
#include "sha256.h"
#include "shard.h"

/* What the codec's C work is charged (charge.h): the count hook never
 * fires inside it, so a loop of calls would run outside every budget. A
 * text to decode is paid for before it is parsed, an encoded one as it is
 * handed back (its growth is bounded by the memory budget meanwhile): one
 * instruction per LBIND_JSON_BYTES bytes. */
#define LBIND_JSON_BYTES 2

static void lbind_json_charge(lua_State *L, size_t len)
{
    charge_add(L, 1 + (unsigned long)(len / LBIND_JSON_BYTES));
}

static int lbind_json_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    char err[160];

    lbind_json_charge(L, len);
    if (json_decode(L, s, len, err, sizeof err))
        return 1;
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
}

/* json.peek(text, key [, key...]) -> the value at that path, or nil */
static int lbind_json_peek(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *keys[8];
    int n = lua_gettop(L) - 1;
    char err[160];

    luaL_argcheck(L, n >= 1 && n <= 8, 2, "one to eight keys");
    lbind_json_charge(L, len);
    for (int i = 0; i < n; i++)
        keys[i] = luaL_checkstring(L, i + 2);
    if (json_peek(L, s, len, keys, n, err, sizeof err))
        return 1;
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
}

static int lbind_json_shard_gc(lua_State *L)
{
    shard_set_clear(lua_touserdata(L, 1));
    return 0;
}

/* json.decode_page(text [, key [, shard]]) -> page, skipped, dropped | nil,
 * err (json.h); shard: hash ranges, items certainly outside them left out
 * undecoded (shard_item_kept), counted in dropped */
static int lbind_json_decode_page(lua_State *L)
{
    size_t len, dropped = 0;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *key = luaL_optstring(L, 2, "items");
    shard_set *set = NULL;
    char err[160];

    if (!lua_isnoneornil(L, 3)) {
        set = lua_newuserdatauv(L, sizeof *set, 0); /* freed with it, whatever raises */
        memset(set, 0, sizeof *set);
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, lbind_json_shard_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lbind_shard_toset(L, 3, "json.decode_page: shard", set);
    }
    lbind_json_charge(L, len);
    if (json_decode_page_kept(L, s, len, key, err, sizeof err, set ? shard_item_kept : NULL, set, &dropped)) {
        lua_pushinteger(L, (lua_Integer)dropped);
        return 3;
    }
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
}

/* json.event's scratch space, for objects whose text fits: no garbage
 * for each event (the cut text is copied into the string kept, and the
 * table decoded from that string). Busy from the cut to the copy: an
 * allocation may run a finalizer, whose Lua may call json.event, which
 * then takes a userdata. (A raise between leaves it busy: every call
 * after takes a userdata, correct and a little slower.) */
static char lbind_json_scratch[16384];
static int lbind_json_scratch_busy;

/* What a cache never keeps of an object: metadata.managedFields. */
static const json_cut lbind_json_mf[] = {{"managedFields", NULL, 0}};
static const json_cut lbind_json_cache_cut[] = {{"metadata", lbind_json_mf, 1}};

/* json.event(line) -> type, object, text: a watch event's type (a string
 * written without escapes), and its object (an object) with
 * metadata.managedFields cut out before decoding, as text (what an
 * informer's cache keeps) and decoded from that text. Nothing (not even
 * nil) for any line it does not take so: malformed, a type or object of
 * another shape, a key written with escapes on the way; the caller then
 * decodes the line whole, which says what is wrong with it. */
static int lbind_json_event(lua_State *L)
{
    size_t len, tlen, olen, n;
    const char *s = luaL_checklstring(L, 1, &len), *t, *o, *why, *text;
    const char *const type_key[1] = {"type"};
    char err[160], *buf, *w;
    int scratch;

    lbind_json_charge(L, len);
    if (json_scan_string(s, len, type_key, 1, &t, &tlen) != 1)
        return 0;
    if (json_scan_member(s, len, "object", &o, &olen) != 1 || *o != '{')
        return 0;
    lua_settop(L, 1);
    lua_pushlstring(L, t, tlen); /* 2: the type */
    /* the cut text is never longer than the object's: the scratch, or a
     * userdata that size, collected however this ends */
    scratch = olen <= sizeof lbind_json_scratch && !lbind_json_scratch_busy;
    if (scratch) {
        buf = w = lbind_json_scratch;
        lbind_json_scratch_busy = 1;
    } else {
        buf = w = lua_newuserdatauv(L, olen, 0); /* 3 */
    }
    if (json_scan_cut(o, o + olen, lbind_json_cache_cut, 1, &w, &why) != o + olen) {
        if (scratch)
            lbind_json_scratch_busy = 0;
        return 0;
    }
    lua_pushlstring(L, buf, (size_t)(w - buf));
    if (scratch)
        lbind_json_scratch_busy = 0;
    text = lua_tolstring(L, -1, &n); /* the string pushed: anchored, immutable */
    if (!json_decode(L, text, n, err, sizeof err))
        return 0;
    lua_insert(L, -2); /* type, [userdata,] object, text */
    if (!scratch)
        lua_remove(L, 3);
    return 3;
}

static int lbind_json_encode(lua_State *L)
{
    char err[160];
    dbuf *b;

    luaL_checkany(L, 1);
    lua_settop(L, 1);
    /* The text grows in a box (lbox.h): charged to the task's memory
     * budget, and freed however this call ends, a raise included. */
    b = lbox_push(L);
    if (!json_encode(L, 1, b, err, sizeof err)) {
        lbind_json_charge(L, b->len); /* the work done before it failed */
        return luaL_error(L, "%s", err);
    }
    lbind_json_charge(L, b->len);
    lua_pushlstring(L, b->data ? b->data : "", b->len);
    return 1;
}

/* encode's text is canonical (members in byte order of their names,
 * numbers in their shortest form, an integral float as an integer), so
 * its digest is the same for equal values in every process and version. */
static int lbind_json_hash(lua_State *L)
{
    char err[160], hex[2 * SHA256_DIGEST + 1];
    dbuf *b;

    luaL_checkany(L, 1);
    lua_settop(L, 1);
    b = lbox_push(L);
    if (!json_encode(L, 1, b, err, sizeof err)) {
        lbind_json_charge(L, b->len);
        return luaL_error(L, "luaop.hash: %s", err); /* at the caller's line */
    }
    lbind_json_charge(L, 2 * b->len); /* the encoding, then the digest */
    sha256_hex(b->data ? b->data : "", b->len, hex);
    lua_pushstring(L, hex);
    return 1;
}

static int lbind_json_array(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    } else {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_settop(L, 1);
    }
    json_push_array_mt(L);
    lua_setmetatable(L, 1);
    return 1;
}

static int lbind_json_is_array(lua_State *L)
{
    int yes = 0;

    luaL_checkany(L, 1);
    if (lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1)) {
        json_push_array_mt(L);
        yes = lua_rawequal(L, -1, -2);
    }
    lua_pushboolean(L, yes);
    return 1;
}

static const luaL_Reg lbind_json_funcs[] = {
    {"decode", lbind_json_decode},
    {"peek", lbind_json_peek},
    {"decode_page", lbind_json_decode_page},
    {"event", lbind_json_event},
    {"encode", lbind_json_encode},
    {"hash", lbind_json_hash},
    {"array", lbind_json_array},
    {"is_array", lbind_json_is_array},
    {NULL, NULL},
};

int lbind_json_open(lua_State *L)
{
    luaL_newlib(L, lbind_json_funcs);
    lua_pushlightuserdata(L, json_null);
    lua_setfield(L, -2, "null");
    return 1;
}
