/* lbind_check.c - luaop.core.check: what `luaop --check` reads from a
 * compiled chunk without running it (lua/luaop/check/):
 *
 *   check.globals(fn) -> { {name =, line =, set = bool}, ... }: each read
 *     and write of a global (a field of the upvalue _ENV with a constant
 *     name) in fn and every function inside it, in the order of the code;
 *   check.line(fn) -> the line where the Lua function fn is defined, and
 *     its chunk's name ("@path");
 *   check.fields(fn) -> { {name =, line =, table = id}, ... }: each field
 *     with a constant name set in a table constructor (or on a register a
 *     NEWTABLE filled and nothing wrote since), id numbering the
 *     constructors: where `watchs = {...}` is written (the line of the
 *     value's `{` or `function` when it is a table or a function);
 *   check.uses(fn) -> { {root = "luaop"|"ctx", path =, line =, method =
 *     bool, arg = string|nil}, ... }: each field read through a register
 *     or upvalue named luaop or ctx (a local, a parameter or an upvalue of
 *     that name, then GETFIELD chains, SELF, MOVE into a temporary), path
 *     the fields from the root ("json.encode", "log.info"); a method call
 *     (SELF) whose first argument a LOADK sets to a constant string has it
 *     as arg (ctx:get("ConfigMap", ...)); a field written through one
 *     (`ctx.seen = 1`, SETFIELD, SETTABUP) is a use with set = true.
 *     Other names for them (`local l = luaop`) are not followed;
 *   check.entry(path) -> "file" | "directory" | "link" | "other" | nil, err:
 *     the entry itself, a link not followed (lstat; blocking).
 *
 * It reads the bytecode (Lua's own lobject.h and lopcodes.h: luaop builds
 * Lua from source, so these match the interpreter), as `luac -l` piped to
 * grep SETTABUP does, and luacheck's parser would: a global that only a
 * branch never taken reads is found all the same. */
#include "lbind.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "ldebug.h"
#include "lobject.h"
#include "lopcodes.h"
#include "lstate.h"

/* Whether upvalue `up` of p is _ENV. */
static int lbind_check_is_env(const Proto *p, int up)
{
    const TString *name = up < p->sizeupvalues ? p->upvalues[up].name : NULL;

    return name != NULL && strcmp(getstr(name), "_ENV") == 0;
}

/* The line of each pc in turn, walked as ldebug.c's luaG_getfuncline does
 * (bounded by the proto's own sizes, whatever the chunk). The sum is kept
 * wide and the line clamped to an int: a binary chunk can say its function
 * starts at line INT_MAX, and at most INT_MAX deltas of at most 127 each
 * fit in a long long many times over. */
typedef struct lbind_check_lines {
    long long line;
    int abs;
} lbind_check_lines;

static int lbind_check_line_at(const Proto *p, int pc, lbind_check_lines *w)
{
    if (pc < p->sizelineinfo) {
        if (p->lineinfo[pc] != ABSLINEINFO)
            w->line += p->lineinfo[pc];
        else if (w->abs < p->sizeabslineinfo)
            w->line = p->abslineinfo[w->abs++].line;
    }
    return w->line > INT_MAX ? INT_MAX : w->line < INT_MIN ? INT_MIN : (int)w->line;
}

/* Constant k of p as a string, or NULL. */
static const char *lbind_check_kstr(const Proto *p, int k)
{
    return k >= 0 && k < p->sizek && ttisstring(&p->k[k]) ? getstr(tsvalue(&p->k[k])) : NULL;
}

/* Append the globals of p (and of the functions inside it) to the list at
 * index out, which holds *n entries. */
static void lbind_check_proto(lua_State *L, const Proto *p, int out, lua_Integer *n)
{
    lbind_check_lines w = {p->linedefined, 0};

    luaL_checkstack(L, 4, "check.globals");
    for (int pc = 0; pc < p->sizecode; pc++) {
        Instruction i = p->code[pc];
        OpCode op = GET_OPCODE(i);
        int line = lbind_check_line_at(p, pc, &w), up, k;
        const char *name;

        if (op == OP_GETTABUP) {
            up = GETARG_B(i);
            k = GETARG_C(i);
        } else if (op == OP_SETTABUP) {
            up = GETARG_A(i);
            k = GETARG_B(i);
        } else {
            continue;
        }
        if (!lbind_check_is_env(p, up) || (name = lbind_check_kstr(p, k)) == NULL)
            continue;
        lua_createtable(L, 0, 3);
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
        lua_pushinteger(L, line);
        lua_setfield(L, -2, "line");
        lua_pushboolean(L, op == OP_SETTABUP);
        lua_setfield(L, -2, "set");
        lua_rawseti(L, out, ++*n);
    }
    for (int j = 0; j < p->sizep; j++)
        lbind_check_proto(L, p->p[j], out, n);
}

/* What a register holds, as far as the readers follow it: a table a
 * constructor made (check.fields), or a path from luaop or ctx
 * (check.uses). Registers are 8-bit operands: 256 of them. */
#define LBIND_CHECK_REGS 256
#define LBIND_CHECK_PATH 120
enum { LBIND_CHECK_NONE, LBIND_CHECK_LUAOP, LBIND_CHECK_CTX };

typedef struct lbind_check_reg {
    lua_Integer table; /* the constructor's id, or 0 */
    int line;          /* the line of the NEWTABLE or CLOSURE that set it, or 0 */
    int root;          /* LBIND_CHECK_NONE, _LUAOP, _CTX */
    char path[LBIND_CHECK_PATH];
} lbind_check_reg;

/* The local variables active at a pc, kept as the walk advances (so that
 * naming a register costs no scan of the function's locals from the
 * start): the locals before `first` have a startpc <= pc (locvars are in
 * the order of their startpc), and of them those whose endpc is past pc
 * are active; register r is the r-th active one, in the order of locvars
 * (as lfunc.c's luaF_getlocalname counts, which is not exported to
 * luaop.core). active holds the first LBIND_CHECK_REGS of them: registers
 * are 8-bit operands; more only in a crafted chunk (the parser allows 200
 * locals), and then `over` says that one left out may have to come in. */
typedef struct lbind_check_locals {
    int pc;     /* the pc reached, -1 before the first */
    int first;  /* the locals before it start at or before pc */
    int count;  /* of active */
    int over;   /* an active local did not fit in active */
    int minend; /* the least endpc in active, INT_MAX when none */
    int active[LBIND_CHECK_REGS];
} lbind_check_locals;

typedef struct lbind_check_state {
    lbind_check_reg regs[LBIND_CHECK_REGS];
    lbind_check_locals locals; /* of the function being walked */
    lua_Integer tables, n;
    int out;
} lbind_check_state;

/* Start over: no pc reached, no local active. */
static void lbind_check_locals_reset(lbind_check_locals *t)
{
    t->pc = -1;
    t->first = t->count = t->over = 0;
    t->minend = INT_MAX;
}

/* Take local i into active if it is active at t->pc and fits. */
static void lbind_check_locals_take(const Proto *p, lbind_check_locals *t, int i)
{
    int end = p->locvars[i].endpc;

    if (end <= t->pc)
        return;
    if (t->count == LBIND_CHECK_REGS) {
        t->over = 1;
        return;
    }
    t->active[t->count++] = i;
    if (end < t->minend)
        t->minend = end;
}

/* Advance t to pc (back to the start first if pc is behind it). */
static void lbind_check_locals_at(const Proto *p, lbind_check_locals *t, int pc)
{
    if (pc == t->pc)
        return;
    if (pc < t->pc)
        lbind_check_locals_reset(t);
    t->pc = pc;
    if (t->minend <= pc) { /* some active local ended */
        int n = t->count, over = t->over;

        t->count = t->over = 0;
        t->minend = INT_MAX;
        if (over) { /* (a crafted chunk: the one left out may be in now) */
            for (int i = 0; i < t->first; i++)
                lbind_check_locals_take(p, t, i);
        } else {
            for (int j = 0; j < n; j++)
                lbind_check_locals_take(p, t, t->active[j]);
        }
    }
    while (t->first < p->sizelocvars && p->locvars[t->first].startpc <= pc)
        lbind_check_locals_take(p, t, t->first++);
}

/* The name of the local variable register reg is at pc, or NULL. pc never
 * goes back within a walk of one function but for a reset. */
static const char *lbind_check_local(const Proto *p, lbind_check_state *s, int reg, int pc)
{
    const TString *name;

    lbind_check_locals_at(p, &s->locals, pc);
    if (reg < 0 || reg >= s->locals.count)
        return NULL;
    name = p->locvars[s->locals.active[reg]].varname;
    return name != NULL ? getstr(name) : NULL;
}

/* The name of upvalue up of p, or NULL. */
static const char *lbind_check_upvalue(const Proto *p, int up)
{
    return up >= 0 && up < p->sizeupvalues && p->upvalues[up].name != NULL ? getstr(p->upvalues[up].name) : NULL;
}

static int lbind_check_root_of(const char *name)
{
    if (name == NULL)
        return LBIND_CHECK_NONE;
    if (strcmp(name, "luaop") == 0)
        return LBIND_CHECK_LUAOP;
    return strcmp(name, "ctx") == 0 ? LBIND_CHECK_CTX : LBIND_CHECK_NONE;
}

/* What register reg holds at pc: a local named luaop or ctx is that root
 * (path ""); another local is not followed; a temporary is what the
 * instructions before put in it. *path is set to the path. */
static int lbind_check_read(const Proto *p, lbind_check_state *s, int reg, int pc, const char **path)
{
    const char *name = lbind_check_local(p, s, reg, pc);

    *path = "";
    if (reg < 0 || reg >= LBIND_CHECK_REGS)
        return LBIND_CHECK_NONE;
    if (name != NULL)
        return lbind_check_root_of(name);
    *path = s->regs[reg].path;
    return s->regs[reg].root;
}

/* Forget what registers from..to hold. */
static void lbind_check_clear(lbind_check_state *s, int from, int to)
{
    for (int r = from < 0 ? 0 : from; r <= to && r < LBIND_CHECK_REGS; r++) {
        s->regs[r].table = 0;
        s->regs[r].line = 0;
        s->regs[r].root = LBIND_CHECK_NONE;
        s->regs[r].path[0] = '\0';
    }
}

/* Register dst (written at pc) holds root's path base(.key): unless it is
 * a local of another name, or the path does not fit. */
static void lbind_check_hold(const Proto *p, lbind_check_state *s, int dst, int pc, int root, const char *base,
                             const char *key)
{
    const char *name = lbind_check_local(p, s, dst, pc + 1);
    char copy[LBIND_CHECK_PATH];
    lbind_check_reg *r;
    size_t bl = strlen(base), kl = key != NULL ? strlen(key) : 0;

    if (bl + kl + 2 > LBIND_CHECK_PATH)
        bl = kl = LBIND_CHECK_PATH; /* (does not fit: not followed) */
    else
        memcpy(copy, base, bl); /* (base may be dst's own path, cleared next) */
    lbind_check_clear(s, dst, dst);
    if (dst >= LBIND_CHECK_REGS || root == LBIND_CHECK_NONE || (name != NULL && lbind_check_root_of(name) != root))
        return;
    if (bl == LBIND_CHECK_PATH)
        return;
    r = &s->regs[dst];
    memcpy(r->path, copy, bl);
    if (key != NULL) {
        if (bl > 0)
            r->path[bl++] = '.';
        memcpy(r->path + bl, key, kl);
    }
    r->path[bl + kl] = '\0';
    r->root = root;
}

/* How a use uses its path. */
enum { LBIND_CHECK_GET, LBIND_CHECK_CALL, LBIND_CHECK_SET };

/* Append one use: root's base.key at line, read (GET), called as a method
 * (CALL) or written (SET). */
static void lbind_check_use(lua_State *L, lbind_check_state *s, int root, const char *base, const char *key, int line,
                            int how, const char *arg)
{
    lua_createtable(L, 0, 6);
    lua_pushstring(L, root == LBIND_CHECK_LUAOP ? "luaop" : "ctx");
    lua_setfield(L, -2, "root");
    if (base[0] != '\0')
        lua_pushfstring(L, "%s.%s", base, key);
    else
        lua_pushstring(L, key);
    lua_setfield(L, -2, "path");
    lua_pushinteger(L, line);
    lua_setfield(L, -2, "line");
    lua_pushboolean(L, how == LBIND_CHECK_CALL);
    lua_setfield(L, -2, "method");
    if (how == LBIND_CHECK_SET) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "set");
    }
    if (arg != NULL) {
        lua_pushstring(L, arg);
        lua_setfield(L, -2, "arg");
    }
    lua_rawseti(L, s->out, ++s->n);
}

/* A field a constructor sets. */
static void lbind_check_field(lua_State *L, lbind_check_state *s, const char *name, int line, lua_Integer table)
{
    lua_createtable(L, 0, 3);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    lua_pushinteger(L, line);
    lua_setfield(L, -2, "line");
    lua_pushinteger(L, table);
    lua_setfield(L, -2, "table");
    lua_rawseti(L, s->out, ++s->n);
}

/* The string constant instruction pc+1 loads into register reg, or NULL. */
static const char *lbind_check_loadk(const Proto *p, int pc, int reg)
{
    Instruction i;

    if (pc + 1 >= p->sizecode)
        return NULL;
    i = p->code[pc + 1];
    if (GET_OPCODE(i) != OP_LOADK || GETARG_A(i) != reg)
        return NULL;
    return lbind_check_kstr(p, GETARG_Bx(i));
}

/* Walk p and the functions inside it: fields (uses == 0) or uses. */
static void lbind_check_walk(lua_State *L, const Proto *p, lbind_check_state *s, int uses)
{
    lbind_check_lines w = {p->linedefined, 0};

    luaL_checkstack(L, 4, "check");
    lbind_check_clear(s, 0, LBIND_CHECK_REGS - 1);
    lbind_check_locals_reset(&s->locals);
    for (int pc = 0; pc < p->sizecode; pc++) {
        Instruction i = p->code[pc];
        OpCode op = GET_OPCODE(i);
        int line = lbind_check_line_at(p, pc, &w), a = GETARG_A(i), root;
        const char *base, *key, *up;

        switch (op) {
        case OP_NEWTABLE:
            lbind_check_clear(s, a, a);
            s->regs[a].table = ++s->tables;
            s->regs[a].line = line;
            break;
        case OP_CLOSURE:
            lbind_check_clear(s, a, a);
            /* the line of `function` (the CLOSURE has its `end`'s) */
            if ((int)GETARG_Bx(i) < p->sizep && p->p[GETARG_Bx(i)]->linedefined > 0)
                s->regs[a].line = p->p[GETARG_Bx(i)]->linedefined;
            break;
        case OP_SETFIELD:
            /* the line of the field: a table's or function's value spans
             * lines, and SETFIELD has the last one */
            key = lbind_check_kstr(p, GETARG_B(i));
            if (!GETARG_k(i) && GETARG_C(i) < LBIND_CHECK_REGS && s->regs[GETARG_C(i)].line != 0)
                line = s->regs[GETARG_C(i)].line;
            if (!uses && key != NULL && s->regs[a].table != 0)
                lbind_check_field(L, s, key, line, s->regs[a].table);
            root = uses ? lbind_check_read(p, s, a, pc, &base) : LBIND_CHECK_NONE;
            if (root != LBIND_CHECK_NONE && key != NULL)
                lbind_check_use(L, s, root, base, key, line, LBIND_CHECK_SET, NULL);
            break;
        case OP_GETFIELD:
            key = lbind_check_kstr(p, GETARG_C(i));
            root = uses ? lbind_check_read(p, s, GETARG_B(i), pc, &base) : LBIND_CHECK_NONE;
            if (root != LBIND_CHECK_NONE && key != NULL) {
                lbind_check_use(L, s, root, base, key, line, LBIND_CHECK_GET, NULL);
                lbind_check_hold(p, s, a, pc, root, base, key);
            } else {
                lbind_check_clear(s, a, a);
            }
            break;
        case OP_SELF:
            key = GETARG_k(i) ? lbind_check_kstr(p, GETARG_C(i)) : NULL;
            root = uses ? lbind_check_read(p, s, GETARG_B(i), pc, &base) : LBIND_CHECK_NONE;
            if (root != LBIND_CHECK_NONE && key != NULL)
                lbind_check_use(L, s, root, base, key, line, LBIND_CHECK_CALL, lbind_check_loadk(p, pc, a + 2));
            lbind_check_clear(s, a, a + 1);
            break;
        case OP_GETTABUP:
        case OP_GETUPVAL:
            up = lbind_check_upvalue(p, GETARG_B(i));
            root = lbind_check_root_of(up);
            key = op == OP_GETTABUP ? lbind_check_kstr(p, GETARG_C(i)) : NULL;
            if (uses && root != LBIND_CHECK_NONE && (op == OP_GETUPVAL || key != NULL)) {
                if (key != NULL)
                    lbind_check_use(L, s, root, "", key, line, LBIND_CHECK_GET, NULL);
                lbind_check_hold(p, s, a, pc, root, "", key);
            } else {
                lbind_check_clear(s, a, a);
            }
            break;
        case OP_SETTABUP: /* (globals are check.globals') */
            root = lbind_check_root_of(lbind_check_upvalue(p, a));
            key = lbind_check_kstr(p, GETARG_B(i));
            if (uses && root != LBIND_CHECK_NONE && key != NULL)
                lbind_check_use(L, s, root, "", key, line, LBIND_CHECK_SET, NULL);
            break;
        case OP_MOVE:
            root = uses ? lbind_check_read(p, s, GETARG_B(i), pc, &base) : LBIND_CHECK_NONE;
            if (root != LBIND_CHECK_NONE)
                lbind_check_hold(p, s, a, pc, root, base, NULL);
            else
                lbind_check_clear(s, a, a);
            break;
        case OP_CALL: case OP_TAILCALL: case OP_TFORCALL: case OP_VARARG: case OP_LOADNIL:
        case OP_FORPREP: case OP_FORLOOP: case OP_TFORPREP: case OP_TFORLOOP: case OP_CONCAT:
            lbind_check_clear(s, a, LBIND_CHECK_REGS - 1); /* (they write from A up) */
            break;
        case OP_SETTABLE: case OP_SETI: case OP_SETUPVAL: case OP_SETLIST: case OP_JMP:
        case OP_EQ: case OP_LT: case OP_LE: case OP_EQK: case OP_EQI: case OP_LTI: case OP_LEI: case OP_GTI:
        case OP_GEI: case OP_TEST: case OP_RETURN: case OP_RETURN0: case OP_RETURN1: case OP_CLOSE: case OP_TBC:
        case OP_MMBIN: case OP_MMBINI: case OP_MMBINK: case OP_EXTRAARG: case OP_VARARGPREP:
            break; /* (they write no register) */
        default:
            lbind_check_clear(s, a, a);
            break;
        }
    }
    for (int j = 0; j < p->sizep; j++)
        lbind_check_walk(L, p->p[j], s, uses);
}

/* A Lua function's prototype, or a raised error. */
static const Proto *lbind_check_proto_of(lua_State *L, int idx)
{
    luaL_checktype(L, idx, LUA_TFUNCTION);
    if (lua_iscfunction(L, idx))
        luaL_argerror(L, idx, "a Lua function is required");
    return clLvalue(s2v(L->ci->func.p + idx))->p;
}

static int lbind_check_globals(lua_State *L)
{
    const Proto *p = lbind_check_proto_of(L, 1);
    lua_Integer n = 0;

    lua_settop(L, 1);
    lua_newtable(L);
    lbind_check_proto(L, p, 2, &n);
    return 1;
}

/* check.fields (uses == 0) and check.uses. */
static int lbind_check_read_all(lua_State *L, int uses)
{
    const Proto *p = lbind_check_proto_of(L, 1);
    lbind_check_state *s;

    lua_settop(L, 1);
    lua_newtable(L);
    s = lua_newuserdatauv(L, sizeof *s, 0); /* (freed by the GC if a push raises) */
    memset(s, 0, sizeof *s);
    s->out = 2;
    lbind_check_walk(L, p, s, uses);
    lua_settop(L, 2);
    return 1;
}

static int lbind_check_fields(lua_State *L)
{
    return lbind_check_read_all(L, 0);
}

static int lbind_check_uses(lua_State *L)
{
    return lbind_check_read_all(L, 1);
}

/* check.entry(path): the kind of the entry itself, a symbolic link not
 * followed (lstat). It blocks: --check's walk of the --crds directories
 * only, where nothing else runs (luaop's own file reads are core.fs's, on
 * the thread pool). */
static int lbind_check_entry(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;

    if (lstat(path, &st) != 0) {
        int err = errno;
        luaL_pushfail(L);
        lua_pushfstring(L, "%s: %s", path, strerror(err));
        return 2;
    }
    lua_pushstring(L, S_ISREG(st.st_mode)   ? "file"
                      : S_ISDIR(st.st_mode) ? "directory"
                      : S_ISLNK(st.st_mode) ? "link"
                                            : "other");
    return 1;
}

static int lbind_check_line(lua_State *L)
{
    lua_Debug ar;

    lbind_check_proto_of(L, 1);
    lua_settop(L, 1);
    lua_pushvalue(L, 1); /* ">" pops it: the one at 1 keeps ar.source alive */
    lua_getinfo(L, ">S", &ar);
    lua_pushinteger(L, ar.linedefined);
    lua_pushstring(L, ar.source);
    return 2;
}

int lbind_check_open(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"globals", lbind_check_globals},
        {"line", lbind_check_line},
        {"fields", lbind_check_fields},
        {"uses", lbind_check_uses},
        {"entry", lbind_check_entry},
        {NULL, NULL},
    };

    luaL_newlib(L, funcs);
    return 1;
}
