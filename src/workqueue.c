/* workqueue.c - the rate-limited work queue of a controller (workqueue.h). */
#include "workqueue.h"

#include "pool.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WQ_BUCKETS 64 /* a new queue's, and an empty one's */

typedef struct wq_item wq_item;
struct wq_item {
    unsigned dirty : 1;      /* wants processing (queued, or again after done) */
    unsigned processing : 1; /* handed out by get, not yet done */
    int failures;            /* rate-limited adds since the last forget */
    double ready_at;         /* when in the delay heap */
    double queued_at;        /* when it last entered the queue (o.clock) */
    double started_at;       /* when get handed it out (o.clock) */
    size_t heap_index;       /* SIZE_MAX when not in the heap */
    wq_item *hnext;          /* hash chain */
    char key[];              /* (one block with the item) */
};

struct workqueue {
    workqueue_opts o;
    pool items; /* apart from the malloc heap: a sync's burst of keys, done,
                 * leaves no holes between the cache's strings (pool.h) */
    double tokens, last;
    wq_item **buckets;
    size_t nbuckets, nitems;
    wq_item **fifo; /* ring of queued items */
    size_t head, count, cap;
    wq_item **heap; /* min-heap on ready_at */
    size_t nheap, capheap;
    size_t processing;
    int shutdown;
    unsigned long adds, retries;
};

/* ---- items by key ------------------------------------------------------- */

static size_t wq_hash(const char *s)
{
    size_t h = 1469598103934665603u;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211u;
    return h;
}

static wq_item *wq_find(const workqueue *q, const char *key)
{
    for (wq_item *it = q->buckets[wq_hash(key) & (q->nbuckets - 1)]; it; it = it->hnext) {
        if (strcmp(it->key, key) == 0)
            return it;
    }
    return NULL;
}

static int wq_grow(workqueue *q)
{
    size_t n = q->nbuckets * 2;
    wq_item **b = calloc(n, sizeof *b);

    if (b == NULL)
        return -1;
    for (size_t i = 0; i < q->nbuckets; i++) {
        for (wq_item *it = q->buckets[i], *next; it; it = next) {
            next = it->hnext;
            size_t j = wq_hash(it->key) & (n - 1);
            it->hnext = b[j];
            b[j] = it;
        }
    }
    free(q->buckets);
    q->buckets = b;
    q->nbuckets = n;
    return 0;
}

static wq_item *wq_get_item(workqueue *q, const char *key)
{
    wq_item *it = wq_find(q, key);

    if (it)
        return it;
    if (q->nitems >= q->nbuckets && wq_grow(q) != 0)
        return NULL;
    size_t len = strlen(key);
    it = pool_alloc(&q->items, sizeof *it + len + 1);
    if (it == NULL)
        return NULL;
    memcpy(it->key, key, len + 1);
    it->heap_index = SIZE_MAX;
    size_t j = wq_hash(key) & (q->nbuckets - 1);
    it->hnext = q->buckets[j];
    q->buckets[j] = it;
    q->nitems++;
    return it;
}

/* A queue with no items gives back what its arrays grew to: a sync's burst
 * of keys must not hold their size for the process's life. */
static void wq_shrink(workqueue *q)
{
    if (q->nbuckets > WQ_BUCKETS) {
        wq_item **b = calloc(WQ_BUCKETS, sizeof *b);
        if (b != NULL) { /* (else the old ones serve on) */
            free(q->buckets);
            q->buckets = b;
            q->nbuckets = WQ_BUCKETS;
        }
    }
    if (q->cap > WQ_BUCKETS) { /* (a small one is kept: no malloc each time a key comes and goes) */
        free(q->fifo);
        q->fifo = NULL;
        q->cap = q->head = 0;
    }
    if (q->capheap > WQ_BUCKETS) {
        free(q->heap);
        q->heap = NULL;
        q->capheap = 0;
    }
}

/* Where the hash chain points at it. */
static wq_item **wq_link(workqueue *q, const wq_item *it)
{
    wq_item **p = &q->buckets[wq_hash(it->key) & (q->nbuckets - 1)];

    while (*p != it)
        p = &(*p)->hnext;
    return p;
}

/* Free an item nothing needs any more. */
static void wq_release(workqueue *q, wq_item *it)
{
    if (it->dirty || it->processing || it->failures > 0 || it->heap_index != SIZE_MAX)
        return;
    *wq_link(q, it) = it->hnext;
    q->nitems--;
    pool_free(&q->items, it);
    if (q->nitems == 0)
        wq_shrink(q);
}

/* An item about to wait out a delay, moved among the pool's long-lived
 * blocks (pool_settle): its hash chain points at it where it is now. Only
 * for an item in neither the FIFO nor the heap. */
static wq_item *wq_settle(workqueue *q, wq_item *it)
{
    wq_item **p = wq_link(q, it);

    *p = pool_settle(&q->items, it, sizeof *it + strlen(it->key) + 1);
    return *p;
}

/* ---- the FIFO --------------------------------------------------------------- */

static int wq_push(workqueue *q, wq_item *it)
{
    if (q->count == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        wq_item **f = malloc(cap * sizeof *f);
        if (f == NULL)
            return -1;
        for (size_t i = 0; i < q->count; i++)
            f[i] = q->fifo[(q->head + i) % q->cap];
        free(q->fifo);
        q->fifo = f;
        q->cap = cap;
        q->head = 0;
    }
    q->fifo[(q->head + q->count++) % q->cap] = it;
    it->queued_at = q->o.clock ? q->o.clock() : 0;
    return 0;
}

/* ---- the delay heap ----------------------------------------------------------- */

static void wq_heap_set(workqueue *q, size_t i, wq_item *it)
{
    q->heap[i] = it;
    it->heap_index = i;
}

static void wq_sift_up(workqueue *q, size_t i)
{
    wq_item *it = q->heap[i];

    while (i > 0 && q->heap[(i - 1) / 2]->ready_at > it->ready_at) {
        wq_heap_set(q, i, q->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    wq_heap_set(q, i, it);
}

static void wq_sift_down(workqueue *q, size_t i)
{
    wq_item *it = q->heap[i];

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->nheap)
            break;
        if (c + 1 < q->nheap && q->heap[c + 1]->ready_at < q->heap[c]->ready_at)
            c++;
        if (q->heap[c]->ready_at >= it->ready_at)
            break;
        wq_heap_set(q, i, q->heap[c]);
        i = c;
    }
    wq_heap_set(q, i, it);
}

static wq_item *wq_heap_pop(workqueue *q)
{
    wq_item *top = q->heap[0];

    top->heap_index = SIZE_MAX;
    if (--q->nheap > 0) {
        q->heap[0] = q->heap[q->nheap];
        wq_sift_down(q, 0);
    }
    return top;
}

/* ---- the queue ------------------------------------------------------------------ */

workqueue *workqueue_new(const workqueue_opts *o, double now)
{
    workqueue *q = calloc(1, sizeof *q);

    if (q == NULL)
        return NULL;
    q->o = *o;
    if (q->o.burst < 1)
        q->o.burst = 1;
    q->tokens = q->o.burst;
    q->last = now;
    q->nbuckets = WQ_BUCKETS;
    q->buckets = calloc(q->nbuckets, sizeof *q->buckets);
    if (q->buckets == NULL) {
        free(q);
        return NULL;
    }
    return q;
}

void workqueue_tune(workqueue *q, const workqueue_opts *o, double now)
{
    int was_on = q->o.qps > 0;

    if (was_on && now > q->last) {
        q->tokens += (now - q->last) * q->o.qps;
        if (q->tokens > q->o.burst)
            q->tokens = q->o.burst;
        q->last = now;
    }
    q->o.base_delay = o->base_delay;
    q->o.max_delay = o->max_delay;
    q->o.qps = o->qps;
    q->o.burst = o->burst < 1 ? 1 : o->burst;
    if (!was_on) {
        q->tokens = q->o.burst;
        q->last = now;
    }
    else if (q->tokens > q->o.burst)
        q->tokens = q->o.burst;
}

void workqueue_free(workqueue *q)
{
    if (q == NULL)
        return;
    for (size_t i = 0; i < q->nbuckets; i++) {
        for (wq_item *it = q->buckets[i], *next; it; it = next) {
            next = it->hnext;
            pool_free(&q->items, it);
        }
    }
    pool_clear(&q->items);
    free(q->buckets);
    free(q->fifo);
    free(q->heap);
    free(q);
}

int workqueue_add(workqueue *q, const char *key)
{
    wq_item *it;

    if (q->shutdown)
        return 0;
    it = wq_get_item(q, key);
    if (it == NULL)
        return -1;
    if (it->dirty)
        return 0; /* already waiting: the adds collapse */
    it->dirty = 1;
    q->adds++;
    if (it->processing)
        return 0; /* queued again when done */
    if (wq_push(q, it) != 0) {
        it->dirty = 0;
        wq_release(q, it);
        return -1;
    }
    return 0;
}

int workqueue_add_after(workqueue *q, const char *key, double delay, double now)
{
    wq_item *it;

    if (q->shutdown)
        return 0;
    if (delay <= 0)
        return workqueue_add(q, key);
    it = wq_get_item(q, key);
    if (it == NULL)
        return -1;
    if (it->heap_index != SIZE_MAX) {
        /* already waiting: keep the earlier time */
        if (now + delay < it->ready_at) {
            it->ready_at = now + delay;
            wq_sift_up(q, it->heap_index);
        }
        return 0;
    }
    if (q->nheap == q->capheap) {
        size_t cap = q->capheap ? q->capheap * 2 : 64;
        wq_item **h = realloc(q->heap, cap * sizeof *h);
        if (h == NULL) {
            wq_release(q, it);
            return -1;
        }
        q->heap = h;
        q->capheap = cap;
    }
    if (!it->dirty) /* (a queued one is in the FIFO too, where it stays) */
        it = wq_settle(q, it);
    it->ready_at = now + delay;
    wq_heap_set(q, q->nheap++, it);
    wq_sift_up(q, it->heap_index);
    return 0;
}

/* The overall bucket, as golang.org/x/time/rate's Reserve: every add takes
 * a token, going into debt; the wait is the time to pay it back. */
static double wq_bucket(workqueue *q, double now)
{
    if (q->o.qps <= 0)
        return 0;
    if (now > q->last) {
        q->tokens += (now - q->last) * q->o.qps;
        if (q->tokens > q->o.burst)
            q->tokens = q->o.burst;
        q->last = now;
    }
    q->tokens -= 1;
    return q->tokens >= 0 ? 0 : -q->tokens / q->o.qps;
}

double workqueue_when(workqueue *q, const char *key, double now)
{
    wq_item *it = wq_get_item(q, key);
    double backoff = q->o.base_delay;

    if (it) {
        int exp = it->failures++;
        backoff = exp > 60 ? q->o.max_delay : q->o.base_delay * ldexp(1.0, exp);
        if (backoff > q->o.max_delay)
            backoff = q->o.max_delay;
    }
    double bucket = wq_bucket(q, now);
    return backoff > bucket ? backoff : bucket;
}

int workqueue_add_rate_limited(workqueue *q, const char *key, double now)
{
    if (q->shutdown)
        return 0;
    q->retries++;
    return workqueue_add_after(q, key, workqueue_when(q, key, now), now);
}

void workqueue_forget(workqueue *q, const char *key)
{
    wq_item *it = wq_find(q, key);

    if (it) {
        it->failures = 0;
        wq_release(q, it);
    }
}

int workqueue_requeues(workqueue *q, const char *key)
{
    wq_item *it = wq_find(q, key);

    return it ? it->failures : 0;
}

void workqueue_tick(workqueue *q, double now)
{
    while (q->nheap > 0 && q->heap[0]->ready_at <= now) {
        wq_item *it = wq_heap_pop(q);
        if (q->shutdown || workqueue_add(q, it->key) != 0)
            wq_release(q, it);
    }
}

double workqueue_next_ready(const workqueue *q)
{
    return q->nheap > 0 ? q->heap[0]->ready_at : -1;
}

const char *workqueue_get(workqueue *q)
{
    wq_item *it;

    if (q->count == 0)
        return NULL;
    it = q->fifo[q->head];
    q->head = (q->head + 1) % q->cap;
    q->count--;
    it->dirty = 0;
    it->processing = 1;
    it->started_at = q->o.clock ? q->o.clock() : 0;
    q->processing++;
    return it->key;
}

int workqueue_times(const workqueue *q, const char *key, double *queued_at, double *started_at)
{
    const wq_item *it = wq_find(q, key);

    if (it == NULL || !it->processing)
        return -1;
    *queued_at = it->queued_at;
    *started_at = it->started_at;
    return 0;
}

void workqueue_done(workqueue *q, const char *key)
{
    wq_item *it = wq_find(q, key);

    if (it == NULL || !it->processing)
        return;
    it->processing = 0;
    q->processing--;
    if (it->dirty) { /* an add came while it was processing */
        if (wq_push(q, it) == 0)
            return;
        it->dirty = 0;
    }
    it->dirty = 0;
    wq_release(q, it);
}

void workqueue_shutdown(workqueue *q)
{
    q->shutdown = 1;
}

int workqueue_shutting_down(const workqueue *q)
{
    return q->shutdown;
}

void workqueue_stats_get(const workqueue *q, workqueue_stats *s)
{
    s->depth = q->count;
    s->waiting = q->nheap;
    s->processing = q->processing;
    s->adds = q->adds;
    s->retries = q->retries;
    s->chunks = pool_chunks(&q->items);
}
