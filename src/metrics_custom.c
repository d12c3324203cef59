/* metrics_custom.c - the families of scripts' own metrics (metrics.h,
 * metrics_custom_*): declared at run time, shown beside the runtime's. */
#include "metrics_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* [a-zA-Z_:][a-zA-Z0-9_:]* (a metric; labels: no colon) */
static int metrics_valid_name(const char *s, int colon)
{
    if (*s == '\0' || (*s >= '0' && *s <= '9'))
        return 0;
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              (colon && *s == ':')))
            return 0;
    }
    return 1;
}

metrics_custom *metrics_custom_new(metrics *m, const char *name, const char *help, const char *type,
                                   const char *const *labels, size_t nlabels, const double *buckets,
                                   size_t nbuckets, char *err, size_t errlen)
{
    metrics_custom *c;
    int t = strcmp(type, "counter") == 0     ? METRICS_COUNTER
            : strcmp(type, "gauge") == 0     ? METRICS_GAUGE
            : strcmp(type, "histogram") == 0 ? METRICS_HISTOGRAM
                                             : -1;

    if (t < 0) {
        snprintf(err, errlen, "no metric type %s (counter, gauge, histogram)", type);
        return NULL;
    }
    if (!metrics_valid_name(name, 1)) {
        snprintf(err, errlen, "%s is not a metric name", name);
        return NULL;
    }
    if (nlabels > METRICS_MAX_LABELS) {
        snprintf(err, errlen, "%s has %zu labels, more than %d", name, nlabels, METRICS_MAX_LABELS);
        return NULL;
    }
    for (size_t i = 0; i < nlabels; i++) {
        if (!metrics_valid_name(labels[i], 0) || strncmp(labels[i], "__", 2) == 0 ||
            (t == METRICS_HISTOGRAM && strcmp(labels[i], "le") == 0)) {
            snprintf(err, errlen, "%s is not a label name of %s", labels[i], name);
            return NULL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[i], labels[j]) == 0) {
                snprintf(err, errlen, "%s has label %s twice", name, labels[i]);
                return NULL;
            }
        }
    }
    if (t != METRICS_HISTOGRAM)
        nbuckets = 0;
    if (nbuckets > METRICS_MAX_BUCKETS) {
        snprintf(err, errlen, "%s has %zu buckets, more than %d", name, nbuckets, METRICS_MAX_BUCKETS);
        return NULL;
    }
    for (size_t i = 0; i < nbuckets; i++) {
        if (!isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
            snprintf(err, errlen, "the buckets of %s are not finite and increasing", name);
            return NULL;
        }
    }
    if ((c = calloc(1, sizeof *c)) == NULL)
        goto oom;
    c->f.type = t;
    c->f.custom = 1;
    c->f.nbuckets = (int)nbuckets;
    if ((c->f.name = c->strings[0] = strdup(name)) == NULL || (c->f.help = c->strings[1] = strdup(help)) == NULL)
        goto oom;
    for (size_t i = 0; i < nlabels; i++) {
        if ((c->f.labels[i] = c->strings[i + 2] = strdup(labels[i])) == NULL)
            goto oom;
    }
    if (nbuckets) {
        if ((c->buckets = malloc(nbuckets * sizeof *c->buckets)) == NULL)
            goto oom;
        memcpy(c->buckets, buckets, nbuckets * sizeof *c->buckets);
        c->f.buckets = c->buckets;
    }
    c->tail = &c->series;
    c->refs = 2; /* the registry's and the caller's */
    c->state = METRICS_CUSTOM_NEW;
    pthread_mutex_lock(&m->lock);
    *m->custom_tail = c;
    m->custom_tail = &c->next;
    pthread_mutex_unlock(&m->lock);
    return c;
oom:
    if (c) {
        c->refs = 1;
        metrics_custom_unref(c);
    }
    snprintf(err, errlen, "not enough memory");
    return NULL;
}

int metrics_custom_show(metrics *m, metrics_custom *c, char *err, size_t errlen)
{
    int r = 0;

    pthread_mutex_lock(&m->lock);
    if (c->state == METRICS_CUSTOM_GONE) {
        snprintf(err, errlen, "the metric %s was removed", c->f.name);
        r = -1;
    } else if (c->state == METRICS_CUSTOM_NEW) {
        if (metrics_family_index(c->f.name) >= 0)
            r = -1;
        for (metrics_custom *o = m->custom; o && r == 0; o = o->next) {
            if (o->state == METRICS_CUSTOM_SHOWN && strcmp(o->f.name, c->f.name) == 0)
                r = -1;
        }
        if (r)
            snprintf(err, errlen, "a metric named %s is registered already", c->f.name);
        else
            c->state = METRICS_CUSTOM_SHOWN;
    }
    pthread_mutex_unlock(&m->lock);
    return r;
}

void metrics_custom_remove(metrics *m, metrics_custom *c)
{
    pthread_mutex_lock(&m->lock);
    if (c->state != METRICS_CUSTOM_GONE) {
        metrics_custom **p = &m->custom;
        metrics_drop_from(m, &c->series, &c->tail, NULL);
        while (*p != c)
            p = &(*p)->next;
        *p = c->next;
        if (m->custom_tail == &c->next)
            m->custom_tail = p;
        c->next = NULL;
        c->state = METRICS_CUSTOM_GONE;
        metrics_custom_unref(c); /* the registry's */
    }
    pthread_mutex_unlock(&m->lock);
}

int metrics_custom_shown(metrics *m, metrics_custom *c)
{
    int r;

    pthread_mutex_lock(&m->lock);
    r = c->state == METRICS_CUSTOM_SHOWN;
    pthread_mutex_unlock(&m->lock);
    return r;
}

void metrics_custom_release(metrics *m, metrics_custom *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    metrics_custom_unref(c);
    pthread_mutex_unlock(&m->lock);
}

metrics_series *metrics_custom_get(metrics *m, metrics_custom *c, metrics_owner *owner, const char *const *values,
                                   size_t nvalues, char *err, size_t errlen)
{
    int n = metrics_nlabels(&c->f);
    metrics_series *s = NULL;

    if (nvalues != (size_t)n) {
        snprintf(err, errlen, "%s has %d label%s, not %zu", c->f.name, n, n == 1 ? "" : "s", nvalues);
        return NULL;
    }
    pthread_mutex_lock(&m->lock);
    if (c->state == METRICS_CUSTOM_GONE) {
        snprintf(err, errlen, "the metric %s was removed", c->f.name);
    } else {
        s = metrics_get_in(m, owner, &c->f, &c->series, &c->tail, values, n, err, errlen);
    }
    pthread_mutex_unlock(&m->lock);
    return s;
}

