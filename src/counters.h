/* counters.h - what the core counts about containment: objects that could
 * not be decoded, budgets breached; one set per runtime. Read by specs
 * (luaop.core.counters()) and, once metrics exist, exported. */
#ifndef LUAOP_COUNTERS_H
#define LUAOP_COUNTERS_H

#include <stdint.h>

typedef enum counter_id {
    COUNTER_UNDECODABLE_OBJECTS, /* skipped in a LIST page or a watch */
    COUNTER_BUDGET_BREACHES,     /* a task stopped at a budget */
    COUNTER_COUNT
} counter_id;

#include <stdatomic.h>

typedef struct counters {
    _Atomic uint64_t values[COUNTER_COUNT];
} counters;

void counter_add(counters *c, counter_id id, uint64_t n);
uint64_t counter_get(counters *c, counter_id id);

/* The counter's name in Lua (undecodable_objects, ...). */
const char *counter_name(counter_id id);

#endif
