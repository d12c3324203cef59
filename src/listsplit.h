/* listsplit.h - a Kubernetes list's items taken from its JSON as it
 * arrives: a LIST's answer read as a stream, each item handed over whole
 * as soon as its last byte came, instead of the whole answer buffered and
 * then decoded.
 *
 * The answer is one JSON object ({"kind":..., "metadata":{...},
 * "items":[{...}, ...]}). Whatever is not an item of the top level's
 * "items" array (its envelope) is kept, with "items" left an empty array,
 * for listsplit_envelope once the answer ended (an answer without that
 * array is no list: a Status, or a page no API server sends, read as no
 * items, would empty a cache). Each item must be an
 * object; the splitter follows only the JSON's nesting and strings (each
 * item is checked whole by whoever decodes it), and keeps at most one item
 * begun in an earlier chunk. A malformed answer (not an object, an item
 * that is not one, bytes after the end, an item longer than
 * LISTSPLIT_MAX_ITEM, an envelope longer than LISTSPLIT_MAX_ENVELOPE) ends
 * the split with an error that says which. */
#ifndef LUAOP_LISTSPLIT_H
#define LUAOP_LISTSPLIT_H

#include <stddef.h>

#include "dbuf.h"

/* The longest item read: the watch's longest event (lbind_watch.c). */
#define LISTSPLIT_MAX_ITEM (16u * 1024 * 1024)
/* The most bytes of a list that are not items (its kind, apiVersion and
 * metadata: some hundred bytes from an API server). */
#define LISTSPLIT_MAX_ENVELOPE (1024u * 1024)

enum listsplit_error {
    LISTSPLIT_OK = 0,
    LISTSPLIT_MALFORMED,  /* not a list this reads; error says why */
    LISTSPLIT_TOO_LARGE,  /* an item or the envelope past its limit */
    LISTSPLIT_NO_MEMORY,
    LISTSPLIT_REFUSED,    /* the item callback failed */
};

/* An item's JSON, its len bytes (valid for the call only); 0 to go on. */
typedef int (*listsplit_item_fn)(const char *item, size_t len, void *ud);

typedef struct listsplit {
    int state;
    int depth;          /* nesting in the envelope, or in the item being read */
    int in_str, esc;    /* inside a string, after its backslash */
    int want_items;     /* the top level's "items": seen, its value next */
    int need_comma;     /* between items: an item was read */
    int had_items;      /* the top level's "items" array was read */
    size_t key_start;   /* where the last string at the top level began in env */
    size_t item_len;    /* bytes of the item being read */
    dbuf env;           /* the envelope */
    dbuf item;          /* an item begun in an earlier chunk */
    enum listsplit_error err;
    const char *error;  /* static: why it stopped */
} listsplit;

/* Zero-initialised is ready too. */
void listsplit_init(listsplit *s);

/* The next len bytes of the answer: every item they end handed to fn.
 * LISTSPLIT_OK, or why the split stopped (then every later call returns
 * the same, and s->error says why). */
enum listsplit_error listsplit_feed(listsplit *s, const char *data, size_t len, listsplit_item_fn fn, void *ud);

/* The answer ended: LISTSPLIT_OK when it ended where the list did, its
 * items array read (the envelope whole: listsplit_envelope), else
 * LISTSPLIT_MALFORMED. */
enum listsplit_error listsplit_finish(listsplit *s);

/* The envelope after a successful finish (NUL-terminated), its length in
 * *len. */
const char *listsplit_envelope(const listsplit *s, size_t *len);

void listsplit_free(listsplit *s);

#endif
