/* gcstep.h - the collector's steps, timed.
 *
 * The CPU meter (watchdog.c) charges a budgeted resume for CPU time no
 * count saw, but not for the collector's: an allocation's step of it is
 * work on every script's objects (a major collection marks the whole
 * heap), so it is charged to nobody, as its frees are credited to nobody
 * (scheduler_budget.c). luaop's binaries build Lua's lgc.c with its luaC_step renamed
 * luaC_step_untimed (the Makefile) and take gcstep.c's, which times each
 * step. The Lua module the specs load runs in the interpreter's collector,
 * untimed: it has no watchdog. */
#ifndef LUAOP_GCSTEP_H
#define LUAOP_GCSTEP_H

#include <stdint.h>

/* The time, in monotonic ns, spent in the collector's steps so far (safe
 * from another thread). */
uint64_t gcstep_ns(void);

#endif
