/* fuzz/time.c - libFuzzer harness: luaop.time.parse (Lua, in the embedded
 * luaop module) never raises; a time it accepts formats and parses back to
 * the same second, and is a date that exists (a UTC stamp it writes parses
 * to the same value).
 *
 * libFuzzer sees no coverage of Lua code by itself (the interpreter is not
 * instrumented), so a line hook feeds it some: each Lua line run bumps one
 * of libFuzzer's extra counters, and inputs that reach new lines of
 * time.parse are kept. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lualib.h>

#include "../src/lbind.h"
#include "../src/luaembed.h"

static lua_State *fuzz_L;

#define FUZZ_LUA_COUNTERS 4096
__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t fuzz_lua_lines[FUZZ_LUA_COUNTERS];

static void fuzz_line_hook(lua_State *L, lua_Debug *ar)
{
    uintptr_t h;

    lua_getinfo(L, "S", ar);
    h = (uintptr_t)ar->source * 31u + (uintptr_t)ar->currentline;
    fuzz_lua_lines[h % FUZZ_LUA_COUNTERS]++;
}

static const char fuzz_check[] =
    "local time = require('luaop').time\n"
    "return function(s)\n"
    "  local t, err = time.parse(s)\n"
    "  if t == nil then assert(type(err) == 'string', 'no reason given') return end\n"
    "  assert(math.type(t) ~= nil, 'not a number')\n"
    "  local text = assert(time.format(t))\n"
    "  local back = time.parse(text)\n"
    "  assert(back == math.floor(t), ('%s -> %s -> %s'):format(s, time.format(t), tostring(back)))\n"
    "end\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lua_State *L = fuzz_L;

    if (L == NULL) {
        L = fuzz_L = luaL_newstate();
        luaL_openlibs(L);
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
        lua_pushcfunction(L, luaopen_luaop_core);
        lua_setfield(L, -2, "luaop.core");
        lua_pop(L, 1);
        luaembed_preload(L);
        if (luaL_dostring(L, fuzz_check) != LUA_OK) {
            fprintf(stderr, "fuzz/time: %s\n", lua_tostring(L, -1));
            abort();
        }
        lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.check");
        lua_sethook(L, fuzz_line_hook, LUA_MASKLINE, 0);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.check");
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "fuzz/time: %s\n", lua_tostring(L, -1));
        abort();
    }
    return 0;
}
