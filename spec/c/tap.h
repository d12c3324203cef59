/* tap.h - the C unit tests' harness: TAP lines that spec/unit/c_spec.lua
 * reads (one "ok N - what" or "not ok N - what" per check, then the plan). */
#ifndef LUAOP_TAP_H
#define LUAOP_TAP_H

#include <stdio.h>

static int tap_n, tap_failed;

#define TAP_OK(cond, what)                                                                     \
    do {                                                                                       \
        int tap_c = (cond);                                                                    \
        printf("%sok %d - %s\n", tap_c ? "" : "not ", ++tap_n, (what));                        \
        if (!tap_c) {                                                                          \
            printf("# %s:%d: %s\n", __FILE__, __LINE__, #cond);                                \
            tap_failed++;                                                                      \
        }                                                                                      \
    } while (0)

static inline int tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
