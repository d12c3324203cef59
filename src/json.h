/* json.h - JSON <-> Lua values, exact for Kubernetes objects.
 *
 * Objects decode to plain tables; arrays to tables with the metatable
 * JSON_ARRAY_MT, so an empty array stays an array; null to the light userdata
 * json_null (absent keys are nil). Integers that fit in 64 bits decode to Lua
 * integers, so int64 values beyond 2^53 survive; other numbers to floats.
 *
 * Encoding is the inverse: a table with JSON_ARRAY_MT or a non-empty sequence
 * is an array, any other table (including an empty one) an object. */
#ifndef LUAOP_JSON_H
#define LUAOP_JSON_H

#include <stddef.h>

#include <lua.h>

#include "dbuf.h"

#define JSON_ARRAY_MT "luaop.json.array"
#define JSON_MAX_DEPTH 10240

/* The value JSON null decodes to, and encodes from. */
#define json_null ((void *)0)

/* Decode `len` bytes at `s` and push the value. Returns 1 on success; on
 * malformed input pushes nothing, writes a message naming the byte offset to
 * `err` (size `errlen`) and returns 0. Raises only on memory errors. */
int json_decode(lua_State *L, const char *s, size_t len, char *err, size_t errlen);

/* Whether json_decode would decode the `len` bytes at `s`: the same walk
 * and the same errors (written to `err` as json_decode's), building and
 * pushing nothing (a long number is parsed from a Lua string made and
 * dropped). An informer's watch checks an event's object so, and decodes
 * only what its handlers read. */
int json_check(lua_State *L, const char *s, size_t len, char *err, size_t errlen);

/* Push the value at the path keys[0..nkeys) of the object in `len` bytes at
 * `s` (member keys[0], its member keys[1], ...), or nil when there is none,
 * decoding only that value: everything else is skipped, not built (the
 * continue token of a page of a LIST, ahead of its items; the name of an
 * object that does not decode). Returns 1; on input it cannot walk pushes
 * nothing, writes a message to `err` and returns 0. It checks less than
 * json_decode: a 1 is no promise that the whole text is valid JSON. */
int json_peek(lua_State *L, const char *s, size_t len, const char *const *keys, int nkeys, char *err,
              size_t errlen);

/* Decode an object (a page of a LIST) whose member `key` (its items) is an
 * array, item by item: an item that does not decode is left out of the
 * array. Pushes the page, then a table of the items left out, each
 * {index =, error =, text =}. Returns 1; on input whose shape it cannot
 * walk pushes nothing, writes a message to `err` and returns 0. */
int json_decode_page(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen);

/* The same, leaving out silently each item for which keep(item's text,
 * its length, ud) is 0 (never decoding it); *dropped counts them. */
int json_decode_page_kept(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen,
                          int (*keep)(const char *item, size_t n, void *ud), void *ud, size_t *dropped);

/* What json_decode_page_with does with each item, given its text: push
 * its value and return 1; write a message to err and return 0 (it is left
 * out and named among the skipped, pushing nothing); return -1 to leave it
 * out silently, counted in *dropped (pushing nothing). It may leave the
 * stack above what it pushed as it found it only. */
typedef int (*json_page_item)(lua_State *L, const char *item, size_t n, void *ud, char *err, size_t errlen);

/* The same, each item as item says (json_decode_page_kept's is keep, then
 * json_decode). */
int json_decode_page_with(lua_State *L, const char *s, size_t len, const char *key, char *err, size_t errlen,
                          json_page_item item, void *ud, size_t *dropped);

/* The end of the JSON value at p (after leading space), checking only what
 * finding it needs (quotes, escapes, balanced brackets); NULL when there is
 * none before end: *at then points where it failed and *why says why (NULL:
 * the bracket at *at was not expected). */
const char *json_scan_skip(const char *p, const char *end, const char **at, const char **why);

/* The string at the path keys[0..nkeys) of the object in `len` bytes at s,
 * without decoding anything: 1 and *v, *vlen its bytes, when it is a string
 * written without escapes; 0 when there is none such (absent, a non-object
 * on the way, not a string, escapes in it or in a key of an object on the
 * way, which might decode to the key sought); -1 when the text cannot be walked
 * (not an object, unbalanced). Each object on the path is walked to its
 * end, and the last of a key given twice counts, as when decoding. */
int json_scan_string(const char *s, size_t len, const char *const *keys, int nkeys, const char **v, size_t *vlen);

/* The value of member `key` of the object in `len` bytes at s, as text:
 * 1 and *v, *vlen its bytes (the last, when given twice); 0 when absent or
 * when a key of the object is written with escapes (it might decode to
 * key); -1 when the text cannot be walked or has anything but space after
 * the object. */
int json_scan_member(const char *s, size_t len, const char *key, const char **v, size_t *vlen);
/* What json_scan_cut keeps of an object: its members named by kids (a
 * node each) kept, the others cut, when keep; else those named cut, the
 * others kept. A member named by a node with kids is an object whose
 * members that node says the same of (a value that is no object is taken
 * as a whole); one named by a node without kids is taken or cut whole.
 * key: the member's name (none at the root). */
typedef struct json_cut {
    const char *key;
    const struct json_cut *kids;
    int nkids;
    int keep;
} json_cut;
/* Copy the object at p (after leading space) to *out as node says,
 * compactly between members (values are copied as written); *out is left
 * after what was written, which is never longer than the object's text.
 * Returns the end of the object in the input, or NULL with *why when it
 * cannot be walked, or a key on the way is written with escapes (it might
 * decode to a key named: only the decoder reads it right). Recursion is
 * as deep as node's tree, never as the text. */
const char *json_scan_cut(const char *p, const char *end, const json_cut *node, char **out, const char **why);
/* Append the encoding of the value at `idx` to `b`. Returns 1 on success; on
 * a value JSON cannot hold writes a message naming where it is to `err` and
 * returns 0. Raises on memory errors, and when the running task's budget is
 * spent or the watchdog interrupted it (each value is charged as it is
 * written, charge.h): keep `b` where a __gc frees it. */
int json_encode(lua_State *L, int idx, dbuf *b, char *err, size_t errlen);

/* The same, writing "[redacted]" for the value of every object member whose
 * key `redact` says is secret, at any depth (for logs). */
int json_encode_redacted(lua_State *L, int idx, dbuf *b, char *err, size_t errlen,
                         int (*redact)(const char *key));

/* Push the array metatable (created on first use). */
void json_push_array_mt(lua_State *L);

#endif
