/* sched_test.c - task threads belong to the scheduler (scheduler.h), through its
 * C API: a wake-up that is not the wait a task is in now is dropped (the
 * task ended, was woken already, its index reused), a resume of a waiting
 * task's thread by anything but the scheduler leaves it waiting, a task that
 * yields without a wait or whose thread is closed while it waits fails with
 * an error that says so; the watchdog's view of the loop (another thread)
 * is never torn, and its interrupt lands only on the resume it names. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "counters.h"
#include "scheduler.h"
#include "tap.h"

static sched *S;
static sched_wait last_wait; /* the wait the last task to wait began */

typedef struct outcome {
    int ended, ok;
    char text[512]; /* its error, or its first result */
} outcome;

static void done(sched_task *t, lua_State *co, int ok, int nres, void *ud)
{
    outcome *o = ud;

    o->ended = 1;
    o->ok = ok;
    if (!ok)
        snprintf(o->text, sizeof o->text, "%s", sched_error(t));
    else if (nres > 0 && lua_tostring(co, -nres))
        snprintf(o->text, sizeof o->text, "%s", lua_tostring(co, -nres));
}

/* What a task ended with, as a TAP comment. */
static void diag(const outcome *o)
{
    printf("# %s: %.*s\n", o->ok ? "ok" : "failed", (int)strcspn(o->text, "\n"), o->text);
}

/* wait() -> what the wake-up pushed */
static int t_wait(lua_State *L)
{
    last_wait = sched_wait_begin(L);
    return sched_wait_yield(L, 0, NULL);
}

/* busy() -> the generation of the resume running now, its name */
static int t_busy(lua_State *L)
{
    sched_busy b;

    sched_busy_read(S, &b);
    lua_pushinteger(L, (lua_Integer)b.run);
    lua_pushstring(L, b.name);
    return 2;
}

/* interrupt(run): as the watchdog does */
static int t_interrupt(lua_State *L)
{
    sched_interrupt(S, (uint64_t)luaL_checkinteger(L, 1));
    return 0;
}

/* Spawn `code` as a task named `name`, with an instruction budget. */
static sched_task *spawn(lua_State *L, const char *name, const char *code, outcome *o)
{
    sched_budget b = {.instructions = 1000000000ul, .name = name};

    memset(o, 0, sizeof *o);
    if (luaL_loadstring(L, code) != LUA_OK) {
        snprintf(o->text, sizeof o->text, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return NULL;
    }
    return sched_spawn_budgeted(L, 0, &b, done, o);
}

/* Wake w with the string v (NULL: no value); whether it was the wait its
 * task is in. */
static int wake(sched_wait w, const char *v)
{
    lua_State *co = sched_waiting(w);

    if (co == NULL) {
        sched_wake(w, 0); /* dropped: must do nothing */
        return 0;
    }
    if (v)
        lua_pushstring(co, v);
    sched_wake(w, v ? 1 : 0);
    return 1;
}

/* ---- the watchdog's view, read from another thread ----------------------- */

static atomic_int reading;
static atomic_long reads, busy_reads, torn;

static int uniform(const char *name, size_t len)
{
    if (strlen(name) != len || (name[0] != 'a' && name[0] != 'b'))
        return 0;
    for (size_t i = 1; i < len; i++) {
        if (name[i] != name[0])
            return 0;
    }
    return 1;
}

static void *reader(void *arg)
{
    (void)arg;
    while (atomic_load(&reading)) {
        sched_busy b;
        sched_busy_read(S, &b);
        atomic_fetch_add(&reads, 1);
        if (b.since == 0) {
            if (b.run != 0 || b.name[0] != '\0')
                atomic_fetch_add(&torn, 1);
            continue;
        }
        atomic_fetch_add(&busy_reads, 1);
        if (b.run == 0 || !uniform(b.name, SCHED_NAME_LEN - 1))
            atomic_fetch_add(&torn, 1);
    }
    return NULL;
}

int main(void)
{
    counters c;
    lua_State *L = luaL_newstate();
    outcome o1, o2, o3, o4, oa, ob;
    sched_wait first, second;

    memset(&c, 0, sizeof c);
    luaL_openlibs(L);
    S = sched_new(L, &c);
    TAP_OK(S != NULL, "a scheduler");
    lua_register(L, "wait", t_wait);
    lua_register(L, "busy", t_busy);
    lua_register(L, "interrupt", t_interrupt);

    /* ---- wake-ups that are not the wait the task is in ---- */
    TAP_OK(spawn(L, "one", "local a = wait() local b = wait() return a .. ',' .. b", &o1) != NULL,
           "a task waits");
    first = last_wait;
    TAP_OK(sched_waiting(first) != NULL && !o1.ended, "its wait's token finds its thread");
    TAP_OK(wake(first, "one"), "the wake-up of its wait resumes it");
    second = last_wait;
    TAP_OK(second.id != first.id && !o1.ended, "it waits again, with a new token");
    TAP_OK(!wake(first, "stray") && !o1.ended, "a second wake-up of the wait that is over is dropped in C");
    {
        /* a resume that is not the scheduler's, as coroutine.resume from Lua code makes */
        lua_State *co = sched_waiting(second);
        int nres = -1, status;
        lua_pushstring(co, "made up");
        status = lua_resume(co, NULL, 1, &nres);
        TAP_OK(status == LUA_YIELD && nres == 0 && !o1.ended,
               "a resume of its thread by anything but the scheduler leaves it waiting, its values dropped");
        TAP_OK(sched_waiting(second) == co, "and it still waits for the same wake-up");
    }
    TAP_OK(wake(second, "two") && o1.ended && o1.ok && strcmp(o1.text, "one,two") == 0,
           "the wake-up of the wait it is in ends it, with the waker's values only");
    diag(&o1);
    TAP_OK(!wake(second, "late"), "a wake-up after the task ended is dropped (nothing touches the freed task)");
    TAP_OK(spawn(L, "two", "return wait()", &o2) != NULL && last_wait.slot == second.slot,
           "a new task takes the ended one's index");
    TAP_OK(!wake(second, "stale") && !o2.ended, "the ended task's token does not wake the new one");
    TAP_OK(wake(last_wait, "mine") && o2.ended && o2.ok && strcmp(o2.text, "mine") == 0,
           "the new task's own token does");

    /* ---- waits that can never end well ---- */
    TAP_OK(spawn(L, "yield", "coroutine.yield(1)", &o3) != NULL && o3.ended && !o3.ok &&
               strstr(o3.text, ":1: coroutine.yield in a task's own thread") != NULL,
           "a task that yields without a wait fails");
    diag(&o3);
    TAP_OK(spawn(L, "closed", "wait() return 'went on'", &o4) != NULL && !o4.ended, "a task waits to be closed");
    {
        lua_State *co = sched_waiting(last_wait);
        TAP_OK(lua_closethread(co, L) == LUA_OK, "its thread is closed while it waits (coroutine.close)");
    }
    TAP_OK(wake(last_wait, "late") && o4.ended && !o4.ok &&
               strstr(o4.text, "its thread was closed (coroutine.close) while it waited") != NULL,
           "its wake-up then fails it, saying why");
    diag(&o4);

    /* ---- the watchdog's interrupt names one resume ---- */
    TAP_OK(spawn(L, "b", "local run = busy() interrupt(run) for i = 1, 300000 do end return 'not interrupted'", &ob) !=
                   NULL && ob.ended && !ob.ok && strstr(ob.text, "interrupted by the watchdog") != NULL,
           "an interrupt naming the resume running fails it at its next hook");
    diag(&ob);
    TAP_OK(spawn(L, "a", "run_a = busy() wait() for i = 1, 300000 do end return 'ran on'", &oa) != NULL && !oa.ended,
           "task a ran once and waits");
    {
        lua_Integer run_a;
        sched_wait wa = last_wait;
        outcome od;
        lua_getglobal(L, "run_a");
        run_a = lua_tointeger(L, -1);
        lua_pop(L, 1);
        /* raised for a's first resume, once it is over (as the watchdog's
         * look and its interrupt may straddle the loop's return) */
        sched_interrupt(S, (uint64_t)run_a);
        TAP_OK(run_a > 0 && spawn(L, "d", "for i = 1, 300000 do end return 'ran'", &od) != NULL && od.ended && od.ok,
               "an interrupt for a resume that is over does not land on the task that runs next");
        diag(&od);
        TAP_OK(wake(wa, NULL) && oa.ended && oa.ok && strcmp(oa.text, "ran on") == 0,
               "nor on the next resume of the task it named");
        diag(&oa);
    }

    /* ---- the watchdog's view is never torn ---- */
    {
        char na[SCHED_NAME_LEN], nb[SCHED_NAME_LEN];
        outcome ra, rb;
        sched_wait wa, wb;
        pthread_t th;
        struct timespec t0, t1;
        long rounds = 0;
        memset(na, 'a', sizeof na - 1);
        na[sizeof na - 1] = '\0';
        memset(nb, 'b', sizeof nb - 1);
        nb[sizeof nb - 1] = '\0';
        TAP_OK(spawn(L, na, "while true do wait() end", &ra) != NULL, "a reader's task a");
        wa = last_wait;
        TAP_OK(spawn(L, nb, "while true do wait() end", &rb) != NULL, "a reader's task b");
        wb = last_wait;
        atomic_store(&reading, 1);
        TAP_OK(pthread_create(&th, NULL, reader, NULL) == 0, "a thread reads the watchdog's view meanwhile");
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            for (int i = 0; i < 1000; i++) {
                wake(wa, NULL);
                wa = last_wait;
                wake(wb, NULL);
                wb = last_wait;
                rounds++;
            }
            clock_gettime(CLOCK_MONOTONIC, &t1);
        } while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 1000000000L);
        atomic_store(&reading, 0);
        pthread_join(th, NULL);
        printf("# %ld rounds; %ld reads, %ld of a resume, %ld torn\n", rounds, atomic_load(&reads),
               atomic_load(&busy_reads), atomic_load(&torn));
        TAP_OK(!ra.ended && !rb.ended, "both still wait, woken every round");
        TAP_OK(atomic_load(&busy_reads) > 0, "the reader saw resumes running");
        TAP_OK(atomic_load(&torn) == 0,
               "every view it read is whole: a name with its generation and start, or none of them");
    }

    lua_close(L);
    sched_free(S);
    return tap_done();
}
