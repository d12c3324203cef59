/* gcmem.h - memory given back to the system as the Lua collector frees it.
 *
 * A cache of N objects is N objects' worth of live Lua heap; what costs a
 * running process more is the garbage between collection cycles (a
 * reconcile, a watch event or a LIST page leaves some) and the freed
 * memory the C allocator keeps. gcmem_attach sets the incremental
 * collector's pause to GCMEM_PAUSE (a cycle starts when the heap has grown
 * by half since the last one ended, not doubled: Lua's default is 200) and
 * leaves an unreachable sentinel whose finalizer runs at the end of every
 * cycle: it gives the allocator's free pages back (glibc's malloc_trim)
 * and leaves the next sentinel. bench/compare.sh measures the effect. */
#ifndef LUAOP_GCMEM_H
#define LUAOP_GCMEM_H

#include <lua.h>

#define GCMEM_PAUSE 150

/* Tune L's collector and arm the sentinel. */
void gcmem_attach(lua_State *L);

/* Arm a sentinel again when the last one could not be (its finalizer ran
 * in a task past its memory budget); call it from a task without a
 * budget. 1 when one is armed. */
int gcmem_rearm(lua_State *L);

/* While on, the end of a cycle gives no pages back: an informer's sync
 * runs the collector in generational mode, where every minor collection
 * ends the young sentinel's life, and a trim walks the allocator's whole
 * heap (a tenth of a sync's CPU). The first cycle after it trims. */
void gcmem_hold(int on);

/* Whether a sentinel is armed now. */
int gcmem_armed_now(void);

/* Cycles ended so far (sentinels finalized). */
unsigned long gcmem_cycles(void);

#endif
