/* pattern.h - Lua's pattern matcher, charged to budgets.
 *
 * luaop's string library is Lua's own lstrlib.c (of the Lua it builds,
 * fetched by hack/libs.sh) with one line added where match() loops back on
 * itself, LUAOP_MATCH_STEP, compiled with this header forced in (lstrpat.c). Matching is C code, where the count hook never fires, so
 * a backtracking pattern such as ("a"):rep(3000):find(".-.-.-b") would run
 * for hours under any instruction budget; instead every SCHED_MATCH_BATCH
 * steps are charged to the running task's instruction budget (scheduler_budget.c),
 * which raises when it is spent. */
#ifndef LUAOP_PATTERN_H
#define LUAOP_PATTERN_H

struct lua_State;

#define SCHED_MATCH_BATCH 1024

extern _Thread_local unsigned sched_match_countdown; /* per thread: runtimes may run in several */

/* Charge SCHED_MATCH_BATCH steps to the task running now; raises on L when
 * its budget is spent. */
void sched_match_steps(struct lua_State *L);

/* A step also charges what the matcher read where it had no lua_State
 * (a back reference's memcmp, charge_lib.h, forced in after this file). */
#define LUAOP_MATCH_STEP(L)                                                                    \
    do {                                                                                       \
        if (--sched_match_countdown == 0)                                                      \
            sched_match_steps(L);                                                              \
        if (charge_pending >= CHARGE_BATCH)                                                    \
            charge_flush(L);                                                                   \
    } while (0)

#endif
