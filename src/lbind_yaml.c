/* lbind_yaml.c - luaop.core.yaml: YAML documents (Kubernetes manifests) as
 * Lua values, for the test kit and trusted programs:
 *
 *   yaml.decode(text) -> { document, ... } | nil, "line N: what is wrong"
 *
 * Values are typed as sigs.k8s.io/yaml (go-yaml v2) types them, so a
 * manifest reads as kubectl reads it: mappings are tables, sequences JSON
 * arrays (json.array), unquoted null, ~ and empty values JSON null
 * (json.null), true/false/yes/no/on/off booleans, decimal, 0x and 0o
 * integers and decimal floats numbers, everything else (and anything
 * quoted) a string. Anchors and aliases are refused (ytree.h). */
#include "lbind.h"

#include <string.h>
#include <strings.h>

#include <lauxlib.h>

#include "charge.h"
#include "json.h"
#include "ytree.h"

static const char *const lbind_yaml_true[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y",
                                              "Y", NULL};
static const char *const lbind_yaml_false[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF",
                                               "n", "N", NULL};

static int lbind_yaml_in(const char *s, const char *const *words)
{
    for (; *words; words++) {
        if (strcmp(s, *words) == 0)
            return 1;
    }
    return 0;
}

/* A plain scalar's number, pushed: 1, or 0 when it is no number YAML reads. */
static int lbind_yaml_number(lua_State *L, const char *s, size_t len)
{
    size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;

    if (len == i || len > 64)
        return 0;
    /* Lua reads hexadecimal itself; YAML's 0o is octal, and so is a
     * leading 0 as go-yaml v2 reads it (defaultMode: 0644 is 420) */
    if (s[i] == '0' && (s[i + 1] == 'o' || (s[i + 1] >= '0' && s[i + 1] <= '7'))) {
        lua_Integer v = 0;
        size_t from = i + (s[i + 1] == 'o' ? 2 : 1);
        if (len == from)
            return 0;
        for (size_t j = from; j < len; j++) {
            if (s[j] < '0' || s[j] > '7' || v > (LUA_MAXINTEGER >> 3))
                return 0;
            v = v * 8 + (s[j] - '0');
        }
        lua_pushinteger(L, s[0] == '-' ? -v : v);
        return 1;
    }
    /* digits, an optional fraction, an optional exponent: nothing Lua
     * would read besides (inf, nan, hexadecimal floats, spaces) */
    for (size_t j = i; j < len; j++) {
        if (!strchr("0123456789.eExX+-abcdefABCDEF", s[j]))
            return 0;
    }
    if (lua_stringtonumber(L, s) != len + 1)
        return 0;
    return 1;
}

static void lbind_yaml_push(lua_State *L, const ytree *t)
{
    luaL_checkstack(L, 4, "YAML nested too deep");
    switch (t->kind) {
    case YTREE_SCALAR:
        if (t->quoted)
            lua_pushlstring(L, t->str, t->len);
        else if (ytree_is_null(t))
            lua_pushlightuserdata(L, json_null);
        else if (lbind_yaml_in(t->str, lbind_yaml_true))
            lua_pushboolean(L, 1);
        else if (lbind_yaml_in(t->str, lbind_yaml_false))
            lua_pushboolean(L, 0);
        else if (!lbind_yaml_number(L, t->str, t->len))
            lua_pushlstring(L, t->str, t->len);
        return;
    case YTREE_SEQ:
        lua_createtable(L, (int)t->len, 0);
        for (size_t i = 0; i < t->len; i++) {
            lbind_yaml_push(L, t->items[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        json_push_array_mt(L);
        lua_setmetatable(L, -2);
        return;
    case YTREE_MAP:
        lua_createtable(L, 0, (int)t->len);
        for (size_t i = 0; i < t->len; i++) {
            lbind_yaml_push(L, t->items[i]);
            lua_setfield(L, -2, t->keys[i]);
        }
        return;
    }
}

#define LBIND_YAML_MT "luaop.yaml.docs"

/* The box that frees a parsed stream, even when a push raises. */
static int lbind_yaml_gc(lua_State *L)
{
    ytree **box = luaL_checkudata(L, 1, LBIND_YAML_MT);

    ytree_free(*box);
    *box = NULL;
    return 0;
}

static int lbind_yaml_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    char err[256];
    ytree **box;

    /* parsing is C work the count hook cannot see (charge.h) */
    charge_add(L, 1 + (unsigned long)len);
    box = lua_newuserdatauv(L, sizeof *box, 0);

    *box = NULL;
    luaL_setmetatable(L, LBIND_YAML_MT);
    lua_toclose(L, -1); /* freed when the call ends, a raise included */
    *box = ytree_parse_all(s, len, err, sizeof err);
    if (*box == NULL) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_createtable(L, (int)(*box)->len, 0);
    for (size_t i = 0; i < (*box)->len; i++) {
        lbind_yaml_push(L, (*box)->items[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    ytree_free(*box);
    *box = NULL;
    return 1;
}

int lbind_yaml_open(lua_State *L)
{
    static const luaL_Reg none[] = {{NULL, NULL}};
    static const luaL_Reg funcs[] = {
        {"decode", lbind_yaml_decode},
        {NULL, NULL},
    };

    lbind_class(L, LBIND_YAML_MT, none, lbind_yaml_gc, lbind_yaml_gc);
    luaL_newlib(L, funcs);
    return 1;
}
