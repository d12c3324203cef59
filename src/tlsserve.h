/* tlsserve.h - an HTTPS server on a thread of its own: the webhook server
 * (lbind_webhook.c), and the listener a secure /metrics can be a second
 * one of.
 *
 * libevent's evhttp (HTTP/1.1; no HTTP/2) over OpenSSL bufferevents, built
 * by hack/libs.sh against luaop's own OpenSSL, TLS 1.2 and 1.3 only. Each
 * server runs an event_base on its own thread, as serve.c's probe server
 * runs libmicrohttpd's, so a handshake or a slow client never waits for
 * the loop and the loop never waits for a client.
 *
 * A request crosses to the loop through a queue under the server's mutex:
 * the server thread queues it and calls opts.notify (lbind_webhook.c: a
 * uv_async_send), the loop takes it with tlsserve_next, and its reply
 * crosses back through a second queue and an eventfd the server's
 * event_base watches. The loop never touches a libevent object, the server
 * thread never touches Lua.
 *
 * A request record (tlsserve_req) is counted: the loop's hold (from
 * tlsserve_next to tlsserve_release), the server's (while its connection
 * waits for the reply) and one while its reply is queued. The server's
 * evhttp_request is used on the server thread only, and only while its
 * connection lives: evhttp frees an incoming request with its connection
 * (evhttp_connection_free), so the connection's close callback marks the
 * record gone, under the mutex, before that. A reply to a gone request is
 * refused (0), never written. A client that closes while its request
 * waits is noticed at once (an EV_CLOSED event) and at the reply (poll
 * for POLLRDHUP on its socket, under the mutex, so the socket cannot be
 * closed meanwhile).
 *
 * The certificate and key are read from files, and read again when either
 * file changes (stat: inode, size, times; looked at every second, as
 * controller-runtime's certwatcher does): a pair that loads and matches
 * makes a new SSL_CTX for new connections (those in flight keep theirs:
 * each SSL holds its SSL_CTX), one that does not is logged and the old one
 * kept. Plain HTTP sent to the port is answered with Go's raw `400 Bad
 * Request` ("Client sent an HTTP request to an HTTPS server."). Limits: a
 * body (TLSSERVE_MAX_BODY, larger: 413), headers (TLSSERVE_MAX_HEADERS), a
 * connection's inactivity (timeout), a whole request from connection or
 * last reply to its end (deadline: a client trickling bytes), connections
 * at once (accepting stops at the limit, the rest wait in the backlog),
 * requests waiting for the loop and the bytes of their bodies (over
 * either: 503). */
#ifndef LUAOP_TLSSERVE_H
#define LUAOP_TLSSERVE_H

#include <stddef.h>

#define TLSSERVE_MAX_BODY (8u << 20) /* bytes, as controller-runtime's webhook server reads at most */
#define TLSSERVE_MAX_HEADERS 65536   /* bytes of a request's line and headers */
#define TLSSERVE_TIMEOUT 10          /* seconds a connection may do nothing (idle, a stalled read or write) */
#define TLSSERVE_DEADLINE 30         /* seconds from a connection (or its last reply) to a whole request */
#define TLSSERVE_MAX_CONNECTIONS 256
#define TLSSERVE_MAX_PENDING 256     /* requests queued for or held by the loop, unanswered */
#define TLSSERVE_MAX_HELD (64u << 20) /* bytes of their bodies (and of answered ones the loop still holds) */

struct dbuf;
typedef struct tlsserve tlsserve;
typedef struct tlsserve_req tlsserve_req;

typedef struct tlsserve_opts {
    const char *name;    /* in log lines: "webhook" */
    const char *address; /* ":9443", "127.0.0.1:0", "[::1]:9443" */
    const char *cert, *key; /* PEM files: the certificate (chain) and its key;
                             * NULL: a self-signed one for localhost, made
                             * at the start (secure metrics without files,
                             * as controller-runtime's) */
    size_t max_body;     /* 0: TLSSERVE_MAX_BODY */
    int timeout, deadline; /* seconds; 0: the defaults above */
    int max_connections, max_pending; /* 0: the defaults above */
    size_t max_held; /* 0: TLSSERVE_MAX_HELD */
    /* called on the server thread after a request is queued (the loop's
     * wake-up); must be thread-safe */
    void (*notify)(void *arg);
    void *notify_arg;
    /* the body of a reply given with tlsserve_reply_rendered, made on the
     * server thread (secure metrics: the registry's text, under its own
     * lock, never on the loop); 0, or -1 for a 500. NULL: none */
    int (*render)(void *arg, struct dbuf *out);
    void *render_arg;
} tlsserve_opts;

/* A request as the loop reads it (strings NUL-terminated, NULL when the
 * header is absent; body not NUL-terminated). */
typedef struct tlsserve_info {
    const char *method, *path, *query, *content_type, *authorization, *remote;
    const char *body;
    size_t body_len;
} tlsserve_info;

/* Listen, load the pair and start the thread. NULL with the reason in err
 * (an address in use or malformed, a certificate that does not load). */
tlsserve *tlsserve_start(const tlsserve_opts *o, char *err, size_t errlen);

/* The port it listens on (after binding port 0). */
int tlsserve_port(const tlsserve *s);

/* The serving certificate's serial number, lowercase hex, into buf. */
void tlsserve_serial(tlsserve *s, char *buf, size_t len);

/* The next request queued for the loop (the caller now holds it), or NULL. */
tlsserve_req *tlsserve_next(tlsserve *s);

const tlsserve_info *tlsserve_req_info(const tlsserve_req *r);

/* Answer r: 1 when handed to its connection, 0 when its client has gone
 * (or the server stopped, or r was answered before). */
int tlsserve_reply(tlsserve_req *r, int status, const char *content_type, const char *body, size_t len);

/* The same, with opts.render's body (0 when the server has no render). */
int tlsserve_reply_rendered(tlsserve_req *r, int status, const char *content_type);

/* Let go of r (the loop's hold); one never answered is answered 500. */
void tlsserve_release(tlsserve_req *r);

/* Stop the thread (joined), close every connection and the listener; the
 * requests the loop holds stay valid until released (their replies are
 * refused), then s is freed. */
void tlsserve_stop(tlsserve *s);

#endif
