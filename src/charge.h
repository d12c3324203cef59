/* charge.h - the work Lua's libraries do in C, charged to budgets.
 *
 * The count hook fires between VM instructions, never inside a C call, so
 * a library function that loops in C (table.sort over a large table, a
 * full collection, string.rep, a plain find) would run outside every
 * budget. luaop's base, table and string libraries are Lua's own sources
 * compiled with charge_lib.h forced in: it routes the Lua API calls they
 * loop on (element reads and writes, comparisons, buffer growth, pushes,
 * collections, parsing) through charge_add, in instructions of the
 * running task's budget (sched_charge). What those files do not cover
 * (utf8's scans, a plain string.find) charge_wrap replaces with charged
 * functions. docs/security.md ("Budgets") has the table of every function
 * a script reaches and how it is bounded. */
#ifndef LUAOP_CHARGE_H
#define LUAOP_CHARGE_H

#include <lua.h>

/* Charges are gathered per OS thread and handed to sched_charge every
 * CHARGE_BATCH instructions (or at once for a larger one), so that the
 * common small charge costs a decrement. */
#define CHARGE_BATCH 1024

/* The rates, in instructions (about 2.3 ns each on the reference machine,
 * docs/security.md) per unit of work, measured on the release build:
 * CHARGE_ACCESS a t[i] read or write, or a comparison, made from C; one
 * per CHARGE_COPY bytes copied or scanned, per CHARGE_LOOP bytes where C
 * loops per byte; CHARGE_PARSE per byte parsed (load). */
#define CHARGE_ACCESS 6
#define CHARGE_COPY 8
#define CHARGE_LOOP 1
#define CHARGE_PARSE 16
/* One instruction per CHARGE_ALLOC bytes a budgeted task allocates (its
 * pages, and the collector's later work on it, which the CPU meter does
 * not charge: scheduler_budget.c); each allocation counts as CHARGE_ALLOC_CALL
 * instructions' worth of the meter's allowance (watchdog.c). */
#define CHARGE_ALLOC 32
#define CHARGE_ALLOC_CALL 10

extern _Thread_local unsigned long charge_pending;

/* Charge n instructions of C work to the task running on L's state:
 * raises on L (a C function called from Lua) when its budget is spent or
 * the watchdog interrupted it. */
void charge_add(lua_State *L, unsigned long n);

/* Hand what is pending to sched_charge now (raises as charge_add). */
void charge_flush(lua_State *L);

/* Work done where no lua_State is at hand (memchr, memcmp in the
 * matcher): only added up, charged at the next charge_add or match step. */
static inline void charge_debt(unsigned long n)
{
    charge_pending += n;
}

/* The monotonic clock, in ns. */
unsigned long long charge_now_ns(void);

/* Charge the time since t0 (charge_now_ns) as instructions, at
 * CHARGE_NS_PER ns each, less the `paid` instructions charged for it
 * before: for work whose cost is known only once done (a collector's
 * step). */
void charge_elapsed(lua_State *L, unsigned long long t0, unsigned long paid);

#define CHARGE_NS_PER 2

/* Replace, in L's globals, the library functions whose work charge_lib.h
 * does not reach (utf8.len, utf8.offset, utf8.codes' iterator, a plain
 * string.find, os.date) by charged ones. Call after luaL_openlibs. */
void charge_wrap(lua_State *L);

#endif
