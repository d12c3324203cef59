/* lbind_check.c - luaop.core.check: what `luaop --check` reads from a
 * compiled chunk without running it (lua/luaop/check.lua):
 *
 *   check.globals(fn) -> { {name =, line =, set = bool}, ... }: each read
 *     and write of a global (a field of the upvalue _ENV with a constant
 *     name) in fn and every function inside it, in the order of the code;
 *   check.line(fn) -> the line where the Lua function fn is defined, and
 *     its chunk's name ("@path").
 *
 * It reads the bytecode (Lua's own lobject.h and lopcodes.h: luaop builds
 * Lua from source, so these match the interpreter), as `luac -l` piped to
 * grep SETTABUP does, and luacheck's parser would: a global that only a
 * branch never taken reads is found all the same. */
#include "lbind.h"

#include <string.h>

#include "ldebug.h"
#include "lobject.h"
#include "lopcodes.h"
#include "lstate.h"

/* Whether upvalue `up` of p is _ENV. */
static int lbind_check_is_env(const Proto *p, int up)
{
    const TString *name = up < p->sizeupvalues ? p->upvalues[up].name : NULL;

    return name != NULL && strcmp(getstr(name), "_ENV") == 0;
}

/* Append the globals of p (and of the functions inside it) to the list at
 * index out, which holds *n entries. */
static void lbind_check_proto(lua_State *L, const Proto *p, int out, lua_Integer *n)
{
    int line = p->linedefined, abs = 0;

    luaL_checkstack(L, 4, "check.globals");
    for (int pc = 0; pc < p->sizecode; pc++) {
        Instruction i = p->code[pc];
        OpCode op = GET_OPCODE(i);
        int up, k;

        /* the line of pc, walked as ldebug.c's luaG_getfuncline does */
        if (pc < p->sizelineinfo) {
            if (p->lineinfo[pc] != ABSLINEINFO)
                line += p->lineinfo[pc];
            else if (abs < p->sizeabslineinfo)
                line = p->abslineinfo[abs++].line;
        }
        if (op == OP_GETTABUP) {
            up = GETARG_B(i);
            k = GETARG_C(i);
        } else if (op == OP_SETTABUP) {
            up = GETARG_A(i);
            k = GETARG_B(i);
        } else {
            continue;
        }
        if (!lbind_check_is_env(p, up) || k >= p->sizek || !ttisstring(&p->k[k]))
            continue;
        lua_createtable(L, 0, 3);
        lua_pushstring(L, getstr(tsvalue(&p->k[k])));
        lua_setfield(L, -2, "name");
        lua_pushinteger(L, line);
        lua_setfield(L, -2, "line");
        lua_pushboolean(L, op == OP_SETTABUP);
        lua_setfield(L, -2, "set");
        lua_rawseti(L, out, ++*n);
    }
    for (int j = 0; j < p->sizep; j++)
        lbind_check_proto(L, p->p[j], out, n);
}

/* A Lua function's prototype, or a raised error. */
static const Proto *lbind_check_proto_of(lua_State *L, int idx)
{
    luaL_checktype(L, idx, LUA_TFUNCTION);
    if (lua_iscfunction(L, idx))
        luaL_argerror(L, idx, "a Lua function is required");
    return clLvalue(s2v(L->ci->func.p + idx))->p;
}

static int lbind_check_globals(lua_State *L)
{
    const Proto *p = lbind_check_proto_of(L, 1);
    lua_Integer n = 0;

    lua_settop(L, 1);
    lua_newtable(L);
    lbind_check_proto(L, p, 2, &n);
    return 1;
}

static int lbind_check_line(lua_State *L)
{
    lua_Debug ar;

    lbind_check_proto_of(L, 1);
    lua_settop(L, 1);
    lua_pushvalue(L, 1); /* ">" pops it: the one at 1 keeps ar.source alive */
    lua_getinfo(L, ">S", &ar);
    lua_pushinteger(L, ar.linedefined);
    lua_pushstring(L, ar.source);
    return 2;
}

int lbind_check_open(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"globals", lbind_check_globals},
        {"line", lbind_check_line},
        {NULL, NULL},
    };

    luaL_newlib(L, funcs);
    return 1;
}
