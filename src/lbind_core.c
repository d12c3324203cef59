/* lbind_core.c - luaop.core, the C core as one Lua module.
 *
 * The luaop binary preloads it; `make` also builds it as a loadable module
 * (build/lua/luaop/core.so) so that specs can drive the core from busted. */
#include "lbind.h"

#include <lauxlib.h>

#include "version.h"

static const struct {
    const char *name;
    lua_CFunction open;
} lbind_core_modules[] = {
    {"json", lbind_json_open},
    {"log", lbind_log_open},
    {"kubeconfig", lbind_kubeconfig_open},
    {"api", lbind_api_open},
    {"task", lbind_task_open},
    {"workqueue", lbind_workqueue_open},
};

LUAMOD_API int luaopen_luaop_core(lua_State *L)
{
    lua_newtable(L);
    for (size_t i = 0; i < sizeof lbind_core_modules / sizeof lbind_core_modules[0]; i++) {
        lbind_core_modules[i].open(L);
        lua_setfield(L, -2, lbind_core_modules[i].name);
    }
    lua_pushliteral(L, LUAOP_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
