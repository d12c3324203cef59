/* metrics.h - a Prometheus registry: counters, gauges and histograms with
 * labels, written in the text exposition format (version 0.0.4).
 *
 * The runtime's families are fixed (metrics.c lists them: controller-runtime
 * v0.22's and client-go's names, labels, help texts and buckets, then
 * luaop's own), so a scrape always shows the same names; scripts' own
 * families (metrics_custom, below) come and go beside them. Series are made on first use of
 * their label values, charged to an owner (metrics_owner: a script, a
 * controller, the informers) or to the runtime itself, and leave the
 * registry when their owner is dropped. The loop's thread
 * updates series and the server's thread writes them: each call takes the
 * registry's lock, so both may call any function here.
 *
 * Two gauges follow work in flight rather than a value (client-go's
 * workqueue_unfinished_work_seconds and
 * workqueue_longest_running_processor_seconds): metrics_inflight_start and
 * _end note when work starts and ends, and a scrape reports the seconds
 * spent so far in all of it, or in the oldest. */
#ifndef LUAOP_METRICS_H
#define LUAOP_METRICS_H

#include <stddef.h>

#include "dbuf.h"

typedef struct metrics metrics;
typedef struct metrics_series metrics_series;

/* NULL when out of memory. */
metrics *metrics_new(void);
void metrics_free(metrics *m);

/* Owners: accounts of series. A series is charged to its owner and to
 * every ancestor of it, each of which may cap how many it holds; dropping
 * an owner takes its series and its descendants' out of the registry (a
 * handle to one still works: its updates go nowhere). The runtime's own
 * series (owner NULL) may use every series of the registry; owned ones
 * together at most METRICS_MAX_SERIES - METRICS_RESERVE, so the runtime
 * always has METRICS_RESERVE of its own whatever the scripts made. */
#define METRICS_MAX_SERIES 10000
#define METRICS_RESERVE 1000
typedef struct metrics_owner metrics_owner;

/* A new owner (a handle to it: metrics_owner_release lets it go), under
 * parent (NULL: none), holding at most cap series with its descendants'
 * (0: no cap of its own). NULL when out of memory. */
metrics_owner *metrics_owner_new(metrics *m, metrics_owner *parent, const char *name, size_t cap);
/* Its series and its descendants' leave the registry; no more are made
 * for them. */
void metrics_owner_drop(metrics *m, metrics_owner *o);
/* The series it holds now (its descendants' included). */
size_t metrics_owner_count(metrics *m, metrics_owner *o);
void metrics_owner_release(metrics *m, metrics_owner *o);

/* The series of family `name` with these label values (as many as the
 * family has labels, in its order), made on first use and charged to
 * owner (NULL: the runtime's own); one that exists already is shared, and
 * stays charged to whoever made it. A handle: metrics_release lets it go.
 * NULL with a reason in err: no such family, the wrong number of values,
 * an owner dropped or at a cap, or too many series (a bound on memory
 * whatever the label values). */
metrics_series *metrics_get(metrics *m, metrics_owner *owner, const char *name, const char *const *values,
                            size_t nvalues, char *err, size_t errlen);
void metrics_release(metrics *m, metrics_series *s);
/* Whether s is in the registry still (its owner not dropped). */
int metrics_linked(metrics *m, metrics_series *s);
/* The number of labels of family `name`, or -1 when there is none. */
int metrics_family_labels(const char *name);

/* Families of a script's own (luaop.metrics): made by a declaration,
 * shown in /metrics beside the runtime's once metrics_custom_show took
 * their name, gone with metrics_custom_remove. A new one is not shown:
 * its series are made and charged as any (so a script's top level may
 * update what it declares), and show with it. Names, label names and
 * buckets are checked here as the text format needs them (Prometheus's
 * characters, no label le on a histogram, buckets finite and
 * increasing); luaop.metrics checks promtool's lint rules on top. */
#define METRICS_MAX_LABELS 10
#define METRICS_MAX_BUCKETS 64
typedef struct metrics_custom metrics_custom;

/* type: "counter", "gauge" or "histogram" (buckets: its upper bounds, the
 * +Inf one implied). A handle: metrics_custom_release lets it go. NULL
 * with a reason in err. */
metrics_custom *metrics_custom_new(metrics *m, const char *name, const char *help, const char *type,
                                   const char *const *labels, size_t nlabels, const double *buckets,
                                   size_t nbuckets, char *err, size_t errlen);
/* Show it in /metrics: 0, or -1 with a reason in err when a family of its
 * name is shown already (the runtime's or another custom one) or it is
 * gone. Showing a shown one is 0. */
int metrics_custom_show(metrics *m, metrics_custom *c, char *err, size_t errlen);
int metrics_custom_shown(metrics *m, metrics_custom *c);
/* Its series leave the registry, it leaves /metrics, and no more series
 * are made for it (handles to them still work: their updates go nowhere). */
void metrics_custom_remove(metrics *m, metrics_custom *c);
void metrics_custom_release(metrics *m, metrics_custom *c);
/* As metrics_get, for a custom family; NULL (with the reason) once it is
 * gone. */
metrics_series *metrics_custom_get(metrics *m, metrics_custom *c, metrics_owner *owner, const char *const *values,
                                   size_t nvalues, char *err, size_t errlen);

/* The series in the registry now. */
size_t metrics_count(metrics *m);

/* Counters and gauges: add (a counter never goes down: a negative n is
 * ignored), set (gauges). Histograms: observe. */
void metrics_add(metrics *m, metrics_series *s, double n);
void metrics_set(metrics *m, metrics_series *s, double v);
void metrics_observe(metrics *m, metrics_series *s, double v);
double metrics_value(metrics *m, metrics_series *s); /* counters and gauges; a histogram's count */

/* In-flight gauges: work started at `t` (monotonic seconds), and the work
 * that started at `started` ended. 0, or -1 when out of memory. */
int metrics_inflight_start(metrics *m, metrics_series *s, double t);
void metrics_inflight_end(metrics *m, metrics_series *s, double started);

/* The whole registry in the text format, appended to out, then the
 * process's own (process_* : CPU, memory, file descriptors, start time).
 * In-flight gauges are measured at `now` (monotonic seconds). 0, or -1
 * when out of memory. */
int metrics_write(metrics *m, double now, dbuf *out);

/* The families' names and label names, one line each ("name label,label"),
 * as the docs and specs compare them with controller-runtime's. */
int metrics_names(dbuf *out);

/* Monotonic seconds, the clock in-flight gauges use. */
double metrics_now(void);

#endif
