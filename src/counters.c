/* counters.c - the core's containment counters (see counters.h). */
#include "counters.h"

static const char *const counter_names[COUNTER_COUNT] = {
    [COUNTER_UNDECODABLE_OBJECTS] = "undecodable_objects",
    [COUNTER_BUDGET_BREACHES] = "budget_breaches",
};

void counter_add(counters *c, counter_id id, uint64_t n)
{
    atomic_fetch_add_explicit(&c->values[id], n, memory_order_relaxed);
}

uint64_t counter_get(counters *c, counter_id id)
{
    return atomic_load_explicit(&c->values[id], memory_order_relaxed);
}

const char *counter_name(counter_id id)
{
    return counter_names[id];
}
