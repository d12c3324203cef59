/* metrics_private.h - what metrics.c and metrics_custom.c share: the
 * registry's structures (see metrics.h for what they promise). Every
 * function here but metrics_nlabels takes the registry's lock held. */
#ifndef LUAOP_METRICS_PRIVATE_H
#define LUAOP_METRICS_PRIVATE_H

#include <pthread.h>

#include "metrics.h"

/* the runtime's families (metrics.c's list) */
#define METRICS_NFAMILIES 37

enum { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM, METRICS_INFLIGHT_SUM, METRICS_INFLIGHT_MAX };

typedef struct metrics_family {
    const char *name, *help;
    int type;
    const char *labels[METRICS_MAX_LABELS + 1]; /* NULL-terminated */
    const double *buckets;
    int nbuckets;
    int custom; /* the family of a metrics_custom (its first member) */
} metrics_family;

struct metrics_owner {
    metrics_owner *parent;
    char *name;
    size_t n, cap; /* series held (descendants' included); at most cap (0: no cap of its own) */
    int refs;      /* handles, children and series referring to it */
    int dropped;
};

struct metrics_series {
    metrics_series *next; /* in its family, in order of first use, while linked */
    const metrics_family *family;
    metrics_owner *owner; /* NULL: the runtime's own */
    int refs;             /* handles, and the registry's while linked */
    int linked;
    char **values;
    double value;       /* counters, gauges; a histogram's sum */
    unsigned long long count; /* histograms */
    unsigned long long *buckets; /* histograms: per bucket, not cumulative */
    double *starts;     /* in-flight gauges: when each piece of work started */
    size_t nstarts, capstarts;
};

enum { METRICS_CUSTOM_NEW, METRICS_CUSTOM_SHOWN, METRICS_CUSTOM_GONE };

struct metrics_custom {
    metrics_family f;              /* first: a series' family is this */
    char *strings[METRICS_MAX_LABELS + 2]; /* name, help and labels, owned */
    double *buckets;
    metrics_series *series, **tail;
    metrics_custom *next; /* in the registry's list until gone */
    int refs;             /* handles, its series, and the registry's until gone */
    int state;
};

struct metrics {
    pthread_mutex_t lock;
    metrics_series *series[METRICS_NFAMILIES], **tail[METRICS_NFAMILIES];
    metrics_custom *custom, **custom_tail; /* new and shown, in order of making */
    size_t nseries; /* linked */
    size_t nowned;  /* linked, with an owner */
};

int metrics_nlabels(const metrics_family *f);
int metrics_family_index(const char *name);
void metrics_custom_unref(metrics_custom *c);
/* The series of one list that o (NULL: every one) holds leave it. */
void metrics_drop_from(metrics *m, metrics_series **head, metrics_series ***tail, const metrics_owner *o);
/* The series of family f, in the list at head, with these values: found
 * or made. */
metrics_series *metrics_get_in(metrics *m, metrics_owner *owner, const metrics_family *f, metrics_series **head,
                               metrics_series ***tail, const char *const *values, int n, char *err, size_t errlen);

#endif
