/* lbind_class.c - userdata classes: one metatable per type, registered
 * once (lbind.h). */
#include "lbind.h"

void lbind_class(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
                 lua_CFunction close)
{
    if (luaL_newmetatable(L, name)) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
        if (gc) {
            lua_pushcfunction(L, gc);
            lua_setfield(L, -2, "__gc");
        }
        if (close) {
            lua_pushcfunction(L, close);
            lua_setfield(L, -2, "__close");
        }
    }
    lua_pop(L, 1);
}
