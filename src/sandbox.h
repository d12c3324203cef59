/* sandbox.h - what a luaop script may not do.
 *
 * Scripts run with Lua's standard libraries less what would let them leave
 * the runtime: os.execute, os.exit, io.popen, the debug library,
 * package.loadlib and C module searchers, and binary chunks (string.dump;
 * load, loadfile and dofile read text only). Each removed function is
 * replaced by one that raises, naming it. A script's collectgarbage (its
 * allowed options only) is package.loaded["luaop.sandbox"].collectgarbage,
 * which lua/luaop/script.lua puts in each script's environment. */
#ifndef LUAOP_SANDBOX_H
#define LUAOP_SANDBOX_H

#include <lua.h>

/* Apply to a state whose standard libraries are open (it opens the module
 * below too). */
void sandbox_apply(lua_State *L);

/* package.loaded["luaop.sandbox"]: a script's collectgarbage and its load
 * (loader(env)), over the state's own (Lua's) functions; luaop.core opens it
 * in every state, so scripts have the same environment under luaop, its
 * --test kit, the fuzzers and the specs. Again on the same state: nothing. */
void sandbox_open(lua_State *L);

#endif
