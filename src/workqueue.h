/* workqueue.h - the rate-limited work queue of a controller, with
 * client-go's util/workqueue guarantees:
 *
 *   - a key is never handed out twice at once: an add while it is being
 *     processed marks it dirty, and it is queued again when done;
 *   - adds of a key already waiting collapse into one;
 *   - delayed adds (requeue-after) keep the earliest time asked;
 *   - rate-limited adds wait the longer of a per-key exponential backoff
 *     (base doubling to max, reset by forget) and an overall token bucket;
 *   - after shutdown nothing new is taken and get() drains what is queued.
 *
 * Time is passed in (seconds on a monotonic clock), so the queue is plain
 * logic: the controller asks workqueue_next_ready when to tick it. */
#ifndef LUAOP_WORKQUEUE_H
#define LUAOP_WORKQUEUE_H

#include <stddef.h>

typedef struct workqueue workqueue;

typedef struct workqueue_opts {
    double base_delay; /* first backoff; client-go: 5 ms */
    double max_delay;  /* client-go: 1000 s */
    double qps;        /* overall bucket; client-go: 10/s, burst 100; <= 0 disables */
    int burst;
    double (*clock)(void); /* NULL, or the clock workqueue_times reads */
} workqueue_opts;

typedef struct workqueue_stats {
    size_t depth;       /* queued, ready to get */
    size_t waiting;     /* delayed, not yet ready */
    size_t processing;
    unsigned long adds; /* adds that queued or delayed a key */
    unsigned long retries; /* rate-limited adds */
    size_t chunks;      /* the items' chunks mapped now (pool.h) */
} workqueue_stats;

/* NULL when out of memory. */
workqueue *workqueue_new(const workqueue_opts *o, double now);
/* New backoff and bucket parameters (o's clock aside), keeping every key,
 * its failures and its time: the bucket is filled at the old rate up to
 * now, then holds at most the new burst (a bucket newly enabled starts
 * full). What waits keeps its time; the next rate-limited add of a key
 * uses the new parameters. */
void workqueue_tune(workqueue *q, const workqueue_opts *o, double now);
void workqueue_free(workqueue *q);

/* 0, or -1 when out of memory. Ignored (0) after shutdown. */
int workqueue_add(workqueue *q, const char *key);
int workqueue_add_after(workqueue *q, const char *key, double delay, double now);
int workqueue_add_rate_limited(workqueue *q, const char *key, double now);

/* How long a rate-limited add of the key waits now, counting it as one more
 * failure (client-go's RateLimiter.When); add_rate_limited uses this. */
double workqueue_when(workqueue *q, const char *key, double now);

/* Stop backing off the key (after a success). */
void workqueue_forget(workqueue *q, const char *key);
int workqueue_requeues(workqueue *q, const char *key);

/* Move delayed keys whose time has come into the queue. */
void workqueue_tick(workqueue *q, double now);

/* When the next delayed key comes due, or a negative number if none. */
double workqueue_next_ready(const workqueue *q);

/* The next key to process (now owned by the caller until workqueue_done),
 * or NULL when none is ready. The string stays valid until done. */
const char *workqueue_get(workqueue *q);
void workqueue_done(workqueue *q, const char *key);

/* For a key being processed (after get, before done), with o.clock: when
 * it last entered the queue and when get handed it out. -1 otherwise. */
int workqueue_times(const workqueue *q, const char *key, double *queued_at, double *started_at);

void workqueue_shutdown(workqueue *q);
int workqueue_shutting_down(const workqueue *q);

void workqueue_stats_get(const workqueue *q, workqueue_stats *s);

#endif
