/* metrics.c - a Prometheus registry (see metrics.h). */
#include "metrics.h"
#include "metrics_private.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* controller-runtime v0.22: pkg/internal/controller/metrics */
static const double metrics_reconcile_buckets[] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60};
/* pkg/internal/metrics/workqueue.go: prometheus.ExponentialBuckets(10e-9, 10, 12) */
static const double metrics_workqueue_buckets[] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3,
                                                   1e-2, 1e-1, 1,    10,   100,  1000};
/* client_golang's prometheus.DefBuckets */
static const double metrics_default_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define METRICS_N(a) ((int)(sizeof a / sizeof a[0]))

static const metrics_family metrics_families[] = {
    {"controller_runtime_reconcile_total", "Total number of reconciliations per controller", METRICS_COUNTER,
     {"controller", "result"}, NULL, 0, 0},
    {"controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller",
     METRICS_COUNTER, {"controller"}, NULL, 0, 0},
    {"controller_runtime_terminal_reconcile_errors_total",
     "Total number of terminal reconciliation errors per controller", METRICS_COUNTER, {"controller"}, NULL, 0, 0},
    {"controller_runtime_reconcile_panics_total", "Total number of reconciliation panics per controller",
     METRICS_COUNTER, {"controller"}, NULL, 0, 0},
    {"controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
     METRICS_HISTOGRAM, {"controller"}, metrics_reconcile_buckets, METRICS_N(metrics_reconcile_buckets), 0},
    {"controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent reconciles per controller",
     METRICS_GAUGE, {"controller"}, NULL, 0, 0},
    {"controller_runtime_active_workers", "Number of currently used workers per controller", METRICS_GAUGE,
     {"controller"}, NULL, 0, 0},
    {"workqueue_depth", "Current depth of workqueue by workqueue and priority", METRICS_GAUGE,
     {"name", "controller", "priority"}, NULL, 0, 0},
    {"workqueue_adds_total", "Total number of adds handled by workqueue", METRICS_COUNTER, {"name", "controller"},
     NULL, 0, 0},
    {"workqueue_queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested",
     METRICS_HISTOGRAM, {"name", "controller"}, metrics_workqueue_buckets, METRICS_N(metrics_workqueue_buckets), 0},
    {"workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes.",
     METRICS_HISTOGRAM, {"name", "controller"}, metrics_workqueue_buckets, METRICS_N(metrics_workqueue_buckets), 0},
    {"workqueue_unfinished_work_seconds",
     "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. "
     "Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at "
     "which this increases.",
     METRICS_INFLIGHT_SUM, {"name", "controller"}, NULL, 0, 0},
    {"workqueue_longest_running_processor_seconds",
     "How many seconds has the longest running processor for workqueue been running.", METRICS_INFLIGHT_MAX,
     {"name", "controller"}, NULL, 0, 0},
    {"workqueue_retries_total", "Total number of retries handled by workqueue", METRICS_COUNTER,
     {"name", "controller"}, NULL, 0, 0},
    /* pkg/webhook/internal/metrics: labelled by the webhook's path */
    {"controller_runtime_webhook_latency_seconds", "Histogram of the latency of processing admission requests",
     METRICS_HISTOGRAM, {"webhook"}, metrics_default_buckets, METRICS_N(metrics_default_buckets), 0},
    {"controller_runtime_webhook_requests_total", "Total number of admission requests by HTTP status code.",
     METRICS_COUNTER, {"webhook", "code"}, NULL, 0, 0},
    {"controller_runtime_webhook_requests_in_flight", "Current number of admission requests being served.",
     METRICS_GAUGE, {"webhook"}, NULL, 0, 0},
    /* pkg/metrics/client_go_adapter.go */
    {"rest_client_requests_total", "Number of HTTP requests, partitioned by status code, method, and host.",
     METRICS_COUNTER, {"code", "method", "host"}, NULL, 0, 0},
    /* pkg/metrics/leaderelection.go */
    {"leader_election_master_status",
     "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. "
     "'name' is the string used to identify the lease. Please make sure to group by name.",
     METRICS_GAUGE, {"name"}, NULL, 0, 0},
    {"leader_election_slowpath_total",
     "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the "
     "lease. Please make sure to group by name.",
     METRICS_COUNTER, {"name"}, NULL, 0, 0},
    /* luaop's own */
    {"luaop_script_reloads_total", "Script loads after the first, per script and result (success, error)",
     METRICS_COUNTER, {"script", "result"}, NULL, 0, 0},
    {"luaop_cache_objects", "Objects in the informer caches, per resource and namespace (\"\" for all)",
     METRICS_GAUGE, {"resource", "namespace"}, NULL, 0, 0},
    {"luaop_budget_exceeded_total",
     "Reconciles stopped at a budget, per controller and budget (instructions, memory, pattern, watchdog)",
     METRICS_COUNTER, {"controller", "budget"}, NULL, 0, 0},
    {"luaop_informer_relists_total",
     "Full LISTs or streamed syncs of an informer after its first, per resource and namespace (\"\" for all)",
     METRICS_COUNTER, {"resource", "namespace"}, NULL, 0, 0},
    {"luaop_watch_failures_total",
     "Informer lists and watches that ended in an error, per resource, namespace and reason (Expired, "
     "MalformedEvent, FrameTooLarge, NoInitialEventsEnd, TooManyRequests, Transport, Status)",
     METRICS_COUNTER, {"resource", "namespace", "reason"}, NULL, 0, 0},
    {"luaop_rest_client_retries_total",
     "Requests the API server answered 429, or 5xx with Retry-After, and luaop sent again after the wait it asked "
     "for, per method",
     METRICS_COUNTER, {"method"}, NULL, 0, 0},
    {"luaop_task_restarts_total",
     "Runtime tasks that failed, or returned before their end, and were started again, per task (informer, "
     "dispatcher, worker, resyncer, elector, reloader, collector)",
     METRICS_COUNTER, {"task"}, NULL, 0, 0},
    {"luaop_decode_errors_total", "Objects the API server sent that could not be decoded, per resource",
     METRICS_COUNTER, {"resource"}, NULL, 0, 0},
    {"luaop_watch_malformed_events_total",
     "Watch events that are not JSON, of an unknown type, without an object and its metadata, or longer than 16 MiB, "
     "per resource (each ends its watch)",
     METRICS_COUNTER, {"resource"}, NULL, 0, 0},
    {"luaop_script_series_dropped_total",
     "Updates of a script's own metrics (luaop.metrics) dropped because they would make a series past the script's "
     "cap, per script",
     METRICS_COUNTER, {"script"}, NULL, 0, 0},
    /* sharding (docs/sharding.md) */
    {"luaop_shard_members", "Members of the shard ring this replica counts as live, per ring", METRICS_GAUGE,
     {"ring"}, NULL, 0, 0},
    {"luaop_shard_share", "Fraction of the hash space this replica holds (0 to 1), per ring", METRICS_GAUGE,
     {"ring"}, NULL, 0, 0},
    {"luaop_shard_ranges", "Ranges of the hash space this replica holds, per ring", METRICS_GAUGE, {"ring"}, NULL, 0,
     0},
    {"luaop_shard_handovers_total",
     "Ranges this replica took over (acquired) or gave up (released), and claims it withdrew (conflict), per ring",
     METRICS_COUNTER, {"ring", "event"}, NULL, 0, 0},
    {"luaop_shard_keys_dropped_total", "Keys a worker took and dropped because this replica does not hold their "
     "shard, per controller", METRICS_COUNTER, {"controller"}, NULL, 0, 0},
    {"luaop_shard_informer_mode",
     "1 for the way each sharded informer filters (server: the API server applies the shardSelector; client: "
     "luaop filters), per resource and namespace",
     METRICS_GAUGE, {"resource", "namespace", "mode"}, NULL, 0, 0},
    {"luaop_shard_objects_filtered_total",
     "Objects a sharded informer received and left out because their namespace hashes outside this replica's "
     "ranges (the API server did not apply the shardSelector), per resource",
     METRICS_COUNTER, {"resource"}, NULL, 0, 0},
};
_Static_assert(METRICS_N(metrics_families) == METRICS_NFAMILIES, "METRICS_NFAMILIES (metrics_private.h) counts the families");

double metrics_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

metrics *metrics_new(void)
{
    metrics *m = calloc(1, sizeof *m);

    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    for (int i = 0; i < METRICS_NFAMILIES; i++)
        m->tail[i] = &m->series[i];
    m->custom_tail = &m->custom;
    return m;
}

static void metrics_series_free(metrics_series *s, int nlabels)
{
    for (int i = 0; i < nlabels; i++)
        free(s->values[i]);
    free(s->values);
    free(s->buckets);
    free(s->starts);
    free(s);
}

int metrics_nlabels(const metrics_family *f)
{
    int n = 0;

    while (n < METRICS_MAX_LABELS && f->labels[n])
        n++;
    return n;
}

static void metrics_owner_unref(metrics_owner *o)
{
    while (o && --o->refs == 0) {
        metrics_owner *parent = o->parent;
        free(o->name);
        free(o);
        o = parent;
    }
}

void metrics_custom_unref(metrics_custom *c)
{
    if (--c->refs > 0)
        return;
    for (int i = 0; i < METRICS_MAX_LABELS + 2; i++)
        free(c->strings[i]);
    free(c->buckets);
    free(c);
}

/* A reference to s let go (under the lock): freed with the last. */
static void metrics_series_unref(metrics_series *s)
{
    const metrics_family *f = s->family;

    if (--s->refs > 0)
        return;
    metrics_owner_unref(s->owner);
    metrics_series_free(s, metrics_nlabels(f));
    if (f->custom)
        metrics_custom_unref((metrics_custom *)f);
}

/* The registry's series go with it, held by a handle or not: no handle
 * may be used after (the runtime frees it after its Lua state). */
void metrics_free(metrics *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < METRICS_NFAMILIES; i++) {
        metrics_series *s = m->series[i], *next;
        for (; s; s = next) {
            next = s->next;
            s->refs = 1;
            metrics_series_unref(s);
        }
    }
    for (metrics_custom *c = m->custom, *next; c; c = next) {
        metrics_series *s = c->series, *snext;
        next = c->next;
        for (; s; s = snext) {
            snext = s->next;
            metrics_owner_unref(s->owner);
            metrics_series_free(s, metrics_nlabels(&c->f));
        }
        c->refs = 1;
        metrics_custom_unref(c);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

metrics_owner *metrics_owner_new(metrics *m, metrics_owner *parent, const char *name, size_t cap)
{
    metrics_owner *o = calloc(1, sizeof *o);

    if (o == NULL || (o->name = strdup(name ? name : "")) == NULL) {
        free(o);
        return NULL;
    }
    o->cap = cap;
    o->refs = 1;
    pthread_mutex_lock(&m->lock);
    if (parent) {
        parent->refs++;
        o->parent = parent;
    }
    pthread_mutex_unlock(&m->lock);
    return o;
}

/* Whether owner o is a or one of a's descendants. */
static int metrics_owned_by(const metrics_owner *o, const metrics_owner *a)
{
    for (; o; o = o->parent) {
        if (o == a)
            return 1;
    }
    return 0;
}

/* Take s out of the registry (under the lock), uncharged. */
static void metrics_unlink(metrics *m, metrics_series *s)
{
    s->next = NULL;
    s->linked = 0;
    for (metrics_owner *a = s->owner; a; a = a->parent)
        a->n--;
    m->nseries--;
    if (s->owner)
        m->nowned--;
    metrics_series_unref(s);
}

/* The series of one list that o (NULL: every one) holds leave it. */
void metrics_drop_from(metrics *m, metrics_series **head, metrics_series ***tail, const metrics_owner *o)
{
    metrics_series **p = head;

    *tail = head;
    while (*p) {
        metrics_series *s = *p;
        if (o == NULL || (s->owner && metrics_owned_by(s->owner, o))) {
            *p = s->next;
            metrics_unlink(m, s);
        } else {
            p = &s->next;
            *tail = p;
        }
    }
}

void metrics_owner_drop(metrics *m, metrics_owner *o)
{
    pthread_mutex_lock(&m->lock);
    o->dropped = 1;
    for (int i = 0; i < METRICS_NFAMILIES; i++)
        metrics_drop_from(m, &m->series[i], &m->tail[i], o);
    for (metrics_custom *c = m->custom; c; c = c->next)
        metrics_drop_from(m, &c->series, &c->tail, o);
    pthread_mutex_unlock(&m->lock);
}

size_t metrics_owner_count(metrics *m, metrics_owner *o)
{
    size_t n;

    pthread_mutex_lock(&m->lock);
    n = o->n;
    pthread_mutex_unlock(&m->lock);
    return n;
}

void metrics_owner_release(metrics *m, metrics_owner *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    metrics_owner_unref(o);
    pthread_mutex_unlock(&m->lock);
}

void metrics_release(metrics *m, metrics_series *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    metrics_series_unref(s);
    pthread_mutex_unlock(&m->lock);
}

int metrics_linked(metrics *m, metrics_series *s)
{
    int r;

    pthread_mutex_lock(&m->lock);
    r = s->linked;
    pthread_mutex_unlock(&m->lock);
    return r;
}

size_t metrics_count(metrics *m)
{
    size_t n;

    pthread_mutex_lock(&m->lock);
    n = m->nseries;
    pthread_mutex_unlock(&m->lock);
    return n;
}

/* Why owner o (NULL: the runtime) may not have one more series: NULL when
 * it may. Under the lock. */
static const char *metrics_refusal(const metrics *m, const metrics_owner *o, char *err, size_t errlen)
{
    if (o == NULL) {
        if (m->nseries < METRICS_MAX_SERIES)
            return NULL;
        snprintf(err, errlen, "too many metric series (%d)", METRICS_MAX_SERIES);
        return err;
    }
    for (const metrics_owner *a = o; a; a = a->parent) {
        if (a->dropped) {
            snprintf(err, errlen, "the metric series of %s were dropped", a->name);
            return err;
        }
        if (a->cap && a->n >= a->cap) {
            snprintf(err, errlen, "%s holds %zu metric series, its cap", a->name, a->cap);
            return err;
        }
    }
    if (m->nowned >= METRICS_MAX_SERIES - METRICS_RESERVE || m->nseries >= METRICS_MAX_SERIES) {
        snprintf(err, errlen, "too many metric series (%d, and %d kept for the runtime's own)", METRICS_MAX_SERIES,
                 METRICS_RESERVE);
        return err;
    }
    return NULL;
}

int metrics_family_index(const char *name)
{
    for (int i = 0; i < METRICS_NFAMILIES; i++) {
        if (strcmp(metrics_families[i].name, name) == 0)
            return i;
    }
    return -1;
}

int metrics_family_labels(const char *name)
{
    int fi = metrics_family_index(name);

    return fi < 0 ? -1 : metrics_nlabels(&metrics_families[fi]);
}

static metrics_series *metrics_series_new(const metrics_family *f, const char *const *values, int n)
{
    metrics_series *s = calloc(1, sizeof *s);

    if (s == NULL)
        return NULL;
    s->family = f;
    s->values = calloc((size_t)n + 1, sizeof *s->values);
    if (s->values == NULL)
        goto fail;
    for (int i = 0; i < n; i++) {
        if ((s->values[i] = strdup(values[i] ? values[i] : "")) == NULL)
            goto fail;
    }
    if (f->type == METRICS_HISTOGRAM && (s->buckets = calloc((size_t)f->nbuckets, sizeof *s->buckets)) == NULL)
        goto fail;
    return s;
fail:
    metrics_series_free(s, s->values ? n : 0);
    return NULL;
}

/* The series of family f, in the list at head, with these values: found
 * or made (under the lock). */
metrics_series *metrics_get_in(metrics *m, metrics_owner *owner, const metrics_family *f, metrics_series **head,
                                      metrics_series ***tail, const char *const *values, int n, char *err,
                                      size_t errlen)
{
    metrics_series *s;

    for (s = *head; s; s = s->next) {
        int i = 0;
        while (i < n && strcmp(s->values[i], values[i] ? values[i] : "") == 0)
            i++;
        if (i == n)
            break;
    }
    if (s) {
        s->refs++;
    } else if (metrics_refusal(m, owner, err, errlen) == NULL) {
        if ((s = metrics_series_new(f, values, n)) == NULL) {
            snprintf(err, errlen, "not enough memory");
        } else {
            **tail = s;
            *tail = &s->next;
            s->linked = 1;
            s->refs = 2; /* the registry's and the caller's */
            s->owner = owner;
            if (f->custom)
                ((metrics_custom *)f)->refs++; /* its family lives as long as it does */
            m->nseries++;
            if (owner) {
                owner->refs++;
                m->nowned++;
                for (metrics_owner *a = owner; a; a = a->parent)
                    a->n++;
            }
        }
    }
    return s;
}

metrics_series *metrics_get(metrics *m, metrics_owner *owner, const char *name, const char *const *values,
                            size_t nvalues, char *err, size_t errlen)
{
    int fi = metrics_family_index(name);
    const metrics_family *f;
    metrics_series *s;
    int n;

    if (fi < 0) {
        snprintf(err, errlen, "no metric named %s", name);
        return NULL;
    }
    f = &metrics_families[fi];
    n = metrics_nlabels(f);
    if (nvalues != (size_t)n) {
        snprintf(err, errlen, "%s has %d label%s, not %zu", name, n, n == 1 ? "" : "s", nvalues);
        return NULL;
    }
    pthread_mutex_lock(&m->lock);
    s = metrics_get_in(m, owner, f, &m->series[fi], &m->tail[fi], values, n, err, errlen);
    pthread_mutex_unlock(&m->lock);
    return s;
}

void metrics_add(metrics *m, metrics_series *s, double n)
{
    pthread_mutex_lock(&m->lock);
    s->value += n;
    pthread_mutex_unlock(&m->lock);
}

void metrics_set(metrics *m, metrics_series *s, double v)
{
    pthread_mutex_lock(&m->lock);
    s->value = v;
    pthread_mutex_unlock(&m->lock);
}

double metrics_value(metrics *m, metrics_series *s)
{
    double v;

    pthread_mutex_lock(&m->lock);
    v = s->buckets ? (double)s->count : s->value;
    pthread_mutex_unlock(&m->lock);
    return v;
}

void metrics_observe(metrics *m, metrics_series *s, double v)
{
    pthread_mutex_lock(&m->lock);
    if (s->buckets && !isnan(v)) {
        const metrics_family *f = s->family;
        int i = 0;
        while (i < f->nbuckets && v > f->buckets[i])
            i++;
        if (i < f->nbuckets)
            s->buckets[i]++;
        s->count++;
        s->value += v;
    }
    pthread_mutex_unlock(&m->lock);
}

int metrics_inflight_start(metrics *m, metrics_series *s, double t)
{
    int r = 0;

    pthread_mutex_lock(&m->lock);
    if (s->nstarts == s->capstarts) {
        size_t cap = s->capstarts ? s->capstarts * 2 : 8;
        double *p = realloc(s->starts, cap * sizeof *p);
        if (p == NULL)
            r = -1;
        else {
            s->starts = p;
            s->capstarts = cap;
        }
    }
    if (r == 0)
        s->starts[s->nstarts++] = t;
    pthread_mutex_unlock(&m->lock);
    return r;
}

void metrics_inflight_end(metrics *m, metrics_series *s, double started)
{
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < s->nstarts; i++) {
        if (s->starts[i] == started) {
            s->starts[i] = s->starts[--s->nstarts];
            break;
        }
    }
    pthread_mutex_unlock(&m->lock);
}

/* ---- the text format ---------------------------------------------------- */

/* A number as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it (the
 * Prometheus client's text format does): the fewest digits that read back
 * as v, in exponent form when the exponent is below -4 or 6 and above;
 * +Inf, -Inf, NaN. */
static int metrics_number(dbuf *out, double v)
{
    char buf[48];
    int p, exp;

    if (isnan(v))
        return dbuf_printf(out, "NaN");
    if (isinf(v))
        return dbuf_printf(out, v > 0 ? "+Inf" : "-Inf");
    if (v == 0)
        return dbuf_printf(out, "0");
    for (p = 1; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    exp = atoi(strchr(buf, 'e') + 1);
    if (exp < -4 || exp >= 6)
        return dbuf_printf(out, "%s", buf);
    return dbuf_printf(out, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, v);
}

/* A label value with \, " and newline escaped. */
static int metrics_label_value(dbuf *out, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
        if (e ? dbuf_printf(out, "%s", e) : dbuf_append(out, s, 1))
            return -1;
    }
    return 0;
}

/* {a="x",b="y"[,le="..."]} */
static int metrics_labels(dbuf *out, const metrics_family *f, const metrics_series *s, const double *le)
{
    int n = metrics_nlabels(f), r = 0;

    if (n == 0 && le == NULL)
        return 0;
    r |= dbuf_append(out, "{", 1);
    for (int i = 0; i < n; i++) {
        r |= dbuf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
        r |= metrics_label_value(out, s->values[i]);
        r |= dbuf_append(out, "\"", 1);
    }
    if (le) {
        r |= dbuf_printf(out, "%sle=\"", n ? "," : "");
        r |= metrics_number(out, *le);
        r |= dbuf_append(out, "\"", 1);
    }
    r |= dbuf_append(out, "}", 1);
    return r ? -1 : 0;
}

/* HELP and TYPE; in the help text \\ and newline escaped (a script's may
 * hold them). */
static int metrics_help(dbuf *out, const char *name, const char *help, const char *type)
{
    int r = dbuf_printf(out, "# HELP %s ", name);

    for (const char *p = help; *p && r == 0; p++) {
        const char *e = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : NULL;
        r = e ? dbuf_printf(out, "%s", e) : dbuf_append(out, p, 1);
    }
    return r ? -1 : dbuf_printf(out, "\n# TYPE %s %s\n", name, type);
}

static int metrics_write_family(dbuf *out, const metrics_family *f, const metrics_series *first, double now)
{
    static const char *const types[] = {"counter", "gauge", "histogram", "gauge", "gauge"};
    int r = metrics_help(out, f->name, f->help, types[f->type]);

    for (const metrics_series *s = first; s && r == 0; s = s->next) {
        if (f->type == METRICS_HISTOGRAM) {
            unsigned long long cum = 0;
            double inf = INFINITY;
            for (int i = 0; i < f->nbuckets; i++) {
                cum += s->buckets[i];
                r |= dbuf_printf(out, "%s_bucket", f->name);
                r |= metrics_labels(out, f, s, &f->buckets[i]);
                r |= dbuf_printf(out, " %llu\n", cum);
            }
            r |= dbuf_printf(out, "%s_bucket", f->name);
            r |= metrics_labels(out, f, s, &inf);
            r |= dbuf_printf(out, " %llu\n%s_sum", s->count, f->name);
            r |= metrics_labels(out, f, s, NULL);
            r |= dbuf_append(out, " ", 1);
            r |= metrics_number(out, s->value);
            r |= dbuf_printf(out, "\n%s_count", f->name);
            r |= metrics_labels(out, f, s, NULL);
            r |= dbuf_printf(out, " %llu\n", s->count);
            continue;
        }
        double v = s->value;
        if (f->type == METRICS_INFLIGHT_SUM || f->type == METRICS_INFLIGHT_MAX) {
            v = 0;
            for (size_t i = 0; i < s->nstarts; i++) {
                double d = now > s->starts[i] ? now - s->starts[i] : 0;
                v = f->type == METRICS_INFLIGHT_SUM ? v + d : (d > v ? d : v);
            }
        }
        r |= dbuf_printf(out, "%s", f->name);
        r |= metrics_labels(out, f, s, NULL);
        r |= dbuf_append(out, " ", 1);
        r |= metrics_number(out, v);
        r |= dbuf_append(out, "\n", 1);
    }
    return r ? -1 : 0;
}

/* One unlabelled sample with its HELP and TYPE. */
static int metrics_process(dbuf *out, const char *name, const char *help, const char *type, double v)
{
    int r = metrics_help(out, name, help, type);

    r |= dbuf_printf(out, "%s ", name);
    r |= metrics_number(out, v);
    r |= dbuf_append(out, "\n", 1);
    return r ? -1 : 0;
}

/* process_*: as the Prometheus Go client's process collector names them. */
static int metrics_write_process(dbuf *out)
{
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long utime = 0, stime = 0, vsize = 0;
    unsigned long long start = 0;
    long rss = 0;
    double btime = 0;
    int r = 0, fds = 0;
    char line[256];
    dbuf stat = {0};
    struct rlimit rl;
    FILE *f;
    DIR *d;

    if (dbuf_read_file(&stat, "/proc/self/stat", 4096) == 0 && stat.data) {
        /* after the command's closing parenthesis: state is field 3 */
        const char *p = strrchr(stat.data, ')');
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu %lu %ld",
                        &utime, &stime, &start, &vsize, &rss) != 5)
            utime = stime = 0;
    }
    dbuf_free(&stat);
    if ((f = fopen("/proc/stat", "r")) != NULL) {
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "btime %lf", &btime) == 1)
                break;
        }
        fclose(f);
    }
    if ((d = opendir("/proc/self/fd")) != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL)
            fds += e->d_name[0] != '.';
        closedir(d);
        fds--; /* the directory's own descriptor */
    }
    r |= metrics_process(out, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                         "counter", (double)(utime + stime) / (double)ticks);
    r |= metrics_process(out, "process_max_fds", "Maximum number of open file descriptors.", "gauge",
                         getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (double)rl.rlim_cur : -1);
    r |= metrics_process(out, "process_open_fds", "Number of open file descriptors.", "gauge", fds);
    r |= metrics_process(out, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge",
                         (double)rss * (double)page);
    r |= metrics_process(out, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                         "gauge", btime + (double)start / (double)ticks);
    r |= metrics_process(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge",
                         (double)vsize);
    r |= metrics_process(out, "process_virtual_memory_max_bytes",
                         "Maximum amount of virtual memory available in bytes.", "gauge",
                         getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (double)rl.rlim_cur : -1);
    return r ? -1 : 0;
}

int metrics_write(metrics *m, double now, dbuf *out)
{
    int r = 0;

    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < METRICS_NFAMILIES && r == 0; i++) {
        if (m->series[i]) /* as the Go client: a family with no series is not written */
            r = metrics_write_family(out, &metrics_families[i], m->series[i], now);
    }
    for (metrics_custom *c = m->custom; c && r == 0; c = c->next) {
        if (c->state == METRICS_CUSTOM_SHOWN && c->series)
            r = metrics_write_family(out, &c->f, c->series, now);
    }
    pthread_mutex_unlock(&m->lock);
    return r ? -1 : metrics_write_process(out);
}

int metrics_names(dbuf *out)
{
    int r = 0;

    for (int i = 0; i < METRICS_NFAMILIES; i++) {
        const metrics_family *f = &metrics_families[i];
        r |= dbuf_printf(out, "%s ", f->name);
        for (int j = 0; j < metrics_nlabels(f); j++)
            r |= dbuf_printf(out, "%s%s", j ? "," : "", f->labels[j]);
        r |= dbuf_append(out, "\n", 1);
    }
    return r ? -1 : 0;
}
