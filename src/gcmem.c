/* gcmem.c - see gcmem.h. */
#define _DEFAULT_SOURCE /* malloc_trim */
#include <malloc.h> /* glibc's; no #ifdef: a C library without it fails the build, not the trim */

#include <lauxlib.h>

#include "gcmem.h"

static const char GCMEM_SENTINEL[] = "luaop.gcmem.sentinel";
static unsigned long gcmem_cycle_count;
static int gcmem_armed;
static int gcmem_held;

static void gcmem_arm(lua_State *L);

/* The end of a cycle: its garbage is freed, so its pages go back. A new
 * sentinel, unreachable too, for the next cycle (none during lua_close:
 * Lua finalizes nothing created then). */
static int gcmem_sentinel_gc(lua_State *L)
{
    gcmem_cycle_count++;
    gcmem_armed = 0;
    if (!gcmem_held)
        malloc_trim(0);
    gcmem_arm(L);
    return 0;
}

static int gcmem_new_sentinel(lua_State *L)
{
    lua_newuserdatauv(L, 0, 0);
    if (luaL_newmetatable(L, GCMEM_SENTINEL)) {
        lua_pushcfunction(L, gcmem_sentinel_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return 0;
}

/* Protected: a finalizer runs in whatever task allocated when the cycle
 * ended, and a task past its memory budget can allocate nothing. Then no
 * sentinel is armed until gcmem_rearm. */
static void gcmem_arm(lua_State *L)
{
    lua_pushcfunction(L, gcmem_new_sentinel);
    gcmem_armed = lua_pcall(L, 0, 0, 0) == LUA_OK;
    if (!gcmem_armed)
        lua_pop(L, 1); /* the error */
}

void gcmem_attach(lua_State *L)
{
    lua_gc(L, LUA_GCINC, GCMEM_PAUSE, 0, 0);
    gcmem_arm(L);
}

int gcmem_rearm(lua_State *L)
{
    if (!gcmem_armed)
        gcmem_arm(L);
    return gcmem_armed;
}

void gcmem_hold(int on)
{
    gcmem_held = on != 0;
}

int gcmem_armed_now(void)
{
    return gcmem_armed;
}

unsigned long gcmem_cycles(void)
{
    return gcmem_cycle_count;
}
