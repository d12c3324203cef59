/* luaembed.h - the Lua half of luaop (the files in lua/luaop/), compiled into the
 * binary so that it needs no files at run time. build/gen/luaembed.c is
 * generated from those files by hack/embed.lua. */
#ifndef LUAOP_LUAEMBED_H
#define LUAOP_LUAEMBED_H

#include <lua.h>

/* Register each embedded module in package.preload ("luaop", "luaop.client", ...). */
void luaembed_preload(lua_State *L);

#endif
