/* metrics.h - a Prometheus registry: counters, gauges and histograms with
 * labels, written in the text exposition format (version 0.0.4).
 *
 * The families are fixed (metrics.c lists them: controller-runtime v0.22's
 * and client-go's names, labels, help texts and buckets, then luaop's own),
 * so a scrape always shows the same names. Series are made on first use of
 * their label values and live as long as the registry. The loop's thread
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

/* The series of family `name` with these label values (as many as the
 * family has labels, in its order), made on first use. NULL with a reason
 * in err: no such family, the wrong number of values, or too many series
 * (METRICS_MAX_SERIES: a bound on memory whatever the label values). */
#define METRICS_MAX_SERIES 10000
metrics_series *metrics_get(metrics *m, const char *name, const char *const *values, size_t nvalues, char *err,
                            size_t errlen);

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
