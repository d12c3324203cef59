/* lbox.c - a dbuf owned by a to-be-closed userdata box (see lbox.h). */
#include "lbox.h"

#include <lauxlib.h>

#define LBOX_MT "luaop.lbox"

/* __close and __gc: free the bytes now; a second call finds none. */
static int lbox_free(lua_State *L)
{
    dbuf *b = lua_touserdata(L, 1);

    if (b)
        dbuf_free(b);
    return 0;
}

dbuf *lbox_push(lua_State *L)
{
    dbuf *b = lua_newuserdatauv(L, sizeof *b, 0);

    *b = (dbuf){0};
    b->alloc = lua_getallocf(L, &b->alloc_ud);
    if (luaL_newmetatable(L, LBOX_MT)) {
        lua_pushcfunction(L, lbox_free);
        lua_setfield(L, -2, "__close");
        lua_pushcfunction(L, lbox_free);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    lua_toclose(L, -1);
    return b;
}
