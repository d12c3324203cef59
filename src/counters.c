/* counters.c - the core's containment counters (see counters.h). */
#include "counters.h"

#include <stdatomic.h>

static _Atomic uint64_t counter_values[COUNTER_COUNT];

static const char *const counter_names[COUNTER_COUNT] = {
    [COUNTER_UNDECODABLE_OBJECTS] = "undecodable_objects",
    [COUNTER_BUDGET_BREACHES] = "budget_breaches",
};

void counter_add(counter_id id, uint64_t n)
{
    atomic_fetch_add_explicit(&counter_values[id], n, memory_order_relaxed);
}

uint64_t counter_get(counter_id id)
{
    return atomic_load_explicit(&counter_values[id], memory_order_relaxed);
}

const char *counter_name(counter_id id)
{
    return counter_names[id];
}
