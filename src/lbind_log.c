/* lbind_log.c - the Lua face of log.c: luaop.core.log.
 *
 *   log.setup{format = "text"|"json", level = "info"|"debug"|N, path = file}
 *                                   (this runtime's log; others keep theirs)
 *   log.write(level, logger, msg [, fields])   fields: {key = value, ...}
 *   log.enabled(level) -> boolean
 *
 * Field values: strings, numbers and booleans as themselves, tables as JSON,
 * json.null as null; a table JSON cannot hold, a function, a userdata or a
 * thread as "type: address". No metamethod of a value runs (__tostring
 * neither): values are read raw, by type. Keys are written in sorted
 * order; 64 fields at most. */
#include "lbind.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "charge.h"
#include "json.h"
#include "lbox.h"
#include "log.h"
#include "runtime.h"

#define LBIND_LOG_MAX_FIELDS 64

/* The sink of L's runtime; the process's when L has none. */
static log_sink *lbind_log_sink(lua_State *L)
{
    runtime *rt = runtime_get(L);

    return rt ? &rt->log : log_default();
}

static int lbind_log_checklevel(lua_State *L, int idx)
{
    int level;

    if (lua_isinteger(L, idx))
        return (int)lua_tointeger(L, idx);
    if (log_parse_level(luaL_checkstring(L, idx), &level) != 0)
        return luaL_argerror(L, idx, "level must be error, info, debug, trace or a number");
    return level;
}

static int lbind_log_setup(lua_State *L)
{
    log_format format = LOG_FORMAT_TEXT;
    int level = LOG_INFO;
    FILE *out = NULL;

    luaL_checktype(L, 1, LUA_TTABLE);
    if (lbind_rawfield(L, 1, "format") != LUA_TNIL &&
        log_parse_format(luaL_checkstring(L, -1), &format) != 0)
        return luaL_error(L, "log format must be text or json, not %s", lua_tostring(L, -1));
    if (lbind_rawfield(L, 1, "level") != LUA_TNIL)
        level = lbind_log_checklevel(L, lua_gettop(L));
    if (lbind_rawfield(L, 1, "path") != LUA_TNIL) {
        const char *path = luaL_checkstring(L, -1);
        out = fopen(path, "a");
        if (out == NULL)
            return luaL_fileresult(L, 0, path);
    }
    runtime *rt = runtime_get(L);
    if (rt == NULL) {
        if (out)
            fclose(out);
        return luaL_error(L, "no luaop runtime runs this Lua state");
    }
    if (rt->log_file)
        fclose(rt->log_file);
    rt->log_file = out;
    rt->log = (log_sink){format, level, out};
    lua_pushboolean(L, 1);
    return 1;
}

static int lbind_log_enabled(lua_State *L)
{
    lua_pushboolean(L, log_sink_enabled(lbind_log_sink(L), lbind_log_checklevel(L, 1)));
    return 1;
}

static int lbind_log_keycmp(const void *a, const void *b)
{
    return strcmp(((const log_field *)a)->key, ((const log_field *)b)->key);
}

/* The value at the top as a field, read raw by its type: no metamethod of
 * the value runs (a script's __tostring, __index, __pairs), so nothing can
 * change the fields or run the collector behind this call's back. A table
 * is written as JSON (json_encode reads it raw), into the box at `box`;
 * one JSON cannot hold, and a function, userdata or thread, as Lua's own
 * tostring writes a value without __tostring ("table: 0x55d0c0a0"). Text
 * made here replaces the value at slot `slot` of the anchor table, which
 * keeps every string a field points to alive until the line is written. */
static void lbind_log_value(lua_State *L, log_field *f, int anchor, lua_Integer slot, dbuf *box)
{
    char err[16];

    switch (lua_type(L, -1)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) {
            f->kind = LOG_INT;
            f->v.i = (long long)lua_tointeger(L, -1);
        } else {
            f->kind = LOG_NUM;
            f->v.d = (double)lua_tonumber(L, -1);
        }
        return;
    case LUA_TBOOLEAN:
        f->kind = LOG_BOOL;
        f->v.b = lua_toboolean(L, -1);
        return;
    case LUA_TSTRING: /* anchored at slot already */
        f->kind = LOG_STR;
        f->v.str.s = lua_tolstring(L, -1, &f->v.str.n);
        charge_add(L, 1 + (unsigned long)(f->v.str.n / CHARGE_COPY)); /* escaped as it is written */
        return;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, -1) == json_null) {
            f->kind = LOG_RAW;
            f->v.str.s = "null";
            f->v.str.n = 4;
            return;
        }
        break;
    case LUA_TTABLE: {
        int ok;
        dbuf_clear(box);
        ok = json_encode_redacted(L, -1, box, err, sizeof err, log_is_secret_key);
        /* the C work of its JSON (charge.h), whether it could be made or not */
        charge_add(L, 1 + (unsigned long)(box->len / 2));
        if (ok) {
            f->kind = LOG_RAW;
            f->v.str.s = lua_pushlstring(L, box->data ? box->data : "", box->len);
            f->v.str.n = box->len;
            lua_rawseti(L, anchor, slot);
            return;
        }
        break;
    }
    }
    f->kind = LOG_STR;
    f->v.str.s = lua_pushfstring(L, "%s: %p", luaL_typename(L, -1), lua_topointer(L, -1));
    f->v.str.n = strlen(f->v.str.s);
    lua_rawseti(L, anchor, slot);
}

static int lbind_log_write(lua_State *L)
{
    int level = lbind_log_checklevel(L, 1);
    const char *logger = luaL_optstring(L, 2, "");
    size_t msg_len;
    const char *msg = luaL_checklstring(L, 3, &msg_len);
    log_field fields[LBIND_LOG_MAX_FIELDS];
    lua_Integer n = 0;

    if (!log_sink_enabled(lbind_log_sink(L), level))
        return 0;
    charge_add(L, 1 + (unsigned long)(msg_len / CHARGE_COPY)); /* escaped as it is written (charge.h) */
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        lua_settop(L, 4);
        /* First every key and value, raw, into a table this call holds
         * (5), sized first so that nothing allocates while lua_next walks:
         * from then on no pointer below is into a string that only the
         * caller's table keeps alive (a weak one may lose it to any
         * collection). Then each value becomes a field. */
        lua_createtable(L, 2 * LBIND_LOG_MAX_FIELDS, 0);
        lua_pushnil(L);
        while (lua_next(L, 4)) {
            if (n == LBIND_LOG_MAX_FIELDS) {
                lua_pop(L, 2);
                break;
            }
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "log field keys must be strings");
            lua_rawseti(L, 5, 2 * n + 2);
            lua_pushvalue(L, -1);
            lua_rawseti(L, 5, 2 * n + 1);
            n++;
        }
        /* The JSON of table values: grown with the state's allocator (the
         * task's memory budget) and freed however this call ends (lbox.h). */
        dbuf *box = lbox_push(L);
        for (lua_Integer i = 0; i < n; i++) {
            lua_rawgeti(L, 5, 2 * i + 1);
            fields[i].key = lua_tostring(L, -1);
            lua_rawgeti(L, 5, 2 * i + 2);
            lbind_log_value(L, &fields[i], 5, 2 * i + 2, box);
            lua_pop(L, 2);
        }
        qsort(fields, (size_t)n, sizeof fields[0], lbind_log_keycmp);
        charge_add(L, CHARGE_ACCESS * (unsigned long)n); /* the keys' sort */
    }
    log_sink_write(lbind_log_sink(L), level, logger, msg, fields, (size_t)n);
    return 0;
}

static const luaL_Reg lbind_log_funcs[] = {
    {"setup", lbind_log_setup},
    {"write", lbind_log_write},
    {"enabled", lbind_log_enabled},
    {NULL, NULL},
};

int lbind_log_open(lua_State *L)
{
    luaL_newlib(L, lbind_log_funcs);
    return 1;
}
