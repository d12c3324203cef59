/* tlsserve_private.h - what tlsserve.c (the server's thread) and
 * tlsserve_queue.c (the records, and the loop's side) share, and no other
 * file (see tlsserve.h). */
#ifndef LUAOP_TLSSERVE_PRIVATE_H
#define LUAOP_TLSSERVE_PRIVATE_H

#include <pthread.h>

#include "dbuf.h"
#include "tlsserve.h"
#include "tlsserve_tls.h"

struct event;
struct event_base;
struct evhttp;
struct evhttp_connection;
struct evhttp_request;
struct evconnlistener;

/* What a request's record is in, under the server's mutex. */
enum { TLSSERVE_PENDING, TLSSERVE_REPLIED, TLSSERVE_GONE };

typedef struct tlsserve_conn tlsserve_conn;

struct tlsserve_req {
    tlsserve *s;
    tlsserve_info info;
    char *strings, *body;
    /* the server thread's: valid while its connection waits for the reply */
    struct evhttp_request *req;
    tlsserve_conn *conn;
    struct event *closed; /* EV_CLOSED on its socket while it waits */
    /* under s->mu */
    int fd; /* its connection's socket; -1 once gone */
    int state;
    int refs;
    int status;
    char *reply_type, *reply_body;
    size_t reply_len;
    int render; /* the body is opts.render's, made on the server thread */
    tlsserve_req *next; /* in s->in or s->out */
};

/* One connection, the server thread's: made with its SSL, freed with it
 * (ex_data), so it lives as long as anything libevent may still run for
 * the connection. */
struct tlsserve_conn {
    tlsserve *s;
    SSL *ssl;
    struct evhttp_connection *evcon; /* once a request came: the close callback is set */
    struct event *deadline;
    tlsserve_req *pending;
    tlsserve_conn *prev, *next;
};

struct tlsserve {
    pthread_mutex_t mu;
    /* under mu */
    int refs; /* the owner's, one per record */
    int stopping;
    tlsserve_req *in_head, *in_tail, *out_head, *out_tail;
    int pending; /* records the server holds (waiting for a reply) */
    size_t held; /* bytes of the bodies of every record not yet freed */
    char serial[96];
    /* fixed from the start */
    char *name;
    tlsserve_files files; /* its strings owned here */
    size_t max_body;
    int timeout, deadline, max_conns, max_pending;
    size_t max_held;
    void (*notify)(void *);
    void *notify_arg;
    int (*render)(void *, dbuf *);
    void *render_arg;
    int port;
    int wake_fd;
    pthread_t thread;
    int started;
    /* the server thread's */
    struct event_base *base;
    struct evhttp *http;
    struct evconnlistener *lev;
    struct event *wake_ev, *reload_ev, *accept_retry;
    SSL_CTX *ctx;
    int conns;
    int listening; /* accepting (not at the connection limit) */
    tlsserve_conn *conn_list;
};

/* Counts (tlsserve_queue.c). Drop one count of r, s->mu held (released on
 * return); the same taking the mutex; drop one of s, s->mu held
 * (released); s freed (its last count gone). */
void tlsserve_req_unref_locked(tlsserve_req *r);
void tlsserve_req_unref(tlsserve_req *r);
void tlsserve_unref(tlsserve *s);
void tlsserve_free(tlsserve *s);

#endif
