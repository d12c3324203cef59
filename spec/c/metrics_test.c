/* metrics_test.c - src/metrics.c: numbers as Go's Prometheus client writes
 * them, label values escaped, histograms cumulative with +Inf, in-flight
 * gauges, refusals (unknown family, wrong label count, too many series),
 * and a registry updated by one thread while another writes it. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"
#include "tap.h"

static metrics *m;

/* Whether the registry's text holds line (a whole line). */
static int has(const char *line)
{
    dbuf b = {0};
    char want[512];
    int found;

    metrics_write(m, 100.0, &b);
    snprintf(want, sizeof want, "\n%s\n", line);
    found = b.data && strstr(b.data, want) != NULL;
    dbuf_free(&b);
    return found;
}

static metrics_series *get(const char *name, const char *a, const char *b, const char *c)
{
    const char *v[3] = {a, b, c};
    char err[128];
    size_t n = c ? 3 : b ? 2 : 1;

    metrics_series *s = metrics_get(m, NULL, name, v, n, err, sizeof err);

    if (s == NULL)
        printf("# %s: %s\n", name, err);
    return s;
}

static void *writer(void *arg)
{
    metrics_series *s = arg;

    for (int i = 0; i < 100000; i++)
        metrics_add(m, s, 1);
    return NULL;
}

int main(void)
{
    metrics_series *s, *h;
    char err[128];
    const char *one[1] = {"x"};

    setvbuf(stdout, NULL, _IOLBF, 0); /* every line out before a sanitizer stops it */
    m = metrics_new();
    TAP_OK(m != NULL, "a registry");
    s = get("controller_runtime_reconcile_total", "c", "success", NULL);
    metrics_add(m, s, 1);
    TAP_OK(has("controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 1"), "a counter");
    TAP_OK(get("controller_runtime_reconcile_total", "c", "success", NULL) == s, "the same labels, the same series");
    metrics_add(m, s, 1234566);
    TAP_OK(has("controller_runtime_reconcile_total{controller=\"c\",result=\"success\"} 1.234567e+06"),
           "a million as Go writes it: 1.234567e+06");
    s = get("controller_runtime_max_concurrent_reconciles", "c", NULL, NULL);
    metrics_set(m, s, 0.1);
    TAP_OK(has("controller_runtime_max_concurrent_reconciles{controller=\"c\"} 0.1"), "0.1, not 0.10000000000000001");
    metrics_set(m, s, 123456);
    TAP_OK(has("controller_runtime_max_concurrent_reconciles{controller=\"c\"} 123456"), "123456 in full");
    metrics_set(m, s, 0.00001);
    TAP_OK(has("controller_runtime_max_concurrent_reconciles{controller=\"c\"} 1e-05"), "1e-05");
    metrics_set(m, s, -1);
    TAP_OK(has("controller_runtime_max_concurrent_reconciles{controller=\"c\"} -1"), "-1");
    s = get("luaop_cache_objects", "v1/Secret", "a\"b\\c\nd", NULL);
    metrics_set(m, s, 2);
    TAP_OK(has("luaop_cache_objects{resource=\"v1/Secret\",namespace=\"a\\\"b\\\\c\\nd\"} 2"),
           "label values with \", \\ and a newline escaped");

    h = get("controller_runtime_reconcile_time_seconds", "c", NULL, NULL);
    metrics_observe(m, h, 0.005);  /* le 0.005: a bucket's bound is inclusive */
    metrics_observe(m, h, 0.3);
    metrics_observe(m, h, 100);    /* past the last bucket */
    TAP_OK(has("controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"0.005\"} 1"), "le is inclusive");
    TAP_OK(has("controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"0.25\"} 1") &&
               has("controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"0.3\"} 2"),
           "buckets are cumulative");
    TAP_OK(has("controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"60\"} 2") &&
               has("controller_runtime_reconcile_time_seconds_bucket{controller=\"c\",le=\"+Inf\"} 3"),
           "+Inf counts everything");
    TAP_OK(has("controller_runtime_reconcile_time_seconds_sum{controller=\"c\"} 100.305") &&
               has("controller_runtime_reconcile_time_seconds_count{controller=\"c\"} 3"),
           "sum and count");
    h = get("workqueue_queue_duration_seconds", "q", "q", NULL);
    metrics_observe(m, h, 1e-9);
    TAP_OK(has("workqueue_queue_duration_seconds_bucket{name=\"q\",controller=\"q\",le=\"1e-08\"} 1") &&
               has("workqueue_queue_duration_seconds_bucket{name=\"q\",controller=\"q\",le=\"1000\"} 1"),
           "client-go's exponential buckets, 1e-08 to 1000");

    s = get("workqueue_unfinished_work_seconds", "q", "q", NULL);
    h = get("workqueue_longest_running_processor_seconds", "q", "q", NULL);
    metrics_inflight_start(m, s, 90);
    metrics_inflight_start(m, s, 95);
    metrics_inflight_start(m, h, 90);
    metrics_inflight_start(m, h, 95);
    TAP_OK(has("workqueue_unfinished_work_seconds{name=\"q\",controller=\"q\"} 15") &&
               has("workqueue_longest_running_processor_seconds{name=\"q\",controller=\"q\"} 10"),
           "in flight at 100: 10 s and 5 s make 15 s of unfinished work, the longest 10 s");
    metrics_inflight_end(m, s, 90);
    metrics_inflight_end(m, h, 90);
    TAP_OK(has("workqueue_unfinished_work_seconds{name=\"q\",controller=\"q\"} 5") &&
               has("workqueue_longest_running_processor_seconds{name=\"q\",controller=\"q\"} 5"),
           "the work that ended no longer counts");

    TAP_OK(metrics_get(m, NULL, "no_such_metric", one, 1, err, sizeof err) == NULL && strstr(err, "no metric named"),
           "an unknown family is refused");
    TAP_OK(metrics_get(m, NULL, "controller_runtime_reconcile_total", one, 1, err, sizeof err) == NULL &&
               strstr(err, "has 2 labels, not 1"),
           "the wrong number of label values is refused");
    {
        pthread_t t[2];
        s = get("controller_runtime_reconcile_errors_total", "threads", NULL, NULL);
        pthread_create(&t[0], NULL, writer, s);
        pthread_create(&t[1], NULL, writer, s);
        for (int i = 0; i < 50; i++) {
            dbuf b = {0};
            metrics_write(m, 0, &b);
            dbuf_free(&b);
        }
        pthread_join(t[0], NULL);
        pthread_join(t[1], NULL);
        TAP_OK(metrics_value(m, s) == 200000, "two threads adding while a third writes lose nothing");
    }
    {
        /* owners: a script's account with a cap, a controller under it */
        char name[32];
        const char *v[1] = {name};
        metrics_owner *script = metrics_owner_new(m, NULL, "script a.lua", 50);
        metrics_owner *ctl = metrics_owner_new(m, script, "controller a", 0);
        metrics_owner *other = metrics_owner_new(m, NULL, "script b.lua", 0);
        size_t before = metrics_count(m);
        int made = 0;
        metrics_series *kept = NULL;
        for (int i = 0; i < 60; i++) {
            snprintf(name, sizeof name, "owned%d", i);
            s = metrics_get(m, ctl, "luaop_decode_errors_total", v, 1, err, sizeof err);
            made += s != NULL;
            if (i == 0)
                kept = s; /* a handle held past the drop */
            else
                metrics_release(m, s);
        }
        TAP_OK(made == 50 && strstr(err, "script a.lua holds 50 metric series, its cap") &&
                   metrics_owner_count(m, script) == 50 && metrics_owner_count(m, ctl) == 50,
               "an owner's series count against its cap and its parent's");
        snprintf(name, sizeof name, "owned0");
        s = metrics_get(m, other, "luaop_decode_errors_total", v, 1, err, sizeof err);
        TAP_OK(s == kept && metrics_owner_count(m, other) == 0, "a series that exists is shared, charged to its maker");
        metrics_release(m, s);
        metrics_owner_drop(m, script);
        TAP_OK(metrics_count(m) == before && metrics_owner_count(m, script) == 0 && !has("luaop_decode_errors_total{resource=\"owned7\"} 0"),
               "dropping an owner takes its series and its children's out of the registry");
        metrics_add(m, kept, 1); /* goes nowhere, and is no error */
        metrics_release(m, kept);
        TAP_OK(metrics_get(m, ctl, "luaop_decode_errors_total", v, 1, err, sizeof err) == NULL &&
                   strstr(err, "were dropped"),
               "no series is made for a dropped owner");
        metrics_owner_release(m, ctl);
        metrics_owner_release(m, script);
        /* owned series stop short of the runtime's reserve; the runtime's go on to the bound */
        made = 0;
        for (int i = 0; i < METRICS_MAX_SERIES; i++) {
            snprintf(name, sizeof name, "b%d", i);
            s = metrics_get(m, other, "luaop_decode_errors_total", v, 1, err, sizeof err);
            made += s != NULL;
            metrics_release(m, s);
        }
        TAP_OK(metrics_owner_count(m, other) == METRICS_MAX_SERIES - METRICS_RESERVE &&
                   strstr(err, "kept for the runtime's own"),
               "owned series leave the runtime its reserve");
        for (int i = 0; i < METRICS_MAX_SERIES + 10; i++) {
            snprintf(name, sizeof name, "r%d", i);
            s = metrics_get(m, NULL, "luaop_decode_errors_total", v, 1, err, sizeof err);
            metrics_release(m, s);
        }
        TAP_OK(metrics_count(m) == METRICS_MAX_SERIES && strstr(err, "too many metric series"),
               "the series are bounded in number");
        metrics_owner_drop(m, other);
        metrics_owner_release(m, other);
        TAP_OK(metrics_count(m) == METRICS_RESERVE, "an owner dropped gives its series back");
    }
    {
        /* families of a script's own (metrics_custom) */
        const char *labels[2] = {"namespace", "name"}, *vals[2] = {"ns", "a\"b"};
        const double buckets[2] = {0.5, 1}, bad[2] = {1, 1};
        size_t before = metrics_count(m);
        metrics_owner *o = metrics_owner_new(m, NULL, "script metrics a.lua", 2);
        metrics_custom *c = metrics_custom_new(m, "copier_copies_total", "Copies\\made\nso far", "counter", labels, 2,
                                               NULL, 0, err, sizeof err);
        metrics_custom *hc = metrics_custom_new(m, "copier_seconds", "t", "histogram", NULL, 0, buckets, 2, err, sizeof err);
        metrics_custom *dup = metrics_custom_new(m, "copier_copies_total", "x", "gauge", NULL, 0, NULL, 0, err, sizeof err);
        metrics_custom *rt = metrics_custom_new(m, "workqueue_depth", "x", "gauge", NULL, 0, NULL, 0, err, sizeof err);
        metrics_series *cs, *hs;

        TAP_OK(c && hc && dup && rt, "custom families are made");
        cs = metrics_custom_get(m, c, o, vals, 2, err, sizeof err);
        hs = metrics_custom_get(m, hc, o, NULL, 0, err, sizeof err);
        metrics_add(m, cs, 3);
        metrics_observe(m, hs, 0.7);
        TAP_OK(cs && hs && metrics_owner_count(m, o) == 2 && !has("copier_copies_total{namespace=\"ns\",name=\"a\\\"b\"} 3"),
               "a new family's series are made and charged, not shown");
        TAP_OK(metrics_custom_get(m, c, o, one, 1, err, sizeof err) == NULL && strstr(err, "has 2 labels, not 1"),
               "a custom family's series need its number of values");
        TAP_OK(metrics_custom_show(m, c, err, sizeof err) == 0 && metrics_custom_show(m, hc, err, sizeof err) == 0 &&
                   has("# HELP copier_copies_total Copies\\\\made\\nso far") &&
                   has("copier_copies_total{namespace=\"ns\",name=\"a\\\"b\"} 3") &&
                   has("copier_seconds_bucket{le=\"0.5\"} 0") && has("copier_seconds_bucket{le=\"1\"} 1") &&
                   has("copier_seconds_bucket{le=\"+Inf\"} 1") && has("copier_seconds_count 1"),
               "shown: its series in the text, help escaped, a histogram's buckets cumulative");
        TAP_OK(metrics_custom_show(m, dup, err, sizeof err) != 0 && strstr(err, "registered already") &&
                   metrics_custom_show(m, rt, err, sizeof err) != 0,
               "a name shown already, the runtime's or a custom one, is refused");
        TAP_OK(metrics_custom_get(m, c, o, (const char *[]){"x", "y"}, 2, err, sizeof err) == NULL &&
                   strstr(err, "its cap"),
               "a custom family's series count against their owner's cap");
        TAP_OK(metrics_custom_new(m, "9x", "h", "gauge", NULL, 0, NULL, 0, err, sizeof err) == NULL &&
                   metrics_custom_new(m, "x", "h", "histogram", (const char *[]){"le"}, 1, NULL, 0, err, sizeof err) == NULL &&
                   metrics_custom_new(m, "x", "h", "gauge", (const char *[]){"__a"}, 1, NULL, 0, err, sizeof err) == NULL &&
                   metrics_custom_new(m, "x", "h", "gauge", (const char *[]){"a", "a"}, 2, NULL, 0, err, sizeof err) == NULL &&
                   metrics_custom_new(m, "x", "h", "histogram", NULL, 0, bad, 2, err, sizeof err) == NULL &&
                   metrics_custom_new(m, "x", "h", "summary", NULL, 0, NULL, 0, err, sizeof err) == NULL,
               "names, label names, buckets and types the text format cannot take are refused");
        metrics_custom_remove(m, c);
        metrics_add(m, cs, 1); /* goes nowhere, and is no error */
        TAP_OK(!has("copier_copies_total{namespace=\"ns\",name=\"a\\\"b\"} 3") && metrics_owner_count(m, o) == 1 &&
                   metrics_custom_get(m, c, o, vals, 2, err, sizeof err) == NULL && strstr(err, "was removed") &&
                   metrics_custom_show(m, c, err, sizeof err) != 0,
               "a removed family leaves the text with its series, and makes no more");
        TAP_OK(metrics_custom_show(m, dup, err, sizeof err) == 0, "its name may be shown again");
        metrics_owner_drop(m, o);
        TAP_OK(!has("copier_seconds_count 1") && metrics_count(m) == before, "an owner dropped takes its custom series");
        metrics_release(m, cs);
        metrics_release(m, hs);
        metrics_custom_release(m, c);
        metrics_custom_release(m, hc);
        metrics_custom_release(m, rt);
        /* dup stays, with a series, for metrics_free */
        metrics_release(m, metrics_custom_get(m, dup, NULL, NULL, 0, err, sizeof err));
        metrics_custom_release(m, dup);
        metrics_owner_release(m, o);
    }
    {
        dbuf b = {0};
        metrics_names(&b);
        TAP_OK(b.data && strstr(b.data, "workqueue_depth name,controller,priority\n"), "names with their labels");
        dbuf_free(&b);
    }
    metrics_free(m);
    return tap_done();
}
