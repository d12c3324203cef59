/* lbox.h - a byte buffer a Lua call owns: a dbuf in a userdata box.
 *
 * A C function that grows a buffer for a script (JSON text, a log line's
 * values) pushes a box: its memory comes from the state's allocator
 * (lua_getallocf), so a task's memory budget is charged for it, and the box
 * is a to-be-closed slot of the call, so the buffer is freed when the call
 * returns or raises (a memory error, a budget breach), never left to the
 * collector, which does not see the bytes. docs/security.md, "Rules for C
 * bindings". */
#ifndef LUAOP_LBOX_H
#define LUAOP_LBOX_H

#include <lua.h>

#include "dbuf.h"

/* Push a new, empty box, marked to-be-closed at its stack slot, and
 * return its buffer. Remove it only with lua_settop or lua_pop (or let the
 * call return): either frees it. */
dbuf *lbox_push(lua_State *L);

#endif
