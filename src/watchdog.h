/* watchdog.h - the last line of defence against a loop that does not come
 * back.
 *
 * Budgets stop runaway Lua code from inside (scheduler_budget.c). The watchdog is a
 * thread outside the loop, for what they cannot see: it notices when one
 * resume of a task has run for WATCHDOG_INTERRUPT seconds without waiting
 * and interrupts it (the next count hook in that task raises: a breach of
 * its budget, logged and counted like any other). It reads the loop's view
 * whole (sched_busy_read: a seqlock) and names the resume it interrupts by
 * its generation, never reused, so an interrupt that comes after that
 * resume is over hits nothing. If the loop still has not
 * come back WATCHDOG_EXIT seconds later it logs the task it was running and
 * exits 70. It also enforces the end of a shutdown: once SIGTERM or SIGINT
 * has arrived, the process exits (1) when it is still there after the grace
 * period plus a second, and a second signal ends it within a second
 * (143/130) even while the loop is stuck. */
#ifndef LUAOP_WATCHDOG_H
#define LUAOP_WATCHDOG_H

#include <stdint.h>

struct sched;

/* How often it looks, in ns, while a resume runs (the CPU meter's
 * resolution, watchdog.c), and while the loop was idle at its last look. */
#define WATCHDOG_TICK_NS 20000000
#define WATCHDOG_IDLE_TICK_NS 250000000
/* The CPU meter's allowance: CPU time per instruction accounted (about 40
 * times what one costs on the release build, so that slow instructions and
 * a busy machine are never charged; ten times that in the ASan build, whose
 * calls and allocations cost a hundred times more), and per tick. */
#ifdef __SANITIZE_ADDRESS__
#define WATCHDOG_NS_PER_INSTRUCTION 1000
#else
#define WATCHDOG_NS_PER_INSTRUCTION 100
#endif
#define WATCHDOG_SLACK_NS 1000000

#define WATCHDOG_INTERRUPT 5.0
#define WATCHDOG_EXIT 5.0
#define WATCHDOG_EXIT_STATUS 70

/* Start the thread, from the loop's; grace: the drain's limit in seconds;
 * gc_ns: the collector's time so far (gcstep_ns), not charged by the CPU
 * meter (NULL: none is kept). Call after the loop's signal handlers are
 * installed (it chains to them). 0, or -1. */
int watchdog_start(struct sched *s, double grace, uint64_t (*gc_ns)(void));

/* Stop and join the thread (at exit). */
void watchdog_stop(void);

#endif
