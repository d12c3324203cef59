/* lbind_json.c - the Lua face of json.c: luaop.core.json.
 *
 *   json.decode(s)   -> value | nil, err    (malformed input is not misuse)
 *   json.peek(s, key) -> the value of s's member key | nil | nil, err
 *                        (the others skipped, not decoded)
 *   json.event(line [, cut [, shallow]]) -> type, object, text | nothing  (a watch event, for a cache)
 *   json.page_texts(text [, cut [, head [, shard]]]) -> page, texts, skipped, dropped | nil, err
 *                        (a LIST page, for a cache)
 *   json.cut{drop = {paths}} or json.cut{keep = {paths}} -> a cut (what a trimmed cache keeps)
 *   json.trim(text [, cut]) -> text | nothing  (an object's text, cut)
 *   json.encode(v)   -> string              (raises on a value JSON cannot hold)
 *   json.null        the value of JSON null
 *   json.hash(v)     -> the SHA-256 of encode(v), 64 hex digits (luaop.hash)
 *   json.array([t])  marks t (or a new table) as an array; returns it
 *   json.is_array(t) -> boolean */
#include "lbind.h"

#include <stdlib.h>
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
static const json_cut lbind_json_mf[] = {{"managedFields", NULL, 0, 0}};
static const json_cut lbind_json_md[] = {{"metadata", lbind_json_mf, 1, 0}};
static const json_cut lbind_json_cache_cut = {NULL, lbind_json_md, 1, 0};

/* ---- json.cut: what a trimmed cache keeps ------------------------------ */

#define LBIND_JSON_CUT_MT "luaop.json.cut"
#define LBIND_JSON_CUT_PATHS 64 /* paths in one cut */
#define LBIND_JSON_CUT_DEPTH 16 /* names in one path */
#define LBIND_JSON_CUT_NAME 253 /* bytes in one name */

/* A cut json.cut made: its tree, in memory this userdata owns, taken from
 * Lua's allocator as lbox.h's boxes are (so it counts in the collector's
 * debt and the running task's memory budget), and given back by its __gc
 * (so a raise while it is built leaks nothing). */
typedef struct lbind_cut {
    json_cut root;
    lua_Alloc alloc;
    void *ud;
} lbind_cut;

static void lbind_cut_free(lbind_cut *c, json_cut *n)
{
    json_cut *kids = (json_cut *)n->kids;

    for (int i = 0; i < n->nkids; i++) {
        c->alloc(c->ud, (char *)kids[i].key, strlen(kids[i].key) + 1, 0);
        lbind_cut_free(c, &kids[i]); /* as deep as LBIND_JSON_CUT_DEPTH */
    }
    if (kids != NULL)
        c->alloc(c->ud, kids, (size_t)n->nkids * sizeof *kids, 0);
    n->kids = NULL;
    n->nkids = 0;
}

static int lbind_cut_gc(lua_State *L)
{
    lbind_cut *c = lua_touserdata(L, 1);

    if (c->alloc != NULL)
        lbind_cut_free(c, &c->root);
    return 0;
}

/* n's kid named name[0..len), made when absent (*made), its own kids in
 * mode keep. */
static json_cut *lbind_cut_kid(lua_State *L, lbind_cut *c, json_cut *n, const char *name, size_t len, int keep,
                               int *made)
{
    json_cut *kids = (json_cut *)n->kids;
    size_t size = (size_t)n->nkids * sizeof *kids;
    char *key;

    for (int i = 0; i < n->nkids; i++) {
        if (strlen(kids[i].key) == len && memcmp(kids[i].key, name, len) == 0) {
            *made = 0;
            return &kids[i];
        }
    }
    if ((key = c->alloc(c->ud, NULL, 0, len + 1)) == NULL)
        luaL_error(L, "not enough memory");
    if ((kids = c->alloc(c->ud, kids, size, size + sizeof *kids)) == NULL) {
        c->alloc(c->ud, key, len + 1, 0);
        luaL_error(L, "not enough memory");
    }
    memcpy(key, name, len);
    key[len] = '\0';
    kids[n->nkids] = (json_cut){key, NULL, 0, keep};
    n->kids = kids;
    *made = 1;
    return &kids[n->nkids++];
}

/* Add a path (names joined by '.') under root, each member it makes in
 * mode keep: the member at its end taken or cut whole (a path that goes on
 * past a member another path takes whole changes nothing). */
static void lbind_cut_add(lua_State *L, lbind_cut *c, const char *path, size_t len, int keep)
{
    json_cut *n = &c->root;
    const char *p = path, *end = path + len;

    for (int depth = 1;; depth++) {
        const char *dot = memchr(p, '.', (size_t)(end - p)), *e = dot ? dot : end;
        json_cut *k;
        int made;

        if (e == p || e - p > LBIND_JSON_CUT_NAME)
            luaL_error(L, "json.cut: path \"%s\": each name between dots is 1 to %d bytes", path, LBIND_JSON_CUT_NAME);
        if (depth > LBIND_JSON_CUT_DEPTH)
            luaL_error(L, "json.cut: path \"%s\": at most %d names", path, LBIND_JSON_CUT_DEPTH);
        k = lbind_cut_kid(L, c, n, p, (size_t)(e - p), keep, &made);
        if (!made && k->kids == NULL)
            return; /* taken or cut whole already */
        if (e == end) {
            lbind_cut_free(c, k); /* whole, whatever paths went on from it */
            return;
        }
        n = k;
        p = e + 1;
    }
}

/* Whether path is at, or under, the member named by prefix. */
static int lbind_cut_under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);

    return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '.');
}

/* json.cut{drop = {path...}} or json.cut{keep = {path...}} -> a cut: what a
 * trimmed cache leaves out of each object (drop), or the only members it
 * keeps beside apiVersion, kind and metadata (keep); metadata.managedFields
 * always goes. json.cut{metadata_only = true}: metadata alone (a
 * metadata-only cache's: its apiVersion and kind are always the same). A path is names joined by '.' ("spec.template"); under
 * metadata only annotations may be dropped, and nothing named under
 * apiVersion, kind or metadata is kept (they always are). */
static int lbind_json_cut(lua_State *L)
{
    lbind_cut *c;
    int keep, made, n, metadata_only;
    json_cut *md;

    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_pushliteral(L, "metadata_only");
    metadata_only = lua_rawget(L, 1) != LUA_TNIL && lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_pushliteral(L, "drop");
    lua_rawget(L, 1); /* 2 */
    lua_pushliteral(L, "keep");
    lua_rawget(L, 1); /* 3 */
    if (metadata_only) {
        if (!lua_isnil(L, 2) || !lua_isnil(L, 3))
            return luaL_error(L, "json.cut: metadata_only keeps metadata alone: no drop or keep beside it");
        keep = 1; /* nothing named but metadata */
        n = 0;
    } else {
        if (lua_isnil(L, 2) == lua_isnil(L, 3))
            return luaL_error(L, "json.cut: give drop = {paths} or keep = {paths}, one of the two");
        keep = !lua_isnil(L, 3);
        luaL_checktype(L, keep ? 3 : 2, LUA_TTABLE);
        n = (int)lua_rawlen(L, keep ? 3 : 2);
        if (n < 1 || n > LBIND_JSON_CUT_PATHS)
            return luaL_error(L, "json.cut: %s lists 1 to %d paths", keep ? "keep" : "drop", LBIND_JSON_CUT_PATHS);
    }
    c = lua_newuserdatauv(L, sizeof *c, 0); /* 4 */
    memset(c, 0, sizeof *c);
    if (luaL_newmetatable(L, LBIND_JSON_CUT_MT)) {
        lua_pushcfunction(L, lbind_cut_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "__metatable");
    }
    lua_setmetatable(L, 4);
    c->alloc = lua_getallocf(L, &c->ud);
    c->root.keep = keep;
    md = lbind_cut_kid(L, c, &c->root, "metadata", 8, 0, &made);
    lbind_cut_kid(L, c, md, "managedFields", 13, 0, &made);
    if (keep && !metadata_only) {
        lbind_cut_kid(L, c, &c->root, "apiVersion", 10, 0, &made);
        lbind_cut_kid(L, c, &c->root, "kind", 4, 0, &made);
    }
    for (int i = 1; i <= n; i++) {
        size_t len;
        const char *path;

        if (lua_rawgeti(L, keep ? 3 : 2, i) != LUA_TSTRING)
            return luaL_error(L, "json.cut: %s[%d] is no path (a string)", keep ? "keep" : "drop", i);
        path = lua_tolstring(L, -1, &len);
        if (strlen(path) != len)
            return luaL_error(L, "json.cut: %s[%d] holds a zero byte", keep ? "keep" : "drop", i);
        if ((lbind_cut_under(path, "metadata") || lbind_cut_under(path, "apiVersion") ||
             lbind_cut_under(path, "kind")) &&
            (keep || !lbind_cut_under(path, "metadata.annotations")))
            return luaL_error(L, "json.cut: %s \"%s\": apiVersion, kind and metadata are always kept%s",
                              keep ? "keep" : "drop", path, keep ? "" : " (but for metadata.annotations)");
        lbind_cut_add(L, c, path, len, keep);
        lua_pop(L, 1);
    }
    return 1;
}

/* The cut at idx (json.cut's), or the cache's own when none. */
const json_cut *lbind_json_tocut(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return &lbind_json_cache_cut;
    return &((lbind_cut *)luaL_checkudata(L, idx, LBIND_JSON_CUT_MT))->root;
}

/* Push the text of the object at o (olen bytes, ending where it ends) cut
 * as node says, after head (hlen bytes: "{" and members, without a comma
 * after the last; none when hlen is 0), whose members then come first; 0
 * (nothing pushed) when it cannot be cut. The cut text is never longer
 * than the object's: written to the scratch, or to a userdata of hlen +
 * olen bytes (pushed, then removed), collected however this ends. */
static int lbind_json_cut_push(lua_State *L, const char *o, size_t olen, const json_cut *node, const char *head,
                               size_t hlen)
{
    const char *why;
    char *buf, *w;
    int scratch = olen <= sizeof lbind_json_scratch - hlen && hlen <= sizeof lbind_json_scratch &&
                  !lbind_json_scratch_busy;

    if (scratch) {
        buf = lbind_json_scratch;
        lbind_json_scratch_busy = 1;
    } else {
        buf = lua_newuserdatauv(L, hlen + olen ? hlen + olen : 1, 0);
    }
    if (hlen > 0)
        memcpy(buf, head, hlen);
    w = buf + hlen;
    if (json_scan_cut(o, o + olen, node, &w, &why) != o + olen) {
        if (scratch)
            lbind_json_scratch_busy = 0;
        else
            lua_pop(L, 1);
        return 0;
    }
    if (hlen > 0) { /* "{}" ends the head; "{m..." goes on from it */
        if (w - buf == (ptrdiff_t)hlen + 2)
            w = buf + hlen + 1;
        buf[hlen] = w == buf + hlen + 1 ? '}' : ',';
    }
    lua_pushlstring(L, buf, (size_t)(w - buf));
    if (scratch)
        lbind_json_scratch_busy = 0;
    else
        lua_remove(L, -2);
    return 1;
}

/* Push the object whose text (n bytes at text, anchored) an informer's
 * cache keeps: when shallow, and json_scan_member finds its metadata (the
 * member the decoder would take, the last of two), the text checked as
 * json_decode would take it and {metadata = ...} alone decoded; else the
 * text decoded whole (an object without metadata is refused by the
 * caller; one whose keys are written with escapes is so decoded right).
 * 1, or 0 with a message in err (nothing pushed). */
static int lbind_json_push_object(lua_State *L, const char *text, size_t n, int shallow, char *err, size_t errlen)
{
    const char *md;
    size_t mdlen;

    if (!shallow || json_scan_member(text, n, "metadata", &md, &mdlen) != 1)
        return json_decode(L, text, n, err, errlen);
    if (!json_check(L, text, n, err, errlen))
        return 0;
    lua_createtable(L, 0, 1);
    if (!json_decode(L, md, mdlen, err, errlen)) {
        lua_pop(L, 1);
        return 0;
    }
    lua_setfield(L, -2, "metadata");
    return 1;
}

/* json.event(line [, cut [, shallow]]) -> type, object, text: a watch
 * event's type (a string written without escapes), and its object (an
 * object) cut as cut says (default: metadata.managedFields out) before
 * decoding, as text (what an informer's cache keeps) and decoded from that
 * text; shallow: the text checked as json_decode would take it, and only
 * its metadata decoded, as {metadata = ...} (an informer decodes the rest
 * from the text when a handler reads it; an ERROR's Status, or an object
 * whose metadata json_scan_member does not find, is decoded whole; an
 * ERROR's Status is never cut but for managedFields). Nothing
 * (not even nil) for any line it does not take so: malformed, a type or
 * object of another shape, a key written with escapes on the way; the
 * caller then decodes the line whole, which says what is wrong with it. */
int lbind_json_event_push(lua_State *L, const char *s, size_t len, const json_cut *node, int shallow)
{
    size_t tlen, olen, n;
    const char *t, *o, *text;
    const char *const type_key[1] = {"type"};
    int top = lua_gettop(L);
    char err[160];

    lbind_json_charge(L, len);
    if (json_scan_string(s, len, type_key, 1, &t, &tlen) != 1)
        return 0;
    if (json_scan_member(s, len, "object", &o, &olen) != 1 || *o != '{')
        return 0;
    luaL_checkstack(L, 4, "json event");
    if (tlen == 5 && memcmp(t, "ERROR", 5) == 0) {
        /* a Status, never an object of the cache's kind: decoded whole,
         * uncut (a trimmed cache's cut would take its code, reason and
         * message, and a 410 would read as a 500) */
        shallow = 0;
        node = &lbind_json_cache_cut;
    }
    lua_pushlstring(L, t, tlen); /* top + 1: the type */
    if (!lbind_json_cut_push(L, o, olen, node, NULL, 0)) { /* top + 2: the text */
        lua_settop(L, top);
        return 0;
    }
    text = lua_tolstring(L, top + 2, &n); /* anchored, immutable */
    if (!lbind_json_push_object(L, text, n, shallow, err, sizeof err)) { /* top + 3 */
        lua_settop(L, top);
        return 0;
    }
    lua_insert(L, top + 2); /* type, object, text */
    return 3;
}

static int lbind_json_event(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const json_cut *node = lbind_json_tocut(L, 2);

    lua_settop(L, 3);
    return lbind_json_event_push(L, s, len, node, lua_toboolean(L, 3));
}

/* json.page_texts's work on each item of a page */
typedef struct lbind_page {
    const json_cut *node;
    const char *head;
    size_t hlen;
    shard_set *set;
    int texts;          /* the stack index of the texts */
    lua_Integer n;      /* items pushed */
} lbind_page;

static int lbind_json_page_item(lua_State *L, const char *item, size_t len, void *ud, char *err, size_t errlen)
{
    lbind_page *pg = ud;
    const char *text;
    size_t n;

    if (pg->set != NULL && !shard_item_kept(item, len, pg->set))
        return -1;
    if (!lbind_json_cut_push(L, item, len, pg->node, pg->head, pg->hlen)) {
        /* (an item it cannot cut: decoded whole from its own text, and no
         * text kept, false) */
        if (!json_decode(L, item, len, err, errlen))
            return 0;
        lua_pushboolean(L, 0);
        lua_rawseti(L, pg->texts, ++pg->n);
        return 1;
    }
    text = lua_tolstring(L, -1, &n); /* anchored, immutable */
    if (!lbind_json_push_object(L, text, n, 1, err, errlen)) {
        lua_pop(L, 1);
        /* (the message named a byte of the text after head: the item's own
         * decoding names its own) */
        if (json_decode(L, item, len, err, errlen))
            lua_pop(L, 1);
        return 0;
    }
    lua_insert(L, -2);
    lua_rawseti(L, pg->texts, ++pg->n); /* the object left */
    return 1;
}

/* json.page_texts(text [, cut [, head [, shard]]]) -> page, texts, skipped,
 * dropped | nil, err: a page of a LIST (json.decode_page's, shard as its)
 * whose items are kept as an informer's cache keeps them: each item's text
 * cut as cut says (default: metadata.managedFields out) after head's
 * members ("{" and members without a trailing comma: the apiVersion and
 * kind a LIST's items lack), texts[i] that of page.items[i], which is
 * decoded shallow from it as json.event's; an item it cannot cut (a key
 * written with escapes) is decoded whole from its own text, its text
 * false. */
static int lbind_json_page_texts(lua_State *L)
{
    size_t len, dropped = 0;
    const char *s = luaL_checklstring(L, 1, &len);
    lbind_page pg = {lbind_json_tocut(L, 2), NULL, 0, NULL, 0, 0};
    char err[160];

    pg.head = luaL_optlstring(L, 3, NULL, &pg.hlen);
    if (pg.head != NULL && (pg.hlen < 1 || pg.head[0] != '{'))
        return luaL_argerror(L, 3, "members after \"{\"");
    lua_settop(L, 4);
    if (!lua_isnil(L, 4)) {
        pg.set = lua_newuserdatauv(L, sizeof *pg.set, 0); /* 5, freed with it, whatever raises */
        memset(pg.set, 0, sizeof *pg.set);
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, lbind_json_shard_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lbind_shard_toset(L, 4, "json.page_texts: shard", pg.set);
    }
    lbind_json_charge(L, len);
    lua_newtable(L); /* the texts */
    pg.texts = lua_gettop(L);
    if (!json_decode_page_with(L, s, len, "items", err, sizeof err, lbind_json_page_item, &pg, &dropped)) {
        luaL_pushfail(L);
        lua_pushstring(L, err);
        return 2;
    }
    /* texts, page, skipped */
    lua_pushvalue(L, pg.texts);
    lua_insert(L, -2); /* page, texts, skipped */
    lua_pushinteger(L, (lua_Integer)dropped);
    return 4;
}

/* json.trim(text [, cut]) -> the object's text cut as cut says (default:
 * metadata.managedFields out) | nothing, when it is no object it can cut
 * (as json.event). For an object from elsewhere than a watch line. */
static int lbind_json_trim(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len), *o, *at, *why, *e;
    const json_cut *node = lbind_json_tocut(L, 2);

    lbind_json_charge(L, len);
    o = s;
    while (o < s + len && (*o == ' ' || *o == '\t' || *o == '\n' || *o == '\r'))
        o++;
    if (o >= s + len || *o != '{' || (e = json_scan_skip(o, s + len, &at, &why)) == NULL)
        return 0;
    return lbind_json_cut_push(L, o, (size_t)(e - o), node, NULL, 0);
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
    {"page_texts", lbind_json_page_texts},
    {"event", lbind_json_event},
    {"cut", lbind_json_cut},
    {"trim", lbind_json_trim},
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
