/* tlsserve.c - an HTTPS server on libevent's evhttp, on a thread of its
 * own (see tlsserve.h). */
#include "tlsserve_private.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "dbuf.h"
#include "log.h"
#include "serve.h"
#include "tlsserve_tls.h"


static int tlsserve_conn_idx = -1;
static pthread_once_t tlsserve_once = PTHREAD_ONCE_INIT;

static void tlsserve_log(const tlsserve *s, int level, const char *msg, const char *key, const char *value)
{
    log_field f[2] = {{.key = "server", .kind = LOG_STR, .v.str = {s->name, strlen(s->name)}},
                      {.key = key, .kind = LOG_STR, .v.str = {value ? value : "", value ? strlen(value) : 0}}};

    log_write(level, "tlsserve", msg, f, key ? 2 : 1);
}


/* On the server thread: r's connection is going (or answered): it no
 * longer holds r. */
static void tlsserve_req_detach(tlsserve_req *r, int gone)
{
    tlsserve *s = r->s;

    if (r->closed) {
        event_free(r->closed);
        r->closed = NULL;
    }
    if (r->conn)
        r->conn->pending = NULL;
    r->conn = NULL;
    r->req = NULL;
    pthread_mutex_lock(&s->mu);
    r->fd = -1;
    if (gone)
        r->state = TLSSERVE_GONE;
    s->pending--;
    tlsserve_req_unref_locked(r);
}

/* Every second: when the certificate or key file changed, load the pair
 * again; new connections get it, a pair that does not load is logged and
 * the old one kept (and tried again at the next change). */
static void tlsserve_reload(evutil_socket_t fd, short what, void *arg)
{
    tlsserve *s = arg;
    char serial[sizeof s->serial], err[512];
    SSL_CTX *ctx;

    (void)fd;
    (void)what;
    if (!tlsserve_tls_changed(&s->files))
        return;
    ctx = tlsserve_tls_load(s->files.cert, s->files.key, serial, sizeof serial, err, sizeof err);
    if (ctx == NULL) {
        tlsserve_log(s, LOG_ERROR, "the certificate files changed but do not load: serving the old pair", "error",
                     err);
        return;
    }
    SSL_CTX_free(s->ctx); /* connections in flight hold their own reference */
    s->ctx = ctx;
    pthread_mutex_lock(&s->mu);
    memcpy(s->serial, serial, sizeof serial);
    pthread_mutex_unlock(&s->mu);
    tlsserve_log(s, LOG_INFO, "serving a new certificate", "serial", serial);
}

/* ---- connections ------------------------------------------------------------ */

static void tlsserve_accepting(tlsserve *s)
{
    int want = s->conns < s->max_conns && s->lev != NULL;

    if (s->lev == NULL || want == s->listening)
        return;
    if (want)
        evconnlistener_enable(s->lev);
    else
        evconnlistener_disable(s->lev);
    s->listening = want;
}

/* The connection's SSL is freed: so is the connection. */
static void tlsserve_conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    tlsserve_conn *c = ptr;

    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    if (c == NULL)
        return;
    if (c->pending)
        tlsserve_req_detach(c->pending, 1);
    if (c->deadline)
        event_free(c->deadline);
    if (c->prev)
        c->prev->next = c->next;
    else
        c->s->conn_list = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->s->conns--;
    tlsserve_accepting(c->s);
    free(c);
}

static void tlsserve_init_once(void)
{
    tlsserve_conn_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, tlsserve_conn_free);
}

/* A connection's deadline: it has not sent a whole request in time (a
 * handshake, headers or body trickling in). Its socket is shut down, so
 * that evhttp, reading end of file, frees it in its own time. */
static void tlsserve_deadline(evutil_socket_t fd, short what, void *arg)
{
    tlsserve_conn *c = arg;
    int sock = SSL_get_fd(c->ssl);

    (void)fd;
    (void)what;
    if (sock >= 0 && c->pending == NULL)
        shutdown(sock, SHUT_RDWR);
}

static void tlsserve_arm_deadline(tlsserve_conn *c)
{
    struct timeval tv = {c->s->deadline, 0};

    if (c->deadline)
        event_add(c->deadline, &tv);
}

/* evhttp's accept: a bufferevent doing TLS with the current context. */
static struct bufferevent *tlsserve_bev(struct event_base *base, void *arg)
{
    tlsserve *s = arg;
    tlsserve_conn *c = calloc(1, sizeof *c);
    struct bufferevent *bev;
    SSL *ssl = SSL_new(s->ctx);

    if (c == NULL || ssl == NULL || SSL_set_ex_data(ssl, tlsserve_conn_idx, c) != 1) {
        /* out of memory: evhttp goes on with a plain bufferevent (it
         * makes one for NULL), whose request tlsserve_request refuses */
        free(c);
        SSL_free(ssl);
        return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    c->s = s;
    c->ssl = ssl;
    c->deadline = evtimer_new(base, tlsserve_deadline, c);
    c->next = s->conn_list;
    if (c->next)
        c->next->prev = c;
    s->conn_list = c;
    s->conns++;
    tlsserve_accepting(s);
    tlsserve_arm_deadline(c);
    bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                         BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (bev == NULL) {
        SSL_free(ssl); /* and c with it */
        return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    return bev;
}

/* evhttp frees the connection (and any request on it): the request
 * waiting for a reply is gone. */
static void tlsserve_closed_conn(struct evhttp_connection *evcon, void *arg)
{
    tlsserve_conn *c = arg;

    (void)evcon;
    c->evcon = NULL;
    if (c->pending)
        tlsserve_req_detach(c->pending, 1);
    if (c->deadline)
        event_del(c->deadline);
}

/* The client closed while its request waits for the loop: its connection
 * is freed now (and the request marked gone with it). */
static void tlsserve_client_closed(evutil_socket_t fd, short what, void *arg)
{
    tlsserve_req *r = arg;
    tlsserve_conn *c = r->conn;

    (void)fd;
    (void)what;
    if (c && c->evcon)
        evhttp_connection_free(c->evcon);
}

static const char *tlsserve_method(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    }
    return "GET";
}

/* The record of a request read whole: its strings in one allocation. */
static tlsserve_req *tlsserve_record(tlsserve *s, struct evhttp_request *req, struct evhttp_connection *evcon)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    const char *src[6];
    char remote[96];
    char *addr = NULL;
    ev_uint16_t port = 0;
    size_t total = 0, len = evbuffer_get_length(in);
    tlsserve_req *r = calloc(1, sizeof *r);

    if (r == NULL)
        return NULL;
    evhttp_connection_get_peer(evcon, &addr, &port);
    snprintf(remote, sizeof remote, strchr(addr ? addr : "", ':') ? "[%s]:%u" : "%s:%u", addr ? addr : "",
             (unsigned)port);
    src[0] = tlsserve_method(evhttp_request_get_command(req));
    src[1] = uri ? evhttp_uri_get_path(uri) : NULL;
    src[2] = uri ? evhttp_uri_get_query(uri) : NULL;
    src[3] = evhttp_find_header(h, "Content-Type");
    src[4] = evhttp_find_header(h, "Authorization");
    src[5] = remote;
    if (src[1] == NULL || src[1][0] == '\0')
        src[1] = "/";
    for (int i = 0; i < 6; i++)
        total += src[i] ? strlen(src[i]) + 1 : 0;
    r->strings = malloc(total);
    r->body = malloc(len ? len : 1);
    if (r->strings == NULL || r->body == NULL || evbuffer_remove(in, r->body, len) != (ev_ssize_t)len) {
        free(r->strings);
        free(r->body);
        free(r);
        return NULL;
    }
    {
        const char **dst[6] = {&r->info.method,       &r->info.path,          &r->info.query,
                               &r->info.content_type, &r->info.authorization, &r->info.remote};
        char *p = r->strings;
        for (int i = 0; i < 6; i++) {
            if (src[i] == NULL)
                continue;
            size_t n = strlen(src[i]) + 1;
            memcpy(p, src[i], n);
            *dst[i] = p;
            p += n;
        }
    }
    r->info.body = r->body;
    r->info.body_len = len;
    r->s = s;
    return r;
}

/* A whole request: to the loop. */
static void tlsserve_request(struct evhttp_request *req, void *arg)
{
    tlsserve *s = arg;
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    SSL *ssl = bufferevent_openssl_get_ssl(evhttp_connection_get_bufferevent(evcon));
    tlsserve_conn *c = ssl ? SSL_get_ex_data(ssl, tlsserve_conn_idx) : NULL;
    tlsserve_req *r;
    int full;

    if (c == NULL) {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
        return;
    }
    if (c->evcon == NULL) {
        c->evcon = evcon;
        evhttp_connection_set_closecb(evcon, tlsserve_closed_conn, c);
    }
    event_del(c->deadline);
    pthread_mutex_lock(&s->mu);
    full = s->pending >= s->max_pending || s->stopping ||
           s->held + evbuffer_get_length(evhttp_request_get_input_buffer(req)) > s->max_held;
    pthread_mutex_unlock(&s->mu);
    r = full ? NULL : tlsserve_record(s, req, evcon);
    if (r == NULL) {
        tlsserve_arm_deadline(c);
        evhttp_send_error(req, HTTP_SERVUNAVAIL, full ? "Too many requests waiting" : "Out of memory");
        return;
    }
    r->req = req;
    r->conn = c;
    r->fd = SSL_get_fd(ssl);
    r->closed = event_new(s->base, r->fd, EV_CLOSED, tlsserve_client_closed, r);
    if (r->closed)
        event_add(r->closed, NULL);
    c->pending = r;
    pthread_mutex_lock(&s->mu);
    r->refs = 2; /* the server's, the queue's (then the loop's) */
    s->refs++;
    s->pending++;
    s->held += r->info.body_len;
    if (s->in_tail)
        s->in_tail->next = r;
    else
        s->in_head = r;
    s->in_tail = r;
    pthread_mutex_unlock(&s->mu);
    if (s->notify)
        s->notify(s->notify_arg);
}

/* Replies from the loop (and the order to stop). */
static void tlsserve_wake(evutil_socket_t fd, short what, void *arg)
{
    tlsserve *s = arg;
    tlsserve_req *r, *next;
    uint64_t n;
    int stopping, sent = 0;

    (void)what;
    if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        return;
    pthread_mutex_lock(&s->mu);
    r = s->out_head;
    s->out_head = s->out_tail = NULL;
    stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    for (; r; r = next) {
        next = r->next;
        r->next = NULL;
        if (r->req) {
            struct evhttp_request *req = r->req;
            struct evbuffer *body = evbuffer_new();
            struct evkeyvalq *h = evhttp_request_get_output_headers(req);
            tlsserve_conn *c = r->conn;
            /* the server's count: r stays alive on the queue's; the
             * connection's next request is timed from now */
            tlsserve_req_detach(r, 0);
            tlsserve_arm_deadline(c);
            dbuf made = {0};
            const char *data = r->reply_body ? r->reply_body : "";
            size_t len = r->reply_len;
            int bad = body == NULL;
            if (!bad && r->render) { /* the body made here, now */
                bad = s->render(s->render_arg, &made) != 0;
                data = made.data ? made.data : "";
                len = made.len;
            }
            if (bad || evbuffer_add(body, data, len) != 0) {
                evhttp_send_error(req, HTTP_INTERNAL, NULL);
            } else {
                evhttp_add_header(h, "Content-Type", r->reply_type ? r->reply_type : "text/plain; charset=utf-8");
                evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
                evhttp_send_reply(req, r->status, NULL, body);
            }
            dbuf_free(&made);
            sent = 1;
            if (body)
                evbuffer_free(body);
        }
        tlsserve_req_unref(r); /* the queue's count */
    }
    if (stopping) {
        /* replies given before the server was closed (now or before, on a
         * connection still open) get a moment to be written; nothing more
         * is accepted meanwhile */
        struct timeval linger = {0, 200000};
        if (s->lev)
            evconnlistener_disable(s->lev);
        if (sent || s->conn_list)
            event_base_loopexit(s->base, &linger);
        else
            event_base_loopbreak(s->base);
    }
}

/* accept() failed (out of descriptors): pause accepting for a second,
 * rather than spin on a listening socket that stays readable */
static void tlsserve_accept_again(evutil_socket_t fd, short what, void *arg)
{
    tlsserve *s = arg;

    (void)fd;
    (void)what;
    s->listening = 0;
    tlsserve_accepting(s);
}

static void tlsserve_accept_error(struct evconnlistener *lev, void *arg)
{
    tlsserve *s = arg;
    struct timeval tv = {1, 0};
    char e[128];

    snprintf(e, sizeof e, "%s", strerror(errno));
    evconnlistener_disable(lev);
    s->listening = 1; /* tlsserve_accept_again enables it */
    tlsserve_log(s, LOG_ERROR, "cannot accept a connection: trying again in a second", "error", e);
    event_add(s->accept_retry, &tv);
}

static void *tlsserve_main(void *arg)
{
    tlsserve *s = arg;

    event_base_dispatch(s->base);
    /* stopping: every connection closed (their requests marked gone),
     * then the rest */
    for (tlsserve_conn *c = s->conn_list; c; c = c->next) {
        if (c->deadline)
            event_free(c->deadline);
        c->deadline = NULL;
    }
    s->lev = NULL; /* evhttp_free frees it */
    evhttp_free(s->http);
    s->http = NULL;
    event_free(s->wake_ev);
    event_free(s->reload_ev);
    event_free(s->accept_retry);
    event_base_free(s->base);
    s->base = NULL;
    SSL_CTX_free(s->ctx);
    s->ctx = NULL;
    OPENSSL_thread_stop();
    return NULL;
}

/* ---- the loop's side ---------------------------------------------------------- */

tlsserve *tlsserve_start(const tlsserve_opts *o, char *err, size_t errlen)
{
    tlsserve *s = calloc(1, sizeof *s);
    struct event_config *cfg = NULL;
    struct timeval second = {1, 0};
    sigset_t all, old;
    int fd = -1;

    pthread_once(&tlsserve_once, tlsserve_init_once);
    if (s == NULL || tlsserve_conn_idx < 0) {
        free(s);
        snprintf(err, errlen, "not enough memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->refs = 1;
    s->wake_fd = -1;
    s->name = strdup(o->name ? o->name : "https");
    /* no files: a self-signed certificate, made once */
    if (o->cert && o->cert[0] && o->key && o->key[0]) {
        s->files.cert = strdup(o->cert);
        s->files.key = strdup(o->key);
    }
    s->max_body = o->max_body ? o->max_body : TLSSERVE_MAX_BODY;
    s->timeout = o->timeout > 0 ? o->timeout : TLSSERVE_TIMEOUT;
    s->deadline = o->deadline > 0 ? o->deadline : TLSSERVE_DEADLINE;
    s->max_conns = o->max_connections > 0 ? o->max_connections : TLSSERVE_MAX_CONNECTIONS;
    s->max_pending = o->max_pending > 0 ? o->max_pending : TLSSERVE_MAX_PENDING;
    s->max_held = o->max_held > 0 ? o->max_held : TLSSERVE_MAX_HELD;
    s->notify = o->notify;
    s->notify_arg = o->notify_arg;
    s->render = o->render;
    s->render_arg = o->render_arg;
    if (s->name == NULL || (o->cert && o->cert[0] && o->key && o->key[0] && (!s->files.cert || !s->files.key))) {
        snprintf(err, errlen, "not enough memory");
        goto fail;
    }
    if (s->files.cert) {
        tlsserve_tls_changed(&s->files); /* (their state as loaded now) */
        s->ctx = tlsserve_tls_load(s->files.cert, s->files.key, s->serial, sizeof s->serial, err, errlen);
    } else {
        s->ctx = tlsserve_tls_self_signed("localhost", s->serial, sizeof s->serial, err, errlen);
    }
    if (s->ctx == NULL)
        goto fail;
    fd = serve_listen(o->address ? o->address : "", &s->port, err, errlen);
    if (fd < 0)
        goto fail;
    /* No Nagle: a reply leaves in two TLS records (headers, body), and the
     * second would wait for the client's delayed ACK, 40 ms a request (Go's
     * servers set it too). Accepted sockets inherit it from the listener. */
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) != 0) {
        snprintf(err, errlen, "cannot start the HTTPS server on %s: TCP_NODELAY: %s", o->address, strerror(errno));
        goto fail;
    }
    s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cfg = event_config_new();
    if (s->wake_fd < 0 || cfg == NULL || event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK) != 0 ||
        (s->base = event_base_new_with_config(cfg)) == NULL || (s->http = evhttp_new(s->base)) == NULL ||
        (s->lev = evconnlistener_new(s->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1,
                                     fd)) == NULL) {
        snprintf(err, errlen, "cannot start the HTTPS server on %s: not enough memory", o->address);
        goto fail;
    }
    fd = -1; /* the listener's */
    event_config_free(cfg);
    cfg = NULL;
    if (evhttp_bind_listener(s->http, s->lev) == NULL) {
        snprintf(err, errlen, "cannot start the HTTPS server on %s", o->address);
        goto fail;
    }
    s->listening = 1;
    evconnlistener_set_error_cb(s->lev, tlsserve_accept_error);
    evhttp_set_bevcb(s->http, tlsserve_bev, s);
    evhttp_set_gencb(s->http, tlsserve_request, s);
    evhttp_set_max_body_size(s->http, (ev_ssize_t)s->max_body);
    evhttp_set_max_headers_size(s->http, TLSSERVE_MAX_HEADERS);
    evhttp_set_timeout(s->http, s->timeout);
    /* a body over the limit is read and dropped before the 413, so the
     * client reads the answer rather than a reset */
    evhttp_set_flags(s->http, EVHTTP_SERVER_LINGERING_CLOSE);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS);
    evhttp_set_default_content_type(s->http, "text/plain; charset=utf-8");
    s->wake_ev = event_new(s->base, s->wake_fd, EV_READ | EV_PERSIST, tlsserve_wake, s);
    s->reload_ev = event_new(s->base, -1, EV_PERSIST, tlsserve_reload, s);
    s->accept_retry = evtimer_new(s->base, tlsserve_accept_again, s);
    if (s->wake_ev == NULL || s->reload_ev == NULL || s->accept_retry == NULL || event_add(s->wake_ev, NULL) != 0 ||
        (s->files.cert && event_add(s->reload_ev, &second) != 0)) {
        snprintf(err, errlen, "cannot start the HTTPS server on %s: not enough memory", o->address);
        goto fail;
    }
    /* no signal is taken on the server thread (a write to a closed socket
     * there is EPIPE, not the process's SIGPIPE) */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&s->thread, NULL, tlsserve_main, s) != 0) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        snprintf(err, errlen, "cannot start the HTTPS server's thread");
        goto fail;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    s->started = 1;
    return s;
fail:
    if (cfg)
        event_config_free(cfg);
    if (fd >= 0)
        close(fd);
    if (s->wake_ev)
        event_free(s->wake_ev);
    if (s->reload_ev)
        event_free(s->reload_ev);
    if (s->accept_retry)
        event_free(s->accept_retry);
    if (s->http)
        evhttp_free(s->http); /* and the listener bound to it */
    else if (s->lev)
        evconnlistener_free(s->lev);
    if (s->base)
        event_base_free(s->base);
    SSL_CTX_free(s->ctx);
    tlsserve_free(s);
    return NULL;
}

