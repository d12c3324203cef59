/* gcstep.c - the collector's steps, timed (see gcstep.h). */
#include "gcstep.h"

#include <stdatomic.h>
#include <time.h>

#include <lua.h>

#include "lstate.h"

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

/* What a step needs left of L's stacks: the finalizers it may run are
 * called on L, and a call that does not fit (Lua's stack limit, its limit
 * of nested C calls) fails the finalizer, which Lua then never runs again:
 * what it would have freed or closed (a watch's stream, a box's buffer)
 * stays. At the edge of the stack (a deep recursion: a step is taken at
 * each call's stack check) every finalizer due failed, and each failure
 * reallocated the whole stack twice (16 MB, its frames walked), seconds of
 * a loop no count saw. A step there is left for the next allocation with
 * room: the debt stays, and the task's memory budget bounds what it
 * allocates meanwhile. */
#define GCSTEP_STACK_ROOM 1000
#define GCSTEP_CALLS_ROOM 10

void luaC_step(lua_State *L)
{
    uint64_t t0;

    if ((L->top.p - L->stack.p) + GCSTEP_STACK_ROOM > LUAI_MAXSTACK ||
        getCcalls(L) + GCSTEP_CALLS_ROOM > LUAI_MAXCCALLS)
        return;
    t0 = gcstep_now();

    luaC_step_untimed(L);
    atomic_fetch_add_explicit(&gcstep_total, gcstep_now() - t0, memory_order_relaxed);
}

uint64_t gcstep_ns(void)
{
    return atomic_load_explicit(&gcstep_total, memory_order_relaxed);
}
