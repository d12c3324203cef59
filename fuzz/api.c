/* fuzz/api.c - libFuzzer harness over the whole script API: the input's
 * bytes choose the productions of a grammar of Lua (statements,
 * expressions, values, calls), and the program they make is loaded as a
 * `--script` is (luaop.script's sandbox, budgets and all) into the test kit
 * (luaop.testing: real controllers, informers and work queues against the
 * in-memory API server, on a virtual clock). Its controller's reconcile
 * runs the program once, on a ConfigMap the kit seeds; then the clock moves
 * 30 s (sleeps, requeues and spawned tasks run), then a day, and the kit
 * stops. (docs/fuzzing.md says more, and what it found.)
 *
 * What the programs call: every function a sandboxed script can reach
 * (luaop.*, every ctx method, cjson and cjson.safe, loggers, the standard
 * libraries the sandbox keeps, coroutine included, on the reconcile's own
 * thread and spawned tasks' threads while they wait in C), and methods by
 * name on whatever those return (clients, informers, loggers, task
 * handles). The values: weak tables ("k", "v", "kv") whose entries die
 * mid-call, tables with every metamethod (bodies that yield, raise,
 * collect, empty or change the table being processed), deep nesting, huge
 * strings, NaN, infinities, integers at their limits, threads, functions.
 * At start the harness checks that its list of names holds every function
 * the sandbox offers (it aborts naming any it lacks), so a new binding
 * cannot be left out silently.
 *
 * A finding is a crash, a sanitizer report, a leak, an exit of the
 * process or a hang (-timeout). Errors the program raises are normal.
 *
 * Coverage: the C (luaop's bindings, the scheduler, Lua's C API,
 * coroutines and libraries; not its interpreter loop, collector or parser:
 * fuzz/lua-coverage.ignore) is instrumented; Lua lines are fed to libFuzzer's extra counters by a line
 * hook. The scheduler sets count hooks on task threads (budgets), which
 * would replace a line hook, so this harness is linked with
 * -Wl,--wrap=lua_sethook: every hook set by luaop also counts lines, and
 * the hook luaop asked for still runs on its count events. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "../src/charge.h"
#include "../src/lbind.h"
#include "../src/log.h"
#include "../src/luaembed.h"

/* ---- Lua line coverage --------------------------------------------------- */

#define FUZZ_LUA_COUNTERS 8192
__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t fuzz_lua_lines[FUZZ_LUA_COUNTERS];

/* the hook luaop set last (the scheduler's is one function for every task) */
static lua_Hook fuzz_real_hook;

void __real_lua_sethook(lua_State *L, lua_Hook f, int mask, int count);
void __wrap_lua_sethook(lua_State *L, lua_Hook f, int mask, int count);

static void fuzz_hook(lua_State *L, lua_Debug *ar)
{
    if (ar->event == LUA_HOOKLINE) {
        uintptr_t h;
        lua_getinfo(L, "S", ar);
        h = (uintptr_t)ar->source * 31u + (uintptr_t)ar->currentline;
        fuzz_lua_lines[h % FUZZ_LUA_COUNTERS]++;
        return;
    }
    if (fuzz_real_hook != NULL)
        fuzz_real_hook(L, ar); /* last: it may yield */
}

void __wrap_lua_sethook(lua_State *L, lua_Hook f, int mask, int count)
{
    if (f != NULL && f != fuzz_hook)
        fuzz_real_hook = f;
    if (f == NULL || mask == 0)
        mask = 0;
    if (getenv("FUZZ_API_NOLINES")) {
        __real_lua_sethook(L, f, mask, count);
        return;
    }
    __real_lua_sethook(L, fuzz_hook, mask | LUA_MASKLINE, count);
}

/* ---- the input, read as choices --------------------------------------------- */

typedef struct fz {
    const uint8_t *p, *end;
    char *out;
    size_t len, cap;
    int full;
    uint64_t rng;   /* the choices once the input's bytes run out */
    unsigned stmts; /* statements of the reconcile's body so far */
} fz;

#define FZ_MAX_TEXT 32768
#define FZ_MAX_DEPTH 4
#define FZ_MAX_STMTS 12
/* Every program has at least this many statements in its reconcile, however
 * short the input: once its bytes run out, the choices come from a
 * generator seeded by the input's hash. A finding that needs a few
 * statements in some order (a spawn, a wait, a resume of the reconcile's
 * thread) is then as likely from the first input as from the longest, and
 * libFuzzer's preference for short inputs (its corpus' median was five
 * statements) no longer shortens the programs. */
#define FZ_MIN_STMTS 24

static unsigned fz_byte(fz *z)
{
    if (z->p < z->end)
        return *z->p++;
    /* xorshift64* */
    z->rng ^= z->rng >> 12;
    z->rng ^= z->rng << 25;
    z->rng ^= z->rng >> 27;
    return (unsigned)((z->rng * 0x2545F4914F6CDD1DULL) >> 56);
}

/* the generator's seed: FNV-1a of the whole input (never 0) */
static uint64_t fz_seed(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;

    while (n--)
        h = (h ^ *p++) * 0x100000001b3ULL;
    return h ? h : 1;
}

/* 0 .. n-1 */
static unsigned fz_pick(fz *z, unsigned n)
{
    return fz_byte(z) % n;
}

static int fz_more(const fz *z)
{
    return !z->full && (z->p < z->end || z->stmts < FZ_MIN_STMTS);
}

static void fz_put(fz *z, const char *s)
{
    size_t n = strlen(s);

    if (z->len + n + 1 > FZ_MAX_TEXT) {
        z->full = 1;
        return;
    }
    if (z->len + n + 1 > z->cap) {
        size_t cap = z->cap ? z->cap * 2 : 4096;
        while (cap < z->len + n + 1)
            cap *= 2;
        char *o = realloc(z->out, cap);
        if (o == NULL)
            abort();
        z->out = o;
        z->cap = cap;
    }
    memcpy(z->out + z->len, s, n + 1);
    z->len += n;
}

static void fz_putf(fz *z, const char *fmt, long long a)
{
    char tmp[64];

    snprintf(tmp, sizeof tmp, fmt, a);
    fz_put(z, tmp);
}

/* ---- the grammar -------------------------------------------------------- */

#define NSLOTS 4

/* Every function a sandboxed script reaches by name (checked at start
 * against the sandbox itself, by the driver below). "ctx:" names are methods
 * of the reconcile's ctx. os.exit and friends only raise in the sandbox:
 * calling them is part of the test. */
static const char *const fz_funcs[] = {
    "assert", "collectgarbage", "error", "getmetatable", "ipairs", "load", "next", "pairs", "pcall", "print",
    "rawequal", "rawget", "rawlen", "rawset", "require", "select", "setmetatable", "tonumber", "tostring",
    "type", "xpcall",
    "cjson.decode", "cjson.decode_allow_comment", "cjson.decode_array_with_array_mt",
    "cjson.decode_invalid_numbers", "cjson.decode_max_depth", "cjson.encode", "cjson.encode_empty_table_as_object",
    "cjson.encode_escape_forward_slash", "cjson.encode_indent", "cjson.encode_invalid_numbers",
    "cjson.encode_keep_buffer", "cjson.encode_max_depth", "cjson.encode_number_precision",
    "cjson.encode_skip_unsupported_value_types", "cjson.encode_sparse_array", "cjson.new",
    "cjson.safe.decode", "cjson.safe.decode_allow_comment", "cjson.safe.decode_array_with_array_mt",
    "cjson.safe.decode_invalid_numbers", "cjson.safe.decode_max_depth", "cjson.safe.encode",
    "cjson.safe.encode_empty_table_as_object", "cjson.safe.encode_escape_forward_slash", "cjson.safe.encode_indent",
    "cjson.safe.encode_invalid_numbers", "cjson.safe.encode_keep_buffer", "cjson.safe.encode_max_depth",
    "cjson.safe.encode_number_precision", "cjson.safe.encode_skip_unsupported_value_types",
    "cjson.safe.encode_sparse_array", "cjson.safe.new",
    "coroutine.close", "coroutine.create", "coroutine.isyieldable", "coroutine.resume", "coroutine.running",
    "coroutine.status", "coroutine.wrap", "coroutine.yield",
    "ctx:apply", "ctx:cache", "ctx:create", "ctx:delete", "ctx:event", "ctx:get", "ctx:list", "ctx:patch",
    "ctx:update", "ctx:update_status",
    "ctx.log:info", "ctx.log:error", "ctx.log:debug", "ctx.log:with",
    "luaop.array", "luaop.client", "luaop.conditions.get", "luaop.conditions.is_false", "luaop.conditions.is_true",
    "luaop.conditions.remove", "luaop.conditions.set", "luaop.controller", "luaop.controller_of", "luaop.copy",
    "luaop.hash", "luaop.is_error", "luaop.metrics.counter", "luaop.metrics.gauge", "luaop.metrics.histogram",
    "luaop.json.array", "luaop.json.cut", "luaop.json.decode", "luaop.json.decode_page", "luaop.json.encode",
    "luaop.json.event", "luaop.json.hash", "luaop.json.is_array", "luaop.json.page_texts",
    "luaop.json.peek", "luaop.json.trim", "luaop.logger", "luaop.requeue", "luaop.requeue_after", "luaop.set_controller",
    "luaop.sleep", "luaop.spawn", "luaop.terminal", "luaop.time.format", "luaop.time.format_micro",
    "luaop.time.monotonic",
    "luaop.time.parse", "luaop.time.wall",
    "luaop.webhook.conversion", "luaop.webhook.mutating", "luaop.webhook.validating",
    "math.abs", "math.acos", "math.asin", "math.atan", "math.atan2", "math.ceil", "math.cos", "math.cosh",
    "math.deg", "math.exp", "math.floor", "math.fmod", "math.frexp", "math.ldexp", "math.log", "math.log10",
    "math.max", "math.min", "math.modf", "math.pow", "math.rad", "math.random", "math.randomseed", "math.sin",
    "math.sinh", "math.sqrt", "math.tan", "math.tanh", "math.tointeger", "math.type", "math.ult",
    "os.clock", "os.date", "os.difftime", "os.execute", "os.exit", "os.getenv", "os.remove", "os.rename",
    "os.setlocale", "os.time", "os.tmpname",
    "string.byte", "string.char", "string.find", "string.format", "string.gmatch", "string.gsub", "string.len",
    "string.lower", "string.match", "string.pack", "string.packsize", "string.rep", "string.reverse",
    "string.sub", "string.unpack", "string.upper",
    "table.concat", "table.insert", "table.move", "table.pack", "table.remove", "table.sort", "table.unpack",
    "utf8.char", "utf8.codepoint", "utf8.codes", "utf8.len", "utf8.offset",
};
#define NFUNCS (sizeof fz_funcs / sizeof fz_funcs[0])

/* Methods called by name on any value (what the API returns: clients,
 * informers, loggers, task handles, conditions; and the program's own
 * tables, whose __index answers). */
static const char *const fz_methods[] = {
    "get", "list", "create", "update", "update_status", "patch", "apply", "delete", "watch", "events",
    "resolve", "namespace_of", "next", "close", "info", "error", "debug", "with", "wait", "signal", "cancel",
    "index", "on", "stop", "start", "run", "relist", "synced_from", "wait_synced", "upsert", "remove", "emit",
    "default", "sub", "rep", "format", "gsub", "find", "byte", "len", "inc", "dec", "set", "observe",
};
#define NMETHODS (sizeof fz_methods / sizeof fz_methods[0])

/* Field names read and written (the API's objects and handles, generic). */
static const char *const fz_fields[] = {
    "values", "log", "name", "namespace", "metadata", "data", "kind", "apiVersion", "status", "spec", "labels",
    "uid", "resourceVersion", "items", "__index", "n", "default", "client", "inf", "store", "help", "buckets",
};
#define NFIELDS (sizeof fz_fields / sizeof fz_fields[0])

static const char *const fz_metamethods[] = {
    "__index", "__newindex", "__tostring", "__name", "__eq", "__lt", "__le", "__len", "__close", "__concat",
    "__pairs", "__call", "__gc", "__mode", "__metatable", "__add", "__unm", "__idiv", "__band", "__shl",
};
#define NMETAMETHODS (sizeof fz_metamethods / sizeof fz_metamethods[0])

static const char *const fz_numbers[] = {
    "0", "1", "-1", "2", "3", "0.5", "-0.0", "(0/0)", "(1/0)", "(-1/0)", "math.maxinteger", "math.mininteger",
    "(math.maxinteger + 1.0)", "2^53", "2^63", "1e308", "5e-324", "0x7fffffff", "-0x80000000", "255", "65536",
    "10000", "1e-9", "3600",
};
#define NNUMBERS (sizeof fz_numbers / sizeof fz_numbers[0])

static const char *const fz_strings[] = {
    "\"\"", "\"a\"", "\"x\"", "\"default\"", "\"fz\"", "\"ConfigMap\"", "\"v1/ConfigMap\"", "\"v1/Secret\"",
    "\"apps/v1/Deployment\"", "\"Normal\"", "\"Warning\"", "\"Reconcile\"", "\"%s\"", "\"%d%q%5.2f\"", "\"%\"",
    "\"(.-)\"", "\"%w+\"", "\"[\"", "\"\\0\"", "\"\\xff\\xfe\"", "\"{}\"", "\"[]\"", "\"[1,2,{\\\"a\\\":null}]\"",
    "\"{\\\"a\\\":1}\"", "\"2026-01-01T00:00:00Z\"", "\"app=x\"", "\"k\"", "\"i4\"", "\"n\"", "\"t\"", "\"v\"",
    "\"kv\"", "\"collect\"", "\"step\"", "\"count\"", "\"cjson\"", "\"luaop\"", "\"return 1\"",
    "\"fz_total\"", "\"fz_seconds\"", /* luaop.metrics' names: a counter's, a histogram's */
};
#define NSTRINGS (sizeof fz_strings / sizeof fz_strings[0])

static void gen_expr(fz *z, int depth);
static void gen_stmts(fz *z, int depth, unsigned max);
static void gen_table(fz *z, int depth);
static void gen_fields(fz *z, int depth);

static void gen_slot(fz *z)
{
    fz_putf(z, "V[%lld]", (long long)fz_pick(z, NSLOTS) + 1);
}

/* what a metamethod (or any function the API calls back) does first, half
 * the time: something hostile to the call it runs in */
static void gen_hostile(fz *z, int depth)
{
    static const char *const h[] = {
        "collectgarbage(\"collect\")", "CLR(A[1])", "CLR(ctx.log.values)", "coroutine.yield()",
        "error(A[1])", "luaop.sleep(0)", "A[1][(\"k\"):rep(3) .. #A] = {}", "V.strong = nil",
        "EMPTY()", "EMPTY()",
    };
    unsigned n = 1 + fz_pick(z, 2), i; /* one or two of them: empty, then collect */

    for (i = 0; i < n; i++) {
        unsigned k = fz_pick(z, 12);
        if (k < 10) {
            fz_put(z, "pcall(function() ");
            fz_put(z, h[k]);
            fz_put(z, " end) ");
        } else if (k == 10) {
            fz_put(z, "CLR(");
            gen_slot(z);
            fz_put(z, ") ");
        }
    }
    (void)depth;
}

/* a string key made at run time (collectable, unlike a constant): short
 * (interned) or long (over Lua's 40-byte limit: a new string each time) */
static void gen_key(fz *z)
{
    static const int reps[] = {1, 2, 3, 41};

    fz_putf(z, "(\"k\"):rep(%lld)", (long long)reps[fz_pick(z, 4)]);
    fz_putf(z, " .. %lld", (long long)fz_pick(z, 256));
}

static void gen_expr(fz *z, int depth);

/* a value hostile under any use: every metamethod is one function, which
 * starts with something hostile to the call it runs in */
static void gen_hv(fz *z, int depth)
{
    fz_put(z, "HV(function(...) local A = {...} pcall(EMPTY) ");
    if (fz_pick(z, 2))
        gen_hostile(z, depth);
    fz_put(z, " return ");
    if (fz_pick(z, 4)) /* what most metamethods give: a string (__tostring, __concat, __index) */
        gen_key(z);
    else
        gen_expr(z, FZ_MAX_DEPTH);
    fz_putf(z, " end, %lld)", (long long)fz_pick(z, 2));
}

/* a function value: function(...) STMTS return E end */
static void gen_function(fz *z, int depth)
{
    fz_put(z, "function(...) local A = {...} ");
    if (fz_pick(z, 2))
        gen_hostile(z, depth);
    gen_stmts(z, depth + 1, 3);
    fz_put(z, " return ");
    gen_expr(z, depth + 1);
    fz_put(z, " end");
}

static void gen_args(fz *z, int depth)
{
    unsigned n = fz_pick(z, 5), i;

    fz_put(z, "(");
    for (i = 0; i < n; i++) {
        if (i)
            fz_put(z, ", ");
        gen_expr(z, depth + 1);
    }
    fz_put(z, ")");
}

/* a thread (or something a coroutine function is given): the reconcile's
 * (T[1]), a task's (T[2], T[3]), the running one, a new one, any value */
static void gen_thread(fz *z, int depth)
{
    switch (fz_pick(z, 8)) {
    case 0:
    case 1:
    case 2:
    case 3: /* the reconcile's most often */
        fz_putf(z, "T[%lld]", (long long)(fz_pick(z, 2) ? 1 : fz_pick(z, 3) + 1));
        break;
    case 4:
        fz_put(z, "coroutine.running()");
        break;
    case 5:
        fz_put(z, "coroutine.create(");
        gen_function(z, depth);
        fz_put(z, ")");
        break;
    case 6:
        gen_slot(z);
        break;
    default:
        gen_expr(z, depth + 1);
        break;
    }
}

/* a logger's method, with the arguments it takes (a message, values) */
/* a table the API reads as values or copies: fields half the time */
static void gen_values(fz *z, int depth)
{
    if (fz_pick(z, 2))
        gen_fields(z, depth);
    else
        gen_table(z, depth);
}

/* keep: at statement level, a logger :with makes goes to a slot */
static void gen_log_call(fz *z, int depth, int keep)
{
    static const char *const m[] = {"info", "error", "debug", "with"};
    const char *meth = m[fz_pick(z, 4)];

    if (keep && strcmp(meth, "with") == 0) {
        gen_slot(z);
        fz_put(z, " = ");
    }
    switch (fz_pick(z, 6)) {
    case 0:
        fz_put(z, "ctx.log");
        break;
    case 1:
    case 5: /* the values it holds extended first, by the script (what it was handed, changed) */
        fz_put(z, "FILLED(ctx.log, ");
        gen_fields(z, depth + 1);
        fz_put(z, ")");
        break;
    case 2:
        gen_slot(z);
        break;
    case 3:
        fz_put(z, "luaop.logger(\"fz\")");
        break;
    default:
        fz_put(z, "luaop.logger(\"fz\"):with(");
        gen_values(z, depth + 1);
        fz_put(z, ")");
        break;
    }
    fz_put(z, ":");
    fz_put(z, meth);
    fz_put(z, "(");
    if (strcmp(meth, "with") == 0) {
        gen_values(z, depth + 1);
    } else {
        fz_put(z, fz_strings[fz_pick(z, NSTRINGS)]);
        if (fz_pick(z, 3) == 0) { /* values of the call's own, a third of the time */
            fz_put(z, ", ");
            if (fz_pick(z, 4))
                gen_values(z, depth + 1);
            else
                gen_expr(z, depth + 1);
        }
    }
    fz_put(z, ")");
}

static void gen_call(fz *z, int depth)
{
    unsigned k = fz_pick(z, 9);

    if (k == 8) {
        gen_log_call(z, depth, 0);
        return;
    }

    if (k < 5) { /* a function of the API by name */
        const char *f = fz_funcs[fz_pick(z, NFUNCS)];
        if (strncmp(f, "ctx:", 4) == 0 || strncmp(f, "ctx.log:", 8) == 0) {
            fz_put(z, f);
        } else if (strncmp(f, "coroutine.", 10) == 0 && fz_pick(z, 2)) {
            /* a coroutine function on a thread */
            fz_put(z, f);
            fz_put(z, "(");
            gen_thread(z, depth);
            if (fz_pick(z, 2)) {
                fz_put(z, ", ");
                gen_expr(z, depth + 1);
            }
            fz_put(z, ")");
            return;
        } else {
            fz_put(z, f);
        }
        gen_args(z, depth);
    } else if (k == 5) { /* a method by name on any value */
        fz_put(z, "(");
        gen_expr(z, depth + 1);
        fz_put(z, "):");
        fz_put(z, fz_methods[fz_pick(z, NMETHODS)]);
        gen_args(z, depth);
    } else if (k == 6) { /* a call of any value (__call) */
        fz_put(z, "(");
        gen_expr(z, depth + 1);
        fz_put(z, ")");
        gen_args(z, depth);
    } else { /* a handle's method: a client's, a logger's, a task's */
        static const char *const recv[] = {"luaop.client()", "luaop.logger(\"fz\")", "ctx.log",
                                           "ctx:cache(\"ConfigMap\")", "ctx:cache(\"v1/ConfigMap\")",
                                           "luaop.spawn(function() end)"};
        fz_put(z, "(");
        fz_put(z, recv[fz_pick(z, sizeof recv / sizeof recv[0])]);
        fz_put(z, "):");
        fz_put(z, fz_methods[fz_pick(z, NMETHODS)]);
        gen_args(z, depth);
    }
}

/* a table of fields (string keys made at run time), as the API reads them
 * (log values, labels): 1 to 5, each a value or a hostile one */
static void gen_fields(fz *z, int depth)
{
    unsigned n = 1 + fz_pick(z, 5), i;

    fz_put(z, "{");
    for (i = 0; i < n; i++) {
        fz_put(z, "[");
        gen_key(z);
        fz_put(z, "] = ");
        if (fz_pick(z, 3) == 0)
            gen_hv(z, depth + 1);
        else
            gen_expr(z, depth + 1);
        fz_put(z, ", ");
    }
    fz_put(z, "}");
}

/* a table constructor, maybe with a metatable of hostile metamethods */
static void gen_table(fz *z, int depth)
{
    unsigned n = fz_pick(z, 5), i;

    fz_put(z, "{");
    for (i = 0; i < n; i++) {
        switch (fz_pick(z, 5)) {
        case 0:
            gen_expr(z, depth + 1);
            break;
        case 1:
            fz_put(z, fz_fields[fz_pick(z, NFIELDS)]);
            fz_put(z, " = ");
            gen_expr(z, depth + 1);
            break;
        case 2: /* a key made at run time */
            fz_put(z, "[");
            gen_key(z);
            fz_put(z, "] = ");
            gen_expr(z, depth + 1);
            break;
        case 3: /* a value hostile to whatever reads the table */
            fz_put(z, "[");
            gen_key(z);
            fz_put(z, "] = ");
            gen_hv(z, depth + 1);
            break;
        default:
            fz_put(z, "[");
            gen_expr(z, depth + 1);
            fz_put(z, "] = ");
            gen_expr(z, depth + 1);
            break;
        }
        fz_put(z, ", ");
    }
    fz_put(z, "}");
}

static void gen_metatable(fz *z, int depth)
{
    unsigned n = 1 + fz_pick(z, 3), i;

    fz_put(z, "{");
    for (i = 0; i < n; i++) {
        const char *m = fz_metamethods[fz_pick(z, NMETAMETHODS)];
        fz_put(z, m);
        fz_put(z, " = ");
        if (strcmp(m, "__mode") == 0) {
            static const char *const modes[] = {"\"k\"", "\"v\"", "\"kv\""};
            fz_put(z, modes[fz_pick(z, 3)]);
        } else if (strcmp(m, "__name") == 0 || strcmp(m, "__metatable") == 0 || fz_pick(z, 4) == 0) {
            gen_expr(z, depth + 1);
        } else {
            gen_function(z, depth);
        }
        fz_put(z, ", ");
    }
    fz_put(z, "}");
}

static void gen_expr(fz *z, int depth)
{
    unsigned k = fz_pick(z, depth >= FZ_MAX_DEPTH ? 6 : 23);

    switch (k) {
    case 0:
        fz_put(z, fz_pick(z, 3) == 0 ? "nil" : fz_pick(z, 2) ? "true" : "false");
        break;
    case 1:
        fz_put(z, fz_numbers[fz_pick(z, NNUMBERS)]);
        break;
    case 2:
        fz_put(z, fz_strings[fz_pick(z, NSTRINGS)]);
        break;
    case 3: /* a string made at run time (collectable, unlike a constant) */
        fz_putf(z, "(\"k\"):rep(%lld)", (long long)fz_pick(z, 4) + 1);
        fz_putf(z, " .. %lld", (long long)fz_pick(z, 256));
        break;
    case 4:
    case 5:
        gen_slot(z);
        break;
    /* (the cases above are leaves: all a deep expression may choose) */
    case 6: /* any small integer */
        fz_putf(z, "%lld", (long long)fz_byte(z));
        break;
    case 7: /* a weak table whose entries die when the collector runs */
    {
        static const char *const modes[] = {"\"k\"", "\"v\"", "\"kv\""};
        static const int sizes[] = {1, 2, 3, 8, 40, 200, 1000, 3000};
        fz_put(z, "W(");
        fz_put(z, modes[fz_pick(z, 3)]);
        fz_putf(z, ", %lld", (long long)sizes[fz_pick(z, 8)]);
        fz_putf(z, ", %lld)", (long long)fz_pick(z, 6));
        break;
    }
    case 8:
    case 9:
        gen_table(z, depth);
        break;
    case 10:
    case 11:
        fz_put(z, "setmetatable(");
        gen_table(z, depth);
        fz_put(z, ", ");
        gen_metatable(z, depth);
        fz_put(z, ")");
        break;
    case 12:
        gen_function(z, depth);
        break;
    case 13:
        gen_thread(z, depth);
        break;
    case 14:
        fz_put(z, "(");
        gen_call(z, depth);
        fz_put(z, ")");
        break;
    case 15: /* deep nesting */
    {
        static const int d[] = {2, 10, 100, 200, 1000, 3000};
        fz_putf(z, "D(%lld, ", (long long)d[fz_pick(z, 6)]);
        gen_expr(z, depth + 1);
        fz_put(z, ")");
        break;
    }
    case 16: /* operators: their metamethods */
    {
        static const char *const ops[] = {" .. ", " < ", " <= ", " == ", " + ", " // ", " & ", " << ", " and ", " or "};
        if (fz_pick(z, 4) == 0) {
            fz_put(z, fz_pick(z, 2) ? "#" : "-");
            gen_expr(z, depth + 1);
            break;
        }
        fz_put(z, "(");
        gen_expr(z, depth + 1);
        fz_put(z, ops[fz_pick(z, 10)]);
        gen_expr(z, depth + 1);
        fz_put(z, ")");
        break;
    }
    case 17: /* an index: __index */
        fz_put(z, "(");
        gen_expr(z, depth + 1);
        if (fz_pick(z, 3)) {
            fz_put(z, ").");
            fz_put(z, fz_fields[fz_pick(z, NFIELDS)]);
        } else {
            fz_put(z, ")[");
            gen_expr(z, depth + 1);
            fz_put(z, "]");
        }
        break;
    case 18:
    {
        static const char *const names[] = {"ctx", "req", "ctx.log", "ctx.log.values", "luaop", "cjson", "V"};
        fz_put(z, names[fz_pick(z, 7)]);
        break;
    }
    case 19: /* an object as the API takes them */
        fz_put(z, "{apiVersion = \"v1\", kind = \"ConfigMap\", metadata = {name = ");
        gen_expr(z, depth + 1);
        fz_put(z, ", namespace = \"default\", labels = ");
        gen_expr(z, depth + 1);
        fz_put(z, "}, data = ");
        gen_expr(z, depth + 1);
        fz_put(z, "}");
        break;
    case 20: /* a huge string */
        fz_putf(z, "(\"x\"):rep(%lld)", 1LL << (fz_pick(z, 8) ? 10 + fz_pick(z, 10) : 20 + fz_pick(z, 3)));
        break;
    case 21: /* a value hostile under any use */
        gen_hv(z, depth);
        break;
    default: /* a value read back from a slot's table */
        gen_slot(z);
        fz_put(z, "[");
        gen_expr(z, depth + 1);
        fz_put(z, "]");
        break;
    }
}

static void gen_sleep(fz *z)
{
    static const char *const t[] = {"0", "0.001", "0.01", "0.1", "1", "10"};

    fz_put(z, "luaop.sleep(");
    fz_put(z, t[fz_pick(z, 6)]);
    fz_put(z, ")");
}

static void gen_stmt(fz *z, int depth)
{
    unsigned k = fz_pick(z, depth >= FZ_MAX_DEPTH ? 12 : 32);

    switch (k) {
    case 0:
        gen_slot(z);
        fz_put(z, " = ");
        gen_expr(z, depth);
        break;
    case 1:
    case 2:
    case 3:
        gen_call(z, depth);
        break;
    case 4:
    case 5:
    case 6: /* wait in C: a sleep */
        gen_sleep(z);
        break;
    case 7:
    case 8: /* wait in C: a request (the kit's API server answers after a yield) */
    {
        static const char *const r[] = {"ctx:get(\"v1/Secret\", \"s\", \"default\")",
                                        "ctx:list(\"v1/Secret\")",
                                        ("ctx:create({apiVersion = \"v1\", kind = \"Secret\", "
                                         "metadata = {name = \"s\", namespace = \"default\"}})"),
                                        "ctx:delete(\"v1/Secret\", {name = \"s\", namespace = \"default\"})"};
        fz_put(z, r[fz_pick(z, 4)]);
        break;
    }
    case 9: /* threads: the reconcile's is T[1], tasks' the next */
    case 10:
    case 11: /* the reconcile's or a task's thread, or a new one, driven */
    {
        static const char *const ops[] = {"resume", "resume", "close", "status", "wrap", "isyieldable"};
        const char *op = ops[fz_pick(z, 6)];
        if (strcmp(op, "wrap") == 0) {
            fz_put(z, "coroutine.wrap(");
            gen_function(z, depth);
            fz_put(z, ")()");
            break;
        }
        fz_put(z, "coroutine.");
        fz_put(z, op);
        fz_put(z, "(");
        gen_thread(z, depth);
        fz_put(z, ", ");
        gen_expr(z, FZ_MAX_DEPTH);
        fz_put(z, ")");
        break;
    }
    /* (the cases above are all a deep statement may choose) */
    case 12:
    case 13:
    case 14: /* a task: its thread goes to T */
        fz_put(z, "V.task = luaop.spawn(function() T[#T + 1] = coroutine.running() ");
        gen_stmts(z, depth + 1, 6);
        fz_put(z, " end)");
        break;
    case 15:
        fz_put(z, "coroutine.yield(");
        gen_expr(z, depth + 1);
        fz_put(z, ")");
        break;
    case 16:
    {
        static const char *const o[] = {"\"collect\"", "\"step\"", "\"count\"", "\"step\", 1000", "\"isrunning\""};
        fz_put(z, "collectgarbage(");
        fz_put(z, o[fz_pick(z, 5)]);
        fz_put(z, ")");
        break;
    }
    case 17: /* empty a table (raw) */
        fz_put(z, "CLR(");
        gen_expr(z, depth + 1);
        fz_put(z, ")");
        break;
    case 18:
        fz_putf(z, "for _ = 1, %lld do ", (long long)fz_pick(z, 8) + 1);
        gen_stmts(z, depth + 1, 3);
        fz_put(z, " end");
        break;
    case 19:
    case 20: /* __newindex, or a write into what the API handed out */
    {
        static const char *const dst[] = {"ctx.log.values", "req", "V.task", "ctx"};
        fz_put(z, "(");
        if (fz_pick(z, 2))
            fz_put(z, dst[fz_pick(z, 4)]);
        else
            gen_expr(z, depth + 1);
        fz_put(z, ")[");
        gen_expr(z, depth + 1);
        fz_put(z, "] = ");
        gen_expr(z, depth + 1);
        break;
    }
    case 21: /* __close */
        fz_put(z, "local c <close> = ");
        gen_expr(z, depth + 1);
        fz_put(z, " ");
        gen_stmts(z, depth + 1, 2);
        break;
    case 22:
        fz_put(z, "error(");
        gen_expr(z, depth + 1);
        fz_put(z, ")");
        break;
    case 23:
        if (fz_pick(z, 4) == 0) {
            fz_put(z, "V.strong = nil"); /* what W made dies at the next collection */
            break;
        }
        gen_slot(z);
        fz_put(z, " = ");
        gen_expr(z, depth + 1);
        break;
    case 28:
    case 29:
    case 31: /* a logger's method */
        gen_log_call(z, depth, 1);
        break;
    case 26:
    case 27:
    case 30: /* a table's entries copied into one the API handed out, or a slot */
    {
        static const char *const dst[] = {"ctx.log.values", "req", "V.task", "ctx"};
        fz_put(z, "for k, v in next, ");
        gen_values(z, depth + 1);
        fz_put(z, " do (");
        if (fz_pick(z, 4))
            fz_put(z, dst[fz_pick(z, 4)]);
        else
            gen_slot(z);
        fz_put(z, ")[k] = v end");
        break;
    }
    default: /* a table's pairs (__pairs) */
        fz_put(z, "for k, v in pairs(");
        gen_expr(z, depth + 1);
        fz_put(z, ") do ");
        gen_stmts(z, depth + 1, 2);
        fz_put(z, " end");
        break;
    }
}

/* statements, each in a function of its own run by pcall (an error ends
 * that statement, not the program) */
static void gen_stmts(fz *z, int depth, unsigned max)
{
    unsigned n = fz_pick(z, max + 1), i;

    for (i = 0; i < n && fz_more(z); i++) {
        if (depth == 0)
            z->stmts++;
        fz_put(z, "pcall(function() ");
        gen_stmt(z, depth);
        fz_put(z, " end) ");
    }
}

/* Generic helpers every program has (part of the grammar: hostile values'
 * constructors). */
static const char fz_prelude[] =
    "local luaop = require 'luaop'\n"
    "local cjson = require 'cjson'\n"
    "local V, T = {}, {}\n"
    "-- a weak table of n entries: keys made at run time (or integers); values fresh arrays, objects or\n"
    "-- strings; the values held strongly in V.strong too until a statement lets them go\n"
    "local function W(mode, n, kind)\n"
    "  local t, strong = setmetatable({}, { __mode = mode }), {}\n"
    "  for i = 1, n do\n"
    "    local v = kind % 3 == 0 and { i } or kind % 3 == 1 and { a = i, b = { i } } or ('v' .. i)\n"
    "    t[kind < 3 and ('k' .. i) or i] = v\n"
    "    strong[i] = v\n"
    "  end\n"
    "  V.strong = strong\n"
    "  return t\n"
    "end\n"
    "local function D(n, leaf) local t = leaf for _ = 1, n do t = { t } end return t end\n"
    "local function CLR(t) for k in next, t do t[k] = nil end end\n"
    "local ONCE = false\n"
    "local CTX\n"
    "-- a value hostile under any use: every metamethod is f; holding a function, as no JSON can\n"
    "local MMS = { '__index', '__newindex', '__tostring', '__eq', '__lt', '__le', '__len', '__close', '__concat',\n"
    "  '__pairs', '__call', '__add', '__sub', '__mul', '__div', '__mod', '__pow', '__unm', '__idiv', '__band',\n"
    "  '__bor', '__bxor', '__shl', '__shr', '__bnot' }\n"
    "-- (three deep at most: its function runs into its own metamethods, each doing it again)\n"
    "local function HV(f, kind)\n"
    "  local mt, depth = { __name = 'HV' }, 0\n"
    "  local function g(...)\n"
    "    if depth >= 3 then return 'k' end\n"
    "    depth = depth + 1\n"
    "    local r = table.pack(pcall(f, ...))\n"
    "    depth = depth - 1\n"
    "    if not r[1] then error(r[2], 0) end\n"
    "    return table.unpack(r, 2, r.n)\n"
    "  end\n"
    "  for _, m in ipairs(MMS) do mt[m] = g end\n"
    "  return setmetatable(kind == 0 and { print } or { a = { print } }, mt)\n"
    "end\n"
    "-- h, its values table extended by t's entries (a handle the API handed out, changed by the script)\n"
    "local function FILLED(h, t)\n"
    "  pcall(function() for k, v in next, t do h.values[k] = v end end)\n"
    "  return h\n"
    "end\n"
    "-- empty every table the program holds (its slots and what the API handed it, deepest first), then\n"
    "-- collect: what a callback does to the call it runs in\n"
    "-- (not again from inside itself: a metamethod it runs into would start it again, and again)\n"
    "local emptying = false\n"
    "local function EMPTY()\n"
    "  if emptying then return end\n"
    "  emptying = true\n"
    "  local seen = {}\n"
    "  local function clr(t, d)\n"
    "    if type(t) ~= 'table' or seen[t] or d > 3 then return end\n"
    "    seen[t] = true\n"
    "    for _, v in next, t do clr(v, d + 1) end\n"
    "    for k in next, t do pcall(rawset, t, k, nil) end\n"
    "  end\n"
    "  pcall(clr, V, 0)\n"
    "  if CTX then pcall(function() clr(CTX.log.values, 0) end) end\n"
    "  pcall(collectgarbage, 'collect')\n"
    "  emptying = false\n"
    "end\n";

/* The program: a controller whose reconcile runs its statements once.
 * (None at the top level: the kit runs a top level that waits, a sleep
 * or a request, into its load timeout, which spins for a minute on the
 * real clock once the kit stops: the kit's limit, not luaop's.) */
static void gen_program(fz *z)
{
    fz_put(z, fz_prelude);
    fz_put(z, "return luaop.controller {\n  name = 'fz', resource = 'v1/ConfigMap',\n"
              "  reconcile = function(ctx, req)\n    if ONCE then return end\n    ONCE = true\n"
              "    T[1] = coroutine.running()\n    CTX = ctx\n    ");
    while (fz_more(z))
        gen_stmts(z, 0, FZ_MAX_STMTS);
    fz_put(z, "\n  end,\n}\n");
}

/* ---- the driver ---------------------------------------------------------- */

static const char fz_driver[] =
    "local testing = require 'luaop.testing'\n"
    "local core = require 'luaop.core'\n"
    "local sandbox = require 'luaop.script.sandbox'\n"
    "testing.MAX_STEPS = 64\n"
    "local names = ...\n"
    /* every function the sandbox offers is in the grammar's list */
    "local have, missing = {}, {}\n"
    "for _, n in ipairs(names) do have[n] = true end\n"
    "local env = sandbox.env()\n"
    "local function walk(prefix, t, seen)\n"
    "  if seen[t] then return end\n"
    "  seen[t] = true\n"
    "  for k, v in pairs(t) do\n"
    "    if type(v) == 'function' and not have[prefix .. k] then missing[#missing + 1] = prefix .. k end\n"
    "    if type(v) == 'table' then walk(prefix .. k .. '.', v, seen) end\n"
    "  end\n"
    "end\n"
    "local seen = {}\n"
    "for _, m in ipairs { 'luaop', 'cjson', 'cjson.safe', 'string', 'table', 'math', 'utf8', 'coroutine', 'os' } do\n"
    "  walk(m .. '.', env.require(m), seen)\n"
    "end\n"
    "for k, v in pairs(env) do if type(v) == 'function' and not have[k] then missing[#missing + 1] = k end end\n"
    /* a class's methods: its metatable's __index table (a sealed one) */
    "local function methods(obj)\n"
    "  local mt = debug.getmetatable(obj)\n"
    "  return type(mt.__index) == 'table' and mt.__index or mt\n"
    "end\n"
    "local Ctx = methods(require('luaop.context').new { log = {} })\n"
    "for k, v in pairs(Ctx) do\n"
    "  if type(v) == 'function' and not have['ctx:' .. k] then missing[#missing + 1] = 'ctx:' .. k end\n"
    "end\n"
    "local Logger = methods(require('luaop').logger('x'))\n"
    "for k, v in pairs(Logger) do\n"
    "  if type(v) == 'function' and not have['ctx.log:' .. k] then missing[#missing + 1] = 'ctx.log:' .. k end\n"
    "end\n"
    "if #missing > 0 then\n"
    "  table.sort(missing)\n"
    "  error('fuzz/api.c lacks functions the sandbox offers: ' .. table.concat(missing, ' '))\n"
    "end\n"
    "local CM = { apiVersion = 'v1', kind = 'ConfigMap', metadata = { name = 'fz', namespace = 'default' },\n"
    "  data = { a = '1' } }\n"
    "return function(text)\n"
    "  local e = testing.env { objects = { CM } }\n"
    "  -- lines go through luaop's writer (to /dev/null); kept to be shown with FUZZ_API_VERBOSE\n"
    "  if not os.getenv('FUZZ_API_VERBOSE') then core.log.write = e.saved.log_write end\n"
    "  local ok, err = pcall(e.load, e, 'fuzz.lua', text)\n"
    "  if ok then ok, err = pcall(e.advance, e, 30) end\n"
    "  -- then a day, so that no sleeper is left to wake in a later input's world\n"
    "  pcall(e.advance, e, 86400)\n"
    "  e:stop()\n"
    "  if os.getenv('FUZZ_API_VERBOSE') then\n"
    "    io.stderr:write('fuzz/api: ', tostring(err), '\\n')\n"
    "    for _, l in ipairs(e.logged) do io.stderr:write('  log: ', l.msg, ' ', tostring(l.fields.error), '\\n') end\n"
    "  end\n"
    "end\n";

static lua_State *fuzz_L;

static void fuzz_init(void)
{
    lua_State *L = fuzz_L = luaL_newstate();
    FILE *devnull = fopen("/dev/null", "w");
    size_t i;

    if (L == NULL || devnull == NULL)
        abort();
    log_setup(LOG_FORMAT_JSON, LOG_TRACE, devnull);
    luaL_openlibs(L);
    charge_wrap(L); /* the libraries' C work charged, as in luaop (main.c) */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_luaop_core);
    lua_setfield(L, -2, "luaop.core");
    lua_pop(L, 1);
    luaembed_preload(L);
    if (luaL_loadstring(L, fz_driver) != LUA_OK)
        goto fail;
    lua_createtable(L, (int)NFUNCS, 0);
    for (i = 0; i < NFUNCS; i++) {
        lua_pushstring(L, fz_funcs[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (lua_pcall(L, 1, 1, 0) != LUA_OK)
        goto fail;
    lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.run");
    if (!getenv("FUZZ_API_NOLINES"))
        lua_sethook(L, fuzz_hook, LUA_MASKLINE, 0);
    return;
fail:
    fprintf(stderr, "fuzz/api: %s\n", lua_tostring(L, -1));
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz z = {data, data + size, NULL, 0, 0, 0, fz_seed(data, size), 0};
    lua_State *L;

    if (fuzz_L == NULL)
        fuzz_init();
    L = fuzz_L;
    gen_program(&z);
    if (getenv("FUZZ_API_PROGRAM")) { /* a program of one's own instead (debugging the harness) */
        FILE *f = fopen(getenv("FUZZ_API_PROGRAM"), "rb");
        long n;
        if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
            abort();
        free(z.out);
        z.out = malloc((size_t)n + 1);
        if (z.out == NULL)
            abort();
        z.len = fread(z.out, 1, (size_t)n, f);
        z.out[z.len] = 0;
        fclose(f);
    }
    if (getenv("FUZZ_API_PRINT"))
        fprintf(stderr, "%s\n", z.out);
    lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.run");
    lua_pushlstring(L, z.out, z.len);
    free(z.out);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "fuzz/api: the harness failed: %s\n", lua_tostring(L, -1));
        abort();
    }
    return 0;
}
