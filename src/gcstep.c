/* gcstep.c - the collector's steps, timed (see gcstep.h). */
#include "gcstep.h"

#include <stdatomic.h>
#include <time.h>

#include <lua.h>

/* Lua's own step (lgc.c, built with luaC_step renamed), and the one every
 * other file of Lua calls, defined here. */
void luaC_step_untimed(lua_State *L);
void luaC_step(lua_State *L);

static _Atomic uint64_t gcstep_total;

static uint64_t gcstep_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void luaC_step(lua_State *L)
{
    uint64_t t0 = gcstep_now();

    luaC_step_untimed(L);
    atomic_fetch_add_explicit(&gcstep_total, gcstep_now() - t0, memory_order_relaxed);
}

uint64_t gcstep_ns(void)
{
    return atomic_load_explicit(&gcstep_total, memory_order_relaxed);
}
