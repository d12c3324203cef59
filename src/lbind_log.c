/* lbind_log.c - the Lua face of log.c: luaop.core.log.
 *
 *   log.setup{format = "text"|"json", level = "info"|"debug"|N, path = file}
 *                                   (this runtime's log; others keep theirs)
 *   log.write(level, logger, msg [, fields])   fields: {key = value, ...}
 *   log.enabled(level) -> boolean
 *
 * Field values: strings, numbers and booleans as themselves, tables as JSON.
 * Keys are written in sorted order. */
#include "lbind.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "json.h"
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
    if (lua_getfield(L, 1, "format") != LUA_TNIL &&
        log_parse_format(luaL_checkstring(L, -1), &format) != 0)
        return luaL_error(L, "log format must be text or json, not %s", lua_tostring(L, -1));
    if (lua_getfield(L, 1, "level") != LUA_TNIL)
        level = lbind_log_checklevel(L, lua_gettop(L));
    if (lua_getfield(L, 1, "path") != LUA_TNIL) {
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

static int lbind_log_write(lua_State *L)
{
    int level = lbind_log_checklevel(L, 1);
    const char *logger = luaL_optstring(L, 2, "");
    const char *msg = luaL_checkstring(L, 3);
    log_field fields[LBIND_LOG_MAX_FIELDS];
    size_t n = 0;

    if (!log_sink_enabled(lbind_log_sink(L), level))
        return 0;
    if (!lua_isnoneornil(L, 4)) {
        luaL_checktype(L, 4, LUA_TTABLE);
        lua_settop(L, 4);
        /* Strings made here are anchored in this table until the line is
         * written; keys and string values are anchored by the fields table. */
        lua_newtable(L);
        lua_pushnil(L);
        while (lua_next(L, 4)) {
            log_field *f = &fields[n];
            if (n == LBIND_LOG_MAX_FIELDS) {
                lua_pop(L, 2);
                break;
            }
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "log field keys must be strings");
            f->key = lua_tostring(L, -2);
            switch (lua_type(L, -1)) {
            case LUA_TNUMBER:
                if (lua_isinteger(L, -1)) {
                    f->kind = LOG_INT;
                    f->v.i = (long long)lua_tointeger(L, -1);
                } else {
                    f->kind = LOG_NUM;
                    f->v.d = (double)lua_tonumber(L, -1);
                }
                break;
            case LUA_TBOOLEAN:
                f->kind = LOG_BOOL;
                f->v.b = lua_toboolean(L, -1);
                break;
            case LUA_TSTRING:
                f->kind = LOG_STR;
                f->v.str.s = lua_tolstring(L, -1, &f->v.str.n);
                break;
            case LUA_TTABLE: {
                /* As JSON, or as its tostring when JSON cannot hold it. */
                dbuf b = {0};
                char err[16];
                if (json_encode_redacted(L, -1, &b, err, sizeof err, log_is_secret_key)) {
                    f->kind = LOG_RAW;
                    f->v.str.s = lua_pushlstring(L, b.data, b.len);
                    f->v.str.n = b.len;
                } else {
                    f->kind = LOG_STR;
                    f->v.str.s = luaL_tolstring(L, -1, &f->v.str.n);
                }
                dbuf_free(&b);
                lua_rawseti(L, 5, (lua_Integer)n + 1);
                break;
            }
            default:
                f->kind = LOG_STR;
                f->v.str.s = luaL_tolstring(L, -1, &f->v.str.n);
                lua_rawseti(L, 5, (lua_Integer)n + 1);
                break;
            }
            n++;
            lua_pop(L, 1);
        }
        qsort(fields, n, sizeof fields[0], lbind_log_keycmp);
    }
    log_sink_write(lbind_log_sink(L), level, logger, msg, fields, n);
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
